//! Shared by the fuzz targets: how an input is split, which agents and paths are
//! checked, and the checks every single verdict must pass.

#![allow(dead_code)]

use std::borrow::Cow;

use robotsgate_rep::{MAX_ROBOTS_TXT_BYTES, Profile, Reading, VerdictReason, RobotsTxt, RuleKind, Verdict};

/// One fuzz input: `BODY [0xFF AGENT [0xFF PATH]]`.
///
/// The split is at the *last* two 0xFF bytes, so the body may hold any byte (0xFF
/// included). 0xFF never occurs in UTF-8, so agent and path are free of it; they are
/// read lossily (invalid UTF-8 becomes U+FFFD).
pub struct Input<'a> {
    pub body: &'a [u8],
    pub agent: Option<String>,
    pub path: Option<String>,
}

impl<'a> Input<'a> {
    pub fn split(data: &'a [u8]) -> Input<'a> {
        let mut parts = data.rsplitn(3, |&b| b == 0xFF);
        let last = parts.next().unwrap_or_default();
        let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        match (parts.next(), parts.next()) {
            (None, _) => Input { body: last, agent: None, path: None },
            (Some(body), None) => Input { body, agent: Some(lossy(last)), path: None },
            (Some(agent), Some(body)) => Input { body, agent: Some(lossy(agent)), path: Some(lossy(last)) },
        }
    }
}

/// The lines of the part of a body that is read, numbered as the engine numbers them
/// (1-based; CR, LF and CRLF are one line break each). Written independently of the
/// engine's own splitter.
pub struct Lines<'a> {
    body: &'a [u8],
    /// Start and end (exclusive, before the break) of every line.
    spans: Vec<(usize, usize)>,
}

impl<'a> Lines<'a> {
    pub fn new(body: &'a [u8]) -> Lines<'a> {
        let body = &body[..body.len().min(MAX_ROBOTS_TXT_BYTES)];
        let mut spans = Vec::new();
        let mut start = 0;
        let mut i = 0;
        while i < body.len() {
            match body[i] {
                b'\r' => {
                    spans.push((start, i));
                    if body.get(i + 1) == Some(&b'\n') {
                        i += 1;
                    }
                    start = i + 1;
                }
                b'\n' => {
                    spans.push((start, i));
                    start = i + 1;
                }
                _ => {}
            }
            i += 1;
        }
        spans.push((start, body.len()));
        Lines { body, spans }
    }

    pub fn count(&self) -> usize {
        self.spans.len()
    }

    /// Line `n` (1-based), without its line break.
    pub fn line(&self, n: u32) -> &'a [u8] {
        let (a, b) = self.spans[n as usize - 1];
        &self.body[a..b]
    }
}

/// Up to `max` product tokens taken from the body's `user-agent` lines (any spelling
/// that contains "agent"), for checks that hit specific groups.
pub fn derived_agents(body: &[u8], max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (key, value) in key_values(body).take(400) {
        if out.len() >= max {
            break;
        }
        if key.windows(5).any(|w| w.eq_ignore_ascii_case(b"agent")) {
            let v = String::from_utf8_lossy(value);
            let token: String = v.split(|c: char| c.is_whitespace() || c == '/').next().unwrap_or("").to_owned();
            if !token.is_empty() && token != "*" && !out.contains(&token) {
                out.push(token);
            }
        }
    }
    out
}

/// Up to `max` paths built from the body's rule values (any key that contains "allow"),
/// so that rules actually match (or only just fail to): the value with `*` replaced by
/// `x`, its pieces overlapped, with `*` removed, that minus its last character, and with
/// `*` expanded and a suffix added; a final `$` is dropped.
pub fn derived_paths(body: &[u8], max: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for (key, value) in key_values(body).take(400) {
        if out.len() >= max {
            break;
        }
        if !key.windows(3).any(|w| w.eq_ignore_ascii_case(b"low")) {
            continue;
        }
        let v = String::from_utf8_lossy(value);
        let v = v.strip_suffix('$').unwrap_or(&v);
        let v = if v.starts_with('/') { Cow::Borrowed(v) } else { Cow::Owned(format!("/{v}")) };
        let bare = v.replace('*', "");
        let short = bare.char_indices().last().map_or(String::new(), |(i, _)| bare[..i].to_owned());
        for p in [v.replace('*', "x"), overlapped(&v), bare, short, format!("{}/x.html?q=1", v.replace('*', "ab/c"))] {
            if out.len() < max && !out.contains(&p) {
                out.push(p);
            }
        }
    }
    out
}

