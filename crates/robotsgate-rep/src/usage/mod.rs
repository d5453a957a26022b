//! AI-usage preferences: what a site says its content may be **used** for, as opposed to
//! whether it may be crawled. Two forms are read, side by side and never mixed silently:
//!
//! - **IETF AI Preferences** ([`Source::ContentUsage`]): `Content-Usage:` lines in
//!   robots.txt groups (draft-ietf-aipref-attach-05, §3) and the `Content-Usage` response
//!   header (§2), whose value is an RFC 9651 Dictionary of the vocabulary of
//!   draft-ietf-aipref-vocab-07 (`train-ai=n, search=y`): only the Tokens `y` and `n`
//!   count, any other value means "unknown" for that key, the last duplicate key wins,
//!   unknown keys and parameters are ignored, and a value that does not parse means
//!   "unknown" for every category ([`parse_content_usage`]).
//! - **Cloudflare's Content Signals** ([`Source::ContentSignal`]): `Content-Signal:` lines
//!   (`search=yes, ai-train=no, ai-input=no`), inside groups and, as some sites write them,
//!   before any group (then for every crawler); also sent as a response header
//!   ([`parse_content_signal`]).
//!
//! The drafts change; these are the versions implemented: **draft-ietf-aipref-attach-05**
//! (2026-08) and **draft-ietf-aipref-vocab-07** (2026-08), whose categories are `train-ai`
//! and `search` (labels of earlier drafts, such as `train-genai`, `ai-use` or `bots`, are
//! unknown keys now and ignored, as the vocabulary says).
//!
//! # Categories
//!
//! A client declares its purpose as one or more [`Category`]s; each maps to a label in each
//! form:
//!
//! | [`Category`] | `Content-Usage` (AIPREF) | `Content-Signal` (Cloudflare) |
//! |---|---|---|
//! | `train-ai` | `train-ai` (AI model training) | `ai-train` (training or fine-tuning AI models) |
//! | `search` | `search` (search applications that link to the asset) | `search` (building a search index, links and short excerpts) |
//! | `ai-input` | — (no such category in vocab-07: always unknown) | `ai-input` (input to AI answers: retrieval, grounding) |
//!
//! AIPREF's values are the Tokens `y`/`n`, Content Signals' are `yes`/`no`: a
//! `Content-Usage: train-ai=yes` is "unknown", and a `Content-Signal: ai-train=n` too.
//!
//! # Matching lines to a path
//!
//! As the attach draft says: a line applies to the paths its path matches (no path: every
//! path), matched as `allow`/`disallow` patterns are, and of the lines that match, the one
//! with the longest (encoded) path gives the statement for the path; when several equally
//! long paths match, their statements are combined per category so that the **more
//! restrictive** wins (any `n` → disallowed, else any `y` → allowed, else unknown; vocab-07
//! §7.1). A longer line that says nothing of a category makes that category unknown for
//! its paths (the longest match decides the whole statement). Preferences count only for
//! paths that may be crawled. Each form is matched on its own; the two answers are then
//! combined the same way ([`CategoryUsage::preference`]).
//!
//! Groups: the attach draft makes `Content-Usage` a rule of RFC 9309's grammar, so in the
//! RFC reading a `User-agent` line after one starts a new group (as after an `allow`).
//! Google's parser does not know the line, so in the Google reading it closes nothing (as a
//! `crawl-delay`), and `Content-Signal` lines close nothing in either reading (no
//! specification makes them rules). Under the conservative profile, where the two readings
//! group a file differently, the more restrictive answer counts, as for verdicts.

use std::fmt;
use std::str::FromStr;

/// A category of use: what a client fetches content for. See the [module docs](self) for
/// how each maps to the two forms.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Category {
    /// AI model training (AIPREF `train-ai`, Content Signals `ai-train`).
    TrainAi,
    /// Search (AIPREF and Content Signals `search`).
    Search,
    /// Input to AI answers: retrieval, grounding (Content Signals `ai-input`; AIPREF has
    /// no such category).
    AiInput,
}

impl Category {
    /// Every category, in a stable order.
    pub const ALL: [Category; 3] = [Category::TrainAi, Category::Search, Category::AiInput];

