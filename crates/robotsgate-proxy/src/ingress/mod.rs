//! `robotsgate ingress`: a reverse proxy in front of a site that enforces the site's own
//! robots.txt on the bots that visit it. The enforcement is the library's
//! [`IngressLayer`]; this module is the listener (plain HTTP, or HTTPS with the site's
//! certificate: HTTP/1.1 and HTTP/2; a bound on connections, TLS handshake and header read
//! timeouts, header size, graceful shutdown) and the forwarding to the upstream through a
//! [`Pool`] (bodies streamed, hop-by-hop headers removed, `X-Forwarded-For`,
//! `X-Forwarded-Proto`, `X-Forwarded-Host` and `Forwarded` added; an upstream that does
//! not answer: `502`, recorded).

mod fleet;
mod kept;
mod metrics;
mod reload;
mod tls;
mod upgrade;

pub use metrics::{HandshakeFailure, IngressMetrics, OpenGuard, UpstreamFailure};
pub use reload::IngressReloader;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::FutureExt as _;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, HOST};
use http::uri::{Authority, Scheme};
use http::{HeaderValue, Request, Response, StatusCode, Uri};
use http_body_util::{Either, Empty, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use robotsgate::ROBOTSGATE_HEADER;
use robotsgate::audit::AuditLog;
use robotsgate::identity::Verifier;
use robotsgate::identity::httpsig::{Verifier as SignatureVerifier, VerifyConfig as SignatureConfig};
use robotsgate::identity::ranges::refresh::{self, RefreshConfig, RefreshHandle};
use robotsgate::identity::ranges::{ListLimits, Location, Ranges};
use robotsgate::identity::rdns::{RdnsConfig, ReverseDns};
use robotsgate::ingress::{
    ForwardedHeader, Impersonators, IngressConfig, IngressLayer, IngressService, Mode, UnknownAgents,
};
use robotsgate::net::{
    Connector, DnsConfig, Guard, Pool, PoolBody, PoolConfig, PoolError, PoolRequestBody, Resolver, TlsConfig,
    push_ip,
};
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::{Layer as _, Service, ServiceExt as _};

use crate::admin::{Admin, Readiness};
use crate::app::{StartError, audit_log};
use crate::config::{
    Config, ForwardedHeaderName, ImpersonatorsName, IngressModeName, ReplayName, UnknownAgentsName,
};
use crate::forward::{H1Conn, H1Sent, HeadLimit, fits_h1, send_h1, strip_hop_by_hop};
use crate::h1_server::{self, Served};
use crate::quiet::Activity;
use crate::send_bound::SendBound;
use crate::slot::Slot;
use crate::workers::{self, Workers};
use fleet::Fleet;
pub use kept::KeptBody;
use kept::{Kept, Route};

/// Why `robotsgate ingress` cannot start.
#[derive(Debug, thiserror::Error)]
pub enum IngressError {
    /// No upstream, or not an `http://host[:port]` URL.
    #[error("ingress.upstream: {0}")]
    Upstream(String),
    /// The robots.txt file cannot be read.
    #[error("ingress.robots: cannot read {path}: {source}")]
    Robots {
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// `ingress.status` is not a status robotsgate can refuse with.
    #[error("ingress.status: {0} is not a 4xx or 5xx status")]
    Status(u16),
    /// An IP range list file of `[[verify.operators]]` cannot be used.
    #[error("verify.operators: the IP list {list} of {operator}: {why}")]
    IpList {
        /// The operator.
        operator: String,
        /// The list (its path).
        list: String,
        /// Why.
        why: String,
    },
    /// The certificate or key file of `ingress.tls_cert`/`tls_key` cannot be used.
    #[error("ingress TLS: {path}: {why}")]
    Tls {
        /// The file.
        path: String,
        /// Why.
        why: String,
    },
    /// Only one of `ingress.tls_cert` and `ingress.tls_key` is set.
    #[error("ingress.tls_cert and ingress.tls_key: give both or neither")]
    TlsPair,
    /// `[cluster]` cannot be used.
    #[error("cluster: {0}")]
    Cluster(String),
    /// The listener, TLS or audit log could not be set up.
    #[error(transparent)]
    Start(#[from] StartError),
}

/// The request body the upstream service takes: the client's, or none (the layer's own
/// robots.txt fetch).
pub type UpstreamRequestBody = Option<PoolRequestBody>;
/// The response body the upstream service gives: the upstream's (through the pool), or
/// robotsgate's own (a `502`, a `101`), or the upstream's answer to a WebSocket upgrade
/// it did not accept.
pub type UpstreamBody = Either<PoolBody, Either<Full<Bytes>, Either<Incoming, KeptBody>>>;

// The headers each forwarded request gets, named once (a name given as a string is looked
// up again on every insert).
const X_FORWARDED_FOR: http::HeaderName = http::HeaderName::from_static("x-forwarded-for");
const X_FORWARDED_PROTO: http::HeaderName = http::HeaderName::from_static("x-forwarded-proto");
const X_FORWARDED_HOST: http::HeaderName = http::HeaderName::from_static("x-forwarded-host");

/// In a request's extensions: it came over HTTPS (`X-Forwarded-Proto: https`).
#[derive(Debug, Clone, Copy)]
pub struct Https;

/// Forwards requests to the upstream through a [`Pool`], or over the connection the
/// client's connection keeps (`Kept`, from the request's extensions).
#[derive(Clone)]
pub struct Upstream {
    pool: Pool,
    /// Opens kept connections: the pool's connector, HTTP/1.1 only.
    kept_connector: Connector,
    /// Permits to open kept connections ([`kept::KEPT_OPENING`]).
    opening: Arc<Semaphore>,
    scheme: Scheme,
    authority: Authority,
    /// The `Host` the upstream gets: its own authority.
    host: HeaderValue,
    timeout: Duration,
    metrics: Option<Arc<IngressMetrics>>,
    /// WebSockets: their tasks, the signal that ends them, how long one may stay silent.
    tunnels: TaskTracker,
    cut: CancellationToken,
    websocket_idle: Duration,
    /// A longer request head (request line and fields) is answered `431`.
    head_limit: HeadLimit,
}

impl std::fmt::Debug for Upstream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Upstream({}://{})", self.scheme, self.authority)
    }
}

impl Upstream {
    /// The upstream at `url` (`http://host[:port]`, a path is ignored), reached through
    /// `pool`.
    pub fn new(url: &str, pool: Pool, timeout: Duration) -> Result<Upstream, IngressError> {
        let uri: Uri = url.parse().map_err(|e| IngressError::Upstream(format!("{url:?}: {e}")))?;
        let scheme =
            uri.scheme().cloned().ok_or_else(|| IngressError::Upstream(format!("{url:?}: no scheme")))?;
        if scheme != Scheme::HTTP && scheme != Scheme::HTTPS {
            return Err(IngressError::Upstream(format!("{url:?}: http or https only")));
        }
        let authority =
            uri.authority().cloned().ok_or_else(|| IngressError::Upstream(format!("{url:?}: no host")))?;
        let host = HeaderValue::from_str(authority.as_str())
            .map_err(|e| IngressError::Upstream(format!("{url:?}: {e}")))?;
        Ok(Upstream {
            kept_connector: pool.connector().http1_only(),
            opening: Arc::new(Semaphore::new(kept::KEPT_OPENING)),
            pool,
            scheme,
            authority,
            host,
            timeout,
            metrics: None,
            tunnels: TaskTracker::new(),
            cut: CancellationToken::new(),
            websocket_idle: Duration::from_secs(600),
            head_limit: HeadLimit(usize::MAX),
        })
    }

    /// A request whose head (request line and fields) is longer than `bytes` is answered
    /// `431` (robotsgate's own answer, recorded as such) and not forwarded.
    pub fn with_max_header_bytes(mut self, bytes: usize) -> Upstream {
        self.head_limit = HeadLimit(bytes);
        self
    }

    /// A WebSocket with nothing moving either way for `idle` is closed (default 10 min).
    pub fn with_websocket_idle_timeout(mut self, idle: Duration) -> Upstream {
        self.websocket_idle = idle;
        self
    }

    /// The same upstream with a pool of its own, holding at most `1/shares` of this one's
    /// idle connections: each worker thread keeps its own connections to the upstream, so
    /// that a request and the upstream connection it goes out on are served by one thread.
    fn own_pool(&self, shares: usize) -> Upstream {
        let config = self.pool.config();
        let config = PoolConfig { max_idle: config.max_idle.div_ceil(shares.max(1)), ..config };
        Upstream {
            pool: Pool::new(self.pool.connector().clone(), config),
            opening: Arc::new(Semaphore::new(kept::KEPT_OPENING)),
            ..self.clone()
        }
    }

    /// Counts upstream failures and robots.txt fetches in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<IngressMetrics>) -> Upstream {
        self.metrics = Some(metrics);
        self
    }

    fn bad_gateway(why: String) -> Response<UpstreamBody> {
        let text = format!("robotsgate: the site did not answer: {why}\n");
        let mut res = Response::new(Either::Right(Either::Left(Full::new(Bytes::from(text.clone())))));
        *res.status_mut() = StatusCode::BAD_GATEWAY;
        let h = res.headers_mut();
        h.insert(ROBOTSGATE_HEADER, HeaderValue::from_static("upstream-unreachable"));
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        h.insert(CONTENT_LENGTH, HeaderValue::from(text.len()));
        // robotsgate's own answer: the layer keeps its header.
        res.extensions_mut()
            .insert(robotsgate::Refusal::new(robotsgate::RefusalKind::UpstreamUnreachable, text));
        res
    }
}

impl Service<Request<UpstreamRequestBody>> for Upstream {
    type Response = Response<UpstreamBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<UpstreamRequestBody>) -> Self::Future {
        if let Some(refusal) = self.head_limit.check_as(&req, "ingress.max_header_bytes") {
            let mut res = refusal.clone().into_response(req.method() == http::Method::HEAD);
            // robotsgate's own answer: the layer keeps its header.
            res.extensions_mut().insert(refusal);
            return answered(res.map(|b| Either::Right(Either::Left(b))));
        }
        // Everything but the send is done here, before the future is made: the future,
        // boxed for every request, holds the send and the timeout alone (see `send`).
        let websocket = match upgrade::ask(&req) {
            upgrade::Ask::Plain => None,
            upgrade::Ask::WebSocket(opening) => Some(opening),
            upgrade::Ask::OtherConnect => return answered(Upstream::not_a_websocket()),
        };
        let (mut parts, body) = req.into_parts();
        let kept = parts.extensions.remove::<Kept>();
        let peer = parts.extensions.get::<SocketAddr>().map(|a| a.ip());
        let proto = if parts.extensions.get::<Https>().is_some() { "https" } else { "http" };
        // The upstream's scheme and authority with the request's path and query, as
        // parsed (not parsed again).
        let mut target = std::mem::take(&mut parts.uri).into_parts();
        let original_authority = target.authority.take();
        target.scheme = Some(self.scheme.clone());
        target.authority = Some(self.authority.clone());
        if target.path_and_query.is_none() {
            target.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
        }
        let Ok(uri) = Uri::from_parts(target) else {
            return answered(Upstream::bad_gateway("the request target is not a path".into()));
        };
        parts.uri = uri;
        // To the upstream over HTTP/1.1 (or HTTP/2 where it offers it), whatever the
        // client spoke.
        parts.version = http::Version::HTTP_11;
        let h = &mut parts.headers;
        strip_hop_by_hop(h);
        // HTTP/2 has no Host header: the authority of the request's URI is the host.
        let host = h
            .remove(HOST)
            .or_else(|| original_authority.as_ref().and_then(|a| HeaderValue::from_str(a.as_str()).ok()));
        if let Some(ip) = peer {
            let mut xff = String::with_capacity(48);
            if let Some(prior) = h.get(X_FORWARDED_FOR).and_then(|v| v.to_str().ok()) {
                xff.push_str(prior);
                xff.push_str(", ");
            }
            push_ip(&mut xff, ip);
            // The strings become the values' buffers (checked, not copied).
            if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(xff)) {
                h.insert(X_FORWARDED_FOR, v);
            }
            let fwd = forwarded(ip, proto, host.as_ref().and_then(|v| v.to_str().ok()));
            if let Ok(v) = HeaderValue::from_maybe_shared(Bytes::from(fwd)) {
                h.append(http::header::FORWARDED, v);
            }
        }
        h.insert(X_FORWARDED_PROTO, HeaderValue::from_static(proto));
        if let Some(host) = host {
            h.insert(X_FORWARDED_HOST, host);
        }
        h.insert(HOST, self.host.clone());
        if let Some(opening) = websocket {
            match parts.extensions.remove::<hyper::upgrade::OnUpgrade>() {
                Some(client) => {
                    let this = self.clone();
                    return Box::pin(async move { Ok(this.upgrade(parts, opening, client).await) });
                }
                None if matches!(opening, upgrade::Opening::ExtendedConnect) => {
                    return answered(Upstream::not_a_websocket());
                }
                None => {}
            }
        }
        // No body: the layer's own fetch of robots.txt.
        let robots_fetch = body.is_none();
        let body = body.unwrap_or_else(|| Either::Right(Empty::new()));
        let head = parts.method == http::Method::HEAD;
        let req = Request::from_parts(parts, body);
        let (metrics, timeout) = (self.metrics.clone(), self.timeout);
        let sent = tokio::time::timeout(timeout, self.send(kept, req));
        Box::pin(sent.map(move |answer| {
            let metrics = metrics.as_deref();
            if robots_fetch && let Some(m) = metrics {
                m.robots_fetch(
                    answer.as_ref().ok().and_then(|r| r.as_ref().ok()).map(|r| r.status().as_u16()),
                );
            }
            // A length no client may be given, on an answer whose length frames nothing
            // (the clients check it where it frames the body).
            let mut answer = answer;
            if let Ok(Ok(res)) = &answer
                && let Err(e) = robotsgate_h1::check_bodiless_length(head, res.status(), res.headers())
            {
                answer = Ok(Err(e.into()));
            }
            match answer {
                Ok(Ok(mut res)) => {
                    strip_hop_by_hop(res.headers_mut());
                    Ok(res)
                }
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, "the upstream failed");
                    if let Some(m) = metrics {
                        m.upstream_failed(UpstreamFailure::Error);
                    }
                    Ok(Upstream::bad_gateway(e.to_string()))
                }
                Err(_) => {
                    if let Some(m) = metrics {
                        m.upstream_failed(UpstreamFailure::Timeout);
                    }
                    Ok(Upstream::bad_gateway(format!("no answer in {} s", timeout.as_secs())))
                }
            }
        }))
    }
}

