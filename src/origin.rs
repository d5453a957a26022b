//! The origin a robots.txt file belongs to: scheme, host and port.
//!
//! RFC 9309 §2.3 and Google's table of valid robots.txt URLs: the rules of
//! `https://example.com/robots.txt` apply to `https://example.com/...` and nothing else (not
//! to other subdomains, other schemes or other ports). Hosts are compared lower-case, IDNs
//! in punycode; the default port of the scheme is the same as no port.
//!
//! ```
//! use robotsgate::origin::Origin;
//!
//! let o = Origin::parse("https://WWW.Exämple.com:443/a/b?c").unwrap();
//! assert_eq!(o.to_string(), "https://www.xn--exmple-cua.com");
//! assert_eq!(o.robots_url(), "https://www.xn--exmple-cua.com/robots.txt");
//! assert_eq!(o, Origin::parse("https://www.xn--exmple-cua.com/").unwrap());
//! assert_ne!(o, Origin::parse("http://www.xn--exmple-cua.com/").unwrap());
//! ```

use std::borrow::Cow;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// `http` or `https`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scheme {
    /// `http`
    Http,
    /// `https`
    Https,
}

impl Scheme {
    /// The scheme's name.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    /// 80 or 443.
    pub fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// The host part of an origin: a lower-case ASCII domain (IDNs in punycode) or an IP.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Host {
    /// A domain name, lower-case, punycode for non-ASCII labels.
    Domain(String),
    /// An IPv4 address.
    V4(Ipv4Addr),
    /// An IPv6 address.
    V6(Ipv6Addr),
}

impl Host {
    /// Parses a host as it appears in a URL authority (IPv6 in brackets). A fully
    /// qualified name (`example.com.`) is the same host as `example.com`.
    pub fn parse(host: &str) -> Result<Host, OriginError> {
        if let Some(fast) = Host::parse_plain(host) {
            return Ok(fast);
        }
        match url::Host::parse(host) {
            Ok(url::Host::Domain(d)) => Host::domain(d),
            Ok(url::Host::Ipv4(ip)) => Ok(Host::V4(ip)),
            Ok(url::Host::Ipv6(ip)) => Ok(Host::V6(ip)),
            Err(e) => Err(OriginError::BadHost { host: host.to_owned(), reason: e.to_string() }),
        }
    }

    /// The common case without the WHATWG host parser (IDNA mapping is the costliest
    /// step of a request's decision): a dotted-quad IPv4 address in canonical form, or a
    /// name that is already lower-case ASCII letters, digits and hyphens in non-empty
    /// labels, has no punycode label and does not end in a numeric label (which WHATWG
    /// reads as an IPv4 address). Such a host parses to itself; anything else is `None`
    /// and goes through `url::Host::parse`.
    fn parse_plain(host: &str) -> Option<Host> {
        if let Ok(ip) = host.parse::<Ipv4Addr>() {
            return Some(Host::V4(ip));
        }
        let name = host.strip_suffix('.').unwrap_or(host);
        let mut last = "";
        for label in name.split('.') {
            let plain = !label.is_empty()
                && !label.starts_with("xn--")
                && label.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-');
            if !plain {
                return None;
            }
            last = label;
        }
        let numeric = last.bytes().all(|b| b.is_ascii_digit()) || last.starts_with("0x");
        if numeric { None } else { Some(Host::Domain(name.to_owned())) }
    }

    fn domain(mut d: String) -> Result<Host, OriginError> {
        if d.ends_with('.') {
            d.pop();
        }
        if d.is_empty() || d.ends_with('.') {
            return Err(OriginError::NoHost);
        }
        Ok(Host::Domain(d))
    }

    /// The address, when the host is an IP literal.
    pub fn ip(&self) -> Option<IpAddr> {
        match self {
            Host::Domain(_) => None,
            Host::V4(ip) => Some(IpAddr::V4(*ip)),
            Host::V6(ip) => Some(IpAddr::V6(*ip)),
        }
    }

    /// The host without brackets: a domain or the textual IP (for DNS, TLS names).
    pub fn name(&self) -> Cow<'_, str> {
        match self {
            Host::Domain(d) => Cow::Borrowed(d),
            Host::V4(ip) => Cow::Owned(ip.to_string()),
            Host::V6(ip) => Cow::Owned(ip.to_string()),
        }
    }
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

