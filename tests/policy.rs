//! The robots.txt policy against real HTTP origins on 127.0.0.1 (issue 3, "Proof"):
//! decisions per status class, redirects, limits, caching with `max-age`,
//! stale-while-revalidate, stale-if-error, retry backoff, one fetch per origin, eviction,
//! overrides and `/robots.txt` itself.
//!
//! Time is tokio's: tests move the clock with `pause`/`advance`/`resume` (current-thread
//! runtime) and never sleep to wait for something. That needs tokio's `test-util` feature
//! in `[dev-dependencies]`.

mod support;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, SystemTime};

use robotsgate::fetch::{FetchConfig, FetchOutcome, Fetcher, Unreachable};
use robotsgate::net::ConnectError;
use robotsgate::origin::Origin;
use robotsgate::policy::{
    Decision, FetchObserver, HostPattern, Override, OverrideAction, PolicyConfig, Reason, RobotsPolicy,
};
use robotsgate::rep::{Profile, RuleKind};
use support::{Gate, Reply, TestOrigin, bounded, fetch_config, fetcher, fetcher_with};

const AGENT: &str = "ExampleBot";
const LIMIT: usize = 500 * 1024;
const ROBOTS: &str = "/robots.txt";

fn secs(s: u64) -> Duration {
    Duration::from_secs(s)
}

/// Moves tokio's clock forward by `d`, leaving it running (real I/O goes on working).
async fn advance(d: Duration) {
    tokio::time::pause();
    tokio::time::advance(d).await;
    tokio::time::resume();
}

fn policy(config: PolicyConfig) -> RobotsPolicy {
    RobotsPolicy::new(fetcher(), config)
}

async fn decide(policy: &RobotsPolicy, origin: &Origin, path: &str) -> Decision {
    bounded(&format!("deciding {origin}{path}"), policy.decide(origin, path, AGENT.into())).await
}

/// Decides `path` until `done` holds for the decision (bounded): for waiting until a
/// background refresh has landed.
async fn decide_until(
    policy: &RobotsPolicy,
    origin: &Origin,
    path: &str,
    what: &str,
    done: impl Fn(&Decision) -> bool,
) -> Decision {
    bounded(what, async {
        loop {
            let d = policy.decide(origin, path, AGENT.into()).await;
            if done(&d) {
                return d;
            }
            tokio::task::yield_now().await;
        }
    })
    .await
}

/// Lets spawned tasks run for a while (no time passes).
async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

fn is_rule(d: &Decision, kind: RuleKind, line: u32) -> bool {
    matches!(d.reason, Reason::Rule { kind: k, line: l, .. } if k == kind && l == line)
}

fn unreachable_cause(d: &Decision) -> &Unreachable {
    match &d.reason {
        Reason::Unreachable { cause } => cause,
        other => panic!("expected Reason::Unreachable, got {other:?} ({d})"),
    }
}

// ---------------------------------------------------------------------------------------
// Decisions per fetch result
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn rules_decide_and_the_decision_says_why() {
    let robots = "User-agent: *\nDisallow: /private\nAllow: /private/press\n";
    let server = TestOrigin::robots(robots).await;
    let origin = server.origin("a.test");
    let p = policy(PolicyConfig::default());

    let d = decide(&p, &origin, "/private/report.pdf").await;
    assert!(!d.allowed);
    assert!(is_rule(&d, RuleKind::Disallow, 2), "{:?}", d.reason);
    assert_eq!(d.reason.class(), "disallow-rule");
    assert_eq!(d.rule_pattern(), Some("/private"));
    assert_eq!(d.to_string(), "line 2: disallow: /private");
    assert_eq!(*d.origin, origin);
    assert_eq!(&*d.agent, AGENT);
    assert_eq!(d.profile, Profile::Conservative);
    assert!(!d.stale);
    assert!(d.failure.is_none());
    assert!(d.age.is_some_and(|a| a < secs(5)));
    let facts = d.fetch_facts().expect("facts of the fetch");
    assert_eq!(facts.url, origin.robots_url());
    assert_eq!(facts.final_url, origin.robots_url());
    assert_eq!(facts.status, Some(200));
    assert_eq!(facts.bytes, robots.len());
    assert!(!facts.truncated);
    assert_eq!(facts.redirects, 0);
    assert_eq!(facts.sha256_hex().map(|h| h.len()), Some(64));

    let d = decide(&p, &origin, "/private/press/2024").await;
    assert!(d.allowed);
    assert!(is_rule(&d, RuleKind::Allow, 3), "{:?}", d.reason);
    assert_eq!(d.rule_pattern(), Some("/private/press"));

    let d = decide(&p, &origin, "/public?q=1").await;
    assert!(d.allowed);
    assert_eq!(d.reason, Reason::NoRuleMatched);

    // All of it from one fetch.
    assert_eq!(server.hits(ROBOTS), 1);
    assert_eq!(server.total_hits(), 1);
}

#[tokio::test]
async fn groups_and_profiles_come_from_the_one_copy() {
    let robots =
        "User-agent: ExampleBot\nDisallow: /bot-only\ndisalow: /typo\n\nUser-agent: *\nDisallow: /\n";
    let server = TestOrigin::robots(robots).await;
    let origin = server.origin("a.test");
    let p = policy(PolicyConfig::default());
    assert!(!decide(&p, &origin, "/bot-only/x").await.allowed);
    assert!(decide(&p, &origin, "/elsewhere").await.allowed);
    let other = bounded("other agent", p.decide(&origin, "/elsewhere", "OtherBot".into())).await;
    assert!(!other.allowed, "the * group applies to other agents");
    // Google reads the typo `disalow` as disallow, the RFC does not; conservative obeys it.
    let google = bounded("google", p.decide_with(&origin, "/typo", AGENT.into(), Profile::Google)).await;
    let rfc = bounded("rfc", p.decide_with(&origin, "/typo", AGENT.into(), Profile::Rfc)).await;
    let conservative = decide(&p, &origin, "/typo").await;
    assert!(!google.allowed && google.profile == Profile::Google);
    assert!(rfc.allowed && rfc.profile == Profile::Rfc);
    assert!(!conservative.allowed);
    assert!(
        matches!(conservative.reason, Reason::Rule { readings_disagree: true, .. }),
        "{:?}",
        conservative.reason
    );
    assert_eq!(server.hits(ROBOTS), 1);
}

