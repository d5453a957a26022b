//! The fetcher under test, built through the public API: static DNS overrides to
//! 127.0.0.1, a guard opened to loopback, test-sized timeouts.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use robotsgate::fetch::{FetchConfig, Fetcher};
use robotsgate::net::{Connector, DnsConfig, Guard, Resolver, TlsConfig, client_config};

/// Host names the static DNS overrides map to 127.0.0.1.
pub fn test_hosts() -> Vec<String> {
    let mut hosts: Vec<String> =
        ["a.test", "b.test", "c.test", "example.test", "www.example.test", "shop.example.test"]
            .map(String::from)
            .to_vec();
    hosts.extend((0..32).map(|i| format!("o{i}.test")));
    hosts
}

/// A resolver whose overrides map [`test_hosts`] to 127.0.0.1 (other names go to DNS).
pub fn resolver() -> Resolver {
    let overrides = test_hosts().into_iter().map(|h| (h, vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])).collect();
    Resolver::new(&DnsConfig { overrides, ..DnsConfig::default() })
}

/// The default guard with loopback opened (the test origins live there).
pub fn loopback_guard() -> Guard {
    Guard::default().allow("127.0.0.0/8".parse().unwrap())
}

/// A connector through [`resolver`] and `guard`.
pub fn connector(guard: Guard, connect_timeout: Duration) -> Connector {
    let tls = client_config(&TlsConfig::default(), &[b"http/1.1"]).expect("TLS client config");
    Connector::new(resolver(), Arc::new(guard), tls, connect_timeout)
}

/// The User-Agent the tests' fetchers send.
pub const USER_AGENT: &str = "robotsgate-test ExampleBot/1.0";

/// A fetch configuration with test-sized timeouts (5 s each) and the spec's limits.
pub fn fetch_config() -> FetchConfig {
    FetchConfig {
        user_agent: USER_AGENT.into(),
        header_timeout: Duration::from_secs(5),
        body_timeout: Duration::from_secs(5),
        ..FetchConfig::default()
    }
}

/// A fetcher that may connect to loopback, with `config`.
pub fn fetcher_with(config: FetchConfig) -> Fetcher {
    Fetcher::new(connector(loopback_guard(), Duration::from_secs(5)), config)
}

/// A fetcher that may connect to loopback, with [`fetch_config`].
pub fn fetcher() -> Fetcher {
    fetcher_with(fetch_config())
}
