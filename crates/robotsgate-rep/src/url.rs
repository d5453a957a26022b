//! The part of a URL that robots.txt rules are matched against, and the form of a path
//! that common origin servers see (for the conservative profile).

use std::borrow::Cow;
use std::fmt;

/// The path, params and query of `url` (everything from the first `/`, `;` or `?` after
/// the authority, without the fragment), as Google's `GetPathParamsQuery` extracts it:
/// `/` when there is no path; a leading `/` is added before a bare `?query`.
///
/// ```
/// use robotsgate_rep::path_of_url;
/// assert_eq!(path_of_url("http://example.com"), "/");
/// assert_eq!(path_of_url("https://example.com/a/b?c=d#frag"), "/a/b?c=d");
/// assert_eq!(path_of_url("http://example.com?q=1"), "/?q=1");
/// // The path component of a URL may start with `//` (RFC 3986 §3.3): it stays whole.
/// assert_eq!(path_of_url("http://example.com//a/b"), "//a/b");
/// // A string that starts with `//` is a network-path reference: `//host/path`.
/// assert_eq!(path_of_url("//example.com/x"), "/x");
/// ```
///
/// This reads a *URL*. [`crate::RobotsTxt::check`] takes a *path*, and a path that starts
/// with `//` is a path there (`check(agent, "//a/b")` matches `//a/b`), not a URL.
pub fn path_of_url(url: &str) -> Cow<'_, str> {
    let bytes = url.as_bytes();
    let search_start = if bytes.starts_with(b"//") { 2 } else { 0 };
    let find_any =
        |from: usize| bytes[from..].iter().position(|b| matches!(b, b'/' | b'?' | b';')).map(|i| i + from);
    let early_path = find_any(search_start);
    let protocol_end = url[search_start..].find("://").map(|i| i + search_start);
    let protocol_end = match (early_path, protocol_end) {
        // A path, param or query before "://" means "://" is not the protocol.
        (Some(p), Some(e)) if p < e => search_start,
        (_, Some(e)) => e + 3,
        (_, None) => search_start,
    };
    let Some(path_start) = find_any(protocol_end.min(bytes.len())) else {
        return Cow::Borrowed("/");
    };
    let hash = url[search_start..].find('#').map(|i| i + search_start);
    if hash.is_some_and(|h| h < path_start) {
        return Cow::Borrowed("/");
    }
    let path_end = hash.unwrap_or(url.len());
    let path = &url[path_start..path_end];
    if bytes[path_start] != b'/' { Cow::Owned(format!("/{path}")) } else { Cow::Borrowed(path) }
}

/// An absolute `http` or `https` URL split the way the WHATWG URL standard splits one
/// (every browser does, and so does the `url` crate), its text kept as written. Made by
/// [`split_http_url`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpUrl<'a> {
    /// `"http"` or `"https"`.
    pub scheme: &'static str,
    /// The authority as written, `user:password@host:port`: only checked to name a host.
    pub authority: Cow<'a, str>,
    /// The path and query that robots.txt rules are matched against: no fragment, `/` when
    /// the URL has no path (a bare `?query` gets a `/` before it).
    pub path: Cow<'a, str>,
}

impl HttpUrl<'_> {
    /// The host as written: the authority without user information and port (an IPv6
    /// literal keeps its brackets).
    pub fn host(&self) -> &str {
        host_of(&self.authority)
    }
}

/// The host of an authority as written: after the last `@`, up to the first `:` outside
/// `[...]`.
fn host_of(authority: &str) -> &str {
    let hostport = match memchr::memrchr(b'@', authority.as_bytes()) {
        Some(at) => &authority[at + 1..],
        None => authority,
    };
    let mut in_brackets = false;
    for (i, b) in hostport.bytes().enumerate() {
        match b {
            b'[' => in_brackets = true,
            b']' => in_brackets = false,
            b':' if !in_brackets => return &hostport[..i],
            _ => {}
        }
    }
    hostport
}

