//! A signature agent's key directory (`robotsgate::identity::httpsig::Directory::parse`):
//! the JSON the ingress fetches from a URL a request names, so from anyone. Input: a first
//! byte (its low bit: test keys allowed), then the document.
//!
//! Invariants: no panic; a document over the byte limit is refused; a refused document's
//! reason is at most 200 bytes (it goes to the log); a parsed directory has at most the
//! key limit, one key per thumbprint, each key written back as a JWK reads as the same key,
//! and its product token (from a Signature Agent Card) is an RFC 9309 product token
//! (letters, `_` and `-`).

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate::identity::httpsig::{Directory, PublicKey};

const MAX_BYTES: usize = 64 * 1024;
const MAX_KEYS: usize = 32;

fuzz_target!(|data: &[u8]| {
    let Some((flags, body)) = data.split_first() else { return };
    let directory = match Directory::parse(body, MAX_BYTES, MAX_KEYS, flags & 1 == 1) {
        Ok(directory) => directory,
        Err(e) => {
            let reason = e.to_string();
            assert!(reason.len() <= 200, "a reason of {} bytes: {reason:.300}", reason.len());
            return;
        }
    };
    assert!(body.len() <= MAX_BYTES);
    assert!(directory.keys.len() <= MAX_KEYS);
    let mut thumbprints: Vec<&str> = directory.keys.iter().map(|k| k.key.thumbprint()).collect();
    thumbprints.sort_unstable();
    let n = thumbprints.len();
    thumbprints.dedup();
    assert_eq!(n, thumbprints.len(), "a thumbprint twice");
    for k in &directory.keys {
        let back = PublicKey::from_jwk(&k.key.to_jwk()).expect("a key written as a JWK reads back");
        assert_eq!(back.as_bytes(), k.key.as_bytes());
        assert_eq!(back.thumbprint(), k.key.thumbprint());
    }
    if let Some(token) = &directory.product_token {
        assert!(
            !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-'),
            "{token:?}"
        );
    }
});
