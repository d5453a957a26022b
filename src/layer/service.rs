//! [`RobotsService`]: the layer applied to a service, and its response future.

use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::header::HOST;
use http::{Method, Request, Response};
use http_body_util::Either;
use tower::Service;

use super::decide::{AuditRequestId, Shared};
use super::outcome::{Outcome, counted};
use super::{BoxError, Mode, RobotsBody};
use crate::identity::httpsig::Payment;
use crate::refusal::Refusal;

/// Checks each request against robots.txt before passing it on. See the [layer
/// module](crate::layer).
#[derive(Clone)]
pub struct RobotsService<S> {
    pub(super) inner: S,
    pub(super) shared: Arc<Shared>,
    /// The client's address, for requests without a [`ClientAddr`].
    pub(super) client: Option<SocketAddr>,
}

impl<S> RobotsService<S> {
    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// This service for the requests of one client connection: their records name `addr`
    /// as the client, as a request carrying a [`ClientAddr`] extension would (which still
    /// wins). A server that makes a service per connection, as hyper's do, can so leave
    /// each request's extensions alone.
    ///
    /// ```
    /// use std::net::SocketAddr;
    /// use robotsgate::Robots;
    /// use tower::Layer;
    /// use tower::service_fn;
    ///
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let layer = Robots::builder().agent("ExampleBot").build()?.layer();
    /// let origin = service_fn(|_req: http::Request<String>| async {
    ///     Ok::<_, std::convert::Infallible>(http::Response::new(String::new()))
    /// });
    /// // Where a server accepts a connection from `client`:
    /// let client: SocketAddr = "192.0.2.7:50312".parse()?;
    /// let service = layer.layer(origin).with_client_addr(client);
    /// # let _ = service;
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// [`ClientAddr`]: super::ClientAddr
    pub fn with_client_addr(mut self, addr: SocketAddr) -> Self {
        self.client = Some(addr);
        self
    }
}

impl<S: fmt::Debug> fmt::Debug for RobotsService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsService").field("inner", &self.inner).finish_non_exhaustive()
    }
}

/// The response future of [`RobotsService`].
pub struct ResponseFuture<T, E> {
    inner: Pin<Box<dyn Future<Output = Result<T, E>> + Send>>,
}

impl<T, E> Future for ResponseFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ResponseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<S, B, ResBody> Service<Request<B>> for RobotsService<S>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
    ResBody: hyper::body::Body + Send + 'static,
{
    type Response = Response<RobotsBody<ResBody>>;
    type Error = BoxError;
    type Future = ResponseFuture<Self::Response, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The clone is not ready; the instance that was polled ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        // One look at the settings a request: the decision reads the same ones.
        let settings = shared.settings.load_full();
        if settings.mode == Mode::Off {
            return ResponseFuture {
                inner: Box::pin(async move {
                    let req = if shared.signers.is_some() {
                        let (mut parts, body) = req.into_parts();
                        shared.sign_undecided(&mut parts);
                        Request::from_parts(parts, body)
                    } else {
                        req
                    };
                    // What was paid is recorded in mode off too (no decision record to
                    // key it by: an id of its own), with an audit log.
                    let target =
                        shared.audit.as_ref().map(|_| (req.uri().clone(), req.headers().get(HOST).cloned()));
                    let mut res = inner.call(req).await.map_err(Into::into)?;
                    Refusal::disown(&mut res);
                    if let (Some((uri, host)), Some(p)) = (target, res.extensions().get::<Payment>()) {
                        shared.log_undecided_payment(&uri, host.as_ref(), p);
                    }
                    Ok(res.map(|b| RobotsBody::plain(Either::Left(b))))
                }),
            };
        }
        // What needs no waiting is done before the future is made: the request's head and
        // body are kept in it once, not also as the request they came in.
        let started = std::time::Instant::now();
        let client = self.client;
        let (mut parts, body) = req.into_parts();
        let head = parts.method == Method::HEAD;
        ResponseFuture {
            inner: Box::pin(async move {
                // The decision's locals end with this block: their room in the future is
                // free again while the origin is waited for.
                let (admitted, outcome, usage_id) = {
                    let mut logged = None;
                    // Boxed: this future and the decision's each fit the allocator's
                    // per-thread cache (up to 1 KiB), where one holding both would not.
                    let checked =
                        Box::pin(shared.check(&mut parts, settings, client, started, &mut logged)).await;
                    // An answer without a decision record gets a record of its own.
                    if let (Err(refusal), None) = (&checked, &logged) {
                        shared.log_refusal(&parts, client, refusal);
                    }
                    // The record id the response-usage record refers to (requests with a purpose).
                    let usage_id = match (&checked, &logged) {
                        (Ok(a), Some(id)) if a.decision.usage.is_some() => {
                            Some(AuditRequestId(id.as_str().into()))
                        }
                        _ => None,
                    };
                    // Once the decision is logged, so is what the client gets.
                    let outcome = match (&shared.audit, logged) {
                        (Some(audit), Some(id)) => Some(Outcome::new(audit.clone(), id, started)),
                        _ => None,
                    };
                    match checked {
                        Ok(admitted) => (admitted, outcome, usage_id),
                        Err(refusal) if refusal.is_outage() && !shared.answer_outages => {
                            if let Some(mut o) = outcome {
                                o.write(0, None, "error");
                            }
                            return Err(refusal.into());
                        }
                        Err(refusal) => {
                            return Ok(counted(refusal.into_response(head).map(Either::Right), outcome));
                        }
                    }
                };
                let decision = &admitted.decision;
                shared.identify(&mut parts);
                // With a purpose only: the response's usage headers are read below.
                // (The URL is written only when the response has such headers.)
                let usage = decision.usage.is_some().then(|| (parts.uri.clone(), usage_id));
                // An error here drops the outcome: no answer (`client-gone`... or
                // the caller's error: see Outcome).
                let mut res = match inner.call(Request::from_parts(parts, body)).await {
                    Ok(res) => res,
                    Err(e) => {
                        if let Some(mut o) = outcome {
                            o.write(0, None, "error");
                        }
                        return Err(e.into());
                    }
                };
                // An origin's own `x-robotsgate` must not pass for robotsgate's.
                Refusal::disown(&mut res);
                if let (Some(o), Some(p)) = (&outcome, res.extensions().get::<Payment>()) {
                    o.payment(decision.origin.to_string(), p);
                }
                shared.answered(admitted.ticket, &admitted.decision, admitted.decided, &res);
                if let Some((uri, id)) = usage {
                    let status = res.status().as_u16();
                    let url = || {
                        let path = uri.path_and_query().map_or("/", |p| p.as_str());
                        format!("{}{path}", decision.origin)
                    };
                    // Boxed: only requests made for a purpose come here, and its
                    // future would double the size of every request's.
                    match Box::pin(shared.response_usage(res.headers(), status, decision, id, url)).await {
                        Ok(Some(found)) => {
                            res.extensions_mut().insert(found);
                        }
                        Ok(None) => {}
                        // The origin's body is dropped unread.
                        Err(refusal) => {
                            return Ok(counted(refusal.into_response(head).map(Either::Right), outcome));
                        }
                    }
                }
                if shared.decision_in_response {
                    res.extensions_mut().insert(admitted.decision);
                }
                Ok(counted(res.map(Either::Left), outcome))
            }),
        }
    }
}
