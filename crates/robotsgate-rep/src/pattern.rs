//! Turning rule values and request paths into the octets that are compared.
//!
//! Each reading has its own idea of "the same octets":
//! - Google escapes the rule only: `%xx` escapes get upper-case hex digits and octets
//!   `>= 0x80` become `%XX`; the path is compared as it came.
//! - The RFC reading brings the rule *and* the path to one canonical form (RFC 9309
//!   §2.2.2 with RFC 3986 §6.2.2 normalisation):
//!   - octets that may not appear literally in a URI (non-ASCII, controls, space,
//!     `"<>\^`{|}`, a `%` that starts no escape, ...) are percent-encoded;
//!   - `%xx` escapes get upper-case hex; escapes of unreserved characters
//!     (`A-Z a-z 0-9 - . _ ~`) are decoded;
//!   - escapes of reserved characters stay escaped (`/a%2Fb` is not `/a/b`), except in
//!     the query, where only the query's own delimiters `&`, `=`, `+` (and `#`, `%`) stay
//!     escaped, so `?u=http%3A%2F%2Fx` is `?u=http://x` (the RFC's example table);
//!   - a literal `*` or `$` is always written `%2A` / `%24`, so that `%2A` in a rule
//!     matches a literal `*` in a URL while `*` in a rule stays a wildcard;
//!   - dot segments are removed from the path (`/a/../b` is `/b`).
//!
//! In a compiled rule, the byte `*` always means "any octets" and a final `$` is kept
//! apart as an anchor: [`Compiled`].

/// A byte range in an arena.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Span {
    pub start: u32,
    pub len: u32,
}

impl Span {
    #[inline]
    pub fn get<'a>(&self, arena: &'a [u8]) -> &'a [u8] {
        &arena[self.start as usize..(self.start + self.len) as usize]
    }
}

/// Appends `bytes` to `arena` and returns where they are.
pub(crate) fn push_span(arena: &mut Vec<u8>, bytes: &[u8]) -> Span {
    let start = arena.len() as u32;
    arena.extend_from_slice(bytes);
    Span { start, len: bytes.len() as u32 }
}

/// A rule value compiled for one reading, stored in an arena.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Pat {
    /// The octets to match, where `*` is a wildcard (never a literal asterisk); without
    /// the final `$`.
    pub span: Span,
    /// The pattern ended in `$`: it must match up to the end of the path.
    pub anchored: bool,
    /// Length of the compiled pattern in octets, `$` included: longer wins.
    pub priority: u32,
}

fn finish(arena: &[u8], start: usize, anchored: bool, priority: u32) -> Pat {
    Pat { span: Span { start: start as u32, len: (arena.len() - start) as u32 }, anchored, priority }
}

/// Whether both readings compile `value` to itself: only octets that are literal in a
/// URI or `*`, no `%`, `$` only at the end, no dot segment.
pub(crate) fn is_simple(value: &[u8]) -> bool {
    let body = value.strip_suffix(b"$").unwrap_or(value);
    let mut prev = 0u8;
    for &b in body {
        if CLASS[b as usize] & SIMPLE == 0 || (b == b'.' && prev == b'/') {
            return false;
        }
        prev = b;
    }
    true
}

/// Copies a value that [`is_simple`] into `arena`.
#[cfg(test)]
pub(crate) fn compile_simple(value: &[u8], arena: &mut Vec<u8>) -> Pat {
    let start = arena.len();
    let anchored = value.last() == Some(&b'$');
    arena.extend_from_slice(&value[..value.len() - anchored as usize]);
    finish(arena, start, anchored, value.len() as u32)
}

/// Compiles a rule value as Google's matcher reads it.
pub(crate) fn compile_google(value: &[u8], arena: &mut Vec<u8>) -> Pat {
    let start = arena.len();
    google_escape(value, arena);
    let priority = (arena.len() - start) as u32;
    let anchored = arena.len() > start && arena.last() == Some(&b'$');
    if anchored {
        arena.pop();
    }
    finish(arena, start, anchored, priority)
}

/// Compiles a rule value in the canonical RFC form (see the module docs).
pub(crate) fn compile_rfc(value: &[u8], arena: &mut Vec<u8>) -> Pat {
    let (value, anchored) = match value.split_last() {
        Some((b'$', rest)) => (rest, true),
        _ => (value, false),
    };
    let start = arena.len();
    canonicalize(value, true, arena);
    let priority = (arena.len() - start) as u32 + anchored as u32;
    finish(arena, start, anchored, priority)
}

const HEX: &[u8; 16] = b"0123456789ABCDEF";

