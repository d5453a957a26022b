//! A connection's place under its listener's `max_connections`, kept by whatever carries
//! the connection on after hyper lets go of it: a `CONNECT` tunnel (opaque, sniffed or
//! intercepted) or an upgraded connection (WebSocket).

use std::sync::Arc;

use http::{Method, Request, header};
use tokio::sync::OwnedSemaphorePermit;

/// One place under a listener's connection limit. The connection's task holds it; a
/// request that may outlive its connection carries a clone in its extensions (a
/// `CONNECT`; on the ingress and inside tunnels, any [`Slot::wanted`]; on the main
/// listener an upgrade finds it in the connection's forwarder instead), and the task that
/// serves the tunnel or upgrade after it holds that clone: the place is free again when
/// the last of them ends. Before, a connection's
/// place was given back when hyper handed it over, and a client could hold any number of
/// tunnels with `max_connections = 2`.
#[derive(Clone, Debug)]
pub(crate) struct Slot(
    #[allow(dead_code, reason = "held, never read: its drop frees the place")] Arc<OwnedSemaphorePermit>,
);

impl Slot {
    /// The place `permit` holds.
    pub(crate) fn new(permit: OwnedSemaphorePermit) -> Slot {
        Slot(Arc::new(permit))
    }

    /// Whether `req` may outlive its connection: a `CONNECT`, or a request asking for an
    /// upgrade.
    pub(crate) fn wanted<B>(req: &Request<B>) -> bool {
        req.method() == Method::CONNECT || req.headers().contains_key(header::UPGRADE)
    }

    /// Puts a clone of the slot into `req`'s extensions if it may outlive its connection.
    pub(crate) fn lend<B>(&self, req: &mut Request<B>) {
        if Slot::wanted(req) {
            req.extensions_mut().insert(self.clone());
        }
    }

    /// Takes the slot `req` carries, for the task that serves it after its connection.
    pub(crate) fn take<B>(req: &mut Request<B>) -> Option<Slot> {
        req.extensions_mut().remove::<Slot>()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::sync::Semaphore;

    #[test]
    fn the_place_is_free_when_the_last_holder_ends() {
        let places = Arc::new(Semaphore::new(1));
        let slot = Slot::new(places.clone().try_acquire_owned().unwrap());
        let mut connect = Request::connect("a.test:443").body(()).unwrap();
        slot.lend(&mut connect);
        let mut plain = Request::get("http://a.test/").body(()).unwrap();
        slot.lend(&mut plain);
        assert!(Slot::take(&mut plain).is_none(), "a plain request carries no slot");
        let tunnel = Slot::take(&mut connect).unwrap();
        drop(slot);
        assert_eq!(places.available_permits(), 0, "the tunnel still holds the place");
        drop(tunnel);
        assert_eq!(places.available_permits(), 1);
        let mut ws = Request::get("http://a.test/ws").header("upgrade", "websocket").body(()).unwrap();
        Slot::new(places.clone().try_acquire_owned().unwrap()).lend(&mut ws);
        assert!(Slot::take(&mut ws).is_some(), "an upgrade carries the slot");
    }
}
