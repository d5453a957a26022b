//! The sites one ingress guards. An upstream that serves a site per host name has a
//! robots.txt per host name: each name given ([`IngressBuilder::hosts`]) has its own copy,
//! fetched with that name as `Host`, and judges the requests that name it (`Host`, or the
//! HTTP/2 `:authority`). Every other request is judged by the one default copy (the file
//! given, or the one fetched with [`IngressConfig::robots_host`]): the upstream's default
//! site, which is what it serves to a name it does not know.
//!
//! The names are the operator's, never a client's: a client that sends a made-up `Host`
//! makes no fetch and fills no table.
//!
//! [`IngressBuilder::hosts`]: super::IngressBuilder::hosts
//! [`IngressConfig::robots_host`]: super::IngressConfig::robots_host

use std::collections::HashMap;
use std::sync::Arc;

use http::{HeaderValue, Request};

use super::source::RobotsCache;

/// The default copy and one per host name given.
#[derive(Debug)]
pub(crate) struct Sites {
    pub(crate) default: RobotsCache,
    named: HashMap<Box<str>, Named, foldhash::quality::RandomState>,
}

/// A host name given, and its copy.
#[derive(Debug)]
struct Named {
    name: Arc<str>,
    host: HeaderValue,
    cache: RobotsCache,
}

/// The site a request is judged for.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Site<'a> {
    /// The host name given that the request names (`None`: the default site).
    pub(crate) name: Option<&'a Arc<str>>,
    /// The `Host` its robots.txt is fetched with (`None`: the configuration's
    /// `robots_host`).
    pub(crate) host: Option<&'a HeaderValue>,
    pub(crate) cache: &'a RobotsCache,
}

impl Sites {
    /// `default`, and a copy made by `cache` for each of `hosts` (lower-cased, without a
    /// trailing dot; a name given twice counts once).
    pub(crate) fn new(
        default: RobotsCache,
        hosts: Vec<HeaderValue>,
        mut cache: impl FnMut() -> RobotsCache,
    ) -> Sites {
        let mut named = HashMap::with_hasher(foldhash::quality::RandomState::default());
        for host in hosts {
            let Some(key) = host.to_str().ok().map(key) else { continue };
            named.entry(key.clone().into_boxed_str()).or_insert_with(|| Named {
                name: Arc::from(key),
                host,
                cache: cache(),
            });
        }
        Sites { default, named }
    }

    /// Whether `req` names two different hosts (its URI's authority, absolute form or
    /// HTTP/2, and its `Host`) while host names are given: which one the site judges and
    /// which one the upstream serves could differ, so such a request is refused (RFC 9113
    /// §8.3.1 lets a server treat it as malformed).
    pub(crate) fn two_hosts<B>(&self, req: &Request<B>) -> bool {
        if self.named.is_empty() {
            return false;
        }
        let (Some(authority), Some(host)) = (req.uri().authority(), req.headers().get(http::header::HOST))
        else {
            return false;
        };
        header_key(host).is_none_or(|h| h != key(authority.host()))
    }

    /// The site `req` is judged for.
    pub(crate) fn of<B>(&self, req: &Request<B>) -> Site<'_> {
        if !self.named.is_empty()
            && let Some(named) = request_key(req).and_then(|k| self.named.get(k.as_str()))
        {
            return Site { name: Some(&named.name), host: Some(&named.host), cache: &named.cache };
        }
        Site { name: None, host: None, cache: &self.default }
    }

    /// The copy of the host name given `name` (any case), if it is one; else the default.
    pub(crate) fn by_name(&self, name: Option<&str>) -> Site<'_> {
        match name.and_then(|n| self.named.get(key(n).as_str())) {
            Some(named) => Site { name: Some(&named.name), host: Some(&named.host), cache: &named.cache },
            None => Site { name: None, host: None, cache: &self.default },
        }
    }
}

