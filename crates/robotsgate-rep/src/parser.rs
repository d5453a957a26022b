//! Line-level robots.txt parsing: splits a body into lines, each line into a key and a
//! value, and reports what it found to a [`Handler`], in the style of Google's
//! `ParseRobotsTxt`. No allocation, no I/O; the caller decides what to keep.
//!
//! Two [`Reading`]s read the same bytes:
//! - [`Reading::Google`] mirrors Google's open-source parser: keys are matched by prefix
//!   and with a few common typos, a missing `:` is accepted when the line has exactly two
//!   words, a line is cut at the first NUL byte and after 16,663 bytes.
//! - [`Reading::Rfc`] is a strict RFC 9309 reading: the key must be exactly one of the
//!   known names (case-insensitive) followed by `:`; nothing is cut.
//!
//! Both skip a leading UTF-8 byte order mark, split lines at CR, LF or CRLF, drop `#`
//! comments and surrounding whitespace, and only look at the first
//! [`MAX_ROBOTS_TXT_BYTES`] bytes. When that limit falls inside a line, the line is
//! dropped rather than read in part ([`Handler::cut_by_limit`]).

use memchr::{memchr, memchr2, memrchr2};

/// Only this many bytes of a robots.txt body are read (500 KiB, as Google documents and
/// RFC 9309 allows); the rest is ignored. A line that the limit cuts is dropped: its
/// first part could read as a broader rule than the one written (`Allow: /public` cut to
/// `Allow: /p`).
///
/// Google's open-source library has no such limit (it reads the whole body); its
/// documentation states the limit, and this engine applies it in every profile.
pub const MAX_ROBOTS_TXT_BYTES: usize = 500 * 1024;

/// Google's parser keeps at most this many bytes of a line (`2083 * 8 - 1`).
pub const GOOGLE_MAX_LINE_BYTES: usize = 2083 * 8 - 1;

/// The product token of `agent` given as a `User-Agent` product: its leading letters, `-`
/// and `_` (RFC 9309 §2.2.1) when a version (`/`) or a comment (space) follows them, so
/// that `ExampleBot/1.0 (+https://example.com/bot)` is checked as `ExampleBot` and not
/// silently as an agent no group names. Anything else is taken as it is: a token, or an
/// agent that is none (`MJ12bot`, which Google's library matches with no group).
///
/// ```
/// use robotsgate_rep::product_token;
/// assert_eq!(product_token("ExampleBot/1.0 (+https://example.com/bot)"), "ExampleBot");
/// assert_eq!(product_token("Googlebot-Image"), "Googlebot-Image");
/// assert_eq!(product_token("MJ12bot"), "MJ12bot");
/// ```
pub fn product_token(agent: &str) -> &str {
    let bytes = agent.as_bytes();
    match bytes.iter().position(|&b| !(b.is_ascii_alphabetic() || b == b'-' || b == b'_')) {
        // The bytes before `end` are ASCII: a char boundary.
        Some(end) if end > 0 && matches!(bytes[end], b'/' | b' ') => agent.get(..end).unwrap_or(agent),
        _ => agent,
    }
}

/// Which reading of the robots.txt syntax applies, and which one a verdict comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reading {
    /// Google's interpretation.
    Google,
    /// The strict RFC 9309 reading.
    Rfc,
}

impl Reading {
    /// `"google"` or `"rfc"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reading::Google => "google",
            Reading::Rfc => "rfc",
        }
    }
}

/// The directive a line carries, as classified by a [`Reading`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Key<'a> {
    /// `user-agent`: starts or continues a group.
    UserAgent,
    /// `allow`: a rule.
    Allow,
    /// `disallow`: a rule.
    Disallow,
    /// `sitemap`: a sitemap URL, independent of groups.
    Sitemap,
    /// `crawl-delay`: a non-standard pacing hint for the current group (seconds between
    /// requests).
    CrawlDelay,
    /// `request-rate`: a non-standard pacing hint for the current group (`1/10s`: one
    /// request per ten seconds, optionally for a time of day: `1/10s 0600-1800`).
    RequestRate,
    /// `content-usage`: an AI-usage preference (draft-ietf-aipref-attach-05), exactly this
    /// key (without case) in both readings.
    ContentUsage,
    /// `content-signal`: Cloudflare's Content Signals, exactly this key (without case) in
    /// both readings.
    ContentSignal,
    /// Any other key, as written (trimmed).
    Other(&'a [u8]),
}

