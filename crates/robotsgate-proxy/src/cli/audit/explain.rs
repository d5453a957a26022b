//! `robotsgate audit explain`: why a request was decided as it was, from its decision
//! record and the robots.txt snapshot it rested on (read by SHA-256), with the deciding
//! rule's line marked in the file's text.

use std::fs::File;
use std::io::{BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde_json::Value;

use super::{EXIT_FAILED, log_paths};
use robotsgate::audit::lines::Lines;
use robotsgate::audit::snapshot_path;
use robotsgate::rep::{self, Profile, RobotsTxt};
use robotsgate::{Outcome, ReasonClass};

#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// The log file (with --with-rotated, also those closed by rotation beside it).
    #[arg(value_name = "LOG")]
    log: PathBuf,
    /// The request_id of a decision record or an ingress record.
    #[arg(value_name = "REQUEST_ID", required_unless_present = "url", conflicts_with = "url")]
    request_id: Option<String>,
    /// Instead of a request id: the latest decision on this URL (as logged).
    #[arg(long, value_name = "URL")]
    url: Option<String>,
    /// The snapshot folder (default: where the log's fetch record says the snapshot is,
    /// else robotsgate-snapshots beside the log).
    #[arg(long, value_name = "DIR")]
    snapshots: Option<PathBuf>,
    /// Also search the files closed by rotation beside LOG.
    #[arg(long)]
    with_rotated: bool,
    /// The replica's configuration: with a [cluster] section, a snapshot missing from the
    /// folder is looked for in the fleet's Redis, where the replica that fetched the file
    /// keeps it (whichever replica decided).
    #[arg(long, value_name = "FILE")]
    config: Option<PathBuf>,
}

/// Lines of robots.txt shown around the deciding rule.
const CONTEXT: u32 = 3;

