//! Checking a log against its checkpoints: every line of every file is hashed again into
//! the Merkle tree, the tree's root at each checkpoint is compared with the checkpoint's
//! (whose signature is checked with the reviewer's key), and the files are checked to
//! continue one another. The first thing wrong is named with its file and line; lines
//! after the last checkpoint are reported as not yet covered.
//!
//! Pure: it reads what it is given (any `BufRead`), in one pass and bounded memory.

use std::collections::VecDeque;
use std::io::{self, BufRead, Read};

use super::lines::{Lines, LogFields};
use super::merkle::{Frontier, Hash};
use super::note::{Checkpoint, Note, Verifier};
use super::sidecar::{CheckpointLine, INDEX_BYTES, MAX_CHECKPOINT_LINE, index_entry};

/// One log file to check.
pub struct LogFile {
    /// Its name, for messages.
    pub name: String,
    /// Its lines.
    pub log: Box<dyn BufRead>,
    /// Its checkpoint file's lines, if it has one.
    pub checkpoints: Option<Box<dyn BufRead>>,
}

/// How to check.
#[derive(Default)]
pub struct Options<'a> {
    /// The keys checkpoints must be signed with, each by one of them (several: the
    /// signing key was changed; none: signatures are not checked).
    pub keys: &'a [Verifier],
    /// The files given may be a part of the log: earlier files (before the first given)
    /// and later ones (after a rotation at the end of the last) are not required.
    pub partial: bool,
}

/// The first thing found wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The file.
    pub file: String,
    /// The line (1-based), when one can be named.
    pub line: Option<u64>,
    /// What is wrong.
    pub what: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.line {
            Some(l) => write!(f, "{}:{}: {}", self.file, l, self.what),
            None => write!(f, "{}: {}", self.file, self.what),
        }
    }
}

/// What a file held.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FileSummary {
    /// Its name.
    pub name: String,
    /// The tree position of its first line.
    pub first_leaf: u64,
    /// Its whole lines.
    pub lines: u64,
    /// Its checkpoints that were checked.
    pub checkpoints: u64,
    /// Its lines covered by a checkpoint.
    pub covered_lines: u64,
    /// It ends with a `rotate` record.
    pub rotated: bool,
}

/// How the checkpoints were signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Signatures {
    /// No checkpoints.
    #[default]
    NoCheckpoints,
    /// Every checkpoint's signature by the key was checked.
    Verified,
    /// Signed, but no key was given: not checked.
    NotChecked,
    /// Some or all checkpoints carry no signature (and no key was given).
    Unsigned,
}

/// The result of a check.
#[derive(Debug, Clone, Default)]
pub struct Verification {
    /// The files, in tree order.
    pub files: Vec<FileSummary>,
    /// The first thing wrong: the log was changed since it was written (or damaged).
    pub problem: Option<Problem>,
    /// A file could not be read.
    pub error: Option<String>,
    /// Checkpoints checked.
    pub checkpoints: u64,
    /// Leaves in the tree, as far as the files go.
    pub leaves: u64,
    /// Leaves covered by the last checkpoint, and its time.
    pub covered: u64,
    /// The last checkpoint's time.
    pub last_checkpoint_time: Option<String>,
    /// How the checkpoints were signed.
    pub signatures: Signatures,
    /// Lines after the last checkpoint: (file, first line, last line).
    pub uncovered: Vec<(String, u64, u64)>,
    /// Things worth knowing that are not tampering (a line that is not a record, an
    /// unfinished last line, a checkpoint file whose index was edited).
    pub notes: Vec<String>,
}

impl Verification {
    /// Whether the log verified.
    pub fn ok(&self) -> bool {
        self.problem.is_none() && self.error.is_none()
    }
}

/// A checkpoint read from a checkpoint file.
struct Cp {
    line: CheckpointLine,
    cp: Checkpoint,
    /// Its line in the checkpoint file.
    at: u64,
    index: Option<Vec<[u8; INDEX_BYTES]>>,
}

