//! `RobotsLayer`: a tower middleware that lets a request through only when the target's
//! robots.txt allows it for the crawler's product token. Most embedders get one from
//! [`Robots::layer`](crate::Robots::layer); this module is the machinery.
//!
//! The target comes from an absolute-form URI (`GET http://example.com/x`), else from the
//! `Host` header and a configured scheme, or from the authority of a `CONNECT` (a
//! host-level check: "is `/` allowed?", logged with `path_visible: false`).
//!
//! What the service returns:
//! - **Allowed**: the inner service's response, with the [`Decision`] in its extensions.
//! - **Refused** (robots.txt disallows the path, the destination is refused by the guard,
//!   no product token, a bad request, the audit log failing closed): robotsgate's own
//!   answer (`403`, `400` or `503`) with `x-robotsgate: <kind>`, a short `text/plain` body,
//!   and the [`Refusal`] (with its [`Decision`]) in the response extensions; the inner
//!   service is **not** called. [`Refusal::from_response`] tells it from the origin's.
//! - **The origin cannot be reached** (DNS, refused connection, certificate, timeout):
//!   `Err`, whether the robots.txt fetch found it out (the error is a [`Refusal`] of kind
//!   `upstream-unreachable` or `upstream-timeout`, with its [`Decision`]: robots.txt
//!   unreachable means "disallow all") or the request itself did (the inner service's
//!   error). One outage, one behaviour.
//! - Report-only ([`RobotsLayer::report_only`]): decide and log, never block.
//!
//! Every decision goes to the audit log, if one is set.
//!
//! # Example
//! ```no_run
//! # async fn demo(policy: robotsgate::policy::RobotsPolicy) {
//! use bytes::Bytes;
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use robotsgate::layer::RobotsLayer;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//! let mut svc = ServiceBuilder::new().layer(RobotsLayer::new(policy, "ExampleBot")).service(client);
//! let req = http::Request::get("http://example.com/private/x").body(Empty::new()).unwrap();
//! match svc.ready().await.unwrap().call(req).await {
//!     Ok(res) => match robotsgate::Refusal::from_response(&res) {
//!         Some(refusal) => println!("robotsgate said no: {refusal}"),
//!         None => println!("the origin answered {}", res.status()),
//!     },
//!     Err(e) => println!("not sent: {e}"),
//! }
//! # }
//! ```

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::SystemTime;

use bytes::Bytes;
use http::header::{HOST, USER_AGENT};
use http::{HeaderName, HeaderValue, Method, Request, Response};
use http_body_util::{Either, Full};
use tokio::time::Instant;
use tower::{Layer, Service};

use arc_swap::ArcSwap;

use crate::audit::{AuditLog, RequestFacts};
use crate::fetch::Unreachable;
use crate::net::{ConnectError, Connector};
use crate::origin::{Origin, Scheme, request_path};
use crate::policy::{Decision, Reason, RobotsPolicy};
use crate::refusal::{Refusal, RefusalKind};
use crate::rep::is_valid_product_token;

/// The client's address, put into the request extensions by the proxy (for the log).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// The authenticated proxy user, put into the request extensions by the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyUser(pub Arc<str>);

/// The error of a [`RobotsService`]: the inner service's, or a [`Refusal`] for an
/// origin that cannot be reached.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The response body: the inner service's, or robotsgate's own.
pub type RobotsBody<B> = Either<B, Full<Bytes>>;

/// Why no product token could be chosen for a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The request does not say which crawler it is for.
    #[error("no product token for this request: {0}")]
    Missing(String),
    /// The token given is not an RFC 9309 product token.
    #[error("invalid product token {0:?} (letters, '-' and '_' only)")]
    Invalid(String),
}

/// Chooses the product token a request is checked for. It may also change the request
/// (e.g. remove a header that carried the token, before the request is forwarded).
pub trait SelectToken: Send + Sync + 'static {
    /// The token for this request.
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError>;
}

impl<F> SelectToken for F
where
    F: Fn(&mut http::request::Parts) -> Result<Arc<str>, TokenError> + Send + Sync + 'static,
{
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError> {
        self(parts)
    }
}

