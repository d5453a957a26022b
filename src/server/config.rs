//! The configuration file (TOML). `config/robotsgate.toml` documents every key with its
//! default; that file is built into the binary ([`DEFAULT_TOML`]) and a test keeps it
//! equal to [`Config::default`].
//!
//! Values are checked while they are read, so every error names the file, the line and
//! the key:
//!
//! ```
//! use robotsgate::server::config::Config;
//! let err = Config::parse("x.toml", "[policy]\nmin_ttl = \"5 parsecs\"\n").unwrap_err();
//! let text = err.to_string();
//! assert!(text.starts_with("x.toml:2:"), "{text}");
//! assert!(text.contains("min_ttl"), "{text}");
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ipnet::IpNet;
use serde::Deserialize;
use serde::de::{self, Deserializer};

use crate::policy::{HostPattern, Override, OverrideAction};
use crate::rep::{Profile, is_valid_product_token};

/// The documented default configuration, as built into the binary.
pub const DEFAULT_TOML: &str = include_str!("../../config/robotsgate.toml");

/// A configuration problem, with where it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// The file (or `"<built-in>"`).
    pub file: String,
    /// 1-based line and column, when known.
    pub line: Option<(usize, usize)>,
    /// The key, e.g. `policy.min_ttl`, when known.
    pub key: Option<String>,
    /// What is wrong.
    pub message: String,
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file)?;
        if let Some((line, col)) = self.line {
            write!(f, ":{line}:{col}")?;
        }
        f.write_str(": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for ConfigError {}

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct Config {
    pub proxy: ProxySection,
    pub agent: AgentSection,
    pub policy: PolicySection,
    pub fetch: FetchSection,
    pub dns: DnsSection,
    pub tls: TlsSection,
    pub guard: GuardSection,
    pub audit: AuditSection,
    pub log: LogSection,
    pub admin: AdminSection,
    pub auth: AuthSection,
}

/// `[proxy]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct ProxySection {
    pub listen: SocketAddr,
    pub upstream_timeout: Dur,
    pub header_read_timeout: Dur,
    pub shutdown_grace: Dur,
    pub allow_clients: Vec<Cidr>,
    pub max_connections: usize,
    pub max_header_bytes: Size,
    pub tunnel_idle_timeout: Dur,
    pub workers: usize,
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
    pub overrides: Vec<OverrideEntry>,
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

/// `[fetch]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct FetchSection {
    pub connect_timeout: Dur,
    pub header_timeout: Dur,
    pub body_timeout: Dur,
    pub max_redirects: u8,
}

/// `[dns]`
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct DnsSection {
    pub servers: Vec<IpAddr>,
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

impl Default for AuthSection {
    fn default() -> Self {
        AuthSection { realm: "robotsgate".into(), users: BTreeMap::new() }
    }
}

/// `[audit]`
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
#[allow(missing_docs)]
pub struct AuditSection {
    pub path: String,
    pub snapshots: String,
    pub queue: usize,
    pub on_error: OnErrorName,
    pub redact_query: bool,
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

// ---- defaults (kept equal to config/robotsgate.toml by a test) ----

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

// ---- value types, checked while deserializing ----

/// Deserializes `T` from a string with `FromStr`, naming the expected form on error.
macro_rules! from_str_value {
    ($t:ty, $what:expr) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse::<$t>().map_err(|e| {
                    let e = e.to_string();
                    if e.contains($what) {
                        de::Error::custom(e)
                    } else {
                        de::Error::custom(format!("{e} (expected {})", $what))
                    }
                })
            }
        }
    };
}

/// A duration written as a number and a unit (`500ms`, `30s`, `5m`, `24h`, `30d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl Dur {
    fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_secs = match unit.trim() {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(format!("duration {s:?} needs a unit")),
            u => return Err(format!("unknown duration unit {u:?} in {s:?}")),
        };
        let secs = n * unit_secs;
        if !(secs.is_finite() && (0.0..=1e9).contains(&secs)) {
            return Err(format!("duration {s:?} is out of range"));
        }
        Ok(Dur(Duration::from_secs_f64(secs)))
    }
}
from_str_value!(Dur, "a number and a unit: ms, s, m, h or d, e.g. \"30s\"");

