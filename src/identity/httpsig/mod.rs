//! Web Bot Auth: HTTP Message Signatures (RFC 9421) for bots, as
//! draft-ietf-webbotauth-httpsig-protocol (-01, October 2026) profiles them, with Ed25519.
//!
//! **Verifying** (the ingress side). [`Verifier::verify`] gives a request a three-valued
//! [`Verdict`]:
//! - it reads `Signature-Input`, `Signature` and `Signature-Agent` (structured fields,
//!   bounded: [`VerifyConfig::max_field_bytes`], [`VerifyConfig::max_signatures`],
//!   [`VerifyConfig::max_components`]) and keeps the signatures with
//!   `tag="web-bot-auth"`;
//! - each must have `created` and `expires` (now inside them, give or take
//!   [`VerifyConfig::clock_skew`]; at most [`VerifyConfig::max_validity`] apart), `keyid`
//!   (an RFC 7638 thumbprint, not one of the RFC 9421 test keys), `alg` absent or
//!   `ed25519`, and cover `@authority` (or `@target-uri`) and the `Signature-Agent` member
//!   it names (`"signature-agent";key="sig1"`, or `"signature-agent"` for the older bare
//!   string) — all checked before any key is fetched ([`examine`], pure);
//! - the member's directory ([`DirectoryUrl`]: an origin means its well-known directory) is
//!   fetched through the library's [`Connector`](crate::net::Connector)
//!   (`https` only, no redirects, 64 KiB, 32 keys, 2 s, the destination guard) and kept by a
//!   [`DirectoryCache`] (HTTP freshness within bounds; a failed refresh keeps the keys; a
//!   failure is remembered at most 5 min; one fetch per directory at a time); the key is
//!   looked up by (directory, keyid), never by keyid alone; the directory's own response
//!   signatures are checked where present;
//! - one Ed25519 verification (ring), then the replay check (a bounded cache: the same
//!   nonce, or signature, refused until it expires).
//!
//! **Signing** (the egress side): [`RequestSigner`] adds `Signature-Agent`,
//! `Signature-Input` and `Signature` to a request (replacing any it had);
//! [`directory_response`] is the key directory to serve, with one response signature per
//! key.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::SystemTime;
//! use robotsgate::identity::httpsig::{RequestSigner, RequestView, SigningKey, VerifyConfig, examine};
//!
//! // A crawler signs …
//! let key = Arc::new(SigningKey::generate()?);
//! let signer = RequestSigner::new(key.clone(), "https://bot.example")?;
//! let mut request = http::Request::get("https://site.example/page").body(())?.into_parts().0;
//! signer.sign(&mut request, SystemTime::now())?;
//!
//! // … and a site checks, the key in hand (the Verifier fetches it from the directory).
//! let exam = examine(RequestView::of(&request), robotsgate::identity::httpsig::unix_seconds(SystemTime::now()), &VerifyConfig::default());
//! let candidate = &exam.candidates[0];
//! assert_eq!(candidate.directory.as_str(), "https://bot.example/.well-known/http-message-signatures-directory");
//! assert_eq!(candidate.keyid, key.public().thumbprint());
//! assert!(candidate.verify(key.public()).is_ok());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Where the implementation chooses between readings of the drafts:
//! - a member that is a full `https` URL (not an origin) is fetched as it is, as earlier
//!   drafts and the `web-bot-auth` crate do; `type=cimd` (Signature Agent Cards) is not
//!   resolved (the request is unverified); a card (`Directory::parse`) gives its
//!   `rfc9309-product-token` for callers that fetch cards;
//! - a directory that was fetched and lacks the key makes the signature
//!   [`Failure::UnknownKey`] (the request names an agent whose directory disowns the key);
//!   a directory that cannot be fetched, with nothing cached, leaves it
//!   [`Unverified::DirectoryUnavailable`];
//! - a signature whose `Signature-Agent` is absent is unverified; one that does not cover a
//!   `Signature-Agent` that is present fails.

mod base;
mod check;
mod client;
mod config;
mod directory;
mod fields;
mod key;
mod pay;
mod replay;
mod sign;
mod signers;
mod verdict;
mod verifier;

#[cfg(test)]
mod tests;

use std::time::SystemTime;

pub use base::{BaseError, Message, RequestView};
pub use check::{ACCEPT_SIGNATURE, Candidate, Examination, examine, signature_agents};
pub use client::DirectoryCache;
pub use config::{DirectoryConfig, ResponseSignatures, VerifyConfig};
pub use directory::{
    AgentError, Directory, DirectoryKey, DirectoryUrl, DocumentError, IgnoredKey, MEDIA_TYPE,
    WELL_KNOWN_PATH, directory_json,
};
pub use key::{KeyError, PublicKey, SigningKey};
pub use pay::{
    CRAWLER_CHARGED, CRAWLER_ERROR, CRAWLER_EXACT_PRICE, CRAWLER_MAX_PRICE, CRAWLER_PRICE, Payment, Price,
    PriceError, retry_refusal,
};
pub use replay::{ReplayFuture, ReplayKey, SharedReplays};
pub use sign::{LABEL, RequestSigner, SignError, directory_response};
pub use signers::Signers;
pub use verdict::{Failure, ReplayStatus, Unverified, Verdict, Verified};
pub use verifier::Verifier;

/// Seconds since the Unix epoch (0 before it).
pub fn unix_seconds(t: SystemTime) -> i64 {
    t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| i64::try_from(d.as_secs()).unwrap_or(i64::MAX))
}