/// An answer given without waiting, as [`Upstream`]'s future.
fn answered(res: Response<UpstreamBody>) -> <Upstream as Service<Request<UpstreamRequestBody>>>::Future {
    Box::pin(std::future::ready(Ok(res)))
}

type SendError = Box<dyn std::error::Error + Send + Sync>;
type Sending = Pin<Box<dyn Future<Output = Result<Response<UpstreamBody>, SendError>> + Send>>;

impl Upstream {
    /// Sends `req` on the client's kept connection if it has one, else through the pool.
    ///
    /// On a kept connection that is ready (nearly every request of a keep-alive client)
    /// the request is handed to it now, and the future is the wait for its answer and
    /// the connection's return: combinators, not `async` blocks, each of which would hold
    /// the request and the future it awaits once more.
    fn send(
        &self,
        kept: Option<Kept>,
        req: Request<PoolRequestBody>,
    ) -> futures_util::future::Either<
        impl Future<Output = Result<Response<UpstreamBody>, SendError>> + use<>,
        Sending,
    > {
        use futures_util::future::Either as Fut;
        let (route, kept) = match kept {
            Some(k) if fits_h1(&req) => (self.take_kept(&k, req.uri()), Some(k)),
            _ => (Route::Pool, None),
        };
        let pool = self.pool.clone();
        match (route, kept) {
            (Route::Kept(conn), Some(kept)) => {
                Fut::Left(send_h1(conn, req, Some(kept)).then(move |sent| match sent {
                    H1Sent::Answered(res) => Fut::Left(std::future::ready(Ok(kept_response(res)))),
                    // Found closed before a byte of the answer came: through the pool.
                    H1Sent::NotAnswered(req) => Fut::Right(pooled(pool, req)),
                    H1Sent::Failed(e) => Fut::Left(std::future::ready(Err(e.into()))),
                }))
            }
            (Route::Open(origin, opening), Some(kept)) => {
                let connector = self.kept_connector.clone();
                Fut::Right(Box::pin(async move {
                    let connected = connector.connect(&origin).await;
                    drop(opening);
                    let stream = connected.map_err(PoolError::Connect)?;
                    let Some(conn) = H1Conn::new(stream, pool.config().read_timeout) else {
                        return pooled(pool, req).await;
                    };
                    match send_h1(conn, req, Some(kept)).await {
                        H1Sent::Answered(res) => Ok(kept_response(res)),
                        // A new connection closed before it answered: the pool tries once more.
                        H1Sent::NotAnswered(req) => pooled(pool, req).await,
                        H1Sent::Failed(e) => Err(e.into()),
                    }
                }))
            }
            _ => Fut::Right(pooled(pool, req)),
        }
    }
}

