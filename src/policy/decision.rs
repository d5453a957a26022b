//! The policy's answer for one request ([`Decision`]) and why ([`Reason`]), made from a
//! usable robots.txt copy.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use super::audit_text::DecisionKey;
use super::config::OverrideAction;
use super::copy::{CopyContent, Failure, FetchFacts, RobotsCopy};
use super::usage::{CategoryPreference, UsageCheck, UsageDecision};
use crate::fetch::Unreachable;
use crate::origin::Origin;
use crate::rep::{PaceHint, Profile, Reading, RuleId, RuleKind, ServerPath, VerdictReason};
use crate::vocabulary::{Outcome, ReasonClass};

/// The robots.txt rule that decided a request ([`Decision::rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecidingRule<'a> {
    /// `allow` or `disallow`.
    pub kind: RuleKind,
    /// The rule's path pattern as written (empty when the copy kept no text).
    pub pattern: &'a str,
    /// Its line in the file (1-based).
    pub line: u32,
    /// The reading that found it.
    pub reading: Reading,
    /// Google's reading added it: a rule ending in `/index.html` also covers its folder.
    pub implied_by_index_html: bool,
}

/// Why a request was allowed or not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reason {
    /// A rule decided (see [`Decision::rule_pattern`] for its text).
    Rule {
        /// Which rule.
        id: RuleId,
        /// Allow or disallow.
        kind: RuleKind,
        /// Its line.
        line: u32,
        /// The reading it comes from.
        reading: Reading,
        /// Google's `index.html` rule.
        implied_by_index_html: bool,
        /// Conservative profile: the readings disagreed.
        readings_disagree: bool,
    },
    /// robots.txt has no rule for this path: allowed.
    NoRuleMatched,
    /// `/robots.txt` itself: always allowed.
    RobotsTxtPath,
    /// robots.txt is unavailable (4xx): allowed.
    Unavailable {
        /// The status.
        status: u16,
    },
    /// More redirects than allowed: treated as unavailable, allowed.
    TooManyRedirects,
    /// robots.txt is unreachable and there is no usable copy: disallowed.
    Unreachable {
        /// Why.
        cause: Unreachable,
    },
    /// The destination resolves to an address the guard refuses (set by the layer; the
    /// policy never sees such requests).
    DestinationDenied {
        /// What the connector said.
        cause: crate::net::ConnectError,
    },
    /// Fleet mode: the fleet's Redis cannot be reached and `cluster.on_error` is
    /// `refuse`, so the request was answered `503` before robots.txt was looked at (set by
    /// the layer for the audit record; the policy never makes it).
    ClusterUnavailable,
    /// An operator's override decided.
    Override {
        /// Allow or deny.
        action: OverrideAction,
        /// The host pattern.
        hosts: String,
        /// The operator's reason.
        reason: Arc<str>,
    },
}

impl Reason {
    /// The class of the reason (the audit log's and the metrics' `reason`).
    pub fn class(&self) -> ReasonClass {
        match self {
            Reason::Rule { kind: RuleKind::Allow, .. } => ReasonClass::AllowRule,
            Reason::Rule { kind: RuleKind::Disallow, .. } => ReasonClass::DisallowRule,
            Reason::NoRuleMatched => ReasonClass::NoRule,
            Reason::RobotsTxtPath => ReasonClass::RobotsTxt,
            Reason::Unavailable { .. } => ReasonClass::RobotsUnavailable,
            Reason::TooManyRedirects => ReasonClass::RobotsRedirectLimit,
            Reason::Unreachable { .. } => ReasonClass::RobotsUnreachable,
            Reason::DestinationDenied { .. } => ReasonClass::DestinationDenied,
            Reason::ClusterUnavailable => ReasonClass::ClusterUnavailable,
            Reason::Override { .. } => ReasonClass::Override,
        }
    }
}

