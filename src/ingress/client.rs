//! The client's address: the peer's, or, when the peer is a trusted proxy, the address its
//! `X-Forwarded-For` or `Forwarded` (the configured one) names. Pure.

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

use super::ForwardedHeader;

/// Most hops of a forwarding header looked at.
const MAX_HOPS: usize = 32;
/// Most bytes of a forwarding header looked at.
const MAX_HEADER_BYTES: usize = 4096;

/// The client's address. `peer` is the connection's; when it is in `trusted`, the
/// forwarding headers are read from the nearest hop back, and the first address not in
/// `trusted` is the client (all trusted: the farthest one read). Only `header` is read
/// (`X-Forwarded-For`, or the `for=` of RFC 7239's `Forwarded`): the other one is what a
/// client wrote, untouched by proxies that add to the first. An untrusted peer's headers
/// are ignored.
///
/// Only the trusted proxies' part of a header can be believed, and it is the end (each
/// proxy appends its peer, to the last line or as a line of its own, as HAProxy does):
/// whatever stops the walk (a hop that is not an address, bytes that are not text, the
/// bounds of [`MAX_HOPS`] hops and [`MAX_HEADER_BYTES`] bytes) is counted from that end,
/// so what the client wrote before can never be read in place of what the proxies added.
pub fn client_ip(
    peer: Option<IpAddr>,
    headers: &HeaderMap,
    trusted: &[IpNet],
    header: ForwardedHeader,
) -> Option<IpAddr> {
    let peer = peer?;
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer) {
        return Some(peer);
    }
    let mut client = peer;
    for hop in forwarded_hops(headers, header) {
        let Some(ip) = hop else { break };
        client = ip;
        if !is_trusted(&ip) {
            break;
        }
    }
    Some(client)
}

/// The addresses the forwarding headers list, **nearest first**: at most [`MAX_HOPS`],
/// from the last [`MAX_HEADER_BYTES`] bytes of the lines. `None` ends the list where the
/// walk must stop: a hop that is not an address, a line that is not text, or an element
/// cut by the byte bound.
fn forwarded_hops(headers: &HeaderMap, header: ForwardedHeader) -> Vec<Option<IpAddr>> {
    let forwarded = header == ForwardedHeader::Forwarded;
    let name = if forwarded {
        http::header::FORWARDED
    } else {
        http::header::HeaderName::from_static("x-forwarded-for")
    };
    let mut hops = Vec::new();
    let mut budget = MAX_HEADER_BYTES;
    for value in headers.get_all(name).iter().rev() {
        let line = value.as_bytes();
        let cut = line.len() > budget;
        let line = &line[line.len() - line.len().min(budget)..];
        budget -= line.len();
        let Some(text) = std::str::from_utf8(line).ok().filter(|t| t.is_ascii()) else {
            hops.push(None);
            return hops;
        };
        let mut elements = text.rsplit(',').peekable();
        while let Some(element) = elements.next() {
            if cut && elements.peek().is_none() {
                // The first element of a line cut short: only part of it was read.
                hops.push(None);
                return hops;
            }
            let hop = if forwarded {
                let for_ = element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then(|| v.trim().trim_matches('"'))
                });
                match for_ {
                    Some(v) => parse_node(v),
                    None => continue,
                }
            } else {
                parse_node(element.trim())
            };
            hops.push(hop);
            if hop.is_none() || hops.len() >= MAX_HOPS {
                return hops;
            }
        }
        if budget == 0 {
            break;
        }
    }
    hops
}

/// An address as a forwarding header writes it: `192.0.2.1`, `192.0.2.1:80`,
/// `[2001:db8::1]`, `[2001:db8::1]:80`.
fn parse_node(v: &str) -> Option<IpAddr> {
    if let Ok(ip) = v.parse() {
        return Some(ip);
    }
    if let Some(rest) = v.strip_prefix('[') {
        return rest.split(']').next()?.parse().ok();
    }
    v.rsplit_once(':').and_then(|(h, _)| h.parse().ok())
}

#[cfg(test)]
mod tests {
    use http::HeaderValue;

    use super::*;

    const XFF: ForwardedHeader = ForwardedHeader::XForwardedFor;
    const FWD: ForwardedHeader = ForwardedHeader::Forwarded;

    fn header_named(name: &str) -> ForwardedHeader {
        if name == "forwarded" { FWD } else { XFF }
    }

