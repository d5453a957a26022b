//! The records of the audit log and their serde schema (documented in
//! `docs/audit-log.md`): what a decision and a robots.txt fetch are logged as, and how each
//! field's value is made from a decision, a request and a fetch.

use std::borrow::Cow;
use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Serialize;

use super::snapshot::snapshot_path;
use super::timestamp::rfc3339;
use crate::fetch::{FetchOutcome, FetchResult};
use crate::identity::httpsig::Payment;
use crate::origin::Origin;
use crate::pacing::{DelaySource, PaceFacts};
use crate::policy::{Decision, Reason};
use crate::vocabulary::Outcome;

/// Version of the record schema (`schema_version` in every record). 3: decision records
/// have `pace_wait_ms` and `pace`, and the outcome `paced`; 4: and `cluster` (fleet mode).
/// 5: the log records `file-start` and `rotate` of a tamper-evident, rotated log. 6: the
/// decision outcome and reason `cluster-unavailable` (fleet mode's `503`, recorded). 7: the
/// `refusal` record (an answer robotsgate gave without a decision record). 8: `payment`
/// records for `crawler-error` answers too (`price` may be null), and in mode off.
pub const SCHEMA_VERSION: u32 = 8;

/// One decision, as logged.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct DecisionRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"decision"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the decision was made (RFC 3339, UTC).
    pub time: String,
    /// Unique per request.
    pub request_id: String,
    /// The client's address, when known.
    pub client: Option<String>,
    /// The authenticated proxy user, if any.
    pub user: Option<String>,
    /// The request method.
    pub method: String,
    /// The request URL (query redacted if configured).
    pub url: String,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The product token the decision is for.
    pub agent: String,
    /// `google`, `rfc` or `conservative`.
    pub profile: &'static str,
    /// `enforce` or `report-only`.
    pub mode: &'static str,
    /// [`Outcome::as_str`]: `allowed`, `disallowed`, `would-disallow` (report-only),
    /// `usage-refused`, `would-refuse-usage`, `destination-denied`, `paced` (answered 503:
    /// it would have waited too long for its slot) or `cluster-unavailable` (answered 503:
    /// fleet mode's Redis cannot be reached and `cluster.on_error` is `refuse`).
    pub outcome: &'static str,
    /// The reason class ([`ReasonClass::as_str`](crate::ReasonClass::as_str); see
    /// docs/audit-log.md).
    pub reason: &'static str,
    /// The deciding rule, if a rule decided.
    pub rule: Option<RuleRecord>,
    /// The decision in words.
    pub explanation: String,
    /// Whether the path was visible (false for a CONNECT tunnel: host-level check).
    pub path_visible: bool,
    /// How the request came (`proxy`, `connect`, `connect-tls`, `connect-opaque`,
    /// `connect-http`, `intercepted`), when the proxy said.
    pub transport: Option<&'static str>,
    /// The robots.txt the decision rests on.
    pub robots: Option<RobotsRecord>,
    /// Why robots.txt was unreachable, when that matters for the decision.
    pub unreachable_cause: Option<String>,
    /// Override details, when an override decided.
    pub override_reason: Option<String>,
    /// How long the decision took, in microseconds.
    pub decision_us: u64,
    /// The usage check, when the request was made for a purpose and robots.txt allowed it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub usage: Option<UsageRecord>,
    /// How long the request was held for its origin's next slot, in milliseconds.
    pub pace_wait_ms: u64,
    /// What paced it, when anything did.
    pub pace: Option<PaceRecord>,
    /// Fleet mode: `"alone"` when the fleet's Redis could not be reached and this replica
    /// decided and paced on its own (or, outcome `cluster-unavailable`, refused); null
    /// otherwise (and without fleet mode).
    pub cluster: Option<&'static str>,
    /// With request signing on (Web Bot Auth): whether the request went signed (`false`
    /// for a `CONNECT` tunnel, whose content robotsgate does not see, and for a request
    /// that did not go); absent without signing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub signed: Option<bool>,
}

/// The usage check of a decision.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct UsageRecord {
    /// The purpose's categories.
    pub purpose: Vec<&'static str>,
    /// `allow` or `refuse`: what an unknown preference meant.
    pub unknown: &'static str,
    /// The first category that refused the request, if any.
    pub refused: Option<&'static str>,
    /// Per category of the purpose.
    pub preferences: Vec<PreferenceRecord>,
}

