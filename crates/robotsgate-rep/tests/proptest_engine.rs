//! Property tests: the engine (`robotsgate_rep`) against the independent references in
//! `tests/reference`, under both matcher engines (automaton and rule by rule), and the two
//! engines against each other on large wildcard rule sets.

mod grammar;
mod reference;

use proptest::prelude::*;
use proptest::sample::select;
use robotsgate_rep::{ParseOptions, Profile, Reading, RobotsTxt, RuleKind, Verdict, VerdictReason};

use grammar::*;
use reference::{Cited, Decision, Kind};

/// Both matcher engines: every wildcard rule through the automaton, and rule by rule.
const ENGINES: [(&str, ParseOptions); 2] = [
    ("automaton", ParseOptions { automaton_min_rules: 1 }),
    ("rule-by-rule", ParseOptions { automaton_min_rules: usize::MAX }),
];

// ---------------------------------------------------------------------------------------
// Comparing verdicts
// ---------------------------------------------------------------------------------------

/// The deciding rule of an engine verdict, in the reference's terms.
fn cited(v: &Verdict<'_>) -> Option<Cited> {
    v.rule().map(|r| Cited {
        kind: match r.kind {
            RuleKind::Allow => Kind::Allow,
            RuleKind::Disallow => Kind::Disallow,
        },
        line: r.line,
        implied: r.implied_by_index_html,
    })
}

fn show(body: &[u8]) -> String {
    body.escape_ascii().to_string()
}

/// Checks one profile's verdict and cited rule against the reference decision.
fn check_profile(
    robots: &RobotsTxt,
    profile: Profile,
    body: &[u8],
    agent: &str,
    path: &str,
    expect: Decision,
    engine: &str,
) -> Result<(), TestCaseError> {
    let v = robots.check_with(profile, agent, path);
    let ctx =
        || format!("[{profile}, {engine}] agent {agent:?} path {path:?} body \"{}\" -> {v}", show(body));
    prop_assert_eq!(v.allowed(), expect.allowed, "verdict {}", ctx());
    prop_assert_eq!(cited(&v), expect.rule, "cited rule {}", ctx());
    Ok(())
}

/// The conservative profile from the two reference decisions: `/robots.txt` is always
/// allowed; otherwise the RFC verdict, unless only the Google reading disallows.
fn conservative_decision(google: Decision, rfc: Decision) -> Decision {
    if rfc.robots_txt {
        return rfc;
    }
    let allowed = google.allowed && rfc.allowed;
    let from = if !google.allowed && rfc.allowed { google } else { rfc };
    Decision { allowed, ..from }
}

/// What a verdict must say, from the references.
struct Expected {
    decision: Decision,
    /// The reading the verdict comes from (`None` for `/robots.txt`).
    reading: Option<Reading>,
    /// Conservative: the readings disagreed.
    split: bool,
    /// Conservative: the server form of the path decided.
    server_path: Option<String>,
}

fn expected(profile: Profile, body: &[u8], agent: &str, path: &str) -> Expected {
    let of = |path: &str, profile: Profile| {
        let google = reference::google_decision(body, agent, path);
        let rfc = reference::rfc_decision(body, agent, path);
        let (decision, reading) = match profile {
            Profile::Google => (google, Some(Reading::Google)),
            Profile::Rfc => (rfc, Some(Reading::Rfc)),
            Profile::Conservative if !google.allowed && rfc.allowed => {
                (conservative_decision(google, rfc), Some(Reading::Google))
            }
            Profile::Conservative => (conservative_decision(google, rfc), Some(Reading::Rfc)),
        };
        let reading = if decision.robots_txt { None } else { reading };
        let split = profile == Profile::Conservative && !rfc.robots_txt && google.allowed != rfc.allowed;
        Expected { decision, reading, split, server_path: None }
    };
    let literal = of(path, profile);
    if profile == Profile::Conservative
        && literal.decision.allowed
        && let Some(server) = reference::server_path(path)
    {
        let on_server = of(&server, profile);
        if !on_server.decision.allowed {
            return Expected { server_path: Some(server), ..on_server };
        }
    }
    literal
}

