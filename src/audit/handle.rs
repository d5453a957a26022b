//! [`AuditLog`], the handle requests and fetches log through: it appends records for the
//! group commit (see `commit`), waits as the durability asks, and refuses requests while
//! the log is broken and configured to fail closed.

use std::cell::RefCell;
use std::io::Read as _;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use futures_util::future::Either;
use tokio::sync::oneshot;

use super::commit::{Core, Ticket};
use super::config::{AuditConfig, AuditError, AuditSetupError, Durability, MemoryLog, OnError, Target};
use super::files::{finish_rotation, rotated_files};
use super::line::{decision_line, outcome_line};
use super::open::{PreviousRun, open_log};
use super::out::Out;
use super::record::{
    DecisionRecord, FetchRecord, OutcomeFacts, OutcomeRecord, PaymentRecord, RequestFacts,
    ResponseUsageRecord, to_line,
};
use super::tree::{Continuation, TreeConfig};
use super::writer::FileWork;
use super::{snapshot, writer};
use crate::fetch::FetchOutcome;
use crate::origin::Origin;
use crate::policy::{Decision, FetchObserver};

/// The audit log: a handle to the group commit and the audit thread. Cheap to clone.
#[derive(Clone)]
pub struct AuditLog {
    inner: Arc<Shared>,
}

impl std::fmt::Debug for AuditLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AuditLog").field("config", &self.inner.config).finish_non_exhaustive()
    }
}

/// What every handle shares. When the last handle goes, the log is closed (as by
/// [`AuditLog::shutdown`], without waiting).
struct Shared {
    core: Arc<Core>,
    config: AuditConfig,
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.core.request_shutdown(None);
    }
}

