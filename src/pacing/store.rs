//! Where the slots and pauses of a lane are kept: [`PaceStore`], the interface, and
//! [`LocalStore`], in the process (in the lane itself). A shared store (Redis, for a fleet
//! of proxies) keeps the same state where every replica sees it, and mirrors it in the
//! lane for estimates.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lane::Lane;
use super::pause::PauseInfo;
use super::slot::{backoff_pause, next_slot};

/// A future of a store.
pub(crate) type StoreFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// A slot taken: when the request may start.
#[derive(Debug, Clone)]
pub(crate) struct Slot {
    /// From taking it to the slot.
    pub(crate) wait: Duration,
    /// The pause that made the wait, when one did.
    pub(crate) pause: Option<PauseInfo>,
    /// When (local clock), and the lane's previous start, for giving it back.
    at: Instant,
    prev: Option<Instant>,
    /// The same in a shared store's clock (milliseconds; `-1`: none), when it gave it.
    shared: Option<(i64, i64)>,
}

impl Slot {
    /// A slot a shared store gave: `wait` from now, at `at` (and after `prev`) in its
    /// clock, mirrored at `local` in the lane.
    pub(crate) fn shared(
        wait: Duration,
        pause: Option<PauseInfo>,
        local: Instant,
        at: i64,
        prev: i64,
    ) -> Slot {
        Slot { wait, pause, at: local, prev: None, shared: Some((at, prev)) }
    }

    /// The shared store's `(at, prev)`, for giving the slot back there.
    pub(crate) fn shared_at(&self) -> Option<(i64, i64)> {
        self.shared
    }
}

/// What taking a slot gave.
#[derive(Debug, Clone)]
pub(crate) enum Take {
    /// A slot, `wait` from now.
    Go(Slot),
    /// The next slot is further away than the limit: nothing taken.
    TooLate {
        /// From now to the next slot.
        wait: Duration,
        /// The pause that made the wait, when one did.
        pause: Option<PauseInfo>,
    },
}

/// A 429 or 503 answer from the origin.
#[derive(Debug, Clone)]
pub(crate) struct Answer {
    pub(crate) status: u16,
    /// Its `Retry-After`, read, and as sent.
    pub(crate) retry_after: Option<(Duration, Arc<str>)>,
    /// When the request was sent (answers to requests sent before the current pause began
    /// do not double it).
    pub(crate) sent: Instant,
    pub(crate) initial: Duration,
    pub(crate) max: Duration,
}

/// Keeps the slots and pauses of lanes. Taking a slot is atomic per lane: two requests
/// never get the same slot.
pub(crate) trait PaceStore: Send + Sync + 'static {
    /// Takes `lane`'s next slot, at least `delay` after the previous start and not during
    /// a pause, if it comes within `limit`.
    fn take<'a>(&'a self, lane: &'a Lane, delay: Duration, limit: Duration) -> StoreFuture<'a, Take>;

    /// Gives back a slot that will not be used (its request went away before it came),
    /// when no later slot was taken meanwhile.
    fn give_back(&self, lane: &Lane, slot: &Slot);

    /// Pauses `lane` after a 429 or 503: the pause applied, or `None` when the answer
    /// changed nothing (a request sent before the pause began, without `Retry-After`).
    fn pause<'a>(&'a self, lane: &'a Lane, answer: Answer) -> StoreFuture<'a, Option<PauseInfo>>;

    /// A successful answer: the back-off streak starts again from the first pause.
    fn clear(&self, lane: &Lane);
}

/// The store of a single process: the state lives in the lane.
#[derive(Debug, Default)]
pub(crate) struct LocalStore;

impl LocalStore {
    /// [`PaceStore::take`], synchronously.
    pub(crate) fn take_now(lane: &Lane, delay: Duration, limit: Duration) -> Take {
        let now = Instant::now();
        let mut s = lane.lock();
        s.settle(now, lane.counts());
        let at = next_slot(now, s.last_start, delay, s.pause_until);
        let wait = at.saturating_duration_since(now);
        let by_pause = s.pause_until == Some(at) && !wait.is_zero();
        let pause = if by_pause { s.pause.clone() } else { None };
        if wait > limit {
            return Take::TooLate { wait, pause };
        }
        let prev = s.last_start.replace(at);
        s.last_delay = delay;
        Take::Go(Slot { wait, pause, at, prev, shared: None })
    }

    /// [`PaceStore::pause`], synchronously.
    pub(crate) fn pause_now(lane: &Lane, answer: &Answer) -> Option<PauseInfo> {
        let now = Instant::now();
        let mut s = lane.lock();
        s.settle(now, lane.counts());
        let raw = answer.retry_after.as_ref().map(|(_, raw)| raw.clone());
        let sent_before = s.paused(now) && s.pause_set_at.is_some_and(|set| answer.sent < set);
        let info = if sent_before {
            // Sent before this pause began: the pause is not doubled, but a longer
            // Retry-After is honoured.
            let (ra, _) = answer.retry_after.as_ref()?;
            let pause = (*ra).min(answer.max);
            if s.pause_until.is_some_and(|p| p >= now + pause) {
                return None;
            }
            PauseInfo { status: answer.status, retry_after: raw, pause, streak: s.streak }
        } else {
            s.streak = s.streak.saturating_add(1);
            let ra = answer.retry_after.as_ref().map(|(d, _)| *d);
            let pause = backoff_pause(s.streak, ra, answer.initial, answer.max);
            s.pause_set_at = Some(now);
            PauseInfo { status: answer.status, retry_after: raw, pause, streak: s.streak }
        };
        let until = now + info.pause;
        s.pause_until = Some(s.pause_until.map_or(until, |p| p.max(until)));
        // The streak is remembered for as long again as the pause, then forgotten.
        s.forget_at = Some(until + info.pause);
        s.pause = Some(info.clone());
        s.start_backing_off(lane.counts());
        Some(info)
    }
}

impl PaceStore for LocalStore {
    fn take<'a>(&'a self, lane: &'a Lane, delay: Duration, limit: Duration) -> StoreFuture<'a, Take> {
        Box::pin(std::future::ready(LocalStore::take_now(lane, delay, limit)))
    }

    fn give_back(&self, lane: &Lane, slot: &Slot) {
        let mut s = lane.lock();
        if s.last_start == Some(slot.at) {
            s.last_start = slot.prev;
        }
    }

    fn pause<'a>(&'a self, lane: &'a Lane, answer: Answer) -> StoreFuture<'a, Option<PauseInfo>> {
        Box::pin(std::future::ready(LocalStore::pause_now(lane, &answer)))
    }

    fn clear(&self, lane: &Lane) {
        let mut s = lane.lock();
        s.streak = 0;
        s.forget_at = None;
        s.settle(Instant::now(), lane.counts());
    }
}
