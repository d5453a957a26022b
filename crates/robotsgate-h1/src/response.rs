//! A response head read from an origin.

use std::mem::MaybeUninit;
use std::sync::LazyLock;

use bytes::BytesMut;
use http::{HeaderMap, HeaderValue, StatusCode, Version};
use memchr::memmem::Finder;

use crate::H1Error;
use crate::names::header_name;

/// Header lines a response head may have (hyper's default as well).
pub const MAX_HEADERS: usize = 100;

/// A response head's status line ([`read_response_head`] puts its fields in a map).
#[derive(Debug)]
pub struct ResponseHead {
    /// The status code.
    pub status: StatusCode,
    /// HTTP/1.0 or HTTP/1.1.
    pub version: Version,
    /// The reason phrase, where it is not the status code's canonical one (clients may
    /// be shown it).
    pub reason: Option<Box<[u8]>>,
}

/// Reads a response head from the front of `buf`. While it is incomplete: `Ok(None)`, and
/// neither `buf` nor `headers` is touched (read more into `buf`, then call again). Once it
/// is whole: the head is split off `buf` (what follows, the body, stays), and `headers` is
/// cleared and given its fields in the order received, their values sharing the head's
/// bytes (no copy; the map's allocation is reused). An error when the head is malformed,
/// has more than [`MAX_HEADERS`] fields, or is (or, incomplete, already is) longer than
/// `limit`; `headers` may then hold part of it.
pub fn read_response_head(
    buf: &mut BytesMut,
    limit: usize,
    headers: &mut HeaderMap,
) -> Result<Option<ResponseHead>, H1Error> {
    let Some(len) = head_len(buf) else {
        if buf.len() >= limit {
            return Err(H1Error::HeadTooLarge(limit));
        }
        return Ok(None);
    };
    if len > limit {
        return Err(H1Error::HeadTooLarge(limit));
    }
    // Split off first, then parsed: the values are slices of the head's own bytes.
    let head = buf.split_to(len).freeze();
    let mut fields = [const { MaybeUninit::uninit() }; MAX_HEADERS];
    let mut res = httparse::Response::new(&mut []);
    match httparse::ParserConfig::default().parse_response_with_uninit_headers(&mut res, &head, &mut fields) {
        Ok(httparse::Status::Complete(n)) if n == len => {}
        Ok(_) => return Err(H1Error::Head(httparse::Error::NewLine)),
        Err(e) => return Err(H1Error::Head(e)),
    }
    let version = match res.version {
        Some(0) => Version::HTTP_10,
        _ => Version::HTTP_11,
    };
    let status = StatusCode::from_u16(res.code.unwrap_or_default())
        .map_err(|_| H1Error::Head(httparse::Error::Status))?;
    let reason = res.reason.filter(|r| Some(*r) != status.canonical_reason()).map(|r| r.as_bytes().into());
    headers.clear();
    headers.reserve(res.headers.len());
    for field in res.headers.iter() {
        let invalid = || H1Error::Header(field.name.to_owned());
        let name = header_name(field.name.as_bytes()).map_err(|_| invalid())?;
        let value = HeaderValue::from_maybe_shared(head.slice_ref(field.value)).map_err(|_| invalid())?;
        headers.append(name, value);
    }
    Ok(Some(ResponseHead { status, version, reason }))
}

