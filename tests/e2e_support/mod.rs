//! Helpers for the end-to-end proxy tests (`proxy_e2e`, `proxy_process`): a scripted hyper
//! origin on `127.0.0.1:0` (plain or TLS, with a test CA made by `rcgen`), HTTP clients
//! that talk to the proxy (hyper's client connection with absolute-form URIs, and raw
//! HTTP/1.1 over a `TcpStream`), a deterministic byte pattern with a running checksum for
//! large bodies, the in-process proxy, and audit-log checks.
//!
//! Everything listens on loopback only. Every network await goes through [`bounded`], so
//! a bug fails a test quickly instead of hanging it.
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, Request, Response, StatusCode};
use http_body_util::combinators::{BoxBody, UnsyncBoxBody};
use http_body_util::{BodyExt, Empty, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use robotsgate::audit::AuditLog;
use robotsgate::server::app::{App, Reloader};
use robotsgate::server::config::{Config, Dur};
use robotsgate::server::metrics::Metrics;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Notify, mpsc, oneshot};
use tokio::task::JoinHandle;

/// Longest a single network step of a test may take before the test fails.
pub const BOUND: Duration = Duration::from_secs(20);

/// Awaits `fut`, failing the test instead of hanging when it takes longer than [`BOUND`].
pub async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(BOUND, fut).await {
        Ok(v) => v,
        Err(_) => panic!("{what}: no result within {BOUND:?}"),
    }
}

// ---------------------------------------------------------------------------------------
// A deterministic byte pattern and a running checksum (large bodies, never held whole)
// ---------------------------------------------------------------------------------------

/// The pattern repeats every `PERIOD` bytes (a prime, so it never lines up with chunk
/// sizes or powers of two).
pub const PERIOD: usize = 65_521;

/// The pattern period twice over, so any run of up to `PERIOD` bytes is one slice.
fn block() -> &'static [u8] {
    static BLOCK: OnceLock<Vec<u8>> = OnceLock::new();
    BLOCK.get_or_init(|| {
        let mut x: u32 = 0x9e37_79b9;
        let mut v: Vec<u8> = (0..PERIOD)
            .map(|_| {
                // xorshift32
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 11) as u8
            })
            .collect();
        v.extend_from_within(..);
        v
    })
}

/// The pattern bytes `[pos, pos + len)`, in pieces of at most `PERIOD` bytes (no copies).
#[derive(Debug, Clone)]
pub struct PatternChunks {
    pos: u64,
    end: u64,
}

impl PatternChunks {
    /// Bytes `[start, end)` of the pattern.
    pub fn new(start: u64, end: u64) -> PatternChunks {
        PatternChunks { pos: start, end }
    }
}

impl Iterator for PatternChunks {
    type Item = Bytes;
    fn next(&mut self) -> Option<Bytes> {
        if self.pos >= self.end {
            return None;
        }
        let start = (self.pos % PERIOD as u64) as usize;
        let n = (self.end - self.pos).min(PERIOD as u64) as usize;
        self.pos += n as u64;
        Some(Bytes::from_static(&block()[start..start + n]))
    }
}

/// The pattern bytes `[0, len)` in one buffer (for small bodies only).
pub fn pattern(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    for chunk in PatternChunks::new(0, len as u64) {
        v.extend_from_slice(&chunk);
    }
    v
}

/// Checks, piece by piece, that a stream of bytes is the pattern from offset 0.
#[derive(Debug, Default)]
pub struct PatternCheck {
    /// Bytes checked so far.
    pub pos: u64,
}

impl PatternCheck {
    /// Checks the next bytes; `Err` names the first offset that differs.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), u64> {
        while !data.is_empty() {
            let start = (self.pos % PERIOD as u64) as usize;
            let n = data.len().min(PERIOD);
            if data[..n] != block()[start..start + n] {
                let i = data[..n].iter().zip(&block()[start..start + n]).position(|(a, b)| a != b);
                return Err(self.pos + i.unwrap_or(0) as u64);
            }
            self.pos += n as u64;
            data = &data[n..];
        }
        Ok(())
    }
}

/// A running, order-sensitive checksum (Fletcher-style over little-endian 64-bit words)
/// and length; fed piece by piece, however the bytes are split.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Checksum {
    len: u64,
    a: u64,
    b: u64,
    partial: [u8; 8],
    partial_len: usize,
}

