//! The proxy in process (`App::start`) and test configurations.

use std::io;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use robotsgate::audit::AuditLog;
use robotsgate_proxy::app::{App, Reloader};
use robotsgate_proxy::config::{Config, Dur};
use robotsgate_proxy::metrics::Metrics;
use rustls::RootCertStore;
use serde_json::Value;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

use robotsgate_testkit::{Reply, TestCa, TestOrigin, bounded, client_config, read_jsonl};

/// A temporary folder for one test (audit log, snapshots, config files, CAs).
pub fn temp_dir() -> tempfile::TempDir {
    tempfile::Builder::new().prefix("robotsgate-e2e-").tempdir().expect("temp dir")
}

/// A configuration for tests: listens on `127.0.0.1:0`, allows loopback destinations,
/// checks for `ExampleBot`, audit log and snapshots in `dir`.
pub fn test_config(dir: &Path) -> Config {
    let mut c = Config::default();
    c.proxy.listen = "127.0.0.1:0".parse().unwrap();
    c.proxy.upstream_timeout = Dur(Duration::from_secs(10));
    c.proxy.shutdown_grace = Dur(Duration::from_secs(5));
    c.agent.token = "ExampleBot".parse().unwrap();
    c.guard.allow.push("127.0.0.0/8".parse().unwrap());
    c.fetch.connect_timeout = Dur(Duration::from_secs(5));
    c.audit.path = dir.join("audit.jsonl").display().to_string();
    c.audit.snapshots = dir.join("snapshots").display().to_string();
    c
}

/// The names the interception tests' origins go by (mapped to 127.0.0.1).
pub const ORIGIN_NAMES: &[&str] = &["localhost", "bypass.test"];

/// [`test_config`] with interception: robotsgate's CA in `ca_dir`, every port intercepted,
/// origins trusted through `origin_roots` only (no webpki roots), [`ORIGIN_NAMES`] mapped
/// to 127.0.0.1.
pub fn intercept_config(dir: &Path, ca_dir: &Path, origin_roots: &[PathBuf]) -> Config {
    let mut c = test_config(dir);
    c.tls.webpki_roots = false;
    c.tls.ca_dir = ca_dir.display().to_string();
    c.tls.intercept_ports = Vec::new();
    c.tls.extra_roots = origin_roots.to_vec();
    let loopback = vec![IpAddr::V4(Ipv4Addr::LOCALHOST)];
    for name in ORIGIN_NAMES {
        c.dns.static_hosts.insert((*name).to_owned(), loopback.clone());
    }
    c
}

/// Makes robotsgate's CA in `dir/proxy-ca` (as `robotsgate ca init` does); its folder.
pub fn proxy_ca(dir: &Path) -> PathBuf {
    let ca_dir = dir.join("proxy-ca");
    robotsgate_proxy::ca::init_ca(&ca_dir, false).expect("init_ca");
    ca_dir
}

/// A root store with only robotsgate's CA from `ca_dir`.
pub fn proxy_roots(ca_dir: &Path) -> RootCertStore {
    let mut roots = RootCertStore::empty();
    for cert in robotsgate::net::load_pem_certs(&ca_dir.join(robotsgate_proxy::ca::CA_CERT)).unwrap() {
        roots.add(cert).unwrap();
    }
    roots
}

/// The files the interception tests start from: a temp folder, an origin CA (PEM
/// written) robotsgate trusts, and robotsgate's CA folder, which the clients trust.
pub struct Tls {
    /// The folder of it all (and of the proxy's audit log).
    pub dir: tempfile::TempDir,
    /// The origins' CA, with a leaf for [`ORIGIN_NAMES`] and `127.0.0.1`.
    pub origin_ca: TestCa,
    /// Its certificate, as robotsgate is given it.
    pub origin_pem: PathBuf,
    /// robotsgate's CA folder.
    pub ca_dir: PathBuf,
}

impl Tls {
    /// New CAs in a new folder.
    pub fn new() -> Tls {
        let dir = temp_dir();
        let mut names = ORIGIN_NAMES.to_vec();
        names.push("127.0.0.1");
        let origin_ca = TestCa::new("origin", &names);
        let origin_pem = origin_ca.write_pem(&dir.path().join("origin-ca.pem"));
        let ca_dir = proxy_ca(dir.path());
        Tls { dir, origin_ca, origin_pem, ca_dir }
    }

