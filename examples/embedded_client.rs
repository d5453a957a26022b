//! robotsgate embedded in a Rust HTTP client: `Robots::builder()`, its layer over a
//! hyper-util `Client`, and tower-http's redirect following placed *outside* the layer so
//! that every redirect hop is checked against robots.txt too.
//!
//! Self-contained: it starts a small origin on 127.0.0.1 whose robots.txt disallows
//! `/private`, and whose `/moved` redirects into `/private`.
//!
//! ```sh
//! cargo run --example embedded_client
//! ```

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::{Refusal, Robots};
use tower::{Service, ServiceBuilder, ServiceExt};
use tower_http::follow_redirect::FollowRedirectLayer;

#[path = "support/origin.rs"]
mod origin;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let origin = origin::start(route).await?;

    let robots = Robots::builder()
        .agent("ExampleBot")
        .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
        .allow_destination("127.0.0.0/8".parse()?) // the demo origin is on loopback
        .build()?;
    // The client connects through robotsgate's connector, so requests are held to the same
    // destination guard as the robots.txt fetches. Redirects are followed *outside* the
    // layer: each hop is a new request through it.
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    let mut http =
        ServiceBuilder::new().layer(FollowRedirectLayer::new()).layer(robots.layer()).service(client);

    for path in ["/", "/private/report.pdf", "/moved"] {
        let url = format!("http://{origin}{path}");
        let res = http.ready().await?.call(Request::get(&url).body(Empty::new())?).await?;
        match Refusal::from_response(&res) {
            // The refusal names the rule and line that decided, and which robots.txt.
            Some(refusal) => println!(
                "{url}: not fetched: {}",
                refusal.decision().map(|d| d.to_string()).unwrap_or_default()
            ),
            None => {
                let status = res.status();
                let body = res.into_body().collect().await?.to_bytes();
                println!("{url}: {status} {:?}", String::from_utf8_lossy(&body));
            }
        }
    }
    Ok(())
}

/// A tiny origin: robots.txt, a home page, a private page, and a redirect into it.
fn route(path: &str) -> origin::Answer {
    match path {
        "/robots.txt" => (200, None, "User-agent: *\nDisallow: /private\n"),
        "/" => (200, None, "welcome"),
        "/moved" => (302, Some("/private/old"), ""),
        _ => (200, None, "secret"),
    }
}
