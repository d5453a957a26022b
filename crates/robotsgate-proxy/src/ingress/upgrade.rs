//! WebSockets through the ingress: HTTP/1.1 upgrades (RFC 6455 §4) and HTTP/2's extended
//! CONNECT with `:protocol = websocket` (RFC 8441; the listener's HTTP/2 side advertises
//! `SETTINGS_ENABLE_CONNECT_PROTOCOL`). The layer judged the opening request like any
//! other (a disallowed bot got its refusal and the upstream never saw it); an allowed one
//! goes to the upstream on a connection of its own as an HTTP/1.1 upgrade (`Upgrade` and
//! `Connection: upgrade`; an extended CONNECT becomes a `GET` with a `Sec-WebSocket-Key`
//! of robotsgate's own, the upstream's `Sec-WebSocket-Accept` checked against it). When
//! the upstream answers `101`, the client gets that `101` (HTTP/1.1) or a `200` (HTTP/2)
//! and bytes flow both ways until either side closes, nothing moves for
//! `ingress.websocket_idle_timeout`, or shutdown's grace has passed. Any other answer is
//! forwarded as usual, but a success an extended CONNECT would take for an open tunnel.
//!
//! A CONNECT that opens no WebSocket (a plain one, or another `:protocol`) is not
//! forwarded: the ingress is no forward proxy.

