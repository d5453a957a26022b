//! Fleet mode (feature `cluster`): several robotsgate replicas behind a load balancer
//! behave as one proxy through Redis.
//!
//! - **Pacing** ([`RedisPaceStore`]): each lane's next slot and back-off pause live in a
//!   Redis hash, advanced atomically by Lua scripts with Redis' own clock (`TIME`), so N
//!   replicas together keep an origin's delay, whatever their clocks say. A pause is also
//!   published on `<prefix>pauses` and mirrored by every replica, which asks Redis only
//!   about the origins it paces.
//! - **robots.txt copies** ([`RedisCopyShare`]): a second cache level under the origin,
//!   with a lease so that one replica fetches for the fleet; the process' own cache stays
//!   the first level (a decision on a copy the replica holds never touches Redis).
//!
//! When Redis cannot be reached (or answers too slowly), requests keep being decided: each
//! replica paces on its own state (the fleet becomes N independent proxies, never a stopped
//! one) and says so: [`Cluster::is_up`] (the metric `robotsgate_cluster_up`), a warning
//! line each time the state changes, and the `cluster` field of the audit records decided
//! without it. [`OnClusterError::Refuse`] answers `503` instead. The connection is
//! re-established automatically. A stored value that does not read (another program wrote
//! the key) counts as absent, never as trusted.
//!
//! - **Snapshots** ([`RedisCopyShare::with_snapshots`]): the replica that fetches a
//!   robots.txt also keeps its body under its SHA-256, so that `robotsgate audit explain`
//!   finds the exact file of a decision whichever replica made it ([`read_snapshot`]).
//! - **Web Bot Auth replays** ([`RedisReplays`], the site side): a signature one replica
//!   accepted is a replay at every other.
//! - **Ingress pacing** ([`RedisIngressPacing`], the site side): a bot's `Crawl-delay`
//!   (per token and client network) holds across the replicas, with the pacer's slot
//!   script.
//!
//! Keys: `<prefix>{<origin>}:pace:<token>`, `<prefix>{<origin>}:robots` and
//! `<prefix>{<origin>}:robots:lease`: the origin in braces is a hash tag, so that a Redis
//! Cluster keeps one origin's keys in one slot (the only script that touches two keys,
//! the copy and its lease, touches one origin's); `<prefix>snapshot:<sha256>`, one
//! string per robots.txt body; and `<prefix>replay:{<hash>}`, one per signature accepted,
//! until it expires; `<prefix>ingress:{<token>|<network>}:pace`, one hash per bot the
//! ingress paces.
//!
//! **One server or a Redis Cluster** ([`Redis`]): the same keys and scripts work on both.
//! With a cluster, the seed nodes are asked for the slot map (when the first command
//! needs it: no I/O at start), each command goes to the node that holds its key's slot
//! and follows `MOVED`/`ASK`; a script the node does not know yet is sent whole (`EVAL`)
//! to that node only. While the node holding an origin's slot is down (until a replica of
//! it takes over), the requests that need it go on alone as above, each within
//! `command_timeout`.
//!
//! ```
//! use std::time::Duration;
//! use robotsgate::cluster::{Cluster, ClusterConfig, Redis};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A Redis Cluster: a few seed nodes; the client finds the others.
//! let config = ClusterConfig {
//!     redis: Redis::Cluster(vec!["redis://10.0.0.1:6379".into(), "redis://10.0.0.2:6379".into()]),
//!     command_timeout: Duration::from_millis(300),
//!     ..ClusterConfig::default()
//! };
//! let cluster = Cluster::new(config)?; // no I/O yet
//! let robots = robotsgate::Robots::builder().agent("ExampleBot").cluster(cluster.clone()).build()?;
//! let _watch = cluster.watch(Duration::from_secs(1));
//! # drop(robots);
//! # Ok(())
//! # }
//! ```

mod copies;
mod ingress;
mod pauses;
mod replays;
mod store;

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

