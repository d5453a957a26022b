//! [`RangeList`]: one operator's JSON list of IP prefixes, parsed and checked.

use ipnet::{Ipv4Net, Ipv6Net};
use serde::Deserialize;

use crate::identity::cut;

/// Bounds on a list document.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListLimits {
    /// Bytes of JSON (default 1 MiB; Google's largest list is about 70 KiB).
    pub max_bytes: usize,
    /// Prefixes in one list (default 20,000; Google's largest has about 1,100).
    pub max_prefixes: usize,
    /// The shortest IPv4 prefix accepted (default 8): a wider one would vouch for a
    /// large part of the Internet.
    pub min_v4_len: u8,
    /// The shortest IPv6 prefix accepted (default 16).
    pub min_v6_len: u8,
}

impl Default for ListLimits {
    fn default() -> Self {
        ListLimits { max_bytes: 1024 * 1024, max_prefixes: 20_000, min_v4_len: 8, min_v6_len: 16 }
    }
}

/// One list of prefixes as an operator publishes it (Google's format, which the JAFAR
/// draft codifies): `{"creationTime": "...", "prefixes": [{"ipv4Prefix": "a.b.c.d/n"},
/// {"ipv6Prefix": "x::/n"}]}`. Other members (e.g. `syncToken`) are ignored.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RangeList {
    creation_time: Option<String>,
    v4: Vec<Ipv4Net>,
    v6: Vec<Ipv6Net>,
}

/// Why a list document was refused (the whole document: a list is taken whole or not at
/// all, so a refresh that brings a broken copy keeps the last good one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ListError {
    /// More bytes than [`ListLimits::max_bytes`].
    #[error("list of {len} bytes, more than {max}")]
    TooLarge {
        /// The document's length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// Not JSON (UTF-8), or not an object with a `prefixes` array.
    #[error("not a prefix list: {0}")]
    Syntax(String),
    /// More prefixes than [`ListLimits::max_prefixes`].
    #[error("{count} prefixes, more than {max}")]
    TooManyPrefixes {
        /// How many the document has.
        count: usize,
        /// The limit.
        max: usize,
    },
    /// No prefix at all (an operator's list is never empty: taking it would drop every
    /// address of the operator).
    #[error("no prefixes")]
    Empty,
    /// One entry is malformed.
    #[error("prefix {index} ({entry}): {reason}")]
    BadEntry {
        /// The entry's position in `prefixes` (from 0).
        index: usize,
        /// The entry as written (JSON, shortened to 80 characters).
        entry: String,
        /// What is wrong with it.
        reason: EntryProblem,
    },
}

/// What is wrong with one entry of a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum EntryProblem {
    /// Not an object with an `ipv4Prefix` or `ipv6Prefix` string.
    #[error("no ipv4Prefix or ipv6Prefix string")]
    NoPrefix,
    /// Not a prefix (`address/length`) of the named family.
    #[error("not a prefix of its family")]
    Malformed,
    /// The address has bits set past the prefix length (`192.0.2.1/24`): a typo the list
    /// should not be trusted past.
    #[error("host bits set")]
    HostBits,
    /// Shorter than [`ListLimits::min_v4_len`] / [`ListLimits::min_v6_len`].
    #[error("prefix too wide")]
    TooWide,
}

#[derive(Deserialize)]
struct Document {
    #[serde(rename = "creationTime", default)]
    creation_time: Option<serde_json::Value>,
    prefixes: Vec<serde_json::Value>,
}

impl RangeList {
    /// Parses and checks a list document within `limits`.
    pub fn parse(json: &[u8], limits: &ListLimits) -> Result<RangeList, ListError> {
        if json.len() > limits.max_bytes {
            return Err(ListError::TooLarge { len: json.len(), max: limits.max_bytes });
        }
        // JSON is UTF-8 (RFC 8259): serde_json checks only the strings it keeps, not those
        // of members it skips.
        let json = std::str::from_utf8(json).map_err(|e| ListError::Syntax(format!("not UTF-8: {e}")))?;
        // The document is an object: serde's derived `Document` would take an array too
        // (`[creationTime, prefixes]`, its fields in order), which no list is.
        if json.trim_start_matches([' ', '\t', '\n', '\r']).as_bytes().first() != Some(&b'{') {
            return Err(ListError::Syntax("not a JSON object".into()));
        }
        let doc: Document = serde_json::from_str(json).map_err(|e| syntax(&e))?;
        if doc.prefixes.len() > limits.max_prefixes {
            return Err(ListError::TooManyPrefixes { count: doc.prefixes.len(), max: limits.max_prefixes });
        }
        if doc.prefixes.is_empty() {
            return Err(ListError::Empty);
        }
        let mut list = RangeList {
            creation_time: doc.creation_time.and_then(|t| t.as_str().map(str::to_owned)),
            v4: Vec::new(),
            v6: Vec::new(),
        };
        for (index, entry) in doc.prefixes.iter().enumerate() {
            let bad = |reason| ListError::BadEntry { index, entry: shorten(entry), reason };
            let v4 = entry.get("ipv4Prefix");
            let v6 = entry.get("ipv6Prefix");
            if v4.is_none() && v6.is_none() {
                return Err(bad(EntryProblem::NoPrefix));
            }
            if let Some(v4) = v4 {
                let text = v4.as_str().ok_or(bad(EntryProblem::NoPrefix))?;
                let net: Ipv4Net = text.trim().parse().map_err(|_| bad(EntryProblem::Malformed))?;
                check(net.trunc() == net, net.prefix_len() >= limits.min_v4_len).map_err(bad)?;
                list.v4.push(net);
            }
            if let Some(v6) = v6 {
                let text = v6.as_str().ok_or(bad(EntryProblem::NoPrefix))?;
                let net: Ipv6Net = text.trim().parse().map_err(|_| bad(EntryProblem::Malformed))?;
                check(net.trunc() == net, net.prefix_len() >= limits.min_v6_len).map_err(bad)?;
                list.v6.push(net);
            }
        }
        Ok(list)
    }