/// Where the head at the front of `buf` ends, if it is whole: after its first empty line,
/// lines ending in LF or CRLF (httparse reads both; origins send CRLF). That is after the
/// first LF followed by CRLF or by LF.
///
/// Two searches for those byte pairs, not one stop at every LF: every head of the fast
/// path, request and response, is looked at here, and a head has a dozen lines.
pub(crate) fn head_len(buf: &[u8]) -> Option<usize> {
    static LF_CRLF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\n\r\n"));
    static LF_LF: LazyLock<Finder<'static>> = LazyLock::new(|| Finder::new(b"\n\n"));
    match LF_CRLF.find(buf) {
        // An LF LF can only come first if it starts before this LF.
        Some(at) => Some(LF_LF.find(&buf[..=at]).map_or(at + 3, |lf| lf + 2)),
        None => LF_LF.find(buf).map(|lf| lf + 2),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first LF followed by LF or CRLF, one LF at a time: what `head_len` finds.
    fn head_len_by_lines(buf: &[u8]) -> Option<usize> {
        (0..buf.len()).filter(|&i| buf[i] == b'\n').find_map(|lf| match &buf[lf + 1..] {
            [b'\n', ..] => Some(lf + 2),
            [b'\r', b'\n', ..] => Some(lf + 3),
            _ => None,
        })
    }

    /// Every string of up to 10 bytes of CR, LF and a letter, and longer heads with bare
    /// LFs and CRLFs mixed: the same end as the line-by-line search.
    #[test]
    fn head_len_is_the_first_empty_line() {
        let alphabet = [b'\r', b'\n', b'a'];
        for len in 0..=10u32 {
            for mut n in 0..3usize.pow(len) {
                let mut buf = Vec::with_capacity(len as usize);
                for _ in 0..len {
                    buf.push(alphabet[n % 3]);
                    n /= 3;
                }
                assert_eq!(head_len(&buf), head_len_by_lines(&buf), "{buf:?}");
            }
        }
        let head = b"HTTP/1.1 200 OK\r\nServer: nginx\r\nA: b\nC: d\r\n";
        for end in [&b"\r\n"[..], b"\n", b"\r\r\n", b"x\r\n"] {
            let mut buf = head.to_vec();
            buf.extend_from_slice(end);
            buf.extend_from_slice(b"body\n\n\r\n");
            assert_eq!(head_len(&buf), head_len_by_lines(&buf), "{:?}", String::from_utf8_lossy(&buf));
        }
    }

    fn read(bytes: &[u8], limit: usize) -> Result<Option<(ResponseHead, HeaderMap, BytesMut)>, H1Error> {
        let mut buf = BytesMut::from(bytes);
        let mut headers = HeaderMap::new();
        Ok(read_response_head(&mut buf, limit, &mut headers)?.map(|head| (head, headers, buf)))
    }

    #[test]
    fn a_head_is_read_whole_or_not_at_all() {
        let bytes = b"HTTP/1.1 404 Not Found\r\nServer: nginx\r\nX-Two: a\r\nx-two: b\r\n\r\nbody";
        for cut in 0..bytes.len() - 4 {
            let mut buf = BytesMut::from(&bytes[..cut]);
            let mut headers = HeaderMap::new();
            headers.insert("x-kept", HeaderValue::from_static("yes"));
            assert!(read_response_head(&mut buf, 8192, &mut headers).unwrap().is_none(), "{cut}");
            assert_eq!((&buf[..], headers.len()), (&bytes[..cut], 1), "untouched at {cut}");
        }
        let (head, headers, rest) = read(bytes, 8192).unwrap().unwrap();
        assert_eq!(head.status, StatusCode::NOT_FOUND);
        assert_eq!(head.version, Version::HTTP_11);
        assert_eq!(headers["server"], "nginx");
        let two: Vec<_> = headers.get_all("x-two").iter().collect();
        assert_eq!(two, ["a", "b"]);
        assert_eq!(head.reason, None);
        assert_eq!(&rest[..], b"body");
    }

    #[test]
    fn a_head_with_bare_lf_line_ends_is_read_too() {
        let (head, headers, rest) = read(b"HTTP/1.1 200 OK\nA: 1\n\nbody", 8192).unwrap().unwrap();
        assert_eq!(
            (head.status, headers["a"].as_bytes(), &rest[..]),
            (StatusCode::OK, &b"1"[..], &b"body"[..])
        );
        assert!(read(b"HTTP/1.1 200 OK\nA: 1\n", 8192).unwrap().is_none());
        // The first empty line ends it, whatever follows.
        let (_, headers, rest) = read(b"HTTP/1.1 200 OK\nA: 1\n\r\nB: 2\r\n\r\n", 8192).unwrap().unwrap();
        assert_eq!((headers.len(), &rest[..]), (1, &b"B: 2\r\n\r\n"[..]));
    }

    #[test]
    fn the_map_given_is_cleared_and_reused() {
        let mut headers = HeaderMap::with_capacity(32);
        headers.insert("x-request", HeaderValue::from_static("gone"));
        let capacity = headers.capacity();
        let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\na: 1\r\n\r\n"[..]);
        read_response_head(&mut buf, 8192, &mut headers).unwrap().unwrap();
        assert_eq!(headers.len(), 1);
        assert_eq!(headers["a"], "1");
        assert_eq!(headers.capacity(), capacity);
    }

    #[test]
    fn an_uncommon_reason_and_http_1_0_are_kept() {
        let (head, _, _) = read(b"HTTP/1.0 200 Fine\r\n\r\n", 8192).unwrap().unwrap();
        assert_eq!(head.version, Version::HTTP_10);
        assert_eq!(head.reason.as_deref(), Some(&b"Fine"[..]));
    }

    #[test]
    fn heads_over_the_limits_are_refused() {
        let long = format!("HTTP/1.1 200 OK\r\nx: {}\r\n\r\n", "a".repeat(200));
        assert_eq!(read(long.as_bytes(), 100).unwrap_err(), H1Error::HeadTooLarge(100));
        assert_eq!(read(&long.as_bytes()[..150], 100).unwrap_err(), H1Error::HeadTooLarge(100));
        let many = format!("HTTP/1.1 200 OK\r\n{}\r\n", "x: y\r\n".repeat(MAX_HEADERS + 1));
        assert_eq!(
            read(many.as_bytes(), 1 << 20).unwrap_err(),
            H1Error::Head(httparse::Error::TooManyHeaders)
        );
        let most = format!("HTTP/1.1 200 OK\r\n{}\r\n", "x: y\r\n".repeat(MAX_HEADERS));
        assert_eq!(read(most.as_bytes(), 1 << 20).unwrap().unwrap().1.len(), MAX_HEADERS);
    }

    #[test]
    fn malformed_heads_are_refused() {
        for bad in [
            &b"HTTP/2 200 OK\r\n\r\n"[..],
            b"HTTP/1.1 20 OK\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nbad name: x\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx: a\r\n folded\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx: a\x00b\r\n\r\n",
            b"HTTP/1.1 200 OK\r\nx: a\x7fb\r\n\r\n",
            b"NOTHTTP\r\n\r\n",
        ] {
            assert!(read(bad, 8192).is_err(), "{:?}", String::from_utf8_lossy(bad));
        }
    }
}
