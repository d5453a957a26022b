//! Small, slow, obviously-correct reference implementations of the three profiles of
//! `robotsgate_rep`, written independently of the engine:
//!
//! - [`google_decision`]: a literal re-implementation of Google's open-source robots.txt
//!   parser and matcher (the streaming state machine, not a group model), plus Google's
//!   documented 500 KiB limit.
//! - [`rfc_decision`]: a strict RFC 9309 reading with a canonical form of rule and path
//!   (percent-encoding normalised, dot segments removed), `/robots.txt` always allowed.
//! - [`conservative_allowed`]: allowed only when both readings allow, the path as it is
//!   and its form on servers that decode `%2F`/`%5C` and merge slashes ([`server_path`]).
//!
//! Everything here is quadratic or worse on purpose: no cleverness, nothing to get wrong.

#![allow(dead_code)]

/// Only this many bytes of a body count.
pub const MAX_BYTES: usize = 500 * 1024;
/// Google's parser keeps at most this many bytes of a line.
pub const GOOGLE_MAX_LINE: usize = 2083 * 8 - 1;

const BOM: [u8; 3] = [0xEF, 0xBB, 0xBF];

/// Allow or disallow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Allow,
    Disallow,
}

/// The rule that decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cited {
    pub kind: Kind,
    /// 1-based line number.
    pub line: u32,
    /// Google: the rule is `p[..=last_slash] + "$"` derived from `allow: .../index.htm...`.
    pub implied: bool,
}

/// A verdict and what decided it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    pub allowed: bool,
    /// The deciding rule (the best rule of the winning kind, earliest line on a tie), or
    /// `None` when no rule with a non-empty pattern matched.
    pub rule: Option<Cited>,
    /// RFC: the path is `/robots.txt`, always allowed.
    pub robots_txt: bool,
}

// ---------------------------------------------------------------------------------------
// Shared line splitting
// ---------------------------------------------------------------------------------------

/// C `isspace` in the C locale.
pub fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | 0x0B | 0x0C | b'\r')
}

pub fn trim(mut s: &[u8]) -> &[u8] {
    while let Some((&first, rest)) = s.split_first() {
        if !is_space(first) {
            break;
        }
        s = rest;
    }
    while let Some((&last, rest)) = s.split_last() {
        if !is_space(last) {
            break;
        }
        s = rest;
    }
    s
}

/// `s` up to (not including) the first `stop` byte.
fn cut_at(s: &[u8], stop: u8) -> &[u8] {
    match s.iter().position(|&b| b == stop) {
        Some(i) => &s[..i],
        None => s,
    }
}

/// The numbered lines of a body: the first 500 KiB, without a leading BOM (or leading
/// prefix of one), split at LF, CR or CRLF. The text after the last break is a line too
/// (possibly empty), unless the 500 KiB limit cuts it: then it is dropped (its line break
/// is not among the first 500 KiB, nor right after them).
pub fn numbered_lines(body: &[u8]) -> Vec<(u32, &[u8])> {
    let cut = body.len() > MAX_BYTES && !matches!(body[MAX_BYTES], b'\n' | b'\r');
    let body = &body[..body.len().min(MAX_BYTES)];
    let mut skip = 0;
    while skip < BOM.len() && skip < body.len() && body[skip] == BOM[skip] {
        skip += 1;
    }
    let body = &body[skip..];
    let mut lines = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        match body[i] {
            b'\n' => {
                lines.push(&body[start..i]);
                i += 1;
                start = i;
            }
            b'\r' => {
                lines.push(&body[start..i]);
                i += 1;
                if i < body.len() && body[i] == b'\n' {
                    i += 1;
                }
                start = i;
            }
            _ => i += 1,
        }
    }
    lines.push(&body[start..]);
    if cut {
        // The last line read is cut: read none of it. (When the last byte read is a line
        // break, that line is empty anyway.)
        if let Some(last) = lines.last_mut() {
            *last = &[];
        }
    }
    lines.into_iter().enumerate().map(|(n, l)| (n as u32 + 1, l)).collect()
}

