//! Issue 5: path-level robots.txt enforcement for HTTPS through TLS interception of
//! `CONNECT` tunnels, end to end on loopback.
//!
//! Each test makes an ORIGIN CA with rcgen (its leaf names `localhost`, `bypass.test` and
//! `127.0.0.1`) for an HTTPS origin, and robotsgate's own CA with `init_ca`. robotsgate
//! trusts the origin CA (`tls.extra_roots`, no webpki roots); the client trusts ONLY
//! robotsgate's CA, sends `CONNECT localhost:PORT` by hand, reads the `200`, then does TLS
//! with SNI `localhost` through the tunnel and speaks HTTP/1.1 or HTTP/2 inside it.
//!
//! Every test starts robotsgate with `App::start` (the real configuration path); the tests
//! that count minted leaves read `robotsgate_tls_leaves_minted` from its metrics, which
//! takes the interceptor's count each time they are rendered. The measurements are in
//! `measure_interception` (ignored; run with
//! `cargo test --release --test intercept -- --ignored --nocapture`).

mod support;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{StatusCode, Version};
use robotsgate_proxy::config::{Config, Dur};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::sync::Barrier;

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// The files every test starts from: a temp folder, the origin CA (PEM written), and
/// robotsgate's CA folder.
struct Setup {
    dir: tempfile::TempDir,
    origin_ca: TestCa,
    origin_pem: PathBuf,
    ca_dir: PathBuf,
}

impl Setup {
    fn new() -> Setup {
        let dir = temp_dir();
        let origin_ca = origin_ca("trusted");
        let origin_pem = origin_ca.write_pem(&dir.path().join("origin-ca.pem"));
        let ca_dir = proxy_ca(dir.path());
        Setup { dir, origin_ca, origin_pem, ca_dir }
    }

    /// Interception of every port, the origin CA trusted by robotsgate.
    fn config(&self) -> Config {
        intercept_config(self.dir.path(), &self.ca_dir, std::slice::from_ref(&self.origin_pem))
    }

    /// A client trusting only robotsgate's CA.
    fn client(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        client_config(proxy_roots(&self.ca_dir), alpn)
    }
}

/// A body that would show any re-encoding: every byte value, HTTP-looking bytes, and
/// 300 kB of a pseudo-random pattern.
fn binary_body() -> Vec<u8> {
    let mut v: Vec<u8> = (0..=255u8).collect();
    v.extend_from_slice(b"\r\n\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\0\0\xff\xfe");
    v.extend_from_slice(&pattern(300_000));
    v
}

/// A CA for origins (not robotsgate's), its leaf for [`ORIGIN_NAMES`] and `127.0.0.1`.
fn origin_ca(label: &str) -> TestCa {
    let mut names = ORIGIN_NAMES.to_vec();
    names.push("127.0.0.1");
    TestCa::new(&format!("origin {label}"), &names)
}

/// An HTTPS origin presenting `ca`'s leaf, speaking HTTP/2 or HTTP/1.1 (by ALPN).
async fn tls_origin<'a>(ca: &TestCa, routes: impl IntoIterator<Item = (&'a str, Reply)>) -> TestOrigin {
    TestOrigin::start_tls(routes, ca.server_config(&[b"h2", b"http/1.1"])).await
}

fn decision_for<'a>(records: &'a [serde_json::Value], url: &str) -> &'a serde_json::Value {
    let decisions = of_type(records, "decision");
    let found: Vec<_> = decisions.into_iter().filter(|d| d["url"] == url).collect();
    assert_eq!(found.len(), 1, "one decision record for {url}: {records:#?}");
    check_decision_record(found[0]);
    found[0]
}

// ---------------------------------------------------------------------------------------
// HTTP/1.1 and HTTP/2 inside intercepted tunnels
// ---------------------------------------------------------------------------------------