/// Why a non-empty line produced no key/value pair.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Malformed {
    /// No `:` separator (and, for Google, not exactly two words either).
    NoSeparator,
    /// The text before `:` is empty.
    EmptyKey,
}

/// Receives what the parser finds, line by line, in file order.
///
/// Line numbers are 1-based and count CR, LF and CRLF as one line break each.
pub trait Handler {
    /// A `key: value` line. `value` is trimmed, without the comment, and may be empty.
    fn line(&mut self, number: u32, key: Key<'_>, value: &[u8]);

    /// A line with content that is not a `key: value` pair. Comment-only and blank lines
    /// are not reported.
    fn malformed(&mut self, number: u32, line: &[u8], why: Malformed) {
        let _ = (number, line, why);
    }

    /// Google's reading cut this line after [`GOOGLE_MAX_LINE_BYTES`] bytes.
    fn line_cut(&mut self, number: u32, full_len: usize) {
        let _ = (number, full_len);
    }

    /// The body is longer than [`MAX_ROBOTS_TXT_BYTES`] and the limit falls inside line
    /// `number`, which is dropped (not reported to [`Handler::line`]); `kept` is its part
    /// before the limit. Called once, after every other line.
    fn cut_by_limit(&mut self, number: u32, kept: &[u8]) {
        let _ = (number, kept);
    }
}

/// Facts about a whole parse that no single line carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BodyFacts {
    /// Bytes of the body that were read (at most [`MAX_ROBOTS_TXT_BYTES`]).
    pub parsed_bytes: usize,
    /// Bytes beyond the limit that were ignored.
    pub ignored_bytes: usize,
    /// A UTF-8 byte order mark (or a prefix of one) was skipped at the start.
    pub bom: bool,
    /// Number of lines seen (a line cut by the limit included).
    pub lines: u32,
    /// The line the [`MAX_ROBOTS_TXT_BYTES`] limit fell inside, which was dropped.
    pub cut_line: Option<u32>,
}

/// The part of `body` that is read: the first [`MAX_ROBOTS_TXT_BYTES`] bytes, without a
/// line the limit cuts; and that line's part before the limit, if there is one. A line
/// whose line break comes right after the limit is whole.
///
/// `truncated`: `body` is the beginning of a longer file, whose next byte was not kept (a
/// fetcher keeps the first [`MAX_ROBOTS_TXT_BYTES`]). Its last line is then cut unless
/// `body` ends with a line break: without the next byte, a line whose break is that byte
/// cannot be told from a cut one, and is taken as cut.
pub(crate) fn split_at_limit(body: &[u8], truncated: bool) -> (&[u8], Option<&[u8]>) {
    let is_break = |b: u8| b == b'\n' || b == b'\r';
    let cut = match body.len() {
        n if n > MAX_ROBOTS_TXT_BYTES => {
            let cut = MAX_ROBOTS_TXT_BYTES;
            if is_break(body[cut]) || is_break(body[cut - 1]) {
                return (&body[..cut], None);
            }
            cut
        }
        n if truncated && body.last().is_some_and(|&b| !is_break(b)) => n,
        _ => return (body, None),
    };
    let start = memrchr2(b'\n', b'\r', &body[..cut]).map_or(0, |i| i + 1);
    (&body[..start], Some(&body[start..cut]))
}

/// Parses `body` in `reading`, reporting to `handler`.
///
/// ```
/// use robotsgate_rep::parser::{parse, Reading, Handler, Key};
///
/// struct Count(usize);
/// impl Handler for Count {
///     fn line(&mut self, _: u32, key: Key<'_>, _: &[u8]) {
///         if key == Key::Disallow { self.0 += 1 }
///     }
/// }
/// let mut c = Count(0);
/// parse(b"User-agent: *\nDisallow: /a\ndisalow: /b\n", Reading::Google, &mut c);
/// assert_eq!(c.0, 2); // Google accepts the typo
/// ```
pub fn parse<H: Handler>(body: &[u8], reading: Reading, handler: &mut H) -> BodyFacts {
    let (facts, kept) = read_limited(body, false, |number, line| parse_line(number, line, reading, handler));
    if let (Some(number), Some(kept)) = (facts.cut_line, kept) {
        handler.cut_by_limit(number, kept);
    }
    facts
}

