//! robots.txt bodies kept by SHA-256 (`<sha256>.txt` in the snapshot folder), so every
//! decision can be checked again against the exact file it used.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Where the body with this SHA-256 is kept.
pub fn snapshot_path(dir: &Path, sha256_hex: &str) -> PathBuf {
    dir.join(format!("{sha256_hex}.txt"))
}

/// Keeps a robots.txt body in `dir` as `<sha256>.txt`, once: a body kept already is left
/// as it is.
///
/// Written to a temporary name of its own, then renamed: a snapshot is whole or absent,
/// and writers of the same body at once (two origins serving the same file, fetched
/// together; two processes sharing the folder) each rename a whole copy of it.
pub(super) fn keep(dir: &Path, sha256: &str, body: &[u8]) -> io::Result<()> {
    /// Tells apart the temporary files of one process' writers.
    static WRITES: AtomicU64 = AtomicU64::new(0);
    let path = snapshot_path(dir, sha256);
    if std::fs::metadata(&path).is_ok() {
        return Ok(());
    }
    let n = WRITES.fetch_add(1, Ordering::Relaxed);
    let tmp = dir.join(format!(".{sha256}.{:x}.{n:x}.tmp", std::process::id()));
    let kept = std::fs::write(&tmp, body).and_then(|()| std::fs::rename(&tmp, &path));
    if kept.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same body kept by many threads at once (as when two origins serve one file):
    /// every keep succeeds, one whole file is left and no temporary one (a shared
    /// temporary name made the late renames fail, and the audit log with them).
    #[test]
    fn the_same_body_kept_at_once_by_many_writers_is_kept_once_whole() {
        let body = b"User-agent: *\nCrawl-delay: 0.4\n".repeat(4096);
        let sha = "ab".repeat(32);
        for _ in 0..20 {
            let dir = tempfile::tempdir().unwrap();
            let start = std::sync::Barrier::new(8);
            std::thread::scope(|s| {
                let writers: Vec<_> = (0..8)
                    .map(|_| {
                        s.spawn(|| {
                            start.wait();
                            keep(dir.path(), &sha, &body)
                        })
                    })
                    .collect();
                for w in writers {
                    w.join().unwrap().unwrap();
                }
            });
            assert_eq!(std::fs::read(snapshot_path(dir.path(), &sha)).unwrap(), body);
            let names: Vec<_> =
                std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
            assert_eq!(names.len(), 1, "{names:?}");
        }
    }
}