use base64::Engine as _;
use bytes::Bytes;
use http::header::{self, HeaderName, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use http_body_util::{Either, Empty, Full};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use robotsgate::layer::Tally;
use robotsgate::origin::Origin;
use robotsgate::{ROBOTSGATE_HEADER, Refusal, RefusalKind};

use super::{Upstream, UpstreamBody, UpstreamFailure};
use crate::forward::{
    copy_until_idle, keep_only_upgrade, strip_hop_by_hop, upgradable_sender, wants_websocket,
};
use crate::quiet::Busy;
use crate::slot::Slot;

const SEC_WEBSOCKET_KEY: HeaderName = HeaderName::from_static("sec-websocket-key");
const SEC_WEBSOCKET_ACCEPT: HeaderName = HeaderName::from_static("sec-websocket-accept");
const SEC_WEBSOCKET_VERSION: HeaderName = HeaderName::from_static("sec-websocket-version");

/// How a client opens a WebSocket.
#[derive(Debug, Clone)]
pub(super) enum Opening {
    /// HTTP/1.1 `Upgrade: websocket` (its `Upgrade` value): the upstream's `101` goes back.
    Upgrade(HeaderValue),
    /// HTTP/2 extended CONNECT, `:protocol = websocket` (RFC 8441 §4): the upstream's `101`
    /// becomes a `200`.
    ExtendedConnect,
}

/// What `req` asks of the upstream beyond a plain exchange.
#[derive(Debug, Clone)]
pub(super) enum Ask {
    /// An exchange like any other.
    Plain,
    /// A WebSocket.
    WebSocket(Opening),
    /// A CONNECT that opens no WebSocket: refused.
    OtherConnect,
}

/// Whether `req` opens a WebSocket, is a CONNECT that does not, or neither.
pub(super) fn ask<B>(req: &Request<B>) -> Ask {
    if req.method() == Method::CONNECT {
        let websocket = req.version() == http::Version::HTTP_2
            && req
                .extensions()
                .get::<hyper::ext::Protocol>()
                .is_some_and(|p| p.as_str().eq_ignore_ascii_case("websocket"));
        return if websocket { Ask::WebSocket(Opening::ExtendedConnect) } else { Ask::OtherConnect };
    }
    match wants_websocket(req).then(|| req.headers().get(header::UPGRADE).cloned()) {
        Some(Some(upgrade)) => Ask::WebSocket(Opening::Upgrade(upgrade)),
        _ => Ask::Plain,
    }
}

/// A fresh `Sec-WebSocket-Key` (RFC 6455 §4.1: 16 random bytes, base64) and the
/// `Sec-WebSocket-Accept` an upstream must answer it with (§4.2.2).
fn key_and_accept() -> Option<(HeaderValue, Vec<u8>)> {
    use ring::rand::SecureRandom as _;
    const GUID: &[u8] = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
    let mut nonce = [0u8; 16];
    ring::rand::SystemRandom::new().fill(&mut nonce).ok()?;
    let key = base64::engine::general_purpose::STANDARD.encode(nonce);
    let mut sha1 = ring::digest::Context::new(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY);
    sha1.update(key.as_bytes());
    sha1.update(GUID);
    let accept = base64::engine::general_purpose::STANDARD.encode(sha1.finish());
    Some((HeaderValue::from_str(&key).ok()?, accept.into_bytes()))
}

impl Upstream {
    /// robotsgate's answer to a CONNECT that opens no WebSocket: `400`, never forwarded.
    pub(super) fn not_a_websocket() -> Response<UpstreamBody> {
        let text = "robotsgate: this site takes CONNECT only to open a WebSocket (RFC 8441)\n";
        let mut res =
            Response::new(Either::Right(Either::Left(Full::new(Bytes::from_static(text.as_bytes())))));
        *res.status_mut() = StatusCode::BAD_REQUEST;
        let h = res.headers_mut();
        h.insert(ROBOTSGATE_HEADER, HeaderValue::from_static(RefusalKind::BadRequest.as_str()));
        h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(text.len()));
        // robotsgate's own answer: the layer keeps its header.
        res.extensions_mut().insert(Refusal::new(RefusalKind::BadRequest, text));
        res
    }

    /// Sends the opening request `parts` (its proxy headers set) to the upstream as an
    /// HTTP/1.1 upgrade and, on `101`, joins `client` (the client's side of the upgrade or
    /// of the extended CONNECT's stream) to the upstream's connection.
    pub(super) async fn upgrade(
        &self,
        mut parts: http::request::Parts,
        opening: Opening,
        client: OnUpgrade,
    ) -> Response<UpstreamBody> {
        // The client connection's place under `ingress.max_connections`, kept as long as
        // the WebSocket.
        let slot = parts.extensions.remove::<Slot>();
        // Over HTTP/2, the connection the WebSocket's stream is on stays busy while it is open.
        let busy = parts.extensions.remove::<Busy>();
        let base = http::Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query("/")
            .build();
        let origin = match base
            .map_err(|e| e.to_string())
            .and_then(|u| Origin::from_uri(&u).map_err(|e| e.to_string()))
        {
            Ok(o) => o,
            Err(why) => return Upstream::bad_gateway(why),
        };
        let accept = match &opening {
            Opening::Upgrade(upgrade) => {
                parts.headers.insert(header::UPGRADE, upgrade.clone());
                None
            }
            Opening::ExtendedConnect => {
                // RFC 8441 §5: over HTTP/1.1 the same opening is a GET with a key.
                let Some((key, accept)) = key_and_accept() else {
                    return Upstream::bad_gateway("no random bytes for a WebSocket key".into());
                };
                parts.method = Method::GET;
                parts.headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
                parts.headers.insert(SEC_WEBSOCKET_KEY, key);
                parts.headers.entry(SEC_WEBSOCKET_VERSION).or_insert(HeaderValue::from_static("13"));
                Some(accept)
            }
        };
        parts.headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        if let Ok(host) = HeaderValue::from_str(self.authority.as_str()) {
            parts.headers.insert(header::HOST, host);
        }
        parts.uri = match parts.uri.path_and_query() {
            Some(pq) => pq.as_str().parse().unwrap_or_else(|_| http::Uri::from_static("/")),
            None => http::Uri::from_static("/"),
        };
        parts.version = http::Version::HTTP_11;
        parts.extensions = http::Extensions::new();
        let req = Request::from_parts(parts, Empty::<Bytes>::new());
        // A connection of its own, HTTP/1.1 (upgrades do not exist in HTTP/2), never pooled:
        // after a 101 it belongs to the WebSocket.
        let connector = self.pool.connector().http1_only();
        let exchange = async {
            let stream = connector.connect(&origin).await.map_err(|e| e.to_string())?;
            let mut sender = upgradable_sender(stream).await.map_err(|e| e.to_string())?;
            sender.send_request(req).await.map_err(|e| e.to_string())
        };
        let mut res = match tokio::time::timeout(self.timeout, exchange).await {
            Ok(Ok(res)) => res,
            Ok(Err(why)) => {
                tracing::warn!(error = %why, "the upstream failed (WebSocket upgrade)");
                if let Some(m) = &self.metrics {
                    m.upstream_failed(UpstreamFailure::Error);
                }
                return Upstream::bad_gateway(why);
            }
            Err(_) => {
                if let Some(m) = &self.metrics {
                    m.upstream_failed(UpstreamFailure::Timeout);
                }
                return Upstream::bad_gateway(format!("no answer in {} s", self.timeout.as_secs()));
            }
        };
        if res.status() != StatusCode::SWITCHING_PROTOCOLS {
            if accept.is_some() && res.status().is_success() {
                // To an extended CONNECT a success means the tunnel is open: it is not.
                return Upstream::bad_gateway(format!(
                    "the site answered the WebSocket opening with {}, not 101",
                    res.status()
                ));
            }
            // Refused or ignored by the upstream: its answer, as any other.
            let (mut parts, body) = res.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            return Response::from_parts(parts, Either::Right(Either::Right(Either::Left(body))));
        }
        if let Some(accept) = &accept
            && res.headers().get(SEC_WEBSOCKET_ACCEPT).map(HeaderValue::as_bytes) != Some(accept.as_slice())
        {
            return Upstream::bad_gateway("the site's Sec-WebSocket-Accept does not answer the key".into());
        }
        let upstream = hyper::upgrade::on(&mut res);
        let (mut parts, _) = res.into_parts();
        match opening {
            Opening::Upgrade(_) => keep_only_upgrade(&mut parts.headers),
            Opening::ExtendedConnect => {
                // RFC 8441 §5: `200`, no key, no accept, no upgrade headers.
                strip_hop_by_hop(&mut parts.headers);
                parts.headers.remove(SEC_WEBSOCKET_ACCEPT);
                parts.status = StatusCode::OK;
                parts.version = http::Version::HTTP_2;
            }
        }
        let (idle, cut) = (self.websocket_idle, self.cut.clone());
        let open = self.metrics.as_ref().map(|m| m.websocket());
        self.tunnels.spawn(async move {
            let (_slot, _busy) = (slot, busy);
            let (client, upstream) = match tokio::try_join!(client, upstream) {
                Ok(both) => both,
                Err(e) => {
                    tracing::debug!(error = %e, "WebSocket upgrade failed");
                    return;
                }
            };
            let tally = Tally::default();
            tokio::select! {
                r = copy_until_idle(TokioIo::new(client), TokioIo::new(upstream), idle, &tally) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "WebSocket closed with an error");
                    }
                }
                () = cut.cancelled() => {}
            }
            drop(open);
        });
        Response::from_parts(parts, Either::Right(Either::Left(Full::new(Bytes::new()))))
    }
}
