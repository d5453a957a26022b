//! The scripted origin: an HTTP server on loopback (plain, TLS with HTTP/1.1 or HTTP/2 by
//! ALPN, IPv4 or IPv6, or raw fixed bytes) whose answer per path is a [`Reply`], recording
//! every request and counting connections.

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use futures_util::StreamExt;
use futures_util::stream::{self, BoxStream};
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::origin::Origin;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Barrier, Notify, watch};
use tokio::task::JoinHandle;

use super::body::{Checksum, PatternChunks};
use super::wait::{bounded, within};

/// A gate that stays closed until opened, then lets every waiter through.
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

    /// Opens it, for every waiting and future waiter.
    pub fn open(&self) {
        self.0.send_replace(true);
    }

    /// Waits until it is open (not bounded: wrap it in `bounded`).
    pub async fn wait(&self) {
        let mut rx = self.0.subscribe();
        let _ = rx.wait_for(|open| *open).await;
    }
}

/// What happens before the response headers are sent.
#[derive(Clone, Debug)]
enum Wait {
    Now,
    Forever,
    /// Tokio time.
    For(Duration),
    Gate(Gate),
    /// Until as many requests as the barrier counts wait together (bounded).
    Barrier(Arc<Barrier>),
}

/// What the body is.
#[derive(Clone, Debug)]
enum Content {
    Bytes(Bytes),
    /// `len` bytes of the pattern, generated as they are sent.
    Pattern(u64),
    /// The checksum of the request body; opens the gate once that many bytes came.
    Upload(Option<(u64, Gate)>),
    /// The request headers, one `name: value` line each.
    Echo,
    /// A WebSocket upgrade (`101`), then every message echoed back with `echo: ` before
    /// it; a request without the upgrade gets `200`, `plain GET, no upgrade`.
    WebSocket,
}

impl Content {
    /// Bytes `[from, to)` of a fixed or pattern body, as frames.
    fn frames(&self, from: u64, to: u64) -> Frames {
        let chunks: Box<dyn Iterator<Item = Bytes> + Send> = match self {
            Content::Bytes(b) => Box::new(std::iter::once(b.slice(from as usize..to as usize))),
            Content::Pattern(_) => Box::new(PatternChunks::new(from, to)),
            Content::Upload(_) | Content::Echo | Content::WebSocket => Box::new(std::iter::empty()),
        };
        stream::iter(chunks.filter(|b| !b.is_empty()).map(|b| Ok(Frame::data(b)))).boxed()
    }

    fn len(&self) -> u64 {
        match self {
            Content::Bytes(b) => b.len() as u64,
            Content::Pattern(len) => *len,
            Content::Upload(_) | Content::Echo | Content::WebSocket => 0,
        }
    }
}

/// How a fixed or pattern body goes out (all but `Full` send `Content-Length`).
#[derive(Clone, Debug)]
enum Plan {
    Full,
    /// The first N bytes, then nothing ever again.
    StallAfter(u64),
    /// The first N bytes, then a TCP reset.
    ResetAfter(u64),
    /// The first N bytes, then the rest once the gate opens.
    HoldAfter(u64, Gate),
    /// `chunk` bytes at a time with a pause (tokio time) before each.
    Drip {
        chunk: usize,
        every: Duration,
    },
}

/// One scripted answer, built from a constructor and modifiers.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The status code.
    pub status: u16,
    /// Response headers.
    pub headers: Vec<(String, String)>,
    reset: bool,
    content: Content,
    wait: Wait,
    plan: Plan,
}

impl Reply {
    /// A status with an empty body.
    pub fn status(status: u16) -> Reply {
        Reply {
            status,
            headers: Vec::new(),
            reset: false,
            content: Content::Bytes(Bytes::new()),
            wait: Wait::Now,
            plan: Plan::Full,
        }
    }

    /// `200 OK`, `text/plain`, with `body`.
    pub fn ok(body: impl Into<Bytes>) -> Reply {
        Reply::status(200).header("content-type", "text/plain").body(body)
    }

