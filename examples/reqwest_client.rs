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

    let robots = Robots::builder()
        .agent("ExampleBot")
        .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
        .allow_destination("127.0.0.0/8".parse()?) // the demo origin is on loopback
        .build()?;
    // The middleware follows redirects itself and checks each hop: reqwest_client builds
    // the client so (redirect::Policy::none()) from any reqwest::ClientBuilder.
    let http = robots.reqwest_client(reqwest::Client::builder())?;

    for path in ["/", "/private/report.pdf", "/moved"] {
        let url = format!("http://{origin}{path}");
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
