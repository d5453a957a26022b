//! The Robots Exclusion Protocol engine: parsing robots.txt files and matching paths
//! against them, under RFC 9309 and under Google's interpretation. Pure: no I/O, no
//! async, no panics on any input.
//!
//! A [`RobotsTxt`] is parsed once ([`RobotsTxt::parse`] never fails) and checked many
//! times, from any thread. Each check returns a [`Verdict`] that says what decided it.
//!
//! ```
//! use robotsgate_rep::{Profile, RobotsTxt};
//!
//! let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\nAllow: /private/press\n");
//! let v = robots.check("ExampleBot", "/private/report.pdf");
//! assert!(!v.allowed());
//! assert_eq!(v.to_string(), "line 2: disallow: /private");
//! assert!(robots.check("ExampleBot", "/private/press/2024").allowed());
//! // Google reads `disalow` as `disallow`; a strict RFC 9309 reading does not.
//! let typo = RobotsTxt::parse(b"User-agent: *\ndisalow: /x\n");
//! assert!(!typo.check_with(Profile::Google, "ExampleBot", "/x").allowed());
//! assert!(typo.check_with(Profile::Rfc, "ExampleBot", "/x").allowed());
//! assert!(!typo.check("ExampleBot", "/x").allowed()); // conservative: both must allow
//! ```
//!
//! # Profiles
//! - [`Profile::Google`]: what Google's open-source parser and matcher decide, with
//!   Google's documented 500 KiB limit.
//! - [`Profile::Rfc`]: a strict reading of RFC 9309 (exact keys and product tokens, rule
//!   and path normalised the same way, `/robots.txt` always allowed).
//! - [`Profile::Conservative`] (the default): allowed only when both readings allow, so
//!   a site owner's rule is obeyed however it is spelled; and, since many origin servers
//!   decode `%2F`, take `\` for `/` or merge slashes, only when both readings also allow
//!   the path as such a server sees it ([`server_path`]): `//private/x` and
//!   `/private%2Fx` are disallowed by `Disallow: /private/`. `google` and `rfc` match the
//!   path as it is, as RFC 9309 and Google do.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod aho;
mod bytes;
mod cut;
mod matcher;
pub mod pace;
pub mod parser;
mod pattern;
mod precedence;
mod reading;
pub mod sf;
mod url;
pub mod usage;

use std::fmt;
use std::str::FromStr;

pub use pace::{IgnoredValue, PaceHint, PaceSource, TimeWindow};
pub use parser::{MAX_ROBOTS_TXT_BYTES, Reading, product_token};
pub use url::{HttpUrl, ServerPath, path_of_url, server_path, split_http_url};

use precedence::Hit;
use reading::{Applied, NO_SET, Parsed, ReadingData};
use usage::{Category, CategoryUsage, Stated, Usage, UsageLine};

/// How to read robots.txt files. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// Google's open-source parser and matcher.
    Google,
    /// A strict RFC 9309 reading.
    Rfc,
    /// Allowed only when both readings allow, the path as it is and its [`server_path`].
    #[default]
    Conservative,
}

impl Profile {
    /// All profiles, in a stable order.
    pub const ALL: [Profile; 3] = [Profile::Google, Profile::Rfc, Profile::Conservative];

    /// The profile's name as used in configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Profile::Google => "google",
            Profile::Rfc => "rfc",
            Profile::Conservative => "conservative",
        }
    }
}

impl fmt::Display for Profile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An unknown profile name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownProfile(pub String);

impl fmt::Display for UnknownProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown profile {:?}: expected google, rfc or conservative", self.0)
    }
}

impl std::error::Error for UnknownProfile {}

impl FromStr for Profile {
    type Err = UnknownProfile;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "google" => Ok(Profile::Google),
            "rfc" => Ok(Profile::Rfc),
            "conservative" => Ok(Profile::Conservative),
            _ => Err(UnknownProfile(s.to_owned())),
        }
    }
}

/// Allow or disallow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RuleKind {
    /// `allow:`
    Allow,
    /// `disallow:`
    Disallow,
}

impl RuleKind {
    /// `"allow"` or `"disallow"`.
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Allow => "allow",
            RuleKind::Disallow => "disallow",
        }
    }
}