impl Checksum {
    /// Adds bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if self.partial_len > 0 {
            let take = (8 - self.partial_len).min(data.len());
            self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&data[..take]);
            self.partial_len += take;
            data = &data[take..];
            if self.partial_len < 8 {
                return;
            }
            let w = u64::from_le_bytes(self.partial);
            self.word(w);
            self.partial_len = 0;
        }
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
        }
        let rest = words.remainder();
        self.partial[..rest.len()].copy_from_slice(rest);
        self.partial_len = rest.len();
    }

    fn word(&mut self, w: u64) {
        self.a = self.a.wrapping_add(w);
        self.b = self.b.wrapping_add(self.a);
    }

    /// Bytes seen.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no bytes were seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The checksum (length folded in), as hex.
    pub fn hex(&self) -> String {
        let mut tail = [0u8; 8];
        tail[..self.partial_len].copy_from_slice(&self.partial[..self.partial_len]);
        let a = self.a.wrapping_add(u64::from_le_bytes(tail));
        let b = self.b.wrapping_add(a);
        format!("{:016x}{:016x}-{}", a, b ^ self.len, self.len)
    }
}

/// The checksum of the pattern bytes `[0, len)`.
pub fn pattern_checksum(len: u64) -> Checksum {
    let mut c = Checksum::default();
    for chunk in PatternChunks::new(0, len) {
        c.update(&chunk);
    }
    c
}

// ---------------------------------------------------------------------------------------
// The scripted origin
// ---------------------------------------------------------------------------------------

/// What the origin answers for a path.
#[derive(Clone, Debug)]
pub enum Route {
    /// A fixed answer.
    Fixed {
        /// Status code.
        status: u16,
        /// Headers.
        headers: Vec<(String, String)>,
        /// Body.
        body: Bytes,
    },
    /// `len` bytes of the pattern, generated on the fly with `Content-Length`; with a
    /// gate, the first `gate.0` bytes go out, then the rest waits for `gate.1`.
    Pattern {
        /// Total length.
        len: u64,
        /// Stop after this many bytes until notified.
        gate: Option<(u64, Arc<Notify>)>,
    },
    /// Reads the request body as it comes (checksum and length), answers
    /// `<checksum hex>`; notifies `progress.1` once `progress.0` bytes have arrived.
    Upload {
        /// (bytes, notify)
        progress: Option<(u64, Arc<Notify>)>,
    },
    /// Waits for `release` (a `notify_one` permit), then answers 200 with `body`.
    Slow {
        /// Released by the test.
        release: Arc<Notify>,
        /// The body.
        body: Bytes,
    },
    /// Never answers.
    Never,
    /// Answers 200 with the request headers (one `name: value` line each), and a
    /// response with its own hop-by-hop headers: `Connection: x-origin-secret`,
    /// `X-Origin-Secret`, `Keep-Alive`.
    Echo,
}

impl Route {
    /// 200 with a body and a content type.
    pub fn ok(content_type: &str, body: impl Into<Bytes>) -> Route {
        Route::Fixed {
            status: 200,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
        }
    }

    /// 200, `text/plain`.
    pub fn text(body: &str) -> Route {
        Route::ok("text/plain", body.to_owned())
    }
}

/// A request as the origin saw it.
#[derive(Clone, Debug)]
pub struct Seen {
    /// Method.
    pub method: String,
    /// Path.
    pub path: String,
    /// The request target as it arrived (origin form `/a?b`, or absolute form
    /// `http://host/a?b` if a proxy sent it wrongly).
    pub target: String,
    /// Headers.
    pub headers: HeaderMap,
}

#[derive(Default)]
struct OriginState {
    routes: Mutex<HashMap<String, Route>>,
    hits: Mutex<HashMap<String, Arc<AtomicUsize>>>,
    total: AtomicUsize,
    connections: AtomicUsize,
    seen: Mutex<Vec<Seen>>,
    arrived: Notify,
}

impl OriginState {
    fn counter(&self, path: &str) -> Arc<AtomicUsize> {
        self.hits.lock().unwrap().entry(path.to_owned()).or_default().clone()
    }
}

/// An HTTP/1.1 origin (plain or TLS) on `127.0.0.1:0`, scripted per path (unknown paths:
/// 404), counting requests per path and TCP connections.
pub struct TestOrigin {
    addr: SocketAddr,
    tls: bool,
    state: Arc<OriginState>,
    accept: JoinHandle<()>,
}

