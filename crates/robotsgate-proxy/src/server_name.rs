//! A tunnel that is not intercepted is checked for the host its `CONNECT` names, and its
//! TLS client then names the server it wants in its ClientHello (SNI), before anything is
//! encrypted. A client that names another host reaches that host wherever both are served
//! from one address (a CDN: domain fronting) under a check made for the first: its tunnel
//! is refused (the TLS alert `access_denied`, and a refusal record saying which name it
//! gave). A ClientHello that does not read, or does not come whole in time, is refused too;
//! one without a name (a client connecting to an address) passes. Encrypted client hello
//! (ECH) is held to the same rule: its outer name must be the host (as with clients that
//! send ECH as GREASE), since the proxy cannot see the inner one. Where TLS is expected
//! (port 443, a bypassed host), a client that says nothing in time is not let through
//! unread: the ClientHello is waited for. The layer's mode holds: report-only lets such a
//! tunnel go on (a warning in the log), off reads nothing.

use std::net::SocketAddr;
use std::time::Duration;

use robotsgate::layer::{Mode, RobotsLayer, Tally, Transport};
use robotsgate::net::{ClientHello, MAX_CLIENT_HELLO, read_client_hello};
use robotsgate::{Refusal, RefusalKind};
use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};
use tokio_util::sync::CancellationToken;

/// What a tunnel's ClientHello check needs besides the tunnel: where refusals are
/// recorded, for whom, and how long the client has to send its ClientHello. The listener
/// puts it in a `CONNECT`'s extensions for the forwarder's tunnel.
#[derive(Clone)]
pub(crate) struct HelloCheck {
    pub(crate) layer: RobotsLayer,
    pub(crate) client: Option<SocketAddr>,
    pub(crate) user: Option<std::sync::Arc<str>>,
    /// `proxy.header_read_timeout`.
    pub(crate) timeout: Duration,
    /// Cancelled when the proxy starts to shut down: a tunnel still waiting for its
    /// ClientHello has carried nothing, and is closed then rather than held for the grace.
    pub(crate) stop: CancellationToken,
}

/// The tunnel a ClientHello is checked for.
#[derive(Clone, Copy)]
pub(crate) struct Tunnel<'a> {
    /// The host its `CONNECT` named, which the ClientHello must ask for.
    pub(crate) host: &'a str,
    /// The `CONNECT` target, as a refusal record states it.
    pub(crate) target: &'a str,
    /// How it came, as a refusal record states it.
    pub(crate) transport: Transport,
    /// For a tunnel decided (and recorded) before its `200`: its tally, by whose request id
    /// a refusal is recorded, and which is told of the refusal for the tunnel's outcome.
    pub(crate) tally: Option<&'a Tally>,
}

impl HelloCheck {
    /// Says no to `tunnel` for `refusal`: in enforce mode it is recorded (keyed by the
    /// tunnel's decision when its tally is given, and its outcome told), and true is
    /// returned; in report-only mode a warning says it, and the tunnel goes on (false), as
    /// it does in mode off.
    pub(crate) fn said_no(&self, refusal: &Refusal, tunnel: &Tunnel<'_>) -> bool {
        let Tunnel { target, transport, tally, .. } = *tunnel;
        match self.layer.mode() {
            Mode::Enforce => {}
            Mode::ReportOnly => {
                // Decided, not enforced: said, and the tunnel goes on.
                tracing::warn!(client = ?self.client, %target, why = %refusal.message(), "report-only: a tunnel that would be refused for its first bytes goes on");
                return false;
            }
            // Nothing is enforced nor recorded.
            _ => return false,
        }
        // A tunnel whose CONNECT was decided (and recorded) before its `200`: the refusal
        // is keyed by that decision, and the tunnel's outcome says it was refused.
        if let Some(tally) = tally {
            tally.refuse(refusal);
        }
        let facts = robotsgate::audit::RefusalFacts {
            request_id: tally.and_then(Tally::request_id).unwrap_or_default(),
            client: self.client,
            user: self.user.as_deref(),
            method: Some("CONNECT"),
            target: Some(target),
            transport: Some(transport.as_str()),
        };
        self.layer.log_refusal(refusal, facts);
        tracing::debug!(client = ?self.client, %target, why = %refusal.message(), "tunnel refused for its first bytes");
        true
    }

