//! The kept upstream connection on the HTTP/1.1 fast path (`docs/http1-fast-path.md`,
//! step 1): driven by the request's own task, with no connection task, channel or
//! dispatcher of its own. The request head is written from the `http::Request`, the
//! response head is read into an `http::Response`, and the body ([`H1Body`]) reads on
//! from the connection. The body gives the connection back ([`PutBack`], the client
//! connection's `Sticky` slot) at its end, when the response allows that. What is on the wire is read by `robotsgate-h1`'s pure
//! codec; this module only moves bytes.
//!
//! Only requests that [`fits`] take it: GET and HEAD without a body. Everything else goes
//! to the pool (hyper), as before.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};
use std::time::Duration;

use bytes::{Buf, Bytes, BytesMut};
use http::{Method, Request, Response};
use hyper::body::{Body, Frame, SizeHint};
use robotsgate::net::{Connector, Pool, Stall, Stream};
use robotsgate::origin::Origin;
use robotsgate_h1::{
    ChunkedDecoder, Decoded, Framing, H1Error, encode_request_head, read_response_head, response_framing,
};
use tokio::io::AsyncWriteExt;

/// Bytes a response head may have: hyper's client allows as much (8 KiB + 100 × 4 KiB).
const MAX_HEAD: usize = 8192 + 4096 * 100;

/// Bytes a chunked body's trailer section may have (read and dropped).
const MAX_TRAILERS: usize = 16 * 1024;

/// Room made in the read buffer before each read.
const READ_SIZE: usize = 8192;

/// An idle HTTP/1.1 connection to an origin, with its buffers. Boxed once for the
/// connection's life: a stream (TLS state included) is large, and the connection moves on
/// every request (from its slot into the send, into the response body, and back), each
/// move a pointer's.
pub(crate) struct H1Conn(Box<Conn>);

struct Conn {
    io: Stream,
    read: BytesMut,
    write: Vec<u8>,
    /// The bound on a response body's silence (its timer kept for the connection's life).
    stall: Stall,
}

impl H1Conn {
    /// A connection for the fast path, whose response bodies may be silent for
    /// `read_timeout` at most; `None` for one through a forward proxy, which takes
    /// requests in absolute form (the fast path writes the origin form).
    pub(crate) fn new(io: Stream, read_timeout: Duration) -> Option<H1Conn> {
        if matches!(io, Stream::Proxied(_)) {
            return None;
        }
        let (read, write) =
            spare::take().unwrap_or_else(|| (BytesMut::with_capacity(READ_SIZE), Vec::with_capacity(1024)));
        Some(H1Conn(Box::new(Conn { io, read, write, stall: Stall::new(read_timeout) })))
    }

    /// Whether the connection has been closed by the origin, or has data on it, while it
    /// was idle: either way it cannot carry a request. Costs no system call unless the
    /// event loop has seen the connection readable since it was last read.
    fn stale(&mut self) -> bool {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        tokio_util::io::poll_read_buf(Pin::new(&mut self.0.io), &mut cx, &mut self.0.read).is_ready()
    }
}

impl H1Conn {
    /// The connection, for another HTTP/1.1 client to send on: `None` if the origin has
    /// closed it or sent something while it was idle.
    pub(crate) fn into_idle(mut self) -> Option<Stream> {
        if self.stale() || !self.0.read.is_empty() {
            return None;
        }
        let Conn { io, read, write, .. } = *self.0;
        spare::give(read, write);
        Some(io)
    }
}

pub(crate) use spare::shed_unused as shed_unused_spares;

/// The buffers of connections that went idle on this thread, for the next [`H1Conn`]s
/// made on it: a client that opens a connection for every request takes an idle upstream
/// connection each time (`take_idle`), and costs no new buffers for it.
mod spare {
    use bytes::BytesMut;

    use super::READ_SIZE;
    use crate::spares::Spares;

    /// The most buffer pairs a thread keeps (some 9 KiB each, 40 at most), as many as
    /// `h1_server`'s.
    pub(super) const KEPT: usize = 32;

    thread_local! {
        static SPARE: Spares<(BytesMut, Vec<u8>)> = const { Spares::new(KEPT) };
    }

    /// Drops this thread's pairs if no connection took or gave any since the last call.
    pub(crate) fn shed_unused() -> usize {
        Spares::shed_unused(&SPARE)
    }

    /// A pair of this thread's, empty, if it has one.
    pub(super) fn take() -> Option<(BytesMut, Vec<u8>)> {
        Spares::take(&SPARE)
    }

