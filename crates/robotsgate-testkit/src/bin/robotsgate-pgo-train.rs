//! Trains an instrumented `robotsgate` binary for a profile-guided build
//! (`benches/load/pgo.sh`, the container image's build); what it sends is in
//! `robotsgate_testkit::pgo`.
//!
//! ```text
//! robotsgate-pgo-train BIN [REQUESTS]
//! ```
//!
//! REQUESTS (default 20000) a case. Exits non-zero with the reason on any failure.

use robotsgate_testkit::pgo::{CONNECTIONS, train};

fn main() {
    let mut args = std::env::args().skip(1);
    let (Some(bin), requests, None) = (args.next(), args.next(), args.next()) else {
        eprintln!("usage: robotsgate-pgo-train BIN [REQUESTS]");
        std::process::exit(2);
    };
    let requests = match requests.as_deref().map(str::parse::<usize>) {
        None => 20_000,
        Some(Ok(n)) if n >= CONNECTIONS => n,
        _ => {
            eprintln!("REQUESTS must be a number of at least {CONNECTIONS}");
            std::process::exit(2);
        }
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("robotsgate-pgo-train: tokio runtime: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = runtime.block_on(train(&bin, requests)) {
        eprintln!("robotsgate-pgo-train: {e}");
        std::process::exit(1);
    }
}