/// The response read over a kept connection, as the upstream's body type.
fn kept_response(res: Response<crate::forward::H1Body<Kept>>) -> Response<UpstreamBody> {
    res.map(|b| Either::Right(Either::Right(Either::Right(KeptBody(b)))))
}

/// Sends `req` through `pool`. Boxed: the pool's future is the larger, and the kept
/// connection carries a keep-alive client's requests after its first few.
fn pooled(pool: Pool, req: Request<PoolRequestBody>) -> Sending {
    Box::pin(async move { Ok(pool.send(req).await?.map(Either::Left)) })
}

/// The `Forwarded` element (RFC 7239) for a request from `ip` over `proto` to `host`
/// (left out when it holds a character a quoted string would have to escape).
fn forwarded(ip: std::net::IpAddr, proto: &str, host: Option<&str>) -> String {
    let mut fwd = String::with_capacity(64);
    fwd.push_str(if ip.is_ipv6() { "for=\"[" } else { "for=" });
    push_ip(&mut fwd, ip);
    fwd.push_str(if ip.is_ipv6() { "]\";proto=" } else { ";proto=" });
    fwd.push_str(proto);
    if let Some(host) = host
        && host.bytes().all(|b| b.is_ascii_graphic() && b != b'"' && b != b'\\')
    {
        fwd.push_str(";host=\"");
        fwd.push_str(host);
        fwd.push('"');
    }
    fwd
}

