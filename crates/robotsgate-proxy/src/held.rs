//! [`Held`]: the client side of a tunnel whose first bytes are held back until they are
//! judged. A tunnel whose server spoke first (a protocol that greets its client) is
//! handed over before its client has said anything; what the client then sends first
//! could still be a ClientHello for another host, or an HTTP request, which no check
//! would see in an opaque tunnel. Its first bytes are read and kept (not passed to the
//! server) until the judge says: go on (they are then handed on as they came), or no (the
//! read fails, and the tunnel ends; the judge records why and may give an answer to write
//! to the client first, such as a TLS alert).
//!
//! Writes pass through, so the server's bytes reach the client while its own are held.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::prefixed::Prefixed;

/// What a judge says of the first bytes so far: `None` while more could change it;
/// `Some(Ok(()))` to let them through; `Some(Err(answer))` to refuse, with what to write
/// to the client first, if anything.
pub(crate) type Verdict = Option<Result<(), Option<[u8; 7]>>>;

/// Judges a tunnel's first bytes (see the module).
pub(crate) type Judge = Box<dyn FnMut(&[u8]) -> Verdict + Send>;

/// `io`, whose first bytes are held until judged ([`Held::judged_by`]), or passed as they
/// come ([`Held::open`]). Bytes let through are handed on as `io`'s prefix.
pub(crate) struct Held<IO> {
    io: Prefixed<IO>,
    hold: Option<Box<Hold>>,
}

struct Hold {
    bytes: Vec<u8>,
    /// Refused: every read fails.
    refused: bool,
    judge: Judge,
}

impl<IO> Held<IO> {
    /// `io`, nothing held.
    pub(crate) fn open(io: Prefixed<IO>) -> Held<IO> {
        Held { io, hold: None }
    }

    /// `io`, its first bytes (its prefix's first) held until `judge` lets them through.
    pub(crate) fn judged_by(io: Prefixed<IO>, judge: Judge) -> Held<IO> {
        Held { io, hold: Some(Box::new(Hold { bytes: Vec::new(), refused: false, judge })) }
    }

    /// Lets what was held through: handed on ahead of what `io` still has.
    fn let_through(&mut self) {
        let Some(hold) = self.hold.take() else { return };
        let rest = std::mem::take(&mut self.io.prefix);
        let mut ahead = hold.bytes;
        ahead.extend_from_slice(&rest);
        self.io.prefix = Bytes::from(ahead);
    }
}

fn refused() -> io::Error {
    io::Error::new(io::ErrorKind::PermissionDenied, "the tunnel's first bytes were refused")
}

impl<IO: AsyncRead + AsyncWrite + Unpin> AsyncRead for Held<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            let Some(hold) = &mut this.hold else {
                return Pin::new(&mut this.io).poll_read(cx, buf);
            };
            if hold.refused {
                return Poll::Ready(Err(refused()));
            }
            let mut room = [0u8; 2048];
            let mut read = ReadBuf::new(&mut room);
            ready!(Pin::new(&mut this.io).poll_read(cx, &mut read))?;
            if read.filled().is_empty() {
                // The client closed before a verdict: what it sent goes on, then its end.
                this.let_through();
                continue;
            }
            hold.bytes.extend_from_slice(read.filled());
            match (hold.judge)(&hold.bytes) {
                None => {}
                Some(Ok(())) => this.let_through(),
                Some(Err(answer)) => {
                    hold.refused = true;
                    if let Some(answer) = answer {
                        // Once, as far as the socket takes it now: the tunnel ends anyway.
                        let _ = Pin::new(&mut this.io).poll_write(cx, &answer);
                    }
                    return Poll::Ready(Err(refused()));
                }
            }
        }
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Held<IO> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    fn plain<IO>(inner: IO) -> Prefixed<IO> {
        Prefixed { prefix: Bytes::new(), inner }
    }

    /// Lets through what does not start with `b'!'`; refuses what does once it has a
    /// newline, with `NO` as its answer.
    fn judge() -> Judge {
        Box::new(|first: &[u8]| {
            if first[0] != b'!' {
                return Some(Ok(()));
            }
            first.contains(&b'\n').then_some(Err(Some(*b"NO\r\n\0\0\0")))
        })
    }

    #[tokio::test]
    async fn first_bytes_are_held_until_judged_then_handed_on_whole() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut held = Held::judged_by(plain(near), judge());
        far.write_all(b"hello").await.unwrap();
        far.write_all(b" world").await.unwrap();
        drop(far);
        let mut got = Vec::new();
        held.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"hello world");
    }

    #[tokio::test]
    async fn refused_bytes_never_come_out_and_the_answer_goes_back() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut held = Held::judged_by(plain(near), judge());
        far.write_all(b"!no").await.unwrap();
        far.write_all(b"t this\nmore").await.unwrap();
        let mut got = [0u8; 32];
        let e = held.read(&mut got).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::PermissionDenied);
        assert_eq!(held.read(&mut got).await.unwrap_err().kind(), io::ErrorKind::PermissionDenied);
        let mut answer = [0u8; 7];
        far.read_exact(&mut answer).await.unwrap();
        assert_eq!(&answer, b"NO\r\n\0\0\0");
    }

    #[tokio::test]
    async fn a_client_that_closes_before_a_verdict_has_its_bytes_handed_on() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut held = Held::judged_by(plain(near), judge());
        far.write_all(b"!half").await.unwrap();
        drop(far);
        let mut got = Vec::new();
        held.read_to_end(&mut got).await.unwrap();
        assert_eq!(got, b"!half");
    }

    #[tokio::test]
    async fn writes_pass_while_reads_are_held() {
        let (near, mut far) = tokio::io::duplex(64);
        let mut held = Held::judged_by(plain(near), judge());
        held.write_all(b"220 hi\r\n").await.unwrap();
        let mut greeting = [0u8; 8];
        far.read_exact(&mut greeting).await.unwrap();
        assert_eq!(&greeting, b"220 hi\r\n");
        // Nothing held when open.
        let (near, mut far) = tokio::io::duplex(64);
        let mut open = Held::open(plain(near));
        far.write_all(b"!x").await.unwrap();
        let mut two = [0u8; 2];
        open.read_exact(&mut two).await.unwrap();
        assert_eq!(&two, b"!x");
    }
}
