//! [`IngressService`]: the enforcement around the inner service.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::header::{CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER, USER_AGENT};
use http::uri::PathAndQuery;
use http::{HeaderValue, Method, Request, Response, StatusCode};
use hyper::body::Body;
use tower::{Service, ServiceExt as _};

use super::agents::{Found, MAX_USER_AGENT_BYTES};
use super::body::IngressBody;
use super::client::client_ip;
use super::identity_use::IdentityUse;
use super::judge::{Agent, Judgement, SiteRobots};
use super::source::{Fetched, READ_LIMIT, read_bounded};
use super::state::{RobotsFetch, bot_key};
use super::{Mode, PacedBot, Shared, UnknownAgents};
use crate::ROBOTSGATE_HEADER;
use crate::audit::{IngressRecordRef, SCHEMA_VERSION, Text};
use crate::identity::{Identity, Verdict, httpsig};
use crate::ids::RequestId;
use crate::vocabulary::{Outcome, ReasonClass};

/// The service [`IngressLayer`](super::IngressLayer) makes. See the
/// [module docs](super).
#[derive(Clone)]
pub struct IngressService<S> {
    inner: S,
    shared: Arc<Shared>,
}

impl<S> std::fmt::Debug for IngressService<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressService")
            .field("config", &self.shared.config.load_full())
            .finish_non_exhaustive()
    }
}

impl<S> IngressService<S> {
    pub(crate) fn new(inner: S, shared: Arc<Shared>) -> Self {
        IngressService { inner, shared }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }
}

type Answer<ResB, E> = Result<Response<IngressBody<ResB>>, E>;

/// The response future of [`IngressService`].
pub struct ResponseFuture<ResB, E> {
    inner: Pin<Box<dyn Future<Output = Answer<ResB, E>> + Send>>,
}

impl<ResB, E> std::fmt::Debug for ResponseFuture<ResB, E> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ResponseFuture")
    }
}

impl<ResB, E> Future for ResponseFuture<ResB, E> {
    type Output = Result<Response<IngressBody<ResB>>, E>;
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.inner.as_mut().poll(cx)
    }
}

impl<S, B, ResB> Service<Request<B>> for IngressService<S>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    S::Error: Send + 'static,
    B: Default + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
    ResB::Error: std::fmt::Display,
{
    type Response = Response<IngressBody<ResB>>;
    type Error = S::Error;
    type Future = ResponseFuture<ResB, S::Error>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        // The inner service is made ready in the future (it may be called twice: for
        // robots.txt, then for the request).
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        let inner = self.inner.clone();
        let shared = self.shared.clone();
        ResponseFuture { inner: Box::pin(handle(shared, inner, req)) }
    }
}

/// The `User-Agent` as looked at: its values joined, at most [`MAX_USER_AGENT_BYTES`].
fn user_agent(headers: &http::HeaderMap) -> String {
    let mut out = String::new();
    for v in headers.get_all(USER_AGENT) {
        if out.len() >= MAX_USER_AGENT_BYTES {
            break;
        }
        if !out.is_empty() {
            out.push(' ');
        }
        let bytes = &v.as_bytes()[..v.len().min(MAX_USER_AGENT_BYTES - out.len().min(MAX_USER_AGENT_BYTES))];
        // Checked whole first (word at a time over ASCII): the lossy reading goes byte by
        // byte, and almost every `User-Agent` is valid.
        match std::str::from_utf8(bytes) {
            Ok(text) => out.push_str(text),
            Err(_) => out.push_str(&String::from_utf8_lossy(bytes)),
        }
    }
    out
}

/// Redirects followed when fetching robots.txt (RFC 9309 §2.3.1.2: at least five).
const MAX_REDIRECTS: usize = 5;

