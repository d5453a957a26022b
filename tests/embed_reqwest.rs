//! The reqwest adapter (feature `reqwest`, issue 15) against scripted origins on
//! 127.0.0.1: refusals as errors that carry the decision, every redirect hop checked
//! before it is sent, a client that follows redirects itself caught, one cache shared
//! with the tower layer.

mod support;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::policy::Decision;
use robotsgate::reqwest::RedirectError;
use robotsgate::{Refusal, RefusalKind, Robots};
use support::{Reply, TestOrigin, bounded};
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

fn http(robots: &Robots) -> reqwest_middleware::ClientWithMiddleware {
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    reqwest_middleware::ClientBuilder::new(client).with(robots.reqwest_middleware()).build()
}

async fn send(
    http: &reqwest_middleware::ClientWithMiddleware,
    url: &str,
) -> reqwest_middleware::Result<reqwest::Response> {
    bounded(url, http.get(url).send()).await
}

fn refusal(e: &reqwest_middleware::Error) -> &Refusal {
    match e {
        reqwest_middleware::Error::Middleware(e) => {
            e.downcast_ref::<Refusal>().unwrap_or_else(|| panic!("{e}"))
        }
        other => panic!("not a refusal: {other}"),
    }
}

#[tokio::test]
async fn allowed_requests_are_sent_and_refused_ones_are_errors_with_their_decision() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/public", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let http = http(&robots());
    let res = send(&http, &format!("{}/public", origin.base())).await.expect("sent");
    assert_eq!(res.status(), 200);
    assert!(res.extensions().get::<Decision>().is_some_and(|d| d.allowed));
    assert_eq!(res.text().await.unwrap(), "hello");

    let err = send(&http, &format!("{}/private/x", origin.base())).await.expect_err("refused");
    let refusal = refusal(&err);
    assert_eq!(refusal.kind(), RefusalKind::Disallowed);
    let decision = refusal.decision().expect("the decision");
    assert_eq!(decision.rule_pattern(), Some("/private"));
    assert!(decision.fetch_facts().and_then(|f| f.sha256_hex()).is_some(), "which robots.txt, by SHA-256");
    assert_eq!(origin.hits("/private/x"), 0, "never sent");
    let ua = origin.seen().iter().find(|s| s.path == "/public").unwrap().headers["user-agent"].clone();
    assert_eq!(ua, "ExampleBot/1.0 (+https://example.com/bot)", "the crawler's identity on the request");
}

#[tokio::test]
async fn every_redirect_hop_is_checked_before_it_is_sent() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("landed"))]).await;
    let base = origin.base();
    origin.route("/moved", Reply::redirect(302, "/private/old"));
    origin.route("/go", Reply::redirect(301, &format!("{base}/public")));
    let http = http(&robots());

    let err = send(&http, &format!("{base}/moved")).await.expect_err("the hop is refused");
    assert_eq!(refusal(&err).kind(), RefusalKind::Disallowed);
    assert_eq!(origin.hits("/moved"), 1);
    assert_eq!(origin.hits("/private/old"), 0, "the disallowed hop was never fetched");

    let res = send(&http, &format!("{base}/go")).await.expect("followed");
    assert_eq!(res.url().path(), "/public");
    assert_eq!(res.text().await.unwrap(), "landed");
}

/// Issue 31.5: the client made by `reqwest_client` from a default `reqwest::Client::builder()`
/// (which follows redirects itself) never fetches a disallowed hop.
#[tokio::test]
async fn the_client_made_from_a_default_builder_checks_every_hop() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS))]).await;
    origin.route("/moved", Reply::redirect(302, "/private/old"));
    let http = robots().reqwest_client(reqwest::Client::builder()).expect("client");
    let err = send(&http, &format!("{}/moved", origin.base())).await.expect_err("the hop is refused");
    assert_eq!(refusal(&err).kind(), RefusalKind::Disallowed);
    assert_eq!(origin.hits("/private/old"), 0, "the disallowed hop was never fetched");
}

