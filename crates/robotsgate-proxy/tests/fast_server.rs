//! The client side of the HTTP/1.1 fast path (`src/h1_server.rs`): robotsgate reads a
//! client's plain `GET` and `HEAD` requests itself and hands the connection to hyper at the
//! first request of another shape. Differential: the same bytes from a client, sent to a
//! proxy with the fast path and to one without it (`http1_fast_path = false`: hyper reads
//! everything), get the same bytes back, `Date` values aside. For the forward proxy (in
//! process) and for the ingress (the binary), with framings a hyper origin never sends,
//! pipelined requests, a hand-over in the middle of a connection, and request shapes from
//! strangers (both lengths, two lengths, obs-fold, a head over the limit, a bad field name,
//! HTTP/1.0). Each exchange ends with the server closing the connection (a request that
//! says `Connection: close`, or one that is refused as malformed), so the client reads to
//! the end, never to a timeout.
//!
//! Then generated ones, for both proxies: pipelines of requests of many shapes (methods,
//! field names in any case, values with spaces and tabs, bodies, hop-by-hop fields, and now
//! and then a shape from strangers), answered by an origin with heads and framings of many
//! shapes (statuses, reasons, lengths, chunks with extensions and trailers, a close, a
//! length beside the coding, heads no proxy may pass on). Both proxies must answer alike,
//! send the origin the same heads, and answer as the origin said (or 403 where the
//! robots.txt says no, 502 where the origin's answer cannot be passed on).
//! `FAST_PATH_PIPELINES=N` runs more of them; a failure names its seed, and
//! `FAST_PATH_SEED=N` runs that pipeline alone and prints what it sends.

mod support;

use std::net::SocketAddr;

use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const BOT: &str = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot) ExampleBot/1.0";

