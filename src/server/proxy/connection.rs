//! One client connection: HTTP/1.1 served with hyper, and each request authenticated,
//! then handed to interception (`CONNECT` to an intercepted origin) or to the robots layer
//! over the forwarder.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tower::ServiceExt;

use super::ProxyConfig;
use crate::layer::{ClientAddr, ProxyUser};
use crate::origin::{Origin, Scheme};
use crate::server::auth::ProxyAuth;
use crate::server::forward::{ProxyBody, ProxyService, Sticky, boxed, not_a_proxy_request};
use crate::server::intercept::{self, Interception};
use crate::server::metrics::Metrics;

/// What every connection task needs (behind one `Arc`: requests clone it).
pub(super) struct Shared {
    pub(super) service: ProxyService,
    pub(super) interception: Option<Interception>,
    pub(super) auth: Option<ProxyAuth>,
    pub(super) metrics: Option<Arc<Metrics>>,
    pub(super) tunnels: TaskTracker,
    pub(super) stop: CancellationToken,
    pub(super) via: HeaderValue,
    pub(super) config: ProxyConfig,
}

/// Serves one client connection.
pub(super) async fn serve_connection(stream: tokio::net::TcpStream, client: SocketAddr, shared: Arc<Shared>) {
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
