//! The running proxy assembled from a [`Config`]: listener, guard, resolver, TLS, fetcher,
//! policy, audit log, layer, forwarder, authentication, metrics and the admin listener.
//! The binary and the tests start robotsgate through [`App::start`], and reload it
//! through [`Reloader`].

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use crate::admin::{Admin, Readiness};
use crate::auth::{AuthError, ProxyAuth};
use crate::ca::{Ca, Interceptor};
use crate::config::{Config, DurabilityName, ModeName, OnErrorName, Select};
use crate::forward::{ForwardConfig, Forwarder};
use crate::intercept::Interception;
use crate::metrics::{Metrics, Sources};
use crate::proxy::{ClientNetworks, Proxy, ProxyConfig, listen};
use robotsgate::audit::{AuditConfig, AuditLog, AuditSetupError, Durability, OnError, Target};
use robotsgate::fetch::FetchConfig;
use robotsgate::layer::{Mode, RobotsLayer, Settings, TokenSelector, Transport};
use robotsgate::net::{self, DnsConfig, Guard, Pool, TlsConfig, TlsSetupError};
use robotsgate::pacing::{PaceObserver, Pacer};
use robotsgate::policy::{FetchObserver, PolicyConfig, RobotsPolicy};
use robotsgate::{BuildError, Robots};

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
    /// The library refused the settings (e.g. a `User-Agent` without the product token).
    #[error(transparent)]
    Build(#[from] BuildError),
    /// The audit log could not be opened.
    #[error(transparent)]
    Audit(#[from] AuditSetupError),
    /// The checkpoint signing key could not be read.
    #[error("audit.signing_key: cannot use {path}: {why}")]
    SigningKey {
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The interception CA could not be loaded.
    #[error("cannot load the CA in {dir}: {source}")]
    Ca {
        /// tls.ca_dir
        dir: PathBuf,
        /// Why.
        source: crate::ca::CaError,
    },
    /// The admin listener could not be bound.
    #[error("cannot listen on {addr} (admin): {source}")]
    AdminListen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A user's password hash is unusable.
    #[error(transparent)]
    Auth(#[from] AuthError),
    /// The fleet's Redis settings are unusable.
    #[error("cluster: {0}")]
    Cluster(String),
    /// The `[identity]` keys or directory listener are unusable.
    #[error(transparent)]
    Identity(#[from] crate::identity::IdentityError),
}

/// A started robotsgate: bound, with its audit log open.
pub struct App {
    proxy: Proxy,
    audit: AuditLog,
    policy: RobotsPolicy,
    addr: SocketAddr,
    admin: Option<Admin>,
    admin_addr: Option<SocketAddr>,
    metrics: Arc<Metrics>,
    reloader: Reloader,
    /// Fleet mode: the task that notices Redis coming back.
    cluster_watch: Option<tokio::task::JoinHandle<()>>,
    /// `[identity] directory_listen`: the key directory.
    directory: Option<crate::identity::DirectoryServer>,
    /// Gives freed memory back once the proxy is quiet (ends with the app).
    quiet: tokio_util::task::AbortOnDropHandle<()>,
}

/// Applies a new configuration to a running [`App`] (SIGHUP): the policy (profile,
/// freshness, failure handling, overrides), pacing (delays, limits, host rules), the token
/// selection and mode, the proxy users (and with them which `[identity.users]` entries sign
/// as proxy users, which as product tokens), the destination guard and the allowed client
/// networks. Connections and the robots.txt cache stay. Other changes (listen addresses,
/// timeouts, TLS, DNS, audit, cache bounds, `[identity]` keys) need a restart;
/// [`Reloader::reload`] names them.
#[derive(Clone)]
pub struct Reloader {
    inner: Arc<ReloadInner>,
}

struct ReloadInner {
    policy: RobotsPolicy,
    pacer: Pacer,
    layer: RobotsLayer,
    auth: ProxyAuth,
    guard: Guard,
    clients: ClientNetworks,
    listen: SocketAddr,
    /// `[identity.users]`: sorted anew by each configuration's `[auth] users`.
    user_signers: crate::identity::UserSigners,
    /// The configuration the process started with: what a setting that is not reloaded
    /// still is, whatever files were loaded since.
    started: Config,
}

impl std::fmt::Debug for Reloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reloader").finish_non_exhaustive()
    }
}

impl Reloader {
    /// Applies `new` (already parsed and checked). Returns the changed settings that
    /// take effect only on the next start; they are left as they were.
    pub fn reload(&self, new: &Config) -> Result<Vec<&'static str>, AuthError> {
        let i = &self.inner;
        // The only step that can fail goes first, so a refused file changes nothing.
        i.auth.reload(users(new))?;
        i.policy.reload(policy_config(new));
        i.pacer.reload(new.pacing_config());
        i.layer.reload(Settings {
            selector: Arc::new(selector(new)),
            mode: mode(new),
            purpose: Arc::new(new.purpose()),
        });
        if let Some(signers) = i.layer.signers() {
            signers.reload(&i.user_signers.sorted(new));
        }
        i.guard.replace_rules(&guard(new, i.listen));
        i.clients.set(new.proxy.allow_clients.iter().map(|c| c.0).collect());
        // Against the start's: a change not applied is still not applied at the next
        // reload, and a file back to the running values needs nothing.
        Ok(restart_needed(&i.started, new))
    }
}

/// The settings that differ between `old` and `new` and are not reloaded.
fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let (o, n) = (&old.proxy, &new.proxy);
    let mut changed = Vec::new();
    let mut check = |name: &'static str, differs: bool| {
        if differs {
            changed.push(name);
        }
    };
    check("proxy.listen", o.listen != n.listen);
    check("proxy.listen_backlog", o.listen_backlog != n.listen_backlog);
    check(
        "proxy timeouts and limits",
        (o.upstream_timeout, o.header_read_timeout, o.shutdown_grace, o.max_connections, o.max_header_bytes)
            != (
                n.upstream_timeout,
                n.header_read_timeout,
                n.shutdown_grace,
                n.max_connections,
                n.max_header_bytes,
            )
            || (o.tunnel_idle_timeout, o.upstream_read_timeout, o.send_timeout)
                != (n.tunnel_idle_timeout, n.upstream_read_timeout, n.send_timeout),
    );
    check("proxy.workers", o.workers != n.workers);
    check("proxy.http1_fast_path", o.http1_fast_path != n.http1_fast_path);
    check("[cluster]", old.cluster != new.cluster);
    check(
        "proxy.upstream_idle_max/upstream_idle_per_origin/upstream_idle_timeout/upstream_burst_grace",
        (o.upstream_idle_max, o.upstream_idle_per_origin, o.upstream_idle_timeout, o.upstream_burst_grace)
            != (
                n.upstream_idle_max,
                n.upstream_idle_per_origin,
                n.upstream_idle_timeout,
                n.upstream_burst_grace,
            ),
    );
    check("agent.user_agent (robots.txt fetches)", old.user_agent() != new.user_agent());
    check(
        "policy.cache_max_entries/cache_max_bytes/cache_max_idle",
        (old.policy.cache_max_entries, old.policy.cache_max_bytes, old.policy.cache_max_idle)
            != (new.policy.cache_max_entries, new.policy.cache_max_bytes, new.policy.cache_max_idle),
    );
    check("pacing.max_origins", old.pacing.max_origins != new.pacing.max_origins);
    check("[fetch]", old.fetch != new.fetch);
    check("[dns]", old.dns != new.dns);
    check("[tls]", old.tls != new.tls);
    check("[audit]", old.audit != new.audit);
    check("[log]", old.log != new.log);
    check("[admin]", old.admin != new.admin);
    check("auth.realm", old.auth.realm != new.auth.realm);
    check("[identity]", old.identity != new.identity);
    changed
}

