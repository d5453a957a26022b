//! The examples' tiny origin on a loopback port: each path's answer (status, optional
//! `Location`, body) comes from the example's `route` function.

use std::convert::Infallible;

use bytes::Bytes;
use http_body_util::Full;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;

/// An answer: status, `Location` (for redirects), body.
pub type Answer = (u16, Option<&'static str>, &'static str);

/// Starts the origin; returns its address.
pub async fn start(route: fn(&str) -> Answer) -> std::io::Result<std::net::SocketAddr> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<hyper::body::Incoming>| async move {
                    let (status, location, body) = route(req.uri().path());
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
