//! The listener side of the real `robotsgate ingress` binary: HTTPS termination (HTTP/1.1
//! and HTTP/2, with curl trusting a test CA), the admin listener and its metrics, WebSocket
//! upgrades (HTTP/1.1 and HTTP/2's extended CONNECT, over plain TCP and TLS), and reloading on SIGHUP. The site is the test kit's scripted origin on
//! loopback; readiness is read from the child's stderr.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use support::*;
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str = "User-agent: GPTBot\nDisallow: /private\n\nUser-agent: *\nDisallow: /admin\n";
const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";
/// The bots come from 127.0.0.1, in no operator's ranges: identity checks are off.
const NO_VERIFY: &str = "[verify]\nenabled = false\n";

struct Ingress {
    process: Spawned,
    addr: SocketAddr,
    scheme: &'static str,
}

impl Ingress {
    async fn start(scheme: &'static str, args: &[&str]) -> Ingress {
        let mut process = Spawned::start(BIN, &[&["ingress", "--listen", "127.0.0.1:0"], args].concat());
        let addr = process.address("robotsgate ingress is running", &format!("at {scheme}://")).await;
        Ingress { process, addr, scheme }
    }

    async fn stop(mut self) {
        self.process.signal("-TERM");
        let status = self.process.wait_exit().await;
        assert!(status.success(), "{status:?}: {}", self.process.seen.join("\n"));
    }

    fn url(&self, path: &str) -> String {
        format!("{}://{}{path}", self.scheme, self.addr)
    }
}

/// Runs the binary with `args`, expecting it to stop with an error; what it said.
async fn fails(args: &[&str]) -> String {
    let mut process = Spawned::start(BIN, &[&["ingress", "--listen", "127.0.0.1:0"], args].concat());
    let status = process.wait_exit().await;
    let said = process.said().await;
    assert!(!status.success(), "it started: {said}");
    said
}

/// curl: status, headers (lower-case names), body and the HTTP version it spoke.
async fn curl(url: &str, ua: &str, extra: &[&str]) -> (u16, String, Vec<u8>, String) {
    let dir = tempfile::tempdir().unwrap();
    let (head, body) = (dir.path().join("head"), dir.path().join("body"));
    let out = bounded(
        "curl",
        Command::new("curl")
            .args(["-s", "-A", ua, "-D"])
            .arg(&head)
            .arg("-w")
            .arg("%{http_version}")
            .arg("-o")
            .arg(&body)
            .args(extra)
            .arg(url)
            .kill_on_drop(true)
            .output(),
    )
    .await
    .unwrap();
    let head = std::fs::read_to_string(&head).unwrap_or_default().to_ascii_lowercase();
    let status = head.split_whitespace().nth(1).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = std::fs::read(&body).unwrap_or_default();
    (status, head, body, String::from_utf8_lossy(&out.stdout).into_owned())
}

fn config_file(dir: &Path, text: &str) -> String {
    let path = dir.join(format!("robotsgate-{}.toml", sha256_hex(text.as_bytes())));
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// A test CA's leaf for localhost and 127.0.0.1 in `dir`: (CA file, cert, key).
fn certificate(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let ca = TestCa::localhost();
    let (cert, key) = ca.write_leaf(dir);
    (ca.write_pem(&dir.join("ca.pem")), cert, key)
}

/// `robotsgate ingress` on HTTPS with `cert` and `key`, in front of `site`, with the config
/// file `cfg` and `more` arguments.
async fn start_https(site: &TestOrigin, cfg: &str, cert: &Path, key: &Path, more: &[&str]) -> Ingress {
    let args = [
        "--upstream",
        &site.base(),
        "--config",
        cfg,
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ];
    Ingress::start("https", &[&args[..], more].concat()).await
}

/// A TLS connection to `ingress` as `localhost`, trusting the CA in `ca`, offering `alpn`.
async fn tls_to(
    ingress: &Ingress,
    ca: &Path,
    alpn: &[&[u8]],
) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
    use rustls::pki_types::pem::PemObject as _;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls::pki_types::CertificateDer::pem_slice_iter(&std::fs::read(ca).unwrap()) {
        roots.add(c.unwrap()).unwrap();
    }
    let connector = tokio_rustls::TlsConnector::from(ca::client_config(roots, alpn));
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
    bounded("TLS", connector.connect(name, tcp)).await.unwrap()
}

#[tokio::test]
async fn https_is_terminated_over_http1_and_http2_and_robots_txt_enforced() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::echo()),
        ("/private/x", Reply::ok("secret")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificate(dir.path());
    let cfg = config_file(dir.path(), NO_VERIFY);
    let log = dir.path().join("audit.jsonl");
    let ingress = start_https(&site, &cfg, &cert, &key, &["--audit-log", log.to_str().unwrap()]).await;
    let ca = ca.to_str().unwrap();
    for (flag, version) in [("--http1.1", "1.1"), ("--http2", "2")] {
        // Allowed: reaches the site, which is told the request came over https.
        let (status, head, body, spoke) = curl(&ingress.url("/page"), GPTBOT, &["--cacert", ca, flag]).await;
        assert_eq!((status, spoke.as_str()), (200, version), "{head}");
        let echoed = String::from_utf8_lossy(&body).to_ascii_lowercase();
        assert!(echoed.contains("x-forwarded-proto: https"), "{echoed}");
        assert!(echoed.contains(&format!("x-forwarded-host: {}", ingress.addr)), "{echoed}");
        assert!(echoed.contains("forwarded: for=127.0.0.1;proto=https"), "{echoed}");
        // Disallowed: robotsgate's 403, the site never asked.
        let (status, head, body, spoke) =
            curl(&ingress.url("/private/x"), GPTBOT, &["--cacert", ca, flag]).await;
        assert_eq!((status, spoke.as_str()), (403, version), "{head}");
        assert!(head.contains("x-robotsgate: disallowed"), "{head}");
        assert!(String::from_utf8_lossy(&body).contains("disallow: /private"));
        // robots.txt, byte for byte.
        let (status, _, body, _) = curl(&ingress.url("/robots.txt"), GPTBOT, &["--cacert", ca, flag]).await;
        assert_eq!((status, body.as_slice()), (200, ROBOTS.as_bytes()));
        // A browser is not a bot.
        let (status, _, body, _) = curl(&ingress.url("/private/x"), BROWSER, &["--cacert", ca, flag]).await;
        assert_eq!((status, body.as_slice()), (200, &b"secret"[..]));
    }
    assert_eq!(site.hits("/page"), 2);
    assert_eq!(site.hits("/private/x"), 2, "the browser's two, no bot's");
    // A client that does not trust the certificate gets nothing.
    let (status, ..) = curl(&ingress.url("/page"), GPTBOT, &[]).await;
    assert_eq!(status, 0);
    // Plain HTTP on the TLS port is not served.
    let (status, ..) = curl(&format!("http://{}/page", ingress.addr), GPTBOT, &[]).await;
    assert_eq!(status, 0);
    assert_eq!(site.hits("/page"), 2);
    ingress.stop().await;
    let recs: Vec<_> = read_jsonl(&log).into_iter().filter(|r| r["type"] == "ingress").collect();
    let outcomes: Vec<_> = recs.iter().map(|r| r["outcome"].as_str().unwrap().to_owned()).collect();
    assert_eq!(outcomes, ["allowed", "disallowed", "robots-txt"].repeat(2));
}