    /// A list of these prefixes (no `creationTime`), checked as a parsed one is: for
    /// lists built in code.
    #[cfg(test)]
    pub(crate) fn from_prefixes(
        prefixes: impl IntoIterator<Item = ipnet::IpNet>,
        limits: &ListLimits,
    ) -> Result<RangeList, ListError> {
        let entries: Vec<serde_json::Value> = prefixes
            .into_iter()
            .map(|net| match net {
                ipnet::IpNet::V4(n) => serde_json::json!({ "ipv4Prefix": n.to_string() }),
                ipnet::IpNet::V6(n) => serde_json::json!({ "ipv6Prefix": n.to_string() }),
            })
            .collect();
        let json = serde_json::json!({ "prefixes": entries }).to_string();
        RangeList::parse(json.as_bytes(), &ListLimits { max_bytes: usize::MAX, ..*limits })
    }

    /// The list's `creationTime`, as written.
    pub fn creation_time(&self) -> Option<&str> {
        self.creation_time.as_deref()
    }

    /// The IPv4 prefixes, in the list's order.
    pub fn v4(&self) -> &[Ipv4Net] {
        &self.v4
    }

    /// The IPv6 prefixes, in the list's order.
    pub fn v6(&self) -> &[Ipv6Net] {
        &self.v6
    }

    /// How many prefixes.
    pub fn len(&self) -> usize {
        self.v4.len() + self.v6.len()
    }

