//! The audit log's evidence as a reviewer reads it (`robotsgate::audit`): inclusion proofs
//! (`Proof::verify`, what `robotsgate audit verify-proof` runs on a proof file someone
//! hands over), signed checkpoints and keys (`note`), and whole log files with their
//! checkpoint files (`verify::verify`, what `robotsgate audit verify` runs). A log under
//! review may have been edited by anyone: that is what the check is for.
//!
//! Input, by the first byte's low two bits:
//!
//! - `0`: a genuine proof, then edited. `N_HI N_LO I_HI I_LO EDIT...`: a tree of
//!   `1 + N % 300` records (record `j` is `{"n":j}`), the proof of record `I % n` made by this
//!   target's own RFC 9162 tree (`sha2`, not the library's), against a checkpoint signed
//!   with a fixed key; then edits of 4 bytes each, `KIND A B C` (see `edit`).
//! - `1`: a proof file as it comes (JSON).
//! - `2`: a note, a checkpoint or a key, as text.
//! - `3`: log files and their checkpoint files, `LOG 0xFF CHECKPOINTS [0xFF LOG 0xFF
//!   CHECKPOINTS]`, with the fixed key; the second byte's low bit: `--partial`.
//!
//! Invariants: no panic. An unedited proof verifies, with the key and without; an edited
//! one verifies exactly when it is still the genuine proof of the record it names (its
//! record, index, tree size and hashes those of one record of the tree) and its
//! checkpoint still says that tree; a checkpoint that verifies with the key is the one
//! signed. A proof that verifies with the key verifies without it. A note, a checkpoint
//! and a key read back from their text form are the same. A log's check is within what it
//! read: the records covered by a checkpoint are records it holds, and a file summary's
//! covered lines are lines it read.

#![no_main]

use std::io::{BufRead, Cursor};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use libfuzzer_sys::fuzz_target;
use robotsgate::audit::note::{Checkpoint, Note, Signer, Verifier};
use robotsgate::audit::proof::{FORMAT, Proof};
use robotsgate::audit::verify::{self, LogFile, NoWatch, Options};
use sha2::{Digest, Sha256};

/// A key made for this target (`robotsgate audit keygen --name fuzz.example`).
const SIGNER: &str = "PRIVATE+KEY+fuzz.example+c05b9df4+AQuldKgO1Xwt3F8h67VJmROZUCCTsXK/DSRVa8M7AtND";
const VERIFIER: &str = "fuzz.example+c05b9df4+AWHLaem2KMM4KxEOnKzCl8pEkbjGwqOc/AtS5m2gmese";
const ORIGIN: &str = "fuzz.example/audit";
const MAX_RECORDS: usize = 300;

type Hash = [u8; 32];

fn leaf(data: &[u8]) -> Hash {
    Sha256::new().chain_update([0u8]).chain_update(data).finalize().into()
}

fn node(l: &Hash, r: &Hash) -> Hash {
    Sha256::new().chain_update([1u8]).chain_update(l).chain_update(r).finalize().into()
}

/// RFC 9162 §2.1.1: the largest power of two below `n` (`n >= 2`).
fn split(n: usize) -> usize {
    let mut k = 1;
    while k * 2 < n {
        k *= 2;
    }
    k
}

/// MTH(D[n]), recursively, as the RFC defines it.
fn root(leaves: &[Hash]) -> Hash {
    match leaves.len() {
        0 => Sha256::digest([]).into(),
        1 => leaves[0],
        n => {
            let k = split(n);
            node(&root(&leaves[..k]), &root(&leaves[k..]))
        }
    }
}

/// PATH(m, D[n]) (§2.1.3.1), from the leaf up.
fn path(m: usize, leaves: &[Hash]) -> Vec<Hash> {
    let n = leaves.len();
    if n <= 1 {
        return Vec::new();
    }
    let k = split(n);
    if m < k {
        let mut p = path(m, &leaves[..k]);
        p.push(root(&leaves[k..]));
        p
    } else {
        let mut p = path(m - k, &leaves[k..]);
        p.push(root(&leaves[..k]));
        p
    }
}

fn record(j: usize) -> String {
    format!("{{\"n\":{j}}}")
}

