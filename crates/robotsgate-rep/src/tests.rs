use super::*;

#[test]
fn smoke() {
    let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
    assert!(!r.check("FooBot", "/private/x").allowed());
    assert!(r.check("FooBot", "/public").allowed());
}

/// Pacing hints: each with its line, the longest winning, request-rate windows by time
/// of day, per-agent attribution of crawl-delay, and junk values noted once per line.
#[test]
fn pace_hints_cite_their_lines() {
    let body = "User-agent: a\nCrawl-delay: 5\nUser-agent: b\nCrawl-delay: 0.5\nRequest-rate: 1/2s\nDisallow: /p\n\n\
                User-agent: *\nRequest-rate: 1/10s 0600-1800\nRequest-rate: 1/20s 1800-0600\n\
                Crawl-delay: 12\nCrawl-delay: fast\nRequest-rate: 1/0s\nDisallow: /x\n";
    let r = RobotsTxt::parse(body.as_bytes());
    assert!(r.has_pace_hints());
    let noon = 12 * 60;
    for profile in Profile::ALL {
        let a = r.pace_with(profile, "A", noon).unwrap();
        assert_eq!((a.delay, a.line, a.source), (5.0, 2, PaceSource::CrawlDelay), "{profile}");
        assert_eq!(a.to_string(), "line 2: crawl-delay: 5");
        // b's own crawl-delay is 0.5; the group's request-rate (1 per 2 s) is longer.
        let b = r.pace_with(profile, "b", noon).unwrap();
        assert_eq!((b.delay, b.line), (2.0, 5), "{profile}");
        assert_eq!(b.to_string(), "line 5: request-rate: 1/2s");
        // Others: the `*` group: crawl-delay 12 against the window's rate.
        let day = r.pace_with(profile, "other", noon).unwrap();
        assert_eq!((day.delay, day.line, day.source), (12.0, 11, PaceSource::CrawlDelay));
        let night = r.pace_with(profile, "other", 23 * 60).unwrap();
        assert_eq!((night.delay, night.line), (20.0, 10));
        assert_eq!(night.to_string(), "line 10: request-rate: 1/20s 1800-0600");
        assert_eq!(r.crawl_delay_with(profile, "other"), Some(12.0));
    }
    let ignored: Vec<String> = r.ignored_pace_values().iter().map(ToString::to_string).collect();
    assert_eq!(
        ignored,
        [
            "line 12: crawl-delay value not understood, ignored",
            "line 13: request-rate value not understood, ignored"
        ]
    );
    // No hints anywhere: nothing to pace, cheaply.
    let plain = RobotsTxt::parse(b"User-agent: *\nDisallow: /x\n");
    assert!(!plain.has_pace_hints());
    assert_eq!(plain.pace_with(Profile::Conservative, "a", 0), None);
    // A hint outside any group paces no one; only junk is not a hint.
    let stray = RobotsTxt::parse(b"Crawl-delay: 10\nUser-agent: *\nCrawl-delay: x\n");
    assert!(!stray.has_pace_hints());
    assert_eq!(stray.ignored_pace_values().len(), 1);
}

/// The readings differ on keys: Google reads `crawl-delay` after `useragent` (a typo it
/// accepts), the strict reading does not; the conservative profile takes the longer.
#[test]
fn pace_hints_under_each_profile() {
    let r = RobotsTxt::parse(b"useragent: a\nCrawl-delay: 7\n\nUser-agent: a\nRequest-rate: 1/3s\n");
    let of = |p| r.pace_with(p, "a", 0).map(|h| (h.delay, h.line));
    assert_eq!(of(Profile::Google), Some((7.0, 2)));
    assert_eq!(of(Profile::Rfc), Some((3.0, 5)));
    assert_eq!(of(Profile::Conservative), Some((7.0, 2)));
}

/// A file of nothing but junk values keeps a bounded note of them.
#[test]
fn ignored_pace_values_are_bounded() {
    let mut body = String::from("User-agent: *\n");
    for _ in 0..1000 {
        body.push_str("Crawl-delay: soon\n");
    }
    let r = RobotsTxt::parse(body.as_bytes());
    assert_eq!(r.ignored_pace_values().len(), 64);
    assert_eq!(r.ignored_pace_values()[0].line, 2);
    assert!(!r.has_pace_hints());
}

