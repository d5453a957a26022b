//! The forward proxy: an HTTP/1.1 listener whose requests go through [`RobotsLayer`]
//! and then to the origin.
//!
//! - Absolute-form requests (`GET http://host/path`) are forwarded over pooled
//!   keep-alive connections, bodies streamed both ways. A client connection that keeps
//!   asking for the same origin (16 requests in a row, 256 for https) gets an upstream
//!   connection of its own for it (see `Sticky`), closed with the client's. Hop-by-hop
//!   headers (RFC 9110
//!   §7.6.1: `Connection` and the headers it lists, `Keep-Alive`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`, and every `Proxy-*`) are removed both ways and `Via`
//!   is added.
//! - `CONNECT host:port` is tunnelled after a host-level check (the layer decides `/`).
//! - An origin that cannot be reached gives `502`, a timeout `504`, a destination the
//!   guard refuses `403`, a request that is not a proxy request `400`; each with a
//!   `text/plain` body saying why and the header `x-robotsgate`.
//! - Connections are served on the caller's runtime, or with [`Proxy::with_workers`] on
//!   worker threads, each with a single-threaded runtime of its own (one per CPU is what
//!   `robotsgate run` does): a connection stays on one thread.
//! - Shutdown: stop accepting, let connections finish for a grace period, then close.
//!
//! [`RobotsLayer`]: crate::layer::RobotsLayer

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::{Layer, Service, ServiceExt};

use crate::layer::{ClientAddr, ProxyUser, RobotsLayer};
use crate::net::{ConnectError, Connector};
use crate::origin::{Origin, Scheme};
use crate::refusal::{Refusal, RefusalKind};
use crate::server::admin::Readiness;
use crate::server::auth::ProxyAuth;
use crate::server::intercept::{self, Interception};
use crate::server::metrics::Metrics;

mod workers;
use workers::Workers;

/// The body of every response the proxy sends.
pub type ProxyBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// How the proxy listens and forwards.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// From sending a request upstream to its response headers.
    pub upstream_timeout: Duration,
    /// How long in-flight requests may take to finish on shutdown.
    pub shutdown_grace: Duration,
    /// Time a client has to send a request's headers (also how long an idle keep-alive
    /// connection is kept).
    pub header_read_timeout: Duration,
    /// The `Via` pseudonym.
    pub via: String,
    /// Client connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Most bytes of request head (request line and headers) read.
    pub max_header_bytes: usize,
    /// A tunnel with no bytes either way for this long is closed.
    pub tunnel_idle_timeout: Duration,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 3128)),
            upstream_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(30),
            via: "robotsgate".into(),
            max_connections: 10_000,
            max_header_bytes: 64 * 1024,
            tunnel_idle_timeout: Duration::from_secs(600),
        }
    }
}

/// Forwards proxy requests to origins (the service below [`RobotsLayer`]).
#[derive(Clone)]
pub struct Forwarder {
    inner: Arc<ForwarderInner>,
}

#[derive(Clone)]
struct ForwarderInner {
    client: Client<Connector, Incoming>,
    connector: Connector,
    /// For the connections a client connection keeps ([`Sticky`]): HTTP/1.1 only.
    sticky_connector: Connector,
    /// Permits to open kept connections ([`KEPT_OPENING`]).
    opening: Arc<tokio::sync::Semaphore>,
    upstream_timeout: Duration,
    tunnel_idle_timeout: Duration,
    metrics: Option<Arc<Metrics>>,
    via: HeaderValue,
    tunnels: TaskTracker,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder")
            .field("upstream_timeout", &self.inner.upstream_timeout)
            .finish_non_exhaustive()
    }
}

impl Forwarder {
    /// A forwarder connecting through `connector` (whose TLS config should offer h2 and
    /// http/1.1).
    pub fn new(connector: Connector, config: &ProxyConfig) -> Forwarder {
        let client = Client::builder(TokioExecutor::new())
            .pool_timer(TokioTimer::new())
            .pool_idle_timeout(Duration::from_secs(90))
            .timer(TokioTimer::new())
            .build(connector.clone());
        let via = HeaderValue::from_str(&format!("1.1 {}", config.via))
            .unwrap_or(HeaderValue::from_static("1.1 robotsgate"));
        let inner = ForwarderInner {
            client,
            sticky_connector: connector.http1_only(),
            opening: Arc::new(tokio::sync::Semaphore::new(KEPT_OPENING)),
            connector,
            upstream_timeout: config.upstream_timeout,
            tunnel_idle_timeout: config.tunnel_idle_timeout,
            metrics: None,
            via,
            tunnels: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        };
        Forwarder { inner: Arc::new(inner) }
    }

