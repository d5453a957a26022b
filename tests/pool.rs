//! The connection pool (`robotsgate::net::Pool`) against real origins on loopback: the one
//! bound on idle connections across origins (least recently used closed first), the bound
//! per origin, the idle timeout, a robots.txt fetch's connection serving the request that
//! follows, HTTP/2 connections shared by concurrent requests, and, with a runtime per
//! thread as the proxy's workers run, idle connections taken on their own runtime first and
//! moved to the taking one's event loop. Connections are counted at the origins (what a
//! broad crawl leaves open is what the origins see open).

mod support;

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Either, Empty};
use robotsgate::fetch::{FetchResult, Fetcher};
use robotsgate::net::{Connector, DnsConfig, Pool, PoolConfig, PoolRequestBody, Resolver, TlsConfig};
use robotsgate::origin::Origin;
use support::{
    Reply, TestCa, TestOrigin, bounded, connector, fetch_config, loopback_guard, read_head, until,
};
use tokio::sync::Barrier;

fn pool(config: PoolConfig) -> Pool {
    Pool::new(connector(loopback_guard(), Duration::from_secs(5)), config)
}

fn get(url: &str) -> Request<PoolRequestBody> {
    Request::get(url).body(Either::Right(Empty::<Bytes>::new())).unwrap()
}

/// Sends a GET through `pool` and reads the body to its end (the connection goes back).
async fn fetch(pool: &Pool, url: &str) -> (StatusCode, Bytes) {
    let res = bounded(url, pool.send(get(url))).await.unwrap_or_else(|e| panic!("{url}: {e}"));
    let status = res.status();
    let body = bounded("body", res.into_body().collect()).await.expect("body").to_bytes();
    (status, body)
}

fn open(origins: &[TestOrigin]) -> usize {
    origins.iter().map(TestOrigin::open_connections).sum()
}

#[tokio::test]
async fn idle_connections_across_origins_stay_within_the_bound_least_recently_used_first() {
    const ORIGINS: usize = 40;
    const MAX_IDLE: usize = 8;
    let mut origins = Vec::new();
    for _ in 0..ORIGINS {
        origins.push(TestOrigin::start([("/page", Reply::ok("hello"))]).await);
    }
    let pool = pool(PoolConfig { max_idle: MAX_IDLE, ..PoolConfig::default() });
    for (i, origin) in origins.iter().enumerate() {
        let (status, body) = fetch(&pool, &origin.url("/page")).await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"hello"[..]));
        assert!(pool.idle() <= MAX_IDLE, "after {} origins: {} idle", i + 1, pool.idle());
    }
    assert_eq!(pool.idle(), MAX_IDLE);
    // What the origins see: at most the bound left open, and those of the last origins.
    until("the evicted connections are closed", || open(&origins) <= MAX_IDLE).await;
    for (i, origin) in origins.iter().enumerate() {
        let kept = i >= ORIGINS - MAX_IDLE;
        if kept {
            assert_eq!(origin.open_connections(), 1, "origin {i} (recent) keeps its connection");
        } else {
            until("an old origin's connection closes", || origin.open_connections() == 0).await;
        }
    }
    // A recent origin's request goes on its kept connection.
    let last = &origins[ORIGINS - 1];
    fetch(&pool, &last.url("/page")).await;
    assert_eq!(last.connections(), 1, "the kept connection was reused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_to_one_origin_leaves_at_most_the_per_origin_bound() {
    const BURST: usize = 12;
    let barrier = Arc::new(Barrier::new(BURST));
    let origin = TestOrigin::start([("/together", Reply::ok("all at once").wait_together(&barrier))]).await;
    let pool =
        pool(PoolConfig { max_idle_per_origin: 3, burst_grace: Duration::ZERO, ..PoolConfig::default() });
    let url = origin.url("/together");
    burst(&pool, &url, BURST).await;
    assert_eq!(origin.connections(), BURST, "the burst needed a connection per request");
    until("all but the per-origin bound close", || origin.open_connections() <= 3).await;
    until("three come back to the pool", || pool.idle() == 3).await;
}

/// Sends `n` GETs to `url` through `pool` at once and checks each is answered.
async fn burst(pool: &Pool, url: &str, n: usize) {
    let tasks: Vec<_> = (0..n)
        .map(|_| {
            let (pool, url) = (pool.clone(), url.to_string());
            tokio::spawn(async move { fetch(&pool, &url).await })
        })
        .collect();
    for task in tasks {
        assert_eq!(bounded("burst", task).await.unwrap().0, StatusCode::OK);
    }
}

