//! The decision log compliance teams rely on: one JSON object per line for every
//! decision and every robots.txt fetch, and the fetched robots.txt bodies kept by SHA-256
//! so every decision can be checked again against the exact file it used. The schema is
//! documented in `docs/audit-log.md` ([`SCHEMA_VERSION`]).
//!
//! Records are written off the request path by one writer task behind a bounded queue:
//! when the disk is slow, requests wait for room rather than records being dropped.
//! [`AuditLog::shutdown`] drains the queue and flushes. When the log cannot be written,
//! [`OnError`] chooses: refuse further requests (fail closed, the default) or go on and
//! count the lost records.
//!
//! ```
//! # async fn demo() {
//! use robotsgate::audit::{AuditConfig, AuditLog, Target};
//! let (log, memory) = AuditLog::memory();
//! // ... hand `log` to the RobotsLayer; later:
//! log.shutdown().await;
//! assert!(memory.lines().is_empty());
//! # }
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use serde::Serialize;
use time::OffsetDateTime;
use time::format_description::well_known::Rfc3339;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

use crate::fetch::{FetchOutcome, FetchResult};
use crate::origin::Origin;
use crate::policy::{Decision, FetchObserver, Reason};

/// Version of the record schema (`schema_version` in every record).
pub const SCHEMA_VERSION: u32 = 1;

/// Where records go.
#[derive(Debug, Clone)]
pub enum Target {
    /// Append to a JSON Lines file.
    File(PathBuf),
    /// Standard output.
    Stdout,
    /// Kept in memory (tests, embedding).
    Memory(MemoryLog),
}

/// What to do when the log cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Refuse requests while the log is broken (fail closed).
    #[default]
    Refuse,
    /// Go on; count the records lost.
    Continue,
}

/// How the audit log is written.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// Where decision and fetch records go.
    pub target: Target,
    /// Folder for robots.txt bodies, named by their SHA-256 (none: not kept).
    pub snapshots: Option<PathBuf>,
    /// Records queued before writers wait.
    pub queue: usize,
    /// Behaviour when writing fails.
    pub on_error: OnError,
    /// Replace query strings in logged URLs by `?<redacted>`.
    pub redact_query: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            target: Target::Stdout,
            snapshots: None,
            queue: 4096,
            on_error: OnError::Refuse,
            redact_query: false,
        }
    }
}

/// Records kept in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryLog(Arc<Mutex<Vec<String>>>);

impl MemoryLog {
    /// The JSON lines written so far.
    pub fn lines(&self) -> Vec<String> {
        match self.0.lock() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    fn push(&self, line: String) {
        match self.0.lock() {
            Ok(mut v) => v.push(line),
            Err(p) => p.into_inner().push(line),
        }
    }
}

/// The log is not accepting records.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    /// Writing failed and the log is configured to fail closed.
    #[error("the audit log cannot be written: {0}")]
    Broken(String),
    /// The log was shut down.
    #[error("the audit log is shut down")]
    Closed,
}

/// A problem setting the log up.
#[derive(Debug, thiserror::Error)]
pub enum AuditSetupError {
    /// The log file cannot be opened for appending.
    #[error("cannot open audit log {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The snapshot folder cannot be created.
    #[error("cannot create snapshot folder {path}: {source}")]
    Snapshots {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}

/// One decision, as logged.
#[derive(Debug, Clone, Serialize)]
pub struct DecisionRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"decision"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the decision was made (RFC 3339, UTC).
    pub time: String,
    /// Unique per request.
    pub request_id: String,
    /// The client's address, when known.
    pub client: Option<String>,
    /// The authenticated proxy user, if any.
    pub user: Option<String>,
    /// The request method.
    pub method: String,
    /// The request URL (query redacted if configured).
    pub url: String,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The product token the decision is for.
    pub agent: String,
    /// `google`, `rfc` or `conservative`.
    pub profile: &'static str,
    /// `enforce` or `report-only`.
    pub mode: &'static str,
    /// `allowed`, `disallowed` or `would-disallow` (report-only).
    pub outcome: &'static str,
    /// The reason class (see docs/audit-log.md).
    pub reason: &'static str,
    /// The deciding rule, if a rule decided.
    pub rule: Option<RuleRecord>,
    /// The decision in words.
    pub explanation: String,
    /// Whether the path was visible (false for a CONNECT tunnel: host-level check).
    pub path_visible: bool,
    /// The robots.txt the decision rests on.
    pub robots: Option<RobotsRecord>,
    /// Why robots.txt was unreachable, when that matters for the decision.
    pub unreachable_cause: Option<String>,
    /// Override details, when an override decided.
    pub override_reason: Option<String>,
    /// How long the decision took, in microseconds.
    pub decision_us: u64,
}

