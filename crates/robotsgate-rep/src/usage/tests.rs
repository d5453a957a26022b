use super::*;

#[test]
fn content_usage_values() {
    use Preference::*;
    let get = |v: &str| {
        let s = parse_content_usage(v.as_bytes());
        (s.get(Category::TrainAi), s.get(Category::Search), s.is_malformed())
    };
    assert_eq!(get("train-ai=n, search=y"), (Disallowed, Allowed, false));
    assert_eq!(get("train-ai=y"), (Allowed, Unknown, false));
    assert_eq!(get(""), (Unknown, Unknown, false));
    // The last duplicate wins (vocab-07 §6.5.1).
    assert_eq!(get("train-ai=n, train-ai=y"), (Allowed, Unknown, false));
    assert_eq!(get("train-ai;allow=n, train-ai=y"), (Allowed, Unknown, false));
    // Parameters are ignored; a value that is not y/n is unknown.
    assert_eq!(get("train-ai=n;why=\"x\""), (Disallowed, Unknown, false));
    assert_eq!(get("train-ai=yes, search=no"), (Unknown, Unknown, false));
    assert_eq!(get("train-ai=Y, search=\"n\""), (Unknown, Unknown, false));
    assert_eq!(get("train-ai=(n), search=?0"), (Unknown, Unknown, false));
    // Unknown keys (older drafts' labels too) are ignored.
    assert_eq!(get("train-genai=n, bots=n, ai-use=n, search=n"), (Unknown, Disallowed, false));
    // Failures: every category unknown.
    for bad in [
        "Train-AI=n",
        "train-ai=n,",
        "train-ai=n search=n",
        "train-ai=n,, search=n",
        "train-ai = n",
        "search=n, train-ai=\"open",
        "search=n, x=:a=b:",
        "search=n, x=1.2345",
        "search=n, x=%\"%c3\"",
        "search=n, ünïcode=n",
        "\tsearch=n",
    ] {
        assert_eq!(get(bad), (Unknown, Unknown, true), "{bad:?}");
    }
    // Spaces (only) around the whole value; tabs between members.
    assert_eq!(get("  search=n  "), (Unknown, Disallowed, false));
    assert_eq!(get("search=n\t,\ttrain-ai=n"), (Disallowed, Disallowed, false));
}

#[test]
fn content_signal_values() {
    use Preference::*;
    let get = |v: &str| {
        let s = parse_content_signal(v.as_bytes());
        (s.get(Category::TrainAi), s.get(Category::Search), s.get(Category::AiInput), s.is_malformed())
    };
    // Cloudflare's managed robots.txt.
    assert_eq!(get("search=yes, ai-train=no"), (Disallowed, Allowed, Unknown, false));
    assert_eq!(get("search=yes,ai-train=no,ai-input=no"), (Disallowed, Allowed, Disallowed, false));
    assert_eq!(get("ai-train=yes, search=yes, ai-input=yes"), (Allowed, Allowed, Allowed, false));
    assert_eq!(get(" AI-Train = No "), (Disallowed, Unknown, Unknown, false));
    // AIPREF's labels and values are not Content Signals'.
    assert_eq!(get("train-ai=no, search=n"), (Unknown, Unknown, Unknown, false));
    assert_eq!(get("ai-train=no, ai-train=yes"), (Allowed, Unknown, Unknown, false));
    assert_eq!(get("ai-train=no, junk, =yes"), (Disallowed, Unknown, Unknown, true));
    assert_eq!(get(""), (Unknown, Unknown, Unknown, false));
}

#[test]
fn paths_split_at_the_first_space_or_tab() {
    assert_eq!(split_path(b"/ai-ok/ train-ai=y"), (&b"/ai-ok/"[..], &b"train-ai=y"[..]));
    assert_eq!(split_path(b"/a\t \tsearch=n"), (&b"/a"[..], &b"search=n"[..]));
    assert_eq!(split_path(b"train-ai=n"), (&b""[..], &b"train-ai=n"[..]));
    assert_eq!(split_path(b"/only"), (&b"/only"[..], &b""[..]));
}

