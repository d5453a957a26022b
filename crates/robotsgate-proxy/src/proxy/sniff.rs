//! `CONNECT` to a port that is not intercepted (and not 443, nor a host on the interception
//! bypass list, which are known to be TLS and checked before the `200` as they always
//! were): the proxy connects to the
//! target, answers `200`, and then reads the client's first bytes to see what the tunnel
//! carries, since the port does not say (`ws://host:8080` opened with `CONNECT`, HTTPS on
//! 8443):
//!
//! - a TLS handshake: the host is checked (`/` on `https://host:port`) and the bytes are
//!   tunnelled; when it is refused (whatever the reason: robots.txt, the guard, robots.txt
//!   unreachable, pacing, the audit log) the client gets the fatal TLS alert
//!   `access_denied` instead of a handshake, since an HTTP answer is no longer possible
//!   after the `200`; the audit record says why;
//! - plain HTTP: the tunnel is served as an HTTP connection to `http://host:port`, each
//!   request checked on its path like one sent to the listener (better than the host);
//! - anything else, or nothing within `proxy.header_read_timeout`: the host is checked as
//!   before (`/` on `https://host:port`, `http://` for port 80) and the bytes are tunnelled.
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
use crate::intercept;
use crate::prefixed::Prefixed;
use robotsgate::Refusal;
use robotsgate::layer::Transport;
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

/// The starts of what an HTTP client sends first.
const HTTP_STARTS: &[&[u8]] =
    &[b"GET ", b"HEAD ", b"POST ", b"PUT ", b"DELETE ", b"OPTIONS ", b"PATCH ", b"TRACE ", b"PRI * HTTP/2.0"];

/// What `first` (the bytes read so far) says; `None` while more bytes could change it.
pub(super) fn classify(first: &[u8]) -> Option<Carries> {
    match first.first()? {
        0x16 => return Some(Carries::Tls),
        _ if HTTP_STARTS.iter().any(|s| first.starts_with(s)) => return Some(Carries::Http),
        _ => {}
    }
    if HTTP_STARTS.iter().any(|s| s.starts_with(first)) { None } else { Some(Carries::Other) }
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
        serve_tunnel(TokioIo::new(upgraded), upstream, origin, req, &shared2).await;
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
    let read = async {
        let mut buf = [0u8; 64];
        loop {
            if let Some(c) = classify(&first) {
                return c;
            }
            match client.read(&mut buf).await {
                Ok(0) | Err(_) => return Carries::Other,
                Ok(n) => first.extend_from_slice(&buf[..n]),
            }
        }
    };
    let carries =
        tokio::time::timeout(shared.config.header_read_timeout, read).await.unwrap_or(Carries::Other);
    let record_version = hello_record_version(&first);
    let client = Prefixed { prefix: Bytes::from(first), inner: client };
    if carries == Carries::Http {
        drop(upstream);
        let user = req.extensions().get::<robotsgate::layer::ProxyUser>().map(|u| u.0.clone());
        let client_addr = req.extensions().get::<robotsgate::layer::ClientAddr>().map(|c| c.0);
        let Some(client_addr) = client_addr else { return };
        let Ok(http_origin) = Origin::from_authority(Scheme::Http, &origin.authority()) else { return };
        let inside = shared.inside(client_addr, user);
        intercept::serve_http(client, &http_origin, Transport::ConnectHttp, inside).await;
        return;
    }
    let transport = if carries == Carries::Tls { Transport::ConnectTls } else { Transport::ConnectOpaque };
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

/// The record-layer version of the client's first TLS record (`first` starts with it),
/// which the alert answering it repeats; TLS 1.2's when it is not a `3.x` version.
fn hello_record_version(first: &[u8]) -> [u8; 2] {
    match first.get(1..3) {
        Some(&[3, minor]) if minor <= 4 => [3, minor],
        _ => [3, 3],
    }
}

/// The fatal TLS alert record `access_denied` (RFC 8446 §6.2: content type 21, the
/// record version, length 2, level fatal, description 49): how a refused tunnel is told
/// no once the `200` has gone. Every refusal gets it (the README promises it); the audit
/// record says why.
fn access_denied_alert(version: [u8; 2]) -> [u8; 7] {
    [21, version[0], version[1], 0x00, 0x02, 2, 49]
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
        assert_eq!(classify(b"OPTIONS * HTTP/1.1"), Some(Carries::Http));
        assert_eq!(classify(b"PRI * HTTP/2.0\r\n"), Some(Carries::Http));
        assert_eq!(classify(b"ping through"), Some(Carries::Other));
        assert_eq!(classify(b"SSH-2.0-OpenSSH"), Some(Carries::Other));
        assert_eq!(classify(b"get / HTTP/1.1"), Some(Carries::Other), "methods are case-sensitive");
        assert_eq!(classify(b"GETX"), Some(Carries::Other));
        // Every proper prefix of a start is undecided; a start and more is HTTP.
        for s in HTTP_STARTS {
            assert_eq!(classify(&[s, &b"/x"[..]].concat()), Some(Carries::Http));
            for n in 1..s.len() {
                assert_eq!(classify(&s[..n]), None, "{:?}", &s[..n]);
            }
        }
    }

    #[test]
    fn the_alert_repeats_the_hellos_record_version() {
        assert_eq!(hello_record_version(&[0x16, 3, 1, 0, 5]), [3, 1]);
        assert_eq!(hello_record_version(&[0x16, 3, 3]), [3, 3]);
        assert_eq!(hello_record_version(&[0x16, 9, 9]), [3, 3], "not TLS 1.x: TLS 1.2's");
        assert_eq!(hello_record_version(&[0x16]), [3, 3]);
        assert_eq!(access_denied_alert([3, 1]), [21, 3, 1, 0, 2, 2, 49]);
    }
}
