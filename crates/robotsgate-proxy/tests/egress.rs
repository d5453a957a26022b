//! robotsgate as a shared egress proxy (issue 6), in process with `App::start` and
//! configurations parsed from TOML text as a file would be: the destination guard (every
//! special range by IP literal, in IPv6 forms and through names that resolve to it, for
//! requests, tunnels and robots.txt redirects, and the proxy's own listener), what opens it
//! (CIDRs, host patterns), client networks, proxy authentication with per-user product
//! tokens, the admin listener's metrics after known traffic, the limits (head size, head
//! read timeout, connections, idle tunnels) and reloading while running.
//!
//! Every server is real and on loopback; every wait is bounded; ordering is proved with
//! round trips and connection closes, never with sleeps.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use base64::Engine;
use http::{Request, StatusCode};
use robotsgate_proxy::config::{Config, Dur};
use serde_json::Value;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// `text` parsed as the file `test.toml` (every other key at its documented default),
/// then put on a free loopback port with the audit log in `dir`.
fn config(dir: &Path, text: &str) -> Config {
    let mut c = Config::parse("test.toml", text).unwrap_or_else(|e| panic!("{e}\n--- test.toml:\n{text}"));
    c.proxy.listen = "127.0.0.1:0".parse().unwrap();
    c.proxy.shutdown_grace = Dur(Duration::from_secs(5));
    c.audit.path = dir.join("audit.jsonl").display().to_string();
    c.audit.snapshots = dir.join("snapshots").display().to_string();
    c
}

/// A GET of `url` through the proxy with `Proxy-Authorization` (if any).
fn get_as(url: &str, login: Option<(&str, &str)>) -> Request<ReqBody> {
    let mut req = get_request(url);
    if let Some((user, password)) = login {
        let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
        req.headers_mut()
            .insert(http::header::PROXY_AUTHORIZATION, format!("Basic {token}").parse().unwrap());
    }
    req
}

/// Asserts a refusal of the destination: 403, `x-robotsgate: destination-denied`, a body
/// saying which address was refused and why.
fn assert_destination_denied(got: &Got, what: &str, why: &str) {
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{what}: {}", got.text());
    assert_eq!(got.header("x-robotsgate"), "destination-denied", "{what}: {:?}", got.headers);
    assert!(got.header("content-type").starts_with("text/plain"), "{what}: {:?}", got.headers);
    let text = got.text();
    assert!(text.starts_with("robotsgate: destination "), "{what}: {text}");
    assert!(text.contains("refused"), "{what}: {text}");
    assert!(text.trim_end().ends_with(why), "{what}: the body names the reason {why:?}: {text}");
}

/// Checks a decision record for a refused destination.
fn check_denied_record(r: &Value, method: &str, url: &str, why: &str) {
    assert_eq!(r["schema_version"], robotsgate::audit::SCHEMA_VERSION, "{r}");
    assert_eq!(r["type"], "decision", "{r}");
    assert!(is_rfc3339(r["time"].as_str().unwrap_or("")), "{r}");
    assert!(r["client"].as_str().is_some_and(|c| c.parse::<SocketAddr>().is_ok()), "{r}");
    assert_eq!(r["method"], method, "{r}");
    assert_eq!(r["url"], url, "{r}");
    assert_eq!(r["outcome"], "destination-denied", "{r}");
    assert_eq!(r["reason"], "destination-denied", "{r}");
    assert!(r["robots"].is_null(), "no robots.txt was fetched or consulted: {r}");
    assert!(r["rule"].is_null(), "{r}");
    let explanation = r["explanation"].as_str().unwrap_or("");
    assert!(explanation.ends_with(why), "the explanation names {why:?}: {r}");
}

/// An Argon2 hash of `PASSWORD`, made once per test binary (Argon2 is slow in debug builds).
fn password_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| robotsgate_proxy::auth::hash_password(PASSWORD).expect("hash"))
}

const PASSWORD: &str = "correct horse battery staple";

