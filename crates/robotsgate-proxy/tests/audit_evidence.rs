//! The tamper-evident audit log (issue 18) end to end: the real proxy writes a log through
//! real origins, with signed checkpoints and rotation; the real binary's `audit verify`
//! passes on the untouched files and fails, naming the file, the line and what is wrong,
//! on each kind of tampering; `audit prove` / `verify-proof` hand one record to a third
//! party; `audit explain` marks the deciding line; `audit report` writes HTML holding the
//! log's numbers.

mod support;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use robotsgate::audit::{checkpoints_path, rotated_files};
use robotsgate_proxy::config::{Config, Dur, Size};
use serde_json::Value;
use support::*;

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");
const ROBOTS: &str =
    "User-agent: *\nAllow: /private/open\nDisallow: /private\n\nUser-agent: OtherBot\nDisallow: /\n";

fn robotsgate(args: &[&str]) -> Output {
    Command::new(BIN).args(args).env("NO_COLOR", "1").output().expect("run robotsgate")
}

fn code(out: &Output) -> i32 {
    out.status.code().expect("exit code")
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn arg(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `robotsgate audit keygen --dir DIR`: the key pair's paths (secret, public).
fn keygen(dir: &Path) -> (PathBuf, PathBuf) {
    let out = robotsgate(&["audit", "keygen", "--dir", arg(dir)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let (key, public) = (dir.join("audit-signing.key"), dir.join("audit-signing.pub"));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&key).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600, "the secret key is private");
    }
    let text = std::fs::read_to_string(&public).unwrap();
    assert!(text.starts_with("robotsgate-audit+"), "a note verifier key: {text}");
    // Not replaced without --force.
    let again = robotsgate(&["audit", "keygen", "--dir", arg(dir)]);
    assert_eq!(code(&again), 2, "{}", self::text(&again));
    (key, public)
}

/// A proxy configuration with checkpoints every 5 records, rotation at 4 KiB and the key.
fn config(dir: &Path, key: &Path) -> Config {
    let mut c = test_config(dir);
    c.audit.checkpoint_every = 5;
    c.audit.checkpoint_interval = Dur(Duration::from_secs(10));
    c.audit.rotate_size = Size(4096);
    c.audit.signing_key = arg(key).to_owned();
    c
}

/// Runs a signed, rotated log through the proxy: requests to a robots.txt origin (allowed,
/// disallowed, allowed by a rule, for /robots.txt) in three rounds, each until the log
/// has been rotated once more, then a few more in the active file; stops the proxy.
/// Returns the active file, the public key and the origin's URL.
async fn signed_rotated_log(dir: &Path) -> (PathBuf, PathBuf, TestOrigin) {
    let (key, public) = keygen(&dir.join("keys"));
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("fine")),
        ("/private/open", Reply::ok("open")),
    ])
    .await;
    let proxy = RunningProxy::start(&config(dir, &key)).await;
    let log = proxy.audit_path.clone();
    let paths = ["/page", "/private/x", "/private/open", "/robots.txt"];
    let mut i = 0;
    for round in 1..=3 {
        while rotated_files(&log).unwrap().len() < round {
            get(proxy.addr, &origin.url(&format!("{}?n={i}", paths[i % paths.len()]))).await;
            i += 1;
            if i % 4 == 0 {
                bounded("audit flush", proxy.audit.flush()).await;
            }
            assert!(i < 2000, "the log is rotated within 2000 requests");
        }
    }
    for n in 0..8 {
        get(proxy.addr, &origin.url(&format!("/page?last={n}"))).await;
    }
    proxy.stop().await;
    (log, public, origin)
}

/// All the files of the log, oldest first.
fn files_of(log: &Path) -> Vec<PathBuf> {
    let mut v = rotated_files(log).unwrap();
    v.push(log.to_path_buf());
    v
}

/// Copies the log's files (and checkpoint files) into a new folder `to`; the copy's
/// active file.
fn copy_log(log: &Path, to: &Path) -> PathBuf {
    std::fs::create_dir_all(to).unwrap();
    for f in files_of(log) {
        for p in [f.clone(), checkpoints_path(&f)] {
            std::fs::copy(&p, to.join(p.file_name().unwrap())).unwrap();
        }
    }
    to.join(log.file_name().unwrap())
}

fn read_lines(path: &Path) -> Vec<Vec<u8>> {
    let data = std::fs::read(path).unwrap();
    data.split_inclusive(|&b| b == b'\n').map(<[u8]>::to_vec).collect()
}

fn write_lines(path: &Path, lines: &[Vec<u8>]) {
    std::fs::write(path, lines.concat()).unwrap();
}

fn verify(log: &Path, key: &Path) -> Output {
    robotsgate(&["audit", "verify", "--with-rotated", arg(log), "--key", arg(key)])
}

