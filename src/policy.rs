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
//!
//! Freshness uses `tokio::time::Instant`, so tests can move time with tokio's clock.
//!
//! [moka]: https://docs.rs/moka

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use crate::fetch::{FetchOutcome, FetchResult, Fetcher, Unreachable};
pub use crate::origin::HostPattern;
use crate::origin::Origin;
use crate::rep::{Profile, Reading, Reason as RepReason, RobotsTxt, RuleId, RuleKind};

/// How the policy caches and judges robots.txt files.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// How robots.txt files are read.
    pub profile: Profile,
    /// Freshness of a copy without `Cache-Control: max-age`.
    pub default_ttl: Duration,
    /// Lower bound for `max-age` (also applied to `no-cache`).
    pub min_ttl: Duration,
    /// Upper bound for `max-age` (RFC 9309: no more than 24 hours).
    pub max_ttl: Duration,
    /// How long after it expired a good copy is still used while the origin is unreachable.
    pub stale_if_error: Duration,
    /// First retry delay after an unreachable robots.txt (doubles per failure).
    pub retry_min: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// First retry delay after 429 or 503 without `Retry-After` (doubles per failure).
    pub retry_busy: Duration,
    /// Most origins kept.
    pub max_entries: u64,
    /// Most bytes kept (approximate heap size of the parsed files).
    pub max_bytes: u64,
    /// Host overrides, first match wins.
    pub overrides: Vec<Override>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            profile: Profile::default(),
            default_ttl: Duration::from_secs(24 * 3600),
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(24 * 3600),
            stale_if_error: Duration::from_secs(30 * 24 * 3600),
            retry_min: Duration::from_secs(60),
            retry_max: Duration::from_secs(3600),
            retry_busy: Duration::from_secs(15),
            max_entries: 100_000,
            max_bytes: 512 * 1024 * 1024,
            overrides: Vec::new(),
        }
    }
}

/// What an override does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideAction {
    /// Allow every request to the host, whatever its robots.txt says.
    Allow,
    /// Deny every request to the host.
    Deny,
}

impl OverrideAction {
    /// `"allow"` or `"deny"`.
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideAction::Allow => "allow",
            OverrideAction::Deny => "deny",
        }
    }
}

/// An operator's rule for a host pattern.
#[derive(Debug, Clone)]
pub struct Override {
    /// The hosts.
    pub hosts: HostPattern,
    /// Allow or deny.
    pub action: OverrideAction,
    /// Why (recorded in every decision it makes).
    pub reason: Arc<str>,
    /// No longer applies from this time on.
    pub expires: Option<SystemTime>,
}

/// Facts about the robots.txt fetch a decision rests on (for the audit log).
#[derive(Debug, Clone)]
pub struct FetchFacts {
    /// The robots.txt URL.
    pub url: String,
    /// The URL of the last response (after redirects).
    pub final_url: String,
    /// Redirect hops.
    pub redirects: u8,
    /// HTTP status of the last response, if there was one.
    pub status: Option<u16>,
    /// Decoded body bytes read.
    pub bytes: usize,
    /// The body went on past the limit.
    pub truncated: bool,
    /// SHA-256 of the body, when one was read.
    pub sha256: Option<[u8; 32]>,
    /// When the fetch started (wall clock).
    pub fetched_at: SystemTime,
    /// How long the fetch took.
    pub duration: Duration,
    /// Audit log text every decision resting on this copy repeats, made once.
    pub(crate) audit_text: AuditText,
}

/// Text the audit log writes again and again for decisions resting on one copy (see
/// `audit`): kept with the copy, so it is made once and goes when the copy goes.
#[derive(Default)]
pub(crate) struct AuditText {
    /// The robots.txt facts as JSON.
    pub(crate) facts: std::sync::OnceLock<Box<str>>,
    /// Per kind of decision ([`DecisionKey`]): the fields from `origin` to `explanation`.
    pub(crate) decisions: std::sync::Mutex<Vec<(DecisionKey, Box<str>)>>,
}

impl AuditText {
    /// Kinds of decision remembered per copy: a copy has a handful of rules a crawler hits.
    pub(crate) const MAX_DECISIONS: usize = 64;
}

impl Clone for AuditText {
    /// A clone makes its text again (it is only ever a few hundred bytes).
    fn clone(&self) -> AuditText {
        AuditText::default()
    }
}

impl fmt::Debug for AuditText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditText").finish_non_exhaustive()
    }
}