/// Whether `token` is a valid RFC 9309 product token: one or more of `a-zA-Z_-`.
///
/// ```
/// assert!(robotsgate_rep::is_valid_product_token("Example-Bot"));
/// assert!(!robotsgate_rep::is_valid_product_token("MJ12bot"));
/// ```
pub fn is_valid_product_token(token: &str) -> bool {
    !token.is_empty() && token.bytes().all(|b| b.is_ascii_alphabetic() || b == b'-' || b == b'_')
}

/// Options for [`RobotsTxt::parse_with`].
#[derive(Debug, Clone, Copy)]
pub struct ParseOptions {
    /// A group with this many rules with inner wildcards (or more) matches them with one
    /// automaton pass instead of rule by rule. Both are linear; this only tunes speed.
    pub automaton_min_rules: usize,
}

impl Default for ParseOptions {
    fn default() -> Self {
        ParseOptions { automaton_min_rules: aho::DEFAULT_AUTOMATON_MIN_RULES }
    }
}

/// A parsed robots.txt file. Cheap to check, `Send + Sync`, immutable.
#[derive(Debug)]
pub struct RobotsTxt {
    parsed: Parsed,
}

impl RobotsTxt {
    /// Parses a robots.txt body. Never fails: what cannot be read is ignored, and only
    /// the first [`MAX_ROBOTS_TXT_BYTES`] count (a line that the limit cuts is dropped:
    /// [`RobotsTxt::cut_line`]).
    pub fn parse(body: &[u8]) -> RobotsTxt {
        Self::parse_with(body, ParseOptions::default())
    }

    /// [`RobotsTxt::parse`] with options.
    pub fn parse_with(body: &[u8], options: ParseOptions) -> RobotsTxt {
        RobotsTxt { parsed: Parsed::parse(body, false, options.automaton_min_rules) }
    }

    /// [`RobotsTxt::parse`] of the beginning of a longer file: `body` is what was kept of
    /// it (a fetcher keeps the first [`MAX_ROBOTS_TXT_BYTES`] and drops the rest). Its last
    /// line may have been cut there, and is dropped as a line the limit cuts is
    /// ([`RobotsTxt::cut_line`]) unless `body` ends with a line break: its first part
    /// could read as a rule nobody wrote (`Disallow: /private` kept as `Disallow: /p`).
    ///
    /// Without the byte after `body`, one case reads differently from the whole file: a
    /// line whose line break was that byte is dropped too.
    ///
    /// ```
    /// use robotsgate_rep::{MAX_ROBOTS_TXT_BYTES, RobotsTxt};
    ///
    /// let mut file = b"User-agent: *\nDisallow: /nothing\n".to_vec();
    /// file.resize(MAX_ROBOTS_TXT_BYTES - 12, b'\n');
    /// file.extend_from_slice(b"Disallow: /private\n"); // the limit falls after "/p"
    /// let kept = &file[..MAX_ROBOTS_TXT_BYTES];
    /// // Read as a whole file, what was kept ends in a rule nobody wrote.
    /// assert!(!RobotsTxt::parse(kept).check("ExampleBot", "/public").allowed());
    /// // Read as the beginning of a longer file, as the whole file reads.
    /// let robots = RobotsTxt::parse_truncated(kept);
    /// assert!(robots.check("ExampleBot", "/public").allowed());
    /// assert_eq!(robots.cut_line(), RobotsTxt::parse(&file).cut_line());
    /// ```
    pub fn parse_truncated(body: &[u8]) -> RobotsTxt {
        RobotsTxt { parsed: Parsed::parse(body, true, ParseOptions::default().automaton_min_rules) }
    }

