//! The pure parts of robotsgate's HTTP/1.1 fast path (see `docs/http1-fast-path.md`).
//!
//! To origins: a request head written ([`encode_request_head`]), a response head read
//! ([`read_response_head`]), the response body's framing decided ([`response_framing`],
//! RFC 9112 §6.3) and a chunked body decoded ([`ChunkedDecoder`]).
//!
//! From clients: a request head read if it has the common shape ([`read_request_head`];
//! any other is left in the buffer for hyper), and a response head written as hyper's
//! server writes it ([`encode_response_head`]).
//!
//! No I/O and no async: the proxy's connection code feeds these bytes and acts on what they
//! say. Everything a peer sends is bounded (head size, header count, chunk-size line,
//! trailer section), and every doubt about where a message ends is an error: the caller
//! then closes the connection rather than read the next response from the wrong place.
//!
//! ```
//! use bytes::BytesMut;
//! use http::HeaderMap;
//! use robotsgate_h1::{Framing, read_response_head, response_framing};
//!
//! let mut buf = BytesMut::from(&b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello"[..]);
//! let mut headers = HeaderMap::new();
//! let head = read_response_head(&mut buf, 8192, &mut headers)?.expect("a whole head");
//! assert_eq!(head.status, 200);
//! let framing = response_framing(false, &head, &headers)?;
//! assert_eq!(framing.framing, Framing::Length(5));
//! assert!(framing.reusable);
//! assert_eq!(&buf[..], b"hello");
//! # Ok::<(), robotsgate_h1::H1Error>(())
//! ```

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod chunked;
mod framing;
mod names;
mod request;
mod response;
mod server;

pub use chunked::{ChunkedDecoder, Decoded};
pub use framing::{BodyFraming, Framing, bodiless, check_bodiless_length, response_framing};
pub use request::encode_request_head;
pub use response::{MAX_HEADERS, ResponseHead, read_response_head};
pub use server::{
    BodySize, Delimited, MAX_TARGET_LEN, RequestHead, RequestRead, ResponseFraming, ResponseParts,
    encode_response_head, read_request_head,
};

/// Why a response cannot be read on: the exchange fails and its connection is closed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum H1Error {
    /// The response head is not HTTP/1.x as httparse reads it.
    #[error("malformed response head: {0}")]
    Head(httparse::Error),
    /// The response head is longer than the limit.
    #[error("response head longer than {0} bytes")]
    HeadTooLarge(usize),
    /// A header name or value that `http` does not take.
    #[error("response header {0:?} is not valid")]
    Header(String),
    /// `Content-Length` is not one non-negative decimal number (repeated alike, if at all).
    #[error("response Content-Length is not valid: {0:?}")]
    ContentLength(String),
    /// `Transfer-Encoding` in an HTTP/1.0 response: its framing cannot be trusted
    /// (RFC 9112 §6.1).
    #[error("Transfer-Encoding in an HTTP/1.0 response")]
    TransferEncodingInHttp10,
    /// A `101 Switching Protocols` to a request that asked for no upgrade.
    #[error("101 Switching Protocols to a request that asked for no upgrade")]
    UnexpectedSwitch,
    /// A chunked body that breaks the chunked coding.
    #[error("malformed chunked body: {0}")]
    Chunk(&'static str),
}
