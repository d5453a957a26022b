//! [`RangeTable`]: which lists cover an address, by longest-prefix match in a
//! path-compressed binary trie (one for IPv4, one for IPv6).
//!
//! Each trie node holds a prefix (its bits left-aligned in a `u128`, and its length); a
//! node's children differ in the first bit past it, and nodes with a single child and no
//! value are never kept, so a lookup visits at most one node per distinct prefix length on
//! its path. When built, every node's value is the set of lists whose prefixes cover it,
//! its own and those of every shorter prefix above it, so the deepest node an address
//! reaches answers alone: an address in both a `/16` of one list and a `/24` of another is
//! in both.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;

use super::list::RangeList;

/// One list in a table: where it came from and whose it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListInfo {
    name: Arc<str>,
    operator: Arc<str>,
    creation_time: Option<Arc<str>>,
    prefixes: usize,
}

impl ListInfo {
    /// The list's name: its URL or file path.
    pub fn name(&self) -> &Arc<str> {
        &self.name
    }

    /// The operator whose bots use the addresses.
    pub fn operator(&self) -> &Arc<str> {
        &self.operator
    }

    /// The list's `creationTime`, as written.
    pub fn creation_time(&self) -> Option<&str> {
        self.creation_time.as_deref()
    }

    /// How many prefixes the list has.
    pub fn prefixes(&self) -> usize {
        self.prefixes
    }
}

/// Which lists cover an address, built once (off the request path) and then only read.
#[derive(Debug, Clone)]
pub struct RangeTable {
    v4: Trie,
    v6: Trie,
    /// Distinct sets of list indices (sorted), the values of trie nodes.
    sets: Vec<Box<[u32]>>,
    lists: Vec<ListInfo>,
}

impl Default for RangeTable {
    fn default() -> Self {
        RangeTable::builder().build()
    }
}

impl RangeTable {
    /// An empty builder.
    pub(crate) fn builder() -> RangeTableBuilder {
        RangeTableBuilder::default()
    }

    /// The lists that cover `ip` (an IPv4-mapped IPv6 address is looked up as the IPv4
    /// address it is), in the order they were added.
    pub fn lookup(&self, ip: IpAddr) -> impl Iterator<Item = &ListInfo> + '_ {
        let set = match ip {
            IpAddr::V4(v4) => self.v4.lookup(v4_key(u32::from(v4))),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => self.v4.lookup(v4_key(u32::from(v4))),
                None => self.v6.lookup(u128::from(v6)),
            },
        };
        let ids: &[u32] = match set {
            NONE => &[],
            s => self.sets.get(s as usize).map_or(&[], |s| s),
        };
        ids.iter().filter_map(|&i| self.lists.get(i as usize))
    }

    /// Every list in the table, in the order they were added.
    pub fn lists(&self) -> &[ListInfo] {
        &self.lists
    }

    /// Trie nodes (IPv4, IPv6): the table's size.
    pub fn nodes(&self) -> (usize, usize) {
        (self.v4.nodes.len(), self.v6.nodes.len())
    }
}

/// Collects lists, then builds a [`RangeTable`].
#[derive(Debug, Default)]
pub struct RangeTableBuilder {
    lists: Vec<ListInfo>,
    v4: TrieBuilder,
    v6: TrieBuilder,
}

impl RangeTableBuilder {
    /// Adds `list`, named `name` (its URL or path), of `operator`.
    pub fn add(
        &mut self,
        name: impl Into<Arc<str>>,
        operator: impl Into<Arc<str>>,
        list: &RangeList,
    ) -> &mut Self {
        let Ok(id) = u32::try_from(self.lists.len()) else { return self };
        if id == NONE {
            return self;
        }
        self.lists.push(ListInfo {
            name: name.into(),
            operator: operator.into(),
            creation_time: list.creation_time().map(Arc::from),
            prefixes: list.len(),
        });
        for net in list.v4() {
            self.v4.insert(v4_key(u32::from(net.network())), net.prefix_len(), id);
        }
        for net in list.v6() {
            self.v6.insert(u128::from(net.network()), net.prefix_len(), id);
        }
        self
    }

    /// The table.
    pub fn build(self) -> RangeTable {
        let mut sets = Vec::new();
        let mut interned = HashMap::new();
        let v4 = self.v4.finish(32, &mut sets, &mut interned);
        let v6 = self.v6.finish(128, &mut sets, &mut interned);
        RangeTable { v4, v6, sets, lists: self.lists }
    }
}