/// The identity verifier of `[verify]` (`None` when it is off): the operators' lists
/// from the bundled snapshot and files (and, with `refresh`, fetched through `outbound`
/// by the refresher [`refresher`] starts), reverse DNS through `[dns] servers`, Web Bot
/// Auth signatures against the operators' `signature_agents` (key directories fetched
/// through `outbound`). A list file that cannot be read or parsed is an error; a URL with
/// no bundled copy is a warning when lists are not refreshed (it checks nothing).
pub fn verifier(config: &Config, outbound: &Connector) -> Result<Option<Verifier>, IngressError> {
    verifier_in(config, outbound, None)
}

/// [`verifier`], its replay check shared through `fleet` (made of `config` when it is
/// needed and not given).
fn verifier_in(
    config: &Config,
    outbound: &Connector,
    fleet: Option<&Fleet>,
) -> Result<Option<Verifier>, IngressError> {
    let v = &config.verify;
    if !v.enabled {
        return Ok(None);
    }
    let operators = v.operators();
    let ranges = if v.ip_ranges {
        let ranges = Ranges::for_operators(&operators, ListLimits::default());
        for status in ranges.status() {
            let source = &status.source;
            match (&source.location, status.provenance, status.last_error) {
                (_, Some(_), _) => {}
                (Location::File(_), None, why) => {
                    return Err(IngressError::IpList {
                        operator: source.operator.to_string(),
                        list: source.name.to_string(),
                        why: why.unwrap_or_else(|| "not loaded".into()),
                    });
                }
                (Location::Url(url), None, _) if v.refresh => tracing::debug!(
                    operator = %source.operator,
                    "the IP list {url} has no bundled copy: it checks nothing until the refresher fetches it"
                ),
                (Location::Url(url), None, why) => tracing::warn!(
                    operator = %source.operator,
                    why = why.as_deref().unwrap_or("no bundled copy"),
                    "the IP list {url} is not loaded and verify.refresh is off: it checks nothing"
                ),
            }
        }
        Some(ranges)
    } else {
        None
    };
    let rdns = v.rdns.then(|| {
        ReverseDns::new(
            operators.iter().flat_map(|o| o.rdns_suffixes.iter()),
            RdnsConfig {
                servers: config.dns.servers.clone(),
                max_wait: v.max_wait.0,
                ..RdnsConfig::default()
            },
        )
    });
    let signatures = (v.signatures && operators.iter().any(|o| !o.signature_agents.is_empty())).then(|| {
        let sig = SignatureConfig {
            clock_skew: v.clock_skew.0,
            refuse_replays: v.replay == ReplayName::Refuse,
            max_wait: v.max_wait.0,
            // The listener is plain HTTP behind the site's TLS: `@target-uri` is the
            // public https one.
            default_scheme: "https".into(),
            ..SignatureConfig::default()
        };
        SignatureVerifier::new(outbound.clone(), sig)
    });
    let signatures = match signatures {
        Some(sig) if v.replay == ReplayName::Refuse => Some(match fleet {
            Some(fleet) => fleet.share_replays(sig),
            None => Fleet::new(config)?.share_replays(sig),
        }),
        other => other,
    };
    Ok(Some(Verifier::with_signatures(&operators, ranges, rdns, signatures)))
}

/// Starts the refresher of `verifier`'s URL and file lists (`verify.refresh`), fetching
/// through `outbound`.
pub fn refresher(config: &Config, verifier: &Verifier, outbound: &Connector) -> Option<RefreshHandle> {
    let ranges = verifier.ranges()?;
    if !config.verify.refresh || ranges.sources().is_empty() {
        return None;
    }
    let refresh = RefreshConfig { interval: config.verify.refresh_interval.0, ..RefreshConfig::default() };
    Some(refresh::spawn(ranges.clone(), outbound.clone(), refresh))
}

