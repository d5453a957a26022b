//! [`Answer`]: the future of a forwarded request on the common path (not a tunnel, not a
//! WebSocket), written out by hand.
//!
//! Every request's future is boxed once. As `async` blocks, the send on the kept
//! connection, the pool's fallback and the upstream timeout nested three deep, and each
//! level kept its own copy of what it was given (the request, the future it awaited): the
//! box took over 4 KiB, which the allocator serves from its slow path, on every request.
//! Here each piece is held once, in place.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use http::{Request, Response};
use http_body_util::BodyExt;
use pin_project_lite::pin_project;
use robotsgate::net::PoolRequestBody as ClientBody;
use robotsgate::{Refusal, RefusalKind};

use super::errors::{UpstreamError, client_body_error, upstream_error, upstream_error_class};
use super::h1::H1Conn;
use super::h1::{self, H1Sent};
use super::headers::{append_via, strip_hop_by_hop};
use super::sticky::{Back, Opening, Route, Sticky, Taken};
use super::{Forwarder, ProxyBody, boxed, pay};
use robotsgate::net::PoolError;
use robotsgate::origin::Origin;

type Boxed<T> = Pin<Box<dyn Future<Output = T> + Send>>;

pin_project! {
    /// Sends the request on the client connection's kept connection (or through the pool),
    /// bounded by the upstream timeout, then makes the response the client gets.
    pub(super) struct Answer<K> {
        #[pin]
        deadline: tokio::time::Sleep,
        #[pin]
        sending: Sending<K>,
        forwarder: Forwarder,
        head: bool,
        has_body: bool,
        // With `[pay]` only: the request, for a retry that pays.
        kept: Option<Box<pay::Kept>>,
    }
}