    /// Counts upstream errors in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Forwarder {
        Arc::make_mut(&mut self.inner).metrics = Some(metrics);
        self
    }

    fn upstream_failed(&self, class: &'static str) {
        if let Some(m) = &self.inner.metrics {
            m.upstream_error(class);
        }
    }

    async fn forward(self, req: Request<Incoming>) -> Response<ProxyBody> {
        if req.method() == Method::CONNECT {
            return self.tunnel(req).await;
        }
        let head = req.method() == Method::HEAD;
        if req.uri().scheme().is_none() {
            return boxed(not_a_proxy_request(head));
        }
        let (mut parts, body) = req.into_parts();
        let sticky = parts.extensions.remove::<Sticky>();
        strip_hop_by_hop(&mut parts.headers);
        append_via(&mut parts.headers, &self.inner.via);
        // RFC 9112 §3.2.2: the target's authority replaces the client's Host, so the
        // origin serves the host whose robots.txt was checked (default port left out).
        let default_port = if parts.uri.scheme_str() == Some("https") { 443 } else { 80 };
        if let Some(host) = parts.uri.authority().and_then(|a| host_header(a, default_port)) {
            parts.headers.insert(header::HOST, host);
        }
        parts.extensions = http::Extensions::new();
        parts.version = http::Version::HTTP_11;
        let upstream = Request::from_parts(parts, body);
        let sent = async {
            match &sticky {
                Some(sticky) => self.send_sticky(sticky, upstream).await,
                None => self.inner.client.request(upstream).await.map_err(UpstreamError::Pool),
            }
        };
        match tokio::time::timeout(self.inner.upstream_timeout, sent).await {
            Err(_) => {
                self.upstream_failed("timeout");
                let why = format!("the origin did not answer within {:?}", self.inner.upstream_timeout);
                boxed(Refusal::new(RefusalKind::UpstreamTimeout, why).into_response(head))
            }
            Ok(Err(UpstreamError::Pool(e))) => {
                self.upstream_failed(upstream_error_class(&e));
                boxed(upstream_error(&e).into_response(head))
            }
            Ok(Err(UpstreamError::Kept(e))) => {
                self.upstream_failed("protocol");
                let why = format!("the origin failed: {}", crate::fetch::error_chain(&e));
                boxed(Refusal::new(RefusalKind::UpstreamError, why).into_response(head))
            }
            Ok(Ok(res)) => {
                let (mut parts, body) = res.into_parts();
                strip_hop_by_hop(&mut parts.headers);
                append_via(&mut parts.headers, &self.inner.via);
                // The proxy speaks HTTP/1.1 to its clients whatever the origin spoke.
                parts.version = http::Version::HTTP_11;
                Response::from_parts(parts, body.map_err(Into::into).boxed())
            }
        }
    }

    /// Sends `req` on the connection its client connection keeps for the origin, starting
    /// to open one once enough requests in a row went to that origin
    /// ([`UpstreamKey::keep_after`]); until then, and whatever the kept connection cannot
    /// take, requests go through the pool.
    async fn send_sticky(
        &self,
        sticky: &Sticky,
        req: Request<Incoming>,
    ) -> Result<Response<Incoming>, UpstreamError> {
        let pooled = |req| async { self.inner.client.request(req).await.map_err(UpstreamError::Pool) };
        let Some(key) = UpstreamKey::of(req.uri()) else { return pooled(req).await };
        let (kept, again) = {
            let Ok(mut slot) = sticky.0.lock() else { return pooled(req).await };
            if slot.last.as_ref() == Some(&key) {
                slot.run = slot.run.saturating_add(1);
            } else {
                slot.last = Some(key.clone());
                slot.run = 1;
            }
            let again = slot.run >= key.keep_after();
            let kept = match slot.conn.take() {
                Some((k, sender)) if k == key => Some(sender),
                other => {
                    slot.conn = other;
                    None
                }
            };
            (kept, again)
        };
        let mut sender = match kept {
            Some(sender) => sender,
            None if again => {
                self.open_kept_later(sticky, &key, req.uri());
                return pooled(req).await;
            }
            None => return pooled(req).await,
        };
        // Ready at once unless the connection is closing: its last response was read to
        // the end before this request could arrive (HTTP/1.1 clients send one at a time).
        match tokio::time::timeout(KEPT_READY_WAIT, sender.ready()).await {
            Ok(Ok(())) => {}
            _ => return pooled(req).await,
        }
        // RFC 9112 §3.2.1: to an origin, the request target is in origin form (the pool's
        // client does the same); the absolute form goes back if the pool must send it.
        let mut req = req;
        let target = origin_form(req.uri());
        let absolute = std::mem::replace(req.uri_mut(), target);
        match sender.try_send_request(req).await {
            Ok(res) => {
                if let Ok(mut slot) = sticky.0.lock() {
                    slot.conn = Some((key, sender));
                }
                Ok(res)
            }
            // Not sent (the origin closed the idle connection): the pool sends it.
            Err(mut e) => match e.take_message() {
                Some(mut req) => {
                    *req.uri_mut() = absolute;
                    pooled(req).await
                }
                None => Err(UpstreamError::Kept(e.into_error())),
            },
        }
    }

    /// Opens the connection `sticky` keeps for `key`, in the background: no request waits
    /// for its handshake (the pool serves them meanwhile), and a few open at once at most,
    /// so that a burst of new keep-alive clients is not a burst of handshakes.
    fn open_kept_later(&self, sticky: &Sticky, key: &UpstreamKey, uri: &http::Uri) {
        {
            let Ok(mut slot) = sticky.0.lock() else { return };
            if slot.opening {
                return;
            }
            let Ok(permit) = self.inner.opening.clone().try_acquire_owned() else { return };
            slot.opening = true;
            let (this, sticky, key, uri) = (self.clone(), sticky.clone(), key.clone(), uri.clone());
            tokio::spawn(async move {
                let opened = this.open_kept(&uri).await;
                drop(permit);
                if let Ok(mut slot) = sticky.0.lock() {
                    slot.opening = false;
                    if let Some(sender) = opened
                        && slot.conn.is_none()
                        && slot.last.as_ref() == Some(&key)
                    {
                        slot.conn = Some((key, sender));
                    }
                }
            });
        }
    }

    /// A new HTTP/1.1 connection to the origin of `uri`; `None` when it cannot be made
    /// (requests keep going through the pool, which reports failures).
    async fn open_kept(&self, uri: &http::Uri) -> Option<hyper::client::conn::http1::SendRequest<Incoming>> {
        let origin = Origin::from_uri(uri).ok()?;
        let stream = self.inner.sticky_connector.connect(&origin).await.ok()?;
        let (sender, conn) =
            hyper::client::conn::http1::Builder::new().handshake(TokioIo::new(stream)).await.ok()?;
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "kept upstream connection ended with an error");
            }
        });
        Some(sender)
    }

    /// `CONNECT host:port`: connect first (so failures can be answered), then say 200 and
    /// copy bytes both ways.
    async fn tunnel(self, req: Request<Incoming>) -> Response<ProxyBody> {
        let Some(authority) = req.uri().authority().cloned() else {
            return boxed(
                Refusal::new(RefusalKind::BadRequest, "CONNECT needs host:port").into_response(false),
            );
        };
        // Scheme only picks the default port; CONNECT always names one.
        let origin = match Origin::from_authority(Scheme::Https, authority.as_str()) {
            Ok(o) => o,
            Err(e) => {
                return boxed(Refusal::new(RefusalKind::BadRequest, e.to_string()).into_response(false));
            }
        };
        let upstream = match self.inner.connector.connect_tcp(&origin).await {
            Ok(s) => s,
            Err(e) => {
                self.upstream_failed(e.class());
                return boxed(connect_refusal(&e).into_response(false));
            }
        };
        let idle = self.inner.tunnel_idle_timeout;
        let shutdown = self.inner.shutdown.clone();
        self.inner.tunnels.spawn(async move {
            let upgraded = match hyper::upgrade::on(req).await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!(error = %e, "CONNECT upgrade failed");
                    return;
                }
            };
            let client = TokioIo::new(upgraded);
            tokio::select! {
                r = copy_until_idle(client, upstream, idle) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "tunnel closed with an error");
                    }
                }
                _ = shutdown.cancelled() => {}
            }
        });
        let mut res = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
        res.headers_mut().insert(header::VIA, self.inner.via.clone());
        res
    }
}