/// Issue 31.1: a URL given as text with raw non-ASCII or a stray `%` (a scraped link) is
/// read with `Target::parse` and decided by the live robots.txt in each profile as that
/// profile reads it; what is no URL is refused with the reason, before any fetch.
#[tokio::test]
async fn urls_as_text_are_decided_as_each_profile_reads_them() {
    use robotsgate::target::Target;
    let robots = "User-agent: *\nDisallow: /\nAllow: /foo/bar/\u{30c4}\nAllow: /a%4\n";
    let server = TestOrigin::robots(robots).await;
    let p = policy(PolicyConfig::default());
    let base = server.base_as("a.test");
    for (url, google, rfc) in [
        (format!("{base}/foo/bar/\u{30c4}"), false, true),
        (format!("{base}/foo/bar/%E3%83%84?q=\u{e9}#top"), true, true),
        (format!("{base}/a%4"), true, true),
        (format!("{base}/%%41"), false, false),
    ] {
        let target = Target::parse(&url).unwrap_or_else(|e| panic!("{url}: {e}"));
        assert_eq!(target.origin(), &server.origin("a.test"), "{url}");
        for (profile, expect) in
            [(Profile::Google, google), (Profile::Rfc, rfc), (Profile::Conservative, google && rfc)]
        {
            let d = p.decide_with(target.origin(), target.path(), AGENT.into(), profile);
            let d = bounded(&format!("{profile} {url}"), d).await;
            assert_eq!(d.allowed, expect, "{profile} {url}: {d}");
        }
    }
    assert_eq!(server.hits(ROBOTS), 1);
    let refused = Target::parse(&format!("{}/x", base.replace("http://", "//"))).unwrap_err();
    assert_eq!(refused.to_string(), "no scheme: not an absolute URL (an http:// or https:// URL is needed)");
}

#[tokio::test]
async fn unavailable_robots_txt_allows_all_and_is_cached() {
    for status in [401, 403, 404, 410] {
        let server =
            TestOrigin::start([(ROBOTS, Reply::status(status).body("User-agent: *\nDisallow: /\n"))]).await;
        let origin = server.origin("a.test");
        let p = policy(PolicyConfig::default());
        for path in ["/", "/private/x", "/anything?at=all"] {
            let d = decide(&p, &origin, path).await;
            assert!(d.allowed, "{status} {path}");
            assert_eq!(d.reason, Reason::Unavailable { status }, "{status} {path}");
            assert_eq!(d.reason.class(), "robots-unavailable");
            assert_eq!(d.fetch_facts().unwrap().status, Some(status));
            assert!(d.failure.is_none());
        }
        assert_eq!(server.hits(ROBOTS), 1, "{status} is cached like a file");
    }
}

#[tokio::test]
async fn unreachable_robots_txt_disallows_all() {
    for status in [429, 500, 503] {
        let server = TestOrigin::start([(ROBOTS, Reply::status(status))]).await;
        let origin = server.origin("a.test");
        let p = policy(PolicyConfig::default());
        for path in ["/", "/public/x"] {
            let d = decide(&p, &origin, path).await;
            assert!(!d.allowed, "{status} {path}");
            assert_eq!(unreachable_cause(&d), &Unreachable::Status(status));
            assert_eq!(d.reason.class(), "robots-unreachable");
            assert!(d.robots.is_none());
            let failure = d.failure.as_ref().expect("the failure");
            assert_eq!(failure.cause, Unreachable::Status(status));
            assert_eq!(failure.streak, 1);
            assert_eq!(d.fetch_facts().unwrap().status, Some(status));
            assert!(d.to_string().contains("disallow all"), "{d}");
        }
        // The second decision waited for the retry instead of asking again.
        assert_eq!(server.hits(ROBOTS), 1, "{status}");
    }
}

#[tokio::test]
async fn a_redirect_without_location_disallows_all() {
    let server = TestOrigin::start([(ROBOTS, Reply::status(302))]).await;
    let p = policy(PolicyConfig::default());
    let d = decide(&p, &server.origin("a.test"), "/x").await;
    assert!(!d.allowed);
    assert!(matches!(unreachable_cause(&d), Unreachable::BadRedirect(_)), "{:?}", d.reason);
}

#[tokio::test]
async fn network_failures_disallow_all() {
    let p = policy(PolicyConfig::default());

    let reset = TestOrigin::start([(ROBOTS, Reply::reset())]).await;
    let d = decide(&p, &reset.origin("a.test"), "/x").await;
    assert!(!d.allowed);
    assert!(matches!(unreachable_cause(&d), Unreachable::Protocol(_)), "{:?}", d.reason);

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let refused = Origin::parse(&format!("http://b.test:{port}/")).unwrap();
    let d = decide(&p, &refused, "/x").await;
    assert!(!d.allowed);
    assert!(
        matches!(unreachable_cause(&d), Unreachable::Connect(ConnectError::Connect { .. })),
        "{:?}",
        d.reason
    );

    let nowhere = Origin::parse("http://nonexistent.invalid/").unwrap();
    let d = decide(&p, &nowhere, "/x").await;
    assert!(!d.allowed);
    assert!(
        matches!(unreachable_cause(&d), Unreachable::Connect(ConnectError::Dns { .. })),
        "{:?}",
        d.reason
    );
}

#[tokio::test(start_paused = true)]
async fn headers_that_never_come_disallow_all() {
    // The origin never answers, so the paused clock jumps to the header timeout; the
    // connect timeout is longer, so even a jump while connecting ends there.
    let server = TestOrigin::start([(ROBOTS, Reply::ok("User-agent: *\n").wait_forever())]).await;
    let config = FetchConfig { header_timeout: secs(5), ..fetch_config() };
    let fetcher = Fetcher::new(support::connector(support::loopback_guard(), secs(60)), config);
    let p = RobotsPolicy::new(fetcher, PolicyConfig::default());
    let d = decide(&p, &server.origin("a.test"), "/x").await;
    assert!(!d.allowed);
    assert_eq!(unreachable_cause(&d), &Unreachable::HeaderTimeout(secs(5)));
}

#[tokio::test]
async fn a_stalled_body_disallows_all() {
    let body = "User-agent: *\nAllow: /\n".repeat(200);
    let server = TestOrigin::start([(ROBOTS, Reply::ok(body).stall_after(1000))]).await;
    let config = FetchConfig { body_timeout: Duration::from_millis(200), ..fetch_config() };
    let p = RobotsPolicy::new(fetcher_with(config), PolicyConfig::default());
    let d = decide(&p, &server.origin("a.test"), "/x").await;
    assert!(!d.allowed);
    assert_eq!(unreachable_cause(&d), &Unreachable::BodyTimeout(Duration::from_millis(200)));
}

// ---------------------------------------------------------------------------------------
// Redirects
// ---------------------------------------------------------------------------------------

