//! A thread's spare buffers of one kind, kept when a connection ends for the next one
//! made on the same thread (`h1_server::Kit`, `forward::h1`'s upstream buffers): a
//! bounded stack in a `thread_local!`. What does not fit, or comes while the thread is
//! ending (its spares already gone), is dropped. Spares nobody took or gave back between
//! two calls of [`Spares::shed_unused`] are dropped then (`memory::shed_spares_when_quiet`
//! calls it on every worker thread), so that a quiet proxy holds none of them.

use std::cell::{Cell, RefCell};
use std::thread::LocalKey;

/// At most `most` spares of one kind; declared `static` in a `thread_local!`.
pub(crate) struct Spares<T> {
    kept: RefCell<Vec<T>>,
    most: usize,
    /// Whether one was taken or given since the last [`Spares::shed_unused`].
    used: Cell<bool>,
}

impl<T> Spares<T> {
    /// None yet, at most `most`.
    pub(crate) const fn new(most: usize) -> Spares<T> {
        Spares { kept: RefCell::new(Vec::new()), most, used: Cell::new(false) }
    }

    /// One of this thread's spares, if it has one.
    pub(crate) fn take(key: &'static LocalKey<Spares<T>>) -> Option<T> {
        key.try_with(|s| {
            s.used.set(true);
            s.kept.try_borrow_mut().ok()?.pop()
        })
        .ok()
        .flatten()
    }

    /// Keeps `spare` for this thread's next taker, unless the thread has `most` already or
    /// is ending.
    pub(crate) fn give(key: &'static LocalKey<Spares<T>>, spare: T) {
        let _ = key.try_with(|s| {
            s.used.set(true);
            if let Ok(mut kept) = s.kept.try_borrow_mut()
                && kept.len() < s.most
            {
                kept.push(spare);
            }
        });
    }

    /// Drops this thread's spares (and the room they took) if none was taken or given
    /// since the last call; returns how many were dropped.
    pub(crate) fn shed_unused(key: &'static LocalKey<Spares<T>>) -> usize {
        key.try_with(|s| {
            if s.used.replace(false) {
                return 0;
            }
            s.kept.try_borrow_mut().map_or(0, |mut kept| std::mem::take(&mut *kept).len())
        })
        .unwrap_or(0)
    }

    /// How many this thread keeps.
    #[cfg(test)]
    pub(crate) fn count(key: &'static LocalKey<Spares<T>>) -> usize {
        key.with(|s| s.kept.borrow().len())
    }
}

#[cfg(test)]
mod tests {
    use super::Spares;

    thread_local! {
        static KEPT: Spares<Vec<u8>> = const { Spares::new(2) };
    }

    /// Bounded; spares used since the last look are kept, spares left alone for a whole
    /// interval are dropped.
    #[test]
    fn spares_are_bounded_and_shed_once_unused_for_an_interval() {
        for _ in 0..3 {
            Spares::give(&KEPT, vec![1u8; 64]);
        }
        assert_eq!(Spares::count(&KEPT), 2, "at most `most`");
        assert_eq!(Spares::shed_unused(&KEPT), 0, "given since the last look: kept");
        assert_eq!(Spares::count(&KEPT), 2);
        assert_eq!(Spares::take(&KEPT).map(|v| v.len()), Some(64));
        assert_eq!(Spares::shed_unused(&KEPT), 0, "taken since the last look: kept");
        assert_eq!(Spares::shed_unused(&KEPT), 1, "left alone for an interval: dropped");
        assert_eq!(Spares::count(&KEPT), 0);
        assert_eq!(Spares::take(&KEPT), None);
    }
}
