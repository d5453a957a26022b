//! Every example of the specifications (RFC 9309, Google's robots.txt documentation; the
//! project keeps copies in `../shared/spec/`), written out here, as a test of the public API:
//! `rfc9309-draft.md` (`rfc_*`), `google-robots-txt-spec.md` (`google_*`) and
//! `rep-overview.txt` (`rep_overview_*`). Tests are named after the spec section.
//!
//! Each check runs under both matcher engines (automaton and rule by rule) and, where the
//! example is unambiguous, under all three profiles. Where the readings differ by design
//! (Google compares URL octets as they are and reads `googlebot/1.2` as `googlebot`; the
//! RFC reading normalises percent-encoding and always allows `/robots.txt`), the expected
//! verdict is given per profile.

use robotsgate_rep::{ParseOptions, Profile, RobotsTxt, RuleKind, VerdictReason};

const ENGINES: [(&str, ParseOptions); 2] = [
    ("automaton", ParseOptions { automaton_min_rules: 1 }),
    ("rule-by-rule", ParseOptions { automaton_min_rules: usize::MAX }),
];

/// Expected verdicts (`true` = allowed) per profile.
#[derive(Debug, Clone, Copy)]
struct Expect {
    google: bool,
    rfc: bool,
    conservative: bool,
}

const ALLOWED: Expect = Expect { google: true, rfc: true, conservative: true };
const DISALLOWED: Expect = Expect { google: false, rfc: false, conservative: false };
/// Only the RFC reading (which normalises the URL and the rule alike) sees a match.
const ONLY_RFC_DISALLOWS: Expect = Expect { google: true, rfc: false, conservative: false };
/// Only Google's reading (lenient parsing) sees a match.
const ONLY_GOOGLE_DISALLOWS: Expect = Expect { google: false, rfc: true, conservative: false };
/// `/robots.txt` is always allowed, except under the `google` profile, which mirrors
/// Google's library (it has no such exception).
const ROBOTS_TXT: Expect = Expect { google: false, rfc: true, conservative: true };

impl Expect {
    fn of(self, profile: Profile) -> bool {
        match profile {
            Profile::Google => self.google,
            Profile::Rfc => self.rfc,
            Profile::Conservative => self.conservative,
        }
    }
}

/// Checks `url` (a full URL or a path) for `agent` in every profile and engine.
fn check_bytes(body: &[u8], agent: &str, url: &str, expect: Expect) {
    for (engine, options) in ENGINES {
        let robots = RobotsTxt::parse_with(body, options);
        for profile in Profile::ALL {
            let v = robots.check_with(profile, agent, url);
            assert_eq!(
                v.allowed(),
                expect.of(profile),
                "[{profile}, {engine}] agent {agent:?} url {url:?}: got {} ({v})\n--- robots.txt ---\n{}",
                if v.allowed() { "allowed" } else { "disallowed" },
                String::from_utf8_lossy(body),
            );
        }
    }
}

fn check(body: &str, agent: &str, url: &str, expect: Expect) {
    check_bytes(body.as_bytes(), agent, url, expect);
}

fn allowed(body: &str, agent: &str, urls: &[&str]) {
    for url in urls {
        check(body, agent, url, ALLOWED);
    }
}

fn disallowed(body: &str, agent: &str, urls: &[&str]) {
    for url in urls {
        check(body, agent, url, DISALLOWED);
    }
}

/// In every profile and engine, `url` is decided by the rule `kind: pattern` on `line`.
fn decided_by(body: &str, agent: &str, url: &str, kind: RuleKind, pattern: &str, line: u32) {
    for (engine, options) in ENGINES {
        let robots = RobotsTxt::parse_with(body.as_bytes(), options);
        for profile in Profile::ALL {
            let v = robots.check_with(profile, agent, url);
            let rule =
                v.rule().unwrap_or_else(|| panic!("[{profile}, {engine}] {url}: no rule decided ({v})"));
            assert_eq!(
                (rule.kind, rule.pattern, rule.line),
                (kind, pattern, line),
                "[{profile}, {engine}] {url}: decided by {v}"
            );
            assert_eq!(v.allowed(), kind == RuleKind::Allow, "[{profile}, {engine}] {url}: {v}");
        }
    }
}

// =======================================================================================
// RFC 9309 draft (rfc9309-draft.md)
// =======================================================================================

/// "Group: One or more user-agent lines that is followed by one or more rules. The group
/// is terminated by a user-agent line or end of file."
#[test]
fn rfc_protocol_definition_group_terminated_by_user_agent_line() {
    let body = "user-agent: a\ndisallow: /x\nuser-agent: b\ndisallow: /y\n";
    disallowed(body, "a", &["/x", "/x/1"]);
    allowed(body, "a", &["/y", "/z"]);
    disallowed(body, "b", &["/y"]);
    allowed(body, "b", &["/x"]);
}

/// "The last group may have no rules, which means it implicitly allows everything."
#[test]
fn rfc_protocol_definition_last_group_without_rules_allows_everything() {
    let body = "user-agent: *\ndisallow: /\n\nuser-agent: b\n";
    allowed(body, "b", &["/", "/anything"]);
    disallowed(body, "c", &["/anything"]);
}

/// `startgroupline = *WS "user-agent" *WS ":" *WS product-token EOL`, `EOL = *WS [comment] NL`.
#[test]
fn rfc_formal_syntax_whitespace_and_trailing_comments() {
    let body = "  User-Agent  :  foobot  # the bot\n\tDisallow\t:\t/x\t# no x\n";
    disallowed(body, "foobot", &["/x", "/xy"]);
    allowed(body, "foobot", &["/y"]);
}

/// `NL = %x0D / %x0A / %x0D.0A`.
#[test]
fn rfc_formal_syntax_line_endings_cr_lf_crlf() {
    for nl in ["\n", "\r", "\r\n"] {
        let body = format!("user-agent: foobot{nl}disallow: /x{nl}allow: /x/y{nl}");
        disallowed(&body, "foobot", &["/x"]);
        allowed(&body, "foobot", &["/x/y", "/z"]);
    }
    // Mixed in one file.
    let body = "user-agent: a\rdisallow: /a\r\nuser-agent: b\ndisallow: /b";
    disallowed(body, "a", &["/a"]);
    allowed(body, "a", &["/b"]);
    disallowed(body, "b", &["/b"]);
}

