//! Opening a log file for appending, and how the previous process left it: cleanly (its
//! last record is a `close`), uncleanly (killed or crashed: no `close`), or torn (a crash
//! or a full disk stopped a write partway through a line). A torn last line is ended with
//! a newline before anything is appended, so the next record starts on a line of its own
//! instead of being glued to the fragment, and the `open` record says what was found.

use std::fs::{File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use super::record::{LogEvent, LogRecord};

/// How the previous process left the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum PreviousRun {
    /// Empty or absent.
    New,
    /// It ended with a `close` record.
    Clean,
    /// It ended with a whole line that is not a `close` record.
    Unclean,
    /// It ended partway through a line of this many bytes.
    Torn(u64),
}

impl PreviousRun {
    fn as_str(self) -> &'static str {
        match self {
            PreviousRun::New => "new",
            PreviousRun::Clean => "clean",
            PreviousRun::Unclean => "unclean",
            PreviousRun::Torn(_) => "torn",
        }
    }

    /// The `open` record saying so.
    pub(super) fn record(self, durability: &'static str) -> LogRecord {
        LogRecord::now(LogEvent::Open {
            previous_run: self.as_str(),
            fragment_bytes: match self {
                PreviousRun::Torn(n) => Some(n),
                _ => None,
            },
            version: env!("CARGO_PKG_VERSION"),
            durability,
        })
    }
}

/// A log file opened for appending.
pub(super) struct Opened {
    pub(super) file: File,
    pub(super) previous: PreviousRun,
}

/// How far back the last line is looked for; a longer last line is not ours.
const LAST_LINE_MAX: u64 = 1 << 20;

/// Opens (or creates) the log at `path` for appending, ending a torn last line.
pub(super) fn open_log(path: &Path) -> io::Result<Opened> {
    let mut file = OpenOptions::new().create(true).read(true).append(true).open(path)?;
    let previous = previous_run(&mut file)?;
    if let PreviousRun::Torn(_) = previous {
        file.write_all(b"\n")?;
    }
    Ok(Opened { file, previous })
}

/// Reads how `file` ends.
fn previous_run(file: &mut File) -> io::Result<PreviousRun> {
    let len = file.seek(SeekFrom::End(0))?;
    if len == 0 {
        return Ok(PreviousRun::New);
    }
    let mut last = [0u8];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    if last[0] != b'\n' {
        let line_start = line_start_before(file, len)?;
        return Ok(PreviousRun::Torn(len - line_start));
    }
    // The last whole line: is it a `close` record?
    let start = line_start_before(file, len - 1)?;
    if len - start > LAST_LINE_MAX {
        return Ok(PreviousRun::Unclean);
    }
    let mut line = vec![0u8; (len - 1 - start) as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut line)?;
    Ok(if is_close_record(&line) { PreviousRun::Clean } else { PreviousRun::Unclean })
}

/// The offset just after the last newline before `end` (0 if there is none).
fn line_start_before(file: &mut File, end: u64) -> io::Result<u64> {
    Ok(super::files::newline_before(file, end)?.map_or(0, |i| i + 1))
}

/// Whether `line` is the log's `close` record.
pub(super) fn is_close_record(line: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Kind<'a> {
        #[serde(rename = "type", borrow)]
        kind: Option<&'a str>,
        #[serde(borrow)]
        event: Option<&'a str>,
    }
    serde_json::from_slice::<Kind<'_>>(line).is_ok_and(|k| k.kind == Some("log") && k.event == Some("close"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opened_with(content: &[u8]) -> (tempfile::TempDir, std::path::PathBuf, PreviousRun) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("audit.jsonl");
        if !content.is_empty() {
            std::fs::write(&path, content).unwrap();
        }
        let opened = open_log(&path).unwrap();
        (dir, path, opened.previous)
    }

    /// A file that ends partway through a line gets a newline, so what comes next is a
    /// line of its own; the fragment is measured. Complete files are left as they are.
    #[test]
    fn how_the_previous_run_left_the_file() {
        let (_d, path, previous) = opened_with(b"");
        assert_eq!(previous, PreviousRun::New);
        assert_eq!(std::fs::read(&path).unwrap(), b"");

        let close = br#"{"schema_version":2,"type":"log","time":"x","event":"close"}"#;
        let mut clean = b"{\"type\":\"decision\"}\n".to_vec();
        clean.extend_from_slice(close);
        clean.push(b'\n');
        let (_d, path, previous) = opened_with(&clean);
        assert_eq!(previous, PreviousRun::Clean);
        assert_eq!(std::fs::read(&path).unwrap(), clean, "left as it was");

        let unclean = b"{\"type\":\"decision\"}\n{\"type\":\"decision\"}\n";
        let (_d, _, previous) = opened_with(unclean);
        assert_eq!(previous, PreviousRun::Unclean);

        let torn = b"{\"type\":\"decision\"}\n{\"type\":\"deci";
        let (_d, path, previous) = opened_with(torn);
        assert_eq!(previous, PreviousRun::Torn(b"{\"type\":\"deci".len() as u64));
        let mut repaired = torn.to_vec();
        repaired.push(b'\n');
        assert_eq!(std::fs::read(&path).unwrap(), repaired, "the fragment ends with a newline");

        // A fragment longer than a read block, with no newline at all in the file.
        let long = vec![b'x'; 200_000];
        let (_d, _, previous) = opened_with(&long);
        assert_eq!(previous, PreviousRun::Torn(200_000));
        // What power loss can leave: zeros where the last write was.
        let zeros = [b"{\"a\":1}\n".as_slice(), &[0u8; 4096]].concat();
        let (_d, _, previous) = opened_with(&zeros);
        assert_eq!(previous, PreviousRun::Torn(4096));
    }
}