/// No node / no value.
const NONE: u32 = u32::MAX;

/// An IPv4 address as a trie key (left-aligned).
fn v4_key(v4: u32) -> u128 {
    u128::from(v4) << 96
}

/// The first `len` bits set.
fn mask(len: u8) -> u128 {
    match len {
        0 => 0,
        l => u128::MAX << (128 - u32::from(l.min(128))),
    }
}

/// Bit `pos` (from the left, `pos < 128`) of `key`.
fn bit(key: u128, pos: u8) -> usize {
    ((key >> (127 - u32::from(pos))) & 1) as usize
}

#[derive(Debug, Clone, Copy)]
struct Node {
    /// The prefix, left-aligned, bits past `len` zero.
    key: u128,
    len: u8,
    /// Index into the table's sets, or [`NONE`].
    set: u32,
    child: [u32; 2],
}

#[derive(Debug, Clone)]
struct Trie {
    nodes: Vec<Node>,
    /// Address width in bits (32 or 128).
    width: u8,
}

impl Trie {
    /// The set of the longest prefix covering `addr` (left-aligned), or [`NONE`].
    fn lookup(&self, addr: u128) -> u32 {
        let Some(root) = self.nodes.first() else { return NONE };
        let mut best = root.set;
        let mut node = root;
        while node.len < self.width {
            let next = node.child[bit(addr, node.len)];
            let Some(child) = self.nodes.get(next as usize) else { break };
            if (addr ^ child.key) & mask(child.len) != 0 {
                break;
            }
            if child.set != NONE {
                best = child.set;
            }
            node = child;
        }
        best
    }
}

/// A trie being built: nodes, and the lists each node's own prefix is in.
#[derive(Debug)]
struct TrieBuilder {
    nodes: Vec<Node>,
    own: Vec<Vec<u32>>,
}

impl Default for TrieBuilder {
    fn default() -> Self {
        TrieBuilder {
            nodes: vec![Node { key: 0, len: 0, set: NONE, child: [NONE; 2] }],
            own: vec![Vec::new()],
        }
    }
}

impl TrieBuilder {
    fn push(&mut self, key: u128, len: u8) -> u32 {
        self.nodes.push(Node { key, len, set: NONE, child: [NONE; 2] });
        self.own.push(Vec::new());
        (self.nodes.len() - 1) as u32
    }

    /// Adds prefix `key/len` (left-aligned) of list `id`.
    fn insert(&mut self, key: u128, len: u8, id: u32) {
        let len = len.min(128);
        let key = key & mask(len);
        let mut at = 0usize;
        loop {
            let node = self.nodes[at];
            if node.len == len {
                self.own[at].push(id);
                return;
            }
            let b = bit(key, node.len);
            let c = node.child[b];
            if c == NONE {
                let leaf = self.push(key, len);
                self.own[leaf as usize].push(id);
                self.nodes[at].child[b] = leaf;
                return;
            }
            let child = self.nodes[c as usize];
            let common = ((key ^ child.key).leading_zeros() as u8).min(len).min(child.len);
            if common == child.len {
                at = c as usize;
                continue;
            }
            let fork = if common == len {
                // The new prefix is above the child.
                let new = self.push(key, len);
                self.own[new as usize].push(id);
                new
            } else {
                // They part after `common` bits: a fork node there, both below it.
                let fork = self.push(key & mask(common), common);
                let leaf = self.push(key, len);
                self.own[leaf as usize].push(id);
                self.nodes[fork as usize].child[bit(key, common)] = leaf;
                fork
            };
            let fork_len = self.nodes[fork as usize].len;
            self.nodes[fork as usize].child[bit(child.key, fork_len)] = c;
            self.nodes[at].child[b] = fork;
            return;
        }
    }

