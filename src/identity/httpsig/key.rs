//! Ed25519 keys: signing keys, public keys as JWKs (RFC 8037, OKP/Ed25519) and their
//! RFC 7638 SHA-256 thumbprints (the `keyid` of Web Bot Auth), and the deny-list of the
//! RFC 9421 test keys.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64URL;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair as _, UnparsedPublicKey};

/// The thumbprints (`keyid`) of keys published as test keys, refused by the verifier unless
/// [`VerifyConfig::allow_test_keys`](super::VerifyConfig::allow_test_keys) is set (the
/// draft's "Test and Demonstration Keys": verifiers SHOULD reject known test keys):
///
/// - `test-key-ed25519`, RFC 9421 Appendix B.1.4, which the webbotauth drafts, their test
///   vectors and Cloudflare's `web-bot-auth` examples reuse;
/// - the RSA-PSS key of the webbotauth drafts' examples (`test-key-rsa-pss`, RFC 9421
///   B.1.2); RSA is not accepted anyway, listed so that the list is the whole list.
pub const TEST_KEY_THUMBPRINTS: &[&str] =
    &["poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U", "oD0HwocPBSfpNy5W3bpJeyFGY_IQ_YpqxSjQ3Yd-CLA"];

/// Whether `keyid` is one of the [`TEST_KEY_THUMBPRINTS`].
pub fn is_test_key(keyid: &str) -> bool {
    TEST_KEY_THUMBPRINTS.contains(&keyid)
}

/// Why a key could not be read or made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    /// The JWK is not an Ed25519 key (`kty`, `crv`), or not a key for signatures.
    #[error("not an Ed25519 signing key: {0}")]
    Unsupported(String),
    /// The key material is not what RFC 8037 says (base64url of 32 octets).
    #[error("invalid key: {0}")]
    Invalid(String),
    /// The JWK's `kid` is not its RFC 7638 thumbprint (the draft requires it to be).
    #[error("kid {kid:?} is not the key's thumbprint {thumbprint}")]
    KidMismatch {
        /// The `kid` given.
        kid: String,
        /// The thumbprint of the key.
        thumbprint: String,
    },
    /// The system has no randomness for a new key.
    #[error("no randomness available")]
    NoRandomness,
}

/// An Ed25519 public key and its RFC 7638 thumbprint.
#[derive(Clone, PartialEq, Eq, Hash)]
pub struct PublicKey {
    bytes: [u8; 32],
    x: String,
    thumbprint: String,
}

impl fmt::Debug for PublicKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("PublicKey").field(&self.thumbprint).finish()
    }
}

impl PublicKey {
    /// The key with these 32 octets.
    pub fn from_bytes(bytes: [u8; 32]) -> PublicKey {
        let x = B64URL.encode(bytes);
        let thumbprint = thumbprint_okp("Ed25519", &x);
        PublicKey { bytes, x, thumbprint }
    }

    /// Reads an RFC 8037 public JWK: `kty` `OKP`, `crv` `Ed25519`, `x`; a `kid`, when
    /// present, must be the thumbprint; `use`, when present, must be `sig`; `alg`, when
    /// present, `EdDSA` or `Ed25519`. A private part (`d`) is ignored.
    pub fn from_jwk(jwk: &serde_json::Value) -> Result<PublicKey, KeyError> {
        let field = |name: &str| jwk.get(name).and_then(|v| v.as_str());
        if !jwk.is_object() {
            return Err(KeyError::Invalid("a JWK is a JSON object".into()));
        }
        match (field("kty"), field("crv")) {
            (Some("OKP"), Some("Ed25519")) => {}
            (kty, crv) => {
                return Err(KeyError::Unsupported(format!(
                    "kty {:?}, crv {:?}",
                    kty.unwrap_or("none"),
                    crv.unwrap_or("none")
                )));
            }
        }
        if let Some(u) = jwk.get("use")
            && u.as_str() != Some("sig")
        {
            return Err(KeyError::Unsupported(format!("use {u}")));
        }
        if let Some(alg) = jwk.get("alg")
            && !matches!(alg.as_str(), Some("EdDSA" | "Ed25519"))
        {
            return Err(KeyError::Unsupported(format!("alg {alg}")));
        }
        let x = field("x").ok_or_else(|| KeyError::Invalid("no x".into()))?;
        let key = PublicKey::from_bytes(decode_32(x, "x")?);
        // RFC 7638 hashes the members as written: only the canonical spelling of `x` has
        // the thumbprint the signer computed.
        if key.x != x {
            return Err(KeyError::Invalid("x is not canonical base64url (no padding)".into()));
        }
        if let Some(kid) = jwk.get("kid")
            && kid.as_str() != Some(key.thumbprint())
        {
            return Err(KeyError::KidMismatch { kid: kid.to_string(), thumbprint: key.thumbprint.clone() });
        }
        Ok(key)
    }