pub use copies::RedisCopyShare;
pub use ingress::RedisIngressPacing;
pub use replays::RedisReplays;
pub use store::RedisPaceStore;

/// What a replica does while Redis cannot be reached.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum OnClusterError {
    /// Go on alone: decide, fetch and pace with this replica's own state, and say so.
    #[default]
    Continue,
    /// Answer `503` (`x-robotsgate: cluster-unavailable`): the fleet's politeness promise
    /// cannot be kept.
    Refuse,
}

/// Where the fleet's Redis is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redis {
    /// One server: `redis://[user:password@]host:port/db` or `rediss://...` (TLS, rustls:
    /// the webpki roots, or [`ClusterConfig::ca_pem`]).
    Server(String),
    /// A Redis Cluster: the URLs of some of its nodes (seeds: `redis://[user:password@]host:port`,
    /// or all `rediss://`), from which the client learns the others and the slot map. All
    /// with the same user, password and scheme; database 0 (a Redis Cluster has no other).
    Cluster(Vec<String>),
}

impl Default for Redis {
    fn default() -> Self {
        Redis::Server(String::new())
    }
}

/// How to reach the fleet's Redis.
#[derive(Debug, Clone, PartialEq)]
pub struct ClusterConfig {
    /// One server or a Redis Cluster.
    pub redis: Redis,
    /// `rediss://`: the PEM certificates (one or more) that Redis' certificate (every
    /// node's, for a cluster) is verified against, instead of the webpki roots (a private
    /// CA); `None`: the webpki roots.
    pub ca_pem: Option<Vec<u8>>,
    /// Prepended to every key (several fleets can share one Redis).
    pub key_prefix: String,
    /// For a connection to be made.
    pub connect_timeout: Duration,
    /// For one command's answer; past it the replica goes on alone for that request.
    pub command_timeout: Duration,
    /// What to do while Redis cannot be reached.
    pub on_error: OnClusterError,
}

impl Default for ClusterConfig {
    fn default() -> Self {
        ClusterConfig {
            redis: Redis::default(),
            ca_pem: None,
            key_prefix: "robotsgate:".into(),
            connect_timeout: Duration::from_secs(2),
            command_timeout: Duration::from_millis(500),
            on_error: OnClusterError::Continue,
        }
    }
}

/// Why the cluster connection could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum ClusterError {
    /// The URL is not a Redis URL.
    #[error("cluster.redis: {0}")]
    Url(String),
    /// The CA certificates cannot be used (or the URL is not `rediss://`).
    #[error("cluster.ca_file: {0}")]
    Ca(String),
    /// The Redis Cluster's seed nodes cannot be used (none, a Unix socket, a database
    /// other than 0, different users, passwords or schemes).
    #[error("cluster.redis_cluster: {0}")]
    Nodes(String),
    /// The key prefix holds `{` or `}`: in a Redis Cluster it would change the keys' hash
    /// tag (one origin's keys would no longer share a slot).
    #[error("cluster.key_prefix: {0}")]
    KeyPrefix(String),
}

/// Sees the cluster's state changes (the proxy's metrics do).
pub trait ClusterObserver: Send + Sync + 'static {
    /// Redis became reachable (`true`) or unreachable (`false`).
    fn cluster_up(&self, up: bool);
}

/// The connection to the fleet's Redis, and whether it works. Cheap to clone.
#[derive(Clone)]
pub struct Cluster {
    inner: Arc<Inner>,
}

