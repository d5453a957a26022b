//! A real `redis-server` for the fleet-mode tests (Debian package `redis-server`): started
//! on an ephemeral loopback port in a temp dir, without persistence, stopped and restarted
//! on the same port, and `redis-cli` for writing what another program might write. Also
//! with TLS only (`rediss://`), with a certificate the test made. And a Redis Cluster
//! ([`RedisCluster`]) of three or more primaries, with replicas or without.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

use super::wait::bounded;

/// A running `redis-server`.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    password: Option<String>,
    tls: Option<RedisTls>,
}

/// The files of a `redis-server` that speaks TLS only (PEM).
#[derive(Debug, Clone)]
pub struct RedisTls {
    /// Its certificate (for 127.0.0.1).
    pub cert: PathBuf,
    /// Its key.
    pub key: PathBuf,
    /// The CA that signed the certificate (what clients trust).
    pub ca: PathBuf,
}

impl RedisServer {
    /// Starts one on a free port (bounded wait until it answers `PING`).
    pub async fn start() -> RedisServer {
        RedisServer::start_with(None, None).await
    }

    /// Starts one that asks for `password` (`requirepass`).
    pub async fn start_with_password(password: &str) -> RedisServer {
        RedisServer::start_with(Some(password.to_owned()), None).await
    }

    /// Starts one that speaks TLS only, on a free port (`--port 0 --tls-port P`), with
    /// `tls`'s certificate; clients are not asked for one.
    pub async fn start_tls(tls: RedisTls) -> RedisServer {
        RedisServer::start_with(None, Some(tls)).await
    }

    async fn start_with(password: Option<String>, tls: Option<RedisTls>) -> RedisServer {
        let port = {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
            l.local_addr().unwrap().port()
        };
        let dir = tempfile::Builder::new().prefix("robotsgate-redis-").tempdir().expect("temp dir");
        let mut server = RedisServer { child: None, port, dir, password, tls };
        server.spawn().await;
        server
    }

