//! [`Robots`]: robots.txt enforcement for a client of your own, and its builder.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use http::HeaderValue;
use ipnet::IpNet;
use rustls::pki_types::CertificateDer;

use crate::audit::AuditLog;
use crate::fetch::{FetchConfig, FetchService, Fetcher};
use crate::identity::httpsig::{RequestSigner, SignError, Signers, SigningKey};
use crate::layer::{
    DecisionObserver, Mode, PurposeSettings, RobotsLayer, SelectToken, TokenError, Transport,
};
use crate::net::{
    Connector, DnsConfig, Guard, Pool, PoolConfig, Proxies, ProxyError, Resolver, TlsConfig, TlsSetupError,
    client_config,
};
use crate::origin::HostPattern;
use crate::pacing::{HostRule, PaceObserver, Pacer, PacingConfig, SharedPaceStore};
use crate::policy::{CopyShare, FetchObserver, PolicyConfig, Purpose, RobotsPolicy};
use crate::rep::{Profile, is_valid_product_token};

/// robots.txt enforcement for an embedding client: build one with [`Robots::builder`],
/// then take [`Robots::layer`] for any tower `Service<http::Request<B>>` (a hyper-util
/// `Client`, say) or, with the feature `reqwest`, `Robots::reqwest_middleware`.
///
/// One `Robots` holds one robots.txt cache, one connector (DNS, destination guard, TLS,
/// forward proxies: by default those of the `HTTPS_PROXY`-style environment variables)
/// for the robots.txt fetches, or your own client for them
/// ([`RobotsBuilder::fetch_service`]), and the optional audit log; it is cheap to clone and clones
/// share them, so a layer and a reqwest middleware made from one value share one cache.
///
/// ```
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
/// use bytes::Bytes;
/// use http_body_util::Empty;
/// use hyper_util::client::legacy::Client;
/// use hyper_util::rt::TokioExecutor;
/// use robotsgate::{Refusal, RefusalKind, Robots};
/// use tower::{Service, ServiceBuilder, ServiceExt};
///
/// let robots = Robots::builder()
///     .agent("ExampleBot")
///     .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
///     .build()?;
/// let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
/// let mut http = ServiceBuilder::new().layer(robots.layer()).service(client);
///
/// // The destination guard refuses loopback (before any robots.txt is fetched); a path
/// // robots.txt disallows gets the same kind of answer, naming the rule and line.
/// let req = http::Request::get("http://127.0.0.1/private/x").body(Empty::new())?;
/// let res = http.ready().await?.call(req).await?;
/// let refusal = Refusal::from_response(&res).expect("robotsgate's own answer");
/// assert_eq!(refusal.kind(), RefusalKind::DestinationDenied);
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Robots {
    layer: RobotsLayer,
    policy: RobotsPolicy,
    pacer: Pacer,
    connector: Connector,
    pool: Pool,
    agent: Arc<str>,
    user_agent: HeaderValue,
}

impl fmt::Debug for Robots {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Robots")
            .field("agent", &self.agent)
            .field("user_agent", &self.user_agent)
            .field("layer", &self.layer)
            .finish_non_exhaustive()
    }
}

impl Robots {
    /// A builder with working defaults for everything but the product token.
    pub fn builder() -> RobotsBuilder {
        RobotsBuilder::default()
    }

    /// The tower layer: every request through it is checked (see
    /// [`layer`](crate::layer) for what the service returns).
    pub fn layer(&self) -> RobotsLayer {
        self.layer.clone()
    }

    /// The policy (the robots.txt cache and decisions), e.g. to decide a URL without a
    /// request or to read cache statistics.
    pub fn policy(&self) -> &RobotsPolicy {
        &self.policy
    }

    /// The pacer: the state of each origin's slots and back-off, shared by every request
    /// through this value's layer and middleware.
    pub fn pacer(&self) -> &Pacer {
        &self.pacer
    }

    /// The connector the robots.txt fetches use (DNS, destination guard, TLS, proxies); a
    /// hyper-util client built on it is held to the same guard. Unused for robots.txt when
    /// they go through your client ([`RobotsBuilder::fetch_service`]).
    pub fn connector(&self) -> &Connector {
        &self.connector
    }

    /// The connection pool the robots.txt fetches go through (bounded by
    /// [`RobotsBuilder::pool`]): send the requests that follow through it too, and the
    /// connection a fetch opened serves the request it was made for.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// The product token requests are checked for.
    pub fn agent(&self) -> &str {
        &self.agent
    }

    /// The `User-Agent` sent with robots.txt fetches and set on requests that have none.
    pub fn user_agent(&self) -> &HeaderValue {
        &self.user_agent
    }
}

