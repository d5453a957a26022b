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
    // The site is asked under its own name; the name the client used is passed on.
    let site_authority = site.base().trim_start_matches("http://").trim_end_matches('/').to_owned();
    assert_eq!(seen[0].headers["host"], site_authority.as_str());
    assert_eq!(seen[0].headers["x-forwarded-host"], ingress.addr.to_string().as_str());

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
    let html = audit_report(&log, dir.path());
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

/// SIGTERM with a request in flight: the listening socket closes at once (every worker,
/// one per CPU here, stops accepting on it), the request in flight is still answered, and
/// the process exits 0.
#[tokio::test]
async fn sigterm_closes_the_listener_and_drains_the_request_in_flight() {
    let release = Gate::new();
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/slow", Reply::ok("finished after SIGTERM").wait_gate(&release)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let cfg = config_file(dir.path(), NO_VERIFY);
    let mut ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    let (url, addr) = (ingress.url("/slow"), ingress.addr);
    let in_flight = tokio::spawn(async move { curl(&url, BROWSER, &[]).await });
    site.wait_hits("/slow", 1).await;

    ingress.process.signal("-TERM");
    let refused = async {
        loop {
            match tokio::net::TcpStream::connect(addr).await {
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionRefused => return,
                _ => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(10), refused)
        .await
        .expect("the listener was still open 10 s into the drain");
    assert!(!in_flight.is_finished(), "the request in flight was answered before it was released");
    release.open();

    let (status, head, body) = bounded("the request in flight", in_flight).await.unwrap();
    assert_eq!(status, 200, "{head}");
    assert_eq!(body, b"finished after SIGTERM");
    let status = ingress.process.wait_exit().await;
    assert!(status.success(), "{status:?}: {}", ingress.process.seen.join("\n"));
}

/// A request head over `ingress.max_header_bytes` (small here) is refused by robotsgate
/// itself, whichever way it was read, named so and recorded; the site never sees it.
#[tokio::test]
async fn a_head_over_the_limit_is_431_named_and_recorded() {
    let site = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("page"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("audit.jsonl");
    let cfg = config_file(dir.path(), &format!("[ingress]\nmax_header_bytes = \"2KiB\"\n{NO_VERIFY}"));
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    let long = format!("X-Long: {}", "a".repeat(3000));
    let (status, head, body) = curl(&ingress.url("/page"), GPTBOT, &["-H", &long]).await;
    assert_eq!(status, 431, "{head}");
    assert!(head.contains("x-robotsgate: header-too-large"), "{head}");
    let body = String::from_utf8_lossy(&body);
    assert!(body.contains("accepts at most 2048 (ingress.max_header_bytes)"), "{body}");
    // Under it: forwarded.
    let (status, _, body) = curl(&ingress.url("/page"), GPTBOT, &["-H", "X-Short: a"]).await;
    assert_eq!((status, body.as_slice()), (200, &b"page"[..]));
    assert_eq!(site.hits("/page"), 1);
    ingress.stop().await;
    let statuses: Vec<_> = ingress_records(&log).iter().map(|r| r["status"].as_u64()).collect();
    assert_eq!(statuses, [Some(431), Some(200)]);
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
    // A client that writes Google's address, then a line that is not ASCII, before the
    // trusted proxy adds its own line (as HAProxy does) is the address the proxy added, not
    // Google: refused. (Before, the line that was not text ended the reading, and the
    // client passed as Google.)
    let added = ["-H", &xff, "-H", "X-Forwarded-For: é", "-H", "X-Forwarded-For: 192.0.2.1"];
    let (status, head, _) = curl(&ingress.url("/page"), GOOGLEBOT, &added).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    // Nor is one that writes Google's address into the header the proxy does not add to
    // (`Forwarded`, while it adds to `X-Forwarded-For`, the default `forwarded_header`).
    let fwd = format!("Forwarded: for={GOOGLE_IP}");
    let other = ["-H", &fwd, "-H", "X-Forwarded-For: 192.0.2.1"];
    let (status, head, _) = curl(&ingress.url("/page"), GOOGLEBOT, &other).await;
    assert_eq!(status, 403, "{head}");
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
        [
            ("identity-failed", Some("failed"), "127.0.0.1"),
            ("allowed", Some("verified"), GOOGLE_IP),
            ("identity-failed", Some("failed"), "192.0.2.1"),
            ("identity-failed", Some("failed"), "192.0.2.1")
        ],
        "{recs:?}"
    );
    assert_eq!(recs[0]["status"], 403);
    assert_ne!(recs[0]["request_id"], recs[1]["request_id"]);
    // `audit explain`: the verdict, what it rests on, and what the policy did.
    let t = explain(&log, &recs[0]);
    assert!(
        t.contains("identity: FAILED (not_in_ranges): not in the operator's IP lists: it claims to be Google's and the check says no"),
        "{t}"
    );
    assert!(t.contains("identity policy: refused as an impersonator (impersonators = \"refuse\")"), "{t}");
    assert!(t.contains("status 403"), "{t}");
    let t = explain(&log, &recs[1]);
    assert!(
        t.contains(
            "identity: verified, by ip-range (the address is in the operator's published IP list): in IP list"
        ),
        "{t}"
    );
    assert!(
        t.contains("in IP list https://developers.google.com/static/crawling/ipranges/common-crawlers.json"),
        "{t}"
    );
    assert!(t.contains("identity policy: judged as Googlebot, the bot it claims to be"), "{t}");
    assert!(t.contains(&format!("(client {GOOGLE_IP})")), "{t}");

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
    let t = explain(&log, &recs[0]);
    assert!(t.contains("identity: FAILED"), "{t}");
    assert!(
        t.contains(
            "judged as Googlebot all the same; the failure is only reported (impersonators = \"allow\")"
        ),
        "{t}"
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
    let t = explain(&log, &recs[0]);
    assert!(
        t.contains(
            "identity policy: held to the `User-agent: *` group, not to its own (impersonators = \"star\")"
        ),
        "{t}"
    );
    assert!(t.contains("outcome: disallowed (enforce mode)"), "{t}");
    assert!(t.contains(": disallow: /admin"), "{t}");

    // Proxies that add to `Forwarded` (`--forwarded-header forwarded`): its `for=` is read,
    // `X-Forwarded-For` is not.
    let log = dir.path().join("forwarded.jsonl");
    let cfg = config_file(dir.path(), &ranges_only("refuse"));
    let args = ["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()];
    let ingress = Ingress::start(&[&args[..], &["--forwarded-header", "forwarded"]].concat()).await;
    let fwd = format!("Forwarded: for={GOOGLE_IP};proto=https");
    let (status, head, body) = curl(&ingress.url("/page"), GOOGLEBOT, &["-H", &fwd]).await;
    assert_eq!((status, body.as_slice()), (200, &b"page"[..]), "{head}");
    let xff = format!("X-Forwarded-For: {GOOGLE_IP}");
    let (status, head, _) = curl(&ingress.url("/page"), GOOGLEBOT, &["-H", &xff]).await;
    assert_eq!(status, 403, "{head}");
    ingress.stop().await;
    let clients: Vec<_> =
        ingress_records(&log).iter().map(|r| r["client"].as_str().unwrap().to_owned()).collect();
    assert_eq!(clients, [GOOGLE_IP, "127.0.0.1"]);
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
             [verify]\nmax_wait = \"50ms\"\nrefresh = false\n",
            dns.local_addr().unwrap()
        ),
    );
    let ingress = Ingress::start(&[
        "--upstream",
        &site.base(),
        "--config",
        &cfg,
        "--audit-log",
        log.to_str().unwrap(),
        "--admin-listen",
        "127.0.0.1:0",
    ])
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
    // The reverse DNS checks' own metric: two lookups started, one decided pending.
    let mut ingress = ingress;
    let admin = ingress.process.address("admin listener", "at http://").await;
    let (_, _, metrics) = curl(&format!("http://{admin}/metrics"), "test", &[]).await;
    let metrics = String::from_utf8_lossy(&metrics).into_owned();
    let count = |answer: &str| {
        let series = format!("robotsgate_ingress_identity_rdns_checks_total{{answer=\"{answer}\"}} ");
        metrics.lines().find_map(|l| l.strip_prefix(&series)).map(|v| v.trim().parse::<f64>().unwrap())
    };
    assert_eq!((count("lookup"), count("pending")), (Some(2.0), Some(1.0)), "{metrics}");
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
    // `audit explain`: pending past max_wait; a PTR name that is not Google's.
    let t = explain(&log, &recs[0]);
    assert!(t.contains("identity: unverified (pending): lookup pending: the reverse DNS lookup was still pending past verify.max_wait"), "{t}");
    assert!(t.contains("identity policy: judged as Googlebot, the bot it claims to be"), "{t}");
    let t = explain(&log, &recs[1]);
    assert!(t.contains("identity: FAILED (foreign_name): PTR name "), "{t}");
    assert!(t.contains("is not the operator's"), "{t}");
}

#[tokio::test]
async fn a_bad_verify_configuration_or_list_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let run = |cfg: String| {
        std::process::Command::new(BIN)
            .current_dir(dir.path())
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

/// Serves `key`'s directory on `origin` (signed for `host`, as the draft asks).
fn serve_directory(origin: &TestOrigin, key: &robotsgate::identity::httpsig::SigningKey, host: &str) {
    use robotsgate::identity::httpsig::{WELL_KNOWN_PATH, directory_response};
    let url = format!("{}{WELL_KNOWN_PATH}", origin.base_as(host));
    let request = http::Request::get(url).body(()).unwrap().into_parts().0;
    let response = directory_response(
        &[key],
        &request,
        std::time::SystemTime::now(),
        std::time::Duration::from_secs(3600),
    )
    .unwrap();
    let mut reply = Reply::status(response.status().as_u16());
    for (name, value) in response.headers() {
        reply = reply.header(name.as_str(), value.to_str().unwrap());
    }
    origin.route(WELL_KNOWN_PATH, reply.body(response.into_body()));
}

/// Web Bot Auth through the real binary: an operator whose bots sign with the keys of a
/// directory served over HTTPS (a test CA, given in `[tls] extra_roots`), with
/// `require = true`. Signatures are made by Cloudflare's `web-bot-auth` crate and sent by
/// curl.
#[tokio::test]
async fn signed_bots_are_verified_and_forged_replayed_and_unverified_ones_refused() {
    use robotsgate::identity::httpsig::{ACCEPT_SIGNATURE, SigningKey, WELL_KNOWN_PATH};
    const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0; +https://bot.example)";
    let seed = [5u8; 32];
    let key = SigningKey::from_seed(&seed).unwrap();
    let keyid = key.public().thumbprint().to_owned();
    let ca = TestCa::new("ingress-wba", &["keys.test"]);
    let directory = TestOrigin::start_tls([], ca.server_config(&[b"http/1.1"])).await;
    serve_directory(&directory, &key, "keys.test");
    let agent = directory.base_as("keys.test");
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: ExampleBot\nAllow: /\n\nUser-agent: *\nDisallow: /\n")),
        ("/page", Reply::ok("page")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let ca_pem = ca.write_pem(&dir.path().join("ca.pem"));
    let log = dir.path().join("audit.jsonl");
    let cfg = config_file(
        dir.path(),
        &format!(
            "[dns.static]\n\"keys.test\" = [\"127.0.0.1\"]\n\n[tls]\nextra_roots = [{ca_pem:?}]\n\n\
             [guard]\nallow = [\"127.0.0.0/8\"]\n\n[verify]\nrdns = false\nrefresh = false\nmax_wait = \"2s\"\n\n\
             [[verify.operators]]\nname = \"Example\"\ntokens = [\"ExampleBot\"]\n\
             signature_agents = [\"{agent}\"]\nrequire = true\n"
        ),
    );
    let ingress =
        Ingress::start(&["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()])
            .await;
    let authority = ingress.addr.to_string();
    let sign = |seed: &[u8; 32], nonce: &str| wba_sign(seed, &keyid, &agent, &authority, nonce);
    let headers = |f: &WbaFields| -> Vec<String> {
        f.pairs().iter().flat_map(|(n, v)| ["-H".to_owned(), format!("{n}: {v}")]).collect()
    };
    let curl_signed = |f: WbaFields| {
        let url = ingress.url("/page");
        async move {
            let args = headers(&f);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            curl(&url, EXAMPLEBOT, &args).await
        }
    };

    // Signed by the directory's key: verified, let in.
    let good = sign(&seed, "nonce-1");
    let (status, head, body) = curl_signed(good.clone()).await;
    assert_eq!((status, body.as_slice()), (200, &b"page"[..]), "{head}");
    // Signed by another key under the same keyid: an impersonator.
    let (status, head, _) = curl_signed(sign(&[6u8; 32], "nonce-2")).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    assert!(head.contains(&format!("accept-signature: {}", ACCEPT_SIGNATURE.to_ascii_lowercase())), "{head}");
    // The good request again: its nonce was seen.
    let (status, head, _) = curl_signed(good).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    // Unsigned: Example requires verification.
    let (status, head, _) = curl(&ingress.url("/page"), EXAMPLEBOT, &[]).await;
    assert_eq!(status, 403, "{head}");
    assert!(
        head.contains("x-robotsgate: identity-unverified") && head.contains("accept-signature:"),
        "{head}"
    );
    assert_eq!(site.hits("/page"), 1);
    assert_eq!(directory.hits(WELL_KNOWN_PATH), 1, "the directory was fetched once, then cached");
    ingress.stop().await;

    let recs = ingress_records(&log);
    let seen: Vec<_> = recs
        .iter()
        .map(|r| {
            (
                r["outcome"].as_str().unwrap(),
                r["identity"].as_str(),
                r["identity_method"].as_str(),
                r["identity_why"].as_str(),
                r["operator"].as_str(),
            )
        })
        .collect();
    let ex = Some("Example");
    assert_eq!(
        seen,
        [
            ("allowed", Some("verified"), Some("signature"), None, ex),
            ("identity-failed", Some("failed"), None, Some("bad_signature"), ex),
            ("identity-failed", Some("failed"), None, Some("replayed_signature"), ex),
            ("identity-unverified", Some("unverified"), None, Some("no_method"), ex),
        ],
        "{recs:?}"
    );

    // `robotsgate audit report`: the bot's identity verdicts, by method.
    let html = audit_report(&log, dir.path());
    let table = html.split("<table id=\"bots\">").nth(1).unwrap().split("</table>").next().unwrap();
    let row = table.split("<tr>").find(|r| r.contains(">ExampleBot<")).expect("ExampleBot's row");
    let cells: Vec<_> =
        row.split("<td").skip(1).map(|c| c.split('>').nth(1).unwrap().split('<').next().unwrap()).collect();
    // bot, requests, refused, …, identity
    assert_eq!((cells[1], cells[2]), ("4", "3"), "{row}");
    assert_eq!(
        cells[8], "signature 1, failed 2 (bad_signature 1, replayed_signature 1), unverified 1 (no_method 1)",
        "{row}"
    );

    // `robotsgate audit explain` on each record: the method and the Signature-Agent, what
    // failed, and how the policy used it.
    let t = explain(&log, &recs[0]);
    assert!(t.contains("identity: verified, by signature (Web Bot Auth"), "{t}");
    assert!(t.contains(&format!("signed by key {keyid} of {agent}")), "{t}");
    assert!(t.contains("operator: Example\n"), "{t}");
    let t = explain(&log, &recs[1]);
    assert!(t.contains("identity: FAILED (bad_signature): signature of "), "{t}");
    assert!(t.contains(&format!("signature of {agent}")), "{t}");
    assert!(t.contains("refused as an impersonator (impersonators = \"refuse\")"), "{t}");
    let t = explain(&log, &recs[2]);
    assert!(t.contains("identity: FAILED (replayed_signature): "), "{t}");
    let t = explain(&log, &recs[3]);
    assert!(
        t.contains(
            "identity: unverified (no_method): the operator publishes nothing to check with: nothing to check it with"
        ),
        "{t}"
    );
    assert!(
        t.contains("refused: Example requires its bots to be verified ([[verify.operators]] require = true)"),
        "{t}"
    );
}

/// `verify.refresh`: the binary runs the refresher; a list with no bundled copy is fetched
/// at once (with no warning at start that it checks nothing) and then verifies. Off, the
/// list is never fetched and one warning at start says it checks nothing.
#[tokio::test]
async fn the_refresher_fetches_the_ip_lists() {
    const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
    let list =
        r#"{"creationTime": "2026-11-20T10:00:00.000000", "prefixes": [{"ipv4Prefix": "192.0.2.0/24"}]}"#;
    let lists = TestOrigin::start([(
        "/example.json",
        Reply::typed("application/json", list).header("etag", "\"v1\""),
    )])
    .await;
    let robots = "User-agent: ExampleBot\nAllow: /\n";
    let site = TestOrigin::start([("/robots.txt", Reply::ok(robots)), ("/page", Reply::ok("page"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let config = |refresh: bool| {
        config_file(
            dir.path(),
            &format!(
                "[guard]\nallow = [\"127.0.0.0/8\"]\n\n[ingress]\ntrusted_proxies = [\"127.0.0.0/8\"]\n\n\
                 [verify]\nrdns = false\nrefresh = {refresh}\n\n[[verify.operators]]\nname = \"Example\"\n\
                 tokens = [\"ExampleBot\"]\nip_lists = [\"{}\"]\n",
                lists.url("/example.json")
            ),
        )
    };
    let mut ingress = Ingress::start(&["--upstream", &site.base(), "--config", &config(true)]).await;
    // The update may come before the line saying the ingress runs, or after it.
    if !ingress.process.seen.iter().any(|l| l.contains("crawler IP list updated")) {
        ingress.process.wait_line("the IP list update", |l| l.contains("crawler IP list updated")).await;
    }
    assert!(!ingress.process.seen.iter().any(|l| l.contains("checks nothing")), "{:?}", ingress.process.seen);
    assert_eq!(lists.hits("/example.json"), 1);
    assert!(
        lists.seen_for("/example.json")[0].headers["user-agent"].to_str().unwrap().starts_with("robotsgate/")
    );
    let (status, head, _) =
        curl(&ingress.url("/page"), EXAMPLEBOT, &["-H", "X-Forwarded-For: 192.0.2.7"]).await;
    assert_eq!(status, 200, "{head}");
    let (status, head, _) =
        curl(&ingress.url("/page"), EXAMPLEBOT, &["-H", "X-Forwarded-For: 198.51.100.1"]).await;
    assert_eq!(status, 403, "{head}");
    assert!(head.contains("x-robotsgate: identity-failed"), "{head}");
    ingress.stop().await;

    // Off: one warning, no fetch, nothing to check with (judged as what it claims).
    let ingress = Ingress::start(&["--upstream", &site.base(), "--config", &config(false)]).await;
    let warnings = ingress.process.seen.iter().filter(|l| l.contains("checks nothing")).count();
    assert_eq!(warnings, 1, "{:?}", ingress.process.seen);
    let (status, head, _) =
        curl(&ingress.url("/page"), EXAMPLEBOT, &["-H", "X-Forwarded-For: 198.51.100.1"]).await;
    assert_eq!(status, 200, "{head}");
    ingress.stop().await;
    assert_eq!(lists.hits("/example.json"), 1);
}

/// `robotsgate audit explain LOG REQUEST_ID` on an ingress record: its output (exit 0).
fn explain(log: &std::path::Path, record: &Value) -> String {
    let id = record["request_id"].as_str().expect("a request_id");
    let out = std::process::Command::new(BIN)
        .args(["audit", "explain", log.to_str().unwrap(), id])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    assert!(text.starts_with(&format!("Ingress request {id} at ")), "{text}");
    text
}

/// `robotsgate audit report LOG --out DIR/report.html`: the HTML it wrote.
fn audit_report(log: &std::path::Path, dir: &std::path::Path) -> String {
    let report = dir.join("report.html");
    let out = std::process::Command::new(BIN)
        .args(["audit", "report", log.to_str().unwrap(), "--out", report.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    std::fs::read_to_string(&report).unwrap()
}

#[tokio::test]
async fn a_keep_alive_client_gets_an_upstream_connection_of_its_own_which_others_get_when_it_goes() {
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS.to_owned())), ("/page", Reply::ok("page\n"))])
            .await;
    let dir = tempfile::tempdir().unwrap();
    // One worker: one pool, so that the connection a client leaves is the next client's.
    let cfg = config_file(dir.path(), &format!("{NO_VERIFY}[ingress]\nworkers = 1\n"));
    let up = format!("http://{}", origin.addr());
    let ingress = Ingress::start(&["--upstream", &up, "--config", &cfg]).await;
    let get = |ua: &'static str| {
        http::Request::get("/page")
            .header("host", "site.test")
            .header("user-agent", ua)
            .body(empty())
            .unwrap()
    };
    let on = |origin: &TestOrigin| origin.seen_for("/page").last().unwrap().connection;
    let mut client = h1(tokio::net::TcpStream::connect(ingress.addr).await.unwrap()).await;
    // Its first requests go through the pool (which has the robots.txt fetch's connection)
    // until its own is opened; from then on, every request of this client goes out on
    // that connection (a bot and a browser alike: the connection is the client's, whoever
    // it says it is).
    for ua in [GPTBOT, BROWSER].into_iter().cycle().take(30) {
        let got = exchange(&mut client, get(ua)).await;
        assert_eq!((got.status.as_u16(), got.text().as_str()), (200, "page\n"), "{}", got.describe());
    }
    let pages = origin.seen_for("/page");
    let own = pages[pages.len() - 1].connection;
    let last: Vec<usize> = pages[pages.len() - 20..].iter().map(|s| s.connection).collect();
    assert_eq!(last, vec![own; 20], "connections of the last 20 requests");
    // Another client connection does not share it.
    let mut other = h1(tokio::net::TcpStream::connect(ingress.addr).await.unwrap()).await;
    assert_eq!(exchange(&mut other, get(GPTBOT)).await.status.as_u16(), 200);
    assert_ne!(on(&origin), own);
    // The client goes (its last request says so): its upstream connection goes to the
    // pool, and a client after it is served on it.
    let mut last = get(GPTBOT);
    last.headers_mut().insert("connection", http::HeaderValue::from_static("close"));
    assert_eq!(exchange(&mut client, last).await.status.as_u16(), 200);
    bounded("a later client is served on the connection the first one left", async {
        loop {
            let mut next = h1(tokio::net::TcpStream::connect(ingress.addr).await.unwrap()).await;
            assert_eq!(exchange(&mut next, get(GPTBOT)).await.status.as_u16(), 200);
            if on(&origin) == own {
                break;
            }
        }
    })
    .await;
    assert!(origin.open_connections() <= 3, "{} upstream connections open", origin.open_connections());
    drop(other);
    ingress.stop().await;
}