    /// Reads the client's first bytes from `io` (after `first`, read already; with none,
    /// the first is waited for up to `first_wait`) until its ClientHello is whole, and
    /// holds its server name to `tunnel.host`. The bytes read, and whether the tunnel may
    /// go on: `Err` when it was refused, the alert sent and the refusal recorded (see
    /// [`Tunnel`]), or when the proxy began to shut down before the ClientHello was whole
    /// (closed, nothing recorded: nothing was asked for).
    pub(crate) async fn check<IO>(
        &self,
        io: &mut IO,
        first: Vec<u8>,
        tunnel: Tunnel<'_>,
        first_wait: Duration,
    ) -> Result<Vec<u8>, ()>
    where
        IO: AsyncRead + AsyncWrite + Unpin,
    {
        let Tunnel { host, target, .. } = tunnel;
        let mode = self.layer.mode();
        if mode == Mode::Off {
            // Nothing is enforced nor recorded.
            return Ok(first);
        }
        let judged = tokio::select! {
            judged = read_and_judge(io, first, host, first_wait, self.timeout) => Some(judged),
            () = self.stop.cancelled() => None,
        };
        let Some((first, verdict)) = judged else {
            // Shutting down: nothing went through this tunnel yet, nor will.
            tracing::debug!(client = ?self.client, %target, "tunnel closed on shutdown before its ClientHello");
            let _ = tokio::time::timeout(self.timeout, io.shutdown()).await;
            return Err(());
        };
        let Err(refusal) = verdict else { return Ok(first) };
        if !self.said_no(&refusal, &tunnel) {
            return Ok(first);
        }
        let alert = access_denied_alert(hello_record_version(&first));
        let _ = tokio::time::timeout(self.timeout, io.write_all(&alert)).await;
        let _ = tokio::time::timeout(self.timeout, io.shutdown()).await;
        Err(())
    }
}

/// Reads until the ClientHello after `first` is whole (or what came is no TLS: passed on
/// as it is), within `timeout` of its first byte (waited for `first_wait` when `first` is
/// empty), and judges its name against `host`.
async fn read_and_judge<IO>(
    io: &mut IO,
    mut first: Vec<u8>,
    host: &str,
    first_wait: Duration,
    timeout: Duration,
) -> (Vec<u8>, Result<(), Refusal>)
where
    IO: AsyncRead + Unpin,
{
    if first.is_empty() {
        // A client that waits before it speaks is held to its ClientHello all the same.
        let mut buf = [0u8; 2048];
        match tokio::time::timeout(first_wait, io.read(&mut buf)).await {
            Ok(Ok(0) | Err(_)) => return (first, Ok(())),
            Ok(Ok(n)) => first.extend_from_slice(&buf[..n]),
            Err(_) => {
                let why = "the client sent nothing within proxy.tunnel_idle_timeout";
                return (first, Err(refused(why.into())));
            }
        }
    }
    let read = async {
        let mut buf = [0u8; 2048];
        loop {
            if first.first().is_some_and(|&b| b != 0x16) {
                // Not TLS: nothing to hold to the host.
                return None;
            }
            if !first.is_empty() {
                match read_client_hello(&first) {
                    ClientHello::Incomplete => {}
                    hello => return Some(hello),
                }
            }
            let room = buf.len().min(MAX_CLIENT_HELLO + 1 - first.len().min(MAX_CLIENT_HELLO));
            match io.read(&mut buf[..room]).await {
                // The client went away: nothing went to the origin.
                Ok(0) | Err(_) => return None,
                Ok(n) => first.extend_from_slice(&buf[..n]),
            }
        }
    };
    let verdict = match tokio::time::timeout(timeout, read).await {
        Ok(None) => Ok(()),
        Err(_) => {
            Err(refused("the TLS ClientHello did not come whole within proxy.header_read_timeout".into()))
        }
        Ok(Some(hello)) => judge(&hello, host),
    };
    (first, verdict)
}

/// What the first bytes of a tunnel, a TLS record, say of `host`: `None` while the
/// ClientHello is not whole; else whether it may go on (see [`judge`]).
pub(crate) fn judge_bytes(first: &[u8], host: &str) -> Option<Result<(), Refusal>> {
    match read_client_hello(first) {
        ClientHello::Incomplete => None,
        hello => Some(judge(&hello, host)),
    }
}

/// Whether `hello` may go on to `host`.
fn judge(hello: &ClientHello, host: &str) -> Result<(), Refusal> {
    match hello {
        ClientHello::Incomplete => Ok(()),
        ClientHello::Malformed(why) => Err(refused(format!("the TLS ClientHello does not read: {why}"))),
        ClientHello::Complete { server_name: None, .. } => Ok(()),
        ClientHello::Complete { server_name: Some(name), .. } if same_host(name, host) => Ok(()),
        ClientHello::Complete { server_name: Some(name), .. } => Err(refused(format!(
            "the TLS client asks for {name:?}, not {host:?}, the host its CONNECT named and was checked for"
        ))),
    }
}

fn refused(why: String) -> Refusal {
    Refusal::new(RefusalKind::BadRequest, why)
}

