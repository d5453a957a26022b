//! Matching one group's rules against a path, in time linear in the path and the rules.
//!
//! Which rule wins is stated once, in [`crate::precedence`]: every rule that matches
//! offers its hit there. This module only finds which rules match.
//!
//! Rules are sorted by shape when a group is compiled:
//! - `/lit` and `/lit*` (prefix) and `/lit$` (exact): a sorted array with a parent link
//!   from each literal to its longest proper prefix. One binary search finds the
//!   greatest literal `<=` the path; all literals that are prefixes of the path are on
//!   its parent chain.
//! - `first*last$` (suffix): the same index over reversed `last`.
//! - everything else (`first*mid*...*mid[*last$]`): per rule, a greedy left-to-right
//!   search (leftmost occurrence of each `mid`, which is optimal for `*`-only globs) when
//!   the group has few of them, or one pass of an Aho–Corasick automaton over all `mid`
//!   segments of the group when it has many ([`crate::aho`]). Neither backtracks.

use std::cmp::Ordering;

use crate::RuleKind;
use crate::aho::WildSet;
use crate::bytes::find;
pub(crate) use crate::bytes::sorted_by_bytes;
pub(crate) use crate::pattern::{Pat, Span};
pub(crate) use crate::precedence::{Best, Hit};

/// One rule handed to [`RuleSet::build`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct RuleInput {
    pub kind: RuleKind,
    pub pattern: Pat,
    pub rule: u32,
}

/// The shape of a compiled pattern; spans point into the pattern's arena.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Shape {
    /// `lit` or `lit*`: the path starts with `lit`.
    Prefix(Span),
    /// `lit$`: the path is `lit`.
    Exact(Span),
    /// `first*last$`: starts with `first`, ends with `last`, long enough for both.
    Suffix { first: Span, last: Span },
    /// `first*mid*...*mid` with an optional anchored `last`; the mids were appended to
    /// the buffer passed to [`shape`], starting at `mids`.
    Wild { first: Span, mids: usize, last: Option<Span> },
}

/// Sorts a compiled pattern into its [`Shape`]. Empty segments (`**`) are dropped and a
/// pattern ending in `*` or `*$` is not anchored. The mids of a `Wild` pattern are
/// appended to `mids`.
pub(crate) fn shape(arena: &[u8], p: &Pat, mids: &mut Vec<Span>) -> Shape {
    let bytes = p.span.get(arena);
    let Some(star) = memchr::memchr(b'*', bytes) else {
        return if p.anchored { Shape::Exact(p.span) } else { Shape::Prefix(p.span) };
    };
    let first = Span { start: p.span.start, len: star as u32 };
    let at = mids.len();
    let mut rest = &bytes[star + 1..];
    let mut offset = star + 1;
    // Segments after the first '*'; the final one is kept apart.
    let last = loop {
        let end = memchr::memchr(b'*', rest);
        let piece = Span { start: p.span.start + offset as u32, len: end.unwrap_or(rest.len()) as u32 };
        match end {
            Some(e) => {
                if piece.len > 0 {
                    mids.push(piece);
                }
                rest = &rest[e + 1..];
                offset += e + 1;
            }
            None => break Some(piece).filter(|l| l.len > 0),
        }
    };
    let last = match (p.anchored, last) {
        (true, Some(l)) => Some(l),
        (false, Some(l)) => {
            mids.push(l);
            None
        }
        (_, None) => None,
    };
    match (mids.len() == at, last) {
        (true, None) => Shape::Prefix(first),
        (true, Some(last)) => Shape::Suffix { first, last },
        (false, last) => Shape::Wild { first, mids: at, last },
    }
}

/// Whether one compiled pattern matches `path` (greedy, no backtracking): the first
/// segment is a prefix, each further segment is taken at its leftmost occurrence after
/// the previous one, and an anchored last segment must end the path.
#[inline]
pub(crate) fn glob_match(pattern: &[u8], anchored: bool, path: &[u8]) -> bool {
    let Some(star) = memchr::memchr(b'*', pattern) else {
        return if anchored { path == pattern } else { path.starts_with(pattern) };
    };
    let first = &pattern[..star];
    if !path.starts_with(first) {
        return false;
    }
    let mut pos = first.len();
    let mut rest = &pattern[star + 1..];
    loop {
        match memchr::memchr(b'*', rest) {
            Some(e) => {
                match find(&path[pos..], &rest[..e]) {
                    Some(i) => pos += i + e,
                    None => return false,
                }
                rest = &rest[e + 1..];
            }
            None if anchored => return path.len() >= pos + rest.len() && path.ends_with(rest),
            None => return find(&path[pos..], rest).is_some(),
        }
    }
}

