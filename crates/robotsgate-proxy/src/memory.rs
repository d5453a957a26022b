//! Memory a burst freed, given back to the system once the proxy (or the ingress) is quiet.
//!
//! A broad crawl touches thousands of origins: pooled upstream connections (about 31 KB of
//! hyper's buffers and state each), fetch buffers, parsed files evicted from the cache. All
//! of it is bounded and freed when the crawl moves on (idle connections close after
//! `upstream_idle_timeout`, the cache keeps its bound), but glibc's allocator keeps freed
//! pages in its arenas: the process's RSS stays at its peak. Once nothing has changed for a
//! while (no request, no connection opened or closed), [`give_back_when_quiet`] asks glibc
//! to return its free pages (`malloc_trim(0)`, which releases free pages anywhere in every
//! arena), once per quiet spell. Elsewhere (musl, other systems) it does nothing. The
//! ingress does the same after a burst of clients (its connections' buffers, its upstream
//! connections).
//!
//! "A while" is several ticks, not one: pages given back are faulted in again by the next
//! burst (about 2,500 page faults for 256 client connections at once, against 400 when the
//! memory was kept), so a proxy whose traffic pauses for a few seconds now and then should
//! keep its memory over the pause.
//!
//! Each worker thread also keeps spare buffers of connections that ended, for its next
//! ones (`h1_server::Kit`, `forward::h1`'s upstream buffers; up to some 3.5 MB a thread
//! after a burst). [`shed_spares_when_quiet`], on every worker, drops them once a whole
//! tick passed without a connection taking or giving any: before the proxy is quiet long
//! enough for the allocator's pages to go back. (A `Proxy` run without worker threads,
//! as tests run it, keeps its bounded spares on the threads that serve it.)

use std::time::Duration;

/// How often the forward proxy and the ingress look whether they went quiet, to give
/// freed memory back, and how many ticks without work make them quiet: a burst's memory
/// returns 30 to 35 s after its end, and pauses shorter than that keep it.
pub(crate) const QUIET_TICK: Duration = Duration::from_secs(5);
/// See [`QUIET_TICK`].
pub(crate) const QUIET_TICKS: u32 = 6;

/// Every `tick`, runs `activity` (housekeeping that frees what has expired, then any number
/// that changes when the proxy does work: its request and connection counters, its idle
/// connections, its cached origins); once that number has stayed the same for
/// `quiet_ticks` ticks in a row after it last changed, returns the allocator's free pages to
/// the system. Runs until the returned task is aborted.
pub(crate) fn give_back_when_quiet<F>(
    tick: Duration,
    quiet_ticks: u32,
    activity: impl Fn() -> F + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = u64> + Send,
{
    tokio::spawn(async move {
        let mut every = tokio::time::interval(tick);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut spell = QuietSpell::new(activity().await, quiet_ticks);
        loop {
            every.tick().await;
            if spell.observe(activity().await) {
                // It walks every arena under its lock: off the workers.
                let _ = tokio::task::spawn_blocking(trim).await;
            }
        }
    })
}

/// Every `tick`, on the worker thread it runs on, drops that thread's spare buffers if no
/// connection took or gave any during the tick. Runs until its runtime is dropped.
pub(crate) async fn shed_spares_when_quiet(tick: Duration) {
    let mut every = tokio::time::interval(tick);
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let shed = crate::h1_server::Kit::shed_unused() + crate::forward::shed_unused_spares();
        if shed > 0 {
            tracing::trace!(shed, "quiet: a worker's spare buffers dropped");
        }
    }
}

/// Counts the ticks since the activity number last changed, and says when a quiet spell
/// has lasted long enough to give memory back (once per spell).
#[derive(Debug)]
struct QuietSpell {
    last: u64,
    /// Ticks seen without a change since the last change; `None` once the spell's memory
    /// was given back (or before any activity: a proxy that has done nothing has nothing
    /// to give back).
    unchanged: Option<u32>,
    quiet_ticks: u32,
}

impl QuietSpell {
    fn new(activity: u64, quiet_ticks: u32) -> QuietSpell {
        QuietSpell { last: activity, unchanged: None, quiet_ticks: quiet_ticks.max(1) }
    }

    /// The activity number of this tick; `true` when the memory is to be given back now.
    fn observe(&mut self, activity: u64) -> bool {
        if activity != self.last {
            self.last = activity;
            self.unchanged = Some(0);
            return false;
        }
        match self.unchanged.as_mut() {
            None => false,
            Some(n) => {
                *n += 1;
                if *n < self.quiet_ticks {
                    return false;
                }
                self.unchanged = None;
                true
            }
        }
    }
}

#[cfg(all(target_os = "linux", target_env = "gnu"))]
fn trim() {
    // SAFETY: `malloc_trim` only releases free memory of glibc's own arenas; it takes the
    // arenas' locks itself and is safe to call from any thread at any time.
    let released = unsafe { libc::malloc_trim(0) };
    tracing::debug!(released = released != 0, "quiet: freed heap given back to the system");
}

#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn trim() {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{QuietSpell, shed_spares_when_quiet};
    use crate::h1_server::Kit;

    /// A worker's spare buffers outlive a tick in which a connection ended, and are
    /// dropped after the next, in which none took or gave any. (The clock is tokio's
    /// paused one: it moves to the next timer whenever every task waits.)
    #[tokio::test(flavor = "current_thread", start_paused = true)]
    async fn a_workers_spares_are_dropped_after_a_tick_without_connections() {
        let tick = Duration::from_secs(5);
        let shedding = tokio::spawn(shed_spares_when_quiet(tick));
        tokio::time::sleep(tick / 2).await;
        drop((Kit::take(), Kit::take()));
        assert_eq!(Kit::spares(), 2);
        tokio::time::sleep(tick).await;
        assert_eq!(Kit::spares(), 2, "a connection ended during the tick: kept");
        tokio::time::sleep(tick).await;
        assert_eq!(Kit::spares(), 0, "a tick without connections: dropped");
        shedding.abort();
    }

    /// The ticks (activity numbers, one a tick) on which a spell gives memory back.
    fn given_back_on(quiet_ticks: u32, ticks: &[u64]) -> Vec<usize> {
        let mut spell = QuietSpell::new(0, quiet_ticks);
        ticks.iter().enumerate().filter(|&(_, &a)| spell.observe(a)).map(|(i, _)| i).collect()
    }

    #[test]
    fn memory_goes_back_after_the_whole_quiet_spell_once() {
        // Work on ticks 0-2, then quiet: the third unchanged tick (5) gives back, and
        // the spell goes on without giving back again.
        assert_eq!(given_back_on(3, &[1, 2, 3, 3, 3, 3, 3, 3, 3]), vec![5]);
    }

    #[test]
    fn a_pause_shorter_than_the_spell_keeps_the_memory() {
        // Two unchanged ticks between bursts, three needed: never given back until the
        // last pause is long enough.
        assert_eq!(given_back_on(3, &[1, 1, 1, 2, 2, 2, 3, 3, 3, 3]), vec![9]);
    }

    #[test]
    fn an_idle_proxy_has_nothing_to_give_back() {
        assert_eq!(given_back_on(1, &[0, 0, 0, 0]), Vec::<usize>::new());
        // One tick is the least: zero is taken as one.
        assert_eq!(given_back_on(0, &[4, 4, 4]), vec![1]);
    }
}
