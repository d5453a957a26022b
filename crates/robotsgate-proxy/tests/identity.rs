//! Issue 30: the proxy signs what it forwards with Web Bot Auth (`[identity]`) and serves
//! its key directory. Origins on loopback record what they received; Cloudflare's
//! `web-bot-auth` crate (code robotsgate did not write) verifies the signatures against the
//! public key, and the directory's response signatures against every published key.
//!
//! Transports: plain HTTP in absolute form, a WebSocket upgrade, plain HTTP inside a
//! `CONNECT` tunnel, intercepted HTTPS over HTTP/1.1 and HTTP/2 (each signed); a tunnel
//! that is not intercepted is not signed, and its record says `"signed": false`. These
//! start robotsgate with `App::start` (the configuration path of `robotsgate run`); the
//! key commands, the directory listener and a signed request go through the real binary.

mod support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use robotsgate::identity::httpsig::{PublicKey, SigningKey, WELL_KNOWN_PATH};
use robotsgate_proxy::config::{Config, Dur};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const AGENT: &str = "https://bot.example";

/// A key written as `robotsgate identity keygen` writes it (the private JWK), and its path.
fn write_key(dir: &Path, name: &str) -> (Arc<SigningKey>, PathBuf) {
    let key = SigningKey::generate().unwrap();
    let path = dir.join(name);
    std::fs::write(&path, key.to_private_jwk().to_string()).unwrap();
    (Arc::new(key), path)
}

/// `config` signing with a new key for [`AGENT`]; the key.
fn signing(config: &mut Config, dir: &Path) -> Arc<SigningKey> {
    let (key, path) = write_key(dir, "identity.key");
    config.identity.signing_key = path.display().to_string();
    config.identity.signature_agent = AGENT.into();
    config.identity.validity = Dur(Duration::from_secs(45));
    key
}

/// A request with a client's own signature fields, to be replaced.
fn forged(mut req: http::Request<ReqBody>) -> http::Request<ReqBody> {
    let h = req.headers_mut();
    h.insert("signature-agent", "sig1=\"https://impostor.example\"".parse().unwrap());
    h.insert("signature-input", "sig1=(\"@authority\");created=1;tag=\"web-bot-auth\"".parse().unwrap());
    h.insert("signature", "sig1=:AAAA:".parse().unwrap());
    req
}

