//! `robotsgate audit verify`, `prove` and `verify-proof`.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use super::{EXIT_FAILED, LogSet, log_paths, open_log, progress_bar, read_key, total_bytes};
use robotsgate::audit::checkpoints_path;
use robotsgate::audit::proof::{Proof, prove};
use robotsgate::audit::verify::{Options, Signatures, Verification, Watch, read_checkpoints, verify};

#[derive(Debug, Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    set: LogSet,
}

/// Counts bytes for the progress bar.
struct Progress(indicatif::ProgressBar);

impl Watch for Progress {
    fn progress(&mut self, bytes: u64) {
        self.0.inc(bytes);
    }
}

pub fn run_verify(args: VerifyArgs) -> anyhow::Result<ExitCode> {
    let args = args.set;
    let (keys, key_names) = super::read_keys(&args.keys)?;
    let paths = log_paths(&args.logs, args.with_rotated)?;
    let files = paths.iter().map(|p| open_log(p)).collect::<anyhow::Result<Vec<_>>>()?;
    let bar = progress_bar(total_bytes(&paths), "verifying");
    let options = Options { keys: &keys, partial: args.partial };
    let v = verify(files, &options, &mut Progress(bar.clone()));
    bar.finish_and_clear();
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(describe(&v, key_names).as_bytes());
    if let Some(e) = &v.error {
        bail!("{e}");
    }
    Ok(if v.ok() && !nothing_verified(&v) { ExitCode::SUCCESS } else { ExitCode::from(EXIT_FAILED) })
}

/// No checkpoint covers any record: nothing could be verified (exit 1).
pub fn nothing_verified(v: &Verification) -> bool {
    v.checkpoints == 0 && v.leaves > 0
}

/// The report of a verification, in words: what was checked, what was found, and what it
/// cannot show.
pub fn describe(v: &Verification, key: Option<String>) -> String {
    let mut s = String::new();
    let files = v.files.len();
    if let Some(p) = &v.problem {
        s.push_str(&format!("FAILED: {p}\n"));
        s.push_str(
            "The log is not as it was written: this line, or something near it, was edited, added, \
             removed or reordered after robotsgate wrote it (or the file was damaged).\n",
        );
        if files > 0 {
            s.push_str("Files checked whole before it:\n");
        }
        for f in &v.files {
            s.push_str(&format!("  {}: {} lines, {} checkpoints\n", f.name, f.lines, f.checkpoints));
        }
        return s;
    }
    s.push_str(&format!(
        "{files} file{}, {} records, {} checkpoint{} checked\n",
        if files == 1 { "" } else { "s" },
        v.leaves,
        v.checkpoints,
        if v.checkpoints == 1 { "" } else { "s" }
    ));
    for f in &v.files {
        s.push_str(&format!(
            "  {}: records {}..{} ({} lines), {} checkpoint{}{}\n",
            f.name,
            f.first_leaf,
            f.first_leaf + f.lines.max(1) - 1,
            f.lines,
            f.checkpoints,
            if f.checkpoints == 1 { "" } else { "s" },
            if f.rotated { ", closed by rotation" } else { "" }
        ));
    }
    if let Some(e) = &v.error {
        s.push_str(&format!("\nCould not read everything: {e}\n"));
        return s;
    }
    s.push_str(&match v.signatures {
        Signatures::Verified => format!("signatures: every checkpoint is signed by {}\n", key.unwrap_or_default()),
        Signatures::NotChecked => {
            "signatures: the checkpoints are signed, but no --key was given: the signatures were NOT checked\n".into()
        }
        Signatures::Unsigned => {
            "signatures: the checkpoints are NOT signed (no [audit] signing_key): they show accidental damage and \
             edits by someone who did not also rewrite the checkpoint files, nothing more\n"
                .into()
        }
        Signatures::NoCheckpoints => "signatures: there are no checkpoints\n".into(),
    });
    match &v.last_checkpoint_time {
        Some(t) => s.push_str(&format!(
            "covered: records 0..{} (the last checkpoint, {t})\n",
            v.covered.saturating_sub(1)
        )),
        None => s.push_str("covered: nothing (no checkpoint)\n"),
    }
    for (file, from, to) in &v.uncovered {
        s.push_str(&format!(
            "not yet covered: {file} lines {from}..{to} (after the last checkpoint; the next one comes within \
             audit.checkpoint_interval): they cannot be checked yet\n"
        ));
    }
    for n in &v.notes {
        s.push_str(&format!("note: {n}\n"));
    }
    if nothing_verified(v) {
        s.push_str(
            "\nNOT VERIFIED: no checkpoint covers any record (checkpoints are off, none was written yet, or \
             the checkpoint files were removed): nothing could be checked.\n",
        );
        return s;
    }
    s.push_str(
        "\nOK: no record covered by a checkpoint was changed, inserted, removed, reordered or cut off.\n\
         What this cannot show: changes to records after the last checkpoint; that the records are true \
         (only that they are as robotsgate wrote them)",
    );
    if v.signatures != Signatures::Verified {
        s.push_str(
            "; and, without signatures checked against your copy of the public key, that the log and its \
             checkpoints were not rewritten together",
        );
    }
    s.push_str(".\n");
    s
}

