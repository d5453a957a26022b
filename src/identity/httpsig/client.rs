//! Fetching key directories ([`DirectoryClient`]: one bounded `GET`, through the library's
//! [`Connector`] — DNS, destination guard, TLS) and keeping them ([`DirectoryCache`]: HTTP
//! freshness within bounds, failures remembered at most 5 min without dropping the keys
//! already known, concurrent fetches of one directory joined into one, keys found by
//! (directory, keyid) only).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::header::{ACCEPT, CONTENT_TYPE, ETAG, IF_MODIFIED_SINCE, IF_NONE_MATCH, LAST_MODIFIED, USER_AGENT};
use http::{HeaderMap, HeaderValue, Request, StatusCode};
use http_body_util::{Either, Empty};
use tokio::sync::watch;

use super::base::RequestView;
use super::config::VerifyConfig;
use super::directory::{
    Directory, DirectoryResponse, DirectoryUrl, DocumentError, MEDIA_TYPE, ResponseProof,
    check_response_signatures,
};
use crate::fetch::{Unreachable, client_error, max_age, read_decoded_body};
use crate::net::{Connector, Pool, PoolConfig};

/// Why a directory could not be had.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DirectoryError {
    /// No response (DNS, connection, guard, TLS, timeouts, broken HTTP).
    #[error("{0}")]
    Unreachable(Unreachable),
    /// The whole fetch took longer than allowed.
    #[error("not fetched within {0:?}")]
    Timeout(Duration),
    /// A redirect (the draft: verifiers MUST NOT follow them).
    #[error("redirect ({0}) refused")]
    Redirect(u16),
    /// A status other than `200`.
    #[error("status {0}")]
    Status(u16),
    /// Not the directory media type.
    #[error("content type {0:?} is not a key directory")]
    ContentType(String),
    /// The document was refused.
    #[error("{0}")]
    Document(#[from] DocumentError),
    /// Not fetched: as many fetches as allowed are under way.
    #[error("not fetched: {0} directory fetches under way")]
    Busy(usize),
}

/// Validators of a fetched directory, for conditional requests.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Validators {
    /// `ETag`.
    pub etag: Option<HeaderValue>,
    /// `Last-Modified`.
    pub last_modified: Option<HeaderValue>,
}

/// A directory as fetched.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// `200` with a directory.
    Directory {
        /// The keys (response signatures already applied as configured).
        directory: Directory,
        /// What the response signatures said.
        proof: ResponseProof,
        /// How long it stays fresh (HTTP caching, within the configured bounds).
        ttl: Duration,
        /// For the next conditional request.
        validators: Validators,
    },
    /// `304 Not Modified`: the cached copy stays, fresh for `ttl`.
    NotModified {
        /// How long it stays fresh.
        ttl: Duration,
    },
}

/// Fetches key directories: `GET` of the URL exactly, `https` only, no redirects, at most
/// [`DirectoryConfig::max_bytes`](super::DirectoryConfig::max_bytes) and
/// [`max_keys`](super::DirectoryConfig::max_keys), within
/// [`timeout`](super::DirectoryConfig::timeout) for the whole fetch, through a
/// [`Connector`] (so the destination guard applies: no private addresses unless allowed).
#[derive(Clone, Debug)]
pub struct DirectoryClient {
    pool: Pool,
    config: Arc<VerifyConfig>,
}

impl DirectoryClient {
    /// A client connecting through `connector` (HTTP/1.1).
    pub fn new(connector: Connector, config: Arc<VerifyConfig>) -> DirectoryClient {
        let pool = Pool::new(
            connector.http1_only(),
            PoolConfig {
                max_idle: 16,
                max_idle_per_origin: 1,
                idle_timeout: Duration::from_secs(30),
                burst_grace: Duration::ZERO,
                ..PoolConfig::default()
            },
        );
        DirectoryClient { pool, config }
    }

    /// Fetches `url` (conditionally when `validators` are given); `now` (seconds since the
    /// epoch) dates the response signatures' checks.
    pub async fn fetch(
        &self,
        url: &DirectoryUrl,
        validators: Option<&Validators>,
        now: i64,
    ) -> Result<Fetched, DirectoryError> {
        let timeout = self.config.directory.timeout;
        tokio::time::timeout(timeout, self.run(url, validators, now))
            .await
            .unwrap_or(Err(DirectoryError::Timeout(timeout)))
    }

