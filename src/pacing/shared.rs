//! [`SharedPaceStore`]: the interface of a pacing store kept outside the process, for a
//! fleet of replicas that pace as one (fleet mode keeps it in Redis: `cluster`), and the
//! pacer's side of it, which mirrors what the shared store answered in the process' own
//! lanes (for estimates, and to pace alone at once when the store cannot be reached).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::lane::Lane;
use super::notice::PauseNotice;
use super::pause::PauseInfo;
use super::store::{Answer, LocalStore, PaceStore, Slot, StoreFuture, Take};
use crate::origin::Origin;

/// A future of a [`SharedPaceStore`].
pub type SharedFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Pacing state kept where every replica of a fleet sees it. Each step is atomic per lane
/// (origin and product token), and times are the store's own clock (milliseconds), so the
/// replicas keep one delay whatever their clocks say. A step that cannot be done (the store
/// is unreachable or too slow) answers `None`, and the replica paces alone.
pub trait SharedPaceStore: Send + Sync + 'static {
    /// Whether the store is reachable as far as is known: when not, the pacer does not ask
    /// it (a paced request must not wait for a store that is down).
    fn is_up(&self) -> bool;

    /// Takes the lane's next slot, at least `delay` after its previous start and not
    /// during a pause, when that is within `limit`.
    fn take<'a>(
        &'a self,
        lane: LaneId<'a>,
        delay: Duration,
        limit: Duration,
    ) -> SharedFuture<'a, Option<SharedSlot>>;

    /// Gives back the slot `at` (taken after `prev`) that will not be used, when no later
    /// slot was taken meanwhile. Done in the background.
    fn give_back(&self, lane: LaneId<'_>, at: i64, prev: i64);

    /// Pauses the lane after a 429 or 503: the fleet's pause, or `None` when the store did
    /// not answer or the answer changed nothing.
    fn pause<'a>(&'a self, lane: LaneId<'a>, answer: &'a Backoff) -> SharedFuture<'a, Option<SharedPause>>;

    /// A successful answer: the lane's back-off streak starts again. In the background.
    fn clear(&self, lane: LaneId<'_>);

    /// Tells `sink` of the pauses the replicas of the fleet start (this one's among
    /// them), until the pacer behind it is dropped: so that a replica holds the requests
    /// to an origin another one's 429 paused, where it paces nothing itself (an origin
    /// without a delay is paced only while a pause of its own holds it). The default tells
    /// nothing.
    fn watch_pauses(&self, sink: PauseSink) {
        drop(sink);
    }
}

/// Where a shared store tells of the fleet's pauses: the pacer's lanes
/// ([`SharedPaceStore::watch_pauses`]). Holds the pacer weakly.
#[derive(Clone)]
pub struct PauseSink(std::sync::Weak<dyn MirrorsPauses>);

/// What mirrors the fleet's pauses (the pacer).
pub(super) trait MirrorsPauses: Send + Sync {
    /// Mirrors `notice` in its lane.
    fn mirror(&self, notice: PauseNotice);
}

impl std::fmt::Debug for PauseSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PauseSink").field("open", &self.is_open()).finish()
    }
}

impl PauseSink {
    pub(super) fn new(to: std::sync::Weak<dyn MirrorsPauses>) -> PauseSink {
        PauseSink(to)
    }

    /// Mirrors `notice` in its lane (made for it while the lanes are fewer than half of
    /// `max_origins`; the pause no longer than `max_backoff`); `false` once the pacer is
    /// gone (stop telling).
    pub fn tell(&self, notice: PauseNotice) -> bool {
        match self.0.upgrade() {
            Some(pacer) => {
                pacer.mirror(notice);
                true
            }
            None => false,
        }
    }

    /// Whether the pacer is still there.
    pub fn is_open(&self) -> bool {
        self.0.strong_count() > 0
    }
}

/// A lane: one origin and one product token.
#[derive(Debug, Clone, Copy)]
pub struct LaneId<'a> {
    /// The origin.
    pub origin: &'a Arc<Origin>,
    /// The product token.
    pub agent: &'a Arc<str>,
}

