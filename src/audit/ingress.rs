//! The record of one bot request to a site robotsgate guards (`"type": "ingress"`): what
//! the site's robots.txt said of it, and what the bot was answered.

use std::fmt;
use std::net::IpAddr;
use std::time::SystemTime;

use serde::Serialize;

use super::line::{JsonText, ip_into, json_bool, json_num, json_opt_str, json_str};
use super::timestamp::{rfc3339, rfc3339_into};

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
    /// The host name (lower-case) whose own robots.txt judged the request, when the ingress
    /// was given host names and the request named one of them; `None`: the default site's.
    pub host: Option<String>,
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
    /// The record's line, borrowed from it.
    pub(super) fn line(&self) -> IngressRecordRef<'_> {
        IngressRecordRef {
            schema_version: self.schema_version,
            kind: self.kind,
            time: Text::Str(&self.time),
            request_id: &self.request_id,
            client: self.client.as_deref().map(Text::Str),
            user_agent: &self.user_agent,
            token: self.token.as_deref(),
            site_group: self.site_group,
            method: &self.method,
            path: &self.path,
            mode: self.mode,
            outcome: self.outcome,
            reason: self.reason,
            rule: self.rule.as_ref().map(|r| (r.kind, &*r.pattern, r.line)),
            group_line: self.group_line,
            explanation: Text::Str(&self.explanation),
            robots_sha256: self.robots_sha256.as_deref(),
            robots_fetched: self.robots_fetched.as_deref().map(Text::Str),
            robots_fetched_sha256: self.robots_fetched_sha256.as_deref(),
            pace: self.pace.as_deref().map(Text::Str),
            retry_after: self.retry_after,
            identity: self.identity,
            identity_method: self.identity_method,
            identity_why: self.identity_why,
            identity_detail: self.identity_detail.as_deref().map(Text::Str),
            identity_policy: self.identity_policy,
            operator: self.operator.as_deref(),
            status: self.status,
            cluster: self.cluster,
            host: self.host.as_deref(),
        }
    }

    /// Writes the record's JSON line (with its newline) at the end of `o`: what
    /// `serde_json` writes for it (same keys, order and values; a test holds the two
    /// together).
    #[cfg(test)]
    pub(super) fn write_line(&self, o: &mut Vec<u8>) {
        self.line().write(o);
    }
}

/// A text field of an [`IngressRecordRef`]: a string, or a value written as its text when the
/// line is (no string made for it on a request's path).
#[derive(Clone, Copy)]
pub(crate) enum Text<'a> {
    /// A string.
    Str(&'a str),
    /// A value's `Display`.
    Show(&'a dyn fmt::Display),
    /// A time, as [`rfc3339`] writes it.
    Time(SystemTime),
    /// An address, as `IpAddr`'s `Display` writes it.
    Ip(IpAddr),
}

impl Text<'_> {
    /// Written as a JSON string.
    fn write(self, o: &mut Vec<u8>) {
        match self {
            Text::Str(s) => json_str(o, s),
            Text::Show(v) => {
                o.push(b'"');
                let _ = fmt::Write::write_fmt(&mut JsonText(o), format_args!("{v}"));
                o.push(b'"');
            }
            Text::Time(t) => {
                o.push(b'"');
                rfc3339_into(o, t);
                o.push(b'"');
            }
            Text::Ip(ip) => {
                o.push(b'"');
                ip_into(o, ip);
                o.push(b'"');
            }
        }
    }

    fn to_owned(self) -> String {
        match self {
            Text::Str(s) => s.to_owned(),
            Text::Show(v) => v.to_string(),
            Text::Time(t) => rfc3339(t),
            Text::Ip(ip) => ip.to_string(),
        }
    }
}

fn write_opt(o: &mut Vec<u8>, t: Option<Text<'_>>) {
    match t {
        Some(t) => t.write(o),
        None => o.extend_from_slice(b"null"),
    }
}

