//! The decision record written straight into its JSON line, without the owned
//! [`DecisionRecord`](super::DecisionRecord) and its strings: the audit log is on every
//! request's path. The text every decision alike on one robots.txt copy repeats is
//! remembered with the copy.

use std::fmt;
use std::time::SystemTime;

use super::record::{
    OutcomeFacts, PaceRecord, RequestFacts, SCHEMA_VERSION, logged_url, micros, outcome_of,
    override_reason_of, unreachable_cause_of,
};
use super::timestamp::rfc3339_into;
use crate::policy::{AuditText, Decision, DecisionKey, FetchFacts};
use crate::vocabulary::Outcome;

/// Writes the JSON line of the [`DecisionRecord`](super::DecisionRecord) of a decision
/// (same keys, order and values) at the end of `o`; `redact` as for [`logged_url`].
pub(super) fn decision_line(
    o: &mut Vec<u8>,
    d: &Decision,
    request: RequestFacts<'_>,
    now: SystemTime,
    redact: bool,
) {
    record_head(o, "decision", now, request.request_id);
    o.extend_from_slice(b",\"client\":");
    match request.client {
        Some(c) => {
            o.push(b'"');
            socket_addr_into(o, c);
            o.push(b'"');
        }
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"user\":");
    json_opt_str(o, request.user);
    o.extend_from_slice(b",\"method\":");
    json_str(o, request.method);
    o.extend_from_slice(b",\"url\":");
    json_str(o, &logged_url(request.url, redact));
    decision_text(o, d, request.report_only, request.refused());
    o.extend_from_slice(b"\",\"path_visible\":");
    json_bool(o, request.path_visible);
    o.extend_from_slice(b",\"transport\":");
    json_opt_str(o, request.transport);
    o.extend_from_slice(b",\"robots\":");
    match d.fetch_facts() {
        Some(f) => {
            // Everything up to the age is the same for every decision on this copy.
            o.extend_from_slice(f.audit_text.facts.get_or_init(|| robots_head(f)).as_bytes());
            o.extend_from_slice(b",\"age_s\":");
            match d.age {
                Some(a) => {
                    let _ = serde_json::to_writer(&mut *o, &a.as_secs_f64());
                }
                None => o.extend_from_slice(b"null"),
            }
            o.extend_from_slice(b",\"stale\":");
            json_bool(o, d.stale);
            o.push(b'}');
        }
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"unreachable_cause\":");
    json_opt_str(o, unreachable_cause_of(d).as_deref());
    o.extend_from_slice(b",\"override_reason\":");
    json_opt_str(o, override_reason_of(d).as_deref());
    o.extend_from_slice(b",\"decision_us\":");
    json_num(o, micros(request.elapsed));
    if d.usage.is_some() {
        usage_into(o, d);
    }
    o.extend_from_slice(b",\"pace_wait_ms\":");
    json_num(o, request.pace_wait_ms());
    o.extend_from_slice(b",\"pace\":");
    match request.pace {
        // Only paced requests have one: serde writes it.
        Some(p) => {
            let _ = serde_json::to_writer(&mut *o, &PaceRecord::of(p));
        }
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"cluster\":");
    json_opt_str(o, request.cluster);
    match request.signed {
        Some(true) => o.extend_from_slice(b",\"signed\":true"),
        Some(false) => o.extend_from_slice(b",\"signed\":false"),
        None => {}
    }
    o.extend_from_slice(b"}\n");
}

/// Writes the JSON line of the [`OutcomeRecord`](super::OutcomeRecord) of `f` at `now`
/// (same keys, order and values) at the end of `o`: one per request.
pub(super) fn outcome_line(o: &mut Vec<u8>, f: OutcomeFacts<'_>, now: SystemTime) {
    record_head(o, "outcome", now, f.request_id);
    o.extend_from_slice(b",\"status\":");
    match f.status {
        Some(s) => json_num(o, s),
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"answered_by\":");
    json_opt_str(o, f.answered_by);
    o.extend_from_slice(b",\"refusal\":");
    json_opt_str(o, f.refusal);
    o.extend_from_slice(b",\"bytes\":");
    json_num(o, f.bytes);
    o.extend_from_slice(b",\"bytes_from_client\":");
    match f.bytes_from_client {
        Some(n) => json_num(o, n),
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"end\":");
    json_str(o, f.end);
    o.extend_from_slice(b",\"duration_us\":");
    json_num(o, micros(f.duration));
    o.extend_from_slice(b"}\n");
}

