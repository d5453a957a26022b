//! Header handling between client and origin: hop-by-hop headers removed (RFC 9110
//! §7.6.1), `Via` added, `Host` made from the target (RFC 9112 §3.2.2).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// Makes `Host` the authority of `target` (RFC 9112 §3.2.2; a URI without one leaves the
/// headers as they are): [`host_header`]'s value, without the scheme's default port,
/// replaces whatever the client sent. A client's one `Host` field that already says
/// exactly that is left as it is (the usual case: no copy, no allocation).
pub(super) fn set_host(headers: &mut HeaderMap, target: &http::Uri) {
    let Some(a) = target.authority() else { return };
    let default_port = if target.scheme_str() == Some("https") { 443 } else { 80 };
    if authority_is_host(a, default_port) {
        let mut sent = headers.get_all(header::HOST).iter();
        if let (Some(one), None) = (sent.next(), sent.next())
            && one.as_bytes() == a.as_str().as_bytes()
        {
            return;
        }
    }
    if let Some(host) = host_header(a, default_port) {
        headers.insert(header::HOST, host);
    }
}

/// The usual case: the authority is the `Host` header as it is (no user information, no
/// default port to leave out).
fn authority_is_host(a: &http::uri::Authority, default_port: u16) -> bool {
    !a.as_str().contains('@') && a.port_u16() != Some(default_port)
}

/// The `Host` header for a target authority: without user information, and without the
/// port when it is the scheme's default.
pub(super) fn host_header(a: &http::uri::Authority, default_port: u16) -> Option<HeaderValue> {
    match a.port_u16() {
        _ if authority_is_host(a, default_port) => HeaderValue::from_str(a.as_str()),
        Some(p) if p != default_port => HeaderValue::from_str(&format!("{}:{p}", a.host())),
        _ => HeaderValue::from_str(a.host()),
    }
    .ok()
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1) and every `Proxy-*` header; and
/// `Content-Length` where `Transfer-Encoding` came with it (RFC 9112 §6.3: the coding
/// framed the message, and an intermediary removes the length before forwarding it).
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // This runs twice per request. Most messages carry at most `Connection: keep-alive`
    // (or `close`): one look at each name (its length first), no token of those two values
    // parsed into a name, and nothing collected unless a message has more.
    let (mut connection, mut other) = (false, false);
    for name in headers.keys() {
        match hop_by_hop(name) {
            Some(Hop::Connection) => connection = true,
            Some(Hop::Other) => other = true,
            None => {}
        }
    }
    if connection {
        let mut listed: Vec<HeaderName> = Vec::new();
        for value in headers.get_all(header::CONNECTION).iter() {
            let value = value.as_bytes();
            if value.eq_ignore_ascii_case(b"keep-alive") || value.eq_ignore_ascii_case(b"close") {
                continue;
            }
            let Ok(value) = std::str::from_utf8(value) else { continue };
            for token in value.split(',').map(str::trim) {
                if token.is_empty() || token.eq_ignore_ascii_case("close") {
                    continue;
                }
                // `keep-alive` is hop-by-hop anyway (found below when present).
                if !token.eq_ignore_ascii_case("keep-alive")
                    && let Ok(n) = HeaderName::from_bytes(token.as_bytes())
                {
                    listed.push(n);
                }
            }
        }
        headers.remove(header::CONNECTION);
        for name in listed {
            headers.remove(name);
        }
    }
    if other {
        let doomed: Vec<HeaderName> =
            headers.keys().filter(|name| hop_by_hop(name) == Some(Hop::Other)).cloned().collect();
        if doomed.contains(&header::TRANSFER_ENCODING) {
            headers.remove(header::CONTENT_LENGTH);
        }
        for name in doomed {
            headers.remove(name);
        }
    }
}

/// Which hop-by-hop header a name is (RFC 9110 §7.6.1; `Proxy-*` ones too).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Hop {
    Connection,
    Other,
}

fn hop_by_hop(name: &HeaderName) -> Option<Hop> {
    let name = name.as_str();
    match name.len() {
        2 if name == "te" => Some(Hop::Other),
        7 if name == "trailer" || name == "upgrade" => Some(Hop::Other),
        10 if name == "connection" => Some(Hop::Connection),
        10 if name == "keep-alive" => Some(Hop::Other),
        17 if name == "transfer-encoding" => Some(Hop::Other),
        _ if name.starts_with("proxy-") => Some(Hop::Other),
        _ => None,
    }
}