#[tokio::test]
async fn a_client_that_does_not_finish_its_tls_handshake_is_closed() {
    let site = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS))]).await;
    let dir = tempfile::tempdir().unwrap();
    let (_, cert, key) = certificate(dir.path());
    let cfg = config_file(
        dir.path(),
        &format!(
            "[ingress]\ntls_cert = {:?}\ntls_key = {:?}\ntls_handshake_timeout = \"300ms\"\n{NO_VERIFY}",
            cert.to_str().unwrap(),
            key.to_str().unwrap()
        ),
    );
    let ingress = Ingress::start("https", &["--upstream", &site.base(), "--config", &cfg]).await;
    // Half a ClientHello record header, then silence.
    let mut stream = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    stream.write_all(&[0x16, 0x03, 0x01]).await.unwrap();
    let started = std::time::Instant::now();
    let mut buf = [0u8; 64];
    let n = bounded("the ingress closes the connection", stream.read(&mut buf)).await.unwrap_or(0);
    assert_eq!(n, 0, "closed without an answer");
    assert!(started.elapsed() >= std::time::Duration::from_millis(250), "{:?}", started.elapsed());
    ingress.stop().await;
}

/// A robots.txt file that is a FIFO or a device stops the start, naming it: opening a FIFO
/// waited for a writer (the start hung), and `/dev/zero` would have been read without end.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_robots_file_that_is_no_regular_file_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("robots.txt");
    assert!(std::process::Command::new("mkfifo").arg(&fifo).status().unwrap().success());
    for robots in [fifo.to_str().unwrap(), "/dev/zero"] {
        let said = fails(&["--upstream", "http://127.0.0.1:9", "--robots", robots]).await;
        assert!(
            said.contains(&format!("ingress.robots: cannot read {robots}: not a regular file")),
            "{said}"
        );
    }
}

