//! The decision log compliance teams rely on: one JSON object per line for every
//! decision and every robots.txt fetch, and the fetched robots.txt bodies kept by SHA-256
//! so every decision can be checked again against the exact file it used. The schema is
//! documented in `docs/audit-log.md` ([`SCHEMA_VERSION`]).
//!
//! Records are written off the request path by one writer task behind a bounded queue:
//! when the disk is slow, requests wait for room rather than records being dropped. The
//! writer lets records gather and writes them together: a record reaches the operating
//! system within about 10 ms; [`AuditLog::shutdown`] drains the queue and syncs to disk.
//! When the log cannot be written,
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

use std::borrow::Cow;
use std::fmt;
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
use tokio::sync::{Notify, mpsc, oneshot};

use crate::fetch::{FetchOutcome, FetchResult};
use crate::origin::Origin;
use crate::policy::{AuditText, Decision, DecisionKey, FetchFacts, FetchObserver, Reason};

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
    /// Serialised by the writer task, off the request's path.
    Decision(Box<DecisionRecord>),
    Snapshot {
        sha256: String,
        body: Bytes,
    },
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
    /// Wakes the writer early when the queue is filling up (see [`writer`]).
    wake: Arc<Notify>,
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

    /// The decision record for a decision (the layer fills in the request fields).
    pub fn decision_record(&self, d: &Decision, request: RequestFacts<'_>) -> DecisionRecord {
        self.record_at(d, request, SystemTime::now())
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
        let line = self.decision_line(d, request, now);
        debug_assert_eq!(
            String::from_utf8_lossy(&line),
            String::from_utf8_lossy(&to_line(&self.record_at(d, request, now))),
            "the direct writer and the serde record disagree"
        );
        self.send(Msg::Line(line)).await
    }

    fn record_at(&self, d: &Decision, request: RequestFacts<'_>, now: SystemTime) -> DecisionRecord {
        let rule = d.rule_fields().map(|(kind, pattern, line, reading, implied)| RuleRecord {
            kind,
            pattern: pattern.to_owned(),
            line,
            reading,
            implied_by_index_html: implied,
        });
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
        DecisionRecord {
            schema_version: SCHEMA_VERSION,
            kind: "decision",
            time: rfc3339(now),
            request_id: request.request_id.to_owned(),
            client: request.client.map(|c| c.to_string()),
            user: request.user.map(str::to_owned),
            method: request.method.to_owned(),
            url: self.logged_url(request.url).into_owned(),
            origin: d.origin.to_string(),
            agent: d.agent.to_string(),
            profile: d.profile.as_str(),
            mode: if request.report_only { "report-only" } else { "enforce" },
            outcome: outcome_of(d, request.report_only),
            reason: d.reason.class(),
            rule,
            explanation: d.to_string(),
            path_visible: request.path_visible,
            robots,
            unreachable_cause: unreachable_cause_of(d),
            override_reason: override_reason_of(d),
            decision_us: micros(request.elapsed),
        }
    }

    /// The JSON line of [`DecisionRecord`] (same keys, order and values), written directly.
    fn decision_line(&self, d: &Decision, request: RequestFacts<'_>, now: SystemTime) -> Vec<u8> {
        let mut out = Vec::with_capacity(1024);
        let o = &mut out;
        o.extend_from_slice(b"{\"schema_version\":");
        json_num(o, SCHEMA_VERSION);
        o.extend_from_slice(b",\"type\":\"decision\",\"time\":\"");
        rfc3339_into(o, now);
        o.extend_from_slice(b"\",\"request_id\":");
        json_str(o, request.request_id);
        o.extend_from_slice(b",\"client\":");
        match request.client {
            Some(c) => {
                o.push(b'"');
                socket_addr_into(o, c);
                o.push(b'"');
            }
            None => o.extend_from_slice(b"null"),
        }
        o.extend_from_slice(b",\"user\":");
        json_opt_str(o, request.user);
        o.extend_from_slice(b",\"method\":");
        json_str(o, request.method);
        o.extend_from_slice(b",\"url\":");
        json_str(o, &self.logged_url(request.url));
        decision_text(o, d, request.report_only);
        o.extend_from_slice(b"\",\"path_visible\":");
        json_bool(o, request.path_visible);
        o.extend_from_slice(b",\"robots\":");
        match d.fetch_facts() {
            Some(f) => {
                // Everything up to the age is the same for every decision on this copy.
                o.extend_from_slice(f.audit_text.facts.get_or_init(|| robots_head(f)).as_bytes());
                o.extend_from_slice(b",\"age_s\":");
                match d.age {
                    Some(a) => {
                        let _ = serde_json::to_writer(&mut *o, &a.as_secs_f64());
                    }
                    None => o.extend_from_slice(b"null"),
                }
                o.extend_from_slice(b",\"stale\":");
                json_bool(o, d.stale);
                o.push(b'}');
            }
            None => o.extend_from_slice(b"null"),
        }
        o.extend_from_slice(b",\"unreachable_cause\":");
        json_opt_str(o, unreachable_cause_of(d).as_deref());
        o.extend_from_slice(b",\"override_reason\":");
        json_opt_str(o, override_reason_of(d).as_deref());
        o.extend_from_slice(b",\"decision_us\":");
        json_num(o, micros(request.elapsed));
        o.extend_from_slice(b"}\n");
        out
    }

    fn logged_url<'u>(&self, url: &'u str) -> Cow<'u, str> {
        if self.inner.config.redact_query { Cow::Owned(redact_query(url)) } else { Cow::Borrowed(url) }
    }
}