#[tokio::test]
async fn a_burst_that_follows_within_the_grace_reuses_the_last_ones_connections() {
    const BURST: usize = 12;
    let barrier = Arc::new(Barrier::new(BURST));
    let origin = TestOrigin::start([("/together", Reply::ok("all at once").wait_together(&barrier))]).await;
    let pool = pool(PoolConfig {
        max_idle_per_origin: 3,
        burst_grace: Duration::from_secs(60),
        ..PoolConfig::default()
    });
    let url = origin.url("/together");
    burst(&pool, &url, BURST).await;
    until("the whole burst's connections come back to the pool", || pool.idle() == BURST).await;
    burst(&pool, &url, BURST).await;
    assert_eq!(origin.connections(), BURST, "the second burst opened no connection");
}

#[tokio::test]
async fn connections_beyond_the_per_origin_bound_close_after_the_grace() {
    const BURST: usize = 12;
    let barrier = Arc::new(Barrier::new(BURST));
    let origin = TestOrigin::start([
        ("/together", Reply::ok("all at once").wait_together(&barrier)),
        ("/one", Reply::ok("alone")),
    ])
    .await;
    let pool = pool(PoolConfig {
        max_idle_per_origin: 3,
        // Long enough for the twelve to come back before the first has waited it out.
        burst_grace: Duration::from_secs(1),
        ..PoolConfig::default()
    });
    let url = origin.url("/together");
    let start = std::time::Instant::now();
    burst(&pool, &url, BURST).await;
    until("the burst's connections come back to the pool", || pool.idle() == BURST).await;
    let back = start.elapsed();
    until("all but the per-origin bound close", || origin.open_connections() <= 3).await;
    assert!(start.elapsed() >= Duration::from_secs(1), "closed before the grace ({back:?} to come back)");
    assert_eq!(pool.idle(), 3, "the three most recently used stay");
    fetch(&pool, &origin.url("/one")).await;
    assert_eq!(origin.connections(), BURST, "a request after it takes one of the three");
}

#[tokio::test]
async fn idle_connections_close_after_the_idle_timeout() {
    let origin = TestOrigin::start([("/page", Reply::ok("hello"))]).await;
    let pool = pool(PoolConfig { idle_timeout: Duration::from_millis(200), ..PoolConfig::default() });
    fetch(&pool, &origin.url("/page")).await;
    assert_eq!(pool.idle(), 1);
    until("the idle connection closes", || origin.open_connections() == 0 && pool.idle() == 0).await;
    // And the pool goes on: a new connection, then kept again.
    fetch(&pool, &origin.url("/page")).await;
    assert_eq!(origin.connections(), 2);
    assert_eq!(pool.idle(), 1);
}

#[tokio::test]
async fn a_pool_that_keeps_nothing_closes_every_connection() {
    let origin = TestOrigin::start([("/page", Reply::ok("hello"))]).await;
    let pool = pool(PoolConfig { max_idle: 0, ..PoolConfig::default() });
    fetch(&pool, &origin.url("/page")).await;
    fetch(&pool, &origin.url("/page")).await;
    assert_eq!(pool.idle(), 0);
    assert_eq!(origin.connections(), 2);
    until("nothing stays open", || origin.open_connections() == 0).await;
}

#[tokio::test]
async fn a_robots_txt_fetch_leaves_its_connection_to_the_request_that_follows() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/page", Reply::ok("hello")),
    ])
    .await;
    let pool = pool(PoolConfig::default());
    let fetcher = Fetcher::with_pool(pool.clone(), fetch_config());
    let out = bounded("fetch", fetcher.fetch(&origin.origin("a.test"))).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    let (status, _) = fetch(&pool, &format!("{}/page", origin.base_as("a.test"))).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(origin.connections(), 1, "one connection for the fetch and the request after it");
    assert_eq!(pool.idle(), 1);
}

#[tokio::test]
async fn a_short_error_page_is_read_so_its_connection_is_reused() {
    // A 404 robots.txt (allow all) with a page of its own, chunked.
    let origin = TestOrigin::start([("/page", Reply::ok("hello"))]).await;
    let pool = pool(PoolConfig::default());
    let fetcher = Fetcher::with_pool(pool.clone(), fetch_config());
    let out = bounded("fetch", fetcher.fetch(&origin.origin("a.test"))).await;
    assert_eq!(out.result, FetchResult::Unavailable { status: 404 });
    until("the 404 page's connection comes back", || pool.idle() == 1).await;
    fetch(&pool, &format!("{}/page", origin.base_as("a.test"))).await;
    assert_eq!(origin.connections(), 1);
}

