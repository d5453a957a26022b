//! The upstream connection a client connection keeps ([`Sticky`]) for scrapers that send
//! request after request to one origin over one keep-alive connection.

use std::sync::{Arc, Mutex};

use super::Forwarder;
use super::h1::{self, H1Conn, PutBack};
use crate::slot::Slot;
use robotsgate::net::Pool;
use robotsgate::origin::{Origin, Scheme};

impl Forwarder {
    /// A slot for the upstream connection a client connection keeps; the connection goes
    /// to the pool when the client connection ends.
    pub(super) fn sticky(&self, place: Slot) -> Sticky {
        Sticky(Arc::new(Mutex::new(StickySlot {
            pool: Some(self.inner.pool.clone()),
            last: None,
            run: 0,
            conn: None,
            opening: false,
            place: Some(place),
        })))
    }

    /// Which connection the request to `uri` goes on ([`Route`]), the kept one taken out
    /// of `sticky` if it is there (given back through [`Back`] once its response has been
    /// read), else one that an earlier client connection kept and left to the pool.
    /// Counts the requests in a row to that origin and, once there are enough
    /// ([`UpstreamKey::keep_after`]), starts opening a connection of its own for it.
    ///
    /// Nothing here waits: the request's future holds only the send itself.
    pub(super) fn take_kept(&self, sticky: &Sticky, uri: &http::Uri) -> Route {
        let Some(key) = UpstreamKey::of(uri) else { return Route::Pool };
        let again = {
            let Ok(mut slot) = sticky.0.lock() else { return Route::Pool };
            if slot.last.as_ref() == Some(&key) {
                slot.run = slot.run.saturating_add(1);
            } else {
                slot.last = Some(key.clone());
                slot.run = 1;
            }
            match slot.conn.take() {
                Some((k, conn)) if k == key => return Route::Kept(Taken { key, conn }),
                other => slot.conn = other,
            }
            if slot.opening {
                return Route::Pool;
            }
            if slot.conn.is_none()
                && slot.pool.is_some()
                && let Some(conn) = h1::take_idle(&self.inner.pool, uri)
            {
                return Route::Kept(Taken { key, conn });
            }
            if let Some(origin) = self.opens_anyway(&slot, uri) {
                slot.opening = true;
                return Route::Open { key, origin, opening: Opening(sticky.clone()) };
            }
            slot.run >= key.keep_after()
        };
        if again {
            self.open_kept_later(sticky, &key, uri);
        }
        Route::Pool
    }

    /// The origin of `uri` when the request would make the pool open a new connection
    /// ([`h1::opens_new`]) and the client connection keeps none yet: that connection is
    /// then opened as the one it keeps. (https is not taken: the pool may share an HTTP/2
    /// connection there.)
    fn opens_anyway(&self, slot: &StickySlot, uri: &http::Uri) -> Option<Origin> {
        if slot.conn.is_some() || slot.pool.is_none() {
            return None;
        }
        h1::opens_new(&self.inner.pool, &self.inner.sticky_connector, uri)
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
        H1Conn::new(stream, self.inner.pool.config().read_timeout)
    }
}

pub(super) use robotsgate::net::origin_form;

/// Where a request goes ([`Forwarder::take_kept`]).
pub(super) enum Route {
    /// On the connection its client connection keeps.
    Kept(Taken),
    /// On a connection opened for it, which its client connection then keeps: the pool
    /// has none to this origin, so it would open one anyway.
    Open {
        /// The origin, as the connection is kept under.
        key: UpstreamKey,
        /// The origin, to connect to.
        origin: Origin,
        /// Clears the slot's `opening` once the connection is made (or not).
        opening: Opening,
    },
    /// Through the pool.
    Pool,
}

/// While a request opens its client connection's kept connection ([`Route::Open`]): the
/// next requests do not open another. Dropped once connected, failed or given up.
pub(super) struct Opening(Sticky);

impl Drop for Opening {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.0.0.lock() {
            slot.opening = false;
        }
    }
}

/// A kept connection taken out of its [`Sticky`] for one request ([`Forwarder::take_kept`]).
pub(super) struct Taken {
    /// Its origin.
    pub(super) key: UpstreamKey,
    /// The connection.
    pub(super) conn: H1Conn,
}

/// The upstream connection one HTTP/1.x client connection keeps, for scrapers that send
/// request after request to the same origin over one keep-alive connection: such requests
/// go straight to it, without the shared pool's lookup, bookkeeping and hand-back task per
/// request (about a sixth of the forwarding cost).
///
/// - A client connection that keeps none takes, at its first request to an origin, an
///   idle one that an earlier client connection kept and left to the pool
///   ([`h1::take_idle`]): new clients after old ones open no connection, and a client that
///   sends one request and goes (a new connection for each request) is served on the fast
///   path.
/// - A plain-http request that would open a new connection anyway (the pool has none to
///   its origin) opens it as the client connection's kept one: at c256, 256 new clients
///   open 256 connections, not a pool's worth that churns and then 256 more.
/// - Otherwise requests go through the pool, which reuses connections across clients,
///   and after 16 requests in a row to the same origin (256 for https, whose handshake
///   costs more) the kept connection is opened in the background.
/// - When the client connection ends, its kept connection, idle, goes to the pool
///   ([`Forwarder::sticky`]): a client that sent one request and left has opened no
///   connection that others cannot use.
///
/// Put into each request's extensions by the proxy; the [`Forwarder`] takes it out.
#[derive(Clone, Default)]
pub(crate) struct Sticky(Arc<Mutex<StickySlot>>);

impl Sticky {
    /// The client connection's place ([`Slot`]), if this is a client connection's.
    pub(super) fn place(&self) -> Option<Slot> {
        self.0.lock().ok()?.place.clone()
    }
}

#[derive(Default)]
pub(crate) struct StickySlot {
    /// Where the kept connection goes when the client connection ends (`None`: closed).
    pool: Option<Pool>,
    /// The origin of the previous request.
    last: Option<UpstreamKey>,
    /// Requests in a row to that origin.
    run: u32,
    /// The kept connection (idle) and its origin.
    conn: Option<(UpstreamKey, H1Conn)>,
    /// A connection is being opened for it.
    opening: bool,
    /// The client connection's place under `proxy.max_connections`, for an upgrade that
    /// outlives it (`None` inside tunnels: their requests carry the tunnel's).
    place: Option<Slot>,
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
            match (&slot.conn, &slot.pool) {
                // One was opened in the background meanwhile: this one goes to the pool.
                (Some(_), Some(pool)) => to_pool(pool, &self.key, conn),
                _ => slot.conn = Some((self.key, conn)),
            }
        }
    }
}

impl Drop for StickySlot {
    /// The client connection has ended: its kept connection goes to the pool.
    fn drop(&mut self) {
        if let (Some(pool), Some((key, conn))) = (&self.pool, self.conn.take()) {
            to_pool(pool, &key, conn);
        }
    }
}

/// Gives `conn`, idle, to `pool`, unless the origin has closed it or sent something.
fn to_pool(pool: &Pool, key: &UpstreamKey, conn: H1Conn) {
    let scheme = if key.https { Scheme::Https } else { Scheme::Http };
    if let Ok(origin) = Origin::from_authority(scheme, key.authority.as_str())
        && let Some(stream) = conn.into_idle()
    {
        pool.adopt(&origin, stream);
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
