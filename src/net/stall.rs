//! [`Stall`]: the longest a body may keep its reader waiting for its next bytes.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::time::{Instant, Sleep};

/// The bound on one body's silence: the longest a body may keep its reader waiting for
/// its next bytes.
///
/// An origin that sends its response head and then falls silent would otherwise hold the
/// request, its client and its connection for as long as the client waits. A reader wraps
/// each poll of the body: the timer is made only when a poll finds nothing to read, and is
/// set again only after bytes have come, so a body that is read as fast as it arrives (the
/// usual case) costs a store a frame.
///
/// ```
/// use std::task::Poll;
/// use std::time::Duration;
/// use robotsgate::net::Stall;
///
/// # #[tokio::main(flavor = "current_thread", start_paused = true)] async fn main() {
/// let mut stall = Stall::new(Duration::from_secs(60));
/// let silent = std::future::poll_fn(|cx| {
///     // The body's own poll found nothing: wait, within the bound.
///     let nothing: Poll<()> = Poll::Pending;
///     match nothing {
///         Poll::Ready(()) => { stall.moved(); Poll::Ready(Ok(())) }
///         Poll::Pending => stall.wait(cx).map(Err),
///     }
/// });
/// let waited = silent.await.unwrap_err();
/// assert_eq!(waited.0, Duration::from_secs(60));
/// # }
/// ```
#[derive(Debug)]
pub struct Stall {
    limit: Duration,
    /// Made at the first wait, and kept for the body's later waits.
    timer: Option<Pin<Box<Sleep>>>,
    /// The timer runs for the present wait (no bytes have come since it was set).
    waiting: bool,
}

/// A body sent nothing for this long: the reader gave up on it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("nothing more of the body came for {0:?}")]
pub struct Stalled(pub Duration);

impl Stall {
    /// A bound of `limit` on each wait for the next bytes.
    pub fn new(limit: Duration) -> Stall {
        Stall { limit, timer: None, waiting: false }
    }

    /// The bound.
    pub fn limit(&self) -> Duration {
        self.limit
    }

    /// Whether a wait is being counted (nothing came since it began).
    pub fn is_waiting(&self) -> bool {
        self.waiting
    }

    /// Bytes came (or the body ended): the next wait starts its own count.
    #[inline]
    pub fn moved(&mut self) {
        self.waiting = false;
    }

    /// The body had nothing to read: `Ready` once it has been silent for the bound since
    /// it last [`moved`](Stall::moved), else `Pending` (and `cx` is woken when the bound
    /// runs out).
    pub fn wait(&mut self, cx: &mut Context<'_>) -> Poll<Stalled> {
        if !self.waiting {
            self.waiting = true;
            // A bound too far to count (`Duration::MAX` for none) is a wait of 30 years.
            let now = Instant::now();
            let until = now.checked_add(self.limit).unwrap_or(now + Duration::from_secs(30 * 365 * 86_400));
            match &mut self.timer {
                Some(timer) => timer.as_mut().reset(until),
                None => self.timer = Some(Box::pin(tokio::time::sleep_until(until))),
            }
        }
        match &mut self.timer {
            Some(timer) => timer.as_mut().poll(cx).map(|()| Stalled(self.limit)),
            None => Poll::Pending,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Polls `stall` once as a body with nothing to read would.
    fn poll_silent(stall: &mut Stall) -> Poll<Stalled> {
        let mut cx = Context::from_waker(std::task::Waker::noop());
        stall.wait(&mut cx)
    }

    #[tokio::test(start_paused = true)]
    async fn a_silent_body_is_given_up_after_the_bound_counted_from_its_last_bytes() {
        let mut stall = Stall::new(Duration::from_secs(10));
        assert!(poll_silent(&mut stall).is_pending());
        tokio::time::advance(Duration::from_secs(9)).await;
        // Polled again while still silent: the count goes on, it does not start again.
        assert!(poll_silent(&mut stall).is_pending());
        tokio::time::advance(Duration::from_secs(2)).await;
        assert_eq!(poll_silent(&mut stall), Poll::Ready(Stalled(Duration::from_secs(10))));
    }

    #[tokio::test(start_paused = true)]
    async fn a_bound_too_far_to_count_is_no_panic() {
        let mut stall = Stall::new(Duration::MAX);
        assert!(poll_silent(&mut stall).is_pending());
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_start_the_count_again() {
        let mut stall = Stall::new(Duration::from_secs(10));
        for _ in 0..5 {
            assert!(poll_silent(&mut stall).is_pending());
            tokio::time::advance(Duration::from_secs(9)).await;
            stall.moved();
        }
        // 45 s in all, never 10 s silent.
        assert!(poll_silent(&mut stall).is_pending());
        tokio::time::advance(Duration::from_secs(10)).await;
        assert!(poll_silent(&mut stall).is_ready());
    }
}
