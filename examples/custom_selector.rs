//! A custom product-token selector: one HTTP client shared by several crawlers, each
//! request tagged with the tenant it is made for, each tenant held to its own crawler's
//! rules.
//!
//! A selector is anything implementing `robotsgate::layer::SelectToken` (a closure
//! `Fn(&mut http::request::Parts) -> Result<Arc<str>, TokenError>` is one). It may change
//! the request too: here it takes the tenant out of the extensions.
//!
//! ```sh
//! cargo run --example custom_selector
//! ```

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Empty;
use hyper::Request;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::layer::TokenError;
use robotsgate::{Refusal, Robots};
use tower::{Service, ServiceBuilder, ServiceExt};

#[path = "support/origin.rs"]
mod origin;

/// Which tenant a request is made for (set by the application).
#[derive(Clone, Copy, Debug)]
enum Tenant {
    News,
    Shop,
}

/// Each tenant crawls under its own product token.
fn select(parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError> {
    match parts.extensions.remove::<Tenant>() {
        Some(Tenant::News) => Ok("NewsBot".into()),
        Some(Tenant::Shop) => Ok("ShopBot".into()),
        None => Err(TokenError::Missing("request has no tenant".into())),
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let origin = origin::start(route).await?;
    let robots = Robots::builder()
        .agent("SharedFetcher") // the identity of the robots.txt fetches
        .user_agent("SharedFetcher/1.0 (NewsBot, ShopBot)")
        .select_token(select) // the token each request is checked for
        .allow_destination("127.0.0.0/8".parse()?)
        .build()?;
    let client = Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
    let mut http = ServiceBuilder::new().layer(robots.layer()).service(client);

    for tenant in [Tenant::News, Tenant::Shop] {
        let mut req = Request::get(format!("http://{origin}/deals/today")).body(Empty::new())?;
        req.extensions_mut().insert(tenant);
        let res = http.ready().await?.call(req).await?;
        let verdict = if Refusal::from_response(&res).is_some() { "refused" } else { "allowed" };
        println!("{tenant:?}: /deals/today {verdict} ({})", res.status());
    }
    Ok(())
}

/// An origin whose robots.txt keeps ShopBot out of /deals but lets NewsBot in.
fn route(path: &str) -> origin::Answer {
    match path {
        "/robots.txt" => (200, None, "User-agent: ShopBot\nDisallow: /deals\n\nUser-agent: *\nAllow: /\n"),
        _ => (200, None, "today's deals"),
    }
}
