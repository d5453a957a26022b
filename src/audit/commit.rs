//! Group commit: the records of every worker thread go into one pending buffer, one
//! `write(2)` hands everything pending at that moment to the operating system, and each
//! request waits only until the write holding its record has completed.
//!
//! Who writes: the first request to find nobody writing takes the write turn
//! ([`State::busy`]), yields once to its event loop so that the records of the requests
//! running at that moment (on its own thread and on the others) join, then writes them
//! all. Requests that find the turn taken wait for their record's write. Nobody is woken
//! per record: on a worker's single-threaded runtime, the leader is just one more task, and
//! the write is one system call per batch. With `Durability::Synced` the audit thread
//! syncs the written batches (one `fdatasync` for everything written meanwhile) and
//! releases their requests; with `Durability::Buffered` requests do not wait and the audit
//! thread writes every 10 ms (see `writer`).
//!
//! Invariant: `pending` holds exactly the records `written + 1 ..= appended`, and only the
//! holder of the turn writes, taking all of it: the file receives records in the order
//! they were appended.

use std::collections::VecDeque;
use std::future::Future;
use std::io;
use std::mem;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant, SystemTime};

use super::config::{AuditError, Durability, OnError};
use super::out::Out;
use super::record::{LogEvent, LogRecord};
use super::timestamp::rfc3339;

/// The log's shared core: the pending records, the write turn, the waiting requests and
/// the counters.
pub(super) struct Core {
    state: Mutex<State>,
    /// Wakes the audit thread, which waits on `state` (see `writer`).
    pub(super) thread: Condvar,
    /// Where records go; used only by the holder of the write turn.
    out: Mutex<Out>,
    pub(super) durability: Durability,
    on_error: OnError,
    /// The audit thread follows what is written to the file (hashing it, rotating it):
    /// a write wakes it when it is idle.
    pub(super) follow_file: bool,
    /// `Buffered`: records pending before requests wait for room.
    queue: u64,
    pub(super) healthy: AtomicBool,
    pub(super) last_error: Mutex<String>,
    pub(super) written: AtomicU64,
    pub(super) lost: AtomicU64,
    /// Batches written (`write(2)` calls, but for short writes) and syncs made.
    pub(super) writes: AtomicU64,
    pub(super) syncs: AtomicU64,
}

/// What the lock of [`Core`] guards.
pub(super) struct State {
    /// Records appended and not yet written, as their lines.
    pending: Vec<u8>,
    pending_records: u64,
    /// When the oldest pending record was appended.
    pub(super) pending_since: Option<Instant>,
    /// Records are numbered from 1 in the order they were appended.
    appended: u64,
    /// Records up to here have been written (or failed to be).
    pub(super) written: u64,
    /// `Synced`: records up to here are on disk.
    pub(super) synced: u64,
    /// Bytes in the active file: what writes put there (the audit thread reads them back
    /// to hash them), and of them, those known to be on disk (`Synced`).
    end: u64,
    synced_end: u64,
    /// Someone holds the write turn.
    busy: bool,
    /// The audit thread waits for the turn (rotation, flush, shutdown): no request
    /// takes it meanwhile.
    want_busy: bool,
    waiters: Vec<Waiter>,
    next_waiter: u64,
    /// `OnError::Refuse`: ranges of records whose write failed, merged, newest last.
    failed: VecDeque<(u64, u64)>,
    /// Records lost or a line left unfinished: said in the log before the next records.
    trouble: Option<Trouble>,
    /// No more records are taken.
    pub(super) closed: bool,
    /// The audit thread waits without a deadline: work for it must wake it.
    pub(super) thread_idle: bool,
    spare: Vec<Vec<u8>>,
    /// Requests for a flush and sync (answered by the audit thread).
    pub(super) flushes: Vec<tokio::sync::oneshot::Sender<()>>,
    /// Asked to close: the audit thread writes everything and answers.
    pub(super) shutdown: Option<tokio::sync::oneshot::Sender<()>>,
}

