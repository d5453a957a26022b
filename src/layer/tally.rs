//! [`Tally`]: the bytes of an exchange that goes on after its response, counted until it
//! closes (a connection taken over by an HTTP upgrade, a `CONNECT` tunnel).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

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
}

#[derive(Default)]
enum State {
    #[default]
    Open,
    Waiting(Box<dyn FnOnce(u64, u64) + Send>),
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

    /// The exchange is over: whoever waits with [`Tally::when_closed`] is told now.
    pub fn close(&self) {
        let waiting = match self.0.state.lock() {
            Ok(mut s) => std::mem::replace(&mut *s, State::Closed),
            Err(_) => return,
        };
        if let State::Waiting(f) = waiting {
            let (to, from) = self.totals();
            f(to, from);
        }
    }

    /// Calls `f` with the totals when the exchange is over (at once if it is already).
    pub fn when_closed(&self, f: impl FnOnce(u64, u64) + Send + 'static) {
        let closed = match self.0.state.lock() {
            Ok(mut s) => match &*s {
                State::Closed => true,
                _ => {
                    *s = State::Waiting(Box::new(f));
                    return;
                }
            },
            Err(_) => return,
        };
        if closed {
            let (to, from) = self.totals();
            f(to, from);
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
            f(*self.to_client.get_mut(), *self.from_client.get_mut());
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
