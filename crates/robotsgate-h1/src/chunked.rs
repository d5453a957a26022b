//! The chunked transfer coding read (RFC 9112 §7.1), one byte of framing at a time and
//! the data in slices.

use std::ops::Range;

use crate::H1Error;

/// Bytes a chunk-size line may have, its extensions included.
const MAX_SIZE_LINE: usize = 4096;

/// Reads a chunked body: given the bytes received, says which are data and where the
/// body ends. Chunk extensions are skipped; the trailer section is read and dropped.
/// Lines end in CRLF (a bare LF is an error: two readers must not disagree on where a
/// chunk ends), and the size line and the trailer section are bounded.
///
/// ```
/// use robotsgate_h1::{ChunkedDecoder, Decoded};
///
/// let mut body = &b"5;ext=1\r\nhello\r\n0\r\n\r\nHTTP/1.1 200 OK"[..];
/// let mut decoder = ChunkedDecoder::new(8192);
/// let mut data = Vec::new();
/// loop {
///     let (used, what) = decoder.decode(body)?;
///     match what {
///         Decoded::Data(range) => data.extend_from_slice(&body[range]),
///         Decoded::More => unreachable!("all of it is here"),
///         Decoded::End => {
///             body = &body[used..];
///             break;
///         }
///     }
///     body = &body[used..];
/// }
/// assert_eq!(data, b"hello");
/// assert_eq!(body, b"HTTP/1.1 200 OK"); // the next response
/// # Ok::<(), robotsgate_h1::H1Error>(())
/// ```
#[derive(Debug)]
pub struct ChunkedDecoder {
    state: State,
    /// The chunk size read so far, then the data left of the chunk.
    size: u64,
    /// Bytes of the current size line, or of the trailer section.
    line: usize,
    /// The trailer section's bound.
    max_trailers: usize,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// The chunk size's first hex digit.
    SizeStart,
    /// More hex digits, whitespace, `;` or CR.
    Size,
    /// Whitespace after the size: more of it, `;` or CR.
    SizeWs,
    /// A chunk extension, skipped until CR.
    Extension,
    /// The LF ending the size line.
    SizeLf,
    /// Chunk data (`size` bytes left).
    Data,
    /// The CR after chunk data.
    DataCr,
    /// The LF after chunk data.
    DataLf,
    /// The start of a trailer line, or the CR of the empty line ending the body.
    TrailerStart,
    /// Inside a trailer line, until CR.
    Trailer,
    /// The LF ending a trailer line.
    TrailerLf,
    /// The LF of the final empty line.
    EndLf,
    /// The body has ended.
    Done,
}

/// What [`ChunkedDecoder::decode`] found in the bytes it used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// Body data: these bytes of the input (the bytes used end with them).
    Data(Range<usize>),
    /// Framing only, all of the input used: more input is needed.
    More,
    /// The body has ended with the bytes used; what follows is not the body's.
    End,
}

impl ChunkedDecoder {
    /// A decoder for one body, whose trailer section may have up to `max_trailers` bytes.
    pub fn new(max_trailers: usize) -> ChunkedDecoder {
        ChunkedDecoder { state: State::SizeStart, size: 0, line: 0, max_trailers }
    }

    /// Whether the body has ended.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Reads from the start of `input` up to the end of the next piece of data, or the end
    /// of the body, or the end of `input`: the bytes used and what they held. The caller
    /// drops the bytes used and calls again with what follows (and more, once received).
    pub fn decode(&mut self, input: &[u8]) -> Result<(usize, Decoded), H1Error> {
        let mut at = 0;
        while at < input.len() {
            if self.state == State::Data {
                let len = usize::try_from(self.size).unwrap_or(usize::MAX).min(input.len() - at);
                self.size -= len as u64;
                if self.size == 0 {
                    self.state = State::DataCr;
                }
                return Ok((at + len, Decoded::Data(at..at + len)));
            }
            let b = input[at];
            at += 1;
            self.state = match self.state {
                State::SizeStart | State::Size => match hex(b) {
                    Some(d) => {
                        if self.size > u64::MAX >> 4 {
                            return Err(H1Error::Chunk("chunk size too large"));
                        }
                        self.size = self.size << 4 | u64::from(d);
                        self.size_line()?;
                        State::Size
                    }
                    None if self.state == State::SizeStart => return Err(H1Error::Chunk("no chunk size")),
                    None => self.after_size(b)?,
                },
                State::SizeWs => self.after_size(b)?,
                State::Extension => {
                    self.size_line()?;
                    match b {
                        b'\r' => State::SizeLf,
                        b'\n' => return Err(H1Error::Chunk("bare LF in a chunk extension")),
                        _ => State::Extension,
                    }
                }
                State::SizeLf => {
                    if b != b'\n' {
                        return Err(H1Error::Chunk("CR without LF after a chunk size"));
                    }
                    self.line = 0;
                    if self.size == 0 { State::TrailerStart } else { State::Data }
                }
                State::DataCr if b == b'\r' => State::DataLf,
                State::DataLf if b == b'\n' => State::SizeStart,
                State::DataCr | State::DataLf => {
                    return Err(H1Error::Chunk("chunk data not followed by CRLF"));
                }
                State::TrailerStart => {
                    self.trailer_byte()?;
                    match b {
                        b'\r' => State::EndLf,
                        b'\n' => return Err(H1Error::Chunk("bare LF in the trailer section")),
                        _ => State::Trailer,
                    }
                }
                State::Trailer => {
                    self.trailer_byte()?;
                    match b {
                        b'\r' => State::TrailerLf,
                        b'\n' => return Err(H1Error::Chunk("bare LF in the trailer section")),
                        _ => State::Trailer,
                    }
                }
                State::TrailerLf if b == b'\n' => State::TrailerStart,
                State::TrailerLf => return Err(H1Error::Chunk("CR without LF in the trailer section")),
                State::EndLf if b == b'\n' => {
                    self.state = State::Done;
                    return Ok((at, Decoded::End));
                }
                State::EndLf => return Err(H1Error::Chunk("CR without LF at the end of the body")),
                State::Data => unreachable!("data is taken above"),
                State::Done => {
                    return Ok((at - 1, Decoded::End));
                }
            };
        }
        if self.state == State::Done {
            return Ok((at, Decoded::End));
        }
        Ok((at, Decoded::More))
    }

