//! Pay per crawl (Cloudflare's protocol, as publicly documented): an origin answers `402`
//! with `crawler-price: USD 0.01`; a crawler willing to pay retries with a
//! `crawler-max-price` covered by its Web Bot Auth signature; a paid answer carries
//! `crawler-charged`; an answer the protocol refuses carries `crawler-error` (a code such as
//! `InvalidCrawlerMaxPrice` or `PaymentFailed`, with a 400, 402, 403 or 502). This module is the pure part: reading prices, comparing them with a
//! limit, and [`Payment`], what happened to one request (a response extension the audit
//! log records).
//!
//! ```
//! use robotsgate::identity::httpsig::Price;
//!
//! let max: Price = "USD 0.05".parse()?;
//! assert!("USD 0.01".parse::<Price>()?.within(&max));
//! assert!(!"USD 0.10".parse::<Price>()?.within(&max));
//! assert!(!"EUR 0.01".parse::<Price>()?.within(&max));
//! # Ok::<(), robotsgate::identity::httpsig::PriceError>(())
//! ```

use std::fmt;
use std::str::FromStr;

/// The price an origin asks (`402` answers).
pub const CRAWLER_PRICE: &str = "crawler-price";
/// The most the crawler pays (sent on the retry, covered by the signature).
pub const CRAWLER_MAX_PRICE: &str = "crawler-max-price";
/// The other retry header (never sent by robotsgate: it sends the maximum).
pub const CRAWLER_EXACT_PRICE: &str = "crawler-exact-price";
/// What the origin charged (on its paid answer).
pub const CRAWLER_CHARGED: &str = "crawler-charged";
/// Why the origin (its CDN) refused a pay-per-crawl request: an error code.
pub const CRAWLER_ERROR: &str = "crawler-error";

/// Decimal places kept: amounts are compared in millionths.
const SCALE: u32 = 6;

/// A price: a currency code and a non-negative decimal amount, written `USD 0.01`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Price {
    currency: String,
    /// In millionths of the currency unit.
    micros: u64,
}

/// Why a price could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a price (expected e.g. \"USD 0.01\"): {0:?}")]
pub struct PriceError(pub String);

impl Price {
    /// The currency code (`USD`).
    pub fn currency(&self) -> &str {
        &self.currency
    }

    /// The amount in millionths of the currency unit.
    pub fn micros(&self) -> u64 {
        self.micros
    }

    /// Whether this price is in `max`'s currency and at most `max`.
    pub fn within(&self, max: &Price) -> bool {
        self.currency == max.currency && self.micros <= max.micros
    }
}

impl FromStr for Price {
    type Err = PriceError;

    fn from_str(s: &str) -> Result<Price, PriceError> {
        let bad = || PriceError(s.chars().take(64).collect());
        let (currency, amount) = s.trim().split_once(' ').ok_or_else(bad)?;
        let amount = amount.trim();
        if currency.len() != 3 || !currency.bytes().all(|b| b.is_ascii_alphabetic()) {
            return Err(bad());
        }
        let (whole, frac) = amount.split_once('.').unwrap_or((amount, ""));
        let digits = |d: &str| d.bytes().all(|b| b.is_ascii_digit());
        if whole.is_empty()
            || whole.len() > 12
            || !digits(whole)
            || !digits(frac)
            || frac.len() > SCALE as usize
        {
            return Err(bad());
        }
        let whole: u64 = whole.parse().map_err(|_| bad())?;
        let mut micros = whole.checked_mul(10u64.pow(SCALE)).ok_or_else(bad)?;
        if !frac.is_empty() {
            let f: u64 = frac.parse().map_err(|_| bad())?;
            micros += f * 10u64.pow(SCALE - frac.len() as u32);
        }
        Ok(Price { currency: currency.to_ascii_uppercase(), micros })
    }
}