/// `group = startgroupline *(startgroupline / emptyline) *(rule / emptyline)`: empty lines
/// and comment lines may stand between the user-agent lines and the rules.
#[test]
fn rfc_formal_syntax_empty_lines_inside_a_group() {
    let body = "user-agent: a\n\n# comment\nuser-agent: b\n\ndisallow: /x\n\n# end\n";
    disallowed(body, "a", &["/x"]);
    disallowed(body, "b", &["/x"]);
    allowed(body, "c", &["/x"]);
}

/// `rule = ... (path-pattern / empty-pattern)`: an empty pattern matches nothing.
#[test]
fn rfc_formal_syntax_empty_pattern() {
    allowed("user-agent: *\ndisallow:\n", "foobot", &["/", "/x"]);
    allowed("user-agent: *\ndisallow:    # nothing\n", "foobot", &["/", "/x"]);
}

/// The HTTP header / user-agent line table: `ExampleBot` is the product token.
#[test]
fn rfc_user_agent_line_product_token_example() {
    let body = "user-agent: ExampleBot\ndisallow: /\n";
    disallowed(body, "ExampleBot", &["/", "/page"]);
    allowed(body, "OtherBot", &["/page"]);
}

/// "Crawlers MUST find the group that matches the product token exactly ... The matching
/// MUST be case-insensitive."
#[test]
fn rfc_user_agent_line_exact_case_insensitive_match() {
    let body = "user-agent: EXAMPLEBOT\ndisallow: /\n";
    disallowed(body, "ExampleBot", &["/page"]);
    disallowed(body, "examplebot", &["/page"]);
    // A longer or shorter token is another crawler.
    allowed("user-agent: ExampleBot-News\ndisallow: /\n", "ExampleBot", &["/page"]);
    allowed("user-agent: Example\ndisallow: /\n", "ExampleBot", &["/page"]);
}

/// "If there is more than one group matching the user-agent, the matching groups' rules
/// MUST be combined into one group."
#[test]
fn rfc_user_agent_line_matching_groups_combined() {
    let body = "user-agent: foobot\ndisallow: /a\n\nuser-agent: barbot\ndisallow: /b\n\n\
                user-agent: FooBot\ndisallow: /c\nallow: /a/ok\n";
    disallowed(body, "foobot", &["/a", "/c"]);
    allowed(body, "foobot", &["/b", "/a/ok"]);
    disallowed(body, "barbot", &["/b"]);
    allowed(body, "barbot", &["/a", "/c"]);
}

/// "If no matching group exists, crawlers MUST obey the first group with a user-agent
/// line with a "*" value, if present."
#[test]
fn rfc_user_agent_line_star_group_when_no_group_matches() {
    let body = "user-agent: foobot\ndisallow: /a\n\nuser-agent: *\ndisallow: /b\n";
    disallowed(body, "barbot", &["/b"]);
    allowed(body, "barbot", &["/a"]);
    disallowed(body, "foobot", &["/a"]);
    allowed(body, "foobot", &["/b"]);
}

/// "If no group satisfies either condition, or no groups are present at all, no rules
/// apply."
#[test]
fn rfc_user_agent_line_no_group_no_rules() {
    allowed("user-agent: foobot\ndisallow: /\n", "barbot", &["/", "/x"]);
    allowed("", "barbot", &["/", "/x"]);
    allowed("# only a comment\n", "barbot", &["/x"]);
}

/// "The most specific match found MUST be used. The most specific match is the match that
/// has the most octets."
#[test]
fn rfc_allow_disallow_most_specific_match_wins() {
    let body = "user-agent: *\nallow: /a/b\ndisallow: /a\n";
    decided_by(body, "foobot", "/a/b/c", RuleKind::Allow, "/a/b", 2);
    decided_by(body, "foobot", "/a/c", RuleKind::Disallow, "/a", 3);
    // The order of the lines does not matter.
    let body = "user-agent: *\ndisallow: /a\nallow: /a/b\n";
    decided_by(body, "foobot", "/a/b/c", RuleKind::Allow, "/a/b", 3);
    decided_by(body, "foobot", "/a/c", RuleKind::Disallow, "/a", 2);
}

/// "If an allow and disallow rule is equivalent, the allow SHOULD be used."
#[test]
fn rfc_allow_disallow_equivalent_rules_allow_wins() {
    decided_by("user-agent: *\ndisallow: /a\nallow: /a\n", "foobot", "/a/x", RuleKind::Allow, "/a", 3);
    // Equally long in octets: `/a*` and `/a$` (3 each).
    decided_by("user-agent: *\ndisallow: /a$\nallow: /a*\n", "foobot", "/a", RuleKind::Allow, "/a*", 3);
}

/// "The matching SHOULD be case sensitive."
#[test]
fn rfc_allow_disallow_case_sensitive() {
    let body = "user-agent: *\ndisallow: /Folder\n";
    disallowed(body, "foobot", &["/Folder", "/Folder/x"]);
    allowed(body, "foobot", &["/folder", "/FOLDER"]);
}

/// "If no match is found amongst the rules in a group for a matching user-agent, or there
/// are no rules in the group, the URI is allowed."
#[test]
fn rfc_allow_disallow_no_match_is_allowed() {
    allowed("user-agent: foobot\ndisallow: /x\n", "foobot", &["/y", "/"]);
    allowed("user-agent: foobot\n", "foobot", &["/y"]);
    // The group for the crawler has no rule that matches: the `*` group is not consulted.
    allowed("user-agent: *\ndisallow: /\nuser-agent: foobot\ndisallow: /x\n", "foobot", &["/y"]);
}

