//! [`Connector`]: TCP (and TLS) connections to origins, through the resolver and the
//! guard, within a deadline; a `tower::Service<Uri>` usable by hyper-util's pooled client.

use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hyper_util::rt::TokioIo;
use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::time::Instant;

use super::dns::Resolver;
use super::error::ConnectError;
use super::guard::Guard;
use super::proxy::{self, Proxies, ProxyServer};
use super::stream::Stream;
use crate::origin::{Host, Origin, Scheme};

/// Opens TCP (and TLS) connections to origins, through the resolver and the guard.
///
/// Cheap to clone (one reference count): hyper-util clones its connector per request.
#[derive(Clone)]
pub struct Connector {
    inner: Arc<ConnectorInner>,
}

struct ConnectorInner {
    resolver: Resolver,
    guard: Arc<Guard>,
    tls: tokio_rustls::TlsConnector,
    tls_config: Arc<rustls::ClientConfig>,
    connect_timeout: Duration,
    proxies: Proxies,
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("resolver", &self.inner.resolver)
            .field("guard", &self.inner.guard)
            .field("connect_timeout", &self.inner.connect_timeout)
            .field("proxies", &self.inner.proxies)
            .finish()
    }
}

impl Connector {
    /// A connector; `connect_timeout` bounds DNS, TCP and the TLS handshake together.
    pub fn new(
        resolver: Resolver,
        guard: Arc<Guard>,
        tls: Arc<rustls::ClientConfig>,
        connect_timeout: Duration,
    ) -> Connector {
        Connector {
            inner: Arc::new(ConnectorInner {
                resolver,
                guard,
                tls: tls.clone().into(),
                tls_config: tls,
                connect_timeout,
                proxies: Proxies::none(),
            }),
        }
    }

    /// The same connector going through `proxies` (see [`Proxies`]): an origin they name
    /// a proxy for is reached through it, `CONNECT` then TLS with the origin for https,
    /// absolute-form requests on a [`Stream::Proxied`] for plain http. The proxy is
    /// resolved with this connector's resolver and is not held to the guard (you named
    /// it); the origin's name is resolved by the proxy, so the guard checks only origins
    /// given as IP addresses and robotsgate makes no DNS lookup for the others.
    /// [`connect_tcp`](Connector::connect_tcp) stays direct.
    pub fn with_proxies(&self, proxies: Proxies) -> Connector {
        let inner = &self.inner;
        Connector {
            inner: Arc::new(ConnectorInner {
                resolver: inner.resolver.clone(),
                guard: inner.guard.clone(),
                tls: inner.tls.clone(),
                tls_config: inner.tls_config.clone(),
                connect_timeout: inner.connect_timeout,
                proxies,
            }),
        }
    }

    /// The proxies it connects through.
    pub fn proxies(&self) -> &Proxies {
        &self.inner.proxies
    }

    /// The forward proxy plain-http requests to `origin` go to in absolute form, if any.
    pub(crate) fn forward_proxy(&self, origin: &Origin) -> Option<&ProxyServer> {
        match origin.scheme() {
            Scheme::Http => self.inner.proxies.proxy_for(origin),
            Scheme::Https => None,
        }
    }

    /// The same connector (resolver, guard, roots, timeout) offering only `http/1.1` in
    /// ALPN: for connections driven by hyper's HTTP/1 client directly.
    pub fn http1_only(&self) -> Connector {
        let mut config = rustls::ClientConfig::clone(&self.inner.tls_config);
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Connector::new(
            self.inner.resolver.clone(),
            self.inner.guard.clone(),
            Arc::new(config),
            self.inner.connect_timeout,
        )
        .with_proxies(self.inner.proxies.clone())
    }

