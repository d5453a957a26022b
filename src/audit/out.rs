//! Where records go: a file, standard output or memory. Whoever holds the log's write
//! turn (see `commit`) writes whole batches of lines here with plain `write(2)` calls:
//! they only copy into the page cache, and a hop to tokio's blocking pool for each batch
//! (what `tokio::fs` does) cost more than the write itself under load.

use std::fs::File;
use std::io::{self, Write};

use super::config::MemoryLog;

/// Where records go.
pub(super) enum Out {
    /// A JSON Lines file, opened for appending.
    File(File),
    /// Standard output.
    Stdout,
    /// Memory.
    Memory(MemoryLog),
}

impl Out {
    /// Writes `bytes` (whole lines, each with its newline), retrying short writes.
    /// Returns how many bytes reached the operating system, and the error that stopped it
    /// short, if any: a write that stops partway leaves part of a line in the file, which
    /// the next write must end (see `commit::Trouble`).
    pub(super) fn write(&mut self, bytes: &[u8]) -> (usize, Option<io::Error>) {
        match self {
            Out::File(f) => write_counting(f, bytes),
            Out::Stdout => {
                let mut out = io::stdout().lock();
                let (n, e) = write_counting(&mut out, bytes);
                match (e, out.flush()) {
                    (Some(e), _) | (None, Err(e)) => (n, Some(e)),
                    (None, Ok(())) => (n, None),
                }
            }
            Out::Memory(m) => {
                for line in bytes.split_inclusive(|&b| b == b'\n') {
                    m.push(String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line)).into_owned());
                }
                (bytes.len(), None)
            }
        }
    }

    /// A second handle on the file, for syncing it while batches are being written
    /// (`None` for standard output and memory, which have nothing to sync).
    pub(super) fn sync_handle(&self) -> Option<File> {
        match self {
            Out::File(f) => f.try_clone().ok(),
            _ => None,
        }
    }
}

/// `write_all`, counting the bytes written before an error.
fn write_counting(w: &mut impl Write, bytes: &[u8]) -> (usize, Option<io::Error>) {
    let mut done = 0;
    while done < bytes.len() {
        match w.write(&bytes[done..]) {
            Ok(0) => return (done, Some(io::Error::from(io::ErrorKind::WriteZero))),
            Ok(n) => done += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (done, Some(e)),
        }
    }
    (done, None)
}