    /// `train-ai`, `search` or `ai-input`: the name in configuration and on the command line.
    pub fn as_str(self) -> &'static str {
        match self {
            Category::TrainAi => "train-ai",
            Category::Search => "search",
            Category::AiInput => "ai-input",
        }
    }

    /// The category's key in a `Content-Usage` dictionary (vocab-07), if it has one.
    pub fn content_usage_key(self) -> Option<&'static str> {
        match self {
            Category::TrainAi => Some("train-ai"),
            Category::Search => Some("search"),
            Category::AiInput => None,
        }
    }

    /// The category's key in a `Content-Signal` line.
    pub fn content_signal_key(self) -> &'static str {
        match self {
            Category::TrainAi => "ai-train",
            Category::Search => "search",
            Category::AiInput => "ai-input",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Category {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A name that is not a [`Category`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownCategory(pub String);

impl fmt::Display for UnknownCategory {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown purpose {:?}: expected train-ai, search or ai-input", self.0)?;
        if self.0.eq_ignore_ascii_case("ai-train") {
            f.write_str(" (Content Signals' ai-train is the category train-ai)")?;
        }
        Ok(())
    }
}

impl std::error::Error for UnknownCategory {}

impl FromStr for Category {
    type Err = UnknownCategory;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Category::ALL.into_iter().find(|c| c.as_str() == s).ok_or_else(|| UnknownCategory(s.to_owned()))
    }
}

/// A site's preference for one category.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub enum Preference {
    /// The use is allowed (`y`, `yes`).
    Allowed,
    /// The use is not allowed (`n`, `no`).
    Disallowed,
    /// Nothing (usable) was said.
    #[default]
    Unknown,
}

impl Preference {
    /// `allowed`, `disallowed` or `unknown`.
    pub fn as_str(self) -> &'static str {
        match self {
            Preference::Allowed => "allowed",
            Preference::Disallowed => "disallowed",
            Preference::Unknown => "unknown",
        }
    }

    /// Two statements combined as vocab-07 §7.1 says: any disallowed → disallowed, else any
    /// allowed → allowed, else unknown.
    pub fn combine(self, other: Preference) -> Preference {
        if self.rank() <= other.rank() { self } else { other }
    }

    /// 0 for the most restrictive.
    fn rank(self) -> u32 {
        match self {
            Preference::Disallowed => 0,
            Preference::Allowed => 1,
            Preference::Unknown => 2,
        }
    }
}

impl fmt::Display for Preference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which form a preference was stated in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Source {
    /// IETF AI Preferences: `Content-Usage`.
    ContentUsage,
    /// Cloudflare's Content Signals: `Content-Signal`.
    ContentSignal,
}

impl Source {
    /// `content-usage` or `content-signal`, as the key is written in robots.txt.
    pub fn as_str(self) -> &'static str {
        match self {
            Source::ContentUsage => "content-usage",
            Source::ContentSignal => "content-signal",
        }
    }
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One statement of preference (a line's value or a header's): a [`Preference`] per
/// [`Category`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Statement {
    prefs: [Preference; 3],
    /// The value was not (wholly) understood: for `Content-Usage`, it is no RFC 9651
    /// Dictionary (every category is then unknown); for `Content-Signal`, some part of it
    /// was not a `key=value` pair (the pairs that were still count).
    malformed: bool,
}

impl Statement {
    /// The preference for `category`.
    pub fn get(&self, category: Category) -> Preference {
        self.prefs[category.index()]
    }

    /// Whether the value was not (wholly) understood (see [`parse_content_usage`] and
    /// [`parse_content_signal`]).
    pub fn is_malformed(&self) -> bool {
        self.malformed
    }

    /// Two statements combined category by category ([`Preference::combine`]), e.g. from
    /// several header lines that are not one field (or from both forms).
    pub fn combine(&self, other: &Statement) -> Statement {
        let mut out = *self;
        for (a, b) in out.prefs.iter_mut().zip(other.prefs) {
            *a = a.combine(b);
        }
        out.malformed |= other.malformed;
        out
    }

    /// Sets the preference for `category` (for mappings of other signals, such as
    /// `X-Robots-Tag`).
    pub fn set(&mut self, category: Category, preference: Preference) {
        self.prefs[category.index()] = preference;
    }

    /// Whether no category has a preference.
    pub fn is_empty(&self) -> bool {
        self.prefs.iter().all(|p| *p == Preference::Unknown)
    }
}

