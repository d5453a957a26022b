//! robotsgate with reqwest (feature `reqwest`): a `reqwest_middleware` client whose every
//! request, and every redirect hop, is checked against robots.txt before it is sent.
//!
//! Self-contained: it starts a small origin on 127.0.0.1 whose robots.txt disallows
//! `/private`, and whose `/moved` redirects into `/private`.
//!
//! ```sh
//! cargo run --example reqwest_client --features reqwest
//! ```

use robotsgate::{Refusal, Robots};

#[path = "support/origin.rs"]
mod origin;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let origin = origin::start(route).await?;

    // One reqwest client for the requests and the robots.txt fetches: its `.resolve()`
    // (here: `demo.example` is the origin on loopback), proxies and TLS serve both. The
    // middleware follows redirects itself and checks each hop: build_reqwest_client sets
    // the client up so (redirect::Policy::none()) from any reqwest::ClientBuilder.
    let (_robots, http) = Robots::builder()
        .agent("ExampleBot")
        .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
        .build_reqwest_client(reqwest::Client::builder().resolve("demo.example", origin))?;

    for path in ["/", "/private/report.pdf", "/moved"] {
        let url = format!("http://demo.example:{}{path}", origin.port());
        match http.get(&url).send().await {
            Ok(res) => println!("{url}: {} {:?}", res.status(), res.text().await?),
            Err(reqwest_middleware::Error::Middleware(e)) => match e.downcast_ref::<Refusal>() {
                Some(refusal) => println!("{url}: not fetched: {refusal}"),
                None => println!("{url}: {e}"),
            },
            Err(e) => println!("{url}: {e}"),
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
