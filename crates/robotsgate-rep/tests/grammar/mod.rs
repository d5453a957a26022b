//! The grammar of generated robots.txt bodies and request paths, shared by the property
//! tests (`proptest_engine.rs`) and the differential test against the `robotstxt` crate
//! (`differential_google.rs`).

#![allow(dead_code)]

use proptest::prelude::*;
use proptest::sample::select;
use proptest::test_runner::Config;

/// Product tokens the crawler checks with. Never empty: Google's library would match an
/// empty agent against every user-agent value whose token is empty (`User-agent: 1bot`),
/// the engine deliberately matches an empty agent against nothing.
pub const AGENTS: &[&str] = &["FooBot", "foobot", "foo", "Foo_Bot", "FooBot-News", "MJ12bot", "barbot"];

/// `cases` per property, or `PROPTEST_CASES` when set (for long bug hunts).
pub fn config(cases: u32) -> Config {
    let cases = std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(cases);
    Config { cases, failure_persistence: None, ..Config::default() }
}

// ---------------------------------------------------------------------------------------
// Grammar of robots.txt bodies
// ---------------------------------------------------------------------------------------

/// Pieces of rule patterns: a small alphabet so that wildcards, anchors, escapes and
/// collisions happen often, plus escapes, non-ASCII (valid and invalid UTF-8), dot
/// segments and Google's `index.htm` special case.
pub const PATTERN_ATOMS: &[&[u8]] = &[
    b"/",
    b"/",
    b"/",
    b"a",
    b"a",
    b"b",
    b"b",
    b".",
    b"%",
    b"2",
    b"A",
    b"*",
    b"*",
    b"$",
    b"$",
    b"?",
    b"=",
    b"%2A",
    b"%2a",
    b"%24",
    b"%41",
    b"%61",
    b"%2F",
    b"%2f",
    b"%3F",
    b"%3A",
    b"%7E",
    b"%C3%A9",
    b"%c3%a9",
    "\u{e9}".as_bytes(),
    b"\xE9",
    "\u{30c4}".as_bytes(),
    b"%E3%83%84",
    b"/.",
    b"/..",
    b"index.htm",
    b"index.html",
    b"robots.txt",
    b"&",
    b"~",
    b" ",
    b"\0",
    b"\x0B",
    b"#",
    b";",
    b"%3B",
    b"%40",
    b"%21",
    b"%27",
    b"%28",
    b"%2C",
    b"%26",
    b"%3D",
    b"%2B",
    b"%23",
    b"%25",
    b"%5B",
    b"%20",
    b"\"",
    b"[",
];

/// Pieces of request paths (valid UTF-8, no `#`): raw non-ASCII and `%` that starts no
/// escape among them, as URLs scraped from pages have them (issue 31.1).
pub const PATH_ATOMS: &[&str] = &[
    "/",
    "/",
    "/",
    "a",
    "a",
    "b",
    "b",
    ".",
    "%",
    "2",
    "A",
    "*",
    "$",
    "?",
    "=",
    "%2A",
    "%2a",
    "%24",
    "%41",
    "%61",
    "%2F",
    "%3F",
    "%3A",
    "%7E",
    "%C3%A9",
    "\u{e9}",
    "\u{30c4}",
    "%E3%83%84",
    "%%41",
    "%4",
    "/.",
    "/..",
    "index.htm",
    "index.html",
    "robots.txt",
    "&",
    "~",
    " ",
    ";",
    "%3B",
    "%3b",
    "%40",
    "@",
    "%21",
    "%27",
    "%28",
    "%29",
    "(",
    "%2C",
    ",",
    "%26",
    "%3D",
    "%2B",
    "+",
    "%23",
    "%25",
    "%5B",
    "[",
    "%20",
    "\"",
    "%7e",
    "%2e",
    "%2E%2E",
];

/// Keys both readings accept ...
pub const UA_KEYS: &[&str] = &["User-agent", "user-agent", "USER-AGENT", "user-agent "];
/// ... and keys only Google accepts.
pub const UA_KEYS_GOOGLE: &[&str] = &["useragent", "User agent", "User-agents", "user-agent-x"];