    /// The 32 octets.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.bytes
    }

    /// The RFC 7638 SHA-256 thumbprint, base64url: the `keyid` of its signatures.
    pub fn thumbprint(&self) -> &str {
        &self.thumbprint
    }

    /// The public JWK: `{"kty":"OKP","crv":"Ed25519","kid":<thumbprint>,"x":…,"use":"sig"}`.
    pub fn to_jwk(&self) -> serde_json::Value {
        serde_json::json!({
            "kty": "OKP",
            "crv": "Ed25519",
            "kid": self.thumbprint,
            "x": self.x,
            "use": "sig",
        })
    }

    /// Whether `signature` is this key's Ed25519 signature of `message`.
    pub fn verify(&self, message: &[u8], signature: &[u8]) -> bool {
        UnparsedPublicKey::new(&ED25519, &self.bytes).verify(message, signature).is_ok()
    }
}

/// An Ed25519 signing key (its seed is kept for export; `Debug` shows the thumbprint only).
pub struct SigningKey {
    pair: Ed25519KeyPair,
    seed: [u8; 32],
    public: PublicKey,
}

impl fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SigningKey").field(&self.public.thumbprint).finish()
    }
}

/// The PKCS#8 v1 prefix of an Ed25519 private key (RFC 8410 §7): the seed follows.
const PKCS8_ED25519_PREFIX: [u8; 16] =
    [0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20];

impl SigningKey {
    /// A new random key (ring's `SystemRandom`).
    pub fn generate() -> Result<SigningKey, KeyError> {
        use ring::rand::SecureRandom as _;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new().fill(&mut seed).map_err(|_| KeyError::NoRandomness)?;
        SigningKey::from_seed(&seed)
    }

    /// The key of this 32-octet seed (RFC 8032's private key).
    pub fn from_seed(seed: &[u8; 32]) -> Result<SigningKey, KeyError> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| KeyError::Invalid("not an Ed25519 seed".into()))?;
        let mut public = [0u8; 32];
        public.copy_from_slice(pair.public_key().as_ref());
        Ok(SigningKey { pair, seed: *seed, public: PublicKey::from_bytes(public) })
    }

    /// Reads an RFC 8037 private JWK (`kty` `OKP`, `crv` `Ed25519`, `d`, and `x`, which
    /// must match `d`).
    pub fn from_jwk(jwk: &serde_json::Value) -> Result<SigningKey, KeyError> {
        let public = PublicKey::from_jwk(jwk)?;
        let d = jwk.get("d").and_then(|v| v.as_str()).ok_or_else(|| KeyError::Invalid("no d".into()))?;
        let key = SigningKey::from_seed(&decode_32(d, "d")?)?;
        if key.public != public {
            return Err(KeyError::Invalid("x is not the public key of d".into()));
        }
        Ok(key)
    }

    /// Reads an unencrypted PKCS#8 v1 Ed25519 private key (DER; RFC 8410 §7, the form of
    /// `openssl genpkey -algorithm ed25519` and of RFC 9421's test key).
    pub fn from_pkcs8_der(der: &[u8]) -> Result<SigningKey, KeyError> {
        match der.strip_prefix(&PKCS8_ED25519_PREFIX[..]).map(<[u8; 32]>::try_from) {
            Some(Ok(seed)) => SigningKey::from_seed(&seed),
            _ => Err(KeyError::Invalid("not a PKCS#8 v1 Ed25519 private key".into())),
        }
    }

    /// The private JWK (with `d`: secret) and the public members of [`PublicKey::to_jwk`].
    pub fn to_private_jwk(&self) -> serde_json::Value {
        let mut jwk = self.public.to_jwk();
        jwk["d"] = serde_json::Value::String(B64URL.encode(self.seed));
        jwk
    }

    /// The public key.
    pub fn public(&self) -> &PublicKey {
        &self.public
    }

    /// The Ed25519 signature of `message`.
    pub fn sign(&self, message: &[u8]) -> [u8; 64] {
        let mut out = [0u8; 64];
        out.copy_from_slice(self.pair.sign(message).as_ref());
        out
    }
}