/// The layer's settings of `[ingress]`; a status that cannot refuse is an error.
fn settings(ic: &crate::config::IngressSection) -> Result<IngressConfig, IngressError> {
    let status = StatusCode::from_u16(ic.status)
        .ok()
        .filter(|s| s.is_client_error() || s.is_server_error())
        .ok_or(IngressError::Status(ic.status))?;
    Ok(IngressConfig {
        mode: match ic.mode {
            IngressModeName::Enforce => Mode::Enforce,
            IngressModeName::ReportOnly => Mode::ReportOnly,
        },
        status,
        unknown_agents: match ic.unknown_agents {
            UnknownAgentsName::Ignore => UnknownAgents::Ignore,
            UnknownAgentsName::Star => UnknownAgents::Star,
        },
        impersonators: match ic.impersonators {
            ImpersonatorsName::Refuse => Impersonators::Refuse,
            ImpersonatorsName::Star => Impersonators::Star,
            ImpersonatorsName::Allow => Impersonators::Allow,
        },
        trusted_proxies: ic.trusted_proxies.iter().map(|c| c.0).collect(),
        forwarded_header: match ic.forwarded_header {
            ForwardedHeaderName::XForwardedFor => ForwardedHeader::XForwardedFor,
            ForwardedHeaderName::Forwarded => ForwardedHeader::Forwarded,
        },
        ttl: ic.robots_ttl.0,
        // Checked when the file was read (a host[:port]).
        robots_host: (!ic.robots_host.is_empty())
            .then(|| http::HeaderValue::from_str(&ic.robots_host).ok())
            .flatten(),
        ..IngressConfig::default()
    })
}