    /// Checks `path` (path and query of the URL, e.g. `/a/b?c`) for the crawler whose
    /// product token is `agent`, under the default ([`Profile::Conservative`]) profile.
    /// A `User-Agent` given as `agent` is checked for the token it starts with
    /// ([`product_token`]: `ExampleBot/1.0` as `ExampleBot`).
    ///
    /// `path` is a path when it starts with `/`, and is then matched as it is (without a
    /// `#fragment`): `//a/b`, the path of `http://example.com//a/b`, is matched as `//a/b`.
    /// Anything else is not a path and is read as a URL, as Google's library reads one
    /// ([`path_of_url`]): `http://example.com/a?q` is checked as `/a?q`, `?q` as `/?q`, the
    /// empty string as `/`. To check a URL that you have, pass the path [`split_http_url`]
    /// finds in it: the path of the request a browser makes for that URL, its characters as
    /// written (so each profile reads them its way).
    ///
    /// ```
    /// use robotsgate_rep::{Profile, RobotsTxt, split_http_url};
    ///
    /// let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: //a\n");
    /// let url = split_http_url("http://example.com//a/b").unwrap();
    /// assert_eq!(url.path, "//a/b");
    /// assert!(!robots.check_with(Profile::Google, "FooBot", &url.path).allowed());
    ///
    /// // Raw non-ASCII: Google's library compares it with the rule as written, which its
    /// // parser percent-encodes, so the google profile does not match; rfc encodes both.
    /// let robots = RobotsTxt::parse("User-agent: *\nDisallow: /\nAllow: /foo/bar/\u{30c4}\n".as_bytes());
    /// let url = split_http_url("http://example.com/foo/bar/\u{30c4}").unwrap();
    /// assert!(!robots.check_with(Profile::Google, "FooBot", &url.path).allowed());
    /// assert!(robots.check_with(Profile::Rfc, "FooBot", &url.path).allowed());
    /// assert!(!robots.check("FooBot", &url.path).allowed()); // conservative: both must allow
    /// ```
    pub fn check(&self, agent: &str, path: &str) -> Verdict<'_> {
        self.check_with(Profile::default(), agent, path)
    }

    /// [`RobotsTxt::check`] under a chosen profile.
    pub fn check_with(&self, profile: Profile, agent: &str, path: &str) -> Verdict<'_> {
        let path = url::normalize_request_path(path);
        match profile {
            Profile::Google => self.verdict(profile, Reading::Google, agent, path.as_bytes()),
            Profile::Rfc => {
                let (canonical, _) = pattern::canonical_path_and_forms(path.as_bytes());
                self.rfc_verdict(profile, agent, &canonical)
            }
            Profile::Conservative => {
                // The pass that brings the path to its RFC form also finds its server
                // forms, so a path without them costs nothing more.
                let (canonical, forms) = pattern::canonical_path_and_forms(path.as_bytes());
                let v = self.both_readings(agent, path.as_bytes(), &canonical);
                if v.allowed && forms { self.server_form(agent, &path, v) } else { v }
            }
        }
    }

    /// Conservative profile: `v`, allowed for `path` as it is, or the verdict on the
    /// path's server form if that is disallowed. Out of line: few paths get here.
    #[cold]
    #[inline(never)]
    fn server_form<'a>(&'a self, agent: &str, path: &str, mut v: Verdict<'a>) -> Verdict<'a> {
        let Some(server) = url::server_path(path) else { return v };
        let (canonical, _) = pattern::canonical_path_and_forms(server.path.as_bytes());
        let mut w = self.both_readings(agent, server.path.as_bytes(), &canonical);
        if !w.allowed {
            let cut = w.cut_line();
            w.notes = Some(Box::new(Notes { server: Some(server), cut }));
            return w;
        }
        // A dropped line may have disallowed the server form.
        if let (None, Some(line)) = (v.cut_line(), w.cut_line()) {
            v.set_cut_line(line);
        }
        v
    }

    /// The conservative verdict on `path` as it is (`canonical`: its RFC form): allowed
    /// only when both readings allow.
    #[inline]
    fn both_readings(&self, agent: &str, path: &[u8], canonical: &[u8]) -> Verdict<'_> {
        let profile = Profile::Conservative;
        let rfc = self.rfc_verdict(profile, agent, canonical);
        if rfc.decided.is_robots_txt() {
            return rfc;
        }
        let google = self.verdict(profile, Reading::Google, agent, path);
        let split = rfc.allowed != google.allowed;
        let other_cut = if !google.allowed && rfc.allowed { rfc.cut_line() } else { google.cut_line() };
        let mut v = if !google.allowed && rfc.allowed { google } else { rfc };
        v.split = split;
        if let (None, Some(line)) = (v.cut_line(), other_cut) {
            v.set_cut_line(line);
        }
        v
    }

    /// The RFC reading's verdict on a path in its RFC form.
    #[inline]
    fn rfc_verdict(&self, profile: Profile, agent: &str, canonical: &[u8]) -> Verdict<'_> {
        let path_only = canonical.split(|&b| b == b'?').next().unwrap_or_default();
        if path_only == b"/robots.txt" {
            return Verdict {
                allowed: true,
                profile,
                split: false,
                decided: Decided::RobotsTxt,
                notes: None,
            };
        }
        self.verdict(profile, Reading::Rfc, agent, canonical)
    }

    fn reading(&self, reading: Reading) -> &ReadingData {
        match reading {
            Reading::Google => &self.parsed.google,
            Reading::Rfc => &self.parsed.rfc,
        }
    }

    fn verdict(&self, profile: Profile, reading: Reading, agent: &str, path: &[u8]) -> Verdict<'_> {
        let data = self.reading(reading);
        let applied = data.applied(agent);
        let best = self.parsed.eval(applied, path);
        let (allowed, hit) = best.allowed();
        let decided = Decided::Rules { robots: self, reading, applied, hit: hit.map(|h| h.1) };
        let notes = match &self.parsed.cut {
            None => None,
            Some(cut) => Self::cut_note(cut, reading, applied.groups, allowed, &self.parsed.arena, path),
        };
        Verdict { allowed, profile, split: false, decided, notes }
    }

    /// The note for a verdict of `reading` when the line the limit cut may have changed
    /// it. Out of line: only files over the limit get here.
    #[cold]
    #[inline(never)]
    fn cut_note(
        cut: &cut::CutLine,
        reading: Reading,
        applied: &[u32],
        allowed: bool,
        arena: &[u8],
        path: &[u8],
    ) -> Option<Box<Notes>> {
        let rule = cut.rule(reading)?;
        rule.may_matter(applied, allowed, arena, path)
            .then(|| Box::new(Notes { server: None, cut: Some(cut.line) }))
    }

    /// The rule `id` (from a [`MatchedRule`] of this file), as the given reading saw it.
    pub fn rule(&self, id: RuleId, reading: Reading) -> Option<MatchedRule<'_>> {
        self.matched(id, reading)
    }

    fn matched(&self, id: RuleId, reading: Reading) -> Option<MatchedRule<'_>> {
        let info = self.parsed.rules.get(id.0 as usize)?;
        Some(MatchedRule {
            id,
            kind: info.kind,
            pattern: self.parsed.rule_text(info),
            line: info.line,
            reading,
            implied_by_index_html: info.implied,
        })
    }

    /// The site's AI-usage preferences (`Content-Usage` and `Content-Signal` lines; see
    /// [`usage`]) at `path` for the crawler `agent`, under the default profile.
    ///
    /// ```
    /// use robotsgate_rep::RobotsTxt;
    /// use robotsgate_rep::usage::{Category, Preference};
    ///
    /// // The attach draft's example (draft-ietf-aipref-attach-05 §3.4).
    /// let robots = RobotsTxt::parse(
    ///     b"User-Agent: *\nAllow: /\nDisallow: /never/\nContent-Usage: train-ai=n\n\
    ///       Content-Usage: /ai-ok/ train-ai=y\n",
    /// );
    /// let at = |path| robots.usage("ExampleBot", path).get(Category::TrainAi).preference();
    /// assert_eq!(at("/test"), Preference::Disallowed);
    /// assert_eq!(at("/ai-ok/test"), Preference::Allowed);
    /// assert_eq!(at("/never/test"), Preference::Unknown); // not crawlable: no preferences
    /// let u = robots.usage("ExampleBot", "/test");
    /// assert_eq!(u.get(Category::TrainAi).to_string(), "train-ai: disallowed (line 4: content-usage: train-ai=n)");
    /// ```
    pub fn usage(&self, agent: &str, path: &str) -> Usage<'_> {
        self.usage_with(Profile::default(), agent, path)
    }

    /// [`RobotsTxt::usage`] under a chosen profile. The conservative profile takes the more
    /// restrictive answer of both readings (and of the path's [server form](server_path),
    /// when it has one), per form and category. Linear in the path and the lines, like a
    /// check; a file without usage lines costs one check.
    pub fn usage_with(&self, profile: Profile, agent: &str, path: &str) -> Usage<'_> {
        let verdict = self.check_with(profile, agent, path);
        let mut usage = Usage { verdict, categories: Category::ALL.map(CategoryUsage::new) };
        if !usage.verdict.allowed() || self.parsed.usage.is_empty() {
            return usage;
        }
        let path = url::normalize_request_path(path);
        let out = &mut usage.categories;
        match profile {
            Profile::Google => self.usage_of(Reading::Google, agent, path.as_bytes(), out),
            Profile::Rfc => {
                let (canonical, _) = pattern::canonical_path_and_forms(path.as_bytes());
                self.usage_of(Reading::Rfc, agent, &canonical, out);
            }
            Profile::Conservative => {
                let (canonical, forms) = pattern::canonical_path_and_forms(path.as_bytes());
                self.usage_of(Reading::Rfc, agent, &canonical, out);
                self.usage_of(Reading::Google, agent, path.as_bytes(), out);
                if forms && let Some(server) = url::server_path(&path) {
                    let (canonical, _) = pattern::canonical_path_and_forms(server.path.as_bytes());
                    self.usage_of(Reading::Rfc, agent, &canonical, out);
                    self.usage_of(Reading::Google, agent, server.path.as_bytes(), out);
                }
            }
        }
        usage
    }

    /// Merges what `reading`'s lines say at `path` into `out`.
    fn usage_of<'a>(&'a self, reading: Reading, agent: &str, path: &[u8], out: &mut [CategoryUsage<'a>; 3]) {
        let applied = self.reading(reading).applied(agent);
        if applied.usage == NO_SET {
            return;
        }
        for slot in out.iter_mut() {
            let (cu, cs) = self.parsed.usage_eval(applied, slot.category, path).hits();
            if let Some(hit) = cu {
                slot.content_usage.merge(self.stated(hit, slot.category, reading));
            }
            if let Some(hit) = cs {
                slot.content_signal.merge(self.stated(hit, slot.category, reading));
            }
        }
    }

    fn stated(&self, hit: Hit, category: Category, reading: Reading) -> Stated<'_> {
        let index = usage::hit_line(hit.rule);
        let Some(info) = self.parsed.usage.get(index as usize) else { return Stated::default() };
        let line = UsageLine {
            source: info.source,
            line: info.line,
            path: self.parsed.text(info.path),
            value: self.parsed.text(info.value),
            statement: info.statement,
            reading,
        };
        Stated { preference: info.statement.get(category), line: Some(line) }
    }

    /// Whether the file has `Content-Usage` or `Content-Signal` lines at all.
    pub fn has_usage_lines(&self) -> bool {
        !self.parsed.usage.is_empty()
    }

    /// Sitemap URLs listed anywhere in the file, in file order.
    pub fn sitemaps(&self) -> impl ExactSizeIterator<Item = &str> + '_ {
        self.parsed.sitemaps.iter().map(|&s| self.parsed.text(s))
    }

    /// The `crawl-delay` (in seconds) of the groups that apply to `agent`, under the
    /// default profile: the largest of both readings. Not part of RFC 9309 and ignored by
    /// Google; exposed for crawlers that want to honour it.
    pub fn crawl_delay(&self, agent: &str) -> Option<f64> {
        self.crawl_delay_with(Profile::default(), agent)
    }

    /// [`RobotsTxt::crawl_delay`] under a chosen profile.
    pub fn crawl_delay_with(&self, profile: Profile, agent: &str) -> Option<f64> {
        let of = |r: &ReadingData| r.crawl_delay(agent).map(|(d, _)| d);
        match profile {
            Profile::Google => of(&self.parsed.google),
            Profile::Rfc => of(&self.parsed.rfc),
            Profile::Conservative => match (of(&self.parsed.google), of(&self.parsed.rfc)) {
                (Some(a), Some(b)) => Some(a.max(b)),
                (a, b) => a.or(b),
            },
        }
    }

    /// Whether any group has a `crawl-delay` or `request-rate` that could be read: when
    /// not, [`RobotsTxt::pace_with`] is `None` for every agent (a cheap test first).
    pub fn has_pace_hints(&self) -> bool {
        self.parsed.has_pace
    }

    /// What `agent` is asked to wait between requests, with the line that asks it: the
    /// longest of the `crawl-delay` and the `request-rate`s (converted to seconds per
    /// request) of the groups that apply, under `profile` (conservative: the longer of
    /// both readings). A `request-rate` with a time of day counts only when `minute`
    /// (minutes since midnight UTC, `0..1440`) falls in it. See the module [`pace`] for
    /// the accepted values.
    ///
    /// ```
    /// use robotsgate_rep::{PaceSource, Profile, RobotsTxt};
    ///
    /// let robots = RobotsTxt::parse(
    ///     b"User-agent: *\nCrawl-delay: 2\nRequest-rate: 1/10s 0600-1800\nCrawl-delay: soon\n",
    /// );
    /// let noon = robots.pace_with(Profile::Conservative, "ExampleBot", 12 * 60).unwrap();
    /// assert_eq!((noon.delay, noon.line), (10.0, 3));
    /// assert!(matches!(noon.source, PaceSource::RequestRate { requests: 1, .. }));
    /// let night = robots.pace_with(Profile::Conservative, "ExampleBot", 23 * 60).unwrap();
    /// assert_eq!((night.delay, night.line, night.source), (2.0, 2, PaceSource::CrawlDelay));
    /// assert_eq!(robots.ignored_pace_values()[0].line, 4); // "soon" is no number
    /// ```
    pub fn pace_with(&self, profile: Profile, agent: &str, minute: u16) -> Option<PaceHint> {
        if !self.parsed.has_pace {
            return None;
        }
        let of = |r: &ReadingData| r.pace(agent, minute);
        match profile {
            Profile::Google => of(&self.parsed.google),
            Profile::Rfc => of(&self.parsed.rfc),
            Profile::Conservative => match (of(&self.parsed.google), of(&self.parsed.rfc)) {
                (Some(a), Some(b)) => Some(if b.delay > a.delay { b } else { a }),
                (a, b) => a.or(b),
            },
        }
    }

    /// The `crawl-delay` and `request-rate` lines whose values could not be read and were
    /// ignored, in file order (at most the first 64).
    pub fn ignored_pace_values(&self) -> &[IgnoredValue] {
        &self.parsed.ignored
    }

    /// Bytes of the body that were read (at most [`MAX_ROBOTS_TXT_BYTES`]).
    pub fn parsed_bytes(&self) -> usize {
        self.parsed.facts.parsed_bytes
    }

    /// Bytes beyond [`MAX_ROBOTS_TXT_BYTES`] that were ignored.
    pub fn ignored_bytes(&self) -> usize {
        self.parsed.facts.ignored_bytes
    }

    /// The line that the [`MAX_ROBOTS_TXT_BYTES`] limit fell inside, if it did: that line
    /// was dropped, not read in part (its first part could read as a rule nobody wrote:
    /// `Allow: /public` cut to `Allow: /p`). [`Verdict::cut_line`] says when it may have
    /// mattered for a check.
    pub fn cut_line(&self) -> Option<u32> {
        self.parsed.facts.cut_line
    }

    /// Approximate heap memory held by this value, for bounded caches.
    pub fn heap_bytes(&self) -> usize {
        self.parsed.heap_bytes()
    }
}