#[tokio::test]
async fn an_unread_body_closes_its_connection_instead_of_returning_it() {
    let origin = TestOrigin::start([("/big", Reply::pattern(4 * 1024 * 1024))]).await;
    let pool = pool(PoolConfig::default());
    let res = bounded("send", pool.send(get(&origin.url("/big")))).await.expect("response");
    assert_eq!(res.status(), StatusCode::OK);
    drop(res);
    until("the connection closes", || origin.open_connections() == 0).await;
    assert_eq!(pool.idle(), 0);
    // The next request gets a new connection and its whole body.
    let (_, body) = fetch(&pool, &origin.url("/big")).await;
    assert_eq!(body.len(), 4 * 1024 * 1024);
    assert_eq!(origin.connections(), 2);
}

#[tokio::test]
async fn a_connection_the_origin_closed_is_not_handed_out() {
    let origin = TestOrigin::start([("/bye", Reply::ok("bye").header("connection", "close"))]).await;
    let pool = pool(PoolConfig::default());
    for _ in 0..3 {
        let (status, body) = fetch(&pool, &origin.url("/bye")).await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"bye"[..]));
    }
    assert_eq!(origin.connections(), 3);
    assert_eq!(pool.idle(), 0);
}

#[tokio::test]
async fn errors_say_what_failed() {
    let pool = pool(PoolConfig::default());
    let e = pool.send(get("/relative")).await.expect_err("no origin");
    assert!(e.to_string().contains("/relative"), "{e}");
    let e = bounded("send", pool.send(get(&format!("http://127.0.0.1:{}/", support::dead_port()))))
        .await
        .expect_err("nothing listens");
    assert!(matches!(e, robotsgate::net::PoolError::Connect(_)), "{e:?}");
}

/// HTTP/2 (ALPN `h2`): one connection per origin, shared by concurrent requests, idle once
/// none of its responses is open, and evicted like any other.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_connections_are_shared_and_bounded_like_the_others() {
    const TOGETHER: usize = 6;
    let ca = TestCa::localhost();
    let barrier = Arc::new(Barrier::new(TOGETHER));
    let h2_origin = TestOrigin::start_tls(
        [("/page", Reply::ok("over h2")), ("/together", Reply::ok("at once").wait_together(&barrier))],
        ca.server_config(&[b"h2"]),
    )
    .await;
    let plain = TestOrigin::start([("/page", Reply::ok("hello"))]).await;
    let tls = robotsgate::net::client_config(
        &TlsConfig { webpki_roots: false, extra_roots: vec![ca.der.clone()] },
        &[b"h2", b"http/1.1"],
    )
    .unwrap();
    let overrides = [("localhost".to_owned(), vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])].into_iter().collect();
    let resolver = Resolver::new(&DnsConfig { overrides, ..DnsConfig::default() });
    let connector = Connector::new(resolver, Arc::new(loopback_guard()), tls, Duration::from_secs(5));
    let pool = Pool::new(connector, PoolConfig { max_idle: 1, ..PoolConfig::default() });
    let base = format!("https://localhost:{}", h2_origin.port());

    let res = bounded("h2", pool.send(get(&format!("{base}/page")))).await.expect("response");
    assert_eq!(res.version(), http::Version::HTTP_2);
    drop(res.into_body().collect().await);
    assert_eq!(pool.idle(), 1, "idle once its response is over");
    let together: Vec<_> = (0..TOGETHER)
        .map(|_| {
            let (pool, url) = (pool.clone(), format!("{base}/together"));
            tokio::spawn(async move { fetch(&pool, &url).await })
        })
        .collect();
    for task in together {
        assert_eq!(bounded("together", task).await.unwrap().0, StatusCode::OK);
    }
    assert_eq!(h2_origin.connections(), 1, "concurrent requests shared the one connection");
    assert_eq!(pool.idle(), 1);
    // Another origin's connection comes back: the bound (1) closes the least recently used.
    fetch(&pool, &plain.url("/page")).await;
    assert_eq!(pool.idle(), 1);
    until("the HTTP/2 connection is closed", || h2_origin.open_connections() == 0).await;
    assert_eq!(plain.open_connections(), 1);
}