/// Cache and audit figures read when `/metrics` is scraped.
struct AppSources {
    policy: RobotsPolicy,
    pool: Pool,
    pacer: Pacer,
    audit: AuditLog,
    interceptor: Option<Interceptor>,
}

impl Sources for AppSources {
    fn cache(&self) -> (u64, u64, u64, u64, u64) {
        let (hits, misses, stale) = self.policy.cache_stats();
        (self.policy.cached_origins(), self.policy.cached_bytes(), hits, misses, stale)
    }

    fn audit(&self) -> (u64, u64) {
        (self.audit.written(), self.audit.lost())
    }

    fn leaves_minted(&self) -> Option<u64> {
        self.interceptor.as_ref().map(Interceptor::minted)
    }

    fn pacing(&self) -> (u64, u64) {
        (self.pacer.held() as u64, self.pacer.lanes() as u64)
    }

    fn upstream_idle(&self) -> u64 {
        self.pool.idle() as u64
    }
}

impl std::fmt::Debug for App {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("App").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl App {
    /// What `robotsgate run --check-config` checks beyond the file itself
    /// ([`Config::parse`]): what [`App::start`] refuses short of binding its listeners,
    /// opening the audit log and reaching Redis. The proxy users' password hashes, the
    /// certificate and key files named (extra roots, the CA, the audit and identity signing
    /// keys), the price, and an admin address that is the proxy's own.
    pub fn check(config: &Config) -> Result<(), StartError> {
        ProxyAuth::new(users(config), &config.auth.realm)?;
        if let Some(a) = config.admin.listen
            && a == config.proxy.listen
            && a.port() != 0
        {
            let source = std::io::Error::new(std::io::ErrorKind::AddrInUse, "it is proxy.listen too");
            return Err(StartError::AdminListen { addr: a, source });
        }
        for path in &config.tls.extra_roots {
            net::load_pem_certs(path)?;
        }
        signing_key(&config.audit.signing_key)?;
        crate::identity::signer(config)?;
        crate::identity::keys(config)?;
        crate::identity::UserSigners::new(config, &crate::identity::users(config)?)?;
        crate::identity::max_price(config)?;
        if !config.tls.ca_dir.is_empty() {
            let dir = PathBuf::from(&config.tls.ca_dir);
            Ca::load(&dir).map_err(|source| StartError::Ca { dir, source })?;
        }
        Ok(())
    }