/// Fetches `/robots.txt` through the inner service, with `host` (see
/// [`IngressConfig::robots_host`](super::IngressConfig::robots_host)), following up to
/// [`MAX_REDIRECTS`] redirects that stay on the site: a relative or path-absolute
/// `Location`, or an absolute one naming `host`. Another site's file cannot be fetched
/// through the inner service: such a redirect (or one too many) is an answer without a
/// file (allow all, RFC 9309's "unavailable"), and said.
async fn fetch_robots<S, B, ResB>(inner: S, host: Option<HeaderValue>, timeout: Duration) -> Fetched
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone,
    B: Default,
    ResB: Body<Data = Bytes>,
    ResB::Error: std::fmt::Display,
{
    // Owns the service: a borrow held across the awaits would need it `Sync`.
    let work = async move {
        let mut target = http::Uri::from_static("/robots.txt");
        let mut hops = 0;
        let res = loop {
            let mut req = Request::new(B::default());
            *req.uri_mut() = target.clone();
            if let Some(host) = &host {
                req.headers_mut().insert(http::header::HOST, host.clone());
            }
            req.headers_mut().insert(USER_AGENT, HeaderValue::from_static("robotsgate-ingress"));
            let res = match inner.clone().oneshot(req).await {
                Ok(res) => res,
                Err(_) => return Fetched::Failed("the site's service failed".into()),
            };
            if !res.status().is_redirection() || res.status() == StatusCode::NOT_MODIFIED {
                break res;
            }
            let location = res.headers().get(http::header::LOCATION);
            let next = location.and_then(|l| same_site(l, &target, host.as_ref()));
            let status = res.status().as_u16();
            match next {
                Some(next) if hops < MAX_REDIRECTS => {
                    hops += 1;
                    target = next;
                }
                next => {
                    let location = location
                        .map(|l| String::from_utf8_lossy(&l.as_bytes()[..l.len().min(200)]).into_owned());
                    let why = if next.is_some() {
                        "one redirect too many"
                    } else {
                        "not followed: not on this site"
                    };
                    tracing::warn!(
                        status,
                        location = location.as_deref().unwrap_or("(none)"),
                        after = hops,
                        "robots.txt redirects ({why}): no file, bots held to nothing; give the file with ingress.robots"
                    );
                    return Fetched::Answer { status, body: Bytes::new(), truncated: false };
                }
            }
        };
        let status = res.status().as_u16();
        if !(200..300).contains(&status) {
            return Fetched::Answer { status, body: Bytes::new(), truncated: false };
        }
        // None was asked for (no Accept-Encoding): an encoded body would be read as text,
        // as a file without rules.
        if let Some(encoding) = res.headers().get(CONTENT_ENCODING)
            && !encoding.as_bytes().trim_ascii().eq_ignore_ascii_case(b"identity")
        {
            return Fetched::Failed(format!(
                "the site's robots.txt came with content-encoding {:?}, which was not asked for",
                String::from_utf8_lossy(&encoding.as_bytes()[..encoding.len().min(40)])
            ));
        }
        match read_bounded(res.into_body(), READ_LIMIT).await {
            Ok((body, truncated)) => Fetched::Answer { status, body, truncated },
            Err(e) => Fetched::Failed(format!("reading the body: {e}")),
        }
    };
    tokio::time::timeout(timeout, work)
        .await
        .unwrap_or_else(|_| Fetched::Failed(format!("no answer in {} s", timeout.as_secs_f64())))
}

/// The path (and query) a redirect's `location` leads to from `from`, when it stays on the
/// site: relative, path-absolute, or absolute naming `host` (any scheme and port: the
/// inner service serves the site's every scheme).
fn same_site(location: &HeaderValue, from: &http::Uri, host: Option<&HeaderValue>) -> Option<http::Uri> {
    // A host no site has stands for this one when none is set: then only a relative or
    // path-absolute location resolves to it.
    const HERE: &str = "site.invalid";
    let here = host.and_then(|h| h.to_str().ok()).unwrap_or(HERE);
    let base = url::Url::parse(&format!("http://{here}{from}")).ok()?;
    let next = base.join(location.to_str().ok()?).ok()?;
    if !matches!(next.scheme(), "http" | "https") || next.host_str() != base.host_str() {
        return None;
    }
    let mut target = next.path().to_owned();
    if let Some(q) = next.query() {
        target.push('?');
        target.push_str(q);
    }
    target.parse().ok()
}