/// The built-in ways to choose a product token.
#[derive(Debug, Clone)]
pub enum TokenSelector {
    /// Always the same token.
    Fixed(Arc<str>),
    /// By the authenticated proxy user: a per-user token, else the default.
    ProxyUser {
        /// user → token
        users: HashMap<String, Arc<str>>,
        /// For users not listed (none: such requests are refused).
        default: Option<Arc<str>>,
    },
    /// From a request header, which is removed before forwarding.
    Header {
        /// The header.
        name: HeaderName,
        /// When the header is absent (none: such requests are refused).
        default: Option<Arc<str>>,
    },
    /// By the request's `User-Agent`: the first rule whose text it contains.
    UserAgent {
        /// (substring, token), in order.
        rules: Vec<(String, Arc<str>)>,
        /// When no rule matches (none: such requests are refused).
        default: Option<Arc<str>>,
    },
}

impl SelectToken for TokenSelector {
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError> {
        let or_default = |d: &Option<Arc<str>>, why: String| d.clone().ok_or(TokenError::Missing(why));
        match self {
            TokenSelector::Fixed(t) => Ok(t.clone()),
            TokenSelector::ProxyUser { users, default } => match parts.extensions.get::<ProxyUser>() {
                Some(u) => match users.get(&*u.0) {
                    Some(t) => Ok(t.clone()),
                    None => or_default(default, format!("proxy user {:?} has no product token", u.0)),
                },
                None => or_default(default, "no proxy user".into()),
            },
            TokenSelector::Header { name, default } => match parts.headers.remove(name) {
                Some(v) => {
                    let t = v
                        .to_str()
                        .map_err(|_| TokenError::Invalid(String::from_utf8_lossy(v.as_bytes()).into()))?;
                    let t = t.trim();
                    if !is_valid_product_token(t) {
                        return Err(TokenError::Invalid(t.to_owned()));
                    }
                    Ok(t.into())
                }
                None => or_default(default, format!("no {name} header")),
            },
            TokenSelector::UserAgent { rules, default } => {
                let ua = parts.headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
                match rules.iter().find(|(needle, _)| ua.contains(needle.as_str())) {
                    Some((_, t)) => Ok(t.clone()),
                    None => or_default(default, format!("no product token for User-Agent {ua:?}")),
                }
            }
        }
    }
}

/// Sees every decision the layer makes, e.g. to count them (the proxy's metrics do).
pub trait DecisionObserver: Send + Sync + 'static {
    /// A decision: its `outcome` (`allowed`, `disallowed`, `would-disallow` or
    /// `destination-denied`), the reason class ([`Reason::class`]) and how long deciding
    /// took.
    fn decision(&self, outcome: &'static str, reason: &'static str, took: std::time::Duration);
    /// A request refused before any decision (`class`: e.g. `no-token`).
    fn refused(&self, class: &'static str);
}

/// Enforce or only report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Disallowed requests are answered with 403.
    #[default]
    Enforce,
    /// Decide and log; let everything through.
    ReportOnly,
    /// No decisions and no audit records: every request goes to the inner service
    /// untouched (an emergency switch, and robotsgate's own pass-through ceiling in
    /// benchmarks).
    Off,
}

/// Applies [`RobotsService`] to a service.
#[derive(Clone)]
pub struct RobotsLayer {
    shared: Arc<Shared>,
}

struct Shared {
    policy: RobotsPolicy,
    /// The token selector and the mode, replaced whole on reload.
    settings: ArcSwap<Settings>,
    scheme: Scheme,
    audit: Option<AuditLog>,
    admission: Option<Connector>,
    observer: Option<Arc<dyn DecisionObserver>>,
    /// Set on requests that have no `User-Agent` of their own.
    user_agent: Option<HeaderValue>,
    ids: RequestIds,
}

/// What [`RobotsLayer::reload`] can change while running.
#[derive(Clone)]
pub struct Settings {
    /// Chooses the product token per request.
    pub selector: Arc<dyn SelectToken>,
    /// Enforce or report only.
    pub mode: Mode,
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings").field("mode", &self.mode).finish_non_exhaustive()
    }
}

impl fmt::Debug for RobotsLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsLayer")
            .field("mode", &self.shared.settings.load().mode)
            .field("scheme", &self.shared.scheme)
            .field("audit", &self.shared.audit.is_some())
            .finish_non_exhaustive()
    }
}

