//! [`RedisReplays`]: the Web Bot Auth replay check shared by the fleet in Redis, so that a
//! signature one replica accepted is a replay at every other (issue 29).
//!
//! One key per signature seen, `{prefix}replay:{<hash>}` (the hash of its directory, key
//! and nonce: [`ReplayKey`]), set with `SET … NX EXAT <second after>`: the first replica
//! to set it accepted the signature, every later one finds it. Redis forgets it once the
//! signature can no longer be accepted (its `expires` plus the clock skew). One key per
//! command, so any node of a Redis Cluster holds it.

use std::fmt::Write as _;

use crate::identity::httpsig::{ReplayFuture, ReplayKey, SharedReplays};

use super::Cluster;

/// Signatures seen by the fleet, in Redis: give it to
/// [`httpsig::Verifier::share_replays`](crate::identity::httpsig::Verifier::share_replays).
#[derive(Debug, Clone)]
pub struct RedisReplays {
    cluster: Cluster,
}

impl RedisReplays {
    /// The replay check shared through `cluster`'s Redis.
    pub fn new(cluster: Cluster) -> RedisReplays {
        RedisReplays { cluster }
    }

    /// The Redis key of `key`.
    fn redis_key(&self, key: &ReplayKey) -> String {
        let prefix = &self.cluster.config().key_prefix;
        let mut out = String::with_capacity(prefix.len() + 7 + 2 + 64);
        out.push_str(prefix);
        out.push_str("replay:{");
        for b in key.as_bytes() {
            let _ = write!(out, "{b:02x}");
        }
        out.push('}');
        out
    }
}

impl SharedReplays for RedisReplays {
    fn is_up(&self) -> bool {
        self.cluster.is_up()
    }

    fn record<'a>(&'a self, key: &'a ReplayKey, expires: i64) -> ReplayFuture<'a> {
        Box::pin(async move {
            let mut conn = self.cluster.connection();
            let mut cmd = redis::cmd("SET");
            // Kept through the second `expires` (Redis drops a key when its `EXAT` second
            // begins), and at least a second ahead: a signature verified here has not expired.
            let now = crate::identity::httpsig::unix_seconds(std::time::SystemTime::now());
            let at = expires.saturating_add(1).max(now + 1);
            cmd.arg(self.redis_key(key)).arg(1u8).arg("NX").arg("EXAT").arg(at);
            let answer = tokio::time::timeout(
                self.cluster.config().command_timeout,
                cmd.query_async::<Option<String>>(&mut conn),
            )
            .await;
            match answer {
                Ok(Ok(set)) => {
                    self.cluster.note(true, None);
                    Some(set.is_some())
                }
                Ok(Err(e)) => {
                    self.cluster.failed(&e);
                    None
                }
                Err(_) => {
                    self.cluster.note(false, Some("the replay check timed out"));
                    None
                }
            }
        })
    }
}
