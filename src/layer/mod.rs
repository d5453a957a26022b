//! `RobotsLayer`: a tower middleware that lets a request through only when the target's
//! robots.txt allows it for the crawler's product token. Most embedders get one from
//! [`Robots::layer`](crate::Robots::layer); this module is the machinery.
//!
//! The target comes from an absolute-form URI (`GET http://example.com/x`), else from the
//! `Host` header and a configured scheme, or from the authority of a `CONNECT` (a
//! host-level check: "is `/` allowed?", logged with `path_visible: false`).
//!
//! What the service returns:
//! - **Allowed**: the inner service's response, with the [`Decision`] in its extensions
//!   (unless [`RobotsLayer::without_decision_in_response`]).
//! - **Refused** (robots.txt disallows the path, the destination is refused by the guard,
//!   no product token, a bad request, the audit log failing closed): robotsgate's own
//!   answer (`403`, `400` or `503`) with `x-robotsgate: <kind>`, a short `text/plain` body,
//!   and the [`Refusal`] (with its [`Decision`]) in the response extensions; the inner
//!   service is **not** called. [`Refusal::from_response`] tells it from the origin's.
//!   An origin's own `x-robotsgate` header is removed from its responses, so it cannot
//!   pass for robotsgate's answer.
//! - **The origin cannot be reached** (DNS, refused connection, certificate, timeout):
//!   `Err`, whether the robots.txt fetch found it out (the error is a [`Refusal`] of kind
//!   `upstream-unreachable` or `upstream-timeout`, with its [`Decision`]: robots.txt
//!   unreachable means "disallow all") or the request itself did (the inner service's
//!   error). One outage, one behaviour.
//! - **Paced** ([`RobotsLayer::with_pacer`]): a request that may go is held until its
//!   origin's next slot (crawl-delay, request-rate, back-off after 429/503; see
//!   [`pacing`](crate::pacing)); one that would wait too long gets robotsgate's `503` with
//!   `Retry-After` (`x-robotsgate: paced`), and the origin is not contacted. Only the
//!   request's head is held: its body stays unread until it goes.
//! - Report-only ([`RobotsLayer::report_only`]): decide and log, never block (pacing
//!   reports the wait it would have imposed).
//!
//! - **Signed** ([`RobotsLayer::with_signer`]): every request that goes carries a Web Bot
//!   Auth signature made when it is sent (after pacing), replacing any the client sent.
//!
//! Every decision goes to the audit log, if one is set; so does every refusal made
//! without a decision (no product token, a request it cannot read, the audit log failing
//! closed), as a `refusal` record ([`AuditLog::log_refusal`]).
//!
//! # Example
//! ```no_run
//! # async fn demo(policy: robotsgate::policy::RobotsPolicy) {
//! use bytes::Bytes;
//! use http_body_util::Empty;
//! use hyper_util::client::legacy::Client;
//! use hyper_util::rt::TokioExecutor;
//! use robotsgate::layer::RobotsLayer;
//! use tower::{Service, ServiceBuilder, ServiceExt};
//!
//! let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
//! let mut svc = ServiceBuilder::new().layer(RobotsLayer::new(policy, "ExampleBot")).service(client);
//! let req = http::Request::get("http://example.com/private/x").body(Empty::new()).unwrap();
//! match svc.ready().await.unwrap().call(req).await {
//!     Ok(res) => match robotsgate::Refusal::from_response(&res) {
//!         Some(refusal) => println!("robotsgate said no: {refusal}"),
//!         None => println!("the origin answered {}", res.status()),
//!     },
//!     Err(e) => println!("not sent: {e}"),
//! }
//! # }
//! ```

mod decide;
mod outcome;
mod purpose;
mod select;
mod service;
mod tally;

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use arc_swap::ArcSwap;
use http::HeaderValue;
use tower::Layer;

use crate::audit::AuditLog;
use crate::identity::httpsig::{RequestSigner, Signers};
use crate::ids::RequestIds;
use crate::net::Connector;
use crate::origin::Scheme;
use crate::pacing::{PaceTicket, Pacer};
use crate::policy::{Decision, RobotsPolicy};
use crate::refusal::{Refusal, RefusalKind};
use crate::vocabulary::{Outcome, ReasonClass};
use decide::Shared;

pub use purpose::{PurposeSettings, ResponseUsage};
pub use select::{SelectToken, TokenError, TokenSelector};
pub use service::{ResponseFuture, RobotsService};
pub use tally::Tally;

