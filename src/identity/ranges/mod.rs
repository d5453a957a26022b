//! Published IP ranges: the operators' JSON lists of their bots' addresses, in Google's
//! format (codified by the JAFAR draft), kept loaded and looked up by longest-prefix match.
//!
//! - each list document is parsed and checked within [`ListLimits`] (taken
//!   whole or refused whole, with a [`ListError`] naming the bad entry).
//! - [`RangeTable`]: which lists cover an address (a path-compressed binary trie per
//!   address family); IPv4-mapped IPv6 addresses are looked up as IPv4.
//! - [`Ranges`]: the lists in use ([`ListSource`]s: URLs, with their [bundled] copy, or
//!   files), the table built from them and swapped atomically when one changes; cheap to
//!   clone and share.
//! - [`refresh`]: the task that keeps URL lists fresh (conditional GET, jitter, back-off,
//!   the last good copy kept) and re-reads file lists.
//!
//! ```
//! use robotsgate::identity::ranges::{ListSource, Ranges, ListLimits, bundled};
//! let ranges = Ranges::new(
//!     vec![ListSource::new(bundled::OPENAI_GPTBOT, "OpenAI")],
//!     ListLimits::default(),
//! );
//! let table = ranges.table();
//! let hit: Vec<_> = table.lookup("20.171.206.10".parse().unwrap()).collect();
//! assert_eq!(hit[0].operator().as_ref(), "OpenAI");
//! assert_eq!(hit[0].name().as_ref(), "https://openai.com/gptbot.json");
//! assert!(table.lookup("192.0.2.1".parse().unwrap()).next().is_none());
//! ```

pub mod bundled;
mod list;
pub mod refresh;
mod table;

use std::fmt;
use std::io::Read;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use arc_swap::ArcSwap;

pub use list::EntryProblem;
pub(crate) use list::RangeList;
pub use list::{ListError, ListLimits};
pub use table::{ListInfo, RangeTable};

/// Where a list comes from.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Location {
    /// An `http`/`https` URL: the bundled copy (if any) at first, then what the refresher
    /// fetches.
    Url(String),
    /// A regular file on this machine (not a FIFO or a device): read at start and re-read
    /// by the refresher.
    File(PathBuf),
}

impl Location {
    /// A URL when `s` starts with `http://` or `https://`, else a file path.
    pub fn parse(s: &str) -> Location {
        let lower = s.trim_start().get(..8).map(str::to_ascii_lowercase).unwrap_or_default();
        if lower.starts_with("http://") || lower.starts_with("https://") {
            Location::Url(s.trim().to_owned())
        } else {
            Location::File(PathBuf::from(s))
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Location::Url(u) => f.write_str(u),
            Location::File(p) => write!(f, "{}", p.display()),
        }
    }
}

/// One list to keep loaded: where it is and whose addresses it holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListSource {
    /// The list's name, as configured (its URL or path).
    pub name: Arc<str>,
    /// The operator whose bots use the addresses.
    pub operator: Arc<str>,
    /// Where it comes from.
    pub location: Location,
}

impl ListSource {
    /// The list at `url_or_path` (see [`Location::parse`]), of `operator`.
    pub fn new(url_or_path: &str, operator: &str) -> ListSource {
        ListSource {
            name: Arc::from(url_or_path),
            operator: Arc::from(operator),
            location: Location::parse(url_or_path),
        }
    }
}

/// Where the copy of a list in use came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Provenance {
    /// The copy bundled with the library, taken on this day.
    Bundled {
        /// The day (from the bundled snapshot's notes).
        taken: &'static str,
    },
    /// Fetched from the list's URL.
    Fetched {
        /// When.
        at: SystemTime,
    },
    /// Read from the list's file.
    File {
        /// When.
        at: SystemTime,
    },
}

/// The state of one list.
#[derive(Debug, Clone)]
pub struct ListStatus {
    /// The list.
    pub source: ListSource,
    /// Where the copy in use came from; `None` when there is none (no bundled copy and
    /// nothing fetched or read yet, or only broken copies).
    pub provenance: Option<Provenance>,
    /// The copy's `creationTime`.
    pub creation_time: Option<String>,
    /// The copy's prefixes.
    pub prefixes: usize,
    /// Why the last fetch or read failed, if it did (the copy in use is kept).
    pub last_error: Option<String>,
}

