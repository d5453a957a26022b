//! The decision for one request to the site, made from the site's robots.txt copy: which
//! token the `User-Agent` carries and what the engine says of the path for it. Pure: the
//! engine ([`crate::rep`]) decides, precedence and group selection included; pacing state,
//! identity and I/O are the service's.

use std::sync::Arc;

use bytes::Bytes;

use super::agents::{Found, KnownAgents, TokenSet};
use crate::rep::usage::{Category, Preference};
use crate::rep::{PaceHint, Profile, RobotsTxt, RuleKind, VerdictReason};
use crate::vocabulary::ReasonClass;

/// The agent name an unknown `User-Agent` is checked as under
/// [`UnknownAgents::Star`]: no group can name it (a space is not allowed in a product
/// token), so only `User-agent: *` applies.
pub(crate) const STAR_AGENT: &str = "unknown agent";

/// What the site's robots.txt is, as last fetched (or read from a file).
#[derive(Debug)]
pub enum SiteContent {
    /// A file that was read.
    Parsed(Box<RobotsTxt>),
    /// The fetch answered 4xx: everything allowed (RFC 9309 §2.3.1.3).
    AllowAll {
        /// The status.
        status: u16,
    },
    /// Unreachable (5xx, network) and no copy before: everything disallowed (§2.3.1.4).
    DisallowAll {
        /// Why.
        cause: String,
    },
}

/// A copy of the site's robots.txt and the tokens looked for in `User-Agent`s.
#[derive(Debug)]
pub struct SiteRobots {
    /// What it says.
    pub content: SiteContent,
    /// The body as served (empty unless parsed).
    pub body: Bytes,
    /// SHA-256 of the body, lower-case hex (`None` unless parsed).
    pub sha256: Option<Arc<str>>,
    tokens: TokenSet,
}

impl SiteRobots {
    /// A copy of `body`, looked up with the site's group names and `known`; `truncated`:
    /// `body` is the beginning of a longer file ([`RobotsTxt::parse_truncated`]).
    pub fn parsed(body: Bytes, truncated: bool, known: &KnownAgents) -> SiteRobots {
        let robots = if truncated { RobotsTxt::parse_truncated(&body) } else { RobotsTxt::parse(&body) };
        let names = site_group_names(&body);
        let tokens = TokenSet::new(names.iter().map(String::as_str), known);
        let sha256 = Some(hex::encode(ring::digest::digest(&ring::digest::SHA256, &body)).into());
        SiteRobots { content: SiteContent::Parsed(Box::new(robots)), body, sha256, tokens }
    }

    /// No file (4xx): allow all. Only known agents count as bots.
    pub fn allow_all(status: u16, known: &KnownAgents) -> SiteRobots {
        let tokens = TokenSet::new(std::iter::empty(), known);
        SiteRobots { content: SiteContent::AllowAll { status }, body: Bytes::new(), sha256: None, tokens }
    }

    /// Unreachable and no copy: disallow all (for the known agents).
    pub fn disallow_all(cause: String, known: &KnownAgents) -> SiteRobots {
        let tokens = TokenSet::new(std::iter::empty(), known);
        SiteRobots { content: SiteContent::DisallowAll { cause }, body: Bytes::new(), sha256: None, tokens }
    }

    /// Whether this copy is a file that was read (a "good copy" to keep on errors).
    pub fn is_good(&self) -> bool {
        !matches!(self.content, SiteContent::DisallowAll { .. })
    }

    /// The token `user_agent` carries, if any ([`TokenSet::find_recent`]).
    pub fn find_token(&self, user_agent: &str) -> Option<Found> {
        self.tokens.find_recent(user_agent)
    }