/// Host names compared as DNS does: ignoring ASCII case and a trailing dot.
fn same_host(a: &str, b: &str) -> bool {
    fn trim(s: &str) -> &str {
        s.strip_suffix('.').unwrap_or(s)
    }
    trim(a).eq_ignore_ascii_case(trim(b))
}

/// The record-layer version of the client's first TLS record (`first` starts with it),
/// which the alert answering it repeats; TLS 1.2's when it is not a `3.x` version.
pub(crate) fn hello_record_version(first: &[u8]) -> [u8; 2] {
    match first.get(1..3) {
        Some(&[3, minor]) if minor <= 4 => [3, minor],
        _ => [3, 3],
    }
}

/// The fatal TLS alert record `access_denied` (RFC 8446 §6.2: content type 21, the
/// record version, length 2, level fatal, description 49): how a refused tunnel is told
/// no once the `200` has gone. Every refusal gets it (the README promises it); the audit
/// record says why.
pub(crate) fn access_denied_alert(version: [u8; 2]) -> [u8; 7] {
    [21, version[0], version[1], 0x00, 0x02, 2, 49]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hello(name: Option<&str>, ech: bool) -> ClientHello {
        ClientHello::Complete { server_name: name.map(str::to_owned), ech }
    }

    #[test]
    fn the_name_must_be_the_connect_host() {
        assert!(judge(&hello(Some("a.example"), false), "a.example").is_ok());
        assert!(judge(&hello(Some("A.Example."), false), "a.example").is_ok());
        assert!(judge(&hello(Some("a.example"), false), "A.EXAMPLE.").is_ok());
        assert!(judge(&hello(None, false), "a.example").is_ok(), "no name: an address");
        assert!(
            judge(&hello(Some("a.example"), true), "a.example").is_ok(),
            "GREASE ECH: the real name outside"
        );
        assert!(
            judge(&hello(Some("public.cdn.example"), true), "a.example").is_err(),
            "ECH: the host is not seen"
        );
        let e = judge(&hello(Some("b.example"), false), "a.example").unwrap_err();
        assert!(
            e.message().contains("\"b.example\"") && e.message().contains("\"a.example\""),
            "{}",
            e.message()
        );
        assert!(judge(&hello(Some("a.example"), false), "192.0.2.1").is_err(), "a name through an address");
        assert!(judge(&hello(Some("a.example.evil"), false), "a.example").is_err());
        assert!(judge(&ClientHello::Malformed("x"), "a.example").is_err());
    }

    #[test]
    fn the_alert_repeats_the_hellos_record_version() {
        assert_eq!(hello_record_version(&[0x16, 3, 1, 0, 5]), [3, 1]);
        assert_eq!(hello_record_version(&[0x16, 3, 3]), [3, 3]);
        assert_eq!(hello_record_version(&[0x16, 9, 9]), [3, 3], "not TLS 1.x: TLS 1.2's");
        assert_eq!(hello_record_version(&[0x16]), [3, 3]);
        assert_eq!(access_denied_alert([3, 1]), [21, 3, 1, 0, 2, 2, 49]);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_are_read_until_the_hello_is_whole_and_kept() {
        let (wait, limit) = (Duration::from_secs(300), Duration::from_secs(5));
        // Not TLS: passed on after its first byte.
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(b"SSH-2.0\r\n").await.unwrap();
        let (first, verdict) = read_and_judge(&mut a, Vec::new(), "a.example", wait, limit).await;
        assert!(verdict.is_ok());
        assert!(first.starts_with(b"S"));
        // A TLS start that stalls: refused after the limit.
        let (mut a, mut b) = tokio::io::duplex(64);
        b.write_all(&[0x16, 3, 1, 0, 200, 1]).await.unwrap();
        let started = tokio::time::Instant::now();
        let (first, verdict) = read_and_judge(&mut a, Vec::new(), "a.example", wait, limit).await;
        assert!(verdict.is_err());
        assert_eq!((first.len(), started.elapsed()), (6, limit));
        // Silent for longer than the limit, then another host's ClientHello: still read and
        // refused (before, the silence let it through unread).
        let (mut a, mut b) = tokio::io::duplex(64 * 1024);
        let late = async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            b.write_all(&[0x16, 3, 1, 0, 4, 1, 0, 0, 0]).await.unwrap();
            b
        };
        let (judged, _b) = tokio::join!(read_and_judge(&mut a, Vec::new(), "a.example", wait, limit), late);
        assert!(judged.1.is_err(), "a ClientHello that does not read, after a minute's silence");
        // Silent for good: refused after the first wait.
        let (mut a, _b) = tokio::io::duplex(64);
        let started = tokio::time::Instant::now();
        let (first, verdict) = read_and_judge(&mut a, Vec::new(), "a.example", wait, limit).await;
        assert!(verdict.is_err() && first.is_empty());
        assert_eq!(started.elapsed(), wait);
    }
}
