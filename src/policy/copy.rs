//! The robots.txt copies decisions rest on: the facts of the fetch, what the file says, and
//! the failed refreshes.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

use super::audit_text::AuditText;
use crate::fetch::{FetchOutcome, Unreachable};
use crate::rep::RobotsTxt;

/// Facts about the robots.txt fetch a decision rests on (for the audit log).
#[derive(Debug, Clone)]
pub struct FetchFacts {
    /// The robots.txt URL.
    pub url: String,
    /// The URL of the last response (after redirects).
    pub final_url: String,
    /// Redirect hops.
    pub redirects: u8,
    /// HTTP status of the last response, if there was one.
    pub status: Option<u16>,
    /// Decoded body bytes read.
    pub bytes: usize,
    /// The body went on past the limit.
    pub truncated: bool,
    /// SHA-256 of the body, when one was read.
    pub sha256: Option<[u8; 32]>,
    /// When the fetch started (wall clock).
    pub fetched_at: SystemTime,
    /// How long the fetch took.
    pub duration: Duration,
    /// Audit log text every decision resting on this copy repeats, made once.
    pub(crate) audit_text: AuditText,
}

impl FetchFacts {
    /// The facts of a fetch's outcome.
    pub(super) fn of(outcome: &FetchOutcome) -> FetchFacts {
        FetchFacts {
            url: outcome.url.clone(),
            final_url: outcome.final_url.clone(),
            redirects: outcome.redirects,
            status: outcome.status,
            bytes: outcome.body.len(),
            truncated: outcome.truncated,
            sha256: outcome.sha256,
            fetched_at: outcome.fetched_at,
            duration: outcome.duration,
            audit_text: AuditText::default(),
        }
    }

    /// The body hash in lower-case hex.
    pub fn sha256_hex(&self) -> Option<String> {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        self.sha256.map(|sha| {
            let mut out = [0u8; 64];
            for (pair, byte) in out.chunks_exact_mut(2).zip(sha) {
                pair[0] = DIGITS[usize::from(byte >> 4)];
                pair[1] = DIGITS[usize::from(byte & 0x0f)];
            }
            std::str::from_utf8(&out).unwrap_or_default().to_owned()
        })
    }
}

/// A usable robots.txt result: a parsed file, or "no rules" (unavailable).
#[derive(Debug)]
pub struct RobotsCopy {
    /// The fetch it came from.
    pub facts: FetchFacts,
    /// What it says.
    pub content: CopyContent,
    /// When it was fetched (tokio's clock: freshness).
    pub(super) fetched: Instant,
}

/// What a usable robots.txt result says.
#[derive(Debug)]
pub enum CopyContent {
    /// A 2xx body, parsed.
    Parsed(Box<RobotsTxt>),
    /// A 4xx answer (not 429): no rules.
    Unavailable {
        /// The status.
        status: u16,
    },
    /// More redirects than allowed: no rules.
    TooManyRedirects,
}

/// A failed refresh (unreachable robots.txt).
#[derive(Debug, Clone)]
pub struct Failure {
    /// The fetch.
    pub facts: FetchFacts,
    /// Why it was unreachable.
    pub cause: Unreachable,
    /// Failures in a row.
    pub streak: u32,
    /// When to try again.
    pub(super) retry_at: Instant,
}

/// A copy of `body` as fetched from `origin` (for [`decision_on`](super::decision::decision_on)).
#[cfg(test)]
pub(crate) fn copy_of(origin: &crate::origin::Origin, body: &str) -> std::sync::Arc<RobotsCopy> {
    let facts = FetchFacts {
        url: origin.robots_url(),
        final_url: origin.robots_url(),
        redirects: 0,
        status: Some(200),
        bytes: body.len(),
        truncated: false,
        sha256: Some([7; 32]),
        fetched_at: SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_441_017),
        duration: Duration::from_millis(3),
        audit_text: AuditText::default(),
    };
    let content = CopyContent::Parsed(Box::new(RobotsTxt::parse(body.as_bytes())));
    std::sync::Arc::new(RobotsCopy { facts, content, fetched: Instant::now() })
}