/// The outcome of one check, and what decided it.
#[derive(Debug, Clone)]
pub struct Verdict<'a> {
    allowed: bool,
    profile: Profile,
    /// Conservative profile: the two readings disagreed.
    split: bool,
    decided: Decided<'a>,
    /// What is rarely there, out of line so that a verdict stays small.
    notes: Option<Box<Notes>>,
}

#[derive(Debug, Clone)]
struct Notes {
    /// Conservative profile: the path as it is was allowed, its server form was not (and
    /// decided).
    server: Option<ServerPath>,
    /// The line the 500 KiB limit cut and dropped, when it may have mattered.
    cut: Option<u32>,
}

#[derive(Debug, Clone, Copy)]
enum Decided<'a> {
    /// `/robots.txt` itself.
    RobotsTxt,
    Rules {
        robots: &'a RobotsTxt,
        reading: Reading,
        applied: Applied<'a>,
        hit: Option<Hit>,
    },
}

impl Decided<'_> {
    fn is_robots_txt(&self) -> bool {
        matches!(self, Decided::RobotsTxt)
    }
}

/// Why a verdict came out as it did: what in the file decided (a rule, no rule, or the
/// path being `/robots.txt`). The library's decisions have their own, wider reason
/// (`robotsgate::policy::Reason`: also a robots.txt that could not be fetched, a refused
/// destination, an override), which carries this one's cases.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VerdictReason<'a> {
    /// A rule matched; the most specific one decided.
    Rule(MatchedRule<'a>),
    /// No rule of the applicable groups matched (or no group applied): allowed.
    NoRuleMatched,
    /// The path is `/robots.txt`, which is always allowed.
    RobotsTxt,
}