/// A raw HTTP/1.1 origin on loopback that follows a plan: its `n`th connection answers
/// `plan[n]` requests (keep-alive) and closes after reading the next one without a byte of
/// answer, as an origin closing an idle connection when a request arrives does. Connections
/// past the plan answer every request. Each answer's body is the connection's number and
/// the request's path (`2 /b`); every request head read is counted.
struct ClosingOrigin {
    port: u16,
    requests: Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClosingOrigin {
    async fn start(plan: &'static [usize]) -> ClosingOrigin {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind");
        let port = listener.local_addr().expect("address").port();
        let requests = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = requests.clone();
        tokio::spawn(async move {
            for n in 1.. {
                let Ok((mut conn, _)) = listener.accept().await else { return };
                let answers = plan.get(n - 1).copied().unwrap_or(usize::MAX);
                let seen = seen.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    for answered in 0.. {
                        // One request head (these requests have no body).
                        let Some(head) = read_head(&mut conn, &mut buf).await else { return };
                        let line =
                            String::from_utf8_lossy(&head).lines().next().unwrap_or_default().to_owned();
                        seen.lock().expect("requests").push(format!("{n} {line}"));
                        if answered == answers {
                            return; // closed, unanswered
                        }
                        let path = line.split(' ').nth(1).unwrap_or_default().to_owned();
                        let body = format!("{n} {path}");
                        let res = format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len());
                        if conn.write_all(res.as_bytes()).await.is_err() {
                            return;
                        }
                    }
                });
            }
        });
        ClosingOrigin { port, requests }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    /// Each request head read: its connection's number and request line.
    fn requests(&self) -> Vec<String> {
        self.requests.lock().expect("requests").clone()
    }
}

/// RFC 9110 §9.2.2: a GET or HEAD (idempotent) without a body that an idle connection took
/// and then closed on, with no answer, is sent again on a new connection, once. An origin
/// may close an idle connection at any time, and the client cannot tell whether it had
/// read the request first.
#[tokio::test]
async fn a_get_that_a_reused_connection_closed_on_unanswered_is_sent_again_once() {
    let origin = ClosingOrigin::start(&[1, 1]).await;
    let pool = pool(PoolConfig::default());
    assert_eq!(fetch(&pool, &origin.url("/a")).await, (StatusCode::OK, Bytes::from("1 /a")));
    assert_eq!(fetch(&pool, &origin.url("/b")).await, (StatusCode::OK, Bytes::from("2 /b")));
    // A HEAD alike: the second connection, idle again, closes on it.
    let head = bounded(
        "HEAD",
        pool.send(Request::head(origin.url("/c")).body(Either::Right(Empty::new())).unwrap()),
    )
    .await
    .expect("HEAD");
    assert_eq!(head.status(), StatusCode::OK);
    drop(head);
    assert_eq!(
        origin.requests(),
        [
            "1 GET /a HTTP/1.1",
            "1 GET /b HTTP/1.1",
            "2 GET /b HTTP/1.1",
            "2 HEAD /c HTTP/1.1",
            "3 HEAD /c HTTP/1.1"
        ]
    );

    // Once only: a new connection that closes on the request as well fails it.
    let origin = ClosingOrigin::start(&[1, 0]).await;
    fetch(&pool, &origin.url("/a")).await;
    let e = bounded("GET", pool.send(get(&origin.url("/b")))).await.expect_err("closed twice");
    assert!(matches!(e, robotsgate::net::PoolError::Http(_)), "{e:?}");
    assert_eq!(origin.requests(), ["1 GET /a HTTP/1.1", "1 GET /b HTTP/1.1", "2 GET /b HTTP/1.1"]);
}

/// What is not idempotent is not sent again: the origin may have acted on it.
#[tokio::test]
async fn a_post_that_a_reused_connection_closed_on_is_not_sent_again() {
    let origin = ClosingOrigin::start(&[1]).await;
    let pool = pool(PoolConfig::default());
    fetch(&pool, &origin.url("/a")).await;
    let post = Request::post(origin.url("/b")).body(Either::Right(Empty::new())).unwrap();
    let e = bounded("POST", pool.send(post)).await.expect_err("closed");
    assert!(matches!(e, robotsgate::net::PoolError::Http(_)), "{e:?}");
    assert_eq!(origin.requests(), ["1 GET /a HTTP/1.1", "1 POST /b HTTP/1.1"]);
}