/// "The /robots.txt URI is implicitly allowed." (Google's library has no such exception,
/// and the `google` profile mirrors it.)
#[test]
fn rfc_allow_disallow_robots_txt_implicitly_allowed() {
    let body = "user-agent: *\ndisallow: /\n";
    for url in ["/robots.txt", "https://example.com/robots.txt", "/robots.txt?x=1", "/a/../robots.txt"] {
        check(body, "foobot", url, ROBOTS_TXT);
    }
    disallowed(body, "foobot", &["/robots.txtx", "/robots.txt/x", "/ROBOTS.TXT"]);
    let robots = RobotsTxt::parse(body.as_bytes());
    assert_eq!(robots.check_with(Profile::Rfc, "foobot", "/robots.txt").reason(), VerdictReason::RobotsTxt);
    assert_eq!(robots.check("foobot", "/robots.txt").reason(), VerdictReason::RobotsTxt);
}

/// The percent-encoding table of "The Allow and Disallow lines", row by row: the rule is
/// the "Path" column, and both the path as written and the "Encoded Path" must match it.
#[test]
fn rfc_allow_disallow_encoding_table() {
    let rule = |path: &str| format!("user-agent: *\ndisallow: {path}\n");

    // /foo/bar?baz=quz
    let body = rule("/foo/bar?baz=quz");
    disallowed(&body, "foobot", &["/foo/bar?baz=quz"]);

    // /foo/bar?baz=http://foo.bar -> /foo/bar?baz=http%3A%2F%2Ffoo.bar: the escapes in the
    // query are decoded by the RFC reading; Google compares the octets as they are.
    let body = rule("/foo/bar?baz=http://foo.bar");
    disallowed(&body, "foobot", &["/foo/bar?baz=http://foo.bar"]);
    check(&body, "foobot", "/foo/bar?baz=http%3A%2F%2Ffoo.bar", ONLY_RFC_DISALLOWS);
    let body = rule("/foo/bar?baz=http%3A%2F%2Ffoo.bar");
    disallowed(&body, "foobot", &["/foo/bar?baz=http%3A%2F%2Ffoo.bar"]);
    check(&body, "foobot", "/foo/bar?baz=http://foo.bar", ONLY_RFC_DISALLOWS);

    // /foo/bar/U+E38384 -> /foo/bar/%E3%83%84: both readings encode the rule; only the
    // RFC reading encodes the URL (Google expects URLs to be escaped already).
    let body = rule("/foo/bar/\u{30c4}");
    disallowed(&body, "foobot", &["/foo/bar/%E3%83%84", "https://example.com/foo/bar/%E3%83%84"]);
    check(&body, "foobot", "/foo/bar/\u{30c4}", ONLY_RFC_DISALLOWS);

    // /foo/bar/%E3%83%84 stays /foo/bar/%E3%83%84; hex digits are compared upper-case.
    let body = rule("/foo/bar/%E3%83%84");
    disallowed(&body, "foobot", &["/foo/bar/%E3%83%84"]);
    check(&body, "foobot", "/foo/bar/%e3%83%84", ONLY_RFC_DISALLOWS);
    let body = rule("/foo/bar/%e3%83%84");
    disallowed(&body, "foobot", &["/foo/bar/%E3%83%84"]);

    // /foo/bar/%62%61%7A -> /foo/bar/baz: escapes of unreserved characters are decoded.
    let body = rule("/foo/bar/%62%61%7A");
    disallowed(&body, "foobot", &["/foo/bar/%62%61%7A"]);
    check(&body, "foobot", "/foo/bar/baz", ONLY_RFC_DISALLOWS);
    let body = rule("/foo/bar/baz");
    disallowed(&body, "foobot", &["/foo/bar/baz"]);
    check(&body, "foobot", "/foo/bar/%62%61%7A", ONLY_RFC_DISALLOWS);
}

/// "The crawler SHOULD ignore "disallow" and "allow" rules that are not in any group (for
/// example, any rule that precedes the first user-agent line)."
#[test]
fn rfc_allow_disallow_rules_outside_groups_ignored() {
    let body = "disallow: /\nallow: /x\nuser-agent: foobot\ndisallow: /x\n";
    allowed(body, "foobot", &["/", "/y"]);
    disallowed(body, "foobot", &["/x"]);
    allowed(body, "barbot", &["/", "/x"]);
}

/// Special characters: `#` "Designates an end of line comment."
#[test]
fn rfc_special_characters_comment() {
    let body = "user-agent: *\ndisallow: /x # comment in line\n# comment at the end\n";
    disallowed(body, "foobot", &["/x", "/x/y"]);
    allowed(body, "foobot", &["/y"]);
    // The comment is not part of the pattern.
    let body = "user-agent: *\ndisallow: /a#b\n";
    disallowed(body, "foobot", &["/a", "/ax"]);
}

/// Special characters: `$` "Designates the end of the match pattern."
#[test]
fn rfc_special_characters_dollar() {
    let body = "user-agent: *\ndisallow: /\nallow: /this/path/exactly$\n";
    allowed(body, "foobot", &["/this/path/exactly"]);
    disallowed(body, "foobot", &["/this/path/exactly/more", "/this/path/exactly?q=1", "/this/path/exactl"]);
}

/// Special characters: `*` "Designates 0 or more instances of any character."
#[test]
fn rfc_special_characters_star() {
    let body = "user-agent: *\ndisallow: /\nallow: /this/*/exactly\n";
    allowed(body, "foobot", &["/this/is/exactly", "/this/a/b/exactly", "/this/x/exactly/more"]);
    disallowed(body, "foobot", &["/this/exactly", "/that/is/exactly"]);
    // `*` matches nothing between the two slashes, so both readings allow `/this//exactly`
    // as it is; but a server that merges slashes serves `/this/exactly`, which is
    // disallowed, and the conservative profile goes by that.
    check(body, "foobot", "/this//exactly", Expect { google: true, rfc: true, conservative: false });
}

