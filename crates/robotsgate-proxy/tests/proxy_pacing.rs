//! Politeness through the forward proxy (issue 16), started in process with `App::start`:
//! CONNECT tunnels paced when they are decided, back-off after an origin's 429 with the metrics and
//! audit records it leaves, and pacing settings reloaded while running. Real time, with
//! delays of a few hundred milliseconds; spacing is read from when the origin (or the
//! client, for tunnels) saw each request.

mod support;

use std::time::Duration;

use http::StatusCode;
use robotsgate_proxy::config::Dur;
use support::*;
use tokio::time::Instant;

/// Loopback scheduling may deliver a request a little early or late against the slot
/// robotsgate let it go at.
const SLACK: Duration = Duration::from_millis(60);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connect_tunnels_are_paced_when_they_open() {
    let dir = temp_dir();
    let ca = TestCa::localhost();
    let origin = TestOrigin::start_tls(
        [("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 0.3\n"))],
        ca.server_config(&[b"http/1.1"]),
    )
    .await;
    let mut config = test_config(dir.path());
    config.tls.webpki_roots = false;
    config.tls.extra_roots = vec![ca.write_pem(&dir.path().join("test-ca.pem"))];
    let proxy = RunningProxy::start(&config).await;

    // The port is not 443, so the tunnel is decided (and paced) on its first bytes, after
    // the `200`: its TLS handshake completes only once its slot came.
    let client = client_config(ca.roots(), &[b"http/1.1"]);
    let mut opened = Vec::new();
    let mut tunnels = Vec::new();
    for _ in 0..3 {
        tunnels.push(tunnel(proxy.addr, &format!("localhost:{}", origin.port()), &client, "localhost").await);
        opened.push(Instant::now());
    }
    for w in opened.windows(2) {
        assert!(w[1] - w[0] >= Duration::from_millis(300) - SLACK, "tunnels {:?} apart", w[1] - w[0]);
    }
    drop(tunnels);
    let records = proxy.records().await;
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), 3);
    for d in &decisions {
        check_decision_record(d);
        assert_eq!((&d["method"], &d["path_visible"]), (&"CONNECT".into(), &false.into()));
        assert_eq!(d["pace"]["source"], "crawl-delay", "{d}");
    }
    assert!(decisions[2]["pace_wait_ms"].as_u64().unwrap() >= 200, "{}", decisions[2]);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_origins_429_pauses_it_and_the_metrics_and_records_say_so() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/busy", Reply::status(429).header("retry-after", "1")),
        ("/very-busy", Reply::status(429).header("retry-after", "30")),
        ("/ok", Reply::ok("ok")),
    ])
    .await;
    let mut config = test_config(dir.path());
    config.pacing.max_wait = Dur(Duration::from_secs(5));
    let proxy = RunningProxy::start(&config).await;

    // The origin's 429 reaches the client as it is; the next request waits a second.
    let got = get(proxy.addr, &origin.url("/busy")).await;
    assert_eq!(got.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(got.headers.get("x-robotsgate").is_none(), "the origin's answer, not robotsgate's");
    let t = Instant::now();
    let got = get(proxy.addr, &origin.url("/ok")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert!(t.elapsed() >= Duration::from_millis(900), "held {:?}", t.elapsed());

    // Retry-After 30 s, past max_wait (5 s): refused at once, not sent.
    get(proxy.addr, &origin.url("/very-busy")).await;
    let t = Instant::now();
    let got = get(proxy.addr, &origin.url("/ok")).await;
    assert!(t.elapsed() < Duration::from_secs(2), "answered at once");
    assert_eq!(got.status, StatusCode::SERVICE_UNAVAILABLE, "{}", got.text());
    assert_eq!(got.header("x-robotsgate"), "paced");
    let retry: u64 = got.header("retry-after").parse().unwrap();
    assert!((29..=30).contains(&retry), "Retry-After {retry}");
    assert!(got.text().contains("Back-off: the origin answered 429, Retry-After: 30"), "{}", got.text());
    assert_eq!(origin.hits("/ok"), 1);

    let metric = |series: &str| proxy.metric(series);
    assert_eq!(metric(r#"robotsgate_pacing_pauses_total{status="429"}"#), 2.0);
    assert_eq!(metric(r#"robotsgate_pacing_refused_total{reason="max-wait"}"#), 1.0);
    assert!(metric("robotsgate_pacing_wait_seconds_count") >= 1.0);
    assert!(metric("robotsgate_pacing_wait_seconds_sum") >= 0.9);
    assert_eq!(metric("robotsgate_pacing_held_requests"), 0.0);
    assert_eq!(metric(r#"robotsgate_decisions_total{outcome="paced",reason="no-rule"}"#), 1.0);

    let records = proxy.records().await;
    let oks: Vec<_> =
        of_type(&records, "decision").into_iter().filter(|d| d["url"] == origin.url("/ok")).collect();
    assert_eq!(oks.len(), 2);
    for d in &oks {
        check_decision_record(d);
        assert_eq!(d["pace"]["backoff"]["status"], 429, "{d}");
    }
    assert!(oks[0]["pace_wait_ms"].as_u64().unwrap() >= 900, "{}", oks[0]);
    assert_eq!(oks[1]["outcome"], "paced");
    assert_eq!(oks[1]["pace"]["backoff"]["retry_after"], "30");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pacing_settings_reload_while_running() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/a", Reply::ok("a")),
        ("/b", Reply::ok("b")),
    ])
    .await;
    let mut config = test_config(dir.path());
    let proxy = RunningProxy::start(&config).await;
    get(proxy.addr, &origin.url("/a")).await;
    get(proxy.addr, &origin.url("/a")).await;
    let gap = |path: &str| {
        let a = origin.arrivals(path);
        a[a.len() - 1].1 - a[a.len() - 2].1
    };
    assert!(gap("/a") < Duration::from_millis(300), "no delay yet: {:?}", gap("/a"));

    config.pacing.min_delay = Dur(Duration::from_millis(400));
    let restart = proxy.reloader.reload(&config).expect("reloaded");
    assert!(restart.is_empty(), "{restart:?}");
    get(proxy.addr, &origin.url("/b")).await;
    get(proxy.addr, &origin.url("/b")).await;
    assert!(gap("/b") >= Duration::from_millis(400) - SLACK, "{:?}", gap("/b"));
    proxy.stop().await;
}

/// A client that closes its connection while its request is held gives its slot to the
/// next request: the proxy notices, drops the request, and the next one goes in its slot.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_while_held_gives_its_slot_back() {
    use tokio::io::AsyncWriteExt;
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 1\n")),
        ("/a", Reply::ok("a")),
        ("/b", Reply::ok("b")),
        ("/c", Reply::ok("c")),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    get(proxy.addr, &origin.url("/a")).await;
    let start = origin.arrivals("/a")[0].1;

    // B is held until 1 s after A; its client hangs up at once.
    let mut b = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let head = format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", origin.url("/b"), origin.authority());
    b.write_all(head.as_bytes()).await.unwrap();
    let held = || async {
        let text = proxy.metrics.render();
        text.contains("robotsgate_pacing_held_requests 1")
    };
    bounded("B held", async {
        while !held().await {
            tokio::task::yield_now().await;
        }
    })
    .await;
    drop(b);
    // C, sent next, goes in B's slot: 1 s after A, not 2 s.
    let got = get(proxy.addr, &origin.url("/c")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(origin.hits("/b"), 0, "B was never sent");
    let c = origin.arrivals("/c")[0].1 - start;
    assert!(
        c >= Duration::from_millis(1000) - SLACK && c < Duration::from_millis(1700),
        "C went {c:?} after A"
    );
    proxy.stop().await;
}
