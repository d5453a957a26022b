//! The Web Bot Auth profile of a request's signatures, without I/O: which signatures are
//! Web Bot Auth ones, whether each meets the draft's requirements, where its key is, and
//! its signature base; then, given the key, whether it verifies.

use std::borrow::Cow;

use robotsgate_rep::sf::{self, BareItem, Dictionary, InnerList};

use super::base::{Message, RequestView, signature_base};
use super::config::VerifyConfig;
use super::directory::{AgentError, DirectoryUrl};
use super::fields::{covers, field, has_tag, sig_params, signature_bytes};
use super::key::{PublicKey, is_test_key};
use super::verdict::{Failure, Unverified, Verdict};

/// The `tag` of Web Bot Auth request signatures.
pub const WEB_BOT_AUTH_TAG: &str = "web-bot-auth";

/// The `Accept-Signature` (RFC 9421 §5.1) a refusal of a bot carries, so that it can sign
/// and retry: a Web Bot Auth signature as [`examine`] accepts it (`@authority` and the
/// `Signature-Agent` member `sig1`, `created`, `expires`, a `nonce`, Ed25519).
pub const ACCEPT_SIGNATURE: &str = "sig1=(\"@authority\" \"signature-agent\";key=\"sig1\");created;expires;nonce;tag=\"web-bot-auth\";alg=\"ed25519\"";

/// The key directories `headers`' `Signature-Agent` names (each member, or the older bare
/// string), at most [`VerifyConfig::max_signatures`] of them; members that are not usable
/// directory URLs are left out. Nothing is fetched: a caller decides from these whether
/// the request's signatures are worth checking.
pub fn signature_agents(headers: &http::HeaderMap, config: &VerifyConfig) -> Vec<DirectoryUrl> {
    let Ok(Some(value)) = field(headers, "signature-agent", config.max_field_bytes) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    match Agent::parse(&value) {
        Agent::Legacy(s) => out.extend(DirectoryUrl::from_member(&s.value(), None).ok()),
        Agent::Dictionary(d) => {
            for (_, member) in d.iter().take(config.max_signatures) {
                let Some(item) = member.as_item() else { continue };
                let Some(url) = item.bare.as_string() else { continue };
                let kind = match item.params.get("type") {
                    None => None,
                    Some(BareItem::Token(t)) => Some(t),
                    Some(_) => continue,
                };
                out.extend(DirectoryUrl::from_member(&url.value(), kind).ok());
            }
        }
        Agent::Malformed => {}
    }
    out
}

/// A Web Bot Auth signature that met every requirement that needs no key: it only waits for
/// the key its directory publishes under `keyid`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The label (`Signature-Input` member).
    pub label: String,
    /// `keyid`: the key's thumbprint.
    pub keyid: String,
    /// The directory of the `Signature-Agent` member the signature covers.
    pub directory: DirectoryUrl,
    /// `created`.
    pub created: i64,
    /// `expires`.
    pub expires: i64,
    /// `nonce`, if any.
    pub nonce: Option<String>,
    base: String,
    signature: Vec<u8>,
}

impl Candidate {
    /// Whether the signature verifies with `key` (which must be the key of `keyid`).
    pub fn verify(&self, key: &PublicKey) -> Result<(), Failure> {
        if key.thumbprint() != self.keyid {
            return Err(Failure::UnknownKey {
                directory: self.directory.identifier().to_string(),
                keyid: self.keyid.clone(),
            });
        }
        if key.verify(self.base.as_bytes(), &self.signature) { Ok(()) } else { Err(Failure::BadSignature) }
    }

    /// The signature base (RFC 9421 §2.5) the signature is over.
    #[cfg(test)]
    pub(crate) fn signature_base(&self) -> &str {
        &self.base
    }

    /// The signature's bytes.
    pub fn signature(&self) -> &[u8] {
        &self.signature
    }
}

/// What [`examine`] found in a request: the Web Bot Auth signatures ready for their key,
/// and what the others said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Examination {
    /// Signatures that only need their key.
    pub candidates: Vec<Candidate>,
    /// Signatures that failed already, or could not be checked (failed or unverified
    /// verdicts), and the verdict for the request when it has no signature to check.
    pub others: Vec<Verdict>,
}

impl Examination {
    fn other(verdict: Verdict) -> Examination {
        Examination { candidates: Vec::new(), others: vec![verdict] }
    }
}