/// `body` + filler lines so that `tail` starts `before` bytes before the 500 KiB limit.
fn cut_body(head: &str, tail: &str, before: usize) -> Vec<u8> {
    let mut body = head.as_bytes().to_vec();
    body.resize(MAX_ROBOTS_TXT_BYTES - before, b'\n');
    body.extend_from_slice(tail.as_bytes());
    body
}

/// The beginning of a longer file (`parse_truncated`, what a fetcher keeps: the first
/// 500 KiB) reads as the whole file does, wherever the limit falls around a line: before
/// it, inside it, on its line break. The one case it cannot tell (the line break is the
/// first byte not kept) drops the line. Before, the kept part read as a whole file: a
/// cut `Disallow: /private` was the rule `Disallow: /p`.
#[test]
fn the_beginning_of_a_longer_file_reads_as_the_whole_file() {
    for tail in ["Disallow: /private\n", "Allow: /public\r\n", "Disallow: /p\rAllow: /\n"] {
        for before in 0..tail.len() {
            let file = cut_body("User-agent: *\nDisallow: /nothing\n", tail, before);
            let whole = RobotsTxt::parse(&file);
            let kept = RobotsTxt::parse_truncated(&file[..MAX_ROBOTS_TXT_BYTES]);
            let break_is_next = matches!(file[MAX_ROBOTS_TXT_BYTES], b'\n' | b'\r')
                && !matches!(file[MAX_ROBOTS_TXT_BYTES - 1], b'\n' | b'\r');
            let what = format!("{tail:?}, {before} bytes before the limit");
            if break_is_next {
                assert_eq!(whole.cut_line(), None, "{what}");
                assert!(kept.cut_line().is_some(), "{what}: taken as cut");
                continue;
            }
            assert_eq!(kept.cut_line(), whole.cut_line(), "{what}");
            for path in ["/public", "/private", "/p", "/x"] {
                for profile in Profile::ALL {
                    let (w, k) =
                        (whole.check_with(profile, "Bot", path), kept.check_with(profile, "Bot", path));
                    assert_eq!(
                        (k.allowed(), k.cut_line()),
                        (w.allowed(), w.cut_line()),
                        "{what}, {path} [{profile}]"
                    );
                }
            }
            // Read as a whole file instead, the kept part of a cut rule is a rule.
            if tail == "Disallow: /private\n" && before == "Disallow: /p".len() {
                assert!(!RobotsTxt::parse(&file[..MAX_ROBOTS_TXT_BYTES]).check("Bot", "/public").allowed());
            }
        }
    }
    // Ending with a line break: nothing cut. A short beginning (a fetcher's smaller limit).
    assert_eq!(RobotsTxt::parse_truncated(b"User-agent: *\nDisallow: /a\n").cut_line(), None);
    let short = RobotsTxt::parse_truncated(b"User-agent: *\nDisallow: /a\nDisallow: /b");
    assert_eq!(short.cut_line(), Some(3));
    assert!(short.check("Bot", "/b").allowed() && !short.check("Bot", "/a").allowed());
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

/// A raw `\` in a request path (a request line may carry one; a URL's parser reads it as
/// `/` already) is read as `/` by the conservative profile, as `%5C` is: servers that take
/// `\` for `/` serve `/private/x` for `/private\x`. Google's and RFC 9309's readings match
/// literally. (Before, only `%5C` was.)
#[test]
fn a_raw_backslash_in_a_path_is_a_slash_to_the_conservative_profile() {
    let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /private/\n");
    for path in ["/private\\x", "/\\private/x", "/private%5Cx"] {
        let v = r.check_with(Profile::Conservative, "FooBot", path);
        assert!(!v.allowed(), "{path}: {v}");
        assert!(v.to_string().contains("%5C or \\ is read as /"), "{path}: {v}");
        for profile in [Profile::Google, Profile::Rfc] {
            assert!(r.check_with(profile, "FooBot", path).allowed(), "{path} {profile}");
        }
    }
    // In the query, it is not the path.
    assert!(r.check_with(Profile::Conservative, "FooBot", "/a?x=\\private/").allowed());
}
