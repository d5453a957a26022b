//! The audit thread: what the log does off the requests' path. It writes records that no
//! request is waiting for (fetch records, the log's own) within [`LINGER`], and with
//! `Durability::Buffered` every record, in batches; with `Durability::Synced` it syncs
//! what requests wrote (one `fdatasync` for all written meanwhile) and releases them. It
//! reads back what was written (from the page cache: the requests' writes do nothing more
//! for it; handing it the written buffers instead was measured slower, benches/README.md,
//! thirty-ninth session) and hashes it into the Merkle tree, writes checkpoints
//! ([`TreeWriter`]), rotates the file, answers flushes, and on shutdown writes everything,
//! closes the log with a `close` record, makes a last checkpoint and syncs.
//!
//! It is a thread of its own rather than a task: it blocks on the disk (syncs, reading a
//! file back at start, rotation), and it sleeps while records gather instead of being
//! woken for each (requests wake it only when it waits with nothing to do, or when the
//! buffered queue fills up, or with `Synced`, for each batch to sync).

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::FileExt;
use std::path::PathBuf;
use std::sync::Arc;
use std::task::Waker;
use std::time::{Duration, Instant, SystemTime};

use super::commit::Core;
use super::config::Durability;
use super::files::{checkpoints_path, rotated_path};
use super::out::Out;
use super::record::{LogEvent, LogRecord};
use super::tree::{TreeConfig, TreeWriter};

/// How long a record may wait before the audit thread writes it (a record a request
/// waits for is written by that request's write turn, at once), and how long the thread
/// lets written records gather before hashing them.
pub(super) const LINGER: Duration = Duration::from_millis(10);

/// How often the audit thread, while a checkpoint by time is due later, looks for written
/// records to hash (writes wake it only when it has nothing to do).
const HASH_EVERY: Duration = Duration::from_millis(50);

/// What the audit thread reads back from the file and hashes between two yields (see
/// `ActiveFile::follow`): what it is behind by, in SLICES slices, each at least
/// MIN_SLICE (about a dozen records, some 10 µs) and at most MAX_SLICE.
///
/// A yield on a CPU the request threads keep busy gives the CPU away for a whole
/// scheduling round. With slices of a fixed 8 KiB the thread hashed one slice a round,
/// less than was written under load, and fell further behind for as long as the load
/// lasted (benches/README.md, twelfth session). Slices sized by the backlog make catching
/// up take SLICES rounds whatever the backlog: under load they grow (some 32 KiB for the
/// megabyte written in HASH_EVERY at 25,000 requests a second), and a backlog stays bounded.
const SLICES: u64 = 32;
const MIN_SLICE: usize = 8 * 1024;
const MAX_SLICE: usize = 1024 * 1024;

/// What the audit thread does besides writing: the tree and rotation of a log file.
pub(super) struct FileWork {
    /// The active file.
    pub(super) path: PathBuf,
    /// Bytes already in it when the thread starts.
    pub(super) len: u64,
    /// When its first record was written.
    pub(super) started: SystemTime,
    /// The tree, if the log keeps one.
    pub(super) tree: Option<TreeConfig>,
    /// Rotate at this size (0: not by size) or age.
    pub(super) rotate_size: u64,
    pub(super) rotate_interval: Option<Duration>,
}

/// Starts the audit thread for `core`; `sync` is a handle on the log file for syncing it
/// and reading back what was written.
pub(super) fn spawn(core: Arc<Core>, sync: Option<File>, work: Option<FileWork>) -> io::Result<()> {
    std::thread::Builder::new()
        .name("robotsgate-audit".into())
        .spawn(move || {
            if core.durability != Durability::Synced {
                lower_priority();
            }
            let mut t = Thread { core: &core, sync, file: None };
            if let Some(work) = work {
                t.file = Some(ActiveFile::start(work));
            }
            t.run();
        })
        .map(|_| ())
}

struct Thread<'a> {
    core: &'a Core,
    sync: Option<File>,
    file: Option<ActiveFile>,
}

/// The active file's tree and rotation state.
struct ActiveFile {
    path: PathBuf,
    /// Bytes of the file taken in (hashed, if there is a tree).
    bytes: u64,
    /// Of which the log's own head (the `file-start` record after a rotation): a file
    /// with nothing more is not rotated by time.
    head_bytes: u64,
    started: SystemTime,
    tree: Option<TreeWriter>,
    rotate_size: u64,
    rotate_interval: Option<Duration>,
    /// Rotation failed: not tried again before this.
    retry_after: Option<Instant>,
    /// What was read back, for hashing.
    buf: Vec<u8>,
}