/// An intercepted handshake presents the chain as intercepting proxies do: the minted leaf,
/// then robotsgate's CA certificate (what Chromium's `--ignore-certificate-errors-spki-list`
/// matches, issue 31.6).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_handshake_presents_the_leaf_then_the_ca() {
    let s = Setup::new();
    let origin = tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS))]).await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());
    let tls = tunnel(proxy.addr, &host, &s.client(&[b"http/1.1"]), "localhost").await;
    let chain = tls.get_ref().1.peer_certificates().expect("the server's certificates").to_vec();
    assert_eq!(chain.len(), 2, "leaf and CA");
    let ca = robotsgate::net::load_pem_certs(&s.ca_dir.join(robotsgate_proxy::ca::CA_CERT)).unwrap();
    assert_eq!(chain[1], ca[0], "the second is robotsgate's CA certificate");
    assert_ne!(chain[0], ca[0], "the first is the leaf");
    drop(tls);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http1_inside_the_tunnel_is_checked_per_path() {
    let s = Setup::new();
    let body = binary_body();
    let origin = tls_origin(
        &s.origin_ca,
        [
            ("/robots.txt", Reply::ok(ROBOTS)),
            ("/page", Reply::ok(body.clone())),
            ("/private/report.pdf", Reply::ok("secret")),
        ],
    )
    .await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());

    let tls = tunnel(proxy.addr, &host, &s.client(&[b"http/1.1"]), "localhost").await;
    assert_eq!(alpn(&tls).as_deref(), Some(&b"http/1.1"[..]));
    let mut conn = h1(tls).await;

    let got = h1_get(&mut conn, &host, "/page").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(got.body.len(), body.len());
    assert!(got.body.as_ref() == body.as_slice(), "body changed on the way through interception");
    assert!(got.header("via").contains("robotsgate"), "{:?}", got.headers);
    assert!(got.headers.get("x-robotsgate").is_none());

    // Same TLS connection: the disallowed path is answered by robotsgate inside TLS.
    let got = h1_get(&mut conn, &host, "/private/report.pdf").await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.describe());
    assert_eq!(got.header("x-robotsgate"), "disallowed");
    let url = format!("https://{host}/private/report.pdf");
    assert!(got.text().contains(&url), "{}", got.text());
    assert!(got.text().contains("disallow: /private"), "{}", got.text());
    assert_eq!(origin.hits("/private/report.pdf"), 0, "the origin never sees the refused request");

    // And the connection keeps serving after a refusal.
    let got = h1_get(&mut conn, &host, "/page").await;
    assert_eq!(got.status, StatusCode::OK);
    assert!(got.body.as_ref() == body.as_slice());

    assert_eq!(origin.hits("/page"), 2);
    assert_eq!(origin.hits("/robots.txt"), 1, "robots.txt fetched once, over https");
    assert_eq!(origin.hits("/private/report.pdf"), 0);

    let records = proxy.records().await;
    let d = decision_for(&records, &url);
    assert_eq!(d["method"], "GET");
    assert_eq!(d["path_visible"], true);
    assert_eq!(d["outcome"], "disallowed");
    assert_eq!(d["origin"], format!("https://{host}"));
    assert_eq!(d["rule"]["pattern"], "/private");
    assert_eq!(d["robots"]["url"], format!("https://{host}/robots.txt"));
    let allowed: Vec<_> = of_type(&records, "decision")
        .into_iter()
        .filter(|d| d["url"] == format!("https://{host}/page"))
        .collect();
    assert_eq!(allowed.len(), 2, "{records:#?}");
    assert!(allowed.iter().all(|d| d["outcome"] == "allowed" && d["path_visible"] == true));
    assert!(
        of_type(&records, "decision").iter().all(|d| d["method"] != "CONNECT"),
        "an intercepted CONNECT is decided per request inside, not at host level: {records:#?}"
    );
    drop(conn);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_inside_the_tunnel_is_checked_per_path_with_concurrent_streams() {
    const TOGETHER: usize = 6;
    const REFUSED: usize = 4;
    let s = Setup::new();
    let body = binary_body();
    let barrier = Arc::new(Barrier::new(TOGETHER));
    let origin = tls_origin(
        &s.origin_ca,
        [
            ("/robots.txt", Reply::ok(ROBOTS)),
            ("/page", Reply::ok(body.clone())),
            ("/together", Reply::ok("all at once").wait_together(&barrier)),
        ],
    )
    .await;
    let proxy = RunningProxy::start(&s.config()).await;
    let base = format!("https://localhost:{}", origin.port());

    let tls = tunnel(
        proxy.addr,
        &format!("localhost:{}", origin.port()),
        &s.client(&[b"h2", b"http/1.1"]),
        "localhost",
    )
    .await;
    assert_eq!(alpn(&tls).as_deref(), Some(&b"h2"[..]), "robotsgate offers h2 to the client");
    let mut conn = h2(tls).await;

    let (version, got) = h2_get(&mut conn, &format!("{base}/page")).await;
    assert_eq!(version, Version::HTTP_2);
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert!(got.body.as_ref() == body.as_slice(), "body changed on the way through interception (h2)");

    let (_, got) = h2_get(&mut conn, &format!("{base}/private/x")).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.describe());
    assert_eq!(got.header("x-robotsgate"), "disallowed");
    assert_eq!(origin.hits("/private/x"), 0);

    // Streams at once on this one connection: the origin answers /together only when all
    // TOGETHER requests are in flight, so they cannot have been served one after another;
    // refusals interleave with them.
    let mut tasks = Vec::new();
    for i in 0..TOGETHER + REFUSED {
        let mut c = conn.clone();
        let url = if i < TOGETHER { format!("{base}/together?i={i}") } else { format!("{base}/private/{i}") };
        tasks.push(tokio::spawn(async move { (i, h2_get(&mut c, &url).await) }));
    }
    for t in tasks {
        let (i, (version, got)) = bounded("concurrent stream", t).await.unwrap();
        assert_eq!(version, Version::HTTP_2);
        if i < TOGETHER {
            assert_eq!(got.status, StatusCode::OK, "stream {i}: {}", got.describe());
            assert_eq!(got.body.as_ref(), b"all at once");
        } else {
            assert_eq!(got.status, StatusCode::FORBIDDEN, "stream {i}: {}", got.describe());
            assert_eq!(got.header("x-robotsgate"), "disallowed");
        }
    }
    assert_eq!(origin.hits("/together"), TOGETHER);
    let private: usize =
        origin.all_hits().iter().filter(|(p, _)| p.starts_with("/private")).map(|(_, n)| *n).sum();
    assert_eq!(private, 0, "no refused request reached the origin: {:?}", origin.all_hits());

    let records = proxy.records().await;
    let d = decision_for(&records, &format!("{base}/private/x"));
    assert_eq!(d["path_visible"], true);
    assert_eq!(d["outcome"], "disallowed");
    assert_eq!(of_type(&records, "decision").len(), 2 + TOGETHER + REFUSED);
    drop(conn);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// The minted leaf
// ---------------------------------------------------------------------------------------

/// An origin's own `x-robotsgate` header never reaches the client through interception
/// (HTTP/1.1 and HTTP/2): otherwise an origin's `200` could pass for robotsgate's refusal.
/// A connection inside a tunnel that goes quiet (no byte, no request) for
/// `proxy.header_read_timeout` is closed, as the listener closes its own: before, a client
/// that finished its handshake and said nothing more (or kept an HTTP/2 connection without
/// a stream) held the tunnel for good.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_quiet_connection_inside_a_tunnel_is_closed() {
    let s = Setup::new();
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hi"))]).await;
    let mut config = s.config();
    config.proxy.header_read_timeout = Dur(Duration::from_millis(600));
    let proxy = RunningProxy::start(&config).await;
    let host = format!("localhost:{}", origin.port());

    // Silent after the handshake, HTTP/1.1 and HTTP/2 agreed alike.
    for protocol in [&b"http/1.1"[..], b"h2"] {
        let mut tls = tunnel(proxy.addr, &host, &s.client(&[protocol]), "localhost").await;
        let started = Instant::now();
        let mut buf = [0u8; 64];
        let read = bounded("the quiet tunnel is closed", tls.read(&mut buf)).await;
        assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
        assert!(started.elapsed() >= Duration::from_millis(600), "closed after {:?}", started.elapsed());
    }

    // HTTP/2: a request answered, then no stream: the connection ends.
    let tls = tunnel(proxy.addr, &host, &s.client(&[b"h2"]), "localhost").await;
    let (mut sender, conn) = bounded(
        "HTTP/2 handshake",
        hyper::client::conn::http2::handshake(
            hyper_util::rt::TokioExecutor::new(),
            hyper_util::rt::TokioIo::new(tls),
        ),
    )
    .await
    .unwrap();
    let driver = tokio::spawn(conn);
    let (_, got) = h2_get(&mut sender, &format!("https://{host}/page")).await;
    assert_eq!(got.status, StatusCode::OK);
    let ended = bounded("the quiet HTTP/2 connection ends", driver).await.unwrap();
    assert!(ended.is_ok(), "closed with a GOAWAY: {ended:?}");
    assert!(sender.is_closed());
    // Idle connections closed as quiet are not cuts.
    let cut = |reason: &str| proxy.metric(&format!("robotsgate_clients_cut_total{{reason=\"{reason}\"}}"));
    assert_eq!((cut("quiet"), cut("send-timeout"), cut("stuck")), (0.0, 0.0, 0.0));

    // A client that asks for a large answer and reads none of it: nothing moves while the
    // answer is sent, and the connection is closed as quiet (header_read_timeout, before
    // send_timeout): a cut, counted as such (before, counted nowhere).
    let big = tls_origin(
        &s.origin_ca,
        [("/robots.txt", Reply::ok(ROBOTS)), ("/big", Reply::ok(pattern(32 * 1024 * 1024)))],
    )
    .await;
    let host = format!("localhost:{}", big.port());
    let mut tls = tunnel(proxy.addr, &host, &s.client(&[b"http/1.1"]), "localhost").await;
    let request = format!("GET /big HTTP/1.1\r\nHost: {host}\r\n\r\n");
    bounded("write", tls.write_all(request.as_bytes())).await.unwrap();
    until("the reader is cut", || cut("quiet") == 1.0).await;
    assert_eq!((cut("send-timeout"), cut("stuck")), (0.0, 0.0));
    drop(tls);
    proxy.stop().await;
}

