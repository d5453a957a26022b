//! Shared helpers for the fetch and policy integration tests: a scripted hyper origin on
//! `127.0.0.1:0`, a `Fetcher` built through the public API with static DNS overrides, body
//! encoders and bounded waits.
//!
//! Every test target includes this module and uses a different part of it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::{StreamExt, stream};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use robotsgate::fetch::{FetchConfig, Fetcher};
use robotsgate::net::{Connector, DnsConfig, Guard, Resolver, TlsConfig, client_config};
use robotsgate::origin::Origin;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, watch};
use tokio::task::JoinHandle;

/// Longest a single network step of a test may take before the test fails (real time).
pub const BOUND: Duration = Duration::from_secs(10);

/// Awaits `fut`, failing the test instead of hanging when it takes longer than [`BOUND`].
pub async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(BOUND, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no result within {BOUND:?}"),
    }
}

/// Yields to the runtime until `cond` holds (bounded by [`BOUND`] real time).
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    bounded(what, async {
        while !cond() {
            tokio::task::yield_now().await;
        }
    })
    .await
}

// ---------------------------------------------------------------------------------------
// The scripted origin
// ---------------------------------------------------------------------------------------

/// A gate replies can wait behind until the test opens it.
#[derive(Clone, Debug)]
pub struct Gate(Arc<watch::Sender<bool>>);

impl Default for Gate {
    fn default() -> Self {
        Gate(Arc::new(watch::channel(false).0))
    }
}

impl Gate {
    /// A closed gate.
    pub fn new() -> Gate {
        Gate::default()
    }

    /// Lets every waiting and future reply through.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// What happens before the response headers are sent.
#[derive(Clone, Debug)]
pub enum Wait {
    /// Answer at once.
    Now,
    /// Never answer (the connection stays open).
    Forever,
    /// Answer after this long (tokio time).
    For(Duration),
    /// Answer when the gate opens.
    Gate(Gate),
}

/// How the body is sent.
#[derive(Clone, Debug)]
pub enum BodyPlan {
    /// All of it.
    Full,
    /// `Content-Length` of the whole body, the first N bytes, then nothing ever again.
    StallAfter(usize),
    /// `Content-Length` of the whole body, the first N bytes, then a TCP reset.
    ResetAfter(usize),
    /// The whole body, `chunk` bytes at a time with a pause (tokio time) before each.
    Drip {
        /// Bytes per write.
        chunk: usize,
        /// Pause before each write.
        every: Duration,
    },
}

/// One scripted answer.
#[derive(Clone, Debug)]
pub struct Reply {
    /// Reset the connection instead of answering (after reading the request).
    pub reset: bool,
    /// The status code.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    /// The body (already encoded when a `Content-Encoding` is set).
    pub body: Bytes,
    /// What happens before the headers.
    pub wait: Wait,
    /// How the body goes out.
    pub plan: BodyPlan,
}

impl Reply {
    /// A status with an empty body.
    pub fn status(status: u16) -> Reply {
        Reply {
            reset: false,
            status,
            headers: Vec::new(),
            body: Bytes::new(),
            wait: Wait::Now,
            plan: BodyPlan::Full,
        }
    }

    /// `200 OK`, `text/plain`, with `body`.
    pub fn ok(body: impl Into<Bytes>) -> Reply {
        Reply::status(200).header("content-type", "text/plain").body(body)
    }

    /// A redirect to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::status(status).header("location", location)
    }