impl Drop for TestOrigin {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

type OriginBody = UnsyncBoxBody<Bytes, io::Error>;

impl TestOrigin {
    /// A plain HTTP origin with these routes.
    pub async fn start<'a>(routes: impl IntoIterator<Item = (&'a str, Route)>) -> TestOrigin {
        TestOrigin::launch(routes, None).await
    }

    /// A plain HTTP origin with these routes on `[::1]:0` (IPv6 loopback).
    pub async fn start_v6<'a>(routes: impl IntoIterator<Item = (&'a str, Route)>) -> TestOrigin {
        let listener = TcpListener::bind((std::net::Ipv6Addr::LOCALHOST, 0)).await.expect("bind [::1]:0");
        TestOrigin::launch_on(listener, routes, None)
    }

    /// An HTTPS origin with these routes, presenting `ca`'s leaf certificate.
    pub async fn start_tls<'a>(
        routes: impl IntoIterator<Item = (&'a str, Route)>,
        ca: &TestCa,
    ) -> TestOrigin {
        TestOrigin::launch(routes, Some(tokio_rustls::TlsAcceptor::from(ca.server_config()))).await
    }

    async fn launch<'a>(
        routes: impl IntoIterator<Item = (&'a str, Route)>,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> TestOrigin {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind 127.0.0.1:0");
        TestOrigin::launch_on(listener, routes, tls)
    }

    fn launch_on<'a>(
        listener: TcpListener,
        routes: impl IntoIterator<Item = (&'a str, Route)>,
        tls: Option<tokio_rustls::TlsAcceptor>,
    ) -> TestOrigin {
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(OriginState::default());
        for (path, route) in routes {
            state.routes.lock().unwrap().insert(path.to_owned(), route);
        }
        let is_tls = tls.is_some();
        let accept = tokio::spawn(accept_loop(listener, state.clone(), tls));
        TestOrigin { addr, tls: is_tls, state, accept }
    }

    /// The address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// `http://127.0.0.1:PORT` (or `https://`; `[::1]` for [`TestOrigin::start_v6`]).
    pub fn base(&self) -> String {
        format!("{}://{}", if self.tls { "https" } else { "http" }, self.addr)
    }

    /// `base()` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base())
    }

    /// `127.0.0.1:PORT` (`[::1]:PORT` for [`TestOrigin::start_v6`]).
    pub fn authority(&self) -> String {
        self.addr.to_string()
    }

    /// Sets (or replaces) the answer for `path`.
    pub fn route(&self, path: &str, route: Route) {
        self.state.routes.lock().unwrap().insert(path.to_owned(), route);
    }

    /// Requests seen for `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.state.counter(path).load(Ordering::SeqCst)
    }

    /// Requests seen for any path.
    pub fn total_hits(&self) -> usize {
        self.state.total.load(Ordering::SeqCst)
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.state.connections.load(Ordering::SeqCst)
    }

    /// Every request seen, in order.
    pub fn seen(&self) -> Vec<Seen> {
        self.state.seen.lock().unwrap().clone()
    }

    /// The requests seen for `path`.
    pub fn seen_for(&self, path: &str) -> Vec<Seen> {
        self.seen().into_iter().filter(|s| s.path == path).collect()
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

async fn accept_loop(listener: TcpListener, state: Arc<OriginState>, tls: Option<tokio_rustls::TlsAcceptor>) {
    loop {
        let Ok((tcp, _)) = listener.accept().await else { continue };
        state.connections.fetch_add(1, Ordering::SeqCst);
        let state = state.clone();
        let tls = tls.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(state.clone(), req));
            // Errors are clients going away: nothing to report.
            match tls {
                None => {
                    let _ = http1::Builder::new().serve_connection(TokioIo::new(tcp), service).await;
                }
                Some(acceptor) => {
                    if let Ok(Ok(stream)) = tokio::time::timeout(BOUND, acceptor.accept(tcp)).await {
                        let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                    }
                }
            }
        });
    }
}

fn full(body: impl Into<Bytes>) -> OriginBody {
    Full::new(body.into()).map_err(|never: Infallible| match never {}).boxed_unsync()
}

/// A body fed by a producer task through a small channel (so it is generated as it is
/// sent, with backpressure).
fn channel_body(mut rx: mpsc::Receiver<Bytes>) -> OriginBody {
    let s = stream::poll_fn(move |cx| rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))));
    StreamBody::new(s).boxed_unsync()
}