/// Writes the decision's own fields, `"origin"` to `"explanation"`, the same for every
/// decision alike on one robots.txt copy: remembered with the copy ([`DecisionKey`]) and
/// copied from there, else written out.
fn decision_text(o: &mut Vec<u8>, d: &Decision, report_only: bool, refused: Option<Outcome>) {
    if refused.is_some() {
        // Rare, and its outcome is not the decision's: not remembered.
        return decision_fields(o, d, report_only, refused);
    }
    let Some(facts) = d.fetch_facts() else { return decision_fields(o, d, report_only, None) };
    let Ok(mut known) = facts.audit_text.decisions.lock() else {
        return decision_fields(o, d, report_only, None);
    };
    if let Some((_, text)) = known.iter().find(|(k, _)| k.is(d, report_only)) {
        o.extend_from_slice(text.as_bytes());
        return;
    }
    let start = o.len();
    decision_fields(o, d, report_only, None);
    if known.len() < AuditText::MAX_DECISIONS
        && let Some(key) = DecisionKey::of(d, report_only)
        && let Ok(text) = std::str::from_utf8(&o[start..])
    {
        known.push((key, text.into()));
    }
}

fn decision_fields(o: &mut Vec<u8>, d: &Decision, report_only: bool, refused: Option<Outcome>) {
    o.extend_from_slice(b",\"origin\":\"");
    let _ = d.origin.write_to(&mut JsonText(o));
    o.extend_from_slice(b"\",\"agent\":");
    json_str(o, d.agent.as_ref());
    o.extend_from_slice(b",\"profile\":");
    json_str(o, d.profile.as_str());
    o.extend_from_slice(b",\"mode\":");
    json_str(o, if report_only { "report-only" } else { "enforce" });
    o.extend_from_slice(b",\"outcome\":");
    json_str(o, outcome_of(d, report_only, refused).as_str());
    o.extend_from_slice(b",\"reason\":");
    json_str(o, d.reason.class().as_str());
    o.extend_from_slice(b",\"rule\":");
    match d.rule() {
        Some(rule) => {
            o.extend_from_slice(b"{\"kind\":");
            json_str(o, rule.kind.as_str());
            o.extend_from_slice(b",\"pattern\":");
            json_str(o, rule.pattern);
            o.extend_from_slice(b",\"line\":");
            json_num(o, rule.line);
            o.extend_from_slice(b",\"reading\":");
            json_str(o, rule.reading.as_str());
            o.extend_from_slice(b",\"implied_by_index_html\":");
            json_bool(o, rule.implied_by_index_html);
            o.push(b'}');
        }
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"explanation\":\"");
    let _ = fmt::Write::write_fmt(&mut JsonText(o), format_args!("{d}"));
}

/// `,"usage":{…}` (a purpose is configured): the fields of [`super::record::UsageRecord`].
fn usage_into(o: &mut Vec<u8>, d: &Decision) {
    let Some(u) = d.usage.as_deref() else { return };
    o.extend_from_slice(b",\"usage\":{\"purpose\":[");
    for (i, c) in u.purpose.categories().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        json_str(o, c.as_str());
    }
    o.extend_from_slice(b"],\"unknown\":");
    json_str(o, u.unknown.as_str());
    o.extend_from_slice(b",\"refused\":");
    json_opt_str(o, u.refused.map(|c| c.as_str()));
    o.extend_from_slice(b",\"preferences\":[");
    for (i, p) in u.preferences.iter().enumerate() {
        if i > 0 {
            o.push(b',');
        }
        o.extend_from_slice(b"{\"category\":");
        json_str(o, p.category.as_str());
        o.extend_from_slice(b",\"preference\":");
        json_str(o, p.preference.as_str());
        for (key, line) in
            [(&b",\"content_usage\":"[..], &p.content_usage), (b",\"content_signal\":", &p.content_signal)]
        {
            o.extend_from_slice(key);
            match line {
                Some(l) => {
                    o.extend_from_slice(b"{\"line\":");
                    json_num(o, l.line);
                    o.extend_from_slice(b",\"text\":");
                    json_str(o, &l.text);
                    o.extend_from_slice(b",\"preference\":");
                    json_str(o, l.preference.as_str());
                    o.push(b'}');
                }
                None => o.extend_from_slice(b"null"),
            }
        }
        o.push(b'}');
    }
    o.extend_from_slice(b"]}");
}

/// `{"schema_version":…,"type":"<kind>","time":"…","request_id":…`: how a request's
/// records begin.
fn record_head(o: &mut Vec<u8>, kind: &str, now: SystemTime, request_id: &str) {
    o.extend_from_slice(b"{\"schema_version\":");
    json_num(o, SCHEMA_VERSION);
    o.extend_from_slice(b",\"type\":\"");
    o.extend_from_slice(kind.as_bytes());
    o.extend_from_slice(b"\",\"time\":\"");
    rfc3339_into(o, now);
    o.extend_from_slice(b"\",\"request_id\":");
    json_str(o, request_id);
}