impl ActiveFile {
    fn start(work: FileWork) -> ActiveFile {
        let tree = work.tree.and_then(|config| match TreeWriter::resume(&work.path, work.len, config) {
            Ok((tree, warnings)) => {
                for w in warnings {
                    tracing::error!(log = %work.path.display(), "{w}");
                }
                Some(tree)
            }
            Err(e) => {
                tracing::error!(log = %work.path.display(), error = %e, "cannot read the audit log back: no checkpoints will be written");
                None
            }
        });
        ActiveFile {
            path: work.path,
            bytes: work.len,
            head_bytes: 0,
            started: work.started,
            tree,
            rotate_size: work.rotate_size,
            rotate_interval: work.rotate_interval,
            retry_after: None,
            buf: Vec::new(),
        }
    }

    /// Takes in what the file holds up to `end`: read back through `file` (a handle on
    /// it) and hashed into the tree, if there is one.
    fn follow(&mut self, file: Option<&File>, end: u64) {
        let Some(tree) = &mut self.tree else {
            self.bytes = self.bytes.max(end);
            return;
        };
        let Some(file) = file else {
            tracing::error!(log = %self.path.display(), "no handle to read the audit log back: no more checkpoints will be written");
            self.tree = None;
            self.bytes = self.bytes.max(end);
            return;
        };
        let slice = slice_for(end - self.bytes);
        while self.bytes < end {
            let n = usize::try_from(end - self.bytes).map_or(slice, |n| n.min(slice));
            self.buf.resize(n, 0);
            if let Err(e) = file.read_exact_at(&mut self.buf, self.bytes) {
                let why = if e.kind() == io::ErrorKind::UnexpectedEof {
                    "the audit log is shorter than what was written to it (emptied by another program, such as logrotate's copytruncate; use [audit] rotate_size or rotate_interval instead): no more checkpoints will be written"
                } else {
                    "cannot read the audit log back: no more checkpoints will be written"
                };
                tracing::error!(log = %self.path.display(), error = %e, "{why}");
                self.tree = None;
                self.bytes = end;
                return;
            }
            self.bytes += n as u64;
            if let Err(e) = tree.feed(&self.buf) {
                tracing::error!(checkpoints = %tree.sidecar_path().display(), error = %e, "cannot write a checkpoint");
            }
            // What HASH_EVERY gathers (about a megabyte under load) is a millisecond of
            // hashing: in one go, it held up a worker that shares the CPU for as long, and
            // the requests it had in flight made the latency's tail (benches/README.md, tenth
            // session). Slice by slice, a worker waiting for the CPU gets it in between.
            if self.bytes < end {
                std::thread::yield_now();
            }
        }
    }

    fn checkpoint(&mut self, reason: &str) {
        if let Some(tree) = &mut self.tree
            && let Err(e) = tree.checkpoint(reason)
        {
            tracing::error!(checkpoints = %tree.sidecar_path().display(), error = %e, "cannot write a checkpoint");
        }
    }

    fn rotation_due(&self, now: Instant) -> bool {
        if self.retry_after.is_some_and(|t| now < t) {
            return false;
        }
        (self.rotate_size > 0 && self.bytes >= self.rotate_size)
            || (self.bytes > self.head_bytes
                && self.rotate_interval.is_some_and(|i| {
                    SystemTime::now().duration_since(self.started).is_ok_and(|age| age >= i)
                }))
    }

    /// When the thread must look again (a checkpoint or a rotation by time).
    fn deadline(&self, now: Instant) -> Option<Instant> {
        let tree = self.tree.as_ref().and_then(TreeWriter::deadline);
        let rotate = self.rotate_interval.filter(|_| self.bytes > self.head_bytes).map(|i| {
            let age = SystemTime::now().duration_since(self.started).unwrap_or_default();
            now + i.saturating_sub(age)
        });
        [tree, rotate, self.retry_after].into_iter().flatten().min()
    }
}

/// The slice hashed between two yields when `behind` bytes are to be hashed (see SLICES).
fn slice_for(behind: u64) -> usize {
    usize::try_from(behind / SLICES).map_or(MAX_SLICE, |n| n.clamp(MIN_SLICE, MAX_SLICE))
}

/// How much lower the audit thread's priority is than the thread that started it, in
/// nice steps (see [`lower_priority`]).
const NICE_STEPS: i32 = 5;

