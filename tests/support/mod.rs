//! The integration tests' support: the workspace's test kit (`crates/robotsgate-testkit`),
//! included by each test crate with `mod support;`.

#[allow(unused_imports)]
pub use robotsgate_testkit::*;
