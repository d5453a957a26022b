//! The record of an answer robotsgate gave itself without a decision record (`"type":
//! "refusal"`): a request without a product token, one it cannot read, one refused
//! because the audit log fails closed, and the proxy's own answers before any decision
//! (a malformed request, a request for the proxy itself, a client refused). With the
//! decision records, every answer robotsgate gives has a record. When the log itself is
//! what failed, the record is lost like any other and counted: the `write-error` record
//! written once writing works again says how many.

use std::time::SystemTime;

use serde::Serialize;

use super::SCHEMA_VERSION;
use super::handle::AuditLog;
use super::record::{logged_url, to_line};
use super::timestamp::rfc3339;
use crate::refusal::Refusal;

/// One answer robotsgate gave without deciding, as logged.
#[derive(Debug, Clone, Serialize)]
pub struct RefusalRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"refusal"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When it was answered (RFC 3339, UTC).
    pub time: String,
    /// Unique per request (the same series as the decision records').
    pub request_id: String,
    /// The client's address, when known.
    pub client: Option<String>,
    /// The authenticated proxy user, if any.
    pub user: Option<String>,
    /// The request method, as far as it could be read.
    pub method: Option<String>,
    /// The request target as received (query redacted if configured), as far as it
    /// could be read.
    pub target: Option<String>,
    /// How the request came (as in decision records), when known.
    pub transport: Option<&'static str>,
    /// The status sent.
    pub status: u16,
    /// The kind of the answer: its `x-robotsgate` value (`no-token`, `bad-request`,
    /// `audit-unavailable`, `not-a-proxy-request`, `client-denied`, `auth-required`,
    /// `header-too-large`, `tls-expected`, ...).
    pub refusal: &'static str,
    /// Why, in words (the answer's text).
    pub reason: String,
}

/// The request side of a [`RefusalRecord`]: what could be read of the request.
#[derive(Debug, Clone, Copy, Default)]
pub struct RefusalFacts<'a> {
    /// Unique request id (empty: the log makes none; give one from the layer's series).
    pub request_id: &'a str,
    /// The client's address.
    pub client: Option<std::net::SocketAddr>,
    /// The authenticated proxy user.
    pub user: Option<&'a str>,
    /// The method, if the request could be read that far.
    pub method: Option<&'a str>,
    /// The target as received, if the request could be read that far.
    pub target: Option<&'a str>,
    /// How the request came ([`crate::layer::Transport::as_str`]), when known.
    pub transport: Option<&'static str>,
}

impl RefusalRecord {
    /// The record of `refusal` answered to the request of `facts` at `now`.
    pub fn of(
        refusal: &Refusal,
        facts: RefusalFacts<'_>,
        now: SystemTime,
        redact_query: bool,
    ) -> RefusalRecord {
        RefusalRecord {
            schema_version: SCHEMA_VERSION,
            kind: "refusal",
            time: rfc3339(now),
            request_id: facts.request_id.to_owned(),
            client: facts.client.map(|c| c.to_string()),
            user: facts.user.map(str::to_owned),
            method: facts.method.map(str::to_owned),
            target: facts.target.map(|t| logged_url(t, redact_query).into_owned()),
            transport: facts.transport,
            status: refusal.status().as_u16(),
            refusal: refusal.kind().as_str(),
            reason: refusal.message().trim_end().to_owned(),
        }
    }
}

impl AuditLog {
    /// Logs an answer robotsgate gave itself without a decision record. Not waited for,
    /// and taken also while the log fails closed (the answer is a refusal already): when
    /// writing fails it is lost and counted, and the log's `write-error` record says how
    /// many were lost once writing works again.
    pub fn log_refusal(&self, refusal: &Refusal, facts: RefusalFacts<'_>) {
        let record = RefusalRecord::of(refusal, facts, SystemTime::now(), self.config().redact_query);
        self.append_unwaited(&to_line(&record));
    }
}