// ---------------------------------------------------------------------------------------
// The destination guard
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_special_range_is_refused_by_ip_literal_and_nothing_is_sent() {
    let dir = temp_dir();
    // Live origins on both loopbacks, which would answer if anything got through.
    let routes = || [("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n")), ("/x", Reply::ok("inside"))];
    let v4 = TestOrigin::start(routes()).await;
    let v6 = TestOrigin::start_v6(routes()).await;
    let proxy = RunningProxy::start(&config(dir.path(), "# the default guard\n")).await;
    let (p4, p6) = (v4.port(), v6.port());

    let cases: Vec<(String, &str)> = vec![
        // Loopback, to the live origins (0.0.0.0 and :: reach local listeners too).
        (format!("http://127.0.0.1:{p4}/x"), "loopback"),
        (format!("http://127.9.8.7:{p4}/x"), "loopback"),
        (format!("http://[::1]:{p6}/x"), "loopback"),
        (format!("http://0.0.0.0:{p4}/x"), "unspecified"),
        (format!("http://[::]:{p6}/x"), "unspecified"),
        // IPv6 forms of loopback: IPv4-mapped, IPv4-compatible, NAT64 (well-known and
        // local-use prefixes).
        (format!("http://[::ffff:127.0.0.1]:{p4}/x"), "loopback"),
        (format!("http://[::127.0.0.1]:{p4}/x"), "loopback"),
        (format!("http://[64:ff9b::7f00:1]:{p4}/x"), "loopback"),
        (format!("http://[64:ff9b:1::7f00:1]:{p4}/x"), "loopback"),
        // Other spellings of 127.0.0.1 that URL parsers accept (WHATWG: decimal, hex, short).
        (format!("http://2130706433:{p4}/x"), "loopback"),
        (format!("http://0x7f.1:{p4}/x"), "loopback"),
        (format!("http://127.1:{p4}/x"), "loopback"),
        // The rest of the special ranges.
        ("http://10.0.0.1/x".into(), "private"),
        ("http://172.16.0.1/x".into(), "private"),
        ("http://172.31.255.254/x".into(), "private"),
        ("http://192.168.0.1/x".into(), "private"),
        ("http://100.64.0.1/x".into(), "shared-address-space"),
        ("http://169.254.169.254/latest/meta-data/".into(), "link-local"),
        ("http://224.0.0.1/x".into(), "multicast"),
        ("http://255.255.255.255/x".into(), "broadcast"),
        ("http://240.0.0.1/x".into(), "reserved"),
        ("http://198.18.0.1/x".into(), "reserved"),
        ("http://[fe80::1]/x".into(), "link-local"),
        ("http://[fc00::1]/x".into(), "unique-local"),
        ("http://[fd00:ec2::254]/latest/meta-data/".into(), "unique-local"),
        ("http://[ff02::1]/x".into(), "multicast"),
        ("http://[::ffff:10.0.0.1]/x".into(), "private"),
        ("http://[::ffff:169.254.169.254]/x".into(), "link-local"),
        ("http://[64:ff9b::a9fe:a9fe]/x".into(), "link-local"),
        ("http://[::10.0.0.1]/x".into(), "private"),
        // Forms a relay or translator would turn into IPv4: IPv4-translated (SIIT),
        // 6to4, Teredo (server, and the inverted client address); special IPv6 blocks.
        (format!("http://[::ffff:0:127.0.0.1]:{p4}/x"), "loopback"),
        (format!("http://[2002:7f00:1::]:{p4}/x"), "loopback"),
        ("http://[2002:a9fe:a9fe::]/latest/meta-data/".into(), "link-local"),
        ("http://[2001:0:a00:1::1]/x".into(), "private"),
        ("http://[2001:0:5db8:d822::80ff:fffe]/x".into(), "loopback"),
        ("http://[2001:db8::1]/x".into(), "reserved"),
        ("http://[100::1]/x".into(), "reserved"),
        // https and a port do not matter.
        ("https://10.1.2.3:8443/x".into(), "private"),
    ];
    for (url, why) in &cases {
        let started = Instant::now();
        let got = get(proxy.addr, url).await;
        assert_destination_denied(&got, url, why);
        // Refused before any connection attempt (a connect to 10.0.0.1 would hang for the
        // 5 s connect timeout here).
        assert!(started.elapsed() < Duration::from_secs(4), "{url} took {:?}", started.elapsed());
    }
    for origin in [&v4, &v6] {
        assert_eq!(origin.connections(), 0, "not a byte reached {}: {:?}", origin.base(), origin.seen());
    }

    let records = proxy.records().await;
    assert!(of_type(&records, "fetch").is_empty(), "no robots.txt fetch was attempted: {records:?}");
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), cases.len(), "{records:?}");
    for (d, (url, why)) in decisions.iter().zip(&cases) {
        // The URL as logged is the normalised one (e.g. 2130706433 is 127.0.0.1).
        let logged = d["url"].as_str().unwrap().to_owned();
        check_denied_record(d, "GET", &logged, why);
        assert!(logged.ends_with("/x") || logged.ends_with("/meta-data/"), "{url} logged as {logged}");
    }
    assert_eq!(decisions[9]["url"], format!("http://127.0.0.1:{p4}/x"), "2130706433 is 127.0.0.1");
    let text = proxy.metrics.render();
    assert!(
        text.contains(&format!(
            "robotsgate_decisions_total{{outcome=\"destination-denied\",reason=\"destination-denied\"}} {}",
            cases.len()
        )),
        "{text}"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn names_that_resolve_to_special_ranges_are_refused_and_nothing_is_sent() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/x", Reply::ok("inside"))]).await;
    let port = origin.port();
    let proxy = RunningProxy::start(&config(
        dir.path(),
        r#"
[dns.static]
"internal.test" = ["127.0.0.1"]
"localhost.test." = ["::1"]
"mapped.test" = ["::ffff:127.0.0.1"]
"metadata.test" = ["169.254.169.254"]
"intranet.test" = ["10.20.30.40", "192.168.1.1"]
"#,
    ))
    .await;

    let cases = [
        (format!("http://internal.test:{port}/x"), "(127.0.0.1) refused: loopback"),
        (format!("http://INTERNAL.test.:{port}/x"), "(127.0.0.1) refused: loopback"),
        (format!("http://localhost.test:{port}/x"), "(::1) refused: loopback"),
        (format!("http://mapped.test:{port}/x"), "(::ffff:127.0.0.1) refused: loopback"),
        ("http://metadata.test/latest/meta-data/".to_owned(), "(169.254.169.254) refused: link-local"),
        ("http://intranet.test/x".to_owned(), "(10.20.30.40) refused: private"),
    ];
    for (url, why) in &cases {
        let got = get(proxy.addr, url).await;
        assert_destination_denied(&got, url, why);
    }
    // A tunnel to such a name, and to the loopback origin by IP, is refused the same way.
    for (authority, why) in [
        (format!("internal.test:{port}"), "(127.0.0.1) refused: loopback"),
        (origin.authority(), "(127.0.0.1) refused: loopback"),
        ("[::ffff:169.254.169.254]:443".to_owned(), "refused: link-local"),
    ] {
        let got = collect(send(proxy.addr, connect_request(&authority)).await).await;
        assert_destination_denied(&got, &authority, why);
    }
    assert_eq!(origin.connections(), 0, "the origin saw nothing: {:?}", origin.seen());

    let records = proxy.records().await;
    assert!(of_type(&records, "fetch").is_empty(), "{records:?}");
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), cases.len() + 3, "{records:?}");
    check_denied_record(decisions[0], "GET", &format!("http://internal.test:{port}/x"), "loopback");
    check_denied_record(decisions[4], "GET", "http://metadata.test/latest/meta-data/", "link-local");
    check_denied_record(decisions[6], "CONNECT", &format!("https://internal.test:{port}/"), "loopback");
    assert_eq!(decisions[6]["path_visible"], false);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxys_own_listener_is_refused_even_when_loopback_is_allowed() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/x", Reply::ok("fine"))]).await;
    let proxy = RunningProxy::start(&config(
        dir.path(),
        r#"
[guard]
allow = ["127.0.0.0/8"]
allow_hosts = ["self.test"]

[dns.static]
"self.test" = ["127.0.0.1"]
"#,
    ))
    .await;
    let own = proxy.addr.port();

    // Loopback is open: the origin is reached.
    let got = get(proxy.addr, &origin.url("/x")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());

    for url in [
        format!("http://127.0.0.1:{own}/x"),
        format!("http://[::ffff:127.0.0.1]:{own}/x"),
        format!("http://self.test:{own}/x"),
    ] {
        let got = get(proxy.addr, &url).await;
        assert_destination_denied(&got, &url, "own-listener");
    }
    let got = collect(send(proxy.addr, connect_request(&format!("127.0.0.1:{own}"))).await).await;
    assert_destination_denied(&got, "CONNECT to itself", "own-listener");

    // One decision per request: nothing looped back in.
    let records = proxy.records().await;
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), 5, "{records:?}");
    assert_eq!(decisions[0]["outcome"], "allowed");
    for d in &decisions[1..] {
        assert_eq!(d["outcome"], "destination-denied", "{d}");
        assert!(d["explanation"].as_str().unwrap().ends_with("own-listener"), "{d}");
    }
    assert_eq!(of_type(&records, "fetch").len(), 1, "only the origin's robots.txt: {records:?}");
    let text = proxy.metrics.render();
    assert!(text.contains("robotsgate_requests_total{transport=\"proxy\",protocol=\"http1\"} 5\n"), "{text}");
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Opening the guard on purpose
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_cidr_passes_and_only_that_cidr() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let v6 = TestOrigin::start_v6([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("v6"))]).await;
    let proxy = RunningProxy::start(&config(dir.path(), "[guard]\nallow = [\"127.0.0.0/8\"]\n")).await;

    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(got.body.as_ref(), b"hello");
    assert_eq!(origin.hits("/robots.txt"), 1, "robots.txt fetched through the opened guard");
    assert_eq!(origin.hits("/page"), 1);
    // Disallowed paths are still refused by robots.txt, not by the guard.
    let got = get(proxy.addr, &origin.url("/private/x")).await;
    assert_eq!(got.header("x-robotsgate"), "disallowed", "{}", got.text());

    // ::1 is not in 127.0.0.0/8, and neither is anything else.
    let got = get(proxy.addr, &v6.url("/page")).await;
    assert_destination_denied(&got, "[::1]", "loopback");
    let got = get(proxy.addr, "http://10.0.0.1/page").await;
    assert_destination_denied(&got, "10.0.0.1", "private");
    assert_eq!(v6.connections(), 0);

    let records = proxy.records().await;
    let outcomes: Vec<&str> =
        of_type(&records, "decision").iter().map(|d| d["outcome"].as_str().unwrap()).collect();
    assert_eq!(outcomes, ["allowed", "disallowed", "destination-denied", "destination-denied"]);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_allowed_host_pattern_passes_while_other_names_for_loopback_stay_refused() {
    let dir = temp_dir();
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("intranet"))]).await;
    // An origin whose robots.txt redirects to a loopback address that is not opened.
    let redirecting = TestOrigin::start([]).await;
    let target = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n"))]).await;
    redirecting.route("/robots.txt", Reply::redirect(301, &target.url("/robots.txt")));
    let proxy = RunningProxy::start(&config(
        dir.path(),
        r#"
[guard]
allow_hosts = ["*.internal.test"]

[dns.static]
"app.internal.test" = ["127.0.0.1"]
"redirect.internal.test" = ["127.0.0.1"]
"internal.test" = ["127.0.0.1"]
"other.test" = ["127.0.0.1"]
"#,
    ))
    .await;
    let port = origin.port();

    let got = get(proxy.addr, &format!("http://app.internal.test:{port}/page")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(got.body.as_ref(), b"intranet");
    let robots = origin.seen_for("/robots.txt");
    assert_eq!(robots.len(), 1, "robots.txt fetched from the allowed host");
    assert_eq!(robots[0].headers["host"], format!("app.internal.test:{port}"));

    // The same address under other names: refused (the pattern needs a subdomain).
    for url in [format!("http://internal.test:{port}/page"), format!("http://other.test:{port}/page")] {
        let got = get(proxy.addr, &url).await;
        assert_destination_denied(&got, &url, "loopback");
    }
    assert_eq!(origin.hits("/page"), 1, "{:?}", origin.seen());
    assert_eq!(origin.total_hits(), 2, "{:?}", origin.seen());

    // A robots.txt redirect is guarded too: the hop to 127.0.0.1 is never made, and
    // without its robots.txt the request is refused.
    let url = format!("http://redirect.internal.test:{}/page", redirecting.port());
    let got = get(proxy.addr, &url).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.text());
    assert_eq!(redirecting.hits("/robots.txt"), 1);
    assert_eq!(redirecting.hits("/page"), 0);
    assert_eq!(target.connections(), 0, "the redirect target saw nothing");

    let records = proxy.records().await;
    let fetches = of_type(&records, "fetch");
    assert_eq!(fetches.len(), 2, "{records:?}");
    assert_eq!(fetches[1]["result"], "unreachable", "{records:?}");
    assert!(fetches[1]["cause"].as_str().unwrap_or("").contains("loopback"), "{records:?}");
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Client access
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clients_outside_the_allowed_networks_get_403_and_nothing_is_forwarded() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let proxy = RunningProxy::start(&config(
        dir.path(),
        "[proxy]\nallow_clients = [\"10.0.0.0/8\"]\n\n[guard]\nallow = [\"127.0.0.0/8\"]\n",
    ))
    .await;

    // A raw client, and hyper's, several times (the answer must arrive whole every time).
    let request = format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", origin.url("/page"), origin.authority());
    for _ in 0..5 {
        let raw = raw_exchange(proxy.addr, request.as_bytes()).await;
        let res = parse_response(&raw);
        assert_eq!(res.status, 403, "{}", String::from_utf8_lossy(&raw));
        assert_eq!(res.header("x-robotsgate"), Some("client-denied"));
        assert!(res.text().contains("may not use this proxy"), "{}", res.text());
        let got = get(proxy.addr, &origin.url("/page")).await;
        assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.text());
        assert_eq!(got.header("x-robotsgate"), "client-denied");
    }
    assert_eq!(origin.connections(), 0, "the origin saw nothing");
    let records = proxy.records().await;
    // Refused before any decision: each answer has its refusal record (issue 31.2).
    assert_eq!(records.len(), 10, "{records:?}");
    assert!(records.iter().all(|r| r["type"] == "refusal" && r["refusal"] == "client-denied"), "{records:?}");
    let text = proxy.metrics.render();
    assert!(text.contains("robotsgate_refused_total{class=\"client-denied\"} 10\n"), "{text}");
    assert!(text.contains("robotsgate_connections_total 0\n"), "{text}");
    proxy.stop().await;

    // Loopback allowed: served.
    let dir = temp_dir();
    let proxy = RunningProxy::start(&config(
        dir.path(),
        "[proxy]\nallow_clients = [\"10.0.0.0/8\", \"127.0.0.0/8\"]\n\n[guard]\nallow = [\"127.0.0.0/8\"]\n",
    ))
    .await;
    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(origin.hits("/page"), 1);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_users_log_in_and_are_held_to_their_own_product_token() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: AliceBot\nDisallow: /private\n")),
        ("/private", Reply::echo()),
    ])
    .await;
    let hash = password_hash();
    let proxy = RunningProxy::start(&config(
        dir.path(),
        &format!(
            r#"
[auth]
realm = "egress test"

[auth.users]
alice = "{hash}"
bob = "{hash}"

[agent]
token = "ExampleBot"
select = "proxy-user"

[agent.users]
alice = "AliceBot"

[guard]
allow = ["127.0.0.0/8"]
"#
        ),
    ))
    .await;
    let url = origin.url("/private");

    // No credentials: 407 with the challenge, for a request and for a tunnel.
    let got = collect(send(proxy.addr, get_as(&url, None)).await).await;
    assert_eq!(got.status, StatusCode::PROXY_AUTHENTICATION_REQUIRED, "{}", got.text());
    assert_eq!(got.header("proxy-authenticate"), "Basic realm=\"egress test\"");
    assert_eq!(got.header("x-robotsgate"), "auth-required");
    let got = collect(send(proxy.addr, connect_request(&origin.authority())).await).await;
    assert_eq!(got.status, StatusCode::PROXY_AUTHENTICATION_REQUIRED, "{}", got.text());
    assert_eq!(got.header("proxy-authenticate"), "Basic realm=\"egress test\"");
    // A wrong password: 407 again.
    let got = collect(send(proxy.addr, get_as(&url, Some(("alice", "wrong")))).await).await;
    assert_eq!(got.status, StatusCode::PROXY_AUTHENTICATION_REQUIRED, "{}", got.text());
    assert!(got.text().contains("wrong password"), "{}", got.text());
    assert_eq!(origin.connections(), 0, "nothing reached the origin before a login");

    // alice is AliceBot, whom robots.txt keeps out of /private.
    let got = collect(send(proxy.addr, get_as(&url, Some(("alice", PASSWORD)))).await).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.text());
    assert_eq!(got.header("x-robotsgate"), "disallowed");
    assert!(got.text().contains("AliceBot"), "{}", got.text());
    assert_eq!(origin.hits("/private"), 0);
    // bob has no token of his own: the default, ExampleBot, may go there.
    let got = collect(send(proxy.addr, get_as(&url, Some(("bob", PASSWORD)))).await).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(origin.hits("/private"), 1);
    let seen = &origin.seen_for("/private")[0];
    assert!(seen.headers.get("proxy-authorization").is_none(), "credentials are not forwarded");

    let records = proxy.records().await;
    let decisions = of_type(&records, "decision");
    assert_eq!(decisions.len(), 2, "a 407 makes no decision: {records:?}");
    check_decision_record(decisions[0]);
    assert_eq!(decisions[0]["user"], "alice");
    assert_eq!(decisions[0]["agent"], "AliceBot");
    assert_eq!(decisions[0]["outcome"], "disallowed");
    check_decision_record(decisions[1]);
    assert_eq!(decisions[1]["user"], "bob");
    assert_eq!(decisions[1]["agent"], "ExampleBot");
    assert_eq!(decisions[1]["outcome"], "allowed");
    let text = proxy.metrics.render();
    assert!(text.contains("robotsgate_refused_total{class=\"auth-required\"} 3\n"), "{text}");
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Metrics and health
// ---------------------------------------------------------------------------------------