fn script(path: &str) -> (Vec<u8>, bool) {
    match path {
        "/fields" => (FIELDS.to_vec(), false),
        "/chunked" => (
            b"HTTP/1.1 404 Not Found\r\nTransfer-Encoding: chunked\r\nX-Why: gone\r\n\r\n\
              3;ext=1\r\nnot\r\n6\r\n found\r\n0\r\nX-Trailer: t\r\n\r\n"
                .to_vec(),
            false,
        ),
        "/no-content" => (b"HTTP/1.1 204 No Content\r\nX-A: 1\r\n\r\n".to_vec(), false),
        "/not-modified" => (b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n".to_vec(), false),
        "/big" => {
            let body = "0123456789abcdef".repeat(100 * 64);
            (format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}", body.len()).into_bytes(), false)
        }
        "/http10" => (b"HTTP/1.0 200 OK\r\nContent-Type: text/plain\r\n\r\nuntil the close".to_vec(), true),
        _ => (ok("w"), false),
    }
}

/// A request for `path`: `target` is the origin's URL for the forward proxy and the path
/// for the ingress; `extra` are lines added to the head.
fn request(method: &str, target: &str, host: &str, extra: &str) -> String {
    format!("{method} {target} HTTP/1.1\r\nHost: {host}\r\nUser-Agent: {BOT}\r\nAccept: */*\r\n{extra}\r\n")
}

/// The exchanges, each with the statuses its first responses must have, in order.
fn exchanges(target: &dyn Fn(&str) -> String, host: &str) -> Vec<(&'static str, String, Vec<u16>)> {
    let get = |path: &str, extra: &str| request("GET", &target(path), host, extra);
    let close = "Connection: close\r\n";
    // Over the 64 KiB limit, under hyper's buffer (whose own bound is not exact): refused
    // by robotsgate itself (431), and the connection goes on.
    let long = format!("X-Long: {}\r\n", "a".repeat(70 * 1024));
    vec![
        (
            "pipelined, every framing",
            [
                get("/fields", ""),
                get("/chunked", ""),
                request("HEAD", &target("/fields"), host, ""),
                request("HEAD", &target("/chunked"), host, ""),
                get("/private/x", ""),
                get("/no-content", ""),
                get("/not-modified", ""),
                get("/big", ""),
                get("/fields", close),
            ]
            .concat(),
            vec![200, 404, 200, 404, 403, 204, 304, 200, 200],
        ),
        (
            // The ingress passes the HTTP/1.0 answer on as it is (and closes after it); the
            // forward proxy sends it chunked and goes on.
            "an origin's answer that ends with its connection",
            [get("/fields", ""), get("/http10", ""), get("/fields", close)].concat(),
            vec![200, 200],
        ),
        (
            "handed to hyper in the middle",
            [
                get("/fields", ""),
                request("POST", &target("/fields"), host, "Content-Length: 3\r\n") + "abc",
                get("/chunked", close),
            ]
            .concat(),
            vec![200, 200, 404],
        ),
        (
            "handed to hyper at once",
            [get("/fields", "Content-Length: 0\r\n"), get("/fields", close)].concat(),
            vec![200, 200],
        ),
        (
            "both lengths",
            get("/fields", "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n")
                + "0\r\n\r\n"
                + &get("/fields", close),
            // Answered, then closed (a request with both is never followed on its connection).
            vec![200],
        ),
        ("two lengths", get("/fields", "Content-Length: 1\r\nContent-Length: 2\r\n") + "ab", vec![400]),
        ("obs-fold", [get("/fields", ""), get("/fields", "X-A: 1\r\n folded\r\n")].concat(), vec![200, 400]),
        (
            "a head over the limit",
            [get("/fields", ""), get("/fields", &long), get("/fields", close)].concat(),
            vec![200, 431, 200],
        ),
        (
            "a bad field name",
            [get("/fields", ""), get("/fields", "Bad Name: x\r\n")].concat(),
            vec![200, 400],
        ),
        (
            "HTTP/1.0",
            [
                get("/fields", ""),
                request("GET", &target("/fields"), host, "").replacen("HTTP/1.1", "HTTP/1.0", 1),
            ]
            .concat(),
            vec![200, 200],
        ),
        ("a request that asks to close", get("/chunked", close), vec![404]),
    ]
}

/// How a client reaches a proxy: plain TCP, or TLS trusting these roots (HTTP/1.1 by ALPN).
#[derive(Clone)]
enum Via {
    Plain,
    Tls(std::sync::Arc<rustls::ClientConfig>),
}

/// Sends `bytes` on a new connection to `addr` and reads until the server closes it: what
/// came back, `Date` values masked.
async fn exchange(name: &str, via: &Via, addr: SocketAddr, bytes: impl AsRef<[u8]>) -> String {
    let got = exchange_raw(name, via, addr, bytes.as_ref()).await;
    masked(&got)
}

/// Sends `bytes` on a new connection to `addr` and reads until the server closes it.
async fn exchange_raw(name: &str, via: &Via, addr: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let tcp = bounded("connect", tokio::net::TcpStream::connect(addr)).await.unwrap();
    let mut stream: Box<dyn Stream> = match via {
        Via::Plain => Box::new(tcp),
        Via::Tls(config) => {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let tls = tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp);
            Box::new(bounded("TLS handshake", tls).await.unwrap())
        }
    };
    // A server may close after an answer while the rest is being written (a request it
    // refuses as malformed): what it answered is read all the same.
    let _ = stream.write_all(bytes).await;
    let _ = stream.flush().await;
    let mut got = Vec::new();
    // A reset after the answers (a server closing with unread bytes), or a TLS peer closing
    // without close_notify, ends it too.
    let _ = bounded(&format!("{name}: read to the close"), stream.read_to_end(&mut got)).await;
    got
}

