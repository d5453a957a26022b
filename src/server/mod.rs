//! The robotsgate proxy process: everything only the `robotsgate` binary needs —
//! configuration files, the listener and forwarder, CONNECT and TLS interception with the
//! local CA, proxy users, metrics and the admin endpoints, and the command line.
//!
//! **Not part of the library's API** (hidden from the docs, no semver promise): it is
//! public only so that the binary (`src/main.rs`) and the repository's integration tests
//! can reach it. Embedders use the crate root instead.

pub mod admin;
pub mod app;
pub mod auth;
pub mod ca;
pub mod cli;
pub mod config;
pub mod forward;
pub mod intercept;
pub mod metrics;
pub mod proxy;