/// An HTTP/2 client inside a tunnel that grants no flow-control window for its answer (and
/// answers the pings) is closed after `proxy.send_timeout`: before, it held the answer and
/// its upstream request for good (no write waits, bytes move).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http2_client_inside_a_tunnel_that_grants_no_window_is_closed() {
    let s = Setup::new();
    let origin = tls_origin(
        &s.origin_ca,
        [("/robots.txt", Reply::ok(ROBOTS)), ("/big", Reply::ok(pattern(1024 * 1024)))],
    )
    .await;
    let mut config = s.config();
    config.proxy.send_timeout = Dur(Duration::from_millis(500));
    let proxy = RunningProxy::start(&config).await;
    let host = format!("localhost:{}", origin.port());
    let tls = tunnel(proxy.addr, &host, &s.client(&[b"h2"]), "localhost").await;
    let (mut sender, conn) = bounded(
        "HTTP/2 handshake",
        hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
            .initial_stream_window_size(0)
            .handshake(hyper_util::rt::TokioIo::new(tls)),
    )
    .await
    .unwrap();
    let driver = tokio::spawn(conn);
    let req = http::Request::get(format!("https://{host}/big"))
        .body(http_body_util::Empty::<Bytes>::new())
        .unwrap();
    let res = bounded("the head", sender.send_request(req)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    let started = Instant::now();
    bounded("the connection ends", driver).await.unwrap().ok();
    assert!(started.elapsed() >= Duration::from_millis(400), "closed after {:?}", started.elapsed());
    assert!(sender.is_closed());
    assert_eq!(proxy.metric(r#"robotsgate_clients_cut_total{reason="stuck"}"#), 1.0);
    drop(res);
    proxy.stop().await;
}

/// A client resumes its TLS session with the proxy for the name it began with, and only
/// for it: the sessions of every intercepted host are kept in one bounded store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_resumes_for_its_own_name_only() {
    use rustls::HandshakeKind;
    let s = Setup::new();
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hi"))]).await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());
    let client = s.client(&[b"http/1.1"]);

    let tls = tunnel(proxy.addr, &host, &client, "localhost").await;
    assert_eq!(tls.get_ref().1.handshake_kind(), Some(HandshakeKind::Full));
    // A request read back: the client has the session tickets sent after the handshake.
    let mut conn = h1(tls).await;
    assert_eq!(h1_get(&mut conn, &host, "/page").await.status, StatusCode::OK);
    drop(conn);

    let again = tunnel(proxy.addr, &host, &client, "localhost").await;
    assert_eq!(again.get_ref().1.handshake_kind(), Some(HandshakeKind::Resumed));
    let other = tunnel(proxy.addr, "other.test:443", &client, "other.test").await;
    assert_eq!(other.get_ref().1.handshake_kind(), Some(HandshakeKind::Full), "another name, a new session");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origins_x_robotsgate_header_is_removed_inside_the_tunnel() {
    let s = Setup::new();
    let origin = tls_origin(
        &s.origin_ca,
        [
            ("/robots.txt", Reply::ok(ROBOTS)),
            ("/spoof", Reply::ok("the origin's page").header("x-robotsgate", "disallowed")),
        ],
    )
    .await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());

    let tls = tunnel(proxy.addr, &host, &s.client(&[b"http/1.1"]), "localhost").await;
    let mut conn = h1(tls).await;
    let got = h1_get(&mut conn, &host, "/spoof").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert!(got.headers.get("x-robotsgate").is_none(), "h1: {:?}", got.headers);
    assert_eq!(got.text(), "the origin's page");

    let tls = tunnel(proxy.addr, &host, &s.client(&[b"h2"]), "localhost").await;
    let mut conn = h2(tls).await;
    let (version, got) = h2_get(&mut conn, &format!("https://{host}/spoof")).await;
    assert_eq!(version, Version::HTTP_2);
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert!(got.headers.get("x-robotsgate").is_none(), "h2: {:?}", got.headers);
    assert_eq!(origin.hits("/spoof"), 2);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_leaf_is_for_the_connect_host_and_is_minted_once() {
    let s = Setup::new();
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("page"))]).await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());
    let client = s.client(&[b"http/1.1"]);
    assert_eq!(proxy.minted(), 0);

    let mut leaves = Vec::new();
    for round in 1..=3 {
        let tls = tunnel(proxy.addr, &host, &client, "localhost").await;
        leaves.push(peer_leaf(&tls));
        let mut conn = h1(tls).await;
        let got = h1_get(&mut conn, &host, "/page").await;
        assert_eq!(got.status, StatusCode::OK, "round {round}: {}", got.describe());
        assert_eq!(proxy.minted(), 1, "round {round}: the cached leaf is reused");
    }
    assert!(leaves.iter().all(|l| *l == leaves[0]), "the same leaf in every tunnel");
    let leaf = &leaves[0];
    verify(leaf, proxy_roots(&s.ca_dir), "localhost")
        .expect("the leaf verifies for localhost with the proxy CA");
    assert!(verify(leaf, s.origin_ca.roots(), "localhost").is_err(), "it is not the origin's certificate");
    assert_ne!(leaf, s.origin_ca.leaf());
    let err = verify(leaf, proxy_roots(&s.ca_dir), "other.test").unwrap_err();
    assert!(format!("{err}").contains("not valid for name"), "{err}");

    // A client that expects another name through a tunnel to localhost refuses the leaf.
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    let err =
        handshake(&client, "other.test", tcp).await.expect_err("the leaf is for localhost, not other.test");
    assert!(err.to_string().contains("not valid for name"), "{err}");
    assert_eq!(proxy.minted(), 1);

    // An IP-address CONNECT gets an IP-address leaf (a second mint).
    let ip_host = format!("127.0.0.1:{}", origin.port());
    let tls = tunnel(proxy.addr, &ip_host, &client, "127.0.0.1").await;
    let ip_leaf = peer_leaf(&tls);
    assert_ne!(&ip_leaf, leaf);
    verify(&ip_leaf, proxy_roots(&s.ca_dir), "127.0.0.1").unwrap();
    assert!(verify(&ip_leaf, proxy_roots(&s.ca_dir), "localhost").is_err());
    let mut conn = h1(tls).await;
    assert_eq!(h1_get(&mut conn, &ip_host, "/page").await.status, StatusCode::OK);
    assert_eq!(proxy.minted(), 2);
    drop(conn);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_handshakes_for_a_new_host_mint_one_leaf() {
    const N: usize = 20;
    let s = Setup::new();
    let mut config = s.config();
    config.dns.static_hosts.insert("fresh.test".into(), vec!["127.0.0.1".parse().unwrap()]);
    let proxy = RunningProxy::start(&config).await;
    let client = s.client(&[b"http/1.1"]);
    let addr = proxy.addr;
    assert_eq!(proxy.minted(), 0);

    // All CONNECTs are answered first, then all handshakes start together.
    let start = Arc::new(Barrier::new(N));
    let mut tasks = Vec::new();
    for _ in 0..N {
        let (client, start) = (client.clone(), start.clone());
        tasks.push(tokio::spawn(async move {
            let (answer, tcp) = connect(addr, "fresh.test:8443").await;
            assert_eq!(answer.status, 200, "{answer:?}");
            bounded("all tunnels open", start.wait()).await;
            peer_leaf(&handshake(&client, "fresh.test", tcp).await.expect("handshake as fresh.test"))
        }));
    }
    let mut leaves = Vec::new();
    for t in tasks {
        leaves.push(bounded("handshake task", t).await.unwrap());
    }
    assert_eq!(proxy.minted(), 1, "{N} handshakes for one new host mint one leaf");
    assert!(leaves.iter().all(|l| *l == leaves[0]));
    verify(&leaves[0], proxy_roots(&s.ca_dir), "fresh.test").unwrap();
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Origins robotsgate does not trust
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_origin_certificate_gives_502_and_no_request_reaches_it() {
    let s = Setup::new();
    let routes = || [("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n")), ("/page", Reply::ok("page"))];
    let trusted = tls_origin(&s.origin_ca, routes()).await;
    let unknown_ca = origin_ca("unknown");
    let untrusted = tls_origin(&unknown_ca, routes()).await;
    let proxy = RunningProxy::start(&s.config()).await;
    let client = s.client(&[b"http/1.1"]);

    let host = format!("localhost:{}", untrusted.port());
    let mut conn = h1(tunnel(proxy.addr, &host, &client, "localhost").await).await;
    for path in ["/page", "/robots.txt"] {
        let got = h1_get(&mut conn, &host, path).await;
        assert_eq!(got.status, StatusCode::BAD_GATEWAY, "{path}: {}", got.describe());
        assert_eq!(got.header("x-robotsgate"), "upstream-unreachable", "{path}");
        let text = got.text();
        assert!(text.contains("TLS with localhost failed"), "{path}: {text}");
        assert!(text.contains("certificate") && text.contains("UnknownIssuer"), "{path}: {text}");
    }
    assert!(untrusted.connections() >= 1, "robotsgate did try the origin");
    assert_eq!(untrusted.handshakes(), 0, "no TLS handshake completed with the untrusted origin");
    assert_eq!(untrusted.total_hits(), 0, "no HTTP request reached the untrusted origin");

    // The same proxy reaches the trusted origin (the 502 is about the certificate).
    let host = format!("localhost:{}", trusted.port());
    let mut conn = h1(tunnel(proxy.addr, &host, &client, "localhost").await).await;
    let got = h1_get(&mut conn, &host, "/page").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(got.body.as_ref(), b"page");

    let records = proxy.records().await;
    let d = decision_for(&records, &format!("https://localhost:{}/page", untrusted.port()));
    assert_eq!(d["path_visible"], true);
    assert_eq!(d["outcome"], "disallowed");
    assert_eq!(d["reason"], "robots-unreachable");
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Tunnels that are not intercepted
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bypass_hosts_are_tunnelled_with_the_host_level_check() {
    let s = Setup::new();
    let closed = tls_origin(
        &s.origin_ca,
        [("/robots.txt", Reply::ok("User-agent: *\nDisallow: /\n")), ("/", Reply::ok("closed"))],
    )
    .await;
    let open = tls_origin(
        &s.origin_ca,
        [("/robots.txt", Reply::ok(ROBOTS)), ("/private/x", Reply::ok("private, unseen by robotsgate"))],
    )
    .await;
    let mut config = s.config();
    config.tls.bypass = vec!["bypass.test".parse().unwrap()];
    let proxy = RunningProxy::start(&config).await;

    // Host-level check: robots.txt disallows / so the CONNECT itself is refused.
    let (answer, _tcp) = connect(proxy.addr, &format!("bypass.test:{}", closed.port())).await;
    assert_eq!(answer.status, 403, "{answer:?} {}", answer.text());
    assert_eq!(answer.header("x-robotsgate"), Some("disallowed"));
    assert_eq!(closed.hits("/robots.txt"), 1);
    assert_eq!(closed.total_hits(), 1, "only the robots.txt fetch: {:?}", closed.all_hits());

    // Allowed host: a plain tunnel to the origin, whose own certificate the client sees.
    let (answer, tcp) = connect(proxy.addr, &format!("bypass.test:{}", open.port())).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let tls = handshake(&client_config(s.origin_ca.roots(), &[b"http/1.1"]), "bypass.test", tcp)
        .await
        .expect("the origin's certificate, verified with the origin CA");
    assert_eq!(&peer_leaf(&tls), s.origin_ca.leaf());
    let host = format!("bypass.test:{}", open.port());
    let mut conn = h1(tls).await;
    let got = h1_get(&mut conn, &host, "/private/x").await;
    assert_eq!(got.status, StatusCode::OK, "the path is not visible to robotsgate: {}", got.describe());
    assert_eq!(open.hits("/private/x"), 1);

    // A client trusting only robotsgate's CA cannot talk to a bypassed host.
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    let err =
        handshake(&s.client(&[b"http/1.1"]), "bypass.test", tcp).await.expect_err("not robotsgate's leaf");
    assert!(err.to_string().contains("UnknownIssuer"), "{err}");

    // Hosts not on the list are intercepted by the same proxy.
    let local = format!("localhost:{}", open.port());
    let mut conn = h1(tunnel(proxy.addr, &local, &s.client(&[b"http/1.1"]), "localhost").await).await;
    let got = h1_get(&mut conn, &local, "/private/x").await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.describe());
    assert_eq!(open.hits("/private/x"), 1);

    let records = proxy.records().await;
    let d = decision_for(&records, &format!("https://bypass.test:{}/", closed.port()));
    assert_eq!((d["method"].as_str(), d["path_visible"].as_bool()), (Some("CONNECT"), Some(false)));
    assert_eq!(d["outcome"], "disallowed");
    let open_url = format!("https://bypass.test:{}/", open.port());
    let opened: Vec<_> = of_type(&records, "decision").into_iter().filter(|d| d["url"] == open_url).collect();
    assert_eq!(opened.len(), 2, "two tunnels to the open bypass host: {records:#?}");
    for d in opened {
        check_decision_record(d);
        assert_eq!((d["method"].as_str(), d["path_visible"].as_bool()), (Some("CONNECT"), Some(false)));
        assert_eq!(d["outcome"], "allowed");
    }
    let d = decision_for(&records, &format!("https://localhost:{}/private/x", open.port()));
    assert_eq!((d["method"].as_str(), d["path_visible"].as_bool()), (Some("GET"), Some(true)));
    proxy.stop().await;
}