    /// `200 OK` with `body` of `content_type`.
    pub fn typed(content_type: &str, body: impl Into<Bytes>) -> Reply {
        Reply::status(200).header("content-type", content_type).body(body)
    }

    /// A redirect to `location`.
    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::status(status).header("location", location)
    }

    /// Reads the request, then resets the connection without answering.
    pub fn reset() -> Reply {
        Reply { reset: true, ..Reply::status(200) }
    }

    /// `200`, `len` bytes of the [pattern](super::pattern), generated as they are sent.
    pub fn pattern(len: u64) -> Reply {
        Reply { content: Content::Pattern(len), ..Reply::status(200) }
            .header("content-type", "application/octet-stream")
    }

    /// `200`, `text/plain`: the [`Checksum`] hex of the request body, read as it comes.
    pub fn upload() -> Reply {
        Reply { content: Content::Upload(None), ..Reply::status(200) }.header("content-type", "text/plain")
    }

    /// `200` with the request headers as the body (one `name: value` line each), and hop-by-hop
    /// headers of its own: `Connection: x-origin-secret`, `X-Origin-Secret`, `Keep-Alive`
    /// (and `X-Origin-Kept: yes`).
    pub fn echo() -> Reply {
        Reply { content: Content::Echo, ..Reply::status(200) }
            .header("content-type", "text/plain")
            .header("connection", "x-origin-secret")
            .header("x-origin-secret", "origin-only")
            .header("keep-alive", "timeout=5")
            .header("x-origin-kept", "yes")
    }

    /// A WebSocket endpoint: the upgrade is answered `101` and every text or binary message
    /// is echoed with `echo: ` before it, until the client closes; a plain GET gets `200`
    /// with `plain GET, no upgrade`.
    pub fn websocket() -> Reply {
        Reply { content: Content::WebSocket, ..Reply::status(200) }
    }

    /// Adds a header.
    pub fn header(mut self, name: &str, value: &str) -> Reply {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// Sets the body.
    pub fn body(mut self, body: impl Into<Bytes>) -> Reply {
        self.content = Content::Bytes(body.into());
        self
    }

    /// Never sends the headers.
    pub fn wait_forever(mut self) -> Reply {
        self.wait = Wait::Forever;
        self
    }

    /// Sends the headers after `d` (tokio time).
    pub fn wait_for(mut self, d: Duration) -> Reply {
        self.wait = Wait::For(d);
        self
    }

    /// Sends the headers when `gate` opens.
    pub fn wait_gate(mut self, gate: &Gate) -> Reply {
        self.wait = Wait::Gate(gate.clone());
        self
    }

    /// Sends the headers once as many requests as `barrier` counts are waiting at it.
    pub fn wait_together(mut self, barrier: &Arc<Barrier>) -> Reply {
        self.wait = Wait::Barrier(barrier.clone());
        self
    }

    /// Sends `n` bytes of the body, then stalls forever.
    pub fn stall_after(mut self, n: usize) -> Reply {
        self.plan = Plan::StallAfter(n as u64);
        self
    }

    /// Sends `n` bytes of the body, then resets the connection.
    pub fn reset_after(mut self, n: usize) -> Reply {
        self.plan = Plan::ResetAfter(n as u64);
        self
    }

    /// Sends `n` bytes of the body, then the rest once `gate` opens.
    pub fn hold_after(mut self, n: u64, gate: &Gate) -> Reply {
        self.plan = Plan::HoldAfter(n, gate.clone());
        self
    }

    /// Sends the body `chunk` bytes at a time, pausing `every` before each.
    pub fn drip(mut self, chunk: usize, every: Duration) -> Reply {
        self.plan = Plan::Drip { chunk, every };
        self
    }

    /// For [`Reply::upload`]: opens `gate` once `n` bytes of the request body have come.
    pub fn open_after(mut self, n: u64, gate: &Gate) -> Reply {
        self.content = Content::Upload(Some((n, gate.clone())));
        self
    }
}

