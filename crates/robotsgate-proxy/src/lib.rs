//! The robotsgate proxy process: everything only the `robotsgate` binary needs —
//! configuration files, the listener and forwarder, CONNECT and TLS interception with the
//! local CA, proxy users, metrics and the admin endpoints, and the command line.
//!
//! It stands on the `robotsgate` library like any embedder: the library decides (robots.txt,
//! pacing, audit), this crate listens, forwards and wires. Its modules are public for the
//! binary (`src/main.rs`) and this crate's integration tests; embedders use the library.

mod accept;
pub mod admin;
pub mod app;
pub mod auth;
pub mod ca;
pub mod cli;
pub mod config;
pub mod forward;
mod h1_server;
mod held;
pub mod identity;
pub mod ingress;
pub mod intercept;
mod memory;
pub mod metrics;
mod prefixed;
pub mod proxy;
mod quiet;
mod send_bound;
mod server_name;
mod slot;
mod spares;
mod workers;