/// Adds this proxy to `Via`.
pub(super) fn append_via(headers: &mut HeaderMap, via: &HeaderValue) {
    headers.append(header::VIA, via.clone());
}

/// Gives robotsgate's own answers the `Via` that forwarded responses get (they have one
/// already: the forwarder appends it).
pub(crate) fn own_via<B>(res: &mut http::Response<B>, via: &HeaderValue) {
    if !res.headers().contains_key(header::VIA) {
        res.headers_mut().insert(header::VIA, via.clone());
    }
}

/// The limit on request heads (`proxy.max_header_bytes`), checked by robotsgate itself so
/// that the `431` says which limit was hit and by how much.
///
/// hyper answers heads it cannot buffer with a `431` of its own (no body, no
/// `x-robotsgate`), so its read buffer is set further out ([`HeadLimit::buffer`]): a head
/// between the limit and that buffer gets robotsgate's answer; only a head past the buffer
/// (twice the limit, at least 16 KiB more) or with more than 100 header lines gets hyper's.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeadLimit(pub(crate) usize);

impl HeadLimit {
    /// The size of hyper's read buffer (and HTTP/2 header list) for this limit.
    pub(crate) fn buffer(self) -> usize {
        self.0.saturating_mul(2).max(self.0.saturating_add(16 * 1024)).max(8192)
    }

    /// robotsgate's `431` when the head of `req` is over the limit.
    pub(crate) fn check<B>(self, req: &http::Request<B>) -> Option<robotsgate::Refusal> {
        self.check_as(req, "proxy.max_header_bytes")
    }

    /// [`HeadLimit::check`], the refusal naming the setting `key`.
    pub(crate) fn check_as<B>(self, req: &http::Request<B>, key: &str) -> Option<robotsgate::Refusal> {
        let size = head_size(req);
        (size > self.0).then(|| {
            let why = format!(
                "the request head is {size} bytes (request line and headers); this proxy accepts at \
                 most {} ({key})",
                self.0
            );
            robotsgate::Refusal::new(robotsgate::RefusalKind::HeaderTooLarge, why)
        })
    }
}

