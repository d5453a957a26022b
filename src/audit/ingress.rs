//! The record of one bot request to a site robotsgate guards (`"type": "ingress"`): what
//! the site's robots.txt said of it, and what the bot was answered.

use serde::Serialize;

use super::line::{json_bool, json_num, json_opt_str, json_str};

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

impl IngressRecord {
    /// Writes the record's JSON line (with its newline) at the end of `o`: what
    /// `serde_json` writes for it (same keys, order and values; a test holds the two
    /// together), written directly, as it is on every bot request's path.
    pub(super) fn write_line(&self, o: &mut Vec<u8>) {
        fn opt_num(o: &mut Vec<u8>, n: Option<impl itoa::Integer>) {
            match n {
                Some(n) => json_num(o, n),
                None => o.extend_from_slice(b"null"),
            }
        }
        o.extend_from_slice(b"{\"schema_version\":");
        json_num(o, self.schema_version);
        o.extend_from_slice(b",\"type\":");
        json_str(o, self.kind);
        o.extend_from_slice(b",\"time\":");
        json_str(o, &self.time);
        o.extend_from_slice(b",\"request_id\":");
        json_str(o, &self.request_id);
        o.extend_from_slice(b",\"client\":");
        json_opt_str(o, self.client.as_deref());
        o.extend_from_slice(b",\"user_agent\":");
        json_str(o, &self.user_agent);
        o.extend_from_slice(b",\"token\":");
        json_opt_str(o, self.token.as_deref());
        o.extend_from_slice(b",\"site_group\":");
        json_bool(o, self.site_group);
        o.extend_from_slice(b",\"method\":");
        json_str(o, &self.method);
        o.extend_from_slice(b",\"path\":");
        json_str(o, &self.path);
        o.extend_from_slice(b",\"mode\":");
        json_str(o, self.mode);
        o.extend_from_slice(b",\"outcome\":");
        json_str(o, self.outcome);
        o.extend_from_slice(b",\"reason\":");
        json_str(o, self.reason);
        o.extend_from_slice(b",\"rule\":");
        match &self.rule {
            Some(r) => {
                o.extend_from_slice(b"{\"kind\":");
                json_str(o, r.kind);
                o.extend_from_slice(b",\"pattern\":");
                json_str(o, &r.pattern);
                o.extend_from_slice(b",\"line\":");
                json_num(o, r.line);
                o.push(b'}');
            }
            None => o.extend_from_slice(b"null"),
        }
        o.extend_from_slice(b",\"group_line\":");
        opt_num(o, self.group_line);
        o.extend_from_slice(b",\"explanation\":");
        json_str(o, &self.explanation);
        o.extend_from_slice(b",\"robots_sha256\":");
        json_opt_str(o, self.robots_sha256.as_deref());
        o.extend_from_slice(b",\"robots_fetched\":");
        json_opt_str(o, self.robots_fetched.as_deref());
        o.extend_from_slice(b",\"robots_fetched_sha256\":");
        json_opt_str(o, self.robots_fetched_sha256.as_deref());
        o.extend_from_slice(b",\"pace\":");
        json_opt_str(o, self.pace.as_deref());
        o.extend_from_slice(b",\"retry_after\":");
        opt_num(o, self.retry_after);
        o.extend_from_slice(b",\"identity\":");
        json_opt_str(o, self.identity);
        o.extend_from_slice(b",\"identity_method\":");
        json_opt_str(o, self.identity_method);
        o.extend_from_slice(b",\"identity_why\":");
        json_opt_str(o, self.identity_why);
        o.extend_from_slice(b",\"identity_detail\":");
        json_opt_str(o, self.identity_detail.as_deref());
        o.extend_from_slice(b",\"identity_policy\":");
        json_opt_str(o, self.identity_policy);
        o.extend_from_slice(b",\"operator\":");
        json_opt_str(o, self.operator.as_deref());
        o.extend_from_slice(b",\"status\":");
        opt_num(o, self.status);
        o.extend_from_slice(b",\"cluster\":");
        json_opt_str(o, self.cluster);
        o.extend_from_slice(b"}\n");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn serde_line(r: &IngressRecord) -> String {
        let mut line = serde_json::to_string(r).unwrap();
        line.push('\n');
        line
    }

    #[test]
    fn the_written_line_is_what_serde_json_writes() {
        let empty = IngressRecord {
            schema_version: super::super::SCHEMA_VERSION,
            kind: "ingress",
            time: "2026-11-27T01:02:03.456789Z".into(),
            request_id: "0000000000000001-aa".into(),
            client: None,
            user_agent: String::new(),
            token: None,
            site_group: false,
            method: "GET".into(),
            path: "/".into(),
            mode: "enforce",
            outcome: "allowed",
            reason: "no-rule",
            rule: None,
            group_line: None,
            explanation: String::new(),
            robots_sha256: None,
            robots_fetched: None,
            robots_fetched_sha256: None,
            pace: None,
            retry_after: None,
            identity: None,
            identity_method: None,
            identity_why: None,
            identity_detail: None,
            identity_policy: None,
            operator: None,
            status: None,
            cluster: None,
        };
        let full = IngressRecord {
            client: Some("2001:db8::1".into()),
            user_agent: "Mozilla/5.0 \"quoted\" \\ back\tslash \u{1} caf\u{e9} \u{2028}".into(),
            token: Some("GPTBot".into()),
            site_group: true,
            method: "POST".into(),
            path: "/a?b=\"c\"&d=%00".into(),
            mode: "report-only",
            outcome: "would-pace",
            reason: "disallow-rule",
            rule: Some(IngressRule { kind: "disallow", pattern: "/a\\*\"".into(), line: 7 }),
            group_line: Some(u32::MAX),
            explanation: "line 7: disallow: /a\nnext".into(),
            robots_sha256: Some("ab".repeat(32)),
            robots_fetched: Some("2026-11-27T00:00:00Z".into()),
            robots_fetched_sha256: Some("cd".repeat(32)),
            pace: Some("line 3: crawl-delay: 10".into()),
            retry_after: Some(u64::MAX),
            identity: Some("failed"),
            identity_method: Some("signature"),
            identity_why: Some("bad_signature"),
            identity_detail: Some("key \"k\" of https://example.com".into()),
            identity_policy: Some("refuse"),
            operator: Some("OpenAI".into()),
            status: Some(403),
            cluster: Some("alone"),
            ..empty.clone()
        };
        for r in [&empty, &full] {
            let mut ours = Vec::new();
            r.write_line(&mut ours);
            let ours = String::from_utf8(ours).unwrap();
            assert_eq!(ours, serde_line(r));
        }
    }
}