/// `verify` exits 1 naming `file:line` (`line` 0: the file alone) and saying `what`.
fn assert_fails(out: &Output, file: &Path, line: u64, what: &str) {
    let t = text(out);
    assert_eq!(code(out), 1, "{t}");
    let at = if line == 0 { format!("{}: ", file.display()) } else { format!("{}:{line}: ", file.display()) };
    let failed =
        t.lines().find(|l| l.starts_with("FAILED: ")).unwrap_or_else(|| panic!("no FAILED line: {t}"));
    assert!(failed.starts_with(&format!("FAILED: {at}")), "names {at}: {t}");
    assert!(failed.contains(what), "says {what:?}: {t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_passes_untouched_and_names_the_first_tampered_line() {
    let dir = temp_dir();
    let (log, public, _origin) = signed_rotated_log(dir.path()).await;
    let files = files_of(&log);
    assert!(files.len() >= 4, "three rotations: {files:?}");

    let out = verify(&log, &public);
    let t = stdout(&out);
    assert_eq!(code(&out), 0, "{t}");
    assert!(t.contains("OK: no record covered by a checkpoint was changed"), "{t}");
    assert!(t.contains("signatures: every checkpoint is signed by"), "{t}");
    assert!(!t.contains("not yet covered"), "the shutdown checkpoint covers everything: {t}");
    assert!(t.contains("What this cannot show"), "{t}");
    // Without the key it still verifies, and says the signatures were not checked.
    let out = robotsgate(&["audit", "verify", "--with-rotated", arg(&log)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("NOT checked"), "{}", stdout(&out));

    let name = |p: &Path| p.file_name().unwrap().to_owned();
    let mut n = 0;
    let mut tampered = |edit: &dyn Fn(&Path)| -> (PathBuf, Vec<PathBuf>) {
        n += 1;
        let copy = copy_log(&log, &dir.path().join(format!("copy{n}")));
        edit(&copy);
        let files = files_of(&copy);
        (copy, files)
    };

    // One byte of a record edited (in the first file, line 3; checkpoints fall after lines 5, 10...).
    let (copy, f) = tampered(&|copy| {
        let first = &files_of(copy)[0];
        let mut lines = read_lines(first);
        lines[2][2] ^= 0x20;
        write_lines(first, &lines);
    });
    assert_eq!(name(&f[0]), name(&files[0]));
    assert_fails(&verify(&copy, &public), &f[0], 3, "this line was changed since it was written");

    // A line deleted.
    let (copy, f) = tampered(&|copy| {
        let first = &files_of(copy)[0];
        let mut lines = read_lines(first);
        lines.remove(2);
        write_lines(first, &lines);
    });
    assert_fails(&verify(&copy, &public), &f[0], 3, "a record is missing before line 3 (removed)");

    // A line inserted (a copy of another record).
    let (copy, f) = tampered(&|copy| {
        let first = &files_of(copy)[0];
        let mut lines = read_lines(first);
        let extra = lines[6].clone();
        lines.insert(2, extra);
        write_lines(first, &lines);
    });
    assert_fails(&verify(&copy, &public), &f[0], 3, "this line was inserted");

    // Two lines swapped.
    let (copy, f) = tampered(&|copy| {
        let first = &files_of(copy)[0];
        let mut lines = read_lines(first);
        lines.swap(2, 3);
        write_lines(first, &lines);
    });
    assert_fails(&verify(&copy, &public), &f[0], 3, "lines 3 and 4 are in the wrong order (swapped)");

    // The active file cut off before its last checkpoint (the shutdown checkpoint covers
    // it all): its last lines removed, its first (file-start) kept.
    let (copy, f) = tampered(&|copy| {
        let mut lines = read_lines(copy);
        assert!(lines.len() >= 2, "file-start and close at least");
        let keep = lines.len().saturating_sub(3).max(1);
        lines.truncate(keep);
        write_lines(copy, &lines);
    });
    let last = f.last().unwrap();
    let kept = read_lines(last).len() as u64;
    assert_fails(&verify(&copy, &public), last, kept, "the file was cut off");

    // A middle file dropped (with its checkpoints).
    let (copy, f) = tampered(&|copy| {
        let middle = files_of(copy)[1].clone();
        std::fs::remove_file(checkpoints_path(&middle)).unwrap();
        std::fs::remove_file(middle).unwrap();
    });
    assert_eq!(f.len(), files.len() - 1);
    assert_fails(&verify(&copy, &public), &f[1], 1, "a file between");

    // A rotated file's checkpoint file removed, then emptied: found.
    let (copy, f) = tampered(&|copy| std::fs::remove_file(checkpoints_path(&files_of(copy)[1])).unwrap());
    assert_fails(&verify(&copy, &public), &f[1], 0, ".checkpoints is missing");
    let (copy, f) = tampered(&|copy| std::fs::write(checkpoints_path(&files_of(copy)[1]), "").unwrap());
    let lines = read_lines(&f[1]).len() as u64;
    assert_fails(&verify(&copy, &public), &f[1], lines, "no checkpoint in");

    // A single file with no checkpoints at all (none ever written): nothing verified, exit 1.
    let lone = dir.path().join("lone");
    std::fs::create_dir_all(&lone).unwrap();
    let decisions: Vec<Vec<u8>> = read_lines(&files[0])
        .into_iter()
        .filter(|l| l.starts_with(b"{") && !l.windows(5).any(|w| w == b"\"log\""))
        .collect();
    write_lines(&lone.join("old.jsonl"), &decisions);
    let out = robotsgate(&["audit", "verify", arg(&lone.join("old.jsonl"))]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(stdout(&out).contains("NOT VERIFIED: no checkpoint covers any record"), "{}", text(&out));

    // The wrong key: the checkpoints are not signed by it.
    let (_, other) = keygen(&dir.path().join("other-keys"));
    let out = verify(&log, &other);
    let sidecar = checkpoints_path(&files[0]);
    assert_fails(&out, &sidecar, 1, "is not valid for the key given");

    // A checkpoint rewritten along with the record it covers, without the key: the
    // signature no longer matches.
    let (copy, f) = tampered(&|copy| {
        let first = &files_of(copy)[0];
        let sidecar = checkpoints_path(first);
        let mut cps = read_lines(&sidecar);
        let mut cp: Value = serde_json::from_slice(&cps[0]).unwrap();
        cp["note"] = Value::String(cp["note"].as_str().unwrap().replacen("\n\n", "\nx\n\n", 1));
        let mut line = serde_json::to_vec(&cp).unwrap();
        line.push(b'\n');
        cps[0] = line;
        write_lines(&sidecar, &cps);
    });
    let out = verify(&copy, &public);
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(
        stdout(&out).contains(&format!("FAILED: {}:1: ", checkpoints_path(&f[0]).display())),
        "{}",
        text(&out)
    );
}

/// The signing key changed between two runs on one log: each key alone fails at the first
/// checkpoint the other signed; both keys together verify.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_takes_each_key_the_log_was_signed_with() {
    let dir = temp_dir();
    let (key_a, public_a) = keygen(&dir.path().join("keys-a"));
    let (key_b, public_b) = keygen(&dir.path().join("keys-b"));
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("fine"))]).await;
    let mut log = PathBuf::new();
    for (run, key) in [(0, &key_a), (1, &key_b)] {
        let mut c = config(dir.path(), key);
        c.audit.rotate_size = Size(0);
        let proxy = RunningProxy::start(&c).await;
        log = proxy.audit_path.clone();
        for n in 0..12 {
            get(proxy.addr, &origin.url(&format!("/page?run={run}&n={n}"))).await;
        }
        proxy.stop().await;
    }
    let verify_with = |keys: &[&Path]| {
        let mut args = vec!["audit", "verify", arg(&log)];
        for k in keys {
            args.extend(["--key", arg(k)]);
        }
        robotsgate(&args)
    };
    let both = verify_with(&[&public_a, &public_b]);
    assert_eq!(code(&both), 0, "{}", text(&both));
    assert!(stdout(&both).contains(" or "), "names both keys: {}", stdout(&both));
    let sidecar = checkpoints_path(&log);
    for (only, other_run) in [(&public_a, "the second run"), (&public_b, "the first run")] {
        let out = verify_with(&[only]);
        let t = text(&out);
        assert_eq!(code(&out), 1, "one key cannot verify {other_run}'s checkpoints: {t}");
        assert!(t.contains(&format!("FAILED: {}", sidecar.display())), "names the checkpoint file: {t}");
        assert!(t.contains("is not valid for the key given"), "{t}");
    }
}

