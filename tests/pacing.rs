//! Politeness through the embedded layer (issue 16): `Robots::builder()` and a hyper-util
//! client against scripted origins on 127.0.0.1, in virtual time (tokio's paused clock).
//! What the origin sees and when, what the caller gets, and what the audit log says.

mod support;

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::audit::{AuditLog, MemoryLog};
use robotsgate::layer::Mode;
use robotsgate::origin::HostPattern;
use robotsgate::pacing::HostRule;
use robotsgate::{Refusal, RefusalKind, Robots, RobotsBuilder};
use serde_json::Value;
use support::{Reply, TestOrigin};
use tokio::time::Instant;
use tower::ServiceExt;

type Http = robotsgate::layer::RobotsService<Client<robotsgate::net::Connector, Empty<Bytes>>>;
type Answer = http::Response<robotsgate::layer::RobotsBody<hyper::body::Incoming>>;

const S: fn(u64) -> Duration = Duration::from_secs;
/// Virtual time: generous, and a hang still fails.
const LIMIT: Duration = Duration::from_secs(3600);

/// A client through robots built by `f` (audit log in memory, loopback allowed).
fn client(f: impl FnOnce(RobotsBuilder) -> RobotsBuilder) -> (Http, Log, Robots) {
    let (log, memory) = AuditLog::memory();
    let builder = Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .audit(log.clone());
    let robots = f(builder).build().expect("valid settings");
    let inner = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    (tower::ServiceBuilder::new().layer(robots.layer()).service(inner), Log(log, memory), robots)
}

/// The audit log and what it wrote.
struct Log(AuditLog, MemoryLog);

async fn call(http: &Http, url: String) -> Answer {
    let req = http::Request::get(url).body(Empty::new()).unwrap();
    tokio::time::timeout(LIMIT, http.clone().oneshot(req)).await.expect("answered").expect("not an error")
}

/// Starts a GET of each of `paths`, one after the other (each is in the pacer before the
/// next starts); returns their answers in the same order.
async fn burst(http: &Http, origin: &TestOrigin, paths: &[&str]) -> Vec<Answer> {
    let mut tasks = Vec::new();
    for p in paths {
        let (http, url) = (http.clone(), origin.url(p));
        tasks.push(tokio::spawn(async move { call(&http, url).await }));
        for _ in 0..50 {
            tokio::task::yield_now().await;
        }
    }
    let mut out = Vec::new();
    for t in tasks {
        out.push(t.await.expect("task"));
    }
    out
}

/// The decision records written so far.
async fn decisions(log: &Log) -> Vec<Value> {
    log.0.flush().await;
    log.1
        .lines()
        .iter()
        .map(|l| serde_json::from_str::<Value>(l).expect("JSON"))
        .filter(|r| r["type"] == "decision")
        .collect()
}

fn record_for<'a>(records: &'a [Value], path: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["url"].as_str().is_some_and(|u| u.ends_with(path)))
        .unwrap_or_else(|| panic!("no record for {path}: {records:?}"))
}

/// Gaps between consecutive arrivals of paths starting with `prefix`, and their order.
fn gaps(origin: &TestOrigin, prefix: &str) -> (Vec<String>, Vec<Duration>) {
    let arrivals = origin.arrivals(prefix);
    let order = arrivals.iter().map(|(p, _)| p.clone()).collect();
    let gaps = arrivals.windows(2).map(|w| w[1].1 - w[0].1).collect();
    (order, gaps)
}