/// robotsgate's own answer (`kind`: the `x-robotsgate` header, the outcome's name).
fn own<ResB>(
    status: StatusCode,
    kind: &'static str,
    text: String,
    head: bool,
) -> Response<IngressBody<ResB>> {
    let len = text.len();
    let mut res = Response::new(if head { IngressBody::own(Bytes::new()) } else { IngressBody::own(text) });
    *res.status_mut() = status;
    let h = res.headers_mut();
    h.insert(ROBOTSGATE_HEADER, HeaderValue::from_static(kind));
    h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(len));
    res
}

/// What one request is, as the record says it.
struct Facts {
    request_id: RequestId,
    client: Option<IpAddr>,
    user_agent: String,
    method: Method,
    path: PathAndQuery,
    /// The host name given whose site judged it (`None`: the default site).
    host: Option<Arc<str>>,
    /// How the policy used the identity verdict, once checked.
    identity_use: Option<IdentityUse>,
}

/// A bot request's record until it is written: what it is made of, borrowed from the
/// request's handling, with what the path it took sets (`status`, and for robotsgate's
/// own refusals the reason and explanation). [`emit`] writes its line straight into the
/// audit log's buffer: no owned [`IngressRecord`](crate::audit::IngressRecord).
struct Pending<'a> {
    facts: Facts,
    found: Option<&'a Found>,
    site: &'a SiteRobots,
    judgement: Option<&'a Judgement>,
    outcome: Outcome,
    identity: Option<&'a Identity>,
    retry_after: Option<u64>,
    last_fetch: Option<RobotsFetch>,
    /// Set for robotsgate's identity refusals (else the judgement's).
    reason: Option<ReasonClass>,
    explanation: Option<String>,
    status: Option<u16>,
    cluster: Option<&'static str>,
}

#[allow(clippy::too_many_arguments)]
fn record<'a>(
    facts: Facts,
    found: Option<&'a Found>,
    site: &'a SiteRobots,
    judgement: Option<&'a Judgement>,
    outcome: Outcome,
    identity: Option<&'a Identity>,
    retry_after: Option<u64>,
    last_fetch: Option<RobotsFetch>,
) -> Pending<'a> {
    Pending {
        facts,
        found,
        site,
        judgement,
        outcome,
        identity,
        retry_after,
        last_fetch,
        reason: None,
        explanation: None,
        status: None,
        cluster: None,
    }
}

