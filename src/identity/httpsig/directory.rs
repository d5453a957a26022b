//! Key directories (draft-ietf-webbotauth-httpsig-protocol, "Key Distribution and
//! Discovery"): where a `Signature-Agent` member points ([`DirectoryUrl`]), the JWKS
//! document ([`Directory`]: read bounded, keys of other algorithms set aside with a
//! reason; written by [`directory_json`]), `Content-Digest` (RFC 9530), the directory's own
//! response signatures ([`check_response_signatures`]), and the Signature Agent Card's
//! product token ([`SignatureAgentCard`], draft-meunier-webbotauth-registry).

use std::sync::Arc;

use http::HeaderMap;
use robotsgate_rep::sf::{self, BareItem, Dictionary};

use super::base::{Message, RequestView, signature_base};
use super::config::{ResponseSignatures, VerifyConfig};
use super::fields::{covers, field, has_tag, sig_params, signature_bytes};
use super::key::{PublicKey, is_test_key};

/// The well-known path of a key directory (the draft's IANA registration).
pub const WELL_KNOWN_PATH: &str = "/.well-known/http-message-signatures-directory";

/// The media type of a key directory.
pub const MEDIA_TYPE: &str = "application/http-message-signatures-directory+json";

/// The `tag` of a directory's response signatures.
pub const DIRECTORY_TAG: &str = "http-message-signatures-directory";

/// Why a `Signature-Agent` member is not a usable directory URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentError {
    /// Not an absolute URL.
    #[error("not a URL: {0}")]
    Invalid(String),
    /// Not `https` (the draft: the scheme MUST be https).
    #[error("not https: {0}")]
    NotHttps(String),
    /// A `type` this verifier does not resolve (`cimd`, or unknown).
    #[error("type {0} not supported")]
    UnsupportedType(String),
}

/// Where a `Signature-Agent` member's keys are fetched, and the identity they stand for.
///
/// - `type` absent or `directory`: an origin (`https://bot.example`, path empty or `/`)
///   means its well-known directory (draft-ietf-webbotauth-httpsig-protocol-01); any other
///   `https` URL is fetched as it is (earlier drafts, and agents that send the directory's
///   URL in full).
/// - `type=jwks_uri`: the URL as it is.
///
/// The URL is fetched without its fragment, and is the identity
/// ([`DirectoryUrl::identifier`]) as fetched, query and all: a host may serve other keys
/// for another query (a tenant's), so an operator's `https://bot.example/keys?tenant=a`
/// is not `…?tenant=b`, nor is `https://bot.example/keys` followed by any query.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct DirectoryUrl {
    url: Arc<str>,
    authority: Arc<str>,
    well_known: bool,
}

impl DirectoryUrl {
    /// The directory a member value (a URL) and its `type` parameter point to.
    pub fn from_member(value: &str, kind: Option<&str>) -> Result<DirectoryUrl, AgentError> {
        match kind {
            None | Some("directory" | "jwks_uri") => {}
            Some(other) => return Err(AgentError::UnsupportedType(other.to_owned())),
        }
        let mut url = url::Url::parse(value).map_err(|e| AgentError::Invalid(format!("{value}: {e}")))?;
        if url.scheme() != "https" {
            return Err(AgentError::NotHttps(value.to_owned()));
        }
        if !url.username().is_empty() || url.password().is_some() || url.host().is_none() {
            return Err(AgentError::Invalid(format!("{value}: userinfo or no host")));
        }
        url.set_fragment(None);
        if kind != Some("jwks_uri") && url.path() == "/" && url.query().is_none() {
            url.set_path(WELL_KNOWN_PATH);
        }
        let well_known = url.path() == WELL_KNOWN_PATH;
        let host = url.host_str().unwrap_or_default();
        let authority = match url.port() {
            Some(p) => format!("{host}:{p}"),
            None => host.to_owned(),
        };
        Ok(DirectoryUrl { url: url.as_str().into(), authority: authority.into(), well_known })
    }

    /// The URL fetched.
    pub fn as_str(&self) -> &str {
        &self.url
    }

    /// The identity: the URL fetched (without its fragment).
    pub fn identifier(&self) -> &Arc<str> {
        &self.url
    }