#[tokio::test(start_paused = true)]
async fn crawl_delay_spaces_requests_at_the_origin_in_arrival_order() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 2\n"))]).await;
    for p in ["/warm", "/p0", "/p1", "/p2", "/p3"] {
        origin.route(p, Reply::ok("ok"));
    }
    let (http, memory, _robots) = client(|b| b);
    let start = Instant::now();
    assert_eq!(call(&http, origin.url("/warm")).await.status(), StatusCode::OK);
    let answers = burst(&http, &origin, &["/p0", "/p1", "/p2", "/p3"]).await;
    assert!(answers.iter().all(|a| a.status() == StatusCode::OK));
    let (order, gaps) = gaps(&origin, "/p");
    assert_eq!(order, ["/p0", "/p1", "/p2", "/p3"], "in arrival order");
    assert_eq!(gaps, [S(2), S(2), S(2)]);
    assert_eq!(origin.arrivals("/p")[0].1 - start, S(2), "the first waits for the warm-up's slot");

    let records = decisions(&memory).await;
    for (path, waited) in [("/warm", 0), ("/p0", 2000), ("/p1", 4000), ("/p3", 8000)] {
        let r = record_for(&records, path);
        support::check_decision_record(r);
        assert_eq!(r["outcome"], "allowed", "{r}");
        assert_eq!(r["pace_wait_ms"], waited, "{path}: {r}");
        assert_eq!(r["pace"]["source"], "crawl-delay", "{r}");
        assert_eq!(r["pace"]["line"], 2, "{r}");
        assert_eq!(r["pace"]["detail"], "crawl-delay: 2", "{r}");
        assert_eq!(r["pace"]["delay_ms"], 2000, "{r}");
    }
}

#[tokio::test(start_paused = true)]
async fn request_rate_min_delay_and_host_rules_set_the_spacing() {
    // request-rate: one request per 3 s, cited with its line.
    let origin = TestOrigin::start([(
        "/robots.txt",
        Reply::ok("User-agent: *\nDisallow: /private\nRequest-rate: 1/3s\n"),
    )])
    .await;
    let (http, memory, _robots) = client(|b| b);
    burst(&http, &origin, &["/a0", "/a1", "/a2"]).await;
    assert_eq!(gaps(&origin, "/a").1, [S(3), S(3)]);
    let r = record_for(&decisions(&memory).await, "/a2").clone();
    assert_eq!((&r["pace"]["source"], &r["pace"]["line"]), (&"request-rate".into(), &3.into()), "{r}");
    assert_eq!(r["pace"]["detail"], "request-rate: 1/3s");

    // min_delay with nothing in robots.txt.
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n"))]).await;
    let (http, memory, _robots) = client(|b| b.min_delay(Duration::from_millis(1500)));
    burst(&http, &origin, &["/m0", "/m1", "/m2"]).await;
    assert_eq!(gaps(&origin, "/m").1, [Duration::from_millis(1500); 2]);
    let r = record_for(&decisions(&memory).await, "/m1").clone();
    assert_eq!(r["pace"]["source"], "min-delay", "{r}");

    // A host rule, longer than the site's crawl-delay, with its reason.
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 1\n"))]).await;
    let rule = HostRule {
        hosts: HostPattern::parse("127.0.0.1").unwrap(),
        delay: Some(S(5)),
        max_concurrency: None,
        reason: "their ops team asked, OPS-456".into(),
        expires: None,
    };
    let (http, memory, _robots) = client(|b| b.pace_host(rule));
    burst(&http, &origin, &["/h0", "/h1"]).await;
    assert_eq!(gaps(&origin, "/h").1, [S(5)]);
    let r = record_for(&decisions(&memory).await, "/h1").clone();
    assert_eq!(r["pace"]["source"], "host-override", "{r}");
    assert_eq!(r["pace"]["detail"], "127.0.0.1: their ops team asked, OPS-456", "{r}");
}

#[tokio::test(start_paused = true)]
async fn a_delay_above_the_cap_is_clamped_and_the_record_says_so() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 86400\n"))]).await;
    let (http, memory, _robots) = client(|b| b.max_wait(S(600)));
    burst(&http, &origin, &["/c0", "/c1"]).await;
    assert_eq!(gaps(&origin, "/c").1, [S(30)]);
    let r = record_for(&decisions(&memory).await, "/c1").clone();
    assert_eq!(
        (&r["pace"]["delay_ms"], &r["pace"]["clamped_from_ms"]),
        (&30_000.into(), &86_400_000u64.into())
    );
}

