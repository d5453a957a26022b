//! The texts of robotsgate's answers to a decided request: what a client reads in the body
//! of a refusal (and in its [`Refusal::message`]), composed here and nowhere else.

use std::fmt::{Display, Write as _};
use std::time::Duration;

use super::{Refusal, RefusalKind};
use crate::net::ConnectError;
use crate::pacing::{PaceFacts, PaceRefusal, retry_after_secs};
use crate::policy::Decision;
use crate::rep::usage::Category;

impl Refusal {
    /// `403 disallowed`: robots.txt disallows the URL for the decision's product token.
    pub(crate) fn disallowed(url: &str, decision: Decision) -> Refusal {
        let text = format!(
            "request disallowed by robots.txt\nURL: {url}\nProduct token: {}\nDecided by: {decision}\n\
             robots.txt: {}\n",
            decision.agent,
            decision.origin.robots_url(),
        );
        Refusal::new(RefusalKind::Disallowed, text).with_decision(decision)
    }

    /// `403 usage-refused`: robots.txt allows the URL, the site's AI-usage preferences
    /// refuse the request's purpose.
    pub(crate) fn usage_refused(url: &str, decision: Decision) -> Refusal {
        let usage = decision.usage.as_deref();
        let preference = usage.map(|u| u.to_string()).unwrap_or_default();
        let purpose = usage.map(|u| u.purpose.to_string()).unwrap_or_default();
        let text = format!(
            "request refused by the site's AI-usage preferences\nURL: {url}\nProduct token: {}\n\
             Purpose: {purpose}\nPreference: {preference}\nrobots.txt: {}\n",
            decision.agent,
            decision.origin.robots_url(),
        );
        Refusal::new(RefusalKind::UsageRefused, text).with_decision(decision)
    }

    /// `403 usage-refused` replacing a response whose usage headers (`found`, as read)
    /// refuse the request's purpose (for category `refused`).
    pub(crate) fn response_usage_refused(
        url: &str,
        decision: &Decision,
        refused: Option<Category>,
        found: &dyn Display,
    ) -> Refusal {
        let purpose = decision.usage.as_ref().map(|u| u.purpose.to_string()).unwrap_or_default();
        let text = format!(
            "response refused by the site's AI-usage preferences\nURL: {url}\nProduct token: {}\n\
             Purpose: {purpose}\nThe response said ({}: disallowed):\n{found}",
            decision.agent,
            refused.map(|c| c.as_str()).unwrap_or(""),
        );
        Refusal::new(RefusalKind::UsageRefused, text).with_decision(decision.clone())
    }

    /// `503 paced` with `Retry-After`: the request would wait too long for its origin's
    /// next slot (or too many are held); why, and when to try again.
    pub(crate) fn paced(url: &str, decision: Decision, facts: &PaceFacts, retry_after: Duration) -> Refusal {
        let mut text = String::from("request not sent: it would wait too long for the origin's next slot\n");
        let _ = writeln!(text, "URL: {url}");
        let _ = writeln!(text, "Origin: {}  Product token: {}", decision.origin, decision.agent);
        let why = match facts.refused {
            Some(PaceRefusal::QueueFull) => "too many requests are held for this origin already",
            Some(PaceRefusal::TableFull) => "too many origins are being paced already",
            _ => {
                "its wait would be longer than a request may be held (the proxy's pacing.max_wait, \
                 the builder's .max_wait())"
            }
        };
        let _ = writeln!(text, "Why: {why}");
        if let Some(source) = &facts.plan.source {
            let _ = writeln!(text, "Delay: {:.3} s, from {source}", facts.plan.delay.as_secs_f64());
        }
        if let Some(p) = &facts.pause {
            let ra = p.retry_after.as_deref().map_or_else(String::new, |r| format!(", Retry-After: {r}"));
            let _ = writeln!(
                text,
                "Back-off: the origin answered {}{ra}; paused for {:.0} s",
                p.status,
                p.pause.as_secs_f64()
            );
        }
        let _ = writeln!(text, "Retry after: {} s", retry_after_secs(retry_after));
        Refusal::new(RefusalKind::Paced, text).with_retry_after(retry_after).with_decision(decision)
    }

    /// `503 cluster-unavailable`: fleet mode's Redis cannot be reached and requests are
    /// refused until it can.
    pub(crate) fn cluster_unavailable() -> Refusal {
        Refusal::new(
            RefusalKind::ClusterUnavailable,
            "the fleet's Redis cannot be reached and cluster.on_error is \"refuse\": nothing is sent \
             until pacing can be shared again",
        )
    }

    /// The answer for an origin that cannot be reached or a destination the guard refuses
    /// ([`RefusalKind::of_connect_error`]), saying the connector's error.
    pub(crate) fn connect_failed(e: &ConnectError) -> Refusal {
        Refusal::new(RefusalKind::of_connect_error(e), e.to_string())
    }
}
