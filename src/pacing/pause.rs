//! [`PauseInfo`]: what a back-off pause after a 429 or 503 was.

use std::sync::Arc;
use std::time::Duration;

/// A pause after a 429 or 503: what the origin said, and how long robotsgate waits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PauseInfo {
    /// The origin's status (429 or 503).
    pub status: u16,
    /// Its `Retry-After`, as sent (when it sent one that could be read).
    pub retry_after: Option<Arc<str>>,
    /// How long the pause is.
    pub pause: Duration,
    /// 429/503 answers in a row that started a pause (the doubling's count).
    pub streak: u32,
}
