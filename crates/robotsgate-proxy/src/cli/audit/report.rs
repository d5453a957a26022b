//! `robotsgate audit report`: one self-contained HTML file for a compliance reviewer. The
//! log is read once, in bounded memory: the same pass checks it against its checkpoints
//! and counts what the report shows.

use std::borrow::Cow;
use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use serde::Deserialize;

use super::{LogSet, log_paths, open_log, progress_bar, read_keys, total_bytes};
use robotsgate::Outcome;
use robotsgate::audit::lines::Lines;
use robotsgate::audit::verify::{Options, Signatures, Verification, Watch, verify};
use robotsgate::identity::httpsig::Price;

#[derive(Debug, Args)]
pub struct ReportArgs {
    #[command(flatten)]
    set: LogSet,
    /// Where to write the report.
    #[arg(long, value_name = "FILE")]
    out: PathBuf,
    /// Rows in each "most often" table (at least 1: an empty table would read as "none").
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u16).range(1..))]
    top: u16,
}

pub fn run(args: ReportArgs) -> anyhow::Result<ExitCode> {
    let (keys, key_text) = read_keys(&args.set.keys)?;
    let paths = log_paths(&args.set.logs, args.set.with_rotated)?;
    let files = paths.iter().map(|p| open_log(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let bar = progress_bar(total_bytes(&paths), "reading");
    let mut stats = Stats::new(bar.clone());
    let options = Options { keys: &keys, partial: args.set.partial };
    let v = verify(files, &options, &mut stats);
    bar.finish_and_clear();
    if let Some(e) = &v.error {
        anyhow::bail!("{e}");
    }
    if v.problem.is_some() {
        // The check stopped at the first problem: count every record all the same (a
        // second pass, only for a log that did not verify).
        let bar = progress_bar(total_bytes(&paths), "counting");
        stats = Stats::new(bar.clone());
        for p in &paths {
            let file = std::fs::File::open(p).with_context(|| format!("cannot open {}", p.display()))?;
            let name = p.display().to_string();
            let mut lines = Lines::new(std::io::BufReader::with_capacity(256 * 1024, file));
            let mut n = 0;
            while let Some(l) = lines.next_line().with_context(|| format!("cannot read {name}"))? {
                n += 1;
                if let (Some(c), true) = (l.content, l.terminated) {
                    stats.line(&name, n, c);
                }
            }
            stats.progress(lines.bytes_read);
        }
        bar.finish_and_clear();
    }
    let html = render(&stats, &v, key_text.as_deref(), &paths, usize::from(args.top));
    std::fs::write(&args.out, html).with_context(|| format!("cannot write {}", args.out.display()))?;
    println!(
        "{}: {} decisions, {} to {}; the log {}",
        args.out.display(),
        stats.decisions,
        stats.first.map(fmt_time).unwrap_or_default(),
        stats.last.map(fmt_time).unwrap_or_default(),
        if !v.ok() {
            "did NOT verify (see the report)"
        } else if super::verify::nothing_verified(&v) {
            "has no checkpoints: it could NOT be verified"
        } else {
            "verified"
        }
    );
    Ok(ExitCode::SUCCESS)
}

/// The outcome classes of the chart, in stacking order.
const OUTCOMES: [(&str, &str); 6] = [
    (Outcome::Allowed.as_str(), "#4c9a6a"),
    (Outcome::WouldDisallow.as_str(), "#e0a030"),
    (Outcome::Disallowed.as_str(), "#c8493a"),
    (Outcome::UsageRefused.as_str(), "#8a4fb0"),
    (Outcome::DestinationDenied.as_str(), "#5a6b7d"),
    ("other", "#a0a0a0"),
];

fn outcome_class(outcome: &str) -> usize {
    match outcome.parse() {
        Ok(Outcome::Allowed) => 0,
        Ok(Outcome::WouldDisallow | Outcome::WouldRefuseUsage) => 1,
        Ok(Outcome::Disallowed) => 2,
        Ok(Outcome::UsageRefused) => 3,
        Ok(Outcome::DestinationDenied) => 4,
        _ => 5,
    }
}

/// Distinct keys counted exactly per table; more are counted together as "others".
const MAX_KEYS: usize = 100_000;
/// Time buckets before they are merged two by two.
const MAX_BUCKETS: usize = 4_000;

/// The longest key a table keeps (a longer one is cut, and ends in `…`): keys come from
/// the log, and a rule's text may be 500 KiB.
const MAX_KEY_BYTES: usize = 1024;
/// Distinct values kept of a field that robotsgate fills from its own vocabulary (outcomes,
/// reasons, record types: a few dozen in a log it wrote); more are counted together.
const MAX_WORDS: usize = 256;

/// `key`, cut to [`MAX_KEY_BYTES`].
fn cut_key(key: &str) -> Cow<'_, str> {
    if key.len() <= MAX_KEY_BYTES {
        return Cow::Borrowed(key);
    }
    let end = (0..=MAX_KEY_BYTES).rev().find(|&i| key.is_char_boundary(i)).unwrap_or(0);
    Cow::Owned(format!("{}…", &key[..end]))
}

/// Counts `key` in `map`, a table of vocabulary words: at most [`MAX_WORDS`] of them,
/// others under "(other values)".
fn count_word(map: &mut BTreeMap<String, u64>, key: &str) {
    let key = cut_key(key);
    if let Some(c) = map.get_mut(&*key) {
        *c += 1;
    } else if map.len() < MAX_WORDS {
        map.insert(key.into_owned(), 1);
    } else {
        *map.entry("(other values)".to_owned()).or_default() += 1;
    }
}

/// Counts by key, exact for the first [`MAX_KEYS`] keys (their fields cut to
/// [`MAX_KEY_BYTES`] by the caller).
#[derive(Default)]
struct Counts {
    map: HashMap<String, u64>,
    others: u64,
}

impl Counts {
    fn add(&mut self, key: &str) {
        if let Some(c) = self.map.get_mut(key) {
            *c += 1;
        } else if self.map.len() < MAX_KEYS {
            self.map.insert(key.to_owned(), 1);
        } else {
            self.others += 1;
        }
    }

    fn top(&self, n: usize) -> Vec<(&str, u64)> {
        let mut v: Vec<(&str, u64)> = self.map.iter().map(|(k, &c)| (k.as_str(), c)).collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        v.truncate(n);
        v
    }
}

/// What the report shows, counted as the log streams by.
struct Stats {
    bar: indicatif::ProgressBar,
    first: Option<i64>,
    last: Option<i64>,
    decisions: u64,
    by_outcome: BTreeMap<String, u64>,
    by_reason: BTreeMap<String, u64>,
    /// Seconds per bucket; bucket start (Unix ms) -> counts per outcome class.
    bucket_ms: i64,
    buckets: BTreeMap<i64, [u64; OUTCOMES.len()]>,
    refused_origins: Counts,
    rules: Counts,
    fetches: u64,
    fetch_failures: BTreeMap<String, (u64, String)>,
    waits: Waits,
    opens: BTreeMap<String, u64>,
    lost_records: u64,
    write_errors: u64,
    rotations: u64,
    not_records: u64,
    other_types: BTreeMap<String, u64>,
    /// Refusal records (robotsgate's own answers without a decision), by kind.
    own_answers: BTreeMap<String, u64>,
    own_total: u64,
    /// Ingress records (`robotsgate ingress`): per bot (product token), at most
    /// [`MAX_BOTS`] bots (more are counted together).
    bots: BTreeMap<String, Bot>,
    /// Pay per crawl (`payment` records): per day, origin and currency, at most
    /// [`MAX_PAID_ROWS`] rows (more are counted in `paid_overflow`).
    paid: BTreeMap<(String, String, String), Paid>,
    paid_overflow: u64,
}

/// Rows of the pay-per-crawl table kept.
const MAX_PAID_ROWS: usize = 10_000;

/// One row of the pay-per-crawl table.
#[derive(Default)]
struct Paid {
    /// `402` answers with a price.
    asked: u64,
    /// Paid answers (a `crawler-charged`).
    paid: u64,
    /// The total charged, in millionths of the currency.
    micros: u64,
}

/// Bots counted one by one in the ingress view; more share one row.
const MAX_BOTS: usize = 10_000;

/// One bot's compliance, from its ingress records.
#[derive(Default)]
struct Bot {
    requests: u64,
    refused: u64,
    paced: u64,
    would: u64,
    robots_fetches: u64,
    first: Option<i64>,
    last: Option<i64>,
    /// Identity verdicts: verified ones by method (`signature`, `ip_range`,
    /// `reverse_dns`), the others by verdict and why (`failed/bad_signature`,
    /// `unverified/pending`); a few keys at most.
    identity: BTreeMap<String, u64>,
    /// Failed ones held to `*` (`impersonators = "star"`) or let in as what they claim
    /// (`"allow"`).
    held_to_star: u64,
    let_in_failed: u64,
}

/// Identity verdict kinds kept per bot (the methods, and the other verdicts by why).
const MAX_IDENTITY_KINDS: usize = 24;

/// Pacing waits, when decision records carry them.
#[derive(Default)]
struct Waits {
    count: u64,
    waited: u64,
    total_ms: f64,
    max_ms: f64,
    /// <10 ms, <100 ms, <1 s, <10 s, more.
    histogram: [u64; 5],
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Rec<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    time: Cow<'a, str>,
    #[serde(borrow)]
    outcome: Cow<'a, str>,
    #[serde(borrow)]
    reason: Cow<'a, str>,
    #[serde(borrow)]
    origin: Cow<'a, str>,
    #[serde(borrow)]
    rule: Option<RuleRec<'a>>,
    #[serde(borrow)]
    result: Cow<'a, str>,
    #[serde(borrow)]
    cause_class: Option<Cow<'a, str>>,
    status: Option<u16>,
    #[serde(borrow)]
    event: Cow<'a, str>,
    #[serde(borrow)]
    previous_run: Option<Cow<'a, str>>,
    lost_records: Option<u64>,
    wait_ms: Option<f64>,
    pacing_wait_ms: Option<f64>,
    pacing: Option<Pacing>,
    #[serde(borrow)]
    token: Option<Cow<'a, str>>,
    #[serde(borrow)]
    identity: Option<Cow<'a, str>>,
    #[serde(borrow)]
    identity_method: Option<Cow<'a, str>>,
    #[serde(borrow)]
    identity_why: Option<Cow<'a, str>>,
    #[serde(borrow)]
    identity_policy: Option<Cow<'a, str>>,
    #[serde(borrow)]
    price: Option<Cow<'a, str>>,
    #[serde(borrow)]
    charged: Option<Cow<'a, str>>,
    #[serde(borrow)]
    refusal: Option<Cow<'a, str>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RuleRec<'a> {
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    pattern: Cow<'a, str>,
    line: u64,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Pacing {
    wait_ms: Option<f64>,
}

impl Stats {
    fn new(bar: indicatif::ProgressBar) -> Stats {
        Stats {
            bar,
            first: None,
            last: None,
            decisions: 0,
            by_outcome: BTreeMap::new(),
            by_reason: BTreeMap::new(),
            bucket_ms: 60_000,
            buckets: BTreeMap::new(),
            refused_origins: Counts::default(),
            rules: Counts::default(),
            fetches: 0,
            fetch_failures: BTreeMap::new(),
            waits: Waits::default(),
            opens: BTreeMap::new(),
            lost_records: 0,
            write_errors: 0,
            rotations: 0,
            not_records: 0,
            other_types: BTreeMap::new(),
            own_answers: BTreeMap::new(),
            own_total: 0,
            bots: BTreeMap::new(),
            paid: BTreeMap::new(),
            paid_overflow: 0,
        }
    }

    fn record(&mut self, r: &Rec<'_>) {
        let t = parse_time(&r.time);
        if let Some(t) = t {
            self.first = Some(self.first.map_or(t, |f| f.min(t)));
            self.last = Some(self.last.map_or(t, |l| l.max(t)));
        }
        match &*r.kind {
            "decision" => {
                self.decisions += 1;
                count_word(&mut self.by_outcome, &r.outcome);
                count_word(&mut self.by_reason, &r.reason);
                if let Some(t) = t {
                    self.bucket(t, outcome_class(&r.outcome));
                }
                if matches!(r.outcome.parse(), Ok(Outcome::Disallowed | Outcome::UsageRefused)) {
                    self.refused_origins.add(&cut_key(&r.origin));
                }
                if let Some(rule) = &r.rule {
                    // Fields joined by U+001F, which a field of a hostile log may hold too:
                    // shown as U+FFFD there, it cannot move the text into another column.
                    let field = |f: &str| cut_key(f).replace('\u{1f}', "\u{fffd}");
                    let key = format!(
                        "{}\u{1f}{}\u{1f}{}: {}\u{1f}{}",
                        field(&r.origin),
                        rule.line,
                        field(&rule.kind),
                        field(&rule.pattern),
                        field(&r.outcome)
                    );
                    self.rules.add(&key);
                }
                let wait = r.pacing.as_ref().and_then(|p| p.wait_ms).or(r.pacing_wait_ms).or(r.wait_ms);
                if let Some(w) = wait.filter(|w| w.is_finite() && *w >= 0.0) {
                    let ws = &mut self.waits;
                    ws.count += 1;
                    if w > 0.0 {
                        ws.waited += 1;
                    }
                    ws.total_ms += w;
                    ws.max_ms = ws.max_ms.max(w);
                    let i = [10.0, 100.0, 1000.0, 10_000.0].iter().position(|&b| w < b).unwrap_or(4);
                    ws.histogram[i] += 1;
                }
            }
            "fetch" => {
                self.fetches += 1;
                if r.result != "success" {
                    let kind = match (&*r.result, &r.cause_class) {
                        ("unreachable", Some(c)) => format!("unreachable: {c}"),
                        ("unavailable", _) => format!(
                            "unavailable ({}): no restrictions",
                            r.status.map_or("4xx".into(), |s| s.to_string())
                        ),
                        (other, _) => other.to_owned(),
                    };
                    let kind = match cut_key(&kind) {
                        k if self.fetch_failures.contains_key(&*k)
                            || self.fetch_failures.len() < MAX_WORDS =>
                        {
                            k.into_owned()
                        }
                        _ => "(other failures)".to_owned(),
                    };
                    let e = self.fetch_failures.entry(kind).or_insert((0, cut_key(&r.origin).into_owned()));
                    e.0 += 1;
                }
            }
            "log" => match &*r.event {
                "open" => {
                    count_word(&mut self.opens, r.previous_run.as_deref().unwrap_or("?"));
                }
                "write-error" => {
                    self.write_errors += 1;
                    self.lost_records += r.lost_records.unwrap_or(0);
                }
                "rotate" => self.rotations += 1,
                _ => {}
            },
            "ingress" => {
                let token = cut_key(r.token.as_deref().unwrap_or("(unknown agent)"));
                let token = &*token;
                let key = if self.bots.contains_key(token) || self.bots.len() < MAX_BOTS {
                    token
                } else {
                    "(other bots)"
                };
                let bot = self.bots.entry(key.to_owned()).or_default();
                match r.outcome.parse() {
                    Ok(Outcome::RobotsTxt) => bot.robots_fetches += 1,
                    outcome => {
                        bot.requests += 1;
                        match outcome {
                            Ok(
                                Outcome::Disallowed
                                | Outcome::UsageRefused
                                | Outcome::IdentityFailed
                                | Outcome::IdentityUnverified,
                            ) => bot.refused += 1,
                            Ok(Outcome::Paced) => bot.paced += 1,
                            _ if r.outcome.starts_with("would-") => bot.would += 1,
                            _ => {}
                        }
                    }
                }
                let kind =
                    match (r.identity.as_deref(), r.identity_method.as_deref(), r.identity_why.as_deref()) {
                        (Some("verified"), Some(method), _) => Some(method.to_owned()),
                        (Some(verdict), _, Some(why)) => Some(format!("{verdict}/{why}")),
                        (Some(verdict), _, None) => Some(verdict.to_owned()),
                        (None, _, _) => None,
                    };
                if let Some(kind) = kind
                    && (bot.identity.contains_key(&kind) || bot.identity.len() < MAX_IDENTITY_KINDS)
                {
                    *bot.identity.entry(kind).or_default() += 1;
                }
                match r.identity_policy.as_deref() {
                    Some("star") => bot.held_to_star += 1,
                    Some("allow") => bot.let_in_failed += 1,
                    _ => {}
                }
                if let Some(t) = t {
                    bot.first = Some(bot.first.map_or(t, |f| f.min(t)));
                    bot.last = Some(bot.last.map_or(t, |l| l.max(t)));
                }
            }
            "payment" => self.payment(r),
            "refusal" => {
                self.own_total += 1;
                count_word(&mut self.own_answers, r.refusal.as_deref().unwrap_or("(no kind)"));
            }
            other => count_word(&mut self.other_types, other),
        }
    }

    /// A `payment` record: counted per day (UTC, from its time), origin and currency.
    fn payment(&mut self, r: &Rec<'_>) {
        // A `crawler-error` answer without a price asked nothing.
        if r.price.is_none() && r.charged.is_none() {
            return;
        }
        let charged = r.charged.as_deref().and_then(|c| c.parse::<Price>().ok());
        let currency = match (&charged, r.price.as_deref().and_then(|p| p.parse::<Price>().ok())) {
            (Some(c), _) => c.currency().to_owned(),
            (None, Some(p)) => p.currency().to_owned(),
            (None, None) => String::new(),
        };
        let day: String = r.time.chars().take(10).collect();
        let key = (day, cut_key(&r.origin).into_owned(), currency);
        if !self.paid.contains_key(&key) && self.paid.len() >= MAX_PAID_ROWS {
            self.paid_overflow += 1;
            return;
        }
        let row = self.paid.entry(key).or_default();
        row.asked += 1;
        if let Some(c) = charged {
            row.paid += 1;
            row.micros = row.micros.saturating_add(c.micros());
        }
    }

    fn bucket(&mut self, t: i64, class: usize) {
        let key = t.div_euclid(self.bucket_ms) * self.bucket_ms;
        self.buckets.entry(key).or_insert([0; OUTCOMES.len()])[class] += 1;
        if self.buckets.len() > MAX_BUCKETS {
            // Twice as wide: bounded memory for any period.
            self.bucket_ms *= 2;
            let old = std::mem::take(&mut self.buckets);
            for (k, counts) in old {
                let e = self
                    .buckets
                    .entry(k.div_euclid(self.bucket_ms) * self.bucket_ms)
                    .or_insert([0; OUTCOMES.len()]);
                for (a, b) in e.iter_mut().zip(counts) {
                    *a += b;
                }
            }
        }
    }
}

impl Watch for Stats {
    fn progress(&mut self, bytes: u64) {
        self.bar.inc(bytes);
    }

    fn line(&mut self, _file: &str, _line: u64, content: &[u8]) {
        match serde_json::from_slice::<Rec<'_>>(content) {
            Ok(r) => self.record(&r),
            Err(_) => self.not_records += 1,
        }
    }
}

/// Milliseconds since the Unix epoch of an RFC 3339 time.
fn parse_time(s: &str) -> Option<i64> {
    let t = time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).ok()?;
    Some((t.unix_timestamp_nanos() / 1_000_000) as i64)
}

fn fmt_time(ms: i64) -> String {
    let d = std::time::Duration::from_millis(ms.unsigned_abs());
    let t = match ms {
        0.. => std::time::UNIX_EPOCH.checked_add(d),
        _ => std::time::UNIX_EPOCH.checked_sub(d),
    }
    .unwrap_or(std::time::UNIX_EPOCH);
    let s = robotsgate::audit::rfc3339(t);
    // 2026-11-23T10:54:58.492Z -> 2026-11-23 10:54:58 UTC
    format!("{} {} UTC", &s[..10], &s[11..19])
}

/// HTML-escaped text.
fn esc(s: &str) -> String {
    let mut o = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => o.push_str("&amp;"),
            '<' => o.push_str("&lt;"),
            '>' => o.push_str("&gt;"),
            '"' => o.push_str("&quot;"),
            '\'' => o.push_str("&#39;"),
            c => o.push(c),
        }
    }
    o
}

