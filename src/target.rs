//! [`Target`]: the origin and path a URL names, for checking a URL given as text (a link
//! scraped from a page, a line of a crawl list, a command-line argument).
//!
//! Every URL a browser accepts is accepted (the WHATWG URL standard, which the `url` crate
//! implements): raw non-ASCII, a `%` that starts no escape, spaces, `\` for `/`. What is no
//! URL at all is refused, naming why: no scheme, a scheme robotsgate does not fetch, no
//! host, a host or port that is not one.
//!
//! The path is the path of the request a browser makes for the URL, its characters as
//! written ([`rep::split_http_url`](crate::rep::split_http_url)): a raw `ツ` stays `ツ`, so
//! each profile reads it its way. `google` takes it as given, as Google's library does (it
//! does not match `Allow: /foo/bar/ツ`, which Google's parser percent-encodes); `rfc`
//! percent-encodes it first (RFC 9309 §2.2.2: it matches); `conservative` needs both.
//!
//! ```
//! use robotsgate::target::Target;
//!
//! let t = Target::parse("https://Example.com/foo/bar/ツ?q=%%41#top").unwrap();
//! assert_eq!(t.origin().to_string(), "https://example.com");
//! assert_eq!(t.path(), "/foo/bar/ツ?q=%%41");
//!
//! let err = Target::parse("example.com/a").unwrap_err();
//! assert_eq!(err.to_string(), "no scheme: not an absolute URL (an http:// or https:// URL is needed)");
//! assert!(Target::parse("ftp://example.com/a").is_err());
//! ```
//!
//! Requests that arrive as requests (the proxy, the tower layer, the reqwest middleware)
//! need none of this: their path is the request target as sent.

use url::Position;

use crate::origin::{Origin, OriginError};

/// The origin and path a URL names; made by [`Target::parse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    origin: Origin,
    path: String,
}

impl Target {
    /// Reads `url` as the WHATWG URL standard reads it: the origin from the `url` crate's
    /// parse, the path as written ([`rep::split_http_url`](crate::rep::split_http_url)).
    /// The two readings are held to one another: should the path as written name another
    /// resource than the parsed URL (once the `url` crate has re-spelled both), the
    /// parsed URL's path and query are taken instead, so the path checked is always the
    /// path requested.
    pub fn parse(url: &str) -> Result<Target, OriginError> {
        let parsed = url::Url::parse(url).map_err(|e| OriginError::of_url(e, url))?;
        let origin = Origin::of_parsed(&parsed)?;
        let path = match robotsgate_rep::split_http_url(url) {
            Some(split) if names_the_same(&parsed, &split.path) => split.path.into_owned(),
            _ => requested(&parsed).to_owned(),
        };
        Ok(Target { origin, path })
    }

    /// The origin: whose robots.txt decides.
    pub fn origin(&self) -> &Origin {
        &self.origin
    }

    /// The path and query to check (no fragment; `/` for none), as written in the URL.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The origin and the path.
    pub fn into_parts(self) -> (Origin, String) {
        (self.origin, self.path)
    }
}

/// The path and query of a parsed URL, as a browser sends them (`/` for none).
fn requested(url: &url::Url) -> &str {
    match &url[Position::BeforePath..Position::AfterQuery] {
        "" => "/",
        p => p,
    }
}

