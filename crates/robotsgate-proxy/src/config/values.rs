//! The value types of the configuration, checked while they are read: durations, sizes,
//! product tokens, profiles, CIDRs, host patterns, header names, dates and password hashes.

use std::net::IpAddr;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use ipnet::IpNet;
use serde::Deserialize;
use serde::de::{self, Deserializer};

use robotsgate::policy::HostPattern;
use robotsgate::rep::{Profile, is_valid_product_token};

/// Deserializes `T` from a string with `FromStr`, naming the expected form on error.
macro_rules! from_str_value {
    ($t:ty, $what:expr) => {
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let s = String::deserialize(d)?;
                s.parse::<$t>().map_err(|e| {
                    let e = e.to_string();
                    if e.contains($what) {
                        de::Error::custom(e)
                    } else {
                        de::Error::custom(format!("{e} (expected {})", $what))
                    }
                })
            }
        }
    };
}

/// A duration written as a number and a unit (`500ms`, `30s`, `5m`, `24h`, `30d`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dur(pub Duration);

impl Dur {
    /// `s` seconds.
    pub(super) fn secs(s: u64) -> Dur {
        Dur(Duration::from_secs(s))
    }
}

impl FromStr for Dur {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        let split = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
        let (num, unit) = s.split_at(split);
        let n: f64 = num.parse().map_err(|_| format!("invalid duration {s:?}"))?;
        let unit_secs = match unit.trim() {
            "ms" => 0.001,
            "s" => 1.0,
            "m" => 60.0,
            "h" => 3600.0,
            "d" => 86400.0,
            "" => return Err(format!("duration {s:?} needs a unit")),
            u => return Err(format!("unknown duration unit {u:?} in {s:?}")),
        };
        let secs = n * unit_secs;
        if !(secs.is_finite() && (0.0..=1e9).contains(&secs)) {
            return Err(format!("duration {s:?} is out of range"));
        }
        Ok(Dur(Duration::from_secs_f64(secs)))
    }
}
from_str_value!(Dur, "a number and a unit: ms, s, m, h or d, e.g. \"30s\"");

/// A size in bytes (`4096`, `64KiB`, `512MiB`, `1GB`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Size(pub u64);

impl FromStr for Size {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let t = s.trim();
        let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
        let (num, unit) = t.split_at(split);
        let n: u64 = num.parse().map_err(|_| format!("invalid size {s:?}"))?;
        let mult: u64 = match unit.trim().to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "kb" => 1000,
            "kib" => 1024,
            "mb" => 1000 * 1000,
            "mib" => 1024 * 1024,
            "gb" => 1000 * 1000 * 1000,
            "gib" => 1024 * 1024 * 1024,
            u => return Err(format!("unknown size unit {u:?} in {s:?}")),
        };
        n.checked_mul(mult).map(Size).ok_or_else(|| format!("size {s:?} is too large"))
    }
}
from_str_value!(Size, "a number of bytes with an optional unit, e.g. \"512MiB\"");

/// An RFC 9309 product token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token(pub Arc<str>);

impl FromStr for Token {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if is_valid_product_token(s) {
            Ok(Token(s.into()))
        } else {
            Err(format!("invalid product token {s:?}: only letters, '-' and '_'"))
        }
    }
}
from_str_value!(Token, "an RFC 9309 product token such as \"ExampleBot\"");

/// A robots.txt profile name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ProfileName(pub Profile);

impl FromStr for ProfileName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse::<Profile>().map(ProfileName).map_err(|e| e.to_string())
    }
}
from_str_value!(ProfileName, "google, rfc or conservative");

/// A CIDR (`10.0.0.0/8`) or a single address.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cidr(pub IpNet);

impl FromStr for Cidr {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if let Ok(net) = s.parse::<IpNet>() {
            return Ok(Cidr(net));
        }
        s.parse::<IpAddr>().map(|ip| Cidr(IpNet::from(ip))).map_err(|_| format!("invalid CIDR {s:?}"))
    }
}
from_str_value!(Cidr, "a CIDR such as \"10.0.0.0/8\" or an address");

/// A host pattern (`example.com`, `*.example.com`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostPatternValue(pub HostPattern);