    /// Keeps `read` and `write` for the next connection, unless the read buffer is still
    /// shared (a response's bytes held elsewhere) or either has grown past the usual.
    pub(super) fn give(mut read: BytesMut, mut write: Vec<u8>) {
        read.clear();
        if !read.try_reclaim(READ_SIZE) || read.capacity() > 4 * READ_SIZE || write.capacity() > READ_SIZE {
            return;
        }
        write.clear();
        Spares::give(&SPARE, (read, write));
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        fn spares() -> usize {
            Spares::count(&SPARE)
        }

        /// An idle connection's buffers, emptied, are the next connection's; a read buffer
        /// still shared, or buffers grown past the bounds, are let go; at most KEPT.
        #[test]
        fn idle_connections_buffers_serve_the_next_ones_within_bounds() {
            let mut read = BytesMut::with_capacity(READ_SIZE);
            read.extend_from_slice(b"HTTP/1.1 200 OK\r\n\r\nbody");
            drop(read.split_to(19));
            let mut write = Vec::with_capacity(1024);
            write.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
            let (r, w) = (read.as_ptr(), write.as_ptr());
            give(read, write);
            let (read, write) = take().expect("kept");
            assert!(read.is_empty() && write.is_empty());
            assert_eq!((read.as_ptr(), write.as_ptr()), (r.wrapping_sub(19), w));
            assert!(read.capacity() >= READ_SIZE);

            let mut read = BytesMut::with_capacity(READ_SIZE);
            read.extend_from_slice(b"body");
            let held = read.split_to(2).freeze();
            give(read, Vec::new());
            assert_eq!(spares(), 0, "a part of the read buffer is held");
            drop(held);
            give(BytesMut::with_capacity(8 * READ_SIZE), Vec::new());
            give(BytesMut::with_capacity(READ_SIZE), Vec::with_capacity(2 * READ_SIZE));
            assert_eq!(spares(), 0, "grown past the bounds");

            for _ in 0..KEPT + 3 {
                give(BytesMut::with_capacity(READ_SIZE), Vec::new());
            }
            assert_eq!(spares(), KEPT);
        }
    }
}

/// An idle connection to the origin of `uri` that `pool` holds as it is (a client
/// connection kept it and left, [`Pool::adopt`]), taken out for a client connection to keep
/// in turn: no new connection to the origin, and the fast path from the first request on.
pub(crate) fn take_idle(pool: &Pool, uri: &http::Uri) -> Option<H1Conn> {
    let origin = Origin::from_uri(uri).ok()?;
    H1Conn::new(pool.take_idle_stream(&origin)?, pool.config().read_timeout)
}

/// The origin of `uri` when a request to it would make `pool` open a new connection that
/// can be a fast-path one instead: plain http, reached directly (a forward proxy takes
/// requests in absolute form, see [`H1Conn::new`]), and `pool` has no connection to it.
pub(crate) fn opens_new(pool: &Pool, connector: &Connector, uri: &http::Uri) -> Option<Origin> {
    if uri.scheme() != Some(&http::uri::Scheme::HTTP) {
        return None;
    }
    let origin = Origin::from_uri(uri).ok()?;
    let direct = connector.proxies().proxy_for(&origin).is_none();
    (direct && !pool.has_connection(&origin)).then_some(origin)
}

/// Whether `req` can take the fast path: GET or HEAD without a body. Its head is the one
/// made for the origin: hop-by-hop fields (`Transfer-Encoding`, `Upgrade`, ...) are gone,
/// and a `Content-Length` left beside an empty body says 0.
pub(crate) fn fits<B: Body>(req: &Request<B>) -> bool {
    (req.method() == Method::GET || req.method() == Method::HEAD) && req.body().is_end_stream()
}

/// What [`send`] came to.
pub(crate) enum H1Sent<B, P> {
    /// The origin's response; its body reads on from the connection.
    Answered(Response<H1Body<P>>),
    /// Not a byte of a response came before the connection failed or was closed (an
    /// origin closes idle connections): the request, given back, can be sent elsewhere.
    /// (GET and HEAD are idempotent: sending one again is allowed, RFC 9110 §9.2.2, even
    /// if the origin had received it before it closed.)
    NotAnswered(Request<B>),
    /// The exchange failed once the origin had begun to answer.
    Failed(H1Failure),
}

