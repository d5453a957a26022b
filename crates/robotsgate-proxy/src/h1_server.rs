//! The client side of the HTTP/1.1 fast path (`docs/http1-fast-path.md`, step 2): a
//! client connection's (plain TCP or TLS) requests of the common shape (HTTP/1.1 `GET` and `HEAD` without a
//! body, an upgrade or an expectation; `robotsgate_h1::read_request_head` says which) are
//! read and answered here; at the first request of any other shape the connection, with
//! the bytes read so far, is handed back to the caller for hyper to serve from there on.
//!
//! Both ways build the same `http::Request` for the same service, and the response head is
//! written as hyper writes it (`robotsgate_h1::encode_response_head`): fields, framing,
//! `Date`, `Connection: close` when the connection ends. As with hyper:
//! - the wait for the next head is bounded by the header read timeout (from the end of the
//!   previous response, so an idle connection is closed after it too);
//! - a client that closes its connection while its request is answered drops the request
//!   (its future is dropped);
//! - once the stop token is cancelled, an idle connection is closed and a busy one closes
//!   after its response (`Connection: close`).

use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, SystemTime};

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, Method, Request, Response, Version};
use http_body_util::{BodyExt as _, Either, Empty};
use hyper::body::Body;
use robotsgate::net::PoolRequestBody;
use robotsgate_h1::{
    BodySize, Delimited, RequestRead, ResponseFraming, ResponseParts, encode_response_head, read_request_head,
};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio_util::sync::CancellationToken;

use crate::prefixed::Prefixed;
use crate::spares::Spares;

/// Bytes of response gathered before they are written (a head and a small body go out in
/// one write); a larger piece of body is written as it is. It bounds the write buffer each
/// connection keeps.
const GATHER: usize = 16 * 1024;
/// Free space the read buffer is given before each read.
const READ_SPACE: usize = 8 * 1024;

/// How the fast path reads requests.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// From the end of a response (or the connection's start) to the end of the next head.
    pub(crate) header_read_timeout: Duration,
    /// A longer head is handed to hyper (which answers it as it does).
    pub(crate) max_header_bytes: usize,
}

/// How [`serve`] ended.
pub(crate) enum Served<IO> {
    /// The connection is done (closed by either side, timed out, stopped, or broken).
    Done,
    /// A request the fast path does not take: hyper serves the connection from here, the
    /// bytes already read first.
    HandOver(Prefixed<IO>),
}

/// Serves `io`'s requests with `call` while they have the fast path's shape (see the
/// module), with `kit`'s buffers.
pub(crate) async fn serve<IO, C, F, B>(
    mut io: IO,
    limits: Limits,
    stop: &CancellationToken,
    kit: &mut Kit,
    mut call: C,
) -> Served<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    C: FnMut(Request<PoolRequestBody>) -> F,
    F: Future<Output = Response<B>>,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let Buffers { read, write, headers } = &mut kit.0;
    let deadline = tokio::time::sleep(limits.header_read_timeout);
    tokio::pin!(deadline);
    loop {
        deadline.as_mut().reset(tokio::time::Instant::now() + limits.header_read_timeout);
        // Bytes at the front of `read` known to hold no end of a head: a head that comes a
        // byte at a time is searched once, not once a byte.
        let mut searched = 0;
        let head = loop {
            match read_request_head(read, searched, limits.max_header_bytes, headers) {
                RequestRead::Fast(head) => break head,
                RequestRead::Other => {
                    tracing::debug!(
                        "a request the fast path does not take: the connection goes on with hyper"
                    );
                    return Served::HandOver(Prefixed { prefix: std::mem::take(read).freeze(), inner: io });
                }
                RequestRead::Partial => {}
            }
            searched = read.len();
            make_room(read);
            let idle = read.is_empty();
            tokio::select! {
                biased;
                r = io.read_buf(read) => match r {
                    Ok(0) | Err(_) => return Served::Done,
                    Ok(_) => {}
                },
                () = &mut deadline => {
                    tracing::debug!("no whole request head within the header read timeout: closed");
                    return Served::Done;
                }
                () = stop.cancelled(), if idle => return Served::Done,
            }
        };
        let head_request = head.method == Method::HEAD;
        let mut req = Request::new(Either::Right(Empty::new()));
        *req.method_mut() = head.method;
        *req.uri_mut() = head.uri;
        *req.version_mut() = Version::HTTP_11;
        *req.headers_mut() = std::mem::take(headers);
        // Pinned here, where it is made: not moved again into the wait's own state.
        let answer = call(req);
        tokio::pin!(answer);
        let Some(res) = unless_gone(&mut io, read, answer).await else {
            return Served::Done;
        };
        let keep_alive = !head.close && !stop.is_cancelled();
        match respond(&mut io, read, write, headers, head_request, keep_alive, res).await {
            Ok(true) => {}
            Ok(false) => {
                let _ = io.shutdown().await;
                return Served::Done;
            }
            Err(()) => return Served::Done,
        }
    }
}