    /// Read the request, then reset the connection without answering.
    pub fn reset() -> Reply {
        Reply { reset: true, ..Reply::status(200) }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Reply {
        self.body = body.into();
        self
    }

    /// Never sends the headers.
    pub fn wait_forever(mut self) -> Reply {
        self.wait = Wait::Forever;
        self
    }

    /// Sends the headers after `d`.
    pub fn wait_for(mut self, d: Duration) -> Reply {
        self.wait = Wait::For(d);
        self
    }

    /// Sends the headers when `gate` opens.
    pub fn wait_gate(mut self, gate: &Gate) -> Reply {
        self.wait = Wait::Gate(gate.clone());
        self
    }

    /// Sends `n` bytes of the body, then stalls forever.
    pub fn stall_after(mut self, n: usize) -> Reply {
        self.plan = BodyPlan::StallAfter(n);
        self
    }

    /// Sends the body `chunk` bytes at a time, pausing `every` before each.
    pub fn drip(mut self, chunk: usize, every: Duration) -> Reply {
        self.plan = BodyPlan::Drip { chunk, every };
        self
    }

    /// Sends `n` bytes of the body, then resets the connection.
    pub fn reset_after(mut self, n: usize) -> Reply {
        self.plan = BodyPlan::ResetAfter(n);
        self
    }
}

/// A request as the origin saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// The path.
    pub path: String,
    /// The headers.
    pub headers: HeaderMap,
}

#[derive(Default)]
struct Shared {
    routes: Mutex<HashMap<String, Reply>>,
    hits: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    total: AtomicUsize,
    connections: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
    notify: Notify,
}

impl Shared {
    fn counter(&self, path: &str) -> Arc<AtomicUsize> {
        self.hits.lock().unwrap().entry(path.to_owned()).or_default().clone()
    }
}

/// An HTTP/1.1 origin on `127.0.0.1:0` whose answer per path is scripted by the test
/// (unknown paths get `404`), counting requests per path.
pub struct TestServer {
    addr: SocketAddr,
    shared: Arc<Shared>,
    accept: JoinHandle<()>,
}

impl Drop for TestServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

type Body = BoxBody<Bytes, io::Error>;

impl TestServer {
    /// Starts an origin with no routes.
    pub async fn start() -> TestServer {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let shared = Arc::new(Shared::default());
        let accept = tokio::spawn(accept_loop(listener, shared.clone()));
        TestServer { addr, shared, accept }
    }

    /// Starts an origin with these routes.
    pub async fn with<'a>(routes: impl IntoIterator<Item = (&'a str, Reply)>) -> TestServer {
        let server = TestServer::start().await;
        for (path, reply) in routes {
            server.route(path, reply);
        }
        server
    }

    /// Starts an origin serving `robots` at `/robots.txt`.
    pub async fn robots(robots: &str) -> TestServer {
        TestServer::with([("/robots.txt", Reply::ok(robots.to_owned()))]).await
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://{host}:{port}`, the origin of this server under the name `host`.
    pub fn origin(&self, host: &str) -> Origin {
        Origin::parse(&self.base(host)).unwrap()
    }

    /// `http://{host}:{port}` as a string.
    pub fn base(&self, host: &str) -> String {
        format!("http://{host}:{}", self.port())
    }

    /// Sets (or replaces) the answer for `path`.
    pub fn route(&self, path: &str, reply: Reply) {
        self.shared.routes.lock().unwrap().insert(path.to_owned(), reply);
    }

    /// Requests seen for `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.shared.counter(path).load(Ordering::SeqCst)
    }

    /// Requests seen for any path.
    pub fn total_hits(&self) -> usize {
        self.shared.total.load(Ordering::SeqCst)
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.shared.connections.load(Ordering::SeqCst)
    }

    /// Every request seen, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }

    /// Waits (bounded, real time) until `path` has been requested at least `n` times.
    pub async fn wait_hits(&self, path: &str, n: usize) {
        let counter = self.shared.counter(path);
        bounded(&format!("waiting for {n} requests of {path}"), async {
            loop {
                let notified = self.shared.notify.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                if counter.load(Ordering::SeqCst) >= n {
                    return;
                }
                notified.await;
            }
        })
        .await
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        shared.connections.fetch_add(1, Ordering::SeqCst);
        let reset = Arc::new(AtomicBool::new(false));
        let io = TokioIo::new(ServerIo { tcp, reset: reset.clone() });
        let shared = shared.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(shared.clone(), reset.clone(), req));
            // Errors are the scripted resets and clients going away: nothing to report.
            let _ = http1::Builder::new().serve_connection(io, service).await;
        });
    }
}

