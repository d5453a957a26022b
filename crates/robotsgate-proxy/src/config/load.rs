//! Reading a configuration: parsing, the checks that involve more than one value, and the
//! values made from several keys.

use super::error::{ConfigError, find_key, find_table, toml_error};
use super::sections::{ActionName, Config, Select};
use super::verify::VerifyProblem;
use robotsgate::net::PoolConfig;
use robotsgate::pacing::{HostRule, PacingConfig};
use robotsgate::policy::{Override, OverrideAction};

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
        if let Err((key, message)) = check_identity(&self.identity) {
            return Err(err(key, message));
        }
        if let Err((key, message)) = check_identity_users(&self.identity, &self.auth) {
            return Err(err(&key, message));
        }
        match super::verify::check_verify(&self.verify) {
            Ok(()) => {}
            Err(VerifyProblem::Key(key, message)) => return Err(err(key, message)),
            Err(VerifyProblem::Operator(i, message)) => {
                return Err(ConfigError {
                    file: file.to_owned(),
                    line: find_table(text, "verify.operators", i),
                    key: Some("verify.operators".to_owned()),
                    message: format!(
                        "entry {} ({:?}): {message}",
                        i + 1,
                        self.verify.operators.get(i).map_or("", |o| o.name.as_str())
                    ),
                });
            }
        }
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
        let a = &self.audit;
        if a.queue == 0 {
            return Err(err("audit.queue", "must be at least 1".into()));
        }
        if a.checkpoint_every > robotsgate::audit::MAX_CHECKPOINT_LEAVES {
            return Err(err(
                "audit.checkpoint_every",
                format!(
                    "must be at most {} (a checkpoint lists every record since the one before; 0: not by count)",
                    robotsgate::audit::MAX_CHECKPOINT_LEAVES
                ),
            ));
        }
        let interval = a.checkpoint_interval.0;
        if !interval.is_zero() && interval < std::time::Duration::from_millis(100) {
            return Err(err(
                "audit.checkpoint_interval",
                "must be at least 100ms (or \"0s\": not by time)".into(),
            ));
        }
        if a.rotate_size.0 != 0 && a.rotate_size.0 < 4096 {
            return Err(err("audit.rotate_size", "must be at least 4KiB (or 0: not by size)".into()));
        }
        let interval = a.rotate_interval.0;
        if !interval.is_zero() && interval < std::time::Duration::from_secs(1) {
            return Err(err("audit.rotate_interval", "must be at least 1s (or \"0s\": not by time)".into()));
        }

        let ic = &self.ingress;
        match (ic.tls_cert.is_empty(), ic.tls_key.is_empty()) {
            (false, true) => {
                return Err(err("ingress.tls_cert", "is set but tls_key is not: give both".into()));
            }
            (true, false) => {
                return Err(err("ingress.tls_key", "is set but tls_cert is not: give both".into()));
            }
            _ => {}
        }
        // Bounds on a wait: 0 would end every wait at once.
        for (key, d) in [
            ("ingress.websocket_idle_timeout", ic.websocket_idle_timeout),
            ("ingress.send_timeout", ic.send_timeout),
            ("ingress.upstream_read_timeout", ic.upstream_read_timeout),
            ("ingress.tls_handshake_timeout", ic.tls_handshake_timeout),
            ("tls.handshake_timeout", self.tls.handshake_timeout),
            ("proxy.send_timeout", self.proxy.send_timeout),
            ("proxy.upstream_read_timeout", self.proxy.upstream_read_timeout),
        ] {
            if d.0.is_zero() {
                return Err(err(key, "must be more than 0".into()));
            }
        }
        if ic.header_read_timeout.0.is_zero() {
            return Err(err(
                "ingress.header_read_timeout",
                "must be more than 0 (every connection would be closed before its first request)".into(),
            ));
        }
        if ic.workers > 1024 {
            return Err(err("ingress.workers", "must be at most 1024 (0: one per CPU)".into()));
        }
        if !(1024..=1024 * 1024).contains(&ic.max_header_bytes.0) {
            return Err(err("ingress.max_header_bytes", "must be between 1KiB and 1MiB".into()));
        }
        if !ic.robots_host.is_empty() && http::uri::Authority::try_from(ic.robots_host.as_str()).is_err() {
            return Err(err("ingress.robots_host", format!("{:?} is not a host[:port]", ic.robots_host)));
        }
        let mut names = std::collections::HashSet::new();
        for host in &ic.hosts {
            // A name as a Host header gives it: no port, no wildcard (it would never match).
            let name = http::uri::Authority::try_from(host.as_str()).ok().filter(|a| {
                a.port().is_none()
                    && a.as_str() == a.host()
                    && !a.host().is_empty()
                    && !a.host().contains('*')
            });
            let Some(name) = name else {
                return Err(err(
                    "ingress.hosts",
                    format!("{host:?} is not a host name (no port, no path, no wildcard: list each name)"),
                ));
            };
            let key = name.host().strip_suffix('.').unwrap_or(name.host()).to_ascii_lowercase();
            if !names.insert(key) {
                return Err(err(
                    "ingress.hosts",
                    format!("{host:?} is given twice (names compare ignoring case)"),
                ));
            }
        }
        if !ic.hosts.is_empty() && !ic.robots.is_empty() {
            return Err(err(
                "ingress.hosts",
                "each host's robots.txt is fetched from the upstream; ingress.robots gives one file for every request: set one or the other".into(),
            ));
        }
        if ic.robots_ttl.0.is_zero() {
            return Err(err(
                "ingress.robots_ttl",
                "must be more than 0 (every request would fetch robots.txt from the upstream again)".into(),
            ));
        }
        if self.tls.leaf_cache == 0 {
            return Err(err("tls.leaf_cache", "must be at least 1".into()));
        }
        let px = &self.proxy;
        if px.max_connections == 0 {
            return Err(err("proxy.max_connections", "must be at least 1".into()));
        }
        if px.header_read_timeout.0.is_zero() {
            return Err(err(
                "proxy.header_read_timeout",
                "must be more than 0 (every connection would be closed before its first request)".into(),
            ));
        }
        if !(1..=65535).contains(&px.listen_backlog) {
            return Err(err("proxy.listen_backlog", "must be between 1 and 65535".into()));
        }
        if px.upstream_idle_timeout.0.is_zero() && px.upstream_idle_max > 0 {
            return Err(err(
                "proxy.upstream_idle_timeout",
                "must be more than 0 (to keep no idle connection, set upstream_idle_max = 0)".into(),
            ));
        }
        if px.workers > 1024 {
            return Err(err("proxy.workers", "must be at most 1024 (0: one per CPU)".into()));
        }
        if self.audit.path.trim().is_empty() {
            return Err(err("audit.path", "must name a file (or \"-\": standard output)".into()));
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
        // A table that the selection in force never reads is a mistake, not a setting.
        if !self.agent.users.is_empty() && self.agent.select != Select::ProxyUser {
            return Err(err("agent.users", "is read only with agent.select = \"proxy-user\"".into()));
        }
        if !self.agent.user_agent_map.is_empty() && self.agent.select != Select::UserAgent {
            return Err(err(
                "agent.user_agent_map",
                "is read only with agent.select = \"user-agent\"".into(),
            ));
        }
        if let Some(user) = self.purpose.users.keys().find(|u| !self.auth.users.contains_key(*u)) {
            return Err(err("purpose.users", format!("{user:?} is not a user in [auth.users]")));
        }
        if let Some(h) = &self.purpose.header.0
            && *h == self.agent.header.0
            && self.agent.select == Select::Header
        {
            return Err(err(
                "purpose.header",
                format!("{h} is already agent.header, the product token's header"),
            ));
        }
        for (key, d) in [
            ("fetch.connect_timeout", self.fetch.connect_timeout),
            ("fetch.header_timeout", self.fetch.header_timeout),
            ("fetch.body_timeout", self.fetch.body_timeout),
            ("fetch.total_timeout", self.fetch.total_timeout),
        ] {
            if d.0.is_zero() {
                return Err(err(
                    key,
                    "must be more than 0 (a fetch with no time at all never succeeds)".into(),
                ));
            }
        }
        if self.fetch.max_redirects > 20 {
            return Err(err("fetch.max_redirects", "must be at most 20".into()));
        }
        let pc = &self.pacing;
        if pc.min_delay.0 > pc.max_delay.0 {
            return Err(err(
                "pacing.min_delay",
                format!("{:?} is more than max_delay {:?}", pc.min_delay.0, pc.max_delay.0),
            ));
        }
        if pc.initial_backoff.0 > pc.max_backoff.0 {
            return Err(err("pacing.initial_backoff", "is more than max_backoff".into()));
        }
        if pc.max_queue_per_origin == 0 {
            return Err(err("pacing.max_queue_per_origin", "must be at least 1".into()));
        }
        if pc.max_origins == 0 {
            return Err(err("pacing.max_origins", "must be at least 1".into()));
        }
        let cl = &self.cluster;
        if let Some((key, message)) = check_cluster(cl) {
            return Err(err(key, message));
        }
        if !cl.ca_file.is_empty() {
            self.cluster_ca().map_err(|why| err("cluster.ca_file", why))?;
        }
        if cl.command_timeout.0.is_zero() {
            return Err(err("cluster.command_timeout", "must be more than 0".into()));
        }
        for (i, h) in pc.hosts.iter().enumerate() {
            let entry = |message: String| ConfigError {
                file: file.to_owned(),
                line: find_table(text, "pacing.hosts", i),
                key: Some("pacing.hosts".to_owned()),
                message: format!("entry {} ({}): {message}", i + 1, h.hosts.0),
            };
            if h.delay.is_none() && h.max_concurrency.is_none() {
                return Err(entry("needs a delay or a max_concurrency".into()));
            }
            if h.max_concurrency == Some(0) {
                return Err(entry("max_concurrency must be at least 1".into()));
            }
        }
        Ok(())
    }

    /// The PEM certificates of `[cluster] ca_file`, the roots a `rediss://` Redis is
    /// verified with (`None` when it is not set: the webpki roots); `Err` says why the file
    /// cannot be used (unreadable, no PEM certificate in it, one that is no CA
    /// certificate rustls can use).
    pub fn cluster_ca(&self) -> Result<Option<Vec<u8>>, String> {
        use rustls::pki_types::CertificateDer;
        use rustls::pki_types::pem::PemObject;
        let path = &self.cluster.ca_file;
        if path.is_empty() {
            return Ok(None);
        }
        let pem = std::fs::read(path).map_err(|e| format!("cannot read {path}: {e}"))?;
        let mut roots = rustls::RootCertStore::empty();
        for cert in CertificateDer::pem_slice_iter(&pem) {
            let cert = cert.map_err(|e| format!("{path} is not PEM: {e}"))?;
            roots.add(cert).map_err(|e| format!("{path}: a certificate that cannot be a root: {e}"))?;
        }
        if roots.is_empty() {
            return Err(format!("{path} holds no PEM certificate (-----BEGIN CERTIFICATE-----)"));
        }
        Ok(Some(pem))
    }

    /// Fleet mode's connection settings (`None` without `[cluster] redis` or
    /// `redis_cluster`): the URL (or each seed node's) with the password of
    /// `password_file` (its content replaces the URL's), the CA of `ca_file`; `Err` says
    /// why a file cannot be used.
    #[cfg(feature = "cluster")]
    pub fn cluster_config(&self) -> Result<Option<robotsgate::cluster::ClusterConfig>, String> {
        use super::sections::ClusterOnErrorName;
        use robotsgate::cluster::{ClusterConfig, OnClusterError, Redis};
        let c = &self.cluster;
        let password = match c.password_file.as_str() {
            "" => None,
            path => {
                let text = std::fs::read_to_string(path)
                    .map_err(|e| format!("cannot read cluster.password_file {path}: {e}"))?;
                Some(text.trim_end_matches(['\r', '\n']).to_owned())
            }
        };
        let with_password = |key: &str, url: &str| -> Result<String, String> {
            let Some(password) = &password else { return Ok(url.to_owned()) };
            let mut parsed = url::Url::parse(url).map_err(|e| format!("{key}: {e}"))?;
            parsed
                .set_password(Some(password))
                .map_err(|()| format!("{key}: the Redis URL {url:?} cannot carry a password"))?;
            Ok(parsed.to_string())
        };
        let redis = match (&c.redis_cluster, c.redis.as_str()) {
            (Some(nodes), "") => Redis::Cluster(
                nodes.iter().map(|n| with_password("cluster.redis_cluster", n)).collect::<Result<_, _>>()?,
            ),
            (None, "") => return Ok(None),
            (None, url) => Redis::Server(with_password("cluster.redis", url)?),
            (Some(_), _) => return Err(format!("cluster.redis_cluster {BOTH}")),
        };
        let ca_pem = self.cluster_ca().map_err(|why| format!("cluster.ca_file: {why}"))?;
        Ok(Some(ClusterConfig {
            redis,
            ca_pem,
            key_prefix: c.key_prefix.clone(),
            connect_timeout: c.connect_timeout.0,
            command_timeout: c.command_timeout.0,
            on_error: match c.on_error {
                ClusterOnErrorName::Continue => OnClusterError::Continue,
                ClusterOnErrorName::Refuse => OnClusterError::Refuse,
            },
        }))
    }

    /// The User-Agent for robots.txt fetches.
    pub fn user_agent(&self) -> String {
        if self.agent.user_agent.is_empty() {
            format!("{} robotsgate/{}", self.agent.token.0, env!("CARGO_PKG_VERSION"))
        } else {
            self.agent.user_agent.clone()
        }
    }

    /// The upstream connection pool's bounds (`proxy.upstream_*`) as the pool takes them.
    pub fn pool_config(&self) -> PoolConfig {
        let p = &self.proxy;
        PoolConfig {
            max_idle: p.upstream_idle_max,
            max_idle_per_origin: p.upstream_idle_per_origin,
            idle_timeout: p.upstream_idle_timeout.0,
            burst_grace: p.upstream_burst_grace.0,
            read_timeout: p.upstream_read_timeout.0,
        }
    }

    /// The pacing settings as the pacer takes them.
    pub fn pacing_config(&self) -> PacingConfig {
        let p = &self.pacing;
        PacingConfig {
            enabled: p.enabled,
            min_delay: p.min_delay.0,
            max_delay: p.max_delay.0,
            max_wait: p.max_wait.0,
            max_queue_per_origin: p.max_queue_per_origin,
            initial_backoff: p.initial_backoff.0,
            max_backoff: p.max_backoff.0,
            max_origins: p.max_origins,
            hosts: p
                .hosts
                .iter()
                .map(|h| HostRule {
                    hosts: h.hosts.0.clone(),
                    delay: h.delay.map(|d| d.0),
                    max_concurrency: h.max_concurrency,
                    reason: if h.reason.is_empty() {
                        "no reason given".into()
                    } else {
                        h.reason.as_str().into()
                    },
                    expires: h.expires.map(|e| e.0),
                })
                .collect(),
        }
    }

    /// The `[purpose]` settings as the layer takes them.
    pub fn purpose(&self) -> robotsgate::layer::PurposeSettings {
        let p = &self.purpose;
        let of = |v: &[super::values::CategoryValue]| robotsgate::policy::Purpose::of(v.iter().map(|c| c.0));
        robotsgate::layer::PurposeSettings {
            default: of(&p.default),
            users: p.users.iter().map(|(u, v)| (u.clone(), of(v))).collect(),
            header: p.header.0.clone(),
            unknown: match p.unknown {
                super::sections::UnknownName::Allow => robotsgate::policy::UnknownUsage::Allow,
                super::sections::UnknownName::Refuse => robotsgate::policy::UnknownUsage::Refuse,
            },
            enforce_response: p.enforce_response,
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

/// The `[identity]` checks that need no file: `Err((key, message))`. The longest validity
/// is what verifiers accept at most (24 h, the library's `VerifyConfig::max_validity`).
fn check_identity(s: &super::sections::IdentitySection) -> Result<(), (&'static str, String)> {
    if s.signing_key.is_empty() {
        if !s.signature_agent.is_empty() {
            return Err(("identity.signature_agent", "needs identity.signing_key".into()));
        }
        if !s.published_keys.is_empty() {
            return Err(("identity.published_keys", "needs identity.signing_key".into()));
        }
        if s.directory_listen.is_some() {
            return Err(("identity.directory_listen", "needs identity.signing_key".into()));
        }
        return Ok(());
    }
    if s.signature_agent.is_empty() {
        return Err((
            "identity.signature_agent",
            "must be set with identity.signing_key: the https URL of the key directory".into(),
        ));
    }
    if let Err(e) = robotsgate::identity::httpsig::DirectoryUrl::from_member(&s.signature_agent, None) {
        return Err(("identity.signature_agent", e.to_string()));
    }
    if s.validity.0 < std::time::Duration::from_secs(1)
        || s.validity.0 > std::time::Duration::from_secs(24 * 3600)
    {
        return Err(("identity.validity", "must be between 1s and 24h".into()));
    }
    Ok(())
}

/// `[identity.users]`: each entry names an `[auth]` user or is a product token, with a key
/// file and an `https` Signature-Agent; the default `signing_key` signs the rest (and the
/// robots.txt fetches). `Err((key, message))`.
fn check_identity_users(
    s: &super::sections::IdentitySection,
    auth: &super::sections::AuthSection,
) -> Result<(), (String, String)> {
    let Some(first) = s.users.keys().next() else { return Ok(()) };
    if s.signing_key.is_empty() {
        return Err((
            "identity.signing_key".into(),
            format!(
                "must be set with identity.users (the key of every request no entry names, {first:?} aside)"
            ),
        ));
    }
    for (name, user) in &s.users {
        let key = |k: &str| format!("identity.users.{name}.{k}");
        if !auth.users.contains_key(name) && !robotsgate::rep::is_valid_product_token(name) {
            return Err((
                format!("identity.users.{name}"),
                format!("{name:?} is neither an [auth] user nor a product token"),
            ));
        }
        if user.signing_key.trim().is_empty() {
            return Err((key("signing_key"), "must be set: the private key of this crawler".into()));
        }
        if let Err(e) = robotsgate::identity::httpsig::DirectoryUrl::from_member(&user.signature_agent, None)
        {
            return Err((key("signature_agent"), format!("{:?}: {e}", user.signature_agent)));
        }
    }
    Ok(())
}

/// `[cluster] redis` and `redis_cluster` both set.
const BOTH: &str = "is set beside cluster.redis: one server (redis) or a Redis Cluster's seed nodes \
     (redis_cluster), not both";

/// The checks of `[cluster]`'s Redis (`redis` or `redis_cluster`, never both; URLs robotsgate
/// can use; `ca_file` only for `rediss://`): the key and why, or `None` when it is fine.
fn check_cluster(cl: &super::sections::ClusterSection) -> Option<(&'static str, String)> {
    if cl.redis_cluster.is_some() && !cl.redis.is_empty() {
        return Some(("cluster.redis_cluster", BOTH.into()));
    }
    let set = !cl.redis.is_empty() || cl.redis_cluster.is_some();
    if set && !cfg!(feature = "cluster") {
        let key = if cl.redis.is_empty() { "cluster.redis_cluster" } else { "cluster.redis" };
        return Some((key, "this robotsgate was built without the feature \"cluster\"".into()));
    }
    // The URLs, and the key they are under.
    let (key, urls): (&'static str, Vec<&str>) = match &cl.redis_cluster {
        Some(nodes) => ("cluster.redis_cluster", nodes.iter().map(String::as_str).collect()),
        None if cl.redis.is_empty() => ("cluster.redis", Vec::new()),
        None => ("cluster.redis", vec![cl.redis.as_str()]),
    };
    let cluster = cl.redis_cluster.is_some();
    if cluster && urls.is_empty() {
        return Some((
            key,
            "is empty: give the Redis Cluster's seed nodes (one or more \"redis://host:port\"), or leave it out".into(),
        ));
    }
    for url in &urls {
        let scheme = url.split(':').next().unwrap_or("");
        let schemes: &[&str] =
            if cluster { &["redis", "rediss"] } else { &["redis", "rediss", "redis+unix", "unix"] };
        if !schemes.contains(&scheme) {
            let why = if cluster {
                format!("{url:?} is not a Redis Cluster node's URL (redis://host:6379 or rediss://host:6379)")
            } else {
                format!("{url:?} is not a Redis URL (redis://host:6379/0 or rediss://...)")
            };
            return Some((key, why));
        }
        let Ok(parsed) = url::Url::parse(url) else {
            return Some((key, format!("{url:?} does not parse as a URL")));
        };
        if cluster && parsed.host_str().is_none_or(str::is_empty) {
            return Some((key, format!("{url:?} names no host")));
        }
        if cluster && !matches!(parsed.path(), "" | "/" | "/0") {
            return Some((
                key,
                format!(
                    "{url:?} names database {:?}, but a Redis Cluster has database 0 only",
                    &parsed.path()[1..]
                ),
            ));
        }
    }
    if cluster
        && urls.iter().any(|u| u.starts_with("rediss:"))
        && !urls.iter().all(|u| u.starts_with("rediss:"))
    {
        return Some((key, "mixes redis:// and rediss:// nodes: all are one or the other".into()));
    }
    if cluster && cl.key_prefix.contains(['{', '}']) {
        return Some((
            "cluster.key_prefix",
            format!(
                "{:?} holds a brace: with redis_cluster the origin in braces is each key's hash tag (one origin's \
                 keys in one slot), and a brace in the prefix would change it",
                cl.key_prefix
            ),
        ));
    }
    if !cl.ca_file.is_empty() && (urls.is_empty() || !urls.iter().all(|u| u.starts_with("rediss:"))) {
        let what = match (cluster, urls.as_slice()) {
            (true, _) => format!("cluster.redis_cluster {urls:?} are not all rediss:// URLs"),
            (false, [url]) => format!("cluster.redis {url:?} is not a rediss:// URL"),
            (false, _) => "neither cluster.redis nor cluster.redis_cluster is set (to rediss:// URLs)".into(),
        };
        return Some(("cluster.ca_file", format!("is for TLS, but {what}")));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let e = Config::parse("a.toml", "[fetch]\ntotal_timeout = \"0s\"\n").unwrap_err();
        assert_eq!((e.line.map(|l| l.0), e.key.as_deref()), (Some(2), Some("fetch.total_timeout")), "{e}");
        // Tables the selection in force does not read (they were silently ignored).
        let e = Config::parse(
            "a.toml",
            "[agent]\nselect = \"fixed\"\n\n[[agent.user_agent_map]]\ncontains = \"Scrapy\"\ntoken = \"ExampleBot\"\n",
        )
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("agent.user_agent_map"), "{e}");
        assert!(e.message.contains("select = \"user-agent\""), "{e}");
        let users = "[auth.users]\nalice = \"$argon2id$v=19$m=19456,t=2,p=1$c29tZXNhbHQ$RdescudvJCsgt3ub+b+dWRWJTmaaJObG\"\n";
        let e = Config::parse(
            "a.toml",
            &format!("{users}[agent]\nselect = \"header\"\n[agent.users]\nalice = \"AliceBot\"\n"),
        )
        .unwrap_err();
        assert_eq!(e.key.as_deref(), Some("agent.users"), "{e}");
        assert!(
            Config::parse(
                "a.toml",
                &format!("{users}[agent]\nselect = \"proxy-user\"\n[agent.users]\nalice = \"AliceBot\"\n")
            )
            .is_ok()
        );
        let e = Config::parse("a.toml", "[tls]\nhandshake_timeout = \"0s\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("tls.handshake_timeout"), "{e}");
        // A quiet connection is closed after it: 0 closed every one at once.
        // And an answer is cut after the other (0 cut every body that waited for a byte).
        for section in ["proxy", "ingress"] {
            for key in ["header_read_timeout", "upstream_read_timeout", "send_timeout"] {
                let e = Config::parse("a.toml", &format!("[{section}]\n{key} = \"0s\"\n")).unwrap_err();
                assert_eq!(e.key, Some(format!("{section}.{key}")), "{e}");
            }
        }
        let e = Config::parse("a.toml", "[ingress]\nrobots_host = \"a b\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("ingress.robots_host"), "{e}");
        for hosts in
            [r#"["a.example:80"]"#, r#"["a b"]"#, r#"[""]"#, r#"["a.example/x"]"#, r#"["u@a.example"]"#]
                .into_iter()
                .chain([r#"["*.a.example"]"#, r#"["a.example", "A.Example."]"#])
        {
            let e = Config::parse("a.toml", &format!("[ingress]\nhosts = {hosts}\n")).unwrap_err();
            assert_eq!(e.key.as_deref(), Some("ingress.hosts"), "{hosts}: {e}");
        }
        let both = "[ingress]\nhosts = [\"a.example\"]\nrobots = \"robots.txt\"\n";
        let e = Config::parse("a.toml", both).unwrap_err();
        assert_eq!(e.key.as_deref(), Some("ingress.hosts"), "{e}");
        let ok =
            Config::parse("a.toml", "[ingress]\nhosts = [\"a.example\", \"[2001:db8::1]\", \"192.0.2.1\"]\n");
        assert_eq!(ok.unwrap().ingress.hosts.len(), 3);
        let e = Config::parse("a.toml", "[ingress]\nrobots_ttl = \"0s\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("ingress.robots_ttl"), "{e}");
        // The ingress's head limit is bounded as the proxy's (0 made every request a 431).
        let e = Config::parse("a.toml", "[ingress]\nmax_header_bytes = \"0\"\n").unwrap_err();
        assert_eq!(
            (e.line.map(|l| l.0), e.key.as_deref()),
            (Some(2), Some("ingress.max_header_bytes")),
            "{e}"
        );
        let c = Config::parse("a.toml", "[fetch]\ntotal_timeout = \"45s\"\n").unwrap();
        assert_eq!(c.fetch.total_timeout.0, std::time::Duration::from_secs(45));
        let e = Config::parse("a.toml", "[guard]\nallow = [\"10.0.0.0/33\"]\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(2), "{e}");
        let e = Config::parse("a.toml", "[nope]\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(1), "{e}");
        let e = Config::parse("a.toml", "[policy\n").unwrap_err();
        assert!(e.line.is_some(), "{e}");
        let e = Config::parse("a.toml", "[purpose]\ndefault = [\"ai-train\"]\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(2), "{e}");
        assert!(e.to_string().contains("train-ai"), "{e}");
        let e = Config::parse("a.toml", "[purpose]\nunknown = \"deny\"\n").unwrap_err();
        assert!(e.to_string().contains("purpose") || e.line.map(|l| l.0) == Some(2), "{e}");
        let e = Config::parse("a.toml", "[purpose.users]\nbob = [\"search\"]\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("purpose.users"), "{e}");
        let ok = Config::parse(
            "a.toml",
            "[purpose]\ndefault = [\"train-ai\", \"search\"]\nheader = \"x-robots-purpose\"\n",
        )
        .unwrap();
        let p = ok.purpose();
        assert_eq!(p.default.to_string(), "train-ai,search");
        assert_eq!(p.header.map(|h| h.to_string()).as_deref(), Some("x-robots-purpose"));
    }

    #[test]
    fn cluster_ca_file_is_read_at_load_and_only_for_rediss() {
        let dir = tempfile::tempdir().unwrap();
        let file = |name: &str, content: &[u8]| {
            let p = dir.path().join(name);
            std::fs::write(&p, content).unwrap();
            p.display().to_string()
        };
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let ca = params.self_signed(&key).unwrap().pem();
        let good = file("ca.pem", ca.as_bytes());
        let config = |url: &str, ca: &str| format!("[cluster]\nredis = \"{url}\"\nca_file = \"{ca}\"\n");
        let c = Config::parse("a.toml", &config("rediss://redis.test:6380/0", &good)).unwrap();
        assert_eq!(c.cluster_ca().unwrap().as_deref(), Some(ca.as_bytes()));
        assert_eq!(Config::parse("a.toml", "").unwrap().cluster_ca(), Ok(None));
        for (url, ca, why) in [
            ("redis://redis.test:6379/0", good.clone(), "rediss://"),
            ("", good.clone(), "rediss://"),
            (
                "rediss://redis.test:6380/0",
                dir.path().join("absent.pem").display().to_string(),
                "cannot read",
            ),
            (
                "rediss://redis.test:6380/0",
                file("key.pem", key.serialize_pem().as_bytes()),
                "no PEM certificate",
            ),
            ("rediss://redis.test:6380/0", file("text.pem", b"just text\n"), "no PEM certificate"),
            (
                "rediss://redis.test:6380/0",
                file("bad.pem", b"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"),
                "cannot be a root",
            ),
        ] {
            let e = Config::parse("a.toml", &config(url, &ca)).unwrap_err();
            assert_eq!((e.key.as_deref(), e.line.map(|l| l.0)), (Some("cluster.ca_file"), Some(3)), "{e}");
            assert!(e.message.contains(why), "{url} {ca}: {e}");
        }
    }

    #[test]
    fn redis_cluster_is_one_or_more_seed_nodes_and_never_beside_redis() {
        let c = Config::parse(
            "a.toml",
            "[cluster]\nredis_cluster = [\"redis://10.0.0.1:6379\", \"redis://10.0.0.2:6379/0\"]\n",
        )
        .unwrap();
        assert_eq!(c.cluster.redis_cluster.as_ref().map(Vec::len), Some(2));
        assert_eq!(Config::parse("a.toml", "").unwrap().cluster.redis_cluster, None);
        #[cfg(feature = "cluster")]
        {
            use robotsgate::cluster::Redis;
            let dir = tempfile::tempdir().unwrap();
            let secret = dir.path().join("secret");
            std::fs::write(&secret, "s3cret\n").unwrap();
            let mut with_password = c.clone();
            with_password.cluster.password_file = secret.display().to_string();
            let config = with_password.cluster_config().unwrap().unwrap();
            assert_eq!(
                config.redis,
                Redis::Cluster(vec![
                    "redis://:s3cret@10.0.0.1:6379".into(),
                    "redis://:s3cret@10.0.0.2:6379/0".into()
                ])
            );
        }
        let ca_dir = tempfile::tempdir().unwrap();
        let ca = {
            let key = rcgen::KeyPair::generate().unwrap();
            let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
            params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
            let path = ca_dir.path().join("ca.pem");
            std::fs::write(&path, params.self_signed(&key).unwrap().pem()).unwrap();
            path.display().to_string()
        };
        let tls = format!("[cluster]\nredis_cluster = [\"rediss://10.0.0.1:6380\"]\nca_file = \"{ca}\"\n");
        assert!(Config::parse("a.toml", &tls).is_ok());
        for (text, key, line, why) in [
            (
                "[cluster]\nredis = \"redis://r:6379/0\"\nredis_cluster = [\"redis://10.0.0.1:6379\"]\n"
                    .to_owned(),
                "cluster.redis_cluster",
                3,
                "beside cluster.redis",
            ),
            ("[cluster]\nredis_cluster = []\n".into(), "cluster.redis_cluster", 2, "is empty"),
            (
                "[cluster]\nredis_cluster = [\"redis://10.0.0.1:6379/2\"]\n".into(),
                "cluster.redis_cluster",
                2,
                "database 0 only",
            ),
            (
                "[cluster]\nredis_cluster = [\"unix:///run/redis.sock\"]\n".into(),
                "cluster.redis_cluster",
                2,
                "not a Redis Cluster node",
            ),
            (
                "[cluster]\nredis_cluster = [\"10.0.0.1:6379\"]\n".into(),
                "cluster.redis_cluster",
                2,
                "not a Redis Cluster node",
            ),
            (
                "[cluster]\nredis_cluster = [\"redis://10.0.0.1:6379\", \"rediss://10.0.0.2:6380\"]\n".into(),
                "cluster.redis_cluster",
                2,
                "mixes",
            ),
            (
                "[cluster]\nredis_cluster = [\"redis://10.0.0.1:6379\"]\nkey_prefix = \"{fleet}:\"\n".into(),
                "cluster.key_prefix",
                3,
                "hash tag",
            ),
            (
                format!("[cluster]\nredis_cluster = [\"redis://10.0.0.1:6379\"]\nca_file = \"{ca}\"\n"),
                "cluster.ca_file",
                3,
                "rediss://",
            ),
        ] {
            let e = Config::parse("a.toml", &text).unwrap_err();
            assert_eq!((e.key.as_deref(), e.line.map(|l| l.0)), (Some(key), Some(line)), "{text}: {e}");
            assert!(e.message.contains(why), "{text}: {e}");
        }
        // One server may still use a prefix with braces (no hash slots there).
        assert!(
            Config::parse("a.toml", "[cluster]\nredis = \"redis://r:6379/0\"\nkey_prefix = \"{fleet}:\"\n")
                .is_ok()
        );
    }

    #[test]
    fn cluster_snapshot_ttl_is_30_days_unless_set_and_0s_is_for_ever() {
        let day = std::time::Duration::from_secs(86_400);
        assert_eq!(Config::parse("a.toml", "").unwrap().cluster.snapshot_ttl.0, 30 * day);
        let c = Config::parse("a.toml", "[cluster]\nsnapshot_ttl = \"0s\"\n").unwrap();
        assert!(c.cluster.snapshot_ttl.0.is_zero());
        let c = Config::parse("a.toml", "[cluster]\nsnapshot_ttl = \"365d\"\n").unwrap();
        assert_eq!(c.cluster.snapshot_ttl.0, 365 * day);
    }

    #[test]
    fn audit_tamper_evidence_settings_are_checked_and_name_their_key() {
        let e = Config::parse("a.toml", "[audit]\ncheckpoint_interval = \"10ms\"\n").unwrap_err();
        assert_eq!(
            (e.line.map(|l| l.0), e.key.as_deref()),
            (Some(2), Some("audit.checkpoint_interval")),
            "{e}"
        );
        let e = Config::parse("a.toml", "[audit]\ncheckpoint_every = 1048577\n").unwrap_err();
        assert_eq!((e.line.map(|l| l.0), e.key.as_deref()), (Some(2), Some("audit.checkpoint_every")), "{e}");
        assert!(e.to_string().contains("must be at most 1048576"), "{e}");
        assert!(Config::parse("a.toml", "[audit]\ncheckpoint_every = 1048576\n").is_ok());
        let e = Config::parse("a.toml", "[audit]\nrotate_size = \"1KiB\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("audit.rotate_size"), "{e}");
        let e = Config::parse("a.toml", "[audit]\nrotate_interval = \"100ms\"\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("audit.rotate_interval"), "{e}");
        let ok = Config::parse(
            "a.toml",
            "[audit]\ncheckpoint_every = 0\ncheckpoint_interval = \"0s\"\nrotate_size = \"0\"\n",
        );
        assert!(ok.is_ok(), "0 turns them off: {:?}", ok.err());
    }

    #[test]
    fn pacing_settings_are_checked_and_name_their_key() {
        let e = Config::parse("a.toml", "[pacing]\nmin_delay = \"1m\"\nmax_delay = \"30s\"\n").unwrap_err();
        assert_eq!((e.line.map(|l| l.0), e.key.as_deref()), (Some(2), Some("pacing.min_delay")), "{e}");
        let e = Config::parse("a.toml", "[pacing]\nmax_wait = \"soon\"\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(2), "{e}");
        let e = Config::parse("a.toml", "[pacing]\nmax_queue_per_origin = 0\n").unwrap_err();
        assert_eq!(e.key.as_deref(), Some("pacing.max_queue_per_origin"), "{e}");
        let text = "[[pacing.hosts]]\nhosts = \"a.example\"\ndelay = \"2s\"\n\n[[pacing.hosts]]\nhosts = \"*.b.example\"\nreason = \"r\"\n";
        let e = Config::parse("a.toml", text).unwrap_err();
        assert_eq!((e.line.map(|l| l.0), e.key.as_deref()), (Some(5), Some("pacing.hosts")), "{e}");
        assert!(e.message.contains("entry 2 (*.b.example): needs a delay or a max_concurrency"), "{e}");
        let e = Config::parse("a.toml", "[[pacing.hosts]]\nhosts = \"a.example\"\nmax_concurrency = 0\n")
            .unwrap_err();
        assert!(e.message.contains("at least 1"), "{e}");
        let e =
            Config::parse("a.toml", "[[pacing.hosts]]\nhosts = \"a.example\"\ndelai = \"2s\"\n").unwrap_err();
        assert_eq!(e.line.map(|l| l.0), Some(3), "{e}");
        let c = Config::parse(
            "a.toml",
            "[pacing]\nmin_delay = \"500ms\"\n[[pacing.hosts]]\nhosts = \"*.example.com\"\nmax_concurrency = 4\nreason = \"ops asked\"\nexpires = 2027-01-01\n",
        )
        .unwrap();
        let p = c.pacing_config();
        assert_eq!(p.min_delay, std::time::Duration::from_millis(500));
        assert_eq!((p.hosts[0].max_concurrency, &*p.hosts[0].reason), (Some(4), "ops asked"));
        assert!(p.hosts[0].expires.is_some() && p.hosts[0].delay.is_none());
    }
}