/// A tunnel that is not intercepted is checked for its `CONNECT` host; its TLS client must
/// then ask for that host (SNI). One that names another (domain fronting: both served from
/// one address, the first checked, the second reached) gets the TLS alert `access_denied`
/// and a refusal record, whether the host is decided before the `200` (a bypassed host)
/// or after it (a port not intercepted); before, the tunnel carried it to the other host.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_whose_tls_client_asks_for_another_host_is_refused() {
    let s = Setup::new();
    // `/` of localhost is closed to bots, and `bypass.test` is the same server.
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/private/x", Reply::ok("private"))])
            .await;
    let mut config = s.config();
    config.tls.bypass = vec!["bypass.test".parse().unwrap()];
    config.tls.intercept_ports = vec![1];
    let proxy = RunningProxy::start(&config).await;
    let roots = || client_config(s.origin_ca.roots(), &[b"http/1.1"]);
    let (bypassed, sniffed) =
        (format!("bypass.test:{}", origin.port()), format!("localhost:{}", origin.port()));
    for (target, other) in [(&bypassed, "localhost"), (&sniffed, "bypass.test")] {
        // Its own name: through.
        let own = target.split(':').next().unwrap();
        let (answer, tcp) = connect(proxy.addr, target).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let tls = handshake(&roots(), own, tcp).await.expect("its own name passes");
        let got = h1_get(&mut h1(tls).await, target, "/private/x").await;
        assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
        // Another name (the origin would answer it: its leaf names both): refused.
        let (answer, tcp) = connect(proxy.addr, target).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let err = handshake(&roots(), other, tcp).await.expect_err("refused");
        assert!(err.to_string().contains("AccessDenied"), "{target} as {other}: {err}");
    }
    assert_eq!(origin.hits("/private/x"), 2, "only the tunnels that named their host");

    // The refused tunnel's outcome is written as its task ends, after the alert.
    let records = bounded("the refused tunnel's outcome", async {
        loop {
            let records = proxy.records().await;
            if of_type(&records, "outcome").iter().any(|o| o["refusal"] == "bad-request") {
                return records;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let refusals: Vec<_> = of_type(&records, "refusal");
    for (target, other, transport) in
        [(&bypassed, "localhost", "connect"), (&sniffed, "bypass.test", "connect-tls")]
    {
        let r = refusals
            .iter()
            .find(|r| r["target"] == target.as_str())
            .unwrap_or_else(|| panic!("no refusal for {target}: {refusals:#?}"));
        assert_eq!(
            (r["method"].as_str(), r["transport"].as_str()),
            (Some("CONNECT"), Some(transport)),
            "{r}"
        );
        let text = r.to_string();
        assert!(text.contains(&format!("asks for \\\"{other}\\\"")), "{text}");
    }
    // The bypassed host's CONNECT was decided (and recorded) before its `200`: its refusal
    // is keyed by that decision, and its outcome says it was refused. The sniffed port's
    // was refused before any decision: its refusal is its only record.
    let id_of = |target: &str| {
        refusals.iter().find(|r| r["target"] == target).map(|r| r["request_id"].as_str().unwrap().to_owned())
    };
    let bypassed_id = id_of(&bypassed).unwrap();
    let decisions: Vec<_> = of_type(&records, "decision")
        .into_iter()
        .filter(|d| d["request_id"] == bypassed_id.as_str())
        .collect();
    assert_eq!(decisions.len(), 1, "{records:#?}");
    assert_eq!(
        (decisions[0]["method"].as_str(), decisions[0]["outcome"].as_str()),
        (Some("CONNECT"), Some("allowed"))
    );
    let outcomes: Vec<_> = of_type(&records, "outcome")
        .into_iter()
        .filter(|o| o["request_id"] == bypassed_id.as_str())
        .collect();
    assert_eq!(outcomes.len(), 1, "{records:#?}");
    let o = outcomes[0];
    assert_eq!(
        (
            o["status"].as_u64(),
            o["answered_by"].as_str(),
            o["refusal"].as_str(),
            o["bytes"].as_u64(),
            o["end"].as_str()
        ),
        (Some(400), Some("robotsgate"), Some("bad-request"), Some(0), Some("client-gone")),
        "{o}"
    );
    let sniffed_id = id_of(&sniffed).unwrap();
    assert_ne!(sniffed_id, bypassed_id);
    assert!(records.iter().filter(|r| r["request_id"] == sniffed_id.as_str()).count() == 1, "{records:#?}");
    proxy.stop().await;
}

/// A TLS client that waits longer than `header_read_timeout` before its ClientHello is
/// held to its host all the same on a port that is not intercepted. Before, its silence
/// handed the tunnel over unread (a protocol whose server speaks first), and the other
/// name reached the origin.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_client_that_waits_before_its_client_hello_is_still_held_to_its_host() {
    let s = Setup::new();
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("page"))]).await;
    let mut config = s.config();
    config.tls.intercept_ports = vec![1];
    config.proxy.header_read_timeout = Dur(Duration::from_millis(300));
    let proxy = RunningProxy::start(&config).await;
    let roots = || client_config(s.origin_ca.roots(), &[b"http/1.1"]);
    let target = format!("localhost:{}", origin.port());
    for (name, passes) in [("localhost", true), ("bypass.test", false)] {
        let (answer, tcp) = connect(proxy.addr, &target).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        // Silent past header_read_timeout: the behaviour under test.
        tokio::time::sleep(Duration::from_millis(600)).await;
        match handshake(&roots(), name, tcp).await {
            Ok(tls) if passes => {
                let got = h1_get(&mut h1(tls).await, &target, "/page").await;
                assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
            }
            Err(e) if !passes => assert!(e.to_string().contains("AccessDenied"), "{e}"),
            other => panic!("{name}: {:?}", other.map(|_| "a handshake")),
        }
    }
    assert_eq!(origin.hits("/page"), 1);
    let records = proxy.records().await;
    let refusals = of_type(&records, "refusal");
    assert_eq!(refusals.len(), 1, "{records:#?}");
    assert!(refusals[0].to_string().contains("asks for \\\"bypass.test\\\""), "{}", refusals[0]);
    proxy.stop().await;
}

