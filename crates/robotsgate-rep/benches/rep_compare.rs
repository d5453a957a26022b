//! robotsgate's robots.txt engine against the `texting_robots` and `robotstxt` crates, on
//! the real robots.txt files of the corpus (`benches/support/corpus.rs`: the 153 files of
//! `../shared/corpus/robots/` when present, else the 28-file sample in `benches/corpus`),
//! measured in one run:
//!
//! - parse throughput (MB/s over the corpus, first 500 KiB of each file);
//! - time per check over a set of paths per file (mean, p50, p99 over every (file, path)
//!   pair; each pair timed as the mean of repeated checks);
//! - the same for robotsgate split by path: paths with `//`, `%2F` or `%5C` before the query
//!   (the conservative profile also checks their server form when allowed) and the others;
//! - first check after parsing (rule sets are built on first use), and heap per file.
//!
//! ```sh
//! cargo bench --bench rep_compare
//! ```
//!
//! `robotstxt` has no parsed form: its check parses the file again, as its API does.
//! `texting_robots` parses for one agent; its check is on that parsed form.

use std::hint::black_box;
use std::time::{Duration, Instant};

use robotsgate_rep::{MAX_ROBOTS_TXT_BYTES, RobotsTxt};

#[path = "support/corpus.rs"]
mod corpus;

const AGENT: &str = "FooBot";

struct KeepRules(Vec<(u32, bool, String)>);

impl robotstxt::RobotsParseHandler for KeepRules {
    fn handle_robots_start(&mut self) {}
    fn handle_robots_end(&mut self) {}
    fn handle_user_agent(&mut self, _: u32, _: &str) {}
    fn handle_allow(&mut self, line: u32, value: &str) {
        self.0.push((line, true, value.to_owned()));
    }
    fn handle_disallow(&mut self, line: u32, value: &str) {
        self.0.push((line, false, value.to_owned()));
    }
    fn handle_sitemap(&mut self, _: u32, _: &str) {}
    fn handle_unknown_action(&mut self, _: u32, _: &str, _: &str) {}
}

struct File {
    name: String,
    body: Vec<u8>,
    text: String,
    paths: Vec<String>,
}

/// Paths to check for a file: common ones, and ones made from its own rules (so that
/// rules actually match), including paths that only almost match.
fn paths_for(text: &str) -> Vec<String> {
    let mut paths: Vec<String> =
        ["/", "/index.html", "/search?q=robots", "/wp-admin/admin-ajax.php", "/a/b/c/d.pdf"]
            .iter()
            .map(|s| s.to_string())
            .collect();
    let mut from_rules = 0;
    for line in text.lines() {
        let l = line.split('#').next().unwrap_or("").trim();
        let Some((k, v)) = l.split_once(':') else { continue };
        let k = k.trim().to_ascii_lowercase();
        if k != "allow" && k != "disallow" {
            continue;
        }
        let v = v.trim();
        if !v.starts_with('/') {
            continue;
        }
        let concrete = v.trim_end_matches('$').replace('*', "x");
        paths.push(concrete.clone());
        paths.push(format!("{concrete}/more?x=1"));
        from_rules += 1;
        if from_rules >= 8 {
            break;
        }
    }
    paths
}

fn load() -> Vec<File> {
    let mut files: Vec<File> = corpus::files()
        .into_iter()
        .map(|path| {
            let mut body = std::fs::read(&path).expect("read");
            body.truncate(MAX_ROBOTS_TXT_BYTES);
            let text = String::from_utf8_lossy(&body).into_owned();
            let paths = paths_for(&text);
            File {
                name: path.file_name().unwrap_or_default().to_string_lossy().into_owned(),
                body,
                text,
                paths,
            }
        })
        .collect();
    files.sort_by(|a, b| a.name.cmp(&b.name));
    files
}

/// Best of `rounds` of `f` over the whole corpus, in seconds.
fn best_of(rounds: usize, mut f: impl FnMut()) -> f64 {
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::MAX, f64::min)
}

/// Mean time of one call of `f`, over enough repetitions to take about `budget`.
fn per_call(budget: Duration, mut f: impl FnMut()) -> f64 {
    let t = Instant::now();
    f();
    let once = t.elapsed().as_secs_f64().max(1e-8);
    let reps = ((budget.as_secs_f64() / once) as usize).clamp(3, 20_000);
    let t = Instant::now();
    for _ in 0..reps {
        f();
    }
    t.elapsed().as_secs_f64() / reps as f64
}

struct Stats {
    mean: f64,
    p50: f64,
    p99: f64,
    max: f64,
}

/// The path (before its query) has `//`, `%2F` or `%5C` (either case): a form that the
/// conservative profile also checks as servers read it. Written here, not taken from the
/// engine, so that this bench builds against engines without that check too.
fn has_server_forms(path: &str) -> bool {
    let p = path.split('?').next().unwrap_or("").to_ascii_uppercase();
    p.contains("//") || p.contains("%2F") || p.contains("%5C")
}

fn stats(mut v: Vec<f64>) -> Stats {
    v.sort_by(|a, b| a.total_cmp(b));
    let at = |q: f64| v[((v.len() - 1) as f64 * q).round() as usize];
    Stats { mean: v.iter().sum::<f64>() / v.len() as f64, p50: at(0.5), p99: at(0.99), max: v[v.len() - 1] }
}