#[inline]
fn hex_val(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[inline]
fn push_escaped(out: &mut Vec<u8>, b: u8) {
    out.extend_from_slice(&[b'%', HEX[(b >> 4) as usize], HEX[(b & 15) as usize]]);
}

/// The escape at `s[i..]`, if `s[i]` is `%` followed by two hex digits.
#[inline]
fn escape_at(s: &[u8], i: usize) -> Option<u8> {
    if s[i] != b'%' || i + 3 > s.len() {
        return None;
    }
    Some((hex_val(s[i + 1])? << 4) | hex_val(s[i + 2])?)
}

/// Google's `MaybeEscapePattern`: upper-case the hex digits of `%xx` escapes and escape
/// octets `>= 0x80`. Everything else is kept.
pub(crate) fn google_escape(value: &[u8], out: &mut Vec<u8>) {
    if !value.iter().any(|&b| b == b'%' || b >= 0x80) {
        out.extend_from_slice(value);
        return;
    }
    let mut i = 0;
    while i < value.len() {
        let b = value[i];
        if let Some(v) = escape_at(value, i) {
            push_escaped(out, v);
            i += 3;
            continue;
        }
        if b >= 0x80 {
            push_escaped(out, b);
        } else {
            out.push(b);
        }
        i += 1;
    }
}

// Byte classes for the RFC canonical form.
const UNRESERVED: u8 = 1;
/// Kept literally in both path and query (reserved characters allowed in a URI path or
/// query, other than `*` and `$`).
const LITERAL: u8 = 2;
/// An escape of this character is decoded in the query.
const QUERY_DECODE: u8 = 4;
/// Both readings keep this octet of a rule as it is (`LITERAL` or `*`).
const SIMPLE: u8 = 8;

const fn classes() -> [u8; 256] {
    let mut t = [0u8; 256];
    let mut c = 0;
    while c < 256 {
        let b = c as u8;
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'.' || b == b'_' || b == b'~' {
            t[c] = UNRESERVED | LITERAL;
        }
        c += 1;
    }
    let lit = b"!&'()+,;=:@/?";
    let mut i = 0;
    while i < lit.len() {
        t[lit[i] as usize] |= LITERAL;
        i += 1;
    }
    let mut c = 0;
    while c < 256 {
        if t[c] & LITERAL != 0 || c == b'*' as usize {
            t[c] |= SIMPLE;
        }
        c += 1;
    }
    let qd = b":/?@!'(),;";
    let mut i = 0;
    while i < qd.len() {
        t[qd[i] as usize] |= QUERY_DECODE;
        i += 1;
    }
    t
}

static CLASS: [u8; 256] = classes();

/// Writes the canonical form of `input` to `out`. In a rule (`rule == true`) a `*` is
/// a wildcard and kept as `*`; everywhere else `*` and `$` are literal octets.
pub(crate) fn canonicalize(input: &[u8], rule: bool, out: &mut Vec<u8>) {
    let start = out.len();
    let mut in_query = false;
    let mut query_at = None;
    let mut i = 0;
    while i < input.len() {
        // Copy the run of octets that stay as they are in one go.
        let run = input[i..]
            .iter()
            .position(|&b| CLASS[b as usize] & LITERAL == 0 || b == b'?' || b == b'*')
            .unwrap_or(input.len() - i);
        out.extend_from_slice(&input[i..i + run]);
        i += run;
        if i == input.len() {
            break;
        }
        let b = input[i];
        if b == b'?' && !in_query {
            in_query = true;
            query_at = Some(out.len());
            out.push(b'?');
            i += 1;
            continue;
        }
        if b == b'%' {
            if let Some(v) = escape_at(input, i) {
                let class = CLASS[v as usize];
                if class & UNRESERVED != 0 || (in_query && class & QUERY_DECODE != 0) {
                    out.push(v);
                } else {
                    push_escaped(out, v);
                }
                i += 3;
                continue;
            }
            push_escaped(out, b'%');
            i += 1;
            continue;
        }
        if b == b'*' && rule {
            out.push(b'*');
        } else if CLASS[b as usize] & LITERAL != 0 {
            out.push(b);
        } else {
            push_escaped(out, b);
        }
        i += 1;
    }
    let path_end = query_at.unwrap_or(out.len());
    if out.get(start) == Some(&b'/') && has_dot_segment(&out[start..path_end]) {
        let path = out[start..path_end].to_vec();
        let query = out[path_end..].to_vec();
        out.truncate(start);
        remove_dot_segments(&path, out);
        out.extend_from_slice(&query);
    }
}

/// Whether `path` has a `.` or `..` segment.
fn has_dot_segment(path: &[u8]) -> bool {
    path.split(|&b| b == b'/').any(|seg| seg == b"." || seg == b"..")
}

/// RFC 3986 §5.2.4 for an absolute path (starting with `/`).
fn remove_dot_segments(path: &[u8], out: &mut Vec<u8>) {
    let base = out.len();
    let mut segs = path[1..].split(|&b| b == b'/').peekable();
    out.push(b'/');
    while let Some(seg) = segs.next() {
        let last = segs.peek().is_none();
        match seg {
            b"." => {}
            b".." => {
                // Drop the last output segment (keep the leading '/').
                let body = &out[base..];
                let trimmed = body.len() - 1; // without the trailing '/'
                let cut = body[..trimmed].iter().rposition(|&b| b == b'/').unwrap_or(0);
                out.truncate(base + cut + 1);
            }
            _ => {
                out.extend_from_slice(seg);
                if !last {
                    out.push(b'/');
                }
            }
        }
    }
}

/// The canonical RFC form of a request path (with query), borrowed when it already is.
#[cfg(test)]
pub(crate) fn canonical_path(path: &[u8]) -> std::borrow::Cow<'_, [u8]> {
    canonical_path_and_forms(path).0
}