/// "If crawlers match special characters verbatim in the URI, crawlers SHOULD use `%`
/// encoding": `%2A` matches a literal `*`, `%24` a literal `$`. Google's library compares
/// the octets as they are, so only the RFC reading matches.
#[test]
fn rfc_special_characters_percent_encoded_verbatim() {
    let body = "user-agent: *\ndisallow: /path/file-with-a-%2A.html\n";
    check(body, "foobot", "https://www.example.com/path/file-with-a-*.html", ONLY_RFC_DISALLOWS);
    disallowed(body, "foobot", &["https://www.example.com/path/file-with-a-%2A.html"]);
    // `%2A` is a literal asterisk, not a wildcard.
    allowed(body, "foobot", &["https://www.example.com/path/file-with-a-x.html"]);

    let body = "user-agent: *\ndisallow: /path/foo-%24\n";
    check(body, "foobot", "https://www.example.com/path/foo-$", ONLY_RFC_DISALLOWS);
    disallowed(body, "foobot", &["https://www.example.com/path/foo-%24"]);
    // `%24` is a literal dollar, not an anchor.
    allowed(body, "foobot", &["https://www.example.com/path/foo-"]);
}

/// "Clients MAY interpret other lines that are not part of the robots.txt protocol. For
/// example, 'sitemap'."
#[test]
fn rfc_other_lines_sitemap() {
    let body = "user-agent: *\nsitemap: https://example.com/sitemap.xml\ndisallow: /x\n";
    disallowed(body, "foobot", &["/x"]);
    allowed(body, "foobot", &["/y"]);
    assert_eq!(
        RobotsTxt::parse(body.as_bytes()).sitemaps().collect::<Vec<_>>(),
        ["https://example.com/sitemap.xml"]
    );
}

/// "Crawlers MAY impose a parsing limit that MUST be at least 500 kibibytes (KiB)."
#[test]
fn rfc_limits_at_least_500_kib_parsed() {
    let limit = 500 * 1024;
    let head = b"user-agent: *\n";
    let rule = b"disallow: /x\n";
    // The rule ends exactly at the limit: read.
    let mut body = head.to_vec();
    body.resize(limit - rule.len(), b'\n');
    body.extend_from_slice(rule);
    assert_eq!(body.len(), limit);
    check_bytes(&body, "foobot", "/x", DISALLOWED);
    let robots = RobotsTxt::parse(&body);
    assert_eq!((robots.parsed_bytes(), robots.ignored_bytes()), (limit, 0));
}

/// "User-Agent : foobot" ... the simple example: a regular group, a group for two
/// user-agents, and an empty group at the end of the file.
#[test]
fn rfc_examples_simple_example() {
    let body = "User-Agent : foobot\n\
                Disallow : /example/page.html\n\
                Disallow : /example/disallowed.gif\n\
                \n\
                User-Agent : barbot\n\
                User-Agent : bazbot\n\
                Allow : /example/page.html\n\
                Disallow : /example/disallowed.gif\n\
                \n\
                User-Agent: quxbot\n\
                \n\
                /eof\n";
    disallowed(body, "foobot", &["/example/page.html", "/example/disallowed.gif"]);
    allowed(body, "foobot", &["/example/allowed.gif", "/"]);
    for bot in ["barbot", "bazbot"] {
        allowed(body, bot, &["/example/page.html", "/example/allowed.gif"]);
        disallowed(body, bot, &["/example/disallowed.gif"]);
    }
    allowed(body, "quxbot", &["/example/page.html", "/example/disallowed.gif", "/eof"]);
    // No `*` group: other crawlers have no rules.
    allowed(body, "otherbot", &["/example/page.html", "/example/disallowed.gif"]);
}

/// "In the case of a two rules, the longest one MUST be used for matching."
///
/// The draft writes the URI as `example.com/example/page/disallow.gif`, which the rule
/// `/example/page/disallowed.gif` does not match (a typo in the draft): the intended URI
/// is `/example/page/disallowed.gif`; the URI as printed is allowed by `/example/page/`.
#[test]
fn rfc_examples_longest_match() {
    let body = "User-Agent : foobot\nAllow : /example/page/\nDisallow : /example/page/disallowed.gif\n";
    decided_by(
        body,
        "foobot",
        "https://example.com/example/page/disallowed.gif",
        RuleKind::Disallow,
        "/example/page/disallowed.gif",
        3,
    );
    decided_by(
        body,
        "foobot",
        "https://example.com/example/page/disallow.gif",
        RuleKind::Allow,
        "/example/page/",
        2,
    );
    allowed(body, "foobot", &["/example/page/", "/example/other"]);
}

// =======================================================================================
// How Google interprets the robots.txt specification (google-robots-txt-spec.md)
// =======================================================================================

/// "What is a robots.txt file": the example for example.com.
#[test]
fn google_what_is_a_robots_txt_file_example() {
    let body = "# This robots.txt file controls crawling of URLs under https://example.com.\n\
                # All crawlers are disallowed to crawl files in the \"includes\" directory, such\n\
                # as .css, .js, but Google needs them for rendering, so Googlebot is allowed\n\
                # to crawl them.\n\
                User-agent: *\n\
                Disallow: /includes/\n\
                \n\
                User-agent: Googlebot\n\
                Allow: /includes/\n\
                \n\
                Sitemap: https://example.com/sitemap.xml\n";
    allowed(body, "Googlebot", &["/includes/app.js", "/includes/style.css", "/"]);
    disallowed(body, "Otherbot", &["/includes/app.js", "/includes/style.css"]);
    allowed(body, "Otherbot", &["/", "/page"]);
    assert_eq!(
        RobotsTxt::parse(body.as_bytes()).sitemaps().collect::<Vec<_>>(),
        ["https://example.com/sitemap.xml"]
    );
}

/// "File format": lines separated by CR, CR/LF or LF.
#[test]
fn google_file_format_line_separators() {
    for nl in ["\r", "\r\n", "\n"] {
        let body = format!("User-agent: *{nl}Disallow: /a{nl}{nl}User-agent: foobot{nl}Disallow: /b{nl}");
        disallowed(&body, "otherbot", &["/a"]);
        allowed(&body, "otherbot", &["/b"]);
        disallowed(&body, "foobot", &["/b"]);
        allowed(&body, "foobot", &["/a"]);
    }
}