/// The lists in use and the table built from them.
///
/// Cheap to clone (one reference count); every clone sees the same lists. Lookups read
/// the current [`RangeTable`] without locking; a new copy of a list (from the
/// [refresher](refresh)) builds a new table off the request path and swaps it in.
#[derive(Clone)]
pub struct Ranges {
    inner: Arc<Inner>,
}

struct Inner {
    table: ArcSwap<RangeTable>,
    sources: Vec<ListSource>,
    limits: ListLimits,
    /// Per source, the copy in use and the last error; the lock also serialises rebuilds.
    copies: Mutex<Vec<Copy>>,
}

#[derive(Debug, Clone, Default)]
struct Copy {
    list: Option<Arc<RangeList>>,
    provenance: Option<Provenance>,
    last_error: Option<String>,
}

impl fmt::Debug for Ranges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Ranges").field("sources", &self.inner.sources).finish_non_exhaustive()
    }
}

impl Ranges {
    /// The lists of `sources`, loaded now: URL lists from their [bundled] copy (none
    /// until fetched when there is no bundled copy), file lists read from disk (a file that
    /// cannot be read or parsed is recorded in [`Ranges::status`] and left out).
    pub fn new(sources: Vec<ListSource>, limits: ListLimits) -> Ranges {
        let copies = sources
            .iter()
            .map(|source| match &source.location {
                Location::Url(url) => match bundled::bundled(url) {
                    Some(b) => match RangeList::parse(b.json.as_bytes(), &limits) {
                        Ok(list) => Copy {
                            list: Some(Arc::new(list)),
                            provenance: Some(Provenance::Bundled { taken: b.taken }),
                            last_error: None,
                        },
                        Err(e) => Copy { last_error: Some(format!("bundled copy: {e}")), ..Copy::default() },
                    },
                    None => Copy::default(),
                },
                Location::File(path) => match read_file(path, &limits) {
                    Ok(list) => Copy {
                        list: Some(Arc::new(list)),
                        provenance: Some(Provenance::File { at: SystemTime::now() }),
                        last_error: None,
                    },
                    Err(e) => Copy { last_error: Some(e), ..Copy::default() },
                },
            })
            .collect::<Vec<_>>();
        let table = build(&sources, &copies);
        Ranges {
            inner: Arc::new(Inner {
                table: ArcSwap::from_pointee(table),
                sources,
                limits,
                copies: Mutex::new(copies),
            }),
        }
    }

    /// The table in use (a snapshot: later swaps do not change it).
    pub fn table(&self) -> Arc<RangeTable> {
        self.inner.table.load_full()
    }

    /// `f` of the table in use, without taking a reference count (the request path).
    pub(crate) fn with_table<R>(&self, f: impl FnOnce(&RangeTable) -> R) -> R {
        f(&self.inner.table.load())
    }

    /// The configured lists.
    pub fn sources(&self) -> &[ListSource] {
        &self.inner.sources
    }

    /// The limits every copy is parsed within.
    pub fn limits(&self) -> &ListLimits {
        &self.inner.limits
    }

    /// The state of every list, in the order of [`Ranges::sources`].
    pub fn status(&self) -> Vec<ListStatus> {
        let copies = self.lock();
        self.inner
            .sources
            .iter()
            .zip(copies.iter())
            .map(|(source, copy)| ListStatus {
                source: source.clone(),
                provenance: copy.provenance.clone(),
                creation_time: copy.list.as_ref().and_then(|l| l.creation_time().map(str::to_owned)),
                prefixes: copy.list.as_ref().map_or(0, |l| l.len()),
                last_error: copy.last_error.clone(),
            })
            .collect()
    }

    /// Puts `list` in use for source `index` and swaps in a table built with it.
    pub(crate) fn install(&self, index: usize, list: RangeList, provenance: Provenance) {
        let mut copies = self.lock();
        let Some(copy) = copies.get_mut(index) else { return };
        *copy = Copy { list: Some(Arc::new(list)), provenance: Some(provenance), last_error: None };
        let table = build(&self.inner.sources, &copies);
        self.inner.table.store(Arc::new(table));
    }

