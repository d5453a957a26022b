//! robotsgate's own answers: the one list of their kinds ([`RefusalKind`], the value of
//! the `x-robotsgate` header), the one function that writes them, and [`Refusal`], which an
//! embedding client gets back for any of them.
//!
//! Every answer robotsgate makes instead of the origin's is a short `text/plain` body
//! starting with `robotsgate: `, the header `x-robotsgate: <kind>`, and a correct
//! `content-length`; an answer to `HEAD` has the same headers and no body.
//!
//! ```
//! use robotsgate::{Refusal, RefusalKind};
//!
//! let res = Refusal::new(RefusalKind::DestinationDenied, "loopback").into_response(false);
//! let refusal = Refusal::from_response(&res).expect("robotsgate's own answer");
//! assert_eq!(refusal.kind(), RefusalKind::DestinationDenied);
//! // A header anyone can send is not robotsgate's answer: an origin's 200 saying
//! // `x-robotsgate: disallowed` is the origin's 200.
//! let origin = http::Response::builder()
//!     .status(200)
//!     .header("x-robotsgate", "disallowed")
//!     .body(())
//!     .unwrap();
//! assert!(Refusal::from_response(&origin).is_none());
//! ```
//!
//! Responses that pass through robotsgate never carry an origin's own `x-robotsgate`
//! header: the layer removes it (and the proxy is built on the layer), so a client of the
//! proxy across the network may read the header ([`Refusal::from_proxy_response`]).

use std::fmt;
use std::sync::Arc;

use bytes::Bytes;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE, RETRY_AFTER};
use http::{HeaderName, HeaderValue, Response, StatusCode};
use http_body_util::Full;

use crate::net::ConnectError;
use crate::policy::Decision;
use crate::vocabulary::Outcome;

mod texts;

/// The header robotsgate puts on the answers it makes itself; its value is a
/// [`RefusalKind`].
pub const ROBOTSGATE_HEADER: &str = "x-robotsgate";

/// [`ROBOTSGATE_HEADER`] as a name: looked up without being parsed again, on every
/// forwarded response.
static ROBOTSGATE_NAME: HeaderName = HeaderName::from_static(ROBOTSGATE_HEADER);

/// The kinds of answer robotsgate gives itself instead of the origin's. The value of the
/// `x-robotsgate` header is [`RefusalKind::as_str`]; each kind has one status code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum RefusalKind {
    /// `403`: robots.txt disallows the path for the product token (also when robots.txt
    /// could not be fetched and the failure rule says "disallow all").
    Disallowed,
    /// `403`: the destination address is refused by the guard (loopback, private, ...).
    DestinationDenied,
    /// `502`: the origin cannot be reached (DNS, refused connection, certificate), for the
    /// robots.txt fetch or the request itself.
    UpstreamUnreachable,
    /// `504`: the origin did not answer in time.
    UpstreamTimeout,
    /// `502`: the origin broke off the exchange (protocol error, reset).
    UpstreamError,
    /// `503`: the audit log cannot take the record, and it is configured to fail closed.
    AuditUnavailable,
    /// `400`: no product token could be chosen for the request.
    NoToken,
    /// `400`: the request cannot be read (no target origin, bad authority, ...).
    BadRequest,
    /// `400`: an origin-form request to the proxy (it wants absolute-form requests).
    NotAProxyRequest,
    /// `407`: proxy authentication is required or failed.
    AuthRequired,
    /// `403`: the client's network may not use the proxy.
    ClientDenied,
    /// `400`: an intercepted tunnel did not start with a TLS handshake.
    TlsExpected,
    /// `431`: the request head is larger than the proxy accepts.
    HeaderTooLarge,
    /// `503` with `Retry-After`: the request would have to wait for its origin's next slot
    /// longer than pacing allows (`pacing.max_wait`), or too many requests are held for
    /// the origin already; it was not sent.
    Paced,
    /// `503`: fleet mode's Redis cannot be reached and `cluster.on_error` is `refuse`: the
    /// fleet's pacing cannot be kept, so nothing is sent.
    ClusterUnavailable,
    /// `403`: robots.txt allows the path, but the site's AI-usage preferences
    /// (`Content-Usage`, `Content-Signal`; or, on a response, `X-Robots-Tag`) say no for the
    /// purpose the request is made for.
    UsageRefused,
}

