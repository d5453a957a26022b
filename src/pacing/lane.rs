//! Lanes: the pacing state of one origin and product token ([`Lane`]), and the bounded
//! map that holds them ([`Lanes`]), from which idle lanes are dropped.
//!
//! A lane's hold queue is a one-permit tokio semaphore, the *turn*: tokio's semaphore hands
//! out permits in the order they were asked for, and a waiter that is dropped leaves its
//! place. Whoever holds the turn is the head; it takes the next slot from the store, waits
//! for it, and gives the turn to the next.

use std::collections::{HashMap, VecDeque};
use std::hash::BuildHasher;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::{Notify, Semaphore};
use tokio::time::Instant;

use super::pause::PauseInfo;
use crate::origin::Origin;

/// One origin and one product token: what is paced together.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct LaneKey {
    pub(crate) origin: Arc<Origin>,
    pub(crate) agent: Arc<str>,
}

/// Counters kept across lanes.
#[derive(Debug, Default)]
pub(crate) struct Counts {
    /// Lanes in back-off: paused, or with 429/503 answers not yet followed by a success.
    pub(crate) backing_off: AtomicUsize,
    /// Requests held now.
    pub(crate) held: AtomicUsize,
    /// Lanes kept.
    pub(crate) lanes: AtomicUsize,
}

/// The pacing state of one lane.
#[derive(Debug)]
pub(crate) struct Lane {
    pub(crate) key: LaneKey,
    /// The hold queue (see the module docs).
    pub(crate) turn: Semaphore,
    /// Woken when a pause starts: the head takes its slot again, the others estimate again.
    pub(crate) changed: Notify,
    /// Requests using the lane (from entering it until their answer): a lane in use is
    /// never dropped.
    users: AtomicUsize,
    counts: Arc<Counts>,
    state: Mutex<LaneState>,
}

/// What a lane knows, behind its lock.
#[derive(Debug, Default)]
pub(crate) struct LaneState {
    /// When the last request started (or will: a slot granted and not yet come).
    pub(crate) last_start: Option<Instant>,
    /// The delay that applied to it (for dropping the lane once it has passed).
    pub(crate) last_delay: Duration,
    /// No request starts before this.
    pub(crate) pause_until: Option<Instant>,
    /// When the current pause began (answers to requests sent before it do not lengthen it
    /// by doubling).
    pub(crate) pause_set_at: Option<Instant>,
    /// What the current (or last) pause was.
    pub(crate) pause: Option<PauseInfo>,
    /// 429/503 answers in a row, each starting a pause.
    pub(crate) streak: u32,
    /// After this, a lane with a streak may be dropped (the streak is forgotten).
    pub(crate) forget_at: Option<Instant>,
    /// Counted in [`Counts::backing_off`].
    backing_off: bool,
    /// Tickets of the requests waiting for a slot, in arrival order.
    queue: VecDeque<u64>,
    next_ticket: u64,
    /// Requests in the hold (waiting, or the head waiting for its slot).
    held: usize,
    /// Report-only: when the last request would have started.
    pub(crate) virtual_last: Option<Instant>,
    /// The concurrency cap and its permits.
    pub(crate) concurrency: Option<(u32, Arc<Semaphore>)>,
}

