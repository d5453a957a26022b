//! A line that the [`MAX_ROBOTS_TXT_BYTES`](crate::MAX_ROBOTS_TXT_BYTES) limit cuts is
//! dropped ([`crate::parser::split_at_limit`]). What it may have been, so that a verdict
//! can say when it may have been decided differently had the line been read: from the
//! part before the limit, each reading works out which kinds of rule the line may be
//! (none, when it is plainly something else), which group it would be in, and patterns
//! that any rule it may be matches whenever that rule matches a path.
//!
//! Everything here errs towards "may have mattered": the note only explains a verdict,
//! it never changes one.

use memchr::memchr;

use crate::RuleKind;
use crate::matcher::glob_match;
use crate::parser::{self, GOOGLE_MAX_LINE_BYTES, Key, Reading};
use crate::pattern::{self, Pat};

/// Google reads a key that starts with any of these as `disallow` (its typos), and one
/// that starts with `allow` as `allow` (see [`parser::classify`]).
const GOOGLE_DISALLOW_KEYS: [&[u8]; 6] =
    [b"disallow", b"dissallow", b"dissalow", b"disalow", b"diasllow", b"disallaw"];

/// The dropped line.
#[derive(Debug)]
pub(crate) struct CutLine {
    /// Its number.
    pub line: u32,
    /// What it may be in each reading, when it may be a rule.
    pub google: Option<CutRule>,
    pub rfc: Option<CutRule>,
}

/// The rule a dropped line may be, in one reading.
#[derive(Debug)]
pub(crate) struct CutRule {
    /// The group it would be in: the reading's last.
    group: u32,
    may_allow: bool,
    may_disallow: bool,
    /// Patterns (in [`crate::reading::Parsed::arena`]): whenever the rule matches a path,
    /// one of these does. `None`: it may match any path.
    covers: Option<Vec<Pat>>,
}