fn starts_with_ignore_case(s: &[u8], prefix: &str) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix.as_bytes())
}

// ---------------------------------------------------------------------------------------
// Pattern matching (both readings)
// ---------------------------------------------------------------------------------------

/// Whether `pattern` matches `path` from its start: `*` is any run of bytes, every other
/// byte is literal; with `anchored` the match must end at the end of the path, otherwise
/// it may end anywhere (prefix match). Keeps the sorted set of path positions that the
/// pattern read so far can reach, updated byte by byte of the pattern.
pub fn glob_matches(path: &[u8], pattern: &[u8], anchored: bool) -> bool {
    let mut reach: Vec<usize> = vec![0];
    for &p in pattern {
        reach = if p == b'*' {
            (reach[0]..=path.len()).collect()
        } else {
            reach.iter().filter(|&&i| i < path.len() && path[i] == p).map(|&i| i + 1).collect()
        };
        if reach.is_empty() {
            return false;
        }
    }
    !anchored || reach.contains(&path.len())
}

// ---------------------------------------------------------------------------------------
// Google
// ---------------------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GoogleKey {
    UserAgent,
    Allow,
    Disallow,
    Sitemap,
    Unknown,
}

pub fn google_classify(key: &[u8]) -> GoogleKey {
    let p = |prefix: &str| starts_with_ignore_case(key, prefix);
    if p("user-agent") || p("useragent") || p("user agent") {
        GoogleKey::UserAgent
    } else if p("allow") {
        GoogleKey::Allow
    } else if ["disallow", "dissallow", "dissalow", "disalow", "diasllow", "disallaw"].iter().any(|k| p(k)) {
        GoogleKey::Disallow
    } else if p("sitemap") || p("site-map") {
        GoogleKey::Sitemap
    } else {
        GoogleKey::Unknown
    }
}

/// One line as Google's parser reads it: `(key, value)`, or `None` to skip the line.
pub fn google_key_value(line: &[u8]) -> Option<(&[u8], &[u8])> {
    let line = &line[..line.len().min(GOOGLE_MAX_LINE)];
    let line = cut_at(line, 0);
    let line = cut_at(line, b'#');
    let line = trim(line);
    if line.is_empty() {
        return None;
    }
    let (key, value) = match line.iter().position(|&b| b == b':') {
        Some(colon) => (&line[..colon], &line[colon + 1..]),
        None => {
            // Whitespace (space or tab, as Google's `kWhite`) instead of the colon, but
            // only when the line is exactly two words.
            let words: Vec<&[u8]> =
                line.split(|&b| b == b' ' || b == b'\t').filter(|w| !w.is_empty()).collect();
            if words.len() != 2 {
                return None;
            }
            (words[0], words[1])
        }
    };
    let key = trim(key);
    if key.is_empty() {
        return None;
    }
    Some((key, trim(value)))
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

fn hex_upper(v: u8) -> [u8; 3] {
    const DIGITS: &[u8; 16] = b"0123456789ABCDEF";
    [b'%', DIGITS[(v >> 4) as usize], DIGITS[(v & 15) as usize]]
}

/// Google's `MaybeEscapePattern`: `%xx` gets upper-case hex digits, bytes `>= 0x80`
/// become `%XX`, everything else stays.
pub fn google_escape(value: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < value.len() {
        let b = value[i];
        if b == b'%' && i + 2 < value.len() && hex(value[i + 1]).is_some() && hex(value[i + 2]).is_some() {
            out.push(b'%');
            out.push(value[i + 1].to_ascii_uppercase());
            out.push(value[i + 2].to_ascii_uppercase());
            i += 3;
        } else if b >= 0x80 {
            out.extend_from_slice(&hex_upper(b));
            i += 1;
        } else {
            out.push(b);
            i += 1;
        }
    }
    out
}

/// Google's `Matches`: `pattern` (escaped) matches `path` from its start; a final `$`
/// anchors, any other `$` is literal.
pub fn google_matches(path: &[u8], pattern: &[u8]) -> bool {
    let (body, anchored) = match pattern.split_last() {
        Some((b'$', rest)) => (rest, true),
        _ => (pattern, false),
    };
    glob_matches(path, body, anchored)
}

/// Google's match priority of `pattern` for `path`: its length if it matches, else -1.
fn google_priority(path: &[u8], pattern: &[u8]) -> i64 {
    if google_matches(path, pattern) { pattern.len() as i64 } else { -1 }
}

/// The allow and disallow values of a body as Google's parser reads them (not escaped),
/// whether or not a group applies: `(is allow, value)`.
pub fn google_rule_values(body: &[u8]) -> Vec<(bool, Vec<u8>)> {
    numbered_lines(body)
        .into_iter()
        .filter_map(|(_, line)| {
            let (key, value) = google_key_value(line)?;
            match google_classify(key) {
                GoogleKey::Allow => Some((true, value.to_vec())),
                GoogleKey::Disallow => Some((false, value.to_vec())),
                _ => None,
            }
        })
        .collect()
}

#[derive(Debug, Clone, Copy)]
struct Slot {
    priority: i64,
    line: u32,
    implied: bool,
}

impl Slot {
    const NONE: Slot = Slot { priority: -1, line: 0, implied: false };

    /// Google keeps the first match of the highest priority (`<`, not `<=`).
    fn offer(&mut self, priority: i64, line: u32, implied: bool) {
        if self.priority < priority {
            *self = Slot { priority, line, implied };
        }
    }
}

#[derive(Debug)]
struct GoogleMatcher<'a> {
    agent: &'a str,
    path: &'a [u8],
    seen_global: bool,
    seen_specific: bool,
    ever_seen_specific: bool,
    seen_separator: bool,
    /// Index 0: global, 1: specific.
    allow: [Slot; 2],
    disallow: [Slot; 2],
}