/// A line of the log whose hash differs from the checkpoint file's index: what it is will
/// be said once the next lines are read, and counts once the root disagrees.
struct Suspect {
    line: u64,
    leaf: u64,
    /// Hashes (index bytes) of the line and the two after it, as read.
    actual: Vec<[u8; INDEX_BYTES]>,
    /// What the index says for those three leaves.
    expected: [Option<[u8; INDEX_BYTES]>; 3],
}

impl Suspect {
    fn describe(&self) -> String {
        let a = |i: usize| self.actual.get(i).copied();
        let e = |i: usize| self.expected[i];
        let same = |x: Option<[u8; INDEX_BYTES]>, y: Option<[u8; INDEX_BYTES]>| x.is_some() && x == y;
        if same(a(0), e(1)) && same(a(1), e(0)) {
            format!("lines {} and {} are in the wrong order (swapped)", self.line, self.line + 1)
        } else if same(a(0), e(1)) {
            format!("a record is missing before line {} (removed)", self.line)
        } else if same(a(1), e(0)) {
            "this line was inserted: it is not in the log as written".into()
        } else if same(a(1), e(1)) || (a(1).is_none() && e(1).is_none()) {
            "this line was changed since it was written".into()
        } else {
            "this line differs from the one written here".into()
        }
    }
}

/// Sees what [`verify`] reads as it goes: progress, and each record (so that one pass
/// can both check a log and, say, count its decisions).
pub trait Watch {
    /// `bytes` more bytes of log were read.
    fn progress(&mut self, bytes: u64) {
        let _ = bytes;
    }

    /// Line `line` (1-based) of `file`, whole (lines longer than
    /// [`MAX_LINE`](super::lines::MAX_LINE) and an unfinished last line are not given).
    fn line(&mut self, file: &str, line: u64, content: &[u8]) {
        let _ = (file, line, content);
    }
}

/// A [`Watch`] that looks at nothing.
pub struct NoWatch;

impl Watch for NoWatch {}