impl Host {
    /// What `Display` writes, without the formatting machinery for names and IPv4
    /// addresses (`Ipv4Addr`'s `Display`, which supports padding, costs several times
    /// more, and this runs for every request's URL).
    fn write_to(&self, w: &mut impl fmt::Write) -> fmt::Result {
        match self {
            Host::Domain(d) => w.write_str(d),
            Host::V4(ip) => {
                let mut digits = itoa::Buffer::new();
                for (i, octet) in ip.octets().into_iter().enumerate() {
                    if i > 0 {
                        w.write_str(".")?;
                    }
                    w.write_str(digits.format(octet))?;
                }
                Ok(())
            }
            Host::V6(ip) => write!(w, "[{ip}]"),
        }
    }
}

/// The key of a robots.txt file: scheme, host and port.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Origin {
    scheme: Scheme,
    host: Host,
    port: u16,
}

/// Why a URL has no origin robotsgate can work with.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OriginError {
    /// Not an absolute URL: no `scheme:` (`example.com/a`, `//example.com/a`, `/a`).
    #[error("no scheme: not an absolute URL (an http:// or https:// URL is needed)")]
    NoScheme,
    /// Not an `http` or `https` URL.
    #[error("unsupported scheme {0:?}: only http and https URLs have robots.txt files here")]
    UnsupportedScheme(String),
    /// The URL names no host.
    #[error("the URL has no host")]
    NoHost,
    /// The host is not a valid domain name or IP address.
    #[error("invalid host {host:?}: {reason}")]
    BadHost {
        /// The host as given.
        host: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The port is not a number from 0 to 65535.
    #[error("invalid port {0:?}")]
    BadPort(String),
    /// The URL does not parse at all.
    #[error("invalid URL: {0}")]
    BadUrl(String),
}

impl Origin {
    /// An origin from its parts. `port: None` means the scheme's default.
    pub fn new(scheme: Scheme, host: Host, port: Option<u16>) -> Origin {
        Origin { scheme, host, port: port.unwrap_or(scheme.default_port()) }
    }

    /// The origin of an absolute `http`/`https` URL (IDNs allowed), read as the WHATWG URL
    /// standard (and every browser) reads it.
    pub fn parse(url: &str) -> Result<Origin, OriginError> {
        let parsed = url::Url::parse(url).map_err(|e| OriginError::of_url(e, url))?;
        Origin::of_parsed(&parsed)
    }

    /// The origin of a URL the `url` crate parsed.
    pub(crate) fn of_parsed(url: &url::Url) -> Result<Origin, OriginError> {
        let scheme = match url.scheme() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            s => return Err(OriginError::UnsupportedScheme(s.to_owned())),
        };
        let host = match url.host() {
            None => return Err(OriginError::NoHost),
            Some(url::Host::Domain(d)) => Host::domain(d.to_owned())?,
            Some(url::Host::Ipv4(ip)) => Host::V4(ip),
            Some(url::Host::Ipv6(ip)) => Host::V6(ip),
        };
        Ok(Origin::new(scheme, host, url.port()))
    }

    /// The origin of an absolute-form request URI.
    pub fn from_uri(uri: &http::Uri) -> Result<Origin, OriginError> {
        let scheme = match uri.scheme_str() {
            Some(s) if s.eq_ignore_ascii_case("http") => Scheme::Http,
            Some(s) if s.eq_ignore_ascii_case("https") => Scheme::Https,
            Some(s) => return Err(OriginError::UnsupportedScheme(s.to_owned())),
            None => return Err(OriginError::BadUrl("not an absolute URL (no scheme)".into())),
        };
        let authority = uri.authority().ok_or(OriginError::NoHost)?;
        Self::from_authority(scheme, authority.as_str())
    }

    /// The origin for `scheme` and an authority (`host[:port]`, as in a `Host` header or
    /// a `CONNECT` target); user information before `@` is ignored.
    pub fn from_authority(scheme: Scheme, authority: &str) -> Result<Origin, OriginError> {
        let hostport = after_last(authority, b'@').map_or(authority, |(_, h)| h);
        let (host, port) = split_host_port(hostport)?;
        if host.is_empty() {
            return Err(OriginError::NoHost);
        }
        Ok(Origin::new(scheme, Host::parse(host)?, port))
    }

    /// `http` or `https`.
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The host.
    pub fn host(&self) -> &Host {
        &self.host
    }

    /// The port (the scheme's default when the URL had none).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `host` or `host:port` when the port is not the default, as in a `Host` header.
    pub fn authority(&self) -> String {
        if self.port == self.scheme.default_port() {
            self.host.to_string()
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// The URL of this origin's robots.txt.
    pub fn robots_url(&self) -> String {
        format!("{self}/robots.txt")
    }
}

impl fmt::Display for Origin {
    /// `scheme://host[:port]`, the port only when it is not the default.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.write_to(f)
    }
}