/// A request as the origin saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// The request target as it arrived (origin form `/a?b`; absolute form if a proxy sent
    /// it so, or over HTTP/2).
    pub target: String,
    /// Headers.
    pub headers: HeaderMap,
    /// When it arrived (tokio time: virtual in tests with a paused clock).
    pub at: tokio::time::Instant,
    /// The connection it came on: 1 for the origin's first, in the order accepted.
    pub connection: usize,
}

#[derive(Default)]
struct State {
    /// By path (`/a`, or with its query `/a?b`), or by the site a reverse proxy forwarded
    /// and path (`site.example|/a`: for a request whose `X-Forwarded-Host` is that name).
    routes: Mutex<HashMap<String, Reply>>,
    hits: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    total: AtomicUsize,
    connections: AtomicUsize,
    handshakes: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
    arrived: Notify,
    open: Arc<AtomicUsize>,
    ws_messages: AtomicUsize,
    ws_closed: AtomicUsize,
}

impl State {
    fn counter(&self, path: &str) -> Arc<AtomicUsize> {
        self.hits.lock().unwrap().entry(path.to_owned()).or_default().clone()
    }
}

/// How connections are served.
#[derive(Clone)]
enum Serve {
    Http,
    Tls(tokio_rustls::TlsAcceptor),
    /// Read the request head, write these bytes, close.
    Raw(Bytes),
}

