//! Outbound connections, shared by the robots.txt fetcher and the proxy: DNS
//! (hickory-resolver, plus static `host → address` overrides), the destination guard,
//! TCP with a deadline, and TLS (rustls with the webpki roots plus configured extra roots).
//!
//! A destination is resolved once, every address is checked by the [`Guard`], and the
//! connection goes to an address that passed, so a name cannot be re-resolved to
//! something else between check and connect (no DNS rebinding).
//!
//! [`Connector`] is a `tower::Service<Uri>` usable by hyper-util's pooled client;
//! its errors are typed ([`ConnectError`]) so callers can tell a DNS failure from a
//! refused connection, a timeout, a certificate problem or a refused destination.

use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{NameServerConfig, ResolverConfig};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::TokioIo;
use ipnet::IpNet;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::time::Instant;

use arc_swap::ArcSwap;

use crate::origin::{Host, HostPattern, Origin, Scheme};

/// Why an outbound connection could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// The name did not resolve.
    #[error("DNS lookup of {host} failed: {reason}")]
    Dns {
        /// The name looked up.
        host: String,
        /// What the resolver said.
        reason: String,
    },
    /// Every address of the destination is refused by the guard.
    #[error("destination {host} ({ip}) refused: {reason}")]
    Denied {
        /// The host asked for.
        host: String,
        /// The (first) address that was refused.
        ip: IpAddr,
        /// Which rule refused it.
        reason: DenyReason,
    },
    /// No connection within the connect timeout.
    #[error("connecting to {host} timed out after {timeout:?}")]
    Timeout {
        /// The host.
        host: String,
        /// The configured connect timeout.
        timeout: Duration,
    },
    /// The TCP connection failed (refused, reset, unreachable).
    #[error("connecting to {addr} failed: {reason}")]
    Connect {
        /// The address tried last.
        addr: SocketAddr,
        /// The operating system's reason.
        reason: String,
        /// The error kind (e.g. `ConnectionRefused`).
        kind: io::ErrorKind,
    },
    /// The TLS handshake failed (certificate not trusted, wrong name, protocol error).
    #[error("TLS with {host} failed: {reason}")]
    Tls {
        /// The server name.
        host: String,
        /// rustls' reason.
        reason: String,
    },
    /// The URI cannot be connected to (no host, not http/https).
    #[error("cannot connect to {0}")]
    BadDestination(String),
}

impl ConnectError {
    /// A short stable name of the failure class, for logs and metrics.
    pub fn class(&self) -> &'static str {
        match self {
            ConnectError::Dns { .. } => "dns",
            ConnectError::Denied { .. } => "denied",
            ConnectError::Timeout { .. } => "connect_timeout",
            ConnectError::Connect { kind: io::ErrorKind::ConnectionRefused, .. } => "connection_refused",
            ConnectError::Connect { .. } => "connect",
            ConnectError::Tls { .. } => "tls",
            ConnectError::BadDestination(_) => "bad_destination",
        }
    }
}

/// Why the guard refuses an address.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DenyReason {
    /// 127.0.0.0/8, ::1
    Loopback,
    /// RFC 1918: 10/8, 172.16/12, 192.168/16
    Private,
    /// 100.64.0.0/10 (carrier-grade NAT)
    SharedAddressSpace,
    /// 169.254.0.0/16 (cloud metadata lives here), fe80::/10
    LinkLocal,
    /// fc00::/7
    UniqueLocal,
    /// 224.0.0.0/4, ff00::/8
    Multicast,
    /// 0.0.0.0/8, ::
    Unspecified,
    /// 255.255.255.255
    Broadcast,
    /// 192.0.0.0/24, 198.18.0.0/15, 240.0.0.0/4 and other non-global IPv4 blocks; the
    /// non-global IPv6 blocks of IANA's special-purpose registry (documentation,
    /// discard, 2001::/23 with Teredo, ::/8, SRv6 SIDs, ...)
    Reserved,
    /// The proxy's own listening address.
    OwnListener,
}

impl DenyReason {
    /// A short stable name.
    pub fn as_str(self) -> &'static str {
        match self {
            DenyReason::Loopback => "loopback",
            DenyReason::Private => "private",
            DenyReason::SharedAddressSpace => "shared-address-space",
            DenyReason::LinkLocal => "link-local",
            DenyReason::UniqueLocal => "unique-local",
            DenyReason::Multicast => "multicast",
            DenyReason::Unspecified => "unspecified",
            DenyReason::Broadcast => "broadcast",
            DenyReason::Reserved => "reserved",
            DenyReason::OwnListener => "own-listener",
        }
    }
}