/// `/robots.txt → /r1 → … → /r{hops}` on `server` under the name `host`.
fn chain(server: &TestOrigin, host: &str, hops: usize, robots: &str) {
    let name = |i: usize| if i == 0 { ROBOTS.to_owned() } else { format!("/r{i}") };
    for i in 0..hops {
        server.route(&name(i), Reply::redirect(301, &format!("{}{}", server.base_as(host), name(i + 1))));
    }
    server.route(&name(hops), Reply::ok(robots.to_owned()));
}

#[tokio::test]
async fn redirected_rules_apply_to_the_original_origin() {
    for hops in [1, 5] {
        let server = TestOrigin::start([]).await;
        chain(&server, "a.test", hops, "User-agent: *\nDisallow: /secret\n");
        let origin = server.origin("a.test");
        let p = policy(PolicyConfig::default());
        let d = decide(&p, &origin, "/secret/x").await;
        assert!(!d.allowed, "{hops} hops");
        assert!(is_rule(&d, RuleKind::Disallow, 2));
        assert_eq!(*d.origin, origin);
        let facts = d.fetch_facts().unwrap();
        assert_eq!(facts.redirects as usize, hops);
        assert_eq!(facts.url, origin.robots_url());
        assert_eq!(facts.final_url, format!("{}/r{hops}", server.base_as("a.test")));
        assert!(decide(&p, &origin, "/open").await.allowed);
        // The redirect target's path is just another path of this origin.
        assert!(decide(&p, &origin, &format!("/r{hops}")).await.allowed);
        assert_eq!(server.total_hits(), hops + 1, "{hops} hops, one fetch");
    }
}

#[tokio::test]
async fn a_redirect_to_another_host_gives_the_original_origin_its_rules() {
    let b = TestOrigin::robots("User-agent: *\nDisallow: /from-b\n").await;
    let a =
        TestOrigin::start([(ROBOTS, Reply::redirect(302, &format!("{}/robots.txt", b.base_as("b.test"))))])
            .await;
    let a_origin = a.origin("a.test");
    let b_origin = b.origin("b.test");
    let p = policy(PolicyConfig::default());

    let d = decide(&p, &a_origin, "/from-b/x").await;
    assert!(!d.allowed);
    assert_eq!(*d.origin, a_origin);
    assert_eq!(d.fetch_facts().unwrap().final_url, b_origin.robots_url());
    assert_eq!((a.hits(ROBOTS), b.hits(ROBOTS)), (1, 1));

    // b.test is an origin of its own: its robots.txt is fetched (and cached) separately.
    let d = decide(&p, &b_origin, "/from-b/x").await;
    assert!(!d.allowed);
    assert_eq!(*d.origin, b_origin);
    assert_eq!(d.fetch_facts().unwrap().redirects, 0);
    assert_eq!((a.hits(ROBOTS), b.hits(ROBOTS)), (1, 2));
    decide(&p, &a_origin, "/y").await;
    decide(&p, &b_origin, "/y").await;
    assert_eq!((a.hits(ROBOTS), b.hits(ROBOTS)), (1, 2));
}

#[tokio::test]
async fn too_many_redirects_allow_all_and_are_cached() {
    let server = TestOrigin::start([]).await;
    chain(&server, "a.test", 6, "User-agent: *\nDisallow: /\n");
    let p = policy(PolicyConfig::default());
    let origin = server.origin("a.test");
    let d = decide(&p, &origin, "/anything").await;
    assert!(d.allowed);
    assert_eq!(d.reason, Reason::TooManyRedirects);
    assert_eq!(d.reason.class(), "robots-redirect-limit");
    assert_eq!(d.fetch_facts().unwrap().redirects, 5);
    // The redirect that was one too many: its status is the copy's (the audit log's `status`).
    assert_eq!(d.fetch_facts().unwrap().status, Some(301), "{d:?}");
    assert_eq!(server.hits("/r6"), 0);
    assert!(decide(&p, &origin, "/more").await.allowed);
    assert_eq!(server.total_hits(), 6, "one fetch of six requests");
}

#[tokio::test]
async fn a_redirect_loop_allows_all() {
    let server = TestOrigin::start([]).await;
    server.route(ROBOTS, Reply::redirect(301, "/a"));
    server.route("/a", Reply::redirect(301, "/robots.txt"));
    let p = policy(PolicyConfig::default());
    let d = decide(&p, &server.origin("a.test"), "/x").await;
    assert!(d.allowed);
    assert_eq!(d.reason, Reason::TooManyRedirects);
}

// ---------------------------------------------------------------------------------------
// Bodies
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn rules_past_500_kib_are_ignored() {
    let body = support::sized_body(
        1024 * 1024,
        &[
            (0, "User-agent: *\nDisallow: /early\n"),
            (400 * 1024, "Disallow: /middle\n"),
            (600 * 1024, "Disallow: /late\n"),
        ],
    );
    let server = TestOrigin::start([(ROBOTS, Reply::ok(body))]).await;
    let origin = server.origin("a.test");
    let p = policy(PolicyConfig::default());
    let d = decide(&p, &origin, "/early").await;
    assert!(!d.allowed);
    let facts = d.fetch_facts().unwrap();
    assert_eq!(facts.bytes, LIMIT);
    assert!(facts.truncated);
    assert!(!decide(&p, &origin, "/middle").await.allowed, "a rule before the cut applies");
    let late = decide(&p, &origin, "/late").await;
    assert!(late.allowed, "a rule after the cut is ignored");
    assert_eq!(late.reason, Reason::NoRuleMatched);
}

/// A file whose 500 KiB limit falls inside `Disallow: /private`, after `Disallow: /p`: the
/// line is dropped, not read as the rule `Disallow: /p` nobody wrote (before: /public was
/// refused by it), and the decisions it may have changed say so.
#[tokio::test]
async fn a_line_the_limit_cuts_is_no_rule() {
    let mut body = b"User-agent: *\nDisallow: /nothing\n".to_vec();
    body.resize(LIMIT - "Disallow: /p".len(), b'\n');
    body.extend_from_slice(b"Disallow: /private\nDisallow: /late\n");
    let server = TestOrigin::start([(ROBOTS, Reply::ok(body))]).await;
    let origin = server.origin("a.test");
    let p = policy(PolicyConfig::default());
    let public = decide(&p, &origin, "/public").await;
    assert!(public.allowed, "{public}");
    assert!(public.fetch_facts().unwrap().truncated);
    let private = decide(&p, &origin, "/private/x").await;
    assert!(private.allowed, "the cut line is dropped whole: {private}");
    let cut = private.notes.as_ref().and_then(|n| n.cut_line).expect("the cut line may have mattered");
    assert!(private.to_string().contains(&format!("line {cut}, cut by the limit and dropped")), "{private}");
    assert!(decide(&p, &origin, "/x").await.notes.is_none(), "/x: no rule starting \"/p\" matches it");
}