/// The site's preference for one category.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PreferenceRecord {
    /// The category.
    pub category: &'static str,
    /// `allowed`, `disallowed` or `unknown`: both forms combined.
    pub preference: &'static str,
    /// The deciding `Content-Usage` line.
    pub content_usage: Option<LineRecord>,
    /// The deciding `Content-Signal` line.
    pub content_signal: Option<LineRecord>,
}

/// A robots.txt line that stated a preference.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LineRecord {
    /// 1-based line.
    pub line: u32,
    /// The line after its key: path (if any) and preference, as written.
    pub text: String,
    /// What it says for the category.
    pub preference: &'static str,
}

impl UsageRecord {
    /// The record of a decision's usage check.
    pub(super) fn of(d: &Decision) -> Option<UsageRecord> {
        let u = d.usage.as_deref()?;
        let line = |l: &Option<crate::policy::CitedLine>| {
            l.as_ref().map(|l| LineRecord {
                line: l.line,
                text: l.text.to_string(),
                preference: l.preference.as_str(),
            })
        };
        Some(UsageRecord {
            purpose: u.purpose.categories().map(|c| c.as_str()).collect(),
            unknown: u.unknown.as_str(),
            refused: u.refused.map(|c| c.as_str()),
            preferences: u
                .preferences
                .iter()
                .map(|p| PreferenceRecord {
                    category: p.category.as_str(),
                    preference: p.preference.as_str(),
                    content_usage: line(&p.content_usage),
                    content_signal: line(&p.content_signal),
                })
                .collect(),
        })
    }
}

/// What paced a request (see docs/audit-log.md).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct PaceRecord {
    /// The delay between the lane's requests, in milliseconds (after the cap).
    pub delay_ms: u64,
    /// Where the delay came from: `crawl-delay`, `request-rate`, `min-delay`,
    /// `host-override`, or null (no delay: a back-off or a concurrency cap held it).
    pub source: Option<&'static str>,
    /// The robots.txt line of a `crawl-delay` or `request-rate`.
    pub line: Option<u32>,
    /// What the source says: `crawl-delay: 10`, `request-rate: 1/10s 1800-0600`,
    /// `*.example.com: <reason>`.
    pub detail: Option<String>,
    /// The delay asked for, when it was above `pacing.max_delay` and clamped.
    pub clamped_from_ms: Option<u64>,
    /// The host rule's cap on requests in flight.
    pub max_concurrency: Option<u32>,
    /// The pause after a 429/503 that made the request wait (or refused it).
    pub backoff: Option<BackoffRecord>,
    /// Report-only: how long it would have waited.
    pub would_wait_ms: Option<u64>,
    /// Why it was (report-only: would have been) refused: `max-wait`, `queue-full`,
    /// `table-full`.
    pub refused: Option<&'static str>,
    /// The `Retry-After` of the refusal, in seconds.
    pub retry_after_s: Option<u64>,
}

/// A pause after a 429 or 503 from the origin.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub(crate) struct BackoffRecord {
    /// The origin's status.
    pub status: u16,
    /// Its `Retry-After` as sent, if any.
    pub retry_after: Option<String>,
    /// How long the pause is, in milliseconds.
    pub pause_ms: u64,
    /// Pausing answers in a row (the doubling's count).
    pub streak: u32,
}

impl PaceRecord {
    /// The record of what pacing did.
    pub fn of(p: &PaceFacts) -> PaceRecord {
        let (line, detail) = match &p.plan.source {
            Some(DelaySource::Robots(h)) => (Some(h.line), Some(h.directive())),
            Some(DelaySource::Host { hosts, reason }) => (None, Some(format!("{hosts}: {reason}"))),
            Some(DelaySource::MinDelay) | None => (None, None),
        };
        PaceRecord {
            delay_ms: millis(p.plan.delay),
            source: p.plan.source.as_ref().map(DelaySource::class),
            line,
            detail,
            clamped_from_ms: p.plan.clamped_from.map(millis),
            max_concurrency: p.plan.max_concurrency,
            backoff: p.pause.as_ref().map(|b| BackoffRecord {
                status: b.status,
                retry_after: b.retry_after.as_deref().map(str::to_owned),
                pause_ms: millis(b.pause),
                streak: b.streak,
            }),
            would_wait_ms: p.would_wait.map(millis),
            refused: p.refused.map(|r| r.as_str()),
            retry_after_s: p.retry_after.map(crate::pacing::retry_after_secs),
        }
    }
}