async fn answer(state: Arc<OriginState>, req: Request<Incoming>) -> Result<Response<OriginBody>, io::Error> {
    let path = req.uri().path().to_owned();
    let route = state.routes.lock().unwrap().get(&path).cloned();
    state.seen.lock().unwrap().push(Seen {
        method: req.method().to_string(),
        path: path.clone(),
        target: req.uri().to_string(),
        headers: req.headers().clone(),
    });
    state.counter(&path).fetch_add(1, Ordering::SeqCst);
    state.total.fetch_add(1, Ordering::SeqCst);
    state.arrived.notify_waiters();
    let Some(route) = route else {
        return Ok(Response::builder().status(404).body(full("not found\n")).unwrap());
    };
    let res = match route {
        Route::Fixed { status, headers, body } => {
            let mut b = Response::builder().status(StatusCode::from_u16(status).unwrap());
            for (k, v) in headers {
                b = b.header(k, v);
            }
            b.body(full(body)).unwrap()
        }
        Route::Pattern { len, gate } => {
            let (tx, rx) = mpsc::channel::<Bytes>(4);
            tokio::spawn(async move {
                let (first, gate) = match gate {
                    Some((n, g)) => (n.min(len), Some(g)),
                    None => (len, None),
                };
                for chunk in PatternChunks::new(0, first) {
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
                if let Some(g) = gate {
                    g.notified().await;
                }
                for chunk in PatternChunks::new(first, len) {
                    if tx.send(chunk).await.is_err() {
                        return;
                    }
                }
            });
            Response::builder()
                .header("content-type", "application/octet-stream")
                .header("content-length", len)
                .body(channel_body(rx))
                .unwrap()
        }
        Route::Upload { progress } => {
            let mut body = req.into_body();
            let mut sum = Checksum::default();
            let mut progress = progress;
            while let Some(frame) = body.frame().await {
                let frame = frame.map_err(io::Error::other)?;
                if let Some(data) = frame.data_ref() {
                    sum.update(data);
                }
                if let Some((n, notify)) = &progress
                    && sum.len() >= *n
                {
                    notify.notify_one();
                    progress = None;
                }
            }
            Response::builder().header("content-type", "text/plain").body(full(sum.hex())).unwrap()
        }
        Route::Slow { release, body } => {
            release.notified().await;
            Response::builder().header("content-type", "text/plain").body(full(body)).unwrap()
        }
        Route::Never => std::future::pending().await,
        Route::Echo => {
            let mut text = String::new();
            for (k, v) in req.headers() {
                text.push_str(&format!("{}: {}\n", k, String::from_utf8_lossy(v.as_bytes())));
            }
            Response::builder()
                .header("content-type", "text/plain")
                .header("connection", "x-origin-secret")
                .header("x-origin-secret", "origin-only")
                .header("keep-alive", "timeout=5")
                .header("x-origin-kept", "yes")
                .body(full(text))
                .unwrap()
        }
    };
    Ok(res)
}

// ---------------------------------------------------------------------------------------
// A test CA and TLS configurations
// ---------------------------------------------------------------------------------------

/// A CA made with rcgen, and one server leaf it signed.
pub struct MadeCa {
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The CA certificate (DER).
    pub ca_der: CertificateDer<'static>,
    /// The leaf certificate (DER).
    pub leaf_der: CertificateDer<'static>,
    /// The leaf's private key (PKCS#8 DER).
    pub leaf_key: Vec<u8>,
}

/// A fresh CA named `ca_name` and a leaf for `names` (DNS names or IP addresses; the first
/// is also the common name), for serverAuth.
pub fn make_ca(ca_name: &str, names: &[&str]) -> MadeCa {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair, KeyUsagePurpose};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name.push(DnType::CommonName, ca_name);
    ca_params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let ca_key = KeyPair::generate().unwrap();
    let ca_cert = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);

    let mut leaf_params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    leaf_params.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
    leaf_params.use_authority_key_identifier_extension = true;
    leaf_params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    leaf_params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
    MadeCa {
        ca_pem: ca_cert.pem(),
        ca_der: ca_cert.der().clone(),
        leaf_der: leaf.der().clone(),
        leaf_key: leaf_key.serialize_der(),
    }
}