#[tokio::test]
async fn encoded_files_are_obeyed() {
    let robots = "User-agent: *\nDisallow: /private\nAllow: /private/press\n";
    for encoding in ["gzip", "deflate", "br"].into_iter().filter(|e| cfg!(feature = "brotli") || *e != "br") {
        let encoded = support::encode(encoding, robots.as_bytes()).await;
        let server =
            TestOrigin::start([(ROBOTS, Reply::ok(encoded).header("content-encoding", encoding))]).await;
        let origin = server.origin("a.test");
        let p = policy(PolicyConfig::default());
        let d = decide(&p, &origin, "/private/x").await;
        assert!(!d.allowed, "{encoding}");
        assert!(is_rule(&d, RuleKind::Disallow, 2), "{encoding}: {:?}", d.reason);
        assert!(decide(&p, &origin, "/private/press/1").await.allowed, "{encoding}");
    }
}

#[tokio::test]
async fn a_gzip_bomb_is_a_cut_file_not_a_failure() {
    let mut plain = b"User-agent: *\nDisallow: /bomb\n".to_vec();
    plain.resize(20 * 1024 * 1024, b'\n');
    let bomb = support::encode("gzip", &plain).await;
    let server = TestOrigin::start([(ROBOTS, Reply::ok(bomb).header("content-encoding", "gzip"))]).await;
    let p = policy(PolicyConfig::default());
    let d = decide(&p, &server.origin("a.test"), "/bomb").await;
    assert!(!d.allowed);
    let facts = d.fetch_facts().unwrap();
    assert_eq!(facts.bytes, LIMIT);
    assert!(facts.truncated);
}

#[tokio::test]
async fn an_unsupported_encoding_disallows_all() {
    let server = TestOrigin::start([(
        ROBOTS,
        Reply::ok("User-agent: *\nAllow: /\n").header("content-encoding", "zstd"),
    )])
    .await;
    let p = policy(PolicyConfig::default());
    let d = decide(&p, &server.origin("a.test"), "/x").await;
    assert!(!d.allowed);
    assert!(matches!(unreachable_cause(&d), Unreachable::Decode(_)), "{:?}", d.reason);
}

#[tokio::test]
async fn invalid_utf8_does_not_hide_the_rules_around_it() {
    let body = b"User-agent: *\nDisallow: /before\n\xff\xfe\xfd garbage \xc3\x28\nDisallow: /bad\xff\nDisallow: /after\n\x80\x81\nAllow: /after/ok\n";
    let server = TestOrigin::start([(ROBOTS, Reply::ok(body.to_vec()))]).await;
    let origin = server.origin("a.test");
    let p = policy(PolicyConfig::default());
    assert!(!decide(&p, &origin, "/before/x").await.allowed);
    assert!(!decide(&p, &origin, "/after/x").await.allowed);
    assert!(decide(&p, &origin, "/after/ok").await.allowed);
    assert!(decide(&p, &origin, "/elsewhere").await.allowed);
}

// ---------------------------------------------------------------------------------------
// Freshness: max-age, stale-while-revalidate
// ---------------------------------------------------------------------------------------

fn ttl_config() -> PolicyConfig {
    PolicyConfig { default_ttl: secs(600), min_ttl: secs(60), max_ttl: secs(3600), ..PolicyConfig::default() }
}

#[tokio::test]
async fn max_age_is_honoured_then_one_background_refresh_serves_the_new_file() {
    let v1 = Reply::ok("User-agent: *\nDisallow: /v1\n").header("cache-control", "max-age=120");
    let server = TestOrigin::start([(ROBOTS, v1)]).await;
    let origin = server.origin("a.test");
    let p = policy(ttl_config());
    assert!(!decide(&p, &origin, "/v1").await.allowed);
    assert_eq!(server.hits(ROBOTS), 1);

    // The origin changes its file; the cached copy stays fresh for 120 s.
    let gate = Gate::new();
    let v2 =
        Reply::ok("User-agent: *\nDisallow: /v2\n").header("cache-control", "max-age=120").wait_gate(&gate);
    server.route(ROBOTS, v2);
    advance(secs(119)).await;
    let d = decide(&p, &origin, "/v1").await;
    assert!(!d.allowed && !d.stale);
    assert!(d.age.unwrap() >= secs(119));
    settle().await;
    assert_eq!(server.hits(ROBOTS), 1, "fresh: no refresh");

    // Past it: the stale copy answers at once while one refresh runs (held at the gate).
    advance(secs(2)).await;
    for _ in 0..20 {
        let d = decide(&p, &origin, "/v1").await;
        assert!(!d.allowed, "the old rules still decide");
        assert!(d.stale);
        assert!(d.failure.is_none());
        assert!(d.to_string().ends_with("[stale copy, refreshing]"), "{d}");
        assert!(decide(&p, &origin, "/v2").await.allowed);
    }
    server.wait_hits(ROBOTS, 2).await;
    settle().await;
    assert!(decide(&p, &origin, "/v1").await.stale, "the refresh is still held");
    assert_eq!(server.hits(ROBOTS), 2, "exactly one background refresh");

    gate.open();
    let d = decide_until(&p, &origin, "/v2", "the refresh to land", |d| !d.stale).await;
    assert!(!d.allowed, "the new rules decide");
    assert!(d.age.unwrap() < secs(5));
    assert!(decide(&p, &origin, "/v1").await.allowed);
    settle().await;
    assert_eq!(server.hits(ROBOTS), 2);
}

/// Asserts that a copy served with `reply` is fresh for `ttl` (checked a second before
/// and after), then refreshed exactly once.
async fn assert_fresh_for(reply: Reply, config: PolicyConfig, ttl: Duration) {
    let what = format!("{:?} -> {ttl:?}", reply.headers);
    let server = TestOrigin::start([(ROBOTS, reply)]).await;
    let origin = server.origin("a.test");
    let p = policy(config);
    assert!(!decide(&p, &origin, "/x").await.allowed);
    advance(ttl - secs(1)).await;
    assert!(!decide(&p, &origin, "/x").await.stale, "{what}: fresh before");
    settle().await;
    assert_eq!(server.hits(ROBOTS), 1, "{what}");
    advance(secs(2)).await;
    assert!(decide(&p, &origin, "/x").await.stale, "{what}: stale after");
    server.wait_hits(ROBOTS, 2).await;
    decide_until(&p, &origin, "/x", "the refresh to land", |d| !d.stale).await;
    settle().await;
    assert_eq!(server.hits(ROBOTS), 2, "{what}");
}