/// One verdict for a request from the verdicts of its signatures: verified when one is,
/// else failed when one is (the first), else the first reason it was unverified.
pub fn combine(verdicts: impl IntoIterator<Item = Verdict>) -> Verdict {
    let mut first_failed = None;
    let mut first_unverified = None;
    for v in verdicts {
        match v {
            Verdict::Verified(_) => return v,
            Verdict::Failed(_) => {
                first_failed.get_or_insert(v);
            }
            Verdict::Unverified(_) => {
                first_unverified.get_or_insert(v);
            }
        }
    }
    first_failed.or(first_unverified).unwrap_or(Verdict::Unverified(Unverified::NoSignature))
}

/// Reads `request`'s signature fields and checks each Web Bot Auth signature (those with
/// `tag="web-bot-auth"`) against what the draft requires: `created`, `expires` (no further
/// apart than [`VerifyConfig::max_validity`], `now` inside them give or take
/// [`VerifyConfig::clock_skew`]), `keyid` (not a test key), `alg` absent or `ed25519`,
/// `@authority` or `@target-uri` covered, and the `Signature-Agent` member it uses covered
/// (`"signature-agent";key="…"`, or `"signature-agent"` for the older bare-string form).
/// `now` is in seconds since the epoch.
pub fn examine(request: RequestView<'_>, now: i64, config: &VerifyConfig) -> Examination {
    let max = config.max_field_bytes;
    let headers = request.headers;
    let inputs = match field(headers, "signature-input", max) {
        Ok(Some(v)) => v,
        // A `Signature` without `Signature-Input` is another scheme (draft-cavage): not ours.
        Ok(None) => return Examination::other(Verdict::Unverified(Unverified::NoSignature)),
        Err(f) => return Examination::other(Verdict::Failed(f)),
    };
    let Ok(dict) = Dictionary::parse(&inputs) else {
        return Examination::other(Verdict::Failed(Failure::Malformed("Signature-Input".into())));
    };
    let count = dict.iter().count();
    if count > config.max_signatures {
        return Examination::other(Verdict::Failed(Failure::TooMany(config.max_signatures)));
    }
    let signatures = match field(headers, "signature", max) {
        Ok(v) => v,
        Err(f) => return Examination::other(Verdict::Failed(f)),
    };
    let Ok(signatures_dict) = signatures.as_deref().map(Dictionary::parse).transpose() else {
        return Examination::other(Verdict::Failed(Failure::Malformed("Signature".into())));
    };
    let agent = match field(headers, "signature-agent", max) {
        Ok(v) => v,
        Err(f) => return Examination::other(Verdict::Failed(f)),
    };
    let agent = agent.as_deref().map(Agent::parse);

    let mut exam = Examination::default();
    let mut seen = Vec::new();
    for (label, member) in dict.iter() {
        let Some(list) = member.as_inner_list() else { continue };
        if !has_tag(&list, WEB_BOT_AUTH_TAG) {
            continue;
        }
        // A repeated label: the last one counts (RFC 9651 §4.2.2).
        if seen.contains(&label) || dict.get(label) != Some(member) {
            continue;
        }
        seen.push(label);
        match candidate(request, label, &list, signatures_dict.as_ref(), agent.as_ref(), now, config) {
            Ok(c) => exam.candidates.push(c),
            Err(v) => exam.others.push(v),
        }
    }
    if exam.candidates.is_empty() && exam.others.is_empty() {
        exam.others.push(Verdict::Unverified(Unverified::NotWebBotAuth));
    }
    exam
}