/// Whether `path`, put after `url`'s scheme and authority, parses to `url`'s path and query.
fn names_the_same(url: &url::Url, path: &str) -> bool {
    let again = format!("{}{path}", &url[..Position::BeforePath]);
    url::Url::parse(&again).is_ok_and(|again| requested(&again) == requested(url))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn target(url: &str) -> (String, String) {
        let t = Target::parse(url).unwrap_or_else(|e| panic!("{url:?}: {e}"));
        (t.origin().to_string(), t.path().to_owned())
    }

    /// Issue 31.1: what browsers and Google's library accept is answered, the path as written.
    #[test]
    fn urls_browsers_accept_are_targets() {
        for (url, origin, path) in [
            ("http://example.com/foo/bar/\u{30c4}", "http://example.com", "/foo/bar/\u{30c4}"),
            ("http://example.com/a/b/index.html\u{e9}", "http://example.com", "/a/b/index.html\u{e9}"),
            ("http://example.com/\u{e9}%E3%83%84%4", "http://example.com", "/\u{e9}%E3%83%84%4"),
            ("http://example.com//%41~%%41index.htm", "http://example.com", "//%41~%%41index.htm"),
            ("http://example.com/%%41", "http://example.com", "/%%41"),
            ("http://example.com/a%4", "http://example.com", "/a%4"),
            ("http://example.com/%zz?%", "http://example.com", "/%zz?%"),
            ("http://example.com/a b?c d", "http://example.com", "/a b?c d"),
            ("http://example.com/a/../b", "http://example.com", "/a/../b"),
            ("https://user:p%40ss@[2001:DB8::1]:8443/a;b?c#d", "https://[2001:db8::1]:8443", "/a;b?c"),
            ("http://ex%41mple.com/%7Euser/", "http://example.com", "/%7Euser/"),
            ("http://\u{4f8b}\u{3048}.jp/\u{30c4}", "http://xn--r8jz45g.jp", "/\u{30c4}"),
            ("HTTP://EXAMPLE.com", "http://example.com", "/"),
            ("http://example.com?q", "http://example.com", "/?q"),
            // The structure the standard reads, as every browser does.
            ("http:\\\\example.com\\a", "http://example.com", "/a"),
            ("http:///a", "http://a", "/"),
            ("http:example.com/a", "http://example.com", "/a"),
            ("http://example.com/a\\b", "http://example.com", "/a/b"),
            (" http://example.com/pri\tvate ", "http://example.com", "/private"),
        ] {
            assert_eq!(target(url), (origin.to_owned(), path.to_owned()), "{url:?}");
        }
    }

    /// What is no URL at all is refused, and the error says why.
    #[test]
    fn what_is_no_url_is_refused_with_the_reason() {
        for (url, why) in [
            ("example.com/a", "no scheme"),
            ("//example.com/a", "no scheme"),
            ("/a", "no scheme"),
            ("", "no scheme"),
            ("ftp://example.com/a", "unsupported scheme \"ftp\""),
            ("mailto:bot@example.com", "unsupported scheme \"mailto\""),
            ("wss://example.com/", "unsupported scheme \"wss\""),
            ("http://", "no host"),
            ("http://user@/a", "no host"),
            ("http://exa mple.com/a", "invalid host \"exa mple.com\""),
            ("http://[::1/a", "invalid host \"[::1\": invalid IPv6 address"),
            ("http://[]/", "invalid host \"[]\""),
            ("http://[::1];p", "invalid host \"[::1];p\""),
            ("http://%zz/", "invalid host \"%zz\""),
            ("http://example.com:8080;p", "invalid port \"8080;p\""),
            ("http://example.com:99999/", "invalid port \"99999\""),
            ("http://u:p@example.com:8x/", "invalid port \"8x\""),
        ] {
            let got = Target::parse(url).map_err(|e| e.to_string());
            assert!(got.as_ref().is_err_and(|e| e.contains(why)), "{url:?}: {got:?}, expected {why:?}");
        }
    }

    /// The engine's split and the `url` crate read the same structure: over URLs built
    /// from awkward pieces (slashes and backslashes, user information, ports, white space,
    /// tabs, non-ASCII, stray `%`, dot segments, queries, fragments), every URL the `url`
    /// crate parses as http(s) is split, and its path as written names the parsed path
    /// (the fallback in [`Target::parse`] is never needed).
    #[test]
    fn the_split_and_the_url_crate_agree() {
        let starts =
            ["http://", "HTTPS://", "http:", "http:/", "http:\\", "http:/\\/", " http://", "http:\t//"];
        let authorities =
            ["example.com", "u:p@example.com:81", "a@b@example.com", "[::1]:8080", "ex\tample.com", ""];
        let paths = [
            "",
            "/",
            "/a/b",
            "\\a\\b",
            "/a/../b/./c",
            "/%2e%2E/x",
            "/\u{30c4}",
            "/%%41",
            "/a%4",
            "/a b",
            "/a\tb",
            "//a",
            "/a;b",
            "/\"<>`{}|^",
            "/a/..",
        ];
        let queries = ["", "?", "?q=\u{e9}", "?a b'c\\d", "?%", "?x#y"];
        let ends = ["", "#f", "#\\a?b", " ", "\n"];
        let mut parsed = 0;
        for start in starts {
            for authority in authorities {
                for path in paths {
                    for query in queries {
                        for end in ends {
                            let raw = format!("{start}{authority}{path}{query}{end}");
                            let Ok(url) = url::Url::parse(&raw) else { continue };
                            parsed += 1;
                            let split = robotsgate_rep::split_http_url(&raw);
                            let split = split.unwrap_or_else(|| panic!("{raw:?} parses but is not split"));
                            assert!(
                                names_the_same(&url, &split.path),
                                "{raw:?}: {:?} is not {url}",
                                split.path
                            );
                        }
                    }
                }
            }
        }
        assert!(parsed > 5000, "{parsed}");
    }

    /// The path as written always names the resource the parsed URL names; where it would
    /// not, the parsed path is taken.
    #[test]
    fn the_path_checked_is_the_path_requested() {
        let url = url::Url::parse("http://example.com/a/../b%20c?d%20e").unwrap();
        assert!(names_the_same(&url, "/a/../b c?d e"));
        assert!(names_the_same(&url, "/b%20c?d e"));
        assert!(!names_the_same(&url, "/a/b c?d e"));
        assert!(!names_the_same(&url, "/b c"));
        assert_eq!(requested(&url::Url::parse("http://example.com").unwrap()), "/");
    }
}
