//! Deciding one request: its target, the token, the guard, the policy, the audit record,
//! and the refusal when it may not go.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::SystemTime;

use arc_swap::ArcSwap;
use http::header::{HOST, USER_AGENT};
use http::{HeaderValue, Method, Response};
use tokio::time::Instant;

use super::purpose::ResponseUsage;
use super::{ClientAddr, DecisionObserver, Mode, ProxyUser, Settings, SignedWith, Transport};
use crate::audit::{AuditLog, RequestFacts, ResponseUsageRecord};
use crate::fetch::Unreachable;
use crate::identity::httpsig::Signers;
use crate::ids::{RequestId, RequestIds};
use crate::net::{ConnectError, Connector};
use crate::origin::{Origin, Scheme, request_path};
use crate::pacing::{PaceFacts, PaceTicket, Pacer};
use crate::policy::{Decision, Reason, RobotsPolicy, UsageCheck};
use crate::refusal::{Refusal, RefusalKind};
use crate::vocabulary::Outcome;

pub(super) struct Shared {
    pub(super) policy: RobotsPolicy,
    /// The token selector and the mode, replaced whole on reload.
    pub(super) settings: ArcSwap<Settings>,
    pub(super) scheme: Scheme,
    pub(super) audit: Option<AuditLog>,
    pub(super) admission: Option<Connector>,
    pub(super) observer: Option<Arc<dyn DecisionObserver>>,
    /// Set on requests that have no `User-Agent` of their own.
    pub(super) user_agent: Option<HeaderValue>,
    /// Outages are answered (502, 504) rather than returned as errors.
    pub(super) answer_outages: bool,
    /// An allowed request's response carries its [`Decision`] in its extensions.
    pub(super) decision_in_response: bool,
    /// The transport of requests without one in their extensions.
    pub(super) transport: Option<Transport>,
    pub(super) ids: RequestIds,
    /// Spaces the requests to each origin; `None`: no pacing.
    pub(super) pacer: Option<Pacer>,
    /// Fleet mode: the fleet's Redis (for refusing while it is down, if so configured, and
    /// for saying in the record that a decision was made alone).
    #[cfg(feature = "cluster")]
    pub(super) cluster: Option<crate::cluster::Cluster>,
    /// Sign the requests that go (Web Bot Auth), each with its user's or token's signer;
    /// `None`: requests are not signed.
    pub(super) signers: Option<Arc<Signers>>,
}

/// A request that may go: its decision, and what its answer tells pacing.
pub(super) struct Admitted {
    pub(super) decision: Decision,
    /// The request's part in its lane, when pacing looked at it.
    pub(super) ticket: Option<PaceTicket>,
    /// When it was decided (answers to requests sent before a pause began do not double
    /// the pause).
    pub(super) decided: Instant,
}

/// The audit log's id of a request made for a purpose, kept in its extensions for the
/// record of the response's usage headers.
#[derive(Debug, Clone)]
pub(super) struct AuditRequestId(pub(super) Arc<str>);

/// How a decision is recorded, besides the request: its mode, time, pacing and whether
/// fleet mode refused it.
struct Logged<'a> {
    /// The client's address, when known.
    client: Option<SocketAddr>,
    report_only: bool,
    /// With a signer: whether the request goes signed.
    signed: Option<bool>,
    elapsed: std::time::Duration,
    pace: Option<&'a PaceFacts>,
    cluster_refused: bool,
}

/// Where a request goes, as the layer sees it.
struct Target {
    origin: Origin,
    path: String,
    path_visible: bool,
    url: String,
}

/// What the guard step found: the fleet refusing, a destination it refuses, or neither.
enum Guarded {
    Open,
    Denied(ConnectError),
    FleetDown,
}

/// What pacing did with a request that goes.
#[derive(Default)]
struct Paced {
    /// What paced it, when anything did (boxed: most requests are not paced, and this is
    /// held in every request's future while its record is written).
    facts: Option<Box<PaceFacts>>,
    /// Its part in its lane, when it may go.
    ticket: Option<PaceTicket>,
    /// Refused: when to try again.
    refused: Option<std::time::Duration>,
}

