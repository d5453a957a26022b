//! [`Pacer`]: holds each request until its lane's next slot, refuses the ones that would
//! wait too long, and pauses lanes after 429 and 503 answers.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, SystemTime};

use arc_swap::ArcSwap;
use tokio::sync::OwnedSemaphorePermit;
use tokio::time::Instant;

use super::config::{PacingConfig, Plan};
use super::lane::{Lane, LaneKey, LaneUse, Lanes};
use super::notice::PauseNotice;
use super::pause::PauseInfo;
use super::shared::{FleetStore, MirrorsPauses, PauseSink, SharedPaceStore};
use super::slot::{next_slot, parse_retry_after};
use super::store::{Answer, LocalStore, PaceStore, Take};
use crate::origin::Origin;
use crate::rep::PaceHint;

/// Sees what pacing does (the proxy's metrics count it).
pub trait PaceObserver: Send + Sync + 'static {
    /// A request was held for `wait` (zero when its slot had come) and let go.
    fn waited(&self, wait: Duration);
    /// A request was answered `503` instead of being held, and why.
    fn refused(&self, why: PaceRefusal);
    /// A lane was paused after the origin answered `status` (429 or 503).
    fn paused(&self, status: u16);
}

/// Why a request was refused rather than held.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PaceRefusal {
    /// Its wait would pass `pacing.max_wait`.
    MaxWait,
    /// `pacing.max_queue_per_origin` requests are held for the origin already.
    QueueFull,
    /// `pacing.max_origins` origins are being paced already.
    TableFull,
}

impl PaceRefusal {
    /// `max-wait`, `queue-full` or `table-full` (the audit log's `pace.refused`).
    pub fn as_str(self) -> &'static str {
        match self {
            PaceRefusal::MaxWait => "max-wait",
            PaceRefusal::QueueFull => "queue-full",
            PaceRefusal::TableFull => "table-full",
        }
    }
}

/// What pacing did to one request, for its audit record.
#[derive(Debug, Clone, PartialEq)]
pub struct PaceFacts {
    /// What paces the lane: the delay, where it came from, the concurrency cap.
    pub plan: Plan,
    /// How long the request was held.
    pub waited: Duration,
    /// Report-only: how long it would have been held (nothing is held).
    pub would_wait: Option<Duration>,
    /// The pause after a 429/503 that made it wait (or would have, or refused it).
    pub pause: Option<PauseInfo>,
    /// Refused (or, report-only, would have been) instead of held.
    pub refused: Option<PaceRefusal>,
    /// For a refusal: when a slot is expected to be free (the answer's `Retry-After`).
    pub retry_after: Option<Duration>,
}

impl PaceFacts {
    fn of(plan: Plan) -> PaceFacts {
        PaceFacts {
            plan,
            waited: Duration::ZERO,
            would_wait: None,
            pause: None,
            refused: None,
            retry_after: None,
        }
    }
}

/// A request let through: what pacing did (`None`: nothing applied) and the ticket to
/// report its answer with.
#[derive(Debug)]
pub struct Pass {
    /// What pacing did, when anything paced the request.
    pub facts: Option<PaceFacts>,
    /// Give the origin's answer to it ([`PaceTicket::answered`]); dropping it ends the
    /// request's part of the lane (its concurrency permit).
    pub ticket: PaceTicket,
}

/// A request refused instead of held: answer `503` with `Retry-After`.
#[derive(Debug, Clone, PartialEq)]
pub struct Refused {
    /// Why, and what paced it.
    pub facts: PaceFacts,
    /// When a slot is expected to be free.
    pub retry_after: Duration,
}

/// The rest of a request's part in its lane: its concurrency permit until the answer, and
/// what the answer tells the lane (a 429 or 503 pauses it; a success resets the back-off).
pub struct PaceTicket {
    pacer: Pacer,
    key: Option<LaneKey>,
    lane: Option<LaneUse>,
    permit: Option<OwnedSemaphorePermit>,
    sent: Instant,
}

impl fmt::Debug for PaceTicket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PaceTicket").field("sent", &self.sent).finish_non_exhaustive()
    }
}

