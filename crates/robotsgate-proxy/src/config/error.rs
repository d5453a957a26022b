//! Configuration errors ([`ConfigError`]) and where in the text they are: file, line,
//! column and key.

use std::fmt;

/// A configuration problem, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `"<built-in>"`).
    pub file: String,
    /// 1-based line and column, when known.
    pub line: Option<(usize, usize)>,
    /// The key, e.g. `policy.min_ttl`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.line {
            write!(f, ":{line}:{col}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// A TOML error as a [`ConfigError`] with line, column and key.
pub(super) fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|span| line_col(text, span.start));
    // toml names the key in its long form; keep the message short and add the key path
    // found at that position.
    let key = e.span().and_then(|span| key_at(text, span.start));
    ConfigError { file: file.to_owned(), line, key, message: e.message().trim().to_owned() }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, col)
}

/// The dotted key whose line contains `offset` (`section.key`), from the text.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let mut section = String::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        let t = line.trim();
        if t.starts_with('[') {
            section = t.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
        }
        if offset < end {
            let key = t.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_owned());
            return Some(match (key, section.is_empty()) {
                (Some(k), true) => k,
                (Some(k), false) => format!("{section}.{k}"),
                (None, _) => section,
            });
        }
        start = end;
    }
    None
}

/// Where the `n`-th (from 0) `[[table]]` header is, if it is.
pub(super) fn find_table(text: &str, table: &str, n: usize) -> Option<(usize, usize)> {
    text.lines()
        .enumerate()
        .filter(|(_, line)| {
            let t = line.trim();
            t.starts_with("[[") && t.trim_matches(|c| c == '[' || c == ']').trim() == table
        })
        .nth(n)
        .map(|(i, line)| (i + 1, line.len() - line.trim_start().len() + 1))
}

/// Where `section.key` is set in the text, if it is.
pub(super) fn find_key(text: &str, dotted: &str) -> Option<(usize, usize)> {
    let (section, key) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let mut current = String::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            current = t.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
            continue;
        }
        if current == section && t.split_once('=').is_some_and(|(k, _)| k.trim() == key) {
            return Some((n + 1, line.len() - line.trim_start().len() + 1));
        }
    }
    None
}
