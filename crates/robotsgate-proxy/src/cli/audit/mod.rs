//! `robotsgate audit`: the compliance tools over the audit log. `keygen` makes the key that
//! signs checkpoints; `verify` checks a log against its checkpoints; `prove` and
//! `verify-proof` hand one decision to a third party with the proof that it is in the
//! log; `explain` says why a request was decided as it was; `report` writes a
//! self-contained HTML report.

mod explain;
mod explain_ingress;
mod keygen;
mod report;
mod verify;

use std::fs::File;
use std::io::{BufRead, BufReader, IsTerminal};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, Subcommand};

use robotsgate::audit::note::Verifier;
use robotsgate::audit::verify::LogFile;
use robotsgate::audit::{checkpoints_path, rotated_files};

#[derive(Debug, Args)]
pub struct AuditArgs {
    #[command(subcommand)]
    command: AuditCommand,
}

#[derive(Debug, Subcommand)]
enum AuditCommand {
    /// Make the key that signs checkpoints: DIR/audit-signing.key (secret, 0600; for
    /// [audit] signing_key) and DIR/audit-signing.pub (for reviewers).
    Keygen(keygen::KeygenArgs),
    /// Check log files against their checkpoints: exit 0 when nothing covered by a
    /// checkpoint was changed, inserted, removed, reordered or cut off; 1 naming the first
    /// line that was.
    Verify(verify::VerifyArgs),
    /// Print one decision with the proof that it is in the log (JSON), for a third party.
    Prove(verify::ProveArgs),
    /// Check a proof made by `prove` with the log's public key alone.
    VerifyProof(verify::VerifyProofArgs),
    /// Why a request was decided as it was: the decision, the robots.txt it rested on and
    /// the deciding rule's line in it.
    Explain(explain::ExplainArgs),
    /// Write a self-contained HTML report of log files (totals, decisions over time, the
    /// origins and rules that refused most, fetch failures, whether the log verified).
    Report(report::ReportArgs),
}

/// The log files to read, and how to check them (`verify`, `report`).
#[derive(Debug, Args)]
struct LogSet {
    /// The log files (the active file and those closed by rotation, in any order); each
    /// one's checkpoints are read from FILE.checkpoints beside it.
    #[arg(required = true, value_name = "LOG")]
    logs: Vec<PathBuf>,
    /// The public key checkpoints must be signed with (audit-signing.pub); give it again
    /// for each key the log was signed with (after a key change, each checkpoint must be
    /// signed by one of them). Without it, signatures are not checked, and the output says
    /// so.
    #[arg(long = "key", value_name = "PUB")]
    keys: Vec<PathBuf>,
    /// Also read the files closed by rotation beside each LOG.
    #[arg(long)]
    with_rotated: bool,
    /// The files are a part of the log: do not require the files before the first or
    /// after the last (archived, or not yet written).
    #[arg(long)]
    partial: bool,
}

/// Exit status: the log (or proof) did not verify.
const EXIT_FAILED: u8 = 1;

pub fn run(args: AuditArgs) -> anyhow::Result<ExitCode> {
    match args.command {
        AuditCommand::Keygen(a) => keygen::run(a),
        AuditCommand::Verify(a) => verify::run_verify(a),
        AuditCommand::Prove(a) => verify::run_prove(a),
        AuditCommand::VerifyProof(a) => verify::run_verify_proof(a),
        AuditCommand::Explain(a) => explain::run(a),
        AuditCommand::Report(a) => report::run(a),
    }
}

/// Reads a public key file (`audit-signing.pub`).
fn read_key(path: &Path) -> anyhow::Result<Verifier> {
    let text = std::fs::read_to_string(path).with_context(|| format!("--key {}", path.display()))?;
    Verifier::parse(&text).with_context(|| format!("--key {}", path.display()))
}

/// Reads every `--key`, and names them for the output (`None` without any).
fn read_keys(paths: &[PathBuf]) -> anyhow::Result<(Vec<Verifier>, Option<String>)> {
    let keys = paths.iter().map(|p| read_key(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let names =
        (!keys.is_empty()).then(|| keys.iter().map(Verifier::to_text).collect::<Vec<_>>().join(" or "));
    Ok((keys, names))
}

/// The files to read: the ones named, and with `with_rotated`, the files closed by
/// rotation beside each (each once).
fn log_paths(logs: &[PathBuf], with_rotated: bool) -> anyhow::Result<Vec<PathBuf>> {
    let mut out: Vec<PathBuf> = Vec::new();
    for log in logs {
        if with_rotated {
            for r in
                rotated_files(log).with_context(|| format!("listing the files beside {}", log.display()))?
            {
                if !out.contains(&r) {
                    out.push(r);
                }
            }
        }
        if !out.contains(log) {
            out.push(log.clone());
        }
    }
    Ok(out)
}

/// Opens a log file and its checkpoint file (if there is one).
fn open_log(path: &Path) -> anyhow::Result<LogFile> {
    let log = File::open(path).with_context(|| format!("cannot open {}", path.display()))?;
    let checkpoints = match File::open(checkpoints_path(path)) {
        Ok(f) => Some(Box::new(BufReader::new(f)) as Box<dyn BufRead>),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(e).with_context(|| format!("cannot open {}", checkpoints_path(path).display())),
    };
    Ok(LogFile {
        name: path.display().to_string(),
        log: Box::new(BufReader::with_capacity(256 * 1024, log)),
        checkpoints,
    })
}

/// A progress bar over `total` bytes on a terminal (stderr), hidden otherwise.
fn progress_bar(total: u64, what: &str) -> indicatif::ProgressBar {
    if !std::io::stderr().is_terminal() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total);
    let style = indicatif::ProgressStyle::with_template(
        "{msg} [{bar:40}] {bytes}/{total_bytes} ({bytes_per_sec}, {eta} left)",
    )
    .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar())
    .progress_chars("=> ");
    bar.set_style(style);
    bar.set_message(what.to_owned());
    bar
}

/// The total size of `paths`.
fn total_bytes(paths: &[PathBuf]) -> u64 {
    paths.iter().filter_map(|p| std::fs::metadata(p).ok()).map(|m| m.len()).sum()
}
