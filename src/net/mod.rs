//! Outbound connections, shared by the robots.txt fetcher and the proxy: DNS
//! (hickory-resolver, plus static `host → address` overrides), the destination guard,
//! TCP with a deadline, TLS (rustls with the webpki roots plus configured extra roots), and
//! forward proxies ([`Proxies`]: the `HTTPS_PROXY`-style environment variables or settings
//! of your own).
//!
//! A destination is resolved once, every address is checked by the [`Guard`], and the
//! connection goes to an address that passed, so a name cannot be re-resolved to
//! something else between check and connect (no DNS rebinding).
//!
//! [`Pool`] keeps connections alive across requests and origins, within one bound on the
//! idle ones; [`Connector`] is also a `tower::Service<Uri>` usable by hyper-util's client;
//! its errors are typed ([`ConnectError`]) so callers can tell a DNS failure from a
//! refused connection, a timeout, a certificate problem or a refused destination.

mod address;
mod client_hello;
mod connector;
mod dns;
mod error;
mod guard;
pub(crate) mod http;
mod pool;
mod proxy;
mod stall;
mod stream;
mod tls;

pub(crate) use address::ip_text;
pub use address::{DenyReason, classify, push_ip};
pub use client_hello::{ClientHello, MAX_CLIENT_HELLO, read_client_hello};
pub use connector::Connector;
pub(crate) use dns::hickory;
pub use dns::{BadNameServer, DnsConfig, NameServer, Resolver};
pub use error::ConnectError;
pub use guard::Guard;
pub(crate) use http::error_chain;
pub use pool::{Pool, PoolBody, PoolBodyError, PoolConfig, PoolError, PoolRequestBody, origin_form};
pub use proxy::{Proxies, ProxyError, ProxyServer};
pub use stall::{Stall, Stalled};
pub use stream::Stream;
pub use tls::{TlsConfig, TlsSetupError, client_config, load_pem_certs};
