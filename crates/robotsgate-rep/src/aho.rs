//! Rules with wildcards in the middle: `first*mid*...*mid` with an optional anchored
//! `last` (see [`crate::matcher`] for the other shapes).
//!
//! A `*`-only glob that must match from the start of the path is decided greedily: take
//! the leftmost occurrence of each `mid` after the previous one; if any choice works, this
//! one does. Two engines run that greedy search:
//!
//! - **Rule by rule** (few rules): `memchr`/`memmem` for each segment, O(path + pattern)
//!   per rule.
//! - **Automaton** (many rules): rules are merged into a trie keyed by `first` and their
//!   sequence of mids, so rules that start alike make progress together; a trie node is
//!   "the rules that found these mids". Every node waits in a queue on the mid it needs
//!   next. One pass of an Aho–Corasick automaton over the distinct mids reports, at each
//!   path position, the mids that end there; a mid whose queue holds nodes that can end
//!   here releases them: their finished rules are offered, their children start waiting.
//!   The mids that end at one position form a chain of suffixes (the automaton's
//!   dictionary links); to visit only those with waiters, the chains are cut into heavy
//!   paths (heavy-light decomposition) laid out contiguously, so a chain is a few ranges
//!   of a bitset of non-empty queues. A node whose subtree cannot beat the best hits so
//!   far is dropped. Cost per check: O(path × (log mids + chain / 64) + nodes released),
//!   never more than the size of the rules, whatever the path.

use std::cell::RefCell;
use std::collections::HashMap;
use std::collections::hash_map::Entry;

use crate::RuleKind;
use crate::bytes::{find, sorted_by_bytes};
use crate::pattern::Span;
use crate::precedence::{Best, Hit};

/// Groups with at least this many wildcard rules use the automaton.
pub(crate) const DEFAULT_AUTOMATON_MIN_RULES: usize = 24;

const NONE: u32 = u32::MAX;

/// One rule as handed over by the matcher: `first`, its mids (from index `mids` of the
/// mid buffer, up to the next item's), the anchored `last`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct WildItem {
    /// The whole compiled pattern (to merge duplicates).
    pub pattern: Span,
    pub anchored: bool,
    pub first: Span,
    pub mids: u32,
    pub last: Option<Span>,
    pub kind: RuleKind,
    pub hit: Hit,
}

#[derive(Debug, Clone, Copy)]
struct WildRule {
    first: Span,
    /// Anchored final segment, if any.
    last: Option<Span>,
    /// Range in `WildSet::mids`.
    mids_at: u32,
    mids_len: u32,
    kind: RuleKind,
    key: u64,
}

/// The wildcard rules of one group (spans into an arena kept by the caller).
#[derive(Debug, Default)]
pub(crate) struct WildSet {
    rules: Vec<WildRule>,
    mids: Vec<Span>,
    auto: Option<Box<Automaton>>,
}

impl WildSet {
    /// `items[i]`'s mids are `mids[items[i].mids..items[i + 1].mids]`.
    pub fn build(arena: &[u8], items: Vec<WildItem>, mids: Vec<Span>, automaton_min_rules: usize) -> WildSet {
        let ends: Vec<u32> = items.iter().skip(1).map(|i| i.mids).chain([mids.len() as u32]).collect();
        // Identical patterns of the same kind are one rule: the earliest (best key) cites.
        // foldhash: fast, and seeded per process so file contents cannot aim at collisions.
        let mut seen: HashMap<(u8, &[u8]), usize, foldhash::fast::RandomState> =
            HashMap::with_capacity_and_hasher(items.len(), foldhash::fast::RandomState::default());
        let mut set = WildSet::default();
        for (i, end) in items.iter().zip(ends) {
            let key = i.hit.key();
            let tag = (i.kind == RuleKind::Allow) as u8 | (i.anchored as u8) << 1;
            match seen.entry((tag, i.pattern.get(arena))) {
                Entry::Occupied(e) => {
                    let r = &mut set.rules[*e.get()];
                    r.key = r.key.max(key);
                }
                Entry::Vacant(e) => {
                    e.insert(set.rules.len());
                    let mids_at = set.mids.len() as u32;
                    set.mids.extend_from_slice(&mids[i.mids as usize..end as usize]);
                    set.rules.push(WildRule {
                        first: i.first,
                        last: i.last,
                        mids_at,
                        mids_len: end - i.mids,
                        kind: i.kind,
                        key,
                    });
                }
            }
        }
        if !set.rules.is_empty() && set.rules.len() >= automaton_min_rules {
            set.auto = Some(Box::new(Automaton::build(&set, arena)));
            // The automaton holds all it needs.
            set.rules = Vec::new();
            set.mids = Vec::new();
        }
        set
    }

