//! The one support module of the integration tests, included by each test crate with
//! `mod support;` (each uses a different part of it):
//!
//! - [`wait`]: the one bound ([`BOUND`]) and the bounded waits;
//! - [`origin`]: the scripted origin ([`TestOrigin`], answering with [`Reply`]s);
//! - [`body`]: the byte pattern, checksums, encoded and sized bodies;
//! - [`client`]: requests through the proxy, raw HTTP/1.1, CONNECT and TLS in tunnels;
//! - [`fetch`]: the `Fetcher` built through the public API;
//! - [`audit`]: audit log records read back and checked;
//! - [`ca`]: a test CA with a leaf for HTTPS origins;
//! - [`proxy`] (feature "proxy"): the proxy in process, configurations.
//! - [`redis`]: a real `redis-server` for the fleet-mode tests.
//!
//! Everything listens on loopback only, and every network await is bounded.
#![allow(dead_code)]

pub mod audit;
pub mod body;
pub mod ca;
pub mod client;
pub mod fetch;
pub mod origin;
#[cfg(feature = "proxy")]
pub mod proxy;
pub mod redis;
pub mod wait;

// Each test crate uses a part: the rest of these names go unused there.
#[cfg(feature = "proxy")]
#[allow(unused_imports)]
pub use self::proxy::*;
#[allow(unused_imports)]
pub use self::{audit::*, body::*, ca::*, client::*, fetch::*, origin::*, redis::*, wait::*};
