//! How the audit log is set up: where records go ([`Target`]), what a write failure does
//! ([`OnError`]), the in-memory log, and the errors of setting up and of writing.

use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::note::Signer;

/// Where records go.
#[derive(Debug, Clone)]
pub enum Target {
    /// Append to a JSON Lines file.
    File(PathBuf),
    /// Standard output.
    Stdout,
    /// Kept in memory (tests, embedding).
    Memory(MemoryLog),
}

/// What to do when the log cannot be written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnError {
    /// Refuse requests while the log is broken (fail closed).
    #[default]
    Refuse,
    /// Go on; count the records lost.
    Continue,
}

/// When a request may be answered, relative to its record reaching the log.
///
/// Records of requests waiting at the same moment share one write (group commit): the
/// first request to find no write under way leads it, after letting the records of that
/// moment (from every worker thread) join; the others wait for that write to complete.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The record has been handed to the operating system (`write(2)` done) before the
    /// request goes on: every answered request has its record even if the process is
    /// killed. Not proof against power loss (the page cache).
    #[default]
    Written,
    /// As `Written`, and the file's data has also been synced to disk (`fdatasync`,
    /// shared by the records of a moment): proof against power loss too.
    Synced,
    /// Records are collected for up to 10 ms and written together, and requests do not
    /// wait for them: a crash loses the records of those milliseconds (the behaviour
    /// before durability was configurable).
    Buffered,
}

impl Durability {
    /// `written`, `synced` or `buffered`.
    pub fn as_str(self) -> &'static str {
        match self {
            Durability::Written => "written",
            Durability::Synced => "synced",
            Durability::Buffered => "buffered",
        }
    }
}

/// How the audit log is written.
#[derive(Debug, Clone)]
pub struct AuditConfig {
    /// Where decision and fetch records go.
    pub target: Target,
    /// Folder for robots.txt bodies, named by their SHA-256 (none: not kept).
    pub snapshots: Option<PathBuf>,
    /// When a request may be answered relative to its record ([`Durability`]).
    pub durability: Durability,
    /// `Buffered`: records waiting to be written before requests wait for room.
    pub queue: usize,
    /// Behaviour when writing fails.
    pub on_error: OnError,
    /// Replace query strings in logged URLs by `?<redacted>`.
    pub redact_query: bool,
    /// Tamper evidence (a file target): a signed checkpoint of the Merkle tree over every
    /// line after this many records (0: not by count; either way, at least every
    /// [`MAX_CHECKPOINT_LEAVES`](super::MAX_CHECKPOINT_LEAVES))...
    pub checkpoint_every: u64,
    /// ... and after this long, if records came (none: not by time). With neither, the
    /// log keeps no tree and writes no checkpoints.
    pub checkpoint_interval: Option<Duration>,
    /// Signs checkpoints (none: they are written unsigned).
    pub signing_key: Option<Arc<Signer>>,
    /// Rotation (a file target): the file is closed and renamed once it reaches this
    /// size (0: not by size)...
    pub rotate_size: u64,
    /// ... or once it has been open this long (none: not by time).
    pub rotate_interval: Option<Duration>,
}

impl AuditConfig {
    /// Whether the log keeps a Merkle tree and writes checkpoints.
    pub fn tamper_evident(&self) -> bool {
        self.checkpoint_every > 0 || self.checkpoint_interval.is_some()
    }
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            target: Target::Stdout,
            snapshots: None,
            durability: Durability::Written,
            queue: 4096,
            on_error: OnError::Refuse,
            redact_query: false,
            checkpoint_every: 1000,
            checkpoint_interval: Some(Duration::from_secs(10)),
            signing_key: None,
            rotate_size: 1 << 30,
            rotate_interval: None,
        }
    }
}

/// Records kept in memory.
#[derive(Debug, Clone, Default)]
pub struct MemoryLog(Arc<Mutex<Vec<String>>>);

impl MemoryLog {
    /// The JSON lines written so far.
    pub fn lines(&self) -> Vec<String> {
        match self.0.lock() {
            Ok(v) => v.clone(),
            Err(p) => p.into_inner().clone(),
        }
    }

    pub(super) fn push(&self, line: String) {
        match self.0.lock() {
            Ok(mut v) => v.push(line),
            Err(p) => p.into_inner().push(line),
        }
    }
}

/// The log is not accepting records.
#[derive(Debug, Clone, thiserror::Error)]
pub enum AuditError {
    /// Writing failed and the log is configured to fail closed.
    #[error("the audit log cannot be written: {0}")]
    Broken(String),
    /// The log was shut down.
    #[error("the audit log is shut down")]
    Closed,
}

/// A problem setting the log up.
#[derive(Debug, thiserror::Error)]
pub enum AuditSetupError {
    /// The log file cannot be opened for appending.
    #[error("cannot open audit log {path}: {source}")]
    Open {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// The audit thread cannot be started.
    #[error("cannot start the audit thread: {0}")]
    Thread(io::Error),
    /// The snapshot folder cannot be created.
    #[error("cannot create snapshot folder {path}: {source}")]
    Snapshots {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
}
