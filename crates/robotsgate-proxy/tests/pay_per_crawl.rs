//! Pay per crawl (issue 30): an origin on loopback answers `402` with `crawler-price`
//! until a request arrives with a `crawler-max-price` covered by its Web Bot Auth
//! signature, then `200` with `crawler-charged`. Through `robotsgate run` (the binary)
//! with `[identity] max_price`: a price within it is retried once, signed (checked by
//! Cloudflare's `web-bot-auth` crate), and paid; a price above it and a request with a
//! body are passed on as they came; an answer with a `crawler-error` (a blocked crawler, a
//! failed payment) is passed on too; the audit log's `payment` records say which and why,
//! in `policy.mode = "off"` too.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use robotsgate::identity::httpsig::SigningKey;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const AGENT: &str = "https://bot.example";

/// The pay-per-crawl origin: the requests it saw, its address.
struct PayOrigin {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl PayOrigin {
    async fn start() -> PayOrigin {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let log = seen.clone();
        tokio::spawn(async move {
            loop {
                let Ok((tcp, _)) = listener.accept().await else { return };
                let log = log.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| answer(req, log.clone()));
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tcp), service)
                        .await;
                });
            }
        });
        PayOrigin { addr, seen }
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    fn seen_for(&self, path: &str) -> Vec<Seen> {
        self.seen.lock().unwrap().iter().filter(|s| s.path == path).cloned().collect()
    }
}

/// `/robots.txt` allows everything and is never charged; `/cheap` costs USD 0.01, `/dear`
/// USD 1.00: `402` with `crawler-price`, unless the request carries `crawler-max-price`
/// at least the price and its signature covers it.
async fn answer(
    req: Request<Incoming>,
    log: Arc<Mutex<Vec<Seen>>>,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let (parts, body) = req.into_parts();
    let _ = body.collect().await;
    log.lock().unwrap().push(Seen {
        method: parts.method.to_string(),
        path: parts.uri.path().to_owned(),
        target: parts.uri.to_string(),
        headers: parts.headers.clone(),
        at: tokio::time::Instant::now(),
        connection: 1,
    });
    let reply = |status: u16, headers: &[(&str, &str)], body: &'static str| {
        let mut res = Response::builder().status(status);
        for (k, v) in headers {
            res = res.header(*k, *v);
        }
        Ok(res.body(Full::new(Bytes::from_static(body.as_bytes()))).unwrap())
    };
    let price = match parts.uri.path() {
        "/robots.txt" => return reply(200, &[], "User-agent: *\nAllow: /\n"),
        "/forbidden" => return reply(403, &[("crawler-error", "CrawlerForbidden")], "blocked"),
        "/unpaid" if parts.headers.contains_key("crawler-max-price") => {
            return reply(403, &[("crawler-error", "PaymentFailed")], "payment failed");
        }
        "/unpaid" => ("USD 0.02", 20_000),
        "/cheap" => ("USD 0.01", 10_000u64),
        "/dear" => ("USD 1.00", 1_000_000),
        _ => return reply(404, &[], "no"),
    };
    let offered = parts.headers.get("crawler-max-price").and_then(|v| v.to_str().ok());
    let covered = parts
        .headers
        .get("signature-input")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("\"crawler-max-price\""));
    let enough = offered
        .and_then(|o| o.strip_prefix("USD 0."))
        .and_then(|cents| format!("{cents:0<6}").parse::<u64>().ok())
        .is_some_and(|micros| micros >= price.1);
    if covered && enough {
        return reply(200, &[("crawler-charged", price.0)], "paid content");
    }
    reply(402, &[("crawler-price", price.0)], "payment required")
}

/// `robotsgate run` signing with a new key and paying at most `max_price`.
async fn run(dir: &Path, max_price: &str) -> (SocketAddr, Spawned, SigningKey, std::path::PathBuf) {
    let key = SigningKey::generate().unwrap();
    let key_path = dir.join("identity.key");
    std::fs::write(&key_path, key.to_private_jwk().to_string()).unwrap();
    let audit = dir.join("audit.jsonl");
    let config = dir.join("robotsgate.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n\n[agent]\ntoken = \"ExampleBot\"\n\n\
             [guard]\nallow = [\"127.0.0.0/8\"]\n\n[audit]\npath = \"{audit}\"\n\n\
             [identity]\nsigning_key = \"{key}\"\nsignature_agent = \"{AGENT}\"\n{max_price}\n",
            audit = audit.display(),
            key = key_path.display(),
        ),
    )
    .unwrap();
    let mut process = Spawned::start(BIN, &["run", "--config", config.to_str().unwrap()]);
    let proxy = process.address("robotsgate is running", "at http://").await;
    (proxy, process, key, audit)
}