impl PaceTicket {
    /// The origin answered `status` with these headers (`Retry-After` is read): a 429 or
    /// 503 pauses the lane, another 2xx–4xx ends its back-off. Answers robotsgate made
    /// itself must not be given here.
    pub fn answered(mut self, status: http::StatusCode, headers: &http::HeaderMap) {
        drop(self.permit.take());
        let Some(key) = self.key.take() else { return };
        let lane = self.lane.take();
        self.pacer.answered_in(key, lane, self.sent, status.as_u16(), headers);
    }
}

/// The pacer: one per proxy (or per [`Robots`](crate::Robots)), shared by every request.
/// Cheap to clone.
#[derive(Clone)]
pub struct Pacer {
    inner: Arc<Inner>,
}

struct Inner {
    config: ArcSwap<PacingConfig>,
    /// `config.enabled`, for the fast path.
    enabled: AtomicBool,
    /// `config.paces_by_itself()`, for the fast path.
    by_itself: AtomicBool,
    lanes: Lanes,
    store: Box<dyn PaceStore>,
    observer: OnceLock<Arc<dyn PaceObserver>>,
}

impl fmt::Debug for Pacer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Pacer").field("config", &self.inner.config.load()).finish_non_exhaustive()
    }
}

impl MirrorsPauses for Inner {
    /// A pause a replica of the fleet started, mirrored in its lane (unless the lane is
    /// paused as long already): requests to the origin wait for it here too, and ask the
    /// shared store for their slot, even where this replica paces nothing itself.
    fn mirror(&self, mut notice: PauseNotice) {
        let config = self.config.load();
        // Mirrored only while the table is less than half full: the lanes this replica
        // paces itself keep room, whatever is published.
        if self.lanes.counts.lanes.load(Ordering::Relaxed) >= config.max_origins / 2 {
            return;
        }
        // No longer than this replica would pause by itself.
        notice.pause.pause = notice.pause.pause.min(config.max_backoff);
        let left = notice.left.min(config.max_backoff);
        let key = LaneKey { origin: notice.origin, agent: notice.agent };
        let Some(lane) = self.lanes.enter(&key) else { return };
        let now = Instant::now();
        let until = now + left;
        {
            let mut s = lane.lock();
            s.settle(now, lane.counts());
            if s.pause_until.is_some_and(|p| p >= until) {
                return;
            }
            s.pause_until = Some(until);
            // Answers to requests sent before the pause was known do not double it.
            s.pause_set_at = Some(now);
            s.streak = s.streak.max(notice.pause.streak);
            let forget = until + notice.pause.pause;
            s.forget_at = Some(s.forget_at.map_or(forget, |f| f.max(forget)));
            s.pause = Some(notice.pause);
            s.start_backing_off(lane.counts());
        }
        lane.changed.notify_waiters();
    }
}

impl Pacer {
    /// A pacer keeping its state in this process.
    pub fn new(config: PacingConfig) -> Pacer {
        Pacer::with_store(config, Box::new(LocalStore))
    }

    /// A pacer whose slots and pauses are kept in `store`, shared by every replica of a
    /// fleet (fleet mode: `cluster::RedisPaceStore`); while the store cannot be reached,
    /// each replica paces alone with the state it mirrored.
    /// The store is told to pass on the fleet's pauses ([`SharedPaceStore::watch_pauses`]).
    pub fn shared(config: PacingConfig, store: Arc<dyn SharedPaceStore>) -> Pacer {
        let pacer = Pacer::with_store(config, Box::new(FleetStore(store.clone())));
        let inner: Arc<dyn MirrorsPauses> = pacer.inner.clone();
        store.watch_pauses(PauseSink::new(Arc::downgrade(&inner)));
        pacer
    }

    fn with_store(config: PacingConfig, store: Box<dyn PaceStore>) -> Pacer {
        let lanes = Lanes::new(config.max_origins);
        Pacer {
            inner: Arc::new(Inner {
                enabled: AtomicBool::new(config.enabled),
                by_itself: AtomicBool::new(config.paces_by_itself()),
                config: ArcSwap::from_pointee(config),
                lanes,
                store,
                observer: OnceLock::new(),
            }),
        }
    }

    /// Tells `observer` what pacing does (once: a second observer is ignored).
    pub fn observe(&self, observer: Arc<dyn PaceObserver>) {
        let _ = self.inner.observer.set(observer);
    }