pub fn run(args: ExplainArgs) -> anyhow::Result<ExitCode> {
    let config = match &args.config {
        Some(path) => Some(crate::config::Config::load(path).map_err(|e| anyhow::anyhow!("{e}"))?),
        None => None,
    };
    let paths = log_paths(std::slice::from_ref(&args.log), args.with_rotated)?;
    // A decision record (the proxy's) by request_id or URL; an ingress record (the
    // site's side) by request_id.
    let want = |r: &Value| -> bool {
        match (&args.request_id, &args.url) {
            (Some(id), _) => {
                (r["type"] == "decision" || r["type"] == "ingress") && r["request_id"].as_str() == Some(id)
            }
            (None, Some(url)) => r["type"] == "decision" && r["url"].as_str() == Some(url),
            (None, None) => false,
        }
    };
    // The decision: the one with the id, or the latest on the URL. By id, a refusal record
    // keyed by the same decision (a tunnel refused after its `200`) is looked for too,
    // until the request's outcome record, written last.
    let mut found: Option<Value> = None;
    let mut refused_after: Option<Value> = None;
    scan(&paths, |r| {
        if found.is_some() && args.request_id.is_some() {
            if r["request_id"].as_str() == args.request_id.as_deref() {
                match r["type"].as_str() {
                    Some("refusal") => refused_after = Some(r),
                    Some("outcome") => return true,
                    _ => {}
                }
            }
            return false;
        }
        if want(&r) {
            let stop = args.request_id.is_some() && r["type"] == "ingress";
            found = Some(r);
            return stop;
        }
        false
    })?;
    let Some(d) = found else {
        match (&args.request_id, &args.url) {
            (Some(id), _) => {
                println!("no decision or ingress record with request_id {id} in {}", names(&paths))
            }
            (_, url) => println!("no decision on {} in {}", url.as_deref().unwrap_or(""), names(&paths)),
        }
        return Ok(ExitCode::from(EXIT_FAILED));
    };
    if d["type"] == "ingress" {
        std::io::stdout()
            .lock()
            .write_all(crate::cli::for_terminal(&super::explain_ingress::text(&d)).as_bytes())?;
        return Ok(ExitCode::SUCCESS);
    }
    let sha = d["robots"]["sha256"].as_str().map(str::to_owned);
    // The fetch record of that body, for where its snapshot was kept.
    let mut fetch: Option<Value> = None;
    if let Some(sha) = &sha {
        scan(&paths, |r| {
            if r["type"] == "fetch" && r["sha256"].as_str() == Some(sha) {
                fetch = Some(r);
            }
            false
        })?;
    }
    // Kept to its first 500 KiB when it went on past them: read as the decision read it
    // (`None`: no fetch record to say).
    let truncated = fetch.as_ref().map(|f| f["truncated"].as_bool().unwrap_or(false));
    let mut out = String::new();
    decision_text(&mut out, &d);
    if let Some(r) = &refused_after {
        out.push_str(&format!(
            "  then refused at {}: {} ({}; the client got the TLS alert or a close, not the status)\n",
            s(&r["time"]),
            s(&r["reason"]),
            s(&r["refusal"])
        ));
    }
    match &sha {
        None => no_body(&mut out, &d),
        // The hash names the snapshot's file: anything else would name another file.
        Some(sha) if !is_sha256_hex(sha) => out.push_str(&format!(
            "\nWARNING: the decision's robots.txt hash {} is not a SHA-256 (64 hex digits), so no snapshot is \
             looked up by it: the decision cannot be checked against the file it rested on (the log was altered \
             or damaged; `robotsgate audit verify` says where)\n",
            shown(sha)
        )),
        Some(sha) => {
            let candidates = snapshot_candidates(&args, &paths[0], sha, fetch.as_ref());
            let looked = candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ");
            match candidates.iter().find(|p| p.is_file()) {
                Some(path) => {
                    // A snapshot holds at most the 500 KiB read; a longer file is not one
                    // robotsgate wrote (its hash then says so), and is not read whole.
                    let mut body = Vec::new();
                    std::fs::File::open(path)
                        .and_then(|f| {
                            use std::io::Read as _;
                            f.take(rep::MAX_ROBOTS_TXT_BYTES as u64 + 1).read_to_end(&mut body)
                        })
                        .with_context(|| format!("cannot read {}", path.display()))?;
                    snapshot_text(&mut out, &d, &body, truncated, sha, &path.display().to_string())?;
                }
                None => match config.as_ref().map(|c| from_fleet(c, sha)) {
                    Some(Ok((body, source))) => {
                        let source = format!("{source} (not in: {looked})");
                        snapshot_text(&mut out, &d, &body, truncated, sha, &source)?;
                    }
                    not_there => out.push_str(&format!(
                        "\nWARNING: the robots.txt snapshot {sha}.txt is missing (looked in: {looked}{}): the decision \
                         cannot be checked against the file it rested on\n",
                        match not_there {
                            Some(Err(why)) => format!("; {why}"),
                            _ => String::new(),
                        }
                    )),
                },
            }
        }
    }
    std::io::stdout().lock().write_all(crate::cli::for_terminal(&out).as_bytes())?;
    Ok(ExitCode::SUCCESS)
}