/// Why [`RobotsBuilder::build`] refused the settings.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BuildError {
    /// No product token was given.
    #[error("no product token: call .agent(\"YourBot\") with the token sites name in robots.txt")]
    MissingAgent,
    /// The product token is not one RFC 9309 allows.
    #[error(
        "invalid product token {0:?}: RFC 9309 tokens are one or more of the letters a-z, A-Z, '-' and '_' \
         (no version, no spaces: \"ExampleBot\", not \"ExampleBot/1.0\"); it would match no group in any robots.txt"
    )]
    InvalidAgent(String),
    /// The `User-Agent` cannot be sent as a header value.
    #[error("invalid User-Agent {0:?}: it must be visible ASCII and spaces")]
    InvalidUserAgent(String),
    /// The `User-Agent` does not contain the product token.
    #[error(
        "the User-Agent {user_agent:?} does not contain the product token {agent:?}: RFC 9309 asks crawlers to \
         send their token in the User-Agent, so sites can tell which robots.txt group applies; \
         use e.g. \"{agent}/1.0 (+https://example.com/bot)\""
    )]
    UserAgentWithoutToken {
        /// The token.
        agent: String,
        /// The `User-Agent` given.
        user_agent: String,
    },
    /// A fetch service was given together with settings only robotsgate's own
    /// connections use.
    #[error(
        "robots.txt is fetched through your client (fetch_service), so {0} would not be used: \
         set it on your client instead"
    )]
    FetchServiceConflict(&'static str),
    /// A connector was given together with settings only the built-in connector uses.
    #[error(
        "a custom connector was given together with {0}, which only the built-in connector uses: \
         set it on your connector instead"
    )]
    ConnectorConflict(&'static str),
    /// The TLS settings cannot be used.
    #[error(transparent)]
    Tls(#[from] TlsSetupError),
    /// The proxy settings (or the proxy environment variables, read by default) cannot
    /// be used.
    #[error("proxy settings: {0}")]
    Proxy(#[from] ProxyError),
    /// The reqwest client could not be built (feature `reqwest`:
    /// `RobotsBuilder::build_reqwest_client`).
    #[cfg(feature = "reqwest")]
    #[error("cannot build the reqwest client: {0}")]
    Reqwest(#[source] reqwest::Error),
    /// The request signing settings cannot be used (the `Signature-Agent` is not an
    /// `https` URL).
    #[error("request signing: {0}")]
    Signing(#[from] SignError),
}

/// Settings for a [`Robots`]. Every setting but [`agent`](RobotsBuilder::agent) has a
/// working default: the conservative profile, enforcement, the destination guard refusing
/// loopback, private and other special-purpose addresses, the system's DNS, the webpki
/// roots, a 5 s connect timeout, the fetch timeouts and cache bounds of
/// [`FetchConfig::default`] and [`PolicyConfig::default`], pacing by robots.txt as in
/// [`PacingConfig::default`] (each origin's `crawl-delay` or `request-rate` kept, capped
/// at 30 s; a request held at most 60 s; back-off after 429 and 503), no audit log.
#[derive(Default)]
#[must_use]
pub struct RobotsBuilder {
    agent: Option<String>,
    user_agent: Option<String>,
    mode: Mode,
    policy: PolicyConfig,
    fetch: FetchConfig,
    guard: Guard,
    guard_set: bool,
    dns: DnsConfig,
    dns_set: bool,
    resolver: Option<Resolver>,
    tls: TlsConfig,
    tls_set: bool,
    connect_timeout: Option<Duration>,
    connector: Option<Connector>,
    proxies: Option<Proxies>,
    fetch_service: Option<FetchService>,
    audit: Option<AuditLog>,
    observer: Option<Arc<dyn DecisionObserver>>,
    selector: Option<Arc<dyn SelectToken>>,
    pacing: PacingConfig,
    pace_observer: Option<Arc<dyn PaceObserver>>,
    pace_store: Option<Arc<dyn SharedPaceStore>>,
    copy_share: Option<Arc<dyn CopyShare>>,
    #[cfg(feature = "cluster")]
    cluster: Option<crate::cluster::Cluster>,
    fetch_observers: Vec<Arc<dyn FetchObserver>>,
    pool: PoolConfig,
    purpose: PurposeSettings,
    answer_outages: bool,
    transport: Option<Transport>,
    leave_user_agent: bool,
    no_decision_in_response: bool,
    signing: Option<(Arc<SigningKey>, String)>,
    /// Per proxy user (`true`) or product token (`false`): name, key, Signature-Agent.
    signing_for: Vec<(bool, String, Arc<SigningKey>, String)>,
    signature_validity: Option<Duration>,
}

impl fmt::Debug for RobotsBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsBuilder")
            .field("agent", &self.agent)
            .field("user_agent", &self.user_agent)
            .field("mode", &self.mode)
            .field("profile", &self.policy.profile)
            .finish_non_exhaustive()
    }
}

impl RobotsBuilder {
    /// The crawler's product token, as sites name it in `User-agent:` lines (letters, `-`
    /// and `_`; e.g. `ExampleBot`). Required.
    pub fn agent(mut self, token: impl Into<String>) -> Self {
        self.agent = Some(token.into());
        self
    }

    /// The crawler's `User-Agent`: sent with robots.txt fetches and set on checked
    /// requests that have none (a request's own is kept). It must contain the product
    /// token. Default: `<agent> (robotsgate/<version>)`.
    pub fn user_agent(mut self, user_agent: impl Into<String>) -> Self {
        self.user_agent = Some(user_agent.into());
        self
    }

    /// How robots.txt files are read (default: [`Profile::Conservative`], allowed only
    /// when both Google's reading and a strict RFC 9309 reading allow).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.policy.profile = profile;
        self
    }

    /// Enforce (default), report only (decide and log, never block), or off.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.mode = mode;
        self
    }

    /// Lets the destination guard pass addresses in `net` (by default loopback, private
    /// and other special-purpose ranges are refused, for robots.txt fetches and, through
    /// the layer, for requests).
    pub fn allow_destination(mut self, net: IpNet) -> Self {
        self.guard = self.guard.allow(net);
        self.guard_set = true;
        self
    }

    /// Lets the destination guard pass every address of hosts matching `pattern` (e.g.
    /// `*.intranet.example`).
    pub fn allow_destination_host(mut self, pattern: HostPattern) -> Self {
        self.guard = self.guard.allow_host(pattern);
        self.guard_set = true;
        self
    }

    /// Name servers to ask instead of the system configuration: addresses (port 53) or
    /// socket addresses (e.g. a local resolver on `127.0.0.1:5353`).
    pub fn dns_servers<S: Into<crate::net::NameServer>>(
        mut self,
        servers: impl IntoIterator<Item = S>,
    ) -> Self {
        self.dns.servers = servers.into_iter().map(Into::into).collect();
        self.dns_set = true;
        self
    }

    /// A fixed answer for `host`, consulted before DNS (as curl's `--resolve`).
    pub fn resolve(mut self, host: &str, addrs: impl IntoIterator<Item = std::net::IpAddr>) -> Self {
        self.dns
            .overrides
            .insert(host.trim_end_matches('.').to_ascii_lowercase(), addrs.into_iter().collect());
        self.dns_set = true;
        self
    }

    /// A resolver of your own (its answers are still checked by the guard).
    pub fn resolver(mut self, resolver: Resolver) -> Self {
        self.resolver = Some(resolver);
        self
    }

    /// Also trusts this root certificate for robots.txt fetches over https.
    pub fn extra_root(mut self, cert: CertificateDer<'static>) -> Self {
        self.tls.extra_roots.push(cert);
        self.tls_set = true;
        self
    }

    /// Whether to trust the Mozilla roots of `webpki-roots` (default: yes).
    pub fn webpki_roots(mut self, trust: bool) -> Self {
        self.tls.webpki_roots = trust;
        self.tls_set = true;
        self
    }

    /// Bounds DNS, TCP and the TLS handshake of a robots.txt fetch together (default 5 s).
    pub fn connect_timeout(mut self, timeout: Duration) -> Self {
        self.connect_timeout = Some(timeout);
        self
    }

    /// The forward proxies robots.txt fetches (and requests sent through
    /// [`Robots::pool`]) go through. By default they are read from the standard
    /// environment variables when [`build`](RobotsBuilder::build) runs, as curl and
    /// reqwest do (`HTTP_PROXY`, `HTTPS_PROXY`, `ALL_PROXY`, `NO_PROXY` and their
    /// lower-case forms; see [`Proxies`] for which applies when, and what
    /// the destination guard checks through a proxy); an invalid value is a
    /// [`BuildError::Proxy`]. `Proxies::none()` connects directly whatever the
    /// environment says (the `robotsgate` proxy server does so).
    ///
    /// ```
    /// use robotsgate::net::Proxies;
    ///
    /// let proxies = Proxies::none().all("http://proxy.corp:3128")?.no_proxy("intranet.corp")?;
    /// let robots = robotsgate::Robots::builder().agent("ExampleBot").proxies(proxies).build()?;
    /// assert!(!robots.connector().proxies().is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn proxies(mut self, proxies: Proxies) -> Self {
        self.proxies = Some(proxies);
        self
    }

    /// Fetches robots.txt files through `service`, your own HTTP client, instead of
    /// robotsgate's connections: a hyper-util `Client`, a tower stack around one, or any
    /// `tower::Service<http::Request<B>>` (with `B: Default`, e.g. `Empty<Bytes>`,
    /// `Full<Bytes>`) answering `http::Response`s with any body. Then the client's DNS
    /// (e.g. names it resolves to fixed addresses), proxies and TLS roots serve the
    /// robots.txt fetches as they serve your requests, and robotsgate makes no
    /// connection or DNS lookup of its own: the destination guard does not apply (your
    /// client decides where connections go; requests are not refused with
    /// `destination-denied`), so the guard, DNS, TLS, connect timeout, connector and
    /// proxy settings of this builder are errors when given too
    /// ([`BuildError::FetchServiceConflict`]), and the proxy environment variables are
    /// not read (configure your client's proxies).
    ///
    /// Everything else holds as with robotsgate's own connections, on the same code path
    /// (see [`Fetcher::with_service`]): the status classes (4xx: allow all; 5xx, 429 or
    /// no answer: disallow all), redirects followed by robotsgate up to
    /// [`fetch_max_redirects`](RobotsBuilder::fetch_max_redirects) hops (the service
    /// must not follow redirects itself), at most 500 KiB of the decoded body read, the
    /// header, body and total timeouts, and the audit log's evidence (SHA-256 of the body,
    /// final URL, status). With the feature `reqwest`,
    /// `RobotsBuilder::fetch_with_reqwest` takes a `reqwest::Client`.
    ///
    /// ```
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// # use hyper_util::server::conn::auto;
    /// # let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    /// # let port = listener.local_addr()?.port();
    /// # tokio::spawn(async move {
    /// #     while let Ok((tcp, _)) = listener.accept().await {
    /// #         let service = hyper::service::service_fn(|_req| async {
    /// #             Ok::<_, std::convert::Infallible>(http::Response::new(http_body_util::Full::new(
    /// #                 bytes::Bytes::from_static(b"User-agent: *\nDisallow: /private\n"),
    /// #             )))
    /// #         });
    /// #         let io = hyper_util::rt::TokioIo::new(tcp);
    /// #         tokio::spawn(auto::Builder::new(hyper_util::rt::TokioExecutor::new()).serve_connection(io, service).into_owned());
    /// #     }
    /// # });
    /// use std::net::SocketAddr;
    /// use bytes::Bytes;
    /// use http_body_util::Empty;
    /// use hyper_util::client::legacy::Client;
    /// use hyper_util::client::legacy::connect::HttpConnector;
    /// use hyper_util::client::legacy::connect::dns::Name;
    /// use hyper_util::rt::TokioExecutor;
    /// use robotsgate::origin::Origin;
    /// use tower::service_fn;
    ///
    /// // Your client: here one that resolves every name to a server on this machine.
    /// let resolve = service_fn(move |_: Name| async move {
    ///     Ok::<_, std::io::Error>(vec![SocketAddr::from(([127, 0, 0, 1], port))].into_iter())
    /// });
    /// let client = Client::builder(TokioExecutor::new())
    ///     .build::<_, Empty<Bytes>>(HttpConnector::new_with_resolver(resolve));
    ///
    /// let robots = robotsgate::Robots::builder()
    ///     .agent("ExampleBot")
    ///     .fetch_service(client.clone())
    ///     .build()?;
    /// // robots.txt of robots.example comes through `client` (robotsgate's own DNS does
    /// // not know the name); put `robots.layer()` around the same client for requests.
    /// let origin = Origin::parse(&format!("http://robots.example:{port}/"))?;
    /// let decision = robots.policy().decide(&origin, "/private/x", "ExampleBot".into()).await;
    /// assert!(!decision.allowed);
    /// assert!(robots.policy().decide(&origin, "/public", "ExampleBot".into()).await.allowed);
    /// # Ok(())
    /// # }
    /// ```
    pub fn fetch_service<S, ReqB, ResB>(mut self, service: S) -> Self
    where
        S: tower::Service<http::Request<ReqB>, Response = http::Response<ResB>> + Clone + Send + 'static,
        S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
        S::Future: Send + 'static,
        ReqB: Default + Send + 'static,
        ResB: hyper::body::Body + Send + 'static,
        ResB::Data: Send,
        ResB::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    {
        self.fetch_service = Some(FetchService::new(service));
        self
    }

    /// A connector of your own for the robots.txt fetches (and the destination checks);
    /// the guard, DNS, TLS and proxy settings of this builder then do not apply (nor do
    /// the proxy environment variables), and setting them too is an error.
    pub fn connector(mut self, connector: Connector) -> Self {
        self.connector = Some(connector);
        self
    }

    /// From sending the robots.txt request to its response headers (default 10 s).
    pub fn fetch_header_timeout(mut self, timeout: Duration) -> Self {
        self.fetch.header_timeout = timeout;
        self
    }

    /// For reading a robots.txt body (default 20 s).
    pub fn fetch_body_timeout(mut self, timeout: Duration) -> Self {
        self.fetch.body_timeout = timeout;
        self
    }

    /// Redirects followed when fetching robots.txt (default 5, the RFC 9309 minimum).
    pub fn fetch_max_redirects(mut self, hops: u8) -> Self {
        self.fetch.max_redirects = hops;
        self
    }

    /// Most origins whose robots.txt is cached (default 8,192).
    pub fn cache_max_origins(mut self, n: u64) -> Self {
        self.policy.max_entries = n;
        self
    }

    /// Most bytes the robots.txt cache may take: the parsed files and about 2 KiB per
    /// origin besides (default 32 MiB).
    pub fn cache_max_bytes(mut self, n: u64) -> Self {
        self.policy.max_bytes = n;
        self
    }

    /// How long an origin stays cached while nothing asks about it (default 1 h; zero: it
    /// stays until the bounds evict it): a crawl that moved on gives its memory back.
    /// Expired origins leave at the cache's next maintenance: when it is used, or
    /// [`RobotsPolicy::sync`](crate::policy::RobotsPolicy::sync) (the proxy runs it every
    /// few seconds).
    pub fn cache_max_idle(mut self, idle: Duration) -> Self {
        self.policy.max_idle = idle;
        self
    }

    /// How long a robots.txt copy is fresh when the site says nothing (default 24 h;
    /// `Cache-Control: max-age` is honoured within the policy's bounds).
    pub fn cache_ttl(mut self, ttl: Duration) -> Self {
        self.policy.default_ttl = ttl;
        self
    }

    /// Every setting of the policy at once (cache bounds, freshness, failure retries,
    /// host overrides); the profile set before is replaced by `config.profile`.
    pub fn policy_config(mut self, config: PolicyConfig) -> Self {
        self.policy = config;
        self
    }

    /// Pacing on (default) or off. Off, requests go as soon as they are decided, whatever
    /// `crawl-delay`, `request-rate` or 429/503 answers say.
    pub fn pacing(mut self, on: bool) -> Self {
        self.pacing.enabled = on;
        self
    }

    /// Requests to one origin (for one product token) start at least this far apart,
    /// whatever robots.txt says (default: none).
    pub fn min_delay(mut self, delay: Duration) -> Self {
        self.pacing.min_delay = delay;
        self
    }

    /// The longest delay kept between two requests to an origin (default 30 s): a longer
    /// `crawl-delay` is cut to it.
    pub fn max_delay(mut self, delay: Duration) -> Self {
        self.pacing.max_delay = delay;
        self
    }

    /// The longest a request is held for its origin's slot (default 60 s); one that would
    /// wait longer is refused at once with [`RefusalKind::Paced`](crate::RefusalKind::Paced)
    /// and a retry time.
    pub fn max_wait(mut self, wait: Duration) -> Self {
        self.pacing.max_wait = wait;
        self
    }

    /// Requests held per origin (and product token) at most (default 1,000).
    pub fn max_queue_per_origin(mut self, n: usize) -> Self {
        self.pacing.max_queue_per_origin = n;
        self
    }

    /// The longest pause after a 429 or 503 (default 1 h; also bounds `Retry-After`).
    pub fn max_backoff(mut self, pause: Duration) -> Self {
        self.pacing.max_backoff = pause;
        self
    }

    /// A delay or concurrency cap for some hosts (first matching rule wins).
    pub fn pace_host(mut self, rule: HostRule) -> Self {
        self.pacing.hosts.push(rule);
        self
    }

    /// Every pacing setting at once (replaces those set before).
    pub fn pacing_config(mut self, config: PacingConfig) -> Self {
        self.pacing = config;
        self
    }

    /// Tells `observer` what pacing does (waits, refusals, pauses).
    pub fn pace_observer(mut self, observer: Arc<dyn PaceObserver>) -> Self {
        self.pace_observer = Some(observer);
        self
    }

    /// Writes every decision and robots.txt fetch to this audit log.
    pub fn audit(mut self, audit: AuditLog) -> Self {
        self.audit = Some(audit);
        self
    }

    /// Chooses the product token per request (e.g. one client shared by several
    /// crawlers); [`agent`](RobotsBuilder::agent) stays the identity of the robots.txt
    /// fetches. A closure `Fn(&mut http::request::Parts) -> Result<Arc<str>, TokenError>`
    /// is a selector.
    pub fn select_token(mut self, selector: impl SelectToken) -> Self {
        self.selector = Some(Arc::new(selector));
        self
    }

    /// What every request is made for (AI-usage preferences, see [`crate::rep::usage`]):
    /// a path robots.txt allows is refused (`403 usage-refused`, or the reqwest
    /// middleware's `Err` with the [`Refusal`](crate::Refusal)) when the site's
    /// `Content-Usage`/`Content-Signal` preference for a category of it is "no"; the
    /// [`Decision`](crate::policy::Decision)'s `usage` says what the site stated. Default:
    /// none (no usage check).
    ///
    /// ```
    /// use robotsgate::policy::Purpose;
    /// use robotsgate::rep::usage::Category;
    ///
    /// let robots = robotsgate::Robots::builder()
    ///     .agent("ExampleBot")
    ///     .purpose(Purpose::of([Category::TrainAi]))
    ///     .build()?;
    /// # Ok::<(), robotsgate::BuildError>(())
    /// ```
    pub fn purpose(mut self, purpose: Purpose) -> Self {
        self.purpose.default = purpose;
        self
    }

    /// Every setting of the purpose at once: per-request selection (a header, proxy
    /// users), what an unknown preference means, and whether responses whose
    /// `Content-Usage`, `Content-Signal` or `X-Robots-Tag` header says no are refused.
    pub fn purpose_settings(mut self, settings: PurposeSettings) -> Self {
        self.purpose = settings;
        self
    }

    /// Signs every request that goes, and every redirect hop of the reqwest middleware,
    /// with Web Bot Auth (HTTP Message Signatures, see
    /// [`identity::httpsig`](crate::identity::httpsig)): `Signature-Agent` names
    /// `signature_agent` (the `https` origin, or URL, of the key directory you publish, see
    /// [`directory_response`](crate::identity::httpsig::directory_response)), and the
    /// `Signature-Input` and `Signature` made with `key` replace any the request had.
    /// Signatures are valid for [`signature_validity`](RobotsBuilder::signature_validity).
    ///
    /// ```
    /// use robotsgate::identity::httpsig::SigningKey;
    ///
    /// let robots = robotsgate::Robots::builder()
    ///     .agent("ExampleBot")
    ///     .sign_with(SigningKey::generate()?, "https://bot.example")
    ///     .build()?;
    /// assert!(robots.layer().signer().is_some());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sign_with(mut self, key: impl Into<Arc<SigningKey>>, signature_agent: impl Into<String>) -> Self {
        self.signing = Some((key.into(), signature_agent.into()));
        self
    }

    /// Signs the requests of the proxy user `user` (the proxy's
    /// [`ProxyUser`](crate::layer::ProxyUser)) with `key`, naming `signature_agent`,
    /// instead of the [`sign_with`](RobotsBuilder::sign_with) key: one proxy serving
    /// several crawlers, each signing as itself. The precedence is [`Signers::pick`]'s
    /// (user, then token, then the default). robots.txt fetches, shared by every user, are
    /// signed with the default key.
    ///
    /// ```
    /// use robotsgate::identity::httpsig::SigningKey;
    ///
    /// let robots = robotsgate::Robots::builder()
    ///     .agent("ExampleBot")
    ///     .sign_with(SigningKey::generate()?, "https://bots.example")
    ///     .sign_user_with("alice", SigningKey::generate()?, "https://alice.example")
    ///     .sign_token_with("NewsBot", SigningKey::generate()?, "https://news.example")
    ///     .build()?;
    /// let layer = robots.layer();
    /// let signers = layer.signers().unwrap();
    /// assert_eq!(signers.pick(Some("alice"), None).unwrap().agent(), r#"sig1="https://alice.example""#);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn sign_user_with(
        mut self,
        user: impl Into<String>,
        key: impl Into<Arc<SigningKey>>,
        signature_agent: impl Into<String>,
    ) -> Self {
        self.signing_for.push((true, user.into(), key.into(), signature_agent.into()));
        self
    }

    /// Signs the requests made as product token `token` (whose proxy user has no key of
    /// its own, see [`sign_user_with`](RobotsBuilder::sign_user_with)) with `key`, naming
    /// `signature_agent`.
    pub fn sign_token_with(
        mut self,
        token: impl Into<String>,
        key: impl Into<Arc<SigningKey>>,
        signature_agent: impl Into<String>,
    ) -> Self {
        self.signing_for.push((false, token.into(), key.into(), signature_agent.into()));
        self
    }

    /// How long a request's signature is valid (`expires - created`; default 60 s).
    pub fn signature_validity(mut self, validity: Duration) -> Self {
        self.signature_validity = Some(validity);
        self
    }

    /// Tells `observer` about every decision (e.g. to count them).
    pub fn observer(mut self, observer: Arc<dyn DecisionObserver>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// The destination guard as a whole (instead of
    /// [`allow_destination`](RobotsBuilder::allow_destination) one by one). A
    /// [`Guard`] is shared by its clones: keep one to change its rules while running
    /// ([`Guard::replace_rules`]).
    pub fn guard(mut self, guard: Guard) -> Self {
        self.guard = guard;
        self.guard_set = true;
        self
    }

    /// The DNS settings as a whole: name servers and fixed answers.
    pub fn dns(mut self, dns: DnsConfig) -> Self {
        self.dns = dns;
        self.dns_set = true;
        self
    }

    /// The TLS roots as a whole (webpki roots or not, extra roots).
    pub fn tls(mut self, tls: TlsConfig) -> Self {
        self.tls = tls;
        self.tls_set = true;
        self
    }

    /// The robots.txt fetch settings as a whole (timeouts, redirects, size); its
    /// `user_agent` is replaced by this builder's.
    pub fn fetch_config(mut self, config: FetchConfig) -> Self {
        self.fetch = config;
        self
    }

    /// Bounds the idle connections kept for robots.txt fetches, and for the requests sent
    /// through [`Robots::pool`] (default: [`PoolConfig::default`]).
    pub fn pool(mut self, config: PoolConfig) -> Self {
        self.pool = config;
        self
    }

    /// Tells `observer` about every robots.txt fetch (besides the audit log, if any); may
    /// be called more than once.
    pub fn fetch_observer(mut self, observer: Arc<dyn FetchObserver>) -> Self {
        self.fetch_observers.push(observer);
        self
    }

    /// Paces through a store shared by several processes (fleet mode: a `Pacer::shared`
    /// on it), instead of each process alone.
    pub fn pace_store(mut self, store: Arc<dyn SharedPaceStore>) -> Self {
        self.pace_store = Some(store);
        self
    }

    /// Shares fetched robots.txt copies with other processes (see
    /// [`RobotsPolicy::share_copies`]).
    pub fn copy_share(mut self, share: Arc<dyn CopyShare>) -> Self {
        self.copy_share = Some(share);
        self
    }

    /// Fleet mode (feature `cluster`): the layer records or refuses (per the cluster's
    /// `on_error`) while Redis cannot be reached, robots.txt copies are shared through it
    /// (unless [`copy_share`](RobotsBuilder::copy_share) gives another share) and so is
    /// pacing (unless [`pace_store`](RobotsBuilder::pace_store) gives another store).
    ///
    /// One Redis server ([`Redis::Server`](crate::cluster::Redis::Server)) or a Redis
    /// Cluster ([`Redis::Cluster`](crate::cluster::Redis::Cluster), its seed nodes):
    ///
    /// ```
    /// use robotsgate::cluster::{Cluster, ClusterConfig, Redis};
    ///
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let one = ClusterConfig { redis: Redis::Server("redis://redis:6379/0".into()), ..Default::default() };
    /// let nodes = vec!["redis://10.0.0.1:6379".into(), "redis://10.0.0.2:6379".into()];
    /// let cluster = ClusterConfig { redis: Redis::Cluster(nodes), ..Default::default() };
    /// for config in [one, cluster] {
    ///     // Connects lazily: no I/O here (within a tokio runtime).
    ///     let fleet = Cluster::new(config)?;
    ///     let robots = robotsgate::Robots::builder().agent("ExampleBot").cluster(fleet.clone()).build()?;
    ///     // Notices Redis coming back after an outage.
    ///     let watch = fleet.watch(std::time::Duration::from_secs(1));
    ///     # watch.abort();
    ///     # drop(robots);
    /// }
    /// # Ok(())
    /// # }
    /// ```
    #[cfg(feature = "cluster")]
    pub fn cluster(mut self, cluster: crate::cluster::Cluster) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// Answers an origin that cannot be reached with robotsgate's own `502`/`504` instead
    /// of the inner service's error (see [`RobotsLayer::answer_outages`]): what a proxy
    /// sends its client.
    pub fn answer_outages(mut self) -> Self {
        self.answer_outages = true;
        self
    }

    /// How requests arrive, when they carry no [`Transport`] of their own.
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = Some(transport);
        self
    }

    /// Requests without a `User-Agent` go without one (by default they get the
    /// crawler's, [`user_agent`](RobotsBuilder::user_agent)): for a proxy that passes its
    /// clients' requests on as they are.
    pub fn leave_user_agent(mut self) -> Self {
        self.leave_user_agent = true;
        self
    }

    /// Allowed requests' responses go without their [`Decision`](crate::policy::Decision)
    /// in the extensions (see [`RobotsLayer::without_decision_in_response`]): for a
    /// caller that does not read it, such as a proxy.
    pub fn no_decision_in_response(mut self) -> Self {
        self.no_decision_in_response = true;
        self
    }

    /// Checks the settings and makes the [`Robots`]. Needs no runtime; the first request
    /// does (tokio).
    pub fn build(self) -> Result<Robots, BuildError> {
        let agent = self.agent.ok_or(BuildError::MissingAgent)?;
        if !is_valid_product_token(&agent) {
            return Err(BuildError::InvalidAgent(agent));
        }
        let user_agent =
            self.user_agent.unwrap_or_else(|| format!("{agent} (robotsgate/{})", env!("CARGO_PKG_VERSION")));
        let header = HeaderValue::from_str(&user_agent)
            .map_err(|_| BuildError::InvalidUserAgent(user_agent.clone()))?;
        if !user_agent.to_ascii_lowercase().contains(&agent.to_ascii_lowercase()) {
            return Err(BuildError::UserAgentWithoutToken { agent, user_agent });
        }
        if self.fetch_service.is_some() {
            let conflict = [
                (self.connector.is_some(), "a connector"),
                (self.guard_set, "a destination allowance"),
                (self.dns_set || self.resolver.is_some(), "DNS settings"),
                (self.tls_set, "TLS roots"),
                (self.connect_timeout.is_some(), "a connect timeout"),
                (self.proxies.is_some(), "proxy settings"),
            ]
            .into_iter()
            .find_map(|(set, what)| set.then_some(what));
            if let Some(what) = conflict {
                return Err(BuildError::FetchServiceConflict(what));
            }
        }
        let connector = match self.connector {
            Some(c) => {
                let conflict = [
                    (self.guard_set, "a destination allowance"),
                    (self.dns_set || self.resolver.is_some(), "DNS settings"),
                    (self.tls_set, "TLS roots"),
                    (self.connect_timeout.is_some(), "a connect timeout"),
                    (self.proxies.is_some(), "proxy settings"),
                ]
                .into_iter()
                .find_map(|(set, what)| set.then_some(what));
                if let Some(what) = conflict {
                    return Err(BuildError::ConnectorConflict(what));
                }
                c
            }
            None => {
                let resolver = self.resolver.unwrap_or_else(|| Resolver::new(&self.dns));
                let tls = client_config(&self.tls, &[b"h2", b"http/1.1"])?;
                let timeout = self.connect_timeout.unwrap_or(Duration::from_secs(5));
                let proxies = match self.proxies {
                    Some(p) => p,
                    // With a fetch service robotsgate makes no connection of its own.
                    None if self.fetch_service.is_some() => Proxies::none(),
                    None => Proxies::from_env()?,
                };
                Connector::new(resolver, Arc::new(self.guard), tls, timeout).with_proxies(proxies)
            }
        };
        let fetch = FetchConfig { user_agent: user_agent.clone(), ..self.fetch };
        let pool = Pool::new(connector.clone(), self.pool);
        let mut fetch_observers = Vec::with_capacity(self.fetch_observers.len() + 1);
        if let Some(audit) = &self.audit {
            fetch_observers.push(Arc::new(audit.clone()) as Arc<dyn FetchObserver>);
        }
        fetch_observers.extend(self.fetch_observers);
        let validity = self.signature_validity;
        let make = |key: Arc<SigningKey>, agent: &str| -> Result<Arc<RequestSigner>, SignError> {
            let signer = RequestSigner::new(key, agent)?;
            Ok(Arc::new(match validity {
                Some(v) => signer.validity(v),
                None => signer,
            }))
        };
        let signer = match self.signing {
            Some((key, signature_agent)) => Some(make(key, &signature_agent)?),
            None => None,
        };
        let mut signers = Signers::new(signer.clone());
        for (user, name, key, agent) in self.signing_for {
            let one = make(key, &agent)?;
            signers = if user { signers.with_user(name, one) } else { signers.with_token(&name, one) };
        }
        let own_connections = self.fetch_service.is_none();
        let fetcher = match self.fetch_service {
            Some(service) => Fetcher::with_fetch_service(service, fetch),
            None => Fetcher::with_pool(pool.clone(), fetch),
        };
        let fetcher = match &signer {
            Some(signer) => fetcher.with_signer(signer.clone() as Arc<dyn crate::fetch::SignFetch>),
            None => fetcher,
        };
        let policy = RobotsPolicy::with_observers(fetcher, self.policy, fetch_observers);
        #[cfg(feature = "cluster")]
        let (copy_share, pace_store) = match &self.cluster {
            Some(c) => (
                self.copy_share.or_else(|| {
                    Some(Arc::new(crate::cluster::RedisCopyShare::new(c.clone())) as Arc<dyn CopyShare>)
                }),
                self.pace_store.or_else(|| {
                    Some(Arc::new(crate::cluster::RedisPaceStore::new(c.clone())) as Arc<dyn SharedPaceStore>)
                }),
            ),
            None => (self.copy_share, self.pace_store),
        };
        #[cfg(not(feature = "cluster"))]
        let (copy_share, pace_store) = (self.copy_share, self.pace_store);
        if let Some(share) = copy_share {
            policy.share_copies(share);
        }
        let agent: Arc<str> = agent.into();
        let pacer = match pace_store {
            Some(store) => Pacer::shared(self.pacing, store),
            None => Pacer::new(self.pacing),
        };
        if let Some(o) = self.pace_observer {
            pacer.observe(o);
        }
        let mut layer = RobotsLayer::new(policy.clone(), agent.clone())
            .with_mode(self.mode)
            .with_purpose(self.purpose)
            .with_pacer(pacer.clone());
        if own_connections {
            layer = layer.with_admission(connector.clone());
        }
        if !self.leave_user_agent {
            layer = layer.with_user_agent(header.clone());
        }
        if self.answer_outages {
            layer = layer.answer_outages();
        }
        if self.no_decision_in_response {
            layer = layer.without_decision_in_response();
        }
        if let Some(transport) = self.transport {
            layer = layer.with_transport(transport);
        }
        #[cfg(feature = "cluster")]
        if let Some(c) = self.cluster {
            layer = layer.with_cluster(c);
        }
        if let Some(audit) = self.audit {
            layer = layer.with_audit(audit);
        }
        if let Some(observer) = self.observer {
            layer = layer.with_observer(observer);
        }
        if let Some(selector) = self.selector {
            layer = layer.with_selector(SharedSelector(selector));
        }
        if !signers.is_empty() {
            layer = layer.with_signers(signers);
        }
        Ok(Robots { layer, policy, pacer, connector, pool, agent, user_agent: header })
    }
}