fn check_case(profile: Profile, body: &[u8], agent: &str, paths: &[String]) -> Result<(), TestCaseError> {
    for (engine, options) in ENGINES {
        let robots = RobotsTxt::parse_with(body, options);
        for path in paths {
            let expect = expected(profile, body, agent, path);
            check_profile(&robots, profile, body, agent, path, expect.decision, engine)?;
            // The plain boolean references say the same.
            let plain = match profile {
                Profile::Google => reference::google_allowed(body, agent, path),
                Profile::Rfc => reference::rfc_allowed(body, agent, path),
                Profile::Conservative => reference::conservative_allowed(body, agent, path),
            };
            prop_assert_eq!(plain, expect.decision.allowed);
            // Which reading the verdict comes from, whether the readings disagree, and
            // whether the server form of the path decided.
            let v = robots.check_with(profile, agent, path);
            prop_assert_eq!(v.reading(), expect.reading, "[{}, {}] {:?}", profile, engine, path);
            prop_assert_eq!(v.readings_disagree(), expect.split, "[{}, {}] {:?}", profile, engine, path);
            prop_assert_eq!(
                v.server_path().map(|s| s.path.clone()),
                expect.server_path,
                "[{}, {}] {:?}",
                profile,
                engine,
                path
            );
            if expect.decision.robots_txt {
                prop_assert_eq!(v.reason(), VerdictReason::RobotsTxt);
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(config(3000))]

    #[test]
    fn google_profile_matches_reference(
        body in body(),
        agent in select(AGENTS),
        paths in prop::collection::vec(request_path(), 1..5),
    ) {
        check_case(Profile::Google, &body, agent, &paths)?;
    }

    #[test]
    fn rfc_profile_matches_reference(
        body in body(),
        agent in select(AGENTS),
        paths in prop::collection::vec(request_path(), 1..5),
    ) {
        check_case(Profile::Rfc, &body, agent, &paths)?;
    }

    #[test]
    fn conservative_profile_matches_reference(
        body in body(),
        agent in select(AGENTS),
        paths in prop::collection::vec(request_path(), 1..5),
    ) {
        check_case(Profile::Conservative, &body, agent, &paths)?;
    }
}

// ---------------------------------------------------------------------------------------
// Rule and path spelled differently: percent-encoding, case of hex digits, dot segments
// ---------------------------------------------------------------------------------------

/// Re-spells `s` byte by byte: `0` keeps a byte, `1` percent-encodes it (upper-case hex),
/// `2` percent-encodes it (lower-case hex), `3` decodes a `%XX` escape that starts there
/// (only to ASCII when `ascii_only`). The RFC reading must see through exactly the
/// re-spellings RFC 3986 calls equivalent; Google's reading through none but hex case in
/// the rule.
fn respell(s: &[u8], choices: &[u8], ascii_only: bool) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16);
    let mut out = Vec::new();
    let mut i = 0;
    while i < s.len() {
        let choice = choices.get(i).copied().unwrap_or(0) % 4;
        let b = s[i];
        let escape = (b == b'%' && i + 2 < s.len()).then(|| hex(s[i + 1]).zip(hex(s[i + 2]))).flatten();
        match (choice, escape) {
            (3, Some((hi, lo))) if !ascii_only || hi < 8 => {
                out.push((hi * 16 + lo) as u8);
                i += 3;
                continue;
            }
            (1, _) if b.is_ascii() => out.extend_from_slice(format!("%{b:02X}").as_bytes()),
            (2, _) if b.is_ascii() => out.extend_from_slice(format!("%{b:02x}").as_bytes()),
            _ => out.push(b),
        }
        i += 1;
    }
    out
}