impl GoogleMatcher<'_> {
    fn user_agent(&mut self, value: &[u8]) {
        if self.seen_separator {
            self.seen_specific = false;
            self.seen_global = false;
            self.seen_separator = false;
        }
        if value.first() == Some(&b'*') && (value.len() == 1 || is_space(value[1])) {
            self.seen_global = true;
        } else {
            let n = value.iter().take_while(|&&b| b.is_ascii_alphabetic() || b == b'-' || b == b'_').count();
            if value[..n].eq_ignore_ascii_case(self.agent.as_bytes()) {
                self.seen_specific = true;
                self.ever_seen_specific = true;
            }
        }
    }

    fn rule(&mut self, kind: Kind, pattern: &[u8], line: u32, implied: bool) {
        if !(self.seen_global || self.seen_specific) {
            return;
        }
        self.seen_separator = true;
        let priority = google_priority(self.path, pattern);
        if priority >= 0 {
            let slot = if self.seen_specific { 1 } else { 0 };
            match kind {
                Kind::Allow => self.allow[slot].offer(priority, line, implied),
                Kind::Disallow => self.disallow[slot].offer(priority, line, implied),
            }
        } else if kind == Kind::Allow
            && let Some(slash) = pattern.iter().rposition(|&b| b == b'/')
            && pattern[slash..].starts_with(b"/index.htm")
        {
            let mut dir = pattern[..=slash].to_vec();
            dir.push(b'$');
            self.rule(Kind::Allow, &dir, line, true);
        }
    }

    fn decision(&self) -> Decision {
        let decide = |allow: Slot, disallow: Slot| {
            let allowed = disallow.priority <= allow.priority;
            let (kind, slot) = if allowed { (Kind::Allow, allow) } else { (Kind::Disallow, disallow) };
            let rule = (slot.priority > 0).then_some(Cited { kind, line: slot.line, implied: slot.implied });
            Decision { allowed, rule, robots_txt: false }
        };
        let none = Decision { allowed: true, rule: None, robots_txt: false };
        if self.allow[1].priority > 0 || self.disallow[1].priority > 0 {
            decide(self.allow[1], self.disallow[1])
        } else if self.ever_seen_specific {
            none
        } else if self.allow[0].priority > 0 || self.disallow[0].priority > 0 {
            decide(self.allow[0], self.disallow[0])
        } else {
            none
        }
    }
}

