//! [`CopyShare`]: a second cache level for robots.txt copies, shared by a fleet of
//! replicas (fleet mode keeps it in Redis: `cluster::RedisCopyShare`). The policy's own
//! per-origin cache stays the first level: only a replica without a fresh copy asks it.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::fetch::{FetchOutcome, Fetcher};
use crate::origin::Origin;

/// A future of a [`CopyShare`].
pub type ShareFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// How long a fetch's outcome is to be trusted, as the policy's configuration says: a
/// copy is fresh for a while, then usable stale (while it is refreshed, or after a failed
/// refresh) for `policy.stale_if_error`; a failure is kept for its retry delay.
pub type Lifetime<'a> = &'a (dyn Fn(&FetchOutcome) -> Keep + Send + Sync);

/// How long an outcome is kept ([`Lifetime`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Keep {
    /// Fresh for (a failure: until it is retried).
    pub fresh: Duration,
    /// Then usable stale for (zero for a failure).
    pub stale: Duration,
}

/// What the shared level gave for an origin.
#[derive(Debug)]
pub struct Shared {
    /// The fetch outcome (this replica's, or the one another replica stored).
    pub outcome: FetchOutcome,
    /// This replica made the fetch (the audit log records it, the metrics count it).
    pub fetched_here: bool,
    /// How much longer the outcome is fresh, when it came from the shared level (it was
    /// fetched a while ago; zero for a stale copy: see `expired`); `None`: the policy's own
    /// lifetime applies.
    pub fresh_for: Option<Duration>,
    /// A copy from the shared level that is no longer fresh, but still usable: how long
    /// ago its freshness ended. The policy uses it as it uses a stale copy of its own, and
    /// refreshes it.
    pub expired: Option<Duration>,
    /// With such a copy: the fleet's latest failed refresh of it, and how long until the
    /// next try (meanwhile the copy is used, and no replica fetches).
    pub failure: Option<(FetchOutcome, Duration)>,
}

impl Shared {
    /// An outcome this replica fetched itself (the policy's own lifetime applies).
    pub fn fetched(outcome: FetchOutcome) -> Shared {
        Shared { outcome, fetched_here: true, fresh_for: None, expired: None, failure: None }
    }
}

/// A robots.txt cache shared by replicas: one fetch per origin for the fleet.
pub trait CopyShare: Send + Sync {
    /// The fleet's outcome for `origin`: a stored one still fresh, or one fetched with
    /// `fetcher` by whichever replica holds the fleet's lease (this one, or another that
    /// this one waits for, bounded by the fetch's timeouts). With `stale_ok` (this replica
    /// holds no usable copy), a stored copy past its freshness but still usable is
    /// returned at once, as the policy's own cache serves a stale copy (the policy then
    /// refreshes it, without `stale_ok`); one whose refresh failed, with that failure, to
    /// every caller until the failure's retry delay has passed. When the shared level
    /// cannot be reached, fetches with `fetcher` alone. `lifetime` says how long to keep
    /// what this replica fetches. Never fails.
    fn fetch<'a>(
        &'a self,
        origin: &'a Origin,
        fetcher: &'a Fetcher,
        lifetime: Lifetime<'a>,
        stale_ok: bool,
    ) -> ShareFuture<'a, Shared>;
}