/// What an edited proof holds, as this target tracks it.
struct Edited {
    proof: Proof,
    /// The proof's hashes, decoded (kept apart: an edit may leave one that is not base64).
    hashes: Vec<Hash>,
    /// A hash was replaced with text that is not one.
    broken_hash: bool,
    /// The checkpoint's text was edited.
    note_edited: bool,
}

/// One edit, `KIND A B C`.
fn edit(e: &mut Edited, n: usize, kind: u8, a: u8, b: u8, c: u8) {
    let ab = usize::from(a) << 8 | usize::from(b);
    match kind % 9 {
        0 => e.proof.leaf_index = (ab % (n + 2)) as u64,
        1 => {
            e.proof.tree_size = match c {
                255 => u64::MAX,
                254 => 1 << 63,
                _ => (ab % (n + 2)) as u64,
            }
        }
        2 if !e.hashes.is_empty() => {
            let i = usize::from(a) % e.hashes.len();
            e.hashes[i][usize::from(b) % 32] ^= 1 << (c % 8);
        }
        3 if !e.hashes.is_empty() => {
            e.hashes.remove(usize::from(a) % e.hashes.len());
        }
        4 => {
            let at = usize::from(a) % (e.hashes.len() + 1);
            let h = if e.hashes.is_empty() { leaf(&[b, c]) } else { e.hashes[usize::from(b) % e.hashes.len()] };
            e.hashes.insert(at, h);
        }
        5 => e.proof.record = record(ab % (n + 1)),
        6 if !e.proof.record.is_empty() => {
            let mut bytes = e.proof.record.clone().into_bytes();
            let i = usize::from(a) % bytes.len();
            bytes[i] = b;
            e.proof.record = String::from_utf8_lossy(&bytes).into_owned();
        }
        7 => {
            let mut bytes = e.proof.checkpoint.clone().into_bytes();
            if !bytes.is_empty() {
                let i = ab % bytes.len();
                match c % 3 {
                    0 => bytes[i] = b,
                    1 => drop(bytes.remove(i)),
                    _ => bytes.insert(i, b),
                }
            }
            let text = String::from_utf8_lossy(&bytes).into_owned();
            e.note_edited |= text != e.proof.checkpoint;
            e.proof.checkpoint = text;
        }
        8 => e.broken_hash |= c & 1 == 1,
        _ => {}
    }
}

fn genuine_proof(data: &[u8], signer: &Signer, key: &Verifier) {
    let [n_hi, n_lo, i_hi, i_lo, edits @ ..] = data else { return };
    let n = 1 + (usize::from(*n_hi) << 8 | usize::from(*n_lo)) % MAX_RECORDS;
    let index = (usize::from(*i_hi) << 8 | usize::from(*i_lo)) % n;
    let leaves: Vec<Hash> = (0..n).map(|j| leaf(record(j).as_bytes())).collect();
    let cp = Checkpoint { origin: ORIGIN.into(), size: n as u64, root: root(&leaves), time: None };
    let hashes = path(index, &leaves);
    let genuine = Proof {
        format: FORMAT.into(),
        log_file: "audit.jsonl".into(),
        line: index as u64 + 1,
        record: record(index),
        leaf_index: index as u64,
        tree_size: n as u64,
        inclusion_proof: hashes.iter().map(|h| B64.encode(h)).collect(),
        checkpoint: cp.sign(Some(signer)),
    };
    if edits.is_empty() {
        assert_eq!(genuine.verify(Some(key)).ok().as_ref(), Some(&cp), "the genuine proof, with the key");
        assert_eq!(genuine.verify(None).ok().as_ref(), Some(&cp), "the genuine proof, without the key");
        return;
    }
    let mut e = Edited { proof: genuine.clone(), hashes, broken_hash: false, note_edited: false };
    for chunk in edits.chunks_exact(4) {
        edit(&mut e, n, chunk[0], chunk[1], chunk[2], chunk[3]);
    }
    e.proof.inclusion_proof = e.hashes.iter().map(|h| B64.encode(h)).collect();
    if e.broken_hash {
        e.proof.inclusion_proof.push("not base64".into());
    }
    let with_key = e.proof.verify(Some(key));
    let without = e.proof.verify(None);
    if let Ok(got) = &with_key {
        assert_eq!(got, &cp, "a checkpoint that verifies with the key is the one signed");
        assert!(without.is_ok(), "verifies with the key, not without");
    }
    // Still the genuine proof of one record of the tree?
    let i = e.proof.leaf_index as usize;
    let still = !e.broken_hash
        && e.proof.tree_size == n as u64
        && i < n
        && e.proof.record == record(i)
        && e.hashes == path(i, &leaves);
    if !e.note_edited {
        assert_eq!(with_key.is_ok(), still, "with the key: {:?}", with_key.err());
        assert_eq!(without.is_ok(), still, "without the key: {:?}", without.err());
    } else if let Ok(got) = &without
        && got.size == n as u64
        && got.root == cp.root
    {
        // An edited note that still says this tree (another origin, a time line added).
        assert!(still, "an edited proof verified against the tree");
    }
}

