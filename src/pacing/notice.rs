//! [`PauseNotice`] and the one-line text it travels as between the replicas of a fleet.

use std::sync::Arc;
use std::time::Duration;

use super::pause::PauseInfo;
use crate::origin::Origin;

/// A back-off pause one replica of a fleet started, as a shared store tells the pacer of it
/// ([`SharedPaceStore::watch_pauses`](super::SharedPaceStore::watch_pauses)), and the
/// one-line text it travels as between the replicas (fleet mode publishes it on Redis).
/// The text is pure: the transport is the shared store's.
///
/// The text is `v1 <left ms> <pause ms> <streak> <status> <token> <origin> [<Retry-After>]`.
/// It comes from whatever can publish on the channel, so a text that does not read whole is
/// no notice, and what reads is bounded: a pause of at most a week, a 429 or 503, a token of
/// at most 256 bytes, an origin that parses, no control characters.
///
/// ```
/// use std::sync::Arc;
/// use std::time::Duration;
/// use robotsgate::origin::Origin;
/// use robotsgate::pacing::{PauseInfo, PauseNotice};
///
/// let notice = PauseNotice {
///     origin: Arc::new(Origin::parse("https://example.com").unwrap()),
///     agent: "ExampleBot".into(),
///     left: Duration::from_millis(4_900),
///     pause: PauseInfo { status: 429, retry_after: Some("5".into()), pause: Duration::from_secs(5), streak: 1 },
/// };
/// let text = notice.to_message();
/// assert_eq!(text, "v1 4900 5000 1 429 ExampleBot https://example.com 5");
/// let back = PauseNotice::from_message(text.as_bytes()).unwrap();
/// assert_eq!((back.left, back.pause), (notice.left, notice.pause));
/// assert!(PauseNotice::from_message(b"v1 4900 5000 1 200 ExampleBot https://example.com").is_none());
/// ```
#[derive(Debug, Clone)]
pub struct PauseNotice {
    /// The lane's origin.
    pub origin: Arc<Origin>,
    /// The lane's product token.
    pub agent: Arc<str>,
    /// How much of the pause is left.
    pub left: Duration,
    /// The pause.
    pub pause: PauseInfo,
}

impl PauseNotice {
    /// A text longer than this is not a pause of robotsgate's.
    pub const MAX_MESSAGE: usize = 4096;
    /// A pause (or what is left of one) longer than this is not believed
    /// (`pacing.max_backoff` is at most hours).
    pub const MAX_PAUSE: Duration = Duration::from_secs(7 * 24 * 3600);
    /// The longest product token a notice names.
    pub const MAX_AGENT: usize = 256;

    /// The notice as the one line it travels as.
    pub fn to_message(&self) -> String {
        let p = &self.pause;
        let mut m = format!(
            "v1 {} {} {} {} {} {}",
            self.left.as_millis(),
            p.pause.as_millis(),
            p.streak,
            p.status,
            self.agent,
            self.origin
        );
        if let Some(ra) = &p.retry_after {
            m.push(' ');
            m.push_str(ra);
        }
        m
    }

    /// The notice `message` is, if it reads whole and within the bounds.
    pub fn from_message(message: &[u8]) -> Option<PauseNotice> {
        if message.len() > Self::MAX_MESSAGE {
            return None;
        }
        let text = std::str::from_utf8(message).ok()?;
        let mut parts = text.splitn(8, ' ');
        if parts.next()? != "v1" {
            return None;
        }
        let ms = |s: &str| s.parse::<u64>().ok().map(Duration::from_millis).filter(|d| *d <= Self::MAX_PAUSE);
        let left = ms(parts.next()?)?;
        let pause = ms(parts.next()?)?;
        let streak = parts.next()?.parse::<u32>().ok()?;
        let status = parts.next()?.parse::<u16>().ok().filter(|s| matches!(s, 429 | 503))?;
        let agent = parts.next()?;
        if agent.is_empty() || agent.len() > Self::MAX_AGENT || agent.chars().any(char::is_control) {
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
            let text = n.to_message();
            let back = PauseNotice::from_message(text.as_bytes()).unwrap_or_else(|| panic!("{text}"));
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
            assert!(PauseNotice::from_message(bad.as_bytes()).is_none(), "{bad:?}");
        }
        assert!(PauseNotice::from_message(&[b'v'; PauseNotice::MAX_MESSAGE + 1]).is_none());
        assert!(PauseNotice::from_message(b"v1 1 1 1 429 B\xffot https://a.test").is_none());
    }
}