/// Lowers the calling thread's priority by [`NICE_STEPS`] (Linux: nice values are per
/// thread). The audit thread does so as it starts, unless the log is `Durability::Synced`,
/// whose requests wait for this thread's syncs.
///
/// The thread's hashing, in slices with a yield between two, shares a CPU with the
/// request threads and with whatever else runs there (under load, an origin or a load
/// generator). At the request threads' priority, each time it was picked again it took the
/// CPU from one of them: the worker of the load benchmark was switched out 0.16 times a
/// request against HAProxy's 0.11, and the origin behind it woke 40% more often. Five
/// steps lower (a third of the request threads' weight) the worker is switched out as
/// often as HAProxy's, and the thread still gets several times the CPU it needs under
/// full load: it keeps up, with nothing left to hash after a run (benches/README.md,
/// twenty-fourth session). Lowering one's own priority needs no privilege; where the
/// system refuses it (a filter of system calls), the thread keeps the priority it has.
#[cfg(target_os = "linux")]
fn lower_priority() {
    // This thread's id: `setpriority` with a thread id sets that thread's nice value alone.
    let me = Some(rustix::thread::gettid());
    let lowered = rustix::process::getpriority_process(me)
        .and_then(|nice| rustix::process::setpriority_process(me, (nice + NICE_STEPS).min(19)));
    if let Err(e) = lowered {
        tracing::debug!(error = %e, "the audit thread keeps its priority");
    }
}

#[cfg(not(target_os = "linux"))]
fn lower_priority() {}

fn wake_all(wake: Vec<Waker>) {
    wake.into_iter().for_each(Waker::wake);
}