impl RobotsLayer {
    /// A layer checking every request for the fixed product `token`.
    pub fn new(policy: RobotsPolicy, token: impl Into<Arc<str>>) -> RobotsLayer {
        RobotsLayer {
            shared: Arc::new(Shared {
                policy,
                settings: ArcSwap::from_pointee(Settings {
                    selector: Arc::new(TokenSelector::Fixed(token.into())),
                    mode: Mode::Enforce,
                }),
                scheme: Scheme::Http,
                audit: None,
                admission: None,
                observer: None,
                user_agent: None,
                ids: RequestIds::new(),
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Shared)) -> RobotsLayer {
        match Arc::get_mut(&mut self.shared) {
            Some(s) => f(s),
            None => {
                let s = &*self.shared;
                let mut copy = Shared {
                    policy: s.policy.clone(),
                    settings: ArcSwap::new(s.settings.load_full()),
                    scheme: s.scheme,
                    audit: s.audit.clone(),
                    admission: s.admission.clone(),
                    observer: s.observer.clone(),
                    user_agent: s.user_agent.clone(),
                    ids: RequestIds::new(),
                };
                f(&mut copy);
                self.shared = Arc::new(copy);
            }
        }
        self
    }

    /// Chooses the product token per request.
    pub fn with_selector(self, selector: impl SelectToken) -> RobotsLayer {
        let selector: Arc<dyn SelectToken> = Arc::new(selector);
        self.edit(|s| s.settings.store(Arc::new(Settings { selector, mode: s.settings.load().mode })))
    }

    /// Enforce (default) or report only.
    pub fn with_mode(self, mode: Mode) -> RobotsLayer {
        self.edit(|s| {
            s.settings.store(Arc::new(Settings { selector: s.settings.load().selector.clone(), mode }))
        })
    }

    /// Refuses requests whose destination the connector's guard refuses, before any robots
    /// decision (no robots.txt is fetched for them): `403`, logged with the outcome
    /// `destination-denied`.
    pub fn with_admission(self, connector: Connector) -> RobotsLayer {
        self.edit(|s| s.admission = Some(connector))
    }

    /// Tells `observer` about every decision (the proxy counts them in its metrics).
    pub fn with_observer(self, observer: Arc<dyn DecisionObserver>) -> RobotsLayer {
        self.edit(|s| s.observer = Some(observer))
    }

    /// Replaces the token selector and the mode of this layer and every service made from
    /// it, for requests that start from now on.
    pub fn reload(&self, settings: Settings) {
        self.shared.settings.store(Arc::new(settings));
    }

    /// Decide and log, never block.
    pub fn report_only(self) -> RobotsLayer {
        self.with_mode(Mode::ReportOnly)
    }

    /// The scheme of requests in origin form (`GET /x` with a `Host` header); http by
    /// default.
    pub fn with_scheme(self, scheme: Scheme) -> RobotsLayer {
        self.edit(|s| s.scheme = scheme)
    }

    /// Writes every decision to `audit`.
    pub fn with_audit(self, audit: AuditLog) -> RobotsLayer {
        self.edit(|s| s.audit = Some(audit))
    }

    /// Sets this `User-Agent` on forwarded requests that have none (the crawler's
    /// identity; a request's own `User-Agent` is kept).
    pub fn with_user_agent(self, user_agent: HeaderValue) -> RobotsLayer {
        self.edit(|s| s.user_agent = Some(user_agent))
    }

    /// Decides one request without sending it: `Ok` with the decision when it may go
    /// (in report-only mode, always), else the [`Refusal`]. The request's parts may be
    /// changed as they are before forwarding (a token selector may remove the header that
    /// carried the token; the `User-Agent` is set when absent). The decision is audited
    /// as for a request through the layer.
    pub async fn decide(&self, parts: &mut http::request::Parts) -> Result<Decision, Refusal> {
        let decision = self.shared.check(parts).await?;
        self.shared.identify(parts);
        Ok(decision)
    }
}

impl<S> Layer<S> for RobotsLayer {
    type Service = RobotsService<S>;

    fn layer(&self, inner: S) -> RobotsService<S> {
        RobotsService { inner, shared: self.shared.clone() }
    }
}

/// Checks each request against robots.txt before passing it on. See the [module
/// docs](self).
#[derive(Clone)]
pub struct RobotsService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S: fmt::Debug> fmt::Debug for RobotsService<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsService").field("inner", &self.inner).finish_non_exhaustive()
    }
}

/// The response future of [`RobotsService`].
pub struct ResponseFuture<T, E> {
    inner: Pin<Box<dyn Future<Output = Result<T, E>> + Send>>,
}