struct Inner {
    connection: Connection,
    config: ClusterConfig,
    up: AtomicBool,
    observer: std::sync::OnceLock<Arc<dyn ClusterObserver>>,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("key_prefix", &self.inner.config.key_prefix)
            .field("up", &self.is_up())
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// A cluster connection for `config`, made lazily (no I/O here: a replica starts
    /// whether Redis is up or not); call within a tokio runtime. Start [`Cluster::watch`]
    /// beside it: once Redis is found down, the stores go on alone without asking it until
    /// the watch sees it back.
    pub fn new(config: ClusterConfig) -> Result<Cluster, ClusterError> {
        let connection = match &config.redis {
            Redis::Server(_) => {
                let client = client(&config)?;
                let manager_config = redis::aio::ConnectionManagerConfig::new()
                    .set_connection_timeout(Some(config.connect_timeout))
                    .set_response_timeout(Some(config.command_timeout))
                    .set_number_of_retries(2)
                    .set_max_delay(Duration::from_secs(1));
                let manager = redis::aio::ConnectionManager::new_lazy_with_config(client, manager_config)
                    .map_err(|e| ClusterError::Url(e.to_string()))?;
                Connection::Server(manager)
            }
            Redis::Cluster(_) => {
                let client = cluster_client(&config)?;
                let timeouts = redis::cluster::ClusterConfig::new()
                    .set_connection_timeout(config.connect_timeout)
                    .set_response_timeout(config.command_timeout);
                Connection::Cluster(client.get_pending_async_connection_with_config(timeouts))
            }
        };
        Ok(Cluster {
            inner: Arc::new(Inner {
                connection,
                config,
                // Until a command says otherwise.
                up: AtomicBool::new(true),
                observer: std::sync::OnceLock::new(),
            }),
        })
    }

    /// Tells `observer` of every state change (once: a second observer is ignored).
    pub fn observe(&self, observer: Arc<dyn ClusterObserver>) {
        observer.cluster_up(self.is_up());
        let _ = self.inner.observer.set(observer);
    }

    /// The configuration.
    pub fn config(&self) -> &ClusterConfig {
        &self.inner.config
    }

    /// Whether the last command reached Redis.
    pub fn is_up(&self) -> bool {
        self.inner.up.load(Ordering::Relaxed)
    }

    /// Whether requests are to be refused now (Redis down, `on_error = "refuse"`).
    pub fn refusing(&self) -> bool {
        self.inner.config.on_error == OnClusterError::Refuse && !self.is_up()
    }

    /// Asks Redis whether it answers (`PING`), noting the state: for health checks and
    /// for noticing that Redis is back while no paced request asks.
    /// A Redis Cluster answers when every node holding slots (each primary) does.
    pub async fn ping(&self) -> bool {
        let mut conn = self.connection();
        let answered = tokio::time::timeout(
            self.inner.config.command_timeout,
            redis::cmd("PING").query_async::<redis::Value>(&mut conn),
        )
        .await;
        match answered {
            Ok(Ok(_)) => {
                self.note(true, None);
                true
            }
            Ok(Err(e)) => {
                self.failed(&e);
                false
            }
            Err(_) => {
                self.note(false, Some("PING timed out"));
                false
            }
        }
    }

    /// Notes the outcome of a command: a warning line when the state changes.
    pub(crate) fn note(&self, ok: bool, why: Option<&str>) {
        let was = self.inner.up.swap(ok, Ordering::Relaxed);
        if was == ok {
            return;
        }
        if ok {
            tracing::warn!("cluster: Redis is reachable again; pacing is shared with the fleet");
        } else {
            tracing::warn!(
                reason = why.unwrap_or("unknown"),
                on_error = ?self.inner.config.on_error,
                "cluster: Redis cannot be reached; this replica goes on alone"
            );
        }
        if let Some(o) = self.inner.observer.get() {
            o.cluster_up(ok);
        }
    }

    /// Notes a command that failed with `e` (the cluster down), saying why (see
    /// [`explain`]).
    pub(crate) fn failed(&self, e: &redis::RedisError) {
        self.note(false, Some(&explain(self.inner.config.ca_pem.is_some(), e)));
    }