/// The robots.txt file of `ingress.robots` (`None` for ""), served byte for byte: a regular
/// file (opening a FIFO waits for a writer, a device such as `/dev/zero` never ends).
async fn read_robots(path: &str) -> Result<Option<Vec<u8>>, IngressError> {
    if path.is_empty() {
        return Ok(None);
    }
    let error = |source| IngressError::Robots { path: path.to_owned(), source };
    if !tokio::fs::metadata(path).await.map_err(error)?.is_file() {
        return Err(error(std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file")));
    }
    let body = tokio::fs::read(path).await.map_err(error)?;
    let max = robotsgate::rep::MAX_ROBOTS_TXT_BYTES;
    if body.len() > max {
        // The engine reads the first 500 KiB, as RFC 9309 lets crawlers do; the bots get
        // the whole file. Said, not left to be found.
        let read = robotsgate::rep::RobotsTxt::parse(&body);
        let cut =
            read.cut_line().map(|l| format!(", and line {l}, which the limit cuts,")).unwrap_or_default();
        tracing::warn!(
            "ingress.robots: {path} is {} bytes, and only its first {max} are read for rules (RFC 9309's limit, \
             which crawlers may keep to too): the {} bytes after them{cut} are served but not enforced",
            body.len(),
            read.ignored_bytes(),
        );
    }
    Ok(Some(body))
}

/// The reverse proxy, bound and ready to run.
pub struct Ingress {
    listener: TcpListener,
    addr: SocketAddr,
    layer: IngressLayer,
    upstream: Upstream,
    audit: AuditLog,
    config: crate::config::IngressSection,
    refresher: Option<RefreshHandle>,
    tls: Option<tokio_rustls::TlsAcceptor>,
    metrics: Arc<IngressMetrics>,
    admin: Option<Admin<IngressMetrics>>,
    admin_addr: Option<SocketAddr>,
    ready: Readiness,
    /// The upstream's WebSocket tasks and the signal that closes them.
    websockets: (TaskTracker, CancellationToken),
    reloader: IngressReloader,
}

impl std::fmt::Debug for Ingress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ingress").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Ingress {
    /// Binds the listener, opens the audit log, reads robots.txt (a file) and sets up the
    /// forwarding.
    pub async fn start(config: &Config) -> Result<Ingress, IngressError> {
        let ic = &config.ingress;
        if ic.upstream.is_empty() {
            return Err(IngressError::Upstream("not set (give --upstream URL)".into()));
        }
        let settings = settings(ic)?;
        let (acceptor, site_cert) = match (ic.tls_cert.is_empty(), ic.tls_key.is_empty()) {
            (true, true) => (None, None),
            (false, false) => {
                let (server, site_cert) = tls::server_config(
                    std::path::Path::new(&ic.tls_cert),
                    std::path::Path::new(&ic.tls_key),
                )?;
                (Some(tokio_rustls::TlsAcceptor::from(server)), Some(site_cert))
            }
            _ => return Err(IngressError::TlsPair),
        };
        let robots = read_robots(&ic.robots).await?;
        let addr = ic.listen;
        let listener =
            crate::proxy::listen(addr, 1024).map_err(|source| StartError::Listen { addr, source })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen { addr, source })?;

        // The upstream is the operator's own: the guard refuses only this listener.
        let guard = Arc::new(Guard::permissive().deny_own_listener(addr));
        let dns = DnsConfig {
            servers: config.dns.servers.clone(),
            overrides: config.dns.static_hosts.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let mut tls = TlsConfig { webpki_roots: config.tls.webpki_roots, extra_roots: Vec::new() };
        for path in &config.tls.extra_roots {
            tls.extra_roots.extend(robotsgate::net::load_pem_certs(path).map_err(StartError::from)?);
        }
        let tls = robotsgate::net::client_config(&tls, &[b"h2", b"http/1.1"]).map_err(StartError::from)?;
        let resolver = Resolver::new(&dns);
        // Lists and key directories: the destination guard of `[guard]`.
        let outbound = Connector::new(
            resolver.clone(),
            Arc::new(crate::app::guard(config, addr)),
            tls.clone(),
            config.fetch.connect_timeout.0,
        );
        let connector = Connector::new(resolver, guard, tls, config.fetch.connect_timeout.0);
        let pool = Pool::new(
            connector,
            PoolConfig {
                max_idle_per_origin: config.proxy.upstream_idle_per_origin.max(64),
                read_timeout: ic.upstream_read_timeout.0,
                ..config.pool_config()
            },
        );
        let audit = audit_log(config).await?;
        let metrics = Arc::new(IngressMetrics::new(Some(audit.clone())));
        let upstream = Upstream::new(&ic.upstream, pool, ic.upstream_timeout.0)?
            .with_metrics(metrics.clone())
            .with_websocket_idle_timeout(ic.websocket_idle_timeout.0)
            .with_max_header_bytes(usize::try_from(ic.max_header_bytes.0).unwrap_or(usize::MAX));
        let websockets = (upstream.tunnels.clone(), upstream.cut.clone());
        let ready = Readiness::default();
        let admin = match config.admin.listen {
            Some(a) => Some(
                Admin::bind(a, metrics.clone(), ready.clone())
                    .await
                    .map_err(|source| StartError::AdminListen { addr: a, source })?,
            ),
            None => None,
        };
        let admin_addr = match &admin {
            Some(a) => Some(a.local_addr().map_err(|source| StartError::AdminListen { addr, source })?),
            None => None,
        };

        let fleet = Fleet::new(config)?;
        let verifier = verifier_in(config, &outbound, Some(&fleet))?;
        let refresher = verifier.as_ref().and_then(|v| refresher(config, v, &outbound));
        if let Some(v) = &verifier {
            metrics.watch_verifier(Arc::new(v.clone()));
        }
        let observed = metrics.clone();
        let mut builder = IngressLayer::builder()
            .config(settings)
            .audit(audit.clone())
            .verifier(verifier.map(Arc::new))
            .observer(move |record| observed.record(record))
            // Checked when the file was read (host names).
            .hosts(config.ingress.hosts.iter().filter_map(|h| http::HeaderValue::from_str(h).ok()));
        if let Some(body) = robots {
            builder = builder.robots_bytes(body);
        }
        let builder = fleet.share_pacing(builder);
        let layer = builder.build();
        let reloader = IngressReloader::new(layer.clone(), config.clone(), site_cert, metrics.clone());
        Ok(Ingress {
            listener,
            addr,
            layer,
            upstream,
            audit,
            config: ic.clone(),
            refresher,
            tls: acceptor,
            metrics,
            admin,
            admin_addr,
            ready,
            websockets,
            reloader,
        })
    }

    /// The address it listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the admin listener (`[admin] listen`), when configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// A handle that applies a new configuration while running.
    pub fn reloader(&self) -> IngressReloader {
        self.reloader.clone()
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<IngressMetrics> {
        &self.metrics
    }

    /// `https` when it terminates TLS, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// Serves until `shutdown` completes, then lets the requests in flight finish (within
    /// `shutdown_grace`) and closes the audit log.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let Ingress {
            listener,
            layer,
            upstream,
            audit,
            config,
            refresher,
            tls,
            metrics,
            admin,
            ready,
            websockets,
            ..
        } = self;
        // Connections are accepted and served on worker threads, each with its own event
        // loop and its own connections to the upstream; this thread runs the rest.
        let workers =
            Workers::start(if config.workers == 0 { workers::default_count() } else { config.workers })?;
        let upstreams: Vec<Upstream> = (0..workers.len()).map(|_| upstream.own_pool(workers.len())).collect();
        // A burst's freed memory goes back to the system once the ingress is quiet, as the
        // forward proxy's (`crate::memory`): no request, no client connection opened or
        // closed, and the upstream connections it left idle closed.
        let _quiet = {
            let (metrics, pools) =
                (metrics.clone(), upstreams.iter().map(|u| u.pool.clone()).collect::<Vec<_>>());
            tokio_util::task::AbortOnDropHandle::new(crate::memory::give_back_when_quiet(
                crate::memory::QUIET_TICK,
                crate::memory::QUIET_TICKS,
                move || {
                    let idle: usize = pools.iter().map(Pool::idle).sum();
                    std::future::ready(metrics.activity().wrapping_add((idle as u64) << 48))
                },
            ))
        };
        let services: Vec<IngressService<Upstream>> =
            upstreams.iter().map(|u| layer.layer(u.clone())).collect();
        drop(upstream);
        let stop_admin = CancellationToken::new();
        let admin = admin.map(|a| tokio::spawn(a.run(stop_admin.clone())));
        ready.set(true);
        let stop = CancellationToken::new();
        let tracker = TaskTracker::new();
        let max_header = usize::try_from(config.max_header_bytes.0).unwrap_or(usize::MAX);
        let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
        builder
            .http1()
            .timer(TokioTimer::new())
            .header_read_timeout(config.header_read_timeout.0)
            // The limit itself is the upstream's check (`with_max_header_bytes`), which says
            // what was over it; hyper's buffer only bounds the heads it can read at all.
            .max_buf_size(HeadLimit(max_header).buffer());
        builder
            .http2()
            .timer(TokioTimer::new())
            .max_header_list_size(u32::try_from(max_header).unwrap_or(u32::MAX))
            .max_concurrent_streams(256)
            // WebSockets over HTTP/2 (RFC 8441): SETTINGS_ENABLE_CONNECT_PROTOCOL.
            .enable_connect_protocol()
            // A client that stops answering pings is gone.
            .keep_alive_interval(Some(config.header_read_timeout.0))
            .keep_alive_timeout(config.header_read_timeout.0);
        let doors = Arc::new(Doors {
            limit: Arc::new(Semaphore::new(config.max_connections.max(1))),
            tracker: tracker.clone(),
            metrics: metrics.clone(),
            builder,
            stop: stop.clone(),
            tls,
            fast_limits: config.http1_fast_path.then_some(h1_server::Limits {
                header_read_timeout: config.header_read_timeout.0,
                max_header_bytes: max_header,
            }),
            handshake_timeout: config.tls_handshake_timeout.0,
            idle: config.header_read_timeout.0,
            send_timeout: config.send_timeout.0,
        });
        // Every worker accepts on the one listening socket in its own event loop, and serves
        // what it accepts with its own service and upstream connections: no hand-over
        // between threads.
        workers
            .accept_on_each(listener, shutdown, |i| {
                let (doors, svc, upstream) = (doors.clone(), services[i].clone(), upstreams[i].clone());
                move |listener, stop| doors.accept(listener, svc, upstream, stop)
            })
            .await?;
        // Draining: load balancers stop sending new clients.
        ready.set(false);
        stop.cancel();
        tracker.close();
        let (tunnels, cut) = websockets;
        tunnels.close();
        let drained = async { tokio::join!(tracker.wait(), tunnels.wait()) };
        if tokio::time::timeout(config.shutdown_grace.0, drained).await.is_err() {
            tracing::warn!("requests or WebSockets still open after ingress.shutdown_grace: closed");
        }
        cut.cancel();
        // Cut, they end at once.
        let _ = tokio::time::timeout(Duration::from_secs(1), tunnels.wait()).await;
        if let Some(r) = refresher {
            r.shutdown().await;
        }
        // Whatever is still on a worker (connections past the grace period, idle upstream
        // connections) ends with its runtime.
        drop(services);
        workers.stop().await;
        audit.shutdown().await;
        stop_admin.cancel();
        if let Some(task) = admin {
            let _ = task.await;
        }
        Ok(())
    }
}

