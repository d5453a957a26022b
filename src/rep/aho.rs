//! Rules with wildcards in the middle: `first*mid*...*mid` with an optional anchored
//! `last` (see [`super::matcher`] for the other shapes).
//!
//! A `*`-only glob that must match from the start of the path is decided greedily: take
//! the leftmost occurrence of each `mid` after the previous one; if any choice works, this
//! one does. Two engines run that greedy search:
//!
//! - **Per rule** (few rules): `memchr`/`memmem` for each segment, O(path + pattern) per
//!   rule.
//! - **Automaton** (many rules): every rule waits in a queue on the segment it needs next.
//!   One pass of an Aho–Corasick automaton over the distinct `mid` segments reports, at
//!   each path position, the segments that end there; a segment with waiters whose
//!   earliest possible end has passed releases them to their next segment. Segments that
//!   end at one position form a chain of suffixes (the automaton's dictionary links). To
//!   visit only those with waiters, the chains are cut into heavy paths (heavy-light
//!   decomposition) laid out contiguously, so a chain is a few ranges of a bitset of
//!   non-empty queues. Cost per check: O(path × (log segments + chain length / 64) +
//!   rules released), independent of how many rules are waiting.

use std::cell::RefCell;

use memchr::memmem;

use super::RuleKind;
use super::matcher::{Best, Hit};
use super::pattern::Span;

/// Groups with at least this many wildcard rules use the automaton.
pub(crate) const DEFAULT_AUTOMATON_MIN_RULES: usize = 24;

const NONE: u32 = u32::MAX;

/// One rule as handed over by the matcher: `first`, the `mid`s, the anchored `last`
/// (spans into the arena).
pub(crate) type WildItem = (Span, Vec<Span>, Option<Span>, RuleKind, Hit);

#[derive(Debug, Clone, Copy)]
struct WildRule {
    first: Span,
    /// Anchored final segment (len 0 and start NONE: none).
    last: Span,
    has_last: bool,
    /// Range in `mid_spans` (per-rule engine) or `Automaton::mid_segs`.
    mids_at: u32,
    mids_len: u32,
    kind: RuleKind,
    hit: Hit,
}

/// The wildcard rules of one group (spans into an arena kept by the caller).
#[derive(Debug, Default)]
pub(crate) struct WildSet {
    rules: Vec<WildRule>,
    mid_spans: Vec<Span>,
    auto: Option<Box<Automaton>>,
}

impl WildSet {
    pub fn build(arena: &[u8], items: Vec<WildItem>, automaton_min_rules: usize) -> WildSet {
        let mut set = WildSet::default();
        for (first, mids, last, kind, hit) in items {
            let mids_at = set.mid_spans.len() as u32;
            let mids_len = mids.len() as u32;
            set.mid_spans.extend(mids);
            set.rules.push(WildRule {
                first,
                last: last.unwrap_or_default(),
                has_last: last.is_some(),
                mids_at,
                mids_len,
                kind,
                hit,
            });
        }
        if !set.rules.is_empty() && set.rules.len() >= automaton_min_rules {
            set.auto = Some(Box::new(Automaton::build(&set, arena)));
        }
        set
    }

    pub fn eval(&self, arena: &[u8], path: &[u8], best: &mut Best) {
        if self.rules.is_empty() {
            return;
        }
        match &self.auto {
            Some(auto) => auto.eval(self, arena, path, best),
            None => {
                for r in &self.rules {
                    if self.greedy(arena, r, path) {
                        best.offer(r.kind, r.hit);
                    }
                }
            }
        }
    }

    /// Whether rule `r` ends where it must, given that its mids matched up to `pos`.
    #[inline]
    fn tail_ok(arena: &[u8], r: &WildRule, path: &[u8], pos: usize) -> bool {
        if !r.has_last {
            return true;
        }
        let last = r.last.get(arena);
        path.len() >= pos + last.len() && path.ends_with(last)
    }

    fn greedy(&self, arena: &[u8], r: &WildRule, path: &[u8]) -> bool {
        let first = r.first.get(arena);
        if !path.starts_with(first) {
            return false;
        }
        let mut pos = first.len();
        let mids = &self.mid_spans[r.mids_at as usize..(r.mids_at + r.mids_len) as usize];
        for m in mids {
            let m = m.get(arena);
            let hay = &path[pos..];
            let found = if m.len() == 1 { memchr::memchr(m[0], hay) } else { memmem::find(hay, m) };
            match found {
                Some(i) => pos += i + m.len(),
                None => return false,
            }
        }
        Self::tail_ok(arena, r, path, pos)
    }