    /// Binds the listener and builds every part from `config`.
    pub async fn start(config: &Config) -> Result<App, StartError> {
        let addr = config.proxy.listen;
        let listener = listen(addr, config.proxy.listen_backlog)
            .map_err(|source| StartError::Listen { addr, source })?;
        let addr = listener.local_addr().map_err(|source| StartError::Listen { addr, source })?;

        let auth = ProxyAuth::new(users(config), &config.auth.realm)?;
        let admin = match config.admin.listen {
            Some(a) => Some(
                Admin::bind(a, Arc::new(Metrics::default()), Readiness::default())
                    .await
                    .map_err(|source| StartError::AdminListen { addr: a, source })?,
            ),
            None => None,
        };
        let guard = self::guard(config, addr);
        let guard_handle = guard.clone();
        let dns = DnsConfig {
            servers: config.dns.servers.clone(),
            overrides: config.dns.static_hosts.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        };
        let mut tls = TlsConfig { webpki_roots: config.tls.webpki_roots, extra_roots: Vec::new() };
        for path in &config.tls.extra_roots {
            tls.extra_roots.extend(net::load_pem_certs(path)?);
        }

        let audit = audit_log(config).await?;

        let metrics = admin.as_ref().map_or_else(|| Arc::new(Metrics::default()), Admin::metrics);
        // The proxy is built as any embedder builds its layer: through the library's
        // builder. One pool serves robots.txt fetches and forwarded requests: the
        // connection a fetch opened serves the request it was made for, and one bound
        // holds for both.
        let builder = Robots::builder()
            .agent(config.agent.token.0.to_string())
            .user_agent(config.user_agent())
            .leave_user_agent()
            .guard(guard)
            .dns(dns)
            .tls(tls)
            .connect_timeout(config.fetch.connect_timeout.0)
            // A forward proxy itself: its upstream connections go directly, whatever
            // HTTP_PROXY, HTTPS_PROXY or ALL_PROXY say in its environment.
            .proxies(net::Proxies::none())
            .fetch_config(FetchConfig {
                header_timeout: config.fetch.header_timeout.0,
                body_timeout: config.fetch.body_timeout.0,
                total_timeout: config.fetch.total_timeout.0,
                max_redirects: config.fetch.max_redirects,
                ..FetchConfig::default()
            })
            .pool(config.pool_config())
            .policy_config(policy_config(config))
            .pacing_config(config.pacing_config())
            .audit(audit.clone())
            .fetch_observer(metrics.clone() as Arc<dyn FetchObserver>)
            .pace_observer(metrics.clone() as Arc<dyn PaceObserver>)
            .observer(metrics.clone())
            .select_token(selector(config))
            .purpose_settings(config.purpose())
            .mode(mode(config))
            .answer_outages()
            // Nothing here reads an allowed response's Decision: observers and the audit
            // log have it.
            .no_decision_in_response()
            .transport(Transport::Proxy);
        let cluster = cluster(config)?;
        #[cfg(feature = "cluster")]
        let builder = match &cluster {
            Some(c) => {
                c.observe(metrics.clone() as Arc<dyn robotsgate::cluster::ClusterObserver>);
                let mut share = robotsgate::cluster::RedisCopyShare::new(c.clone());
                if !config.audit.snapshots.is_empty() {
                    // Whichever replica decides, `audit explain` finds the file there.
                    share = share.with_snapshots(config.cluster.snapshot_ttl.0);
                }
                builder.cluster(c.clone()).copy_share(Arc::new(share))
            }
            None => builder,
        };
        // Checked here for its error's wording; the builder signs the requests and the
        // robots.txt fetches with the same key.
        let signer = crate::identity::signer(config)?;
        let mut builder = match (&signer, crate::identity::keys(config)?) {
            (Some(_), Some(keys)) => builder
                .sign_with(keys[0].clone(), config.identity.signature_agent.clone())
                .signature_validity(config.identity.validity.0),
            _ => builder,
        };
        let identity_users = crate::identity::users(config)?;
        let user_signers = crate::identity::UserSigners::new(config, &identity_users)?;
        for u in identity_users {
            let (key, agent) = (u.keys[0].clone(), u.signature_agent);
            builder = match u.is_user {
                true => builder.sign_user_with(u.name, key, agent),
                false => builder.sign_token_with(u.name, key, agent),
            };
        }
        let robots = builder.build()?;
        let (policy, pacer, layer, pool) =
            (robots.policy().clone(), robots.pacer().clone(), robots.layer(), robots.pool().clone());
        let max_price = crate::identity::max_price(config)?;
        let directory = crate::identity::DirectoryServer::bind(config).await?;
        #[cfg(feature = "cluster")]
        let cluster_watch = cluster.as_ref().map(|c| c.watch(std::time::Duration::from_secs(1)));
        #[cfg(not(feature = "cluster"))]
        let cluster_watch = cluster.map(|()| tokio::spawn(async {}));
        let px = &config.proxy;
        let proxy_config = ProxyConfig {
            listen: addr,
            shutdown_grace: px.shutdown_grace.0,
            header_read_timeout: px.header_read_timeout.0,
            max_connections: px.max_connections,
            max_header_bytes: usize::try_from(px.max_header_bytes.0).unwrap_or(usize::MAX),
            send_timeout: px.send_timeout.0,
            http1_fast_path: px.http1_fast_path,
        };
        let forward_config = ForwardConfig {
            upstream_timeout: px.upstream_timeout.0,
            tunnel_idle_timeout: px.tunnel_idle_timeout.0,
            ..ForwardConfig::default()
        };
        let upstream_pool = pool.clone();
        let quiet = {
            let (metrics, pool, policy) = (metrics.clone(), pool.clone(), policy.clone());
            // Idle connections closing after the requests stopped free their buffers too,
            // and origins leaving the cache (`policy.cache_max_idle`: the cache evicts in
            // its maintenance, run here when no request runs it).
            tokio_util::task::AbortOnDropHandle::new(crate::memory::give_back_when_quiet(
                crate::memory::QUIET_TICK,
                crate::memory::QUIET_TICKS,
                move || {
                    let (metrics, pool, policy) = (metrics.clone(), pool.clone(), policy.clone());
                    async move {
                        policy.sync().await;
                        metrics
                            .activity()
                            .wrapping_add((pool.idle() as u64) << 48)
                            .wrapping_add(policy.cached_origins() << 20)
                    }
                },
            ))
        };
        let mut forwarder = Forwarder::new(pool, &forward_config).with_metrics(metrics.clone());
        if let (Some(_), Some(max)) = (signer, max_price) {
            forwarder = forwarder.with_pay(crate::forward::Pay { max });
        }
        let clients = ClientNetworks::default();
        clients.set(px.allow_clients.iter().map(|c| c.0).collect());
        let ready = admin.as_ref().map_or_else(Readiness::default, Admin::readiness);
        let mut proxy = Proxy::from_listener(listener, proxy_config, layer.clone(), forwarder)
            .with_auth(auth.clone())
            .with_client_networks(clients.clone())
            .with_metrics(metrics.clone())
            .with_readiness(ready)
            .with_workers(px.workers);
        let mut interceptor = None;
        if !config.tls.ca_dir.is_empty() {
            let dir = PathBuf::from(&config.tls.ca_dir);
            let ca = Ca::load(&dir).map_err(|source| StartError::Ca { dir, source })?;
            let minter = Interceptor::new(ca, config.tls.leaf_cache);
            interceptor = Some(minter.clone());
            proxy = proxy.with_interception(Interception {
                interceptor: minter,
                bypass: config.tls.bypass.iter().map(|b| b.0.clone()).collect(),
                ports: config.tls.intercept_ports.clone(),
                handshake_timeout: config.tls.handshake_timeout.0,
            });
        }
        metrics.set_sources(Arc::new(AppSources {
            policy: policy.clone(),
            pool: upstream_pool,
            pacer: pacer.clone(),
            audit: audit.clone(),
            interceptor,
        }));
        let reloader = Reloader {
            inner: Arc::new(ReloadInner {
                policy: policy.clone(),
                pacer,
                layer,
                auth,
                guard: guard_handle,
                clients,
                listen: addr,
                user_signers,
                started: config.clone(),
            }),
        };
        let admin_addr = match &admin {
            Some(a) => Some(a.local_addr().map_err(|source| StartError::AdminListen { addr, source })?),
            None => None,
        };
        Ok(App {
            proxy,
            audit,
            policy,
            addr,
            admin,
            admin_addr,
            metrics,
            reloader,
            cluster_watch,
            directory,
            quiet,
        })
    }