/// The origin-form request target (RFC 9112 §3.2.1) of an absolute URI: its path and
/// query, `/` when the path is empty.
fn origin_form(uri: &http::Uri) -> http::Uri {
    match uri.path_and_query() {
        Some(pq) if pq.as_str().starts_with('/') => http::Uri::from(pq.clone()),
        // `http://host?q`: the path is empty, the query stays.
        Some(pq) if !pq.as_str().is_empty() => {
            format!("/{}", pq.as_str()).parse().unwrap_or_else(|_| http::Uri::from_static("/"))
        }
        _ => http::Uri::from_static("/"),
    }
}

/// How long a kept connection may take to become ready for the next request before the
/// pool is used instead.
const KEPT_READY_WAIT: Duration = Duration::from_secs(1);

/// The upstream connection one HTTP/1.x client connection keeps, for scrapers that send
/// request after request to the same origin over one keep-alive connection: such requests
/// go straight to it, without the shared pool's lookup, bookkeeping and hand-back task per
/// request (about a sixth of the forwarding cost). Requests go through the pool, which
/// reuses connections across clients, until the kept connection is there: after 16
/// requests in a row to the same origin (256 for https, whose handshake costs more) it is
/// opened in the background. It closes with the client's connection.
/// Put into each request's extensions by the proxy; the [`Forwarder`] takes it out.
#[derive(Clone, Default)]
pub(crate) struct Sticky(Arc<std::sync::Mutex<StickySlot>>);