    /// What the file says of `path` (path and query) for `agent` (a token, or
    /// [`Agent::Star`]), at `minute` (minutes since midnight UTC, for a `request-rate`
    /// window), for a client whose declared purposes are `purposes`.
    pub fn judge(
        &self,
        profile: Profile,
        agent: &Agent,
        path: &str,
        minute: u16,
        purposes: &[Category],
    ) -> Judgement {
        let name = agent.name();
        let mut j = Judgement {
            allowed: true,
            class: ReasonClass::NoRule,
            rule: None,
            group_line: None,
            explanation: String::new(),
            pace: None,
            content_usage: None,
            usage_refused: None,
        };
        match &self.content {
            SiteContent::AllowAll { status } => {
                j.class = ReasonClass::RobotsUnavailable;
                j.explanation = format!("robots.txt unavailable ({status}): allow all");
            }
            SiteContent::DisallowAll { cause } => {
                j.allowed = false;
                j.class = ReasonClass::RobotsUnreachable;
                j.explanation = format!("robots.txt unreachable ({cause}): disallow all");
            }
            SiteContent::Parsed(robots) => {
                let usage = robots.usage_with(profile, name, path);
                let v = usage.verdict();
                j.allowed = v.allowed();
                j.explanation = v.to_string();
                j.group_line = v.groups().next().map(|g| g.line);
                match v.reason() {
                    VerdictReason::Rule(r) => {
                        j.class = match r.kind {
                            RuleKind::Allow => ReasonClass::AllowRule,
                            RuleKind::Disallow => ReasonClass::DisallowRule,
                        };
                        j.rule =
                            Some(RuleInfo { kind: r.kind.as_str(), pattern: r.pattern.into(), line: r.line });
                    }
                    VerdictReason::NoRuleMatched => j.class = ReasonClass::NoRule,
                    VerdictReason::RobotsTxt => j.class = ReasonClass::RobotsTxt,
                }
                if j.allowed {
                    let mut parts = Vec::new();
                    for c in Category::ALL {
                        let p = usage.get(c).preference();
                        if let Some(key) = c.content_usage_key() {
                            match p {
                                Preference::Allowed => parts.push(format!("{key}=y")),
                                Preference::Disallowed => parts.push(format!("{key}=n")),
                                Preference::Unknown => {}
                            }
                        }
                        if p == Preference::Disallowed && purposes.contains(&c) && j.usage_refused.is_none() {
                            j.usage_refused = Some(c);
                        }
                    }
                    if !parts.is_empty() {
                        j.content_usage = Some(parts.join(", "));
                    }
                    if let Some(c) = j.usage_refused {
                        j.allowed = false;
                        j.class = ReasonClass::UsageRefused;
                        j.explanation = format!(
                            "{}: the site says no to {c}, this agent's declared purpose",
                            usage.get(c)
                        );
                    }
                    let hint = robots.pace_with(profile, name, minute);
                    j.pace = hint.filter(|h| h.delay > 0.0);
                }
            }
        }
        j
    }
}

/// The agent a request is judged as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    /// The product token found in its `User-Agent`.
    Token(Arc<str>),
    /// No token (or an impersonator under `impersonators = star`): only `User-agent: *`.
    Star,
}

impl Agent {
    /// The name the engine checks: the token, or a name no group can have.
    pub fn name(&self) -> &str {
        match self {
            Agent::Token(t) => t,
            Agent::Star => STAR_AGENT,
        }
    }
}

/// The deciding rule.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleInfo {
    /// `allow` or `disallow`.
    pub kind: &'static str,
    /// The pattern as written.
    pub pattern: Arc<str>,
    /// Its 1-based line.
    pub line: u32,
}

/// The engine's answer for one request.
#[derive(Debug, Clone)]
pub struct Judgement {
    /// Whether robots.txt (and the usage preferences for a declared purpose) allow it.
    pub allowed: bool,
    /// The reason class: `allow-rule`, `disallow-rule`, `no-rule`, `robots-txt`,
    /// `robots-unavailable`, `robots-unreachable`, `usage-refused`.
    pub class: ReasonClass,
    /// The deciding rule.
    pub rule: Option<RuleInfo>,
    /// The line of the first group that applied.
    pub group_line: Option<u32>,
    /// The decision in words (`line 3: disallow: /private`).
    pub explanation: String,
    /// The pacing the agent's group asks for, when allowed.
    pub pace: Option<PaceHint>,
    /// The `Content-Usage` value the group states (`train-ai=n, search=y`), when allowed.
    pub content_usage: Option<String>,
    /// The declared purpose the site refuses, if one is.
    pub usage_refused: Option<Category>,
}

