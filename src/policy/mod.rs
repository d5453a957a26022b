//! The robots.txt policy: for a request's origin, path and product token, allowed or
//! not, and why. It owns the per-origin cache and the failure handling.
//!
//! - **Cache**: bounded by entries and bytes ([moka]); a copy is fresh for
//!   [`PolicyConfig::default_ttl`] (24 h), or for its `Cache-Control: max-age` clamped to
//!   [`PolicyConfig::min_ttl`]..=[`PolicyConfig::max_ttl`]. Unavailable (4xx) answers are
//!   cached like files.
//! - **One fetch per origin**: however many requests wait for an origin without a fresh
//!   copy, one fetch runs and all of them use its result. An expired copy is served while
//!   one background refresh runs (stale-while-revalidate).
//! - **Unreachable** (429, 5xx, network): the last good copy keeps being used for up to
//!   [`PolicyConfig::stale_if_error`] (30 days) after it expired; without one, everything
//!   is disallowed and the fetch is retried with backoff (429 and 503 sooner, honouring
//!   `Retry-After` within bounds).
//! - **Overrides**: operator rules that always allow or always deny a host pattern, with a
//!   reason and an optional expiry.
//! - `/robots.txt` itself is always allowed.
//! - **Fleet**: [`RobotsPolicy::share_copies`] adds a second cache level shared by
//!   replicas ([`CopyShare`]; Redis in fleet mode), asked only on a miss of this one.
//!
//! Freshness uses `tokio::time::Instant`, so tests can move time with tokio's clock.
//!
//! [moka]: https://docs.rs/moka

mod audit_text;
mod cache;
mod config;
mod copy;
mod decision;
mod share;
mod usage;

pub use crate::origin::HostPattern;
pub(crate) use audit_text::{AuditText, DecisionKey};
pub use cache::{FetchObserver, RobotsPolicy};
pub use config::{Override, OverrideAction, PolicyConfig};
#[cfg(test)]
pub(crate) use copy::copy_of;
pub use copy::{CopyContent, Failure, FetchFacts, RobotsCopy};
pub use decision::{DecidingRule, Decision, Reason, VerdictNotes};
#[cfg(test)]
pub(crate) use decision::{decision_for_on, decision_on};
pub use share::{CopyShare, Keep, Lifetime, ShareFuture, Shared};
pub use usage::{CategoryPreference, CitedLine, Purpose, UnknownUsage, UsageCheck, UsageDecision};
