//! The audit log's writing: group commit under each durability, write errors, how a file
//! is opened and closed.

use std::future::{Future, poll_fn};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::Poll;
use std::time::Duration;

use super::record::get;
use super::*;
use crate::origin::Origin;
use crate::policy::{Decision, copy_of, decision_on};

fn decision(path: &str) -> Decision {
    let origin = Arc::new(Origin::parse("https://example.com").unwrap());
    let copy = copy_of(&origin, "User-agent: *\nDisallow: /private\n");
    decision_on(&copy, &origin, &Arc::from("somebot"), crate::rep::Profile::Google, path)
}

async fn file_log(dir: &Path, durability: Durability) -> (AuditLog, PathBuf) {
    let path = dir.join("audit.jsonl");
    let config = AuditConfig { target: Target::File(path.clone()), durability, ..AuditConfig::default() };
    (AuditLog::start(config).await.unwrap(), path)
}

fn lines(path: &Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or(serde_json::Value::Null))
        .collect()
}

fn decisions(path: &Path) -> usize {
    lines(path).iter().filter(|r| r["type"] == "decision").count()
}

/// Polls `fut` once with the calling task's waker.
async fn poll_once<F: Future + Unpin>(fut: &mut F) -> Poll<F::Output> {
    poll_fn(|cx| Poll::Ready(Pin::new(&mut *fut).poll(cx))).await
}

/// Takes the write turn as the audit thread does, so that nobody can write.
fn hold_turn(log: &AuditLog) {
    let core = log.core();
    drop(core.acquire(core.lock()));
}

/// Waits (bounded, real time) until `cond` holds.
async fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while !cond() {
        assert!(std::time::Instant::now() < deadline, "{what}: not within 20 s");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// `written`: when a request goes on, its record is in the file (no flush asked for).
#[tokio::test]
async fn a_record_is_in_the_file_when_its_request_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Written).await;
    for (i, p) in ["/", "/private", "/x"].into_iter().enumerate() {
        let url = format!("https://example.com{p}");
        log.log_decision(&decision(p), get(&url, false)).await.unwrap();
        assert_eq!(decisions(&path), i + 1, "record {} is in the file", i + 1);
    }
}

