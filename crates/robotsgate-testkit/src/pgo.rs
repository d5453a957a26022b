//! The training of an instrumented `robotsgate` for the profile-guided build
//! (`benches/load/pgo.sh`; the binary `robotsgate-pgo-train` runs [`train`]): the traffic of
//! the load benchmark, made in-process, so that the build needs cargo and `llvm-profdata`
//! only (no nginx, no load generator).
//!
//! [`train`] runs the binary four times, each stopped with SIGINT (an instrumented binary
//! writes its profile as it exits, where `LLVM_PROFILE_FILE` says), each time sent
//! `requests` requests or a share of them on 32 keep-alive connections to an origin on
//! loopback that answers as nginx does (its response head's fields, 1 KiB and 100 KiB
//! files, `/robots.txt` disallowing `/private/`):
//!
//! 1. the forward proxy enforcing, with its audit log: `requests` of 1 KiB, a tenth of
//!    100 KiB, a tenth to a disallowed path;
//! 2. the forward proxy in mode `off`: `requests` of 1 KiB;
//! 3. the forward proxy enforcing, through TLS interception: a quarter of `requests`;
//! 4. `robotsgate ingress` in front of the origin: `requests` from an allowed bot, a tenth
//!    from it to a disallowed path, a tenth from a browser.
//!
//! Every answer's status is checked (200, or robotsgate's 403 where the path is
//! disallowed): a profile trained on errors would optimise the wrong paths.

use std::convert::Infallible;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use crate::{ReqBody, Spawned, TestCa, client_config, empty, h1, proxy_conn, tunnel};
use bytes::Bytes;
use http::{Request, Response, StatusCode, header};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use rustls::RootCertStore;
use tokio::net::TcpListener;

/// Client connections a scenario keeps open at once (the load benchmark's c32).
pub const CONNECTIONS: usize = 32;
/// Longest one request, or one TLS handshake at the origin, may take.
const STEP: Duration = Duration::from_secs(20);
/// The product token the forward proxy is configured with.
const TOKEN: &str = "benchbot";
const BOT_UA: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const BROWSER_UA: &str =
    "Mozilla/5.0 (X11; Linux x86_64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/131.0 Safari/537.36";
const ROBOTS: &str = "User-agent: *\nDisallow: /private/\n";

/// Why training failed.
pub type Failure = Box<dyn std::error::Error + Send + Sync>;

/// Trains `bin` as the module says, `requests` (at least [`CONNECTIONS`]) a case; progress
/// on stderr.
pub async fn train(bin: &str, requests: usize) -> Result<(), Failure> {
    if requests < CONNECTIONS {
        return Err(format!("{requests} requests: at least {CONNECTIONS} are needed").into());
    }
    // Absolute: each robotsgate runs in a working directory of its own.
    let bin = std::fs::canonicalize(bin).map_err(|e| format!("{bin}: {e}"))?;
    let bin = path_str(&bin)?;
    let dir = tempfile::tempdir()?;
    let work = dir.path();
    let origin_ca = TestCa::localhost();
    origin_ca.write_pem(&work.join("origin-ca.pem"));
    let origin = serve_origin(None).await?;
    let tls_origin = serve_origin(Some(origin_ca.server_config(&[b"http/1.1"]))).await?;
    let ca_dir = work.join("ca");
    let status = tokio::process::Command::new(bin)
        .args(["ca", "init", "--dir"])
        .arg(&ca_dir)
        .stdout(std::process::Stdio::null())
        .status()
        .await?;
    if !status.success() {
        return Err(format!("{bin} ca init: {status}").into());
    }
    let base = format!("http://127.0.0.1:{}", origin.port());

    eprintln!("training: forward proxy, enforce");
    let mut proxy = start_proxy(bin, work, "enforce", "enforce", tls_origin.port()).await?;
    let at = proxy.running_at("robotsgate is running").await;
    forward(at, &format!("{base}/1k"), requests, StatusCode::OK).await?;
    forward(at, &format!("{base}/100k"), requests / 10, StatusCode::OK).await?;
    forward(at, &format!("{base}/private/x"), requests / 10, StatusCode::FORBIDDEN).await?;
    stop(proxy).await?;

    eprintln!("training: forward proxy, mode off");
    let mut proxy = start_proxy(bin, work, "off", "off", tls_origin.port()).await?;
    let at = proxy.running_at("robotsgate is running").await;
    forward(at, &format!("{base}/1k"), requests, StatusCode::OK).await?;
    stop(proxy).await?;

    eprintln!("training: forward proxy, TLS interception");
    let mut proxy = start_proxy(bin, work, "intercept", "enforce", tls_origin.port()).await?;
    let at = proxy.running_at("robotsgate is running").await;
    intercepted(at, &ca_dir, tls_origin.port(), requests / 4).await?;
    stop(proxy).await?;

    eprintln!("training: ingress");
    std::fs::write(work.join("ingress.toml"), "[verify]\nenabled = false\n")?;
    let (config, audit) = (work.join("ingress.toml"), work.join("ingress-audit.jsonl"));
    // In `work`: the ingress keeps its robots.txt snapshots in robotsgate-snapshots there.
    let mut ingress = Spawned::start_in(
        bin,
        &[
            "ingress",
            "--config",
            path_str(&config)?,
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            &base,
            "--audit-log",
            path_str(&audit)?,
        ],
        work,
    );
    let at = ingress.running_at("robotsgate ingress is running").await;
    let site = format!("http://{at}");
    direct(at, &format!("{site}/1k"), BOT_UA, requests, StatusCode::OK).await?;
    direct(at, &format!("{site}/private/x"), BOT_UA, requests / 10, StatusCode::FORBIDDEN).await?;
    direct(at, &format!("{site}/1k"), BROWSER_UA, requests / 10, StatusCode::OK).await?;
    stop(ingress).await?;
    eprintln!("training: done");
    Ok(())
}

