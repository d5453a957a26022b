//! The ingress side: a site enforces its own robots.txt on the bots that visit it.
//!
//! [`IngressLayer`] is a tower layer over any server `Service<http::Request<B>>` (axum,
//! hyper, the `robotsgate ingress` reverse proxy). For each request:
//!
//! - **Who**: the product token its `User-Agent` carries, matched as crawlers are told to
//!   match theirs (case-insensitive, a whole word: `GPTBot/1.2`, `compatible; GPTBot/1.2;`,
//!   never `NotGPTBot`), among the site file's group names, the bundled list of known
//!   agents (the ai.robots.txt project's list) and the identity operators' tokens. A
//!   `User-Agent` with no known
//!   token (a person's browser) passes untouched, unless
//!   [`UnknownAgents::Star`] holds it to `User-agent: *`.
//! - **robots.txt itself** (`/robots.txt`) is always served, byte for byte, never refused
//!   nor paced; each fetch of it by a bot is remembered (token and client network: time,
//!   SHA-256) so that a later record can cite it.
//! - **Disallowed** (the engine decides, [`crate::rep`], with its precedence and group
//!   selection): the configured status (403), `x-robotsgate: disallowed` and a short body
//!   naming the token, the rule and its line. The inner service is not called.
//! - **Paced**: the `Crawl-delay` or `Request-rate` of the bot's group, per token and client
//!   network (/24 IPv4, /64 IPv6): `429` with `Retry-After`, `x-robotsgate: paced`.
//! - **Usage preferences**: an allowed response gets the group's `Content-Usage` (and
//!   `Content-Signal`, merged) as a `Content-Usage` header; a known agent whose declared
//!   purpose (training, search, AI input) the site refuses is answered as disallowed
//!   (`x-robotsgate: usage-refused`).
//! - **Identity** (optional, [`IngressBuilder::verifier`]): the bot's claim is checked
//!   ([`Verifier::verify_request`](crate::identity::Verifier::verify_request)): its Web Bot
//!   Auth signature when it names an operator's `Signature-Agent` (a signed request
//!   without a token is judged as that operator's first token), else its operator's
//!   published ranges and reverse DNS. An impersonator (a failed check: a wrong address, a
//!   bad or replayed signature) is refused (`x-robotsgate: identity-failed`), held to `*`,
//!   or let through ([`Impersonators`]); a bot of an operator that requires verification
//!   ([`Operator::require`](crate::identity::Operator::require)) and is not verified is
//!   refused (`x-robotsgate: identity-unverified`). With signatures checked, these
//!   refusals carry `Accept-Signature` so the bot can sign and retry.
//! - [`Mode::ReportOnly`] decides and records but passes everything.
//! - **Evidence**: one [`crate::audit::IngressRecord`] per bot request,
//!   written to the [`AuditLog`] and/or handed to an observer.
//!
//! The client's address is the `SocketAddr` in the request's extensions (hyper servers and
//! axum's `into_make_service_with_connect_info` can put it there), or what a trusted
//! proxy's `X-Forwarded-For` (or `Forwarded`: [`ForwardedHeader`]) says (see
//! [`IngressBuilder::trusted_proxies`]).
//!
//! ```
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! use robotsgate::ingress::IngressLayer;
//! use tower::{Layer as _, ServiceExt as _, service_fn};
//!
//! let site = service_fn(|_req: http::Request<String>| async {
//!     Ok::<_, std::convert::Infallible>(http::Response::new(String::from("hello")))
//! });
//! let svc = IngressLayer::builder()
//!     .robots_bytes("User-agent: GPTBot\nDisallow: /private\nContent-Usage: search=y\n")
//!     .build()
//!     .layer(site);
//!
//! let bot = |path: &str, ua: &str| {
//!     http::Request::get(path).header("user-agent", ua).body(String::new()).unwrap()
//! };
//! let res = svc.clone().oneshot(bot("/private/a", "Mozilla/5.0 (compatible; GPTBot/1.2)")).await.unwrap();
//! assert_eq!(res.status(), 403);
//! assert_eq!(res.headers()["x-robotsgate"], "disallowed");
//! let res = svc.clone().oneshot(bot("/page", "GPTBot/1.2")).await.unwrap();
//! assert_eq!(res.status(), 200);
//! assert_eq!(res.headers()["content-usage"], "search=y");
//! // A browser is not a bot.
//! let res = svc.oneshot(bot("/private/a", "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0")).await.unwrap();
//! assert_eq!(res.status(), 200);
//! # }
//! ```

mod agents;
mod body;
mod client;
mod fleet;
mod identity_use;
mod judge;
mod service;
mod sites;
mod source;
mod state;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use bytes::Bytes;
use http::{HeaderValue, StatusCode};
use ipnet::IpNet;