/// A size in bytes (`4096`, `64KiB`, `512MiB`, `1GB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?}"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1000,
            "kib" => 1024,
            "mb" => 1000 * 1000,
            "mib" => 1024 * 1024,
            "gb" => 1000 * 1000 * 1000,
            "gib" => 1024 * 1024 * 1024,
            u => return Err(format!("unknown size unit {u:?} in {s:?}")),
        };
        n.checked_mul(mult).map(Size).ok_or_else(|| format!("size {s:?} is too large"))
    }
}
from_str_value!(Size, "a number of bytes with an optional unit, e.g. \"512MiB\"");

/// An RFC 9309 product token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token(pub Arc<str>);

impl FromStr for Token {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if is_valid_product_token(s) {
            Ok(Token(s.into()))
        } else {
            Err(format!("invalid product token {s:?}: only letters, '-' and '_'"))
        }
    }
}
from_str_value!(Token, "an RFC 9309 product token such as \"ExampleBot\"");

/// A robots.txt profile name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileName(pub Profile);

impl FromStr for ProfileName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse::<Profile>().map(ProfileName).map_err(|e| e.to_string())
    }
}
from_str_value!(ProfileName, "google, rfc or conservative");

/// A CIDR (`10.0.0.0/8`) or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(pub IpNet);

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(net) = s.parse::<IpNet>() {
            return Ok(Cidr(net));
        }
        s.parse::<IpAddr>().map(|ip| Cidr(IpNet::from(ip))).map_err(|_| format!("invalid CIDR {s:?}"))
    }
}
from_str_value!(Cidr, "a CIDR such as \"10.0.0.0/8\" or an address");

/// A host pattern (`example.com`, `*.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPatternValue(pub HostPattern);

impl FromStr for HostPatternValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HostPattern::parse(s).map(HostPatternValue)
    }
}
from_str_value!(HostPatternValue, "a host such as \"example.com\" or \"*.example.com\"");

/// An HTTP header name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNameValue(pub http::HeaderName);

impl FromStr for HeaderNameValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        http::HeaderName::from_bytes(s.as_bytes())
            .map(HeaderNameValue)
            .map_err(|_| format!("invalid header name {s:?}"))
    }
}
from_str_value!(HeaderNameValue, "an HTTP header name");

/// When an override stops applying: a date (`2027-01-01`, midnight UTC) or an RFC 3339
/// date-time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry(pub SystemTime);

/// A password hash: an Argon2 PHC string (`$argon2id$v=19$...`), as made by
/// `robotsgate hash-password`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordHashValue(pub String);

impl FromStr for PasswordHashValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        crate::server::auth::check_hash(s).map(|()| PasswordHashValue(s.to_owned()))
    }
}
from_str_value!(PasswordHashValue, "an argon2 hash made by `robotsgate hash-password`");

impl FromStr for Expiry {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use time::format_description::well_known::Rfc3339;
        if let Ok(t) = time::OffsetDateTime::parse(s, &Rfc3339) {
            return Ok(Expiry(t.into()));
        }
        let format = time::macros::format_description!("[year]-[month]-[day]");
        time::Date::parse(s, &format)
            .map(|d| Expiry(d.midnight().assume_utc().into()))
            .map_err(|_| format!("invalid date {s:?}"))
    }
}

impl<'de> Deserialize<'de> for Expiry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // TOML dates (unquoted) and strings are both accepted.
        let v = toml::Value::deserialize(d)?;
        let s = match v {
            toml::Value::String(s) => s,
            toml::Value::Datetime(dt) => dt.to_string(),
            other => return Err(de::Error::custom(format!("expected a date, found {}", other.type_str()))),
        };
        s.parse::<Expiry>()
            .map_err(|e| de::Error::custom(format!("{e} (expected \"2027-01-01\" or an RFC 3339 time)")))
    }
}

impl Config {
    /// Parses and checks a configuration; `file` names it in errors.
    pub fn parse(file: &str, text: &str) -> Result<Config, ConfigError> {
        let config: Config = toml::from_str(text).map_err(|e| toml_error(file, text, &e))?;
        config.check(file, text)?;
        Ok(config)
    }

