//! [`SendBound`]: a client connection whose client accepts no byte of what it is sent for
//! `send_timeout` fails its write, and so ends. Without it, a client that asks for a large
//! answer and stops reading holds its connection (and the upstream connection its answer
//! comes on, and its place under `max_connections`) for as long as it likes: the kernel's
//! buffers fill and the write waits for good. A client that reads slowly but reads is not
//! cut (as nginx's `send_timeout`: the bound is on each wait, not on the whole answer).
//!
//! Reads pass through. A write that is accepted at once (nearly every one) costs a store.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use robotsgate::net::Stall;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `io`, whose writes fail with [`io::ErrorKind::TimedOut`] once one has waited for the
/// bound (see the module).
#[derive(Debug)]
pub(crate) struct SendBound<IO> {
    io: IO,
    stall: Stall,
}

impl<IO> SendBound<IO> {
    /// `io`, each of whose writes may wait `limit` at most.
    pub(crate) fn new(io: IO, limit: Duration) -> SendBound<IO> {
        SendBound { io, stall: Stall::new(limit) }
    }

    /// What a write (or flush or shutdown) came to, its wait bounded.
    fn bound<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        match polled {
            Poll::Pending => self.stall.wait(cx).map(|stalled| {
                tracing::debug!(after = ?stalled.0, "the client accepted nothing of its answer: closed");
                Err(io::Error::new(io::ErrorKind::TimedOut, "the client accepted nothing for send_timeout"))
            }),
            ready => {
                self.stall.moved();
                ready
            }
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for SendBound<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_read(cx, buf)
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for SendBound<IO> {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write(cx, buf);
        this.bound(cx, polled)
    }

    #[inline]
    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        this.bound(cx, polled)
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_flush(cx);
        this.bound(cx, polled)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let polled = Pin::new(&mut this.io).poll_shutdown(cx);
        this.bound(cx, polled)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn a_client_that_reads_slowly_is_served_and_one_that_stops_is_cut() {
        let (near, mut far) = tokio::io::duplex(16);
        let mut near = SendBound::new(near, Duration::from_secs(10));
        // The far end reads 16 bytes every 9 s: never 10 s without taking a byte.
        let reader = tokio::spawn(async move {
            let mut got = 0;
            let mut buf = [0u8; 16];
            while got < 160 {
                tokio::time::sleep(Duration::from_secs(9)).await;
                got += far.read(&mut buf).await.unwrap();
            }
            far
        });
        near.write_all(&[7u8; 176]).await.expect("a slow reader is served");
        let _far = reader.await.unwrap();
        // Nobody reads any more: the buffer fills, and the write fails 10 s later.
        let started = tokio::time::Instant::now();
        let e = near.write_all(&[7u8; 64]).await.unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert_eq!(started.elapsed(), Duration::from_secs(10));
    }
}