    /// `host[:port]` (port only when not 443): the `@authority` of the fetch.
    pub fn authority(&self) -> &str {
        &self.authority
    }

    /// Whether it is an origin's well-known directory (then only the directory media type
    /// is accepted).
    pub(crate) fn is_well_known(&self) -> bool {
        self.well_known
    }
}

/// Why a directory document was refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// Longer than allowed.
    #[error("directory larger than {0} bytes")]
    TooLarge(usize),
    /// More keys than allowed.
    #[error("directory with {0} keys, more than allowed")]
    TooManyKeys(usize),
    /// Not a JSON object with a `keys` array.
    #[error("not a key directory: {0}")]
    Malformed(String),
}

/// A key a directory publishes, usable for Web Bot Auth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirectoryKey {
    /// The key.
    pub key: PublicKey,
    /// JWK `nbf`: not to be used before (seconds since the epoch).
    pub not_before: Option<i64>,
    /// JWK `exp`: not to be used after.
    pub expires: Option<i64>,
    /// The directory's response carried a valid response signature by this key.
    pub proven: bool,
}

impl DirectoryKey {
    /// Whether `nbf`/`exp` allow its use at `now`.
    pub(crate) fn valid_at(&self, now: i64) -> bool {
        self.not_before.is_none_or(|n| now >= n) && self.expires.is_none_or(|e| now < e)
    }
}

/// A key a directory lists that is not used, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredKey {
    /// Its place in `keys` (from 0), when it was set aside while reading the document.
    pub index: Option<usize>,
    /// Its `kid`, if it has one.
    pub kid: Option<String>,
    /// Why it is not used.
    pub reason: String,
}

/// A parsed key directory: the Ed25519 keys it publishes, the keys set aside, and the
/// robots.txt product token it names, if it is a Signature Agent Card that names one.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Directory {
    /// The usable keys, in document order, one per thumbprint.
    pub keys: Vec<DirectoryKey>,
    /// The keys set aside (other algorithms, malformed, test keys, duplicates).
    pub ignored: Vec<IgnoredKey>,
    /// `web_bot_auth.rfc9309-product-token` of a Signature Agent Card
    /// (draft-meunier-webbotauth-registry §3): the robots.txt product token the agent's
    /// requests are judged as when their `User-Agent` names none.
    pub product_token: Option<Arc<str>>,
}

impl Directory {
    /// Reads a JWKS (`{"keys": [JWK, …]}`) or a Signature Agent Card carrying its keys
    /// inline (`{"jwks": {"keys": […]}, "web_bot_auth": {"rfc9309-product-token": …}}`):
    /// at most `max_bytes` and `max_keys` keys (or the whole document is refused); Ed25519
    /// keys are kept (see [`PublicKey::from_jwk`]), others set aside with the reason, test
    /// keys too unless `allow_test_keys`. Refused: a card with both `jwks` and `jwks_uri`,
    /// one with `jwks_uri` alone (keys at a second URL are not fetched), and a product
    /// token that is not one (RFC 9309: letters, `_` and `-`).
    pub fn parse(
        body: &[u8],
        max_bytes: usize,
        max_keys: usize,
        allow_test_keys: bool,
    ) -> Result<Directory, DocumentError> {
        if body.len() > max_bytes {
            return Err(DocumentError::TooLarge(max_bytes));
        }
        let doc: serde_json::Value =
            serde_json::from_slice(body).map_err(|e| DocumentError::Malformed(e.to_string()))?;
        let (inline, uri) = (doc.get("jwks"), doc.get("jwks_uri"));
        if inline.is_some() && uri.is_some() {
            return Err(DocumentError::Malformed("a card with both jwks and jwks_uri".into()));
        }
        let keys = match (doc.get("keys"), inline) {
            (Some(keys), _) => keys,
            (None, Some(jwks)) => jwks.get("keys").unwrap_or(&serde_json::Value::Null),
            (None, None) if uri.is_some() => {
                return Err(DocumentError::Malformed(
                    "a card whose keys are at jwks_uri (not followed)".into(),
                ));
            }
            (None, None) => &serde_json::Value::Null,
        };
        let keys = keys.as_array().ok_or_else(|| DocumentError::Malformed("no \"keys\" array".into()))?;
        if keys.len() > max_keys {
            return Err(DocumentError::TooManyKeys(keys.len()));
        }
        let product_token = match doc.get("web_bot_auth").and_then(|w| w.get("rfc9309-product-token")) {
            None => None,
            Some(serde_json::Value::String(t))
                if !t.is_empty() && t.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-') =>
            {
                Some(Arc::from(t.as_str()))
            }
            Some(other) => {
                let mut text = format!("product token {other}");
                crate::identity::cut(&mut text, 120);
                return Err(DocumentError::Malformed(text));
            }
        };
        let mut dir = Directory { product_token, ..Directory::default() };
        for (index, jwk) in keys.iter().enumerate() {
            let kid = jwk.get("kid").and_then(|k| k.as_str()).map(str::to_owned);
            let mut ignore = |reason: String| {
                dir.ignored.push(IgnoredKey { index: Some(index), kid: kid.clone(), reason })
            };
            let key = match PublicKey::from_jwk(jwk) {
                Ok(k) => k,
                Err(e) => {
                    ignore(e.to_string());
                    continue;
                }
            };
            if !allow_test_keys && is_test_key(key.thumbprint()) {
                ignore("a published test key".into());
                continue;
            }
            if dir.keys.iter().any(|k| k.key == key) {
                ignore("listed twice".into());
                continue;
            }
            let time = |name: &str| jwk.get(name).and_then(|v| v.as_i64());
            dir.keys.push(DirectoryKey { key, not_before: time("nbf"), expires: time("exp"), proven: false });
        }
        Ok(dir)
    }

