//! Command-line parsing and the subcommands.

mod audit;
mod ca;
mod check;
mod hash;
mod identity;
mod ingress;
mod run;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// robotsgate: make automated HTTP clients obey robots.txt (RFC 9309).
#[derive(Debug, Parser)]
#[command(name = "robotsgate", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the forward proxy (built-in configuration unless --config is given).
    Run(run::RunArgs),
    /// Run the reverse proxy in front of a site: enforce the site's own robots.txt on the
    /// bots that visit it.
    Ingress(ingress::IngressArgs),
    /// Check URLs against a robots.txt file, or against each origin's live robots.txt.
    Check(check::CheckArgs),
    /// Manage the local CA used for TLS interception.
    Ca(ca::CaArgs),
    /// Hash a password (read from standard input) for [auth.users].
    HashPassword(hash::HashArgs),
    /// The audit log's compliance tools: keygen, verify, prove, verify-proof, explain, report.
    Audit(audit::AuditArgs),
    /// Web Bot Auth keys for signing requests ([identity]): keygen, directory.
    Identity(identity::IdentityArgs),
}

/// Exit status for a usage or input error.
pub const EXIT_USAGE: u8 = 2;

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(e) => {
            let code = if e.use_stderr() { EXIT_USAGE } else { 0 };
            let _ = e.print();
            return ExitCode::from(code);
        }
    };
    let result = match cli.command {
        Command::Run(args) => run::run(args),
        Command::Ingress(args) => ingress::run(args),
        Command::Check(args) => check::run(args),
        Command::Ca(args) => ca::run(args),
        Command::HashPassword(args) => hash::run(args),
        Command::Audit(args) => audit::run(args),
        Command::Identity(args) => identity::run(args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("robotsgate: {e:#}");
            ExitCode::from(EXIT_USAGE)
        }
    }
}
