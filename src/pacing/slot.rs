//! The arithmetic of pacing, in one place: when a lane's next request may start, how long
//! a pause after a 429 or 503 lasts, and how a wait reads as `Retry-After`. The Redis
//! store's script computes the same, in milliseconds of Redis' clock.

use std::time::{Duration, SystemTime};

use tokio::time::Instant;

/// When the next request of a lane may start: not before `now`, at least `delay` after
/// the last start, and not before a pause ends.
pub(crate) fn next_slot(
    now: Instant,
    last_start: Option<Instant>,
    delay: Duration,
    pause_until: Option<Instant>,
) -> Instant {
    let mut at = now;
    if let Some(last) = last_start {
        at = at.max(last + delay);
    }
    if let Some(p) = pause_until {
        at = at.max(p);
    }
    at
}

/// The pause after the `streak`-th 429 or 503 in a row (1 for the first): the origin's
/// `Retry-After` when it gave one, else `initial` doubled for each one before; never
/// longer than `max`.
pub(crate) fn backoff_pause(
    streak: u32,
    retry_after: Option<Duration>,
    initial: Duration,
    max: Duration,
) -> Duration {
    let pause = match retry_after {
        Some(ra) => ra,
        None => initial.saturating_mul(1u32 << streak.saturating_sub(1).min(20)),
    };
    pause.min(max)
}

/// A `Retry-After` value: delay-seconds or an HTTP-date (RFC 9110 §10.2.3), as a wait
/// from `now` (a date in the past is no wait). `None` for anything else.
pub(crate) fn parse_retry_after(value: &[u8], now: SystemTime) -> Option<Duration> {
    let text = std::str::from_utf8(value).ok()?.trim();
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        // Longer than u64 seconds is "very long": the cap applies anyway.
        return Some(text.parse::<u64>().map_or(Duration::MAX, Duration::from_secs));
    }
    let at = httpdate::parse_http_date(text).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// A wait as `Retry-After` seconds: rounded up, at least 1.
pub(crate) fn retry_after_secs(wait: Duration) -> u64 {
    let whole = wait.as_secs();
    let secs = if wait.subsec_nanos() > 0 { whole.saturating_add(1) } else { whole };
    secs.max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn next_slot_is_the_latest_of_now_last_plus_delay_and_the_pause() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        assert_eq!(next_slot(t0, None, s(10), None), t0);
        assert_eq!(next_slot(t0 + s(3), Some(t0), s(10), None), t0 + s(10));
        assert_eq!(next_slot(t0 + s(30), Some(t0), s(10), None), t0 + s(30));
        assert_eq!(next_slot(t0, Some(t0), s(10), Some(t0 + s(60))), t0 + s(60));
        assert_eq!(next_slot(t0 + s(5), Some(t0), s(10), Some(t0 + s(2))), t0 + s(10));
        assert_eq!(next_slot(t0, Some(t0), Duration::ZERO, None), t0);
    }

    #[test]
    fn backoff_doubles_from_the_initial_pause_and_honours_retry_after_within_the_cap() {
        let s = Duration::from_secs;
        let pauses: Vec<u64> = (1..=11).map(|n| backoff_pause(n, None, s(5), s(3600)).as_secs()).collect();
        assert_eq!(pauses, [5, 10, 20, 40, 80, 160, 320, 640, 1280, 2560, 3600]);
        assert_eq!(backoff_pause(1000, None, s(5), s(3600)), s(3600));
        assert_eq!(backoff_pause(3, Some(s(7)), s(5), s(3600)), s(7));
        assert_eq!(backoff_pause(1, Some(s(86400)), s(5), s(3600)), s(3600));
        assert_eq!(backoff_pause(1, Some(Duration::ZERO), s(5), s(3600)), Duration::ZERO);
    }

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
        let p = |v: &str| parse_retry_after(v.as_bytes(), now);
        assert_eq!(p("120"), Some(Duration::from_secs(120)));
        assert_eq!(p(" 0 "), Some(Duration::ZERO));
        assert_eq!(p("99999999999999999999999"), Some(Duration::MAX));
        let later = httpdate::fmt_http_date(now + Duration::from_secs(90));
        assert_eq!(p(&later), Some(Duration::from_secs(90)));
        let earlier = httpdate::fmt_http_date(now - Duration::from_secs(90));
        assert_eq!(p(&earlier), Some(Duration::ZERO));
        for junk in ["", "-5", "1.5", "soon", "Tue, 99 Nov 2026 08:49:37 GMT"] {
            assert_eq!(p(junk), None, "{junk:?}");
        }
        assert_eq!(parse_retry_after(b"\xff", now), None);
    }

    #[test]
    fn retry_after_seconds_round_up() {
        assert_eq!(retry_after_secs(Duration::ZERO), 1);
        assert_eq!(retry_after_secs(Duration::from_millis(1)), 1);
        assert_eq!(retry_after_secs(Duration::from_secs(10)), 10);
        assert_eq!(retry_after_secs(Duration::from_millis(10_001)), 11);
        assert_eq!(retry_after_secs(Duration::MAX), u64::MAX);
    }
}