/// The most fields a map kept for the next request may have room for: a map grown for an
/// unusual message is not held for the life of the connection.
const MAX_KEPT_FIELDS: usize = 2 * robotsgate_h1::MAX_HEADERS;

/// Keeps `map`, emptied, in `spare` for the next request's fields: the one allocation of a
/// request's and its response's fields serves the connection's next requests too.
fn keep_map(spare: &mut HeaderMap, mut map: HeaderMap) {
    if map.capacity() <= MAX_KEPT_FIELDS {
        // Emptied at once: its values hold parts of the upstream's read buffer.
        map.clear();
        *spare = map;
    }
}

/// What the fast path allocates for a client connection: its read and write buffers and
/// the map its requests' fields are read into.
pub(crate) struct Buffers {
    read: BytesMut,
    write: Vec<u8>,
    headers: HeaderMap,
}

/// The most [`Buffers`] a thread keeps for its next client connections (some 15 KiB
/// each, 70 at most): as many as a burst of connections at c32 ends in one turn of the
/// event loop (with 16, some 40% of the connections of a c32 run found none).
const KEPT_BUFFERS: usize = 32;

thread_local! {
    /// Buffers of client connections that ended on this thread, for the next ones.
    static SPARE_BUFFERS: Spares<Buffers> = const { Spares::new(KEPT_BUFFERS) };
}

/// A client connection's [`Buffers`], taken from its thread's spares or made, and given
/// back when the kit is dropped: a client that opens a connection for every request (a
/// `curl` in a loop) costs no new buffers. Buffers still shared (bytes of a request held
/// elsewhere), or grown past what a connection usually needs, are let go instead. The
/// caller takes the kit before whatever holds parts of its requests (the connection's
/// service, whose kept connection is keyed by a request's authority): dropped after it,
/// the read buffer is the kit's alone again.
pub(crate) struct Kit(Buffers);

impl Kit {
    /// Drops this thread's spare buffers if no connection took or gave any since the last
    /// call (`memory::shed_spares_when_quiet`); how many.
    pub(crate) fn shed_unused() -> usize {
        Spares::shed_unused(&SPARE_BUFFERS)
    }

    /// How many this thread keeps.
    #[cfg(test)]
    pub(crate) fn spares() -> usize {
        Spares::count(&SPARE_BUFFERS)
    }

    /// Spare buffers of this thread's, or new ones.
    pub(crate) fn take() -> Kit {
        Kit(Spares::take(&SPARE_BUFFERS).unwrap_or_else(|| Buffers {
            read: BytesMut::with_capacity(READ_SPACE),
            write: Vec::with_capacity(4096),
            headers: HeaderMap::new(),
        }))
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        let Buffers { read, write, headers } = &mut self.0;
        // The map first: its values may hold parts of the read buffer.
        headers.clear();
        write.clear();
        read.clear();
        // `try_reclaim`: the whole allocation again, if nothing else holds a part of it.
        if !read.try_reclaim(READ_SPACE) || read.capacity() > 4 * READ_SPACE {
            return;
        }
        if write.capacity() > 2 * GATHER || headers.capacity() > MAX_KEPT_FIELDS {
            return;
        }
        let buffers = Buffers {
            read: std::mem::take(read),
            write: std::mem::take(write),
            headers: std::mem::take(headers),
        };
        Spares::give(&SPARE_BUFFERS, buffers);
    }
}

/// Gives `read` room for the next read when little is left.
fn make_room(read: &mut BytesMut) {
    if read.capacity() - read.len() < READ_SPACE / 2 {
        read.reserve(READ_SPACE);
    }
}

