//! robotsgate: make automated HTTP clients obey the Robots Exclusion Protocol (RFC 9309)
//! without changing them.
//!
//! - [`rep`]: the robots.txt engine (parsing and matching; pure, no I/O).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod rep;