impl AuditLog {
    /// Opens the log and starts its audit thread. An existing file is appended to, after
    /// an `open` record that says how the previous process left it (a torn last line is
    /// ended first).
    pub async fn start(config: AuditConfig) -> Result<AuditLog, AuditSetupError> {
        let (out, work) = match &config.target {
            Target::File(path) => {
                let (file, work) = open_file(path, &config)
                    .map_err(|source| AuditSetupError::Open { path: path.clone(), source })?;
                (Out::File(file), Some(work))
            }
            Target::Stdout => (Out::Stdout, None),
            Target::Memory(m) => (Out::Memory(m.clone()), None),
        };
        if let Some(dir) = &config.snapshots {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| AuditSetupError::Snapshots { path: dir.clone(), source })?;
        }
        AuditLog::spawn(config, out, work).map_err(AuditSetupError::Thread)
    }

    /// A log kept in memory, and the handle to read it.
    pub fn memory() -> (AuditLog, MemoryLog) {
        let memory = MemoryLog::default();
        let config = AuditConfig { target: Target::Memory(memory.clone()), ..AuditConfig::default() };
        let log = AuditLog::spawn(config, Out::Memory(memory.clone()), None)
            .unwrap_or_else(|e| panic!("cannot start the audit thread: {e}"));
        (log, memory)
    }

    /// The log writing to `out`, with its audit thread started.
    pub(super) fn spawn(config: AuditConfig, out: Out, work: Option<FileWork>) -> std::io::Result<AuditLog> {
        let sync = out.sync_handle();
        let mut core = Core::new(out, config.durability, config.on_error, config.queue);
        if let Some(w) = &work {
            core.follow_file = w.tree.is_some() || w.rotate_size > 0 || w.rotate_interval.is_some();
            core.set_file_end(w.len);
        }
        let core = Arc::new(core);
        writer::spawn(core.clone(), sync, work)?;
        Ok(AuditLog { inner: Arc::new(Shared { core, config }) })
    }

    /// The shared core (tests).
    #[cfg(test)]
    pub(super) fn core(&self) -> &Arc<Core> {
        &self.inner.core
    }

    /// The configuration.
    pub fn config(&self) -> &AuditConfig {
        &self.inner.config
    }

    /// Whether requests may proceed: false when writing failed and the log fails closed.
    pub fn accepting(&self) -> Result<(), AuditError> {
        let core = &self.inner.core;
        if self.inner.config.on_error == OnError::Refuse && !core.healthy.load(Ordering::Acquire) {
            let why = core.last_error.lock().map(|e| e.clone()).unwrap_or_default();
            return Err(AuditError::Broken(why));
        }
        Ok(())
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.inner.core.written.load(Ordering::Relaxed)
    }

    /// Records lost because writing failed.
    pub fn lost(&self) -> u64 {
        self.inner.core.lost.load(Ordering::Relaxed)
    }

    /// Logs a bot request to a guarded site (the ingress side); returns once its record is
    /// written as [`AuditConfig::durability`] asks. The record is appended when this is
    /// called; the future waits for its write.
    pub fn log_ingress(
        &self,
        record: &super::IngressRecord,
    ) -> impl Future<Output = Result<(), AuditError>> + use<'_> {
        self.log_ingress_line(&record.line())
    }

    /// [`AuditLog::log_ingress`] with the record's line borrowed from what it is made of
    /// (what the ingress calls for every bot request): written straight into the line
    /// buffer, no owned record. Debug builds check that serde gives the same bytes for
    /// the owned record.
    pub(crate) fn log_ingress_line(
        &self,
        line: &super::IngressRecordRef<'_>,
    ) -> impl Future<Output = Result<(), AuditError>> + use<'_> {
        let ticket = self.accepting().and_then(|()| {
            append_line(&self.inner.core, true, |o| {
                line.write(o);
                debug_assert_eq!(
                    String::from_utf8_lossy(o),
                    serde_json::to_string(&line.to_record()).unwrap_or_default() + "\n",
                    "the borrowed line and the owned record disagree"
                );
            })
        });
        self.waited(ticket)
    }

    /// Appends a request's record and waits as the durability asks.
    async fn commit(&self, line: &[u8]) -> Result<(), AuditError> {
        let core = &self.inner.core;
        let ticket = core.append(line, true)?;
        core.wait(ticket).await
    }

    /// The wait [`AuditLog::commit`] does, for a record already appended (`ticket`): the
    /// future a request holds is this wait alone, not also the facts its line was written
    /// from.
    fn waited(
        &self,
        ticket: Result<Ticket, AuditError>,
    ) -> impl Future<Output = Result<(), AuditError>> + use<'_> {
        // Not an `async` block, which would hold the wait twice (as given, and awaited).
        match ticket {
            Ok(ticket) => Either::Left(self.inner.core.wait(ticket)),
            Err(e) => Either::Right(std::future::ready(Err(e))),
        }
    }

    /// Waits until everything appended so far is written and synced to disk.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        self.inner.core.request_flush(tx);
        let _ = rx.await;
    }

    /// Writes everything, closes the log with a `close` record, syncs it, and stops the
    /// audit thread; further records are refused.
    pub async fn shutdown(&self) {
        let (tx, rx) = oneshot::channel();
        self.inner.core.request_shutdown(Some(tx));
        let _ = rx.await;
    }

    /// Logs what a forwarded response's headers said about using it (the layer fills in
    /// the record; `time`, the schema version and the URL's redaction are set here).
    pub(crate) async fn response_usage(&self, mut record: ResponseUsageRecord) -> Result<(), AuditError> {
        self.accepting()?;
        record.schema_version = super::SCHEMA_VERSION;
        record.kind = "response-usage";
        record.time = super::rfc3339(SystemTime::now());
        record.url = super::record::logged_url(&record.url, self.inner.config.redact_query).into_owned();
        // The response waits for it, as for a decision (it may replace the response).
        self.commit(&to_line(&record)).await
    }

    /// Queues the record of a request an origin asked payment for (time and schema set
    /// here), written with the next batch.
    pub(crate) fn log_payment(&self, mut record: PaymentRecord) {
        record.schema_version = super::SCHEMA_VERSION;
        record.kind = "payment";
        record.time = super::rfc3339(SystemTime::now());
        let _ = self.inner.core.append(&to_line(&record), false);
    }

    /// Queues the record of a decision: what the layer calls for every request.
    ///
    /// The line of the serde [`DecisionRecord`], but written straight from the decision
    /// into one buffer, without the owned record and its dozen strings: the audit log is on
    /// every request's path. Debug builds check that both give the same bytes.
    ///
    /// The record is appended when this is called; the future waits for its write (see
    /// [`AuditConfig::durability`]).
    pub(crate) fn log_decision(
        &self,
        d: &Decision,
        request: RequestFacts<'_>,
    ) -> impl Future<Output = Result<(), AuditError>> + use<'_> {
        let ticket = self.accepting().and_then(|()| {
            let now = SystemTime::now();
            let redact = self.inner.config.redact_query;
            append_line(&self.inner.core, true, |o| {
                decision_line(o, d, request, now, redact);
                debug_assert_eq!(
                    String::from_utf8_lossy(o),
                    String::from_utf8_lossy(&to_line(&DecisionRecord::of(d, request, now, redact))),
                    "the direct writer and the serde record disagree"
                );
            })
        });
        self.waited(ticket)
    }
}

