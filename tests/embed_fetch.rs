//! robots.txt fetched the way the embedder's own requests go (issue 31, point 5): through
//! the embedder's client (`RobotsBuilder::fetch_service`: a hyper-util client resolving
//! `robots.example` to an origin on 127.0.0.1, as `.resolve()` does), with every rule of
//! the built-in fetcher kept (body limit, redirects, timeouts, status classes, evidence);
//! and robotsgate's own connections through a forward proxy (`RobotsBuilder::proxies`):
//! absolute form with credentials for http, `CONNECT` then TLS for https, `no_proxy`.
//! The environment variables are read in `tests/proxy_env.rs`, a binary of its own.

mod support;

use std::collections::HashMap;
use std::future::{Ready, ready};
use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use base64::Engine as _;
use bytes::Bytes;
use http::StatusCode;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::connect::dns::Name;
use hyper_util::rt::TokioExecutor;
use robotsgate::fetch::{FetchConfig, FetchOutcome, FetchResult, Fetcher, Unreachable};
use robotsgate::net::{ConnectError, Proxies};
use robotsgate::origin::Origin;
use robotsgate::{BuildError, Refusal, RefusalKind, Robots};
use sha2::{Digest, Sha256};
use support::{Reply, TestCa, TestForwardProxy, TestOrigin, bounded, dead_port, fetch_config};
use tower::util::BoxCloneService;
use tower::{Service, ServiceBuilder, ServiceExt};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const LIMIT: usize = 500 * 1024;

/// A resolver for hyper-util's `HttpConnector` that knows some names only, as an
/// embedder's `.resolve()` overrides (HttpConnector puts the URI's port on the address).
#[derive(Clone)]
struct Hosts(Arc<HashMap<String, IpAddr>>);

impl Hosts {
    fn loopback(names: &[&str]) -> Hosts {
        Hosts(Arc::new(names.iter().map(|n| (n.to_string(), IpAddr::V4(Ipv4Addr::LOCALHOST))).collect()))
    }
}

impl Service<Name> for Hosts {
    type Response = std::vec::IntoIter<SocketAddr>;
    type Error = io::Error;
    type Future = Ready<Result<Self::Response, io::Error>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), io::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, name: Name) -> Self::Future {
        ready(match self.0.get(name.as_str()) {
            Some(ip) => Ok(vec![SocketAddr::new(*ip, 0)].into_iter()),
            None => Err(io::Error::new(io::ErrorKind::NotFound, format!("{name}: unknown to this client"))),
        })
    }
}

/// The embedder's client: resolves `names` to 127.0.0.1; `calls` counts the requests it
/// was given.
fn embedder_client(names: &[&str], calls: Arc<AtomicUsize>) -> EmbedderClient {
    let client = Client::builder(TokioExecutor::new())
        .build::<_, Empty<Bytes>>(HttpConnector::new_with_resolver(Hosts::loopback(names)));
    // Boxed, as an embedder's stack often is: `Send` and `Clone`, not `Sync`.
    BoxCloneService::new(
        ServiceBuilder::new()
            .map_request(move |req: http::Request<Empty<Bytes>>| {
                calls.fetch_add(1, Ordering::SeqCst);
                req
            })
            .service(client),
    )
}

type EmbedderClient = BoxCloneService<
    http::Request<Empty<Bytes>>,
    http::Response<hyper::body::Incoming>,
    hyper_util::client::legacy::Error,
>;

fn get(url: &str) -> http::Request<Empty<Bytes>> {
    http::Request::get(url).body(Empty::new()).unwrap()
}

async fn fetch(fetcher: &Fetcher, origin: &Origin) -> FetchOutcome {
    bounded(&format!("fetching {}", origin.robots_url()), fetcher.fetch(origin)).await
}

fn service_fetcher(names: &[&str], config: FetchConfig) -> (Fetcher, Arc<AtomicUsize>) {
    let calls = Arc::new(AtomicUsize::new(0));
    (Fetcher::with_service(embedder_client(names, calls.clone()), config), calls)
}