/// A robots.txt file past RFC 9309's 500 KiB: served whole, its rules enforced as far as
/// the engine reads (as crawlers may read it), and said at the start: a rule after the
/// limit is not enforced (before, without a word).
#[tokio::test]
async fn a_robots_file_past_the_limit_is_served_whole_and_its_unread_part_said() {
    let site = TestOrigin::start([("/early", Reply::ok("early")), ("/late", Reply::ok("late"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let mut file = String::from("User-agent: *\nDisallow: /early\n");
    while file.len() <= robotsgate::rep::MAX_ROBOTS_TXT_BYTES {
        file.push_str("# a comment that pads the file\n");
    }
    file.push_str("Disallow: /late\n");
    let robots = dir.path().join("robots.txt");
    std::fs::write(&robots, &file).unwrap();
    let cfg = config_file(dir.path(), NO_VERIFY);
    let args = ["--upstream", &site.base(), "--config", &cfg, "--robots", robots.to_str().unwrap()];
    let ingress = Ingress::start("http", &args).await;
    // Said before the "running" line.
    let said =
        ingress.process.seen.iter().find(|l| l.contains("ingress.robots:")).cloned().unwrap_or_default();
    let max = robotsgate::rep::MAX_ROBOTS_TXT_BYTES;
    // The limit falls inside a padding line (a line break on neither side of it).
    assert!(file.as_bytes()[max - 1] != b'\n' && file.as_bytes()[max] != b'\n');
    let cut = file[..max].matches('\n').count() + 1;
    assert!(said.contains(&format!("is {} bytes, and only its first {max} are read", file.len())), "{said}");
    assert!(
        said.contains(&format!(
            "the {} bytes after them, and line {cut}, which the limit cuts, are served but not enforced",
            file.len() - max
        )),
        "{said}"
    );

    let (code, _, body, _) = curl(&ingress.url("/robots.txt"), GPTBOT, &[]).await;
    assert_eq!((code, body.len()), (200, file.len()), "served whole");
    assert_eq!(curl(&ingress.url("/early"), GPTBOT, &[]).await.0, 403);
    assert_eq!(curl(&ingress.url("/late"), GPTBOT, &[]).await.0, 200, "past the limit: not enforced");
    ingress.stop().await;
}

/// The site's own robots.txt, fetched from it, past 500 KiB with the limit inside
/// `Disallow: /private` after `Disallow: /p`: the ingress keeps the first 500 KiB and
/// drops that line, as the whole file reads; before, it read the rule `Disallow: /p`
/// nobody wrote and refused /public.
#[tokio::test]
async fn a_fetched_robots_file_cut_by_the_limit_makes_no_rule_of_the_cut_line() {
    let max = robotsgate::rep::MAX_ROBOTS_TXT_BYTES;
    let mut file = b"User-agent: *\nDisallow: /nothing\n".to_vec();
    file.resize(max - "Disallow: /p".len(), b'\n');
    file.extend_from_slice(b"Disallow: /private\n");
    let site = TestOrigin::start([("/robots.txt", Reply::ok(file)), ("/public", Reply::ok("public"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), NO_VERIFY);
    let ingress = Ingress::start("http", &["--upstream", &site.base(), "--config", &cfg]).await;
    let (code, _, body, _) = curl(&ingress.url("/public"), GPTBOT, &[]).await;
    assert_eq!((code, body.as_slice()), (200, &b"public"[..]));
    assert_eq!(curl(&ingress.url("/nothing"), GPTBOT, &[]).await.0, 403, "the file is read");
    ingress.stop().await;
}

/// The site's robots.txt comes gzip-encoded though the ingress asks for no encoding: it is
/// a failed fetch (no copy yet: disallow all for the known bots), not a file without rules
/// (before: the compressed bytes were read as text, and under `Disallow: /` every path was
/// allowed).
#[tokio::test]
async fn a_fetched_robots_file_in_an_encoding_not_asked_for_is_no_file() {
    let gzipped = encode("gzip", b"User-agent: *\nDisallow: /\n").await;
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(gzipped).header("content-encoding", "gzip")),
        ("/public", Reply::ok("public")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let cfg = config_file(dir.path(), NO_VERIFY);
    let args = ["--upstream", &site.base(), "--config", &cfg, "--audit-log", audit.to_str().unwrap()];
    let ingress = Ingress::start("http", &args).await;
    assert_eq!(curl(&ingress.url("/public"), GPTBOT, &[]).await.0, 403);
    ingress.stop().await;
    // The record says why.
    let records = read_jsonl(&audit);
    assert!(
        records
            .iter()
            .any(|r| r.to_string().contains("content-encoding \\\"gzip\\\", which was not asked for")),
        "{records:?}"
    );
}

/// The site's robots.txt redirects: up to five redirects on the site are followed, as a
/// crawler follows them (RFC 9309 2.3.1.2), and their file enforced (before: no file, so
/// every bot let through, without a word). One to another site cannot be fetched through
/// the upstream: no file, and the warning says so. The fetch never carries a client's
/// `Host` (before: the first client's became the fetch's `X-Forwarded-Host`, and a site
/// that keeps its robots.txt for its own name gave that client's choice of file to all).
#[tokio::test]
async fn a_redirected_robots_file_is_followed_on_the_site_and_fetched_without_a_clients_host() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::redirect(301, "/a/robots.txt")),
        ("/a/robots.txt", Reply::redirect(302, "b.txt?v=2")),
        ("/a/b.txt?v=2", Reply::ok(ROBOTS)),
        ("/private/x", Reply::ok("private")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), NO_VERIFY);
    let args = ["--upstream", &site.base(), "--config", &cfg];
    let ingress = Ingress::start("http", &args).await;
    let got = curl(&ingress.url("/private/x"), GPTBOT, &["-H", "Host: nosuch.example"]).await;
    assert_eq!(got.0, 403, "{got:?}");
    assert_eq!(site.hits("/private/x"), 0);
    assert_eq!(site.hits("/a/b.txt"), 1);
    for seen in site.seen().iter().filter(|s| s.path.ends_with(".txt")) {
        assert_eq!(seen.headers.get("x-forwarded-host"), None, "{}", seen.target);
    }
    ingress.stop().await;

    let elsewhere = TestOrigin::start([
        ("/robots.txt", Reply::redirect(301, "https://elsewhere.example/robots.txt")),
        ("/private/x", Reply::ok("private")),
    ])
    .await;
    let args = ["--upstream", &elsewhere.base(), "--config", &cfg];
    let mut ingress = Ingress::start("http", &args).await;
    assert_eq!(curl(&ingress.url("/private/x"), GPTBOT, &[]).await.0, 200);
    ingress.process.wait_line("the warning", |l| l.contains("not followed: not on this site")).await;
    ingress.stop().await;

    // ingress.robots_host: the fetch names that host, and a redirect to it is on the site.
    let named = TestOrigin::start([
        ("/robots.txt", Reply::redirect(301, "https://site.example/b/robots.txt")),
        ("/b/robots.txt", Reply::ok(ROBOTS)),
        ("/private/x", Reply::ok("private")),
    ])
    .await;
    let cfg = config_file(dir.path(), &format!("{NO_VERIFY}\n[ingress]\nrobots_host = \"site.example\"\n"));
    let args = ["--upstream", &named.base(), "--config", &cfg];
    let ingress = Ingress::start("http", &args).await;
    assert_eq!(curl(&ingress.url("/private/x"), GPTBOT, &[]).await.0, 403);
    let fetches: Vec<_> = named.seen().into_iter().filter(|s| s.path.ends_with("robots.txt")).collect();
    assert_eq!(fetches.len(), 2, "{:?}", fetches.iter().map(|s| &s.target).collect::<Vec<_>>());
    for seen in fetches {
        assert_eq!(seen.headers.get("x-forwarded-host").map(|v| v.to_str().unwrap()), Some("site.example"));
    }
    ingress.stop().await;
}

/// An HTTP/2 connection with one stuck answer (its window used up, never given back) and
/// another that goes on (events every 200 ms for 6 s, a 1 s bound): the connection is told
/// to go away, the other answer comes whole, and then the connection is closed (before:
/// the other answer was cut one bound after the GOAWAY).
#[tokio::test]
async fn the_other_streams_of_a_stuck_http2_connection_may_finish() {
    use http_body_util::BodyExt as _;
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/big", Reply::pattern(1024 * 1024)),
        ("/events", Reply::ok(vec![b'e'; 300]).drip(10, std::time::Duration::from_millis(200))),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &format!("[ingress]\nsend_timeout = \"1s\"\n{NO_VERIFY}"));
    let ingress = Ingress::start("http", &["--upstream", &site.base(), "--config", &cfg]).await;
    let request = |path: &str| {
        http::Request::get(ingress.url(path))
            .header("user-agent", BROWSER)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap()
    };
    // A 1 KiB window per stream: /big fills it and is never read; /events fits in it.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let (mut h2, conn) = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .initial_stream_window_size(1024)
        .handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    let big = bounded("the head", h2.send_request(request("/big"))).await.unwrap();
    let events = bounded("the head", h2.send_request(request("/events"))).await.unwrap();
    let started = std::time::Instant::now();
    let got = bounded("the events", events.into_body().collect()).await.expect("whole").to_bytes();
    assert_eq!(got.len(), 300, "all the events, after {:?}", started.elapsed());
    bounded("the connection ends", driver).await.unwrap().ok();
    assert!(started.elapsed() >= std::time::Duration::from_secs(6), "after {:?}", started.elapsed());
    drop(big);
    ingress.stop().await;
}

/// `ingress.hosts`: an upstream that serves a site per host name has a robots.txt per
/// name; each name given is judged by its own, fetched with that name, and recorded with
/// it; any other name by the one default copy (before: one copy for every name).
#[tokio::test]
async fn each_host_name_given_is_judged_by_its_own_robots_txt() {
    let site = TestOrigin::start([
        ("a.example|/robots.txt", Reply::ok("User-agent: GPTBot\nDisallow: /a-only\n")),
        ("b.example|/robots.txt", Reply::ok("User-agent: GPTBot\nDisallow: /b-only\n")),
        ("/robots.txt", Reply::ok("User-agent: GPTBot\nDisallow: /default-only\n")),
        ("/a-only", Reply::ok("a")),
        ("/b-only", Reply::ok("b")),
        ("/default-only", Reply::ok("default")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let audit = dir.path().join("audit.jsonl");
    let cfg =
        config_file(dir.path(), &format!("[ingress]\nhosts = [\"a.example\", \"b.example\"]\n{NO_VERIFY}"));
    let args = ["--upstream", &site.base(), "--config", &cfg, "--audit-log", audit.to_str().unwrap()];
    let ingress = Ingress::start("http", &args).await;
    for (host, path, status) in [
        ("a.example", "/a-only", 403),
        ("a.example", "/b-only", 200),
        ("B.example:8080", "/b-only", 403),
        ("b.example", "/default-only", 200),
        ("other.example", "/default-only", 403),
        ("other.example", "/a-only", 200),
    ] {
        let got = curl(&ingress.url(path), GPTBOT, &["-H", &format!("Host: {host}")]).await;
        assert_eq!(got.0, status, "{host}{path}: {got:?}");
    }
    // HTTP/2 names the site in :authority.
    let got =
        curl(&ingress.url("/a-only"), GPTBOT, &["--http2-prior-knowledge", "-H", "Host: a.example"]).await;
    assert_eq!(got.0, 403, "{got:?}");
    // A request that names two hosts (absolute form, or :authority, and another Host):
    // 400, never judged by one site and served by the other.
    let two = ["--request-target", "http://b.example/a-only", "-H", "Host: a.example"];
    let got = curl(&ingress.url("/a-only"), GPTBOT, &two).await;
    assert_eq!(got.0, 400, "{got:?}");
    assert_eq!(site.hits("/a-only"), 1, "only the allowed one, on b.example");
    ingress.stop().await;
    // One file for every request (`--robots`) beside the names: refused at the start (the
    // command line came after the file's checks, and it started).
    let robots = dir.path().join("robots.txt");
    std::fs::write(&robots, ROBOTS).unwrap();
    let said =
        fails(&["--upstream", &site.base(), "--config", &cfg, "--robots", robots.to_str().unwrap()]).await;
    assert!(said.contains("--robots") && said.contains("ingress.hosts"), "{said}");
    let mut fetched: Vec<_> = site
        .seen_for("/robots.txt")
        .iter()
        .map(|s| s.headers.get("x-forwarded-host").map(|v| v.to_str().unwrap().to_owned()))
        .collect();
    fetched.sort();
    assert_eq!(fetched, [None, Some("a.example".into()), Some("b.example".into())]);
    let hosts: Vec<_> = read_jsonl(&audit)
        .iter()
        .filter(|r| r["type"] == "ingress")
        .map(|r| (r["path"].as_str().unwrap().to_owned(), r["host"].as_str().map(str::to_owned)))
        .collect();
    let a = Some("a.example".to_owned());
    let b = Some("b.example".to_owned());
    assert_eq!(
        hosts,
        [
            ("/a-only".into(), a.clone()),
            ("/b-only".into(), a.clone()),
            ("/b-only".into(), b.clone()),
            ("/default-only".into(), b),
            ("/default-only".into(), None),
            ("/a-only".into(), None),
            ("/a-only".into(), a),
        ]
    );
}

#[tokio::test]
async fn bad_tls_settings_stop_the_start_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (_, cert, key) = certificate(dir.path());
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let up = "http://127.0.0.1:9";
    // Only one of the two, in the file: a configuration error naming the key and its line.
    let only_cert = config_file(dir.path(), &format!("[ingress]\ntls_cert = {cert:?}\n"));
    let said = fails(&["--upstream", up, "--config", &only_cert]).await;
    assert!(said.contains("ingress.tls_cert") && said.contains("give both"), "{said}");
    // ... or on the command line.
    let said = fails(&["--upstream", up, "--tls-key", key]).await;
    assert!(said.contains("give both or neither"), "{said}");
    // A file that is not there.
    let missing = dir.path().join("missing.pem");
    let said = fails(&["--upstream", up, "--tls-cert", missing.to_str().unwrap(), "--tls-key", key]).await;
    assert!(said.contains("missing.pem") && said.contains("cannot read"), "{said}");
    // A file with no certificate in it.
    let said = fails(&["--upstream", up, "--tls-cert", key, "--tls-key", key]).await;
    assert!(said.contains("leaf-key.pem") && said.contains("no CERTIFICATE"), "{said}");
    // A key that is not the certificate's.
    let other = tempfile::tempdir().unwrap();
    let (_, _, other_key) = certificate(other.path());
    let said = fails(&["--upstream", up, "--tls-cert", cert, "--tls-key", other_key.to_str().unwrap()]).await;
    assert!(said.contains(other_key.to_str().unwrap()) && said.contains("not the key of"), "{said}");
}

const CLAUDEBOT: &str = "Mozilla/5.0 (compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";

/// `GET path` on the admin listener with curl: status and body.
async fn admin_get(admin: SocketAddr, path: &str) -> (u16, String) {
    let (status, _, body, _) = curl(&format!("http://{admin}{path}"), "test", &[]).await;
    (status, String::from_utf8_lossy(&body).into_owned())
}

/// `GET path` on the admin listener again until `done` holds for its answer (bounded:
/// what the process counts after a client is done, a closed connection, a record written,
/// shows a moment later); the last answer.
async fn admin_until(admin: SocketAddr, path: &str, done: impl Fn(u16, &str) -> bool) -> (u16, String) {
    let deadline = std::time::Instant::now() + BOUND;
    loop {
        let (status, text) = admin_get(admin, path).await;
        if done(status, &text) || std::time::Instant::now() > deadline {
            return (status, text);
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The value of the sample `series` (name and labels exactly as exposed).
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
        .map(|v| v.trim().parse().unwrap_or_else(|_| panic!("{series}: not a number in {text}")))
}

/// Two operators: "Example" (GPTBot) whose list holds 127.0.0.0/8, so the tests' bots are
/// verified, and "Elsewhere" (ClaudeBot) whose list does not: impersonators.
fn operators(dir: &Path) -> String {
    let list = |name: &str, net: &str| {
        let path = dir.join(name);
        let json = format!(
            r#"{{"creationTime": "2026-11-20T10:00:00.000000", "prefixes": [{{"ipv4Prefix": "{net}"}}]}}"#
        );
        std::fs::write(&path, json).unwrap();
        path.to_str().unwrap().to_owned()
    };
    format!(
        "[verify]\nrefresh = false\nrdns = false\n\n\
         [[verify.operators]]\nname = \"Example\"\ntokens = [\"GPTBot\"]\nip_lists = [{:?}]\n\n\
         [[verify.operators]]\nname = \"Elsewhere\"\ntokens = [\"ClaudeBot\"]\nip_lists = [{:?}]\n",
        list("loopback.json", "127.0.0.0/8"),
        list("elsewhere.json", "192.0.2.0/24"),
    )
}

#[tokio::test]
async fn the_admin_listener_counts_requests_decisions_identities_and_upstream_errors() {
    let gate = Gate::new();
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("page")),
        ("/private/x", Reply::ok("secret")),
        ("/broken", Reply::reset()),
        ("/slow", Reply::ok("slow").wait_gate(&gate)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &operators(dir.path()));
    let log = dir.path().join("audit.jsonl");
    let mut ingress = Ingress::start(
        "http",
        &[
            "--upstream",
            &site.base(),
            "--config",
            &cfg,
            "--admin-listen",
            "127.0.0.1:0",
            "--audit-log",
            log.to_str().unwrap(),
        ],
    )
    .await;
    let admin = ingress.process.address("admin listener", "at http://").await;
    assert_eq!(admin_get(admin, "/healthz").await, (200, "ok\n".into()));
    assert_eq!(admin_get(admin, "/readyz").await, (200, "ready\n".into()));
    let (status, before) = admin_get(admin, "/metrics").await;
    assert_eq!(status, 200);
    assert_eq!(sample(&before, r#"robotsgate_ingress_requests_total{protocol="1.x"}"#), Some(0.0));

    let get = |path: &'static str, ua: &'static str, extra: &'static [&'static str]| {
        let url = ingress.url(path);
        async move { curl(&url, ua, extra).await.0 }
    };
    assert_eq!(get("/page", BROWSER, &[]).await, 200);
    assert_eq!(get("/page", BROWSER, &["--http2-prior-knowledge"]).await, 200);
    assert_eq!(get("/robots.txt", GPTBOT, &[]).await, 200);
    assert_eq!(get("/page", GPTBOT, &[]).await, 200);
    assert_eq!(get("/private/x", GPTBOT, &[]).await, 403);
    assert_eq!(get("/broken", GPTBOT, &[]).await, 502);
    assert_eq!(get("/page", CLAUDEBOT, &[]).await, 403);

    let expected = [
        (r#"robotsgate_ingress_requests_total{protocol="1.x"}"#, 6.0),
        (r#"robotsgate_ingress_requests_total{protocol="2"}"#, 1.0),
        ("robotsgate_ingress_request_duration_seconds_count", 7.0),
        (r#"robotsgate_ingress_decisions_total{outcome="robots-txt",reason="robots-txt"}"#, 1.0),
        (r#"robotsgate_ingress_decisions_total{outcome="allowed",reason="no-rule"}"#, 2.0),
        (r#"robotsgate_ingress_decisions_total{outcome="disallowed",reason="disallow-rule"}"#, 1.0),
        (r#"robotsgate_ingress_decisions_total{outcome="identity-failed",reason="identity-failed"}"#, 1.0),
        // robots.txt itself is never checked: GPTBot's other three requests.
        (r#"robotsgate_ingress_identity_total{verdict="verified",method="ip_range"}"#, 3.0),
        (r#"robotsgate_ingress_identity_total{verdict="failed",method="none"}"#, 1.0),
        (r#"robotsgate_ingress_identity_not_verified_total{verdict="failed",why="not_in_ranges"}"#, 1.0),
        (r#"robotsgate_ingress_robots_fetches_total{result="2xx"}"#, 1.0),
        (r#"robotsgate_ingress_upstream_errors_total{class="error"}"#, 1.0),
        (r#"robotsgate_ingress_upstream_errors_total{class="timeout"}"#, 0.0),
        ("robotsgate_ingress_connections_total", 7.0),
        ("robotsgate_ingress_open_connections", 0.0),
        // One per bot request.
        ("robotsgate_ingress_audit_records_written", 5.0),
    ];
    let (_, text) = admin_until(admin, "/metrics", |_, text| {
        expected.iter().all(|(series, want)| sample(text, series) == Some(*want))
    })
    .await;
    for (series, want) in expected {
        assert_eq!(sample(&text, series), Some(want), "{series}\n{text}");
    }
    // Each method's own figures: the lists' prefixes (no failure), no directory cached.
    for name in ["loopback.json", "elsewhere.json"] {
        let path = dir.path().join(name);
        let labels = format!("{{list=\"{}\"}}", path.to_str().unwrap());
        let prefixes = format!("robotsgate_ingress_identity_ip_list_prefixes{labels}");
        assert_eq!(sample(&text, &prefixes), Some(1.0), "{prefixes}\n{text}");
        let failing = format!("robotsgate_ingress_identity_ip_list_failing{labels}");
        assert_eq!(sample(&text, &failing), Some(0.0), "{failing}\n{text}");
    }

    // Draining: /readyz says 503 while a request is still in flight.
    let slow = tokio::spawn(curl(ingress.url("/slow").leak(), BROWSER, &[]));
    until("the slow request reaches the site", || site.hits("/slow") == 1).await;
    ingress.process.signal("-TERM");
    let ready = admin_until(admin, "/readyz", |status, _| status == 503).await;
    assert_eq!(ready, (503, "not ready\n".into()));
    gate.open();
    let (status, _, body, _) = bounded("the slow request", slow).await.unwrap();
    assert_eq!((status, body.as_slice()), (200, &b"slow"[..]));
    let status = ingress.process.wait_exit().await;
    assert!(status.success(), "{status:?}");
}

/// The WebSocket handshake request for `url` as `ua`.
fn ws_request(url: &str, ua: &str) -> http::Request<()> {
    use tokio_tungstenite::tungstenite::client::IntoClientRequest as _;
    let mut req = url.into_client_request().unwrap();
    req.headers_mut().insert("user-agent", ua.parse().unwrap());
    req
}

/// Sends `text` on `ws` and expects the site's echo.
async fn ws_echo<S>(ws: &mut tokio_tungstenite::WebSocketStream<S>, text: &str)
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    use futures_util::{SinkExt as _, StreamExt as _};
    use tokio_tungstenite::tungstenite::Message;
    bounded("send", ws.send(Message::text(text))).await.expect("send");
    let got = bounded("echo", ws.next()).await.expect("a message").expect("a message");
    assert_eq!(got, Message::text(format!("echo: {text}")));
}

/// A connection quiet for `ingress.header_read_timeout` is closed, HTTP/2 too: before, a
/// TLS client that said nothing after its handshake (ALPN h2), or an HTTP/2 client that
/// answered the keep-alive pings and sent no request, held its connection for good.
#[tokio::test]
async fn a_quiet_http2_connection_is_closed() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("page")),
        ("/chat", Reply::websocket()),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificate(dir.path());
    let cfg = config_file(dir.path(), &format!("[ingress]\nheader_read_timeout = \"600ms\"\n{NO_VERIFY}"));
    let ingress = start_https(&site, &cfg, &cert, &key, &[]).await;

    // Silent after the handshake.
    let mut tls = tls_to(&ingress, &ca, &[b"h2"]).await;
    let started = std::time::Instant::now();
    let read = bounded("the silent connection is closed", tls.read(&mut [0u8; 64])).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(600), "after {:?}", started.elapsed());

    // A request answered, then nothing: pings come (hyper's client answers them) and the
    // connection ends with a GOAWAY.
    let tls = tls_to(&ingress, &ca, &[b"h2"]).await;
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tls),
    )
    .await
    .unwrap();
    let driver = tokio::spawn(conn);
    let req = http::Request::get(format!("{}/page", ingress.url("")))
        .header("user-agent", BROWSER)
        .body(http_body_util::Empty::<bytes::Bytes>::new())
        .unwrap();
    let res = bounded("a page", h2.send_request(req)).await.unwrap();
    assert_eq!(res.status(), 200);
    drop(res);
    let ended = bounded("the quiet HTTP/2 connection ends", driver).await.unwrap();
    assert!(ended.is_ok(), "{ended:?}");

    // A WebSocket open over an HTTP/2 stream keeps its connection, quiet or not (its own
    // bound is ingress.websocket_idle_timeout): still there after three times the bound.
    let tls = tls_to(&ingress, &ca, &[b"h2"]).await;
    let base = format!("https://localhost:{}", ingress.addr.port());
    let mut h2 = h2_ready(tls, &base).await;
    let (res, ws) = h2_connect(&mut h2, &base, "/chat", "websocket", GPTBOT).await;
    assert_eq!(res.status(), 200);
    let mut ws = ws.expect("the WebSocket");
    tokio::time::sleep(std::time::Duration::from_millis(1800)).await; // time passing, quietly
    ws_echo(&mut ws, "still open").await;
    assert!(!h2.is_closed());
    bounded("close", ws.close(None)).await.expect("close");
    drop((ws, h2));
    ingress.stop().await;
}

/// Whether a new connection to `addr` is served: a `GET /page` answered, or the
/// connection closed unanswered (`ingress.max_connections` reached).
async fn served(addr: SocketAddr) -> bool {
    let mut tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let _ = tcp.write_all(b"GET /page HTTP/1.1\r\nHost: site\r\nConnection: close\r\n\r\n").await;
    let mut answer = Vec::new();
    let _ = bounded("an answer or a close", tcp.read_to_end(&mut answer)).await;
    answer.starts_with(b"HTTP/1.1 200")
}

/// A WebSocket outlives the request that opened it: it keeps its connection's place
/// under `ingress.max_connections` until it closes. Before, the place was given back
/// with the upgrade, and a client held any number of WebSockets.
#[tokio::test]
async fn a_websocket_keeps_its_connections_place() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/chat", Reply::websocket()),
        ("/page", Reply::ok("page")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &format!("[ingress]\nmax_connections = 1\n{NO_VERIFY}"));
    let ingress = Ingress::start("http", &["--upstream", &site.base(), "--config", &cfg]).await;

    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let url = format!("ws://{}/chat", ingress.addr);
    let (mut ws, res) = bounded("handshake", tokio_tungstenite::client_async(ws_request(&url, GPTBOT), tcp))
        .await
        .expect("101");
    assert_eq!(res.status(), 101);
    ws_echo(&mut ws, "hello").await;
    assert!(!served(ingress.addr).await, "the WebSocket holds the one place");
    ws_echo(&mut ws, "still open").await;
    assert_eq!(site.hits("/page"), 0);

    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    bounded("the place is free again", async {
        while !served(ingress.addr).await {
            tokio::task::yield_now().await;
        }
    })
    .await;
    assert_eq!(site.hits("/page"), 1);
    ingress.stop().await;
}

#[tokio::test]
async fn websockets_pass_for_allowed_bots_and_browsers_and_disallowed_ones_get_403() {
    use tokio_tungstenite::tungstenite::Error as WsError;
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/chat", Reply::websocket()),
        ("/private/chat", Reply::websocket()),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificate(dir.path());
    let cfg = config_file(dir.path(), NO_VERIFY);
    let log = dir.path().join("audit.jsonl");
    let ingress = Ingress::start(
        "http",
        &["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()],
    )
    .await;
    let ws_url = |path: &str| format!("ws://{}{path}", ingress.addr);

    // An allowed bot: the upgrade reaches the site, messages go both ways.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let (mut ws, res) =
        bounded("handshake", tokio_tungstenite::client_async(ws_request(&ws_url("/chat"), GPTBOT), tcp))
            .await
            .expect("101");
    assert_eq!(res.status(), 101);
    ws_echo(&mut ws, "hello").await;
    ws_echo(&mut ws, "and again").await;
    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    until("the site sees the close", || site.ws_closed() == 1).await;
    assert_eq!(site.ws_messages(), 2);
    let seen = site.seen_for("/chat");
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].headers["upgrade"], "websocket");
    assert_eq!(seen[0].headers["x-forwarded-for"], "127.0.0.1");

    // A browser on the path bots may not use: not a bot, it passes.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let (mut ws, _) = bounded(
        "handshake",
        tokio_tungstenite::client_async(ws_request(&ws_url("/private/chat"), BROWSER), tcp),
    )
    .await
    .expect("101");
    ws_echo(&mut ws, "browser").await;
    drop(ws);

    // A disallowed bot: robotsgate's 403, the site never asked.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let refused = bounded(
        "handshake",
        tokio_tungstenite::client_async(ws_request(&ws_url("/private/chat"), GPTBOT), tcp),
    )
    .await;
    match refused {
        Err(WsError::Http(res)) => {
            assert_eq!(res.status(), 403);
            assert_eq!(res.headers()["x-robotsgate"], "disallowed");
        }
        other => panic!("not refused: {other:?}"),
    }
    assert_eq!(site.hits("/private/chat"), 1, "the browser's only");
    ingress.stop().await;
    let recs: Vec<_> = read_jsonl(&log).into_iter().filter(|r| r["type"] == "ingress").collect();
    let outcomes: Vec<_> =
        recs.iter().map(|r| (r["outcome"].as_str().unwrap(), r["status"].as_u64())).collect();
    assert_eq!(outcomes, [("allowed", Some(101)), ("disallowed", Some(403))]);

    // And over HTTPS (wss://), through the TLS listener.
    let ingress = start_https(&site, &cfg, &cert, &key, &[]).await;
    let tls = tls_to(&ingress, &ca, &[b"http/1.1"]).await;
    let url = format!("wss://localhost:{}/chat", ingress.addr.port());
    let (mut ws, res) = bounded("handshake", tokio_tungstenite::client_async(ws_request(&url, GPTBOT), tls))
        .await
        .expect("101");
    assert_eq!(res.status(), 101);
    ws_echo(&mut ws, "over tls").await;
    bounded("close", ws.close(None)).await.expect("close");
    drop(ws);
    until("the site sees the second close", || site.ws_closed() == 3).await;
    ingress.stop().await;
}

/// An HTTP/2 extended CONNECT (RFC 8441) for `base` (scheme and authority) and `path` with
/// `protocol` as `ua` on `h2`: the answer and, on `200`, the WebSocket over its stream.
async fn h2_connect(
    h2: &mut hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>,
    base: &str,
    path: &str,
    protocol: &'static str,
    ua: &str,
) -> (http::Response<hyper::body::Incoming>, Option<H2WebSocket>) {
    let req = http::Request::connect(format!("{base}{path}"))
        .version(http::Version::HTTP_2)
        .extension(hyper::ext::Protocol::from_static(protocol))
        .header("user-agent", ua)
        .header("sec-websocket-version", "13")
        .body(http_body_util::Empty::new())
        .unwrap();
    let mut res = bounded("extended CONNECT", h2.send_request(req)).await.expect("an answer");
    if res.status() != 200 {
        return (res, None);
    }
    let stream = bounded("the stream", hyper::upgrade::on(&mut res)).await.expect("the stream");
    let ws = tokio_tungstenite::WebSocketStream::from_raw_socket(
        hyper_util::rt::TokioIo::new(stream),
        tokio_tungstenite::tungstenite::protocol::Role::Client,
        None,
    )
    .await;
    (res, Some(ws))
}

/// An HTTP/2 client connection over `io` to the ingress at `base`, after a first exchange
/// (`GET /robots.txt`, answered over HTTP/2): by its answer the ingress's SETTINGS
/// (SETTINGS_ENABLE_CONNECT_PROTOCOL, without which the client refuses to send an extended
/// CONNECT) have arrived.
async fn h2_ready<IO>(
    io: IO,
    base: &str,
) -> hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>
where
    IO: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(io),
    )
    .await
    .unwrap();
    tokio::spawn(conn);
    let req = http::Request::get(format!("{base}/robots.txt"))
        .version(http::Version::HTTP_2)
        .header("user-agent", BROWSER)
        .body(http_body_util::Empty::new())
        .unwrap();
    let res = bounded("robots.txt", h2.send_request(req)).await.unwrap();
    assert_eq!(res.status(), 200);
    assert_eq!(res.version(), http::Version::HTTP_2);
    h2
}

type H2WebSocket = tokio_tungstenite::WebSocketStream<hyper_util::rt::TokioIo<hyper::upgrade::Upgraded>>;

#[tokio::test]
async fn websockets_over_http2_extended_connect_pass_and_disallowed_ones_get_403() {
    use http_body_util::BodyExt as _;
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/chat", Reply::websocket()),
        ("/private/chat", Reply::websocket()),
        ("/page", Reply::ok("a page, not a WebSocket")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), NO_VERIFY);
    let log = dir.path().join("audit.jsonl");
    let ingress = Ingress::start(
        "http",
        &["--upstream", &site.base(), "--config", &cfg, "--audit-log", log.to_str().unwrap()],
    )
    .await;

    // HTTP/2 with prior knowledge over plain TCP.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let mut h2 = h2_ready(tcp, &format!("http://{}", ingress.addr)).await;

    // An allowed bot: the opening reaches the site as an HTTP/1.1 upgrade, messages go
    // both ways over the HTTP/2 stream.
    let (res, ws) = h2_connect(&mut h2, &ingress.url(""), "/chat", "websocket", GPTBOT).await;
    assert_eq!(res.status(), 200);
    assert!(res.headers().get("sec-websocket-accept").is_none(), "{:?}", res.headers());
    let mut ws = ws.unwrap();
    ws_echo(&mut ws, "hello over h2").await;

    // On the same connection, while that WebSocket is open: a disallowed bot gets
    // robotsgate's 403, the site never asked.
    let (res, ws_refused) = h2_connect(&mut h2, &ingress.url(""), "/private/chat", "websocket", GPTBOT).await;
    assert!(ws_refused.is_none());
    assert_eq!(res.status(), 403);
    assert_eq!(res.headers()["x-robotsgate"], "disallowed");
    let body = bounded("403 body", res.into_body().collect()).await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("GPTBot"), "{body:?}");
    assert_eq!(site.hits("/private/chat"), 0);

    // A CONNECT for another protocol is not forwarded: the ingress is no forward proxy.
    let (res, other) = h2_connect(&mut h2, &ingress.url(""), "/chat", "connect-udp", GPTBOT).await;
    assert!(other.is_none());
    assert_eq!(res.status(), 400);
    assert_eq!(res.headers()["x-robotsgate"], "bad-request");

    // A site that answers the opening with a page, not a 101: to an extended CONNECT a
    // 200 would mean the tunnel is open, so it is a 502.
    let (res, page) = h2_connect(&mut h2, &ingress.url(""), "/page", "websocket", GPTBOT).await;
    assert!(page.is_none());
    assert_eq!(res.status(), 502);
    assert_eq!(site.hits("/page"), 1);

    ws_echo(&mut ws, "and again").await;
    bounded("close", futures_util::SinkExt::close(&mut ws)).await.expect("close");
    drop(ws);
    until("the site sees the close", || site.ws_closed() == 1).await;
    assert_eq!(site.ws_messages(), 2);
    let seen = site.seen_for("/chat");
    assert_eq!(seen.len(), 1, "the other protocol's CONNECT never reached the site");
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].target, "/chat");
    assert_eq!(seen[0].headers["upgrade"], "websocket");
    assert_eq!(seen[0].headers["sec-websocket-version"], "13");
    assert_eq!(seen[0].headers["x-forwarded-for"], "127.0.0.1");
    assert!(seen[0].headers["sec-websocket-key"].len() == 24, "{:?}", seen[0].headers);
    ingress.stop().await;
    let recs: Vec<_> = read_jsonl(&log).into_iter().filter(|r| r["type"] == "ingress").collect();
    let outcomes: Vec<_> = recs
        .iter()
        .map(|r| (r["method"].as_str().unwrap(), r["outcome"].as_str().unwrap(), r["status"].as_u64()))
        .collect();
    assert_eq!(
        outcomes,
        [
            ("CONNECT", "allowed", Some(200)),
            ("CONNECT", "disallowed", Some(403)),
            ("CONNECT", "allowed", Some(400)),
            ("CONNECT", "allowed", Some(502))
        ]
    );
}

#[tokio::test]
async fn websockets_over_http2_extended_connect_pass_through_the_https_listener() {
    use http_body_util::BodyExt as _;
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/chat", Reply::websocket()),
        ("/private/chat", Reply::websocket()),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = certificate(dir.path());
    let cfg = config_file(dir.path(), NO_VERIFY);
    let log = dir.path().join("audit.jsonl");
    let ingress = start_https(&site, &cfg, &cert, &key, &["--audit-log", log.to_str().unwrap()]).await;

    // HTTP/2 chosen in the TLS handshake (ALPN h2 only), over rustls.
    let tls = tls_to(&ingress, &ca, &[b"h2"]).await;
    assert_eq!(tls.get_ref().1.alpn_protocol(), Some(&b"h2"[..]), "the listener chose h2");
    let base = format!("https://localhost:{}", ingress.addr.port());
    let mut h2 = h2_ready(tls, &base).await;

    // An allowed bot: the WebSocket is open over the HTTP/2 stream, frames echoed.
    let (res, ws) = h2_connect(&mut h2, &base, "/chat", "websocket", GPTBOT).await;
    assert_eq!(res.status(), 200);
    let mut ws = ws.expect("the WebSocket");
    ws_echo(&mut ws, "hello over h2 and tls").await;

    // A disallowed bot on the same connection: robotsgate's 403, the site never asked.
    let (res, refused) = h2_connect(&mut h2, &base, "/private/chat", "websocket", GPTBOT).await;
    assert!(refused.is_none());
    assert_eq!(res.status(), 403);
    assert_eq!(res.headers()["x-robotsgate"], "disallowed");
    let body = bounded("403 body", res.into_body().collect()).await.unwrap().to_bytes();
    assert!(String::from_utf8_lossy(&body).contains("GPTBot"), "{body:?}");
    assert_eq!(site.hits("/private/chat"), 0);

    ws_echo(&mut ws, "and again").await;
    bounded("close", futures_util::SinkExt::close(&mut ws)).await.expect("close");
    drop(ws);
    until("the site sees the close", || site.ws_closed() == 1).await;
    assert_eq!(site.ws_messages(), 2);
    let seen = site.seen_for("/chat");
    assert_eq!(seen.len(), 1);
    assert_eq!((seen[0].method.as_str(), seen[0].headers["upgrade"].to_str().unwrap()), ("GET", "websocket"));
    assert_eq!(seen[0].headers["x-forwarded-proto"], "https", "the site is told it came over https");
    ingress.stop().await;
    let recs: Vec<_> = read_jsonl(&log).into_iter().filter(|r| r["type"] == "ingress").collect();
    let outcomes: Vec<_> = recs
        .iter()
        .map(|r| (r["method"].as_str().unwrap(), r["outcome"].as_str().unwrap(), r["status"].as_u64()))
        .collect();
    assert_eq!(outcomes, [("CONNECT", "allowed", Some(200)), ("CONNECT", "disallowed", Some(403))]);
}

#[tokio::test]
async fn a_silent_websocket_is_closed_after_the_idle_timeout() {
    use futures_util::StreamExt as _;
    let site = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/chat", Reply::websocket())]).await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &format!("[ingress]\nwebsocket_idle_timeout = \"300ms\"\n{NO_VERIFY}"));
    let ingress = Ingress::start("http", &["--upstream", &site.base(), "--config", &cfg]).await;
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let url = format!("ws://{}/chat", ingress.addr);
    let (mut ws, _) = bounded("handshake", tokio_tungstenite::client_async(ws_request(&url, GPTBOT), tcp))
        .await
        .expect("101");
    ws_echo(&mut ws, "hello").await;
    let started = std::time::Instant::now();
    // Nothing more is sent: robotsgate closes both sides.
    let next = bounded("the close", ws.next()).await;
    assert!(!matches!(next, Some(Ok(tokio_tungstenite::tungstenite::Message::Text(_)))), "{next:?}");
    assert!(started.elapsed() >= std::time::Duration::from_millis(200), "{:?}", started.elapsed());
    until("the site sees the close", || site.ws_closed() == 1).await;
    ingress.stop().await;
}

