//! The writer task behind the audit log's bounded queue: it takes records in batches,
//! lets them gather for up to [`FLUSH_AFTER`], hands them to the operating system
//! together, keeps robots.txt snapshots, and reports failures to the handles.

use std::io;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use tokio::sync::{Notify, mpsc, oneshot};

use super::config::AuditConfig;
use super::out::Out;
use super::record::DecisionRecord;
use super::snapshot;

/// What the handles send the writer task.
pub(super) enum Msg {
    /// A record's JSON line.
    Line(Vec<u8>),
    /// Serialised by the writer task, off the request's path.
    Decision(Box<DecisionRecord>),
    /// A robots.txt body to keep.
    Snapshot {
        /// Its SHA-256 (hex).
        sha256: String,
        /// The body.
        body: Bytes,
    },
    /// Flush and sync to disk, then answer.
    Flush(oneshot::Sender<()>),
}

/// What every [`AuditLog`](super::AuditLog) handle and the writer task share: the queue,
/// and the writer's health and counts.
#[derive(Debug)]
pub(super) struct Shared {
    pub(super) tx: mpsc::Sender<Msg>,
    /// Wakes the writer early when the queue is filling up (see [`writer`]).
    pub(super) wake: Arc<Notify>,
    pub(super) healthy: AtomicBool,
    pub(super) last_error: Mutex<String>,
    pub(super) lost: AtomicU64,
    pub(super) written: AtomicU64,
    pub(super) config: AuditConfig,
    pub(super) writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

/// How long a record may wait before it is handed to the operating system (a full buffer
/// goes at once). Flushing whenever the queue ran dry wrote a busy proxy's log a dozen
/// records at a time, one system call each.
const FLUSH_AFTER: Duration = Duration::from_millis(10);

/// Messages taken from the queue at a time.
const BATCH: usize = 256;

/// The writer task: takes what `rx` brings until every handle is gone, writing records to
/// `out` and snapshots to `snapshots`, and reports to `shared` while it lives.
pub(super) async fn writer(
    mut rx: mpsc::Receiver<Msg>,
    wake: Arc<Notify>,
    out: Out,
    snapshots: Option<PathBuf>,
    shared: std::sync::Weak<Shared>,
) {
    let mut w = Writer { out, snapshots, shared };
    let mut batch = Vec::with_capacity(BATCH);
    // Records wait for at most FLUSH_AFTER, or until the buffer is full: a busy proxy
    // writes its log in large pieces, a quiet one's log is current within milliseconds.
    // While records wait, the writer sleeps instead of watching the queue: requests on
    // other threads (the proxy's workers) then queue records without waking it, one
    // wake-up (and context switch) per record; only a queue three quarters full wakes it
    // early, so that requests do not wait for room.
    loop {
        if rx.recv_many(&mut batch, BATCH).await == 0 {
            break;
        }
        let mut buffered = w.handle_all(&mut batch).await;
        if buffered {
            tokio::select! {
                () = tokio::time::sleep(FLUSH_AFTER) => {}
                () = wake.notified() => {}
            }
            // What came meanwhile joins this write; at most one queue's worth, so a
            // steady stream of records cannot keep the writer from flushing.
            let mut left = rx.max_capacity();
            while left > 0 && !rx.is_empty() {
                let n = rx.recv_many(&mut batch, BATCH.min(left)).await;
                left = left.saturating_sub(n);
                buffered |= w.handle_all(&mut batch).await;
            }
        }
        if buffered && let Err(e) = w.out.flush(false).await {
            w.fail(&e);
        }
    }
    let _ = w.out.flush(true).await;
}

/// The writer task's state.
struct Writer {
    out: Out,
    snapshots: Option<PathBuf>,
    shared: std::sync::Weak<Shared>,
}

impl Writer {
    fn fail(&self, e: &io::Error) {
        if let Some(s) = self.shared.upgrade() {
            s.healthy.store(false, Ordering::Release);
            if let Ok(mut last) = s.last_error.lock() {
                *last = e.to_string();
            }
            s.lost.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn ok(&self) {
        if let Some(s) = self.shared.upgrade() {
            s.healthy.store(true, Ordering::Release);
            s.written.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Handles the messages in `batch` (emptying it); true when records went into the
    /// buffer after the last flush.
    async fn handle_all(&mut self, batch: &mut Vec<Msg>) -> bool {
        let mut buffered = false;
        for msg in batch.drain(..) {
            match msg {
                Msg::Line(line) => {
                    match self.out.write(&line).await {
                        Ok(()) => self.ok(),
                        Err(e) => self.fail(&e),
                    }
                    buffered = true;
                }
                Msg::Decision(record) => {
                    match self.out.write_record(&*record).await {
                        Ok(()) => self.ok(),
                        Err(e) => self.fail(&e),
                    }
                    buffered = true;
                }
                Msg::Snapshot { sha256, body } => self.snapshot(&sha256, &body).await,
                Msg::Flush(done) => {
                    if let Err(e) = self.out.flush(true).await {
                        self.fail(&e);
                    }
                    buffered = false;
                    let _ = done.send(());
                }
            }
        }
        buffered
    }
    /// Keeps a robots.txt body as `<sha256>.txt`, once.
    async fn snapshot(&self, sha256: &str, body: &[u8]) {
        let Some(dir) = &self.snapshots else { return };
        if let Err(e) = snapshot::keep(dir, sha256, body).await {
            self.fail(&e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::record::get;
    use crate::audit::{AuditLog, Target};
    use crate::origin::Origin;

    /// Records reach the file in one write after FLUSH_AFTER, not one write each, and
    /// without anything asking for a flush (time is virtual here: the order is exact).
    #[tokio::test(start_paused = true)]
    async fn records_reach_the_file_within_flush_after() {
        use crate::policy::{copy_of, decision_on};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let config = AuditConfig { target: Target::File(path.clone()), ..AuditConfig::default() };
        let log = AuditLog::start(config).await.unwrap();
        let origin = Arc::new(Origin::parse("https://example.com").unwrap());
        let copy = copy_of(&origin, "User-agent: *\nDisallow: /private\n");
        let agent: Arc<str> = "somebot".into();
        for path in ["/", "/private", "/x"] {
            let d = decision_on(&copy, &origin, &agent, crate::rep::Profile::Google, path);
            let url = format!("https://example.com{path}");
            log.log_decision(&d, get(&url, false)).await.unwrap();
        }
        let lines = || std::fs::read_to_string(&path).unwrap().lines().count();
        tokio::time::sleep(FLUSH_AFTER / 2).await;
        assert_eq!(log.written(), 3, "queued records are written to the buffer");
        assert_eq!(lines(), 0, "and wait there");
        tokio::time::sleep(FLUSH_AFTER).await;
        assert_eq!(lines(), 3, "until FLUSH_AFTER has passed");
    }

    /// Records written once `written()` reaches `n`, or after 100 yields to the writer
    /// (time does not move while the test task yields).
    async fn written_after_yielding(log: &AuditLog, n: u64) -> u64 {
        for _ in 0..100 {
            if log.written() >= n {
                break;
            }
            tokio::task::yield_now().await;
        }
        log.written()
    }

    /// While records gather, a queue three quarters full wakes the writer at once: the
    /// records are taken and written without waiting for FLUSH_AFTER (time is virtual and
    /// does not move here).
    #[tokio::test(start_paused = true)]
    async fn a_filling_queue_wakes_the_writer_early() {
        use crate::policy::{copy_of, decision_on};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        let config = AuditConfig { target: Target::File(path.clone()), queue: 16, ..AuditConfig::default() };
        let log = AuditLog::start(config).await.unwrap();
        let origin = Arc::new(Origin::parse("https://example.com").unwrap());
        let copy = copy_of(&origin, "User-agent: *\nDisallow: /private\n");
        let agent: Arc<str> = "somebot".into();
        let d = decision_on(&copy, &origin, &agent, crate::rep::Profile::Google, "/x");
        let started = tokio::time::Instant::now();
        log.log_decision(&d, get("https://example.com/x", false)).await.unwrap();
        assert_eq!(written_after_yielding(&log, 1).await, 1, "the first record is taken at once");
        // The writer now lets records gather; a few leave the queue mostly empty.
        for _ in 0..4 {
            log.log_decision(&d, get("https://example.com/x", false)).await.unwrap();
        }
        assert_eq!(written_after_yielding(&log, u64::MAX).await, 1, "a few records wait in the queue");
        // Past three quarters of the queue: the writer wakes and takes them all.
        for _ in 0..9 {
            log.log_decision(&d, get("https://example.com/x", false)).await.unwrap();
        }
        assert_eq!(written_after_yielding(&log, 14).await, 14, "the writer woke and took the queued records");
        assert_eq!(tokio::time::Instant::now(), started, "no time passed: the writer was woken");
        let lines = std::fs::read_to_string(&path).unwrap().lines().count();
        assert_eq!(lines, 14, "and handed them to the operating system");
    }
}
