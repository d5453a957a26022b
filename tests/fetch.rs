//! The robots.txt fetcher against real HTTP origins on 127.0.0.1 (issue 3, "Proof"):
//! status classes, redirects, timeouts, the 500 KiB limit, content encodings, broken
//! connections, DNS and the destination guard.

mod support;

use std::time::Duration;

use robotsgate::fetch::{FetchConfig, FetchOutcome, FetchResult, Fetcher, Unreachable};
use robotsgate::net::{ConnectError, DenyReason, Guard};
use robotsgate::origin::Origin;
use sha2::{Digest, Sha256};
use support::{Reply, TestOrigin, bounded, connector, dead_port, fetch_config, fetcher, fetcher_with};

const LIMIT: usize = 500 * 1024;

/// The content codings the fetcher asks for and decodes (`br` with the feature `brotli`).
#[cfg(feature = "brotli")]
const ENCODINGS: [&str; 3] = ["gzip", "deflate", "br"];
#[cfg(not(feature = "brotli"))]
const ENCODINGS: [&str; 2] = ["gzip", "deflate"];

async fn fetch(fetcher: &Fetcher, origin: &Origin) -> FetchOutcome {
    bounded(&format!("fetching {}", origin.robots_url()), fetcher.fetch(origin)).await
}

fn unreachable(outcome: &FetchOutcome) -> &Unreachable {
    match &outcome.result {
        FetchResult::Unreachable(u) => u,
        other => panic!("expected Unreachable, got {other:?} ({outcome:?})"),
    }
}

#[tokio::test]
async fn success_reads_body_and_records_facts() {
    let robots = "User-agent: *\nDisallow: /private\n";
    let server = TestOrigin::start([(
        "/robots.txt",
        Reply::ok(robots).header("cache-control", "public, max-age=120"),
    )])
    .await;
    let origin = server.origin("a.test");
    let out = fetch(&fetcher(), &origin).await;

    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.as_ref(), robots.as_bytes());
    assert!(!out.truncated);
    assert_eq!(out.url, format!("http://a.test:{}/robots.txt", server.port()));
    assert_eq!(out.final_url, out.url);
    assert_eq!(out.redirects, 0);
    assert_eq!(out.sha256, Some(<[u8; 32]>::from(Sha256::digest(robots.as_bytes()))));
    assert_eq!(out.max_age, Some(Duration::from_secs(120)));
    assert_eq!(out.retry_after, None);
    assert!(out.duration < Duration::from_secs(5));

    // One request, with the configured User-Agent and the encodings we decode.
    assert_eq!(server.hits("/robots.txt"), 1);
    let seen = server.seen();
    assert_eq!(seen.len(), 1);
    let h = &seen[0].headers;
    assert_eq!(h["user-agent"], support::USER_AGENT);
    assert_eq!(h["host"], format!("a.test:{}", server.port()).as_str());
    let accept_encoding = h["accept-encoding"].to_str().unwrap();
    for enc in ENCODINGS {
        assert!(accept_encoding.contains(enc), "accept-encoding {accept_encoding:?} lacks {enc}");
    }
}

#[tokio::test]
async fn any_2xx_is_success() {
    let server = TestOrigin::start([("/robots.txt", Reply::status(204))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 204 });
    assert!(out.body.is_empty());
    assert_eq!(out.sha256, Some(<[u8; 32]>::from(Sha256::digest(b""))));
}

#[tokio::test]
async fn client_errors_are_unavailable() {
    let fetcher = fetcher();
    for status in [400, 401, 403, 404, 410, 451] {
        let server = TestOrigin::start([("/robots.txt", Reply::status(status).body("no robots here"))]).await;
        let out = fetch(&fetcher, &server.origin("a.test")).await;
        assert_eq!(out.result, FetchResult::Unavailable { status }, "status {status}");
        assert!(out.body.is_empty(), "status {status}: the body of an error is not kept");
        assert_eq!(out.sha256, None, "status {status}");
        assert_eq!(server.hits("/robots.txt"), 1);
    }
}

