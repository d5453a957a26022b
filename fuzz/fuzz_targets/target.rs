//! A URL given as text (`robotsgate::target::Target::parse`): a link scraped from a page, a
//! line of a crawl list, a command-line argument, so anyone's. Input: the text (UTF-8).
//!
//! Invariants, held against the `url` crate (the WHATWG URL standard, as browsers read it):
//! no panic; a target is a URL the `url` crate parses, `http` or `https`, with its scheme,
//! port and host (a domain without its one trailing dot); its path starts with `/`, holds
//! no fragment, tab or line break, and put after the origin names the resource the URL
//! names (the same path and query once the `url` crate has read both); the origin's
//! robots.txt URL parses back to the same origin. An `http(s)` URL the `url` crate parses
//! is refused only for naming no host: a domain that is empty, or ends in an empty label,
//! once its one trailing dot is dropped (`.`, `example.com..`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate::origin::{Host, OriginError};
use robotsgate::target::Target;
use url::Position;

/// The path and query of a parsed URL, as a browser sends them (`/` for none).
fn requested(url: &url::Url) -> &str {
    match &url[Position::BeforePath..Position::AfterQuery] {
        "" => "/",
        p => p,
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    let parsed = url::Url::parse(text);
    let web = parsed.as_ref().is_ok_and(|u| matches!(u.scheme(), "http" | "https"));
    let target = match Target::parse(text) {
        Ok(target) => target,
        Err(e) => {
            if web {
                let host = parsed.as_ref().ok().and_then(|u| u.host_str()).unwrap_or_default();
                assert!(matches!(e, OriginError::NoHost), "{text:?}: {e}");
                let name = host.strip_suffix('.').unwrap_or(host);
                assert!(name.is_empty() || name.ends_with('.'), "{text:?}: {host:?} refused");
            }
            return;
        }
    };
    let url = parsed.expect("a target is a URL");
    assert!(web, "{text:?}: a target of scheme {}", url.scheme());

    let origin = target.origin();
    assert_eq!(origin.scheme().as_str(), url.scheme());
    assert_eq!(Some(origin.port()), url.port_or_known_default());
    match (origin.host(), url.host()) {
        (Host::Domain(ours), Some(url::Host::Domain(theirs))) => {
            assert_eq!(ours, theirs.strip_suffix('.').unwrap_or(theirs));
        }
        (Host::V4(ours), Some(url::Host::Ipv4(theirs))) => assert_eq!(ours, &theirs),
        (Host::V6(ours), Some(url::Host::Ipv6(theirs))) => assert_eq!(ours, &theirs),
        (ours, theirs) => panic!("{text:?}: host {ours:?} against {theirs:?}"),
    }

    let path = target.path();
    assert!(path.starts_with('/'), "{text:?}: path {path:?}");
    assert!(!path.contains(['#', '\t', '\n', '\r']), "{text:?}: path {path:?}");
    let again = url::Url::parse(&format!("{origin}{path}")).expect("the origin and path are a URL");
    assert_eq!(requested(&again), requested(&url), "{text:?}: path {path:?}");

    let robots = url::Url::parse(&origin.robots_url()).expect("a robots.txt URL");
    let back = Target::parse(robots.as_str()).expect("a robots.txt URL is a target");
    assert_eq!(back.origin(), origin);
    assert_eq!(back.path(), "/robots.txt");
});