impl fmt::Display for DenyReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The IPv4 address of 32 bits of an IPv6 address, from two segments.
fn v4_of(hi: u16, lo: u16) -> Ipv4Addr {
    Ipv4Addr::from((u32::from(hi) << 16) | u32::from(lo))
}

/// The IPv4 addresses an IPv6 address carries, in the forms a host, a relay or a
/// translator would turn into IPv4 traffic to that address:
///
/// | form | prefix | IPv4 address in |
/// |---|---|---|
/// | IPv4-mapped | `::ffff:0:0/96` | bits 96–127 |
/// | IPv4-translated (SIIT, RFC 2765) | `::ffff:0:0:0/96` | bits 96–127 |
/// | IPv4-compatible (deprecated) | `::/96`, but not `::` and `::1` | bits 96–127 |
/// | NAT64 well-known prefix (RFC 6052) | `64:ff9b::/96` | bits 96–127 |
/// | NAT64 local-use (RFC 8215) as a /96 | `64:ff9b:1::/96` | bits 96–127 |
/// | 6to4 (RFC 3056) | `2002::/16` | bits 16–47 |
/// | Teredo (RFC 4380) | `2001::/32` | server: bits 32–63; client: bits 96–127, inverted |
///
/// Returns up to two addresses (Teredo carries two).
fn embedded_v4(ip: Ipv6Addr) -> [Option<Ipv4Addr>; 2] {
    let s = ip.segments();
    let tail = v4_of(s[6], s[7]);
    match s {
        [0, 0, 0, 0, 0, 0xffff, _, _] | [0, 0, 0, 0, 0xffff, 0, _, _] => [Some(tail), None],
        // ::a.b.c.d (deprecated compatible form), but not :: and ::1 themselves.
        [0, 0, 0, 0, 0, 0, 0, 0 | 1] => [None, None],
        [0, 0, 0, 0, 0, 0, _, _] => [Some(tail), None],
        [0x64, 0xff9b, 0, 0, 0, 0, _, _] | [0x64, 0xff9b, 1, 0, 0, 0, _, _] => [Some(tail), None],
        [0x2002, hi, lo, ..] => [Some(v4_of(hi, lo)), None],
        [0x2001, 0, hi, lo, _, _, _, _] => [Some(v4_of(hi, lo)), Some(v4_of(!s[6], !s[7]))],
        _ => [None, None],
    }
}

/// Which special-purpose range `ip` falls in, if any.
///
/// An IPv6 address that carries an IPv4 address ([`embedded_v4`]: mapped, translated,
/// compatible, NAT64, 6to4, Teredo) is refused for the reason its IPv4 address would be;
/// then the non-global blocks of IANA's IPv6 special-purpose registry are refused.
pub fn classify(ip: IpAddr) -> Option<DenyReason> {
    match ip {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => {
            embedded_v4(v6).into_iter().flatten().find_map(classify_v4).or_else(|| classify_v6(v6))
        }
    }
}

fn classify_v4(ip: Ipv4Addr) -> Option<DenyReason> {
    let o = ip.octets();
    Some(match o {
        [127, ..] => DenyReason::Loopback,
        [10, ..] => DenyReason::Private,
        [172, b, ..] if (16..32).contains(&b) => DenyReason::Private,
        [192, 168, ..] => DenyReason::Private,
        [100, b, ..] if (64..128).contains(&b) => DenyReason::SharedAddressSpace,
        [169, 254, ..] => DenyReason::LinkLocal,
        [0, ..] => DenyReason::Unspecified,
        [255, 255, 255, 255] => DenyReason::Broadcast,
        [224..=239, ..] => DenyReason::Multicast,
        [240..=255, ..] => DenyReason::Reserved,
        [192, 0, 0, _] | [198, 18 | 19, ..] => DenyReason::Reserved,
        _ => return None,
    })
}

