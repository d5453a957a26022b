//! Issue 20: what real clients hit. robotsgate's own answers to `HEAD` (HTTP/1.1 on raw
//! sockets, HTTP/2 inside interception), `Via` on them, and the `431` that names its limit.
//!
//! Every test starts robotsgate with `RunningProxy::start` and real origins on loopback.

mod support;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use http::{Method, Request};
use robotsgate_proxy::config::{Config, Dur, PasswordHashValue, Size};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// `METHOD target HTTP/1.1` with `Host`, `Connection: close` and `extra` header lines.
fn raw_request(method: &str, target: &str, host: &str, extra: &str) -> String {
    format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

/// Sends the same request as `HEAD` and as `GET` on raw connections to `addr` and checks that
/// the `HEAD` answer is the `GET` answer's head with nothing after it: same status, same
/// `content-length` (the `GET` body's length), `Via` on both. Returns both.
async fn head_and_get(
    addr: std::net::SocketAddr,
    request: impl Fn(&str) -> String,
) -> (RawResponse, RawResponse) {
    let head = parse_response(&raw_exchange(addr, request("HEAD").as_bytes()).await);
    let get = parse_response(&raw_exchange(addr, request("GET").as_bytes()).await);
    check_head_answer(&head, &get);
    (head, get)
}

fn check_head_answer(head: &RawResponse, get: &RawResponse) {
    assert_eq!(head.status, get.status, "HEAD {head:?}\nGET {get:?}");
    assert!(head.body.is_empty(), "a body after the head of a HEAD answer: {head:?}");
    assert!(!get.body.is_empty(), "GET has a body: {get:?}");
    assert_eq!(head.header("content-length"), Some(get.body.len().to_string().as_str()), "{head:?}");
    assert_eq!(head.header("x-robotsgate"), get.header("x-robotsgate"));
    for r in [head, get] {
        assert!(r.header("via").is_some_and(|v| v.contains("robotsgate")), "no Via on {r:?}");
    }
}

fn config_with(dir: &Path, edit: impl FnOnce(&mut Config)) -> Config {
    let mut c = test_config(dir);
    edit(&mut c);
    c
}

// ---------------------------------------------------------------------------------------
// HEAD: robotsgate's own answers have no body, on HTTP/1.1 and HTTP/2
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_answers_to_head_have_no_body_and_carry_via_over_http1() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let proxy =
        RunningProxy::start(&config_with(dir.path(), |c| c.proxy.max_header_bytes = Size(2048))).await;
    let host = origin.authority();

    // 403 for a disallowed path.
    let (head, _) = head_and_get(proxy.addr, |m| raw_request(m, &origin.url("/private/x"), &host, "")).await;
    assert_eq!(head.status, 403);
    assert_eq!(head.header("x-robotsgate"), Some("disallowed"));
    // 502 for an origin that cannot be reached (robots.txt cannot be fetched).
    let dead = format!("127.0.0.1:{}", dead_port());
    let (head, _) =
        head_and_get(proxy.addr, |m| raw_request(m, &format!("http://{dead}/x"), &dead, "")).await;
    assert_eq!(head.status, 502, "{head:?}");
    // 400 for a request to the proxy itself.
    let (head, _) = head_and_get(proxy.addr, |m| raw_request(m, "/x", &host, "")).await;
    assert_eq!(head.header("x-robotsgate"), Some("not-a-proxy-request"));
    // 431 for a head over proxy.max_header_bytes, saying so.
    let filler = format!("X-Filler: {}\r\n", "a".repeat(3000));
    let (head, get) =
        head_and_get(proxy.addr, |m| raw_request(m, &origin.url("/page"), &host, &filler)).await;
    assert_eq!(head.status, 431);
    assert_eq!(head.header("x-robotsgate"), Some("header-too-large"));
    assert!(get.text().contains("proxy.max_header_bytes"), "{}", get.text());
    assert!(get.text().contains("at most 2048"), "{}", get.text());
    assert_eq!(origin.hits("/page"), 0, "nothing over the limit was forwarded");

    // The origin's own answer to HEAD passes as it is (its length, no body).
    let head = parse_response(
        &raw_exchange(proxy.addr, raw_request("HEAD", &origin.url("/page"), &host, "").as_bytes()).await,
    );
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty(), "{head:?}");
    assert_eq!(head.header("content-length"), Some("5"));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn auth_and_client_network_refusals_to_head_have_no_body() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let hash = robotsgate_proxy::auth::hash_password("pw").expect("hash");
    let proxy = RunningProxy::start(&config_with(dir.path(), |c| {
        c.auth.users.insert("alice".into(), PasswordHashValue(hash));
    }))
    .await;
    let (head, _) =
        head_and_get(proxy.addr, |m| raw_request(m, &origin.url("/page"), &origin.authority(), "")).await;
    assert_eq!(head.status, 407);
    assert!(head.header("proxy-authenticate").is_some_and(|v| v.starts_with("Basic")), "{head:?}");
    proxy.stop().await;

    let dir = temp_dir();
    let proxy = RunningProxy::start(&config_with(dir.path(), |c| {
        c.proxy.allow_clients = vec!["10.0.0.0/8".parse().unwrap()];
    }))
    .await;
    let (head, _) =
        head_and_get(proxy.addr, |m| raw_request(m, &origin.url("/page"), &origin.authority(), "")).await;
    assert_eq!(head.header("x-robotsgate"), Some("client-denied"));
    assert_eq!(origin.hits("/page"), 0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn own_answers_to_head_inside_interception_have_no_body_over_http2_and_http1() {
    let tls = Tls::new();
    let origin = tls.origin([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let mut config = tls.config();
    config.proxy.max_header_bytes = Size(2048);
    let proxy = RunningProxy::start(&config).await;
    let host = format!("localhost:{}", origin.port());
    let base = format!("https://{host}");

    // HTTP/2: HEAD and GET of a disallowed path, and of a head over the limit.
    let stream = tunnel(proxy.addr, &host, &tls.client(&[b"h2"]), "localhost").await;
    assert_eq!(alpn(&stream).as_deref(), Some(&b"h2"[..]));
    let mut h2c = h2(stream).await;
    let filler = "a".repeat(3000);
    for (path, filler, status, kind) in
        [("/private/x", "", 403, "disallowed"), ("/page", filler.as_str(), 431, "header-too-large")]
    {
        let mut got = Vec::new();
        for method in [Method::HEAD, Method::GET] {
            bounded("HTTP/2 ready", h2c.ready()).await.unwrap();
            let mut req = Request::builder().method(method).uri(format!("{base}{path}"));
            if !filler.is_empty() {
                req = req.header("x-filler", filler);
            }
            let res = bounded("HTTP/2 answer", h2c.send_request(req.body(empty()).unwrap())).await;
            got.push(collect(res.expect("an HTTP/2 answer, not a stream error")).await);
        }
        let (head, get) = (&got[0], &got[1]);
        assert_eq!(head.status.as_u16(), status, "{}", head.describe());
        assert_eq!(get.status.as_u16(), status, "{}", get.describe());
        assert_eq!(head.header("x-robotsgate"), kind);
        assert!(head.body.is_empty(), "DATA on a HEAD answer: {}", head.describe());
        assert_eq!(head.header("content-length"), get.body.len().to_string());
        assert!(head.header("via").contains("robotsgate"), "{}", head.describe());
    }
    drop(h2c);

    // HTTP/1.1 inside the tunnel, read raw: nothing after the head.
    for method in ["HEAD", "GET"] {
        let mut stream = tunnel(proxy.addr, &host, &tls.client(&[b"http/1.1"]), "localhost").await;
        let req = raw_request(method, "/private/x", &host, "");
        bounded("write", stream.write_all(req.as_bytes())).await.unwrap();
        let mut raw = Vec::new();
        let _ = bounded("read until close", stream.read_to_end(&mut raw)).await;
        let res = parse_response(&raw);
        assert_eq!(res.status, 403, "{res:?}");
        assert_eq!(res.body.is_empty(), method == "HEAD", "{method}: {res:?}");
    }
    assert_eq!(origin.hits("/private/x") + origin.hits("/page"), 0, "{:?}", origin.seen());

    // A client that speaks plain HTTP where TLS was expected: a HEAD gets no body.
    let (answer, mut tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    bounded("write", tcp.write_all(raw_request("HEAD", "/page", &host, "").as_bytes())).await.unwrap();
    let mut raw = Vec::new();
    let _ = bounded("read until close", tcp.read_to_end(&mut raw)).await;
    let res = parse_response(&raw);
    assert_eq!(res.status, 400, "{res:?}");
    assert_eq!(res.header("x-robotsgate"), Some("tls-expected"));
    assert!(res.body.is_empty(), "{res:?}");
    assert!(res.header("via").is_some(), "{res:?}");

    // Requests inside the tunnels are counted, by protocol, apart from the listener's.
    let text = proxy.metrics.render();
    for (series, n) in [
        (r#"robotsgate_requests_total{transport="intercepted",protocol="http2"}"#, 4),
        (r#"robotsgate_requests_total{transport="intercepted",protocol="http1"}"#, 2),
        (r#"robotsgate_requests_total{transport="proxy",protocol="http1"}"#, 4),
    ] {
        assert!(text.contains(&format!("{series} {n}\n")), "{series} {n}:\n{text}");
    }
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// WebSockets: ws:// through the proxy, wss:// inside interception
// ---------------------------------------------------------------------------------------

const WS_KEY: &str = "dGhlIHNhbXBsZSBub25jZQ==";
const WS_ACCEPT: &str = "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=";

/// A WebSocket opening handshake for `target` (RFC 6455 §1.3's key).
fn ws_handshake(target: &str, host: &str) -> String {
    format!(
        "GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: {WS_KEY}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
}

/// Writes `request` on `io` and reads the answer's head byte by byte (nothing after it is
/// consumed), then a `content-length` body.
async fn write_and_read_head<IO>(io: &mut IO, request: &str) -> RawResponse
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    bounded("write the handshake", io.write_all(request.as_bytes())).await.unwrap();
    read_head(io).await
}

/// Reads an answer's head byte by byte (nothing after it is consumed), then a
/// `content-length` body.
async fn read_head<IO>(io: &mut IO) -> RawResponse
where
    IO: tokio::io::AsyncRead + Unpin,
{
    let mut raw = Vec::new();
    bounded("the answer's head", async {
        while !raw.ends_with(b"\r\n\r\n") {
            raw.push(io.read_u8().await.expect("the answer's head"));
        }
    })
    .await;
    let mut res = parse_response(&raw);
    let len: usize = res.header("content-length").unwrap_or("0").parse().unwrap();
    res.body = vec![0; len];
    bounded("the answer's body", io.read_exact(&mut res.body)).await.unwrap();
    res
}

/// Sends `text` on `ws` and expects the origin's echo.
async fn ws_echo<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>, text: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    bounded("send", ws.send(Message::text(text))).await.expect("send");
    let got = bounded("echo", ws.next()).await.expect("a message").expect("a message");
    assert_eq!(got, Message::text(format!("echo: {text}")));
}

fn ws_origin_routes() -> [(&'static str, Reply); 4] {
    [
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/chat", Reply::websocket()),
        ("/private/chat", Reply::websocket()),
        // An origin that tries to pass its 101 for robotsgate's refusal.
        ("/spoofed-chat", Reply::websocket().header("x-robotsgate", "disallowed")),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_through_the_proxy_in_absolute_form() {
    use tokio_tungstenite::tungstenite::protocol::Role;
    let dir = temp_dir();
    let origin = TestOrigin::start(ws_origin_routes()).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.authority();

    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let res = write_and_read_head(&mut tcp, &ws_handshake(&origin.url("/chat"), &host)).await;
    assert_eq!(res.status, 101, "{res:?}");
    assert_eq!(res.header("sec-websocket-accept"), Some(WS_ACCEPT));
    assert!(res.header("upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket")), "{res:?}");
    assert!(res.header("via").is_some_and(|v| v.contains("robotsgate")), "{res:?}");
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(tcp, Role::Client, None).await;
    ws_echo(&mut ws, "hello").await;
    ws_echo(&mut ws, "and again").await;
    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    until("the origin sees the close", || origin.ws_closed() == 1).await;
    assert_eq!(origin.ws_messages(), 2);
    let seen = origin.seen_for("/chat");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["upgrade"], "websocket", "{:?}", seen[0].headers);
    assert!(seen[0].headers["via"].to_str().unwrap().contains("robotsgate"));

    // The origin's own x-robotsgate on its 101 does not reach the client.
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let res = write_and_read_head(&mut tcp, &ws_handshake(&origin.url("/spoofed-chat"), &host)).await;
    assert_eq!(res.status, 101, "{res:?}");
    assert_eq!(res.header("x-robotsgate"), None, "{res:?}");
    drop(tcp);

    // A disallowed path: 403, the origin never sees it.
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let res = write_and_read_head(&mut tcp, &ws_handshake(&origin.url("/private/chat"), &host)).await;
    assert_eq!(res.status, 403, "{res:?}");
    assert_eq!(res.header("x-robotsgate"), Some("disallowed"));
    assert_eq!(origin.hits("/private/chat"), 0);

    let records = proxy.records().await;
    let decisions = of_type(&records, "decision");
    let chat: Vec<_> = decisions.iter().filter(|d| d["url"] == origin.url("/chat").as_str()).collect();
    assert_eq!(chat.len(), 1, "one decision for the WebSocket: {records:#?}");
    assert_eq!(chat[0]["outcome"], "allowed");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_inside_an_intercepted_tunnel() {
    use tokio_tungstenite::tungstenite::Error as WsError;
    let tls = Tls::new();
    let origin = TestOrigin::start_tls(ws_origin_routes(), tls.origin_ca.server_config(&[b"http/1.1"])).await;
    let proxy = RunningProxy::start(&tls.config()).await;
    let host = format!("localhost:{}", origin.port());

    let stream = tunnel(proxy.addr, &host, &tls.client(&[b"http/1.1"]), "localhost").await;
    let url = format!("wss://{host}/chat");
    let (mut ws, res) =
        bounded("wss handshake", tokio_tungstenite::client_async(url.as_str(), stream)).await.expect("101");
    assert_eq!(res.status(), 101);
    assert!(res.headers()["via"].to_str().unwrap().contains("robotsgate"));
    ws_echo(&mut ws, "over wss").await;
    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    until("the origin sees the close", || origin.ws_closed() == 1).await;

    let stream = tunnel(proxy.addr, &host, &tls.client(&[b"http/1.1"]), "localhost").await;
    let url = format!("wss://{host}/private/chat");
    match bounded("wss handshake", tokio_tungstenite::client_async(url.as_str(), stream)).await {
        Err(WsError::Http(res)) => {
            assert_eq!(res.status(), 403);
            assert_eq!(res.headers()["x-robotsgate"], "disallowed");
        }
        other => panic!("a 403 for the disallowed path, got {:?}", other.map(|(_, r)| r)),
    }
    assert_eq!(origin.hits("/private/chat"), 0);
    assert_eq!(origin.hits("/chat"), 1);
    proxy.stop().await;
}

/// A tunnel and a WebSocket outlive the request that opened them: each keeps its
/// connection's place under `proxy.max_connections` until it ends. Before, the place was
/// given back when the connection was handed over, and a client held any number of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tunnels_and_websockets_keep_their_connections_place() {
    use tokio_tungstenite::tungstenite::protocol::Role;
    let tls = Tls::new();
    let secure = tls.origin([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let mut routes = ws_origin_routes().to_vec();
    routes.push(("/plain", Reply::ok("plain")));
    let plain = TestOrigin::start(routes).await;
    let mut config = tls.config();
    config.proxy.max_connections = 2;
    let proxy = RunningProxy::start(&config).await;
    let host = format!("localhost:{}", secure.port());

    // An intercepted tunnel, one request answered inside it.
    let mut inside = h1(tunnel(proxy.addr, &host, &tls.client(&[b"http/1.1"]), "localhost").await).await;
    assert_eq!(h1_get(&mut inside, &host, "/page").await.status, http::StatusCode::OK);
    // A WebSocket through the proxy.
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let res = write_and_read_head(&mut tcp, &ws_handshake(&plain.url("/chat"), &plain.authority())).await;
    assert_eq!(res.status, 101, "{res:?}");
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(tcp, Role::Client, None).await;
    ws_echo(&mut ws, "hello").await;

    // Both places are taken: a third client waits in the listen backlog.
    let (addr, url) = (proxy.addr, plain.url("/plain"));
    let third = tokio::spawn(async move { get(addr, &url).await });
    for _ in 0..2 {
        assert_eq!(h1_get(&mut inside, &host, "/page").await.status, http::StatusCode::OK);
        ws_echo(&mut ws, "still here").await;
    }
    assert_eq!(plain.hits("/plain"), 0, "the third connection is not served while both are open");
    assert!(!third.is_finished());

    // The tunnel ends: its place goes to the third client.
    drop(inside);
    let got = bounded("the third request", third).await.unwrap();
    assert_eq!(got.status, http::StatusCode::OK, "{}", got.text());
    assert_eq!(plain.hits("/plain"), 1);

    // The WebSocket still holds its place: beside a kept connection, a fourth client
    // waits until the WebSocket closes.
    let mut kept = proxy_conn(proxy.addr).await;
    assert_eq!(exchange(&mut kept, get_request(&plain.url("/plain"))).await.status, http::StatusCode::OK);
    let (addr, url) = (proxy.addr, plain.url("/plain"));
    let fourth = tokio::spawn(async move { get(addr, &url).await });
    for _ in 0..2 {
        assert_eq!(exchange(&mut kept, get_request(&plain.url("/plain"))).await.status, http::StatusCode::OK);
        ws_echo(&mut ws, "and again").await;
    }
    assert_eq!(plain.hits("/plain"), 4, "the fourth connection is not served while the WebSocket is open");
    assert!(!fourth.is_finished());
    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    let got = bounded("the fourth request", fourth).await.unwrap();
    assert_eq!(got.status, http::StatusCode::OK, "{}", got.text());
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// CONNECT to a port that is not intercepted: what the tunnel carries decides
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn websocket_through_connect_is_checked_per_path() {
    use tokio_tungstenite::tungstenite::Error as WsError;
    let dir = temp_dir();
    let origin = TestOrigin::start(ws_origin_routes()).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.authority();

    // What the websockets library does for ws://host:port through a proxy.
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let url = format!("ws://{host}/chat");
    let (mut ws, res) =
        bounded("ws handshake", tokio_tungstenite::client_async(url.as_str(), tcp)).await.expect("101");
    assert_eq!(res.status(), 101);
    ws_echo(&mut ws, "through CONNECT").await;
    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    until("the origin sees the close", || origin.ws_closed() == 1).await;

    // The path is checked inside the tunnel: a disallowed one gets robotsgate's 403 there.
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    let url = format!("ws://{host}/private/chat");
    match bounded("ws handshake", tokio_tungstenite::client_async(url.as_str(), tcp)).await {
        Err(WsError::Http(res)) => {
            assert_eq!(res.status(), 403);
            assert_eq!(res.headers()["x-robotsgate"], "disallowed");
        }
        other => panic!("a 403 for the disallowed path, got {:?}", other.map(|(_, r)| r)),
    }
    assert_eq!(origin.hits("/private/chat"), 0);
    assert_eq!(origin.hits("/chat"), 1);
    // robots.txt was fetched over http, not https.
    assert_eq!(origin.hits("/robots.txt"), 1);

    let records = proxy.records().await;
    let fetches = of_type(&records, "fetch");
    assert_eq!(fetches.len(), 1, "{records:#?}");
    assert_eq!(fetches[0]["url"], origin.url("/robots.txt").as_str());
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), 2, "one per request inside the tunnels, none for the CONNECTs: {records:#?}");
    for d in &decisions {
        check_decision_record(d);
        assert_eq!(d["method"], "GET");
        assert_eq!(d["path_visible"], true);
        assert_eq!(d["transport"], "connect-http", "{d}");
    }
    assert_eq!(decisions[0]["outcome"], "allowed");
    assert_eq!(decisions[1]["outcome"], "disallowed");
    let text = proxy.metrics.render();
    assert!(
        text.contains(r#"robotsgate_requests_total{transport="connect-http",protocol="http1"} 2"#),
        "{text}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_inside_connect_is_checked_per_request_on_one_tunnel() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.authority();
    // Raw sockets: the request line is read across several small writes (the peek waits
    // for enough of it).
    let (answer, mut tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    for piece in ["G", "ET /pa", &format!("ge HTTP/1.1\r\nHost: {host}\r\n\r\n")] {
        bounded("write", tcp.write_all(piece.as_bytes())).await.unwrap();
        bounded("flush", tcp.flush()).await.unwrap();
    }
    let res = read_head(&mut tcp).await;
    assert_eq!((res.status, res.text().as_str()), (200, "hello"), "{res:?}");
    let mut conn = h1(tcp).await;
    let got = h1_get(&mut conn, &host, "/private/x").await;
    assert_eq!(got.status, 403, "{}", got.describe());
    assert_eq!(origin.hits("/page"), 1);
    assert_eq!(origin.hits("/private/x"), 0);
    drop(conn);
    proxy.stop().await;
}

/// Any request line is HTTP, not only the common methods': empty lines first, another
/// method, a request line whose start stalls past `header_read_timeout`. Before, each was
/// taken for another protocol: the tunnel judged on `/` alone and its bytes passed on
/// (here refused, since `https://` robots.txt cannot be fetched from this origin; where
/// `/` is allowed, the origin served `/private/x`). A `CONNECT` inside the tunnel, which
/// opened such a tunnel, is refused and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_line_inside_connect_is_checked_and_a_connect_inside_is_refused() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let mut config = test_config(dir.path());
    config.proxy.header_read_timeout = Dur(Duration::from_secs(1));
    let proxy = RunningProxy::start(&config).await;
    let host = origin.authority();
    let tunnel_answer = |pieces: Vec<String>, pause: Duration| {
        let (addr, host) = (proxy.addr, host.clone());
        async move {
            let (answer, mut tcp) = connect(addr, &host).await;
            assert_eq!(answer.status, 200);
            for (i, piece) in pieces.iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(pause).await;
                }
                bounded("write", tcp.write_all(piece.as_bytes())).await.unwrap();
            }
            read_head(&mut tcp).await
        }
    };
    let rest = format!(" HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    for line in ["\r\nGET /private/x", "QUERY /private/x", "get /private/x"] {
        let got = tunnel_answer(vec![format!("{line}{rest}")], Duration::ZERO).await;
        assert_eq!(got.status, 403, "{line:?}: {got:?}");
    }
    // "G", then the rest after the sniffing gave up (hyper's own wait for the head is as
    // long again, from then).
    let got =
        tunnel_answer(vec!["G".into(), format!("ET /private/x{rest}")], Duration::from_millis(1300)).await;
    assert_eq!(got.status, 403, "{got:?}");
    let got = tunnel_answer(vec![format!("CONNECT {host}{rest}")], Duration::ZERO).await;
    assert_eq!((got.status, got.header("x-robotsgate")), (400, Some("bad-request")), "{got:?}");
    assert_eq!(origin.hits("/private/x"), 0);

    let records = proxy.records().await;
    let refused = of_type(&records, "refusal");
    assert_eq!(refused.len(), 1, "{records:#?}");
    let r = &refused[0];
    assert_eq!(
        (r["method"].as_str(), r["refusal"].as_str(), r["transport"].as_str(), r["status"].as_u64()),
        (Some("CONNECT"), Some("bad-request"), Some("connect-http"), Some(400)),
        "{r}"
    );
    proxy.stop().await;
}

/// A client that says nothing for longer than `header_read_timeout` and then sends a
/// request line is read as HTTP, each request checked on its path. Before, its silence
/// made the tunnel an opaque one, judged on `/` alone (here refused: this origin has no
/// `https://` robots.txt; where `/` was allowed, the later request reached the origin
/// unchecked). A tunnel that carries nothing either way for `tunnel_idle_timeout` is
/// closed and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_silent_at_first_is_still_read_and_a_silent_tunnel_is_closed() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let mut config = test_config(dir.path());
    config.proxy.header_read_timeout = Dur(Duration::from_millis(300));
    config.proxy.tunnel_idle_timeout = Dur(Duration::from_secs(2));
    let proxy = RunningProxy::start(&config).await;
    let host = origin.authority();
    let rest = format!(" HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    for (path, status) in [("/page", 200), ("/private/x", 403)] {
        let (answer, mut tcp) = connect(proxy.addr, &host).await;
        assert_eq!(answer.status, 200);
        // Silent for more than header_read_timeout (the behaviour under test, not a wait
        // for something to happen).
        tokio::time::sleep(Duration::from_millis(600)).await;
        bounded("write", tcp.write_all(format!("GET {path}{rest}").as_bytes())).await.unwrap();
        let got = read_head(&mut tcp).await;
        assert_eq!(got.status, status, "{path}: {got:?}");
    }
    assert_eq!((origin.hits("/page"), origin.hits("/private/x")), (1, 0));

    // Nothing either way: closed after tunnel_idle_timeout, and recorded.
    let (answer, mut tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    let mut rest = Vec::new();
    bounded("the close", tcp.read_to_end(&mut rest)).await.expect("closed, not reset");
    assert!(rest.is_empty(), "{rest:?}");
    let records = proxy.records().await;
    let refused = of_type(&records, "refusal");
    assert_eq!(refused.len(), 1, "{records:#?}");
    let r = &refused[0];
    assert_eq!(
        (r["method"].as_str(), r["transport"].as_str(), r["target"].as_str()),
        (Some("CONNECT"), Some("connect-opaque"), Some(host.as_str())),
        "{r}"
    );
    assert!(r.to_string().contains("carried nothing"), "{r}");
    proxy.stop().await;
}

/// A protocol whose server speaks first (SMTP, FTP, SSH's banner): the server's greeting
/// decides, not a timeout. Before, the client's silence was waited out for
/// `header_read_timeout` (here a minute, past the test's bound) before the host was
/// checked and the greeting passed on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_speaks_first_is_tunnelled_without_waiting() {
    let dir = temp_dir();
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = server.accept().await {
            tokio::spawn(async move {
                // Greets a moment after the connection, as a server that looks its client up
                // first does: the client's half-close below reaches the proxy before it.
                tokio::time::sleep(Duration::from_millis(300)).await;
                tcp.write_all(b"220 greetings\r\n").await?;
                let mut line = [0u8; 64];
                let n = tcp.read(&mut line).await?;
                if &line[..n] == b"QUIT\r\n" {
                    tcp.write_all(b"221 bye\r\n").await?;
                }
                tcp.shutdown().await
            });
        }
    });
    let mut config = test_config(dir.path());
    config.proxy.header_read_timeout = Dur(Duration::from_secs(60));
    // No robots.txt can be fetched from a server that is not HTTP: the host is let through.
    let overrides = Config::parse(
        "overrides.toml",
        "[[policy.overrides]]\nhosts = \"127.0.0.1\"\naction = \"allow\"\nreason = \"a test\"\n",
    )
    .unwrap();
    config.policy.overrides = overrides.policy.overrides;
    let proxy = RunningProxy::start(&config).await;
    let target = format!("127.0.0.1:{port}");
    let (answer, mut tcp) = connect(proxy.addr, &target).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut greeting = [0u8; 15];
    bounded("the greeting", tcp.read_exact(&mut greeting)).await.expect("the greeting");
    assert_eq!(&greeting, b"220 greetings\r\n");
    bounded("write", tcp.write_all(b"QUIT\r\n")).await.unwrap();
    let mut rest = Vec::new();
    bounded("the end", tcp.read_to_end(&mut rest)).await.unwrap();
    assert_eq!(rest, b"221 bye\r\n");
    drop(tcp);
    // A client that closes its side at once (a banner grab) still gets the greeting
    // (before this, it got a close).
    let (answer, mut tcp) = connect(proxy.addr, &target).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    bounded("half-close", tcp.shutdown()).await.unwrap();
    let mut all = Vec::new();
    bounded("the greeting", tcp.read_to_end(&mut all)).await.unwrap();
    assert_eq!(all, b"220 greetings\r\n");
    drop(tcp);
    let records = proxy.records().await;
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), 2, "{records:#?}");
    for d in decisions {
        assert_eq!(
            (d["transport"].as_str(), d["outcome"].as_str()),
            (Some("connect-opaque"), Some("allowed")),
            "{d}"
        );
    }
    proxy.stop().await;
}

/// `GET *` inside a tunnel goes to the origin as `GET /*`, and is checked as `/*` (before,
/// as `/`: under `Allow: /$` and `Disallow: /` it was allowed, and the origin got `/*`;
/// found by a review in intercepted tunnels, which serve requests as sniffed ones do).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_asterisk_target_in_a_tunnel_is_checked_as_it_is_sent() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nAllow: /$\nDisallow: /\n")),
        ("/", Reply::ok("home")),
        ("/*", Reply::ok("star")),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.authority();
    for (target, status) in [("/", 200), ("*", 403)] {
        let (answer, mut tcp) = connect(proxy.addr, &host).await;
        assert_eq!(answer.status, 200);
        let request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
        bounded("write", tcp.write_all(request.as_bytes())).await.unwrap();
        let got = read_head(&mut tcp).await;
        assert_eq!(got.status, status, "{target}: {got:?}");
    }
    assert_eq!(origin.hits("/*"), 0);
    proxy.stop().await;
}

/// A request body the client malformed (a chunk size past any number, a bare LF) is the
/// client's error: `400 bad-request`, recorded as such, not `502 upstream-error` blaming
/// the origin and counted among its failures (as it was).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_request_body_is_the_clients_400_not_the_origins_502() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/upload", Reply::upload())]).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.authority();
    let url = origin.url("/upload");
    for body in ["ffffffffffffffffffff\r\nx\r\n0\r\n\r\n", "3\nabc\n0\r\n\r\n"] {
        let head = format!(
            "POST {url} HTTP/1.1\r\nHost: {host}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
        );
        let got = parse_response(&raw_exchange(proxy.addr, format!("{head}{body}").as_bytes()).await);
        assert_eq!((got.status, got.header("x-robotsgate")), (400, Some("bad-request")), "{body:?}: {got:?}");
    }
    let records = proxy.records().await;
    let outcomes = of_type(&records, "outcome");
    assert_eq!(outcomes.len(), 2, "{records:#?}");
    for o in outcomes {
        assert_eq!((o["status"].as_u64(), o["refusal"].as_str()), (Some(400), Some("bad-request")), "{o}");
    }
    let text = proxy.metrics.render();
    assert!(!text.contains("robotsgate_upstream_errors_total{"), "{text}");
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Upstream connections end with their clients (issue 21: descriptors held after a load run)
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_connections_are_released_when_clients_leave() {
    const CLIENTS: usize = 64;
    let dir = temp_dir();
    let together = Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/together", Reply::ok("all at once").wait_together(&together)),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;

    // Keep-alive clients that each send enough requests in a row to the origin to be given
    // an upstream connection of their own, and first all wait at the origin together (as
    // many pooled upstream connections as clients).
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let (addr, url, page) = (proxy.addr, origin.url("/together"), origin.url("/page"));
        clients.push(tokio::spawn(async move {
            let mut conn = proxy_conn(addr).await;
            assert_eq!(exchange(&mut conn, get_request(&url)).await.status, 200);
            for _ in 0..24 {
                assert_eq!(exchange(&mut conn, get_request(&page)).await.status, 200);
            }
            conn
        }));
    }
    let mut conns = Vec::new();
    for c in clients {
        conns.push(bounded("a client's requests", c).await.unwrap());
    }
    assert!(origin.open_connections() >= CLIENTS, "{} open", origin.open_connections());
    // The clients leave: their kept connections close, and the pool keeps a few idle ones.
    drop(conns);
    // At most the pool's idle connections stay (and the robots.txt fetcher's one).
    until("upstream connections released", || origin.open_connections() <= 32 + 1).await;
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// What the client finally got: outcome records
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_decision_has_an_outcome_with_the_status_and_bytes_sent() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/big", Reply::pattern(1_000_000)),
        ("/stalls", Reply::pattern(1_000_000).stall_after(100_000)),
        ("/chat", Reply::websocket()),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.authority();

    assert_eq!(get(proxy.addr, &origin.url("/page")).await.status, 200);
    let big = get(proxy.addr, &origin.url("/big")).await;
    assert_eq!(big.body.len(), 1_000_000);
    let denied = get(proxy.addr, &origin.url("/private/x")).await;
    assert_eq!(denied.status, 403);
    let head = parse_response(
        &raw_exchange(proxy.addr, raw_request("HEAD", &origin.url("/page"), &host, "").as_bytes()).await,
    );
    assert_eq!(head.status, 200);
    let dead = format!("http://127.0.0.1:{}/x", dead_port());
    assert_eq!(get(proxy.addr, &dead).await.status, 502);
    // A client that goes away mid-body: the bytes it was handed are on record.
    let res = send(proxy.addr, get_request(&origin.url("/stalls"))).await;
    let mut body = res.into_body();
    let mut got = 0;
    while got < 100_000 {
        let frame = bounded("a frame", http_body_util::BodyExt::frame(&mut body)).await.unwrap().unwrap();
        got += frame.data_ref().map_or(0, |d| d.len());
    }
    drop(body);
    // A WebSocket: its bytes both ways when it closes.
    use tokio_tungstenite::tungstenite::protocol::Role;
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let res = write_and_read_head(&mut tcp, &ws_handshake(&origin.url("/chat"), &host)).await;
    assert_eq!(res.status, 101);
    let mut ws = tokio_tungstenite::WebSocketStream::from_raw_socket(tcp, Role::Client, None).await;
    ws_echo(&mut ws, "count me").await;
    bounded("close", ws.close(None)).await.unwrap();
    drop(ws);

    let outcome = |url: &str| {
        let url = url.to_owned();
        let proxy = &proxy;
        async move {
            bounded("the outcome record", async {
                loop {
                    let records = proxy.records().await;
                    let decision =
                        of_type(&records, "decision").into_iter().find(|d| d["url"] == url.as_str()).cloned();
                    if let Some(d) = decision {
                        let id = &d["request_id"];
                        if records.iter().any(|r| r["type"] == "outcome" && r["request_id"] == *id) {
                            return outcome_of(&records, &d).clone();
                        }
                    }
                    tokio::task::yield_now().await;
                }
            })
            .await
        }
    };
    let o = outcome(&origin.url("/page")).await;
    assert_eq!(
        (o["status"].as_u64(), o["answered_by"].as_str(), o["end"].as_str()),
        (Some(200), Some("origin"), Some("complete")),
        "{o}"
    );
    assert_eq!(o["bytes"], 5);
    let o = outcome(&origin.url("/big")).await;
    assert_eq!((o["bytes"].as_u64(), o["end"].as_str()), (Some(1_000_000), Some("complete")), "{o}");
    let o = outcome(&origin.url("/private/x")).await;
    assert_eq!(
        (o["status"].as_u64(), o["answered_by"].as_str(), o["refusal"].as_str()),
        (Some(403), Some("robotsgate"), Some("disallowed")),
        "{o}"
    );
    assert_eq!(o["bytes"].as_u64(), Some(denied.body.len() as u64), "{o}");
    let o = outcome(&dead).await;
    assert_eq!(
        (o["status"].as_u64(), o["refusal"].as_str()),
        (Some(502), Some("upstream-unreachable")),
        "{o}"
    );
    let o = outcome(&origin.url("/stalls")).await;
    assert_eq!(o["end"], "client-gone", "{o}");
    let bytes = o["bytes"].as_u64().unwrap();
    assert!((100_000..1_000_000).contains(&bytes), "{o}");
    let o = outcome(&origin.url("/chat")).await;
    assert_eq!((o["status"].as_u64(), o["end"].as_str()), (Some(101), Some("closed")), "{o}");
    assert!(o["bytes"].as_u64().unwrap() > 0 && o["bytes_from_client"].as_u64().unwrap() > 0, "{o}");
    // HEAD: the status, no bytes. (Two decisions on /page: find the HEAD's.)
    let records = proxy.records().await;
    let head_d = of_type(&records, "decision").into_iter().find(|d| d["method"] == "HEAD").cloned().unwrap();
    let o = outcome_of(&records, &head_d);
    assert_eq!(
        (o["status"].as_u64(), o["bytes"].as_u64(), o["end"].as_str()),
        (Some(200), Some(0), Some("complete")),
        "{o}"
    );
    // One outcome per decision, none without one.
    let decisions = of_type(&records, "decision");
    for d in &decisions {
        check_decision_record(d);
        assert_eq!(d["transport"], "proxy", "{d}");
        outcome_of(&records, d);
    }
    assert_eq!(of_type(&records, "outcome").len(), decisions.len());
    proxy.stop().await;
}