/// Why an exchange on the fast path failed.
#[derive(Debug, thiserror::Error)]
pub(crate) enum H1Failure {
    /// Reading from or writing to the origin.
    #[error("the connection to the origin failed: {0}")]
    Io(#[from] io::Error),
    /// What the origin sent is not a response that can be read.
    #[error(transparent)]
    Protocol(#[from] H1Error),
    /// The origin closed the connection before the end of its response head.
    #[error("the origin closed the connection in the middle of its response head")]
    ClosedInHead,
    /// The origin closed the connection before the end of the body it announced.
    #[error("the origin closed the connection before the end of its response body")]
    ClosedInBody,
    /// The origin sent nothing more of its body for this long (`upstream_read_timeout`).
    #[error("the origin sent nothing more of its response body for {0:?}")]
    Stalled(Duration),
}

/// Where a connection goes once its response has been read to the end and it can carry
/// another request.
pub(crate) trait PutBack: Send + Sync + Unpin + 'static {
    /// Takes `conn` back, idle.
    fn put_back(self, conn: H1Conn);
}

/// Sends `req` (a request that [`fits`]; its target written in origin form) on
/// `conn` and reads the response head. The body, once read to its end, gives the
/// connection to `back` if the response lets it be used again.
pub(crate) async fn send<B: Body, P: PutBack>(
    mut conn: H1Conn,
    mut req: Request<B>,
    back: Option<P>,
) -> H1Sent<B, P> {
    if conn.stale() {
        return H1Sent::NotAnswered(req);
    }
    let head_request = req.method() == Method::HEAD;
    conn.0.write.clear();
    // The last body's wait, if it ended in one, is not this body's.
    conn.0.stall.moved();
    // Origin form (RFC 9112 §3.2.1): `http://host?q` has no path, and goes as `/?q`.
    let pq = req.uri().path_and_query().map_or("", |p| p.as_str());
    let slashed;
    let target = if pq.starts_with('/') {
        pq
    } else {
        slashed = format!("/{pq}");
        slashed.as_str()
    };
    encode_request_head(req.method(), target, req.headers(), &mut conn.0.write);
    // A connection the origin has closed while it was idle fails here or answers nothing.
    if conn.0.io.write_all(&conn.0.write).await.is_err() || conn.0.io.flush().await.is_err() {
        return H1Sent::NotAnswered(req);
    }
    let mut received = false;
    loop {
        // The response's fields go into the request's map (its allocation reused): once a
        // head is whole, the request is not needed again.
        match read_response_head(&mut conn.0.read, MAX_HEAD, req.headers_mut()) {
            Ok(Some(head))
                if head.status.is_informational() && head.status != http::StatusCode::SWITCHING_PROTOCOLS =>
            {
                // 100 Continue, 103 Early Hints: the answer follows.
                continue;
            }
            Ok(Some(head)) => {
                let headers = std::mem::take(req.headers_mut());
                let framing = match response_framing(head_request, &head, &headers) {
                    Ok(f) => f,
                    Err(e) => return H1Sent::Failed(e.into()),
                };
                let state = match framing.framing {
                    Framing::Empty => State::Length(0),
                    Framing::Length(n) => State::Length(n),
                    Framing::Chunked => State::Chunked(ChunkedDecoder::new(MAX_TRAILERS)),
                    Framing::UntilClose => State::UntilClose,
                };
                let mut res =
                    Response::new(H1Body { conn: Some(conn), state, reusable: framing.reusable, back });
                *res.status_mut() = head.status;
                *res.version_mut() = head.version;
                *res.headers_mut() = headers;
                if let Some(reason) = head.reason
                    && let Ok(reason) = hyper::ext::ReasonPhrase::try_from(Bytes::from(reason))
                {
                    res.extensions_mut().insert(reason);
                }
                res.body_mut().settle();
                return H1Sent::Answered(res);
            }
            Ok(None) => {}
            Err(e) => return H1Sent::Failed(e.into()),
        }
        conn.0.read.reserve(READ_SIZE);
        match tokio::io::AsyncReadExt::read_buf(&mut conn.0.io, &mut conn.0.read).await {
            Ok(0) if !received => return H1Sent::NotAnswered(req),
            Ok(0) => return H1Sent::Failed(H1Failure::ClosedInHead),
            Ok(_) => received = true,
            Err(_) if !received => return H1Sent::NotAnswered(req),
            Err(e) => return H1Sent::Failed(e.into()),
        }
    }
}

/// A response body read from an [`H1Conn`].
pub(crate) struct H1Body<P> {
    /// `None` once the body has ended (the connection given back or closed).
    conn: Option<H1Conn>,
    state: State,
    reusable: bool,
    back: Option<P>,
}

enum State {
    /// This many bytes left.
    Length(u64),
    Chunked(ChunkedDecoder),
    UntilClose,
    Done,
}

impl<P: PutBack> H1Body<P> {
    /// Ends the body at once if it has nothing to read (no body, or all of it arrived with
    /// the head and it is empty): the connection goes back before the response is passed on.
    fn settle(&mut self) {
        if matches!(self.state, State::Length(0)) {
            self.finish();
        }
    }