/// [`canonical_path`], and whether `path` has `//`, `%2F`, `%5C` or `\` before its query (a
/// [server form](crate::server_path)), found in the same pass over the path.
pub(crate) fn canonical_path_and_forms(path: &[u8]) -> (std::borrow::Cow<'_, [u8]>, bool) {
    match scan_canonical(path) {
        Some(forms) => (std::borrow::Cow::Borrowed(path), forms),
        None => {
            let mut out = Vec::with_capacity(path.len() + 16);
            canonicalize(path, false, &mut out);
            (std::borrow::Cow::Owned(out), crate::url::has_server_forms(path))
        }
    }
}

/// Fast test: nothing in `path` would change under [`canonicalize`] (as a URL).
#[cfg(test)]
fn is_canonical(path: &[u8]) -> bool {
    scan_canonical(path).is_some()
}

/// `None` when something in `path` would change under [`canonicalize`] (as a URL); else
/// whether the path has a server form (see [`canonical_path_and_forms`]).
fn scan_canonical(path: &[u8]) -> Option<bool> {
    let mut in_query = false;
    let mut forms = false;
    let mut i = 0;
    while i < path.len() {
        let b = path[i];
        match b {
            b'?' => in_query = true,
            b'/' if !in_query && path.get(i + 1) == Some(&b'/') => forms = true,
            b'%' => {
                let v = escape_at(path, i)?;
                let class = CLASS[v as usize];
                if class & UNRESERVED != 0 || (in_query && class & QUERY_DECODE != 0) {
                    return None;
                }
                if path[i + 1].is_ascii_lowercase() || path[i + 2].is_ascii_lowercase() {
                    return None;
                }
                forms |= !in_query && (v == b'/' || v == b'\\');
                i += 3;
                continue;
            }
            // A dot segment starts right after a '/'.
            b'.' if !in_query && i > 0 && path[i - 1] == b'/' => {
                let rest = &path[i + 1..];
                let next = rest.first().copied();
                let dots2 =
                    next == Some(b'.') && matches!(rest.get(1).copied(), None | Some(b'/') | Some(b'?'));
                if matches!(next, None | Some(b'/') | Some(b'?')) || dots2 {
                    return None;
                }
            }
            _ if CLASS[b as usize] & LITERAL == 0 => return None,
            _ => {}
        }
        i += 1;
    }
    Some(forms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cg(v: &str) -> (Vec<u8>, bool, u32) {
        let mut a = Vec::new();
        let p = compile_google(v.as_bytes(), &mut a);
        (p.span.get(&a).to_vec(), p.anchored, p.priority)
    }

    fn cr(v: &[u8]) -> (Vec<u8>, bool, u32) {
        let mut a = vec![b'x']; // a non-empty arena: spans must not assume start 0
        let p = compile_rfc(v, &mut a);
        (p.span.get(&a).to_vec(), p.anchored, p.priority)
    }

    #[test]
    fn simple_values_compile_to_themselves() {
        for v in ["/a/b?c=d&e", "/*.php$", "/a$", "*", "/a:b@c!d'e(f)g+h,i;j", "/fish*"] {
            assert!(is_simple(v.as_bytes()), "{v}");
            let mut a = Vec::new();
            let s = compile_simple(v.as_bytes(), &mut a);
            let got = (s.span.get(&a).to_vec(), s.anchored, s.priority);
            assert_eq!(got, cg(v), "{v}");
            assert_eq!(got, cr(v.as_bytes()), "{v}");
        }
        for v in ["/a%20", "/a$b", "/caf\u{e9}", "/a/../b", "/a b", "/a\"b"] {
            assert!(!is_simple(v.as_bytes()), "{v}");
        }
    }

    fn canon(s: &str) -> String {
        let mut out = Vec::new();
        canonicalize(s.as_bytes(), false, &mut out);
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn google_escape_examples() {
        assert_eq!(cg("/café%c3%a9$"), (b"/caf%C3%A9%C3%A9".to_vec(), true, 17));
        assert_eq!(cg("/50%off").0, b"/50%off");
        assert_eq!(cg("/a$b").0, b"/a$b");
        assert_eq!(cg("$"), (b"".to_vec(), true, 1));
    }

    #[test]
    fn rfc_table_rows() {
        // RFC 9309 §2.2.2: path, encoded path, path to match.
        assert_eq!(canon("/foo/bar?baz=quz"), "/foo/bar?baz=quz");
        assert_eq!(canon("/foo/bar?baz=http%3A%2F%2Ffoo.bar"), canon("/foo/bar?baz=http://foo.bar"));
        assert_eq!(canon("/foo/bar/\u{30c4}"), "/foo/bar/%E3%83%84");
        assert_eq!(canon("/foo/bar/%E3%83%84"), "/foo/bar/%E3%83%84");
        assert_eq!(canon("/foo/bar/%62%61%7A"), "/foo/bar/baz");
    }

    #[test]
    fn reserved_escapes_stay_in_path() {
        assert_eq!(canon("/a%2Fb"), "/a%2Fb");
        assert_eq!(canon("/a%2fb"), "/a%2Fb");
        assert_eq!(canon("/a?x=%26&y=%3d"), "/a?x=%26&y=%3D");
        assert_eq!(canon("/a*b$"), "/a%2Ab%24");
        assert_eq!(canon("/50%off"), "/50%25off");
        assert_eq!(canon("/a b"), "/a%20b");
    }

    #[test]
    fn dot_segments() {
        for (i, o) in [
            ("/public/../private", "/private"),
            ("/a/./b", "/a/b"),
            ("/a/b/..", "/a/"),
            ("/a/b/.", "/a/b/"),
            ("/../a", "/a"),
            ("/a/%2E%2E/b", "/b"),
            ("/a/..?x=/../", "/?x=/../"),
            ("/.well-known/x", "/.well-known/x"),
        ] {
            assert_eq!(canon(i), o, "{i}");
        }
    }

    #[test]
    fn rfc_rule_wildcards_and_literal_specials() {
        assert_eq!(cr(b"/path/file-with-a-%2A.html").0, b"/path/file-with-a-%2A.html");
        assert_eq!(cr(b"/a*b$"), (b"/a*b".to_vec(), true, 5));
        assert_eq!(cr(b"/a$b").0, b"/a%24b");
        assert_eq!(cr(b"/x/../y*"), (b"/y*".to_vec(), false, 3));
    }

    #[test]
    fn server_forms_found_with_the_canonical_form() {
        for p in [
            "/",
            "/a//b",
            "//",
            "/a?b//c",
            "/a%2Fb",
            "/a%2fb",
            "/a%5Cb",
            "/a%5cb",
            "/a\\b",
            "/a?x=\\",
            "/a?x=%2F",
            "/a%252F",
            "/a/./b//c",
            "/%41//",
            "/a b//c",
            "/caf\u{e9}",
            "/a%2",
            "/%2F?",
            "/a/b",
        ] {
            let forms = canonical_path_and_forms(p.as_bytes()).1;
            assert_eq!(forms, crate::server_path(p).is_some(), "{p:?}");
        }
    }

    #[test]
    fn fast_path_agrees_with_canonicalize() {
        for p in [
            "/",
            "/a/b?c=d&e",
            "/a%20b",
            "/a%2fb",
            "/a%41",
            "/./x",
            "/x/.",
            "/x/..",
            "/x/..y",
            "/.x",
            "/a?b=%3A",
            "/a?b=%26",
            "/a*",
            "/a$",
            "/caf\u{e9}",
            "/a?b/./c",
            "/%",
            "/%4",
        ] {
            let fast = is_canonical(p.as_bytes());
            assert_eq!(fast, canon(p) == p, "{p}");
        }
    }
}
