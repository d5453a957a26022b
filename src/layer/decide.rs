//! Deciding one request: its target, the token, the guard, the policy, the audit record,
//! and the refusal when it may not go.

use std::sync::Arc;

use arc_swap::ArcSwap;
use http::header::{HOST, USER_AGENT};
use http::{HeaderValue, Method};
use tokio::time::Instant;

use super::ids::{RequestId, RequestIds};
use super::{ClientAddr, DecisionObserver, Mode, ProxyUser, Settings, Transport};
use crate::audit::{AuditLog, RequestFacts};
use crate::fetch::Unreachable;
use crate::net::{ConnectError, Connector};
use crate::origin::{Origin, Scheme, request_path};
use crate::policy::{Decision, Reason, RobotsPolicy};
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
                notes: None,
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