pub(crate) use agents::KnownAgents;
pub use body::IngressBody;
pub use fleet::{PacedBot, PacingFuture, SharedPacing};
pub use service::{IngressService, ResponseFuture};
pub use state::RobotsFetch;

use crate::audit::{AuditLog, IngressRecordRef};
use crate::identity::Verifier;
use crate::ids::RequestIds;
use crate::rep::Profile;

/// Enforce, or only report.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Mode {
    /// Refuse and pace (the default).
    #[default]
    Enforce,
    /// Decide and record, pass everything (`would-disallow`, `would-pace`).
    ReportOnly,
}

impl Mode {
    /// `enforce` or `report-only`.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::ReportOnly => "report-only",
        }
    }
}

/// What a `User-Agent` with no known token is held to.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum UnknownAgents {
    /// Nothing: it is not a bot (the default; a person's browser is not held to `*`).
    #[default]
    Ignore,
    /// The `User-agent: *` group.
    Star,
}

/// What a bot whose identity check failed gets (with a [`Verifier`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Impersonators {
    /// Refused: the configured status, `x-robotsgate: identity-failed` (the default).
    #[default]
    Refuse,
    /// Held to `User-agent: *`, as an unknown agent.
    Star,
    /// Judged as the bot it claims to be.
    Allow,
}

/// Which header the trusted proxies put the client's address in (see
/// [`IngressBuilder::trusted_proxies`]). Only that one is read: a client can send either,
/// and a proxy that adds to one leaves the other as the client wrote it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ForwardedHeader {
    /// `X-Forwarded-For` (the default: nginx, HAProxy, Envoy, cloud load balancers and CDNs
    /// add it).
    #[default]
    XForwardedFor,
    /// `Forwarded` (RFC 7239), its `for=` parameters.
    Forwarded,
}

/// The settings of the ingress layer (see [`IngressBuilder`] for each).
#[derive(Debug, Clone)]
pub struct IngressConfig {
    /// Enforce or report only.
    pub mode: Mode,
    /// The status of a refusal (403; some sites prefer 404).
    pub status: StatusCode,
    /// What a `User-Agent` with no known token is held to.
    pub unknown_agents: UnknownAgents,
    /// What an impersonator gets.
    pub impersonators: Impersonators,
    /// How the robots.txt is read.
    pub profile: Profile,
    /// Proxies whose `forwarded_header` is believed.
    pub trusted_proxies: Vec<IpNet>,
    /// The header the trusted proxies add the client's address to.
    pub forwarded_header: ForwardedHeader,
    /// How long a fetched robots.txt is used before it is fetched again.
    pub ttl: Duration,
    /// How long an unreachable robots.txt's outcome (last good copy or disallow all) is
    /// used before trying again.
    pub error_ttl: Duration,
    /// Time allowed for a fetch of robots.txt through the inner service (its redirects
    /// included).
    pub fetch_timeout: Duration,
    /// The `Host` robots.txt is fetched with, for an inner service that tells sites apart
    /// by it; `None` (the default): none, the inner service's own (the `robotsgate ingress`
    /// proxy sends the upstream's). Never a client's: the copy serves every client, and one
    /// that chose the host would choose the rules.
    pub robots_host: Option<HeaderValue>,
    /// Most bots (token and network) whose pacing and robots.txt fetches are kept.
    pub max_bots: usize,
    /// Longest `Retry-After` sent (a `Crawl-delay: 86400` does not lock a bot out longer).
    pub max_retry_after: Duration,
}

impl Default for IngressConfig {
    fn default() -> Self {
        IngressConfig {
            mode: Mode::Enforce,
            status: StatusCode::FORBIDDEN,
            unknown_agents: UnknownAgents::Ignore,
            impersonators: Impersonators::Refuse,
            profile: Profile::Conservative,
            trusted_proxies: Vec::new(),
            forwarded_header: ForwardedHeader::default(),
            ttl: Duration::from_secs(86_400),
            error_ttl: Duration::from_secs(300),
            fetch_timeout: Duration::from_secs(10),
            robots_host: None,
            max_bots: 100_000,
            max_retry_after: Duration::from_secs(3600),
        }
    }
}

/// Something told of every bot request's record (metrics, tests, a second log).
pub(crate) type IngressObserver = Arc<dyn Fn(&IngressRecordRef<'_>) + Send + Sync>;

/// Builds an [`IngressLayer`].
#[must_use]
pub struct IngressBuilder {
    config: IngressConfig,
    robots: Option<Bytes>,
    hosts: Vec<HeaderValue>,
    known: Arc<KnownAgents>,
    audit: Option<AuditLog>,
    observer: Option<IngressObserver>,
    verifier: Option<Arc<Verifier>>,
    pacing: Option<Arc<dyn SharedPacing>>,
}

impl std::fmt::Debug for IngressBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressBuilder").field("config", &self.config).finish_non_exhaustive()
    }
}