impl RefusalKind {
    /// Every kind, in a stable order.
    pub const ALL: [RefusalKind; 16] = [
        RefusalKind::Disallowed,
        RefusalKind::DestinationDenied,
        RefusalKind::UpstreamUnreachable,
        RefusalKind::UpstreamTimeout,
        RefusalKind::UpstreamError,
        RefusalKind::AuditUnavailable,
        RefusalKind::NoToken,
        RefusalKind::BadRequest,
        RefusalKind::NotAProxyRequest,
        RefusalKind::AuthRequired,
        RefusalKind::ClientDenied,
        RefusalKind::TlsExpected,
        RefusalKind::HeaderTooLarge,
        RefusalKind::Paced,
        RefusalKind::ClusterUnavailable,
        RefusalKind::UsageRefused,
    ];

    /// The value of the `x-robotsgate` header.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalKind::Disallowed => "disallowed",
            RefusalKind::DestinationDenied => "destination-denied",
            RefusalKind::UpstreamUnreachable => "upstream-unreachable",
            RefusalKind::UpstreamTimeout => "upstream-timeout",
            RefusalKind::UpstreamError => "upstream-error",
            RefusalKind::AuditUnavailable => "audit-unavailable",
            RefusalKind::NoToken => "no-token",
            RefusalKind::BadRequest => "bad-request",
            RefusalKind::NotAProxyRequest => "not-a-proxy-request",
            RefusalKind::AuthRequired => "auth-required",
            RefusalKind::ClientDenied => "client-denied",
            RefusalKind::TlsExpected => "tls-expected",
            RefusalKind::HeaderTooLarge => "header-too-large",
            RefusalKind::Paced => "paced",
            RefusalKind::ClusterUnavailable => "cluster-unavailable",
            RefusalKind::UsageRefused => "usage-refused",
        }
    }

    /// The kind named by an `x-robotsgate` header value.
    pub fn from_header(value: &[u8]) -> Option<RefusalKind> {
        RefusalKind::ALL.into_iter().find(|k| k.as_str().as_bytes() == value)
    }

    /// The status code robotsgate answers with.
    pub fn status(self) -> StatusCode {
        match self {
            RefusalKind::Disallowed
            | RefusalKind::DestinationDenied
            | RefusalKind::ClientDenied
            | RefusalKind::UsageRefused => StatusCode::FORBIDDEN,
            RefusalKind::UpstreamUnreachable | RefusalKind::UpstreamError => StatusCode::BAD_GATEWAY,
            RefusalKind::UpstreamTimeout => StatusCode::GATEWAY_TIMEOUT,
            RefusalKind::AuditUnavailable | RefusalKind::Paced | RefusalKind::ClusterUnavailable => {
                StatusCode::SERVICE_UNAVAILABLE
            }
            RefusalKind::NoToken
            | RefusalKind::BadRequest
            | RefusalKind::NotAProxyRequest
            | RefusalKind::TlsExpected => StatusCode::BAD_REQUEST,
            RefusalKind::AuthRequired => StatusCode::PROXY_AUTHENTICATION_REQUIRED,
            RefusalKind::HeaderTooLarge => StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
        }
    }

    /// The kind for a failed outbound connection: refused destination, timeout, or
    /// unreachable.
    pub fn of_connect_error(e: &ConnectError) -> RefusalKind {
        match e {
            ConnectError::Denied { .. } => RefusalKind::DestinationDenied,
            ConnectError::Timeout { .. } => RefusalKind::UpstreamTimeout,
            _ => RefusalKind::UpstreamUnreachable,
        }
    }
}