/// The payment record of the `GET url` request.
fn payment<'a>(records: &'a [serde_json::Value], url: &str) -> &'a serde_json::Value {
    let ids: Vec<&serde_json::Value> = of_type(records, "decision")
        .into_iter()
        .filter(|d| d["url"] == url && d["method"] == "GET")
        .map(|d| &d["request_id"])
        .collect();
    assert_eq!(ids.len(), 1, "one decision for {url}");
    let found: Vec<_> =
        of_type(records, "payment").into_iter().filter(|p| &p["request_id"] == ids[0]).collect();
    assert_eq!(found.len(), 1, "one payment record for {url}: {records:?}");
    found[0]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_price_within_max_price_is_paid_once_signed_and_recorded() {
    let dir = temp_dir();
    let origin = PayOrigin::start().await;
    let (proxy, mut process, key, audit) = run(dir.path(), "max_price = \"USD 0.05\"").await;

    // Within the maximum: retried once with a signed crawler-max-price, and paid.
    let got = collect(send(proxy, get_request(&origin.url("/cheap"))).await).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(got.header("crawler-charged"), "USD 0.01");
    assert_eq!(got.text(), "paid content");
    let seen = origin.seen_for("/cheap");
    assert_eq!(seen.len(), 2, "the request and one retry");
    assert!(seen[0].headers.get("crawler-max-price").is_none(), "the first request offers nothing");
    assert_eq!(seen[1].headers["crawler-max-price"], "USD 0.05");
    let facts = verify_seen(&seen[1], &[key.public()], AGENT);
    assert_eq!(facts.keyid, key.public().thumbprint());
    let input = seen[1].headers["signature-input"].to_str().unwrap();
    assert!(input.contains("\"signature-agent\";key=\"sig1\" \"crawler-max-price\")"), "{input}");
    verify_seen(&seen[0], &[key.public()], AGENT);

    // Above it: the 402 goes to the client as it came, not retried.
    let got = collect(send(proxy, get_request(&origin.url("/dear"))).await).await;
    assert_eq!(got.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(got.header("crawler-price"), "USD 1.00");
    assert_eq!(origin.seen_for("/dear").len(), 1);

    // A request with a body is not sent twice.
    let post = Request::post(origin.url("/cheap"))
        .header("content-type", "text/plain")
        .body(Full::new(Bytes::from_static(b"form")).map_err(|e: Infallible| match e {}).boxed())
        .unwrap();
    let got = collect(send(proxy, post).await).await;
    assert_eq!(got.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(origin.seen_for("/cheap").len(), 3, "one more, not retried");

    let records = || read_jsonl(&audit);
    until("three payment records", || of_type(&records(), "payment").len() == 3).await;
    let records = records();
    let paid = payment(&records, &origin.url("/cheap"));
    assert_eq!(paid["origin"], origin.url(""));
    assert_eq!(paid["price"], "USD 0.01");
    assert_eq!(paid["max_price"], "USD 0.05");
    assert_eq!(paid["retried"], true);
    assert_eq!(paid["retry_status"], 200);
    assert_eq!(paid["charged"], "USD 0.01");
    assert!(paid["no_retry"].is_null());
    assert!(is_rfc3339(paid["time"].as_str().unwrap()));
    let dear = payment(&records, &origin.url("/dear"));
    assert_eq!(
        (&dear["retried"], &dear["no_retry"], &dear["charged"]),
        (&false.into(), &"above max_price".into(), &serde_json::Value::Null)
    );
    let posted: Vec<_> =
        of_type(&records, "payment").into_iter().filter(|p| p["no_retry"] == "request has a body").collect();
    assert_eq!(posted.len(), 1, "{records:?}");
    assert_eq!(posted[0]["price"], "USD 0.01");

    // `robotsgate audit report` totals what was paid per day and origin (asked three
    // times, paid once).
    let html_path = dir.path().join("report.html");
    let out = std::process::Command::new(BIN)
        .args(["audit", "report", audit.to_str().unwrap(), "--out", html_path.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&html_path).unwrap();
    let day = &paid["time"].as_str().unwrap()[..10];
    let row = format!(
        "<tr><td>{day}</td><td>{}</td><td class=\"n\">3</td><td class=\"n\">1</td><td class=\"n\">USD 0.010000</td></tr>",
        origin.url("")
    );
    assert!(html.contains("<h2>Pay per crawl</h2>"), "{html}");
    assert!(html.contains(&row), "{row} in {html}");

    let _ = process.child.start_kill();
    process.wait_exit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_max_price_a_402_is_recorded_and_passed_on_unpaid() {
    let dir = temp_dir();
    let origin = PayOrigin::start().await;
    let (proxy, mut process, _key, audit) = run(dir.path(), "").await;
    let got = collect(send(proxy, get_request(&origin.url("/cheap"))).await).await;
    assert_eq!(got.status, StatusCode::PAYMENT_REQUIRED);
    assert_eq!(got.header("crawler-price"), "USD 0.01");
    assert_eq!(origin.seen_for("/cheap").len(), 1, "not retried");
    until("a payment record", || !of_type(&read_jsonl(&audit), "payment").is_empty()).await;
    let records = read_jsonl(&audit);
    let p = payment(&records, &origin.url("/cheap"));
    assert_eq!((&p["retried"], &p["no_retry"]), (&false.into(), &"no max_price".into()));
    assert!(p["max_price"].is_null());
    let _ = process.child.start_kill();
    process.wait_exit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn crawler_error_answers_are_recorded_first_or_on_the_retry() {
    let dir = temp_dir();
    let origin = PayOrigin::start().await;
    let (proxy, mut process, _key, audit) = run(dir.path(), "max_price = \"USD 0.05\"").await;

    // Blocked outright: a 403 with a crawler-error and no price, passed on, not retried.
    let got = collect(send(proxy, get_request(&origin.url("/forbidden"))).await).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    assert_eq!(got.header("crawler-error"), "CrawlerForbidden");
    assert_eq!(origin.seen_for("/forbidden").len(), 1);
    // Priced, retried, and the payment fails: the client gets the retry's answer.
    let got = collect(send(proxy, get_request(&origin.url("/unpaid"))).await).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN);
    assert_eq!(got.header("crawler-error"), "PaymentFailed");
    assert_eq!(origin.seen_for("/unpaid").len(), 2, "the request and its retry");

    until("two payment records", || of_type(&read_jsonl(&audit), "payment").len() == 2).await;
    let records = read_jsonl(&audit);
    let blocked = payment(&records, &origin.url("/forbidden"));
    assert_eq!(
        (&blocked["status"], &blocked["error"], &blocked["price"], &blocked["retried"], &blocked["no_retry"]),
        (
            &403.into(),
            &"CrawlerForbidden".into(),
            &serde_json::Value::Null,
            &false.into(),
            &"no price".into()
        ),
        "{blocked:#}"
    );
    let failed = payment(&records, &origin.url("/unpaid"));
    assert_eq!(
        (&failed["status"], &failed["price"], &failed["retried"], &failed["retry_status"]),
        (&402.into(), &"USD 0.02".into(), &true.into(), &403.into()),
        "{failed:#}"
    );
    assert_eq!(
        (&failed["retry_error"], &failed["charged"]),
        (&"PaymentFailed".into(), &serde_json::Value::Null)
    );
    assert!(failed["error"].is_null());
    let _ = process.child.start_kill();
    process.wait_exit().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_mode_off_what_was_paid_is_recorded_without_a_decision() {
    let dir = temp_dir();
    let origin = PayOrigin::start().await;
    let (proxy, mut process, _key, audit) =
        run(dir.path(), "max_price = \"USD 0.05\"\n\n[policy]\nmode = \"off\"").await;
    let got = collect(send(proxy, get_request(&origin.url("/cheap"))).await).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(got.header("crawler-charged"), "USD 0.01");
    until("a payment record", || !of_type(&read_jsonl(&audit), "payment").is_empty()).await;
    let records = read_jsonl(&audit);
    assert!(of_type(&records, "decision").is_empty(), "mode off decides nothing");
    let paid = of_type(&records, "payment");
    assert_eq!(paid.len(), 1, "{records:?}");
    assert_eq!(
        (&paid[0]["origin"], &paid[0]["charged"], &paid[0]["retry_status"]),
        (&origin.url("").into(), &"USD 0.01".into(), &200.into())
    );
    assert!(paid[0]["request_id"].as_str().is_some_and(|id| !id.is_empty()));
    let _ = process.child.start_kill();
    process.wait_exit().await;
}
