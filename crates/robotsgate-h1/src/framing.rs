//! Where a response's body ends (RFC 9112 §6.3), and whether its connection can carry
//! another exchange after it. The rules are stated once, here.

use http::header::{CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::{HeaderMap, StatusCode, Version};

use crate::{H1Error, ResponseHead};

/// How a response's body is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// No body (a response to HEAD; 1xx, 204, 304; `Content-Length: 0`).
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// The chunked coding ([`crate::ChunkedDecoder`]).
    Chunked,
    /// Everything until the origin closes the connection.
    UntilClose,
}

/// A response's [`Framing`] and whether its connection may be used again after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyFraming {
    /// Where the body ends.
    pub framing: Framing,
    /// Whether, once the body is read to its end, the connection can carry the next
    /// request.
    pub reusable: bool,
}

/// The framing of the response (`head`, its fields `headers`) to a request that was HEAD
/// (`head_request`) or not, in RFC 9112 §6.3's order:
/// 1. HEAD, 1xx, 204 and 304: no body. A `101` is an error here: the fast path never asks
///    for an upgrade.
/// 2. `Transfer-Encoding` (never in HTTP/1.0: an error): chunked if `chunked` is its last
///    coding, else until close; a `Content-Length` beside it is ignored, and the
///    connection is not reused.
/// 3. `Content-Length`: one number, or the same number repeated; anything else is an error.
/// 4. Otherwise until close.
///
/// The connection is reusable unless the framing is until close, the response says
/// `Connection: close`, or it is HTTP/1.0 without `Connection: keep-alive`.
pub fn response_framing(
    head_request: bool,
    head: &ResponseHead,
    headers: &HeaderMap,
) -> Result<BodyFraming, H1Error> {
    let mut reusable = keeps_alive(head.version, headers);
    let framing = if head.status == StatusCode::SWITCHING_PROTOCOLS {
        return Err(H1Error::UnexpectedSwitch);
    } else if bodiless(head_request, head.status) {
        check_length_field(headers)?;
        Framing::Empty
    } else if headers.contains_key(TRANSFER_ENCODING) {
        if head.version == Version::HTTP_10 {
            return Err(H1Error::TransferEncodingInHttp10);
        }
        if headers.contains_key(CONTENT_LENGTH) {
            reusable = false;
        }
        if chunked_last(headers) { Framing::Chunked } else { Framing::UntilClose }
    } else if headers.contains_key(CONTENT_LENGTH) {
        match content_length(headers)? {
            0 => Framing::Empty,
            n => Framing::Length(n),
        }
    } else {
        Framing::UntilClose
    };
    if framing == Framing::UntilClose {
        reusable = false;
    }
    Ok(BodyFraming { framing, reusable })
}

/// Whether the response to a request that was HEAD (`head_request`) or not, with `status`,
/// has no body, whatever its fields say (RFC 9112 §6.3, rule 1: HEAD, 1xx, 204, 304).
pub fn bodiless(head_request: bool, status: StatusCode) -> bool {
    head_request
        || status.is_informational()
        || status == StatusCode::NO_CONTENT
        || status == StatusCode::NOT_MODIFIED
}

/// Checks the `Content-Length` of a response (status `status`, fields `headers`) to a
/// request that was HEAD (`head_request`) or not, when the response has no body
/// ([`bodiless`]). There the length frames nothing, but it is passed on, and one that is
/// not one number (or the same number repeated) must not be (RFC 9110 §8.6): an error, as
/// it is where it frames a body. Absent is fine, and so is any response with a body: where
/// the length frames the body, [`response_framing`] checks it (so does hyper's client).
///
/// ```
/// use http::{HeaderMap, StatusCode, header::CONTENT_LENGTH};
/// use robotsgate_h1::check_bodiless_length;
///
/// let mut two = HeaderMap::new();
/// two.append(CONTENT_LENGTH, "3".parse().unwrap());
/// two.append(CONTENT_LENGTH, "4".parse().unwrap());
/// assert!(check_bodiless_length(true, StatusCode::OK, &two).is_err());
/// assert!(check_bodiless_length(false, StatusCode::NOT_MODIFIED, &two).is_err());
/// // A body follows: its framing is checked where it is read.
/// assert!(check_bodiless_length(false, StatusCode::OK, &two).is_ok());
/// ```
pub fn check_bodiless_length(
    head_request: bool,
    status: StatusCode,
    headers: &HeaderMap,
) -> Result<(), H1Error> {
    if bodiless(head_request, status) { check_length_field(headers) } else { Ok(()) }
}