/// The rule of a decision.
#[derive(Debug, Clone, Serialize)]
pub struct RuleRecord {
    /// `allow` or `disallow`.
    pub kind: &'static str,
    /// The pattern as written.
    pub pattern: String,
    /// 1-based line in the robots.txt.
    pub line: u32,
    /// `google` or `rfc`: the reading the rule was matched in.
    pub reading: &'static str,
    /// Google's index.html rule.
    pub implied_by_index_html: bool,
}

/// The robots.txt behind a decision.
#[derive(Debug, Clone, Serialize)]
pub struct RobotsRecord {
    /// The robots.txt URL.
    pub url: String,
    /// Where the last response came from.
    pub final_url: String,
    /// HTTP status, if there was a response.
    pub status: Option<u16>,
    /// SHA-256 of the body (hex), when one was read.
    pub sha256: Option<String>,
    /// When it was fetched (RFC 3339).
    pub fetched_at: String,
    /// Body bytes.
    pub bytes: usize,
    /// Redirect hops.
    pub redirects: u8,
    /// Age of the copy in seconds at decision time.
    pub age_s: Option<f64>,
    /// The copy was past its freshness.
    pub stale: bool,
}

/// One robots.txt fetch, as logged.
#[derive(Debug, Clone, Serialize)]
pub struct FetchRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"fetch"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the record was made (RFC 3339, UTC).
    pub time: String,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The robots.txt URL.
    pub url: String,
    /// Where the last response came from.
    pub final_url: String,
    /// Redirect hops.
    pub redirects: u8,
    /// `success`, `unavailable`, `too-many-redirects` or `unreachable`.
    pub result: &'static str,
    /// HTTP status, if there was a response.
    pub status: Option<u16>,
    /// Why it was unreachable.
    pub cause: Option<String>,
    /// The failure class (`dns`, `status_5xx`, ...).
    pub cause_class: Option<&'static str>,
    /// Decoded body bytes kept.
    pub bytes: usize,
    /// The body was cut at the size limit.
    pub truncated: bool,
    /// SHA-256 of the body (hex).
    pub sha256: Option<String>,
    /// The snapshot file holding the body.
    pub snapshot: Option<String>,
    /// When the fetch started (RFC 3339).
    pub fetched_at: String,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

enum Msg {
    Line(Vec<u8>),
    Snapshot { sha256: String, body: Bytes },
    Flush(oneshot::Sender<()>),
}

/// The audit log: a handle to the writer task. Cheap to clone.
#[derive(Clone, Debug)]
pub struct AuditLog {
    inner: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    tx: mpsc::Sender<Msg>,
    healthy: AtomicBool,
    last_error: Mutex<String>,
    lost: AtomicU64,
    written: AtomicU64,
    config: AuditConfig,
    writer: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl AuditLog {
    /// Opens the log and starts its writer task (call within a tokio runtime).
    pub async fn start(config: AuditConfig) -> Result<AuditLog, AuditSetupError> {
        let out: Out = match &config.target {
            Target::File(path) => {
                let file = tokio::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(path)
                    .await
                    .map_err(|source| AuditSetupError::Open { path: path.clone(), source })?;
                Out::File(tokio::io::BufWriter::with_capacity(64 * 1024, file))
            }
            Target::Stdout => Out::Stdout(tokio::io::BufWriter::new(tokio::io::stdout())),
            Target::Memory(m) => Out::Memory(m.clone()),
        };
        if let Some(dir) = &config.snapshots {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| AuditSetupError::Snapshots { path: dir.clone(), source })?;
        }
        let (tx, rx) = mpsc::channel(config.queue.max(1));
        let inner = Arc::new(Shared {
            tx,
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(String::new()),
            lost: AtomicU64::new(0),
            written: AtomicU64::new(0),
            config: config.clone(),
            writer: Mutex::new(None),
        });
        let handle = tokio::spawn(writer(rx, out, config.snapshots.clone(), Arc::downgrade(&inner)));
        if let Ok(mut w) = inner.writer.lock() {
            *w = Some(handle);
        }
        Ok(AuditLog { inner })
    }