/// The client's address, put into the request extensions by the proxy (for the log). A
/// service made for one client connection can carry it instead
/// ([`RobotsService::with_client_addr`]); a request's own extension wins.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ClientAddr(pub SocketAddr);

/// How a request reached robotsgate, put into the request extensions by the proxy and
/// written to its audit record (`transport`): what could be seen of it, and so what was
/// checked.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Transport {
    /// An absolute-form request to the proxy (`GET http://host/path`): the path is checked.
    Proxy,
    /// A `CONNECT` to port 443 without interception: TLS is assumed and the host is checked
    /// (is `/` allowed?) before the tunnel opens; paths are not visible.
    Connect,
    /// A `CONNECT` tunnel whose first bytes were a TLS handshake: the host is checked (`/`)
    /// on `https://host:port`; paths are not visible.
    ConnectTls,
    /// A `CONNECT` tunnel whose first bytes were neither TLS nor HTTP (or that stayed
    /// silent): the host is checked (`/`); nothing inside is visible.
    ConnectOpaque,
    /// Plain HTTP inside a `CONNECT` tunnel (e.g. `ws://` opened with `CONNECT`): every
    /// request's path is checked on `http://host:port`.
    ConnectHttp,
    /// HTTPS inside an intercepted `CONNECT` tunnel: every request's path is checked.
    Intercepted,
}

impl Transport {
    /// The audit log's name for it.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Proxy => "proxy",
            Transport::Connect => "connect",
            Transport::ConnectTls => "connect-tls",
            Transport::ConnectOpaque => "connect-opaque",
            Transport::ConnectHttp => "connect-http",
            Transport::Intercepted => "intercepted",
        }
    }
}

/// The authenticated proxy user, put into the request extensions by the proxy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProxyUser(pub Arc<str>);

/// The signer that signed a request, put into its extensions by the layer (a retry, e.g.
/// pay per crawl's, is signed by the same crawler's key).
#[derive(Debug, Clone)]
pub struct SignedWith(pub Arc<RequestSigner>);

/// The error of a [`RobotsService`]: the inner service's, or a [`Refusal`] for an
/// origin that cannot be reached.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub use outcome::RobotsBody;

/// Sees every decision the layer makes, e.g. to count them (the proxy's metrics do).
pub trait DecisionObserver: Send + Sync + 'static {
    /// A decision: its `outcome` (as in its audit record: `allowed`, `disallowed`,
    /// `paced`, ...), the reason class ([`Reason::class`](crate::policy::Reason::class))
    /// and how long deciding took.
    fn decision(&self, outcome: Outcome, reason: ReasonClass, took: std::time::Duration);
    /// A request refused before any decision ([`RefusalKind::NoToken`],
    /// [`RefusalKind::ClusterUnavailable`]; a server adds its own, e.g.
    /// [`RefusalKind::AuthRequired`]).
    fn refused(&self, kind: RefusalKind);
    /// A response whose AI-usage preferences refuse the request's purpose:
    /// [`Outcome::UsageRefused`] when it was replaced by a refusal,
    /// [`Outcome::WouldRefuseUsage`] when it went through (report-only, or
    /// `enforce_response` off). Nothing by default.
    fn response_usage(&self, outcome: Outcome) {
        let _ = outcome;
    }
}

/// Enforce or only report.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Mode {
    /// Disallowed requests are answered with 403.
    #[default]
    Enforce,
    /// Decide and log; let everything through.
    ReportOnly,
    /// No decisions and no audit records: every request goes to the inner service
    /// untouched but for its signature, with a signer (an emergency switch, and
    /// robotsgate's own pass-through ceiling in benchmarks).
    Off,
}

/// Applies [`RobotsService`] to a service.
#[derive(Clone)]
pub struct RobotsLayer {
    shared: Arc<Shared>,
}

/// What [`RobotsLayer::reload`] can change while running.
#[derive(Clone)]
pub struct Settings {
    /// Chooses the product token per request.
    pub selector: Arc<dyn SelectToken>,
    /// Enforce or report only.
    pub mode: Mode,
    /// The requests' purpose and what the sites' usage preferences for it do (default:
    /// none, no usage check).
    pub purpose: Arc<PurposeSettings>,
}