/// The decision records for `url`.
fn decisions<'a>(records: &'a [serde_json::Value], url: &str) -> Vec<&'a serde_json::Value> {
    of_type(records, "decision").into_iter().filter(|d| d["url"] == url).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn plain_http_websocket_and_connect_http_are_signed_replacing_the_clients_fields() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/inside", Reply::ok("inside")),
        ("/chat", Reply::websocket()),
    ])
    .await;
    let mut config = test_config(dir.path());
    let key = signing(&mut config, dir.path());
    let proxy = RunningProxy::start(&config).await;

    // Absolute form.
    let res = send(proxy.addr, forged(get_request(&origin.url("/page")))).await;
    assert_eq!(res.status(), StatusCode::OK);
    let facts = verify_seen(&origin.seen_for("/page")[0], &[key.public()], AGENT);
    assert_eq!(facts.expires - facts.created, 45, "identity.validity");
    assert_eq!(facts.keyid, key.public().thumbprint());

    // A WebSocket upgrade: the handshake request is signed.
    let mut tcp = bounded("connect", tokio::net::TcpStream::connect(proxy.addr)).await.unwrap();
    let handshake = format!(
        "GET {} HTTP/1.1\r\nHost: {}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\
         Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\
         Signature: sig1=:AAAA:\r\n\r\n",
        origin.url("/chat"),
        origin.authority()
    );
    bounded("write", tcp.write_all(handshake.as_bytes())).await.unwrap();
    let mut head = Vec::new();
    bounded("101", async {
        while !head.ends_with(b"\r\n\r\n") {
            head.push(tcp.read_u8().await.unwrap());
        }
    })
    .await;
    assert!(head.starts_with(b"HTTP/1.1 101"), "{}", String::from_utf8_lossy(&head));
    let seen = &origin.seen_for("/chat")[0];
    assert_eq!(seen.headers["upgrade"], "websocket");
    verify_seen(seen, &[key.public()], AGENT);
    drop(tcp);

    // Plain HTTP inside a CONNECT tunnel (not intercepted, but robotsgate sees it).
    let (answer, tcp) = connect(proxy.addr, &origin.authority()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let mut conn = h1(tcp).await;
    let got = exchange(&mut conn, forged(get_request(&origin.url("/inside")))).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    verify_seen(&origin.seen_for("/inside")[0], &[key.public()], AGENT);

    // Refused: not sent, and recorded as not signed.
    let res = send(proxy.addr, get_request(&origin.url("/private/x"))).await;
    assert_eq!(res.status(), StatusCode::FORBIDDEN);

    let records = proxy.records().await;
    for path in ["/page", "/chat", "/inside"] {
        let d = decisions(&records, &origin.url(path));
        assert_eq!(d.len(), 1, "{path}: {records:#?}");
        assert_eq!(d[0]["signed"], true, "{path}: {:#}", d[0]);
    }
    assert_eq!(decisions(&records, &origin.url("/private/x"))[0]["signed"], false);
    let tunnel = decisions(&records, &format!("{}/", origin.base()));
    assert!(tunnel.iter().all(|d| d["method"] == "CONNECT" && d["signed"] == false), "{tunnel:#?}");
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn intercepted_https_is_signed_over_http1_and_http2() {
    let tls = Tls::new();
    let origin = TestOrigin::start_tls(
        [("/robots.txt", Reply::ok(ROBOTS)), ("/h1", Reply::ok("one")), ("/h2", Reply::ok("two"))],
        tls.origin_ca.server_config(&[b"h2", b"http/1.1"]),
    )
    .await;
    let mut config = tls.config();
    let key = signing(&mut config, tls.dir.path());
    let proxy = RunningProxy::start(&config).await;
    let host = format!("localhost:{}", origin.port());

    let mut conn = h1(tunnel(proxy.addr, &host, &tls.client(&[b"http/1.1"]), "localhost").await).await;
    let got = h1_get(&mut conn, &host, "/h1").await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    let seen = &origin.seen_for("/h1")[0];
    assert_eq!(authority_of(seen), host);
    verify_seen(seen, &[key.public()], AGENT);

    let stream = tunnel(proxy.addr, &host, &tls.client(&[b"h2", b"http/1.1"]), "localhost").await;
    assert_eq!(alpn(&stream).as_deref(), Some(&b"h2"[..]));
    let mut conn = h2(stream).await;
    let (_, got) = h2_get(&mut conn, &format!("https://{host}/h2")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    verify_seen(&origin.seen_for("/h2")[0], &[key.public()], AGENT);

    let records = proxy.records().await;
    for path in ["/h1", "/h2"] {
        let d = decisions(&records, &format!("https://{host}{path}"));
        assert_eq!((d.len(), &d[0]["signed"], &d[0]["transport"]), (1, &true.into(), &"intercepted".into()));
    }
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tunnel_not_intercepted_is_not_signed_and_its_record_says_so() {
    let tls = Tls::new();
    let origin = TestOrigin::start_tls(
        [("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("unseen"))],
        tls.origin_ca.server_config(&[b"http/1.1"]),
    )
    .await;
    let mut config = tls.config();
    config.tls.bypass = vec!["bypass.test".parse().unwrap()];
    signing(&mut config, tls.dir.path());
    let proxy = RunningProxy::start(&config).await;

    let host = format!("bypass.test:{}", origin.port());
    let (answer, tcp) = connect(proxy.addr, &host).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    let stream = handshake(&client_config(tls.origin_ca.roots(), &[b"http/1.1"]), "bypass.test", tcp)
        .await
        .expect("the origin's own certificate");
    let mut conn = h1(stream).await;
    let got = h1_get(&mut conn, &host, "/page").await;
    assert_eq!(got.status, StatusCode::OK);
    let seen = &origin.seen_for("/page")[0];
    assert!(seen.headers.get("signature").is_none(), "robotsgate cannot sign inside TLS it does not see");

    let records = proxy.records().await;
    let d = decisions(&records, &format!("https://{host}/"));
    assert_eq!(d.len(), 1, "{records:#?}");
    assert_eq!((&d[0]["method"], &d[0]["signed"]), (&"CONNECT".into(), &false.into()));
    proxy.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_identity_records_have_no_signed_field_and_requests_are_untouched() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("x"))]).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let res = send(proxy.addr, forged(get_request(&origin.url("/page")))).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(origin.seen_for("/page")[0].headers["signature"], "sig1=:AAAA:");
    let records = proxy.records().await;
    assert!(decisions(&records, &origin.url("/page"))[0].get("signed").is_none());
    proxy.stop().await;
}

// ---------------------------------------------------------------------------------------
// The real binary: keys, the directory, a signed request
// ---------------------------------------------------------------------------------------

/// Runs the binary with `args` (absolute paths) in a temporary working directory, so that
/// nothing it writes lands in the source tree.
async fn robotsgate(args: &[&str]) -> std::process::Output {
    let cwd = temp_dir();
    let mut command = Command::new(BIN);
    command.current_dir(cwd.path()).args(args).env("NO_COLOR", "1").stdin(Stdio::null()).kill_on_drop(true);
    bounded("robotsgate", command.output()).await.expect("run robotsgate")
}

fn public_of(path: &Path) -> PublicKey {
    let jwk: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    PublicKey::from_jwk(&jwk).expect("a public JWK whose kid is its thumbprint")
}

#[tokio::test]
async fn keygen_writes_the_pair_and_never_overwrites_without_force() {
    let dir = temp_dir();
    let d = dir.path().join("id");
    let d = d.to_str().unwrap();
    let out = robotsgate(&["identity", "keygen", "--dir", d]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let (key_path, jwk_path) = (Path::new(d).join("identity.key"), Path::new(d).join("identity.jwk"));
    let public = public_of(&jwk_path);
    let jwk: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&jwk_path).unwrap()).unwrap();
    assert_eq!(jwk["kid"], public.thumbprint());
    assert!(jwk.get("d").is_none(), "the public file has no private part");
    assert!(String::from_utf8_lossy(&out.stdout).contains(public.thumbprint()));
    let private: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&key_path).unwrap()).unwrap();
    assert_eq!(SigningKey::from_jwk(&private).unwrap().public(), &public);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&key_path).unwrap().permissions().mode() & 0o777, 0o600);
    }

    let before = std::fs::read(&key_path).unwrap();
    let out = robotsgate(&["identity", "keygen", "--dir", d]).await;
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--force"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read(&key_path).unwrap(), before, "not overwritten");

    let out = robotsgate(&["identity", "keygen", "--dir", d, "--force"]).await;
    assert!(out.status.success());
    assert_ne!(std::fs::read(&key_path).unwrap(), before, "replaced with --force");
    let new = public_of(&jwk_path);
    assert_ne!(new, public);

    // The directory of a key file, for a static check.
    let out = robotsgate(&["identity", "directory", "--key", key_path.to_str().unwrap()]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jwks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(jwks["keys"][0]["kid"], new.thumbprint());
    assert!(jwks["keys"][0].get("d").is_none());
}

