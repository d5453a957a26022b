//! The part of a URL that robots.txt rules are matched against.

use std::borrow::Cow;

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
