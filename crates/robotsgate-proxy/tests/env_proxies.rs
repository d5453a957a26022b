//! The proxy server is itself a forward proxy: its upstream connections (robots.txt
//! fetches and forwarded requests) go directly, whatever `HTTP_PROXY`, `HTTPS_PROXY` and
//! `ALL_PROXY` say in its environment (the library honours them by default). A test
//! binary of its own: the environment is the process's.

mod support;

use support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_proxy_server_ignores_the_proxy_environment_variables() {
    let egress = TestForwardProxy::start().await;
    // Set before anything reads the environment; this binary has this one test.
    // SAFETY: no other thread of this test binary reads or writes the environment now.
    unsafe {
        for var in ["HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY"] {
            std::env::set_var(var, egress.url());
        }
    }
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/page", Reply::ok("hello")),
    ])
    .await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let got = get(proxy.addr, &origin.url("/page")).await;
    assert_eq!(got.status, http::StatusCode::OK, "{}", got.text());
    assert_eq!((origin.hits("/robots.txt"), origin.hits("/page")), (1, 1));
    assert!(egress.seen().is_empty(), "the proxy server chained through {:?}", egress.seen());
    proxy.stop().await;
}
