//! [`read_head`]: one HTTP/1.1 message head read off a connection, for the raw servers of
//! the tests (origins and proxies that read bytes themselves rather than through hyper).

use tokio::io::{AsyncRead, AsyncReadExt};

/// The most a head may take before [`read_head`] gives up on the connection.
pub const HEAD_LIMIT: usize = 64 * 1024;

/// Reads from `io` into `buf` until `buf` holds a whole message head (up to and including
/// its blank line), then takes that head off the front of `buf` and returns it; what came
/// after it (a body, the next request) stays in `buf`. `None` when the connection ends or
/// fails first, or when `buf` grows past [`HEAD_LIMIT`] without a head.
///
/// ```
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let mut io: &[u8] = b"GET / HTTP/1.1\r\nHost: a\r\n\r\nnext";
/// let mut buf = Vec::new();
/// let head = robotsgate_testkit::read_head(&mut io, &mut buf).await;
/// assert_eq!(head.as_deref(), Some(&b"GET / HTTP/1.1\r\nHost: a\r\n\r\n"[..]));
/// assert_eq!(buf, b"next");
/// assert_eq!(robotsgate_testkit::read_head(&mut io, &mut buf).await, None);
/// # });
/// ```
pub async fn read_head<R: AsyncRead + Unpin>(io: &mut R, buf: &mut Vec<u8>) -> Option<Vec<u8>> {
    let mut scanned: usize = 0;
    loop {
        // Only the bytes new since the last look (and the three before them) are searched.
        let from = scanned.saturating_sub(3);
        if let Some(at) = buf[from..].windows(4).position(|w| w == b"\r\n\r\n") {
            return Some(buf.drain(..from + at + 4).collect());
        }
        if buf.len() > HEAD_LIMIT {
            return None;
        }
        scanned = buf.len();
        let mut chunk = [0u8; 4096];
        match io.read(&mut chunk).await {
            Ok(0) | Err(_) => return None,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}