#[tokio::test(start_paused = true)]
async fn a_request_that_would_wait_too_long_gets_a_503_and_never_reaches_the_origin() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 30\n"))]).await;
    let (http, memory, _robots) = client(|b| b);
    // Slots at 0, 30 and 60 s; the fourth would wait 90 s, past max_wait (60 s).
    let answers = burst(&http, &origin, &["/q0", "/q1", "/q2", "/q3"]).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status().as_u16()).collect();
    // The origin has no such pages: its 404s; robotsgate's 503.
    assert_eq!(statuses, [404, 404, 404, 503]);
    assert_eq!(origin.hits("/q3"), 0, "never sent");
    let refused = &answers[3];
    assert_eq!(refused.headers()["x-robotsgate"], "paced");
    assert_eq!(refused.headers()["retry-after"], "90");
    let refusal = Refusal::from_response(refused).expect("robotsgate's answer");
    assert_eq!((refusal.kind(), refusal.retry_after()), (RefusalKind::Paced, Some(90)));
    let r = record_for(&decisions(&memory).await, "/q3").clone();
    support::check_decision_record(&r);
    assert_eq!(r["outcome"], "paced", "{r}");
    assert_eq!((&r["pace"]["refused"], &r["pace"]["retry_after_s"]), (&"max-wait".into(), &90.into()), "{r}");
    assert_eq!(r["pace_wait_ms"], 0, "{r}");

    // A queue of one: a second request held for the origin is refused at once.
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 10\n"))]).await;
    let (http, memory, _robots) = client(|b| b.max_queue_per_origin(1));
    let answers = burst(&http, &origin, &["/f0", "/f1", "/f2"]).await;
    let statuses: Vec<u16> = answers.iter().map(|a| a.status().as_u16()).collect();
    assert_eq!(statuses, [404, 404, 503]);
    assert_eq!(answers[2].headers()["retry-after"], "20");
    let r = record_for(&decisions(&memory).await, "/f2").clone();
    assert_eq!(r["pace"]["refused"], "queue-full", "{r}");
}

#[tokio::test(start_paused = true)]
async fn the_503_body_says_why_and_when() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 25\n"))]).await;
    let (http, _, _) = client(|b| b.max_wait(S(20)));
    let answers = burst(&http, &origin, &["/b0", "/b1"]).await;
    let body = answers.into_iter().nth(1).unwrap().into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    assert!(text.starts_with("robotsgate: request not sent"), "{text}");
    assert!(text.contains("pacing.max_wait"), "{text}");
    assert!(text.contains("Delay: 25.000 s, from robots.txt line 2: crawl-delay: 25"), "{text}");
    assert!(text.contains("Retry after: 25 s"), "{text}");
}

#[tokio::test(start_paused = true)]
async fn a_caller_that_gives_up_while_held_gives_its_slot_back() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 10\n"))]).await;
    let (http, _, _) = client(|b| b);
    let start = Instant::now();
    call(&http, origin.url("/g0")).await;
    // B would go at 10 s; it gives up at 5 s. C, behind it, takes its slot.
    let b = tokio::spawn({
        let (http, url) = (http.clone(), origin.url("/g1"));
        async move { tokio::time::timeout(S(5), call(&http, url)).await.is_err() }
    });
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
    let c = tokio::spawn({
        let (http, url) = (http.clone(), origin.url("/g2"));
        async move { call(&http, url).await.status() }
    });
    assert!(b.await.unwrap(), "B gave up");
    assert_eq!(c.await.unwrap(), StatusCode::NOT_FOUND);
    assert_eq!(origin.hits("/g1"), 0);
    let arrivals = origin.arrivals("/g");
    assert_eq!(arrivals.iter().map(|(p, _)| p.as_str()).collect::<Vec<_>>(), ["/g0", "/g2"]);
    assert_eq!(arrivals[1].1 - start, S(10), "C went in B's slot, not 10 s after it");
}