/// `robotsgate run --config <config>`: its proxy address, the key directory's address
/// (the two "running" lines, in whichever order they come) and the process.
async fn run_binary(config: &Path) -> (SocketAddr, SocketAddr, Spawned) {
    let mut process = Spawned::start(BIN, &["run", "--config", config.to_str().unwrap()]);
    let proxy = process.address("robotsgate is running", "at http://").await;
    let directory = process.address("key directory served at", "served at http://").await;
    (proxy, directory, process)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_signs_and_serves_its_directory_with_the_rotated_keys() {
    let dir = temp_dir();
    let (new, new_path) = write_key(dir.path(), "new.key");
    let (old, old_path) = write_key(dir.path(), "old.key");
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("hello"))]).await;
    let config = dir.path().join("robotsgate.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n\n[agent]\ntoken = \"ExampleBot\"\n\n\
             [guard]\nallow = [\"127.0.0.0/8\"]\n\n[audit]\npath = \"{audit}\"\n\n\
             [identity]\nsigning_key = \"{new}\"\nsignature_agent = \"{AGENT}\"\n\
             published_keys = [\"{old}\"]\ndirectory_listen = \"127.0.0.1:0\"\n",
            audit = dir.path().join("audit.jsonl").display(),
            new = new_path.display(),
            old = old_path.display(),
        ),
    )
    .unwrap();
    let (proxy, directory, mut process) = run_binary(&config).await;

    // The directory, signed for the authority it was asked at, by both keys.
    let tcp = bounded("connect", tokio::net::TcpStream::connect(directory)).await.unwrap();
    let mut conn = h1(tcp).await;
    let req = http::Request::get(WELL_KNOWN_PATH).header("host", "bot.example").body(empty()).unwrap();
    let got = exchange(&mut conn, req).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    assert_eq!(got.header("cache-control"), "no-store");
    assert_eq!(got.header("content-type"), "application/http-message-signatures-directory+json");
    let jwks: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let served: Vec<PublicKey> =
        jwks["keys"].as_array().unwrap().iter().map(|k| PublicKey::from_jwk(k).unwrap()).collect();
    assert_eq!(served, vec![new.public().clone(), old.public().clone()], "the signing key and the old one");
    let refs: Vec<&PublicKey> = served.iter().collect();
    assert_eq!(verify_directory(&got.headers, &got.body, "bot.example", &refs), 2);
    let other = http::Request::get("/").header("host", "bot.example").body(empty()).unwrap();
    assert_eq!(exchange(&mut conn, other).await.status, StatusCode::NOT_FOUND);
    drop(conn);

    // A request through the proxy, verified with the key the directory serves.
    let res = send(proxy, forged(get_request(&origin.url("/page")))).await;
    assert_eq!(res.status(), StatusCode::OK);
    let facts = verify_seen(&origin.seen_for("/page")[0], &[&served[0]], AGENT);
    assert_eq!(facts.expires - facts.created, 60, "the default validity");
    assert_eq!(facts.keyid, new.public().thumbprint(), "signed with signing_key, not the old key");
    // The robots.txt fetch was signed too.
    let fetched = verify_seen(&origin.seen_for("/robots.txt")[0], &[&served[0]], AGENT);
    assert_eq!(fetched.keyid, new.public().thumbprint());

    let _ = process.child.start_kill();
    process.wait_exit().await;
}

