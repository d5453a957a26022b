//! robots.txt bodies kept by SHA-256 (`<sha256>.txt` in the snapshot folder), so every
//! decision can be checked again against the exact file it used.

use std::io;
use std::path::{Path, PathBuf};

/// Where the body with this SHA-256 is kept.
pub fn snapshot_path(dir: &Path, sha256_hex: &str) -> PathBuf {
    dir.join(format!("{sha256_hex}.txt"))
}

/// Keeps a robots.txt body in `dir` as `<sha256>.txt`, once: a body kept already is left
/// as it is.
pub(super) fn keep(dir: &Path, sha256: &str, body: &[u8]) -> io::Result<()> {
    let path = snapshot_path(dir, sha256);
    if std::fs::metadata(&path).is_ok() {
        return Ok(());
    }
    // Write to a temporary name, then rename: a snapshot is whole or absent.
    let tmp = dir.join(format!(".{sha256}.{:x}.tmp", std::process::id()));
    std::fs::write(&tmp, body)?;
    std::fs::rename(&tmp, &path)
}