impl Shared {
    /// Decides a request and holds it for its origin's next slot: `Ok` when it may go
    /// now, `Err` with the refusal. `logged` gets the request id once the decision record
    /// is written (the outcome record is keyed by it).
    ///
    /// The order of the decision: target, gate (the audit log), token, purpose, guard
    /// (fleet mode, destination), robots.txt, pacing, record; then the answer.
    ///
    /// `settings` are the layer's settings as the request found them; `client` is the
    /// client's address when the request carries no [`ClientAddr`] (a service made for
    /// one client connection knows it); `started` is when the request came to the layer.
    pub(super) async fn check(
        &self,
        parts: &mut http::request::Parts,
        settings: Arc<Settings>,
        client: Option<SocketAddr>,
        started: std::time::Instant,
        logged: &mut Option<RequestId>,
    ) -> Result<Admitted, Refusal> {
        let started = Instant::from_std(started);
        let client = client_of(parts, client);
        let target = self.target(parts).map_err(|why| Refusal::new(RefusalKind::BadRequest, why))?;
        self.gate()?;
        let report_only = settings.mode == Mode::ReportOnly;
        let token = self.token(&settings, parts)?;
        // The token picks the signer (with the proxy user).
        let signing_token = self.signers.as_ref().map(|_| token.clone());
        let usage = self.purpose(&settings, parts)?;
        let decision = match self.guard(&target.origin).await {
            Guarded::FleetDown => {
                // Boxed: rare, and as large as the rest of the decision's future.
                let how = Logged {
                    client,
                    report_only,
                    signed: self.signers.as_ref().map(|_| false),
                    elapsed: started.elapsed(),
                    pace: None,
                    cluster_refused: true,
                };
                return Err(Box::pin(self.refuse_alone(parts, &target, token, how, logged)).await);
            }
            Guarded::Denied(cause) => {
                self.without_robots(&target, token, Reason::DestinationDenied { cause })
            }
            Guarded::Open => self.robots(&target, token, usage).await,
        };
        let elapsed = started.elapsed();
        let paced = self.pace(&decision, report_only).await;
        // The robots.txt lookup or pacing found the fleet's Redis gone (or too slow), and
        // this replica is not to go on alone: a request that would go (or was paced) is
        // recorded with the outcome `cluster-unavailable`, and refused. (A request to an
        // origin without a pace, which asks Redis nothing more, went on alone.)
        let cluster_refused =
            (paced.ticket.is_some() || goes(&decision, report_only)) && self.cluster_refusing();
        if !cluster_refused {
            self.observe(&decision, &paced, report_only, elapsed);
        }
        // A request that goes is signed now, after its wait for a slot (the signature's
        // validity starts when it is sent), and before its record says so.
        let goes = goes(&decision, report_only) && paced.refused.is_none() && !cluster_refused;
        let signed = self.signers.as_ref().map(|s| goes && sign(s, signing_token.as_deref(), parts));
        let how =
            Logged { client, report_only, signed, elapsed, pace: paced.facts.as_deref(), cluster_refused };
        self.record(parts, &target.url, target.path_visible, &decision, how, logged).await?;
        if cluster_refused {
            return Err(self.cluster_refusal().with_decision(decision));
        }
        answer(&target.url, decision, paced, report_only, started)
    }

    /// Tells the observer (the proxy's metrics) the decision's outcome.
    fn observe(&self, decision: &Decision, paced: &Paced, report_only: bool, took: std::time::Duration) {
        if let Some(o) = &self.observer {
            let outcome =
                if paced.refused.is_some() { Outcome::Paced } else { decision.outcome(report_only) };
            o.decision(outcome, decision.reason.class(), took);
        }
    }

    /// The gate: with an audit log that fails closed and cannot be written, nothing is
    /// decided.
    fn gate(&self) -> Result<(), Refusal> {
        match &self.audit {
            Some(audit) => {
                audit.accepting().map_err(|e| Refusal::new(RefusalKind::AuditUnavailable, e.to_string()))
            }
            None => Ok(()),
        }
    }

    /// The product token the request is decided for (refused without one).
    fn token(&self, settings: &Settings, parts: &mut http::request::Parts) -> Result<Arc<str>, Refusal> {
        settings.selector.select(parts).map_err(|e| {
            if let Some(o) = &self.observer {
                o.refused(RefusalKind::NoToken);
            }
            Refusal::new(RefusalKind::NoToken, e.to_string())
        })
    }

    /// The purpose the request is made for, when purposes are checked.
    fn purpose(&self, settings: &Settings, parts: &mut http::request::Parts) -> Result<UsageCheck, Refusal> {
        if settings.purpose.is_off() {
            return Ok(UsageCheck::default());
        }
        settings.purpose.select(parts).map_err(|why| Refusal::new(RefusalKind::BadRequest, why))
    }