impl fmt::Display for Statement {
    /// `train-ai=disallowed, search=allowed` (known categories only), `nothing known`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for c in Category::ALL {
            let p = self.get(c);
            if p != Preference::Unknown {
                if !first {
                    f.write_str(", ")?;
                }
                write!(f, "{c}={p}")?;
                first = false;
            }
        }
        if first {
            f.write_str("nothing known")?;
        }
        Ok(())
    }
}

/// Parses a `Content-Usage` value (a robots.txt line's preference, or the header field's
/// value; several field lines are joined with `, ` first, as RFC 9651 §4.2 says) as
/// draft-ietf-aipref-vocab-07 §6–7 do: an RFC 9651 Dictionary; per category, the last
/// member with its key counts when it is the Token `y` (allowed) or `n` (disallowed),
/// anything else is unknown; parameters and unknown keys are ignored. A value that is not
/// a Dictionary makes every category unknown ([`Statement::is_malformed`]).
///
/// ```
/// use robotsgate_rep::usage::{Category, Preference, parse_content_usage};
///
/// let s = parse_content_usage(b"train-ai=n, search=y");
/// assert_eq!(s.get(Category::TrainAi), Preference::Disallowed);
/// assert_eq!(s.get(Category::Search), Preference::Allowed);
/// // vocab-07 §6.5.1: a boolean and a string are not tokens: both unknown.
/// let s = parse_content_usage(b"train-ai=y, train-ai, search=n, search=\"n\"");
/// assert!(s.is_empty());
/// // Keys are case-sensitive: "Train-AI" does not parse, so everything is unknown.
/// assert!(parse_content_usage(b"Train-AI=n, search=n").is_malformed());
/// ```
pub fn parse_content_usage(value: &[u8]) -> Statement {
    let mut s = Statement::default();
    let Ok(dict) = crate::sf::Dictionary::parse(value) else {
        return Statement { malformed: true, ..Statement::default() };
    };
    for (key, member) in dict.iter() {
        let slot = match key {
            "train-ai" => Category::TrainAi,
            "search" => Category::Search,
            _ => continue,
        };
        s.prefs[slot.index()] = match member.as_token() {
            Some("y") => Preference::Allowed,
            Some("n") => Preference::Disallowed,
            _ => Preference::Unknown,
        };
    }
    s
}

/// Parses a `Content-Signal` value: comma-separated `key=value` pairs, whitespace around
/// each part ignored, keys and values compared without case; `search`, `ai-input` and
/// `ai-train` with `yes` (allowed) or `no` (disallowed) count, other values are unknown,
/// other keys ignored, the last of a duplicate key wins. A part that is not `key=value`
/// is skipped and marks the statement [malformed](Statement::is_malformed); the pairs
/// around it still count (an operator's `no` is honoured however the line around it is
/// written).
///
/// ```
/// use robotsgate_rep::usage::{Category, Preference, parse_content_signal};
///
/// let s = parse_content_signal(b"search=yes, ai-train=no");
/// assert_eq!(s.get(Category::TrainAi), Preference::Disallowed);
/// assert_eq!(s.get(Category::Search), Preference::Allowed);
/// assert_eq!(s.get(Category::AiInput), Preference::Unknown);
/// ```
pub fn parse_content_signal(value: &[u8]) -> Statement {
    fn trim(mut v: &[u8]) -> &[u8] {
        while let [b' ' | b'\t', rest @ ..] = v {
            v = rest;
        }
        while let [rest @ .., b' ' | b'\t'] = v {
            v = rest;
        }
        v
    }
    let mut s = Statement::default();
    for part in value.split(|&b| b == b',') {
        let part = trim(part);
        if part.is_empty() {
            continue;
        }
        let Some(eq) = part.iter().position(|&b| b == b'=') else {
            s.malformed = true;
            continue;
        };
        let (key, value) = (trim(&part[..eq]), trim(&part[eq + 1..]));
        if key.is_empty() {
            s.malformed = true;
            continue;
        }
        let Some(c) =
            Category::ALL.into_iter().find(|c| key.eq_ignore_ascii_case(c.content_signal_key().as_bytes()))
        else {
            continue;
        };
        s.prefs[c.index()] = if value.eq_ignore_ascii_case(b"yes") {
            Preference::Allowed
        } else if value.eq_ignore_ascii_case(b"no") {
            Preference::Disallowed
        } else {
            Preference::Unknown
        };
    }
    s
}

