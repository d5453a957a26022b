//! The reqwest adapter (feature `reqwest`): [`RobotsMiddleware`], a
//! [`reqwest_middleware::Middleware`] that checks every request, and every redirect hop,
//! before it touches the network.
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
//! let robots = robotsgate::Robots::builder()
//!     .agent("ExampleBot")
//!     .user_agent("ExampleBot/1.0 (+https://example.com/bot)")
//!     .build()?;
//! // The client with the middleware, its redirects followed (and each hop checked) by the
//! // middleware, not by reqwest: set up the reqwest::ClientBuilder as you like.
//! let http = robots.reqwest_client(reqwest::Client::builder())?;
//!
//! match http.get("https://example.com/private/x").send().await {
//!     Ok(res) => println!("{}", res.status()),
//!     Err(reqwest_middleware::Error::Middleware(e)) => match e.downcast_ref::<robotsgate::Refusal>() {
//!         Some(refusal) => println!("not fetched: {refusal}"), // with the Decision: rule, line, SHA-256
//!         None => println!("{e}"),
//!     },
//!     Err(e) => println!("{e}"),
//! }
//! # Ok(())
//! # }
//! ```
//!
//! What a call returns:
//! - **Allowed**: the response, with the [`Decision`] in its extensions
//!   (`res.extensions().get::<robotsgate::policy::Decision>()`).
//! - **Refused** (disallowed by robots.txt, a refused destination, robots.txt unreachable
//!   because the origin is, the site's AI-usage preferences refusing the purpose set with
//!   [`RobotsBuilder::purpose`](crate::RobotsBuilder::purpose) — also, with
//!   `enforce_response`, on the response's headers, whose body is then not read, ...): `Err(reqwest_middleware::Error::Middleware(e))` where
//!   `e.downcast_ref::<Refusal>()` gives the [`Refusal`] and its [`Decision`]; nothing was
//!   sent. (Through the tower layer the same refusals are robotsgate's `403`/`400`
//!   answers, and an unreachable origin is an `Err` there too.)
//! - **Paced**: each request (and hop) is held until its origin's next slot, as through
//!   the layer; one that would wait too long is refused with
//!   [`RefusalKind::Paced`] and
//!   [`Refusal::retry_after`]. A 429 or 503 answer pauses the origin.
//! - **Redirects**: with the client built by [`Robots::reqwest_client`] (or with
//!   `redirect::Policy::none()` by hand), the middleware
//!   follows `301`, `302`, `303`, `307` and `308` itself, up to
//!   [`RobotsMiddleware::max_redirects`] hops, checking each hop before it is sent (a hop
//!   into a disallowed path is refused like any request). It changes the method and drops
//!   the body as browsers do (`303`, and `301`/`302` after a `POST`), keeps them for
//!   `307`/`308` when the body can be sent again, and drops credentials and cookies when a
//!   hop leaves the origin. A client that follows redirects by itself would fetch hops
//!   robotsgate never saw: such a response is not returned; the call fails with
//!   [`RedirectError::ClientFollowsRedirects`], which says how to fix the client.

use std::fmt;

use http::header::{
    AUTHORIZATION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_TYPE, COOKIE, LOCATION, PROXY_AUTHORIZATION,
    TRANSFER_ENCODING, WWW_AUTHENTICATE,
};
use http::{Extensions, Method, StatusCode};
use reqwest::{Request, Response, Url};
use reqwest_middleware::{Middleware, Next};

use crate::pacing::PaceTicket;
use crate::policy::Decision;
use crate::refusal::{Refusal, RefusalKind};
use crate::{Robots, RobotsBuilder};

/// Redirect hops followed by default, as reqwest's own default policy.
const DEFAULT_MAX_REDIRECTS: usize = 10;

impl Robots {
    /// The reqwest middleware: checks every request and every redirect hop against
    /// robots.txt before it is sent. Shares this value's cache. See the
    /// [`reqwest`](crate::reqwest) module for how to set up the client.
    pub fn reqwest_middleware(&self) -> RobotsMiddleware {
        RobotsMiddleware { robots: self.clone(), max_redirects: DEFAULT_MAX_REDIRECTS }
    }
}

