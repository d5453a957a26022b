//! Header handling between client and origin: hop-by-hop headers removed (RFC 9110
//! §7.6.1), `Via` added, `Host` made from the target (RFC 9112 §3.2.2).

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

/// The `Host` header for a target authority: without user information, and without the
/// port when it is the scheme's default.
pub(super) fn host_header(a: &http::uri::Authority, default_port: u16) -> Option<HeaderValue> {
    let plain = !a.as_str().contains('@');
    match a.port_u16() {
        // The usual case: the authority is the header as it is.
        _ if plain && a.port_u16() != Some(default_port) => HeaderValue::from_str(a.as_str()),
        Some(p) if p != default_port => HeaderValue::from_str(&format!("{}:{p}", a.host())),
        _ => HeaderValue::from_str(a.host()),
    }
    .ok()
}

/// Removes the hop-by-hop headers (RFC 9110 §7.6.1) and every `Proxy-*` header.
pub fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // This runs twice per request. Most messages carry at most `Connection: keep-alive`
    // (or `close`), so those tokens are not parsed into names, and nothing is collected
    // or removed unless a message has such a header.
    let mut listed: Vec<HeaderName> = Vec::new();
    let (mut connection, mut other) = (false, false);
    for name in headers.keys() {
        if name == header::CONNECTION {
            connection = true;
            for token in headers.get_all(header::CONNECTION).iter().filter_map(|v| v.to_str().ok()) {
                for token in token.split(',').map(str::trim) {
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
        } else {
            other |= is_hop_by_hop(name);
        }
    }
    if connection {
        headers.remove(header::CONNECTION);
    }
    for name in listed {
        headers.remove(name);
    }
    if other {
        let doomed: Vec<HeaderName> = headers.keys().filter(|name| is_hop_by_hop(name)).cloned().collect();
        for name in doomed {
            headers.remove(name);
        }
    }
}

/// A hop-by-hop header other than `Connection` (RFC 9110 §7.6.1), or a `Proxy-*` one.
fn is_hop_by_hop(name: &HeaderName) -> bool {
    name == header::TE
        || name == header::TRAILER
        || name == header::TRANSFER_ENCODING
        || name == header::UPGRADE
        || name.as_str() == "keep-alive"
        || name.as_str().starts_with("proxy-")
}

/// Adds this proxy to `Via`.
pub(super) fn append_via(headers: &mut HeaderMap, via: &HeaderValue) {
    headers.append(header::VIA, via.clone());
}

#[cfg(test)]
mod tests {
    use super::*;

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

        let mut plain = HeaderMap::new();
        plain.insert(header::ACCEPT, HeaderValue::from_static("*/*"));
        strip_hop_by_hop(&mut plain);
        assert_eq!(plain.len(), 1);
    }
}
