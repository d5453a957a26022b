//! Getting one origin's robots.txt the way RFC 9309 §2.3 and Google say.
//!
//! | what comes back | [`FetchResult`] | means |
//! |---|---|---|
//! | 2xx | `Success` | parse the body |
//! | 3xx with `Location` | (followed, up to [`FetchConfig::max_redirects`] hops, across hosts) | |
//! | more redirects than that | `TooManyRedirects` | unavailable: allow all |
//! | 4xx except 429 | `Unavailable` | allow all |
//! | 429, 5xx, any other status, a 3xx without a usable `Location` | `Unreachable` | disallow all |
//! | DNS failure, refused or reset connection, TLS failure, invalid HTTP, a body that cannot be decoded, a timeout | `Unreachable` | disallow all |
//!
//! Only the first [`FetchConfig::max_body_bytes`] (500 KiB) of the *decoded* body are
//! read; the rest is ignored and the fetch does not fail, so a compressed bomb stays small.
//! `gzip`, `deflate` and (with the default feature `brotli`) `br` are decoded.
//!
//! A [`Fetcher`] sends through robotsgate's own [`Pool`] (its DNS, destination guard, TLS
//! and proxies) or through a client of yours ([`Fetcher::with_service`], what
//! [`RobotsBuilder::fetch_service`](crate::RobotsBuilder::fetch_service) sets up): either
//! way the table above, the redirects, the size limit, the timeouts and the facts of
//! [`FetchOutcome`] are this module's, one code path for both.

use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{ACCEPT, ACCEPT_ENCODING, CACHE_CONTROL, LOCATION, RETRY_AFTER, USER_AGENT};
use http::{HeaderMap, Request, StatusCode};
use http_body_util::{BodyExt, Either, Empty};
use tokio::time::Instant;

use crate::net::error_chain;
use crate::net::http::{self as client, BodyError};
use crate::net::{ConnectError, Connector, Pool, PoolConfig, PoolError};

mod service;

use crate::origin::Origin;
use crate::rep::MAX_ROBOTS_TXT_BYTES;
pub(crate) use service::FetchService;
use service::{BoxError, FetchBody};

/// How robots.txt files are fetched.
#[derive(Debug, Clone)]
pub struct FetchConfig {
    /// The `User-Agent` sent; it should contain the crawler's product token.
    pub user_agent: String,
    /// From sending a request to having the response headers.
    pub header_timeout: Duration,
    /// For reading the whole body.
    pub body_timeout: Duration,
    /// For the whole fetch: every redirect hop and the body (a chain of slow hops must
    /// not hold the origin's requests for longer).
    pub total_timeout: Duration,
    /// Redirect hops followed before giving up (RFC 9309: at least 5).
    pub max_redirects: u8,
    /// Decoded body bytes read (RFC 9309: at least 500 KiB).
    pub max_body_bytes: usize,
}

impl Default for FetchConfig {
    fn default() -> Self {
        FetchConfig {
            user_agent: concat!("robotsgate/", env!("CARGO_PKG_VERSION")).into(),
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(20),
            total_timeout: Duration::from_secs(30),
            max_redirects: 5,
            max_body_bytes: MAX_ROBOTS_TXT_BYTES,
        }
    }
}

/// What a fetch of one origin's robots.txt gave.
#[derive(Debug, Clone)]
pub struct FetchOutcome {
    /// The robots.txt URL of the origin.
    pub url: String,
    /// The URL the last response came from (after redirects).
    pub final_url: String,
    /// Redirect hops followed.
    pub redirects: u8,
    /// The class of the result.
    pub result: FetchResult,
    /// The status of the response that decided the result: the 2xx, 4xx, 429 or 5xx, or
    /// the 3xx of a redirect that ended the fetch (one too many, or no usable
    /// `Location`). `None` when no response decided it: no connection, no head in time, a
    /// body that did not arrive whole, a redirect to where no request can go.
    pub status: Option<u16>,
    /// The decoded body (at most `max_body_bytes`); empty unless `Success`.
    pub body: Bytes,
    /// The body went on past `max_body_bytes` (the rest was ignored): `body` is the
    /// beginning of a longer file, to be read with
    /// [`RobotsTxt::parse_truncated`](crate::rep::RobotsTxt::parse_truncated) (its last
    /// line may have been cut).
    pub truncated: bool,
    /// SHA-256 of `body`, when a 2xx body was read.
    pub sha256: Option<[u8; 32]>,
    /// Wall-clock time the fetch started.
    pub fetched_at: SystemTime,
    /// How long the fetch took.
    pub duration: Duration,
    /// `Cache-Control: max-age` (`no-cache`/`no-store`: zero) of the last response.
    pub max_age: Option<Duration>,
    /// `Retry-After` of a 429 or 503 answer.
    pub retry_after: Option<Duration>,
}

