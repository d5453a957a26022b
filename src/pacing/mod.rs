//! Politeness: *when* a request may go to its origin. robotsgate decides whether a request
//! may reach an origin (the [`policy`](crate::policy)); the pacer spaces the requests that
//! may, for every client at once.
//!
//! - A **lane** is one origin (scheme, host, port) and one product token. Its requests
//!   start at least its **delay** apart: the longest of `min_delay`, a host rule's
//!   `delay`, and the robots.txt `crawl-delay` or `request-rate` for the token, capped at
//!   `max_delay` ([`PacingConfig::plan`]). With no delay anywhere, nothing waits.
//! - A request that must wait is **held**, in arrival order per lane, and let go when its
//!   slot comes; one that goes away while held gives its slot back. One whose wait would
//!   pass `max_wait`, or that finds `max_queue_per_origin` requests held already, is
//!   refused at once ([`Refused`]: the layer answers `503` with `Retry-After`).
//! - **Back-off**: a 429 or 503 from the origin pauses the lane until its `Retry-After`
//!   (seconds or an HTTP-date, at most `max_backoff`), or, without one, from
//!   `initial_backoff` doubling with each further one; a success resets the doubling.
//!   Requests meanwhile are held or refused as above.
//! - A host rule's `max_concurrency` caps the lane's requests in flight (until their
//!   response headers).
//! - **Report-only** holds nothing and reports the wait each request would have had.
//!
//! The state is kept per lane in a bounded map; idle lanes (their delay passed, no pause,
//! no request held) are dropped. The slots themselves are kept by a store behind a small
//! interface: in the process, or in a [`SharedPaceStore`] for a fleet of proxies (fleet
//! mode keeps it in Redis).
//! Times are `tokio::time::Instant`s, so tests run the pacer in virtual time.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread", start_paused = true)]
//! # async fn main() {
//! use std::sync::Arc;
//! use std::time::Duration;
//! use robotsgate::origin::Origin;
//! use robotsgate::pacing::{Pacer, PacingConfig};
//!
//! let pacer = Pacer::new(PacingConfig { min_delay: Duration::from_secs(2), ..Default::default() });
//! let origin = Arc::new(Origin::parse("https://example.com/").unwrap());
//! let agent: Arc<str> = "ExampleBot".into();
//! let start = tokio::time::Instant::now();
//! for _ in 0..3 {
//!     let pass = pacer.pace(&origin, &agent, None, false).await.expect("held, not refused");
//!     drop(pass.ticket); // the request went, its answer is not reported
//! }
//! assert_eq!(start.elapsed(), Duration::from_secs(4)); // at 0 s, 2 s and 4 s
//! # }
//! ```

mod config;
mod lane;
mod notice;
mod pacer;
mod pause;
mod shared;
mod slot;
mod store;

pub use config::{DelaySource, HostRule, PacingConfig, Plan};
pub use notice::PauseNotice;
pub use pacer::{PaceFacts, PaceObserver, PaceRefusal, PaceTicket, Pacer, Pass, Refused};
pub use pause::PauseInfo;
pub use shared::{Backoff, LaneId, PauseSink, SharedFuture, SharedPaceStore, SharedPause, SharedSlot};

pub(crate) use slot::retry_after_secs;

#[cfg(test)]
mod tests;
