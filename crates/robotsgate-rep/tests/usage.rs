//! AI-usage preferences in robots.txt: the vectors in `tests/data/usage/vectors.json` (the
//! drafts' and Cloudflare's own examples, conflicting lines, paths, duplicates, junk values,
//! lines outside groups), each check's preferences and the lines cited.

use robotsgate_rep::usage::{Category, Preference};
use robotsgate_rep::{Profile, RobotsTxt};

#[test]
fn vectors() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/data/usage/vectors.json");
    let cases: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut checks = 0;
    for case in cases.as_array().unwrap() {
        let name = case["name"].as_str().unwrap();
        let robots = RobotsTxt::parse(case["robots"].as_str().unwrap().as_bytes());
        for c in case["checks"].as_array().unwrap() {
            let agent = c["agent"].as_str().unwrap();
            let path = c["path"].as_str().unwrap();
            let profile: Profile = c["profile"].as_str().unwrap_or("conservative").parse().unwrap();
            let usage = robots.usage_with(profile, agent, path);
            let at = format!("{name}: {agent} {path} ({profile})");
            assert_eq!(usage.verdict().allowed(), c["crawl"].as_bool().unwrap_or(true), "{at}: crawl");
            let mut lines = Vec::new();
            for cat in Category::ALL {
                let u = usage.get(cat);
                if let Some(want) = c[cat.as_str()].as_str() {
                    let want = match want {
                        "y" => Preference::Allowed,
                        "n" => Preference::Disallowed,
                        _ => Preference::Unknown,
                    };
                    assert_eq!(u.preference(), want, "{at}: {cat}: {u}");
                }
                lines.extend(u.deciding_lines().map(|l| l.line));
            }
            lines.sort();
            lines.dedup();
            if let Some(want) = c["lines"].as_array() {
                let want: Vec<u32> = want.iter().map(|l| l.as_u64().unwrap() as u32).collect();
                assert_eq!(lines, want, "{at}: lines");
            }
            checks += 1;
        }
    }
    assert!(checks >= 30, "{checks}");
}

#[test]
fn both_forms_are_kept_apart() {
    let robots = RobotsTxt::parse(
        b"User-agent: *\nContent-Usage: train-ai=y\nContent-Signal: ai-train=no\nContent-Usage: /x train-ai=n\n",
    );
    let u = robots.usage("ExampleBot", "/a");
    let t = u.get(Category::TrainAi);
    assert_eq!(t.content_usage.preference, Preference::Allowed);
    assert_eq!(t.content_usage.line.map(|l| l.line), Some(2));
    assert_eq!(t.content_signal.preference, Preference::Disallowed);
    assert_eq!(
        t.content_signal.line.map(|l| l.to_string()).as_deref(),
        Some("line 3: content-signal: ai-train=no")
    );
    assert_eq!(t.preference(), Preference::Disallowed);
    assert_eq!(t.to_string(), "train-ai: disallowed (line 3: content-signal: ai-train=no)");
    let x = robots.usage("ExampleBot", "/x");
    assert_eq!(
        x.get(Category::TrainAi).content_usage.line.map(|l| (l.path, l.value)),
        Some(("/x", "train-ai=n"))
    );
}

#[test]
fn files_without_usage_lines_have_none() {
    let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
    assert!(!robots.has_usage_lines());
    let u = robots.usage("ExampleBot", "/a");
    assert!(
        u.categories()
            .iter()
            .all(|c| c.preference() == Preference::Unknown && c.content_usage.line.is_none())
    );
}

/// Many lines in one group go through the indexed matcher: the same answers as a few.
#[test]
fn many_lines_match_as_few() {
    let mut body = String::from("User-agent: *\nContent-Usage: train-ai=n\n");
    for i in 0..200 {
        body.push_str(&format!("Content-Usage: /p{i}/ train-ai=y\nContent-Usage: /w*{i}.html$ search=n\n"));
    }
    body.push_str("Content-Usage: /p7/ train-ai=n\n");
    let robots = RobotsTxt::parse(body.as_bytes());
    let u = robots.usage("ExampleBot", "/p7/x");
    assert_eq!(u.get(Category::TrainAi).preference(), Preference::Disallowed);
    assert_eq!(u.get(Category::TrainAi).content_usage.line.map(|l| l.line), Some(403));
    assert_eq!(robots.usage("ExampleBot", "/p8/x").get(Category::TrainAi).preference(), Preference::Allowed);
    assert_eq!(robots.usage("ExampleBot", "/q").get(Category::TrainAi).preference(), Preference::Disallowed);
    let w = robots.usage("ExampleBot", "/w/a/13.html");
    assert_eq!(w.get(Category::Search).preference(), Preference::Disallowed);
    assert_eq!(w.get(Category::TrainAi).preference(), Preference::Unknown);
}