#[tokio::test(start_paused = true)]
async fn a_429_or_503_pauses_the_origin() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/ok", Reply::ok("ok")),
        ("/busy", Reply::status(429).header("retry-after", "12")),
        ("/down", Reply::status(503)),
    ])
    .await;
    let (http, memory, _robots) = client(|b| b);
    let at = |t: Instant| t.elapsed();
    // 429 with Retry-After in seconds: the next request waits 12 s.
    assert_eq!(call(&http, origin.url("/busy")).await.status(), StatusCode::TOO_MANY_REQUESTS);
    let t = Instant::now();
    call(&http, origin.url("/ok")).await;
    assert_eq!(at(t), S(12));
    let r = record_for(&decisions(&memory).await, "/ok").clone();
    assert_eq!(r["pace_wait_ms"], 12_000, "{r}");
    assert_eq!(r["pace"]["backoff"]["status"], 429, "{r}");
    assert_eq!(r["pace"]["backoff"]["retry_after"], "12", "{r}");
    assert!(r["pace"]["source"].is_null(), "no delay: the back-off held it: {r}");

    // An HTTP-date.
    let date = httpdate::fmt_http_date(SystemTime::now() + S(20));
    origin.route("/busy-until", Reply::status(429).header("retry-after", &date));
    call(&http, origin.url("/busy-until")).await;
    let t = Instant::now();
    call(&http, origin.url("/ok")).await;
    assert!(at(t) >= S(19) && at(t) <= S(20), "{:?}", at(t));

    // 503 without Retry-After: 5 s, then 10 s; a success resets it to 5 s.
    call(&http, origin.url("/down")).await;
    let t = Instant::now();
    call(&http, origin.url("/down")).await;
    assert_eq!(at(t), S(5));
    let t = Instant::now();
    call(&http, origin.url("/ok")).await;
    assert_eq!(at(t), S(10));
    call(&http, origin.url("/down")).await;
    let t = Instant::now();
    call(&http, origin.url("/ok")).await;
    assert_eq!(at(t), S(5), "the success before reset the doubling");
    // And then nothing waits.
    let t = Instant::now();
    call(&http, origin.url("/ok")).await;
    assert_eq!(at(t), S(0));
}

#[tokio::test(start_paused = true)]
async fn report_only_paces_nothing_and_logs_the_wait_it_would_have_imposed() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 10\n"))]).await;
    let (http, memory, _robots) = client(|b| b.mode(Mode::ReportOnly));
    let start = Instant::now();
    burst(&http, &origin, &["/r0", "/r1", "/r2", "/r3"]).await;
    assert!(origin.arrivals("/r").iter().all(|(_, at)| *at - start < S(1)), "nothing held");
    let records = decisions(&memory).await;
    for (path, would) in [("/r0", 0), ("/r1", 10_000), ("/r2", 20_000), ("/r3", 30_000)] {
        let r = record_for(&records, path);
        support::check_decision_record(r);
        assert_eq!((&r["pace_wait_ms"], &r["pace"]["would_wait_ms"]), (&0.into(), &would.into()), "{r}");
        assert_eq!(r["mode"], "report-only");
    }
}

#[tokio::test(start_paused = true)]
async fn pacing_off_holds_nothing() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 10\n"))]).await;
    let (http, memory, robots) = client(|b| b.pacing(false));
    let start = Instant::now();
    burst(&http, &origin, &["/o0", "/o1", "/o2"]).await;
    assert!(origin.arrivals("/o").iter().all(|(_, at)| *at - start < S(1)));
    let r = record_for(&decisions(&memory).await, "/o2").clone();
    assert!(r["pace"].is_null() && r["pace_wait_ms"] == 0, "{r}");
    assert_eq!(robots.pacer().lanes(), 0);
}

/// Shared across clones: one `Robots` paces its layer's clones together.
#[tokio::test(start_paused = true)]
async fn clones_of_one_robots_share_the_pace() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 4\n"))]).await;
    let (http, _, robots) = client(|b| b);
    let inner = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    let other: Http = tower::ServiceBuilder::new().layer(robots.clone().layer()).service(inner);
    call(&http, origin.url("/s0")).await;
    call(&other, origin.url("/s1")).await;
    assert_eq!(gaps(&origin, "/s").1, [S(4)]);
}
