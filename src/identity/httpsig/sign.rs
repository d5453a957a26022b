//! Signing: Web Bot Auth request signatures ([`RequestSigner`]) and a key directory's
//! response signatures ([`sign_directory_response`], [`directory_response`]).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, StatusCode};
use robotsgate_rep::sf::{self, Dictionary};

use super::base::{BaseError, Message, RequestView, signature_base};
use super::check::WEB_BOT_AUTH_TAG;
use super::directory::{DIRECTORY_TAG, DirectoryUrl, MEDIA_TYPE, content_digest, directory_json};
use super::key::SigningKey;
use super::unix_seconds;

/// The label of robotsgate's request signature, and the key of its `Signature-Agent` member
/// (the draft: the member keyed to the signature's label).
pub const LABEL: &str = "sig1";

/// Why a message could not be signed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SignError {
    /// The `Signature-Agent` URL is not an `https` URL a verifier can fetch.
    #[error("bad Signature-Agent URL: {0}")]
    BadAgent(String),
    /// The request has no authority (no absolute URI, no `Host`).
    #[error("the request has no authority to sign")]
    NoAuthority,
    /// No randomness for the nonce.
    #[error("no randomness available for the nonce")]
    NoRandomness,
    /// The signature base could not be made.
    #[error("{0}")]
    Base(#[from] BaseError),
    /// A value that cannot be a header (not expected: everything written is ASCII).
    #[error("invalid header value: {0}")]
    Header(String),
}

/// Signs requests as the draft's Web Bot Auth profile says: `Signature-Agent:
/// sig1="<directory URL>"`, and a signature labelled `sig1` covering `@authority` and
/// `"signature-agent";key="sig1"`, with `created`, `expires` (default 60 s later),
/// `keyid` (the key's thumbprint), `alg="ed25519"`, a fresh random `nonce` (32 bytes of
/// ring's `SystemRandom`, base64) and `tag="web-bot-auth"`. Any `Signature`,
/// `Signature-Input` or `Signature-Agent` the request had is replaced.
///
/// ```
/// use std::sync::Arc;
/// use std::time::SystemTime;
/// use robotsgate::identity::httpsig::{RequestSigner, SigningKey};
///
/// let key = Arc::new(SigningKey::generate()?);
/// let signer = RequestSigner::new(key, "https://bot.example")?;
/// let mut parts = http::Request::get("https://site.example/page").body(())?.into_parts().0;
/// signer.sign(&mut parts, SystemTime::now())?;
/// assert_eq!(parts.headers["signature-agent"], r#"sig1="https://bot.example""#);
/// assert!(parts.headers["signature-input"].to_str()?.starts_with(r#"sig1=("@authority" "signature-agent";key="sig1");created="#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct RequestSigner {
    key: Arc<SigningKey>,
    agent: HeaderValue,
    validity: Duration,
    rng: ring::rand::SystemRandom,
}

impl std::fmt::Debug for RequestSigner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RequestSigner")
            .field("key", &self.key)
            .field("agent", &self.agent)
            .field("validity", &self.validity)
            .finish()
    }
}

impl RequestSigner {
    /// Signs with `key`, naming `signature_agent` (an `https` URL: the origin of the key
    /// directory, or the directory's URL) as where verifiers find it.
    pub fn new(key: Arc<SigningKey>, signature_agent: &str) -> Result<RequestSigner, SignError> {
        DirectoryUrl::from_member(signature_agent, None).map_err(|e| SignError::BadAgent(e.to_string()))?;
        let mut value = format!("{LABEL}=");
        sf::write_string(&mut value, signature_agent).map_err(|e| SignError::BadAgent(e.to_string()))?;
        let agent = HeaderValue::from_str(&value).map_err(|e| SignError::BadAgent(e.to_string()))?;
        Ok(RequestSigner {
            key,
            agent,
            validity: Duration::from_secs(60),
            rng: ring::rand::SystemRandom::new(),
        })
    }

    /// How long signatures are valid (`expires - created`; default 60 s).
    pub fn validity(mut self, validity: Duration) -> RequestSigner {
        self.validity = validity;
        self
    }