#[derive(Default)]
pub(crate) struct StickySlot {
    /// The origin of the previous request.
    last: Option<UpstreamKey>,
    /// Requests in a row to that origin.
    run: u32,
    /// The kept connection and its origin.
    conn: Option<(UpstreamKey, hyper::client::conn::http1::SendRequest<Incoming>)>,
    /// A connection is being opened for it.
    opening: bool,
}

/// Kept connections opened at once, process-wide.
const KEPT_OPENING: usize = 4;

/// Scheme and authority of an upstream request, as written.
#[derive(Clone, PartialEq, Eq)]
struct UpstreamKey {
    https: bool,
    authority: http::uri::Authority,
}

impl UpstreamKey {
    /// Requests in a row to the origin before a connection of its own is opened: a new
    /// connection costs a TCP handshake (and a TLS one for https, as much CPU as several
    /// hundred requests save by skipping the pool), so it is opened once the client has
    /// shown it keeps sending to this origin.
    fn keep_after(&self) -> u32 {
        if self.https { 256 } else { 16 }
    }

    fn of(uri: &http::Uri) -> Option<UpstreamKey> {
        Some(UpstreamKey {
            https: uri.scheme() == Some(&http::uri::Scheme::HTTPS),
            authority: uri.authority()?.clone(),
        })
    }
}

/// Why a forwarded request got no response.
enum UpstreamError {
    /// Through the pool.
    Pool(hyper_util::client::legacy::Error),
    /// On a kept connection, after the request was sent.
    Kept(hyper::Error),
}

impl Service<Request<Incoming>> for Forwarder {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, Infallible>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.forward(req).await) })
    }
}

/// Copies both ways until either side closes or nothing moves for `idle`.
async fn copy_until_idle<A, B>(a: A, b: B, idle: Duration) -> io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let start = tokio::time::Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let mut a = Active { io: a, start, last: last.clone() };
    let mut b = Active { io: b, start, last: last.clone() };
    let watchdog = async {
        loop {
            tokio::time::sleep(idle / 4 + Duration::from_millis(1)).await;
            let seen = Duration::from_millis(last.load(Ordering::Relaxed));
            if start.elapsed().saturating_sub(seen) >= idle {
                return;
            }
        }
    };
    tokio::select! {
        r = tokio::io::copy_bidirectional(&mut a, &mut b) => r.map(|_| ()),
        () = watchdog => Ok(()),
    }
}

/// A stream that stamps `last` (milliseconds since `start`) whenever bytes arrive.
struct Active<T> {
    io: T,
    start: tokio::time::Instant,
    last: Arc<AtomicU64>,
}

impl<T: AsyncRead + Unpin> AsyncRead for Active<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.io).poll_read(cx, buf);
        if buf.filled().len() > before {
            let now = u64::try_from(self.start.elapsed().as_millis()).unwrap_or(u64::MAX);
            self.last.store(now, Ordering::Relaxed);
        }
        res
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Active<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

fn boxed(res: Response<Full<Bytes>>) -> Response<ProxyBody> {
    res.map(|b| b.map_err(|never| match never {}).boxed())
}

