//! Who a bot is: checking the identity a request claims (ingress) and proving robotsgate's
//! own (egress).
//!
//! - [`httpsig`]: Web Bot Auth (HTTP Message Signatures, RFC 9421, as
//!   draft-ietf-webbotauth-httpsig-protocol profiles them): verifying a request's
//!   signatures against the key directory its `Signature-Agent` names, signing requests,
//!   and signing the key directory robotsgate serves.

pub mod httpsig;