/// `url` split as the WHATWG URL standard splits an `http` or `https` URL, or `None` when
/// it is not one (no scheme, another scheme, no host). Where the standard only *spells*
/// the URL differently from how it was written, the text is kept as written; where it
/// reads a different *structure* than a plain look at the text, its reading is followed,
/// because that is the request a browser or crawler makes:
///
/// - kept as written: characters a browser would percent-encode before sending (non-ASCII,
///   space, `"`, `<`, `>`, ...), a `%` that starts no escape, escapes in either case, and
///   dot segments (`/a/../b`). Each profile then reads the path its way: `google` as
///   given, as Google's library does (a raw `ツ` does not match the `%E3%83%84` its parser
///   makes of a rule), `rfc` percent-encoded and normalised first (RFC 9309 §2.2.2);
/// - read as the standard reads it: white space and control characters at either end and
///   tabs and line breaks anywhere are no part of the URL; any number of `/` or `\`
///   may come between `http:` and the host; the host ends at `/`, `\`, `?` or `#`, and the
///   host is what follows the last `@`; a `\` in the path is a `/`.
///
/// Whether the host is a valid host (IDNA, IPv4 and IPv6 forms) and the port a port is not
/// checked here: that takes a full URL parser, which the engine does without (the
/// `robotsgate` library checks both with the `url` crate).
///
/// For the URLs a crawler usually meets (`scheme://host/path?query#fragment`) the path is
/// the one [`path_of_url`] (Google's reading) gives.
///
/// ```
/// use robotsgate_rep::split_http_url;
///
/// let url = split_http_url("https://example.com/foo/bar/\u{30c4}?q=%%41#top").unwrap();
/// assert_eq!((url.scheme, url.host()), ("https", "example.com"));
/// assert_eq!(url.path, "/foo/bar/\u{30c4}?q=%%41");
/// assert_eq!(split_http_url("HTTP:\\\\user@example.com:8080\\a\\b").unwrap().path, "/a/b");
/// assert_eq!(split_http_url(" http://example.com?q ").unwrap().path, "/?q");
/// assert!(split_http_url("//example.com/a").is_none()); // no scheme
/// assert!(split_http_url("ftp://example.com/a").is_none());
/// assert!(split_http_url("http://user@/a").is_none()); // no host
/// ```
pub fn split_http_url(url: &str) -> Option<HttpUrl<'_>> {
    let url = url.trim_matches(|c: char| c <= ' ');
    if !url.bytes().any(|b| matches!(b, b'\t' | b'\n' | b'\r')) {
        return split_whole(url);
    }
    let kept: String = url.chars().filter(|c| !matches!(c, '\t' | '\n' | '\r')).collect();
    let parts = split_whole(&kept)?;
    Some(HttpUrl {
        scheme: parts.scheme,
        authority: Cow::Owned(parts.authority.into_owned()),
        path: Cow::Owned(parts.path.into_owned()),
    })
}

/// [`split_http_url`] for a URL without white space to remove. (Byte searches throughout:
/// this is no hot path, and sharing `str` pattern code with the check's could change how
/// the check is inlined.)
fn split_whole(url: &str) -> Option<HttpUrl<'_>> {
    let colon = memchr::memchr(b':', url.as_bytes())?;
    let scheme = &url[..colon];
    let scheme = if scheme.eq_ignore_ascii_case("http") {
        "http"
    } else if scheme.eq_ignore_ascii_case("https") {
        "https"
    } else {
        return None;
    };
    let rest = url[colon + 1..].trim_start_matches(['/', '\\']);
    let end = rest.bytes().position(|b| matches!(b, b'/' | b'\\' | b'?' | b'#')).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    if host_of(authority).is_empty() {
        return None;
    }
    let tail = &tail[..memchr::memchr(b'#', tail.as_bytes()).unwrap_or(tail.len())];
    let query_at = memchr::memchr(b'?', tail.as_bytes()).unwrap_or(tail.len());
    let (path, query) = tail.split_at(query_at);
    let slash_first = matches!(path.bytes().next(), Some(b'/' | b'\\'));
    let path = if slash_first && memchr::memchr(b'\\', path.as_bytes()).is_none() {
        Cow::Borrowed(tail)
    } else {
        let mut out = String::with_capacity(tail.len() + 1);
        if !slash_first {
            out.push('/');
        }
        out.extend(path.chars().map(|c| if c == '\\' { '/' } else { c }));
        out.push_str(query);
        Cow::Owned(out)
    };
    Some(HttpUrl { scheme, authority: Cow::Borrowed(authority), path })
}

