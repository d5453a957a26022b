//! Pacing hints: the values of `crawl-delay` and `request-rate` lines, read strictly, and
//! what a crawler is asked to wait between requests. Neither line is part of RFC 9309 and
//! Google ignores both; Bing, Yandex, Seznam and many crawler frameworks read them.
//!
//! - `crawl-delay: 10`, `crawl-delay: 0.5`: seconds between requests (a non-negative
//!   decimal number, nothing else).
//! - `request-rate: 1/10s`: requests per period (`s`, `m`, `h` or `d`; no unit is
//!   seconds), so one request every 10 seconds; `100/1h` is one every 36 seconds. A time
//!   of day in UTC may follow, as Seznam writes it: `request-rate: 1/10s 1800-0600` (also
//!   `18:00-06:00`), the rate that applies from 18:00 to 06:00.
//!
//! A value that does not read so is ignored, and noted with its line
//! ([`IgnoredValue`]).

use std::fmt;

/// What a crawler is asked to wait between requests, and the line that says so.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PaceHint {
    /// Seconds between requests (finite, not negative).
    pub delay: f64,
    /// The 1-based line of the `crawl-delay` or `request-rate` line.
    pub line: u32,
    /// Which directive, and what it said.
    pub source: PaceSource,
}

/// The directive a [`PaceHint`] comes from.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PaceSource {
    /// `crawl-delay: <seconds>`.
    CrawlDelay,
    /// `request-rate: <requests>/<period> [window]`.
    RequestRate {
        /// Requests allowed per period (at least 1).
        requests: u32,
        /// The period in seconds (more than 0).
        seconds: f64,
        /// The time of day it applies to, if it says.
        window: Option<TimeWindow>,
    },
}

impl PaceSource {
    /// `"crawl-delay"` or `"request-rate"`.
    pub fn directive(&self) -> &'static str {
        match self {
            PaceSource::CrawlDelay => "crawl-delay",
            PaceSource::RequestRate { .. } => "request-rate",
        }
    }
}

/// A time of day in UTC, from a `request-rate` line: minutes since midnight, `start`
/// included, `end` excluded; it wraps past midnight when `end` is not after `start`
/// (`1800-0600`), and `0000-0000` is the whole day.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeWindow {
    /// First minute (0..1440).
    pub start: u16,
    /// Minute after the last (0..=1440).
    pub end: u16,
}

impl TimeWindow {
    /// Whether `minute` (minutes since midnight UTC, 0..1440) lies in the window.
    pub fn contains(&self, minute: u16) -> bool {
        if self.start < self.end {
            (self.start..self.end).contains(&minute)
        } else {
            minute >= self.start || minute < self.end
        }
    }
}

impl fmt::Display for TimeWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hm = |m: u16| (m / 60, m % 60);
        let (a, b) = (hm(self.start), hm(self.end));
        write!(f, "{:02}{:02}-{:02}{:02}", a.0, a.1, b.0, b.1)
    }
}

impl PaceHint {
    /// The directive as read: `crawl-delay: 10`, `request-rate: 1/10s 1800-0600`.
    pub fn directive(&self) -> String {
        match self.source {
            PaceSource::CrawlDelay => format!("crawl-delay: {}", self.delay),
            PaceSource::RequestRate { requests, seconds, window } => match window {
                Some(w) => format!("request-rate: {requests}/{seconds}s {w}"),
                None => format!("request-rate: {requests}/{seconds}s"),
            },
        }
    }
}

impl fmt::Display for PaceHint {
    /// `line 3: crawl-delay: 10`, `line 4: request-rate: 1/10s 1800-0600`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}", self.line, self.directive())
    }
}

/// A `crawl-delay` or `request-rate` line whose value could not be read, so it was
/// ignored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IgnoredValue {
    /// The 1-based line.
    pub line: u32,
    /// `"crawl-delay"` or `"request-rate"`.
    pub directive: &'static str,
}

impl fmt::Display for IgnoredValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {} value not understood, ignored", self.line, self.directive)
    }
}

/// Most ignored values a file keeps (the first ones); a file of junk stays small.
pub(crate) const MAX_IGNORED: usize = 64;

/// A rate read from a `request-rate` value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Rate {
    pub requests: u32,
    pub seconds: f64,
    pub window: Option<TimeWindow>,
}

impl Rate {
    /// Seconds between requests.
    pub fn delay(&self) -> f64 {
        self.seconds / f64::from(self.requests)
    }
}

/// A `crawl-delay` value in seconds: a non-negative finite decimal number (`10`, `0.5`).
pub(crate) fn parse_crawl_delay(value: &[u8]) -> Option<f64> {
    if value.is_empty() || !value.iter().all(|b| b.is_ascii_digit() || *b == b'.') {
        return None;
    }
    let s = std::str::from_utf8(value).ok()?;
    s.parse::<f64>().ok().filter(|d| d.is_finite() && *d >= 0.0)
}