#[tokio::test]
async fn server_errors_and_429_are_unreachable() {
    let fetcher = fetcher();
    for status in [429, 500, 502, 503, 504] {
        let server = TestOrigin::start([("/robots.txt", Reply::status(status))]).await;
        let out = fetch(&fetcher, &server.origin("a.test")).await;
        assert_eq!(out.result, FetchResult::Unreachable(Unreachable::Status(status)), "status {status}");
        let class = if status == 429 { "status_429" } else { "status_5xx" };
        assert_eq!(unreachable(&out).class(), class);
        assert!(out.body.is_empty());
    }
}

#[tokio::test]
async fn retry_after_is_read_on_429_and_503_only() {
    let fetcher = fetcher();
    for (status, want) in [(429, Some(30)), (503, Some(30)), (500, None)] {
        let server =
            TestOrigin::start([("/robots.txt", Reply::status(status).header("retry-after", "30"))]).await;
        let out = fetch(&fetcher, &server.origin("a.test")).await;
        assert_eq!(out.retry_after, want.map(Duration::from_secs), "status {status}");
    }
    let date = httpdate::fmt_http_date(std::time::SystemTime::now() + Duration::from_secs(3600));
    let server = TestOrigin::start([("/robots.txt", Reply::status(503).header("retry-after", &date))]).await;
    let out = fetch(&fetcher, &server.origin("a.test")).await;
    let ra = out.retry_after.expect("an HTTP-date Retry-After");
    assert!(ra > Duration::from_secs(3500) && ra <= Duration::from_secs(3600), "{ra:?}");
}

#[tokio::test]
async fn redirect_without_usable_location_is_unreachable() {
    let fetcher = fetcher();
    let cases = [
        Reply::status(302),
        Reply::status(301),
        Reply::redirect(302, "ftp://a.test/robots.txt"),
        // 300 and 304 are not redirects to follow, Location or not.
        Reply::redirect(300, "/other"),
        Reply::redirect(304, "/other"),
    ];
    for reply in cases {
        let what = format!("{} {:?}", reply.status, reply.headers);
        let status = reply.status;
        let server = TestOrigin::start([("/robots.txt", reply)]).await;
        let out = fetch(&fetcher, &server.origin("a.test")).await;
        assert!(matches!(unreachable(&out), Unreachable::BadRedirect(_)), "{what}: {out:?}");
        // The 3xx that ended the fetch is its status (the record's `status`).
        assert_eq!(out.status, Some(status), "{what}");
        assert_eq!(unreachable(&out).class(), "bad_redirect");
        assert_eq!(server.hits("/other"), 0, "{what}");
        assert_eq!(out.redirects, 0);
    }
}

/// A chain `/robots.txt → /r1 → … → /r{hops}` on one server, `/r{hops}` serving `robots`.
async fn chain(hops: usize, robots: &str) -> TestOrigin {
    let server = TestOrigin::start([]).await;
    let name = |i: usize| if i == 0 { "/robots.txt".to_owned() } else { format!("/r{i}") };
    for i in 0..hops {
        // Alternate the redirect codes and absolute / relative Locations.
        let code = [301, 302, 303, 307, 308][i % 5];
        let next = name(i + 1);
        let location = if i % 2 == 0 { next.clone() } else { format!("{}{next}", server.base_as("a.test")) };
        server.route(&name(i), Reply::redirect(code, &location));
    }
    server.route(&name(hops), Reply::ok(robots.to_owned()));
    server
}

