//! What every listener of the process does when accepting a connection fails.

use std::time::Duration;

/// How long a listener waits after a failed accept.
const RETRY_AFTER: Duration = Duration::from_millis(50);

/// Accepting a connection on `listener` failed: mostly out of file descriptors (`EMFILE`,
/// `ENFILE`), when the connection stays queued and the next accept fails at once. Says so
/// and waits a moment, so that a listener neither spins a core nor fills the log (before,
/// the ingress's wrote some 400,000 lines a second) until descriptors are free again.
pub(crate) async fn failed(listener: &'static str, error: &std::io::Error) {
    tracing::warn!(listener, %error, "accept failed; trying again in {} ms", RETRY_AFTER.as_millis());
    tokio::time::sleep(RETRY_AFTER).await;
}
