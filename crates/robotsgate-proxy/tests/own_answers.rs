//! Issue 31.2: every answer robotsgate gives itself has an audit record. Answers made
//! after a decision have their decision (and outcome) records; those made without one get
//! a `refusal` record: a request without a product token, one the layer cannot read, one
//! hyper cannot parse, an origin-form request, a head over the limit, a missing proxy
//! password, a client network refused, a tunnel that should carry TLS and does not. Each
//! is sent by a real client (raw TCP or hyper) to the proxy started in process, and the
//! audit log is read back after each answer.

mod support;

use std::path::Path;

use robotsgate_proxy::config::{Config, PasswordHashValue, Select, Size};
use serde_json::Value;
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

/// The `refusal` records written so far.
async fn refusals(proxy: &RunningProxy) -> Vec<Value> {
    of_type(&proxy.records().await, "refusal").into_iter().cloned().collect()
}

/// The refusal records once there are `n` of them (bounded): an answer hyper gave itself
/// is recorded by the connection's task after the answer went out, so the client can see
/// it before the record is queued.
async fn refusals_at_least(proxy: &RunningProxy, n: usize) -> Vec<Value> {
    bounded("refusal records", async {
        loop {
            let r = refusals(proxy).await;
            if r.len() >= n {
                return r;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

/// The fields every refusal record has, with the status and kind expected.
fn check_refusal(r: &Value, status: u16, kind: &str) {
    assert_eq!(r["schema_version"], robotsgate::audit::SCHEMA_VERSION, "{r}");
    assert_eq!(r["type"], "refusal");
    assert!(is_rfc3339(r["time"].as_str().unwrap()), "{r}");
    assert!(!r["request_id"].as_str().unwrap().is_empty(), "{r}");
    assert!(r["client"].as_str().unwrap().starts_with("127.0.0.1:"), "{r}");
    assert_eq!(r["status"], status, "{r}");
    assert_eq!(r["refusal"], kind, "{r}");
    assert!(!r["reason"].as_str().unwrap().is_empty(), "{r}");
}

fn config_with(dir: &Path, edit: impl FnOnce(&mut Config)) -> Config {
    let mut c = test_config(dir);
    edit(&mut c);
    c
}

fn raw_get(url: &str, host: &str, extra: &str) -> String {
    format!("GET {url} HTTP/1.1\r\nHost: {host}\r\n{extra}Connection: close\r\n\r\n")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_a_usable_product_token_has_a_refusal_record() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("p"))]).await;
    let proxy = RunningProxy::start(&config_with(dir.path(), |c| c.agent.select = Select::Header)).await;

    // A header that names no usable product token (a missing one takes agent.token).
    let got = parse_response(
        &raw_exchange(
            proxy.addr,
            raw_get(&origin.url("/page"), &origin.authority(), "x-robots-agent: Example Bot/1.0\r\n")
                .as_bytes(),
        )
        .await,
    );
    assert_eq!(got.status, 400, "{got:?}");
    assert_eq!(got.header("x-robotsgate"), Some("no-token"));
    let records = refusals(&proxy).await;
    assert_eq!(records.len(), 1, "{records:?}");
    check_refusal(&records[0], 400, "no-token");
    assert_eq!(records[0]["method"], "GET");
    assert_eq!(records[0]["target"], origin.url("/page").as_str());
    assert_eq!(records[0]["transport"], "proxy");
    assert_eq!(of_type(&proxy.records().await, "decision").len(), 0);

    // With the token: a decision record, and no second refusal record.
    let got = parse_response(
        &raw_exchange(
            proxy.addr,
            raw_get(&origin.url("/page"), &origin.authority(), "x-robots-agent: ExampleBot\r\n").as_bytes(),
        )
        .await,
    );
    assert_eq!(got.status, 200, "{got:?}");
    assert_eq!(refusals(&proxy).await.len(), 1);
    assert_eq!(of_type(&proxy.records().await, "decision").len(), 1);
    assert_eq!(origin.hits("/page"), 1);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_and_misdirected_requests_have_refusal_records() {
    let dir = temp_dir();
    let proxy =
        RunningProxy::start(&config_with(dir.path(), |c| c.proxy.max_header_bytes = Size(2048))).await;

    // A scheme robotsgate does not fetch: the layer cannot read it.
    let got = parse_response(
        &raw_exchange(proxy.addr, raw_get("ftp://example.com/x", "example.com", "").as_bytes()).await,
    );
    assert_eq!((got.status, got.header("x-robotsgate")), (400, Some("bad-request")), "{got:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 1, "{r:?}");
    check_refusal(&r[0], 400, "bad-request");
    assert_eq!(r[0]["target"], "ftp://example.com/x");

    // Origin form: a request for the proxy itself.
    let got = parse_response(&raw_exchange(proxy.addr, raw_get("/x", "example.com", "").as_bytes()).await);
    assert_eq!((got.status, got.header("x-robotsgate")), (400, Some("not-a-proxy-request")), "{got:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 2, "{r:?}");
    check_refusal(&r[1], 400, "not-a-proxy-request");
    assert_eq!((r[1]["method"].as_str(), r[1]["target"].as_str()), (Some("GET"), Some("/x")));

    // A head over proxy.max_header_bytes.
    let filler = format!("x-filler: {}\r\n", "a".repeat(3000));
    let got = parse_response(
        &raw_exchange(proxy.addr, raw_get("http://example.com/x", "example.com", &filler).as_bytes()).await,
    );
    assert_eq!(got.status, 431, "{got:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 3, "{r:?}");
    check_refusal(&r[2], 431, "header-too-large");

    // Bytes hyper cannot parse as a request: hyper answers 400 itself.
    let raw = raw_exchange(proxy.addr, b"GET http://example.com/ HTTP/1.1\r\nHost example.com\r\n\r\n").await;
    assert!(raw.starts_with(b"HTTP/1.1 400"), "{:?}", String::from_utf8_lossy(&raw));
    let r = refusals_at_least(&proxy, 4).await;
    assert_eq!(r.len(), 4, "{r:?}");
    check_refusal(&r[3], 400, "bad-request");
    assert!(r[3]["reason"].as_str().unwrap().starts_with("malformed request"), "{}", r[3]);
    assert!(r[3]["method"].is_null() && r[3]["target"].is_null(), "nothing could be read: {}", r[3]);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn proxy_authentication_and_client_network_refusals_have_records() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("p"))]).await;
    let dir = temp_dir();
    let hash = robotsgate_proxy::auth::hash_password("pw").expect("hash");
    let proxy = RunningProxy::start(&config_with(dir.path(), |c| {
        c.auth.users.insert("alice".into(), PasswordHashValue(hash));
    }))
    .await;
    let got = parse_response(
        &raw_exchange(proxy.addr, raw_get(&origin.url("/page"), &origin.authority(), "").as_bytes()).await,
    );
    assert_eq!(got.status, 407, "{got:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 1, "{r:?}");
    check_refusal(&r[0], 407, "auth-required");
    assert_eq!(r[0]["target"], origin.url("/page").as_str());
    proxy.stop().await;

    let dir = temp_dir();
    let proxy = RunningProxy::start(&config_with(dir.path(), |c| {
        c.proxy.allow_clients = vec!["10.0.0.0/8".parse().unwrap()];
    }))
    .await;
    let got = parse_response(
        &raw_exchange(proxy.addr, raw_get(&origin.url("/page"), &origin.authority(), "").as_bytes()).await,
    );
    assert_eq!(got.header("x-robotsgate"), Some("client-denied"), "{got:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 1, "{r:?}");
    check_refusal(&r[0], 403, "client-denied");
    assert_eq!(
        (r[0]["method"].as_str(), r[0]["target"].as_str()),
        (Some("GET"), Some(origin.url("/page").as_str()))
    );
    assert_eq!(origin.hits("/page"), 0);
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_intercepted_tunnel_without_tls_has_a_refusal_record() {
    let dir = temp_dir();
    let ca_dir = proxy_ca(dir.path());
    let proxy = RunningProxy::start(&intercept_config(dir.path(), &ca_dir, &[])).await;
    let (answer, mut tcp) = connect(proxy.addr, "localhost:8443").await;
    assert_eq!(answer.status, 200, "{answer:?}");
    bounded("write", tcp.write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")).await.unwrap();
    let mut raw = Vec::new();
    let _ = bounded("read", tcp.read_to_end(&mut raw)).await;
    let got = parse_response(&raw);
    assert_eq!(got.header("x-robotsgate"), Some("tls-expected"), "{got:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 1, "{r:?}");
    check_refusal(&r[0], 400, "tls-expected");
    assert_eq!(r[0]["transport"], "intercepted");
    assert_eq!(r[0]["target"], "https://localhost:8443");
    proxy.stop().await;
}

/// A `CONNECT` to a port that is not intercepted connects before anything is decided: when
/// that fails, the `502` is robotsgate's own answer, with its record.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_that_cannot_connect_has_a_refusal_record() {
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    // A port nothing listens on (bound, then closed).
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let (answer, _tcp) = connect(proxy.addr, &format!("127.0.0.1:{port}")).await;
    assert_eq!(answer.status, 502, "{answer:?}");
    let r = refusals(&proxy).await;
    assert_eq!(r.len(), 1, "{r:?}");
    check_refusal(&r[0], 502, "upstream-unreachable");
    assert_eq!(r[0]["method"], "CONNECT");
    assert_eq!(r[0]["target"], format!("127.0.0.1:{port}"));
    proxy.stop().await;
}
