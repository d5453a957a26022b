//! robotsgate with reqwest (feature `reqwest`): a `reqwest_middleware` client whose every
//! request, and every redirect hop, is checked against robots.txt before it is sent.
//!
//! Self-contained: it starts a small origin on 127.0.0.1 whose robots.txt disallows
//! `/private`, and whose `/moved` redirects into `/private`.
//!
//! ```sh
//! cargo run --example reqwest_client --features reqwest
//! ```

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use robotsgate::{Refusal, Robots};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    let origin = start_origin().await?;

    let robots = Robots::builder()
        .agent("ExampleBot")
        .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
        .allow_destination("127.0.0.0/8".parse()?) // the demo origin is on loopback
        .build()?;
    // robotsgate follows redirects itself, checking each hop: the client must not.
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build()?;
    let http = reqwest_middleware::ClientBuilder::new(client).with(robots.reqwest_middleware()).build();

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
