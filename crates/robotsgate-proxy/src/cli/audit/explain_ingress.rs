//! `robotsgate audit explain` on an ingress record (`robotsgate ingress`: a bot visiting the
//! guarded site): what it asked, who it claimed to be and what the identity check said,
//! how the policy used that verdict, and what the site's robots.txt said.

use serde_json::Value;

fn s(v: &Value) -> &str {
    v.as_str().unwrap_or("-")
}

/// The ingress record `r`, in words.
pub fn text(r: &Value) -> String {
    let mut out = String::new();
    out.push_str(&format!("Ingress request {} at {}\n", s(&r["request_id"]), s(&r["time"])));
    out.push_str(&format!("  {} {}  (client {})\n", s(&r["method"]), s(&r["path"]), s(&r["client"])));
    out.push_str(&format!("  user-agent: {}\n", s(&r["user_agent"])));
    let token = match r["token"].as_str() {
        Some(t) if r["site_group"] == true => format!("{t} (a group of the site's robots.txt)"),
        Some(t) => format!("{t} (a known agent)"),
        None => "none: held to `User-agent: *` as an unknown agent".into(),
    };
    out.push_str(&format!("  product token: {token}\n"));
    out.push_str(&format!(
        "  outcome: {} ({} mode), reason: {}, status {}\n",
        s(&r["outcome"]),
        s(&r["mode"]),
        s(&r["reason"]),
        r["status"].as_u64().map_or("- (the site's service failed)".into(), |c| c.to_string()),
    ));
    identity(&mut out, r);
    out.push_str(&format!("  decided by: {}\n", s(&r["explanation"])));
    if let Some(rule) = r["rule"].as_object() {
        out.push_str(&format!(
            "  rule: line {}: {}: {}\n",
            rule.get("line").unwrap_or(&Value::Null),
            rule.get("kind").and_then(Value::as_str).unwrap_or("-"),
            rule.get("pattern").and_then(Value::as_str).unwrap_or("-"),
        ));
    }
    if let Some(line) = r["group_line"].as_u64() {
        out.push_str(&format!("  group: the one starting at line {line}\n"));
    }
    if let Some(pace) = r["pace"].as_str() {
        let wait = r["retry_after"].as_u64().map(|s| format!(", told to retry in {s} s")).unwrap_or_default();
        out.push_str(&format!("  pacing: {pace}{wait}\n"));
    }
    match r["robots_sha256"].as_str() {
        Some(sha) => out.push_str(&format!("  robots.txt: SHA-256 {sha}\n")),
        None => out.push_str("  robots.txt: none read for this request\n"),
    }
    match r["robots_fetched"].as_str() {
        Some(t) => out.push_str(&format!(
            "  this bot (token and network) last fetched robots.txt at {t} (SHA-256 {})\n",
            s(&r["robots_fetched_sha256"])
        )),
        None if r["token"].is_string() => {
            out.push_str("  this bot had not fetched robots.txt here (in this process's memory)\n")
        }
        None => {}
    }
    out
}

/// The identity verdict and how the policy used it.
fn identity(out: &mut String, r: &Value) {
    let Some(verdict) = r["identity"].as_str() else {
        out.push_str("  identity: not checked (no verifier, or nothing claimed)\n");
        return;
    };
    let operator = r["operator"].as_str();
    let detail = s(&r["identity_detail"]);
    let why = s(&r["identity_why"]);
    let line = match verdict {
        "verified" => format!("verified, by {}: {detail}", method_words(s(&r["identity_method"]))),
        "failed" => format!(
            "FAILED ({why}): {detail}: it claims to be {}'s and the check says no",
            operator.unwrap_or("an operator")
        ),
        _ => format!("unverified ({why}): {detail}: {}", why_words(why)),
    };
    out.push_str(&format!("  identity: {line}\n"));
    out.push_str(&format!(
        "  operator: {}\n",
        operator.unwrap_or("none (no configured operator uses this token or its Signature-Agent)")
    ));
    let report_only = r["mode"] == "report-only";
    let refused = if report_only { "would be refused (report-only mode: let through)" } else { "refused" };
    let token = r["token"].as_str().unwrap_or("the bot");
    let policy = match r["identity_policy"].as_str() {
        Some("refuse") => format!("{refused} as an impersonator (impersonators = \"refuse\")"),
        Some("require") => format!(
            "{refused}: {} requires its bots to be verified ([[verify.operators]] require = true)",
            operator.unwrap_or("its operator")
        ),
        Some("star") => "held to the `User-agent: *` group, not to its own (impersonators = \"star\")".into(),
        Some("allow") => {
            format!(
                "judged as {token} all the same; the failure is only reported (impersonators = \"allow\")"
            )
        }
        Some("as-claimed") => format!("judged as {token}, the bot it claims to be"),
        Some(other) => other.to_owned(),
        None => "not recorded (a record written before robotsgate recorded it)".into(),
    };
    out.push_str(&format!("  identity policy: {policy}\n"));
}

fn method_words(method: &str) -> &str {
    match method {
        "ip_range" => "ip-range (the address is in the operator's published IP list)",
        "reverse_dns" => "rdns (forward-confirmed reverse DNS)",
        "signature" => "signature (Web Bot Auth, a key of the operator's Signature-Agent)",
        other => other,
    }
}

fn why_words(why: &str) -> &str {
    match why {
        "unknown_token" | "no_method" => "nothing to check it with",
        "pending" => {
            "the reverse DNS lookup was still pending past verify.max_wait (it goes on; a later request gets its answer)"
        }
        "busy" => "too many reverse DNS lookups were running: this one was not started",
        "dns_error" => "the resolver failed",
        "signature_unchecked" => "its signature could not be checked, and nothing else verified it",
        _ => "not verified",
    }
}