impl Pending<'_> {
    /// The record, borrowed, as of `now`.
    fn as_record(&self, mode: Mode, now: SystemTime) -> IngressRecordRef<'_> {
        let (facts, judgement, identity) = (&self.facts, self.judgement, self.identity);
        IngressRecordRef {
            schema_version: SCHEMA_VERSION,
            kind: "ingress",
            time: Text::Time(now),
            request_id: facts.request_id.as_str(),
            client: facts.client.map(Text::Ip),
            user_agent: &facts.user_agent,
            token: self.found.map(|f| &*f.token),
            site_group: self.found.is_some_and(|f| f.site_group),
            method: facts.method.as_str(),
            path: facts.path.as_str(),
            mode: mode.as_str(),
            outcome: self.outcome.as_str(),
            reason: self.reason.unwrap_or(judgement.map_or(ReasonClass::RobotsTxt, |j| j.class)).as_str(),
            rule: judgement.and_then(|j| j.rule.as_ref()).map(|r| (r.kind, &*r.pattern, r.line)),
            group_line: judgement.and_then(|j| j.group_line),
            explanation: Text::Str(match (&self.explanation, judgement) {
                (Some(e), _) => e,
                (None, Some(j)) => &j.explanation,
                (None, None) => "/robots.txt is always allowed",
            }),
            robots_sha256: self.site.sha256.as_deref(),
            robots_fetched: self.last_fetch.as_ref().map(|f| Text::Time(f.time)),
            robots_fetched_sha256: self.last_fetch.as_ref().and_then(|f| f.sha256.as_deref()),
            pace: judgement.and_then(|j| j.pace.as_ref()).map(|p| Text::Show(p)),
            retry_after: self.retry_after,
            identity: identity.map(|i| i.verdict.class()),
            identity_method: identity.and_then(|i| match &i.verdict {
                Verdict::Verified(m) => Some(m.class()),
                _ => None,
            }),
            identity_why: identity.and_then(|i| match &i.verdict {
                Verdict::Verified(_) => None,
                Verdict::Unverified(w) | Verdict::Failed(w) => Some(w.class()),
            }),
            identity_detail: identity.map(|i| match &i.verdict {
                Verdict::Verified(m) => Text::Show(m),
                Verdict::Unverified(w) | Verdict::Failed(w) => Text::Show(w),
            }),
            identity_policy: identity.and(facts.identity_use).map(IdentityUse::as_str),
            operator: identity.and_then(|i| i.operator.as_deref()),
            status: self.status,
            cluster: self.cluster,
            host: facts.host.as_deref(),
        }
    }
}

/// Writes the record (audit log, observer). `Err` when the audit log refuses requests
/// (fail closed).
async fn emit(shared: &Shared, rec: &Pending<'_>) -> Result<(), ()> {
    // The line in a block: the wait for its write does not hold it.
    let written = {
        let line = rec.as_record(shared.config.load().mode, SystemTime::now());
        if let Some(obs) = &shared.observer {
            obs(&line);
        }
        shared.audit.as_ref().map(|log| log.log_ingress_line(&line))
    };
    if let Some(written) = written
        && let Err(e) = written.await
    {
        tracing::warn!(error = %e, "the ingress record could not be written");
        return Err(());
    }
    Ok(())
}

fn audit_unavailable<ResB>(head: bool) -> Response<IngressBody<ResB>> {
    own(
        StatusCode::SERVICE_UNAVAILABLE,
        crate::RefusalKind::AuditUnavailable.as_str(),
        "robotsgate: the audit log cannot be written\n".into(),
        head,
    )
}