    /// Gives every node with a prefix of its own the set of lists covering it (its own and
    /// its ancestors'), interned in `sets`.
    fn finish(
        mut self,
        width: u8,
        sets: &mut Vec<Box<[u32]>>,
        interned: &mut HashMap<Box<[u32]>, u32>,
    ) -> Trie {
        let mut stack: Vec<(u32, Box<[u32]>)> = vec![(0, Box::default())];
        while let Some((at, inherited)) = stack.pop() {
            let own = std::mem::take(&mut self.own[at as usize]);
            let covering: Box<[u32]> = if own.is_empty() {
                inherited
            } else {
                let mut all: Vec<u32> = inherited.iter().copied().chain(own).collect();
                all.sort_unstable();
                all.dedup();
                let all: Box<[u32]> = all.into();
                let id = match interned.get(&all) {
                    Some(&id) => id,
                    None => {
                        let id = sets.len() as u32;
                        sets.push(all.clone());
                        interned.insert(all.clone(), id);
                        id
                    }
                };
                self.nodes[at as usize].set = id;
                all
            };
            for c in self.nodes[at as usize].child {
                if c != NONE {
                    stack.push((c, covering.clone()));
                }
            }
        }
        Trie { nodes: self.nodes, width }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::ranges::ListLimits;
    use ipnet::IpNet;

    #[test]
    fn every_covering_list_is_found() {
        let google =
            RangeList::parse(br#"{"prefixes": [{"ipv4Prefix": "66.249.64.0/19"}]}"#, &ListLimits::default())
                .unwrap();
        let other =
            RangeList::parse(br#"{"prefixes": [{"ipv4Prefix": "66.249.66.0/24"}]}"#, &ListLimits::default())
                .unwrap();
        let mut builder = RangeTable::builder();
        builder.add("google.json", "Google", &google).add("other.json", "Other", &other);
        let table = builder.build();
        let names =
            |ip: &str| table.lookup(ip.parse().unwrap()).map(|l| l.name().to_string()).collect::<Vec<_>>();
        assert_eq!(names("66.249.66.1"), ["google.json", "other.json"]);
        assert_eq!(names("66.249.65.1"), ["google.json"]);
        assert_eq!(names("::ffff:66.249.65.1"), ["google.json"]);
        assert!(names("192.0.2.1").is_empty());
    }

    fn list(prefixes: &[&str]) -> RangeList {
        RangeList::from_prefixes(
            prefixes.iter().map(|p| p.parse::<IpNet>().unwrap()),
            &ListLimits { min_v4_len: 0, min_v6_len: 0, ..ListLimits::default() },
        )
        .unwrap()
    }

    fn names(table: &RangeTable, ip: &str) -> Vec<String> {
        table.lookup(ip.parse().unwrap()).map(|l| l.name().to_string()).collect()
    }

    /// The trie against the obvious answer (every prefix of every list that contains the
    /// address), for nested, adjacent, duplicate and host prefixes, at the edges of each.
    #[test]
    fn lookup_matches_a_scan_of_every_prefix() {
        let lists: Vec<(&str, Vec<&str>)> = vec![
            ("a", vec!["10.0.0.0/8", "10.1.0.0/16", "10.1.2.0/24", "192.0.2.0/25", "203.0.113.7/32"]),
            ("b", vec!["10.1.0.0/16", "10.1.2.128/25", "192.0.2.128/25", "0.0.0.0/0"]),
            ("c", vec!["10.1.2.3/32", "2001:db8::/32", "2001:db8:1::/48", "2001:db8:1:2::/64"]),
            ("d", vec!["2001:db8:1::/48", "::/0", "2001:db8:ffff:ffff:ffff:ffff:ffff:ffff/128"]),
            ("e", vec!["128.0.0.0/1", "127.255.255.255/32"]),
        ];
        let mut builder = RangeTable::builder();
        let parsed: Vec<(String, Vec<IpNet>, RangeList)> = lists
            .iter()
            .map(|(n, p)| (n.to_string(), p.iter().map(|p| p.parse().unwrap()).collect(), list(p)))
            .collect();
        for (name, _, l) in &parsed {
            builder.add(name.as_str(), "op", l);
        }
        let table = builder.build();
        let mut probes: Vec<IpAddr> = Vec::new();
        for (_, nets, _) in &parsed {
            for net in nets {
                for ip in [net.network(), net.broadcast()] {
                    probes.push(ip);
                    match ip {
                        IpAddr::V4(v4) => {
                            probes.push(std::net::Ipv4Addr::from(u32::from(v4).wrapping_add(1)).into());
                            probes.push(std::net::Ipv4Addr::from(u32::from(v4).wrapping_sub(1)).into());
                        }
                        IpAddr::V6(v6) => {
                            probes.push(std::net::Ipv6Addr::from(u128::from(v6).wrapping_add(1)).into());
                            probes.push(std::net::Ipv6Addr::from(u128::from(v6).wrapping_sub(1)).into());
                        }
                    }
                }
            }
        }
        probes.extend(
            ["0.0.0.0", "255.255.255.255", "::", "ffff::1", "8.8.8.8"].map(|s| s.parse::<IpAddr>().unwrap()),
        );
        for ip in probes {
            let expected: Vec<String> = parsed
                .iter()
                .filter(|(_, nets, _)| nets.iter().any(|n| n.contains(&ip)))
                .map(|(n, _, _)| n.clone())
                .collect();
            assert_eq!(names(&table, &ip.to_string()), expected, "{ip}");
        }
    }

    /// Random prefixes, crowded into a small part of each address space so that they nest
    /// and overlap, against a scan.
    #[test]
    fn random_prefixes_match_a_scan() {
        let mut seed = 0x9e37_79b9_7f4a_7c15u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let limits = ListLimits { min_v4_len: 0, min_v6_len: 0, ..ListLimits::default() };
        let mut builder = RangeTable::builder();
        let mut all: Vec<(String, Vec<IpNet>)> = Vec::new();
        for l in 0..6 {
            let mut nets = Vec::new();
            for _ in 0..300 {
                let r = next();
                let net: IpNet = if r % 2 == 0 {
                    // 10.0.0.0/14, lengths 12..=32.
                    let addr = std::net::Ipv4Addr::from(0x0a00_0000 | (next() as u32 & 0x0003_ffff));
                    let len = 12 + (next() % 21) as u8;
                    ipnet::Ipv4Net::new(addr, len).unwrap().trunc().into()
                } else {
                    // 2001:db8::/32 with few distinct bits below, lengths 28..=128.
                    let low = u128::from(next() & 0xff) << 88 | u128::from(next() & 0xff);
                    let addr = std::net::Ipv6Addr::from(0x2001_0db8u128 << 96 | low);
                    let len = 28 + (next() % 101) as u8;
                    ipnet::Ipv6Net::new(addr, len).unwrap().trunc().into()
                };
                nets.push(net);
            }
            let name = format!("l{l}");
            builder.add(
                name.as_str(),
                "op",
                &RangeList::from_prefixes(nets.iter().copied(), &limits).unwrap(),
            );
            all.push((name, nets));
        }
        let table = builder.build();
        for _ in 0..20_000 {
            let ip: IpAddr = if next() % 2 == 0 {
                std::net::Ipv4Addr::from(0x0a00_0000 | (next() as u32 & 0x0003_ffff)).into()
            } else {
                let low = u128::from(next() & 0xff) << 88 | u128::from(next() & 0x1ff);
                std::net::Ipv6Addr::from(0x2001_0db8u128 << 96 | low).into()
            };
            let expected: Vec<&str> = all
                .iter()
                .filter(|(_, nets)| nets.iter().any(|n| n.contains(&ip)))
                .map(|(n, _)| n.as_str())
                .collect();
            assert_eq!(names(&table, &ip.to_string()), expected, "{ip}");
        }
    }

    #[test]
    fn mapped_addresses_are_looked_up_as_ipv4() {
        let mut builder = RangeTable::builder();
        builder.add("v4", "op", &list(&["192.0.2.0/24"])).add("v6", "op", &list(&["::ffff:0:0/96"]));
        let table = builder.build();
        assert_eq!(names(&table, "::ffff:192.0.2.9"), ["v4"]);
        assert_eq!(names(&table, "192.0.2.9"), ["v4"]);
        // The IPv6 list's ::ffff:0:0/96 never matches: such an address is IPv4.
        assert!(names(&table, "::ffff:198.51.100.1").is_empty());
        assert!(names(&table, "::192.0.2.9").is_empty());
    }

    #[test]
    fn empty_table_and_shared_sets() {
        let table = RangeTable::default();
        assert!(names(&table, "192.0.2.1").is_empty());
        assert!(names(&table, "2001:db8::1").is_empty());
        let mut builder = RangeTable::builder();
        builder.add("a", "op", &list(&["192.0.2.0/24", "198.51.100.0/24", "203.0.113.0/24"]));
        let table = builder.build();
        // Three prefixes of one list share one set.
        assert_eq!(table.sets.len(), 1);
        assert_eq!(table.lists()[0].prefixes(), 3);
    }
}