fn proof_file(data: &[u8], key: &Verifier) {
    let Ok(proof) = serde_json::from_slice::<Proof>(data) else { return };
    if proof.verify(Some(key)).is_ok() {
        assert!(proof.verify(None).is_ok(), "verifies with the key, not without");
    }
}

fn texts(data: &[u8], key: &Verifier) {
    let Ok(text) = std::str::from_utf8(data) else { return };
    if let Ok(note) = Note::parse(text) {
        assert_eq!(Note::parse(&note.to_text()).as_ref(), Ok(&note), "a note read back");
        if key.verify(&note).is_ok() {
            // Only what the fixed key signed, and this target signs only checkpoints.
            assert!(Checkpoint::parse(&note.text).is_ok(), "a signed text that is no checkpoint");
        }
        if let Ok(cp) = Checkpoint::parse(&note.text) {
            assert_eq!(Checkpoint::parse(&cp.to_text()).as_ref(), Ok(&cp), "a checkpoint read back");
        }
    }
    if let Ok(v) = Verifier::parse(text) {
        assert_eq!(Verifier::parse(&v.to_text()).as_ref(), Ok(&v), "a verifier key read back");
    }
    if let Ok(s) = Signer::parse(text) {
        assert_eq!(Signer::parse(&s.to_text()).map(|s| s.verifier()).ok(), Some(s.verifier()), "a signer key read back");
    }
}

fn reader(bytes: &[u8]) -> Box<dyn BufRead> {
    // A small buffer: lines cross reads, as in a big file.
    Box::new(std::io::BufReader::with_capacity(7, Cursor::new(bytes.to_vec())))
}

fn logs(data: &[u8], key: &Verifier) {
    let [flags, rest @ ..] = data else { return };
    let parts: Vec<&[u8]> = rest.split(|&b| b == 0xFF).take(4).collect();
    let mut files = Vec::new();
    let mut lines_given = 0u64;
    for (i, pair) in parts.chunks(2).enumerate() {
        lines_given += pair[0].iter().filter(|&&b| b == b'\n').count() as u64 + 1;
        files.push(LogFile {
            name: format!("audit-{i}.jsonl"),
            log: reader(pair[0]),
            checkpoints: pair.get(1).map(|c| reader(c)),
        });
    }
    let keys = [key.clone()];
    let options = Options { keys: &keys, partial: flags & 1 == 1 };
    let v = verify::verify(files, &options, &mut NoWatch);
    let read: u64 = v.files.iter().map(|f| f.lines).sum();
    assert!(read <= lines_given, "{read} lines read of {lines_given}");
    for f in &v.files {
        assert!(f.covered_lines <= f.lines, "{}: {} of {} lines covered", f.name, f.covered_lines, f.lines);
    }
    assert!(v.covered <= v.leaves, "{} of {} records covered", v.covered, v.leaves);
    for (_, first, last) in &v.uncovered {
        assert!(first <= last, "uncovered lines {first}..{last}");
    }
}

fuzz_target!(|data: &[u8]| {
    let (Ok(signer), Ok(key)) = (Signer::parse(SIGNER), Verifier::parse(VERIFIER)) else {
        panic!("the target's own key");
    };
    let [mode, rest @ ..] = data else { return };
    match mode & 3 {
        0 => genuine_proof(rest, &signer, &key),
        1 => proof_file(rest, &key),
        2 => texts(rest, &key),
        _ => logs(rest, &key),
    }
});
