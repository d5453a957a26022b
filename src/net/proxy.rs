//! [`Proxies`]: the forward proxies outbound connections go through, from the standard
//! environment variables or set explicitly, and the `CONNECT` tunnel through one.
//!
//! See [`Proxies`].

use std::fmt;
use std::sync::Arc;

use base64::Engine as _;
use http::HeaderValue;
use ipnet::IpNet;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::origin::{Host, Origin, Scheme};

/// The forward proxies outbound connections go through. [`Proxies::none`] (the
/// `Default`) connects directly. Cheap to clone.
///
/// Which proxy an origin goes through (the rules of curl and reqwest):
///
/// | origin | proxy (first set, non-empty) |
/// |---|---|
/// | `http://` | `http_proxy`, `HTTP_PROXY` (not under CGI: `REQUEST_METHOD` set), `all_proxy`, `ALL_PROXY` |
/// | `https://` | `https_proxy`, `HTTPS_PROXY`, `all_proxy`, `ALL_PROXY` |
/// | matched by `no_proxy` / `NO_PROXY` | none (a direct connection) |
///
/// `no_proxy` is a comma-separated list: `*` (every origin), a domain (`example.com`,
/// `.example.com` or `*.example.com`: the domain and its subdomains), an IP address or a
/// network (`10.0.0.0/8`, `::1`), each optionally with `:port`.
///
/// A proxy is an `http://host:port` URL (`host:port` alone means `http://`; the port
/// defaults to 80); credentials in it (`http://user:pass@host:port`, percent-encoded) are
/// sent as `Proxy-Authorization: Basic`. Plain-http requests go to the proxy in absolute
/// form; https ones through a `CONNECT` tunnel, then TLS with the origin end to end.
/// `https://` proxies (TLS to the proxy) and SOCKS proxies are not supported: such a
/// value is an error, as is any value that does not parse, never silently ignored.
///
/// ```
/// use robotsgate::net::Proxies;
/// use robotsgate::origin::Origin;
///
/// // As `Proxies::from_env()` reads them, from a map instead of the process environment.
/// let vars = [("HTTPS_PROXY", "http://user:secret@proxy.corp:3128"), ("NO_PROXY", "intranet.corp,10.0.0.0/8")];
/// let proxies = Proxies::from_vars(|name| {
///     vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.to_string())
/// })?;
/// let via = proxies.proxy_for(&Origin::parse("https://example.com/")?).expect("proxied");
/// assert_eq!(via.to_string(), "http://proxy.corp:3128"); // no credentials shown
/// assert!(proxies.proxy_for(&Origin::parse("https://www.intranet.corp/")?).is_none());
/// assert!(proxies.proxy_for(&Origin::parse("http://example.com/")?).is_none()); // no HTTP_PROXY
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Proxies {
    http: Option<Arc<ProxyServer>>,
    https: Option<Arc<ProxyServer>>,
    no_proxy: Vec<NoProxyEntry>,
}

impl fmt::Debug for Proxies {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let shown = |p: &Option<Arc<ProxyServer>>| p.as_ref().map(|p| p.to_string());
        f.debug_struct("Proxies")
            .field("http", &shown(&self.http))
            .field("https", &shown(&self.https))
            .field("no_proxy", &self.no_proxy)
            .finish()
    }
}

/// One forward proxy: where it listens and the credentials sent to it. Shown (`Display`,
/// `Debug`) without the credentials.
#[derive(Clone, PartialEq, Eq)]
pub struct ProxyServer {
    host: Host,
    port: u16,
    authorization: Option<HeaderValue>,
}

impl fmt::Display for ProxyServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "http://{}:{}", self.host, self.port)
    }
}

impl fmt::Debug for ProxyServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyServer")
            .field("url", &self.to_string())
            .field("credentials", &self.authorization.is_some())
            .finish()
    }
}