fn names(paths: &[PathBuf]) -> String {
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// Calls `f` with each record of `paths`, in order, until it returns true.
fn scan(paths: &[PathBuf], mut f: impl FnMut(Value) -> bool) -> anyhow::Result<()> {
    for p in paths {
        let file = File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
        let mut lines = Lines::new(BufReader::with_capacity(256 * 1024, file));
        while let Some(l) = lines.next_line().with_context(|| format!("cannot read {}", p.display()))? {
            let Some(c) = l.content else { continue };
            if !l.terminated {
                continue;
            }
            if let Ok(r) = serde_json::from_slice::<Value>(c)
                && f(r)
            {
                return Ok(());
            }
        }
    }
    Ok(())
}

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// The decision, in words.
fn decision_text(out: &mut String, d: &Value) {
    out.push_str(&format!("Decision {} at {}\n", s(&d["request_id"]), s(&d["time"])));
    out.push_str(&format!(
        "  {} {}  (client {}, user {})\n",
        s(&d["method"]),
        s(&d["url"]),
        s(&d["client"]),
        s(&d["user"])
    ));
    out.push_str(&format!(
        "  outcome: {} ({} mode), reason: {}\n",
        s(&d["outcome"]),
        s(&d["mode"]),
        s(&d["reason"])
    ));
    out.push_str(&format!("  product token: {}, profile: {}\n", s(&d["agent"]), s(&d["profile"])));
    if d["path_visible"] == false {
        out.push_str("  the path was not visible (a CONNECT tunnel without interception): \"/\" was checked for the host\n");
    }
    let robots = &d["robots"];
    if robots.is_object() {
        let stale = if robots["stale"] == true { ", stale" } else { "" };
        out.push_str(&format!(
            "  robots.txt: {} -> status {}, fetched {} (copy {} s old{stale}), {} bytes{}\n",
            s(&robots["url"]),
            robots["status"],
            s(&robots["fetched_at"]),
            robots["age_s"].as_f64().map_or("?".into(), |a| format!("{a:.1}")),
            robots["bytes"],
            match robots["final_url"].as_str() {
                Some(f) if f != s(&robots["url"]) =>
                    format!(", after {} redirects to {f}", robots["redirects"]),
                _ => String::new(),
            }
        ));
        out.push_str(&format!("  sha256: {}\n", s(&robots["sha256"])));
    }
    out.push_str(&format!("  decided by: {}\n", s(&d["explanation"])));
    if let Some(o) = d["override_reason"].as_str() {
        out.push_str(&format!("  operator override: {o}\n"));
    }
    if d["usage"].is_object() {
        out.push_str(&format!("  usage preferences: {}\n", d["usage"]));
    }
}

/// A decision that rested on no robots.txt body: why.
fn no_body(out: &mut String, d: &Value) {
    let why = match s(&d["reason"]).parse() {
        Ok(ReasonClass::RobotsUnreachable) => format!(
            "robots.txt could not be fetched ({}): RFC 9309 treats that as \"disallow all\"",
            d["unreachable_cause"].as_str().unwrap_or("no cause recorded")
        ),
        Ok(ReasonClass::RobotsUnavailable) => format!(
            "robots.txt answered {} (4xx): RFC 9309 treats that as \"no restrictions\"",
            d["robots"]["status"]
        ),
        Ok(ReasonClass::RobotsRedirectLimit) => {
            "robots.txt redirected too many times: treated as unavailable (no restrictions)".into()
        }
        Ok(ReasonClass::DestinationDenied) => {
            "the destination was refused by robotsgate's guard; no robots.txt was fetched".into()
        }
        Ok(ReasonClass::Override) => "an operator override decided; no robots.txt rule applied".into(),
        Ok(ReasonClass::ClusterUnavailable) => {
            "the fleet's Redis could not be reached and cluster.on_error is \"refuse\": \
                                  answered 503 before robots.txt was looked at, nothing was sent"
                .into()
        }
        Ok(ReasonClass::RobotsTxt) => {
            "the request was for /robots.txt itself, which is always allowed".into()
        }
        _ => "no robots.txt body was read for this decision".into(),
    };
    out.push_str(&format!("\nNo rule applied: {why}.\n"));
}

/// Whether `sha` is a SHA-256 as the log writes it: 64 lowercase hex digits.
fn is_sha256_hex(sha: &str) -> bool {
    sha.len() == 64 && sha.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// A value from the log, quoted, cut to 80 characters.
fn shown(v: &str) -> String {
    match v.char_indices().nth(80) {
        Some((at, _)) => format!("{:?}...", &v[..at]),
        None => format!("{v:?}"),
    }
}

/// Where the snapshot with this hash may be.
fn snapshot_candidates(args: &ExplainArgs, log: &Path, sha: &str, fetch: Option<&Value>) -> Vec<PathBuf> {
    let mut c = Vec::new();
    if let Some(dir) = &args.snapshots {
        c.push(snapshot_path(dir, sha));
        return c;
    }
    let log_dir = log.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    // Where the fetch record says, if it names this snapshot's file (`<sha>.txt`): a log
    // may come from anywhere, and its path is not followed to other files.
    let name = format!("{sha}.txt");
    let named = |p: &&str| Path::new(p).file_name().is_some_and(|n| n == name.as_str());
    if let Some(p) = fetch.and_then(|f| f["snapshot"].as_str()).filter(named) {
        let p = PathBuf::from(p);
        if p.is_relative() {
            c.push(log_dir.join(&p));
        }
        c.push(p);
    }
    c.push(snapshot_path(&log_dir.join("robotsgate-snapshots"), sha));
    c
}

/// The body with this hash in the fleet's Redis, where the replica that fetched it keeps
/// it (`config`'s `[cluster]`), and where it was found; else why not.
#[cfg(feature = "cluster")]
fn from_fleet(config: &crate::config::Config, sha: &str) -> Result<(Vec<u8>, String), String> {
    let Some(c) = config.cluster_config()? else {
        return Err("--config has no [cluster] redis or redis_cluster to look in".into());
    };
    // The URL as it may be shown: without a password.
    let shown = |url: &str| match url::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_password(None);
            u.to_string()
        }
        Err(_) => url.to_owned(),
    };
    let url = match &c.redis {
        robotsgate::cluster::Redis::Server(url) => shown(url),
        robotsgate::cluster::Redis::Cluster(nodes) => {
            format!("Cluster [{}]", nodes.iter().map(|n| shown(n)).collect::<Vec<_>>().join(", "))
        }
    };
    let key = robotsgate::cluster::snapshot_key(&c.key_prefix, sha);
    match robotsgate::cluster::read_snapshot(&c, sha) {
        Ok(Some(body)) => Ok((body, format!("from the fleet's Redis {url}, key {key}"))),
        Ok(None) => Err(format!("not in the fleet's Redis either ({url}, key {key})")),
        Err(e) => Err(format!("the fleet's Redis {url} could not be asked: {e}")),
    }
}