/// A site that sends part of a body and then nothing: the answer is cut after
/// `ingress.upstream_read_timeout` (before, the client waited for as long as it would).
#[tokio::test]
async fn a_body_the_site_stops_sending_is_cut_off() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/stalls", Reply::pattern(5000).stall_after(1000)),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &format!("[ingress]\nupstream_read_timeout = \"500ms\"\n{NO_VERIFY}"));
    let ingress = Ingress::start("http", &["--upstream", &site.base(), "--config", &cfg]).await;
    let request = format!("GET /stalls HTTP/1.1\r\nHost: {}\r\nUser-Agent: {BROWSER}\r\n\r\n", ingress.addr);
    // Read until robotsgate closes the connection (bounded: the test fails if it never does).
    let got = parse_response(&raw_exchange(ingress.addr, request.as_bytes()).await);
    assert_eq!(got.status, 200);
    assert_eq!(got.header("content-length"), Some("5000"));
    assert_eq!(got.body.len(), 1000, "what the site sent, and no more");
    ingress.stop().await;
}

/// A client that asks for a large answer and stops reading it: closed after
/// `ingress.send_timeout` (before, held for good).
#[tokio::test]
async fn a_client_that_stops_reading_is_closed_after_the_send_timeout() {
    let site =
        TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/big", Reply::pattern(64 * 1024 * 1024))])
            .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &format!("[ingress]\nsend_timeout = \"500ms\"\n{NO_VERIFY}"));
    let mut ingress = Ingress::start(
        "http",
        &["--upstream", &site.base(), "--config", &cfg, "--admin-listen", "127.0.0.1:0"],
    )
    .await;
    let admin = ingress.process.address("admin listener", "at http://").await;
    let mut tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let request = format!("GET /big HTTP/1.1\r\nHost: {}\r\nUser-Agent: {BROWSER}\r\n\r\n", ingress.addr);
    tcp.write_all(request.as_bytes()).await.unwrap();
    until("the request reached the site", || site.hits("/big") == 1).await;
    // Nothing is read: robotsgate gives up on the client.
    let open = "robotsgate_ingress_open_connections";
    let (_, text) = admin_until(admin, "/metrics", |_, t| sample(t, open) == Some(0.0)).await;
    assert_eq!(sample(&text, open), Some(0.0), "{text}");
    let cut =
        |reason: &str| sample(&text, &format!("robotsgate_ingress_clients_cut_total{{reason=\"{reason}\"}}"));
    assert_eq!((cut("send-timeout"), cut("stuck")), (Some(1.0), Some(0.0)), "{text}");
    drop(tcp);
    ingress.stop().await;
}