/// The rule of a decision.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RuleRecord {
    /// `allow` or `disallow`.
    pub kind: &'static str,
    /// The pattern as written.
    pub pattern: String,
    /// 1-based line in the robots.txt.
    pub line: u32,
    /// `google` or `rfc`: the reading the rule was matched in.
    pub reading: &'static str,
    /// Google's index.html rule.
    pub implied_by_index_html: bool,
}

/// The robots.txt behind a decision.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct RobotsRecord {
    /// The robots.txt URL.
    pub url: String,
    /// Where the last response came from.
    pub final_url: String,
    /// HTTP status, if there was a response.
    pub status: Option<u16>,
    /// SHA-256 of the body (hex), when one was read.
    pub sha256: Option<String>,
    /// When it was fetched (RFC 3339).
    pub fetched_at: String,
    /// Body bytes.
    pub bytes: usize,
    /// Redirect hops.
    pub redirects: u8,
    /// Age of the copy in seconds at decision time.
    pub age_s: Option<f64>,
    /// The copy was past its freshness.
    pub stale: bool,
}

/// One robots.txt fetch, as logged.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct FetchRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"fetch"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the record was made (RFC 3339, UTC).
    pub time: String,
    /// `scheme://host[:port]`.
    pub origin: String,
    /// The robots.txt URL.
    pub url: String,
    /// Where the last response came from.
    pub final_url: String,
    /// Redirect hops.
    pub redirects: u8,
    /// `success`, `unavailable`, `too-many-redirects` or `unreachable`.
    pub result: &'static str,
    /// HTTP status, if there was a response.
    pub status: Option<u16>,
    /// Why it was unreachable.
    pub cause: Option<String>,
    /// The failure class (`dns`, `status_5xx`, ...).
    pub cause_class: Option<&'static str>,
    /// Decoded body bytes kept.
    pub bytes: usize,
    /// The body was cut at the size limit.
    pub truncated: bool,
    /// SHA-256 of the body (hex).
    pub sha256: Option<String>,
    /// The snapshot file holding the body.
    pub snapshot: Option<String>,
    /// When the fetch started (RFC 3339).
    pub fetched_at: String,
    /// How long it took, in milliseconds.
    pub duration_ms: f64,
}

/// A record about the log itself (`"type": "log"`): where a process opened it and how
/// the previous one had left it, a clean close, records lost to a write error. Written
/// by the log, not by requests.
#[derive(Debug, Clone, Serialize)]
pub(crate) struct LogRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"log"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When (RFC 3339, UTC).
    pub time: String,
    /// What happened, with its fields.
    #[serde(flatten)]
    pub event: LogEvent,
}

/// What a [`LogRecord`] says (its `event` field and the fields that go with it).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "kebab-case")]
pub(crate) enum LogEvent {
    /// A process opened the log for appending.
    Open {
        /// How the file was found: `new` (empty or absent), `clean` (it ended with a
        /// `close` record), `unclean` (the previous process ended without one: killed or
        /// crashed), `torn` (it ended partway through a line, which this record follows
        /// on a line of its own).
        previous_run: &'static str,
        /// `torn`: the length of the unfinished line, in bytes.
        fragment_bytes: Option<u64>,
        /// robotsgate's version.
        version: &'static str,
        /// The durability the log is written with (`written`, `synced`, `buffered`).
        durability: &'static str,
    },
    /// The process closed the log cleanly; nothing was lost.
    Close {},
    /// The first record of a file of a log that keeps a Merkle tree: where the tree
    /// stands before this record, so that the file can be checked without the earlier ones.
    FileStart {
        /// Leaves before this record (in earlier files); this record is leaf `tree_size`.
        tree_size: u64,
        /// The tree's root hash at `tree_size`, in hex.
        root: String,
        /// The roots of the perfect subtrees that make up that tree, largest first, in hex.
        frontier: Vec<String>,
        /// The file before this one (its name when it was closed), if any.
        previous_file: Option<String>,
    },
    /// The last record of a file closed by rotation: the tree goes on in the next file,
    /// whose `file-start` record says `tree_size` this record's number plus one.
    Rotate {
        /// Leaves in the tree with this record.
        tree_size: u64,
    },
    /// Writing failed: records were lost (their requests were refused with `503` when
    /// `on_error = "refuse"`), written once writing works again.
    WriteError {
        /// Records that did not reach the file.
        lost_records: u64,
        /// A write stopped partway through a line, of this many bytes; this record
        /// follows it on a line of its own.
        fragment_bytes: Option<u64>,
        /// The error.
        error: String,
        /// When the first of these failures happened.
        since: String,
    },
}