impl ProxyServer {
    /// Parses a proxy URL (see [`Proxies`]).
    pub fn parse(url: &str) -> Result<ProxyServer, ProxyError> {
        let bad = |reason: &str| ProxyError::Url { url: redact(url), reason: reason.to_owned() };
        let trimmed = url.trim();
        let with_scheme =
            if trimmed.contains("://") { trimmed.to_owned() } else { format!("http://{trimmed}") };
        let parsed = url::Url::parse(&with_scheme).map_err(|e| bad(&e.to_string()))?;
        match parsed.scheme() {
            "http" => {}
            "https" => {
                return Err(bad(
                    "https:// proxies (TLS to the proxy) are not supported; use an http:// proxy \
                                (https origins still get TLS end to end through its CONNECT tunnel)",
                ));
            }
            s if s.starts_with("socks") => {
                return Err(bad("SOCKS proxies are not supported; use an http:// proxy"));
            }
            s => return Err(bad(&format!("unsupported proxy scheme {s:?}; use an http:// proxy"))),
        }
        let host = match parsed.host() {
            Some(url::Host::Domain(d)) => Host::parse(d).map_err(|e| bad(&e.to_string()))?,
            Some(url::Host::Ipv4(ip)) => Host::V4(ip),
            Some(url::Host::Ipv6(ip)) => Host::V6(ip),
            None => return Err(bad("no host")),
        };
        let port = parsed.port().unwrap_or(80);
        let authorization = if parsed.username().is_empty() && parsed.password().is_none() {
            None
        } else {
            let decode = |s: &str| {
                percent_decode(s).ok_or_else(|| bad("the credentials are not valid percent-encoded UTF-8"))
            };
            let user = decode(parsed.username())?;
            let pass = decode(parsed.password().unwrap_or(""))?;
            let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pass}"));
            let mut value = HeaderValue::from_str(&format!("Basic {token}"))
                .map_err(|_| bad("the credentials cannot be sent in a header"))?;
            value.set_sensitive(true);
            Some(value)
        };
        Ok(ProxyServer { host, port, authorization })
    }

    /// The proxy's host.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The proxy's port.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The `Proxy-Authorization` sent to it, when its URL had credentials.
    pub fn authorization(&self) -> Option<&HeaderValue> {
        self.authorization.as_ref()
    }
}

/// One `no_proxy` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
enum NoProxyEntry {
    /// `*`.
    All,
    /// A domain and its subdomains (lower-case, no leading dot).
    Domain(String, Option<u16>),
    /// An address or a network.
    Net(IpNet, Option<u16>),
}

impl NoProxyEntry {
    fn parse(entry: &str) -> Result<NoProxyEntry, ProxyError> {
        let bad = |reason: &str| ProxyError::NoProxy { entry: entry.to_owned(), reason: reason.to_owned() };
        if entry == "*" {
            return Ok(NoProxyEntry::All);
        }
        // `[v6]:port`, `[v6]`, a bare v6 address or network, `host:port`, `host`.
        let (host, port) = if let Some(rest) = entry.strip_prefix('[') {
            let (h, after) = rest.split_once(']').ok_or_else(|| bad("unclosed '['"))?;
            match after {
                "" => (h, None),
                p => (h, Some(p.strip_prefix(':').ok_or_else(|| bad("junk after ']'"))?)),
            }
        } else if entry.matches(':').count() == 1 {
            let (h, p) = entry.split_once(':').unwrap_or((entry, ""));
            (h, Some(p))
        } else {
            (entry, None)
        };
        let port = port.map(|p| p.parse::<u16>().map_err(|_| bad(&format!("bad port {p:?}")))).transpose()?;
        if let Ok(net) = host.parse::<IpNet>() {
            return Ok(NoProxyEntry::Net(net, port));
        }
        if let Ok(ip) = host.parse::<std::net::IpAddr>() {
            return Ok(NoProxyEntry::Net(IpNet::from(ip), port));
        }
        if host.contains('/') {
            return Err(bad("not a network (address/prefix)"));
        }
        let domain = host.trim_start_matches("*.").trim_start_matches('.').trim_end_matches('.');
        match Host::parse(domain) {
            Ok(Host::Domain(d)) => Ok(NoProxyEntry::Domain(d, port)),
            Ok(_) => Err(bad("an address with a wildcard")),
            Err(e) => Err(bad(&e.to_string())),
        }
    }

    fn matches(&self, origin: &Origin) -> bool {
        let port_ok = |p: &Option<u16>| p.is_none_or(|p| p == origin.port());
        match self {
            NoProxyEntry::All => true,
            NoProxyEntry::Domain(d, port) => {
                port_ok(port)
                    && match origin.host() {
                        Host::Domain(h) => {
                            h == d
                                || h.len() > d.len()
                                    && h.ends_with(d.as_str())
                                    && h.as_bytes()[h.len() - d.len() - 1] == b'.'
                        }
                        _ => false,
                    }
            }
            NoProxyEntry::Net(net, port) => {
                port_ok(port) && origin.host().ip().is_some_and(|ip| net.contains(&ip))
            }
        }
    }
}

