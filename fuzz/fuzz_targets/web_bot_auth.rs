//! Web Bot Auth verification (`robotsgate::identity::httpsig::examine` and
//! `Candidate::verify`): what the ingress does with the `Signature-Input`, `Signature`,
//! `Signature-Agent` and `Host` of every request that carries them, before any key is
//! fetched.
//!
//! A request is signed once at start (a fixed key, `https://bot.example`, at a fixed time);
//! each input then makes a request that the target examines at that time and verifies with
//! that key:
//! - first byte `0`: the signed request edited: the rest is a list of edits, each
//!   `FIELD POS_HI POS_LO DELETE INSERT_LEN INSERT...` (FIELD modulo 5: `Signature-Input`,
//!   `Signature`, `Signature-Agent`, `Host`, the path), applied in order;
//! - otherwise: the fields themselves, `SIGNATURE-INPUT 0xFF SIGNATURE 0xFF SIGNATURE-AGENT
//!   0xFF HOST 0xFF PATH` (an empty field is absent; the path defaults to `/`).
//!
//! Invariants: no panic; at most `max_signatures` candidates; a candidate's directory is an
//! `https` URL; a signature verifies only if it is the one made at start (Ed25519 cannot be
//! forged, and ring refuses non-canonical signatures), at the authority it was made for
//! (`@authority`, as RFC 9421 normalises it) and with the `Signature-Agent` member it was
//! made over (both covered); the unedited request verifies.

#![no_main]

use std::sync::{Arc, LazyLock};
use std::time::{Duration, UNIX_EPOCH};

use http::{HeaderValue, Request};
use libfuzzer_sys::fuzz_target;
use robotsgate::identity::httpsig::{LABEL, RequestSigner, RequestView, SigningKey, VerifyConfig, examine};
use robotsgate_rep::sf;

const NOW: i64 = 1_800_000_000;
const FIELDS: [&str; 3] = ["signature-input", "signature", "signature-agent"];

struct Signed {
    key: Arc<SigningKey>,
    /// `Signature-Input`, `Signature`, `Signature-Agent`, `Host`, path.
    fields: [Vec<u8>; 5],
    config: VerifyConfig,
}

static SIGNED: LazyLock<Signed> = LazyLock::new(|| {
    let key = Arc::new(SigningKey::from_seed(&[7; 32]).expect("a key from a fixed seed"));
    let signer = RequestSigner::new(key.clone(), "https://bot.example").expect("a signer");
    let mut parts = Request::get("https://site.example/page?q=1").body(()).expect("a request").into_parts().0;
    let at = UNIX_EPOCH + Duration::from_secs(NOW as u64);
    signer.sign(&mut parts, at).expect("signed");
    let field = |name: &str| parts.headers.get(name).expect("signed field").as_bytes().to_vec();
    let signed = Signed {
        key,
        fields: [
            field(FIELDS[0]),
            field(FIELDS[1]),
            field(FIELDS[2]),
            b"site.example".to_vec(),
            b"/page?q=1".to_vec(),
        ],
        config: VerifyConfig::default(),
    };
    // The unedited request, as the ingress receives it, verifies.
    let exam = check(&signed, &signed.fields);
    assert_eq!(exam, 1, "the signed request does not verify");
    signed
});

/// Examines and verifies the request made of `fields`; returns how many signatures verified.
fn check(signed: &Signed, fields: &[Vec<u8>; 5]) -> usize {
    let path = if fields[4].is_empty() { &b"/"[..] } else { &fields[4][..] };
    let Ok(mut parts) = Request::get(path).body(()).map(|r| r.into_parts().0) else { return 0 };
    for (name, value) in FIELDS.iter().zip(&fields[..3]).chain([(&"host", &fields[3])]) {
        if value.is_empty() {
            continue;
        }
        if let Ok(v) = HeaderValue::from_bytes(value) {
            parts.headers.insert(*name, v);
        }
    }
    let exam = examine(RequestView::of(&parts), NOW, &signed.config);
    assert!(exam.candidates.len() <= signed.config.max_signatures);
    let mut verified = 0;
    for candidate in &exam.candidates {
        assert!(candidate.directory.as_str().starts_with("https://"), "{}", candidate.directory.as_str());
        assert!(candidate.created <= candidate.expires);
        if candidate.verify(signed.key.public()).is_ok() {
            let original = field_value(&signed.fields[1]);
            assert!(
                original.is_some_and(|o| candidate.signature() == o),
                "a signature not made at start verified"
            );
            let authority = RequestView::of(&parts).authority();
            assert_eq!(authority.as_deref(), Some("site.example"), "verified at another authority");
            let agent = parts.headers.get("signature-agent").map(|v| agent_member(v.as_bytes()));
            assert_eq!(agent, Some(agent_member(&signed.fields[2])), "verified with another Signature-Agent");
            verified += 1;
        }
    }
    verified
}

/// The canonical form of the `Signature-Agent` member the signature covers (the one keyed
/// by its label): other members, spaces and the form of writing it are not covered.
fn agent_member(field: &[u8]) -> Option<String> {
    let dictionary = sf::Dictionary::parse(field).ok()?;
    let mut out = String::new();
    sf::write_member(&mut out, &dictionary.get(LABEL)?);
    Some(out)
}

/// The signature bytes of the `Signature` member the signer wrote (keyed by its label).
fn field_value(signature: &[u8]) -> Option<Vec<u8>> {
    let dictionary = sf::Dictionary::parse(signature).ok()?;
    let item = dictionary.get(LABEL)?.as_item()?;
    Some(item.bare.as_byte_sequence()?.decode())
}

fn edited(signed: &Signed, mut script: &[u8]) -> [Vec<u8>; 5] {
    let mut fields = signed.fields.clone();
    while let [field, hi, lo, delete, len, rest @ ..] = script {
        let f = &mut fields[usize::from(*field) % 5];
        let at = (usize::from(*hi) << 8 | usize::from(*lo)).min(f.len());
        let end = (at + usize::from(*delete)).min(f.len());
        let n = usize::from(*len).min(rest.len());
        f.splice(at..end, rest[..n].iter().copied());
        script = &rest[n..];
    }
    fields
}

fn raw(data: &[u8]) -> [Vec<u8>; 5] {
    let mut fields: [Vec<u8>; 5] = Default::default();
    for (f, part) in fields.iter_mut().zip(data.splitn(5, |&b| b == 0xFF)) {
        *f = part.to_vec();
    }
    fields
}

fuzz_target!(|data: &[u8]| {
    let signed = &*SIGNED;
    let fields = match data.split_first() {
        Some((b'0', script)) => edited(signed, script),
        _ => raw(data),
    };
    check(signed, &fields);
});