pin_project! {
    #[project = SendingProj]
    enum Sending<K> {
        // On the kept connection, on the fast path (`h1`).
        Kept { #[pin] sent: K },
        Pool { sent: Boxed<Result<Response<ProxyBody>, UpstreamError>> },
        // A `402` being answered by paying (not bounded by the upstream timeout).
        Priced { answer: Boxed<Response<ProxyBody>> },
        Done,
    }
}

impl Forwarder {
    /// The [`Answer`] for `upstream` (its head made ready for the origin), sent on the
    /// connection `sticky` keeps when it has one for this origin.
    pub(super) fn answer(
        &self,
        upstream: Request<ClientBody>,
        sticky: Option<Sticky>,
        head: bool,
        has_body: bool,
        kept: Option<Box<pay::Kept>>,
    ) -> Boxed<Response<ProxyBody>> {
        let deadline = tokio::time::sleep(self.inner.upstream_timeout);
        let forwarder = self.clone();
        let route = match &sticky {
            Some(s) if h1::fits(&upstream) => self.take_kept(s, upstream.uri()),
            _ => Route::Pool,
        };
        match (route, sticky) {
            (Route::Kept(Taken { key, conn }), Some(sticky)) => {
                let sent = h1::send(conn, upstream, Some(Back { sticky, key }));
                Box::pin(Answer {
                    deadline,
                    sending: Sending::Kept { sent },
                    forwarder,
                    head,
                    has_body,
                    kept,
                })
            }
            (route, sticky) => {
                let sent = match (route, sticky) {
                    (Route::Open { key, origin, opening }, Some(sticky)) => {
                        self.open_kept_now(upstream, Back { sticky, key }, origin, opening)
                    }
                    _ => self.pooled(upstream),
                };
                // One type for both: the kept connection's send is never polled here.
                let sending: Sending<std::future::Pending<H1Sent<ClientBody, Back>>> = Sending::Pool { sent };
                Box::pin(Answer { deadline, sending, forwarder, head, has_body, kept })
            }
        }
    }

    /// Opens the connection `back` keeps for `origin` and sends `req` on it (the pool has
    /// no connection to `origin`: it would open one too). When it cannot be made, the
    /// client gets the reason, as from the pool.
    fn open_kept_now(
        &self,
        req: Request<ClientBody>,
        back: Back,
        origin: Origin,
        opening: Opening,
    ) -> Boxed<Result<Response<ProxyBody>, UpstreamError>> {
        let this = self.clone();
        Box::pin(async move {
            let connected = this.inner.sticky_connector.connect(&origin).await;
            drop(opening);
            let stream = connected.map_err(|e| UpstreamError::Pool(PoolError::Connect(e)))?;
            let read_timeout = this.inner.pool.config().read_timeout;
            let Some(conn) = H1Conn::new(stream, read_timeout) else { return this.pooled(req).await };
            match kept_done(h1::send(conn, req, Some(back)).await) {
                KeptDone::Answered(sent) => sent,
                // A new connection closed before it answered: the pool tries once more.
                KeptDone::Pool(req) => this.pooled(req).await,
            }
        })
    }

    /// Sends `req` through the pool.
    fn pooled(&self, req: Request<ClientBody>) -> Boxed<Result<Response<ProxyBody>, UpstreamError>> {
        let pool = self.inner.pool.clone();
        Box::pin(async move {
            match pool.send(req).await {
                Ok(res) => Ok(res.map(|b| b.map_err(Into::into).boxed())),
                Err(e) => Err(UpstreamError::Pool(e)),
            }
        })
    }

    /// The response the client gets for what the origin answered (or why it did not).
    fn respond(&self, sent: Result<Response<ProxyBody>, UpstreamError>, head: bool) -> Response<ProxyBody> {
        match sent {
            Err(UpstreamError::Pool(e)) => {
                if let Some(refusal) = client_body_error(&e) {
                    return boxed(refusal.into_response(head));
                }
                self.upstream_failed(upstream_error_class(&e));
                boxed(upstream_error(e).into_response(head))
            }
            Err(UpstreamError::Kept(e)) => {
                self.upstream_failed("protocol");
                boxed(Refusal::upstream_failed(&e).into_response(head))
            }
            Ok(res) => {
                // A WebSocket opening goes by `upgrade`, and other upgrades are not asked
                // for (`Upgrade` is removed as hop-by-hop): a 101 here switches to a
                // protocol the client never asked for.
                if res.status() == http::StatusCode::SWITCHING_PROTOCOLS {
                    self.upstream_failed("protocol");
                    let why = "the origin switched protocols (101) for a request that asked for no upgrade";
                    return boxed(
                        Refusal::new(robotsgate::RefusalKind::UpstreamError, why).into_response(head),
                    );
                }
                if let Err(e) = robotsgate_h1::check_bodiless_length(head, res.status(), res.headers()) {
                    self.upstream_failed("protocol");
                    return boxed(Refusal::upstream_failed(&e).into_response(head));
                }
                let (mut parts, body) = res.into_parts();
                strip_hop_by_hop(&mut parts.headers);
                append_via(&mut parts.headers, &self.inner.via);
                // The proxy speaks HTTP/1.1 to its clients whatever the origin spoke.
                parts.version = http::Version::HTTP_11;
                Response::from_parts(parts, body)
            }
        }
    }

    /// The answer when the origin did not answer within the upstream timeout.
    fn timed_out(&self, head: bool) -> Response<ProxyBody> {
        self.upstream_failed("timeout");
        let why = format!("the origin did not answer within {:?}", self.inner.upstream_timeout);
        boxed(Refusal::new(RefusalKind::UpstreamTimeout, why).into_response(head))
    }
}

impl<K> Future for Answer<K>
where
    K: Future<Output = H1Sent<ClientBody, Back>>,
{
    type Output = Response<ProxyBody>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Response<ProxyBody>> {
        let mut this = self.project();
        loop {
            let sent = match this.sending.as_mut().project() {
                SendingProj::Priced { answer } => {
                    let res = ready!(answer.as_mut().poll(cx));
                    this.sending.set(Sending::Done);
                    return Poll::Ready(res);
                }
                // Polled again after its answer (a future's caller must not): nothing more.
                SendingProj::Done => return Poll::Pending,
                SendingProj::Kept { sent } => match sent.poll(cx) {
                    Poll::Ready(sent) => Some(kept_done(sent)),
                    Poll::Pending => None,
                },
                SendingProj::Pool { sent } => match sent.as_mut().poll(cx) {
                    Poll::Ready(sent) => Some(KeptDone::Answered(sent)),
                    Poll::Pending => None,
                },
            };
            let sent = match sent {
                Some(KeptDone::Answered(sent)) => sent,
                // Nothing came back on the kept connection (closed while idle): through the pool.
                Some(KeptDone::Pool(req)) => {
                    let sent = this.forwarder.pooled(req);
                    this.sending.set(Sending::Pool { sent });
                    continue;
                }
                None => {
                    ready!(this.deadline.as_mut().poll(cx));
                    this.sending.set(Sending::Done);
                    return Poll::Ready(this.forwarder.timed_out(*this.head));
                }
            };
            let res = this.forwarder.respond(sent, *this.head);
            // Looked for in every response: by a name made once, not parsed from the
            // string each time (some 200 instructions a request, callgrind).
            static CRAWLER_ERROR: http::HeaderName =
                http::HeaderName::from_static(robotsgate::identity::httpsig::CRAWLER_ERROR);
            if res.status() == http::StatusCode::PAYMENT_REQUIRED
                || res.headers().contains_key(&CRAWLER_ERROR)
            {
                let (forwarder, kept, has_body) = (this.forwarder.clone(), this.kept.take(), *this.has_body);
                let answer = Box::pin(async move { forwarder.priced(res, kept.map(|k| *k), has_body).await });
                this.sending.set(Sending::Priced { answer });
                continue;
            }
            this.sending.set(Sending::Done);
            return Poll::Ready(res);
        }
    }
}

/// What a send on a kept connection came to.
fn kept_done(sent: H1Sent<ClientBody, Back>) -> KeptDone {
    match sent {
        H1Sent::Answered(res) => KeptDone::Answered(Ok(res.map(|b| b.map_err(Into::into).boxed()))),
        H1Sent::NotAnswered(req) => KeptDone::Pool(req),
        H1Sent::Failed(e) => KeptDone::Answered(Err(UpstreamError::Kept(e))),
    }
}

/// What a send came to.
enum KeptDone {
    /// The origin's answer, or why there is none.
    Answered(Result<Response<ProxyBody>, UpstreamError>),
    /// Not sent on the kept connection: the pool is to send it.
    Pool(Request<ClientBody>),
}