#[tokio::test]
async fn a_tower_embedder_whose_client_resolves_robots_example_gets_that_robots_txt_obeyed() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/public", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let calls = Arc::new(AtomicUsize::new(0));
    let client = embedder_client(&["robots.example"], calls.clone());
    let robots =
        Robots::builder().agent("ExampleBot").fetch_service(client.clone()).build().expect("valid settings");
    let mut http = ServiceBuilder::new().layer(robots.layer()).service(client);
    let base = format!("http://robots.example:{}", origin.port());

    let res =
        bounded("allowed", http.ready().await.unwrap().call(get(&format!("{base}/public")))).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    assert!(Refusal::from_response(&res).is_none());
    let res = bounded("disallowed", http.ready().await.unwrap().call(get(&format!("{base}/private/x"))))
        .await
        .unwrap();
    let refusal = Refusal::from_response(&res).expect("robotsgate's refusal");
    assert_eq!(refusal.kind(), RefusalKind::Disallowed, "{refusal}");

    // robots.txt once, the allowed path once, the disallowed never; all through the client.
    assert_eq!(origin.hits("/robots.txt"), 1);
    assert_eq!(origin.hits("/public"), 1);
    assert_eq!(origin.hits("/private/x"), 0);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the robots.txt fetch and /public went through the client");
    let seen = origin.seen_for("/robots.txt");
    assert_eq!(seen[0].headers["host"], format!("robots.example:{}", origin.port()).as_str());
    assert!(seen[0].headers["user-agent"].to_str().unwrap().contains("ExampleBot"));

    // Without the client, robotsgate's own DNS does not know the name: every request is
    // refused, robots.txt being unreachable (what issue 31 saw).
    let alone = Robots::builder()
        .agent("ExampleBot")
        .dns_servers([SocketAddr::from((Ipv4Addr::LOCALHOST, dead_port()))])
        .connect_timeout(Duration::from_secs(1))
        .proxies(Proxies::none())
        .build()
        .unwrap();
    let o = Origin::parse(&base).unwrap();
    let d = bounded("decide alone", alone.policy().decide(&o, "/public", "ExampleBot".into())).await;
    assert!(!d.allowed, "{d:?}");
    assert_eq!(origin.hits("/robots.txt"), 1);
}

#[tokio::test]
async fn through_a_service_only_500_kib_are_read_and_the_read_stops_there() {
    // 1 MiB with a rule at 600 KiB; the origin stalls after 564 KiB: a fetcher reading on
    // past the limit would wait for the body timeout and fail.
    let body = support::sized_body(
        1024 * 1024,
        &[(0, "User-agent: *\nDisallow: /early\n"), (600 * 1024, "Disallow: /late\n")],
    );
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(body.clone()).stall_after(LIMIT + 64 * 1024))]).await;
    let (fetcher, calls) = service_fetcher(&["robots.example"], fetch_config());
    let out = fetch(&fetcher, &origin.origin("robots.example")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 }, "{out:?}");
    assert_eq!(out.body.len(), LIMIT);
    assert!(out.truncated);
    assert_eq!(out.body.as_ref(), &body[..LIMIT]);
    assert_eq!(out.sha256, Some(<[u8; 32]>::from(Sha256::digest(&body[..LIMIT]))));
    assert!(out.duration < Duration::from_secs(4), "{:?}", out.duration);
    assert_eq!(calls.load(Ordering::SeqCst), 1);

    // Decoded bytes count: a gzip bomb through the service stays at the limit too.
    let bomb = support::encode("gzip", &vec![b'#'; 20 * 1024 * 1024]).await;
    origin.route("/robots.txt", Reply::ok(bomb).header("content-encoding", "gzip"));
    let out = fetch(&fetcher, &origin.origin("robots.example")).await;
    assert_eq!((out.body.len(), out.truncated), (LIMIT, true));
}

