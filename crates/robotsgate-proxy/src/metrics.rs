//! Prometheus metrics (`robotsgate_*`), served by the admin listener at `/metrics`.
//!
//! Per-request events (decisions, proxied requests, refusals, connections) are counted as
//! they happen; state owned elsewhere (cache size, audit counters, leaves minted) is read
//! when `/metrics` is scraped, through the [`Sources`] the application registers.

use std::fmt::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use robotsgate::pacing::PaceRefusal;
use robotsgate::{Outcome, ReasonClass, RefusalKind};

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    outcome: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct FetchLabels {
    result: &'static str,
    cause: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RequestLabels {
    transport: &'static str,
    protocol: &'static str,
}

/// Where a request came in, for `robotsgate_requests_total`: on the listener (absolute
/// form or `CONNECT`), inside an intercepted tunnel, or as plain HTTP inside a `CONNECT`
/// tunnel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// On the listener.
    Proxy,
    /// Inside an intercepted TLS tunnel.
    Intercepted,
    /// Plain HTTP inside a `CONNECT` tunnel.
    ConnectHttp,
}

impl Arrival {
    const ALL: [Arrival; 3] = [Arrival::Proxy, Arrival::Intercepted, Arrival::ConnectHttp];

    fn as_str(self) -> &'static str {
        match self {
            Arrival::Proxy => "proxy",
            Arrival::Intercepted => "intercepted",
            Arrival::ConnectHttp => "connect-http",
        }
    }
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct OutcomeLabels {
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StatusLabels {
    status: u16,
}

/// The counters of client connections closed because the client took nothing of what it
/// was sent (`robotsgate_clients_cut_total`, and the ingress's
/// `robotsgate_ingress_clients_cut_total`): a write waited for the send timeout
/// (`send-timeout`); an answer handed to hyper was not asked for (`stuck`: HTTP/2 without
/// window, see `crate::quiet`); or nothing moved while an answer was being sent, for the
/// idle bound of a connection hyper serves (`quiet`: the header read timeout, shorter than
/// the send timeout by default). Default: counting nowhere (no metrics).
#[derive(Clone, Debug, Default)]
pub(crate) struct Cuts {
    pub(crate) send_timeout: Counter,
    pub(crate) stuck: Counter,
    pub(crate) quiet: Counter,
}

impl Cuts {
    /// The family's counters, registered as `name` in `registry`.
    pub(crate) fn register(registry: &mut Registry, name: &str) -> Cuts {
        let family = Family::<ReasonLabels, Counter>::default();
        registry.register(
            name,
            "Client connections closed because the client took nothing of what it was sent: a \
             write waited for the send timeout (send-timeout), an answer was not asked for \
             (stuck: an HTTP/2 client granting no window), or nothing moved while an answer was \
             being sent for the header read timeout (quiet)",
            family.clone(),
        );
        // One at a time: the family's read guard must end before the next is made.
        let send_timeout = family.get_or_create(&ReasonLabels { reason: "send-timeout" }).clone();
        let stuck = family.get_or_create(&ReasonLabels { reason: "stuck" }).clone();
        let quiet = family.get_or_create(&ReasonLabels { reason: "quiet" }).clone();
        Cuts { send_timeout, stuck, quiet }
    }
}

/// State read at scrape time.
pub trait Sources: Send + Sync {
    /// (origins cached, bytes cached, hits, misses, stale hits)
    fn cache(&self) -> (u64, u64, u64, u64, u64);
    /// (records written, records lost)
    fn audit(&self) -> (u64, u64);
    /// Leaf certificates minted, if interception is on.
    fn leaves_minted(&self) -> Option<u64>;
    /// (requests held by pacing now, origins and tokens with pacing state)
    fn pacing(&self) -> (u64, u64);
    /// Idle keep-alive connections to origins.
    fn upstream_idle(&self) -> u64;
}

/// The metrics of one robotsgate process.
pub struct Metrics {
    registry: Registry,
    decisions: Family<DecisionLabels, Counter>,
    /// The decision counters made so far (at most outcomes x reasons), found by comparing
    /// their enums: cheaper than hashing the labels into the family on every request.
    decision_memo: arc_swap::ArcSwap<Vec<((Outcome, ReasonClass), Counter)>>,
    decision_seconds: Histogram,
    fetches: Family<FetchLabels, Counter>,
    requests: Family<RequestLabels, Counter>,
    /// The request counters by arrival and HTTP version (1.x, 2), made once: no label
    /// hashing per request.
    request_counters: [[Counter; 2]; 3],
    request_seconds: Histogram,
    upstream_errors: Family<ClassLabels, Counter>,
    refused: Family<ClassLabels, Counter>,
    response_usage: Family<OutcomeLabels, Counter>,
    connections_open: Gauge,
    connections: Counter,
    cache_entries: Gauge,
    cache_bytes: Gauge,
    cache_lookups: Family<ClassLabels, Counter>,
    audit_written: Gauge,
    audit_lost: Gauge,
    leaves_minted: Gauge,
    pace_wait: Histogram,
    pace_held: Gauge,
    pace_lanes: Gauge,
    upstream_idle: Gauge,
    pace_refused: Family<ReasonLabels, Counter>,
    pace_pauses: Family<StatusLabels, Counter>,
    cluster_up: Gauge,
    cuts: Cuts,
    sources: std::sync::RwLock<Option<Arc<dyn Sources>>>,
    // Last values of the pulled counters, to add only the difference.
    pulled: [AtomicI64; 3],
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// All series registered, at zero.
    pub fn new() -> Metrics {
        let mut registry = Registry::with_prefix("robotsgate");
        let m = Metrics {
            registry: Registry::default(),
            decisions: Family::default(),
            decision_memo: Default::default(),
            decision_seconds: Histogram::new(exponential_buckets(0.000_01, 4.0, 10)),
            fetches: Family::default(),
            requests: Family::default(),
            request_counters: Default::default(),
            request_seconds: Histogram::new(exponential_buckets(0.000_1, 4.0, 10)),
            upstream_errors: Family::default(),
            refused: Family::default(),
            response_usage: Family::default(),
            connections_open: Gauge::default(),
            connections: Counter::default(),
            cache_entries: Gauge::default(),
            cache_bytes: Gauge::default(),
            cache_lookups: Family::default(),
            audit_written: Gauge::default(),
            audit_lost: Gauge::default(),
            leaves_minted: Gauge::default(),
            // 1 ms to about 82 s: pacing waits end at max_wait (60 s by default).
            pace_wait: Histogram::new(exponential_buckets(0.001, 2.0, 17)),
            pace_held: Gauge::default(),
            pace_lanes: Gauge::default(),
            upstream_idle: Gauge::default(),
            pace_refused: Family::default(),
            pace_pauses: Family::default(),
            cluster_up: Gauge::default(),
            cuts: Cuts::default(),
            sources: std::sync::RwLock::new(None),
            pulled: Default::default(),
        };
        registry.register("decisions", "Decisions by outcome and reason", m.decisions.clone());
        registry.register(
            "decision_duration_seconds",
            "Time to decide a request",
            m.decision_seconds.clone(),
        );
        registry.register(
            "robots_fetches",
            "robots.txt fetches by result and failure cause",
            m.fetches.clone(),
        );
        registry.register(
            "requests",
            "Requests received, by where they came in (transport: proxy = on the listener, \
             CONNECT included; intercepted; connect-http) and HTTP version (protocol)",
            m.requests.clone(),
        );
        registry.register(
            "request_duration_seconds",
            "Time from a request to its response headers",
            m.request_seconds.clone(),
        );
        registry.register(
            "upstream_errors",
            "Forwarded requests that failed upstream, by class",
            m.upstream_errors.clone(),
        );
        registry.register(
            "refused",
            "Requests refused before a robots decision, by the refusal's x-robotsgate name \
             (auth-required, client-denied, no-token, header-too-large, cluster-unavailable)",
            m.refused.clone(),
        );
        registry.register(
            "response_usage",
            "Responses whose AI-usage preferences refuse the request's purpose, by outcome \
             (usage-refused: replaced by a refusal; would-refuse-usage: let through)",
            m.response_usage.clone(),
        );
        registry.register("open_connections", "Client connections open", m.connections_open.clone());
        registry.register("connections", "Client connections accepted", m.connections.clone());
        registry.register("robots_cache_entries", "Origins in the robots.txt cache", m.cache_entries.clone());
        registry.register(
            "robots_cache_bytes",
            "Approximate bytes in the robots.txt cache",
            m.cache_bytes.clone(),
        );
        registry.register(
            "robots_cache_lookups",
            "robots.txt cache lookups (hit, miss, stale)",
            m.cache_lookups.clone(),
        );
        registry.register("audit_records_written", "Audit records written", m.audit_written.clone());
        registry.register(
            "audit_records_lost",
            "Audit records lost because writing failed",
            m.audit_lost.clone(),
        );
        registry.register(
            "tls_leaves_minted",
            "Leaf certificates minted for interception",
            m.leaves_minted.clone(),
        );
        registry.register(
            "pacing_wait_seconds",
            "How long paced requests were held for their origin's next slot",
            m.pace_wait.clone(),
        );
        registry.register("pacing_held_requests", "Requests held by pacing now", m.pace_held.clone());
        registry.register(
            "pacing_lanes",
            "Origins (per product token) with pacing state kept",
            m.pace_lanes.clone(),
        );
        registry.register(
            "upstream_idle_connections",
            "Idle keep-alive connections to origins (proxy.upstream_idle_max bounds them)",
            m.upstream_idle.clone(),
        );
        registry.register(
            "pacing_refused",
            "Requests answered 503 by pacing (max-wait, queue-full, table-full)",
            m.pace_refused.clone(),
        );
        registry.register(
            "pacing_pauses",
            "Back-off pauses started by an origin's 429 or 503, by status",
            m.pace_pauses.clone(),
        );
        registry.register(
            "cluster_up",
            "1 while robots.txt copies and pacing are shared with the fleet through Redis, 0 when this replica works alone (no [cluster], or Redis unreachable)",
            m.cluster_up.clone(),
        );
        let request_counters = Arrival::ALL.map(|arrival| {
            ["http1", "http2"].map(|protocol| {
                m.requests.get_or_create(&RequestLabels { transport: arrival.as_str(), protocol }).clone()
            })
        });
        let cuts = Cuts::register(&mut registry, "clients_cut");
        Metrics { registry, request_counters, cuts, ..m }
    }

    /// The counters of client connections cut (see [`Cuts`]).
    pub(crate) fn cuts(&self) -> Cuts {
        self.cuts.clone()
    }

    /// Registers the state read at scrape time.
    pub fn set_sources(&self, sources: Arc<dyn Sources>) {
        if let Ok(mut s) = self.sources.write() {
            *s = Some(sources);
        }
    }

    /// A decision with its outcome (`allowed`, `disallowed`, ...) and reason class.
    pub fn decision(&self, outcome: Outcome, reason: ReasonClass, took: Duration) {
        let key = (outcome, reason);
        let memo = self.decision_memo.load();
        match memo.iter().find(|(k, _)| *k == key) {
            Some((_, counter)) => {
                counter.inc();
            }
            None => {
                let labels = DecisionLabels { outcome: outcome.as_str(), reason: reason.as_str() };
                let counter = self.decisions.get_or_create(&labels).clone();
                counter.inc();
                self.decision_memo.rcu(|memo| {
                    let mut memo = Vec::clone(memo);
                    if !memo.iter().any(|(k, _)| *k == key) {
                        memo.push((key, counter.clone()));
                    }
                    memo
                });
            }
        }
        self.decision_seconds.observe(took.as_secs_f64());
    }

    /// A robots.txt fetch.
    pub fn fetch(&self, result: &'static str, cause: &'static str) {
        self.fetches.get_or_create(&FetchLabels { result, cause }).inc();
    }

    /// A request, where it came in, its HTTP version, and the time to its response headers.
    pub fn request(&self, arrival: Arrival, version: http::Version, took: Duration) {
        let v = usize::from(version == http::Version::HTTP_2);
        let a = match arrival {
            Arrival::Proxy => 0,
            Arrival::Intercepted => 1,
            Arrival::ConnectHttp => 2,
        };
        self.request_counters[a][v].inc();
        self.request_seconds.observe(took.as_secs_f64());
    }

    /// A forwarded request that failed upstream.
    pub fn upstream_error(&self, class: &'static str) {
        self.upstream_errors.get_or_create(&ClassLabels { class }).inc();
    }

    /// A request refused before a robots decision.
    pub fn refused(&self, kind: RefusalKind) {
        self.refused.get_or_create(&ClassLabels { class: kind.as_str() }).inc();
    }

    /// A client connection opened; the guard closes it.
    pub fn connection(self: &Arc<Self>) -> ConnectionGuard {
        self.connections.inc();
        self.connections_open.inc();
        ConnectionGuard(self.clone())
    }

    /// A number that changes whenever a request is counted or a client connection opens or
    /// closes (for noticing that the proxy went quiet).
    pub(crate) fn activity(&self) -> u64 {
        let requests: u64 = self.request_counters.iter().flatten().map(Counter::get).sum();
        let open = u64::try_from(self.connections_open.get()).unwrap_or(0);
        requests.wrapping_add(self.connections.get()).wrapping_add(open << 32)
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let sources = self.sources.read().ok().and_then(|s| s.clone());
        if let Some(s) = sources {
            let (entries, bytes, hits, misses, stale) = s.cache();
            self.cache_entries.set(entries as i64);
            self.cache_bytes.set(bytes as i64);
            for (i, (class, now)) in
                [("hit", hits), ("miss", misses), ("stale", stale)].into_iter().enumerate()
            {
                let before = self.pulled[i].swap(now as i64, Ordering::Relaxed);
                let c = self.cache_lookups.get_or_create(&ClassLabels { class });
                c.inc_by((now as i64 - before).max(0) as u64);
            }
            let (written, lost) = s.audit();
            self.audit_written.set(written as i64);
            self.audit_lost.set(lost as i64);
            if let Some(n) = s.leaves_minted() {
                self.leaves_minted.set(n as i64);
            }
            let (held, lanes) = s.pacing();
            self.pace_held.set(held as i64);
            self.pace_lanes.set(lanes as i64);
            self.upstream_idle.set(s.upstream_idle() as i64);
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            let _ = writeln!(out, "# encoding failed");
        }
        out
    }
}

impl robotsgate::layer::DecisionObserver for Metrics {
    fn decision(&self, outcome: Outcome, reason: ReasonClass, took: Duration) {
        Metrics::decision(self, outcome, reason, took);
    }

    fn refused(&self, kind: RefusalKind) {
        Metrics::refused(self, kind);
    }

    fn response_usage(&self, outcome: Outcome) {
        self.response_usage.get_or_create(&OutcomeLabels { outcome: outcome.as_str() }).inc();
    }
}

impl robotsgate::pacing::PaceObserver for Metrics {
    fn waited(&self, wait: Duration) {
        self.pace_wait.observe(wait.as_secs_f64());
    }

    fn refused(&self, why: PaceRefusal) {
        self.pace_refused.get_or_create(&ReasonLabels { reason: why.as_str() }).inc();
    }

    fn paused(&self, status: u16) {
        self.pace_pauses.get_or_create(&StatusLabels { status }).inc();
    }
}

#[cfg(feature = "cluster")]
impl robotsgate::cluster::ClusterObserver for Metrics {
    fn cluster_up(&self, up: bool) {
        self.cluster_up.set(i64::from(up));
    }
}

impl robotsgate::policy::FetchObserver for Metrics {
    fn fetched(&self, _: &robotsgate::origin::Origin, outcome: &robotsgate::fetch::FetchOutcome) {
        use robotsgate::fetch::FetchResult;
        let (result, cause) = match &outcome.result {
            FetchResult::Success { .. } => ("success", ""),
            FetchResult::Unavailable { .. } => ("unavailable", ""),
            FetchResult::TooManyRedirects => ("too-many-redirects", ""),
            FetchResult::Unreachable(u) => ("unreachable", u.class()),
        };
        self.fetch(result, cause);
    }
}

/// Decrements the open-connections gauge when dropped.
#[derive(Debug)]
pub struct ConnectionGuard(Arc<Metrics>);

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.0.connections_open.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_are_prefixed_and_count() {
        let m = Arc::new(Metrics::new());
        m.decision(Outcome::Disallowed, ReasonClass::DisallowRule, Duration::from_micros(20));
        m.fetch("success", "");
        let c = m.connection();
        m.request(Arrival::Intercepted, http::Version::HTTP_2, Duration::from_millis(1));
        m.request(Arrival::Proxy, http::Version::HTTP_11, Duration::from_millis(1));
        m.request(Arrival::Proxy, http::Version::HTTP_10, Duration::from_millis(1));
        let text = m.render();
        assert!(
            text.contains(r#"robotsgate_requests_total{transport="intercepted",protocol="http2"} 1"#),
            "{text}"
        );
        assert!(
            text.contains(r#"robotsgate_requests_total{transport="proxy",protocol="http1"} 2"#),
            "{text}"
        );
        assert!(
            text.contains(r#"robotsgate_requests_total{transport="connect-http",protocol="http1"} 0"#),
            "every series is there from the start: {text}"
        );
        assert!(
            text.contains(r#"robotsgate_decisions_total{outcome="disallowed",reason="disallow-rule"} 1"#),
            "{text}"
        );
        assert!(text.contains("robotsgate_open_connections 1"), "{text}");
        drop(c);
        assert!(m.render().contains("robotsgate_open_connections 0"));
    }

    /// Issue 27.3: the decision metric's labels are the audit record's names.
    #[test]
    fn decision_labels_are_the_vocabularys_names() {
        let m = Metrics::new();
        for (i, outcome) in Outcome::ALL.iter().enumerate() {
            let reason = ReasonClass::ALL[i % ReasonClass::ALL.len()];
            m.decision(*outcome, reason, Duration::from_micros(1));
            m.decision(*outcome, reason, Duration::from_micros(1));
        }
        let text = m.render();
        for (i, outcome) in Outcome::ALL.iter().enumerate() {
            let reason = ReasonClass::ALL[i % ReasonClass::ALL.len()];
            let series = format!(
                r#"robotsgate_decisions_total{{outcome="{}",reason="{}"}} 2"#,
                outcome.as_str(),
                reason.as_str()
            );
            assert!(text.contains(&series), "{series} in {text}");
        }
    }
}