/// How a path is compared against the literals of a [`LitIndex`]: forwards, or from its
/// end (for suffixes).
trait View {
    fn len(&self) -> usize;
    /// Compares a stored literal with the path (as seen through this view).
    fn cmp_lit(&self, lit: &[u8]) -> Ordering;
    /// Length of the common prefix of the literal and the path.
    fn lcp(&self, lit: &[u8]) -> usize;
}

struct Forward<'a>(&'a [u8]);
impl View for Forward<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn cmp_lit(&self, lit: &[u8]) -> Ordering {
        lit.cmp(self.0)
    }
    #[inline]
    fn lcp(&self, lit: &[u8]) -> usize {
        lit.iter().zip(self.0).take_while(|(a, b)| a == b).count()
    }
}

/// The path read from its last byte backwards; literals are stored reversed.
struct Backward<'a>(&'a [u8]);
impl View for Backward<'_> {
    fn len(&self) -> usize {
        self.0.len()
    }
    #[inline]
    fn cmp_lit(&self, lit: &[u8]) -> Ordering {
        lit.iter().cmp(self.0.iter().rev())
    }
    #[inline]
    fn lcp(&self, lit: &[u8]) -> usize {
        lit.iter().zip(self.0.iter().rev()).take_while(|(a, b)| a == b).count()
    }
}

const NONE: u32 = u32::MAX;

/// Distinct literals in sorted order, each linked to its longest proper prefix.
#[derive(Debug, Default)]
struct LitIndex {
    lits: Vec<Span>,
    parent: Vec<u32>,
}

impl LitIndex {
    /// Builds the index over `items` (literal bytes, already in `arena`); returns it and,
    /// for every item, the index of its entry.
    fn build(arena: &[u8], items: &[Span]) -> (LitIndex, Vec<u32>) {
        let bytes: Vec<&[u8]> = items.iter().map(|s| s.get(arena)).collect();
        let order = sorted_by_bytes(&bytes);
        let mut index = LitIndex::default();
        let mut entry_of = vec![0u32; items.len()];
        let mut stack: Vec<u32> = Vec::new();
        for &i in &order {
            let lit = items[i as usize];
            let bytes = lit.get(arena);
            if let Some(&last) = index.lits.last().filter(|l| l.get(arena) == bytes) {
                let _ = last;
                entry_of[i as usize] = index.lits.len() as u32 - 1;
                continue;
            }
            while let Some(&top) = stack.last() {
                if bytes.starts_with(index.lits[top as usize].get(arena)) {
                    break;
                }
                stack.pop();
            }
            let id = index.lits.len() as u32;
            index.parent.push(stack.last().copied().unwrap_or(NONE));
            index.lits.push(lit);
            stack.push(id);
            entry_of[i as usize] = id;
        }
        (index, entry_of)
    }

    /// Calls `f(entry, whole)` for every literal that is a prefix of the path; `whole`
    /// says the literal is the entire path.
    #[inline]
    fn for_each_prefix<V: View>(&self, arena: &[u8], path: V, mut f: impl FnMut(u32, bool)) {
        let after = self.lits.partition_point(|l| path.cmp_lit(l.get(arena)) != Ordering::Greater);
        if after == 0 {
            return;
        }
        let mut j = after as u32 - 1;
        let lcp = path.lcp(self.lits[j as usize].get(arena));
        let n = path.len();
        loop {
            let len = self.lits[j as usize].len as usize;
            if len <= lcp {
                f(j, len == n);
            }
            j = self.parent[j as usize];
            if j == NONE {
                return;
            }
        }
    }
}

/// A `first*last$` rule, filed under its reversed `last`.
#[derive(Debug, Clone, Copy)]
struct SuffixRule {
    first: Span,
    kind: RuleKind,
    key: u64,
}

