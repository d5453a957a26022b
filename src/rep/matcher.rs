//! Matching one group's rules against a path, in time linear in the path and the rules.
//!
//! **Precedence, stated once:** every rule that matches offers its priority (the length
//! of its compiled pattern in octets, see [`super::pattern::Compiled`]). Per kind, the
//! highest priority wins ([`Best::offer`]); between the two kinds, allow wins a tie
//! ([`Best::allowed`]). The rest of this module only finds which rules match.
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
//!   segments of the group when it has many ([`super::aho`]). Neither backtracks.

use std::cmp::Ordering;

use super::RuleKind;
use super::aho::WildSet;
pub(crate) use super::pattern::{Pat, Span};

/// A rule that matched, as offered to [`Best`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    /// Length of the compiled pattern: longer is more specific.
    pub priority: u32,
    /// Index of the rule in its reading, in file order.
    pub rule: u32,
}

/// The best allow and the best disallow seen so far.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Best {
    pub allow: Option<Hit>,
    pub disallow: Option<Hit>,
}

impl Best {
    /// Keeps `hit` if it beats the current best of its kind: a higher priority wins, and
    /// of two equal priorities the rule earlier in the file is kept.
    #[inline]
    pub fn offer(&mut self, kind: RuleKind, hit: Hit) {
        let slot = match kind {
            RuleKind::Allow => &mut self.allow,
            RuleKind::Disallow => &mut self.disallow,
        };
        match slot {
            Some(cur)
                if (cur.priority, std::cmp::Reverse(cur.rule))
                    >= (hit.priority, std::cmp::Reverse(hit.rule)) => {}
            _ => *slot = Some(hit),
        }
    }

    /// Merges another result in (used when several groups apply).
    pub fn merge(&mut self, other: &Best) {
        if let Some(h) = other.allow {
            self.offer(RuleKind::Allow, h);
        }
        if let Some(h) = other.disallow {
            self.offer(RuleKind::Disallow, h);
        }
    }

    /// The verdict: allowed unless the best disallow is strictly more specific than the
    /// best allow. Returns the deciding hit, if any rule matched.
    #[inline]
    pub fn allowed(&self) -> (bool, Option<(RuleKind, Hit)>) {
        match (self.allow, self.disallow) {
            (None, None) => (true, None),
            (Some(a), None) => (true, Some((RuleKind::Allow, a))),
            (None, Some(d)) => (false, Some((RuleKind::Disallow, d))),
            (Some(a), Some(d)) if a.priority >= d.priority => (true, Some((RuleKind::Allow, a))),
            (Some(_), Some(d)) => (false, Some((RuleKind::Disallow, d))),
        }
    }
}

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
    /// `first*mid*...*mid` with an optional anchored `last`.
    Wild { first: Span, mids: Vec<Span>, last: Option<Span> },
}

