//! robotsgate: make automated HTTP clients obey the Robots Exclusion Protocol (RFC 9309)
//! without changing them.
//!
//! The library is the part an embedding client uses; the `robotsgate` binary (the
//! `robotsgate-proxy` crate) wraps the same layer in a forward proxy and a reverse proxy,
//! through this crate's public API like any embedder.
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! # let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
//! #     .build_http::<http_body_util::Empty<bytes::Bytes>>();
//! let robots = robotsgate::Robots::builder().agent("ExampleBot").build()?;
//! let http = tower::ServiceBuilder::new().layer(robots.layer()).service(client);
//! // Every request through `http` is checked against its origin's robots.txt first.
//! # let _ = http;
//! # Ok(())
//! # }
//! ```
//!
//! - [`rep`]: the robots.txt engine (parsing and matching; pure, no I/O), the
//!   `robotsgate-rep` crate.
//! - [`origin`]: the origin (scheme, host, port) a robots.txt file belongs to.
//! - [`target`]: the origin and path a URL given as text names (every URL a browser
//!   accepts).
//! - [`net`]: outbound connections (DNS, destination guard, TCP, TLS, forward proxies).
//! - [`fetch`]: getting an origin's robots.txt (status classes, redirects, limits), through
//!   robotsgate's connections or your own client.
//! - [`identity`]: who the bot is: published IP ranges, forward-confirmed reverse DNS and
//!   Web Bot Auth signatures (verified, and made for the requests robotsgate sends).
//! - [`policy`]: the per-origin cache and the decision for a request.
//! - [`pacing`]: when a request may go: crawl-delay, request-rate, back-off after 429/503,
//!   requests held in order and refused past a limit.
//! - [`audit`]: the decision log (JSON Lines) and robots.txt snapshots.
//! - [`layer`]: `RobotsLayer`, the tower middleware that enforces the decisions.
//! - [`ingress`]: `IngressLayer`, the other side: a site enforces its own robots.txt on
//!   the bots that visit it (a tower layer over a server `Service`).
//!
//! # Features
//! - `cluster` (default): fleet mode, several replicas sharing robots.txt copies and
//!   pacing through Redis (module `cluster`). `default-features = false` leaves out the
//!   Redis client.
//! - `brotli` (default): robots.txt fetched with `br` as well as `gzip` and `deflate`;
//!   without it the fetcher does not ask for `br` (and the Brotli decoder is not built).
//! - `reqwest`: `Robots::reqwest_middleware`, a `reqwest_middleware::Middleware` that
//!   checks every request and redirect hop (module `reqwest`).

#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod audit;
#[cfg(feature = "cluster")]
pub mod cluster;
mod digest;
pub mod fetch;
pub mod identity;
mod ids;
pub mod ingress;
pub mod layer;
pub mod net;
pub mod origin;
pub mod pacing;
pub mod policy;
mod refusal;
pub use robotsgate_rep as rep;
mod robots;
pub mod target;
mod vocabulary;

#[cfg(feature = "reqwest")]
pub mod reqwest;

pub use refusal::{ROBOTSGATE_HEADER, Refusal, RefusalKind};
pub use robots::{BuildError, Robots, RobotsBuilder};
pub use vocabulary::{Outcome, ReasonClass, UnknownName};