    /// The key with this thumbprint.
    pub fn get(&self, keyid: &str) -> Option<&DirectoryKey> {
        self.keys.iter().find(|k| k.key.thumbprint() == keyid)
    }
}

/// A directory document publishing `keys` (`{"keys":[…]}`, each as [`PublicKey::to_jwk`]).
pub fn directory_json<'a>(keys: impl IntoIterator<Item = &'a PublicKey>) -> String {
    let keys: Vec<serde_json::Value> = keys.into_iter().map(PublicKey::to_jwk).collect();
    serde_json::json!({ "keys": keys }).to_string()
}

/// The `Content-Digest` value (RFC 9530) of `body`: `sha-256=:…:`.
pub fn content_digest(body: &[u8]) -> String {
    let mut out = String::from("sha-256=");
    sf::write_byte_sequence(&mut out, ring::digest::digest(&ring::digest::SHA256, body).as_ref());
    out
}

/// Whether `Content-Digest` holds a digest of `body` and every `sha-256`/`sha-512` digest
/// it holds is right (RFC 9530 §2; other algorithms are ignored).
pub fn content_digest_matches(headers: &HeaderMap, body: &[u8], max_field_bytes: usize) -> bool {
    let Ok(Some(value)) = field(headers, "content-digest", max_field_bytes) else { return false };
    let Ok(dict) = Dictionary::parse(&value) else { return false };
    let mut checked = false;
    for (alg, member) in dict.iter() {
        let algorithm = match alg {
            "sha-256" => &ring::digest::SHA256,
            "sha-512" => &ring::digest::SHA512,
            _ => continue,
        };
        let Some(BareItem::ByteSequence(b)) = member.as_item().map(|i| i.bare) else { return false };
        if b.decode() != ring::digest::digest(algorithm, body).as_ref() {
            return false;
        }
        checked = true;
    }
    checked
}

/// A directory response as fetched: what its response signatures are checked against.
#[derive(Debug, Clone, Copy)]
pub struct DirectoryResponse<'a> {
    /// The status code.
    pub status: http::StatusCode,
    /// The response's fields.
    pub headers: &'a HeaderMap,
    /// The body.
    pub body: &'a [u8],
}

/// What the directory's response signatures said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseProof {
    /// Keys with a valid response signature (marked [`DirectoryKey::proven`]).
    pub valid: Vec<String>,
    /// Response signatures that did not hold, with why (keyid, or the label when it had
    /// none).
    pub invalid: Vec<(String, String)>,
}

