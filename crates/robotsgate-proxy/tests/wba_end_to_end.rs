//! Issue 30's end-to-end proof: robotsgate signing on one side, robotsgate verifying on the
//! other, both the real binary. `robotsgate identity keygen` makes the key; `robotsgate run`
//! signs what it forwards with it and serves its key directory on `[identity]
//! directory_listen`; the directory is put behind HTTPS (a TLS front with the test kit's CA,
//! as an operator puts it behind its domain) because verifiers fetch `https` directories
//! only; `robotsgate ingress`, in front of a site, verifies the request's Web Bot Auth
//! signature against that directory, and its audit record says `verified`, by
//! `signature`, naming the key and the Signature-Agent. The same request through a
//! `robotsgate run` that does not sign is unverified and refused.

mod support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};

use http::StatusCode;
use robotsgate::identity::httpsig::PublicKey;
use serde_json::Value;
use support::*;
use tokio::net::{TcpListener, TcpStream};

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0; +https://keys.test)";

/// A TLS front on loopback: terminates TLS with `ca`'s leaf and relays the bytes to the
/// address set later in `to` (the directory listener's, known once robotsgate runs).
struct TlsFront {
    addr: SocketAddr,
    to: Arc<OnceLock<SocketAddr>>,
    connections: Arc<AtomicUsize>,
}

impl TlsFront {
    async fn start(ca: &TestCa) -> TlsFront {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(ca.server_config(&[b"http/1.1"]));
        let to: Arc<OnceLock<SocketAddr>> = Arc::default();
        let connections = Arc::new(AtomicUsize::new(0));
        let (target, count) = (to.clone(), connections.clone());
        tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                let (acceptor, target) = (acceptor.clone(), target.clone());
                tokio::spawn(async move {
                    let Some(Ok(mut tls)) = within(acceptor.accept(tcp)).await else { return };
                    let Some(&to) = target.get() else { return };
                    let Some(Ok(mut plain)) = within(TcpStream::connect(to)).await else { return };
                    let _ = within(tokio::io::copy_bidirectional(&mut tls, &mut plain)).await;
                });
            }
        });
        TlsFront { addr, to, connections }
    }
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_owned()
}

/// `robotsgate run --config <config>`: the proxy's address, the directory's (when it
/// serves one) and the process.
async fn run(config: &str, directory: bool) -> (SocketAddr, Option<SocketAddr>, Spawned) {
    let mut process = Spawned::start(BIN, &["run", "--config", config]);
    let proxy = process.address("robotsgate is running", "at http://").await;
    let dir = match directory {
        true => Some(process.address("key directory served at", "served at http://").await),
        false => None,
    };
    (proxy, dir, process)
}

async fn stop(mut process: Spawned) {
    process.signal("-TERM");
    let status = process.wait_exit().await;
    assert!(status.success(), "{status:?}: {}", process.seen.join("\n"));
}

