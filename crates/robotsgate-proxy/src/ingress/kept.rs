//! The upstream connection a client connection keeps ([`Kept`]): a bot or browser that
//! sends request after request over one keep-alive connection gets them forwarded over one
//! upstream connection of its own, without the pool's lookup and bookkeeping per request.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use robotsgate::net::PoolRequestBody;
use robotsgate::origin::Origin;

use super::Upstream;
use crate::forward::{KeptSent, open_kept, send_on_kept};

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

/// What the kept connection did with a request.
pub(super) enum KeptSend {
    /// Sent; this came back.
    Sent(Result<Response<Incoming>, hyper::Error>),
    /// Not sent (no connection yet, or it closed): the pool is to send it.
    Pool(Request<PoolRequestBody>),
}

impl Upstream {
    /// Sends `req` (its target in absolute form) on the connection `kept` holds, or gives
    /// it back for the pool; the connection is opened in the background once the client
    /// has sent [`KEEP_AFTER`] requests.
    pub(super) async fn send_kept(&self, kept: &Kept, req: Request<PoolRequestBody>) -> KeptSend {
        let sender = {
            let Ok(mut slot) = kept.0.lock() else { return KeptSend::Pool(req) };
            slot.requests = slot.requests.saturating_add(1).min(KEEP_AFTER);
            match slot.sender.take() {
                Some(s) => Some(s),
                None => {
                    if slot.requests >= KEEP_AFTER && !slot.opening {
                        self.open_kept_later(kept, &mut slot, req.uri());
                    }
                    None
                }
            }
        };
        let Some(mut sender) = sender else { return KeptSend::Pool(req) };
        match send_on_kept(&mut sender, req).await {
            KeptSent::Sent(res) => {
                if res.is_ok()
                    && let Ok(mut slot) = kept.0.lock()
                {
                    slot.sender = Some(sender);
                }
                KeptSend::Sent(res)
            }
            KeptSent::Back(req) => KeptSend::Pool(req),
        }
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