/// Writes the decision's own fields, `"origin"` to `"explanation"`, the same for every
/// decision alike on one robots.txt copy: remembered with the copy ([`DecisionKey`]) and
/// copied from there, else written out.
fn decision_text(o: &mut Vec<u8>, d: &Decision, report_only: bool) {
    let Some(facts) = d.fetch_facts() else { return decision_fields(o, d, report_only) };
    let Ok(mut known) = facts.audit_text.decisions.lock() else { return decision_fields(o, d, report_only) };
    if let Some((_, text)) = known.iter().find(|(k, _)| k.is(d, report_only)) {
        o.extend_from_slice(text.as_bytes());
        return;
    }
    let start = o.len();
    decision_fields(o, d, report_only);
    if known.len() < AuditText::MAX_DECISIONS
        && let Some(key) = DecisionKey::of(d, report_only)
        && let Ok(text) = std::str::from_utf8(&o[start..])
    {
        known.push((key, text.into()));
    }
}

fn decision_fields(o: &mut Vec<u8>, d: &Decision, report_only: bool) {
    o.extend_from_slice(b",\"origin\":\"");
    let _ = d.origin.write_to(&mut JsonText(o));
    o.extend_from_slice(b"\",\"agent\":");
    json_str(o, d.agent.as_ref());
    o.extend_from_slice(b",\"profile\":");
    json_str(o, d.profile.as_str());
    o.extend_from_slice(b",\"mode\":");
    json_str(o, if report_only { "report-only" } else { "enforce" });
    o.extend_from_slice(b",\"outcome\":");
    json_str(o, outcome_of(d, report_only));
    o.extend_from_slice(b",\"reason\":");
    json_str(o, d.reason.class());
    o.extend_from_slice(b",\"rule\":");
    match d.rule_fields() {
        Some((kind, pattern, line, reading, implied)) => {
            o.extend_from_slice(b"{\"kind\":");
            json_str(o, kind);
            o.extend_from_slice(b",\"pattern\":");
            json_str(o, pattern);
            o.extend_from_slice(b",\"line\":");
            json_num(o, line);
            o.extend_from_slice(b",\"reading\":");
            json_str(o, reading);
            o.extend_from_slice(b",\"implied_by_index_html\":");
            json_bool(o, implied);
            o.push(b'}');
        }
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"explanation\":\"");
    let _ = fmt::Write::write_fmt(&mut JsonText(o), format_args!("{d}"));
}

fn outcome_of(d: &Decision, report_only: bool) -> &'static str {
    match (d.allowed, report_only, &d.reason) {
        (_, _, Reason::DestinationDenied { .. }) => "destination-denied",
        (true, _, _) => "allowed",
        (false, false, _) => "disallowed",
        (false, true, _) => "would-disallow",
    }
}

fn unreachable_cause_of(d: &Decision) -> Option<String> {
    match &d.reason {
        Reason::Unreachable { cause } => Some(cause.to_string()),
        _ => d.failure.as_ref().map(|f| f.cause.to_string()),
    }
}