/// The directory `robotsgate run --config <config>` serves for `bot.example`: its keys,
/// after checking its response signatures with `web-bot-auth`.
async fn served_keys(config: &Path) -> Vec<PublicKey> {
    let (_, directory, mut process) = run_binary(config).await;
    let tcp = bounded("connect", tokio::net::TcpStream::connect(directory)).await.unwrap();
    let mut conn = h1(tcp).await;
    let req = http::Request::get(WELL_KNOWN_PATH).header("host", "bot.example").body(empty()).unwrap();
    let got = exchange(&mut conn, req).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.describe());
    let jwks: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let served: Vec<PublicKey> =
        jwks["keys"].as_array().unwrap().iter().map(|k| PublicKey::from_jwk(k).unwrap()).collect();
    let refs: Vec<&PublicKey> = served.iter().collect();
    assert_eq!(verify_directory(&got.headers, &got.body, "bot.example", &refs), served.len());
    drop(conn);
    let _ = process.child.start_kill();
    process.wait_exit().await;
    served
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_dropped_from_the_directory_no_longer_verifies() {
    use robotsgate::identity::httpsig::RequestSigner;
    let dir = temp_dir();
    let (new, new_path) = write_key(dir.path(), "new.key");
    let (old, old_path) = write_key(dir.path(), "old.key");
    let config = dir.path().join("robotsgate.toml");
    let write_config = |published: &str| {
        std::fs::write(
            &config,
            format!(
                "[proxy]\nlisten = \"127.0.0.1:0\"\n\n[agent]\ntoken = \"ExampleBot\"\n\n\
                 [identity]\nsigning_key = \"{new}\"\nsignature_agent = \"{AGENT}\"\n\
                 published_keys = [{published}]\ndirectory_listen = \"127.0.0.1:0\"\n",
                new = new_path.display(),
            ),
        )
        .unwrap();
    };
    // A request signed with the old key before it was retired.
    let signer = RequestSigner::new(old.clone(), AGENT).unwrap();
    let mut parts = http::Request::get("http://site.example/page")
        .header("host", "site.example")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    signer.sign(&mut parts, std::time::SystemTime::now()).unwrap();
    let seen = Seen {
        method: "GET".into(),
        path: "/page".into(),
        target: "/page".into(),
        headers: parts.headers,
        at: tokio::time::Instant::now(),
        connection: 1,
    };

    // Both keys published (rotation under way): it verifies against the directory.
    write_config(&format!("\"{}\"", old_path.display()));
    let both = served_keys(&config).await;
    assert_eq!(both, vec![new.public().clone(), old.public().clone()]);
    let refs: Vec<&PublicKey> = both.iter().collect();
    assert_eq!(verify_seen(&seen, &refs, AGENT).keyid, old.public().thumbprint());

    // The old key dropped: the directory serves the new one only, and the same signature
    // no longer verifies against it.
    write_config("");
    let after = served_keys(&config).await;
    assert_eq!(after, vec![new.public().clone()]);
    let refused = std::panic::catch_unwind(|| verify_seen(&seen, &[&after[0]], AGENT));
    assert!(refused.is_err(), "a signature by a key no longer published must not verify");
}

