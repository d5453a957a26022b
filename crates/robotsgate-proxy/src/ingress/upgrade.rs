//! WebSocket upgrades through the ingress (RFC 6455 §4, HTTP/1.1). The layer judged the
//! upgrade request like any other (a disallowed bot got its refusal and the upstream never
//! saw it); an allowed one goes to the upstream on a connection of its own with `Upgrade`
//! and `Connection: upgrade` kept, and when the upstream answers `101` the client gets that
//! `101` and bytes flow both ways until either side closes, nothing moves for
//! `ingress.websocket_idle_timeout`, or shutdown's grace has passed. Any other answer is
//! forwarded as usual.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response, StatusCode};
use http_body_util::{Either, Empty};
use hyper::upgrade::OnUpgrade;
use hyper_util::rt::TokioIo;
use robotsgate::layer::Tally;
use robotsgate::origin::Origin;

use super::{Upstream, UpstreamBody, UpstreamFailure};
use crate::forward::{copy_until_idle, strip_hop_by_hop};

impl Upstream {
    /// Sends the upgrade request `parts` (its proxy headers set, in origin form) to the
    /// upstream and, on `101`, joins `client` (the client's side of the upgrade) to the
    /// upstream's connection.
    pub(super) async fn upgrade(
        &self,
        mut parts: http::request::Parts,
        upgrade: HeaderValue,
        client: OnUpgrade,
    ) -> Response<UpstreamBody> {
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
        parts.headers.insert(header::UPGRADE, upgrade);
        parts.headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        if let Ok(host) = HeaderValue::from_str(self.authority.as_str()) {
            parts.headers.insert(header::HOST, host);
        }
        parts.uri = match parts.uri.path_and_query() {
            Some(pq) => pq.as_str().parse().unwrap_or_else(|_| http::Uri::from_static("/")),
            None => http::Uri::from_static("/"),
        };
        parts.extensions = http::Extensions::new();
        let req = Request::from_parts(parts, Empty::<Bytes>::new());
        // A connection of its own, HTTP/1.1 (upgrades do not exist in HTTP/2), never pooled:
        // after a 101 it belongs to the WebSocket.
        let connector = self.pool.connector().http1_only();
        let exchange = async {
            let stream = connector.connect(&origin).await.map_err(|e| e.to_string())?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                .await
                .map_err(|e| e.to_string())?;
            tokio::spawn(async move {
                if let Err(e) = conn.with_upgrades().await {
                    tracing::debug!(error = %e, "upstream upgrade connection ended with an error");
                }
            });
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
            // Refused or ignored by the upstream: its answer, as any other.
            let (mut parts, body) = res.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            return Response::from_parts(parts, Either::Right(Either::Right(body)));
        }
        let upstream = hyper::upgrade::on(&mut res);
        let (mut parts, _) = res.into_parts();
        let upgrade = parts.headers.get(header::UPGRADE).cloned();
        strip_hop_by_hop(&mut parts.headers);
        if let Some(upgrade) = upgrade {
            parts.headers.insert(header::UPGRADE, upgrade);
        }
        parts.headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
        let (idle, cut) = (self.websocket_idle, self.cut.clone());
        let open = self.metrics.as_ref().map(|m| m.websocket());
        self.tunnels.spawn(async move {
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
        Response::from_parts(parts, Either::Right(Either::Left(http_body_util::Full::new(Bytes::new()))))
    }
}
