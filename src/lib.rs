//! robotsgate: make automated HTTP clients obey the Robots Exclusion Protocol (RFC 9309)
//! without changing them.
//!
//! - [`rep`]: the robots.txt engine (parsing and matching; pure, no I/O), the
//!   `robotsgate-rep` crate.
//! - [`origin`]: the origin (scheme, host, port) a robots.txt file belongs to.
//! - [`net`]: outbound connections (DNS, destination guard, TCP, TLS).
//! - [`fetch`]: getting an origin's robots.txt (status classes, redirects, limits).
//! - [`policy`]: the per-origin cache and the decision for a request.
//! - [`audit`]: the decision log (JSON Lines) and robots.txt snapshots.
//! - [`layer`]: `RobotsLayer`, the tower middleware that enforces the decisions.
//! - [`proxy`]: the forward proxy (HTTP/1.1, CONNECT) around the layer.
//! - [`config`]: the TOML configuration.
//! - [`app`]: the proxy assembled from a configuration.
//! - [`tls`]: the local CA and leaf certificates for TLS interception.
//! - [`metrics`]: Prometheus metrics; [`admin`]: `/healthz`, `/readyz`, `/metrics`.
//! - [`auth`]: proxy authentication (Basic, argon2 hashes).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod app;
pub mod audit;
pub mod auth;
pub mod config;
pub mod fetch;
pub mod intercept;
pub mod layer;
pub mod metrics;
pub mod net;
pub mod origin;
pub mod policy;
pub mod proxy;
pub use robotsgate_rep as rep;
pub mod tls;
