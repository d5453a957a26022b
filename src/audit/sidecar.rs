//! The checkpoint file beside each log file (`<log>.checkpoints`): one JSON object per
//! line, one per checkpoint. The `note` field is the signed checkpoint (C2SP
//! signed-note / tlog-checkpoint text) and is what counts; the other fields say where in
//! the log file the checkpoint falls and help to find a changed line, and are checked
//! against the note and the log (an edit to them is found, it proves nothing).

use serde::{Deserialize, Serialize};

use super::merkle::Hash;

/// The suffix of a log file's checkpoint file.
pub const SUFFIX: &str = ".checkpoints";

/// How many bytes of each leaf hash the index keeps (16 hex digits).
pub const INDEX_BYTES: usize = 8;

/// The most leaves between two checkpoints: the writer makes one after this many, whatever
/// `checkpoint_every` and `checkpoint_interval` say, so that its index of them (8 bytes a
/// leaf in memory, 16 hex digits in the checkpoint's line) stays bounded.
pub const MAX_CHECKPOINT_LEAVES: u64 = 1 << 20;

/// The longest line of a checkpoint file read back (with its newline), by `verify` and by
/// a process reopening its log. A checkpoint lists the leaves since the one before, 16 hex
/// digits each, at most [`MAX_CHECKPOINT_LEAVES`] of them (16 MiB).
pub const MAX_CHECKPOINT_LINE: usize = 64 << 20;

/// One checkpoint, as a line of the checkpoint file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointLine {
    /// Leaves in the tree (all files so far).
    pub tree_size: u64,
    /// The root hash, in hex (also in the note, in base64).
    pub root: String,
    /// When (RFC 3339; also in the note).
    pub time: String,
    /// Why now: `records` (`checkpoint_every`), `interval`, `rotation`, `shutdown`.
    pub reason: String,
    /// Lines and bytes of this log file the checkpoint covers (its first `file_lines`
    /// lines, `file_bytes` bytes).
    pub file_lines: u64,
    /// See `file_lines`.
    pub file_bytes: u64,
    /// The first leaf listed in `leaves`.
    pub leaves_from: u64,
    /// The first 8 bytes of the hash of each leaf from `leaves_from` to `tree_size`, in hex,
    /// one after the other: where a changed, inserted or removed line is.
    pub leaves: String,
    /// The roots of the perfect subtrees that make up the tree, largest first, in hex:
    /// enough to go on from here without the leaves before.
    pub frontier: Vec<String>,
    /// The signed note.
    pub note: String,
}

impl CheckpointLine {
    /// The line as written (with its newline).
    pub fn to_line(&self) -> Vec<u8> {
        let mut v = serde_json::to_vec(self).unwrap_or_default();
        v.push(b'\n');
        v
    }

    /// The index entries of `leaves`, or `None` if it is not hex of whole entries.
    pub fn index(&self) -> Option<Vec<[u8; INDEX_BYTES]>> {
        let raw = hex::decode(&self.leaves).ok()?;
        if raw.len() % INDEX_BYTES != 0 {
            return None;
        }
        Some(raw.chunks_exact(INDEX_BYTES).map(|c| c.try_into().unwrap_or([0; INDEX_BYTES])).collect())
    }

    /// The frontier's hashes, or `None` if one is not 32 bytes of hex.
    pub fn frontier_hashes(&self) -> Option<Vec<Hash>> {
        self.frontier.iter().map(|h| hex::decode(h).ok()?.try_into().ok()).collect()
    }
}

/// The index entry of a leaf hash.
pub fn index_entry(h: &Hash) -> [u8; INDEX_BYTES] {
    let mut e = [0u8; INDEX_BYTES];
    e.copy_from_slice(&h[..INDEX_BYTES]);
    e
}
