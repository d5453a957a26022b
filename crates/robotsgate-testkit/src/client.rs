//! Clients that talk to the proxy: hyper's client connections (absolute-form requests, or
//! HTTP/1.1 and HTTP/2 inside tunnels), raw HTTP/1.1 exchanges, and `CONNECT` by hand with
//! TLS through the tunnel. Every network await is bounded.

use std::convert::Infallible;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use bytes::Bytes;
use futures_util::stream;
use http::{HeaderMap, Method, Request, Response, StatusCode, Version};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Empty, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::client::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::ClientConfig;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::mpsc;
use tokio_rustls::client::TlsStream;

use super::wait::bounded;

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

/// An HTTP/1.1 client connection over `io`, with upgrades (for CONNECT).
pub async fn h1<IO>(io: IO) -> http1::SendRequest<ReqBody>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) = bounded("HTTP/1.1 handshake", http1::handshake(TokioIo::new(io))).await.unwrap();
    tokio::spawn(async move {
        let _ = conn.with_upgrades().await;
    });
    sender
}

/// An HTTP/2 client connection over `io`.
pub async fn h2<IO>(io: IO) -> http2::SendRequest<ReqBody>
where
    IO: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (sender, conn) =
        bounded("HTTP/2 handshake", http2::handshake(TokioExecutor::new(), TokioIo::new(io)))
            .await
            .expect("HTTP/2 handshake");
    tokio::spawn(async move {
        let _ = conn.await;
    });
    sender
}

/// A new HTTP/1.1 client connection to the proxy at `proxy`.
pub async fn proxy_conn(proxy: SocketAddr) -> http1::SendRequest<ReqBody> {
    let tcp = bounded("connect to the proxy", TcpStream::connect(proxy)).await.expect("connect to the proxy");
    h1(tcp).await
}

/// Sends `req` to the proxy on a new connection; the response head.
pub async fn send(proxy: SocketAddr, req: Request<ReqBody>) -> Response<Incoming> {
    let mut sender = proxy_conn(proxy).await;
    bounded("response from the proxy", sender.send_request(req)).await.expect("response from the proxy")
}

/// Sends `req` on an open HTTP/1.1 connection and reads the whole answer.
pub async fn exchange(sender: &mut http1::SendRequest<ReqBody>, req: Request<ReqBody>) -> Got {
    bounded("connection ready", sender.ready()).await.expect("the client connection stays open");
    collect(bounded("response", sender.send_request(req)).await.expect("a response")).await
}

/// An absolute-form GET for `url`, with the `Host` header a proxy client sends.
pub fn get_request(url: &str) -> Request<ReqBody> {
    let uri: http::Uri = url.parse().unwrap();
    let host = uri.authority().unwrap().to_string();
    Request::get(uri).header(http::header::HOST, host).body(empty()).unwrap()
}

/// `CONNECT authority`.
pub fn connect_request(authority: &str) -> Request<ReqBody> {
    Request::builder()
        .method(Method::CONNECT)
        .uri(authority)
        .header(http::header::HOST, authority)
        .body(empty())
        .unwrap()
}

/// A whole (small) response.
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

    /// Status, headers and body, for messages.
    pub fn describe(&self) -> String {
        format!("{} {:?} {}", self.status, self.headers, self.text())
    }
}

/// GETs `url` through the proxy on a new connection and reads the whole body.
pub async fn get(proxy: SocketAddr, url: &str) -> Got {
    collect(send(proxy, get_request(url)).await).await
}

/// Reads a whole response.
pub async fn collect(res: Response<Incoming>) -> Got {
    let (parts, body) = res.into_parts();
    let body = bounded("response body", body.collect()).await.expect("response body").to_bytes();
    Got { status: parts.status, headers: parts.headers, body }
}

/// GET `path` (origin form, with `Host: host`) on an HTTP/1.1 connection inside a tunnel.
pub async fn h1_get(sender: &mut http1::SendRequest<ReqBody>, host: &str, path: &str) -> Got {
    exchange(sender, Request::get(path).header(http::header::HOST, host).body(empty()).unwrap()).await
}

/// GET `url` (absolute, as HTTP/2 sends `:scheme` and `:authority`) on an HTTP/2 connection.
pub async fn h2_get(sender: &mut http2::SendRequest<ReqBody>, url: &str) -> (Version, Got) {
    bounded("HTTP/2 connection ready", sender.ready()).await.expect("connection ready");
    let req = Request::get(url).body(empty()).unwrap();
    let res = bounded("HTTP/2 response", sender.send_request(req)).await.expect("HTTP/2 response");
    let version = res.version();
    (version, collect(res).await)
}

// ---------------------------------------------------------------------------------------
// Raw HTTP/1.1
// ---------------------------------------------------------------------------------------

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
    /// Header lines (names lower-cased).
    pub headers: Vec<(String, String)>,
    /// Every byte after the head (chunked encoding decoded).
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

/// Parses one HTTP/1.1 response read until close: the head, and all that follows as the
/// body.
pub fn parse_response(raw: &[u8]) -> RawResponse {
    let end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .unwrap_or_else(|| panic!("no end of head in {:?}", String::from_utf8_lossy(raw)));
    let mut res = parse_head(&raw[..end]);
    let rest = &raw[end + 4..];
    res.body = if res.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        dechunk(rest)
    } else {
        rest.to_vec()
    };
    res
}

/// Parses a response head (without its final blank line); the body is empty.
fn parse_head(head: &[u8]) -> RawResponse {
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
    RawResponse { status, headers, body: Vec::new() }
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
// CONNECT by hand, TLS through the tunnel
// ---------------------------------------------------------------------------------------

/// Sends `CONNECT authority` on a new connection to the proxy and reads the answer: the head
/// byte by byte (so nothing after it is consumed), then a `Content-Length` body if not 200.
/// Returns the answer and the connection (the tunnel, when 200).
pub async fn connect(proxy: SocketAddr, authority: &str) -> (RawResponse, TcpStream) {
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
    let mut answer = parse_head(&head[..head.len() - 4]);
    if answer.status != 200 {
        let len: usize = answer.header("content-length").unwrap_or("0").parse().unwrap_or(0);
        answer.body = vec![0; len];
        bounded("CONNECT answer body", tcp.read_exact(&mut answer.body)).await.expect("CONNECT answer body");
    }
    (answer, tcp)
}

/// A TLS handshake as a client for `name` over `io` (bounded); the error when it fails.
pub async fn handshake<IO>(config: &Arc<ClientConfig>, name: &str, io: IO) -> io::Result<TlsStream<IO>>
where
    IO: AsyncRead + AsyncWrite + Unpin,
{
    let connector = tokio_rustls::TlsConnector::from(config.clone());
    let name = ServerName::try_from(name.to_owned()).unwrap();
    bounded("TLS handshake through the tunnel", connector.connect(name, io)).await
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
pub fn peer_leaf<IO>(tls: &TlsStream<IO>) -> CertificateDer<'static> {
    tls.get_ref().1.peer_certificates().expect("peer certificates")[0].clone().into_owned()
}

/// The ALPN protocol agreed on a client TLS stream.
pub fn alpn<IO>(tls: &TlsStream<IO>) -> Option<Vec<u8>> {
    tls.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}
