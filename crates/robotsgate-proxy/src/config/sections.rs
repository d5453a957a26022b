//! The configuration's TOML types: [`Config`] and one type per section, with the
//! enumerations their keys take.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;

use robotsgate::net::NameServer;
use serde::Deserialize;

use super::values::{
    CategoryValue, Cidr, Dur, Expiry, HeaderNameValue, HostPatternValue, OptHeaderName, PasswordHashValue,
    ProfileName, Size, Token,
};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Config {
    pub proxy: ProxySection,
    pub agent: AgentSection,
    pub policy: PolicySection,
    pub pacing: PacingSection,
    pub cluster: ClusterSection,
    pub purpose: PurposeSection,
    pub fetch: FetchSection,
    pub dns: DnsSection,
    pub tls: TlsSection,
    pub guard: GuardSection,
    pub audit: AuditSection,
    pub log: LogSection,
    pub admin: AdminSection,
    pub auth: AuthSection,
    pub identity: IdentitySection,
    pub ingress: IngressSection,
    pub verify: VerifySection,
}

/// `[proxy]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ProxySection {
    pub listen: SocketAddr,
    pub upstream_timeout: Dur,
    /// The longest an origin may be silent in the middle of a response body.
    pub upstream_read_timeout: Dur,
    pub header_read_timeout: Dur,
    /// The longest a client may accept no byte of what it is sent.
    pub send_timeout: Dur,
    pub shutdown_grace: Dur,
    pub allow_clients: Vec<Cidr>,
    pub max_connections: usize,
    pub max_header_bytes: Size,
    pub tunnel_idle_timeout: Dur,
    pub workers: usize,
    pub listen_backlog: u32,
    pub upstream_idle_max: usize,
    pub upstream_idle_per_origin: usize,
    pub upstream_idle_timeout: Dur,
    /// How long an origin's idle connections beyond `upstream_idle_per_origin` are kept
    /// for the next burst of requests (0: closed as they come back).
    pub upstream_burst_grace: Dur,
    /// HTTP/1.1 `GET` and `HEAD` requests read and answered by robotsgate's own HTTP/1.1
    /// code (false: every request through hyper).
    pub http1_fast_path: bool,
}

/// `[agent]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct AgentSection {
    pub token: Token,
    pub user_agent: String,
    pub select: Select,
    pub header: HeaderNameValue,
    pub users: BTreeMap<String, Token>,
    pub user_agent_map: Vec<UserAgentRule>,
}

/// How the product token is chosen per request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum Select {
    Fixed,
    ProxyUser,
    Header,
    UserAgent,
}

/// One `[[agent.user_agent_map]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct UserAgentRule {
    pub contains: String,
    pub token: Token,
}

/// `[policy]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PolicySection {
    pub profile: ProfileName,
    pub mode: ModeName,
    pub default_ttl: Dur,
    pub min_ttl: Dur,
    pub max_ttl: Dur,
    pub stale_if_error: Dur,
    pub retry_min: Dur,
    pub retry_max: Dur,
    pub retry_busy: Dur,
    pub cache_max_entries: u64,
    pub cache_max_bytes: Size,
    pub cache_max_idle: Dur,
    pub overrides: Vec<OverrideEntry>,
}

/// `[purpose]`: what the clients' requests are made for, and what the sites' AI-usage
/// preferences for it do.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PurposeSection {
    pub default: Vec<CategoryValue>,
    pub users: BTreeMap<String, Vec<CategoryValue>>,
    pub header: OptHeaderName,
    pub unknown: UnknownName,
    pub enforce_response: bool,
}

/// `allow` or `refuse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum UnknownName {
    #[default]
    Allow,
    Refuse,
}

/// `enforce`, `report-only` or `off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ModeName {
    Enforce,
    ReportOnly,
    Off,
}

/// One `[[policy.overrides]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct OverrideEntry {
    pub hosts: HostPatternValue,
    pub action: ActionName,
    pub reason: String,
    #[serde(default)]
    pub expires: Option<Expiry>,
}

/// `allow` or `deny`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ActionName {
    Allow,
    Deny,
}

/// `[pacing]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PacingSection {
    pub enabled: bool,
    pub min_delay: Dur,
    pub max_delay: Dur,
    pub max_wait: Dur,
    pub max_queue_per_origin: usize,
    pub initial_backoff: Dur,
    pub max_backoff: Dur,
    pub max_origins: usize,
    pub hosts: Vec<PacingHostEntry>,
}

