//! A thread's spare buffers of one kind, kept when a connection ends for the next one
//! made on the same thread (`h1_server::Kit`, `forward::h1`'s upstream buffers): a
//! bounded stack in a `thread_local!`. What does not fit, or comes while the thread is
//! ending (its spares already gone), is dropped.

use std::cell::RefCell;
use std::thread::LocalKey;

/// At most `most` spares of one kind; declared `static` in a `thread_local!`.
pub(crate) struct Spares<T> {
    kept: RefCell<Vec<T>>,
    most: usize,
}

impl<T> Spares<T> {
    /// None yet, at most `most`.
    pub(crate) const fn new(most: usize) -> Spares<T> {
        Spares { kept: RefCell::new(Vec::new()), most }
    }

    /// One of this thread's spares, if it has one.
    pub(crate) fn take(key: &'static LocalKey<Spares<T>>) -> Option<T> {
        key.try_with(|s| s.kept.try_borrow_mut().ok()?.pop()).ok().flatten()
    }

    /// Keeps `spare` for this thread's next taker, unless the thread has `most` already or
    /// is ending.
    pub(crate) fn give(key: &'static LocalKey<Spares<T>>, spare: T) {
        let _ = key.try_with(|s| {
            if let Ok(mut kept) = s.kept.try_borrow_mut()
                && kept.len() < s.most
            {
                kept.push(spare);
            }
        });
    }

    /// How many this thread keeps.
    #[cfg(test)]
    pub(crate) fn count(key: &'static LocalKey<Spares<T>>) -> usize {
        key.with(|s| s.kept.borrow().len())
    }
}
