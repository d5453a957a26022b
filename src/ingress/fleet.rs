//! [`SharedPacing`]: the ingress's per-bot pacing kept where every replica of a fleet sees
//! it (fleet mode keeps it in Redis: `cluster::RedisIngressPacing`), so that a bot's
//! `Crawl-delay` holds across the replicas behind one load balancer.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use ipnet::IpNet;

/// A future of a [`SharedPacing`]: `None` when the store did not answer (unreachable, too
/// slow, or an answer that does not read), else whether the bot may go now (`Err(wait)`:
/// not before `wait`).
pub type PacingFuture<'a> = Pin<Box<dyn Future<Output = Option<Result<(), Duration>>> + Send + 'a>>;

/// One bot as the ingress paces it: the site (a host name given to
/// [`IngressBuilder::hosts`](super::IngressBuilder::hosts), or `None`: the default site),
/// its product token (lower-case) and client network (/24 IPv4, /64 IPv6; `None`: the
/// client's address is not known).
#[derive(Debug, Clone, Copy)]
pub struct PacedBot<'a> {
    /// The host name given whose site paces it, lower-case (`None`: the default site).
    pub site: Option<&'a str>,
    /// The product token, lower-case (`*` bots: the unknown agent's name).
    pub token: &'a str,
    /// The client network.
    pub network: Option<IpNet>,
}

/// Per-bot pacing shared by a fleet of ingress replicas: give it to
/// [`IngressBuilder::share_pacing`](super::IngressBuilder::share_pacing). Each step is
/// atomic per bot and on the store's own clock.
pub trait SharedPacing: Send + Sync + 'static {
    /// Whether the store is reachable as far as is known: when not, the layer does not ask
    /// it (a request must not wait for a store that is down) and paces alone, or refuses
    /// when [`SharedPacing::refuse_while_down`] says so.
    fn is_up(&self) -> bool;

    /// Whether a paced bot is refused (`503 cluster-unavailable`) while the store cannot be
    /// reached, rather than paced by this replica alone.
    fn refuse_while_down(&self) -> bool;

    /// Takes `bot`'s next request: admitted when it comes `delay` or more after its last
    /// admitted one anywhere in the fleet (then this one is its last), else how long it has
    /// to wait.
    fn admit<'a>(&'a self, bot: PacedBot<'a>, delay: Duration) -> PacingFuture<'a>;
}