    /// Checks Redis every `every` while it is down, so that it is noticed when it comes
    /// back: while it is known down, the stores do not ask it (each request would wait up
    /// to the command timeout), so this is what brings the fleet back together. Runs until
    /// the returned task is aborted.
    pub fn watch(&self, every: Duration) -> tokio::task::JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(every).await;
                if !this.is_up() {
                    this.ping().await;
                }
            }
        })
    }

    pub(crate) fn connection(&self) -> Connection {
        self.inner.connection.clone()
    }

    pub(crate) fn key(&self, origin: &crate::origin::Origin, agent: &str) -> String {
        format!("{}{{{origin}}}:pace:{agent}", self.inner.config.key_prefix)
    }
}

/// A connection to one server (reconnecting by itself) or to a Redis Cluster (routing
/// each command to its key's node); both lazy, cheap to clone.
#[derive(Clone)]
pub(crate) enum Connection {
    Server(redis::aio::ConnectionManager),
    Cluster(redis::cluster_async::ClusterConnection),
}

impl redis::aio::ConnectionLike for Connection {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a redis::Cmd) -> redis::RedisFuture<'a, redis::Value> {
        match self {
            Connection::Server(c) => c.req_packed_command(cmd),
            Connection::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a redis::Pipeline,
        offset: usize,
        count: usize,
    ) -> redis::RedisFuture<'a, Vec<redis::Value>> {
        match self {
            Connection::Server(c) => c.req_packed_commands(pipeline, offset, count),
            Connection::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Connection::Server(c) => c.get_db(),
            Connection::Cluster(c) => c.get_db(),
        }
    }
}

/// A Lua script of the stores, run by its SHA-1 (`EVALSHA`) and, when the node does not
/// know it yet, by its text (`EVAL`, which also keeps it there): both go to the node of
/// the script's keys. (`SCRIPT LOAD`, which the redis crate's `Script` sends on a miss,
/// goes to every node of a Redis Cluster and fails while one of them is down.) Every
/// script's keys are one origin's: one hash tag, one slot.
pub(crate) struct Lua {
    code: &'static str,
    sha: String,
}

impl Lua {
    pub(crate) fn new(code: &'static str) -> Lua {
        Lua { code, sha: redis::Script::new(code).get_hash().to_owned() }
    }

    /// A call of this script on `key` (more with [`LuaCall::key`]).
    pub(crate) fn key(&self, key: &str) -> LuaCall<'_> {
        LuaCall { lua: self, keys: vec![key.to_owned()], args: Vec::new() }
    }
}

/// One call of a [`Lua`] script: its keys and arguments.
pub(crate) struct LuaCall<'a> {
    lua: &'a Lua,
    keys: Vec<String>,
    args: Vec<Vec<u8>>,
}

impl LuaCall<'_> {
    pub(crate) fn key(&mut self, key: &str) -> &mut Self {
        self.keys.push(key.to_owned());
        self
    }

    pub(crate) fn arg(&mut self, arg: impl redis::ToRedisArgs) -> &mut Self {
        self.args.extend(arg.to_redis_args());
        self
    }

    /// Runs it on `conn` (not bounded here: the callers bound it by the command timeout).
    pub(crate) async fn invoke(&self, conn: &mut Connection) -> redis::RedisResult<redis::Value> {
        let command = |name: &str, script: &[u8]| {
            let mut c = redis::cmd(name);
            c.arg(script).arg(self.keys.len()).arg(&self.keys).arg(&self.args);
            c
        };
        match command("EVALSHA", self.lua.sha.as_bytes()).query_async(conn).await {
            Err(e) if e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::NoScript) => {
                command("EVAL", self.lua.code.as_bytes()).query_async(conn).await
            }
            answer => answer,
        }
    }
}