/// `fut`'s output, or `None` if the client closes its connection first. While `read` is
/// empty the connection is read (bytes of a next request are kept for it); once it is not,
/// as hyper, no more is read until the next head is wanted.
async fn unless_gone<IO, F>(io: &mut IO, read: &mut BytesMut, mut fut: Pin<&mut F>) -> Option<F::Output>
where
    IO: AsyncRead + Unpin,
    F: Future,
{
    loop {
        make_room(read);
        let watch = read.is_empty();
        tokio::select! {
            biased;
            out = fut.as_mut() => return Some(out),
            r = io.read_buf(read), if watch => match r {
                Ok(0) | Err(_) => return None,
                Ok(_) => {}
            },
        }
    }
}

/// Writes `res` (to a HEAD request or not). `Ok(true)`: the connection can carry the next
/// request; `Ok(false)`: it is to be closed; `Err`: it broke. Once the head is written, the
/// response's map, emptied, goes to `spare`: the next request's fields are read into it.
async fn respond<IO, B>(
    io: &mut IO,
    read: &mut BytesMut,
    write: &mut Vec<u8>,
    spare: &mut HeaderMap,
    head_request: bool,
    keep_alive: bool,
    res: Response<B>,
) -> Result<bool, ()>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let (parts, mut body) = res.into_parts();
    let size = if body.is_end_stream() {
        BodySize::Empty
    } else {
        body.size_hint().exact().map_or(BodySize::Unknown, BodySize::Known)
    };
    let reason = parts.extensions.get::<hyper::ext::ReasonPhrase>().map(|r| r.as_bytes());
    let head = ResponseParts {
        status: parts.status,
        version: parts.version,
        reason,
        headers: &parts.headers,
        body: size,
    };
    write.clear();
    let ResponseFraming { delimited, last } =
        match encode_response_head(head_request, &head, keep_alive, &date(), write) {
            Ok(f) => f,
            Err(e) => {
                tracing::warn!(error = %e, "a response that cannot be written: connection closed");
                return Err(());
            }
        };
    keep_map(spare, parts.headers);
    let mut left = match delimited {
        Delimited::Length(0) => {
            io.write_all(write).await.map_err(drop)?;
            io.flush().await.map_err(drop)?;
            return Ok(!last);
        }
        Delimited::Length(n) => Some(n),
        Delimited::Chunked | Delimited::ByClose => None,
    };
    let chunked = delimited == Delimited::Chunked;
    let mut cut = false;
    loop {
        let frame = std::future::poll_fn(|cx| match Pin::new(&mut body).poll_frame(cx) {
            Poll::Pending => Poll::Ready(None),
            Poll::Ready(frame) => Poll::Ready(Some(frame)),
        })
        .await;
        let frame = match frame {
            Some(frame) => frame,
            // Nothing more now: what is gathered goes out before the wait, during which
            // a client that goes away ends it.
            None => {
                if !write.is_empty() {
                    io.write_all(write).await.map_err(drop)?;
                    write.clear();
                }
                // Out of a TLS stream's buffer too, before the wait.
                io.flush().await.map_err(drop)?;
                let frame = body.frame();
                tokio::pin!(frame);
                match unless_gone(io, read, frame).await {
                    Some(frame) => frame,
                    None => return Err(()),
                }
            }
        };
        let data = match frame {
            None => break,
            Some(Ok(frame)) => match frame.into_data() {
                Ok(data) => data,
                // Trailers: dropped (the proxies remove `Trailer`, so hyper sends none either).
                Err(_) => continue,
            },
            Some(Err(e)) => {
                tracing::debug!(error = %e, "the response body broke off: connection closed");
                if !write.is_empty() {
                    let _ = io.write_all(write).await;
                    let _ = io.flush().await;
                }
                return Err(());
            }
        };
        if data.is_empty() {
            continue;
        }
        let mut data = data;
        if let Some(n) = left.as_mut() {
            let len = data.len() as u64;
            if len > *n {
                tracing::warn!("a response body longer than its Content-Length: cut, connection closed");
                data.truncate(usize::try_from(*n).unwrap_or(0));
                cut = true;
            }
            *n -= (data.len() as u64).min(*n);
        }
        if chunked {
            write.extend_from_slice(format!("{:X}\r\n", data.len()).as_bytes());
        }
        if write.len() + data.len() <= GATHER {
            write.extend_from_slice(&data);
        } else {
            io.write_all(write).await.map_err(drop)?;
            write.clear();
            io.write_all(&data).await.map_err(drop)?;
        }
        if chunked {
            write.extend_from_slice(b"\r\n");
        }
        if left == Some(0) {
            break;
        }
    }
    if chunked {
        write.extend_from_slice(b"0\r\n\r\n");
    }
    io.write_all(write).await.map_err(drop)?;
    io.flush().await.map_err(drop)?;
    write.clear();
    match left {
        // Shorter than it said: the client cannot tell where it ended but by the close.
        Some(n) if n > 0 => {
            tracing::debug!(
                missing = n,
                "a response body shorter than its Content-Length: connection closed"
            );
            Err(())
        }
        _ => Ok(!last && !cut && delimited != Delimited::ByClose),
    }
}

