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
/// assert_eq!(path_of_url("//example.com/x"), "/x");
/// ```
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

/// A request path as [`crate::RobotsTxt::check`] takes it: starting with `/`, without
/// fragment. Anything else is read as a URL.
pub(crate) fn normalize_request_path(path: &str) -> Cow<'_, str> {
    if path.starts_with('/') && !path.starts_with("//") {
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
    }
}