/// The size of a request head as HTTP/1.1 writes it: the request line, each header line
/// (`name: value` and CRLF) and the blank line. Whitespace around values is not kept by
/// the parser, so a head written with more of it counts a few bytes less.
fn head_size<B>(req: &http::Request<B>) -> usize {
    let uri = req.uri();
    let target = uri.scheme_str().map_or(0, |s| s.len() + 3)
        + uri.authority().map_or(0, |a| a.as_str().len())
        + uri.path_and_query().map_or(0, |p| p.as_str().len());
    // "METHOD target HTTP/1.1\r\n" ... "\r\n"
    let mut size = req.method().as_str().len() + 1 + target + 11 + 2;
    for (name, value) in req.headers() {
        size += name.as_str().len() + 2 + value.len() + 2;
    }
    size
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn head_size_counts_the_head_as_written() {
        let raw = "GET http://example.com/a?b HTTP/1.1\r\nhost: example.com\r\nx-filler: abc\r\n\r\n";
        let req = http::Request::get("http://example.com/a?b")
            .header("host", "example.com")
            .header("x-filler", "abc")
            .body(())
            .unwrap();
        assert_eq!(head_size(&req), raw.len());
        assert!(HeadLimit(raw.len()).check(&req).is_none());
        let refusal = HeadLimit(raw.len() - 1).check(&req).expect("one byte over");
        assert_eq!(refusal.kind(), robotsgate::RefusalKind::HeaderTooLarge);
        assert!(refusal.message().contains("proxy.max_header_bytes"), "{}", refusal.message());
        assert!(HeadLimit(2048).buffer() >= 2048 + 16 * 1024);
        assert_eq!(HeadLimit(64 * 1024).buffer(), 128 * 1024);
    }

    #[test]
    fn hop_by_hop_headers_go() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "keep-alive, x-secret"),
            ("keep-alive", "timeout=5"),
            ("x-secret", "1"),
            ("proxy-authorization", "Basic abc"),
            ("proxy-connection", "keep-alive"),
            ("te", "trailers"),
            ("transfer-encoding", "chunked"),
            ("upgrade", "h2c"),
            ("trailer", "x"),
            ("accept", "*/*"),
            ("x-robots-agent", "Foo"),
        ] {
            h.append(HeaderName::from_static(k), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let mut left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        left.sort_unstable();
        assert_eq!(left, vec!["accept", "x-robots-agent"]);
    }

    #[test]
    fn a_length_beside_a_transfer_coding_goes_with_it() {
        let mut h = HeaderMap::new();
        h.append(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        h.append(header::TRANSFER_ENCODING, HeaderValue::from_static("chunked"));
        h.append(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["accept"]);
        // Alone, a length stays.
        let mut h = HeaderMap::new();
        h.append(header::CONTENT_LENGTH, HeaderValue::from_static("3"));
        h.append(header::UPGRADE, HeaderValue::from_static("h2c"));
        strip_hop_by_hop(&mut h);
        assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["content-length"]);
    }

    #[test]
    fn host_header_drops_user_information_and_the_default_port() {
        for (authority, default_port, host) in [
            ("example.com", 80, "example.com"),
            ("example.com:8080", 80, "example.com:8080"),
            ("example.com:80", 80, "example.com"),
            ("example.com:443", 443, "example.com"),
            ("example.com:443", 80, "example.com:443"),
            ("user:pw@example.com:8080", 80, "example.com:8080"),
            ("user@example.com", 80, "example.com"),
            ("[::1]:80", 80, "[::1]"),
            ("[::1]:3128", 80, "[::1]:3128"),
        ] {
            let a: http::uri::Authority = authority.parse().unwrap();
            assert_eq!(host_header(&a, default_port).unwrap(), host, "{authority}");
        }
    }

    #[test]
    fn set_host_makes_one_host_field_the_targets() {
        // (authority, the client's Host fields, the one field the origin gets)
        for (authority, sent, want) in [
            ("example.com:8080", &["example.com:8080"][..], "example.com:8080"),
            ("example.com:8080", &["other.example"][..], "example.com:8080"),
            ("example.com:8080", &["Example.com:8080"][..], "example.com:8080"),
            ("example.com:8080", &["example.com:8080", "example.com:8080"][..], "example.com:8080"),
            ("example.com:8080", &[][..], "example.com:8080"),
            ("example.com:80", &["example.com:80"][..], "example.com"),
            ("user@example.com:8080", &["user@example.com:8080"][..], "example.com:8080"),
            ("example.com", &["example.com"][..], "example.com"),
        ] {
            let target: http::Uri = format!("http://{authority}/").parse().unwrap();
            let mut h = HeaderMap::new();
            for v in sent {
                h.append(header::HOST, HeaderValue::from_static(v));
            }
            set_host(&mut h, &target);
            let got: Vec<_> = h.get_all(header::HOST).iter().collect();
            assert_eq!(got, [want], "{authority} {sent:?}");
        }
    }

    #[test]
    fn headers_named_in_connection_go_whatever_their_case_and_lines() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("connection", "Close, X-One"),
            ("connection", " , KEEP-ALIVE,x-two "),
            ("x-one", "1"),
            ("x-two", "2"),
            ("x-three", "3"),
            ("Keep-Alive", "timeout=5"),
        ] {
            h.append(HeaderName::from_bytes(k.as_bytes()).unwrap(), HeaderValue::from_static(v));
        }
        strip_hop_by_hop(&mut h);
        let left: Vec<&str> = h.keys().map(|k| k.as_str()).collect();
        assert_eq!(left, vec!["x-three"]);

        // The usual values alone, in any case: the field goes, the rest stays.
        for value in ["keep-alive", "Keep-Alive", "close", "CLOSE"] {
            let mut h = HeaderMap::new();
            h.insert(header::CONNECTION, HeaderValue::from_static(value));
            h.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
            h.insert(HeaderName::from_static("proxy-connection"), HeaderValue::from_static("keep-alive"));
            strip_hop_by_hop(&mut h);
            assert_eq!(h.keys().map(|k| k.as_str()).collect::<Vec<_>>(), ["accept"], "{value}");
        }

        let mut plain = HeaderMap::new();
        plain.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut plain);
        assert_eq!(plain.len(), 1);
    }
}
