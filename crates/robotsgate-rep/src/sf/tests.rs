use super::*;
use serde_json::{Value, json};

/// A parsed value in the test suite's JSON form (httpwg/structured-field-tests README).
fn bare_json(b: &BareItem<'_>) -> Value {
    match b {
        BareItem::Integer(i) => json!(i),
        BareItem::Decimal(d) => json!(d.as_f64()),
        BareItem::String(s) => json!(s.value()),
        BareItem::Token(t) => json!({"__type": "token", "value": t}),
        BareItem::ByteSequence(bs) => json!({"__type": "binary", "value": base32(&bs.decode())}),
        BareItem::Boolean(b) => json!(b),
        BareItem::Date(d) => json!({"__type": "date", "value": d}),
        BareItem::DisplayString(d) => json!({"__type": "displaystring", "value": d.value()}),
    }
}

fn params_json(p: &Params<'_>) -> Value {
    Value::Array(dedup(p.iter()).into_iter().map(|(k, v)| json!([k, bare_json(&v)])).collect())
}

fn item_json(i: &Item<'_>) -> Value {
    json!([bare_json(&i.bare), params_json(&i.params)])
}

fn member_json(m: &Member<'_>) -> Value {
    match m {
        Member::Item(i) => item_json(i),
        Member::InnerList(l) => {
            json!([Value::Array(l.iter().map(|i| item_json(&i)).collect()), params_json(&l.params())])
        }
    }
}

