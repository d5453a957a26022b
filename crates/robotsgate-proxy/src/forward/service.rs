//! [`ProxyService`]: the robots layer over the forwarder, the service client requests go
//! to, and [`ProxyBody`], the body of every response the proxy sends.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http::{Method, Request, Response};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full};
use robotsgate::net::PoolRequestBody as ClientBody;
use tower::{Layer, Service};

use super::Forwarder;
use robotsgate::layer::RobotsLayer;
use robotsgate::{Refusal, RefusalKind};

/// The body of every response the proxy sends.
pub type ProxyBody = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// One of robotsgate's own answers in the proxy's body type.
pub(crate) fn boxed(res: Response<Full<Bytes>>) -> Response<ProxyBody> {
    res.map(|b| b.map_err(|never| match never {}).boxed())
}

/// The robots layer over the forwarder, with robotsgate's own answers and the origin's
/// in one body type. Cloning it clones two `Arc`s; requests clone it, not a boxed service.
#[derive(Clone)]
pub(crate) struct ProxyService(robotsgate::layer::RobotsService<Forwarder>);

impl ProxyService {
    /// `layer` over `forwarder`.
    pub(crate) fn new(layer: &RobotsLayer, forwarder: Forwarder) -> ProxyService {
        ProxyService(layer.layer(forwarder))
    }

    /// `layer` over `forwarder`, for the requests of the client connection from `client`:
    /// their records name `client`, and their upstream connection can be the one this
    /// client connection keeps ([`Forwarder::for_client_connection`]). Made once a
    /// connection, so that its requests carry neither in their extensions.
    pub(crate) fn for_client_connection(
        layer: &RobotsLayer,
        forwarder: &Forwarder,
        client: std::net::SocketAddr,
        place: crate::slot::Slot,
    ) -> ProxyService {
        ProxyService(layer.layer(forwarder.for_client_connection(place)).with_client_addr(client))
    }

    /// The client connection's place under `proxy.max_connections`, for a tunnel that
    /// outlives it (`None`: not a client connection's service).
    pub(crate) fn place(&self) -> Option<crate::slot::Slot> {
        self.0.get_ref().sticky.as_ref().and_then(|s| s.place())
    }

    /// The answer to `req`. (No readiness to wait for: see `poll_ready`.)
    pub(crate) fn answer(
        &self,
        req: Request<ClientBody>,
    ) -> impl Future<Output = Response<ProxyBody>> + use<> {
        let future = self.clone().call(req);
        async move {
            match future.await {
                Ok(res) => res,
                Err(never) => match never {},
            }
        }
    }
}

impl Service<Request<ClientBody>> for ProxyService {
    type Response = Response<ProxyBody>;
    type Error = Infallible;
    type Future = OneBody;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // The forwarder is always ready.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<ClientBody>) -> OneBody {
        let head = req.method() == Method::HEAD;
        OneBody { inner: self.0.call(req), head }
    }
}

/// The response future of [`ProxyService`]: the origin's body passes as it is;
/// robotsgate's own answers are boxed, and so are the layer's errors (an origin that
/// cannot be reached), answered as the refusals they carry.
pub(crate) struct OneBody {
    inner: robotsgate::layer::ResponseFuture<
        Response<robotsgate::layer::RobotsBody<ProxyBody>>,
        robotsgate::layer::BoxError,
    >,
    head: bool,
}

impl Future for OneBody {
    type Output = Result<Response<ProxyBody>, Infallible>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let head = self.head;
        Pin::new(&mut self.inner).poll(cx).map(|res| {
            Ok(match res {
                Ok(res) => res.map(|body| match body.into_inner() {
                    Ok(http_body_util::Either::Left(origin)) => origin,
                    Ok(http_body_util::Either::Right(own)) => own.map_err(|never| match never {}).boxed(),
                    // Counted for the outcome record: sent as itself.
                    Err(counted) => counted.boxed(),
                }),
                Err(e) => {
                    let refusal = match e.downcast::<Refusal>() {
                        Ok(r) => *r,
                        Err(e) => Refusal::new(RefusalKind::UpstreamError, e.to_string()),
                    };
                    boxed(refusal.into_response(head))
                }
            })
        })
    }
}