/// A server that speaks first (a banner), then takes TLS at once, on a port that is not
/// intercepted: the tunnel is handed over on the server's banner, before the client has
/// said anything, and the client's first bytes are held until judged. A ClientHello for
/// another host than the CONNECT's is refused (before, it reached the server: the banner
/// decided the tunnel was opaque); one for its own host goes through; an HTTP request is
/// refused (no HTTP server speaks first, and an opaque tunnel would not check its path).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_servers_banner_the_clients_first_bytes_are_still_checked() {
    let s = Setup::new();
    let server = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = server.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(s.origin_ca.server_config(&[b"http/1.1"]));
    let reached = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let seen = reached.clone();
    tokio::spawn(async move {
        while let Ok((mut tcp, _)) = server.accept().await {
            let (acceptor, seen) = (acceptor.clone(), seen.clone());
            tokio::spawn(async move {
                tcp.write_all(b"220 ready\r\n").await.ok()?;
                let mut tls = acceptor.accept(tcp).await.ok()?;
                seen.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                tls.write_all(b"hello over TLS").await.ok()?;
                tls.shutdown().await.ok()
            });
        }
    });
    let mut config = s.config();
    config.tls.intercept_ports = vec![1];
    // No robots.txt can be fetched from this server: the host is let through.
    let overrides = Config::parse(
        "overrides.toml",
        "[[policy.overrides]]\nhosts = \"localhost\"\naction = \"allow\"\nreason = \"a test\"\n",
    )
    .unwrap();
    config.policy.overrides = overrides.policy.overrides;
    let proxy = RunningProxy::start(&config).await;
    let target = format!("localhost:{port}");
    let roots = || client_config(s.origin_ca.roots(), &[b"http/1.1"]);
    let banner = |target: String| {
        let addr = proxy.addr;
        async move {
            let (answer, mut tcp) = connect(addr, &target).await;
            assert_eq!(answer.status, 200, "{answer:?}");
            let mut banner = [0u8; 11];
            bounded("the banner", tcp.read_exact(&mut banner)).await.unwrap();
            assert_eq!(&banner, b"220 ready\r\n");
            tcp
        }
    };
    // Another host: refused with the alert, and the server never finishes a handshake.
    let tcp = banner(target.clone()).await;
    let err = handshake(&roots(), "bypass.test", tcp).await.expect_err("refused");
    assert!(err.to_string().contains("AccessDenied"), "{err}");
    // Its own host: through.
    let tcp = banner(target.clone()).await;
    let mut tls = handshake(&roots(), "localhost", tcp).await.expect("its own name passes");
    let mut got = Vec::new();
    bounded("the server's bytes", tls.read_to_end(&mut got)).await.ok();
    assert_eq!(got, b"hello over TLS");
    assert_eq!(reached.load(std::sync::atomic::Ordering::SeqCst), 1);
    // An HTTP request: refused, the tunnel closed.
    let mut tcp = banner(target.clone()).await;
    bounded("write", tcp.write_all(format!("GET /private/x HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes()))
        .await
        .unwrap();
    let mut rest = Vec::new();
    let _ = bounded("the close", tcp.read_to_end(&mut rest)).await;
    assert!(rest.is_empty(), "{:?}", String::from_utf8_lossy(&rest));

    drop((tls, tcp));
    // The refused tunnels' outcomes are written as they end.
    let records = bounded("the refused tunnels' outcomes", async {
        loop {
            let records = proxy.records().await;
            if of_type(&records, "outcome").iter().filter(|o| o["refusal"] == "bad-request").count() == 2 {
                return records;
            }
            tokio::task::yield_now().await;
        }
    })
    .await;
    let refusals = of_type(&records, "refusal");
    assert_eq!(refusals.len(), 2, "{records:#?}");
    assert!(refusals[0].to_string().contains("asks for \\\"bypass.test\\\""), "{}", refusals[0]);
    assert!(refusals[1].to_string().contains("an HTTP request"), "{}", refusals[1]);
    for r in refusals {
        assert_eq!(
            (r["transport"].as_str(), r["target"].as_str()),
            (Some("connect-opaque"), Some(target.as_str())),
            "{r}"
        );
        // Keyed by the tunnel's decision, made on the server's banner.
        let id = r["request_id"].as_str().unwrap();
        let decided = of_type(&records, "decision").into_iter().filter(|d| d["request_id"] == id).count();
        assert_eq!(decided, 1, "{records:#?}");
    }
    proxy.stop().await;
}

/// A tunnel still waiting for its client's first bytes when the proxy begins to shut down
/// has carried nothing: it is closed then, not held for the whole shutdown grace (here a
/// minute, past the test's bound). Every place that waits: a bypassed host (TLS expected,
/// checked before the `200`), a port that is not intercepted (read after it; also one
/// whose client sent the start of a line), an intercepted port (its TLS handshake).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_waiting_for_its_first_bytes_is_closed_on_shutdown() {
    let s = Setup::new();
    let origin = tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS))]).await;
    let intercepted = tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS))]).await;
    let mut config = s.config();
    config.tls.bypass = vec!["bypass.test".parse().unwrap()];
    config.tls.intercept_ports = vec![intercepted.port()];
    config.proxy.shutdown_grace = Dur(Duration::from_secs(60));
    config.proxy.header_read_timeout = Dur(Duration::from_secs(60));
    config.tls.handshake_timeout = Dur(Duration::from_secs(60));
    let proxy = RunningProxy::start(&config).await;
    let mut tunnels = Vec::new();
    // A bypassed host, a port not intercepted (silent, and with the start of a line), an
    // intercepted port.
    let sniffed = format!("localhost:{}", origin.port());
    for (target, first) in [
        (format!("bypass.test:{}", origin.port()), ""),
        (sniffed.clone(), ""),
        (sniffed, "\r\n"),
        (format!("localhost:{}", intercepted.port()), ""),
    ] {
        let (answer, mut tcp) = connect(proxy.addr, &target).await;
        assert_eq!(answer.status, 200, "{target}: {answer:?}");
        bounded("write", tcp.write_all(first.as_bytes())).await.unwrap();
        tunnels.push(tcp);
    }
    proxy.stop().await;
    for mut tcp in tunnels {
        let mut rest = Vec::new();
        bounded("the close", tcp.read_to_end(&mut rest)).await.expect("closed");
        assert!(rest.is_empty(), "{rest:?}");
    }
}