/// Google's verdict for `agent` on `path` (compared as given), with the deciding rule.
pub fn google_decision(body: &[u8], agent: &str, path: &str) -> Decision {
    let mut m = GoogleMatcher {
        agent,
        path: path.as_bytes(),
        seen_global: false,
        seen_specific: false,
        ever_seen_specific: false,
        seen_separator: false,
        allow: [Slot::NONE; 2],
        disallow: [Slot::NONE; 2],
    };
    for (number, line) in numbered_lines(body) {
        let Some((key, value)) = google_key_value(line) else { continue };
        match google_classify(key) {
            GoogleKey::UserAgent => m.user_agent(value),
            GoogleKey::Allow => m.rule(Kind::Allow, &google_escape(value), number, false),
            GoogleKey::Disallow => m.rule(Kind::Disallow, &google_escape(value), number, false),
            GoogleKey::Sitemap | GoogleKey::Unknown => {}
        }
    }
    m.decision()
}

/// Google's verdict: may `agent` fetch `path`?
pub fn google_allowed(body: &[u8], agent: &str, path: &str) -> bool {
    google_decision(body, agent, path).allowed
}

// ---------------------------------------------------------------------------------------
// RFC 9309
// ---------------------------------------------------------------------------------------

fn is_unreserved(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~".contains(&b)
}

/// Octets kept literally (besides the unreserved ones): reserved characters that may
/// appear in a path or query, except `*` and `$`, which are always escaped in a URL.
fn is_literal(b: u8) -> bool {
    is_unreserved(b) || b"!&'()+,;=:@/?".contains(&b)
}

/// Escapes of these are decoded in the query (they are not the query's own delimiters).
fn is_query_decoded(b: u8) -> bool {
    b":/?@!'(),;".contains(&b)
}

/// Percent-encoding normalisation of one part (path or query) of a URL or rule.
fn normalize_part(s: &[u8], rule: bool, in_query: bool) -> Vec<u8> {
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let b = s[i];
        let escape = if b == b'%' && i + 2 < s.len() { hex(s[i + 1]).zip(hex(s[i + 2])) } else { None };
        if let Some((hi, lo)) = escape {
            let v = hi * 16 + lo;
            if is_unreserved(v) || (in_query && is_query_decoded(v)) {
                out.push(v);
            } else {
                out.extend_from_slice(&hex_upper(v));
            }
            i += 3;
            continue;
        }
        if rule && b == b'*' {
            out.push(b'*'); // a wildcard
        } else if is_literal(b) {
            out.push(b);
        } else {
            out.extend_from_slice(&hex_upper(b)); // also a stray '%', '*' and '$'
        }
        i += 1;
    }
    out
}

/// RFC 3986 §5.2.4, literally: the input buffer is consumed rule A..E.
pub fn remove_dot_segments(path: &[u8]) -> Vec<u8> {
    let mut input = path.to_vec();
    let mut output: Vec<u8> = Vec::new();
    let remove_last_segment = |output: &mut Vec<u8>| {
        let cut = output.iter().rposition(|&b| b == b'/').unwrap_or(0);
        output.truncate(cut);
    };
    while !input.is_empty() {
        if input.starts_with(b"../") {
            input.drain(..3);
        } else if input.starts_with(b"./") {
            input.drain(..2);
        } else if input.starts_with(b"/./") {
            input.splice(..3, *b"/");
        } else if input == b"/." {
            input = b"/".to_vec();
        } else if input.starts_with(b"/../") {
            input.splice(..4, *b"/");
            remove_last_segment(&mut output);
        } else if input == b"/.." {
            input = b"/".to_vec();
            remove_last_segment(&mut output);
        } else if input == b"." || input == b".." {
            input.clear();
        } else {
            let from = usize::from(input[0] == b'/');
            let end = input[from..].iter().position(|&b| b == b'/').map_or(input.len(), |i| i + from);
            output.extend(input.drain(..end));
        }
    }
    output
}

