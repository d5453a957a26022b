//! What a Web Bot Auth check says about a request: [`Verdict`], three-valued as the draft's
//! "Verifier Outcomes" asks — verified, unverified (nothing to decide with), failed (a
//! signature that claims an agent and does not hold).

use std::sync::Arc;

/// The outcome of checking a request's Web Bot Auth signatures.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// A signature verified with a key its `Signature-Agent` directory publishes.
    Verified(Verified),
    /// Nothing to decide with: no signature, no usable agent, or a directory that could not
    /// be fetched and was not cached. Not evidence either way.
    Unverified(Unverified),
    /// A signature that claims an agent and does not hold: an impersonator, a replay, or a
    /// request altered on the way.
    Failed(Failure),
}

impl Verdict {
    /// `verified`, `unverified` or `failed`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Verdict::Verified(_) => "verified",
            Verdict::Unverified(_) => "unverified",
            Verdict::Failed(_) => "failed",
        }
    }

    /// The verified identity, if any.
    pub fn verified(&self) -> Option<&Verified> {
        match self {
            Verdict::Verified(v) => Some(v),
            _ => None,
        }
    }
}

/// A verified signature: who signed (the directory URL and the key it publishes) and the
/// signature's parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// The directory URL the key was found at: the identity (the draft's "Signature-Agent
    /// URL is the identifier"), without its fragment.
    pub directory: Arc<str>,
    /// The key's thumbprint (the signature's `keyid`).
    pub keyid: Arc<str>,
    /// The signature's label in `Signature-Input`.
    pub label: String,
    /// `created` (seconds since the epoch).
    pub created: i64,
    /// `expires` (seconds since the epoch).
    pub expires: i64,
    /// `nonce`, if the signature has one.
    pub nonce: Option<String>,
    /// The directory's response carried a valid response signature by this key (the draft's
    /// possession proof, binding the key to the directory's authority).
    pub proven: bool,
    /// What the replay check did.
    pub replay: ReplayStatus,
    /// The product token the key's directory names (a Signature Agent Card's
    /// `rfc9309-product-token`), if it names one.
    pub product_token: Option<Arc<str>>,
}

/// What the replay check did for a verified signature.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayStatus {
    /// Replays are not checked (configuration).
    Off,
    /// Recorded: the same signature (or nonce) comes back as [`Failure::Replayed`] until it
    /// expires.
    Recorded,
    /// Not recorded: the replay cache was full of entries living longer. A replay of this
    /// signature would not be noticed.
    Full,
    /// Recorded here and in the fleet's store ([`SharedReplays`](super::SharedReplays)):
    /// a replay at any replica is noticed.
    Shared,
}

/// Why there was nothing to decide with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Unverified {
    /// No `Signature-Input` and `Signature` fields.
    #[error("no signature")]
    NoSignature,
    /// Signatures, none with `tag="web-bot-auth"`.
    #[error("no Web Bot Auth signature")]
    NotWebBotAuth,
    /// A Web Bot Auth signature and no `Signature-Agent`: no key to check it with.
    #[error("no Signature-Agent")]
    NoAgent,
    /// The `Signature-Agent` member has a `type` this verifier does not resolve.
    #[error("Signature-Agent type {0} not supported")]
    UnsupportedAgentType(String),
    /// The directory could not be fetched and nothing is cached.
    #[error("directory {directory} unavailable: {reason}")]
    DirectoryUnavailable {
        /// The directory URL.
        directory: String,
        /// Why.
        reason: String,
    },
    /// The `Signature-Agent` is not one of the agents the caller checks (the others'
    /// directories are never fetched).
    #[error("Signature-Agent {directory} not checked here")]
    UnknownAgent {
        /// The directory URL.
        directory: String,
    },
    /// The directory is being fetched and did not arrive within the wait allowed.
    #[error("directory {directory} still being fetched")]
    Pending {
        /// The directory URL.
        directory: String,
    },
}

impl Unverified {
    /// A short stable name, for logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            Unverified::NoSignature => "no_signature",
            Unverified::NotWebBotAuth => "not_web_bot_auth",
            Unverified::NoAgent => "no_agent",
            Unverified::UnsupportedAgentType(_) => "agent_type",
            Unverified::DirectoryUnavailable { .. } => "directory_unavailable",
            Unverified::Pending { .. } => "pending",
            Unverified::UnknownAgent { .. } => "unknown_agent",
        }
    }
}

/// Why a signature failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Failure {
    /// A signature field longer than allowed.
    #[error("{0} longer than allowed")]
    TooLarge(&'static str),
    /// More signatures than allowed.
    #[error("more than {0} signatures")]
    TooMany(usize),
    /// A field that does not parse, or a value of the wrong type.
    #[error("malformed {0}")]
    Malformed(String),
    /// A `Signature-Input` member without its `Signature` member.
    #[error("no Signature for label {0}")]
    NoSignatureValue(String),
    /// A parameter Web Bot Auth requires is missing.
    #[error("missing parameter {0}")]
    MissingParameter(&'static str),
    /// An `alg` other than `ed25519`.
    #[error("algorithm {0} not supported")]
    UnsupportedAlgorithm(String),
    /// `expires` has passed (beyond the allowed clock skew).
    #[error("expired at {expires} (now {now})")]
    Expired {
        /// `expires`.
        expires: i64,
        /// The time of the check.
        now: i64,
    },
    /// `created` is in the future (beyond the allowed clock skew).
    #[error("created at {created}, in the future (now {now})")]
    NotYetValid {
        /// `created`.
        created: i64,
        /// The time of the check.
        now: i64,
    },
    /// `expires` before `created`, or further after it than allowed.
    #[error("validity of {0} s not allowed")]
    Validity(i64),
    /// A component Web Bot Auth requires is not covered.
    #[error("{0} not covered")]
    NotCovered(&'static str),
    /// The signature base cannot be made (unsupported or missing component, …).
    #[error("{0}")]
    Base(#[from] super::base::BaseError),
    /// The `Signature-Agent` member is not a usable directory URL.
    #[error("bad Signature-Agent: {0}")]
    BadAgent(String),
    /// The key is one of the published test keys.
    #[error("key {0} is a published test key")]
    TestKey(String),
    /// The directory (fetched fine) does not publish this key.
    #[error("directory {directory} has no key {keyid}")]
    UnknownKey {
        /// The directory URL.
        directory: String,
        /// The signature's `keyid`.
        keyid: String,
    },
    /// The key is published with `nbf`/`exp` that exclude now.
    #[error("key {0} not valid now")]
    KeyNotValidNow(String),
    /// The signature does not verify.
    #[error("signature does not verify")]
    BadSignature,
    /// The signature (or its nonce) was seen before and has not expired.
    #[error("replayed signature")]
    Replayed,
}

impl Failure {
    /// A short stable name, for logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            Failure::TooLarge(_) | Failure::TooMany(_) => "too_large",
            Failure::Malformed(_) | Failure::NoSignatureValue(_) => "malformed",
            Failure::MissingParameter(_) => "missing_parameter",
            Failure::UnsupportedAlgorithm(_) => "algorithm",
            Failure::Expired { .. } => "expired",
            Failure::NotYetValid { .. } => "future",
            Failure::Validity(_) => "validity",
            Failure::NotCovered(_) => "not_covered",
            Failure::Base(_) => "components",
            Failure::BadAgent(_) => "bad_agent",
            Failure::TestKey(_) => "test_key",
            Failure::UnknownKey { .. } => "unknown_key",
            Failure::KeyNotValidNow(_) => "key_not_valid",
            Failure::BadSignature => "bad_signature",
            Failure::Replayed => "replay",
        }
    }
}