/// An [`IngressRecord`] borrowed from what it is made of: what an
/// [observer](crate::ingress::IngressBuilder::observer) is given, and what the ingress
/// writes a bot request's line from, straight into the audit log's buffer, without the
/// owned record and its strings (it is on every bot request's path).
/// [`IngressRecordRef::to_record`] makes the owned record; the owned record's own line
/// is written by the same writer.
///
/// ```
/// use robotsgate::audit::IngressRecord;
/// use robotsgate::ingress::IngressLayer;
///
/// let layer = IngressLayer::builder()
///     .observer(|r| {
///         // The fields metrics want, without a copy...
///         let _ = (r.outcome(), r.reason(), r.token(), r.status());
///         // ...and the owned record, when one is kept.
///         let owned: IngressRecord = r.to_record();
///         assert_eq!(owned.outcome, r.outcome());
///     })
///     .build();
/// # let _ = layer;
/// ```
#[derive(Clone, Copy)]
pub struct IngressRecordRef<'a> {
    pub(crate) schema_version: u32,
    pub(crate) kind: &'static str,
    pub(crate) time: Text<'a>,
    pub(crate) request_id: &'a str,
    pub(crate) client: Option<Text<'a>>,
    pub(crate) user_agent: &'a str,
    pub(crate) token: Option<&'a str>,
    pub(crate) site_group: bool,
    pub(crate) method: &'a str,
    pub(crate) path: &'a str,
    pub(crate) mode: &'static str,
    pub(crate) outcome: &'static str,
    pub(crate) reason: &'static str,
    /// Kind, pattern, line.
    pub(crate) rule: Option<(&'static str, &'a str, u32)>,
    pub(crate) group_line: Option<u32>,
    pub(crate) explanation: Text<'a>,
    pub(crate) robots_sha256: Option<&'a str>,
    pub(crate) robots_fetched: Option<Text<'a>>,
    pub(crate) robots_fetched_sha256: Option<&'a str>,
    pub(crate) pace: Option<Text<'a>>,
    pub(crate) retry_after: Option<u64>,
    pub(crate) identity: Option<&'static str>,
    pub(crate) identity_method: Option<&'static str>,
    pub(crate) identity_why: Option<&'static str>,
    pub(crate) identity_detail: Option<Text<'a>>,
    pub(crate) identity_policy: Option<&'static str>,
    pub(crate) operator: Option<&'a str>,
    pub(crate) status: Option<u16>,
    pub(crate) cluster: Option<&'static str>,
    pub(crate) host: Option<&'a str>,
}

impl std::fmt::Debug for IngressRecordRef<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.to_record(), f)
    }
}