/// The records of requests running at the same moment go out in one write: a hundred
/// requests on one event loop, one `write(2)`.
#[tokio::test]
async fn one_write_for_the_records_of_a_moment() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Written).await;
    let d = Arc::new(decision("/x"));
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let (log, d) = (log.clone(), d.clone());
            tokio::spawn(async move {
                let url = format!("https://example.com/x/{i}");
                log.log_decision(&d, get(&url, false)).await
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(decisions(&path), 100);
    assert_eq!(log.core().writes.load(Ordering::Relaxed), 1, "one write for all");
    assert_eq!(log.written(), 100);
}

/// `synced`: the same, with one sync for them all.
#[tokio::test]
async fn one_sync_for_the_records_of_a_moment() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Synced).await;
    let d = Arc::new(decision("/x"));
    let tasks: Vec<_> = (0..100)
        .map(|i| {
            let (log, d) = (log.clone(), d.clone());
            tokio::spawn(async move {
                let url = format!("https://example.com/x/{i}");
                log.log_decision(&d, get(&url, false)).await
            })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(decisions(&path), 100);
    assert_eq!(log.core().writes.load(Ordering::Relaxed), 1);
    assert_eq!(log.core().syncs.load(Ordering::Relaxed), 1, "one sync for all");
}

/// While nobody can write, a request waits (`written`, `synced`), or goes on at once
/// (`buffered`); its record follows when writing can go on.
#[tokio::test]
async fn requests_wait_for_their_write_unless_buffered() {
    for durability in [Durability::Written, Durability::Synced, Durability::Buffered] {
        let dir = tempfile::tempdir().unwrap();
        let (log, path) = file_log(dir.path(), durability).await;
        hold_turn(&log);
        let d = decision("/x");
        let mut request = Box::pin(log.log_decision(&d, get("https://example.com/x", false)));
        let first = poll_once(&mut request).await;
        if durability == Durability::Buffered {
            assert!(matches!(first, Poll::Ready(Ok(()))), "buffered: goes on at once");
        } else {
            assert!(first.is_pending(), "{durability:?}: waits while its record cannot be written");
            assert!(poll_once(&mut request).await.is_pending(), "and goes on waiting");
        }
        assert_eq!(decisions(&path), 0, "{durability:?}: nothing written yet");
        log.core().release_thread_turn();
        if durability != Durability::Buffered {
            request.await.unwrap();
            assert_eq!(decisions(&path), 1, "{durability:?}: written when it goes on");
        } else {
            eventually("the buffered record is written", || decisions(&path) == 1).await;
        }
    }
}

/// The URLs of the decision records in the log at `path`, in order.
fn decision_urls(path: &Path) -> Vec<serde_json::Value> {
    lines(path).into_iter().filter(|r| r["type"] == "decision").map(|r| r["url"].clone()).collect()
}

/// A request that leads a write and is dropped before writing (its client went away)
/// hands the turn on: the next request writes both records.
#[tokio::test]
async fn a_leader_dropped_before_writing_hands_the_turn_on() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Written).await;
    let (a, b) = (decision("/a"), decision("/b"));
    let mut leader = Box::pin(log.log_decision(&a, get("https://example.com/a", false)));
    assert!(poll_once(&mut leader).await.is_pending(), "the leader yields before writing");
    let mut follower = Box::pin(log.log_decision(&b, get("https://example.com/b", false)));
    assert!(poll_once(&mut follower).await.is_pending(), "the turn is taken: the follower waits");
    drop(leader);
    tokio::time::timeout(Duration::from_secs(20), follower).await.expect("the follower goes on").unwrap();
    assert_eq!(decision_urls(&path), ["https://example.com/a", "https://example.com/b"]);
}

/// A record is appended when `log_decision` is called, and the write turn its leader
/// takes then is handed on if the wait is dropped before it was ever polled.
#[tokio::test]
async fn a_leader_dropped_before_its_first_poll_hands_the_turn_on() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Written).await;
    let (a, b) = (decision("/a"), decision("/b"));
    let leader = log.log_decision(&a, get("https://example.com/a", false));
    let mut follower = Box::pin(log.log_decision(&b, get("https://example.com/b", false)));
    assert!(poll_once(&mut follower).await.is_pending(), "the turn is taken: the follower waits");
    drop(leader);
    tokio::time::timeout(Duration::from_secs(20), follower).await.expect("the follower goes on").unwrap();
    assert_eq!(decision_urls(&path), ["https://example.com/a", "https://example.com/b"]);
}

/// Records nobody waits for (robots.txt fetches) reach the file within the linger.
#[tokio::test]
async fn records_nobody_waits_for_are_written_soon() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Written).await;
    let ticket = log.core().append(b"{\"type\":\"fetch\"}\n", false).unwrap();
    assert!(!ticket.wait);
    eventually("the fetch record is written", || lines(&path).iter().any(|r| r["type"] == "fetch")).await;
}

/// A write that fails: with `refuse`, the requests whose records were lost fail (and the
/// log refuses until writing works); with `continue`, they go on; both count the loss.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_failed_write_refuses_or_continues() {
    use super::commit::Core;
    use super::out::Out;
    for on_error in [OnError::Refuse, OnError::Continue] {
        let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
        let core = Core::new(Out::File(full), Durability::Written, on_error, 16);
        let ticket = core.append(b"{\"type\":\"decision\"}\n", true).unwrap();
        let result = core.wait(ticket).await;
        match on_error {
            OnError::Refuse => assert!(matches!(result, Err(AuditError::Broken(_))), "{result:?}"),
            OnError::Continue => assert!(result.is_ok()),
        }
        assert_eq!(core.lost.load(Ordering::Relaxed), 1);
        assert!(!core.healthy.load(Ordering::Relaxed));
    }
}

