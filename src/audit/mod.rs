//! The decision log compliance teams rely on: one JSON object per line for every
//! decision and every robots.txt fetch, and the fetched robots.txt bodies kept by SHA-256
//! so every decision can be checked again against the exact file it used. The schema is
//! documented in `docs/audit-log.md` ([`SCHEMA_VERSION`]).
//!
//! A request goes on only once its record is written ([`Durability`]): records of the
//! requests of one moment, from every worker thread, share one `write(2)` (group commit),
//! and the audit thread does the rest off the requests' path (syncing with
//! `Durability::Synced`, writing with `Durability::Buffered`, records no request waits
//! for). Opening a file says how the previous process left it, ending a torn last line
//! first; [`AuditLog::shutdown`] closes it with a `close` record and syncs it. When the log
//! cannot be written, [`OnError`] chooses: refuse further requests (fail closed, the
//! default) or go on and count the lost records.
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

mod answer;
mod commit;
mod config;
mod files;
mod handle;
mod ingress;
mod line;
pub mod lines;
pub(crate) mod merkle;
pub mod note;
mod open;
mod out;
pub mod proof;
mod record;
pub(crate) mod sidecar;
mod snapshot;
mod timestamp;
mod tree;
pub mod verify;
mod writer;

#[cfg(test)]
mod tests;

pub use answer::{RefusalFacts, RefusalRecord};
pub use config::{AuditConfig, AuditError, AuditSetupError, Durability, MemoryLog, OnError, Target};
pub use files::{checkpoints_path, rotated_files};
pub use handle::AuditLog;
pub(crate) use ingress::Text;
pub use ingress::{IngressRecord, IngressRecordRef, IngressRule};
pub use record::SCHEMA_VERSION;
pub(crate) use record::{OutcomeFacts, PaymentRecord, RequestFacts, ResponseUsageRecord};
pub use sidecar::{CheckpointLine, MAX_CHECKPOINT_LEAVES};
pub use snapshot::snapshot_path;
pub use timestamp::rfc3339;