fn main() {
    // `cargo bench` passes --bench; `cargo test --benches` runs it quickly with --test-ish
    // flags: do a tiny smoke run then.
    let quick = std::env::args().any(|a| a == "--quick" || a == "--test")
        || !std::env::args().any(|a| a == "--bench");
    let files = load();
    let total: usize = files.iter().map(|f| f.body.len()).sum();
    let rounds = if quick { 1 } else { 7 };
    println!("corpus: {} files, {:.2} MB (first 500 KiB of each)", files.len(), total as f64 / 1e6);

    // Parse throughput, interleaved so machine noise hits all three alike.
    let (mut ours, mut rtxt, mut texting) = (f64::MAX, f64::MAX, f64::MAX);
    for _ in 0..rounds {
        ours = ours.min(best_of(1, || {
            for f in &files {
                black_box(RobotsTxt::parse(&f.body));
            }
        }));
        rtxt = rtxt.min(best_of(1, || {
            for f in &files {
                let mut keep = KeepRules(Vec::new());
                robotstxt::parse_robotstxt(&f.text, &mut keep);
                black_box(keep);
            }
        }));
        texting = texting.min(best_of(1, || {
            for f in &files {
                black_box(texting_robots::Robot::new(AGENT, &f.body).ok());
            }
        }));
    }
    let mbps = |s: f64| total as f64 / s / 1e6;
    println!("\nparse (best of {rounds} rounds over the corpus)");
    println!("  {:<16} {:>9} {:>10}", "", "MB/s", "vs ours");
    println!("  {:<16} {:>9.1} {:>10}", "robotsgate", mbps(ours), "1.00x");
    println!("  {:<16} {:>9.1} {:>9.2}x", "robotstxt", mbps(rtxt), ours / rtxt);
    println!("  {:<16} {:>9.1} {:>9.2}x", "texting_robots", mbps(texting), ours / texting);

    // Checks.
    let budget = if quick { Duration::from_micros(200) } else { Duration::from_millis(4) };
    let (mut t_ours, mut t_rtxt, mut t_texting, mut t_first) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut forms = Vec::new();
    let mut heap = Vec::new();
    for f in &files {
        let robots = RobotsTxt::parse(&f.body);
        // First check after parse: builds the agent's rule set.
        let t = Instant::now();
        black_box(robots.check(AGENT, &f.paths[0]).allowed());
        t_first.push(t.elapsed().as_secs_f64());
        heap.push(robots.heap_bytes());
        let texting_robot = texting_robots::Robot::new(AGENT, &f.body).ok();
        for p in &f.paths {
            t_ours.push(per_call(budget, || {
                black_box(robots.check(AGENT, p).allowed());
            }));
            forms.push(has_server_forms(p));
            let url = format!("http://example.com{p}");
            if !quick || f.body.len() < 100_000 {
                t_rtxt.push(per_call(budget, || {
                    let mut matcher = robotstxt::DefaultMatcher::default();
                    black_box(matcher.one_agent_allowed_by_robots(&f.text, AGENT, &url));
                }));
            }
            if let Some(r) = &texting_robot {
                t_texting.push(per_call(budget, || {
                    black_box(r.allowed(&url));
                }));
            }
        }
    }
    let us = |s: f64| s * 1e6;
    let split: Vec<(&str, Vec<f64>)> = [(false, "without //, %2F, %5C"), (true, "with //, %2F or %5C")]
        .into_iter()
        .map(|(with, name)| {
            (name, t_ours.iter().zip(&forms).filter(|(_, f)| **f == with).map(|(t, _)| *t).collect())
        })
        .collect();
    let (o, r, x) = (stats(t_ours), stats(t_rtxt), stats(t_texting));
    println!(
        "\ncheck, µs per check over {} (file, path) pairs",
        files.iter().map(|f| f.paths.len()).sum::<usize>()
    );
    println!("  {:<16} {:>9} {:>9} {:>9} {:>10} {:>14}", "", "mean", "p50", "p99", "max", "mean vs ours");
    for (name, s) in [("robotsgate", &o), ("robotstxt", &r), ("texting_robots", &x)] {
        println!(
            "  {:<16} {:>9.3} {:>9.3} {:>9.3} {:>10.3} {:>13.1}x",
            name,
            us(s.mean),
            us(s.p50),
            us(s.p99),
            us(s.max),
            s.mean / o.mean
        );
    }
    for (name, t) in split {
        if t.is_empty() {
            continue;
        }
        let n = t.len();
        let s = stats(t);
        println!(
            "  robotsgate, paths {name} ({n} pairs): mean {:.3}, p50 {:.3}, p99 {:.3} µs",
            us(s.mean),
            us(s.p50),
            us(s.p99)
        );
    }
    let first = stats(t_first);
    println!(
        "\nfirst check after parse (builds the agent's rule set): mean {:.1} µs, p99 {:.1} µs, max {:.1} µs",
        us(first.mean),
        us(first.p99),
        us(first.max)
    );
    let heap_total: usize = heap.iter().sum();
    let h = stats(heap.iter().map(|&b| b as f64).collect());
    println!(
        "heap per parsed file (after one check): mean {:.1} KiB, p50 {:.1} KiB, max {:.1} KiB; corpus {:.1} MiB ({:.2}x its size)",
        h.mean / 1024.0,
        h.p50 / 1024.0,
        h.max / 1024.0,
        heap_total as f64 / 1048576.0,
        heap_total as f64 / total as f64
    );
}