/// The `Signature-Agent` field: the dictionary form, or the older bare String.
enum Agent<'a> {
    Dictionary(Dictionary<'a>),
    Legacy(sf::SfString<'a>),
    Malformed,
}

impl<'a> Agent<'a> {
    fn parse(value: &'a [u8]) -> Agent<'a> {
        // "A String Item begins with a double quote while a Dictionary member key does not."
        if value.trim_ascii_start().starts_with(b"\"") {
            return match sf::parse_item(value).map(|i| i.bare) {
                Ok(BareItem::String(s)) => Agent::Legacy(s),
                _ => Agent::Malformed,
            };
        }
        Dictionary::parse(value).map_or(Agent::Malformed, Agent::Dictionary)
    }
}

fn candidate(
    request: RequestView<'_>,
    label: &str,
    list: &InnerList<'_>,
    signatures: Option<&Dictionary<'_>>,
    agent: Option<&Agent<'_>>,
    now: i64,
    config: &VerifyConfig,
) -> Result<Candidate, Verdict> {
    let failed = Verdict::Failed;
    let p = sig_params(list).map_err(failed)?;
    let created = p.created.ok_or(Failure::MissingParameter("created")).map_err(failed)?;
    let expires = p.expires.ok_or(Failure::MissingParameter("expires")).map_err(failed)?;
    let keyid = p.keyid.ok_or(Failure::MissingParameter("keyid")).map_err(failed)?.into_owned();
    if let Some(alg) = p.alg
        && alg != "ed25519"
    {
        return Err(failed(Failure::UnsupportedAlgorithm(alg.into_owned())));
    }
    if !config.allow_test_keys && is_test_key(&keyid) {
        return Err(failed(Failure::TestKey(keyid)));
    }
    let skew = config.clock_skew.as_secs() as i64;
    let validity = expires.saturating_sub(created);
    if validity < 0 || validity > config.max_validity.as_secs() as i64 {
        return Err(failed(Failure::Validity(validity)));
    }
    if created > now.saturating_add(skew) {
        return Err(failed(Failure::NotYetValid { created, now }));
    }
    if expires.saturating_add(skew) < now {
        return Err(failed(Failure::Expired { expires, now }));
    }
    if !covers(list, "@authority") && !covers(list, "@target-uri") {
        return Err(failed(Failure::NotCovered("@authority or @target-uri")));
    }
    let directory = directory_of(label, list, agent)?;
    let signature = signature_bytes(signatures, label).map_err(failed)?;
    if signature.len() != 64 {
        return Err(failed(Failure::BadSignature));
    }
    let mut base = String::with_capacity(512);
    signature_base(&mut base, list, &Message::Request(request), config.max_components)
        .map_err(|e| failed(e.into()))?;
    Ok(Candidate {
        label: label.to_owned(),
        keyid,
        directory,
        created,
        expires,
        nonce: p.nonce.map(Cow::into_owned),
        base,
        signature,
    })
}

/// The directory of the `Signature-Agent` member the signature covers: the member keyed
/// like the label when it covers several, else the first it covers.
fn directory_of(
    label: &str,
    list: &InnerList<'_>,
    agent: Option<&Agent<'_>>,
) -> Result<DirectoryUrl, Verdict> {
    let covered: Vec<Option<Cow<'_, str>>> = list
        .iter()
        .filter(|i| i.bare.as_string().is_some_and(|s| s.is("signature-agent")))
        .map(|i| i.params.get("key").and_then(|k| k.as_string()).map(|k| k.value()))
        .collect();
    let Some(agent) = agent else {
        return Err(if covered.is_empty() {
            Verdict::Unverified(Unverified::NoAgent)
        } else {
            Verdict::Failed(Failure::Base(super::base::BaseError::Missing("signature-agent".into())))
        });
    };
    let Some(first) = covered.first() else {
        return Err(Verdict::Failed(Failure::NotCovered("signature-agent")));
    };
    let chosen = covered.iter().find(|k| k.as_deref() == Some(label)).unwrap_or(first);
    let bad = |why: String| Verdict::Failed(Failure::BadAgent(why));
    let (value, kind) = match (agent, chosen) {
        (Agent::Malformed, _) => return Err(Verdict::Failed(Failure::Malformed("Signature-Agent".into()))),
        (Agent::Legacy(s), None) => (s.value(), None),
        (Agent::Legacy(_), Some(_)) => return Err(bad("a bare string has no members".into())),
        (Agent::Dictionary(d), Some(key)) => {
            let item = d.get(key).and_then(|m| m.as_item()).ok_or_else(|| bad(format!("no member {key}")))?;
            let value = item.bare.as_string().ok_or_else(|| bad(format!("member {key} is not a string")))?;
            let kind = match item.params.get("type") {
                None => None,
                Some(BareItem::Token(t)) => Some(t),
                Some(_) => return Err(bad(format!("member {key}: type is not a token"))),
            };
            (value.value(), kind)
        }
        // The whole dictionary covered: unambiguous only with one member.
        (Agent::Dictionary(d), None) => {
            let mut members = d.iter();
            match (members.next(), members.next()) {
                (Some((_, m)), None) => {
                    let item = m.as_item().ok_or_else(|| bad("not a string".into()))?;
                    (item.bare.as_string().ok_or_else(|| bad("not a string".into()))?.value(), None)
                }
                _ => return Err(bad("several members and none named by the signature".into())),
            }
        }
    };
    DirectoryUrl::from_member(&value, kind).map_err(|e| match e {
        AgentError::UnsupportedType(t) => Verdict::Unverified(Unverified::UnsupportedAgentType(t)),
        e => bad(e.to_string()),
    })
}
