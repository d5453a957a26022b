//! The audit thread's side of tamper evidence: every line written to the log file becomes
//! a leaf of the Merkle tree ([`merkle`](super::merkle)), hashed here, off the requests'
//! path, from the batches the group commit wrote; every `checkpoint_every` leaves, every
//! `checkpoint_interval`, at rotation and at shutdown, a signed checkpoint goes to the
//! checkpoint file beside the log.

use std::fs::{File, OpenOptions};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use super::files::{checkpoints_path, last_line};
use super::lines::LogFields;
use super::merkle::{Frontier, Hash, LeafHasher};
use super::note::{Checkpoint, Signer};
use super::record::{LogEvent, LogRecord};
use super::sidecar::{CheckpointLine, MAX_CHECKPOINT_LEAVES, MAX_CHECKPOINT_LINE, index_entry};
use super::timestamp::rfc3339;

/// When checkpoints are made, and how they are signed.
#[derive(Clone)]
pub(super) struct TreeConfig {
    /// After this many leaves (0: not by count).
    pub(super) every: u64,
    /// After this long, if leaves came (none: not by time).
    pub(super) interval: Option<Duration>,
    pub(super) signer: Option<Arc<Signer>>,
    /// Sync the checkpoint file after each checkpoint (`Durability::Synced`).
    pub(super) sync: bool,
}

impl TreeConfig {
    /// Leaves after which a checkpoint is made: `every`, and never more than
    /// [`MAX_CHECKPOINT_LEAVES`] (`every` 0, by time only, included).
    fn every(&self) -> u64 {
        match self.every {
            0 => MAX_CHECKPOINT_LEAVES,
            n => n.min(MAX_CHECKPOINT_LEAVES),
        }
    }
}

/// The tree as the writer builds it, and the active file's place in it.
pub(super) struct TreeWriter {
    config: TreeConfig,
    /// The checkpoints' first line: names the log.
    origin: String,
    frontier: Frontier,
    /// A line whose end has not been written yet (after a short write).
    partial: Option<LeafHasher>,
    partial_bytes: u64,
    /// Whole lines and their bytes in the active file.
    file_lines: u64,
    file_bytes: u64,
    /// Index of the leaves since the last checkpoint (or the file's start).
    leaves_from: u64,
    index: Vec<u8>,
    last_size: u64,
    last_at: Instant,
    sidecar_path: PathBuf,
    sidecar: File,
}

/// Where the tree stands at the end of a file: what the next file's `file-start` says.
pub(super) struct Continuation {
    pub(super) frontier: Frontier,
    pub(super) previous_file: Option<String>,
}

impl Continuation {
    /// The `file-start` record of a file that continues the tree from here.
    pub(super) fn record(&self) -> LogRecord {
        LogRecord::now(LogEvent::FileStart {
            tree_size: self.frontier.size(),
            root: hex::encode(self.frontier.root()),
            frontier: self.frontier.hashes().iter().map(hex::encode).collect(),
            previous_file: self.previous_file.clone(),
        })
    }

    /// The start of a new log: the empty tree.
    pub(super) fn empty() -> Continuation {
        Continuation { frontier: Frontier::new(), previous_file: None }
    }

    /// Where the last file closed by rotation left the tree (its last checkpoint, made at
    /// rotation), for an active file started anew (the process stopped between closing a
    /// file and starting the next, or the active file was removed). `None` without one.
    pub(super) fn after(rotated: &Path) -> Option<Continuation> {
        let line = last_line(&checkpoints_path(rotated), MAX_CHECKPOINT_LINE as u64).ok()??;
        let cp: CheckpointLine = serde_json::from_slice(&line).ok()?;
        let frontier = Frontier::from_hashes(cp.tree_size, &cp.frontier_hashes()?)?;
        (hex::encode(frontier.root()) == cp.root && cp.reason == "rotation").then(|| Continuation {
            frontier,
            previous_file: rotated.file_name().map(|n| n.to_string_lossy().into_owned()),
        })
    }
}

/// What reading an existing file found that does not match its checkpoints (logged as an
/// error: `verify` says exactly what).
pub(super) type Warnings = Vec<String>;