/// The table's key of the host name a request names: its URI's authority (HTTP/2,
/// absolute form), else its `Host`, without the port.
fn request_key<B>(req: &Request<B>) -> Option<String> {
    match req.uri().authority() {
        Some(authority) => Some(key(authority.host())),
        None => header_key(req.headers().get(http::header::HOST)?),
    }
}

/// The table's key of a `Host` value (`host[:port]`, read as the `http` crate reads an
/// authority); `None` when it is not one.
fn header_key(value: &HeaderValue) -> Option<String> {
    let authority = http::uri::Authority::try_from(value.as_bytes()).ok()?;
    Some(key(authority.host()))
}

/// The table's key of a host name: lower case, without a trailing dot.
fn key(host: &str) -> String {
    let host = host.strip_suffix('.').unwrap_or(host);
    host.to_ascii_lowercase()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ingress::agents::KnownAgents;
    use std::time::Duration;

    fn cache() -> RobotsCache {
        RobotsCache::new(None, &KnownAgents::bundled(), Duration::from_secs(60), Duration::from_secs(60))
    }

    fn req(uri: &str, host: Option<&str>) -> Request<()> {
        let mut b = Request::get(uri);
        if let Some(h) = host {
            b = b.header("host", h);
        }
        b.body(()).unwrap()
    }

    #[test]
    fn a_request_is_judged_by_the_copy_of_the_name_it_gives() {
        let hosts = ["Example.com", "blog.example.com", "example.com", "[2001:db8::1]"];
        let sites = Sites::new(cache(), hosts.map(HeaderValue::from_static).to_vec(), cache);
        let name = |r: &Request<()>| sites.of(r).name.map(|n| n.to_string());
        let fetch = |r: &Request<()>| sites.of(r).host.map(|h| h.to_str().unwrap().to_owned());
        assert_eq!(name(&req("/", Some("example.com"))).as_deref(), Some("example.com"));
        assert_eq!(name(&req("/", Some("EXAMPLE.com:8080"))).as_deref(), Some("example.com"));
        assert_eq!(name(&req("/", Some("blog.example.com."))).as_deref(), Some("blog.example.com"));
        assert_eq!(name(&req("/", Some("[2001:DB8::1]:443"))).as_deref(), Some("[2001:db8::1]"));
        // The first spelling given is the one fetched with.
        assert_eq!(fetch(&req("/", Some("example.com"))).as_deref(), Some("Example.com"));
        // HTTP/2's :authority (the URI's) before Host.
        assert_eq!(
            name(&req("https://blog.example.com/x", Some("example.com"))).as_deref(),
            Some("blog.example.com")
        );
        // Anything else: the default site.
        for other in [Some("other.example"), Some("example.com.evil"), Some(""), Some("a b"), None] {
            assert_eq!(name(&req("/", other)), None, "{other:?}");
            assert!(fetch(&req("/", other)).is_none());
        }
        assert_eq!(sites.by_name(Some("BLOG.example.com")).name.map(|n| &**n), Some("blog.example.com"));
        assert!(sites.by_name(Some("nope")).name.is_none());
    }

    #[test]
    fn a_request_naming_two_hosts_is_told() {
        let sites = Sites::new(cache(), vec![HeaderValue::from_static("a.example")], cache);
        assert!(sites.two_hosts(&req("http://b.example/x", Some("a.example"))));
        assert!(sites.two_hosts(&req("http://a.example/x", Some("other.example"))));
        assert!(!sites.two_hosts(&req("http://A.example:8080/x", Some("a.example."))));
        assert!(!sites.two_hosts(&req("/x", Some("b.example"))), "one host named");
        assert!(!sites.two_hosts(&req("http://b.example/x", None)));
        let none = Sites::new(cache(), Vec::new(), cache);
        assert!(!none.two_hosts(&req("http://b.example/x", Some("a.example"))), "no names given");
    }

    #[test]
    fn without_names_every_request_is_the_default_sites() {
        let sites = Sites::new(cache(), Vec::new(), cache);
        assert!(sites.of(&req("/", Some("example.com"))).name.is_none());
    }
}
