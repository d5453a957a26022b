//! The upstream connection a client connection keeps ([`Kept`]): a bot or browser that
//! sends request after request over one keep-alive connection gets them forwarded over one
//! upstream connection of its own, without the pool's lookup and bookkeeping per request.

use std::sync::{Arc, Mutex};

use hyper::client::conn::http1::SendRequest;
use robotsgate::net::PoolRequestBody;
use robotsgate::origin::Origin;

use super::Upstream;
use crate::forward::open_kept;

/// Requests a client connection sends before its own upstream connection is opened: a
/// client that sends one or two requests and goes is served by the pool, and costs no
/// connection of its own.
pub(super) const KEEP_AFTER: u32 = 4;

/// Upstream connections being opened for clients at once, per worker.
pub(super) const KEPT_OPENING: usize = 4;

/// The upstream connection one client connection keeps. Put into each of its requests'
/// extensions by the listener; [`Upstream`] takes it out. The upstream connection closes
/// with the client's (the last clone of the slot goes, and with it the sender).
#[derive(Clone, Default)]
pub(crate) struct Kept(Arc<Mutex<Slot>>);

#[derive(Default)]
pub(crate) struct Slot {
    /// Requests the client connection sent so far (up to [`KEEP_AFTER`]).
    requests: u32,
    /// The connection, when open and not in use by a request.
    sender: Option<SendRequest<PoolRequestBody>>,
    /// One is being opened.
    opening: bool,
}

impl Kept {
    /// Gives back the connection taken by [`Upstream::take_kept`], once it has answered.
    pub(super) fn put_back(&self, sender: SendRequest<PoolRequestBody>) {
        if let Ok(mut slot) = self.0.lock() {
            slot.sender = Some(sender);
        }
    }
}

impl Upstream {
    /// The connection `kept` holds, taken out of it (given back with [`Kept::put_back`]
    /// once it has answered), or `None`: the pool is to send the request. The connection
    /// is opened in the background once the client has sent [`KEEP_AFTER`] requests.
    pub(super) fn take_kept(&self, kept: &Kept, uri: &http::Uri) -> Option<SendRequest<PoolRequestBody>> {
        let mut slot = kept.0.lock().ok()?;
        slot.requests = slot.requests.saturating_add(1).min(KEEP_AFTER);
        let sender = slot.sender.take();
        if sender.is_none() && slot.requests >= KEEP_AFTER && !slot.opening {
            self.open_kept_later(kept, &mut slot, uri);
        }
        sender
    }

    /// Opens the kept connection in a task of its own: no request waits for a connection
    /// (the pool serves them meanwhile), and a few are opened at once at most.
    fn open_kept_later(&self, kept: &Kept, slot: &mut Slot, uri: &http::Uri) {
        let Ok(permit) = self.opening.clone().try_acquire_owned() else { return };
        let Ok(origin) = Origin::from_uri(uri) else { return };
        slot.opening = true;
        let (connector, kept) = (self.kept_connector.clone(), kept.clone());
        tokio::spawn(async move {
            let opened = open_kept(&connector, &origin).await;
            drop(permit);
            if let Ok(mut slot) = kept.0.lock() {
                slot.opening = false;
                if slot.sender.is_none() {
                    slot.sender = opened;
                }
            }
        });
    }
}
