//! Both listeners serve their clients without Nagle's algorithm (`TCP_NODELAY` on each
//! accepted socket), as nginx and HAProxy do. Without it, a response written in more than
//! one piece (a head, then a body as it comes from the upstream) waits for the client's
//! acknowledgement of the first, which a client in the middle of a keep-alive exchange
//! delays by some 40 ms: the ingress, before this was set, answered a keep-alive client
//! 100 KiB pages at 179 a second with a p99 of 44 ms, where nginx answered 4,399 a second
//! (benches/README.md, thirtieth session).
//!
//! The proxies run in this process, so the test reads the option on their end of the
//! connection it opened (`support::nodelay_of`): the socket among this process's
//! descriptors whose address is the listener's and whose peer is the test's client.

mod support;

use robotsgate_proxy::config::Config;
use robotsgate_proxy::ingress::Ingress;
use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::net::TcpStream;

/// Sends `request` on `client` and reads until the response's body ends with `body`.
async fn exchange(client: &mut TcpStream, request: &str, body: &str) {
    client.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(body.as_bytes()) {
        let n = bounded("the response", client.read(&mut buf)).await.unwrap();
        assert!(n > 0, "closed before the response's end: {}", String::from_utf8_lossy(&got));
        got.extend_from_slice(&buf[..n]);
    }
    assert!(got.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&got));
}

/// A site that allows `/page` ("the page").
async fn site() -> TestOrigin {
    TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\n")),
        ("/page", Reply::ok("the page")),
    ])
    .await
}

#[tokio::test]
async fn the_ingress_serves_its_clients_without_nagle() {
    let site = site().await;
    let dir = temp_dir();
    let text = format!(
        "[ingress]\nlisten = \"127.0.0.1:0\"\nupstream = \"{}\"\nworkers = 1\n[verify]\nenabled = false\n",
        site.base()
    );
    let mut config = Config::parse("test.toml", &text).unwrap_or_else(|e| panic!("{e}"));
    config.audit.path = dir.path().join("audit.jsonl").display().to_string();
    let ingress = bounded("Ingress::start", Ingress::start(&config)).await.unwrap();
    let addr = ingress.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let running = tokio::spawn(ingress.run(async move {
        let _ = stopped.await;
    }));

    let mut client = TcpStream::connect(addr).await.unwrap();
    let request =
        "GET /page HTTP/1.1\r\nHost: site.test\r\nUser-Agent: Mozilla/5.0 (X11; Linux x86_64)\r\n\r\n";
    exchange(&mut client, request, "the page").await;
    let client_addr = client.local_addr().unwrap();
    assert_eq!(nodelay_of(|local, peer| local == addr && peer == client_addr), [true]);

    drop(client);
    let _ = stop.send(());
    bounded("the ingress's end", running).await.unwrap().unwrap();
}

#[tokio::test]
async fn the_forward_proxy_serves_its_clients_without_nagle() {
    let origin = site().await;
    let dir = temp_dir();
    let proxy = RunningProxy::start(&test_config(dir.path())).await;

    let mut client = TcpStream::connect(proxy.addr).await.unwrap();
    let request = format!("GET {}/page HTTP/1.1\r\nHost: {}\r\n\r\n", origin.base(), origin.addr());
    exchange(&mut client, &request, "the page").await;
    let client_addr = client.local_addr().unwrap();
    assert_eq!(nodelay_of(|local, peer| local == proxy.addr && peer == client_addr), [true]);

    drop(client);
    proxy.stop().await;
}