impl Settings {
    /// These settings with a fixed token selector and mode, no purpose.
    pub fn new(selector: Arc<dyn SelectToken>, mode: Mode) -> Settings {
        Settings { selector, mode, purpose: Arc::default() }
    }
}

impl fmt::Debug for Settings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Settings")
            .field("mode", &self.mode)
            .field("purpose", &self.purpose)
            .finish_non_exhaustive()
    }
}

impl fmt::Debug for RobotsLayer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsLayer")
            .field("mode", &self.shared.settings.load().mode)
            .field("scheme", &self.shared.scheme)
            .field("audit", &self.shared.audit.is_some())
            .finish_non_exhaustive()
    }
}

impl RobotsLayer {
    /// A layer checking every request for the fixed product `token`.
    pub fn new(policy: RobotsPolicy, token: impl Into<Arc<str>>) -> RobotsLayer {
        RobotsLayer {
            shared: Arc::new(Shared {
                policy,
                settings: ArcSwap::from_pointee(Settings::new(
                    Arc::new(TokenSelector::Fixed(token.into())),
                    Mode::Enforce,
                )),
                scheme: Scheme::Http,
                audit: None,
                admission: None,
                observer: None,
                user_agent: None,
                answer_outages: false,
                decision_in_response: true,
                transport: None,
                ids: RequestIds::new(),
                pacer: None,
                #[cfg(feature = "cluster")]
                cluster: None,
                signers: None,
            }),
        }
    }

    fn edit(mut self, f: impl FnOnce(&mut Shared)) -> RobotsLayer {
        match Arc::get_mut(&mut self.shared) {
            Some(s) => f(s),
            None => {
                let s = &*self.shared;
                let mut copy = Shared {
                    policy: s.policy.clone(),
                    settings: ArcSwap::new(s.settings.load_full()),
                    scheme: s.scheme,
                    audit: s.audit.clone(),
                    admission: s.admission.clone(),
                    observer: s.observer.clone(),
                    user_agent: s.user_agent.clone(),
                    answer_outages: s.answer_outages,
                    decision_in_response: s.decision_in_response,
                    transport: s.transport,
                    ids: RequestIds::new(),
                    pacer: s.pacer.clone(),
                    #[cfg(feature = "cluster")]
                    cluster: s.cluster.clone(),
                    signers: s.signers.clone(),
                };
                f(&mut copy);
                self.shared = Arc::new(copy);
            }
        }
        self
    }

    /// Chooses the product token per request.
    pub fn with_selector(self, selector: impl SelectToken) -> RobotsLayer {
        let selector: Arc<dyn SelectToken> = Arc::new(selector);
        self.edit(|s| {
            s.settings.store(Arc::new(Settings { selector, ..Settings::clone(&s.settings.load()) }))
        })
    }

    /// Enforce (default) or report only.
    pub fn with_mode(self, mode: Mode) -> RobotsLayer {
        self.edit(|s| s.settings.store(Arc::new(Settings { mode, ..Settings::clone(&s.settings.load()) })))
    }

    /// The requests' purpose (AI-usage preferences: see [`crate::rep::usage`]): a path
    /// robots.txt allows is refused with `403 usage-refused` when the site's preference
    /// for a category of the purpose is "no".
    pub fn with_purpose(self, purpose: PurposeSettings) -> RobotsLayer {
        let purpose = Arc::new(purpose);
        self.edit(|s| s.settings.store(Arc::new(Settings { purpose, ..Settings::clone(&s.settings.load()) })))
    }

    /// Refuses requests whose destination the connector's guard refuses, before any robots
    /// decision (no robots.txt is fetched for them): `403`, logged with the outcome
    /// `destination-denied`.
    pub fn with_admission(self, connector: Connector) -> RobotsLayer {
        self.edit(|s| s.admission = Some(connector))
    }

    /// Paces the requests that may go with `pacer` (see [`pacing`](crate::pacing)):
    /// each is held until its origin's next slot for its product token, or answered `503`
    /// when that is too far off; 429 and 503 answers from an origin pause it.
    pub fn with_pacer(self, pacer: Pacer) -> RobotsLayer {
        self.edit(|s| s.pacer = Some(pacer))
    }

