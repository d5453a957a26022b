//! The forward proxy: an HTTP/1.1 listener whose requests go through [`RobotsLayer`]
//! and then to the origin.
//!
//! - Absolute-form requests (`GET http://host/path`) are forwarded over pooled
//!   keep-alive connections, bodies streamed both ways. Hop-by-hop headers (RFC 9110
//!   §7.6.1: `Connection` and the headers it lists, `Keep-Alive`, `TE`, `Trailer`,
//!   `Transfer-Encoding`, `Upgrade`, and every `Proxy-*`) are removed both ways and `Via`
//!   is added.
//! - `CONNECT host:port` is tunnelled after a host-level check (the layer decides `/`).
//! - An origin that cannot be reached gives `502`, a timeout `504`, a destination the
//!   guard refuses `403`, a request that is not a proxy request `400`; each with a
//!   `text/plain` body saying why and the header `x-robotsgate`.
//! - Shutdown: stop accepting, let connections finish for a grace period, then close.
//!
//! [`RobotsLayer`]: crate::layer::RobotsLayer

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::{Service, ServiceExt};

use crate::intercept::{self, InnerService, Interception};
use crate::layer::{ClientAddr, RobotsLayer, answer, connect_error_answer};
use crate::net::{ConnectError, Connector};
use crate::origin::{Origin, Scheme};

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
    /// Time a client has to send a request's headers.
    pub header_read_timeout: Duration,
    /// The `Via` pseudonym.
    pub via: String,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 3128)),
            upstream_timeout: Duration::from_secs(60),
            shutdown_grace: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(30),
            via: "robotsgate".into(),
        }
    }
}

/// Forwards proxy requests to origins (the service below [`RobotsLayer`]).
#[derive(Clone)]
pub struct Forwarder {
    client: Client<Connector, Incoming>,
    connector: Connector,
    upstream_timeout: Duration,
    via: HeaderValue,
    tunnels: TaskTracker,
    shutdown: CancellationToken,
}

impl std::fmt::Debug for Forwarder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forwarder").field("upstream_timeout", &self.upstream_timeout).finish_non_exhaustive()
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
        Forwarder {
            client,
            connector,
            upstream_timeout: config.upstream_timeout,
            via,
            tunnels: TaskTracker::new(),
            shutdown: CancellationToken::new(),
        }
    }

    async fn forward(self, req: Request<Incoming>) -> Response<ProxyBody> {
        if req.method() == Method::CONNECT {
            return self.tunnel(req).await;
        }
        if req.uri().scheme().is_none() {
            return boxed(answer(
                StatusCode::BAD_REQUEST,
                "not-a-proxy-request",
                "this is a forward proxy: send requests in absolute form (e.g. set HTTP_PROXY)",
            ));
        }
        let (mut parts, body) = req.into_parts();
        strip_hop_by_hop(&mut parts.headers);
        append_via(&mut parts.headers, &self.via);
        // RFC 9112 §3.2.2: the target's authority replaces the client's Host, so the
        // origin serves the host whose robots.txt was checked (default port left out).
        let default_port = if parts.uri.scheme_str() == Some("https") { 443 } else { 80 };
        if let Some(host) = parts.uri.authority().and_then(|a| {
            let host = match a.port_u16() {
                Some(p) if p != default_port => format!("{}:{p}", a.host()),
                _ => a.host().to_owned(),
            };
            HeaderValue::from_str(&host).ok()
        }) {
            parts.headers.insert(header::HOST, host);
        }
        parts.extensions = http::Extensions::new();
        parts.version = http::Version::HTTP_11;
        let upstream = Request::from_parts(parts, body);
        match tokio::time::timeout(self.upstream_timeout, self.client.request(upstream)).await {
            Err(_) => boxed(answer(
                StatusCode::GATEWAY_TIMEOUT,
                "upstream-timeout",
                &format!("the origin did not answer within {:?}", self.upstream_timeout),
            )),
            Ok(Err(e)) => boxed(upstream_error(&e)),
            Ok(Ok(res)) => {
                let (mut parts, body) = res.into_parts();
                strip_hop_by_hop(&mut parts.headers);
                append_via(&mut parts.headers, &self.via);
                // The proxy speaks HTTP/1.1 to its clients whatever the origin spoke.
                parts.version = http::Version::HTTP_11;
                Response::from_parts(parts, body.map_err(Into::into).boxed())
            }
        }
    }

    /// `CONNECT host:port`: connect first (so failures can be answered), then say 200 and
    /// copy bytes both ways.
    async fn tunnel(self, req: Request<Incoming>) -> Response<ProxyBody> {
        let Some(authority) = req.uri().authority().cloned() else {
            return boxed(answer(StatusCode::BAD_REQUEST, "bad-request", "CONNECT needs host:port"));
        };
        // Scheme only picks the default port; CONNECT always names one.
        let origin = match Origin::from_authority(Scheme::Https, authority.as_str()) {
            Ok(o) => o,
            Err(e) => return boxed(answer(StatusCode::BAD_REQUEST, "bad-request", &e.to_string())),
        };
        let upstream = match self.connector.connect_tcp(&origin).await {
            Ok(s) => s,
            Err(e) => return boxed(connect_error_answer(&e)),
        };
        let shutdown = self.shutdown.clone();
        self.tunnels.spawn(async move {
            let upgraded = match hyper::upgrade::on(req).await {
                Ok(u) => u,
                Err(e) => {
                    tracing::debug!(error = %e, "CONNECT upgrade failed");
                    return;
                }
            };
            let mut client = TokioIo::new(upgraded);
            let mut upstream = upstream;
            tokio::select! {
                r = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "tunnel closed with an error");
                    }
                }
                _ = shutdown.cancelled() => {}
            }
        });
        let mut res = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
        res.headers_mut().insert(header::VIA, self.via.clone());
        res
    }
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

