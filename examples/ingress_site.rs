//! A site that enforces its own robots.txt on the bots that visit it: a hyper server
//! whose service is wrapped in `robotsgate::ingress::IngressLayer`.
//!
//! Self-contained: it serves a small site on 127.0.0.1 (robots.txt disallows `/private` to
//! GPTBot and asks every other bot for 10 s between requests), then plays a few bots and a
//! browser against it and prints what each got.
//!
//! ```sh
//! cargo run --example ingress_site
//! ```

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Empty, Full};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::ingress::IngressLayer;
use tower::{Layer as _, ServiceExt as _};

const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\nContent-Usage: search=y\n\n\
User-agent: *\nCrawl-delay: 10\n";

/// The site itself: it knows nothing of bots.
async fn site(req: Request<BoxBody<Bytes, hyper::Error>>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = match req.uri().path() {
        "/robots.txt" => ROBOTS.to_owned(),
        path => format!("the page at {path}\n"),
    };
    Ok(Response::new(Full::new(Bytes::from(body))))
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    // robots.txt is fetched from the site itself (GET /robots.txt through the service).
    let layer = IngressLayer::builder()
        .observer(|r| {
            eprintln!("  record: {} {} {} -> {}", r.token().unwrap_or("-"), r.method(), r.path(), r.outcome())
        })
        .build();

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else { return };
            let svc = layer.layer(tower::service_fn(site));
            // The layer reads the client's address from the request's extensions; hyper's
            // `Incoming` body becomes a body with a `Default` (for the robots.txt fetch).
            let svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert::<SocketAddr>(peer);
                svc.clone().oneshot(req.map(|b| b.boxed()))
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let visits = [
        ("GPTBot/1.2", "/private/report"),
        ("GPTBot/1.2", "/articles/1"),
        ("Mozilla/5.0 (compatible; ClaudeBot/1.0)", "/articles/1"),
        ("Mozilla/5.0 (compatible; ClaudeBot/1.0)", "/articles/2"),
        ("Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0", "/private/report"),
    ];
    for (ua, path) in visits {
        let req = Request::get(format!("http://{addr}{path}")).header("user-agent", ua).body(Empty::new())?;
        let res = client.request(req).await?;
        let h = |n: &str| res.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("-").to_owned();
        println!(
            "{ua:<48} {path:<16} {} x-robotsgate: {} content-usage: {} retry-after: {}",
            res.status(),
            h("x-robotsgate"),
            h("content-usage"),
            h("retry-after")
        );
    }
    Ok(())
}