/// What each worker's accept loop needs besides its own service and upstream.
struct Doors {
    /// One permit per client connection served at once (`ingress.max_connections`).
    limit: Arc<Semaphore>,
    tracker: TaskTracker,
    metrics: Arc<IngressMetrics>,
    builder: hyper_util::server::conn::auto::Builder<TokioExecutor>,
    /// Connections shut down gracefully once it is cancelled (draining).
    stop: CancellationToken,
    tls: Option<tokio_rustls::TlsAcceptor>,
    /// The fast path's limits (`None`: every request through hyper).
    fast_limits: Option<h1_server::Limits>,
    handshake_timeout: Duration,
    /// How long a connection hyper serves may stay quiet (`ingress.header_read_timeout`).
    idle: Duration,
    /// The longest a client may accept no byte of what it is sent (`ingress.send_timeout`).
    send_timeout: Duration,
}

impl Doors {
    /// Accepts connections from `listener` and serves each in a task on this worker, with
    /// `svc` in front of `upstream`, until `stop`.
    async fn accept(
        self: Arc<Self>,
        listener: TcpListener,
        svc: IngressService<Upstream>,
        upstream: Upstream,
        stop: CancellationToken,
    ) {
        loop {
            let (stream, peer) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        crate::accept::failed("ingress", &e).await;
                        continue;
                    }
                },
                () = stop.cancelled() => return,
            };
            let Ok(permit) = self.limit.clone().try_acquire_owned() else {
                tracing::warn!(%peer, "ingress.max_connections reached: connection closed");
                continue;
            };
            // No Nagle: a response written in pieces (its head, then the body as the
            // upstream sends it) would wait for the client's delayed acknowledgement of
            // the first, some 40 ms on a keep-alive connection (tests/nodelay.rs).
            let _ = stream.set_nodelay(true);
            let open = self.metrics.connection();
            let serve = self.clone().serve(stream, peer, svc.clone(), upstream.kept(), Slot::new(permit));
            self.tracker.spawn(async move {
                serve.await;
                drop(open);
            });
        }
    }

    /// Serves one client connection: the TLS handshake if the listener is HTTPS, then its
    /// requests, on the fast path while they allow. `slot` is its place under
    /// `ingress.max_connections`, lent to the WebSockets that outlive it.
    async fn serve(
        self: Arc<Self>,
        stream: tokio::net::TcpStream,
        peer: SocketAddr,
        svc: IngressService<Upstream>,
        kept: kept::Kept,
        slot: Slot,
    ) {
        // First: dropped last, after what holds parts of its requests.
        let mut kit = h1_server::Kit::take();
        // A client that accepts nothing of its answers for send_timeout is closed.
        let cuts = self.metrics.cuts();
        let stream = SendBound::tcp(stream, self.send_timeout, cuts.send_timeout);
        let https = self.tls.is_some();
        let counted = self.metrics.clone();
        // One request, whichever way it was read: the fast path's or hyper's.
        let front = move |mut req: Request<UpstreamRequestBody>| {
            slot.lend(&mut req);
            req.extensions_mut().insert(peer);
            req.extensions_mut().insert(kept.clone());
            if https {
                req.extensions_mut().insert(Https);
            }
            let http2 = req.version() == http::Version::HTTP_2;
            let started = std::time::Instant::now();
            let answer = svc.clone().oneshot(req);
            let counted = counted.clone();
            async move {
                let res = answer.await;
                counted.request(http2, started.elapsed());
                res
            }
        };
        let fast = front.clone();
        let fast = move |req: Request<PoolRequestBody>| {
            fast(req.map(Some)).map(|res| match res {
                Ok(res) => res,
                Err(never) => match never {},
            })
        };
        let hyper_svc = hyper::service::service_fn(move |req: Request<Incoming>| {
            front(req.map(|b| Some(Either::Left(b))))
        });
        let (builder, stop, limits) = (&self.builder, &self.stop, self.fast_limits);
        let hyper = (
            builder,
            stop,
            Bounds { idle: self.idle, send: self.send_timeout, stuck: cuts.stuck, quiet: cuts.quiet },
        );
        match &self.tls {
            None => serve_fast_first(hyper, stream, limits, &mut kit, fast, hyper_svc).await,
            Some(acceptor) => {
                let handshake = tokio::select! {
                    h = tokio::time::timeout(self.handshake_timeout, acceptor.accept(stream)) => h,
                    () = stop.cancelled() => return,
                };
                match handshake {
                    // HTTP/1.1 over TLS takes the fast path too; h2 is hyper's.
                    Ok(Ok(stream)) => {
                        let h2 = stream.get_ref().1.alpn_protocol() == Some(&b"h2"[..]);
                        let limits = limits.filter(|_| !h2);
                        serve_fast_first(hyper, stream, limits, &mut kit, fast, hyper_svc).await
                    }
                    Ok(Err(e)) => {
                        self.metrics.handshake_failed(HandshakeFailure::Error);
                        tracing::debug!(%peer, error = %e, "TLS handshake failed");
                    }
                    Err(_) => {
                        self.metrics.handshake_failed(HandshakeFailure::Timeout);
                        tracing::debug!(%peer, "TLS handshake not finished in time: closed");
                    }
                }
            }
        }
    }
}

