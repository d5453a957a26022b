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

// The RFC 9651 test suite runs against the shared parser in `src/sf/tests.rs`.

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
