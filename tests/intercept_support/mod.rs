//! Helpers for the TLS interception tests (`intercept`): an origin CA made with rcgen whose
//! leaf names several test hosts, an HTTPS origin on `127.0.0.1:0` speaking HTTP/1.1 and
//! HTTP/2 (counting TCP connections, completed TLS handshakes and requests per path), a
//! client that opens a `CONNECT` tunnel by hand and does TLS through it trusting exactly the
//! roots it is given, and the number of leaves a running proxy has minted (from its metrics).
//!
//! Everything is on loopback; every network await goes through [`bounded`].
#![allow(dead_code)]

use std::collections::HashMap;
use std::convert::Infallible;
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode, Version};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::net;
use robotsgate::server::config::Config;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::Barrier;
use tokio::task::JoinHandle;
use tokio_rustls::client::TlsStream;

use crate::e2e_support::{Got, ReqBody, RunningProxy, bounded, collect, empty, test_config};

/// The names on the origin's leaf certificate (besides `127.0.0.1`).
pub const ORIGIN_NAMES: &[&str] = &["localhost", "bypass.test"];

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

// ---------------------------------------------------------------------------------------
// The origin's CA
// ---------------------------------------------------------------------------------------

/// A CA for origins (not robotsgate's) and one leaf signed by it for [`ORIGIN_NAMES`] and
/// `127.0.0.1`.
pub struct OriginCa {
    /// The CA certificate (PEM).
    pub ca_pem: String,
    /// The CA certificate (DER).
    pub ca_der: CertificateDer<'static>,
    leaf_der: CertificateDer<'static>,
    leaf_key: Vec<u8>,
}

impl OriginCa {
    /// A fresh CA and leaf.
    pub fn new(label: &str) -> OriginCa {
        let mut names: Vec<&str> = ORIGIN_NAMES.to_vec();
        names.push("127.0.0.1");
        let made = crate::e2e_support::make_ca(&format!("origin test CA {label}"), &names);
        OriginCa {
            ca_pem: made.ca_pem,
            ca_der: made.ca_der,
            leaf_der: made.leaf_der,
            leaf_key: made.leaf_key,
        }
    }

    /// Writes the CA certificate as PEM to `path`.
    pub fn write_pem(&self, path: &Path) -> PathBuf {
        std::fs::write(path, &self.ca_pem).unwrap();
        path.to_path_buf()
    }

    /// The leaf certificate the origin presents.
    pub fn leaf(&self) -> &CertificateDer<'static> {
        &self.leaf_der
    }

    /// A root store with only this CA.
    pub fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.ca_der.clone()).unwrap();
        roots
    }

    fn server_config(&self) -> Arc<rustls::ServerConfig> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.leaf_key.clone()));
        let mut config = rustls::ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(vec![self.leaf_der.clone()], key)
            .unwrap();
        config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Arc::new(config)
    }
}

// ---------------------------------------------------------------------------------------
// The HTTPS origin
// ---------------------------------------------------------------------------------------

/// What the origin answers for a path.
#[derive(Clone)]
pub enum Route {
    /// 200 with this body (`application/octet-stream`).
    Body(Bytes),
    /// Waits until `Barrier` has been reached by as many requests as it counts (so they
    /// must all be in flight at once), then 200 with the body.
    Together(Arc<Barrier>, Bytes),
}

impl Route {
    /// 200 with `body`.
    pub fn body(body: impl Into<Bytes>) -> Route {
        Route::Body(body.into())
    }
}

#[derive(Default)]
struct OriginState {
    routes: Mutex<HashMap<String, Route>>,
    hits: Mutex<HashMap<String, usize>>,
    versions: Mutex<Vec<Version>>,
    requests: AtomicUsize,
    tcp: AtomicUsize,
    handshakes: AtomicUsize,
}

/// An HTTPS origin on `127.0.0.1:0` (HTTP/1.1 and HTTP/2 by ALPN), scripted per path
/// (others: 404).
pub struct TlsOrigin {
    addr: SocketAddr,
    state: Arc<OriginState>,
    task: JoinHandle<()>,
}