    async fn run(
        &self,
        url: &DirectoryUrl,
        validators: Option<&Validators>,
        now: i64,
    ) -> Result<Fetched, DirectoryError> {
        let config = &self.config.directory;
        let protocol = |e: String| DirectoryError::Unreachable(Unreachable::Protocol(e));
        let uri: http::Uri =
            url.as_str().parse().map_err(|e: http::uri::InvalidUri| protocol(e.to_string()))?;
        if uri.scheme_str() != Some("https") {
            return Err(protocol(format!("{uri} is not https")));
        }
        let mut req = Request::get(uri.clone())
            .header(ACCEPT, MEDIA_TYPE)
            .header(USER_AGENT, &config.user_agent)
            .body(Either::Right(Empty::new()))
            .map_err(|e| protocol(e.to_string()))?;
        if let Some(v) = validators {
            if let Some(etag) = &v.etag {
                req.headers_mut().insert(IF_NONE_MATCH, etag.clone());
            }
            if let Some(lm) = &v.last_modified {
                req.headers_mut().insert(IF_MODIFIED_SINCE, lm.clone());
            }
        }
        let response =
            self.pool.send(req).await.map_err(|e| DirectoryError::Unreachable(client_error(&e)))?;
        let status = response.status();
        let ttl = freshness(response.headers(), config.default_ttl, config.min_ttl, config.max_ttl);
        if status == StatusCode::NOT_MODIFIED && validators.is_some() {
            return Ok(Fetched::NotModified { ttl });
        }
        if status.is_redirection() {
            return Err(DirectoryError::Redirect(status.as_u16()));
        }
        if status != StatusCode::OK {
            return Err(DirectoryError::Status(status.as_u16()));
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .unwrap_or_default();
        if !acceptable_type(&content_type, url.is_well_known()) {
            return Err(DirectoryError::ContentType(content_type));
        }
        let headers = response.headers().clone();
        let validators = Validators {
            etag: headers.get(ETAG).cloned(),
            last_modified: headers.get(LAST_MODIFIED).cloned(),
        };
        // The body is read within the overall timeout; its own limit is the same.
        let (body, truncated) = read_decoded_body(response, config.max_bytes, config.timeout)
            .await
            .map_err(DirectoryError::Unreachable)?;
        if truncated {
            return Err(DocumentError::TooLarge(config.max_bytes).into());
        }
        let mut directory =
            Directory::parse(&body, config.max_bytes, config.max_keys, self.config.allow_test_keys)?;
        // The request as sent, for the `"@authority";req` of the response signatures.
        let request = Request::get(uri).body(()).map_err(|e| protocol(e.to_string()))?.into_parts().0;
        let proof = check_response_signatures(
            &mut directory,
            RequestView::of(&request),
            DirectoryResponse { status, headers: &headers, body: &body },
            now,
            &self.config,
            config.response_signatures,
        );
        Ok(Fetched::Directory { directory, proof, ttl, validators })
    }
}

/// The directory media type (parameters ignored); for a URL that is not a well-known
/// directory (`type=jwks_uri`, or a full URL), also the JWK Set types.
fn acceptable_type(content_type: &str, well_known: bool) -> bool {
    let essence = content_type.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
    essence == MEDIA_TYPE
        || (!well_known && matches!(essence.as_str(), "application/jwk-set+json" | "application/json"))
}

/// How long a response stays fresh (RFC 9111 §4.2.1): `s-maxage`/`max-age` less `Age`,
/// else `Expires` less `Date`, else `default`; within `[min, max]`.
fn freshness(headers: &HeaderMap, default: Duration, min: Duration, max: Duration) -> Duration {
    let date = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok())
    };
    let age = headers
        .get(http::header::AGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_secs);
    let ttl = match max_age(headers) {
        Some(m) => m.saturating_sub(age),
        None => match (date(http::header::EXPIRES), date(http::header::DATE)) {
            (Some(expires), Some(date)) => expires.duration_since(date).unwrap_or(Duration::ZERO),
            (Some(expires), None) => expires.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO),
            (None, _) => default,
        },
    };
    ttl.clamp(min, max.max(min))
}

