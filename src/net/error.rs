//! Why an outbound connection could not be made ([`ConnectError`]), typed so that callers
//! can tell a DNS failure from a refused connection, a timeout, a certificate problem or a
//! refused destination.

use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use super::address::DenyReason;

/// Why an outbound connection could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The name did not resolve.
    #[error("DNS lookup of {host} failed: {reason}")]
    Dns {
        /// The name looked up.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// Every address of the destination is refused by the guard.
    #[error("destination {host} ({ip}) refused: {reason}")]
    Denied {
        /// The host asked for.
        host: String,
        /// The (first) address that was refused.
        ip: IpAddr,
        /// Which rule refused it.
        reason: DenyReason,
    },
    /// No connection within the connect timeout.
    #[error("connecting to {host} timed out after {timeout:?}")]
    Timeout {
        /// The host.
        host: String,
        /// The configured connect timeout.
        timeout: Duration,
    },
    /// The TCP connection failed (refused, reset, unreachable).
    #[error("connecting to {addr} failed: {reason}")]
    Connect {
        /// The address tried last.
        addr: SocketAddr,
        /// The operating system's reason.
        reason: String,
        /// The error kind (e.g. `ConnectionRefused`).
        kind: io::ErrorKind,
    },
    /// The TLS handshake failed (certificate not trusted, wrong name, protocol error).
    #[error("TLS with {host} failed: {reason}")]
    Tls {
        /// The server name.
        host: String,
        /// rustls' reason.
        reason: String,
    },
    /// The forward proxy could not be reached or refused the tunnel (`CONNECT`).
    #[error("through the proxy {proxy}: {reason}")]
    Proxy {
        /// The proxy (`http://host:port`, without credentials).
        proxy: String,
        /// What went wrong.
        reason: String,
    },
    /// The URI cannot be connected to (no host, not http/https).
    #[error("cannot connect to {0}")]
    BadDestination(String),
}

impl ConnectError {
    /// A short stable name of the failure class, for logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            ConnectError::Dns { .. } => "dns",
            ConnectError::Denied { .. } => "denied",
            ConnectError::Timeout { .. } => "connect_timeout",
            ConnectError::Connect { kind: io::ErrorKind::ConnectionRefused, .. } => "connection_refused",
            ConnectError::Connect { .. } => "connect",
            ConnectError::Tls { .. } => "tls",
            ConnectError::Proxy { .. } => "proxy",
            ConnectError::BadDestination(_) => "bad_destination",
        }
    }
}
