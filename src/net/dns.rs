//! Name resolution: static overrides first, then DNS (hickory-resolver), with answers kept
//! until their TTL.

use std::collections::HashMap;
use std::fmt;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;

use super::error::ConnectError;
use crate::origin::Host;

/// How names are resolved.
#[derive(Debug, Clone, Default)]
pub struct DnsConfig {
    /// Name servers to ask; empty means the system configuration (`/etc/resolv.conf`).
    pub servers: Vec<IpAddr>,
    /// Fixed answers, consulted first: lower-case host name → addresses.
    pub overrides: HashMap<String, Vec<IpAddr>>,
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
        let built = if config.servers.is_empty() {
            TokioResolver::builder_tokio().and_then(|b| b.build())
        } else {
            let servers = config.servers.iter().map(|ip| NameServerConfig::udp_and_tcp(*ip)).collect();
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            )
            .build()
        };
        let (dns, dns_error) = match built {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e.to_string())),
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