/// Shutdown writes everything and ends the file with a `close` record; the next process
/// finds it clean. Records after shutdown are refused.
#[tokio::test]
async fn a_clean_close_is_found_clean() {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = file_log(dir.path(), Durability::Buffered).await;
    log.log_decision(&decision("/x"), get("https://example.com/x", false)).await.unwrap();
    log.shutdown().await;
    assert!(matches!(
        log.log_decision(&decision("/x"), get("https://example.com/x", false)).await,
        Err(AuditError::Closed)
    ));
    let records = lines(&path);
    assert_eq!(records[0]["event"], "file-start", "a new file of a tamper-evident log");
    assert_eq!(records[1]["event"], "open");
    assert_eq!(records[1]["previous_run"], "new");
    assert_eq!(records[2]["type"], "decision");
    assert_eq!(records.last().unwrap()["event"], "close");
    let (log, path) = file_log(dir.path(), Durability::Written).await;
    log.shutdown().await;
    let records = lines(&path);
    assert_eq!(records[4]["event"], "open");
    assert_eq!(records[4]["previous_run"], "clean");
}

/// A log that ends partway through a line (a crash or a full disk): the next process
/// starts on a fresh line and its `open` record says what it found; no record is glued
/// to the fragment.
#[tokio::test]
async fn a_torn_last_line_is_repaired_and_said_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let whole = "{\"schema_version\":2,\"type\":\"decision\",\"url\":\"https://example.com/1\"}\n";
    let fragment = "{\"schema_version\":2,\"type\":\"decision\",\"url\":\"https://exa";
    std::fs::write(&path, format!("{whole}{fragment}")).unwrap();
    let (log, _) = file_log(dir.path(), Durability::Written).await;
    log.log_decision(&decision("/x"), get("https://example.com/x", false)).await.unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let got: Vec<&str> = text.lines().collect();
    assert_eq!(got[0], whole.trim_end());
    assert_eq!(got[1], fragment, "the fragment stays as it was, on its own line");
    let open: serde_json::Value = serde_json::from_str(got[2]).unwrap();
    assert_eq!(open["type"], "log");
    assert_eq!(open["event"], "open");
    assert_eq!(open["previous_run"], "torn");
    assert_eq!(open["fragment_bytes"], fragment.len());
    let next: serde_json::Value = serde_json::from_str(got[3]).unwrap();
    assert_eq!(next["url"], "https://example.com/x", "the next record is whole");
}

/// A log with a tree and rotation, for the tamper-evidence tests.
async fn tree_log(dir: &Path, rotate_size: u64, every: u64) -> (AuditLog, PathBuf) {
    tree_log_with(dir, rotate_size, every, Durability::default()).await
}

/// [`tree_log`] with `durability`.
async fn tree_log_with(
    dir: &Path,
    rotate_size: u64,
    every: u64,
    durability: Durability,
) -> (AuditLog, PathBuf) {
    let path = dir.join("audit.jsonl");
    let config = AuditConfig {
        target: Target::File(path.clone()),
        checkpoint_every: every,
        rotate_size,
        durability,
        ..AuditConfig::default()
    };
    (AuditLog::start(config).await.unwrap(), path)
}

/// The files of a tree log, oldest first, as `verify` takes them.
fn log_files(path: &Path) -> Vec<verify::LogFile> {
    let mut paths = rotated_files(path).unwrap();
    paths.push(path.to_path_buf());
    paths
        .iter()
        .map(|p| verify::LogFile {
            name: p.display().to_string(),
            log: Box::new(std::io::BufReader::new(std::fs::File::open(p).unwrap())),
            checkpoints: std::fs::File::open(checkpoints_path(p))
                .ok()
                .map(|f| Box::new(std::io::BufReader::new(f)) as Box<dyn std::io::BufRead>),
        })
        .collect()
}