/// Whether `s` has a byte a JSON string must escape.
fn needs_escape(s: &str) -> bool {
    // No early exit, so the compiler can check many bytes per instruction.
    s.bytes().fold(false, |acc, b| acc | (b < 0x20) | (b == b'"') | (b == b'\\'))
}

/// A JSON string: copied as is when nothing in it needs escaping (the usual case),
/// else through serde_json's escaper.
pub(super) fn json_str(out: &mut Vec<u8>, s: &str) {
    if !needs_escape(s) {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        let _ = serde_json::to_writer(&mut *out, s);
    }
}

pub(super) fn json_num(out: &mut Vec<u8>, n: impl itoa::Integer) {
    out.extend_from_slice(itoa::Buffer::new().format(n).as_bytes());
}

pub(super) fn json_bool(out: &mut Vec<u8>, b: bool) {
    out.extend_from_slice(if b { b"true" } else { b"false" });
}

pub(super) fn json_opt_str(out: &mut Vec<u8>, s: Option<&str>) {
    match s {
        Some(s) => json_str(out, s),
        None => out.extend_from_slice(b"null"),
    }
}

/// `{"url":…,"final_url":…,"status":…,"sha256":…,"fetched_at":…,"bytes":…,"redirects":…`
/// of a decision record's `robots` object: the part that depends on the fetch alone.
fn robots_head(f: &FetchFacts) -> Box<str> {
    let mut o = Vec::with_capacity(320);
    o.extend_from_slice(b"{\"url\":");
    json_str(&mut o, &f.url);
    o.extend_from_slice(b",\"final_url\":");
    json_str(&mut o, &f.final_url);
    o.extend_from_slice(b",\"status\":");
    match f.status {
        Some(s) => json_num(&mut o, s),
        None => o.extend_from_slice(b"null"),
    }
    o.extend_from_slice(b",\"sha256\":");
    json_opt_str(&mut o, f.sha256_hex().as_deref());
    o.extend_from_slice(b",\"fetched_at\":\"");
    rfc3339_into(&mut o, f.fetched_at);
    o.extend_from_slice(b"\",\"bytes\":");
    json_num(&mut o, f.bytes);
    o.extend_from_slice(b",\"redirects\":");
    json_num(&mut o, f.redirects);
    // Built from `&str`s and digits: always UTF-8.
    String::from_utf8(o).unwrap_or_default().into_boxed_str()
}

/// `a.b.c.d:port` or `[v6]:port`, as `SocketAddr`'s `Display` writes it.
fn socket_addr_into(out: &mut Vec<u8>, addr: std::net::SocketAddr) {
    match addr {
        std::net::SocketAddr::V4(a) => ip_into(out, std::net::IpAddr::V4(*a.ip())),
        std::net::SocketAddr::V6(a) => {
            out.push(b'[');
            ip_into(out, std::net::IpAddr::V6(*a.ip()));
            out.push(b']');
        }
    }
    out.push(b':');
    out.extend_from_slice(itoa::Buffer::new().format(addr.port()).as_bytes());
}

/// An address as `IpAddr`'s `Display` writes it ([`crate::net::push_ip`]'s text).
pub(super) fn ip_into(out: &mut Vec<u8>, ip: std::net::IpAddr) {
    crate::net::ip_text(ip, |part| out.extend_from_slice(part.as_bytes()));
}

/// Text written into a JSON string (between its quotes), escaped as serde_json does.
pub(super) struct JsonText<'a>(pub(super) &'a mut Vec<u8>);