impl State {
    /// Whether the audit thread should write what is pending now: it has waited
    /// `linger`, or (buffered) the queue is filling up.
    pub(super) fn pending_due(&self, now: Instant, linger: Duration, threshold: u64, d: Durability) -> bool {
        if self.pending.is_empty() {
            return false;
        }
        self.pending_since.is_some_and(|t| now >= t + linger)
            || (d == Durability::Buffered && self.pending_records >= threshold)
    }
}

/// A request waiting for its record's write.
struct Waiter {
    seq: u64,
    id: u64,
    waker: Waker,
}

/// Where the writes stand: the last record written and the end of the file after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) seq: u64,
    end: u64,
}

/// Trouble the next write must report first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Trouble {
    /// The file ends partway through a line of this many bytes.
    pub(super) fragment: Option<u64>,
    /// Records that did not reach the file.
    pub(super) lost: u64,
    pub(super) error: String,
    pub(super) since: SystemTime,
}

/// A record appended: its number, whether the caller must wait for it, and whether it
/// leads the next write.
pub(super) struct Ticket {
    pub(super) seq: u64,
    pub(super) wait: bool,
    lead: bool,
}

/// Ranges of failed records kept for requests still to learn of them.
const FAILED_RANGES: usize = 256;
/// Buffers kept for reuse, and the largest kept.
const SPARE_BUFFERS: usize = 4;
const SPARE_MAX_BYTES: usize = 1 << 20;

impl Core {
    pub(super) fn new(out: Out, durability: Durability, on_error: OnError, queue: usize) -> Core {
        Core {
            state: Mutex::new(State {
                pending: Vec::with_capacity(64 * 1024),
                pending_records: 0,
                pending_since: None,
                appended: 0,
                written: 0,
                synced: 0,
                end: 0,
                synced_end: 0,
                busy: false,
                want_busy: false,
                waiters: Vec::new(),
                next_waiter: 0,
                failed: VecDeque::new(),
                trouble: None,
                closed: false,
                thread_idle: false,
                spare: Vec::new(),
                flushes: Vec::new(),
                shutdown: None,
            }),
            thread: Condvar::new(),
            out: Mutex::new(out),
            durability,
            on_error,
            follow_file: false,
            queue: queue.max(1) as u64,
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(String::new()),
            written: AtomicU64::new(0),
            lost: AtomicU64::new(0),
            writes: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
        }
    }

    /// `Buffered`: pending records that make the audit thread write at once.
    pub(super) fn buffered_threshold(&self) -> u64 {
        (self.queue * 3 / 4).max(1)
    }

    pub(super) fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records up to here may be answered.
    fn durable(&self, st: &State) -> u64 {
        match self.durability {
            Durability::Synced => st.synced,
            Durability::Written | Durability::Buffered => st.written,
        }
    }

    /// Appends a record's line. With `wait`, the caller then awaits [`Core::wait`] with
    /// the ticket (a request); without, the record is written with the next batch (fetch
    /// records, the log's own records).
    pub(super) fn append(&self, line: &[u8], wait: bool) -> Result<Ticket, AuditError> {
        let mut st = self.lock();
        if st.closed {
            return Err(AuditError::Closed);
        }
        if st.pending.is_empty() {
            st.pending_since = Some(Instant::now());
        }
        st.pending.extend_from_slice(line);
        st.pending_records += 1;
        st.appended += 1;
        let seq = st.appended;
        let wake_thread;
        let (wait, lead) = match self.durability {
            Durability::Written | Durability::Synced => {
                let lead = wait && !st.busy && !st.want_busy;
                st.busy |= lead;
                // A record nobody waits for is written by the next leader, or by the
                // audit thread after 10 ms.
                wake_thread = !wait && st.thread_idle;
                (wait, lead)
            }
            Durability::Buffered => {
                // The audit thread writes; wake it early when the queue fills up (once,
                // at three quarters) so that requests do not wait for room.
                wake_thread = st.thread_idle || st.pending_records == self.buffered_threshold();
                (wait && seq > st.written.saturating_add(self.queue), false)
            }
        };
        if wake_thread {
            st.thread_idle = false;
            drop(st);
            self.thread.notify_one();
        }
        Ok(Ticket { seq, wait, lead })
    }