    /// Interception of every port, the origin CA trusted by robotsgate.
    pub fn config(&self) -> Config {
        intercept_config(self.dir.path(), &self.ca_dir, std::slice::from_ref(&self.origin_pem))
    }

    /// A client trusting only robotsgate's CA.
    pub fn client(&self, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
        client_config(proxy_roots(&self.ca_dir), alpn)
    }

    /// An HTTPS origin speaking HTTP/2 or HTTP/1.1 (by ALPN).
    pub async fn origin<'a>(&self, routes: impl IntoIterator<Item = (&'a str, Reply)>) -> TestOrigin {
        TestOrigin::start_tls(routes, self.origin_ca.server_config(&[b"h2", b"http/1.1"])).await
    }
}

/// robotsgate started in process by [`App::start`].
pub struct RunningProxy {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its audit log.
    pub audit: AuditLog,
    /// The audit file.
    pub audit_path: PathBuf,
    /// The snapshot folder.
    pub snapshots: PathBuf,
    /// The admin listener (`/healthz`, `/readyz`, `/metrics`), when configured.
    pub admin: Option<SocketAddr>,
    /// Its metrics.
    pub metrics: Arc<Metrics>,
    /// Applies a new configuration while it runs (what SIGHUP does).
    pub reloader: Reloader,
    /// Its robots.txt policy (the cache).
    pub policy: robotsgate::policy::RobotsPolicy,
    stop: Option<oneshot::Sender<()>>,
    task: Option<JoinHandle<io::Result<()>>>,
}

impl RunningProxy {
    /// Starts the proxy for `config` (whose audit target must be a file).
    pub async fn start(config: &Config) -> RunningProxy {
        let app = bounded("App::start", App::start(config)).await.expect("App::start");
        let addr = app.local_addr();
        let audit = app.audit().clone();
        let admin = app.admin_addr();
        let metrics = app.metrics().clone();
        let reloader = app.reloader();
        let policy = app.policy().clone();
        let (tx, rx) = oneshot::channel::<()>();
        let task = tokio::spawn(app.run(async move {
            let _ = rx.await;
        }));
        RunningProxy {
            addr,
            audit,
            audit_path: PathBuf::from(&config.audit.path),
            snapshots: PathBuf::from(&config.audit.snapshots),
            admin,
            metrics,
            reloader,
            policy,
            stop: Some(tx),
            task: Some(task),
        }
    }

    /// Every decision and fetch record written so far (after a flush), each line parsed
    /// as JSON; the log's own records (`"type": "log"`) are left out.
    pub async fn records(&self) -> Vec<Value> {
        let mut records = self.all_records().await;
        records.retain(|r| r["type"] != "log");
        records
    }

    /// Every record written so far (after a flush), the log's own included.
    pub async fn all_records(&self) -> Vec<Value> {
        bounded("audit flush", self.audit.flush()).await;
        read_jsonl(&self.audit_path)
    }

    /// The TLS leaves minted so far, as the metrics report them (`tls_leaves_minted` is read
    /// from the interceptor each time the metrics are rendered).
    pub fn minted(&self) -> u64 {
        self.metric("robotsgate_tls_leaves_minted") as u64
    }

    /// The value of one sample of the metrics, by its series and labels as rendered
    /// (`robotsgate_pacing_pauses_total{status="429"}`).
    pub fn metric(&self, series: &str) -> f64 {
        let text = self.metrics.render();
        text.lines()
            .find_map(|l| l.strip_prefix(series).and_then(|rest| rest.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("no {series} sample in\n{text}"))
            .trim()
            .parse()
            .unwrap_or_else(|_| panic!("{series}: not a number in\n{text}"))
    }

    /// Shuts down (drain, flush) and waits for it.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        if let Some(task) = self.task.take() {
            bounded("proxy shutdown", task).await.expect("proxy task").expect("proxy run");
        }
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
    }
}
