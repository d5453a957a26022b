//! The audit thread's priority (Linux, where nice values are per thread): five steps
//! below the thread that opened the log, so that its hashing does not take the CPU from
//! request threads; unchanged with `durability = "synced"`, whose requests wait for its
//! syncs. One test, in a test binary of its own: no other test's audit thread runs beside
//! it while it tells its threads apart.
#![cfg(target_os = "linux")]

use std::collections::BTreeSet;

use robotsgate::audit::{AuditConfig, AuditLog, Durability, Target};

/// The ids of this process's threads named as the audit thread (a thread's name is cut to
/// 15 bytes).
fn audit_threads() -> BTreeSet<u32> {
    std::fs::read_dir("/proc/self/task")
        .expect("/proc/self/task")
        .filter_map(|e| {
            let e = e.ok()?;
            let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
            if comm.trim_end() != "robotsgate-audi" {
                return None;
            }
            e.file_name().to_str()?.parse().ok()
        })
        .collect()
}

/// The nice value in a `/proc/…/stat` file: the 19th field, the 17th after the command's
/// closing parenthesis.
fn nice_in(stat_path: &str) -> i32 {
    let stat = std::fs::read_to_string(stat_path).unwrap_or_else(|e| panic!("{stat_path}: {e}"));
    let after = &stat[stat.rfind(')').expect("a command in parentheses") + 2..];
    after.split(' ').nth(16).expect("19 fields").parse().expect("a number")
}

#[tokio::test]
async fn the_audit_thread_runs_five_nice_steps_lower_unless_requests_wait_for_its_syncs() {
    let dir = tempfile::tempdir().unwrap();
    // The audit thread starts from this one (a current-thread runtime) and inherits its value.
    let own = nice_in("/proc/thread-self/stat");
    for (durability, expected) in [
        (Durability::Written, (own + 5).min(19)),
        (Durability::Buffered, (own + 5).min(19)),
        (Durability::Synced, own),
    ] {
        let before = audit_threads();
        let config = AuditConfig {
            target: Target::File(dir.path().join(format!("{}.jsonl", durability.as_str()))),
            durability,
            ..AuditConfig::default()
        };
        let log = AuditLog::start(config).await.unwrap();
        // Answered by the audit thread's loop: it is past its start.
        log.flush().await;
        let new: Vec<u32> = audit_threads().difference(&before).copied().collect();
        assert_eq!(new.len(), 1, "{durability:?}: one new audit thread, found {new:?}");
        let nice = nice_in(&format!("/proc/self/task/{}/stat", new[0]));
        assert_eq!(nice, expected, "{durability:?}: the audit thread's nice value (this thread's is {own})");
        log.shutdown().await;
    }
}