    /// Waits until the record of `ticket` may be answered: written (or synced), or, when
    /// buffered, until the queue has room. `Err` when its write failed and the log
    /// refuses requests then.
    ///
    /// A leader's write turn is held from this call on (not from the first poll): the
    /// returned future given up before it is polled hands the turn on like one given up
    /// while it waits.
    pub(super) fn wait(&self, ticket: Ticket) -> impl Future<Output = Result<(), AuditError>> + use<'_> {
        let turn = ticket.lead.then(|| Turn { core: self, held: true });
        async move {
            if !ticket.wait {
                return Ok(());
            }
            if let Some(turn) = turn {
                // Let the requests of this moment add their records: on a worker's
                // runtime, every task already woken runs before this one is polled again.
                tokio::task::yield_now().await;
                turn.write();
            }
            Wait { core: self, seq: ticket.seq, id: None }.await
        }
    }

    /// The outcome for record `seq`, once durable.
    fn outcome(&self, st: &State, seq: u64) -> Result<(), AuditError> {
        if self.on_error == OnError::Refuse && st.failed.iter().any(|&(a, b)| a <= seq && seq <= b) {
            let why = self.last_error.lock().map(|e| e.clone()).unwrap_or_default();
            return Err(AuditError::Broken(why));
        }
        Ok(())
    }

    /// Writes everything pending. The caller holds the write turn, and keeps it.
    /// Returns the wakers of the requests now answerable (to be woken by the caller
    /// after releasing the turn).
    pub(super) fn write_pending(&self) -> Vec<Waker> {
        self.write_pending_between(&[], None)
    }

    /// [`Core::write_pending`], with the log's own lines `before` and `after` the records
    /// in the same write (rotation: the `rotate` record last in the old file, the
    /// `file-start` record first in the new one, whatever requests append meanwhile).
    /// `after` is made from the number of records written with it.
    pub(super) fn write_pending_between(
        &self,
        before: &[u8],
        after: Option<&dyn Fn(u64) -> Vec<u8>>,
    ) -> Vec<Waker> {
        let (bytes, upto, batch_records, trouble, after) = {
            let mut st = self.lock();
            if st.pending.is_empty() && st.trouble.is_none() && before.is_empty() && after.is_none() {
                return Vec::new();
            }
            let after = after.map_or_else(Vec::new, |f| f(st.pending_records));
            let spare = st.spare.pop().unwrap_or_else(|| Vec::with_capacity(64 * 1024));
            let bytes = mem::replace(&mut st.pending, spare);
            let records = mem::take(&mut st.pending_records);
            st.pending_since = None;
            (bytes, st.appended, records, st.trouble.take(), after)
        };
        // Trouble first: end an unfinished line and say what was lost.
        let (bytes, prefix_len) = if trouble.is_none() && before.is_empty() && after.is_empty() {
            (bytes, 0)
        } else {
            let mut joined = Vec::with_capacity(bytes.len() + before.len() + after.len() + 256);
            if let Some(t) = &trouble {
                if t.fragment.is_some() {
                    joined.push(b'\n');
                }
                joined.extend_from_slice(&trouble_record(t).line());
            }
            joined.extend_from_slice(before);
            let prefix_len = joined.len();
            joined.extend_from_slice(&bytes);
            joined.extend_from_slice(&after);
            (joined, prefix_len)
        };
        let (n, error) = self.out.lock().unwrap_or_else(|p| p.into_inner()).write(&bytes);
        self.writes.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock();
        let from = st.written + 1;
        st.written = upto;
        let outcome = account(&bytes, (prefix_len, batch_records), n, error.as_ref(), trouble.as_ref());
        if let Some(e) = &error {
            let lost = batch_records - outcome.records_written.min(batch_records);
            self.fail(e, lost);
            if lost > 0 && self.on_error == OnError::Refuse {
                let first = from + (batch_records - lost);
                match st.failed.back_mut() {
                    Some((_, b)) if *b + 1 == first => *b = upto,
                    _ => st.failed.push_back((first, upto)),
                }
                if st.failed.len() > FAILED_RANGES {
                    st.failed.pop_front();
                }
            }
        } else {
            self.healthy.store(true, Ordering::Release);
        }
        if batch_records > 0 {
            self.written.fetch_add(outcome.records_written.min(batch_records), Ordering::Relaxed);
        }
        st.trouble = outcome.trouble;
        let mut wake = Vec::new();
        match self.durability {
            Durability::Synced => {
                // The audit thread syncs, then answers.
                if st.written > st.synced {
                    st.thread_idle = false;
                    self.thread.notify_one();
                }
            }
            Durability::Written | Durability::Buffered => Self::answerable(&mut st, upto, &mut wake),
        }
        st.end += n as u64;
        if self.follow_file && n > 0 && st.thread_idle {
            st.thread_idle = false;
            self.thread.notify_one();
        }
        if st.spare.len() < SPARE_BUFFERS && bytes.capacity() <= SPARE_MAX_BYTES {
            let mut bytes = bytes;
            bytes.clear();
            st.spare.push(bytes);
        }
        wake
    }

    /// Takes the wakers of the requests whose records are up to `upto`.
    fn answerable(st: &mut State, upto: u64, wake: &mut Vec<Waker>) {
        wake.extend(st.waiters.extract_if(.., |w| w.seq <= upto).map(|w| w.waker));
    }

    /// Where the writes stand now (before a sync: what it will have put on disk).
    pub(super) fn mark(&self) -> Mark {
        let st = self.lock();
        Mark { seq: st.written, end: st.end }
    }

    /// The end of what the audit thread may hash: all that is written, or with `Synced`
    /// (unless `all`), what is on disk.
    pub(super) fn hashable_end(&self, all: bool) -> u64 {
        let st = self.lock();
        if all || self.durability != Durability::Synced { st.end } else { st.synced_end }
    }

    /// Bytes already in the active file when the log starts.
    pub(super) fn set_file_end(&self, end: u64) {
        let mut st = self.lock();
        st.end = end;
        st.synced_end = end;
    }

    /// Records up to `mark` are on disk (or its sync failed); returns the wakers to wake.
    pub(super) fn synced(&self, mark: Mark, result: io::Result<()>) -> Vec<Waker> {
        let upto = mark.seq;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        let mut st = self.lock();
        if let Err(e) = result {
            // What was written is not known to be on disk: those requests fail (or go on).
            self.fail(&e, 0);
            if self.on_error == OnError::Refuse && upto > st.synced {
                let first = st.synced + 1;
                st.failed.push_back((first, upto));
                if st.failed.len() > FAILED_RANGES {
                    st.failed.pop_front();
                }
            }
        }
        st.synced = st.synced.max(upto);
        st.synced_end = st.synced_end.max(mark.end);
        let mut wake = Vec::new();
        Self::answerable(&mut st, upto, &mut wake);
        wake
    }

    /// Gives up the write turn; wakes the audit thread if it waits for it, else the
    /// waiting requests when records are pending (one of them takes the turn).
    fn release(&self, wake: &mut Vec<Waker>) {
        let mut st = self.lock();
        st.busy = false;
        if st.want_busy {
            drop(st);
            self.thread.notify_one();
        } else if !st.pending.is_empty() {
            // Those whose records are still pending; one of them takes the turn.
            let written = st.written;
            wake.extend(st.waiters.extract_if(.., |w| w.seq > written).map(|w| w.waker));
        }
    }

    /// Takes the write turn for the audit thread (waiting for a request that holds it).
    pub(super) fn acquire<'a>(&'a self, mut st: MutexGuard<'a, State>) -> MutexGuard<'a, State> {
        st.want_busy = true;
        while st.busy {
            st = self.thread.wait(st).unwrap_or_else(|p| p.into_inner());
        }
        st.want_busy = false;
        st.busy = true;
        st
    }

    /// Gives the audit thread's write turn back, waking requests that wait to write.
    pub(super) fn release_thread_turn(&self) {
        let mut wake = Vec::new();
        self.release(&mut wake);
        wake.into_iter().for_each(Waker::wake);
    }

    /// Appends the log's last record and takes no more (the audit thread, holding the
    /// write turn, then writes it with everything pending).
    pub(super) fn close_with(&self, line: &[u8]) {
        let mut st = self.lock();
        if !st.closed {
            st.pending.extend_from_slice(line);
            st.pending_records += 1;
            st.appended += 1;
            st.closed = true;
        }
    }

    /// Whether a failed write is still to be reported (the log cannot be written).
    pub(super) fn has_trouble(&self) -> bool {
        self.lock().trouble.is_some()
    }

    /// Queues a flush and sync, answered on `done`.
    pub(super) fn request_flush(&self, done: tokio::sync::oneshot::Sender<()>) {
        let mut st = self.lock();
        st.flushes.push(done);
        st.thread_idle = false;
        drop(st);
        self.thread.notify_one();
    }

    /// Replaces where records go with a new, empty file (rotation); the caller holds the
    /// write turn.
    pub(super) fn replace_out(&self, out: Out) -> Out {
        let old = mem::replace(&mut *self.out.lock().unwrap_or_else(|p| p.into_inner()), out);
        self.set_file_end(0);
        old
    }

    /// Asks the audit thread to write everything, close the log and answer on `done`.
    pub(super) fn request_shutdown(&self, done: Option<tokio::sync::oneshot::Sender<()>>) {
        let mut st = self.lock();
        if st.closed {
            return;
        }
        let (tx, _) = tokio::sync::oneshot::channel();
        st.shutdown = Some(done.unwrap_or(tx));
        st.thread_idle = false;
        drop(st);
        self.thread.notify_one();
    }

    fn fail(&self, e: &io::Error, lost: u64) {
        self.healthy.store(false, Ordering::Release);
        if let Ok(mut last) = self.last_error.lock() {
            *last = e.to_string();
        }
        self.lost.fetch_add(lost, Ordering::Relaxed);
    }

    /// Notes a failure that is not a record write (a snapshot that could not be kept).
    pub(super) fn fail_other(&self, e: &io::Error) {
        self.fail(e, 1);
    }
}