/// Values both readings read the same way (for the agents in [`AGENTS`]) ...
pub const UA_VALUES: &[&[u8]] = &[
    b"FooBot",
    b"foobot",
    b"FOOBOT",
    b"foo",
    b"Foo",
    b"FooBot-News",
    b"Foo_Bot",
    b"barbot",
    b"*",
    b"*",
    b"*",
];
/// ... and values where they differ: Google cuts the token at the first byte outside
/// `[A-Za-z_-]` and reads `*` followed by whitespace as `*`.
pub const UA_VALUES_ODD: &[&[u8]] = &[
    b"FooBot/1.0",
    b"MJ12bot",
    b"MJ",
    b"foo bot",
    b"* junk",
    b"*\tjunk",
    // Google's `isspace` includes the vertical tab (once an engine bug, see
    // `google_star_followed_by_vertical_tab_is_global`).
    b"*\x0Bjunk",
    b"*\x0Cjunk",
    b"*junk",
    b"*/1.0",
    b"",
    b"foobot*",
    b"\xE9bot",
];

pub const RULE_KEYS: &[&str] =
    &["Allow", "allow", "ALLOW", "Disallow", "Disallow", "disallow", "disallow", "DisAllow", "disallow "];
pub const RULE_KEYS_GOOGLE: &[&str] =
    &["disalow", "dissallow", "dissalow", "diasllow", "disallaw", "Disallowed", "allowance", "disallow-x"];

pub const SEPARATORS: &[&str] = &[": ", ": ", ":", " : ", ":\t"];
/// No colon: Google reads the line when it is exactly two words.
pub const SEPARATORS_GOOGLE: &[&str] = &[" ", "\t"];

/// `clean` most of the time, `odd` sometimes.
pub fn mostly<T: Clone + std::fmt::Debug + 'static>(
    clean: &'static [T],
    odd: &'static [T],
) -> impl Strategy<Value = T> + Clone {
    prop_oneof![4 => select(clean), 1 => select(odd)]
}

pub const OTHER_LINES: &[&[u8]] = &[
    b"",
    b"",
    b"   ",
    b"# a comment",
    b"Sitemap: http://example.com/s.xml",
    b"site-map: /x",
    b"crawl-delay: 5",
    b"foo: bar",
    b": /a",
    b"disallow /a /b",
    b"noise",
    b"user-agent",
    b"\x0B",
    b"disallow\x0B/a",
    b"allow /a\x0Bb",
    b"Disallow: /a\0Disallow: /",
    b"<html>",
];

pub fn pattern() -> impl Strategy<Value = Vec<u8>> {
    const HEADS: &[&[u8]] = &[b"/", b"/", b"/", b"/", b"", b"*"];
    const SHORT: &[&[u8]] = &[b"/", b"a", b"b", b"*", b"$", b"."];
    const INDEX: &[&[u8]] = &[
        b"/index.htm",
        b"/index.html",
        b"/a/index.htm",
        b"/a/index.html",
        b"/*/index.htm",
        b"/a/b/index.htm",
    ];
    const COMMON: &[&[u8]] = &[
        b"/", b"/", b"/a", b"/a/", b"*", b"/a*", b"/*a", b"/b", b"/*$", b"/a$", b"/a/*", b"/*/", b"/a/$",
        b"/$",
    ];
    let join = |(head, atoms): (&[u8], Vec<&[u8]>)| [head.to_vec(), atoms.concat()].concat();
    prop_oneof![
        3 => select(COMMON).prop_map(<[u8]>::to_vec),
        // Short patterns over the letters paths use most: these match often.
        5 => (select(HEADS), prop::collection::vec(select(SHORT), 0..6)).prop_map(join),
        4 => (select(HEADS), prop::collection::vec(select(PATTERN_ATOMS), 0..4)).prop_map(join),
        2 => (select(HEADS), prop::collection::vec(select(PATTERN_ATOMS), 0..8)).prop_map(join),
        // Every shape the matcher sorts rules into: `first*mid*...*last$` and friends,
        // with segments that overlap the path and each other.
        4 => (segment(3), prop::collection::vec(segment(2), 0..3), segment(2), select(&["", "$", "*", "*$"][..]))
            .prop_map(|(first, mids, last, end)| {
                let mut p = format!("/{first}");
                for m in mids {
                    p = format!("{p}*{m}");
                }
                format!("{p}*{last}{end}").into_bytes()
            }),
        // Google's `allow: /dir/index.htm[l]` also allows `/dir/`.
        1 => select(INDEX).prop_map(<[u8]>::to_vec),
    ]
}