/// Checks the log made of `files` (any order; they are put in tree order).
pub fn verify(files: Vec<LogFile>, options: &Options<'_>, watch: &mut dyn Watch) -> Verification {
    let mut v = Verification::default();
    // Each file's first line says where in the tree it starts.
    let mut heads = Vec::new();
    for f in files {
        let mut lines = Lines::new(f.log);
        let first = match lines.next_line() {
            Ok(l) => l.map(|l| (l.hash, l.len, l.content.map(<[u8]>::to_vec), l.terminated)),
            Err(e) => {
                v.error = Some(format!("{}: cannot read: {e}", f.name));
                return v;
            }
        };
        let start = first.as_ref().and_then(|(_, _, c, _)| c.as_deref()).and_then(LogFields::of);
        let start = start.filter(|s| s.event == "file-start");
        heads.push((f.name, lines, f.checkpoints, first, start));
    }
    heads.sort_by_key(|h| h.4.as_ref().and_then(|s| s.tree_size).unwrap_or(0));
    let mut walker = Walker { options, v, frontier: Frontier::new(), signed: 0, unsigned: 0 };
    let mut previous: Option<(String, bool)> = None;
    for (name, lines, checkpoints, first, start) in heads {
        let start_size = start.as_ref().and_then(|s| s.tree_size).unwrap_or(0);
        // Where this file starts must be where the one before ended.
        let expected = walker.frontier.size();
        let continues = match &previous {
            None if start_size > 0 && !options.partial => {
                let from = start.as_ref().and_then(|s| s.previous_file.clone()).unwrap_or_default();
                walker.fail(&name, Some(1), format!(
                    "the log starts {start_size} records before this file (it continues {from}), and no earlier file was given; \
                     pass --partial if the earlier files were archived on purpose"
                ));
                break;
            }
            None => {
                if start_size > 0 {
                    walker.v.notes.push(format!(
                        "{name} continues the tree at record {start_size}: the {start_size} records before it (in earlier files) were not checked"
                    ));
                }
                true
            }
            Some((prev, _)) if start_size != expected => {
                let what = if start_size > expected {
                    format!(
                        "records {expected}..{} are missing: a file between {prev} and this one was removed (this file continues {})",
                        start_size - 1,
                        start.as_ref().and_then(|s| s.previous_file.clone()).unwrap_or_else(|| "?".into())
                    )
                } else {
                    format!(
                        "this file starts at record {start_size}, inside {prev} (which ends at record {expected}): the files overlap or one was altered"
                    )
                };
                walker.fail(&name, Some(1), what);
                break;
            }
            Some((prev, rotated)) => {
                if !rotated {
                    walker.fail(
                        &name,
                        None,
                        format!("{prev} does not end with a rotation record, yet this file continues it"),
                    );
                    break;
                }
                true
            }
        };
        if !continues {
            break;
        }
        if let Some(s) = &start {
            match s.start_frontier() {
                Some(f) if walker.v.files.is_empty() => walker.frontier = f,
                Some(f) if f == walker.frontier => {}
                Some(_) => {
                    walker.fail(
                        &name,
                        Some(1),
                        "the file-start record does not continue the tree of the file before".into(),
                    );
                    break;
                }
                None => {
                    walker.fail(
                        &name,
                        Some(1),
                        "the file-start record is not consistent (its subtrees do not give its root, or its tree size is past any log's)".into(),
                    );
                    break;
                }
            }
        }
        if checkpoints.is_none() && start.is_some() {
            walker.fail(
                &name,
                None,
                format!("{name}.checkpoints is missing, yet this file was written with checkpoints (its first line is a file-start record)"),
            );
            break;
        }
        let rotated = match walker.file(&name, lines, checkpoints, first, watch) {
            Some(r) => r,
            None => break,
        };
        previous = Some((name, rotated));
    }
    if walker.v.ok()
        && let Some((last, true)) = &previous
        && !options.partial
    {
        walker.fail(last, None, "the log was rotated after this file, but no later file was given: the newest records are missing; pass --partial to check only these files".into());
    }
    walker.v.leaves = walker.frontier.size();
    walker.v.signatures = match (walker.signed, walker.unsigned, options.keys.is_empty()) {
        (0, 0, _) => Signatures::NoCheckpoints,
        (_, _, false) => Signatures::Verified,
        (_, 0, true) => Signatures::NotChecked,
        _ => Signatures::Unsigned,
    };
    walker.v
}

struct Walker<'a> {
    options: &'a Options<'a>,
    v: Verification,
    frontier: Frontier,
    signed: u64,
    unsigned: u64,
}

type FirstLine = Option<(Hash, u64, Option<Vec<u8>>, bool)>;