/// "Google ignores ... the Unicode Byte Order Mark (BOM) at the beginning of the
/// robots.txt file".
#[test]
fn google_file_format_bom_ignored() {
    let body = b"\xEF\xBB\xBFUser-agent: *\nDisallow: /x\n";
    check_bytes(body, "foobot", "/x", DISALLOWED);
    check_bytes(body, "foobot", "/y", ALLOWED);
    // Google's parser also skips a leading part of a BOM.
    for bom in [&b"\xEF"[..], b"\xEF\xBB"] {
        let body = [bom, b"User-agent: *\nDisallow: /x\n"].concat();
        let robots = RobotsTxt::parse(&body);
        assert!(!robots.check_with(Profile::Google, "foobot", "/x").allowed(), "{bom:?}");
    }
}

/// "If the content downloaded is HTML instead of robots.txt rules, Google will try to
/// parse the content and extract rules, and ignore everything else."
#[test]
fn google_file_format_invalid_lines_ignored() {
    let body =
        "<html>\n<head><title>robots</title></head>\n<body>\nUser-agent: *\nDisallow: /x\n</body>\n</html>\n";
    disallowed(body, "foobot", &["/x"]);
    allowed(body, "foobot", &["/y", "/"]);
}

/// "Google enforces a robots.txt file size limit of 500 kibibytes (KiB). Content which is
/// after the maximum file size is ignored."
#[test]
fn google_file_format_500_kib_limit() {
    let limit = 500 * 1024;
    let mut body = b"user-agent: *\n".to_vec();
    body.resize(limit, b'\n');
    body.extend_from_slice(b"disallow: /x\n");
    check_bytes(&body, "foobot", "/x", ALLOWED);
    let robots = RobotsTxt::parse(&body);
    assert_eq!((robots.parsed_bytes(), robots.ignored_bytes()), (limit, 13));

    // A rule cut by the limit is dropped (issue 22.3): read in part, `disallow: /abc` cut
    // to `disallow: /ab` would be a rule nobody wrote (and `allow: /public` cut to
    // `allow: /p` a broader one). The verdicts that the whole line may have changed say so.
    let mut body = b"user-agent: *\n".to_vec();
    body.resize(limit - "\ndisallow: /ab".len(), b' ');
    body.extend_from_slice(b"\ndisallow: /abc\n");
    check_bytes(&body, "foobot", "/ab", ALLOWED);
    check_bytes(&body, "foobot", "/a", ALLOWED);
    let robots = RobotsTxt::parse(&body);
    assert_eq!(robots.cut_line(), Some(3));
    for profile in Profile::ALL {
        assert_eq!(robots.check_with(profile, "foobot", "/abc").cut_line(), Some(3), "{profile}");
        assert_eq!(robots.check_with(profile, "foobot", "/a").cut_line(), None, "{profile}");
    }
}

/// "Syntax": `<field>:<value><#optional-comment>`; spaces optional; space at the
/// beginning and at the end of the line ignored.
#[test]
fn google_syntax_field_value_comment() {
    let body = "user-agent:*\ndisallow:/x#comment\n   disallow:   /y   \n";
    disallowed(body, "foobot", &["/x", "/y"]);
    allowed(body, "foobot", &["/z"]);
}

/// "Google supports the following fields (other fields such as crawl-delay aren't
/// supported)": unsupported fields are ignored and do not end a group.
#[test]
fn google_syntax_unsupported_fields_ignored() {
    let body = "user-agent: *\ncrawl-delay: 10\nhost: example.com\ndisallow: /x\n";
    disallowed(body, "foobot", &["/x"]);
    allowed(body, "foobot", &["/y"]);
}

/// "The value of the user-agent line is case-insensitive."
#[test]
fn google_syntax_user_agent_case_insensitive() {
    let body = "user-agent: GoogleBot\ndisallow: /\n";
    disallowed(body, "googlebot", &["/x"]);
    disallowed(body, "GOOGLEBOT", &["/x"]);
}

/// "Crawlers ignore rules without a [path]" (disallow and allow).
#[test]
fn google_syntax_rules_without_path_ignored() {
    allowed("user-agent: *\ndisallow:\n", "foobot", &["/", "/x"]);
    disallowed("user-agent: *\ndisallow: /\nallow:\n", "foobot", &["/", "/x"]);
}

/// "The value of the disallow rule is case-sensitive." / "The value of the allow rule is
/// case-sensitive."
#[test]
fn google_syntax_rule_values_case_sensitive() {
    let body = "user-agent: *\ndisallow: /Fish\nallow: /Fish/Ok\n";
    disallowed(body, "foobot", &["/Fish", "/Fish/ok"]);
    allowed(body, "foobot", &["/fish", "/Fish/Ok"]);
}

/// "sitemap": several sitemap fields, not tied to any user agent.
#[test]
fn google_syntax_sitemap_example() {
    let body = "user-agent: otherbot\n\
                disallow: /kale\n\
                \n\
                sitemap: https://example.com/sitemap.xml\n\
                sitemap: https://cdn.example.org/other-sitemap.xml\n\
                sitemap: https://ja.example.org/\u{30c6}\u{30b9}\u{30c8}-\u{30b5}\u{30a4}\u{30c8}\u{30de}\u{30c3}\u{30d7}.xml\n";
    disallowed(body, "otherbot", &["/kale", "/kale/salad"]);
    allowed(body, "foobot", &["/kale"]);
    assert_eq!(
        RobotsTxt::parse(body.as_bytes()).sitemaps().collect::<Vec<_>>(),
        [
            "https://example.com/sitemap.xml",
            "https://cdn.example.org/other-sitemap.xml",
            "https://ja.example.org/\u{30c6}\u{30b9}\u{30c8}-\u{30b5}\u{30a4}\u{30c8}\u{30de}\u{30c3}\u{30d7}.xml",
        ]
    );
}

/// "The path value must start with / to designate the root": a value without it matches
/// no path (paths always start with `/`).
#[test]
fn google_syntax_path_must_start_with_slash() {
    let body = "user-agent: *\ndisallow: fish\n";
    allowed(body, "foobot", &["/fish", "/fish.html", "/"]);
}

