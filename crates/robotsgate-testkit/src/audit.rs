//! The audit log: JSON Lines read back, and checks of the documented record fields.

use std::net::SocketAddr;
use std::path::Path;

use serde_json::Value;

/// Every line of a JSON Lines file, parsed (panics naming a line that is not JSON).
pub fn read_jsonl(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines()
        .enumerate()
        .map(|(n, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("{}:{}: not JSON ({e}): {line}", path.display(), n + 1))
        })
        .collect()
}

/// The records of a type (`"decision"` or `"fetch"`).
pub fn of_type<'a>(records: &'a [Value], kind: &str) -> Vec<&'a Value> {
    records.iter().filter(|r| r["type"] == kind).collect()
}

/// Whether `s` is an RFC 3339 time.
pub fn is_rfc3339(s: &str) -> bool {
    time::OffsetDateTime::parse(s, &time::format_description::well_known::Rfc3339).is_ok()
}

fn field<'a>(r: &'a Value, key: &str) -> &'a Value {
    r.get(key).unwrap_or_else(|| panic!("record without {key:?}: {r}"))
}

/// Checks the documented fields of a decision record (docs/audit-log.md).
pub fn check_decision_record(r: &Value) {
    assert_eq!(field(r, "schema_version"), robotsgate::audit::SCHEMA_VERSION, "{r}");
    assert_eq!(field(r, "type"), "decision", "{r}");
    assert!(is_rfc3339(field(r, "time").as_str().unwrap_or("")), "time: {r}");
    assert!(!field(r, "request_id").as_str().unwrap_or("").is_empty(), "request_id: {r}");
    let client = field(r, "client");
    assert!(
        client.is_null() || client.as_str().is_some_and(|c| c.parse::<SocketAddr>().is_ok()),
        "client: {r}"
    );
    for key in ["method", "url", "origin", "agent", "profile", "mode", "outcome", "reason", "explanation"] {
        assert!(field(r, key).is_string(), "{key}: {r}");
    }
    assert!(["google", "rfc", "conservative"].contains(&r["profile"].as_str().unwrap()), "{r}");
    assert!(["enforce", "report-only"].contains(&r["mode"].as_str().unwrap()), "{r}");
    assert!(
        [
            "allowed",
            "disallowed",
            "would-disallow",
            "usage-refused",
            "would-refuse-usage",
            "paced",
            "cluster-unavailable"
        ]
        .contains(&r["outcome"].as_str().unwrap()),
        "{r}"
    );
    if let Some(u) = r.get("usage") {
        assert!(field(u, "purpose").as_array().is_some_and(|p| !p.is_empty()), "usage.purpose: {r}");
        assert!(
            ["allow", "refuse"].contains(&field(u, "unknown").as_str().unwrap_or("")),
            "usage.unknown: {r}"
        );
        for p in field(u, "preferences").as_array().unwrap() {
            assert!(
                ["allowed", "disallowed", "unknown"].contains(&field(p, "preference").as_str().unwrap_or("")),
                "usage.preferences: {r}"
            );
            for form in ["content_usage", "content_signal"] {
                let l = field(p, form);
                assert!(l.is_null() || field(l, "line").as_u64().is_some_and(|n| n >= 1), "{form}: {r}");
            }
        }
    }
    let rule = field(r, "rule");
    if !rule.is_null() {
        assert!(["allow", "disallow"].contains(&field(rule, "kind").as_str().unwrap_or("")), "rule: {r}");
        assert!(field(rule, "pattern").is_string(), "rule.pattern: {r}");
        assert!(field(rule, "line").as_u64().is_some_and(|l| l >= 1), "rule.line: {r}");
    }
    assert!(field(r, "path_visible").is_boolean(), "{r}");
    let transport = field(r, "transport");
    assert!(
        transport.is_null()
            || ["proxy", "connect", "connect-tls", "connect-opaque", "connect-http", "intercepted"]
                .contains(&transport.as_str().unwrap_or("")),
        "transport: {r}"
    );
    let robots = field(r, "robots");
    if !robots.is_null() {
        let sha = field(robots, "sha256");
        assert!(
            sha.is_null()
                || sha.as_str().is_some_and(|s| s.len() == 64 && s.bytes().all(|b| b.is_ascii_hexdigit())),
            "robots.sha256: {r}"
        );
        let status = field(robots, "status");
        assert!(status.is_null() || status.is_u64(), "robots.status: {r}");
        assert!(is_rfc3339(field(robots, "fetched_at").as_str().unwrap_or("")), "robots.fetched_at: {r}");
    }
    assert!(field(r, "decision_us").is_u64(), "{r}");
    assert!(field(r, "pace_wait_ms").is_u64(), "{r}");
    let pace = field(r, "pace");
    if !pace.is_null() {
        assert!(field(pace, "delay_ms").is_u64(), "pace.delay_ms: {r}");
        let source = field(pace, "source");
        assert!(
            source.is_null()
                || ["crawl-delay", "request-rate", "min-delay", "host-override"]
                    .contains(&source.as_str().unwrap_or("")),
            "pace.source: {r}"
        );
        for key in ["line", "detail", "clamped_from_ms", "max_concurrency", "backoff", "would_wait_ms"] {
            field(pace, key);
        }
        let refused = field(pace, "refused");
        assert!(
            refused.is_null()
                || ["max-wait", "queue-full", "table-full"].contains(&refused.as_str().unwrap_or("")),
            "pace.refused: {r}"
        );
        assert_eq!(refused.is_null(), field(pace, "retry_after_s").is_null(), "pace.retry_after_s: {r}");
    }
    assert_eq!(
        r["outcome"] == "paced",
        !pace.is_null() && !pace["refused"].is_null() && r["mode"] == "enforce",
        "{r}"
    );
    let cluster = field(r, "cluster");
    assert!(cluster.is_null() || cluster == "alone", "cluster: {r}");
    // Fleet mode refuses only while it is alone; refused before robots.txt was looked at,
    // the decision rests on no file.
    if r["outcome"] == "cluster-unavailable" {
        assert_eq!(cluster, "alone", "{r}");
    }
    if r["reason"] == "cluster-unavailable" {
        assert_eq!(r["outcome"], "cluster-unavailable", "{r}");
        assert!(robots.is_null() && rule.is_null() && pace.is_null(), "{r}");
    }
}