#[tokio::test]
async fn through_a_service_redirects_follow_robotsgates_rules() {
    // robots.example → r1 … r5 on other.example (names only the client knows): five hops
    // are followed, by robotsgate, each through the client.
    let origin = TestOrigin::start([]).await;
    let other = origin.base_as("other.example");
    origin.route("/robots.txt", Reply::redirect(301, &format!("{other}/r1")));
    for i in 1..5 {
        origin.route(&format!("/r{i}"), Reply::redirect(302, &format!("/r{}", i + 1)));
    }
    origin.route("/r5", Reply::ok("User-agent: *\nDisallow: /five\n"));
    let (fetcher, calls) = service_fetcher(&["robots.example", "other.example"], fetch_config());
    let out = fetch(&fetcher, &origin.origin("robots.example")).await;
    assert_eq!(out.result, FetchResult::Success { status: 200 }, "{out:?}");
    assert_eq!(out.redirects, 5);
    assert_eq!(out.final_url, format!("{other}/r5"));
    assert_eq!(out.body.as_ref(), b"User-agent: *\nDisallow: /five\n");
    assert_eq!(calls.load(Ordering::SeqCst), 6);

    // A sixth hop is one too many: not fetched, and unavailable (allow all).
    origin.route("/r5", Reply::redirect(302, "/r6"));
    origin.route("/r6", Reply::ok("User-agent: *\nDisallow: /\n"));
    let out = fetch(&fetcher, &origin.origin("robots.example")).await;
    assert_eq!(out.result, FetchResult::TooManyRedirects);
    assert_eq!(origin.hits("/r6"), 0);

    // And the configured limit is the service's limit too.
    let r2 = origin.hits("/r2");
    let (fetcher, _) = service_fetcher(
        &["robots.example", "other.example"],
        FetchConfig { max_redirects: 1, ..fetch_config() },
    );
    let out = fetch(&fetcher, &origin.origin("robots.example")).await;
    assert_eq!(out.result, FetchResult::TooManyRedirects);
    assert_eq!(origin.hits("/r2"), r2, "one hop followed (to /r1), the second not");
}

#[tokio::test]
async fn through_a_service_status_classes_timeouts_and_failures_are_the_fetchers() {
    let origin = TestOrigin::start([("/robots.txt", Reply::status(404).body("no robots here"))]).await;
    let config = FetchConfig {
        header_timeout: Duration::from_millis(500),
        total_timeout: Duration::from_secs(3),
        ..fetch_config()
    };
    let (fetcher, _) = service_fetcher(&["robots.example"], config);
    let robots_origin = origin.origin("robots.example");

    let out = fetch(&fetcher, &robots_origin).await;
    assert_eq!(out.result, FetchResult::Unavailable { status: 404 });
    assert!(out.body.is_empty());

    origin.route("/robots.txt", Reply::status(503).header("retry-after", "120"));
    let out = fetch(&fetcher, &robots_origin).await;
    assert_eq!(out.result, FetchResult::Unreachable(Unreachable::Status(503)));
    assert_eq!(out.retry_after, Some(Duration::from_secs(120)));

    origin.route("/robots.txt", Reply::ok(ROBOTS).wait_forever());
    let out = fetch(&fetcher, &robots_origin).await;
    assert_eq!(out.result, FetchResult::Unreachable(Unreachable::HeaderTimeout(Duration::from_millis(500))));

    // The client cannot connect: unreachable (disallow all), with the client's reason.
    let out =
        fetch(&fetcher, &Origin::parse(&format!("http://robots.example:{}", dead_port())).unwrap()).await;
    match &out.result {
        FetchResult::Unreachable(Unreachable::Protocol(why)) => {
            assert!(why.contains("the client failed"), "{why}")
        }
        other => panic!("expected unreachable, got {other:?}"),
    }
    // A name the client does not know: the same, robotsgate never looked it up.
    let out = fetch(&fetcher, &Origin::parse("http://unknown.example/").unwrap()).await;
    assert!(matches!(out.result, FetchResult::Unreachable(_)), "{out:?}");
}

#[tokio::test]
async fn a_service_erroring_with_robotsgates_connect_error_keeps_its_class() {
    // A hyper-util client on robotsgate's own connector (guard refusing loopback): the
    // error is robotsgate's ConnectError, kept as such.
    let robots = Robots::builder().agent("ExampleBot").proxies(Proxies::none()).build().unwrap();
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    let fetcher = Fetcher::with_service(client, fetch_config());
    let origin = TestOrigin::robots(ROBOTS).await;
    let out = fetch(&fetcher, &Origin::parse(&origin.base()).unwrap()).await;
    assert!(
        matches!(&out.result, FetchResult::Unreachable(Unreachable::Connect(ConnectError::Denied { .. }))),
        "{out:?}"
    );
    assert_eq!(origin.total_hits(), 0);
}