impl LaneState {
    /// Marks the lane as backing off (a pause started).
    pub(crate) fn start_backing_off(&mut self, counts: &Counts) {
        if !self.backing_off {
            self.backing_off = true;
            counts.backing_off.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Ends the back-off once the pause is over and the streak was reset (by a success)
    /// or forgotten.
    pub(crate) fn settle(&mut self, now: Instant, counts: &Counts) {
        if self.pause_until.is_some_and(|p| p <= now) {
            self.pause_until = None;
        }
        if self.forget_at.is_some_and(|f| f <= now) {
            self.streak = 0;
            self.forget_at = None;
        }
        if self.backing_off && self.pause_until.is_none() && self.streak == 0 {
            self.backing_off = false;
            counts.backing_off.fetch_sub(1, Ordering::Relaxed);
        }
    }

    /// Whether a pause is running at `now`.
    pub(crate) fn paused(&self, now: Instant) -> bool {
        self.pause_until.is_some_and(|p| p > now)
    }
}

impl Lane {
    fn new(key: LaneKey, counts: Arc<Counts>) -> Lane {
        Lane {
            key,
            turn: Semaphore::new(1),
            changed: Notify::new(),
            users: AtomicUsize::new(0),
            counts,
            state: Mutex::new(LaneState::default()),
        }
    }

    /// The lane's state, locked (held briefly: no await while it is).
    pub(crate) fn lock(&self) -> MutexGuard<'_, LaneState> {
        match self.state.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    pub(crate) fn counts(&self) -> &Counts {
        &self.counts
    }

    /// Joins the hold queue: a ticket, or `None` when `max` requests are held already.
    pub(crate) fn join(&self, max: usize) -> Option<u64> {
        let mut s = self.lock();
        if s.held >= max {
            return None;
        }
        s.held += 1;
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.queue.push_back(ticket);
        self.counts.held.fetch_add(1, Ordering::Relaxed);
        Some(ticket)
    }

    /// The request with `ticket` got its slot: it no longer waits in the queue.
    pub(crate) fn granted(&self, ticket: u64) {
        let mut s = self.lock();
        if let Ok(i) = s.queue.binary_search(&ticket) {
            s.queue.remove(i);
        }
    }

    /// The request with `ticket` leaves the hold (gone ahead, refused, or dropped).
    pub(crate) fn leave(&self, ticket: u64) {
        let mut s = self.lock();
        if let Ok(i) = s.queue.binary_search(&ticket) {
            s.queue.remove(i);
        }
        s.held = s.held.saturating_sub(1);
        self.counts.held.fetch_sub(1, Ordering::Relaxed);
    }

    /// How long the request with `ticket` can expect to wait from `now`: the next slot,
    /// then `delay` for each request ahead of it that has no slot yet.
    pub(crate) fn estimate(&self, ticket: u64, delay: Duration, now: Instant) -> Duration {
        let s = self.lock();
        let ahead = s.queue.binary_search(&ticket).unwrap_or_else(|i| i);
        let next = super::slot::next_slot(now, s.last_start, delay, s.pause_until);
        let at = next + delay.saturating_mul(u32::try_from(ahead).unwrap_or(u32::MAX));
        at.saturating_duration_since(now)
    }

    /// The concurrency permits for a cap of `limit` (made, or resized, to it).
    pub(crate) fn concurrency(&self, limit: u32) -> Arc<Semaphore> {
        let mut s = self.lock();
        match &mut s.concurrency {
            Some((old, sem)) if *old == limit => sem.clone(),
            Some((old, sem)) => {
                if limit > *old {
                    sem.add_permits((limit - *old) as usize);
                } else {
                    // Permits in use come back and are then forgotten as they can be.
                    sem.forget_permits((*old - limit) as usize);
                }
                *old = limit;
                sem.clone()
            }
            None => {
                let sem = Arc::new(Semaphore::new(limit as usize));
                s.concurrency = Some((limit, sem.clone()));
                sem
            }
        }
    }

    /// Whether the lane can be dropped at `now`: nobody uses it, its last delay and any
    /// pause are over, and any back-off streak is forgotten.
    fn idle(&self, now: Instant) -> bool {
        if self.users.load(Ordering::Acquire) > 0 {
            return false;
        }
        let mut s = self.lock();
        s.settle(now, &self.counts);
        let passed = |t: Option<Instant>, d: Duration| t.is_none_or(|t| t + d <= now);
        s.held == 0
            && !s.backing_off
            && passed(s.last_start, s.last_delay)
            && passed(s.virtual_last, s.last_delay)
            && s.concurrency.as_ref().is_none_or(|(n, sem)| sem.available_permits() >= *n as usize)
    }
}

/// A lane in use: it is not dropped while this lives.
#[derive(Debug)]
pub(crate) struct LaneUse(Arc<Lane>);

impl std::ops::Deref for LaneUse {
    type Target = Lane;
    fn deref(&self) -> &Lane {
        &self.0
    }
}

impl Drop for LaneUse {
    fn drop(&mut self) {
        self.0.users.fetch_sub(1, Ordering::AcqRel);
    }
}

type LaneMap = HashMap<LaneKey, Arc<Lane>, foldhash::fast::RandomState>;

struct Shard {
    map: LaneMap,
    last_sweep: Option<Instant>,
}

/// The lanes, in shards each behind its own lock, bounded: idle lanes are dropped when a
/// shard is full and at most once a second as lanes are entered.
pub(crate) struct Lanes {
    shards: Box<[Mutex<Shard>]>,
    hasher: foldhash::fast::RandomState,
    per_shard: usize,
    pub(crate) counts: Arc<Counts>,
    /// When every shard was last swept (see [`Lanes::existing`]).
    last_full_sweep: Mutex<Option<Instant>>,
}

const SHARDS: usize = 16;
const SWEEP_EVERY: Duration = Duration::from_secs(1);

impl std::fmt::Debug for Lanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Lanes").field("counts", &self.counts).finish_non_exhaustive()
    }
}