/// `got` as text, `Date` values masked.
fn masked(got: &[u8]) -> String {
    String::from_utf8_lossy(got)
        .split("\r\n")
        .map(|line| if line.to_ascii_lowercase().starts_with("date: ") { "date: (masked)" } else { line })
        .collect::<Vec<_>>()
        .join("\r\n")
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send {}
impl<T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send> Stream for T {}

/// The status codes of the responses in `text`, in order (no body here holds `HTTP/1.`).
fn statuses(text: &str) -> Vec<u16> {
    text.match_indices("HTTP/1.").filter_map(|(i, _)| text.get(i + 9..i + 12)?.parse().ok()).collect()
}

/// Runs every exchange against both, and checks that they answer alike and as expected.
async fn compare(
    via: &Via,
    fast: SocketAddr,
    hyper: SocketAddr,
    target: &dyn Fn(&str) -> String,
    host: &str,
) {
    for (name, bytes, expected) in exchanges(target, host) {
        let by_hyper = exchange(&format!("{name} (hyper)"), via, hyper, &bytes).await;
        let by_fast = exchange(&format!("{name} (fast path)"), via, fast, &bytes).await;
        let got = statuses(&by_hyper);
        assert!(
            got.starts_with(&expected),
            "{name}: hyper's answers are {got:?}, not {expected:?}\n{by_hyper}"
        );
        assert_eq!(by_fast, by_hyper, "{name}: the fast path answered otherwise than hyper");
    }
}

/// What the fast path logs, caught in process (the one subscriber of this test binary).
#[derive(Clone, Default)]
struct Logged(std::sync::Arc<std::sync::Mutex<Vec<u8>>>);

impl std::io::Write for Logged {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

impl<'a> tracing_subscriber::fmt::MakeWriter<'a> for Logged {
    type Writer = Logged;
    fn make_writer(&'a self) -> Logged {
        self.clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_forward_proxy_answers_the_same_bytes_with_and_without_the_fast_path() {
    let logged = Logged::default();
    tracing_subscriber::fmt()
        .with_env_filter("robotsgate_proxy::h1_server=debug")
        .with_writer(logged.clone())
        .try_init()
        .expect("the test binary's one subscriber");
    let origin = RawOrigin::start(ROBOTS, script).await;
    let ((fast, _fast_dir), (hyper, _hyper_dir)) = (forward_proxy(true).await, forward_proxy(false).await);
    let host = origin.addr.to_string();
    compare(&Via::Plain, fast.addr, hyper.addr, &|path| origin.url(path), &host).await;
    fast.stop().await;
    hyper.stop().await;
    // The fast path was taken (only the proxy with it hands connections to hyper).
    let logged = String::from_utf8_lossy(&logged.0.lock().unwrap()).into_owned();
    assert!(logged.contains("the connection goes on with hyper"), "{logged}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_ingress_answers_the_same_bytes_with_and_without_the_fast_path() {
    let origin = RawOrigin::start(ROBOTS, script).await;
    let dir = temp_dir();
    let ca = TestCa::localhost();
    let (cert, key) = ca.write_leaf(dir.path());
    let start = |on: bool, tls: bool| {
        let mut ingress = format!("http1_fast_path = {on}\n");
        if tls {
            ingress +=
                &format!("tls_cert = {:?}\ntls_key = {:?}\n", cert.to_str().unwrap(), key.to_str().unwrap());
        }
        start_ingress(dir.path(), &format!("{on}-{tls}"), &origin, &ingress, "[log]\nlevel = \"debug\"\n")
    };
    let mut processes = Vec::new();
    for tls in [false, true] {
        let (mut fast, mut hyper) = (start(true, tls), start(false, tls));
        let scheme = if tls { "at https://" } else { "at http://" };
        let fast_addr = fast.address("robotsgate ingress is running", scheme).await;
        let hyper_addr = hyper.address("robotsgate ingress is running", scheme).await;
        let via = if tls { Via::Tls(client_config(ca.roots(), &[b"http/1.1"])) } else { Via::Plain };
        compare(&via, fast_addr, hyper_addr, &|path| path.to_owned(), "example.com").await;
        processes.push((tls, fast, hyper));
    }
    for (tls, fast, hyper) in processes {
        let mut said = Vec::new();
        for mut process in [fast, hyper] {
            process.signal("-TERM");
            let status = process.wait_exit().await;
            said.push(process.said().await);
            assert!(status.success(), "{status:?}: {}", said.last().unwrap());
        }
        // The fast path was taken, and handed connections over; hyper alone never does.
        let handed = "the connection goes on with hyper";
        assert!(said[0].contains(handed), "TLS {tls}, with the fast path: {}", said[0]);
        assert!(!said[1].contains(handed), "TLS {tls}, without it: {}", said[1]);
    }
}

/// A forward proxy for GPTBot, with the fast path or without it, and its folder.
async fn forward_proxy(fast_path: bool) -> (RunningProxy, tempfile::TempDir) {
    let dir = temp_dir();
    let mut config = test_config(dir.path());
    config.agent.token = "GPTBot".parse().unwrap();
    config.proxy.http1_fast_path = fast_path;
    (RunningProxy::start(&config).await, dir)
}

/// Starts `robotsgate ingress` in front of `origin`, identity checks off, its files in
/// `dir` named by `name`: `ingress` are lines of its `[ingress]` section, `more` other
/// sections.
fn start_ingress(
    dir: &std::path::Path,
    name: &str,
    origin: &RawOrigin,
    ingress: &str,
    more: &str,
) -> Spawned {
    let config = dir.join(format!("ingress-{name}.toml"));
    std::fs::write(&config, format!("[ingress]\n{ingress}[verify]\nenabled = false\n{more}")).unwrap();
    let log = dir.join(format!("audit-{name}.jsonl"));
    let args = [
        "ingress",
        "--listen",
        "127.0.0.1:0",
        "--upstream",
        &origin.url(""),
        "--config",
        config.to_str().unwrap(),
        "--audit-log",
        log.to_str().unwrap(),
    ]
    .map(str::to_owned);
    Spawned::start(BIN, &args.iter().map(String::as_str).collect::<Vec<_>>())
}

/// A head that comes a byte at a time (each its own segment) is read and answered, the
/// same as one that comes whole.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_that_comes_a_byte_at_a_time_is_answered() {
    let origin = RawOrigin::start(ROBOTS, script).await;
    let dir = temp_dir();
    let mut config = test_config(dir.path());
    config.agent.token = "GPTBot".parse().unwrap();
    let proxy = RunningProxy::start(&config).await;
    let host = origin.addr.to_string();
    let bytes = request("GET", &origin.url("/fields"), &host, "Connection: close\r\n");
    let whole = exchange("whole", &Via::Plain, proxy.addr, &bytes).await;
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    for byte in bytes.as_bytes() {
        tcp.write_all(std::slice::from_ref(byte)).await.unwrap();
    }
    let mut got = Vec::new();
    let _ = bounded("read to the close", tcp.read_to_end(&mut got)).await;
    assert_eq!(statuses(&whole), [200]);
    assert_eq!(masked(&got), whole);
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// Generated exchanges: many pipelines of requests of many shapes, answered by an origin
// with heads and framings of many shapes, through both proxies. Each pipeline and each
// answer comes from a seed; a failure names it, and `FAST_PATH_SEED=N` runs that pipeline
// alone.

/// Pipelines per test (each sent to both proxies).
const PIPELINES: u64 = 400;

/// SplitMix64: small, deterministic, good enough to pick shapes.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u64) as usize]
    }

    /// `name` in a random letter case (field names are case-insensitive; a proxy passes
    /// the origin's case on, or lower-cases it, the same way on both paths).
    fn case(&mut self, name: &str) -> String {
        match self.below(4) {
            0 => name.to_ascii_lowercase(),
            1 => name.to_ascii_uppercase(),
            2 => name.chars().map(|c| if self.chance(50) { c.to_ascii_uppercase() } else { c }).collect(),
            _ => name.to_owned(),
        }
    }

    /// Letters and digits, one to `max` of them.
    fn word(&mut self, max: u64) -> String {
        let len = 1 + self.below(max);
        self.token(len)
    }

    /// One of NAMES, in a random case.
    fn name(&mut self) -> String {
        let name = self.pick(NAMES);
        self.case(name)
    }

    fn token(&mut self, len: u64) -> String {
        const ALNUM: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
        (0..len).map(|_| self.pick(ALNUM) as char).collect()
    }

    /// A field value: visible characters and inner spaces, sometimes with spaces or tabs
    /// around it, sometimes empty.
    fn value(&mut self) -> Vec<u8> {
        const CHARS: &[u8] =
            b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 -_.,;=/\"()*:@!~";
        let mut v = Vec::new();
        if self.chance(10) {
            v.push(self.pick(b" \t"));
        }
        let len = if self.chance(5) { 0 } else { 1 + self.below(40) };
        let inner: Vec<u8> = (0..len).map(|_| self.pick(CHARS)).collect();
        v.extend(inner.trim_ascii());
        if self.chance(10) {
            v.push(self.pick(b" \t"));
        }
        v
    }
}

/// Field names for generated heads: standard ones and ones of their own.
const NAMES: &[&str] = &[
    "Accept-Language",
    "Cache-Control",
    "Content-Language",
    "Content-Type",
    "Cookie",
    "ETag",
    "If-None-Match",
    "Last-Modified",
    "Link",
    "Referer",
    "Server",
    "Set-Cookie",
    "Vary",
    "X-Custom",
    "X-Frame-Options",
    "X-Robots-Tag",
    "X-Request-Id",
];

/// What the generated origin answers for a path naming a seed (`…/gen/SEED`, `/h` after
/// it for a `HEAD`, a query allowed): the bytes, whether it closes after them, and the
/// status a proxy is to give (502 for an answer no proxy may pass on).
fn generated_answer(path: &str) -> (Vec<u8>, bool) {
    let a = answer_for(path);
    (a.bytes, a.close)
}

/// A generated origin answer.
struct Answer {
    bytes: Vec<u8>,
    /// The origin closes the connection after it.
    close: bool,
    /// The status a proxy is to give for it (502 for one that no proxy may pass on).
    status: u16,
    /// HTTP/1.0: the ingress passes it on as it is, and the client's connection ends with
    /// it.
    ends: bool,
}

fn answer_for(path: &str) -> Answer {
    let path = path.split('?').next().unwrap_or_default();
    let Some((_, rest)) = path.split_once("/gen/") else {
        return Answer { bytes: ok("not generated"), close: false, status: 200, ends: false };
    };
    let (seed, head_only) = match rest.strip_suffix("/h") {
        Some(seed) => (seed, true),
        None => (rest, false),
    };
    let Ok(seed) = seed.parse() else {
        return Answer { bytes: ok("not generated"), close: false, status: 200, ends: false };
    };
    answer(&mut Gen(seed), head_only)
}

fn answer(g: &mut Gen, head_only: bool) -> Answer {
    // No 429 or 503: they start the proxy's back-off, which depends on the clock.
    let status: u16 =
        g.pick(&[200, 200, 200, 200, 201, 203, 204, 206, 301, 302, 304, 400, 403, 404, 410, 451, 500, 501]);
    let http10 = g.chance(6);
    let mut close = http10;
    let mut head = format!("HTTP/1.{} {status} ", if http10 { 0 } else { 1 }).into_bytes();
    let canonical = http::StatusCode::from_u16(status).unwrap().canonical_reason().unwrap_or("");
    match g.below(20) {
        0..=11 => head.extend(canonical.as_bytes()),
        12..=16 => head.extend(format!("{} {}", g.word(8), g.word(8)).as_bytes()),
        17..=18 => {}
        _ => head.extend(b"Caf\xe9 ok"),
    }
    head.extend(b"\r\n");
    let field = |head: &mut Vec<u8>, name: &str, value: &[u8]| {
        head.extend(name.as_bytes());
        head.extend(b": ");
        head.extend(value);
        head.extend(b"\r\n");
    };
    for _ in 0..g.below(7) {
        let name = g.name();
        let value = g.value();
        field(&mut head, &name, &value);
    }
    if g.chance(10) {
        let name = g.case("Set-Cookie");
        field(&mut head, &name, b"a=1; Path=/");
        field(&mut head, &name, b"b=2");
    }
    // Hop-by-hop fields, which a proxy drops, and one a robotsgate answer would carry.
    if g.chance(8) {
        field(&mut head, &g.case("Connection"), b"close");
        close = true;
    }
    // (Not in HTTP/1.0, after which the origin closes: the close is announced.)
    if g.chance(6) && !http10 {
        field(&mut head, &g.case("Connection"), b"keep-alive, X-Drop");
        field(&mut head, "X-Drop", b"1");
    }
    if g.chance(6) {
        field(&mut head, &g.case("Keep-Alive"), b"timeout=5, max=100");
    }
    if g.chance(4) {
        field(&mut head, "Proxy-Connection", b"keep-alive");
    }
    if g.chance(4) {
        field(&mut head, "Upgrade", b"h2c");
    }
    if g.chance(5) {
        field(&mut head, &g.case("X-Robotsgate"), b"allowed");
    }
    // One origin answer in thirty is one that no proxy may pass on.
    if g.chance(3) {
        match g.below(3) {
            0 => head.extend(b"Content-Length: 5\r\nContent-Length: 6\r\n"),
            1 => head.extend(b"Bad Name: x\r\n"),
            _ => head.extend(b"no colon here\r\n"),
        }
        head.extend(b"\r\nhello");
        return Answer { bytes: head, close: true, status: 502, ends: false };
    }
    let body = if g.chance(20) { String::new() } else { g.word(3000) };
    let bodiless = status == 204 || status == 304;
    let mut bytes = head;
    if bodiless {
        if status == 304 && g.chance(30) {
            field(&mut bytes, "Content-Length", b"123");
        }
        bytes.extend(b"\r\n");
        return Answer { bytes, close, status, ends: http10 };
    }
    match g.below(10) {
        0..=5 => {
            field(&mut bytes, &g.case("Content-Length"), body.len().to_string().as_bytes());
            bytes.extend(b"\r\n");
            if !head_only {
                bytes.extend(body.as_bytes());
            }
        }
        6..=8 if !http10 => {
            field(&mut bytes, &g.case("Transfer-Encoding"), b"chunked");
            if g.chance(15) {
                // A length beside the coding, and not the body's: the coding frames it.
                field(&mut bytes, &g.case("Content-Length"), b"7");
            }
            let trailers = g.chance(30);
            if trailers {
                field(&mut bytes, "Trailer", b"X-T");
            }
            bytes.extend(b"\r\n");
            if !head_only {
                let mut rest = body.as_bytes();
                while !rest.is_empty() {
                    let n = (1 + g.below(700) as usize).min(rest.len());
                    let size = if g.chance(50) { format!("{n:x}") } else { format!("{n:X}") };
                    bytes.extend(size.as_bytes());
                    if g.chance(10) {
                        bytes.extend(b";ext=1");
                    }
                    bytes.extend(b"\r\n");
                    bytes.extend(&rest[..n]);
                    bytes.extend(b"\r\n");
                    rest = &rest[n..];
                }
                bytes.extend(b"0\r\n");
                if trailers {
                    bytes.extend(b"X-T: t\r\n");
                }
                bytes.extend(b"\r\n");
            }
        }
        _ => {
            // Delimited by the close of the connection. (To a HEAD, the close frames
            // nothing: it is announced, or a proxy could send its next request on a
            // connection the origin is closing, a race that ends in a 502 or a retry.)
            if head_only && !http10 {
                field(&mut bytes, "Connection", b"close");
            }
            bytes.extend(b"\r\n");
            if !head_only {
                bytes.extend(body.as_bytes());
            }
            close = true;
        }
    }
    Answer { bytes, close, status, ends: http10 }
}

/// A generated pipeline: its bytes, the statuses it is to be answered with (`None` where a
/// request of a shape from strangers is in it, whose answer the two paths need only agree
/// on), whether each answer is to a `HEAD`, and the paths that may reach the origin.
struct Pipeline {
    bytes: Vec<u8>,
    expected: Option<Vec<u16>>,
    heads: Vec<bool>,
    paths: Vec<String>,
}

/// A pipeline of one to five requests from `seed`. `bot_only`: the proxy decides every
/// request by the robots.txt (the forward proxy, whose crawler is its own); else only a
/// bot's (the ingress).
fn pipeline(seed: u64, target: &dyn Fn(&str) -> String, host: &str, bot_only: bool) -> Pipeline {
    let g = &mut Gen(seed);
    let mut p =
        Pipeline { bytes: Vec::new(), expected: Some(Vec::new()), heads: Vec::new(), paths: Vec::new() };
    let n = 1 + g.below(5);
    for i in 0..n {
        let method = g.pick(&["GET", "GET", "GET", "GET", "HEAD", "HEAD", "OPTIONS", "DELETE", "POST"]);
        let head_only = method == "HEAD";
        let private = g.chance(8);
        let bot = g.chance(85);
        let answer_seed = g.next() >> 12;
        let refused = private && (bot || bot_only);
        let answer = answer_for(&format!("/gen/{answer_seed}{}", if head_only { "/h" } else { "" }));
        // The ingress's client connection ends with an HTTP/1.0 answer.
        let last = i + 1 == n || (!refused && answer.ends && !bot_only);
        let mut path = format!(
            "{}/gen/{answer_seed}{}",
            if private { "/private" } else { "" },
            if head_only { "/h" } else { "" }
        );
        if g.chance(20) {
            path = format!("{path}?q={}", g.word(12));
        }
        let http10 = g.chance(5);
        let mut head =
            format!("{method} {} HTTP/1.{}\r\n", target(&path), if http10 { 0 } else { 1 }).into_bytes();
        let field = |head: &mut Vec<u8>, name: &str, value: &[u8]| {
            head.extend(name.as_bytes());
            head.extend(b": ");
            head.extend(value);
            head.extend(b"\r\n");
        };
        field(&mut head, &g.case("Host"), host.as_bytes());
        let agent = if bot { BOT } else { "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0" };
        field(&mut head, &g.case("User-Agent"), agent.as_bytes());
        for _ in 0..g.below(6) {
            let name = g.name();
            let value = g.value();
            field(&mut head, &name, &value);
        }
        // (An HTTP/1.0 request that asks to keep alive would not end the pipeline.)
        if g.chance(5) && !http10 {
            field(&mut head, &g.case("Connection"), b"keep-alive, X-Drop");
            field(&mut head, "X-Drop", b"1");
        }
        if g.chance(5) {
            field(&mut head, "TE", b"trailers");
        }
        if g.chance(4) {
            field(&mut head, "Proxy-Connection", b"keep-alive");
        }
        // Shapes from strangers, each now and then; after one, the pipeline's answers need
        // only agree.
        let mut odd = true;
        let mut body: Vec<u8> = Vec::new();
        match g.below(50) {
            0 => field(&mut head, "X-Obs", b"caf\xe9"),
            1 => field(&mut head, "X-Ctl", b"a\x01b"),
            2 => head.extend(b"X-Space : x\r\n"),
            3 => head.extend(b"no colon\r\n"),
            4 => {
                field(&mut head, "Transfer-Encoding", b"chunked");
                body.extend(b"3\r\nabc\r\n0\r\n\r\n");
            }
            5 => {
                field(&mut head, "Content-Length", b"0");
                field(&mut head, "Content-Length", b"0");
            }
            6 => field(&mut head, "Expect", b"100-continue"),
            _ => odd = false,
        }
        if method == "POST" {
            let len = g.below(200);
            field(&mut head, "Content-Length", len.to_string().as_bytes());
            body.extend(g.token(len).as_bytes());
        } else if g.chance(5) {
            field(&mut head, "Content-Length", b"0");
        }
        if last {
            field(&mut head, "Connection", b"close");
        }
        head.extend(b"\r\n");
        if g.chance(3) {
            // Bare LF line ends throughout.
            head = String::from_utf8_lossy(&head).replace("\r\n", "\n").into_bytes();
            odd = true;
        }
        p.bytes.extend(head);
        p.bytes.extend(body);
        p.heads.push(head_only);
        if odd {
            p.expected = None;
        }
        if let Some(expected) = &mut p.expected {
            expected.push(if refused { 403 } else { answer.status });
        }
        p.paths.push(path);
        if last {
            break;
        }
        if http10 {
            // An HTTP/1.0 request without keep-alive is the connection's last.
            break;
        }
    }
    p
}

/// The answers in `got` as text, one after another: each head as it came (`Date` values
/// masked), then its body as content, whatever its framing (a chunked body's chunks depend
/// on how the origin's bytes arrived), or a note where the bytes do not parse. `heads`:
/// whether each answer is to a `HEAD` (no body), in order; interim (1xx) answers have none.
fn answers(got: &[u8], heads: &[bool]) -> String {
    let mut out = String::new();
    let mut rest = got;
    let mut i = 0;
    while !rest.is_empty() {
        let Some(end) = rest.windows(4).position(|w| w == b"\r\n\r\n") else {
            out += &format!("[not a head] {}", String::from_utf8_lossy(rest));
            break;
        };
        let head = masked(&rest[..end + 4]);
        rest = &rest[end + 4..];
        out += &head;
        let status: u16 = head.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        if (100..200).contains(&status) {
            continue;
        }
        let to_head = heads.get(i).copied().unwrap_or(false);
        i += 1;
        if to_head || status == 204 || status == 304 {
            continue;
        }
        let field = |name: &str| field(&head, name);
        let body = if field("transfer-encoding").is_some_and(|te| te.ends_with("chunked")) {
            match dechunk(rest) {
                Ok(Some((body, used))) => {
                    rest = &rest[used..];
                    body
                }
                _ => {
                    out += &format!("[bad chunked body] {}", String::from_utf8_lossy(rest));
                    break;
                }
            }
        } else if let Some(len) = field("content-length").and_then(|l| l.parse::<usize>().ok()) {
            let (body, after) = rest.split_at(len.min(rest.len()));
            rest = after;
            body.to_vec()
        } else {
            std::mem::take(&mut rest).to_vec()
        };
        out += &format!("[body of {} bytes] {}\n", body.len(), String::from_utf8_lossy(&body));
    }
    out
}

/// [`answers`]' text for comparing. An origin's answer that no proxy may pass on is read
/// by hyper's client or by the fast path's, whichever has a connection to it free (on
/// either side: which worker accepted the client connection decides), and each words its
/// error its own way: the 502 and its fields are compared, not the words of its body.
fn comparable(answers: &str) -> String {
    answers
        .lines()
        .fold((String::new(), false), |(mut text, in_502), line| {
            let line = if in_502 && line.starts_with("content-length: ") {
                "content-length: (masked)"
            } else if in_502 && line.starts_with("[body of ") {
                "[body] (masked)"
            } else {
                line
            };
            text += line;
            text += "\n";
            (text, if line.starts_with("HTTP/1.") { line.contains(" 502 ") } else { in_502 })
        })
        .0
}

/// The seeds to run: `FAST_PATH_SEED` alone, else PIPELINES (or `FAST_PATH_PIPELINES`) of
/// them from `base`.
fn seeds(base: u64) -> Vec<u64> {
    if let Ok(seed) = std::env::var("FAST_PATH_SEED") {
        return vec![seed.parse().expect("FAST_PATH_SEED is a number")];
    }
    let n = std::env::var("FAST_PATH_PIPELINES").map_or(PIPELINES, |n| n.parse().expect("a number"));
    (0..n).map(|k| base + k).collect()
}

/// Sends each generated pipeline to both proxies, and checks that they answer alike (and as
/// expected, for pipelines without shapes from strangers), that what reached the origin
/// was the same, and that every answer parses.
async fn compare_generated(
    origin: &RawOrigin,
    fast: SocketAddr,
    hyper: SocketAddr,
    target: &dyn Fn(&str) -> String,
    host: &str,
    base: u64,
    bot_only: bool,
) -> (usize, usize) {
    let (mut checked, mut strange) = (0, 0);
    for seed in seeds(base) {
        let p = pipeline(seed, target, host, bot_only);
        let name = format!("pipeline {seed} (FAST_PATH_SEED={seed})");
        let sent = String::from_utf8_lossy(&p.bytes);
        if std::env::var("FAST_PATH_SEED").is_ok() {
            eprintln!("{name} sends:\n{sent}");
        }
        let by_hyper = exchange_raw(&format!("{name}, hyper"), &Via::Plain, hyper, &p.bytes).await;
        let by_hyper = answers(&by_hyper, &p.heads);
        let by_fast = exchange_raw(&format!("{name}, the fast path"), &Via::Plain, fast, &p.bytes).await;
        let by_fast = answers(&by_fast, &p.heads);
        let (fast_text, hyper_text) = (comparable(&by_fast), comparable(&by_hyper));
        if fast_text != hyper_text {
            let (fast_lines, hyper_lines): (Vec<_>, Vec<_>) =
                (fast_text.lines().collect(), hyper_text.lines().collect());
            let at = fast_lines.iter().zip(&hyper_lines).take_while(|(a, b)| a == b).count();
            panic!(
                "{name}: the fast path answered otherwise than hyper, from line {at}:\n\
                 fast path: {:?}\nhyper:     {:?}\nsent:\n{sent}\nhyper's answers:\n{by_hyper}\nthe fast path's:\n{by_fast}",
                fast_lines.get(at),
                hyper_lines.get(at)
            );
        }
        assert!(
            !by_hyper.contains("[not a head]") && !by_hyper.contains("[bad chunked body]"),
            "{name}: an answer that does not parse; sent:\n{sent}\ngot:\n{by_hyper}"
        );
        match &p.expected {
            Some(expected) => {
                assert_eq!(&statuses(&by_hyper), expected, "{name}: sent:\n{sent}\ngot:\n{by_hyper}");
                checked += 1;
            }
            None => strange += 1,
        }
        for path in &p.paths {
            let heads = origin.heads(path);
            assert!(
                heads.is_empty() || (heads.len() == 2 && heads[0] == heads[1]),
                "{name}: {path} reached the origin otherwise: {heads:#?}"
            );
        }
    }
    (checked, strange)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_exchanges_through_the_forward_proxy_are_answered_alike_by_both_paths() {
    let origin = RawOrigin::start(ROBOTS, generated_answer).await;
    let ((fast, _fast_dir), (hyper, _hyper_dir)) = (forward_proxy(true).await, forward_proxy(false).await);
    let host = origin.addr.to_string();
    let (checked, strange) =
        compare_generated(&origin, fast.addr, hyper.addr, &|path| origin.url(path), &host, 1_000, true).await;
    // Both kinds of pipeline were generated (unless one seed was asked for).
    if std::env::var("FAST_PATH_SEED").is_err() {
        assert!(checked > 60 && strange > 5, "{checked} checked, {strange} with shapes from strangers");
    }
    fast.stop().await;
    hyper.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn generated_exchanges_through_the_ingress_are_answered_alike_by_both_paths() {
    let origin = RawOrigin::start(ROBOTS, generated_answer).await;
    let dir = temp_dir();
    let start = |on: bool| {
        start_ingress(dir.path(), &on.to_string(), &origin, &format!("http1_fast_path = {on}\n"), "")
    };
    let (mut fast, mut hyper) = (start(true), start(false));
    let fast_addr = fast.address("robotsgate ingress is running", "at http://").await;
    let hyper_addr = hyper.address("robotsgate ingress is running", "at http://").await;
    let (checked, strange) = compare_generated(
        &origin,
        fast_addr,
        hyper_addr,
        &|path| path.to_owned(),
        "example.com",
        1_000_000,
        false,
    )
    .await;
    if std::env::var("FAST_PATH_SEED").is_err() {
        assert!(checked > 60 && strange > 5, "{checked} checked, {strange} with shapes from strangers");
    }
    for mut process in [fast, hyper] {
        process.signal("-TERM");
        let status = process.wait_exit().await;
        assert!(status.success(), "{status:?}: {}", process.said().await);
    }
}