/// `[cluster]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ClusterSection {
    pub redis: String,
    /// A Redis Cluster's seed nodes (instead of `redis`); `None` when not set.
    pub redis_cluster: Option<Vec<String>>,
    pub password_file: String,
    pub ca_file: String,
    pub key_prefix: String,
    pub connect_timeout: Dur,
    pub command_timeout: Dur,
    pub on_error: ClusterOnErrorName,
    pub snapshot_ttl: Dur,
}

/// `continue` or `refuse`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ClusterOnErrorName {
    Continue,
    Refuse,
}

/// One `[[pacing.hosts]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct PacingHostEntry {
    pub hosts: HostPatternValue,
    #[serde(default)]
    pub delay: Option<Dur>,
    #[serde(default)]
    pub max_concurrency: Option<u32>,
    #[serde(default)]
    pub reason: String,
    #[serde(default)]
    pub expires: Option<Expiry>,
}

/// `[fetch]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct FetchSection {
    pub connect_timeout: Dur,
    pub header_timeout: Dur,
    pub body_timeout: Dur,
    pub total_timeout: Dur,
    pub max_redirects: u8,
}

/// `[dns]`
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct DnsSection {
    /// An address (port 53) or `address:port`.
    pub servers: Vec<NameServer>,
    #[serde(rename = "static")]
    pub static_hosts: BTreeMap<String, Vec<IpAddr>>,
}

/// `[tls]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct TlsSection {
    pub webpki_roots: bool,
    pub extra_roots: Vec<PathBuf>,
    pub ca_dir: String,
    pub intercept_ports: Vec<u16>,
    pub bypass: Vec<HostPatternValue>,
    pub handshake_timeout: Dur,
    pub leaf_cache: u64,
}

/// `[guard]`
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct GuardSection {
    pub allow: Vec<Cidr>,
    pub allow_hosts: Vec<HostPatternValue>,
}

/// `[admin]`
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct AdminSection {
    /// Off when absent.
    pub listen: Option<SocketAddr>,
}

/// `[auth]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct AuthSection {
    pub realm: String,
    /// user name → Argon2 PHC hash; empty: no authentication.
    pub users: BTreeMap<String, PasswordHashValue>,
}

/// `[identity]`: Web Bot Auth, the egress side (signing, the key directory).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct IdentitySection {
    /// The private key that signs forwarded requests ("": not signed).
    pub signing_key: String,
    /// The `https` URL of the key directory, sent in `Signature-Agent`.
    pub signature_agent: String,
    /// How long a signature is valid.
    pub validity: Dur,
    /// More private keys the directory publishes (and is signed with): key rotation.
    pub published_keys: Vec<PathBuf>,
    /// Where the key directory is served; off when absent.
    pub directory_listen: Option<SocketAddr>,
    /// Pay per crawl: the most robotsgate agrees to pay for a request (`USD 0.05`); a `402`
    /// asking at most this is retried once with a signed `crawler-max-price`. "": off.
    pub max_price: String,
    /// One proxy serving several crawlers: each `[identity.users.NAME]` signs the requests
    /// of the proxy user NAME (`[auth] users`), else of the product token NAME, with its own
    /// key and `Signature-Agent`.
    pub users: BTreeMap<String, IdentityUser>,
}

/// One `[identity.users.NAME]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct IdentityUser {
    pub signing_key: String,
    pub signature_agent: String,
    #[serde(default)]
    pub published_keys: Vec<PathBuf>,
}

/// `[audit]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct AuditSection {
    pub path: String,
    pub snapshots: String,
    pub durability: DurabilityName,
    pub queue: usize,
    pub on_error: OnErrorName,
    pub redact_query: bool,
    pub checkpoint_every: u64,
    pub checkpoint_interval: Dur,
    pub signing_key: String,
    pub rotate_size: Size,
    pub rotate_interval: Dur,
}

/// `written`, `synced` or `buffered`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum DurabilityName {
    Written,
    Synced,
    Buffered,
}

/// `refuse` or `continue`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum OnErrorName {
    Refuse,
    Continue,
}

/// `[log]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct LogSection {
    pub format: LogFormat,
    pub level: LogLevel,
}

/// `text` or `json`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum LogFormat {
    Text,
    Json,
}

/// A log level.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum LogLevel {
    Error,
    Warn,
    Info,
    Debug,
    Trace,
}

impl LogLevel {
    /// The level's name for a tracing filter.
    pub fn as_str(self) -> &'static str {
        match self {
            LogLevel::Error => "error",
            LogLevel::Warn => "warn",
            LogLevel::Info => "info",
            LogLevel::Debug => "debug",
            LogLevel::Trace => "trace",
        }
    }
}

