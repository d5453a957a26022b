//! The upstream connection a client connection keeps ([`Sticky`]) for scrapers that send
//! request after request to one origin over one keep-alive connection.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt as _;
use futures_util::future::Either;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use super::Forwarder;
use super::h1::{H1Conn, PutBack};
use hyper::client::conn::http1;
use robotsgate::net::Connector;
use robotsgate::origin::Origin;

impl Forwarder {
    /// The connection `sticky` keeps for the origin of `uri`, taken out of it (given back
    /// with [`Sticky::put_back`] once it has answered), or `None`: the pool is to send the
    /// request. Counts the requests in a row to that origin and, once there are enough
    /// ([`UpstreamKey::keep_after`]), starts opening a connection of its own for it.
    ///
    /// Nothing here waits: the request's future holds only the send itself.
    pub(super) fn take_kept(&self, sticky: &Sticky, uri: &http::Uri) -> Option<Taken> {
        let key = UpstreamKey::of(uri)?;
        let (kept, again) = {
            let mut slot = sticky.0.lock().ok()?;
            if slot.last.as_ref() == Some(&key) {
                slot.run = slot.run.saturating_add(1);
            } else {
                slot.last = Some(key.clone());
                slot.run = 1;
            }
            let again = slot.run >= key.keep_after();
            let kept = match slot.conn.take() {
                Some((k, conn)) if k == key => Some(conn),
                other => {
                    slot.conn = other;
                    None
                }
            };
            (kept, again)
        };
        match kept {
            Some(conn) => Some(Taken { key, conn }),
            None => {
                if again {
                    self.open_kept_later(sticky, &key, uri);
                }
                None
            }
        }
    }

    /// Opens the connection `sticky` keeps for `key`, in the background: no request waits
    /// for its handshake (the pool serves them meanwhile), and a few open at once at most,
    /// so that a burst of new keep-alive clients is not a burst of handshakes.
    fn open_kept_later(&self, sticky: &Sticky, key: &UpstreamKey, uri: &http::Uri) {
        {
            let Ok(mut slot) = sticky.0.lock() else { return };
            if slot.opening {
                return;
            }
            let Ok(permit) = self.inner.opening.clone().try_acquire_owned() else { return };
            slot.opening = true;
            let (this, sticky, key, uri) = (self.clone(), sticky.clone(), key.clone(), uri.clone());
            tokio::spawn(async move {
                let opened = this.open_kept(&uri).await;
                drop(permit);
                if let Ok(mut slot) = sticky.0.lock() {
                    slot.opening = false;
                    if let Some(conn) = opened
                        && slot.conn.is_none()
                        && slot.last.as_ref() == Some(&key)
                    {
                        slot.conn = Some((key, conn));
                    }
                }
            });
        }
    }

    /// A new HTTP/1.1 connection to the origin of `uri`, for the fast path ([`H1Conn`]);
    /// `None` when it cannot be made (the pool goes on serving the requests, and reports
    /// failures).
    async fn open_kept(&self, uri: &http::Uri) -> Option<H1Conn> {
        let stream = self.inner.sticky_connector.connect(&Origin::from_uri(uri).ok()?).await.ok()?;
        H1Conn::new(stream)
    }
}

/// What [`send_on_kept`] did with a request.
pub(crate) enum KeptSent<B> {
    /// Sent on the kept connection; this came back.
    Sent(Result<Response<Incoming>, hyper::Error>),
    /// Not sent (the connection is closing, or the origin closed it while idle): back in
    /// absolute form, for the pool.
    Back(Request<B>),
}

/// Sends `req` (its target in absolute form) on a connection a client connection keeps
/// (the forward proxy's [`Sticky`], the ingress's `Kept`), in origin form.
///
/// A kept connection is ready at once unless it is closing: its last response was read to
/// the end before this request could arrive (HTTP/1.1 clients send one at a time). The
/// request is then handed to it before this returns, and the future only waits for the
/// answer; the rare wait for readiness (bounded) is boxed.
pub(crate) fn send_on_kept<'a, B>(
    sender: &'a mut http1::SendRequest<B>,
    req: Request<B>,
) -> Either<WaitingKept<'a, B>, impl Future<Output = KeptSent<B>> + use<B>>
where
    B: hyper::body::Body + Send + 'static,
{
    if sender.is_ready() {
        return Either::Right(send_now(sender, req));
    }
    Either::Left(Box::pin(async move {
        match tokio::time::timeout(KEPT_READY_WAIT, sender.ready()).await {
            Ok(Ok(())) => send_now(sender, req).await,
            _ => KeptSent::Back(req),
        }
    }))
}

/// [`send_on_kept`] waiting until the connection is ready.
type WaitingKept<'a, B> = Pin<Box<dyn Future<Output = KeptSent<B>> + Send + 'a>>;

/// [`send_on_kept`] on a connection ready for the request: handed to it now; the future
/// waits for the answer (a combinator, not an `async` block, which would hold the send's
/// future twice).
pub(crate) fn send_now<B>(
    sender: &mut http1::SendRequest<B>,
    mut req: Request<B>,
) -> impl Future<Output = KeptSent<B>> + use<B>
where
    B: hyper::body::Body + 'static,
{
    // RFC 9112 §3.2.1: to an origin, the request target is in origin form (the pool does
    // the same); the absolute form goes back if the pool must send it.
    let target = origin_form(req.uri());
    let absolute = std::mem::replace(req.uri_mut(), target);
    sender.try_send_request(req).map(move |sent| match sent {
        Ok(res) => KeptSent::Sent(Ok(res)),
        Err(mut e) => match e.take_message() {
            Some(mut req) => {
                *req.uri_mut() = absolute;
                KeptSent::Back(req)
            }
            None => KeptSent::Sent(Err(e.into_error())),
        },
    })
}