    /// The address the proxy listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address of the admin listener, when configured.
    pub fn admin_addr(&self) -> Option<SocketAddr> {
        self.admin_addr
    }

    /// The address of the key directory listener, when configured.
    pub fn directory_addr(&self) -> Option<SocketAddr> {
        self.directory.as_ref().and_then(|d| d.local_addr().ok())
    }

    /// The metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.metrics
    }

    /// A handle that applies a new configuration while running.
    pub fn reloader(&self) -> Reloader {
        self.reloader.clone()
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
        let stop_admin = CancellationToken::new();
        let admin = self.admin.map(|a| tokio::spawn(a.run(stop_admin.clone())));
        let directory = self.directory.map(|d| tokio::spawn(d.run(stop_admin.clone())));
        let result = self.proxy.run(shutdown).await;
        if let Some(w) = self.cluster_watch {
            w.abort();
        }
        drop(self.quiet);
        audit.shutdown().await;
        stop_admin.cancel();
        if let Some(task) = admin {
            let _ = task.await;
        }
        if let Some(task) = directory {
            let _ = task.await;
        }
        result
    }
}

/// `None` for zero ("not by time").
fn nonzero(d: std::time::Duration) -> Option<std::time::Duration> {
    (!d.is_zero()).then_some(d)
}

