//! TLS interception of `CONNECT` tunnels: the proxy answers `200`, completes a TLS
//! handshake as the CONNECT host with a leaf from the local CA ([`crate::ca`]), and
//! serves the HTTP/1.1 or HTTP/2 requests inside through the same [`RobotsLayer`] as plain
//! HTTP, with the origin `https://host:port`: per-path decisions, 403s and audit records
//! alike. Requests that pass go upstream over a separate TLS connection that verifies the
//! origin's real certificate; a certificate that does not verify gives `502`.
//!
//! Hosts on the bypass list (certificate-pinned apps, sensitive hosts) and ports not
//! intercepted are tunnelled as before, with the host-level check only. A client that does
//! not start TLS inside the tunnel gets a plain-text `400` and the tunnel is closed.
//!
//! [`RobotsLayer`]: robotsgate::layer::RobotsLayer

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderValue, Request, Uri};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::ca::Interceptor;
use crate::forward::{HeadLimit, ProxyService, Sticky, boxed, own_via};
use crate::metrics::{Arrival, Metrics};
use crate::prefixed::Prefixed;
use crate::quiet::Activity;
use crate::slot::Slot;
use robotsgate::layer::{ClientAddr, ProxyUser, Transport};
use robotsgate::origin::{HostPattern, Origin};
use robotsgate::{Refusal, RefusalKind};

/// When and how CONNECT tunnels are intercepted.
#[derive(Clone, Debug)]
pub struct Interception {
    /// Mints the leaf certificates.
    pub interceptor: Interceptor,
    /// Hosts never intercepted (tunnelled with the host-level check only).
    pub bypass: Vec<HostPattern>,
    /// Ports intercepted; empty means every port.
    pub ports: Vec<u16>,
    /// Time for the client to complete the TLS handshake.
    pub handshake_timeout: Duration,
}

impl Interception {
    /// Whether `origin`'s host is on the bypass list.
    pub fn bypasses(&self, origin: &Origin) -> bool {
        self.bypass.iter().any(|p| p.matches(origin.host()))
    }

    /// Whether a CONNECT to `origin` is intercepted.
    pub fn applies(&self, origin: &Origin) -> bool {
        (self.ports.is_empty() || self.ports.contains(&origin.port()))
            && !self.bypass.iter().any(|p| p.matches(origin.host()))
    }
}

/// What serving HTTP inside a tunnel needs: the listener's service and settings, and who
/// the client is.
#[derive(Clone)]
pub(crate) struct Inside {
    /// The robots layer over the forwarder.
    pub(crate) service: ProxyService,
    /// The client's address.
    pub(crate) client: SocketAddr,
    /// The authenticated proxy user.
    pub(crate) user: Option<Arc<str>>,
    /// Cancelled when the proxy shuts down.
    pub(crate) stop: CancellationToken,
    /// The proxy's `Via`, for its own answers.
    pub(crate) via: HeaderValue,
    /// `proxy.max_header_bytes`.
    pub(crate) head_limit: HeadLimit,
    /// `proxy.header_read_timeout`.
    pub(crate) header_read_timeout: Duration,
    /// `proxy.send_timeout`.
    pub(crate) send_timeout: Duration,
    /// Requests are counted here.
    pub(crate) metrics: Option<Arc<Metrics>>,
    /// The robots layer: for the records of the answers given before it sees a request.
    pub(crate) layer: robotsgate::layer::RobotsLayer,
    /// The client connection's place under `proxy.max_connections`, held while the tunnel
    /// is served and lent to the upgrades inside it.
    pub(crate) slot: Option<Slot>,
}

