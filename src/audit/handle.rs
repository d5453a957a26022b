//! [`AuditLog`], the handle requests and fetches log through: it queues records for the
//! writer task, waiting for room when the queue is full, and refuses requests while the
//! log is broken and configured to fail closed.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::{Notify, mpsc, oneshot};

use super::config::{AuditConfig, AuditError, AuditSetupError, MemoryLog, OnError, Target};
use super::line::decision_line;
use super::out::Out;
use super::record::{DecisionRecord, FetchRecord, RequestFacts, ResponseUsageRecord, to_line};
use super::writer::{Msg, Shared, writer};
use crate::fetch::FetchOutcome;
use crate::origin::Origin;
use crate::policy::{Decision, FetchObserver};

/// The audit log: a handle to the writer task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AuditLog {
    inner: Arc<Shared>,
}

impl AuditLog {
    /// Opens the log and starts its writer task (call within a tokio runtime).
    pub async fn start(config: AuditConfig) -> Result<AuditLog, AuditSetupError> {
        let out: Out = match &config.target {
            Target::File(path) => {
                let file = std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .map_err(|source| AuditSetupError::Open { path: path.clone(), source })?;
                Out::File(std::io::BufWriter::with_capacity(64 * 1024, file))
            }
            Target::Stdout => Out::Stdout(tokio::io::BufWriter::new(tokio::io::stdout())),
            Target::Memory(m) => Out::Memory(m.clone()),
        };
        if let Some(dir) = &config.snapshots {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| AuditSetupError::Snapshots { path: dir.clone(), source })?;
        }
        Ok(AuditLog::spawn(config, out))
    }

    /// A log kept in memory, and the handle to read it.
    pub fn memory() -> (AuditLog, MemoryLog) {
        let memory = MemoryLog::default();
        let config = AuditConfig { target: Target::Memory(memory.clone()), ..AuditConfig::default() };
        (AuditLog::spawn(config, Out::Memory(memory.clone())), memory)
    }

    /// The log writing to `out`, with its writer task started.
    fn spawn(config: AuditConfig, out: Out) -> AuditLog {
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let wake = Arc::new(Notify::new());
        let snapshots = config.snapshots.clone();
        let inner = Arc::new(Shared {
            tx,
            wake: wake.clone(),
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(String::new()),
            lost: AtomicU64::new(0),
            written: AtomicU64::new(0),
            config,
            writer: Mutex::new(None),
        });
        let handle = tokio::spawn(writer(rx, wake, out, snapshots, Arc::downgrade(&inner)));
        if let Ok(mut w) = inner.writer.lock() {
            *w = Some(handle);
        }
        AuditLog { inner }
    }

    /// The configuration.
    pub fn config(&self) -> &AuditConfig {
        &self.inner.config
    }

    /// Whether requests may proceed: false when writing failed and the log fails closed.
    pub fn accepting(&self) -> Result<(), AuditError> {
        if self.inner.config.on_error == OnError::Refuse && !self.inner.healthy.load(Ordering::Acquire) {
            let why = self.inner.last_error.lock().map(|e| e.clone()).unwrap_or_default();
            return Err(AuditError::Broken(why));
        }
        Ok(())
    }

    /// Records written so far.
    pub fn written(&self) -> u64 {
        self.inner.written.load(Ordering::Relaxed)
    }

    /// Records lost because writing failed.
    pub fn lost(&self) -> u64 {
        self.inner.lost.load(Ordering::Relaxed)
    }

    /// Logs a decision; waits while the queue is full.
    pub async fn decision(&self, record: DecisionRecord) -> Result<(), AuditError> {
        self.accepting()?;
        self.send(Msg::Decision(Box::new(record))).await
    }

    async fn send(&self, msg: Msg) -> Result<(), AuditError> {
        // Room in the queue is the usual case: take it without the waiting future.
        let tx = &self.inner.tx;
        let sent = match tx.try_send(msg) {
            Ok(()) => Ok(()),
            Err(mpsc::error::TrySendError::Full(msg)) => {
                self.inner.wake.notify_one();
                tx.send(msg).await.map_err(|_| AuditError::Closed)
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Err(AuditError::Closed),
        };
        // A writer that lets records gather must not let the queue fill up meanwhile.
        if tx.capacity() < tx.max_capacity() / 4 {
            self.inner.wake.notify_one();
        }
        sent
    }

    /// Waits until everything queued so far is written and flushed.
    pub async fn flush(&self) {
        let (tx, rx) = oneshot::channel();
        if self.send(Msg::Flush(tx)).await.is_ok() {
            let _ = rx.await;
        }
    }

    /// Flushes and stops the writer (further records are refused).
    pub async fn shutdown(&self) {
        self.flush().await;
        let handle = self.inner.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(h) = handle {
            h.abort();
            let _ = h.await;
        }
    }

    /// Logs what a forwarded response's headers said about using it (the layer fills in
    /// the record; `time`, the schema version and the URL's redaction are set here).
    pub async fn response_usage(&self, mut record: ResponseUsageRecord) -> Result<(), AuditError> {
        self.accepting()?;
        record.schema_version = super::SCHEMA_VERSION;
        record.kind = "response-usage";
        record.time = super::rfc3339(SystemTime::now());
        record.url = super::record::logged_url(&record.url, self.inner.config.redact_query).into_owned();
        self.send(Msg::Line(to_line(&record))).await
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
        self.send(Msg::Line(line)).await
    }
}

impl FetchObserver for AuditLog {
    fn fetched(&self, origin: &Origin, outcome: &FetchOutcome) {
        let record = FetchRecord::of(origin, outcome, self.inner.config.snapshots.as_deref());
        // The observer is synchronous: queue without waiting; when the queue is full,
        // hand the records to a task that waits for room (nothing is dropped).
        let mut msgs = vec![Msg::Line(to_line(&record))];
        if let (Some(_), Some(h)) = (&self.inner.config.snapshots, record.sha256) {
            msgs.insert(0, Msg::Snapshot { sha256: h, body: outcome.body.clone() });
        }
        let tx = self.inner.tx.clone();
        let mut pending = Vec::new();
        for msg in msgs {
            match tx.try_send(msg) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(m)) => pending.push(m),
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            }
        }
        if !pending.is_empty() {
            tokio::spawn(async move {
                for m in pending {
                    let _ = tx.send(m).await;
                }
            });
        }
    }

    /// A copy another replica fetched (fleet mode): no fetch record (this replica did not
    /// fetch), but its snapshot is kept here too, so that the exact file of every decision
    /// this replica logs is in its snapshot folder.
    fn received(&self, _origin: &Origin, outcome: &FetchOutcome) {
        let (Some(_), Some(sha)) = (&self.inner.config.snapshots, outcome.sha256) else { return };
        let msg = Msg::Snapshot { sha256: hex::encode(sha), body: outcome.body.clone() };
        if let Err(mpsc::error::TrySendError::Full(m)) = self.inner.tx.try_send(msg) {
            let tx = self.inner.tx.clone();
            tokio::spawn(async move {
                let _ = tx.send(m).await;
            });
        }
    }
}