    /// A log kept in memory, and the handle to read it.
    pub fn memory() -> (AuditLog, MemoryLog) {
        let memory = MemoryLog::default();
        let config = AuditConfig { target: Target::Memory(memory.clone()), ..AuditConfig::default() };
        let (tx, rx) = mpsc::channel(config.queue);
        let inner = Arc::new(Shared {
            tx,
            healthy: AtomicBool::new(true),
            last_error: Mutex::new(String::new()),
            lost: AtomicU64::new(0),
            written: AtomicU64::new(0),
            config,
            writer: Mutex::new(None),
        });
        let handle = tokio::spawn(writer(rx, Out::Memory(memory.clone()), None, Arc::downgrade(&inner)));
        if let Ok(mut w) = inner.writer.lock() {
            *w = Some(handle);
        }
        (AuditLog { inner }, memory)
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
        self.send(Msg::Line(to_line(&record))).await
    }

    async fn send(&self, msg: Msg) -> Result<(), AuditError> {
        self.inner.tx.send(msg).await.map_err(|_| AuditError::Closed)
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

    /// The decision record for a decision (the layer fills in the request fields).
    pub fn decision_record(&self, d: &Decision, request: RequestFacts<'_>) -> DecisionRecord {
        let outcome = match (d.allowed, request.report_only, &d.reason) {
            (_, _, Reason::DestinationDenied { .. }) => "destination-denied",
            (true, _, _) => "allowed",
            (false, false, _) => "disallowed",
            (false, true, _) => "would-disallow",
        };
        let rule = match &d.reason {
            Reason::Rule { kind, line, reading, implied_by_index_html, .. } => Some(RuleRecord {
                kind: kind.as_str(),
                pattern: d.rule_pattern().unwrap_or("").to_owned(),
                line: *line,
                reading: reading.as_str(),
                implied_by_index_html: *implied_by_index_html,
            }),
            _ => None,
        };
        let robots = d.fetch_facts().map(|f| RobotsRecord {
            url: f.url.clone(),
            final_url: f.final_url.clone(),
            status: f.status,
            sha256: f.sha256_hex(),
            fetched_at: rfc3339(f.fetched_at),
            bytes: f.bytes,
            redirects: f.redirects,
            age_s: d.age.map(|a| a.as_secs_f64()),
            stale: d.stale,
        });
        let unreachable_cause = match &d.reason {
            Reason::Unreachable { cause } => Some(cause.to_string()),
            _ => d.failure.as_ref().map(|f| f.cause.to_string()),
        };
        let override_reason = match &d.reason {
            Reason::Override { action, hosts, reason } => {
                Some(format!("{} {hosts}: {reason}", action.as_str()))
            }
            _ => None,
        };
        DecisionRecord {
            schema_version: SCHEMA_VERSION,
            kind: "decision",
            time: rfc3339(SystemTime::now()),
            request_id: request.request_id.to_owned(),
            client: request.client.map(|c| c.to_string()),
            user: request.user.map(str::to_owned),
            method: request.method.to_owned(),
            url: if self.inner.config.redact_query {
                redact_query(request.url)
            } else {
                request.url.to_owned()
            },
            origin: d.origin.to_string(),
            agent: d.agent.to_string(),
            profile: d.profile.as_str(),
            mode: if request.report_only { "report-only" } else { "enforce" },
            outcome,
            reason: d.reason.class(),
            rule,
            explanation: d.to_string(),
            path_visible: request.path_visible,
            robots,
            unreachable_cause,
            override_reason,
            decision_us: request.elapsed.as_micros().min(u64::MAX as u128) as u64,
        }
    }
}

/// The request side of a decision record.
#[derive(Debug, Clone, Copy)]
pub struct RequestFacts<'a> {
    /// Unique request id.
    pub request_id: &'a str,
    /// The client's address.
    pub client: Option<std::net::SocketAddr>,
    /// The authenticated proxy user.
    pub user: Option<&'a str>,
    /// Request method.
    pub method: &'a str,
    /// Full request URL.
    pub url: &'a str,
    /// Whether the path was visible.
    pub path_visible: bool,
    /// Report-only mode.
    pub report_only: bool,
    /// Time taken to decide.
    pub elapsed: Duration,
}