    /// Connects to `origin` (TLS for https), through its proxy when
    /// [`with_proxies`](Connector::with_proxies) names one; DNS, TCP, the proxy's tunnel
    /// and TLS within the connect timeout together.
    pub async fn connect(&self, origin: &Origin) -> Result<Stream, ConnectError> {
        let host = origin.host();
        let deadline = Instant::now() + self.inner.connect_timeout;
        let timeout =
            |h: &Host| ConnectError::Timeout { host: h.to_string(), timeout: self.inner.connect_timeout };
        if let Some(proxy) = self.inner.proxies.proxy_for(origin) {
            return tokio::time::timeout_at(deadline, self.connect_proxied(proxy, origin))
                .await
                .map_err(|_| timeout(host))?;
        }
        let ips = tokio::time::timeout_at(deadline, self.inner.resolver.resolve(host))
            .await
            .map_err(|_| timeout(host))??;
        let tcp = tokio::time::timeout_at(deadline, self.connect_addrs(host, &ips, origin.port()))
            .await
            .map_err(|_| timeout(host))??;
        match origin.scheme() {
            Scheme::Http => Ok(Stream::Plain(tcp)),
            Scheme::Https => self.tls(origin, tcp).await,
        }
    }

    /// TLS with `origin` over `tcp` (the caller bounds the time).
    async fn tls(&self, origin: &Origin, tcp: TcpStream) -> Result<Stream, ConnectError> {
        let host = origin.host();
        let name = match host {
            Host::Domain(d) => ServerName::try_from(d.clone()),
            Host::V4(ip) => Ok(ServerName::IpAddress(IpAddr::V4(*ip).into())),
            Host::V6(ip) => Ok(ServerName::IpAddress(IpAddr::V6(*ip).into())),
        }
        .map_err(|e| ConnectError::Tls { host: host.to_string(), reason: e.to_string() })?;
        let tls = self
            .inner
            .tls
            .connect(name, tcp)
            .await
            .map_err(|e| ConnectError::Tls { host: host.to_string(), reason: tls_reason(&e) })?;
        Ok(Stream::Tls(Box::new(tls)))
    }

