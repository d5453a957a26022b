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

use std::convert::Infallible;
use std::sync::Arc;

use bytes::Bytes;
use http_body_util::{Empty, Full};
use hyper::{Request, Response};
use hyper_util::client::legacy::Client;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::layer::TokenError;
use robotsgate::{Refusal, Robots};
use tower::{Service, ServiceBuilder, ServiceExt};

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
    let origin = start_origin().await?;
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
async fn start_origin() -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(|req: Request<hyper::body::Incoming>| async move {
                    let body = match req.uri().path() {
                        "/robots.txt" => "User-agent: ShopBot\nDisallow: /deals\n\nUser-agent: *\nAllow: /\n",
                        _ => "today's deals",
                    };
                    Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(body))))
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(addr)
}
