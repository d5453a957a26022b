//! The trainer of the profile-guided build (`robotsgate_testkit::pgo`, which
//! `benches/load/pgo.sh` and the container image's build run) takes the real binary through
//! its four cases: every answer is the one expected (200 from the origin, robotsgate's 403
//! on the disallowed path), and each process stops cleanly on SIGINT, as an instrumented
//! binary must to write its profile.

use robotsgate_testkit::pgo::{CONNECTIONS, train};

const BIN: &str = env!("CARGO_BIN_EXE_robotsgate");

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_profile_training_takes_the_binary_through_its_four_cases() {
    if let Err(e) = train(BIN, 10 * CONNECTIONS).await {
        panic!("training failed: {e}");
    }
}

#[tokio::test]
async fn too_few_requests_are_refused_before_anything_starts() {
    let e = train("/nonexistent/robotsgate", CONNECTIONS - 1).await.unwrap_err();
    assert!(e.to_string().contains("at least 32"), "{e}");
}