    /// Fleet mode (feature `cluster`): while `cluster`'s Redis cannot be reached, decisions
    /// are recorded as made alone (`"cluster": "alone"`), or, with
    /// `on_error = Refuse`, requests are answered `503` (`cluster-unavailable`). Give the
    /// pacer the same cluster's store ([`Pacer::shared`] with a
    /// `cluster::RedisPaceStore`) for the fleet to share one pace.
    #[cfg(feature = "cluster")]
    pub fn with_cluster(self, cluster: crate::cluster::Cluster) -> RobotsLayer {
        self.edit(|s| s.cluster = Some(cluster))
    }

    /// The pacer, if requests are paced.
    pub fn pacer(&self) -> Option<&Pacer> {
        self.shared.pacer.as_ref()
    }

    /// Tells `observer` about every decision (the proxy counts them in its metrics).
    pub fn with_observer(self, observer: Arc<dyn DecisionObserver>) -> RobotsLayer {
        self.edit(|s| s.observer = Some(observer))
    }

    /// Replaces the token selector and the mode of this layer and every service made from
    /// it, for requests that start from now on.
    pub fn reload(&self, settings: Settings) {
        self.shared.settings.store(Arc::new(settings));
    }

    /// Answers an origin that cannot be reached with robotsgate's `502`/`504` (with its
    /// [`Refusal`]) instead of `Err`: what a proxy sends its client; the outcome record then
    /// has that status.
    pub fn answer_outages(self) -> RobotsLayer {
        self.edit(|s| s.answer_outages = true)
    }

    /// Allowed requests' responses go without their [`Decision`] in the extensions (by
    /// default they carry it): for a caller that does not read it, such as a proxy, one
    /// allocation and its map less per request. Refusals carry theirs in the
    /// [`Refusal`] either way, and observers and the audit log see every decision.
    pub fn without_decision_in_response(self) -> RobotsLayer {
        self.edit(|s| s.decision_in_response = false)
    }

    /// How requests without a [`Transport`] in their extensions arrived (the proxy's
    /// absolute-form requests: one setting instead of an extension on every request).
    pub fn with_transport(self, transport: Transport) -> RobotsLayer {
        self.edit(|s| s.transport = Some(transport))
    }

    /// Decide and log, never block.
    pub fn report_only(self) -> RobotsLayer {
        self.with_mode(Mode::ReportOnly)
    }