/// What the cache knows of one directory.
#[derive(Debug, Clone)]
struct Entry {
    /// The last directory fetched successfully.
    directory: Option<Arc<Directory>>,
    /// When it was fetched (seconds since the epoch).
    fetched_at: i64,
    /// No new fetch before this (fresh, or a failure remembered).
    fresh_until: i64,
    /// The last fetch failed: why.
    error: Option<DirectoryError>,
    validators: Validators,
}

/// What a key lookup gives.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// The directory as known (the key may or may not be in it).
    Directory(Arc<Directory>),
    /// The directory could not be fetched and nothing is known of it.
    Unavailable(DirectoryError),
    /// A fetch is under way and did not finish within the wait allowed.
    Pending,
}

type Flight = watch::Receiver<Option<Arc<Entry>>>;

/// Key directories kept for the verifier: at most
/// [`max_directories`](super::DirectoryConfig::max_directories), each fresh for its HTTP
/// lifetime within bounds; a failed refresh keeps the keys known before (and no new fetch
/// for [`failure_ttl`](super::DirectoryConfig::failure_ttl), at most 5 min); a successful
/// one replaces them (a key removed is gone). One fetch per directory at a time, whoever
/// asks.
#[derive(Debug)]
pub struct DirectoryCache {
    client: DirectoryClient,
    config: Arc<VerifyConfig>,
    entries: moka::sync::Cache<Arc<str>, Arc<Entry>>,
    flights: Arc<Mutex<HashMap<Arc<str>, Flight>>>,
}

impl DirectoryCache {
    /// A cache fetching through `client`.
    pub(crate) fn new(client: DirectoryClient, config: Arc<VerifyConfig>) -> DirectoryCache {
        let entries = moka::sync::Cache::builder().max_capacity(config.directory.max_directories).build();
        DirectoryCache { client, config, entries, flights: Arc::default() }
    }

    /// The directory at `url` as known at `now` (seconds since the epoch), fetched first
    /// when it is not fresh — or when it lacks `keyid` and was fetched longer than
    /// [`refetch_for_unknown_key`](super::DirectoryConfig::refetch_for_unknown_key) ago.
    /// Waits at most `wait` for a fetch (which goes on when the wait ends: the next request
    /// finds its result); then the stale copy is used if there is one, else
    /// [`Lookup::Pending`].
    pub(crate) async fn lookup(&self, url: &DirectoryUrl, keyid: &str, now: i64, wait: Duration) -> Lookup {
        let key: Arc<str> = url.as_str().into();
        let known = self.entries.get(&key);
        if let Some(entry) = &known {
            let refetch_after = self.config.directory.refetch_for_unknown_key.as_secs() as i64;
            let fresh = now < entry.fresh_until;
            match &entry.directory {
                Some(dir)
                    if fresh && (dir.get(keyid).is_some() || now < entry.fetched_at + refetch_after) =>
                {
                    return Lookup::Directory(dir.clone());
                }
                // A remembered failure, keys known: use them until the next try.
                Some(dir) if fresh && entry.error.is_some() => return Lookup::Directory(dir.clone()),
                None if fresh => {
                    if let Some(e) = &entry.error {
                        return Lookup::Unavailable(e.clone());
                    }
                }
                _ => {}
            }
        }
        let Some(mut flight) = self.join_or_start(url, key, known.clone(), now) else {
            return match known.as_ref().and_then(|e| e.directory.clone()) {
                Some(dir) => Lookup::Directory(dir),
                None => {
                    Lookup::Unavailable(DirectoryError::Busy(self.config.directory.max_concurrent_fetches))
                }
            };
        };
        let landed = match tokio::time::timeout(wait, flight.wait_for(Option::is_some)).await {
            Ok(Ok(r)) => r.clone(),
            _ => None,
        };
        let fetched = landed.is_some();
        match landed.or(known) {
            Some(e) => match (&e.directory, &e.error) {
                (Some(dir), _) => Lookup::Directory(dir.clone()),
                (None, Some(err)) if fetched => Lookup::Unavailable(err.clone()),
                _ => Lookup::Pending,
            },
            None => Lookup::Pending,
        }
    }