fn boxed(res: Response<Full<Bytes>>) -> Response<ProxyBody> {
    res.map(|b| b.map_err(|never| match never {}).boxed())
}

/// The answer for an upstream failure: 403 for a refused destination, 504 for a
/// timeout, 502 otherwise.
fn upstream_error(e: &hyper_util::client::legacy::Error) -> Response<Full<Bytes>> {
    let mut source: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(c) = s.downcast_ref::<ConnectError>() {
            return connect_error_answer(c);
        }
        source = s.source();
    }
    answer(
        StatusCode::BAD_GATEWAY,
        "upstream-error",
        &format!("the origin failed: {}", crate::fetch::error_chain(e)),
    )
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1) and every `Proxy-*` header.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    let listed: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in listed {
        headers.remove(name);
    }
    for name in [
        header::CONNECTION,
        header::TE,
        header::TRAILER,
        header::TRANSFER_ENCODING,
        header::UPGRADE,
        HeaderName::from_static("keep-alive"),
    ] {
        headers.remove(name);
    }
    let proxy: Vec<HeaderName> =
        headers.keys().filter(|k| k.as_str().starts_with("proxy-")).cloned().collect();
    for name in proxy {
        headers.remove(name);
    }
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
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("listen", &self.listener.local_addr().ok()).finish_non_exhaustive()
    }
}

impl Proxy {
    /// Binds the listener.
    pub async fn bind(config: ProxyConfig, layer: RobotsLayer, forwarder: Forwarder) -> io::Result<Proxy> {
        let listener = TcpListener::bind(config.listen).await?;
        Ok(Proxy { listener, layer, forwarder, config, interception: None })
    }

    /// A proxy on a listener bound already.
    pub fn from_listener(
        listener: TcpListener,
        config: ProxyConfig,
        layer: RobotsLayer,
        forwarder: Forwarder,
    ) -> Proxy {
        Proxy { listener, layer, forwarder, config, interception: None }
    }

    /// Intercepts CONNECT tunnels (TLS with leaves from the local CA) for per-path checks.
    pub fn with_interception(mut self, interception: Interception) -> Proxy {
        self.interception = Some(interception);
        self
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then drains: stops accepting, lets requests in
    /// flight finish within the grace period, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let connections = TaskTracker::new();
        let stop = CancellationToken::new();
        let service = tower::ServiceBuilder::new().layer(self.layer.clone()).service(self.forwarder.clone());
        let inner: InnerService = InnerService::new(
            service.clone().map_response(|res: Response<_>| res.map(|b| b.map_err(Into::into).boxed())),
        );
        let interception = self.interception.clone();
        let tunnels = self.forwarder.tunnels.clone();
        tokio::pin!(shutdown);
        loop {
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
            let _ = stream.set_nodelay(true);
            let service = service.clone();
            let stop = stop.clone();
            let header_timeout = self.config.header_read_timeout;
            let (inner, interception, tunnels, via) =
                (inner.clone(), interception.clone(), tunnels.clone(), self.forwarder.via.clone());
            let stop_tunnels = stop.clone();
            connections.spawn(async move {
                let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                    let service = service.clone();
                    let (inner, interception, tunnels, stop, via) =
                        (inner.clone(), interception.clone(), tunnels.clone(), stop_tunnels.clone(), via.clone());
                    async move {
                        if req.method() == Method::CONNECT
                            && let Some(interception) = interception
                            && let Some(origin) = req
                                .uri()
                                .authority()
                                .and_then(|a| Origin::from_authority(Scheme::Https, a.as_str()).ok())
                            && interception.applies(&origin)
                        {
                            tunnels.spawn(async move {
                                match hyper::upgrade::on(req).await {
                                    Ok(upgraded) => {
                                        intercept::serve(upgraded, origin, interception, inner, client, stop).await
                                    }
                                    Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
                                }
                            });
                            let mut res = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
                            res.headers_mut().insert(header::VIA, via);
                            return Ok::<_, Infallible>(res);
                        }
                        // A request for the proxy itself, not through it: no robots decision.
                        if req.method() != Method::CONNECT && req.uri().scheme().is_none() {
                            return Ok::<_, Infallible>(boxed(answer(
                                StatusCode::BAD_REQUEST,
                                "not-a-proxy-request",
                                "this is a forward proxy: send requests in absolute form (e.g. set HTTP_PROXY)",
                            )));
                        }
                        req.extensions_mut().insert(ClientAddr(client));
                        let res = service.oneshot(req).await?;
                        Ok(res.map(|b| b.map_err(Into::into).boxed()))
                    }
                });
                let mut builder = hyper::server::conn::http1::Builder::new();
                builder.timer(TokioTimer::new()).header_read_timeout(header_timeout).keep_alive(true);
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
            });
        }
        // Drain.
        drop(self.listener);
        stop.cancel();
        connections.close();
        self.forwarder.tunnels.close();
        let grace = self.config.shutdown_grace;
        let drained = tokio::time::timeout(grace, async {
            connections.wait().await;
            self.forwarder.tunnels.wait().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(?grace, "shutdown grace period over; closing the remaining connections");
            self.forwarder.shutdown.cancel();
        }
        Ok(())
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
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, vec!["accept", "x-robots-agent"]);
    }
}
