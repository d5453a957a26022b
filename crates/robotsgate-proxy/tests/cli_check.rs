//! `robotsgate check`, the real binary: every valid URL is answered when some are invalid
//! (issue 22), in text and `--json`, with `--robots` and live against a loopback origin;
//! the exit status (0 all allowed, 1 some disallowed, 2 some invalid, which wins); what is
//! no http(s) URL at all is refused with a reason, every URL a browser accepts is answered
//! (issue 31.1); `//` paths are paths.

mod support;

use std::io::Write;
use std::process::{Command, Output, Stdio};

use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str = "User-agent: *\nDisallow: /private\nDisallow: //a\n";

/// `robotsgate check --robots - --agent ExampleBot ARGS...` with `robots` on stdin.
fn check_with_robots(robots: &str, args: &[&str]) -> Output {
    let mut child = Command::new(BIN)
        .args(["check", "--robots", "-", "--agent", "ExampleBot"])
        .args(args)
        .env("NO_COLOR", "1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn robotsgate");
    // A usage error ends the process before it reads stdin: the write may then fail (EPIPE).
    let _ = child.stdin.take().expect("stdin").write_all(robots.as_bytes());
    child.wait_with_output().expect("robotsgate check")
}

fn stdout_lines(out: &Output) -> Vec<String> {
    String::from_utf8_lossy(&out.stdout).lines().map(str::to_owned).collect()
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

/// What is no http(s) URL at all (issue 22's invalid URLs among them), each with the
/// reason given.
const INVALID: &[(&str, &str)] = &[
    ("http://exa mple.com/a", "invalid host \"exa mple.com\""),
    ("http://[::1];p", "invalid host \"[::1];p\""),
    ("http://example.com:8080;p", "invalid port \"8080;p\""),
    ("example.com/a", "no scheme"),
    ("//example.com/a", "no scheme"),
    ("http://", "no host"),
    ("http://user@/a", "no host"),
    ("ftp://example.com/a", "unsupported scheme"),
];

#[test]
fn every_valid_url_is_answered_and_the_invalid_ones_reported() {
    let mut args = vec!["http://example.com/public", "http://example.com/private/x"];
    args.extend(INVALID.iter().map(|(url, _)| *url));
    args.push("http://example.com/last");
    let out = check_with_robots(ROBOTS, &args);
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), args.len(), "one line per URL: {lines:#?}");
    assert_eq!(lines[0], "allowed http://example.com/public no rule matched");
    assert_eq!(lines[1], "disallowed http://example.com/private/x line 2: disallow: /private");
    for (line, (url, why)) in lines[2..].iter().zip(INVALID) {
        assert!(line.starts_with(&format!("invalid {url:?}: ")), "{line}");
        assert!(line.contains(why), "{url}: {line} does not say {why:?}");
    }
    assert_eq!(lines.last().map(String::as_str), Some("allowed http://example.com/last no rule matched"));
    // Invalid input wins over "disallowed".
    assert_eq!(code(&out), 2);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("{} invalid URLs of {}", INVALID.len(), args.len())), "{stderr}");
}

#[test]
fn json_has_one_object_per_url_with_an_error_for_the_invalid_ones() {
    let urls = ["http://example.com/private", "http://exa mple.com/a", "http://example.com//a/b"];
    let out = check_with_robots(ROBOTS, &[&["--json"][..], &urls].concat());
    let objects: Vec<serde_json::Value> =
        stdout_lines(&out).iter().map(|l| serde_json::from_str(l).expect("a JSON object per line")).collect();
    assert_eq!(objects.len(), 3);
    for (o, url) in objects.iter().zip(urls) {
        assert_eq!(o["url"], url);
    }
    assert_eq!(objects[0]["allowed"], false);
    assert!(objects[0].get("error").is_none());
    assert!(objects[1]["allowed"].is_null());
    assert!(
        objects[1]["error"].as_str().is_some_and(|e| e.contains("invalid host \"exa mple.com\"")),
        "{}",
        objects[1]
    );
    // The path of http://example.com//a/b is //a/b, which Disallow: //a matches.
    assert_eq!(objects[2]["allowed"], false, "{}", objects[2]);
    assert_eq!(objects[2]["rule"]["pattern"], "//a");
    assert_eq!(code(&out), 2);
}