impl Drop for TlsOrigin {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsOrigin {
    /// Starts an origin presenting `ca`'s leaf.
    pub async fn start<'a>(ca: &OriginCa, routes: impl IntoIterator<Item = (&'a str, Route)>) -> TlsOrigin {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let state = Arc::new(OriginState::default());
        state.routes.lock().unwrap().extend(routes.into_iter().map(|(p, r)| (p.to_owned(), r)));
        let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config());
        let st = state.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { continue };
                st.tcp.fetch_add(1, Ordering::SeqCst);
                let (st, acceptor) = (st.clone(), acceptor.clone());
                tokio::spawn(async move {
                    let Ok(Ok(tls)) =
                        tokio::time::timeout(crate::e2e_support::BOUND, acceptor.accept(tcp)).await
                    else {
                        return;
                    };
                    st.handshakes.fetch_add(1, Ordering::SeqCst);
                    let svc = service_fn(move |req| origin_answer(st.clone(), req));
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(tls), svc)
                        .await;
                });
            }
        });
        TlsOrigin { addr, state, task }
    }

    /// The port.
    pub fn port(&self) -> u16 {
        self.addr.port()
    }

    /// Requests for `path`.
    pub fn hits(&self, path: &str) -> usize {
        self.state.hits.lock().unwrap().get(path).copied().unwrap_or(0)
    }

    /// Requests for any path.
    pub fn requests(&self) -> usize {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// Every request's path and count.
    pub fn all_hits(&self) -> HashMap<String, usize> {
        self.state.hits.lock().unwrap().clone()
    }

    /// TCP connections accepted.
    pub fn connections(&self) -> usize {
        self.state.tcp.load(Ordering::SeqCst)
    }

    /// TLS handshakes completed.
    pub fn handshakes(&self) -> usize {
        self.state.handshakes.load(Ordering::SeqCst)
    }

    /// The HTTP versions of the requests seen.
    pub fn versions(&self) -> Vec<Version> {
        self.state.versions.lock().unwrap().clone()
    }
}

async fn origin_answer(
    state: Arc<OriginState>,
    req: Request<Incoming>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = req.uri().path().to_owned();
    *state.hits.lock().unwrap().entry(path.clone()).or_default() += 1;
    state.versions.lock().unwrap().push(req.version());
    state.requests.fetch_add(1, Ordering::SeqCst);
    let route = state.routes.lock().unwrap().get(&path).cloned();
    let body = match route {
        None => {
            return Ok(Response::builder()
                .status(404)
                .body(Full::new(Bytes::from_static(b"not found\n")))
                .unwrap());
        }
        Some(Route::Body(b)) => b,
        Some(Route::Together(barrier, b)) => {
            bounded("all requests in flight at the origin together", barrier.wait()).await;
            b
        }
    };
    Ok(Response::builder().header("content-type", "application/octet-stream").body(Full::new(body)).unwrap())
}

// ---------------------------------------------------------------------------------------
// The client side: CONNECT by hand, TLS through the tunnel, HTTP/1.1 or HTTP/2 inside
// ---------------------------------------------------------------------------------------

/// The proxy's answer to a CONNECT (or any raw HTTP/1.1 head and body).
#[derive(Debug)]
pub struct Head {
    /// Status code.
    pub status: u16,
    /// Header lines, names lower-cased.
    pub headers: Vec<(String, String)>,
    /// The body (by Content-Length; empty for 200).
    pub body: Vec<u8>,
}

