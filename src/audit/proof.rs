//! One record with the proof that it is in the log: its exact line, its place in the
//! Merkle tree, the inclusion proof, and the signed checkpoint the proof leads to. A
//! third party checks it with the log's public key alone ([`Proof::verify`]), without the
//! log.

use std::io::{self, BufRead};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use serde::{Deserialize, Serialize};

use super::lines::{Lines, LogFields};
use super::merkle::{Frontier, Hash, ProofBuilder, empty_root, leaf_hash, verify_inclusion};
use super::note::{Checkpoint, Note, NoteError, Verifier};
use super::sidecar::CheckpointLine;

/// The proof file's `format`.
pub const FORMAT: &str = "robotsgate-audit-proof/1";

/// A record and its inclusion proof (the proof file, as JSON).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Proof {
    /// [`FORMAT`].
    pub format: String,
    /// The log file it was taken from (for the reader; not checked).
    pub log_file: String,
    /// Its line in that file (for the reader; not checked).
    pub line: u64,
    /// The record: the line's exact text.
    pub record: String,
    /// Its leaf index in the tree (0-based).
    pub leaf_index: u64,
    /// The size of the tree of the checkpoint.
    pub tree_size: u64,
    /// The inclusion proof (RFC 9162 §2.1.3), base64, from the leaf up.
    pub inclusion_proof: Vec<String>,
    /// The signed checkpoint (a C2SP signed note).
    pub checkpoint: String,
}

/// Why a proof does not hold.
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    /// Not a proof file of this format.
    #[error("not a robotsgate audit proof: {0}")]
    Format(String),
    /// The checkpoint's note or signature.
    #[error("checkpoint: {0}")]
    Checkpoint(#[from] NoteError),
    /// The proof does not lead from the record to the checkpoint's root.
    #[error("the record is not in the tree of the checkpoint: {0}")]
    NotIncluded(String),
}

impl Proof {
    /// Checks the proof: the checkpoint is signed by `key` (unless `None`: not checked),
    /// its tree size is the proof's, and the record's leaf hash with the inclusion proof
    /// gives its root. Returns the checkpoint.
    pub fn verify(&self, key: Option<&Verifier>) -> Result<Checkpoint, ProofError> {
        if self.format != FORMAT {
            return Err(ProofError::Format(format!("format {:?}, expected {FORMAT:?}", self.format)));
        }
        let note = Note::parse(&self.checkpoint)?;
        if let Some(key) = key {
            key.verify(&note)?;
        }
        let cp = Checkpoint::parse(&note.text)?;
        if cp.size != self.tree_size {
            return Err(ProofError::NotIncluded(format!(
                "the proof is for a tree of {} records, the checkpoint's has {}",
                self.tree_size, cp.size
            )));
        }
        let proof: Result<Vec<Hash>, _> = self
            .inclusion_proof
            .iter()
            .map(|h| B64.decode(h).ok().and_then(|b| b.try_into().ok()).ok_or(()))
            .collect();
        let proof =
            proof.map_err(|()| ProofError::Format("a proof hash is not 32 bytes of base64".into()))?;
        let leaf = leaf_hash(self.record.as_bytes());
        if !verify_inclusion(&leaf, self.leaf_index, self.tree_size, &proof, &cp.root) {
            return Err(ProofError::NotIncluded(
                "the record's hash and the proof do not give the checkpoint's root hash (the record, its position or the proof was changed)".into(),
            ));
        }
        Ok(cp)
    }
}

/// Why a proof could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ProveError {
    /// Reading the log.
    #[error("cannot read the log: {0}")]
    Io(#[from] io::Error),
    /// No line matched.
    #[error("no such record in the file")]
    NotFound,
    /// The record is after the file's last checkpoint.
    #[error(
        "the record (line {line}) is not covered by a checkpoint yet; the next one comes within audit.checkpoint_interval"
    )]
    NotCovered {
        /// Its line.
        line: u64,
    },
    /// The file does not match its checkpoint.
    #[error("the log does not match its checkpoint at record {0}: run `robotsgate audit verify`")]
    Mismatch(u64),
    /// Something else.
    #[error("{0}")]
    Other(String),
}

/// Makes the proof of the first line of a log file for which `matches` holds, against the
/// file's last checkpoint that covers it. `open` opens the file (it is read twice);
/// `checkpoints` are the file's checkpoints.
pub fn prove(
    log_file: &str,
    open: &dyn Fn() -> io::Result<Box<dyn BufRead>>,
    checkpoints: &[CheckpointLine],
    matches: &dyn Fn(&[u8]) -> bool,
) -> Result<Proof, ProveError> {
    // First pass: the record, and where the file starts in the tree.
    let mut lines = Lines::new(open()?);
    let mut start = Frontier::new();
    let mut found = None;
    let mut n = 0u64;
    while let Some(l) = lines.next_line()? {
        if !l.terminated {
            break;
        }
        n += 1;
        let content = l.content.unwrap_or_default();
        if n == 1
            && let Some(f) = LogFields::of(content).filter(|f| f.event == "file-start")
        {
            start = f
                .start_frontier()
                .ok_or_else(|| ProveError::Other("the file's file-start record is not consistent".into()))?;
        }
        if matches(content) {
            let text = String::from_utf8(content.to_vec())
                .map_err(|_| ProveError::Other("the record is not UTF-8".into()))?;
            found = Some((n, text));
            break;
        }
    }
    let (line, record) = found.ok_or(ProveError::NotFound)?;
    let leaf_index = start.size() + line - 1;
    let cp = checkpoints
        .iter()
        .filter(|c| c.tree_size > leaf_index)
        .max_by_key(|c| c.tree_size)
        .ok_or(ProveError::NotCovered { line })?;
    // Second pass: the proof's subtrees and the root at the checkpoint.
    let mut builder = ProofBuilder::new(leaf_index, cp.tree_size, &start)
        .ok_or_else(|| ProveError::Other("cannot build the proof from this file's start".into()))?;
    let mut tree = start.clone();
    let mut lines = Lines::new(open()?);
    while tree.size() < cp.tree_size {
        let Some(l) = lines.next_line()? else { break };
        if !l.terminated {
            break;
        }
        builder.leaf(tree.size(), &l.hash);
        tree.push(l.hash);
    }
    let root = if tree.size() == 0 { empty_root() } else { tree.root() };
    if tree.size() != cp.tree_size || hex::encode(root) != cp.root {
        return Err(ProveError::Mismatch(cp.tree_size));
    }
    let proof = builder.finish().ok_or(ProveError::Mismatch(cp.tree_size))?;
    Ok(Proof {
        format: FORMAT.into(),
        log_file: log_file.to_owned(),
        line,
        record,
        leaf_index,
        tree_size: cp.tree_size,
        inclusion_proof: proof.iter().map(|h| B64.encode(h)).collect(),
        checkpoint: cp.note.clone(),
    })
}