/// The check of [`check_bodiless_length`] for a response known to have no body.
fn check_length_field(headers: &HeaderMap) -> Result<(), H1Error> {
    if headers.contains_key(CONTENT_LENGTH) { content_length(headers).map(drop) } else { Ok(()) }
}

/// Whether the last coding of all `Transfer-Encoding` lines together is `chunked`.
fn chunked_last(headers: &HeaderMap) -> bool {
    headers
        .get_all(TRANSFER_ENCODING)
        .iter()
        .next_back()
        .is_some_and(|v| last_coding_is_chunked(v.as_bytes()))
}

/// Whether `chunked` is the last coding of one `Transfer-Encoding` value.
pub(crate) fn last_coding_is_chunked(value: &[u8]) -> bool {
    value.rsplit(|&b| b == b',').next().is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"))
}

/// Whether the comma-separated list `value` (a `Connection` value) has `token`
/// (case-insensitive).
pub(crate) fn has_token(value: &[u8], token: &[u8]) -> bool {
    value.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(token))
}

/// The one length all `Content-Length` values (lines and comma-separated lists) give.
fn content_length(headers: &HeaderMap) -> Result<u64, H1Error> {
    let mut length = None;
    for line in headers.get_all(CONTENT_LENGTH) {
        let invalid = || H1Error::ContentLength(String::from_utf8_lossy(line.as_bytes()).into_owned());
        let n = parse_length(line.as_bytes()).ok_or_else(invalid)?;
        if length.is_some_and(|l| l != n) {
            return Err(invalid());
        }
        length = Some(n);
    }
    length.ok_or_else(|| H1Error::ContentLength(String::new()))
}

/// One `Content-Length` value: a decimal number, or the same number repeated in a
/// comma-separated list; `None` for anything else (or a number over `u64`).
pub(crate) fn parse_length(value: &[u8]) -> Option<u64> {
    let mut length = None;
    for item in value.split(|&b| b == b',') {
        let item = item.trim_ascii();
        if item.is_empty() || !item.iter().all(u8::is_ascii_digit) {
            return None;
        }
        let n = item.iter().try_fold(0u64, |n, &d| n.checked_mul(10)?.checked_add(u64::from(d - b'0')))?;
        if length.is_some_and(|l| l != n) {
            return None;
        }
        length = Some(n);
    }
    length
}

