//! `CONNECT` to a port that is not intercepted (and not 443, nor a host on the interception
//! bypass list, which are known to be TLS and checked before the `200` as they always
//! were): the proxy connects to the
//! target, answers `200`, and then reads the client's first bytes to see what the tunnel
//! carries, since the port does not say (`ws://host:8080` opened with `CONNECT`, HTTPS on
//! 8443):
//!
//! - a TLS handshake: its ClientHello must ask for the host (`crate::server_name`), then
//!   the host is checked (`/` on `https://host:port`) and the bytes are tunnelled; when it is refused (whatever the reason: robots.txt, the guard, robots.txt
//!   unreachable, pacing, the audit log) the client gets the fatal TLS alert
//!   `access_denied` instead of a handshake, since an HTTP answer is no longer possible
//!   after the `200`; the audit record says why;
//! - plain HTTP (any request line, whatever its method, after empty lines; also the start
//!   of one that stalls): the tunnel is served as an HTTP connection to
//!   `http://host:port`, each request checked on its path like one sent to the listener
//!   (better than the host); a `CONNECT` inside is refused (`400`);
//! - anything else, or the server's bytes before any of the client's (a protocol whose
//!   server speaks first): the host is checked as before (`/` on `https://host:port`,
//!   `http://` for port 80) and the bytes are tunnelled;
//! - nothing either way within `proxy.tunnel_idle_timeout`: closed, with a refusal record
//!   (the client's silence alone never hands a tunnel over unread).
//!
//! The audit record's `transport` says which (`connect-tls`, `connect-http`,
//! `connect-opaque`). A destination the guard refuses, or that cannot be reached, is still
//! answered before the `200` (`403`, `502`, `504`).

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, Response};
use hyper_util::rt::TokioIo;
use robotsgate::net::PoolRequestBody as ClientBody;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::shared::Shared;
use crate::forward::{PreConnected, ProxyBody, boxed, connect_refusal};
use crate::held::Held;
use crate::intercept;
use crate::prefixed::Prefixed;
use crate::server_name::{Tunnel, access_denied_alert, hello_record_version};
use crate::slot::Slot;
use robotsgate::Refusal;
use robotsgate::layer::{Mode, Transport};
use robotsgate::net::ConnectError;
use robotsgate::origin::{Origin, Scheme};

/// What the first bytes of a tunnel say it carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Carries {
    /// A TLS record (a ClientHello).
    Tls,
    /// An HTTP/1.x request line (or the HTTP/2 connection preface).
    Http,
    /// Neither.
    Other,
}

/// At most this many first bytes are read to tell what a tunnel carries: a request line
/// still undecided past them (a long method or target) is served as HTTP, whose own limits
/// then apply.
const SNIFF_LIMIT: usize = 8 * 1024;

/// What `first` (the bytes read so far) says; `None` while more bytes could change it.
///
/// HTTP is any request line (RFC 9112 §3), not a list of methods: empty lines first
/// (§2.2: servers ignore them), then a method token (any: `QUERY`, `PROPFIND`, `get`),
/// a space, and a target in origin form (`/`) or asterisk form (`*`); another target
/// (absolute or authority form) once ` HTTP/` follows it. A tunnel of another protocol whose
/// first line has that shape is served as HTTP and gets `400`: reading real HTTP as
/// something else would judge its requests on `/` alone.
pub(super) fn classify(first: &[u8]) -> Option<Carries> {
    if first.first() == Some(&0x16) {
        return Some(Carries::Tls);
    }
    let line = &first[first.iter().position(|&b| b != b'\r' && b != b'\n')?..];
    let method = line.iter().take_while(|&&b| is_tchar(b)).count();
    match line.get(method) {
        None => return None,
        Some(b' ') if method > 0 => {}
        Some(_) => return Some(Carries::Other),
    }
    let target = &line[method + 1..];
    match target.first()? {
        b'/' | b'*' => return Some(Carries::Http),
        _ => {}
    }
    let end = target.iter().position(|&b| b <= b' ' || b == 0x7f)?;
    if target[end] != b' ' || end == 0 {
        return Some(Carries::Other);
    }
    let version = &target[end + 1..];
    let n = version.len().min(5);
    if version[..n] != b"HTTP/"[..n] {
        Some(Carries::Other)
    } else if n == 5 {
        Some(Carries::Http)
    } else {
        None
    }
}

/// RFC 9110 §5.6.2's `tchar`: what a method token is made of.
fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

