//! The real `robotsgate ingress` binary in front of a real site (the test kit's scripted
//! origin on loopback), with curl and Python (requests, else urllib) as the bots and the
//! browser. Readiness is read from the child's stderr, never guessed with sleeps.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Stdio;

use serde_json::Value;
use support::*;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\nContent-Usage: search=y\n\n\
User-agent: Googlebot\nAllow: /\n\nUser-agent: *\nCrawl-delay: 60\nDisallow: /admin\n";
const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const CLAUDEBOT: &str = "Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";

struct Ingress {
    child: Child,
    addr: SocketAddr,
    lines: mpsc::UnboundedReceiver<String>,
    seen: Vec<String>,
}

impl Ingress {
    async fn start(args: &[&str]) -> Ingress {
        let mut child = Command::new(BIN)
            .arg("ingress")
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("NO_COLOR", "1")
            .env_remove("RUST_LOG")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("spawn robotsgate");
        let stderr = child.stderr.take().unwrap();
        let (tx, lines) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = reader.next_line().await {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut p = Ingress { child, addr: "0.0.0.0:0".parse().unwrap(), lines, seen: Vec::new() };
        let line = p.wait_line(|l| l.contains("robotsgate ingress is running")).await;
        let at = line.split("at http://").nth(1).expect("address in the running line");
        let addr: String = at.chars().take_while(|c| c.is_ascii_digit() || *c == '.' || *c == ':').collect();
        p.addr = addr.parse().unwrap();
        p
    }

    async fn wait_line(&mut self, pred: impl Fn(&str) -> bool) -> String {
        let (seen, lines) = (&mut self.seen, &mut self.lines);
        let found = within(async {
            while let Some(line) = lines.recv().await {
                seen.push(line.clone());
                if pred(&line) {
                    return Some(line);
                }
            }
            None
        })
        .await;
        match found {
            Some(Some(line)) => line,
            _ => panic!("robotsgate ingress did not say it; it said:\n{}", self.seen.join("\n")),
        }
    }

    /// SIGTERM, and the exit (the audit log is closed then).
    async fn stop(mut self) {
        let pid = self.child.id().unwrap().to_string();
        assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
        let status = bounded("robotsgate exits", self.child.wait()).await.unwrap();
        assert!(status.success(), "{status:?}: {}", self.seen.join("\n"));
    }

    fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }
}

