//! The proxy tests' support: the workspace's test kit (`crates/robotsgate-testkit`) and the
//! proxy in process ([`proxy`]), included by each test crate with `mod support;`.
#![allow(dead_code)]

pub mod proxy;
pub mod raw_origin;
pub mod sockets;

#[allow(unused_imports)]
pub use proxy::*;
#[allow(unused_imports)]
pub use raw_origin::*;
#[allow(unused_imports)]
pub use robotsgate_testkit::*;
#[allow(unused_imports)]
pub use sockets::*;
