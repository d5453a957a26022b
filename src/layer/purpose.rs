//! The request's purpose (configured like the product token: a default, per proxy user,
//! or, when the operator allows it, a request header removed before forwarding), and what
//! a forwarded response's headers say about using it.

use std::collections::HashMap;
use std::fmt;

use http::{HeaderMap, HeaderName};

use super::ProxyUser;
use crate::policy::{Purpose, UnknownUsage, UsageCheck};
use crate::rep::usage::{
    Category, Preference, Statement, parse_content_signal, parse_content_usage, parse_x_robots_tag,
};

/// How the purpose of each request is chosen, and what the site's preferences for it do.
/// The default: no purpose, no usage check (and no cost).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PurposeSettings {
    /// The purpose of requests that say nothing else.
    pub default: Purpose,
    /// Per authenticated proxy user.
    pub users: HashMap<String, Purpose>,
    /// A request header a client may declare its purpose in (comma-separated categories);
    /// it wins over the rest and is removed before forwarding. `None`: not read.
    pub header: Option<HeaderName>,
    /// What an unknown preference means.
    pub unknown: UnknownUsage,
    /// Replace a response whose `Content-Usage`, `Content-Signal` or `X-Robots-Tag`
    /// header says no for the purpose by robotsgate's `403 usage-refused`.
    pub enforce_response: bool,
}

impl PurposeSettings {
    /// A fixed purpose for every request.
    pub fn fixed(purpose: Purpose) -> PurposeSettings {
        PurposeSettings { default: purpose, ..PurposeSettings::default() }
    }

    /// Whether no request can have a purpose (nothing to do).
    pub fn is_off(&self) -> bool {
        self.default.is_empty() && self.users.is_empty() && self.header.is_none()
    }

    /// The usage check for a request: its purpose (the header removed, if configured).
    pub(super) fn select(&self, parts: &mut http::request::Parts) -> Result<UsageCheck, String> {
        let declared = match &self.header {
            Some(name) => parts.headers.remove(name),
            None => None,
        };
        let purpose = match declared {
            Some(v) => {
                let text =
                    v.to_str().map_err(|_| format!("the {} header is not text", self.header_name()))?;
                text.parse::<Purpose>().map_err(|e| format!("the {} header: {e}", self.header_name()))?
            }
            None => match parts.extensions.get::<ProxyUser>().and_then(|u| self.users.get(&*u.0)) {
                Some(p) => *p,
                None => self.default,
            },
        };
        Ok(UsageCheck { purpose, unknown: self.unknown })
    }

    fn header_name(&self) -> &str {
        self.header.as_ref().map_or("", |h| h.as_str())
    }
}

/// What a forwarded response's headers said about using its content.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ResponseUsage {
    /// The `Content-Usage` field value (field lines joined with `, `), if any.
    pub content_usage: Option<String>,
    /// The `Content-Signal` field value, if any.
    pub content_signal: Option<String>,
    /// The `X-Robots-Tag` field lines, if any.
    pub x_robots_tag: Vec<String>,
    /// The category of the purpose they refuse, if any (robotsgate's reading: see
    /// [`parse_x_robots_tag`]; unknown preferences refuse nothing here).
    pub refused: Option<Category>,
    /// The preference per category of the purpose, all three headers combined.
    pub statement: Statement,
}

impl ResponseUsage {
    /// Reads `headers` of a response to a request made for `purpose` by `agent`; `None`
    /// when none of the three headers is there.
    pub fn of(headers: &HeaderMap, agent: &str, purpose: Purpose) -> Option<ResponseUsage> {
        const MAX: usize = 1024;
        // Names made once, not parsed from text at every response.
        static CONTENT_USAGE: HeaderName = HeaderName::from_static("content-usage");
        static CONTENT_SIGNAL: HeaderName = HeaderName::from_static("content-signal");
        static X_ROBOTS_TAG: HeaderName = HeaderName::from_static("x-robots-tag");
        let joined = |name: &HeaderName| -> Option<String> {
            let mut out: Option<String> = None;
            for v in headers.get_all(name) {
                let o = out.get_or_insert_with(String::new);
                if !o.is_empty() {
                    o.push_str(", ");
                }
                o.push_str(&String::from_utf8_lossy(v.as_bytes()));
            }
            out
        };
        let content_usage = joined(&CONTENT_USAGE);
        let content_signal = joined(&CONTENT_SIGNAL);
        let x_robots_tag: Vec<String> = headers
            .get_all(&X_ROBOTS_TAG)
            .iter()
            .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned())
            .collect();
        if content_usage.is_none() && content_signal.is_none() && x_robots_tag.is_empty() {
            return None;
        }
        let image = headers
            .get(http::header::CONTENT_TYPE)
            .is_some_and(|v| v.as_bytes().len() >= 6 && v.as_bytes()[..6].eq_ignore_ascii_case(b"image/"));
        let mut statement = parse_x_robots_tag(x_robots_tag.iter().map(|v| v.as_bytes()), agent, image);
        if let Some(v) = &content_usage {
            statement = statement.combine(&parse_content_usage(v.as_bytes()));
        }
        if let Some(v) = &content_signal {
            statement = statement.combine(&parse_content_signal(v.as_bytes()));
        }
        let refused = purpose.categories().find(|&c| statement.get(c) == Preference::Disallowed);
        let cut = |mut s: String| {
            if s.len() > MAX {
                let mut end = MAX;
                while !s.is_char_boundary(end) {
                    end -= 1;
                }
                s.truncate(end);
            }
            s
        };
        Some(ResponseUsage {
            content_usage: content_usage.map(cut),
            content_signal: content_signal.map(cut),
            x_robots_tag: x_robots_tag.into_iter().take(16).map(cut).collect(),
            refused,
            statement,
        })
    }
}

impl fmt::Display for ResponseUsage {
    /// The headers as received, one per line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(v) = &self.content_usage {
            writeln!(f, "Content-Usage: {v}")?;
        }
        if let Some(v) = &self.content_signal {
            writeln!(f, "Content-Signal: {v}")?;
        }
        for v in &self.x_robots_tag {
            writeln!(f, "X-Robots-Tag: {v}")?;
        }
        Ok(())
    }
}