/// Serves one intercepted tunnel after the CONNECT was answered with 200.
pub(crate) async fn serve(
    upgraded: hyper::upgrade::Upgraded,
    origin: Origin,
    interception: Interception,
    inside: Inside,
) {
    let client = inside.client;
    let mut io = TokioIo::new(upgraded);
    // A TLS connection starts with a handshake record (0x16); anything else is refused
    // with a readable answer instead of a hang.
    let mut first = [0u8; 8];
    // Shutting down: a tunnel that has sent nothing yet is closed, not waited for.
    let read = tokio::select! {
        read = tokio::time::timeout(interception.handshake_timeout, io.read(&mut first)) => read,
        () = inside.stop.cancelled() => return,
    };
    let n = match read {
        Ok(Ok(n)) if n > 0 => n,
        _ => return, // closed or silent
    };
    if first[0] != 0x16 {
        let why = format!(
            "robotsgate intercepts TLS in tunnels to {origin}: start a TLS handshake after CONNECT, \
             or ask the operator to add the host to the bypass list"
        );
        let head = first[..n].starts_with(b"HEAD ");
        let refusal = Refusal::new(RefusalKind::TlsExpected, why);
        let answer = refusal.to_http1_bytes_with(head, &[("via", &inside.via)]);
        let target = format!("{origin}");
        let facts = robotsgate::audit::RefusalFacts {
            client: Some(client),
            user: inside.user.as_deref(),
            method: Some("CONNECT"),
            target: Some(&target),
            transport: Some(Transport::Intercepted.as_str()),
            ..Default::default()
        };
        inside.layer.log_refusal(&refusal, facts);
        let _ = tokio::time::timeout(interception.handshake_timeout, io.write_all(&answer)).await;
        let _ = io.shutdown().await;
        return;
    }
    let config = match interception.interceptor.server_config(origin.host()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%origin, error = %e, "cannot mint a certificate");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let io = Prefixed { prefix: bytes::Bytes::copy_from_slice(&first[..n]), inner: io };
    let handshake = tokio::select! {
        h = tokio::time::timeout(interception.handshake_timeout, acceptor.accept(io)) => h,
        // Shutting down: nothing went through yet.
        () = inside.stop.cancelled() => return,
    };
    let tls = match handshake {
        Ok(Ok(tls)) => tls,
        Ok(Err(e)) => {
            tracing::debug!(%origin, %client, error = %e, "client TLS handshake failed");
            return;
        }
        Err(_) => {
            tracing::debug!(%origin, %client, "client TLS handshake timed out");
            return;
        }
    };
    serve_http(tls, &origin, Transport::Intercepted, inside).await;
}

