//! AI-usage preferences end to end through the proxy (issue 19): the purpose from the
//! configuration, from a proxy user, from a request header (removed before forwarding);
//! robots.txt's Content-Usage / Content-Signal lines refusing a purpose; response headers
//! (Content-Usage, X-Robots-Tag) noted in the audit log and, with enforce_response,
//! replacing the response before any of its body reaches the client.

mod support;

use std::path::Path;
use std::sync::OnceLock;
use std::time::Duration;

use base64::Engine;
use http::StatusCode;
use robotsgate_proxy::config::{Config, Dur};
use serde_json::Value;
use support::*;

const ROBOTS: &str =
    "User-agent: *\nDisallow: /private\nContent-Usage: /ai/ train-ai=n\nContent-Signal: search=yes\n";

/// `text` parsed as a configuration for ExampleBot, on a free port, loopback allowed,
/// the audit log in `dir`.
fn config(dir: &Path, text: &str) -> Config {
    let text = format!("[agent]\ntoken = \"ExampleBot\"\n[guard]\nallow = [\"127.0.0.0/8\"]\n{text}");
    let mut c = Config::parse("test.toml", &text).unwrap_or_else(|e| panic!("{e}\n--- test.toml:\n{text}"));
    c.proxy.listen = "127.0.0.1:0".parse().unwrap();
    c.proxy.shutdown_grace = Dur(Duration::from_secs(5));
    c.audit.path = dir.join("audit.jsonl").display().to_string();
    c.audit.snapshots = dir.join("snapshots").display().to_string();
    c
}

fn decisions(records: &[Value]) -> Vec<&Value> {
    records.iter().filter(|r| r["type"] == "decision").collect()
}

fn record_for<'a>(records: &'a [Value], url: &str) -> &'a Value {
    decisions(records)
        .into_iter()
        .rev()
        .find(|r| r["url"] == url)
        .unwrap_or_else(|| panic!("no decision record for {url}: {records:?}"))
}

fn assert_usage_refused(got: &Got, line: &str) {
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.text());
    assert_eq!(got.header("x-robotsgate"), "usage-refused", "{:?}", got.headers);
    let text = got.text();
    assert!(text.starts_with("robotsgate: "), "{text}");
    assert!(text.contains(line), "the body names the preference line {line:?}: {text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purpose_from_config_refuses_what_the_site_says_no_to() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/ai/page", Reply::ok("not for training")),
        ("/page", Reply::ok("fine")),
    ])
    .await;
    let proxy = RunningProxy::start(&config(dir.path(), "[purpose]\ndefault = [\"train-ai\"]\n")).await;

    let refused = origin.url("/ai/page");
    let got = get(proxy.addr, &refused).await;
    assert_usage_refused(&got, "line 3: content-usage: /ai/ train-ai=n");
    assert!(got.text().contains("Purpose: train-ai"), "{}", got.text());
    assert!(!got.text().contains("not for training"));
    assert_eq!(origin.hits("/ai/page"), 0, "a refused request never reaches the origin");

    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.status, StatusCode::OK, "no statement for train-ai at /page: allowed");
    // robots.txt still decides first.
    let got = get(proxy.addr, &origin.url("/private/x")).await;
    assert_eq!(got.header("x-robotsgate"), "disallowed");

    let records = proxy.records().await;
    for r in decisions(&records) {
        check_decision_record(r);
    }
    let r = record_for(&records, &refused);
    assert_eq!(r["outcome"], "usage-refused", "{r}");
    assert_eq!(r["reason"], "no-rule", "robots.txt's own reason is kept: {r}");
    assert_eq!(r["usage"]["purpose"], serde_json::json!(["train-ai"]), "{r}");
    assert_eq!(r["usage"]["refused"], "train-ai", "{r}");
    let p = &r["usage"]["preferences"][0];
    assert_eq!(p["preference"], "disallowed", "{r}");
    assert_eq!(p["content_usage"]["line"], 3, "{r}");
    assert_eq!(p["content_usage"]["text"], "/ai/ train-ai=n", "{r}");
    // The longest Content-Signal line says nothing of train-ai: cited, unknown.
    assert_eq!(
        (p["content_signal"]["line"].as_u64(), p["content_signal"]["preference"].as_str()),
        (Some(4), Some("unknown"))
    );
    let ok = record_for(&records, &origin.url("/page"));
    assert_eq!(ok["outcome"], "allowed", "{ok}");
    assert_eq!(ok["usage"]["preferences"][0]["preference"], "unknown", "{ok}");
    assert!(record_for(&records, &origin.url("/private/x")).get("usage").is_none());
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_purpose_preferences_are_not_looked_at() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/ai/page", Reply::ok("x"))]).await;
    let proxy = RunningProxy::start(&config(dir.path(), "")).await;
    let got = get(proxy.addr, &origin.url("/ai/page")).await;
    assert_eq!(got.status, StatusCode::OK);
    let records = proxy.records().await;
    let r = record_for(&records, &origin.url("/ai/page"));
    assert_eq!(r["outcome"], "allowed");
    assert!(r.get("usage").is_none(), "{r}");
    proxy.stop().await;
}