#[test]
fn a_fetch_service_conflicts_with_settings_of_robotsgates_own_connections() {
    let calls = Arc::new(AtomicUsize::new(0));
    let with = || Robots::builder().agent("ExampleBot").fetch_service(embedder_client(&[], calls.clone()));
    let err = |b: robotsgate::RobotsBuilder| b.build().expect_err("conflict");
    assert!(matches!(
        err(with().allow_destination("127.0.0.0/8".parse().unwrap())),
        BuildError::FetchServiceConflict("a destination allowance")
    ));
    assert!(matches!(
        err(with().proxies(Proxies::none())),
        BuildError::FetchServiceConflict("proxy settings")
    ));
    assert!(matches!(
        err(with().connect_timeout(Duration::from_secs(1))),
        BuildError::FetchServiceConflict("a connect timeout")
    ));
    let e = err(with().resolve("a.test", [IpAddr::V4(Ipv4Addr::LOCALHOST)])).to_string();
    assert!(e.contains("set it on your client"), "{e}");
    assert!(with().build().is_ok());
}

// ----- robotsgate's own connections through a forward proxy -----

fn basic(user: &str, pass: &str) -> String {
    format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}")))
}

#[tokio::test]
async fn an_http_origin_is_fetched_through_the_proxy_in_absolute_form_with_its_credentials() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/public", Reply::ok("hello"))]).await;
    let proxy = TestForwardProxy::start().await;
    proxy.resolve("robots.example", IpAddr::V4(Ipv4Addr::LOCALHOST));
    proxy.require_authorization(&basic("crawler", "s3cr:t"));
    // robotsgate's DNS knows nothing of robots.example (a dead name server): the proxy
    // resolves it.
    let robots = Robots::builder()
        .agent("ExampleBot")
        .dns_servers([SocketAddr::from((Ipv4Addr::LOCALHOST, dead_port()))])
        .proxies(Proxies::none().http(&proxy.url_with("crawler", "s3cr%3At")).unwrap())
        .build()
        .unwrap();
    let o = Origin::parse(&format!("http://robots.example:{}/", origin.port())).unwrap();
    let agent = || "ExampleBot".into();
    assert!(!bounded("decide", robots.policy().decide(&o, "/private/x", agent())).await.allowed);
    assert!(bounded("decide", robots.policy().decide(&o, "/public", agent())).await.allowed);
    assert_eq!(origin.hits("/robots.txt"), 1);

    let seen = proxy.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].target, format!("http://robots.example:{}/robots.txt", origin.port()));
    assert_eq!(seen[0].authorization.as_deref(), Some(basic("crawler", "s3cr:t").as_str()));
    assert_eq!(seen[0].answered, None);
    // The origin never sees the proxy's credentials.
    assert!(!origin.seen_for("/robots.txt")[0].headers.contains_key("proxy-authorization"));

    // Requests sent through Robots::pool go the same way.
    let req = http::Request::get(format!("http://robots.example:{}/public", origin.port()))
        .body(http_body_util::Either::Right(Empty::new()))
        .unwrap();
    let res = bounded("through the pool", robots.pool().send(req)).await.unwrap();
    assert_eq!(res.status(), StatusCode::OK);
    drop(res);
    assert_eq!(origin.hits("/public"), 1);
}

#[tokio::test]
async fn an_https_origin_is_fetched_through_a_connect_tunnel_with_tls_to_the_origin() {
    let ca = TestCa::new("proxy", &["robots.example"]);
    let origin =
        TestOrigin::start_tls([("/robots.txt", Reply::ok(ROBOTS))], ca.server_config(&[b"h2", b"http/1.1"]))
            .await;
    let proxy = TestForwardProxy::start().await;
    proxy.resolve("robots.example", IpAddr::V4(Ipv4Addr::LOCALHOST));
    let robots = Robots::builder()
        .agent("ExampleBot")
        .webpki_roots(false)
        .extra_root(ca.der.clone())
        .dns_servers([SocketAddr::from((Ipv4Addr::LOCALHOST, dead_port()))])
        .proxies(Proxies::none().https(&proxy.url()).unwrap())
        .build()
        .unwrap();
    let o = Origin::parse(&format!("https://robots.example:{}/", origin.port())).unwrap();
    let d = bounded("decide", robots.policy().decide(&o, "/private/x", "ExampleBot".into())).await;
    assert!(!d.allowed, "{d:?}");
    assert!(bounded("decide", robots.policy().decide(&o, "/public", "ExampleBot".into())).await.allowed);
    assert_eq!(origin.hits("/robots.txt"), 1);
    let seen = proxy.seen();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!((seen[0].method.as_str(), seen[0].answered), ("CONNECT", Some(200)));
    assert_eq!(seen[0].target, format!("robots.example:{}", origin.port()));
    assert_eq!(seen[0].authorization, None);

    // The tunnel is to the origin, not to the proxy: a leaf for another name fails TLS.
    let wrong = TestCa::new("other", &["elsewhere.example"]);
    let other =
        TestOrigin::start_tls([("/robots.txt", Reply::ok(ROBOTS))], wrong.server_config(&[b"http/1.1"]))
            .await;
    let o = Origin::parse(&format!("https://robots.example:{}/", other.port())).unwrap();
    let fetched = bounded("fetch", robots.policy().decide(&o, "/public", "ExampleBot".into())).await;
    assert!(!fetched.allowed, "an untrusted origin behind the tunnel: unreachable, disallow all");
}