impl Origin {
    /// Writes what `Display` writes (`scheme://host[:port]`) straight to `w`: the audit
    /// log and the layer do this for every request.
    pub fn write_to(&self, w: &mut impl fmt::Write) -> fmt::Result {
        w.write_str(self.scheme.as_str())?;
        w.write_str("://")?;
        self.host.write_to(w)?;
        if self.port != self.scheme.default_port() {
            w.write_str(":")?;
            w.write_str(itoa::Buffer::new().format(self.port))?;
        }
        Ok(())
    }
}

/// `s` split around its last `byte` (ASCII), as `str::rsplit_once` splits it, by a plain
/// look at the bytes from the end: every request's origin is read this way, and an
/// authority is a few dozen bytes, where a character searcher's set-up costs more than
/// the search.
fn after_last(s: &str, byte: u8) -> Option<(&str, &str)> {
    debug_assert!(byte.is_ascii());
    // An ASCII byte is a character of its own: both sides are on character boundaries.
    s.bytes().rposition(|b| b == byte).map(|i| (&s[..i], &s[i + 1..]))
}

fn split_host_port(hostport: &str) -> Result<(&str, Option<u16>), OriginError> {
    let (host, port) = if let Some(rest) = hostport.strip_prefix('[') {
        // [v6]:port
        let end = rest.find(']').ok_or_else(|| OriginError::BadHost {
            host: hostport.to_owned(),
            reason: "unclosed '['".into(),
        })?;
        let after = &rest[end + 1..];
        let port = match after {
            "" => None,
            p => Some(p.strip_prefix(':').ok_or_else(|| OriginError::BadPort(p.to_owned()))?),
        };
        (&hostport[..end + 2], port)
    } else {
        match after_last(hostport, b':') {
            Some((h, p)) => (h, Some(p)),
            None => (hostport, None),
        }
    };
    let port = match port {
        None | Some("") => None,
        Some(p) => Some(p.parse::<u16>().map_err(|_| OriginError::BadPort(p.to_owned()))?),
    };
    Ok((host, port))
}

impl OriginError {
    /// Why the `url` crate refused `raw`, naming the host or port as written when they are
    /// what is wrong.
    pub(crate) fn of_url(e: url::ParseError, raw: &str) -> OriginError {
        let split = robotsgate_rep::split_http_url(raw);
        let host = split.as_ref().map_or("", |u| u.host()).to_owned();
        match e {
            url::ParseError::RelativeUrlWithoutBase => OriginError::NoScheme,
            url::ParseError::EmptyHost => OriginError::NoHost,
            url::ParseError::InvalidPort => {
                let authority = split.as_ref().map_or("", |u| &u.authority);
                let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
                OriginError::BadPort(hostport.get(host.len() + 1..).unwrap_or_default().to_owned())
            }
            url::ParseError::IdnaError
            | url::ParseError::InvalidDomainCharacter
            | url::ParseError::InvalidIpv4Address
            | url::ParseError::InvalidIpv6Address => OriginError::BadHost { host, reason: e.to_string() },
            e => OriginError::BadUrl(e.to_string()),
        }
    }
}

/// Hosts an override applies to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostPattern {
    /// Exactly this host (lower-case, punycode, or an IP).
    Exact(String),
    /// `*.example.com`: any subdomain of `example.com` (not `example.com` itself).
    Subdomains(String),
}

impl HostPattern {
    /// Parses `example.com`, `*.example.com` or an IP address.
    pub fn parse(s: &str) -> Result<HostPattern, String> {
        let (wild, rest) = match s.strip_prefix("*.") {
            Some(rest) => (true, rest),
            None => (false, s),
        };
        // `example.com.` (fully qualified) is the same host as `example.com`.
        let host = Host::parse(rest.strip_suffix('.').unwrap_or(rest)).map_err(|e| e.to_string())?;
        let name = host.to_string();
        match (wild, host) {
            (true, Host::Domain(_)) => Ok(HostPattern::Subdomains(name)),
            (true, _) => Err(format!("{s:?}: a wildcard needs a domain name, not an IP address")),
            (false, _) => Ok(HostPattern::Exact(name)),
        }
    }

