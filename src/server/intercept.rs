//! TLS interception of `CONNECT` tunnels: the proxy answers `200`, completes a TLS
//! handshake as the CONNECT host with a leaf from the local CA ([`crate::server::ca`]), and
//! serves the HTTP/1.1 or HTTP/2 requests inside through the same [`RobotsLayer`] as plain
//! HTTP, with the origin `https://host:port`: per-path decisions, 403s and audit records
//! alike. Requests that pass go upstream over a separate TLS connection that verifies the
//! origin's real certificate; a certificate that does not verify gives `502`.
//!
//! Hosts on the bypass list (certificate-pinned apps, sensitive hosts) and ports not
//! intercepted are tunnelled as before, with the host-level check only. A client that does
//! not start TLS inside the tunnel gets a plain-text `400` and the tunnel is closed.
//!
//! [`RobotsLayer`]: crate::layer::RobotsLayer

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use http::{Request, Uri};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::layer::{ClientAddr, ProxyUser};
use crate::origin::{HostPattern, Origin};
use crate::refusal::{Refusal, RefusalKind};
use crate::server::ca::Interceptor;
use crate::server::forward::{ProxyService, Sticky};

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
    /// Whether a CONNECT to `origin` is intercepted.
    pub fn applies(&self, origin: &Origin) -> bool {
        (self.ports.is_empty() || self.ports.contains(&origin.port()))
            && !self.bypass.iter().any(|p| p.matches(origin.host()))
    }
}

/// The service intercepted requests go to (the robots layer over the forwarder).
pub(crate) type InnerService = ProxyService;

/// Serves one intercepted tunnel after the CONNECT was answered with 200.
pub(crate) async fn serve(
    upgraded: hyper::upgrade::Upgraded,
    origin: Origin,
    interception: Interception,
    service: InnerService,
    client: SocketAddr,
    user: Option<Arc<str>>,
    stop: CancellationToken,
) {
    let mut io = TokioIo::new(upgraded);
    // A TLS connection starts with a handshake record (0x16); anything else is refused
    // with a readable answer instead of a hang.
    let mut first = [0u8; 1];
    let read = tokio::time::timeout(interception.handshake_timeout, io.read(&mut first)).await;
    match read {
        Ok(Ok(1)) if first[0] == 0x16 => {}
        Ok(Ok(1)) => {
            let why = format!(
                "robotsgate intercepts TLS in tunnels to {origin}: start a TLS handshake after CONNECT, \
                 or ask the operator to add the host to the bypass list"
            );
            let answer = Refusal::new(RefusalKind::TlsExpected, why).to_http1_bytes();
            let _ = io.write_all(&answer).await;
            let _ = io.shutdown().await;
            return;
        }
        _ => return, // closed or silent
    }
    let config = match interception.interceptor.server_config(origin.host()).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(%origin, error = %e, "cannot mint a certificate");
            return;
        }
    };
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let io = Prefixed { prefix: Some(first[0]), inner: io };
    let tls = match tokio::time::timeout(interception.handshake_timeout, acceptor.accept(io)).await {
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
    let Ok(authority) = http::uri::Authority::try_from(origin.authority()) else {
        tracing::warn!(%origin, "the CONNECT origin is not a URI authority");
        return;
    };
    // One request at a time over HTTP/1.x: the tunnel can keep an upstream connection.
    let sticky = Sticky::default();
    let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
        let service = service.clone();
        let authority = authority.clone();
        let user = user.clone();
        let sticky = (req.version() <= http::Version::HTTP_11).then(|| sticky.clone());
        async move {
            // Requests inside the tunnel are for the CONNECT origin, whatever form they
            // came in: make the URI absolute so the layer and the forwarder see it.
            let mut parts = req.uri().clone().into_parts();
            parts.scheme = Some(http::uri::Scheme::HTTPS);
            parts.authority = Some(authority);
            if parts.path_and_query.is_none() {
                parts.path_and_query = Some(http::uri::PathAndQuery::from_static("/"));
            }
            if let Ok(uri) = Uri::from_parts(parts) {
                *req.uri_mut() = uri;
            }
            req.extensions_mut().insert(ClientAddr(client));
            if let Some(sticky) = sticky {
                req.extensions_mut().insert(sticky);
            }
            if let Some(u) = &user {
                req.extensions_mut().insert(ProxyUser(u.clone()));
            }
            service.oneshot(req).await
        }
    });
    let builder = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
    let conn = builder.serve_connection(TokioIo::new(tls), svc);
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%origin, %client, error = %e, "intercepted connection ended with an error");
            }
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// A stream that first yields one byte read ahead.
struct Prefixed<T> {
    prefix: Option<u8>,
    inner: T,
}

impl<T: AsyncRead + Unpin> AsyncRead for Prefixed<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if let Some(b) = self.prefix.take() {
            if buf.remaining() > 0 {
                buf.put_slice(&[b]);
                return Poll::Ready(Ok(()));
            }
            self.prefix = Some(b);
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Prefixed<T> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}