#[allow(clippy::manual_async_fn, reason = "the block keeps the future smaller (see below)")]
fn handle<S, B, ResB>(
    shared: Arc<Shared>,
    inner: S,
    mut req: Request<B>,
) -> impl Future<Output = Result<Response<IngressBody<ResB>>, S::Error>>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone + Send + 'static,
    S::Future: Send + 'static,
    B: Default + Send + 'static,
    ResB: Body<Data = Bytes> + Send + 'static,
    ResB::Error: std::fmt::Display,
{
    // A block rather than an `async fn`: an `async fn` keeps its arguments twice in its
    // future (as arguments and as locals), and this future is boxed for every request.
    async move {
        let config = shared.config.load_full();
        let fetch_timeout = config.fetch_timeout;
        let head = req.method() == Method::HEAD;
        // A target that is no path (`GET private`, read as an authority) names nothing on
        // this site: it was judged as `/` and sent on as `/`.
        if req.uri().path_and_query().is_none() && req.method() != Method::CONNECT {
            let why = "the request target is not a path (one starting with /)";
            return Ok(own(
                StatusCode::BAD_REQUEST,
                crate::RefusalKind::BadRequest.as_str(),
                why.into(),
                head,
            ));
        }
        if shared.sites.two_hosts(&req) {
            let why = "the request names two hosts (its target's and its Host header)";
            return Ok(own(
                StatusCode::BAD_REQUEST,
                crate::RefusalKind::BadRequest.as_str(),
                why.into(),
                head,
            ));
        }
        let peer = req.extensions().get::<SocketAddr>().map(|a| a.ip());
        let client = client_ip(peer, req.headers(), &config.trusted_proxies, config.forwarded_header);
        // Nearly every request finds a copy in time; the fetch's future is made only when one
        // is due.
        let judged_by = shared.sites.of(&req);
        let site = match judged_by.cache.fresh() {
            Some(site) => site,
            None => {
                let host = judged_by.host.or(config.robots_host.as_ref()).cloned();
                let fetcher = inner.clone();
                Box::pin(
                    judged_by
                        .cache
                        .current(&shared.known, move || fetch_robots(fetcher, host, fetch_timeout)),
                )
                .await
            }
        };
        let host = judged_by.name.cloned();
        let ua = user_agent(req.headers());
        let mut found = site.find_token(&ua);
        let mut facts = Facts {
            request_id: shared.ids.next(),
            client,
            user_agent: ua,
            method: req.method().clone(),
            path: match req.uri().path_and_query() {
                Some(p) => p.clone(),
                None => PathAndQuery::try_from(req.uri().path()).unwrap_or(PathAndQuery::from_static("/")),
            },
            host: host.clone(),
            identity_use: None,
        };

        // robots.txt itself: always served, never refused nor paced; a bot's fetch is kept.
        if req.uri().path() == "/robots.txt" {
            if let Some(found) = &found
                && (req.method() == Method::GET || head)
            {
                let key = bot_key(host.as_ref(), &found.token, client);
                let last = shared.fetches.last(&key);
                shared
                    .fetches
                    .remember(key, RobotsFetch { time: SystemTime::now(), sha256: site.sha256.clone() });
                let mut rec = record(facts, Some(found), &site, None, Outcome::RobotsTxt, None, None, last);
                rec.status = Some(200);
                if emit(&shared, &rec).await.is_err() {
                    return Ok(audit_unavailable(head));
                }
            }
            if let Some(fixed) = judged_by.cache.fixed_copy() {
                let mut res = Response::new(if head {
                    IngressBody::own(Bytes::new())
                } else {
                    IngressBody::own(fixed.body.clone())
                });
                res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
                res.headers_mut().insert(CONTENT_LENGTH, HeaderValue::from(fixed.body.len()));
                return Ok(res);
            }
            return inner.oneshot(req).await.map(site_response);
        }

        let report_only = config.mode == Mode::ReportOnly;

        // Identity: before the agent is chosen, as a signed request without a token is judged
        // as its operator's.
        let mut checked = None;
        if let Some(verifier) = &shared.verifier
            && (found.is_some()
                || (verifier.signatures().is_some() && req.headers().contains_key("signature-agent")))
        {
            let (parts, body) = req.into_parts();
            let token = found.as_ref().map(|f| &*f.token);
            checked = verifier.verify_request(&parts, client, token, SystemTime::now()).await;
            req = Request::from_parts(parts, body);
            if found.is_none()
                && let Some(t) = checked.as_ref().and_then(|c| c.token.as_ref())
            {
                let f = site.find_token(t);
                found = Some(f.unwrap_or(Found { token: t.clone(), site_group: false }));
            }
        }
        let identity = checked.as_ref();
        facts.identity_use = identity.map(|id| IdentityUse::of(id, config.impersonators));

        let mut agent = match &found {
            Some(f) => Agent::Token(f.token.clone()),
            None if config.unknown_agents == UnknownAgents::Star => Agent::Star,
            None => return inner.oneshot(req).await.map(site_response),
        };
        let last_fetch =
            found.as_ref().and_then(|f| shared.fetches.last(&bot_key(host.as_ref(), &f.token, client)));

        if let (Some(id), Some(f), Some(used)) = (identity, &found, facts.identity_use) {
            let verdict = &id.verdict;
            if used.refuses() {
                let (kind, outcome, text) = if verdict.is_failed() {
                    let outcome =
                        if report_only { Outcome::WouldFailIdentity } else { Outcome::IdentityFailed };
                    (
                        ReasonClass::IdentityFailed,
                        outcome,
                        format!("robotsgate: {} is not who it says it is ({verdict})\n", f.token),
                    )
                } else {
                    let outcome = if report_only {
                        Outcome::WouldRefuseUnverified
                    } else {
                        Outcome::IdentityUnverified
                    };
                    let op = id.operator.as_deref().unwrap_or("its operator");
                    let text = format!(
                        "robotsgate: {op} requires its bots to be verified; {} is {verdict}\n",
                        f.token
                    );
                    (ReasonClass::IdentityUnverified, outcome, text)
                };
                let mut rec =
                    record(facts, Some(f), &site, None, outcome, identity, None, last_fetch.clone());
                rec.reason = Some(kind);
                rec.explanation = Some(text.trim_end().to_owned());
                if !report_only {
                    rec.status = Some(config.status.as_u16());
                    if emit(&shared, &rec).await.is_err() {
                        return Ok(audit_unavailable(head));
                    }
                    let mut res = own(config.status, kind.as_str(), text, head);
                    if shared.verifier.as_ref().is_some_and(|v| v.signatures().is_some()) {
                        res.headers_mut()
                            .insert("accept-signature", HeaderValue::from_static(httpsig::ACCEPT_SIGNATURE));
                    }
                    return Ok(res);
                }
                return forward(&shared, inner, req, rec, None).await;
            }
            if used == IdentityUse::Star {
                agent = Agent::Star;
            }
        }

        let purposes: &[_] = match &agent {
            Agent::Token(t) => shared.known.get(t).map_or(&[], |a| &a.purposes),
            Agent::Star => &[],
        };
        let now = SystemTime::now();
        let minute =
            (now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() % 86_400) / 60) as u16;
        let mut j = site.judge(config.profile, &agent, facts.path.as_str(), minute, purposes);
        // For the response; the record borrows the rest.
        let content_usage = j.content_usage.take();
        let token_text = found.as_ref().map_or("an unknown agent", |f| &*f.token);
        // The judged request's record: its outcome and `Retry-After` are what the paths
        // below differ in (one of them writes it). A macro, not a closure: a closure would
        // take `facts` in and be held across the pacing's await, a larger future for every
        // request (callgrind: +0.2k instructions).
        macro_rules! judged {
            ($outcome:expr, $retry_after:expr) => {
                record(facts, found.as_ref(), &site, Some(&j), $outcome, identity, $retry_after, last_fetch)
            };
        }

        if !j.allowed {
            let usage = j.usage_refused.is_some();
            let (kind, outcome) = match (usage, report_only) {
                (true, false) => (Outcome::UsageRefused, Outcome::UsageRefused),
                (true, true) => (Outcome::UsageRefused, Outcome::WouldRefuseUsage),
                (false, false) => (Outcome::Disallowed, Outcome::Disallowed),
                (false, true) => (Outcome::Disallowed, Outcome::WouldDisallow),
            };
            let mut rec = judged!(outcome, None);
            if !report_only {
                rec.status = Some(config.status.as_u16());
                if emit(&shared, &rec).await.is_err() {
                    return Ok(audit_unavailable(head));
                }
                let text = format!(
                    "robotsgate: robots.txt does not allow {token_text} to fetch {}: {}\n",
                    rec.facts.path, j.explanation
                );
                return Ok(own(config.status, kind.as_str(), text, head));
            }
            return forward(&shared, inner, req, rec, None).await;
        }

        // Pacing, per token (or `*`) and client network.
        let mut alone = None;
        if let Some(hint) = j.pace {
            let delay = Duration::try_from_secs_f64(hint.delay)
                .unwrap_or(config.max_retry_after)
                .min(config.max_retry_after);
            let key = bot_key(host.as_ref(), agent.name(), client);
            let admitted = match admit(&shared, key, delay).await {
                Admitted::Now(admitted) => admitted,
                Admitted::Alone(admitted) => {
                    alone = Some("alone");
                    admitted
                }
                Admitted::Refuse => {
                    // Fleet mode without its store, `on_error = "refuse"`: the fleet's pacing
                    // cannot be kept.
                    let mut rec = judged!(Outcome::ClusterUnavailable, None);
                    rec.reason = Some(ReasonClass::ClusterUnavailable);
                    rec.status = Some(503);
                    rec.cluster = Some("alone");
                    if emit(&shared, &rec).await.is_err() {
                        return Ok(audit_unavailable(head));
                    }
                    let text = format!(
                        "robotsgate: {token_text} is asked to wait between requests ({hint}), and the fleet's pacing cannot be reached\n"
                    );
                    let kind = Outcome::ClusterUnavailable.as_str();
                    return Ok(own(StatusCode::SERVICE_UNAVAILABLE, kind, text, head));
                }
            };
            if let Err(wait) = admitted {
                let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
                let outcome = if report_only { Outcome::WouldPace } else { Outcome::Paced };
                let mut rec = judged!(outcome, Some(secs));
                rec.cluster = alone;
                if !report_only {
                    rec.status = Some(429);
                    if emit(&shared, &rec).await.is_err() {
                        return Ok(audit_unavailable(head));
                    }
                    let text = format!(
                        "robotsgate: {token_text} is asked to wait between requests ({hint}): retry in {secs} s\n"
                    );
                    let mut res = own(StatusCode::TOO_MANY_REQUESTS, Outcome::Paced.as_str(), text, head);
                    res.headers_mut().insert(RETRY_AFTER, HeaderValue::from(secs));
                    return Ok(res);
                }
                return forward(&shared, inner, req, rec, content_usage).await;
            }
        }

        let mut rec = judged!(Outcome::Allowed, None);
        rec.cluster = alone;
        forward(&shared, inner, req, rec, content_usage).await
    }
}