impl Robots {
    /// A reqwest client with this value's middleware, built from `builder` (your timeouts,
    /// proxies, TLS, `.resolve()`...) with its redirect policy set to
    /// `redirect::Policy::none()`: the middleware follows redirects itself and checks each
    /// hop before it is fetched, which it cannot do when reqwest follows them. The safe
    /// setup in one call; the middleware alone ([`Robots::reqwest_middleware`]) is for
    /// adding other middleware too.
    ///
    /// robots.txt is fetched as this value was built to fetch it (robotsgate's own
    /// connections, or the client given to
    /// [`RobotsBuilder::fetch_with_reqwest`]), not through the client made here: for one
    /// client serving both, so that its `.resolve()` and proxies apply to robots.txt too,
    /// use [`RobotsBuilder::build_reqwest_client`].
    pub fn reqwest_client(
        &self,
        builder: reqwest::ClientBuilder,
    ) -> Result<reqwest_middleware::ClientWithMiddleware, reqwest::Error> {
        let client = builder.redirect(reqwest::redirect::Policy::none()).build()?;
        Ok(reqwest_middleware::ClientBuilder::new(client).with(self.reqwest_middleware()).build())
    }
}

impl RobotsBuilder {
    /// Builds and returns the reqwest middleware at once (see
    /// [`Robots::reqwest_middleware`]). robots.txt is fetched through robotsgate's own
    /// connections unless [`fetch_with_reqwest`](RobotsBuilder::fetch_with_reqwest) gave
    /// a client.
    pub fn build_reqwest_middleware(self) -> Result<RobotsMiddleware, crate::BuildError> {
        Ok(self.build()?.reqwest_middleware())
    }

    /// Fetches robots.txt files through `client`, so that what it is set up with
    /// (`.resolve()`, `.proxy()` and the proxy environment variables, TLS roots, local
    /// address, timeouts) serves them as it serves your requests:
    /// [`fetch_service`](RobotsBuilder::fetch_service) with a `reqwest::Client`, and the
    /// same rules (robotsgate follows the redirects, reads at most 500 KiB, keeps its
    /// timeouts, status classes and evidence; no destination guard or DNS of its own).
    ///
    /// Build `client` with `redirect::Policy::none()` (as the middleware needs anyway): a
    /// robots.txt fetch the client redirected by itself is not used (robotsgate could not
    /// count the hops) and counts as unreachable, with
    /// [`RedirectError::ClientFollowsRedirects`] saying so.
    /// [`build_reqwest_client`](RobotsBuilder::build_reqwest_client) sets it all up in
    /// one call.
    pub fn fetch_with_reqwest(self, client: reqwest::Client) -> Self {
        self.fetch_service(ReqwestFetch(client))
    }

    /// Builds the [`Robots`] and a reqwest client from `builder` (your `.resolve()`,
    /// proxies, TLS, timeouts...) with its redirect policy set to
    /// `redirect::Policy::none()`, one client serving both: your requests, through this
    /// value's middleware (which follows redirects and checks each hop), and the
    /// robots.txt fetches ([`fetch_with_reqwest`](RobotsBuilder::fetch_with_reqwest)).
    ///
    /// ```no_run
    /// # async fn demo() -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
    /// let (robots, http) = robotsgate::Robots::builder()
    ///     .agent("ExampleBot")
    ///     .build_reqwest_client(
    ///         reqwest::Client::builder()
    ///             .resolve("robots.example", "127.0.0.1:8080".parse()?)
    ///             .proxy(reqwest::Proxy::https("http://proxy.corp:3128")?),
    ///     )?;
    /// // robots.txt of robots.example comes through the same client, resolved and
    /// // proxied as the request is.
    /// let res = http.get("http://robots.example:8080/page").send().await?;
    /// # let _ = (robots, res);
    /// # Ok(())
    /// # }
    /// ```
    pub fn build_reqwest_client(
        self,
        builder: reqwest::ClientBuilder,
    ) -> Result<(Robots, reqwest_middleware::ClientWithMiddleware), crate::BuildError> {
        let client = builder
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(crate::BuildError::Reqwest)?;
        let robots = self.fetch_with_reqwest(client.clone()).build()?;
        let http = reqwest_middleware::ClientBuilder::new(client).with(robots.reqwest_middleware()).build();
        Ok((robots, http))
    }
}