/// The process stopped in the middle of a rotation, after renaming the log file and before
/// renaming its checkpoint file: the next start finishes the rotation, the new file
/// continues the tree, and the whole log verifies.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotation_cut_short_between_its_renames_is_finished_at_the_next_start() {
    let dir = temp_dir();
    let (key, public) = keygen(&dir.path().join("keys"));
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("fine"))]).await;
    let c = config(dir.path(), &key);
    let proxy = RunningProxy::start(&c).await;
    let log = proxy.audit_path.clone();
    let mut n = 0;
    while rotated_files(&log).unwrap().is_empty() {
        get(proxy.addr, &origin.url(&format!("/page?n={n}"))).await;
        n += 1;
        assert!(n < 2000, "the log is rotated within 2000 requests");
    }
    proxy.stop().await;
    // Back to the moment between the renames: the rotated file without its checkpoint
    // file, which is still under the active file's name; no active file yet.
    let rotated = rotated_files(&log).unwrap().pop().unwrap();
    std::fs::remove_file(&log).unwrap();
    std::fs::rename(checkpoints_path(&rotated), checkpoints_path(&log)).unwrap();

    let proxy = RunningProxy::start(&c).await;
    for n in 0..6 {
        get(proxy.addr, &origin.url(&format!("/page?after={n}"))).await;
    }
    proxy.stop().await;
    assert!(checkpoints_path(&rotated).exists(), "the checkpoint file is beside its log file again");
    let out = verify(&log, &public);
    assert_eq!(code(&out), 0, "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_verifies_alone_and_fails_when_altered() {
    let dir = temp_dir();
    let (log, public, origin) = signed_rotated_log(dir.path()).await;
    let first = files_of(&log)[0].clone();
    let records = read_jsonl(&first);
    let d = records
        .iter()
        .find(|r| r["type"] == "decision" && r["outcome"] == "disallowed")
        .expect("a disallowed decision in the first file");
    let id = d["request_id"].as_str().unwrap();
    let proof = dir.path().join("proof.json");
    let out = robotsgate(&["audit", "prove", arg(&first), id, "--out", arg(&proof)]);
    assert_eq!(code(&out), 0, "{}", text(&out));

    // The proof alone (in another folder, no log), with the public key.
    let alone = dir.path().join("third-party");
    std::fs::create_dir_all(&alone).unwrap();
    let copy = alone.join("proof.json");
    std::fs::copy(&proof, &copy).unwrap();
    let out = robotsgate(&["audit", "verify-proof", arg(&copy), "--key", arg(&public)]);
    let t = stdout(&out);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(t.starts_with("OK: "), "{t}");
    assert!(t.contains(d["url"].as_str().unwrap()), "names the URL: {t}");
    assert!(t.contains("disallowed"), "{t}");
    assert!(d["url"].as_str().unwrap().starts_with(&origin.url("/private")));

    let p: Value = serde_json::from_str(&std::fs::read_to_string(&proof).unwrap()).unwrap();
    let altered = |f: &dyn Fn(&mut Value)| -> Output {
        let mut q = p.clone();
        f(&mut q);
        std::fs::write(&copy, serde_json::to_string(&q).unwrap()).unwrap();
        robotsgate(&["audit", "verify-proof", arg(&copy), "--key", arg(&public)])
    };
    // The record changed: disallowed made allowed.
    let out = altered(&|q| {
        let r = q["record"].as_str().unwrap().replace("\"disallowed\"", "\"allowed\"");
        q["record"] = Value::String(r);
    });
    assert_eq!(code(&out), 1, "{}", text(&out));
    assert!(stdout(&out).starts_with("FAILED: "), "{}", text(&out));
    // The checkpoint changed (its tree size).
    let out = altered(&|q| {
        let cp = q["checkpoint"].as_str().unwrap();
        let mut lines: Vec<String> = cp.split('\n').map(str::to_owned).collect();
        let size: u64 = lines[1].parse().unwrap();
        lines[1] = (size + 1).to_string();
        q["checkpoint"] = Value::String(lines.join("\n"));
    });
    assert_eq!(code(&out), 1, "{}", text(&out));
    // The leaf index changed.
    let out = altered(&|q| {
        let i = q["leaf_index"].as_u64().unwrap();
        q["leaf_index"] = Value::from(i ^ 1);
    });
    assert_eq!(code(&out), 1, "{}", text(&out));
    // Another key.
    let (_, other) = keygen(&dir.path().join("other-keys"));
    let out = robotsgate(&["audit", "verify-proof", arg(&proof), "--key", arg(&other)]);
    assert_eq!(code(&out), 1, "{}", text(&out));
    // A request id not in the file.
    let out = robotsgate(&["audit", "prove", arg(&first), "no-such-request"]);
    assert_ne!(code(&out), 0, "{}", text(&out));
}