impl LogRecord {
    /// The record of `event`, made now.
    pub(super) fn now(event: LogEvent) -> LogRecord {
        LogRecord { schema_version: SCHEMA_VERSION, kind: "log", time: rfc3339(SystemTime::now()), event }
    }

    /// The record as its JSON line.
    pub(super) fn line(&self) -> Vec<u8> {
        to_line(self)
    }
}

/// What a forwarded response's headers said about using its content, for a request made
/// for a purpose (`"type": "response-usage"`, one per such response that carries a
/// `Content-Usage`, `Content-Signal` or `X-Robots-Tag` header).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct ResponseUsageRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"response-usage"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the response headers arrived (RFC 3339, UTC).
    pub time: String,
    /// The decision record's `request_id`.
    pub request_id: String,
    /// The request URL (query redacted if configured).
    pub url: String,
    /// The product token.
    pub agent: String,
    /// The purpose, e.g. `["train-ai"]`.
    pub purpose: Vec<&'static str>,
    /// The origin's status code.
    pub status: u16,
    /// The `Content-Usage` field value (lines joined with `, `), if any.
    pub content_usage: Option<String>,
    /// The `Content-Signal` field value, if any.
    pub content_signal: Option<String>,
    /// The `X-Robots-Tag` field lines.
    pub x_robots_tag: Vec<String>,
    /// The category of the purpose the headers refuse, if any.
    pub refused: Option<&'static str>,
    /// [`Outcome::as_str`]: `usage-refused` (the response was replaced by robotsgate's
    /// 403), `would-refuse-usage` (report-only, or `purpose.enforce_response` off: passed
    /// on), or `allowed`.
    pub outcome: &'static str,
}

/// An origin asked payment for a request (`402` with `crawler-price`) or refused it with a
/// `crawler-error`: what it asked, and whether robotsgate paid (`"type": "payment"`, keyed
/// by the decision's `request_id`; in mode off, an id of its own).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct PaymentRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"payment"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the answer arrived (RFC 3339, UTC).
    pub time: String,
    /// The decision record's `request_id`.
    pub request_id: String,
    /// The origin (`scheme://host:port`).
    pub origin: String,
    /// What the origin asked and what robotsgate did: its fields (`status`, `price`,
    /// `error`, `max_price`, `retried`, `retry_status`, `charged`, `retry_error`,
    /// `no_retry`) follow `origin` in the line.
    #[serde(flatten)]
    pub payment: Payment,
}

/// What the client finally got for a request, as logged after its answer is over (one
/// per decision record, keyed by `request_id`).
#[derive(Debug, Clone, Serialize)]
pub(crate) struct OutcomeRecord {
    /// [`SCHEMA_VERSION`].
    pub schema_version: u32,
    /// `"outcome"`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    /// When the answer was over (RFC 3339, UTC).
    pub time: String,
    /// The decision record's `request_id`.
    pub request_id: String,
    /// The status sent to the client; `None` when no answer went out.
    pub status: Option<u16>,
    /// `origin` or `robotsgate`; `None` when no answer went out.
    pub answered_by: Option<&'static str>,
    /// The kind of robotsgate's own answer (`x-robotsgate`).
    pub refusal: Option<&'static str>,
    /// Body bytes handed to the client's connection (through a tunnel: bytes to the client).
    pub bytes: u64,
    /// Through a tunnel or upgraded connection: bytes from the client.
    pub bytes_from_client: Option<u64>,
    /// How it ended: `complete`, `client-gone`, `origin-error`, `closed` or `error`.
    pub end: &'static str,
    /// From the start of the request's decision to the end, in microseconds.
    pub duration_us: u64,
}

/// The facts of an [`OutcomeRecord`].
#[derive(Debug, Clone, Copy)]
pub(crate) struct OutcomeFacts<'a> {
    /// The decision record's `request_id`.
    pub request_id: &'a str,
    /// The status sent to the client.
    pub status: Option<u16>,
    /// `origin` or `robotsgate`.
    pub answered_by: Option<&'static str>,
    /// The kind of robotsgate's own answer.
    pub refusal: Option<&'static str>,
    /// Body bytes to the client.
    pub bytes: u64,
    /// Bytes from the client through a tunnel.
    pub bytes_from_client: Option<u64>,
    /// How it ended.
    pub end: &'static str,
    /// From the decision's start to the end.
    pub duration: Duration,
}