/// A new HTTP/1.1 connection to `origin` through `connector` (one that offers HTTP/1.1
/// only), its connection driven by a task of its own; `None` when it cannot be made (the
/// requests keep going through the pool, which reports failures).
pub(crate) async fn open_kept<B>(connector: &Connector, origin: &Origin) -> Option<http1::SendRequest<B>>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let stream = connector.connect(origin).await.ok()?;
    let (sender, conn) = http1::Builder::new().handshake(TokioIo::new(stream)).await.ok()?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::debug!(error = %e, "kept upstream connection ended with an error");
        }
    });
    Some(sender)
}

pub(super) use robotsgate::net::origin_form;

/// A kept connection taken out of its [`Sticky`] for one request ([`Forwarder::take_kept`]).
pub(super) struct Taken {
    /// Its origin.
    pub(super) key: UpstreamKey,
    /// The connection.
    pub(super) conn: H1Conn,
}

/// How long a kept connection may take to become ready for the next request before the
/// pool is used instead.
const KEPT_READY_WAIT: Duration = Duration::from_secs(1);

/// The upstream connection one HTTP/1.x client connection keeps, for scrapers that send
/// request after request to the same origin over one keep-alive connection: such requests
/// go straight to it, without the shared pool's lookup, bookkeeping and hand-back task per
/// request (about a sixth of the forwarding cost). Requests go through the pool, which
/// reuses connections across clients, until the kept connection is there: after 16
/// requests in a row to the same origin (256 for https, whose handshake costs more) it is
/// opened in the background. It closes with the client's connection.
/// Put into each request's extensions by the proxy; the [`Forwarder`] takes it out.
#[derive(Clone, Default)]
pub(crate) struct Sticky(Arc<std::sync::Mutex<StickySlot>>);

#[derive(Default)]
pub(crate) struct StickySlot {
    /// The origin of the previous request.
    last: Option<UpstreamKey>,
    /// Requests in a row to that origin.
    run: u32,
    /// The kept connection (idle) and its origin.
    conn: Option<(UpstreamKey, H1Conn)>,
    /// A connection is being opened for it.
    opening: bool,
}

/// Where a connection taken by [`Forwarder::take_kept`] goes back, idle again, once its
/// response has been read to the end ([`super::h1::H1Body`]).
pub(super) struct Back {
    pub(super) sticky: Sticky,
    pub(super) key: UpstreamKey,
}

impl PutBack for Back {
    fn put_back(self, conn: H1Conn) {
        if let Ok(mut slot) = self.sticky.0.lock() {
            slot.conn = Some((self.key, conn));
        }
    }
}

/// Kept connections opened at once, process-wide.
pub(super) const KEPT_OPENING: usize = 4;

/// Scheme and authority of an upstream request, as written.
#[derive(Clone, Eq)]
pub(super) struct UpstreamKey {
    https: bool,
    authority: http::uri::Authority,
}

/// As `Authority`'s own equality (ASCII case ignored), byte for byte first: a client sends
/// its origin the same way every time, and the comparison is made twice a request.
impl PartialEq for UpstreamKey {
    fn eq(&self, other: &Self) -> bool {
        self.https == other.https
            && (self.authority.as_str() == other.authority.as_str() || self.authority == other.authority)
    }
}

impl UpstreamKey {
    /// Requests in a row to the origin before a connection of its own is opened: a new
    /// connection costs a TCP handshake (and a TLS one for https, as much CPU as several
    /// hundred requests save by skipping the pool), so it is opened once the client has
    /// shown it keeps sending to this origin.
    fn keep_after(&self) -> u32 {
        if self.https { 256 } else { 16 }
    }

    fn of(uri: &http::Uri) -> Option<UpstreamKey> {
        Some(UpstreamKey {
            https: uri.scheme() == Some(&http::uri::Scheme::HTTPS),
            authority: uri.authority()?.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_keys_match_as_authorities_do() {
        let key = |uri: &str| UpstreamKey::of(&uri.parse().unwrap()).unwrap();
        assert!(key("http://example.com:8080/a") == key("http://example.com:8080/b"));
        assert!(key("http://Example.COM/") == key("http://example.com/"));
        assert!(key("http://example.com/") != key("https://example.com/"));
        assert!(key("http://example.com/") != key("http://example.com:8080/"));
        assert!(key("http://example.com/") != key("http://example.org/"));
    }

    #[test]
    fn origin_form_keeps_path_and_query_only() {
        for (absolute, target) in [
            ("http://example.com/a/b?c=d", "/a/b?c=d"),
            ("http://example.com:8080/", "/"),
            ("http://example.com", "/"),
            ("http://example.com?q=1", "/?q=1"),
            ("https://user@example.com//x", "//x"),
        ] {
            let uri: http::Uri = absolute.parse().unwrap();
            assert_eq!(origin_form(&uri).to_string(), target, "{absolute}");
        }
    }
}
