//! Deciding one request: its target, the token, the guard, the policy, the audit record,
//! and the refusal when it may not go.

use std::sync::Arc;

use arc_swap::ArcSwap;
use http::header::{HOST, USER_AGENT};
use http::{HeaderValue, Method};
use tokio::time::Instant;

use super::ids::{RequestId, RequestIds};
use super::purpose::ResponseUsage;
use super::{ClientAddr, DecisionObserver, Mode, ProxyUser, Settings, Transport};
use crate::audit::{AuditLog, RequestFacts, ResponseUsageRecord};
use crate::fetch::Unreachable;
use crate::net::{ConnectError, Connector};
use crate::origin::{Origin, Scheme, request_path};
use crate::policy::{Decision, Reason, RobotsPolicy, UsageCheck};
use crate::refusal::{Refusal, RefusalKind};

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
    pub(super) ids: RequestIds,
}

/// The audit log's id of a request made for a purpose, kept in its extensions for the
/// record of the response's usage headers.
#[derive(Debug, Clone)]
pub(super) struct AuditRequestId(pub(super) Arc<str>);

/// The purpose of a decision, for the refusal's text.
fn usage_purpose(d: &Decision) -> String {
    d.usage.as_ref().map(|u| u.purpose.to_string()).unwrap_or_default()
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
    /// `logged` gets the request id once the decision record is written (the outcome
    /// record is keyed by it).
    pub(super) async fn check(
        &self,
        parts: &mut http::request::Parts,
        logged: &mut Option<RequestId>,
    ) -> Result<Decision, Refusal> {
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
        let usage = if settings.purpose.is_off() {
            UsageCheck::default()
        } else {
            settings.purpose.select(parts).map_err(|why| Refusal::new(RefusalKind::BadRequest, why))?
        };
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
                usage: None,
                notes: None,
            },
            None if usage.purpose.is_empty() => self.policy.decide(&target.origin, &target.path, token).await,
            None => {
                let profile = self.policy.config().profile;
                self.policy.decide_for(&target.origin, &target.path, token, profile, usage).await
            }
        };
        let elapsed = started.elapsed();
        if let Some(o) = &self.observer {
            let outcome = match (&decision.reason, decision.allowed, report_only) {
                (Reason::DestinationDenied { .. }, _, _) => "destination-denied",
                (_, true, false) if decision.usage_refused() => "usage-refused",
                (_, true, true) if decision.usage_refused() => "would-refuse-usage",
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
                transport: parts.extensions.get::<Transport>().map(|t| t.as_str()),
                report_only,
                elapsed,
            };
            if let Err(e) = audit.log_decision(&decision, facts).await {
                return Err(Refusal::new(RefusalKind::AuditUnavailable, e.to_string()));
            }
            *logged = Some(id);
        }
        if let Reason::DestinationDenied { cause } = &decision.reason {
            let refusal = Refusal::new(RefusalKind::of_connect_error(cause), cause.to_string());
            return Err(refusal.with_decision(decision));
        }
        if decision.usage_refused() && !report_only {
            let usage = decision.usage.as_deref().map(|u| u.to_string()).unwrap_or_default();
            let text = format!(
                "request refused by the site's AI-usage preferences\nURL: {}\nProduct token: {}\nPurpose: {}\n\
                 Preference: {usage}\nrobots.txt: {}\n",
                target.url,
                decision.agent,
                usage_purpose(&decision),
                decision.origin.robots_url(),
            );
            return Err(Refusal::new(RefusalKind::UsageRefused, text).with_decision(decision));
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
        url: &str,
    ) -> Result<Option<ResponseUsage>, Refusal> {
        let Some(purpose) = decision.usage.as_ref().map(|u| u.purpose) else { return Ok(None) };
        let Some(found) = ResponseUsage::of(headers, &decision.agent, purpose) else { return Ok(None) };
        let settings = self.settings.load();
        let report_only = settings.mode == Mode::ReportOnly;
        let replace = found.refused.is_some() && settings.purpose.enforce_response && !report_only;
        let outcome = match (found.refused, replace) {
            (None, _) => "allowed",
            (Some(_), true) => "usage-refused",
            (Some(_), false) => "would-refuse-usage",
        };
        if let Some(o) = &self.observer
            && found.refused.is_some()
        {
            o.refused(if replace { "usage-refused-response" } else { "would-refuse-usage-response" });
        }
        if let Some(audit) = &self.audit {
            let record = ResponseUsageRecord {
                schema_version: 0,
                kind: "",
                time: String::new(),
                request_id: id.map(|i| i.0.to_string()).unwrap_or_default(),
                url: url.to_owned(),
                agent: decision.agent.to_string(),
                purpose: purpose.categories().map(|c| c.as_str()).collect(),
                status,
                content_usage: found.content_usage.clone(),
                content_signal: found.content_signal.clone(),
                x_robots_tag: found.x_robots_tag.clone(),
                refused: found.refused.map(|c| c.as_str()),
                outcome,
            };
            if let Err(e) = audit.response_usage(record).await {
                return Err(Refusal::new(RefusalKind::AuditUnavailable, e.to_string()));
            }
        }
        if replace {
            let text = format!(
                "response refused by the site's AI-usage preferences\nURL: {url}\nProduct token: {}\n\
                 Purpose: {purpose}\nThe response said ({}: disallowed):\n{found}",
                decision.agent,
                found.refused.map(|c| c.as_str()).unwrap_or(""),
            );
            return Err(Refusal::new(RefusalKind::UsageRefused, text).with_decision(decision.clone()));
        }
        Ok(Some(found))
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