    /// The signing key.
    pub fn key(&self) -> &Arc<SigningKey> {
        &self.key
    }

    /// The `Signature-Agent` field it sends (`sig1="<URL>"`).
    pub fn agent(&self) -> &HeaderValue {
        &self.agent
    }

    /// Signs the request (see the type's docs), `created` being `now`.
    pub fn sign(&self, parts: &mut http::request::Parts, now: SystemTime) -> Result<(), SignError> {
        self.sign_covering(parts, now, &[])
    }

    /// [`RequestSigner::sign`], the signature also covering the fields named in `fields`
    /// (lowercase names, e.g. `crawler-max-price` for pay per crawl), which the request
    /// must carry.
    pub fn sign_covering(
        &self,
        parts: &mut http::request::Parts,
        now: SystemTime,
        fields: &[&str],
    ) -> Result<(), SignError> {
        use base64::Engine as _;
        use ring::rand::SecureRandom as _;
        let mut nonce = [0u8; 32];
        self.rng.fill(&mut nonce).map_err(|_| SignError::NoRandomness)?;
        let nonce = base64::engine::general_purpose::STANDARD.encode(nonce);
        self.sign_fields(parts, unix_seconds(now), &nonce, fields)
    }

    /// [`RequestSigner::sign`] with a given nonce and `created` (seconds since the epoch):
    /// for reproducible signatures. A nonce must never be used twice.
    #[cfg(test)]
    pub(crate) fn sign_with_nonce(
        &self,
        parts: &mut http::request::Parts,
        created: i64,
        nonce: &str,
    ) -> Result<(), SignError> {
        self.sign_fields(parts, created, nonce, &[])
    }

    fn sign_fields(
        &self,
        parts: &mut http::request::Parts,
        created: i64,
        nonce: &str,
        fields: &[&str],
    ) -> Result<(), SignError> {
        for name in ["signature", "signature-input", "signature-agent"] {
            parts.headers.remove(name);
        }
        parts.headers.insert("signature-agent", self.agent.clone());
        let view = RequestView::of(parts);
        view.authority().ok_or(SignError::NoAuthority)?;
        let expires = created.saturating_add(self.validity.as_secs() as i64);
        let mut input = format!("{LABEL}=(\"@authority\" \"signature-agent\";key=\"{LABEL}\"");
        for field in fields {
            input.push(' ');
            sf::write_string(&mut input, field).map_err(|e| SignError::Header(e.to_string()))?;
        }
        input.push_str(");created=");
        let header = |e: sf::Error| SignError::Header(e.to_string());
        sf::write_integer(&mut input, created).map_err(header)?;
        input.push_str(";expires=");
        sf::write_integer(&mut input, expires).map_err(header)?;
        input.push_str(";keyid=");
        sf::write_string(&mut input, self.key.public().thumbprint()).map_err(header)?;
        input.push_str(";alg=\"ed25519\";nonce=");
        sf::write_string(&mut input, nonce).map_err(header)?;
        input.push_str(";tag=");
        sf::write_string(&mut input, WEB_BOT_AUTH_TAG).map_err(header)?;
        let signature = sign_member(&self.key, &input, &Message::Request(view))?;
        insert(&mut parts.headers, "signature-input", input)?;
        insert(&mut parts.headers, "signature", signature)?;
        Ok(())
    }
}

impl crate::fetch::SignFetch for RequestSigner {
    fn sign_fetch(
        &self,
        parts: &mut http::request::Parts,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.sign(parts, SystemTime::now()).map_err(Into::into)
    }
}

/// Signs the signature base of the `Signature-Input` member `member` (`label=(…);…`, as
/// written by the caller) over `message`; the `Signature` member `label=:…:`.
fn sign_member(key: &SigningKey, member: &str, message: &Message<'_>) -> Result<String, SignError> {
    let dict = Dictionary::parse(member.as_bytes()).map_err(|e| SignError::Header(e.to_string()))?;
    let (label, list) = dict
        .iter()
        .next()
        .and_then(|(l, m)| Some((l, m.as_inner_list()?)))
        .ok_or_else(|| SignError::Header(member.to_owned()))?;
    let mut base = String::with_capacity(512);
    signature_base(&mut base, &list, message, usize::MAX)?;
    let mut out = format!("{label}=");
    sf::write_byte_sequence(&mut out, &key.sign(base.as_bytes()));
    Ok(out)
}