/// The canonical RFC form of a URL path (`rule == false`) or of a rule value without its
/// final `$` (`rule == true`, where `*` is a wildcard).
pub fn canonical(input: &[u8], rule: bool) -> Vec<u8> {
    let (path, query) = match input.iter().position(|&b| b == b'?') {
        Some(q) => (&input[..q], Some(&input[q + 1..])),
        None => (input, None),
    };
    let mut out = normalize_part(path, rule, false);
    if out.first() == Some(&b'/') {
        out = remove_dot_segments(&out);
    }
    if let Some(query) = query {
        out.push(b'?');
        out.extend(normalize_part(query, rule, true));
    }
    out
}

/// Whether the RFC reading treats `path` as `/robots.txt` (always allowed).
pub fn rfc_is_robots_txt(path: &str) -> bool {
    let c = canonical(path.as_bytes(), false);
    cut_at(&c, b'?') == b"/robots.txt"
}

#[derive(Debug, Default)]
struct RfcGroup {
    agents: Vec<Vec<u8>>,
    global: bool,
    rules: Vec<(Kind, Vec<u8>, u32)>,
}

fn rfc_groups(body: &[u8]) -> Vec<RfcGroup> {
    let mut groups: Vec<RfcGroup> = Vec::new();
    let mut after_rule = false;
    for (number, line) in numbered_lines(body) {
        let line = trim(cut_at(line, b'#'));
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let (key, value) = (trim(&line[..colon]), trim(&line[colon + 1..]));
        if key.eq_ignore_ascii_case(b"user-agent") {
            if groups.is_empty() || after_rule {
                groups.push(RfcGroup::default());
                after_rule = false;
            }
            let Some(group) = groups.last_mut() else { continue };
            if value == b"*" {
                group.global = true;
            } else if !value.is_empty() {
                group.agents.push(value.to_ascii_lowercase());
            }
        } else {
            let kind = if key.eq_ignore_ascii_case(b"allow") {
                Kind::Allow
            } else if key.eq_ignore_ascii_case(b"disallow") {
                Kind::Disallow
            } else {
                continue; // other lines neither end nor join a group
            };
            let Some(group) = groups.last_mut() else { continue }; // not in a group
            after_rule = true;
            if !value.is_empty() {
                group.rules.push((kind, value.to_vec(), number));
            }
        }
    }
    groups
}

/// The RFC reading's verdict for `agent` on `path`, with the deciding rule.
pub fn rfc_decision(body: &[u8], agent: &str, path: &str) -> Decision {
    if rfc_is_robots_txt(path) {
        return Decision { allowed: true, rule: None, robots_txt: true };
    }
    let path = canonical(path.as_bytes(), false);
    let groups = rfc_groups(body);
    let agent = agent.to_ascii_lowercase().into_bytes();
    let named: Vec<&RfcGroup> =
        groups.iter().filter(|g| !agent.is_empty() && g.agents.contains(&agent)).collect();
    let applied = if named.is_empty() { groups.iter().filter(|g| g.global).collect() } else { named };
    let mut allow = Slot::NONE;
    let mut disallow = Slot::NONE;
    for group in applied {
        for (kind, value, line) in &group.rules {
            let (body, anchored) = match value.split_last() {
                Some((b'$', rest)) => (rest, true),
                _ => (&value[..], false),
            };
            let pattern = canonical(body, true);
            if glob_matches(&path, &pattern, anchored) {
                let priority = pattern.len() as i64 + i64::from(anchored);
                let slot = if *kind == Kind::Allow { &mut allow } else { &mut disallow };
                // Earliest line wins a tie (groups are visited in file order, but be explicit).
                if slot.priority < priority || (slot.priority == priority && *line < slot.line) {
                    *slot = Slot { priority, line: *line, implied: false };
                }
            }
        }
    }
    let allowed = disallow.priority <= allow.priority;
    let (kind, slot) = if allowed { (Kind::Allow, allow) } else { (Kind::Disallow, disallow) };
    let rule = (slot.priority >= 0).then_some(Cited { kind, line: slot.line, implied: false });
    Decision { allowed, rule, robots_txt: false }
}