/// The answer for an upstream failure: 403 for a refused destination, 504 for a
/// timeout, 502 otherwise.
fn upstream_error_class(e: &hyper_util::client::legacy::Error) -> &'static str {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(c) = s.downcast_ref::<ConnectError>() {
            return c.class();
        }
        source = s.source();
    }
    "protocol"
}

fn upstream_error(e: &hyper_util::client::legacy::Error) -> Refusal {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(c) = s.downcast_ref::<ConnectError>() {
            return connect_refusal(c);
        }
        source = s.source();
    }
    Refusal::new(RefusalKind::UpstreamError, format!("the origin failed: {}", crate::fetch::error_chain(e)))
}

/// The refusal for an outbound connection that failed: 403 for a refused destination, 504
/// for a timeout, 502 otherwise.
fn connect_refusal(e: &ConnectError) -> Refusal {
    Refusal::new(RefusalKind::of_connect_error(e), e.to_string())
}

/// The answer to an origin-form request: this is a proxy, not a web server.
fn not_a_proxy_request(head: bool) -> Response<Full<Bytes>> {
    let why = "this is a forward proxy: send requests in absolute form (e.g. set HTTP_PROXY)";
    Refusal::new(RefusalKind::NotAProxyRequest, why).into_response(head)
}

/// The `Host` header for a target authority: without user information, and without the
/// port when it is the scheme's default.
fn host_header(a: &http::uri::Authority, default_port: u16) -> Option<HeaderValue> {
    let plain = !a.as_str().contains('@');
    match a.port_u16() {
        // The usual case: the authority is the header as it is.
        _ if plain && a.port_u16() != Some(default_port) => HeaderValue::from_str(a.as_str()),
        Some(p) if p != default_port => HeaderValue::from_str(&format!("{}:{p}", a.host())),
        _ => HeaderValue::from_str(a.host()),
    }
    .ok()
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1) and every `Proxy-*` header.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // This runs twice per request. Most messages carry at most `Connection: keep-alive`
    // (or `close`), so those tokens are not parsed into names, and nothing is collected
    // or removed unless a message has such a header.
    let mut listed: Vec<HeaderName> = Vec::new();
    let (mut connection, mut other) = (false, false);
    for name in headers.keys() {
        if name == header::CONNECTION {
            connection = true;
            for token in headers.get_all(header::CONNECTION).iter().filter_map(|v| v.to_str().ok()) {
                for token in token.split(',').map(str::trim) {
                    if token.is_empty() || token.eq_ignore_ascii_case("close") {
                        continue;
                    }
                    // `keep-alive` is hop-by-hop anyway (found below when present).
                    if !token.eq_ignore_ascii_case("keep-alive")
                        && let Ok(n) = HeaderName::from_bytes(token.as_bytes())
                    {
                        listed.push(n);
                    }
                }
            }
        } else {
            other |= is_hop_by_hop(name);
        }
    }
    if connection {
        headers.remove(header::CONNECTION);
    }
    for name in listed {
        headers.remove(name);
    }
    if other {
        let doomed: Vec<HeaderName> = headers.keys().filter(|name| is_hop_by_hop(name)).cloned().collect();
        for name in doomed {
            headers.remove(name);
        }
    }
}

/// A hop-by-hop header other than `Connection` (RFC 9110 §7.6.1), or a `Proxy-*` one.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str().starts_with("proxy-")
}

fn append_via(headers: &mut HeaderMap, via: &HeaderValue) {
    headers.append(header::VIA, via.clone());
}

/// A running forward proxy.
pub struct Proxy {
    listener: TcpListener,
    layer: RobotsLayer,
    forwarder: Forwarder,
    config: ProxyConfig,
    interception: Option<Interception>,
    auth: Option<ProxyAuth>,
    clients: ClientNetworks,
    metrics: Option<Arc<Metrics>>,
    ready: Readiness,
    workers: Option<usize>,
}

/// The client networks allowed to use the proxy (empty: any); shared, so it can be
/// replaced while running.
#[derive(Debug, Clone, Default)]
pub struct ClientNetworks(Arc<arc_swap::ArcSwap<Vec<ipnet::IpNet>>>);

impl ClientNetworks {
    /// Replaces the allowed networks.
    pub fn set(&self, nets: Vec<ipnet::IpNet>) {
        self.0.store(Arc::new(nets));
    }