/// The class of a fetch result (see the [module docs](self)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FetchResult {
    /// A 2xx response: its body holds the rules.
    Success {
        /// The status code.
        status: u16,
    },
    /// A 4xx response other than 429: no rules (allow all).
    Unavailable {
        /// The status code.
        status: u16,
    },
    /// More redirects than allowed: treated as unavailable (allow all).
    TooManyRedirects,
    /// Server or network error: the rules are unknown (disallow all).
    Unreachable(Unreachable),
}

/// Why a robots.txt was unreachable.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unreachable {
    /// 429, 5xx or a status RFC 9309 does not define.
    #[error("HTTP status {0}")]
    Status(u16),
    /// No connection (DNS, refused, reset, TLS, guard, connect timeout).
    #[error("{0}")]
    Connect(ConnectError),
    /// No response headers within the header timeout.
    #[error("no response headers within {0:?}")]
    HeaderTimeout(Duration),
    /// The body did not arrive within the body timeout.
    #[error("body not received within {0:?}")]
    BodyTimeout(Duration),
    /// The whole fetch (redirects and body) took longer than the total timeout.
    #[error("robots.txt not fetched within {0:?} (redirects and body together)")]
    TotalTimeout(Duration),
    /// Invalid HTTP or a connection that broke mid-response.
    #[error("invalid or interrupted response: {0}")]
    Protocol(String),
    /// A body that could not be decoded.
    #[error("cannot decode the body: {0}")]
    Decode(String),
    /// A redirect without a usable `Location`.
    #[error("bad redirect: {0}")]
    BadRedirect(String),
}

impl Unreachable {
    /// A short stable name of the failure class, for logs, metrics and the audit log.
    pub fn class(&self) -> &'static str {
        match self {
            Unreachable::Status(429) => "status_429",
            Unreachable::Status(s) if (500..600).contains(s) => "status_5xx",
            Unreachable::Status(_) => "status_other",
            Unreachable::Connect(e) => e.class(),
            Unreachable::HeaderTimeout(_) => "header_timeout",
            Unreachable::BodyTimeout(_) => "body_timeout",
            Unreachable::TotalTimeout(_) => "total_timeout",
            Unreachable::Protocol(_) => "protocol",
            Unreachable::Decode(_) => "decode",
            Unreachable::BadRedirect(_) => "bad_redirect",
        }
    }
}

