//! Where the site's robots.txt comes from, and the copy kept of it: bytes given once, or
//! `GET /robots.txt` through the inner service, cached with RFC 9309's rules (2xx: the
//! file; 4xx: allow all; 5xx, 429 or no answer: the last good copy, else disallow all),
//! refreshed after a time to live, one fetch at a time.

use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwapOption;
use bytes::Bytes;
use hyper::body::Body;
use tokio::time::Instant;

use super::agents::KnownAgents;
use super::judge::SiteRobots;
use crate::rep::MAX_ROBOTS_TXT_BYTES;

/// What a fetch of robots.txt through the inner service gave.
#[derive(Debug)]
pub(crate) enum Fetched {
    /// A status and (for 2xx) the body, at most [`MAX_ROBOTS_TXT_BYTES`] read, and
    /// whether it went on past them (`truncated`: the rest was not read).
    Answer { status: u16, body: Bytes, truncated: bool },
    /// No answer: why.
    Failed(String),
}

/// Reads at most `limit` bytes of `body`, and whether it went on past them (the rest is
/// not read).
pub(crate) async fn read_bounded<B>(body: B, limit: usize) -> Result<(Bytes, bool), String>
where
    B: Body<Data = Bytes>,
    B::Error: std::fmt::Display,
{
    use http_body_util::BodyExt as _;
    let mut body = std::pin::pin!(body);
    let mut out = Vec::new();
    // One byte past the limit says whether there is more.
    while out.len() <= limit {
        match body.frame().await {
            None => break,
            Some(Err(e)) => return Err(e.to_string()),
            Some(Ok(frame)) => {
                if let Ok(data) = frame.into_data() {
                    let take = data.len().min(limit + 1 - out.len());
                    out.extend_from_slice(&data[..take]);
                }
            }
        }
    }
    let truncated = out.len() > limit;
    out.truncate(limit);
    Ok((out.into(), truncated))
}

/// The copy in use, and when it was fetched.
#[derive(Debug)]
struct Held {
    site: Arc<SiteRobots>,
    until: Instant,
}

/// The site's robots.txt, as the service uses it.
#[derive(Debug)]
pub(crate) struct RobotsCache {
    /// A file given (replaceable while running); `None`: fetched.
    fixed: ArcSwapOption<SiteRobots>,
    held: ArcSwapOption<Held>,
    fetching: tokio::sync::Mutex<()>,
    ttl: Duration,
    error_ttl: Duration,
}

/// The most bytes of robots.txt read from the inner service (more is ignored by the
/// engine anyway).
pub(crate) const READ_LIMIT: usize = MAX_ROBOTS_TXT_BYTES;

impl RobotsCache {
    /// The file `body` if given, else fetched through the inner service (and used for
    /// `ttl`, or `error_ttl` after a failure).
    pub(crate) fn new(
        body: Option<Bytes>,
        known: &KnownAgents,
        ttl: Duration,
        error_ttl: Duration,
    ) -> RobotsCache {
        RobotsCache {
            fixed: ArcSwapOption::from(body.map(|b| Arc::new(SiteRobots::parsed(b, false, known)))),
            held: ArcSwapOption::empty(),
            fetching: tokio::sync::Mutex::new(()),
            ttl,
            error_ttl,
        }
    }

    /// Replaces the file given (`None`: fetched through the inner service from now on;
    /// a copy fetched before is not reused).
    pub(crate) fn set_fixed(&self, body: Option<Bytes>, known: &KnownAgents) {
        if body.is_none() {
            self.held.store(None);
        }
        self.fixed.store(body.map(|b| Arc::new(SiteRobots::parsed(b, false, known))));
    }

    /// The file given, if the source is one.
    pub(crate) fn fixed_copy(&self) -> Option<Arc<SiteRobots>> {
        self.fixed.load_full()
    }

    /// The copy to decide with: the held one while fresh; else one fetch (`fetch`) runs
    /// and its result is used, while other requests use the stale copy (or, with none,
    /// wait for that fetch).
    /// The copy in use, when no fetch is due (the file, or a fetched copy within its
    /// time): what nearly every request gets, without the fetch's future.
    pub(crate) fn fresh(&self) -> Option<Arc<SiteRobots>> {
        if let Some(fixed) = self.fixed.load_full() {
            return Some(fixed);
        }
        let held = self.held.load();
        held.as_ref().filter(|h| h.until > Instant::now()).map(|h| h.site.clone())
    }

    pub(crate) async fn current<F, Fut>(&self, known: &KnownAgents, fetch: F) -> Arc<SiteRobots>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Fetched>,
    {
        if let Some(fixed) = self.fixed.load_full() {
            return fixed;
        }
        let now = Instant::now();
        let held = self.held.load_full();
        if let Some(h) = &held
            && h.until > now
        {
            return h.site.clone();
        }
        let _guard = match (&held, self.fetching.try_lock()) {
            (_, Ok(g)) => g,
            (Some(h), Err(_)) => return h.site.clone(),
            (None, Err(_)) => self.fetching.lock().await,
        };
        // Another fetch may have finished while this one waited.
        let latest = self.held.load_full();
        if let Some(h) = &latest
            && h.until > Instant::now()
        {
            return h.site.clone();
        }
        let (site, ttl) = match fetch().await {
            Fetched::Answer { status, body, truncated } if (200..300).contains(&status) => {
                (Arc::new(SiteRobots::parsed(body, truncated, known)), self.ttl)
            }
            Fetched::Answer { status, .. } if (400..500).contains(&status) && status != 429 => {
                (Arc::new(SiteRobots::allow_all(status, known)), self.ttl)
            }
            Fetched::Answer { status, .. } if (300..400).contains(&status) => {
                // Redirects off the site, or too many (`fetch_robots` follows the others,
                // and says why it stopped): no file.
                (Arc::new(SiteRobots::allow_all(status, known)), self.ttl)
            }
            other => {
                let cause = match other {
                    Fetched::Answer { status, .. } => format!("HTTP status {status}"),
                    Fetched::Failed(why) => why,
                };
                tracing::warn!(%cause, "robots.txt could not be fetched from the site");
                match latest.as_ref().filter(|h| h.site.is_good()) {
                    Some(h) => (h.site.clone(), self.error_ttl),
                    None => (Arc::new(SiteRobots::disallow_all(cause, known)), self.error_ttl),
                }
            }
        };
        let until = Instant::now()
            .checked_add(ttl)
            .unwrap_or_else(|| Instant::now() + Duration::from_secs(86_400 * 365));
        self.held.store(Some(Arc::new(Held { site: site.clone(), until })));
        site
    }
}
