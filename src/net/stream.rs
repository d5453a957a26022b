//! [`Stream`]: a plain or TLS connection to an origin, as hyper-util's client takes it.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use hyper_util::client::legacy::connect::{Connected, Connection};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A plain or TLS connection to an origin.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Plain(TcpStream),
    /// TLS over TCP (directly, or through a forward proxy's `CONNECT` tunnel).
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
    /// TCP to a forward proxy, for plain-http requests, which go to it in absolute form
    /// (see [`Proxies`](super::Proxies)).
    Proxied(TcpStream),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) | Stream::Proxied(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }

    /// Registers the connection with the current runtime's event loop instead of the one it
    /// was registered with (where it was opened): a copy of its socket (`dup`) goes to this
    /// loop, and the old one leaves the other loop and is closed; the connection, its TLS
    /// state and its socket options stay. Nothing must be waiting on the stream.
    ///
    /// # Panics
    ///
    /// Outside a tokio runtime with I/O enabled, as [`TcpStream::from_std`].
    pub(crate) fn rehome(&mut self) -> io::Result<()> {
        use std::os::fd::AsFd;
        let tcp = match self {
            Stream::Plain(s) | Stream::Proxied(s) => s,
            Stream::Tls(s) => s.get_mut().0,
        };
        // The copy shares the open socket, its non-blocking mode included.
        let copy = std::net::TcpStream::from(tcp.as_fd().try_clone_to_owned()?);
        drop(std::mem::replace(tcp, TcpStream::from_std(copy)?));
        Ok(())
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        let connected = self.tcp().connected();
        match self {
            Stream::Tls(s) if s.get_ref().1.alpn_protocol() == Some(b"h2") => connected.negotiated_h2(),
            // hyper-util's client then sends requests in absolute form.
            Stream::Proxied(_) => connected.proxy(true),
            _ => connected,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) | Stream::Proxied(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) | Stream::Proxied(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) | Stream::Proxied(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) | Stream::Proxied(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) | Stream::Proxied(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) | Stream::Proxied(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}
