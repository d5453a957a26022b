//! Reading the signature fields: a field's lines joined (bounded), the signature
//! parameters of a `Signature-Input` member (typed as RFC 9421 §2.3 says), and a
//! `Signature` member's bytes.

use std::borrow::Cow;

use http::HeaderMap;
use robotsgate_rep::sf::{BareItem, Dictionary, InnerList};

use super::verdict::Failure;

/// All lines of `name` joined by `", "` (RFC 9651 §4.2: one value), at most `max` bytes;
/// `None` when absent.
pub(crate) fn field<'h>(
    headers: &'h HeaderMap,
    name: &'static str,
    max: usize,
) -> Result<Option<Cow<'h, [u8]>>, Failure> {
    let mut lines = headers.get_all(name).iter();
    let Some(first) = lines.next() else { return Ok(None) };
    let mut value = Cow::Borrowed(first.as_bytes());
    for line in lines {
        let v = value.to_mut();
        v.extend_from_slice(b", ");
        v.extend_from_slice(line.as_bytes());
        if v.len() > max {
            break;
        }
    }
    if value.len() > max {
        return Err(Failure::TooLarge(name));
    }
    Ok(Some(value))
}

/// The signature parameters of one `Signature-Input` member.
#[derive(Debug, Default)]
pub(crate) struct SigParams<'a> {
    pub created: Option<i64>,
    pub expires: Option<i64>,
    pub keyid: Option<Cow<'a, str>>,
    pub nonce: Option<Cow<'a, str>>,
    pub alg: Option<Cow<'a, str>>,
    pub tag: Option<Cow<'a, str>>,
}

/// The parameters RFC 9421 §2.3 defines, of the right types (others are left alone: they
/// are in the `@signature-params` line all the same).
pub(crate) fn sig_params<'a>(list: &InnerList<'a>) -> Result<SigParams<'a>, Failure> {
    let mut p = SigParams::default();
    for (key, value) in list.params().iter() {
        let int =
            |what: &str| value.as_integer().ok_or_else(|| Failure::Malformed(format!("{what} parameter")));
        let string = |what: &str| {
            value
                .as_string()
                .map(|s| s.value())
                .ok_or_else(|| Failure::Malformed(format!("{what} parameter")))
        };
        match key {
            "created" => p.created = Some(int(key)?),
            "expires" => p.expires = Some(int(key)?),
            "keyid" => p.keyid = Some(string(key)?),
            "nonce" => p.nonce = Some(string(key)?),
            "alg" => p.alg = Some(string(key)?),
            "tag" => p.tag = Some(string(key)?),
            _ => {}
        }
    }
    Ok(p)
}

/// Whether a `Signature-Input` member has `tag` equal to `tag` (without allocating).
pub(crate) fn has_tag(list: &InnerList<'_>, tag: &str) -> bool {
    list.params().get("tag").and_then(|t| t.as_string()).is_some_and(|t| t.is(tag))
}

/// The bytes of the `Signature` member `label` (a Byte Sequence).
pub(crate) fn signature_bytes(signatures: Option<&Dictionary<'_>>, label: &str) -> Result<Vec<u8>, Failure> {
    match signatures.and_then(|d| d.get(label)).and_then(|m| m.as_item()).map(|i| i.bare) {
        Some(BareItem::ByteSequence(b)) => Ok(b.decode()),
        Some(_) => Err(Failure::Malformed(format!("Signature member {label}"))),
        None => Err(Failure::NoSignatureValue(label.to_owned())),
    }
}

/// Whether `list` covers the bare component `name` (a String without parameters).
pub(crate) fn covers(list: &InnerList<'_>, name: &str) -> bool {
    list.iter().any(|i| i.params.is_empty() && i.bare.as_string().is_some_and(|s| s.is(name)))
}
