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
            eprintln!("robotsgate: {}", report(&e));
            ExitCode::from(EXIT_USAGE)
        }
    }
}

/// An error and its causes on one line, `: ` between them, each said once: many errors
/// (ours and the libraries') already end with their cause's text, which anyhow's `{:#}`
/// would print again after them.
pub(crate) fn report(e: &anyhow::Error) -> String {
    let mut line = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

/// `text` for a terminal: the control characters a terminal acts on (ESC, CR, BEL, the C1
/// controls) shown as escapes (`\u{1b}`), line breaks and tabs kept. What a log, a URL or a
/// robots.txt holds comes from strangers, and `ESC [2K` would rewrite a line on screen.
pub(crate) fn for_terminal(text: &str) -> std::borrow::Cow<'_, str> {
    let acted_on = |c: char| c.is_control() && c != '\n' && c != '\t';
    if !text.contains(acted_on) {
        return std::borrow::Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if acted_on(c) {
            out.extend(c.escape_unicode());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use super::{for_terminal, report};

    #[test]
    fn control_characters_are_shown_not_acted_on() {
        assert_eq!(for_terminal("plain /path\tand\nlines"), "plain /path\tand\nlines");
        assert_eq!(
            for_terminal("/esc\u{1b}[2K\rallowed\u{9b}x\u{7f}"),
            "/esc\\u{1b}[2K\\u{d}allowed\\u{9b}x\\u{7f}"
        );
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot read {path}: {source}")]
    struct Says {
        path: &'static str,
        source: std::io::Error,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("cannot start")]
    struct Quiet {
        source: std::io::Error,
    }

    #[test]
    fn each_cause_is_said_once() {
        let io = || std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        // A cause already in its error's text is not repeated; context is kept.
        let e = anyhow::Error::new(Says { path: "/ca/ca.pem", source: io() }).context("loading the CA");
        assert_eq!(report(&e), "loading the CA: cannot read /ca/ca.pem: no such file");
        // A cause its error does not show is added.
        let e = anyhow::Error::new(Quiet { source: io() });
        assert_eq!(report(&e), "cannot start: no such file");
    }
}
