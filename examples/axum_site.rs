//! An axum site that enforces its own robots.txt on the bots that visit it: the router is
//! wrapped in `robotsgate::ingress::IngressLayer` like any tower middleware.
//!
//! Self-contained: it serves a small site on 127.0.0.1 (robots.txt disallows `/private` to
//! GPTBot, states its AI-usage preference, and asks every other bot for 10 s between
//! requests), then plays a few bots and a browser against it and prints what each got.
//!
//! ```sh
//! cargo run --example axum_site
//! ```
//!
//! (`tests/examples.rs` runs [`tour`] and checks what each visitor got.)

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::{ConnectInfo, Path, Request};
use axum::middleware::{self, Next};
use axum::response::Response;
use axum::routing::get;
use axum::{Router, ServiceExt as _};
use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::ingress::IngressLayer;
use tower::ServiceBuilder;

const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\nContent-Usage: search=y\n\n\
User-agent: *\nCrawl-delay: 10\n";

/// The layer reads the client's address (for pacing per client network, and the record)
/// from the request's `SocketAddr` extension; axum keeps it in `ConnectInfo`.
async fn client_address(
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut req: Request,
    next: Next,
) -> Response {
    req.extensions_mut().insert(peer);
    next.run(req).await
}

/// What one visitor got, and the layer's records of the visit (`token method path ->
/// outcome`; none for a person's browser).
#[derive(Debug)]
pub struct Visit {
    /// The visitor's `User-Agent`.
    pub user_agent: &'static str,
    /// The path asked for.
    pub path: &'static str,
    /// The answer's status.
    pub status: http::StatusCode,
    /// Its `x-robotsgate`, `content-usage` and `retry-after` headers (`-`: none).
    pub robotsgate: String,
    /// See `robotsgate`.
    pub content_usage: String,
    /// See `robotsgate`.
    pub retry_after: String,
    /// The layer's records of this visit.
    pub records: Vec<String>,
}

/// Serves the site on 127.0.0.1 and plays a few bots and a browser against it.
pub async fn tour() -> Result<Vec<Visit>, Box<dyn std::error::Error + Send + Sync>> {
    // robots.txt is fetched from the site itself (GET /robots.txt through the router), and
    // served byte for byte to everyone.
    let records = Arc::new(Mutex::new(Vec::new()));
    let kept = records.clone();
    let ingress = IngressLayer::builder()
        .observer(move |r| {
            let line = format!("{} {} {} -> {}", r.token().unwrap_or("-"), r.method(), r.path(), r.outcome());
            kept.lock().unwrap_or_else(|e| e.into_inner()).push(line);
        })
        .build();

    // The site itself knows nothing of bots.
    let site = Router::new()
        .route("/robots.txt", get(|| async { ROBOTS }))
        .route("/articles/{id}", get(|Path(id): Path<u32>| async move { format!("article {id}\n") }))
        .route("/private/{page}", get(|Path(page): Path<String>| async move { format!("private {page}\n") }));
    // Around the whole router, not with `Router::layer` (which wraps each route on its own:
    // the layer's robots.txt fetch would go to the route being asked for).
    let app = ServiceBuilder::new().layer(middleware::from_fn(client_address)).layer(ingress).service(site);

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let server = tokio::spawn(async move {
        axum::serve(listener, app.into_make_service_with_connect_info::<SocketAddr>()).await
    });

    let client: Client<_, Empty<Bytes>> = Client::builder(TokioExecutor::new()).build_http();
    let visits = [
        ("GPTBot/1.2", "/private/report"),
        ("GPTBot/1.2", "/articles/1"),
        ("GPTBot/1.2", "/robots.txt"),
        ("Mozilla/5.0 (compatible; ClaudeBot/1.0)", "/articles/1"),
        ("Mozilla/5.0 (compatible; ClaudeBot/1.0)", "/articles/2"),
        ("Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0", "/private/report"),
    ];
    let mut seen = Vec::new();
    for (user_agent, path) in visits {
        let req = http::Request::get(format!("http://{addr}{path}"))
            .header("user-agent", user_agent)
            .body(Empty::new())?;
        let res = client.request(req).await?;
        let h = |n: &str| res.headers().get(n).and_then(|v| v.to_str().ok()).unwrap_or("-").to_owned();
        seen.push(Visit {
            user_agent,
            path,
            status: res.status(),
            robotsgate: h("x-robotsgate"),
            content_usage: h("content-usage"),
            retry_after: h("retry-after"),
            // A visit's records are written before its answer goes out.
            records: std::mem::take(&mut *records.lock().unwrap_or_else(|e| e.into_inner())),
        });
    }
    server.abort();
    Ok(seen)
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    for v in tour().await? {
        for record in &v.records {
            println!("  record: {record}");
        }
        println!(
            "{:<48} {:<16} {} x-robotsgate: {} content-usage: {} retry-after: {}",
            v.user_agent, v.path, v.status, v.robotsgate, v.content_usage, v.retry_after
        );
    }
    Ok(())
}