/// The checkpoint signing key at `path` ("": none). A key file others may read is
/// used, with a warning.
fn signing_key(path: &str) -> Result<Option<Arc<robotsgate::audit::note::Signer>>, StartError> {
    if path.is_empty() {
        return Ok(None);
    }
    let bad = |why: String| StartError::SigningKey { path: PathBuf::from(path), why };
    let text = std::fs::read_to_string(path).map_err(|e| bad(e.to_string()))?;
    let signer = robotsgate::audit::note::Signer::parse(&text).map_err(|e| bad(e.to_string()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path, "the audit signing key can be read by others; chmod 600 it");
        }
    }
    Ok(Some(Arc::new(signer)))
}

/// Fleet mode's Redis connection of `config` (made lazily: Redis need not be up), if
/// `[cluster] redis` is set.
#[cfg(feature = "cluster")]
fn cluster(config: &Config) -> Result<Option<robotsgate::cluster::Cluster>, StartError> {
    let Some(c) = config.cluster_config().map_err(StartError::Cluster)? else { return Ok(None) };
    let cluster = robotsgate::cluster::Cluster::new(c).map_err(|e| StartError::Cluster(e.to_string()))?;
    Ok(Some(cluster))
}

/// Without the feature `cluster`, `[cluster] redis` is refused when the file is read.
#[cfg(not(feature = "cluster"))]
fn cluster(_: &Config) -> Result<Option<()>, StartError> {
    Ok(None)
}