    pub fn eval(&self, arena: &[u8], path: &[u8], best: &mut Best) {
        match &self.auto {
            Some(auto) => auto.eval(arena, path, best),
            None => {
                for r in &self.rules {
                    if self.greedy(arena, r, path) {
                        best.offer_key(r.kind, r.key);
                    }
                }
            }
        }
    }

    fn greedy(&self, arena: &[u8], r: &WildRule, path: &[u8]) -> bool {
        let first = r.first.get(arena);
        if !path.starts_with(first) {
            return false;
        }
        let mut pos = first.len();
        for m in &self.mids[r.mids_at as usize..(r.mids_at + r.mids_len) as usize] {
            let m = m.get(arena);
            match find(&path[pos..], m) {
                Some(i) => pos += i + m.len(),
                None => return false,
            }
        }
        tail_ok(arena, r.last, path, pos)
    }

    pub fn heap_bytes(&self) -> usize {
        self.rules.capacity() * std::mem::size_of::<WildRule>()
            + self.mids.capacity() * 8
            + self.auto.as_ref().map_or(0, |a| a.heap_bytes())
    }
}

/// Whether a rule whose mids matched up to `pos` ends as its anchored `last` requires.
#[inline]
fn tail_ok(arena: &[u8], last: Option<Span>, path: &[u8], pos: usize) -> bool {
    match last {
        None => true,
        Some(last) => {
            let last = last.get(arena);
            path.len() >= pos + last.len() && path.ends_with(last)
        }
    }
}

/// A node of the rule trie: the rules with a given `first` and a given run of mids.
#[derive(Debug, Clone, Copy)]
struct Node {
    /// The mid this node waits for (an automaton segment).
    seg: u32,
    /// First-level nodes: the prefix the path must start with (empty below).
    first: Span,
    child: u32,
    sibling: u32,
    /// Index into `Automaton::ends` of the rules that end here, or NONE.
    end: u32,
    /// The best hits in this node's subtree (itself included).
    reach: Best,
}

/// Rules that end at a node: the best unanchored ones, and the anchored ones.
#[derive(Debug, Clone, Copy)]
struct Ends {
    unanchored: Best,
    anchored_at: u32,
    anchored_len: u32,
}

#[derive(Debug, Clone, Copy)]
struct AnchoredEnd {
    last: Span,
    kind: RuleKind,
    key: u64,
}

/// Aho–Corasick automaton over the distinct mids, the rule trie, and the waiting lists
/// each check starts from.
#[derive(Debug)]
struct Automaton {
    // Automaton states; the children of state v are `first_child[v]..+kids[v]`, sorted by byte.
    first_child: Vec<u32>,
    kids: Vec<u16>,
    byte: Vec<u8>,
    fail: Vec<u32>,
    /// Nearest segment on the failure chain of each state (itself included).
    out: Vec<u32>,
    root_next: Box<[u32; 256]>,
    // Segments.
    seg_len: Vec<u32>,
    /// Next segment on the dictionary chain: the longest proper suffix that is a segment.
    seg_parent: Vec<u32>,
    /// Heavy-path head and position of each segment; `pos_seg` inverts `seg_pos`.
    seg_head: Vec<u32>,
    seg_pos: Vec<u32>,
    pos_seg: Vec<u32>,
    // The rule trie.
    nodes: Vec<Node>,
    ends: Vec<Ends>,
    anchored: Vec<AnchoredEnd>,
    /// Per segment, the first-level nodes waiting on it before the path is read:
    /// `static_waiters[static_start[s]..static_start[s + 1]]`, by earliest end.
    static_start: Vec<u32>,
    static_waiters: Vec<(u32, u32)>,
    /// Bitset (by heavy-path position) of segments with static waiters.
    static_marks: Vec<u64>,
    static_count: u32,
}