/// The rule that decided a verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MatchedRule<'a> {
    /// Which rule of the file this is: [`RobotsTxt::rule`] finds it again.
    pub id: RuleId,
    /// Allow or disallow.
    pub kind: RuleKind,
    /// The pattern as written in the file (after Google's line cut, in that reading).
    pub pattern: &'a str,
    /// 1-based line number.
    pub line: u32,
    /// The reading whose rule this is.
    pub reading: Reading,
    /// Google's `index.html` rule: `allow: /d/index.html` also allows `/d/` itself.
    pub implied_by_index_html: bool,
}

/// Identifies a rule of one [`RobotsTxt`], so a caller can keep a verdict's rule without
/// borrowing the file (see [`RobotsTxt::rule`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RuleId(u32);

/// A group that applied to the agent of a check.
#[derive(Debug, Clone, Copy)]
pub struct GroupRef<'a> {
    /// Line of the group's first `user-agent` line.
    pub line: u32,
    /// The group applied because it names the agent (not through `*`).
    pub specific: bool,
    reading: &'a ReadingData,
    group: &'a reading::GroupData,
}

impl<'a> GroupRef<'a> {
    /// The product tokens the group names, lower-cased as the reading read them (a `*`
    /// line is not listed).
    pub fn agents(&self) -> impl Iterator<Item = &'a str> + 'a {
        self.reading.group_agents(self.group)
    }
}