/// Calls `f` for every line of the part of `body` that is read (see [`split_at_limit`];
/// a leading BOM skipped); returns the facts and the cut line's part before the limit.
fn read_limited<'a>(
    body: &'a [u8],
    truncated: bool,
    f: impl FnMut(u32, &'a [u8]),
) -> (BodyFacts, Option<&'a [u8]>) {
    let mut facts = BodyFacts::default();
    let cut = body.len().min(MAX_ROBOTS_TXT_BYTES);
    facts.parsed_bytes = cut;
    facts.ignored_bytes = body.len() - cut;
    let (read, mut kept) = split_at_limit(body, truncated);
    let (read, mut bom) = strip_bom(read);
    if read.is_empty()
        && let Some(k) = kept
    {
        // The cut line is the first: the BOM is skipped from it.
        let (k, b) = strip_bom(k);
        (kept, bom) = (Some(k), b);
    }
    facts.bom = bom;
    facts.lines = for_each_line(read, f);
    if kept.is_some() {
        facts.cut_line = Some(facts.lines);
    }
    (facts, kept)
}

/// Skips a leading UTF-8 BOM, or a leading prefix of one, as Google's parser does.
fn strip_bom(body: &[u8]) -> (&[u8], bool) {
    const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];
    let n = body.iter().zip(BOM.iter()).take_while(|(a, b)| a == b).count();
    (&body[n..], n > 0)
}

/// Calls `f(number, line)` for every non-empty line of `body` (without its line
/// break); returns the number of lines. Line numbers count CR, LF and CRLF as one break.
pub(crate) fn for_each_line<'a>(body: &'a [u8], mut f: impl FnMut(u32, &'a [u8])) -> u32 {
    let mut number = 1u32;
    let mut start = 0;
    while let Some(off) = memchr2(b'\n', b'\r', &body[start..]) {
        let end = start + off;
        if end > start {
            f(number, &body[start..end]);
        }
        // The run of line breaks: each CR or LF is one, except an LF right after a CR.
        let mut i = end;
        let mut prev = 0u8;
        while let Some(&b) = body.get(i) {
            match b {
                b'\n' if prev == b'\r' => {}
                b'\n' | b'\r' => number += 1,
                _ => break,
            }
            prev = b;
            i += 1;
        }
        start = i;
    }
    if start < body.len() {
        f(number, &body[start..]);
    }
    number
}

/// ASCII whitespace as C's `isspace` sees it: space, `\t`, `\n`, `\v`, `\f`, `\r`.
#[inline]
pub(crate) fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

#[inline]
pub(crate) fn trim_start(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_space(*first) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

#[inline]
pub(crate) fn trim(mut s: &[u8]) -> &[u8] {
    while let [first, rest @ ..] = s {
        if is_space(*first) {
            s = rest;
        } else {
            break;
        }
    }
    while let [rest @ .., last] = s {
        if is_space(*last) {
            s = rest;
        } else {
            break;
        }
    }
    s
}

fn parse_line<H: Handler>(number: u32, line: &[u8], reading: Reading, handler: &mut H) {
    let line = match reading {
        Reading::Google => google_cut(number, line, handler),
        Reading::Rfc => line,
    };
    match split_key_value(line, reading) {
        Ok(Some((key, value))) => handler.line(number, classify(key, reading), value),
        Ok(None) => {}
        Err((content, why)) => handler.malformed(number, content, why),
    }
}

/// Google copies each line into a C string buffer: it ends at the first NUL and holds
/// at most [`GOOGLE_MAX_LINE_BYTES`] bytes.
#[inline]
fn google_cut<'a, H: Handler>(number: u32, mut line: &'a [u8], handler: &mut H) -> &'a [u8] {
    if line.len() > GOOGLE_MAX_LINE_BYTES {
        handler.line_cut(number, line.len());
        line = &line[..GOOGLE_MAX_LINE_BYTES];
    }
    if let Some(nul) = memchr(0, line) {
        line = &line[..nul];
    }
    line
}