/// Issue 31.1: URLs browsers, crawlers and Google's library accept are answered, in each
/// profile as that profile reads them: `google` compares the path as written with the rules
/// as Google's parser escapes them (a raw `ツ` does not match `Allow: /foo/bar/ツ`), `rfc`
/// percent-encodes both, `conservative` needs both. A stray `%` is no error either.
#[test]
fn urls_browsers_accept_are_answered_in_each_profile() {
    let robots = "User-agent: *\nDisallow: /\nAllow: /foo/bar/\u{30c4}\nAllow: /%%41\nAllow: /a%4\n";
    let raw = "http://example.com/foo/bar/\u{30c4}";
    let encoded = "http://example.com/foo/bar/%E3%83%84";
    let backslashes = "http:\\\\example.com\\foo\\bar\\%E3%83%84";
    let stray = ["http://example.com/%%41", "http://example.com/a%4", "http://example.com/%zz"];
    for (profile, raw_allowed) in [("google", false), ("rfc", true), ("conservative", false)] {
        let mut args = vec!["--profile", profile, raw, encoded, backslashes];
        args.extend(stray);
        let out = check_with_robots(robots, &args);
        let lines = stdout_lines(&out);
        assert_eq!(lines.len(), 6, "{profile}: {lines:#?}\n{}", String::from_utf8_lossy(&out.stderr));
        let word = |allowed| if allowed { "allowed" } else { "disallowed" };
        assert!(lines[0].starts_with(&format!("{} {raw} ", word(raw_allowed))), "{profile}: {}", lines[0]);
        assert!(lines[1].starts_with(&format!("allowed {encoded} line 3: allow: /foo/bar/")), "{}", lines[1]);
        assert!(lines[2].starts_with(&format!("allowed {backslashes} line 3")), "{profile}: {}", lines[2]);
        assert!(lines[3].starts_with(&format!("allowed {} line 4: allow: /%%41", stray[0])), "{}", lines[3]);
        assert!(lines[4].starts_with(&format!("allowed {} line 5: allow: /a%4", stray[1])), "{}", lines[4]);
        assert!(
            lines[5].starts_with(&format!("disallowed {} line 2: disallow: /", stray[2])),
            "{}",
            lines[5]
        );
        assert_eq!(code(&out), 1, "{profile}: answered, some disallowed");
    }
}

#[test]
fn exit_status_0_allowed_1_disallowed_2_invalid() {
    let ok = "http://example.com/public";
    let no = "http://example.com/private";
    let bad = "http://example.com:8080;p";
    for (urls, expect) in [
        (vec![ok], 0),
        (vec![ok, ok], 0),
        (vec![ok, no], 1),
        (vec![no], 1),
        (vec![bad], 2),
        (vec![ok, bad], 2),
        (vec![no, bad], 2),
        (vec![bad, no], 2),
    ] {
        for json in [false, true] {
            let args: Vec<&str> = if json { [&["--json"][..], &urls].concat() } else { urls.clone() };
            let out = check_with_robots(ROBOTS, &args);
            assert_eq!(code(&out), expect, "{args:?}: {}", String::from_utf8_lossy(&out.stderr));
            assert_eq!(stdout_lines(&out).len(), urls.len(), "{args:?}");
        }
    }
}

#[test]
fn usage_errors_still_stop_before_any_answer() {
    let out = Command::new(BIN)
        .args([
            "check",
            "--robots",
            "/nonexistent/robots.txt",
            "--agent",
            "ExampleBot",
            "http://example.com/",
        ])
        .output()
        .expect("robotsgate check");
    assert_eq!(code(&out), 2);
    assert!(out.stdout.is_empty());
    let out = check_with_robots(ROBOTS, &["--agent", "MJ12bot", "http://example.com/"]);
    assert_eq!(code(&out), 2);
    assert!(out.stdout.is_empty());
}