/// The path a check matches, from what [`crate::RobotsTxt::check`] was given.
///
/// - A path (anything that starts with `/`) is taken as it is, without its fragment. This
///   includes a path that starts with `//`: `//a/b` is the path of
///   `http://example.com//a/b` (RFC 3986 §3.3), never a host `a` and a path `/b`.
/// - Anything else is not a path, and is read as a URL the way Google's
///   `GetPathParamsQuery` reads one ([`path_of_url`]): `http://x/y?q#f` gives `/y?q`, `?q`
///   gives `/?q`, the empty string gives `/`, and `example.com/a` gives `/a`.
pub(crate) fn normalize_request_path(path: &str) -> Cow<'_, str> {
    if path.starts_with('/') {
        match path.find('#') {
            Some(h) => Cow::Borrowed(&path[..h]),
            None => Cow::Borrowed(path),
        }
    } else {
        path_of_url(path)
    }
}

/// A request path as many origin servers see it: in the path (not the query), `%2F`,
/// `%5C` and `\` read as `/` and every run of `/` merged into one. Made by [`server_path`].
///
/// RFC 9309 matches a path literally, so `/private%2Fx` and `//private/x` do not match
/// `Disallow: /private/`; but servers that decode `%2F` (many do, some only when asked
/// to), that take `\` for `/` (IIS and others) or that merge slashes (nginx by default,
/// many frameworks) serve `/private/x` for them. The conservative profile disallows a path
/// whose server form is disallowed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerPath {
    /// The rewritten path, with the query unchanged.
    pub path: String,
    /// A `%2F` (or `%2f`) was decoded.
    pub decoded_slash: bool,
    /// A `\`, or `%5C` (or `%5c`, an encoded `\`), was read as `/`.
    pub decoded_backslash: bool,
    /// A run of `/` was merged.
    pub merged_slashes: bool,
}

impl fmt::Display for ServerPath {
    /// `/private/x, once %2F is decoded and slashes are merged`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps: Vec<&str> = [
            (self.decoded_slash, "%2F is decoded"),
            (self.decoded_backslash, "%5C or \\ is read as /"),
            (self.merged_slashes, "slashes are merged"),
        ]
        .iter()
        .filter(|(on, _)| *on)
        .map(|(_, s)| *s)
        .collect();
        write!(f, "{}, once ", self.path)?;
        for (i, step) in steps.iter().enumerate() {
            match i {
                0 => {}
                _ if i + 1 == steps.len() => f.write_str(" and ")?,
                _ => f.write_str(", ")?,
            }
            f.write_str(step)?;
        }
        Ok(())
    }
}

/// The escape at `p[i..]` if it is `%2F` or `%5C` (either case): `(true, _)` for a slash,
/// `(_, true)` for a backslash.
#[inline]
fn separator_escape(p: &[u8], i: usize) -> Option<bool> {
    if p.len() < i + 3 {
        return None;
    }
    match (p[i + 1], p[i + 2] | 0x20) {
        (b'2', b'f') => Some(true),
        (b'5', b'c') => Some(false),
        _ => None,
    }
}

