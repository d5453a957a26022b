//! `robotsgate audit keygen`: the Ed25519 key that signs the audit log's checkpoints.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::Args;

use robotsgate::audit::note::Signer;

/// The private key's file name.
pub const KEY_FILE: &str = "audit-signing.key";
/// The public key's file name.
pub const PUB_FILE: &str = "audit-signing.pub";

#[derive(Debug, Args)]
pub struct KeygenArgs {
    /// Where to put the key files.
    #[arg(long, value_name = "DIR")]
    dir: PathBuf,
    /// The key's name, in signatures and in the public key (no spaces or '+').
    #[arg(long, default_value = "robotsgate-audit")]
    name: String,
    /// Replace existing key files (checkpoints signed before stay verifiable with the old
    /// public key only).
    #[arg(long)]
    force: bool,
}

pub fn run(args: KeygenArgs) -> anyhow::Result<ExitCode> {
    let key_path = args.dir.join(KEY_FILE);
    let pub_path = args.dir.join(PUB_FILE);
    if !args.force && (key_path.exists() || pub_path.exists()) {
        bail!("{} already holds a signing key; pass --force to replace it", args.dir.display());
    }
    let signer = Signer::generate(&args.name).context("--name")?;
    std::fs::create_dir_all(&args.dir).with_context(|| format!("cannot create {}", args.dir.display()))?;
    write_file(&key_path, format!("{}\n", signer.to_text()).as_bytes(), 0o600)?;
    let public = signer.verifier().to_text();
    write_file(&pub_path, format!("{public}\n").as_bytes(), 0o644)?;
    println!(
        "Created {key} (secret: whoever has it can sign checkpoints of a rewritten log)\n    \
         and {pubk} (give it to reviewers; it is {public}).\n\n\
         Sign the audit log's checkpoints with it:\n    [audit]\n    signing_key = \"{key}\"\n\n\
         Reviewers check a log with:\n    robotsgate audit verify --key {pubk} audit.jsonl",
        key = key_path.display(),
        pubk = pub_path.display(),
    );
    Ok(ExitCode::SUCCESS)
}

/// Writes `data` to `path` with `mode` (on Unix, set when the file is made: the secret is
/// never readable by others, even for a moment).
fn write_file(path: &Path, data: &[u8], mode: u32) -> anyhow::Result<()> {
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
        options.mode(mode);
        let mut f = options.open(path).with_context(|| format!("cannot write {}", path.display()))?;
        // An existing file (--force) keeps its mode: set it.
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        f.write_all(data).with_context(|| format!("cannot write {}", path.display()))?;
        f.sync_all()?;
    }
    #[cfg(not(unix))]
    {
        let _ = mode;
        let mut f = options.open(path).with_context(|| format!("cannot write {}", path.display()))?;
        f.write_all(data).with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}
