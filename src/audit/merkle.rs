//! The audit log's Merkle tree (RFC 6962 / RFC 9162 §2.1): every line of the log is a
//! leaf, hashed as `SHA-256(0x00 || line)` (the line's exact bytes, without its newline),
//! and a node as `SHA-256(0x01 || left || right)`. The tree of `n` leaves is RFC 9162's
//! MTH: its left subtree holds the largest power of two below `n` leaves.
//!
//! [`Frontier`] builds a tree leaf by leaf in O(log n) memory (the roots of the perfect
//! subtrees that make up `[0, n)`); [`inclusion_ranges`] and [`verify_inclusion`] make and
//! check inclusion proofs. Everything here is pure: no I/O.

use ring::digest::{Context, SHA256, digest};

/// A SHA-256 hash.
pub type Hash = [u8; 32];

/// The hash of a leaf: `SHA-256(0x00 || data)`.
pub fn leaf_hash(data: &[u8]) -> Hash {
    let mut h = LeafHasher::new();
    h.update(data);
    h.finish()
}

/// A leaf hash computed piece by piece (a line read in parts). SHA-256 is ring's: its
/// assembly uses the CPU's SHA extensions or SIMD, and costs the audit thread about half
/// the instructions of a portable implementation where those are not available.
#[derive(Clone)]
pub struct LeafHasher(Context);

impl LeafHasher {
    /// A leaf with no data yet.
    pub fn new() -> LeafHasher {
        let mut h = Context::new(&SHA256);
        h.update(&[0u8]);
        LeafHasher(h)
    }

    /// Adds `data` to the leaf.
    pub fn update(&mut self, data: &[u8]) {
        self.0.update(data);
    }

    /// The leaf's hash; the hasher starts a new leaf.
    pub fn finish(&mut self) -> Hash {
        let h = std::mem::take(self);
        to_hash(h.0.finish().as_ref())
    }
}

/// A SHA-256 digest as a [`Hash`].
fn to_hash(d: &[u8]) -> Hash {
    let mut h = [0u8; 32];
    h.copy_from_slice(d);
    h
}

impl Default for LeafHasher {
    fn default() -> Self {
        LeafHasher::new()
    }
}

/// The hash of an interior node: `SHA-256(0x01 || left || right)`.
pub fn node_hash(left: &Hash, right: &Hash) -> Hash {
    let mut block = [0u8; 65];
    block[0] = 1;
    block[1..33].copy_from_slice(left);
    block[33..].copy_from_slice(right);
    to_hash(digest(&SHA256, &block).as_ref())
}

/// The root of the empty tree: `SHA-256("")`.
pub fn empty_root() -> Hash {
    to_hash(digest(&SHA256, &[]).as_ref())
}

/// The largest tree a frontier is taken at from a file ([`Frontier::from_hashes`]: a
/// log file's `file-start` record, a checkpoint): 2^63 leaves. The leaves a file adds
/// (fewer than its bytes, and a file has fewer than 2^63) then cannot take the count
/// past `u64::MAX`. A file, edited, may claim any size; no log reaches this one.
pub const MAX_START: u64 = 1 << 63;

/// A tree being built leaf by leaf: the roots of the perfect subtrees that make up its
/// leaves `[start, start + size)`, largest (leftmost) first. Started at 0 it is the tree
/// itself; started at another aligned position it hashes one subtree (proofs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frontier {
    start: u64,
    size: u64,
    /// (height, hash): the subtree of `2^height` leaves.
    nodes: Vec<(u32, Hash)>,
}

impl Frontier {
    /// The empty tree.
    pub fn new() -> Frontier {
        Frontier::at(0)
    }

    /// An empty range starting at leaf `start`.
    fn at(start: u64) -> Frontier {
        Frontier { start, size: 0, nodes: Vec::new() }
    }

    /// The tree of `size` leaves whose perfect subtrees have these roots, largest first
    /// (as [`Frontier::hashes`] gives them); `None` when their number does not match
    /// `size` (one per bit set), or when `size` is above [`MAX_START`].
    pub fn from_hashes(size: u64, hashes: &[Hash]) -> Option<Frontier> {
        if size > MAX_START || hashes.len() != size.count_ones() as usize {
            return None;
        }
        let heights = (0..64u32).rev().filter(|h| size >> h & 1 == 1);
        let nodes = heights.zip(hashes.iter().copied()).collect();
        Some(Frontier { start: 0, size, nodes })
    }

    /// Leaves in the tree.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The roots of its perfect subtrees, largest first.
    pub fn hashes(&self) -> Vec<Hash> {
        self.nodes.iter().map(|&(_, h)| h).collect()
    }