/// Whether `path` has `//`, `%2F`, `%5C` (either case) or a raw `\` before its query. A plain byte
/// loop that stops at `?` (request paths are short). The conservative check gets this
/// from the pass that brings the path to its RFC form
/// ([`crate::pattern::canonical_path_and_forms`]) and only calls this for paths that were
/// not in that form already.
#[inline]
pub(crate) fn has_server_forms(path: &[u8]) -> bool {
    for (i, &b) in path.iter().enumerate() {
        match b {
            b'?' => return false,
            b'/' if path.get(i + 1) == Some(&b'/') => return true,
            b'%' if separator_escape(path, i).is_some() => return true,
            b'\\' => return true,
            _ => {}
        }
    }
    false
}

/// The form of the request `path` (as [`crate::RobotsTxt::check`] takes it) that servers
/// which decode `%2F`, read `\` and `%5C` as `/` and merge slashes see, or `None` when the
/// path has none of `//`, `%2F`, `%5C` and `\` before its query (the path is its own server
/// form). Decoding is one level deep (`%252F` stays) and touches only these two escapes.
///
/// ```
/// use robotsgate_rep::server_path;
/// let s = server_path("/private%2Fsecret.html?a=%2F").unwrap();
/// assert_eq!(s.path, "/private/secret.html?a=%2F");
/// assert_eq!(server_path("//private///x").unwrap().path, "/private/x");
/// assert_eq!(server_path("/a%5cb").unwrap().path, "/a/b");
/// assert_eq!(server_path("/a\\b").unwrap().path, "/a/b");
/// assert!(server_path("/private/x?u=http://a//b").is_none());
/// ```
#[inline]
pub fn server_path(path: &str) -> Option<ServerPath> {
    if has_server_forms(path.as_bytes()) { Some(rewrite(path)) } else { None }
}