/// Any line of the log can be proven (the library proves what its matcher names): a proof
/// of a fetch record verifies and says what it is, where `verify-proof` printed a
/// decision's fields, all blank.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proof_of_a_record_that_is_no_decision_says_what_it_is() {
    use std::io::BufRead;
    let dir = temp_dir();
    let (log, public, _origin) = signed_rotated_log(dir.path()).await;
    let first = files_of(&log)[0].clone();
    let checkpoints = robotsgate::audit::verify::read_checkpoints(std::io::BufReader::new(
        std::fs::File::open(checkpoints_path(&first)).unwrap(),
    ))
    .unwrap();
    let path = first.clone();
    let open = move || -> std::io::Result<Box<dyn BufRead>> {
        Ok(Box::new(std::io::BufReader::new(std::fs::File::open(&path)?)))
    };
    let is_fetch = |line: &[u8]| String::from_utf8_lossy(line).contains("\"type\":\"fetch\"");
    let proof = robotsgate::audit::proof::prove("audit.jsonl", &open, &checkpoints, &is_fetch).unwrap();
    let file = dir.path().join("fetch-proof.json");
    std::fs::write(&file, serde_json::to_string_pretty(&proof).unwrap()).unwrap();
    let out = robotsgate(&["audit", "verify-proof", arg(&file), "--key", arg(&public)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let t = stdout(&out);
    assert!(t.starts_with("OK: ") && t.contains("\nfetch record: {"), "{t}");
}

/// The record of the decision on `url` in `records`.
fn decision_on<'a>(records: &'a [Value], url: &str) -> &'a Value {
    records
        .iter()
        .find(|r| r["type"] == "decision" && r["url"] == url)
        .unwrap_or_else(|| panic!("no decision on {url}"))
}