/// `policy.mode = "report-only"` and `"off"`: a TLS client that asks for another host than
/// its tunnel's goes through (report-only says so in the proxy's log; neither writes a
/// refusal record), as every other decision of those modes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_asking_for_another_host_passes_in_report_only_and_off() {
    use robotsgate_proxy::config::ModeName;
    let s = Setup::new();
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("page"))]).await;
    for mode in [ModeName::ReportOnly, ModeName::Off] {
        let mut config = s.config();
        config.tls.bypass = vec!["bypass.test".parse().unwrap()];
        config.policy.mode = mode;
        let proxy = RunningProxy::start(&config).await;
        let target = format!("bypass.test:{}", origin.port());
        let (answer, tcp) = connect(proxy.addr, &target).await;
        assert_eq!(answer.status, 200, "{answer:?}");
        let tls = handshake(&client_config(s.origin_ca.roots(), &[b"http/1.1"]), "localhost", tcp)
            .await
            .unwrap_or_else(|e| panic!("{mode:?}: {e}"));
        let got = h1_get(&mut h1(tls).await, &target, "/page").await;
        assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
        let records = proxy.records().await;
        assert!(of_type(&records, "refusal").is_empty(), "{mode:?}: {records:#?}");
        proxy.stop().await;
    }
    assert_eq!(origin.hits("/page"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ports_not_listed_are_tunnelled_as_before() {
    let s = Setup::new();
    let routes = || [("/robots.txt", Reply::ok(ROBOTS)), ("/private/x", Reply::ok("private"))];
    let plain = tls_origin(&s.origin_ca, routes()).await;
    let listed = tls_origin(&s.origin_ca, routes()).await;
    let mut config = s.config();
    config.tls.intercept_ports = vec![listed.port()];
    let proxy = RunningProxy::start(&config).await;

    // Not listed: the origin's own certificate, host-level check, path invisible.
    let host = format!("localhost:{}", plain.port());
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let tls = handshake(&client_config(s.origin_ca.roots(), &[b"http/1.1"]), "localhost", tcp)
        .await
        .expect("the origin's certificate");
    assert_eq!(&peer_leaf(&tls), s.origin_ca.leaf());
    let mut conn = h1(tls).await;
    let got = h1_get(&mut conn, &host, "/private/x").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(plain.hits("/private/x"), 1);
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200);
    assert!(handshake(&s.client(&[b"http/1.1"]), "localhost", tcp).await.is_err(), "not intercepted");

    // Listed: intercepted.
    let host2 = format!("localhost:{}", listed.port());
    let mut conn = h1(tunnel(proxy.addr, &host2, &s.client(&[b"http/1.1"]), "localhost").await).await;
    let got = h1_get(&mut conn, &host2, "/private/x").await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.describe());
    assert_eq!(listed.hits("/private/x"), 0);

    let records = proxy.records().await;
    let connects: Vec<_> = of_type(&records, "decision")
        .into_iter()
        .filter(|d| d["url"] == format!("https://{host}/"))
        .collect();
    assert_eq!(connects.len(), 2, "{records:#?}");
    assert!(connects.iter().all(|d| d["method"] == "CONNECT" && d["path_visible"] == false));
    let d = decision_for(&records, &format!("https://{host2}/private/x"));
    assert_eq!(d["path_visible"], true);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Clients that do not speak TLS inside the tunnel
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_inside_the_tunnel_gets_400_and_the_tunnel_closes() {
    let s = Setup::new();
    let origin = tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS))]).await;
    let mut config = s.config();
    config.tls.handshake_timeout = Dur(Duration::from_millis(400));
    let proxy = RunningProxy::start(&config).await;
    let host = format!("localhost:{}", origin.port());

    for round in 0..10 {
        let (answer, mut tcp) = connect(proxy.addr, &host).await;
        assert_eq!(answer.status, 200);
        let request = format!("GET /private/x HTTP/1.1\r\nHost: {host}\r\nUser-Agent: plain\r\n\r\n");
        bounded("write in the tunnel", tcp.write_all(request.as_bytes())).await.unwrap();
        let mut raw = Vec::new();
        // read_to_end returns only when robotsgate closes the tunnel.
        let read = bounded("answer and close", tcp.read_to_end(&mut raw)).await;
        assert!(read.is_ok(), "round {round}: {read:?} after {:?}", String::from_utf8_lossy(&raw));
        let answer = parse_response(&raw);
        assert_eq!(answer.status, 400, "{answer:?}");
        assert_eq!(answer.header("x-robotsgate"), Some("tls-expected"));
        assert!(answer.header("content-type").is_some_and(|t| t.starts_with("text/plain")));
        assert_eq!(answer.header("content-length"), Some(answer.body.len().to_string().as_str()));
        assert!(answer.text().contains("TLS"), "{}", answer.text());
    }

    // Silent after CONNECT, or stalled inside the handshake: closed after handshake_timeout.
    for first in [&b""[..], &b"\x16\x03\x01"[..]] {
        let (answer, mut tcp) = connect(proxy.addr, &host).await;
        assert_eq!(answer.status, 200);
        bounded("write", tcp.write_all(first)).await.unwrap();
        let started = Instant::now();
        let mut raw = Vec::new();
        let _ = bounded("close after the handshake timeout", tcp.read_to_end(&mut raw)).await;
        assert!(raw.is_empty(), "{raw:?}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    assert_eq!(origin.total_hits(), 0);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// robots.txt itself
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robots_txt_through_interception_is_allowed() {
    let s = Setup::new();
    let robots = "User-agent: *\nDisallow: /\n";
    let origin = tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(robots))]).await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());
    let mut conn = h1(tunnel(proxy.addr, &host, &s.client(&[b"http/1.1"]), "localhost").await).await;

    let got = h1_get(&mut conn, &host, "/robots.txt").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(got.body.as_ref(), robots.as_bytes());
    let got = h1_get(&mut conn, &host, "/index.html").await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.describe());
    assert_eq!(origin.hits("/index.html"), 0);

    let records = proxy.records().await;
    let d = decision_for(&records, &format!("https://{host}/robots.txt"));
    assert_eq!(d["outcome"], "allowed");
    assert_eq!(d["reason"], "robots-txt");
    assert_eq!(d["path_visible"], true);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Pacing (issue 16)