impl Lanes {
    /// Room for about `max` lanes.
    pub(crate) fn new(max: usize) -> Lanes {
        let shards =
            (0..SHARDS).map(|_| Mutex::new(Shard { map: LaneMap::default(), last_sweep: None })).collect();
        Lanes {
            shards,
            hasher: foldhash::fast::RandomState::default(),
            per_shard: max.div_ceil(SHARDS).max(1),
            counts: Arc::new(Counts::default()),
            last_full_sweep: Mutex::new(None),
        }
    }

    fn shard(&self, key: &LaneKey) -> MutexGuard<'_, Shard> {
        let shard = &self.shards[(self.hasher.hash_one(key) as usize) % SHARDS];
        match shard.lock() {
            Ok(s) => s,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The lane of `key`, made on first use; `None` when there is no room (every lane of
    /// its shard is busy).
    pub(crate) fn enter(&self, key: &LaneKey) -> Option<LaneUse> {
        let now = Instant::now();
        let mut shard = self.shard(key);
        self.sweep_due(&mut shard, now);
        if let Some(lane) = shard.map.get(key) {
            return Some(use_of(lane));
        }
        if shard.map.len() >= self.per_shard {
            self.sweep(&mut shard, now);
            if shard.map.len() >= self.per_shard {
                return None;
            }
        }
        let lane = Arc::new(Lane::new(key.clone(), self.counts.clone()));
        shard.map.insert(key.clone(), lane.clone());
        self.counts.lanes.fetch_add(1, Ordering::Relaxed);
        Some(use_of(&lane))
    }

    /// The lane of `key` if there is one. Asked for every request while some lane backs
    /// off; so that a back-off that ended is noticed however the traffic falls on the
    /// shards, every shard is swept once a second meanwhile.
    pub(crate) fn existing(&self, key: &LaneKey) -> Option<LaneUse> {
        let now = Instant::now();
        let found = {
            let mut shard = self.shard(key);
            self.sweep_due(&mut shard, now);
            shard.map.get(key).map(use_of)
        };
        let due = match self.last_full_sweep.try_lock() {
            Ok(mut last) if last.is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY) => {
                *last = Some(now);
                true
            }
            _ => false,
        };
        if due {
            self.sweep_all();
        }
        found
    }

    fn sweep_due(&self, shard: &mut Shard, now: Instant) {
        if shard.last_sweep.is_none_or(|t| now.saturating_duration_since(t) >= SWEEP_EVERY) {
            self.sweep(shard, now);
        }
    }

    fn sweep(&self, shard: &mut Shard, now: Instant) {
        shard.last_sweep = Some(now);
        let before = shard.map.len();
        shard.map.retain(|_, lane| !lane.idle(now));
        self.counts.lanes.fetch_sub(before - shard.map.len(), Ordering::Relaxed);
    }

    /// Drops every idle lane now (tests, and `Pacer::sync`).
    pub(crate) fn sweep_all(&self) {
        let now = Instant::now();
        for shard in self.shards.iter() {
            let mut shard = match shard.lock() {
                Ok(s) => s,
                Err(poisoned) => poisoned.into_inner(),
            };
            self.sweep(&mut shard, now);
        }
    }
}

/// Marks `lane` used; called with its shard locked, so a sweep cannot drop it between
/// finding it and the mark.
fn use_of(lane: &Arc<Lane>) -> LaneUse {
    lane.users.fetch_add(1, Ordering::AcqRel);
    LaneUse(lane.clone())
}