impl Walker<'_> {
    fn fail(&mut self, file: &str, line: Option<u64>, what: String) {
        if self.v.problem.is_none() {
            self.v.problem = Some(Problem { file: file.to_owned(), line, what });
        }
    }

    /// Reads and checks the next checkpoint of `file`'s checkpoint file.
    fn next_checkpoint(
        &mut self,
        file: &str,
        reader: &mut Option<Box<dyn BufRead>>,
        at: &mut u64,
    ) -> Result<Option<Cp>, ()> {
        let Some(r) = reader else { return Ok(None) };
        let mut buf = Vec::new();
        loop {
            buf.clear();
            // Bounded: a line past the bound is not read whole.
            match r.by_ref().take(MAX_CHECKPOINT_LINE as u64 + 1).read_until(b'\n', &mut buf) {
                Ok(0) => return Ok(None),
                Ok(_) => {}
                Err(e) => {
                    self.v.error = Some(format!("{file}.checkpoints: cannot read: {e}"));
                    return Err(());
                }
            }
            *at += 1;
            let sidecar = format!("{file}.checkpoints");
            if buf.len() > MAX_CHECKPOINT_LINE {
                self.fail(
                    &sidecar,
                    Some(*at),
                    format!("not a checkpoint (a line of more than {} MiB)", MAX_CHECKPOINT_LINE >> 20),
                );
                return Err(());
            }
            let text = buf.strip_suffix(b"\n").unwrap_or(&buf);
            if text.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let line: CheckpointLine = match serde_json::from_slice(text) {
                Ok(l) => l,
                Err(e) => {
                    self.fail(&sidecar, Some(*at), format!("not a checkpoint ({e})"));
                    return Err(());
                }
            };
            let note = match Note::parse(&line.note) {
                Ok(n) => n,
                Err(e) => {
                    self.fail(&sidecar, Some(*at), e.to_string());
                    return Err(());
                }
            };
            let cp = match Checkpoint::parse(&note.text) {
                Ok(c) => c,
                Err(e) => {
                    self.fail(&sidecar, Some(*at), e.to_string());
                    return Err(());
                }
            };
            if cp.size != line.tree_size || hex::encode(cp.root) != line.root {
                self.fail(
                    &sidecar,
                    Some(*at),
                    "its tree size or root differs from its signed note: the checkpoint file was edited"
                        .into(),
                );
                return Err(());
            }
            match self.options.keys {
                [] if note.signatures.is_empty() => self.unsigned += 1,
                [] => self.signed += 1,
                keys => {
                    // Valid when signed by one of the keys (a key change: the older
                    // checkpoints by the old key).
                    let mut first_error = None;
                    let valid = keys.iter().any(|k| match k.verify(&note) {
                        Ok(_) => true,
                        Err(e) => {
                            first_error.get_or_insert(e);
                            false
                        }
                    });
                    if let (false, Some(e)) = (valid, first_error) {
                        let given = if keys.len() == 1 { "the key given" } else { "any of the keys given" };
                        self.fail(
                            &sidecar,
                            Some(*at),
                            format!("the checkpoint at record {} is not valid for {given}: {e}", cp.size),
                        );
                        return Err(());
                    }
                    self.signed += 1;
                }
            }
            let index =
                line.index().filter(|i| i.len() as u64 == line.tree_size.saturating_sub(line.leaves_from));
            return Ok(Some(Cp { line, cp, at: *at, index }));
        }
    }

    /// Checks one file; `Some(rotated)` if it went on to its end without a problem.
    fn file(
        &mut self,
        name: &str,
        mut lines: Lines<Box<dyn BufRead>>,
        mut checkpoints: Option<Box<dyn BufRead>>,
        first: FirstLine,
        watch: &mut dyn Watch,
    ) -> Option<bool> {
        let first_leaf = self.frontier.size();
        let mut summary = FileSummary { name: name.to_owned(), first_leaf, ..FileSummary::default() };
        let mut cp_at = 0;
        let mut pending: VecDeque<Cp> = VecDeque::new();
        let mut last_covered_line = 0u64;
        let mut suspect: Option<Suspect> = None;
        let mut index_suspected = false;
        let mut line_no = 0u64;
        let mut rotated = false;
        let mut last_nonjson: Option<(u64, u64)> = None;
        let mut first = first;
        let mut sent = 0u64;
        loop {
            // Keep the next two checkpoints at hand (their indexes, for naming a line).
            while pending.len() < 2 {
                match self.next_checkpoint(name, &mut checkpoints, &mut cp_at) {
                    Ok(Some(cp)) => {
                        let prev = pending.back().map(|c| c.line.tree_size).unwrap_or(self.frontier.size());
                        if cp.line.tree_size < prev {
                            self.fail(&format!("{name}.checkpoints"), Some(cp.at), format!("checkpoint at record {} comes after one at record {prev}: the checkpoint file was reordered or edited", cp.line.tree_size));
                            return None;
                        }
                        pending.push_back(cp);
                    }
                    Ok(None) => break,
                    Err(()) => return None,
                }
            }
            // Checkpoints reached at this size.
            while pending.front().is_some_and(|c| c.line.tree_size == self.frontier.size()) {
                let Some(cp) = pending.pop_front() else { break };
                if cp.cp.root != self.frontier.root() {
                    let from = last_covered_line + 1;
                    match suspect.take() {
                        Some(s) => self.fail(name, Some(s.line), s.describe()),
                        None => self.fail(name, None, format!(
                            "lines {from}..{line_no} do not match the checkpoint at record {} ({}): a record among them was changed, inserted, removed or reordered (the checkpoint file's line index cannot say which)",
                            cp.line.tree_size,
                            cp.cp.time.as_deref().unwrap_or("no time")
                        )),
                    }
                    return None;
                }
                if suspect.take().is_some() || index_suspected {
                    self.v.notes.push(format!(
                        "{name}.checkpoints: the line index of the checkpoint at record {} does not match the log, whose records match the signed root: the checkpoint file was edited",
                        cp.line.tree_size
                    ));
                    index_suspected = false;
                }
                if cp.line.file_lines != line_no {
                    self.v.notes.push(format!(
                        "{name}.checkpoints:{}: says the checkpoint falls after line {}, it falls after line {line_no}",
                        cp.at, cp.line.file_lines
                    ));
                }
                summary.checkpoints += 1;
                self.v.checkpoints += 1;
                self.v.covered = cp.line.tree_size;
                self.v.last_checkpoint_time = cp.cp.time.clone();
                last_covered_line = line_no;
            }
            if pending.front().is_some_and(|c| c.line.tree_size < self.frontier.size()) {
                let cp = pending.pop_front()?;
                self.fail(&format!("{name}.checkpoints"), Some(cp.at), format!(
                    "the checkpoint at record {} falls before this file's first line (record {first_leaf}): it belongs to another file",
                    cp.line.tree_size
                ));
                return None;
            }
            // The next line.
            let (hash, len, content, terminated) = match first.take() {
                Some(f) => f,
                None => match lines.next_line() {
                    Ok(Some(l)) => (l.hash, l.len, l.content.map(<[u8]>::to_vec), l.terminated),
                    Ok(None) => break,
                    Err(e) => {
                        self.v.error = Some(format!("{name}: cannot read: {e}"));
                        return None;
                    }
                },
            };
            if lines.bytes_read - sent >= 1 << 20 {
                watch.progress(lines.bytes_read - sent);
                sent = lines.bytes_read;
            }
            if !terminated {
                self.v.notes.push(format!(
                    "{name}:{}: an unfinished last line ({len} bytes, no newline): a write in progress, or the end of a process that died; not a record yet",
                    line_no + 1
                ));
                break;
            }
            line_no += 1;
            let leaf = self.frontier.size();
            let entry = index_entry(&hash);
            // Compare with the checkpoint file's index.
            if let Some(s) = &mut suspect {
                if s.actual.len() < 3 {
                    s.actual.push(entry);
                }
            } else if let Some(expected) = expected_entry(&pending, leaf)
                && expected != entry
            {
                suspect = Some(Suspect {
                    line: line_no,
                    leaf,
                    actual: vec![entry],
                    expected: [
                        Some(expected),
                        expected_entry(&pending, leaf + 1),
                        expected_entry(&pending, leaf + 2),
                    ],
                });
                index_suspected = true;
            }
            self.frontier.push(hash);
            if let Some(c) = content.as_deref() {
                watch.line(name, line_no, c);
            }
            // What the line is.
            rotated = false;
            match content.as_deref() {
                Some(c) if serde_json::from_slice::<serde::de::IgnoredAny>(c).is_ok() => {
                    if let Some(f) = LogFields::of(c) {
                        match f.event.as_str() {
                            "rotate" => {
                                rotated = true;
                                if f.tree_size != Some(leaf + 1) {
                                    self.v.notes.push(format!(
                                        "{name}:{line_no}: the rotate record says {:?}, it is record {}",
                                        f.tree_size,
                                        leaf + 1
                                    ));
                                }
                            }
                            "open" | "write-error" => {
                                if let (Some(n), Some((l, len))) = (f.fragment_bytes, last_nonjson.take())
                                    && n == len
                                    && l + 1 == line_no
                                {
                                    // The unfinished line this record explains.
                                } else if f.fragment_bytes.is_some() {
                                    self.v.notes.push(format!("{name}:{line_no}: reports an unfinished line that is not the line before it"));
                                }
                            }
                            _ => {}
                        }
                    }
                }
                None => self.v.notes.push(format!(
                    "{name}:{line_no}: {len} bytes, longer than any record robotsgate writes ({} MiB): not read",
                    super::lines::MAX_LINE >> 20
                )),
                _ => {
                    if let Some((l, n)) = last_nonjson.replace((line_no, len)) {
                        self.v.notes.push(format!("{name}:{l}: not a record ({n} bytes that are not JSON), and no record after it explains it"));
                    }
                }
            }
        }
        if let Some(s) = suspect {
            // The index disagreed and no checkpoint after it was reached.
            if pending.is_empty() {
                self.v.notes.push(format!(
                    "{name}:{}: differs from the checkpoint file's line index, but no checkpoint covers it: {}",
                    s.line,
                    s.describe()
                ));
            } else {
                self.fail(name, Some(s.line), s.describe());
                return None;
            }
            let _ = s.leaf;
        }
        if let Some((l, n)) = last_nonjson {
            self.v.notes.push(format!(
                "{name}:{l}: not a record ({n} bytes that are not JSON), and no record after it explains it"
            ));
        }
        if let Some(cp) = pending.front() {
            let missing = cp.line.tree_size - self.frontier.size();
            self.fail(name, Some(line_no), format!(
                "the file ends here, but the checkpoint at record {} ({}) covers {missing} more record{}: the file was cut off (records removed from its end)",
                cp.line.tree_size,
                cp.cp.time.as_deref().unwrap_or("no time"),
                if missing == 1 { "" } else { "s" }
            ));
            return None;
        }
        if rotated && last_covered_line < line_no {
            self.fail(name, Some(line_no), format!(
                "this file was closed by rotation (this line is its rotate record), but no checkpoint in {name}.checkpoints covers its end: checkpoints were removed"
            ));
            return None;
        }
        watch.progress(lines.bytes_read - sent);
        summary.lines = line_no;
        summary.covered_lines = last_covered_line;
        summary.rotated = rotated;
        if line_no > last_covered_line {
            self.v.uncovered.push((name.to_owned(), last_covered_line + 1, line_no));
        }
        self.v.files.push(summary);
        Some(rotated)
    }
}