impl IngressBuilder {
    /// The site's robots.txt, given once (and served at `/robots.txt` by the layer). Without
    /// it, robots.txt is fetched through the inner service.
    pub fn robots_bytes(mut self, body: impl Into<Bytes>) -> Self {
        self.robots = Some(body.into());
        self
    }

    /// All settings at once.
    pub fn config(mut self, config: IngressConfig) -> Self {
        self.config = config;
        self
    }

    /// Enforce (default) or report only.
    pub fn mode(mut self, mode: Mode) -> Self {
        self.config.mode = mode;
        self
    }

    /// The status of a refusal (default 403).
    pub fn status(mut self, status: StatusCode) -> Self {
        self.config.status = status;
        self
    }

    /// What a `User-Agent` with no known token is held to (default: nothing).
    pub fn unknown_agents(mut self, unknown: UnknownAgents) -> Self {
        self.config.unknown_agents = unknown;
        self
    }

    /// What an impersonator gets (default: refused).
    pub fn impersonators(mut self, what: Impersonators) -> Self {
        self.config.impersonators = what;
        self
    }

    /// The reading of robots.txt (default: conservative).
    pub fn profile(mut self, profile: Profile) -> Self {
        self.config.profile = profile;
        self
    }

    /// Proxies whose [`forwarded_header`](Self::forwarded_header) is believed (default:
    /// none). When a request's peer is one of them, the header is read from its end (what
    /// the proxies appended) hop by hop, and the first address not among them is the
    /// client's; a peer that is not one of them is the client, whatever its headers say.
    pub fn trusted_proxies(mut self, nets: impl IntoIterator<Item = IpNet>) -> Self {
        self.config.trusted_proxies = nets.into_iter().collect();
        self
    }

    /// The header the trusted proxies add the client's address to (default
    /// `X-Forwarded-For`); the other one is never read.
    pub fn forwarded_header(mut self, header: ForwardedHeader) -> Self {
        self.config.forwarded_header = header;
        self
    }

    /// The `Host` robots.txt is fetched with (default: none, the inner service's own); see
    /// [`IngressConfig::robots_host`].
    pub fn robots_host(mut self, host: Option<HeaderValue>) -> Self {
        self.config.robots_host = host;
        self
    }

    /// The host names of the sites an upstream tells apart by `Host` (default: none). Each
    /// has its own robots.txt, fetched through the inner service with that name as `Host`
    /// (the first spelling given; names compare ignoring case and a trailing dot), and
    /// judges the requests that name it (`Host` without its port, or the HTTP/2
    /// `:authority`); its bots are paced and their robots.txt fetches remembered per name.
    /// Every other request is judged by the default copy: the file given
    /// ([`robots_bytes`](Self::robots_bytes)), else the one fetched with
    /// [`robots_host`](Self::robots_host). The names are fixed for the layer's life.
    ///
    /// ```
    /// use http::HeaderValue;
    /// use robotsgate::ingress::IngressLayer;
    ///
    /// let layer = IngressLayer::builder()
    ///     .hosts([HeaderValue::from_static("example.com"), HeaderValue::from_static("blog.example.com")])
    ///     .build();
    /// # let _ = layer;
    /// ```
    pub fn hosts(mut self, hosts: impl IntoIterator<Item = HeaderValue>) -> Self {
        self.hosts = hosts.into_iter().collect();
        self
    }