/// Rotation while eight tasks on four threads log at once (until the file has been
/// rotated three times): every record is in exactly one file, whole; the files continue
/// one tree and verify as one log, all of it covered. With each durability (what the
/// audit thread may hash differs: with `synced`, only what is on disk).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn rotation_under_concurrent_writers_loses_nothing() {
    for durability in [Durability::Written, Durability::Synced, Durability::Buffered] {
        rotation_under_concurrent_writers(durability).await;
    }
}

async fn rotation_under_concurrent_writers(durability: Durability) {
    let dir = tempfile::tempdir().unwrap();
    let (log, path) = tree_log_with(dir.path(), 16 * 1024, 7, durability).await;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (log, stop) = (log.clone(), stop.clone());
        tasks.push(tokio::spawn(async move {
            let mut i = 0u64;
            while !stop.load(Ordering::Relaxed) && i < 100_000 {
                let url = format!("https://example.com/{w}/{i}");
                log.log_decision(&decision("/x"), get(&url, false)).await.unwrap();
                i += 1;
            }
            i
        }));
    }
    eventually("three rotations", || rotated_files(&path).unwrap().len() >= 3).await;
    stop.store(true, Ordering::Relaxed);
    let mut sent = 0;
    for t in tasks {
        sent += t.await.unwrap();
    }
    log.shutdown().await;
    let rotated = rotated_files(&path).unwrap();
    assert!(rotated.len() >= 3, "rotated {} times", rotated.len());
    let mut urls = Vec::new();
    for p in rotated.iter().chain([&path]) {
        for r in lines(p) {
            assert!(!r.is_null(), "{}: every line is a whole record", p.display());
            if r["type"] == "decision" {
                urls.push(r["url"].as_str().unwrap().to_owned());
            }
        }
    }
    assert_eq!(urls.len() as u64, sent, "{durability:?}: every record once");
    urls.sort();
    urls.dedup();
    assert_eq!(urls.len() as u64, sent, "no record twice");
    let v = verify::verify(log_files(&path), &verify::Options::default(), &mut verify::NoWatch);
    if !v.ok() {
        for p in rotated.iter().chain([&path]) {
            let t = std::fs::read_to_string(p).unwrap();
            eprintln!(
                "== {}\n{}",
                p.display(),
                t.lines()
                    .take(2)
                    .chain(t.lines().rev().take(2))
                    .map(|l| &l[..l.len().min(200)])
                    .collect::<Vec<_>>()
                    .join("\n")
            );
        }
    }
    assert!(v.ok(), "{durability:?}: {:?} {:?}", v.problem, v.error);
    assert_eq!(v.files.len(), rotated.len() + 1);
    assert!(v.uncovered.is_empty(), "the shutdown checkpoint covers everything: {:?}", v.uncovered);
    assert_eq!(v.covered, v.leaves);
}