impl TreeWriter {
    /// The tree for the active file `log`, of which the first `len` bytes are already
    /// written: they are hashed again (from the tree stated by its `file-start` record, or
    /// from the empty tree for a file without one), and the checkpoint file is read for
    /// where the last checkpoint was.
    pub(super) fn resume(log: &Path, len: u64, config: TreeConfig) -> io::Result<(TreeWriter, Warnings)> {
        let mut warnings = Vec::new();
        let sidecar_path = checkpoints_path(log);
        let last: Option<CheckpointLine> = match last_line(&sidecar_path, MAX_CHECKPOINT_LINE as u64)? {
            Some(line) => match serde_json::from_slice(&line) {
                Ok(cp) => Some(cp),
                Err(e) => {
                    warnings.push(format!(
                        "the last line of {} is not a checkpoint ({e})",
                        sidecar_path.display()
                    ));
                    None
                }
            },
            None => None,
        };
        let sidecar = OpenOptions::new().create(true).append(true).open(&sidecar_path)?;
        let mut tree = TreeWriter {
            config,
            origin: origin_of(log),
            frontier: Frontier::new(),
            partial: None,
            partial_bytes: 0,
            file_lines: 0,
            file_bytes: 0,
            leaves_from: 0,
            index: Vec::new(),
            last_size: 0,
            last_at: Instant::now(),
            sidecar_path,
            sidecar,
        };
        let mut reader = BufReader::with_capacity(256 * 1024, File::open(log)?.take(len));
        let mut line = Vec::new();
        let mut first = true;
        loop {
            line.clear();
            let n = reader.read_until(b'\n', &mut line)?;
            if n == 0 {
                break;
            }
            if line.last() != Some(&b'\n') {
                // Only what follows the last newline: the next batch ends it.
                tree.partial_bytes = line.len() as u64;
                let mut h = LeafHasher::new();
                h.update(&line);
                tree.partial = Some(h);
                tree.file_bytes += line.len() as u64;
                break;
            }
            let content = &line[..line.len() - 1];
            if first {
                first = false;
                if let Some(fields) = LogFields::of(content).filter(|f| f.event == "file-start") {
                    match fields.start_frontier() {
                        Some(f) => tree.frontier = f,
                        None => warnings.push(format!(
                            "the file-start record of {} is not consistent (its subtrees do not give its root, or its tree size is past any log's): its tree is taken to start at 0; run robotsgate audit verify",
                            log.display()
                        )),
                    }
                }
                tree.leaves_from = tree.frontier.size();
                tree.last_size = tree.frontier.size();
            }
            tree.leaf(&super::merkle::leaf_hash(content), line.len() as u64);
            if let Some(cp) = &last
                && cp.tree_size == tree.frontier.size()
            {
                if cp.root != hex::encode(tree.frontier.root()) || cp.file_lines != tree.file_lines {
                    warnings.push(format!(
                        "{} does not match its last checkpoint (tree size {}); run robotsgate audit verify",
                        log.display(),
                        cp.tree_size
                    ));
                } else {
                    // The index goes on from the last checkpoint.
                    tree.leaves_from = cp.tree_size;
                    tree.index.clear();
                    tree.last_size = cp.tree_size;
                }
            }
        }
        if let Some(cp) = &last
            && cp.tree_size > tree.frontier.size()
        {
            warnings.push(format!(
                "{} is shorter than its last checkpoint says ({} leaves, the checkpoint covers {}); run robotsgate audit verify",
                log.display(),
                tree.frontier.size(),
                cp.tree_size
            ));
        }
        Ok((tree, warnings))
    }

    /// Adds one whole line's leaf (its `bytes` with the newline) to the tree and the index.
    fn leaf(&mut self, h: &Hash, bytes: u64) {
        self.frontier.push(*h);
        self.index.extend_from_slice(&index_entry(h));
        self.file_lines += 1;
        self.file_bytes += bytes;
    }

    /// Hashes bytes just written to the active file (whole lines, but for a short write),
    /// checkpointing every `every` leaves.
    pub(super) fn feed(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut rest = bytes;
        while !rest.is_empty() {
            match memchr::memchr(b'\n', rest) {
                Some(i) => {
                    let (content, after) = (&rest[..i], &rest[i + 1..]);
                    let h = match self.partial.take() {
                        Some(mut p) => {
                            p.update(content);
                            p.finish()
                        }
                        None => super::merkle::leaf_hash(content),
                    };
                    let bytes = std::mem::take(&mut self.partial_bytes) + i as u64 + 1;
                    self.file_bytes -= bytes - (i as u64 + 1);
                    self.leaf(&h, bytes);
                    rest = after;
                    if self.frontier.size() - self.last_size >= self.config.every() {
                        self.checkpoint("records")?;
                    }
                }
                None => {
                    self.partial.get_or_insert_with(LeafHasher::new).update(rest);
                    self.partial_bytes += rest.len() as u64;
                    self.file_bytes += rest.len() as u64;
                    rest = &[];
                }
            }
        }
        Ok(())
    }

    /// Leaves in the tree.
    pub(super) fn size(&self) -> u64 {
        self.frontier.size()
    }

    /// When the next checkpoint by time is due (there are leaves since the last one).
    pub(super) fn deadline(&self) -> Option<Instant> {
        let interval = self.config.interval?;
        (self.frontier.size() > self.last_size).then(|| self.last_at + interval)
    }