/// `--purpose` (issue 19): the site's usage preferences for allowed URLs; a "no" is
/// `usage-refused` and exit 1; the JSON object carries the usage check.
#[test]
fn purpose_shows_the_usage_preferences() {
    let robots =
        "User-agent: *\nDisallow: /private\nContent-Usage: /ai/ train-ai=n\nContent-Signal: search=yes\n";
    let (ai, page) = ("http://example.com/ai/x", "http://example.com/page");
    let out = check_with_robots(robots, &["--purpose", "train-ai", ai, page]);
    let lines = stdout_lines(&out);
    assert_eq!(
        lines[0],
        "usage-refused http://example.com/ai/x no rule matched; purpose train-ai: train-ai: disallowed \
         (line 3: content-usage: /ai/ train-ai=n)"
    );
    assert_eq!(
        lines[1],
        "allowed http://example.com/page no rule matched; purpose train-ai: train-ai: unknown"
    );
    assert_eq!(code(&out), 1);
    // Strict about unknown preferences; search=yes lets search through.
    let out = check_with_robots(robots, &["--purpose", "search,train-ai", "--unknown", "refuse", page]);
    assert!(stdout_lines(&out)[0].starts_with("usage-refused "), "{:?}", stdout_lines(&out));
    let out = check_with_robots(robots, &["--purpose", "search", "--unknown", "refuse", page]);
    assert_eq!(code(&out), 0, "{:?}", stdout_lines(&out));
    let out = check_with_robots(robots, &["--json", "--purpose", "train-ai", ai]);
    let o: serde_json::Value = serde_json::from_str(&stdout_lines(&out)[0]).unwrap();
    assert_eq!(o["outcome"], "usage-refused", "{o}");
    assert_eq!(o["usage"]["preferences"][0]["content_usage"]["line"], 3, "{o}");
    // Without --purpose, nothing changes; a wrong category is a usage error.
    assert_eq!(
        stdout_lines(&check_with_robots(robots, &[ai]))[0],
        "allowed http://example.com/ai/x no rule matched"
    );
    assert_eq!(code(&check_with_robots(robots, &["--purpose", "ai-train", ai])), 2);
}

#[test]
fn help_states_the_exit_statuses() {
    let out = Command::new(BIN).args(["check", "--help"]).output().expect("robotsgate check --help");
    let help = String::from_utf8_lossy(&out.stdout);
    for needle in
        ["Exit status:", "0  every URL is allowed", "1  some URL is disallowed", "2  some URL is invalid"]
    {
        assert!(help.contains(needle), "{needle:?} not in:\n{help}");
    }
}

/// Live mode: the origin's robots.txt is fetched (once) and the valid URLs are answered
/// around the invalid ones.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_mode_answers_every_valid_url() {
    let server = TestOrigin::robots(ROBOTS).await;
    let base = server.base_as("example.test");
    let urls = [
        format!("{base}/public"),
        "http://exa mple.com/a".to_owned(),
        format!("{base}/private/x"),
        format!("{base}//a/b"),
    ];
    let mut cmd = tokio::process::Command::new(BIN);
    cmd.args(["check", "--agent", "ExampleBot", "--resolve", "example.test=127.0.0.1", "--timeout", "5"])
        .args(&urls)
        .env("NO_COLOR", "1")
        .kill_on_drop(true);
    let out = bounded("robotsgate check (live)", cmd.output()).await.expect("robotsgate check");
    let lines = stdout_lines(&out);
    assert_eq!(lines.len(), 4, "{lines:#?}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(lines[0].starts_with(&format!("allowed {} no rule matched", urls[0])), "{}", lines[0]);
    assert!(lines[1].starts_with("invalid \"http://exa mple.com/a\": "), "{}", lines[1]);
    assert!(
        lines[2].starts_with(&format!("disallowed {} line 2: disallow: /private", urls[2])),
        "{}",
        lines[2]
    );
    assert!(lines[3].starts_with(&format!("disallowed {} line 3: disallow: //a", urls[3])), "{}", lines[3]);
    assert_eq!(code(&out), 2);
    assert_eq!(server.hits("/robots.txt"), 1);
}

/// What robots.txt and the URLs hold comes from strangers: the control characters a
/// terminal acts on are shown as escapes, not sent (before, a rule's `ESC [2K` reached the
/// terminal, which erased the line). A timeout no `Duration` holds is a
/// usage error, not a panic.
#[test]
fn control_characters_reach_no_terminal_and_a_huge_timeout_is_refused() {
    let out = check_with_robots(
        "User-agent: *\nDisallow: /esc\u{1b}[2K\u{7}\n",
        &["http://example.com/esc%1B%5B2K%07"],
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("disallowed"), "{text:?}");
    assert!(text.contains("/esc\\u{1b}[2K\\u{7}"), "{text:?}");
    assert!(!text.contains('\u{1b}') && !text.contains('\u{7}'), "{text:?}");
    let out = Command::new(BIN)
        .args(["check", "--agent", "ExampleBot", "--timeout", "1e20", "http://127.0.0.1:1/x"])
        .output()
        .expect("robotsgate check");
    assert_eq!(code(&out), 2, "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--timeout"), "{out:?}");
}
