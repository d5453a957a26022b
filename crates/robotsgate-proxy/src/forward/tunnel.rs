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
use hyper_util::rt::TokioIo;
use robotsgate::net::PoolRequestBody as ClientBody;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use super::errors::connect_refusal;
use super::{Forwarder, ProxyBody, boxed};
use crate::prefixed::Prefixed;
use crate::server_name::{HelloCheck, Tunnel};
use crate::slot::Slot;
use robotsgate::layer::Tally;
use robotsgate::net::ConnectError;
use robotsgate::origin::{Origin, Scheme};
use robotsgate::{Refusal, RefusalKind};

/// A tunnel whose client side was answered `200` already and whose first bytes were read
/// (to tell TLS from HTTP), and whose upstream connection is open: what a `CONNECT` request
/// carries in its extensions when the listener decides it after the `200`. The forwarder
/// takes it out and copies between the two instead of connecting and upgrading.
#[derive(Clone)]
pub(crate) struct PreConnected(Arc<std::sync::Mutex<Option<(ClientSide, TcpStream)>>>);

/// The client's side of a tunnel: its upgraded connection, the bytes read ahead first,
/// and what it sends next held until judged when its server spoke first
/// ([`Held`](crate::held::Held)).
pub(crate) type ClientSide = crate::held::Held<TokioIo<hyper::upgrade::Upgraded>>;

impl PreConnected {
    /// The client's side and the open upstream connection.
    pub(crate) fn new(client: ClientSide, upstream: TcpStream) -> PreConnected {
        PreConnected(Arc::new(std::sync::Mutex::new(Some((client, upstream)))))
    }

    pub(crate) fn take(&self) -> Option<(ClientSide, TcpStream)> {
        self.0.lock().ok()?.take()
    }
}

impl Forwarder {
    /// Opens a TCP connection to the `CONNECT` target: the listener connects before it
    /// answers `200` when it decides the tunnel later.
    pub(crate) async fn connect_tunnel(&self, origin: &Origin) -> Result<TcpStream, ConnectError> {
        self.inner.connector.connect_tcp(origin).await.inspect_err(|e| self.upstream_failed(e.class()))
    }

    /// `CONNECT host:port`: connect first (so failures can be answered), then say 200 and
    /// copy bytes both ways; or, for a [`PreConnected`] tunnel, copy at once.
    pub(super) async fn tunnel(self, mut req: Request<ClientBody>) -> Response<ProxyBody> {
        let pre = req.extensions_mut().remove::<PreConnected>().and_then(|p| p.take());
        let check = req.extensions_mut().remove::<HelloCheck>();
        let slot = Slot::take(&mut req);
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
        let (client, upstream) = match pre {
            Some((client, upstream)) => (Some(client), upstream),
            None => match self.connect_tunnel(&origin).await {
                Ok(s) => (None, s),
                Err(e) => return boxed(connect_refusal(&e).into_response(false)),
            },
        };
        let idle = self.inner.tunnel_idle_timeout;
        let shutdown = self.inner.shutdown.clone();
        // A sniffed tunnel brings its own, which the judge of its first bytes holds too.
        let tally = req.extensions_mut().remove::<Tally>().unwrap_or_default();
        let mut res = Response::new(Full::new(Bytes::new()).map_err(|never| match never {}).boxed());
        res.headers_mut().insert(header::VIA, self.inner.via.clone());
        res.extensions_mut().insert(tally.clone());
        self.inner.tunnels.spawn(async move {
            // The client connection's place, kept as long as the tunnel.
            let _slot = slot;
            let client = match client {
                Some(c) => c,
                None => {
                    let target = req.uri().to_string();
                    let mut io = match hyper::upgrade::on(req).await {
                        Ok(u) => TokioIo::new(u),
                        Err(e) => {
                            tracing::debug!(error = %e, "CONNECT upgrade failed");
                            return;
                        }
                    };
                    // A TLS client must ask for the host checked (crate::server_name).
                    let prefix = match &check {
                        Some(check) => {
                            let host = origin.host().to_string();
                            let tunnel = Tunnel {
                                host: &host,
                                target: &target,
                                transport: robotsgate::layer::Transport::Connect,
                                tally: Some(&tally),
                            };
                            match check.check(&mut io, Vec::new(), tunnel, idle).await {
                                Ok(first) => Bytes::from(first),
                                Err(()) => return,
                            }
                        }
                        None => Bytes::new(),
                    };
                    crate::held::Held::open(Prefixed { prefix, inner: io })
                }
            };
            tokio::select! {
                r = copy_until_idle(client, upstream, idle, &tally) => {
                    if let Err(e) = r {
                        tracing::debug!(error = %e, "tunnel closed with an error");
                    }
                }
                _ = shutdown.cancelled() => {}
            }
            tally.close();
        });
        res
    }
}

/// Copies both ways between a client and an origin until either side closes or nothing
/// moves for `idle`, counting the bytes each way in `tally`.
pub(crate) async fn copy_until_idle<A, B>(
    client: A,
    origin: B,
    idle: Duration,
    tally: &Tally,
) -> io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let start = tokio::time::Instant::now();
    let last = Arc::new(AtomicU64::new(0));
    let mut a = Active { io: client, start, last: last.clone(), tally: tally.clone(), from_client: true };
    let mut b = Active { io: origin, start, last: last.clone(), tally: tally.clone(), from_client: false };
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

/// A stream that stamps `last` (milliseconds since `start`) whenever bytes arrive, and
/// counts them in `tally` as coming from the client or going to it.
struct Active<T> {
    io: T,
    start: tokio::time::Instant,
    last: Arc<AtomicU64>,
    tally: Tally,
    from_client: bool,
}

impl<T: AsyncRead + Unpin> AsyncRead for Active<T> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let res = Pin::new(&mut self.io).poll_read(cx, buf);
        let read = (buf.filled().len() - before) as u64;
        if read > 0 {
            if self.from_client {
                self.tally.from_client(read);
            } else {
                self.tally.to_client(read);
            }
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
