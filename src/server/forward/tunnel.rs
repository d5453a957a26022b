//! `CONNECT` tunnels: connect first, answer `200`, then copy bytes both ways until either
//! side closes or the tunnel is idle.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http::header;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};

use super::errors::connect_refusal;
use super::{Forwarder, ProxyBody, boxed};
use crate::origin::{Origin, Scheme};
use crate::refusal::{Refusal, RefusalKind};

impl Forwarder {
    /// `CONNECT host:port`: connect first (so failures can be answered), then say 200 and
    /// copy bytes both ways.
    pub(super) async fn tunnel(self, req: Request<Incoming>) -> Response<ProxyBody> {
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