fn password_hash() -> &'static str {
    static HASH: OnceLock<String> = OnceLock::new();
    HASH.get_or_init(|| robotsgate_proxy::auth::hash_password("pw").expect("hash"))
}

fn get_as(url: &str, user: &str, headers: &[(&str, &str)]) -> http::Request<ReqBody> {
    let mut req = get_request(url);
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:pw"));
    req.headers_mut().insert(http::header::PROXY_AUTHORIZATION, format!("Basic {token}").parse().unwrap());
    for (k, v) in headers {
        req.headers_mut().insert(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
    }
    req
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn purpose_per_proxy_user_and_from_the_header_which_is_removed() {
    let dir = temp_dir();
    let robots = "Content-Signal: ai-train=no, search=yes\nUser-agent: *\nAllow: /\n";
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(robots)), ("/page", Reply::ok("hello"))]).await;
    let hash = password_hash();
    let text = format!(
        "[auth.users]\nalice = \"{hash}\"\nbob = \"{hash}\"\n[purpose]\nheader = \"x-robots-purpose\"\n\
         [purpose.users]\nalice = [\"train-ai\"]\nbob = [\"search\"]\n"
    );
    let proxy = RunningProxy::start(&config(dir.path(), &text)).await;
    let url = origin.url("/page");

    // The proxy user's purpose.
    let alice = collect(send(proxy.addr, get_as(&url, "alice", &[])).await).await;
    assert_usage_refused(&alice, "line 1: content-signal: ai-train=no");
    let bob = collect(send(proxy.addr, get_as(&url, "bob", &[])).await).await;
    assert_eq!(bob.status, StatusCode::OK, "{}", bob.text());

    // The header wins, and is removed before forwarding.
    let alice_search =
        collect(send(proxy.addr, get_as(&url, "alice", &[("x-robots-purpose", "search")])).await).await;
    assert_eq!(alice_search.status, StatusCode::OK, "{}", alice_search.text());
    let bob_train =
        collect(send(proxy.addr, get_as(&url, "bob", &[("x-robots-purpose", "search, train-ai")])).await)
            .await;
    assert_usage_refused(&bob_train, "content-signal: ai-train=no");
    let bad = collect(send(proxy.addr, get_as(&url, "bob", &[("x-robots-purpose", "ai-train")])).await).await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST, "{}", bad.text());
    assert!(bad.text().contains("train-ai"), "{}", bad.text());

    assert_eq!(origin.hits("/page"), 2);
    for seen in origin.seen_for("/page") {
        assert!(seen.headers.get("x-robots-purpose").is_none(), "the purpose header is not forwarded");
    }
    let records = proxy.records().await;
    let users: Vec<(String, String)> = decisions(&records)
        .iter()
        .filter(|r| r["url"] == url.as_str())
        .map(|r| (r["user"].as_str().unwrap_or("").to_owned(), r["outcome"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        users,
        [("alice", "usage-refused"), ("bob", "allowed"), ("alice", "allowed"), ("bob", "usage-refused")]
            .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn report_only_logs_and_unknown_refuse_is_strict() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/ai/page", Reply::ok("x")),
        ("/page", Reply::ok("y")),
    ])
    .await;
    let text = "[policy]\nmode = \"report-only\"\n[purpose]\ndefault = [\"train-ai\"]\n";
    let proxy = RunningProxy::start(&config(dir.path(), text)).await;
    let got = get(proxy.addr, &origin.url("/ai/page")).await;
    assert_eq!(got.status, StatusCode::OK);
    let records = proxy.records().await;
    assert_eq!(record_for(&records, &origin.url("/ai/page"))["outcome"], "would-refuse-usage");
    proxy.stop().await;

    let dir = temp_dir();
    let text = "[purpose]\ndefault = [\"search\", \"ai-input\"]\nunknown = \"refuse\"\n";
    let proxy = RunningProxy::start(&config(dir.path(), text)).await;
    // search=yes, but nothing about ai-input: refused.
    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.header("x-robotsgate"), "usage-refused", "{}", got.text());
    assert!(got.text().contains("ai-input: unknown"), "{}", got.text());
    let records = proxy.records().await;
    let r = record_for(&records, &origin.url("/page"));
    assert_eq!(
        (r["usage"]["refused"].as_str(), r["usage"]["unknown"].as_str()),
        (Some("ai-input"), Some("refuse"))
    );
    assert_eq!(r["usage"]["preferences"][0]["content_signal"]["text"], "search=yes", "{r}");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn response_headers_are_noted_and_enforced_before_any_body_byte() {
    let dir = temp_dir();
    let body_len = 2 * 1024 * 1024;
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n")),
        ("/noai", Reply::pattern(body_len as u64).header("x-robots-tag", "examplebot: noai")),
        ("/other-bot", Reply::ok("fine").header("x-robots-tag", "googlebot: noai, noindex")),
        ("/cu", Reply::ok("fine").header("content-usage", "train-ai=y, search=n")),
    ])
    .await;
    let text = "[purpose]\ndefault = [\"train-ai\"]\nenforce_response = true\n";
    let proxy = RunningProxy::start(&config(dir.path(), text)).await;

    let got = get(proxy.addr, &origin.url("/noai")).await;
    assert_usage_refused(&got, "X-Robots-Tag: examplebot: noai");
    assert!(got.body.len() < 1024, "no body byte of the origin's: {} bytes", got.body.len());
    assert!(!got.body.windows(64).any(|w| w == &pattern(64)[..]), "the origin's body reached the client");
    assert_eq!(origin.hits("/noai"), 1);

    let got = get(proxy.addr, &origin.url("/other-bot")).await;
    assert_eq!(got.status, StatusCode::OK, "another crawler's rule: {}", got.text());
    let got = get(proxy.addr, &origin.url("/cu")).await;
    assert_eq!(got.status, StatusCode::OK, "train-ai=y: {}", got.text());

    let records = proxy.records().await;
    let responses: Vec<&Value> = records.iter().filter(|r| r["type"] == "response-usage").collect();
    assert_eq!(responses.len(), 3, "{records:?}");
    let noai = responses.iter().find(|r| r["url"] == origin.url("/noai").as_str()).unwrap();
    assert_eq!(noai["status"], 200, "the origin's status is kept: {noai}");
    assert_eq!(noai["outcome"], "usage-refused", "{noai}");
    assert_eq!(noai["refused"], "train-ai", "{noai}");
    assert_eq!(noai["x_robots_tag"], serde_json::json!(["examplebot: noai"]), "{noai}");
    assert_eq!(noai["schema_version"], robotsgate::audit::SCHEMA_VERSION);
    let decision = record_for(&records, &origin.url("/noai"));
    assert_eq!(noai["request_id"], decision["request_id"], "the records are joined by request id");
    let cu = responses.iter().find(|r| r["url"] == origin.url("/cu").as_str()).unwrap();
    assert_eq!(
        (cu["content_usage"].as_str(), cu["outcome"].as_str()),
        (Some("train-ai=y, search=n"), Some("allowed"))
    );
    assert_eq!(proxy.metric(r#"robotsgate_response_usage_total{outcome="usage-refused"}"#), 1.0);
    proxy.stop().await;

    // enforce_response off: noted, passed on.
    let dir = temp_dir();
    let proxy = RunningProxy::start(&config(dir.path(), "[purpose]\ndefault = [\"train-ai\"]\n")).await;
    let got = get(proxy.addr, &origin.url("/noai")).await;
    assert_eq!(got.status, StatusCode::OK);
    assert_eq!(got.body.len(), body_len);
    let records = proxy.records().await;
    let r = records.iter().find(|r| r["type"] == "response-usage").expect("noted");
    assert_eq!(r["outcome"], "would-refuse-usage", "{r}");
    assert_eq!(proxy.metric(r#"robotsgate_response_usage_total{outcome="would-refuse-usage"}"#), 1.0);
    proxy.stop().await;
}