/// Handles a `CONNECT` decided after its `200` (see the module): connects first, then
/// answers `200` and serves the tunnel in the background.
pub(super) async fn connect_then_sniff(
    mut req: Request<ClientBody>,
    shared: &Arc<Shared>,
) -> Response<ProxyBody> {
    let Some(origin) =
        req.uri().authority().and_then(|a| Origin::from_authority(Scheme::Https, a.as_str()).ok())
    else {
        // The layer and the forwarder answer what cannot be read.
        return shared.answer(req).await;
    };
    let upstream = match shared.forwarder.connect_tunnel(&origin).await {
        Ok(s) => s,
        // The layer makes (and audits) the guard's refusal as for any request.
        Err(ConnectError::Denied { .. }) => return shared.answer(req).await,
        Err(e) => {
            // Answered before any decision: recorded as robotsgate's own answer.
            let refusal = connect_refusal(&e);
            if let Some(client) = req.extensions().get::<robotsgate::layer::ClientAddr>().map(|c| c.0) {
                shared.log_own_answer(&refusal, client, Some(&req));
            }
            return boxed(refusal.into_response(false));
        }
    };
    let on_upgrade = hyper::upgrade::on(&mut req);
    let shared2 = shared.clone();
    shared.tunnels.spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(u) => u,
            Err(e) => return tracing::debug!(error = %e, "CONNECT upgrade failed"),
        };
        // Held as long as the tunnel, whatever it turns out to carry.
        let slot = req.extensions().get::<Slot>().cloned();
        serve_tunnel(TokioIo::new(upgraded), upstream, origin, req, &shared2).await;
        drop(slot);
    });
    boxed(Response::new(http_body_util::Full::new(Bytes::new())))
}

