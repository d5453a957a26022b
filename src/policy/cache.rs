//! [`RobotsPolicy`]: the per-origin cache (a cell per origin, freshness, one fetch per
//! origin, background refresh, backoff after failures) and the decisions made from it.

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::config::{Override, OverrideAction, PolicyConfig};
use super::copy::{CopyContent, Failure, FetchFacts, RobotsCopy};
use super::decision::{Decision, Reason, judge};
use super::share::{CopyShare, Keep, Shared};
use super::usage::UsageCheck;
use crate::fetch::{FetchOutcome, FetchResult, Fetcher, Unreachable};
use crate::origin::Origin;
use crate::rep::{Profile, RobotsTxt};

/// Sees every robots.txt fetch the policy makes (for the audit log and metrics).
pub trait FetchObserver: Send + Sync {
    /// Called after each fetch, with the origin and what came back.
    fn fetched(&self, origin: &Origin, outcome: &FetchOutcome);

    /// Called when a copy another replica of the fleet fetched arrives through the shared
    /// level ([`CopyShare`]) instead of a fetch (the audit log keeps its snapshot).
    fn received(&self, _origin: &Origin, _outcome: &FetchOutcome) {}
}

/// What the cache holds for one origin.
#[derive(Debug, Default)]
struct Entry {
    copy: Option<Arc<RobotsCopy>>,
    /// Until when `copy` is fresh.
    fresh_until: Option<Instant>,
    /// The latest refresh failed (cleared by a success).
    failure: Option<Arc<Failure>>,
}

impl Entry {
    /// Whether its copy is fresh at `now`: the one place freshness is decided.
    fn is_fresh(&self, now: Instant) -> bool {
        self.fresh_until.is_some_and(|t| now < t)
    }
}

/// One origin's cache slot: its entry, and the lock one refresh at a time holds.
#[derive(Debug)]
struct Cell {
    origin: Arc<Origin>,
    entry: RwLock<Arc<Entry>>,
    refresh: tokio::sync::Mutex<()>,
    refreshing: AtomicBool,
    weight: AtomicU32,
}

impl Cell {
    fn entry(&self) -> Arc<Entry> {
        match self.entry.read() {
            Ok(e) => e.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn set(&self, entry: Entry) {
        let entry = Arc::new(entry);
        match self.entry.write() {
            Ok(mut e) => *e = entry,
            Err(poisoned) => *poisoned.into_inner() = entry,
        }
    }
}

/// Decides requests against robots.txt files, fetching and caching them.
///
/// ```no_run
/// # async fn demo(fetcher: robotsgate::fetch::Fetcher) {
/// use robotsgate::origin::Origin;
/// use robotsgate::policy::{PolicyConfig, RobotsPolicy};
///
/// let policy = RobotsPolicy::new(fetcher, PolicyConfig::default());
/// let origin = Origin::parse("https://example.com/").unwrap();
/// let d = policy.decide(&origin, "/private/x", "ExampleBot".into()).await;
/// println!("{} {}", if d.allowed { "allowed" } else { "disallowed" }, d);
/// # }
/// ```
#[derive(Clone)]
pub struct RobotsPolicy {
    inner: Arc<Inner>,
}

struct Inner {
    fetcher: Fetcher,
    /// Replaced whole on reload; the cache stays.
    config: arc_swap::ArcSwap<PolicyConfig>,
    /// Keys hashed with foldhash (randomly seeded): SipHash cost more than the rest of a
    /// cache hit.
    cache: moka::sync::Cache<Origin, Arc<Cell>, foldhash::quality::RandomState>,
    observers: Vec<Arc<dyn FetchObserver>>,
    stats: CacheStats,
    /// The fleet's shared level (fleet mode), asked on a miss instead of fetching alone.
    share: std::sync::OnceLock<Arc<dyn CopyShare>>,
}

/// How decisions found the cache.
#[derive(Debug, Default)]
struct CacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
    stale: AtomicU64,
}

impl fmt::Debug for RobotsPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsPolicy").field("config", &self.inner.config.load()).finish_non_exhaustive()
    }
}

