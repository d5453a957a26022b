//! The one bound on waiting: every network await of a test goes through [`bounded`] (or
//! [`within`], where a timeout is an answer rather than a failure).

use std::future::Future;
use std::time::Duration;

/// Longest a single step of a test may take before the test fails (tokio time).
pub const BOUND: Duration = Duration::from_secs(20);

/// Awaits `fut` for at most [`BOUND`]; `None` when it took longer.
pub async fn within<F: Future>(fut: F) -> Option<F::Output> {
    tokio::time::timeout(BOUND, fut).await.ok()
}

/// Awaits `fut`, failing the test instead of hanging when it takes longer than [`BOUND`].
pub async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match within(fut).await {
        Some(v) => v,
        None => panic!("{what}: no result within {BOUND:?}"),
    }
}

/// Yields to the runtime until `cond` holds (bounded).
pub async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    bounded(what, async {
        while !cond() {
            tokio::task::yield_now().await;
        }
    })
    .await
}
