//! Forward-confirmed reverse DNS (issue 29, method 2) against a real name server on
//! loopback (hickory-server, in-memory zones): a verified crawler address, spoofed names,
//! names that do not forward-confirm, suffix tricks, a server that never answers, one
//! lookup for many waiters, the bound on lookups at once, and the cache of failures.

#[path = "support/dns.rs"]
mod dns;
mod support;

use std::net::IpAddr;
use std::time::{Duration, Instant};

use dns::{Rec, SilentDns, TestDns};
use hickory_resolver::proto::rr::RecordType;
use robotsgate::identity::ranges::ListLimits;
use robotsgate::identity::rdns::{Answer, RdnsConfig, ReverseDns, Wait};
use robotsgate::identity::{Method, Operator, Verdict, Verifier, Why};
use robotsgate::net::NameServer;
use support::bounded;

const GOOGLE: [&str; 2] = ["googlebot.com", "google.com"];

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// Test-sized bounds: a query 2 s, a request waits 5 s (so that answers from loopback
/// always come within it, unless the test says otherwise).
fn config(server: std::net::SocketAddr) -> RdnsConfig {
    RdnsConfig {
        servers: vec![NameServer::from(server)],
        lookup_timeout: Duration::from_secs(2),
        max_wait: Duration::from_secs(5),
        ..RdnsConfig::default()
    }
}

fn reverse_dns(server: &TestDns) -> ReverseDns {
    ReverseDns::new(["googlebot.com", "google.com", "search.msn.com"], config(server.addr()))
}

fn records() -> Vec<Rec> {
    vec![
        // Googlebot, IPv4 and IPv6.
        Rec::Ptr(ip("66.249.66.1"), "crawl-66-249-66-1.googlebot.com"),
        Rec::Addr("crawl-66-249-66-1.googlebot.com", ip("66.249.66.1")),
        Rec::Ptr(ip("2001:4860:4801:10::1"), "crawl-2001-4860-4801-10--1.googlebot.com"),
        Rec::Addr("crawl-2001-4860-4801-10--1.googlebot.com", ip("2001:4860:4801:10::1")),
        // An address whose PTR is someone else's name.
        Rec::Ptr(ip("203.0.113.9"), "host-203-0-113-9.example.net"),
        Rec::Addr("host-203-0-113-9.example.net", ip("203.0.113.9")),
        // PTR names under googlebot.com that do not resolve back: to another address, to
        // nothing.
        Rec::Ptr(ip("203.0.113.11"), "crawl-66-249-66-1.googlebot.com"),
        Rec::Ptr(ip("203.0.113.14"), "crawl-203-0-113-14.googlebot.com"),
        // Suffix tricks, each forward-confirming for its own name.
        Rec::Ptr(ip("203.0.113.12"), "googlebot.com.evil.net"),
        Rec::Addr("googlebot.com.evil.net", ip("203.0.113.12")),
        Rec::Ptr(ip("203.0.113.13"), "evilgooglebot.com"),
        Rec::Addr("evilgooglebot.com", ip("203.0.113.13")),
        // A Google name for an address in none of Google's lists.
        Rec::Ptr(ip("192.0.2.66"), "crawl-192-0-2-66.googlebot.com"),
        Rec::Addr("crawl-192-0-2-66.googlebot.com", ip("192.0.2.66")),
        // For the many-waiters test.
        Rec::Ptr(ip("66.249.66.2"), "crawl-66-249-66-2.googlebot.com"),
        Rec::Addr("crawl-66-249-66-2.googlebot.com", ip("66.249.66.2")),
    ]
}

#[tokio::test]
async fn a_crawler_address_is_verified() {
    let server = TestDns::start(&records()).await;
    let rdns = reverse_dns(&server);
    let v = bounded("verify", rdns.verify(ip("66.249.66.1"), &GOOGLE)).await;
    assert_eq!(v, Verdict::Verified(Method::ReverseDns { name: "crawl-66-249-66-1.googlebot.com".into() }));
    let v6 = bounded("verify v6", rdns.verify(ip("2001:4860:4801:10::1"), &GOOGLE)).await;
    assert_eq!(
        v6,
        Verdict::Verified(Method::ReverseDns { name: "crawl-2001-4860-4801-10--1.googlebot.com".into() })
    );
    // The forward lookup asked for the family of the address only.
    assert_eq!(server.count("crawl-66-249-66-1.googlebot.com", RecordType::A), 1);
    assert_eq!(server.count("crawl-66-249-66-1.googlebot.com", RecordType::AAAA), 0);
    assert_eq!(server.count("crawl-2001-4860-4801-10--1.googlebot.com", RecordType::AAAA), 1);
    // The IPv4-mapped form is the same address: answered from the cache.
    let mapped = bounded("verify mapped", rdns.verify(ip("::ffff:66.249.66.1"), &GOOGLE)).await;
    assert!(mapped.is_verified(), "{mapped}");
    assert_eq!(server.ptr_queries(ip("66.249.66.1")), 1);
    // Another operator's suffixes: the same answer, not theirs.
    let bing = bounded("verify as bing", rdns.verify(ip("66.249.66.1"), &["search.msn.com"])).await;
    assert_eq!(bing, Verdict::Failed(Why::ForeignName("crawl-66-249-66-1.googlebot.com".into())));
}

