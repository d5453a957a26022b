//! The real `robotsgate ingress` binary in front of a real site (the test kit's scripted
//! origin on loopback), with curl and Python (requests, else urllib) as the bots and the
//! browser. Readiness is read from the child's stderr, never guessed with sleeps.

mod support;

use std::net::SocketAddr;
use std::path::Path;

use serde_json::Value;
use support::*;
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\nContent-Usage: search=y\n\n\
User-agent: Googlebot\nAllow: /\n\nUser-agent: *\nCrawl-delay: 60\nDisallow: /admin\n";
const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const CLAUDEBOT: &str = "Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";

struct Ingress {
    process: Spawned,
    addr: SocketAddr,
}

impl Ingress {
    async fn start(args: &[&str]) -> Ingress {
        let mut process = Spawned::start(BIN, &[&["ingress", "--listen", "127.0.0.1:0"], args].concat());
        let addr = process.running_at("robotsgate ingress is running").await;
        Ingress { process, addr }
    }

    /// SIGTERM, and the exit (the audit log is closed then).
    async fn stop(mut self) {
        self.process.signal("-TERM");
        let status = self.process.wait_exit().await;
        assert!(status.success(), "{status:?}: {}", self.process.seen.join("\n"));
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

/// The bots of most tests come from 127.0.0.1, in no operator's ranges: impersonators
/// when identity is checked.
const NO_VERIFY: &str = "[verify]\nenabled = false\n";

/// Writes a configuration file into `dir`; its path.
fn config_file(dir: &Path, text: &str) -> String {
    let path = dir.join(format!("robotsgate-{}.toml", sha256_hex(text.as_bytes())));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
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
    let cfg = config_file(dir.path(), NO_VERIFY);
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;

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
    let cfg = config_file(dir.path(), NO_VERIFY);
    let ingress = Ingress::start(&[
        "--upstream",
        &up,
        "--config",
        &cfg,
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
    let cfg = config_file(dir.path(), NO_VERIFY);
    let ingress = Ingress::start(&[
        "--upstream",
        &site.base(),
        "--report-only",
        "--config",
        &cfg,
        "--audit-log",
        log.to_str().unwrap(),
    ])
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
        "--config",
        &cfg,
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

/// An address in Google's common crawlers' list (the bundled copy: 66.249.64.0/27).
const GOOGLE_IP: &str = "66.249.64.7";

#[tokio::test]
async fn a_googlebot_from_outside_googles_ranges_is_an_impersonator() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("page")),
        ("/admin/x", Reply::ok("admin")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    // The published ranges only (no reverse DNS): 127.0.0.1 is not Google's.
    let ranges_only = |impersonators: &str| {
        format!(
            "[ingress]\nimpersonators = \"{impersonators}\"\ntrusted_proxies = [\"127.0.0.0/8\"]\n\n[verify]\nrdns = false\n"
        )
    };

    // impersonators = "refuse" (the default, written out).
    let log = dir.path().join("refuse.jsonl");
    let cfg = config_file(dir.path(), &ranges_only("refuse"));
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    let (status, head, body) = curl(&ingress.url("/page"), GOOGLEBOT, &[]).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    assert!(!body.is_empty());
    assert_eq!(site.hits("/page"), 0);
    // Behind the trusted proxy, a client address in Google's published ranges: verified.
    let xff = format!("X-Forwarded-For: {GOOGLE_IP}");
    let (status, head, body) = curl(&ingress.url("/page"), GOOGLEBOT, &["-H", &xff]).await;
    assert_eq!((status, body.as_slice()), (200, &b"page"[..]), "{head}");
    // A browser is not checked.
    let (status, _, body) = curl(&ingress.url("/page"), BROWSER, &[]).await;
    assert_eq!((status, body.as_slice()), (200, &b"page"[..]));
    assert_eq!(site.hits("/page"), 2);
    ingress.stop().await;
    let recs = ingress_records(&log);
    let seen: Vec<_> = recs
        .iter()
        .map(|r| (r["outcome"].as_str().unwrap(), r["identity"].as_str(), r["client"].as_str().unwrap()))
        .collect();
    assert_eq!(
        seen,
        [("identity-failed", Some("failed"), "127.0.0.1"), ("allowed", Some("verified"), GOOGLE_IP)],
        "{recs:?}"
    );
    assert_eq!(recs[0]["status"], 403);

    // impersonators = "allow": judged as Googlebot (whose group allows all); still failed.
    let log = dir.path().join("allow.jsonl");
    let cfg = config_file(dir.path(), &ranges_only("allow"));
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    let (status, head, body) = curl(&ingress.url("/admin/x"), GOOGLEBOT, &[]).await;
    assert_eq!((status, body.as_slice()), (200, &b"admin"[..]), "{head}");
    ingress.stop().await;
    let recs = ingress_records(&log);
    assert_eq!(
        (recs[0]["outcome"].as_str(), recs[0]["identity"].as_str()),
        (Some("allowed"), Some("failed"))
    );

    // impersonators = "star": held to `User-agent: *`, which disallows /admin.
    let log = dir.path().join("star.jsonl");
    let cfg = config_file(dir.path(), &ranges_only("star"));
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    let (status, head, _) = curl(&ingress.url("/admin/x"), GOOGLEBOT, &[]).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: disallowed"), "{head}");
    assert_eq!(site.hits("/admin/x"), 1);
    ingress.stop().await;
    let recs = ingress_records(&log);
    assert_eq!(recs[0]["identity"], "failed");
}

#[tokio::test]
async fn reverse_dns_asks_the_configured_server_and_waits_at_most_max_wait() {
    // A name server that never answers, given as address:port.
    let dns = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let site = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("page"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let cfg = config_file(
        dir.path(),
        &format!(
            "[dns]\nservers = [\"{}\"]\n\n[ingress]\ntrusted_proxies = [\"127.0.0.0/8\"]\n\n\
             [verify]\nmax_wait = \"50ms\"\n",
            dns.local_addr().unwrap()
        ),
    );
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    // 192.0.2.1 is not in Google's ranges; Google's reverse DNS decides, and its server
    // does not answer in time: unverified, judged as Googlebot.
    let xff = ["-H", "X-Forwarded-For: 192.0.2.1"];
    let (status, head, body) = curl(&ingress.url("/page"), GOOGLEBOT, &xff).await;
    assert_eq!((status, body.as_slice()), (200, &b"page"[..]), "{head}");
    // The PTR query for 192.0.2.1 reached the configured server.
    let mut buf = [0u8; 512];
    let (n, _) = bounded("the PTR query", dns.recv_from(&mut buf)).await.unwrap();
    let query = String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase();
    assert!(query.contains("in-addr") && query.contains("arpa") && query.contains("192"), "{query:?}");
    // 127.0.0.1's reverse name is localhost (the resolver answers it itself): not Google's.
    let (status, head, _) = curl(&ingress.url("/page"), GOOGLEBOT, &[]).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    // GPTBot's operator publishes no reverse DNS domain: its ranges decide.
    let (status, head, _) = curl(&ingress.url("/page"), GPTBOT, &xff).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    ingress.stop().await;
    let recs = ingress_records(&log);
    let seen: Vec<_> = recs.iter().map(|r| (r["token"].as_str(), r["identity"].as_str())).collect();
    assert_eq!(
        seen,
        [
            (Some("Googlebot"), Some("unverified")),
            (Some("Googlebot"), Some("failed")),
            (Some("GPTBot"), Some("failed"))
        ]
    );
}

#[tokio::test]
async fn a_bad_verify_configuration_or_list_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |cfg: String| {
        std::process::Command::new(BIN)
            .args([
                "ingress",
                "--listen",
                "127.0.0.1:0",
                "--upstream",
                "http://127.0.0.1:9",
                "--config",
                &cfg,
            ])
            .output()
            .unwrap()
    };
    let out = run(config_file(dir.path(), "[ingress]\nimpersonators = \"block\"\n"));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("impersonators"), "{err}");
    let missing = dir.path().join("missing.json");
    let out = run(config_file(
        dir.path(),
        &format!(
            "[[verify.operators]]\nname = \"Example\"\ntokens = [\"ExampleBot\"]\nip_lists = [{:?}]\n",
            missing.to_str().unwrap()
        ),
    ));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && err.contains("missing.json") && err.contains("Example"), "{err}");
}
