//! How the policy is configured: the profile, freshness and failure handling, the cache
//! bounds, and the operator's overrides.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use crate::origin::HostPattern;
use crate::rep::Profile;

/// How the policy caches and judges robots.txt files.
#[derive(Debug, Clone)]
pub struct PolicyConfig {
    /// How robots.txt files are read.
    pub profile: Profile,
    /// Freshness of a copy without `Cache-Control: max-age`.
    pub default_ttl: Duration,
    /// Lower bound for `max-age` (also applied to `no-cache`).
    pub min_ttl: Duration,
    /// Upper bound for `max-age` (RFC 9309: no more than 24 hours).
    pub max_ttl: Duration,
    /// How long after it expired a good copy is still used while the origin is unreachable.
    pub stale_if_error: Duration,
    /// First retry delay after an unreachable robots.txt (doubles per failure).
    pub retry_min: Duration,
    /// Longest retry delay.
    pub retry_max: Duration,
    /// First retry delay after 429 or 503 without `Retry-After` (doubles per failure).
    pub retry_busy: Duration,
    /// Most origins kept (default 8,192: a broad crawl moves on, and an origin evicted
    /// is fetched again when it comes back).
    pub max_entries: u64,
    /// Most bytes kept: the parsed files' heap and about 2 KiB per origin besides
    /// (default 32 MiB).
    pub max_bytes: u64,
    /// An origin not asked about for this long leaves the cache, its copy with it
    /// (default 1 h; zero: only the bounds above evict): a crawl that moved on gives its
    /// memory back. Asked about again, its robots.txt is fetched again. Expired origins
    /// leave at the cache's next maintenance: when it is used, or
    /// [`RobotsPolicy::sync`](crate::policy::RobotsPolicy::sync).
    pub max_idle: Duration,
    /// Host overrides, first match wins.
    pub overrides: Vec<Override>,
}

impl Default for PolicyConfig {
    fn default() -> Self {
        PolicyConfig {
            profile: Profile::default(),
            default_ttl: Duration::from_secs(24 * 3600),
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(24 * 3600),
            stale_if_error: Duration::from_secs(30 * 24 * 3600),
            retry_min: Duration::from_secs(60),
            retry_max: Duration::from_secs(3600),
            retry_busy: Duration::from_secs(15),
            max_entries: 8_192,
            max_bytes: 32 * 1024 * 1024,
            max_idle: Duration::from_secs(3600),
            overrides: Vec::new(),
        }
    }
}

/// What an override does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OverrideAction {
    /// Allow every request to the host, whatever its robots.txt says.
    Allow,
    /// Deny every request to the host.
    Deny,
}

impl OverrideAction {
    /// `"allow"` or `"deny"`.
    pub fn as_str(self) -> &'static str {
        match self {
            OverrideAction::Allow => "allow",
            OverrideAction::Deny => "deny",
        }
    }
}

/// An operator's rule for a host pattern.
#[derive(Debug, Clone)]
pub struct Override {
    /// The hosts.
    pub hosts: HostPattern,
    /// Allow or deny.
    pub action: OverrideAction,
    /// Why (recorded in every decision it makes).
    pub reason: Arc<str>,
    /// No longer applies from this time on.
    pub expires: Option<SystemTime>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::origin::Host;

    #[test]
    fn host_patterns() {
        let exact = HostPattern::parse("Example.COM").unwrap();
        let sub = HostPattern::parse("*.example.com").unwrap();
        let h = |s: &str| Host::parse(s).unwrap();
        assert!(exact.matches(&h("example.com")));
        assert!(!exact.matches(&h("www.example.com")));
        assert!(sub.matches(&h("www.example.com")));
        assert!(sub.matches(&h("a.b.example.com")));
        assert!(!sub.matches(&h("example.com")));
        assert!(!sub.matches(&h("badexample.com")));
        assert!(HostPattern::parse("*.10.0.0.1").is_err());
        assert!(HostPattern::parse("[::1]").unwrap().matches(&h("[::1]")));
        assert_eq!(sub.to_string(), "*.example.com");
    }
}
