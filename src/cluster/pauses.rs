//! The fleet's back-off pauses, pushed: the replica whose request got a 429 or 503
//! publishes the pause the Redis script set (`PUBLISH <prefix>pauses`), and every replica
//! subscribes and mirrors it in its own lane ([`PauseSink`]). A replica asks Redis about
//! an origin only when it paces it (a delay, or a pause it knows of): without this, a
//! pause one replica started held no request of another to an origin without a delay.
//! It costs a message per pause and a connection per replica, nothing per request.
//!
//! A message is a [`PauseNotice`]'s text (`PauseNotice::to_message`); one that does not
//! read is ignored (another program may publish on the channel). The
//! subscription is checked with a `PING` every [`CHECK`] (a connection dropped without a
//! reset is noticed) and made again after Redis goes away, every second until it
//! answers; a Redis Cluster forwards every message to every node, so one seed node is
//! enough. With Redis ACLs the user needs the channel (`&<prefix>pauses`): a refusal is
//! a warning.

use std::time::Duration;

use futures_util::StreamExt as _;

use super::{Cluster, Redis};
use crate::pacing::{PauseNotice, PauseSink};

/// How long a replica waits before subscribing again.
const RETRY: Duration = Duration::from_secs(1);
/// How often a subscription is checked (and the pacer behind it looked for).
const CHECK: Duration = Duration::from_secs(10);

/// The channel of `cluster`'s pauses.
pub(super) fn channel(cluster: &Cluster) -> String {
    format!("{}pauses", cluster.config().key_prefix)
}

/// Publishes `text` on the cluster's channel, in the background, bounded by the command
/// timeout (a replica that misses it paces as before: by what it asks Redis).
pub(super) fn publish(cluster: &Cluster, text: String) {
    let cluster = cluster.clone();
    tokio::spawn(async move {
        let mut conn = cluster.connection();
        let cmd = redis::cmd("PUBLISH").arg(channel(&cluster)).arg(text).clone();
        let sent =
            tokio::time::timeout(cluster.config().command_timeout, cmd.query_async::<i64>(&mut conn)).await;
        match sent {
            Ok(Ok(_)) => {}
            // Refused (an ACL without the channel, say): the other replicas miss every pause.
            Ok(Err(e)) => tracing::warn!(error = %e, "cluster: a pause could not be published"),
            Err(_) => tracing::debug!("cluster: publishing a pause timed out"),
        }
    });
}

/// Subscribes to the cluster's pauses and tells `sink` of each, until the pacer behind
/// `sink` is gone. Needs a tokio runtime: without one, says so and watches nothing.
pub(super) fn watch(cluster: &Cluster, sink: PauseSink) {
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        tracing::warn!("cluster: no tokio runtime; pauses of other replicas are not watched");
        return;
    };
    let cluster = cluster.clone();
    runtime.spawn(async move {
        let nodes = match &cluster.config().redis {
            Redis::Server(url) => vec![url.clone()],
            Redis::Cluster(seeds) => seeds.clone(),
        };
        let channel = channel(&cluster);
        let mut node = 0;
        let mut warned = false;
        while sink.is_open() {
            // The seed nodes in turn (a Redis Cluster's; one server's one URL).
            let Some(url) = nodes.get(node % nodes.len().max(1)) else { return };
            node = node.wrapping_add(1);
            match subscribe(&cluster, url, &channel).await {
                Ok(pubsub) => {
                    tracing::debug!("cluster: watching the fleet's pauses");
                    warned = false;
                    if !listen(&cluster, pubsub, &sink).await {
                        return;
                    }
                }
                Err(e) if !warned => {
                    tracing::warn!(error = %e, "cluster: cannot watch the fleet's pauses (trying every second)");
                    warned = true;
                }
                Err(e) => tracing::debug!(error = %e, "cluster: cannot watch the fleet's pauses"),
            }
            tokio::time::sleep(RETRY).await;
        }
    });
}

/// Tells `sink` of the messages on `pubsub` until the subscription ends or does not answer
/// a `PING` (`true`: subscribe again), or the pacer is gone (`false`).
async fn listen(cluster: &Cluster, pubsub: redis::aio::PubSub, sink: &PauseSink) -> bool {
    let (mut control, mut messages) = pubsub.split();
    let mut check = tokio::time::interval(CHECK);
    check.tick().await;
    loop {
        tokio::select! {
            m = messages.next() => match m {
                Some(m) => {
                    if let Some(n) = PauseNotice::from_message(m.get_payload_bytes())
                        && !sink.tell(n)
                    {
                        return false;
                    }
                }
                None => return true,
            },
            _ = check.tick() => {
                if !sink.is_open() {
                    return false;
                }
                let ping = control.ping::<redis::Value>();
                if !matches!(tokio::time::timeout(cluster.config().command_timeout, ping).await, Ok(Ok(_))) {
                    tracing::debug!("cluster: the pause subscription did not answer a PING");
                    return true;
                }
            }
        }
    }
}

async fn subscribe(cluster: &Cluster, url: &str, channel: &str) -> Result<redis::aio::PubSub, String> {
    let config = cluster.config();
    let client = super::client_for(url, config.ca_pem.as_ref()).map_err(|e| e.to_string())?;
    let mut pubsub = tokio::time::timeout(config.connect_timeout, client.get_async_pubsub())
        .await
        .map_err(|_| "connect timed out".to_string())?
        .map_err(|e| e.to_string())?;
    tokio::time::timeout(config.command_timeout, pubsub.subscribe(channel))
        .await
        .map_err(|_| "SUBSCRIBE timed out".to_string())?
        .map_err(|e| e.to_string())?;
    Ok(pubsub)
}