/// A path, and a rule derived from a prefix of it, both re-spelled.
fn respelled_case() -> impl Strategy<Value = (Vec<u8>, String)> {
    const QUERY: &[&str] = &[
        ";", ":", "/", "?", "@", "!", "'", "(", ")", ",", "&", "=", "+", "a", "*", "$", "~", ".", "%3B",
        "%2F",
    ];
    (
        (
            prop::collection::vec(select(PATH_ATOMS), 1..6),
            prop::option::of(prop::collection::vec(select(QUERY), 0..5)),
        )
            .prop_map(|(path, query)| match query {
                Some(q) => [path.concat(), "?".into(), q.concat()].concat(),
                None => path.concat(),
            }),
        prop::collection::vec(0u8..12, 40),
        prop::collection::vec(0u8..12, 40),
        0usize..40,
        select(&["", "", "$", "*", "*$"][..]),
        any::<bool>(),
    )
        .prop_map(|(path, rule_choices, path_choices, cut, end, allow)| {
            let path = path.trim_start_matches('/');
            let path = format!("/{path}");
            // Choices >= 4 keep the byte: most bytes stay as they are.
            let rule_choices: Vec<u8> = rule_choices.iter().map(|&c| if c < 4 { c } else { 0 }).collect();
            let mut path_choices: Vec<u8> = path_choices.iter().map(|&c| if c < 4 { c } else { 0 }).collect();
            path_choices[0] = 0; // keep the leading '/'; a request path is not a URL
            let prefix = &path.as_bytes()[..cut.min(path.len())];
            let mut rule = respell(prefix, &rule_choices, false);
            rule.extend_from_slice(end.as_bytes());
            let request = respell(path.as_bytes(), &path_choices, true);
            // '#' starts a fragment: keep the path as is.
            let request =
                String::from_utf8(request).ok().filter(|r| !r.contains('#')).unwrap_or_else(|| path.clone());
            let mut body = b"User-agent: *\n".to_vec();
            body.extend_from_slice(if allow { b"Disallow: /\nAllow: " } else { b"Disallow: " });
            body.extend_from_slice(&rule);
            body.push(b'\n');
            (body, request)
        })
}

proptest! {
    #![proptest_config(config(2000))]

    #[test]
    fn respelled_rules_and_paths_match_reference((body, path) in respelled_case()) {
        for profile in Profile::ALL {
            check_case(profile, &body, "FooBot", std::slice::from_ref(&path))?;
        }
    }
}

// ---------------------------------------------------------------------------------------
// Large wildcard rule sets: automaton vs rule by rule (and the reference)
// ---------------------------------------------------------------------------------------

/// A rule with wildcards in the middle (and some other shapes mixed in).
fn wild_rule() -> impl Strategy<Value = String> {
    prop_oneof![
        8 => (
            select(&["/", "/", "/a", "/b", "", "/ab", "/a/"][..]),
            prop::collection::vec(segment(4), 1..5),
            select(&["", "", "*", "$", "*$"][..]),
        )
            .prop_map(|(first, mids, end)| format!("{first}*{}{end}", mids.join("*"))),
        1 => (segment(5), select(&["", "$", "*"][..])).prop_map(|(s, end)| format!("/{s}{end}")),
        1 => (segment(3), segment(3)).prop_map(|(a, b)| format!("/{a}*{b}$")),
    ]
}

fn wild_path() -> impl Strategy<Value = String> {
    (
        select(&["a", "b", ".", "/"][..]),
        prop::collection::vec(select(&["a", "a", "b", "b", "/", "."][..]), 0..40),
    )
        .prop_map(|(first, v)| format!("/{first}{}", v.concat()))
}