#[tokio::test]
async fn max_age_is_clamped_and_defaults_apply() {
    let file = || Reply::ok("User-agent: *\nDisallow: /x\n");
    // min_ttl 60 s, max_ttl 1 h, default 10 min.
    assert_fresh_for(file().header("cache-control", "max-age=120"), ttl_config(), secs(120)).await;
    assert_fresh_for(file().header("cache-control", "max-age=5"), ttl_config(), secs(60)).await;
    assert_fresh_for(file().header("cache-control", "no-store"), ttl_config(), secs(60)).await;
    assert_fresh_for(file().header("cache-control", "max-age=999999"), ttl_config(), secs(3600)).await;
    assert_fresh_for(file(), ttl_config(), secs(600)).await;
    // The spec's defaults: 24 h without max-age, and never more than 24 h.
    assert_fresh_for(file(), PolicyConfig::default(), secs(24 * 3600)).await;
    assert_fresh_for(
        file().header("cache-control", "max-age=31536000"),
        PolicyConfig::default(),
        secs(24 * 3600),
    )
    .await;
}

#[tokio::test]
async fn unavailable_copies_expire_too() {
    let server =
        TestOrigin::start([(ROBOTS, Reply::status(404).header("cache-control", "max-age=120"))]).await;
    let origin = server.origin("a.test");
    let p = policy(ttl_config());
    assert!(decide(&p, &origin, "/x").await.allowed);
    server.route(ROBOTS, Reply::ok("User-agent: *\nDisallow: /x\n"));
    advance(secs(121)).await;
    let d = decide(&p, &origin, "/x").await;
    assert!(d.allowed && d.stale, "the old answer serves while refreshing");
    server.wait_hits(ROBOTS, 2).await;
    let d = decide_until(&p, &origin, "/x", "the refresh to land", |d| !d.stale).await;
    assert!(!d.allowed, "now a file with rules");
}

// ---------------------------------------------------------------------------------------
// Failures: stale-if-error, backoff, Retry-After
// ---------------------------------------------------------------------------------------

fn failure_config() -> PolicyConfig {
    PolicyConfig {
        stale_if_error: secs(3600),
        retry_min: secs(60),
        retry_busy: secs(15),
        retry_max: secs(600),
        ..ttl_config()
    }
}

#[tokio::test]
async fn stale_if_error_keeps_the_last_good_copy_then_disallows_all() {
    let good = Reply::ok("User-agent: *\nDisallow: /private\n").header("cache-control", "max-age=120");
    let server = TestOrigin::start([(ROBOTS, good)]).await;
    let origin = server.origin("a.test");
    let p = policy(failure_config());
    assert!(!decide(&p, &origin, "/private").await.allowed);

    // The origin breaks. After expiry the copy is served and one refresh fails.
    server.route(ROBOTS, Reply::status(503));
    advance(secs(121)).await;
    assert!(decide(&p, &origin, "/public").await.stale);
    server.wait_hits(ROBOTS, 2).await;
    let d = decide_until(&p, &origin, "/private", "the failed refresh", |d| d.failure.is_some()).await;
    assert!(!d.allowed, "the old copy still disallows /private");
    assert!(d.stale);
    assert!(is_rule(&d, RuleKind::Disallow, 2));
    let failure = d.failure.as_ref().unwrap();
    assert_eq!(failure.cause, Unreachable::Status(503));
    assert_eq!(failure.streak, 1);
    assert!(d.robots.is_some());
    assert_eq!(d.fetch_facts().unwrap().status, Some(200), "the facts are the copy's");
    assert!(d.to_string().contains("[stale copy: refresh failed: HTTP status 503]"), "{d}");
    let d = decide(&p, &origin, "/public").await;
    assert!(d.allowed && d.stale && d.failure.is_some(), "the old copy still allows /public");

    // 503: the next try after retry_busy (15 s), not before.
    advance(secs(10)).await;
    assert!(decide(&p, &origin, "/public").await.allowed);
    settle().await;
    assert_eq!(server.hits(ROBOTS), 2);
    advance(secs(6)).await;
    decide(&p, &origin, "/public").await;
    server.wait_hits(ROBOTS, 3).await;
    let d = decide_until(&p, &origin, "/public", "the second failure", |d| {
        d.failure.as_ref().is_some_and(|f| f.streak == 2)
    })
    .await;
    assert!(d.allowed && d.stale);

    // An hour after expiry the copy is no longer used: disallow all.
    advance(secs(3600)).await;
    let d = decide(&p, &origin, "/public").await;
    assert!(!d.allowed);
    assert!(!d.stale);
    assert!(d.robots.is_none());
    assert_eq!(unreachable_cause(&d), &Unreachable::Status(503));
    assert_eq!(d.failure.as_ref().unwrap().streak, 3);
    assert_eq!(server.hits(ROBOTS), 4);

    // The origin recovers: the next due retry brings the new file.
    server.route(ROBOTS, Reply::ok("User-agent: *\nDisallow: /new\n"));
    advance(secs(601)).await;
    let d = decide(&p, &origin, "/public").await;
    assert!(d.allowed && !d.stale && d.failure.is_none());
    assert!(!decide(&p, &origin, "/new").await.allowed);
    assert_eq!(server.hits(ROBOTS), 5);
}

#[tokio::test]
async fn without_a_good_copy_retries_back_off() {
    let server = TestOrigin::start([(ROBOTS, Reply::status(500))]).await;
    let origin = server.origin("a.test");
    let p = policy(failure_config());
    let d = decide(&p, &origin, "/x").await;
    assert!(!d.allowed);
    assert_eq!(d.failure.as_ref().unwrap().streak, 1);
    assert_eq!(server.hits(ROBOTS), 1);

    // retry_min (60 s), doubling per failure, up to retry_max (600 s).
    let mut expected = 1;
    for delay in [60, 120, 240, 480, 600, 600] {
        advance(secs(delay - 1)).await;
        let d = decide(&p, &origin, "/x").await;
        assert!(!d.allowed);
        assert_eq!(server.hits(ROBOTS), expected, "not before {delay} s");
        advance(secs(2)).await;
        let d = decide(&p, &origin, "/x").await;
        expected += 1;
        assert!(!d.allowed);
        assert_eq!(server.hits(ROBOTS), expected, "after {delay} s");
        assert_eq!(d.failure.as_ref().unwrap().streak as usize, expected);
    }

    // Recovery.
    server.route(ROBOTS, Reply::ok("User-agent: *\nDisallow: /y\n"));
    advance(secs(601)).await;
    let d = decide(&p, &origin, "/x").await;
    assert!(d.allowed && d.failure.is_none());
    assert!(!decide(&p, &origin, "/y").await.allowed);
}

