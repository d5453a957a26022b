//! `robotsgate ingress`: start the reverse proxy that enforces a site's own robots.txt on
//! the bots visiting it.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;

use crate::config::{Cidr, Config, ForwardedHeaderName, IngressModeName};
use crate::ingress::{Ingress, IngressReloader};

#[derive(Debug, Args)]
pub struct IngressArgs {
    /// Listen on this address (overrides ingress.listen).
    #[arg(long, value_name = "ADDR")]
    listen: Option<SocketAddr>,

    /// The site: http://host:port (overrides ingress.upstream).
    #[arg(long, value_name = "URL")]
    upstream: Option<String>,

    /// Configuration file (TOML): the [ingress] and [verify] sections, and [audit], [dns], [log].
    #[arg(long, short, value_name = "FILE")]
    config: Option<PathBuf>,

    /// Write the audit log here, `-` for standard output (overrides audit.path).
    #[arg(long, value_name = "PATH")]
    audit_log: Option<String>,

    /// The site's robots.txt as a file (overrides ingress.robots; default: the upstream's).
    #[arg(long, value_name = "FILE")]
    robots: Option<String>,

    /// HTTPS: the certificate chain, PEM (overrides ingress.tls_cert; with --tls-key).
    #[arg(long, value_name = "FILE")]
    tls_cert: Option<String>,

    /// HTTPS: the private key of --tls-cert, PEM (overrides ingress.tls_key).
    #[arg(long, value_name = "FILE")]
    tls_key: Option<String>,

    /// Serve /healthz, /readyz and /metrics here (overrides admin.listen).
    #[arg(long, value_name = "ADDR")]
    admin_listen: Option<SocketAddr>,

    /// Decide and record, refuse nothing (ingress.mode = "report-only").
    #[arg(long)]
    report_only: bool,

    /// Believe X-Forwarded-For (or Forwarded: --forwarded-header) from peers in this CIDR
    /// (repeatable; adds to ingress.trusted_proxies).
    #[arg(long, value_name = "CIDR")]
    trusted_proxy: Vec<String>,

    /// The header the trusted proxies add the client's address to (overrides
    /// ingress.forwarded_header); the other one is never read.
    #[arg(long, value_name = "HEADER")]
    forwarded_header: Option<ForwardedHeaderName>,
}

fn configuration(args: &IngressArgs) -> anyhow::Result<Config> {
    let mut config = match &args.config {
        Some(path) => Config::load(path)?,
        None => Config::default(),
    };
    let ic = &mut config.ingress;
    if let Some(listen) = args.listen {
        ic.listen = listen;
    }
    if let Some(up) = &args.upstream {
        ic.upstream = up.clone();
    }
    if let Some(robots) = &args.robots {
        if !ic.hosts.is_empty() {
            anyhow::bail!(
                "--robots gives one file for every request; ingress.hosts has each host's robots.txt fetched from the upstream: use one or the other"
            );
        }
        ic.robots = robots.clone();
    }
    if let Some(cert) = &args.tls_cert {
        ic.tls_cert = cert.clone();
    }
    if let Some(key) = &args.tls_key {
        ic.tls_key = key.clone();
    }
    if args.report_only {
        ic.mode = IngressModeName::ReportOnly;
    }
    for cidr in &args.trusted_proxy {
        ic.trusted_proxies.push(cidr.parse::<Cidr>().map_err(anyhow::Error::msg).context("--trusted-proxy")?);
    }
    if let Some(header) = args.forwarded_header {
        ic.forwarded_header = header;
    }
    if let Some(addr) = args.admin_listen {
        config.admin.listen = Some(addr);
    }
    if let Some(path) = &args.audit_log {
        config.audit.path = path.clone();
    }
    Ok(config)
}

pub fn run(args: IngressArgs) -> anyhow::Result<ExitCode> {
    let config = configuration(&args)?;
    super::run::init_logging(&config);
    // This thread accepts connections and runs the admin listener, the list refresher and
    // reloads; connections are served on the ingress's worker threads (ingress.workers).
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start tokio")?;
    runtime.block_on(async {
        let ingress = Ingress::start(&config).await?;
        let shutdown = super::run::shutdown_signal();
        if let Some(addr) = ingress.admin_addr() {
            tracing::info!("admin listener: /healthz, /readyz and /metrics at http://{addr}");
        }
        tracing::info!(
            upstream = %config.ingress.upstream,
            mode = ?config.ingress.mode,
            audit = %config.audit.path,
            "robotsgate ingress is running; point the site's traffic at {}://{}",
            ingress.scheme(),
            ingress.local_addr()
        );
        let reloads = tokio::spawn(reload_on_sighup(args, ingress.reloader()));
        ingress.run(shutdown).await.context("ingress failed")?;
        reloads.abort();
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

/// Reloads the configuration on each SIGHUP; a file that does not load is refused and
/// the configuration in force kept.
#[cfg(unix)]
async fn reload_on_sighup(args: IngressArgs, reloader: IngressReloader) {
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
        match reloader.reload(&new).await {
            Ok(restart) => {
                tracing::info!(file, robots = %new.ingress.robots, "configuration reloaded");
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
async fn reload_on_sighup(_: IngressArgs, _: IngressReloader) {}