/// A `file-start` record that claims more records before its file than any log holds
/// (2^64 − 1, with 64 subtrees that do give its root): `verify` names it instead of
/// counting past `u64::MAX` (which panicked in a debug build and wrapped to nonsense
/// figures in a release one), `prove` refuses the file, and a process reopening it says
/// so and starts its tree at 0.
#[tokio::test]
async fn a_file_start_past_any_log_is_refused() {
    use super::merkle::{leaf_hash, node_hash};
    let subtrees: Vec<merkle::Hash> = (0..64u8).map(|i| leaf_hash(&[i])).collect();
    let root = subtrees[..63].iter().rev().fold(subtrees[63], |right, left| node_hash(left, &right));
    // In the writer's order: a log record says so at its start.
    let start = format!(
        r#"{{"schema_version":{SCHEMA_VERSION},"type":"log","time":"2026-12-07T05:00:00.000Z","event":"file-start","tree_size":{},"root":"{}","frontier":{},"previous_file":"audit.1.jsonl"}}"#,
        u64::MAX,
        hex::encode(root),
        serde_json::json!(subtrees.iter().map(hex::encode).collect::<Vec<_>>()),
    );
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let record = r#"{"type":"decision","request_id":"r1"}"#;
    std::fs::write(&path, format!("{start}\n{record}\n")).unwrap();
    std::fs::write(checkpoints_path(&path), "").unwrap();

    let partial = verify::Options { partial: true, ..verify::Options::default() };
    let v = verify::verify(log_files(&path), &partial, &mut verify::NoWatch);
    let problem = v.problem.expect("the file-start record is refused");
    assert_eq!(problem.line, Some(1), "{problem}");
    assert!(problem.what.contains("file-start record is not consistent"), "{problem}");

    let open = || -> std::io::Result<Box<dyn std::io::BufRead>> {
        Ok(Box::new(std::io::BufReader::new(std::fs::File::open(&path)?)))
    };
    let proved = proof::prove("audit.jsonl", &open, &[], &|line| line == record.as_bytes());
    assert!(matches!(proved, Err(proof::ProveError::Other(_))), "{proved:?}");

    // Reopened: the tree starts at 0 (a warning in the process's log), so the next
    // checkpoint counts the file's few lines, not 2^64 and more.
    let (log, _) = tree_log(dir.path(), 0, 1).await;
    log.shutdown().await;
    let last = std::fs::read_to_string(checkpoints_path(&path)).unwrap();
    let last: CheckpointLine = serde_json::from_str(last.lines().last().expect("a checkpoint")).unwrap();
    assert!(last.tree_size < 10, "{last:?}");
}

/// A checkpoint file whose line goes on for 256 MiB: `verify` (and `read_checkpoints`, for
/// `prove`) reads no more of it than a checkpoint can be and names the line (before, the
/// whole line was read into memory, however long).
#[test]
fn a_checkpoint_line_past_its_bound_is_not_read_whole() {
    /// 256 MiB of `x`, counting what is read.
    struct Long(Arc<std::sync::atomic::AtomicU64>);
    impl std::io::Read for Long {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = buf.len().min((256 << 20) - self.0.load(Ordering::Relaxed) as usize);
            buf[..n].fill(b'x');
            self.0.fetch_add(n as u64, Ordering::Relaxed);
            Ok(n)
        }
    }
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let files = vec![verify::LogFile {
        name: "audit.jsonl".into(),
        log: Box::new(&b"{\"type\":\"decision\"}\n"[..]),
        checkpoints: Some(Box::new(std::io::BufReader::new(Long(read.clone())))),
    }];
    let v = verify::verify(files, &verify::Options::default(), &mut verify::NoWatch);
    let problem = v.problem.expect("the line is refused");
    assert_eq!((problem.file.as_str(), problem.line), ("audit.jsonl.checkpoints", Some(1)), "{problem}");
    assert!(problem.what.contains("a line of more than 64 MiB"), "{problem}");
    let read = read.load(Ordering::Relaxed);
    assert!(read <= (64 << 20) + (64 << 10), "{read} bytes read");

    // `prove`'s reading of the whole checkpoint file too.
    let read = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let e = verify::read_checkpoints(std::io::BufReader::new(Long(read.clone()))).unwrap_err();
    assert!(e.to_string().contains("line 1: not a checkpoint (a line of more than 64 MiB)"), "{e}");
    let read = read.load(Ordering::Relaxed);
    assert!(read <= (64 << 20) + (64 << 10), "{read} bytes read");
}