fn override_reason_of(d: &Decision) -> Option<String> {
    match &d.reason {
        Reason::Override { action, hosts, reason } => Some(format!("{} {hosts}: {reason}", action.as_str())),
        _ => None,
    }
}

fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// Whether `s` has a byte a JSON string must escape.
fn needs_escape(s: &str) -> bool {
    // No early exit, so the compiler can check many bytes per instruction.
    s.bytes().fold(false, |acc, b| acc | (b < 0x20) | (b == b'"') | (b == b'\\'))
}

/// A JSON string: copied as is when nothing in it needs escaping (the usual case),
/// else through serde_json's escaper.
fn json_str(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

fn json_num(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

fn json_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// `{"url":…,"final_url":…,"status":…,"sha256":…,"fetched_at":…,"bytes":…,"redirects":…`
/// of a decision record's `robots` object: the part that depends on the fetch alone.
fn robots_head(f: &FetchFacts) -> Box<str> {
    let mut o = Vec::with_capacity(320);
    o.extend_from_slice(b"{\"url\":");
    json_str(&mut o, &f.url);
    o.extend_from_slice(b",\"final_url\":");
    json_str(&mut o, &f.final_url);
    o.extend_from_slice(b",\"status\":");
    match f.status {
        Some(s) => json_num(&mut o, s),
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"sha256\":");
    json_opt_str(&mut o, f.sha256_hex().as_deref());
    o.extend_from_slice(b",\"fetched_at\":\"");
    rfc3339_into(&mut o, f.fetched_at);
    o.extend_from_slice(b"\",\"bytes\":");
    json_num(&mut o, f.bytes);
    o.extend_from_slice(b",\"redirects\":");
    json_num(&mut o, f.redirects);
    // Built from `&str`s and digits: always UTF-8.
    String::from_utf8(o).unwrap_or_default().into_boxed_str()
}

/// `a.b.c.d:port` or `[v6]:port`, as `SocketAddr`'s `Display` writes it.
fn socket_addr_into(out: &mut Vec<u8>, addr: std::net::SocketAddr) {
    let mut digits = itoa::Buffer::new();
    match addr {
        std::net::SocketAddr::V4(a) => {
            for (i, octet) in a.ip().octets().into_iter().enumerate() {
                if i > 0 {
                    out.push(b'.');
                }
                out.extend_from_slice(digits.format(octet).as_bytes());
            }
        }
        std::net::SocketAddr::V6(a) => {
            let _ = std::io::Write::write_fmt(out, format_args!("[{}]", a.ip()));
        }
    }
    out.push(b':');
    out.extend_from_slice(digits.format(addr.port()).as_bytes());
}

/// Text written into a JSON string (between its quotes), escaped as serde_json does.
struct JsonText<'a>(&'a mut Vec<u8>);

impl fmt::Write for JsonText<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let out = &mut *self.0;
        if !needs_escape(s) {
            out.extend_from_slice(s.as_bytes());
            return Ok(());
        }
        let mut start = 0;
        for (i, &b) in s.as_bytes().iter().enumerate() {
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..0x20 => b"",
                _ => continue,
            };
            out.extend_from_slice(&s.as_bytes()[start..i]);
            if escape.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            } else {
                out.extend_from_slice(escape);
            }
            start = i + 1;
        }
        out.extend_from_slice(&s.as_bytes()[start..]);
        Ok(())
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

