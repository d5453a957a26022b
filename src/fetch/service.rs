//! The embedder's own HTTP client as the robots.txt fetcher's transport: any tower
//! `Service` of `http::Request`s, boxed behind one type so [`Fetcher`](super::Fetcher)
//! stays one fetcher whichever way its requests go.

use std::error::Error as StdError;
use std::fmt;
use std::sync::{Arc, Mutex};

use bytes::{Buf, Bytes};
use http::{Request, Response};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tower::util::BoxCloneService;
use tower::{Service, ServiceExt};

use super::Unreachable;
use crate::net::{ConnectError, PoolError, error_chain};

/// An error of the embedder's client, or of a body it returned.
pub(crate) type BoxError = Box<dyn StdError + Send + Sync>;

/// The response bodies the fetcher reads, whichever way they came.
pub(crate) type FetchBody = UnsyncBoxBody<Bytes, BoxError>;

type Boxed = BoxCloneService<Request<()>, Response<FetchBody>, BoxError>;

/// A client of the embedder's, boxed (see [`Fetcher::with_service`](super::Fetcher::with_service)).
/// The service is kept behind a lock only to be cloned for each fetch (it need not be
/// `Sync`); the lock is never held across an await.
#[derive(Clone)]
pub(crate) struct FetchService {
    inner: Arc<Mutex<Boxed>>,
}

impl fmt::Debug for FetchService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("FetchService")
    }
}

impl FetchService {
    pub(crate) fn new<S, ReqB, ResB>(service: S) -> FetchService
    where
        S: Service<Request<ReqB>, Response = Response<ResB>> + Clone + Send + 'static,
        S::Error: Into<BoxError>,
        S::Future: Send + 'static,
        ReqB: Default + Send + 'static,
        ResB: hyper::body::Body + Send + 'static,
        ResB::Data: Send,
        ResB::Error: Into<BoxError>,
    {
        let boxed = service
            .map_request(|req: Request<()>| req.map(|()| ReqB::default()))
            .map_response(|res: Response<ResB>| {
                res.map(|body| {
                    body.map_frame(|frame| frame.map_data(|mut data| data.copy_to_bytes(data.remaining())))
                        .map_err(Into::into)
                        .boxed_unsync()
                })
            })
            .map_err(Into::into);
        FetchService { inner: Arc::new(Mutex::new(BoxCloneService::new(boxed))) }
    }

    /// Sends `req` through a clone of the service (waiting for it to be ready).
    pub(crate) async fn send(&self, req: Request<()>) -> Result<Response<FetchBody>, Unreachable> {
        let service = match self.inner.lock() {
            Ok(s) => s.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        };
        service.oneshot(req).await.map_err(|e| service_error(&*e))
    }
}

/// Classifies an error of the embedder's client: robotsgate's own connection errors when
/// the client connects through robotsgate's [`Connector`](crate::net::Connector) or
/// [`Pool`](crate::net::Pool), else the client's message.
fn service_error(e: &(dyn StdError + 'static)) -> Unreachable {
    let mut cause = Some(e);
    while let Some(err) = cause {
        if let Some(c) = err.downcast_ref::<ConnectError>() {
            return Unreachable::Connect(c.clone());
        }
        if let Some(p) = err.downcast_ref::<PoolError>() {
            return super::client_error(p);
        }
        cause = err.source();
    }
    Unreachable::Protocol(format!("the client failed: {}", error_chain(e)))
}