/// A CA and a leaf certificate for `localhost` and `127.0.0.1`, signed by it.
pub struct TestCa {
    /// The CA certificate (PEM).
    pub ca_pem: String,
    ca_der: CertificateDer<'static>,
    leaf_der: CertificateDer<'static>,
    leaf_key: Vec<u8>,
}

impl TestCa {
    /// Makes a fresh CA and leaf.
    pub fn new() -> TestCa {
        let made = make_ca("robotsgate test CA", &["localhost", "127.0.0.1"]);
        TestCa { ca_pem: made.ca_pem, ca_der: made.ca_der, leaf_der: made.leaf_der, leaf_key: made.leaf_key }
    }

    /// Writes the CA certificate as PEM into `dir`, returning the path.
    pub fn write_ca_pem(&self, dir: &Path) -> PathBuf {
        let path = dir.join("test-ca.pem");
        std::fs::write(&path, &self.ca_pem).unwrap();
        path
    }

    /// The origin's TLS configuration (HTTP/1.1).
    pub fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.clone()));
        let mut config =
            rustls::ServerConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_no_client_auth()
                .with_single_cert(vec![self.leaf_der.clone(), self.ca_der.clone()], key)
                .unwrap();
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Arc::new(config)
    }

    /// A client configuration trusting only this CA.
    pub fn client_config(&self) -> Arc<rustls::ClientConfig> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        let config =
            rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
                .with_safe_default_protocol_versions()
                .unwrap()
                .with_root_certificates(roots)
                .with_no_client_auth();
        Arc::new(config)
    }
}

impl Default for TestCa {
    fn default() -> Self {
        TestCa::new()
    }
}

/// A TLS handshake as a client over `io`, for `localhost`, trusting `ca`.
pub async fn tls_connect<IO>(ca: &TestCa, io: IO) -> tokio_rustls::client::TlsStream<IO>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let connector = tokio_rustls::TlsConnector::from(ca.client_config());
    let name = ServerName::try_from("localhost").unwrap();
    bounded("TLS handshake", connector.connect(name, io)).await.expect("TLS handshake")
}

// ---------------------------------------------------------------------------------------
// Clients
// ---------------------------------------------------------------------------------------

/// Request bodies sent by the test clients.
pub type ReqBody = BoxBody<Bytes, io::Error>;

/// An empty request body.
pub fn empty() -> ReqBody {
    Empty::new().map_err(|never: Infallible| match never {}).boxed()
}

/// A request body fed through a channel (for streamed uploads).
pub fn channel_req_body(mut rx: mpsc::Receiver<Bytes>) -> ReqBody {
    let s = stream::poll_fn(move |cx| rx.poll_recv(cx).map(|o| o.map(|b| Ok(Frame::data(b)))));
    BodyExt::boxed(StreamBody::new(s))
}

/// An HTTP/1.1 client connection to `addr` (hyper's), with upgrades (for CONNECT).
pub async fn http1_conn<IO>(io: IO) -> hyper::client::conn::http1::SendRequest<ReqBody>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        bounded("HTTP/1.1 handshake", hyper::client::conn::http1::handshake(TokioIo::new(io))).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    sender
}

/// A new client connection to the proxy.
pub async fn proxy_conn(proxy: SocketAddr) -> hyper::client::conn::http1::SendRequest<ReqBody> {
    let tcp = bounded("connect to the proxy", TcpStream::connect(proxy)).await.expect("connect to the proxy");
    http1_conn(tcp).await
}

/// Sends `req` (absolute form) to the proxy on a new connection; the response head.
pub async fn send(proxy: SocketAddr, req: Request<ReqBody>) -> Response<Incoming> {
    let mut sender = proxy_conn(proxy).await;
    bounded("response from the proxy", sender.send_request(req)).await.expect("response from the proxy")
}

/// An absolute-form GET for `url`, with the `Host` header a proxy client sends.
pub fn get_request(url: &str) -> Request<ReqBody> {
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.authority().unwrap().to_string();
    Request::get(uri).header(http::header::HOST, host).body(empty()).unwrap()
}

/// A whole (small) response through the proxy.
pub struct Got {
    /// Status.
    pub status: StatusCode,
    /// Headers.
    pub headers: HeaderMap,
    /// Body.
    pub body: Bytes,
}

impl Got {
    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// A header as text ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or("")
    }
}