    /// Whether `addr` may connect.
    pub fn allows(&self, addr: std::net::IpAddr) -> bool {
        let nets = self.0.load();
        let addr = match addr {
            std::net::IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(addr, std::net::IpAddr::V4),
            v4 => v4,
        };
        nets.is_empty() || nets.iter().any(|n| n.contains(&addr))
    }
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("listen", &self.listener.local_addr().ok()).finish_non_exhaustive()
    }
}

/// The robots layer over the forwarder, with robotsgate's own answers and the origin's
/// in one body type. Cloning it clones two `Arc`s; requests clone it, not a boxed service.
#[derive(Clone)]
pub(crate) struct ProxyService(crate::layer::RobotsService<Forwarder>);

impl Service<Request<Incoming>> for ProxyService {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = OneBody;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The forwarder is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<Incoming>) -> OneBody {
        let head = req.method() == Method::HEAD;
        OneBody { inner: self.0.call(req), head }
    }
}

/// The response future of [`ProxyService`]: the origin's body passes as it is;
/// robotsgate's own answers are boxed, and so are the layer's errors (an origin that
/// cannot be reached), answered as the refusals they carry.
pub(crate) struct OneBody {
    inner:
        crate::layer::ResponseFuture<Response<crate::layer::RobotsBody<ProxyBody>>, crate::layer::BoxError>,
    head: bool,
}

impl Future for OneBody {
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let head = self.head;
        Pin::new(&mut self.inner).poll(cx).map(|res| {
            Ok(match res {
                Ok(res) => res.map(|body| match body {
                    http_body_util::Either::Left(origin) => origin,
                    http_body_util::Either::Right(own) => own.map_err(|never| match never {}).boxed(),
                }),
                Err(e) => {
                    let refusal = match e.downcast::<Refusal>() {
                        Ok(r) => *r,
                        Err(e) => Refusal::new(RefusalKind::UpstreamError, e.to_string()),
                    };
                    boxed(refusal.into_response(head))
                }
            })
        })
    }
}

/// What every connection task needs (behind one `Arc`: requests clone it).
struct Shared {
    service: ProxyService,
    interception: Option<Interception>,
    auth: Option<ProxyAuth>,
    metrics: Option<Arc<Metrics>>,
    tunnels: TaskTracker,
    stop: CancellationToken,
    via: HeaderValue,
    config: ProxyConfig,
}

impl Proxy {
    /// Binds the listener.
    pub async fn bind(config: ProxyConfig, layer: RobotsLayer, forwarder: Forwarder) -> io::Result<Proxy> {
        let listener = TcpListener::bind(config.listen).await?;
        Ok(Self::from_listener(listener, config, layer, forwarder))
    }

    /// A proxy on a listener bound already.
    pub fn from_listener(
        listener: TcpListener,
        config: ProxyConfig,
        layer: RobotsLayer,
        forwarder: Forwarder,
    ) -> Proxy {
        Proxy {
            listener,
            layer,
            forwarder,
            config,
            interception: None,
            auth: None,
            clients: ClientNetworks::default(),
            metrics: None,
            ready: Readiness::default(),
            workers: None,
        }
    }

    /// Serves connections on `n` worker threads (0: one per CPU this process may use),
    /// each running a single-threaded tokio runtime, instead of on the runtime that calls
    /// [`Proxy::run`], which keeps accepting. Connections are handed out in turn, and a
    /// connection with everything it starts stays on its worker: no work stealing and no
    /// wake-ups across threads while a request is forwarded.
    pub fn with_workers(mut self, n: usize) -> Proxy {
        self.workers = Some(if n == 0 { workers::default_count() } else { n });
        self
    }

    /// Intercepts CONNECT tunnels (TLS with leaves from the local CA) for per-path checks.
    pub fn with_interception(mut self, interception: Interception) -> Proxy {
        self.interception = Some(interception);
        self
    }

    /// Requires `Proxy-Authorization` when `auth` has users; the user name goes into the
    /// request extensions ([`crate::layer::ProxyUser`]).
    pub fn with_auth(mut self, auth: ProxyAuth) -> Proxy {
        self.auth = Some(auth);
        self
    }

    /// Only these client networks may connect.
    pub fn with_client_networks(mut self, clients: ClientNetworks) -> Proxy {
        self.clients = clients;
        self
    }

