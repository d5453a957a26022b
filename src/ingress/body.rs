//! The response body of [`IngressService`](super::IngressService): the inner service's, or
//! robotsgate's own short answer.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

pin_project! {
    /// The inner service's body, or robotsgate's own (a refusal, or the robots.txt file the
    /// layer serves itself).
    #[derive(Debug)]
    pub struct IngressBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = Proj]
    #[derive(Debug)]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Own { body: Option<Bytes> },
    }
}

impl<B> IngressBody<B> {
    /// A body of `bytes` that robotsgate makes.
    pub fn own(bytes: impl Into<Bytes>) -> Self {
        let b = bytes.into();
        IngressBody { kind: Kind::Own { body: (!b.is_empty()).then_some(b) } }
    }

    /// The inner service's body.
    pub fn inner(body: B) -> Self {
        IngressBody { kind: Kind::Inner { body } }
    }
}

impl<B> Body for IngressBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match self.project().kind.project() {
            Proj::Inner { body } => body.poll_frame(cx),
            Proj::Own { body } => Poll::Ready(body.take().map(|b| Ok(Frame::data(b)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Own { body } => body.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Own { body } => SizeHint::with_exact(body.as_ref().map_or(0, |b| b.len() as u64)),
        }
    }
}