/// What `X-Robots-Tag` response headers (Google's syntax) say for the crawler `agent`, as
/// robotsgate maps them to categories: `noindex` and `none` → `search` disallowed; `noai`
/// → `train-ai` and `ai-input` disallowed; `noimageai` → the same when the response is an
/// image (`image` true). Each value is a comma-separated list of rules; a rule may start
/// with a product token and `:` (`googlebot: noindex`), which then applies to it and the
/// rules after it in that value, and only for that crawler (compared without case);
/// `unavailable_after:`, `max-snippet:`, `max-image-preview:` and `max-video-preview:` are
/// rules with a value, not product tokens. Other rules (`nofollow`, `noarchive`, ...) say
/// nothing about use. Nothing here is [malformed](Statement::is_malformed): rules that are
/// not understood are ignored.
///
/// ```
/// use robotsgate_rep::usage::{Category, Preference, parse_x_robots_tag};
///
/// let s = parse_x_robots_tag([&b"noai, noimageai"[..]], "ExampleBot", false);
/// assert_eq!(s.get(Category::TrainAi), Preference::Disallowed);
/// let s = parse_x_robots_tag([&b"googlebot: noindex"[..], b"otherbot: noai"], "ExampleBot", false);
/// assert!(s.is_empty());
/// let s = parse_x_robots_tag([&b"examplebot: none"[..]], "ExampleBot", false);
/// assert_eq!(s.get(Category::Search), Preference::Disallowed);
/// ```
pub fn parse_x_robots_tag<'v>(
    values: impl IntoIterator<Item = &'v [u8]>,
    agent: &str,
    image: bool,
) -> Statement {
    const VALUED: [&[u8]; 4] =
        [b"unavailable_after", b"max-snippet", b"max-image-preview", b"max-video-preview"];
    let trim = |v: &'v [u8]| -> &'v [u8] {
        let start = v.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(v.len());
        let end = v.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(start, |e| e + 1);
        &v[start..end.max(start)]
    };
    let mut s = Statement::default();
    for value in values {
        let mut applies = true;
        for part in value.split(|&b| b == b',') {
            let mut rule = trim(part);
            if let Some(colon) = rule.iter().position(|&b| b == b':') {
                let name = trim(&rule[..colon]);
                if !VALUED.iter().any(|v| name.eq_ignore_ascii_case(v)) {
                    applies = name.eq_ignore_ascii_case(agent.as_bytes());
                    rule = trim(&rule[colon + 1..]);
                }
            }
            if !applies {
                continue;
            }
            let is = |word: &[u8]| rule.eq_ignore_ascii_case(word);
            if is(b"noindex") || is(b"none") {
                s.set(Category::Search, Preference::Disallowed);
            } else if is(b"noai") || (image && is(b"noimageai")) {
                s.set(Category::TrainAi, Preference::Disallowed);
                s.set(Category::AiInput, Preference::Disallowed);
            }
        }
    }
    s
}

/// Parses a value of `source`'s form.
pub fn parse(source: Source, value: &[u8]) -> Statement {
    match source {
        Source::ContentUsage => parse_content_usage(value),
        Source::ContentSignal => parse_content_signal(value),
    }
}

/// A `Content-Usage` or `Content-Signal` line of a robots.txt file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UsageLine<'a> {
    /// Which form.
    pub source: Source,
    /// 1-based line number.
    pub line: u32,
    /// The path as written (empty when the line has none: every path).
    pub path: &'a str,
    /// The preference as written (`train-ai=n`).
    pub value: &'a str,
    /// What the value says.
    pub statement: Statement,
    /// The reading whose groups and path matching selected the line.
    pub reading: crate::Reading,
}

impl fmt::Display for UsageLine<'_> {
    /// `line 4: content-usage: /ai-ok/ train-ai=y`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: ", self.line, self.source)?;
        if !self.path.is_empty() {
            write!(f, "{} ", self.path)?;
        }
        f.write_str(self.value)
    }
}

/// What one form says for one category at a path: the preference and the line that gave
/// it (the longest match; `None` when no line of the form matched).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stated<'a> {
    /// The preference.
    pub preference: Preference,
    /// The deciding line. A line can decide "unknown": it is the longest match and says
    /// nothing (usable) of the category.
    pub line: Option<UsageLine<'a>>,
}

