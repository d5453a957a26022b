//! The embedding API over a real hyper-util client (issue 15): `Robots::builder()` and
//! `robots.layer()` against scripted origins on 127.0.0.1 — what the origin sees and what
//! the caller gets for allowed, disallowed, refused-destination and unreachable requests.

mod support;

use std::net::Ipv4Addr;

use bytes::Bytes;
use http::StatusCode;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::policy::{Decision, Reason};
use robotsgate::{Refusal, RefusalKind, Robots};
use support::{Reply, TestOrigin, bounded, dead_port, until};
use tower::{Service, ServiceBuilder, ServiceExt};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";

fn robots() -> Robots {
    Robots::builder()
        .agent("ExampleBot")
        .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .build()
        .expect("valid settings")
}

type Http = robotsgate::layer::RobotsService<Client<robotsgate::net::Connector, Empty<Bytes>>>;

fn client(robots: &Robots) -> Http {
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    ServiceBuilder::new().layer(robots.layer()).service(client)
}

async fn call(
    http: &mut Http,
    req: http::Request<Empty<Bytes>>,
) -> Result<http::Response<robotsgate::layer::RobotsBody<hyper::body::Incoming>>, robotsgate::layer::BoxError>
{
    let ready = bounded("client ready", http.ready()).await.expect("ready");
    bounded("call", ready.call(req)).await
}

fn get(url: &str) -> http::Request<Empty<Bytes>> {
    http::Request::get(url).body(Empty::new()).unwrap()
}

#[tokio::test]
async fn allowed_requests_reach_the_origin_with_the_crawlers_identity_and_carry_their_decision() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("hello"))]).await;
    let robots = robots();
    let mut http = client(&robots);

    let res = call(&mut http, get(&format!("{}/public", origin.base()))).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(Refusal::from_response(&res).is_none());
    let decision = res.extensions().get::<Decision>().expect("the decision rides on the response");
    assert!(decision.allowed);
    assert_eq!(&*decision.agent, "ExampleBot");
    let body = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hello");

    // A request's own User-Agent is kept.
    let mut req = get(&format!("{}/public", origin.base()));
    req.headers_mut().insert("user-agent", "custom/2".parse().unwrap());
    call(&mut http, req).await.expect("answer");

    let seen = origin.seen();
    let ua = |path: &str| -> Vec<String> {
        seen.iter()
            .filter(|s| s.path == path)
            .map(|s| s.headers.get("user-agent").map(|v| v.to_str().unwrap().to_owned()).unwrap_or_default())
            .collect()
    };
    assert_eq!(ua("/robots.txt"), ["ExampleBot/1.0 (+https://example.com/bot)"]);
    assert_eq!(ua("/public"), ["ExampleBot/1.0 (+https://example.com/bot)", "custom/2"]);
}

#[tokio::test]
async fn without_the_decision_in_responses_allowed_ones_go_bare_and_refusals_keep_theirs() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("hello"))]).await;
    let robots = Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .no_decision_in_response()
        .build()
        .expect("valid settings");
    let mut http = client(&robots);

    let res = call(&mut http, get(&format!("{}/public", origin.base()))).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(res.extensions().get::<Decision>().is_none());
    let body = res.into_body().collect().await.unwrap().to_bytes();
    assert_eq!(&body[..], b"hello");

    let res = call(&mut http, get(&format!("{}/private/x", origin.base()))).await.expect("answer");
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let refusal = Refusal::from_response(&res).expect("robotsgate's own answer");
    assert!(!refusal.decision().expect("the refusal's decision").allowed);
}

#[tokio::test]
async fn a_disallowed_request_never_reaches_the_origin_and_says_which_rule() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/private/x", Reply::ok("secret"))]).await;
    let robots = robots();
    let mut http = client(&robots);

    let head = http::Request::head(format!("{}/private/x", origin.base())).body(Empty::new()).unwrap();
    for req in [get(&format!("{}/private/x", origin.base())), head] {
        let method = req.method().clone();
        let res = call(&mut http, req).await.expect("robotsgate's answer");
        assert_eq!(res.status(), StatusCode::FORBIDDEN);
        assert_eq!(res.headers()["x-robotsgate"], "disallowed");
        let refusal = Refusal::from_response(&res).expect("recognisable");
        assert_eq!(refusal.kind(), RefusalKind::Disallowed);
        let decision = refusal.decision().expect("with its decision");
        assert!(matches!(decision.reason, Reason::Rule { line: 2, .. }), "{decision:?}");
        assert_eq!(decision.rule_pattern(), Some("/private"));
        let length: usize = res.headers()["content-length"].to_str().unwrap().parse().unwrap();
        let body = res.into_body().collect().await.unwrap().to_bytes();
        if method == http::Method::HEAD {
            assert!(body.is_empty(), "no body for HEAD");
        } else {
            assert_eq!(body.len(), length);
            assert!(String::from_utf8_lossy(&body).contains("line 2: disallow: /private"));
        }
    }
    assert_eq!(origin.hits("/private/x"), 0, "nothing disallowed was sent");
    assert_eq!(origin.hits("/robots.txt"), 1, "one fetch for both requests");
}

