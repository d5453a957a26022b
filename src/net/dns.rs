//! Name resolution: static overrides first, then DNS (hickory-resolver), with answers kept
//! until their TTL.

use std::collections::HashMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig, ResolverOpts};
use hickory_resolver::net::runtime::TokioRuntimeProvider;

use super::error::ConnectError;
use crate::origin::Host;

/// How names are resolved.
#[derive(Debug, Clone, Default)]
pub struct DnsConfig {
    /// Name servers to ask (UDP, and TCP for long answers); empty means the system
    /// configuration (`/etc/resolv.conf`).
    pub servers: Vec<NameServer>,
    /// Fixed answers, consulted first: lower-case host name → addresses.
    pub overrides: HashMap<String, Vec<IpAddr>>,
}

/// A name server: an address and a port, 53 unless given.
///
/// Parsed from `192.0.2.53`, `192.0.2.53:5353`, `2001:db8::53` or `[2001:db8::53]:5353`
/// (and read so from configuration files).
///
/// ```
/// use robotsgate::net::NameServer;
/// let plain: NameServer = "192.0.2.53".parse().unwrap();
/// assert_eq!(plain.addr().port(), 53);
/// let local: NameServer = "127.0.0.1:5353".parse().unwrap();
/// assert_eq!(local.addr(), "127.0.0.1:5353".parse().unwrap());
/// let v6: NameServer = "[::1]:5353".parse().unwrap();
/// assert_eq!(v6.to_string(), "[::1]:5353");
/// assert_eq!(NameServer::from("::1".parse::<std::net::IpAddr>().unwrap()).addr().port(), 53);
/// assert!("ns.example:53".parse::<NameServer>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NameServer(SocketAddr);

/// The port of a name server given without one.
pub(crate) const DNS_PORT: u16 = 53;

impl NameServer {
    /// The server's address and port.
    pub fn addr(&self) -> SocketAddr {
        self.0
    }
}

impl From<IpAddr> for NameServer {
    /// The server at `ip`, port 53.
    fn from(ip: IpAddr) -> NameServer {
        NameServer(SocketAddr::new(ip, DNS_PORT))
    }
}

impl From<SocketAddr> for NameServer {
    fn from(addr: SocketAddr) -> NameServer {
        NameServer(addr)
    }
}

/// A name server that is neither an IP address nor an `address:port`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a name server address (an IP address or address:port): {0:?}")]
pub struct BadNameServer(pub String);

impl FromStr for NameServer {
    type Err = BadNameServer;

    fn from_str(s: &str) -> Result<NameServer, BadNameServer> {
        let s = s.trim();
        if let Ok(ip) = s.parse::<IpAddr>() {
            return Ok(ip.into());
        }
        s.parse::<SocketAddr>().map(NameServer).map_err(|_| BadNameServer(s.to_owned()))
    }
}

impl fmt::Display for NameServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl<'de> serde::Deserialize<'de> for NameServer {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<NameServer, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// A hickory resolver for `servers` (empty: the system configuration), its options
/// adjusted by `tune` (over the system's own when that is used): the one place the library
/// builds one. An error says why the system configuration could not be read.
pub(crate) fn hickory(
    servers: &[NameServer],
    tune: impl FnOnce(&mut ResolverOpts),
) -> Result<TokioResolver, String> {
    let mut builder = if servers.is_empty() {
        TokioResolver::builder_tokio().map_err(|e| e.to_string())?
    } else {
        let servers = servers
            .iter()
            .map(|s| {
                let mut config = NameServerConfig::udp_and_tcp(s.addr().ip());
                for connection in &mut config.connections {
                    connection.port = s.addr().port();
                }
                config
            })
            .collect();
        TokioResolver::builder_with_config(
            ResolverConfig::from_name_servers(servers),
            TokioRuntimeProvider::default(),
        )
    };
    tune(builder.options_mut());
    builder.build().map_err(|e| e.to_string())
}

/// Resolves host names: static overrides first, then DNS.
#[derive(Clone)]
pub struct Resolver {
    overrides: Arc<HashMap<String, Vec<IpAddr>>>,
    /// Answers from DNS, kept until their TTL (at most [`MAX_ANSWER_AGE`]): every request
    /// resolves its destination for the guard, and a lookup through hickory costs more
    /// than the rest of a cached decision.
    answers: moka::sync::Cache<String, Arc<Answer>, foldhash::quality::RandomState>,
    dns: Option<TokioResolver>,
    /// Why DNS is not available (a broken system configuration), for the error.
    dns_error: Option<String>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("overrides", &self.overrides)
            .field("dns", &self.dns.is_some())
            .finish()
    }
}

