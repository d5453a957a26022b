//! The client's declared purpose and the site's AI-usage preferences for it: what a
//! decision keeps of them ([`UsageDecision`]), made from the engine's
//! [`Usage`](crate::rep::usage::Usage). See [`crate::rep::usage`] for the forms, the drafts
//! implemented and the mapping of categories.

use std::fmt;
use std::str::FromStr;
use std::sync::Arc;

use crate::rep::usage::{Category, CategoryUsage, Preference, Source, Stated, UnknownCategory};

/// The categories of use a request is made for (the client's declared purpose): a set of
/// [`Category`]s. Empty: no purpose, no usage check.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Purpose(u8);

impl Purpose {
    /// No purpose: preferences are not looked at.
    pub const NONE: Purpose = Purpose(0);

    /// The purpose made of `categories`.
    pub fn of(categories: impl IntoIterator<Item = Category>) -> Purpose {
        Purpose(categories.into_iter().fold(0, |bits, c| bits | Self::bit(c)))
    }

    fn bit(c: Category) -> u8 {
        1 << (Category::ALL.iter().position(|&x| x == c).unwrap_or(0) as u8)
    }

    /// Whether `category` is part of it.
    pub fn contains(self, category: Category) -> bool {
        self.0 & Self::bit(category) != 0
    }

    /// Whether it is empty.
    pub fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Its categories, in [`Category::ALL`] order.
    pub fn categories(self) -> impl Iterator<Item = Category> {
        Category::ALL.into_iter().filter(move |&c| self.contains(c))
    }
}

impl fmt::Display for Purpose {
    /// `train-ai,search`; `none` when empty.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return f.write_str("none");
        }
        for (i, c) in self.categories().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            f.write_str(c.as_str())?;
        }
        Ok(())
    }
}

impl FromStr for Purpose {
    type Err = UnknownCategory;
    /// Comma-separated categories (`train-ai, search`); spaces around each are ignored.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let mut p = Purpose::NONE;
        for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            p = Purpose(p.0 | Self::bit(part.parse()?));
        }
        Ok(p)
    }
}

/// What a request gets when the site states no preference (or none that parses) for a
/// category of its purpose.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum UnknownUsage {
    /// Allowed (the default): the drafts take no position, and most sites say nothing.
    #[default]
    Allow,
    /// Refused: only an explicit "yes" lets the request through.
    Refuse,
}

impl UnknownUsage {
    /// `allow` or `refuse`.
    pub fn as_str(self) -> &'static str {
        match self {
            UnknownUsage::Allow => "allow",
            UnknownUsage::Refuse => "refuse",
        }
    }
}

/// A line that stated a preference, as a decision keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CitedLine {
    /// Which form.
    pub source: Source,
    /// 1-based line of the robots.txt.
    pub line: u32,
    /// The line as written after its key: path (if any) and preference.
    pub text: Arc<str>,
    /// What it says for the category.
    pub preference: Preference,
}

impl CitedLine {
    fn of(stated: &Stated<'_>) -> Option<CitedLine> {
        let line = stated.line?;
        let text = if line.path.is_empty() {
            Arc::from(line.value)
        } else {
            Arc::from(format!("{} {}", line.path, line.value))
        };
        Some(CitedLine { source: line.source, line: line.line, text, preference: stated.preference })
    }
}

impl fmt::Display for CitedLine {
    /// `line 4: content-usage: train-ai=n`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: {}", self.line, self.source, self.text)
    }
}

/// The site's preference for one category of the purpose: both forms side by side and
/// combined.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CategoryPreference {
    /// The category.
    pub category: Category,
    /// Both forms combined (vocab-07 §7.1: any "no" wins, then any "yes").
    pub preference: Preference,
    /// The deciding `Content-Usage` line, if one matched.
    pub content_usage: Option<CitedLine>,
    /// The deciding `Content-Signal` line, if one matched.
    pub content_signal: Option<CitedLine>,
}

