//! Where the writer task puts records: a file, standard output or memory.

use std::io;

use serde::Serialize;
use tokio::io::AsyncWriteExt;

use super::config::MemoryLog;
use super::record::to_line;

/// Where records go. A file is written with plain `write(2)` calls from the writer task:
/// they only copy into the page cache, and a hop to tokio's blocking pool for each batch
/// (what `tokio::fs` does) cost more than the write itself under load. Only the durable
/// flush (`fdatasync`) runs on the blocking pool.
pub(super) enum Out {
    /// A JSON Lines file, appended to.
    File(std::io::BufWriter<std::fs::File>),
    /// Standard output.
    Stdout(tokio::io::BufWriter<tokio::io::Stdout>),
    /// Memory.
    Memory(MemoryLog),
}

impl Out {
    /// Writes one line (with its newline).
    pub(super) async fn write(&mut self, line: &[u8]) -> io::Result<()> {
        match self {
            Out::File(w) => std::io::Write::write_all(w, line),
            Out::Stdout(w) => w.write_all(line).await,
            Out::Memory(m) => {
                m.push(String::from_utf8_lossy(line.strip_suffix(b"\n").unwrap_or(line)).into_owned());
                Ok(())
            }
        }
    }

    /// Serialises one record as a line, straight into the file's buffer.
    pub(super) async fn write_record<T: Serialize>(&mut self, record: &T) -> io::Result<()> {
        match self {
            Out::File(w) => {
                serde_json::to_writer(&mut *w, record).map_err(io::Error::other)?;
                std::io::Write::write_all(w, b"\n")
            }
            _ => self.write(&to_line(record)).await,
        }
    }

    /// Hands buffered records to the operating system; `durable` also waits for the disk.
    pub(super) async fn flush(&mut self, durable: bool) -> io::Result<()> {
        match self {
            Out::File(w) => {
                std::io::Write::flush(w)?;
                if durable {
                    let file = w.get_ref().try_clone()?;
                    tokio::task::spawn_blocking(move || file.sync_data()).await.map_err(io::Error::other)?
                } else {
                    Ok(())
                }
            }
            Out::Stdout(w) => w.flush().await,
            Out::Memory(_) => Ok(()),
        }
    }
}
