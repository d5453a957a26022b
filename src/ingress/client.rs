//! The client's address: the peer's, or, when the peer is a trusted proxy, the address its
//! `Forwarded` or `X-Forwarded-For` names. Pure.

use std::net::IpAddr;

use http::HeaderMap;
use ipnet::IpNet;

/// Most hops of a forwarding header looked at.
const MAX_HOPS: usize = 32;
/// Most bytes of a forwarding header looked at.
const MAX_HEADER_BYTES: usize = 4096;

/// The client's address. `peer` is the connection's; when it is in `trusted`, the
/// forwarding headers are read from the nearest hop back, and the first address not in
/// `trusted` is the client (all trusted: the farthest). `Forwarded` (RFC 7239) is read
/// when present, else `X-Forwarded-For`; an untrusted peer's headers are ignored.
pub fn client_ip(peer: Option<IpAddr>, headers: &HeaderMap, trusted: &[IpNet]) -> Option<IpAddr> {
    let peer = peer?;
    let is_trusted = |ip: &IpAddr| trusted.iter().any(|n| n.contains(ip));
    if !is_trusted(&peer) {
        return Some(peer);
    }
    let hops = forwarded_hops(headers);
    let mut client = peer;
    for hop in hops.into_iter().rev() {
        let Some(ip) = hop else { break };
        client = ip;
        if !is_trusted(&ip) {
            break;
        }
    }
    Some(client)
}

/// The addresses the forwarding headers list, farthest first (`None`: a hop that is not
/// an address, which ends the walk).
fn forwarded_hops(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let mut hops = Vec::new();
    let forwarded: Vec<_> = headers.get_all(http::header::FORWARDED).iter().collect();
    if !forwarded.is_empty() {
        let mut bytes = 0;
        for value in forwarded {
            bytes += value.len();
            if bytes > MAX_HEADER_BYTES {
                break;
            }
            let Ok(text) = value.to_str() else { break };
            for element in text.split(',') {
                let for_ = element.split(';').find_map(|pair| {
                    let (k, v) = pair.split_once('=')?;
                    k.trim().eq_ignore_ascii_case("for").then(|| v.trim().trim_matches('"'))
                });
                if let Some(v) = for_ {
                    hops.push(parse_node(v));
                }
            }
        }
    } else {
        let mut bytes = 0;
        for value in headers.get_all("x-forwarded-for") {
            bytes += value.len();
            if bytes > MAX_HEADER_BYTES {
                break;
            }
            let Ok(text) = value.to_str() else { break };
            hops.extend(text.split(',').map(|v| parse_node(v.trim())));
        }
    }
    let skip = hops.len().saturating_sub(MAX_HOPS);
    hops.drain(..skip);
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
    use super::*;

    #[test]
    fn a_trusted_peers_header_is_believed_an_untrusted_ones_is_not() {
        let mut h = http::HeaderMap::new();
        h.insert("x-forwarded-for", "203.0.113.9, 10.0.0.2".parse().unwrap());
        let trusted = ["10.0.0.0/8".parse().unwrap()];
        let peer = Some("10.0.0.1".parse().unwrap());
        assert_eq!(client_ip(peer, &h, &trusted), Some("203.0.113.9".parse().unwrap()));
        let other = Some("198.51.100.7".parse().unwrap());
        assert_eq!(client_ip(other, &h, &trusted), other);
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
        assert_eq!(client_ip(peer, &h, &trusted), Some("203.0.113.5".parse().unwrap()));
        let h = headers(&[("forwarded", "for=\"[2001:db8::7]:443\";proto=https, for=10.2.2.2")]);
        assert_eq!(client_ip(peer, &h, &trusted), Some("2001:db8::7".parse().unwrap()));
        let h = headers(&[("x-forwarded-for", "garbage, 10.1.1.1")]);
        assert_eq!(client_ip(peer, &h, &trusted), Some("10.1.1.1".parse().unwrap()));
        assert_eq!(client_ip(peer, &HeaderMap::new(), &trusted), peer);
        assert_eq!(client_ip(None, &h, &trusted), None);
    }
}