/// Fixed bytes counted per cached origin on top of its file: its cell and entry, the
/// copy and its fetch facts (two URLs), the audit texts kept with it and moka's node.
/// Measured with heaptrack over a broad crawl of 8,636 origins, each a two-line robots.txt
/// (benches/README.md, "A broad crawl"): about 1.9 KB of heap per origin besides the
/// parsed file, which the weight counts twice (its rule sets are built on first use).
const ENTRY_OVERHEAD: u64 = 2048;

impl RobotsPolicy {
    /// A policy fetching with `fetcher`.
    pub fn new(fetcher: Fetcher, config: PolicyConfig) -> RobotsPolicy {
        Self::with_observer(fetcher, config, None)
    }

    /// A policy that reports every fetch to `observer`.
    pub fn with_observer(
        fetcher: Fetcher,
        config: PolicyConfig,
        observer: Option<Arc<dyn FetchObserver>>,
    ) -> RobotsPolicy {
        Self::with_observers(fetcher, config, observer.into_iter().collect())
    }

    /// A policy that reports every fetch to each of `observers`.
    pub fn with_observers(
        fetcher: Fetcher,
        config: PolicyConfig,
        observers: Vec<Arc<dyn FetchObserver>>,
    ) -> RobotsPolicy {
        // One weight bounds both bytes and entries: every entry weighs at least
        // max_bytes / max_entries.
        let floor =
            (config.max_bytes / config.max_entries.max(1)).clamp(ENTRY_OVERHEAD, u32::MAX as u64) as u32;
        let mut cache = moka::sync::Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(move |_: &Origin, cell: &Arc<Cell>| cell.weight.load(Ordering::Relaxed).max(floor));
        if !config.max_idle.is_zero() {
            cache = cache.time_to_idle(config.max_idle);
        }
        let cache = cache.build_with_hasher(foldhash::quality::RandomState::default());
        let config = arc_swap::ArcSwap::from_pointee(config);
        RobotsPolicy {
            inner: Arc::new(Inner {
                fetcher,
                config,
                cache,
                observers,
                stats: CacheStats::default(),
                share: std::sync::OnceLock::new(),
            }),
        }
    }

