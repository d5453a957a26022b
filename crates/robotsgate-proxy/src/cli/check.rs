//! `robotsgate check`: decide URLs against a robots.txt file, or against each origin's
//! live robots.txt. Every valid URL is answered; an invalid one is reported in its place
//! and makes the exit status 2.

use std::collections::HashMap;
use std::io::{self, Read, Write};
use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use clap::Args;
use robotsgate::Robots;

use super::for_terminal;
use robotsgate::net::{self, DnsConfig, Guard, TlsConfig};
use robotsgate::origin::Origin;
use robotsgate::pacing::{DelaySource, PacingConfig, Plan};
use robotsgate::policy::{
    CategoryPreference, Decision, PolicyConfig, Purpose, Reason, UnknownUsage, UsageCheck, UsageDecision,
};
use robotsgate::rep::{self, IgnoredValue, PaceHint, Profile, RobotsTxt, Verdict, VerdictReason};
use robotsgate::target::Target;
use serde_json::json;

/// The exit statuses, for `robotsgate check --help`.
const EXIT_STATUS_HELP: &str = "\
Exit status:
  0  every URL is allowed
  1  some URL is disallowed, or (with --purpose) refused by the site's AI-usage
     preferences (and every URL is valid)
  2  some URL is invalid, or a usage error (bad --agent, unreadable --robots file, ...);
     this wins over 1. Every valid URL is still answered; an invalid one gets an
     `invalid` line (with --json an object with \"allowed\": null and \"error\") in its
     place.

A URL is read as browsers read it (the WHATWG URL standard): raw non-ASCII, spaces or a
`%` that starts no escape are fine, and the path is checked as written (the google
profile compares it with the rules as Google's library does; rfc percent-encodes it
first). A URL is invalid only when it is no http or https URL at all: no scheme,
another scheme, no host, an invalid host or port. A robots.txt that fails to fetch is a
decision (disallow all), not an error.";

#[derive(Debug, Args)]
#[command(after_help = EXIT_STATUS_HELP)]
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

    /// What the crawler fetches for (comma-separated: train-ai, search, ai-input): each
    /// allowed URL also gets the site's Content-Usage / Content-Signal preferences for it,
    /// and is `usage-refused` when one of them is "no".
    #[arg(long, value_name = "CATEGORIES", value_parser = parse_purpose, default_value = "")]
    purpose: Purpose,

    /// With --purpose: `refuse` also refuses when the site states no preference.
    #[arg(long, value_name = "allow|refuse", value_parser = parse_unknown, default_value = "allow")]
    unknown: UnknownUsage,

    /// Print one JSON object per URL instead of text.
    #[arg(long)]
    json: bool,

    /// The URLs to check (absolute http or https URLs, as a browser takes them).
    #[arg(required = true, value_name = "URL")]
    urls: Vec<String>,
}

fn parse_profile(s: &str) -> Result<Profile, String> {
    s.parse::<Profile>().map_err(|e| e.to_string())
}

fn parse_purpose(s: &str) -> Result<Purpose, String> {
    s.parse::<Purpose>().map_err(|e| e.to_string())
}

fn parse_unknown(s: &str) -> Result<UnknownUsage, String> {
    match s {
        "allow" => Ok(UnknownUsage::Allow),
        "refuse" => Ok(UnknownUsage::Refuse),
        _ => Err(format!("{s:?}: expected allow or refuse")),
    }
}

/// `allowed`, `disallowed` or `usage-refused`.
fn word(allowed: bool, usage: Option<&UsageDecision>) -> robotsgate::Outcome {
    match (allowed, usage.is_some_and(|u| u.refused.is_some())) {
        (false, _) => robotsgate::Outcome::Disallowed,
        (true, true) => robotsgate::Outcome::UsageRefused,
        (true, false) => robotsgate::Outcome::Allowed,
    }
}

/// The usage check as JSON (null without one).
fn json_usage(u: Option<&UsageDecision>) -> serde_json::Value {
    let Some(u) = u else { return serde_json::Value::Null };
    let line = |l: &Option<robotsgate::policy::CitedLine>| {
        l.as_ref().map(|l| json!({"line": l.line, "text": &*l.text, "preference": l.preference.as_str()}))
    };
    json!({
        "purpose": u.purpose.categories().map(|c| c.as_str()).collect::<Vec<_>>(),
        "unknown": u.unknown.as_str(),
        "refused": u.refused.map(|c| c.as_str()),
        "preferences": u.preferences.iter().map(|p| json!({
            "category": p.category.as_str(),
            "preference": p.preference.as_str(),
            "content_usage": line(&p.content_usage),
            "content_signal": line(&p.content_signal),
        })).collect::<Vec<_>>(),
        "explanation": u.to_string(),
    })
}