#[tokio::test]
async fn spoofed_names_and_missing_ptr_fail() {
    let server = TestDns::start(&records()).await;
    let rdns = reverse_dns(&server);
    let v = bounded("foreign", rdns.verify(ip("203.0.113.9"), &GOOGLE)).await;
    assert_eq!(v, Verdict::Failed(Why::ForeignName("host-203-0-113-9.example.net".into())));
    // A name under no configured suffix is not looked up forward.
    assert_eq!(server.count("host-203-0-113-9.example.net", RecordType::A), 0);
    let v = bounded("no ptr", rdns.verify(ip("203.0.113.10"), &GOOGLE)).await;
    assert_eq!(v, Verdict::Failed(Why::NoPtr));
    assert_eq!(server.ptr_queries(ip("203.0.113.10")), 1);
}

#[tokio::test]
async fn a_ptr_that_does_not_resolve_back_fails() {
    let server = TestDns::start(&records()).await;
    let rdns = reverse_dns(&server);
    // Points at Googlebot's name, whose address is another.
    let v = bounded("elsewhere", rdns.verify(ip("203.0.113.11"), &GOOGLE)).await;
    assert_eq!(v, Verdict::Failed(Why::NotConfirmed("crawl-66-249-66-1.googlebot.com".into())));
    // Points at a googlebot.com name that has no address.
    let v = bounded("nowhere", rdns.verify(ip("203.0.113.14"), &GOOGLE)).await;
    assert_eq!(v, Verdict::Failed(Why::NotConfirmed("crawl-203-0-113-14.googlebot.com".into())));
    assert_eq!(server.count("crawl-203-0-113-14.googlebot.com", RecordType::A), 1);
}

#[tokio::test]
async fn suffix_tricks_fail_without_a_forward_lookup() {
    let server = TestDns::start(&records()).await;
    let rdns = reverse_dns(&server);
    for (addr, name) in [("203.0.113.12", "googlebot.com.evil.net"), ("203.0.113.13", "evilgooglebot.com")] {
        let v = bounded(name, rdns.verify(ip(addr), &GOOGLE)).await;
        assert_eq!(v, Verdict::Failed(Why::ForeignName(name.into())), "{name}");
        assert_eq!(server.count(name, RecordType::A), 0, "{name} looked up forward");
    }
}

/// The whole method through the [`Verifier`]: Google's default operator (its bundled
/// lists and reverse DNS); a listed address needs no DNS at all.
#[tokio::test]
async fn the_verifier_tries_lists_then_reverse_dns() {
    let server = TestDns::start(&records()).await;
    let operators = Operator::defaults();
    let verifier = Verifier::with_dns(&operators, ListLimits::default(), config(server.addr()));
    // In Google's bundled common-crawlers list.
    let listed = bounded("listed", verifier.verify(ip("66.249.64.1"), "Googlebot")).await;
    assert!(matches!(listed, Verdict::Verified(Method::IpRange { .. })), "{listed}");
    assert_eq!(server.total(), 0);
    // Not in the lists; reverse DNS says it is Google's.
    let by_dns = bounded("by dns", verifier.verify(ip("192.0.2.66"), "googlebot")).await;
    assert_eq!(
        by_dns,
        Verdict::Verified(Method::ReverseDns { name: "crawl-192-0-2-66.googlebot.com".into() })
    );
    // Baidu's bots are checked by reverse DNS only: the name is not Baidu's.
    let baidu = bounded("baidu", verifier.verify(ip("192.0.2.66"), "Baiduspider")).await;
    assert_eq!(baidu, Verdict::Failed(Why::ForeignName("crawl-192-0-2-66.googlebot.com".into())));
    assert_eq!(server.ptr_queries(ip("192.0.2.66")), 1);
    // A spoofed Googlebot from a wrong address.
    let spoofed = bounded("spoofed", verifier.verify(ip("203.0.113.9"), "Googlebot")).await;
    assert_eq!(spoofed, Verdict::Failed(Why::ForeignName("host-203-0-113-9.example.net".into())));
    // GPTBot from Google's address: OpenAI has lists only.
    let gpt = bounded("gptbot", verifier.verify(ip("66.249.66.1"), "GPTBot")).await;
    assert_eq!(gpt, Verdict::Failed(Why::NotInRanges));
    assert_eq!(
        bounded("unknown", verifier.verify(ip("66.249.66.1"), "ExampleBot")).await,
        Verdict::Unverified(Why::UnknownToken)
    );
}