/// "Grouping of lines and rules": four distinct groups, for a, b, e and f together, h.
#[test]
fn google_grouping_of_lines_and_rules() {
    let body = "user-agent: a\ndisallow: /c\n\nuser-agent: b\ndisallow: /d\n\n\
                user-agent: e\nuser-agent: f\ndisallow: /g\n\nuser-agent: h\n";
    disallowed(body, "a", &["/c"]);
    allowed(body, "a", &["/d", "/g"]);
    disallowed(body, "b", &["/d"]);
    allowed(body, "b", &["/c", "/g"]);
    for agent in ["e", "f"] {
        disallowed(body, agent, &["/g"]);
        allowed(body, agent, &["/c", "/d"]);
    }
    allowed(body, "h", &["/c", "/d", "/g"]);

    // The groups themselves, in both readings.
    let robots = RobotsTxt::parse(body.as_bytes());
    for profile in [Profile::Google, Profile::Rfc] {
        let groups = |agent: &str| -> Vec<(u32, Vec<String>, bool)> {
            let v = robots.check_with(profile, agent, "/x");
            v.groups().map(|g| (g.line, g.agents().map(str::to_owned).collect(), g.specific)).collect()
        };
        assert_eq!(groups("a"), [(1, vec!["a".to_string()], true)], "{profile}");
        assert_eq!(groups("F"), [(7, vec!["e".to_string(), "f".to_string()], true)], "{profile}");
        assert_eq!(groups("h"), [(11, vec!["h".to_string()], true)], "{profile}");
        assert_eq!(groups("z"), [], "{profile}");
    }
}

/// "Order of precedence for user agents" / "Matching of user-agent fields": the table of
/// which group each crawler follows. The groups of the example are empty; each gets one
/// rule here so that the group followed can be observed.
#[test]
fn google_user_agent_precedence_matching_of_user_agent_fields() {
    let body = "user-agent: googlebot-news\n(group 1)\ndisallow: /group1\n\n\
                user-agent: *\n(group 2)\ndisallow: /group2\n\n\
                user-agent: googlebot\n(group 3)\ndisallow: /group3\n";
    let follows = |agent: &str, group: usize| {
        for g in 1..=3 {
            let url = format!("/group{g}");
            check(body, agent, &url, if g == group { DISALLOWED } else { ALLOWED });
        }
    };
    follows("googlebot-news", 1); // Googlebot News (and when crawling images)
    follows("googlebot", 3); // Googlebot (web)
    follows("Storebot-Google", 2); // no specific group
    follows("Otherbot", 2); // Other Google crawlers (web and news)
}

/// "All non-matching text is ignored (for example, both googlebot/1.2 and googlebot* are
/// equivalent to googlebot)." A strict RFC reading does not accept these as `googlebot`.
#[test]
fn google_user_agent_precedence_non_matching_text_ignored() {
    for ua in ["googlebot/1.2", "googlebot*", "Googlebot/2.1 (+http://www.google.com/bot.html)"] {
        let body = format!("user-agent: {ua}\ndisallow: /x\n");
        check(&body, "googlebot", "/x", ONLY_GOOGLE_DISALLOWS);
        allowed(&body, "googlebot", &["/y"]);
    }
}

/// "User agent specific groups and global groups (*) are not combined."
#[test]
fn google_user_agent_precedence_specific_and_global_not_combined() {
    let body = "user-agent: *\ndisallow: /a\n\nuser-agent: googlebot\ndisallow: /b\n";
    allowed(body, "googlebot", &["/a"]);
    disallowed(body, "googlebot", &["/b"]);
    disallowed(body, "otherbot", &["/a"]);
    allowed(body, "otherbot", &["/b"]);
}

/// "Grouping of rules": two googlebot-news groups are merged.
#[test]
fn google_grouping_of_rules_merged() {
    let body = "user-agent: googlebot-news\ndisallow: /fish\n\nuser-agent: *\ndisallow: /carrots\n\n\
                user-agent: googlebot-news\ndisallow: /shrimp\n";
    let merged = "user-agent: googlebot-news\ndisallow: /fish\ndisallow: /shrimp\n\n\
                  user-agent: *\ndisallow: /carrots\n";
    for b in [body, merged] {
        disallowed(b, "googlebot-news", &["/fish", "/shrimp"]);
        allowed(b, "googlebot-news", &["/carrots"]);
        disallowed(b, "otherbot", &["/carrots"]);
        allowed(b, "otherbot", &["/fish", "/shrimp"]);
    }
}

/// "Rules other than allow, disallow, and user-agent are ignored by the robots.txt
/// parser": a sitemap line does not close the group, so both a and b are disallowed.
#[test]
fn google_grouping_of_rules_sitemap_does_not_close_group() {
    let body = "user-agent: a\nsitemap: https://example.com/sitemap.xml\n\nuser-agent: b\ndisallow: /\n";
    let understood = "user-agent: a\nuser-agent: b\ndisallow: /\n";
    for b in [body, understood] {
        disallowed(b, "a", &["/", "/x"]);
        disallowed(b, "b", &["/", "/x"]);
        allowed(b, "c", &["/x"]);
    }
}

/// One row of the "URL matching based on path values" table.
fn path_table_row(pattern: &str, matches: &[&str], non_matches: &[&str]) {
    let body = format!("user-agent: *\ndisallow: {pattern}\n");
    disallowed(&body, "foobot", matches);
    allowed(&body, "foobot", non_matches);
}

#[test]
fn google_url_matching_slash() {
    // "Matches the root and any lower level URL."
    path_table_row("/", &["/", "/a", "/fish/salmon.html", "/?q=1"], &[]);
}

#[test]
fn google_url_matching_slash_star() {
    // "Equivalent to /. The trailing wildcard is ignored."
    path_table_row("/*", &["/", "/a", "/fish/salmon.html", "/?q=1"], &[]);
}

#[test]
fn google_url_matching_slash_dollar() {
    // "Matches only the root. Any lower level URL is allowed for crawling."
    path_table_row("/$", &["/"], &["/a", "/page.htm", "/?q=1"]);
}

