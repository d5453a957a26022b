//! The files of a log: the active file, the files closed by rotation (named by their
//! first and last times), and each one's checkpoint file beside it.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use super::sidecar::SUFFIX;
use super::timestamp::rfc3339;

/// The checkpoint file of the log file `log` (`<log>.checkpoints`).
pub fn checkpoints_path(log: &Path) -> PathBuf {
    let mut name = log.file_name().map(|n| n.to_os_string()).unwrap_or_default();
    name.push(SUFFIX);
    log.with_file_name(name)
}

/// Finishes a rotation the process did not finish: the active file `active` was renamed
/// but its checkpoint file was not (the process stopped between the two renames). The
/// checkpoint file goes beside the newest rotated file, if that one has none, so that the
/// next active file continues the tree from its rotation checkpoint. Returns that file.
pub(super) fn finish_rotation(active: &Path) -> io::Result<Option<PathBuf>> {
    let sidecar = checkpoints_path(active);
    if active.exists() || !sidecar.exists() {
        return Ok(None);
    }
    let Some(last) = rotated_files(active)?.pop() else { return Ok(None) };
    let target = checkpoints_path(&last);
    if target.exists() {
        return Ok(None);
    }
    std::fs::rename(&sidecar, &target)?;
    Ok(Some(last))
}

/// `<stem>.` and `<.ext>` of the active file's name (`audit.jsonl`: `audit.`, `.jsonl`).
fn name_parts(active: &Path) -> (String, String) {
    let name = active.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (format!("{stem}."), format!(".{ext}")),
        _ => (format!("{name}."), String::new()),
    }
}

/// A time as it appears in rotated file names: `20261125T101500.123Z` (RFC 3339's basic
/// form, safe in file names everywhere, sorting as time does).
fn name_time(t: SystemTime) -> String {
    rfc3339(t).chars().filter(|c| !matches!(c, '-' | ':')).collect()
}

/// Where the active file `active` goes when it is closed by rotation: beside it, named
/// `<stem>.<first>--<last><.ext>` by the times of its first and last records (a `-2`,
/// `-3`... is added if that name is taken).
pub(super) fn rotated_path(active: &Path, first: SystemTime, last: SystemTime) -> PathBuf {
    let (stem, ext) = name_parts(active);
    let base = format!("{stem}{}--{}", name_time(first), name_time(last));
    let mut path = active.with_file_name(format!("{base}{ext}"));
    let mut n = 2;
    while path.exists() || checkpoints_path(&path).exists() {
        path = active.with_file_name(format!("{base}-{n}{ext}"));
        n += 1;
    }
    path
}

/// The files of the log whose active file is `active` that were closed by rotation,
/// oldest first (their names sort by time).
pub fn rotated_files(active: &Path) -> io::Result<Vec<PathBuf>> {
    let (stem, ext) = name_parts(active);
    let dir = match active.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let mut found = Vec::new();
    for entry in std::fs::read_dir(&dir)? {
        let name = entry?.file_name().to_string_lossy().into_owned();
        let Some(middle) = name.strip_prefix(&stem).and_then(|r| r.strip_suffix(&ext)) else { continue };
        if middle.contains("--") && !middle.contains('/') && !name.ends_with(SUFFIX) {
            found.push(dir.join(&name));
        }
    }
    // By first time, last time, then the -2, -3... of names taken twice.
    found.sort_by_cached_key(|p| {
        let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
        let middle =
            name.strip_prefix(&stem).and_then(|r| r.strip_suffix(&ext)).unwrap_or_default().to_owned();
        match middle.rsplit_once('-') {
            Some((times, n))
                if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) && !times.ends_with('-') =>
            {
                (times.to_owned(), n.parse::<u64>().unwrap_or(0))
            }
            _ => (middle, 0),
        }
    });
    Ok(found)
}

/// The last whole line of the file at `path` (without its newline), if it has one no
/// longer than `max` bytes; what follows the last newline is ignored.
pub(super) fn last_line(path: &Path, max: u64) -> io::Result<Option<Vec<u8>>> {
    let mut file = match File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let len = file.seek(SeekFrom::End(0))?;
    let Some(end) = newline_before(&mut file, len)? else { return Ok(None) };
    let start = newline_before(&mut file, end)?.map_or(0, |i| i + 1);
    if end - start > max {
        return Ok(None);
    }
    let mut line = vec![0u8; (end - start) as usize];
    file.seek(SeekFrom::Start(start))?;
    file.read_exact(&mut line)?;
    Ok(Some(line))
}

/// The offset of the last newline before `end`, read backwards in blocks.
pub(super) fn newline_before(file: &mut File, end: u64) -> io::Result<Option<u64>> {
    let mut buf = vec![0u8; 64 * 1024];
    let mut at = end;
    while at > 0 {
        let n = buf.len().min(at as usize);
        at -= n as u64;
        file.seek(SeekFrom::Start(at))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|&b| b == b'\n') {
            return Ok(Some(at + i as u64));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn rotated_names_sort_by_time_and_are_found() {
        let dir = tempfile::tempdir().unwrap();
        let active = dir.path().join("audit.jsonl");
        let t = SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_441_017_398);
        let a = rotated_path(&active, t, t + Duration::from_secs(60));
        assert_eq!(a.file_name().unwrap(), "audit.20261123T133657.398Z--20261123T133757.398Z.jsonl");
        std::fs::write(&a, "").unwrap();
        let again = rotated_path(&active, t, t + Duration::from_secs(60));
        assert_eq!(again.file_name().unwrap(), "audit.20261123T133657.398Z--20261123T133757.398Z-2.jsonl");
        std::fs::write(&again, "").unwrap();
        let later = rotated_path(&active, t + Duration::from_secs(60), t + Duration::from_secs(120));
        std::fs::write(&later, "").unwrap();
        std::fs::write(checkpoints_path(&later), "").unwrap();
        std::fs::write(&active, "").unwrap();
        std::fs::write(dir.path().join("other.jsonl"), "").unwrap();
        assert_eq!(rotated_files(&active).unwrap(), [a, again, later]);
        assert_eq!(checkpoints_path(&active).file_name().unwrap(), "audit.jsonl.checkpoints");
    }

    #[test]
    fn last_whole_line() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("f");
        std::fs::write(&p, "a\nbb\ncc").unwrap();
        assert_eq!(last_line(&p, 100).unwrap().unwrap(), b"bb");
        std::fs::write(&p, "only\n").unwrap();
        assert_eq!(last_line(&p, 100).unwrap().unwrap(), b"only");
        assert_eq!(last_line(&p, 2).unwrap(), None);
        std::fs::write(&p, "none").unwrap();
        assert_eq!(last_line(&p, 100).unwrap(), None);
        assert_eq!(last_line(&dir.path().join("absent"), 100).unwrap(), None);
    }
}