#[tokio::test]
async fn a_server_that_never_answers_bounds_the_wait() {
    let silent = SilentDns::start();
    let rdns = ReverseDns::new(
        GOOGLE,
        RdnsConfig {
            servers: vec![NameServer::from(silent.addr())],
            lookup_timeout: Duration::from_millis(1500),
            max_wait: Duration::from_millis(50),
            ..RdnsConfig::default()
        },
    );
    let started = Instant::now();
    let v = bounded("verify", rdns.verify(ip("66.249.66.1"), &GOOGLE)).await;
    assert_eq!(v, Verdict::Unverified(Why::Pending));
    // Decided at max_wait, long before the query's own timeout (a loose bound, for a busy
    // machine: the query timeout is 30 times max_wait).
    assert!(started.elapsed() < Duration::from_millis(1000), "{:?}", started.elapsed());
    // The lookup goes on, ends at its timeout, and its failure is cached.
    let answer = bounded("answer", rdns.answer(ip("66.249.66.1"))).await;
    assert!(matches!(&answer, Wait::Ready(a) if matches!(**a, Answer::Error(_))), "{answer:?}");
    let v = bounded("verify again", rdns.verify(ip("66.249.66.1"), &GOOGLE)).await;
    assert!(matches!(v, Verdict::Unverified(Why::Dns(_))), "{v}");
}

/// Many requests for one address at once: one PTR query, one forward query; later
/// requests are answered from the cache.
#[tokio::test]
async fn one_lookup_however_many_requests_wait() {
    let server = TestDns::start(&records()).await;
    let rdns = reverse_dns(&server);
    let waiters = (0..64).map(|_| rdns.verify(ip("66.249.66.2"), &GOOGLE));
    let verdicts = bounded("64 waiters", futures_util::future::join_all(waiters)).await;
    let expected = Verdict::Verified(Method::ReverseDns { name: "crawl-66-249-66-2.googlebot.com".into() });
    assert!(verdicts.iter().all(|v| *v == expected), "{verdicts:?}");
    // One lookup here (the resolver would merge identical queries in flight anyway: the
    // count that shows the waiters shared one lookup is ours).
    let stats = rdns.stats();
    assert_eq!((stats.lookups, stats.joined), (1, 63), "{stats:?}");
    assert_eq!(server.ptr_queries(ip("66.249.66.2")), 1);
    assert_eq!(server.count("crawl-66-249-66-2.googlebot.com", RecordType::A), 1);
    for _ in 0..10 {
        assert_eq!(bounded("cached", rdns.verify(ip("66.249.66.2"), &GOOGLE)).await, expected);
    }
    assert_eq!(server.ptr_queries(ip("66.249.66.2")), 1);
    assert_eq!(rdns.stats().hits, 10);
}

#[tokio::test]
async fn lookups_at_once_are_bounded() {
    let silent = SilentDns::start();
    let rdns = ReverseDns::new(
        GOOGLE,
        RdnsConfig {
            servers: vec![NameServer::from(silent.addr())],
            lookup_timeout: Duration::from_millis(300),
            max_wait: Duration::from_millis(10),
            max_in_flight: 1,
            ..RdnsConfig::default()
        },
    );
    assert_eq!(
        bounded("first", rdns.verify(ip("198.51.100.1"), &GOOGLE)).await,
        Verdict::Unverified(Why::Pending)
    );
    assert_eq!(
        bounded("second", rdns.verify(ip("198.51.100.2"), &GOOGLE)).await,
        Verdict::Unverified(Why::Busy)
    );
    // The first address joins its running lookup rather than counting again.
    assert_eq!(
        bounded("first again", rdns.verify(ip("198.51.100.1"), &GOOGLE)).await,
        Verdict::Unverified(Why::Pending)
    );
    bounded("first done", rdns.answer(ip("198.51.100.1"))).await;
    // Its slot is free again.
    assert_eq!(
        bounded("second again", rdns.verify(ip("198.51.100.2"), &GOOGLE)).await,
        Verdict::Unverified(Why::Pending)
    );
}

#[tokio::test]
async fn failures_are_cached_for_the_negative_ttl() {
    let server = TestDns::start(&records()).await;
    let kept = reverse_dns(&server);
    for _ in 0..3 {
        assert_eq!(
            bounded("no ptr", kept.verify(ip("203.0.113.10"), &GOOGLE)).await,
            Verdict::Failed(Why::NoPtr)
        );
    }
    assert_eq!(server.ptr_queries(ip("203.0.113.10")), 1);
    let forgetful =
        ReverseDns::new(GOOGLE, RdnsConfig { negative_ttl: Duration::ZERO, ..config(server.addr()) });
    for _ in 0..3 {
        assert_eq!(
            bounded("no ptr", forgetful.verify(ip("203.0.113.10"), &GOOGLE)).await,
            Verdict::Failed(Why::NoPtr)
        );
    }
    assert_eq!(server.ptr_queries(ip("203.0.113.10")), 4);
}
