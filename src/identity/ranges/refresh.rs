//! The refresher: a task that keeps a [`Ranges`]' lists fresh.
//!
//! - A URL list is fetched through the library's [`Connector`] (DNS, destination guard,
//!   TLS) every [`RefreshConfig::interval`] (a day) plus a random part of
//!   [`RefreshConfig::jitter`], with `If-None-Match` / `If-Modified-Since` from the last
//!   answer, so an unchanged list costs a `304`. A fetch is bounded in size
//!   ([`RefreshConfig::max_body_bytes`]) and time ([`RefreshConfig::timeout`], redirects
//!   and body together).
//! - A failed fetch (network, status, a body too large, a list that does not parse) keeps
//!   the last good copy and is retried after [`RefreshConfig::retry_min`], doubling up to
//!   [`RefreshConfig::retry_max`].
//! - A file list is re-read when its modification time or size changes (checked every
//!   [`RefreshConfig::file_interval`]).
//!
//! The caller owns the task through its [`RefreshHandle`]: [`RefreshHandle::refresh_now`]
//! refreshes every list at once and says what happened, [`RefreshHandle::shutdown`] (or
//! dropping the handle) stops it.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use http::header::{
    ACCEPT, ACCEPT_ENCODING, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, USER_AGENT,
};
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{Either, Empty};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::{ListError, Location, Provenance, RangeList, Ranges, read_list_file};
use crate::fetch::redirect_target;
use crate::net::error_chain;
use crate::net::http::{self as client, BodyError};
use crate::net::{ConnectError, Connector, Pool, PoolConfig, PoolError};

/// How lists are refreshed.
#[derive(Debug, Clone)]
pub struct RefreshConfig {
    /// Between two fetches of a URL list that worked (default: a day).
    pub interval: Duration,
    /// Up to this much is added at random to each wait (default: an hour), so replicas
    /// and restarts do not all ask at once.
    pub jitter: Duration,
    /// The first fetch of every URL list that has a copy (bundled), after the task starts
    /// (default: 10 s, plus jitter of up to a minute): the bundled copies may be old.
    pub first_fetch: Duration,
    /// The first fetch of a URL list that has no copy (none bundled): it checks nothing
    /// until then (default: at once).
    pub first_fetch_missing: Duration,
    /// The wait after a first failure; it doubles with each further one (default: 5 min).
    pub retry_min: Duration,
    /// The longest wait after failures (default: 6 h).
    pub retry_max: Duration,
    /// Between two checks of a file list's modification time (default: a minute).
    pub file_interval: Duration,
    /// A whole fetch: redirects, headers and body (default: 30 s).
    pub timeout: Duration,
    /// Body bytes read, decoded (default: 1 MiB); a longer body fails the fetch.
    pub max_body_bytes: usize,
    /// Redirects followed (default: 3).
    pub max_redirects: u8,
    /// The `User-Agent` sent.
    pub user_agent: String,
}

impl Default for RefreshConfig {
    fn default() -> Self {
        RefreshConfig {
            interval: Duration::from_secs(24 * 3600),
            jitter: Duration::from_secs(3600),
            first_fetch: Duration::from_secs(10),
            first_fetch_missing: Duration::ZERO,
            retry_min: Duration::from_secs(300),
            retry_max: Duration::from_secs(6 * 3600),
            file_interval: Duration::from_secs(60),
            timeout: Duration::from_secs(30),
            max_body_bytes: 1024 * 1024,
            max_redirects: 3,
            user_agent: concat!("robotsgate/", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}

/// What refreshing one list did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// A new copy is in use.
    Updated {
        /// Its prefixes.
        prefixes: usize,
    },
    /// The server said `304 Not Modified`.
    NotModified,
    /// The file has not changed since it was last read.
    Unchanged,
    /// The refresh failed; the copy in use (if any) is kept.
    Failed(RefreshError),
}

/// One list's part of [`RefreshHandle::refresh_now`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refreshed {
    /// The list's name.
    pub name: Arc<str>,
    /// What happened.
    pub outcome: Outcome,
}

/// Why a list could not be refreshed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RefreshError {
    /// No connection (DNS, refused, TLS, the destination guard).
    #[error("{0}")]
    Connect(ConnectError),
    /// A status other than `200` or `304`.
    #[error("HTTP status {0}")]
    Status(u16),
    /// More redirects than allowed, or one without a usable `Location`.
    #[error("redirect: {0}")]
    Redirect(String),
    /// Not done within [`RefreshConfig::timeout`].
    #[error("not fetched within {0:?}")]
    Timeout(Duration),
    /// A body longer than [`RefreshConfig::max_body_bytes`].
    #[error("body longer than {0} bytes")]
    TooLarge(usize),
    /// Invalid HTTP, a broken connection or a body that cannot be decoded.
    #[error("{0}")]
    Protocol(String),
    /// The document is not an acceptable list.
    #[error("{0}")]
    List(ListError),
    /// The file cannot be read.
    #[error("{0}")]
    File(String),
}

