//! [`Tally`]: the bytes of an exchange that goes on after its response, counted until it
//! closes (a connection taken over by an HTTP upgrade, a `CONNECT` tunnel).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The bytes of a connection taken over after its response (a WebSocket upgrade, a
/// `CONNECT` tunnel), counted both ways until it closes. The service that opens such a
/// tunnel puts one into the response's extensions; the layer then writes the request's
/// outcome (status and bytes) when the tally closes rather than when the (empty) body
/// ends. Closed when [`Tally::close`] is called or the last clone is dropped.
#[derive(Clone, Default)]
pub struct Tally(Arc<Inner>);

#[derive(Default)]
struct Inner {
    to_client: AtomicU64,
    from_client: AtomicU64,
    state: Mutex<State>,
    /// The audit record id of the request that opened the exchange (set by the layer when
    /// the response passes it).
    request_id: OnceLock<Box<str>>,
    /// The kind and status of a refusal made after the response (the tunnel's client broke
    /// a rule only its first bytes could show).
    refused: OnceLock<(&'static str, u16)>,
}

/// What the one waiting for the end is told: bytes to and from the client, and the
/// refusal said after the response, if any.
pub(super) struct Totals {
    pub(super) to_client: u64,
    pub(super) from_client: u64,
    pub(super) refused: Option<(&'static str, u16)>,
}

#[derive(Default)]
enum State {
    #[default]
    Open,
    Waiting(Box<dyn FnOnce(Totals) + Send>),
    Closed,
}

impl std::fmt::Debug for Tally {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (to, from) = self.totals();
        f.debug_struct("Tally").field("to_client", &to).field("from_client", &from).finish()
    }
}

impl Tally {
    /// `n` more bytes went to the client.
    pub fn to_client(&self, n: u64) {
        self.0.to_client.fetch_add(n, Ordering::Relaxed);
    }

    /// `n` more bytes came from the client.
    pub fn from_client(&self, n: u64) {
        self.0.from_client.fetch_add(n, Ordering::Relaxed);
    }

    /// The bytes so far: (to the client, from the client).
    pub fn totals(&self) -> (u64, u64) {
        (self.0.to_client.load(Ordering::Relaxed), self.0.from_client.load(Ordering::Relaxed))
    }

    /// The audit record id of the request that opened the exchange: its decision and
    /// outcome records carry it. Set by [`RobotsLayer`](super::RobotsLayer) when the
    /// response passes it (with an audit log, and a decision recorded); `None` before
    /// that, and without them.
    ///
    /// ```
    /// let tally = robotsgate::layer::Tally::default();
    /// assert_eq!(tally.request_id(), None);
    /// ```
    pub fn request_id(&self) -> Option<&str> {
        self.0.request_id.get().map(|id| &**id)
    }

    pub(super) fn set_request_id(&self, id: &str) {
        let _ = self.0.request_id.set(id.into());
    }

    /// The exchange was refused after its response: what its client sent first broke a
    /// rule (a TLS client asking for another host than the tunnel's). The outcome record
    /// then has the refusal's kind and status, as a tunnel refused after its `200` by the
    /// layer does; the first refusal said counts.
    ///
    /// ```
    /// use robotsgate::{Refusal, RefusalKind};
    /// let tally = robotsgate::layer::Tally::default();
    /// tally.refuse(&Refusal::new(RefusalKind::BadRequest, "SNI names another host"));
    /// assert_eq!(tally.refused(), Some(("bad-request", 400)));
    /// ```
    pub fn refuse(&self, refusal: &crate::Refusal) {
        let _ = self.0.refused.set((refusal.kind().as_str(), refusal.status().as_u16()));
    }

    /// The kind and status of the refusal said with [`Tally::refuse`], if any.
    pub fn refused(&self) -> Option<(&'static str, u16)> {
        self.0.refused.get().copied()
    }

    /// The exchange is over: whoever waits with [`Tally::when_closed`] is told now.
    pub fn close(&self) {
        let waiting = match self.0.state.lock() {
            Ok(mut s) => std::mem::replace(&mut *s, State::Closed),
            Err(_) => return,
        };
        if let State::Waiting(f) = waiting {
            f(self.0.totals());
        }
    }

    /// Calls `f` with the totals when the exchange is over (at once if it is already).
    pub fn when_closed(&self, f: impl FnOnce(u64, u64) + Send + 'static) {
        self.when_over(move |t| f(t.to_client, t.from_client));
    }

    /// [`Tally::when_closed`], told the refusal too.
    pub(super) fn when_over(&self, f: impl FnOnce(Totals) + Send + 'static) {
        match self.0.state.lock() {
            Ok(mut s) => match &*s {
                State::Closed => {}
                _ => {
                    *s = State::Waiting(Box::new(f));
                    return;
                }
            },
            Err(_) => return,
        };
        f(self.0.totals());
    }
}

impl Inner {
    fn totals(&self) -> Totals {
        Totals {
            to_client: self.to_client.load(Ordering::Relaxed),
            from_client: self.from_client.load(Ordering::Relaxed),
            refused: self.refused.get().copied(),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let waiting = match self.state.get_mut() {
            Ok(s) => std::mem::replace(s, State::Closed),
            Err(_) => return,
        };
        if let State::Waiting(f) = waiting {
            f(self.totals());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_waiter_hears_the_totals_once_whichever_comes_first() {
        let heard = Arc::new(Mutex::new(Vec::new()));
        // Waiting first, closed later.
        let t = Tally::default();
        let h = heard.clone();
        t.when_closed(move |to, from| h.lock().unwrap().push((to, from)));
        t.to_client(5);
        t.from_client(2);
        assert!(heard.lock().unwrap().is_empty());
        t.close();
        t.close();
        assert_eq!(*heard.lock().unwrap(), [(5, 2)]);
        // Closed first.
        let t = Tally::default();
        t.to_client(1);
        t.close();
        let h = heard.clone();
        t.when_closed(move |to, from| h.lock().unwrap().push((to, from)));
        assert_eq!(heard.lock().unwrap().last(), Some(&(1, 0)));
        // Dropped without a close: heard too.
        let t = Tally::default();
        let h = heard.clone();
        t.when_closed(move |to, from| h.lock().unwrap().push((to + 100, from)));
        drop(t);
        assert_eq!(heard.lock().unwrap().last(), Some(&(100, 0)));
    }
}
