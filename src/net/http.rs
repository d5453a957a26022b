//! What the library's own fetches (robots.txt files, crawler IP lists, key directories)
//! share once their request went through a [`Pool`](super::Pool): a body read decoded
//! within a size and a time.

use std::io;
use std::time::Duration;

#[cfg(feature = "brotli")]
use async_compression::tokio::bufread::BrotliDecoder;
use async_compression::tokio::bufread::{GzipDecoder, ZlibDecoder};
use bytes::Bytes;
use futures_util::TryStreamExt;
use http::header::CONTENT_ENCODING;
use http_body_util::BodyDataStream;
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio_util::io::StreamReader;

/// A body's error, boxed.
type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// An error of the body itself (the connection, the framing), as the reader sees it.
#[derive(Debug)]
struct Transport(BoxError);

impl std::fmt::Display for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.0.fmt(f)
    }
}

impl std::error::Error for Transport {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.0.source()
    }
}

/// The `Accept-Encoding` of requests whose bodies go through [`read_body`].
#[cfg(feature = "brotli")]
pub(crate) const ACCEPT_ENCODING: &str = "gzip, deflate, br";
/// The `Accept-Encoding` of requests whose bodies go through [`read_body`].
#[cfg(not(feature = "brotli"))]
pub(crate) const ACCEPT_ENCODING: &str = "gzip, deflate";

/// Why a body could not be read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum BodyError {
    /// Not all of it within the time.
    Timeout,
    /// Nothing more of it came for this long (the pool's `read_timeout`).
    Stalled(Duration),
    /// The connection broke or the framing was invalid.
    Transport(String),
    /// The content coding could not be decoded (or is not one we decode).
    Decode(String),
}

/// Reads `response`'s body decoded (`gzip`, `deflate`, `br` with the feature `brotli`), at most `limit` bytes of it
/// within `timeout`; the flag says the body went on past `limit` (the rest is not read).
pub(crate) async fn read_body<B>(
    response: http::Response<B>,
    limit: usize,
    timeout: Duration,
) -> Result<(Bytes, bool), BodyError>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    let encoding = response
        .headers()
        .get(CONTENT_ENCODING)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).trim().to_ascii_lowercase())
        .unwrap_or_default();
    let body = Box::pin(response.into_body());
    let stream = BodyDataStream::new(body).map_err(|e| io::Error::other(Transport(e.into())));
    let raw = StreamReader::new(stream);
    let mut reader: Box<dyn AsyncRead + Unpin + Send> = match encoding.as_str() {
        "" | "identity" => Box::new(raw),
        "gzip" | "x-gzip" => Box::new(GzipDecoder::new(raw)),
        "deflate" => Box::new(ZlibDecoder::new(raw)),
        #[cfg(feature = "brotli")]
        "br" => Box::new(BrotliDecoder::new(raw)),
        other => return Err(BodyError::Decode(format!("unsupported content-encoding {other:?}"))),
    };
    let mut buf = Vec::with_capacity(limit.min(64 * 1024));
    let mut limited = (&mut reader).take(limit as u64 + 1);
    match tokio::time::timeout(timeout, limited.read_to_end(&mut buf)).await {
        Err(_) => return Err(BodyError::Timeout),
        Ok(Err(e)) => return Err(body_error(e)),
        Ok(Ok(_)) => {}
    }
    let truncated = buf.len() > limit;
    buf.truncate(limit);
    Ok((Bytes::from(buf), truncated))
}

/// Classifies an error while reading the body: the transport (hyper) or the decoder.
fn body_error(e: io::Error) -> BodyError {
    let inner = e.get_ref().and_then(|inner| inner.downcast_ref::<Transport>());
    if let Some(super::PoolBodyError::Stalled(d)) = inner.and_then(|t| t.0.downcast_ref()) {
        return BodyError::Stalled(*d);
    }
    let transport = inner.is_some();
    if transport || e.kind() == io::ErrorKind::UnexpectedEof && e.get_ref().is_none() {
        BodyError::Transport(error_chain(&e))
    } else {
        BodyError::Decode(error_chain(&e))
    }
}

/// An error and its sources, joined with ": ".
pub(crate) fn error_chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let text = inner.to_string();
        if !s.contains(&text) {
            s.push_str(": ");
            s.push_str(&text);
        }
        source = inner.source();
    }
    s
}