fn explain(log: &Path, args: &[&str]) -> String {
    let mut all = vec!["audit", "explain", arg(log)];
    all.extend_from_slice(args);
    let out = robotsgate(&all);
    assert_eq!(code(&out), 0, "{}", text(&out));
    stdout(&out)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_marks_the_deciding_line_or_says_why_none_applied() {
    let dir = temp_dir();
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("fine")),
        ("/private/open", Reply::ok("open")),
    ])
    .await;
    let down = TestOrigin::start([("/robots.txt", Reply::status(503)), ("/page", Reply::ok("x"))]).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let urls =
        [origin.url("/private/open"), origin.url("/private/x"), origin.url("/page"), down.url("/page")];
    for u in &urls {
        get(proxy.addr, u).await;
    }
    let records = proxy.records().await;
    let log = proxy.audit_path.clone();
    proxy.stop().await;
    let id = |u: &str| decision_on(&records, u)["request_id"].as_str().unwrap().to_owned();

    // Allowed by a rule: its line marked, the lines around it shown.
    let t = explain(&log, &[&id(&urls[0])]);
    assert!(t.contains("outcome: allowed"), "{t}");
    assert!(t.contains("reason: allow-rule"), "{t}");
    assert!(t.contains("product token: ExampleBot"), "{t}");
    assert!(t.contains(&format!("robots.txt: {} -> status 200", origin.url("/robots.txt"))), "{t}");
    assert!(t.contains("(SHA-256 checked)"), "{t}");
    assert!(t.contains("  >>    2  Allow: /private/open\n"), "{t}");
    assert!(t.contains("        3  Disallow: /private\n"), "the context around it: {t}");
    assert!(t.contains("the same verdict"), "{t}");

    // Disallowed: by URL (the latest decision on it), line 3 marked.
    let t = explain(&log, &["--url", &urls[1]]);
    assert!(t.contains("outcome: disallowed"), "{t}");
    assert!(t.contains("  >>    3  Disallow: /private\n"), "{t}");
    assert!(t.contains("        2  Allow: /private/open\n"), "{t}");
    assert_eq!(t.matches(">>").count(), 1, "one line marked: {t}");

    // No rule: nothing marked, the group that applied and why nothing in it matched.
    let t = explain(&log, &[&id(&urls[2])]);
    assert!(t.contains("reason: no-rule"), "{t}");
    assert!(!t.contains(">>"), "{t}");
    assert!(t.contains("No rule applied: the groups that apply to ExampleBot start at line 1"), "{t}");

    // robots.txt unreachable (503): no body, why the request was refused.
    let t = explain(&log, &[&id(&urls[3])]);
    assert!(t.contains("outcome: disallowed"), "{t}");
    assert!(t.contains("reason: robots-unreachable"), "{t}");
    assert!(t.contains("No rule applied: robots.txt could not be fetched"), "{t}");
    assert!(t.contains("\"disallow all\""), "{t}");

    // The snapshot altered, then gone: said so.
    let sha = decision_on(&records, &urls[0])["robots"]["sha256"].as_str().unwrap().to_owned();
    let snapshot = robotsgate::audit::snapshot_path(&dir.path().join("snapshots"), &sha);
    std::fs::write(&snapshot, ROBOTS.replace("Allow", "Disallow")).unwrap();
    let t = explain(&log, &[&id(&urls[0])]);
    assert!(t.contains("WARNING: ") && t.contains("does not match its hash"), "{t}");
    std::fs::remove_file(&snapshot).unwrap();
    let t = explain(&log, &[&id(&urls[0])]);
    assert!(t.contains(&format!("WARNING: the robots.txt snapshot {sha}.txt is missing")), "{t}");

    // An unknown request id: exit 1.
    let out = robotsgate(&["audit", "explain", arg(&log), "no-such-id"]);
    assert_eq!(code(&out), 1, "{}", text(&out));

    // Without [audit] signing_key the checkpoints are unsigned: verify passes and says so.
    let out = robotsgate(&["audit", "verify", arg(&log)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("the checkpoints are NOT signed"), "{}", stdout(&out));
}

/// A log may come from anywhere: `explain` reads a snapshot only from a file named by its
/// hash. A fetch record pointing at another file, or a decision whose hash is a path, does
/// not make it print that file (before: it printed it, under a "does not match its hash"
/// warning).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_reads_no_file_a_log_points_to_but_its_snapshot() {
    let dir = temp_dir();
    let origin = TestOrigin::start([("/robots.txt", Reply::ok(ROBOTS)), ("/page", Reply::ok("fine"))]).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    get(proxy.addr, &origin.url("/page")).await;
    let records = proxy.records().await;
    let log = proxy.audit_path.clone();
    proxy.stop().await;
    let decision = decision_on(&records, &origin.url("/page"));
    let id = decision["request_id"].as_str().unwrap().to_owned();
    let sha = decision["robots"]["sha256"].as_str().unwrap().to_owned();
    let t = explain(&log, &[&id]);
    assert!(t.contains("(SHA-256 checked)"), "the log as written: {t}");

    // Files of the reviewer's that the log names.
    let secret = dir.path().join("secret.txt");
    std::fs::write(&secret, "SECRET of the reviewer\n").unwrap();
    let original = std::fs::read_to_string(&log).unwrap();
    let snapshot = robotsgate::audit::snapshot_path(&dir.path().join("snapshots"), &sha);
    let kept = snapshot.display().to_string();
    assert!(original.contains(&format!("\"snapshot\":\"{kept}\"")), "the fetch record names it: {original}");

    // The fetch record's snapshot pointing at another file: not read; the snapshot is
    // missing from where else it may be (the log's folder's robotsgate-snapshots).
    std::fs::write(&log, original.replace(&kept, arg(&secret))).unwrap();
    let t = explain(&log, &[&id]);
    assert!(!t.contains("SECRET"), "{t}");
    assert!(t.contains(&format!("WARNING: the robots.txt snapshot {sha}.txt is missing")), "{t}");

    // The decision's hash a path (`<log dir>/robotsgate-snapshots/../secret.txt`): refused.
    std::fs::write(&log, original.replace(&format!("\"sha256\":\"{sha}\""), "\"sha256\":\"../secret\""))
        .unwrap();
    let t = explain(&log, &[&id]);
    assert!(!t.contains("SECRET"), "{t}");
    assert!(t.contains("WARNING: the decision's robots.txt hash \"../secret\" is not a SHA-256"), "{t}");
}