/// A trie under construction.
#[derive(Default)]
struct Trie {
    first_child: Vec<u32>,
    kids: Vec<u16>,
    byte: Vec<u8>,
    parent: Vec<u32>,
    depth: Vec<u32>,
}

impl Trie {
    fn add(&mut self, parent: u32, byte: u8, depth: u32) {
        self.first_child.push(0);
        self.kids.push(0);
        self.byte.push(byte);
        self.parent.push(parent);
        self.depth.push(depth);
    }
}

impl Automaton {
    fn build(set: &WildSet, arena: &[u8]) -> Automaton {
        let (mut auto, seg_of_mid) = Self::build_automaton(&set.mids, arena);
        auto.build_rule_trie(set, arena, &seg_of_mid);
        auto
    }

    /// The Aho–Corasick automaton over the distinct byte strings of `mids`; returns it
    /// and the segment id of every mid.
    fn build_automaton(mids: &[Span], arena: &[u8]) -> (Automaton, Vec<u32>) {
        // Sorted once, the mids under a state are a contiguous run: a run whose first and
        // last items share the next bytes becomes a chain of single-child states at once;
        // otherwise it splits by its next byte into the state's children.
        let items: Vec<&[u8]> = mids.iter().map(|s| s.get(arena)).collect();
        // The distinct mids in byte order, and which one each mid is.
        let order = sorted_by_bytes(&items);
        let mut distinct: Vec<&[u8]> = Vec::new();
        let mut distinct_of_mid = vec![0u32; items.len()];
        for &i in &order {
            let it = items[i as usize];
            if distinct.last() != Some(&it) {
                distinct.push(it);
            }
            distinct_of_mid[i as usize] = distinct.len() as u32 - 1;
        }
        let mut t = Trie::default();
        t.add(NONE, 0, 0);
        let mut state_of_distinct = vec![0u32; distinct.len()];
        let mut stack: Vec<(u32, usize, usize, usize)> = vec![(0, 0, distinct.len(), 0)];
        while let Some((mut v, mut s, e, mut depth)) = stack.pop() {
            loop {
                if s < e && distinct[s].len() == depth {
                    state_of_distinct[s] = v;
                    s += 1;
                }
                if s == e {
                    break;
                }
                let (lo, hi) = (distinct[s], distinct[e - 1]);
                if lo[depth] == hi[depth] {
                    // All share lo[depth..depth + l]; none ends inside (lo is shortest).
                    let l = lo[depth..].iter().zip(&hi[depth..]).take_while(|(a, b)| a == b).count();
                    for &b in &lo[depth..depth + l] {
                        let child = t.byte.len() as u32;
                        t.first_child[v as usize] = child;
                        t.kids[v as usize] = 1;
                        t.add(v, b, t.depth[v as usize] + 1);
                        v = child;
                    }
                    depth += l;
                    continue;
                }
                let first = t.byte.len() as u32;
                let mut k = s;
                let mut n_kids = 0u16;
                while k < e {
                    let b = distinct[k][depth];
                    let run = k + distinct[k..e].partition_point(|d| d[depth] <= b);
                    let child = t.byte.len() as u32;
                    t.add(v, b, depth as u32 + 1);
                    stack.push((child, k, run, depth + 1));
                    n_kids += 1;
                    k = run;
                }
                t.first_child[v as usize] = first;
                t.kids[v as usize] = n_kids;
                break;
            }
        }
        let Trie { first_child, kids, byte, parent, depth } = t;
        let n = byte.len();
        // Segment ids are the distinct mids' indices.
        let mut state_seg = vec![NONE; n];
        for (d, &v) in state_of_distinct.iter().enumerate() {
            state_seg[v as usize] = d as u32;
        }
        let seg_state = state_of_distinct;
        let seg_of_mid = distinct_of_mid;
        let seg_len: Vec<u32> = seg_state.iter().map(|&v| depth[v as usize]).collect();
        // Breadth-first order (by depth) for the failure links.
        let max_depth = depth.iter().copied().max().unwrap_or(0) as usize;
        let mut at = vec![0u32; max_depth + 2];
        for &d in &depth {
            at[d as usize + 1] += 1;
        }
        for d in 0..=max_depth {
            at[d + 1] += at[d];
        }
        let mut bfs = vec![0u32; n];
        for (v, &d) in depth.iter().enumerate() {
            bfs[at[d as usize] as usize] = v as u32;
            at[d as usize] += 1;
        }
        drop(depth);

        let mut root_next = Box::new([0u32; 256]);
        for c in first_child[0]..first_child[0] + kids[0] as u32 {
            root_next[byte[c as usize] as usize] = c;
        }
        let child = |v: u32, c: u8| -> Option<u32> {
            let lo = first_child[v as usize] as usize;
            let hi = lo + kids[v as usize] as usize;
            byte[lo..hi].binary_search(&c).ok().map(|i| (lo + i) as u32)
        };
        let mut fail = vec![0u32; n];
        for &v in &bfs[1..] {
            let v = v as usize;
            let p = parent[v];
            if p == 0 {
                continue;
            }
            let c = byte[v];
            let mut f = fail[p as usize];
            fail[v] = loop {
                if let Some(ch) = child(f, c) {
                    break ch;
                }
                if f == 0 {
                    break 0;
                }
                f = fail[f as usize];
            };
        }
        drop(parent);
        let mut out = vec![NONE; n];
        for &v in &bfs[1..] {
            let v = v as usize;
            out[v] = if state_seg[v] != NONE { state_seg[v] } else { out[fail[v] as usize] };
        }
        let seg_parent: Vec<u32> = seg_state.iter().map(|&v| out[fail[v as usize] as usize]).collect();
        let (seg_head, seg_pos, pos_seg) = heavy_light(&seg_parent);
        let auto = Automaton {
            first_child,
            kids,
            byte,
            fail,
            out,
            root_next,
            seg_len,
            seg_parent,
            seg_head,
            seg_pos,
            pos_seg,
            nodes: Vec::new(),
            ends: Vec::new(),
            anchored: Vec::new(),
            static_start: Vec::new(),
            static_waiters: Vec::new(),
            static_marks: Vec::new(),
            static_count: 0,
        };
        (auto, seg_of_mid)
    }