// ---------------------------------------------------------------------------------------
// [identity.users]: one proxy, several crawlers, each signing as itself
// ---------------------------------------------------------------------------------------

/// A request for `url` as proxy user `user` (password "pw").
fn get_as(url: &str, user: &str) -> http::Request<ReqBody> {
    use base64::Engine as _;
    let mut req = get_request(url);
    let login = base64::engine::general_purpose::STANDARD.encode(format!("{user}:pw"));
    req.headers_mut().insert(http::header::PROXY_AUTHORIZATION, format!("Basic {login}").parse().unwrap());
    req
}

/// The directory the listener at `directory` serves for `host`: its keys, its response
/// signatures checked with `web-bot-auth`.
async fn directory_for(directory: SocketAddr, host: &str, path: &str) -> Vec<PublicKey> {
    let tcp = bounded("connect", tokio::net::TcpStream::connect(directory)).await.unwrap();
    let mut conn = h1(tcp).await;
    let req = http::Request::get(path).header("host", host).body(empty()).unwrap();
    let got = exchange(&mut conn, req).await;
    assert_eq!(got.status, StatusCode::OK, "{host}{path}: {}", got.describe());
    let jwks: serde_json::Value = serde_json::from_slice(&got.body).unwrap();
    let keys: Vec<PublicKey> =
        jwks["keys"].as_array().unwrap().iter().map(|k| PublicKey::from_jwk(k).unwrap()).collect();
    let refs: Vec<&PublicKey> = keys.iter().collect();
    assert_eq!(verify_directory(&got.headers, &got.body, host, &refs), keys.len());
    keys
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_proxy_user_or_token_signs_with_its_own_key_and_directory() {
    let dir = temp_dir();
    let (default, default_path) = write_key(dir.path(), "default.key");
    let (alice, alice_path) = write_key(dir.path(), "alice.key");
    let (news, news_path) = write_key(dir.path(), "news.key");
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n")),
        ("/a", Reply::ok("a")),
        ("/b", Reply::ok("b")),
        ("/c", Reply::ok("c")),
    ])
    .await;
    let hash = robotsgate_proxy::auth::hash_password("pw").unwrap();
    let config = dir.path().join("robotsgate.toml");
    std::fs::write(
        &config,
        format!(
            "[proxy]\nlisten = \"127.0.0.1:0\"\n\n[auth.users]\nalice = \"{hash}\"\nbob = \"{hash}\"\n\
             carol = \"{hash}\"\n\n[agent]\ntoken = \"ExampleBot\"\nselect = \"proxy-user\"\n\n\
             [agent.users]\ncarol = \"NewsBot\"\n\n[guard]\nallow = [\"127.0.0.0/8\"]\n\n\
             [identity]\nsigning_key = \"{default}\"\nsignature_agent = \"{AGENT}\"\n\
             directory_listen = \"127.0.0.1:0\"\n\n\
             [identity.users.alice]\nsigning_key = \"{alice}\"\nsignature_agent = \"https://alice.example\"\n\n\
             [identity.users.newsbot]\nsigning_key = \"{news}\"\n\
             signature_agent = \"https://news.example/keys/directory.json\"\n",
            default = default_path.display(),
            alice = alice_path.display(),
            news = news_path.display(),
        ),
    )
    .unwrap();
    let (proxy, directory, mut process) = run_binary(&config).await;

    // alice: her key (a user entry); bob: the default key; carol, as NewsBot: the token's.
    for (user, path) in [("alice", "/a"), ("bob", "/b"), ("carol", "/c")] {
        let res = send(proxy, get_as(&origin.url(path), user)).await;
        assert_eq!(res.status(), StatusCode::OK, "{user}");
    }
    let a = verify_seen(&origin.seen_for("/a")[0], &[alice.public()], "https://alice.example");
    let b = verify_seen(&origin.seen_for("/b")[0], &[default.public()], AGENT);
    let c =
        verify_seen(&origin.seen_for("/c")[0], &[news.public()], "https://news.example/keys/directory.json");
    assert_eq!(
        [&a.keyid, &b.keyid, &c.keyid],
        [alice.public().thumbprint(), default.public().thumbprint(), news.public().thumbprint()]
    );
    assert!(a.keyid != b.keyid && b.keyid != c.keyid && a.keyid != c.keyid);
    // Another user's key does not verify alice's request.
    let wrong = std::panic::catch_unwind(|| {
        verify_seen(&origin.seen_for("/a")[0], &[default.public()], "https://alice.example")
    });
    assert!(wrong.is_err(), "alice's request is not signed with the default key");
    // robots.txt, fetched once for all of them, with the default key.
    assert_eq!(origin.hits("/robots.txt"), 1);
    verify_seen(&origin.seen_for("/robots.txt")[0], &[default.public()], AGENT);

    // Each directory where its Signature-Agent says, signed by its own keys.
    assert_eq!(directory_for(directory, "alice.example", WELL_KNOWN_PATH).await, [alice.public().clone()]);
    assert_eq!(
        directory_for(directory, "news.example", "/keys/directory.json").await,
        [news.public().clone()]
    );
    assert_eq!(directory_for(directory, "bot.example", WELL_KNOWN_PATH).await, [default.public().clone()]);

    // `robotsgate identity directory --config F --user NAME`: that entry's JWKS.
    let out =
        robotsgate(&["identity", "directory", "--config", config.to_str().unwrap(), "--user", "alice"]).await;
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let jwks: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(jwks["keys"][0]["kid"], alice.public().thumbprint());
    assert_eq!(jwks["keys"].as_array().unwrap().len(), 1);
    let out =
        robotsgate(&["identity", "directory", "--config", config.to_str().unwrap(), "--user", "bob"]).await;
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("no [identity.users.bob]"));

    let _ = process.child.start_kill();
    process.wait_exit().await;
}