/// A new connection is not one an origin closed while it was idle: a GET it closes on
/// unanswered fails, sent once.
#[tokio::test]
async fn a_get_that_a_new_connection_closed_on_is_not_sent_again() {
    let origin = ClosingOrigin::start(&[0]).await;
    let pool = pool(PoolConfig::default());
    let e = bounded("GET", pool.send(get(&origin.url("/a")))).await.expect_err("closed");
    assert!(matches!(e, robotsgate::net::PoolError::Http(_)), "{e:?}");
    assert_eq!(origin.requests(), ["1 GET /a HTTP/1.1"]);
}

/// Sends `GET path` on `stream` as HTTP/1.1 written by hand and returns the body of the
/// 200 answer (a short one: the first bytes after the head).
async fn get_by_hand(stream: &mut robotsgate::net::Stream, at: &Origin, path: &str) -> Vec<u8> {
    use tokio::io::AsyncWriteExt;
    let host = at.authority();
    let request = format!("GET {path} HTTP/1.1\r\nhost: {host}\r\n\r\n");
    bounded("the request", stream.write_all(request.as_bytes())).await.unwrap();
    // Over TLS the request may wait in the session's buffer until flushed.
    bounded("the request", stream.flush()).await.unwrap();
    let mut buf = Vec::new();
    let head = bounded("the response head", read_head(stream, &mut buf)).await.expect("a head");
    assert!(head.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&head));
    while buf.is_empty() {
        let n = bounded("the body", tokio::io::AsyncReadExt::read_buf(stream, &mut buf)).await.unwrap();
        assert!(n > 0, "the origin closed before the body");
    }
    buf
}

/// A stream opened elsewhere and given to the pool (`adopt`) is kept as it is: a sender of
/// its own takes it back out (`take_idle_stream`) and writes HTTP/1.1 on it, or the pool
/// sends on it (hyper starts on it then, and it is hyper's from there on). Either way the
/// origin sees no new connection.
#[tokio::test]
async fn an_adopted_stream_is_taken_back_as_it_is_or_sent_on_by_the_pool() {
    let origin = TestOrigin::start([("/a", Reply::ok("A"))]).await;
    let pool = pool(PoolConfig::default());
    let at = Origin::from_uri(&origin.url("/a").parse().unwrap()).unwrap();
    let stream = bounded("connect", pool.connector().connect(&at)).await.unwrap();
    pool.adopt(&at, stream);
    assert_eq!(pool.idle(), 1);
    assert!(pool.has_connection(&at));

    let mut stream = pool.take_idle_stream(&at).expect("the adopted stream, as it is");
    assert_eq!(pool.idle(), 0);
    assert!(pool.take_idle_stream(&at).is_none(), "taken once");
    assert_eq!(get_by_hand(&mut stream, &at, "/a").await, b"A");

    // Idle again (its response read to the end), given back, and sent on by the pool.
    pool.adopt(&at, stream);
    let (status, body) = fetch(&pool, &origin.url("/a")).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"A"[..]));
    assert_eq!(origin.connections(), 1, "both requests went on the adopted connection");
    assert_eq!(origin.hits("/a"), 2);
    until("the connection is back in the pool", || pool.idle() == 1).await;
    assert!(pool.take_idle_stream(&at).is_none(), "hyper's now: not given out as a stream");
}