    /// Merges the rules into a trie keyed by `first` and their mid segments, and files
    /// the first-level nodes under the segment they wait for.
    fn build_rule_trie(&mut self, set: &WildSet, arena: &[u8], seg_of_mid: &[u32]) {
        let segs = |r: &WildRule| &seg_of_mid[r.mids_at as usize..(r.mids_at + r.mids_len) as usize];
        // Sort by (first, mids): number the distinct firsts, then compare numbers.
        let firsts: Vec<&[u8]> = set.rules.iter().map(|r| r.first.get(arena)).collect();
        let mut first_id = vec![0u32; firsts.len()];
        if firsts.iter().any(|f| *f != firsts[0]) {
            let by_first = sorted_by_bytes(&firsts);
            let mut id = 0u32;
            for (k, &i) in by_first.iter().enumerate() {
                if k > 0 && firsts[i as usize] != firsts[by_first[k - 1] as usize] {
                    id += 1;
                }
                first_id[i as usize] = id;
            }
        }
        let mut order: Vec<(u64, u32)> = set
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| (((first_id[i] as u64) << 32) | segs(r)[0] as u64, i as u32))
            .collect();
        order.sort_unstable_by_key(|e| e.0);
        // Equal keys share first and first mid: order by the remaining mids.
        let mut k = 0;
        while k < order.len() {
            let mut e = k + 1;
            while e < order.len() && order[e].0 == order[k].0 {
                e += 1;
            }
            if e - k > 1 {
                order[k..e].sort_unstable_by(|a, b| {
                    segs(&set.rules[a.1 as usize]).cmp(segs(&set.rules[b.1 as usize]))
                });
            }
            k = e;
        }
        let order: Vec<u32> = order.into_iter().map(|(_, i)| i).collect();
        let mut path: Vec<u32> = Vec::new(); // nodes from the first level down
        let mut roots = NONE;
        let mut prev: Option<u32> = None;
        for &i in &order {
            let r = &set.rules[i as usize];
            let key = segs(r);
            let common = match prev {
                Some(p) if first_id[p as usize] == first_id[i as usize] => {
                    segs(&set.rules[p as usize]).iter().zip(key).take_while(|(a, b)| a == b).count()
                }
                _ => 0,
            };
            path.truncate(common);
            for (d, &seg) in key.iter().enumerate().skip(common) {
                let id = self.nodes.len() as u32;
                let first = if d == 0 { r.first } else { Span::default() };
                let sibling = match path.last() {
                    Some(&p) => std::mem::replace(&mut self.nodes[p as usize].child, id),
                    None => std::mem::replace(&mut roots, id),
                };
                self.nodes.push(Node { seg, first, child: NONE, sibling, end: NONE, reach: Best::default() });
                path.push(id);
            }
            let Some(&at) = path.last() else { continue };
            let node = &mut self.nodes[at as usize];
            if node.end == NONE {
                node.end = self.ends.len() as u32;
                let anchored_at = self.anchored.len() as u32;
                self.ends.push(Ends { unanchored: Best::default(), anchored_at, anchored_len: 0 });
            }
            let ends = &mut self.ends[node.end as usize];
            match r.last {
                None => ends.unanchored.offer_key(r.kind, r.key),
                Some(last) => {
                    // Rules with the same key are adjacent: the anchored range stays contiguous.
                    self.anchored.push(AnchoredEnd { last, kind: r.kind, key: r.key });
                    ends.anchored_len += 1;
                }
            }
            node.reach.offer_key(r.kind, r.key);
            prev = Some(i);
        }
        // Children come after their parent: fold reach bottom-up.
        for v in (0..self.nodes.len()).rev() {
            let (reach, mut c) = (self.nodes[v].reach, self.nodes[v].child);
            let mut acc = reach;
            while c != NONE {
                acc.merge(&self.nodes[c as usize].reach);
                c = self.nodes[c as usize].sibling;
            }
            self.nodes[v].reach = acc;
        }
        // First-level nodes wait before the path is read.
        let m = self.seg_len.len();
        let mut firsts: Vec<(u32, u32, u32)> = Vec::new();
        let mut v = roots;
        while v != NONE {
            let n = &self.nodes[v as usize];
            firsts.push((n.seg, n.first.len + self.seg_len[n.seg as usize], v));
            v = n.sibling;
        }
        firsts.sort_unstable();
        self.static_start = vec![0u32; m + 1];
        for &(s, _, _) in &firsts {
            self.static_start[s as usize + 1] += 1;
        }
        for s in 0..m {
            self.static_start[s + 1] += self.static_start[s];
        }
        self.static_waiters = firsts.iter().map(|&(_, end, v)| (v, end)).collect();
        self.static_marks = vec![0u64; m.div_ceil(64)];
        for s in 0..m {
            if self.static_start[s + 1] > self.static_start[s] {
                let p = self.seg_pos[s] as usize;
                self.static_marks[p / 64] |= 1 << (p % 64);
                self.static_count += 1;
            }
        }
    }

    #[inline]
    fn goto(&self, mut v: u32, c: u8) -> u32 {
        loop {
            if v == 0 {
                return self.root_next[c as usize];
            }
            let lo = self.first_child[v as usize] as usize;
            let kids = &self.byte[lo..lo + self.kids[v as usize] as usize];
            let found =
                if kids.len() <= 8 { kids.iter().position(|&b| b == c) } else { kids.binary_search(&c).ok() };
            if let Some(i) = found {
                return (lo + i) as u32;
            }
            v = self.fail[v as usize];
        }
    }

    fn eval(&self, arena: &[u8], path: &[u8], best: &mut Best) {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut sc) => self.run(arena, path, best, &mut sc),
            Err(_) => self.run(arena, path, best, &mut Scratch::default()),
        });
    }

    fn run(&self, arena: &[u8], path: &[u8], best: &mut Best, sc: &mut Scratch) {
        sc.begin(self.seg_len.len(), &self.static_marks);
        let mut run = Run { auto: self, arena, path, sc, best, active: self.static_count as usize };
        let mut state = 0u32;
        for (x, &c) in path.iter().enumerate() {
            if run.active == 0 {
                break;
            }
            state = self.goto(state, c);
            let mut s = self.out[state as usize];
            while s != NONE {
                let h = self.seg_head[s as usize];
                run.visit(self.seg_pos[h as usize] as usize, self.seg_pos[s as usize] as usize, x + 1);
                s = self.seg_parent[h as usize];
            }
        }
    }

    fn heap_bytes(&self) -> usize {
        self.byte.capacity() * (1 + 2 + 4 + 4 + 4)
            + 256 * 4
            + self.seg_len.capacity() * 4 * 5
            + self.nodes.capacity() * std::mem::size_of::<Node>()
            + self.ends.capacity() * std::mem::size_of::<Ends>()
            + self.anchored.capacity() * std::mem::size_of::<AnchoredEnd>()
            + self.static_start.capacity() * 4
            + self.static_waiters.capacity() * 8
            + self.static_marks.capacity() * 8
    }
}

