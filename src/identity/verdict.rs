//! [`Verdict`]: what a check of a bot's claimed identity says, three-valued.

use std::fmt;
use std::sync::Arc;

use super::httpsig::Failure;

/// What checking a request's claimed operator says.
///
/// - [`Verdict::Verified`]: a method confirmed the claim.
/// - [`Verdict::Unverified`]: nothing could confirm or refute it (no operator claims the
///   token, the operator publishes nothing to check with, the check is still running or
///   the resolver failed).
/// - [`Verdict::Failed`]: the request claims an operator and the check says no: an
///   impersonator.
///
/// ```
/// use robotsgate::identity::{Method, Verdict, Why};
/// let v = Verdict::Verified(Method::IpRange { list: "https://openai.com/gptbot.json".into() });
/// assert_eq!(v.class(), "verified");
/// assert_eq!(Verdict::Failed(Why::NotInRanges).class(), "failed");
/// assert_eq!(Verdict::Unverified(Why::Pending).to_string(), "unverified (lookup pending)");
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// The claim holds, by this method.
    Verified(Method),
    /// Nothing to check the claim with (yet).
    Unverified(Why),
    /// The claim is false.
    Failed(Why),
}

impl Verdict {
    /// `verified`, `unverified` or `failed`: for logs, metrics and the audit log.
    pub fn class(&self) -> &'static str {
        match self {
            Verdict::Verified(_) => "verified",
            Verdict::Unverified(_) => "unverified",
            Verdict::Failed(_) => "failed",
        }
    }

    /// Whether the claim holds.
    pub fn is_verified(&self) -> bool {
        matches!(self, Verdict::Verified(_))
    }

    /// Whether the claim is false (an impersonator).
    pub fn is_failed(&self) -> bool {
        matches!(self, Verdict::Failed(_))
    }
}

impl fmt::Display for Verdict {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Verdict::Verified(m) => write!(f, "verified ({m})"),
            Verdict::Unverified(w) => write!(f, "unverified ({w})"),
            Verdict::Failed(w) => write!(f, "failed ({w})"),
        }
    }
}

/// How a claim was verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Method {
    /// The address is in one of the operator's published IP range lists.
    IpRange {
        /// The list (its URL or file path).
        list: Arc<str>,
    },
    /// Forward-confirmed reverse DNS: the address's PTR name ends with one of the
    /// operator's suffixes and resolves back to the address.
    ReverseDns {
        /// The confirmed name (lower case, no trailing dot).
        name: Arc<str>,
    },
    /// Web Bot Auth: a signature on the request verified with a key published in the key
    /// directory of one of the operator's `Signature-Agent`s.
    Signature {
        /// The key directory's URL (the agent's identity).
        agent: Arc<str>,
        /// The key's thumbprint.
        keyid: Arc<str>,
    },
}

impl Method {
    /// `ip_range`, `reverse_dns` or `signature`: for logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            Method::IpRange { .. } => "ip_range",
            Method::ReverseDns { .. } => "reverse_dns",
            Method::Signature { .. } => "signature",
        }
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Method::IpRange { list } => write!(f, "in IP list {list}"),
            Method::ReverseDns { name } => write!(f, "reverse DNS {name}"),
            Method::Signature { agent, keyid } => write!(f, "signed by key {keyid} of {agent}"),
        }
    }
}

/// Why a claim is not verified.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Why {
    /// (Unverified) No configured operator uses the claimed product token.
    UnknownToken,
    /// (Unverified) The operator has neither a loaded IP list nor reverse DNS suffixes.
    NoMethod,
    /// (Unverified) The reverse DNS lookup did not finish within the wait; it goes on and
    /// a later request gets its answer.
    Pending,
    /// (Unverified) Too many reverse DNS lookups are running: this one was not started.
    Busy,
    /// (Unverified) The resolver failed or timed out.
    Dns(Arc<str>),
    /// (Failed) The address is in none of the operator's IP lists and the operator has no
    /// reverse DNS to try.
    NotInRanges,
    /// (Failed) The address has no PTR record.
    NoPtr,
    /// (Failed) The address's PTR name is not under any of the operator's suffixes.
    ForeignName(Arc<str>),
    /// (Failed) The PTR name is under the operator's suffixes but does not resolve back to
    /// the address.
    NotConfirmed(Arc<str>),
    /// (Unverified) The request's Web Bot Auth signature names one of the operator's
    /// `Signature-Agent`s and could not be checked (its key directory unavailable or still
    /// being fetched), and nothing else verified it.
    SignatureUnchecked(Arc<str>),
    /// (Failed) The request's Web Bot Auth signature names one of the operator's
    /// `Signature-Agent`s and does not hold (a bad or replayed signature, an unknown key,
    /// an expired signature, …).
    Signature {
        /// The `Signature-Agent` directory the request names.
        agent: Arc<str>,
        /// What failed.
        failure: Failure,
    },
}

impl Why {
    /// A short stable name, for logs, metrics and the audit log.
    pub fn class(&self) -> &'static str {
        match self {
            Why::UnknownToken => "unknown_token",
            Why::NoMethod => "no_method",
            Why::Pending => "pending",
            Why::Busy => "busy",
            Why::Dns(_) => "dns_error",
            Why::NotInRanges => "not_in_ranges",
            Why::NoPtr => "no_ptr",
            Why::ForeignName(_) => "foreign_name",
            Why::NotConfirmed(_) => "not_forward_confirmed",
            Why::SignatureUnchecked(_) => "signature_unchecked",
            Why::Signature { failure: Failure::Replayed, .. } => "replayed_signature",
            Why::Signature { .. } => "bad_signature",
        }
    }
}

impl fmt::Display for Why {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Why::UnknownToken => f.write_str("no operator uses this token"),
            Why::NoMethod => f.write_str("the operator publishes nothing to check with"),
            Why::Pending => f.write_str("lookup pending"),
            Why::Busy => f.write_str("too many lookups running"),
            Why::Dns(e) => write!(f, "DNS: {e}"),
            Why::NotInRanges => f.write_str("not in the operator's IP lists"),
            Why::NoPtr => f.write_str("no PTR record"),
            Why::ForeignName(n) => write!(f, "PTR name {n} is not the operator's"),
            Why::NotConfirmed(n) => write!(f, "{n} does not resolve back to the address"),
            Why::SignatureUnchecked(why) => write!(f, "signature not checked: {why}"),
            Why::Signature { agent, failure } => write!(f, "signature of {agent}: {failure}"),
        }
    }
}