    pub fn heap_bytes(&self) -> usize {
        self.rules.capacity() * std::mem::size_of::<WildRule>()
            + self.mid_spans.capacity() * 8
            + self.auto.as_ref().map_or(0, |a| a.heap_bytes())
    }
}

/// Aho–Corasick automaton over the distinct `mid` segments, with the waiting lists each
/// check starts from.
#[derive(Debug)]
struct Automaton {
    // Trie nodes; the children of node v are the nodes
    // `first_child[v]..first_child[v] + kids[v]`, sorted by byte.
    first_child: Vec<u32>,
    kids: Vec<u16>,
    byte: Vec<u8>,
    fail: Vec<u32>,
    /// Nearest segment on the failure chain of each node (itself included).
    out: Vec<u32>,
    root_next: Box<[u32; 256]>,
    // Segments (ids in breadth-first order of their nodes).
    seg_len: Vec<u32>,
    /// Next segment on the dictionary chain: the longest proper suffix that is a segment.
    seg_parent: Vec<u32>,
    /// Heavy-path head and position of each segment; `pos_seg` inverts `seg_pos`.
    seg_head: Vec<u32>,
    seg_pos: Vec<u32>,
    pos_seg: Vec<u32>,
    /// Per rule, its mids as segment ids (range given by the rule).
    mid_segs: Vec<u32>,
    /// Per segment, the rules waiting on it as their first mid:
    /// `static_waiters[static_start[s]..static_start[s + 1]]`, by earliest end.
    static_start: Vec<u32>,
    static_waiters: Vec<(u32, u32)>,
    /// Bitset (by heavy-path position) of segments with static waiters.
    static_marks: Vec<u64>,
    static_count: u32,
}

impl Automaton {
    fn build(set: &WildSet, arena: &[u8]) -> Automaton {
        // Every (rule, mid) occurrence; identical segments share a trie node. Sorted once,
        // the items under a node are a contiguous run: a run whose first and last items
        // share the next bytes becomes a chain of single-child nodes at once; otherwise
        // it splits by its next byte into the node's children.
        let items: Vec<&[u8]> = set.mid_spans.iter().map(|s| s.get(arena)).collect();
        let mut order: Vec<u32> = (0..items.len() as u32).collect();
        order.sort_unstable_by(|&a, &b| items[a as usize].cmp(items[b as usize]));
        let item = |k: usize| items[order[k] as usize];
        let mut t = Trie::default();
        t.add(NONE, 0, 0);
        let mut node_of_item = vec![0u32; items.len()];
        let mut stack: Vec<(u32, usize, usize, usize)> = vec![(0, 0, order.len(), 0)];
        while let Some((mut node, mut s, e, mut depth)) = stack.pop() {
            loop {
                while s < e && item(s).len() == depth {
                    node_of_item[order[s] as usize] = node;
                    s += 1;
                }
                if s == e {
                    break;
                }
                let (lo, hi) = (item(s), item(e - 1));
                if lo[depth] == hi[depth] {
                    // All share lo[depth..depth + l]; none ends inside (lo is shortest).
                    let l = lo[depth..].iter().zip(&hi[depth..]).take_while(|(a, b)| a == b).count();
                    for &b in &lo[depth..depth + l] {
                        let child = t.byte.len() as u32;
                        t.first_child[node as usize] = child;
                        t.kids[node as usize] = 1;
                        t.add(node, b, t.depth[node as usize] + 1);
                        node = child;
                    }
                    depth += l;
                    continue;
                }
                let first = t.byte.len() as u32;
                let mut k = s;
                let mut n_kids = 0u16;
                while k < e {
                    let b = item(k)[depth];
                    let run = k + order[k..e].partition_point(|&i| items[i as usize][depth] <= b);
                    let child = t.byte.len() as u32;
                    t.add(node, b, depth as u32 + 1);
                    stack.push((child, k, run, depth + 1));
                    n_kids += 1;
                    k = run;
                }
                t.first_child[node as usize] = first;
                t.kids[node as usize] = n_kids;
                break;
            }
        }
        let Trie { first_child, kids, byte, parent, depth } = t;
        let n = byte.len();
        let mut node_seg = vec![NONE; n];
        let mut seg_node: Vec<u32> = Vec::new();
        for &v in &node_of_item {
            if node_seg[v as usize] == NONE {
                node_seg[v as usize] = seg_node.len() as u32;
                seg_node.push(v);
            }
        }
        let seg_len: Vec<u32> = seg_node.iter().map(|&v| depth[v as usize]).collect();
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
            out[v] = if node_seg[v] != NONE { node_seg[v] } else { out[fail[v] as usize] };
        }
        let m = seg_node.len();
        let seg_parent: Vec<u32> = seg_node.iter().map(|&v| out[fail[v as usize] as usize]).collect();
        let (seg_head, seg_pos, pos_seg) = heavy_light(&seg_parent);