/// The pieces between `*`s joined with as much overlap as possible (`/*ab*b` gives `/ab`):
/// a path that only a matcher which lets pieces overlap would wrongly match.
fn overlapped(v: &str) -> String {
    let mut out = String::new();
    for piece in v.split('*') {
        let k = (0..=piece.len().min(out.len()))
            .rev()
            .find(|&k| piece.is_char_boundary(k) && out.ends_with(&piece[..k]))
            .unwrap_or(0);
        out.push_str(&piece[k..]);
    }
    if out.starts_with('/') { out } else { format!("/{out}") }
}

/// `key: value` pairs of a body's lines, split at the first `:`, comment dropped, both
/// sides trimmed. Loose on purpose: it only picks inputs for checks.
fn key_values(body: &[u8]) -> impl Iterator<Item = (&[u8], &[u8])> {
    body.split(|&b| b == b'\n' || b == b'\r').filter_map(|line| {
        let line = line.split(|&b| b == b'#').next().unwrap_or_default();
        let colon = line.iter().position(|&b| b == b':')?;
        Some((line[..colon].trim_ascii(), line[colon + 1..].trim_ascii()))
    })
}

/// Whether the pattern a verdict cites occurs on the line it cites. The engine stores
/// a value lossily when it is not UTF-8 (and Google's line cut may split a character),
/// so compare lossily and piece by piece around U+FFFD.
fn pattern_on_line(pattern: &str, line: &[u8]) -> bool {
    let line = String::from_utf8_lossy(line);
    pattern.split('\u{FFFD}').all(|piece| line.contains(piece))
}

/// What every verdict must satisfy on its own.
pub fn verdict_sane(v: &Verdict<'_>, profile: Profile, agent: &str, lines: &Lines<'_>) {
    assert_eq!(v.profile(), profile);
    let shown = v.to_string();
    assert!(!shown.is_empty());
    // (Not `{v:?}`: a verdict's Debug prints the whole parsed file.)
    let _ = format!("{:?} {:?}", v.reason(), v.reading());
    let groups: Vec<_> = v.groups().collect();
    let mut prev = 0;
    for g in &groups {
        assert!(g.line >= 1 && g.line as usize <= lines.count(), "group line {} of {} lines", g.line, lines.count());
        assert!(g.line > prev, "groups out of file order: {} after {}", g.line, prev);
        prev = g.line;
        let agents: Vec<&str> = g.agents().collect();
        for a in &agents {
            assert!(!a.bytes().any(|b| b.is_ascii_uppercase()), "group agent {a:?} not lower-cased");
        }
        if g.specific {
            // The agent is checked for its product token (`ExampleBot/1.0` as `examplebot`).
            let want = robotsgate_rep::product_token(agent).to_ascii_lowercase();
            assert!(agents.iter().any(|a| *a == want), "specific group at line {} does not name {agent:?}: {agents:?}", g.line);
        }
    }
    match v.reason() {
        VerdictReason::RobotsTxt => {
            assert!(v.allowed());
            assert_ne!(profile, Profile::Google, "google has no /robots.txt exception");
            assert_eq!(v.reading(), None);
            assert!(v.rule().is_none());
            assert!(groups.is_empty());
            assert_eq!(v.cut_line(), None);
            assert_eq!(shown, "/robots.txt is always allowed");
        }
        VerdictReason::NoRuleMatched => {
            assert!(v.allowed(), "no rule matched but disallowed");
            assert!(v.rule().is_none());
            assert!(v.reading().is_some());
            if v.cut_line().is_none() {
                assert_eq!(shown, "no rule matched");
            } else {
                assert!(shown.starts_with("no rule matched (robots.txt is over 500 KiB: line "), "{shown}");
            }
        }
        VerdictReason::Rule(m) => {
            assert_eq!(v.rule(), Some(m));
            assert_eq!(v.allowed(), m.kind == RuleKind::Allow, "verdict {} but cited {m}", v.allowed());
            assert!(m.line >= 1, "rule line 0");
            assert!(m.line as usize <= lines.count(), "rule line {} beyond the {} lines of the body", m.line, lines.count());
            assert_eq!(v.reading(), Some(m.reading));
            if profile == Profile::Google {
                assert_eq!(m.reading, Reading::Google);
            }
            if profile == Profile::Rfc {
                assert_eq!(m.reading, Reading::Rfc);
            }
            if m.implied_by_index_html {
                assert_eq!(m.kind, RuleKind::Allow);
                assert_eq!(m.reading, Reading::Google);
            }
            assert!(!m.pattern.is_empty(), "empty pattern cited: {m}");
            assert!(
                pattern_on_line(m.pattern, lines.line(m.line)),
                "cited pattern {:?} is not on line {}: {:?}",
                m.pattern,
                m.line,
                String::from_utf8_lossy(lines.line(m.line))
            );
            assert!(shown.starts_with(&format!("line {}: {}: ", m.line, m.kind.as_str())), "{shown}");
            let first = groups.first().expect("a rule decided but no group applied");
            assert!(m.line > first.line, "rule line {} is before the first applied group (line {})", m.line, first.line);
        }
    }
}