impl<T, E> Future for ResponseFuture<T, E> {
    type Output = Result<T, E>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<T, E> fmt::Debug for ResponseFuture<T, E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<S, B, ResBody> Service<Request<B>> for RobotsService<S>
where
    S: Service<Request<B>, Response = Response<ResBody>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Into<BoxError>,
    B: Send + 'static,
    ResBody: Send + 'static,
{
    type Response = Response<RobotsBody<ResBody>>;
    type Error = BoxError;
    type Future = ResponseFuture<Self::Response, BoxError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        // The clone is not ready; the instance that was polled ready serves this call.
        let clone = self.inner.clone();
        let mut inner = std::mem::replace(&mut self.inner, clone);
        let shared = self.shared.clone();
        if shared.settings.load().mode == Mode::Off {
            return ResponseFuture {
                inner: Box::pin(
                    async move { Ok(inner.call(req).await.map_err(Into::into)?.map(Either::Left)) },
                ),
            };
        }
        ResponseFuture {
            inner: Box::pin(async move {
                let (mut parts, body) = req.into_parts();
                let head = parts.method == Method::HEAD;
                match shared.check(&mut parts).await {
                    Ok(decision) => {
                        shared.identify(&mut parts);
                        let mut res =
                            inner.call(Request::from_parts(parts, body)).await.map_err(Into::into)?;
                        res.extensions_mut().insert(decision);
                        Ok(res.map(Either::Left))
                    }
                    Err(refusal) if refusal.is_outage() => Err(refusal.into()),
                    Err(refusal) => Ok(refusal.into_response(head).map(Either::Right)),
                }
            }),
        }
    }
}

/// Where a request goes, as the layer sees it.
struct Target {
    origin: Origin,
    path: String,
    path_visible: bool,
    url: String,
}

impl Shared {
    /// Decides a request: `Ok` with the decision to forward it, `Err` with the refusal.
    async fn check(&self, parts: &mut http::request::Parts) -> Result<Decision, Refusal> {
        let started = Instant::now();
        let target = self.target(parts).map_err(|why| Refusal::new(RefusalKind::BadRequest, why))?;
        if let Some(audit) = &self.audit
            && let Err(e) = audit.accepting()
        {
            return Err(Refusal::new(RefusalKind::AuditUnavailable, e.to_string()));
        }
        let settings = self.settings.load_full();
        let token = settings.selector.select(parts).map_err(|e| {
            if let Some(o) = &self.observer {
                o.refused("no-token");
            }
            Refusal::new(RefusalKind::NoToken, e.to_string())
        })?;
        let report_only = settings.mode == Mode::ReportOnly;
        let denied = match &self.admission {
            Some(connector) => match connector.check_admitted(&target.origin).await {
                Err(e @ ConnectError::Denied { .. }) => Some(e),
                _ => None,
            },
            None => None,
        };
        let decision = match denied {
            Some(cause) => Decision {
                allowed: false,
                origin: Arc::new(target.origin.clone()),
                agent: token,
                profile: self.policy.config().profile,
                reason: Reason::DestinationDenied { cause },
                robots: None,
                failure: None,
                age: None,
                stale: false,
            },
            None => self.policy.decide(&target.origin, &target.path, token).await,
        };
        let elapsed = started.elapsed();
        if let Some(o) = &self.observer {
            let outcome = match (&decision.reason, decision.allowed, report_only) {
                (Reason::DestinationDenied { .. }, _, _) => "destination-denied",
                (_, true, _) => "allowed",
                (_, false, false) => "disallowed",
                (_, false, true) => "would-disallow",
            };
            o.decision(outcome, decision.reason.class(), elapsed);
        }
        if let Some(audit) = &self.audit {
            let id = self.ids.next();
            let user = parts.extensions.get::<ProxyUser>().map(|u| u.0.clone());
            let facts = RequestFacts {
                request_id: id.as_str(),
                client: parts.extensions.get::<ClientAddr>().map(|c| c.0),
                user: user.as_deref(),
                method: parts.method.as_str(),
                url: &target.url,
                path_visible: target.path_visible,
                report_only,
                elapsed,
            };
            if let Err(e) = audit.log_decision(&decision, facts).await {
                return Err(Refusal::new(RefusalKind::AuditUnavailable, e.to_string()));
            }
        }
        if let Reason::DestinationDenied { cause } = &decision.reason {
            let refusal = Refusal::new(RefusalKind::of_connect_error(cause), cause.to_string());
            return Err(refusal.with_decision(decision));
        }
        if decision.allowed || report_only {
            return Ok(decision);
        }
        // robots.txt could not be fetched because the origin itself cannot be reached
        // (DNS, refused, certificate, guard): say that, as the request would fail too.
        if let Reason::Unreachable { cause: Unreachable::Connect(e) } = &decision.reason {
            let refusal = Refusal::new(RefusalKind::of_connect_error(e), e.to_string());
            return Err(refusal.with_decision(decision));
        }
        let text = format!(
            "request disallowed by robots.txt\nURL: {}\nProduct token: {}\nDecided by: {}\nrobots.txt: {}\n",
            target.url,
            decision.agent,
            decision,
            decision.origin.robots_url(),
        );
        Err(Refusal::new(RefusalKind::Disallowed, text).with_decision(decision))
    }