        let mid_segs: Vec<u32> = node_of_item.iter().map(|&v| node_seg[v as usize]).collect();
        let mut lists: Vec<(u32, u32, u32)> = set
            .rules
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let s0 = mid_segs[r.mids_at as usize];
                (s0, r.first.len + seg_len[s0 as usize], i as u32)
            })
            .collect();
        lists.sort_unstable();
        let mut static_start = vec![0u32; m + 1];
        for &(s, _, _) in &lists {
            static_start[s as usize + 1] += 1;
        }
        for s in 0..m {
            static_start[s + 1] += static_start[s];
        }
        let static_waiters: Vec<(u32, u32)> = lists.iter().map(|&(_, end, rule)| (rule, end)).collect();
        let mut static_marks = vec![0u64; m.div_ceil(64)];
        let mut static_count = 0;
        for s in 0..m {
            if static_start[s + 1] > static_start[s] {
                let p = seg_pos[s] as usize;
                static_marks[p / 64] |= 1 << (p % 64);
                static_count += 1;
            }
        }
        Automaton {
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
            mid_segs,
            static_start,
            static_waiters,
            static_marks,
            static_count,
        }
    }

    #[inline]
    fn goto(&self, mut v: u32, c: u8) -> u32 {
        loop {
            if v == 0 {
                return self.root_next[c as usize];
            }
            let lo = self.first_child[v as usize] as usize;
            let hi = lo + self.kids[v as usize] as usize;
            let kids = &self.byte[lo..hi];
            let found =
                if kids.len() <= 8 { kids.iter().position(|&b| b == c) } else { kids.binary_search(&c).ok() };
            if let Some(i) = found {
                return (lo + i) as u32;
            }
            v = self.fail[v as usize];
        }
    }

    fn eval(&self, set: &WildSet, arena: &[u8], path: &[u8], best: &mut Best) {
        SCRATCH.with(|cell| match cell.try_borrow_mut() {
            Ok(mut sc) => self.run(set, arena, path, best, &mut sc),
            Err(_) => self.run(set, arena, path, best, &mut Scratch::default()),
        });
    }

    fn run(&self, set: &WildSet, arena: &[u8], path: &[u8], best: &mut Best, sc: &mut Scratch) {
        sc.begin(self.seg_len.len(), &self.static_marks);
        let mut run = Run { auto: self, set, arena, path, sc, best, active: self.static_count as usize };
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
        let n = self.byte.capacity();
        n * (1 + 2 + 4 + 4 + 4)
            + 256 * 4
            + self.seg_len.capacity() * 4 * 5
            + self.mid_segs.capacity() * 4
            + self.static_start.capacity() * 4
            + self.static_waiters.capacity() * 8
            + self.static_marks.capacity() * 8
    }
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

#[derive(Debug, Clone, Copy)]
struct Waiter {
    rule: u32,
    /// Index of the mid this waiter needs.
    k: u32,
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
    set: &'a WildSet,
    arena: &'a [u8],
    path: &'a [u8],
    sc: &'a mut Scratch,
    best: &'a mut Best,
    /// Segments with a non-empty queue.
    active: usize,
}

impl Run<'_> {
    /// Releases waiters of every marked segment with heavy-path position in `lo..=hi`
    /// that can end at `end`.
    #[inline]
    fn visit(&mut self, lo: usize, hi: usize, end: usize) {
        let mut w = lo / 64;
        let last = hi / 64;
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
            let rule = auto.static_waiters[i].0;
            let first = self.set.rules[rule as usize].first.get(self.arena);
            if self.path.starts_with(first) {
                self.advance(rule, 0, end);
            }
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
            self.advance(w.rule, w.k, end);
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

    /// Rule `rule` found its mid `k` ending at `end`.
    fn advance(&mut self, rule: u32, k: u32, end: usize) {
        let r = &self.set.rules[rule as usize];
        let next = k + 1;
        if next < r.mids_len {
            let s = self.auto.mid_segs[(r.mids_at + next) as usize] as usize;
            self.sc.touch(s);
            let idx = self.sc.pool.len() as u32;
            self.sc.pool.push(Waiter {
                rule,
                k: next,
                earliest_end: (end + self.auto.seg_len[s] as usize) as u32,
                next: NONE,
            });
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
        } else if WildSet::tail_ok(self.arena, r, self.path, end) {
            self.best.offer(r.kind, r.hit);
        }
    }
}