    /// Counts connections, requests and refusals in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Proxy {
        self.metrics = Some(metrics);
        self
    }

    /// Reports whether the proxy accepts connections (for `/readyz`).
    pub fn with_readiness(mut self, ready: Readiness) -> Proxy {
        self.ready = ready;
        self
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then drains: stops accepting, lets requests in
    /// flight finish within the grace period, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let workers = self.workers.map(Workers::start).transpose()?;
        if let Some(w) = &workers {
            tracing::debug!(workers = w.len(), "serving connections on worker threads");
        }
        let connections = TaskTracker::new();
        let stop = CancellationToken::new();
        let service = ProxyService(self.layer.layer(self.forwarder.clone()));
        let shared = Arc::new(Shared {
            service,
            interception: self.interception.clone(),
            auth: self.auth.clone(),
            metrics: self.metrics.clone(),
            tunnels: self.forwarder.inner.tunnels.clone(),
            stop: stop.clone(),
            via: self.forwarder.inner.via.clone(),
            config: self.config.clone(),
        });
        let slots = Arc::new(tokio::sync::Semaphore::new(self.config.max_connections.max(1)));
        self.ready.set(true);
        tokio::pin!(shutdown);
        loop {
            let permit = tokio::select! {
                _ = &mut shutdown => break,
                p = slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => break,
                },
            };
            let (stream, client) = tokio::select! {
                _ = &mut shutdown => break,
                accepted = self.listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // Out of file descriptors and the like: back off briefly, keep serving.
                        tracing::warn!(error = %e, "accept failed");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
            };
            if !self.clients.allows(client.ip()) {
                if let Some(m) = &self.metrics {
                    m.refused("client-network");
                }
                tracing::info!(%client, "connection from a client network that is not allowed");
                connections.spawn(refuse_client(stream));
                continue;
            }
            let _ = stream.set_nodelay(true);
            let shared = shared.clone();
            let _open = shared.metrics.as_ref().map(|m| m.connection());
            match &workers {
                None => {
                    connections.spawn(async move {
                        let (_permit, _open) = (permit, _open);
                        serve_connection(stream, client, shared).await;
                    });
                }
                Some(workers) => {
                    // Out of this runtime's reactor, into the worker's.
                    let stream = match stream.into_std() {
                        Ok(s) => s,
                        Err(e) => {
                            tracing::warn!(%client, error = %e, "cannot hand a connection to a worker");
                            continue;
                        }
                    };
                    connections.spawn_on(
                        async move {
                            let (_permit, _open) = (permit, _open);
                            match tokio::net::TcpStream::from_std(stream) {
                                Ok(stream) => serve_connection(stream, client, shared).await,
                                Err(e) => {
                                    tracing::warn!(%client, error = %e, "worker cannot take a connection")
                                }
                            }
                        },
                        workers.next(),
                    );
                }
            }
        }
        // Drain.
        self.ready.set(false);
        drop(self.listener);
        stop.cancel();
        connections.close();
        self.forwarder.inner.tunnels.close();
        let grace = self.config.shutdown_grace;
        let drained = tokio::time::timeout(grace, async {
            connections.wait().await;
            self.forwarder.inner.tunnels.wait().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(?grace, "shutdown grace period over; closing the remaining connections");
            self.forwarder.inner.shutdown.cancel();
        }
        if let Some(workers) = workers {
            // Whatever is still on a worker (connections past the grace period, idle
            // upstream connections) ends with its runtime.
            workers.stop().await;
        }
        Ok(())
    }
}

/// Tells a client from a network that is not allowed so, and closes. The request head is
/// read first (up to 16 KiB, within 5 s): an answer sent before the request is an
/// unsolicited response, which clients such as hyper's discard as an error.
async fn refuse_client(mut stream: tokio::net::TcpStream) {
    let read_head = async {
        let mut head = Vec::with_capacity(1024);
        let mut chunk = [0u8; 1024];
        while head.len() < 16 * 1024 && !head.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
    };
    let _ = tokio::time::timeout(Duration::from_secs(5), read_head).await;
    let answer =
        Refusal::new(RefusalKind::ClientDenied, "your network may not use this proxy").to_http1_bytes();
    let _ = tokio::time::timeout(Duration::from_secs(5), stream.write_all(&answer)).await;
    let _ = stream.shutdown().await;
}