#[tokio::test]
async fn the_default_guard_refuses_loopback_recognisably_and_fetches_nothing() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("hello"))]).await;
    let robots = Robots::builder().agent("ExampleBot").build().unwrap();
    let mut http = client(&robots);
    let res = call(&mut http, get(&format!("{}/public", origin.base()))).await.expect("answer");
    assert_eq!(res.status(), StatusCode::FORBIDDEN);
    let refusal = Refusal::from_response(&res).expect("robotsgate's refusal, not the site's 403");
    assert_eq!(refusal.kind(), RefusalKind::DestinationDenied);
    assert!(refusal.message().contains("loopback"), "{}", refusal.message());
    assert_eq!(origin.total_hits(), 0);
}

#[tokio::test]
async fn an_unreachable_origin_is_an_error_before_and_after_its_robots_txt_is_cached() {
    // Before: robots.txt cannot be fetched because nothing listens.
    let closed = dead_port();
    let robots = robots();
    let mut http = client(&robots);
    let err = call(&mut http, get(&format!("http://127.0.0.1:{closed}/x"))).await.expect_err("an error");
    let refusal = err.downcast_ref::<Refusal>().expect("a Refusal");
    assert_eq!(refusal.kind(), RefusalKind::UpstreamUnreachable);
    assert!(refusal.decision().is_some_and(|d| !d.allowed));

    // After: robots.txt is cached, then the origin goes away; the request fails in the
    // client underneath, as an error too.
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("hello"))]).await;
    let url = format!("{}/public", origin.base());
    call(&mut http, get(&url)).await.expect("served while the origin is up");
    let port = origin.port();
    drop(origin);
    until("the origin's listener is closed", || {
        std::net::TcpStream::connect((Ipv4Addr::LOCALHOST, port)).is_err()
    })
    .await;
    let mut fresh = client(&robots); // the same cache, a new connection pool
    let err = call(&mut fresh, get(&url)).await.expect_err("an error");
    assert!(err.downcast_ref::<Refusal>().is_none(), "the client's own error: {err}");
}

/// An origin cannot pass for robotsgate: a `200` carrying `x-robotsgate: disallowed` is the
/// origin's `200` (no [`Refusal`], the header removed), and a `503` carrying it still
/// tells pacing that the origin is busy.
#[tokio::test]
async fn an_origins_x_robotsgate_header_is_not_robotsgates_answer() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/spoof", Reply::ok("the origin's page").header("x-robotsgate", "disallowed")),
    ])
    .await;
    let robots = robots();
    let mut http = client(&robots);
    let res = call(&mut http, get(&format!("{}/spoof", origin.base()))).await.expect("answer");
    assert_eq!(res.status(), StatusCode::OK);
    assert!(Refusal::from_response(&res).is_none(), "the origin's 200 passed for a refusal");
    assert!(Refusal::from_proxy_response(&res).is_none(), "the header was passed on: {:?}", res.headers());
    assert!(res.headers().get("x-robotsgate").is_none());
    let body = res.into_body().collect().await.expect("body").to_bytes();
    assert_eq!(&body[..], b"the origin's page");
}

/// A service made for one client connection (`with_client_addr`) names that client in
/// the decision records of its requests, refused ones included; a request's own
/// `ClientAddr` extension still wins; a service without either names none.
#[tokio::test]
async fn a_service_made_for_a_client_names_it_in_the_records() {
    use robotsgate::audit::AuditLog;
    use robotsgate::layer::ClientAddr;
    use std::net::SocketAddr;

    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("hello"))]).await;
    let (log, memory) = AuditLog::memory();
    let robots = Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .audit(log.clone())
        .build()
        .expect("valid settings");
    let connection: SocketAddr = "192.0.2.7:50312".parse().unwrap();
    let own: SocketAddr = "198.51.100.1:4000".parse().unwrap();
    let mut http = client(&robots).with_client_addr(connection);
    let mut plain = client(&robots);

    call(&mut http, get(&format!("{}/public", origin.base()))).await.expect("answer");
    call(&mut http, get(&format!("{}/private/x", origin.base()))).await.expect("answer");
    let mut carried = get(&format!("{}/public?own", origin.base()));
    carried.extensions_mut().insert(ClientAddr(own));
    call(&mut http, carried).await.expect("answer");
    call(&mut plain, get(&format!("{}/public?none", origin.base()))).await.expect("answer");

    log.flush().await;
    let decisions: Vec<serde_json::Value> = memory
        .lines()
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).expect("JSON"))
        .filter(|r| r["type"] == "decision")
        .collect();
    let client_of = |suffix: &str| {
        let r = decisions
            .iter()
            .find(|r| r["url"].as_str().is_some_and(|u| u.ends_with(suffix)))
            .unwrap_or_else(|| panic!("no record for {suffix}: {decisions:?}"));
        r["client"].clone()
    };
    assert_eq!(client_of("/public"), connection.to_string());
    assert_eq!(client_of("/private/x"), connection.to_string());
    assert_eq!(client_of("/public?own"), own.to_string());
    assert!(client_of("/public?none").is_null(), "{decisions:?}");
}
