//! The destination guard: which addresses outbound connections may go to.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use arc_swap::ArcSwap;
use ipnet::IpNet;

use super::address::{DenyReason, classify};
use crate::origin::{Host, HostPattern};

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guard_allow_and_own_listener() {
        let g = Guard::default().allow("127.0.0.0/8".parse().unwrap());
        assert!(g.check("127.0.0.1".parse().unwrap()).is_ok());
        assert!(g.check("::ffff:127.0.0.1".parse().unwrap()).is_ok());
        assert_eq!(g.check("10.0.0.1".parse().unwrap()), Err(DenyReason::Private));
        let g = g.deny_own_listener("127.0.0.1:3128".parse().unwrap());
        assert_eq!(g.check_addr("127.0.0.1:3128".parse().unwrap()), Err(DenyReason::OwnListener));
        assert!(g.check_addr("127.0.0.1:3129".parse().unwrap()).is_ok());
        let g = Guard::permissive().deny_own_listener("0.0.0.0:3128".parse().unwrap());
        assert_eq!(g.check_addr("127.0.0.1:3128".parse().unwrap()), Err(DenyReason::OwnListener));
        assert!(g.check_addr("10.0.0.5:3128".parse().unwrap()).is_ok());
        assert!(Guard::permissive().check("10.0.0.1".parse().unwrap()).is_ok());
        let hosts = Guard::default().allow_host(HostPattern::parse("*.intranet.test").unwrap());
        let h = Host::parse("wiki.intranet.test").unwrap();
        assert!(hosts.check_dest(Some(&h), "10.0.0.5:80".parse().unwrap()).is_ok());
        assert!(hosts.check_dest(None, "10.0.0.5:80".parse().unwrap()).is_err());
        // Reload: every clone sees the new rules.
        let live = Guard::default();
        let clone = live.clone();
        live.replace_rules(&Guard::default().allow("10.0.0.0/8".parse().unwrap()));
        assert!(clone.check("10.1.2.3".parse().unwrap()).is_ok());
    }
}