    /// The mode in force (it changes with [`RobotsLayer::reload`]).
    ///
    /// ```
    /// use robotsgate::layer::Mode;
    ///
    /// let robots = robotsgate::Robots::builder().agent("ExampleBot").build()?;
    /// assert_eq!(robots.layer().mode(), Mode::Enforce);
    /// assert_eq!(robots.layer().report_only().mode(), Mode::ReportOnly);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn mode(&self) -> Mode {
        self.shared.settings.load().mode
    }

    /// The scheme of requests in origin form (`GET /x` with a `Host` header); http by
    /// default.
    pub fn with_scheme(self, scheme: Scheme) -> RobotsLayer {
        self.edit(|s| s.scheme = scheme)
    }

    /// Writes the record of an answer its user gave itself before the layer saw the
    /// request (a proxy's `400` for a request it cannot read, `407`, `431`, ...), to the
    /// layer's audit log, with a request id from the layer's series (see
    /// [`AuditLog::log_refusal`]) unless `facts` gives one (a tunnel refused after its
    /// response, keyed by its decision's id: [`Tally::request_id`]); nothing without an
    /// audit log (or with [`Mode::Off`]).
    pub fn log_refusal(&self, refusal: &Refusal, facts: crate::audit::RefusalFacts<'_>) {
        let Some(audit) = &self.shared.audit else { return };
        if self.shared.settings.load().mode == Mode::Off {
            return;
        }
        let transport = facts.transport.or(self.shared.transport.map(Transport::as_str));
        if !facts.request_id.is_empty() {
            // A refusal of a request whose decision was recorded (a tunnel refused after
            // its response): keyed by that request's id.
            return audit.log_refusal(refusal, crate::audit::RefusalFacts { transport, ..facts });
        }
        let id = self.shared.ids.next();
        audit
            .log_refusal(refusal, crate::audit::RefusalFacts { request_id: id.as_str(), transport, ..facts });
    }

    /// Signs every request that goes with Web Bot Auth (`Signature-Agent`,
    /// `Signature-Input`, `Signature`, replacing any the client sent), after its wait for
    /// the origin's slot; in [`Mode::Off`] too. A `CONNECT` is not signed (what goes
    /// through a tunnel is not seen); the audit record's `signed` says which were.
    pub fn with_signer(self, signer: Arc<RequestSigner>) -> RobotsLayer {
        self.with_signers(Signers::new(Some(signer)))
    }

    /// [`with_signer`](RobotsLayer::with_signer), one signer per proxy user or product
    /// token ([`Signers`]: the user's, else the token's, else the default). A request no
    /// signer applies to goes unsigned (its record says `"signed": false`).
    pub fn with_signers(self, signers: Signers) -> RobotsLayer {
        let signers = (!signers.is_empty()).then(|| Arc::new(signers));
        self.edit(|s| s.signers = signers)
    }

    /// The default signer, if there is one.
    pub fn signer(&self) -> Option<&Arc<RequestSigner>> {
        self.shared.signers.as_ref().and_then(|s| s.default_signer())
    }

    /// The signers, if requests are signed.
    pub fn signers(&self) -> Option<&Arc<Signers>> {
        self.shared.signers.as_ref()
    }

    /// Writes every decision to `audit`.
    pub fn with_audit(self, audit: AuditLog) -> RobotsLayer {
        self.edit(|s| s.audit = Some(audit))
    }

    /// Sets this `User-Agent` on forwarded requests that have none (the crawler's
    /// identity; a request's own `User-Agent` is kept).
    pub fn with_user_agent(self, user_agent: HeaderValue) -> RobotsLayer {
        self.edit(|s| s.user_agent = Some(user_agent))
    }

    /// Decides one request without sending it: `Ok` with the decision when it may go
    /// (in report-only mode, always), else the [`Refusal`]. The request's parts may be
    /// changed as they are before forwarding (a token selector may remove the header that
    /// carried the token; the `User-Agent` is set when absent). The decision is audited
    /// as for a request through the layer.
    ///
    /// With a pacer, the request is also held until its slot (or refused with
    /// [`RefusalKind::Paced`]), but its answer is not reported:
    /// [`RobotsLayer::admit`] does that.
    pub async fn decide(&self, parts: &mut http::request::Parts) -> Result<Decision, Refusal> {
        self.admit(parts).await.map(|(decision, _)| decision)
    }

    /// [`RobotsLayer::decide`] for a request the caller sends itself, paced: `Ok` when it
    /// may go now, with the ticket to give its answer to ([`PaceTicket::answered`]: a 429
    /// or 503 pauses the origin, and a concurrency cap counts the request until then).
    pub async fn admit(
        &self,
        parts: &mut http::request::Parts,
    ) -> Result<(Decision, Option<PaceTicket>), Refusal> {
        let mut logged = None;
        let settings = self.shared.settings.load_full();
        let admitted =
            self.shared.check(parts, settings, None, std::time::Instant::now(), &mut logged).await?;
        // The record id a later check_response refers to (requests with a purpose).
        if let (Some(id), Some(_)) = (&logged, &admitted.decision.usage) {
            parts.extensions.insert(decide::AuditRequestId(id.as_str().into()));
        }
        self.shared.identify(parts);
        let ticket = match (admitted.ticket, &self.shared.pacer) {
            (Some(t), _) => Some(t),
            (None, Some(p)) if p.enabled() => {
                Some(p.ticket(&admitted.decision.origin, &admitted.decision.agent, admitted.decided))
            }
            (None, _) => None,
        };
        Ok((admitted.decision, ticket))
    }

    /// For a request [`decide`](RobotsLayer::decide)d with a purpose: reads its response's
    /// `Content-Usage`, `Content-Signal` and `X-Robots-Tag` headers, logs them, and returns
    /// the refusal that replaces the response when [`PurposeSettings::enforce_response`]
    /// is on and they say no for the purpose (else what they said, if anything). `parts`
    /// are the request's parts after `decide`; `url` is logged.
    pub async fn check_response(
        &self,
        parts: &http::request::Parts,
        decision: &Decision,
        status: http::StatusCode,
        headers: &http::HeaderMap,
        url: &str,
    ) -> Result<Option<ResponseUsage>, Refusal> {
        let id = parts.extensions.get::<decide::AuditRequestId>().cloned();
        self.shared.response_usage(headers, status.as_u16(), decision, id, || url.to_owned()).await
    }
}

impl<S> Layer<S> for RobotsLayer {
    type Service = RobotsService<S>;

    fn layer(&self, inner: S) -> RobotsService<S> {
        RobotsService { inner, shared: self.shared.clone(), client: None }
    }
}
