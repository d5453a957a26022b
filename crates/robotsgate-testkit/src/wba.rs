//! Web Bot Auth signatures as an origin received them, checked by Cloudflare's
//! `web-bot-auth` crate (code robotsgate did not write) against a public key.

use robotsgate::identity::httpsig::{PublicKey, directory_json};
use web_bot_auth::components::{CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters};
use web_bot_auth::keyring::{JSONWebKeySet, KeyRing};
use web_bot_auth::message_signatures::SignedMessage;

use crate::origin::Seen;

/// What a verified request signature said.
#[derive(Debug, Clone)]
pub struct SignatureFacts {
    /// `created`.
    pub created: i64,
    /// `expires`.
    pub expires: i64,
    /// `nonce`.
    pub nonce: String,
    /// `keyid`.
    pub keyid: String,
}

/// A key ring holding the public keys, imported from the JWKS robotsgate publishes.
pub fn keyring(keys: &[&PublicKey]) -> KeyRing {
    let jwks: JSONWebKeySet = serde_json::from_str(&directory_json(keys.iter().copied())).unwrap();
    let mut ring = KeyRing::default();
    assert!(ring.import_jwks(jwks).iter().all(Option::is_none), "every key imported");
    ring
}

/// The authority the request was sent to: its `Host`, else (HTTP/2) the target's.
pub fn authority_of(seen: &Seen) -> String {
    if let Some(host) = seen.headers.get("host") {
        return host.to_str().unwrap().to_ascii_lowercase();
    }
    let uri: http::Uri = seen.target.parse().unwrap();
    uri.authority().expect("an authority").as_str().to_ascii_lowercase()
}

/// Checks with `web-bot-auth` that `seen` carries exactly one Web Bot Auth signature,
/// made by one of `keys`, for the authority it was sent to, naming `agent` in
/// `Signature-Agent` (dictionary form, member `sig1`); panics otherwise.
pub fn verify_seen(seen: &Seen, keys: &[&PublicKey], agent: &str) -> SignatureFacts {
    for name in ["signature", "signature-input", "signature-agent"] {
        assert_eq!(seen.headers.get_all(name).iter().count(), 1, "one {name} field on {}", seen.target);
    }
    assert_eq!(seen.headers["signature-agent"], format!("sig1=\"{agent}\"").as_str());
    let message = Received(seen, authority_of(seen));
    let parsed = web_bot_auth::WebBotAuthVerifier::parse(&message)
        .unwrap_or_else(|e| panic!("web-bot-auth cannot parse the signature on {}: {e:?}", seen.target));
    assert_eq!(
        parsed.get_signature_agents(),
        &vec![web_bot_auth::SignatureAgentLink::External(agent.into())]
    );
    let details = parsed.get_parsed_label().base.parameters.details.clone();
    assert_eq!(details.tag.as_deref(), Some("web-bot-auth"));
    assert_eq!(details.possibly_insecure(|_| false).is_expired, Some(false), "not expired");
    parsed
        .verify(&keyring(keys), None)
        .unwrap_or_else(|e| panic!("web-bot-auth refuses the signature on {}: {e:?}", seen.target));
    SignatureFacts {
        created: details.created.expect("created"),
        expires: details.expires.expect("expires"),
        nonce: details.nonce.expect("nonce"),
        keyid: details.keyid.expect("keyid"),
    }
}

/// `web-bot-auth`'s view of a received request: its header fields (a `key` parameter picks
/// a dictionary member) and `@authority`.
struct Received<'a>(&'a Seen, String);

impl SignedMessage for Received<'_> {
    fn lookup_component(&self, name: &CoveredComponent) -> Vec<String> {
        match name {
            CoveredComponent::HTTP(HTTPField { name, parameters }) => {
                let values = self.0.headers.get_all(name.as_str()).iter().filter_map(|v| v.to_str().ok());
                match parameters.0.as_slice() {
                    [] => values.map(str::to_owned).collect(),
                    [HTTPFieldParameters::Key(k)] => {
                        values.filter_map(|v| v.strip_prefix(&format!("{k}=")).map(str::to_owned)).collect()
                    }
                    _ => vec![],
                }
            }
            CoveredComponent::Derived(DerivedComponent::Authority { .. }) => vec![self.1.clone()],
            _ => vec![],
        }
    }
}