/// RFC 3339 UTC with milliseconds, always three digits: `2026-11-23T13:36:57.398Z`.
///
/// Written by hand (days to civil date, then digits): this runs twice per audit record,
/// and a general formatter costs several times more. Times outside 1970..=9999 go
/// through the `time` crate.
pub fn rfc3339(t: SystemTime) -> String {
    let mut out = Vec::with_capacity(24);
    rfc3339_into(&mut out, t);
    // Digits and separators (or the `time` crate's text): always UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// [`rfc3339`], appended to `out`.
fn rfc3339_into(out: &mut Vec<u8>, t: SystemTime) {
    let since = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) if d.as_secs() < 253_402_300_800 => d, // 10000-01-01
        _ => {
            let t = OffsetDateTime::from(t);
            let t = t.replace_nanosecond(t.nanosecond() / 1_000_000 * 1_000_000).unwrap_or(t);
            out.extend_from_slice(t.format(&Rfc3339).unwrap_or_default().as_bytes());
            return;
        }
    };
    let secs = since.as_secs();
    let (year, month, day) = civil_from_days(secs / 86_400);
    let sod = secs % 86_400;
    let fields = [
        (year, 4),
        (u64::from(month), 2),
        (u64::from(day), 2),
        (sod / 3600, 2),
        (sod / 60 % 60, 2),
        (sod % 60, 2),
        (u64::from(since.subsec_millis()), 3),
    ];
    let mut text = [0u8; 24];
    let mut at = 0;
    for (i, (value, width)) in fields.into_iter().enumerate() {
        let mut v = value;
        for k in (0..width).rev() {
            text[at + k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        at += width;
        if let Some(&sep) = b"--T::.Z".get(i) {
            text[at] = sep;
            at += 1;
        }
    }
    out.extend_from_slice(&text[..at]);
}

/// (year, month, day) of a day count since 1970-01-01, proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u8, u8) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

fn redact_query(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?<redacted>"),
        None => url.to_owned(),
    }
}

/// Where records go. A file is written with plain `write(2)` calls from the writer task:
/// they only copy into the page cache, and a hop to tokio's blocking pool for each batch
/// (what `tokio::fs` does) cost more than the write itself under load. Only the durable
/// flush (`fdatasync`) runs on the blocking pool.
enum Out {
    File(std::io::BufWriter<std::fs::File>),
    Stdout(tokio::io::BufWriter<tokio::io::Stdout>),
    Memory(MemoryLog),
}

impl Out {
    async fn write(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Out::File(w) => std::io::Write::write_all(w, line),
            Out::Stdout(w) => w.write_all(line).await,
            Out::Memory(m) => {
                m.push(String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line)).into_owned());
                Ok(())
            }
        }
    }

    /// Serialises one record as a line, straight into the file's buffer.
    async fn write_record<T: Serialize>(&mut self, record: &T) -> io::Result<()> {
        match self {
            Out::File(w) => {
                serde_json::to_writer(&mut *w, record).map_err(io::Error::other)?;
                std::io::Write::write_all(w, b"\n")
            }
            _ => self.write(&to_line(record)).await,
        }
    }

    /// Hands buffered records to the operating system; `durable` also waits for the disk.
    async fn flush(&mut self, durable: bool) -> io::Result<()> {
        match self {
            Out::File(w) => {
                std::io::Write::flush(w)?;
                if durable {
                    let file = w.get_ref().try_clone()?;
                    tokio::task::spawn_blocking(move || file.sync_data()).await.map_err(io::Error::other)?
                } else {
                    Ok(())
                }
            }
            Out::Stdout(w) => w.flush().await,
            Out::Memory(_) => Ok(()),
        }
    }
}

/// How long a record may wait before it is handed to the operating system (a full buffer
/// goes at once). Flushing whenever the queue ran dry wrote a busy proxy's log a dozen
/// records at a time, one system call each.
const FLUSH_AFTER: Duration = Duration::from_millis(10);

/// Messages taken from the queue at a time.
const BATCH: usize = 256;

