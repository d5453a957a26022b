//! [`SendBound`]: a client connection whose client accepts no byte of what it is sent for
//! `send_timeout` fails its write, and so ends. Without it, a client that asks for a large
//! answer and stops reading holds its connection (and the upstream connection its answer
//! comes on, and its place under `max_connections`) for as long as it likes: the kernel's
//! buffers fill and the write waits for good.
//!
//! A client that reads slowly but reads is not cut. The kernel says a socket is writable
//! again only once about a third of its send buffer has drained (megabytes on a fast
//! path), so a write can wait longer than the bound for a client that takes bytes all
//! along: when the bound runs out, the bytes the kernel still holds for the client
//! (`TIOCOUTQ`, Linux) are compared with those it held when the wait began, and a wait in
//! which they went down starts again. (nginx's `send_timeout` cuts such a client.)
//!
//! Reads pass through. A write that is accepted at once (nearly every one) costs a store.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use prometheus_client::metrics::counter::Counter;
use robotsgate::net::Stall;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// `io`, whose writes fail with [`io::ErrorKind::TimedOut`] once one has waited for the
/// bound (see the module).
#[derive(Debug)]
pub(crate) struct SendBound<IO> {
    io: IO,
    stall: Stall,
    /// The socket under `io`, whose unsent bytes tell a slow client from a gone one.
    socket: Option<Socket>,
    /// Its unsent bytes when the present wait began.
    unsent: Option<usize>,
    /// Counts the cut (`robotsgate_clients_cut_total{reason="send-timeout"}`); taken, so
    /// that the writes failing after it do not count again.
    cut: Option<Counter>,
}

#[cfg(unix)]
type Socket = std::os::fd::RawFd;
#[cfg(not(unix))]
type Socket = ();

impl SendBound<tokio::net::TcpStream> {
    /// `tcp`, each of whose writes may wait `limit` at most unless the client took bytes
    /// meanwhile (see the module).
    /// A cut is counted in `cut`.
    pub(crate) fn tcp(tcp: tokio::net::TcpStream, limit: Duration, cut: Counter) -> Self {
        #[cfg(unix)]
        let socket = Some(std::os::fd::AsRawFd::as_raw_fd(&tcp));
        #[cfg(not(unix))]
        let socket = None;
        SendBound { io: tcp, stall: Stall::new(limit), socket, unsent: None, cut: Some(cut) }
    }
}

impl<IO> SendBound<IO> {
    /// `io`, each of whose writes may wait `limit` at most.
    #[cfg(test)]
    pub(crate) fn new(io: IO, limit: Duration) -> SendBound<IO> {
        SendBound { io, stall: Stall::new(limit), socket: None, unsent: None, cut: None }
    }

    /// What a write (or flush or shutdown) came to, its wait bounded.
    fn bound<T>(&mut self, cx: &mut Context<'_>, polled: Poll<io::Result<T>>) -> Poll<io::Result<T>> {
        if polled.is_ready() {
            self.stall.moved();
            return polled;
        }
        if !self.stall.is_waiting() {
            self.unsent = self.socket.and_then(unsent);
        }
        loop {
            let Poll::Ready(stalled) = self.stall.wait(cx) else { return Poll::Pending };
            let now = self.socket.and_then(unsent);
            if let (Some(before), Some(now)) = (self.unsent, now)
                && now < before
            {
                // The client took bytes: a new wait.
                self.stall.moved();
                self.unsent = Some(now);
                continue;
            }
            tracing::debug!(after = ?stalled.0, "the client accepted nothing of its answer: closed");
            if let Some(cut) = self.cut.take() {
                cut.inc();
            }
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the client accepted nothing for send_timeout",
            )));
        }
    }
}

/// The bytes written to `socket` that the kernel has not sent, or that the peer has not
/// acknowledged (`TIOCOUTQ`); `None` where that cannot be asked.
#[cfg(target_os = "linux")]
fn unsent(socket: Socket) -> Option<usize> {
    let mut n: libc::c_int = 0;
    // SAFETY: `socket` is the descriptor of the stream this `SendBound` owns, open for its
    // life; TIOCOUTQ writes one int to the pointer given.
    let r = unsafe { libc::ioctl(socket, libc::TIOCOUTQ, &mut n) };
    (r == 0).then(|| usize::try_from(n).ok()).flatten()
}

#[cfg(not(target_os = "linux"))]
fn unsent(_: Socket) -> Option<usize> {
    None
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

    /// Over a real socket: the kernel says the socket is writable only once a third of its
    /// send buffer has drained, so a client reading 640 KB/s against a buffer of some
    /// 8 MB leaves the write waiting for seconds while it takes bytes all along. It is not
    /// cut; once it stops reading, it is.
    #[cfg(target_os = "linux")]
    #[tokio::test]
    async fn a_client_taking_bytes_slower_than_the_kernel_reports_room_is_not_cut() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.set_send_buffer_size(4 << 20).unwrap();
        let (near, far) = tokio::join!(socket.connect(listener.local_addr().unwrap()), listener.accept());
        let (near, (mut far, _)) = (near.unwrap(), far.unwrap());
        let counted = Counter::default();
        let mut near = SendBound::tcp(near, Duration::from_millis(500), counted.clone());
        let reading = std::time::Duration::from_millis(2500);
        let reader = tokio::spawn(async move {
            let started = std::time::Instant::now();
            let mut buf = vec![0u8; 64 * 1024];
            while started.elapsed() < reading {
                far.read_exact(&mut buf).await.unwrap();
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            (far, std::time::Instant::now())
        });
        let e = near.write_all(&vec![7u8; 64 << 20]).await.unwrap_err();
        let cut = std::time::Instant::now();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        let (_far, stopped) = reader.await.unwrap();
        assert!(cut > stopped, "cut while the client was reading, {:?} before it stopped", stopped - cut);
        // Counted once, whatever fails after it.
        assert!(near.write_all(b"more").await.is_err());
        let _ = near.shutdown().await;
        assert_eq!(counted.get(), 1);
    }
}
