//! Record times: RFC 3339 in UTC with milliseconds, written by hand.

use std::time::SystemTime;

use time::OffsetDateTime;

/// RFC 3339 UTC with milliseconds, always three digits: `2026-11-23T13:36:57.398Z`.
///
/// Written by hand (days to civil date, then digits): this runs twice per audit record,
/// and a general formatter costs several times more. Times outside 1970..=9999 go
/// through the `time` crate.
pub fn rfc3339(t: SystemTime) -> String {
    let mut out = Vec::with_capacity(24);
    rfc3339_into(&mut out, t);
    // Digits and separators (or the `time` crate's text): always UTF-8.
    String::from_utf8(out).unwrap_or_default()
}

/// [`rfc3339`], appended to `out`.
pub(super) fn rfc3339_into(out: &mut Vec<u8>, t: SystemTime) {
    let since = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) if d.as_secs() < 253_402_300_800 => d, // 10000-01-01
        _ => {
            // Three digits of milliseconds, as for every other time (the time crate's
            // RFC 3339 leaves out a zero fraction).
            let t = outside(t);
            let text = format!(
                "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}.{:03}Z",
                t.year(),
                u8::from(t.month()),
                t.day(),
                t.hour(),
                t.minute(),
                t.second(),
                t.millisecond()
            );
            out.extend_from_slice(text.as_bytes());
            return;
        }
    };
    let secs = since.as_secs();
    // The date and time of day change once a second: made once a second per thread.
    thread_local! {
        static SECOND: std::cell::Cell<(u64, [u8; 20])> = const { std::cell::Cell::new((u64::MAX, [0; 20])) };
    }
    let head = SECOND.with(|c| {
        let (at, head) = c.get();
        if at == secs {
            return head;
        }
        let head = second_text(secs);
        c.set((secs, head));
        head
    });
    let ms = since.subsec_millis();
    let digit = |v: u32| b'0' + (v % 10) as u8;
    out.extend_from_slice(&head);
    out.extend_from_slice(&[digit(ms / 100), digit(ms / 10), digit(ms), b'Z']);
}

/// A time before 1970 or from 10000 on as the `time` crate holds it, clamped to the years
/// RFC 3339 writes (0000 to 9999): `OffsetDateTime::from` panics past the crate's years, and
/// a record's time may be read from files that come from anyone.
fn outside(t: SystemTime) -> OffsetDateTime {
    use time::{Date, Month};
    let first = Date::from_calendar_date(0, Month::January, 1).map(|d| d.midnight().assume_utc());
    let last = Date::from_calendar_date(9999, Month::December, 31)
        .and_then(|d| d.with_hms_milli(23, 59, 59, 999))
        .map(|d| d.assume_utc());
    let (Ok(first), Ok(last)) = (first, last) else { return OffsetDateTime::UNIX_EPOCH };
    let exact = match t.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => time::Duration::try_from(d).ok().and_then(|d| OffsetDateTime::UNIX_EPOCH.checked_add(d)),
        Err(e) => time::Duration::try_from(e.duration())
            .ok()
            .and_then(|d| OffsetDateTime::UNIX_EPOCH.checked_sub(d)),
    };
    match exact {
        Some(x) => x.clamp(first, last),
        None if t < SystemTime::UNIX_EPOCH => first,
        None => last,
    }
}

/// `YYYY-MM-DDTHH:MM:SS.` of a second since 1970 (before 10000-01-01).
fn second_text(secs: u64) -> [u8; 20] {
    let (year, month, day) = civil_from_days(secs / 86_400);
    let sod = secs % 86_400;
    let fields = [
        (year, 4),
        (u64::from(month), 2),
        (u64::from(day), 2),
        (sod / 3600, 2),
        (sod / 60 % 60, 2),
        (sod % 60, 2),
    ];
    let mut text = [0u8; 20];
    let mut at = 0;
    for ((value, width), sep) in fields.into_iter().zip(b"--T::.") {
        let mut v = value;
        for k in (0..width).rev() {
            text[at + k] = b'0' + (v % 10) as u8;
            v /= 10;
        }
        text[at + width] = *sep;
        at += width + 1;
    }
    text
}

/// (year, month, day) of a day count since 1970-01-01, proleptic Gregorian calendar
/// (Howard Hinnant's `civil_from_days`, for non-negative day counts).
fn civil_from_days(days: u64) -> (u64, u8, u8) {
    let z = days + 719_468;
    let era = z / 146_097;
    let doe = z % 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u8;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u8;
    let year = yoe + era * 400 + u64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use time::format_description::well_known::Rfc3339;

    use super::*;

    /// The hand-written formatter names the same instant as the `time` crate does.
    #[test]
    fn rfc3339_matches_the_time_crate() {
        let mut cases = vec![0u64, 951_782_400, 1_709_164_800, 4_107_542_399, 253_402_300_799];
        let mut secs: u64 = 1;
        while secs < 253_402_300_799 {
            cases.push(secs);
            secs = secs * 3 + 86_399 + secs % 7;
        }
        for (i, s) in cases.into_iter().enumerate() {
            let t =
                SystemTime::UNIX_EPOCH + Duration::new(s, (i as u32).wrapping_mul(7_919_111) % 1_000_000_000);
            let ours = rfc3339(t);
            assert_eq!(ours.len(), 24, "{ours}");
            let parsed = OffsetDateTime::parse(&ours, &Rfc3339).unwrap_or_else(|e| panic!("{ours}: {e}"));
            let exact = OffsetDateTime::from(t);
            assert_eq!(parsed.unix_timestamp(), exact.unix_timestamp(), "{ours}");
            assert_eq!(parsed.millisecond(), exact.millisecond(), "{ours}");
        }
        // The per-thread second: other milliseconds of it, another second, and back.
        let at = |ms: u64| rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(ms));
        assert_eq!(at(1_795_441_017_001), "2026-11-23T13:36:57.001Z");
        assert_eq!(at(1_795_441_017_999), "2026-11-23T13:36:57.999Z");
        assert_eq!(at(1_795_441_018_040), "2026-11-23T13:36:58.040Z");
        assert_eq!(at(1_795_441_017_500), "2026-11-23T13:36:57.500Z");
        assert_eq!(rfc3339(SystemTime::UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        // Outside 1970..=9999: the time crate's, clamped to the years RFC 3339 writes.
        let before = |s: u64| rfc3339(SystemTime::UNIX_EPOCH.checked_sub(Duration::from_secs(s)).unwrap());
        assert_eq!(before(86_400), "1969-12-31T00:00:00.000Z");
        assert_eq!(before(100_000_000_000), "0000-01-01T00:00:00.000Z");
        let after = |s: u64| rfc3339(SystemTime::UNIX_EPOCH.checked_add(Duration::from_secs(s)).unwrap());
        assert_eq!(after(253_402_300_800), "9999-12-31T23:59:59.999Z");
        assert_eq!(after(1 << 40), "9999-12-31T23:59:59.999Z");
        assert_eq!(
            rfc3339(SystemTime::UNIX_EPOCH + Duration::from_millis(1_795_441_017_398)),
            "2026-11-23T13:36:57.398Z"
        );
    }
}
