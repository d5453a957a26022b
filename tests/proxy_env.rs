//! `Robots::builder()` reads the standard proxy environment variables by default (as
//! reqwest and curl do), and refuses bad values at build time. A test binary of its own,
//! with one test: the environment is the process's.

mod support;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use robotsgate::net::ProxyError;
use robotsgate::origin::Origin;
use robotsgate::{BuildError, Robots};
use support::{Reply, TestForwardProxy, TestOrigin, bounded, dead_port};

fn set(var: &str, value: &str) {
    // SAFETY: this binary's one test is the only code touching the environment.
    unsafe { std::env::set_var(var, value) }
}

#[tokio::test]
async fn the_builder_honours_the_proxy_environment_and_refuses_bad_values() {
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n"))]).await;
    let proxy = TestForwardProxy::start().await;
    proxy.resolve("robots.example", IpAddr::V4(Ipv4Addr::LOCALHOST));
    set("HTTP_PROXY", &proxy.url());
    set("NO_PROXY", "direct.example, 127.0.0.1");

    // robotsgate's DNS cannot resolve robots.example: only the proxy from HTTP_PROXY can.
    let robots = Robots::builder()
        .agent("ExampleBot")
        .dns_servers([SocketAddr::from((Ipv4Addr::LOCALHOST, dead_port()))])
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .build()
        .expect("the environment's proxy is valid");
    let o = Origin::parse(&format!("http://robots.example:{}/", origin.port())).unwrap();
    assert!(!bounded("decide", robots.policy().decide(&o, "/private/x", "ExampleBot".into())).await.allowed);
    assert!(bounded("decide", robots.policy().decide(&o, "/public", "ExampleBot".into())).await.allowed);
    assert_eq!(origin.hits("/robots.txt"), 1);
    assert_eq!(proxy.seen().len(), 1);
    assert_eq!(proxy.seen()[0].target, format!("http://robots.example:{}/robots.txt", origin.port()));

    // NO_PROXY: 127.0.0.1 goes directly.
    let direct = Origin::parse(&origin.base()).unwrap();
    assert!(bounded("decide", robots.policy().decide(&direct, "/public", "ExampleBot".into())).await.allowed);
    assert_eq!(origin.hits("/robots.txt"), 2);
    assert_eq!(proxy.seen().len(), 1, "no_proxy bypassed the proxy");

    // A bad value is an error naming the variable, at build time.
    set("HTTPS_PROXY", "socks5://127.0.0.1:1080");
    let e = Robots::builder().agent("ExampleBot").build().expect_err("a SOCKS proxy is refused");
    assert!(matches!(&e, BuildError::Proxy(ProxyError::Var { var: "HTTPS_PROXY", .. })), "{e}");
    assert!(e.to_string().contains("HTTPS_PROXY"), "{e}");
    // ... unless the builder is told to connect directly.
    assert!(Robots::builder().agent("ExampleBot").proxies(robotsgate::net::Proxies::none()).build().is_ok());
}