impl fmt::Display for Price {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = 10u64.pow(SCALE);
        let frac = format!("{:06}", self.micros % unit);
        let frac = frac.trim_end_matches('0');
        let frac = if frac.len() < 2 { format!("{frac:0<2}") } else { frac.to_owned() };
        write!(f, "{} {}.{frac}", self.currency, self.micros / unit)
    }
}

/// What happened to a request an origin asked payment for (`402` with `crawler-price`), or
/// answered with a `crawler-error`: put in the response's extensions by whoever forwarded
/// it, recorded by the audit log (`"type": "payment"`, whose fields after `origin` are these,
/// serialized in this order).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Payment {
    /// The status of the origin's (first) answer.
    pub status: u16,
    /// The origin's `crawler-price`, as it sent it; `None` for an answer with a
    /// `crawler-error` and no price.
    pub price: Option<String>,
    /// The first answer's `crawler-error`, as the origin sent it.
    pub error: Option<String>,
    /// The configured maximum, if any.
    pub max_price: Option<String>,
    /// Whether the request was sent again with a signed `crawler-max-price`.
    pub retried: bool,
    /// The status of the retry's answer.
    pub retry_status: Option<u16>,
    /// The retry's `crawler-charged`, as the origin sent it: what was paid.
    pub charged: Option<String>,
    /// The retry's `crawler-error`, as the origin sent it (e.g. `PaymentFailed`).
    pub retry_error: Option<String>,
    /// Why there was no retry (`no max_price`, `not signing`, `above max_price`,
    /// `unreadable price`, `request has a body`, `no price`).
    pub no_retry: Option<&'static str>,
}

/// Whether a `402` answer with `crawler-price: price` is worth a retry under `max`: the
/// reason not to, or `None` to retry. `max` is `None` when pay per crawl is off.
pub fn retry_refusal(
    price: &str,
    max: Option<&Price>,
    signing: bool,
    has_body: bool,
) -> Option<&'static str> {
    let Some(max) = max else { return Some("no max_price") };
    if !signing {
        return Some("not signing");
    }
    match price.parse::<Price>() {
        Err(_) => Some("unreadable price"),
        Ok(p) if !p.within(max) => Some("above max_price"),
        Ok(_) if has_body => Some("request has a body"),
        Ok(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prices_parse_compare_and_print() {
        let p: Price = "USD 0.01".parse().unwrap();
        assert_eq!((p.currency(), p.micros()), ("USD", 10_000));
        assert_eq!(p.to_string(), "USD 0.01");
        assert_eq!("usd 1".parse::<Price>().unwrap().to_string(), "USD 1.00");
        assert_eq!("USD 0.000001".parse::<Price>().unwrap().micros(), 1);
        for bad in [
            "",
            "USD",
            "0.01",
            "USD -1",
            "USD 1.2.3",
            "USD .5",
            "US 1",
            "USD 0.0000001",
            "USD 1e3",
            "USD 9999999999999",
        ] {
            assert!(bad.parse::<Price>().is_err(), "{bad}");
        }
        let max: Price = "USD 0.05".parse().unwrap();
        assert!("USD 0.05".parse::<Price>().unwrap().within(&max));
        assert!(!"USD 0.050001".parse::<Price>().unwrap().within(&max));
        assert!(!"EUR 0.01".parse::<Price>().unwrap().within(&max));
    }

    #[test]
    fn retry_only_within_the_maximum_signed_and_without_a_body() {
        let max: Price = "USD 0.05".parse().unwrap();
        assert_eq!(retry_refusal("USD 0.01", None, true, false), Some("no max_price"));
        assert_eq!(retry_refusal("USD 0.01", Some(&max), false, false), Some("not signing"));
        assert_eq!(retry_refusal("a lot", Some(&max), true, false), Some("unreadable price"));
        assert_eq!(retry_refusal("USD 0.10", Some(&max), true, false), Some("above max_price"));
        assert_eq!(retry_refusal("USD 0.01", Some(&max), true, true), Some("request has a body"));
        assert_eq!(retry_refusal("USD 0.01", Some(&max), true, false), None);
    }
}
