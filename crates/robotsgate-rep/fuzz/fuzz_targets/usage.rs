//! AI-usage preferences: parse any body, ask every profile for the usage preferences of
//! derived agents and paths, and parse the raw input as a `Content-Usage`, a
//! `Content-Signal` and an `X-Robots-Tag` value. Input: `BODY [0xFF AGENT [0xFF PATH]]`.
//!
//! Invariants: no panic; a path that may not be crawled has no preferences; each form's
//! preference is what its cited line says for the category, and the line is a
//! `content-usage`/`content-signal` line of the body; the conservative profile is at least
//! as restrictive as each reading alone; a `Content-Usage` value that does not parse says
//! nothing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate_rep::usage::{
    Category, Preference, Source, Stated, parse_content_signal, parse_content_usage, parse_x_robots_tag,
};
use robotsgate_rep::{Profile, RobotsTxt};

#[path = "common.rs"]
mod common;

use common::{Input, Lines, derived_agents, derived_paths};

fn rank(p: Preference) -> u8 {
    match p {
        Preference::Disallowed => 0,
        Preference::Allowed => 1,
        Preference::Unknown => 2,
    }
}

fn stated_sane(s: &Stated<'_>, category: Category, source: Source, lines: &Lines<'_>) {
    match s.line {
        None => assert_eq!(s.preference, Preference::Unknown),
        Some(l) => {
            assert_eq!(l.source, source);
            assert_eq!(s.preference, l.statement.get(category), "{l}");
            let text = lines.line(l.line);
            let key = source.as_str().as_bytes();
            let t = text.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(text.len());
            assert!(text[t..].len() >= key.len() && text[t..t + key.len()].eq_ignore_ascii_case(key), "{l}");
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let input = Input::split(data);
    let robots = RobotsTxt::parse(input.body);
    let lines = Lines::new(input.body);
    let mut agents = derived_agents(input.body, 3);
    agents.push(input.agent.clone().unwrap_or_else(|| "FooBot".to_owned()));
    let mut paths = derived_paths(input.body, 6);
    paths.extend(input.path.clone());
    paths.push("/".to_owned());
    for agent in &agents {
        for path in &paths {
            let mut by_profile = Vec::new();
            for profile in Profile::ALL {
                let u = robots.usage_with(profile, agent, path);
                assert_eq!(u.verdict().allowed(), robots.check_with(profile, agent, path).allowed());
                for c in u.categories() {
                    if !u.verdict().allowed() {
                        assert!(c.content_usage.line.is_none() && c.content_signal.line.is_none());
                    }
                    stated_sane(&c.content_usage, c.category, Source::ContentUsage, &lines);
                    stated_sane(&c.content_signal, c.category, Source::ContentSignal, &lines);
                    assert_eq!(c.preference(), c.content_usage.preference.combine(c.content_signal.preference));
                    let _ = c.to_string();
                }
                by_profile.push(u.categories().map(|c| (rank(c.content_usage.preference), rank(c.content_signal.preference))));
            }
            // Profile::ALL is google, rfc, conservative: when conservative allows the path,
            // both readings do, and it is at least as restrictive as each.
            if robots.check_with(Profile::Conservative, agent, path).allowed()
                && robots.check_with(Profile::Google, agent, path).allowed()
                && robots.check_with(Profile::Rfc, agent, path).allowed()
            {
                for i in 0..3 {
                    let (cons, g, r) = (by_profile[2][i], by_profile[0][i], by_profile[1][i]);
                    assert!(cons.0 <= g.0 && cons.0 <= r.0 && cons.1 <= g.1 && cons.1 <= r.1);
                }
            }
        }
    }
    let cu = parse_content_usage(data);
    if cu.is_malformed() {
        assert!(cu.is_empty());
    }
    assert_eq!(cu.get(Category::AiInput), Preference::Unknown);
    let _ = parse_content_signal(data);
    let agent = input.agent.as_deref().unwrap_or("FooBot");
    let _ = parse_x_robots_tag(data.split(|&b| b == b'\n'), agent, data.first() == Some(&b'i'));
});