#[tokio::test]
async fn one_redirect_is_followed() {
    let server = chain(1, "User-agent: *\nDisallow: /one\n").await;
    let origin = server.origin("a.test");
    let out = fetch(&fetcher(), &origin).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.status, Some(200), "the last response's, not the redirect's");
    assert_eq!(out.redirects, 1);
    assert_eq!(out.url, origin.robots_url());
    assert_eq!(out.final_url, format!("{}/r1", server.base_as("a.test")));
    assert_eq!(out.body.as_ref(), b"User-agent: *\nDisallow: /one\n");
    assert_eq!((server.hits("/robots.txt"), server.hits("/r1")), (1, 1));
}

#[tokio::test]
async fn five_redirects_are_followed() {
    let server = chain(5, "User-agent: *\nDisallow: /five\n").await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.redirects, 5);
    assert_eq!(out.final_url, format!("{}/r5", server.base_as("a.test")));
    assert_eq!(out.body.as_ref(), b"User-agent: *\nDisallow: /five\n");
    for p in ["/robots.txt", "/r1", "/r2", "/r3", "/r4", "/r5"] {
        assert_eq!(server.hits(p), 1, "{p}");
    }
}

#[tokio::test]
async fn six_redirects_are_too_many() {
    let server = chain(6, "User-agent: *\nDisallow: /six\n").await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::TooManyRedirects);
    assert_eq!(out.status, Some(301), "the sixth redirect's (/r5's)");
    assert_eq!(out.redirects, 5);
    assert!(out.body.is_empty());
    // Five hops followed, the sixth redirect not: /r6 is never asked for.
    assert_eq!(server.total_hits(), 6);
    assert_eq!(server.hits("/r5"), 1);
    assert_eq!(server.hits("/r6"), 0);
}

#[tokio::test]
async fn redirect_limit_is_configurable() {
    let server = chain(2, "User-agent: *\nDisallow: /\n").await;
    let config = FetchConfig { max_redirects: 1, ..fetch_config() };
    let out = fetch(&fetcher_with(config), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::TooManyRedirects);
    assert_eq!(server.hits("/r2"), 0);
}

#[tokio::test]
async fn redirect_loop_ends_as_too_many_redirects() {
    let server = TestOrigin::start([]).await;
    server.route("/robots.txt", Reply::redirect(302, "/loop"));
    server.route("/loop", Reply::redirect(302, &format!("{}/robots.txt", server.base_as("a.test"))));
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::TooManyRedirects);
    assert_eq!(out.status, Some(302));
    assert_eq!(out.redirects, 5);
    assert_eq!(server.total_hits(), 6);
    assert_eq!((server.hits("/robots.txt"), server.hits("/loop")), (3, 3));
}

#[tokio::test]
async fn redirect_across_hosts_is_followed() {
    let b = TestOrigin::robots("User-agent: *\nDisallow: /from-b\n").await;
    let a = TestOrigin::start([(
        "/robots.txt",
        Reply::redirect(301, &format!("{}/robots.txt", b.base_as("b.test"))),
    )])
    .await;
    let origin = a.origin("a.test");
    let out = fetch(&fetcher(), &origin).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.status, Some(200), "the last response's, not the redirect's");
    assert_eq!(out.redirects, 1);
    assert_eq!(out.url, origin.robots_url());
    assert_eq!(out.final_url, format!("http://b.test:{}/robots.txt", b.port()));
    assert_eq!(out.body.as_ref(), b"User-agent: *\nDisallow: /from-b\n");
    assert_eq!((a.hits("/robots.txt"), b.hits("/robots.txt")), (1, 1));
    // b.test saw a request for itself, not for a.test, from the same User-Agent.
    assert_eq!(b.seen()[0].headers["host"], format!("b.test:{}", b.port()).as_str());
    assert_eq!(b.seen()[0].headers["user-agent"], support::USER_AGENT);
}

#[tokio::test]
async fn slow_headers_time_out_in_real_time() {
    let server = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\n").wait_forever())]).await;
    let config = FetchConfig { header_timeout: Duration::from_millis(200), ..fetch_config() };
    let started = std::time::Instant::now();
    let out = fetch(&fetcher_with(config), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Unreachable(Unreachable::HeaderTimeout(Duration::from_millis(200))));
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    // The request did reach the origin: it is the answer that never came.
    assert_eq!(server.hits("/robots.txt"), 1);
}

