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

/// A request path as many origin servers see it: in the path (not the query), `%2F` and
/// `%5C` decoded to `/` and every run of `/` merged into one. Made by [`server_path`].
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
    /// A `%5C` (or `%5c`, an encoded `\`) was read as `/`.
    pub decoded_backslash: bool,
    /// A run of `/` was merged.
    pub merged_slashes: bool,
}

impl fmt::Display for ServerPath {
    /// `/private/x, once %2F is decoded and slashes are merged`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let steps: Vec<&str> = [
            (self.decoded_slash, "%2F is decoded"),
            (self.decoded_backslash, "%5C is read as /"),
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

/// Whether `path` has `//`, `%2F` or `%5C` (either case) before its query. A plain byte
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
            _ => {}
        }
    }
    false
}

/// The form of the request `path` (as [`crate::RobotsTxt::check`] takes it) that servers
/// which decode `%2F`, read `%5C` as `/` and merge slashes see, or `None` when the path
/// has none of `//`, `%2F` and `%5C` before its query (the path is its own server form).
/// Decoding is one level deep (`%252F` stays) and touches only these two escapes.
///
/// ```
/// use robotsgate_rep::server_path;
/// let s = server_path("/private%2Fsecret.html?a=%2F").unwrap();
/// assert_eq!(s.path, "/private/secret.html?a=%2F");
/// assert_eq!(server_path("//private///x").unwrap().path, "/private/x");
/// assert_eq!(server_path("/a%5cb").unwrap().path, "/a/b");
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
        assert_eq!(s("//a%2F%5Cb"), "/a/b, once %2F is decoded, %5C is read as / and slashes are merged");
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
