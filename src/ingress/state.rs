//! The bounded state enforcement keeps: when each bot (token and client network) may
//! make its next request, and when it last fetched robots.txt.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use ipnet::{IpNet, Ipv4Net, Ipv6Net};
use tokio::time::Instant;

/// The network a client address counts in: its /24 (IPv4) or /64 (IPv6).
pub fn client_network(ip: IpAddr) -> IpNet {
    match ip {
        IpAddr::V4(v4) => Ipv4Net::new(v4, 24).map(|n| IpNet::V4(n.trunc())).unwrap_or(IpNet::from(ip)),
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => client_network(IpAddr::V4(v4)),
            None => Ipv6Net::new(v6, 64).map(|n| IpNet::V6(n.trunc())).unwrap_or(IpNet::from(ip)),
        },
    }
}

/// A bot on a site: the host name given that the site is (`None`: the default site), its
/// token (lower-cased) and its client network.
pub(crate) type BotKey = (Option<Arc<str>>, Box<str>, Option<IpNet>);

pub(crate) fn bot_key(site: Option<&Arc<str>>, token: &str, ip: Option<IpAddr>) -> BotKey {
    (site.cloned(), token.to_ascii_lowercase().into_boxed_str(), ip.map(client_network))
}

/// Per bot, the earliest time of its next request: a bounded map. Entries whose time has
/// passed are dropped when the map is full; a bot that finds it full of waiting bots is
/// not paced (counted in [`Limiter::untracked`]).
#[derive(Debug)]
pub(crate) struct Limiter {
    next: Mutex<HashMap<BotKey, Instant>>,
    max: usize,
    untracked: std::sync::atomic::AtomicU64,
}

impl Limiter {
    pub(crate) fn new(max: usize) -> Limiter {
        Limiter { next: Mutex::new(HashMap::new()), max: max.max(1), untracked: Default::default() }
    }

    /// Whether the bot may go now, `delay` after its last request; `Err(wait)` when not.
    pub(crate) fn admit(&self, key: BotKey, delay: Duration, now: Instant) -> Result<(), Duration> {
        let Ok(mut map) = self.next.lock() else { return Ok(()) };
        if let Some(next) = map.get_mut(&key) {
            if *next > now {
                return Err(*next - now);
            }
            *next = now + delay;
            return Ok(());
        }
        if map.len() >= self.max {
            map.retain(|_, next| *next > now);
            if map.len() >= self.max {
                self.untracked.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                return Ok(());
            }
        }
        map.insert(key, now + delay);
        Ok(())
    }

    /// The bot's next request comes at `next` at the earliest (what the fleet's store
    /// said, kept for pacing alone if it goes away); not kept when the map is full.
    pub(crate) fn note(&self, key: BotKey, next: Instant) {
        let Ok(mut map) = self.next.lock() else { return };
        if map.len() >= self.max && !map.contains_key(&key) {
            map.retain(|_, n| *n > Instant::now());
            if map.len() >= self.max {
                return;
            }
        }
        map.insert(key, next);
    }

    /// Bots not paced because the map was full.
    #[cfg(test)]
    fn untracked(&self) -> u64 {
        self.untracked.load(std::sync::atomic::Ordering::Relaxed)
    }
}

/// When a bot last fetched robots.txt, and which file it got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RobotsFetch {
    /// When.
    pub time: SystemTime,
    /// SHA-256 (hex) of the file served, when robotsgate knew it.
    pub sha256: Option<Arc<str>>,
}

/// Per bot, its last robots.txt fetch: bounded (moka), kept a week. Hashed with foldhash
/// (seeded per process, as the known agents' words), not SipHash: the look-up is on
/// every bot request.
#[derive(Debug, Clone)]
pub(crate) struct FetchMemory {
    map: moka::sync::Cache<BotKey, RobotsFetch, foldhash::quality::RandomState>,
}

impl FetchMemory {
    pub(crate) fn new(max: u64) -> FetchMemory {
        FetchMemory {
            map: moka::sync::Cache::builder()
                .max_capacity(max)
                .time_to_live(Duration::from_secs(7 * 86_400))
                .build_with_hasher(foldhash::quality::RandomState::default()),
        }
    }

    pub(crate) fn remember(&self, key: BotKey, fetch: RobotsFetch) {
        self.map.insert(key, fetch);
    }

    pub(crate) fn last(&self, key: &BotKey) -> Option<RobotsFetch> {
        self.map.get(key)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn networks() {
        assert_eq!(client_network("192.0.2.77".parse().unwrap()).to_string(), "192.0.2.0/24");
        assert_eq!(client_network("2001:db8:1:2:3:4:5:6".parse().unwrap()).to_string(), "2001:db8:1:2::/64");
        assert_eq!(client_network("::ffff:192.0.2.9".parse().unwrap()).to_string(), "192.0.2.0/24");
    }

    #[test]
    fn limiter_paces_per_key_and_is_bounded() {
        let l = Limiter::new(2);
        let t0 = Instant::now();
        let d = Duration::from_secs(5);
        let a = || bot_key(None, "GPTBot", Some("192.0.2.1".parse().unwrap()));
        assert!(l.admit(a(), d, t0).is_ok());
        assert_eq!(
            l.admit(
                bot_key(None, "gptbot", Some("192.0.2.200".parse().unwrap())),
                d,
                t0 + Duration::from_secs(1)
            ),
            Err(Duration::from_secs(4))
        );
        assert!(l.admit(bot_key(None, "GPTBot", Some("198.51.100.1".parse().unwrap())), d, t0).is_ok());
        // Full of waiting bots: a third is not tracked.
        assert!(l.admit(bot_key(None, "ClaudeBot", None), d, t0).is_ok());
        assert_eq!(l.untracked(), 1);
        // Later, the passed entries are dropped.
        assert!(l.admit(bot_key(None, "ClaudeBot", None), d, t0 + d).is_ok());
        assert!(l.admit(a(), d, t0 + d).is_ok());
    }
}