/// Without fleet mode, no Redis to look in.
#[cfg(not(feature = "cluster"))]
fn from_fleet(_: &crate::config::Config, _: &str) -> Result<(Vec<u8>, String), String> {
    Err("this robotsgate was built without the feature \"cluster\": no Redis to look in".into())
}

/// The snapshot's text (`body`, read from `source`) around the deciding rule, with that
/// line marked, checked against its hash; and the decision checked again with this
/// robotsgate.
/// `truncated`: the body is the beginning of a longer file, as its fetch record says
/// (`None`: no fetch record found).
fn snapshot_text(
    out: &mut String,
    d: &Value,
    body: &[u8],
    truncated: Option<bool>,
    sha: &str,
    source: &str,
) -> anyhow::Result<()> {
    use sha2::Digest;
    let actual = hex::encode(sha2::Sha256::digest(body));
    if actual != sha {
        out.push_str(&format!(
            "\nWARNING: the snapshot {source} does not match its hash (its SHA-256 is {actual}): it was altered \
             or damaged; what follows is its text now, not necessarily what the decision rested on\n"
        ));
    } else {
        out.push_str(&format!("\nrobots.txt snapshot {source} (SHA-256 checked)\n"));
    }
    let text = String::from_utf8_lossy(body);
    let lines = robots_lines(&text);
    let rule_line = d["rule"]["line"].as_u64().and_then(|l| u32::try_from(l).ok());
    // The decision again, with this version of robotsgate, for the groups that applied.
    if truncated.is_none() && body.len() >= rep::MAX_ROBOTS_TXT_BYTES {
        out.push_str(
            "NOTE: no fetch record of this snapshot in the files given, so whether robots.txt went on past these \
             500 KiB is unknown: read as a whole file (give the rotated files too, --with-rotated)\n",
        );
    }
    let robots = match truncated {
        Some(true) => RobotsTxt::parse_truncated(body),
        _ => RobotsTxt::parse(body),
    };
    let profile = s(&d["profile"]).parse::<Profile>().unwrap_or(Profile::Conservative);
    let url = s(&d["url"]);
    let path_checked =
        if d["path_visible"] == false { "/".into() } else { rep::path_of_url(url).into_owned() };
    let verdict = robots.check_with(profile, s(&d["agent"]), &path_checked);
    let groups: Vec<u32> = verdict.groups().map(|g| g.line).collect();
    let mut show: Vec<(u32, u32)> = Vec::new();
    match rule_line {
        Some(l) => {
            for g in &groups {
                if *g < l.saturating_sub(CONTEXT) {
                    show.push((*g, *g));
                }
            }
            show.push((l.saturating_sub(CONTEXT).max(1), l + CONTEXT));
        }
        None => {
            for g in &groups {
                show.push((*g, g + 2 * CONTEXT));
            }
            if groups.is_empty() {
                show.push((1, 2 * CONTEXT + 1));
            }
        }
    }
    let mut last_shown = 0;
    for (from, to) in show {
        let from = from.max(last_shown + 1);
        if from > to {
            continue;
        }
        if last_shown > 0 && from > last_shown + 1 {
            out.push_str("       ...\n");
        }
        for n in from..=to.min(lines.len() as u32) {
            let mark = if Some(n) == rule_line { ">>" } else { "  " };
            let mut line = lines[(n - 1) as usize].to_owned();
            if line.len() > 200 {
                let cut = (0..=200).rev().find(|&i| line.is_char_boundary(i)).unwrap_or(0);
                line.truncate(cut);
                line.push('…');
            }
            out.push_str(&format!("  {mark} {n:>4}  {line}\n"));
            last_shown = n;
        }
    }
    if rule_line.is_none() {
        let why = match s(&d["reason"]).parse() {
            Ok(ReasonClass::NoRule) if groups.is_empty() => format!(
                "no group of this robots.txt names {} and there is no `*` group: nothing restricts it",
                s(&d["agent"])
            ),
            Ok(ReasonClass::NoRule) => format!(
                "the groups that apply to {} start at line {}, and none of their rules matches {path_checked}",
                s(&d["agent"]),
                groups.iter().map(u32::to_string).collect::<Vec<_>>().join(", "),
            ),
            Ok(ReasonClass::RobotsTxt) => {
                "the request was for /robots.txt itself, which is always allowed".into()
            }
            _ => format!("no rule decided ({})", s(&d["reason"])),
        };
        out.push_str(&format!("\nNo rule applied: {why}.\n"));
    }
    // Same verdict now?
    let logged = s(&d["outcome"]).parse();
    let logged_allowed = logged == Ok(Outcome::Allowed);
    let logged_disallowing = matches!(logged, Ok(Outcome::Disallowed | Outcome::WouldDisallow));
    if matches!(
        s(&d["reason"]).parse(),
        Ok(ReasonClass::AllowRule | ReasonClass::DisallowRule | ReasonClass::NoRule)
    ) {
        let same_verdict =
            (verdict.allowed() && logged_allowed) || (!verdict.allowed() && logged_disallowing);
        let same_rule = verdict.rule().map(|r| r.line) == rule_line;
        if same_verdict && same_rule {
            out.push_str(&format!(
                "\nChecked again with this robotsgate ({}): the same verdict, by {verdict}.\n",
                env!("CARGO_PKG_VERSION")
            ));
        } else {
            out.push_str(&format!(
                "\nNOTE: checked again with this robotsgate ({}), the verdict is {} by {verdict}: the engine that \
                 decided then read this file differently.\n",
                env!("CARGO_PKG_VERSION"),
                if verdict.allowed() { Outcome::Allowed } else { Outcome::Disallowed },
            ));
        }
    }
    Ok(())
}