impl<'a> Verdict<'a> {
    /// Whether the path may be fetched.
    pub fn allowed(&self) -> bool {
        self.allowed
    }

    /// The profile the check ran under.
    pub fn profile(&self) -> Profile {
        self.profile
    }

    /// What decided the verdict.
    pub fn reason(&self) -> VerdictReason<'a> {
        match self.decided {
            Decided::RobotsTxt => VerdictReason::RobotsTxt,
            Decided::Rules { hit: None, .. } => VerdictReason::NoRuleMatched,
            Decided::Rules { robots, reading, hit: Some(hit), .. } => {
                VerdictReason::Rule(robots.matched(RuleId(hit.rule), reading).unwrap_or(MatchedRule {
                    id: RuleId(hit.rule),
                    kind: RuleKind::Disallow,
                    pattern: "",
                    line: 0,
                    reading,
                    implied_by_index_html: false,
                }))
            }
        }
    }

    /// The deciding rule, if a rule decided.
    pub fn rule(&self) -> Option<MatchedRule<'a>> {
        match self.reason() {
            VerdictReason::Rule(r) => Some(r),
            _ => None,
        }
    }

    /// Under the conservative profile: the two readings disagreed, and the verdict is
    /// the disallowing one's.
    pub fn readings_disagree(&self) -> bool {
        self.split
    }

    /// Under the conservative profile: both readings allow the path as it is, but not its
    /// [server form](server_path) (`//private/x` or `/private%2Fx` for
    /// `Disallow: /private/`), which decided the verdict. The rule, reading and groups of
    /// this verdict are those of the server form.
    ///
    /// ```
    /// use robotsgate_rep::{Profile, RobotsTxt};
    ///
    /// let robots = RobotsTxt::parse(b"User-agent: *\nDisallow: /private/\n");
    /// let v = robots.check("ExampleBot", "/private%2Fsecret.html");
    /// assert!(!v.allowed());
    /// assert_eq!(v.server_path().map(|s| s.path.as_str()), Some("/private/secret.html"));
    /// assert_eq!(
    ///     v.to_string(),
    ///     "line 2: disallow: /private/ (as /private/secret.html, once %2F is decoded)"
    /// );
    /// // google and rfc match the path as it is.
    /// assert!(robots.check_with(Profile::Google, "ExampleBot", "/private%2Fsecret.html").allowed());
    /// ```
    pub fn server_path(&self) -> Option<&ServerPath> {
        self.notes.as_ref()?.server.as_ref()
    }

    /// The line that the [`MAX_ROBOTS_TXT_BYTES`] limit fell inside and that was dropped
    /// ([`RobotsTxt::cut_line`]), when it may have changed this verdict: what is left of it
    /// may be the start of a rule (an `allow` when the path is disallowed, a `disallow`
    /// when it is allowed) in a group that applies to the agent, and that rule may match
    /// the path. Only part of the line is known, so this errs towards "may".
    ///
    /// ```
    /// use robotsgate_rep::{MAX_ROBOTS_TXT_BYTES, RobotsTxt};
    ///
    /// let mut body = b"User-agent: *\nDisallow: /\n".to_vec();
    /// body.resize(MAX_ROBOTS_TXT_BYTES - 9, b'\n');
    /// body.extend_from_slice(b"Allow: /public\n"); // cut after "Allow: /p"
    /// let robots = RobotsTxt::parse(&body);
    /// let line = robots.cut_line();
    /// assert!(line.is_some());
    /// // Not read as "Allow: /p": /private stays disallowed.
    /// let v = robots.check("ExampleBot", "/private");
    /// assert!(!v.allowed());
    /// // But the whole line might have allowed it (it may have been "Allow: /private").
    /// assert_eq!(v.cut_line(), line);
    /// assert!(v.to_string().ends_with("may have been a rule for this path)"));
    /// // It could not have allowed /x.
    /// assert_eq!(robots.check("ExampleBot", "/x").cut_line(), None);
    /// ```
    pub fn cut_line(&self) -> Option<u32> {
        self.notes.as_ref()?.cut
    }

    fn set_cut_line(&mut self, line: u32) {
        match &mut self.notes {
            Some(notes) => notes.cut = Some(line),
            None => self.notes = Some(Box::new(Notes { server: None, cut: Some(line) })),
        }
    }

    /// The reading the verdict comes from (`None` for `/robots.txt`).
    pub fn reading(&self) -> Option<Reading> {
        match self.decided {
            Decided::RobotsTxt => None,
            Decided::Rules { reading, .. } => Some(reading),
        }
    }

    /// The groups that applied to the agent, in file order; empty when no group names
    /// the agent and there is no `*` group.
    pub fn groups(&self) -> impl Iterator<Item = GroupRef<'a>> + 'a {
        let (robots, reading, applied) = match self.decided {
            Decided::RobotsTxt => (None, Reading::Rfc, None),
            Decided::Rules { robots, reading, applied, .. } => (Some(robots), reading, Some(applied)),
        };
        applied.into_iter().flat_map(move |a| {
            let data = robots.map(|r| r.reading(reading));
            a.groups.iter().filter_map(move |&g| {
                let reading = data?;
                let group = &reading.groups[g as usize];
                Some(GroupRef { line: group.line, specific: a.specific, reading, group })
            })
        })
    }
}

