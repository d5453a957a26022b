//! [`AuditLog`], the handle requests and fetches log through: it appends records for the
//! group commit (see `commit`), waits as the durability asks, and refuses requests while
//! the log is broken and configured to fail closed.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::SystemTime;

use tokio::sync::oneshot;

use super::commit::Core;
use super::config::{AuditConfig, AuditError, AuditSetupError, MemoryLog, OnError, Target};
use super::line::{decision_line, outcome_line};
use super::open::open_log;
use super::out::Out;
use super::record::{
    DecisionRecord, FetchRecord, OutcomeFacts, OutcomeRecord, RequestFacts, ResponseUsageRecord, to_line,
};
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
        let out = match &config.target {
            Target::File(path) => {
                let open = |path: &std::path::Path| -> std::io::Result<Out> {
                    let mut opened = open_log(path)?;
                    let record = opened.previous.record(config.durability.as_str());
                    std::io::Write::write_all(&mut opened.file, &record.line())?;
                    Ok(Out::File(opened.file))
                };
                open(path).map_err(|source| AuditSetupError::Open { path: path.clone(), source })?
            }
            Target::Stdout => Out::Stdout,
            Target::Memory(m) => Out::Memory(m.clone()),
        };
        if let Some(dir) = &config.snapshots {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| AuditSetupError::Snapshots { path: dir.clone(), source })?;
        }
        AuditLog::spawn(config, out).map_err(AuditSetupError::Thread)
    }

    /// A log kept in memory, and the handle to read it.
    pub fn memory() -> (AuditLog, MemoryLog) {
        let memory = MemoryLog::default();
        let config = AuditConfig { target: Target::Memory(memory.clone()), ..AuditConfig::default() };
        let log = AuditLog::spawn(config, Out::Memory(memory.clone()))
            .unwrap_or_else(|e| panic!("cannot start the audit thread: {e}"));
        (log, memory)
    }

    /// The log writing to `out`, with its audit thread started.
    fn spawn(config: AuditConfig, out: Out) -> std::io::Result<AuditLog> {
        let sync = out.sync_handle();
        let core = Arc::new(Core::new(out, config.durability, config.on_error, config.queue));
        writer::spawn(core.clone(), sync)?;
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

    /// Logs a decision; returns once its record is written as
    /// [`AuditConfig::durability`] asks.
    pub async fn decision(&self, record: DecisionRecord) -> Result<(), AuditError> {
        self.accepting()?;
        self.commit(&to_line(&record)).await
    }

    /// Appends a request's record and waits as the durability asks.
    async fn commit(&self, line: &[u8]) -> Result<(), AuditError> {
        let core = &self.inner.core;
        let ticket = core.append(line, true)?;
        core.wait(ticket).await
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
    pub async fn response_usage(&self, mut record: ResponseUsageRecord) -> Result<(), AuditError> {
        self.accepting()?;
        record.schema_version = super::SCHEMA_VERSION;
        record.kind = "response-usage";
        record.time = super::rfc3339(SystemTime::now());
        record.url = super::record::logged_url(&record.url, self.inner.config.redact_query).into_owned();
        // The response waits for it, as for a decision (it may replace the response).
        self.commit(&to_line(&record)).await
    }

    /// The decision record for a decision (the layer fills in the request fields).
    pub fn decision_record(&self, d: &Decision, request: RequestFacts<'_>) -> DecisionRecord {
        DecisionRecord::of(d, request, SystemTime::now(), self.inner.config.redact_query)
    }

    /// Queues the record of a decision: what the layer calls for every request.
    ///
    /// Same line as [`AuditLog::decision`] with [`AuditLog::decision_record`], but written
    /// straight from the decision into one buffer, without the owned record and its dozen
    /// strings: the audit log is on every request's path. Debug builds check that both
    /// give the same bytes.
    pub async fn log_decision(&self, d: &Decision, request: RequestFacts<'_>) -> Result<(), AuditError> {
        self.accepting()?;
        let now = SystemTime::now();
        let redact = self.inner.config.redact_query;
        let line = decision_line(d, request, now, redact);
        debug_assert_eq!(
            String::from_utf8_lossy(&line),
            String::from_utf8_lossy(&to_line(&DecisionRecord::of(d, request, now, redact))),
            "the direct writer and the serde record disagree"
        );
        self.commit(&line).await
    }
}

impl AuditLog {
    /// Logs what the client got for a request whose decision was logged (its outcome
    /// record), when the answer is over. Not waited for (it comes after the answer):
    /// written with the next batch, like a fetch record.
    pub fn log_outcome(&self, facts: OutcomeFacts<'_>) {
        let now = SystemTime::now();
        let line = outcome_line(facts, now);
        debug_assert_eq!(
            String::from_utf8_lossy(&line),
            String::from_utf8_lossy(&to_line(&OutcomeRecord::of(facts, now))),
            "the direct writer and the serde record disagree"
        );
        // Err only once the log is closed: the answer outlived the log.
        let _ = self.inner.core.append(&line, false);
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
