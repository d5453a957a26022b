//! Forwarding, the service below [`RobotsLayer`]: what the proxy does with a request the
//! layer let through, whether it came to the listener or inside an intercepted tunnel.
//!
//! - Absolute-form requests (`GET http://host/path`) are forwarded over pooled
//!   keep-alive connections, bodies streamed both ways. A client connection that keeps
//!   asking for the same origin gets an upstream connection of its own for it (see
//!   `Sticky`), which goes to the pool when the client's closes. Hop-by-hop
//!   headers (RFC 9110
//!   §7.6.1: `Connection` and the headers it lists, `Keep-Alive`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`, and every `Proxy-*`) are removed both ways and `Via`
//!   is added.
//! - `CONNECT host:port` is tunnelled after a host-level check (the layer decides `/`).
//! - An origin that cannot be reached gives `502`, a timeout `504`, a destination the
//!   guard refuses `403`, a request that is not a proxy request `400`; each with a
//!   `text/plain` body saying why and the header `x-robotsgate`.
//!
//! [`RobotsLayer`]: robotsgate::layer::RobotsLayer

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use crate::slot::Slot;
use futures_util::FutureExt as _;
use http::header::HeaderValue;
use http::{Method, Request, Response};
use robotsgate::net::PoolRequestBody as ClientBody;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::Service;

use crate::metrics::Metrics;
use robotsgate::net::{Connector, Pool};

mod answer;
mod errors;
mod h1;
mod headers;
mod pay;
mod service;
mod sticky;
mod tunnel;
mod upgrade;

use headers::{append_via, set_host};
use sticky::KEPT_OPENING;

pub(crate) use errors::{connect_refusal, not_a_proxy_request};
pub(crate) use h1::{
    H1Body, H1Conn, H1Sent, PutBack, fits as fits_h1, opens_new, send as send_h1, shed_unused_spares,
    take_idle,
};
pub use headers::strip_hop_by_hop;
pub(crate) use headers::{HeadLimit, own_via};
pub(crate) use pay::Pay;
pub use service::ProxyBody;
pub(crate) use service::{ProxyService, boxed};
pub(crate) use sticky::Sticky;
pub(crate) use tunnel::{PreConnected, copy_until_idle};
pub(crate) use upgrade::{keep_only_upgrade, upgradable_sender, wants_websocket};

/// How requests are forwarded.
#[derive(Debug, Clone)]
pub struct ForwardConfig {
    /// From sending a request upstream to its response headers.
    pub upstream_timeout: Duration,
    /// The `Via` pseudonym.
    pub via: String,
    /// A tunnel with no bytes either way for this long is closed.
    pub tunnel_idle_timeout: Duration,
}

impl Default for ForwardConfig {
    fn default() -> Self {
        ForwardConfig {
            upstream_timeout: Duration::from_secs(60),
            via: "robotsgate".into(),
            tunnel_idle_timeout: Duration::from_secs(600),
        }
    }
}

/// Forwards proxy requests to origins (the service below
/// [`RobotsLayer`](robotsgate::layer::RobotsLayer)).
#[derive(Clone)]
pub struct Forwarder {
    inner: Arc<ForwarderInner>,
    /// The upstream connection kept by the client connection this forwarder serves
    /// ([`Forwarder::for_client_connection`]); `None`: every request goes by the pool.
    sticky: Option<Sticky>,
}

#[derive(Clone)]
struct ForwarderInner {
    /// Keep-alive connections to origins, shared with the robots.txt fetcher.
    pool: Pool,
    connector: Connector,
    /// For the connections a client connection keeps ([`Sticky`]): HTTP/1.1 only.
    sticky_connector: Connector,
    /// Permits to open kept connections ([`KEPT_OPENING`]).
    opening: Arc<tokio::sync::Semaphore>,
    upstream_timeout: Duration,
    tunnel_idle_timeout: Duration,
    metrics: Option<Arc<Metrics>>,
    /// Pay per crawl's retries; `None`: off (402s are still noted).
    pay: Option<Pay>,
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
    /// A forwarder sending through `pool` (whose connector's TLS config should offer h2
    /// and http/1.1); tunnels and upgrades connect through the pool's connector.
    pub fn new(pool: Pool, config: &ForwardConfig) -> Forwarder {
        let connector = pool.connector().clone();
        let via = HeaderValue::from_str(&format!("1.1 {}", config.via))
            .unwrap_or(HeaderValue::from_static("1.1 robotsgate"));
        let inner = ForwarderInner {
            pool,
            sticky_connector: connector.http1_only(),
            opening: Arc::new(tokio::sync::Semaphore::new(KEPT_OPENING)),
            connector,
            upstream_timeout: config.upstream_timeout,
            tunnel_idle_timeout: config.tunnel_idle_timeout,
            metrics: None,
            pay: None,
            via,
            tunnels: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        };
        Forwarder { inner: Arc::new(inner), sticky: None }
    }

