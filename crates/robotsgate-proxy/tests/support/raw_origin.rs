//! [`RawOrigin`]: an origin on loopback that answers with the bytes a test gives, framings
//! a hyper origin never sends included.

use std::sync::{Arc, Mutex};

use robotsgate_testkit::read_head;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// An origin that answers each path with the bytes it is given, as they are (a hyper
/// origin never sends some of these framings). It records each request's path, the
/// connection it came on and its head as received. It closes a connection after an answer
/// marked so.
pub struct RawOrigin {
    pub addr: std::net::SocketAddr,
    seen: Arc<Mutex<Vec<(String, usize, String)>>>,
}

/// What a raw origin sends for a path: the bytes, and whether it then closes.
pub type Script = fn(&str) -> (Vec<u8>, bool);

impl RawOrigin {
    /// Starts one that answers `/robots.txt` with `robots`, and every other path as
    /// `script` says.
    pub async fn start(robots: &'static str, script: Script) -> RawOrigin {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            let mut connection = 0;
            while let Ok((mut tcp, _)) = listener.accept().await {
                connection += 1;
                let log = log.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        let Some(head) = read_head(&mut tcp, &mut buf).await else { return };
                        let head = String::from_utf8_lossy(&head[..head.len() - 4]).into_owned();
                        // The request's body, read and dropped: by its length, or chunked.
                        loop {
                            match body_len(&head, &buf) {
                                Some(Ok(len)) => {
                                    buf.drain(..len);
                                    break;
                                }
                                Some(Err(())) => return,
                                None => {
                                    let mut chunk = [0u8; 4096];
                                    match tcp.read(&mut chunk).await {
                                        Ok(0) | Err(_) => return,
                                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                                    }
                                }
                            }
                        }
                        let path = head.split(' ').nth(1).unwrap_or("").to_owned();
                        log.lock().unwrap().push((path.clone(), connection, head));
                        let (answer, close) =
                            if path == "/robots.txt" { (ok(robots), false) } else { script(&path) };
                        if tcp.write_all(&answer).await.is_err() || close {
                            return;
                        }
                    }
                });
            }
        });
        RawOrigin { addr, seen }
    }

    /// `http://addr{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The connection the last request for `path` came on.
    pub fn connection_of(&self, path: &str) -> usize {
        let seen = self.seen.lock().unwrap();
        seen.iter().rev().find(|(p, _, _)| p == path).map(|(_, c, _)| *c).expect("a request for the path")
    }

    /// The heads of the requests for `path`, as received, in order.
    pub fn heads(&self, path: &str) -> Vec<String> {
        let seen = self.seen.lock().unwrap();
        seen.iter().filter(|(p, _, _)| p == path).map(|(_, _, h)| h.clone()).collect()
    }

    /// How many requests for `path` came.
    pub fn hits(&self, path: &str) -> usize {
        self.seen.lock().unwrap().iter().filter(|(p, _, _)| p == path).count()
    }
}

/// How many bytes at the front of `buf` are the body of the request with `head`: `None`
/// while more are needed, an error when the body is malformed (the connection is dropped).
fn body_len(head: &str, buf: &[u8]) -> Option<Result<usize, ()>> {
    if field(head, "transfer-encoding").is_some_and(|te| te.ends_with("chunked")) {
        return dechunk(buf).map(|whole| whole.map(|(_, used)| used)).transpose();
    }
    match field(head, "content-length").map(|l| l.parse::<usize>()) {
        Some(Ok(len)) if buf.len() < len => None,
        Some(Ok(len)) => Some(Ok(len)),
        Some(Err(_)) => Some(Err(())),
        None => Some(Ok(0)),
    }
}

/// The value of the field `name` (the first such line) in the message head `head`,
/// trimmed and in lower case.
pub fn field(head: &str, name: &str) -> Option<String> {
    head.split("\r\n").skip(1).find_map(|line| {
        let (n, v) = line.split_once(':')?;
        n.trim().eq_ignore_ascii_case(name).then(|| v.trim().to_ascii_lowercase())
    })
}

/// A chunked body at the front of `bytes`: when it is whole, its content and the bytes it
/// took (trailer section included); `None` while it is cut short; an error when it is
/// malformed.
pub fn dechunk(bytes: &[u8]) -> Result<Option<(Vec<u8>, usize)>, ()> {
    let line_at = |at: usize| bytes[at..].windows(2).position(|w| w == b"\r\n").map(|n| at + n);
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let Some(line_end) = line_at(at) else { return Ok(None) };
        let line = std::str::from_utf8(&bytes[at..line_end]).map_err(drop)?;
        let size = usize::from_str_radix(line.split(';').next().unwrap_or("").trim(), 16).map_err(drop)?;
        at = line_end + 2;
        if size == 0 {
            // Trailer lines, then the empty line.
            loop {
                let Some(end) = line_at(at) else { return Ok(None) };
                let empty = end == at;
                at = end + 2;
                if empty {
                    return Ok(Some((body, at)));
                }
            }
        }
        let Some(data) = bytes.get(at..at + size) else { return Ok(None) };
        body.extend(data);
        at += size;
        match bytes.get(at..at + 2) {
            None => return Ok(None),
            Some(b"\r\n") => at += 2,
            Some(_) => return Err(()),
        }
    }
}

/// An answer with a reason phrase of its own and fields a proxy must pass on as they
/// are: names in mixed case, a name repeated apart, two `Set-Cookie`.
pub const FIELDS: &[u8] = b"HTTP/1.1 200 Fine Thanks\r\nX-One: 1\r\nx-two: a\r\nContent-Type: text/plain\r\n\
    X-Two: b\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\nContent-Length: 4\r\n\r\nbody";

/// `200` with `body` and its length.
pub fn ok(body: &str) -> Vec<u8> {
    format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n{body}", body.len()).into_bytes()
}