/// The IPv6 blocks of IANA's special-purpose registry that are not globally reachable
/// (<https://www.iana.org/assignments/iana-ipv6-special-registry>, as of 2025), and the
/// deprecated site-local block.
fn classify_v6(ip: Ipv6Addr) -> Option<DenyReason> {
    let s = ip.segments();
    Some(match s {
        _ if ip == Ipv6Addr::UNSPECIFIED => DenyReason::Unspecified,
        _ if ip == Ipv6Addr::LOCALHOST => DenyReason::Loopback,
        [a, ..] if a & 0xffc0 == 0xfe80 => DenyReason::LinkLocal,
        [a, ..] if a & 0xfe00 == 0xfc00 => DenyReason::UniqueLocal,
        [a, ..] if a & 0xff00 == 0xff00 => DenyReason::Multicast,
        // fec0::/10 (deprecated site-local) behaves like private space.
        [a, ..] if a & 0xffc0 == 0xfec0 => DenyReason::Private,
        // Forms whose IPv4 address ([`embedded_v4`]) is public are dialled as that address:
        // ::ffff:0:0/96, ::ffff:0:0:0/96, ::/96, 64:ff9b::/96 and the /96 form of the
        // local-use NAT64 block 64:ff9b:1::/48 (RFC 8215), whose other layouts are not
        // global. The rest of ::/8 is reserved by the IETF.
        [0, 0, 0, 0, 0, 0 | 0xffff, _, _]
        | [0, 0, 0, 0, 0xffff, 0, _, _]
        | [0x64, 0xff9b, 0 | 1, 0, 0, 0, _, _] => return None,
        [0x64, 0xff9b, 1, ..] => DenyReason::Reserved,
        [a, ..] if a < 0x100 => DenyReason::Reserved,
        // 100::/64 discard-only (RFC 6666), 100:0:0:1::/64 dummy prefix (RFC 9780).
        [0x100, 0, 0, 0 | 1, ..] => DenyReason::Reserved,
        // 2001:db8::/32 documentation.
        [0x2001, 0xdb8, ..] => DenyReason::Reserved,
        // 2001::/23 IETF protocol assignments (Teredo, benchmarking, ORCHID, ...), except
        // the blocks the registry marks globally reachable.
        [0x2001, b, ..] if b < 0x200 && !ietf_global(s) => DenyReason::Reserved,
        // 3fff::/20 documentation (RFC 9637), 5f00::/16 SRv6 SIDs (RFC 9602).
        [0x3fff, b, ..] if b < 0x1000 => DenyReason::Reserved,
        [0x5f00, ..] => DenyReason::Reserved,
        _ => return None,
    })
}

/// The globally reachable blocks inside 2001::/23: PCP and TURN anycast (2001:1::1,
/// 2001:1::2), DNS-SD SRP anycast (2001:1::3), AMT (2001:3::/32), AS112-v6
/// (2001:4:112::/48), ORCHIDv2 (2001:20::/28) and drone DETs (2001:30::/28).
fn ietf_global(s: [u16; 8]) -> bool {
    matches!(
        s,
        [0x2001, 1, 0, 0, 0, 0, 0, 1..=3]
            | [0x2001, 3, ..]
            | [0x2001, 4, 0x112, ..]
            | [0x2001, 0x20..=0x3f, ..]
    )
}

/// Decides which destination addresses outbound connections may go to.
///
/// By default every special-purpose range is refused (loopback, RFC 1918, CGNAT,
/// link-local and cloud metadata, unique-local, multicast, unspecified, broadcast, and
/// the IPv6 forms that embed such IPv4 addresses); `allow` opens CIDRs on purpose.
///
/// ```
/// use robotsgate::net::{Guard, DenyReason};
/// let guard = Guard::default();
/// assert_eq!(guard.check("169.254.169.254".parse().unwrap()), Err(DenyReason::LinkLocal));
/// assert_eq!(guard.check("::ffff:10.0.0.1".parse().unwrap()), Err(DenyReason::Private));
/// assert!(guard.check("93.184.216.34".parse().unwrap()).is_ok());
/// let open = Guard::default().allow("127.0.0.0/8".parse().unwrap());
/// assert!(open.check("127.0.0.1".parse().unwrap()).is_ok());
/// ```
#[derive(Debug, Clone, Default)]
pub struct Guard {
    /// Shared by every clone, so [`Guard::replace_rules`] reaches all connectors.
    rules: Arc<ArcSwap<GuardRules>>,
}

#[derive(Debug, Clone, Default)]
struct GuardRules {
    allowed: Vec<IpNet>,
    allowed_hosts: Vec<HostPattern>,
    own: Vec<SocketAddr>,
    allow_all: bool,
}

impl Guard {
    fn with(&self, f: impl FnOnce(&mut GuardRules)) -> Guard {
        let mut rules = GuardRules::clone(&self.rules.load());
        f(&mut rules);
        Guard { rules: Arc::new(ArcSwap::from_pointee(rules)) }
    }

    /// A guard that refuses nothing but the proxy's own listener (for tools run by an
    /// operator, e.g. `robotsgate check`).
    pub fn permissive() -> Guard {
        Guard::default().with(|r| r.allow_all = true)
    }

    /// Opens a CIDR (checked before the built-in denials).
    pub fn allow(self, net: IpNet) -> Guard {
        self.with(|r| r.allowed.push(net.trunc()))
    }

    /// Opens every address of the hosts matching `pattern` (e.g. an intranet service the
    /// scrapers are meant to reach).
    pub fn allow_host(self, pattern: HostPattern) -> Guard {
        self.with(|r| r.allowed_hosts.push(pattern))
    }

