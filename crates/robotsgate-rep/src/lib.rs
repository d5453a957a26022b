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
//!   a site owner's rule is obeyed however it is spelled.

#![forbid(unsafe_code)]
#![deny(missing_docs)]

mod aho;
mod bytes;
mod matcher;
pub mod pace;
pub mod parser;
mod pattern;
mod precedence;
mod reading;
mod url;

use std::fmt;
use std::str::FromStr;

pub use pace::{IgnoredValue, PaceHint, PaceSource, TimeWindow};
pub use parser::MAX_ROBOTS_TXT_BYTES;
pub use url::path_of_url;

use precedence::Hit;
use reading::{Applied, Parsed, ReadingData};

/// How to read robots.txt files. See the [module docs](self).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Profile {
    /// Google's open-source parser and matcher.
    Google,
    /// A strict RFC 9309 reading.
    Rfc,
    /// Allowed only when both readings allow.
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

/// Which reading of the file a verdict comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reading {
    /// Google's interpretation.
    Google,
    /// The strict RFC 9309 reading.
    Rfc,
}

impl Reading {
    /// `"google"` or `"rfc"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Reading::Google => "google",
            Reading::Rfc => "rfc",
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
    /// the first [`MAX_ROBOTS_TXT_BYTES`] count.
    pub fn parse(body: &[u8]) -> RobotsTxt {
        Self::parse_with(body, ParseOptions::default())
    }

    /// [`RobotsTxt::parse`] with options.
    pub fn parse_with(body: &[u8], options: ParseOptions) -> RobotsTxt {
        RobotsTxt { parsed: Parsed::parse(body, options.automaton_min_rules) }
    }

    /// Checks `path` (path and query of the URL, e.g. `/a/b?c`) for the crawler whose
    /// product token is `agent`, under the default ([`Profile::Conservative`]) profile.
    pub fn check(&self, agent: &str, path: &str) -> Verdict<'_> {
        self.check_with(Profile::default(), agent, path)
    }

    /// [`RobotsTxt::check`] under a chosen profile.
    pub fn check_with(&self, profile: Profile, agent: &str, path: &str) -> Verdict<'_> {
        let path = url::normalize_request_path(path);
        match profile {
            Profile::Google => self.verdict(profile, Reading::Google, agent, path.as_bytes()),
            Profile::Rfc => self.rfc_verdict(profile, agent, path.as_bytes()),
            Profile::Conservative => {
                let rfc = self.rfc_verdict(profile, agent, path.as_bytes());
                if rfc.decided.is_robots_txt() {
                    return rfc;
                }
                let google = self.verdict(profile, Reading::Google, agent, path.as_bytes());
                let split = rfc.allowed != google.allowed;
                let mut v = if !google.allowed && rfc.allowed { google } else { rfc };
                v.split = split;
                v
            }
        }
    }

    fn rfc_verdict(&self, profile: Profile, agent: &str, path: &[u8]) -> Verdict<'_> {
        let canonical = pattern::canonical_path(path);
        let path_only = canonical.split(|&b| b == b'?').next().unwrap_or_default();
        if path_only == b"/robots.txt" {
            return Verdict { allowed: true, profile, split: false, decided: Decided::RobotsTxt };
        }
        self.verdict(profile, Reading::Rfc, agent, &canonical)
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
        Verdict { allowed, profile, split: false, decided }
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

    /// Approximate heap memory held by this value, for bounded caches.
    pub fn heap_bytes(&self) -> usize {
        self.parsed.heap_bytes()
    }
}

/// The outcome of one check, and what decided it.
#[derive(Debug, Clone, Copy)]
pub struct Verdict<'a> {
    allowed: bool,
    profile: Profile,
    /// Conservative profile: the two readings disagreed.
    split: bool,
    decided: Decided<'a>,
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

/// Why a verdict came out as it did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reason<'a> {
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
    pub fn reason(&self) -> Reason<'a> {
        match self.decided {
            Decided::RobotsTxt => Reason::RobotsTxt,
            Decided::Rules { hit: None, .. } => Reason::NoRuleMatched,
            Decided::Rules { robots, reading, hit: Some(hit), .. } => {
                Reason::Rule(robots.matched(RuleId(hit.rule), reading).unwrap_or(MatchedRule {
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
            Reason::Rule(r) => Some(r),
            _ => None,
        }
    }

    /// Under the conservative profile: the two readings disagreed, and the verdict is
    /// the disallowing one's.
    pub fn readings_disagree(&self) -> bool {
        self.split
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
    /// only one reading disallows.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reason() {
            Reason::RobotsTxt => f.write_str("/robots.txt is always allowed"),
            Reason::NoRuleMatched => f.write_str("no rule matched"),
            Reason::Rule(rule) => {
                write!(f, "{rule}")?;
                if self.split {
                    write!(f, " ({} reading)", rule.reading.as_str())?;
                }
                Ok(())
            }
        }
    }
}

#[cfg(test)]
mod tests;

/// The README's example, compiled and run as a doctest so it stays true.
#[doc = include_str!("../README.md")]
#[cfg(doctest)]
pub struct ReadmeDoctests;