    /// `origin` through `proxy`: the guard for an origin given as an address, TCP to the
    /// proxy, then the tunnel and TLS for https (the caller bounds the time).
    async fn connect_proxied(&self, proxy: &ProxyServer, origin: &Origin) -> Result<Stream, ConnectError> {
        if let Some(ip) = origin.host().ip() {
            self.screen(origin, &[ip], |_| ())?;
        }
        let ips = self
            .inner
            .resolver
            .resolve(proxy.host())
            .await
            .map_err(|e| proxy::tunnel_error(proxy, format!("cannot resolve it: {e}")))?;
        let mut last = None;
        let mut tcp = None;
        for ip in ips {
            match TcpStream::connect(SocketAddr::new(ip, proxy.port())).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    tcp = Some(s);
                    break;
                }
                Err(e) => last = Some(e),
            }
        }
        let Some(mut tcp) = tcp else {
            let why = last.map_or_else(|| "no addresses".to_owned(), |e| e.to_string());
            return Err(proxy::tunnel_error(proxy, format!("cannot connect to it: {why}")));
        };
        match origin.scheme() {
            Scheme::Http => Ok(Stream::Proxied(tcp)),
            Scheme::Https => {
                proxy::tunnel(&mut tcp, proxy, origin).await?;
                self.tls(origin, tcp).await
            }
        }
    }

    /// A plain TCP connection to `origin`'s host and port (no TLS, whatever the scheme),
    /// through the resolver and the guard, within the connect timeout: for tunnels.
    pub async fn connect_tcp(&self, origin: &Origin) -> Result<TcpStream, ConnectError> {
        let host = origin.host();
        let deadline = Instant::now() + self.inner.connect_timeout;
        let timeout =
            || ConnectError::Timeout { host: host.to_string(), timeout: self.inner.connect_timeout };
        let ips = tokio::time::timeout_at(deadline, self.inner.resolver.resolve(host))
            .await
            .map_err(|_| timeout())??;
        tokio::time::timeout_at(deadline, self.connect_addrs(host, &ips, origin.port()))
            .await
            .map_err(|_| timeout())?
    }

    /// Connects to the first address the guard allows and that answers.
    async fn connect_addrs(&self, host: &Host, ips: &[IpAddr], port: u16) -> Result<TcpStream, ConnectError> {
        let mut denied = None;
        let mut last_err = None;
        for &ip in ips {
            let addr = SocketAddr::new(ip, port);
            if let Err(reason) = self.inner.guard.check_dest(Some(host), addr) {
                denied.get_or_insert((ip, reason));
                continue;
            }
            match TcpStream::connect(addr).await {
                Ok(s) => {
                    let _ = s.set_nodelay(true);
                    return Ok(s);
                }
                Err(e) => {
                    last_err = Some(ConnectError::Connect { addr, reason: e.to_string(), kind: e.kind() })
                }
            }
        }
        if let Some(e) = last_err {
            return Err(e);
        }
        match denied {
            Some((ip, reason)) => Err(ConnectError::Denied { host: host.to_string(), ip, reason }),
            None => Err(ConnectError::Dns { host: host.to_string(), reason: "no addresses".into() }),
        }
    }

    /// Whether the guard lets requests go to `origin`: [`Connector::admit`] without the
    /// addresses, and without a DNS lookup when the addresses are known (the layer asks
    /// this for every request).
    pub async fn check_admitted(&self, origin: &Origin) -> Result<(), ConnectError> {
        if self.inner.proxies.proxy_for(origin).is_some() {
            // Through a proxy the proxy resolves the name: only an address is checked.
            // Boxed, as below: `admit`'s future (a resolution with its timeout) would be
            // most of every request's decision future, which would be copied with it.
            return Box::pin(self.admit(origin)).await.map(|_| ());
        }
        match self.inner.resolver.with_known(origin.host(), |ips| self.screen(origin, ips, |_| ())) {
            Some(verdict) => verdict,
            None => Box::pin(self.admit(origin)).await.map(|_| ()),
        }
    }

    /// Checks a destination against the guard without connecting: resolves it and
    /// returns the addresses that may be used. An origin reached through a proxy is not
    /// resolved (the proxy does that): its address is checked when it is one, and the
    /// list is empty for a name.
    pub async fn admit(&self, origin: &Origin) -> Result<Vec<SocketAddr>, ConnectError> {
        let host = origin.host();
        if self.inner.proxies.proxy_for(origin).is_some() {
            let mut ok = Vec::with_capacity(1);
            if let Some(ip) = host.ip() {
                self.screen(origin, &[ip], |a| ok.push(a))?;
            }
            return Ok(ok);
        }
        let ips = tokio::time::timeout(self.inner.connect_timeout, self.inner.resolver.resolve(host))
            .await
            .map_err(|_| ConnectError::Timeout {
                host: host.to_string(),
                timeout: self.inner.connect_timeout,
            })??;
        let mut ok = Vec::with_capacity(ips.len());
        self.screen(origin, &ips, |a| ok.push(a))?;
        Ok(ok)
    }

    /// Hands `allowed` each address of `ips` the guard lets requests to `origin` go to; an
    /// error when it denies them all (naming the first denied).
    fn screen(
        &self,
        origin: &Origin,
        ips: &[IpAddr],
        mut allowed: impl FnMut(SocketAddr),
    ) -> Result<(), ConnectError> {
        let host = origin.host();
        let (mut any, mut first_denied) = (false, None);
        for &ip in ips {
            let addr = SocketAddr::new(ip, origin.port());
            match self.inner.guard.check_dest(Some(host), addr) {
                Ok(()) => {
                    any = true;
                    allowed(addr);
                }
                Err(r) => {
                    first_denied.get_or_insert((ip, r));
                }
            }
        }
        match (any, first_denied) {
            (false, Some((ip, reason))) => Err(ConnectError::Denied { host: host.to_string(), ip, reason }),
            _ => Ok(()),
        }
    }
}

/// rustls' own message for a handshake error, without the io::Error wrapping.
fn tls_reason(e: &io::Error) -> String {
    match e.get_ref().and_then(|inner| inner.downcast_ref::<rustls::Error>()) {
        Some(r) => r.to_string(),
        None => e.to_string(),
    }
}

impl tower::Service<http::Uri> for Connector {
    type Response = TokioIo<Stream>;
    type Error = ConnectError;
    type Future = Pin<Box<dyn Future<Output = Result<Self::Response, ConnectError>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), ConnectError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, uri: http::Uri) -> Self::Future {
        let this = self.clone();
        Box::pin(async move {
            let origin = Origin::from_uri(&uri).map_err(|e| ConnectError::BadDestination(e.to_string()))?;
            this.connect(&origin).await.map(TokioIo::new)
        })
    }
}