/// The record that reports `t`.
fn trouble_record(t: &Trouble) -> LogRecord {
    LogRecord::now(LogEvent::WriteError {
        lost_records: t.lost,
        fragment_bytes: t.fragment,
        error: t.error.clone(),
        since: rfc3339(t.since),
    })
}

/// What a write of `bytes` (a trouble report of `prefix_len` bytes, then a batch of
/// records) that stopped after `n` bytes leaves behind.
#[derive(Debug, PartialEq, Eq)]
struct Accounted {
    /// Records of the batch wholly written.
    records_written: u64,
    /// What the next write must report.
    trouble: Option<Trouble>,
}

fn account(
    bytes: &[u8],
    (prefix_len, batch_records): (usize, u64),
    n: usize,
    error: Option<&io::Error>,
    before: Option<&Trouble>,
) -> Accounted {
    let Some(error) = error else {
        // All written: no need to look at the bytes.
        return Accounted { records_written: batch_records, trouble: None };
    };
    let newlines = |b: &[u8]| memchr::memchr_iter(b'\n', b).count() as u64;
    let n = n.min(bytes.len());
    let records_written = newlines(&bytes[prefix_len.min(n)..n]);
    // A line left unfinished: everything after the last newline written.
    let fragment = match n {
        0 => before.and_then(|t| t.fragment),
        _ if bytes[n - 1] == b'\n' => None,
        _ => {
            let line_start = bytes[..n].iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
            // No newline written at all and an unfinished line before: it goes on.
            let earlier = if line_start == 0 { before.and_then(|t| t.fragment).unwrap_or(0) } else { 0 };
            Some(earlier + (n - line_start) as u64)
        }
    };
    // The earlier trouble counts on if its report did not get written.
    let reported = n >= prefix_len;
    let earlier_lost = if reported { 0 } else { before.map_or(0, |t| t.lost) };
    let since = match (reported, before) {
        (false, Some(t)) => t.since,
        _ => SystemTime::now(),
    };
    Accounted {
        records_written,
        trouble: Some(Trouble {
            fragment,
            lost: earlier_lost + batch_records - records_written,
            error: error.to_string(),
            since,
        }),
    }
}