#[derive(Debug, Clone, Copy)]
struct Waiter {
    node: u32,
    earliest_end: u32,
    next: u32,
}

/// Per-thread working memory of the automaton engine, reused across checks. Per-segment
/// state is valid only when its stamp equals the current generation, so nothing is
/// cleared between checks.
#[derive(Debug, Default)]
struct Scratch {
    generation: u32,
    stamp: Vec<u32>,
    static_ptr: Vec<u32>,
    head: Vec<u32>,
    tail: Vec<u32>,
    marks: Vec<u64>,
    pool: Vec<Waiter>,
}

thread_local! {
    static SCRATCH: RefCell<Scratch> = RefCell::new(Scratch::default());
}

impl Scratch {
    fn begin(&mut self, segs: usize, marks: &[u64]) {
        self.generation = self.generation.wrapping_add(1);
        if self.generation == 0 {
            self.stamp.fill(0);
            self.generation = 1;
        }
        if self.stamp.len() < segs {
            self.stamp.resize(segs, 0);
            self.static_ptr.resize(segs, 0);
            self.head.resize(segs, NONE);
            self.tail.resize(segs, NONE);
        }
        self.marks.clear();
        self.marks.extend_from_slice(marks);
        self.pool.clear();
    }

    #[inline]
    fn touch(&mut self, s: usize) {
        if self.stamp[s] != self.generation {
            self.stamp[s] = self.generation;
            self.static_ptr[s] = 0;
            self.head[s] = NONE;
            self.tail[s] = NONE;
        }
    }
}

