//! The forward proxy's listener: an HTTP/1.1 listener whose requests go through
//! [`RobotsLayer`] and then to the [`Forwarder`], or, for intercepted `CONNECT` tunnels,
//! to [`intercept`](crate::intercept).
//!
//! - Clients from networks that are not allowed are answered `403` and closed; proxy
//!   users authenticate with `Proxy-Authorization` when users are configured.
//! - Connections are accepted and served on the caller's runtime, or with
//!   [`Proxy::with_workers`] on worker threads, each with a single-threaded runtime of its
//!   own (one per CPU is what `robotsgate run` does) that accepts on the listening socket
//!   itself: a connection stays on the thread that accepted it.
//! - Shutdown: stop accepting, let connections finish for a grace period, then close.
//!
//! [`RobotsLayer`]: robotsgate::layer::RobotsLayer

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use crate::admin::Readiness;
use crate::auth::ProxyAuth;
use crate::forward::{Forwarder, ProxyService};
use crate::intercept::Interception;
use crate::metrics::Metrics;
use crate::slot::Slot;
use robotsgate::RefusalKind;
use robotsgate::layer::RobotsLayer;

mod clients;
mod connection;
mod shared;
mod sniff;

use crate::workers::{self, Workers};
pub use clients::ClientNetworks;
use clients::refuse_client;
use connection::serve_connection;
use shared::Shared;

/// Binds a listener on `addr` with room for `backlog` connections not yet accepted (the
/// runtime's default is 1024, and the kernel may cap that further). The kernel holds at
/// most `net.core.somaxconn`: when that is lower, the backlog is that, and a warning says
/// so.
pub fn listen(addr: SocketAddr, backlog: u32) -> io::Result<TcpListener> {
    let socket =
        if addr.is_ipv4() { tokio::net::TcpSocket::new_v4()? } else { tokio::net::TcpSocket::new_v6()? };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    if let Some(max) = somaxconn()
        && max < backlog
    {
        tracing::warn!(
            requested = backlog,
            somaxconn = max,
            "proxy.listen_backlog is capped by the kernel's net.core.somaxconn; raise that (sysctl) for more"
        );
    }
    socket.listen(backlog)
}

/// The kernel's cap on listen backlogs (Linux), if it can be read.
fn somaxconn() -> Option<u32> {
    std::fs::read_to_string("/proc/sys/net/core/somaxconn").ok()?.trim().parse().ok()
}

/// How the proxy listens.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where to listen.
    pub listen: SocketAddr,
    /// How long in-flight requests may take to finish on shutdown.
    pub shutdown_grace: Duration,
    /// Time a client has to send a request's headers (also how long an idle keep-alive
    /// connection is kept).
    pub header_read_timeout: Duration,
    /// Client connections served at once; more wait in the listen backlog.
    pub max_connections: usize,
    /// Most bytes of request head (request line and headers) read.
    pub max_header_bytes: usize,
    /// The longest a client may accept no byte of what it is sent (HTTP/2 inside
    /// intercepted tunnels: grant an answer no flow-control window); its connection is then
    /// closed.
    pub send_timeout: Duration,
    /// HTTP/1.1 `GET` and `HEAD` requests read and answered by robotsgate's own HTTP/1.1
    /// code (false: every request through hyper).
    pub http1_fast_path: bool,
}

impl Default for ProxyConfig {
    fn default() -> Self {
        ProxyConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 3128)),
            shutdown_grace: Duration::from_secs(30),
            header_read_timeout: Duration::from_secs(30),
            max_connections: 10_000,
            max_header_bytes: 64 * 1024,
            send_timeout: Duration::from_secs(60),
            http1_fast_path: true,
        }
    }
}

/// A running forward proxy.
pub struct Proxy {
    listener: TcpListener,
    layer: RobotsLayer,
    forwarder: Forwarder,
    config: ProxyConfig,
    interception: Option<Interception>,
    auth: Option<ProxyAuth>,
    clients: ClientNetworks,
    metrics: Option<Arc<Metrics>>,
    ready: Readiness,
    workers: Option<usize>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy").field("listen", &self.listener.local_addr().ok()).finish_non_exhaustive()
    }
}