/// The task is no longer running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the refresher has stopped")]
pub struct Stopped;

/// The caller's side of a running refresher.
#[derive(Debug)]
pub struct RefreshHandle {
    commands: mpsc::Sender<oneshot::Sender<Vec<Refreshed>>>,
    cancel: CancellationToken,
    task: Option<JoinHandle<()>>,
}

impl RefreshHandle {
    /// Refreshes every list now (whatever their schedule), and says what happened to each;
    /// their next refresh is scheduled from now.
    pub async fn refresh_now(&self) -> Result<Vec<Refreshed>, Stopped> {
        let (tx, rx) = oneshot::channel();
        self.commands.send(tx).await.map_err(|_| Stopped)?;
        rx.await.map_err(|_| Stopped)
    }

    /// Stops the task (a fetch under way is dropped) and waits for it to end.
    pub async fn shutdown(mut self) {
        self.cancel.cancel();
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

impl Drop for RefreshHandle {
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// Starts the refresher of `ranges`' lists on the current tokio runtime.
pub fn spawn(ranges: Ranges, connector: Connector, config: RefreshConfig) -> RefreshHandle {
    let (commands, rx) = mpsc::channel(4);
    let cancel = CancellationToken::new();
    let now = Instant::now();
    let status = ranges.status();
    let states = ranges
        .sources()
        .iter()
        .zip(&status)
        .map(|(source, status)| State {
            etag: None,
            last_modified: None,
            failures: 0,
            stamp: None,
            due: now
                + match source.location {
                    Location::Url(_) if status.provenance.is_none() => config.first_fetch_missing,
                    Location::Url(_) => {
                        config.first_fetch + config.jitter.min(Duration::from_secs(60)).mul_f64(random())
                    }
                    Location::File(_) => config.file_interval,
                },
        })
        .collect();
    let refresher = Refresher {
        ranges,
        pool: Pool::new(
            connector,
            PoolConfig {
                max_idle: 8,
                max_idle_per_origin: 1,
                idle_timeout: Duration::from_secs(30),
                burst_grace: Duration::ZERO,
                ..PoolConfig::default()
            },
        ),
        config,
        states,
    };
    let task = tokio::spawn(refresher.run(rx, cancel.clone()));
    RefreshHandle { commands, cancel, task: Some(task) }
}

/// Per list: what the last answer said, and when to ask again.
#[derive(Debug)]
struct State {
    etag: Option<HeaderValue>,
    last_modified: Option<HeaderValue>,
    failures: u32,
    /// A file's modification time and size when last read.
    stamp: Option<(SystemTime, u64)>,
    due: Instant,
}

struct Refresher {
    ranges: Ranges,
    pool: Pool,
    config: RefreshConfig,
    states: Vec<State>,
}

/// A fetch that worked.
enum Fetched {
    NotModified(Option<HeaderValue>),
    New { list: RangeList, etag: Option<HeaderValue>, last_modified: Option<HeaderValue> },
}

impl Refresher {
    async fn run(
        mut self,
        mut commands: mpsc::Receiver<oneshot::Sender<Vec<Refreshed>>>,
        cancel: CancellationToken,
    ) {
        loop {
            let next = self.states.iter().map(|s| s.due).min();
            let sleep = async {
                match next {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = cancel.cancelled() => return,
                command = commands.recv() => {
                    let Some(reply) = command else { return };
                    let all: Vec<usize> = (0..self.states.len()).collect();
                    let Some(done) = cancel.run_until_cancelled(self.refresh(&all)).await else { return };
                    let _ = reply.send(done);
                }
                () = sleep => {
                    let now = Instant::now();
                    let due: Vec<usize> = (0..self.states.len()).filter(|&i| self.states[i].due <= now).collect();
                    if cancel.run_until_cancelled(self.refresh(&due)).await.is_none() {
                        return;
                    }
                }
            }
        }
    }

    /// Refreshes the lists `indices`, one after the other.
    async fn refresh(&mut self, indices: &[usize]) -> Vec<Refreshed> {
        let mut done = Vec::with_capacity(indices.len());
        for &i in indices {
            let Some(source) = self.ranges.sources().get(i).cloned() else { continue };
            let outcome = match &source.location {
                Location::Url(url) => self.refresh_url(i, url).await,
                Location::File(path) => self.refresh_file(i, path).await,
            };
            match &outcome {
                Outcome::Failed(e) => {
                    tracing::warn!(list = %source.name, error = %e, "crawler IP list not refreshed; the copy in use is kept");
                    self.ranges.record_error(i, Some(e.to_string()));
                }
                Outcome::Updated { prefixes } => {
                    tracing::info!(list = %source.name, prefixes, "crawler IP list updated");
                }
                Outcome::NotModified | Outcome::Unchanged => self.ranges.record_error(i, None),
            }
            let failed = matches!(outcome, Outcome::Failed(_));
            let is_file = matches!(source.location, Location::File(_));
            if let Some(state) = self.states.get_mut(i) {
                state.failures = if failed { state.failures.saturating_add(1) } else { 0 };
                let wait = if is_file && !failed {
                    self.config.file_interval
                } else {
                    next_delay(&self.config, state.failures, random())
                };
                state.due = Instant::now() + wait;
            }
            done.push(Refreshed { name: source.name.clone(), outcome });
        }
        done
    }

    async fn refresh_url(&mut self, i: usize, url: &str) -> Outcome {
        let timeout = self.config.timeout;
        let fetched = match tokio::time::timeout(timeout, self.fetch(i, url)).await {
            Err(_) => Err(RefreshError::Timeout(timeout)),
            Ok(r) => r,
        };
        let Some(state) = self.states.get_mut(i) else { return Outcome::Unchanged };
        match fetched {
            Err(e) => Outcome::Failed(e),
            Ok(Fetched::NotModified(etag)) => {
                if etag.is_some() {
                    state.etag = etag;
                }
                Outcome::NotModified
            }
            Ok(Fetched::New { list, etag, last_modified }) => {
                state.etag = etag;
                state.last_modified = last_modified;
                let prefixes = list.len();
                self.ranges.install(i, list, Provenance::Fetched { at: SystemTime::now() });
                Outcome::Updated { prefixes }
            }
        }
    }

    /// One conditional GET of `url`, following redirects.
    async fn fetch(&self, i: usize, url: &str) -> Result<Fetched, RefreshError> {
        let deadline = Instant::now() + self.config.timeout;
        let state = self.states.get(i);
        let mut current = url.to_owned();
        let mut redirects = 0u8;
        loop {
            let uri: http::Uri =
                current.parse().map_err(|e| RefreshError::Redirect(format!("{current}: {e}")))?;
            let mut request = Request::get(uri)
                .header(USER_AGENT, &self.config.user_agent)
                .header(ACCEPT, "application/json")
                .header(ACCEPT_ENCODING, client::ACCEPT_ENCODING);
            if let Some(etag) = state.and_then(|s| s.etag.as_ref()) {
                request = request.header(IF_NONE_MATCH, etag);
            }
            if let Some(date) = state.and_then(|s| s.last_modified.as_ref()) {
                request = request.header(IF_MODIFIED_SINCE, date);
            }
            let request = request
                .body(Either::Right(Empty::new()))
                .map_err(|e| RefreshError::Protocol(e.to_string()))?;
            let response = self.pool.send(request).await.map_err(|e| match e {
                PoolError::Connect(c) => RefreshError::Connect(c),
                e => RefreshError::Protocol(error_chain(&e)),
            })?;
            let status = response.status();
            if status == StatusCode::NOT_MODIFIED {
                return Ok(Fetched::NotModified(response.headers().get(ETAG).cloned()));
            }
            if status.is_redirection() {
                let Some(next) = redirect_target(&current, response.headers(), status) else {
                    return Err(RefreshError::Redirect(format!(
                        "{} without a usable Location",
                        status.as_u16()
                    )));
                };
                if redirects >= self.config.max_redirects {
                    return Err(RefreshError::Redirect(format!(
                        "more than {} redirects",
                        self.config.max_redirects
                    )));
                }
                redirects += 1;
                current = next;
                continue;
            }
            if status != StatusCode::OK {
                return Err(RefreshError::Status(status.as_u16()));
            }
            let etag = response.headers().get(ETAG).cloned();
            let last_modified = response.headers().get(LAST_MODIFIED).cloned();
            let limit = self.config.max_body_bytes;
            let left = deadline.saturating_duration_since(Instant::now());
            let (body, truncated) = client::read_body(response, limit, left).await.map_err(|e| match e {
                BodyError::Timeout => RefreshError::Timeout(self.config.timeout),
                BodyError::Stalled(silent) => RefreshError::Timeout(silent),
                BodyError::Transport(why) | BodyError::Decode(why) => RefreshError::Protocol(why),
            })?;
            if truncated {
                return Err(RefreshError::TooLarge(limit));
            }
            let list = RangeList::parse(&body, self.ranges.limits()).map_err(RefreshError::List)?;
            return Ok(Fetched::New { list, etag, last_modified });
        }
    }

    async fn refresh_file(&mut self, i: usize, path: &std::path::Path) -> Outcome {
        let limits = *self.ranges.limits();
        let meta = match tokio::fs::metadata(path).await {
            Ok(m) => m,
            Err(e) => return Outcome::Failed(RefreshError::File(format!("{}: {e}", path.display()))),
        };
        let stamp = (meta.modified().unwrap_or(SystemTime::UNIX_EPOCH), meta.len());
        let Some(state) = self.states.get_mut(i) else { return Outcome::Unchanged };
        if state.stamp == Some(stamp) {
            return Outcome::Unchanged;
        }
        if meta.len() > limits.max_bytes as u64 {
            let e = ListError::TooLarge {
                len: usize::try_from(meta.len()).unwrap_or(usize::MAX),
                max: limits.max_bytes,
            };
            return Outcome::Failed(RefreshError::List(e));
        }
        // Bounded, as at start: the file may have grown since its length was read.
        let owned = path.to_owned();
        let bytes = match tokio::task::spawn_blocking(move || read_list_file(&owned, limits.max_bytes)).await
        {
            Ok(Ok(b)) => b,
            Ok(Err(e)) => return Outcome::Failed(RefreshError::File(e)),
            Err(e) => return Outcome::Failed(RefreshError::File(format!("{}: {e}", path.display()))),
        };
        match RangeList::parse(&bytes, &limits) {
            Ok(list) => {
                state.stamp = Some(stamp);
                let prefixes = list.len();
                self.ranges.install(i, list, Provenance::File { at: SystemTime::now() });
                Outcome::Updated { prefixes }
            }
            Err(e) => Outcome::Failed(RefreshError::List(e)),
        }
    }
}

/// The wait before the next refresh of a list: after a success (`failures == 0`), the
/// interval plus `random` (in `[0, 1)`) times the jitter; after `failures` failures in a
/// row, `retry_min` doubled for each failure past the first, at most `retry_max`, plus up
/// to a quarter of that at random.
pub(crate) fn next_delay(config: &RefreshConfig, failures: u32, random: f64) -> Duration {
    let random = if random.is_finite() { random.clamp(0.0, 1.0) } else { 0.0 };
    if failures == 0 {
        return config.interval + config.jitter.mul_f64(random);
    }
    let doublings = failures.saturating_sub(1).min(30);
    let base = config.retry_min.saturating_mul(1 << doublings).min(config.retry_max);
    base + base.mul_f64(random / 4.0)
}

/// A number in `[0, 1)` from the system's random source (0 if it fails).
fn random() -> f64 {
    let mut bytes = [0u8; 8];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut bytes).is_err() {
        return 0.0;
    }
    (u64::from_le_bytes(bytes) >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedule_after_success_and_failures() {
        let c = RefreshConfig::default();
        assert_eq!(next_delay(&c, 0, 0.0), c.interval);
        assert_eq!(next_delay(&c, 0, 0.5), c.interval + c.jitter / 2);
        assert_eq!(next_delay(&c, 1, 0.0), c.retry_min);
        assert_eq!(next_delay(&c, 2, 0.0), c.retry_min * 2);
        assert_eq!(next_delay(&c, 3, 0.0), c.retry_min * 4);
        assert_eq!(next_delay(&c, 3, 1.0), c.retry_min * 5);
        assert_eq!(next_delay(&c, 30, 0.0), c.retry_max);
        assert_eq!(next_delay(&c, u32::MAX, 0.0), c.retry_max);
        assert_eq!(next_delay(&c, 1, f64::NAN), c.retry_min);
        for _ in 0..100 {
            let r = random();
            assert!((0.0..1.0).contains(&r), "{r}");
        }
    }
}