    /// Reads a configuration file.
    pub fn load(path: &std::path::Path) -> Result<Config, ConfigError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|e| ConfigError {
            file: name.clone(),
            line: None,
            key: None,
            message: format!("cannot read: {e}"),
        })?;
        Config::parse(&name, &text)
    }

    /// Checks that involve more than one value.
    fn check(&self, file: &str, text: &str) -> Result<(), ConfigError> {
        let err = |key: &str, message: String| ConfigError {
            file: file.to_owned(),
            line: find_key(text, key),
            key: Some(key.to_owned()),
            message,
        };
        let p = &self.policy;
        if p.min_ttl.0 > p.max_ttl.0 {
            return Err(err(
                "policy.min_ttl",
                format!("{:?} is more than max_ttl {:?}", p.min_ttl.0, p.max_ttl.0),
            ));
        }
        if p.retry_min.0 > p.retry_max.0 {
            return Err(err("policy.retry_min", "is more than retry_max".into()));
        }
        if p.cache_max_entries == 0 {
            return Err(err("policy.cache_max_entries", "must be at least 1".into()));
        }
        let ua = &self.agent.user_agent;
        if !ua.is_empty() && !ua.to_ascii_lowercase().contains(&self.agent.token.0.to_ascii_lowercase()) {
            return Err(err(
                "agent.user_agent",
                format!(
                    "{ua:?} does not contain the product token {:?} (RFC 9309 §2.2.1)",
                    self.agent.token.0
                ),
            ));
        }
        if http::HeaderValue::from_str(&self.user_agent()).is_err() {
            return Err(err("agent.user_agent", "is not a valid header value".into()));
        }
        if self.audit.queue == 0 {
            return Err(err("audit.queue", "must be at least 1".into()));
        }
        if self.tls.leaf_cache == 0 {
            return Err(err("tls.leaf_cache", "must be at least 1".into()));
        }
        let px = &self.proxy;
        if px.max_connections == 0 {
            return Err(err("proxy.max_connections", "must be at least 1".into()));
        }
        if px.workers > 1024 {
            return Err(err("proxy.workers", "must be at most 1024 (0: one per CPU)".into()));
        }
        if !(1024..=1024 * 1024).contains(&px.max_header_bytes.0) {
            return Err(err("proxy.max_header_bytes", "must be between 1KiB and 1MiB".into()));
        }
        if self.auth.realm.is_empty()
            || self.auth.realm.contains(['"', '\\'])
            || self.auth.realm.chars().any(char::is_control)
        {
            return Err(err(
                "auth.realm",
                "must be non-empty, without quotes, backslashes or control characters".into(),
            ));
        }
        for user in self.auth.users.keys() {
            if user.is_empty() || user.contains(':') || user.chars().any(char::is_control) {
                return Err(err(
                    "auth.users",
                    format!("{user:?} is not a usable user name (no ':' or control characters)"),
                ));
            }
        }
        if self.agent.select == Select::ProxyUser && self.auth.users.is_empty() {
            return Err(err("agent.select", "\"proxy-user\" needs users in [auth.users]".into()));
        }
        if let Some(user) = self.agent.users.keys().find(|u| !self.auth.users.contains_key(*u)) {
            return Err(err("agent.users", format!("{user:?} is not a user in [auth.users]")));
        }
        if self.fetch.max_redirects > 20 {
            return Err(err("fetch.max_redirects", "must be at most 20".into()));
        }
        Ok(())
    }

    /// The User-Agent for robots.txt fetches.
    pub fn user_agent(&self) -> String {
        if self.agent.user_agent.is_empty() {
            format!("{} robotsgate/{}", self.agent.token.0, env!("CARGO_PKG_VERSION"))
        } else {
            self.agent.user_agent.clone()
        }
    }

    /// The overrides as the policy takes them.
    pub fn overrides(&self) -> Vec<Override> {
        self.policy
            .overrides
            .iter()
            .map(|o| Override {
                hosts: o.hosts.0.clone(),
                action: match o.action {
                    ActionName::Allow => OverrideAction::Allow,
                    ActionName::Deny => OverrideAction::Deny,
                },
                reason: o.reason.as_str().into(),
                expires: o.expires.map(|e| e.0),
            })
            .collect()
    }
}

/// A TOML error as a [`ConfigError`] with line, column and key.
fn toml_error(file: &str, text: &str, e: &toml::de::Error) -> ConfigError {
    let line = e.span().map(|span| line_col(text, span.start));
    // toml names the key in its long form; keep the message short and add the key path
    // found at that position.
    let key = e.span().and_then(|span| key_at(text, span.start));
    ConfigError { file: file.to_owned(), line, key, message: e.message().trim().to_owned() }
}

fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let before = &text[..offset.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let col = before.rfind('\n').map_or(before.len(), |nl| before.len() - nl - 1) + 1;
    (line, col)
}

/// The dotted key whose line contains `offset` (`section.key`), from the text.
fn key_at(text: &str, offset: usize) -> Option<String> {
    let mut section = String::new();
    let mut start = 0;
    for line in text.split_inclusive('\n') {
        let end = start + line.len();
        let t = line.trim();
        if t.starts_with('[') {
            section = t.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
        }
        if offset < end {
            let key = t.split_once('=').map(|(k, _)| k.trim().trim_matches('"').to_owned());
            return Some(match (key, section.is_empty()) {
                (Some(k), true) => k,
                (Some(k), false) => format!("{section}.{k}"),
                (None, _) => section,
            });
        }
        start = end;
    }
    None
}

/// Where `section.key` is set in the text, if it is.
fn find_key(text: &str, dotted: &str) -> Option<(usize, usize)> {
    let (section, key) = dotted.rsplit_once('.').unwrap_or(("", dotted));
    let mut current = String::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('[') {
            current = t.trim_matches(|c| c == '[' || c == ']').trim().to_owned();
            continue;
        }
        if current == section && t.split_once('=').is_some_and(|(k, _)| k.trim() == key) {
            return Some((n + 1, line.len() - line.trim_start().len() + 1));
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn documented_defaults_are_the_defaults() {
        let parsed = Config::parse("config/robotsgate.toml", DEFAULT_TOML).unwrap();
        assert_eq!(parsed, Config::default());
        assert_eq!(Config::parse("empty.toml", "").unwrap(), Config::default());
    }

    #[test]
    fn errors_name_file_line_and_key() {
        let e =
            Config::parse("a.toml", "[proxy]\nlisten = \"127.0.0.1:3128\"\nlisten_typo = 1\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(3), "{e}");
        assert!(e.to_string().contains("listen_typo"), "{e}");
        let e = Config::parse("a.toml", "[policy]\nprofile = \"strict\"\n").unwrap_err();
        assert_eq!((e.line.map(|l| l.0), e.key.as_deref()), (Some(2), Some("policy.profile")), "{e}");
        assert!(e.message.contains("google, rfc or conservative"), "{e}");
        let e = Config::parse("a.toml", "[agent]\ntoken = \"MJ12bot\"\n").unwrap_err();
        assert!(e.to_string().starts_with("a.toml:2:"), "{e}");
        let e = Config::parse("a.toml", "[policy]\nmin_ttl = \"2h\"\nmax_ttl = \"1h\"\n").unwrap_err();
        assert_eq!((e.line.map(|l| l.0), e.key.as_deref()), (Some(2), Some("policy.min_ttl")), "{e}");
        let e = Config::parse("a.toml", "[agent]\ntoken = \"FooBot\"\nuser_agent = \"BarBot/1.0\"\n")
            .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("agent.user_agent"), "{e}");
        let e = Config::parse("a.toml", "[guard]\nallow = [\"10.0.0.0/33\"]\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(2), "{e}");
        let e = Config::parse("a.toml", "[nope]\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(1), "{e}");
        let e = Config::parse("a.toml", "[policy\n").unwrap_err();
        assert!(e.line.is_some(), "{e}");
    }

    #[test]
    fn values() {
        assert_eq!("500ms".parse::<Dur>().unwrap().0, Duration::from_millis(500));
        assert_eq!("1.5h".parse::<Dur>().unwrap().0, Duration::from_secs(5400));
        assert!("5".parse::<Dur>().is_err());
        assert!("5y".parse::<Dur>().is_err());
        assert_eq!("64KiB".parse::<Size>().unwrap().0, 65536);
        assert_eq!("2GB".parse::<Size>().unwrap().0, 2_000_000_000);
        assert!("1ZiB".parse::<Size>().is_err());
        let c = Config::parse(
            "a.toml",
            "[[policy.overrides]]\nhosts = \"*.example.com\"\naction = \"deny\"\nreason = \"r\"\nexpires = 2027-01-01\n",
        )
        .unwrap();
        let o = &c.overrides()[0];
        assert_eq!(o.action, OverrideAction::Deny);
        assert!(o.expires.is_some());
        let c = Config::parse("a.toml", "[dns.static]\n\"a.test\" = [\"127.0.0.1\"]\n").unwrap();
        assert_eq!(c.dns.static_hosts["a.test"], vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
    }
}