    /// Refuses the proxy's own listening address, whatever else is allowed (a request to
    /// the proxy through the proxy would loop). For a listener on an unspecified address
    /// (`0.0.0.0`, `::`), loopback and unspecified destinations on that port are refused;
    /// other local interface addresses are private ranges, refused by default anyway.
    pub fn deny_own_listener(self, addr: SocketAddr) -> Guard {
        self.with(|r| r.own.push(addr))
    }

    /// Takes over the rules of `other`, for this guard and every clone of it (reload).
    pub fn replace_rules(&self, other: &Guard) {
        self.rules.store(other.rules.load_full());
    }

    /// Whether a destination address may be connected to.
    pub fn check(&self, ip: IpAddr) -> Result<(), DenyReason> {
        self.check_addr(SocketAddr::new(ip, 0))
    }

    /// [`Guard::check`] for an address and port (the port matters for the own-listener
    /// rule).
    pub fn check_addr(&self, addr: SocketAddr) -> Result<(), DenyReason> {
        self.check_dest(None, addr)
    }

    /// Whether `host` may be reached at `addr`.
    pub fn check_dest(&self, host: Option<&Host>, addr: SocketAddr) -> Result<(), DenyReason> {
        let rules = self.rules.load();
        let ip = canonical_ip(addr.ip());
        let own = rules.own.iter().any(|o| {
            o.port() == addr.port()
                && (canonical_ip(o.ip()) == ip
                    || (o.ip().is_unspecified() && (ip.is_loopback() || ip.is_unspecified())))
        });
        if own && addr.port() != 0 {
            return Err(DenyReason::OwnListener);
        }
        if rules.allow_all
            || rules.allowed.iter().any(|n| n.contains(&ip) || n.contains(&addr.ip()))
            || host.is_some_and(|h| rules.allowed_hosts.iter().any(|p| p.matches(h)))
        {
            return Ok(());
        }
        match classify(addr.ip()) {
            Some(reason) => Err(reason),
            None => Ok(()),
        }
    }
}

/// An IPv4-mapped IPv6 address as the IPv4 address it is.
fn canonical_ip(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => ip,
        },
        v4 => v4,
    }
}

/// How names are resolved.
#[derive(Debug, Clone, Default)]
pub struct DnsConfig {
    /// Name servers to ask; empty means the system configuration (`/etc/resolv.conf`).
    pub servers: Vec<IpAddr>,
    /// Fixed answers, consulted first: lower-case host name → addresses.
    pub overrides: HashMap<String, Vec<IpAddr>>,
}

/// Resolves host names: static overrides first, then DNS.
#[derive(Clone)]
pub struct Resolver {
    overrides: Arc<HashMap<String, Vec<IpAddr>>>,
    /// Answers from DNS, kept until their TTL (at most [`MAX_ANSWER_AGE`]): every request
    /// resolves its destination for the guard, and a lookup through hickory costs more
    /// than the rest of a cached decision.
    answers: moka::sync::Cache<String, Arc<Answer>, foldhash::quality::RandomState>,
    dns: Option<TokioResolver>,
    /// Why DNS is not available (a broken system configuration), for the error.
    dns_error: Option<String>,
}

impl fmt::Debug for Resolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Resolver")
            .field("overrides", &self.overrides)
            .field("dns", &self.dns.is_some())
            .finish()
    }
}

/// The longest an answer from DNS is reused, whatever its TTL.
const MAX_ANSWER_AGE: Duration = Duration::from_secs(300);

/// Names whose answers are kept at once.
const MAX_ANSWERS: u64 = 10_000;

struct Answer {
    ips: Vec<IpAddr>,
    until: std::time::Instant,
}

impl Resolver {
    /// A resolver for `config`. A system configuration that cannot be read does not fail
    /// here: lookups then fail with the reason (overrides still work).
    pub fn new(config: &DnsConfig) -> Resolver {
        let overrides = config
            .overrides
            .iter()
            .map(|(k, v)| (k.trim_end_matches('.').to_ascii_lowercase(), v.clone()))
            .collect();
        let built = if config.servers.is_empty() {
            TokioResolver::builder_tokio().and_then(|b| b.build())
        } else {
            let servers = config.servers.iter().map(|ip| NameServerConfig::udp_and_tcp(*ip)).collect();
            TokioResolver::builder_with_config(
                ResolverConfig::from_name_servers(servers),
                TokioRuntimeProvider::default(),
            )
            .build()
        };
        let (dns, dns_error) = match built {
            Ok(r) => (Some(r), None),
            Err(e) => (None, Some(e.to_string())),
        };
        let answers = moka::sync::Cache::builder()
            .max_capacity(MAX_ANSWERS)
            .build_with_hasher(foldhash::quality::RandomState::default());
        Resolver { overrides: Arc::new(overrides), answers, dns, dns_error }
    }

