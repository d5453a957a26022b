//! RFC 9651 Structured Field Values (`robotsgate_rep::sf`): the parser that reads the
//! `Signature-Input`, `Signature` and `Signature-Agent` of every request the ingress
//! verifies, and `Content-Usage`. Input: any bytes, parsed as a Dictionary, a List and an
//! Item.
//!
//! Invariants: no panic; whatever parses has a canonical form (RFC 9651 §4.1) that parses
//! again, as the same kind, to the same canonical form (serializing is idempotent); the
//! canonical form is ASCII without control characters (a field value that can be sent);
//! a dictionary's canonical form has each key once with the value `get` returns for it in
//! the input; iterating a parsed value never stops early (the canonical form of each
//! member iterated parses as that member).

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate_rep::sf::{self, Dictionary, List, Member};

fn sendable(s: &str) {
    assert!(s.bytes().all(|b| (0x20..0x7f).contains(&b)), "not a field value: {s:?}");
}

fn member_text(m: &Member<'_>) -> String {
    let mut out = String::new();
    sf::write_member(&mut out, m);
    out
}

/// The canonical form of `bytes` parsed as each kind, if it parses as that kind.
fn canonical_dictionary(bytes: &[u8]) -> Option<String> {
    let d = Dictionary::parse(bytes).ok()?;
    let mut out = String::new();
    sf::write_dictionary(&mut out, &d);
    Some(out)
}

fn canonical_list(bytes: &[u8]) -> Option<String> {
    let l = List::parse(bytes).ok()?;
    let mut out = String::new();
    sf::write_list(&mut out, &l);
    Some(out)
}

fn canonical_item(bytes: &[u8]) -> Option<String> {
    let i = sf::parse_item(bytes).ok()?;
    let mut out = String::new();
    sf::write_item(&mut out, &i);
    Some(out)
}

/// `once` (a canonical form) can be sent, parses again as the same kind, and is its own
/// canonical form.
fn stable(once: &str, canonical: fn(&[u8]) -> Option<String>) {
    sendable(once);
    let twice =
        canonical(once.as_bytes()).unwrap_or_else(|| panic!("canonical form {once:?} does not parse"));
    assert_eq!(once, twice, "canonical form not idempotent");
}

fn dictionary(data: &[u8]) {
    let Ok(d) = Dictionary::parse(data) else { return };
    let Some(once) = canonical_dictionary(data) else { return };
    stable(&once, canonical_dictionary);
    let Ok(again) = Dictionary::parse(once.as_bytes()) else { return };
    let mut keys: Vec<&str> = d.iter().map(|(k, _)| k).collect();
    keys.sort_unstable();
    keys.dedup();
    assert_eq!(keys.len(), again.iter().count(), "{once:?}: keys lost or repeated");
    for key in keys {
        let want = d.get(key).map(|m| member_text(&m));
        let got = again.get(key).map(|m| member_text(&m));
        assert_eq!(want, got, "{key}");
    }
    // Each member alone (as a list of one) is its canonical text.
    for (_, m) in d.iter() {
        let text = member_text(&m);
        let back =
            canonical_list(text.as_bytes()).unwrap_or_else(|| panic!("member {text:?} does not parse"));
        assert_eq!(back, text);
    }
}

fn list(data: &[u8]) {
    let Ok(l) = List::parse(data) else { return };
    let Some(once) = canonical_list(data) else { return };
    stable(&once, canonical_list);
    let Ok(again) = List::parse(once.as_bytes()) else { return };
    assert_eq!(l.iter().count(), again.iter().count(), "{once:?}: members lost");
}

fn item(data: &[u8]) {
    let Ok(i) = sf::parse_item(data) else { return };
    let Some(once) = canonical_item(data) else { return };
    stable(&once, canonical_item);
    // The typed views do not panic on what parsed.
    if let Some(b) = i.bare.as_byte_sequence() {
        let _ = b.decode();
    }
    if let Some(s) = i.bare.as_string() {
        let _ = s.value();
    }
}

fuzz_target!(|data: &[u8]| {
    dictionary(data);
    list(data);
    item(data);
});
