//! The metrics of `robotsgate ingress` (`robotsgate_ingress_*`), served by the admin
//! listener at `/metrics`.
//!
//! Bot requests are counted from the layer's records ([`IngressMetrics::record`], given
//! to [`IngressBuilder::observer`](robotsgate::ingress::IngressBuilder::observer)): by
//! outcome and reason (the names of [`robotsgate::Outcome`] and
//! [`robotsgate::ReasonClass`]) and by identity verdict and method. The counters of each
//! label set are made once and then found by comparing the record's `&'static str`
//! names: nothing is hashed or allocated per request.
//!
//! Each identity method's own figures are read from the verifier when scraped
//! ([`IngressMetrics::watch_verifier`]): the IP lists' prefixes and failures, reverse DNS
//! checks by how they were answered, the key directories cached.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use arc_swap::ArcSwap;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use robotsgate::audit::{AuditLog, IngressRecordRef};
use robotsgate::identity::Verifier;

use crate::metrics::Cuts;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DecisionLabels {
    outcome: &'static str,
    reason: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IdentityLabels {
    verdict: &'static str,
    method: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct IdentityWhyLabels {
    verdict: &'static str,
    why: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ListLabels {
    list: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct AnswerLabels {
    answer: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProtocolLabels {
    protocol: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ClassLabels {
    class: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: &'static str,
}

/// The counters of a family by a pair of static names, made on first use.
struct Memo<L> {
    family: Family<L, Counter>,
    made: ArcSwap<Vec<((&'static str, &'static str), Counter)>>,
    labels: fn(&'static str, &'static str) -> L,
}

impl<L> Memo<L>
where
    L: Clone + std::hash::Hash + Eq + EncodeLabelSet + std::fmt::Debug + Send + Sync + 'static,
{
    fn new(labels: fn(&'static str, &'static str) -> L) -> Memo<L> {
        Memo { family: Family::default(), made: ArcSwap::default(), labels }
    }

    fn inc(&self, key: (&'static str, &'static str)) {
        if let Some((_, c)) = self.made.load().iter().find(|(k, _)| *k == key) {
            c.inc();
            return;
        }
        let counter = self.family.get_or_create(&(self.labels)(key.0, key.1)).clone();
        counter.inc();
        self.made.rcu(|made| {
            let mut made = Vec::clone(made);
            if !made.iter().any(|(k, _)| *k == key) {
                made.push((key, counter.clone()));
            }
            made
        });
    }
}

/// How a TLS handshake failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HandshakeFailure {
    /// The client sent something that is not a TLS handshake we can finish.
    Error,
    /// It did not finish within `ingress.tls_handshake_timeout`.
    Timeout,
}

/// Why the upstream did not answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamFailure {
    /// Connecting or sending failed.
    Error,
    /// No answer within `ingress.upstream_timeout`.
    Timeout,
}

/// The metrics of one `robotsgate ingress` process.
pub struct IngressMetrics {
    registry: Registry,
    /// HTTP/1.x, HTTP/2.
    requests: [Counter; 2],
    request_seconds: Histogram,
    decisions: Memo<DecisionLabels>,
    identity: Memo<IdentityLabels>,
    identity_why: Memo<IdentityWhyLabels>,
    /// error, timeout
    upstream_errors: [Counter; 2],
    /// error, timeout
    handshake_failures: [Counter; 2],
    tls_reload_failures: Counter,
    /// 2xx, 3xx, 4xx, 5xx, error
    robots_fetches: [Counter; 5],
    connections: Counter,
    connections_open: Gauge,
    websockets: Counter,
    websockets_open: Gauge,
    audit_written: Gauge,
    audit_lost: Gauge,
    audit: Option<AuditLog>,
    ip_list_prefixes: Family<ListLabels, Gauge>,
    ip_list_failing: Family<ListLabels, Gauge>,
    /// hit, lookup, joined, pending, busy (set from the checker's counts when scraped).
    rdns: Mutex<[Counter; 5]>,
    directories: Gauge,
    verifier: OnceLock<Arc<Verifier>>,
    cuts: Cuts,
}

impl std::fmt::Debug for IngressMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressMetrics").finish_non_exhaustive()
    }
}

impl IngressMetrics {
    /// All series registered, at zero; the audit figures read from `audit` when scraped.
    pub fn new(audit: Option<AuditLog>) -> IngressMetrics {
        let requests = Family::<ProtocolLabels, Counter>::default();
        let upstream_errors = Family::<ClassLabels, Counter>::default();
        let handshakes = Family::<ClassLabels, Counter>::default();
        let fetches = Family::<ResultLabels, Counter>::default();
        let rdns = Family::<AnswerLabels, Counter>::default();
        let m = IngressMetrics {
            registry: Registry::default(),
            requests: ["1.x", "2"]
                .map(|protocol| requests.get_or_create(&ProtocolLabels { protocol }).clone()),
            request_seconds: Histogram::new(exponential_buckets(0.000_1, 4.0, 10)),
            decisions: Memo::new(|outcome, reason| DecisionLabels { outcome, reason }),
            identity: Memo::new(|verdict, method| IdentityLabels { verdict, method }),
            identity_why: Memo::new(|verdict, why| IdentityWhyLabels { verdict, why }),
            upstream_errors: ["error", "timeout"]
                .map(|class| upstream_errors.get_or_create(&ClassLabels { class }).clone()),
            handshake_failures: ["error", "timeout"]
                .map(|class| handshakes.get_or_create(&ClassLabels { class }).clone()),
            robots_fetches: ["2xx", "3xx", "4xx", "5xx", "error"]
                .map(|result| fetches.get_or_create(&ResultLabels { result }).clone()),
            tls_reload_failures: Counter::default(),
            connections: Counter::default(),
            connections_open: Gauge::default(),
            websockets: Counter::default(),
            websockets_open: Gauge::default(),
            audit_written: Gauge::default(),
            audit_lost: Gauge::default(),
            audit,
            ip_list_prefixes: Family::default(),
            ip_list_failing: Family::default(),
            rdns: Mutex::new(
                ["hit", "lookup", "joined", "pending", "busy"]
                    .map(|answer| rdns.get_or_create(&AnswerLabels { answer }).clone()),
            ),
            directories: Gauge::default(),
            verifier: OnceLock::new(),
            cuts: Cuts::default(),
        };
        let mut r = Registry::with_prefix("robotsgate_ingress");
        r.register("requests", "Requests received (bots and others), by HTTP version", requests);
        r.register(
            "request_duration_seconds",
            "Time from a request to its response headers",
            m.request_seconds.clone(),
        );
        r.register(
            "decisions",
            "Bot requests by outcome and reason (robots-txt: fetches of robots.txt itself)",
            m.decisions.family.clone(),
        );
        r.register(
            "identity",
            "Bot requests whose identity was checked, by verdict (verified, unverified, failed) and \
             method (ip_range, reverse_dns, signature; none when not verified)",
            m.identity.family.clone(),
        );
        r.register(
            "identity_not_verified",
            "Bot requests whose identity check did not verify them, by verdict (unverified, failed) and why \
             (not_in_ranges, no_ptr, foreign_name, not_forward_confirmed, bad_signature, replayed_signature, \
             pending, busy, dns_error, no_method, unknown_token, signature_unchecked)",
            m.identity_why.family.clone(),
        );
        r.register(
            "upstream_errors",
            "Requests the upstream did not answer (502), by class (error, timeout)",
            upstream_errors,
        );
        r.register(
            "robots_fetches",
            "Fetches of the upstream's /robots.txt by robotsgate, by result (status class or error)",
            fetches,
        );
        r.register(
            "tls_handshake_failures",
            "TLS handshakes that failed (error) or did not finish in time (timeout)",
            handshakes,
        );
        r.register(
            "tls_reload_failures",
            "Certificate reloads (SIGHUP) refused: the files did not load; the pair in force was kept",
            m.tls_reload_failures.clone(),
        );
        r.register("connections", "Client connections accepted", m.connections.clone());
        r.register("open_connections", "Client connections open", m.connections_open.clone());
        r.register("websockets", "WebSocket connections spliced to the upstream", m.websockets.clone());
        r.register("open_websockets", "WebSocket connections open", m.websockets_open.clone());
        r.register("audit_records_written", "Audit records written", m.audit_written.clone());
        r.register("audit_records_lost", "Audit records lost because writing failed", m.audit_lost.clone());
        r.register(
            "identity_ip_list_prefixes",
            "Prefixes of each IP range list's copy in use (0: none loaded)",
            m.ip_list_prefixes.clone(),
        );
        r.register(
            "identity_ip_list_failing",
            "1 when the last fetch or read of an IP range list failed (its copy in use is kept)",
            m.ip_list_failing.clone(),
        );
        r.register(
            "identity_rdns_checks",
            "Reverse DNS checks by how they were answered: hit (cached), lookup (one started), joined \
             (waited for another request's lookup), pending (decided before it finished: verify.max_wait), \
             busy (not started: too many running)",
            rdns,
        );
        r.register(
            "identity_signature_directories",
            "Web Bot Auth key directories cached",
            m.directories.clone(),
        );
        let cuts = Cuts::register(&mut r, "clients_cut");
        IngressMetrics { registry: r, cuts, ..m }
    }

    /// The counters of client connections cut (see [`Cuts`]).
    pub(crate) fn cuts(&self) -> Cuts {
        self.cuts.clone()
    }

    /// Reads each identity method's figures from `verifier` when scraped.
    pub fn watch_verifier(&self, verifier: Arc<Verifier>) {
        let _ = self.verifier.set(verifier);
    }

    /// The verifier's figures, now.
    fn read_verifier(&self) {
        let Some(v) = self.verifier.get() else { return };
        if let Some(ranges) = v.ranges() {
            for status in ranges.status() {
                let list = ListLabels { list: status.source.name.to_string() };
                self.ip_list_prefixes
                    .get_or_create(&list)
                    .set(i64::try_from(status.prefixes).unwrap_or(i64::MAX));
                self.ip_list_failing.get_or_create(&list).set(i64::from(status.last_error.is_some()));
            }
        }
        if let Some(rdns) = v.rdns() {
            let s = rdns.stats();
            let counters = self.rdns.lock().unwrap_or_else(|e| e.into_inner());
            for (c, now) in counters.iter().zip([s.hits, s.lookups, s.joined, s.pending, s.busy]) {
                let before = c.get();
                if now > before {
                    c.inc_by(now - before);
                }
            }
        }
        if let Some(sig) = v.signatures() {
            self.directories.set(i64::try_from(sig.directories().len()).unwrap_or(i64::MAX));
        }
    }

    /// A bot request's record (the layer's observer).
    pub fn record(&self, record: &IngressRecordRef<'_>) {
        self.decisions.inc((record.outcome(), record.reason()));
        if let Some(verdict) = record.identity() {
            self.identity.inc((verdict, record.identity_method().unwrap_or("none")));
            if let Some(why) = record.identity_why() {
                self.identity_why.inc((verdict, why));
            }
        }
    }

    /// A request and the time to its response headers.
    pub fn request(&self, http2: bool, took: Duration) {
        self.requests[usize::from(http2)].inc();
        self.request_seconds.observe(took.as_secs_f64());
    }

    /// The upstream did not answer.
    pub fn upstream_failed(&self, why: UpstreamFailure) {
        self.upstream_errors[usize::from(why == UpstreamFailure::Timeout)].inc();
    }

    /// robotsgate fetched the upstream's robots.txt: its status, or `None` (no answer).
    pub fn robots_fetch(&self, status: Option<u16>) {
        let i = match status {
            Some(200..=299) => 0,
            Some(300..=399) => 1,
            Some(400..=499) => 2,
            Some(_) => 3,
            None => 4,
        };
        self.robots_fetches[i].inc();
    }

    /// A TLS handshake failed.
    pub fn handshake_failed(&self, why: HandshakeFailure) {
        self.handshake_failures[usize::from(why == HandshakeFailure::Timeout)].inc();
    }

    /// A certificate reload was refused.
    pub fn tls_reload_failed(&self) {
        self.tls_reload_failures.inc();
    }

    /// A client connection, open until the guard is dropped.
    pub fn connection(&self) -> OpenGuard {
        self.connections.inc();
        self.connections_open.inc();
        OpenGuard(self.connections_open.clone())
    }

    /// A number that changes whenever a request is counted or a client connection or
    /// WebSocket opens or closes (for noticing that the ingress went quiet).
    pub(crate) fn activity(&self) -> u64 {
        let requests: u64 = self.requests.iter().map(Counter::get).sum();
        let open =
            u64::try_from(self.connections_open.get().wrapping_add(self.websockets_open.get())).unwrap_or(0);
        requests
            .wrapping_add(self.connections.get())
            .wrapping_add(self.websockets.get())
            .wrapping_add(open << 32)
    }

    /// A WebSocket spliced to the upstream, open until the guard is dropped.
    pub fn websocket(&self) -> OpenGuard {
        self.websockets.inc();
        self.websockets_open.inc();
        OpenGuard(self.websockets_open.clone())
    }

    /// The Prometheus text format.
    pub fn render(&self) -> String {
        self.read_verifier();
        if let Some(audit) = &self.audit {
            self.audit_written.set(i64::try_from(audit.written()).unwrap_or(i64::MAX));
            self.audit_lost.set(i64::try_from(audit.lost()).unwrap_or(i64::MAX));
        }
        let mut out = String::new();
        if prometheus_client::encoding::text::encode(&mut out, &self.registry).is_err() {
            out.clear();
        }
        out
    }
}

impl crate::admin::MetricsText for IngressMetrics {
    fn render(&self) -> String {
        IngressMetrics::render(self)
    }
}

/// Decrements an open-count gauge when dropped.
#[derive(Debug)]
pub struct OpenGuard(Gauge);

impl Drop for OpenGuard {
    fn drop(&mut self) {
        self.0.dec();
    }
}

#[cfg(test)]
mod tests {
    use super::IngressMetrics;
    use std::time::Duration;

    /// The quiet-spell number moves with every request, connection and WebSocket opened or
    /// closed, and stays put without them.
    #[test]
    fn activity_moves_with_requests_and_connections() {
        let m = IngressMetrics::new(None);
        let mut seen = vec![m.activity()];
        let mut moved = |m: &IngressMetrics, what: &str| {
            let now = m.activity();
            assert!(!seen.contains(&now), "{what}: {now} seen before");
            seen.push(now);
        };
        m.request(false, Duration::from_millis(1));
        moved(&m, "an HTTP/1.1 request");
        m.request(true, Duration::from_millis(1));
        moved(&m, "an HTTP/2 request");
        let open = m.connection();
        moved(&m, "a connection opened");
        drop(open);
        moved(&m, "a connection closed");
        let ws = m.websocket();
        moved(&m, "a WebSocket opened");
        drop(ws);
        moved(&m, "a WebSocket closed");
        let last = m.activity();
        let _ = m.render();
        assert_eq!(m.activity(), last, "nothing happened");
    }
}