/// The lines of a robots.txt as its parser numbers them: CR, LF and CRLF each end one (a
/// lone CR too, which `str::lines` does not break at).
fn robots_lines(text: &str) -> Vec<&str> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let (mut start, mut i) = (0, 0);
    while i < bytes.len() {
        match bytes[i] {
            b'\r' | b'\n' => {
                out.push(&text[start..i]);
                if bytes[i] == b'\r' && bytes.get(i + 1) == Some(&b'\n') {
                    i += 1;
                }
                start = i + 1;
            }
            _ => {}
        }
        i += 1;
    }
    if start < bytes.len() {
        out.push(&text[start..]);
    }
    out
}

#[cfg(test)]
mod line_tests {
    use super::robots_lines;

    #[test]
    fn lines_are_numbered_as_the_parser_numbers_them() {
        assert_eq!(robots_lines("a\rb\r\nc\nd"), ["a", "b", "c", "d"]);
        assert_eq!(robots_lines("a\r\r\nb\n"), ["a", "", "b"]);
        assert_eq!(robots_lines(""), Vec::<&str>::new());
        // The parser agrees: `d` is on line 4.
        let r = robotsgate::rep::RobotsTxt::parse(b"User-agent: *\rAllow: /ok\r\nDisallow: /\nx: y");
        let v = r.check("FooBot", "/no");
        assert_eq!(v.rule().map(|r| r.line), Some(3));
        assert_eq!(robots_lines("User-agent: *\rAllow: /ok\r\nDisallow: /\nx: y")[2], "Disallow: /");
    }
}