/// `[ingress]`: `robotsgate ingress`, the reverse proxy in front of a site that enforces
/// the site's own robots.txt on the bots visiting it.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct IngressSection {
    pub listen: SocketAddr,
    /// The site: `http://host:port` ("": given with --upstream).
    pub upstream: String,
    /// The site's robots.txt as a file ("": fetched from the upstream's /robots.txt).
    pub robots: String,
    /// The status of a refusal (403; 404 for sites that prefer not to say).
    pub status: u16,
    pub mode: IngressModeName,
    pub unknown_agents: UnknownAgentsName,
    /// Peers whose `forwarded_header` is believed.
    pub trusted_proxies: Vec<Cidr>,
    /// The header those peers add the client's address to.
    pub forwarded_header: ForwardedHeaderName,
    /// How long a robots.txt fetched from the upstream is used.
    pub robots_ttl: Dur,
    /// The host the robots.txt fetch names ("": none, the upstream's own).
    pub robots_host: String,
    /// The host names of the sites the upstream tells apart, each judged by its own
    /// robots.txt (empty: one copy for every request).
    pub hosts: Vec<String>,
    pub upstream_timeout: Dur,
    /// The longest the upstream may be silent in the middle of a response body.
    pub upstream_read_timeout: Dur,
    pub header_read_timeout: Dur,
    /// The longest a client may accept no byte of what it is sent.
    pub send_timeout: Dur,
    pub shutdown_grace: Dur,
    pub max_connections: usize,
    pub max_header_bytes: Size,
    pub impersonators: ImpersonatorsName,
    /// HTTPS: the certificate chain (PEM; "": plain HTTP). With `tls_key`.
    pub tls_cert: String,
    /// HTTPS: the private key of `tls_cert` (PEM).
    pub tls_key: String,
    /// The longest a client may take to finish its TLS handshake.
    pub tls_handshake_timeout: Dur,
    /// A WebSocket with nothing moving either way for this long is closed.
    pub websocket_idle_timeout: Dur,
    /// Threads serving client connections, each with its own event loop and its own
    /// connections to the upstream (0: one per CPU the process may use).
    pub workers: usize,
    /// HTTP/1.1 `GET` and `HEAD` requests (plain or over TLS) read and answered by
    /// robotsgate's own HTTP/1.1 code (false: every request through hyper).
    pub http1_fast_path: bool,
}

/// `x-forwarded-for` or `forwarded`: the header the trusted proxies add the client's
/// address to (the other one is never read).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ForwardedHeaderName {
    XForwardedFor,
    Forwarded,
}

/// `refuse`, `star` or `allow`: what a bot whose identity check failed gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ImpersonatorsName {
    Refuse,
    Star,
    Allow,
}

/// `[verify]`: checking that a bot is who its `User-Agent` says (ingress).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct VerifySection {
    pub enabled: bool,
    /// Check the operators' published IP range lists.
    pub ip_ranges: bool,
    /// Check forward-confirmed reverse DNS (through `[dns] servers`).
    pub rdns: bool,
    /// The longest a request waits for reverse DNS (and for a key directory being
    /// fetched).
    pub max_wait: Dur,
    /// Fetch the URL lists from their URLs (at start, then every `refresh_interval`).
    pub refresh: bool,
    /// Between two fetches of a URL list that worked (jitter of up to an hour added).
    pub refresh_interval: Dur,
    /// Check Web Bot Auth signatures against the operators' `signature_agents`.
    pub signatures: bool,
    /// A replayed signature (its nonce seen before it expires): `refuse` or `allow`.
    pub replay: ReplayName,
    /// Clock difference tolerated on a signature's `created` and `expires`.
    pub clock_skew: Dur,
    /// The operators (given: they replace the defaults).
    pub operators: Vec<VerifyOperator>,
}

/// `refuse` or `allow`: what a replayed Web Bot Auth signature gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum ReplayName {
    Refuse,
    Allow,
}

/// One `[[verify.operators]]` entry.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
#[allow(missing_docs)]
pub struct VerifyOperator {
    pub name: String,
    pub tokens: Vec<String>,
    #[serde(default)]
    pub ip_lists: Vec<String>,
    #[serde(default)]
    pub rdns_suffixes: Vec<String>,
    /// `Signature-Agent` URLs (key directories, or origins) whose keys speak for it.
    #[serde(default)]
    pub signature_agents: Vec<String>,
    /// A request carrying one of its tokens that is not verified is refused.
    #[serde(default)]
    pub require: bool,
}

/// `enforce` or `report-only`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum IngressModeName {
    Enforce,
    ReportOnly,
}

/// `ignore` or `star`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
#[allow(missing_docs)]
pub enum UnknownAgentsName {
    Ignore,
    Star,
}