impl fmt::Write for JsonText<'_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let out = &mut *self.0;
        if !needs_escape(s) {
            out.extend_from_slice(s.as_bytes());
            return Ok(());
        }
        let mut start = 0;
        for (i, &b) in s.as_bytes().iter().enumerate() {
            let escape: &[u8] = match b {
                b'"' => b"\\\"",
                b'\\' => b"\\\\",
                b'\n' => b"\\n",
                b'\r' => b"\\r",
                b'\t' => b"\\t",
                0x08 => b"\\b",
                0x0c => b"\\f",
                0..0x20 => b"",
                _ => continue,
            };
            out.extend_from_slice(&s.as_bytes()[start..i]);
            if escape.is_empty() {
                const HEX: &[u8; 16] = b"0123456789abcdef";
                out.extend_from_slice(b"\\u00");
                out.push(HEX[usize::from(b >> 4)]);
                out.push(HEX[usize::from(b & 0xf)]);
            } else {
                out.extend_from_slice(escape);
            }
            start = i + 1;
        }
        out.extend_from_slice(&s.as_bytes()[start..]);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::time::Duration;

    use super::*;
    use crate::audit::record::DecisionRecord;
    use crate::audit::record::{get, to_line};
    use crate::origin::Origin;

    /// Text escaped into a JSON string reads as serde_json writes it, for every ASCII
    /// byte, non-ASCII text and text split across several writes.
    #[test]
    fn json_text_escapes_as_serde_json_does() {
        let ascii: String = (0u8..0x80).map(char::from).collect();
        for text in [ascii.as_str(), "", "plain", "a\"b\\c\u{7f}é\u{2028}😀", "\u{0}\u{1f}end"] {
            let mut ours = b"\"".to_vec();
            let half = text.char_indices().nth(text.chars().count() / 2).map_or(text.len(), |(i, _)| i);
            let (a, b) = text.split_at(half);
            let _ = fmt::Write::write_str(&mut JsonText(&mut ours), a);
            let _ = fmt::Write::write_str(&mut JsonText(&mut ours), b);
            ours.push(b'"');
            assert_eq!(String::from_utf8_lossy(&ours), serde_json::to_string(text).unwrap(), "{text:?}");
        }
    }

    /// Decisions alike on one copy share their text, and every line still reads as the
    /// serde record of its own decision: across rules, no rule, product tokens, profiles,
    /// modes, and past the number of kinds a copy remembers.
    #[test]
    fn remembered_decision_text_is_each_decisions_own() {
        use crate::policy::{copy_of, decision_on};
        use crate::rep::Profile;
        let origin = Arc::new(Origin::parse("https://example.com").unwrap());
        let copy = copy_of(
            &origin,
            "User-agent: *\nDisallow: /private\nAllow: /private/ok\n\nUser-agent: special\nDisallow: /\n",
        );
        let mut agents: Vec<Arc<str>> = vec!["somebot".into(), "special".into()];
        agents.extend((0..AuditText::MAX_DECISIONS).map(|i| Arc::from(format!("bot{i}"))));
        let mut lines = 0;
        for round in 0..2 {
            for agent in &agents {
                for profile in Profile::ALL {
                    for path in ["/", "/private/x", "/private/ok/1", "/robots.txt"] {
                        for report_only in [false, true] {
                            let d = decision_on(&copy, &origin, agent, profile, path);
                            let url = format!("https://example.com{path}");
                            let request = get(&url, report_only);
                            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(round);
                            let mut ours = Vec::new();
                            decision_line(&mut ours, &d, request, now, false);
                            let serde = to_line(&DecisionRecord::of(&d, request, now, false));
                            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&serde));
                            lines += 1;
                        }
                    }
                }
            }
        }
        assert!(lines > 4 * AuditText::MAX_DECISIONS);
        let known = copy.facts.audit_text.decisions.lock().unwrap().len();
        assert_eq!(known, AuditText::MAX_DECISIONS, "bounded, and filled by the kinds seen");
    }

    /// Decisions with usage preferences share the remembered text of their kind (keyed by
    /// whether the preferences refused them) and still read as their own serde records,
    /// `usage` object included: refused and allowed purposes on one rule, both modes.
    #[test]
    fn remembered_text_with_usage_preferences_is_each_decisions_own() {
        use crate::policy::{Purpose, UnknownUsage, UsageCheck, copy_of, decision_for_on};
        use crate::rep::Profile;
        use crate::rep::usage::Category;
        let origin = Arc::new(Origin::parse("https://example.com").unwrap());
        let copy = copy_of(
            &origin,
            "User-agent: *\nDisallow: /private\nContent-Usage: train-ai=n, search=y\n\
             Content-Usage: /open/ train-ai=y\nContent-Signal: ai-input=no\n",
        );
        let agent: Arc<str> = "somebot".into();
        let purposes = [
            vec![Category::TrainAi],
            vec![Category::Search],
            vec![Category::TrainAi, Category::Search, Category::AiInput],
        ];
        let mut outcomes = std::collections::BTreeSet::new();
        for round in 0..2 {
            for purpose in &purposes {
                for unknown in [UnknownUsage::Allow, UnknownUsage::Refuse] {
                    for path in ["/", "/open/x", "/private/x"] {
                        for report_only in [false, true] {
                            let usage = UsageCheck { purpose: Purpose::of(purpose.iter().copied()), unknown };
                            let d =
                                decision_for_on(&copy, &origin, &agent, Profile::Conservative, path, usage);
                            let url = format!("https://example.com{path}");
                            let request = get(&url, report_only);
                            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(round);
                            let mut ours = Vec::new();
                            decision_line(&mut ours, &d, request, now, false);
                            let serde = to_line(&DecisionRecord::of(&d, request, now, false));
                            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&serde));
                            let v: serde_json::Value = serde_json::from_slice(&ours).unwrap();
                            outcomes.insert(v["outcome"].as_str().unwrap_or_default().to_owned());
                        }
                    }
                }
            }
        }
        let seen: Vec<&str> = outcomes.iter().map(String::as_str).collect();
        assert_eq!(seen, ["allowed", "disallowed", "usage-refused", "would-disallow", "would-refuse-usage"]);
        assert!(
            !copy.facts.audit_text.decisions.lock().unwrap().is_empty(),
            "usage decisions are remembered"
        );
    }

    /// A request fleet mode refused (`cluster-unavailable`) reads as its serde record, with
    /// that outcome whatever its decision was, and its text is not remembered for the
    /// decisions alike that were not refused.
    #[test]
    fn cluster_refusals_have_their_own_outcome_and_are_not_remembered() {
        use crate::policy::{Decision, Reason, copy_of, decision_on};
        use crate::rep::Profile;
        let origin = Arc::new(Origin::parse("https://example.com").unwrap());
        let copy = copy_of(&origin, "User-agent: *\nDisallow: /private\n");
        let agent: Arc<str> = "somebot".into();
        let unlooked = Decision {
            allowed: false,
            origin: origin.clone(),
            agent: agent.clone(),
            profile: Profile::Conservative,
            reason: Reason::ClusterUnavailable,
            robots: None,
            failure: None,
            age: None,
            stale: false,
            usage: None,
            notes: None,
        };
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(7);
        let line = |d: &Decision, refused: bool| -> serde_json::Value {
            let mut request = get("https://example.com/x", false);
            request.cluster = refused.then_some("alone");
            request.cluster_refused = refused;
            let mut ours = Vec::new();
            decision_line(&mut ours, d, request, now, false);
            let serde = to_line(&DecisionRecord::of(d, request, now, false));
            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&serde));
            serde_json::from_slice(&ours).unwrap()
        };
        let on_copy = decision_on(&copy, &origin, &agent, Profile::Conservative, "/x");
        for _ in 0..2 {
            let v = line(&on_copy, true);
            assert_eq!(
                (v["outcome"].as_str(), v["reason"].as_str()),
                (Some("cluster-unavailable"), Some("no-rule"))
            );
            assert_eq!(v["cluster"], "alone");
            let v = line(&on_copy, false);
            assert_eq!((v["outcome"].as_str(), v["cluster"].as_str()), (Some("allowed"), None));
        }
        let v = line(&unlooked, true);
        assert_eq!(
            (v["outcome"].as_str(), v["reason"].as_str()),
            (Some("cluster-unavailable"), Some("cluster-unavailable"))
        );
        assert!(v["robots"].is_null() && v["rule"].is_null(), "{v}");
    }

    /// Outcome lines read as the serde record writes them.
    #[test]
    fn outcome_lines_are_the_serde_records() {
        use crate::audit::record::OutcomeRecord;
        let now = SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123);
        for facts in [
            OutcomeFacts {
                request_id: "abc-00000001",
                status: Some(200),
                answered_by: Some("origin"),
                refusal: None,
                bytes: 1024,
                bytes_from_client: None,
                end: "complete",
                duration: Duration::from_micros(1234),
            },
            OutcomeFacts {
                request_id: "abc-00000002",
                status: None,
                answered_by: None,
                refusal: Some("upstream-unreachable"),
                bytes: 0,
                bytes_from_client: Some(7),
                end: "client-gone",
                duration: Duration::ZERO,
            },
        ] {
            let mut ours = Vec::new();
            outcome_line(&mut ours, facts, now);
            let serde = to_line(&OutcomeRecord::of(facts, now));
            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&serde));
        }
    }

    /// Client addresses read as `SocketAddr`'s `Display` writes them.
    #[test]
    fn socket_addresses_as_display_writes_them() {
        for addr in ["127.0.0.1:3128", "0.0.0.0:0", "255.255.255.255:65535", "[::1]:80", "[2001:db8::1]:443"]
        {
            let addr: std::net::SocketAddr = addr.parse().unwrap();
            let mut ours = Vec::new();
            socket_addr_into(&mut ours, addr);
            assert_eq!(String::from_utf8_lossy(&ours), addr.to_string());
        }
    }
}