/// The policy's answer for one request.
#[derive(Debug, Clone)]
pub struct Decision {
    /// Whether the request may go to the origin.
    pub allowed: bool,
    /// The origin.
    pub origin: Arc<Origin>,
    /// The product token the decision is for.
    pub agent: Arc<str>,
    /// The profile used.
    pub profile: Profile,
    /// Why.
    pub reason: Reason,
    /// The robots.txt copy the decision rests on, if any.
    pub robots: Option<Arc<RobotsCopy>>,
    /// The latest failed refresh, when the decision rests on a failure or on a copy kept
    /// because refreshing failed.
    pub failure: Option<Arc<Failure>>,
    /// Age of the copy used.
    pub age: Option<Duration>,
    /// The copy used was past its freshness (being refreshed, or kept after a failure).
    pub stale: bool,
    /// The site's AI-usage preferences for the request's purpose, when it declared one and
    /// robots.txt allows the path (`None` otherwise: no purpose, a disallowed path, an
    /// override, `/robots.txt` itself).
    pub usage: Option<Arc<UsageDecision>>,
    /// What else the robots.txt verdict said, when it said more (rare: `None` otherwise).
    pub notes: Option<Box<VerdictNotes>>,
}

/// The rarer parts of a robots.txt verdict (see [`crate::rep::Verdict`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictNotes {
    /// The conservative profile judged the path as servers would see it (`%2F` decoded,
    /// slashes merged), and that form decided.
    pub server_path: Option<ServerPath>,
    /// A line the 500 KiB limit cut and that was dropped may have been a rule for this
    /// path.
    pub cut_line: Option<u32>,
}

impl Decision {
    /// A decision no robots.txt copy took part in (`/robots.txt` itself, an override, a
    /// refused destination, fleet mode refusing): no copy, failure, age or usage.
    pub fn without_robots(
        origin: Arc<Origin>,
        agent: Arc<str>,
        profile: Profile,
        reason: Reason,
        allowed: bool,
    ) -> Decision {
        Decision {
            allowed,
            origin,
            agent,
            profile,
            reason,
            robots: None,
            failure: None,
            age: None,
            stale: false,
            usage: None,
            notes: None,
        }
    }

    /// What becomes of the request by this decision alone, enforced or, `report_only`,
    /// only reported (pacing and fleet mode may refuse it still).
    pub fn outcome(&self, report_only: bool) -> Outcome {
        let denied = matches!(self.reason, Reason::DestinationDenied { .. });
        Outcome::of(self.allowed, self.usage_refused(), denied, report_only)
    }

    /// Whether robots.txt allows the path but the site's usage preferences refuse the
    /// request's purpose.
    pub fn usage_refused(&self) -> bool {
        self.allowed && self.usage.as_ref().is_some_and(|u| u.refused.is_some())
    }

    /// Whether the robots.txt copy the decision rests on has `crawl-delay` or
    /// `request-rate` lines that were read (a cheap test, made for every request).
    #[inline]
    pub fn has_pace_hints(&self) -> bool {
        match self.robots.as_deref() {
            Some(RobotsCopy { content: CopyContent::Parsed(r), .. }) => r.has_pace_hints(),
            _ => false,
        }
    }

    /// What the robots.txt copy asks the decision's product token to wait between
    /// requests at `now` (a `request-rate` may name a time of day, in UTC), with its line.
    pub fn pace_hint(&self, now: SystemTime) -> Option<PaceHint> {
        let CopyContent::Parsed(r) = &self.robots.as_deref()?.content else { return None };
        if !r.has_pace_hints() {
            return None;
        }
        let day_secs = now.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_secs() % 86_400);
        r.pace_with(self.profile, &self.agent, (day_secs / 60) as u16)
    }

    /// The deciding rule, when a rule decided: its kind, text, line, reading and whether
    /// Google's index.html rule implied it.
    pub fn rule(&self) -> Option<DecidingRule<'_>> {
        match &self.reason {
            Reason::Rule { kind, line, reading, implied_by_index_html, .. } => Some(DecidingRule {
                kind: *kind,
                pattern: self.rule_pattern().unwrap_or(""),
                line: *line,
                reading: *reading,
                implied_by_index_html: *implied_by_index_html,
            }),
            _ => None,
        }
    }

    /// The text of the deciding rule, as written in the robots.txt.
    pub fn rule_pattern(&self) -> Option<&str> {
        let Reason::Rule { id, reading, .. } = &self.reason else { return None };
        match &self.robots.as_ref()?.content {
            CopyContent::Parsed(r) => r.rule(*id, *reading).map(|m| m.pattern),
            _ => None,
        }
    }

    /// The robots.txt facts (of the copy used, else of the failed fetch).
    pub fn fetch_facts(&self) -> Option<&FetchFacts> {
        match (&self.robots, &self.failure) {
            (Some(copy), _) => Some(&copy.facts),
            (None, Some(f)) => Some(&f.facts),
            (None, None) => None,
        }
    }
}

