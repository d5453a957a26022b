//! How pacing is configured ([`PacingConfig`], [`HostRule`]) and the delay that follows
//! for one lane ([`Plan`]): the longest of the minimum, the host rule, the robots.txt
//! hint, capped.

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::origin::{HostPattern, Origin};
use crate::rep::PaceHint;

/// How requests are paced. The defaults pace by robots.txt alone: no minimum delay, the
/// delay capped at 30 s (as Nutch, Heritrix and StormCrawler cap `crawl-delay`), a
/// request held at most 60 s, back-off after 429/503 from 5 s up to an hour.
#[derive(Debug, Clone, PartialEq)]
pub struct PacingConfig {
    /// Off: nothing is held and nothing backs off (robots.txt hints are ignored).
    pub enabled: bool,
    /// Every origin's requests (per product token) are at least this far apart.
    pub min_delay: Duration,
    /// No delay is longer than this (a longer `crawl-delay` is clamped, and the audit
    /// record says so).
    pub max_delay: Duration,
    /// A request that would wait longer is answered `503` at once.
    pub max_wait: Duration,
    /// Requests held per origin and token at most; more are answered `503` at once.
    pub max_queue_per_origin: usize,
    /// The first pause after a 429 or 503 without `Retry-After` (doubling with each
    /// further one).
    pub initial_backoff: Duration,
    /// The longest pause after a 429 or 503 (also bounds `Retry-After`).
    pub max_backoff: Duration,
    /// Origins and tokens whose pacing state is kept at most (state of idle ones is
    /// dropped); a request for a new one when all are busy is answered `503`.
    pub max_origins: usize,
    /// Per-host delays and concurrency caps, first match wins.
    pub hosts: Vec<HostRule>,
}

impl Default for PacingConfig {
    fn default() -> Self {
        PacingConfig {
            enabled: true,
            min_delay: Duration::ZERO,
            max_delay: Duration::from_secs(30),
            max_wait: Duration::from_secs(60),
            max_queue_per_origin: 1000,
            initial_backoff: Duration::from_secs(5),
            max_backoff: Duration::from_secs(3600),
            max_origins: 100_000,
            hosts: Vec::new(),
        }
    }
}

/// An operator's pacing rule for a host pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct HostRule {
    /// The hosts (`example.com`, `*.example.com`).
    pub hosts: HostPattern,
    /// At least this far apart.
    pub delay: Option<Duration>,
    /// At most this many requests in flight at once (until their response headers).
    pub max_concurrency: Option<u32>,
    /// Why (recorded in every decision the rule paces).
    pub reason: Arc<str>,
    /// No longer applies from this time on.
    pub expires: Option<SystemTime>,
}

/// Where the delay between two requests of a lane came from.
#[derive(Debug, Clone, PartialEq)]
pub enum DelaySource {
    /// `pacing.min_delay`.
    MinDelay,
    /// robots.txt: `crawl-delay` or `request-rate` for the token, with its line.
    Robots(PaceHint),
    /// A `[[pacing.hosts]]` rule.
    Host {
        /// Its host pattern.
        hosts: Arc<str>,
        /// Its reason.
        reason: Arc<str>,
    },
}

impl DelaySource {
    /// `min-delay`, `crawl-delay`, `request-rate` or `host-override` (the audit log's
    /// `pace.source`).
    pub fn class(&self) -> &'static str {
        match self {
            DelaySource::MinDelay => "min-delay",
            DelaySource::Robots(h) => h.source.directive(),
            DelaySource::Host { .. } => "host-override",
        }
    }
}

impl fmt::Display for DelaySource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DelaySource::MinDelay => f.write_str("pacing.min_delay"),
            DelaySource::Robots(h) => write!(f, "robots.txt {h}"),
            DelaySource::Host { hosts, reason } => write!(f, "pacing.hosts {hosts}: {reason}"),
        }
    }
}

/// What paces one lane (an origin and a product token): the delay between requests, where
/// it came from, and the concurrency cap.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    /// Requests start at least this far apart (after the cap).
    pub delay: Duration,
    /// Where the delay came from (`None`: no delay).
    pub source: Option<DelaySource>,
    /// The delay asked for, when it was longer than `pacing.max_delay` and cut to it.
    pub clamped_from: Option<Duration>,
    /// At most this many requests in flight at once.
    pub max_concurrency: Option<u32>,
}

impl Plan {
    /// Nothing to pace: no delay and no concurrency cap.
    pub fn is_free(&self) -> bool {
        self.delay.is_zero() && self.max_concurrency.is_none()
    }
}

