//! Forward-confirmed reverse DNS: the PTR name of an address, under one of an operator's
//! suffixes, whose own addresses include the address.
//!
//! `crawl-66-249-66-1.googlebot.com` is under `googlebot.com`; `googlebot.com.evil.net`
//! and `evilgooglebot.com` are not (the suffix must start at a label boundary); case and a
//! trailing dot do not matter. Only names under some configured suffix are looked up
//! forward (a name anyone can publish costs no further query).
//!
//! Each DNS query is bounded ([`RdnsConfig::lookup_timeout`], 2 s); answers are cached per
//! address ([`RdnsConfig::capacity`] addresses): a confirmed name for its TTL within
//! [`RdnsConfig::min_ttl`]..[`RdnsConfig::max_ttl`], anything else (no PTR, a foreign or
//! unconfirmed name, a resolver failure) for [`RdnsConfig::negative_ttl`] (5 min). One
//! lookup runs per address however many requests wait for it, and a request waits at most
//! [`RdnsConfig::max_wait`] (200 ms): past it the verdict is
//! [`Unverified(Pending)`](Why::Pending) while the lookup goes on and fills the cache for
//! the next request. At most [`RdnsConfig::max_in_flight`] lookups run at once.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hickory_resolver::TokioResolver;
use hickory_resolver::config::ResolveHosts;
use hickory_resolver::proto::rr::{Name, RData, RecordType};
use tokio::sync::watch;

use super::verdict::{Method, Verdict, Why};
use crate::net::{NameServer, hickory};

/// How reverse DNS is checked.
#[derive(Debug, Clone)]
pub struct RdnsConfig {
    /// Name servers (empty: the system's).
    pub servers: Vec<NameServer>,
    /// Each DNS query (the PTR, then each forward lookup) (default: 2 s).
    pub lookup_timeout: Duration,
    /// The longest a request waits for a lookup (default: 200 ms).
    pub max_wait: Duration,
    /// The shortest a confirmed answer is kept (default: a minute).
    pub min_ttl: Duration,
    /// The longest a confirmed answer is kept (default: a day).
    pub max_ttl: Duration,
    /// How long any other answer is kept (default: 5 min).
    pub negative_ttl: Duration,
    /// Addresses whose answers are kept (default: 100,000).
    pub capacity: u64,
    /// Lookups running at once; past it a new address is not looked up (default: 1,024).
    pub max_in_flight: usize,
    /// PTR names of one address looked up forward (default: 4).
    pub max_names: usize,
}

impl Default for RdnsConfig {
    fn default() -> Self {
        RdnsConfig {
            servers: Vec::new(),
            lookup_timeout: Duration::from_secs(2),
            max_wait: Duration::from_millis(200),
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(24 * 3600),
            negative_ttl: Duration::from_secs(300),
            capacity: 100_000,
            max_in_flight: 1024,
            max_names: 4,
        }
    }
}

/// What the reverse DNS of an address says, for every operator at once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Answer {
    /// The address's PTR names (lower case, no trailing dot).
    Names(Vec<PtrName>),
    /// The address has no PTR record.
    NoPtr,
    /// The PTR query failed or timed out.
    Error(Arc<str>),
}

/// One PTR name of an address, and what its forward lookup said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PtrName {
    /// The name (lower case, no trailing dot).
    pub name: Arc<str>,
    /// Its forward lookup.
    pub forward: Forward,
}

/// What a PTR name's forward lookup said.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Forward {
    /// Its addresses include the address.
    Confirmed,
    /// Its addresses (or lack of them) do not include the address.
    Mismatch,
    /// Not looked up: the name is under no configured suffix (or past
    /// [`RdnsConfig::max_names`]).
    NotAsked,
    /// The lookup failed or timed out.
    Error(Arc<str>),
}