impl CategoryPreference {
    /// From the engine's answer.
    pub fn of(u: &CategoryUsage<'_>) -> CategoryPreference {
        CategoryPreference {
            category: u.category,
            preference: u.preference(),
            content_usage: CitedLine::of(&u.content_usage),
            content_signal: CitedLine::of(&u.content_signal),
        }
    }

    /// Nothing known (no robots.txt, or no line).
    pub fn unknown(category: Category) -> CategoryPreference {
        CategoryPreference {
            category,
            preference: Preference::Unknown,
            content_usage: None,
            content_signal: None,
        }
    }

    /// The lines behind the combined preference.
    pub fn deciding_lines(&self) -> impl Iterator<Item = &CitedLine> {
        let p = self.preference;
        [&self.content_usage, &self.content_signal]
            .into_iter()
            .flatten()
            .filter(move |l| p != Preference::Unknown && l.preference == p)
    }
}

impl fmt::Display for CategoryPreference {
    /// `train-ai: disallowed (line 4: content-usage: train-ai=n)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.category, self.preference)?;
        for (i, line) in self.deciding_lines().enumerate() {
            f.write_str(if i == 0 { " (" } else { "; " })?;
            write!(f, "{line}")?;
        }
        if self.deciding_lines().next().is_some() {
            f.write_str(")")?;
        }
        Ok(())
    }
}

/// The usage check of one decision: the purpose, the site's preference for each of its
/// categories, and whether they refuse the request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UsageDecision {
    /// The purpose the request was made for.
    pub purpose: Purpose,
    /// What an unknown preference meant.
    pub unknown: UnknownUsage,
    /// Per category of the purpose, in [`Category::ALL`] order.
    pub preferences: Vec<CategoryPreference>,
    /// The first category whose preference refuses the request ("no", or unknown with
    /// [`UnknownUsage::Refuse`]).
    pub refused: Option<Category>,
}

impl UsageDecision {
    /// The decision on `preferences` (one per category of `purpose`).
    pub fn new(
        purpose: Purpose,
        unknown: UnknownUsage,
        preferences: Vec<CategoryPreference>,
    ) -> UsageDecision {
        let refused = preferences
            .iter()
            .find(|p| match p.preference {
                Preference::Disallowed => true,
                Preference::Unknown => unknown == UnknownUsage::Refuse,
                Preference::Allowed => false,
            })
            .map(|p| p.category);
        UsageDecision { purpose, unknown, preferences, refused }
    }

    /// The preference of a category of the purpose.
    pub fn get(&self, category: Category) -> Option<&CategoryPreference> {
        self.preferences.iter().find(|p| p.category == category)
    }
}

impl fmt::Display for UsageDecision {
    /// `purpose train-ai: train-ai: disallowed (line 4: content-usage: train-ai=n)`
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "purpose {}", self.purpose)?;
        for (i, p) in self.preferences.iter().enumerate() {
            f.write_str(if i == 0 { ": " } else { "; " })?;
            write!(f, "{p}")?;
        }
        if let Some(c) = self.refused
            && self.get(c).is_some_and(|p| p.preference == Preference::Unknown)
        {
            write!(f, " (no stated preference for {c}, and unknown preferences are refused)")?;
        }
        Ok(())
    }
}

/// What the policy checks usage for: the purpose and what an unknown preference means.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct UsageCheck {
    /// The purpose (empty: no check).
    pub purpose: Purpose,
    /// What an unknown preference means.
    pub unknown: UnknownUsage,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn purposes_parse_and_print() {
        let p: Purpose = " search , train-ai ".parse().unwrap();
        assert_eq!(p.to_string(), "train-ai,search");
        assert!(p.contains(Category::Search) && !p.contains(Category::AiInput));
        assert_eq!("".parse::<Purpose>().unwrap(), Purpose::NONE);
        assert!("ai-train".parse::<Purpose>().unwrap_err().to_string().contains("train-ai"));
    }
}