/// What makes two decisions on one copy read the same in the audit log, apart from the
/// request: the origin, product token, profile, mode and the rule (or no rule) that decided.
/// Only fresh copies' rule and no-rule decisions have one; the rest are written out each time.
#[derive(Debug)]
pub(crate) struct DecisionKey {
    origin: Arc<Origin>,
    agent: Arc<str>,
    profile: Profile,
    report_only: bool,
    allowed: bool,
    /// Rule, reading, implied by index.html, readings disagree; `None`: no rule matched.
    rule: Option<(RuleId, Reading, bool, bool)>,
}

impl DecisionKey {
    /// The key of `d`, if decisions like it are remembered.
    pub(crate) fn of(d: &Decision, report_only: bool) -> Option<DecisionKey> {
        Some(DecisionKey {
            origin: d.origin.clone(),
            agent: d.agent.clone(),
            profile: d.profile,
            report_only,
            allowed: d.allowed,
            rule: Self::rule_of(d)?,
        })
    }

    /// Whether `d` reads as this key's decisions do (no reference counts touched).
    pub(crate) fn is(&self, d: &Decision, report_only: bool) -> bool {
        self.report_only == report_only
            && self.allowed == d.allowed
            && self.profile == d.profile
            && Self::rule_of(d) == Some(self.rule)
            && (Arc::ptr_eq(&self.agent, &d.agent) || self.agent == d.agent)
            && (Arc::ptr_eq(&self.origin, &d.origin) || self.origin == d.origin)
    }

    /// `Some(rule)` for a remembered kind of decision: a fresh copy's rule or no rule.
    #[allow(clippy::option_option)]
    fn rule_of(d: &Decision) -> Option<Option<(RuleId, Reading, bool, bool)>> {
        if d.stale {
            return None;
        }
        match &d.reason {
            Reason::Rule { id, reading, implied_by_index_html, readings_disagree, .. } => {
                Some(Some((*id, *reading, *implied_by_index_html, *readings_disagree)))
            }
            Reason::NoRuleMatched => Some(None),
            _ => None,
        }
    }
}

impl FetchFacts {
    fn of(outcome: &FetchOutcome) -> FetchFacts {
        let status = match &outcome.result {
            FetchResult::Success { status } | FetchResult::Unavailable { status } => Some(*status),
            FetchResult::Unreachable(Unreachable::Status(s)) => Some(*s),
            _ => None,
        };
        FetchFacts {
            url: outcome.url.clone(),
            final_url: outcome.final_url.clone(),
            redirects: outcome.redirects,
            status,
            bytes: outcome.body.len(),
            truncated: outcome.truncated,
            sha256: outcome.sha256,
            fetched_at: outcome.fetched_at,
            duration: outcome.duration,
            audit_text: AuditText::default(),
        }
    }

    /// The body hash in lower-case hex.
    pub fn sha256_hex(&self) -> Option<String> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        self.sha256.map(|sha| {
            let mut out = [0u8; 64];
            for (pair, byte) in out.chunks_exact_mut(2).zip(sha) {
                pair[0] = DIGITS[usize::from(byte >> 4)];
                pair[1] = DIGITS[usize::from(byte & 0x0f)];
            }
            std::str::from_utf8(&out).unwrap_or_default().to_owned()
        })
    }
}

/// A usable robots.txt result: a parsed file, or "no rules" (unavailable).
#[derive(Debug)]
pub struct RobotsCopy {
    /// The fetch it came from.
    pub facts: FetchFacts,
    /// What it says.
    pub content: CopyContent,
    fetched: Instant,
}

/// What a usable robots.txt result says.
#[derive(Debug)]
pub enum CopyContent {
    /// A 2xx body, parsed.
    Parsed(Box<RobotsTxt>),
    /// A 4xx answer (not 429): no rules.
    Unavailable {
        /// The status.
        status: u16,
    },
    /// More redirects than allowed: no rules.
    TooManyRedirects,
}

/// A failed refresh (unreachable robots.txt).
#[derive(Debug, Clone)]
pub struct Failure {
    /// The fetch.
    pub facts: FetchFacts,
    /// Why it was unreachable.
    pub cause: Unreachable,
    /// Failures in a row.
    pub streak: u32,
    retry_at: Instant,
}