impl Thread<'_> {
    fn run(&mut self) {
        let core = self.core;
        let threshold = core.buffered_threshold();
        loop {
            let mut st = core.lock();
            let now = Instant::now();
            let shutdown = st.shutdown.take();
            let flushes = std::mem::take(&mut st.flushes);
            let pending_due = st.pending_due(now, LINGER, threshold, core.durability);
            drop(st);
            if let Some(done) = shutdown {
                self.close();
                let _ = done.send(());
                return;
            }
            let mut worked = false;
            if !flushes.is_empty() || pending_due {
                self.write_now(!flushes.is_empty());
                if !flushes.is_empty() {
                    self.hash(true);
                }
                for done in flushes {
                    let _ = done.send(());
                }
                worked = true;
            }
            if core.durability == Durability::Synced {
                let mark = core.mark();
                if mark.seq > core.lock().synced {
                    let result = self.sync_data();
                    wake_all(core.synced(mark, result));
                    worked = true;
                }
            }
            // Hashing alone does not bring the thread back sooner: what was written is
            // looked at every HASH_EVERY (fewer wake-ups, larger reads).
            let hashed = self.hash(false);
            let now = Instant::now();
            if let Some(f) = &mut self.file {
                if f.tree.as_ref().and_then(TreeWriter::deadline).is_some_and(|d| now >= d) {
                    f.checkpoint("interval");
                }
                if f.rotation_due(now) {
                    self.rotate();
                }
            }
            // Sleep: while batches keep coming, for LINGER (they gather meanwhile); with
            // nothing to do, until woken or until something is due.
            let mut st = core.lock();
            let now = Instant::now();
            let mut deadline = self.file.as_ref().and_then(|f| f.deadline(now));
            if let Some(since) = st.pending_since {
                deadline = Some(deadline.map_or(since + LINGER, |d| d.min(since + LINGER)));
            }
            if worked {
                deadline = Some(deadline.map_or(now + LINGER, |d| d.min(now + LINGER)));
            } else if hashed {
                // More is being written: look again after HASH_EVERY rather than being
                // woken by the next write.
                deadline = Some(deadline.map_or(now + HASH_EVERY, |d| d.min(now + HASH_EVERY)));
            }
            // Work that came while the lock was let go (its wake-up was missed).
            if st.shutdown.is_some()
                || !st.flushes.is_empty()
                || (core.durability == Durability::Synced && st.written > st.synced)
            {
                continue;
            }
            // Writes wake the thread only when it is idle: with a deadline far off (the
            // next checkpoint by time), look at what they wrote every HASH_EVERY.
            if core.follow_file {
                deadline = deadline.map(|d| d.min(now + HASH_EVERY));
            }
            match deadline {
                Some(d) => {
                    let left = d.saturating_duration_since(now).max(Duration::from_micros(100));
                    drop(core.thread.wait_timeout(st, left).map_or_else(|p| p.into_inner().0, |r| r.0));
                }
                None => {
                    st.thread_idle = true;
                    let mut st = core.thread.wait(st).unwrap_or_else(|p| p.into_inner());
                    st.thread_idle = false;
                }
            }
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync.as_ref().map_or(Ok(()), File::sync_data)
    }

    /// Writes everything pending now (taking the write turn); with `sync`, syncs it.
    fn write_now(&mut self, sync: bool) {
        let core = self.core;
        drop(core.acquire(core.lock()));
        let mut wake = core.write_pending();
        core.release_thread_turn();
        if sync {
            let mark = core.mark();
            wake.extend(core.synced(mark, self.sync_data()));
        }
        wake_all(wake);
    }

    /// Hashes what was written (what is durable, or all when `all`); true if anything.
    fn hash(&mut self, all: bool) -> bool {
        let end = self.core.hashable_end(all);
        let Some(f) = &mut self.file else { return false };
        if end <= f.bytes {
            return false;
        }
        f.follow(self.sync.as_ref(), end);
        true
    }

    /// Shutdown: everything written, a `close` record last, a last checkpoint, synced.
    fn close(&mut self) {
        let core = self.core;
        drop(core.acquire(core.lock()));
        core.close_with(&LogRecord::now(LogEvent::Close {}).line());
        let mut wake = core.write_pending();
        core.release_thread_turn();
        let mark = core.mark();
        wake.extend(core.synced(mark, self.sync_data()));
        wake_all(wake);
        self.hash(true);
        if let Some(f) = &mut self.file {
            f.checkpoint("shutdown");
            if let Some(tree) = &f.tree
                && let Err(e) = tree.sync()
            {
                tracing::error!(error = %e, "cannot sync the checkpoint file");
            }
        }
    }

    /// Closes the active file and starts the next: everything pending is written to it,
    /// then a `rotate` record, a checkpoint covering it; both files are synced and renamed
    /// by the file's first and last times; the new file starts with a `file-start` record
    /// that continues the tree. Requests wait meanwhile (the write turn is held); none of
    /// their records is lost or split.
    fn rotate(&mut self) {
        let core = self.core;
        drop(core.acquire(core.lock()));
        let result = self.rotate_holding_turn();
        core.release_thread_turn();
        if let Err(e) = result {
            tracing::error!(error = %e, "cannot rotate the audit log; trying again in a minute");
            if let Some(f) = &mut self.file {
                f.retry_after = Some(Instant::now() + Duration::from_secs(60));
            }
        }
    }

    fn rotate_holding_turn(&mut self) -> io::Result<()> {
        let core = self.core;
        // Everything pending, and anything a failed write left to say, into the old file.
        let mut wake = core.write_pending();
        let mark = core.mark();
        wake.extend(core.synced(mark, self.sync_data()));
        wake_all(wake);
        self.hash(true);
        if core.has_trouble() {
            return Err(io::Error::other("the log cannot be written"));
        }
        let Some(f) = &mut self.file else { return Ok(()) };
        let hashed = f.tree.as_ref().map(TreeWriter::size);
        // The rotate record last, after whatever requests appended meanwhile (it counts
        // them: the tree's size with it).
        let rotate = |records: u64| {
            LogRecord::now(LogEvent::Rotate { tree_size: hashed.map_or(0, |h| h + records + 1) }).line()
        };
        wake_all(core.write_pending_between(&[], Some(&rotate)));
        if core.has_trouble() {
            return Err(io::Error::other("the log cannot be written"));
        }
        self.hash(true);
        let Some(f) = &mut self.file else { return Ok(()) };
        f.checkpoint("rotation");
        if let Some(tree) = &f.tree {
            tree.sync()?;
        }
        if let Some(s) = &self.sync {
            s.sync_data()?;
        }
        // Rename the file and its checkpoints.
        let rotated = rotated_path(&f.path, f.started, SystemTime::now());
        std::fs::rename(&f.path, &rotated)?;
        let sidecar = checkpoints_path(&f.path);
        if sidecar.exists() {
            std::fs::rename(&sidecar, checkpoints_path(&rotated))?;
        }
        let file = OpenOptions::new().create(true).read(true).append(true).open(&f.path)?;
        self.sync = file.try_clone().ok();
        drop(core.replace_out(Out::File(file)));
        f.bytes = 0;
        f.head_bytes = 0;
        f.started = SystemTime::now();
        let rotated_name = rotated.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let start = match &mut f.tree {
            Some(tree) => Some(tree.start_file(&f.path, rotated_name)?),
            None => None,
        };
        if let Some(start) = start {
            // The file-start record first, before what requests appended meanwhile.
            let head = start.record().line();
            if let Some(f) = &mut self.file {
                f.head_bytes = head.len() as u64;
            }
            wake_all(core.write_pending_between(&head, None));
            self.hash(true);
        }
        if let Some(dir) = rotated.parent()
            && let Ok(d) =
                File::open(if dir.as_os_str().is_empty() { std::path::Path::new(".") } else { dir })
        {
            let _ = d.sync_all();
        }
        tracing::info!(closed = %rotated.display(), "audit log rotated");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_is_hashed_in_slices_sized_by_it() {
        for (behind, slice) in [
            (0, MIN_SLICE),
            (100, MIN_SLICE),
            (32 * MIN_SLICE as u64, MIN_SLICE),
            (1 << 20, 32 * 1024),
            (10 << 20, 320 * 1024),
            (32 * MAX_SLICE as u64, MAX_SLICE),
            (u64::MAX, MAX_SLICE),
        ] {
            assert_eq!(slice_for(behind), slice, "{behind}");
        }
    }
}