/// An HTTP/2 client that grants no flow-control window for its answer, and answers the
/// keep-alive pings: its connection is closed after `ingress.send_timeout` (before, it held
/// the answer, the site's request and an upstream connection for good: no write waits, and
/// bytes move). A client that takes its answer slowly but steadily gets all of it: 16 KiB
/// of window every 400 ms, with a 1 s bound (the answer's 64 KiB parts go to hyper in 16
/// KiB parts: a 64 KiB part waited 1.6 s for its window, and was cut).
#[tokio::test]
async fn an_http2_client_that_grants_no_window_is_closed_after_the_send_timeout() {
    use http_body_util::BodyExt as _;
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/big", Reply::pattern(1024 * 1024)),
        ("/mid", Reply::ok(vec![b'm'; 256 * 1024])),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let cfg = config_file(dir.path(), &format!("[ingress]\nsend_timeout = \"1s\"\n{NO_VERIFY}"));
    let mut ingress = Ingress::start(
        "http",
        &["--upstream", &site.base(), "--config", &cfg, "--admin-listen", "127.0.0.1:0"],
    )
    .await;
    let admin = ingress.process.address("admin listener", "at http://").await;
    let request = |path: &str| {
        http::Request::get(ingress.url(path))
            .header("user-agent", BROWSER)
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap()
    };

    // A window of 0 (HTTP/2 over cleartext, prior knowledge): the head comes, no byte of
    // the body can.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let (mut h2, conn) = hyper::client::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new())
        .initial_stream_window_size(0)
        .handshake(hyper_util::rt::TokioIo::new(tcp))
        .await
        .unwrap();
    let driver = tokio::spawn(conn);
    let res = bounded("the head", h2.send_request(request("/big"))).await.unwrap();
    assert_eq!(res.status(), 200);
    let started = std::time::Instant::now();
    bounded("the connection ends", driver).await.unwrap().ok();
    assert!(started.elapsed() >= std::time::Duration::from_millis(900), "after {:?}", started.elapsed());
    let open = "robotsgate_ingress_open_connections";
    let (_, text) = admin_until(admin, "/metrics", |_, t| sample(t, open) == Some(0.0)).await;
    assert_eq!(sample(&text, open), Some(0.0), "{text}");
    let cut =
        |reason: &str| sample(&text, &format!("robotsgate_ingress_clients_cut_total{{reason=\"{reason}\"}}"));
    assert_eq!((cut("stuck"), cut("send-timeout")), (Some(1.0), Some(0.0)), "{text}");
    drop(res);

    // The default window (64 KiB), the answer read a part (a DATA frame, 16 KiB at most)
    // every 400 ms, its window given back as it is read: all of it.
    let tcp = tokio::net::TcpStream::connect(ingress.addr).await.unwrap();
    let (mut h2, conn) = hyper::client::conn::http2::handshake(
        hyper_util::rt::TokioExecutor::new(),
        hyper_util::rt::TokioIo::new(tcp),
    )
    .await
    .unwrap();
    let _driver = tokio::spawn(conn);
    let res = bounded("the head", h2.send_request(request("/mid"))).await.unwrap();
    assert_eq!(res.status(), 200);
    let mut body = res.into_body();
    let (mut got, mut pauses) = (0, 0);
    while let Some(frame) = bounded("a part", body.frame()).await {
        got += frame.expect("no error").into_data().map_or(0, |d| d.len());
        tokio::time::sleep(std::time::Duration::from_millis(400)).await;
        pauses += 1;
    }
    assert_eq!(got, 256 * 1024);
    assert!(pauses >= 16, "read in {pauses} parts");
    ingress.stop().await;
}