/// A `reqwest::Client` as the robots.txt fetcher's transport (see
/// [`RobotsBuilder::fetch_with_reqwest`]).
#[derive(Clone)]
struct ReqwestFetch(reqwest::Client);

type BoxError = Box<dyn std::error::Error + Send + Sync>;

impl tower::Service<http::Request<()>> for ReqwestFetch {
    type Response = http::Response<reqwest::Body>;
    type Error = BoxError;
    type Future =
        std::pin::Pin<Box<dyn std::future::Future<Output = Result<Self::Response, BoxError>> + Send>>;

    fn poll_ready(&mut self, _: &mut std::task::Context<'_>) -> std::task::Poll<Result<(), BoxError>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, req: http::Request<()>) -> Self::Future {
        let client = self.0.clone();
        Box::pin(async move {
            let (parts, ()) = req.into_parts();
            let url = Url::parse(&parts.uri.to_string())?;
            let res = client.request(parts.method, url.clone()).headers(parts.headers).send().await?;
            if res.url() != &url {
                return Err(RedirectError::ClientFollowsRedirects {
                    from: url.to_string(),
                    to: res.url().to_string(),
                }
                .into());
            }
            Ok(http::Response::from(res))
        })
    }
}

/// Checks requests made through a `reqwest_middleware::ClientWithMiddleware`. Made by
/// [`Robots::reqwest_middleware`]; see the [module docs](self).
#[derive(Clone)]
pub struct RobotsMiddleware {
    robots: Robots,
    max_redirects: usize,
}

impl fmt::Debug for RobotsMiddleware {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RobotsMiddleware")
            .field("agent", &self.robots.agent())
            .field("max_redirects", &self.max_redirects)
            .finish()
    }
}

/// Why a redirect could not be followed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum RedirectError {
    /// More hops than [`RobotsMiddleware::max_redirects`].
    #[error("too many redirects (more than {limit}) from {from}")]
    TooMany {
        /// The limit.
        limit: usize,
        /// The URL first asked for.
        from: String,
    },
    /// The reqwest client followed a redirect itself, so robotsgate could not check the
    /// hop before it was fetched; the response is not returned.
    #[error(
        "the reqwest client followed a redirect from {from} to {to} by itself, so robotsgate could not check \
         that hop against robots.txt before it was fetched: build the client with \
         .redirect(reqwest::redirect::Policy::none()); robotsgate's middleware follows redirects and checks each hop"
    )]
    ClientFollowsRedirects {
        /// The URL sent.
        from: String,
        /// The URL the client ended at.
        to: String,
    },
}

impl RobotsMiddleware {
    /// Redirect hops followed per request (default 10); `0` returns every redirect
    /// response as it is.
    pub fn max_redirects(mut self, hops: usize) -> RobotsMiddleware {
        self.max_redirects = hops;
        self
    }

    /// Decides and paces `req`, updating its headers as the layer would before forwarding
    /// (the crawler's `User-Agent` when it has none).
    async fn check(
        &self,
        req: &mut Request,
    ) -> Result<(Decision, Option<PaceTicket>, http::request::Parts), Refusal> {
        let mut url = req.url().clone();
        url.set_fragment(None);
        let uri: http::Uri = url
            .as_str()
            .parse()
            .map_err(|e| Refusal::new(RefusalKind::BadRequest, format!("cannot check {url}: {e}")))?;
        let mut parts = http::Request::builder()
            .method(req.method().clone())
            .uri(uri)
            .body(())
            .map_err(|e| Refusal::new(RefusalKind::BadRequest, e.to_string()))?
            .into_parts()
            .0;
        parts.headers = std::mem::take(req.headers_mut());
        let decided = self.robots.layer().admit(&mut parts).await;
        *req.headers_mut() = std::mem::take(&mut parts.headers);
        decided.map(|(d, ticket)| (d, ticket, parts))
    }
}