impl Head {
    /// The first value of `name` ("" when absent).
    pub fn header(&self, name: &str) -> &str {
        self.headers.iter().find(|(k, _)| k == name).map_or("", |(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

/// Parses a response head (without the final blank line).
pub fn parse_head(head: &[u8]) -> (u16, Vec<(String, String)>) {
    let head = std::str::from_utf8(head).expect("head is text");
    let mut lines = head.split("\r\n");
    let status_line = lines.next().unwrap();
    let status = status_line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("bad status line {status_line:?}"));
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(k, v)| (k.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect();
    (status, headers)
}

/// Sends `CONNECT authority` on a new connection to the proxy and reads the answer: the head
/// byte by byte (so nothing after it is consumed), then a Content-Length body if not 200.
/// Returns the answer and the connection (the tunnel, when 200).
pub async fn connect(proxy: SocketAddr, authority: &str) -> (Head, TcpStream) {
    let mut tcp =
        bounded("connect to the proxy", TcpStream::connect(proxy)).await.expect("connect to the proxy");
    let request = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n");
    bounded("write CONNECT", tcp.write_all(request.as_bytes())).await.expect("write CONNECT");
    let mut head = Vec::new();
    bounded("CONNECT answer", async {
        while !head.ends_with(b"\r\n\r\n") {
            let b = tcp.read_u8().await.unwrap_or_else(|e| {
                panic!("CONNECT answer cut short ({e}) after {:?}", String::from_utf8_lossy(&head))
            });
            head.push(b);
        }
    })
    .await;
    let (status, headers) = parse_head(&head[..head.len() - 4]);
    let mut answer = Head { status, headers, body: Vec::new() };
    if status != 200 {
        let len: usize = answer.header("content-length").parse().unwrap_or(0);
        answer.body = vec![0; len];
        bounded("CONNECT answer body", tcp.read_exact(&mut answer.body)).await.expect("CONNECT answer body");
    }
    (answer, tcp)
}

/// A client TLS configuration trusting exactly `roots`, offering `alpn`.
pub fn client_config(roots: RootCertStore, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let mut config = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A TLS handshake as a client for `name` over `tcp` (bounded); the error when it fails.
pub async fn handshake(
    config: &Arc<ClientConfig>,
    name: &str,
    tcp: TcpStream,
) -> io::Result<TlsStream<TcpStream>> {
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let name = ServerName::try_from(name.to_owned()).unwrap();
    bounded("TLS handshake through the tunnel", connector.connect(name, tcp)).await
}

/// CONNECT to `authority` (expecting 200), then TLS for `name` through the tunnel.
pub async fn tunnel(
    proxy: SocketAddr,
    authority: &str,
    config: &Arc<ClientConfig>,
    name: &str,
) -> TlsStream<TcpStream> {
    let (answer, tcp) = connect(proxy, authority).await;
    assert_eq!(answer.status, 200, "CONNECT {authority}: {answer:?}");
    handshake(config, name, tcp)
        .await
        .unwrap_or_else(|e| panic!("TLS through the tunnel to {authority} as {name}: {e}"))
}

/// The server's leaf certificate on a client TLS stream.
pub fn peer_leaf(tls: &TlsStream<TcpStream>) -> CertificateDer<'static> {
    tls.get_ref().1.peer_certificates().expect("peer certificates")[0].clone().into_owned()
}

/// The ALPN protocol agreed on a client TLS stream.
pub fn alpn(tls: &TlsStream<TcpStream>) -> Option<Vec<u8>> {
    tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}

/// Whether `leaf` verifies for `name` against `roots` (and why not).
pub fn verify(leaf: &CertificateDer<'static>, roots: RootCertStore, name: &str) -> Result<(), rustls::Error> {
    use rustls::client::danger::ServerCertVerifier;
    let verifier = rustls::client::WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider())
        .build()
        .unwrap();
    let name = ServerName::try_from(name.to_owned()).unwrap();
    verifier.verify_server_cert(leaf, &[], &name, &[], UnixTime::now()).map(|_| ())
}

/// An HTTP/1.1 client connection over an established stream.
pub async fn h1<IO>(io: IO) -> hyper::client::conn::http1::SendRequest<ReqBody>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        bounded("HTTP/1.1 handshake", hyper::client::conn::http1::handshake(TokioIo::new(io))).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
}

/// An HTTP/2 client connection over an established stream.
pub async fn h2<IO>(io: IO) -> hyper::client::conn::http2::SendRequest<ReqBody>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = bounded(
        "HTTP/2 handshake",
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(io)),
    )
    .await
    .expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
}