/// Serves one client connection.
async fn serve_connection(stream: tokio::net::TcpStream, client: SocketAddr, shared: Arc<Shared>) {
    let stop = shared.stop.clone();
    let config = shared.config.clone();
    let sticky = Sticky::default();
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let shared = shared.clone();
        let sticky = sticky.clone();
        async move {
            let started = tokio::time::Instant::now();
            let res = handle(req, client, &shared, sticky).await;
            if let Some(m) = &shared.metrics {
                m.request(started.elapsed());
            }
            Ok::<_, Infallible>(res)
        }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        .max_buf_size(config.max_header_bytes.max(8192))
        // The buffer cannot be smaller than 8 KiB; this holds heads to the limit exactly.
        .max_header_size(config.max_header_bytes)
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(stream), svc).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%client, error = %e, "connection ended with an error");
            }
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// One request from a client: authentication, then interception or the robots service.
async fn handle(
    mut req: Request<Incoming>,
    client: SocketAddr,
    shared: &Shared,
    sticky: Sticky,
) -> Response<ProxyBody> {
    // A request for the proxy itself, not through it: no robots decision.
    if req.method() != Method::CONNECT && req.uri().scheme().is_none() {
        return boxed(not_a_proxy_request(req.method() == Method::HEAD));
    }
    let mut user = None;
    if let Some(auth) = shared.auth.as_ref().filter(|a| a.enabled()) {
        match auth.authenticate(req.headers()).await {
            Ok(u) => user = Some(u),
            Err(refusal) => {
                if let Some(m) = &shared.metrics {
                    m.refused("auth");
                }
                return boxed(auth.challenge(&refusal));
            }
        }
    }
    if let Some(u) = &user {
        req.extensions_mut().insert(ProxyUser(u.clone()));
    }
    req.extensions_mut().insert(ClientAddr(client));
    if req.method() == Method::CONNECT
        && let Some(interception) = shared.interception.clone()
        && let Some(origin) =
            req.uri().authority().and_then(|a| Origin::from_authority(Scheme::Https, a.as_str()).ok())
        && interception.applies(&origin)
    {
        let (inner, stop) = (shared.service.clone(), shared.stop.clone());
        shared.tunnels.spawn(async move {
            match hyper::upgrade::on(req).await {
                Ok(upgraded) => {
                    intercept::serve(upgraded, origin, interception, inner, client, user, stop).await
                }
                Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
            }
        });
        let mut res = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
        res.headers_mut().insert(header::VIA, shared.via.clone());
        return res;
    }
    if req.method() != Method::CONNECT {
        req.extensions_mut().insert(sticky);
    }
    match shared.service.clone().oneshot(req).await {
        Ok(res) => res,
        Err(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hop_by_hop_headers_go() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("proxy-authorization", "Basic abc"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("trailer", "x"),
            ("accept", "*/*"),
            ("x-robots-agent", "Foo"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, vec!["accept", "x-robots-agent"]);
    }

    #[test]
    fn host_header_drops_user_information_and_the_default_port() {
        for (authority, default_port, host) in [
            ("example.com", 80, "example.com"),
            ("example.com:8080", 80, "example.com:8080"),
            ("example.com:80", 80, "example.com"),
            ("example.com:443", 443, "example.com"),
            ("example.com:443", 80, "example.com:443"),
            ("user:pw@example.com:8080", 80, "example.com:8080"),
            ("user@example.com", 80, "example.com"),
            ("[::1]:80", 80, "[::1]"),
            ("[::1]:3128", 80, "[::1]:3128"),
        ] {
            let a: http::uri::Authority = authority.parse().unwrap();
            assert_eq!(host_header(&a, default_port).unwrap(), host, "{authority}");
        }
    }

    #[test]
    fn origin_form_keeps_path_and_query_only() {
        for (absolute, target) in [
            ("http://example.com/a/b?c=d", "/a/b?c=d"),
            ("http://example.com:8080/", "/"),
            ("http://example.com", "/"),
            ("http://example.com?q=1", "/?q=1"),
            ("https://user@example.com//x", "//x"),
        ] {
            let uri: http::Uri = absolute.parse().unwrap();
            assert_eq!(origin_form(&uri).to_string(), target, "{absolute}");
        }
    }

    #[test]
    fn headers_named_in_connection_go_whatever_their_case_and_lines() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "Close, X-One"),
            ("connection", " , KEEP-ALIVE,x-two "),
            ("x-one", "1"),
            ("x-two", "2"),
            ("x-three", "3"),
            ("Keep-Alive", "timeout=5"),
        ] {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, vec!["x-three"]);

        let mut plain = HeaderMap::new();
        plain.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut plain);
        assert_eq!(plain.len(), 1);
    }
}