/// Why proxy settings cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// A proxy URL that does not parse or is not supported.
    #[error("bad proxy URL {url:?}: {reason}")]
    Url {
        /// The URL (credentials replaced by `***`).
        url: String,
        /// Why.
        reason: String,
    },
    /// An environment variable with a bad value (the variable's name, then the reason).
    #[error("{var}: {source}")]
    Var {
        /// The variable.
        var: &'static str,
        /// What is wrong with its value.
        #[source]
        source: Box<ProxyError>,
    },
    /// A `no_proxy` entry that is no domain, address or network.
    #[error("bad no_proxy entry {entry:?}: {reason}")]
    NoProxy {
        /// The entry.
        entry: String,
        /// Why.
        reason: String,
    },
}

impl Proxies {
    /// Direct connections, no proxy.
    pub fn none() -> Proxies {
        Proxies::default()
    }

    /// The proxies the process environment names (see [`Proxies`]); an
    /// invalid value is an error naming the variable.
    pub fn from_env() -> Result<Proxies, ProxyError> {
        Proxies::from_vars(|name| std::env::var(name).ok())
    }

    /// The proxies `var` names, as [`from_env`](Proxies::from_env) reads the environment
    /// (pure: for tests, or a configuration of your own).
    pub fn from_vars(var: impl Fn(&str) -> Option<String>) -> Result<Proxies, ProxyError> {
        let get = |name: &str| var(name).filter(|v| !v.trim().is_empty());
        let cgi = get("REQUEST_METHOD").is_some();
        let pick = |names: &[&'static str]| -> Result<Option<Arc<ProxyServer>>, ProxyError> {
            for &name in names {
                if name == "HTTP_PROXY" && cgi {
                    // httpoxy: under CGI, HTTP_PROXY comes from a request's `Proxy` header.
                    continue;
                }
                if let Some(value) = get(name) {
                    return ProxyServer::parse(&value)
                        .map(|p| Some(Arc::new(p)))
                        .map_err(|e| ProxyError::Var { var: name, source: Box::new(e) });
                }
            }
            Ok(None)
        };
        let http = pick(&["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"])?;
        let https = pick(&["https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"])?;
        let mut proxies = Proxies { http, https, no_proxy: Vec::new() };
        for name in ["no_proxy", "NO_PROXY"] {
            if let Some(list) = get(name) {
                proxies = proxies
                    .no_proxy(&list)
                    .map_err(|e| ProxyError::Var { var: name, source: Box::new(e) })?;
                break;
            }
        }
        Ok(proxies)
    }

    /// `url` is the proxy of `http://` origins.
    pub fn http(mut self, url: &str) -> Result<Proxies, ProxyError> {
        self.http = Some(Arc::new(ProxyServer::parse(url)?));
        Ok(self)
    }

    /// `url` is the proxy of `https://` origins (through `CONNECT`).
    pub fn https(mut self, url: &str) -> Result<Proxies, ProxyError> {
        self.https = Some(Arc::new(ProxyServer::parse(url)?));
        Ok(self)
    }

    /// `url` is the proxy of every origin.
    pub fn all(self, url: &str) -> Result<Proxies, ProxyError> {
        let server = Arc::new(ProxyServer::parse(url)?);
        Ok(Proxies { http: Some(server.clone()), https: Some(server), ..self })
    }

    /// Origins matching an entry of `list` (comma-separated, as `NO_PROXY`) connect
    /// directly; adds to the entries given before.
    pub fn no_proxy(mut self, list: &str) -> Result<Proxies, ProxyError> {
        for entry in list.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            self.no_proxy.push(NoProxyEntry::parse(&entry.to_ascii_lowercase())?);
        }
        Ok(self)
    }

    /// Whether every origin connects directly.
    pub fn is_none(&self) -> bool {
        self.http.is_none() && self.https.is_none()
    }

    /// The proxy `origin`'s connections go through, or `None` for a direct connection.
    pub fn proxy_for(&self, origin: &Origin) -> Option<&ProxyServer> {
        let proxy = match origin.scheme() {
            Scheme::Http => self.http.as_deref(),
            Scheme::Https => self.https.as_deref(),
        }?;
        (!self.no_proxy.iter().any(|e| e.matches(origin))).then_some(proxy)
    }
}

/// `%XX` sequences decoded; `None` when the result is not UTF-8 or a `%` is not followed
/// by two hex digits.
fn percent_decode(s: &str) -> Option<String> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = s.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// A proxy URL as shown in errors: credentials replaced by `***`.
fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://").map_or(Some(("", url)), Some) else {
        return url.to_owned();
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => {
            let prefix = if scheme.is_empty() { String::new() } else { format!("{scheme}://") };
            format!("{prefix}***@{}", &rest[at + 1..])
        }
        None => url.to_owned(),
    }
}