/// GETs `url` through the proxy and reads the whole body.
pub async fn get(proxy: SocketAddr, url: &str) -> Got {
    let res = send(proxy, get_request(url)).await;
    collect(res).await
}

/// Reads a whole response.
pub async fn collect(res: Response<Incoming>) -> Got {
    let (parts, body) = res.into_parts();
    let body = bounded("response body", body.collect()).await.expect("response body").to_bytes();
    Got { status: parts.status, headers: parts.headers, body }
}

/// Writes `request` on a new connection to `addr` and reads until the peer closes.
pub async fn raw_exchange(addr: SocketAddr, request: &[u8]) -> Vec<u8> {
    let mut tcp = bounded("connect", TcpStream::connect(addr)).await.expect("connect");
    bounded("write request", tcp.write_all(request)).await.expect("write request");
    let mut out = Vec::new();
    // A reset after the answer counts as the end too.
    let _ = bounded("read until close", tcp.read_to_end(&mut out)).await;
    out
}

/// A response parsed from raw bytes.
#[derive(Debug)]
pub struct RawResponse {
    /// Status code.
    pub status: u16,
    /// Header lines (name lower-cased).
    pub headers: Vec<(String, String)>,
    /// The body (chunked encoding decoded).
    pub body: Vec<u8>,
}

impl RawResponse {
    /// The first value of `name`.
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Parses one HTTP/1.1 response (read until close).
pub fn parse_response(raw: &[u8]) -> RawResponse {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {:?}", String::from_utf8_lossy(raw)));
    let head = std::str::from_utf8(&raw[..end]).expect("head is text");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status: u16 = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    let rest = &raw[end + 4..];
    let chunked = headers.iter().any(|(k, v)| k == "transfer-encoding" && v.eq_ignore_ascii_case("chunked"));
    let body = if chunked {
        dechunk(rest)
    } else if let Some((_, len)) = headers.iter().find(|(k, _)| k == "content-length") {
        let len: usize = len.parse().unwrap();
        rest[..len.min(rest.len())].to_vec()
    } else {
        rest.to_vec()
    };
    RawResponse { status, headers, body }
}

fn dechunk(mut data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    while let Some(nl) = data.windows(2).position(|w| w == b"\r\n") {
        let line = std::str::from_utf8(&data[..nl]).unwrap();
        let size = usize::from_str_radix(line.split(';').next().unwrap().trim(), 16).unwrap();
        data = &data[nl + 2..];
        if size == 0 {
            break;
        }
        out.extend_from_slice(&data[..size]);
        data = &data[size + 2..];
    }
    out
}

// ---------------------------------------------------------------------------------------
// The proxy, in process
// ---------------------------------------------------------------------------------------

/// A temporary folder for one test (audit log, snapshots, config files).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("robotsgate-e2e-").tempdir().expect("temp dir")
}

/// A configuration for tests: listens on `127.0.0.1:0`, allows loopback destinations,
/// checks for `ExampleBot`, audit log and snapshots in `dir`.
pub fn test_config(dir: &Path) -> Config {
    let mut c = Config::default();
    c.proxy.listen = "127.0.0.1:0".parse().unwrap();
    c.proxy.upstream_timeout = Dur(Duration::from_secs(10));
    c.proxy.shutdown_grace = Dur(Duration::from_secs(5));
    c.agent.token = "ExampleBot".parse().unwrap();
    c.guard.allow.push("127.0.0.0/8".parse().unwrap());
    c.fetch.connect_timeout = Dur(Duration::from_secs(5));
    c.audit.path = dir.join("audit.jsonl").display().to_string();
    c.audit.snapshots = dir.join("snapshots").display().to_string();
    c
}