    /// Makes a checkpoint if leaves came since the last one (`reason` is recorded).
    pub(super) fn checkpoint(&mut self, reason: &str) -> io::Result<()> {
        self.last_at = Instant::now();
        if self.frontier.size() == self.last_size && reason != "rotation" {
            return Ok(());
        }
        let time = rfc3339(SystemTime::now());
        let root = self.frontier.root();
        let cp = Checkpoint {
            origin: self.origin.clone(),
            size: self.frontier.size(),
            root,
            time: Some(time.clone()),
        };
        let line = CheckpointLine {
            tree_size: self.frontier.size(),
            root: hex::encode(root),
            time,
            reason: reason.to_owned(),
            file_lines: self.file_lines,
            file_bytes: self.file_bytes - self.partial_bytes,
            leaves_from: self.leaves_from,
            leaves: hex_lower(&self.index),
            frontier: self.frontier.hashes().iter().map(hex::encode).collect(),
            note: cp.sign(self.config.signer.as_deref()),
        };
        self.sidecar.write_all(&line.to_line())?;
        if self.config.sync {
            self.sidecar.sync_data()?;
        }
        self.last_size = self.frontier.size();
        self.leaves_from = self.last_size;
        self.index.clear();
        Ok(())
    }

    /// After rotation: the active file is new (its checkpoint file `sidecar_path` too), and
    /// the tree goes on in it. Returns where the tree stands, for its `file-start` record.
    pub(super) fn start_file(&mut self, log: &Path, previous_file: String) -> io::Result<Continuation> {
        let sidecar_path = checkpoints_path(log);
        self.sidecar = OpenOptions::new().create(true).append(true).open(&sidecar_path)?;
        self.sidecar_path = sidecar_path;
        self.file_lines = 0;
        self.file_bytes = 0;
        self.partial = None;
        self.partial_bytes = 0;
        self.leaves_from = self.frontier.size();
        self.index.clear();
        Ok(Continuation { frontier: self.frontier.clone(), previous_file: Some(previous_file) })
    }

    /// Syncs the checkpoint file.
    pub(super) fn sync(&self) -> io::Result<()> {
        self.sidecar.sync_data()
    }

    /// The checkpoint file of the active file.
    pub(super) fn sidecar_path(&self) -> &Path {
        &self.sidecar_path
    }
}

/// The checkpoints' origin line for the log whose active file is `log`.
fn origin_of(log: &Path) -> String {
    let name = log.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let name: String = name.chars().map(|c| if c.is_whitespace() || c == '+' { '_' } else { c }).collect();
    format!("robotsgate/{name}")
}

/// `bytes` in lowercase hex, by table into one buffer: `hex::encode` collects `char`s one
/// at a time, and a checkpoint's leaf index holds a few bytes for every record since the
/// last one (about 800 instructions a proxied request, on the audit thread).
fn hex_lower(bytes: &[u8]) -> String {
    let mut out = vec![0; bytes.len() * 2];
    match hex::encode_to_slice(bytes, &mut out).map(|()| String::from_utf8(out)) {
        Ok(Ok(text)) => text,
        // Neither happens (the lengths match, the digits are ASCII).
        _ => hex::encode(bytes),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::sidecar::INDEX_BYTES;

    /// Checkpoints by time only (`every` 0): one is made after `MAX_CHECKPOINT_LEAVES`
    /// leaves all the same, so the index held for the next one stays bounded.
    #[test]
    fn a_checkpoint_at_least_every_max_leaves() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("audit.jsonl");
        std::fs::write(&log, "").unwrap();
        let config =
            TreeConfig { every: 0, interval: Some(Duration::from_secs(3600)), signer: None, sync: false };
        let (mut tree, warnings) = TreeWriter::resume(&log, 0, config).unwrap();
        assert!(warnings.is_empty(), "{warnings:?}");
        let leaves = MAX_CHECKPOINT_LEAVES as usize;
        tree.feed(&b"x\n".repeat(leaves - 1)).unwrap();
        assert_eq!(std::fs::read(checkpoints_path(&log)).unwrap().len(), 0, "none before");
        tree.feed(b"x\ny\n").unwrap();
        let text = std::fs::read_to_string(checkpoints_path(&log)).unwrap();
        let lines: Vec<CheckpointLine> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
        assert_eq!(lines.len(), 1, "one checkpoint");
        assert_eq!((lines[0].tree_size, lines[0].reason.as_str()), (MAX_CHECKPOINT_LEAVES, "records"));
        assert_eq!(lines[0].leaves.len(), leaves * 16);
        assert!(text.len() <= MAX_CHECKPOINT_LINE, "read back whole");
        assert_eq!(tree.index.len(), INDEX_BYTES, "the index starts again: one leaf since");
    }

    /// The checkpoint's leaf index reads as before: `hex::encode`'s lowercase digits.
    #[test]
    fn hex_lower_is_hex_encode() {
        let all: Vec<u8> = (0..=255).collect();
        for bytes in [&[][..], &[0x00], &[0xab, 0x0f], &all] {
            assert_eq!(hex_lower(bytes), hex::encode(bytes));
        }
    }
}