// ---------------------------------------------------------------------------------------

/// Requests inside an intercepted tunnel are paced one by one, like plain HTTP; the
/// CONNECT itself is not (the tunnel opens at once).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_inside_the_tunnel_are_paced_per_request() {
    let s = Setup::new();
    let origin = tls_origin(
        &s.origin_ca,
        [("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 0.3\n")), ("/p", Reply::ok("p"))],
    )
    .await;
    let proxy = RunningProxy::start(&s.config()).await;
    let host = format!("localhost:{}", origin.port());
    let opened = Instant::now();
    let mut conn = h1(tunnel(proxy.addr, &host, &s.client(&[b"http/1.1"]), "localhost").await).await;
    assert!(opened.elapsed() < Duration::from_millis(250), "the tunnel is not held");
    for _ in 0..3 {
        assert_eq!(h1_get(&mut conn, &host, "/p").await.status, StatusCode::OK);
    }
    let arrivals = origin.arrivals("/p");
    for w in arrivals.windows(2) {
        assert!(w[1].1 - w[0].1 >= Duration::from_millis(250), "{:?} apart", w[1].1 - w[0].1);
    }
    let records = proxy.records().await;
    let paced: Vec<_> = of_type(&records, "decision")
        .into_iter()
        .filter(|d| d["url"] == format!("https://{host}/p"))
        .collect();
    assert_eq!(paced.len(), 3);
    assert!(paced.iter().all(|d| d["pace"]["source"] == "crawl-delay" && d["path_visible"] == true));
    assert!(paced[2]["pace_wait_ms"].as_u64().unwrap() >= 200, "{}", paced[2]);
    drop(conn);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// curl, and `robotsgate ca init`
// ---------------------------------------------------------------------------------------