struct Run<'a> {
    auto: &'a Automaton,
    arena: &'a [u8],
    path: &'a [u8],
    sc: &'a mut Scratch,
    best: &'a mut Best,
    /// Segments with a non-empty queue.
    active: usize,
}

impl Run<'_> {
    /// Releases the waiters of every marked segment with heavy-path position in
    /// `lo..=hi` that can end at `end`.
    #[inline]
    fn visit(&mut self, lo: usize, hi: usize, end: usize) {
        let last = hi / 64;
        let mut w = lo / 64;
        while w <= last {
            let mut bits = self.sc.marks[w];
            if w == lo / 64 {
                bits &= !0u64 << (lo % 64);
            }
            if w == last {
                bits &= !0u64 >> (63 - hi % 64);
            }
            while bits != 0 {
                let b = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                let seg = self.auto.pos_seg[w * 64 + b];
                self.release(seg as usize, end);
            }
            w += 1;
        }
    }

    fn release(&mut self, s: usize, end: usize) {
        let auto = self.auto;
        self.sc.touch(s);
        let lo = auto.static_start[s] as usize;
        let hi = auto.static_start[s + 1] as usize;
        loop {
            let i = lo + self.sc.static_ptr[s] as usize;
            if i >= hi || auto.static_waiters[i].1 as usize > end {
                break;
            }
            self.sc.static_ptr[s] += 1;
            self.reached(auto.static_waiters[i].0, end);
        }
        loop {
            let h = self.sc.head[s];
            if h == NONE || self.sc.pool[h as usize].earliest_end as usize > end {
                break;
            }
            let w = self.sc.pool[h as usize];
            self.sc.head[s] = w.next;
            if w.next == NONE {
                self.sc.tail[s] = NONE;
            }
            self.reached(w.node, end);
        }
        let static_left = lo + (self.sc.static_ptr[s] as usize) < hi;
        if !static_left && self.sc.head[s] == NONE {
            let p = auto.seg_pos[s] as usize;
            if self.sc.marks[p / 64] & (1 << (p % 64)) != 0 {
                self.sc.marks[p / 64] &= !(1 << (p % 64));
                self.active -= 1;
            }
        }
    }

    /// Node `v` found its mid ending at `end`.
    fn reached(&mut self, v: u32, end: usize) {
        let auto = self.auto;
        let node = &auto.nodes[v as usize];
        if !self.best.improvable_by(&node.reach) || !self.path.starts_with(node.first.get(self.arena)) {
            return;
        }
        if node.end != NONE {
            let ends = &auto.ends[node.end as usize];
            self.best.merge(&ends.unanchored);
            let at = ends.anchored_at as usize;
            for a in &auto.anchored[at..at + ends.anchored_len as usize] {
                if tail_ok(self.arena, Some(a.last), self.path, end) {
                    self.best.offer_key(a.kind, a.key);
                }
            }
        }
        let mut c = node.child;
        while c != NONE {
            let child = &auto.nodes[c as usize];
            if self.best.improvable_by(&child.reach) {
                self.wait(c, child.seg as usize, end + auto.seg_len[child.seg as usize] as usize);
            }
            c = child.sibling;
        }
    }

    fn wait(&mut self, node: u32, s: usize, earliest_end: usize) {
        self.sc.touch(s);
        let idx = self.sc.pool.len() as u32;
        self.sc.pool.push(Waiter { node, earliest_end: earliest_end as u32, next: NONE });
        match self.sc.tail[s] {
            NONE => self.sc.head[s] = idx,
            t => self.sc.pool[t as usize].next = idx,
        }
        self.sc.tail[s] = idx;
        let p = self.auto.seg_pos[s] as usize;
        if self.sc.marks[p / 64] & (1 << (p % 64)) == 0 {
            self.sc.marks[p / 64] |= 1 << (p % 64);
            self.active += 1;
        }
    }
}

