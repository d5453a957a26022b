//! A fixed amount of engine work on the corpus, for counting instructions rather than
//! timing them (timings on a shared machine drift; instruction counts repeat to 0.1%):
//! every corpus file parsed three times, each parse followed by one check
//! (`REP_WORK=parse`, the default) or by 20 rounds of checks over six paths
//! (`REP_WORK=check`). Compare two builds of the engine with
//!
//! ```sh
//! cargo bench -p robotsgate-rep --bench rep_work --no-run   # prints the binary's path
//! valgrind --tool=callgrind target/release/deps/rep_work-HASH
//! REP_WORK=check valgrind --tool=callgrind target/release/deps/rep_work-HASH
//! ```
//!
//! and read `Collected` (the checks' share is the difference between the two modes).

use std::hint::black_box;

use robotsgate_rep::RobotsTxt;

#[path = "support/corpus.rs"]
mod corpus;

const PATHS: [&str; 6] =
    ["/", "/private/x.html", "/a/b/c?d=e", "/search?q=1", "/wp-admin/admin.php", "/images/logo.png"];

fn main() {
    let checks = std::env::var("REP_WORK").is_ok_and(|m| m == "check");
    let files: Vec<Vec<u8>> = corpus::files()
        .iter()
        .map(|p| std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .collect();
    let mut allowed = 0usize;
    for _ in 0..3 {
        for body in &files {
            let robots = RobotsTxt::parse(black_box(body));
            if checks {
                for _ in 0..20 {
                    for path in PATHS {
                        allowed += usize::from(robots.check("FooBot", black_box(path)).allowed());
                    }
                }
            } else {
                allowed += usize::from(robots.check("FooBot", "/").allowed());
            }
        }
    }
    println!("{} files, {allowed} checks allowed", files.len());
}