/// Signs the requests of a fetch ([`Fetcher::with_signer`]): Web Bot Auth's
/// [`RequestSigner`](crate::identity::httpsig::RequestSigner) is one.
pub trait SignFetch: Send + Sync + std::fmt::Debug {
    /// Signs the request about to be sent; an error sends it unsigned.
    fn sign_fetch(
        &self,
        parts: &mut http::request::Parts,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

/// Fetches robots.txt files over keep-alive connections from a [`Pool`] (shared with the
/// requests that follow, when the caller gives it one: [`Fetcher::with_pool`]), or through
/// a client of the caller's ([`Fetcher::with_service`]).
#[derive(Clone, Debug)]
pub struct Fetcher {
    via: Via,
    config: FetchConfig,
    /// Signs each request of a fetch (Web Bot Auth), when set.
    signer: Option<std::sync::Arc<dyn SignFetch>>,
}

/// Where a fetcher's requests go.
#[derive(Clone, Debug)]
enum Via {
    Pool(Pool),
    Service(FetchService),
}

impl Fetcher {
    /// A fetcher connecting through `connector`, with a pool of its own.
    pub fn new(connector: Connector, config: FetchConfig) -> Fetcher {
        Fetcher::with_pool(Pool::new(connector, PoolConfig::default()), config)
    }

    /// A fetcher sending through `pool`: the connection a fetch used goes back to it, for
    /// the requests to that origin that follow.
    pub fn with_pool(pool: Pool, config: FetchConfig) -> Fetcher {
        Fetcher { via: Via::Pool(pool), config, signer: None }
    }

    /// A fetcher sending its requests through `service`: your own HTTP client (a
    /// hyper-util `Client`, a tower stack, an adapter around another client), so that its
    /// DNS (`.resolve()` overrides), proxies, TLS roots and connection pool serve the
    /// robots.txt fetches too. robotsgate makes no connection of its own then, and its
    /// destination guard does not apply: your client decides where connections go.
    ///
    /// Everything else is as with the built-in transport, on the same code path: the
    /// status classes of the [module docs](self), redirects followed by the fetcher (up
    /// to [`FetchConfig::max_redirects`]: the service must not follow them itself, or the
    /// hops are neither counted nor seen), the body decoded and read up to
    /// [`FetchConfig::max_body_bytes`] (then dropped, so the rest is never read), the
    /// header, body and total timeouts (waiting for the service to be ready counts in the
    /// header timeout), and the facts recorded (SHA-256, final URL, caching).
    ///
    /// The service gets `GET` requests with an absolute URI, the `User-Agent`, `Accept`
    /// and `Accept-Encoding` (`gzip, deflate, br`, no `br` without the feature `brotli`: the fetcher decodes; a client that
    /// decodes itself removes `Content-Encoding` and that is fine too), and a body of
    /// `ReqB::default()` (empty for `Empty<Bytes>`, `Full<Bytes>`, `String`...). Its
    /// response body may be any `http_body::Body` whose errors convert into a boxed
    /// error. A failing service is an unreachable robots.txt ([`Unreachable::Connect`]
    /// when the error is robotsgate's own [`ConnectError`], as when your client uses
    /// [`Robots::connector`](crate::Robots::connector); else [`Unreachable::Protocol`]
    /// with the client's message).
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// use bytes::Bytes;
    /// use http_body_util::Empty;
    /// use hyper_util::client::legacy::Client;
    /// use hyper_util::rt::TokioExecutor;
    /// use robotsgate::fetch::{FetchConfig, Fetcher};
    ///
    /// let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    /// let fetcher = Fetcher::with_service(client, FetchConfig::default());
    /// assert!(fetcher.pool().is_none());
    /// # Ok(())
    /// # }
    /// ```
    pub fn with_service<S, ReqB, ResB>(service: S, config: FetchConfig) -> Fetcher
    where
        S: tower::Service<Request<ReqB>, Response = http::Response<ResB>> + Clone + Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        S::Future: Send + 'static,
        ReqB: Default + Send + 'static,
        ResB: hyper::body::Body + Send + 'static,
        ResB::Data: Send,
        ResB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        Fetcher::with_fetch_service(FetchService::new(service), config)
    }

    /// [`Fetcher::with_service`] with the service already boxed.
    pub(crate) fn with_fetch_service(service: FetchService, config: FetchConfig) -> Fetcher {
        Fetcher { via: Via::Service(service), config, signer: None }
    }

    /// Signs every request of a fetch (each redirect hop too) with `signer`: a site that
    /// wants verified bots sees the fetch of its robots.txt signed like the requests that
    /// follow.
    pub fn with_signer(mut self, signer: std::sync::Arc<dyn SignFetch>) -> Fetcher {
        self.signer = Some(signer);
        self
    }

    /// The pool it fetches through, unless it fetches through a service.
    pub fn pool(&self) -> Option<&Pool> {
        match &self.via {
            Via::Pool(pool) => Some(pool),
            Via::Service(_) => None,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &FetchConfig {
        &self.config
    }

    /// Fetches `origin`'s robots.txt. Never fails: every failure is an outcome. Takes at
    /// most [`FetchConfig::total_timeout`].
    pub async fn fetch(&self, origin: &Origin) -> FetchOutcome {
        let started = Instant::now();
        let url = origin.robots_url();
        let mut outcome = FetchOutcome {
            final_url: url.clone(),
            url,
            redirects: 0,
            result: FetchResult::Unreachable(Unreachable::Protocol("not fetched".into())),
            status: None,
            body: Bytes::new(),
            truncated: false,
            sha256: None,
            fetched_at: SystemTime::now(),
            duration: Duration::ZERO,
            max_age: None,
            retry_after: None,
        };
        let total = self.config.total_timeout;
        outcome.result = match tokio::time::timeout(total, self.run(&mut outcome)).await {
            Ok(result) => result,
            Err(_) => {
                // What the last hop had read is not a robots.txt.
                outcome.body = Bytes::new();
                outcome.sha256 = None;
                outcome.truncated = false;
                outcome.status = None;
                FetchResult::Unreachable(Unreachable::TotalTimeout(total))
            }
        };
        outcome.duration = started.elapsed();
        outcome
    }

    async fn run(&self, out: &mut FetchOutcome) -> FetchResult {
        loop {
            let uri: http::Uri = match out.final_url.parse() {
                Ok(u) => u,
                Err(e) => {
                    return FetchResult::Unreachable(Unreachable::BadRedirect(format!(
                        "{}: {e}",
                        out.final_url
                    )));
                }
            };
            let req = Request::get(uri)
                .header(USER_AGENT, &self.config.user_agent)
                .header(ACCEPT, "text/plain, */*;q=0.5")
                .header(ACCEPT_ENCODING, client::ACCEPT_ENCODING)
                .body(());
            let mut req = match req {
                Ok(r) => r,
                Err(e) => return FetchResult::Unreachable(Unreachable::Protocol(e.to_string())),
            };
            if let Some(signer) = &self.signer {
                let (mut parts, body) = req.into_parts();
                // Not signable (no authority, no randomness): sent unsigned, as the layer does.
                if let Err(e) = signer.sign_fetch(&mut parts) {
                    tracing::warn!(error = %e, "robots.txt fetch not signed");
                }
                req = Request::from_parts(parts, body);
            }
            let response = match tokio::time::timeout(self.config.header_timeout, self.send(req)).await {
                Err(_) => {
                    return FetchResult::Unreachable(Unreachable::HeaderTimeout(self.config.header_timeout));
                }
                Ok(Err(e)) => return FetchResult::Unreachable(e),
                Ok(Ok(r)) => r,
            };
            let status = response.status();
            out.status = Some(status.as_u16());
            out.max_age = max_age(response.headers());
            if status.is_redirection() {
                let Some(next) = redirect_target(&out.final_url, response.headers(), status) else {
                    let why = format!("{} without a usable Location", status.as_u16());
                    return FetchResult::Unreachable(Unreachable::BadRedirect(why));
                };
                if out.redirects >= self.config.max_redirects {
                    return FetchResult::TooManyRedirects;
                }
                out.redirects += 1;
                out.final_url = next;
                out.status = None;
                self.drain(response);
                continue;
            }
            let code = status.as_u16();
            if status.is_success() {
                return match self.read_body(response).await {
                    Ok((body, truncated)) => {
                        out.sha256 = Some(crate::digest::sha256(&body));
                        out.body = body;
                        out.truncated = truncated;
                        FetchResult::Success { status: code }
                    }
                    Err(e) => {
                        out.status = None;
                        FetchResult::Unreachable(e)
                    }
                };
            }
            if status == StatusCode::TOO_MANY_REQUESTS || status == StatusCode::SERVICE_UNAVAILABLE {
                out.retry_after = retry_after(response.headers());
            }
            self.drain(response);
            if status.is_client_error() && status != StatusCode::TOO_MANY_REQUESTS {
                return FetchResult::Unavailable { status: code };
            }
            return FetchResult::Unreachable(Unreachable::Status(code));
        }
    }

    /// Sends one request, through the pool or the service.
    async fn send(&self, req: Request<()>) -> Result<http::Response<FetchBody>, Unreachable> {
        match &self.via {
            Via::Pool(pool) => match pool.send(req.map(|()| Either::Right(Empty::new()))).await {
                Ok(res) => Ok(res.map(|body| body.map_err(BoxError::from).boxed_unsync())),
                Err(e) => Err(client_error(&e)),
            },
            Via::Service(service) => service.send(req).await,
        }
    }

    /// Reads a body that is not a robots.txt (a redirect's, a 404 page) to its end in the
    /// background when it is short, so that its connection goes back to the pool for the
    /// requests that follow; a longer or slower one (16 KiB, 1 s) is dropped, closing the
    /// connection. The fetch does not wait for it.
    fn drain(&self, response: http::Response<FetchBody>) {
        const DRAINED: u64 = 16 * 1024;
        let mut body = response.into_body();
        if hyper::body::Body::is_end_stream(&body)
            || hyper::body::Body::size_hint(&body).lower() > DRAINED
            || tokio::runtime::Handle::try_current().is_err()
        {
            return;
        }
        tokio::spawn(tokio::time::timeout(Duration::from_secs(1), async move {
            let mut read = 0u64;
            while let Some(Ok(frame)) = body.frame().await {
                read += frame.data_ref().map_or(0, |d| d.len() as u64);
                if read > DRAINED {
                    break;
                }
            }
        }));
    }

    /// Reads and decodes the body, at most `max_body_bytes` of it.
    async fn read_body(&self, response: http::Response<FetchBody>) -> Result<(Bytes, bool), Unreachable> {
        read_decoded_body(response, self.config.max_body_bytes, self.config.body_timeout).await
    }
}

/// Reads a response body, decoded (`gzip`, `deflate`, `br`), at most `limit` bytes of it
/// (the flag says it went on past them), within `timeout`.
pub(crate) async fn read_decoded_body<B>(
    response: http::Response<B>,
    limit: usize,
    timeout: Duration,
) -> Result<(Bytes, bool), Unreachable>
where
    B: hyper::body::Body + Send + 'static,
    B::Data: Send,
    B::Error: Into<BoxError>,
{
    client::read_body(response, limit, timeout).await.map_err(|e| match e {
        BodyError::Timeout => Unreachable::BodyTimeout(timeout),
        // The pool gave up on its silence first (`PoolConfig::read_timeout`).
        BodyError::Stalled(silent) => Unreachable::BodyTimeout(silent),
        BodyError::Transport(why) => Unreachable::Protocol(why),
        BodyError::Decode(why) => Unreachable::Decode(why),
    })
}

/// The next URL of a redirect: `Location` resolved against the current URL, http(s) only.
pub(crate) fn redirect_target(current: &str, headers: &HeaderMap, status: StatusCode) -> Option<String> {
    if !matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308) {
        return None;
    }
    let location = headers.get(LOCATION)?.to_str().ok()?;
    let next = url::Url::parse(current).ok()?.join(location.trim()).ok()?;
    matches!(next.scheme(), "http" | "https").then(|| next.to_string())
}

/// `max-age` (or `s-maxage`, which a shared cache like this one prefers) of a
/// `Cache-Control` header; `no-cache` and `no-store` count as zero.
pub(crate) fn max_age(headers: &HeaderMap) -> Option<Duration> {
    let mut max_age = None;
    let mut shared = None;
    for value in headers.get_all(CACHE_CONTROL) {
        let Ok(value) = value.to_str() else { continue };
        for directive in value.split(',') {
            let directive = directive.trim();
            let (name, arg) = match directive.split_once('=') {
                Some((n, a)) => (n.trim(), Some(a.trim().trim_matches('"'))),
                None => (directive, None),
            };
            let secs = || arg.and_then(|a| a.parse::<u64>().ok()).map(Duration::from_secs);
            match name.to_ascii_lowercase().as_str() {
                "no-store" | "no-cache" => return Some(Duration::ZERO),
                "max-age" => max_age = max_age.or_else(secs),
                "s-maxage" => shared = shared.or_else(secs),
                _ => {}
            }
        }
    }
    shared.or(max_age)
}

/// `Retry-After` in seconds or as an HTTP date.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let value = headers.get(RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = value.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(value).ok()?;
    Some(when.duration_since(SystemTime::now()).unwrap_or(Duration::ZERO))
}

/// Classifies an error of the pool.
pub(crate) fn client_error(e: &PoolError) -> Unreachable {
    match e {
        PoolError::Connect(c) => Unreachable::Connect(c.clone()),
        PoolError::BadTarget { .. } => Unreachable::BadRedirect(e.to_string()),
        _ => Unreachable::Protocol(error_chain(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn cache_control() {
        assert_eq!(
            max_age(&headers(&[("cache-control", "public, max-age=600")])),
            Some(Duration::from_secs(600))
        );
        assert_eq!(
            max_age(&headers(&[("cache-control", "max-age=600, s-maxage=60")])),
            Some(Duration::from_secs(60))
        );
        assert_eq!(max_age(&headers(&[("cache-control", "no-cache")])), Some(Duration::ZERO));
        assert_eq!(max_age(&headers(&[("cache-control", "max-age=abc")])), None);
        assert_eq!(max_age(&headers(&[])), None);
    }

    #[test]
    fn redirects() {
        let h = headers(&[("location", "/other/robots.txt")]);
        assert_eq!(
            redirect_target("http://a.test/robots.txt", &h, StatusCode::MOVED_PERMANENTLY).as_deref(),
            Some("http://a.test/other/robots.txt")
        );
        let h = headers(&[("location", "https://b.test:8443/robots.txt")]);
        assert_eq!(
            redirect_target("http://a.test/robots.txt", &h, StatusCode::FOUND).as_deref(),
            Some("https://b.test:8443/robots.txt")
        );
        let h = headers(&[("location", "ftp://b.test/robots.txt")]);
        assert_eq!(redirect_target("http://a.test/robots.txt", &h, StatusCode::FOUND), None);
        assert_eq!(redirect_target("http://a.test/robots.txt", &headers(&[]), StatusCode::FOUND), None);
        let h = headers(&[("location", "/x")]);
        assert_eq!(redirect_target("http://a.test/robots.txt", &h, StatusCode::NOT_MODIFIED), None);
    }

    #[test]
    fn retry_after_forms() {
        assert_eq!(retry_after(&headers(&[("retry-after", "120")])), Some(Duration::from_secs(120)));
        let past = httpdate::fmt_http_date(SystemTime::now() - Duration::from_secs(60));
        assert_eq!(retry_after(&headers(&[("retry-after", &past)])), Some(Duration::ZERO));
        assert_eq!(retry_after(&headers(&[("retry-after", "soon")])), None);
    }
}