impl OutcomeRecord {
    /// The record of `facts` at `now`.
    pub fn of(facts: OutcomeFacts<'_>, now: SystemTime) -> OutcomeRecord {
        OutcomeRecord {
            schema_version: SCHEMA_VERSION,
            kind: "outcome",
            time: rfc3339(now),
            request_id: facts.request_id.to_owned(),
            status: facts.status,
            answered_by: facts.answered_by,
            refusal: facts.refusal,
            bytes: facts.bytes,
            bytes_from_client: facts.bytes_from_client,
            end: facts.end,
            duration_us: micros(facts.duration),
        }
    }
}

/// The request side of a decision record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RequestFacts<'a> {
    /// Unique request id.
    pub request_id: &'a str,
    /// The client's address.
    pub client: Option<std::net::SocketAddr>,
    /// The authenticated proxy user.
    pub user: Option<&'a str>,
    /// Request method.
    pub method: &'a str,
    /// Full request URL.
    pub url: &'a str,
    /// Whether the path was visible.
    pub path_visible: bool,
    /// How the request came ([`crate::layer::Transport::as_str`]), when known.
    pub transport: Option<&'static str>,
    /// Report-only mode.
    pub report_only: bool,
    /// Time taken to decide.
    pub elapsed: Duration,
    /// What pacing did, when anything paced the request.
    pub pace: Option<&'a PaceFacts>,
    /// Fleet mode: `Some("alone")` when decided without the fleet's Redis.
    pub cluster: Option<&'static str>,
    /// Fleet mode: answered `503` because the fleet's Redis cannot be reached and
    /// `cluster.on_error` is `refuse`: the outcome is `cluster-unavailable`.
    pub cluster_refused: bool,
    /// With request signing on: whether the request goes signed.
    pub signed: Option<bool>,
}

impl RequestFacts<'_> {
    /// Refused by pacing (enforce): the outcome is `paced`.
    pub(super) fn paced(&self) -> bool {
        !self.report_only && self.pace.is_some_and(|p| p.refused.is_some())
    }

    /// The outcome of a request refused for a reason that is not the decision's own
    /// (`cluster-unavailable`, `paced`), if it was.
    pub(super) fn refused(&self) -> Option<Outcome> {
        if self.cluster_refused {
            Some(Outcome::ClusterUnavailable)
        } else if self.paced() {
            Some(Outcome::Paced)
        } else {
            None
        }
    }

    /// How long the request was held, in whole milliseconds.
    pub(super) fn pace_wait_ms(&self) -> u64 {
        self.pace.map_or(0, |p| millis(p.waited))
    }
}

impl DecisionRecord {
    /// The record of decision `d` on `request`, made at `now`; `redact` as for
    /// [`logged_url`].
    pub(super) fn of(
        d: &Decision,
        request: RequestFacts<'_>,
        now: SystemTime,
        redact: bool,
    ) -> DecisionRecord {
        let rule = d.rule().map(|r| RuleRecord {
            kind: r.kind.as_str(),
            pattern: r.pattern.to_owned(),
            line: r.line,
            reading: r.reading.as_str(),
            implied_by_index_html: r.implied_by_index_html,
        });
        let robots = d.fetch_facts().map(|f| RobotsRecord {
            url: f.url.clone(),
            final_url: f.final_url.clone(),
            status: f.status,
            sha256: f.sha256_hex(),
            fetched_at: rfc3339(f.fetched_at),
            bytes: f.bytes,
            redirects: f.redirects,
            age_s: d.age.map(|a| a.as_secs_f64()),
            stale: d.stale,
        });
        DecisionRecord {
            schema_version: SCHEMA_VERSION,
            kind: "decision",
            time: rfc3339(now),
            request_id: request.request_id.to_owned(),
            client: request.client.map(|c| c.to_string()),
            user: request.user.map(str::to_owned),
            method: request.method.to_owned(),
            url: logged_url(request.url, redact).into_owned(),
            origin: d.origin.to_string(),
            agent: d.agent.to_string(),
            profile: d.profile.as_str(),
            mode: if request.report_only { "report-only" } else { "enforce" },
            outcome: outcome_of(d, request.report_only, request.refused()).as_str(),
            reason: d.reason.class().as_str(),
            rule,
            explanation: d.to_string(),
            path_visible: request.path_visible,
            transport: request.transport,
            robots,
            unreachable_cause: unreachable_cause_of(d),
            override_reason: override_reason_of(d),
            decision_us: micros(request.elapsed),
            usage: UsageRecord::of(d),
            pace_wait_ms: request.pace_wait_ms(),
            pace: request.pace.map(PaceRecord::of),
            cluster: request.cluster,
            signed: request.signed,
        }
    }
}

