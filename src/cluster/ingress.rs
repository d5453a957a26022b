//! [`RedisIngressPacing`]: the ingress's per-bot pacing shared by the fleet in Redis, with
//! the pacer's own slot script (`TAKE`, on Redis' clock) and a limit of zero: a bot's
//! request is admitted when its slot is now, else it is told how long to wait.
//!
//! One hash per bot, `<prefix>ingress:{<token>|<network>}:pace` (the bot in braces is a
//! hash tag: one key per command, so any node of a Redis Cluster holds it), expiring once
//! its delay has passed.

use std::time::Duration;

use super::store::take_slot;
use super::{Cluster, OnClusterError, int};
use crate::ingress::{PacedBot, PacingFuture, SharedPacing};

/// Per-bot pacing shared by a fleet of ingress replicas in Redis: give it to
/// [`IngressBuilder::share_pacing`](crate::ingress::IngressBuilder::share_pacing).
/// `on_error = "refuse"` in the cluster's configuration refuses paced bots while Redis
/// cannot be reached.
#[derive(Debug, Clone)]
pub struct RedisIngressPacing {
    cluster: Cluster,
}

impl RedisIngressPacing {
    /// The pacing shared through `cluster`'s Redis.
    pub fn new(cluster: Cluster) -> RedisIngressPacing {
        RedisIngressPacing { cluster }
    }

    /// The Redis key of `bot`.
    fn key(&self, bot: PacedBot<'_>) -> String {
        let network = bot.network.map_or_else(|| "-".to_owned(), |n| n.to_string());
        // Braces in a token would move the hash tag: the token is a product token
        // (letters, digits, `-`, `_`), but `{`/`}` are not trusted to be absent.
        let tame =
            |s: &str| -> String { s.chars().map(|c| if c == '{' || c == '}' { '_' } else { c }).collect() };
        let (prefix, token) = (&self.cluster.config().key_prefix, tame(bot.token));
        match bot.site {
            // The default site's key is the one before sites had names: a replica of an
            // older version paces the same bot by it.
            None => format!("{prefix}ingress:{{{token}|{network}}}:pace"),
            Some(site) => format!("{prefix}ingress:{{{}|{token}|{network}}}:pace", tame(site)),
        }
    }
}

impl SharedPacing for RedisIngressPacing {
    fn is_up(&self) -> bool {
        self.cluster.is_up()
    }

    fn refuse_while_down(&self) -> bool {
        self.cluster.config().on_error == OnClusterError::Refuse
    }

    fn admit<'a>(&'a self, bot: PacedBot<'a>, delay: Duration) -> PacingFuture<'a> {
        Box::pin(async move {
            let key = self.key(bot);
            let values = take_slot(&self.cluster, &key, delay, Duration::ZERO).await?;
            // {taken, wait_ms, ...}
            let (taken, wait) = (int(&values[0])?, int(&values[1])?);
            if taken == 1 {
                return Some(Ok(()));
            }
            Some(Err(Duration::from_millis(u64::try_from(wait).ok()?.max(1))))
        })
    }
}