/// Reads the first bytes of the tunnel and serves it as what they say.
async fn serve_tunnel(
    mut client: TokioIo<hyper::upgrade::Upgraded>,
    upstream: tokio::net::TcpStream,
    origin: Origin,
    mut req: Request<ClientBody>,
    shared: &Arc<Shared>,
) {
    let mut first = Vec::with_capacity(64);
    let mut buf = [0u8; 512];
    let mut peeked = [0u8; 1];
    // Who speaks first: the client (its bytes say what the tunnel carries) or the server
    // (a protocol whose server speaks first, tunnelled as it is). The client's silence
    // alone decides nothing: one that waits, then sends a ClientHello or a request line,
    // is read as such (before, a client silent for `header_read_timeout` had its tunnel
    // handed over unread, its later bytes judged on `/` alone).
    let began = tokio::select! {
        biased;
        () = shared.stop.cancelled() => Began::Stopped,
        read = client.read(&mut buf) => match read {
            Ok(0) => Began::Done,
            Err(_) => Began::Left,
            Ok(n) => Began::Client(n),
        },
        // Data, the end, or an error: the server has spoken (or gone), not the client.
        _ = upstream.peek(&mut peeked) => Began::Server,
        () = tokio::time::sleep(shared.forwarder.tunnel_idle_timeout()) => Began::Silent,
    };
    // A client that closed its side at once (a banner grab: `nc -N`) sends nothing more,
    // so nothing unread can follow: what the server says is still passed on.
    let began = match began {
        Began::Done => tokio::select! {
            biased;
            () = shared.stop.cancelled() => Began::Stopped,
            _ = upstream.peek(&mut peeked) => Began::Server,
            () = tokio::time::sleep(shared.forwarder.tunnel_idle_timeout()) => Began::Left,
        },
        began => began,
    };
    let carries = match began {
        Began::Client(n) => {
            first.extend_from_slice(&buf[..n]);
            let read = async {
                loop {
                    if let Some(c) = classify(&first) {
                        return c;
                    }
                    if first.len() >= SNIFF_LIMIT {
                        return Carries::Http;
                    }
                    let room = buf.len().min(SNIFF_LIMIT - first.len());
                    match client.read(&mut buf[..room]).await {
                        Ok(0) | Err(_) => return Carries::Other,
                        Ok(n) => first.extend_from_slice(&buf[..n]),
                    }
                }
            };
            // The start of a request line that stalls is still HTTP (served as such, the
            // rest of its head within hyper's own timeout), not a tunnel judged on `/`.
            let read = tokio::time::timeout(shared.config.header_read_timeout, read);
            tokio::select! {
                carries = read => carries.unwrap_or(Carries::Http),
                // Shutting down: nothing went through yet.
                () = shared.stop.cancelled() => return,
            }
        }
        Began::Server => Carries::Other,
        Began::Stopped | Began::Left | Began::Done => {
            tracing::debug!(target = %req.uri(), ?began, "tunnel closed before it carried anything");
            return;
        }
        Began::Silent if refused_silent(&req, shared) => return,
        Began::Silent => Carries::Other,
    };
    // A TLS client must ask for the host the tunnel is checked for (crate::server_name).
    let first = if carries == Carries::Tls {
        let check = shared.hello_check(&req);
        let target = req.uri().to_string();
        let host = origin.host().to_string();
        // The first bytes came (they were TLS's): `first_wait` is not used.
        let wait = shared.config.header_read_timeout;
        // Checked before any decision: the refusal is the tunnel's only record.
        let tunnel = Tunnel { host: &host, target: &target, transport: Transport::ConnectTls, tally: None };
        match check.check(&mut client, first, tunnel, wait).await {
            Ok(first) => first,
            Err(()) => return,
        }
    } else {
        first
    };
    let record_version = hello_record_version(&first);
    let client = Prefixed { prefix: Bytes::from(first), inner: client };
    if carries == Carries::Http {
        drop(upstream);
        let user = req.extensions().get::<robotsgate::layer::ProxyUser>().map(|u| u.0.clone());
        let client_addr = req.extensions().get::<robotsgate::layer::ClientAddr>().map(|c| c.0);
        let Some(client_addr) = client_addr else { return };
        let Ok(http_origin) = Origin::from_authority(Scheme::Http, &origin.authority()) else { return };
        let inside = shared.inside(client_addr, user, Slot::take(&mut req));
        intercept::serve_http(client, &http_origin, Transport::ConnectHttp, inside).await;
        return;
    }
    let transport = if carries == Carries::Tls { Transport::ConnectTls } else { Transport::ConnectOpaque };
    // The server spoke first: the tunnel is handed over before its client has said
    // anything, and what it says first is held until judged (crate::held).
    let client = match began {
        Began::Server if shared.layer.mode() != Mode::Off => {
            let check = shared.hello_check(&req);
            let (host, target) = (origin.host().to_string(), req.uri().to_string());
            // The tunnel's tally (crate::forward::tunnel takes it from the request): a
            // refusal is keyed by the tunnel's decision, and its outcome told.
            let tally = robotsgate::layer::Tally::default();
            req.extensions_mut().insert(tally.clone());
            Held::judged_by(
                client,
                Box::new(move |first: &[u8]| {
                    let Err(refusal) = after_server_spoke(first, &host)? else { return Some(Ok(())) };
                    let tunnel = Tunnel { host: &host, target: &target, transport, tally: Some(&tally) };
                    if !check.said_no(&refusal, &tunnel) {
                        return Some(Ok(()));
                    }
                    Some(Err((first[0] == 0x16).then(|| access_denied_alert(hello_record_version(first)))))
                }),
            )
        }
        _ => Held::open(client),
    };
    req.extensions_mut().insert(transport);
    req.extensions_mut().insert(PreConnected::new(client, upstream));
    let pre = req.extensions().get::<PreConnected>().cloned();
    let res = shared.answer(req).await;
    if res.extensions().get::<Refusal>().is_some() {
        // Refused after the 200: the tunnel was not handed over; tell a TLS client why in
        // its own terms, and close.
        let Some((mut client, _upstream)) = pre.and_then(|p| p.take()) else { return };
        if transport == Transport::ConnectTls {
            let _ = tokio::time::timeout(
                shared.config.header_read_timeout,
                client.write_all(&access_denied_alert(record_version)),
            )
            .await;
        }
        let _ = client.shutdown().await;
    }
}

/// What a client's first bytes say after its server spoke first (the tunnel handed over
/// as opaque: see crate::held): a ClientHello must ask for `host`, as one sent before the
/// server spoke must; an HTTP request is refused, since an opaque tunnel would carry it
/// unchecked per path (no HTTP server speaks first); anything else goes on. `None` while
/// more bytes could change that.
fn after_server_spoke(first: &[u8], host: &str) -> Option<Result<(), Refusal>> {
    let http = || {
        Refusal::new(
            robotsgate::RefusalKind::BadRequest,
            "an HTTP request in a tunnel whose server spoke first: it would not be checked per path",
        )
    };
    match classify(first) {
        Some(Carries::Tls) => crate::server_name::judge_bytes(first, host),
        Some(Carries::Http) => Some(Err(http())),
        Some(Carries::Other) => Some(Ok(())),
        None if first.len() < SNIFF_LIMIT => None,
        None => Some(Err(http())),
    }
}