fn large_body() -> impl Strategy<Value = (Vec<u8>, usize)> {
    (prop::collection::vec((any::<bool>(), wild_rule()), 50..300), 0usize..40).prop_map(|(rules, split)| {
        // Two groups: FooBot's and everyone's; `split` rules go to FooBot.
        let mut body = String::from("User-agent: FooBot\n");
        for (i, (allow, rule)) in rules.iter().enumerate() {
            if i == split {
                body.push_str("\nUser-agent: *\n");
            }
            body.push_str(if *allow { "Allow: " } else { "Disallow: " });
            body.push_str(rule);
            body.push('\n');
        }
        (body.into_bytes(), rules.len())
    })
}

type Outcome = (bool, Option<(RuleKind, u32, bool)>);

fn outcome(v: &Verdict<'_>) -> Outcome {
    (v.allowed(), v.rule().map(|r| (r.kind, r.line, r.implied_by_index_html)))
}

proptest! {
    #![proptest_config(config(400))]

    #[test]
    fn automaton_and_rule_by_rule_agree_on_large_rule_sets(
        (body, _n) in large_body(),
        agent in select(&["FooBot", "OtherBot"][..]),
        paths in prop::collection::vec(wild_path(), 8),
    ) {
        let auto = RobotsTxt::parse_with(&body, ENGINES[0].1);
        let plain = RobotsTxt::parse_with(&body, ENGINES[1].1);
        for path in &paths {
            for profile in Profile::ALL {
                let a = auto.check_with(profile, agent, path);
                let p = plain.check_with(profile, agent, path);
                prop_assert_eq!(
                    outcome(&a), outcome(&p),
                    "[{}] agent {:?} path {:?}: automaton says {}, rule by rule says {}\n{}",
                    profile, agent, path, a, p, String::from_utf8_lossy(&body)
                );
            }
            let expect = reference::google_decision(&body, agent, path);
            let got = auto.check_with(Profile::Google, agent, path);
            prop_assert_eq!(got.allowed(), expect.allowed, "google reference, path {:?}", path);
            prop_assert_eq!(cited(&got), expect.rule, "google reference, path {:?}", path);
        }
    }
}

// ---------------------------------------------------------------------------------------
// Deterministic checks of the limits, against the reference
// ---------------------------------------------------------------------------------------

fn assert_matches_reference(body: &[u8], agent: &str, paths: &[&str]) {
    let paths: Vec<String> = paths.iter().map(|p| p.to_string()).collect();
    for profile in Profile::ALL {
        check_case(profile, body, agent, &paths).unwrap();
    }
}

#[test]
fn google_line_cut_after_16663_bytes_matches_reference() {
    for pad in [16_600usize, 16_640, 16_652, 16_653, 16_654, 16_700] {
        // "disallow: /" is 11 bytes; the line is cut after GOOGLE_MAX_LINE bytes.
        let mut body = b"user-agent: *\ndisallow: /".to_vec();
        body.extend(std::iter::repeat_n(b'x', pad - 11));
        body.extend_from_slice(b"$\nallow: /x\n");
        let long: String = format!("/{}", "x".repeat(pad - 11));
        assert_matches_reference(&body, "FooBot", &[&long, &format!("{long}x"), "/x", "/y"]);
    }
}

#[test]
fn only_first_500_kib_count_matches_reference() {
    // `extra`: how many bytes of "disallow: /a\n" lie past the limit; from 2 to 12 the
    // limit cuts the line (at 2 its first part reads `disallow: /`, which would disallow
    // everything), and the line is dropped.
    for extra in [0usize, 1, 2, 3, 5, 12, 13, 20] {
        let mut body = b"user-agent: *\n".to_vec();
        body.resize(reference::MAX_BYTES - 13 + extra, b'\n');
        body.extend_from_slice(b"disallow: /a\n");
        assert_matches_reference(&body, "FooBot", &["/a", "/b"]);
        let robots = RobotsTxt::parse(&body);
        let cut = (2..=12).contains(&extra);
        assert_eq!(robots.cut_line().is_some(), cut, "extra {extra}");
        for profile in Profile::ALL {
            let verdicts =
                [robots.check_with(profile, "FooBot", "/a"), robots.check_with(profile, "FooBot", "/b")];
            // The line is read whole (extra 0, 1: only its line break is past the limit) or
            // not at all.
            assert_eq!(verdicts[0].allowed(), extra >= 2, "extra {extra}");
            assert!(verdicts[1].allowed(), "extra {extra}");
            // What is left (`disallow: /` at most) may be a disallow of both paths.
            for v in &verdicts {
                assert_eq!(v.cut_line().is_some(), cut, "[{profile}] extra {extra}: {v}");
            }
        }
    }
}