/// The origin answers `reply` (a failure): it is not asked again within `quiet`, and is
/// asked again a second after.
async fn assert_retry_after(reply: Reply, quiet: Duration) {
    let what = format!("{} {:?}", reply.status, reply.headers);
    let server = TestOrigin::start([(ROBOTS, reply)]).await;
    let origin = server.origin("a.test");
    let p = policy(failure_config());
    assert!(!decide(&p, &origin, "/x").await.allowed);
    advance(quiet - secs(1)).await;
    assert!(!decide(&p, &origin, "/x").await.allowed);
    assert_eq!(server.hits(ROBOTS), 1, "{what}: not asked within {quiet:?}");
    advance(secs(2)).await;
    assert!(!decide(&p, &origin, "/x").await.allowed);
    assert_eq!(server.hits(ROBOTS), 2, "{what}: asked after {quiet:?}");
}

#[tokio::test]
async fn busy_answers_are_retried_sooner_and_retry_after_is_honoured_within_bounds() {
    // retry_busy 15 s, retry_min 60 s, retry_max 600 s.
    assert_retry_after(Reply::status(503), secs(15)).await;
    assert_retry_after(Reply::status(429), secs(15)).await;
    assert_retry_after(Reply::status(500), secs(60)).await;
    assert_retry_after(Reply::status(429).header("retry-after", "30"), secs(30)).await;
    assert_retry_after(Reply::status(503).header("retry-after", "120"), secs(120)).await;
    // Too soon is raised to retry_busy, too late is cut to retry_max.
    assert_retry_after(Reply::status(429).header("retry-after", "1"), secs(15)).await;
    assert_retry_after(Reply::status(429).header("retry-after", "100000"), secs(600)).await;
    // Retry-After means nothing on a 500.
    assert_retry_after(Reply::status(500).header("retry-after", "30"), secs(60)).await;
}

#[tokio::test]
async fn a_due_retry_is_one_fetch_however_many_decisions_wait() {
    let server = TestOrigin::start([(ROBOTS, Reply::status(500))]).await;
    let origin = server.origin("a.test");
    let p = policy(failure_config());
    assert!(!decide(&p, &origin, "/x").await.allowed);

    let gate = Gate::new();
    server.route(ROBOTS, Reply::ok("User-agent: *\nDisallow: /x\n").wait_gate(&gate));
    advance(secs(61)).await;
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..100 {
        let (p, origin) = (p.clone(), origin.clone());
        tasks.spawn(async move { p.decide(&origin, &format!("/x/{i}"), AGENT.into()).await });
    }
    server.wait_hits(ROBOTS, 2).await;
    settle().await;
    gate.open();
    let results = bounded("100 decisions", tasks.join_all()).await;
    assert!(
        results.iter().all(|d| !d.allowed && matches!(d.reason, Reason::Rule { .. })),
        "all see the new file"
    );
    assert_eq!(server.hits(ROBOTS), 2);
}

#[tokio::test]
async fn many_decisions_on_an_expired_copy_start_one_refresh() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /old\n").await;
    let origin = server.origin("a.test");
    let p = policy(ttl_config());
    assert!(!decide(&p, &origin, "/old").await.allowed);
    let gate = Gate::new();
    server.route(ROBOTS, Reply::ok("User-agent: *\nDisallow: /new\n").wait_gate(&gate));
    advance(secs(601)).await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..100 {
        let (p, origin) = (p.clone(), origin.clone());
        tasks.spawn(async move { p.decide(&origin, "/old", AGENT.into()).await });
    }
    // None of them waits for the refresh, which is held at the origin.
    let results = bounded("100 stale decisions", tasks.join_all()).await;
    assert!(results.iter().all(|d| d.stale && !d.allowed));
    server.wait_hits(ROBOTS, 2).await;
    gate.open();
    let d = decide_until(&p, &origin, "/new", "the refresh to land", |d| !d.stale).await;
    assert!(!d.allowed);
    settle().await;
    assert_eq!(server.hits(ROBOTS), 2);
}

// ---------------------------------------------------------------------------------------
// One fetch per origin
// ---------------------------------------------------------------------------------------