/// A line's key and value: `Ok(None)` for blank and comment-only lines, `Err` with the
/// line's content for a line that is not `key: value`.
#[allow(clippy::type_complexity)]
#[inline]
pub(crate) fn split_key_value(
    mut line: &[u8],
    reading: Reading,
) -> Result<Option<(&[u8], &[u8])>, (&[u8], Malformed)> {
    // One pass for the comment and the first ':' (short lines are the rule: no memchr).
    let mut colon = None;
    if line.len() <= 64 {
        for (i, &b) in line.iter().enumerate() {
            if b == b'#' {
                line = &line[..i];
                break;
            }
            if b == b':' && colon.is_none() {
                colon = Some(i);
            }
        }
    } else {
        if let Some(hash) = memchr(b'#', line) {
            line = &line[..hash];
        }
        colon = memchr(b':', line);
    }
    let start = line.len() - trim_start(line).len();
    let line = trim(line);
    if line.is_empty() {
        return Ok(None);
    }
    let (key, value) = match colon.map(|c| c - start) {
        Some(colon) => (trim(&line[..colon]), trim(&line[colon + 1..])),
        None => match reading {
            Reading::Rfc => return Err((line, Malformed::NoSeparator)),
            // Google accepts whitespace instead of ':' when the line has exactly two words.
            Reading::Google => match split_two_words(line) {
                Some(kv) => kv,
                None => return Err((line, Malformed::NoSeparator)),
            },
        },
    };
    if key.is_empty() {
        return Err((line, Malformed::EmptyKey));
    }
    Ok(Some((key, value)))
}

/// What one line says in each reading: `(key, value)` or nothing.
pub(crate) type LineView<'a> = Option<(Key<'a>, &'a [u8])>;

