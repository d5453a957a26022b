//! How long a connection served inside a tunnel may stay quiet: no byte either way and no
//! request being answered. hyper bounds the wait for an HTTP/1.1 request head, but not the
//! read that tells HTTP/1.1 from HTTP/2 before it, nor an HTTP/2 connection without a
//! stream: a client could hold an intercepted tunnel (a socket, a TLS session) for good
//! after its handshake.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// What a connection did: how often bytes moved, how many requests are being answered.
#[derive(Clone, Debug, Default)]
pub(crate) struct Activity(Arc<Counts>);

#[derive(Debug, Default)]
struct Counts {
    moved: AtomicU64,
    busy: AtomicUsize,
}

impl Activity {
    /// `io`, counting each read and write that moves bytes.
    pub(crate) fn watch<IO>(&self, io: IO) -> Watched<IO> {
        Watched { io, activity: self.clone() }
    }

    /// Marks a request being answered until the guard is dropped.
    pub(crate) fn busy(&self) -> Busy {
        self.0.busy.fetch_add(1, Ordering::Relaxed);
        Busy(self.clone())
    }

    /// Returns once the connection was quiet (no bytes, no request) for `idle`: between
    /// `idle` and half as long again after it became so.
    pub(crate) async fn quiet_for(&self, idle: Duration) {
        let tick = idle / 4 + Duration::from_millis(1);
        let mut last = self.0.moved.load(Ordering::Relaxed);
        // Quiet since at least the last tick (`Some`): how long since then.
        let mut quiet: Option<Duration> = None;
        loop {
            tokio::time::sleep(tick).await;
            let moved = self.0.moved.load(Ordering::Relaxed);
            if moved != last || self.0.busy.load(Ordering::Relaxed) > 0 {
                last = moved;
                quiet = None;
                continue;
            }
            // The first quiet tick: quiet since some time in the tick before it.
            let q = quiet.map_or(Duration::ZERO, |q| q + tick);
            if q >= idle {
                return;
            }
            quiet = Some(q);
        }
    }
}

/// A request being answered ([`Activity::busy`]).
#[derive(Debug)]
pub(crate) struct Busy(Activity);

impl Drop for Busy {
    fn drop(&mut self) {
        self.0.0.busy.fetch_sub(1, Ordering::Relaxed);
    }
}

/// An I/O object whose reads and writes count as activity.
#[derive(Debug)]
pub(crate) struct Watched<IO> {
    io: IO,
    activity: Activity,
}

impl<IO> Watched<IO> {
    fn moved(&self, n: usize) {
        if n > 0 {
            self.activity.0.moved.fetch_add(1, Ordering::Relaxed);
        }
    }
}

impl<IO: AsyncRead + Unpin> AsyncRead for Watched<IO> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let r = Pin::new(&mut this.io).poll_read(cx, buf);
        this.moved(buf.filled().len() - before);
        r
    }
}

impl<IO: AsyncWrite + Unpin> AsyncWrite for Watched<IO> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write(cx, buf);
        if let Poll::Ready(Ok(n)) = r {
            this.moved(n);
        }
        r
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let r = Pin::new(&mut this.io).poll_write_vectored(cx, bufs);
        if let Poll::Ready(Ok(n)) = r {
            this.moved(n);
        }
        r
    }

    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[tokio::test(start_paused = true)]
    async fn quiet_means_no_bytes_and_no_request() {
        let activity = Activity::default();
        let (a, mut b) = tokio::io::duplex(64);
        let mut a = activity.watch(a);
        let idle = Duration::from_secs(8);
        let started = tokio::time::Instant::now();
        // Bytes every 5 s, then a request answered for 20 s: never quiet for 8 s.
        let talk = async {
            for _ in 0..4 {
                tokio::time::sleep(Duration::from_secs(5)).await;
                b.write_all(b"x").await.unwrap();
                let mut one = [0u8; 1];
                a.read_exact(&mut one).await.unwrap();
            }
            let busy = activity.busy();
            tokio::time::sleep(Duration::from_secs(20)).await;
            drop(busy);
            std::future::pending::<()>().await;
        };
        tokio::select! {
            () = talk => unreachable!(),
            () = activity.quiet_for(idle) => {}
        }
        let took = started.elapsed();
        assert!(took >= Duration::from_secs(40 + 8), "closed after {took:?}");
        assert!(took <= Duration::from_secs(40 + 8 + 4), "closed after {took:?}");
    }
}
