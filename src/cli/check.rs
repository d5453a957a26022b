//! `robotsgate check`: decide URLs against a robots.txt file.

use std::io::{self, Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;
use robotsgate::rep::{self, Profile, Reason, RobotsTxt, Verdict};
use serde_json::json;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The robots.txt file to check against (`-` reads standard input).
    #[arg(long, value_name = "FILE|-")]
    robots: PathBuf,

    /// The crawler's product token (letters, `-` and `_`), e.g. `ExampleBot`.
    #[arg(long, value_name = "TOKEN")]
    agent: String,

    /// How to read the file: google, rfc or conservative (allowed only when both allow).
    #[arg(long, default_value = "conservative", value_parser = parse_profile)]
    profile: Profile,

    /// Print one JSON object per URL instead of text.
    #[arg(long)]
    json: bool,

    /// The URLs to check (absolute http or https URLs).
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse::<Profile>().map_err(|e| e.to_string())
}

/// Runs the check; `Ok` carries the exit status (0: all allowed, 1: any disallowed).
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    if !rep::is_valid_product_token(&args.agent) {
        bail!(
            "invalid product token {:?}: RFC 9309 tokens are one or more of the letters a-z, A-Z, '-' and '_'",
            args.agent
        );
    }
    // Validate every URL before doing any work, so a typo does not leave half an answer.
    for url in &args.urls {
        check_url(url)?;
    }
    let body = read_robots(&args.robots)?;
    let robots = RobotsTxt::parse(&body);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut any_disallowed = false;
    for url in &args.urls {
        let path = rep::path_of_url(url);
        let verdict = robots.check_with(args.profile, &args.agent, &path);
        any_disallowed |= !verdict.allowed();
        let written = if args.json {
            writeln!(out, "{}", json_line(url, &args.agent, &verdict))
        } else {
            let word = if verdict.allowed() { "allowed" } else { "disallowed" };
            writeln!(out, "{word} {url} {verdict}")
        };
        if let Err(e) = written {
            return stdout_error(e);
        }
    }
    if let Err(e) = out.flush() {
        return stdout_error(e);
    }
    Ok(ExitCode::from(if any_disallowed { 1 } else { 0 }))
}

fn stdout_error(e: io::Error) -> anyhow::Result<ExitCode> {
    if e.kind() == io::ErrorKind::BrokenPipe {
        // The reader went away (e.g. `| head`): nothing left to say.
        return Ok(ExitCode::from(super::EXIT_USAGE));
    }
    Err(e).context("cannot write to standard output")
}

fn check_url(raw: &str) -> anyhow::Result<()> {
    let url = url::Url::parse(raw).with_context(|| format!("URL {raw:?} does not parse"))?;
    if !matches!(url.scheme(), "http" | "https") {
        bail!("URL {raw:?} is not an http or https URL");
    }
    if url.host_str().is_none_or(str::is_empty) {
        bail!("URL {raw:?} has no host");
    }
    Ok(())
}

fn read_robots(path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    // Read one byte past the limit: enough to know the rest is ignored.
    let limit = rep::MAX_ROBOTS_TXT_BYTES as u64 + 1;
    let mut body = Vec::new();
    if path.as_os_str() == "-" {
        io::stdin()
            .lock()
            .take(limit)
            .read_to_end(&mut body)
            .context("cannot read robots.txt from standard input")?;
    } else {
        let file = std::fs::File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
        file.take(limit).read_to_end(&mut body).with_context(|| format!("cannot read {}", path.display()))?;
    }
    Ok(body)
}

fn json_line(url: &str, agent: &str, v: &Verdict<'_>) -> serde_json::Value {
    let (reason, rule) = match v.reason() {
        Reason::Rule(r) => (
            "rule",
            json!({
                "kind": r.kind.as_str(),
                "pattern": r.pattern,
                "line": r.line,
                "reading": r.reading.as_str(),
                "implied_by_index_html": r.implied_by_index_html,
            }),
        ),
        Reason::NoRuleMatched => ("no-rule-matched", serde_json::Value::Null),
        Reason::RobotsTxt => ("robots-txt", serde_json::Value::Null),
    };
    let groups: Vec<_> = v
        .groups()
        .map(|g| json!({"line": g.line, "agents": g.agents().collect::<Vec<_>>(), "specific": g.specific}))
        .collect();
    json!({
        "url": url,
        "allowed": v.allowed(),
        "agent": agent,
        "profile": v.profile().as_str(),
        "reason": reason,
        "rule": rule,
        "readings_disagree": v.readings_disagree(),
        "groups": groups,
        "explanation": v.to_string(),
    })
}