impl fmt::Display for Decision {
    /// What decided, in a line: `line 4: disallow: /private`, `robots.txt unreachable
    /// (HTTP status 503): disallow all`, ...
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.reason {
            Reason::Rule { kind, line, reading, implied_by_index_html, readings_disagree, .. } => {
                write!(f, "line {line}: {}: {}", kind.as_str(), self.rule_pattern().unwrap_or(""))?;
                if *implied_by_index_html {
                    f.write_str(" (also allows its directory)")?;
                }
                if *readings_disagree {
                    write!(f, " ({} reading)", reading.as_str())?;
                }
                Ok(())
            }
            Reason::NoRuleMatched => f.write_str("no rule matched"),
            Reason::RobotsTxtPath => f.write_str("/robots.txt is always allowed"),
            Reason::Unavailable { status } => write!(f, "robots.txt unavailable ({status}): allow all"),
            Reason::TooManyRedirects => f.write_str("robots.txt redirect limit exceeded: allow all"),
            Reason::Unreachable { cause } => write!(f, "robots.txt unreachable ({cause}): disallow all"),
            Reason::DestinationDenied { cause } => write!(f, "{cause}"),
            Reason::ClusterUnavailable => f.write_str(
                "the fleet's Redis cannot be reached and cluster.on_error is \"refuse\": not sent",
            ),
            Reason::Override { action, hosts, reason } => {
                write!(f, "override: {} {hosts} ({reason})", action.as_str())
            }
        }?;
        if let Some(notes) = &self.notes {
            if let Some(server) = &notes.server_path {
                write!(f, " (as {server})")?;
            }
            if let Some(line) = notes.cut_line {
                write!(
                    f,
                    " (robots.txt is over 500 KiB: line {line}, cut by the limit and dropped, may have been \
                     a rule for this path)"
                )?;
            }
        }
        if self.stale {
            match &self.failure {
                Some(fail) => write!(f, " [stale copy: refresh failed: {}]", fail.cause)?,
                None => f.write_str(" [stale copy, refreshing]")?,
            }
        }
        Ok(())
    }
}

/// How a decision reads in the audit log (the memo is in `audit_text.rs`).
impl DecisionKey {
    /// The key of `d`, if decisions like it are remembered.
    pub(crate) fn of(d: &Decision, report_only: bool) -> Option<DecisionKey> {
        Some(DecisionKey {
            origin: d.origin.clone(),
            agent: d.agent.clone(),
            profile: d.profile,
            report_only,
            allowed: d.allowed,
            usage_refused: d.usage_refused(),
            rule: Self::rule_of(d)?,
        })
    }

    /// Whether `d` reads as this key's decisions do (no reference counts touched).
    pub(crate) fn is(&self, d: &Decision, report_only: bool) -> bool {
        self.report_only == report_only
            && self.allowed == d.allowed
            && self.usage_refused == d.usage_refused()
            && self.profile == d.profile
            && Self::rule_of(d) == Some(self.rule)
            && (Arc::ptr_eq(&self.agent, &d.agent) || self.agent == d.agent)
            && (Arc::ptr_eq(&self.origin, &d.origin) || self.origin == d.origin)
    }

