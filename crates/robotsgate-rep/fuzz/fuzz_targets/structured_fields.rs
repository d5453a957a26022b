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

fn dictionary(data: &[u8]) {
    let Ok(d) = Dictionary::parse(data) else { return };
    let mut once = String::new();
    sf::write_dictionary(&mut once, &d);
    sendable(&once);
    let again = Dictionary::parse(once.as_bytes())
        .unwrap_or_else(|e| panic!("canonical form {once:?} does not parse: {e}"));
    let mut twice = String::new();
    sf::write_dictionary(&mut twice, &again);
    assert_eq!(once, twice, "canonical form not idempotent");
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
        let l =
            List::parse(text.as_bytes()).unwrap_or_else(|e| panic!("member {text:?} does not parse: {e}"));
        let mut back = String::new();
        sf::write_list(&mut back, &l);
        assert_eq!(back, text);
    }
}

fn list(data: &[u8]) {
    let Ok(l) = List::parse(data) else { return };
    let mut once = String::new();
    sf::write_list(&mut once, &l);
    sendable(&once);
    let again = List::parse(once.as_bytes())
        .unwrap_or_else(|e| panic!("canonical form {once:?} does not parse: {e}"));
    let mut twice = String::new();
    sf::write_list(&mut twice, &again);
    assert_eq!(once, twice, "canonical form not idempotent");
    assert_eq!(l.iter().count(), again.iter().count(), "{once:?}: members lost");
}

fn item(data: &[u8]) {
    let Ok(i) = sf::parse_item(data) else { return };
    let mut once = String::new();
    sf::write_item(&mut once, &i);
    sendable(&once);
    let again = sf::parse_item(once.as_bytes())
        .unwrap_or_else(|e| panic!("canonical form {once:?} does not parse: {e}"));
    let mut twice = String::new();
    sf::write_item(&mut twice, &again);
    assert_eq!(once, twice, "canonical form not idempotent");
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