/// The Redis Cluster client of `config` (its seed nodes, and their CA for `rediss://`);
/// no I/O. The seeds are checked here: at least one, no Unix socket, database 0, and a
/// key prefix that leaves the origin's braces the hash tag.
fn cluster_client(config: &ClusterConfig) -> Result<redis::cluster::ClusterClient, ClusterError> {
    use redis::IntoConnectionInfo;
    let Redis::Cluster(nodes) = &config.redis else {
        return Err(ClusterError::Nodes("not a Redis Cluster".into()));
    };
    if nodes.is_empty() {
        return Err(ClusterError::Nodes("no seed node (give one or more redis://host:port)".into()));
    }
    if config.key_prefix.contains(['{', '}']) {
        return Err(ClusterError::KeyPrefix(format!(
            "{:?} holds a brace: with a Redis Cluster the origin in braces is each key's hash tag \
             (one origin's keys in one slot), and a brace in the prefix would change it",
            config.key_prefix
        )));
    }
    let mut infos = Vec::with_capacity(nodes.len());
    for node in nodes {
        let info = node
            .as_str()
            .into_connection_info()
            .map_err(|e| ClusterError::Nodes(format!("{node:?}: {e}")))?;
        if matches!(info.addr(), redis::ConnectionAddr::Unix(_)) {
            return Err(ClusterError::Nodes(format!(
                "{node:?}: a Redis Cluster is reached over TCP (its nodes announce host and port), not a Unix socket"
            )));
        }
        if info.redis_settings().db() != 0 {
            return Err(ClusterError::Nodes(format!(
                "{node:?}: database {}, but a Redis Cluster has database 0 only",
                info.redis_settings().db()
            )));
        }
        infos.push(info);
    }
    let tls =
        infos.iter().map(|i| matches!(i.addr(), redis::ConnectionAddr::TcpTls { .. })).collect::<Vec<_>>();
    if tls.iter().any(|t| *t != tls[0]) {
        return Err(ClusterError::Nodes(
            "mixes redis:// and rediss:// seed nodes: all are one or the other".into(),
        ));
    }
    let mut builder = redis::cluster::ClusterClientBuilder::new(infos)
        .tcp_settings(no_nagle())
        .connection_timeout(config.connect_timeout)
        .response_timeout(config.command_timeout)
        .retries(2)
        .max_retry_wait(1000);
    if let Some(pem) = &config.ca_pem {
        if !tls[0] {
            return Err(ClusterError::Ca("is for TLS, but the seed nodes are not rediss:// URLs".into()));
        }
        builder = builder.certs(redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) });
    }
    builder.build().map_err(|e| match e.kind() {
        redis::ErrorKind::InvalidClientConfig => ClusterError::Nodes(e.to_string()),
        _ if config.ca_pem.is_some() => ClusterError::Ca(e.to_string()),
        _ => ClusterError::Nodes(e.to_string()),
    })
}

/// The Redis client of `config` (its URL, and its CA for `rediss://`); no I/O.
fn client(config: &ClusterConfig) -> Result<redis::Client, ClusterError> {
    let Redis::Server(url) = &config.redis else {
        return Err(ClusterError::Url("a Redis Cluster, not one server".into()));
    };
    client_for(url, config.ca_pem.as_ref())
}

/// A client of the server at `url` (with the CA `ca_pem` for `rediss://`); no I/O.
fn client_for(url: &str, ca_pem: Option<&Vec<u8>>) -> Result<redis::Client, ClusterError> {
    use redis::IntoConnectionInfo;
    let info = url.into_connection_info().map_err(|e| ClusterError::Url(e.to_string()))?;
    let info = info.set_tcp_settings(no_nagle());
    match ca_pem {
        Some(pem) => {
            let certs = redis::TlsCertificates { client_tls: None, root_cert: Some(pem.clone()) };
            redis::Client::build_with_tls(info, certs).map_err(|e| ClusterError::Ca(e.to_string()))
        }
        None => redis::Client::open(info).map_err(|e| ClusterError::Url(e.to_string())),
    }
}

/// The connections to Redis send each command at once (`TCP_NODELAY`, as Redis' own end
/// does): with Nagle's algorithm, a command written while the one before is unanswered
/// waits for that answer's acknowledgement, on the requests' path (pacing, replays).
fn no_nagle() -> redis::io::tcp::TcpSettings {
    redis::io::tcp::TcpSettings::default().set_nodelay(true)
}