/// [`server_path`] for a path that has a server form.
#[cold]
fn rewrite(path: &str) -> ServerPath {
    let bytes = path.as_bytes();
    let end = memchr::memchr(b'?', bytes).unwrap_or(bytes.len());
    let p = &bytes[..end];
    let mut out = ServerPath {
        path: String::with_capacity(path.len()),
        decoded_slash: false,
        decoded_backslash: false,
        merged_slashes: false,
    };
    let mut buf = Vec::with_capacity(path.len());
    let mut i = 0;
    while i < p.len() {
        let b = if p[i] == b'%'
            && let Some(slash) = separator_escape(p, i)
        {
            if slash {
                out.decoded_slash = true;
            } else {
                out.decoded_backslash = true;
            }
            i += 3;
            b'/'
        } else if p[i] == b'\\' {
            out.decoded_backslash = true;
            i += 1;
            b'/'
        } else {
            i += 1;
            p[i - 1]
        };
        if b == b'/' && buf.last() == Some(&b'/') {
            out.merged_slashes = true;
            continue;
        }
        buf.push(b);
    }
    buf.extend_from_slice(&bytes[end..]);
    // Only ASCII was replaced or dropped, so the text is still UTF-8.
    out.path = match String::from_utf8(buf) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn google_get_path_params_query_cases() {
        // The cases of Google's robots_test.cc (GetPathParamsQuery).
        for (url, path) in [
            ("", "/"),
            ("http://www.example.com", "/"),
            ("http://www.example.com/", "/"),
            ("http://www.example.com/a", "/a"),
            ("http://www.example.com/a/", "/a/"),
            ("http://www.example.com/a/b?c=http://d.e/", "/a/b?c=http://d.e/"),
            ("http://www.example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
            ("example.com", "/"),
            ("example.com/", "/"),
            ("example.com/a", "/a"),
            ("example.com/a/", "/a/"),
            ("example.com/a/b?c=d&e=f#fragment", "/a/b?c=d&e=f"),
            ("a", "/"),
            ("a/", "/"),
            ("/a", "/a"),
            ("a/b", "/b"),
            ("example.com?a", "/?a"),
            ("example.com/a;b#c", "/a;b"),
            ("//a/b/c", "/b/c"),
        ] {
            assert_eq!(path_of_url(url), path, "{url:?}");
        }
    }

    #[test]
    fn request_paths() {
        assert_eq!(normalize_request_path("/a#b"), "/a");
        assert_eq!(normalize_request_path("?q"), "/?q");
        assert_eq!(normalize_request_path(""), "/");
        assert_eq!(normalize_request_path("http://x/y"), "/y");
        assert_eq!(normalize_request_path("http://x/y?q#f"), "/y?q");
        assert_eq!(normalize_request_path("example.com/a"), "/a");
    }

    /// Issue 22.1: a path that starts with `//` is a path, not a network-path reference.
    #[test]
    fn double_slash_paths_stay_whole() {
        for (path, expect) in [
            ("//a/b", "//a/b"),
            ("//", "//"),
            ("//a?b", "//a?b"),
            ("///a", "///a"),
            ("//a/b#c", "//a/b"),
            ("//a#b/c", "//a"),
        ] {
            assert_eq!(normalize_request_path(path), expect, "{path:?}");
        }
    }

    fn split(url: &str) -> Option<(&'static str, String, String)> {
        split_http_url(url).map(|u| (u.scheme, u.host().to_owned(), u.path.into_owned()))
    }

    /// Issue 31.1: what browsers and Google's library accept is split, its text as written.
    #[test]
    fn http_urls_split_as_browsers_split_them() {
        for (url, host, path) in [
            ("http://example.com/foo/bar/\u{30c4}", "example.com", "/foo/bar/\u{30c4}"),
            ("http://example.com/a/b/index.html\u{e9}", "example.com", "/a/b/index.html\u{e9}"),
            ("http://example.com/\u{e9}%E3%83%84%4", "example.com", "/\u{e9}%E3%83%84%4"),
            ("http://example.com//%41~%%41index.htm", "example.com", "//%41~%%41index.htm"),
            ("http://example.com/%", "example.com", "/%"),
            ("http://example.com/a b\"<>`{}|^[]", "example.com", "/a b\"<>`{}|^[]"),
            ("http://example.com/a/../b/./c", "example.com", "/a/../b/./c"),
            ("http://example.com/a?b\\c d#e", "example.com", "/a?b\\c d"),
            ("https://user:pw@[::1]:8443/x;y?z", "[::1]", "/x;y?z"),
            ("HTTPS://Example.COM", "Example.COM", "/"),
            ("http://example.com?q=1", "example.com", "/?q=1"),
            ("http://example.com#a/b", "example.com", "/"),
            ("http://example.com:/", "example.com", "/"),
            ("http://a@b@c/d", "c", "/d"),
            ("http://us;er@example.com/a", "example.com", "/a"),
            ("http://example.com;a/b", "example.com;a", "/b"),
            ("http://exa mple.com/a", "exa mple.com", "/a"),
            ("http://[::1];p:80/a", "[::1];p", "/a"),
            ("http://[::1/a", "[::1", "/a"),
            // The structure the standard reads: slashes and backslashes before the host, a
            // backslash in the path, white space at the ends, tabs and line breaks.
            ("http:\\\\example.com\\a\\b?c\\d", "example.com", "/a/b?c\\d"),
            ("http:example.com/a", "example.com", "/a"),
            ("http:/example.com/a", "example.com", "/a"),
            ("http:///a", "a", "/"),
            ("http://example.com\\a", "example.com", "/a"),
            (" \u{1}http://example.com/a \n", "example.com", "/a"),
            ("http://exa\tmple.com/pri\nvate/x\r", "example.com", "/private/x"),
        ] {
            let (_, h, p) = split(url).unwrap_or_else(|| panic!("{url:?} not split"));
            assert_eq!((h.as_str(), p.as_str()), (host, path), "{url:?}");
        }
        assert_eq!(split("HTTPS://Example.COM").map(|s| s.0), Some("https"));
        assert_eq!(split("hTTp://example.com").map(|s| s.0), Some("http"));
        // Borrowed when nothing is rewritten.
        assert!(matches!(
            split_http_url("http://example.com/a?b").map(|u| u.path),
            Some(Cow::Borrowed("/a?b"))
        ));
        for not_http in [
            "",
            "example.com/a",
            "//example.com/a",
            "/a",
            "ftp://example.com/a",
            "mailto:a@example.com",
            "1http://example.com/",
            "http",
            "http:",
            "http://",
            "http:///",
            "http://user@/a",
            "http://:80/a",
            "http://?q",
        ] {
            assert_eq!(split(not_http), None, "{not_http:?}");
        }
    }

    /// The URLs of Google's GetPathParamsQuery test that are http URLs: both readings give
    /// the same path.
    #[test]
    fn split_agrees_with_googles_reading_on_plain_urls() {
        for url in [
            "http://www.example.com",
            "http://www.example.com/",
            "http://www.example.com/a",
            "http://www.example.com/a/",
            "http://www.example.com/a/b?c=http://d.e/",
            "http://www.example.com/a/b?c=d&e=f#fragment",
            "http://example.com//a/b",
            "https://example.com:8080///x",
            "http://example.com/caf\u{e9}?q=%",
        ] {
            assert_eq!(split_http_url(url).map(|u| u.path), Some(path_of_url(url)), "{url:?}");
        }
    }

    fn server(path: &str) -> Option<(String, bool, bool, bool)> {
        server_path(path).map(|s| (s.path, s.decoded_slash, s.decoded_backslash, s.merged_slashes))
    }

    #[test]
    fn server_paths() {
        let some = |p: &str, d: bool, b: bool, m: bool| Some((p.to_owned(), d, b, m));
        assert_eq!(server("/private%2Fsecret.html"), some("/private/secret.html", true, false, false));
        assert_eq!(server("/private%2fsecret.html"), some("/private/secret.html", true, false, false));
        assert_eq!(server("/private%5Csecret.html"), some("/private/secret.html", false, true, false));
        assert_eq!(server("/private%5csecret.html"), some("/private/secret.html", false, true, false));
        assert_eq!(server("//private/secret.html"), some("/private/secret.html", false, false, true));
        assert_eq!(server("///private////x"), some("/private/x", false, false, true));
        assert_eq!(server("/%2F%2fprivate%5C/x"), some("/private/x", true, true, true));
        assert_eq!(server("//"), some("/", false, false, true));
        assert_eq!(server("//a?b//c%2F"), some("/a?b//c%2F", false, false, true));
        assert_eq!(server("/caf\u{e9}//x"), some("/caf\u{e9}/x", false, false, true));
        for plain in ["/", "/a/b", "/a%2", "/a%2G", "/a%252F", "/a?x=//%2F", "/%", "/a%5", "/a/%41"] {
            assert_eq!(server(plain), None, "{plain:?}");
        }
    }

    #[test]
    fn server_path_display() {
        let s = |p: &str| server_path(p).map(|s| s.to_string()).unwrap_or_default();
        assert_eq!(s("//x"), "/x, once slashes are merged");
        assert_eq!(s("/a%2Fb"), "/a/b, once %2F is decoded");
        assert_eq!(
            s("//a%2F%5Cb"),
            "/a/b, once %2F is decoded, %5C or \\ is read as / and slashes are merged"
        );
        assert_eq!(s("/a\\b"), "/a/b, once %5C or \\ is read as /");
    }

    #[test]
    fn double_slash_in_the_path_of_a_url() {
        for (url, path) in [
            ("http://example.com//a/b", "//a/b"),
            ("http://example.com//", "//"),
            ("http://example.com//a?b", "//a?b"),
            ("https://example.com:8080///x", "///x"),
            ("http://example.com//a#b", "//a"),
        ] {
            assert_eq!(path_of_url(url), path, "{url:?}");
            // And the path, given to the check, is taken as it is.
            assert_eq!(normalize_request_path(&path_of_url(url)), path, "{url:?}");
        }
    }
}