/// Decomposes the dictionary forest (`parent[s] < s` is not required; parents are
/// shorter segments) into heavy paths. Returns head, position, and position → segment.
fn heavy_light(parent: &[u32]) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let m = parent.len();
    // Children lists (CSR).
    let mut start = vec![0u32; m + 1];
    for &p in parent {
        if p != NONE {
            start[p as usize + 1] += 1;
        }
    }
    for s in 0..m {
        start[s + 1] += start[s];
    }
    let mut fill = start.clone();
    let mut kids = vec![0u32; start[m] as usize];
    for (s, &p) in parent.iter().enumerate() {
        if p != NONE {
            kids[fill[p as usize] as usize] = s as u32;
            fill[p as usize] += 1;
        }
    }
    // Subtree sizes: iterative post-order from the roots.
    let mut size = vec![1u32; m];
    let mut order = Vec::with_capacity(m);
    let mut stack: Vec<u32> = (0..m as u32).filter(|&s| parent[s as usize] == NONE).collect();
    while let Some(s) = stack.pop() {
        order.push(s);
        stack.extend_from_slice(&kids[start[s as usize] as usize..start[s as usize + 1] as usize]);
    }
    for &s in order.iter().rev() {
        let p = parent[s as usize];
        if p != NONE {
            size[p as usize] += size[s as usize];
        }
    }
    let heavy: Vec<u32> = (0..m)
        .map(|s| {
            kids[start[s] as usize..start[s + 1] as usize]
                .iter()
                .copied()
                .max_by_key(|&k| size[k as usize])
                .unwrap_or(NONE)
        })
        .collect();
    let mut head = vec![0u32; m];
    let mut pos = vec![0u32; m];
    let mut pos_seg = vec![0u32; m];
    let mut next = 0u32;
    let mut stack: Vec<u32> = (0..m as u32).filter(|&s| parent[s as usize] == NONE).collect();
    while let Some(h) = stack.pop() {
        let mut s = h;
        loop {
            head[s as usize] = h;
            pos[s as usize] = next;
            pos_seg[next as usize] = s;
            next += 1;
            let hv = heavy[s as usize];
            for &k in &kids[start[s as usize] as usize..start[s as usize + 1] as usize] {
                if k != hv {
                    stack.push(k);
                }
            }
            if hv == NONE {
                break;
            }
            s = hv;
        }
    }
    (head, pos, pos_seg)
}