/// The RFC reading's verdict: may `agent` fetch `path`?
pub fn rfc_allowed(body: &[u8], agent: &str, path: &str) -> bool {
    rfc_decision(body, agent, path).allowed
}

/// The path as servers that decode `%2F`, read `%5C` as `/` and merge runs of `/` see it,
/// in the part before the first `?`; `None` when that changes nothing.
pub fn server_path(path: &str) -> Option<String> {
    let (p, q) = match path.find('?') {
        Some(i) => (&path[..i], &path[i..]),
        None => (path, ""),
    };
    let p = p.as_bytes();
    let mut decoded = Vec::new();
    let mut i = 0;
    while i < p.len() {
        let escape = p.get(i..i + 3).map(<[u8]>::to_ascii_uppercase);
        if escape.as_deref() == Some(b"%2F") || escape.as_deref() == Some(b"%5C") {
            decoded.push(b'/');
            i += 3;
        } else {
            decoded.push(p[i]);
            i += 1;
        }
    }
    let mut merged: Vec<u8> = Vec::new();
    for b in decoded {
        if !(b == b'/' && merged.last() == Some(&b'/')) {
            merged.push(b);
        }
    }
    (merged != p).then(|| String::from_utf8(merged).expect("ASCII replaced in UTF-8") + q)
}

/// Both readings as the conservative profile combines them: `/robots.txt` is always
/// allowed; otherwise allowed only when both readings allow.
fn both_allowed(body: &[u8], agent: &str, path: &str) -> bool {
    rfc_is_robots_txt(path) || (google_allowed(body, agent, path) && rfc_allowed(body, agent, path))
}

/// The conservative profile: allowed only when both readings allow the path, and both
/// allow its [`server_path`] too.
pub fn conservative_allowed(body: &[u8], agent: &str, path: &str) -> bool {
    both_allowed(body, agent, path) && server_path(path).is_none_or(|s| both_allowed(body, agent, &s))
}

#[cfg(test)]
mod self_tests {
    use super::*;

    #[test]
    fn glob() {
        assert!(glob_matches(b"/abc", b"/a", false));
        assert!(!glob_matches(b"/abc", b"/a", true));
        assert!(glob_matches(b"/abc", b"/*c", true));
        assert!(glob_matches(b"/a", b"", false));
        assert!(!glob_matches(b"/a", b"", true));
        assert!(glob_matches(b"/a$b", b"/a$", false));
        assert!(!glob_matches(b"/abc", b"/a*bc*c", true));
    }

    #[test]
    fn dot_segments_rfc3986_examples() {
        assert_eq!(remove_dot_segments(b"/a/b/c/./../../g"), b"/a/g");
        assert_eq!(remove_dot_segments(b"mid/content=5/../6"), b"mid/6");
        assert_eq!(remove_dot_segments(b"/a/.."), b"/");
        assert_eq!(remove_dot_segments(b"/a//.."), b"/a/");
        assert_eq!(remove_dot_segments(b"/../a"), b"/a");
    }

    #[test]
    fn server_paths() {
        assert_eq!(server_path("/a%2fb%5C%5cc//d?x//y%2F").as_deref(), Some("/a/b/c/d?x//y%2F"));
        assert_eq!(server_path("//"), Some("/".to_owned()));
        assert_eq!(server_path("/a/b?c//d"), None);
        assert_eq!(server_path("/a%252F"), None);
    }

    #[test]
    fn canonical_forms() {
        assert_eq!(canonical(b"/foo/bar/%62%61%7A", false), b"/foo/bar/baz");
        assert_eq!(canonical(b"/a*b$", false), b"/a%2Ab%24");
        assert_eq!(canonical(b"/a*b", true), b"/a*b");
        assert_eq!(canonical(b"/a%2fb?x=%2f%26", false), b"/a%2Fb?x=/%26");
        assert_eq!(canonical(b"/50%off", false), b"/50%25off");
        assert_eq!(canonical("/caf\u{e9}".as_bytes(), false), b"/caf%C3%A9");
        assert_eq!(canonical(b"/a/%2E%2E/b?/../", false), b"/b?/../");
    }
}
