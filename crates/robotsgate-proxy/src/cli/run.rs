//! `robotsgate run`: start the forward proxy.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use crate::app::{App, Reloader};
use crate::config::{Cidr, Config, LogFormat, Token};
use anyhow::Context;
use clap::Args;

#[derive(Debug, Args)]
pub struct RunArgs {
    /// Configuration file (TOML); without it, the built-in defaults (config/robotsgate.toml).
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Listen on this address (overrides proxy.listen).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// The crawler's product token (overrides agent.token).
    #[arg(long, value_name = "TOKEN")]
    agent: Option<String>,

    /// Write the audit log here, `-` for standard output (overrides audit.path).
    #[arg(long, value_name = "PATH")]
    audit_log: Option<String>,

    /// Allow destinations in this CIDR although the guard would refuse them (repeatable;
    /// adds to guard.allow).
    #[arg(long, value_name = "CIDR")]
    allow_destination: Vec<String>,

    /// Intercept HTTPS with the CA in this folder (made by `robotsgate ca init`), for
    /// path-level checks (overrides tls.ca_dir).
    #[arg(long, value_name = "DIR")]
    ca_dir: Option<PathBuf>,

    /// Also trust the CA certificates in this PEM file for origins (repeatable; adds to
    /// tls.extra_roots).
    #[arg(long, value_name = "FILE")]
    upstream_ca: Vec<PathBuf>,

    /// Serve /healthz, /readyz and /metrics here (overrides admin.listen).
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,

    /// Check the configuration, print it is fine, and exit.
    #[arg(long)]
    check_config: bool,
}

/// Loads the configuration and applies the command-line overrides.
fn configuration(args: &RunArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    if let Some(listen) = args.listen {
        config.proxy.listen = listen;
    }
    if let Some(agent) = &args.agent {
        config.agent.token = agent.parse::<Token>().map_err(anyhow::Error::msg).context("--agent")?;
        config.agent.user_agent.clear();
    }
    if let Some(addr) = args.admin_listen {
        config.admin.listen = Some(addr);
    }
    if let Some(path) = &args.audit_log {
        config.audit.path = path.clone();
    }
    if let Some(dir) = &args.ca_dir {
        config.tls.ca_dir = dir.display().to_string();
    }
    config.tls.extra_roots.extend(args.upstream_ca.iter().cloned());
    for cidr in &args.allow_destination {
        config
            .guard
            .allow
            .push(cidr.parse::<Cidr>().map_err(anyhow::Error::msg).context("--allow-destination")?);
    }
    Ok(config)
}

pub fn run(args: RunArgs) -> anyhow::Result<ExitCode> {
    let config = configuration(&args)?;
    if args.check_config {
        let name = args.config.as_ref().map_or("built-in configuration".into(), |p| p.display().to_string());
        App::check(&config).with_context(|| format!("{name}: the start would refuse it"))?;
        println!("{name}: OK");
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(&config);
    raise_open_file_limit(&config);
    // This thread accepts connections and runs the admin listener, the audit writer and
    // reloads; connections are served on the proxy's worker threads (proxy.workers).
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start tokio")?;
    runtime.block_on(async {
        let app = App::start(&config).await?;
        let shutdown = shutdown_signal();
        tracing::info!(
            listen = %app.local_addr(),
            admin = ?app.admin_addr(),
            agent = %config.agent.token.0,
            profile = %config.policy.profile.0,
            audit = %config.audit.path,
            "robotsgate is running; point HTTP_PROXY/HTTPS_PROXY at http://{}",
            app.local_addr()
        );
        if let Some(addr) = app.directory_addr() {
            tracing::info!(
                %addr,
                signature_agent = %config.identity.signature_agent,
                "key directory served at http://{addr}{}",
                robotsgate::identity::httpsig::WELL_KNOWN_PATH
            );
        }
        warn_if_open(&config, app.local_addr());
        let reloads = tokio::spawn(reload_on_sighup(args, app.reloader()));
        app.run(shutdown).await.context("proxy failed")?;
        reloads.abort();
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

/// Raises the soft open-file limit towards what `max_connections` may need (a client
/// connection and its upstream one each, plus some for fetches and files), never above
/// the hard limit; warns when the limit stays below one descriptor per client connection.
fn raise_open_file_limit(config: &Config) {
    let clients = u64::try_from(config.proxy.max_connections).unwrap_or(u64::MAX).saturating_add(256);
    match rlimit::increase_nofile_limit(clients.saturating_mul(2)) {
        Ok(limit) if limit < clients => tracing::warn!(
            limit,
            max_connections = config.proxy.max_connections,
            "the open-file limit is below max_connections; raise it (ulimit -n, LimitNOFILE=)"
        ),
        Ok(_) => {}
        Err(e) => tracing::warn!(error = %e, "cannot read or raise the open-file limit"),
    }
}

/// A proxy on a non-loopback address with neither client networks nor users is open to
/// whoever can reach it: say so.
fn warn_if_open(config: &Config, addr: SocketAddr) {
    if config.policy.mode == crate::config::ModeName::Off {
        tracing::warn!("policy.mode = \"off\": robots.txt is not checked and nothing is audited");
    }
    if !addr.ip().is_loopback() && config.proxy.allow_clients.is_empty() && config.auth.users.is_empty() {
        tracing::warn!(
            %addr,
            "listening beyond loopback with no proxy.allow_clients and no auth.users: anyone who can \
             reach this address can use the proxy"
        );
    }
}

/// Reloads the configuration on each SIGHUP; a file that does not load is refused and
/// the configuration in force kept.
#[cfg(unix)]
async fn reload_on_sighup(args: RunArgs, reloader: Reloader) {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "cannot listen for SIGHUP; reloading is off");
            return;
        }
    };
    while hup.recv().await.is_some() {
        let file = args.config.as_ref().map_or("built-in configuration".into(), |p| p.display().to_string());
        let new = match configuration(&args) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(file, error = %super::report(&e), "reload refused; keeping the configuration in force");
                continue;
            }
        };
        match reloader.reload(&new) {
            Ok(restart) => {
                tracing::info!(file, "configuration reloaded");
                for key in restart {
                    tracing::warn!(file, setting = key, "changed, but takes effect only on restart");
                }
            }
            Err(e) => {
                tracing::error!(file, error = %e, "reload refused; keeping the configuration in force")
            }
        }
    }
}

#[cfg(not(unix))]
async fn reload_on_sighup(_: RunArgs, _: Reloader) {}

pub(super) fn init_logging(config: &Config) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(config.log.level.as_str()));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match config.log.format {
        LogFormat::Text => builder.try_init(),
        LogFormat::Json => builder.json().try_init(),
    };
}

/// Completes on SIGINT or SIGTERM. The handlers are installed when this is called, not
/// when the future is first polled: a signal that comes as soon as the "running" line is
/// out must stop the proxy gracefully (drain, flush and close the audit log), not kill
/// it with the default action.
pub(super) fn shutdown_signal() -> impl Future<Output = ()> {
    #[cfg(unix)]
    let (int, term) = {
        use tokio::signal::unix::{SignalKind, signal};
        (signal(SignalKind::interrupt()), signal(SignalKind::terminate()))
    };
    async move {
        #[cfg(unix)]
        {
            let wait = |s: std::io::Result<tokio::signal::unix::Signal>| async move {
                match s {
                    Ok(mut s) => {
                        s.recv().await;
                    }
                    Err(_) => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                _ = wait(int) => {}
                _ = wait(term) => {}
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
        }
        tracing::info!("shutting down: draining requests in flight");
    }
}
