//! The server side: a client's request head read and classified, and the response head
//! written as hyper's HTTP/1.1 server writes it.
//!
//! Only the common shape of request is read here ([`read_request_head`]); anything else
//! is left in the buffer, whole, for a full HTTP implementation to read.

use std::mem::MaybeUninit;

use bytes::BytesMut;
use http::header::{CONNECTION, CONTENT_LENGTH, DATE, EXPECT, TE, TRAILER, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode, Uri, Version};

use crate::framing::{has_token, last_coding_is_chunked, parse_length};
use crate::names::header_name;
use crate::response::head_len;
use crate::{H1Error, MAX_HEADERS};

/// The longest request target read (hyper's limit as well: longer ones are answered `414`
/// by hyper).
pub const MAX_TARGET_LEN: usize = u16::MAX as usize - 1;

/// A request head of the fast path's shape (see [`read_request_head`]).
#[derive(Debug)]
pub struct RequestHead {
    /// `GET` or `HEAD`.
    pub method: Method,
    /// The request target as sent (origin form `/a?b`, or absolute form to a proxy).
    pub uri: Uri,
    /// The request asked to close the connection after its response (`Connection: close`).
    pub close: bool,
}

/// What the front of a client's buffer holds.
#[derive(Debug)]
pub enum RequestRead {
    /// Not a whole head yet, and under the limit: read more, then call again. The buffer
    /// and the map are untouched.
    Partial,
    /// A request of the fast path's shape: its head is split off the buffer (what
    /// follows stays) and its fields are in the map.
    Fast(RequestHead),
    /// Any other request, or bytes that are not one: the buffer is untouched (the map may
    /// not be), for a full HTTP implementation to read and answer.
    Other,
}

/// Reads the request head at the front of `buf` if it has the fast path's shape:
/// - HTTP/1.1, method `GET` or `HEAD`, a target of at most [`MAX_TARGET_LEN`] bytes that
///   [`Uri`] reads;
/// - no body and nothing that changes how the connection goes on: no
///   `Transfer-Encoding`, `Content-Length`, `Upgrade`, `Expect` or `TE` field;
/// - at most [`MAX_HEADERS`] fields, the head at most `limit` bytes, and every field one
///   that `http` takes.
///
/// A head that is whole and has this shape is split off `buf`; `headers` is cleared and
/// given its fields in the order received, their values sharing the head's bytes. Any
/// other head, a malformed one, or `limit` bytes with no end of head: [`RequestRead::Other`],
/// with `buf` as it was.
///
/// `searched`: how many bytes at the front of `buf` an earlier call found to hold no end of
/// a head (its length then; 0 for a buffer not looked at yet). Only what follows them, and
/// the two bytes before where an end may begin, is searched: a reader of bytes as they come
/// calls this after each read, and a head sent a byte at a time is searched once, not once
/// per byte.
pub fn read_request_head(
    buf: &mut BytesMut,
    searched: usize,
    limit: usize,
    headers: &mut HeaderMap,
) -> RequestRead {
    let from = searched.saturating_sub(2).min(buf.len());
    let Some(len) = head_len(&buf[from..]).map(|len| from + len) else {
        return if buf.len() >= limit { RequestRead::Other } else { RequestRead::Partial };
    };
    if len > limit {
        return RequestRead::Other;
    }
    // Split off first, then parsed: the values are slices of the head's own bytes.
    let head = buf.split_to(len).freeze();
    match fast(&head, headers) {
        Some(fast) => RequestRead::Fast(fast),
        None => {
            // Given back in front of what follows: a copy, once per connection at most,
            // since the connection then goes to a full implementation.
            let mut whole = BytesMut::with_capacity(head.len() + buf.len());
            whole.extend_from_slice(&head);
            whole.extend_from_slice(buf);
            *buf = whole;
            RequestRead::Other
        }
    }
}