/// A robots.txt past 500 KiB is kept to its first 500 KiB: `explain`, reading that snapshot,
/// reads it as the decision did (its fetch record says it was cut), not as a whole file
/// whose last line is a rule nobody wrote.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_reads_a_cut_snapshot_as_the_decision_did() {
    let dir = temp_dir();
    let max = robotsgate::rep::MAX_ROBOTS_TXT_BYTES;
    let mut file = b"User-agent: *\nDisallow: /nothing\n".to_vec();
    file.resize(max - "Disallow: /p".len(), b'\n');
    file.extend_from_slice(b"Disallow: /private\n");
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(file)), ("/public", Reply::ok("public"))]).await;
    let proxy = RunningProxy::start(&test_config(dir.path())).await;
    let got = get(proxy.addr, &origin.url("/public")).await;
    assert_eq!(got.status, 200, "{}", got.text());
    let records = proxy.records().await;
    let log = proxy.audit_path.clone();
    proxy.stop().await;
    let id = decision_on(&records, &origin.url("/public"))["request_id"].as_str().unwrap().to_owned();
    let t = explain(&log, &[&id]);
    assert!(t.contains("outcome: allowed"), "{t}");
    assert!(t.contains("the same verdict"), "{t}");
    assert!(!t.contains("is unknown"), "{t}");

    // Without the fetch record (in a file not given), it cannot know, and says so.
    let text = std::fs::read_to_string(&log).unwrap();
    let without: String =
        text.lines().filter(|l| !l.contains("\"type\":\"fetch\"")).map(|l| format!("{l}\n")).collect();
    std::fs::write(&log, without).unwrap();
    let snapshots = dir.path().join("snapshots");
    let t = explain(&log, &["--snapshots", arg(&snapshots), &id]);
    assert!(t.contains("whether robots.txt went on past these 500 KiB is unknown"), "{t}");
}