async fn answer(
    shared: Arc<Shared>,
    reset: Arc<AtomicBool>,
    req: Request<Incoming>,
) -> Result<Response<Body>, io::Error> {
    let path = req.uri().path().to_owned();
    shared.seen.lock().unwrap().push(Seen { path: path.clone(), headers: req.headers().clone() });
    shared.counter(&path).fetch_add(1, Ordering::SeqCst);
    shared.total.fetch_add(1, Ordering::SeqCst);
    shared.notify.notify_waiters();
    let reply = shared.routes.lock().unwrap().get(&path).cloned().unwrap_or_else(|| Reply::status(404));
    if reply.reset {
        reset.store(true, Ordering::SeqCst);
        return Err(io::Error::new(io::ErrorKind::ConnectionReset, "scripted reset"));
    }
    match &reply.wait {
        Wait::Now => {}
        Wait::Forever => std::future::pending::<()>().await,
        Wait::For(d) => tokio::time::sleep(*d).await,
        Wait::Gate(g) => g.wait().await,
    }
    let mut builder = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (k, v) in &reply.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let body = match reply.plan {
        BodyPlan::Full => Full::new(reply.body).map_err(|never: Infallible| match never {}).boxed(),
        BodyPlan::StallAfter(n) => {
            builder = builder.header("content-length", reply.body.len());
            let first = stream::iter([Ok(Frame::data(reply.body.slice(..n)))]);
            BodyExt::boxed(StreamBody::new(first.chain(stream::pending())))
        }
        BodyPlan::ResetAfter(n) => {
            builder = builder.header("content-length", reply.body.len());
            let first = stream::iter([Ok(Frame::data(reply.body.slice(..n)))]);
            let then = stream::once(async move {
                reset.store(true, Ordering::SeqCst);
                Err(io::Error::new(io::ErrorKind::ConnectionReset, "scripted reset"))
            });
            BodyExt::boxed(StreamBody::new(first.chain(then)))
        }
        BodyPlan::Drip { chunk, every } => {
            builder = builder.header("content-length", reply.body.len());
            let drops = stream::unfold(reply.body, move |rest| async move {
                if rest.is_empty() {
                    return None;
                }
                tokio::time::sleep(every).await;
                let n = chunk.min(rest.len());
                Some((Ok(Frame::data(rest.slice(..n))), rest.slice(n..)))
            });
            BodyExt::boxed(StreamBody::new(drops))
        }
    };
    Ok(builder.body(body).unwrap())
}

/// The server side of a connection: when the script asked for a reset, closing it sends
/// a TCP RST (`SO_LINGER` 0) instead of a FIN.
struct ServerIo {
    tcp: TcpStream,
    reset: Arc<AtomicBool>,
}

impl Drop for ServerIo {
    fn drop(&mut self) {
        if self.reset.load(Ordering::SeqCst) {
            let _ = self.tcp.set_zero_linger();
        }
    }
}

impl AsyncRead for ServerIo {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_read(cx, buf)
    }
}

impl AsyncWrite for ServerIo {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.tcp).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.tcp).poll_shutdown(cx)
    }
}

/// A TCP origin that answers every connection with fixed bytes (after reading the request
/// head) and then closes it: for answers hyper's server will not produce (invalid HTTP,
/// odd status codes, a body shorter than its `Content-Length`).
pub struct RawServer {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    accept: JoinHandle<()>,
}

impl Drop for RawServer {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl RawServer {
    /// Starts one answering `answer`.
    pub async fn start(answer: &[u8]) -> RawServer {
        use tokio::io::AsyncWriteExt;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().unwrap();
        let connections = Arc::new(AtomicUsize::new(0));
        let answer = Bytes::copy_from_slice(answer);
        let count = connections.clone();
        let accept = tokio::spawn(async move {
            loop {
                let Ok((mut tcp, _)) = listener.accept().await else { continue };
                count.fetch_add(1, Ordering::SeqCst);
                let answer = answer.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match tcp.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let _ = tcp.write_all(&answer).await;
                    let _ = tcp.shutdown().await;
                });
            }
        });
        RawServer { addr, connections, accept }
    }

    /// `http://{host}:{port}`.
    pub fn origin(&self, host: &str) -> Origin {
        Origin::parse(&format!("http://{host}:{}", self.addr.port())).unwrap()
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}

