//! The verifier's settings: [`VerifyConfig`] (signatures) and [`DirectoryConfig`] (the
//! key directories it fetches).

use std::time::Duration;

/// How signatures are checked. `Default` gives the values documented on each field.
#[derive(Debug, Clone)]
pub struct VerifyConfig {
    /// Clock difference tolerated on `created` (not in the future by more than this) and
    /// `expires` (not past by more than this). Default 10 s.
    pub clock_skew: Duration,
    /// Longest `expires - created` accepted. Default 24 h (the draft: expiry RECOMMENDED
    /// no more than 24 hours).
    pub max_validity: Duration,
    /// Longest `Signature-Input`, `Signature` and `Signature-Agent` value read (all lines
    /// of a field together). Default 8 KiB each.
    pub max_field_bytes: usize,
    /// Most `Signature-Input` members read. Default 8.
    pub max_signatures: usize,
    /// Most components a signature may cover. Default 32.
    pub max_components: usize,
    /// Accept the RFC 9421 test keys (whose private parts are published).
    /// Default false: only tests set it.
    pub allow_test_keys: bool,
    /// The scheme of requests whose URI has none (origin form): the ingress listener's.
    /// Default `https`.
    pub default_scheme: String,
    /// Refuse a signature seen before (same key and nonce, or the same signature when it
    /// has no nonce) until it expires. Default true.
    pub refuse_replays: bool,
    /// Most signatures remembered for the replay check. Default 100 000.
    pub replay_capacity: usize,
    /// Longest a request waits for a directory being fetched before it is decided
    /// [`Unverified::Pending`](super::Unverified::Pending) (the fetch goes on). Default
    /// 200 ms.
    pub max_wait: Duration,
    /// Key directories.
    pub directory: DirectoryConfig,
}

impl Default for VerifyConfig {
    fn default() -> Self {
        VerifyConfig {
            clock_skew: Duration::from_secs(10),
            max_validity: Duration::from_secs(24 * 3600),
            max_field_bytes: 8 * 1024,
            max_signatures: 8,
            max_components: 32,
            allow_test_keys: false,
            default_scheme: "https".into(),
            refuse_replays: true,
            replay_capacity: 100_000,
            max_wait: Duration::from_millis(200),
            directory: DirectoryConfig::default(),
        }
    }
}

/// What to do with a directory's own response signatures (the draft's possession proof:
/// one signature per key over `"@authority";req` and `content-digest`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ResponseSignatures {
    /// Not checked.
    Ignore,
    /// Checked where present: a key with a response signature that does not verify (and
    /// none that does) is not used. Keys without one are used. The default.
    #[default]
    CheckWhenPresent,
    /// Only keys with a valid response signature are used.
    Require,
}

/// How key directories are fetched and cached.
#[derive(Debug, Clone)]
pub struct DirectoryConfig {
    /// For the whole fetch (connection, headers, body). Default 2 s.
    pub timeout: Duration,
    /// Largest body read. Default 64 KiB.
    pub max_bytes: usize,
    /// Most keys in a directory. Default 32.
    pub max_keys: usize,
    /// Freshness when the response says nothing (`Cache-Control`, `Expires`). Default 1 h.
    pub default_ttl: Duration,
    /// Least freshness, whatever the response says (`no-store` included: the draft asks
    /// directories to send it, and a verifier cannot fetch per request). Default 60 s.
    pub min_ttl: Duration,
    /// Most freshness. Default 24 h.
    pub max_ttl: Duration,
    /// How long a failed fetch is remembered (no new fetch before); at most 5 min, as the
    /// draft says of negative caching. Cached keys stay in use meanwhile. Default 5 min.
    pub failure_ttl: Duration,
    /// A fresh directory without the signature's key is fetched again when it is older
    /// than this (a key published since). Default 60 s.
    pub refetch_for_unknown_key: Duration,
    /// Most directories cached. Default 4096.
    pub max_directories: u64,
    /// Most directory fetches under way at once (requests name the directories: a flood of
    /// made-up ones must not become a flood of fetches). Past it, a request whose directory
    /// is not cached is unverified. Default 32.
    pub max_concurrent_fetches: usize,
    /// Response signatures.
    pub response_signatures: ResponseSignatures,
    /// The `User-Agent` of directory fetches.
    pub user_agent: String,
}

impl Default for DirectoryConfig {
    fn default() -> Self {
        DirectoryConfig {
            timeout: Duration::from_secs(2),
            max_bytes: 64 * 1024,
            max_keys: 32,
            default_ttl: Duration::from_secs(3600),
            min_ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(24 * 3600),
            failure_ttl: Duration::from_secs(300),
            refetch_for_unknown_key: Duration::from_secs(60),
            max_directories: 4096,
            max_concurrent_fetches: 32,
            response_signatures: ResponseSignatures::default(),
            user_agent: concat!("robotsgate/", env!("CARGO_PKG_VERSION")).into(),
        }
    }
}