/// A log reopened by the next process (and one whose last line was torn): the tree goes
/// on over what is in the file, and the whole file verifies, all of it covered.
#[tokio::test]
async fn a_reopened_log_continues_its_tree_and_verifies() {
    let dir = tempfile::tempdir().unwrap();
    for round in 0..3 {
        let (log, path) = tree_log(dir.path(), 0, 4).await;
        for i in 0..6 {
            let url = format!("https://example.com/{round}/{i}");
            log.log_decision(&decision("/x"), get(&url, false)).await.unwrap();
        }
        log.shutdown().await;
        if round == 1 {
            // A crash during a write: half a line at the end.
            let mut f = std::fs::OpenOptions::new().append(true).open(&path).unwrap();
            std::io::Write::write_all(&mut f, b"{\"schema_version\":4,\"type\":\"dec").unwrap();
        }
    }
    let path = dir.path().join("audit.jsonl");
    let v = verify::verify(log_files(&path), &verify::Options::default(), &mut verify::NoWatch);
    assert!(v.ok(), "{:?} {:?}", v.problem, v.error);
    assert_eq!(v.covered, v.leaves, "the shutdown checkpoints cover everything");
    assert_eq!(lines(&path).iter().filter(|r| r["type"] == "decision").count(), 18);
    // And an edit to the first process's records is found.
    let text = std::fs::read_to_string(&path).unwrap().replacen(
        "https://example.com/0/1",
        "https://example.com/0/X",
        1,
    );
    std::fs::write(&path, text).unwrap();
    let v = verify::verify(log_files(&path), &verify::Options::default(), &mut verify::NoWatch);
    assert!(v.problem.is_some_and(|p| p.line.is_some()), "the edited line is named");
}

/// Rotation by time: a file open for `rotate_interval` is closed (by the audit thread's
/// own deadline, with no record arriving) and the tree goes on in the next one.
#[tokio::test]
async fn rotation_by_interval_continues_the_tree() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("audit.jsonl");
    let config = AuditConfig {
        target: Target::File(path.clone()),
        checkpoint_every: 3,
        rotate_size: 0,
        rotate_interval: Some(Duration::from_millis(200)),
        ..AuditConfig::default()
    };
    let log = AuditLog::start(config).await.unwrap();
    for i in 0..5 {
        log.log_decision(&decision("/x"), get(&format!("https://example.com/{i}"), false)).await.unwrap();
    }
    eventually("a rotation by time", || !rotated_files(&path).unwrap().is_empty()).await;
    for i in 5..8 {
        log.log_decision(&decision("/x"), get(&format!("https://example.com/{i}"), false)).await.unwrap();
    }
    log.shutdown().await;
    let rotated = rotated_files(&path).unwrap();
    assert!(!rotated.is_empty());
    let first = lines(&rotated[0]);
    assert_eq!(first.last().unwrap()["event"], "rotate", "the rotated file ends with its rotate record");
    assert_eq!(lines(&path)[0]["event"], "file-start", "the next file starts with file-start");
    let v = verify::verify(log_files(&path), &verify::Options::default(), &mut verify::NoWatch);
    assert!(v.ok(), "{:?} {:?}", v.problem, v.error);
    assert_eq!(v.covered, v.leaves);
    let decisions: usize = rotated
        .iter()
        .chain([&path])
        .map(|p| lines(p).iter().filter(|r| r["type"] == "decision").count())
        .sum();
    assert_eq!(decisions, 8);
    for p in &rotated {
        assert!(lines(p).len() > 2, "{}: a file with no records is not rotated by time", p.display());
    }
}

/// The record of an answer given without a decision is taken while the log refuses (the
/// answer, a `503`, is a refusal already), and when it cannot be written it is counted
/// with the records lost, which the `write-error` record reports once writing works.
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_refusal_while_the_log_is_broken_is_taken_and_counted_as_lost() {
    use super::out::Out;
    use crate::refusal::{Refusal, RefusalKind};
    let full = std::fs::OpenOptions::new().write(true).open("/dev/full").unwrap();
    let config = AuditConfig { on_error: OnError::Refuse, ..AuditConfig::default() };
    let log = AuditLog::spawn(config, Out::File(full), None).unwrap();
    assert!(log.log_decision(&decision("/x"), get("https://example.com/x", false)).await.is_err());
    assert!(log.accepting().is_err(), "the log refuses");
    assert_eq!(log.lost(), 1);
    let refusal = Refusal::new(RefusalKind::AuditUnavailable, "the audit log cannot be written");
    let facts = RefusalFacts {
        request_id: "r-2",
        method: Some("GET"),
        target: Some("https://example.com/y"),
        ..RefusalFacts::default()
    };
    log.log_refusal(&refusal, facts);
    log.flush().await;
    assert_eq!(log.lost(), 2, "the refusal's record was tried, and counted when it failed");
}