/// The longest an answer from DNS is reused, whatever its TTL.
const MAX_ANSWER_AGE: Duration = Duration::from_secs(300);

/// Names whose answers are kept at once.
const MAX_ANSWERS: u64 = 10_000;

struct Answer {
    ips: Vec<IpAddr>,
    until: std::time::Instant,
}

impl Resolver {
    /// A resolver for `config`. A system configuration that cannot be read does not fail
    /// here: lookups then fail with the reason (overrides still work).
    pub fn new(config: &DnsConfig) -> Resolver {
        let overrides = config
            .overrides
            .iter()
            .map(|(k, v)| (k.trim_end_matches('.').to_ascii_lowercase(), v.clone()))
            .collect();
        let (dns, dns_error) = match hickory(&config.servers, |_| ()) {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e)),
        };
        let answers = moka::sync::Cache::builder()
            .max_capacity(MAX_ANSWERS)
            .build_with_hasher(foldhash::quality::RandomState::default());
        Resolver { overrides: Arc::new(overrides), answers, dns, dns_error }
    }

    /// `f` of the addresses of `host` when they are known without asking DNS: an IP
    /// literal, a static entry, or an answer still within its TTL.
    pub(super) fn with_known<R>(&self, host: &Host, f: impl FnOnce(&[IpAddr]) -> R) -> Option<R> {
        if let Some(ip) = host.ip() {
            return Some(f(&[ip]));
        }
        let name = host.name();
        // `example.com.` is `example.com` written as a fully qualified name (the keys are
        // stored without the dot).
        let key = name.trim_end_matches('.');
        if let Some(ips) = self.overrides.get(key) {
            return Some(f(ips));
        }
        let answer = self.answers.get(key)?;
        if std::time::Instant::now() < answer.until {
            return Some(f(&answer.ips));
        }
        self.answers.invalidate(key);
        None
    }

    /// The addresses of `host` (an IP literal is its own answer).
    pub async fn resolve(&self, host: &Host) -> Result<Vec<IpAddr>, ConnectError> {
        if let Some(ips) = self.with_known(host, <[IpAddr]>::to_vec) {
            return Ok(ips);
        }
        let name = host.name();
        let key = name.trim_end_matches('.');
        let Some(dns) = &self.dns else {
            let reason = self.dns_error.clone().unwrap_or_else(|| "no resolver".into());
            return Err(ConnectError::Dns { host: name.into_owned(), reason });
        };
        // A trailing dot: the name is absolute (no search domains).
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        match dns.lookup_ip(fqdn.as_str()).await {
            Ok(lookup) => {
                let ips: Vec<IpAddr> = lookup.iter().collect();
                if ips.is_empty() {
                    Err(ConnectError::Dns { host: name.into_owned(), reason: "no addresses".into() })
                } else {
                    let until = lookup.valid_until().min(std::time::Instant::now() + MAX_ANSWER_AGE);
                    self.answers.insert(key.to_owned(), Arc::new(Answer { ips: ips.clone(), until }));
                    Ok(ips)
                }
            }
            Err(e) => {
                let reason = if e.is_no_records_found() { "no such host".to_owned() } else { e.to_string() };
                Err(ConnectError::Dns { host: name.into_owned(), reason })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name from the system configuration (`localhost`, from the hosts file) resolves,
    /// is kept, and the kept answer is the one DNS gave.
    #[tokio::test]
    async fn dns_answers_are_kept_until_their_ttl() {
        let resolver = Resolver::new(&DnsConfig::default());
        let host = Host::parse("localhost").unwrap();
        let first = resolver.resolve(&host).await.expect("localhost resolves");
        assert!(first.iter().all(|ip| ip.is_loopback()), "{first:?}");
        let kept = resolver.answers.get("localhost").expect("answer kept");
        assert_eq!(kept.ips, first);
        assert!(kept.until <= std::time::Instant::now() + MAX_ANSWER_AGE);
        assert_eq!(resolver.resolve(&host).await.expect("again"), first);
        // An expired answer is not used: it is dropped and asked again.
        resolver.answers.insert(
            "localhost".into(),
            Arc::new(Answer { ips: vec!["192.0.2.1".parse().unwrap()], until: std::time::Instant::now() }),
        );
        assert_eq!(resolver.resolve(&host).await.expect("after expiry"), first);
    }
}