/// A stranger makes a decision record past 1 MiB (a 499 KB rule, written twice, and a
/// 60 KB URL): `explain` and `prove` find it like any other (before, the readers skipped
/// lines past 1 MiB: "no record with that id", and the report did not count it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_decision_record_past_a_mebibyte_is_found_like_any_other() {
    let dir = temp_dir();
    let (key, public) = keygen(dir.path());
    let rule = format!("/p{}", "*".repeat(499_000));
    let origin =
        TestOrigin::start([("/robots.txt", Reply::ok(format!("User-agent: *\nDisallow: {rule}\n")))]).await;
    let mut config = config(dir.path(), &key);
    config.audit.rotate_size = Size(1 << 30);
    let proxy = RunningProxy::start(&config).await;
    let url = origin.url(&format!("/p{}", "x".repeat(60_000)));
    assert_eq!(get(proxy.addr, &url).await.status, 403);
    let records = proxy.records().await;
    let log = proxy.audit_path.clone();
    proxy.stop().await;
    let id = decision_on(&records, &url)["request_id"].as_str().unwrap().to_owned();
    let longest = read_lines(&log).iter().map(Vec::len).max().unwrap();
    assert!(longest > 1 << 20, "the record is {longest} bytes");
    let t = explain(&log, &[&id]);
    assert!(t.contains("outcome: disallowed"), "{t}");
    let proof = dir.path().join("proof.json");
    let out = robotsgate(&["audit", "prove", arg(&log), &id, "--out", arg(&proof)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let out = robotsgate(&["audit", "verify-proof", arg(&proof), "--key", arg(&public)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_report_holds_the_numbers_of_the_log_and_whether_it_verified() {
    let dir = temp_dir();
    let (log, public, _origin) = signed_rotated_log(dir.path()).await;
    // What the report must say, counted here from the files.
    let mut decisions = 0u64;
    let mut by_outcome = std::collections::BTreeMap::<String, u64>::new();
    let mut fetches = 0u64;
    for f in files_of(&log) {
        for r in read_jsonl(&f) {
            match r["type"].as_str() {
                Some("decision") => {
                    decisions += 1;
                    *by_outcome.entry(r["outcome"].as_str().unwrap().to_owned()).or_default() += 1;
                }
                Some("fetch") => fetches += 1,
                _ => {}
            }
        }
    }
    let html_path = dir.path().join("report.html");
    let out = robotsgate(&[
        "audit",
        "report",
        "--with-rotated",
        arg(&log),
        "--key",
        arg(&public),
        "--out",
        arg(&html_path),
    ]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("the log verified"), "{}", text(&out));
    let html = std::fs::read_to_string(&html_path).unwrap();
    // Self-contained: nothing fetched from elsewhere.
    for outside in ["<script", "src=\"http", "href=\"http", "@import", "url(http"] {
        assert!(!html.contains(outside), "{outside} in the report");
    }
    let doc = scraper::Html::parse_document(&html);
    assert!(doc.errors.is_empty(), "the HTML parses cleanly: {:?}", doc.errors);
    let text_of = |css: &str| -> String {
        let sel = scraper::Selector::parse(css).unwrap();
        let el = doc.select(&sel).next().unwrap_or_else(|| panic!("{css} in the report"));
        el.text().collect::<String>()
    };
    let n = |s: String| -> u64 {
        s.replace([',', '\u{202f}', ' '], "").parse().unwrap_or_else(|_| panic!("a number: {s:?}"))
    };
    assert_eq!(n(text_of("#total-decisions")), decisions);
    assert_eq!(n(text_of("#total-fetches")), fetches);
    for (outcome, count) in &by_outcome {
        assert_eq!(n(text_of(&format!("#outcome-{outcome}"))), *count, "{outcome}");
    }
    let verified = scraper::Selector::parse("#verified").unwrap();
    let v = doc.select(&verified).next().unwrap();
    assert_eq!(v.value().attr("data-ok"), Some("true"));
    assert!(text_of("#chart").contains("time (UTC)") || html.contains("<svg"), "a chart");
    assert!(html.contains("<svg"), "the chart is inline SVG");
    // The most refused origin is the test origin, with its disallowed count.
    assert!(text_of("#refused").contains("127.0.0.1"), "{}", text_of("#refused"));
    // The deciding rules: line 3 (Disallow: /private) and line 2 (Allow: /private/open).
    let rules = text_of("#rules");
    assert!(rules.contains("/private"), "{rules}");

    // A tampered log: the report says it did not verify.
    let copy = copy_log(&log, &dir.path().join("tampered"));
    let first = files_of(&copy)[0].clone();
    let mut lines = read_lines(&first);
    lines.swap(2, 3);
    write_lines(&first, &lines);
    let out = robotsgate(&["audit", "report", "--with-rotated", arg(&copy), "--out", arg(&html_path)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("did NOT verify"), "{}", text(&out));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("data-ok=\"false\""));
    assert!(html.contains("in the wrong order"), "names the problem");
    // Its totals still count every record (not only those before the problem).
    let doc = scraper::Html::parse_document(&html);
    let sel = scraper::Selector::parse("#total-decisions").unwrap();
    let total: String = doc.select(&sel).next().unwrap().text().collect();
    assert_eq!(n(total), decisions, "every decision counted");

    // A log without checkpoints: the report does not call it verified.
    let lone = dir.path().join("lone.jsonl");
    let decisions: Vec<Vec<u8>> = read_lines(&files_of(&log)[0])
        .into_iter()
        .filter(|l| l.windows(17).any(|w| w == b"\"type\":\"decision\""))
        .collect();
    assert!(!decisions.is_empty());
    write_lines(&lone, &decisions);
    let out = robotsgate(&["audit", "report", arg(&lone), "--out", arg(&html_path)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    assert!(stdout(&out).contains("could NOT be verified"), "{}", text(&out));
    let html = std::fs::read_to_string(&html_path).unwrap();
    assert!(html.contains("data-ok=\"false\"") && html.contains("no checkpoints"), "{html}");
}

/// A log may come from anywhere: a record time past 9999 (here 10000-01-01 in UTC) or
/// before 1970 is shown clamped or as it is, not a panic (before: exit 101, "overflow
/// adding duration to date").
#[test]
fn the_report_takes_times_outside_1970_to_9999() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let record = |time: &str, id: &str| {
        format!(
            r#"{{"schema_version":1,"type":"decision","time":"{time}","request_id":"{id}","outcome":"allowed","reason":"no-rule","url":"http://a.test/"}}"#
        )
    };
    let lines = [record("9999-12-31T23:59:59.000-01:00", "a"), record("1969-07-20T20:17:40.000Z", "b")];
    std::fs::write(&log, format!("{}\n", lines.join("\n"))).unwrap();
    let html = dir.path().join("report.html");
    let out = robotsgate(&["audit", "report", arg(&log), "--out", arg(&html)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let t = text(&out);
    assert!(t.contains("2 decisions, 1969-07-20 20:17:40 UTC to 9999-12-31 23:59:59 UTC"), "{t}");
}

/// A rule's text comes from a stranger's robots.txt: a U+001F in it (the report's field
/// separator) stays in the rule's column, and the outcome column says what the record says
/// (before, `/k\u{1f}allowed\u{1f}` made the row read "allowed"). `--top 0` is refused (it
/// made the report say "No request was refused" of a log full of refusals).
#[test]
fn a_rule_cannot_write_the_report_s_outcome_column_and_top_is_at_least_one() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let record = r#"{"schema_version":1,"type":"decision","time":"2026-12-07T10:00:00.000Z","request_id":"a","outcome":"disallowed","reason":"rule","origin":"http://a.test","url":"http://a.test/k","rule":{"line":2,"kind":"disallow","pattern":"/k\u001fallowed\u001f"}}"#;
    std::fs::write(&log, format!("{record}\n")).unwrap();
    let html = dir.path().join("report.html");
    let out = robotsgate(&["audit", "report", arg(&log), "--out", arg(&html)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    let table = &page[page.find("<table id=\"rules\">").expect("the rules table")..];
    let row = &table[table.find("<tr><td").unwrap()..table.find("</table>").unwrap()];
    let cells: Vec<&str> = row.split("<td").skip(1).collect();
    assert!(cells[3].contains(">disallowed<"), "{row}");
    let out = robotsgate(&["audit", "report", arg(&log), "--out", arg(&html), "--top", "0"]);
    assert_eq!(code(&out), 2, "{}", text(&out));
}

/// robotsgate's own answers without a decision (refusal records: a tunnel whose client
/// asked for another host, a missing proxy password) have a table of their own, by kind.
/// Before, they were only a count among "other records", and the refused-origins section
/// said "No request was refused" of such a log.
#[test]
fn the_report_counts_robotsgates_own_answers_by_kind() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let refusal = |id: &str, kind: &str| {
        format!(
            r#"{{"schema_version":8,"type":"refusal","time":"2026-12-07T10:00:00.000Z","request_id":"{id}","client":"127.0.0.1:1","user":null,"method":"CONNECT","target":"a.test:443","transport":"connect","status":400,"refusal":"{kind}","reason":"why"}}"#
        )
    };
    let decision = r#"{"schema_version":1,"type":"decision","time":"2026-12-07T10:00:00.000Z","request_id":"d","outcome":"allowed","reason":"no-rule","origin":"http://a.test","url":"http://a.test/"}"#;
    let lines = [
        decision.to_owned(),
        refusal("r1", "bad-request"),
        refusal("r2", "bad-request"),
        refusal("r3", "auth-required"),
    ];
    std::fs::write(&log, format!("{}\n", lines.join("\n"))).unwrap();
    let html = dir.path().join("report.html");
    let out = robotsgate(&["audit", "report", arg(&log), "--out", arg(&html)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    let doc = scraper::Html::parse_document(&page);
    assert!(doc.errors.is_empty(), "{:?}", doc.errors);
    let rows = scraper::Selector::parse("#own-answers tr").unwrap();
    let rows: Vec<String> =
        doc.select(&rows).skip(1).map(|r| r.text().collect::<Vec<_>>().join("|")).collect();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert!(rows[0].starts_with("bad-request|2|"), "{rows:?}");
    assert!(rows[1].starts_with("auth-required|1|"), "{rows:?}");
    assert!(page.contains("No decision refused a request."), "the allowed decision refused nothing");
    assert!(!page.contains("No request was refused"));
    // A log without any: said so.
    std::fs::write(&log, format!("{decision}\n")).unwrap();
    let out = robotsgate(&["audit", "report", arg(&log), "--out", arg(&html)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("None: every request had a decision."), "{page}");
}

/// `audit explain` of a tunnel refused after its `200` (its ClientHello asked for another
/// host: a refusal record keyed by the CONNECT's decision) says so under the decision
/// (before, it showed "outcome: allowed" alone). A refusal of another request is not shown.
#[test]
fn explain_shows_a_refusal_made_after_the_decision() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let decision = r#"{"schema_version":8,"type":"decision","time":"2026-12-07T10:00:00.000Z","request_id":"t1","method":"CONNECT","outcome":"allowed","reason":"no-rule","origin":"https://a.test","url":"https://a.test/","path_visible":false}"#;
    let refusal = |id: &str, why: &str| {
        format!(
            r#"{{"schema_version":8,"type":"refusal","time":"2026-12-07T10:00:01.000Z","request_id":"{id}","method":"CONNECT","target":"a.test:443","transport":"connect","status":400,"refusal":"bad-request","reason":"{why}"}}"#
        )
    };
    let outcome = r#"{"schema_version":8,"type":"outcome","time":"2026-12-07T10:00:01.000Z","request_id":"t1","status":400,"answered_by":"robotsgate","refusal":"bad-request","bytes":0,"bytes_from_client":0,"end":"client-gone","duration_us":9}"#;
    let lines = [
        decision.to_owned(),
        refusal("other", "not this one"),
        refusal("t1", "the TLS client asks for other.test"),
        outcome.to_owned(),
        refusal("t1", "after the outcome: not read"),
    ];
    std::fs::write(&log, format!("{}\n", lines.join("\n"))).unwrap();
    let t = explain(&log, &["t1"]);
    assert!(t.contains("outcome: allowed"), "{t}");
    assert!(
        t.contains(
            "then refused at 2026-12-07T10:00:01.000Z: the TLS client asks for other.test (bad-request"
        ),
        "{t}"
    );
    assert!(!t.contains("not this one") && !t.contains("after the outcome"), "{t}");
}

/// The report reads a log of any size in bounded memory: values of a vocabulary field past
/// the few hundred robotsgate uses are counted together, and a key is kept to 1 KiB (a
/// rule may be 500 KiB). Before, every distinct value was a row: a million distinct
/// reasons took 295 MB and made a 129 MB page (measured with a generated log; 6.8 MB and
/// 40 KB after).
#[test]
fn the_report_keeps_its_tables_bounded_whatever_the_log_holds() {
    let dir = temp_dir();
    let log = dir.path().join("audit.jsonl");
    let long = "x".repeat(5000);
    let mut lines = String::new();
    for i in 0..300 {
        lines.push_str(&format!(
            r#"{{"schema_version":1,"type":"decision","time":"2026-12-07T10:00:00.000Z","request_id":"r{i}","outcome":"disallowed","reason":"made-up-{i}","origin":"http://a.test","url":"http://a.test/p","rule":{{"line":2,"kind":"disallow","pattern":"/p{long}"}}}}"#
        ));
        lines.push('\n');
    }
    std::fs::write(&log, lines).unwrap();
    let html = dir.path().join("report.html");
    let out = robotsgate(&["audit", "report", arg(&log), "--out", arg(&html)]);
    assert_eq!(code(&out), 0, "{}", text(&out));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("(other values)"), "300 reasons, 256 kept");
    assert!(!page.contains("made-up-299"), "the 300th reason is among the others");
    assert!(!page.contains(&long), "the rule is cut to 1 KiB");
    assert!(page.contains(&format!("/p{}…", &long[..1024 - 2])), "and says so");
}