/// An adopted stream the origin has closed while it sat in the pool is handed out neither
/// as a stream nor to the pool's own requests, which open a new connection.
#[tokio::test]
async fn an_adopted_stream_the_origin_closed_is_not_handed_out() {
    let origin = TestOrigin::start([("/a", Reply::ok("A"))]).await;
    let pool = pool(PoolConfig::default());
    let at = Origin::from_uri(&origin.url("/a").parse().unwrap()).unwrap();
    // A connection to a listener that accepts it and closes it at once.
    let closer = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let closing =
        Origin::from_uri(&format!("http://{}/", closer.local_addr().unwrap()).parse().unwrap()).unwrap();
    let stream = bounded("connect", pool.connector().connect(&closing)).await.unwrap();
    drop(bounded("accept", closer.accept()).await.unwrap());
    let robotsgate::net::Stream::Plain(tcp) = &stream else { panic!("a plain connection") };
    // The event loop has seen the close (the stream reads as ended, nothing is read here).
    bounded("the close", tcp.readable()).await.unwrap();
    pool.adopt(&closing, stream);
    assert_eq!(pool.idle(), 1);
    assert!(pool.take_idle_stream(&closing).is_none(), "a closed stream is not handed out");
    assert_eq!(pool.idle(), 0, "and it is gone from the pool");

    // The same to the pool's own requests: a connection the origin closed after a request
    // written by hand (`Connection: close`) is dropped, and a new one opened.
    let mut stream = bounded("connect", pool.connector().connect(&at)).await.unwrap();
    let host = at.authority();
    let request = format!("GET /a HTTP/1.1\r\nhost: {host}\r\nconnection: close\r\n\r\n");
    tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    bounded("the answer and the close", tokio::io::AsyncReadExt::read_to_end(&mut stream, &mut answer))
        .await
        .unwrap();
    assert!(answer.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&answer));
    pool.adopt(&at, stream);
    let (status, body) = fetch(&pool, &origin.url("/a")).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, &b"A"[..]));
    assert_eq!(origin.connections(), 2, "a new connection for the pool's request");
    assert_eq!(origin.hits("/a"), 2);
}

/// Two single-threaded runtimes, as the proxy's workers run, sharing one pool; the origin
/// runs on a runtime of its own.
struct TwoRuntimes {
    origin: TestOrigin,
    at: Origin,
    pool: Pool,
    a: tokio::runtime::Runtime,
    b: tokio::runtime::Runtime,
    _origin_runtime: tokio::runtime::Runtime,
}

impl TwoRuntimes {
    fn start() -> TwoRuntimes {
        TwoRuntimes::started(false)
    }

    /// The origin over TLS (HTTP/1.1), as `localhost`.
    fn start_tls() -> TwoRuntimes {
        TwoRuntimes::started(true)
    }

    fn started(tls: bool) -> TwoRuntimes {
        let origin_runtime =
            tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
        let (origin, at, pool) = origin_runtime.block_on(async {
            let together = Arc::new(Barrier::new(2));
            let routes = [("/a", Reply::ok("A")), ("/together", Reply::ok("both").wait_together(&together))];
            if !tls {
                let origin = TestOrigin::start(routes).await;
                let at = Origin::from_uri(&origin.url("/a").parse().unwrap()).unwrap();
                return (origin, at, pool(PoolConfig::default()));
            }
            let ca = TestCa::localhost();
            let origin = TestOrigin::start_tls(routes, ca.server_config(&[b"http/1.1"])).await;
            let tls = TlsConfig { webpki_roots: false, extra_roots: vec![ca.der.clone()] };
            let tls = robotsgate::net::client_config(&tls, &[b"http/1.1"]).unwrap();
            let overrides =
                [("localhost".to_owned(), vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])].into_iter().collect();
            let resolver = Resolver::new(&DnsConfig { overrides, ..DnsConfig::default() });
            let connector = Connector::new(resolver, Arc::new(loopback_guard()), tls, Duration::from_secs(5));
            let at = origin.origin("localhost");
            (origin, at, Pool::new(connector, PoolConfig::default()))
        });
        let single = || tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        TwoRuntimes { origin, at, pool, a: single(), b: single(), _origin_runtime: origin_runtime }
    }

    /// Opens a stream on `runtime` and gives it to the pool there; its local port.
    fn adopt_new(&self, runtime: &tokio::runtime::Runtime) -> u16 {
        runtime.block_on(async {
            let stream = bounded("connect", self.pool.connector().connect(&self.at)).await.unwrap();
            let port = local_port(&stream);
            self.pool.adopt(&self.at, stream);
            port
        })
    }

    /// Takes an idle stream out on `runtime`.
    fn take(&self, runtime: &tokio::runtime::Runtime) -> robotsgate::net::Stream {
        runtime.block_on(async { self.pool.take_idle_stream(&self.at) }).expect("an idle stream")
    }
}

fn local_port(stream: &robotsgate::net::Stream) -> u16 {
    use robotsgate::net::Stream;
    let tcp = match stream {
        Stream::Plain(tcp) => tcp,
        Stream::Tls(tls) => tls.get_ref().0,
        Stream::Proxied(_) => panic!("a direct connection"),
    };
    tcp.local_addr().unwrap().port()
}