impl fmt::Display for MatchedRule<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.kind.as_str(), self.pattern)?;
        if self.implied_by_index_html {
            f.write_str(" (also allows its directory)")?;
        }
        Ok(())
    }
}

impl fmt::Display for Verdict<'_> {
    /// `line 12: disallow: /private`, `no rule matched` or `/robots.txt is always allowed`;
    /// under the conservative profile, `(google reading)` / `(rfc reading)` is added when
    /// only one reading disallows, `(as /private/x, once slashes are merged)` when the
    /// path's [server form](Verdict::server_path) decided, and a note when a line that the
    /// 500 KiB limit cut may have mattered ([`Verdict::cut_line`]).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            VerdictReason::RobotsTxt => f.write_str("/robots.txt is always allowed")?,
            VerdictReason::NoRuleMatched => f.write_str("no rule matched")?,
            VerdictReason::Rule(rule) => {
                write!(f, "{rule}")?;
                if self.split {
                    write!(f, " ({} reading)", rule.reading.as_str())?;
                }
            }
        }
        if let Some(server) = self.server_path() {
            write!(f, " (as {server})")?;
        }
        if let Some(line) = self.cut_line() {
            write!(
                f,
                " (robots.txt is over 500 KiB: line {line}, cut by the limit and dropped, may have \
                 been a rule for this path)"
            )?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;

/// The README's example, compiled and run as a doctest so it stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
