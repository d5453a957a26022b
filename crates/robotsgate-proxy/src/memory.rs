//! Memory a burst freed, given back to the system once the proxy is quiet.
//!
//! A broad crawl touches thousands of origins: pooled upstream connections (about 31 KB of
//! hyper's buffers and state each), fetch buffers, parsed files evicted from the cache. All
//! of it is bounded and freed when the crawl moves on (idle connections close after
//! `upstream_idle_timeout`, the cache keeps its bound), but glibc's allocator keeps freed
//! pages in its arenas: the process's RSS stays at its peak. Once nothing has changed for a
//! while (no request, no connection opened or closed), [`give_back_when_quiet`] asks glibc
//! to return its free pages (`malloc_trim(0)`, which releases free pages anywhere in every
//! arena), once per quiet spell. Elsewhere (musl, other systems) it does nothing.

use std::time::Duration;

/// Every `tick`, runs `activity` (housekeeping that frees what has expired, then any number
/// that changes when the proxy does work: its request and connection counters, its idle
/// connections, its cached origins); after a tick on which that number did not change,
/// following one on which it did, returns the allocator's free pages to the system. Runs
/// until the returned task is aborted.
pub(crate) fn give_back_when_quiet<F>(
    tick: Duration,
    activity: impl Fn() -> F + Send + 'static,
) -> tokio::task::JoinHandle<()>
where
    F: Future<Output = u64> + Send,
{
    tokio::spawn(async move {
        let mut every = tokio::time::interval(tick);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut last = activity().await;
        let mut given_back = true;
        loop {
            every.tick().await;
            let now = activity().await;
            if now != last {
                last = now;
                given_back = false;
            } else if !given_back {
                given_back = true;
                // It walks every arena under its lock: off the workers.
                let _ = tokio::task::spawn_blocking(trim).await;
            }
        }
    })
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