/// The three profiles' verdicts for one check, and how they must relate.
pub fn check_all(robots: &RobotsTxt, lines: &Lines<'_>, agent: &str, path: &str) {
    let g = robots.check_with(Profile::Google, agent, path);
    let r = robots.check_with(Profile::Rfc, agent, path);
    let c = robots.check_with(Profile::Conservative, agent, path);
    verdict_sane(&g, Profile::Google, agent, lines);
    verdict_sane(&r, Profile::Rfc, agent, lines);
    verdict_sane(&c, Profile::Conservative, agent, lines);
    for v in [&g, &r, &c] {
        // A verdict notes only the line the limit cut, and only when there is one.
        assert!(v.cut_line().is_none() || v.cut_line() == robots.cut_line(), "{v}");
    }
    assert_eq!(g.reading(), Some(Reading::Google));
    assert!(!g.readings_disagree() && !r.readings_disagree());
    if path == "/robots.txt" {
        assert!(r.allowed() && c.allowed(), "/robots.txt must be allowed under rfc and conservative");
    }
    if matches!(r.reason(), VerdictReason::RobotsTxt) {
        assert!(matches!(c.reason(), VerdictReason::RobotsTxt), "rfc says /robots.txt, conservative says {c}");
        assert!(c.allowed());
        return;
    }
    assert!(!matches!(c.reason(), VerdictReason::RobotsTxt), "conservative says /robots.txt, rfc says {r}");
    assert_eq!(r.reading(), Some(Reading::Rfc));
    // The path the check matched: a path without its fragment, or the path of a URL.
    let request = if path.starts_with('/') {
        path.split('#').next().unwrap_or_default().to_owned()
    } else {
        robotsgate_rep::path_of_url(path).into_owned()
    };
    let server = robotsgate_rep::server_path(&request);
    if let Some(s) = c.server_path() {
        // Both readings allowed the path as it is; its server form decided.
        assert!(g.allowed() && r.allowed() && !c.allowed(), "server form decided {c}; google {g}; rfc {r}");
        assert_eq!(Some(s), server.as_ref(), "the verdict's server form is not server_path's");
        let on_server = robots.check_with(Profile::Conservative, agent, &s.path);
        assert!(!on_server.allowed() && on_server.server_path().is_none(), "{on_server} for {:?}", s.path);
        assert_eq!(c.rule(), on_server.rule());
        return;
    }
    if let Some(s) = &server
        && g.allowed()
        && r.allowed()
    {
        // The server form, if any, is allowed too.
        let on_server = robots.check_with(Profile::Conservative, agent, &s.path);
        assert!(on_server.allowed(), "{path:?} allowed but not its server form {:?}: {on_server}", s.path);
    }
    // Conservative allowed <=> both readings allowed.
    assert_eq!(
        c.allowed(),
        g.allowed() && r.allowed(),
        "conservative {} but google {} ({g}) and rfc {} ({r}) for {agent:?} {path:?}",
        c.allowed(),
        g.allowed(),
        r.allowed()
    );
    assert_eq!(c.readings_disagree(), g.allowed() != r.allowed());
    let expected = if !g.allowed() && r.allowed() { g.rule() } else { r.rule() };
    assert_eq!(c.rule(), expected, "conservative cites {c}; google {g}; rfc {r}");
}
