//! Runs every conformance vector (`tests/data/conformance/*.jsonl`: the project's reference
//! vectors and our own, see the README there) in every profile it names. The URL is read
//! as `robotsgate check` reads it ([`split_http_url`]: raw non-ASCII and a stray `%` are
//! answered, issue 31.1).

use std::path::PathBuf;

use base64::Engine;
use robotsgate_rep::{Profile, RobotsTxt, split_http_url};

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/conformance").join(name)
}

#[test]
fn conformance_vectors() {
    let mut text = String::new();
    for name in ["cases.jsonl", "ours.jsonl"] {
        let path = data(name);
        text +=
            &std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        text.push('\n');
    }
    let mut checked = 0;
    let mut failures = Vec::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let case: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("line {}: {e}", n + 1));
        let id = case["id"].as_str().unwrap_or("?");
        let body = match (case["robots"].as_str(), case["robots_b64"].as_str()) {
            (Some(s), _) => s.as_bytes().to_vec(),
            (None, Some(b)) => base64::engine::general_purpose::STANDARD.decode(b).expect("base64"),
            _ => panic!("{id}: no robots body"),
        };
        let agent = case["agent"].as_str().expect("agent");
        let url = case["url"].as_str().expect("url");
        let robots = RobotsTxt::parse(&body);
        let path = split_http_url(url).unwrap_or_else(|| panic!("{id}: {url:?} is no http(s) URL")).path;
        for profile in Profile::ALL {
            let Some(expect) = case["expect"][profile.as_str()].as_bool() else { continue };
            let v = robots.check_with(profile, agent, &path);
            checked += 1;
            if v.allowed() != expect {
                failures.push(format!(
                    "{id} [{profile}]: expected {}, got {} ({v}) -- {}",
                    if expect { "allowed" } else { "disallowed" },
                    if v.allowed() { "allowed" } else { "disallowed" },
                    case["note"].as_str().unwrap_or("")
                ));
            }
        }
    }
    assert!(checked > 500, "only {checked} verdicts checked");
    assert!(failures.is_empty(), "{} of {checked} verdicts wrong:\n{}", failures.len(), failures.join("\n"));
}