/// Whether the response lets its connection stay open (RFC 9112 §9.3).
fn keeps_alive(version: Version, headers: &HeaderMap) -> bool {
    let lines = || headers.get_all(CONNECTION).into_iter();
    let close = lines().any(|v| has_token(v.as_bytes(), b"close"));
    !close && (version == Version::HTTP_11 || lines().any(|v| has_token(v.as_bytes(), b"keep-alive")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::read_response_head;

    fn framing(head_request: bool, head: &str) -> Result<BodyFraming, H1Error> {
        let mut buf = bytes::BytesMut::from(format!("{head}\r\n\r\n").as_bytes());
        let mut headers = HeaderMap::new();
        let head = read_response_head(&mut buf, 8192, &mut headers).unwrap().unwrap();
        response_framing(head_request, &head, &headers)
    }

    fn ok(framing: Framing, reusable: bool) -> Result<BodyFraming, H1Error> {
        Ok(BodyFraming { framing, reusable })
    }

    #[test]
    fn bodiless_answers() {
        assert_eq!(framing(true, "HTTP/1.1 200 OK\r\ncontent-length: 10"), ok(Framing::Empty, true));
        assert_eq!(framing(true, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked"), ok(Framing::Empty, true));
        for status in [100, 103, 204, 304] {
            assert_eq!(
                framing(false, &format!("HTTP/1.1 {status} X\r\ncontent-length: 10")),
                ok(Framing::Empty, true)
            );
        }
        assert_eq!(framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 0"), ok(Framing::Empty, true));
        assert_eq!(framing(false, "HTTP/1.1 101 Switching Protocols"), Err(H1Error::UnexpectedSwitch));
    }

    #[test]
    fn a_bodiless_answer_s_length_must_be_one_number_all_the_same() {
        let two = || Err(H1Error::ContentLength("6".into()));
        assert_eq!(framing(true, "HTTP/1.1 200 OK\r\ncontent-length: 5\r\ncontent-length: 6"), two());
        assert_eq!(
            framing(false, "HTTP/1.1 304 Not Modified\r\ncontent-length: 5\r\ncontent-length: 6"),
            two()
        );
        assert_eq!(
            framing(true, "HTTP/1.1 200 OK\r\ncontent-length: x"),
            Err(H1Error::ContentLength("x".into()))
        );
        assert_eq!(framing(true, "HTTP/1.1 200 OK\r\ncontent-length: 5, 5"), ok(Framing::Empty, true));
        assert_eq!(framing(false, "HTTP/1.1 204 No Content\r\ncontent-length: 0"), ok(Framing::Empty, true));
    }

    #[test]
    fn transfer_encoding_comes_before_content_length() {
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked"),
            ok(Framing::Chunked, true)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, CHUNKED "),
            ok(Framing::Chunked, true)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\ntransfer-encoding: chunked"),
            ok(Framing::Chunked, true)
        );
        // Both: chunked wins, and the connection is not trusted for another exchange.
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 3\r\ntransfer-encoding: chunked"),
            ok(Framing::Chunked, false)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked, gzip"),
            ok(Framing::UntilClose, false)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ntransfer-encoding: chunkedx"),
            ok(Framing::UntilClose, false)
        );
        assert_eq!(
            framing(false, "HTTP/1.0 200 OK\r\ntransfer-encoding: chunked"),
            Err(H1Error::TransferEncodingInHttp10)
        );
    }

    #[test]
    fn content_length_is_one_number() {
        assert_eq!(framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 42"), ok(Framing::Length(42), true));
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 42, 42"),
            ok(Framing::Length(42), true)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 42\r\ncontent-length: 42"),
            ok(Framing::Length(42), true)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 18446744073709551615"),
            ok(Framing::Length(u64::MAX), true)
        );
        for bad in ["42, 43", "-1", "+1", "0x10", "1 2", "", ",", "99999999999999999999", "4 2"] {
            assert!(
                matches!(
                    framing(false, &format!("HTTP/1.1 200 OK\r\ncontent-length: {bad}")),
                    Err(H1Error::ContentLength(_))
                ),
                "{bad:?}"
            );
        }
        assert!(matches!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2"),
            Err(H1Error::ContentLength(_))
        ));
    }

    #[test]
    fn the_connection_is_kept_only_when_the_response_allows_it() {
        assert_eq!(framing(false, "HTTP/1.1 200 OK"), ok(Framing::UntilClose, false));
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nconnection: close"),
            ok(Framing::Length(1), false)
        );
        assert_eq!(
            framing(false, "HTTP/1.1 200 OK\r\ncontent-length: 1\r\nconnection: foo, Close"),
            ok(Framing::Length(1), false)
        );
        assert_eq!(framing(false, "HTTP/1.0 200 OK\r\ncontent-length: 1"), ok(Framing::Length(1), false));
        assert_eq!(
            framing(false, "HTTP/1.0 200 OK\r\ncontent-length: 1\r\nconnection: keep-alive"),
            ok(Framing::Length(1), true)
        );
    }
}