/// A selector given to the builder, shared.
struct SharedSelector(Arc<dyn SelectToken>);

impl SelectToken for SharedSelector {
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError> {
        self.0.select(parts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_builder_and_robots_are_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<RobotsBuilder>();
        shared::<Robots>();
    }

    #[test]
    fn build_needs_no_runtime_and_has_working_defaults() {
        let robots = Robots::builder().agent("ExampleBot").build().expect("defaults build");
        assert_eq!(robots.agent(), "ExampleBot");
        assert!(robots.user_agent().to_str().unwrap().starts_with("ExampleBot (robotsgate/"));
        assert_eq!(robots.policy().config().profile, Profile::Conservative);
    }

    #[test]
    fn bad_identities_are_refused_with_the_reason() {
        let err = |b: RobotsBuilder| b.build().expect_err("refused").to_string();
        assert!(err(Robots::builder()).contains("no product token"));
        for bad in ["", "ExampleBot/1.0", "Example Bot", "MJ12bot", "bot*"] {
            let e = err(Robots::builder().agent(bad));
            assert!(e.contains("invalid product token"), "{bad:?}: {e}");
        }
        let e = err(Robots::builder().agent("ExampleBot").user_agent("Mozilla/5.0"));
        assert!(e.contains("does not contain the product token"), "{e}");
        let e = err(Robots::builder().agent("ExampleBot").user_agent("ExampleBot\n1.0"));
        assert!(e.contains("invalid User-Agent"), "{e}");
        // The token is found case-insensitively, as robots.txt matching is.
        assert!(Robots::builder().agent("ExampleBot").user_agent("examplebot/2.0").build().is_ok());
    }

    #[test]
    fn a_custom_connector_conflicts_with_settings_it_would_ignore() {
        let connector = Robots::builder().agent("A").build().unwrap().connector().clone();
        let e = Robots::builder()
            .agent("A")
            .connector(connector.clone())
            .allow_destination("127.0.0.0/8".parse().unwrap())
            .build()
            .expect_err("conflict")
            .to_string();
        assert!(e.contains("destination allowance"), "{e}");
        assert!(Robots::builder().agent("A").connector(connector).build().is_ok());
    }

    #[test]
    fn signing_needs_an_https_signature_agent() {
        let key = || SigningKey::generate().unwrap();
        let e =
            Robots::builder().agent("A").sign_with(key(), "http://bot.example").build().expect_err("http");
        assert!(matches!(e, BuildError::Signing(SignError::BadAgent(_))), "{e}");
        let robots = Robots::builder()
            .agent("A")
            .sign_with(key(), "https://bot.example")
            .signature_validity(Duration::from_secs(30))
            .build()
            .unwrap();
        assert!(robots.layer().signer().is_some());
        assert!(Robots::builder().agent("A").build().unwrap().layer().signer().is_none());
    }
}
