//! The admin listener: `GET /healthz` (the process runs), `GET /readyz` (the proxy
//! accepts connections) and `GET /metrics` (Prometheus text format). Off unless
//! configured; keep it on loopback or a private network.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::metrics::Metrics;

/// Connections the admin listener serves at once: health checks and a metrics scraper
/// need a few. A connection past them closes the oldest one (gracefully: a response being
/// written is finished), so that clients holding connections open cannot keep a health
/// check out.
pub const MAX_CONNECTIONS: usize = 64;

/// The connections being served, oldest first: each one's number and its stop.
#[derive(Default)]
struct Open {
    next: u64,
    conns: std::collections::VecDeque<(u64, CancellationToken)>,
}

impl Open {
    /// Takes a place for a new connection, closing the oldest when all are taken.
    fn admit(&mut self) -> (u64, CancellationToken) {
        if self.conns.len() >= MAX_CONNECTIONS
            && let Some((_, oldest)) = self.conns.pop_front()
        {
            oldest.cancel();
        }
        let (id, stop) = (self.next, CancellationToken::new());
        self.next += 1;
        self.conns.push_back((id, stop.clone()));
        (id, stop)
    }

    /// Gives back the place of connection `id` (if it still has one).
    fn leave(&mut self, id: u64) {
        self.conns.retain(|(c, _)| *c != id);
    }
}

/// Whether the proxy is accepting connections (for `/readyz`).
#[derive(Debug, Clone, Default)]
pub struct Readiness(Arc<AtomicBool>);

impl Readiness {
    /// Marks the proxy ready or not.
    pub fn set(&self, ready: bool) {
        self.0.store(ready, Ordering::Release);
    }

    /// Whether it is ready.
    pub fn get(&self) -> bool {
        self.0.load(Ordering::Acquire)
    }
}

/// What `/metrics` serves: the forward proxy's [`Metrics`], or the ingress's.
pub trait MetricsText: Send + Sync + 'static {
    /// The Prometheus text format.
    fn render(&self) -> String;
}

impl MetricsText for Metrics {
    fn render(&self) -> String {
        Metrics::render(self)
    }
}

/// A bound admin listener.
#[derive(Debug)]
pub struct Admin<M = Metrics> {
    listener: TcpListener,
    metrics: Arc<M>,
    ready: Readiness,
}

impl<M: MetricsText> Admin<M> {
    /// Binds `addr`.
    pub async fn bind(addr: SocketAddr, metrics: Arc<M>, ready: Readiness) -> std::io::Result<Admin<M>> {
        Ok(Admin { listener: TcpListener::bind(addr).await?, metrics, ready })
    }

    /// The metrics it serves.
    pub fn metrics(&self) -> Arc<M> {
        self.metrics.clone()
    }

    /// The readiness it reports.
    pub fn readiness(&self) -> Readiness {
        self.ready.clone()
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is cancelled, at most [`MAX_CONNECTIONS`] connections at once
    /// (the oldest closed for a new one).
    pub async fn run(self, stop: CancellationToken) {
        let open = Arc::new(std::sync::Mutex::new(Open::default()));
        loop {
            let (stream, _) = tokio::select! {
                _ = stop.cancelled() => return,
                a = self.listener.accept() => match a {
                    Ok(a) => a,
                    Err(e) => {
                        crate::accept::failed("admin", &e).await;
                        continue;
                    }
                },
            };
            let (id, closed) = open.lock().unwrap_or_else(|e| e.into_inner()).admit();
            let (metrics, ready, open) = (self.metrics.clone(), self.ready.clone(), open.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let res = route(&req, &*metrics, &ready);
                    async move { Ok::<_, Infallible>(res) }
                });
                let conn = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(std::time::Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), svc);
                tokio::pin!(conn);
                tokio::select! {
                    _ = conn.as_mut() => {}
                    _ = closed.cancelled() => {
                        conn.as_mut().graceful_shutdown();
                        let _ = conn.await;
                    }
                }
                open.lock().unwrap_or_else(|e| e.into_inner()).leave(id);
            });
        }
    }
}

fn route(req: &Request<Incoming>, metrics: &impl MetricsText, ready: &Readiness) -> Response<Full<Bytes>> {
    let text = |status: StatusCode, body: String, ctype: &'static str| {
        let mut res = Response::new(Full::new(Bytes::from(body)));
        *res.status_mut() = status;
        res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static(ctype));
        res
    };
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(StatusCode::METHOD_NOT_ALLOWED, "GET only\n".into(), "text/plain; charset=utf-8");
    }
    match req.uri().path() {
        "/healthz" => text(StatusCode::OK, "ok\n".into(), "text/plain; charset=utf-8"),
        "/readyz" if ready.get() => text(StatusCode::OK, "ready\n".into(), "text/plain; charset=utf-8"),
        "/readyz" => text(StatusCode::SERVICE_UNAVAILABLE, "not ready\n".into(), "text/plain; charset=utf-8"),
        "/metrics" => text(
            StatusCode::OK,
            metrics.render(),
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "try /healthz, /readyz or /metrics\n".into(),
            "text/plain; charset=utf-8",
        ),
    }
}