    /// Records why source `index` could not be refreshed (its copy stays in use).
    pub(crate) fn record_error(&self, index: usize, error: Option<String>) {
        if let Some(copy) = self.lock().get_mut(index) {
            copy.last_error = error;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Copy>> {
        // A panic while holding the lock cannot leave the copies half-written (each
        // update is one assignment): go on with them.
        self.inner.copies.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// The table of every source that has a copy.
fn build(sources: &[ListSource], copies: &[Copy]) -> RangeTable {
    let mut builder = RangeTable::builder();
    for (source, copy) in sources.iter().zip(copies) {
        if let Some(list) = &copy.list {
            builder.add(source.name.clone(), source.operator.clone(), list);
        }
    }
    builder.build()
}

/// Reads and parses a list file, at most `limits.max_bytes` of it.
fn read_file(path: &std::path::Path, limits: &ListLimits) -> Result<RangeList, String> {
    let bytes = read_list_file(path, limits.max_bytes)?;
    RangeList::parse(&bytes, limits).map_err(|e| format!("{}: {e}", path.display()))
}

/// The bytes of a list file, at most `max_bytes` of them, read only from a regular file:
/// opening a FIFO waits for a writer, and a device (`/dev/zero`) may never end.
pub(crate) fn read_list_file(path: &std::path::Path, max_bytes: usize) -> Result<Vec<u8>, String> {
    let at = |e: std::io::Error| format!("{}: {e}", path.display());
    if !std::fs::metadata(path).map_err(at)?.is_file() {
        return Err(format!("{}: not a regular file", path.display()));
    }
    let file = std::fs::File::open(path).map_err(at)?;
    let mut bytes = Vec::new();
    file.take(max_bytes as u64 + 1).read_to_end(&mut bytes).map_err(at)?;
    if bytes.len() > max_bytes {
        return Err(format!("{}: more than {max_bytes} bytes", path.display()));
    }
    Ok(bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locations() {
        assert_eq!(
            Location::parse("https://openai.com/gptbot.json"),
            Location::Url("https://openai.com/gptbot.json".into())
        );
        assert_eq!(Location::parse("HTTP://x.test/a.json"), Location::Url("HTTP://x.test/a.json".into()));
        assert_eq!(
            Location::parse("/etc/robotsgate/gptbot.json"),
            Location::File("/etc/robotsgate/gptbot.json".into())
        );
        assert_eq!(Location::parse("lists/http.json"), Location::File("lists/http.json".into()));
    }

    #[test]
    fn files_override_and_failures_are_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let good = dir.path().join("gptbot.json");
        std::fs::write(&good, r#"{"prefixes": [{"ipv4Prefix": "192.0.2.0/24"}]}"#).unwrap();
        let bad = dir.path().join("bad.json");
        std::fs::write(&bad, r#"{"prefixes": [{"ipv4Prefix": "192.0.2.1/24"}]}"#).unwrap();
        let missing = dir.path().join("missing.json");
        let ranges = Ranges::new(
            vec![
                ListSource::new(good.to_str().unwrap(), "OpenAI"),
                ListSource::new(bad.to_str().unwrap(), "Bad"),
                ListSource::new(missing.to_str().unwrap(), "Missing"),
                ListSource::new("https://example.test/unbundled.json", "Nobody"),
            ],
            ListLimits::default(),
        );
        let table = ranges.table();
        let hit: Vec<_> =
            table.lookup("192.0.2.7".parse().unwrap()).map(|l| l.operator().to_string()).collect();
        assert_eq!(hit, ["OpenAI"]);
        // The file replaces the bundled list: GPTBot's published addresses are not there.
        assert!(table.lookup("20.171.206.10".parse().unwrap()).next().is_none());
        let status = ranges.status();
        assert!(matches!(status[0].provenance, Some(Provenance::File { .. })));
        assert_eq!(status[0].prefixes, 1);
        assert!(status[1].provenance.is_none());
        assert!(status[1].last_error.as_deref().unwrap().contains("host bits set"), "{:?}", status[1]);
        assert!(status[2].last_error.is_some());
        assert!(status[3].provenance.is_none() && status[3].last_error.is_none());
        assert_eq!(table.lists().len(), 1);
    }
}