/// How a sniffed tunnel began.
#[derive(Debug)]
enum Began {
    /// The client sent this many bytes first.
    Client(usize),
    /// The server spoke (or closed) first.
    Server,
    /// Neither, within `proxy.tunnel_idle_timeout`.
    Silent,
    /// The client closed its side before it sent anything.
    Done,
    /// The client went (a connection error, or closed with the server silent too).
    Left,
    /// The proxy began to shut down.
    Stopped,
}

/// A tunnel that carried nothing either way within `proxy.tunnel_idle_timeout`: it is not
/// handed over unread (its client could then send what no check saw), and is closed with
/// a refusal record, as a silent tunnel to port 443 is: true. False when the mode lets it
/// go on instead (report-only says so in the log; off says nothing).
fn refused_silent(req: &Request<ClientBody>, shared: &Shared) -> bool {
    let target = req.uri().to_string();
    match shared.layer.mode() {
        Mode::Off => false,
        Mode::ReportOnly => {
            tracing::warn!(%target, "report-only: a tunnel that carried nothing within proxy.tunnel_idle_timeout goes on unread");
            false
        }
        Mode::Enforce => {
            let refusal = Refusal::new(
                robotsgate::RefusalKind::BadRequest,
                "the tunnel carried nothing either way within proxy.tunnel_idle_timeout",
            );
            let ext = req.extensions();
            let facts = robotsgate::audit::RefusalFacts {
                client: ext.get::<robotsgate::layer::ClientAddr>().map(|c| c.0),
                user: ext.get::<robotsgate::layer::ProxyUser>().map(|u| &*u.0),
                method: Some("CONNECT"),
                target: Some(&target),
                transport: Some(Transport::ConnectOpaque.as_str()),
                ..Default::default()
            };
            shared.layer.log_refusal(&refusal, facts);
            true
        }
    }
}

/// Whether a `CONNECT` to `addr`'s port is decided after its `200` by what the tunnel
/// carries: every port but 443, where TLS is assumed and the host is checked before the
/// `200` (so that a refusal is a readable `403`).
pub(super) fn sniffed_port(port: Option<u16>) -> bool {
    port.is_some_and(|p| p != 443)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn first_bytes_tell_tls_http_and_other() {
        assert_eq!(classify(b""), None);
        assert_eq!(classify(&[0x16, 0x03, 0x01]), Some(Carries::Tls));
        assert_eq!(classify(b"GET / HTTP/1.1\r\n"), Some(Carries::Http));
        assert_eq!(classify(b"GE"), None, "could still be GET");
        assert_eq!(classify(b"GETX"), None, "could still be a method");
        assert_eq!(classify(b"OPTIONS * HTTP/1.1"), Some(Carries::Http));
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n"), Some(Carries::Http));
        // Any method token; empty lines first are skipped.
        for line in [&b"QUERY /private"[..], b"get /", b"PROPFIND /a", b"\r\nGET /", b"\r\n\n\r\nGET /"] {
            assert_eq!(classify(line), Some(Carries::Http), "{:?}", String::from_utf8_lossy(line));
        }
        assert_eq!(classify(b"\r\n"), None);
        assert_eq!(classify(b"\r\nGET"), None);
        // Absolute and authority form: HTTP once the version starts to show.
        assert_eq!(classify(b"GET http://a.test/x"), None);
        assert_eq!(classify(b"GET http://a.test/x HT"), None);
        assert_eq!(classify(b"GET http://a.test/x HTTP/1.1"), Some(Carries::Http));
        assert_eq!(classify(b"CONNECT a.test:80 HTTP/1.1\r\n"), Some(Carries::Http));
        // Not a request line.
        assert_eq!(classify(b"ping through the tunnel"), Some(Carries::Other));
        assert_eq!(classify(b"SSH-2.0-OpenSSH\r\n"), Some(Carries::Other));
        assert_eq!(classify(b"EHLO a.test\r\n"), Some(Carries::Other));
        assert_eq!(classify(b"PING\r\n"), Some(Carries::Other));
        assert_eq!(classify(b" GET /"), Some(Carries::Other));
        assert_eq!(classify(b"GET  /"), Some(Carries::Other));
        assert_eq!(classify(&[0, 1, 2]), Some(Carries::Other));
        assert_eq!(classify(b"GET a\x01"), Some(Carries::Other));
    }
}