#[test]
fn google_url_matching_fish() {
    path_table_row(
        "/fish",
        &[
            "/fish",
            "/fish.html",
            "/fish/salmon.html",
            "/fishheads",
            "/fishheads/yummy.html",
            "/fish.php?id=anything",
        ],
        &["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
    );
}

#[test]
fn google_url_matching_fish_star() {
    path_table_row(
        "/fish*",
        &[
            "/fish",
            "/fish.html",
            "/fish/salmon.html",
            "/fishheads",
            "/fishheads/yummy.html",
            "/fish.php?id=anything",
        ],
        &["/Fish.asp", "/catfish", "/?id=fish", "/desert/fish"],
    );
}

#[test]
fn google_url_matching_fish_slash() {
    path_table_row(
        "/fish/",
        &["/fish/", "/fish/?id=anything", "/fish/salmon.htm"],
        &["/fish", "/fish.html", "/animals/fish/", "/Fish/Salmon.asp"],
    );
}

#[test]
fn google_url_matching_star_php() {
    path_table_row(
        "/*.php",
        &[
            "/index.php",
            "/filename.php",
            "/folder/filename.php",
            "/folder/filename.php?parameters",
            "/folder/any.php.file.html",
            "/filename.php/",
        ],
        &["/", "/windows.PHP"],
    );
}

#[test]
fn google_url_matching_star_php_dollar() {
    path_table_row(
        "/*.php$",
        &["/filename.php", "/folder/filename.php"],
        &["/filename.php?parameters", "/filename.php/", "/filename.php5", "/windows.PHP"],
    );
}

#[test]
fn google_url_matching_fish_star_php() {
    path_table_row("/fish*.php", &["/fish.php", "/fishheads/catfish.php?parameters"], &["/Fish.PHP"]);
}

/// "Non-7-bit ASCII characters in a path may be included as UTF-8 characters or as
/// percent-escaped UTF-8 encoded characters": both spellings of the rule match the
/// escaped URL. A URL with raw UTF-8 octets is compared as it is by Google (its library
/// expects escaped URLs) and normalised by the RFC reading.
#[test]
fn google_url_matching_non_ascii_characters() {
    for rule in ["/caf\u{e9}", "/caf%C3%A9", "/caf%c3%a9"] {
        let body = format!("user-agent: *\ndisallow: {rule}\n");
        disallowed(&body, "foobot", &["/caf%C3%A9", "/caf%C3%A9/menu", "https://example.com/caf%C3%A9"]);
        allowed(&body, "foobot", &["/cafe", "/caf%C3%A8"]);
        check(&body, "foobot", "/caf\u{e9}", ONLY_RFC_DISALLOWS);
    }
}

/// "Order of precedence for rules", sample situations 1-6: the verdict and the rule that
/// decides it.
#[test]
fn google_order_of_precedence_situation_1() {
    let body = "user-agent: *\nallow: /p\ndisallow: /\n";
    decided_by(body, "foobot", "https://example.com/page", RuleKind::Allow, "/p", 2);
}

#[test]
fn google_order_of_precedence_situation_2() {
    let body = "user-agent: *\nallow: /folder\ndisallow: /folder\n";
    decided_by(body, "foobot", "https://example.com/folder/page", RuleKind::Allow, "/folder", 2);
}

#[test]
fn google_order_of_precedence_situation_3() {
    let body = "user-agent: *\nallow: /page\ndisallow: /*.htm\n";
    decided_by(body, "foobot", "https://example.com/page.htm", RuleKind::Disallow, "/*.htm", 3);
}

#[test]
fn google_order_of_precedence_situation_4() {
    let body = "user-agent: *\nallow: /page\ndisallow: /*.ph\n";
    decided_by(body, "foobot", "https://example.com/page.php5", RuleKind::Allow, "/page", 2);
}

#[test]
fn google_order_of_precedence_situation_5() {
    let body = "user-agent: *\nallow: /$\ndisallow: /\n";
    decided_by(body, "foobot", "https://example.com/", RuleKind::Allow, "/$", 2);
}

#[test]
fn google_order_of_precedence_situation_6() {
    let body = "user-agent: *\nallow: /$\ndisallow: /\n";
    decided_by(body, "foobot", "https://example.com/page.htm", RuleKind::Disallow, "/", 3);
}

// =======================================================================================
// REP overview (rep-overview.txt)
// =======================================================================================

/// "A simple robots.txt file is shown below."
#[test]
fn rep_overview_site_level_simple_file() {
    let body = "User-agent: *\nDisallow: /private\n";
    disallowed(body, "foobot", &["/private", "/private/", "/private/data.html", "/privateer"]);
    allowed(body, "foobot", &["/", "/public", "/Private"]);
}

/// "Disallow: - ... Blocks access to any URLs that begin with the characters after the /.
/// For instance, Disallow: /images blocks access to /images/, /images/image1.jpg, and
/// /images10."
#[test]
fn rep_overview_site_level_disallow_is_a_prefix() {
    let body = "User-agent: *\nDisallow: /images\n";
    disallowed(body, "foobot", &["/images/", "/images/image1.jpg", "/images10"]);
    // "The robots.txt file is case sensitive".
    allowed(body, "foobot", &["/Images/", "/IMAGES"]);
}

/// "If you direct an entry at a particular robot, then it obeys that entry instead of any
/// entries defined for user-agent: * (rather than in addition to those entries)."
#[test]
fn rep_overview_site_level_specific_entry_instead_of_star() {
    let body = "User-agent: *\nDisallow: /private\n\nUser-agent: foobot\nDisallow: /drafts\n";
    allowed(body, "foobot", &["/private"]);
    disallowed(body, "foobot", &["/drafts"]);
    disallowed(body, "otherbot", &["/private"]);
}

/// Basic samples: "Block all robots".
#[test]
fn rep_overview_basic_samples_block_all_robots() {
    let body = "# This keeps out all well-behaved robots.\n# Disallow: * is not valid.\nUser-agent: *\nDisallow: /\n";
    disallowed(body, "foobot", &["/", "/index.html", "/a/b?c=d"]);
    // /robots.txt itself stays allowed, except under Google's own reading.
    check(body, "foobot", "/robots.txt", ROBOTS_TXT);
}

/// Basic samples: "Keep out all bots by default".
#[test]
fn rep_overview_basic_samples_keep_out_by_default() {
    let body = "# Stay out unless otherwise stated\nUser-agent: *\nDisallow: /\nAllow: /Public/\n\
                Allow: /articles/\nAllow: /images/\n";
    allowed(body, "foobot", &["/Public/", "/Public/page.html", "/articles/2024/x", "/images/logo.png"]);
    disallowed(body, "foobot", &["/", "/private", "/public/page.html", "/articles"]);
}

/// Basic samples: "Block specific content".
#[test]
fn rep_overview_basic_samples_block_specific_content() {
    let body = "# Block access to the images folder\nUser-agent: *\nDisallow: /images/\n";
    disallowed(body, "foobot", &["/images/", "/images/a.jpg"]);
    allowed(body, "foobot", &["/images", "/imagesx", "/"]);
}

/// Basic samples: "Allow specific content".
#[test]
fn rep_overview_basic_samples_allow_specific_content() {
    let body = "# Block everything in the images folder\n# Except allow images/image1.jpg\nUser-agent: *\n\
                Disallow: /images/\nAllow: /images/image1.jpg\n";
    allowed(body, "foobot", &["/images/image1.jpg", "/images/image1.jpg?size=2"]);
    disallowed(body, "foobot", &["/images/image2.jpg", "/images/"]);
}

/// Basic samples: "Allow specific robot" (Googlebot blocked, Googlebot-Mobile allowed).
#[test]
fn rep_overview_basic_samples_allow_specific_robot() {
    let body = "# Block Googlebot access\n# Allow Googlebot-Mobile access\nUser-agent: Googlebot\nDisallow: /\n\
                User-agent: Googlebot-Mobile\nAllow: /\n";
    disallowed(body, "Googlebot", &["/", "/page"]);
    allowed(body, "Googlebot-Mobile", &["/", "/page"]);
    allowed(body, "Otherbot", &["/page"]);
}

/// Pattern matching: "Block access to URLs that contain a set of characters".
#[test]
fn rep_overview_pattern_matching_contains() {
    let body = "# Block access to all URLs that include an ampersand\nUser-agent: *\nDisallow: /*&\n";
    disallowed(body, "foobot", &["/page?a=1&b=2", "/a&b"]);
    allowed(body, "foobot", &["/page?a=1", "/"]);
}

/// Pattern matching: "Block access to URLs that end with a set of characters".
#[test]
fn rep_overview_pattern_matching_ends_with() {
    let body = "# Block access to all URLs that end in .cgi\nUser-agent: *\nDisallow: /*.cgi$\n";
    disallowed(body, "foobot", &["/script.cgi", "/cgi-bin/a.cgi"]);
    allowed(body, "foobot", &["/script.cgi?x=1", "/script.cgi/", "/script.cgix"]);
}

/// Pattern matching: "Selectively allow access to a URL that matches a blocked pattern".
#[test]
fn rep_overview_pattern_matching_selective_allow() {
    let body = "# Block access to URLs that contain ?\n# Allow access to URLs that end in ?\nUser-agent: *\n\
                Disallow: /*?\nAllow: /*?$\n";
    allowed(body, "foobot", &["/page?", "/page"]);
    disallowed(body, "foobot", &["/page?a=1", "/page?sort=asc&x=2"]);
}

/// "Reduce the crawling load": crawl-delay per robot (not used for verdicts).
///
/// msnbot must wait 5 seconds and Slurp 12. The engine reads the two `User-agent` lines
/// as one group (a `crawl-delay` line, like a `sitemap` line, does not close a group) and
/// keeps the first delay of the group, so Slurp gets 5 seconds: see the final report.
#[test]
fn rep_overview_crawl_delay() {
    let body = "# MSNBot, please wait 5 seconds in between visits\nUser-agent: msnbot\nCrawl-delay: 5\n\n\
                # Yahoo's Slurp, please wait 12 seconds in between visits\nUser-agent: slurp\nCrawl-delay: 12\n";
    allowed(body, "msnbot", &["/", "/page"]);
    allowed(body, "slurp", &["/", "/page"]);
    let robots = RobotsTxt::parse(body.as_bytes());
    let mut wrong = Vec::new();
    for profile in Profile::ALL {
        for (agent, delay) in [("msnbot", Some(5.0)), ("Slurp", Some(12.0)), ("googlebot", None)] {
            let got = robots.crawl_delay_with(profile, agent);
            if got != delay {
                wrong.push(format!("[{profile}] {agent}: expected {delay:?}, got {got:?}"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// Common mistakes: "GoogleBot follows the most specific directive, ignoring all others".
#[test]
fn rep_overview_common_mistakes_most_specific_directive() {
    let body = "# This keeps out all well-behaved robots\nUser-agent: *\nDisallow: /\n\n\
                # This looks like it is giving Google access to only this directory, but since it is a\n\
                # GoogleBot specific section, Google will disregard the previous section\n\
                # and access the whole site.\nUser-agent: Googlebot\nAllow: /Content_For_Google/\n";
    allowed(body, "Googlebot", &["/", "/anything", "/Content_For_Google/page"]);
    disallowed(body, "Otherbot", &["/", "/Content_For_Google/page"]);
}

/// Issue 31.5: an agent given with a version (a User-Agent) is checked for its token, not
/// silently as an agent no group names.
#[test]
fn an_agent_with_a_version_is_checked_for_its_token() {
    let robots =
        RobotsTxt::parse(b"User-agent: ExampleBot\nDisallow: /private\n\nUser-agent: *\nDisallow:\n");
    for profile in [Profile::Google, Profile::Rfc, Profile::Conservative] {
        for agent in ["ExampleBot", "ExampleBot/1.0", "examplebot/2 (+https://example.com/bot)"] {
            assert!(!robots.check_with(profile, agent, "/private/x").allowed(), "{profile:?} {agent}");
        }
        assert!(robots.check_with(profile, "OtherBot/1.0", "/private/x").allowed(), "{profile:?}");
    }
}