/// Why a request was allowed or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A rule decided (see [`Decision::rule_pattern`] for its text).
    Rule {
        /// Which rule.
        id: RuleId,
        /// Allow or disallow.
        kind: RuleKind,
        /// Its line.
        line: u32,
        /// The reading it comes from.
        reading: Reading,
        /// Google's `index.html` rule.
        implied_by_index_html: bool,
        /// Conservative profile: the readings disagreed.
        readings_disagree: bool,
    },
    /// robots.txt has no rule for this path: allowed.
    NoRuleMatched,
    /// `/robots.txt` itself: always allowed.
    RobotsTxtPath,
    /// robots.txt is unavailable (4xx): allowed.
    Unavailable {
        /// The status.
        status: u16,
    },
    /// More redirects than allowed: treated as unavailable, allowed.
    TooManyRedirects,
    /// robots.txt is unreachable and there is no usable copy: disallowed.
    Unreachable {
        /// Why.
        cause: Unreachable,
    },
    /// The destination resolves to an address the guard refuses (set by the layer; the
    /// policy never sees such requests).
    DestinationDenied {
        /// What the connector said.
        cause: crate::net::ConnectError,
    },
    /// An operator's override decided.
    Override {
        /// Allow or deny.
        action: OverrideAction,
        /// The host pattern.
        hosts: String,
        /// The operator's reason.
        reason: Arc<str>,
    },
}

impl Reason {
    /// A short stable name of the reason class (audit log, metrics).
    pub fn class(&self) -> &'static str {
        match self {
            Reason::Rule { kind: RuleKind::Allow, .. } => "allow-rule",
            Reason::Rule { kind: RuleKind::Disallow, .. } => "disallow-rule",
            Reason::NoRuleMatched => "no-rule",
            Reason::RobotsTxtPath => "robots-txt",
            Reason::Unavailable { .. } => "robots-unavailable",
            Reason::TooManyRedirects => "robots-redirect-limit",
            Reason::Unreachable { .. } => "robots-unreachable",
            Reason::DestinationDenied { .. } => "destination-denied",
            Reason::Override { .. } => "override",
        }
    }
}

/// The policy's answer for one request.
#[derive(Debug, Clone)]
pub struct Decision {
    /// Whether the request may go to the origin.
    pub allowed: bool,
    /// The origin.
    pub origin: Arc<Origin>,
    /// The product token the decision is for.
    pub agent: Arc<str>,
    /// The profile used.
    pub profile: Profile,
    /// Why.
    pub reason: Reason,
    /// The robots.txt copy the decision rests on, if any.
    pub robots: Option<Arc<RobotsCopy>>,
    /// The latest failed refresh, when the decision rests on a failure or on a copy kept
    /// because refreshing failed.
    pub failure: Option<Arc<Failure>>,
    /// Age of the copy used.
    pub age: Option<Duration>,
    /// The copy used was past its freshness (being refreshed, or kept after a failure).
    pub stale: bool,
}

impl Decision {
    /// The deciding rule as the audit log names it: kind, pattern, line, reading and
    /// whether Google's index.html rule implied it.
    pub fn rule_fields(&self) -> Option<(&'static str, &str, u32, &'static str, bool)> {
        match &self.reason {
            Reason::Rule { kind, line, reading, implied_by_index_html, .. } => Some((
                kind.as_str(),
                self.rule_pattern().unwrap_or(""),
                *line,
                reading.as_str(),
                *implied_by_index_html,
            )),
            _ => None,
        }
    }

    /// The text of the deciding rule, as written in the robots.txt.
    pub fn rule_pattern(&self) -> Option<&str> {
        let Reason::Rule { id, reading, .. } = &self.reason else { return None };
        match &self.robots.as_ref()?.content {
            CopyContent::Parsed(r) => r.rule(*id, *reading).map(|m| m.pattern),
            _ => None,
        }
    }

    /// The robots.txt facts (of the copy used, else of the failed fetch).
    pub fn fetch_facts(&self) -> Option<&FetchFacts> {
        match (&self.robots, &self.failure) {
            (Some(copy), _) => Some(&copy.facts),
            (None, Some(f)) => Some(&f.facts),
            (None, None) => None,
        }
    }
}

impl fmt::Display for Decision {
    /// What decided, in a line: `line 4: disallow: /private`, `robots.txt unreachable
    /// (HTTP status 503): disallow all`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Rule { kind, line, reading, implied_by_index_html, readings_disagree, .. } => {
                write!(f, "line {line}: {}: {}", kind.as_str(), self.rule_pattern().unwrap_or(""))?;
                if *implied_by_index_html {
                    f.write_str(" (also allows its directory)")?;
                }
                if *readings_disagree {
                    write!(f, " ({} reading)", reading.as_str())?;
                }
                Ok(())
            }
            Reason::NoRuleMatched => f.write_str("no rule matched"),
            Reason::RobotsTxtPath => f.write_str("/robots.txt is always allowed"),
            Reason::Unavailable { status } => write!(f, "robots.txt unavailable ({status}): allow all"),
            Reason::TooManyRedirects => f.write_str("robots.txt redirect limit exceeded: allow all"),
            Reason::Unreachable { cause } => write!(f, "robots.txt unreachable ({cause}): disallow all"),
            Reason::DestinationDenied { cause } => write!(f, "{cause}"),
            Reason::Override { action, hosts, reason } => {
                write!(f, "override: {} {hosts} ({reason})", action.as_str())
            }
        }?;
        if self.stale {
            match &self.failure {
                Some(fail) => write!(f, " [stale copy: refresh failed: {}]", fail.cause)?,
                None => f.write_str(" [stale copy, refreshing]")?,
            }
        }
        Ok(())
    }
}