impl<'a> IngressRecordRef<'a> {
    /// [`IngressRecord::request_id`].
    pub fn request_id(&self) -> &'a str {
        self.request_id
    }

    /// [`IngressRecord::token`].
    pub fn token(&self) -> Option<&'a str> {
        self.token
    }

    /// [`IngressRecord::method`].
    pub fn method(&self) -> &'a str {
        self.method
    }

    /// [`IngressRecord::path`].
    pub fn path(&self) -> &'a str {
        self.path
    }

    /// [`IngressRecord::mode`].
    pub fn mode(&self) -> &'static str {
        self.mode
    }

    /// [`IngressRecord::outcome`].
    pub fn outcome(&self) -> &'static str {
        self.outcome
    }

    /// [`IngressRecord::reason`].
    pub fn reason(&self) -> &'static str {
        self.reason
    }

    /// [`IngressRecord::identity`].
    pub fn identity(&self) -> Option<&'static str> {
        self.identity
    }

    /// [`IngressRecord::identity_method`].
    pub fn identity_method(&self) -> Option<&'static str> {
        self.identity_method
    }

    /// [`IngressRecord::identity_why`].
    pub fn identity_why(&self) -> Option<&'static str> {
        self.identity_why
    }

    /// [`IngressRecord::status`].
    pub fn status(&self) -> Option<u16> {
        self.status
    }

    /// The owned record: every field, as the audit log's line has it.
    pub fn to_record(&self) -> IngressRecord {
        IngressRecord {
            schema_version: self.schema_version,
            kind: self.kind,
            time: self.time.to_owned(),
            request_id: self.request_id.to_owned(),
            client: self.client.map(Text::to_owned),
            user_agent: self.user_agent.to_owned(),
            token: self.token.map(str::to_owned),
            site_group: self.site_group,
            method: self.method.to_owned(),
            path: self.path.to_owned(),
            mode: self.mode,
            outcome: self.outcome,
            reason: self.reason,
            rule: self.rule.map(|(kind, pattern, line)| IngressRule {
                kind,
                pattern: pattern.to_owned(),
                line,
            }),
            group_line: self.group_line,
            explanation: self.explanation.to_owned(),
            robots_sha256: self.robots_sha256.map(str::to_owned),
            robots_fetched: self.robots_fetched.map(Text::to_owned),
            robots_fetched_sha256: self.robots_fetched_sha256.map(str::to_owned),
            pace: self.pace.map(Text::to_owned),
            retry_after: self.retry_after,
            identity: self.identity,
            identity_method: self.identity_method,
            identity_why: self.identity_why,
            identity_detail: self.identity_detail.map(Text::to_owned),
            identity_policy: self.identity_policy,
            operator: self.operator.map(str::to_owned),
            status: self.status,
            cluster: self.cluster,
            host: self.host.map(str::to_owned),
        }
    }

    /// Writes the line (with its newline) at the end of `o`: what `serde_json` writes for
    /// [`IngressRecordRef::to_record`] (same keys, order and values; tests hold them together).
    pub(crate) fn write(&self, o: &mut Vec<u8>) {
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
        self.time.write(o);
        o.extend_from_slice(b",\"request_id\":");
        json_str(o, self.request_id);
        o.extend_from_slice(b",\"client\":");
        write_opt(o, self.client);
        o.extend_from_slice(b",\"user_agent\":");
        json_str(o, self.user_agent);
        o.extend_from_slice(b",\"token\":");
        json_opt_str(o, self.token);
        o.extend_from_slice(b",\"site_group\":");
        json_bool(o, self.site_group);
        o.extend_from_slice(b",\"method\":");
        json_str(o, self.method);
        o.extend_from_slice(b",\"path\":");
        json_str(o, self.path);
        o.extend_from_slice(b",\"mode\":");
        json_str(o, self.mode);
        o.extend_from_slice(b",\"outcome\":");
        json_str(o, self.outcome);
        o.extend_from_slice(b",\"reason\":");
        json_str(o, self.reason);
        o.extend_from_slice(b",\"rule\":");
        match self.rule {
            Some((kind, pattern, line)) => {
                o.extend_from_slice(b"{\"kind\":");
                json_str(o, kind);
                o.extend_from_slice(b",\"pattern\":");
                json_str(o, pattern);
                o.extend_from_slice(b",\"line\":");
                json_num(o, line);
                o.push(b'}');
            }
            None => o.extend_from_slice(b"null"),
        }
        o.extend_from_slice(b",\"group_line\":");
        opt_num(o, self.group_line);
        o.extend_from_slice(b",\"explanation\":");
        self.explanation.write(o);
        o.extend_from_slice(b",\"robots_sha256\":");
        json_opt_str(o, self.robots_sha256);
        o.extend_from_slice(b",\"robots_fetched\":");
        write_opt(o, self.robots_fetched);
        o.extend_from_slice(b",\"robots_fetched_sha256\":");
        json_opt_str(o, self.robots_fetched_sha256);
        o.extend_from_slice(b",\"pace\":");
        write_opt(o, self.pace);
        o.extend_from_slice(b",\"retry_after\":");
        opt_num(o, self.retry_after);
        o.extend_from_slice(b",\"identity\":");
        json_opt_str(o, self.identity);
        o.extend_from_slice(b",\"identity_method\":");
        json_opt_str(o, self.identity_method);
        o.extend_from_slice(b",\"identity_why\":");
        json_opt_str(o, self.identity_why);
        o.extend_from_slice(b",\"identity_detail\":");
        write_opt(o, self.identity_detail);
        o.extend_from_slice(b",\"identity_policy\":");
        json_opt_str(o, self.identity_policy);
        o.extend_from_slice(b",\"operator\":");
        json_opt_str(o, self.operator);
        o.extend_from_slice(b",\"status\":");
        opt_num(o, self.status);
        o.extend_from_slice(b",\"cluster\":");
        json_opt_str(o, self.cluster);
        o.extend_from_slice(b",\"host\":");
        json_opt_str(o, self.host);
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
            host: None,
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
            host: Some("blog.example.com".into()),
            ..empty.clone()
        };
        for r in [&empty, &full] {
            let mut ours = Vec::new();
            r.write_line(&mut ours);
            let ours = String::from_utf8(ours).unwrap();
            assert_eq!(ours, serde_line(r));
        }
    }

    /// The values written as their text (times, addresses, `Display`s) give what serde
    /// writes for the owned record made of them.
    #[test]
    fn a_borrowed_line_is_what_serde_writes_for_its_owned_record() {
        struct Said;
        impl fmt::Display for Said {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("key \"k\"\tof \u{1}https://example.com")
            }
        }
        let t = SystemTime::UNIX_EPOCH + std::time::Duration::from_millis(1_795_000_000_123);
        let base = IngressRecordRef {
            schema_version: super::super::SCHEMA_VERSION,
            kind: "ingress",
            time: Text::Time(t),
            request_id: "0000000000000001-aa",
            client: Some(Text::Ip("192.0.2.10".parse().unwrap())),
            user_agent: "GPTBot/1.2",
            token: Some("GPTBot"),
            site_group: false,
            method: "GET",
            path: "/",
            mode: "enforce",
            outcome: "allowed",
            reason: "no-rule",
            rule: Some(("allow", "/a", 3)),
            group_line: Some(1),
            explanation: Text::Show(&Said),
            robots_sha256: Some("ab"),
            robots_fetched: Some(Text::Time(SystemTime::UNIX_EPOCH)),
            robots_fetched_sha256: None,
            pace: Some(Text::Show(&Said)),
            retry_after: None,
            identity: None,
            identity_method: None,
            identity_why: None,
            identity_detail: Some(Text::Show(&Said)),
            identity_policy: None,
            operator: None,
            status: Some(200),
            cluster: None,
            host: Some("a.example"),
        };
        let v6 =
            IngressRecordRef { client: Some(Text::Ip("2001:db8::1".parse().unwrap())), host: None, ..base };
        for line in [base, v6] {
            let mut ours = Vec::new();
            line.write(&mut ours);
            let record = line.to_record();
            assert_eq!(String::from_utf8(ours).unwrap(), serde_line(&record));
            assert_eq!(record.time, "2026-11-18T11:06:40.123Z");
        }
    }
}