/// The `Date` field's value now, formatted once a second per thread.
fn date() -> [u8; 29] {
    thread_local! {
        static CACHED: std::cell::Cell<(u64, [u8; 29])> = const { std::cell::Cell::new((u64::MAX, [0; 29])) };
    }
    let now = SystemTime::now();
    let second = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    CACHED.with(|c| {
        let (at, text) = c.get();
        if at == second {
            return text;
        }
        let mut text = [0u8; 29];
        let formatted = httpdate::fmt_http_date(now);
        if formatted.len() == text.len() {
            text.copy_from_slice(formatted.as_bytes());
        }
        c.set((second, text));
        text
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn map_of(fields: usize) -> HeaderMap {
        let mut map = HeaderMap::new();
        for i in 0..fields {
            map.insert(http::HeaderName::try_from(format!("x-{i}")).unwrap(), HeaderValue::from_static("v"));
        }
        map
    }

    fn spares() -> usize {
        Kit::spares()
    }

    /// A connection's buffers serve the next connection on the same thread: the same
    /// allocations, emptied.
    #[test]
    fn a_kits_buffers_serve_the_next_connection_emptied() {
        let mut kit = Kit::take();
        let Buffers { read, write, headers } = &mut kit.0;
        read.extend_from_slice(b"GET / HTTP/1.1\r\n\r\nGET /half");
        let head = read.split_to(18).freeze();
        write.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
        // A value that holds a part of the read buffer, as a request's fields do.
        headers.insert(http::header::HOST, HeaderValue::from_maybe_shared(head.slice(4..5)).unwrap());
        drop(head);
        let (r, w) = (read.as_ptr(), write.as_ptr());
        drop(kit);
        assert_eq!(spares(), 1);

        let kit = Kit::take();
        assert_eq!(spares(), 0);
        let Buffers { read, write, headers } = &kit.0;
        assert!(read.is_empty() && write.is_empty() && headers.is_empty());
        assert_eq!(write.as_ptr(), w, "the same write buffer");
        assert_eq!(read.as_ptr(), r.wrapping_sub(18), "the read buffer from its start");
        assert!(read.capacity() >= READ_SPACE && headers.capacity() > 0);
    }

    /// A read buffer a part of which is held elsewhere (a request's bytes) is let go, and
    /// so are buffers grown past the bounds; a thread keeps at most KEPT_BUFFERS.
    #[test]
    fn shared_or_grown_buffers_are_let_go_and_the_spares_are_bounded() {
        let mut kit = Kit::take();
        kit.0.read.extend_from_slice(b"GET / HTTP/1.1\r\n\r\n");
        let held = kit.0.read.split_to(4).freeze();
        drop(kit);
        assert_eq!(spares(), 0, "a part of its read buffer is still held");
        drop(held);

        let mut kit = Kit::take();
        kit.0.write.reserve(4 * GATHER);
        drop(kit);
        assert_eq!(spares(), 0, "a write buffer grown past 2 * GATHER");

        let mut kit = Kit::take();
        kit.0.headers = map_of(MAX_KEPT_FIELDS + 1);
        drop(kit);
        assert_eq!(spares(), 0, "a map grown past MAX_KEPT_FIELDS");

        let kits: Vec<Kit> = (0..KEPT_BUFFERS + 5).map(|_| Kit::take()).collect();
        drop(kits);
        assert_eq!(spares(), KEPT_BUFFERS);
    }

    /// A response's map is kept for the next request empty and with its room; one grown
    /// past `MAX_KEPT_FIELDS` is let go.
    #[test]
    fn a_responses_map_is_kept_empty_unless_it_grew_large() {
        let mut spare = HeaderMap::new();
        let map = map_of(10);
        let room = map.capacity();
        keep_map(&mut spare, map);
        assert_eq!((spare.len(), spare.capacity()), (0, room));

        let mut spare = HeaderMap::new();
        keep_map(&mut spare, map_of(MAX_KEPT_FIELDS + 1));
        assert_eq!((spare.len(), spare.capacity()), (0, 0));
    }
}