#[tokio::test]
async fn a_cross_origin_hop_is_checked_against_its_own_robots_txt_and_loses_credentials() {
    let a = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n"))]).await;
    let b = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/ok", Reply::ok("b"))]).await;
    a.route("/to-b", Reply::redirect(307, &format!("{}/ok", b.base())));
    a.route("/to-b-private", Reply::redirect(308, &format!("{}/private/x", b.base())));
    let http = http(&robots());
    let res = bounded(
        "cross-origin redirect",
        http.get(format!("{}/to-b", a.base())).header("authorization", "Bearer secret").send(),
    )
    .await
    .expect("followed");
    assert_eq!(res.text().await.unwrap(), "b");
    let seen = b.seen().into_iter().find(|s| s.path == "/ok").unwrap();
    assert!(seen.headers.get("authorization").is_none(), "credentials stay with their origin");

    let err = send(&http, &format!("{}/to-b-private", a.base())).await.expect_err("refused");
    assert_eq!(refusal(&err).kind(), RefusalKind::Disallowed);
    assert_eq!(b.hits("/private/x"), 0);
}

#[tokio::test]
async fn a_client_that_follows_redirects_itself_is_caught_and_its_response_withheld() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("x"))]).await;
    origin.route("/go", Reply::redirect(302, "/public"));
    let http = reqwest_middleware::ClientBuilder::new(reqwest::Client::new())
        .with(robots().reqwest_middleware())
        .build();
    let err = send(&http, &format!("{}/go", origin.base())).await.expect_err("refused");
    match &err {
        reqwest_middleware::Error::Middleware(e) => {
            let e = e.downcast_ref::<RedirectError>().expect("a RedirectError");
            assert!(matches!(e, RedirectError::ClientFollowsRedirects { .. }));
            assert!(e.to_string().contains("Policy::none()"), "{e}");
        }
        other => panic!("{other}"),
    }
}

#[tokio::test]
async fn too_many_redirects_stop() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n"))]).await;
    origin.route("/loop", Reply::redirect(302, "/loop"));
    let robots = robots();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let http = reqwest_middleware::ClientBuilder::new(client)
        .with(robots.reqwest_middleware().max_redirects(3))
        .build();
    let err = send(&http, &format!("{}/loop", origin.base())).await.expect_err("stopped");
    assert!(err.to_string().contains("too many redirects (more than 3)"), "{err}");
    assert_eq!(origin.hits("/loop"), 4, "the request and three hops");
}

#[tokio::test]
async fn the_layer_and_the_middleware_of_one_robots_share_its_cache() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("x"))]).await;
    let robots = robots();
    let url = format!("{}/public", origin.base());
    send(&http(&robots), &url).await.expect("sent");
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    let mut svc = ServiceBuilder::new().layer(robots.layer()).service(client);
    let req = http::Request::get(&url).body(Empty::new()).unwrap();
    let res = bounded("tower call", svc.ready().await.unwrap().call(req)).await.expect("answer");
    assert_eq!(res.status(), 200);
    assert_eq!(origin.hits("/robots.txt"), 1, "one fetch for both");
}