async fn thousand_cold_decisions(reply: Reply, check: fn(usize, &Decision)) {
    let gate = Gate::new();
    let server = TestOrigin::start([(ROBOTS, reply.wait_gate(&gate))]).await;
    let origin = server.origin("a.test");
    let p = policy(PolicyConfig::default());
    let started = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..1000 {
        let (p, origin, started) = (p.clone(), origin.clone(), started.clone());
        tasks.spawn(async move {
            let path = if i % 2 == 0 { format!("/private/{i}") } else { format!("/public/{i}") };
            started.fetch_add(1, Ordering::SeqCst);
            (i, p.decide(&origin, &path, AGENT.into()).await)
        });
    }
    // Hold the one fetch at the origin until every decision has started.
    server.wait_hits(ROBOTS, 1).await;
    support::until("1,000 decisions to start", || started.load(Ordering::SeqCst) == 1000).await;
    gate.open();
    let results = bounded("1,000 decisions", tasks.join_all()).await;
    assert_eq!(results.len(), 1000);
    for (i, d) in &results {
        check(*i, d);
    }
    assert_eq!(server.hits(ROBOTS), 1, "exactly one robots.txt request");
    assert_eq!(server.total_hits(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_decisions_for_a_cold_origin_make_one_fetch() {
    thousand_cold_decisions(Reply::ok("User-agent: *\nDisallow: /private\n"), |i, d| {
        assert_eq!(d.allowed, i % 2 == 1, "decision {i}: {d}");
        assert!(!d.stale);
        assert_eq!(d.fetch_facts().unwrap().status, Some(200));
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_thousand_concurrent_decisions_for_a_failing_origin_make_one_fetch() {
    thousand_cold_decisions(Reply::status(503), |i, d| {
        assert!(!d.allowed, "decision {i}");
        assert!(
            matches!(&d.reason, Reason::Unreachable { cause: Unreachable::Status(503) }),
            "decision {i}: {d}"
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn origins_do_not_wait_for_each_other() {
    // One origin hangs; another is decided meanwhile.
    let gate = Gate::new();
    let slow = TestOrigin::start([(ROBOTS, Reply::ok("User-agent: *\n").wait_gate(&gate))]).await;
    let fast = TestOrigin::robots("User-agent: *\nDisallow: /x\n").await;
    let p = policy(PolicyConfig::default());
    let slow_task = {
        let (p, origin) = (p.clone(), slow.origin("a.test"));
        tokio::spawn(async move { p.decide(&origin, "/x", AGENT.into()).await })
    };
    slow.wait_hits(ROBOTS, 1).await;
    assert!(!decide(&p, &fast.origin("b.test"), "/x").await.allowed);
    gate.open();
    assert!(bounded("slow origin", slow_task).await.unwrap().allowed);
}

// ---------------------------------------------------------------------------------------
// Cache bounds
// ---------------------------------------------------------------------------------------

#[tokio::test]
async fn the_cache_is_bounded_by_entries_and_evicted_origins_are_fetched_again() {
    let mut servers = Vec::new();
    for _ in 0..10 {
        servers.push(TestOrigin::robots("User-agent: *\nDisallow: /x\n").await);
    }
    let origins: Vec<Origin> =
        servers.iter().enumerate().map(|(i, s)| s.origin(&format!("o{i}.test"))).collect();
    let p = policy(PolicyConfig { max_entries: 3, ..PolicyConfig::default() });
    for o in &origins {
        assert!(!decide(&p, o, "/x").await.allowed);
    }
    for s in &servers {
        assert_eq!(s.hits(ROBOTS), 1);
    }
    p.sync().await;
    let cached = p.cached_origins();
    assert!((1..=3).contains(&cached), "{cached} origins cached, at most 3 allowed");

    // At most 3 origins can still be cached; every other one is fetched again.
    for o in &origins {
        assert!(!decide(&p, o, "/x").await.allowed);
    }
    let refetched = servers.iter().filter(|s| s.hits(ROBOTS) == 2).count();
    assert!(refetched >= 7, "{refetched} evicted origins fetched again");
    assert!(servers.iter().all(|s| s.hits(ROBOTS) <= 2));
    p.sync().await;
    assert!(p.cached_origins() <= 3);
}

#[tokio::test]
async fn an_origin_nothing_asks_about_leaves_the_cache_after_max_idle() {
    let busy = TestOrigin::robots("User-agent: *\nDisallow: /x\n").await;
    let idle = TestOrigin::robots("User-agent: *\nDisallow: /x\n").await;
    let (busy_o, idle_o) = (busy.origin("a.test"), idle.origin("b.test"));
    let max_idle = Duration::from_millis(300);
    let p = policy(PolicyConfig { max_idle, ..PolicyConfig::default() });
    let kept = policy(PolicyConfig::default());
    for policy in [&p, &kept] {
        assert!(!decide(policy, &busy_o, "/x").await.allowed);
        assert!(!decide(policy, &idle_o, "/x").await.allowed);
    }
    // One origin stays asked about; the other is left alone until it is gone (moka's clock
    // is its own: the wait is on the cache's own count, bounded).
    bounded("the idle origin leaves the cache", async {
        loop {
            assert!(!decide(&p, &busy_o, "/x").await.allowed);
            p.sync().await;
            if p.cached_origins() == 1 {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    // Asked about again, it is fetched again; the one in use never was.
    assert!(!decide(&p, &idle_o, "/x").await.allowed);
    assert_eq!((busy.hits(ROBOTS), idle.hits(ROBOTS)), (2, 3), "busy: once per policy; idle: twice by `p`");
    // Without a short max_idle (the default is an hour) both stay.
    kept.sync().await;
    assert_eq!(kept.cached_origins(), 2);
}

#[tokio::test]
async fn the_cache_is_bounded_by_bytes() {
    // Files of some 5 KiB (about 35 KB once parsed) against a 128 KiB budget.
    let mut robots = String::from("User-agent: *\n");
    for i in 0..200 {
        robots.push_str(&format!("Disallow: /dir{i}/file\n"));
    }
    let mut servers = Vec::new();
    for _ in 0..8 {
        servers.push(TestOrigin::robots(&robots).await);
    }
    let max_bytes = 128 * 1024;
    let p = policy(PolicyConfig { max_bytes, ..PolicyConfig::default() });
    for (i, s) in servers.iter().enumerate() {
        assert!(!decide(&p, &s.origin(&format!("o{i}.test")), "/dir7/file").await.allowed);
    }
    p.sync().await;
    assert!(p.cached_bytes() <= max_bytes, "{} bytes cached, budget {max_bytes}", p.cached_bytes());
    let cached = p.cached_origins();
    assert!((1..=3).contains(&cached), "{cached} origins cached");
    // An evicted origin is fetched again.
    for (i, s) in servers.iter().enumerate() {
        decide(&p, &s.origin(&format!("o{i}.test")), "/dir7/file").await;
    }
    assert!(servers.iter().filter(|s| s.hits(ROBOTS) == 2).count() >= 5);
}

// ---------------------------------------------------------------------------------------
// Overrides and /robots.txt
// ---------------------------------------------------------------------------------------

fn rule(hosts: &str, action: OverrideAction, reason: &str, expires: Option<SystemTime>) -> Override {
    Override { hosts: HostPattern::parse(hosts).unwrap(), action, reason: reason.into(), expires }
}

#[tokio::test]
async fn overrides_decide_before_robots_txt() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let now = SystemTime::now();
    let overrides = vec![
        rule("a.test", OverrideAction::Deny, "legal hold", None),
        rule("*.example.test", OverrideAction::Allow, "partner agreement", Some(now + secs(3600))),
        rule("b.test", OverrideAction::Deny, "expired hold", Some(now - secs(1))),
        rule("c.test", OverrideAction::Allow, "expired permission", Some(now - secs(1))),
        rule("c.test", OverrideAction::Deny, "later rule, never reached", Some(now - secs(1))),
    ];
    let p = policy(PolicyConfig { overrides, ..PolicyConfig::default() });

    // Exact deny: no fetch, the reason recorded.
    let d = decide(&p, &server.origin("a.test"), "/anything").await;
    assert!(!d.allowed);
    assert_eq!(
        d.reason,
        Reason::Override {
            action: OverrideAction::Deny,
            hosts: "a.test".into(),
            reason: "legal hold".into()
        }
    );
    assert_eq!(d.reason.class(), "override");
    assert_eq!(d.to_string(), "override: deny a.test (legal hold)");
    assert!(d.robots.is_none() && d.fetch_facts().is_none());

    // Wildcard allow, for subdomains only, though robots.txt disallows everything.
    for host in ["www.example.test", "shop.example.test"] {
        let d = decide(&p, &server.origin(host), "/private").await;
        assert!(d.allowed, "{host}");
        match &d.reason {
            Reason::Override { action: OverrideAction::Allow, hosts, reason } => {
                assert_eq!(hosts, "*.example.test");
                assert_eq!(&**reason, "partner agreement");
            }
            other => panic!("{host}: {other:?}"),
        }
    }
    assert_eq!(server.total_hits(), 0, "overridden origins are not fetched");

    // Not covered by the wildcard, and expired overrides: robots.txt decides.
    for host in ["example.test", "b.test", "c.test"] {
        let d = decide(&p, &server.origin(host), "/private").await;
        assert!(!d.allowed, "{host}");
        assert!(is_rule(&d, RuleKind::Disallow, 2), "{host}: {:?}", d.reason);
    }
    assert_eq!(server.hits(ROBOTS), 3);
    let hosts: Vec<String> =
        server.seen().iter().map(|s| s.headers["host"].to_str().unwrap().to_owned()).collect();
    let port = server.port();
    assert_eq!(hosts, [format!("example.test:{port}"), format!("b.test:{port}"), format!("c.test:{port}")]);
}

#[tokio::test]
async fn overrides_apply_to_fully_qualified_names_too() {
    // `a.test.` is `a.test` written as a fully qualified name: a deny for `a.test` must not
    // be sidestepped with a trailing dot (nor an allow for `*.example.test` be lost).
    let server = TestOrigin::robots("User-agent: *\nDisallow: /private\n").await;
    let overrides = vec![
        rule("a.test", OverrideAction::Deny, "legal hold", None),
        rule("*.example.test", OverrideAction::Allow, "partner agreement", None),
        rule("c.test.", OverrideAction::Deny, "written fully qualified", None),
    ];
    let p = policy(PolicyConfig { overrides, ..PolicyConfig::default() });
    let fqdn = |host: &str| Origin::parse(&format!("http://{host}:{}/", server.port())).unwrap();
    let d = decide(&p, &fqdn("a.test."), "/public").await;
    assert!(!d.allowed, "{d}");
    assert!(matches!(d.reason, Reason::Override { action: OverrideAction::Deny, .. }), "{d}");
    let d = decide(&p, &fqdn("www.example.test."), "/private").await;
    assert!(d.allowed, "{d}");
    assert!(matches!(d.reason, Reason::Override { action: OverrideAction::Allow, .. }), "{d}");
    for host in ["c.test", "c.test."] {
        let d = decide(&p, &fqdn(host), "/public").await;
        assert!(!d.allowed, "{host}: {d}");
        assert_eq!(d.to_string(), "override: deny c.test (written fully qualified)");
    }
    assert_eq!(server.total_hits(), 0);
}

#[tokio::test]
async fn the_first_matching_override_wins() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\n").await;
    let overrides = vec![
        rule("www.example.test", OverrideAction::Allow, "this one", None),
        rule("*.example.test", OverrideAction::Deny, "not this one", None),
    ];
    let p = policy(PolicyConfig { overrides, ..PolicyConfig::default() });
    let d = decide(&p, &server.origin("www.example.test"), "/x").await;
    assert!(d.allowed);
    assert!(d.to_string().contains("this one"));
    let d = decide(&p, &server.origin("shop.example.test"), "/x").await;
    assert!(!d.allowed);
    assert!(d.to_string().contains("not this one"));
}

#[tokio::test]
async fn robots_txt_itself_is_always_allowed_without_a_fetch() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /\nDisallow: /robots.txt\n").await;
    let origin = server.origin("a.test");
    let overrides = vec![rule("b.test", OverrideAction::Deny, "denied host", None)];
    let p = policy(PolicyConfig { overrides, ..PolicyConfig::default() });
    for path in ["/robots.txt", "/robots.txt?x=1"] {
        let d = decide(&p, &origin, path).await;
        assert!(d.allowed, "{path}");
        assert_eq!(d.reason, Reason::RobotsTxtPath);
        assert_eq!(d.reason.class(), "robots-txt");
    }
    p.sync().await;
    assert_eq!(server.total_hits(), 0);
    assert_eq!(p.cached_origins(), 0);

    // Even when the file disallows it, when the origin is unreachable or the host denied.
    assert!(!decide(&p, &origin, "/x").await.allowed);
    assert_eq!(decide(&p, &origin, "/robots.txt").await.reason, Reason::RobotsTxtPath);
    let nowhere = Origin::parse("http://nonexistent.invalid/").unwrap();
    assert!(decide(&p, &nowhere, "/robots.txt").await.allowed);
    assert!(decide(&p, &server.origin("b.test"), "/robots.txt").await.allowed);
    // Not the same as a path that merely starts like it.
    assert!(!decide(&p, &origin, "/robots.txt.bak").await.allowed);
    assert_eq!(server.hits(ROBOTS), 1);
}

// ---------------------------------------------------------------------------------------
// Observer
// ---------------------------------------------------------------------------------------

#[derive(Default)]
struct Counting(std::sync::Mutex<Vec<(String, String)>>);

impl FetchObserver for Counting {
    fn fetched(&self, origin: &Origin, outcome: &FetchOutcome) {
        self.0.lock().unwrap().push((origin.to_string(), outcome.final_url.clone()));
    }
}

#[tokio::test]
async fn the_observer_sees_every_fetch() {
    let server = TestOrigin::start([(ROBOTS, Reply::status(500))]).await;
    let observer = Arc::new(Counting::default());
    let p = RobotsPolicy::with_observer(fetcher(), failure_config(), Some(observer.clone()));
    let origin = server.origin("a.test");
    decide(&p, &origin, "/x").await;
    decide(&p, &origin, "/y").await;
    advance(secs(61)).await;
    decide(&p, &origin, "/z").await;
    let seen = observer.0.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(server.hits(ROBOTS), 2);
    assert!(seen.iter().all(|(o, url)| *o == origin.to_string() && *url == origin.robots_url()));
}

#[tokio::test]
async fn a_decision_by_the_server_form_of_a_path_says_so() {
    let server = TestOrigin::robots("User-agent: *\nDisallow: /private/\n").await;
    let policy = policy(PolicyConfig::default());
    let origin = server.origin("a.test");
    for (path, how) in [("//private/x", "once slashes are merged"), ("/private%2Fx", "once %2F is decoded")] {
        let d = bounded(path, policy.decide(&origin, path, AGENT.into())).await;
        assert!(!d.allowed, "{path}: {d}");
        let notes = d.notes.as_deref().expect("the verdict's note");
        assert_eq!(notes.server_path.as_ref().map(|s| s.path.as_str()), Some("/private/x"));
        assert!(d.to_string().contains(how), "{path}: {d}");
    }
    // The literal readings (google, rfc) see no rule; nothing to note for a plain path.
    let d = bounded("plain", policy.decide(&origin, "/public", AGENT.into())).await;
    assert!(d.allowed && d.notes.is_none());
}