    /// The state after the size's digits, at `b`.
    fn after_size(&mut self, b: u8) -> Result<State, H1Error> {
        self.size_line()?;
        Ok(match b {
            b' ' | b'\t' => State::SizeWs,
            b';' => State::Extension,
            b'\r' => State::SizeLf,
            _ => return Err(H1Error::Chunk("unexpected byte after a chunk size")),
        })
    }

    fn size_line(&mut self) -> Result<(), H1Error> {
        self.line += 1;
        if self.line > MAX_SIZE_LINE {
            return Err(H1Error::Chunk("chunk size line too long"));
        }
        Ok(())
    }

    fn trailer_byte(&mut self) -> Result<(), H1Error> {
        self.line += 1;
        if self.line > self.max_trailers {
            return Err(H1Error::Chunk("trailer section too long"));
        }
        Ok(())
    }
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes (each call given all that is received
    /// and not used yet): the data, and the bytes left after the body.
    fn decode_in_steps(input: &[u8], step: usize) -> Result<(Vec<u8>, Vec<u8>), H1Error> {
        let mut decoder = ChunkedDecoder::new(64);
        let (mut data, mut pending, mut fed) = (Vec::new(), Vec::new(), 0);
        while !decoder.is_done() {
            if fed == input.len() {
                return Err(H1Error::Chunk("input ended"));
            }
            let end = (fed + step).min(input.len());
            pending.extend_from_slice(&input[fed..end]);
            fed = end;
            loop {
                let (used, what) = decoder.decode(&pending)?;
                if let Decoded::Data(r) = &what {
                    data.extend_from_slice(&pending[r.clone()]);
                }
                pending.drain(..used);
                if !matches!(what, Decoded::Data(_)) || pending.is_empty() {
                    break;
                }
            }
        }
        pending.extend_from_slice(&input[fed..]);
        Ok((data, pending))
    }

    #[test]
    fn bodies_decode_the_same_whatever_the_pieces() {
        let cases: [(&[u8], &[u8]); 5] = [
            (b"0\r\n\r\n", b""),
            (b"5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n", b"hello world"),
            (b"A;name=value;x\r\n0123456789\r\n0 ; last\r\n\r\n", b"0123456789"),
            (b"00003\t \r\nabc\r\n0\r\nExpires: never\r\nX: y\r\n\r\n", b"abc"),
            (b"1\r\n\r\r\n0\r\n\r\n", b"\r"),
        ];
        for (input, expected) in cases {
            let mut framed = input.to_vec();
            framed.extend_from_slice(b"NEXT");
            for step in 1..=framed.len() {
                let (data, rest) = decode_in_steps(&framed, step).unwrap();
                assert_eq!(data, expected, "{:?} in steps of {step}", String::from_utf8_lossy(input));
                assert_eq!(rest, b"NEXT", "{:?} in steps of {step}", String::from_utf8_lossy(input));
            }
        }
    }

    #[test]
    fn broken_framing_is_an_error() {
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\r\nhelloX\r\n0\r\n\r\n",
            b"5\r\nhello\n0\r\n\r\n",
            b"5 5\r\nhello\r\n",
            b"5;a\nhello",
            b"0\r\nX: y\n\r\n",
            b"0\r\n\n",
            b"0\r\n\rX",
            b"10000000000000000\r\n",
            b"-1\r\n",
            b"0x5\r\n",
        ] {
            assert!(
                matches!(decode_in_steps(bad, bad.len()), Err(H1Error::Chunk(_))),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }

    #[test]
    fn the_size_line_and_the_trailers_are_bounded() {
        let long_ext = format!("1;{}\r\na\r\n0\r\n\r\n", "e".repeat(MAX_SIZE_LINE));
        assert_eq!(
            decode_in_steps(long_ext.as_bytes(), 100),
            Err(H1Error::Chunk("chunk size line too long"))
        );
        let leading_zeros = format!("{}1\r\na\r\n0\r\n\r\n", "0".repeat(MAX_SIZE_LINE));
        assert_eq!(
            decode_in_steps(leading_zeros.as_bytes(), 100),
            Err(H1Error::Chunk("chunk size line too long"))
        );
        let trailers = format!("0\r\n{}\r\n\r\n", "t".repeat(64));
        assert_eq!(
            decode_in_steps(trailers.as_bytes(), 100),
            Err(H1Error::Chunk("trailer section too long"))
        );
    }

    #[test]
    fn the_largest_size_is_read_and_data_comes_in_slices() {
        let mut decoder = ChunkedDecoder::new(64);
        assert_eq!(decoder.decode(b"ffffffffffffffff\r\nab").unwrap(), (20, Decoded::Data(18..20)));
        assert_eq!(decoder.decode(b"cd").unwrap(), (2, Decoded::Data(0..2)));
        assert!(!decoder.is_done());
    }
}