/// A scripted origin on loopback: per path a [`Reply`] (unknown paths: `404`, `not found\n`).
pub struct TestOrigin {
    addr: SocketAddr,
    tls: bool,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl TestOrigin {
    /// An HTTP/1.1 origin on `127.0.0.1:0` with these routes.
    pub async fn start<'a>(routes: impl IntoIterator<Item = (&'a str, Reply)>) -> TestOrigin {
        TestOrigin::launch(bind_v4().await, routes, Serve::Http)
    }

    /// An HTTP/1.1 origin on `[::1]:0` with these routes.
    pub async fn start_v6<'a>(routes: impl IntoIterator<Item = (&'a str, Reply)>) -> TestOrigin {
        let listener = TcpListener::bind((Ipv6Addr::LOCALHOST, 0)).await.expect("bind [::1]:0");
        TestOrigin::launch(listener, routes, Serve::Http)
    }

    /// An HTTPS origin on `127.0.0.1:0` with these routes; HTTP/2 when ALPN picks `h2`.
    pub async fn start_tls<'a>(
        routes: impl IntoIterator<Item = (&'a str, Reply)>,
        tls: Arc<rustls::ServerConfig>,
    ) -> TestOrigin {
        TestOrigin::launch(bind_v4().await, routes, Serve::Tls(tls.into()))
    }

    /// An origin on `127.0.0.1:0` that answers every connection with `answer` (after reading
    /// the request head) and closes it: for answers hyper will not produce. Records no
    /// requests; counts connections.
    pub async fn raw(answer: &[u8]) -> TestOrigin {
        TestOrigin::launch(bind_v4().await, [], Serve::Raw(Bytes::copy_from_slice(answer)))
    }

    /// An origin serving `robots` at `/robots.txt`.
    pub async fn robots(robots: &str) -> TestOrigin {
        TestOrigin::start([("/robots.txt", Reply::ok(robots.to_owned()))]).await
    }

    fn launch<'a>(
        listener: TcpListener,
        routes: impl IntoIterator<Item = (&'a str, Reply)>,
        serve: Serve,
    ) -> TestOrigin {
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(State::default());
        state.routes.lock().unwrap().extend(routes.into_iter().map(|(p, r)| (p.to_owned(), r)));
        let tls = matches!(serve, Serve::Tls(_));
        let accept = tokio::spawn(accept_loop(listener, state.clone(), serve));
        TestOrigin { addr, tls, state, accept }
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    fn scheme(&self) -> &'static str {
        if self.tls { "https" } else { "http" }
    }

    /// `http://127.0.0.1:PORT` (`https://` with TLS, `[::1]` on IPv6).
    pub fn base(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    /// `base()` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    /// `127.0.0.1:PORT` (`[::1]:PORT` on IPv6).
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// `http://{host}:PORT` (`https://` with TLS): this origin under the name `host`.
    pub fn base_as(&self, host: &str) -> String {
        format!("{}://{host}:{}", self.scheme(), self.port())
    }

    /// [`TestOrigin::base_as`] as an [`Origin`].
    pub fn origin(&self, host: &str) -> Origin {
        Origin::parse(&self.base_as(host)).unwrap()
    }

    /// Sets (or replaces) the answer for `path`, or for `path?query` (that one asked for
    /// with that exact query; the path's own answer otherwise).
    pub fn route(&self, path: &str, reply: Reply) {
        self.state.routes.lock().unwrap().insert(path.to_owned(), reply);
    }

    /// Requests seen for `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.state.counter(path).load(Ordering::SeqCst)
    }

    /// Requests seen for any path.
    pub fn total_hits(&self) -> usize {
        self.state.total.load(Ordering::SeqCst)
    }

    /// Requests seen per path.
    pub fn all_hits(&self) -> HashMap<String, usize> {
        let hits = self.state.hits.lock().unwrap();
        hits.iter().map(|(p, n)| (p.clone(), n.load(Ordering::SeqCst))).filter(|(_, n)| *n > 0).collect()
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// TCP connections open now (accepted and not yet closed by either side).
    pub fn open_connections(&self) -> usize {
        self.state.open.load(Ordering::SeqCst)
    }

    /// WebSocket messages echoed so far.
    pub fn ws_messages(&self) -> usize {
        self.state.ws_messages.load(Ordering::SeqCst)
    }

    /// WebSocket sessions that ended (closed by the client, or the connection gone).
    pub fn ws_closed(&self) -> usize {
        self.state.ws_closed.load(Ordering::SeqCst)
    }

    /// TLS handshakes completed.
    pub fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    /// Every request seen, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// The requests seen for `path`.
    pub fn seen_for(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.path == path).collect()
    }

    /// When each request for a path starting with `prefix` arrived, in order, with its path.
    pub fn arrivals(&self, prefix: &str) -> Vec<(String, tokio::time::Instant)> {
        self.seen().into_iter().filter(|s| s.path.starts_with(prefix)).map(|s| (s.path, s.at)).collect()
    }

    /// Waits (bounded) until `path` has been requested at least `n` times.
    pub async fn wait_hits(&self, path: &str, n: usize) {
        let counter = self.state.counter(path);
        bounded(&format!("waiting for {n} request(s) of {path}"), async {
            loop {
                let notified = self.state.arrived.notified();
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

/// A port on 127.0.0.1 with nothing listening (bound, noted, closed).
pub fn dead_port() -> u16 {
    let listener = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
    listener.local_addr().unwrap().port()
}

async fn bind_v4() -> TcpListener {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind 127.0.0.1:0")
}

async fn accept_loop(listener: TcpListener, state: Arc<State>, serve: Serve) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        let connection = state.connections.fetch_add(1, Ordering::SeqCst) + 1;
        state.open.fetch_add(1, Ordering::SeqCst);
        tokio::spawn(serve_connection(tcp, state.clone(), serve.clone(), connection));
    }
}

/// Serves one connection; errors are scripted resets and clients going away.
async fn serve_connection(tcp: TcpStream, state: Arc<State>, serve: Serve, connection: usize) {
    let acceptor = match serve {
        Serve::Raw(answer) => {
            answer_raw(tcp, &answer).await;
            state.open.fetch_sub(1, Ordering::SeqCst);
            return;
        }
        Serve::Http => None,
        Serve::Tls(acceptor) => Some(acceptor),
    };
    let reset = Arc::new(AtomicBool::new(false));
    let io = ServerIo { tcp, reset: reset.clone(), open: state.open.clone() };
    let st = state.clone();
    let service = service_fn(move |req| answer(st.clone(), reset.clone(), connection, req));
    let http1 = hyper::server::conn::http1::Builder::new();
    let Some(acceptor) = acceptor else {
        let _ = http1.serve_connection(TokioIo::new(io), service).with_upgrades().await;
        return;
    };
    let Some(Ok(tls)) = within(acceptor.accept(io)).await else { return };
    state.handshakes.fetch_add(1, Ordering::SeqCst);
    if tls.get_ref().1.alpn_protocol() == Some(b"h2") {
        let http2 = hyper::server::conn::http2::Builder::new(TokioExecutor::new());
        let _ = http2.serve_connection(TokioIo::new(tls), service).await;
    } else {
        let _ = http1.serve_connection(TokioIo::new(tls), service).with_upgrades().await;
    }
}

/// Reads a request head, writes `answer`, closes.
async fn answer_raw(mut tcp: TcpStream, answer: &[u8]) {
    if crate::read_head(&mut tcp, &mut Vec::new()).await.is_none() {
        return;
    }
    let _ = tcp.write_all(answer).await;
    let _ = tcp.shutdown().await;
}

type OriginBody = UnsyncBoxBody<Bytes, io::Error>;
type Frames = BoxStream<'static, io::Result<Frame<Bytes>>>;

fn full(body: impl Into<Bytes>) -> OriginBody {
    Full::new(body.into()).map_err(|never: Infallible| match never {}).boxed_unsync()
}

fn scripted_reset(reset: &AtomicBool) -> io::Error {
    reset.store(true, Ordering::SeqCst);
    io::Error::new(io::ErrorKind::ConnectionReset, "scripted reset")
}

async fn answer(
    state: Arc<State>,
    reset: Arc<AtomicBool>,
    connection: usize,
    req: Request<Incoming>,
) -> Result<Response<OriginBody>, io::Error> {
    let path = req.uri().path().to_owned();
    state.seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        path: path.clone(),
        target: req.uri().to_string(),
        headers: req.headers().clone(),
        at: tokio::time::Instant::now(),
        connection,
    });
    state.counter(&path).fetch_add(1, Ordering::SeqCst);
    state.total.fetch_add(1, Ordering::SeqCst);
    state.arrived.notify_waiters();
    let reply = {
        let routes = state.routes.lock().unwrap();
        // A site of the name a reverse proxy forwarded (`HOST|PATH`) before any site's.
        let site = req.headers().get("x-forwarded-host").and_then(|h| h.to_str().ok());
        let of_site = site.and_then(|site| routes.get(&format!("{site}|{path}")));
        let exact = req.uri().query().and_then(|_| routes.get(req.uri().path_and_query()?.as_str()));
        of_site.or(exact).or_else(|| routes.get(&path)).cloned()
    };
    let Some(reply) = reply else {
        return Ok(Response::builder().status(404).body(full("not found\n")).unwrap());
    };
    if reply.reset {
        return Err(scripted_reset(&reset));
    }
    match &reply.wait {
        Wait::Now => {}
        Wait::Forever => std::future::pending::<()>().await,
        Wait::For(d) => tokio::time::sleep(*d).await,
        Wait::Gate(g) => g.wait().await,
        Wait::Barrier(b) => {
            bounded("all requests in flight at the origin together", b.wait()).await;
        }
    }
    let mut builder = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (k, v) in &reply.headers {
        builder = builder.header(k.as_str(), v.as_str());
    }
    let body = match reply.content {
        Content::WebSocket => return Ok(websocket(state, req, builder)),
        Content::Echo => {
            let mut text = String::new();
            for (k, v) in req.headers() {
                text.push_str(&format!("{}: {}\n", k, String::from_utf8_lossy(v.as_bytes())));
            }
            full(text)
        }
        Content::Upload(mut progress) => {
            let mut body = req.into_body();
            let mut sum = Checksum::default();
            while let Some(frame) = body.frame().await {
                if let Some(data) = frame.map_err(io::Error::other)?.data_ref() {
                    sum.update(data);
                }
                if let Some((n, gate)) = &progress
                    && sum.len() >= *n
                {
                    gate.open();
                    progress = None;
                }
            }
            full(sum.hex())
        }
        Content::Bytes(b) if matches!(reply.plan, Plan::Full) => full(b),
        content => {
            let len = content.len();
            builder = builder.header("content-length", len);
            let frames: Frames = match reply.plan {
                Plan::Full => content.frames(0, len),
                Plan::StallAfter(n) => content.frames(0, n).chain(stream::pending()).boxed(),
                Plan::ResetAfter(n) => {
                    let then = stream::once(async move { Err(scripted_reset(&reset)) });
                    content.frames(0, n).chain(then).boxed()
                }
                Plan::HoldAfter(n, gate) => {
                    let rest = content.frames(n.min(len), len);
                    let then = stream::once(async move {
                        gate.wait().await;
                        rest
                    });
                    content.frames(0, n.min(len)).chain(then.flatten()).boxed()
                }
                Plan::Drip { chunk, every } => stream::iter((0..len).step_by(chunk))
                    .then(move |from| {
                        let content = content.clone();
                        async move {
                            tokio::time::sleep(every).await;
                            content.frames(from, (from + chunk as u64).min(len))
                        }
                    })
                    .flatten()
                    .boxed(),
            };
            StreamBody::new(frames).boxed_unsync()
        }
    };
    Ok(builder.body(body).unwrap())
}