#[tokio::test]
async fn sighup_reloads_the_robots_file_mode_and_status() {
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /\n")),
        ("/private/x", Reply::ok("secret")),
        ("/other", Reply::ok("other")),
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let robots = dir.path().join("robots.txt");
    std::fs::write(&robots, ROBOTS).unwrap();
    let cfg = dir.path().join("robotsgate.toml");
    let write_config = |extra: &str| {
        let text = format!("[ingress]\nrobots = {:?}\n{extra}\n{NO_VERIFY}", robots.to_str().unwrap());
        std::fs::write(&cfg, text).unwrap();
    };
    write_config("");
    let mut ingress =
        Ingress::start("http", &["--upstream", &site.base(), "--config", cfg.to_str().unwrap()]).await;
    let base = ingress.url("");
    let status = |path: &'static str| {
        let url = format!("{base}{path}");
        async move { curl(&url, GPTBOT, &[]).await.0 }
    };
    assert_eq!(status("/private/x").await, 403);
    assert_eq!(status("/other").await, 200);

    // A new file and status; a timeout changed too (needs a restart: said so).
    let new = "User-agent: GPTBot\nDisallow: /other\n";
    std::fs::write(&robots, new).unwrap();
    write_config("status = 404\nupstream_timeout = \"30s\"");
    ingress.process.signal("-HUP");
    ingress.process.wait_line("reloaded", |l| l.contains("configuration reloaded")).await;
    ingress
        .process
        .wait_line("restart", |l| l.contains("ingress timeouts") && l.contains("only on restart"))
        .await;
    assert_eq!(status("/private/x").await, 200);
    assert_eq!(status("/other").await, 404);
    let (code, _, body, _) = curl(&ingress.url("/robots.txt"), GPTBOT, &[]).await;
    assert_eq!((code, body.as_slice()), (200, new.as_bytes()));

    // Report-only: decided, passed.
    write_config("status = 404\nmode = \"report-only\"");
    ingress.process.signal("-HUP");
    ingress.process.wait_line("reloaded", |l| l.contains("configuration reloaded")).await;
    assert_eq!(status("/other").await, 200);

    // A status that cannot refuse: refused, the configuration in force kept.
    write_config("status = 200");
    ingress.process.signal("-HUP");
    ingress.process.wait_line("refused", |l| l.contains("reload refused")).await;
    assert_eq!(status("/other").await, 200, "still report-only");
    // A file that is gone: refused too.
    std::fs::remove_file(&robots).unwrap();
    write_config("status = 403");
    ingress.process.signal("-HUP");
    ingress.process.wait_line("refused", |l| l.contains("reload refused") && l.contains("robots")).await;
    assert_eq!(status("/other").await, 200, "still report-only");
    assert_eq!(site.hits("/robots.txt"), 0, "the file, never the site's");
    ingress.stop().await;
}