    /// The body has been read to its end: the connection goes back to its slot if the
    /// response allows it and the origin sent nothing more, else it is closed.
    fn finish(&mut self) {
        self.state = State::Done;
        let conn = self.conn.take();
        if let (true, Some(conn), Some(back)) = (self.reusable, conn, self.back.take())
            && conn.0.read.is_empty()
        {
            back.put_back(conn);
        }
    }
}

impl<P: PutBack> Body for H1Body<P> {
    type Data = Bytes;
    type Error = H1Failure;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, H1Failure>>> {
        let this = self.get_mut();
        let mut polled = this.poll_data(cx);
        match &polled {
            Poll::Pending => {
                if let Some(conn) = this.conn.as_mut()
                    && let Poll::Ready(stalled) = conn.0.stall.wait(cx)
                {
                    polled = Poll::Ready(Some(Err(H1Failure::Stalled(stalled.0))));
                }
            }
            Poll::Ready(_) => {
                if let Some(conn) = this.conn.as_mut() {
                    conn.0.stall.moved();
                }
            }
        }
        if let Poll::Ready(Some(Err(_))) = polled {
            // Where the next response would start is unknown: the connection is closed.
            this.conn = None;
            this.state = State::Done;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        matches!(self.state, State::Done | State::Length(0))
    }

    fn size_hint(&self) -> SizeHint {
        match self.state {
            State::Length(n) => SizeHint::with_exact(n),
            State::Done => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}

impl<P: PutBack> H1Body<P> {
    fn poll_data(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, H1Failure>>> {
        let this = self;
        loop {
            let Some(conn) = this.conn.as_mut() else { return Poll::Ready(None) };
            match &mut this.state {
                State::Done => return Poll::Ready(None),
                State::Length(0) => {
                    this.finish();
                    return Poll::Ready(None);
                }
                State::Length(left) => {
                    if !conn.0.read.is_empty() {
                        let n = usize::try_from(*left).unwrap_or(usize::MAX).min(conn.0.read.len());
                        let data = take(&mut conn.0.read, n);
                        *left -= n as u64;
                        if *left == 0 {
                            this.finish();
                        }
                        return Poll::Ready(Some(Ok(Frame::data(data))));
                    }
                    let room = usize::try_from(*left).unwrap_or(usize::MAX).clamp(READ_SIZE, 64 * 1024);
                    if ready!(read(conn, cx, room))? == 0 {
                        return Poll::Ready(Some(Err(H1Failure::ClosedInBody)));
                    }
                }
                State::Chunked(decoder) => {
                    if !conn.0.read.is_empty() {
                        let (used, what) = decoder.decode(&conn.0.read)?;
                        match what {
                            Decoded::Data(range) => {
                                conn.0.read.advance(range.start);
                                let data = take(&mut conn.0.read, range.len());
                                return Poll::Ready(Some(Ok(Frame::data(data))));
                            }
                            Decoded::More => conn.0.read.advance(used),
                            Decoded::End => {
                                conn.0.read.advance(used);
                                this.finish();
                                return Poll::Ready(None);
                            }
                        }
                        continue;
                    }
                    if ready!(read(conn, cx, READ_SIZE))? == 0 {
                        return Poll::Ready(Some(Err(H1Failure::ClosedInBody)));
                    }
                }
                State::UntilClose => {
                    if !conn.0.read.is_empty() {
                        let n = conn.0.read.len();
                        return Poll::Ready(Some(Ok(Frame::data(take(&mut conn.0.read, n)))));
                    }
                    if ready!(read(conn, cx, 64 * 1024))? == 0 {
                        this.finish();
                        return Poll::Ready(None);
                    }
                }
            }
        }
    }
}

/// The first `n` bytes of `read`, without a copy. They share the buffer until they have
/// been written to the client, which is before the client can send the next request, so
/// the buffer is the connection's alone again (and reused) by the next response.
fn take(read: &mut BytesMut, n: usize) -> Bytes {
    read.split_to(n).freeze()
}

/// Reads more from `conn` into its buffer, with `room` bytes free.
fn read(conn: &mut H1Conn, cx: &mut Context<'_>, room: usize) -> Poll<Result<usize, H1Failure>> {
    conn.0.read.reserve(room);
    let n = ready!(tokio_util::io::poll_read_buf(Pin::new(&mut conn.0.io), cx, &mut conn.0.read))?;
    Poll::Ready(Ok(n))
}
