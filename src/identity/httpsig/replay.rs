//! The replay check (RFC 9421 §7.2.2): signatures seen, kept until they expire, bounded.
//!
//! A signature is remembered by [`ReplayKey`]: its directory, key and nonce (or, without a
//! nonce, its bytes), hashed. Only signatures that verified are recorded, so only a key
//! holder can fill the cache; when it is full, the entry that would live longest goes
//! first (a flood of long-lived signatures evicts itself before short-lived ones), and a
//! signature that would outlive everything kept is not recorded
//! ([`ReplayCheck::Full`]): its replay would not be noticed, and the verdict says so.

use std::collections::{BTreeSet, HashMap};
use std::future::Future;
use std::pin::Pin;
use std::sync::Mutex;

/// What a signature is remembered by: SHA-256 of (directory, keyid, nonce or signature).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ReplayKey([u8; 32]);

impl ReplayKey {
    /// The key of a signature by `keyid` of `directory`, with `nonce` (or, without one,
    /// the signature's bytes).
    pub fn new(directory: &str, keyid: &str, nonce: Option<&str>, signature: &[u8]) -> ReplayKey {
        let mut ctx = ring::digest::Context::new(&ring::digest::SHA256);
        for part in [directory.as_bytes(), keyid.as_bytes()] {
            ctx.update(&(part.len() as u64).to_be_bytes());
            ctx.update(part);
        }
        match nonce {
            Some(n) => {
                ctx.update(b"n");
                ctx.update(n.as_bytes());
            }
            None => {
                ctx.update(b"s");
                ctx.update(signature);
            }
        }
        let mut out = [0u8; 32];
        out.copy_from_slice(ctx.finish().as_ref());
        ReplayKey(out)
    }

    /// The hash.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }
}

/// A future of a [`SharedReplays`].
pub type ReplayFuture<'a> = Pin<Box<dyn Future<Output = Option<bool>> + Send + 'a>>;

/// Signatures seen, shared by a fleet of replicas (fleet mode keeps them in Redis:
/// `cluster::RedisReplays`), so that a signature one replica accepted is a replay at every
/// other. Asked after the replica's own replay cache, for signatures that verified.
pub trait SharedReplays: Send + Sync + 'static {
    /// Whether the store is reachable as far as is known: when not, it is not asked (the
    /// replica's own check stands).
    fn is_up(&self) -> bool;

    /// Atomically records `key` through the second `expires` (seconds since the epoch:
    /// the last second the signature is accepted, its own `expires` plus the clock skew
    /// allowed): `Some(true)`
    /// when no replica had, `Some(false)` when one had (a replay), `None` when the store
    /// did not answer in time (the replica's own check stands).
    fn record<'a>(&'a self, key: &'a ReplayKey, expires: i64) -> ReplayFuture<'a>;
}

/// What [`ReplayCache::check_and_record`] found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayCheck {
    /// Not seen before; recorded until it expires.
    New,
    /// Seen before and not expired: a replay.
    Replayed,
    /// Not seen before, and not recorded: the cache is full of entries living longer.
    Full,
}

/// Signatures seen, until they expire: at most `capacity` of them.
#[derive(Debug)]
pub struct ReplayCache {
    capacity: usize,
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    expires: HashMap<ReplayKey, i64>,
    by_expiry: BTreeSet<(i64, ReplayKey)>,
}

impl ReplayCache {
    /// A cache of at most `capacity` signatures.
    pub fn new(capacity: usize) -> ReplayCache {
        ReplayCache { capacity, inner: Mutex::default() }
    }

    /// Atomically: whether `key` was seen and has not expired at `now`, and if not, records
    /// it through the second `expires` (seconds since the epoch; the verifier gives the
    /// last second the signature is accepted, its `expires` plus the clock skew).
    pub fn check_and_record(&self, key: ReplayKey, expires: i64, now: i64) -> ReplayCheck {
        let mut inner = self.inner.lock().unwrap_or_else(|e| e.into_inner());
        let Inner { expires: map, by_expiry } = &mut *inner;
        // Forget what expired.
        while let Some(&(at, k)) = by_expiry.first() {
            if at >= now {
                break;
            }
            by_expiry.pop_first();
            map.remove(&k);
        }
        if map.contains_key(&key) {
            return ReplayCheck::Replayed;
        }
        if map.len() >= self.capacity {
            match by_expiry.last() {
                Some(&(latest, k)) if latest > expires => {
                    by_expiry.pop_last();
                    map.remove(&k);
                }
                _ => return ReplayCheck::Full,
            }
        }
        map.insert(key, expires);
        by_expiry.insert((expires, key));
        ReplayCheck::New
    }

    /// How many signatures are remembered.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.inner.lock().unwrap_or_else(|e| e.into_inner()).expires.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn k(n: u8) -> ReplayKey {
        ReplayKey::new("https://a.test/", "kid", Some(&n.to_string()), b"")
    }

    #[test]
    fn replays_are_seen_until_expiry() {
        let c = ReplayCache::new(10);
        assert_eq!(c.check_and_record(k(1), 100, 50), ReplayCheck::New);
        assert_eq!(c.check_and_record(k(1), 100, 60), ReplayCheck::Replayed);
        assert_eq!(c.check_and_record(k(1), 100, 100), ReplayCheck::Replayed);
        // Expired: forgotten, and new again.
        assert_eq!(c.check_and_record(k(1), 200, 101), ReplayCheck::New);
        assert_eq!(c.len(), 1);
    }

    #[test]
    fn keys_tell_directories_keys_and_nonces_apart() {
        let a = ReplayKey::new("https://a.test/", "k", Some("n"), b"sig");
        assert_ne!(a, ReplayKey::new("https://b.test/", "k", Some("n"), b"sig"));
        assert_ne!(a, ReplayKey::new("https://a.test/", "j", Some("n"), b"sig"));
        assert_ne!(a, ReplayKey::new("https://a.test/", "k", Some("m"), b"sig"));
        assert_eq!(a, ReplayKey::new("https://a.test/", "k", Some("n"), b"other"));
        assert_ne!(ReplayKey::new("d", "k", None, b"s1"), ReplayKey::new("d", "k", None, b"s2"));
        // No ambiguity from joining the parts.
        assert_ne!(ReplayKey::new("ab", "c", Some("n"), b""), ReplayKey::new("a", "bc", Some("n"), b""));
    }

    #[test]
    fn full_cache_evicts_the_longest_lived_first() {
        let c = ReplayCache::new(3);
        assert_eq!(c.check_and_record(k(1), 1000, 0), ReplayCheck::New);
        assert_eq!(c.check_and_record(k(2), 100, 0), ReplayCheck::New);
        assert_eq!(c.check_and_record(k(3), 100, 0), ReplayCheck::New);
        // Shorter-lived than k(1): k(1) goes.
        assert_eq!(c.check_and_record(k(4), 60, 0), ReplayCheck::New);
        assert_eq!(c.check_and_record(k(1), 1000, 0), ReplayCheck::Full);
        assert_eq!(c.check_and_record(k(4), 60, 1), ReplayCheck::Replayed);
        assert_eq!(c.len(), 3);
        // Once the short ones expire there is room again.
        assert_eq!(c.check_and_record(k(1), 1000, 101), ReplayCheck::New);
    }
}
