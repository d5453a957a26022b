//! The upstream connection a client connection keeps ([`Kept`]): a bot or browser that
//! sends request after request over one keep-alive connection gets them forwarded over one
//! upstream connection of its own, without the pool's lookup and bookkeeping per request.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use robotsgate::origin::Origin;

use super::Upstream;
use crate::forward::{H1Body, H1Conn, PutBack};

/// Requests a client connection sends before its own upstream connection is opened: a
/// client that sends one or two requests and goes is served by the pool, and costs no
/// connection of its own.
pub(super) const KEEP_AFTER: u32 = 4;

/// Upstream connections being opened for clients at once, per worker.
pub(super) const KEPT_OPENING: usize = 4;

/// The upstream connection one client connection keeps. Put into each of its requests'
/// extensions by the listener; [`Upstream`] takes it out. Its GET and HEAD requests go over
/// it on the HTTP/1.1 fast path (`forward/h1.rs`). The upstream connection closes with the
/// client's (the last clone of the slot goes, and with it the connection).
#[derive(Clone, Default)]
pub(crate) struct Kept(Arc<Mutex<Slot>>);

#[derive(Default)]
pub(crate) struct Slot {
    /// Requests the client connection sent so far (up to [`KEEP_AFTER`]).
    requests: u32,
    /// The connection, when open and not in use by a request.
    conn: Option<H1Conn>,
    /// One is being opened.
    opening: bool,
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

impl Upstream {
    /// The connection `kept` holds, taken out of it (it goes back once its response has
    /// been read), or `None`: the pool is to send the request. The connection is opened in
    /// the background once the client has sent [`KEEP_AFTER`] requests.
    pub(super) fn take_kept(&self, kept: &Kept, uri: &http::Uri) -> Option<H1Conn> {
        let mut slot = kept.0.lock().ok()?;
        slot.requests = slot.requests.saturating_add(1).min(KEEP_AFTER);
        let conn = slot.conn.take();
        if conn.is_none() && slot.requests >= KEEP_AFTER && !slot.opening {
            self.open_kept_later(kept, &mut slot, uri);
        }
        conn
    }

    /// Opens the kept connection in a task of its own: no request waits for a connection
    /// (the pool serves them meanwhile), and a few are opened at once at most.
    fn open_kept_later(&self, kept: &Kept, slot: &mut Slot, uri: &http::Uri) {
        let Ok(permit) = self.opening.clone().try_acquire_owned() else { return };
        let Ok(origin) = Origin::from_uri(uri) else { return };
        slot.opening = true;
        let (connector, kept) = (self.kept_connector.clone(), kept.clone());
        tokio::spawn(async move {
            let opened = connector.connect(&origin).await.ok().and_then(H1Conn::new);
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