    /// The guard: fleet mode refusing while its Redis is gone, then the connector's
    /// admission of the destination (no robots.txt is fetched for a refused one).
    async fn guard(&self, origin: &Origin) -> Guarded {
        if self.cluster_refusing() {
            return Guarded::FleetDown;
        }
        match &self.admission {
            Some(connector) => match connector.check_admitted(origin).await {
                Err(e @ ConnectError::Denied { .. }) => Guarded::Denied(e),
                _ => Guarded::Open,
            },
            None => Guarded::Open,
        }
    }

    /// robots.txt's decision (with the usage preferences for a purpose).
    async fn robots(&self, target: &Target, token: Arc<str>, usage: UsageCheck) -> Decision {
        if usage.purpose.is_empty() {
            return self.policy.decide(&target.origin, &target.path, token).await;
        }
        let profile = self.policy.config().profile;
        self.policy.decide_for(&target.origin, &target.path, token, profile, usage).await
    }

    /// A decision made before robots.txt was looked at.
    fn without_robots(&self, target: &Target, token: Arc<str>, reason: Reason) -> Decision {
        let origin = Arc::new(target.origin.clone());
        Decision::without_robots(origin, token, self.policy.config().profile, reason, false)
    }

    /// Fleet mode refuses before robots.txt is looked at (a fetch would be sent), and the
    /// request is recorded as a decision all the same: it has an origin and a token.
    async fn refuse_alone(
        &self,
        parts: &http::request::Parts,
        target: &Target,
        token: Arc<str>,
        how: Logged<'_>,
        logged: &mut Option<RequestId>,
    ) -> Refusal {
        let decision = self.without_robots(target, token, Reason::ClusterUnavailable);
        match self.record(parts, &target.url, target.path_visible, &decision, how, logged).await {
            Ok(()) => self.cluster_refusal(),
            Err(refusal) => refusal,
        }
    }

    /// Pacing: a request that goes waits for its origin's slot, or is refused when that
    /// is too far off.
    async fn pace(&self, decision: &Decision, report_only: bool) -> Paced {
        let Some(pacer) = &self.pacer else { return Paced::default() };
        if !goes(decision, report_only) || (pacer.idle() && !decision.has_pace_hints()) {
            return Paced::default();
        }
        let hint = decision.pace_hint(SystemTime::now());
        match pacer.pace(&decision.origin, &decision.agent, hint, report_only).await {
            Ok(pass) => Paced { facts: pass.facts.map(Box::new), ticket: Some(pass.ticket), refused: None },
            Err(refused) => Paced {
                facts: Some(Box::new(refused.facts)),
                ticket: None,
                refused: Some(refused.retry_after),
            },
        }
    }

    /// Tells pacing what the origin answered a request that went: a 429 or 503 pauses its
    /// lane, a success ends the lane's back-off. robotsgate's own answers (the forwarder's
    /// 502 and 504, known by the [`Refusal`] in their extensions) are not the origin's and
    /// tell it nothing. Costs a comparison when the
    /// request was not paced and the answer is not a 429 or 503.
    #[inline]
    pub(super) fn answered<B>(
        &self,
        ticket: Option<PaceTicket>,
        d: &Decision,
        decided: Instant,
        res: &Response<B>,
    ) {
        let status = res.status().as_u16();
        let own = || res.extensions().get::<Refusal>().is_some();
        match ticket {
            Some(t) if !own() => t.answered(res.status(), res.headers()),
            Some(_) => {}
            None if (status == 429 || status == 503) && !own() => {
                if let Some(p) = &self.pacer {
                    p.ticket(&d.origin, &d.agent, decided).answered(res.status(), res.headers());
                }
            }
            None => {}
        }
    }