/// Parses `body` once for both readings, calling `f(line number, google, rfc)` for every
/// line that is a `key: value` pair in at least one of them.
/// Also returns the part before the limit of the line the limit cuts, if any (see
/// [`Handler::cut_by_limit`]).
pub(crate) fn parse_dual<'a>(
    body: &'a [u8],
    truncated: bool,
    mut f: impl FnMut(u32, LineView<'a>, LineView<'a>),
) -> (BodyFacts, Option<&'a [u8]>) {
    struct Quiet;
    impl Handler for Quiet {
        fn line(&mut self, _: u32, _: Key<'_>, _: &[u8]) {}
    }
    read_limited(body, truncated, |number, line| {
        let rfc = split_key_value(line, Reading::Rfc);
        let gline = google_cut(number, line, &mut Quiet);
        let google = if gline.len() == line.len() {
            match rfc {
                Ok(kv) => Ok(kv),
                Err((_, Malformed::NoSeparator)) => split_key_value(line, Reading::Google),
                Err(e) => Err(e),
            }
        } else {
            split_key_value(gline, Reading::Google)
        };
        let g = google.ok().flatten().map(|(k, v)| (classify(k, Reading::Google), v));
        let r = rfc.ok().flatten().map(|(k, v)| (classify(k, Reading::Rfc), v));
        if g.is_some() || r.is_some() {
            f(number, g, r);
        }
    })
}

fn split_two_words(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let white = |b: &u8| *b == b' ' || *b == b'\t';
    let sep = line.iter().position(white)?;
    // The value starts after the spaces and tabs (Google's `kWhite`) only: another byte
    // `isspace` takes (`\v`, `\f`, `\r`) begins a word, so `Allow \v *` is three words.
    let rest = &line[sep..];
    let value = &rest[rest.iter().take_while(|b| white(b)).count()..];
    if value.iter().any(white) {
        return None;
    }
    Some((&line[..sep], trim(value)))
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

/// Classifies a (trimmed, non-empty) key.
pub fn classify(key: &[u8], reading: Reading) -> Key<'_> {
    match reading {
        Reading::Google => {
            let p = |prefix: &[u8]| starts_with_ignore_case(key, prefix);
            if p(b"user-agent") || p(b"useragent") || p(b"user agent") {
                Key::UserAgent
            } else if p(b"allow") {
                Key::Allow
            } else if p(b"disallow")
                || p(b"dissallow")
                || p(b"dissalow")
                || p(b"disalow")
                || p(b"diasllow")
                || p(b"disallaw")
            {
                Key::Disallow
            } else if p(b"sitemap") || p(b"site-map") {
                Key::Sitemap
            } else if key.eq_ignore_ascii_case(b"crawl-delay") {
                Key::CrawlDelay
            } else if key.eq_ignore_ascii_case(b"request-rate") {
                Key::RequestRate
            } else {
                usage_key(key)
            }
        }
        Reading::Rfc => {
            let is = |name: &[u8]| key.eq_ignore_ascii_case(name);
            if is(b"user-agent") {
                Key::UserAgent
            } else if is(b"allow") {
                Key::Allow
            } else if is(b"disallow") {
                Key::Disallow
            } else if is(b"sitemap") {
                Key::Sitemap
            } else if is(b"crawl-delay") {
                Key::CrawlDelay
            } else if is(b"request-rate") {
                Key::RequestRate
            } else {
                usage_key(key)
            }
        }
    }
}

/// `content-usage`, `content-signal` or another key: neither reading guesses at typos of
/// these (Google's parser does not know them).
#[inline]
fn usage_key(key: &[u8]) -> Key<'_> {
    if key.eq_ignore_ascii_case(b"content-usage") {
        Key::ContentUsage
    } else if key.eq_ignore_ascii_case(b"content-signal") {
        Key::ContentSignal
    } else {
        Key::Other(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Default)]
    struct Rec(Vec<(u32, String, String)>, Vec<u32>);
    impl Handler for Rec {
        fn line(&mut self, n: u32, key: Key<'_>, value: &[u8]) {
            let k = match key {
                Key::Other(k) => format!("other:{}", String::from_utf8_lossy(k)),
                k => format!("{k:?}"),
            };
            self.0.push((n, k, String::from_utf8_lossy(value).into_owned()));
        }
        fn malformed(&mut self, n: u32, _: &[u8], _: Malformed) {
            self.1.push(n);
        }
    }

    fn rec(body: &[u8], d: Reading) -> Rec {
        let mut r = Rec::default();
        parse(body, d, &mut r);
        r
    }

    #[test]
    fn line_breaks_cr_lf_crlf_count_once() {
        let r = rec(b"a: 1\rb: 2\r\nc: 3\nd: 4", Reading::Rfc);
        let nums: Vec<u32> = r.0.iter().map(|l| l.0).collect();
        assert_eq!(nums, vec![1, 2, 3, 4]);
        let r = rec(b"a: 1\r\r\nb: 2", Reading::Rfc);
        assert_eq!(r.0[1].0, 3, "CR then CRLF is two breaks");
    }

    #[test]
    fn bom_and_partial_bom_skipped_at_start_only() {
        let r = rec(b"\xEF\xBB\xBFuser-agent: a", Reading::Google);
        assert_eq!(r.0[0].1, "UserAgent");
        let r = rec(b"\xEF\xBBuser-agent: a", Reading::Google);
        assert_eq!(r.0[0].1, "UserAgent");
        let r = rec(b"x: 1\n\xEF\xBB\xBFuser-agent: a", Reading::Google);
        assert!(r.0[1].1.starts_with("other:"));
    }

    #[test]
    fn comments_and_whitespace() {
        let r = rec(b"  Disallow :  /a b  # c\n# only\n\n", Reading::Rfc);
        assert_eq!(r.0, vec![(1, "Disallow".into(), "/a b".into())]);
    }

    #[test]
    fn missing_colon_google_only_two_words() {
        assert_eq!(rec(b"disallow /a", Reading::Google).0[0].2, "/a");
        assert_eq!(rec(b"disallow /a /b", Reading::Google).1, vec![1]);
        assert_eq!(rec(b"disallow /a", Reading::Rfc).1, vec![1]);
        assert_eq!(rec(b"disallow", Reading::Google).1, vec![1]);
        // Only spaces and tabs separate the words (found by proptest_engine against the
        // reference): a vertical tab or form feed is a word of its own.
        assert_eq!(rec(b"allow \x0b *", Reading::Google).1, vec![1]);
        assert_eq!(rec(b"allow \x0c/a", Reading::Google).0[0].2, "/a");
    }

    #[test]
    fn google_typos_and_prefixes() {
        for k in ["useragent", "user agent", "User-Agents"] {
            assert_eq!(classify(k.as_bytes(), Reading::Google), Key::UserAgent, "{k}");
            assert!(matches!(classify(k.as_bytes(), Reading::Rfc), Key::Other(_)));
        }
        for k in ["dissallow", "dissalow", "disalow", "diasllow", "disallaw", "Disallowed"] {
            assert_eq!(classify(k.as_bytes(), Reading::Google), Key::Disallow, "{k}");
        }
        assert_eq!(classify(b"site-map", Reading::Google), Key::Sitemap);
        assert_eq!(classify(b"ALLOW", Reading::Rfc), Key::Allow);
    }

    #[test]
    fn google_cuts_at_nul_and_long_lines() {
        let r = rec(b"disallow: /a\0/b", Reading::Google);
        assert_eq!(r.0[0].2, "/a");
        let r = rec(b"disallow: /a\0/b", Reading::Rfc);
        assert_eq!(r.0[0].2, "/a\0/b");
        let mut long = b"disallow: /".to_vec();
        long.resize(GOOGLE_MAX_LINE_BYTES + 10, b'x');
        assert_eq!(rec(&long, Reading::Google).0[0].2.len(), GOOGLE_MAX_LINE_BYTES - 10);
        assert_eq!(rec(&long, Reading::Rfc).0[0].2.len(), GOOGLE_MAX_LINE_BYTES);
    }

    /// Issue 22.3: a line the limit cuts is dropped, not read in part.
    #[test]
    fn a_line_cut_by_the_limit_is_dropped() {
        #[derive(Default)]
        struct Cut(Vec<String>, Option<(u32, Vec<u8>)>);
        impl Handler for Cut {
            fn line(&mut self, _: u32, _: Key<'_>, value: &[u8]) {
                self.0.push(String::from_utf8_lossy(value).into_owned());
            }
            fn cut_by_limit(&mut self, number: u32, kept: &[u8]) {
                self.1 = Some((number, kept.to_vec()));
            }
        }
        let body_with = |tail: &[u8]| {
            let mut body = b"user-agent: *\ndisallow: /\n".to_vec();
            body.resize(MAX_ROBOTS_TXT_BYTES - 9, b'\n');
            body.extend_from_slice(tail);
            body
        };
        // "allow: /public" cut after "allow: /p": dropped.
        let body = body_with(b"allow: /public\n");
        let mut c = Cut::default();
        let facts = parse(&body, Reading::Rfc, &mut c);
        assert_eq!(c.0, vec!["*", "/"]);
        let line = (MAX_ROBOTS_TXT_BYTES - 9 - 26 + 3) as u32;
        assert_eq!(c.1, Some((line, b"allow: /p".to_vec())));
        assert_eq!(facts.cut_line, Some(line));
        assert_eq!(facts.lines, line);
        assert_eq!((facts.parsed_bytes, facts.ignored_bytes), (MAX_ROBOTS_TXT_BYTES, 6));
        // Its line break right after the limit: whole.
        for tail in [&b"allow: /p\n"[..], b"allow: /p\r\n", b"allow: /p\rx"] {
            let mut c = Cut::default();
            let facts = parse(&body_with(tail), Reading::Google, &mut c);
            assert_eq!(c.0.last().map(String::as_str), Some("/p"), "{tail:?}");
            assert_eq!((c.1, facts.cut_line), (None, None));
        }
        // A break as the last byte read: nothing cut.
        let mut c = Cut::default();
        let facts = parse(&body_with(b"allow: /\nx"), Reading::Google, &mut c);
        assert_eq!((c.0.last().map(String::as_str), facts.cut_line), (Some("/"), None));
        // One line longer than the limit, BOM first: the line is dropped, BOM and all.
        let mut body = b"\xEF\xBB\xBFdisallow: /".to_vec();
        body.resize(MAX_ROBOTS_TXT_BYTES + 1, b'a');
        let mut c = Cut::default();
        let facts = parse(&body, Reading::Google, &mut c);
        assert!(c.0.is_empty() && facts.bom);
        assert_eq!(
            c.1.map(|(n, k)| (n, k.len(), k.starts_with(b"disallow"))),
            Some((1, MAX_ROBOTS_TXT_BYTES - 3, true))
        );
    }

    #[test]
    fn only_first_500_kib() {
        let mut body = b"user-agent: *\n".to_vec();
        body.resize(MAX_ROBOTS_TXT_BYTES, b'\n');
        body.extend_from_slice(b"disallow: /\n");
        let r = rec(&body, Reading::Rfc);
        assert_eq!(r.0.len(), 1);
        assert_eq!(parse(&body, Reading::Rfc, &mut Rec::default()).ignored_bytes, 12);
    }
}