    /// Sets the crawler's `User-Agent` on a request that has none.
    fn identify(&self, parts: &mut http::request::Parts) {
        if let Some(ua) = &self.user_agent
            && !parts.headers.contains_key(USER_AGENT)
        {
            parts.headers.insert(USER_AGENT, ua.clone());
        }
    }

    fn target(&self, parts: &http::request::Parts) -> Result<Target, String> {
        let uri = &parts.uri;
        if parts.method == Method::CONNECT {
            let authority = uri.authority().ok_or("CONNECT needs host:port")?;
            let scheme = if authority.port_u16() == Some(80) { Scheme::Http } else { Scheme::Https };
            let origin = Origin::from_authority(scheme, authority.as_str()).map_err(|e| e.to_string())?;
            let mut url = String::with_capacity(48);
            let _ = origin.write_to(&mut url);
            url.push('/');
            return Ok(Target { origin, path: "/".into(), path_visible: false, url });
        }
        let origin = if uri.scheme().is_some() {
            Origin::from_uri(uri).map_err(|e| e.to_string())?
        } else {
            let host = parts
                .headers
                .get(HOST)
                .and_then(|h| h.to_str().ok())
                .ok_or("the request has neither an absolute URI nor a Host header")?;
            Origin::from_authority(self.scheme, host).map_err(|e| e.to_string())?
        };
        let path = request_path(uri).into_owned();
        let mut url = String::with_capacity(path.len() + 48);
        let _ = origin.write_to(&mut url);
        url.push_str(&path);
        Ok(Target { origin, path, path_visible: true, url })
    }
}

/// Request ids: unique within a process run, ordered, and unlikely to repeat across runs.
struct RequestIds {
    prefix: u64,
    next: AtomicU64,
}

impl RequestIds {
    fn new() -> RequestIds {
        let nanos =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        RequestIds { prefix: nanos ^ (std::process::id() as u64) << 48, next: AtomicU64::new(0) }
    }

    /// The next id, `{prefix:016x}-{counter:08x}`, written by hand on the stack: this runs
    /// for every request.
    fn next(&self) -> RequestId {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut id = RequestId { buf: [b'-'; 33], len: 0 };
        for i in 0..16 {
            id.buf[i] = DIGITS[((self.prefix >> (60 - 4 * i)) & 0xf) as usize];
        }
        let digits = ((64 - n.leading_zeros() as usize).div_ceil(4)).max(8);
        for i in 0..digits {
            id.buf[17 + i] = DIGITS[((n >> (4 * (digits - 1 - i))) & 0xf) as usize];
        }
        id.len = 17 + digits;
        id
    }
}

/// A request id without a heap allocation.
struct RequestId {
    buf: [u8; 33],
    len: usize,
}

impl RequestId {
    fn as_str(&self) -> &str {
        // Hex digits and a dash: always UTF-8.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_hex_prefix_and_counter() {
        let ids = RequestIds { prefix: 0x0123_4567_89ab_cdef, next: AtomicU64::new(0) };
        assert_eq!(ids.next().as_str(), "0123456789abcdef-00000000");
        assert_eq!(ids.next().as_str(), "0123456789abcdef-00000001");
        ids.next.store(0xfedc_ba98, Ordering::Relaxed);
        assert_eq!(ids.next().as_str(), "0123456789abcdef-fedcba98");
        ids.next.store(0x1_0000_0000, Ordering::Relaxed);
        assert_eq!(ids.next().as_str(), "0123456789abcdef-100000000");
        ids.next.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(ids.next().as_str(), "0123456789abcdef-ffffffffffffffff");
    }
}