/// Whether `name` is `suffix` or ends with `.suffix` (case-insensitive, trailing dots
/// ignored): the label-boundary rule.
///
/// ```
/// use robotsgate::identity::rdns::under;
/// assert!(under("crawl-66-249-66-1.googlebot.com", "googlebot.com"));
/// assert!(under("CRAWL-66-249-66-1.GoogleBot.com.", "googlebot.com."));
/// assert!(!under("googlebot.com.evil.net", "googlebot.com"));
/// assert!(!under("evilgooglebot.com", "googlebot.com"));
/// assert!(!under("example.com", ""));
/// ```
pub fn under(name: &str, suffix: &str) -> bool {
    let name = name.strip_suffix('.').unwrap_or(name).as_bytes();
    let suffix = suffix.trim_start_matches('.');
    let suffix = suffix.strip_suffix('.').unwrap_or(suffix).as_bytes();
    if suffix.is_empty() || name.len() < suffix.len() {
        return false;
    }
    let (head, tail) = name.split_at(name.len() - suffix.len());
    tail.eq_ignore_ascii_case(suffix) && (head.is_empty() || head.ends_with(b"."))
}

/// The verdict of `answer` for an operator whose names end with one of `suffixes`.
pub fn judge(answer: &Answer, suffixes: &[impl AsRef<str>]) -> Verdict {
    let names = match answer {
        Answer::Error(e) => return Verdict::Unverified(Why::Dns(e.clone())),
        Answer::NoPtr => return Verdict::Failed(Why::NoPtr),
        Answer::Names(names) if names.is_empty() => return Verdict::Failed(Why::NoPtr),
        Answer::Names(names) => names,
    };
    let ours = || names.iter().filter(|n| suffixes.iter().any(|s| under(&n.name, s.as_ref())));
    if let Some(n) = ours().find(|n| n.forward == Forward::Confirmed) {
        return Verdict::Verified(Method::ReverseDns { name: n.name.clone() });
    }
    for n in ours() {
        match &n.forward {
            Forward::Error(e) => return Verdict::Unverified(Why::Dns(e.clone())),
            Forward::NotAsked => return Verdict::Unverified(Why::NoMethod),
            Forward::Confirmed | Forward::Mismatch => {}
        }
    }
    match ours().next() {
        Some(n) => Verdict::Failed(Why::NotConfirmed(n.name.clone())),
        None => Verdict::Failed(Why::ForeignName(names[0].name.clone())),
    }
}

/// Checks addresses by forward-confirmed reverse DNS, with a cache and one lookup per
/// address at a time.
///
/// Cheap to clone (one reference count). Lookups run on the tokio runtime of the first
/// caller that needs them.
#[derive(Clone)]
pub struct ReverseDns {
    inner: Arc<Inner>,
}

struct Inner {
    resolver: Result<TokioResolver, String>,
    /// Every configured suffix (lower case, no dots around): the names worth a forward
    /// lookup.
    suffixes: Vec<String>,
    cache: moka::sync::Cache<IpAddr, Arc<Cached>, foldhash::quality::RandomState>,
    in_flight: Mutex<HashMap<IpAddr, watch::Receiver<Option<Arc<Answer>>>>>,
    config: RdnsConfig,
    stats: Counters,
}

#[derive(Debug, Default)]
struct Counters {
    hits: AtomicU64,
    lookups: AtomicU64,
    joined: AtomicU64,
    pending: AtomicU64,
    busy: AtomicU64,
}

/// What a [`ReverseDns`] has done since it was made (for metrics).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RdnsStats {
    /// Requests answered from the cache.
    pub hits: u64,
    /// Lookups started (one per address not cached and not already being looked up).
    pub lookups: u64,
    /// Requests that waited for a lookup another request had started.
    pub joined: u64,
    /// Requests decided before their lookup finished ([`Wait::Pending`]).
    pub pending: u64,
    /// Requests whose lookup was not started: too many running ([`Wait::Busy`]).
    pub busy: u64,
}

/// A cached answer and how long it is kept.
#[derive(Debug)]
struct Cached {
    answer: Arc<Answer>,
    ttl: Duration,
}

struct ByTtl;

impl moka::Expiry<IpAddr, Arc<Cached>> for ByTtl {
    fn expire_after_create(
        &self,
        _: &IpAddr,
        value: &Arc<Cached>,
        _: std::time::Instant,
    ) -> Option<Duration> {
        Some(value.ttl)
    }

    fn expire_after_update(
        &self,
        _: &IpAddr,
        value: &Arc<Cached>,
        _: std::time::Instant,
        _: Option<Duration>,
    ) -> Option<Duration> {
        Some(value.ttl)
    }
}

