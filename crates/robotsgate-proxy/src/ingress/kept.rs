//! The upstream connection a client connection keeps ([`Kept`]): a bot or browser that
//! sends request after request over one keep-alive connection gets them forwarded over one
//! upstream connection of its own, without the pool's lookup and bookkeeping per request.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use robotsgate::net::Pool;
use robotsgate::origin::{Origin, Scheme};

use super::Upstream;
use crate::forward::{H1Body, H1Conn, PutBack, opens_new, take_idle};

/// Requests a client connection sends before its own upstream connection is opened in the
/// background, when the pool had a connection for its first ones: a client that sends one
/// or two requests and goes is served by the pool.
pub(super) const KEEP_AFTER: u32 = 4;

/// Upstream connections being opened for clients at once, per worker.
pub(super) const KEPT_OPENING: usize = 4;

/// The upstream connection one client connection keeps. Put into each of its requests'
/// extensions by the listener; [`Upstream`] takes it out. Its GET and HEAD requests go over
/// it on the HTTP/1.1 fast path (`forward/h1.rs`).
///
/// - A client connection takes, at its first request, an idle connection that an earlier
///   one kept and left to the pool, if there is one: new clients after old ones open none.
/// - A request that would make the pool open a new connection (it has none idle) opens it
///   as this one instead (plain-http upstreams): new clients arriving together open one
///   connection each, not a pool's worth that churns and then one each again.
/// - Otherwise the pool serves the first requests, and after [`KEEP_AFTER`] the
///   connection is opened in the background.
/// - When the client connection ends (the last clone of the slot goes), the connection, if
///   idle, goes to the worker's pool.
#[derive(Clone, Default)]
pub(crate) struct Kept(pub(super) Arc<Mutex<Slot>>);

impl Kept {
    /// A slot whose connection, to `origin`, goes to `pool` when the client connection
    /// ends.
    pub(super) fn new(pool: Pool, origin: Origin) -> Kept {
        Kept(Arc::new(Mutex::new(Slot {
            home: Some((pool, origin)),
            requests: 0,
            conn: None,
            opening: false,
        })))
    }
}

#[derive(Default)]
pub(crate) struct Slot {
    /// The pool the connection goes to when the client connection ends, and the origin it
    /// is a connection to (`None`: closed).
    home: Option<(Pool, Origin)>,
    /// Requests the client connection sent so far (up to [`KEEP_AFTER`]).
    requests: u32,
    /// The connection, when open and not in use by a request.
    conn: Option<H1Conn>,
    /// One is being opened.
    opening: bool,
}

impl Drop for Slot {
    /// The client connection has ended: the connection goes to the pool.
    fn drop(&mut self) {
        if let (Some((pool, origin)), Some(conn)) = (&self.home, self.conn.take())
            && let Some(stream) = conn.into_idle()
        {
            pool.adopt(origin, stream);
        }
    }
}

/// A connection taken by [`Upstream::take_kept`] goes back, idle, once its response has
/// been read to the end.
impl PutBack for Kept {
    fn put_back(self, conn: H1Conn) {
        if let Ok(mut slot) = self.0.lock() {
            slot.conn = Some(conn);
        }
    }
}

/// The body of an upstream response read over the client connection's kept connection.
pub struct KeptBody(pub(super) H1Body<Kept>);

impl Body for KeptBody {
    type Data = Bytes;
    type Error = Box<dyn std::error::Error + Send + Sync>;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        Pin::new(&mut self.0).poll_frame(cx).map_err(Into::into)
    }

    fn is_end_stream(&self) -> bool {
        self.0.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.0.size_hint()
    }
}

/// Where a request goes ([`Upstream::take_kept`]).
pub(super) enum Route {
    /// On the connection its client connection keeps.
    Kept(H1Conn),
    /// On a connection opened for it, which its client connection then keeps (the pool
    /// has none idle: it would open one too).
    Open(Origin, Opening),
    /// Through the pool.
    Pool,
}

/// While a request opens its client connection's connection ([`Route::Open`]): the next
/// requests do not open another. Dropped once connected, failed or given up.
pub(super) struct Opening(Kept);

impl Drop for Opening {
    fn drop(&mut self) {
        if let Ok(mut slot) = self.0.0.lock() {
            slot.opening = false;
        }
    }
}

impl Upstream {
    /// Where the request to `uri` goes: the connection `kept` holds, taken out of it (it
    /// goes back once its response has been read), an idle one a client connection left
    /// to the pool, a connection opened for it now (see [`Kept`]), or the pool. Once the
    /// client has sent [`KEEP_AFTER`] requests through the pool, its connection is opened
    /// in the background.
    pub(super) fn take_kept(&self, kept: &Kept, uri: &http::Uri) -> Route {
        let Ok(mut slot) = kept.0.lock() else { return Route::Pool };
        slot.requests = slot.requests.saturating_add(1).min(KEEP_AFTER);
        if let Some(conn) = slot.conn.take() {
            return Route::Kept(conn);
        }
        if slot.opening {
            return Route::Pool;
        }
        if slot.home.is_some()
            && let Some(conn) = take_idle(&self.pool, uri)
        {
            return Route::Kept(conn);
        }
        if let Some(origin) = self.opens_anyway(&slot, uri) {
            slot.opening = true;
            return Route::Open(origin, Opening(kept.clone()));
        }
        if slot.requests >= KEEP_AFTER {
            self.open_kept_later(kept, &mut slot, uri);
        }
        Route::Pool
    }

    /// The origin of `uri` when the request would make the pool open a new connection
    /// ([`opens_new`]) and the slot can keep it.
    fn opens_anyway(&self, slot: &Slot, uri: &http::Uri) -> Option<Origin> {
        slot.home.as_ref()?;
        opens_new(&self.pool, &self.kept_connector, uri)
    }

    /// A slot for the connection a new client connection keeps; the connection goes to
    /// this upstream's pool when the client connection ends.
    pub(super) fn kept(&self) -> Kept {
        let scheme = if self.scheme == http::uri::Scheme::HTTPS { Scheme::Https } else { Scheme::Http };
        match Origin::from_authority(scheme, self.authority.as_str()) {
            Ok(origin) => Kept::new(self.pool.clone(), origin),
            Err(_) => Kept::default(),
        }
    }

    /// Opens the kept connection in a task of its own: no request waits for a connection
    /// (the pool serves them meanwhile), and a few are opened at once at most.
    fn open_kept_later(&self, kept: &Kept, slot: &mut Slot, uri: &http::Uri) {
        let Ok(permit) = self.opening.clone().try_acquire_owned() else { return };
        let Ok(origin) = Origin::from_uri(uri) else { return };
        slot.opening = true;
        let (connector, kept) = (self.kept_connector.clone(), kept.clone());
        let read_timeout = self.pool.config().read_timeout;
        tokio::spawn(async move {
            let opened = connector.connect(&origin).await.ok().and_then(|s| H1Conn::new(s, read_timeout));
            drop(permit);
            if let Ok(mut slot) = kept.0.lock() {
                slot.opening = false;
                if slot.conn.is_none() {
                    slot.conn = opened;
                }
            }
        });
    }
}