/// GET `path` (origin form, with `Host: host`) on an HTTP/1.1 connection; the whole answer.
pub async fn h1_get(
    sender: &mut hyper::client::conn::http1::SendRequest<ReqBody>,
    host: &str,
    path: &str,
) -> Got {
    bounded("HTTP/1.1 connection ready", sender.ready()).await.expect("connection ready");
    let req = Request::get(path).header(http::header::HOST, host).body(empty()).unwrap();
    let res = bounded("HTTP/1.1 response", sender.send_request(req)).await.expect("HTTP/1.1 response");
    collect(res).await
}

/// GET `url` (absolute, as HTTP/2 sends `:scheme` and `:authority`) on an HTTP/2 connection.
pub async fn h2_get(
    sender: &mut hyper::client::conn::http2::SendRequest<ReqBody>,
    url: &str,
) -> (Version, Got) {
    bounded("HTTP/2 connection ready", sender.ready()).await.expect("connection ready");
    let req = Request::get(url).body(empty()).unwrap();
    let res = bounded("HTTP/2 response", sender.send_request(req)).await.expect("HTTP/2 response");
    let version = res.version();
    (version, collect(res).await)
}

// ---------------------------------------------------------------------------------------
// Configuration and the proxy
// ---------------------------------------------------------------------------------------

/// Makes robotsgate's CA in `dir/proxy-ca` (as `robotsgate ca init` does); its folder.
pub fn proxy_ca(dir: &Path) -> PathBuf {
    let ca_dir = dir.join("proxy-ca");
    robotsgate::server::ca::init_ca(&ca_dir, false).expect("init_ca");
    ca_dir
}

/// A root store with only robotsgate's CA from `ca_dir`.
pub fn proxy_roots(ca_dir: &Path) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in net::load_pem_certs(&ca_dir.join(robotsgate::server::ca::CA_CERT)).unwrap() {
        roots.add(cert).unwrap();
    }
    roots
}

/// The test configuration with interception: CA in `ca_dir`, every port intercepted,
/// origins trusted through `origin_roots` only (no webpki roots), test names mapped to
/// 127.0.0.1, loopback allowed, audit in `dir`.
pub fn intercept_config(dir: &Path, ca_dir: &Path, origin_roots: &[PathBuf]) -> Config {
    let mut c = test_config(dir);
    c.tls.webpki_roots = false;
    c.tls.ca_dir = ca_dir.display().to_string();
    c.tls.intercept_ports = Vec::new();
    c.tls.extra_roots = origin_roots.to_vec();
    let loopback = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    for name in ORIGIN_NAMES {
        c.dns.static_hosts.insert((*name).to_owned(), loopback.clone());
    }
    c
}

/// The leaves `proxy` has minted, as its metrics report them: `tls_leaves_minted` is read
/// from the interceptor each time the metrics are rendered, so this is the count now.
pub fn minted(proxy: &RunningProxy) -> u64 {
    const SERIES: &str = "robotsgate_tls_leaves_minted";
    let text = proxy.metrics.render();
    text.lines()
        .find_map(|l| l.strip_prefix(SERIES).and_then(|rest| rest.strip_prefix(' ')))
        .unwrap_or_else(|| panic!("no {SERIES} sample in\n{text}"))
        .trim()
        .parse()
        .unwrap_or_else(|_| panic!("{SERIES}: not a whole number in\n{text}"))
}

/// The response status of a whole answer, for messages.
pub fn describe(got: &Got) -> String {
    format!("{} {:?} {}", got.status, got.headers, got.text())
}

/// 200 OK.
pub const OK: StatusCode = StatusCode::OK;