impl Proxy {
    /// Binds the listener.
    pub async fn bind(config: ProxyConfig, layer: RobotsLayer, forwarder: Forwarder) -> io::Result<Proxy> {
        let listener = listen(config.listen, 4096)?;
        Ok(Self::from_listener(listener, config, layer, forwarder))
    }

    /// A proxy on a listener bound already.
    pub fn from_listener(
        listener: TcpListener,
        config: ProxyConfig,
        layer: RobotsLayer,
        forwarder: Forwarder,
    ) -> Proxy {
        Proxy {
            listener,
            layer,
            forwarder,
            config,
            interception: None,
            auth: None,
            clients: ClientNetworks::default(),
            metrics: None,
            ready: Readiness::default(),
            workers: None,
        }
    }

    /// Serves connections on `n` worker threads (0: one per CPU this process may use),
    /// each running a single-threaded tokio runtime, instead of on the runtime that calls
    /// [`Proxy::run`]. Every worker accepts on the listening socket in its own event loop
    /// (a busy one takes fewer), and a connection with everything it starts stays on the
    /// worker that accepted it: no hand-over, no work stealing and no wake-ups across
    /// threads from accept to the last response.
    pub fn with_workers(mut self, n: usize) -> Proxy {
        self.workers = Some(if n == 0 { workers::default_count() } else { n });
        self
    }

    /// Intercepts CONNECT tunnels (TLS with leaves from the local CA) for per-path checks.
    pub fn with_interception(mut self, interception: Interception) -> Proxy {
        self.interception = Some(interception);
        self
    }

    /// Requires `Proxy-Authorization` when `auth` has users; the user name goes into the
    /// request extensions ([`robotsgate::layer::ProxyUser`]).
    pub fn with_auth(mut self, auth: ProxyAuth) -> Proxy {
        self.auth = Some(auth);
        self
    }

    /// Only these client networks may connect.
    pub fn with_client_networks(mut self, clients: ClientNetworks) -> Proxy {
        self.clients = clients;
        self
    }

    /// Counts connections, requests and refusals in `metrics`.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Proxy {
        self.metrics = Some(metrics);
        self
    }

    /// Reports whether the proxy accepts connections (for `/readyz`).
    pub fn with_readiness(mut self, ready: Readiness) -> Proxy {
        self.ready = ready;
        self
    }

    /// The address it listens on (with the port the system chose for port 0).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `shutdown` completes, then drains: stops accepting, lets requests in
    /// flight finish within the grace period, and returns.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> io::Result<()> {
        let workers = self.workers.map(Workers::start).transpose()?;
        if let Some(w) = &workers {
            tracing::debug!(workers = w.len(), "serving connections on worker threads");
        }
        let connections = TaskTracker::new();
        let stop = CancellationToken::new();
        let service = ProxyService::new(&self.layer, self.forwarder.clone());
        let shared = Arc::new(Shared {
            service,
            layer: self.layer.clone(),
            forwarder: self.forwarder.clone(),
            interception: self.interception.clone(),
            auth: self.auth.clone(),
            metrics: self.metrics.clone(),
            cuts: self.metrics.as_ref().map(|m| m.cuts()).unwrap_or_default(),
            tunnels: self.forwarder.tunnels().clone(),
            stop: stop.clone(),
            via: self.forwarder.via().clone(),
            config: self.config.clone(),
        });
        let accept = Arc::new(Accept {
            shared,
            clients: self.clients.clone(),
            slots: Arc::new(tokio::sync::Semaphore::new(self.config.max_connections.max(1))),
            connections: connections.clone(),
        });
        self.ready.set(true);
        match &workers {
            None => {
                tokio::select! {
                    _ = shutdown => {}
                    _ = accept.run(self.listener, CancellationToken::new()) => {}
                }
            }
            Some(workers) => {
                // Every worker accepts on the one listening socket, in its own event loop:
                // a new connection is served where it was accepted, with no hand-over
                // between threads (and no wake-up of a thread that only accepts).
                workers
                    .accept_on_each(self.listener, shutdown, |_| {
                        let accept = accept.clone();
                        move |listener, stop| async move { accept.run(listener, stop).await }
                    })
                    .await?;
            }
        }
        // Drain.
        self.ready.set(false);
        stop.cancel();
        connections.close();
        self.forwarder.tunnels().close();
        let grace = self.config.shutdown_grace;
        let drained = tokio::time::timeout(grace, async {
            connections.wait().await;
            self.forwarder.tunnels().wait().await;
        })
        .await;
        if drained.is_err() {
            tracing::warn!(?grace, "shutdown grace period over; closing the remaining connections");
            self.forwarder.close_tunnels();
        }
        if let Some(workers) = workers {
            // Whatever is still on a worker (connections past the grace period, idle
            // upstream connections) ends with its runtime.
            workers.stop().await;
        }
        Ok(())
    }
}