impl Outcome {
    /// The kind of robotsgate's answer (the value of its `x-robotsgate` header) when the
    /// request was refused with one of the [`RefusalKind`]s; the name is the same.
    pub fn refusal(self) -> Option<RefusalKind> {
        match self {
            Outcome::Disallowed => Some(RefusalKind::Disallowed),
            Outcome::UsageRefused => Some(RefusalKind::UsageRefused),
            Outcome::DestinationDenied => Some(RefusalKind::DestinationDenied),
            Outcome::Paced => Some(RefusalKind::Paced),
            Outcome::ClusterUnavailable => Some(RefusalKind::ClusterUnavailable),
            _ => None,
        }
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An answer robotsgate gave instead of the origin's: its kind, the text it said, and the
/// robots.txt [`Decision`] behind it when there was one (a disallowed path, a refused
/// destination, an unreachable robots.txt).
///
/// A tower client finds it in the extensions of the response robotsgate made
/// ([`Refusal::from_response`]); a client of the proxy across the network reads the
/// `x-robotsgate` header ([`Refusal::from_proxy_response`]); the reqwest adapter returns it
/// as the error's source.
#[derive(Debug, Clone)]
pub struct Refusal {
    kind: RefusalKind,
    message: Arc<str>,
    decision: Option<Arc<Decision>>,
    retry_after: Option<u64>,
}

impl Refusal {
    /// A refusal of `kind` saying `message`.
    pub fn new(kind: RefusalKind, message: impl Into<Arc<str>>) -> Refusal {
        Refusal { kind, message: message.into(), decision: None, retry_after: None }
    }

    /// `502` for an origin that broke off the exchange (protocol error, reset, closed
    /// early): "the origin failed: " and the error with its sources.
    pub fn upstream_failed(e: &(dyn std::error::Error + 'static)) -> Refusal {
        Refusal::new(RefusalKind::UpstreamError, format!("the origin failed: {}", crate::net::error_chain(e)))
    }

    /// The same refusal, telling the client when to try again (`Retry-After`, in whole
    /// seconds, rounded up, at least 1).
    pub fn with_retry_after(mut self, wait: std::time::Duration) -> Refusal {
        self.retry_after = Some(crate::pacing::retry_after_secs(wait));
        self
    }

    /// When to try again, in seconds (`Retry-After`), when the answer says.
    pub fn retry_after(&self) -> Option<u64> {
        self.retry_after
    }

    /// The same refusal with the decision behind it.
    pub fn with_decision(mut self, decision: Decision) -> Refusal {
        self.decision = Some(Arc::new(decision));
        self
    }

    /// What kind of answer it was.
    pub fn kind(&self) -> RefusalKind {
        self.kind
    }

    /// The status code of the answer.
    pub fn status(&self) -> StatusCode {
        self.kind.status()
    }

    /// Whether it says the origin cannot be reached (unreachable or timed out), which a
    /// client sees as an error rather than an answer.
    pub fn is_outage(&self) -> bool {
        matches!(self.kind, RefusalKind::UpstreamUnreachable | RefusalKind::UpstreamTimeout)
    }

    /// What robotsgate said (the body without the `robotsgate: ` prefix).
    pub fn message(&self) -> &str {
        &self.message
    }

    /// The robots.txt decision behind the answer, if one was made: the URL's origin, the
    /// product token, the rule and line, the robots.txt copy's SHA-256.
    pub fn decision(&self) -> Option<&Decision> {
        self.decision.as_deref()
    }

    /// The refusal a response carries, when robotsgate made the response in this process
    /// (the refusal is in its extensions: nobody outside the process can put it there).
    /// `None` for the origin's own answers, whatever headers they carry.
    pub fn from_response<B>(res: &Response<B>) -> Option<Refusal> {
        res.extensions().get::<Refusal>().cloned()
    }

    /// The refusal a response carries, for a client that received it **through a
    /// robotsgate proxy** across the network: robotsgate's answers are recognised by their
    /// `x-robotsgate` header, which the proxy removes from every origin response, so only
    /// robotsgate's own answers reach such a client with it. The message is then the
    /// header's kind (read the body for the text). Falls back to
    /// [`Refusal::from_response`] when the response was made in this process.
    ///
    /// Do not use it on responses that did not come through robotsgate: there the header
    /// is whatever the sender chose to write.
    pub fn from_proxy_response<B>(res: &Response<B>) -> Option<Refusal> {
        if let Some(r) = Refusal::from_response(res) {
            return Some(r);
        }
        let kind = RefusalKind::from_header(res.headers().get(ROBOTSGATE_HEADER)?.as_bytes())?;
        let retry_after = res
            .headers()
            .get(RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<u64>().ok());
        Some(Refusal { kind, message: kind.as_str().into(), decision: None, retry_after })
    }

    /// Removes an `x-robotsgate` header that robotsgate did not write (the response has no
    /// [`Refusal`] in its extensions): an origin must not pass for robotsgate. Costs one
    /// extension lookup and one header lookup.
    pub(crate) fn disown<B>(res: &mut Response<B>) {
        if res.extensions().get::<Refusal>().is_none() && res.headers().contains_key(&ROBOTSGATE_NAME) {
            res.headers_mut().remove(&ROBOTSGATE_NAME);
        }
    }

    /// robotsgate's answer for this refusal: the status of its kind, `text/plain`, the
    /// `x-robotsgate` header, the body `robotsgate: <message>` (none for `HEAD`, with the
    /// `content-length` a `GET` would have), and the refusal and its decision in the
    /// response's extensions. The one place such answers are written.
    pub fn into_response(self, head: bool) -> Response<Full<Bytes>> {
        let mut body = String::with_capacity(self.message.len() + 13);
        body.push_str("robotsgate: ");
        body.push_str(&self.message);
        if !body.ends_with('\n') {
            body.push('\n');
        }
        let len = body.len();
        let mut res = Response::new(Full::new(if head { Bytes::new() } else { Bytes::from(body) }));
        *res.status_mut() = self.kind.status();
        let h = res.headers_mut();
        h.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
        h.insert(CONTENT_LENGTH, HeaderValue::from(len));
        h.insert(ROBOTSGATE_HEADER, HeaderValue::from_static(self.kind.as_str()));
        if let Some(secs) = self.retry_after {
            h.insert(RETRY_AFTER, HeaderValue::from(secs));
        }
        if let Some(d) = &self.decision {
            res.extensions_mut().insert(Decision::clone(d));
        }
        res.extensions_mut().insert(self);
        res
    }

    /// The same answer as raw HTTP/1.1 bytes with `connection: close`, for the places that
    /// answer on a socket before any HTTP server runs (a refused client network, a tunnel
    /// that should have started with TLS).
    pub fn to_http1_bytes(&self) -> Vec<u8> {
        self.to_http1_bytes_with(false, &[])
    }

    /// [`Refusal::to_http1_bytes`] for a `HEAD` request when `head` (the same headers, no
    /// body), with `extra` header lines (e.g. the proxy's `Via`).
    pub fn to_http1_bytes_with(&self, head: bool, extra: &[(&str, &HeaderValue)]) -> Vec<u8> {
        let status = self.kind.status();
        let body = format!("robotsgate: {}\n", self.message.trim_end_matches('\n'));
        let retry_after = self.retry_after.map_or_else(String::new, |s| format!("retry-after: {s}\r\n"));
        let mut out = format!(
            "HTTP/1.1 {} {}\r\ncontent-type: text/plain; charset=utf-8\r\n{ROBOTSGATE_HEADER}: {}\r\n\
             {retry_after}connection: close\r\ncontent-length: {}\r\n",
            status.as_u16(),
            status.canonical_reason().unwrap_or(""),
            self.kind.as_str(),
            body.len()
        )
        .into_bytes();
        for (name, value) in extra {
            out.extend_from_slice(name.as_bytes());
            out.extend_from_slice(b": ");
            out.extend_from_slice(value.as_bytes());
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        if !head {
            out.extend_from_slice(body.as_bytes());
        }
        out
    }
}

impl fmt::Display for Refusal {
    /// One line: `robotsgate: disallowed by http://example.com/robots.txt: line 2:
    /// disallow: /private`, or the kind and the first line of the message.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.decision {
            Some(d) if self.kind == RefusalKind::Disallowed => {
                write!(f, "robotsgate: disallowed by {}: {d}", d.origin.robots_url())
            }
            Some(d) if self.kind == RefusalKind::UsageRefused && d.usage.is_some() => {
                let usage = d.usage.as_deref().map(|u| u.to_string()).unwrap_or_default();
                write!(f, "robotsgate: usage refused by {}: {usage}", d.origin.robots_url())
            }
            // Pacing, not robots.txt, refused it: the decision (allowed) is not the why.
            Some(d) if self.kind != RefusalKind::Paced => write!(f, "robotsgate: {}: {d}", self.kind),
            _ => {
                write!(f, "robotsgate: {}: {}", self.kind, self.message.lines().next().unwrap_or(""))?;
                match self.retry_after {
                    Some(secs) => write!(f, " (retry after {secs} s)"),
                    None => Ok(()),
                }
            }
        }
    }
}

impl std::error::Error for Refusal {}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    #[test]
    fn every_kind_round_trips_through_its_header() {
        for kind in RefusalKind::ALL {
            assert_eq!(RefusalKind::from_header(kind.as_str().as_bytes()), Some(kind));
            let res = Refusal::new(kind, "why").into_response(false);
            assert_eq!(res.status(), kind.status());
            assert_eq!(Refusal::from_response(&res).map(|r| r.kind()), Some(kind));
            let bare = Response::builder()
                .header(ROBOTSGATE_HEADER, res.headers()[ROBOTSGATE_HEADER].clone())
                .body(())
                .unwrap();
            assert!(Refusal::from_response(&bare).is_none(), "a bare header is anyone's");
            assert_eq!(Refusal::from_proxy_response(&bare).map(|r| r.kind()), Some(kind));
        }
        assert_eq!(RefusalKind::from_header(b"something-else"), None);
    }

    #[tokio::test]
    async fn head_answers_have_the_length_and_no_body() {
        let get = Refusal::new(RefusalKind::Disallowed, "no").into_response(false);
        let head = Refusal::new(RefusalKind::Disallowed, "no").into_response(true);
        assert_eq!(get.headers()[CONTENT_LENGTH], head.headers()[CONTENT_LENGTH]);
        let get_body = get.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(&get_body[..], b"robotsgate: no\n");
        assert_eq!(head.headers()[CONTENT_LENGTH], get_body.len().to_string().as_str());
        assert!(head.into_body().collect().await.unwrap().to_bytes().is_empty());
    }

    #[test]
    fn paced_answers_say_when_to_try_again() {
        let refusal = Refusal::new(RefusalKind::Paced, "wait")
            .with_retry_after(std::time::Duration::from_millis(41_200));
        assert_eq!(refusal.retry_after(), Some(42));
        let res = refusal.clone().into_response(false);
        assert_eq!(res.status(), StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(res.headers()[RETRY_AFTER], "42");
        assert_eq!(res.headers()[ROBOTSGATE_HEADER], "paced");
        let bare = Response::builder()
            .header(ROBOTSGATE_HEADER, "paced")
            .header(RETRY_AFTER, "42")
            .body(())
            .unwrap();
        assert_eq!(Refusal::from_proxy_response(&bare).and_then(|r| r.retry_after()), Some(42));
        let raw = String::from_utf8(refusal.to_http1_bytes()).unwrap();
        assert!(raw.starts_with("HTTP/1.1 503 Service Unavailable\r\n"), "{raw}");
        assert!(raw.contains("\r\nretry-after: 42\r\n"), "{raw}");
    }

    /// Issue 31.5: a paced refusal says pacing refused it, not the allowed decision's
    /// "no rule matched".
    #[test]
    fn a_paced_refusal_reads_as_paced() {
        let decision = crate::policy::Decision::without_robots(
            Arc::new(crate::origin::Origin::parse("https://example.com/").unwrap()),
            "ExampleBot".into(),
            crate::rep::Profile::Google,
            crate::policy::Reason::NoRuleMatched,
            true,
        );
        let refusal = Refusal::new(RefusalKind::Paced, "request not sent: it would wait too long\nURL: x")
            .with_retry_after(std::time::Duration::from_secs(9))
            .with_decision(decision);
        let text = refusal.to_string();
        assert_eq!(text, "robotsgate: paced: request not sent: it would wait too long (retry after 9 s)");
        assert!(!text.contains("no rule matched"), "{text}");
    }

    #[test]
    fn an_origin_header_is_removed_and_robotsgates_own_kept() {
        let mut origin =
            Response::builder().status(200).header(ROBOTSGATE_HEADER, "disallowed").body(()).unwrap();
        Refusal::disown(&mut origin);
        assert!(origin.headers().get(ROBOTSGATE_HEADER).is_none());
        assert!(Refusal::from_proxy_response(&origin).is_none());
        let mut own = Refusal::new(RefusalKind::Disallowed, "no").into_response(false);
        Refusal::disown(&mut own);
        assert_eq!(own.headers()[ROBOTSGATE_HEADER], "disallowed");
    }

    #[test]
    fn raw_answers_are_complete_http1_messages() {
        let raw =
            Refusal::new(RefusalKind::ClientDenied, "your network may not use this proxy").to_http1_bytes();
        let text = String::from_utf8(raw).unwrap();
        let (head, body) = text.split_once("\r\n\r\n").unwrap();
        assert!(head.starts_with("HTTP/1.1 403 Forbidden\r\n"), "{head}");
        assert!(head.contains("\r\nx-robotsgate: client-denied\r\n"), "{head}");
        assert!(head.contains(&format!("\r\ncontent-length: {}", body.len())), "{head}");
        assert_eq!(body, "robotsgate: your network may not use this proxy\n");

        let via = HeaderValue::from_static("1.1 robotsgate");
        let refusal = Refusal::new(RefusalKind::HeaderTooLarge, "too big");
        let head = String::from_utf8(refusal.to_http1_bytes_with(true, &[("via", &via)])).unwrap();
        let get = String::from_utf8(refusal.to_http1_bytes_with(false, &[("via", &via)])).unwrap();
        assert!(head.ends_with("\r\nvia: 1.1 robotsgate\r\n\r\n"), "{head}");
        assert_eq!(get.strip_prefix(head.as_str()), Some("robotsgate: too big\n"), "{get}");
        assert!(head.starts_with("HTTP/1.1 431 Request Header Fields Too Large\r\n"), "{head}");
    }
}