/// With a runtime per thread (the proxy's workers), an idle stream is taken on the runtime
/// it was given back on before one of another runtime, even a more recent one; and one
/// taken on another runtime is moved to that runtime's event loop: it goes on serving there
/// after the runtime it came from has stopped.
#[test]
fn idle_streams_are_taken_at_home_first_and_moved_when_taken_elsewhere() {
    let t = TwoRuntimes::start();
    let from_a = t.adopt_new(&t.a);
    let from_b = t.adopt_new(&t.b);
    // B's is the most recently used; A takes its own.
    let taken = t.take(&t.a);
    assert_eq!(local_port(&taken), from_a, "A's own stream, not B's more recent one");
    t.a.block_on(async { t.pool.adopt(&t.at, taken) });
    // Now A's is the most recent; B takes its own.
    let taken = t.take(&t.b);
    assert_eq!(local_port(&taken), from_b, "B's own stream, not A's more recent one");
    t.b.block_on(async { t.pool.adopt(&t.at, taken) });

    // B takes both: its own, then A's, moved to B's event loop.
    let own = t.take(&t.b);
    let mut moved = t.take(&t.b);
    assert_eq!((local_port(&own), local_port(&moved)), (from_b, from_a));
    assert_eq!(t.pool.idle(), 0);
    let TwoRuntimes { origin, at, b, a, .. } = t;
    drop(a);
    // A's event loop is gone: B's serves the stream.
    let body = b.block_on(get_by_hand(&mut moved, &at, "/a"));
    assert_eq!(body, b"A");
    assert_eq!(origin.connections(), 2, "no connection opened besides the two");
}

/// A stream whose runtime has been dropped while it sat in the pool is not handed out (its
/// event loop is gone); the request that wanted it opens a new connection.
#[test]
fn a_stream_whose_runtime_is_gone_is_not_handed_out() {
    let t = TwoRuntimes::start();
    t.adopt_new(&t.a);
    let TwoRuntimes { origin, at, pool, a, b, .. } = t;
    drop(a);
    b.block_on(async {
        assert!(pool.take_idle_stream(&at).is_none());
        assert_eq!(pool.idle(), 0, "and it is gone from the pool");
        let (status, body) = fetch(&pool, &origin.url("/a")).await;
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"A"[..]));
    });
    assert_eq!(origin.connections(), 2, "a new connection for the request");
}

/// A TLS stream taken on another runtime than its own is moved as well, its TLS session
/// with it.
#[test]
fn a_tls_stream_taken_on_another_runtime_is_moved_with_its_session() {
    let t = TwoRuntimes::start_tls();
    let from_a = t.adopt_new(&t.a);
    let mut moved = t.take(&t.b);
    assert!(matches!(moved, robotsgate::net::Stream::Tls(_)));
    assert_eq!(local_port(&moved), from_a);
    let TwoRuntimes { origin, at, a, b, .. } = t;
    drop(a);
    assert_eq!(b.block_on(get_by_hand(&mut moved, &at, "/a")), b"A");
    assert_eq!(origin.connections(), 1);
}

/// A connection that hyper runs (the pool sent on it) has its task on the runtime it was
/// opened on: a request on a runtime with a connection of its own idle sends on that one,
/// not on another runtime's more recent one. (Here sending on the other's would wait for a
/// runtime that nothing runs meanwhile.)
#[test]
fn a_request_takes_a_connection_whose_task_runs_on_its_own_runtime_first() {
    let t = TwoRuntimes::start();
    // One connection opened on each runtime: two requests that the origin answers together.
    let both = |runtime: &tokio::runtime::Runtime| {
        runtime.block_on(async {
            let (status, body) = fetch(&t.pool, &t.origin.url("/together")).await;
            assert_eq!((status, &body[..]), (StatusCode::OK, &b"both"[..]));
            // Both back (each runtime runs its own connection's return).
            until("both connections are back", || t.pool.idle() == 2).await;
        })
    };
    std::thread::scope(|s| {
        s.spawn(|| both(&t.b));
        both(&t.a);
    });
    assert_eq!(t.origin.connections(), 2);
    // Whichever is the more recent, each runtime sends on its own.
    for runtime in [&t.b, &t.a, &t.b, &t.a] {
        let (status, body) = runtime.block_on(fetch(&t.pool, &t.origin.url("/a")));
        assert_eq!((status, &body[..]), (StatusCode::OK, &b"A"[..]));
    }
    assert_eq!(t.origin.connections(), 2, "no connection opened");
    assert_eq!(t.origin.hits("/a"), 4);
}