// ---------------------------------------------------------------------------------------
// The generator is not vacuous
// ---------------------------------------------------------------------------------------

/// The grammar must reach the interesting cases often: disallowed verdicts in each
/// reading, disagreements between the readings, agent-specific groups, Google's
/// `index.htm` rule, `/robots.txt`, anchored or wildcard rules and the server form of a path
/// (conservative) deciding.
#[test]
fn generator_reaches_interesting_cases() {
    use proptest::strategy::ValueTree;
    use proptest::test_runner::TestRunner;

    let mut runner = TestRunner::deterministic();
    let strategy = (body(), select(AGENTS), request_path());
    let (mut google_no, mut rfc_no, mut split, mut implied, mut robots, mut specific) = (0, 0, 0, 0, 0, 0);
    let mut server = 0;
    let n = 2000;
    for _ in 0..n {
        let (body, agent, path) = strategy.new_tree(&mut runner).unwrap().current();
        let g = reference::google_decision(&body, agent, &path);
        let r = reference::rfc_decision(&body, agent, &path);
        google_no += usize::from(!g.allowed);
        rfc_no += usize::from(!r.allowed);
        split += usize::from(g.allowed != r.allowed);
        implied += usize::from(g.rule.is_some_and(|c| c.implied));
        robots += usize::from(r.robots_txt);
        let robots = RobotsTxt::parse(&body);
        let v = robots.check_with(Profile::Rfc, agent, &path);
        specific += usize::from(v.groups().any(|g| g.specific));
        server += usize::from(expected(Profile::Conservative, &body, agent, &path).server_path.is_some());
    }
    let stats = format!(
        "google disallowed {google_no}, rfc disallowed {rfc_no}, split {split}, implied {implied}, \
         robots.txt {robots}, specific {specific}, decided by the server form {server} of {n}"
    );
    assert!(google_no > n / 10 && rfc_no > n / 20, "{stats}");
    assert!(split > n / 20, "{stats}");
    assert!(implied >= n / 500, "{stats}");
    assert!(robots > n / 50, "{stats}");
    assert!(specific > n / 10, "{stats}");
    assert!(server > n / 200, "{stats}");
    println!("{stats}");
}

// ---------------------------------------------------------------------------------------
// Engine bugs found by the properties, kept as plain tests
// ---------------------------------------------------------------------------------------

/// Google's `HandleUserAgent` treats a value that starts with `*` followed by C
/// `isspace()` as global. `isspace` includes the vertical tab (0x0B); Rust's
/// `u8::is_ascii_whitespace` does not. So `User-agent: *<VT>junk` opens a global group for
/// Google, and the engine's Google reading ignores it.
#[test]
fn google_star_followed_by_vertical_tab_is_global() {
    let body = b"User-agent: *\x0Bjunk\nDisallow: /\n";
    assert!(!reference::google_allowed(body, "FooBot", "/page"));
    for (engine, options) in ENGINES {
        let robots = RobotsTxt::parse_with(body, options);
        let v = robots.check_with(Profile::Google, "FooBot", "/page");
        assert!(!v.allowed(), "[{engine}] Google reads `*<VT>junk` as `*`: expected disallowed, got {v}");
        // Conservative follows the stricter reading, so it must disallow too.
        assert!(!robots.check("FooBot", "/page").allowed(), "[{engine}] conservative");
    }
}