/// Sorts a compiled pattern into its [`Shape`]. Empty segments (`**`) are dropped and a
/// pattern ending in `*` or `*$` is not anchored.
pub(crate) fn shape(arena: &[u8], p: &Pat) -> Shape {
    let bytes = p.span.get(arena);
    if memchr::memchr(b'*', bytes).is_none() {
        return if p.anchored { Shape::Exact(p.span) } else { Shape::Prefix(p.span) };
    }
    let mut parts = Vec::new();
    let mut at = 0usize;
    for piece in bytes.split(|&b| b == b'*') {
        parts.push(Span { start: p.span.start + at as u32, len: piece.len() as u32 });
        at += piece.len() + 1;
    }
    let first = parts[0];
    let rest = &parts[1..];
    let ends_in_star = rest.last().is_some_and(|l| l.len == 0);
    let (mid_parts, last) = if p.anchored && !ends_in_star {
        (&rest[..rest.len() - 1], rest.last().copied())
    } else {
        (rest, None)
    };
    let mids: Vec<Span> = mid_parts.iter().copied().filter(|m| m.len > 0).collect();
    match (mids.is_empty(), last) {
        (true, None) => Shape::Prefix(first),
        (true, Some(last)) => Shape::Suffix { first, last },
        (false, last) => Shape::Wild { first, mids, last },
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
        // Sort by the first 8 bytes as a number first: most comparisons end there.
        let key = |s: &Span| {
            let b = s.get(arena);
            let mut k = [0u8; 8];
            let n = b.len().min(8);
            k[..n].copy_from_slice(&b[..n]);
            u64::from_be_bytes(k)
        };
        let mut order: Vec<(u64, u32)> = items.iter().enumerate().map(|(i, s)| (key(s), i as u32)).collect();
        order.sort_unstable_by(|a, b| {
            a.0.cmp(&b.0).then_with(|| items[a.1 as usize].get(arena).cmp(items[b.1 as usize].get(arena)))
        });
        let mut index = LitIndex::default();
        let mut entry_of = vec![0u32; items.len()];
        let mut stack: Vec<u32> = Vec::new();
        for &(_, i) in &order {
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
    hit: Hit,
}

/// The compiled rules of one group. Spans point into an arena kept by the caller and
/// passed to [`RuleSet::eval`].
#[derive(Debug, Default)]
pub(crate) struct RuleSet {
    /// Prefix and exact literals.
    lits: LitIndex,
    /// Per literal: best prefix rule, best exact rule.
    lit_best: Vec<(Best, Best)>,
    /// Reversed `last` of suffix rules.
    sufs: LitIndex,
    /// Per reversed `last`: its rules.
    suf_rules: Vec<Vec<SuffixRule>>,
    /// Rules with wildcards in the middle.
    wild: WildSet,
}

impl RuleSet {
    /// Compiles the rules of one group whose patterns are in `arena` (which may grow);
    /// `automaton_min_rules` or more wildcard rules use the automaton engine.
    pub fn build(arena: &mut Vec<u8>, rules: &[RuleInput], automaton_min_rules: usize) -> RuleSet {
        let mut set = RuleSet::default();
        let mut lit_items: Vec<(Span, bool, RuleKind, Hit)> = Vec::new();
        let mut suf_items: Vec<(Span, Span, RuleKind, Hit)> = Vec::new();
        let mut wild_items = Vec::new();
        for r in rules {
            let hit = Hit { priority: r.pattern.priority, rule: r.rule };
            match shape(arena, &r.pattern) {
                Shape::Prefix(lit) => lit_items.push((lit, false, r.kind, hit)),
                Shape::Exact(lit) => lit_items.push((lit, true, r.kind, hit)),
                Shape::Suffix { first, last } => {
                    let start = arena.len();
                    arena.extend_from_within(last.start as usize..(last.start + last.len) as usize);
                    arena[start..].reverse();
                    let rev = Span { start: start as u32, len: last.len };
                    suf_items.push((rev, first, r.kind, hit));
                }
                Shape::Wild { first, mids, last } => wild_items.push((first, mids, last, r.kind, hit)),
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
        let (sufs, entry_of) = LitIndex::build(arena, &spans);
        set.suf_rules = vec![Vec::new(); sufs.lits.len()];
        for (item, &e) in suf_items.iter().zip(&entry_of) {
            let (_, first, kind, hit) = *item;
            set.suf_rules[e as usize].push(SuffixRule { first, kind, hit });
        }
        set.sufs = sufs;
        set.wild = WildSet::build(arena, wild_items, automaton_min_rules);
        set
    }

    /// Offers every rule of this group that matches `path` to `best`.
    pub fn eval(&self, arena: &[u8], path: &[u8], best: &mut Best) {
        self.lits.for_each_prefix(arena, Forward(path), |e, whole| {
            let (prefix, exact) = &self.lit_best[e as usize];
            best.merge(prefix);
            if whole {
                best.merge(exact);
            }
        });
        if !self.suf_rules.is_empty() {
            self.sufs.for_each_prefix(arena, Backward(path), |e, _| {
                let last_len = self.sufs.lits[e as usize].len as usize;
                for r in &self.suf_rules[e as usize] {
                    let first = r.first.get(arena);
                    if path.len() >= first.len() + last_len && path.starts_with(first) {
                        best.offer(r.kind, r.hit);
                    }
                }
            });
        }
        self.wild.eval(arena, path, best);
    }

    /// Approximate heap bytes held (not counting the arena).
    pub fn heap_bytes(&self) -> usize {
        self.lits.lits.capacity() * 8
            + self.lits.parent.capacity() * 4
            + self.lit_best.capacity() * std::mem::size_of::<(Best, Best)>()
            + self.sufs.lits.capacity() * 8
            + self.sufs.parent.capacity() * 4
            + self
                .suf_rules
                .iter()
                .map(|v| v.capacity() * std::mem::size_of::<SuffixRule>() + 24)
                .sum::<usize>()
            + self.wild.heap_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::super::pattern::compile_google;
    use super::*;

    fn s(p: &str) -> String {
        let mut a = Vec::new();
        let pat = compile_google(p.as_bytes(), &mut a);
        let show = |s: &Span| String::from_utf8_lossy(s.get(&a)).into_owned();
        match shape(&a, &pat) {
            Shape::Prefix(l) => format!("prefix {}", show(&l)),
            Shape::Exact(l) => format!("exact {}", show(&l)),
            Shape::Suffix { first, last } => format!("suffix {} {}", show(&first), show(&last)),
            Shape::Wild { first, mids, last } => format!(
                "wild {} {:?} {:?}",
                show(&first),
                mids.iter().map(show).collect::<Vec<_>>(),
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
        let set = RuleSet::build(&mut arena, &inputs, min);
        let mut best = Best::default();
        set.eval(&arena, path.as_bytes(), &mut best);
        let (ok, hit) = best.allowed();
        (ok, hit.map(|h| h.1.rule))
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
