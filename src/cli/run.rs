//! `robotsgate run`: start the forward proxy.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use robotsgate::app::App;
use robotsgate::config::{Cidr, Config, LogFormat, Token};

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
        println!("{name}: OK");
        return Ok(ExitCode::SUCCESS);
    }
    init_logging(&config);
    let runtime =
        tokio::runtime::Builder::new_multi_thread().enable_all().build().context("cannot start tokio")?;
    runtime.block_on(async {
        let app = App::start(&config).await?;
        tracing::info!(
            listen = %app.local_addr(),
            agent = %config.agent.token.0,
            profile = %config.policy.profile.0,
            audit = %config.audit.path,
            "robotsgate is running; point HTTP_PROXY/HTTPS_PROXY at http://{}",
            app.local_addr()
        );
        app.run(shutdown_signal()).await.context("proxy failed")?;
        tracing::info!("stopped");
        Ok(ExitCode::SUCCESS)
    })
}

fn init_logging(config: &Config) {
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

/// Completes on SIGINT or SIGTERM.
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    #[cfg(unix)]
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    #[cfg(not(unix))]
    let term = std::future::pending::<()>();
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down: draining requests in flight");
}