    /// The fetch of `url` under way, or a new one (run on its own task: a request that stops
    /// waiting does not cancel it); `None` when as many as allowed are under way.
    fn join_or_start(
        &self,
        url: &DirectoryUrl,
        key: Arc<str>,
        prior: Option<Arc<Entry>>,
        now: i64,
    ) -> Option<Flight> {
        let mut flights = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        // A flight whose task is gone (it cannot be, short of a panic) is not joined.
        if let Some(flight) = flights.get(&key)
            && flight.has_changed().is_ok()
        {
            return Some(flight.clone());
        }
        flights.retain(|_, f| f.has_changed().is_ok());
        if flights.len() >= self.config.directory.max_concurrent_fetches {
            return None;
        }
        let (tx, rx) = watch::channel(None);
        flights.insert(key.clone(), rx.clone());
        drop(flights);
        let (client, config, entries, flights) =
            (self.client.clone(), self.config.clone(), self.entries.clone(), self.flights.clone());
        let url = url.clone();
        tokio::spawn(async move {
            let validators = prior.as_ref().filter(|p| p.directory.is_some()).map(|p| p.validators.clone());
            let result = client.fetch(&url, validators.as_ref(), now).await;
            match &result {
                Ok(Fetched::Directory { directory, proof, .. }) => tracing::debug!(
                    directory = url.as_str(),
                    keys = directory.keys.len(),
                    ignored = ?directory.ignored,
                    invalid_response_signatures = ?proof.invalid,
                    "key directory fetched"
                ),
                Ok(Fetched::NotModified { .. }) => {
                    tracing::debug!(directory = url.as_str(), "key directory not modified")
                }
                Err(e) => tracing::debug!(directory = url.as_str(), error = %e, "key directory fetch failed"),
            }
            let entry = Arc::new(merge(prior.as_deref(), result, now, &config));
            entries.insert(key.clone(), entry.clone());
            flights.lock().unwrap_or_else(|e| e.into_inner()).remove(&key);
            let _ = tx.send(Some(entry));
        });
        Some(rx)
    }

    /// Keys had otherwise (configuration, or key material verified elsewhere) stand as the
    /// directory at `url` from `now` for `ttl`; then the directory is fetched as any other.
    pub fn insert(&self, url: &DirectoryUrl, directory: Directory, now: i64, ttl: Duration) {
        let entry = Entry {
            directory: Some(Arc::new(directory)),
            fetched_at: now,
            fresh_until: now.saturating_add(i64::try_from(ttl.as_secs()).unwrap_or(i64::MAX)),
            error: None,
            validators: Validators::default(),
        };
        self.entries.insert(url.as_str().into(), Arc::new(entry));
    }

    /// How many directories are cached (for metrics and tests).
    pub fn len(&self) -> u64 {
        self.entries.run_pending_tasks();
        self.entries.entry_count()
    }

    /// Whether no directory is cached.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The entry after a fetch: a new directory replaces the old (keys removed are gone); a
/// `304` refreshes it; a failure keeps the keys known and is remembered for
/// `failure_ttl` (at most 5 min).
fn merge(
    prior: Option<&Entry>,
    result: Result<Fetched, DirectoryError>,
    now: i64,
    config: &VerifyConfig,
) -> Entry {
    let secs = |d: Duration| i64::try_from(d.as_secs()).unwrap_or(i64::MAX);
    let failure_ttl = secs(config.directory.failure_ttl.min(Duration::from_secs(300)));
    let known = prior.and_then(|p| p.directory.clone());
    let result = match result {
        Ok(Fetched::NotModified { .. }) if known.is_none() => Err(DirectoryError::Status(304)),
        r => r,
    };
    match result {
        Ok(Fetched::Directory { directory, ttl, validators, .. }) => Entry {
            directory: Some(Arc::new(directory)),
            fetched_at: now,
            fresh_until: now.saturating_add(secs(ttl)),
            error: None,
            validators,
        },
        Ok(Fetched::NotModified { ttl }) => Entry {
            directory: known,
            fetched_at: now,
            fresh_until: now.saturating_add(secs(ttl)),
            error: None,
            validators: prior.map(|p| p.validators.clone()).unwrap_or_default(),
        },
        Err(error) => Entry {
            directory: known,
            fetched_at: prior.map_or(now, |p| p.fetched_at),
            fresh_until: now.saturating_add(failure_ttl),
            error: Some(error),
            validators: prior.map(|p| p.validators.clone()).unwrap_or_default(),
        },
    }
}