#[async_trait::async_trait]
impl Middleware for RobotsMiddleware {
    async fn handle(
        &self,
        mut req: Request,
        extensions: &mut Extensions,
        next: Next<'_>,
    ) -> reqwest_middleware::Result<Response> {
        let first = req.url().to_string();
        let mut hops = 0;
        loop {
            let (decision, ticket, parts) =
                self.check(&mut req).await.map_err(reqwest_middleware::Error::middleware)?;
            let sent = req.url().clone();
            let again = req.try_clone();
            let mut res = next.clone().run(req, extensions).await?;
            // robotsgate's answers are errors here; an origin's `x-robotsgate` header is
            // removed all the same, as everywhere robotsgate passes a response on.
            res.headers_mut().remove(crate::refusal::ROBOTSGATE_HEADER);
            if let Some(ticket) = ticket {
                ticket.answered(res.status(), res.headers());
            }
            if res.url() != &sent {
                return Err(reqwest_middleware::Error::middleware(RedirectError::ClientFollowsRedirects {
                    from: sent.to_string(),
                    to: res.url().to_string(),
                }));
            }
            if decision.usage.is_some() {
                // With a purpose: the response's usage headers, before its body is read.
                let layer = self.robots.layer();
                let checked =
                    layer.check_response(&parts, &decision, res.status(), res.headers(), sent.as_str());
                match checked.await {
                    Ok(Some(found)) => {
                        res.extensions_mut().insert(found);
                    }
                    Ok(None) => {}
                    Err(refusal) => return Err(reqwest_middleware::Error::middleware(refusal)),
                }
            }
            res.extensions_mut().insert(decision);
            let Some(hop) = redirect(&res, &sent, again) else { return Ok(res) };
            if hops >= self.max_redirects {
                if self.max_redirects == 0 {
                    return Ok(res);
                }
                return Err(reqwest_middleware::Error::middleware(RedirectError::TooMany {
                    limit: self.max_redirects,
                    from: first,
                }));
            }
            hops += 1;
            req = hop;
        }
    }
}

/// The next request for a redirect response, or `None` when `res` is not a redirect that
/// can be followed (no or bad `Location`, not http(s), a body that cannot be sent again).
fn redirect(res: &Response, sent: &Url, again: Option<Request>) -> Option<Request> {
    let status = res.status();
    let keep_method = match status {
        StatusCode::MOVED_PERMANENTLY | StatusCode::FOUND | StatusCode::SEE_OTHER => false,
        StatusCode::TEMPORARY_REDIRECT | StatusCode::PERMANENT_REDIRECT => true,
        _ => return None,
    };
    let location = res.headers().get(LOCATION)?.to_str().ok()?;
    let next = sent.join(location).ok()?;
    if !matches!(next.scheme(), "http" | "https") {
        return None;
    }
    let mut req = again?;
    if !keep_method {
        // RFC 9110 §15.4: 303 turns everything but HEAD into GET; 301 and 302 do so for
        // POST, as every browser does.
        let to_get = match status {
            StatusCode::SEE_OTHER => req.method() != Method::HEAD,
            _ => req.method() == Method::POST,
        };
        if to_get {
            *req.method_mut() = Method::GET;
            *req.body_mut() = None;
            for h in [CONTENT_TYPE, CONTENT_LENGTH, CONTENT_ENCODING, TRANSFER_ENCODING] {
                req.headers_mut().remove(h);
            }
        }
    }
    let cross_origin = next.scheme() != sent.scheme()
        || next.host_str() != sent.host_str()
        || next.port_or_known_default() != sent.port_or_known_default();
    if cross_origin {
        for h in [AUTHORIZATION, COOKIE, PROXY_AUTHORIZATION, WWW_AUTHENTICATE] {
            req.headers_mut().remove(h);
        }
        req.headers_mut().remove("cookie2");
    }
    *req.url_mut() = next;
    Some(req)
}