/// Serves HTTP/1.1 (with upgrades) or HTTP/2 on `io`, the inside of a tunnel to `origin`:
/// every request is for that origin, whatever its target says, and goes through the robots
/// layer to the forwarder as if it had come to the listener in absolute form.
pub(crate) async fn serve_http<IO>(io: IO, origin: &Origin, transport: Transport, inside: Inside)
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let Ok(authority) = http::uri::Authority::try_from(origin.authority()) else {
        tracing::warn!(%origin, "the CONNECT origin is not a URI authority");
        return;
    };
    let scheme = match transport {
        Transport::Intercepted => http::uri::Scheme::HTTPS,
        _ => http::uri::Scheme::HTTP,
    };
    let arrival = match transport {
        Transport::Intercepted => Arrival::Intercepted,
        _ => Arrival::ConnectHttp,
    };
    let (client, stop, head_limit, header_read_timeout, send_timeout) = (
        inside.client,
        inside.stop.clone(),
        inside.head_limit,
        inside.header_read_timeout,
        inside.send_timeout,
    );
    let cuts = inside.metrics.as_ref().map(|m| m.cuts()).unwrap_or_default();
    // One request at a time over HTTP/1.x: the tunnel can keep an upstream connection.
    let sticky = Sticky::default();
    // A connection quiet (crate::quiet) for the listener's keep-alive bound is closed, as
    // on the listener: hyper's own bound covers only an HTTP/1.1 connection's next
    // request head.
    let activity = Activity::default();
    let io = activity.watch(io);
    let requests = activity.clone();
    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let inside = inside.clone();
        let activity = requests.clone();
        let busy = requests.busy();
        if let Some(slot) = &inside.slot {
            slot.lend(&mut req);
        }
        let (authority, scheme) = (authority.clone(), scheme.clone());
        let sticky = (req.version() <= http::Version::HTTP_11).then(|| sticky.clone());
        async move {
            let started = tokio::time::Instant::now();
            let version = req.version();
            let mut res = match inside.head_limit.check(&req) {
                // The tunnel goes to one origin: a tunnel opened inside it would be another
                // (its bytes judged on `/` alone).
                None if req.method() == http::Method::CONNECT => {
                    let refusal = Refusal::new(
                        RefusalKind::BadRequest,
                        "CONNECT inside a tunnel: ask the proxy itself",
                    );
                    let target = req.uri().to_string();
                    let facts = robotsgate::audit::RefusalFacts {
                        client: Some(inside.client),
                        method: Some("CONNECT"),
                        target: Some(&target),
                        transport: Some(transport.as_str()),
                        ..Default::default()
                    };
                    inside.layer.log_refusal(&refusal, facts);
                    boxed(refusal.into_response(false))
                }
                Some(refusal) => {
                    if let Some(m) = &inside.metrics {
                        m.refused(RefusalKind::HeaderTooLarge);
                    }
                    boxed(refusal.into_response(req.method() == http::Method::HEAD))
                }
                None => {
                    // Requests inside the tunnel are for the CONNECT origin, whatever form
                    // they came in: make the URI absolute so the layer and the forwarder see
                    // it.
                    let mut parts = req.uri().clone().into_parts();
                    parts.scheme = Some(scheme);
                    parts.authority = Some(authority);
                    if parts.path_and_query.is_none() {
                        parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
                    }
                    if let Ok(uri) = Uri::from_parts(parts) {
                        *req.uri_mut() = uri;
                    }
                    let ext = req.extensions_mut();
                    ext.insert(ClientAddr(inside.client));
                    ext.insert(transport);
                    if let Some(sticky) = sticky {
                        ext.insert(sticky);
                    }
                    if let Some(u) = &inside.user {
                        ext.insert(ProxyUser(u.clone()));
                    }
                    match inside.service.clone().oneshot(req.map(http_body_util::Either::Left)).await {
                        Ok(res) => res,
                        Err(never) => match never {},
                    }
                }
            };
            own_via(&mut res, &inside.via);
            if let Some(m) = &inside.metrics {
                m.request(arrival, version, started.elapsed());
            }
            let res = res.map(|body| activity.sending(body));
            drop(busy);
            Ok::<_, std::convert::Infallible>(res)
        }
    });
    let mut builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(header_read_timeout)
        .max_buf_size(head_limit.buffer());
    builder.http2().max_header_list_size(u32::try_from(head_limit.buffer()).unwrap_or(u32::MAX));
    let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%origin, %client, error = %e, "connection inside a tunnel ended with an error");
            }
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
        () = activity.quiet_for(header_read_timeout) => {
            tracing::debug!(%origin, %client, "quiet connection inside a tunnel closed");
            if activity.answer_unsent() {
                cuts.quiet.inc();
            }
            // HTTP/2: a GOAWAY; what a stream still sends may take as long again.
            conn.as_mut().graceful_shutdown();
            let _ = tokio::time::timeout(header_read_timeout, conn).await;
        }
        // An answer the client takes nothing of (HTTP/2: it grants no flow-control window;
        // see crate::quiet).
        () = activity.stuck_for(send_timeout) => {
            tracing::debug!(%origin, %client, "the client took nothing of an answer for proxy.send_timeout: closed");
            cuts.stuck.inc();
            conn.as_mut().graceful_shutdown();
            tokio::select! {
                _ = conn.as_mut() => {}
                () = activity.only_stuck_left(send_timeout) => {}
            }
        }
    }
}