    /// Adds a leaf by its hash.
    pub fn push(&mut self, leaf: Hash) {
        self.push_node(0, leaf);
    }

    /// Adds the root of a perfect subtree of `2^height` leaves; it must be aligned (the
    /// range's size a multiple of its size) and no larger than the last subtree.
    fn push_node(&mut self, height: u32, hash: Hash) {
        let mut node = (height, hash);
        while let Some(&(h, left)) = self.nodes.last() {
            if h != node.0 {
                break;
            }
            self.nodes.pop();
            node = (h + 1, node_hash(&left, &node.1));
        }
        self.nodes.push(node);
        self.size += 1u64 << height;
    }

    /// The root hash (RFC 9162's MTH) of the leaves so far.
    pub fn root(&self) -> Hash {
        let mut nodes = self.nodes.iter().rev();
        let Some(&(_, last)) = nodes.next() else { return empty_root() };
        nodes.fold(last, |right, (_, left)| node_hash(left, &right))
    }

    /// The perfect subtrees covering leaves `[from, self.size)`, when that range is made of
    /// whole ones (it is for the `from` of a proof: see [`proof_hashes`]).
    fn nodes_from(&self, from: u64) -> Option<Vec<(u32, Hash)>> {
        let mut at = self.start;
        let mut out = Vec::new();
        for &(h, hash) in &self.nodes {
            if at >= from {
                out.push((h, hash));
            } else if at + (1u64 << h) > from {
                return None;
            }
            at += 1u64 << h;
        }
        Some(out)
    }
}

impl Default for Frontier {
    fn default() -> Self {
        Frontier::new()
    }
}

/// The leaf ranges `[start, end)` whose subtree roots make the inclusion proof of leaf
/// `index` in the tree of `size` leaves (RFC 9162 §2.1.3.1 PATH), from the leaf up.
/// Empty when `index >= size`.
pub fn inclusion_ranges(index: u64, size: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    if index >= size {
        return out;
    }
    let (mut lo, mut hi, m) = (0u64, size, index);
    // Walk down from the root, noting the sibling at each level; reverse at the end.
    while hi - lo > 1 {
        let k = largest_power_of_two_below(hi - lo);
        if m < lo + k {
            out.push((lo + k, hi));
            hi = lo + k;
        } else {
            out.push((lo, lo + k));
            lo += k;
        }
    }
    out.reverse();
    out
}

/// The largest power of two strictly below `n` (`n >= 2`).
fn largest_power_of_two_below(n: u64) -> u64 {
    1u64 << (63 - (n - 1).leading_zeros())
}

/// Whether `proof` shows that the leaf with hash `leaf` is leaf `index` of the tree of
/// `size` leaves with root `root` (RFC 9162 §2.1.3.2).
pub fn verify_inclusion(leaf: &Hash, index: u64, size: u64, proof: &[Hash], root: &Hash) -> bool {
    if index >= size {
        return false;
    }
    let (mut fn_, mut sn) = (index, size - 1);
    let mut r = *leaf;
    for p in proof {
        if sn == 0 {
            return false;
        }
        if fn_ & 1 == 1 || fn_ == sn {
            r = node_hash(p, &r);
            if fn_ & 1 == 0 {
                while fn_ & 1 == 0 && fn_ != 0 {
                    fn_ >>= 1;
                    sn >>= 1;
                }
            }
        } else {
            r = node_hash(&r, p);
        }
        fn_ >>= 1;
        sn >>= 1;
    }
    sn == 0 && &r == root
}

/// Builds the hashes of an inclusion proof from leaves read in order: the ranges of
/// [`inclusion_ranges`], each hashed as its leaves go by. Leaves before `start` (an
/// earlier file) come from the tree's frontier at `start`.
pub struct ProofBuilder {
    ranges: Vec<(u64, u64)>,
    /// Per range, in proof order: its hash so far.
    parts: Vec<Frontier>,
}

impl ProofBuilder {
    /// The proof of leaf `index` in the tree of `size` leaves, whose leaves from `before`
    /// on will be given with [`ProofBuilder::leaf`], `before` being the tree of the
    /// leaves before them. `None` when the proof needs leaves inside a subtree of
    /// `before` (it never does for `index >= before.size()`).
    pub fn new(index: u64, size: u64, before: &Frontier) -> Option<ProofBuilder> {
        let ranges = inclusion_ranges(index, size);
        let mut parts = Vec::with_capacity(ranges.len());
        for &(a, b) in &ranges {
            let mut f = Frontier::at(a);
            if a < before.size() {
                if b <= before.size() {
                    // Inside the earlier leaves: a whole subtree of the frontier, or more.
                    let nodes = before.nodes_from(a)?;
                    let mut at = a;
                    for (h, hash) in nodes {
                        if at >= b {
                            break;
                        }
                        f.push_node(h, hash);
                        at += 1u64 << h;
                    }
                    if at != b {
                        return None;
                    }
                } else {
                    for (h, hash) in before.nodes_from(a)? {
                        f.push_node(h, hash);
                    }
                }
            }
            parts.push(f);
        }
        Some(ProofBuilder { ranges, parts })
    }