/// What pacing said of a bot's request.
enum Admitted {
    /// Admitted, or how long it has to wait.
    Now(Result<(), Duration>),
    /// The same, decided by this replica alone: the fleet's store did not answer.
    Alone(Result<(), Duration>),
    /// The fleet's store cannot be reached and paced bots are refused meanwhile.
    Refuse,
}

/// Asks the fleet's store when there is one and it answers (the replica's own state
/// follows what it said), else the replica's own state; report-only never refuses.
async fn admit(shared: &Shared, key: super::state::BotKey, delay: Duration) -> Admitted {
    let now = tokio::time::Instant::now();
    let Some(store) = &shared.pacing else { return Admitted::Now(shared.limiter.admit(key, delay, now)) };
    if store.is_up() {
        let bot = PacedBot { site: key.0.as_deref(), token: &key.1, network: key.2 };
        if let Some(answer) = store.admit(bot, delay).await {
            if answer.is_ok() {
                shared.limiter.note(key, now + delay);
            }
            return Admitted::Now(answer);
        }
    }
    if store.refuse_while_down() && shared.config.load().mode == Mode::Enforce {
        return Admitted::Refuse;
    }
    Admitted::Alone(shared.limiter.admit(key, delay, now))
}

/// Sends the request to the inner service, adds `Content-Usage`, and writes the record
/// with the status.
#[allow(clippy::manual_async_fn, reason = "the block keeps the future smaller (see `handle`)")]
fn forward<'a, S, B, ResB>(
    shared: &'a Shared,
    inner: S,
    req: Request<B>,
    mut rec: Pending<'a>,
    content_usage: Option<String>,
) -> impl Future<Output = Result<Response<IngressBody<ResB>>, S::Error>> + 'a
where
    S: Service<Request<B>, Response = Response<ResB>> + 'a,
    B: 'a,
{
    // A block rather than an `async fn`, for the reason `handle` gives; readiness then the
    // call, not `oneshot`, whose future holds the request again until it is sent.
    let head = req.method() == Method::HEAD;
    let mut inner = inner;
    async move {
        let result = match std::future::poll_fn(|cx| inner.poll_ready(cx)).await {
            Ok(()) => inner.call(req).await,
            Err(e) => Err(e),
        };
        rec.status = result.as_ref().ok().map(|r| r.status().as_u16());
        if emit(shared, &rec).await.is_err() {
            return Ok(audit_unavailable(head));
        }
        let mut res = result?;
        if let Some(value) = content_usage
            && !res.headers().contains_key("content-usage")
            && let Ok(v) = HeaderValue::from_str(&value)
        {
            res.headers_mut().insert("content-usage", v);
        }
        Ok(site_response(res))
    }
}