    /// How long a fetched robots.txt is used (default 24 h).
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.config.ttl = ttl;
        self
    }

    /// Writes one record per bot request to `log`.
    pub fn audit(mut self, log: AuditLog) -> Self {
        self.audit = Some(log);
        self
    }

    /// Hands each bot request's record to `observer` (metrics, tests, a second log),
    /// borrowed: [`IngressRecordRef::to_record`] makes the owned
    /// [`IngressRecord`](crate::audit::IngressRecord) when the observer keeps it.
    pub fn observer(mut self, observer: impl Fn(&IngressRecordRef<'_>) + Send + Sync + 'static) -> Self {
        self.observer = Some(Arc::new(observer));
        self
    }

    /// Checks each bot's identity claim with `verifier` (issue 29's checks).
    pub fn verifier(mut self, verifier: Option<Arc<Verifier>>) -> Self {
        self.verifier = verifier;
        self
    }

    /// Keeps each bot's pacing (`Crawl-delay`, `Request-rate`) in `store`, shared with the
    /// other replicas of a fleet (fleet mode: `cluster::RedisIngressPacing`). While the
    /// store cannot be reached, this replica paces alone (or refuses paced bots with `503`
    /// when the store says so); what it admitted alone is not told to the fleet.
    pub fn share_pacing(mut self, store: Arc<dyn SharedPacing>) -> Self {
        self.pacing = Some(store);
        self
    }

    /// The layer. The known agents include the [`verifier`](IngressBuilder::verifier)'s
    /// operators' tokens ([`Verifier::tokens`](crate::identity::Verifier::tokens)): a bot
    /// claiming one is checked even where neither the site's file nor the list names it.
    pub fn build(self) -> IngressLayer {
        let known = match &self.verifier {
            Some(v) => Arc::new((*self.known).clone().with_tokens(v.tokens())),
            None => self.known,
        };
        let (ttl, error_ttl) = (self.config.ttl, self.config.error_ttl);
        let default = source::RobotsCache::new(self.robots, &known, ttl, error_ttl);
        let sites =
            sites::Sites::new(default, self.hosts, || source::RobotsCache::new(None, &known, ttl, error_ttl));
        IngressLayer {
            shared: Arc::new(Shared {
                limiter: state::Limiter::new(self.config.max_bots),
                fetches: state::FetchMemory::new(self.config.max_bots as u64),
                config: ArcSwap::from_pointee(self.config),
                sites,
                known,
                audit: self.audit,
                observer: self.observer,
                verifier: self.verifier,
                pacing: self.pacing,
                ids: RequestIds::new(),
            }),
        }
    }
}

/// What every clone of the layer and its services shares.
pub(crate) struct Shared {
    /// Replaced by [`IngressLayer::reload`].
    pub(crate) config: ArcSwap<IngressConfig>,
    /// The robots.txt copies: the default one and one per host name given.
    pub(crate) sites: sites::Sites,
    pub(crate) known: Arc<KnownAgents>,
    pub(crate) limiter: state::Limiter,
    pub(crate) fetches: state::FetchMemory,
    pub(crate) audit: Option<AuditLog>,
    pub(crate) observer: Option<IngressObserver>,
    pub(crate) verifier: Option<Arc<Verifier>>,
    pub(crate) pacing: Option<Arc<dyn SharedPacing>>,
    /// The records' `request_id`s (the decision records' series).
    pub(crate) ids: RequestIds,
}

/// The tower layer that enforces a site's robots.txt on the bots visiting it. See the
/// [module docs](self).
#[derive(Clone)]
pub struct IngressLayer {
    shared: Arc<Shared>,
}

impl std::fmt::Debug for IngressLayer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressLayer")
            .field("config", &self.shared.config.load_full())
            .finish_non_exhaustive()
    }
}

impl IngressLayer {
    /// A builder with the defaults: robots.txt fetched through the inner service, enforce,
    /// 403, browsers ignored, the bundled known agents.
    pub fn builder() -> IngressBuilder {
        IngressBuilder {
            config: IngressConfig::default(),
            robots: None,
            hosts: Vec::new(),
            known: Arc::new(KnownAgents::bundled()),
            audit: None,
            observer: None,
            verifier: None,
            pacing: None,
        }
    }

    /// Applies new settings to this layer and every service made from it, from the next
    /// request on: mode, status, unknown agents, impersonators, profile, trusted proxies,
    /// `fetch_timeout` and `max_retry_after`. The robots.txt time to live (`ttl`,
    /// `error_ttl`) and `max_bots` stay as built. Pacing state and the robots.txt fetches
    /// remembered are kept.
    pub fn reload(&self, config: IngressConfig) {
        self.shared.config.store(Arc::new(config));
    }

    /// Replaces the site's robots.txt given as bytes ([`IngressBuilder::robots_bytes`]);
    /// `None`: fetched through the inner service from now on. (The default copy: the host
    /// names given keep fetching theirs.)
    pub fn set_robots_bytes(&self, body: Option<Bytes>) {
        self.shared.sites.default.set_fixed(body, &self.shared.known);
    }

    /// The settings in force.
    pub fn config(&self) -> Arc<IngressConfig> {
        self.shared.config.load_full()
    }

    /// When the bot (`token`, from `client`'s network) last fetched robots.txt here: from
    /// the site `host` names when it is one of the [host names
    /// given](IngressBuilder::hosts), else from the default site.
    pub fn last_robots_fetch(
        &self,
        host: Option<&str>,
        token: &str,
        client: Option<IpAddr>,
    ) -> Option<RobotsFetch> {
        let site = self.shared.sites.by_name(host);
        self.shared.fetches.last(&state::bot_key(site.name, token, client))
    }
}

impl<S> tower::Layer<S> for IngressLayer {
    type Service = IngressService<S>;

    fn layer(&self, inner: S) -> Self::Service {
        IngressService::new(inner, self.shared.clone())
    }
}