    /// The configuration in force.
    pub fn config(&self) -> Arc<PacingConfig> {
        self.inner.config.load_full()
    }

    /// Replaces the configuration for requests from now on; lanes keep their state (the
    /// size bound applies from the next start).
    pub fn reload(&self, config: PacingConfig) {
        self.inner.enabled.store(config.enabled, Ordering::Relaxed);
        self.inner.by_itself.store(config.paces_by_itself(), Ordering::Relaxed);
        self.inner.config.store(Arc::new(config));
    }

    /// Requests held now.
    pub fn held(&self) -> usize {
        self.inner.lanes.counts.held.load(Ordering::Relaxed)
    }

    /// Origins and tokens whose pacing state is kept.
    pub fn lanes(&self) -> usize {
        self.inner.lanes.counts.lanes.load(Ordering::Relaxed)
    }

    /// Drops the state of idle lanes now (it is otherwise dropped as lanes are used).
    pub fn sync(&self) {
        self.inner.lanes.sweep_all();
    }

    /// Whether requests need no look at all unless their robots.txt asks for a delay:
    /// pacing is off, or there is no minimum delay, no host rule and no back-off anywhere.
    /// Two atomic loads: the layer asks this on every request.
    #[inline]
    pub fn idle(&self) -> bool {
        !self.inner.enabled.load(Ordering::Relaxed)
            || (!self.inner.by_itself.load(Ordering::Relaxed)
                && self.inner.lanes.counts.backing_off.load(Ordering::Relaxed) == 0)
    }

    /// Whether pacing is on.
    #[inline]
    pub fn enabled(&self) -> bool {
        self.inner.enabled.load(Ordering::Relaxed)
    }

    /// A ticket that reports an answer for a request that was not paced (so that a 429
    /// still pauses its lane); `sent` is when it was decided.
    pub fn ticket(&self, origin: &Arc<Origin>, agent: &Arc<str>, sent: Instant) -> PaceTicket {
        PaceTicket {
            pacer: self.clone(),
            key: Some(LaneKey { origin: origin.clone(), agent: agent.clone() }),
            lane: None,
            permit: None,
            sent,
        }
    }

    /// Paces a request to `origin` for `agent`, whose robots.txt asks for `hint`: waits
    /// for its slot (enforce), or only works out the wait it would have had
    /// (`report_only`). `Err` when it may not wait that long: answer `503`.
    pub async fn pace(
        &self,
        origin: &Arc<Origin>,
        agent: &Arc<str>,
        hint: Option<PaceHint>,
        report_only: bool,
    ) -> Result<Pass, Refused> {
        let decided = Instant::now();
        let key = LaneKey { origin: origin.clone(), agent: agent.clone() };
        let pass = |facts: Option<PaceFacts>, lane: Option<LaneUse>, permit, sent| Pass {
            facts,
            ticket: PaceTicket { pacer: self.clone(), key: Some(key.clone()), lane, permit, sent },
        };
        if !self.enabled() {
            return Ok(pass(None, None, None, decided));
        }
        let config = self.inner.config.load_full();
        let plan = config.plan(origin, hint, SystemTime::now());
        let lane = if plan.is_free() {
            // Only a pause can hold it: a lane that exists and is paused.
            if self.inner.lanes.counts.backing_off.load(Ordering::Relaxed) == 0 {
                return Ok(pass(None, None, None, decided));
            }
            match self.inner.lanes.existing(&key) {
                Some(lane) if lane.lock().paused(decided) => lane,
                lane => return Ok(pass(None, lane, None, decided)),
            }
        } else {
            match self.inner.lanes.enter(&key) {
                Some(lane) => lane,
                None => {
                    let mut facts = PaceFacts::of(plan);
                    facts.refused = Some(PaceRefusal::TableFull);
                    let retry_after = config.max_wait.max(Duration::from_secs(1));
                    facts.retry_after = Some(retry_after);
                    self.refused(PaceRefusal::TableFull);
                    return Err(Refused { facts, retry_after });
                }
            }
        };
        if report_only {
            let facts = self.would_wait(&lane, plan, &config);
            return Ok(pass(Some(facts), Some(lane), None, decided));
        }
        // Boxed: waiting in a lane is the large part of this future (about four fifths),
        // and requests to an origin without a pace never get here.
        match Box::pin(self.hold(&lane, plan, &config)).await {
            Ok((facts, permit)) => {
                if let Some(o) = self.inner.observer.get() {
                    o.waited(facts.waited);
                }
                Ok(pass(Some(facts), Some(lane), permit, Instant::now()))
            }
            Err(refused) => {
                if let Some(why) = refused.facts.refused {
                    self.refused(why);
                }
                Err(refused)
            }
        }
    }