    #[test]
    fn a_trusted_peers_header_is_believed_an_untrusted_ones_is_not() {
        let mut h = http::HeaderMap::new();
        h.insert("x-forwarded-for", "203.0.113.9, 10.0.0.2".parse().unwrap());
        let trusted = ["10.0.0.0/8".parse().unwrap()];
        let peer = Some("10.0.0.1".parse().unwrap());
        assert_eq!(client_ip(peer, &h, &trusted, XFF), Some("203.0.113.9".parse().unwrap()));
        let other = Some("198.51.100.7".parse().unwrap());
        assert_eq!(client_ip(other, &h, &trusted, XFF), other);
    }

    fn headers(pairs: &[(&'static str, &'static str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, v.parse().unwrap());
        }
        h
    }

    #[test]
    fn walks_trusted_hops() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap(), "127.0.0.1/32".parse().unwrap()];
        let peer = Some("127.0.0.1".parse().unwrap());
        let h = headers(&[("x-forwarded-for", "1.1.1.1, 203.0.113.5, 10.1.1.1")]);
        assert_eq!(client_ip(peer, &h, &trusted, XFF), Some("203.0.113.5".parse().unwrap()));
        let h = headers(&[("forwarded", "for=\"[2001:db8::7]:443\";proto=https, for=10.2.2.2")]);
        assert_eq!(client_ip(peer, &h, &trusted, FWD), Some("2001:db8::7".parse().unwrap()));
        let h = headers(&[("x-forwarded-for", "garbage, 10.1.1.1")]);
        assert_eq!(client_ip(peer, &h, &trusted, XFF), Some("10.1.1.1".parse().unwrap()));
        assert_eq!(client_ip(peer, &HeaderMap::new(), &trusted, XFF), peer);
        assert_eq!(client_ip(None, &h, &trusted, XFF), None);
    }

    /// A client that writes a bot's address into the header before a trusted proxy adds its
    /// own line (HAProxy's `option forwardfor` adds one) must not be taken for the bot: the
    /// walk starts at the proxy's end and stops there, whatever the client's lines hold.
    /// Before, the lines were read from the first, and a line that was not text, or the
    /// byte bound reached, ended the reading there: the client's address was never read.
    #[test]
    fn what_the_client_wrote_never_replaces_what_the_proxy_added() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer = Some("10.0.0.1".parse().unwrap());
        let client = Some("203.0.113.9".parse().unwrap());
        let line = |v: &[u8]| HeaderValue::from_bytes(v).unwrap();
        // A line that is not text between the bot's address and the proxy's line.
        for name in ["x-forwarded-for", "forwarded"] {
            let (bot, real, junk) = if name == "forwarded" {
                (&b"for=66.249.66.1"[..], &b"for=203.0.113.9"[..], &b"for=\x80\x81"[..])
            } else {
                (&b"66.249.66.1"[..], &b"203.0.113.9"[..], &b"\x80\x81"[..])
            };
            let mut h = HeaderMap::new();
            h.append(name, line(bot));
            h.append(name, line(junk));
            h.append(name, line(real));
            assert_eq!(client_ip(peer, &h, &trusted, header_named(name)), client, "{name}");
            // A first line long enough to reach the byte bound with the proxy's.
            let mut long = Vec::new();
            while long.len() + 20 < MAX_HEADER_BYTES {
                long.extend_from_slice(bot);
                long.extend_from_slice(b", ");
            }
            long.extend_from_slice(bot);
            let mut h = HeaderMap::new();
            h.append(name, line(&long));
            h.append(name, line(real));
            assert_eq!(client_ip(peer, &h, &trusted, header_named(name)), client, "{name}: long first line");
            // One line longer than the bound, the proxy's hop at its end: still read.
            let mut one = long.clone();
            one.extend_from_slice(b", ");
            one.extend_from_slice(real);
            let mut h = HeaderMap::new();
            h.append(name, line(&one));
            assert_eq!(client_ip(peer, &h, &trusted, header_named(name)), client, "{name}: one long line");
        }
    }

    /// The property the fix above is for, over many made-up headers: whatever lines a
    /// client sends, the line a trusted proxy adds with the client's address decides.
    #[test]
    fn no_prefix_of_lines_changes_what_the_proxys_line_says() {
        const PIECES: [&[u8]; 10] = [
            b"66.249.66.1",
            b"10.0.0.7",
            b"[2001:4860:4801::1]:443",
            b"garbage",
            b"",
            b"\xc3\xa9",
            b"for=66.249.66.1;proto=https",
            b"for=\"[2001:4860:4801::1]\"",
            b"   ,,  ",
            b"66.249.66.1:8080",
        ];
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer = Some("10.0.0.1".parse().unwrap());
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move |n: usize| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            (seed % n as u64) as usize
        };
        for case in 0..3000 {
            let name = if case % 2 == 0 { "x-forwarded-for" } else { "forwarded" };
            let mut h = HeaderMap::new();
            for _ in 0..next(5) {
                let mut line = Vec::new();
                for i in 0..=next(6) {
                    if i > 0 {
                        line.extend_from_slice(b", ");
                    }
                    line.extend_from_slice(PIECES[next(PIECES.len())]);
                }
                if next(8) == 0 {
                    line = line.repeat(MAX_HEADER_BYTES / line.len().max(1) + 1);
                }
                if let Ok(v) = HeaderValue::from_bytes(&line) {
                    h.append(name, v);
                }
            }
            let client = if name == "forwarded" { "for=203.0.113.9" } else { "203.0.113.9" };
            h.append(name, HeaderValue::from_static(client));
            // Between the proxy's line and the peer, other trusted proxies' lines.
            for _ in 0..next(3) {
                let hop = if name == "forwarded" { "for=10.0.0.2" } else { "10.0.0.2" };
                h.append(name, HeaderValue::from_static(hop));
            }
            assert_eq!(
                client_ip(peer, &h, &trusted, header_named(name)),
                Some("203.0.113.9".parse().unwrap()),
                "{h:?}"
            );
        }
    }

    /// Only the configured header is read. A client behind a proxy that adds to
    /// `X-Forwarded-For` can still send its own `Forwarded` (and the other way round);
    /// before, `Forwarded` was read whenever present, and such a client passed as the
    /// address it wrote there.
    #[test]
    fn the_header_the_proxies_do_not_add_to_is_not_read() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer = Some("10.0.0.1".parse().unwrap());
        let real = Some("203.0.113.9".parse().unwrap());
        let h = headers(&[("forwarded", "for=66.249.66.1"), ("x-forwarded-for", "203.0.113.9")]);
        assert_eq!(client_ip(peer, &h, &trusted, XFF), real);
        let h = headers(&[("x-forwarded-for", "66.249.66.1"), ("forwarded", "for=203.0.113.9")]);
        assert_eq!(client_ip(peer, &h, &trusted, FWD), real);
        // The configured header absent: the peer.
        let h = headers(&[("forwarded", "for=66.249.66.1")]);
        assert_eq!(client_ip(peer, &h, &trusted, XFF), peer);
    }

    #[test]
    fn the_walk_ends_at_what_cannot_be_read() {
        let trusted: Vec<IpNet> = vec!["10.0.0.0/8".parse().unwrap()];
        let peer = Some("10.0.0.1".parse().unwrap());
        // Nothing readable past a trusted hop: the last trusted address read.
        let h = headers(&[("x-forwarded-for", "66.249.66.1, garbage, 10.9.9.9")]);
        assert_eq!(client_ip(peer, &h, &trusted, XFF), Some("10.9.9.9".parse().unwrap()));
        // More trusted hops than are read: the farthest one read, not one beyond.
        let hops: Vec<String> = (0..40).map(|i| format!("10.0.0.{i}")).collect();
        let mut h = HeaderMap::new();
        h.append("x-forwarded-for", HeaderValue::from_str("66.249.66.1").unwrap());
        h.append("x-forwarded-for", HeaderValue::from_str(&hops.join(", ")).unwrap());
        let farthest_read = format!("10.0.0.{}", 40 - MAX_HOPS);
        assert_eq!(client_ip(peer, &h, &trusted, XFF), Some(farthest_read.parse().unwrap()));
        // A Forwarded element without `for` is passed over.
        let h = headers(&[("forwarded", "for=203.0.113.9, proto=https;by=10.0.0.3, for=10.0.0.2")]);
        assert_eq!(client_ip(peer, &h, &trusted, FWD), Some("203.0.113.9".parse().unwrap()));
    }
}