    /// This forwarder for the requests of one client connection, with a slot for the
    /// upstream connection that client connection keeps ([`Sticky`]), and the client
    /// connection's place under `proxy.max_connections` for the WebSockets that outlive
    /// it. Requests through the tunnels of `CONNECT` do without (they come to a forwarder
    /// without a slot).
    pub(crate) fn for_client_connection(&self, place: Slot) -> Forwarder {
        Forwarder { inner: self.inner.clone(), sticky: Some(self.sticky(place)) }
    }

    /// Counts upstream errors in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Forwarder {
        Arc::make_mut(&mut self.inner).metrics = Some(metrics);
        self
    }

    /// Retries `402` answers asking at most `pay.max` with a `crawler-max-price` signed by
    /// the key that signed the request.
    pub(crate) fn with_pay(mut self, pay: Pay) -> Forwarder {
        Arc::make_mut(&mut self.inner).pay = Some(pay);
        self
    }

    fn upstream_failed(&self, class: &'static str) {
        if let Some(m) = &self.inner.metrics {
            m.upstream_error(class);
        }
    }

    /// Forwards `req`. What needs no waiting (the checks, the headers, taking the kept
    /// connection) is done before the future is made, and the request goes into that
    /// future once: this future is boxed for every request, and a small box is a cheap one.
    fn forward(mut self, req: Request<ClientBody>) -> Forwarding {
        // The tunnel's and the WebSocket's futures are large and rare.
        if req.method() == Method::CONNECT {
            return Box::pin(async move { self.tunnel(req).await });
        }
        let head = req.method() == Method::HEAD;
        if req.uri().scheme().is_none() {
            return Box::pin(std::future::ready(boxed(not_a_proxy_request().into_response(head))));
        }
        if upgrade::wants_websocket(&req) {
            return Box::pin(async move { self.upgrade(req).await });
        }
        let (mut parts, body) = req.into_parts();
        let sticky = self.sticky.take();
        strip_hop_by_hop(&mut parts.headers);
        append_via(&mut parts.headers, &self.inner.via);
        // RFC 9112 §3.2.2: the target's authority replaces the client's Host, so the
        // origin serves the host whose robots.txt was checked (default port left out).
        set_host(&mut parts.headers, &parts.uri);
        let signed_with = parts.extensions.remove::<robotsgate::layer::SignedWith>();
        parts.extensions = http::Extensions::new();
        parts.version = http::Version::HTTP_11;
        let has_body = !hyper::body::Body::is_end_stream(&body);
        // Only with `[pay]` (boxed: most requests carry `None`).
        let kept = self
            .inner
            .pay
            .as_ref()
            .filter(|_| !has_body)
            .map(|_| Box::new(pay::Kept::of(&parts, signed_with)));
        let upstream = Request::from_parts(parts, body);
        self.answer(upstream, sticky, head, has_body, kept)
    }

    /// The tunnels this forwarder opened (CONNECT, and intercepted ones the listener
    /// starts): the proxy waits for them on shutdown.
    pub(crate) fn tunnels(&self) -> &TaskTracker {
        &self.inner.tunnels
    }

    /// `proxy.tunnel_idle_timeout`: how long a tunnel may carry nothing either way.
    pub(crate) fn tunnel_idle_timeout(&self) -> std::time::Duration {
        self.inner.tunnel_idle_timeout
    }

    /// The `Via` header value this forwarder adds.
    pub(crate) fn via(&self) -> &HeaderValue {
        &self.inner.via
    }

    /// Closes the tunnels still open (the shutdown grace period is over).
    pub(crate) fn close_tunnels(&self) {
        self.inner.shutdown.cancel();
    }
}

/// The future of a forwarded request (boxed: one allocation a request).
pub(crate) type Forwarding = Pin<Box<dyn Future<Output = Response<ProxyBody>> + Send>>;

impl Service<Request<ClientBody>> for Forwarder {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = futures_util::future::Map<
        Forwarding,
        fn(Response<ProxyBody>) -> Result<Response<ProxyBody>, Infallible>,
    >;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ClientBody>) -> Self::Future {
        self.clone().forward(req).map(Ok)
    }
}
