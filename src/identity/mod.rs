//! Who a bot is: checking that a request claiming an operator's product token (say
//! `GPTBot`) comes from that operator (ingress), and proving robotsgate's own (egress).
//!
//! A check gives a three-valued [`Verdict`]: verified (by which [`Method`]), unverified
//! (nothing to check it with, or not yet), or failed (it claims an operator and the check
//! says no: an impersonator).
//!
//! - [`ranges`]: the operators' published IP range lists (a bundled, dated snapshot;
//!   refreshed from their URLs; overridable by files), looked up by longest-prefix match.
//! - [`rdns`]: forward-confirmed reverse DNS, cached, one lookup per address, a bounded
//!   wait.
//! - [`Operator`]: an operator's tokens, lists and reverse DNS suffixes (plain data;
//!   [`Operator::defaults`] for the large crawlers).
//! - [`Verifier`]: (client address, claimed token) → [`Verdict`]; with the request's Web
//!   Bot Auth signatures too ([`Verifier::verify_request`] → [`Identity`]), the call a
//!   layer makes.
//! - [`httpsig`]: Web Bot Auth (HTTP Message Signatures, RFC 9421, as
//!   draft-ietf-webbotauth-httpsig-protocol profiles them): verifying a request's
//!   signatures against the key directory its `Signature-Agent` names, signing requests,
//!   and signing the key directory robotsgate serves.
//!
//! ```
//! use robotsgate::identity::ranges::{ListLimits, ListSource, Ranges, bundled};
//! // The bundled copy of Google's common-crawlers list, in use from the start.
//! let ranges = Ranges::new(vec![ListSource::new(bundled::GOOGLE_COMMON, "Google")], ListLimits::default());
//! let table = ranges.table();
//! let operator = |ip: &str| table.lookup(ip.parse().unwrap()).next().map(|l| l.operator().to_string());
//! assert_eq!(operator("66.249.64.7").as_deref(), Some("Google"));
//! assert_eq!(operator("::ffff:66.249.64.7").as_deref(), Some("Google"));
//! assert_eq!(operator("192.0.2.1"), None);
//! ```

pub mod httpsig;
mod operator;
pub mod ranges;
pub mod rdns;
mod verdict;
mod verifier;

pub use operator::Operator;
pub use verdict::{Method, Verdict, Why};
pub use verifier::{Identity, Verifier};

/// `text` cut to at most `max` bytes (`max` >= 3), `...` ending it when something was cut:
/// for a value a document or a request sent, quoted in a reason that goes to the log.
pub(crate) fn cut(text: &mut String, max: usize) {
    if text.len() > max {
        let mut end = max.saturating_sub(3);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
}