/// A request for `url` through the proxy at `proxy`, as ExampleBot.
async fn crawl(proxy: SocketAddr, url: &str) -> Got {
    let mut req = get_request(url);
    req.headers_mut().insert("user-agent", EXAMPLEBOT.parse().unwrap());
    collect(send(proxy, req).await).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn robotsgate_run_signs_and_robotsgate_ingress_verifies_the_signature() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();

    // The key, as an operator makes it.
    let keys = d.join("id");
    let out = std::process::Command::new(BIN)
        .args(["identity", "keygen", "--dir", keys.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jwk: Value = serde_json::from_slice(&std::fs::read(keys.join("identity.jwk")).unwrap()).unwrap();
    let keyid = PublicKey::from_jwk(&jwk).unwrap().thumbprint().to_owned();

    // The directory's HTTPS front, and the Signature-Agent naming it.
    let ca = TestCa::new("wba-end-to-end", &["keys.test"]);
    let front = TlsFront::start(&ca).await;
    let agent = format!("https://keys.test:{}", front.addr.port());

    // The site, and robotsgate ingress in front of it, verifying ExampleBot's signatures.
    let site = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: ExampleBot\nAllow: /\n\nUser-agent: *\nDisallow: /\n")),
        ("/page", Reply::ok("page")),
    ])
    .await;
    let ca_pem = ca.write_pem(&d.join("ca.pem"));
    let log = d.join("ingress.jsonl");
    let ingress_config = write(
        d,
        "ingress.toml",
        &format!(
            "[dns.static]\n\"keys.test\" = [\"127.0.0.1\"]\n\n[tls]\nextra_roots = [{ca_pem:?}]\n\n\
             [guard]\nallow = [\"127.0.0.0/8\"]\n\n[verify]\nrdns = false\nrefresh = false\nmax_wait = \"2s\"\n\n\
             [[verify.operators]]\nname = \"Example\"\ntokens = [\"ExampleBot\"]\n\
             signature_agents = [\"{agent}\"]\nrequire = true\n"
        ),
    );
    let mut ingress = Spawned::start(
        BIN,
        &[
            "ingress",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &site.base(),
            "--config",
            &ingress_config,
            "--audit-log",
            log.to_str().unwrap(),
        ],
    );
    let ingress_addr = ingress.running_at("robotsgate ingress is running").await;
    let page = format!("http://{ingress_addr}/page");

    // robotsgate run, signing with the key, its directory behind the front.
    let proxy_config = |identity: &str| {
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n\n[agent]\ntoken = \"ExampleBot\"\n\n\
             [guard]\nallow = [\"127.0.0.0/8\"]\n\n{identity}"
        )
    };
    let signing = write(
        d,
        "signing.toml",
        &proxy_config(&format!(
            "[identity]\nsigning_key = {:?}\nsignature_agent = \"{agent}\"\n\
             directory_listen = \"127.0.0.1:0\"\n",
            keys.join("identity.key").to_str().unwrap()
        )),
    );
    let (proxy, directory, signer) = run(&signing, true).await;
    front.to.set(directory.unwrap()).unwrap();

    let got = crawl(proxy, &page).await;
    assert_eq!((got.status, got.text().as_str()), (StatusCode::OK, "page"), "{}", got.describe());
    assert!(front.connections.load(Ordering::SeqCst) >= 1, "the ingress fetched the directory over HTTPS");
    stop(signer).await;

    // The same through a robotsgate run that does not sign: refused, unverified.
    let plain = write(d, "plain.toml", &proxy_config(""));
    let (proxy, _, unsigned) = run(&plain, false).await;
    let got = crawl(proxy, &page).await;
    assert_eq!(got.status, StatusCode::FORBIDDEN, "{}", got.describe());
    // (The forward proxy drops the ingress's `X-Robotsgate`: the client would take it for
    // its own refusal. The ingress's record below says why.)
    stop(unsigned).await;
    stop(ingress).await;
    assert_eq!(site.hits("/page"), 1, "only the signed request reached the site");

    let records: Vec<Value> = read_jsonl(&log).into_iter().filter(|r| r["type"] == "ingress").collect();
    let pages: Vec<&Value> = records.iter().filter(|r| r["path"] == "/page").collect();
    assert_eq!(pages.len(), 2, "{records:#?}");
    let (signed, unsigned) = (pages[0], pages[1]);
    assert_eq!(
        (&signed["outcome"], &signed["identity"], &signed["identity_method"], &signed["operator"]),
        (&"allowed".into(), &"verified".into(), &"signature".into(), &"Example".into()),
        "{signed:#}"
    );
    let detail = signed["identity_detail"].as_str().unwrap();
    assert!(detail.contains(&keyid) && detail.contains(&agent), "{detail}");
    assert_eq!(
        (&unsigned["outcome"], &unsigned["identity"], &unsigned["identity_why"]),
        (&"identity-unverified".into(), &"unverified".into(), &"no_method".into()),
        "{unsigned:#}"
    );
}
