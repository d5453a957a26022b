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
async fn exchange(name: &str, via: &Via, addr: SocketAddr, bytes: &str) -> String {
    let tcp = bounded("connect", tokio::net::TcpStream::connect(addr)).await.unwrap();
    let mut stream: Box<dyn Stream> = match via {
        Via::Plain => Box::new(tcp),
        Via::Tls(config) => {
            let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
            let tls = tokio_rustls::TlsConnector::from(config.clone()).connect(name, tcp);
            Box::new(bounded("TLS handshake", tls).await.unwrap())
        }
    };
    stream.write_all(bytes.as_bytes()).await.unwrap();
    stream.flush().await.unwrap();
    let mut got = Vec::new();
    // A reset after the answers (a server closing with unread bytes), or a TLS peer closing
    // without close_notify, ends it too.
    let _ = bounded(&format!("{name}: read to the close"), stream.read_to_end(&mut got)).await;
    masked(&got)
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
    let (dir_fast, dir_hyper) = (temp_dir(), temp_dir());
    let mut config = test_config(dir_fast.path());
    config.agent.token = "GPTBot".parse().unwrap();
    let fast = RunningProxy::start(&config).await;
    let mut config = test_config(dir_hyper.path());
    config.agent.token = "GPTBot".parse().unwrap();
    config.proxy.http1_fast_path = false;
    let hyper = RunningProxy::start(&config).await;
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
        let name = format!("{on}-{tls}");
        let config = dir.path().join(format!("ingress-{name}.toml"));
        let mut text = format!("[ingress]\nhttp1_fast_path = {on}\n");
        if tls {
            text +=
                &format!("tls_cert = {:?}\ntls_key = {:?}\n", cert.to_str().unwrap(), key.to_str().unwrap());
        }
        text += "[verify]\nenabled = false\n[log]\nlevel = \"debug\"\n";
        std::fs::write(&config, text).unwrap();
        let log = dir.path().join(format!("audit-{name}.jsonl"));
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
