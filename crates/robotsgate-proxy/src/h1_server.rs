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
/// module).
pub(crate) async fn serve<IO, C, F, B>(
    mut io: IO,
    limits: Limits,
    stop: &CancellationToken,
    mut call: C,
) -> Served<IO>
where
    IO: AsyncRead + AsyncWrite + Unpin,
    C: FnMut(Request<PoolRequestBody>) -> F,
    F: Future<Output = Response<B>>,
    B: Body<Data = Bytes> + Unpin,
    B::Error: std::fmt::Display,
{
    let mut read = BytesMut::with_capacity(READ_SPACE);
    let mut write = Vec::with_capacity(4096);
    let mut headers = HeaderMap::new();
    let deadline = tokio::time::sleep(limits.header_read_timeout);
    tokio::pin!(deadline);
    loop {
        deadline.as_mut().reset(tokio::time::Instant::now() + limits.header_read_timeout);
        // Bytes at the front of `read` known to hold no end of a head: a head that comes a
        // byte at a time is searched once, not once a byte.
        let mut searched = 0;
        let head = loop {
            match read_request_head(&mut read, searched, limits.max_header_bytes, &mut headers) {
                RequestRead::Fast(head) => break head,
                RequestRead::Other => {
                    tracing::debug!(
                        "a request the fast path does not take: the connection goes on with hyper"
                    );
                    return Served::HandOver(Prefixed { prefix: read.freeze(), inner: io });
                }
                RequestRead::Partial => {}
            }
            searched = read.len();
            make_room(&mut read);
            let idle = read.is_empty();
            tokio::select! {
                biased;
                r = io.read_buf(&mut read) => match r {
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
        *req.headers_mut() = std::mem::take(&mut headers);
        // Pinned here, where it is made: not moved again into the wait's own state.
        let answer = call(req);
        tokio::pin!(answer);
        let Some(res) = unless_gone(&mut io, &mut read, answer).await else {
            return Served::Done;
        };
        let keep_alive = !head.close && !stop.is_cancelled();
        match respond(&mut io, &mut read, &mut write, &mut headers, head_request, keep_alive, res).await {
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
