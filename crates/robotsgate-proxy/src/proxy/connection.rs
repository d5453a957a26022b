//! One client connection: HTTP/1.1 served with hyper, and each request authenticated,
//! then handed to interception (`CONNECT` to an intercepted origin) or to the robots layer
//! over the forwarder.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{self};
use http::{Method, Request, Response};
use http_body_util::Either;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use robotsgate::net::PoolRequestBody as ClientBody;

use crate::h1_server::{self, Served};
use crate::prefixed::Prefixed;
use crate::send_bound::SendBound;
use crate::slot::Slot;
use hyper_util::rt::{TokioIo, TokioTimer};

use super::shared::Shared;
use super::sniff;
use crate::auth::ProxyAuth;
use crate::forward::{HeadLimit, ProxyBody, ProxyService, boxed, not_a_proxy_request, own_via};
use crate::intercept::{self};
use crate::metrics::Arrival;
use robotsgate::layer::{ClientAddr, ProxyUser, Transport};
use robotsgate::origin::{Origin, Scheme};
use robotsgate::{Refusal, RefusalKind};

/// Serves one client connection, which holds `slot` (its place under
/// `proxy.max_connections`) and lends it to the tunnels and upgrades that outlive it.
pub(super) async fn serve_connection(
    stream: tokio::net::TcpStream,
    client: SocketAddr,
    shared: Arc<Shared>,
    slot: Slot,
) {
    // First: dropped last, after the service that holds parts of its requests.
    let mut kit = shared.config.http1_fast_path.then(h1_server::Kit::take);
    // A client that accepts nothing of its answers for send_timeout is closed.
    let stream = SendBound::tcp(stream, shared.config.send_timeout, shared.cuts.send_timeout.clone());
    let stop = shared.stop.clone();
    let config = shared.config.clone();
    // The robots layer over the forwarder, for this connection's requests.
    // The place is kept by the connection's forwarder, for the tunnels and upgrades that
    // outlive the connection: nothing a request.
    let service = ProxyService::for_client_connection(&shared.layer, &shared.forwarder, client, slot);
    let records = shared.clone();
    // One request, whichever way it was read: the fast path's or hyper's.
    let one = move |req: Request<ClientBody>| {
        let shared = shared.clone();
        let service = service.clone();
        async move {
            let started = tokio::time::Instant::now();
            let version = req.version();
            let mut res = handle(req, client, &shared, &service).await;
            own_via(&mut res, &shared.via);
            if let Some(m) = &shared.metrics {
                m.request(Arrival::Proxy, version, started.elapsed());
            }
            res
        }
    };
    let io = if let Some(kit) = &mut kit {
        let limits = h1_server::Limits {
            header_read_timeout: config.header_read_timeout,
            max_header_bytes: config.max_header_bytes,
        };
        match h1_server::serve(stream, limits, &stop, kit, &one).await {
            Served::Done => return,
            Served::HandOver(rest) => rest,
        }
    } else {
        Prefixed { prefix: Bytes::new(), inner: stream }
    };
    let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
        let answer = one(req.map(Either::Left));
        async move { Ok::<_, Infallible>(answer.await) }
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(config.header_read_timeout)
        // The limit itself is robotsgate's check (HeadLimit), which says what was over it;
        // hyper's buffer only bounds the heads it can read at all.
        .max_buf_size(HeadLimit(config.max_header_bytes).buffer())
        .keep_alive(true);
    let conn = builder.serve_connection(TokioIo::new(io), svc).with_upgrades();
    tokio::pin!(conn);
    tokio::select! {
        r = conn.as_mut() => {
            if let Err(e) = r {
                tracing::debug!(%client, error = %e, "connection ended with an error");
                // hyper answered a request it could not read (400, 431, ...) itself.
                if e.is_parse() || e.is_parse_too_large() {
                    let kind = if e.is_parse_too_large() { RefusalKind::HeaderTooLarge } else { RefusalKind::BadRequest };
                    let refusal = Refusal::new(kind, format!("malformed request: {e}"));
                    records.log_own_answer(&refusal, client, None);
                }
            }
        }
        _ = stop.cancelled() => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// Whether the `CONNECT` target is on the interception bypass list: known TLS hosts,
/// checked before the `200` whatever the port.
fn bypassed(shared: &Shared, req: &Request<ClientBody>) -> bool {
    let Some(interception) = &shared.interception else { return false };
    req.uri()
        .authority()
        .and_then(|a| Origin::from_authority(Scheme::Https, a.as_str()).ok())
        .is_some_and(|o| interception.bypasses(&o))
}

/// One request from a client: authentication, then interception or the robots service.
async fn handle(
    mut req: Request<ClientBody>,
    client: SocketAddr,
    shared: &Arc<Shared>,
    service: &ProxyService,
) -> Response<ProxyBody> {
    let head = req.method() == Method::HEAD;
    if let Some(refusal) = HeadLimit(shared.config.max_header_bytes).check(&req) {
        if let Some(m) = &shared.metrics {
            m.refused(RefusalKind::HeaderTooLarge);
        }
        shared.log_own_answer(&refusal, client, Some(&req));
        return boxed(refusal.into_response(head));
    }
    // A request for the proxy itself, not through it: no robots decision.
    if req.method() != Method::CONNECT && req.uri().scheme().is_none() {
        let refusal = not_a_proxy_request();
        shared.log_own_answer(&refusal, client, Some(&req));
        return boxed(refusal.into_response(head));
    }
    let mut user = None;
    if let Some(auth) = shared.auth.as_ref().filter(|a| a.enabled()) {
        match auth.authenticate(req.headers()).await {
            Ok(u) => user = Some(u),
            Err(refusal) => {
                if let Some(m) = &shared.metrics {
                    m.refused(RefusalKind::AuthRequired);
                }
                shared.log_own_answer(&ProxyAuth::refusal(&refusal), client, Some(&req));
                return boxed(auth.challenge(&refusal, head));
            }
        }
    }
    if let Some(u) = &user {
        req.extensions_mut().insert(ProxyUser(u.clone()));
    }
    if req.method() != Method::CONNECT {
        // The connection's service names the client and keeps its upstream connection.
        return service.answer(req).await;
    }
    req.extensions_mut().insert(ClientAddr(client));
    // The tunnel keeps the client connection's place.
    if let Some(place) = service.place() {
        req.extensions_mut().insert(place);
    }
    if let Some(interception) = shared.interception.clone()
        && let Some(origin) =
            req.uri().authority().and_then(|a| Origin::from_authority(Scheme::Https, a.as_str()).ok())
        && interception.applies(&origin)
    {
        let slot = Slot::take(&mut req);
        let inside = shared.inside(client, user, slot);
        shared.tunnels.spawn(async move {
            match hyper::upgrade::on(req).await {
                // Boxed: the task holds a pointer, not the intercepted connection's future.
                Ok(upgraded) => Box::pin(intercept::serve(upgraded, origin, interception, inside)).await,
                Err(e) => tracing::debug!(error = %e, "CONNECT upgrade failed"),
            }
        });
        let mut res = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
        res.headers_mut().insert(header::VIA, shared.via.clone());
        return res;
    }
    if sniff::sniffed_port(req.uri().port_u16()) && !bypassed(shared, &req) {
        // Boxed: the tunnel's future is most of this one's size, and every request's
        // future is copied into hyper's connection state (see Forwarder::send_pooled).
        return Box::pin(sniff::connect_then_sniff(req, shared)).await;
    }
    req.extensions_mut().insert(Transport::Connect);
    // The tunnel's TLS client must ask for the host it is checked for (crate::server_name).
    let check = shared.hello_check(&req);
    req.extensions_mut().insert(check);
    shared.answer(req).await
}