async fn run_curl(args: &[&str]) -> (String, String) {
    let mut cmd = tokio::process::Command::new("curl");
    for var in [
        "http_proxy",
        "https_proxy",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "all_proxy",
        "NO_PROXY",
        "no_proxy",
        "CURL_CA_BUNDLE",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "CURL_HOME",
    ] {
        cmd.env_remove(var);
    }
    cmd.arg("-q")
        .args(["-sS", "--max-time", "15", "-w", "\n%{http_version} %{http_code}"])
        .args(args)
        .kill_on_drop(true);
    let out = bounded("curl", cmd.output()).await.expect("run curl");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "curl {args:?}: {}\n{stdout}\n{stderr}", out.status);
    (stdout, stderr)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn curl_through_interception() {
    if std::process::Command::new("curl").arg("--version").output().is_err() {
        println!("NOTE: curl is not installed; curl_through_interception skipped");
        return;
    }
    let s = Setup::new();
    let origin = tls_origin(
        &s.origin_ca,
        [
            ("/robots.txt", Reply::ok(ROBOTS)),
            ("/allowed", Reply::ok("allowed body\n")),
            ("/private/x", Reply::ok("secret\n")),
        ],
    )
    .await;
    let proxy = RunningProxy::start(&s.config()).await;
    let cacert = s.ca_dir.join("ca.pem");
    let cacert = cacert.to_str().unwrap();
    let proxy_url = format!("http://{}", proxy.addr);
    let base = format!("https://localhost:{}", origin.port());

    for (http, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        let (out, err) =
            run_curl(&[http, "--cacert", cacert, "-x", &proxy_url, &format!("{base}/allowed")]).await;
        assert_eq!(out, format!("allowed body\n\n{version} 200"), "{http}: {err}");
        let (out, err) = run_curl(&[
            http,
            "--cacert",
            cacert,
            "-x",
            &proxy_url,
            "-D",
            "-",
            "-o",
            "/dev/null",
            &format!("{base}/private/x"),
        ])
        .await;
        assert!(out.ends_with(&format!("\n{version} 403")), "{http}: {out}\n{err}");
        assert!(out.to_ascii_lowercase().contains("x-robotsgate: disallowed"), "{http}: {out}");
    }
    assert_eq!(origin.hits("/allowed"), 2);
    assert_eq!(origin.hits("/private/x"), 0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ca_init_command_creates_the_ca_and_refuses_to_overwrite() {
    let tmp = temp_dir();
    let dir = tmp.path().join("ca");
    let run = |args: Vec<String>| async move {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_robotsgate"));
        cmd.args(args).kill_on_drop(true);
        bounded("robotsgate ca init", cmd.output()).await.expect("run robotsgate")
    };
    let args = |force: bool| {
        let mut a = vec!["ca".to_owned(), "init".to_owned(), "--dir".to_owned(), dir.display().to_string()];
        if force {
            a.push("--force".into());
        }
        a
    };

    let out = run(args(false)).await;
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    for needle in ["--cacert", "SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "NODE_EXTRA_CA_CERTS", "ca.pem"] {
        assert!(stdout.contains(needle), "instructions mention {needle}:\n{stdout}");
    }
    let cert = std::fs::read(dir.join("ca.pem")).expect("ca.pem");
    let key = std::fs::read(dir.join("ca-key.pem")).expect("ca-key.pem");
    assert!(cert.starts_with(b"-----BEGIN CERTIFICATE-----"));
    assert!(key.starts_with(b"-----BEGIN PRIVATE KEY-----"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(dir.join("ca-key.pem")).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the key is readable by its owner only");
    }
    robotsgate_proxy::ca::Ca::load(&dir).expect("the CA loads");

    let out = run(args(false)).await;
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("--force"), "{stderr}");
    assert_eq!(std::fs::read(dir.join("ca.pem")).unwrap(), cert, "not overwritten");
    assert_eq!(std::fs::read(dir.join("ca-key.pem")).unwrap(), key, "not overwritten");

    let out = run(args(true)).await;
    assert!(out.status.success(), "{out:?}");
    assert_ne!(std::fs::read(dir.join("ca.pem")).unwrap(), cert, "replaced with --force");
    assert_ne!(std::fs::read(dir.join("ca-key.pem")).unwrap(), key);
}

// ---------------------------------------------------------------------------------------
// Measurements (ignored)
// ---------------------------------------------------------------------------------------

fn rate(n: usize, d: Duration) -> String {
    format!("{n} in {:.3} s = {:.0}/s", d.as_secs_f64(), n as f64 / d.as_secs_f64())
}

#[tokio::test(flavor = "multi_thread")]
#[ignore = "measurement: cargo test --release --test intercept -- --ignored --nocapture"]
async fn measure_interception() {
    const HOSTS: usize = 1000;
    const CLIENTS: usize = 8;
    const REQUESTS: usize = 5000;
    let s = Setup::new();
    let small = Bytes::from(vec![b'x'; 128]);
    let origin =
        tls_origin(&s.origin_ca, [("/robots.txt", Reply::ok(ROBOTS)), ("/small", Reply::ok(small.clone()))])
            .await;
    let mut config = s.config();
    for i in 0..HOSTS {
        for prefix in ["h", "g"] {
            config.dns.static_hosts.insert(format!("{prefix}{i}.test"), vec!["127.0.0.1".parse().unwrap()]);
        }
    }
    config.audit.snapshots = String::new();
    let proxy = RunningProxy::start(&config).await;
    // No TLS session resumption: every handshake below is a full one.
    let client = {
        let mut c = (*s.client(&[b"http/1.1"])).clone();
        c.resumption = rustls::client::Resumption::disabled();
        Arc::new(c)
    };
    let addr = proxy.addr;
    let port = origin.port();
    println!(
        "interception measurements ({} CPUs)",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );

    // Handshakes for new hosts, one after another.
    let t = Instant::now();
    for i in 0..HOSTS {
        let tls = tunnel(addr, &format!("h{i}.test:{port}"), &client, &format!("h{i}.test")).await;
        drop(tls);
    }
    let d = t.elapsed();
    assert_eq!(proxy.minted(), HOSTS as u64);
    println!("  CONNECT + TLS, new host each (mint), sequential:   {}", rate(HOSTS, d));

    // Handshakes for new hosts, CLIENTS at once.
    let before = proxy.minted();
    let t = Instant::now();
    let mut tasks = Vec::new();
    for c in 0..CLIENTS {
        let client = client.clone();
        tasks.push(tokio::spawn(async move {
            for i in (c..HOSTS).step_by(CLIENTS) {
                drop(tunnel(addr, &format!("g{i}.test:{port}"), &client, &format!("g{i}.test")).await);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let d = t.elapsed();
    assert_eq!(proxy.minted() - before, HOSTS as u64);
    println!("  CONNECT + TLS, new host each (mint), {CLIENTS} clients: {}", rate(HOSTS, d));

    // The same hosts again (cached leaves), for comparison.
    let t = Instant::now();
    for i in 0..HOSTS {
        drop(tunnel(addr, &format!("h{i}.test:{port}"), &client, &format!("h{i}.test")).await);
    }
    let d = t.elapsed();
    assert_eq!(proxy.minted(), 2 * HOSTS as u64, "cached leaves reused");
    println!("  CONNECT + TLS, known host (cached leaf), sequential: {}", rate(HOSTS, d));

    // Requests with keep-alive in one tunnel.
    let host = format!("localhost:{port}");
    let mut conn = h1(tunnel(addr, &host, &client, "localhost").await).await;
    assert_eq!(h1_get(&mut conn, &host, "/small").await.status, StatusCode::OK); // warm: robots.txt, pool
    let t = Instant::now();
    for _ in 0..REQUESTS {
        let got = h1_get(&mut conn, &host, "/small").await;
        assert!(got.status == StatusCode::OK && got.body == small);
    }
    let d = t.elapsed();
    println!("  GET /small, HTTP/1.1 keep-alive, 1 tunnel:          {}", rate(REQUESTS, d));

    // CLIENTS tunnels in parallel.
    let mut conns = Vec::new();
    for _ in 0..CLIENTS {
        let mut c = h1(tunnel(addr, &host, &client, "localhost").await).await;
        assert_eq!(h1_get(&mut c, &host, "/small").await.status, StatusCode::OK);
        conns.push(c);
    }
    let t = Instant::now();
    let mut tasks = Vec::new();
    for mut c in conns {
        let (host, small) = (host.clone(), small.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..REQUESTS / CLIENTS {
                let got = h1_get(&mut c, &host, "/small").await;
                assert!(got.status == StatusCode::OK && got.body == small);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let d = t.elapsed();
    println!(
        "  GET /small, HTTP/1.1 keep-alive, {CLIENTS} tunnels:         {}",
        rate(REQUESTS / CLIENTS * CLIENTS, d)
    );

    // HTTP/2: CLIENTS streams at a time on one connection.
    let h2_client = s.client(&[b"h2"]);
    let conn2 = h2(tunnel(addr, &host, &h2_client, "localhost").await).await;
    let url = format!("https://{host}/small");
    let t = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..CLIENTS {
        let (mut c, url, small) = (conn2.clone(), url.clone(), small.clone());
        tasks.push(tokio::spawn(async move {
            for _ in 0..REQUESTS / CLIENTS {
                let (_, got) = h2_get(&mut c, &url).await;
                assert!(got.status == StatusCode::OK && got.body == small);
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    let d = t.elapsed();
    println!(
        "  GET /small, HTTP/2, {CLIENTS} streams on 1 connection:   {}",
        rate(REQUESTS / CLIENTS * CLIENTS, d)
    );
    assert_eq!(origin.hits("/robots.txt"), 1);
    drop(conn);
    drop(conn2);
    proxy.stop().await;
}