/// The write turn held by a request that is about to write; given back if the request
/// is dropped before it writes (its client went away), so that nobody waits forever.
struct Turn<'a> {
    core: &'a Core,
    held: bool,
}

impl Turn<'_> {
    /// Writes what is pending, gives the turn back and wakes who may go on.
    fn write(mut self) {
        let mut wake = self.core.write_pending();
        self.held = false;
        self.core.release(&mut wake);
        wake.into_iter().for_each(Waker::wake);
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        if self.held {
            let mut wake = Vec::new();
            self.core.release(&mut wake);
            wake.into_iter().for_each(Waker::wake);
        }
    }
}

/// Waits until record `seq` may be answered, taking the write turn when it is free and
/// the record is still pending.
struct Wait<'a> {
    core: &'a Core,
    seq: u64,
    id: Option<u64>,
}

impl Future for Wait<'_> {
    type Output = Result<(), AuditError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let core = self.core;
        loop {
            let mut st = core.lock();
            if core.durable(&st) >= self.seq {
                if let Some(id) = self.id.take() {
                    st.waiters.retain(|w| w.id != id);
                }
                return Poll::Ready(core.outcome(&st, self.seq));
            }
            let may_lead =
                core.durability != Durability::Buffered && !st.busy && !st.want_busy && st.written < self.seq;
            if may_lead {
                // Records came while the last write was under way: write them now.
                st.busy = true;
                drop(st);
                Turn { core, held: true }.write();
                continue;
            }
            if st.closed && st.shutdown.is_none() && core.durable(&st) < self.seq {
                return Poll::Ready(Err(AuditError::Closed));
            }
            let waker = cx.waker();
            match self.id {
                Some(id) => match st.waiters.iter_mut().find(|w| w.id == id) {
                    Some(w) => {
                        if !w.waker.will_wake(waker) {
                            w.waker = waker.clone();
                        }
                    }
                    None => st.waiters.push(Waiter { seq: self.seq, id, waker: waker.clone() }),
                },
                None => {
                    let id = st.next_waiter;
                    st.next_waiter += 1;
                    st.waiters.push(Waiter { seq: self.seq, id, waker: waker.clone() });
                    drop(st);
                    self.id = Some(id);
                }
            }
            return Poll::Pending;
        }
    }
}