thread_local! {
    /// This thread's buffer for the line of a record on a request's path (decision,
    /// outcome, ingress): reused, so that writing a line allocates nothing once the buffer
    /// has grown to a line's size. The line is copied into the pending batch at once.
    static LINE: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A line buffer larger than this (a record with a huge URL) is not kept.
const LINE_KEEP: usize = 16 * 1024;

/// Writes a line with `write` into this thread's line buffer and appends it (see
/// [`Core::append`]); a fresh buffer when the thread's is not available (in use further up
/// the stack, or the thread ending).
fn append_line(core: &Core, wait: bool, write: impl FnOnce(&mut Vec<u8>)) -> Result<Ticket, AuditError> {
    let mut write = Some(write);
    let reused = LINE.try_with(|line| {
        let mut buf = line.try_borrow_mut().ok()?;
        buf.clear();
        (write.take()?)(&mut buf);
        let ticket = core.append(&buf, wait);
        if buf.capacity() > LINE_KEEP {
            *buf = Vec::new();
        }
        Some(ticket)
    });
    match (reused, write) {
        (Ok(Some(ticket)), _) => ticket,
        (_, Some(write)) => {
            let mut buf = Vec::new();
            write(&mut buf);
            core.append(&buf, wait)
        }
        // Unreachable: `write` is taken only on the path that returns a ticket.
        (_, None) => Err(AuditError::Closed),
    }
}

/// Opens the log file at `path` for appending (see `open`): a new file of a log that keeps
/// a tree starts with its `file-start` record (continuing the tree of the last file closed
/// by rotation, if there is one), and every process's first record is its `open` record.
fn open_file(path: &Path, config: &AuditConfig) -> std::io::Result<(std::fs::File, FileWork)> {
    if let Some(rotated) = finish_rotation(path)? {
        tracing::warn!(
            log = %path.display(),
            rotated = %rotated.display(),
            "the last rotation of the audit log was not finished (its checkpoint file had not been renamed): finished it"
        );
    }
    let mut opened = open_log(path)?;
    let mut head = Vec::new();
    let new = opened.previous == PreviousRun::New;
    if new && config.tamper_evident() {
        let before = rotated_files(path).ok().and_then(|r| r.last().and_then(|p| Continuation::after(p)));
        head.extend_from_slice(&before.unwrap_or_else(Continuation::empty).record().line());
    }
    head.extend_from_slice(&opened.previous.record(config.durability.as_str()).line());
    std::io::Write::write_all(&mut opened.file, &head)?;
    let len = opened.file.metadata()?.len();
    let started =
        if new { SystemTime::now() } else { first_record_time(path).unwrap_or_else(SystemTime::now) };
    let tree = config.tamper_evident().then(|| TreeConfig {
        every: config.checkpoint_every,
        interval: config.checkpoint_interval,
        signer: config.signing_key.clone(),
        sync: config.durability == Durability::Synced,
    });
    let work = FileWork {
        path: path.to_path_buf(),
        len,
        started,
        tree,
        rotate_size: config.rotate_size,
        rotate_interval: config.rotate_interval,
    };
    Ok((opened.file, work))
}

/// The time of the first record of the file at `path`, if it has one.
fn first_record_time(path: &Path) -> Option<SystemTime> {
    use std::io::BufRead;
    let mut line = Vec::new();
    std::io::BufReader::new(std::fs::File::open(path).ok()?)
        .take(1 << 20)
        .read_until(b'\n', &mut line)
        .ok()?;
    #[derive(serde::Deserialize)]
    struct Time {
        time: String,
    }
    let t: Time = serde_json::from_slice(line.strip_suffix(b"\n")?).ok()?;
    let t = time::OffsetDateTime::parse(&t.time, &time::format_description::well_known::Rfc3339).ok()?;
    Some(t.into())
}

impl AuditLog {
    /// Logs what the client got for a request whose decision was logged (its outcome
    /// record), when the answer is over. Not waited for (it comes after the answer):
    /// written with the next batch, like a fetch record.
    pub(crate) fn log_outcome(&self, facts: OutcomeFacts<'_>) {
        let now = SystemTime::now();
        // Err only once the log is closed: the answer outlived the log.
        let _ = append_line(&self.inner.core, false, |o| {
            outcome_line(o, facts, now);
            debug_assert_eq!(
                String::from_utf8_lossy(o),
                String::from_utf8_lossy(&to_line(&OutcomeRecord::of(facts, now))),
                "the direct writer and the serde record disagree"
            );
        });
    }
}

impl AuditLog {
    /// Appends a record written with the next batch, not waited for (`Err` only once the
    /// log is closed: dropped then).
    pub(super) fn append_unwaited(&self, line: &[u8]) {
        let _ = self.inner.core.append(line, false);
    }
}

impl FetchObserver for AuditLog {
    fn fetched(&self, origin: &Origin, outcome: &FetchOutcome) {
        let record = FetchRecord::of(origin, outcome, self.inner.config.snapshots.as_deref());
        // The body is kept before its record is appended, so that every decision on it
        // is answered after its snapshot is in the folder. Once per fetch, on the
        // fetching task: a small file into the page cache.
        if let (Some(dir), Some(sha256)) = (&self.inner.config.snapshots, &record.sha256)
            && let Err(e) = snapshot::keep(dir, sha256, &outcome.body)
        {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot keep a robots.txt snapshot");
            self.inner.core.fail_other(&e);
        }
        // Written with the next batch; the decisions that follow wait for it.
        let _ = self.inner.core.append(&to_line(&record), false);
    }

    /// A copy another replica fetched (fleet mode): no fetch record (this replica did not
    /// fetch), but its snapshot is kept here too, so that the exact file of every decision
    /// this replica logs is in its snapshot folder.
    fn received(&self, _origin: &Origin, outcome: &FetchOutcome) {
        // As for a fetch: kept before any decision on it is answered.
        if let (Some(dir), Some(sha256)) = (&self.inner.config.snapshots, outcome.sha256)
            && let Err(e) = snapshot::keep(dir, &hex::encode(sha256), &outcome.body)
        {
            tracing::warn!(error = %e, dir = %dir.display(), "cannot keep a robots.txt snapshot");
            self.inner.core.fail_other(&e);
        }
    }
}