/// The audit log `config` asks for (`run` and `ingress` both write one).
pub(crate) async fn audit_log(config: &Config) -> Result<AuditLog, StartError> {
    Ok(AuditLog::start(AuditConfig {
        target: if config.audit.path == "-" {
            Target::Stdout
        } else {
            Target::File(PathBuf::from(&config.audit.path))
        },
        snapshots: (!config.audit.snapshots.is_empty()).then(|| PathBuf::from(&config.audit.snapshots)),
        durability: match config.audit.durability {
            DurabilityName::Written => Durability::Written,
            DurabilityName::Synced => Durability::Synced,
            DurabilityName::Buffered => Durability::Buffered,
        },
        queue: config.audit.queue,
        on_error: match config.audit.on_error {
            OnErrorName::Refuse => OnError::Refuse,
            OnErrorName::Continue => OnError::Continue,
        },
        redact_query: config.audit.redact_query,
        checkpoint_every: config.audit.checkpoint_every,
        checkpoint_interval: nonzero(config.audit.checkpoint_interval.0),
        signing_key: signing_key(&config.audit.signing_key)?,
        rotate_size: config.audit.rotate_size.0,
        rotate_interval: nonzero(config.audit.rotate_interval.0),
    })
    .await?)
}

/// The destination guard of `config` for a proxy listening on `listen`.
pub(crate) fn guard(config: &Config, listen: SocketAddr) -> Guard {
    let mut guard = Guard::default().deny_own_listener(listen);
    for cidr in &config.guard.allow {
        guard = guard.allow(cidr.0);
    }
    for host in &config.guard.allow_hosts {
        guard = guard.allow_host(host.0.clone());
    }
    guard
}

fn users(config: &Config) -> std::collections::HashMap<String, String> {
    config.auth.users.iter().map(|(u, h)| (u.clone(), h.0.clone())).collect()
}

fn mode(config: &Config) -> Mode {
    match config.policy.mode {
        ModeName::Enforce => Mode::Enforce,
        ModeName::ReportOnly => Mode::ReportOnly,
        ModeName::Off => Mode::Off,
    }
}

fn policy_config(config: &Config) -> PolicyConfig {
    let p = &config.policy;
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
        max_idle: p.cache_max_idle.0,
        overrides: config.overrides(),
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
