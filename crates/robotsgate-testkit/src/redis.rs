//! A real `redis-server` for the fleet-mode tests (Debian package `redis-server`): started
//! on an ephemeral loopback port in a temp dir, without persistence, stopped and restarted
//! on the same port, and `redis-cli` for writing what another program might write. Also
//! with TLS only (`rediss://`), with a certificate the test made.

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
