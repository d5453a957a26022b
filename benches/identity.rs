//! The cost of identity checks on the request path (issue 29: IP lookup ≤ 200 ns, a
//! cached verdict ≤ 2 µs).
//!
//! ```sh
//! cargo bench --bench identity
//! ```
//!
//! - `ranges/lookup`: [`RangeTable::lookup`] in the table of every bundled list (Google,
//!   Bing, OpenAI, Perplexity, Apple, Anthropic), cycling through addresses that are in a
//!   list (IPv4 and IPv6), IPv4-mapped, and in none.
//! - `verifier/listed`: [`Verifier::verify`] for an address in the operator's list.
//! - `verifier/rdns_cached`: [`Verifier::verify`] for an address found by reverse DNS,
//!   its answer cached (the name server is hickory-server on loopback, asked once during
//!   setup).
//! - `rdns/cached`: [`ReverseDns::verify`] alone, cached.
//!
//! The async calls are polled once with `now_or_never` (a cached answer needs no I/O).

#[path = "../tests/support/dns.rs"]
mod dns;

use std::hint::black_box;
use std::net::IpAddr;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use dns::{Rec, TestDns};
use futures_util::FutureExt;
use robotsgate::identity::ranges::{ListLimits, RangeTable, Ranges};
use robotsgate::identity::rdns::{RdnsConfig, ReverseDns};
use robotsgate::identity::{Operator, Verifier};
use robotsgate::net::NameServer;

fn ip(s: &str) -> IpAddr {
    s.parse().expect("address")
}

fn bench(c: &mut Criterion) {
    let operators = Operator::defaults();
    let ranges = Ranges::for_operators(&operators, ListLimits::default());
    let table: std::sync::Arc<RangeTable> = ranges.table();
    let (v4, v6) = table.nodes();
    println!("bundled lists: {}, trie nodes: {v4} IPv4, {v6} IPv6", table.lists().len());
    let probes: Vec<IpAddr> = [
        "66.249.66.1",
        "2001:4860:4801:10::1",
        "20.171.206.10",
        "157.55.39.7",
        "17.241.208.170",
        "::ffff:66.249.66.1",
        "192.0.2.1",
        "2001:db8::1",
        "8.8.8.8",
        "216.73.216.9",
    ]
    .map(ip)
    .to_vec();
    let mut group = c.benchmark_group("ranges");
    group.bench_function("lookup", |b| {
        let mut i = 0;
        b.iter(|| {
            i = (i + 1) % probes.len();
            black_box(table.lookup(black_box(probes[i])).next().is_some())
        })
    });
    group.finish();

    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let _enter = rt.enter();
    let server = rt.block_on(TestDns::start(&[
        Rec::Ptr(ip("192.0.2.66"), "crawl-192-0-2-66.googlebot.com"),
        Rec::Addr("crawl-192-0-2-66.googlebot.com", ip("192.0.2.66")),
    ]));
    let config = RdnsConfig {
        servers: vec![NameServer::from(server.addr())],
        max_wait: Duration::from_secs(5),
        ..RdnsConfig::default()
    };
    let verifier = Verifier::with_dns(&operators, ListLimits::default(), config.clone());
    let rdns = ReverseDns::new(["googlebot.com", "google.com"], config);
    let warm = rt.block_on(verifier.verify(ip("192.0.2.66"), "Googlebot"));
    assert!(warm.is_verified(), "{warm}");
    assert!(rt.block_on(rdns.verify(ip("192.0.2.66"), &["googlebot.com"])).is_verified());

    let mut group = c.benchmark_group("verifier");
    group.bench_function("listed", |b| {
        b.iter(|| black_box(verifier.verify(black_box(ip("20.171.206.10")), "GPTBot").now_or_never()))
    });
    group.bench_function("rdns_cached", |b| {
        b.iter(|| black_box(verifier.verify(black_box(ip("192.0.2.66")), "Googlebot").now_or_never()))
    });
    group.finish();
    let mut group = c.benchmark_group("rdns");
    let suffixes = ["googlebot.com", "google.com"];
    group.bench_function("cached", |b| {
        b.iter(|| black_box(rdns.verify(black_box(ip("192.0.2.66")), &suffixes).now_or_never()))
    });
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