    /// Shares robots.txt copies with a fleet of replicas through `share` (fleet mode): a
    /// replica without a fresh copy asks it before fetching, and one fetch serves the
    /// fleet. Copies held in this process are used without asking it. Set once: a second
    /// call is ignored (and says so by returning `false`).
    pub fn share_copies(&self, share: Arc<dyn CopyShare>) -> bool {
        self.inner.share.set(share).is_ok()
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<PolicyConfig> {
        self.inner.config.load_full()
    }

    /// Replaces the configuration (profile, freshness, failure handling, overrides); the
    /// cached files stay. The cache bounds are fixed at start: changes to them apply on
    /// the next start.
    pub fn reload(&self, config: PolicyConfig) {
        self.inner.config.store(Arc::new(config));
    }

    /// Decisions that found a fresh copy, that needed a fetch, and that used a stale copy.
    pub fn cache_stats(&self) -> (u64, u64, u64) {
        let s = &self.inner.stats;
        (s.hits.load(Ordering::Relaxed), s.misses.load(Ordering::Relaxed), s.stale.load(Ordering::Relaxed))
    }

    /// Origins cached (approximate, as moka counts).
    pub fn cached_origins(&self) -> u64 {
        self.inner.cache.entry_count()
    }

    /// Bytes cached (approximate).
    pub fn cached_bytes(&self) -> u64 {
        self.inner.cache.weighted_size()
    }

    /// Runs pending cache maintenance (evictions, origins past `max_idle`) now. The cache
    /// runs it as it is used; call this where it may sit unused (the proxy does every few
    /// seconds) and in tests observing the bounds.
    pub async fn sync(&self) {
        self.inner.cache.run_pending_tasks();
    }

    /// Decides `path` (path and query) on `origin` for `agent`, under the configured profile.
    pub async fn decide(&self, origin: &Origin, path: &str, agent: Arc<str>) -> Decision {
        let profile = self.inner.config.load().profile;
        self.decide_with(origin, path, agent, profile).await
    }

    /// [`RobotsPolicy::decide`] under a chosen profile.
    pub async fn decide_with(
        &self,
        origin: &Origin,
        path: &str,
        agent: Arc<str>,
        profile: Profile,
    ) -> Decision {
        self.decide_for(origin, path, agent, profile, UsageCheck::default()).await
    }

    /// [`RobotsPolicy::decide_with`] for a request made for a purpose: a path robots.txt
    /// allows also gets the site's AI-usage preferences for it ([`Decision::usage`]).
    /// Operator overrides and `/robots.txt` itself are not checked for usage.
    pub async fn decide_for(
        &self,
        origin: &Origin,
        path: &str,
        agent: Arc<str>,
        profile: Profile,
        usage: UsageCheck,
    ) -> Decision {
        let base = |origin: Arc<Origin>, reason: Reason, allowed: bool| {
            Decision::without_robots(origin, agent.clone(), profile, reason, allowed)
        };
        if is_robots_txt(path) {
            return base(Arc::new(origin.clone()), Reason::RobotsTxtPath, true);
        }
        if let Some(o) = self.override_for(origin) {
            let reason =
                Reason::Override { action: o.action, hosts: o.hosts.to_string(), reason: o.reason.clone() };
            return base(Arc::new(origin.clone()), reason, o.action == OverrideAction::Allow);
        }
        let cell = self.cell(origin);
        let (entry, fresh_at) = self.current(&cell).await;
        let was_fresh = fresh_at.is_some();
        let now = fresh_at.unwrap_or_else(Instant::now);
        let fresh = entry.is_fresh(now);
        let mut d = base(cell.origin.clone(), Reason::NoRuleMatched, true);
        match &entry.copy {
            Some(copy) if fresh || self.stale_usable(&entry, now) => {
                d.age = Some(now.saturating_duration_since(copy.fetched));
                d.stale = !fresh;
                if !fresh {
                    d.failure = entry.failure.clone();
                }
                judge(&mut d, copy, path, usage);
                d.robots = Some(copy.clone());
            }
            _ => {
                let failure = entry.failure.clone();
                let cause = failure.as_ref().map(|f| f.cause.clone());
                d.allowed = false;
                d.reason = Reason::Unreachable {
                    cause: cause.unwrap_or(Unreachable::Protocol("robots.txt not fetched".into())),
                };
                d.failure = failure;
            }
        }
        let stats = &self.inner.stats;
        let counter = if was_fresh {
            &stats.hits
        } else if d.stale {
            &stats.stale
        } else {
            &stats.misses
        };
        counter.fetch_add(1, Ordering::Relaxed);
        d
    }

    fn override_for(&self, origin: &Origin) -> Option<Override> {
        let config = self.inner.config.load();
        if config.overrides.is_empty() {
            return None;
        }
        let now = SystemTime::now();
        config
            .overrides
            .iter()
            .find(|o| o.expires.is_none_or(|e| now < e) && o.hosts.matches(origin.host()))
            .cloned()
    }

    /// The origin's cell, made on first use. Making one is cheap and does no I/O (the fetch
    /// happens in [`RobotsPolicy::current`]), so the cache is moka's synchronous one: its
    /// lookup costs less than the async cache's on every decision.
    fn cell(&self, origin: &Origin) -> Arc<Cell> {
        self.inner.cache.get_with_by_ref(origin, || {
            Arc::new(Cell {
                origin: Arc::new(origin.clone()),
                entry: RwLock::new(Arc::new(Entry::default())),
                refresh: tokio::sync::Mutex::new(()),
                refreshing: AtomicBool::new(false),
                weight: AtomicU32::new(ENTRY_OVERHEAD as u32),
            })
        })
    }

    /// Whether an expired copy may still be used: while it is revalidated, and after a
    /// failed refresh for up to `stale_if_error` past its expiry.
    fn stale_usable(&self, entry: &Entry, now: Instant) -> bool {
        let (Some(_), Some(expired)) = (&entry.copy, entry.fresh_until) else { return false };
        expired + self.inner.config.load().stale_if_error > now
    }

    /// The entry to decide from: fetches when there is nothing usable (one fetch per
    /// origin), and starts a background refresh for an expired copy; with the instant it
    /// was found fresh at, if it was.
    async fn current(&self, cell: &Arc<Cell>) -> (Arc<Entry>, Option<Instant>) {
        let now = Instant::now();
        let entry = cell.entry();
        if entry.is_fresh(now) {
            return (entry, Some(now));
        }
        (Box::pin(self.current_slow(cell, entry, now)).await, None)
    }

    /// [`RobotsPolicy::current`] for an entry that is not fresh.
    async fn current_slow(&self, cell: &Arc<Cell>, entry: Arc<Entry>, now: Instant) -> Arc<Entry> {
        let retry_due = entry.failure.as_ref().is_none_or(|f| now >= f.retry_at);
        if entry.copy.is_some() && self.stale_usable(&entry, now) {
            if retry_due {
                self.refresh_in_background(cell);
            }
            return entry;
        }
        if !retry_due {
            return entry; // the last fetch failed and the retry is not due yet
        }
        // Nothing usable: fetch now. Requests that come meanwhile wait for this fetch.
        let _guard = cell.refresh.lock().await;
        let entry = cell.entry();
        let now = Instant::now();
        let fresh = entry.is_fresh(now);
        let retry_due = entry.failure.as_ref().is_none_or(|f| now >= f.retry_at);
        let settled_meanwhile =
            fresh || !retry_due || (entry.copy.is_some() && self.stale_usable(&entry, now));
        if settled_meanwhile && (entry.copy.is_some() || entry.failure.is_some()) {
            return entry;
        }
        if self.refresh(cell).await {
            // A stale copy from the fleet's shared level: used now, refreshed meanwhile.
            self.refresh_in_background(cell);
        }
        cell.entry()
    }

    fn refresh_in_background(&self, cell: &Arc<Cell>) {
        if cell.refreshing.swap(true, Ordering::AcqRel) {
            return;
        }
        let this = self.clone();
        let cell = cell.clone();
        tokio::spawn(async move {
            let guard = cell.refresh.lock().await;
            let entry = cell.entry();
            let now = Instant::now();
            let fresh = entry.is_fresh(now);
            let retry_due = entry.failure.as_ref().is_none_or(|f| now >= f.retry_at);
            if !fresh && retry_due {
                this.refresh(&cell).await;
            }
            drop(guard);
            cell.refreshing.store(false, Ordering::Release);
        });
    }

    /// Fetches and stores the result. The caller holds `cell.refresh`. True when what it
    /// stored is a stale copy from the fleet's shared level that is to be refreshed (no
    /// failed refresh of it is waiting for its retry).
    async fn refresh(&self, cell: &Arc<Cell>) -> bool {
        let old = cell.entry();
        let streak = old.failure.as_ref().map_or(0, |f| f.streak) + 1;
        let shared = match self.inner.share.get() {
            Some(share) => {
                let stale = self.inner.config.load().stale_if_error;
                let lifetime = |o: &FetchOutcome| Keep {
                    fresh: self.lifetime(o, streak),
                    stale: if matches!(o.result, FetchResult::Unreachable(_)) {
                        Duration::ZERO
                    } else {
                        stale
                    },
                };
                // Without a usable copy of its own, this replica takes the fleet's stale one.
                let stale_ok = old.copy.is_none() || !self.stale_usable(&old, Instant::now());
                let mut shared = share.fetch(&cell.origin, &self.inner.fetcher, &lifetime, stale_ok).await;
                if stale_ok && shared.failure.is_none() && shared.expired.is_some_and(|ago| ago >= stale) {
                    // Stale past what this replica's own configuration allows (another
                    // replica kept it longer): not usable here, so refreshed now instead.
                    shared = share.fetch(&cell.origin, &self.inner.fetcher, &lifetime, false).await;
                }
                for observer in &self.inner.observers {
                    if shared.fetched_here {
                        observer.fetched(&cell.origin, &shared.outcome);
                    } else {
                        observer.received(&cell.origin, &shared.outcome);
                    }
                }
                shared
            }
            None => {
                let outcome = self.inner.fetcher.fetch(&cell.origin).await;
                for observer in &self.inner.observers {
                    observer.fetched(&cell.origin, &outcome);
                }
                Shared::fetched(outcome)
            }
        };
        let Shared { outcome, fresh_for, expired, failure: fleet_failure, .. } = shared;
        let now = Instant::now();
        // A copy another replica fetched is as old as its fetch.
        let fetched = match (fresh_for, expired) {
            (None, None) => now,
            _ => {
                let age = std::time::SystemTime::now().duration_since(outcome.fetched_at).unwrap_or_default();
                now.checked_sub(age).unwrap_or(now)
            }
        };
        let lifetime = fresh_for.unwrap_or_else(|| self.lifetime(&outcome, streak));
        // A stale copy from the fleet: its freshness ended that long ago.
        let fresh_until = match expired {
            Some(ago) => now.checked_sub(ago).unwrap_or(now),
            None => now + lifetime,
        };
        let to_refresh = expired.is_some() && fleet_failure.is_none();
        // ... and its refresh failed: the fleet's failure, until its retry.
        let fleet_failure = fleet_failure.and_then(|(o, retry)| match o.result {
            FetchResult::Unreachable(ref cause) => Some(Arc::new(Failure {
                facts: FetchFacts::of(&o),
                cause: cause.clone(),
                streak,
                retry_at: now + retry,
            })),
            _ => None,
        });
        let facts = FetchFacts::of(&outcome);
        let content = match &outcome.result {
            FetchResult::Success { .. } => {
                // Kept to its first 500 KiB: its last line may have been cut there.
                let robots = if outcome.truncated {
                    RobotsTxt::parse_truncated(&outcome.body)
                } else {
                    RobotsTxt::parse(&outcome.body)
                };
                for ignored in robots.ignored_pace_values() {
                    tracing::info!(
                        origin = %cell.origin, line = ignored.line, directive = ignored.directive,
                        "robots.txt pacing value not understood, ignored"
                    );
                }
                Some(CopyContent::Parsed(Box::new(robots)))
            }
            FetchResult::Unavailable { status } => Some(CopyContent::Unavailable { status: *status }),
            FetchResult::TooManyRedirects => Some(CopyContent::TooManyRedirects),
            FetchResult::Unreachable(_) => None,
        };
        let entry = match (content, outcome.result) {
            (Some(content), _) => {
                let weight = match &content {
                    // Room for the rule sets built on first use, too.
                    CopyContent::Parsed(r) => 2 * r.heap_bytes() as u64 + ENTRY_OVERHEAD,
                    _ => ENTRY_OVERHEAD,
                };
                cell.weight.store(weight.min(u32::MAX as u64) as u32, Ordering::Relaxed);
                Entry {
                    copy: Some(Arc::new(RobotsCopy { facts, content, fetched })),
                    fresh_until: Some(fresh_until),
                    failure: fleet_failure,
                }
            }
            (None, FetchResult::Unreachable(cause)) => Entry {
                copy: old.copy.clone(),
                fresh_until: old.fresh_until,
                failure: Some(Arc::new(Failure { facts, cause, streak, retry_at: now + lifetime })),
            },
            (None, _) => return false,
        };
        cell.set(entry);
        // Re-insert so the cache sees the new weight.
        self.inner.cache.insert(Origin::clone(&cell.origin), cell.clone());
        to_refresh
    }

    /// How long `outcome` is kept: a copy's freshness (its `max-age` within the configured
    /// bounds), or, for a failure that is the `streak`th in a row, the delay before the
    /// next try.
    fn lifetime(&self, outcome: &FetchOutcome, streak: u32) -> Duration {
        match &outcome.result {
            FetchResult::Unreachable(cause) => self.backoff(cause, streak, outcome.retry_after),
            _ => {
                let config = self.inner.config.load();
                outcome.max_age.map_or(config.default_ttl, |a| {
                    a.clamp(config.min_ttl, config.max_ttl.max(config.min_ttl))
                })
            }
        }
    }

    /// Delay before the next try after `streak` failures in a row.
    fn backoff(&self, cause: &Unreachable, streak: u32, retry_after: Option<Duration>) -> Duration {
        let c = self.inner.config.load();
        let busy = matches!(cause, Unreachable::Status(429 | 503));
        let base = if busy { c.retry_busy } else { c.retry_min };
        let doubling = base.saturating_mul(1u32 << (streak - 1).min(16));
        let delay = match (busy, retry_after) {
            (true, Some(ra)) => ra.max(c.retry_busy),
            _ => doubling,
        };
        delay.min(c.retry_max)
    }
}

/// The path part is `/robots.txt`.
fn is_robots_txt(path: &str) -> bool {
    path.split(['?', '#']).next() == Some("/robots.txt")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn robots_txt_path() {
        assert!(is_robots_txt("/robots.txt"));
        assert!(is_robots_txt("/robots.txt?x=1"));
        assert!(!is_robots_txt("/robots.txt/x"));
        assert!(!is_robots_txt("/Robots.txt"));
    }
}