/// What the checkpoint file's index says leaf `leaf`'s hash begins with, if it says.
fn expected_entry(pending: &VecDeque<Cp>, leaf: u64) -> Option<[u8; INDEX_BYTES]> {
    pending.iter().find_map(|c| {
        let idx = c.index.as_ref()?;
        let from = c.line.leaves_from;
        (from <= leaf && leaf < c.line.tree_size).then(|| idx.get((leaf - from) as usize).copied()).flatten()
    })
}

/// Reads a whole checkpoint file into its lines (for tools that want them all); a line
/// longer than a checkpoint can be is an error, read no further.
pub fn read_checkpoints(mut reader: impl BufRead) -> io::Result<Vec<CheckpointLine>> {
    let mut out = Vec::new();
    let mut line = Vec::new();
    for at in 1u64.. {
        line.clear();
        if reader.by_ref().take(MAX_CHECKPOINT_LINE as u64 + 1).read_until(b'\n', &mut line)? == 0 {
            break;
        }
        if line.len() > MAX_CHECKPOINT_LINE {
            return Err(io::Error::other(format!(
                "line {at}: not a checkpoint (a line of more than {} MiB)",
                MAX_CHECKPOINT_LINE >> 20
            )));
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        out.push(serde_json::from_slice(&line).map_err(|e| io::Error::other(format!("line {at}: {e}")))?);
    }
    Ok(out)
}