#[tokio::test]
async fn headers_within_the_timeout_are_fine() {
    let server = TestOrigin::start([(
        "/robots.txt",
        Reply::ok("User-agent: *\n").wait_for(Duration::from_millis(20)),
    )])
    .await;
    let config = FetchConfig { header_timeout: Duration::from_secs(2), ..fetch_config() };
    let out = fetch(&fetcher_with(config), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
}

#[tokio::test]
async fn a_stalled_body_times_out() {
    let body = "User-agent: *\nDisallow: /a\n".repeat(100);
    let server = TestOrigin::start([("/robots.txt", Reply::ok(body).stall_after(100))]).await;
    let config = FetchConfig { body_timeout: Duration::from_millis(200), ..fetch_config() };
    let started = std::time::Instant::now();
    let out = fetch(&fetcher_with(config), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Unreachable(Unreachable::BodyTimeout(Duration::from_millis(200))));
    assert_eq!(unreachable(&out).class(), "body_timeout");
    assert!(out.body.is_empty(), "a partial body is not a robots.txt");
    assert_eq!(out.sha256, None);
    assert_eq!(out.status, None, "the 200 did not decide it");
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
}

/// A pool whose bound on a body's silence (`PoolConfig::read_timeout`, the proxy's
/// `upstream_read_timeout`) is shorter than the body timeout gives up first: still a body
/// timeout, by that bound (before, `protocol`).
#[tokio::test]
async fn a_body_the_pool_gave_up_on_is_a_body_timeout() {
    use robotsgate::net::{Pool, PoolConfig};
    let body = "User-agent: *\nDisallow: /a\n".repeat(100);
    let server = TestOrigin::start([("/robots.txt", Reply::ok(body).stall_after(100))]).await;
    let silent = Duration::from_millis(200);
    let pool = Pool::new(
        connector(support::loopback_guard(), Duration::from_secs(5)),
        PoolConfig { read_timeout: silent, ..PoolConfig::default() },
    );
    let config = FetchConfig { body_timeout: Duration::from_secs(10), ..fetch_config() };
    let out = fetch(&Fetcher::with_pool(pool, config), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Unreachable(Unreachable::BodyTimeout(silent)));
    assert_eq!(unreachable(&out).class(), "body_timeout");
}

#[tokio::test]
async fn the_body_timeout_bounds_the_whole_body() {
    // Bytes keep coming, 10 every 20 ms, but the whole body would take 2 s.
    let body = "User-agent: *\nDisallow: /a\n".repeat(40);
    let server =
        TestOrigin::start([("/robots.txt", Reply::ok(body).drip(10, Duration::from_millis(20)))]).await;
    let config = FetchConfig { body_timeout: Duration::from_millis(300), ..fetch_config() };
    let out = fetch(&fetcher_with(config), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Unreachable(Unreachable::BodyTimeout(Duration::from_millis(300))));
}

#[tokio::test]
async fn a_body_in_small_pieces_is_read_whole() {
    let body = "User-agent: *\nDisallow: /a\n".repeat(10);
    let server =
        TestOrigin::start([("/robots.txt", Reply::ok(body.clone()).drip(7, Duration::from_millis(1)))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.as_ref(), body.as_bytes());
}

#[tokio::test]
async fn only_the_first_500_kib_are_read() {
    // 1 MiB, a rule at 600 KiB.
    let body = support::sized_body(
        1024 * 1024,
        &[(0, "User-agent: *\nDisallow: /early\n"), (600 * 1024, "Disallow: /late\n")],
    );
    let server = TestOrigin::start([("/robots.txt", Reply::ok(body.clone()))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.len(), LIMIT);
    assert!(out.truncated);
    assert_eq!(out.body.as_ref(), &body[..LIMIT]);
    assert_eq!(out.sha256, Some(<[u8; 32]>::from(Sha256::digest(&body[..LIMIT]))));
}

#[tokio::test]
async fn a_body_of_exactly_the_limit_is_not_truncated() {
    let body = support::sized_body(LIMIT, &[(0, "User-agent: *\n"), (LIMIT - 20, "Disallow: /last\n")]);
    let server = TestOrigin::start([("/robots.txt", Reply::ok(body.clone()))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.as_ref(), &body[..]);
    assert!(!out.truncated);
    // One byte more is.
    let mut longer = body;
    longer.push(b'\n');
    server.route("/robots.txt", Reply::ok(longer));
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.body.len(), LIMIT);
    assert!(out.truncated);
}

#[tokio::test]
async fn encoded_bodies_are_decoded() {
    let robots = "User-agent: *\nDisallow: /private\nAllow: /private/press\n";
    let mut cases = vec![("gzip", "gzip"), ("gzip", "x-gzip"), ("deflate", "deflate"), ("gzip", "GZIP")];
    if cfg!(feature = "brotli") {
        cases.push(("br", "br"));
    }
    for (encoding, header) in cases {
        let encoded = support::encode(encoding, robots.as_bytes()).await;
        assert_ne!(encoded, robots.as_bytes());
        let server =
            TestOrigin::start([("/robots.txt", Reply::ok(encoded).header("content-encoding", header))]).await;
        let out = fetch(&fetcher(), &server.origin("a.test")).await;
        assert_eq!(out.result, FetchResult::Success { status: 200 }, "{header}");
        assert_eq!(out.body.as_ref(), robots.as_bytes(), "{header}");
        assert!(!out.truncated);
        // The hash is of the decoded file.
        assert_eq!(out.sha256, Some(<[u8; 32]>::from(Sha256::digest(robots.as_bytes()))));
    }
}

#[tokio::test]
async fn the_limit_applies_to_decoded_bytes() {
    // 1 MiB decoded, much less on the wire.
    let body = support::sized_body(1024 * 1024, &[(0, "User-agent: *\n"), (600 * 1024, "Disallow: /late\n")]);
    for encoding in ENCODINGS {
        let encoded = support::encode(encoding, &body).await;
        assert!(encoded.len() < LIMIT);
        let server =
            TestOrigin::start([("/robots.txt", Reply::ok(encoded).header("content-encoding", encoding))])
                .await;
        let out = fetch(&fetcher(), &server.origin("a.test")).await;
        assert_eq!(out.result, FetchResult::Success { status: 200 }, "{encoding}");
        assert_eq!(out.body.len(), LIMIT, "{encoding}");
        assert!(out.truncated, "{encoding}");
        assert_eq!(out.body.as_ref(), &body[..LIMIT], "{encoding}");
    }
}

#[tokio::test]
async fn a_gzip_bomb_stays_small() {
    // 50 MiB of zeros, about 50 KiB on the wire.
    let bomb = support::encode("gzip", &vec![0u8; 50 * 1024 * 1024]).await;
    assert!(bomb.len() < 1024 * 1024, "{}", bomb.len());
    let server =
        TestOrigin::start([("/robots.txt", Reply::ok(bomb).header("content-encoding", "gzip"))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.len(), LIMIT);
    assert!(out.truncated);
    assert!(out.body.iter().all(|&b| b == 0));
}

#[tokio::test]
async fn undecodable_bodies_are_unreachable() {
    let cases = [
        ("compress", b"whatever".to_vec()),
        ("zstd", b"whatever".to_vec()),
        ("gzip, br", b"whatever".to_vec()),
        ("gzip", b"User-agent: *\nDisallow: /\n".to_vec()),
        ("br", b"\xff\xff\xff\xff not brotli at all".to_vec()),
    ];
    for (encoding, body) in cases {
        let server =
            TestOrigin::start([("/robots.txt", Reply::ok(body).header("content-encoding", encoding))]).await;
        let out = fetch(&fetcher(), &server.origin("a.test")).await;
        assert!(matches!(unreachable(&out), Unreachable::Decode(_)), "{encoding}: {out:?}");
        assert_eq!(unreachable(&out).class(), "decode");
        assert!(out.body.is_empty());
    }
}

#[tokio::test]
async fn a_truncated_gzip_body_is_not_silently_accepted() {
    let encoded = support::encode("gzip", "User-agent: *\nDisallow: /private\n".repeat(50).as_bytes()).await;
    let cut = encoded[..encoded.len() / 2].to_vec();
    let server =
        TestOrigin::start([("/robots.txt", Reply::ok(cut).header("content-encoding", "gzip"))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert!(
        matches!(unreachable(&out), Unreachable::Decode(_) | Unreachable::Protocol(_)),
        "a gzip stream cut in the middle: {out:?}"
    );
}

#[tokio::test]
async fn invalid_utf8_is_kept_as_bytes() {
    let body = b"User-agent: *\nDisallow: /a\xff\xfe\n\xc3\x28 garbage \x80\nDisallow: /private\n".to_vec();
    let server = TestOrigin::start([("/robots.txt", Reply::ok(body.clone()))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.as_ref(), &body[..]);
}

#[tokio::test]
async fn a_reset_before_answering_is_unreachable() {
    let server = TestOrigin::start([("/robots.txt", Reply::reset())]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert!(matches!(unreachable(&out), Unreachable::Protocol(_)), "{out:?}");
    assert_eq!(unreachable(&out).class(), "protocol");
    assert_eq!(server.hits("/robots.txt"), 1);
}

#[tokio::test]
async fn a_reset_while_sending_the_body_is_unreachable() {
    let body = "User-agent: *\nDisallow: /a\n".repeat(1000);
    let server = TestOrigin::start([("/robots.txt", Reply::ok(body).reset_after(500))]).await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert!(matches!(unreachable(&out), Unreachable::Protocol(_)), "{out:?}");
    assert!(out.body.is_empty(), "a partial body is not a robots.txt");
}

#[tokio::test]
async fn a_refused_connection_is_unreachable() {
    // A port nothing listens on.
    let port = dead_port();
    let origin = Origin::parse(&format!("http://a.test:{port}/")).unwrap();
    let out = fetch(&fetcher(), &origin).await;
    match unreachable(&out) {
        Unreachable::Connect(ConnectError::Connect { addr, kind, .. }) => {
            assert_eq!(*kind, std::io::ErrorKind::ConnectionRefused);
            assert_eq!(addr.port(), port);
        }
        other => panic!("expected a refused connection, got {other:?}"),
    }
    assert_eq!(unreachable(&out).class(), "connection_refused");
}

#[tokio::test]
async fn a_name_that_does_not_resolve_is_unreachable() {
    let origin = Origin::parse("http://nonexistent.invalid/").unwrap();
    let out = fetch(&fetcher(), &origin).await;
    match unreachable(&out) {
        Unreachable::Connect(ConnectError::Dns { host, .. }) => assert_eq!(host, "nonexistent.invalid"),
        other => panic!("expected a DNS failure, got {other:?}"),
    }
    assert_eq!(unreachable(&out).class(), "dns");
}

#[tokio::test]
async fn the_default_guard_refuses_loopback() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let fetcher = Fetcher::new(connector(Guard::default(), Duration::from_secs(5)), fetch_config());
    for host in ["a.test", "127.0.0.1"] {
        let out = fetch(&fetcher, &server.origin(host)).await;
        match unreachable(&out) {
            Unreachable::Connect(ConnectError::Denied { ip, reason, .. }) => {
                assert_eq!(*reason, DenyReason::Loopback, "{host}");
                assert_eq!(ip.to_string(), "127.0.0.1", "{host}");
            }
            other => panic!("{host}: expected Denied, got {other:?}"),
        }
        assert_eq!(unreachable(&out).class(), "denied");
    }
    assert_eq!(server.connections(), 0, "the guard must refuse before connecting");
    assert_eq!(server.total_hits(), 0);
}

#[tokio::test]
async fn a_redirect_to_a_refused_destination_is_unreachable() {
    // The guard applies to every hop, not only to the first.
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let config = fetch_config();
    let guard = Guard::default().allow("127.0.0.1/32".parse().unwrap());
    let fetcher = Fetcher::new(connector(guard, Duration::from_secs(5)), config);
    server.route(
        "/robots.txt",
        Reply::redirect(302, &format!("http://127.0.0.2:{}/robots.txt", server.port())),
    );
    let out = fetch(&fetcher, &server.origin("a.test")).await;
    match unreachable(&out) {
        Unreachable::Connect(ConnectError::Denied { reason: DenyReason::Loopback, .. }) => {}
        other => panic!("expected Denied for 127.0.0.2, got {other:?}"),
    }
    assert_eq!(out.redirects, 1);
}

#[tokio::test]
async fn connections_are_reused() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let fetcher = fetcher();
    for _ in 0..3 {
        let out = fetch(&fetcher, &server.origin("a.test")).await;
        assert_eq!(out.result, FetchResult::Success { status: 200 });
    }
    assert_eq!(server.hits("/robots.txt"), 3);
    assert_eq!(server.connections(), 1);
}

#[tokio::test]
async fn invalid_http_is_unreachable() {
    let answers: [&[u8]; 3] = [
        b"HELLO THERE\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nContent-Length: nope\r\n\r\nUser-agent: *\n",
        b"\x16\x03\x01\x00\x05hello",
    ];
    for answer in answers {
        let server = TestOrigin::raw(answer).await;
        let out = fetch(&fetcher(), &server.origin("a.test")).await;
        assert!(matches!(unreachable(&out), Unreachable::Protocol(_)), "{answer:?}: {out:?}");
        assert_eq!(server.connections(), 1);
    }
}

#[tokio::test]
async fn a_body_shorter_than_its_length_is_unreachable() {
    let server =
        TestOrigin::raw(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nUser-agent: *\nDisallow: /\n").await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert!(matches!(unreachable(&out), Unreachable::Protocol(_)), "{out:?}");
    assert!(out.body.is_empty());
}

#[tokio::test]
async fn a_body_ended_by_closing_the_connection_is_fine() {
    // HTTP/1.0 style: no Content-Length, no chunking, the end of the connection ends it.
    let server = TestOrigin::raw(b"HTTP/1.0 200 OK\r\n\r\nUser-agent: *\nDisallow: /x\n").await;
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.body.as_ref(), b"User-agent: *\nDisallow: /x\n");
}

#[tokio::test]
async fn statuses_outside_the_rfc_are_unreachable() {
    for status in [600u16, 799, 999] {
        let answer = format!("HTTP/1.1 {status} Strange\r\nContent-Length: 0\r\n\r\n");
        let server = TestOrigin::raw(answer.as_bytes()).await;
        let out = fetch(&fetcher(), &server.origin("a.test")).await;
        assert_eq!(out.result, FetchResult::Unreachable(Unreachable::Status(status)), "{status}");
        assert_eq!(unreachable(&out).class(), "status_other");
    }
}

#[tokio::test]
async fn a_tls_failure_is_unreachable() {
    // https to a plain-HTTP origin: the handshake fails.
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let origin = Origin::parse(&format!("https://a.test:{}/", server.port())).unwrap();
    let out = fetch(&fetcher(), &origin).await;
    match unreachable(&out) {
        Unreachable::Connect(ConnectError::Tls { host, .. }) => assert_eq!(host, "a.test"),
        other => panic!("expected a TLS failure, got {other:?}"),
    }
    assert_eq!(unreachable(&out).class(), "tls");
    assert_eq!(server.total_hits(), 0);
}

#[tokio::test]
async fn cache_control_is_reported() {
    let fetcher = fetcher();
    let cases = [
        ("max-age=120", Some(120)),
        ("public, max-age=600, s-maxage=60", Some(60)),
        ("no-store", Some(0)),
        ("no-cache, max-age=600", Some(0)),
        ("private", None),
    ];
    for (value, want) in cases {
        let server =
            TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\n").header("cache-control", value))])
                .await;
        let out = fetch(&fetcher, &server.origin("a.test")).await;
        assert_eq!(out.max_age, want.map(Duration::from_secs), "{value}");
    }
}

#[tokio::test]
async fn redirect_locations_are_resolved_like_urls() {
    let server = TestOrigin::start([]).await;
    server.route("/robots.txt", Reply::redirect(301, "  r/robots.txt?v=1#top  "));
    server.route("/r/robots.txt", Reply::redirect(308, "../final.txt"));
    server.route("/final.txt", Reply::ok("User-agent: *\nDisallow: /f\n"));
    let out = fetch(&fetcher(), &server.origin("a.test")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 });
    assert_eq!(out.redirects, 2);
    assert_eq!(out.final_url, format!("{}/final.txt", server.base_as("a.test")));
    assert_eq!(server.hits("/r/robots.txt"), 1);
    assert_eq!(server.hits("/final.txt"), 1);
}

#[tokio::test]
async fn a_name_with_a_trailing_dot_resolves_like_the_name() {
    // `a.test.` is the fully qualified spelling of `a.test`: the static override applies.
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let origin = Origin::parse(&format!("http://a.test.:{}/", server.port())).unwrap();
    let config = FetchConfig { header_timeout: Duration::from_secs(2), ..fetch_config() };
    let fetcher = Fetcher::new(connector(support::loopback_guard(), Duration::from_secs(2)), config);
    let out = fetch(&fetcher, &origin).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 }, "{out:?}");
    assert_eq!(server.hits("/robots.txt"), 1);
}

#[tokio::test(start_paused = true)]
async fn a_chain_of_slow_redirects_stops_at_the_total_timeout() {
    // Every hop answers after 9 s, within the 10 s header timeout; five of them would take
    // 45 s. The total timeout (30 s) ends the fetch during the fourth hop.
    let server = TestOrigin::start([]).await;
    for hop in 0..5 {
        server.route(
            &format!("/hop{hop}"),
            Reply::redirect(302, &format!("/hop{}", hop + 1)).wait_for(Duration::from_secs(9)),
        );
    }
    server.route("/robots.txt", Reply::redirect(302, "/hop0").wait_for(Duration::from_secs(9)));
    server.route("/hop5", Reply::ok("User-agent: *\nDisallow: /\n"));
    let config = FetchConfig {
        header_timeout: Duration::from_secs(10),
        total_timeout: Duration::from_secs(30),
        ..fetch_config()
    };
    let started = tokio::time::Instant::now();
    // Virtual time: `bounded` (10 s) would cut it short; two minutes bound it here.
    let out =
        tokio::time::timeout(Duration::from_secs(120), fetcher_with(config).fetch(&server.origin("a.test")))
            .await
            .expect("the fetch ends");
    assert_eq!(unreachable(&out), &Unreachable::TotalTimeout(Duration::from_secs(30)));
    assert_eq!(unreachable(&out).class(), "total_timeout");
    assert_eq!(started.elapsed(), Duration::from_secs(30), "no longer than the total timeout");
    assert_eq!(out.redirects, 3, "robots.txt, hop0 and hop1 answered; hop2 was cut off");
    assert!(out.body.is_empty() && out.sha256.is_none());
    assert_eq!(server.hits("/hop5"), 0);
}
