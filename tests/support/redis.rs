//! A real `redis-server` for the fleet-mode tests (Debian package `redis-server`): started
//! on an ephemeral loopback port in a temp dir, without persistence, stopped and restarted
//! on the same port, and `redis-cli` for writing what another program might write.

use std::net::{Ipv4Addr, SocketAddr, TcpListener};
use std::process::{Child, Command, Stdio};

use super::wait::bounded;

/// A running `redis-server`.
pub struct RedisServer {
    child: Option<Child>,
    port: u16,
    dir: tempfile::TempDir,
    password: Option<String>,
}

impl RedisServer {
    /// Starts one on a free port (bounded wait until it answers `PING`).
    pub async fn start() -> RedisServer {
        RedisServer::start_with(None).await
    }

    /// Starts one that asks for `password` (`requirepass`).
    pub async fn start_with_password(password: &str) -> RedisServer {
        RedisServer::start_with(Some(password.to_owned())).await
    }

    async fn start_with(password: Option<String>) -> RedisServer {
        let port = {
            let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).expect("bind 127.0.0.1:0");
            l.local_addr().unwrap().port()
        };
        let dir = tempfile::Builder::new().prefix("robotsgate-redis-").tempdir().expect("temp dir");
        let mut server = RedisServer { child: None, port, dir, password };
        server.spawn().await;
        server
    }

    async fn spawn(&mut self) {
        let mut command = Command::new("redis-server");
        if let Some(p) = &self.password {
            command.args(["--requirepass", p]);
        }
        let child = command
            .args([
                "--port",
                &self.port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
            ])
            .arg("--dir")
            .arg(self.dir.path())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server (Debian package redis-server) on PATH");
        self.child = Some(child);
        let port = self.port;
        bounded("redis-server answers", async move {
            loop {
                if ping(port).await {
                    return;
                }
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        })
        .await;
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
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