impl FromStr for HostPatternValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        HostPattern::parse(s).map(HostPatternValue)
    }
}
from_str_value!(HostPatternValue, "a host such as \"example.com\" or \"*.example.com\"");

/// An HTTP header name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderNameValue(pub http::HeaderName);

impl FromStr for HeaderNameValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        http::HeaderName::from_bytes(s.as_bytes())
            .map(HeaderNameValue)
            .map_err(|_| format!("invalid header name {s:?}"))
    }
}
from_str_value!(HeaderNameValue, "an HTTP header name");

/// A category of use (`train-ai`, `search` or `ai-input`), for `[purpose]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CategoryValue(pub robotsgate::rep::usage::Category);

impl FromStr for CategoryValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        s.parse().map(CategoryValue).map_err(|e: robotsgate::rep::usage::UnknownCategory| e.to_string())
    }
}
from_str_value!(CategoryValue, "train-ai, search or ai-input");

/// An HTTP header name, or the empty string for none.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct OptHeaderName(pub Option<http::HeaderName>);

impl FromStr for OptHeaderName {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        if s.is_empty() {
            return Ok(OptHeaderName(None));
        }
        s.parse::<HeaderNameValue>().map(|h| OptHeaderName(Some(h.0)))
    }
}
from_str_value!(OptHeaderName, "an HTTP header name, or \"\" for none");

/// A password hash: an Argon2 PHC string (`$argon2id$v=19$...`), as made by
/// `robotsgate hash-password`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswordHashValue(pub String);

impl FromStr for PasswordHashValue {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        crate::auth::check_hash(s).map(|()| PasswordHashValue(s.to_owned()))
    }
}
from_str_value!(PasswordHashValue, "an argon2 hash made by `robotsgate hash-password`");

/// When an override stops applying: a date (`2027-01-01`, midnight UTC) or an RFC 3339
/// date-time.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expiry(pub SystemTime);

impl FromStr for Expiry {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        use time::format_description::well_known::Rfc3339;
        if let Ok(t) = time::OffsetDateTime::parse(s, &Rfc3339) {
            return Ok(Expiry(t.into()));
        }
        let format = time::macros::format_description!("[year]-[month]-[day]");
        time::Date::parse(s, &format)
            .map(|d| Expiry(d.midnight().assume_utc().into()))
            .map_err(|_| format!("invalid date {s:?}"))
    }
}

impl<'de> Deserialize<'de> for Expiry {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // TOML dates (unquoted) and strings are both accepted.
        let v = toml::Value::deserialize(d)?;
        let s = match v {
            toml::Value::String(s) => s,
            toml::Value::Datetime(dt) => dt.to_string(),
            other => return Err(de::Error::custom(format!("expected a date, found {}", other.type_str()))),
        };
        s.parse::<Expiry>()
            .map_err(|e| de::Error::custom(format!("{e} (expected \"2027-01-01\" or an RFC 3339 time)")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use robotsgate::policy::OverrideAction;

    #[test]
    fn values() {
        assert_eq!("500ms".parse::<Dur>().unwrap().0, Duration::from_millis(500));
        assert_eq!("1.5h".parse::<Dur>().unwrap().0, Duration::from_secs(5400));
        assert!("5".parse::<Dur>().is_err());
        assert!("5y".parse::<Dur>().is_err());
        assert_eq!("64KiB".parse::<Size>().unwrap().0, 65536);
        assert_eq!("2GB".parse::<Size>().unwrap().0, 2_000_000_000);
        assert!("1ZiB".parse::<Size>().is_err());
        let c = Config::parse(
            "a.toml",
            "[[policy.overrides]]\nhosts = \"*.example.com\"\naction = \"deny\"\nreason = \"r\"\nexpires = 2027-01-01\n",
        )
        .unwrap();
        let o = &c.overrides()[0];
        assert_eq!(o.action, OverrideAction::Deny);
        assert!(o.expires.is_some());
        let c = Config::parse("a.toml", "[dns.static]\n\"a.test\" = [\"127.0.0.1\"]\n").unwrap();
        assert_eq!(c.dns.static_hosts["a.test"], vec!["127.0.0.1".parse::<IpAddr>().unwrap()]);
    }
}