/// Groups with at most this many rules are matched rule by rule.
const LINEAR_MAX_RULES: usize = 8;

/// The compiled rules of one group (or of several merged groups). Spans point into an
/// arena kept by the caller and passed to [`RuleSet::eval`].
#[derive(Debug)]
pub(crate) enum RuleSet {
    /// A few rules, each matched on its own.
    Linear(Vec<LinearRule>),
    /// Rules indexed by shape.
    Indexed(Box<Indexed>),
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct LinearRule {
    pattern: Span,
    anchored: bool,
    kind: RuleKind,
    key: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Indexed {
    /// Bytes this set adds to the shared arena's (the reversed suffixes).
    own: Vec<u8>,
    /// Prefix and exact literals.
    lits: LitIndex,
    /// Per literal: best prefix rules, best exact rules.
    lit_best: Vec<(Best, Best)>,
    /// Reversed `last` of suffix rules (in `own`).
    sufs: LitIndex,
    /// Per reversed `last`: its rules.
    suf_rules: Vec<Vec<SuffixRule>>,
    /// Rules with wildcards in the middle.
    wild: WildSet,
}

impl Default for RuleSet {
    fn default() -> Self {
        RuleSet::Linear(Vec::new())
    }
}

impl RuleSet {
    /// Compiles rules whose patterns are in `arena`; `automaton_min_rules` or more
    /// wildcard rules use the automaton engine.
    pub fn build(arena: &[u8], rules: &[RuleInput], automaton_min_rules: usize) -> RuleSet {
        if rules.len() <= LINEAR_MAX_RULES {
            let rules = rules
                .iter()
                .map(|r| LinearRule {
                    pattern: r.pattern.span,
                    anchored: r.pattern.anchored,
                    kind: r.kind,
                    key: Hit { priority: r.pattern.priority, rule: r.rule }.key(),
                })
                .collect();
            return RuleSet::Linear(rules);
        }
        let mut set = Indexed::default();
        let mut lit_items: Vec<(Span, bool, RuleKind, Hit)> = Vec::new();
        let mut suf_items: Vec<(Span, Span, RuleKind, Hit)> = Vec::new();
        let mut wild_items = Vec::new();
        let mut mids = Vec::new();
        for r in rules {
            let hit = Hit { priority: r.pattern.priority, rule: r.rule };
            match shape(arena, &r.pattern, &mut mids) {
                Shape::Prefix(lit) => lit_items.push((lit, false, r.kind, hit)),
                Shape::Exact(lit) => lit_items.push((lit, true, r.kind, hit)),
                Shape::Suffix { first, last } => {
                    let start = set.own.len();
                    set.own.extend(last.get(arena).iter().rev());
                    let rev = Span { start: start as u32, len: last.len };
                    suf_items.push((rev, first, r.kind, hit));
                }
                Shape::Wild { first, mids: at, last } => wild_items.push(crate::aho::WildItem {
                    pattern: r.pattern.span,
                    anchored: r.pattern.anchored,
                    first,
                    mids: at as u32,
                    last,
                    kind: r.kind,
                    hit,
                }),
            }
        }
        let spans: Vec<Span> = lit_items.iter().map(|i| i.0).collect();
        let (lits, entry_of) = LitIndex::build(arena, &spans);
        set.lit_best = vec![(Best::default(), Best::default()); lits.lits.len()];
        for (item, &e) in lit_items.iter().zip(&entry_of) {
            let (_, exact, kind, hit) = *item;
            let slot = &mut set.lit_best[e as usize];
            if exact { slot.1.offer(kind, hit) } else { slot.0.offer(kind, hit) }
        }
        set.lits = lits;
        let spans: Vec<Span> = suf_items.iter().map(|i| i.0).collect();
        let (sufs, entry_of) = LitIndex::build(&set.own, &spans);
        set.suf_rules = vec![Vec::new(); sufs.lits.len()];
        for (item, &e) in suf_items.iter().zip(&entry_of) {
            let (_, first, kind, hit) = *item;
            set.suf_rules[e as usize].push(SuffixRule { first, kind, key: hit.key() });
        }
        set.sufs = sufs;
        set.wild = WildSet::build(arena, wild_items, mids, automaton_min_rules);
        RuleSet::Indexed(Box::new(set))
    }

    /// Offers every rule of this set that matches `path` to `best`.
    pub fn eval(&self, arena: &[u8], path: &[u8], best: &mut Best) {
        let set = match self {
            RuleSet::Linear(rules) => {
                for r in rules {
                    if glob_match(r.pattern.get(arena), r.anchored, path) {
                        best.offer_key(r.kind, r.key);
                    }
                }
                return;
            }
            RuleSet::Indexed(set) => set,
        };
        set.lits.for_each_prefix(arena, Forward(path), |e, whole| {
            let (prefix, exact) = &set.lit_best[e as usize];
            best.merge(prefix);
            if whole {
                best.merge(exact);
            }
        });
        if !set.suf_rules.is_empty() {
            set.sufs.for_each_prefix(&set.own, Backward(path), |e, _| {
                let last_len = set.sufs.lits[e as usize].len as usize;
                for r in &set.suf_rules[e as usize] {
                    let first = r.first.get(arena);
                    if path.len() >= first.len() + last_len && path.starts_with(first) {
                        best.offer_key(r.kind, r.key);
                    }
                }
            });
        }
        set.wild.eval(arena, path, best);
    }

    /// Approximate heap bytes held (not counting the arena).
    pub fn heap_bytes(&self) -> usize {
        match self {
            RuleSet::Linear(rules) => rules.capacity() * std::mem::size_of::<LinearRule>(),
            RuleSet::Indexed(set) => {
                std::mem::size_of::<Indexed>()
                    + set.own.capacity()
                    + set.lits.lits.capacity() * 8
                    + set.lits.parent.capacity() * 4
                    + set.lit_best.capacity() * std::mem::size_of::<(Best, Best)>()
                    + set.sufs.lits.capacity() * 8
                    + set.sufs.parent.capacity() * 4
                    + set
                        .suf_rules
                        .iter()
                        .map(|v| v.capacity() * std::mem::size_of::<SuffixRule>() + 24)
                        .sum::<usize>()
                    + set.wild.heap_bytes()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pattern::compile_google;

    fn s(p: &str) -> String {
        let mut a = Vec::new();
        let pat = compile_google(p.as_bytes(), &mut a);
        let show = |s: &Span| String::from_utf8_lossy(s.get(&a)).into_owned();
        let mut mids = vec![Span::default()];
        match shape(&a, &pat, &mut mids) {
            Shape::Prefix(l) => format!("prefix {}", show(&l)),
            Shape::Exact(l) => format!("exact {}", show(&l)),
            Shape::Suffix { first, last } => format!("suffix {} {}", show(&first), show(&last)),
            Shape::Wild { first, mids: at, last } => format!(
                "wild {} {:?} {:?}",
                show(&first),
                mids[at..].iter().map(show).collect::<Vec<_>>(),
                last.map(|l| show(&l))
            ),
        }
    }

    #[test]
    fn shapes() {
        assert_eq!(s("/a"), "prefix /a");
        assert_eq!(s("/a**"), "prefix /a");
        assert_eq!(s("/a*$"), "prefix /a");
        assert_eq!(s("/a$"), "exact /a");
        assert_eq!(s("*"), "prefix ");
        assert_eq!(s("/*.php$"), "suffix / .php");
        assert_eq!(s("/a**b*c$"), r#"wild /a ["b"] Some("c")"#);
        assert_eq!(s("/a*b*$"), r#"wild /a ["b"] None"#);
        assert_eq!(s("*a*b"), r#"wild  ["a", "b"] None"#);
        assert_eq!(s("/a*b"), r#"wild /a ["b"] None"#);
    }

    fn eval(rules: &[(&str, RuleKind)], path: &str, min: usize) -> (bool, Option<u32>) {
        let mut arena = Vec::new();
        let inputs: Vec<RuleInput> = rules
            .iter()
            .enumerate()
            .map(|(i, r)| RuleInput {
                kind: r.1,
                pattern: compile_google(r.0.as_bytes(), &mut arena),
                rule: i as u32,
            })
            .collect();
        // Pad to more than LINEAR_MAX_RULES with rules that never match, to use the index.
        let mut inputs = inputs;
        for i in 0..LINEAR_MAX_RULES {
            let pattern = compile_google(format!("/never-{i}").as_bytes(), &mut arena);
            inputs.push(RuleInput { kind: RuleKind::Disallow, pattern, rule: 1000 + i as u32 });
        }
        let set = RuleSet::build(&arena, &inputs, min);
        let mut best = Best::default();
        set.eval(&arena, path.as_bytes(), &mut best);
        let (ok, hit) = best.allowed();
        (ok, hit.map(|h| h.1.rule))
    }
    #[test]
    fn sorted_by_bytes_is_byte_order() {
        let words: Vec<&[u8]> = vec![
            b"/$2788/a/b",
            b"/$2788/a",
            b"",
            b"/",
            b"/$2788/a/c",
            b"/$2788/A",
            b"a\0",
            b"a",
            b"/$2788/a/b",
            b"abcdefghij",
            b"abcdefg",
            b"abcdefgh",
            b"abcdefghi\xff",
            b"\xff",
        ];
        let order = sorted_by_bytes(&words);
        let got: Vec<&[u8]> = order.iter().map(|&i| words[i as usize]).collect();
        let mut want = words.clone();
        want.sort();
        assert_eq!(got, want);
    }

    #[test]
    fn glob_match_cases() {
        for (p, anchored, path, want) in [
            ("/a", false, "/ab", true),
            ("/a", true, "/ab", false),
            ("/a", true, "/a", true),
            ("/a*b", false, "/axxb", true),
            ("/a*b", true, "/axxbx", false),
            ("/a*b", true, "/abxb", true),
            ("*", false, "/", true),
            ("/a*", true, "/abc", true),
            ("/*b*c", true, "/bcbc", true),
            ("/*bc*c", true, "/bc", false),
        ] {
            assert_eq!(glob_match(p.as_bytes(), anchored, path.as_bytes()), want, "{p} {anchored} {path}");
        }
    }

    #[test]
    fn precedence_longest_then_allow() {
        use RuleKind::*;
        for min in [1, 1000] {
            assert_eq!(eval(&[("/p", Allow), ("/", Disallow)], "/page", min), (true, Some(0)));
            assert_eq!(eval(&[("/folder", Allow), ("/folder", Disallow)], "/folder/x", min), (true, Some(0)));
            assert_eq!(eval(&[("/page", Allow), ("/*.htm", Disallow)], "/page.htm", min), (false, Some(1)));
            assert_eq!(eval(&[("/page", Allow), ("/*.ph", Disallow)], "/page.php5", min), (true, Some(0)));
            assert_eq!(eval(&[("/$", Allow), ("/", Disallow)], "/", min), (true, Some(0)));
            assert_eq!(eval(&[("/$", Allow), ("/", Disallow)], "/page.htm", min), (false, Some(1)));
            assert_eq!(eval(&[("/*.php$", Disallow)], "/a.php", min), (false, Some(0)));
            assert_eq!(eval(&[("/*.php$", Disallow)], "/a.php?x", min), (true, None));
            assert_eq!(eval(&[("/a*b*c", Disallow)], "/aXbYc", min), (false, Some(0)));
            assert_eq!(eval(&[("/a*b*c$", Disallow)], "/abcbc", min), (false, Some(0)));
            assert_eq!(eval(&[("/a*bc*c$", Disallow)], "/abc", min), (true, None));
        }
    }

    #[test]
    fn literal_chain_collects_every_prefix() {
        use RuleKind::*;
        // "/a*****" outranks the longer literal "/ab" although its literal is shorter.
        assert_eq!(eval(&[("/a*****", Disallow), ("/ab", Allow)], "/abc", 1), (false, Some(0)));
        assert_eq!(eval(&[("/a", Disallow), ("/ab", Allow), ("/abd", Disallow)], "/abc", 1), (true, Some(1)));
        assert_eq!(eval(&[("/a", Disallow), ("/b", Allow)], "/", 1), (true, None));
        assert_eq!(eval(&[("/abc$", Disallow), ("/ab", Allow)], "/abc", 1), (false, Some(0)));
        assert_eq!(eval(&[("/abc$", Disallow), ("/ab", Allow)], "/abcd", 1), (true, Some(1)));
    }
}