/// `12,345`.
fn num(n: u64) -> String {
    let s = n.to_string();
    let mut o = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            o.push(',');
        }
        o.push(c);
    }
    o
}

fn pct(part: u64, whole: u64) -> String {
    if whole == 0 { "–".into() } else { format!("{:.1}%", part as f64 * 100.0 / whole as f64) }
}

const STYLE: &str = r#"
:root { --ink: #1d2329; --muted: #5b6670; --line: #d9dee3; --ok: #2f7d4f; --bad: #b3362a; --warn: #a66a00; }
* { box-sizing: border-box; }
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
       color: var(--ink); margin: 2rem auto; max-width: 1100px; padding: 0 1.5rem; line-height: 1.45; }
h1 { font-size: 1.6rem; margin: 0 0 .2rem; }
h2 { font-size: 1.15rem; margin: 2rem 0 .6rem; padding-bottom: .25rem; border-bottom: 1px solid var(--line); }
.sub { color: var(--muted); margin: 0 0 1rem; }
.status { border-radius: 6px; padding: .8rem 1rem; margin: 1rem 0; border: 1px solid; }
.status.ok { border-color: var(--ok); background: #eef7f1; }
.status.bad { border-color: var(--bad); background: #fbeeec; }
.status.warn { border-color: var(--warn); background: #fdf5e6; }
.status strong { font-size: 1.05rem; }
.cards { display: grid; grid-template-columns: repeat(auto-fit, minmax(150px, 1fr)); gap: .8rem; }
.card { border: 1px solid var(--line); border-radius: 6px; padding: .6rem .8rem; }
.card .n { font-size: 1.5rem; font-weight: 600; }
.card .l { color: var(--muted); font-size: .85rem; }
table { border-collapse: collapse; width: 100%; font-size: .9rem; }
th, td { text-align: left; padding: .3rem .5rem; border-bottom: 1px solid var(--line); vertical-align: top; }
th { color: var(--muted); font-weight: 600; }
td.n, th.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.mono { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .85rem; word-break: break-all; }
td.tok { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, monospace; font-size: .85rem; overflow-wrap: break-word; }
.bar { display: inline-block; height: .7rem; background: #c8493a; vertical-align: middle; border-radius: 2px; }
.legend span { display: inline-block; margin-right: 1rem; font-size: .85rem; }
.legend i { display: inline-block; width: .8rem; height: .8rem; margin-right: .3rem; vertical-align: -1px; border-radius: 2px; }
.note { color: var(--muted); font-size: .85rem; }
svg text { font-family: inherit; }
ul.plain { padding-left: 1.2rem; }
@media print { body { margin: 0; max-width: none; } h2 { break-after: avoid; } table, svg, .status { break-inside: avoid; } }
"#;

fn render(st: &Stats, v: &Verification, key: Option<&str>, paths: &[PathBuf], top: usize) -> String {
    let mut h = String::with_capacity(64 * 1024);
    let period = match (st.first, st.last) {
        (Some(a), Some(b)) => format!("{} – {}", fmt_time(a), fmt_time(b)),
        _ => "no records".into(),
    };
    let _ = write!(
        h,
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\
         <title>robotsgate audit report</title><style>{STYLE}</style></head><body>\n\
         <h1>robotsgate audit report</h1>\n<p class=\"sub\" id=\"period\">{}</p>\n",
        esc(&period)
    );
    let _ = writeln!(
        h,
        "<p class=\"note\">Made {} by robotsgate {} from {} file{}: {}.</p>",
        fmt_time(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as i64)
        ),
        env!("CARGO_PKG_VERSION"),
        paths.len(),
        if paths.len() == 1 { "" } else { "s" },
        paths
            .iter()
            .map(|p| format!("<code>{}</code>", esc(&p.display().to_string())))
            .collect::<Vec<_>>()
            .join(", ")
    );
    verification_section(&mut h, v, key);
    // The forward proxy's sections, unless the log is a site's alone (`robotsgate ingress`
    // writes no decision or fetch records): a site owner is not shown empty crawler tables.
    if st.decisions > 0 || st.fetches > 0 || st.bots.is_empty() {
        totals_section(&mut h, st);
        chart_section(&mut h, st);
        refused_section(&mut h, st, top);
        own_answers_section(&mut h, st);
        rules_section(&mut h, st, top);
        fetch_section(&mut h, st);
    }
    bots_section(&mut h, st, top);
    waits_section(&mut h, st);
    paid_section(&mut h, st);
    log_section(&mut h, st, v);
    h.push_str(
        "<h2>What this report cannot show</h2>\n<ul class=\"plain note\">\
         <li>Records after the last checkpoint are counted but not yet covered by one: they could have been changed \
         without a trace.</li>\
         <li>The log shows what robotsgate decided and wrote; that it is unchanged since then, not that the robots.txt \
         files were read correctly (<code>robotsgate audit explain</code> checks a decision against its robots.txt \
         snapshot).</li>\
         <li>Without signed checkpoints checked against the public key (<code>--key</code>), someone able to rewrite \
         the log and its checkpoint files together could do so unseen.</li></ul>\n</body></html>\n",
    );
    h
}

fn verification_section(h: &mut String, v: &Verification, key: Option<&str>) {
    h.push_str("<h2>Integrity</h2>\n");
    let (class, head) = match (&v.problem, v.signatures) {
        (Some(_), _) => ("bad", "The log did NOT verify"),
        (None, Signatures::Verified) => {
            ("ok", "The log verified, and every checkpoint is signed by a key given")
        }
        (None, Signatures::NotChecked) => (
            "warn",
            "The log verified against its checkpoints; their signatures were not checked (no key given)",
        ),
        (None, Signatures::Unsigned) => {
            ("warn", "The log verified against its checkpoints, which are not signed")
        }
        (None, Signatures::NoCheckpoints) => ("warn", "The log has no checkpoints: it could not be verified"),
    };
    let _ = write!(
        h,
        "<div class=\"status {class}\" id=\"verified\" data-ok=\"{}\"><strong>{head}</strong>",
        v.ok() && !super::verify::nothing_verified(v)
    );
    if let Some(p) = &v.problem {
        let _ = write!(h, "<br>First problem: <code>{}</code>", esc(&p.to_string()));
        h.push_str(
            "<br>Checking stopped there; the totals below count every record of the files all the same, \
             and cannot be relied on. <code>robotsgate audit verify</code> says more.</div>\n",
        );
        return;
    }
    let _ = write!(
        h,
        "<br>{} records in {} file{}, {} checkpoint{} checked",
        num(v.leaves),
        v.files.len(),
        if v.files.len() == 1 { "" } else { "s" },
        num(v.checkpoints),
        if v.checkpoints == 1 { "" } else { "s" }
    );
    if let Some(t) = &v.last_checkpoint_time {
        let covered =
            if v.covered == v.leaves { "all".to_owned() } else { format!("the first {}", num(v.covered)) };
        let _ = write!(h, "; {covered} covered by a checkpoint (the last at {})", esc(t));
    }
    if let Some(k) = key
        && v.signatures == Signatures::Verified
    {
        let _ = write!(h, "<br>Key: <code>{}</code>", esc(k));
    }
    h.push_str("</div>\n");
    if !v.uncovered.is_empty() || !v.notes.is_empty() {
        h.push_str("<ul class=\"plain note\">");
        for (f, a, b) in &v.uncovered {
            let _ = write!(h, "<li>Not yet covered by a checkpoint: {} lines {a}–{b}</li>", esc(f));
        }
        for n in v.notes.iter().take(20) {
            let _ = write!(h, "<li>{}</li>", esc(n));
        }
        if v.notes.len() > 20 {
            let _ = write!(
                h,
                "<li>… and {} more notes (see <code>robotsgate audit verify</code>)</li>",
                v.notes.len() - 20
            );
        }
        h.push_str("</ul>\n");
    }
}

fn totals_section(h: &mut String, st: &Stats) {
    h.push_str("<h2>Decisions</h2>\n<div class=\"cards\">");
    let _ = write!(
        h,
        "<div class=\"card\"><div class=\"n\" id=\"total-decisions\">{}</div><div class=\"l\">decisions</div></div>",
        num(st.decisions)
    );
    for (name, _) in OUTCOMES.iter().take(5) {
        let n = st.by_outcome.get(*name).copied().unwrap_or(0);
        if n == 0 && ![Outcome::Allowed, Outcome::Disallowed].iter().any(|o| o == name) {
            continue;
        }
        let _ = write!(
            h,
            "<div class=\"card\"><div class=\"n\" id=\"outcome-{name}\">{}</div><div class=\"l\">{name} ({})</div></div>",
            num(n),
            pct(n, st.decisions)
        );
    }
    let _ = write!(
        h,
        "<div class=\"card\"><div class=\"n\" id=\"total-fetches\">{}</div><div class=\"l\">robots.txt fetches</div></div>",
        num(st.fetches)
    );
    h.push_str("</div>\n<table id=\"by-outcome\"><tr><th>outcome</th><th class=\"n\">decisions</th><th class=\"n\">share</th></tr>");
    for (o, n) in &st.by_outcome {
        share_row(h, o, *n, st.decisions);
    }
    h.push_str("</table>\n<h2>Reasons</h2>\n<table id=\"by-reason\"><tr><th>reason</th><th class=\"n\">decisions</th><th class=\"n\">share</th></tr>");
    let mut reasons: Vec<_> = st.by_reason.iter().collect();
    reasons.sort_by(|a, b| b.1.cmp(a.1));
    for (r, n) in reasons {
        share_row(h, r, *n, st.decisions);
    }
    h.push_str("</table>\n");
}

/// A table row: a name, a count, and its share of `whole`.
fn share_row(h: &mut String, name: &str, n: u64, whole: u64) {
    let _ = write!(
        h,
        "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
        esc(name),
        num(n),
        pct(n, whole)
    );
}

/// A "nice" round number at or above `x` (1, 2, 5 × 10^n).
fn nice(x: u64) -> u64 {
    let mut m = 1u64;
    loop {
        for f in [1, 2, 5] {
            if f * m >= x {
                return f * m;
            }
        }
        m = m.saturating_mul(10);
        if m == u64::MAX {
            return x;
        }
    }
}

fn chart_section(h: &mut String, st: &Stats) {
    h.push_str("<h2>Decisions over time</h2>\n");
    let (Some(first), Some(_)) = (st.first, st.last) else {
        h.push_str("<p class=\"note\">No decisions.</p>\n");
        return;
    };
    if st.buckets.is_empty() {
        h.push_str("<p class=\"note\">No decisions.</p>\n");
        return;
    }
    // Bars over the decisions' span, at most ~120.
    let lo = *st.buckets.keys().next().unwrap_or(&first);
    let hi = *st.buckets.keys().next_back().unwrap_or(&first) + st.bucket_ms;
    let mut width = st.bucket_ms;
    while (hi - lo) / width > 120 {
        width *= 2;
    }
    let n = ((hi - lo + width - 1) / width).max(1) as usize;
    let mut bars = vec![[0u64; OUTCOMES.len()]; n];
    for (k, c) in &st.buckets {
        let i = (((k - lo) / width) as usize).min(n - 1);
        for (a, b) in bars[i].iter_mut().zip(c) {
            *a += b;
        }
    }
    let max = bars.iter().map(|b| b.iter().sum::<u64>()).max().unwrap_or(0).max(1);
    let ymax = nice(max);
    let (w, ht, left, right, top, bottom) = (1000.0, 300.0, 70.0, 10.0, 10.0, 45.0);
    let plot_w = w - left - right;
    let plot_h = ht - top - bottom;
    let bw = plot_w / n as f64;
    let _ = write!(
        h,
        "<svg id=\"chart\" viewBox=\"0 0 {w} {ht}\" width=\"100%\" role=\"img\" aria-label=\"decisions per {} over time\" \
         xmlns=\"http://www.w3.org/2000/svg\">",
        describe_width(width)
    );
    // Grid and y labels.
    for i in 0..=4 {
        let val = ymax * i / 4;
        let y = top + plot_h - plot_h * (i as f64 / 4.0);
        let _ = write!(
            h,
            "<line x1=\"{left}\" y1=\"{y:.1}\" x2=\"{:.1}\" y2=\"{y:.1}\" stroke=\"#e3e7ea\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\" fill=\"#5b6670\">{}</text>",
            w - right,
            left - 8.0,
            y + 4.0,
            num(val)
        );
    }
    for (i, b) in bars.iter().enumerate() {
        let x = left + bw * i as f64;
        let mut y = top + plot_h;
        let total: u64 = b.iter().sum();
        for (c, (name, color)) in OUTCOMES.iter().enumerate() {
            if b[c] == 0 {
                continue;
            }
            let hgt = plot_h * b[c] as f64 / ymax as f64;
            y -= hgt;
            let _ = write!(
                h,
                "<rect x=\"{:.2}\" y=\"{y:.2}\" width=\"{:.2}\" height=\"{hgt:.2}\" fill=\"{color}\">\
                 <title>{} from {}: {} {name} (of {})</title></rect>",
                x + bw * 0.1,
                (bw * 0.8).max(0.5),
                describe_width(width),
                fmt_time(lo + width * i as i64),
                num(b[c]),
                num(total)
            );
        }
    }
    // X labels: about six, at bar starts.
    let step = (n / 6).max(1);
    for i in (0..n).step_by(step) {
        let x = left + bw * i as f64;
        let t = fmt_time(lo + width * i as i64);
        let label = if hi - lo > 86_400_000 { t[..16].to_owned() } else { t[11..16].to_owned() };
        let _ = write!(
            h,
            "<line x1=\"{x:.1}\" y1=\"{:.1}\" x2=\"{x:.1}\" y2=\"{:.1}\" stroke=\"#9aa5ae\"/>\
             <text x=\"{x:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#5b6670\">{}</text>",
            top + plot_h,
            top + plot_h + 5.0,
            top + plot_h + 20.0,
            esc(&label)
        );
    }
    let _ = writeln!(
        h,
        "<line x1=\"{left}\" y1=\"{:.1}\" x2=\"{:.1}\" y2=\"{:.1}\" stroke=\"#5b6670\"/>\
         <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#5b6670\">time (UTC)</text></svg>",
        top + plot_h,
        w - right,
        top + plot_h,
        left + plot_w / 2.0,
        ht - 6.0,
    );
    h.push_str("<div class=\"legend\">");
    for (c, (name, color)) in OUTCOMES.iter().enumerate() {
        if bars.iter().any(|b| b[c] > 0) {
            let _ = write!(h, "<span><i style=\"background:{color}\"></i>{name}</span>");
        }
    }
    let _ = writeln!(
        h,
        "</div><p class=\"note\">One bar per {}; the tallest is {} decisions.</p>",
        describe_width(width),
        num(max)
    );
}

fn describe_width(ms: i64) -> String {
    let s = ms / 1000;
    match s {
        s if s % 86_400 == 0 => format!("{} day{}", s / 86_400, if s / 86_400 == 1 { "" } else { "s" }),
        s if s % 3600 == 0 => format!("{} hour{}", s / 3600, if s / 3600 == 1 { "" } else { "s" }),
        s if s % 60 == 0 => format!("{} minute{}", s / 60, if s / 60 == 1 { "" } else { "s" }),
        s => format!("{s} seconds"),
    }
}

fn refused_section(h: &mut String, st: &Stats, top: usize) {
    h.push_str("<h2>Origins most often refused</h2>\n");
    let rows = st.refused_origins.top(top);
    if rows.is_empty() {
        h.push_str("<p class=\"note\">No decision refused a request.</p>\n");
        return;
    }
    let refused: u64 = st.refused_origins.map.values().sum::<u64>() + st.refused_origins.others;
    let max = rows.first().map_or(1, |r| r.1).max(1);
    h.push_str("<table id=\"refused\"><tr><th>origin</th><th class=\"n\">refused</th><th class=\"n\">share</th><th></th></tr>");
    for (o, n) in rows {
        let _ = write!(
            h,
            "<tr><td class=\"mono\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td><span class=\"bar\" style=\"width:{:.0}px\"></span></td></tr>",
            esc(o),
            num(n),
            pct(n, refused),
            160.0 * n as f64 / max as f64
        );
    }
    h.push_str("</table>\n");
    if st.refused_origins.others > 0 {
        let _ = writeln!(
            h,
            "<p class=\"note\">More than {} origins: {} refusals of others are not itemised.</p>",
            num(MAX_KEYS as u64),
            num(st.refused_origins.others)
        );
    }
}

/// robotsgate's own answers without a decision (refusal records), by kind.
fn own_answers_section(h: &mut String, st: &Stats) {
    h.push_str("<h2>Answered by robotsgate without a decision</h2>\n");
    if st.own_total == 0 {
        h.push_str("<p class=\"note\">None: every request had a decision.</p>\n");
        return;
    }
    let _ = write!(
        h,
        "<p class=\"note\">{} answers robotsgate gave itself, before or without a robots.txt decision \
         (<code>refusal</code> records): a request it could not read, a missing proxy password, a tunnel whose \
         client asked for another host than its <code>CONNECT</code>'s, and the like.</p>\n\
         <table id=\"own-answers\"><tr><th>kind</th><th class=\"n\">answers</th><th class=\"n\">share</th></tr>",
        num(st.own_total)
    );
    let mut kinds: Vec<_> = st.own_answers.iter().collect();
    kinds.sort_by(|a, b| b.1.cmp(a.1));
    for (kind, n) in kinds {
        share_row(h, kind, *n, st.own_total);
    }
    h.push_str("</table>\n");
}

fn rules_section(h: &mut String, st: &Stats, top: usize) {
    h.push_str("<h2>Rules that decided most often</h2>\n");
    let rows = st.rules.top(top);
    if rows.is_empty() {
        h.push_str("<p class=\"note\">No decision was made by a rule.</p>\n");
        return;
    }
    h.push_str("<table id=\"rules\"><tr><th>origin</th><th class=\"n\">line</th><th>rule</th><th>outcome</th><th class=\"n\">decisions</th></tr>");
    for (k, n) in rows {
        let mut parts = k.split('\u{1f}');
        let (o, l, r, out) = (
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
            parts.next().unwrap_or(""),
        );
        let _ = write!(
            h,
            "<tr><td class=\"mono\">{}</td><td class=\"n\">{}</td><td class=\"mono\">{}</td><td>{}</td><td class=\"n\">{}</td></tr>",
            esc(o),
            esc(l),
            esc(r),
            esc(out),
            num(n)
        );
    }
    h.push_str("</table>\n");
}

/// The ingress view: per bot that visited the guarded site, what it asked and got.
fn bots_section(h: &mut String, st: &Stats, top: usize) {
    if st.bots.is_empty() {
        return;
    }
    h.push_str("<h2>Bots at the site (ingress)</h2>\n");
    h.push_str(
        "<table id=\"bots\"><tr><th>bot</th><th class=\"n\">requests</th><th class=\"n\">refused</th>\
         <th class=\"n\">paced</th><th class=\"n\">would be refused or paced</th><th>read robots.txt</th>\
         <th>first seen</th><th>last seen</th><th>identity</th></tr>",
    );
    let mut rows: Vec<_> = st.bots.iter().collect();
    rows.sort_by(|a, b| b.1.requests.cmp(&a.1.requests).then(a.0.cmp(b.0)));
    for (token, b) in rows.into_iter().take(top.max(1)) {
        let _ = write!(
            h,
            "<tr><td class=\"tok\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td>\
             <td class=\"n\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
            esc(token),
            num(b.requests),
            num(b.refused),
            num(b.paced),
            num(b.would),
            if b.robots_fetches > 0 { format!("yes ({})", num(b.robots_fetches)) } else { "no".into() },
            b.first.map(fmt_time).unwrap_or_default(),
            b.last.map(fmt_time).unwrap_or_default(),
            esc(&identity_cell(b)),
        );
    }
    let _ = writeln!(
        h,
        "</table>\n<p class=\"note\">From the ingress records (<code>robotsgate ingress</code>): the {} bots with the \
         most requests. Refused: disallowed by robots.txt, a usage preference or an identity check; paced: answered \
         429 for its Crawl-delay or Request-rate. Identity: the verdicts of its identity checks, verified ones by \
         method (signature: Web Bot Auth; ip_range: the operator's published addresses; reverse_dns: \
         forward-confirmed reverse DNS), failed and unverified ones by why; failures not refused were held to \
         the * group (impersonators = \"star\") or let in (\"allow\").</p>",
        num(top.max(1) as u64)
    );
}

/// `signature 2, ip_range 1, failed 3 (not_in_ranges 2, bad_signature 1; held to * 2),
/// unverified 1 (pending 1)`: verified ones by method first, then `failed` and
/// `unverified` with why, and what the policy did with failures it did not refuse.
fn identity_cell(bot: &Bot) -> String {
    let mut verified: Vec<(&str, u64)> = Vec::new();
    // verdict -> (total, [(why, n)])
    type Whys<'a> = (u64, Vec<(&'a str, u64)>);
    let mut other: BTreeMap<&str, Whys<'_>> = BTreeMap::new();
    for (k, n) in &bot.identity {
        match k.split_once('/') {
            Some((verdict, why)) => {
                let e = other.entry(verdict).or_default();
                e.0 += n;
                e.1.push((why, *n));
            }
            None if k == "failed" || k == "unverified" => other.entry(k).or_default().0 += n,
            None => verified.push((k, *n)),
        }
    }
    let mut parts: Vec<String> = verified.iter().map(|(k, n)| format!("{k} {}", num(*n))).collect();
    for verdict in ["failed", "unverified"] {
        let Some((total, mut whys)) = other.remove(verdict) else { continue };
        whys.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let mut inner: Vec<String> = Vec::new();
        if !whys.is_empty() {
            inner.push(whys.iter().map(|(w, n)| format!("{w} {}", num(*n))).collect::<Vec<_>>().join(", "));
        }
        if verdict == "failed" {
            let mut used = Vec::new();
            if bot.held_to_star > 0 {
                used.push(format!("held to * {}", num(bot.held_to_star)));
            }
            if bot.let_in_failed > 0 {
                used.push(format!("let in {}", num(bot.let_in_failed)));
            }
            if !used.is_empty() {
                inner.push(used.join(", "));
            }
        }
        if inner.is_empty() {
            parts.push(format!("{verdict} {}", num(total)));
        } else {
            parts.push(format!("{verdict} {} ({})", num(total), inner.join("; ")));
        }
    }
    parts.join(", ")
}

fn fetch_section(h: &mut String, st: &Stats) {
    h.push_str("<h2>robots.txt fetch failures</h2>\n");
    if st.fetch_failures.is_empty() {
        let _ = writeln!(h, "<p class=\"note\">None of the {} fetches failed.</p>", num(st.fetches));
        return;
    }
    h.push_str(
        "<table id=\"fetch-failures\"><tr><th>kind</th><th class=\"n\">fetches</th><th>e.g. origin</th></tr>",
    );
    let mut rows: Vec<_> = st.fetch_failures.iter().collect();
    rows.sort_by(|a, b| b.1.0.cmp(&a.1.0).then(a.0.cmp(b.0)));
    for (kind, (n, origin)) in rows {
        let _ = write!(
            h,
            "<tr><td>{}</td><td class=\"n\">{}</td><td class=\"mono\">{}</td></tr>",
            esc(kind),
            num(*n),
            esc(origin)
        );
    }
    let _ = write!(
        h,
        "</table>\n<p class=\"note\">Of {} robots.txt fetches. Unreachable means \"disallow all\" (RFC 9309) unless a recent copy was kept; unavailable (4xx) means no restrictions.</p>\n",
        num(st.fetches)
    );
}

fn waits_section(h: &mut String, st: &Stats) {
    let w = &st.waits;
    if w.count == 0 {
        return;
    }
    h.push_str("<h2>Pacing waits</h2>\n");
    let _ = write!(
        h,
        "<table id=\"waits\"><tr><th>decisions with a pacing figure</th><td class=\"n\">{}</td></tr>\
         <tr><th>held for their slot</th><td class=\"n\">{}</td></tr><tr><th>mean wait</th><td class=\"n\">{:.1} ms</td></tr>\
         <tr><th>longest wait</th><td class=\"n\">{:.1} ms</td></tr></table>\n<table><tr>",
        num(w.count),
        num(w.waited),
        w.total_ms / w.count as f64,
        w.max_ms
    );
    for l in ["&lt; 10 ms", "10–100 ms", "0.1–1 s", "1–10 s", "≥ 10 s"] {
        let _ = write!(h, "<th class=\"n\">{l}</th>");
    }
    h.push_str("</tr><tr>");
    for n in w.histogram {
        let _ = write!(h, "<td class=\"n\">{}</td>", num(n));
    }
    h.push_str("</tr></table>\n");
}

/// Pay per crawl: what origins asked, and what was paid, per day and origin.
fn paid_section(h: &mut String, st: &Stats) {
    if st.paid.is_empty() && st.paid_overflow == 0 {
        return;
    }
    h.push_str(
        "<h2>Pay per crawl</h2>\n<table id=\"paid\"><tr><th>day (UTC)</th><th>origin</th>\
         <th class=\"n\">asked to pay</th><th class=\"n\">paid</th><th class=\"n\">total charged</th></tr>",
    );
    for ((day, origin, currency), row) in &st.paid {
        let unit = 1_000_000u64;
        let total = format!("{currency} {}.{:06}", row.micros / unit, row.micros % unit);
        let _ = write!(
            h,
            "<tr><td>{}</td><td>{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td><td class=\"n\">{}</td></tr>",
            esc(day),
            esc(origin),
            num(row.asked),
            num(row.paid),
            esc(total.trim()),
        );
    }
    h.push_str("</table>\n");
    if st.paid_overflow > 0 {
        let _ = writeln!(
            h,
            "<p class=\"note\">{} more payment records not shown (too many rows).</p>",
            num(st.paid_overflow)
        );
    }
}

fn log_section(h: &mut String, st: &Stats, v: &Verification) {
    h.push_str("<h2>The log itself</h2>\n<table id=\"log-events\">");
    let opens: u64 = st.opens.values().sum();
    let unclean = st.opens.get("unclean").copied().unwrap_or(0);
    let torn = st.opens.get("torn").copied().unwrap_or(0);
    let rows = [
        ("process starts (open records)", num(opens)),
        ("after an unclean end (killed or crashed)", num(unclean)),
        ("after a torn last line", num(torn)),
        ("write errors", num(st.write_errors)),
        ("records lost to write errors", num(st.lost_records)),
        ("rotations", num(st.rotations)),
        ("lines that are not records", num(st.not_records)),
        ("files", num(v.files.len() as u64)),
    ];
    for (k, n) in rows {
        let _ = write!(h, "<tr><th>{k}</th><td class=\"n\">{n}</td></tr>");
    }
    for (t, n) in &st.other_types {
        let _ = write!(h, "<tr><th>{} records</th><td class=\"n\">{}</td></tr>", esc(t), num(*n));
    }
    h.push_str("</table>\n");
}