    /// `f` of the addresses of `host` when they are known without asking DNS: an IP
    /// literal, a static entry, or an answer still within its TTL.
    fn with_known<R>(&self, host: &Host, f: impl FnOnce(&[IpAddr]) -> R) -> Option<R> {
        if let Some(ip) = host.ip() {
            return Some(f(&[ip]));
        }
        let name = host.name();
        // `example.com.` is `example.com` written as a fully qualified name (the keys are
        // stored without the dot).
        let key = name.trim_end_matches('.');
        if let Some(ips) = self.overrides.get(key) {
            return Some(f(ips));
        }
        let answer = self.answers.get(key)?;
        if std::time::Instant::now() < answer.until {
            return Some(f(&answer.ips));
        }
        self.answers.invalidate(key);
        None
    }

    /// The addresses of `host` (an IP literal is its own answer).
    pub async fn resolve(&self, host: &Host) -> Result<Vec<IpAddr>, ConnectError> {
        if let Some(ips) = self.with_known(host, <[IpAddr]>::to_vec) {
            return Ok(ips);
        }
        let name = host.name();
        let key = name.trim_end_matches('.');
        let Some(dns) = &self.dns else {
            let reason = self.dns_error.clone().unwrap_or_else(|| "no resolver".into());
            return Err(ConnectError::Dns { host: name.into_owned(), reason });
        };
        // A trailing dot: the name is absolute (no search domains).
        let fqdn = format!("{}.", name.trim_end_matches('.'));
        match dns.lookup_ip(fqdn.as_str()).await {
            Ok(lookup) => {
                let ips: Vec<IpAddr> = lookup.iter().collect();
                if ips.is_empty() {
                    Err(ConnectError::Dns { host: name.into_owned(), reason: "no addresses".into() })
                } else {
                    let until = lookup.valid_until().min(std::time::Instant::now() + MAX_ANSWER_AGE);
                    self.answers.insert(key.to_owned(), Arc::new(Answer { ips: ips.clone(), until }));
                    Ok(ips)
                }
            }
            Err(e) => {
                let reason = if e.is_no_records_found() { "no such host".to_owned() } else { e.to_string() };
                Err(ConnectError::Dns { host: name.into_owned(), reason })
            }
        }
    }
}

/// TLS trust for outbound connections.
#[derive(Debug, Clone)]
pub struct TlsConfig {
    /// Trust the Mozilla root store shipped in `webpki-roots`.
    pub webpki_roots: bool,
    /// Additional trusted roots (e.g. a company CA, or a test CA).
    pub extra_roots: Vec<CertificateDer<'static>>,
}

impl Default for TlsConfig {
    fn default() -> Self {
        TlsConfig { webpki_roots: true, extra_roots: Vec::new() }
    }
}

/// A TLS configuration problem.
#[derive(Debug, thiserror::Error)]
pub enum TlsSetupError {
    /// A root certificate was rejected by rustls.
    #[error("root certificate {index} is not usable: {reason}")]
    BadRoot {
        /// Position in `extra_roots`.
        index: usize,
        /// rustls' reason.
        reason: String,
    },
    /// rustls refused the protocol setup.
    #[error("TLS setup failed: {0}")]
    Rustls(#[from] rustls::Error),
    /// A PEM file could not be read.
    #[error("cannot read certificates from {path}: {reason}")]
    Pem {
        /// The file.
        path: String,
        /// What went wrong.
        reason: String,
    },
}

/// Reads all certificates from a PEM file.
pub fn load_pem_certs(path: &std::path::Path) -> Result<Vec<CertificateDer<'static>>, TlsSetupError> {
    use rustls::pki_types::pem::PemObject;
    let err = |reason: String| TlsSetupError::Pem { path: path.display().to_string(), reason };
    let certs: Vec<_> = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<_, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificates found".into()));
    }
    Ok(certs)
}

/// The rustls client configuration for `tls`, offering the ALPN protocols given.
pub fn client_config(tls: &TlsConfig, alpn: &[&[u8]]) -> Result<Arc<rustls::ClientConfig>, TlsSetupError> {
    let mut roots = rustls::RootCertStore::empty();
    if tls.webpki_roots {
        roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    }
    for (index, cert) in tls.extra_roots.iter().enumerate() {
        roots.add(cert.clone()).map_err(|e| TlsSetupError::BadRoot { index, reason: e.to_string() })?;
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Ok(Arc::new(config))
}

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
}

