//! The rule-by-rule matcher and the automaton matcher must give the same verdicts and
//! cite the same rule. Input: `BODY [0xFF AGENT [0xFF PATH]]`.

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate_rep::{ParseOptions, Profile, VerdictReason, RobotsTxt, Verdict};

#[path = "common.rs"]
mod common;

use common::{Input, derived_agents, derived_paths};

/// What must agree: the verdict, why, and which rule (line, kind, reading, the
/// index.html flag and the pattern text).
fn key(v: &Verdict<'_>) -> (bool, u8, Option<(u32, &'static str, &'static str, bool, String)>) {
    match v.reason() {
        VerdictReason::RobotsTxt => (v.allowed(), 0, None),
        VerdictReason::NoRuleMatched => (v.allowed(), 1, None),
        VerdictReason::Rule(m) => (
            v.allowed(),
            2,
            Some((m.line, m.kind.as_str(), m.reading.as_str(), m.implied_by_index_html, m.pattern.to_owned())),
        ),
    }
}

fuzz_target!(|data: &[u8]| {
    let input = Input::split(data);
    let body = input.body;
    let auto = RobotsTxt::parse_with(body, ParseOptions { automaton_min_rules: 1 });
    let linear = RobotsTxt::parse_with(body, ParseOptions { automaton_min_rules: usize::MAX });

    let mut agents = derived_agents(body, 3);
    agents.push(input.agent.clone().unwrap_or_else(|| "FooBot".to_owned()));
    let mut paths = derived_paths(body, 12);
    paths.extend(input.path.clone());
    paths.push("/".to_owned());

    for agent in &agents {
        for path in &paths {
            for profile in Profile::ALL {
                let a = auto.check_with(profile, agent, path);
                let l = linear.check_with(profile, agent, path);
                assert_eq!(
                    key(&a),
                    key(&l),
                    "{profile}: automaton says {} ({a}), rule by rule says {} ({l}) for {agent:?} {path:?}",
                    a.allowed(),
                    l.allowed()
                );
            }
        }
    }
});