impl Drop for Wait<'_> {
    fn drop(&mut self) {
        if let Some(id) = self.id {
            let mut st = self.core.lock();
            st.waiters.retain(|w| w.id != id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn err() -> io::Error {
        io::Error::other("No space left on device")
    }

    /// A write that stops partway: the records wholly written count, the rest are lost,
    /// and an unfinished line is measured (and continued when nothing at all got out).
    #[test]
    fn accounting_of_a_write_cut_short() {
        let batch = b"{\"a\":1}\n{\"b\":2}\n{\"c\":3}\n";
        let whole = account(batch, (0, 3), batch.len(), None, None);
        assert_eq!(whole, Accounted { records_written: 3, trouble: None });
        let cut = account(batch, (0, 3), 11, Some(&err()), None);
        assert_eq!(cut.records_written, 1);
        let t = cut.trouble.unwrap();
        assert_eq!((t.fragment, t.lost), (Some(3), 2));
        let at_boundary = account(batch, (0, 3), 8, Some(&err()), None).trouble.unwrap();
        assert_eq!((at_boundary.fragment, at_boundary.lost), (None, 2));
        // Nothing written after an unfinished line: it is still unfinished, and the
        // earlier losses are still to be reported (with the report itself not written).
        let before = Trouble { fragment: Some(3), lost: 2, error: "x".into(), since: SystemTime::UNIX_EPOCH };
        let mut joined = b"\n{\"report\":1}\n".to_vec();
        let prefix = joined.len();
        joined.extend_from_slice(batch);
        let nothing = account(&joined, (prefix, 3), 0, Some(&err()), Some(&before)).trouble.unwrap();
        assert_eq!((nothing.fragment, nothing.lost, nothing.since), (Some(3), 5, SystemTime::UNIX_EPOCH));
        // The report written, the batch cut in its second record.
        let later = account(&joined, (prefix, 3), prefix + 11, Some(&err()), Some(&before));
        assert_eq!(later.records_written, 1);
        let t = later.trouble.unwrap();
        assert_eq!((t.fragment, t.lost), (Some(3), 2));
        assert_ne!(t.since, SystemTime::UNIX_EPOCH);
    }
}