/// GET `path` from the admin listener.
async fn admin_get(admin: SocketAddr, path: &str) -> Got {
    let mut sender = proxy_conn(admin).await;
    let req = Request::get(path).header(http::header::HOST, admin.to_string()).body(empty()).unwrap();
    exchange(&mut sender, req).await
}

/// The value of the sample `series` (name and labels exactly as exposed).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{series}: not a number in {text}")))
}

/// Asserts the sample values of `expected` in the exposition `text`.
fn assert_samples(text: &str, expected: &[(&str, f64)]) {
    for (series, want) in expected {
        assert_eq!(sample(text, series), Some(*want), "{series}\n{text}");
    }
}

/// Connections held open on the admin listener cannot keep a health check out: past
/// `MAX_CONNECTIONS`, a new connection closes the oldest (before, it waited in the queue
/// until a held one timed out, 10 s, again and again while the holders came back).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_admin_connections_cannot_keep_a_health_check_out() {
    let dir = temp_dir();
    let proxy = RunningProxy::start(&config(dir.path(), "[admin]\nlisten = \"127.0.0.1:0\"\n")).await;
    let admin = proxy.admin.expect("the admin listener is configured");
    let mut held = Vec::new();
    for _ in 0..robotsgate_proxy::admin::MAX_CONNECTIONS {
        held.push(bounded("connect", TcpStream::connect(admin)).await.unwrap());
    }
    // Served, each (an answer on the last one says all were accepted in turn).
    let last = held.last_mut().unwrap();
    last.write_all(b"GET /healthz HTTP/1.1\r\nHost: admin\r\n\r\n").await.unwrap();
    let mut buf = [0u8; 512];
    let n = bounded("the last held connection's answer", last.read(&mut buf)).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&buf[..n]));
    let got = admin_get(admin, "/healthz").await;
    assert_eq!(got.status, StatusCode::OK);
    // The oldest made way; the next is still open.
    let n = bounded("the oldest closes", held[0].read(&mut buf)).await.unwrap();
    assert_eq!(n, 0, "closed without an answer");
    assert!(
        matches!(held[1].try_read(&mut buf), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock),
        "the second oldest is still open"
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_known_traffic_and_health_endpoints_answer() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let hash = password_hash();
    // One client connection at a time: a second one is served only once the first has
    // closed, which makes the connection gauge exact without waiting for anything.
    let proxy = RunningProxy::start(&config(
        dir.path(),
        &format!(
            r#"
[proxy]
max_connections = 1

[auth.users]
alice = "{hash}"

[guard]
allow = ["127.0.0.0/8"]

[admin]
listen = "127.0.0.1:0"
"#
        ),
    ))
    .await;
    let admin = proxy.admin.expect("the admin listener is configured");
    assert_ne!(admin.port(), 0);

    let got = admin_get(admin, "/healthz").await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "ok\n"));
    let got = admin_get(admin, "/readyz").await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "ready\n"));
    let before = admin_get(admin, "/metrics").await.text();
    assert_samples(
        &before,
        &[
            (r#"robotsgate_requests_total{transport="proxy",protocol="http1"}"#, 0.0),
            ("robotsgate_open_connections", 0.0),
        ],
    );

    let login = Some(("alice", PASSWORD));
    let mut a = proxy_conn(proxy.addr).await;
    let got = exchange(&mut a, get_as(&origin.url("/page"), None)).await;
    assert_eq!(got.status, StatusCode::PROXY_AUTHENTICATION_REQUIRED);
    let got = exchange(&mut a, get_as(&origin.url("/page"), login)).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    let got = exchange(&mut a, get_as(&origin.url("/private/x"), login)).await;
    assert_eq!(got.header("x-robotsgate"), "disallowed", "{}", got.text());
    let got = exchange(&mut a, get_as("http://10.0.0.1/", login)).await;
    assert_eq!(got.header("x-robotsgate"), "destination-denied", "{}", got.text());
    let records = proxy.records().await; // flushed: the audit gauges are exact
    assert_eq!(
        records.len(),
        8,
        "the 407's refusal, three decisions, their outcomes and a fetch: {records:?}"
    );
    assert_eq!(of_type(&records, "refusal").len(), 1, "{records:?}");

    let res = admin_get(admin, "/metrics").await;
    assert_eq!(res.status, StatusCode::OK);
    assert!(res.header("content-type").starts_with("application/openmetrics-text"), "{:?}", res.headers);
    let text = res.text();
    assert_samples(
        &text,
        &[
            (r#"robotsgate_requests_total{transport="proxy",protocol="http1"}"#, 4.0),
            ("robotsgate_request_duration_seconds_count", 4.0),
            (r#"robotsgate_refused_total{class="auth-required"}"#, 1.0),
            (r#"robotsgate_decisions_total{outcome="allowed",reason="no-rule"}"#, 1.0),
            (r#"robotsgate_decisions_total{outcome="disallowed",reason="disallow-rule"}"#, 1.0),
            (r#"robotsgate_decisions_total{outcome="destination-denied",reason="destination-denied"}"#, 1.0),
            ("robotsgate_decision_duration_seconds_count", 3.0),
            (r#"robotsgate_robots_fetches_total{result="success",cause=""}"#, 1.0),
            (r#"robotsgate_robots_cache_lookups_total{class="miss"}"#, 1.0),
            (r#"robotsgate_robots_cache_lookups_total{class="hit"}"#, 1.0),
            (r#"robotsgate_robots_cache_lookups_total{class="stale"}"#, 0.0),
            ("robotsgate_connections_total", 1.0),
            ("robotsgate_open_connections", 1.0),
            ("robotsgate_audit_records_written", 8.0),
            ("robotsgate_audit_records_lost", 0.0),
        ],
    );
    assert_eq!(text.lines().filter(|l| l.starts_with("robotsgate_decisions_total{")).count(), 3, "{text}");
    assert!(!text.contains("robotsgate_upstream_errors_total{"), "{text}");
    assert!(text.trim_end().ends_with("# EOF"), "{text}");

    // The first connection closes; the second is served only after that (one slot).
    drop(a);
    let mut b = proxy_conn(proxy.addr).await;
    let got = exchange(&mut b, get_as(&origin.url("/page"), login)).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    let text = admin_get(admin, "/metrics").await.text();
    assert_samples(
        &text,
        &[
            (r#"robotsgate_requests_total{transport="proxy",protocol="http1"}"#, 5.0),
            (r#"robotsgate_decisions_total{outcome="allowed",reason="no-rule"}"#, 2.0),
            (r#"robotsgate_robots_cache_lookups_total{class="hit"}"#, 2.0),
            (r#"robotsgate_robots_cache_lookups_total{class="miss"}"#, 1.0),
            (r#"robotsgate_robots_fetches_total{result="success",cause=""}"#, 1.0),
            ("robotsgate_connections_total", 2.0),
            ("robotsgate_open_connections", 1.0),
        ],
    );
    assert_eq!(origin.hits("/robots.txt"), 1);
    drop(b);
    proxy.stop().await;
    // The admin listener goes with the proxy.
    assert!(TcpStream::connect(admin).await.is_err(), "the admin listener is closed after shutdown");
}

// ---------------------------------------------------------------------------------------
// Limits
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_head_over_max_header_bytes_gets_431() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let proxy = RunningProxy::start(&config(
        dir.path(),
        "[proxy]\nmax_header_bytes = \"2KiB\"\n\n[guard]\nallow = [\"127.0.0.0/8\"]\n",
    ))
    .await;
    let head = |filler: usize| {
        format!(
            "GET {} HTTP/1.1\r\nHost: {}\r\nX-Filler: {}\r\nConnection: close\r\n\r\n",
            origin.url("/page"),
            origin.authority(),
            "a".repeat(filler)
        )
    };
    // Under the limit: served.
    let small = head(1500);
    assert!(small.len() < 2048);
    let res = parse_response(&raw_exchange(proxy.addr, small.as_bytes()).await);
    assert_eq!(res.status, 200, "{}", res.text());
    assert_eq!(origin.hits("/page"), 1);
    // Over it (and over hyper's smallest read buffer, 8 KiB, too): 431, nothing forwarded.
    for filler in [3000, 20_000] {
        let big = head(filler);
        let raw = raw_exchange(proxy.addr, big.as_bytes()).await;
        let res = parse_response(&raw);
        assert_eq!(res.status, 431, "a {} byte head: {}", big.len(), String::from_utf8_lossy(&raw));
    }
    assert_eq!(origin.hits("/page"), 1);
    // The proxy keeps serving.
    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.status, StatusCode::OK);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_too_slow_with_its_request_head_is_disconnected() {
    let dir = temp_dir();
    let proxy = RunningProxy::start(&config(dir.path(), "[proxy]\nheader_read_timeout = \"300ms\"\n")).await;
    // Half a request line, then nothing.
    let started = Instant::now();
    let mut tcp = bounded("connect", TcpStream::connect(proxy.addr)).await.unwrap();
    tcp.write_all(b"GET http://example.com/ HTT").await.unwrap();
    let mut out = Vec::new();
    let _ = bounded("the proxy closes the connection", tcp.read_to_end(&mut out)).await;
    assert!(
        out.is_empty() || String::from_utf8_lossy(&out).starts_with("HTTP/1.1 408"),
        "{}",
        String::from_utf8_lossy(&out)
    );
    assert!(started.elapsed() >= Duration::from_millis(300), "closed after {:?}", started.elapsed());
    // A connection that says nothing at all is closed too.
    let mut tcp = bounded("connect", TcpStream::connect(proxy.addr)).await.unwrap();
    let mut out = Vec::new();
    let _ = bounded("the proxy closes the silent connection", tcp.read_to_end(&mut out)).await;
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_max_connections_1_a_second_client_waits_for_the_first_to_close() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/first", Reply::ok("first")),
        ("/second", Reply::ok("second")),
    ])
    .await;
    let proxy = RunningProxy::start(&config(
        dir.path(),
        "[proxy]\nmax_connections = 1\n\n[guard]\nallow = [\"127.0.0.0/8\"]\n",
    ))
    .await;

    let mut first = proxy_conn(proxy.addr).await;
    let got = exchange(&mut first, get_request(&origin.url("/first"))).await;
    assert_eq!(got.status, StatusCode::OK);

    // The second client connects (the kernel completes the handshake) and sends its
    // request, which waits in the listen backlog.
    let (addr, url) = (proxy.addr, origin.url("/second"));
    let second = tokio::spawn(async move { get(addr, &url).await });
    // Two more round trips on the first connection, while the second waits.
    for _ in 0..2 {
        let got = exchange(&mut first, get_request(&origin.url("/first"))).await;
        assert_eq!(got.status, StatusCode::OK);
    }
    assert_eq!(origin.hits("/second"), 0, "the second connection is not served while the first is open");
    assert!(!second.is_finished());
    assert!(proxy.metrics.render().contains("robotsgate_connections_total 1\n"));

    drop(first);
    let got = bounded("the second request", second).await.unwrap();
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(got.body.as_ref(), b"second");
    assert_eq!(origin.hits("/second"), 1);
    assert_eq!(origin.hits("/first"), 3);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_tunnel_is_closed_after_tunnel_idle_timeout() {
    let dir = temp_dir();
    // A raw TCP echo server; it reports when its side of the tunnel is closed.
    let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo_addr = echo.local_addr().unwrap();
    let (closed_tx, closed_rx) = tokio::sync::oneshot::channel::<usize>();
    tokio::spawn(async move {
        let (mut s, _) = echo.accept().await.unwrap();
        let mut buf = [0u8; 1024];
        let mut echoed = 0;
        loop {
            match s.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    echoed += n;
                    if s.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            }
        }
        let _ = closed_tx.send(echoed);
    });
    let proxy = RunningProxy::start(&config(
        dir.path(),
        r#"
[proxy]
tunnel_idle_timeout = "300ms"

[guard]
allow = ["127.0.0.0/8"]

# No robots.txt behind a raw TCP service: an operator's override decides.
[[policy.overrides]]
hosts = "127.0.0.1"
action = "allow"
reason = "echo service for the tunnel test"
"#,
    ))
    .await;

    let mut sender = proxy_conn(proxy.addr).await;
    let res = bounded("CONNECT", sender.send_request(connect_request(&echo_addr.to_string()))).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK, "{:?}", res.headers());
    let upgraded = bounded("upgrade", hyper::upgrade::on(res)).await.expect("upgrade");
    let mut tunnel = hyper_util::rt::TokioIo::new(upgraded);
    // The last bytes through the tunnel move after this instant.
    let idle_from = Instant::now();
    tunnel.write_all(b"ping through the tunnel").await.unwrap();
    let mut buf = [0u8; 23];
    bounded("echo", tunnel.read_exact(&mut buf)).await.unwrap();
    assert_eq!(&buf, b"ping through the tunnel");

    // Now nothing moves either way: the proxy closes both sides.
    let mut rest = Vec::new();
    let _ = bounded("the idle tunnel closes", tunnel.read_to_end(&mut rest)).await;
    assert!(rest.is_empty());
    // Not before the timeout (the proxy stamps activity in whole milliseconds).
    assert!(idle_from.elapsed() >= Duration::from_millis(295), "closed after {:?}", idle_from.elapsed());
    let echoed = bounded("the origin side closes", closed_rx).await.unwrap();
    assert_eq!(echoed, 23);

    let records = proxy.records().await;
    let d = of_type(&records, "decision");
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["reason"], "override");
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Reloading while running
// ---------------------------------------------------------------------------------------

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_changes_guard_and_client_networks_and_keeps_open_connections() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let proxy = RunningProxy::start(&config(dir.path(), "")).await;
    let mut kept = proxy_conn(proxy.addr).await;
    let got = exchange(&mut kept, get_request(&origin.url("/page"))).await;
    assert_destination_denied(&got, "before the reload", "loopback");

    // Open loopback.
    let restart =
        proxy.reloader.reload(&config(dir.path(), "[guard]\nallow = [\"127.0.0.0/8\"]\n")).expect("reload");
    assert!(restart.is_empty(), "{restart:?}");
    let got = exchange(&mut kept, get_request(&origin.url("/page"))).await;
    assert_eq!(got.status, StatusCode::OK, "the connection from before the reload is served: {}", got.text());

    // Close the proxy to loopback clients; a restart-only change is named, not applied.
    let restart = proxy
        .reloader
        .reload(&config(
            dir.path(),
            "[proxy]\nallow_clients = [\"10.0.0.0/8\"]\nupstream_timeout = \"5s\"\n\n[guard]\nallow = [\"127.0.0.0/8\"]\n",
        ))
        .expect("reload");
    assert_eq!(restart, ["proxy timeouts and limits"]);
    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.header("x-robotsgate"), "client-denied", "{}", got.text());
    // Client networks are checked when a connection is accepted: the open one goes on.
    let got = exchange(&mut kept, get_request(&origin.url("/page"))).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(origin.hits("/page"), 2);

    // Named against the running values, not the last file's: still not applied, so named
    // again; a file back to the running values needs nothing. (Before, the first was
    // silent and the second named "proxy timeouts and limits".)
    let closed = "[proxy]\nallow_clients = [\"10.0.0.0/8\"]\n";
    let loopback = "\n[guard]\nallow = [\"127.0.0.0/8\"]\n";
    let with = |more: &str| config(dir.path(), &format!("{closed}{more}{loopback}"));
    let again = proxy.reloader.reload(&with("upstream_timeout = \"5s\"\n")).expect("reload");
    assert_eq!(again, ["proxy timeouts and limits"]);
    assert_eq!(proxy.reloader.reload(&with("")).expect("reload"), Vec::<&str>::new());
    // Read at the start only: the fast path, fleet mode (they were not named).
    let fleet = with("http1_fast_path = false\n\n[cluster]\nredis = \"redis://127.0.0.1:1\"\n");
    assert_eq!(proxy.reloader.reload(&fleet).expect("reload"), ["proxy.http1_fast_path", "[cluster]"]);

    // A reload with an unusable user hash is refused as a whole.
    let mut bad = config(dir.path(), "");
    bad.auth.users.insert("mallory".into(), robotsgate_proxy::config::PasswordHashValue("not a hash".into()));
    assert!(proxy.reloader.reload(&bad).is_err());
    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.header("x-robotsgate"), "client-denied", "the refused reload changed nothing");
    drop(kept);
    proxy.stop().await;
}