/// The site's answer as the client gets it: a `x-robotsgate` header robotsgate did not
/// write (no [`Refusal`](crate::Refusal) in the response's extensions) is removed, so that
/// the site (or whatever is behind it) cannot pass for robotsgate's refusals.
fn site_response<ResB>(mut res: Response<ResB>) -> Response<IngressBody<ResB>> {
    crate::refusal::Refusal::disown(&mut res);
    res.map(IngressBody::inner)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(values: &[&[u8]]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for v in values {
            h.append(USER_AGENT, HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    /// Values joined by a space; bytes that are not UTF-8 read as U+FFFD; at most
    /// `MAX_USER_AGENT_BYTES` of the header looked at, a character cut there read as U+FFFD.
    #[test]
    fn the_user_agent_as_looked_at() {
        assert_eq!(user_agent(&http::HeaderMap::new()), "");
        assert_eq!(user_agent(&headers(&[b"GPTBot/1.2"])), "GPTBot/1.2");
        assert_eq!(user_agent(&headers(&[b"Mozilla/5.0", b"ClaudeBot/1.0"])), "Mozilla/5.0 ClaudeBot/1.0");
        assert_eq!(user_agent(&headers(&[b"Bot\xff/1 caf\xc3\xa9"])), "Bot\u{fffd}/1 caf\u{e9}");
        let long = "a".repeat(MAX_USER_AGENT_BYTES + 10);
        assert_eq!(user_agent(&headers(&[long.as_bytes(), b"GPTBot"])), long[..MAX_USER_AGENT_BYTES]);
        // "é" (two bytes) across the limit.
        let cut = format!("{}\u{e9}", "a".repeat(MAX_USER_AGENT_BYTES - 1));
        assert_eq!(
            user_agent(&headers(&[cut.as_bytes()])),
            format!("{}\u{fffd}", "a".repeat(MAX_USER_AGENT_BYTES - 1))
        );
    }

    #[test]
    fn redirects_on_the_site_are_followed_and_others_not() {
        let from: http::Uri = "/a/robots.txt".parse().unwrap();
        let go = |location: &str, host: Option<&str>| {
            let host = host.map(|h| HeaderValue::from_str(h).unwrap());
            same_site(&HeaderValue::from_str(location).unwrap(), &from, host.as_ref()).map(|u| u.to_string())
        };
        assert_eq!(go("/robots2.txt", None).as_deref(), Some("/robots2.txt"));
        assert_eq!(go("b.txt?v=1", None).as_deref(), Some("/a/b.txt?v=1"));
        assert_eq!(go("../c.txt#x", None).as_deref(), Some("/c.txt"));
        assert_eq!(go("https://site.example:8443/r.txt", Some("site.example")).as_deref(), Some("/r.txt"));
        assert_eq!(go("https://site.example/r.txt", None), None, "no host set: only relative ones");
        assert_eq!(go("https://cdn.example/r.txt", Some("site.example")), None);
        assert_eq!(go("//cdn.example/r.txt", Some("site.example")), None);
        assert_eq!(go("ftp://site.example/r.txt", Some("site.example")), None);
    }
}