/// Sees every robots.txt fetch the policy makes (for the audit log and metrics).
pub trait FetchObserver: Send + Sync {
    /// Called after each fetch, with the origin and what came back.
    fn fetched(&self, origin: &Origin, outcome: &FetchOutcome);
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

/// Fixed bytes counted per cached origin on top of its file.
const ENTRY_OVERHEAD: u64 = 512;

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
        let cache = moka::sync::Cache::builder()
            .max_capacity(config.max_bytes)
            .weigher(move |_: &Origin, cell: &Arc<Cell>| cell.weight.load(Ordering::Relaxed).max(floor))
            .build_with_hasher(foldhash::quality::RandomState::default());
        let config = arc_swap::ArcSwap::from_pointee(config);
        RobotsPolicy {
            inner: Arc::new(Inner { fetcher, config, cache, observers, stats: CacheStats::default() }),
        }
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

    /// Runs pending cache maintenance (evictions) now; tests use this to observe bounds.
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
        let base = |origin: Arc<Origin>, reason: Reason, allowed: bool| Decision {
            allowed,
            origin,
            agent: agent.clone(),
            profile,
            reason,
            robots: None,
            failure: None,
            age: None,
            stale: false,
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
        let fresh = entry.fresh_until.is_some_and(|t| now < t);
        let mut d = base(cell.origin.clone(), Reason::NoRuleMatched, true);
        match &entry.copy {
            Some(copy) if fresh || self.stale_usable(&entry, now) => {
                d.age = Some(now.saturating_duration_since(copy.fetched));
                d.stale = !fresh;
                if !fresh {
                    d.failure = entry.failure.clone();
                }
                judge(&mut d, copy, path);
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
        if entry.fresh_until.is_some_and(|t| now < t) {
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
        let fresh = entry.fresh_until.is_some_and(|t| now < t);
        let retry_due = entry.failure.as_ref().is_none_or(|f| now >= f.retry_at);
        let settled_meanwhile =
            fresh || !retry_due || (entry.copy.is_some() && self.stale_usable(&entry, now));
        if settled_meanwhile && (entry.copy.is_some() || entry.failure.is_some()) {
            return entry;
        }
        self.refresh(cell).await;
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
            let fresh = entry.fresh_until.is_some_and(|t| now < t);
            let retry_due = entry.failure.as_ref().is_none_or(|f| now >= f.retry_at);
            if !fresh && retry_due {
                this.refresh(&cell).await;
            }
            drop(guard);
            cell.refreshing.store(false, Ordering::Release);
        });
    }

    /// Fetches and stores the result. The caller holds `cell.refresh`.
    async fn refresh(&self, cell: &Arc<Cell>) {
        let outcome = self.inner.fetcher.fetch(&cell.origin).await;
        for observer in &self.inner.observers {
            observer.fetched(&cell.origin, &outcome);
        }
        let config = self.inner.config.load();
        let old = cell.entry();
        let now = Instant::now();
        let facts = FetchFacts::of(&outcome);
        let content = match &outcome.result {
            FetchResult::Success { .. } => {
                Some(CopyContent::Parsed(Box::new(RobotsTxt::parse(&outcome.body))))
            }
            FetchResult::Unavailable { status } => Some(CopyContent::Unavailable { status: *status }),
            FetchResult::TooManyRedirects => Some(CopyContent::TooManyRedirects),
            FetchResult::Unreachable(_) => None,
        };
        let entry = match (content, outcome.result) {
            (Some(content), _) => {
                let ttl = outcome.max_age.map_or(config.default_ttl, |a| {
                    a.clamp(config.min_ttl, config.max_ttl.max(config.min_ttl))
                });
                let weight = match &content {
                    // Room for the rule sets built on first use, too.
                    CopyContent::Parsed(r) => 2 * r.heap_bytes() as u64 + ENTRY_OVERHEAD,
                    _ => ENTRY_OVERHEAD,
                };
                cell.weight.store(weight.min(u32::MAX as u64) as u32, Ordering::Relaxed);
                Entry {
                    copy: Some(Arc::new(RobotsCopy { facts, content, fetched: now })),
                    fresh_until: Some(now + ttl),
                    failure: None,
                }
            }
            (None, FetchResult::Unreachable(cause)) => {
                let streak = old.failure.as_ref().map_or(0, |f| f.streak) + 1;
                let delay = self.backoff(&cause, streak, outcome.retry_after);
                Entry {
                    copy: old.copy.clone(),
                    fresh_until: old.fresh_until,
                    failure: Some(Arc::new(Failure { facts, cause, streak, retry_at: now + delay })),
                }
            }
            (None, _) => return,
        };
        cell.set(entry);
        // Re-insert so the cache sees the new weight.
        self.inner.cache.insert(Origin::clone(&cell.origin), cell.clone());
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

/// Fills in the verdict of a usable copy.
fn judge(d: &mut Decision, copy: &RobotsCopy, path: &str) {
    match &copy.content {
        CopyContent::Unavailable { status } => {
            d.allowed = true;
            d.reason = Reason::Unavailable { status: *status };
        }
        CopyContent::TooManyRedirects => {
            d.allowed = true;
            d.reason = Reason::TooManyRedirects;
        }
        CopyContent::Parsed(robots) => {
            let v = robots.check_with(d.profile, &d.agent, path);
            d.allowed = v.allowed();
            d.reason = match v.reason() {
                RepReason::Rule(r) => Reason::Rule {
                    id: r.id,
                    kind: r.kind,
                    line: r.line,
                    reading: r.reading,
                    implied_by_index_html: r.implied_by_index_html,
                    readings_disagree: v.readings_disagree(),
                },
                RepReason::NoRuleMatched => Reason::NoRuleMatched,
                RepReason::RobotsTxt => Reason::RobotsTxtPath,
            };
        }
    }
}

/// A decision on `body` as a fetched robots.txt of `origin`, for tests of what reads
/// decisions (the audit log).
#[cfg(test)]
pub(crate) fn decision_on(
    copy: &Arc<RobotsCopy>,
    origin: &Arc<Origin>,
    agent: &Arc<str>,
    profile: Profile,
    path: &str,
) -> Decision {
    let mut d = Decision {
        allowed: true,
        origin: origin.clone(),
        agent: agent.clone(),
        profile,
        reason: Reason::NoRuleMatched,
        robots: Some(copy.clone()),
        failure: None,
        age: Some(Duration::from_millis(1500)),
        stale: false,
    };
    judge(&mut d, copy, path);
    d
}

/// A copy of `body` as fetched from `origin` (for [`decision_on`]).
#[cfg(test)]
pub(crate) fn copy_of(origin: &Origin, body: &str) -> Arc<RobotsCopy> {
    let facts = FetchFacts {
        url: origin.robots_url(),
        final_url: origin.robots_url(),
        redirects: 0,
        status: Some(200),
        bytes: body.len(),
        truncated: false,
        sha256: Some([7; 32]),
        fetched_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_441_017),
        duration: Duration::from_millis(3),
        audit_text: AuditText::default(),
    };
    let content = CopyContent::Parsed(Box::new(RobotsTxt::parse(body.as_bytes())));
    Arc::new(RobotsCopy { facts, content, fetched: Instant::now() })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::Host;

    #[test]
    fn host_patterns() {
        let exact = HostPattern::parse("Example.COM").unwrap();
        let sub = HostPattern::parse("*.example.com").unwrap();
        let h = |s: &str| Host::parse(s).unwrap();
        assert!(exact.matches(&h("example.com")));
        assert!(!exact.matches(&h("www.example.com")));
        assert!(sub.matches(&h("www.example.com")));
        assert!(sub.matches(&h("a.b.example.com")));
        assert!(!sub.matches(&h("example.com")));
        assert!(!sub.matches(&h("badexample.com")));
        assert!(HostPattern::parse("*.10.0.0.1").is_err());
        assert!(HostPattern::parse("[::1]").unwrap().matches(&h("[::1]")));
        assert_eq!(sub.to_string(), "*.example.com");
    }

    #[test]
    fn robots_txt_path() {
        assert!(is_robots_txt("/robots.txt"));
        assert!(is_robots_txt("/robots.txt?x=1"));
        assert!(!is_robots_txt("/robots.txt/x"));
        assert!(!is_robots_txt("/Robots.txt"));
    }
}