impl<'a> Stated<'a> {
    /// Keeps the more restrictive of two answers (the first of two alike).
    pub(crate) fn merge(&mut self, other: Stated<'a>) {
        if self.line.is_none() || other.preference.rank() < self.preference.rank() {
            *self = other;
        }
    }
}

/// A site's preferences for one [`Category`] at one path: each form's answer, side by
/// side, and the two combined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CategoryUsage<'a> {
    /// The category.
    pub category: Category,
    /// What `Content-Usage` lines say.
    pub content_usage: Stated<'a>,
    /// What `Content-Signal` lines say.
    pub content_signal: Stated<'a>,
}

impl<'a> CategoryUsage<'a> {
    pub(crate) fn new(category: Category) -> Self {
        CategoryUsage { category, content_usage: Stated::default(), content_signal: Stated::default() }
    }

    /// Both forms combined (vocab-07 §7.1): disallowed if either says so, else allowed if
    /// either says so, else unknown.
    pub fn preference(&self) -> Preference {
        self.content_usage.preference.combine(self.content_signal.preference)
    }

    /// The lines behind [`CategoryUsage::preference`]: each form's deciding line whose
    /// preference is the combined one (both when they agree). Empty when it is unknown.
    pub fn deciding_lines(&self) -> impl Iterator<Item = UsageLine<'a>> + '_ {
        let p = self.preference();
        [self.content_usage, self.content_signal]
            .into_iter()
            .filter(move |s| p != Preference::Unknown && s.preference == p)
            .filter_map(|s| s.line)
    }
}

impl fmt::Display for CategoryUsage<'_> {
    /// `train-ai: disallowed (line 4: content-usage: train-ai=n)`, `search: unknown`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.category, self.preference())?;
        let mut first = true;
        for line in self.deciding_lines() {
            f.write_str(if first { " (" } else { "; " })?;
            write!(f, "{line}")?;
            first = false;
        }
        if !first {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// A site's usage preferences at one path for one product token
/// ([`RobotsTxt::usage_with`](crate::RobotsTxt::usage_with)): the crawl verdict, and per
/// category what each form says. A path that may not be crawled has no preferences
/// (every category unknown, as the attach draft says).
#[derive(Debug, Clone)]
pub struct Usage<'a> {
    pub(crate) verdict: crate::Verdict<'a>,
    pub(crate) categories: [CategoryUsage<'a>; 3],
}

impl<'a> Usage<'a> {
    /// The crawl verdict for the path (as [`RobotsTxt::check_with`](crate::RobotsTxt::check_with)).
    pub fn verdict(&self) -> &crate::Verdict<'a> {
        &self.verdict
    }

    /// The preferences for `category`.
    pub fn get(&self, category: Category) -> &CategoryUsage<'a> {
        &self.categories[category.index()]
    }

    /// Every category's preferences, in [`Category::ALL`] order.
    pub fn categories(&self) -> &[CategoryUsage<'a>; 3] {
        &self.categories
    }
}

/// Splits a robots.txt `Content-Usage`/`Content-Signal` value into its path (empty when
/// there is none) and its preference, as draft-ietf-aipref-attach-05 §3.2 says: a value
/// that starts with `/` has a path, which ends before the first space or tab.
pub(crate) fn split_path(value: &[u8]) -> (&[u8], &[u8]) {
    if value.first() != Some(&b'/') {
        return (&[], value);
    }
    match value.iter().position(|&b| b == b' ' || b == b'\t') {
        Some(end) => {
            let rest = &value[end..];
            let skip = rest.iter().take_while(|&&b| b == b' ' || b == b'\t').count();
            (&value[..end], &rest[skip..])
        }
        None => (value, &[]),
    }
}

/// The preference behind the Hit of a usage line for one category: the line's index and
/// its rank, so that of equally long paths the more restrictive wins, then the earlier.
pub(crate) fn hit_code(preference: Preference, line_index: u32) -> u32 {
    (preference.rank() << 28) | (line_index & 0x0FFF_FFFF)
}

/// The line index of a hit code.
pub(crate) fn hit_line(code: u32) -> u32 {
    code & 0x0FFF_FFFF
}

#[cfg(test)]
mod tests;