    /// Leaf number `index` (in order, from the `before` given to `new`).
    pub fn leaf(&mut self, index: u64, hash: &Hash) {
        for (i, &(a, b)) in self.ranges.iter().enumerate() {
            if a <= index && index < b {
                self.parts[i].push(*hash);
            }
        }
    }

    /// The proof, once every leaf below the tree size has been given; `None` if some
    /// were missing.
    pub fn finish(self) -> Option<Vec<Hash>> {
        self.ranges.iter().zip(&self.parts).map(|(&(a, b), f)| (f.size == b - a).then(|| f.root())).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 9162's MTH by its recursive definition, to check the frontier against.
    fn mth(leaves: &[Hash]) -> Hash {
        match leaves.len() {
            0 => empty_root(),
            1 => leaves[0],
            n => {
                let k = largest_power_of_two_below(n as u64) as usize;
                node_hash(&mth(&leaves[..k]), &mth(&leaves[k..]))
            }
        }
    }

    fn leaves(n: usize) -> Vec<Hash> {
        (0..n).map(|i| leaf_hash(format!("line {i}").as_bytes())).collect()
    }

    /// Known answers: the empty tree, and a leaf's hash (RFC 6962's domain separation).
    #[test]
    fn known_answers() {
        assert_eq!(
            hex::encode(empty_root()),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        // SHA-256 of the single byte 0x00: the leaf hash of empty data.
        assert_eq!(
            hex::encode(leaf_hash(b"")),
            "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"
        );
    }

    /// The frontier's root is MTH for every size, and it survives being written out as
    /// hashes and read back.
    #[test]
    fn frontier_root_is_mth() {
        let all = leaves(70);
        let mut f = Frontier::new();
        assert_eq!(f.root(), mth(&[]));
        for (i, l) in all.iter().enumerate() {
            f.push(*l);
            assert_eq!(f.size(), i as u64 + 1);
            assert_eq!(f.root(), mth(&all[..=i]), "size {}", i + 1);
            let back = Frontier::from_hashes(f.size(), &f.hashes()).unwrap();
            assert_eq!(back, f);
        }
        assert!(Frontier::from_hashes(3, &[all[0]]).is_none(), "3 needs two subtrees");
        // A file may claim any size: the largest taken still has room for its leaves.
        let mut f = Frontier::from_hashes(MAX_START, &[all[0]]).expect("2^63 leaves");
        f.push(all[1]);
        assert_eq!(f.size(), MAX_START + 1);
        assert!(Frontier::from_hashes(MAX_START + 1, &all[..2]).is_none(), "above MAX_START");
        assert!(Frontier::from_hashes(u64::MAX, &leaves(64)).is_none(), "above MAX_START");
    }

    /// Every proof of every leaf of trees up to 40 leaves verifies, and fails for
    /// another leaf, index, size or root; built with or without earlier leaves given as
    /// a frontier.
    #[test]
    fn inclusion_proofs_verify() {
        let all = leaves(40);
        for size in 1..=all.len() as u64 {
            let root = mth(&all[..size as usize]);
            for index in 0..size {
                for before in [0, index / 2, index] {
                    let mut f = Frontier::new();
                    all[..before as usize].iter().for_each(|l| f.push(*l));
                    let mut b = ProofBuilder::new(index, size, &f).expect("a proof from this start");
                    for i in before..size {
                        b.leaf(i, &all[i as usize]);
                    }
                    let proof = b.finish().expect("all leaves given");
                    let leaf = &all[index as usize];
                    assert!(verify_inclusion(leaf, index, size, &proof, &root), "{index} of {size}");
                    let other = &all[(index as usize + 1) % all.len()];
                    assert!(!verify_inclusion(other, index, size, &proof, &root));
                    if size > 1 {
                        assert!(!verify_inclusion(leaf, (index + 1) % size, size, &proof, &root));
                    }
                    assert!(!verify_inclusion(leaf, index, size, &proof, &leaf_hash(b"x")));
                    if let Some((last, rest)) = proof.split_last() {
                        assert!(!verify_inclusion(leaf, index, size, rest, &root));
                        let mut bad = proof.clone();
                        bad[proof.len() - 1] = node_hash(last, last);
                        assert!(!verify_inclusion(leaf, index, size, &bad, &root));
                    }
                }
            }
        }
    }
}