    /// Reads a forwarded response's usage headers for a request made for a purpose (the
    /// decision's): logs them, and returns `Err` with the refusal that replaces the
    /// response when `purpose.enforce_response` is on (not in report-only) and they say
    /// no; else what they said, if anything.
    pub(super) async fn response_usage(
        &self,
        headers: &http::HeaderMap,
        status: u16,
        decision: &Decision,
        id: Option<AuditRequestId>,
        url: impl FnOnce() -> String,
    ) -> Result<Option<ResponseUsage>, Refusal> {
        let Some(purpose) = decision.usage.as_ref().map(|u| u.purpose) else { return Ok(None) };
        let Some(found) = ResponseUsage::of(headers, &decision.agent, purpose) else { return Ok(None) };
        let url = url();
        let settings = self.settings.load();
        let report_only = settings.mode == Mode::ReportOnly;
        let replace = found.refused.is_some() && settings.purpose.enforce_response && !report_only;
        let outcome = match (found.refused, replace) {
            (None, _) => Outcome::Allowed,
            (Some(_), true) => Outcome::UsageRefused,
            (Some(_), false) => Outcome::WouldRefuseUsage,
        };
        if let Some(o) = &self.observer
            && found.refused.is_some()
        {
            o.response_usage(outcome);
        }
        if let Some(audit) = &self.audit {
            let record = ResponseUsageRecord {
                schema_version: 0,
                kind: "",
                time: String::new(),
                request_id: id.map(|i| i.0.to_string()).unwrap_or_default(),
                url: url.clone(),
                agent: decision.agent.to_string(),
                purpose: purpose.categories().map(|c| c.as_str()).collect(),
                status,
                content_usage: found.content_usage.clone(),
                content_signal: found.content_signal.clone(),
                x_robots_tag: found.x_robots_tag.clone(),
                refused: found.refused.map(|c| c.as_str()),
                outcome: outcome.as_str(),
            };
            if let Err(e) = audit.response_usage(record).await {
                return Err(Refusal::new(RefusalKind::AuditUnavailable, e.to_string()));
            }
        }
        if replace {
            return Err(Refusal::response_usage_refused(&url, decision, found.refused, &found));
        }
        Ok(Some(found))
    }

