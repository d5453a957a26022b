//! What the client finally got: the outcome record written when a request's answer is
//! over (its body sent to the end, the client gone, the origin failing mid-body, or a
//! tunnel closed), and [`RobotsBody`], the response body that counts the bytes for it.
//!
//! The decision record is written before the answer goes out (no answer before its
//! record); this one after it, keyed by the same `request_id` (docs/audit-log.md).

use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

use bytes::{Buf, Bytes};
use http::Response;
use http_body_util::{Either, Full};
use hyper::body::{Body, Frame, SizeHint};

use super::Tally;
use crate::audit::{AuditLog, OutcomeFacts, PaymentRecord};
use crate::ids::RequestId;
use crate::refusal::Refusal;

/// The record of `p`, for the request `request_id` to `origin`.
pub(super) fn payment_record(
    request_id: &str,
    origin: String,
    p: &crate::identity::httpsig::Payment,
) -> PaymentRecord {
    PaymentRecord {
        schema_version: 0,
        kind: "payment",
        time: String::new(),
        request_id: request_id.to_owned(),
        origin,
        payment: p.clone(),
    }
}

/// The outcome of one request whose decision was logged; written once, when it ends (or
/// when it is dropped: the client went away).
pub(super) struct Outcome {
    audit: AuditLog,
    id: RequestId,
    started: Instant,
    status: Option<u16>,
    answered_by: Option<&'static str>,
    refusal: Option<&'static str>,
    written: bool,
}

impl Outcome {
    pub(super) fn new(audit: AuditLog, id: RequestId, started: Instant) -> Outcome {
        Outcome { audit, id, started, status: None, answered_by: None, refusal: None, written: false }
    }

    /// Records the payment an origin asked for this request, and what came of it.
    pub(super) fn payment(&self, origin: String, p: &crate::identity::httpsig::Payment) {
        self.audit.log_payment(payment_record(self.id.as_str(), origin, p));
    }

    /// Notes the answer: its status, and whether robotsgate made it (and which kind).
    fn answer<B>(&mut self, res: &Response<B>) {
        self.status = Some(res.status().as_u16());
        match res.extensions().get::<Refusal>() {
            Some(r) => {
                self.answered_by = Some("robotsgate");
                self.refusal = Some(r.kind().as_str());
            }
            None => self.answered_by = Some("origin"),
        }
    }

    /// Writes the record: `bytes` to the client, `from_client` through a tunnel, `end`.
    pub(super) fn write(&mut self, bytes: u64, from_client: Option<u64>, end: &'static str) {
        if std::mem::replace(&mut self.written, true) {
            return;
        }
        self.audit.log_outcome(OutcomeFacts {
            request_id: self.id.as_str(),
            status: self.status,
            answered_by: self.answered_by,
            refusal: self.refusal,
            bytes,
            bytes_from_client: from_client,
            end,
            duration: self.started.elapsed(),
        });
    }
}

impl Drop for Outcome {
    fn drop(&mut self) {
        // No answer yet (the request's future was dropped), or an answer never finished.
        self.write(0, None, "client-gone");
    }
}

pin_project_lite::pin_project! {
    /// The response body of [`RobotsService`](super::RobotsService): the inner service's or
    /// robotsgate's own. With an audit log it counts the bytes it hands on and writes the
    /// request's outcome record when it ends or is dropped.
    pub struct RobotsBody<B> {
        #[pin]
        inner: Either<B, Full<Bytes>>,
        counted: Option<Counted>,
    }
}

/// The outcome of a body being sent, and the bytes so far.
struct Counted {
    outcome: Outcome,
    bytes: u64,
}

impl Drop for Counted {
    fn drop(&mut self) {
        // Dropped before its end: the client went away (or the connection closed).
        self.outcome.write(self.bytes, None, "client-gone");
    }
}

impl<B> RobotsBody<B> {
    /// The inner service's body, or robotsgate's own, uncounted.
    pub(super) fn plain(inner: Either<B, Full<Bytes>>) -> RobotsBody<B> {
        RobotsBody { inner, counted: None }
    }

    /// Whether this is robotsgate's own answer.
    pub fn is_own(&self) -> bool {
        matches!(self.inner, Either::Right(_))
    }

    /// Whether it writes an outcome record (an audit log is set and the decision was
    /// logged).
    pub fn is_counted(&self) -> bool {
        self.counted.is_some()
    }

    /// The body inside, when it is not counted (a counted body must be sent as itself).
    // `Err` hands the body back as it was: not an error to be kept small.
    #[allow(clippy::result_large_err)]
    pub fn into_inner(self) -> Result<Either<B, Full<Bytes>>, RobotsBody<B>> {
        match self.counted {
            None => Ok(self.inner),
            Some(_) => Err(self),
        }
    }
}

/// `res` with its body counted for `outcome`; an exchange that goes on after the response
/// (a [`Tally`] in its extensions) is reported when the tally closes instead.
pub(super) fn counted<B: Body>(
    res: Response<Either<B, Full<Bytes>>>,
    outcome: Option<Outcome>,
) -> Response<RobotsBody<B>> {
    let Some(mut outcome) = outcome else { return res.map(RobotsBody::plain) };
    outcome.answer(&res);
    if let Some(tally) = res.extensions().get::<Tally>() {
        tally.set_request_id(outcome.id.as_str());
        tally.when_over(move |t| match t.refused {
            // Refused after the response, as a tunnel the layer refuses after its `200`.
            Some((kind, status)) => {
                outcome.status = Some(status);
                outcome.answered_by = Some("robotsgate");
                outcome.refusal = Some(kind);
                outcome.write(t.to_client, Some(t.from_client), "client-gone");
            }
            None => outcome.write(t.to_client, Some(t.from_client), "closed"),
        });
        return res.map(RobotsBody::plain);
    }
    let empty = match res.body() {
        Either::Left(b) => b.is_end_stream(),
        Either::Right(b) => b.is_end_stream(),
    };
    if empty {
        // Nothing to send (HEAD, 204, 304, an empty body): the answer ends with its head,
        // and the server may never poll the body.
        outcome.write(0, None, "complete");
        return res.map(RobotsBody::plain);
    }
    res.map(|inner| RobotsBody { inner, counted: Some(Counted { outcome, bytes: 0 }) })
}

impl<B> Body for RobotsBody<B>
where
    B: Body<Data = Bytes>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Self::Data>, Self::Error>>> {
        let mut this = self.project();
        let polled = this.inner.as_mut().poll_frame(cx);
        if let Some(c) = this.counted.as_mut() {
            match &polled {
                Poll::Ready(Some(Ok(frame))) => {
                    if let Some(data) = frame.data_ref() {
                        c.bytes += data.remaining() as u64;
                    }
                    // Servers stop polling a body that says it is over after its last frame.
                    if this.inner.is_end_stream() {
                        c.outcome.write(c.bytes, None, "complete");
                    }
                }
                Poll::Ready(Some(Err(_))) => c.outcome.write(c.bytes, None, "origin-error"),
                Poll::Ready(None) => c.outcome.write(c.bytes, None, "complete"),
                Poll::Pending => {}
            }
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

impl<B> std::fmt::Debug for RobotsBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RobotsBody")
            .field("own", &self.is_own())
            .field("counted", &self.is_counted())
            .finish()
    }
}
