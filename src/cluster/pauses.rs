//! The fleet's back-off pauses, pushed: the replica whose request got a 429 or 503
//! publishes the pause the Redis script set (`PUBLISH <prefix>pauses`), and every replica
//! subscribes and mirrors it in its own lane ([`PauseSink`]). A replica asks Redis about
//! an origin only when it paces it (a delay, or a pause it knows of): without this, a
//! pause one replica started held no request of another to an origin without a delay.
//! It costs a message per pause and a connection per replica, nothing per request.
//!
//! A message is `v1 <left ms> <pause ms> <streak> <status> <token> <origin> [<Retry-After>]`;
//! one that does not read is ignored (another program may publish on the channel). The
//! subscription is checked with a `PING` every [`CHECK`] (a connection dropped without a
//! reset is noticed) and made again after Redis goes away, every second until it
//! answers; a Redis Cluster forwards every message to every node, so one seed node is
//! enough. With Redis ACLs the user needs the channel (`&<prefix>pauses`): a refusal is
//! a warning.

use std::sync::Arc;
use std::time::Duration;

use futures_util::StreamExt as _;

use super::{Cluster, Redis};
use crate::origin::Origin;
use crate::pacing::{PauseInfo, PauseNotice, PauseSink};

/// A message longer than this is not a pause of robotsgate's.
const MAX_MESSAGE: usize = 4096;
/// A pause longer than this is not believed (`pacing.max_backoff` is at most hours).
const MAX_PAUSE: Duration = Duration::from_secs(7 * 24 * 3600);
/// How long a replica waits before subscribing again.
const RETRY: Duration = Duration::from_secs(1);
/// How often a subscription is checked (and the pacer behind it looked for).
const CHECK: Duration = Duration::from_secs(10);

/// The channel of `cluster`'s pauses.
pub(super) fn channel(cluster: &Cluster) -> String {
    format!("{}pauses", cluster.config().key_prefix)
}

/// The message for `notice`.
pub(super) fn message(notice: &PauseNotice, left: Duration) -> String {
    let p = &notice.pause;
    let mut m = format!(
        "v1 {} {} {} {} {} {}",
        left.as_millis(),
        p.pause.as_millis(),
        p.streak,
        p.status,
        notice.agent,
        notice.origin
    );
    if let Some(ra) = &p.retry_after {
        m.push(' ');
        m.push_str(ra);
    }
    m
}

/// The pause `message` tells of, if it reads.
pub(super) fn notice(message: &[u8]) -> Option<PauseNotice> {
    if message.len() > MAX_MESSAGE {
        return None;
    }
    let text = std::str::from_utf8(message).ok()?;
    let mut parts = text.splitn(8, ' ');
    if parts.next()? != "v1" {
        return None;
    }
    let ms = |s: &str| s.parse::<u64>().ok().map(Duration::from_millis).filter(|d| *d <= MAX_PAUSE);
    let left = ms(parts.next()?)?;
    let pause = ms(parts.next()?)?;
    let streak = parts.next()?.parse::<u32>().ok()?;
    let status = parts.next()?.parse::<u16>().ok().filter(|s| matches!(s, 429 | 503))?;
    let agent = parts.next()?;
    if agent.is_empty() || agent.len() > 256 || agent.chars().any(char::is_control) {
        return None;
    }
    let origin = Origin::parse(parts.next()?).ok()?;
    let retry_after =
        parts.next().filter(|r| !r.is_empty() && !r.chars().any(char::is_control)).map(Arc::from);
    Some(PauseNotice {
        origin: Arc::new(origin),
        agent: agent.into(),
        left,
        pause: PauseInfo { status, retry_after, pause, streak },
    })
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
                    if let Some(n) = notice(m.get_payload_bytes())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_message_reads_back_and_what_is_not_one_is_ignored() {
        let notice_of = |ra: Option<&str>| PauseNotice {
            origin: Arc::new(Origin::parse("https://example.com:8443").unwrap()),
            agent: "ExampleBot".into(),
            left: Duration::from_millis(4_900),
            pause: PauseInfo {
                status: 429,
                retry_after: ra.map(Arc::from),
                pause: Duration::from_secs(5),
                streak: 2,
            },
        };
        for ra in [None, Some("Wed, 21 Oct 2015 07:28:00 GMT"), Some("5")] {
            let n = notice_of(ra);
            let text = message(&n, n.left);
            let back = notice(text.as_bytes()).unwrap_or_else(|| panic!("{text}"));
            assert_eq!(
                (back.origin, back.agent, back.left, back.pause),
                (n.origin, n.agent, n.left, n.pause)
            );
        }
        for bad in [
            "",
            "v2 1 1 1 429 Bot https://a.test",
            "v1 1 1 1 200 Bot https://a.test",
            "v1 x 1 1 429 Bot https://a.test",
            "v1 1 1 1 429 Bot not-an-origin",
            "v1 1 1 1 429  https://a.test",
            "v1 999999999999 1 1 429 Bot https://a.test",
            "v1 1 1 1 429 Bot",
        ] {
            assert!(notice(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(notice(&[b'v'; MAX_MESSAGE + 1]).is_none());
        assert!(notice(b"v1 1 1 1 429 B\xffot https://a.test").is_none());
    }
}