impl fmt::Debug for ReverseDns {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReverseDns")
            .field("suffixes", &self.inner.suffixes)
            .field("cached", &self.inner.cache.entry_count())
            .field("config", &self.inner.config)
            .finish()
    }
}

/// Whether a lookup's answer came within the wait.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Wait {
    /// The answer (from the cache or a lookup that finished in time).
    Ready(Arc<Answer>),
    /// Still running; it fills the cache when done.
    Pending,
    /// Not started: too many lookups are running.
    Busy,
}

impl ReverseDns {
    /// A checker for names under `suffixes` (every operator's), asking `config.servers`.
    /// A resolver that cannot be set up (an unreadable system configuration) does not
    /// fail here: every lookup then answers [`Answer::Error`] with the reason.
    pub fn new(suffixes: impl IntoIterator<Item = impl AsRef<str>>, config: RdnsConfig) -> ReverseDns {
        let timeout = config.lookup_timeout;
        let resolver = hickory(&config.servers, |o| {
            o.timeout = timeout;
            o.attempts = 1;
            // Answers are cached here, per address, for the verdict's own bounds.
            o.cache_size = 0;
            o.use_hosts_file = ResolveHosts::Never;
        });
        let mut suffixes: Vec<String> = suffixes
            .into_iter()
            .map(|s| s.as_ref().trim_matches('.').to_ascii_lowercase())
            .filter(|s| !s.is_empty())
            .collect();
        suffixes.sort();
        suffixes.dedup();
        let cache = moka::sync::Cache::builder()
            .max_capacity(config.capacity)
            .expire_after(ByTtl)
            .build_with_hasher(foldhash::quality::RandomState::default());
        ReverseDns {
            inner: Arc::new(Inner {
                resolver,
                suffixes,
                cache,
                in_flight: Mutex::new(HashMap::new()),
                config,
                stats: Counters::default(),
            }),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &RdnsConfig {
        &self.inner.config
    }

    /// What it has done so far.
    pub fn stats(&self) -> RdnsStats {
        let s = &self.inner.stats;
        RdnsStats {
            hits: s.hits.load(Ordering::Relaxed),
            lookups: s.lookups.load(Ordering::Relaxed),
            joined: s.joined.load(Ordering::Relaxed),
            pending: s.pending.load(Ordering::Relaxed),
            busy: s.busy.load(Ordering::Relaxed),
        }
    }

    /// The verdict for an operator whose names end with one of `suffixes` (among those
    /// given to [`ReverseDns::new`]), waiting at most [`RdnsConfig::max_wait`].
    pub async fn verify(&self, ip: IpAddr, suffixes: &[impl AsRef<str>]) -> Verdict {
        match self.answer_within(ip, self.inner.config.max_wait).await {
            Wait::Ready(answer) => judge(&answer, suffixes),
            Wait::Pending => Verdict::Unverified(Why::Pending),
            Wait::Busy => Verdict::Unverified(Why::Busy),
        }
    }

    /// The cached answer for `ip`, if there is one (no lookup is started).
    pub fn cached(&self, ip: IpAddr) -> Option<Arc<Answer>> {
        self.inner.cache.get(&canonical(ip)).map(|c| c.answer.clone())
    }

    /// The answer for `ip`, waiting for the lookup however long it takes (each query is
    /// bounded by [`RdnsConfig::lookup_timeout`]).
    pub async fn answer(&self, ip: IpAddr) -> Wait {
        self.answer_within(ip, Duration::MAX).await
    }

    /// The answer for `ip` if it is cached or comes within `wait`; otherwise the lookup
    /// (started here, or joined if another request started it) goes on in the background.
    pub async fn answer_within(&self, ip: IpAddr, wait: Duration) -> Wait {
        let ip = canonical(ip);
        let stats = &self.inner.stats;
        if let Some(hit) = self.inner.cache.get(&ip) {
            stats.hits.fetch_add(1, Ordering::Relaxed);
            return Wait::Ready(hit.answer.clone());
        }
        let mut rx = {
            let mut in_flight =
                self.inner.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // Checked again under the lock: a lookup fills the cache before it leaves the
            // map, so an address is never looked up twice at once.
            if let Some(hit) = self.inner.cache.get(&ip) {
                stats.hits.fetch_add(1, Ordering::Relaxed);
                return Wait::Ready(hit.answer.clone());
            }
            match in_flight.get(&ip) {
                Some(rx) => {
                    stats.joined.fetch_add(1, Ordering::Relaxed);
                    rx.clone()
                }
                None => {
                    if in_flight.len() >= self.inner.config.max_in_flight {
                        stats.busy.fetch_add(1, Ordering::Relaxed);
                        return Wait::Busy;
                    }
                    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
                        return Wait::Ready(Arc::new(Answer::Error(Arc::from(
                            "no tokio runtime to look up on",
                        ))));
                    };
                    stats.lookups.fetch_add(1, Ordering::Relaxed);
                    let (tx, rx) = watch::channel(None);
                    in_flight.insert(ip, rx.clone());
                    let this = self.clone();
                    runtime.spawn(async move { this.run(ip, tx).await });
                    rx
                }
            }
        };
        let ready = async {
            match rx.wait_for(Option::is_some).await {
                Ok(answer) => answer.clone(),
                Err(_) => None,
            }
        };
        let answer = if wait == Duration::MAX {
            ready.await
        } else {
            tokio::time::timeout(wait, ready).await.ok().flatten()
        };
        match answer {
            Some(a) => Wait::Ready(a),
            None => {
                stats.pending.fetch_add(1, Ordering::Relaxed);
                Wait::Pending
            }
        }
    }

    /// Looks `ip` up, caches the answer, and hands it to the waiters.
    async fn run(self, ip: IpAddr, tx: watch::Sender<Option<Arc<Answer>>>) {
        /// Takes the address out of the in-flight map however the lookup ends (even if
        /// the task is dropped with its runtime), so it can be looked up again.
        struct Done<'a>(&'a Inner, IpAddr);
        impl Drop for Done<'_> {
            fn drop(&mut self) {
                self.0.in_flight.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&self.1);
            }
        }
        let inner = &self.inner;
        let done = Done(inner, ip);
        let (answer, valid_until) = match &inner.resolver {
            Ok(resolver) => lookup(resolver, ip, &inner.suffixes, &inner.config).await,
            Err(e) => (Answer::Error(Arc::from(format!("no resolver: {e}"))), None),
        };
        let confirmed =
            matches!(&answer, Answer::Names(n) if n.iter().any(|n| n.forward == Forward::Confirmed));
        let ttl = match valid_until {
            Some(until) if confirmed => until
                .saturating_duration_since(Instant::now())
                .clamp(inner.config.min_ttl, inner.config.max_ttl.max(inner.config.min_ttl)),
            _ => inner.config.negative_ttl,
        };
        let answer = Arc::new(answer);
        inner.cache.insert(ip, Arc::new(Cached { answer: answer.clone(), ttl }));
        drop(done);
        tx.send_replace(Some(answer));
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// A name as it is compared: ASCII, lower case, no trailing dot.
fn plain(name: &Name) -> String {
    let mut s = name.to_ascii().to_ascii_lowercase();
    if s.ends_with('.') {
        s.pop();
    }
    s
}

