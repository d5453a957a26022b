//! Published IP range lists (`robotsgate::identity::ranges`): the JSON documents an operator
//! publishes (or a file the site configures), parsed within the ingress's limits and built
//! into the table every request's address is looked up in. Reached the public way: each
//! document is written to a file and loaded by `Ranges::new`.
//!
//! Input: up to four documents and the addresses to look up, separated by `0xFF` (a byte no
//! JSON document holds): `DOC 0xFF DOC ... 0xFF ADDRESSES`; without an `0xFF`, the whole input
//! is one document. ADDRESSES: 17-byte records, a first byte whose low bit picks IPv4 (the
//! next 4 bytes) or IPv6 (the next 16).
//!
//! Invariants: no panic; a document is taken whole or refused with a reason of bounded
//! length; a taken one has between 1 and `max_prefixes` prefixes, as many as an independent
//! reading of it (serde_json and ipnet here) finds, each canonical and at least the shortest
//! length allowed; the table finds, for every address asked and for the first and last
//! address of each prefix and their neighbours, exactly the lists a scan of those prefixes
//! finds, in the order they were configured (an IPv4-mapped IPv6 address as its IPv4 one).

#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::path::PathBuf;

use ipnet::{Ipv4Net, Ipv6Net};
use libfuzzer_sys::fuzz_target;
use robotsgate::identity::ranges::{ListLimits, ListSource, Ranges};

const MAX_LISTS: usize = 4;
/// Prefixes whose edges are looked up, over all lists (the scan is quadratic).
const MAX_EDGES: usize = 64;

/// One list as this target reads it, independently of the library.
struct Reading {
    v4: Vec<Ipv4Net>,
    v6: Vec<Ipv6Net>,
}

fn read(doc: &[u8]) -> Option<Reading> {
    let value: serde_json::Value = serde_json::from_slice(doc).ok()?;
    let mut reading = Reading { v4: Vec::new(), v6: Vec::new() };
    for entry in value.get("prefixes")?.as_array()? {
        if let Some(v4) = entry.get("ipv4Prefix") {
            reading.v4.push(v4.as_str()?.trim().parse().ok()?);
        }
        if let Some(v6) = entry.get("ipv6Prefix") {
            reading.v6.push(v6.as_str()?.trim().parse().ok()?);
        }
    }
    Some(reading)
}

/// The lists (by index) whose prefixes hold `ip`, by a scan.
fn scan(lists: &[(usize, Reading)], ip: IpAddr) -> Vec<usize> {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    lists
        .iter()
        .filter(|(_, r)| match ip {
            IpAddr::V4(a) => r.v4.iter().any(|n| n.contains(&a)),
            IpAddr::V6(a) => r.v6.iter().any(|n| n.contains(&a)),
        })
        .map(|(i, _)| *i)
        .collect()
}

fn addresses(bytes: &[u8]) -> Vec<IpAddr> {
    bytes
        .chunks_exact(17)
        .map(|c| {
            let mut v6 = [0u8; 16];
            v6.copy_from_slice(&c[1..]);
            if c[0] & 1 == 0 {
                IpAddr::V4(Ipv4Addr::new(c[1], c[2], c[3], c[4]))
            } else {
                IpAddr::V6(Ipv6Addr::from(v6))
            }
        })
        .collect()
}

/// The first and last address of each prefix and the addresses either side of them.
fn edges(lists: &[(usize, Reading)]) -> Vec<IpAddr> {
    let mut out = Vec::new();
    let v4 = lists.iter().flat_map(|(_, r)| &r.v4).take(MAX_EDGES);
    for n in v4 {
        let (lo, hi) = (u32::from(n.network()), u32::from(n.broadcast()));
        for a in [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)] {
            out.push(IpAddr::V4(Ipv4Addr::from(a)));
            out.push(IpAddr::V6(Ipv4Addr::from(a).to_ipv6_mapped()));
        }
    }
    let v6 = lists.iter().flat_map(|(_, r)| &r.v6).take(MAX_EDGES);
    for n in v6 {
        let (lo, hi) = (u128::from(n.network()), u128::from(n.broadcast()));
        for a in [lo.wrapping_sub(1), lo, hi, hi.wrapping_add(1)] {
            out.push(IpAddr::V6(Ipv6Addr::from(a)));
        }
    }
    out
}

/// A file per document in this process's own folder (tmpfs where there is one).
fn folder() -> PathBuf {
    let base = if std::path::Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let dir = base.join(format!("robotsgate-fuzz-ranges-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    dir
}

fuzz_target!(|data: &[u8]| {
    let parts: Vec<&[u8]> = data.split(|&b| b == 0xFF).collect();
    let (docs, asked) = match parts.split_last() {
        Some((last, docs)) if !docs.is_empty() => (docs, *last),
        _ => (&parts[..], &[][..]),
    };
    let docs = &docs[..docs.len().min(MAX_LISTS)];
    let limits = ListLimits::default();

    let dir = folder();
    let sources: Vec<ListSource> = docs
        .iter()
        .enumerate()
        .map(|(i, doc)| {
            let path = dir.join(format!("{i}.json"));
            std::fs::write(&path, doc).expect("the fuzz folder takes a file");
            ListSource::new(path.to_str().expect("a UTF-8 path"), "operator")
        })
        .collect();
    let ranges = Ranges::new(sources, limits);

    let mut taken = Vec::new();
    for (i, (status, doc)) in ranges.status().iter().zip(docs).enumerate() {
        match &status.last_error {
            Some(error) => {
                assert_eq!(status.prefixes, 0);
                let path_len = status.source.name.len();
                assert!(error.len() <= path_len + 300, "a reason of {} bytes: {error:.400}", error.len());
            }
            None => {
                let reading = read(doc).expect("a list the library takes, this target reads");
                let count = reading.v4.len() + reading.v6.len();
                assert_eq!(status.prefixes, count);
                assert!((1..=limits.max_prefixes).contains(&count));
                assert!(reading.v4.iter().all(|n| n.trunc() == *n && n.prefix_len() >= limits.min_v4_len));
                assert!(reading.v6.iter().all(|n| n.trunc() == *n && n.prefix_len() >= limits.min_v6_len));
                taken.push((i, reading));
            }
        }
    }

    let table = ranges.table();
    assert_eq!(table.lists().len(), taken.len());
    let names: Vec<&str> = ranges.sources().iter().map(|s| s.name.as_ref()).collect();
    for ip in addresses(asked).into_iter().chain(edges(&taken)) {
        let found: Vec<&str> = table.lookup(ip).map(|l| l.name().as_ref()).collect();
        let want: Vec<&str> = scan(&taken, ip).into_iter().map(|i| names[i]).collect();
        assert_eq!(found, want, "lookup of {ip}");
    }
});