/// Why a `CONNECT` tunnel was not opened.
pub(crate) fn tunnel_error(proxy: &ProxyServer, reason: impl Into<String>) -> super::ConnectError {
    super::ConnectError::Proxy { proxy: proxy.to_string(), reason: reason.into() }
}

/// Largest `CONNECT` response head read.
const MAX_CONNECT_RESPONSE: usize = 8 * 1024;

/// Asks `proxy` (on `tcp`) for a tunnel to `origin`'s host and port: `CONNECT`, then the
/// proxy's answer, whose head must end before anything else arrives (the origin speaks
/// only once the client has). The caller bounds the time.
pub(crate) async fn tunnel(
    tcp: &mut TcpStream,
    proxy: &ProxyServer,
    origin: &Origin,
) -> Result<(), super::ConnectError> {
    let authority = format!("{}:{}", origin.host(), origin.port());
    let mut head = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = &proxy.authorization {
        // A header value built from base64 text: visible ASCII.
        head.push_str("Proxy-Authorization: ");
        head.push_str(&String::from_utf8_lossy(auth.as_bytes()));
        head.push_str("\r\n");
    }
    head.push_str("\r\n");
    tcp.write_all(head.as_bytes()).await.map_err(|e| tunnel_error(proxy, format!("sending CONNECT: {e}")))?;
    let mut buf = Vec::with_capacity(512);
    let mut chunk = [0u8; 512];
    let end = loop {
        let n = tcp
            .read(&mut chunk)
            .await
            .map_err(|e| tunnel_error(proxy, format!("reading its answer: {e}")))?;
        if n == 0 {
            return Err(tunnel_error(proxy, "closed the connection before answering CONNECT"));
        }
        buf.extend_from_slice(&chunk[..n]);
        if let Some(at) = memchr::memmem::find(&buf, b"\r\n\r\n") {
            break at + 4;
        }
        if buf.len() > MAX_CONNECT_RESPONSE {
            return Err(tunnel_error(proxy, "answer to CONNECT longer than 8 KiB"));
        }
    };
    let status_line = buf.split(|&b| b == b'\n').next().unwrap_or_default();
    let status_line = String::from_utf8_lossy(status_line).trim().to_owned();
    let mut words = status_line.split_ascii_whitespace();
    let status = match (words.next(), words.next()) {
        (Some(v), Some(code)) if v.starts_with("HTTP/1.") => code.parse::<u16>().ok(),
        _ => None,
    };
    match status {
        Some(200..=299) if end == buf.len() => Ok(()),
        Some(200..=299) => Err(tunnel_error(proxy, "sent data after its answer to CONNECT")),
        Some(407) => Err(tunnel_error(
            proxy,
            format!(
                "CONNECT {authority}: {status_line} ({})",
                if proxy.authorization.is_some() {
                    "the credentials in the proxy URL were refused"
                } else {
                    "put credentials in the proxy URL: http://user:pass@host:port"
                }
            ),
        )),
        Some(_) => Err(tunnel_error(proxy, format!("CONNECT {authority}: {status_line}"))),
        None => Err(tunnel_error(proxy, format!("not an HTTP answer to CONNECT: {status_line:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vars(pairs: &[(&str, &str)]) -> Result<Proxies, ProxyError> {
        let pairs: Vec<(String, String)> =
            pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Proxies::from_vars(move |name| pairs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone()))
    }

    fn via(p: &Proxies, url: &str) -> Option<String> {
        p.proxy_for(&Origin::parse(url).unwrap()).map(|s| s.to_string())
    }

    #[test]
    fn the_variables_and_their_precedence() {
        let p = vars(&[]).unwrap();
        assert!(p.is_none());
        assert_eq!(via(&p, "https://example.com/"), None);

        let p = vars(&[("HTTPS_PROXY", "http://up:3128"), ("HTTP_PROXY", "plain:8080")]).unwrap();
        assert_eq!(via(&p, "https://example.com/").as_deref(), Some("http://up:3128"));
        assert_eq!(via(&p, "http://example.com/").as_deref(), Some("http://plain:8080"));

        // Lower case first, then upper case, then ALL_PROXY; empty values are unset.
        let p = vars(&[("https_proxy", "http://lower:1"), ("HTTPS_PROXY", "http://upper:2")]).unwrap();
        assert_eq!(via(&p, "https://a.test/").as_deref(), Some("http://lower:1"));
        let p = vars(&[("https_proxy", " "), ("HTTPS_PROXY", "http://upper:2")]).unwrap();
        assert_eq!(via(&p, "https://a.test/").as_deref(), Some("http://upper:2"));
        let p = vars(&[("ALL_PROXY", "http://all:3"), ("http_proxy", "http://h:4")]).unwrap();
        assert_eq!(via(&p, "https://a.test/").as_deref(), Some("http://all:3"));
        assert_eq!(via(&p, "http://a.test/").as_deref(), Some("http://h:4"));

        // httpoxy: under CGI, HTTP_PROXY is a request header, not configuration.
        let p = vars(&[("HTTP_PROXY", "http://evil:1"), ("REQUEST_METHOD", "GET")]).unwrap();
        assert_eq!(via(&p, "http://a.test/"), None);
    }

    #[test]
    fn no_proxy_matches_domains_addresses_networks_and_ports() {
        let p = vars(&[
            ("ALL_PROXY", "http://px:3128"),
            ("no_proxy", "example.com, .corp.test,*.wild.test, 10.0.0.0/8,192.0.2.7,[::1],only.test:8443"),
        ])
        .unwrap();
        for direct in [
            "https://example.com/",
            "https://www.example.com/",
            "http://corp.test/",
            "http://a.b.corp.test/",
            "https://x.wild.test/",
            "http://10.1.2.3/",
            "http://192.0.2.7:8080/",
            "http://[::1]:9/",
            "https://only.test:8443/",
        ] {
            assert_eq!(via(&p, direct), None, "{direct}");
        }
        for proxied in [
            "https://notexample.com/",
            "https://example.com.evil.test/",
            "http://11.0.0.1/",
            "http://192.0.2.8/",
            "https://only.test/",
            "http://[::2]/",
        ] {
            assert!(via(&p, proxied).is_some(), "{proxied}");
        }
        let p = vars(&[("HTTPS_PROXY", "http://px:1"), ("NO_PROXY", "*")]).unwrap();
        assert_eq!(via(&p, "https://any.test/"), None);
        // no_proxy before NO_PROXY.
        let p =
            vars(&[("HTTPS_PROXY", "http://px:1"), ("no_proxy", "a.test"), ("NO_PROXY", "b.test")]).unwrap();
        assert_eq!(via(&p, "https://a.test/"), None);
        assert!(via(&p, "https://b.test/").is_some());
    }

    #[test]
    fn credentials_become_basic_authorization_and_are_never_shown() {
        let p = ProxyServer::parse("http://us%40er:p%3Ass@proxy.test:3128").unwrap();
        let auth = p.authorization().unwrap();
        assert!(auth.is_sensitive());
        let expected = base64::engine::general_purpose::STANDARD.encode("us@er:p:ss");
        assert_eq!(auth.to_str().unwrap(), format!("Basic {expected}"));
        assert_eq!(p.to_string(), "http://proxy.test:3128");
        assert!(!format!("{p:?}").contains("p:ss"));
        assert_eq!(ProxyServer::parse("proxy.test").unwrap().port(), 80);
        assert!(ProxyServer::parse("http://proxy.test:1").unwrap().authorization().is_none());
        assert_eq!(ProxyServer::parse("http://[::1]:8").unwrap().to_string(), "http://[::1]:8");
    }

    #[test]
    fn bad_values_are_errors_naming_the_variable() {
        let e = vars(&[("HTTPS_PROXY", "socks5://h:1080")]).unwrap_err();
        assert!(matches!(&e, ProxyError::Var { var: "HTTPS_PROXY", .. }), "{e}");
        assert!(e.to_string().contains("SOCKS"), "{e}");
        let e = vars(&[("http_proxy", "https://user:secret@h:1")]).unwrap_err().to_string();
        assert!(e.contains("http_proxy") && e.contains("not supported"), "{e}");
        assert!(!e.contains("secret"), "credentials leaked: {e}");
        let e = vars(&[("ALL_PROXY", "http://h:99999")]).unwrap_err().to_string();
        assert!(e.contains("ALL_PROXY"), "{e}");
        let e = vars(&[("ALL_PROXY", "http://")]).unwrap_err().to_string();
        assert!(e.contains("ALL_PROXY"), "{e}");
        let e = vars(&[("NO_PROXY", "a.test,10.0.0.0/99")]).unwrap_err().to_string();
        assert!(e.contains("NO_PROXY") && e.contains("10.0.0.0/99"), "{e}");
        let e = vars(&[("no_proxy", "a.test:http")]).unwrap_err().to_string();
        assert!(e.contains("bad port"), "{e}");
        assert!(Proxies::none().https("ftp://x").is_err());
    }

    #[test]
    fn redaction() {
        assert_eq!(redact("http://u:p@h:1/x"), "http://***@h:1/x");
        assert_eq!(redact("u:p@h:1"), "***@h:1");
        assert_eq!(redact("http://h:1/a@b"), "http://h:1/a@b");
    }
}
