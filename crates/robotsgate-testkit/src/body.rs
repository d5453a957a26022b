//! Test bodies: a deterministic byte pattern with a running checksum (large bodies, never
//! held whole), encoded bodies and robots.txt files of an exact size.

use std::sync::OnceLock;

use bytes::Bytes;
use tokio::io::AsyncReadExt;

/// The pattern repeats every `PERIOD` bytes (a prime, so it never lines up with chunk
/// sizes or powers of two).
pub const PERIOD: usize = 65_521;

/// The pattern period twice over, so any run of up to `PERIOD` bytes is one slice.
fn block() -> &'static [u8] {
    static BLOCK: OnceLock<Vec<u8>> = OnceLock::new();
    BLOCK.get_or_init(|| {
        let mut x: u32 = 0x9e37_79b9;
        let mut v: Vec<u8> = (0..PERIOD)
            .map(|_| {
                // xorshift32
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                (x >> 11) as u8
            })
            .collect();
        v.extend_from_within(..);
        v
    })
}

/// The pattern bytes `[pos, pos + len)`, in pieces of at most `PERIOD` bytes (no copies).
#[derive(Debug, Clone)]
pub struct PatternChunks {
    pos: u64,
    end: u64,
}

impl PatternChunks {
    /// Bytes `[start, end)` of the pattern.
    pub fn new(start: u64, end: u64) -> PatternChunks {
        PatternChunks { pos: start, end }
    }
}

impl Iterator for PatternChunks {
    type Item = Bytes;
    fn next(&mut self) -> Option<Bytes> {
        if self.pos >= self.end {
            return None;
        }
        let start = (self.pos % PERIOD as u64) as usize;
        let n = (self.end - self.pos).min(PERIOD as u64) as usize;
        self.pos += n as u64;
        Some(Bytes::from_static(&block()[start..start + n]))
    }
}

/// The pattern bytes `[0, len)` in one buffer (for small bodies only).
pub fn pattern(len: usize) -> Vec<u8> {
    let mut v = Vec::with_capacity(len);
    for chunk in PatternChunks::new(0, len as u64) {
        v.extend_from_slice(&chunk);
    }
    v
}

/// Checks, piece by piece, that a stream of bytes is the pattern from offset 0.
#[derive(Debug, Default)]
pub struct PatternCheck {
    /// Bytes checked so far.
    pub pos: u64,
}

impl PatternCheck {
    /// Checks the next bytes; `Err` names the first offset that differs.
    pub fn feed(&mut self, mut data: &[u8]) -> Result<(), u64> {
        while !data.is_empty() {
            let start = (self.pos % PERIOD as u64) as usize;
            let n = data.len().min(PERIOD);
            if data[..n] != block()[start..start + n] {
                let i = data[..n].iter().zip(&block()[start..start + n]).position(|(a, b)| a != b);
                return Err(self.pos + i.unwrap_or(0) as u64);
            }
            self.pos += n as u64;
            data = &data[n..];
        }
        Ok(())
    }
}

/// A running, order-sensitive checksum (Fletcher-style over little-endian 64-bit words)
/// and length; fed piece by piece, however the bytes are split.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Checksum {
    len: u64,
    a: u64,
    b: u64,
    partial: [u8; 8],
    partial_len: usize,
}

impl Checksum {
    /// Adds bytes.
    pub fn update(&mut self, mut data: &[u8]) {
        self.len += data.len() as u64;
        if self.partial_len > 0 {
            let take = (8 - self.partial_len).min(data.len());
            self.partial[self.partial_len..self.partial_len + take].copy_from_slice(&data[..take]);
            self.partial_len += take;
            data = &data[take..];
            if self.partial_len < 8 {
                return;
            }
            let w = u64::from_le_bytes(self.partial);
            self.word(w);
            self.partial_len = 0;
        }
        let mut words = data.chunks_exact(8);
        for w in &mut words {
            self.word(u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]));
        }
        let rest = words.remainder();
        self.partial[..rest.len()].copy_from_slice(rest);
        self.partial_len = rest.len();
    }

    fn word(&mut self, w: u64) {
        self.a = self.a.wrapping_add(w);
        self.b = self.b.wrapping_add(self.a);
    }

    /// Bytes seen.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// Whether no bytes were seen.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The checksum (length folded in), as hex.
    pub fn hex(&self) -> String {
        let mut tail = [0u8; 8];
        tail[..self.partial_len].copy_from_slice(&self.partial[..self.partial_len]);
        let a = self.a.wrapping_add(u64::from_le_bytes(tail));
        let b = self.b.wrapping_add(a);
        format!("{:016x}{:016x}-{}", a, b ^ self.len, self.len)
    }
}

/// The checksum of the pattern bytes `[0, len)`.
pub fn pattern_checksum(len: u64) -> Checksum {
    let mut c = Checksum::default();
    for chunk in PatternChunks::new(0, len) {
        c.update(&chunk);
    }
    c
}

/// `data` encoded with `encoding` (`gzip`, `deflate` (zlib), `br`).
pub async fn encode(encoding: &str, data: &[u8]) -> Vec<u8> {
    use async_compression::Level;
    use async_compression::tokio::bufread::{BrotliEncoder, GzipEncoder, ZlibEncoder};
    let mut out = Vec::new();
    let read = match encoding {
        "gzip" => GzipEncoder::with_quality(data, Level::Fastest).read_to_end(&mut out).await,
        "deflate" => ZlibEncoder::with_quality(data, Level::Fastest).read_to_end(&mut out).await,
        "br" => BrotliEncoder::with_quality(data, Level::Fastest).read_to_end(&mut out).await,
        other => panic!("no encoder for {other}"),
    };
    read.expect("encoding a test body");
    out
}

/// A robots.txt of exactly `len` bytes: each `(offset, text)` placed at its offset (in
/// increasing order), comment lines in between.
pub fn sized_body(len: usize, parts: &[(usize, &str)]) -> Vec<u8> {
    let mut body = Vec::with_capacity(len);
    for (at, text) in parts {
        assert!(body.len() <= *at, "parts overlap at {at}");
        fill_comments(&mut body, *at);
        body.extend_from_slice(text.as_bytes());
    }
    assert!(body.len() <= len);
    fill_comments(&mut body, len);
    assert_eq!(body.len(), len);
    body
}

/// Appends `# xxx…\n` lines up to `len` bytes (the last byte is a newline).
fn fill_comments(body: &mut Vec<u8>, len: usize) {
    while body.len() < len {
        let room = len - body.len();
        let line = room.min(100);
        if line == 1 {
            body.push(b'\n');
        } else {
            body.push(b'#');
            body.extend(std::iter::repeat_n(b'x', line - 2));
            body.push(b'\n');
        }
    }
}