impl fmt::Debug for Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Connector")
            .field("resolver", &self.inner.resolver)
            .field("guard", &self.inner.guard)
            .field("connect_timeout", &self.inner.connect_timeout)
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
            }),
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
    }

    /// Connects to `origin` (TLS for https).
    pub async fn connect(&self, origin: &Origin) -> Result<Stream, ConnectError> {
        let host = origin.host();
        let deadline = Instant::now() + self.inner.connect_timeout;
        let timeout =
            |h: &Host| ConnectError::Timeout { host: h.to_string(), timeout: self.inner.connect_timeout };
        let ips = tokio::time::timeout_at(deadline, self.inner.resolver.resolve(host))
            .await
            .map_err(|_| timeout(host))??;
        let tcp = tokio::time::timeout_at(deadline, self.connect_addrs(host, &ips, origin.port()))
            .await
            .map_err(|_| timeout(host))??;
        match origin.scheme() {
            Scheme::Http => Ok(Stream::Plain(tcp)),
            Scheme::Https => {
                let name = match host {
                    Host::Domain(d) => ServerName::try_from(d.clone()),
                    Host::V4(ip) => Ok(ServerName::IpAddress(IpAddr::V4(*ip).into())),
                    Host::V6(ip) => Ok(ServerName::IpAddress(IpAddr::V6(*ip).into())),
                }
                .map_err(|e| ConnectError::Tls { host: host.to_string(), reason: e.to_string() })?;
                let tls = tokio::time::timeout_at(deadline, self.inner.tls.connect(name, tcp))
                    .await
                    .map_err(|_| timeout(host))?
                    .map_err(|e| ConnectError::Tls { host: host.to_string(), reason: tls_reason(&e) })?;
                Ok(Stream::Tls(Box::new(tls)))
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
        match self.inner.resolver.with_known(origin.host(), |ips| self.screen(origin, ips, |_| ())) {
            Some(verdict) => verdict,
            None => Box::pin(self.admit(origin)).await.map(|_| ()),
        }
    }

    /// Checks a destination against the guard without connecting: resolves it and
    /// returns the addresses that may be used.
    pub async fn admit(&self, origin: &Origin) -> Result<Vec<SocketAddr>, ConnectError> {
        let host = origin.host();
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

/// A plain or TLS connection to an origin.
#[derive(Debug)]
pub enum Stream {
    /// TCP.
    Plain(TcpStream),
    /// TLS over TCP.
    Tls(Box<tokio_rustls::client::TlsStream<TcpStream>>),
}

impl Stream {
    fn tcp(&self) -> &TcpStream {
        match self {
            Stream::Plain(s) => s,
            Stream::Tls(s) => s.get_ref().0,
        }
    }
}

impl Connection for Stream {
    fn connected(&self) -> Connected {
        let connected = self.tcp().connected();
        match self {
            Stream::Tls(s) if s.get_ref().1.alpn_protocol() == Some(b"h2") => connected.negotiated_h2(),
            _ => connected,
        }
    }
}

impl AsyncRead for Stream {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Stream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Stream::Tls(s) => Pin::new(s).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_flush(cx),
            Stream::Tls(s) => Pin::new(s).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Stream::Tls(s) => Pin::new(s).poll_shutdown(cx),
        }
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Stream::Plain(s) => Pin::new(s).poll_write_vectored(cx, bufs),
            Stream::Tls(s) => Pin::new(s).poll_write_vectored(cx, bufs),
        }
    }

    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A name from the system configuration (`localhost`, from the hosts file) resolves,
    /// is kept, and the kept answer is the one DNS gave.
    #[tokio::test]
    async fn dns_answers_are_kept_until_their_ttl() {
        let resolver = Resolver::new(&DnsConfig::default());
        let host = Host::parse("localhost").unwrap();
        let first = resolver.resolve(&host).await.expect("localhost resolves");
        assert!(first.iter().all(|ip| ip.is_loopback()), "{first:?}");
        let kept = resolver.answers.get("localhost").expect("answer kept");
        assert_eq!(kept.ips, first);
        assert!(kept.until <= std::time::Instant::now() + MAX_ANSWER_AGE);
        assert_eq!(resolver.resolve(&host).await.expect("again"), first);
        // An expired answer is not used: it is dropped and asked again.
        resolver.answers.insert(
            "localhost".into(),
            Arc::new(Answer { ips: vec![ip("192.0.2.1")], until: std::time::Instant::now() }),
        );
        assert_eq!(resolver.resolve(&host).await.expect("after expiry"), first);
    }

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn special_ranges() {
        for (a, want) in [
            ("127.0.0.1", Some(DenyReason::Loopback)),
            ("127.255.255.254", Some(DenyReason::Loopback)),
            ("10.1.2.3", Some(DenyReason::Private)),
            ("172.16.0.1", Some(DenyReason::Private)),
            ("172.31.255.255", Some(DenyReason::Private)),
            ("172.32.0.1", None),
            ("192.168.1.1", Some(DenyReason::Private)),
            ("100.64.0.1", Some(DenyReason::SharedAddressSpace)),
            ("100.127.255.255", Some(DenyReason::SharedAddressSpace)),
            ("100.128.0.1", None),
            ("169.254.169.254", Some(DenyReason::LinkLocal)),
            ("0.0.0.0", Some(DenyReason::Unspecified)),
            ("255.255.255.255", Some(DenyReason::Broadcast)),
            ("224.0.0.1", Some(DenyReason::Multicast)),
            ("93.184.216.34", None),
            ("::1", Some(DenyReason::Loopback)),
            ("::", Some(DenyReason::Unspecified)),
            ("fe80::1", Some(DenyReason::LinkLocal)),
            ("fd00::1", Some(DenyReason::UniqueLocal)),
            ("fc00::1", Some(DenyReason::UniqueLocal)),
            ("ff02::1", Some(DenyReason::Multicast)),
            ("::ffff:127.0.0.1", Some(DenyReason::Loopback)),
            ("::ffff:169.254.169.254", Some(DenyReason::LinkLocal)),
            ("::10.0.0.1", Some(DenyReason::Private)),
            ("64:ff9b::10.0.0.1", Some(DenyReason::Private)),
            ("64:ff9b::7f00:1", Some(DenyReason::Loopback)),
            ("64:ff9b:1::a9fe:a9fe", Some(DenyReason::LinkLocal)),
            ("::ffff:93.184.216.34", None),
            ("2606:2800:220:1:248:1893:25c8:1946", None),
        ] {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
    }

    /// Each IPv6 form that carries an IPv4 address, with internal addresses at the edges
    /// of their blocks and public ones just outside them.
    #[test]
    fn ipv6_forms_of_internal_ipv4_addresses() {
        use DenyReason::*;
        // (IPv4 address, verdict) pairs, each written into every form below.
        let v4s = [
            ("127.0.0.0", Some(Loopback)),
            ("127.255.255.255", Some(Loopback)),
            ("126.255.255.255", None),
            ("128.0.0.0", None),
            ("10.0.0.0", Some(Private)),
            ("10.255.255.255", Some(Private)),
            ("11.0.0.0", None),
            ("9.255.255.255", None),
            ("172.16.0.0", Some(Private)),
            ("172.31.255.255", Some(Private)),
            ("172.15.255.255", None),
            ("192.168.0.0", Some(Private)),
            ("192.168.255.255", Some(Private)),
            ("100.64.0.0", Some(SharedAddressSpace)),
            ("100.127.255.255", Some(SharedAddressSpace)),
            ("169.254.0.0", Some(LinkLocal)),
            ("169.254.169.254", Some(LinkLocal)),
            ("169.254.255.255", Some(LinkLocal)),
            ("169.253.255.255", None),
            ("0.0.0.1", Some(Unspecified)),
            ("224.0.0.0", Some(Multicast)),
            ("255.255.255.255", Some(Broadcast)),
            ("93.184.216.34", None),
        ];
        type Form = fn(u32) -> Ipv6Addr;
        let forms: [(&str, Form); 6] = [
            ("mapped", |v| Ipv6Addr::from((0xffffu128 << 32) | u128::from(v))),
            ("translated", |v| Ipv6Addr::from((0xffffu128 << 48) | u128::from(v))),
            ("nat64", |v| Ipv6Addr::from((0x0064_ff9bu128 << 96) | u128::from(v))),
            ("nat64 local /96", |v| Ipv6Addr::from((0x0064_ff9b_0001u128 << 80) | u128::from(v))),
            ("6to4", |v| Ipv6Addr::from((0x2002u128 << 112) | (u128::from(v) << 80) | 1)),
            // Teredo with a public server (192.0.2.x is reserved, so use 93.184.216.34)
            // and the client address inverted in the last 32 bits.
            ("teredo client", |v| {
                Ipv6Addr::from((0x2001_0000u128 << 96) | (0x5db8_d822u128 << 64) | u128::from(!v))
            }),
        ];
        for (name, form) in forms {
            for (v4, want) in v4s {
                let v4: Ipv4Addr = v4.parse().unwrap();
                let v6 = form(u32::from(v4));
                let got = classify(IpAddr::V6(v6));
                // Teredo is in 2001::/23, which is not globally reachable: refused as
                // reserved when its addresses are public.
                let want = match (name, want) {
                    ("teredo client", None) => Some(Reserved),
                    (_, w) => w,
                };
                assert_eq!(got, want, "{name}: {v6} ({v4})");
            }
        }
        // Teredo's server address (bits 32-63), client public.
        let teredo_server = |v: u32| {
            Ipv6Addr::from((0x2001_0000u128 << 96) | (u128::from(v) << 64) | u128::from(!0x5db8_d822u32))
        };
        assert_eq!(classify(IpAddr::V6(teredo_server(0x7f00_0001))), Some(Loopback));
        assert_eq!(classify(IpAddr::V6(teredo_server(0x0a00_0001))), Some(Private));
        // The forms the issue named.
        for (a, want) in [
            ("2002:7f00:1::", Some(Loopback)),
            ("2002:a9fe:a9fe::", Some(LinkLocal)),
            ("::ffff:0:127.0.0.1", Some(Loopback)),
            ("::ffff:0:169.254.169.254", Some(LinkLocal)),
            ("2002:5db8:d822::1", None),
            ("2001:0:5db8:d822::1", Some(Reserved)),
        ] {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
    }

    /// The non-global blocks of IANA's IPv6 special-purpose registry, at their edges.
    #[test]
    fn ipv6_special_purpose_blocks() {
        use DenyReason::*;
        for (a, want) in [
            ("64:ff9b:1::", Some(Unspecified)),
            ("64:ff9b:1:1::1", Some(Reserved)),
            ("64:ff9b:1:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("64:ff9b:2::1", Some(Reserved)),
            ("100::", Some(Reserved)),
            ("100::ffff:ffff:ffff:ffff", Some(Reserved)),
            ("100:0:0:1::1", Some(Reserved)),
            ("100:0:0:2::1", None),
            ("2001:2::1", Some(Reserved)),
            ("2001:10::1", Some(Reserved)),
            ("2001:1ff:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("2001:200::1", None),
            ("2001:1::1", None),
            ("2001:1::2", None),
            ("2001:1::3", None),
            ("2001:1::4", Some(Reserved)),
            ("2001:3::1", None),
            ("2001:4:112::1", None),
            ("2001:4:113::1", Some(Reserved)),
            ("2001:20::1", None),
            ("2001:3f:ffff::1", None),
            ("2001:db8::", Some(Reserved)),
            ("2001:db8:ffff:ffff:ffff:ffff:ffff:ffff", Some(Reserved)),
            ("2001:db9::1", None),
            ("3fff::", Some(Reserved)),
            ("3fff:fff:ffff::1", Some(Reserved)),
            ("3fff:1000::1", None),
            ("64:ff9b::1:0:1", Some(Reserved)),
            ("3ffe:ffff::1", None),
            ("5f00::1", Some(Reserved)),
            ("5f01::1", None),
            ("fec0::1", Some(Private)),
            ("::2", Some(Unspecified)),
            ("::1:0:0:1", Some(Reserved)),
            ("1::1", Some(Reserved)),
            ("2600::1", None),
        ] {
            assert_eq!(classify(ip(a)), want, "{a}");
        }
    }

    #[test]
    fn guard_allow_and_own_listener() {
        let g = Guard::default().allow("127.0.0.0/8".parse().unwrap());
        assert!(g.check(ip("127.0.0.1")).is_ok());
        assert!(g.check(ip("::ffff:127.0.0.1")).is_ok());
        assert_eq!(g.check(ip("10.0.0.1")), Err(DenyReason::Private));
        let g = g.deny_own_listener("127.0.0.1:3128".parse().unwrap());
        assert_eq!(g.check_addr("127.0.0.1:3128".parse().unwrap()), Err(DenyReason::OwnListener));
        assert!(g.check_addr("127.0.0.1:3129".parse().unwrap()).is_ok());
        let g = Guard::permissive().deny_own_listener("0.0.0.0:3128".parse().unwrap());
        assert_eq!(g.check_addr("127.0.0.1:3128".parse().unwrap()), Err(DenyReason::OwnListener));
        assert!(g.check_addr("10.0.0.5:3128".parse().unwrap()).is_ok());
        assert!(Guard::permissive().check(ip("10.0.0.1")).is_ok());
        let hosts = Guard::default().allow_host(HostPattern::parse("*.intranet.test").unwrap());
        let h = Host::parse("wiki.intranet.test").unwrap();
        assert!(hosts.check_dest(Some(&h), "10.0.0.5:80".parse().unwrap()).is_ok());
        assert!(hosts.check_dest(None, "10.0.0.5:80".parse().unwrap()).is_err());
        // Reload: every clone sees the new rules.
        let live = Guard::default();
        let clone = live.clone();
        live.replace_rules(&Guard::default().allow("10.0.0.0/8".parse().unwrap()));
        assert!(clone.check(ip("10.1.2.3")).is_ok());
    }
}