/// Checks the documented fields of an outcome record (docs/audit-log.md).
pub fn check_outcome_record(r: &Value) {
    assert_eq!(field(r, "schema_version"), robotsgate::audit::SCHEMA_VERSION, "{r}");
    assert_eq!(field(r, "type"), "outcome", "{r}");
    assert!(is_rfc3339(field(r, "time").as_str().unwrap_or("")), "time: {r}");
    assert!(!field(r, "request_id").as_str().unwrap_or("").is_empty(), "request_id: {r}");
    let status = field(r, "status");
    assert!(status.is_null() || status.as_u64().is_some_and(|s| (100..600).contains(&s)), "status: {r}");
    let by = field(r, "answered_by");
    assert!(by.is_null() || by == "origin" || by == "robotsgate", "answered_by: {r}");
    assert!(field(r, "refusal").is_null() || field(r, "refusal").is_string(), "refusal: {r}");
    assert!(field(r, "bytes").is_u64(), "bytes: {r}");
    assert!(field(r, "bytes_from_client").is_null() || field(r, "bytes_from_client").is_u64(), "{r}");
    let ends = ["complete", "client-gone", "origin-error", "closed", "error"];
    assert!(ends.contains(&field(r, "end").as_str().unwrap_or("")), "end: {r}");
    assert!(field(r, "duration_us").is_u64(), "duration_us: {r}");
}

/// The outcome record of the decision record `d` (exactly one), checked.
pub fn outcome_of<'a>(records: &'a [Value], d: &Value) -> &'a Value {
    let id = &d["request_id"];
    let found: Vec<_> = records.iter().filter(|r| r["type"] == "outcome" && r["request_id"] == *id).collect();
    assert_eq!(found.len(), 1, "one outcome for {id}: {records:#?}");
    check_outcome_record(found[0]);
    found[0]
}

/// Checks the documented fields of a fetch record.
pub fn check_fetch_record(r: &Value) {
    assert_eq!(field(r, "schema_version"), robotsgate::audit::SCHEMA_VERSION, "{r}");
    assert_eq!(field(r, "type"), "fetch", "{r}");
    assert!(is_rfc3339(field(r, "time").as_str().unwrap_or("")), "time: {r}");
    assert!(is_rfc3339(field(r, "fetched_at").as_str().unwrap_or("")), "fetched_at: {r}");
    for key in ["origin", "url", "final_url", "result"] {
        assert!(field(r, key).is_string(), "{key}: {r}");
    }
    assert!(field(r, "bytes").is_u64(), "{r}");
    assert!(field(r, "duration_ms").is_number(), "{r}");
}

/// SHA-256 in hex.
pub fn sha256_hex(data: &[u8]) -> String {
    use sha2::Digest;
    hex::encode(sha2::Sha256::digest(data))
}