/// What was found over all URLs, for the exit status.
#[derive(Debug, Default)]
struct Outcome {
    disallowed: bool,
    invalid: usize,
}

impl Outcome {
    /// 2 when some URL was invalid (it wins), else 1 when some URL was disallowed, else 0;
    /// the number of invalid URLs is said on stderr.
    fn exit(&self, urls: usize) -> ExitCode {
        if self.invalid > 0 {
            let (n, them) = match self.invalid {
                1 => ("1 invalid URL".to_owned(), "its `invalid` line"),
                n => (format!("{n} invalid URLs"), "their `invalid` lines"),
            };
            eprintln!("robotsgate: {n} of {urls} (see {them})");
            return ExitCode::from(super::EXIT_USAGE);
        }
        ExitCode::from(if self.disallowed { 1 } else { 0 })
    }
}

/// Runs the check; `Ok` carries the exit status (see [`EXIT_STATUS_HELP`]).
pub fn run(args: CheckArgs) -> anyhow::Result<ExitCode> {
    if !rep::is_valid_product_token(&args.agent) {
        bail!(
            "invalid product token {:?}: RFC 9309 tokens are one or more of the letters a-z, A-Z, '-' and '_'",
            args.agent
        );
    }
    let Some(robots_path) = &args.robots else {
        return live(&args);
    };
    let body = read_robots(robots_path)?;
    let robots = RobotsTxt::parse(&body);
    let mut out = io::BufWriter::new(io::stdout().lock());
    let mut outcome = Outcome::default();
    let now = std::time::SystemTime::now();
    for url in &args.urls {
        let written = match check_url(url) {
            Err(why) => {
                outcome.invalid += 1;
                write_invalid(&mut out, &args, url, &why)
            }
            Ok(target) => {
                let usage = robots.usage_with(args.profile, &args.agent, target.path());
                let verdict = usage.verdict();
                let decided = (!args.purpose.is_empty() && verdict.allowed()).then(|| {
                    let prefs =
                        args.purpose.categories().map(|c| CategoryPreference::of(usage.get(c))).collect();
                    UsageDecision::new(args.purpose, args.unknown, prefs)
                });
                let word = word(verdict.allowed(), decided.as_ref());
                outcome.disallowed |= word != robotsgate::Outcome::Allowed;
                let hint = robots.pace_with(args.profile, &args.agent, minute_of_day(now));
                let plan = pace_plan(url, hint, now);
                if args.json {
                    let mut line = json_line(url, &args.agent, verdict);
                    if !args.purpose.is_empty() {
                        line["usage"] = json_usage(decided.as_ref());
                        line["outcome"] = json!(word.as_str());
                    }
                    line["pace"] = pace_json(plan.as_ref(), robots.ignored_pace_values());
                    writeln!(out, "{line}")
                } else {
                    let pace = pace_text(plan.as_ref());
                    match &decided {
                        Some(u) => {
                            writeln!(out, "{}", for_terminal(&format!("{word} {url} {verdict}; {u}{pace}")))
                        }
                        None => writeln!(out, "{}", for_terminal(&format!("{word} {url} {verdict}{pace}"))),
                    }
                }
            }
        };
        if let Err(e) = written {
            return stdout_error(e);
        }
    }
    if let Err(e) = out.flush() {
        return stdout_error(e);
    }
    Ok(outcome.exit(args.urls.len()))
}

/// The answer for a URL that is not valid: `invalid "URL": why`, or a JSON object with
/// `"allowed": null` and the `"error"`.
fn write_invalid(out: &mut impl Write, args: &CheckArgs, url: &str, why: &str) -> io::Result<()> {
    if args.json {
        let line = json!({
            "url": url,
            "allowed": serde_json::Value::Null,
            "agent": &args.agent,
            "profile": args.profile.as_str(),
            "error": why,
        });
        writeln!(out, "{line}")
    } else {
        writeln!(out, "invalid {url:?}: {why}")
    }
}

