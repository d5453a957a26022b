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

/// How long a fetch's outcome is to be trusted, as the policy's configuration says
/// (freshness of a copy; the retry delay of a failure).
pub type Lifetime<'a> = &'a (dyn Fn(&FetchOutcome) -> Duration + Send + Sync);

/// What the shared level gave for an origin.
#[derive(Debug)]
pub struct Shared {
    /// The fetch outcome (this replica's, or the one another replica stored).
    pub outcome: FetchOutcome,
    /// This replica made the fetch (the audit log records it, the metrics count it).
    pub fetched_here: bool,
    /// How much longer the outcome is fresh, when it came from the shared level (it was
    /// fetched a while ago); `None`: the policy's own lifetime applies.
    pub fresh_for: Option<Duration>,
}

/// A robots.txt cache shared by replicas: one fetch per origin for the fleet.
pub trait CopyShare: Send + Sync {
    /// The fleet's outcome for `origin`: a stored one still fresh, or one fetched with
    /// `fetcher` by whichever replica holds the fleet's lease (this one, or another that
    /// this one waits for, bounded by the fetch's timeouts). When the shared level cannot
    /// be reached, fetches with `fetcher` alone. `lifetime` says how long to keep what
    /// this replica fetches. Never fails.
    fn fetch<'a>(
        &'a self,
        origin: &'a Origin,
        fetcher: &'a Fetcher,
        lifetime: Lifetime<'a>,
    ) -> ShareFuture<'a, Shared>;
}