/// A refusal record's fields (and the query redacted when the log redacts).
#[test]
fn a_refusal_record_says_what_was_answered_and_why() {
    use crate::refusal::{Refusal, RefusalKind};
    let refusal =
        Refusal::new(RefusalKind::NoToken, "no product token for this request: no x-robots-agent header\n");
    let facts = RefusalFacts {
        request_id: "r-1",
        client: Some("127.0.0.1:4000".parse().unwrap()),
        user: Some("alice"),
        method: Some("GET"),
        target: Some("http://example.com/a?secret=1"),
        transport: Some("proxy"),
    };
    let r = RefusalRecord::of(&refusal, facts, std::time::SystemTime::UNIX_EPOCH, true);
    let v: serde_json::Value = serde_json::from_slice(&super::record::to_line(&r)).unwrap();
    assert_eq!(v["schema_version"], SCHEMA_VERSION);
    assert_eq!(v["type"], "refusal");
    assert_eq!(v["time"], "1970-01-01T00:00:00.000Z");
    assert_eq!(v["request_id"], "r-1");
    assert_eq!(v["client"], "127.0.0.1:4000");
    assert_eq!(v["user"], "alice");
    assert_eq!(v["method"], "GET");
    assert!(!v["target"].as_str().unwrap().contains("secret=1"), "{v}");
    assert_eq!(v["status"], 400);
    assert_eq!(v["refusal"], "no-token");
    assert_eq!(v["reason"], "no product token for this request: no x-robots-agent header");
}

/// The payment record's line, field by field as it was before `PaymentRecord` held the
/// `Payment` (a price, and the null price of a `crawler-error` answer without one).
#[test]
fn payment_record_lines_keep_their_bytes() {
    let record = |price: Option<&str>| PaymentRecord {
        schema_version: SCHEMA_VERSION,
        kind: "payment",
        time: "2026-11-27T10:00:00Z".into(),
        request_id: "r-1".into(),
        origin: "https://example.com:443".into(),
        payment: crate::identity::httpsig::Payment {
            status: 402,
            price: price.map(str::to_owned),
            error: Some("InvalidPrice".into()),
            max_price: Some("USD 0.05".into()),
            retried: true,
            retry_status: Some(200),
            charged: Some("USD 0.01".into()),
            retry_error: Some("PaymentFailed".into()),
            no_retry: Some("above max_price"),
        },
    };
    let line = |price: Option<&str>| String::from_utf8(super::record::to_line(&record(price))).unwrap();
    assert_eq!(
        line(Some("USD 0.01")),
        format!(
            "{{\"schema_version\":{SCHEMA_VERSION},\"type\":\"payment\",\"time\":\"2026-11-27T10:00:00Z\",\
             \"request_id\":\"r-1\",\"origin\":\"https://example.com:443\",\"status\":402,\
             \"price\":\"USD 0.01\",\"error\":\"InvalidPrice\",\"max_price\":\"USD 0.05\",\"retried\":true,\
             \"retry_status\":200,\"charged\":\"USD 0.01\",\"retry_error\":\"PaymentFailed\",\
             \"no_retry\":\"above max_price\"}}\n"
        )
    );
    assert_eq!(
        line(None),
        format!(
            "{{\"schema_version\":{SCHEMA_VERSION},\"type\":\"payment\",\"time\":\"2026-11-27T10:00:00Z\",\
             \"request_id\":\"r-1\",\"origin\":\"https://example.com:443\",\"status\":402,\
             \"price\":null,\"error\":\"InvalidPrice\",\"max_price\":\"USD 0.05\",\"retried\":true,\
             \"retry_status\":200,\"charged\":\"USD 0.01\",\"retry_error\":\"PaymentFailed\",\
             \"no_retry\":\"above max_price\"}}\n"
        )
    );
}