/// Checks a directory response's own signatures (`tag="http-message-signatures-directory"`,
/// the draft's appendix "Validating the Domain Binding"): each must cover `"@authority";req`
/// and `content-digest`, have `created` (not in the future) and `expires` (not past), be by
/// a key of `dir`, and verify, with a `Content-Digest` that matches `body`. Keys with a
/// valid one are marked [`DirectoryKey::proven`]; then `policy` decides which keys stay.
pub fn check_response_signatures(
    dir: &mut Directory,
    request: RequestView<'_>,
    response: DirectoryResponse<'_>,
    now: i64,
    config: &VerifyConfig,
    policy: ResponseSignatures,
) -> ResponseProof {
    let mut proof = ResponseProof::default();
    if policy == ResponseSignatures::Ignore {
        return proof;
    }
    let DirectoryResponse { status, headers, body } = response;
    let max = config.max_field_bytes;
    let inputs = field(headers, "signature-input", max).ok().flatten();
    let sigs = field(headers, "signature", max).ok().flatten();
    let inputs = inputs.as_deref().and_then(|v| Dictionary::parse(v).ok());
    let sigs = sigs.as_deref().and_then(|v| Dictionary::parse(v).ok());
    let message = Message::Response { status, headers, request };
    let skew = config.clock_skew.as_secs() as i64;
    let mut digest_ok = None;
    let limit = config.directory.max_keys + config.max_signatures;
    for (label, member) in inputs.iter().flat_map(|d| d.iter()).take(limit) {
        let Some(list) = member.as_inner_list() else { continue };
        if !has_tag(&list, DIRECTORY_TAG) {
            continue;
        }
        let verdict = (|| -> Result<String, (String, String)> {
            let fail = |why: &str| (label.to_owned(), why.to_owned());
            let p = sig_params(&list).map_err(|e| fail(&e.to_string()))?;
            let keyid = p.keyid.ok_or_else(|| fail("no keyid"))?.into_owned();
            let fail = |why: &str| (keyid.clone(), why.to_owned());
            let authority_req = list.iter().any(|i| {
                i.bare.as_string().is_some_and(|s| s.is("@authority"))
                    && i.params.get("req") == Some(BareItem::Boolean(true))
                    && i.params.iter().count() == 1
            });
            if !authority_req || !covers(&list, "content-digest") {
                return Err(fail("does not cover \"@authority\";req and content-digest"));
            }
            let (Some(created), Some(expires)) = (p.created, p.expires) else {
                return Err(fail("no created or expires"));
            };
            if created > now + skew {
                return Err(fail("created in the future"));
            }
            if expires + skew < now {
                return Err(fail("expired"));
            }
            let key = dir.get(&keyid).ok_or_else(|| fail("not a key of the directory"))?;
            if !*digest_ok.get_or_insert_with(|| content_digest_matches(headers, body, max)) {
                return Err(fail("Content-Digest does not match the body"));
            }
            let signature = signature_bytes(sigs.as_ref(), label).map_err(|e| fail(&e.to_string()))?;
            let mut base = String::new();
            signature_base(&mut base, &list, &message, config.max_components)
                .map_err(|e| fail(&e.to_string()))?;
            if !key.key.verify(base.as_bytes(), &signature) {
                return Err(fail("signature does not verify"));
            }
            Ok(keyid)
        })();
        match verdict {
            Ok(keyid) => {
                if let Some(k) = dir.keys.iter_mut().find(|k| k.key.thumbprint() == keyid) {
                    k.proven = true;
                }
                proof.valid.push(keyid);
            }
            Err(bad) => proof.invalid.push(bad),
        }
    }
    let invalid: Vec<String> = proof.invalid.iter().map(|(k, _)| k.clone()).collect();
    dir.keys.retain(|k| {
        let keep = match policy {
            ResponseSignatures::Require => k.proven,
            _ => k.proven || !invalid.iter().any(|i| i == k.key.thumbprint()),
        };
        if !keep {
            let reason = if policy == ResponseSignatures::Require
                && !invalid.contains(&k.key.thumbprint().to_owned())
            {
                "no response signature"
            } else {
                "its response signature does not verify"
            };
            dir.ignored.push(IgnoredKey {
                index: None,
                kid: Some(k.key.thumbprint().to_owned()),
                reason: reason.into(),
            });
        }
        keep
    });
    proof
}
