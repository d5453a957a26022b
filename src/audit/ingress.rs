//! The record of one bot request to a site robotsgate guards (`"type": "ingress"`): what
//! the site's robots.txt said of it, and what the bot was answered.

use serde::Serialize;

/// One bot request to the site, as logged (see `docs/audit-log.md`).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IngressRecord {
    /// [`SCHEMA_VERSION`](super::SCHEMA_VERSION).
    pub schema_version: u32,
    /// `"ingress"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When it was answered (RFC 3339, UTC).
    pub time: String,
    /// Unique, from the same series as the decision records' (`robotsgate audit explain
    /// LOG REQUEST_ID` finds it).
    pub request_id: String,
    /// The client's address (after trusted proxies' `Forwarded`/`X-Forwarded-For`).
    pub client: Option<String>,
    /// The `User-Agent` (its first 1024 bytes).
    pub user_agent: String,
    /// The product token it carries (`None`: a request held to `*`).
    pub token: Option<String>,
    /// The token is a group name of the site's file (not only a known agent).
    pub site_group: bool,
    /// The request method.
    pub method: String,
    /// Path and query.
    pub path: String,
    /// `enforce` or `report-only`.
    pub mode: &'static str,
    /// `allowed`, `disallowed`, `would-disallow`, `paced`, `would-pace`, `usage-refused`,
    /// `would-refuse-usage`, `identity-failed`, `would-fail-identity`,
    /// `cluster-unavailable` or `robots-txt` (a fetch of robots.txt itself).
    pub outcome: &'static str,
    /// The reason class (`disallow-rule`, `allow-rule`, `no-rule`, `robots-unavailable`,
    /// `robots-unreachable`, `usage-refused`, `robots-txt`).
    pub reason: &'static str,
    /// The deciding rule: kind, pattern, line.
    pub rule: Option<IngressRule>,
    /// The line of the group that held the bot.
    pub group_line: Option<u32>,
    /// The decision in words.
    pub explanation: String,
    /// SHA-256 of the robots.txt the decision rests on.
    pub robots_sha256: Option<String>,
    /// When this bot (token and client network) last fetched robots.txt, if it did.
    pub robots_fetched: Option<String>,
    /// SHA-256 of the robots.txt it got then.
    pub robots_fetched_sha256: Option<String>,
    /// The pacing directive that applied (`line 3: crawl-delay: 10`).
    pub pace: Option<String>,
    /// Seconds the bot was told to wait (`Retry-After`), when paced.
    pub retry_after: Option<u64>,
    /// The identity check's verdict (`verified`, `unverified`, `failed`), when one ran.
    pub identity: Option<&'static str>,
    /// How it was verified (`ip_range`, `reverse_dns`, `signature`), when it was.
    pub identity_method: Option<&'static str>,
    /// Why it was not verified (`not_in_ranges`, `bad_signature`, `replayed_signature`,
    /// `pending`, …), when it was not.
    pub identity_why: Option<&'static str>,
    /// The verdict in words, with what it rests on: the IP list, the confirmed reverse DNS
    /// name, the `Signature-Agent` and key, or what the check said no to.
    pub identity_detail: Option<String>,
    /// How the policy used the verdict: `refuse` (refused as an impersonator,
    /// `impersonators = "refuse"`), `require` (refused as not verified: the operator has
    /// `require = true`), `star` (held to `User-agent: *`), `allow` (failed, judged as the
    /// bot it claims to be, reported only) or `as-claimed` (verified, or unverified and not
    /// required: judged as the bot it claims to be).
    pub identity_policy: Option<&'static str>,
    /// The operator the request claims (by its token or its `Signature-Agent`), when one
    /// does.
    pub operator: Option<String>,
    /// The status sent to the client (`None`: the service failed).
    pub status: Option<u16>,
    /// Fleet mode (shared pacing): `"alone"` when the bot was paced and the fleet's store
    /// (Redis) could not be reached, so this replica paced it on its own (or, outcome
    /// `cluster-unavailable`, refused it); `None` otherwise, and always without fleet mode.
    pub cluster: Option<&'static str>,
}

/// The rule of an [`IngressRecord`].
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct IngressRule {
    /// `allow` or `disallow`.
    pub kind: &'static str,
    /// The pattern as written.
    pub pattern: String,
    /// Its 1-based line.
    pub line: u32,
}
