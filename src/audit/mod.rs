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

mod config;
mod handle;
mod line;
mod out;
mod record;
mod snapshot;
mod timestamp;
mod writer;

pub use config::{AuditConfig, AuditError, AuditSetupError, MemoryLog, OnError, Target};
pub use handle::AuditLog;
pub use record::{
    BackoffRecord, DecisionRecord, FetchRecord, LineRecord, OutcomeFacts, OutcomeRecord, PaceRecord,
    PreferenceRecord, RequestFacts, ResponseUsageRecord, RobotsRecord, RuleRecord, SCHEMA_VERSION,
    UsageRecord,
};
pub use snapshot::snapshot_path;
pub use timestamp::rfc3339;