fn path_str(path: &Path) -> Result<&str, Failure> {
    path.to_str().ok_or_else(|| format!("{} is not UTF-8", path.display()).into())
}

/// Starts the forward proxy on an ephemeral port: the load benchmark's configuration
/// (benches/load/robotsgate.toml) in `mode`, intercepting `tls_port`, its audit log and
/// snapshots in a new folder `case` of `work`; `localhost` is 127.0.0.1 whatever the
/// machine's hosts file says (a container's build, say).
async fn start_proxy(
    bin: &str,
    work: &Path,
    case: &str,
    mode: &str,
    tls_port: u16,
) -> Result<Spawned, Failure> {
    let dir = work.join(case);
    std::fs::create_dir(&dir)?;
    let d = path_str(&dir)?;
    let w = path_str(work)?;
    let config = format!(
        "[proxy]\nlisten = \"127.0.0.1:0\"\n[agent]\ntoken = \"{TOKEN}\"\n[policy]\nmode = \"{mode}\"\n\
         [guard]\nallow = [\"127.0.0.0/8\", \"::1/128\"]\n\
         [tls]\nwebpki_roots = false\nextra_roots = [\"{w}/origin-ca.pem\"]\nca_dir = \"{w}/ca\"\n\
         intercept_ports = [{tls_port}]\n[dns.static]\nlocalhost = [\"127.0.0.1\"]\n\
         [audit]\npath = \"{d}/audit.jsonl\"\nsnapshots = \"{d}/snapshots\"\n[log]\nlevel = \"info\"\n"
    );
    let path = dir.join("robotsgate.toml");
    std::fs::write(&path, config)?;
    Ok(Spawned::start(bin, &["run", "--config", path_str(&path)?]))
}

/// SIGINT, then the exit (bounded), which must be a clean one: the profile is written then.
async fn stop(mut process: Spawned) -> Result<(), Failure> {
    process.signal("-INT");
    let status = process.wait_exit().await;
    if !status.success() {
        return Err(format!("robotsgate exited with {status}; it said:\n{}", process.said().await).into());
    }
    Ok(())
}

/// `n` absolute-form GETs of `url` through the forward proxy at `proxy`, each answered
/// `expect`.
async fn forward(proxy: SocketAddr, url: &str, n: usize, expect: StatusCode) -> Result<(), Failure> {
    let uri: http::Uri = url.parse()?;
    let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    plain(proxy, Request::get(uri).header(header::HOST, host), n, expect).await
}

/// `n` GETs of `url` (its path, origin form) sent straight to `at`, as `user_agent`.
async fn direct(
    at: SocketAddr,
    url: &str,
    user_agent: &str,
    n: usize,
    expect: StatusCode,
) -> Result<(), Failure> {
    let uri: http::Uri = url.parse()?;
    let host = uri.authority().map(|a| a.to_string()).unwrap_or_default();
    let path = uri.path_and_query().map(|p| p.to_string()).unwrap_or_else(|| "/".into());
    let request = Request::get(path).header(header::HOST, host).header(header::USER_AGENT, user_agent);
    plain(at, request, n, expect).await
}

/// `n` copies of `request` (with `Accept: */*`) sent to `at` on [`CONNECTIONS`] plain
/// connections, each answered `expect`.
async fn plain(
    at: SocketAddr,
    request: http::request::Builder,
    n: usize,
    expect: StatusCode,
) -> Result<(), Failure> {
    let template = Arc::new(request.header(header::ACCEPT, "*/*").body(())?);
    spread(n, move |count| {
        let template = template.clone();
        async move { drive(proxy_conn(at).await, &template, count, expect).await }
    })
    .await
}