#[tokio::test]
async fn no_proxy_origins_connect_directly() {
    let origin = TestOrigin::robots(ROBOTS).await;
    let proxy = TestForwardProxy::start().await;
    let robots = Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .proxies(Proxies::none().all(&proxy.url()).unwrap().no_proxy("localhost, 127.0.0.0/8").unwrap())
        .build()
        .unwrap();
    let o = Origin::parse(&origin.base()).unwrap();
    assert!(!bounded("decide", robots.policy().decide(&o, "/private", "ExampleBot".into())).await.allowed);
    assert_eq!(origin.hits("/robots.txt"), 1);
    assert!(proxy.seen().is_empty(), "{:?}", proxy.seen());

    // The same origin by a name no_proxy does not list goes through the proxy.
    proxy.resolve("robots.example", IpAddr::V4(Ipv4Addr::LOCALHOST));
    let named = Origin::parse(&format!("http://robots.example:{}/", origin.port())).unwrap();
    assert!(bounded("decide", robots.policy().decide(&named, "/public", "ExampleBot".into())).await.allowed);
    assert_eq!(proxy.seen().len(), 1);
    assert_eq!(origin.hits("/robots.txt"), 2);
}

#[tokio::test]
async fn a_proxy_refusing_the_tunnel_makes_robots_txt_unreachable_saying_why() {
    let proxy = TestForwardProxy::start().await;
    proxy.require_authorization(&basic("a", "b"));
    let robots = Robots::builder()
        .agent("ExampleBot")
        .proxies(Proxies::none().https(&proxy.url()).unwrap())
        .build()
        .unwrap();
    let o = Origin::parse("https://robots.example/").unwrap();
    let d = bounded("decide", robots.policy().decide(&o, "/", "ExampleBot".into())).await;
    assert!(!d.allowed);
    let text = format!("{:?}", d.reason);
    assert!(text.contains("407") && text.contains("credentials"), "{text}");
    assert_eq!(proxy.seen()[0].answered, Some(407));

    // A proxy that is not there: unreachable within the connect timeout, naming it.
    let gone = format!("http://127.0.0.1:{}", dead_port());
    let robots = Robots::builder()
        .agent("ExampleBot")
        .connect_timeout(Duration::from_secs(2))
        .proxies(Proxies::none().https(&gone).unwrap())
        .build()
        .unwrap();
    let d = bounded("decide", robots.policy().decide(&o, "/", "ExampleBot".into())).await;
    assert!(!d.allowed);
    let text = format!("{:?}", d.reason);
    assert!(text.contains("proxy") && text.contains(&gone), "{text}");
}

#[tokio::test]
async fn through_a_proxy_the_guard_still_refuses_origins_given_as_refused_addresses() {
    let origin = TestOrigin::robots(ROBOTS).await;
    let proxy = TestForwardProxy::start().await;
    let robots = Robots::builder()
        .agent("ExampleBot")
        .proxies(Proxies::none().all(&proxy.url()).unwrap())
        .build()
        .unwrap();
    let o = Origin::parse(&origin.base()).unwrap();
    let d = bounded("decide", robots.policy().decide(&o, "/", "ExampleBot".into())).await;
    assert!(!d.allowed);
    assert!(proxy.seen().is_empty(), "a loopback origin is refused before the proxy is asked");
    assert_eq!(origin.total_hits(), 0);
}
