//! `robotsgate check`: decide URLs against a robots.txt file, or against each origin's
//! live robots.txt.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use crate::fetch::{FetchConfig, Fetcher};
use crate::net::{self, Connector, DnsConfig, Guard, Resolver, TlsConfig};
use crate::origin::Origin;
use crate::pacing::{DelaySource, PacingConfig, Plan};
use crate::policy::{Decision, PolicyConfig, Reason as PolicyReason, RobotsPolicy};
use crate::rep::{self, IgnoredValue, PaceHint, Profile, Reason, RobotsTxt, Verdict};
use anyhow::{Context, bail};
use clap::Args;
use serde_json::json;

#[derive(Debug, Args)]
pub struct CheckArgs {
    /// The robots.txt file to check against (`-` reads standard input). Without it, each
    /// URL's origin's robots.txt is fetched (live mode).
    #[arg(long, value_name = "FILE|-")]
    robots: Option<PathBuf>,

    /// Live mode: the User-Agent sent when fetching robots.txt (default: the token and
    /// robotsgate's name and version).
    #[arg(long, value_name = "STRING")]
    user_agent: Option<String>,

    /// Live mode: timeout for connecting, for the response headers and for the body, each.
    #[arg(long, value_name = "SECONDS", default_value_t = 10.0)]
    timeout: f64,

    /// Live mode: also trust the CA certificates in this PEM file.
    #[arg(long, value_name = "FILE")]
    upstream_ca: Vec<PathBuf>,