    fn refused(&self, why: PaceRefusal) {
        if let Some(o) = self.inner.observer.get() {
            o.refused(why);
        }
    }

    /// Report-only: the wait the request would have had, on a schedule of its own (as if
    /// every request before it had been held), and the refusal it would have had.
    fn would_wait(&self, lane: &Lane, plan: Plan, config: &PacingConfig) -> PaceFacts {
        let now = Instant::now();
        let mut facts = PaceFacts::of(plan);
        let mut s = lane.lock();
        s.settle(now, lane.counts());
        let at = next_slot(now, s.virtual_last, facts.plan.delay, s.pause_until);
        let wait = at.saturating_duration_since(now);
        if s.pause_until == Some(at) && !wait.is_zero() {
            facts.pause = s.pause.clone();
        }
        facts.would_wait = Some(wait);
        if wait > config.max_wait {
            facts.refused = Some(PaceRefusal::MaxWait);
            facts.retry_after = Some(wait);
        } else {
            s.virtual_last = Some(at);
            s.last_delay = facts.plan.delay;
        }
        facts
    }

    /// Holds a request in `lane` until its slot: first in line (FIFO), then a concurrency
    /// permit, then the slot.
    async fn hold(
        &self,
        lane: &Lane,
        plan: Plan,
        config: &PacingConfig,
    ) -> Result<(PaceFacts, Option<OwnedSemaphorePermit>), Refused> {
        let arrived = Instant::now();
        let deadline = arrived + config.max_wait;
        let mut facts = PaceFacts::of(plan);
        let refuse = |mut facts: PaceFacts, why: PaceRefusal, wait: Duration| {
            facts.refused = Some(why);
            facts.retry_after = Some(wait);
            Refused { facts, retry_after: wait }
        };
        let delay = facts.plan.delay;
        let Some(ticket) = lane.join(config.max_queue_per_origin) else {
            let wait = lane.estimate(u64::MAX, delay, arrived);
            return Err(refuse(facts, PaceRefusal::QueueFull, wait));
        };
        // Leaves the hold however this ends (also when the request is dropped).
        let _held = Held { lane, ticket };
        let pause_of = |lane: &Lane| lane.lock().pause.clone();

        // In line: refused at once when the wait would pass max_wait, and again whenever
        // a pause starts that would make it so.
        let turn = lane.turn.acquire();
        tokio::pin!(turn);
        let turn = loop {
            let changed = lane.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = Instant::now();
            let wait = lane.estimate(ticket, delay, now);
            if now + wait > deadline {
                facts.pause = pause_of(lane).filter(|_| lane.lock().paused(now));
                return Err(refuse(facts, PaceRefusal::MaxWait, wait));
            }
            tokio::select! {
                biased;
                permit = &mut turn => break permit,
                () = &mut changed => {}
                () = tokio::time::sleep_until(deadline) => {
                    let wait = lane.estimate(ticket, delay, Instant::now());
                    return Err(refuse(facts, PaceRefusal::MaxWait, wait));
                }
            }
        };
        // The semaphore is never closed; a closed one would mean "go".
        let _turn = turn.ok();

        // First in line: a concurrency permit, if the lane has a cap.
        let permit = match facts.plan.max_concurrency {
            Some(limit) => {
                let sem = lane.concurrency(limit);
                tokio::select! {
                    biased;
                    p = sem.acquire_owned() => p.ok(),
                    () = tokio::time::sleep_until(deadline) => {
                        // Requests in flight decide when one ends: no estimate.
                        return Err(refuse(facts, PaceRefusal::MaxWait, delay.max(Duration::from_secs(1))));
                    }
                }
            }
            None => None,
        };

        // Then the slot; taken again when a pause starts while waiting for it.
        loop {
            let changed = lane.changed.notified();
            tokio::pin!(changed);
            changed.as_mut().enable();
            let now = Instant::now();
            let limit = deadline.saturating_duration_since(now);
            match self.inner.store.take(lane, delay, limit).await {
                Take::TooLate { wait, pause } => {
                    facts.pause = pause;
                    return Err(refuse(facts, PaceRefusal::MaxWait, wait));
                }
                Take::Go(slot) => {
                    lane.granted(ticket);
                    if slot.wait.is_zero() {
                        facts.pause = facts.pause.or(slot.pause);
                        break;
                    }
                    let back = GiveBack { store: &*self.inner.store, lane, slot: Some(slot) };
                    tokio::select! {
                        biased;
                        () = tokio::time::sleep(back.wait()) => {
                            facts.pause = back.keep().or(facts.pause);
                            break;
                        }
                        () = &mut changed => drop(back),
                    }
                }
            }
        }
        facts.waited = arrived.elapsed();
        Ok((facts, permit))
    }

