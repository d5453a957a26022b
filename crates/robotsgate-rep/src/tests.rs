use super::*;

#[test]
fn smoke() {
    let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
    assert!(!r.check("FooBot", "/private/x").allowed());
    assert!(r.check("FooBot", "/public").allowed());
}

/// `body` + filler lines so that `tail` starts `before` bytes before the 500 KiB limit.
fn cut_body(head: &str, tail: &str, before: usize) -> Vec<u8> {
    let mut body = head.as_bytes().to_vec();
    body.resize(MAX_ROBOTS_TXT_BYTES - before, b'\n');
    body.extend_from_slice(tail.as_bytes());
    body
}

/// Issue 22.3: a dropped line is noted only where it may have turned the verdict around:
/// in a group that applies to the agent, of the right kind, able to match the path.
#[test]
fn a_dropped_line_is_noted_where_it_may_have_mattered() {
    let head = "User-agent: FooBot\nDisallow: /\n\nUser-agent: *\nDisallow: /\n";
    let robots = RobotsTxt::parse(&cut_body(head, "Allow: /public\n", 9));
    let line = robots.cut_line();
    assert!(line.is_some());
    for profile in Profile::ALL {
        // The dropped line would be in the `*` group: it does not apply to FooBot.
        let v = robots.check_with(profile, "FooBot", "/private");
        assert!(!v.allowed() && v.cut_line().is_none(), "[{profile}] {v}");
        // It applies to BarBot, and may have allowed /private ...
        let v = robots.check_with(profile, "BarBot", "/private");
        assert!(!v.allowed(), "[{profile}] {v}");
        assert_eq!(v.cut_line(), line, "[{profile}] {v}");
        let n = line.unwrap_or_default();
        assert_eq!(
            v.to_string(),
            format!(
                "line 5: disallow: / (robots.txt is over 500 KiB: line {n}, cut by the limit and dropped, \
                 may have been a rule for this path)"
            )
        );
        // ... but not /x (it starts "Allow: /p").
        assert_eq!(robots.check_with(profile, "BarBot", "/x").cut_line(), None, "[{profile}]");
    }
    // An allow can only turn a disallow around; a disallow an allow.
    let robots = RobotsTxt::parse(&cut_body("User-agent: *\nAllow: /\n", "Disallow: /private\n", 12));
    assert_eq!(robots.check("BarBot", "/private").cut_line(), robots.cut_line());
    assert!(robots.cut_line().is_some());
    let robots = RobotsTxt::parse(&cut_body("User-agent: *\nAllow: /\n", "Allow: /private\n", 9));
    assert_eq!(robots.check("BarBot", "/private").cut_line(), None);
    // A line that cannot be a rule: never noted.
    for tail in ["User-agent: FooBot\n", "Sitemap: https://example.com/s.xml\n", "# Allow: /\n"] {
        let robots = RobotsTxt::parse(&cut_body("User-agent: *\nDisallow: /\n", tail, 9));
        assert!(robots.cut_line().is_some(), "{tail:?}");
        assert_eq!(robots.check("BarBot", "/private").cut_line(), None, "{tail:?}");
    }
}