/// `head` read as a request of the fast path's shape, its fields put in `headers`; `None`
/// for any other.
fn fast(head: &bytes::Bytes, headers: &mut HeaderMap) -> Option<RequestHead> {
    let mut fields = [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut req = httparse::Request::new(&mut []);
    match httparse::ParserConfig::default().parse_request_with_uninit_headers(&mut req, head, &mut fields) {
        Ok(httparse::Status::Complete(n)) if n == head.len() => {}
        _ => return None,
    }
    if req.version != Some(1) {
        return None;
    }
    let method = match req.method? {
        "GET" => Method::GET,
        "HEAD" => Method::HEAD,
        _ => return None,
    };
    let target = req.path?;
    if target.len() > MAX_TARGET_LEN {
        return None;
    }
    let uri = Uri::from_maybe_shared(head.slice_ref(target.as_bytes())).ok()?;
    let mut close = false;
    headers.clear();
    headers.reserve(req.headers.len());
    for field in req.headers.iter() {
        let name = header_name(field.name.as_bytes()).ok()?;
        if name == TRANSFER_ENCODING
            || name == CONTENT_LENGTH
            || name == UPGRADE
            || name == EXPECT
            || name == TE
        {
            return None;
        }
        if name == CONNECTION {
            close |= has_token(field.value, b"close");
        }
        headers.append(name, HeaderValue::from_maybe_shared(head.slice_ref(field.value)).ok()?);
    }
    Some(RequestHead { method, uri, close })
}

/// What a response's body is, as its sender knows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodySize {
    /// No body at all (the body is at its end already).
    Empty,
    /// Exactly this many bytes.
    Known(u64),
    /// Not known before it is sent.
    Unknown,
}

/// How a response's body goes on the wire after its head.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delimited {
    /// Exactly this many bytes (`0`: no body is sent, whatever the body has).
    Length(u64),
    /// In the chunked coding.
    Chunked,
    /// Until the connection is closed.
    ByClose,
}

/// What [`encode_response_head`] wrote: how the body follows, and whether the connection
/// ends after this response.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ResponseFraming {
    /// How the body is written.
    pub delimited: Delimited,
    /// The connection closes after this response.
    pub last: bool,
}

/// A response head to write, as the service gave it.
#[derive(Debug)]
pub struct ResponseParts<'a> {
    /// The status.
    pub status: StatusCode,
    /// `HTTP/1.0` is written as such; anything else as `HTTP/1.1`.
    pub version: Version,
    /// A reason phrase other than the status's canonical one.
    pub reason: Option<&'a [u8]>,
    /// The fields.
    pub headers: &'a HeaderMap,
    /// The body, as far as its sender knows it.
    pub body: BodySize,
}