impl PacingConfig {
    /// Whether every lane may need pacing whatever its robots.txt says: a minimum delay or
    /// host rules.
    pub(crate) fn paces_by_itself(&self) -> bool {
        self.enabled && (!self.min_delay.is_zero() || !self.hosts.is_empty())
    }

    /// The host rule for `origin` at `now`, if one applies.
    pub fn host_rule(&self, origin: &Origin, now: SystemTime) -> Option<&HostRule> {
        self.hosts.iter().find(|r| r.expires.is_none_or(|e| now < e) && r.hosts.matches(origin.host()))
    }

    /// The plan for `origin` given the robots.txt hint for the token: the delay is
    /// `max(min_delay, host rule, hint)`, capped at `max_delay`.
    pub fn plan(&self, origin: &Origin, hint: Option<PaceHint>, now: SystemTime) -> Plan {
        let mut best: Option<(Duration, DelaySource)> = None;
        let mut consider = |d: Duration, source: DelaySource| {
            if !d.is_zero() && best.as_ref().is_none_or(|(b, _)| d > *b) {
                best = Some((d, source));
            }
        };
        consider(self.min_delay, DelaySource::MinDelay);
        let rule = if self.hosts.is_empty() { None } else { self.host_rule(origin, now) };
        if let Some(r) = rule
            && let Some(d) = r.delay
        {
            consider(d, DelaySource::Host { hosts: r.hosts.to_string().into(), reason: r.reason.clone() });
        }
        if let Some(h) = hint {
            consider(seconds(h.delay), DelaySource::Robots(h));
        }
        let max_concurrency = rule.and_then(|r| r.max_concurrency);
        match best {
            None => Plan { delay: Duration::ZERO, source: None, clamped_from: None, max_concurrency },
            Some((d, source)) => {
                let clamped_from = (d > self.max_delay).then_some(d);
                Plan { delay: d.min(self.max_delay), source: Some(source), clamped_from, max_concurrency }
            }
        }
    }
}

/// Seconds as a duration, saturating (robots.txt may say anything finite).
fn seconds(s: f64) -> Duration {
    Duration::try_from_secs_f64(s).unwrap_or(if s > 0.0 { Duration::MAX } else { Duration::ZERO })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rep::PaceSource;

    fn hint(delay: f64, line: u32) -> PaceHint {
        PaceHint { delay, line, source: PaceSource::CrawlDelay }
    }

    #[test]
    fn the_longest_delay_wins_and_the_cap_is_said() {
        let origin = Origin::parse("https://www.example.com/").unwrap();
        let now = SystemTime::now();
        let mut c = PacingConfig::default();
        assert!(c.plan(&origin, None, now).is_free());
        assert!(!c.paces_by_itself());
        let p = c.plan(&origin, Some(hint(0.5, 3)), now);
        assert_eq!(
            (p.delay, p.source.as_ref().map(DelaySource::class)),
            (Duration::from_millis(500), Some("crawl-delay"))
        );
        c.min_delay = Duration::from_secs(1);
        assert!(c.paces_by_itself());
        let p = c.plan(&origin, Some(hint(0.5, 3)), now);
        assert_eq!((p.delay, p.source), (Duration::from_secs(1), Some(DelaySource::MinDelay)));
        c.hosts.push(HostRule {
            hosts: HostPattern::parse("*.example.com").unwrap(),
            delay: Some(Duration::from_secs(2)),
            max_concurrency: Some(4),
            reason: "asked by their ops team".into(),
            expires: None,
        });
        let p = c.plan(&origin, Some(hint(0.5, 3)), now);
        assert_eq!(p.delay, Duration::from_secs(2));
        assert_eq!(p.max_concurrency, Some(4));
        assert_eq!(p.source.unwrap().to_string(), "pacing.hosts *.example.com: asked by their ops team");
        // Above the cap: clamped, and the plan says from what.
        let p = c.plan(&origin, Some(hint(120.0, 7)), now);
        assert_eq!((p.delay, p.clamped_from), (Duration::from_secs(30), Some(Duration::from_secs(120))));
        assert_eq!(p.source.unwrap().to_string(), "robots.txt line 7: crawl-delay: 120");
        let p = c.plan(&origin, Some(hint(1e300, 7)), now);
        assert_eq!(p.delay, Duration::from_secs(30));
        // An expired rule no longer applies; another host is not matched.
        c.hosts[0].expires = Some(now - Duration::from_secs(1));
        assert_eq!(c.plan(&origin, None, now).delay, Duration::from_secs(1));
        let other = Origin::parse("https://example.org/").unwrap();
        c.hosts[0].expires = None;
        assert_eq!(c.plan(&other, None, now).max_concurrency, None);
    }
}
