//! The defaults of every key, kept equal to `config/robotsgate.toml` (built into the
//! binary as [`DEFAULT_TOML`]) by a test.

use std::collections::BTreeMap;
use std::net::SocketAddr;

use super::sections::{
    AgentSection, AuditSection, AuthSection, ClusterOnErrorName, ClusterSection, DurabilityName,
    FetchSection, IdentitySection, LogFormat, LogLevel, LogSection, ModeName, OnErrorName, PacingSection,
    PolicySection, ProxySection, Select, TlsSection,
};
use super::sections::{
    ForwardedHeaderName, ImpersonatorsName, IngressModeName, IngressSection, ReplayName, UnknownAgentsName,
    VerifyOperator, VerifySection,
};
use super::values::{Dur, HeaderNameValue, ProfileName, Size, Token};
use robotsgate::identity::Operator;
use robotsgate::identity::ranges::refresh::RefreshConfig;
use robotsgate::identity::rdns::RdnsConfig;
use robotsgate::pacing::PacingConfig;
use robotsgate::policy::PolicyConfig;

/// The documented default configuration, as built into the binary.
pub const DEFAULT_TOML: &str = include_str!("../../config/robotsgate.toml");

impl Default for ProxySection {
    fn default() -> Self {
        ProxySection {
            listen: SocketAddr::from(([127, 0, 0, 1], 3128)),
            upstream_timeout: Dur::secs(60),
            upstream_read_timeout: Dur::secs(60),
            header_read_timeout: Dur::secs(30),
            send_timeout: Dur::secs(60),
            shutdown_grace: Dur::secs(30),
            allow_clients: Vec::new(),
            max_connections: 10_000,
            max_header_bytes: Size(64 * 1024),
            tunnel_idle_timeout: Dur::secs(600),
            workers: 0,
            listen_backlog: 4096,
            upstream_idle_max: 256,
            upstream_idle_per_origin: 32,
            upstream_idle_timeout: Dur::secs(15),
            upstream_burst_grace: Dur::secs(2),
            http1_fast_path: true,
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
    /// The library's defaults ([`PolicyConfig::default`]), enforced.
    fn default() -> Self {
        let p = PolicyConfig::default();
        PolicySection {
            profile: ProfileName(p.profile),
            mode: ModeName::Enforce,
            default_ttl: Dur(p.default_ttl),
            min_ttl: Dur(p.min_ttl),
            max_ttl: Dur(p.max_ttl),
            stale_if_error: Dur(p.stale_if_error),
            retry_min: Dur(p.retry_min),
            retry_max: Dur(p.retry_max),
            retry_busy: Dur(p.retry_busy),
            cache_max_entries: p.max_entries,
            cache_max_bytes: Size(p.max_bytes),
            cache_max_idle: Dur(p.max_idle),
            overrides: Vec::new(),
        }
    }
}

impl Default for PacingSection {
    /// The library's defaults ([`PacingConfig::default`]).
    fn default() -> Self {
        let p = PacingConfig::default();
        PacingSection {
            enabled: p.enabled,
            min_delay: Dur(p.min_delay),
            max_delay: Dur(p.max_delay),
            max_wait: Dur(p.max_wait),
            max_queue_per_origin: p.max_queue_per_origin,
            initial_backoff: Dur(p.initial_backoff),
            max_backoff: Dur(p.max_backoff),
            max_origins: p.max_origins,
            hosts: Vec::new(),
        }
    }
}

impl Default for ClusterSection {
    fn default() -> Self {
        ClusterSection {
            redis: String::new(),
            redis_cluster: None,
            password_file: String::new(),
            ca_file: String::new(),
            key_prefix: "robotsgate:".into(),
            connect_timeout: Dur::secs(2),
            command_timeout: Dur(std::time::Duration::from_millis(500)),
            on_error: ClusterOnErrorName::Continue,
            snapshot_ttl: Dur::secs(30 * 24 * 3600),
        }
    }
}

impl Default for FetchSection {
    fn default() -> Self {
        FetchSection {
            connect_timeout: Dur::secs(5),
            header_timeout: Dur::secs(10),
            body_timeout: Dur::secs(20),
            total_timeout: Dur::secs(30),
            max_redirects: 5,
        }
    }
}

impl Default for IdentitySection {
    fn default() -> Self {
        IdentitySection {
            signing_key: String::new(),
            signature_agent: String::new(),
            validity: Dur::secs(60),
            published_keys: Vec::new(),
            directory_listen: None,
            max_price: String::new(),
            users: Default::default(),
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
            durability: DurabilityName::Written,
            queue: 4096,
            on_error: OnErrorName::Refuse,
            redact_query: false,
            checkpoint_every: 1000,
            checkpoint_interval: Dur::secs(10),
            signing_key: String::new(),
            rotate_size: Size(1 << 30),
            rotate_interval: Dur::secs(0),
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

impl Default for IngressSection {
    fn default() -> Self {
        IngressSection {
            listen: SocketAddr::from(([127, 0, 0, 1], 8080)),
            upstream: String::new(),
            robots: String::new(),
            status: 403,
            mode: IngressModeName::Enforce,
            unknown_agents: UnknownAgentsName::Ignore,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeaderName::XForwardedFor,
            robots_ttl: Dur::secs(86_400),
            robots_host: String::new(),
            hosts: Vec::new(),
            upstream_timeout: Dur::secs(60),
            upstream_read_timeout: Dur::secs(60),
            header_read_timeout: Dur::secs(15),
            send_timeout: Dur::secs(60),
            shutdown_grace: Dur::secs(10),
            max_connections: 10_000,
            max_header_bytes: Size(64 * 1024),
            impersonators: ImpersonatorsName::Refuse,
            tls_cert: String::new(),
            tls_key: String::new(),
            tls_handshake_timeout: Dur::secs(10),
            websocket_idle_timeout: Dur::secs(600),
            workers: 0,
            http1_fast_path: true,
        }
    }
}

impl Default for VerifySection {
    /// On, with the library's operators ([`Operator::defaults`]) and reverse DNS wait
    /// ([`RdnsConfig::default`]).
    fn default() -> Self {
        VerifySection {
            enabled: true,
            ip_ranges: true,
            rdns: true,
            max_wait: Dur(RdnsConfig::default().max_wait),
            refresh: true,
            refresh_interval: Dur(RefreshConfig::default().interval),
            signatures: true,
            replay: ReplayName::Refuse,
            clock_skew: Dur(robotsgate::identity::httpsig::VerifyConfig::default().clock_skew),
            operators: Operator::defaults()
                .into_iter()
                .map(|o| VerifyOperator {
                    name: o.name,
                    tokens: o.tokens,
                    ip_lists: o.ip_lists,
                    rdns_suffixes: o.rdns_suffixes,
                    signature_agents: o.signature_agents,
                    require: o.require,
                })
                .collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    #[test]
    fn documented_defaults_are_the_defaults() {
        let parsed = Config::parse("config/robotsgate.toml", DEFAULT_TOML).unwrap();
        assert_eq!(parsed, Config::default());
        assert_eq!(Config::parse("empty.toml", "").unwrap(), Config::default());
    }
}