#[test]
fn combine_is_most_restrictive() {
    use Preference::*;
    for (a, b, c) in [
        (Unknown, Unknown, Unknown),
        (Unknown, Allowed, Allowed),
        (Allowed, Disallowed, Disallowed),
        (Disallowed, Unknown, Disallowed),
    ] {
        assert_eq!(a.combine(b), c);
        assert_eq!(b.combine(a), c);
    }
    assert!("ai-train".parse::<Category>().unwrap_err().to_string().contains("train-ai"));
}

/// Members as `(key, token value)`.
type Members = Vec<(String, Option<String>)>;

/// The RFC 9651 test suite (httpwg/structured-field-tests, BSD-3-Clause; `tests/data/sf/`):
/// every test's outcome (fails or parses), and for dictionaries, which members are Tokens.
#[test]
fn structured_field_test_suite() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/sf");
    let mut ran = 0;
    let mut names: Vec<_> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().path()).collect();
    names.sort();
    for path in names.into_iter().filter(|p| p.extension().is_some_and(|e| e == "json")) {
        let tests: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
        for t in tests.as_array().unwrap() {
            let name = format!("{}: {}", path.display(), t["name"]);
            let raw: Vec<&str> = t["raw"].as_array().unwrap().iter().map(|v| v.as_str().unwrap()).collect();
            let input = raw.join(", ");
            let must_fail = t["must_fail"].as_bool().unwrap_or(false);
            let can_fail = t["can_fail"].as_bool().unwrap_or(false);
            let (ok, tokens): (bool, Option<Members>) = match t["header_type"].as_str() {
                Some("dictionary") => {
                    let mut got = Vec::new();
                    let r = sf::parse_dictionary(input.as_bytes(), |k, m| {
                        let v = match m {
                            sf::Member::Token(t) => Some(String::from_utf8(t.to_vec()).unwrap()),
                            sf::Member::Other => None,
                        };
                        let k = String::from_utf8(k.to_vec()).unwrap();
                        got.retain(|(g, _)| *g != k);
                        got.push((k, v));
                    });
                    (r.is_ok(), Some(got))
                }
                Some("list") => (sf::parse_other(input.as_bytes(), true).is_ok(), None),
                Some("item") => (sf::parse_other(input.as_bytes(), false).is_ok(), None),
                other => panic!("{name}: {other:?}"),
            };
            ran += 1;
            if must_fail {
                assert!(!ok, "{name}: must fail: {input:?}");
                continue;
            }
            if !ok {
                assert!(can_fail, "{name}: must parse: {input:?}");
                continue;
            }
            if let (Some(got), Some(expected)) = (tokens, t["expected"].as_array()) {
                // The expected members in order (the last of a duplicate key kept at its
                // first place by RFC 9651, which does not matter here).
                let want: Members = expected
                    .iter()
                    .map(|m| {
                        let k = m[0].as_str().unwrap().to_owned();
                        let v = &m[1][0];
                        let tok = (v.get("__type").and_then(|t| t.as_str()) == Some("token"))
                            .then(|| v["value"].as_str().unwrap().to_owned());
                        (k, tok)
                    })
                    .collect();
                let mut got = got;
                let mut want = want;
                got.sort();
                want.sort();
                assert_eq!(got, want, "{name}");
            }
        }
    }
    assert!(ran > 1000, "only {ran} vectors found in {}", dir.display());
}

#[test]
fn large_dictionaries_parse_in_linear_time() {
    let mut v = String::new();
    for i in 0..20_000 {
        v.push_str(&format!("k{i}=n, "));
    }
    v.push_str("search=n");
    let s = parse_content_usage(v.as_bytes());
    assert_eq!(s.get(Category::Search), Preference::Disallowed);
    let deep = "(".repeat(10_000);
    assert!(parse_content_usage(format!("search={deep}").as_bytes()).is_malformed());
}
