//! The configuration file (TOML). `config/robotsgate.toml` documents every key with its
//! default; that file is built into the binary ([`DEFAULT_TOML`]) and a test keeps it
//! equal to [`Config::default`].
//!
//! Values are checked while they are read, so every error names the file, the line and
//! the key:
//!
//! ```
//! use robotsgate_proxy::config::Config;
//! let err = Config::parse("x.toml", "[policy]\nmin_ttl = \"5 parsecs\"\n").unwrap_err();
//! let text = err.to_string();
//! assert!(text.starts_with("x.toml:2:"), "{text}");
//! assert!(text.contains("min_ttl"), "{text}");
//! ```

mod defaults;
mod error;
mod load;
mod sections;
mod values;
mod verify;

pub use defaults::DEFAULT_TOML;
pub use error::ConfigError;
pub use sections::{
    ActionName, AdminSection, AgentSection, AuditSection, AuthSection, ClusterOnErrorName, ClusterSection,
    Config, DnsSection, DurabilityName, FetchSection, ForwardedHeaderName, GuardSection, IdentitySection,
    IdentityUser, ImpersonatorsName, IngressModeName, IngressSection, LogFormat, LogLevel, LogSection,
    ModeName, OnErrorName, OverrideEntry, PacingHostEntry, PacingSection, PolicySection, ProxySection,
    ReplayName, Select, TlsSection, UnknownAgentsName, UserAgentRule, VerifyOperator, VerifySection,
};
pub use values::{
    Cidr, Dur, Expiry, HeaderNameValue, HostPatternValue, PasswordHashValue, ProfileName, Size, Token,
};