// ---------------------------------------------------------------------------------------
// The fetcher under test, built through the public API
// ---------------------------------------------------------------------------------------

/// Host names the static DNS overrides map to 127.0.0.1.
pub fn test_hosts() -> Vec<String> {
    let mut hosts: Vec<String> =
        ["a.test", "b.test", "c.test", "example.test", "www.example.test", "shop.example.test"]
            .map(String::from)
            .to_vec();
    hosts.extend((0..32).map(|i| format!("o{i}.test")));
    hosts
}

/// A resolver whose overrides map [`test_hosts`] to 127.0.0.1 (other names go to DNS).
pub fn resolver() -> Resolver {
    let overrides = test_hosts().into_iter().map(|h| (h, vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])).collect();
    Resolver::new(&DnsConfig { overrides, ..DnsConfig::default() })
}

/// The default guard with loopback opened (the test origins live there).
pub fn loopback_guard() -> Guard {
    Guard::default().allow("127.0.0.0/8".parse().unwrap())
}

/// A connector through [`resolver`] and `guard`.
pub fn connector(guard: Guard, connect_timeout: Duration) -> Connector {
    let tls = client_config(&TlsConfig::default(), &[b"http/1.1"]).expect("TLS client config");
    Connector::new(resolver(), Arc::new(guard), tls, connect_timeout)
}

/// The User-Agent the tests' fetchers send.
pub const USER_AGENT: &str = "robotsgate-test ExampleBot/1.0";

/// A fetch configuration with test-sized timeouts (5 s each) and the spec's limits.
pub fn fetch_config() -> FetchConfig {
    FetchConfig {
        user_agent: USER_AGENT.into(),
        header_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        ..FetchConfig::default()
    }
}

/// A fetcher that may connect to loopback, with `config`.
pub fn fetcher_with(config: FetchConfig) -> Fetcher {
    Fetcher::new(connector(loopback_guard(), Duration::from_secs(5)), config)
}

/// A fetcher that may connect to loopback, with [`fetch_config`].
pub fn fetcher() -> Fetcher {
    fetcher_with(fetch_config())
}

// ---------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------

/// `data` encoded with `encoding` (`gzip`, `deflate` (zlib), `br`).
pub async fn encode(encoding: &str, data: &[u8]) -> Vec<u8> {
    use async_compression::Level;
    use async_compression::tokio::bufread::{BrotliEncoder, GzipEncoder, ZlibEncoder};
    let mut out = Vec::new();
    let read = match encoding {
        "gzip" => GzipEncoder::with_quality(data, Level::Fastest).read_to_end(&mut out).await,
        "deflate" => ZlibEncoder::with_quality(data, Level::Fastest).read_to_end(&mut out).await,
        "br" => BrotliEncoder::with_quality(data, Level::Fastest).read_to_end(&mut out).await,
        other => panic!("no encoder for {other}"),
    };
    read.expect("encoding a test body");
    out
}

/// A robots.txt of exactly `len` bytes: each `(offset, text)` placed at its offset (in
/// increasing order), comment lines in between.
pub fn sized_body(len: usize, parts: &[(usize, &str)]) -> Vec<u8> {
    let mut body = Vec::with_capacity(len);
    for (at, text) in parts {
        assert!(body.len() <= *at, "parts overlap at {at}");
        fill_comments(&mut body, *at);
        body.extend_from_slice(text.as_bytes());
    }
    assert!(body.len() <= len);
    fill_comments(&mut body, len);
    assert_eq!(body.len(), len);
    body
}

/// Appends `# xxx…\n` lines up to `len` bytes (the last byte is a newline).
fn fill_comments(body: &mut Vec<u8>, len: usize) {
    while body.len() < len {
        let room = len - body.len();
        let line = room.min(100);
        if line == 1 {
            body.push(b'\n');
        } else {
            body.push(b'#');
            body.extend(std::iter::repeat_n(b'x', line - 2));
            body.push(b'\n');
        }
    }
}