    /// Whether it has none (never, for a parsed list).
    #[cfg(test)]
    pub(crate) fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `Ok` when the prefix is canonical and not too wide.
fn check(canonical: bool, long_enough: bool) -> Result<(), EntryProblem> {
    if !canonical {
        Err(EntryProblem::HostBits)
    } else if !long_enough {
        Err(EntryProblem::TooWide)
    } else {
        Ok(())
    }
}

/// An entry as JSON, at most 80 characters of it.
fn shorten(entry: &serde_json::Value) -> String {
    let mut text = match entry {
        serde_json::Value::Object(map) if map.len() == 1 => {
            map.values().next().map(ToString::to_string).unwrap_or_default()
        }
        other => other.to_string(),
    };
    cut(&mut text, 80);
    text
}

/// serde_json's reason, at most 120 bytes of it and then its place: a value of the
/// wrong type is quoted whole in it (`invalid type: string "…"`), and the reason goes to
/// the log and to [`ListStatus`](super::ListStatus).
fn syntax(e: &serde_json::Error) -> ListError {
    let mut text = e.to_string();
    let at = format!(" at line {} column {}", e.line(), e.column());
    if let Some(reason) = text.strip_suffix(&at) {
        let mut reason = reason.to_owned();
        cut(&mut reason, 120);
        reason.push_str(&at);
        text = reason;
    } else {
        cut(&mut text, 120);
    }
    ListError::Syntax(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_documented_list_parses_and_a_bad_entry_is_named() {
        let json = br#"{"creationTime": "2026-08-20T14:46:45.000000", "syncToken": "1",
          "prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv6Prefix": "2001:4860:4801:10::/64"}]}"#;
        let list = RangeList::parse(json, &ListLimits::default()).unwrap();
        assert_eq!(list.creation_time(), Some("2026-08-20T14:46:45.000000"));
        assert_eq!((list.v4().len(), list.v6().len()), (1, 1));
        let bad = br#"{"prefixes": [{"ipv4Prefix": "66.249.64.0/27"}, {"ipv4Prefix": "66.249.64.1/27"}]}"#;
        let err = RangeList::parse(bad, &ListLimits::default()).unwrap_err();
        assert_eq!(err.to_string(), "prefix 1 (\"66.249.64.1/27\"): host bits set");
    }

    fn parse(json: &str) -> Result<RangeList, ListError> {
        RangeList::parse(json.as_bytes(), &ListLimits::default())
    }

    fn entry_problem(json: &str) -> (usize, EntryProblem) {
        match parse(json) {
            Err(ListError::BadEntry { index, reason, .. }) => (index, reason),
            other => panic!("expected a bad entry, got {other:?}"),
        }
    }

    #[test]
    fn tolerates_unknown_members_and_missing_creation_time() {
        let list = parse(
            r#"{"syncToken": "17", "prefixes": [{"ipv4Prefix": "192.0.2.0/24", "service": "x"},
                {"ipv6Prefix": "2001:db8::/32"}, {"ipv4Prefix": "198.51.100.7/32", "ipv6Prefix": "2001:db8:1::/48"}]}"#,
        )
        .unwrap();
        assert_eq!(list.creation_time(), None);
        assert_eq!(list.v4().len(), 2);
        assert_eq!(list.v6().len(), 2);
        assert_eq!(list.len(), 4);
    }

    #[test]
    fn refuses_malformed_entries_naming_them() {
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}, {"ipv4Prefix": 42}]}"#),
            (1, EntryProblem::NoPrefix)
        );
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "2001:db8::/32"}]}"#),
            (0, EntryProblem::Malformed)
        );
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv6Prefix": "192.0.2.0/24"}]}"#),
            (0, EntryProblem::Malformed)
        );
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/33"}]}"#),
            (0, EntryProblem::Malformed)
        );
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0"}]}"#),
            (0, EntryProblem::Malformed)
        );
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "192.0.2.1/24"}]}"#),
            (0, EntryProblem::HostBits)
        );
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "0.0.0.0/0"}]}"#),
            (0, EntryProblem::TooWide)
        );
        assert_eq!(entry_problem(r#"{"prefixes": [{"ipv6Prefix": "::/0"}]}"#), (0, EntryProblem::TooWide));
        assert_eq!(
            entry_problem(r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}, {}]}"#),
            (1, EntryProblem::NoPrefix)
        );
        assert_eq!(entry_problem(r#"{"prefixes": ["192.0.2.0/24"]}"#), (0, EntryProblem::NoPrefix));
        let long = format!(r#"{{"prefixes": [{{"ipv4Prefix": "{}"}}]}}"#, "9".repeat(200));
        match parse(&long) {
            Err(e @ ListError::BadEntry { .. }) => assert!(e.to_string().len() < 140, "{e}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn refuses_documents_that_are_not_lists_or_too_big() {
        assert!(matches!(parse("[]"), Err(ListError::Syntax(_))));
        assert!(matches!(parse(r#"{"creationTime": "x"}"#), Err(ListError::Syntax(_))));
        assert!(matches!(parse(r#"{"prefixes": {}}"#), Err(ListError::Syntax(_))));
        assert!(matches!(parse("{\"prefixes\": ["), Err(ListError::Syntax(_))));
        // serde's derived struct takes an array of its fields in order; a list is an object.
        let array = r#" [null, [{"ipv4Prefix": "192.0.2.0/24"}]]"#;
        assert_eq!(parse(array), Err(ListError::Syntax("not a JSON object".into())));
        // Bytes that are not UTF-8 in a member serde skips (found by fuzz/range_lists).
        let skipped = b"{\"note\": \"\xb7\", \"prefixes\": [{\"ipv4Prefix\": \"192.0.2.0/24\"}]}";
        match RangeList::parse(skipped, &ListLimits::default()) {
            Err(ListError::Syntax(text)) => assert!(text.starts_with("not UTF-8"), "{text}"),
            other => panic!("{other:?}"),
        }
        // A value of the wrong type is quoted by serde_json; the reason is cut, its place kept.
        let quoted = format!(r#"{{"prefixes": "{}é"}}"#, "x".repeat(5000));
        match parse(&quoted) {
            Err(ListError::Syntax(text)) => {
                assert!(text.starts_with("invalid type: string \"xxx"), "{text}");
                assert!(text.ends_with("... at line 1 column 5017"), "{text}");
                assert!(text.len() <= 150, "{} bytes", text.len());
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(parse(r#"{"prefixes": []}"#), Err(ListError::Empty));
        let limits = ListLimits { max_bytes: 64, max_prefixes: 2, ..ListLimits::default() };
        let big = format!(r#"{{"prefixes": [], "pad": "{}"}}"#, "x".repeat(64));
        assert_eq!(
            RangeList::parse(big.as_bytes(), &limits),
            Err(ListError::TooLarge { len: big.len(), max: 64 })
        );
        let three = r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24"},{},{}]}"#;
        assert_eq!(
            RangeList::parse(three.as_bytes(), &ListLimits { max_prefixes: 2, ..ListLimits::default() }),
            Err(ListError::TooManyPrefixes { count: 3, max: 2 })
        );
    }
}