impl FetchRecord {
    /// The record of a robots.txt fetch from `origin`; `snapshots` is the folder its body
    /// is kept in, if any.
    pub(super) fn of(origin: &Origin, outcome: &FetchOutcome, snapshots: Option<&Path>) -> FetchRecord {
        let (result, cause, class) = match &outcome.result {
            FetchResult::Success { .. } => ("success", None, None),
            FetchResult::Unavailable { .. } => ("unavailable", None, None),
            FetchResult::TooManyRedirects => ("too-many-redirects", None, None),
            FetchResult::Unreachable(u) => ("unreachable", Some(u.to_string()), Some(u.class())),
        };
        let status = outcome.status;
        let sha = outcome.sha256.map(hex::encode);
        let snapshot = match (snapshots, &sha) {
            (Some(dir), Some(h)) => Some(snapshot_path(dir, h).display().to_string()),
            _ => None,
        };
        FetchRecord {
            schema_version: SCHEMA_VERSION,
            kind: "fetch",
            time: rfc3339(SystemTime::now()),
            origin: origin.to_string(),
            url: outcome.url.clone(),
            final_url: outcome.final_url.clone(),
            redirects: outcome.redirects,
            result,
            status,
            cause,
            cause_class: class,
            bytes: outcome.body.len(),
            truncated: outcome.truncated,
            sha256: sha,
            snapshot,
            fetched_at: rfc3339(outcome.fetched_at),
            duration_ms: outcome.duration.as_secs_f64() * 1000.0,
        }
    }
}

/// The outcome of decision `d` ([`Decision::outcome`]), or `refused` (`paced`,
/// `cluster-unavailable`: see [`RequestFacts::refused`]) when it is set.
pub(super) fn outcome_of(d: &Decision, report_only: bool, refused: Option<Outcome>) -> Outcome {
    refused.unwrap_or_else(|| d.outcome(report_only))
}

/// Why robots.txt was unreachable, when that matters for the decision.
pub(super) fn unreachable_cause_of(d: &Decision) -> Option<String> {
    match &d.reason {
        Reason::Unreachable { cause } => Some(cause.to_string()),
        _ => d.failure.as_ref().map(|f| f.cause.to_string()),
    }
}

/// The override that decided: action, hosts and the operator's reason.
pub(super) fn override_reason_of(d: &Decision) -> Option<String> {
    match &d.reason {
        Reason::Override { action, hosts, reason } => Some(format!("{} {hosts}: {reason}", action.as_str())),
        _ => None,
    }
}

/// Whole microseconds.
pub(super) fn micros(d: Duration) -> u64 {
    d.as_micros().min(u64::MAX as u128) as u64
}

/// Whole milliseconds.
pub(super) fn millis(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

/// A record as its JSON line, with the newline.
pub(super) fn to_line<T: Serialize>(record: &T) -> Vec<u8> {
    let mut line = serde_json::to_vec(record)
        .unwrap_or_else(|e| format!("{{\"serialize_error\":\"{e}\"}}").into_bytes());
    line.push(b'\n');
    line
}

/// The request URL as logged: with its query replaced by `?<redacted>` when `redact`
/// ([`AuditConfig::redact_query`](super::AuditConfig::redact_query)) is set.
pub(super) fn logged_url(url: &str, redact: bool) -> Cow<'_, str> {
    if redact { Cow::Owned(redact_query(url)) } else { Cow::Borrowed(url) }
}

fn redact_query(url: &str) -> String {
    match url.split_once('?') {
        Some((base, _)) => format!("{base}?<redacted>"),
        None => url.to_owned(),
    }
}

/// The request fields of a plain GET of `url` (tests).
#[cfg(test)]
pub(super) fn get(url: &str, report_only: bool) -> RequestFacts<'_> {
    RequestFacts {
        request_id: "r",
        client: None,
        user: None,
        method: "GET",
        url,
        path_visible: true,
        transport: Some("proxy"),
        report_only,
        elapsed: Duration::from_micros(5),
        pace: None,
        cluster: None,
        cluster_refused: false,
        signed: None,
    }
}