/// Checks with `web-bot-auth` a key directory response robotsgate served for a request to
/// `authority`: `Content-Digest` is the body's, and each of `keys` has a response
/// signature (`tag="http-message-signatures-directory"`, over `"@authority";req` and
/// `content-digest`) that verifies; panics otherwise. Returns the labels checked.
pub fn verify_directory(
    headers: &http::HeaderMap,
    body: &[u8],
    authority: &str,
    keys: &[&PublicKey],
) -> usize {
    use base64::Engine as _;
    use sha2::Digest as _;
    use web_bot_auth::message_signatures::MessageVerifier;
    let digest = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(body));
    assert_eq!(headers["content-digest"], format!("sha-256=:{digest}:").as_str());
    let ring = keyring(keys);
    let message = Directory(headers, authority.to_owned());
    for n in 1..=keys.len() {
        let label = format!("binding{n}");
        let parsed = MessageVerifier::parse(&message, |(l, _)| l.as_str() == label)
            .unwrap_or_else(|e| panic!("no response signature {label}: {e:?}"));
        let details = &parsed.parsed.base.parameters.details;
        assert_eq!(details.tag.as_deref(), Some("http-message-signatures-directory"));
        parsed.verify(&ring, None).unwrap_or_else(|e| panic!("{label} does not verify: {e:?}"));
    }
    keys.len()
}

/// `web-bot-auth`'s view of a directory response: its fields and the request's authority.
struct Directory<'a>(&'a http::HeaderMap, String);

impl SignedMessage for Directory<'_> {
    fn lookup_component(&self, name: &CoveredComponent) -> Vec<String> {
        match name {
            CoveredComponent::HTTP(HTTPField { name, .. }) => self
                .0
                .get_all(name.as_str())
                .iter()
                .filter_map(|v| v.to_str().ok())
                .map(str::to_owned)
                .collect(),
            CoveredComponent::Derived(DerivedComponent::Authority { req: true }) => vec![self.1.clone()],
            _ => vec![],
        }
    }
}

/// The three fields of a request signed by Cloudflare's `web-bot-auth` crate (code
/// robotsgate did not write), as a Web Bot Auth bot sends them.
#[derive(Debug, Clone)]
pub struct WbaFields {
    /// `Signature-Agent` (dictionary form, member `sig1`).
    pub signature_agent: String,
    /// `Signature-Input`.
    pub signature_input: String,
    /// `Signature`.
    pub signature: String,
}

impl WbaFields {
    /// The fields as `(name, value)` pairs.
    pub fn pairs(&self) -> [(&'static str, &str); 3] {
        [
            ("signature-agent", &self.signature_agent),
            ("signature-input", &self.signature_input),
            ("signature", &self.signature),
        ]
    }
}

/// Signs, with `web-bot-auth`, a request to `authority` by the Ed25519 key of `seed`
/// (whose thumbprint is `keyid`) for the agent `agent`, with `nonce`, valid for a minute:
/// `@authority` and the `Signature-Agent` member `sig1` covered, `tag="web-bot-auth"`.
pub fn wba_sign(seed: &[u8; 32], keyid: &str, agent: &str, authority: &str, nonce: &str) -> WbaFields {
    use web_bot_auth::keyring::Algorithm;
    use web_bot_auth::message_signatures::MessageSigner;
    let quoted = format!("\"{agent}\"");
    let mut msg = Unsigned {
        authority: authority.to_owned(),
        agent_value: quoted.clone(),
        input: String::new(),
        signature: String::new(),
    };
    let signer = MessageSigner { keyid: keyid.into(), nonce: nonce.into(), tag: "web-bot-auth".into() };
    signer
        .generate_signature_headers_content(
            &mut msg,
            std::time::Duration::from_secs(60),
            Algorithm::Ed25519,
            seed,
        )
        .expect("web-bot-auth signs");
    WbaFields {
        signature_agent: format!("sig1={quoted}"),
        signature_input: msg.input,
        signature: msg.signature,
    }
}

/// `web-bot-auth`'s view of a request to sign: `@authority` and the agent member.
struct Unsigned {
    authority: String,
    agent_value: String,
    input: String,
    signature: String,
}

impl web_bot_auth::message_signatures::UnsignedMessage for Unsigned {
    fn fetch_components_to_cover(&self) -> indexmap::IndexMap<CoveredComponent, String> {
        use web_bot_auth::components::HTTPFieldParametersSet;
        indexmap::IndexMap::from_iter([
            (CoveredComponent::Derived(DerivedComponent::Authority { req: false }), self.authority.clone()),
            (
                CoveredComponent::HTTP(HTTPField {
                    name: "signature-agent".into(),
                    parameters: HTTPFieldParametersSet(vec![HTTPFieldParameters::Key("sig1".into())]),
                }),
                self.agent_value.clone(),
            ),
        ])
    }

    fn register_header_contents(&mut self, signature_input: String, signature_header: String) {
        self.input = format!("sig1={signature_input}");
        self.signature = format!("sig1={signature_header}");
    }
}