async fn writer(
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
        let path = snapshot_path(dir, sha256);
        if tokio::fs::metadata(&path).await.is_ok() {
            return;
        }
        // Write to a temporary name, then rename: a snapshot is whole or absent.
        let tmp = dir.join(format!(".{sha256}.tmp"));
        let written = async {
            tokio::fs::write(&tmp, body).await?;
            tokio::fs::rename(&tmp, &path).await
        };
        if let Err(e) = written.await {
            self.fail(&e);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written formatter names the same instant as the `time` crate does.
    #[test]
    fn rfc3339_matches_the_time_crate() {
        let mut cases = vec![0u64, 951_782_400, 1_709_164_800, 4_107_542_399, 253_402_300_799];
        let mut secs: u64 = 1;
        while secs < 253_402_300_799 {
            cases.push(secs);
            secs = secs * 3 + 86_399 + secs % 7;
        }
        for (i, s) in cases.into_iter().enumerate() {
            let t =
                SystemTime::UNIX_EPOCH + Duration::new(s, (i as u32).wrapping_mul(7_919_111) % 1_000_000_000);
            let ours = rfc3339(t);
            assert_eq!(ours.len(), 24, "{ours}");
            let parsed = OffsetDateTime::parse(&ours, &Rfc3339).unwrap_or_else(|e| panic!("{ours}: {e}"));
            let exact = OffsetDateTime::from(t);
            assert_eq!(parsed.unix_timestamp(), exact.unix_timestamp(), "{ours}");
            assert_eq!(parsed.millisecond(), exact.millisecond(), "{ours}");
        }
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_441_017_398)),
            "2026-11-23T13:36:57.398Z"
        );
    }

    /// Text escaped into a JSON string reads as serde_json writes it, for every ASCII
    /// byte, non-ASCII text and text split across several writes.
    #[test]
    fn json_text_escapes_as_serde_json_does() {
        let ascii: String = (0u8..0x80).map(char::from).collect();
        for text in [ascii.as_str(), "", "plain", "a\"b\\c\u{7f}é\u{2028}😀", "\u{0}\u{1f}end"] {
            let mut ours = b"\"".to_vec();
            let half = text.char_indices().nth(text.chars().count() / 2).map_or(text.len(), |(i, _)| i);
            let (a, b) = text.split_at(half);
            let _ = fmt::Write::write_str(&mut JsonText(&mut ours), a);
            let _ = fmt::Write::write_str(&mut JsonText(&mut ours), b);
            ours.push(b'"');
            assert_eq!(String::from_utf8_lossy(&ours), serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    /// The request fields of a plain GET of `url`.
    fn get(url: &str, report_only: bool) -> RequestFacts<'_> {
        RequestFacts {
            request_id: "r",
            client: None,
            user: None,
            method: "GET",
            url,
            path_visible: true,
            report_only,
            elapsed: Duration::from_micros(5),
        }
    }

    /// Decisions alike on one copy share their text, and every line still reads as the
    /// serde record of its own decision: across rules, no rule, product tokens, profiles,
    /// modes, and past the number of kinds a copy remembers.
    #[tokio::test]
    async fn remembered_decision_text_is_each_decisions_own() {
        use crate::policy::{copy_of, decision_on};
        use crate::rep::Profile;
        let origin = Arc::new(Origin::parse("https://example.com").unwrap());
        let copy = copy_of(
            &origin,
            "User-agent: *\nDisallow: /private\nAllow: /private/ok\n\nUser-agent: special\nDisallow: /\n",
        );
        let (log, _) = AuditLog::memory();
        let mut agents: Vec<Arc<str>> = vec!["somebot".into(), "special".into()];
        agents.extend((0..AuditText::MAX_DECISIONS).map(|i| Arc::from(format!("bot{i}"))));
        let mut lines = 0;
        for round in 0..2 {
            for agent in &agents {
                for profile in Profile::ALL {
                    for path in ["/", "/private/x", "/private/ok/1", "/robots.txt"] {
                        for report_only in [false, true] {
                            let d = decision_on(&copy, &origin, agent, profile, path);
                            let url = format!("https://example.com{path}");
                            let request = get(&url, report_only);
                            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(round);
                            let ours = log.decision_line(&d, request, now);
                            let serde = to_line(&log.record_at(&d, request, now));
                            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&serde));
                            lines += 1;
                        }
                    }
                }
            }
        }
        assert!(lines > 4 * AuditText::MAX_DECISIONS);
        let known = copy.facts.audit_text.decisions.lock().unwrap().len();
        assert_eq!(known, AuditText::MAX_DECISIONS, "bounded, and filled by the kinds seen");
    }

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

    /// Client addresses read as `SocketAddr`'s `Display` writes them.
    #[test]
    fn socket_addresses_as_display_writes_them() {
        for addr in ["127.0.0.1:3128", "0.0.0.0:0", "255.255.255.255:65535", "[::1]:80", "[2001:db8::1]:443"]
        {
            let addr: std::net::SocketAddr = addr.parse().unwrap();
            let mut ours = Vec::new();
            socket_addr_into(&mut ours, addr);
            assert_eq!(String::from_utf8_lossy(&ours), addr.to_string());
        }
    }
}