    /// Whether `host` matches.
    pub fn matches(&self, host: &Host) -> bool {
        let full = host.to_string();
        // A fully qualified name (`example.com.`) is the same host as `example.com`.
        let name = full.strip_suffix('.').unwrap_or(&full);
        match self {
            HostPattern::Exact(h) => *h == name,
            HostPattern::Subdomains(d) => {
                name.len() > d.len() + 1
                    && name.ends_with(d.as_str())
                    && name.as_bytes()[name.len() - d.len() - 1] == b'.'
            }
        }
    }
}

impl fmt::Display for HostPattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            HostPattern::Exact(h) => f.write_str(h),
            HostPattern::Subdomains(d) => write!(f, "*.{d}"),
        }
    }
}

/// The part of a request URI that robots.txt rules are matched against: the path and
/// query exactly as sent (`/` when empty).
pub(crate) fn request_path(uri: &http::Uri) -> Cow<'_, str> {
    match uri.path_and_query().map(|pq| pq.as_str()) {
        Some(pq) if pq.starts_with('/') => Cow::Borrowed(pq),
        // What is sent (`net::origin_form`, the fast path): `?q` as `/?q`, and `*` (a
        // request in a tunnel) as `/*`, so checked as `/*`, not as `/`.
        Some(pq) if !pq.is_empty() => Cow::Owned(format!("/{pq}")),
        _ => Cow::Borrowed("/"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fast path gives exactly what the WHATWG parser gives, wherever it answers.
    #[test]
    fn plain_hosts_parse_as_the_whatwg_parser_does() {
        let mut hosts: Vec<String> = [
            "example.com",
            "example.com.",
            "a-b.c0.d",
            "127.0.0.1",
            "10.0.0.255",
            "0.0.0.0",
            "1.2.3",
            "01.2.3.4",
            "1.2.3.4.",
            "256.1.1.1",
            "0x7f.1",
            "example.0x1",
            "example.123",
            "xn--bcher-kva.example",
            "Example.com",
            "a..b",
            ".a",
            "a.",
            "-a.b",
            "a-.b",
            "1a.b",
            "localhost",
            "xn--",
            "a.b-",
            "123",
            "a.0x",
            "a.0xg",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        // Every string of up to 4 characters over a small alphabet.
        let alphabet = ['a', 'x', '0', '1', '9', '-', '.'];
        let mut level = vec![String::new()];
        for _ in 0..4 {
            level = level.iter().flat_map(|p| alphabet.iter().map(move |c| format!("{p}{c}"))).collect();
            hosts.extend(level.iter().cloned());
        }
        for h in &hosts {
            if let Some(fast) = Host::parse_plain(h) {
                let slow = match url::Host::parse(h) {
                    Ok(url::Host::Domain(d)) => Host::domain(d).ok(),
                    Ok(url::Host::Ipv4(ip)) => Some(Host::V4(ip)),
                    Ok(url::Host::Ipv6(ip)) => Some(Host::V6(ip)),
                    Err(_) => None,
                };
                assert_eq!(Some(fast), slow, "{h:?}");
            }
        }
        assert_eq!(Host::parse_plain("example.com"), Some(Host::Domain("example.com".into())));
        assert_eq!(Host::parse_plain("Example.com"), None);
        assert_eq!(Host::parse_plain("127.0.0.1"), Some(Host::V4(Ipv4Addr::LOCALHOST)));
    }

    fn o(s: &str) -> Origin {
        Origin::parse(s).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    /// Google's table of valid robots.txt URLs (google-robots-txt-spec.md), row by row:
    /// (robots.txt URL, valid for, not valid for).
    #[test]
    fn google_robots_url_table() {
        let rows: &[(&str, &[&str], &[&str])] = &[
            (
                "https://example.com/robots.txt",
                &["https://example.com/", "https://example.com/folder/file"],
                &["https://other.example.com/", "http://example.com/", "https://example.com:8181/"],
            ),
            (
                "https://www.example.com/robots.txt",
                &["https://www.example.com/"],
                &["https://example.com/", "https://shop.www.example.com/", "https://www.shop.example.com/"],
            ),
            (
                "https://www.exämple.com/robots.txt",
                &["https://www.exämple.com/", "https://www.xn--exmple-cua.com/"],
                &["https://www.example.com/"],
            ),
            ("https://212.96.82.21/robots.txt", &["https://212.96.82.21/"], &["https://example.com/"]),
            (
                "https://example.com:443/robots.txt",
                &["https://example.com:443/", "https://example.com/"],
                &["https://example.com:444/"],
            ),
            (
                "https://example.com:8181/robots.txt",
                &["https://example.com:8181/"],
                &["https://example.com/"],
            ),
        ];
        for (robots, valid, invalid) in rows {
            let origin = o(robots);
            assert_eq!(format!("{origin}/robots.txt"), origin.robots_url());
            for v in *valid {
                assert_eq!(o(v), origin, "{robots} should be valid for {v}");
            }
            for v in *invalid {
                assert_ne!(o(v), origin, "{robots} should not be valid for {v}");
            }
        }
        // A robots.txt in a subdirectory is not a robots.txt: the origin's is always at /.
        assert_eq!(o("https://example.com/folder/robots.txt").robots_url(), "https://example.com/robots.txt");
        // ftp has robots.txt files, but robotsgate only serves http(s).
        assert!(matches!(
            Origin::parse("ftp://example.com/robots.txt"),
            Err(OriginError::UnsupportedScheme(_))
        ));
    }

    #[test]
    fn hosts_ports_and_ipv6() {
        assert_eq!(o("HTTP://EXAMPLE.com").to_string(), "http://example.com");
        assert_eq!(o("http://example.com./x"), o("http://example.com/"));
        assert_eq!(
            Origin::from_authority(Scheme::Http, "a.test.:8080").unwrap().to_string(),
            "http://a.test:8080"
        );
        assert!(Origin::parse("http://./").is_err());
        assert_eq!(o("http://example.com:80/").to_string(), "http://example.com");
        assert_eq!(o("http://example.com:8080/").to_string(), "http://example.com:8080");
        assert_eq!(o("https://user:pw@example.com/").to_string(), "https://example.com");
        assert_eq!(o("http://[::1]:8080/x").to_string(), "http://[::1]:8080");
        assert_eq!(o("http://[::1]/x").host().ip(), Some("::1".parse().unwrap()));
        assert_eq!(o("https://[2001:DB8::1]/").to_string(), "https://[2001:db8::1]");
        assert_eq!(o("http://127.0.0.1:1/").host(), &Host::V4(Ipv4Addr::LOCALHOST));
        // url's host parser normalises IPv4 spellings (which matters for the SSRF guard).
        assert_eq!(o("http://0x7f.1/").host(), &Host::V4(Ipv4Addr::LOCALHOST));
        assert!(Origin::parse("http://example.com:99999/").is_err());
        let uri: http::Uri = "http://EXAMPLE.com:80/x".parse().unwrap();
        assert_eq!(Origin::from_uri(&uri).unwrap(), o("http://example.com/"));
        assert!(matches!(Origin::from_authority(Scheme::Http, ":80"), Err(OriginError::NoHost)));
        assert!(matches!(Origin::from_authority(Scheme::Http, "a b"), Err(OriginError::BadHost { .. })));
        assert_eq!(
            Origin::from_authority(Scheme::Https, "Example.COM:443").unwrap(),
            o("https://example.com")
        );
    }

    /// The split every request's origin goes through gives what `str::rsplit_once` gives,
    /// on user information, several separators and characters of more than one byte.
    #[test]
    fn authorities_split_as_rsplit_once_splits() {
        let authorities = [
            "",
            "@",
            ":",
            "h",
            "h:",
            ":1",
            "h:81",
            "u@h",
            "u:pw@h:81",
            "u@p@h:1",
            "@h:1",
            "ü@é.test:8",
            "é:ü",
            "[::1]:80",
            "u@[::1]",
            "h:x:y",
            "\u{1F600}@h",
            "h@\u{1F600}",
        ];
        for a in authorities {
            for byte in [b'@', b':'] {
                assert_eq!(after_last(a, byte), a.rsplit_once(byte as char), "{a:?} at {:?}", byte as char);
            }
        }
        assert_eq!(Origin::from_authority(Scheme::Http, "u@p@h.test:81").unwrap(), o("http://h.test:81/"));
        assert_eq!(Origin::from_authority(Scheme::Http, "ü@h.test").unwrap(), o("http://h.test/"));
    }

    #[test]
    fn request_paths() {
        let p = |s: &str| request_path(&s.parse::<http::Uri>().unwrap()).into_owned();
        assert_eq!(p("http://example.com"), "/");
        assert_eq!(p("http://example.com/a/b?c=d"), "/a/b?c=d");
        assert_eq!(p("http://example.com?q"), "/?q");
        assert_eq!(p("/x/y"), "/x/y");
        assert_eq!(p("*"), "/*", "as origin_form sends it");
        for uri in ["http://example.com", "http://example.com?q", "*", "/x?y"] {
            let uri: http::Uri = uri.parse().unwrap();
            assert_eq!(request_path(&uri), crate::net::origin_form(&uri).to_string(), "{uri}");
        }
    }
}