    /// `Some(rule)` for a remembered kind of decision: a fresh copy's rule or no rule.
    #[allow(clippy::option_option)]
    fn rule_of(d: &Decision) -> Option<Option<(RuleId, Reading, bool, bool)>> {
        // Notes make a decision's text its own: written out. (A decision with usage
        // preferences is remembered by whether they refused it, which is its outcome; its
        // `usage` object is written after the remembered text.)
        if d.stale || d.notes.is_some() {
            return None;
        }
        match &d.reason {
            Reason::Rule { id, reading, implied_by_index_html, readings_disagree, .. } => {
                Some(Some((*id, *reading, *implied_by_index_html, *readings_disagree)))
            }
            Reason::NoRuleMatched => Some(None),
            _ => None,
        }
    }
}

/// Fills in the verdict of a usable copy (and, with a purpose, the usage preferences).
pub(super) fn judge(d: &mut Decision, copy: &RobotsCopy, path: &str, usage: UsageCheck) {
    match &copy.content {
        CopyContent::Unavailable { status } => {
            d.allowed = true;
            d.reason = Reason::Unavailable { status: *status };
            d.usage = no_statement(usage);
        }
        CopyContent::TooManyRedirects => {
            d.allowed = true;
            d.reason = Reason::TooManyRedirects;
            d.usage = no_statement(usage);
        }
        CopyContent::Parsed(robots) if !usage.purpose.is_empty() => {
            let u = robots.usage_with(d.profile, &d.agent, path);
            verdict_into(d, u.verdict());
            if d.allowed && d.reason != Reason::RobotsTxtPath {
                let prefs = usage.purpose.categories().map(|c| CategoryPreference::of(u.get(c))).collect();
                d.usage = Some(Arc::new(UsageDecision::new(usage.purpose, usage.unknown, prefs)));
            }
        }
        CopyContent::Parsed(robots) => verdict_into(d, &robots.check_with(d.profile, &d.agent, path)),
    }
}

/// With a purpose and no robots.txt to state preferences: every category unknown.
fn no_statement(usage: UsageCheck) -> Option<Arc<UsageDecision>> {
    if usage.purpose.is_empty() {
        return None;
    }
    let prefs = usage.purpose.categories().map(CategoryPreference::unknown).collect();
    Some(Arc::new(UsageDecision::new(usage.purpose, usage.unknown, prefs)))
}

/// The verdict's answer and reason.
fn verdict_into(d: &mut Decision, v: &crate::rep::Verdict<'_>) {
    d.allowed = v.allowed();
    d.reason = match v.reason() {
        VerdictReason::Rule(r) => Reason::Rule {
            id: r.id,
            kind: r.kind,
            line: r.line,
            reading: r.reading,
            implied_by_index_html: r.implied_by_index_html,
            readings_disagree: v.readings_disagree(),
        },
        VerdictReason::NoRuleMatched => Reason::NoRuleMatched,
        VerdictReason::RobotsTxt => Reason::RobotsTxtPath,
    };
    if v.server_path().is_some() || v.cut_line().is_some() {
        d.notes =
            Some(Box::new(VerdictNotes { server_path: v.server_path().cloned(), cut_line: v.cut_line() }));
    }
}

/// A decision on `body` as a fetched robots.txt of `origin`, for tests of what reads
/// decisions (the audit log).
#[cfg(test)]
pub(crate) fn decision_on(
    copy: &Arc<RobotsCopy>,
    origin: &Arc<Origin>,
    agent: &Arc<str>,
    profile: Profile,
    path: &str,
) -> Decision {
    let mut d = Decision {
        allowed: true,
        origin: origin.clone(),
        agent: agent.clone(),
        profile,
        reason: Reason::NoRuleMatched,
        robots: Some(copy.clone()),
        failure: None,
        age: Some(Duration::from_millis(1500)),
        stale: false,
        usage: None,
        notes: None,
    };
    judge(&mut d, copy, path, UsageCheck::default());
    d
}

/// [`decision_on`] for a request made for a purpose.
#[cfg(test)]
pub(crate) fn decision_for_on(
    copy: &Arc<RobotsCopy>,
    origin: &Arc<Origin>,
    agent: &Arc<str>,
    profile: Profile,
    path: &str,
    usage: UsageCheck,
) -> Decision {
    let mut d = decision_on(copy, origin, agent, profile, "/");
    d.usage = None;
    d.notes = None;
    judge(&mut d, copy, path, usage);
    d
}
