//! Reading a log file line by line in bounded memory: each line's leaf hash is computed
//! as it streams by, and its bytes are kept only up to a limit (a longer line is not a
//! record robotsgate wrote).

use std::io::{self, BufRead};

use super::merkle::{Frontier, Hash, LeafHasher, empty_root};

/// The longest line kept whole: 16 MiB. Records are about a kilobyte; what a stranger can
/// put in one is bounded by the request head (at most 1 MiB: `proxy.max_header_bytes`,
/// `ingress.max_header_bytes`) and the robots.txt rule (at most 500 KiB), each written a
/// few times and JSON-escaped (at most six bytes a byte): the longest record robotsgate
/// writes stays below it. A longer line is not one of its records, and is not read.
pub const MAX_LINE: usize = 16 << 20;

/// Lines of a log file.
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    /// Bytes read so far (for progress).
    pub bytes_read: u64,
}

/// One line.
pub struct Line<'a> {
    /// Its leaf hash (of its bytes without the newline).
    pub hash: Hash,
    /// Its length without the newline.
    pub len: u64,
    /// Its bytes, unless longer than [`MAX_LINE`].
    pub content: Option<&'a [u8]>,
    /// It ends with a newline (the last line of a file being written may not).
    pub terminated: bool,
}

impl<R: BufRead> Lines<R> {
    /// Lines read from `reader`.
    pub fn new(reader: R) -> Lines<R> {
        Lines { reader, buf: Vec::with_capacity(4096), bytes_read: 0 }
    }

    /// The next line, or `None` at the end.
    pub fn next_line(&mut self) -> io::Result<Option<Line<'_>>> {
        self.buf.clear();
        let mut hasher = LeafHasher::new();
        let mut len = 0u64;
        let mut kept = true;
        loop {
            let chunk = match self.reader.fill_buf() {
                Ok(c) => c,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                if len == 0 {
                    return Ok(None);
                }
                let content = kept.then_some(self.buf.as_slice());
                return Ok(Some(Line { hash: hasher.finish(), len, content, terminated: false }));
            }
            let (part, used, end) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], i + 1, true),
                None => (chunk, chunk.len(), false),
            };
            hasher.update(part);
            len += part.len() as u64;
            if kept && self.buf.len() + part.len() <= MAX_LINE {
                self.buf.extend_from_slice(part);
            } else {
                kept = false;
                self.buf.clear();
            }
            self.reader.consume(used);
            self.bytes_read += used as u64;
            if end {
                let content = kept.then_some(self.buf.as_slice());
                return Ok(Some(Line { hash: hasher.finish(), len, content, terminated: true }));
            }
        }
    }
}

/// The few fields of a `log` record that reading a log needs (other fields ignored).
#[derive(Debug, Default, serde::Deserialize)]
#[serde(default)]
pub struct LogFields {
    /// `type`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `event`.
    pub event: String,
    /// `file-start`, `rotate`.
    pub tree_size: Option<u64>,
    /// `file-start`.
    pub root: Option<String>,
    /// `file-start`.
    pub frontier: Option<Vec<String>>,
    /// `file-start`.
    pub previous_file: Option<String>,
    /// `open`.
    pub previous_run: Option<String>,
    /// `open`, `write-error`.
    pub fragment_bytes: Option<u64>,
    /// Every record.
    pub time: Option<String>,
}

impl LogFields {
    /// The tree before the file a `file-start` record begins, if the record is one and
    /// is consistent (its subtrees give its root).
    pub(crate) fn start_frontier(&self) -> Option<Frontier> {
        if self.event != "file-start" {
            return None;
        }
        let hashes: Option<Vec<Hash>> =
            self.frontier.as_ref()?.iter().map(|h| hex::decode(h).ok()?.try_into().ok()).collect();
        let f = Frontier::from_hashes(self.tree_size?, &hashes?)?;
        let root = if f.size() == 0 { empty_root() } else { f.root() };
        (self.root.as_deref() == Some(hex::encode(root).as_str())).then_some(f)
    }

    /// The fields, if `line` is a `log` record.
    pub fn of(line: &[u8]) -> Option<LogFields> {
        // Cheap test first: every log record says so near its start.
        let head = &line[..line.len().min(64)];
        memchr::memmem::find(head, b"\"type\":\"log\"")?;
        serde_json::from_slice::<LogFields>(line).ok().filter(|f| f.kind == "log")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::audit::merkle::leaf_hash;

    #[test]
    fn lines_hash_and_keep_their_bytes() {
        let long = vec![b'x'; MAX_LINE + 10];
        let mut text = b"one\n\ntwo".to_vec();
        text.push(b'\n');
        text.extend_from_slice(&long);
        text.extend_from_slice(b"\nlast");
        // A tiny buffer: lines cross many reads.
        let mut lines = Lines::new(std::io::BufReader::with_capacity(3, &text[..]));
        let mut got = Vec::new();
        while let Some(l) = lines.next_line().unwrap() {
            got.push((l.hash, l.len, l.content.map(<[u8]>::to_vec), l.terminated));
        }
        assert_eq!(got.len(), 5);
        assert_eq!(got[0], (leaf_hash(b"one"), 3, Some(b"one".to_vec()), true));
        assert_eq!(got[1], (leaf_hash(b""), 0, Some(Vec::new()), true));
        assert_eq!(got[2].2.as_deref(), Some(&b"two"[..]));
        assert_eq!(got[3], (leaf_hash(&long), long.len() as u64, None, true), "hashed, not kept");
        assert_eq!(got[4], (leaf_hash(b"last"), 4, Some(b"last".to_vec()), false));
        assert_eq!(lines.bytes_read, text.len() as u64);
    }
}
