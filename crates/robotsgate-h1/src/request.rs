//! A request head written for an origin.

use http::{HeaderMap, Method};

/// Appends the head of a request without a body to `out`: the request line with `target`
/// (origin form, e.g. `/a?b`), each header line as `name: value`, and the empty line. The
/// caller has made the headers ready for the origin (`Host` set, hop-by-hop fields
/// removed); nothing is added here, so a request that needs framing headers (a body) is
/// not one to write with this.
pub fn encode_request_head(method: &Method, target: &str, headers: &HeaderMap, out: &mut Vec<u8>) {
    let size = method.as_str().len()
        + target.len()
        + 12
        + headers.iter().map(|(n, v)| n.as_str().len() + v.len() + 4).sum::<usize>()
        + 2;
    out.reserve(size);
    out.extend_from_slice(method.as_str().as_bytes());
    out.push(b' ');
    out.extend_from_slice(target.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\n");
    for (name, value) in headers {
        out.extend_from_slice(name.as_str().as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out.extend_from_slice(b"\r\n");
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_head_is_the_request_line_the_fields_and_an_empty_line() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "example.com:8080".parse().unwrap());
        headers.append("accept", "a".parse().unwrap());
        headers.append("accept", "b".parse().unwrap());
        headers.insert("user-agent", "ExampleBot/1.0".parse().unwrap());
        let mut out = b"kept".to_vec();
        encode_request_head(&Method::GET, "/a?b=c", &headers, &mut out);
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "keptGET /a?b=c HTTP/1.1\r\nhost: example.com:8080\r\naccept: a\r\naccept: b\r\n\
             user-agent: ExampleBot/1.0\r\n\r\n"
        );
    }

    /// What is written reads back as the same request (httparse, as a server would).
    #[test]
    fn the_head_reads_back() {
        let mut headers = HeaderMap::new();
        headers.insert("host", "[::1]:3128".parse().unwrap());
        headers.insert("x-empty", "".parse().unwrap());
        headers.insert("x-obs", http::HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        let mut out = Vec::new();
        encode_request_head(&Method::OPTIONS, "*", &headers, &mut out);
        let mut fields = [httparse::EMPTY_HEADER; 8];
        let mut req = httparse::Request::new(&mut fields);
        assert_eq!(req.parse(&out).unwrap(), httparse::Status::Complete(out.len()));
        assert_eq!((req.method, req.path, req.version), (Some("OPTIONS"), Some("*"), Some(1)));
        let read: Vec<_> = req.headers.iter().map(|h| (h.name, h.value)).collect();
        assert_eq!(read, [("host", &b"[::1]:3128"[..]), ("x-empty", b""), ("x-obs", b"caf\xc3\xa9")]);
    }
}