/// The answer of a [`Reply::websocket`] route: `101` and an echo task on the upgraded
/// connection, or `200` for a request that did not ask for the upgrade.
fn websocket(
    state: Arc<State>,
    mut req: Request<Incoming>,
    builder: http::response::Builder,
) -> Response<OriginBody> {
    use futures_util::SinkExt;
    use tokio_tungstenite::tungstenite::Message;
    use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
    let asks = req.headers().get("upgrade").is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"websocket"));
    let key = req.headers().get("sec-websocket-key").map(|k| derive_accept_key(k.as_bytes()));
    let (true, Some(accept)) = (asks, key) else {
        return builder.body(full("plain GET, no upgrade\n")).unwrap();
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let Some(Ok(upgraded)) = within(upgrade).await else { return };
        let io = TokioIo::new(upgraded);
        let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
            io,
            tokio_tungstenite::tungstenite::protocol::Role::Server,
            None,
        )
        .await;
        while let Some(Ok(msg)) = ws.next().await {
            let echo = match msg {
                Message::Text(t) => Message::text(format!("echo: {t}")),
                Message::Binary(b) => Message::binary([b"echo: ".as_slice(), &b].concat()),
                Message::Close(_) => break,
                _ => continue,
            };
            state.ws_messages.fetch_add(1, Ordering::SeqCst);
            if ws.send(echo).await.is_err() {
                break;
            }
        }
        let _ = ws.close(None).await;
        state.ws_closed.fetch_add(1, Ordering::SeqCst);
    });
    // The route's own headers (the builder's), on the 101 too.
    builder
        .status(StatusCode::SWITCHING_PROTOCOLS)
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-accept", accept)
        .body(full(Bytes::new()))
        .unwrap()
}

/// The server side of a connection: after a scripted reset, closing it sends a TCP RST
/// (`SO_LINGER` 0) instead of a FIN. Counted in the origin's open connections while it
/// lives.
struct ServerIo {
    tcp: TcpStream,
    reset: Arc<AtomicBool>,
    open: Arc<AtomicUsize>,
}

impl Drop for ServerIo {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::SeqCst);
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