#[tokio::test]
async fn identity_users_are_checked_with_errors_naming_the_entry() {
    let dir = temp_dir();
    let (_, default_path) = write_key(dir.path(), "default.key");
    let (_, alice_path) = write_key(dir.path(), "alice.key");
    let write = |users: &str| {
        let path = dir.path().join("robotsgate.toml");
        std::fs::write(
            &path,
            format!(
                "[proxy]\nlisten = \"127.0.0.1:0\"\n\n[agent]\ntoken = \"ExampleBot\"\n\n\
                 [identity]\nsigning_key = \"{}\"\nsignature_agent = \"{AGENT}\"\n\n{users}",
                default_path.display()
            ),
        )
        .unwrap();
        path
    };
    let fails = |path: PathBuf, check: bool| async move {
        let mut args = vec!["run", "--config", path.to_str().unwrap()];
        if check {
            args.push("--check-config");
        }
        let out = robotsgate(&args).await;
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).into_owned()
    };
    let missing = dir.path().join("missing.key");
    let e = fails(
        write(&format!(
            "[identity.users.NewsBot]\nsigning_key = \"{}\"\nsignature_agent = \"https://news.example\"\n",
            missing.display()
        )),
        false,
    )
    .await;
    assert!(e.contains("identity.users.NewsBot") && e.contains("missing.key"), "{e}");
    let e = fails(
        write(&format!(
            "[identity.users.NewsBot]\nsigning_key = \"{}\"\nsignature_agent = \"http://news.example\"\n",
            alice_path.display()
        )),
        true,
    )
    .await;
    assert!(e.contains("identity.users.NewsBot.signature_agent") && e.contains("https"), "{e}");
    let e = fails(
        write(&format!(
            "[identity.users.\"not a token\"]\nsigning_key = \"{}\"\nsignature_agent = \"https://x.example\"\n",
            alice_path.display()
        )),
        true,
    )
    .await;
    assert!(e.contains("neither an [auth] user nor a product token"), "{e}");
    let e = fails(write("[identity.users.NewsBot]\nsignature_agent = \"https://x.example\"\n"), true).await;
    assert!(e.contains("signing_key"), "{e}");
}