pub fn request_path() -> impl Strategy<Value = String> {
    const SHORT: &[&str] = &["/", "/", "a", "a", "b", ".", "*", "$", "?"];
    prop_oneof![
        4 => prop::collection::vec(select(SHORT), 0..5),
        2 => prop::collection::vec(select(&["a", "b", "/", "a"][..]), 0..8),
        4 => prop::collection::vec(select(PATH_ATOMS), 0..7),
        2 => select(&["/robots.txt", "/robots.txt?x=1", "/a/../robots.txt", "/%72obots.txt", "/", "/a/", "/a/",
                      "/a/b/", "/a/index.html", "/index.htm"][..])
            .prop_map(|p| vec![&p[1..]]),
        // Paths whose slashes are spelled as servers may read them: `//`, `%2F`, `%5C`.
        3 => prop::collection::vec(
                (select(&["", "/", "/", "%2F", "%2f", "%5C", "%5c", "//", "/%2F"][..]),
                 select(&["a", "a", "b", "a/", "index.html", "robots.txt", "..", "?a//b"][..])),
                1..4)
            .prop_map(|parts| parts.into_iter().flat_map(|(sep, seg)| [sep, seg]).collect()),
    ]
    .prop_map(|atoms| format!("/{}", atoms.concat()))
}

pub fn ua_line() -> impl Strategy<Value = Vec<u8>> {
    (mostly(UA_KEYS, UA_KEYS_GOOGLE), mostly(SEPARATORS, SEPARATORS_GOOGLE), mostly(UA_VALUES, UA_VALUES_ODD))
        .prop_map(|(k, s, v)| [k.as_bytes(), s.as_bytes(), v].concat())
}

pub fn rule_line() -> impl Strategy<Value = Vec<u8>> {
    (mostly(RULE_KEYS, RULE_KEYS_GOOGLE), mostly(SEPARATORS, SEPARATORS_GOOGLE), pattern())
        .prop_map(|(k, s, v)| [k.as_bytes(), s.as_bytes(), &v].concat())
}

/// Decorates a line: leading whitespace, a trailing comment, a line break.
pub fn decorated(content: impl Strategy<Value = Vec<u8>>) -> impl Strategy<Value = Vec<u8>> {
    (
        select(&["", "", "", " ", "\t"][..]),
        content,
        select(&["", "", "", " ", " # note", "#x"][..]),
        select(&["\n", "\n", "\n", "\r\n", "\r"][..]),
    )
        .prop_map(|(lead, content, tail, eol)| {
            [lead.as_bytes(), &content, tail.as_bytes(), eol.as_bytes()].concat()
        })
}

pub fn any_line() -> impl Strategy<Value = Vec<u8>> {
    decorated(prop_oneof![
        3 => ua_line(),
        6 => rule_line(),
        2 => select(OTHER_LINES).prop_map(<[u8]>::to_vec),
    ])
}

/// A group: user-agent lines, then rules with the odd other line among them.
pub fn group() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::collection::vec(decorated(ua_line()), 1..4),
        prop::collection::vec(
            decorated(prop_oneof![
                8 => rule_line(),
                1 => select(OTHER_LINES).prop_map(<[u8]>::to_vec),
            ]),
            0..5,
        ),
    )
        .prop_map(|(agents, rules)| [agents.concat(), rules.concat()].concat())
}

/// A leading UTF-8 BOM, a prefix of one, or something that is not one.
pub const BOMS: &[&[u8]] = &[b"", b"", b"", b"", b"\xEF\xBB\xBF", b"\xEF\xBB", b"\xEF", b"\xEF\xBF"];

pub fn body() -> impl Strategy<Value = Vec<u8>> {
    (
        select(BOMS),
        prop_oneof![
            // Mostly group-shaped bodies, with stray lines before them ...
            3 => (prop::collection::vec(any_line(), 0..3), prop::collection::vec(group(), 0..5))
                .prop_map(|(pre, groups)| [pre.concat(), groups.concat()].concat()),
            // ... and some free-form sequences of lines.
            1 => prop::collection::vec(any_line(), 0..14).prop_map(|lines| lines.concat()),
        ],
        any::<bool>(),
    )
        .prop_map(|(bom, lines, strip_last_eol)| {
            let mut body = [bom, &lines[..]].concat();
            if strip_last_eol && body.last() == Some(&b'\n') {
                body.pop();
            }
            body
        })
}

/// A segment over a tiny alphabet, so that segments overlap, repeat and are suffixes of
/// one another (long dictionary-link chains in the automaton).
pub fn segment(max: usize) -> impl Strategy<Value = String> {
    prop::collection::vec(select(&["a", "a", "b", "/", "."][..]), 0..=max).prop_map(|v| v.concat())
}