#[derive(Debug, Args)]
pub struct ProveArgs {
    /// The log file holding the record (its checkpoints are read from LOG.checkpoints).
    #[arg(value_name = "LOG")]
    log: PathBuf,
    /// The decision's request_id.
    #[arg(value_name = "REQUEST_ID")]
    request_id: String,
    /// Write the proof here instead of standard output.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
}

pub fn run_prove(args: ProveArgs) -> anyhow::Result<ExitCode> {
    let checkpoints = match File::open(checkpoints_path(&args.log)) {
        Ok(f) => read_checkpoints(BufReader::new(f))
            .with_context(|| format!("{}", checkpoints_path(&args.log).display()))?,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Vec::new(),
        Err(e) => return Err(e).context(format!("{}", checkpoints_path(&args.log).display())),
    };
    let path = args.log.clone();
    let open =
        move || -> std::io::Result<Box<dyn BufRead>> { Ok(Box::new(BufReader::new(File::open(&path)?))) };
    let id = args.request_id.clone();
    let needle = format!("\"request_id\":{}", serde_json::to_string(&id).unwrap_or_default());
    let matches = move |line: &[u8]| -> bool {
        if memchr::memmem::find(line, needle.as_bytes()).is_none() {
            return false;
        }
        #[derive(serde::Deserialize)]
        struct R<'a> {
            #[serde(rename = "type", borrow)]
            kind: &'a str,
            #[serde(borrow)]
            request_id: &'a str,
        }
        serde_json::from_slice::<R<'_>>(line).is_ok_and(|r| r.kind == "decision" && r.request_id == id)
    };
    let name = args.log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let proof = prove(&name, &open, &checkpoints, &matches)
        .with_context(|| format!("{} {}", args.log.display(), args.request_id))?;
    let mut text = serde_json::to_string_pretty(&proof)?;
    text.push('\n');
    match &args.out {
        Some(p) => std::fs::write(p, text).with_context(|| format!("cannot write {}", p.display()))?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    if !proof.checkpoint.contains("\n\n— ") {
        eprintln!(
            "robotsgate: note: the checkpoint is not signed ([audit] signing_key): the proof shows consistency only"
        );
    }
    Ok(ExitCode::SUCCESS)
}

#[derive(Debug, Args)]
pub struct VerifyProofArgs {
    /// The proof file made by `robotsgate audit prove`.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// The log's public key (audit-signing.pub).
    #[arg(long, value_name = "PUB", required_unless_present = "unsigned")]
    key: Option<PathBuf>,
    /// Accept a checkpoint that is not signed (it then proves nothing to a third party).
    #[arg(long, conflicts_with = "key")]
    unsigned: bool,
}

pub fn run_verify_proof(args: VerifyProofArgs) -> anyhow::Result<ExitCode> {
    let key = args.key.as_deref().map(read_key).transpose()?;
    let text = std::fs::read_to_string(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let proof: Proof = match serde_json::from_str(&text) {
        Ok(p) => p,
        Err(e) => {
            println!("FAILED: {} is not a proof: {e}", args.file.display());
            return Ok(ExitCode::from(EXIT_FAILED));
        }
    };
    match proof.verify(key.as_ref()) {
        Ok(cp) => {
            #[derive(serde::Deserialize, Default)]
            #[serde(default)]
            struct R {
                #[serde(rename = "type")]
                kind: String,
                time: String,
                request_id: String,
                method: String,
                url: String,
                outcome: String,
                reason: String,
                explanation: String,
                agent: String,
            }
            let r: R = serde_json::from_str(&proof.record).unwrap_or_default();
            // What the record says: a decision's fields, else its type and the record
            // itself (any line of the log can be proven).
            let says = match r.kind.as_str() {
                "decision" => format!(
                    "{}: {} {} at {} (request {}), product token {}; {}: {}",
                    r.outcome, r.method, r.url, r.time, r.request_id, r.agent, r.reason, r.explanation
                ),
                "" => format!("a line that is not a record: {}", proof.record),
                kind => format!("{kind} record: {}", proof.record),
            };
            let says = crate::cli::for_terminal(&says);
            println!(
                "OK: the record is record {} of the log {:?}, in its checkpoint of {} records ({}){}.\n{says}",
                proof.leaf_index,
                cp.origin,
                cp.size,
                cp.time.as_deref().unwrap_or("no time"),
                match &key {
                    Some(k) => format!(", signed by {}", k.to_text()),
                    None => ", NOT signed: this shows consistency, not who wrote it".into(),
                },
            );
            Ok(ExitCode::SUCCESS)
        }
        Err(e) => {
            println!("FAILED: {e}");
            Ok(ExitCode::from(EXIT_FAILED))
        }
    }
}
