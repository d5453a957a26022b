//! HTTP/1.1 upgrades to WebSocket (RFC 6455 §4): the request was checked by the layer like
//! any other; here it goes to the origin on a connection of its own with `Upgrade` and
//! `Connection: upgrade` kept, and when the origin answers `101` the client gets that `101`
//! and bytes flow both ways until either side closes or nothing moves for the tunnel idle
//! timeout. Any other answer is forwarded as usual.
//!
//! Only `websocket` is let through: other upgrades (`h2c`, `TLS/1.0`) would turn the
//! connection into one whose requests robotsgate cannot see, so their `Upgrade` header is
//! removed as the hop-by-hop header it is and the request goes on as a plain one.

use http::header::{self, HeaderMap, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use robotsgate::net::PoolRequestBody as ClientBody;

use super::errors::connect_refusal;
use super::headers::{append_via, set_host, strip_hop_by_hop};
use super::sticky::origin_form;
use super::tunnel::copy_until_idle;
use super::{Forwarder, ProxyBody, boxed};
use crate::slot::Slot;
use robotsgate::layer::Tally;
use robotsgate::origin::Origin;
use robotsgate::{Refusal, RefusalKind};

/// Whether a request asks for a WebSocket upgrade: `GET` over HTTP/1.1 with `websocket`
/// in `Upgrade` and `upgrade` among the `Connection` tokens.
pub(crate) fn wants_websocket<B>(req: &Request<B>) -> bool {
    req.method() == http::Method::GET
        && req.version() == http::Version::HTTP_11
        && has_token(req.headers(), header::UPGRADE, "websocket")
        && has_token(req.headers(), header::CONNECTION, "upgrade")
}

/// Removes the hop-by-hop headers of an upgrade's request or `101` but its `Upgrade`, and
/// says `Connection: upgrade`.
pub(crate) fn keep_only_upgrade(headers: &mut HeaderMap) {
    let upgrade = headers.get(header::UPGRADE).cloned();
    strip_hop_by_hop(headers);
    if let Some(upgrade) = upgrade {
        headers.insert(header::UPGRADE, upgrade);
    }
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
}

/// An HTTP/1.1 client connection over `stream` that can be upgraded (its task spawned),
/// for one upgrade request: never pooled, after a `101` it belongs to the tunnel.
pub(crate) async fn upgradable_sender<T, B>(
    stream: T,
) -> Result<hyper::client::conn::http1::SendRequest<B>, hyper::Error>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static,
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        if let Err(e) = conn.with_upgrades().await {
            tracing::debug!(error = %e, "upstream upgrade connection ended with an error");
        }
    });
    Ok(sender)
}

/// Whether the comma-separated header `name` lists `token` (case-insensitively).
fn has_token(headers: &HeaderMap, name: header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

impl Forwarder {
    /// Forwards a WebSocket upgrade request ([`wants_websocket`]) and, on `101`, joins the
    /// client's connection to the origin's.
    pub(super) async fn upgrade(self, mut req: Request<ClientBody>) -> Response<ProxyBody> {
        let Some(client_upgrade) = req.extensions_mut().remove::<OnUpgrade>() else {
            let why = "this connection cannot be upgraded";
            return boxed(Refusal::new(RefusalKind::BadRequest, why).into_response(false));
        };
        let origin = match Origin::from_uri(req.uri()) {
            Ok(o) => o,
            Err(e) => {
                return boxed(Refusal::new(RefusalKind::BadRequest, e.to_string()).into_response(false));
            }
        };
        // Inside a tunnel the request carries the tunnel's place; else it is the client
        // connection's.
        let slot = Slot::take(&mut req).or_else(|| self.sticky.as_ref().and_then(|s| s.place()));
        let (mut parts, body) = req.into_parts();
        keep_only_upgrade(&mut parts.headers);
        append_via(&mut parts.headers, &self.inner.via);
        set_host(&mut parts.headers, &parts.uri);
        parts.uri = origin_form(&parts.uri);
        parts.extensions = http::Extensions::new();
        let upstream_req = Request::from_parts(parts, body);

        let timeout = self.inner.upstream_timeout;
        let exchange = async {
            // A connection of its own (HTTP/1.1: upgrades do not exist in HTTP/2), never
            // pooled: after a 101 it belongs to the tunnel.
            let stream = self.inner.sticky_connector.connect(&origin).await.map_err(|e| {
                self.upstream_failed(e.class());
                connect_refusal(&e)
            })?;
            let mut sender = upgradable_sender(stream).await.map_err(|e| {
                self.upstream_failed("protocol");
                Refusal::new(RefusalKind::UpstreamError, format!("the origin failed: {e}"))
            })?;
            sender.send_request(upstream_req).await.map_err(|e| {
                self.upstream_failed("protocol");
                Refusal::upstream_failed(&e)
            })
        };
        let mut res = match tokio::time::timeout(timeout, exchange).await {
            Ok(Ok(res)) => res,
            Ok(Err(refusal)) => return boxed(refusal.into_response(false)),
            Err(_) => {
                self.upstream_failed("timeout");
                let why = format!("the origin did not answer within {timeout:?}");
                return boxed(Refusal::new(RefusalKind::UpstreamTimeout, why).into_response(false));
            }
        };
        if res.status() != StatusCode::SWITCHING_PROTOCOLS {
            // Refused or ignored by the origin: its answer, as any other.
            let (mut parts, body) = res.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            append_via(&mut parts.headers, &self.inner.via);
            return Response::from_parts(parts, body.map_err(Into::into).boxed());
        }
        let origin_upgrade = hyper::upgrade::on(&mut res);
        let (mut parts, _) = res.into_parts();
        keep_only_upgrade(&mut parts.headers);
        append_via(&mut parts.headers, &self.inner.via);
        let tally = Tally::default();
        parts.extensions.insert(tally.clone());
        let (idle, shutdown) = (self.inner.tunnel_idle_timeout, self.inner.shutdown.clone());
        self.inner.tunnels.spawn(async move {
            // The client connection's place, kept as long as the WebSocket.
            let _slot = slot;
            let (client, origin) = match tokio::try_join!(client_upgrade, origin_upgrade) {
                Ok(both) => both,
                Err(e) => {
                    tracing::debug!(error = %e, "WebSocket upgrade failed");
                    return;
                }
            };
            tokio::select! {
                r = copy_until_idle(TokioIo::new(client), TokioIo::new(origin), idle, &tally) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "WebSocket tunnel closed with an error");
                    }
                }
                _ = shutdown.cancelled() => {}
            }
            tally.close();
        });
        Response::from_parts(parts, Empty::new().map_err(|never| match never {}).boxed())
    }
}
