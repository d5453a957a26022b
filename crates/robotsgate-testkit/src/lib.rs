//! Test support of the robotsgate workspace (not published): what the integration tests of
//! the library and of the proxy share, each using a part of it.
//!
//! - [`wait`]: the one bound ([`BOUND`]) and the bounded waits;
//! - [`origin`]: the scripted origin ([`TestOrigin`], answering with [`Reply`]s);
//! - [`body`]: the byte pattern, checksums, encoded and sized bodies;
//! - [`client`]: requests through a proxy, raw HTTP/1.1, CONNECT and TLS in tunnels;
//! - [`fetch`]: the `Fetcher` built through the public API;
//! - [`forward_proxy`]: an HTTP forward proxy (`CONNECT` and absolute form), as an egress
//!   proxy;
//! - [`head`]: a message head read off a connection, for the raw servers of the tests;
//! - [`audit`]: audit log records read back and checked;
//! - [`ca`]: a test CA with a leaf for HTTPS origins;
//! - [`redis`]: a real `redis-server` for the fleet-mode tests;
//! - [`process`]: the real binary as a child process, its stderr read line by line;
//! - [`wba`]: Web Bot Auth signatures received by an origin, checked by `web-bot-auth`;
//! - [`pgo`]: the training of the profile-guided build (not a test; its binary
//!   `robotsgate-pgo-train` is what `benches/load/pgo.sh` runs).
//!
//! Everything listens on loopback only, and every network await is bounded.

pub mod audit;
pub mod body;
pub mod ca;
pub mod client;
pub mod fetch;
pub mod forward_proxy;
pub mod head;
pub mod origin;
pub mod pgo;
pub mod process;
pub mod redis;
pub mod wait;
pub mod wba;

pub use self::{
    audit::*, body::*, ca::*, client::*, fetch::*, forward_proxy::*, head::*, origin::*, process::*,
    redis::*, wait::*, wba::*,
};