/// curl: status, headers (lower-case names) and body.
async fn curl(url: &str, ua: &str, extra: &[&str]) -> (u16, String, Vec<u8>) {
    let dir = tempfile::tempdir().unwrap();
    let head = dir.path().join("head");
    let out = bounded(
        "curl",
        Command::new("curl")
            .args(["-s", "-A", ua, "-D"])
            .arg(&head)
            .args(extra)
            .arg(url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    let head = std::fs::read_to_string(&head).unwrap_or_default().to_ascii_lowercase();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    (status, head, out.stdout)
}

/// Python (requests, or urllib where requests is not installed): one line of JSON per
/// request: status, retry-after, x-robotsgate, content-usage.
async fn python(url: &str, ua: &str, times: usize) -> Vec<Value> {
    const SCRIPT: &str = r#"
import json, sys
url, ua, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
try:
    import requests
    s = requests.Session()
    for _ in range(n):
        r = s.get(url, headers={"User-Agent": ua}, timeout=10)
        print(json.dumps({"status": r.status_code, "retry_after": r.headers.get("retry-after"),
                          "kind": r.headers.get("x-robotsgate"), "usage": r.headers.get("content-usage")}))
except ImportError:
    import urllib.request, urllib.error
    for _ in range(n):
        req = urllib.request.Request(url, headers={"User-Agent": ua})
        try:
            r = urllib.request.urlopen(req, timeout=10)
        except urllib.error.HTTPError as e:
            r = e
        print(json.dumps({"status": r.status, "retry_after": r.headers.get("retry-after"),
                          "kind": r.headers.get("x-robotsgate"), "usage": r.headers.get("content-usage")}))
"#;
    let out = bounded(
        "python3",
        Command::new("python3").args(["-c", SCRIPT, url, ua, &times.to_string()]).kill_on_drop(true).output(),
    )
    .await
    .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).lines().map(|l| serde_json::from_str(l).unwrap()).collect()
}

fn ingress_records(path: &Path) -> Vec<Value> {
    read_jsonl(path).into_iter().filter(|r| r["type"] == "ingress").collect()
}

#[tokio::test]
async fn bots_are_held_to_the_sites_robots_txt_by_the_real_binary() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/private/x", Reply::ok("secret")),
        ("/page", Reply::ok("page")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let ingress = Ingress::start(&["--upstream", &site.base(), "--audit-log", log.to_str().unwrap()]).await;

    // GPTBot: disallowed, never reaches the site.
    let (status, head, body) = curl(&ingress.url("/private/x"), GPTBOT, &[]).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: disallowed"));
    assert!(String::from_utf8_lossy(&body).contains("line 2: disallow: /private"));
    assert_eq!(site.hits("/private/x"), 0);
    // robots.txt, byte for byte.
    let (status, _, body) = curl(&ingress.url("/robots.txt"), GPTBOT, &[]).await;
    assert_eq!((status, body.as_slice()), (200, ROBOTS.as_bytes()));
    // A browser goes through, with the proxy headers.
    let (status, _, body) = curl(&ingress.url("/private/x"), BROWSER, &[]).await;
    assert_eq!((status, body.as_slice()), (200, &b"secret"[..]));
    let seen = site.seen_for("/private/x");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen[0].headers["forwarded"].to_str().unwrap().split(';').next(), Some("for=127.0.0.1"));

    // Python bots: Googlebot allowed; GPTBot allowed with Content-Usage; ClaudeBot paced by
    // the `*` group's Crawl-delay.
    let g = python(&ingress.url("/page"), GOOGLEBOT, 2).await;
    assert!(g.iter().all(|r| r["status"] == 200), "{g:?}");
    let gpt = python(&ingress.url("/page"), GPTBOT, 1).await;
    assert_eq!((gpt[0]["status"].as_u64(), gpt[0]["usage"].as_str()), (Some(200), Some("search=y")));
    let c = python(&ingress.url("/page"), CLAUDEBOT, 2).await;
    assert_eq!(c[0]["status"], 200, "{c:?}");
    assert_eq!((c[1]["status"].as_u64(), c[1]["kind"].as_str()), (Some(429), Some("paced")), "{c:?}");
    let retry: u64 = c[1]["retry_after"].as_str().unwrap().parse().unwrap();
    assert!((1..=60).contains(&retry), "{retry}");
    assert_eq!(site.hits("/page"), 4);

    ingress.stop().await;
    let recs = ingress_records(&log);
    let outcomes: Vec<_> = recs
        .iter()
        .map(|r| (r["token"].as_str().unwrap_or("-").to_owned(), r["outcome"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("GPTBot", "disallowed"),
            ("GPTBot", "robots-txt"),
            ("Googlebot", "allowed"),
            ("Googlebot", "allowed"),
            ("GPTBot", "allowed"),
            ("ClaudeBot", "allowed"),
            ("ClaudeBot", "paced"),
        ]
        .map(|(a, b)| (a.to_owned(), b.to_owned()))
    );
    let sha = sha256_hex(ROBOTS.as_bytes());
    assert_eq!(recs[0]["rule"]["line"], 2);
    assert_eq!(recs[0]["robots_sha256"], sha);
    assert_eq!(recs[0]["robots_fetched"], Value::Null, "not fetched yet");
    // After its robots.txt fetch, GPTBot's records cite it.
    assert_eq!(recs[4]["robots_fetched_sha256"], sha);
    assert_eq!(recs[6]["status"], 429);
    assert_eq!(recs[0]["client"], "127.0.0.1");

    // The compliance scoreboard: `robotsgate audit report`'s ingress view.
    let report = dir.path().join("report.html");
    let out = std::process::Command::new(BIN)
        .args(["audit", "report", log.to_str().unwrap(), "--out", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let html = std::fs::read_to_string(&report).unwrap();
    let table =
        html.split("<table id=\"bots\">").nth(1).expect("the ingress view").split("</table>").next().unwrap();
    let row = |bot: &str| -> Vec<String> {
        let tr = table
            .split("<tr>")
            .find(|r| r.contains(&format!(">{bot}<")))
            .unwrap_or_else(|| panic!("{bot}: {table}"));
        tr.split("<td")
            .skip(1)
            .map(|c| c.split('>').nth(1).unwrap().split('<').next().unwrap().to_owned())
            .collect()
    };
    // bot, requests, refused, paced, would, read robots.txt, first, last
    assert_eq!(row("GPTBot")[1..6], ["2", "1", "0", "0", "yes (1)"]);
    assert_eq!(row("ClaudeBot")[1..6], ["2", "0", "1", "0", "no"]);
    assert_eq!(row("Googlebot")[1..6], ["2", "0", "0", "0", "no"]);
}

#[tokio::test]
async fn upstream_down_is_502_and_recorded() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let robots = dir.path().join("robots.txt");
    std::fs::write(&robots, ROBOTS).unwrap();
    let up = format!("http://127.0.0.1:{}", dead_port());
    let ingress = Ingress::start(&[
        "--upstream",
        &up,
        "--robots",
        robots.to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ])
    .await;
    let (status, head, _) = curl(&ingress.url("/page"), GPTBOT, &[]).await;
    assert_eq!(status, 502, "{head}");
    assert!(head.contains("x-robotsgate: upstream-unreachable"));
    // The file given is served and enforced, the site being down.
    let (status, _, body) = curl(&ingress.url("/robots.txt"), GPTBOT, &[]).await;
    assert_eq!((status, body.as_slice()), (200, ROBOTS.as_bytes()));
    assert_eq!(curl(&ingress.url("/private"), GPTBOT, &[]).await.0, 403);
    ingress.stop().await;
    let recs = ingress_records(&log);
    assert_eq!((recs[0]["outcome"].as_str(), recs[0]["status"].as_u64()), (Some("allowed"), Some(502)));
}

#[tokio::test]
async fn report_only_and_forwarded_headers_of_untrusted_and_trusted_peers() {
    let site =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/private/x", Reply::ok("secret"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--report-only", "--audit-log", log.to_str().unwrap()])
            .await;
    let forged = ["-H", "X-Forwarded-For: 203.0.113.9"];
    assert_eq!(curl(&ingress.url("/private/x"), GPTBOT, &forged).await.0, 200);
    assert_eq!(site.hits("/private/x"), 1);
    ingress.stop().await;
    let recs = ingress_records(&log);
    assert_eq!(recs[0]["outcome"], "would-disallow");
    assert_eq!(recs[0]["client"], "127.0.0.1", "an untrusted peer's X-Forwarded-For is ignored");

    let log2 = dir.path().join("audit2.jsonl");
    let ingress = Ingress::start(&[
        "--upstream",
        &site.base(),
        "--trusted-proxy",
        "127.0.0.0/8",
        "--audit-log",
        log2.to_str().unwrap(),
    ])
    .await;
    assert_eq!(curl(&ingress.url("/private/x"), GPTBOT, &forged).await.0, 403);
    ingress.stop().await;
    let recs = ingress_records(&log2);
    assert_eq!(recs[0]["client"], "203.0.113.9", "a trusted peer's X-Forwarded-For is believed");
}
