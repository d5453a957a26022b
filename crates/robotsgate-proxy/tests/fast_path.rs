//! The kept upstream connection's fast path (`forward/h1.rs`): a client connection's
//! requests in a row to one origin (from the 17th) go over a connection that robotsgate
//! reads itself. Whatever framing the origin uses reaches the client whole. A response
//! that cannot be read is a 502, and its connection is never used again. An origin that
//! closed the connection while it was idle costs the request nothing.

mod support;

use http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use support::*;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// Requests in a row that make sure the kept connection is open and in use (it is opened
/// in the background after the 16th).
const WARM_UP: usize = 40;

/// Sends `req` on `client`: the status and the whole body, or why they could not be read.
async fn try_exchange(
    client: &mut hyper::client::conn::http1::SendRequest<ReqBody>,
    req: Request<ReqBody>,
) -> Result<(StatusCode, Vec<u8>), String> {
    bounded("connection ready", client.ready()).await.expect("the client connection stays open");
    let res = bounded("response", client.send_request(req)).await.map_err(|e| format!("head: {e}"))?;
    let status = res.status();
    let body = bounded("body", res.into_body().collect()).await.map_err(|e| format!("body: {e}"))?;
    Ok((status, body.to_bytes().to_vec()))
}

/// Warms `client` up on `url` until its requests go over the kept connection, and gives
/// the origin's number for that connection (the last warm-up request's).
async fn warm_up(client: &mut hyper::client::conn::http1::SendRequest<ReqBody>, url: &str) {
    for i in 0..WARM_UP {
        let got = exchange(client, get_request(url)).await;
        assert_eq!(got.status, StatusCode::OK, "warm-up request {i}: {}", got.text());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_a_hyper_origin_sends_comes_through_the_kept_connection_whole() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/warm", Reply::ok("w")),
        ("/big", Reply::pattern(300_000)),
        ("/slow", Reply::pattern(50_000).drip(4096, std::time::Duration::from_millis(1))),
        ("/none", Reply::status(204)),
        ("/same", Reply::status(304).header("etag", "\"v1\"")),
        ("/bye", Reply::ok("bye").header("connection", "close")),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let mut client = proxy_conn(proxy.addr).await;
    warm_up(&mut client, &origin.url("/warm")).await;
    let kept = origin.seen_for("/warm").last().unwrap().connection;
    assert!(kept > 1, "the warm-up ends on a kept connection of its own (connection {kept})");

    let got = exchange(&mut client, get_request(&origin.url("/big"))).await;
    assert_eq!((got.status, got.body.len()), (StatusCode::OK, 300_000));
    assert!(got.body == pattern(300_000), "the body is the origin's, byte for byte");
    let got = exchange(&mut client, get_request(&origin.url("/slow"))).await;
    assert!(got.body == pattern(50_000), "a body arriving in pieces is whole");
    let mut head = get_request(&origin.url("/big"));
    *head.method_mut() = Method::HEAD;
    let got = exchange(&mut client, head).await;
    assert_eq!((got.status, got.header("content-length"), got.body.len()), (StatusCode::OK, "300000", 0));
    let got = exchange(&mut client, get_request(&origin.url("/none"))).await;
    assert_eq!((got.status, got.body.len()), (StatusCode::NO_CONTENT, 0));
    let got = exchange(&mut client, get_request(&origin.url("/same"))).await;
    assert_eq!((got.status, got.header("etag")), (StatusCode::NOT_MODIFIED, "\"v1\""));
    for path in ["/big", "/slow", "/none", "/same"] {
        let seen = origin.seen_for(path);
        assert!(seen.iter().all(|s| s.connection == kept), "{path} went over the kept connection");
    }

    // The origin closes the kept connection with its answer: the next requests go on
    // (through the pool, then over a new kept connection).
    let got = exchange(&mut client, get_request(&origin.url("/bye"))).await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "bye"));
    assert_eq!(origin.seen_for("/bye")[0].connection, kept);
    warm_up(&mut client, &origin.url("/warm")).await;
    let again = origin.seen_for("/warm").last().unwrap().connection;
    assert!(again > kept, "a new kept connection (connection {again})");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn framings_a_hyper_origin_never_sends_are_read_as_rfc_9112_says() {
    let origin = RawOrigin::start(ROBOTS, |path| match path {
        "/chunked" => (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
              5;name=value\r\nhello\r\n6\r\n world\r\n0\r\nX-Trailer: t\r\n\r\n"
                .to_vec(),
            false,
        ),
        "/early" => (
            b"HTTP/1.1 103 Early Hints\r\nLink: </a.css>; rel=preload\r\n\r\n\
              HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nafter"
                .to_vec(),
            false,
        ),
        "/until-close" => (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\nto the end".to_vec(), true),
        "/idle-close" => (ok("closing quietly"), true),
        _ => (ok("w"), false),
    })
    .await;
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let mut client = proxy_conn(proxy.addr).await;
    warm_up(&mut client, &origin.url("/warm")).await;
    let kept = origin.connection_of("/warm");

    for (path, body) in [("/chunked", "hello world"), ("/early", "after")] {
        let got = exchange(&mut client, get_request(&origin.url(path))).await;
        assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, body), "{path}");
        assert_eq!(origin.connection_of(path), kept, "{path} went over the kept connection");
    }
    // A body that ends when the origin closes: whole, and the connection is not kept.
    let got = exchange(&mut client, get_request(&origin.url("/until-close"))).await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "to the end"));
    assert_eq!(origin.connection_of("/until-close"), kept);
    let got = exchange(&mut client, get_request(&origin.url("/warm"))).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_ne!(origin.connection_of("/warm"), kept, "the closed connection was not used again");

    // An origin that closes a kept connection while it is idle, without saying so: the
    // next request finds it closed and goes through the pool, answered.
    warm_up(&mut client, &origin.url("/warm")).await;
    let kept = origin.connection_of("/warm");
    let got = exchange(&mut client, get_request(&origin.url("/idle-close"))).await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "closing quietly"));
    assert_eq!(origin.connection_of("/idle-close"), kept);
    let before = origin.hits("/after-idle");
    let got = exchange(&mut client, get_request(&origin.url("/after-idle"))).await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "w"), "{}", got.text());
    assert_eq!(origin.hits("/after-idle"), before + 1, "sent once");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_that_cannot_be_read_is_a_502_and_its_connection_is_not_used_again() {
    let origin = RawOrigin::start(ROBOTS, |path| match path {
        "/two-lengths" => {
            (b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\nabcd".to_vec(), false)
        }
        "/te-in-1.0" => {
            (b"HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\na\r\n0\r\n\r\n".to_vec(), false)
        }
        "/switch" => (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n".to_vec(), false),
        "/half-head" => (b"HTTP/1.1 200 OK\r\nContent-Le".to_vec(), true),
        "/bare-lf-chunk" => {
            (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n".to_vec(), false)
        }
        "/short-body" => (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nnot a hundred".to_vec(), true),
        _ => (ok("w"), false),
    })
    .await;
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let mut client = proxy_conn(proxy.addr).await;
    for path in ["/two-lengths", "/te-in-1.0", "/switch", "/half-head"] {
        warm_up(&mut client, &origin.url("/warm")).await;
        let kept = origin.connection_of("/warm");
        let (status, body) = try_exchange(&mut client, get_request(&origin.url(path))).await.unwrap();
        let body = String::from_utf8(body).unwrap();
        assert_eq!(status, StatusCode::BAD_GATEWAY, "{path}: {body}");
        assert!(body.contains("the origin failed"), "{path}: {body}");
        assert_eq!(origin.connection_of(path), kept, "{path} went over the kept connection");
        let got = exchange(&mut client, get_request(&origin.url("/warm"))).await;
        assert_eq!(got.status, StatusCode::OK, "after {path}");
        assert_ne!(origin.connection_of("/warm"), kept, "after {path}: its connection was not used again");
    }
    // A body that breaks off after its head was read: the client's response breaks off
    // too, never a complete-looking one, and the client's connection with it.
    for path in ["/bare-lf-chunk", "/short-body"] {
        warm_up(&mut client, &origin.url("/warm")).await;
        let kept = origin.connection_of("/warm");
        let got = try_exchange(&mut client, get_request(&origin.url(path))).await;
        assert!(got.is_err(), "{path}: the response broke off, not {got:?}");
        assert_eq!(origin.connection_of(path), kept, "{path} went over the kept connection");
        client = proxy_conn(proxy.addr).await;
    }
    proxy.stop().await;
}

/// An origin that sends part of a body on the kept connection and then nothing (the
/// connection left open): the response breaks off after `upstream_read_timeout`, and the
/// connection is not used again. (The pool's path: `proxy_e2e`.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_the_origin_stops_sending_on_the_kept_connection_is_cut_off() {
    let origin = RawOrigin::start(ROBOTS, |path| match path {
        "/stalls" => (b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nnot a hundred".to_vec(), false),
        _ => (ok("w"), false),
    })
    .await;
    let dir = temp_dir();
    let mut config = test_config(dir.path());
    config.proxy.upstream_read_timeout = robotsgate_proxy::config::Dur(std::time::Duration::from_millis(500));
    let proxy = RunningProxy::start(&config).await;
    let mut client = proxy_conn(proxy.addr).await;
    warm_up(&mut client, &origin.url("/warm")).await;
    let kept = origin.connection_of("/warm");
    // Bounded: without the bound on the origin's silence, the body never ends.
    let got = try_exchange(&mut client, get_request(&origin.url("/stalls"))).await;
    assert!(got.is_err(), "the response broke off, not {got:?}");
    assert_eq!(origin.connection_of("/stalls"), kept, "it went over the kept connection");
    let mut client = proxy_conn(proxy.addr).await;
    warm_up(&mut client, &origin.url("/warm")).await;
    assert_ne!(origin.connection_of("/warm"), kept, "the stalled connection was not used again");
    proxy.stop().await;
}

/// The same exchanges through the pool (hyper's client) and over the fast path: the origin
/// gets the same request bytes, and the client the same answer (status, reason, fields in
/// their order, body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fast_path_sends_and_answers_as_the_pool_does() {
    let origin = RawOrigin::start(ROBOTS, |path| match path {
        "/fields" => (FIELDS.to_vec(), false),
        "/chunked" => (
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nX-Why: gone\r\n\r\n\
              3\r\nnot\r\n6\r\n found\r\n0\r\n\r\n"
                .to_vec(),
            false,
        ),
        _ => (ok("w"), false),
    })
    .await;
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let request = |path: &str| {
        let mut req = get_request(&origin.url(path));
        let headers = req.headers_mut();
        headers.insert("user-agent", "ExampleBot/1.0 (+https://example.com/bot)".parse().unwrap());
        headers.append("accept", "text/html".parse().unwrap());
        headers.append("accept", "*/*;q=0.1".parse().unwrap());
        headers.insert("x-empty", "".parse().unwrap());
        req
    };
    let mut kept_client = proxy_conn(proxy.addr).await;
    warm_up(&mut kept_client, &origin.url("/warm")).await;
    let kept = origin.connection_of("/warm");
    for path in ["/fields", "/chunked"] {
        // A new client connection's first request goes through the pool.
        let mut fresh = proxy_conn(proxy.addr).await;
        let pooled = exchange_whole(&mut fresh, request(path)).await;
        assert_ne!(origin.connection_of(path), kept, "{path}: the first went through the pool");
        let fast = exchange_whole(&mut kept_client, request(path)).await;
        assert_eq!(origin.connection_of(path), kept, "{path}: the second over the kept connection");
        let heads = origin.heads(path);
        assert_eq!(heads[0], heads[1], "{path}: the origin got the same request from both");
        assert_eq!(pooled, fast, "{path}: the client got the same answer from both");
    }
    proxy.stop().await;
}

/// Status, reason phrase, the fields in order (`Date` aside: it is the proxy's clock) and
/// the body of an exchange.
async fn exchange_whole(
    client: &mut hyper::client::conn::http1::SendRequest<ReqBody>,
    req: Request<ReqBody>,
) -> (StatusCode, Option<Vec<u8>>, Vec<(String, Vec<u8>)>, Vec<u8>) {
    bounded("connection ready", client.ready()).await.expect("the client connection stays open");
    let res = bounded("response", client.send_request(req)).await.expect("a response");
    let (parts, body) = res.into_parts();
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>().map(|r| r.as_bytes().to_vec());
    let fields = parts
        .headers
        .iter()
        .filter(|(name, _)| *name != http::header::DATE)
        .map(|(name, value)| (name.to_string(), value.as_bytes().to_vec()))
        .collect();
    let body = bounded("body", body.collect()).await.expect("the body").to_bytes().to_vec();
    (parts.status, reason, fields, body)
}

/// `http://host?q=1`, an absolute target without a path (hyper's client adds the `/`
/// itself; a raw client need not), goes out as `/?q=1` over the kept connection, as
/// through the pool. The fast path sent `?q=1`, which strict origins answer with `400`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_absolute_target_without_a_path_is_sent_with_one() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let origin = RawOrigin::start(ROBOTS, |_| (ok("w"), false)).await;
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let host = origin.addr.to_string();
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let mut buf = Vec::new();
    let mut get = async |target: &str| -> String {
        let request = format!("GET {target} HTTP/1.1\r\nHost: {host}\r\n\r\n");
        bounded("write", tcp.write_all(request.as_bytes())).await.unwrap();
        let head = bounded("head", robotsgate_testkit::head::read_head(&mut tcp, &mut buf)).await.unwrap();
        let head = String::from_utf8(head).unwrap();
        let len: usize = head
            .lines()
            .find_map(|l| l.to_ascii_lowercase().strip_prefix("content-length: ").map(str::to_owned))
            .map_or(0, |v| v.trim().parse().unwrap());
        while buf.len() < len {
            let mut more = [0u8; 512];
            let n = bounded("body", tcp.read(&mut more)).await.unwrap();
            assert!(n > 0, "the body ends early");
            buf.extend_from_slice(&more[..n]);
        }
        buf.drain(..len);
        head
    };
    for _ in 0..WARM_UP {
        assert!(get(&origin.url("/warm")).await.starts_with("HTTP/1.1 200"));
    }
    let kept = origin.connection_of("/warm");
    assert!(get(&format!("http://{host}?q=1")).await.starts_with("HTTP/1.1 200"));
    assert_eq!(origin.hits("/?q=1"), 1, "{:?}", origin.heads("?q=1"));
    assert_eq!(origin.connection_of("/?q=1"), kept, "over the kept connection");
    proxy.stop().await;
}

/// A 101 for a request that asked for no upgrade is the origin's error: 502, through the
/// pool and over the kept connection alike (before, it was passed on: an HTTP/1.1 client
/// got a 101 without `Upgrade` and lost its next request, an HTTP/2 one a protocol error).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_101_nobody_asked_for_is_a_502() {
    const SWITCH: &[u8] = b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\nConnection: upgrade\r\n\r\n";
    let origin = RawOrigin::start(ROBOTS, |path| match path {
        "/switch" => (SWITCH.to_vec(), true),
        _ => (ok("w"), false),
    })
    .await;
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let got = get(proxy.addr, &origin.url("/switch")).await;
    assert_eq!(
        (got.status, got.header("x-robotsgate")),
        (StatusCode::BAD_GATEWAY, "upstream-error"),
        "{}",
        got.text()
    );
    let mut kept = proxy_conn(proxy.addr).await;
    warm_up(&mut kept, &origin.url("/warm")).await;
    let got = exchange(&mut kept, get_request(&origin.url("/switch"))).await;
    assert_eq!(
        (got.status, got.header("x-robotsgate")),
        (StatusCode::BAD_GATEWAY, "upstream-error"),
        "{}",
        got.text()
    );
    assert_eq!(origin.connection_of("/switch"), origin.connection_of("/warm"), "over the kept connection");
    proxy.stop().await;
}