/// The product tokens the file's `User-agent` lines name (not `*`), as written.
fn site_group_names(body: &[u8]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in body.split(|&b| b == b'\n').take(100_000) {
        let line = line.split(|&b| b == b'#').next().unwrap_or_default();
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        let key = String::from_utf8_lossy(&line[..colon]);
        let key = key.trim();
        if !(key.eq_ignore_ascii_case("user-agent") || key.eq_ignore_ascii_case("useragent")) {
            continue;
        }
        let value = String::from_utf8_lossy(&line[colon + 1..]);
        let value = value.trim();
        // As crawlers read it: the product token before any `/version` or space.
        let token = value.split(['/', ' ', '\t']).next().unwrap_or_default().trim();
        if !token.is_empty()
            && token != "*"
            && out.len() < 10_000
            && !out.iter().any(|t| t.eq_ignore_ascii_case(token))
        {
            out.push(token.to_owned());
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &[u8] = b"User-agent: GPTBot\nDisallow: /private\nContent-Usage: train-ai=n\n\n\
User-agent: ExampleBot\nCrawl-delay: 5\n\nUser-agent: *\nDisallow: /admin\n";

    fn site() -> SiteRobots {
        SiteRobots::parsed(Bytes::from_static(FILE), false, &KnownAgents::bundled())
    }

    #[test]
    fn site_names_are_tokens() {
        let s = site();
        assert_eq!(&*s.find_token("examplebot/1.0").unwrap().token, "ExampleBot");
        assert!(s.find_token("examplebot/1.0").unwrap().site_group);
        assert_eq!(&*s.find_token("ClaudeBot/1.0").unwrap().token, "ClaudeBot");
        assert!(!s.find_token("ClaudeBot/1.0").unwrap().site_group);
    }

    #[test]
    fn engine_decides() {
        let s = site();
        let gpt = Agent::Token("GPTBot".into());
        let j = s.judge(Profile::Conservative, &gpt, "/private/x", 0, &[]);
        assert!(!j.allowed);
        assert_eq!(j.rule.as_ref().unwrap().line, 2);
        assert_eq!(j.group_line, Some(1));
        // GPTBot's group does not disallow /admin: the `*` group does not apply to it.
        let j = s.judge(Profile::Conservative, &gpt, "/admin", 0, &[]);
        assert!(j.allowed);
        assert_eq!(j.content_usage.as_deref(), Some("train-ai=n"));
        // Its declared purpose is refused.
        let j = s.judge(Profile::Conservative, &gpt, "/page", 0, &[Category::TrainAi]);
        assert!(!j.allowed);
        assert_eq!(j.class, "usage-refused");
        // A bot without its own group is held to `*`, and so is Star.
        let claude = Agent::Token("ClaudeBot".into());
        assert!(!s.judge(Profile::Conservative, &claude, "/admin", 0, &[]).allowed);
        let star = s.judge(Profile::Conservative, &Agent::Star, "/admin", 0, &[]);
        assert!(!star.allowed);
        // Google's reading: `crawl-delay` closes no group, so ExampleBot and `*` share the
        // group of line 5; the engine decides so, not this module.
        assert_eq!(star.group_line, Some(5));
        // Pacing of the group.
        let ex = Agent::Token("ExampleBot".into());
        let j = s.judge(Profile::Conservative, &ex, "/", 0, &[]);
        assert_eq!(j.pace.map(|p| (p.delay, p.line)), Some((5.0, 6)));
    }

    #[test]
    fn rfc_status_rules() {
        let k = KnownAgents::bundled();
        let a = Agent::Token("GPTBot".into());
        assert!(SiteRobots::allow_all(404, &k).judge(Profile::Conservative, &a, "/x", 0, &[]).allowed);
        assert!(
            !SiteRobots::disallow_all("503".into(), &k)
                .judge(Profile::Conservative, &a, "/x", 0, &[])
                .allowed
        );
    }

    #[test]
    fn group_names() {
        let names = site_group_names(
            b"User-agent: A-Bot/1.0 # c\nuser-agent:*\nUSER-AGENT : b_bot\nuser-agent: a-bot\n",
        );
        assert_eq!(names, vec!["A-Bot", "b_bot"]);
    }
}