/// RFC 7638 §3 for an OKP key (RFC 8037 §2): SHA-256 of `{"crv":…,"kty":"OKP","x":…}`,
/// members in lexical order, no whitespace; base64url without padding.
fn thumbprint_okp(crv: &str, x: &str) -> String {
    // Both values are base64url or a curve name: nothing to escape in JSON.
    let canonical = format!(r#"{{"crv":"{crv}","kty":"OKP","x":"{x}"}}"#);
    B64URL.encode(ring::digest::digest(&ring::digest::SHA256, canonical.as_bytes()))
}

/// base64url of exactly 32 octets.
fn decode_32(text: &str, what: &str) -> Result<[u8; 32], KeyError> {
    let bytes = B64URL
        .decode(text.trim_end_matches('='))
        .map_err(|_| KeyError::Invalid(format!("{what} is not base64url")))?;
    <[u8; 32]>::try_from(bytes.as_slice()).map_err(|_| KeyError::Invalid(format!("{what} is not 32 octets")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// RFC 9421 Appendix B.1.4, "Example Ed25519 Test Key", as a JWK (the RFC gives the
    /// same key in PKCS#8 PEM form, checked below).
    fn rfc9421_test_jwk() -> serde_json::Value {
        json!({"kty": "OKP", "crv": "Ed25519", "kid": "test-key-ed25519",
               "d": "n4Ni-HpISpVObnQMW0wOhCKROaIKqKtW_2ZYb2p9KcU",
               "x": "JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs"})
    }

    #[test]
    fn rfc9421_test_key_thumbprint_is_on_the_deny_list() {
        let mut jwk = rfc9421_test_jwk();
        // Its kid is a name, not the thumbprint: refused as such …
        assert!(matches!(PublicKey::from_jwk(&jwk), Err(KeyError::KidMismatch { .. })));
        // … and without it, the thumbprint is the one the drafts' vectors use as keyid.
        jwk.as_object_mut().unwrap().remove("kid");
        let key = PublicKey::from_jwk(&jwk).unwrap();
        assert_eq!(key.thumbprint(), "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U");
        assert!(is_test_key(key.thumbprint()));
        // The PKCS#8 form (RFC 9421 B.1.4, "-----BEGIN PRIVATE KEY-----") is the same key.
        let der = base64::engine::general_purpose::STANDARD
            .decode("MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF")
            .unwrap();
        let signing = SigningKey::from_pkcs8_der(&der).unwrap();
        assert_eq!(signing.public(), &key);
        assert_eq!(SigningKey::from_jwk(&jwk).unwrap().public(), &key);
    }

    /// RFC 8037 Appendix A.3: the thumbprint of the Appendix A.2 key.
    #[test]
    fn rfc8037_thumbprint_vector() {
        let key = PublicKey::from_jwk(
            &json!({"kty":"OKP","crv":"Ed25519","x":"11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo"}),
        )
        .unwrap();
        assert_eq!(key.thumbprint(), "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k");
    }

    #[test]
    fn jwk_round_trip_and_refusals() {
        let key = SigningKey::generate().unwrap();
        let public = PublicKey::from_jwk(&key.public().to_jwk()).unwrap();
        assert_eq!(&public, key.public());
        let again = SigningKey::from_jwk(&key.to_private_jwk()).unwrap();
        let sig = again.sign(b"hello");
        assert!(key.public().verify(b"hello", &sig));
        assert!(!key.public().verify(b"hellO", &sig));
        assert!(!key.public().verify(b"hello", &sig[..63]));

        let bad = |v: serde_json::Value| PublicKey::from_jwk(&v).unwrap_err();
        assert!(matches!(bad(json!({"kty":"RSA","n":"x","e":"AQAB"})), KeyError::Unsupported(_)));
        assert!(matches!(bad(json!({"kty":"OKP","crv":"X25519","x":"x"})), KeyError::Unsupported(_)));
        let x = key.public().to_jwk()["x"].as_str().unwrap().to_owned();
        assert!(matches!(
            bad(json!({"kty":"OKP","crv":"Ed25519","x":x,"use":"enc"})),
            KeyError::Unsupported(_)
        ));
        assert!(matches!(
            bad(json!({"kty":"OKP","crv":"Ed25519","x":x,"alg":"ES256"})),
            KeyError::Unsupported(_)
        ));
        assert!(matches!(bad(json!({"kty":"OKP","crv":"Ed25519","x":"AAAA"})), KeyError::Invalid(_)));
        assert!(matches!(
            bad(json!({"kty":"OKP","crv":"Ed25519","x":format!("{x}=")})),
            KeyError::Invalid(_)
        ));
        assert!(matches!(bad(json!({"kty":"OKP","crv":"Ed25519"})), KeyError::Invalid(_)));
        assert!(matches!(bad(json!(["OKP"])), KeyError::Invalid(_)));
        let mut wrong_d = key.to_private_jwk();
        wrong_d["d"] = json!(SigningKey::generate().unwrap().to_private_jwk()["d"]);
        assert!(SigningKey::from_jwk(&wrong_d).is_err());
        assert!(SigningKey::from_pkcs8_der(&[0u8; 48]).is_err());
    }
}
