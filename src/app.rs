//! The running proxy assembled from a [`Config`]: listener, guard, resolver, TLS, fetcher,
//! policy, audit log, layer and forwarder. The binary and the tests start robotsgate
//! through [`App::start`].

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio::net::TcpListener;

use crate::audit::{AuditConfig, AuditLog, AuditSetupError, OnError, Target};
use crate::config::{Config, ModeName, OnErrorName, Select};
use crate::fetch::{FetchConfig, Fetcher};
use crate::intercept::Interception;
use crate::layer::{Mode, RobotsLayer, TokenSelector};
use crate::net::{self, Connector, DnsConfig, Guard, Resolver, TlsConfig, TlsSetupError};
use crate::policy::{FetchObserver, PolicyConfig, RobotsPolicy};
use crate::proxy::{Forwarder, Proxy, ProxyConfig};
use crate::tls::{Ca, Interceptor};

/// Why robotsgate could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A TLS setting is unusable.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] AuditSetupError),
    /// The interception CA could not be loaded.
    #[error("cannot load the CA in {dir}: {source}")]
    Ca {
        /// tls.ca_dir
        dir: PathBuf,
        /// Why.
        source: crate::tls::CaError,
    },
}

/// A started robotsgate: bound, with its audit log open.
pub struct App {
    proxy: Proxy,
    audit: AuditLog,
    policy: RobotsPolicy,
    addr: SocketAddr,
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl App {
    /// Binds the listener and builds every part from `config`.
    pub async fn start(config: &Config) -> Result<App, StartError> {
        let addr = config.proxy.listen;
        let listener = TcpListener::bind(addr).await.map_err(|source| StartError::Listen { addr, source })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen { addr, source })?;

        let mut guard = Guard::default().deny_own_listener(addr);
        for cidr in &config.guard.allow {
            guard = guard.allow(cidr.0);
        }
        let guard = Arc::new(guard);
        let dns = DnsConfig {
            servers: config.dns.servers.clone(),
            overrides: config.dns.static_hosts.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let resolver = Resolver::new(&dns);
        let mut tls = TlsConfig { webpki_roots: config.tls.webpki_roots, extra_roots: Vec::new() };
        for path in &config.tls.extra_roots {
            tls.extra_roots.extend(net::load_pem_certs(path)?);
        }
        let fetch_tls = net::client_config(&tls, &[b"http/1.1"])?;
        let forward_tls = net::client_config(&tls, &[b"h2", b"http/1.1"])?;
        let fetch_connector =
            Connector::new(resolver.clone(), guard.clone(), fetch_tls, config.fetch.connect_timeout.0);
        let forward_connector = Connector::new(resolver, guard, forward_tls, config.fetch.connect_timeout.0);

        let audit = AuditLog::start(AuditConfig {
            target: if config.audit.path == "-" {
                Target::Stdout
            } else {
                Target::File(PathBuf::from(&config.audit.path))
            },
            snapshots: (!config.audit.snapshots.is_empty()).then(|| PathBuf::from(&config.audit.snapshots)),
            queue: config.audit.queue,
            on_error: match config.audit.on_error {
                OnErrorName::Refuse => OnError::Refuse,
                OnErrorName::Continue => OnError::Continue,
            },
            redact_query: config.audit.redact_query,
        })
        .await?;

        let fetcher = Fetcher::new(
            fetch_connector,
            FetchConfig {
                user_agent: config.user_agent(),
                header_timeout: config.fetch.header_timeout.0,
                body_timeout: config.fetch.body_timeout.0,
                max_redirects: config.fetch.max_redirects,
                ..FetchConfig::default()
            },
        );
        let p = &config.policy;
        let policy = RobotsPolicy::with_observer(
            fetcher,
            PolicyConfig {
                profile: p.profile.0,
                default_ttl: p.default_ttl.0,
                min_ttl: p.min_ttl.0,
                max_ttl: p.max_ttl.0,
                stale_if_error: p.stale_if_error.0,
                retry_min: p.retry_min.0,
                retry_max: p.retry_max.0,
                retry_busy: p.retry_busy.0,
                max_entries: p.cache_max_entries,
                max_bytes: p.cache_max_bytes.0,
                overrides: config.overrides(),
            },
            Some(Arc::new(audit.clone()) as Arc<dyn FetchObserver>),
        );
        let layer = RobotsLayer::new(policy.clone(), config.agent.token.0.clone())
            .with_selector(selector(config))
            .with_mode(match p.mode {
                ModeName::Enforce => Mode::Enforce,
                ModeName::ReportOnly => Mode::ReportOnly,
            })
            .with_audit(audit.clone());
        let proxy_config = ProxyConfig {
            listen: addr,
            upstream_timeout: config.proxy.upstream_timeout.0,
            shutdown_grace: config.proxy.shutdown_grace.0,
            header_read_timeout: config.proxy.header_read_timeout.0,
            ..ProxyConfig::default()
        };
        let forwarder = Forwarder::new(forward_connector, &proxy_config);
        let mut proxy = Proxy::from_listener(listener, proxy_config, layer, forwarder);
        if !config.tls.ca_dir.is_empty() {
            let dir = PathBuf::from(&config.tls.ca_dir);
            let ca = Ca::load(&dir).map_err(|source| StartError::Ca { dir, source })?;
            proxy = proxy.with_interception(Interception {
                interceptor: Interceptor::new(ca, config.tls.leaf_cache),
                bypass: config.tls.bypass.iter().map(|b| b.0.clone()).collect(),
                ports: config.tls.intercept_ports.clone(),
                handshake_timeout: config.tls.handshake_timeout.0,
            });
        }
        Ok(App { proxy, audit, policy, addr })
    }

    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The policy (for inspection).
    pub fn policy(&self) -> &RobotsPolicy {
        &self.policy
    }

    /// The audit log.
    pub fn audit(&self) -> &AuditLog {
        &self.audit
    }

    /// Serves until `shutdown` completes; then drains requests in flight and flushes the
    /// audit log.
    pub async fn run(self, shutdown: impl Future<Output = ()>) -> std::io::Result<()> {
        let audit = self.audit.clone();
        let result = self.proxy.run(shutdown).await;
        audit.shutdown().await;
        result
    }
}

fn selector(config: &Config) -> TokenSelector {
    let a = &config.agent;
    let default = Some(a.token.0.clone());
    match a.select {
        Select::Fixed => TokenSelector::Fixed(a.token.0.clone()),
        Select::ProxyUser => TokenSelector::ProxyUser {
            users: a.users.iter().map(|(u, t)| (u.clone(), t.0.clone())).collect(),
            default,
        },
        Select::Header => TokenSelector::Header { name: a.header.0.clone(), default },
        Select::UserAgent => TokenSelector::UserAgent {
            rules: a.user_agent_map.iter().map(|r| (r.contains.clone(), r.token.0.clone())).collect(),
            default,
        },
    }
}