/// Appends the head of `res`, the response to a `HEAD` request (`head_request`) or not, to
/// `out`, as hyper's HTTP/1.1 server writes it (so that a client cannot tell which of the
/// two answered):
/// - The status line, with the canonical reason phrase unless `res` has its own.
/// - The fields in the map's order, names in lower case; `Content-Length`,
///   `Transfer-Encoding`, `Connection` and `Trailer` on one line each, their values joined
///   with `, `. `Transfer-Encoding` and `Trailer` are left out where no chunked body can
///   follow (HTTP/1.0, a response to HEAD, 1xx, 204, 304).
/// - `Connection: close` when `keep_alive` is false and the field does not say so yet.
/// - The framing the fields lack: `Content-Length` from `res.body` where it is known (`0`
///   for an empty body, except to HEAD), else `Transfer-Encoding: chunked` (HTTP/1.1) or
///   none (the body then ends with the connection).
/// - `Date: date` unless `res` has its own, and the empty line.
///
/// An error, with `out` as it was, for a `Content-Length` that is not a number, or two
/// that differ, on a body of unknown size; and for a 1xx or `101` (not answered here).
pub fn encode_response_head(
    head_request: bool,
    res: &ResponseParts<'_>,
    keep_alive: bool,
    date: &[u8],
    out: &mut Vec<u8>,
) -> Result<ResponseFraming, H1Error> {
    let status = res.status;
    if status.is_informational() {
        return Err(H1Error::UnexpectedSwitch);
    }
    let no_body_status = status == StatusCode::NO_CONTENT || status == StatusCode::NOT_MODIFIED;
    let http10 = res.version == Version::HTTP_10;
    let can_chunk = !head_request && !no_body_status && !http10;
    let start = out.len();
    out.reserve(64 + res.headers.len() * 32);
    if !http10 && status == StatusCode::OK && res.reason.is_none() {
        out.extend_from_slice(b"HTTP/1.1 200 OK\r\n");
    } else {
        out.extend_from_slice(if http10 { b"HTTP/1.0 " } else { b"HTTP/1.1 " });
        out.extend_from_slice(status.as_str().as_bytes());
        out.push(b' ');
        match res.reason {
            Some(r) => out.extend_from_slice(r),
            None => out.extend_from_slice(status.canonical_reason().unwrap_or("<none>").as_bytes()),
        }
        out.extend_from_slice(b"\r\n");
    }
    let mut delimited = None;
    let mut last = !keep_alive;
    let mut wrote_date = false;
    let mut close_said = false;
    // The length already written, if any, and whether it was written for the name now read.
    let mut wrote_len = false;
    // A line of joined values being written (its end not yet), and its name.
    let mut open: Option<&HeaderName> = None;
    let mut chunked_last = false;
    let fail = |out: &mut Vec<u8>, e: H1Error| {
        out.truncate(start);
        Err(e)
    };
    // One pass in the map's order: a name's values come together.
    for (name, value) in res.headers.iter() {
        let v = value.as_bytes();
        let same = open == Some(name);
        if !same && let Some(o) = open.take() {
            end_joined(out, o, chunked_last, last, &mut close_said);
        }
        if *name == CONTENT_LENGTH {
            if delimited == Some(Delimited::Chunked) {
                return fail(out, H1Error::Header("content-length after transfer-encoding".into()));
            }
            match res.body {
                // The body's own length is trusted, as hyper does; repeats are left out.
                BodySize::Known(n) => {
                    if !wrote_len {
                        line(out, name, v);
                        wrote_len = true;
                        delimited = Some(Delimited::Length(n));
                    }
                }
                BodySize::Unknown => match (parse_length(v), delimited) {
                    (Some(n), None) => {
                        line(out, name, v);
                        wrote_len = true;
                        delimited = Some(Delimited::Length(n));
                    }
                    (Some(n), Some(Delimited::Length(l))) if n == l => {}
                    _ => return fail(out, H1Error::ContentLength(String::from_utf8_lossy(v).into_owned())),
                },
                BodySize::Empty if head_request => {
                    line(out, name, v);
                    wrote_len = true;
                    delimited = Some(Delimited::Length(0));
                }
                // A length with no body: left out (an implicit `0` follows).
                BodySize::Empty => {}
            }
        } else if *name == TRANSFER_ENCODING {
            if wrote_len && !same {
                return fail(out, H1Error::Header("transfer-encoding after content-length".into()));
            }
            if !can_chunk {
                continue;
            }
            join(out, name, v, same);
            open = Some(name);
            chunked_last = last_coding_is_chunked(v);
            wrote_len = true;
            delimited = Some(Delimited::Chunked);
        } else if *name == CONNECTION {
            join(out, name, v, same);
            open = Some(name);
            if has_token(v, b"close") {
                close_said = true;
                last = true;
            }
        } else if *name == TRAILER {
            if can_chunk {
                join(out, name, v, same);
                open = Some(name);
            }
        } else {
            wrote_date |= *name == DATE;
            line(out, name, v);
        }
    }
    if let Some(o) = open.take() {
        end_joined(out, o, chunked_last, last, &mut close_said);
    }
    if last && !close_said {
        out.extend_from_slice(b"connection: close\r\n");
    }
    let delimited = match delimited {
        Some(d) => d,
        None => match res.body {
            BodySize::Unknown if can_chunk => {
                out.extend_from_slice(b"transfer-encoding: chunked\r\n");
                Delimited::Chunked
            }
            BodySize::Unknown if head_request || no_body_status => Delimited::Length(0),
            BodySize::Unknown => Delimited::ByClose,
            BodySize::Empty | BodySize::Known(0) => {
                if !head_request && !no_body_status {
                    out.extend_from_slice(b"content-length: 0\r\n");
                }
                Delimited::Length(0)
            }
            BodySize::Known(n) => {
                if !no_body_status {
                    out.extend_from_slice(b"content-length: ");
                    out.extend_from_slice(n.to_string().as_bytes());
                    out.extend_from_slice(b"\r\n");
                }
                Delimited::Length(n)
            }
        },
    };
    let delimited = if head_request || no_body_status { Delimited::Length(0) } else { delimited };
    if !wrote_date {
        out.extend_from_slice(b"date: ");
        out.extend_from_slice(date);
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
    let last = last || delimited == Delimited::ByClose;
    Ok(ResponseFraming { delimited, last })
}

/// `name: value\r\n`.
fn line(out: &mut Vec<u8>, name: &HeaderName, value: &[u8]) {
    out.extend_from_slice(name.as_str().as_bytes());
    out.extend_from_slice(b": ");
    out.extend_from_slice(value);
    out.extend_from_slice(b"\r\n");
}

/// A value of a line whose values are joined (`name: a, b`): the name first (`!more`) or
/// `, ` (`more`). The line is ended by [`end_joined`].
fn join(out: &mut Vec<u8>, name: &HeaderName, value: &[u8], more: bool) {
    if more {
        out.extend_from_slice(b", ");
    } else {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
    }
    out.extend_from_slice(value);
}

/// Ends a joined line of `name`: `Transfer-Encoding` gets `chunked` last, and
/// `Connection` gets `close` when the connection ends (`last`) and it does not say so.
fn end_joined(out: &mut Vec<u8>, name: &HeaderName, chunked_last: bool, last: bool, close_said: &mut bool) {
    if *name == TRANSFER_ENCODING && !chunked_last {
        out.extend_from_slice(b", chunked");
    } else if *name == CONNECTION && last && !*close_said {
        out.extend_from_slice(b", close");
        *close_said = true;
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    fn take(bytes: &[u8], limit: usize) -> (RequestRead, HeaderMap, BytesMut) {
        let mut buf = BytesMut::from(bytes);
        let mut headers = HeaderMap::new();
        let read = read_request_head(&mut buf, 0, limit, &mut headers);
        (read, headers, buf)
    }

    #[test]
    fn a_common_request_is_read_whole_or_not_at_all() {
        let bytes = b"GET http://example.com/a?b HTTP/1.1\r\nHost: example.com\r\nAccept: a\r\naccept: b\r\n\r\nGET /next";
        let end = bytes.len() - "GET /next".len();
        for cut in 0..end {
            let (read, _, buf) = take(&bytes[..cut], 8192);
            assert!(matches!(read, RequestRead::Partial), "{cut}");
            assert_eq!(&buf[..], &bytes[..cut]);
        }
        let (read, headers, rest) = take(bytes, 8192);
        let RequestRead::Fast(head) = read else { panic!("{read:?}") };
        assert_eq!(
            (head.method, head.uri.to_string(), head.close),
            (Method::GET, "http://example.com/a?b".into(), false)
        );
        assert_eq!(headers["host"], "example.com");
        assert_eq!(headers.get_all("accept").iter().collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(&rest[..], b"GET /next");
        let (read, _, _) = take(b"HEAD / HTTP/1.1\r\nConnection: keep-alive, Close\r\n\r\n", 8192);
        let RequestRead::Fast(head) = read else { panic!("{read:?}") };
        assert_eq!((head.method, head.uri.path(), head.close), (Method::HEAD, "/", true));
    }

    /// Everything else stays in the buffer, byte for byte, for hyper to read.
    #[test]
    fn other_requests_are_left_whole() {
        let long_target = format!("GET /{} HTTP/1.1\r\n\r\n", "a".repeat(MAX_TARGET_LEN));
        let many = format!("GET / HTTP/1.1\r\n{}\r\n", "x: y\r\n".repeat(MAX_HEADERS + 1));
        for other in [
            &b"POST / HTTP/1.1\r\nContent-Length: 1\r\n\r\nx"[..],
            b"GET / HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
            b"GET / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
            b"GET / HTTP/1.1\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
            b"GET / HTTP/1.1\r\nExpect: 100-continue\r\n\r\n",
            b"GET / HTTP/1.1\r\nTE: trailers\r\n\r\n",
            b"GET / HTTP/1.0\r\n\r\n",
            b"get / HTTP/1.1\r\n\r\n",
            b"CONNECT example.com:443 HTTP/1.1\r\n\r\n",
            b"OPTIONS * HTTP/1.1\r\n\r\n",
            b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n",
            b"GET / HTTP/1.1\r\nx: a\r\n folded\r\n\r\n",
            b"GET / HTTP/1.1\r\nbad name: x\r\n\r\n",
            b"GET /a b HTTP/1.1\r\n\r\n",
            b"GET http://[::1 HTTP/1.1\r\n\r\n",
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\n\n",
            long_target.as_bytes(),
            many.as_bytes(),
        ] {
            let (read, _, buf) = take(other, 1 << 20);
            assert!(matches!(read, RequestRead::Other), "{:?}: {read:?}", String::from_utf8_lossy(other));
            assert_eq!(&buf[..], other, "{:?}", String::from_utf8_lossy(other));
        }
    }

    /// Searched in pieces as it comes, the end is found with the same piece as a search of
    /// all of it each time finds it, whichever bytes the pieces end with, and the head read
    /// is the one read from all of it at once.
    #[test]
    fn the_end_of_a_head_is_found_in_the_bytes_that_came_last() {
        for whole in [
            &b"GET / HTTP/1.1\r\nA: b\r\n\r\nGET /next"[..],
            b"GET / HTTP/1.1\nA: b\n\nGET /next",
            b"GET / HTTP/1.1\n\r\nGET /next",
        ] {
            let (read, headers, rest) = take(whole, 8192);
            let RequestRead::Fast(head) = read else { panic!("{read:?}") };
            for step in 1..=whole.len() {
                let mut buf = BytesMut::new();
                let mut searched = 0;
                let mut pieces = whole.chunks(step);
                let (found, got) = loop {
                    let Some(piece) = pieces.next() else { panic!("step {step}: no end found") };
                    buf.extend_from_slice(piece);
                    let whole_search = head_len(&buf).is_some();
                    let mut got = HeaderMap::new();
                    match read_request_head(&mut buf, searched, 8192, &mut got) {
                        RequestRead::Partial => assert!(!whole_search, "step {step}, at {}", buf.len()),
                        RequestRead::Fast(found) => break (found, got),
                        RequestRead::Other => panic!("step {step}"),
                    }
                    searched = buf.len();
                };
                assert_eq!(
                    (found.method, found.uri, got),
                    (head.method.clone(), head.uri.clone(), headers.clone())
                );
                let mut left = buf.to_vec();
                pieces.for_each(|p| left.extend_from_slice(p));
                assert_eq!(left, rest, "step {step}");
            }
        }
        let mut buf = BytesMut::from(&b"GET / HTTP/1.1\r\n"[..]);
        assert!(matches!(read_request_head(&mut buf, 0, 8192, &mut HeaderMap::new()), RequestRead::Partial));
        let mut empty = BytesMut::new();
        assert!(matches!(
            read_request_head(&mut empty, 5, 8192, &mut HeaderMap::new()),
            RequestRead::Partial
        ));
    }

    #[test]
    fn a_head_over_the_limit_is_left_whole() {
        let head = format!("GET / HTTP/1.1\r\nx: {}\r\n\r\n", "a".repeat(200));
        let (read, _, buf) = take(head.as_bytes(), 100);
        assert!(matches!(read, RequestRead::Other));
        assert_eq!(&buf[..], head.as_bytes());
        // No end of head within the limit: not waited for.
        let (read, _, buf) = take(&head.as_bytes()[..150], 100);
        assert!(matches!(read, RequestRead::Other));
        assert_eq!(buf.len(), 150);
        assert!(matches!(take(&head.as_bytes()[..99], 100).0, RequestRead::Partial));
    }

    fn encode(
        head_request: bool,
        status: u16,
        fields: &[(&str, &str)],
        body: BodySize,
        keep_alive: bool,
    ) -> Result<(String, ResponseFraming), H1Error> {
        let mut headers = HeaderMap::new();
        for (n, v) in fields {
            headers.append(HeaderName::from_bytes(n.as_bytes()).unwrap(), v.parse().unwrap());
        }
        let status = StatusCode::from_u16(status).unwrap();
        let res = ResponseParts { status, version: Version::HTTP_11, reason: None, headers: &headers, body };
        let mut out = b"before".to_vec();
        let framing = encode_response_head(head_request, &res, keep_alive, b"DATE", &mut out)?;
        Ok((String::from_utf8(out[6..].to_vec()).unwrap(), framing))
    }

    fn framing(delimited: Delimited, last: bool) -> ResponseFraming {
        ResponseFraming { delimited, last }
    }

    #[test]
    fn the_framing_a_response_lacks_is_added() {
        let (head, f) = encode(false, 200, &[("server", "x")], BodySize::Known(5), true).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\nserver: x\r\ncontent-length: 5\r\ndate: DATE\r\n\r\n");
        assert_eq!(f, framing(Delimited::Length(5), false));
        let (head, f) = encode(false, 404, &[], BodySize::Unknown, true).unwrap();
        assert_eq!(head, "HTTP/1.1 404 Not Found\r\ntransfer-encoding: chunked\r\ndate: DATE\r\n\r\n");
        assert_eq!(f, framing(Delimited::Chunked, false));
        let (head, f) = encode(false, 403, &[], BodySize::Empty, true).unwrap();
        assert_eq!(head, "HTTP/1.1 403 Forbidden\r\ncontent-length: 0\r\ndate: DATE\r\n\r\n");
        assert_eq!(f, framing(Delimited::Length(0), false));
        // To HEAD: no implicit zero, no body, a given length kept.
        let (head, f) = encode(true, 200, &[], BodySize::Empty, true).unwrap();
        assert_eq!(
            (head.as_str(), f),
            ("HTTP/1.1 200 OK\r\ndate: DATE\r\n\r\n", framing(Delimited::Length(0), false))
        );
        let (head, f) = encode(true, 200, &[("content-length", "9")], BodySize::Empty, true).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\ncontent-length: 9\r\ndate: DATE\r\n\r\n");
        assert_eq!(f, framing(Delimited::Length(0), false));
        let (head, f) = encode(true, 200, &[], BodySize::Unknown, true).unwrap();
        assert_eq!(
            (head.as_str(), f),
            ("HTTP/1.1 200 OK\r\ndate: DATE\r\n\r\n", framing(Delimited::Length(0), false))
        );
        // 204 and 304: never a body, nor a length added.
        let (head, f) = encode(false, 304, &[("etag", "\"a\"")], BodySize::Known(3), true).unwrap();
        assert_eq!(head, "HTTP/1.1 304 Not Modified\r\netag: \"a\"\r\ndate: DATE\r\n\r\n");
        assert_eq!(f, framing(Delimited::Length(0), false));
    }

    #[test]
    fn the_fields_are_written_as_given_with_their_framing_fields_on_one_line() {
        let fields = [
            ("content-length", "3"),
            ("x-a", "1"),
            ("content-length", "3"),
            ("x-a", "2"),
            ("date", "Thu, 01 Jan 1970 00:00:00 GMT"),
        ];
        let (head, f) = encode(false, 200, &fields, BodySize::Unknown, true).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 200 OK\r\ncontent-length: 3\r\nx-a: 1\r\nx-a: 2\r\ndate: Thu, 01 Jan 1970 00:00:00 GMT\r\n\r\n"
        );
        assert_eq!(f, framing(Delimited::Length(3), false));
        let (head, f) =
            encode(false, 200, &[("transfer-encoding", "gzip")], BodySize::Unknown, true).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip, chunked\r\ndate: DATE\r\n\r\n");
        assert_eq!(f, framing(Delimited::Chunked, false));
        for bad in [
            &[("content-length", "x")][..],
            &[("content-length", "1"), ("content-length", "2")],
            // Both framings: hyper refuses to write it too.
            &[("content-length", "1"), ("transfer-encoding", "chunked")],
            &[("transfer-encoding", "chunked"), ("content-length", "1")],
        ] {
            let mut out = b"kept".to_vec();
            let mut headers = HeaderMap::new();
            for (n, v) in bad {
                headers.append(*n, v.parse().unwrap());
            }
            let res = ResponseParts {
                status: StatusCode::OK,
                version: Version::HTTP_11,
                reason: None,
                headers: &headers,
                body: BodySize::Unknown,
            };
            assert!(encode_response_head(false, &res, true, b"DATE", &mut out).is_err());
            assert_eq!(out, b"kept");
        }
    }

    #[test]
    fn a_connection_that_ends_says_so() {
        let (head, f) = encode(false, 200, &[], BodySize::Known(1), false).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 1\r\ndate: DATE\r\n\r\n");
        assert!(f.last);
        let (head, f) = encode(false, 200, &[("connection", "x-a")], BodySize::Known(1), false).unwrap();
        assert_eq!(
            head,
            "HTTP/1.1 200 OK\r\nconnection: x-a, close\r\ncontent-length: 1\r\ndate: DATE\r\n\r\n"
        );
        assert!(f.last);
        let (head, f) = encode(false, 200, &[("connection", "Close")], BodySize::Known(1), true).unwrap();
        assert_eq!(head, "HTTP/1.1 200 OK\r\nconnection: Close\r\ncontent-length: 1\r\ndate: DATE\r\n\r\n");
        assert!(f.last);
    }

    #[test]
    fn http_1_0_and_own_reasons_are_written_as_given() {
        let headers = HeaderMap::new();
        let mut res = ResponseParts {
            status: StatusCode::OK,
            version: Version::HTTP_10,
            reason: Some(b"Fine"),
            headers: &headers,
            body: BodySize::Unknown,
        };
        let mut out = Vec::new();
        let f = encode_response_head(false, &res, true, b"D", &mut out).unwrap();
        assert_eq!(out, b"HTTP/1.0 200 Fine\r\ndate: D\r\n\r\n");
        assert_eq!(f, framing(Delimited::ByClose, true));
        res.status = StatusCode::from_u16(599).unwrap();
        res.version = Version::HTTP_11;
        res.reason = None;
        res.body = BodySize::Empty;
        out.clear();
        encode_response_head(false, &res, true, b"D", &mut out).unwrap();
        assert_eq!(out, b"HTTP/1.1 599 <none>\r\ncontent-length: 0\r\ndate: D\r\n\r\n");
    }
}
