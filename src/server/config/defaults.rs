//! The defaults of every key, kept equal to `config/robotsgate.toml` (built into the
//! binary as [`DEFAULT_TOML`]) by a test.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::sections::{
    AgentSection, AuditSection, AuthSection, FetchSection, LogFormat, LogLevel, LogSection, ModeName,
    OnErrorName, PolicySection, ProxySection, Select, TlsSection,
};
use super::values::{Dur, HeaderNameValue, ProfileName, Size, Token};
use crate::rep::Profile;

/// The documented default configuration, as built into the binary.
pub const DEFAULT_TOML: &str = include_str!("../../../config/robotsgate.toml");

impl Default for ProxySection {
    fn default() -> Self {
        ProxySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 3128)),
            upstream_timeout: Dur::secs(60),
            header_read_timeout: Dur::secs(30),
            shutdown_grace: Dur::secs(30),
            allow_clients: Vec::new(),
            max_connections: 10_000,
            max_header_bytes: Size(64 * 1024),
            tunnel_idle_timeout: Dur::secs(600),
            workers: 0,
        }
    }
}

impl Default for AgentSection {
    fn default() -> Self {
        AgentSection {
            token: Token("robotsgate".into()),
            user_agent: String::new(),
            select: Select::Fixed,
            header: HeaderNameValue(http::HeaderName::from_static("x-robots-agent")),
            users: BTreeMap::new(),
            user_agent_map: Vec::new(),
        }
    }
}

impl Default for PolicySection {
    fn default() -> Self {
        PolicySection {
            profile: ProfileName(Profile::Conservative),
            mode: ModeName::Enforce,
            default_ttl: Dur::secs(24 * 3600),
            min_ttl: Dur::secs(60),
            max_ttl: Dur::secs(24 * 3600),
            stale_if_error: Dur::secs(30 * 24 * 3600),
            retry_min: Dur::secs(60),
            retry_max: Dur::secs(3600),
            retry_busy: Dur::secs(15),
            cache_max_entries: 100_000,
            cache_max_bytes: Size(512 * 1024 * 1024),
            overrides: Vec::new(),
        }
    }
}

impl Default for FetchSection {
    fn default() -> Self {
        FetchSection {
            connect_timeout: Dur::secs(5),
            header_timeout: Dur::secs(10),
            body_timeout: Dur::secs(20),
            max_redirects: 5,
        }
    }
}

impl Default for TlsSection {
    fn default() -> Self {
        TlsSection {
            webpki_roots: true,
            extra_roots: Vec::new(),
            ca_dir: String::new(),
            intercept_ports: vec![443],
            bypass: Vec::new(),
            handshake_timeout: Dur::secs(10),
            leaf_cache: 10_000,
        }
    }
}

impl Default for AuditSection {
    fn default() -> Self {
        AuditSection {
            path: "-".into(),
            snapshots: "robotsgate-snapshots".into(),
            queue: 4096,
            on_error: OnErrorName::Refuse,
            redact_query: false,
        }
    }
}

impl Default for LogSection {
    fn default() -> Self {
        LogSection { format: LogFormat::Text, level: LogLevel::Info }
    }
}

impl Default for AuthSection {
    fn default() -> Self {
        AuthSection { realm: "robotsgate".into(), users: BTreeMap::new() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::config::Config;

    #[test]
    fn documented_defaults_are_the_defaults() {
        let parsed = Config::parse("config/robotsgate.toml", DEFAULT_TOML).unwrap();
        assert_eq!(parsed, Config::default());
        assert_eq!(Config::parse("empty.toml", "").unwrap(), Config::default());
    }
}
