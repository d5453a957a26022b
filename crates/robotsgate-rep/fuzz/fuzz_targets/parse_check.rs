//! Parse any body, check it under all three profiles, and hold the engine to its
//! invariants (see fuzz/README.md). Input: `BODY [0xFF AGENT [0xFF PATH]]`.

#![no_main]

use std::sync::atomic::{AtomicUsize, Ordering};

use libfuzzer_sys::fuzz_target;
use robotsgate_rep::{MAX_ROBOTS_TXT_BYTES, Profile, RobotsTxt};

#[path = "common.rs"]
mod common;

use common::{Input, Lines, check_all, derived_agents, derived_paths};

/// Bounds on `heap_bytes()`, found empirically (see README.md). Parsing keeps at most
/// `PARSE_PER_BYTE` bytes per parsed byte plus `BASE`. Rule sets are built lazily, one
/// per reading and distinct list of groups that a checked agent selects, so each
/// distinct agent checked may add up to two sets of at most `SET_PER_BYTE` bytes per
/// parsed byte (plus `BASE`) each.
const PARSE_PER_BYTE: usize = 24;
const SET_PER_BYTE: usize = 64;
const BASE: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let input = Input::split(data);
    let body = input.body;
    let robots = RobotsTxt::parse(body);
    let heap_parsed = robots.heap_bytes();
    assert_eq!(robots.parsed_bytes(), body.len().min(MAX_ROBOTS_TXT_BYTES));
    assert_eq!(robots.parsed_bytes() + robots.ignored_bytes(), body.len());
    let lines = Lines::new(body);

    let mut agents = derived_agents(body, 3);
    agents.push(input.agent.clone().unwrap_or_else(|| "FooBot".to_owned()));
    let mut paths = derived_paths(body, 8);
    paths.extend(input.path.clone());
    paths.push("/".to_owned());
    paths.push("/robots.txt".to_owned());

    for agent in &agents {
        for path in &paths {
            check_all(&robots, &lines, agent, path);
        }
        for profile in Profile::ALL {
            if let Some(d) = robots.crawl_delay_with(profile, agent) {
                assert!(d.is_finite() && d >= 0.0, "crawl-delay {d}");
            }
            // Pacing hints: a finite delay, cited by a line that says crawl-delay or
            // request-rate; none unless the file has some.
            for minute in [0u16, 359, 720, 1439] {
                let Some(h) = robots.pace_with(profile, agent, minute) else { continue };
                assert!(robots.has_pace_hints());
                assert!(h.delay.is_finite() && h.delay >= 0.0, "pace {h:?}");
                let line = String::from_utf8_lossy(lines.line(h.line)).to_ascii_lowercase();
                assert!(line.contains(h.source.directive()), "{h:?} cites {line:?}");
            }
        }
    }
    // The same body as the beginning of a longer file (`parse_truncated`): unless it ends
    // with a line break, its last line is the cut line, dropped. Every verdict is then the
    // one of the body without that line, and names no other cut line.
    let truncated = RobotsTxt::parse_truncated(body);
    let whole_lines = body.last().is_none_or(|b| matches!(b, b'\n' | b'\r'));
    let start = if whole_lines { body.len() } else { memchr::memrchr2(b'\n', b'\r', body).map_or(0, |i| i + 1) };
    let without = RobotsTxt::parse(&body[..start]);
    assert_eq!(truncated.cut_line().is_some(), !whole_lines, "cut line {:?}", truncated.cut_line());
    for agent in &agents {
        for path in &paths {
            for profile in Profile::ALL {
                let (t, w) = (truncated.check_with(profile, agent, path), without.check_with(profile, agent, path));
                assert_eq!(t.allowed(), w.allowed(), "[{profile}] {agent} {path}: {t} / {w}");
                assert_eq!(t.rule().map(|r| r.line), w.rule().map(|r| r.line), "[{profile}] {agent} {path}");
                assert!(t.cut_line().is_none() || t.cut_line() == truncated.cut_line(), "{t}");
            }
        }
    }
    let ignored = robots.ignored_pace_values();
    assert!(ignored.len() <= 64 && ignored.windows(2).all(|w| w[0].line < w[1].line));
    for s in robots.sitemaps() {
        assert!(!s.is_empty());
    }

    let heap = robots.heap_bytes();
    let n = robots.parsed_bytes();
    let mut distinct: Vec<String> = agents.iter().map(|a| a.to_ascii_lowercase()).collect();
    distinct.sort();
    distinct.dedup();
    let sets = 2 * distinct.len();
    if std::env::var_os("ROBOTSGATE_FUZZ_HEAP_REPORT").is_some() {
        // Measuring mode: print each new record of either ratio, don't assert.
        static PARSE: AtomicUsize = AtomicUsize::new(0);
        static SETS: AtomicUsize = AtomicUsize::new(0);
        let parse_per_kib = heap_parsed * 1024 / (n + 1024);
        let set_per_kib = heap.saturating_sub(heap_parsed) * 1024 / (sets * n + 1024);
        if PARSE.fetch_max(parse_per_kib, Ordering::Relaxed) < parse_per_kib
            || SETS.fetch_max(set_per_kib, Ordering::Relaxed) < set_per_kib
        {
            eprintln!(
                "HEAP parsed={n} heap_after_parse={heap_parsed} heap_after_checks={heap} sets<={sets} \
                 parse_per_byte={:.1} set_per_byte={:.1}",
                heap_parsed as f64 / n.max(1) as f64,
                heap.saturating_sub(heap_parsed) as f64 / (sets * n).max(1) as f64
            );
        }
        return;
    }
    assert!(
        heap_parsed <= PARSE_PER_BYTE * n + BASE,
        "heap_bytes {heap_parsed} after parsing {n} bytes exceeds {PARSE_PER_BYTE}*n+{BASE}"
    );
    let sets_bound = sets * (SET_PER_BYTE * n + BASE);
    assert!(
        heap - heap_parsed <= sets_bound,
        "heap_bytes grew by {} while checking {} agents ({n} bytes), more than {sets} sets of {SET_PER_BYTE}*n+{BASE}",
        heap - heap_parsed,
        distinct.len()
    );
});