/// Serves `io` on the HTTP/1.1 fast path while its requests allow (`limits`: `None` for
/// none of it), then with hyper (`hyper`: see [`serve`]) from where the fast path handed it
/// over.
async fn serve_fast_first<I, C, F, FB, S, B>(
    hyper: (&hyper_util::server::conn::auto::Builder<TokioExecutor>, &CancellationToken, Bounds),
    io: I,
    limits: Option<h1_server::Limits>,
    kit: &mut h1_server::Kit,
    fast: C,
    svc: S,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    C: FnMut(Request<PoolRequestBody>) -> F,
    F: Future<Output = Response<FB>>,
    FB: hyper::body::Body<Data = Bytes> + Unpin,
    FB::Error: std::fmt::Display,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (builder, stop, bounds) = hyper;
    match limits {
        Some(limits) => {
            if let Served::HandOver(rest) = h1_server::serve(io, limits, stop, kit, fast).await {
                serve(builder, rest, svc, stop, bounds).await;
            }
        }
        None => serve(builder, io, svc, stop, bounds).await,
    }
}

/// How long a connection hyper serves may stay quiet (`idle`), and an answer wait for its
/// client to take the next part of it (`send`): see [`serve`].
#[derive(Clone, Debug)]
struct Bounds {
    idle: Duration,
    send: Duration,
    /// Count a connection closed as stuck, or as quiet while an answer was being sent.
    stuck: prometheus_client::metrics::counter::Counter,
    quiet: prometheus_client::metrics::counter::Counter,
}

/// Serves one connection (HTTP/1.1 with upgrades, or HTTP/2) until it ends, or until
/// `stop`: then it is shut down gracefully (the requests in flight finish). A connection
/// quiet for `idle` (see `crate::quiet`: nothing asked, waited for or sent) is shut down
/// likewise: hyper bounds the wait for an HTTP/1.1 request head, but neither the read
/// that tells HTTP/1.1 from HTTP/2 nor an HTTP/2 connection without a stream whose client
/// answers the keep-alive pings (one held 578 s with a 2 s timeout). A connection one of
/// whose answers the client has taken nothing of for `send` (an HTTP/2 client that grants
/// no flow-control window, see `crate::quiet`) is shut down too, and closed once nothing
/// else goes on over it (its other streams may finish: ten times `send` at most).
async fn serve<I, S, B>(
    builder: &hyper_util::server::conn::auto::Builder<TokioExecutor>,
    io: I,
    svc: S,
    stop: &CancellationToken,
    bounds: Bounds,
) where
    I: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
    S: hyper::service::Service<Request<Incoming>, Response = Response<B>> + Send,
    S::Future: Send + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: hyper::body::Body<Data = Bytes> + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let activity = Activity::default();
    let io = TokioIo::new(activity.watch(io));
    let requests = activity.clone();
    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let busy = requests.busy();
        if Slot::wanted(&req) {
            // A WebSocket over an HTTP/2 stream keeps the connection busy while it is
            // open (its own bound is ingress.websocket_idle_timeout).
            req.extensions_mut().insert(requests.busy());
        }
        let answer = svc.call(req);
        let activity = requests.clone();
        async move {
            let res = answer.await.map(|res| res.map(|body| activity.sending(body)));
            drop(busy);
            res
        }
    });
    let conn = builder.serve_connection_with_upgrades(io, svc);
    let mut conn = std::pin::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => {}
        () = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        () = activity.quiet_for(bounds.idle) => {
            if activity.answer_unsent() {
                bounds.quiet.inc();
            }
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(bounds.idle, conn).await;
        }
        () = activity.stuck_for(bounds.send) => {
            tracing::debug!("the client took nothing of an answer for ingress.send_timeout: closed");
            bounds.stuck.inc();
            // HTTP/2: a GOAWAY; the other streams may finish (crate::quiet).
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                () = activity.only_stuck_left(bounds.send) => {}
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::forwarded;

    #[test]
    fn the_forwarded_element_quotes_v6_nodes_and_leaves_out_a_host_it_cannot_quote() {
        let v4 = [192, 0, 2, 1].into();
        assert_eq!(
            forwarded(v4, "http", Some("example.com")),
            "for=192.0.2.1;proto=http;host=\"example.com\""
        );
        assert_eq!(forwarded(v4, "https", None), "for=192.0.2.1;proto=https");
        assert_eq!(forwarded(v4, "http", Some("a\"b")), "for=192.0.2.1;proto=http");
        assert_eq!(forwarded(v4, "http", Some("a b")), "for=192.0.2.1;proto=http");
        let v6 = "2001:db8::1".parse().unwrap();
        assert_eq!(
            forwarded(v6, "https", Some("[::1]:8443")),
            "for=\"[2001:db8::1]\";proto=https;host=\"[::1]:8443\""
        );
    }
}