/// `n` GETs of `/1k` inside intercepted tunnels to `localhost:port`.
async fn intercepted(proxy: SocketAddr, ca_dir: &Path, port: u16, n: usize) -> Result<(), Failure> {
    let mut roots = RootCertStore::empty();
    for cert in robotsgate::net::load_pem_certs(&ca_dir.join("ca.pem"))? {
        roots.add(cert)?;
    }
    let tls = client_config(roots, &[b"http/1.1"]);
    let authority = format!("localhost:{port}");
    let template = Arc::new(Request::get("/1k").header(header::HOST, &authority).body(())?);
    spread(n, move |count| {
        let (template, tls, authority) = (template.clone(), tls.clone(), authority.clone());
        async move {
            let stream = tunnel(proxy, &authority, &tls, "localhost").await;
            drive(h1(stream).await, &template, count, StatusCode::OK).await
        }
    })
    .await
}

/// Runs `task(count)` on [`CONNECTIONS`] tasks at once, `n` requests spread over them.
async fn spread<F, Fut>(n: usize, task: F) -> Result<(), Failure>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = Result<(), Failure>> + Send + 'static,
{
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..CONNECTIONS {
        let count = n / CONNECTIONS + usize::from(i < n % CONNECTIONS);
        tasks.spawn(task(count));
    }
    while let Some(done) = tasks.join_next().await {
        done??;
    }
    Ok(())
}

/// Sends `count` copies of `template` on one connection, each answer read whole and its
/// status checked.
async fn drive(
    mut sender: SendRequest<ReqBody>,
    template: &Request<()>,
    count: usize,
    expect: StatusCode,
) -> Result<(), Failure> {
    for _ in 0..count {
        let mut request = Request::new(empty());
        *request.method_mut() = template.method().clone();
        *request.uri_mut() = template.uri().clone();
        *request.headers_mut() = template.headers().clone();
        tokio::time::timeout(STEP, sender.ready()).await??;
        let response = tokio::time::timeout(STEP, sender.send_request(request)).await??;
        let status = response.status();
        tokio::time::timeout(STEP, response.into_body().collect()).await??;
        if status != expect {
            return Err(format!("{} {}: {status}, not {expect}", template.method(), template.uri()).into());
        }
    }
    Ok(())
}

/// An origin on `127.0.0.1:0` answering as the load benchmark's nginx does (with TLS when
/// `tls` is given): `/robots.txt`, `/1k` and `/100k`, 404 otherwise. Runs until the process
/// ends.
async fn serve_origin(tls: Option<Arc<rustls::ServerConfig>>) -> Result<SocketAddr, Failure> {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let addr = listener.local_addr()?;
    let acceptor = tls.map(tokio_rustls::TlsAcceptor::from);
    let files = Arc::new([
        ("/robots.txt", Bytes::from_static(ROBOTS.as_bytes()), "text/plain"),
        ("/1k", Bytes::from(vec![b'a'; 1024]), "application/octet-stream"),
        ("/100k", Bytes::from(vec![b'a'; 100 * 1024]), "application/octet-stream"),
    ]);
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = listener.accept().await else { continue };
            let (files, acceptor) = (files.clone(), acceptor.clone());
            tokio::spawn(async move {
                let service = service_fn(move |req: Request<Incoming>| {
                    let files = files.clone();
                    async move { Ok::<_, Infallible>(answer(&files[..], req.uri().path())) }
                });
                let http1 = hyper::server::conn::http1::Builder::new();
                match acceptor {
                    None => {
                        let _ = http1.serve_connection(TokioIo::new(tcp), service).await;
                    }
                    Some(acceptor) => {
                        if let Ok(Ok(tls)) = tokio::time::timeout(STEP, acceptor.accept(tcp)).await {
                            let _ = http1.serve_connection(TokioIo::new(tls), service).await;
                        }
                    }
                }
            });
        }
    });
    Ok(addr)
}

/// The answer to a GET of `path`: nginx's fields for a static file.
fn answer(files: &[(&str, Bytes, &'static str)], path: &str) -> Response<Full<Bytes>> {
    let Some((_, body, content_type)) = files.iter().find(|(p, _, _)| *p == path) else {
        let mut response = Response::new(Full::new(Bytes::from_static(b"not found\n")));
        *response.status_mut() = StatusCode::NOT_FOUND;
        return response;
    };
    let mut response = Response::new(Full::new(body.clone()));
    let headers = response.headers_mut();
    for (name, value) in [
        (header::SERVER, "nginx/1.22.1"),
        (header::CONTENT_TYPE, content_type),
        (header::LAST_MODIFIED, "Sun, 29 Nov 2026 05:00:00 GMT"),
        (header::CONNECTION, "keep-alive"),
        (header::ETAG, "\"6a4b1c00-400\""),
        (header::ACCEPT_RANGES, "bytes"),
    ] {
        headers.insert(name, http::HeaderValue::from_static(value));
    }
    response
}