fn insert(headers: &mut HeaderMap, name: &'static str, value: String) -> Result<(), SignError> {
    let value = HeaderValue::try_from(value).map_err(|e| SignError::Header(e.to_string()))?;
    headers.append(name, value);
    Ok(())
}

/// Adds a key directory response's signatures (the draft's appendix "Validating the Domain
/// Binding"): `Content-Digest` (sha-256 of `body`), and per key a signature labelled
/// `binding1`, `binding2`, … over `"@authority";req` (the authority `request` was sent to)
/// and `content-digest`, with `created` (`now`), `expires` (`now + validity`), `keyid` and
/// `tag="http-message-signatures-directory"`. Existing signature fields are replaced.
pub fn sign_directory_response(
    keys: &[&SigningKey],
    request: &http::request::Parts,
    headers: &mut HeaderMap,
    body: &[u8],
    now: SystemTime,
    validity: Duration,
) -> Result<(), SignError> {
    let view = RequestView::of(request);
    view.authority().ok_or(SignError::NoAuthority)?;
    for name in ["signature", "signature-input", "content-digest"] {
        headers.remove(name);
    }
    insert(headers, "content-digest", content_digest(body))?;
    let created = unix_seconds(now);
    let expires = created.saturating_add(validity.as_secs() as i64);
    let (mut inputs, mut signatures) = (Vec::new(), Vec::new());
    for (n, key) in keys.iter().enumerate() {
        let mut input = format!("binding{}=(\"@authority\";req \"content-digest\");created=", n + 1);
        let header = |e: sf::Error| SignError::Header(e.to_string());
        sf::write_integer(&mut input, created).map_err(header)?;
        input.push_str(";expires=");
        sf::write_integer(&mut input, expires).map_err(header)?;
        input.push_str(";keyid=");
        sf::write_string(&mut input, key.public().thumbprint()).map_err(header)?;
        input.push_str(";tag=");
        sf::write_string(&mut input, DIRECTORY_TAG).map_err(header)?;
        let message = Message::Response { status: StatusCode::OK, headers: &*headers, request: view };
        signatures.push(sign_member(key, &input, &message)?);
        inputs.push(input);
    }
    if !inputs.is_empty() {
        insert(headers, "signature-input", inputs.join(", "))?;
        insert(headers, "signature", signatures.join(", "))?;
    }
    Ok(())
}

/// The key directory robotsgate serves for `keys`, signed for `request`: `200`, `Content-Type:
/// application/http-message-signatures-directory+json`, `Cache-Control: no-store`, the
/// JWKS of the keys' public parts, and per key a response signature (`Content-Digest`, and a
/// `binding1`, `binding2`, … signature over `"@authority";req` and `content-digest`,
/// `tag="http-message-signatures-directory"`).
///
/// ```
/// use std::time::{Duration, SystemTime};
/// use robotsgate::identity::httpsig::{SigningKey, directory_response};
///
/// let key = SigningKey::generate()?;
/// let request = http::Request::get("https://bot.example/.well-known/http-message-signatures-directory")
///     .body(())?
///     .into_parts()
///     .0;
/// let response = directory_response(&[&key], &request, SystemTime::now(), Duration::from_secs(300))?;
/// assert_eq!(response.headers()["cache-control"], "no-store");
/// assert!(response.headers()["signature-input"].to_str()?.starts_with(r#"binding1=("@authority";req "content-digest")"#));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn directory_response(
    keys: &[&SigningKey],
    request: &http::request::Parts,
    now: SystemTime,
    validity: Duration,
) -> Result<http::Response<Bytes>, SignError> {
    let body = Bytes::from(directory_json(keys.iter().map(|k| k.public())));
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static(MEDIA_TYPE));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    sign_directory_response(keys, request, &mut headers, &body, now, validity)?;
    let mut response = http::Response::new(body);
    *response.headers_mut() = headers;
    Ok(response)
}
