//! robotsgate embedded in a Rust HTTP client: a hyper-util `Client` under
//! `tower::ServiceBuilder` with `RobotsLayer`, and tower-http's redirect following placed
//! *outside* the layer so that every redirect hop is checked against robots.txt too.
//!
//! Self-contained: it starts a small origin on 127.0.0.1 whose robots.txt disallows
//! `/private`, and whose `/moved` redirects into `/private`.
//!
//! ```sh
//! cargo run --example embedded_client
//! ```

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty, Full};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::Refusal;
use robotsgate::fetch::{FetchConfig, Fetcher};
use robotsgate::layer::RobotsLayer;
use robotsgate::net::{Connector, DnsConfig, Guard, Resolver, TlsConfig, client_config};
use robotsgate::policy::{Decision, PolicyConfig, RobotsPolicy};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::follow_redirect::FollowRedirectLayer;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let origin = start_origin().await?;

    // The connector robotsgate uses: DNS, the destination guard (loopback opened for this
    // demo), TLS with the webpki roots.
    let guard = Arc::new(Guard::default().allow("127.0.0.0/8".parse()?));
    let tls = client_config(&TlsConfig::default(), &[b"h2", b"http/1.1"])?;
    let connector = Connector::new(Resolver::new(&DnsConfig::default()), guard, tls, Duration::from_secs(5));

    // The policy fetches and caches robots.txt; the User-Agent names the product token.
    let fetcher = Fetcher::new(
        connector.clone(),
        FetchConfig {
            user_agent: "ExampleBot/1.0 (+https://example.com/bot)".into(),
            ..FetchConfig::default()
        },
    );
    let policy = RobotsPolicy::new(fetcher, PolicyConfig::default());

    // Redirects outside the robots layer: each hop is a new request through the layer.
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(connector);
    let mut http = ServiceBuilder::new()
        .layer(FollowRedirectLayer::new())
        .layer(RobotsLayer::new(policy, "ExampleBot"))
        .service(client);

    for path in ["/", "/private/report.pdf", "/moved"] {
        let url = format!("http://{origin}{path}");
        let req = Request::get(&url).body(Empty::new())?;
        let res = http.ready().await?.call(req).await?;
        let status = res.status();
        if Refusal::from_response(&res).is_some() {
            // The Decision rides in the response extensions: why, and which robots.txt.
            let why = res.extensions().get::<Decision>().map(|d| d.to_string()).unwrap_or_default();
            println!("{url}: refused by robotsgate ({why})");
        } else {
            let body = res.into_body().collect().await?.to_bytes();
            println!("{url}: {status} {:?}", String::from_utf8_lossy(&body));
        }
    }
    Ok(())
}

/// A tiny origin: robots.txt, a home page, a private page, and a redirect into it.
async fn start_origin() -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let (status, location, body) = match req.uri().path() {
                        "/robots.txt" => (200, None, "User-agent: *\nDisallow: /private\n"),
                        "/" => (200, None, "welcome"),
                        "/moved" => (302, Some("/private/old"), ""),
                        _ => (200, None, "secret"),
                    };
                    let mut res = Response::builder().status(status);
                    if let Some(l) = location {
                        res = res.header("location", l);
                    }
                    Ok::<_, Infallible>(res.body(Full::new(Bytes::from(body))).unwrap_or_default())
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}
