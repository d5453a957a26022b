//! Forwarding failures as robotsgate's answers: upstream errors (`502`, `504`, `403` for a
//! refused destination) and requests that are not proxy requests (`400`).

use robotsgate::net::{ConnectError, PoolError};
use robotsgate::{Refusal, RefusalKind};

/// Why a forwarded request got no response.
pub(super) enum UpstreamError {
    /// Through the pool.
    Pool(PoolError),
    /// On a kept connection, once the origin had begun to answer.
    Kept(super::h1::H1Failure),
}

/// The metrics class of an upstream failure: the failed connection's class, else
/// `protocol`.
pub(super) fn upstream_error_class(e: &PoolError) -> &'static str {
    match e {
        PoolError::Connect(c) => c.class(),
        _ => "protocol",
    }
}

/// `400` when the exchange failed on the client's side: its request body could not be
/// read (a malformed chunk, a body cut short), which hyper's client reports as an error of
/// the body it was given. Not the origin's failure, nor counted as one.
pub(super) fn client_body_error(e: &PoolError) -> Option<Refusal> {
    match e {
        PoolError::Http(e) if e.is_user() => {
            Some(Refusal::new(RefusalKind::BadRequest, format!("the request could not be sent: {e}")))
        }
        _ => None,
    }
}

/// The answer for an upstream failure: 403 for a refused destination, 504 for a
/// timeout, 502 otherwise.
pub(super) fn upstream_error(e: PoolError) -> Refusal {
    match e {
        PoolError::Connect(c) => connect_refusal(&c),
        PoolError::Http(e) => Refusal::upstream_failed(&e),
        e => Refusal::upstream_failed(&e),
    }
}

/// The refusal for an outbound connection that failed: 403 for a refused destination, 504
/// for a timeout, 502 otherwise.
pub(crate) fn connect_refusal(e: &ConnectError) -> Refusal {
    Refusal::new(RefusalKind::of_connect_error(e), e.to_string())
}

/// The refusal of an origin-form request: this is a proxy, not a web server.
pub(crate) fn not_a_proxy_request() -> Refusal {
    let why = "this is a forward proxy: send requests in absolute form (e.g. set HTTP_PROXY)";
    Refusal::new(RefusalKind::NotAProxyRequest, why)
}