impl FetchObserver for AuditLog {
    fn fetched(&self, origin: &Origin, outcome: &FetchOutcome) {
        let (result, status, cause, class) = match &outcome.result {
            FetchResult::Success { status } => ("success", Some(*status), None, None),
            FetchResult::Unavailable { status } => ("unavailable", Some(*status), None, None),
            FetchResult::TooManyRedirects => ("too-many-redirects", None, None, None),
            FetchResult::Unreachable(u) => {
                let status = match u {
                    crate::fetch::Unreachable::Status(s) => Some(*s),
                    _ => None,
                };
                ("unreachable", status, Some(u.to_string()), Some(u.class()))
            }
        };
        let sha = outcome.sha256.map(hex::encode);
        let snapshot = match (&self.inner.config.snapshots, &sha) {
            (Some(dir), Some(h)) => Some(snapshot_path(dir, h).display().to_string()),
            _ => None,
        };
        let record = FetchRecord {
            schema_version: SCHEMA_VERSION,
            kind: "fetch",
            time: rfc3339(SystemTime::now()),
            origin: origin.to_string(),
            url: outcome.url.clone(),
            final_url: outcome.final_url.clone(),
            redirects: outcome.redirects,
            result,
            status,
            cause,
            cause_class: class,
            bytes: outcome.body.len(),
            truncated: outcome.truncated,
            sha256: sha.clone(),
            snapshot,
            fetched_at: rfc3339(outcome.fetched_at),
            duration_ms: outcome.duration.as_secs_f64() * 1000.0,
        };
        // The observer is synchronous: queue without waiting; when the queue is full,
        // hand the records to a task that waits for room (nothing is dropped).
        let mut msgs = vec![Msg::Line(to_line(&record))];
        if let (Some(_), Some(h)) = (&self.inner.config.snapshots, sha) {
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
}

/// Where the body with this SHA-256 is kept.
pub fn snapshot_path(dir: &Path, sha256_hex: &str) -> PathBuf {
    dir.join(format!("{sha256_hex}.txt"))
}

fn to_line<T: Serialize>(record: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(record)
        .unwrap_or_else(|e| format!("{{\"serialize_error\":\"{e}\"}}").into_bytes());
    line.push(b'\n');
    line
}

/// RFC 3339 UTC with milliseconds.
pub fn rfc3339(t: SystemTime) -> String {
    let t = OffsetDateTime::from(t);
    let t = t.replace_nanosecond(t.nanosecond() / 1_000_000 * 1_000_000).unwrap_or(t);
    t.format(&Rfc3339).unwrap_or_default()
}

fn redact_query(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?<redacted>"),
        None => url.to_owned(),
    }
}

enum Out {
    File(tokio::io::BufWriter<tokio::fs::File>),
    Stdout(tokio::io::BufWriter<tokio::io::Stdout>),
    Memory(MemoryLog),
}

impl Out {
    async fn write(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Out::File(w) => w.write_all(line).await,
            Out::Stdout(w) => w.write_all(line).await,
            Out::Memory(m) => {
                m.push(String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line)).into_owned());
                Ok(())
            }
        }
    }

    /// Hands buffered records to the operating system; `durable` also waits for the disk.
    async fn flush(&mut self, durable: bool) -> io::Result<()> {
        match self {
            Out::File(w) => {
                w.flush().await?;
                if durable { w.get_ref().sync_data().await } else { Ok(()) }
            }
            Out::Stdout(w) => w.flush().await,
            Out::Memory(_) => Ok(()),
        }
    }
}

async fn writer(
    mut rx: mpsc::Receiver<Msg>,
    mut out: Out,
    snapshots: Option<PathBuf>,
    shared: std::sync::Weak<Shared>,
) {
    let fail = |e: &io::Error| {
        if let Some(s) = shared.upgrade() {
            s.healthy.store(false, Ordering::Release);
            if let Ok(mut last) = s.last_error.lock() {
                *last = e.to_string();
            }
            s.lost.fetch_add(1, Ordering::Relaxed);
        }
    };
    let ok = || {
        if let Some(s) = shared.upgrade() {
            s.healthy.store(true, Ordering::Release);
            s.written.fetch_add(1, Ordering::Relaxed);
        }
    };
    while let Some(msg) = rx.recv().await {
        match msg {
            Msg::Line(line) => match out.write(&line).await {
                Ok(()) => ok(),
                Err(e) => fail(&e),
            },
            Msg::Snapshot { sha256, body } => {
                if let Some(dir) = &snapshots {
                    let path = snapshot_path(dir, &sha256);
                    if tokio::fs::metadata(&path).await.is_err() {
                        // Write to a temporary name, then rename: a snapshot is whole or absent.
                        let tmp = dir.join(format!(".{sha256}.tmp"));
                        let written = async {
                            tokio::fs::write(&tmp, &body).await?;
                            tokio::fs::rename(&tmp, &path).await
                        };
                        if let Err(e) = written.await {
                            fail(&e);
                        }
                    }
                }
            }
            Msg::Flush(done) => {
                if let Err(e) = out.flush(true).await {
                    fail(&e);
                }
                let _ = done.send(());
            }
        }
        // Flush when the queue runs dry, so a quiet proxy's log is on disk.
        if rx.is_empty()
            && let Err(e) = out.flush(false).await
        {
            fail(&e);
        }
    }
    let _ = out.flush(true).await;
}