/// What the part of the line before the limit says about the line's value.
enum Value<'a> {
    /// Nothing yet: the key is not finished.
    Any,
    /// The value starts with this (the line goes on).
    Prefix(&'a [u8]),
    /// The value is this (the rest of the line is a comment, or beyond what Google reads).
    Exact(&'a [u8]),
}

impl CutLine {
    /// `kept`: the dropped line `line`'s part before the limit; `groups`: how many groups
    /// each reading has (google, rfc).
    pub fn new(line: u32, kept: &[u8], groups: (usize, usize), arena: &mut Vec<u8>) -> CutLine {
        let rule = |reading: Reading, groups: usize, arena: &mut Vec<u8>| {
            let group = u32::try_from(groups.checked_sub(1)?).ok()?;
            let (may_allow, may_disallow, value) = read(kept, reading)?;
            let covers = covers(value, reading, may_allow, arena);
            Some(CutRule { group, may_allow, may_disallow, covers })
        };
        CutLine {
            line,
            google: rule(Reading::Google, groups.0, arena),
            rfc: rule(Reading::Rfc, groups.1, arena),
        }
    }

    /// Heap memory held (for [`crate::RobotsTxt::heap_bytes`]).
    pub fn heap_bytes(&self) -> usize {
        let pats = |r: &Option<CutRule>| {
            r.as_ref()
                .and_then(|r| r.covers.as_ref())
                .map_or(0, |p| p.capacity() * std::mem::size_of::<Pat>())
        };
        std::mem::size_of::<CutLine>() + pats(&self.google) + pats(&self.rfc)
    }

    /// The rule the line may be in `reading`'s reading.
    pub fn rule(&self, reading: Reading) -> Option<&CutRule> {
        match reading {
            Reading::Google => self.google.as_ref(),
            Reading::Rfc => self.rfc.as_ref(),
        }
    }
}

impl CutRule {
    /// Whether this rule may have turned a verdict of its reading around: it would be in
    /// one of the `applied` groups, it may be of the kind that does (a disallow when the
    /// path is `allowed`, an allow when not; an unknown continuation may make it the most
    /// specific rule) and it may match `path` (as that reading compares paths).
    pub fn may_matter(&self, applied: &[u32], allowed: bool, arena: &[u8], path: &[u8]) -> bool {
        (if allowed { self.may_disallow } else { self.may_allow })
            && applied.contains(&self.group)
            && self
                .covers
                .as_ref()
                .is_none_or(|pats| pats.iter().any(|p| glob_match(p.span.get(arena), p.anchored, path)))
    }
}

fn starts_with_ignore_case(s: &[u8], prefix: &[u8]) -> bool {
    s.len() >= prefix.len() && s[..prefix.len()].eq_ignore_ascii_case(prefix)
}

fn rule_kind(key: Key<'_>) -> Option<RuleKind> {
    match key {
        Key::Allow => Some(RuleKind::Allow),
        Key::Disallow => Some(RuleKind::Disallow),
        _ => None,
    }
}

/// Which kinds of rule `kept` may begin in `reading` (may allow, may disallow), and its
/// value so far; `None` when it cannot be a rule line.
fn read(kept: &[u8], reading: Reading) -> Option<(bool, bool, Value<'_>)> {
    let mut line = kept;
    let mut whole = false;
    if reading == Reading::Google {
        // Google reads a line up to its first NUL and at most this many bytes.
        if line.len() > GOOGLE_MAX_LINE_BYTES {
            line = &line[..GOOGLE_MAX_LINE_BYTES];
            whole = true;
        }
        if let Some(nul) = memchr(0, line) {
            line = &line[..nul];
            whole = true;
        }
    }
    if memchr(b'#', line).is_some() {
        whole = true; // what follows is a comment
    }
    let kinds = |kind: RuleKind| (kind == RuleKind::Allow, kind == RuleKind::Disallow);
    if whole {
        let (key, value) = parser::split_key_value(line, reading).ok()??;
        let (a, d) = kinds(rule_kind(parser::classify(key, reading))?);
        return Some((a, d, Value::Exact(value)));
    }
    if let Some(colon) = memchr(b':', line) {
        // The key is complete.
        let key = parser::trim(&line[..colon]);
        if key.is_empty() {
            return None;
        }
        let (a, d) = kinds(rule_kind(parser::classify(key, reading))?);
        return Some((a, d, Value::Prefix(parser::trim_start(&line[colon + 1..]))));
    }
    // No ':' yet: the key may still become a rule's. Google matches keys by prefix and
    // takes whitespace for the ':' of a two-word line, so its value is unknown.
    let (may_allow, may_disallow) = match reading {
        Reading::Google => {
            let t = parser::trim_start(line);
            let could = |name: &&[u8]| starts_with_ignore_case(name, t) || starts_with_ignore_case(t, name);
            ([b"allow".as_slice()].iter().any(could), GOOGLE_DISALLOW_KEYS.iter().any(could))
        }
        Reading::Rfc => {
            let t = parser::trim(line);
            (starts_with_ignore_case(b"allow", t), starts_with_ignore_case(b"disallow", t))
        }
    };
    (may_allow || may_disallow).then_some((may_allow, may_disallow, Value::Any))
}

/// Patterns that cover every rule with `value` (see [`CutRule::covers`]).
fn covers(value: Value<'_>, reading: Reading, may_allow: bool, arena: &mut Vec<u8>) -> Option<Vec<Pat>> {
    let compile = |v: &[u8], arena: &mut Vec<u8>| match reading {
        Reading::Google => pattern::compile_google(v, arena),
        Reading::Rfc => pattern::compile_rfc(v, arena),
    };
    let mut pats = Vec::new();
    let index_html = |v: &[u8], whole: bool| {
        // Google: `allow: /d/index.htm...` also allows `/d/`.
        let slash = v.iter().rposition(|&b| b == b'/')?;
        let tail = &v[slash + 1..];
        let may = tail.starts_with(b"index.htm") || (!whole && b"index.htm".starts_with(tail));
        (reading == Reading::Google && may_allow && may).then(|| [&v[..=slash], b"$"].concat())
    };
    match value {
        Value::Any => return None,
        Value::Exact(v) => {
            if !v.is_empty() {
                pats.push(compile(v, arena));
                if let Some(dir) = index_html(v, true) {
                    pats.push(compile(&dir, arena));
                }
            }
        }
        Value::Prefix(v) => {
            // Leave out an escape the limit may have cut (`%2` of `%2F`).
            let mut v = v;
            for n in [1, 2] {
                if v.len() >= n && v[v.len() - n] == b'%' {
                    v = &v[..v.len() - n];
                    break;
                }
            }
            // The RFC reading resolves dot segments, which the rest of the line may make.
            if reading == Reading::Rfc && memchr::memmem::find(v, b"/.").is_some() {
                return None;
            }
            // The value may end here (the rest is whitespace) or go on: `v*` covers that.
            if !v.is_empty() {
                pats.push(compile(v, arena));
            }
            pats.push(compile(&[v, b"*"].concat(), arena));
            if let Some(dir) = index_html(v, false) {
                pats.push(compile(&dir, arena));
            }
        }
    }
    Some(pats)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kinds(kept: &str, reading: Reading) -> Option<(bool, bool)> {
        read(kept.as_bytes(), reading).map(|(a, d, _)| (a, d))
    }

    #[test]
    fn what_a_cut_line_may_be() {
        use Reading::{Google, Rfc};
        for (kept, google, rfc) in [
            ("Allow: /p", Some((true, false)), Some((true, false))),
            ("disallow: ", Some((false, true)), Some((false, true))),
            ("Disalow: /x", Some((false, true)), None),
            ("Dis", Some((false, true)), Some((false, true))),
            ("  ", Some((true, true)), Some((true, true))),
            ("", Some((true, true)), Some((true, true))),
            ("a", Some((true, false)), Some((true, false))),
            ("disallow /a", Some((false, true)), None),
            ("Allowance", Some((true, false)), None),
            ("User-agent: x", None, None),
            ("Sitemap", None, None),
            ("# Allow: /", None, None),
            ("Allow: /a # note", Some((true, false)), Some((true, false))),
            ("Disallow: /a\0/b", Some((false, true)), Some((false, true))),
            ("Foo\0Allow", None, None),
            (": /a", None, None),
        ] {
            assert_eq!(kinds(kept, Google), google, "google {kept:?}");
            assert_eq!(kinds(kept, Rfc), rfc, "rfc {kept:?}");
        }
    }

    fn covered(kept: &str, reading: Reading, path: &str) -> bool {
        let mut arena = Vec::new();
        let Some((may_allow, may_disallow, value)) = read(kept.as_bytes(), reading) else { return false };
        let rule = CutRule {
            group: 0,
            may_allow,
            may_disallow,
            covers: covers(value, reading, may_allow, &mut arena),
        };
        let path = match reading {
            Reading::Google => path.as_bytes().to_vec(),
            Reading::Rfc => pattern::canonical_path(path.as_bytes()).into_owned(),
        };
        let allowed = !may_allow;
        rule.may_matter(&[0], allowed, &arena, &path)
    }

    #[test]
    fn what_a_cut_rule_may_match() {
        use Reading::{Google, Rfc};
        for reading in [Google, Rfc] {
            // `Allow: /p` may be `Allow: /public` or `Allow: /private`.
            assert!(covered("Allow: /p", reading, "/private"));
            assert!(covered("Allow: /p", reading, "/p"));
            assert!(!covered("Allow: /p", reading, "/q"));
            // `$` may end the value (the rest is whitespace) or be literal.
            assert!(covered("Allow: /a$", reading, "/a"));
            assert!(!covered("Allow: /a$", reading, "/ab"));
            // A comment ends the value.
            assert!(!covered("Allow: /a$ # x", reading, "/ab"));
            assert!(covered("Allow: /a # x", reading, "/ab"));
            // An escape the limit may have cut.
            assert!(covered("Allow: /a%2", reading, "/a%2Fb"));
            // No value yet, or no key yet: anything.
            assert!(covered("Allow:", reading, "/anything"));
            assert!(covered("Al", reading, "/anything"));
            // Wildcards.
            assert!(covered("Allow: /*.ph", reading, "/x.php"));
        }
        // Google's index.html rule: `allow: /d/index.h...` also allows `/d/`.
        assert!(covered("Allow: /d/index.h", Google, "/d/"));
        assert!(covered("Allow: /d/", Google, "/d/"));
        assert!(!covered("Allow: /d/x", Google, "/d/"));
        assert!(!covered("Allow: /d/index.h", Rfc, "/d/"));
        // RFC: dot segments the rest of the line may make.
        assert!(covered("Allow: /a/.", Rfc, "/b"));
        // Google reads a line up to 16,663 bytes: what it would have read is known, here
        // a rule ending in `$`; the RFC reading reads on.
        let xs = "x".repeat(GOOGLE_MAX_LINE_BYTES - 9);
        let long = format!("Allow: /{xs}$yz");
        assert!(covered(&long, Google, &format!("/{xs}")));
        assert!(!covered(&long, Google, &format!("/{xs}q")));
        assert!(covered(&long, Rfc, &format!("/{xs}%24yz")));
    }
}