    /// What a request's answer tells its lane.
    fn answered_in(
        &self,
        key: LaneKey,
        lane: Option<LaneUse>,
        sent: Instant,
        status: u16,
        headers: &http::HeaderMap,
    ) {
        if !self.enabled() {
            return;
        }
        if status == 429 || status == 503 {
            let lane = match lane {
                Some(l) => Some(l),
                None => self.inner.lanes.enter(&key),
            };
            let Some(lane) = lane else { return };
            let config = self.inner.config.load();
            let retry_after = headers.get(http::header::RETRY_AFTER).and_then(|v| {
                let d = parse_retry_after(v.as_bytes(), SystemTime::now())?;
                Some((d, Arc::from(v.to_str().ok()?.trim())))
            });
            let answer = Answer {
                status,
                retry_after,
                sent,
                initial: config.initial_backoff,
                max: config.max_backoff,
            };
            // The local store answers at once; a shared one is asked off the request's path.
            let pacer = self.clone();
            let run = async move {
                if let Some(info) = pacer.inner.store.pause(&lane, answer).await {
                    if let Some(o) = pacer.inner.observer.get() {
                        o.paused(info.status);
                    }
                    tracing::info!(
                        origin = %lane.key.origin, agent = %lane.key.agent, status = info.status,
                        pause_s = info.pause.as_secs_f64(), streak = info.streak, "origin paused"
                    );
                    lane.changed.notify_waiters();
                }
            };
            run_now_or_spawn(run);
        } else if status < 500 && self.inner.lanes.counts.backing_off.load(Ordering::Relaxed) > 0 {
            let lane = match lane {
                Some(l) => Some(l),
                None => self.inner.lanes.existing(&key),
            };
            if let Some(lane) = lane {
                self.inner.store.clear(&lane);
            }
        }
    }
}

/// Runs `fut` to completion now when it is ready at once (the local store), else on a task.
fn run_now_or_spawn(fut: impl std::future::Future<Output = ()> + Send + 'static) {
    let mut fut = Box::pin(fut);
    let waker = futures_util::task::noop_waker();
    let mut cx = std::task::Context::from_waker(&waker);
    if fut.as_mut().poll(&mut cx).is_pending() {
        tokio::spawn(fut);
    }
}

/// A request in the hold: leaves it when dropped.
struct Held<'a> {
    lane: &'a Lane,
    ticket: u64,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.lane.leave(self.ticket);
    }
}

/// A slot being waited for: given back if the wait does not end in using it.
struct GiveBack<'a> {
    store: &'a dyn PaceStore,
    lane: &'a Lane,
    slot: Option<super::store::Slot>,
}

impl GiveBack<'_> {
    fn wait(&self) -> Duration {
        self.slot.as_ref().map_or(Duration::ZERO, |s| s.wait)
    }

    /// The slot came and is used; the pause that made its wait, if one did.
    fn keep(mut self) -> Option<PauseInfo> {
        self.slot.take().and_then(|s| s.pause)
    }
}

impl Drop for GiveBack<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.store.give_back(self.lane, &slot);
        }
    }
}