/// What each accept loop needs: the listener's connections are accepted on the caller's
/// runtime, or on every worker's ([`Proxy::with_workers`]).
struct Accept {
    shared: Arc<Shared>,
    clients: ClientNetworks,
    /// One permit per connection served at once ([`ProxyConfig::max_connections`]).
    slots: Arc<tokio::sync::Semaphore>,
    connections: TaskTracker,
}

impl Accept {
    /// Accepts connections from `listener` and serves each in a task on this runtime,
    /// until `stop`.
    async fn run(&self, listener: TcpListener, stop: CancellationToken) {
        loop {
            let permit = tokio::select! {
                _ = stop.cancelled() => return,
                p = self.slots.clone().acquire_owned() => match p {
                    Ok(p) => p,
                    Err(_) => return,
                },
            };
            let (stream, client) = tokio::select! {
                _ = stop.cancelled() => return,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        crate::accept::failed("proxy", &e).await;
                        continue;
                    }
                },
            };
            let shared = self.shared.clone();
            if !self.clients.allows(client.ip()) {
                if let Some(m) = &shared.metrics {
                    m.refused(RefusalKind::ClientDenied);
                }
                tracing::info!(%client, "connection from a client network that is not allowed");
                self.connections.spawn(refuse_client(stream, client, shared));
                continue;
            }
            let _ = stream.set_nodelay(true);
            let open = shared.metrics.as_ref().map(|m| m.connection());
            // The connection's future (the fast path's and hyper's states) is kilobytes:
            // boxed once here, the task tokio allocates and moves (into its cell, and each
            // time it sets the task's stage) holds a pointer instead of the whole of it.
            let serve = Box::pin(serve_connection(stream, client, shared, Slot::new(permit)));
            self.connections.spawn(async move {
                let _open = open;
                serve.await;
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The kernel reports a listening socket's backlog as its send queue (`ss -ltn`).
    fn reported_backlog(port: u16) -> Option<u32> {
        let out =
            std::process::Command::new("ss").args(["-ltnH", &format!("sport = :{port}")]).output().ok()?;
        let text = String::from_utf8_lossy(&out.stdout);
        text.split_whitespace().nth(2)?.parse().ok()
    }

    #[tokio::test]
    async fn the_listen_backlog_is_the_configured_one_within_the_kernels_cap() {
        let cap = somaxconn().unwrap_or(u32::MAX);
        for backlog in [16, 4096] {
            let listener = listen("127.0.0.1:0".parse().unwrap(), backlog).unwrap();
            let port = listener.local_addr().unwrap().port();
            match reported_backlog(port) {
                Some(n) => assert_eq!(n, backlog.min(cap), "backlog {backlog}"),
                None => eprintln!("ss is not available: the backlog is not checked"),
            }
        }
    }
}