/// robotsgate started in process by [`App::start`].
pub struct RunningProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its audit log.
    pub audit: AuditLog,
    /// The audit file.
    pub audit_path: PathBuf,
    /// The snapshot folder.
    pub snapshots: PathBuf,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`), when configured.
    pub admin: Option<SocketAddr>,
    /// Its metrics.
    pub metrics: Arc<Metrics>,
    /// Applies a new configuration while it runs (what SIGHUP does).
    pub reloader: Reloader,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl RunningProxy {
    /// Starts the proxy for `config` (whose audit target must be a file).
    pub async fn start(config: &Config) -> RunningProxy {
        let app = bounded("App::start", App::start(config)).await.expect("App::start");
        let addr = app.local_addr();
        let audit = app.audit().clone();
        let admin = app.admin_addr();
        let metrics = app.metrics().clone();
        let reloader = app.reloader();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async move {
            let _ = rx.await;
        }));
        RunningProxy {
            addr,
            audit,
            audit_path: PathBuf::from(&config.audit.path),
            snapshots: PathBuf::from(&config.audit.snapshots),
            admin,
            metrics,
            reloader,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Every audit record written so far (after a flush), each line parsed as JSON.
    pub async fn records(&self) -> Vec<Value> {
        bounded("audit flush", self.audit.flush()).await;
        read_jsonl(&self.audit_path)
    }

    /// Shuts down (drain, flush) and waits for it.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            bounded("proxy shutdown", task).await.expect("proxy task").expect("proxy run");
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}

// ---------------------------------------------------------------------------------------
// The audit log
// ---------------------------------------------------------------------------------------

/// Every line of a JSON Lines file, parsed (panics naming a line that is not JSON).
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}): {line}", path.display(), n + 1))
        })
        .collect()
}

/// The records of a type (`"decision"` or `"fetch"`).
pub fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

/// Whether `s` is an RFC 3339 time.
pub fn is_rfc3339(s: &str) -> bool {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).is_ok()
}

fn field<'a>(r: &'a Value, key: &str) -> &'a Value {
    r.get(key).unwrap_or_else(|| panic!("record without {key:?}: {r}"))
}

/// Checks the documented fields of a decision record (docs/audit-log.md).
pub fn check_decision_record(r: &Value) {
    assert_eq!(field(r, "schema_version"), 1, "{r}");
    assert_eq!(field(r, "type"), "decision", "{r}");
    assert!(is_rfc3339(field(r, "time").as_str().unwrap_or("")), "time: {r}");
    assert!(!field(r, "request_id").as_str().unwrap_or("").is_empty(), "request_id: {r}");
    let client = field(r, "client");
    assert!(
        client.is_null() || client.as_str().is_some_and(|c| c.parse::<SocketAddr>().is_ok()),
        "client: {r}"
    );
    for key in ["method", "url", "origin", "agent", "profile", "mode", "outcome", "reason", "explanation"] {
        assert!(field(r, key).is_string(), "{key}: {r}");
    }
    assert!(["google", "rfc", "conservative"].contains(&r["profile"].as_str().unwrap()), "{r}");
    assert!(["enforce", "report-only"].contains(&r["mode"].as_str().unwrap()), "{r}");
    assert!(["allowed", "disallowed", "would-disallow"].contains(&r["outcome"].as_str().unwrap()), "{r}");
    let rule = field(r, "rule");
    if !rule.is_null() {
        assert!(["allow", "disallow"].contains(&field(rule, "kind").as_str().unwrap_or("")), "rule: {r}");
        assert!(field(rule, "pattern").is_string(), "rule.pattern: {r}");
        assert!(field(rule, "line").as_u64().is_some_and(|l| l >= 1), "rule.line: {r}");
    }
    assert!(field(r, "path_visible").is_boolean(), "{r}");
    let robots = field(r, "robots");
    if !robots.is_null() {
        let sha = field(robots, "sha256");
        assert!(
            sha.is_null()
                || sha.as_str().is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())),
            "robots.sha256: {r}"
        );
        let status = field(robots, "status");
        assert!(status.is_null() || status.is_u64(), "robots.status: {r}");
        assert!(is_rfc3339(field(robots, "fetched_at").as_str().unwrap_or("")), "robots.fetched_at: {r}");
    }
    assert!(field(r, "decision_us").is_u64(), "{r}");
}

/// Checks the documented fields of a fetch record.
pub fn check_fetch_record(r: &Value) {
    assert_eq!(field(r, "schema_version"), 1, "{r}");
    assert_eq!(field(r, "type"), "fetch", "{r}");
    assert!(is_rfc3339(field(r, "time").as_str().unwrap_or("")), "time: {r}");
    assert!(is_rfc3339(field(r, "fetched_at").as_str().unwrap_or("")), "fetched_at: {r}");
    for key in ["origin", "url", "final_url", "result"] {
        assert!(field(r, key).is_string(), "{key}: {r}");
    }
    assert!(field(r, "bytes").is_u64(), "{r}");
    assert!(field(r, "duration_ms").is_number(), "{r}");
}

/// SHA-256 in hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}