/// What [`SharedPaceStore::take`] answered.
#[derive(Debug, Clone)]
pub struct SharedSlot {
    /// Whether the slot was taken (it came within the limit).
    pub taken: bool,
    /// From now to the slot.
    pub wait: Duration,
    /// The slot and the lane's previous start (`-1`: none), in the store's clock.
    pub at: i64,
    /// See `at`.
    pub prev: i64,
    /// The pause that made the wait, when one did.
    pub pause: Option<PauseInfo>,
}

/// A 429 or 503 answer, for [`SharedPaceStore::pause`].
#[derive(Debug, Clone)]
pub struct Backoff {
    /// The origin's status.
    pub status: u16,
    /// Its `Retry-After`, read, and as sent.
    pub retry_after: Option<(Duration, Arc<str>)>,
    /// How long ago the answered request was sent (answers to requests sent before the
    /// current pause began do not double it).
    pub sent_ago: Duration,
    /// The first pause without `Retry-After`.
    pub initial: Duration,
    /// The longest pause.
    pub max: Duration,
}

/// What [`SharedPaceStore::pause`] answered: the fleet's pause of the lane.
#[derive(Debug, Clone, Copy)]
pub struct SharedPause {
    /// How long the pause is.
    pub pause: Duration,
    /// 429/503 answers in a row (`None`: the store's value did not read).
    pub streak: Option<u32>,
    /// How much of it is left.
    pub left: Duration,
}

/// The pacer's store in fleet mode: the shared store, mirrored in the lanes.
pub(super) struct FleetStore(pub(super) Arc<dyn SharedPaceStore>);

fn id(lane: &Lane) -> LaneId<'_> {
    LaneId { origin: &lane.key.origin, agent: &lane.key.agent }
}

impl PaceStore for FleetStore {
    fn take<'a>(&'a self, lane: &'a Lane, delay: Duration, limit: Duration) -> StoreFuture<'a, Take> {
        Box::pin(async move {
            // Known down: alone at once, rather than each paced request waiting for an
            // unreachable store.
            let shared = if self.0.is_up() { self.0.take(id(lane), delay, limit).await } else { None };
            let Some(slot) = shared else { return LocalStore::take_now(lane, delay, limit) };
            if !slot.taken {
                return Take::TooLate { wait: slot.wait, pause: slot.pause };
            }
            // Mirror the slot in the lane: estimates for the requests behind, and the
            // state this replica paces with alone if the store goes away.
            let local_at = Instant::now() + slot.wait;
            {
                let mut s = lane.lock();
                s.last_start = Some(local_at);
                s.last_delay = delay;
            }
            Take::Go(Slot::shared(slot.wait, slot.pause, local_at, slot.at, slot.prev))
        })
    }

    fn give_back(&self, lane: &Lane, slot: &Slot) {
        LocalStore.give_back(lane, slot);
        if let Some((at, prev)) = slot.shared_at() {
            self.0.give_back(id(lane), at, prev);
        }
    }

    fn pause<'a>(&'a self, lane: &'a Lane, answer: Answer) -> StoreFuture<'a, Option<PauseInfo>> {
        Box::pin(async move {
            // The lane's own state first: it paces this replica at once, and alone.
            let local = LocalStore::pause_now(lane, &answer);
            if !self.0.is_up() {
                return local;
            }
            let backoff = Backoff {
                status: answer.status,
                retry_after: answer.retry_after.clone(),
                sent_ago: answer.sent.elapsed(),
                initial: answer.initial,
                max: answer.max,
            };
            let Some(fleet) = self.0.pause(id(lane), &backoff).await else { return local };
            // The fleet's pause (it may be longer than this replica's).
            let until = Instant::now() + fleet.left;
            let mut s = lane.lock();
            if s.pause_until.is_none_or(|p| p < until) {
                s.pause_until = Some(until);
            }
            let streak = fleet.streak.unwrap_or(s.streak);
            s.streak = streak;
            if let Some(p) = s.pause.as_mut() {
                p.pause = fleet.pause;
                p.streak = streak;
            }
            s.start_backing_off(lane.counts());
            s.pause.clone().or(local)
        })
    }

    fn clear(&self, lane: &Lane) {
        LocalStore.clear(lane);
        if self.0.is_up() {
            self.0.clear(id(lane));
        }
    }
}