/// An `[identity.users.NAME]` entry is a proxy user's or a product token's by `[auth]
/// users`: a reload (what SIGHUP runs) that makes NAME a user sorts it anew, and the keyid
/// of the signed requests follows, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_that_changes_auth_users_sorts_identity_users_anew() {
    use robotsgate_proxy::config::{IdentityUser, PasswordHashValue, Select};
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nAllow: /\n")),
        ("/bob1", Reply::ok("1")),
        ("/bob2", Reply::ok("2")),
        ("/bob3", Reply::ok("3")),
        ("/carol", Reply::ok("c")),
    ])
    .await;
    let hash = PasswordHashValue(robotsgate_proxy::auth::hash_password("pw").unwrap());
    let mut config = test_config(dir.path());
    let default = signing(&mut config, dir.path());
    let (carol, carol_path) = write_key(dir.path(), "carol.key");
    config.auth.users.insert("bob".into(), hash.clone());
    config.agent.select = Select::ProxyUser;
    // bob crawls as the product token "carol"; carol is not (yet) a proxy user.
    config.agent.users.insert("bob".into(), "carol".parse().unwrap());
    config.identity.users.insert(
        "carol".into(),
        IdentityUser {
            signing_key: carol_path.display().to_string(),
            signature_agent: "https://carol.example".into(),
            published_keys: Vec::new(),
        },
    );
    let proxy = RunningProxy::start(&config).await;
    let keyid_of = |path: &str, key: &SigningKey, agent: &str| {
        verify_seen(&origin.seen_for(path)[0], &[key.public()], agent).keyid
    };

    // Before: the entry is the token's, so bob's requests carry carol's key.
    let res = send(proxy.addr, get_as(&origin.url("/bob1"), "bob")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(keyid_of("/bob1", &carol, "https://carol.example"), carol.public().thumbprint());

    // carol becomes a proxy user: her entry signs her requests, bob's go with the default.
    let mut with_carol = config.clone();
    with_carol.auth.users.insert("carol".into(), hash);
    let restart = proxy.reloader.reload(&with_carol).expect("reload");
    assert!(restart.is_empty(), "nothing waits for a restart: {restart:?}");
    let res = send(proxy.addr, get_as(&origin.url("/carol"), "carol")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(keyid_of("/carol", &carol, "https://carol.example"), carol.public().thumbprint());
    let res = send(proxy.addr, get_as(&origin.url("/bob2"), "bob")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(keyid_of("/bob2", &default, AGENT), default.public().thumbprint());

    // And back: the entry is the token's again.
    proxy.reloader.reload(&config).expect("reload");
    let res = send(proxy.addr, get_as(&origin.url("/bob3"), "bob")).await;
    assert_eq!(res.status(), StatusCode::OK);
    assert_eq!(keyid_of("/bob3", &carol, "https://carol.example"), carol.public().thumbprint());
    proxy.stop().await;
}