/// Issue 16: the middleware paces like the layer. A request that would wait past
/// `max_wait` is an error carrying a `Paced` refusal and when to retry; a 429 the origin
/// sends pauses the origin for the middleware's next request.
#[tokio::test]
async fn requests_are_paced_and_an_origins_429_pauses_it() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 20\n")),
        ("/a", Reply::ok("a")),
        ("/b", Reply::ok("b")),
    ])
    .await;
    let robots = Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .max_wait(std::time::Duration::from_secs(5))
        .build()
        .unwrap();
    let http = http(&robots);
    assert_eq!(send(&http, &origin.url("/a")).await.expect("sent").status(), 200);
    let e = send(&http, &origin.url("/b")).await.expect_err("would wait 20 s");
    let r = refusal(&e);
    assert_eq!(r.kind(), RefusalKind::Paced);
    assert_eq!(r.retry_after(), Some(20));
    assert_eq!(origin.hits("/b"), 0);

    let busy = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/busy", Reply::status(429).header("retry-after", "3600")),
        ("/later", Reply::ok("later")),
    ])
    .await;
    assert_eq!(send(&http, &busy.url("/busy")).await.expect("sent").status(), 429);
    let e = send(&http, &busy.url("/later")).await.expect_err("paused for an hour");
    assert_eq!(refusal(&e).kind(), RefusalKind::Paced);
    assert!(refusal(&e).retry_after().is_some_and(|s| s >= 3590));
    assert_eq!(busy.hits("/later"), 0);
}

/// Issue 31, point 5: a reqwest client set up with `.resolve()` serves the robots.txt
/// fetches too (robotsgate's own DNS is never asked for `robots.example`).
#[tokio::test]
async fn a_reqwest_client_resolving_robots_example_serves_its_robots_txt_fetch() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/public", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let (robots, http) = Robots::builder()
        .agent("ExampleBot")
        .build_reqwest_client(reqwest::Client::builder().resolve("robots.example", origin.addr()))
        .expect("valid settings");
    let base = format!("http://robots.example:{}", origin.port());
    let res = send(&http, &format!("{base}/public")).await.expect("sent");
    assert_eq!(res.status(), 200);
    let e = send(&http, &format!("{base}/private/x")).await.expect_err("disallowed");
    assert_eq!(refusal(&e).kind(), RefusalKind::Disallowed, "{e}");
    assert_eq!((origin.hits("/robots.txt"), origin.hits("/public"), origin.hits("/private/x")), (1, 1, 0));
    let seen = origin.seen_for("/robots.txt");
    assert_eq!(seen[0].headers["host"], format!("robots.example:{}", origin.port()).as_str());
    // The Robots returned shares the cache the client's middleware filled.
    let o = robotsgate::origin::Origin::parse(&base).unwrap();
    assert!(!bounded("decide", robots.policy().decide(&o, "/private/z", "ExampleBot".into())).await.allowed);
    assert_eq!(origin.hits("/robots.txt"), 1);

    // The same through fetch_with_reqwest and the middleware on a client of one's own.
    let client = reqwest::Client::builder()
        .resolve("robots.example", origin.addr())
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .unwrap();
    let robots = Robots::builder().agent("ExampleBot").fetch_with_reqwest(client.clone()).build().unwrap();
    let http = reqwest_middleware::ClientBuilder::new(client).with(robots.reqwest_middleware()).build();
    let e = send(&http, &format!("{base}/private/y")).await.expect_err("disallowed");
    assert_eq!(refusal(&e).kind(), RefusalKind::Disallowed, "{e}");
    assert_eq!(origin.hits("/robots.txt"), 2);
}

/// A reqwest client that follows redirects by itself would hide the hops from robotsgate's
/// count: its robots.txt fetch is not used (unreachable, saying why).
#[tokio::test]
async fn a_robots_txt_fetch_redirected_by_the_reqwest_client_itself_is_not_used() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::redirect(301, "/elsewhere.txt")),
        ("/elsewhere.txt", Reply::ok("User-agent: *\nAllow: /\n")),
    ])
    .await;
    let client = reqwest::Client::builder().resolve("robots.example", origin.addr()).build().unwrap();
    let robots = Robots::builder().agent("ExampleBot").fetch_with_reqwest(client).build().unwrap();
    let o = robotsgate::origin::Origin::parse(&format!("http://robots.example:{}/", origin.port())).unwrap();
    let d = bounded("decide", robots.policy().decide(&o, "/page", "ExampleBot".into())).await;
    assert!(!d.allowed, "{d:?}");
    let why = format!("{:?}", d.reason);
    assert!(why.contains("followed a redirect"), "{why}");
}