/// SIGHUP re-reads the HTTPS certificate and key: a new TLS connection gets the new
/// certificate (a client trusting only the old CA is refused); a broken file leaves the
/// pair in force, and says so.
#[tokio::test]
async fn sighup_reloads_the_tls_certificate_and_a_broken_one_keeps_the_old() {
    let site = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("page"))]).await;
    let dir = tempfile::tempdir().unwrap();
    let (old_ca, new_ca) = (TestCa::new("old", &["127.0.0.1"]), TestCa::new("new", &["127.0.0.1"]));
    let (old_dir, new_dir) = (dir.path().join("old"), dir.path().join("new"));
    std::fs::create_dir_all(&old_dir).unwrap();
    std::fs::create_dir_all(&new_dir).unwrap();
    let (old_cert, old_key) = old_ca.write_leaf(&old_dir);
    let (new_cert, new_key) = new_ca.write_leaf(&new_dir);
    let old_trust = old_ca.write_pem(&dir.path().join("old-ca.pem"));
    let new_trust = new_ca.write_pem(&dir.path().join("new-ca.pem"));
    let (cert, key) = (dir.path().join("site.pem"), dir.path().join("site-key.pem"));
    std::fs::copy(&old_cert, &cert).unwrap();
    std::fs::copy(&old_key, &key).unwrap();
    let cfg = dir.path().join("robotsgate.toml");
    std::fs::write(
        &cfg,
        format!(
            "[ingress]\ntls_cert = {:?}\ntls_key = {:?}\n{NO_VERIFY}",
            cert.to_str().unwrap(),
            key.to_str().unwrap()
        ),
    )
    .unwrap();
    let mut ingress =
        Ingress::start("https", &["--upstream", &site.base(), "--config", cfg.to_str().unwrap()]).await;
    let url = ingress.url("/page");
    let status = |trust: &Path| {
        let (url, trust) = (url.clone(), trust.to_str().unwrap().to_owned());
        async move { curl(&url, BROWSER, &["--cacert", &trust]).await.0 }
    };
    assert_eq!(status(&old_trust).await, 200);
    assert_eq!(status(&new_trust).await, 0, "the new CA is not the one in force yet");

    // The files swapped: the next connection gets the new certificate.
    std::fs::copy(&new_cert, &cert).unwrap();
    std::fs::copy(&new_key, &key).unwrap();
    ingress.process.signal("-HUP");
    ingress.process.wait_line("reloaded", |l| l.contains("TLS certificate reloaded")).await;
    assert_eq!(status(&new_trust).await, 200);
    assert_eq!(status(&old_trust).await, 0, "the old certificate is gone");

    // A broken certificate file, and a key that is not the certificate's: the new pair stays.
    for (c, k) in [
        (&b"not a certificate"[..], new_key.as_path()),
        (&std::fs::read(&new_cert).unwrap()[..], old_key.as_path()),
    ] {
        std::fs::write(&cert, c).unwrap();
        std::fs::copy(k, &key).unwrap();
        ingress.process.signal("-HUP");
        let said = ingress.process.wait_line("refused", |l| l.contains("TLS certificate not reloaded")).await;
        assert!(said.contains("site"), "names the file: {said}");
        ingress.process.wait_line("rest reloaded", |l| l.contains("configuration reloaded")).await;
        assert_eq!(status(&new_trust).await, 200, "{said}");
    }
    assert_eq!(site.hits("/page"), 4);
    ingress.stop().await;
}