/// The PTR names of `ip` and their forward lookups (for names under `suffixes`), with the
/// time the answer stops being valid (the earliest of the records used).
async fn lookup(
    resolver: &TokioResolver,
    ip: IpAddr,
    suffixes: &[String],
    config: &RdnsConfig,
) -> (Answer, Option<Instant>) {
    let timeout = config.lookup_timeout;
    let ptr = match tokio::time::timeout(timeout, resolver.reverse_lookup(ip)).await {
        Err(_) => {
            return (Answer::Error(Arc::from(format!("PTR of {ip}: no answer within {timeout:?}"))), None);
        }
        Ok(Err(e)) if e.is_no_records_found() => return (Answer::NoPtr, None),
        Ok(Err(e)) => return (Answer::Error(Arc::from(format!("PTR of {ip}: {e}"))), None),
        Ok(Ok(lookup)) => lookup,
    };
    let mut valid_until = ptr.valid_until();
    let mut names: Vec<(Name, String)> = Vec::new();
    for record in ptr.answers() {
        if let RData::PTR(target) = &record.data {
            let plain = plain(&target.0);
            if !names.iter().any(|(_, p)| *p == plain) {
                names.push((target.0.clone(), plain));
            }
        }
    }
    if names.is_empty() {
        return (Answer::NoPtr, None);
    }
    let record_type = if ip.is_ipv4() { RecordType::A } else { RecordType::AAAA };
    let mut out = Vec::with_capacity(names.len());
    let mut asked = 0;
    for (name, plain) in names {
        let ours = suffixes.iter().any(|s| under(&plain, s));
        let forward = if !ours || asked >= config.max_names {
            Forward::NotAsked
        } else {
            asked += 1;
            let mut fqdn = name.clone();
            fqdn.set_fqdn(true);
            match tokio::time::timeout(timeout, resolver.lookup(fqdn, record_type)).await {
                Err(_) => Forward::Error(Arc::from(format!("{plain}: no answer within {timeout:?}"))),
                Ok(Err(e)) if e.is_no_records_found() => Forward::Mismatch,
                Ok(Err(e)) => Forward::Error(Arc::from(format!("{plain}: {e}"))),
                Ok(Ok(found)) => {
                    let matches = found.answers().iter().any(|r| match &r.data {
                        RData::A(a) => IpAddr::V4(a.0) == ip,
                        RData::AAAA(a) => IpAddr::V6(a.0) == ip,
                        _ => false,
                    });
                    if matches {
                        valid_until = valid_until.min(found.valid_until());
                        Forward::Confirmed
                    } else {
                        Forward::Mismatch
                    }
                }
            }
        };
        out.push(PtrName { name: Arc::from(plain), forward });
    }
    (Answer::Names(out), Some(valid_until))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[(&str, Forward)]) -> Answer {
        Answer::Names(list.iter().map(|(n, f)| PtrName { name: Arc::from(*n), forward: f.clone() }).collect())
    }

    #[test]
    fn suffixes_on_label_boundaries() {
        assert!(under("googlebot.com", "googlebot.com"));
        assert!(under("a.b.googlebot.com", ".googlebot.com"));
        assert!(!under("googlebot.com", "crawl.googlebot.com"));
        assert!(!under("xgooglebot.com", "googlebot.com"));
        assert!(!under("googlebot.com.", "com.."));
        assert!(!under("", "googlebot.com"));
        assert!(!under("é.googlebot.com", "googlebot.co"));
    }

    #[test]
    fn judging_answers() {
        let google = ["googlebot.com", "google.com"];
        let confirmed = names(&[("rate-limited-proxy.google.com", Forward::Confirmed)]);
        assert_eq!(
            judge(&confirmed, &google),
            Verdict::Verified(Method::ReverseDns { name: "rate-limited-proxy.google.com".into() })
        );
        assert_eq!(judge(&Answer::NoPtr, &google), Verdict::Failed(Why::NoPtr));
        assert_eq!(judge(&names(&[]), &google), Verdict::Failed(Why::NoPtr));
        assert_eq!(judge(&Answer::Error("x".into()), &google), Verdict::Unverified(Why::Dns("x".into())));
        let foreign = names(&[("googlebot.com.evil.net", Forward::NotAsked)]);
        assert_eq!(
            judge(&foreign, &google),
            Verdict::Failed(Why::ForeignName("googlebot.com.evil.net".into()))
        );
        let spoofed = names(&[("crawl-1-2-3-4.googlebot.com", Forward::Mismatch)]);
        assert_eq!(
            judge(&spoofed, &google),
            Verdict::Failed(Why::NotConfirmed("crawl-1-2-3-4.googlebot.com".into()))
        );
        let flaky = names(&[("crawl-1-2-3-4.googlebot.com", Forward::Error("timeout".into()))]);
        assert_eq!(judge(&flaky, &google), Verdict::Unverified(Why::Dns("timeout".into())));
        // One confirmed name of the operator is enough, whatever the others say.
        let mixed = names(&[
            ("x.evil.net", Forward::NotAsked),
            ("crawl.googlebot.com", Forward::Mismatch),
            ("y.google.com", Forward::Confirmed),
        ]);
        assert!(judge(&mixed, &google).is_verified());
        // A name confirmed for another operator is not this one's.
        assert_eq!(
            judge(&confirmed, &["search.msn.com"]),
            Verdict::Failed(Why::ForeignName("rate-limited-proxy.google.com".into()))
        );
    }
}