/// RFC 4648 base32 (the suite's form for byte sequences).
fn base32(data: &[u8]) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZ234567";
    let mut out = String::new();
    for chunk in data.chunks(5) {
        let mut buf = [0u8; 5];
        buf[..chunk.len()].copy_from_slice(chunk);
        let n = buf.iter().fold(0u64, |acc, &b| (acc << 8) | u64::from(b));
        let chars = (chunk.len() * 8).div_ceil(5);
        for k in 0..8 {
            if k < chars {
                out.push(char::from(A[((n >> (35 - 5 * k)) & 31) as usize]));
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Numbers compared as the suite means them (decimals to three places).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => {
            ((x.as_f64().unwrap() * 1000.0).round() - (y.as_f64().unwrap() * 1000.0).round()).abs() < 0.5
        }
        (Value::Array(x), Value::Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(a, b)| same(a, b)),
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// The RFC 9651 test suite (httpwg/structured-field-tests, BSD-3-Clause; `tests/data/sf/`):
/// every test's outcome (fails or parses), the parsed value, and the canonical
/// serialization.
#[test]
fn structured_field_test_suite() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sf");
    let (mut ran, mut compared, mut serialized) = (0, 0, 0);
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for path in names.into_iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let tests: Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for t in tests.as_array().unwrap() {
            let name = format!("{}: {}", path.display(), t["name"]);
            let raw: Vec<&str> = t["raw"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            let input = raw.join(", ");
            let must_fail = t["must_fail"].as_bool().unwrap_or(false);
            let can_fail = t["can_fail"].as_bool().unwrap_or(false);
            let mut canonical = String::new();
            let parsed: Result<Value, Error> = match t["header_type"].as_str() {
                Some("dictionary") => Dictionary::parse(input.as_bytes()).map(|d| {
                    write_dictionary(&mut canonical, &d);
                    Value::Array(
                        dedup(d.iter()).into_iter().map(|(k, m)| json!([k, member_json(&m)])).collect(),
                    )
                }),
                Some("list") => List::parse(input.as_bytes()).map(|l| {
                    write_list(&mut canonical, &l);
                    Value::Array(l.iter().map(|m| member_json(&m)).collect())
                }),
                Some("item") => parse_item(input.as_bytes()).map(|i| {
                    write_item(&mut canonical, &i);
                    item_json(&i)
                }),
                other => panic!("{name}: {other:?}"),
            };
            ran += 1;
            if must_fail {
                assert!(parsed.is_err(), "{name}: must fail: {input:?}");
                continue;
            }
            let Ok(got) = parsed else {
                assert!(can_fail, "{name}: must parse: {input:?}");
                continue;
            };
            if let Some(expected) = t.get("expected") {
                assert!(same(&got, expected), "{name}: {got} != {expected}");
                compared += 1;
            }
            let want = match t.get("canonical").and_then(|c| c.as_array()) {
                Some(c) => c.iter().map(|v| v.as_str().unwrap()).collect::<Vec<_>>().join(", "),
                None => input.clone(),
            };
            // Without "canonical", the raw form is canonical only when it came in one piece.
            if t.get("canonical").is_some() || raw.len() == 1 {
                assert_eq!(canonical, want, "{name}");
                serialized += 1;
            }
        }
    }
    assert!(
        ran > 1500 && compared > 700 && serialized > 700,
        "{ran} {compared} {serialized} in {}",
        dir.display()
    );
}

#[test]
fn large_values_parse_in_linear_time() {
    let mut v = String::new();
    for i in 0..20_000 {
        v.push_str(&format!("k{i}=n;a=1;a=2, "));
    }
    v.push_str("search=n");
    let d = Dictionary::parse(v.as_bytes()).unwrap();
    assert_eq!(d.get("search").and_then(|m| m.as_token()), Some("n"));
    let mut out = String::new();
    write_dictionary(&mut out, &d);
    assert!(out.starts_with("k0=n;a=2, k1=n;a=2"), "{}", &out[..40]);
    let deep = "(".repeat(10_000);
    assert!(Dictionary::parse(format!("search={deep}").as_bytes()).is_err());
}

#[test]
fn writers_check_what_the_rfc_requires() {
    let mut s = String::new();
    assert!(write_integer(&mut s, 1_000_000_000_000_000).is_err());
    assert!(write_integer(&mut s, -999_999_999_999_999).is_ok());
    assert!(write_string(&mut s, "caf\u{e9}").is_err());
    assert!(write_string(&mut s, "a\nb").is_err());
    assert!(write_token(&mut s, "1abc").is_err());
    assert!(write_token(&mut s, "").is_err());
    assert!(write_key(&mut s, "Sig1").is_err());
    assert!(write_key(&mut s, "").is_err());
    s.clear();
    write_string(&mut s, r#"a "quoted" \ thing"#).unwrap();
    assert_eq!(s, r#""a \"quoted\" \\ thing""#);
    assert_eq!(parse_item(s.as_bytes()).unwrap().bare.as_string().unwrap().value(), r#"a "quoted" \ thing"#);
    s.clear();
    write_decimal(&mut s, Decimal::from_thousandths(-1050).unwrap());
    assert_eq!(s, "-1.05");
    assert_eq!(Decimal::from_thousandths(1_000_000_000_000_000), None);
}

#[test]
fn string_comparison_sees_through_escapes() {
    let i = parse_item(br#""a\"b""#).unwrap();
    let s = i.bare.as_string().unwrap();
    assert!(s.is("a\"b"));
    assert!(!s.is(r#"a\"b"#));
    assert_eq!(s.raw(), r#"a\"b"#);
}

proptest::proptest! {
    #[test]
    fn base64_matches_the_base64_crate(data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..200)) {
        use base64::Engine;
        let mut out = String::new();
        write_byte_sequence(&mut out, &data);
        let want = base64::engine::general_purpose::STANDARD.encode(&data);
        proptest::prop_assert_eq!(&out, &format!(":{want}:"));
        let item = parse_item(out.as_bytes()).unwrap();
        proptest::prop_assert_eq!(item.bare.as_byte_sequence().unwrap().decode(), data.clone());
        // Without padding too (RFC 9651 §4.2.7 synthesises it).
        let bare = format!(":{}:", want.trim_end_matches('='));
        proptest::prop_assert_eq!(parse_item(bare.as_bytes()).unwrap().bare.as_byte_sequence().unwrap().decode(), data);
    }
}

proptest::proptest! {
    /// Whatever parses serializes to a canonical form that parses back to itself.
    #[test]
    fn canonical_form_is_a_fixed_point(input in r#"[a-c0-9 ,;=()"\\:?*@%.\-+/A-Z]{0,40}"#) {
        type Writer = fn(&[u8]) -> Option<String>;
        let forms: [Writer; 3] = [
            |b| Dictionary::parse(b).ok().map(|d| { let mut s = String::new(); write_dictionary(&mut s, &d); s }),
            |b| List::parse(b).ok().map(|l| { let mut s = String::new(); write_list(&mut s, &l); s }),
            |b| parse_item(b).ok().map(|i| { let mut s = String::new(); write_item(&mut s, &i); s }),
        ];
        for write in forms {
            if let Some(once) = write(input.as_bytes()) {
                let twice = write(once.as_bytes());
                proptest::prop_assert_eq!(twice.as_deref(), Some(once.as_str()), "{:?}", input);
            }
        }
    }
}