/// Live mode: fetch each origin's robots.txt (once per origin) and decide.
fn live(args: &CheckArgs) -> anyhow::Result<ExitCode> {
    let Some(timeout) = Duration::try_from_secs_f64(args.timeout).ok().filter(|t| !t.is_zero()) else {
        bail!("--timeout must be a positive number of seconds (at most {})", u64::MAX);
    };
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
        // The operator runs this by hand: no destination guard.
        let robots = Robots::builder()
            .agent(args.agent.as_str())
            .user_agent(user_agent)
            .guard(Guard::permissive())
            .dns(DnsConfig { servers: Vec::new(), overrides })
            .tls(tls)
            .connect_timeout(timeout)
            .fetch_header_timeout(timeout)
            .fetch_body_timeout(timeout)
            .policy_config(PolicyConfig::default())
            .build()?;
        let policy = robots.policy();
        let agent: Arc<str> = args.agent.as_str().into();
        let mut out = io::BufWriter::new(io::stdout().lock());
        let mut outcome = Outcome::default();
        for url in &args.urls {
            let (origin, path) = match check_url(url) {
                Ok(target) => target.into_parts(),
                Err(why) => {
                    outcome.invalid += 1;
                    if let Err(e) = write_invalid(&mut out, args, url, &why) {
                        return stdout_error(e);
                    }
                    continue;
                }
            };
            let check = UsageCheck { purpose: args.purpose, unknown: args.unknown };
            let d = policy.decide_for(&origin, &path, agent.clone(), args.profile, check).await;
            let word = word(d.allowed, d.usage.as_deref());
            outcome.disallowed |= word != robotsgate::Outcome::Allowed;
            let usage = d.usage.as_ref().map(|u| format!("; {u}")).unwrap_or_default();
            let now = std::time::SystemTime::now();
            let plan = pace_plan(url, d.pace_hint(now), now);
            let written = if args.json {
                let mut line = json_decision(url, &d);
                if !args.purpose.is_empty() {
                    line["usage"] = json_usage(d.usage.as_deref());
                    line["outcome"] = json!(word.as_str());
                }
                let ignored = match d.robots.as_deref().map(|c| &c.content) {
                    Some(robotsgate::policy::CopyContent::Parsed(r)) => r.ignored_pace_values(),
                    _ => &[],
                };
                line["pace"] = pace_json(plan.as_ref(), ignored);
                writeln!(out, "{line}")
            } else {
                let pace = pace_text(plan.as_ref());
                match fetch_summary(&d) {
                    Some(s) => writeln!(
                        out,
                        "{}",
                        for_terminal(&format!("{word} {url} {d}{usage}; robots.txt: {s}{pace}"))
                    ),
                    None => writeln!(out, "{}", for_terminal(&format!("{word} {url} {d}{usage}{pace}"))),
                }
            };
            if let Err(e) = written {
                return stdout_error(e);
            }
            // Live answers come one by one: show each as it comes.
            if let Err(e) = out.flush() {
                return stdout_error(e);
            }
        }
        if let Err(e) = out.flush() {
            return stdout_error(e);
        }
        Ok(outcome.exit(args.urls.len()))
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
        Reason::Unavailable { .. } | Reason::TooManyRedirects | Reason::Unreachable { .. } => {
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
        Reason::Rule { kind, line, reading, implied_by_index_html, .. } => json!({
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
        Reason::Unreachable { cause } => Some(cause.to_string()),
        _ => d.failure.as_ref().map(|f| f.cause.to_string()),
    };
    json!({
        "url": url,
        "allowed": d.allowed,
        "agent": &*d.agent,
        "profile": d.profile.as_str(),
        "reason": d.reason.class().as_str(),
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

/// A URL to check: an http or https URL as browsers read it ([`Target`]). The error
/// says why not.
fn check_url(raw: &str) -> Result<Target, String> {
    Target::parse(raw).map_err(|e| e.to_string())
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
        VerdictReason::Rule(r) => (
            "rule",
            json!({
                "kind": r.kind.as_str(),
                "pattern": r.pattern,
                "line": r.line,
                "reading": r.reading.as_str(),
                "implied_by_index_html": r.implied_by_index_html,
            }),
        ),
        VerdictReason::NoRuleMatched => ("no-rule-matched", serde_json::Value::Null),
        VerdictReason::RobotsTxt => ("robots-txt", serde_json::Value::Null),
    };
    let groups: Vec<_> = v
        .groups()
        .map(|g| json!({"line": g.line, "agents": g.agents().collect::<Vec<_>>(), "specific": g.specific}))
        .collect();
    let server_path = v.server_path().map(|s| {
        json!({
            "path": s.path,
            "decoded_slash": s.decoded_slash,
            "decoded_backslash": s.decoded_backslash,
            "merged_slashes": s.merged_slashes,
        })
    });
    json!({
        "url": url,
        "allowed": v.allowed(),
        "agent": agent,
        "profile": v.profile().as_str(),
        "reason": reason,
        "rule": rule,
        "readings_disagree": v.readings_disagree(),
        "server_path": server_path,
        "cut_line": v.cut_line(),
        "groups": groups,
        "explanation": v.to_string(),
    })
}