/// What is added to a certificate error of a Redis with `cluster.ca_file` (the webpki
/// roots are then not used).
const CA_FILE_ONLY: &str = "cluster.ca_file is set, so Redis' certificate is verified against its \
     certificates only, not the webpki roots: for a Redis whose certificate a public CA issued, leave \
     ca_file out or add that CA to it";

/// The text of a Redis error: its own, and when it is a certificate that did not verify
/// while `with_ca_file`, that `cluster.ca_file` replaced the webpki roots.
fn explain(with_ca_file: bool, e: &redis::RedisError) -> String {
    if with_ca_file && certificate_failed(e) { format!("{e} ({CA_FILE_ONLY})") } else { e.to_string() }
}

/// Whether `e` is a server certificate that did not verify (rustls' `InvalidCertificate`,
/// found down the error's causes, or by its text where the redis crate wrapped it).
fn certificate_failed(e: &redis::RedisError) -> bool {
    use std::error::Error;
    type Boxed = Arc<dyn Error + Send + Sync>;
    let is_invalid = |e: &(dyn Error + 'static)| {
        let rustls = e
            .downcast_ref::<rustls::Error>()
            .or_else(|| e.downcast_ref::<std::io::Error>()?.get_ref()?.downcast_ref::<rustls::Error>())
            .or_else(|| {
                let inner: &(dyn Error + 'static) = &**e.downcast_ref::<Boxed>()?;
                inner.downcast_ref::<rustls::Error>().or_else(|| {
                    inner.downcast_ref::<std::io::Error>()?.get_ref()?.downcast_ref::<rustls::Error>()
                })
            });
        matches!(rustls, Some(rustls::Error::InvalidCertificate(_)))
    };
    let mut cause: Option<&(dyn Error + 'static)> = e.source();
    let mut depth = 0;
    while let Some(c) = cause
        && depth < 8
    {
        if is_invalid(c) {
            return true;
        }
        cause = c.source();
        depth += 1;
    }
    e.to_string().contains("invalid peer certificate")
}

/// The key of the robots.txt body with this SHA-256 (hex).
pub fn snapshot_key(key_prefix: &str, sha256_hex: &str) -> String {
    format!("{key_prefix}snapshot:{sha256_hex}")
}

/// Why a snapshot could not be read from Redis.
#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    /// The configuration does not make a Redis client.
    #[error(transparent)]
    Config(#[from] ClusterError),
    /// Redis did not answer, or refused.
    #[error("Redis: {0}")]
    Redis(#[from] redis::RedisError),
    /// Redis' certificate did not verify against `cluster.ca_file`, which replaces the
    /// webpki roots (a Redis whose certificate a public CA issued fails this way).
    #[error("Redis: {0} ({CA_FILE_ONLY})")]
    CertificateNotInCaFile(redis::RedisError),
}

/// Reads the robots.txt body kept under `sha256_hex` in the fleet's Redis (blocking: for
/// the command line, e.g. `robotsgate audit explain`); `None` when Redis has none. The
/// caller checks that its hash is the one asked for (another program may write the key).
/// With a Redis Cluster, the key's node is asked (each step within the timeouts).
pub fn read_snapshot(config: &ClusterConfig, sha256_hex: &str) -> Result<Option<Vec<u8>>, SnapshotError> {
    let key = snapshot_key(&config.key_prefix, sha256_hex);
    if let Redis::Cluster(_) = config.redis {
        let timeouts = redis::cluster::ClusterConfig::new()
            .set_connection_timeout(config.connect_timeout)
            .set_response_timeout(config.command_timeout);
        let connected = cluster_client(config)?.get_connection_with_config(timeouts);
        let mut conn = match connected {
            Err(e) if config.ca_pem.is_some() && certificate_failed(&e) => {
                return Err(SnapshotError::CertificateNotInCaFile(e));
            }
            c => c?,
        };
        return Ok(redis::cmd("GET").arg(&key).query::<Option<Vec<u8>>>(&mut conn)?);
    }
    let connected = client(config)?.get_connection_with_timeout(config.connect_timeout);
    let mut conn = match connected {
        Err(e) if config.ca_pem.is_some() && certificate_failed(&e) => {
            return Err(SnapshotError::CertificateNotInCaFile(e));
        }
        c => c?,
    };
    conn.set_read_timeout(Some(config.command_timeout))?;
    conn.set_write_timeout(Some(config.command_timeout))?;
    Ok(redis::cmd("GET").arg(&key).query::<Option<Vec<u8>>>(&mut conn)?)
}

/// Milliseconds, for script arguments (saturating).
fn millis(d: Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX)
}

/// An integer of a script's answer (a number, or a string holding one).
fn int(v: &redis::Value) -> Option<i64> {
    match v {
        redis::Value::Int(i) => Some(*i),
        redis::Value::BulkString(b) => std::str::from_utf8(b).ok()?.parse().ok(),
        redis::Value::SimpleString(s) => s.parse().ok(),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tls_error(e: rustls::Error) -> redis::RedisError {
        redis::RedisError::from(std::io::Error::new(std::io::ErrorKind::InvalidData, e))
    }

    #[tokio::test]
    async fn a_redis_cluster_needs_usable_seed_nodes_and_a_prefix_that_keeps_the_hash_tag() {
        let config = |nodes: &[&str]| ClusterConfig {
            redis: Redis::Cluster(nodes.iter().map(|n| (*n).to_owned()).collect()),
            ..ClusterConfig::default()
        };
        // No I/O: made whether the nodes are up or not.
        let ok = Cluster::new(config(&["redis://127.0.0.1:1", "redis://127.0.0.1:2/0"])).unwrap();
        assert!(ok.is_up());
        let err = |c: ClusterConfig| Cluster::new(c).unwrap_err().to_string();
        for (nodes, why) in [
            (&[][..], "no seed node"),
            (&["redis+unix:///run/redis.sock"][..], "not a Unix socket"),
            (&["redis://127.0.0.1:7000/2"][..], "database 0 only"),
            (&["redis://127.0.0.1:7000", "rediss://127.0.0.1:7001"][..], "mixes"),
            (&["redis://:a@127.0.0.1:7000", "redis://:b@127.0.0.1:7001"][..], "password"),
            (&["http://127.0.0.1:7000"][..], "redis_cluster"),
        ] {
            let e = err(config(nodes));
            assert!(e.starts_with("cluster.redis_cluster: ") && e.contains(why), "{nodes:?}: {e}");
        }
        let braces = ClusterConfig { key_prefix: "{fleet}:".into(), ..config(&["redis://127.0.0.1:7000"]) };
        assert!(err(braces).starts_with("cluster.key_prefix: "));
        let ca = ClusterConfig { ca_pem: Some(b"-".to_vec()), ..config(&["redis://127.0.0.1:7000"]) };
        assert!(err(ca).starts_with("cluster.ca_file: "));
    }

    #[test]
    fn a_certificate_error_under_ca_file_says_the_webpki_roots_are_not_used() {
        use rustls::CertificateError::{BadSignature, UnknownIssuer};
        for cert in [UnknownIssuer, BadSignature] {
            let e = tls_error(rustls::Error::InvalidCertificate(cert));
            assert!(certificate_failed(&e), "{e}");
            let text = explain(true, &e);
            assert!(text.starts_with(&e.to_string()), "{text}");
            assert!(text.contains("cluster.ca_file") && text.contains("not the webpki roots"), "{text}");
            assert_eq!(explain(false, &e), e.to_string(), "without ca_file the webpki roots were used");
        }
        // Other failures are said as they are.
        let e = tls_error(rustls::Error::HandshakeNotComplete);
        assert!(!certificate_failed(&e));
        assert_eq!(explain(true, &e), e.to_string());
        let refused = redis::RedisError::from(std::io::Error::from(std::io::ErrorKind::ConnectionRefused));
        assert_eq!(explain(true, &refused), refused.to_string());
    }
}