/// A `request-rate` value: `<requests>/<period>[unit]`, then optionally a time window
/// (`HHMM-HHMM` or `HH:MM-HH:MM`), separated by spaces.
pub(crate) fn parse_request_rate(value: &[u8]) -> Option<Rate> {
    let mut words = value.split(|b| *b == b' ' || *b == b'\t').filter(|w| !w.is_empty());
    let rate = words.next()?;
    let window = match words.next() {
        Some(w) => Some(parse_window(w)?),
        None => None,
    };
    if words.next().is_some() {
        return None;
    }
    let slash = rate.iter().position(|b| *b == b'/')?;
    let (requests, period) = (&rate[..slash], &rate[slash + 1..]);
    if requests.is_empty() || requests.len() > 9 || !requests.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let requests: u32 = std::str::from_utf8(requests).ok()?.parse().ok()?;
    let digits = period.iter().take_while(|b| b.is_ascii_digit() || **b == b'.').count();
    let unit = match period[digits..].to_ascii_lowercase().as_slice() {
        b"" | b"s" => 1.0,
        b"m" => 60.0,
        b"h" => 3600.0,
        b"d" => 86400.0,
        _ => return None,
    };
    let amount = parse_crawl_delay(&period[..digits])?;
    let seconds = amount * unit;
    (requests > 0 && seconds > 0.0 && seconds.is_finite()).then_some(Rate { requests, seconds, window })
}

/// `HHMM-HHMM` or `HH:MM-HH:MM` (24 h, `2400` as the end of the day).
fn parse_window(w: &[u8]) -> Option<TimeWindow> {
    let dash = w.iter().position(|b| *b == b'-')?;
    let (start, end) = (minute_of(&w[..dash])?, minute_of(&w[dash + 1..])?);
    (start < 1440).then_some(TimeWindow { start, end })
}

fn minute_of(hhmm: &[u8]) -> Option<u16> {
    let digits: Option<[u8; 4]> = match hhmm {
        [a, b, c, d] => Some([*a, *b, *c, *d]),
        [a, b, b':', c, d] => Some([*a, *b, *c, *d]),
        _ => None,
    };
    let d = digits?;
    if !d.iter().all(u8::is_ascii_digit) {
        return None;
    }
    let n = |i: usize| u16::from(d[i] - b'0');
    let (h, m) = (n(0) * 10 + n(1), n(2) * 10 + n(3));
    let minute = h * 60 + m;
    (m < 60 && minute <= 1440).then_some(minute)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crawl_delay_values() {
        assert_eq!(parse_crawl_delay(b"10"), Some(10.0));
        assert_eq!(parse_crawl_delay(b"0.5"), Some(0.5));
        assert_eq!(parse_crawl_delay(b".5"), Some(0.5));
        assert_eq!(parse_crawl_delay(b"0"), Some(0.0));
        for junk in [&b""[..], b".", b"-1", b"1e3", b"10s", b"1,5", b"ten", b"1..2", b"inf", b"NaN"] {
            assert_eq!(parse_crawl_delay(junk), None, "{:?}", String::from_utf8_lossy(junk));
        }
    }

    #[test]
    fn request_rate_values() {
        let r = |s: &str| parse_request_rate(s.as_bytes());
        let d = |s: &str| r(s).map(|r| r.delay());
        assert_eq!(d("1/10s"), Some(10.0));
        assert_eq!(d("1/10"), Some(10.0));
        assert_eq!(d("1/5m"), Some(300.0));
        assert_eq!(d("100/1h"), Some(36.0));
        assert_eq!(d("2/1S"), Some(0.5));
        assert_eq!(d("1/0.5s"), Some(0.5));
        assert_eq!(d("10/1d"), Some(8640.0));
        let w = r("1/10s 1800-0600").unwrap().window.unwrap();
        assert_eq!((w.start, w.end), (18 * 60, 6 * 60));
        assert!(w.contains(23 * 60) && w.contains(0) && w.contains(359) && !w.contains(360));
        assert!(!w.contains(12 * 60));
        let w = r("1/20s  06:00-18:45").unwrap().window.unwrap();
        assert_eq!((w.start, w.end), (360, 18 * 60 + 45));
        assert!(w.contains(360) && w.contains(18 * 60 + 44) && !w.contains(18 * 60 + 45));
        assert_eq!(w.to_string(), "0600-1845");
        let all = r("1/1s 0000-0000").unwrap().window.unwrap();
        assert!(all.contains(0) && all.contains(1439));
        assert_eq!(r("1/1s 0000-2400").unwrap().window.unwrap().end, 1440);
        for junk in [
            "",
            "1",
            "/10s",
            "0/10s",
            "1/0s",
            "1/s",
            "1/10x",
            "-1/10s",
            "1/10s 1800",
            "1/10s 2500-0100",
            "1/10s 1860-0100",
            "1/10s 18-06",
            "1/10s 1800-0600 extra",
            "a/b",
            "1 / 10s",
            "9999999999/1s",
            "1/1e3s",
        ] {
            assert_eq!(r(junk), None, "{junk:?}");
        }
    }
}