    async fn spawn(&mut self) {
        let mut command = Command::new("redis-server");
        if let Some(p) = &self.password {
            command.args(["--requirepass", p]);
        }
        match &self.tls {
            Some(tls) => {
                command.args([
                    "--port",
                    "0",
                    "--tls-port",
                    &self.port.to_string(),
                    "--tls-auth-clients",
                    "no",
                ]);
                command.arg("--tls-cert-file").arg(&tls.cert);
                command.arg("--tls-key-file").arg(&tls.key);
                command.arg("--tls-ca-cert-file").arg(&tls.ca);
            }
            None => {
                command.args(["--port", &self.port.to_string()]);
            }
        }
        let child = command
            .args(["--bind", "127.0.0.1", "--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian package redis-server) on PATH");
        self.child = Some(child);
        let port = self.port;
        let tls = self.tls.is_some();
        bounded("redis-server answers", async move {
            loop {
                let answers = if tls { self.cli(&["PING"]).trim() == "PONG" } else { ping(port).await };
                if answers {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    /// `redis://127.0.0.1:PORT/0`, or `rediss://` with TLS.
    pub fn url(&self) -> String {
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        format!("{scheme}://127.0.0.1:{}/0", self.port)
    }

    /// Stops it (SIGKILL: as a crash or a network cut looks to the replicas).
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty: nothing was saved).
    pub async fn restart(&mut self) {
        self.stop();
        self.spawn().await;
    }

    /// Runs `redis-cli` with `args` against it; its standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let mut command = Command::new("redis-cli");
        if let Some(p) = &self.password {
            command.args(["--no-auth-warning", "-a", p]);
        }
        if let Some(tls) = &self.tls {
            command.arg("--tls").arg("--cacert").arg(&tls.ca);
        }
        let out = command
            .args(["-p", &self.port.to_string()])
            .args(args)
            .output()
            .expect("redis-cli (Debian package redis-tools)");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Whether something on `port` answers `PING` with `+PONG` (or asks for a password).
async fn ping(port: u16) -> bool {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let Ok(Ok(mut s)) = tokio::time::timeout(
        std::time::Duration::from_millis(200),
        tokio::net::TcpStream::connect(SocketAddr::from((Ipv4Addr::LOCALHOST, port))),
    )
    .await
    else {
        return false;
    };
    if s.write_all(b"PING\r\n").await.is_err() {
        return false;
    }
    let mut buf = [0u8; 16];
    matches!(tokio::time::timeout(std::time::Duration::from_millis(200), s.read(&mut buf)).await,
        Ok(Ok(n)) if buf[..n].starts_with(b"+PONG") || buf[..n].starts_with(b"-NOAUTH"))
}

/// A real Redis Cluster on loopback: `masters` primaries with `replicas` replicas each
/// (`redis-server --cluster-enabled yes`, joined by `redis-cli --cluster create`), without
/// persistence, each node in its own folder of one temp dir. A cluster node needs a fixed
/// port and its bus port (port + 10000) free: both are picked by binding, and a node that
/// does not come up on them (taken meanwhile) is started again on others. Nodes notice a
/// dead peer after [`RedisCluster::NODE_TIMEOUT`], and a replica then takes its place.
pub struct RedisCluster {
    nodes: Vec<ClusterNode>,
    tls: Option<RedisTls>,
    _dir: tempfile::TempDir,
}

struct ClusterNode {
    child: Option<Child>,
    port: u16,
}

impl RedisCluster {
    /// `cluster-node-timeout`: how long a node may not answer before the others count it
    /// failed (and one of its replicas is promoted).
    pub const NODE_TIMEOUT: std::time::Duration = std::time::Duration::from_millis(1500);

    /// Starts the nodes, joins them (the first `masters` nodes hold the slots, the others
    /// replicate them) and waits (bounded) until every node says `cluster_state:ok`.
    pub async fn start(masters: usize, replicas: usize) -> RedisCluster {
        RedisCluster::start_with(masters, replicas, None).await
    }

    /// [`RedisCluster::start`] speaking TLS only, to clients and between nodes
    /// (`--tls-port`, `--tls-cluster yes`, `--tls-replication yes`), with `tls`'s
    /// certificate; clients are not asked for one.
    pub async fn start_tls(masters: usize, replicas: usize, tls: RedisTls) -> RedisCluster {
        RedisCluster::start_with(masters, replicas, Some(tls)).await
    }

    async fn start_with(masters: usize, replicas: usize, tls: Option<RedisTls>) -> RedisCluster {
        assert!(masters >= 3, "redis-cli --cluster create needs three primaries");
        let dir = tempfile::Builder::new().prefix("robotsgate-redis-cluster-").tempdir().expect("temp dir");
        let mut nodes = Vec::new();
        for i in 0..masters * (1 + replicas) {
            let sub = dir.path().join(format!("node-{i}"));
            std::fs::create_dir_all(&sub).expect("node dir");
            nodes.push(start_node(&sub, tls.as_ref()).await);
        }
        let mut create = Command::new("redis-cli");
        tls_args(&mut create, tls.as_ref());
        create.arg("--cluster").arg("create");
        for n in &nodes {
            create.arg(format!("127.0.0.1:{}", n.port));
        }
        // It waits for the nodes to join: bounded (a node that cannot reach the others
        // would keep it waiting for ever).
        let mut create = tokio::process::Command::from(create);
        let created = create
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .output();
        let out = bounded("redis-cli --cluster create", created)
            .await
            .expect("redis-cli (Debian package redis-tools)");
        assert!(
            out.status.success()
                && String::from_utf8_lossy(&out.stdout).contains("[OK] All 16384 slots covered"),
            "redis-cli --cluster create: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let cluster = RedisCluster { nodes, tls, _dir: dir };
        cluster.wait_ok().await;
        cluster
    }

    /// Waits (bounded) until every running node says `cluster_state:ok` with every slot
    /// served, and every running replica is in sync with its primary (the cluster has
    /// settled).
    pub async fn wait_ok(&self) {
        bounded("the Redis Cluster is ok", async {
            loop {
                let settled = self.running().all(|port| {
                    let info = cli(port, self.tls.as_ref(), &["CLUSTER", "INFO"]);
                    let replication = cli(port, self.tls.as_ref(), &["INFO", "replication"]);
                    info.contains("cluster_state:ok")
                        && info.contains("cluster_slots_ok:16384")
                        && (replication.contains("role:master")
                            || replication.contains("master_link_status:up"))
                });
                if settled {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await;
    }

    /// The seed nodes' URLs (every node's: `redis://127.0.0.1:PORT`, or `rediss://`).
    pub fn urls(&self) -> Vec<String> {
        let scheme = if self.tls.is_some() { "rediss" } else { "redis" };
        self.nodes.iter().map(|n| format!("{scheme}://127.0.0.1:{}", n.port)).collect()
    }

    /// Every node's port.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(|n| n.port).collect()
    }

    fn running(&self) -> impl Iterator<Item = u16> + '_ {
        self.nodes.iter().filter(|n| n.child.is_some()).map(|n| n.port)
    }

    /// Runs `redis-cli -c` (following redirections) with `args` on a running node; its
    /// standard output.
    pub fn cli(&self, args: &[&str]) -> String {
        let port = self.running().next().expect("a running node");
        let mut all = vec!["-c"];
        all.extend_from_slice(args);
        cli(port, self.tls.as_ref(), &all)
    }

    /// The port of the primary that serves `key`'s slot now, as a running node sees it.
    pub fn primary_of(&self, key: &str) -> u16 {
        match self.serving(key) {
            Ok(port) => port,
            Err(nodes) => panic!("no primary serves {key:?}'s slot: {nodes}"),
        }
    }

    /// The port of the primary that serves `key`'s slot, not known to be failing; else
    /// `CLUSTER NODES`.
    fn serving(&self, key: &str) -> Result<u16, String> {
        let slot: u16 = self.cli(&["CLUSTER", "KEYSLOT", key]).trim().parse().expect("CLUSTER KEYSLOT");
        let nodes = self.cli(&["CLUSTER", "NODES"]);
        for line in nodes.lines() {
            // <id> <ip:port@cport> <flags> <master> <ping> <pong> <epoch> <link> <slot ranges...>
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() < 9 || !f[2].split(',').any(|x| x == "master") || f[2].contains("fail") {
                continue;
            }
            let serves = f[8..].iter().any(|r| {
                let (lo, hi) = r.split_once('-').unwrap_or((r, r));
                matches!((lo.parse::<u16>(), hi.parse::<u16>()), (Ok(lo), Ok(hi)) if lo <= slot && slot <= hi)
            });
            if serves {
                let port =
                    f[1].split('@').next().and_then(|a| a.rsplit(':').next()).and_then(|p| p.parse().ok());
                return Ok(port.expect("a node's address"));
            }
        }
        Err(nodes)
    }

    /// Kills the node on `port` (SIGKILL: a crash, as the others and the clients see it).
    pub fn kill(&mut self, port: u16) {
        let node = self.nodes.iter_mut().find(|n| n.port == port).expect("a node on that port");
        if let Some(mut c) = node.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Freezes the node on `port` (SIGSTOP): it holds its connections and answers nothing,
    /// as a node behind a network cut does. [`RedisCluster::kill`] ends it.
    pub fn freeze(&mut self, port: u16) {
        let node = self.nodes.iter().find(|n| n.port == port).expect("a node on that port");
        let pid = node.child.as_ref().expect("a running node").id().to_string();
        let status = Command::new("kill").args(["-STOP", &pid]).status().expect("kill (procps)");
        assert!(status.success(), "kill -STOP {pid}");
    }

    /// Waits (bounded) until `key`'s slot is served by a running primary other than
    /// `port` (a replica took over) and the cluster is ok again.
    pub async fn wait_failover(&self, key: &str, port: u16) -> u16 {
        bounded("a replica takes over", async {
            loop {
                let now = self.serving(key);
                if let Ok(now) = now
                    && now != port
                    && self.running().any(|p| p == now)
                {
                    let info = self.cli(&["CLUSTER", "INFO"]);
                    if info.contains("cluster_state:ok") {
                        return now;
                    }
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await
    }
}

impl Drop for RedisCluster {
    fn drop(&mut self) {
        for n in &mut self.nodes {
            if let Some(mut c) = n.child.take() {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// A port free now whose bus port (+ 10000) is free too.
fn free_cluster_port() -> u16 {
    loop {
        let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
        let port = l.local_addr().expect("its address").port();
        let Some(bus) = port.checked_add(10000) else { continue };
        if TcpListener::bind((Ipv4Addr::LOCALHOST, bus)).is_ok() {
            return port;
        }
    }
}

/// Starts one cluster node in `dir` on free ports (again on others when it does not come
/// up: a port taken meanwhile), answering `PING` (bounded).
async fn start_node(dir: &std::path::Path, tls: Option<&RedisTls>) -> ClusterNode {
    for _ in 0..10 {
        let port = free_cluster_port();
        let mut command = Command::new("redis-server");
        match tls {
            Some(tls) => {
                command.args(["--port", "0", "--tls-port", &port.to_string(), "--tls-auth-clients", "no"]);
                command.args(["--tls-cluster", "yes", "--tls-replication", "yes"]);
                command.arg("--tls-cert-file").arg(&tls.cert);
                command.arg("--tls-key-file").arg(&tls.key);
                command.arg("--tls-ca-cert-file").arg(&tls.ca);
            }
            None => {
                command.args(["--port", &port.to_string()]);
            }
        }
        let mut child = command
            .args(["--bind", "127.0.0.1", "--cluster-enabled", "yes"])
            .args(["--cluster-config-file", "nodes.conf"])
            .args(["--cluster-node-timeout", &RedisCluster::NODE_TIMEOUT.as_millis().to_string()])
            // A replica takes over whenever its primary fails, however long it has been
            // without it; a replica's first sync starts at once (not after 5 s).
            .args(["--cluster-replica-validity-factor", "0", "--repl-diskless-sync-delay", "0"])
            .args(["--save", "", "--appendonly", "no"])
            .arg("--dir")
            .arg(dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian package redis-server) on PATH");
        let up = bounded("a cluster node answers or exits", async {
            loop {
                let answers = match tls {
                    Some(_) => cli(port, tls, &["PING"]).trim() == "PONG",
                    None => ping(port).await,
                };
                if answers {
                    return true;
                }
                if let Ok(Some(_)) = child.try_wait() {
                    // Exited: its port or bus port was taken meanwhile.
                    return false;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
        if up {
            return ClusterNode { child: Some(child), port };
        }
        let _ = child.wait();
        let _ = std::fs::remove_file(dir.join("nodes.conf"));
    }
    panic!("no Redis Cluster node came up on free ports in ten tries");
}

/// `--tls --cacert CA` for `redis-cli` with `tls`.
fn tls_args(command: &mut Command, tls: Option<&RedisTls>) {
    if let Some(tls) = tls {
        command.arg("--tls").arg("--cacert").arg(&tls.ca);
    }
}

/// `redis-cli -p port args` (over TLS with `tls`): its standard output.
fn cli(port: u16, tls: Option<&RedisTls>, args: &[&str]) -> String {
    let mut command = Command::new("redis-cli");
    tls_args(&mut command, tls);
    let out = command
        .args(["-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("redis-cli (Debian package redis-tools)");
    String::from_utf8_lossy(&out.stdout).into_owned()
}