    /// Live mode: resolve HOST to ADDRESS instead of asking DNS (repeatable), as curl's
    /// `--resolve`.
    #[arg(long, value_name = "HOST=ADDRESS")]
    resolve: Vec<String>,

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
    let Some(robots_path) = &args.robots else {
        return live(&args);
    };
    let body = read_robots(robots_path)?;
    let robots = RobotsTxt::parse(&body);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut any_disallowed = false;
    let now = std::time::SystemTime::now();
    for url in &args.urls {
        let path = rep::path_of_url(url);
        let verdict = robots.check_with(args.profile, &args.agent, &path);
        any_disallowed |= !verdict.allowed();
        let hint = robots.pace_with(args.profile, &args.agent, minute_of_day(now));
        let plan = pace_plan(url, hint, now);
        let written = if args.json {
            let mut line = json_line(url, &args.agent, &verdict);
            line["pace"] = pace_json(plan.as_ref(), robots.ignored_pace_values());
            writeln!(out, "{line}")
        } else {
            let word = if verdict.allowed() { "allowed" } else { "disallowed" };
            writeln!(out, "{word} {url} {verdict}{}", pace_text(plan.as_ref()))
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

/// Live mode: fetch each origin's robots.txt (once per origin) and decide.
fn live(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    if !(args.timeout.is_finite() && args.timeout > 0.0) {
        bail!("--timeout must be a positive number of seconds");
    }
    let timeout = Duration::from_secs_f64(args.timeout);
    let mut overrides: HashMap<String, Vec<IpAddr>> = HashMap::new();
    for r in &args.resolve {
        let (host, addr) =
            r.split_once('=').with_context(|| format!("--resolve {r:?}: expected HOST=ADDRESS"))?;
        let ip: IpAddr =
            addr.parse().with_context(|| format!("--resolve {r:?}: {addr:?} is not an IP address"))?;
        overrides.entry(host.to_ascii_lowercase()).or_default().push(ip);
    }
    let mut tls = TlsConfig::default();
    for path in &args.upstream_ca {
        tls.extra_roots.extend(net::load_pem_certs(path)?);
    }
    let user_agent = args
        .user_agent
        .clone()
        .unwrap_or_else(|| format!("{} robotsgate/{}", args.agent, env!("CARGO_PKG_VERSION")));
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start tokio")?;
    runtime.block_on(async {
        let resolver = Resolver::new(&DnsConfig { servers: Vec::new(), overrides });
        let tls = net::client_config(&tls, &[b"http/1.1"])?;
        // The operator runs this by hand: no destination guard.
        let connector = Connector::new(resolver, Arc::new(Guard::permissive()), tls, timeout);
        let config = FetchConfig {
            user_agent,
            header_timeout: timeout,
            body_timeout: timeout,
            ..FetchConfig::default()
        };
        let policy = RobotsPolicy::new(Fetcher::new(connector, config), PolicyConfig::default());
        let agent: Arc<str> = args.agent.as_str().into();
        let mut out = io::BufWriter::new(io::stdout().lock());
        let mut any_disallowed = false;
        for url in &args.urls {
            let origin = Origin::parse(url)?;
            let path = rep::path_of_url(url);
            let d = policy.decide_with(&origin, &path, agent.clone(), args.profile).await;
            any_disallowed |= !d.allowed;
            let now = std::time::SystemTime::now();
            let plan = pace_plan(url, d.pace_hint(now), now);
            let written = if args.json {
                let mut line = json_decision(url, &d);
                let ignored = match d.robots.as_deref().map(|c| &c.content) {
                    Some(crate::policy::CopyContent::Parsed(r)) => r.ignored_pace_values(),
                    _ => &[],
                };
                line["pace"] = pace_json(plan.as_ref(), ignored);
                writeln!(out, "{line}")
            } else {
                let word = if d.allowed { "allowed" } else { "disallowed" };
                let pace = pace_text(plan.as_ref());
                match fetch_summary(&d) {
                    Some(s) => writeln!(out, "{word} {url} {d}; robots.txt: {s}{pace}"),
                    None => writeln!(out, "{word} {url} {d}{pace}"),
                }
            };
            if let Err(e) = written {
                return stdout_error(e);
            }
        }
        if let Err(e) = out.flush() {
            return stdout_error(e);
        }
        Ok(ExitCode::from(if any_disallowed { 1 } else { 0 }))
    })
}

/// What the robots.txt fetch gave, in a few words: `200, 1234 bytes`, `404 → allow all`,
/// `HTTP status 503 → disallow all`.
fn fetch_summary(d: &Decision) -> Option<String> {
    let facts = d.fetch_facts()?;
    let redirects = match facts.redirects {
        0 => String::new(),
        n => format!(" after {n} redirect{} to {}", if n == 1 { "" } else { "s" }, facts.final_url),
    };
    Some(match &d.reason {
        // The decision says it all, but for the redirects.
        PolicyReason::Unavailable { .. }
        | PolicyReason::TooManyRedirects
        | PolicyReason::Unreachable { .. } => {
            if redirects.is_empty() {
                return None;
            }
            redirects.trim_start().to_owned()
        }
        _ => {
            let status = facts.status.map_or_else(String::new, |s| s.to_string());
            let cut = if facts.truncated { ", cut at 500 KiB" } else { "" };
            format!("{status}{redirects}, {} bytes{cut}", facts.bytes)
        }
    })
}

fn json_decision(url: &str, d: &Decision) -> serde_json::Value {
    let rule = match &d.reason {
        PolicyReason::Rule { kind, line, reading, implied_by_index_html, .. } => json!({
            "kind": kind.as_str(),
            "pattern": d.rule_pattern(),
            "line": line,
            "reading": reading.as_str(),
            "implied_by_index_html": implied_by_index_html,
        }),
        _ => serde_json::Value::Null,
    };
    let robots = d.fetch_facts().map(|f| {
        json!({
            "url": f.url,
            "final_url": f.final_url,
            "redirects": f.redirects,
            "status": f.status,
            "bytes": f.bytes,
            "truncated": f.truncated,
            "sha256": f.sha256_hex(),
            "duration_ms": f.duration.as_secs_f64() * 1000.0,
        })
    });
    let cause = match &d.reason {
        PolicyReason::Unreachable { cause } => Some(cause.to_string()),
        _ => d.failure.as_ref().map(|f| f.cause.to_string()),
    };
    json!({
        "url": url,
        "allowed": d.allowed,
        "agent": &*d.agent,
        "profile": d.profile.as_str(),
        "reason": d.reason.class(),
        "rule": rule,
        "robots_txt": robots,
        "unreachable_cause": cause,
        "stale": d.stale,
        "explanation": d.to_string(),
    })
}

/// Minutes since midnight UTC (a `request-rate` may name a time of day).
fn minute_of_day(now: std::time::SystemTime) -> u16 {
    let secs = now.duration_since(std::time::SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() % 86_400);
    (secs / 60) as u16
}

/// The delay robotsgate would keep for the URL's origin under the default pacing settings
/// (robots.txt's hint, capped at `pacing.max_delay`), when robots.txt asks for one.
fn pace_plan(url: &str, hint: Option<PaceHint>, now: std::time::SystemTime) -> Option<Plan> {
    let hint = hint?;
    let origin = Origin::parse(url).ok()?;
    Some(PacingConfig::default().plan(&origin, Some(hint), now))
}

/// `; delay 10 s (line 4: crawl-delay: 10)`, or nothing.
fn pace_text(plan: Option<&Plan>) -> String {
    let Some(plan) = plan else { return String::new() };
    let Some(DelaySource::Robots(h)) = &plan.source else { return String::new() };
    let clamped =
        plan.clamped_from.map_or_else(String::new, |c| format!(", clamped from {} s", c.as_secs_f64()));
    format!("; delay {} s ({h}{clamped})", plan.delay.as_secs_f64())
}

/// The `pace` object of `--json`: the delay, where it comes from, and the pacing lines
/// that were ignored.
fn pace_json(plan: Option<&Plan>, ignored: &[IgnoredValue]) -> serde_json::Value {
    let ignored: Vec<_> = ignored.iter().map(|i| json!({"line": i.line, "directive": i.directive})).collect();
    let Some(plan) = plan else {
        return json!({"delay_s": 0.0, "source": null, "line": null, "directive": null,
            "clamped_from_s": null, "ignored": ignored});
    };
    let (line, directive) = match &plan.source {
        Some(DelaySource::Robots(h)) => (Some(h.line), Some(h.directive())),
        _ => (None, None),
    };
    json!({
        "delay_s": plan.delay.as_secs_f64(),
        "source": plan.source.as_ref().map(DelaySource::class),
        "line": line,
        "directive": directive,
        "clamped_from_s": plan.clamped_from.map(|c| c.as_secs_f64()),
        "ignored": ignored,
    })
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