    /// `Some("alone")` when fleet mode is on and its Redis cannot be reached.
    #[inline]
    fn alone(&self) -> Option<&'static str> {
        #[cfg(feature = "cluster")]
        if let Some(c) = &self.cluster
            && !c.is_up()
        {
            return Some("alone");
        }
        None
    }

    /// Whether requests are refused now: fleet mode's Redis cannot be reached and it is
    /// configured to refuse.
    #[inline]
    fn cluster_refusing(&self) -> bool {
        #[cfg(feature = "cluster")]
        if let Some(c) = &self.cluster {
            return c.refusing();
        }
        false
    }

    /// The refusal of a request while [`Shared::cluster_refusing`] (counted by the
    /// observer).
    fn cluster_refusal(&self) -> Refusal {
        if let Some(o) = &self.observer {
            o.refused(RefusalKind::ClusterUnavailable);
        }
        Refusal::cluster_unavailable()
    }

    /// Writes the decision record of a request (with an audit log), and notes its id in
    /// `logged`; `Err` with the refusal when the log cannot take it.
    async fn record(
        &self,
        parts: &http::request::Parts,
        url: &str,
        path_visible: bool,
        decision: &Decision,
        how: Logged<'_>,
        logged: &mut Option<RequestId>,
    ) -> Result<(), Refusal> {
        let Some(audit) = &self.audit else { return Ok(()) };
        let id = self.ids.next();
        let user = parts.extensions.get::<ProxyUser>().map(|u| u.0.clone());
        let facts = RequestFacts {
            request_id: id.as_str(),
            client: how.client,
            user: user.as_deref(),
            method: parts.method.as_str(),
            url,
            path_visible,
            transport: parts.extensions.get::<Transport>().copied().or(self.transport).map(Transport::as_str),
            report_only: how.report_only,
            elapsed: how.elapsed,
            pace: how.pace,
            cluster: self.alone(),
            cluster_refused: how.cluster_refused,
            signed: how.signed,
        };
        if let Err(e) = audit.log_decision(decision, facts).await {
            return Err(Refusal::new(RefusalKind::AuditUnavailable, e.to_string()));
        }
        *logged = Some(id);
        Ok(())
    }

    /// Writes the record of an answer given without a decision record (no product token,
    /// a request that cannot be read, the audit log failing closed), with an audit log.
    /// `client` as for [`Shared::check`].
    pub(super) fn log_refusal(
        &self,
        parts: &http::request::Parts,
        client: Option<SocketAddr>,
        refusal: &Refusal,
    ) {
        let Some(audit) = &self.audit else { return };
        if self.settings.load().mode == Mode::Off {
            return;
        }
        let id = self.ids.next();
        let user = parts.extensions.get::<ProxyUser>().map(|u| u.0.clone());
        let target = parts.uri.to_string();
        let facts = crate::audit::RefusalFacts {
            request_id: id.as_str(),
            client: client_of(parts, client),
            user: user.as_deref(),
            method: Some(parts.method.as_str()),
            target: Some(&target),
            transport: parts.extensions.get::<Transport>().copied().or(self.transport).map(Transport::as_str),
        };
        audit.log_refusal(refusal, facts);
    }

    /// Signs a request that goes without a decision (mode off), when signers are set: by
    /// its proxy user's signer, else the default (no token is chosen in mode off).
    pub(super) fn sign_undecided(&self, parts: &mut http::request::Parts) {
        if let Some(signers) = &self.signers {
            sign(signers, None, parts);
        }
    }

    /// Writes the payment record of a request that went without a decision (mode off),
    /// with an audit log: `uri` and `host` are its target's.
    pub(super) fn log_undecided_payment(
        &self,
        uri: &http::Uri,
        host: Option<&HeaderValue>,
        payment: &crate::identity::httpsig::Payment,
    ) {
        let Some(audit) = &self.audit else { return };
        let origin = match uri.scheme() {
            Some(_) => Origin::from_uri(uri).ok(),
            None => {
                host.and_then(|h| h.to_str().ok()).and_then(|h| Origin::from_authority(self.scheme, h).ok())
            }
        };
        let Some(origin) = origin else { return };
        let id = self.ids.next();
        audit.log_payment(super::outcome::payment_record(id.as_str(), origin.to_string(), payment));
    }

    /// Sets the crawler's `User-Agent` on a request that has none.
    pub(super) fn identify(&self, parts: &mut http::request::Parts) {
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
            // TLS seen in the tunnel: https whatever the port; else http for port 80.
            let tls = parts.extensions.get::<Transport>() == Some(&Transport::ConnectTls);
            let scheme = if authority.port_u16() == Some(80) && !tls { Scheme::Http } else { Scheme::Https };
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

/// Whether a request by `decision` goes to the origin (pacing may hold or refuse it still).
fn goes(decision: &Decision, report_only: bool) -> bool {
    (report_only || (decision.allowed && !decision.usage_refused()))
        && !matches!(decision.reason, Reason::DestinationDenied { .. })
}

/// The answer to a decided, recorded request: `Ok` when it may go now, else its refusal.
/// A refused destination is refused in report-only too (nothing could be sent).
fn answer(
    url: &str,
    decision: Decision,
    paced: Paced,
    report_only: bool,
    decided: Instant,
) -> Result<Admitted, Refusal> {
    if let Reason::DestinationDenied { cause } = &decision.reason {
        return Err(Refusal::connect_failed(cause).with_decision(decision));
    }
    if decision.usage_refused() && !report_only {
        return Err(Refusal::usage_refused(url, decision));
    }
    if let (Some(retry_after), Some(facts)) = (paced.refused, paced.facts.as_deref()) {
        return Err(Refusal::paced(url, decision, facts, retry_after));
    }
    if decision.allowed || report_only {
        return Ok(Admitted { decision, ticket: paced.ticket, decided });
    }
    // robots.txt could not be fetched because the origin itself cannot be reached
    // (DNS, refused, certificate, guard): say that, as the request would fail too.
    if let Reason::Unreachable { cause: Unreachable::Connect(e) } = &decision.reason {
        return Err(Refusal::connect_failed(e).with_decision(decision));
    }
    Err(Refusal::disallowed(url, decision))
}

/// Signs `parts` (Web Bot Auth) with its signer among `signers` (its proxy user's, else
/// `token`'s, else the default), replacing any signature fields it had: `true` when it is
/// signed (the signer is then in its extensions, [`SignedWith`]). A `CONNECT` is not: what
/// goes through the tunnel is not seen here. A request no signer applies to, or that
/// cannot be signed (no randomness for the nonce: not expected), goes without the client's
/// signature fields, and `false` is recorded.
fn sign(signers: &Signers, token: Option<&str>, parts: &mut http::request::Parts) -> bool {
    if parts.method == Method::CONNECT {
        return false;
    }
    let user = parts.extensions.get::<ProxyUser>().map(|u| u.0.clone());
    let signed = match signers.pick(user.as_deref(), token) {
        Some(signer) => match signer.sign(parts, SystemTime::now()) {
            Ok(()) => {
                parts.extensions.insert(SignedWith(signer.clone()));
                true
            }
            Err(e) => {
                tracing::warn!(error = %e, "request not signed");
                false
            }
        },
        None => false,
    };
    if !signed {
        for name in ["signature", "signature-input", "signature-agent"] {
            parts.headers.remove(name);
        }
    }
    signed
}

/// The client's address for the records: the request's [`ClientAddr`], else `default`
/// (the client of the connection a service was made for).
fn client_of(parts: &http::request::Parts, default: Option<SocketAddr>) -> Option<SocketAddr> {
    parts.extensions.get::<ClientAddr>().map_or(default, |c| Some(c.0))
}
