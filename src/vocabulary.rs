//! The decision's vocabulary: what became of a request ([`Outcome`]) and the class of
//! why ([`ReasonClass`]), each name written once, here. The audit records (`outcome`,
//! `reason`), the proxy's metric labels, the `x-robotsgate` header of a refusal
//! ([`Outcome::refusal`], in `refusal.rs`: this module imports nothing of the crate) and the site side's records all use these names.
//!
//! ```
//! use robotsgate::{Outcome, ReasonClass, RefusalKind};
//!
//! assert_eq!(Outcome::WouldDisallow.as_str(), "would-disallow");
//! assert_eq!("paced".parse::<Outcome>(), Ok(Outcome::Paced));
//! assert_eq!(Outcome::Disallowed.refusal(), Some(RefusalKind::Disallowed));
//! assert_eq!(ReasonClass::DisallowRule.to_string(), "disallow-rule");
//! ```

use std::fmt;
use std::str::FromStr;

/// Declares a fieldless enum with one wire name per variant: `as_str`, `ALL`, `FromStr`,
/// `Display`, `Serialize` (as the name) and comparison with `&str`.
macro_rules! wire_names {
    (
        $(#[$meta:meta])*
        pub enum $name:ident { $( $(#[$vmeta:meta])* $variant:ident = $wire:literal, )+ }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum $name { $( $(#[$vmeta])* $variant, )+ }

        impl $name {
            /// Every variant, in a stable order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            /// Its name in the audit log, metrics and answers.
            pub const fn as_str(self) -> &'static str {
                match self { $($name::$variant => $wire,)+ }
            }
        }

        impl FromStr for $name {
            type Err = UnknownName;

            fn from_str(s: &str) -> Result<Self, UnknownName> {
                match s {
                    $($wire => Ok($name::$variant),)+
                    _ => Err(UnknownName),
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl PartialEq<str> for $name {
            fn eq(&self, other: &str) -> bool {
                self.as_str() == other
            }
        }

        impl PartialEq<&str> for $name {
            fn eq(&self, other: &&str) -> bool {
                self.as_str() == *other
            }
        }
    };
}

wire_names! {
    /// What became of a request robotsgate decided: the `outcome` of its audit record and
    /// of the `robotsgate_decisions_total` metric.
    pub enum Outcome {
        /// It went (robots.txt, the usage preferences and pacing let it).
        Allowed = "allowed",
        /// robots.txt disallows it: refused (`403 disallowed`).
        Disallowed = "disallowed",
        /// Report-only: robots.txt disallows it, and it went.
        WouldDisallow = "would-disallow",
        /// robots.txt allows it, the site's AI-usage preferences refuse its purpose:
        /// refused (`403 usage-refused`).
        UsageRefused = "usage-refused",
        /// Report-only (or not enforced on a response): the usage preferences refuse it,
        /// and it went.
        WouldRefuseUsage = "would-refuse-usage",
        /// The guard refuses its destination: refused (`403 destination-denied`).
        DestinationDenied = "destination-denied",
        /// It would wait too long for its slot: refused (`paced`).
        Paced = "paced",
        /// The site side in report-only: it would have been paced, and it went.
        WouldPace = "would-pace",
        /// Fleet mode's Redis cannot be reached and `cluster.on_error` is `refuse`:
        /// refused (`503 cluster-unavailable`).
        ClusterUnavailable = "cluster-unavailable",
        /// The site side: the bot is not who it says it is: refused (`identity-failed`).
        IdentityFailed = "identity-failed",
        /// The site side in report-only: it failed the identity check, and it went.
        WouldFailIdentity = "would-fail-identity",
        /// The site side: its operator requires its bots to be verified and this one is
        /// not: refused (`identity-unverified`).
        IdentityUnverified = "identity-unverified",
        /// The site side in report-only: it would have been refused as unverified, and it
        /// went.
        WouldRefuseUnverified = "would-refuse-unverified",
        /// The site side: a fetch of `/robots.txt` itself (always served).
        RobotsTxt = "robots-txt",
    }
}

impl Outcome {
    /// The outcome of a decision as enforced (`report_only`: as only reported):
    /// `allowed`, `(would-)disallow(ed)`, `(would-)refuse(d)-usage` or
    /// `destination-denied`.
    pub(crate) fn of(
        allowed: bool,
        usage_refused: bool,
        destination_denied: bool,
        report_only: bool,
    ) -> Outcome {
        match (allowed, report_only) {
            _ if destination_denied => Outcome::DestinationDenied,
            (true, false) if usage_refused => Outcome::UsageRefused,
            (true, true) if usage_refused => Outcome::WouldRefuseUsage,
            (true, _) => Outcome::Allowed,
            (false, false) => Outcome::Disallowed,
            (false, true) => Outcome::WouldDisallow,
        }
    }
}

wire_names! {
    /// The class of why a request was decided as it was: the `reason` of its audit record
    /// and of the `robotsgate_decisions_total` metric (see
    /// [`policy::Reason::class`](crate::policy::Reason::class)).
    pub enum ReasonClass {
        /// An `allow` rule decided.
        AllowRule = "allow-rule",
        /// A `disallow` rule decided.
        DisallowRule = "disallow-rule",
        /// No rule matched the path: allowed.
        NoRule = "no-rule",
        /// `/robots.txt` itself: always allowed.
        RobotsTxt = "robots-txt",
        /// robots.txt is unavailable (4xx): allow all.
        RobotsUnavailable = "robots-unavailable",
        /// robots.txt redirected too often: allow all.
        RobotsRedirectLimit = "robots-redirect-limit",
        /// robots.txt cannot be fetched (5xx, network): disallow all.
        RobotsUnreachable = "robots-unreachable",
        /// The guard refuses the destination.
        DestinationDenied = "destination-denied",
        /// Fleet mode's Redis cannot be reached (and requests are refused).
        ClusterUnavailable = "cluster-unavailable",
        /// An operator's override decided.
        Override = "override",
        /// The site side: the site's AI-usage preferences refuse the bot's purpose.
        UsageRefused = "usage-refused",
        /// The site side: the bot failed its identity check.
        IdentityFailed = "identity-failed",
        /// The site side: the bot's operator requires verification, and it is not verified.
        IdentityUnverified = "identity-unverified",
    }
}

/// A name that is not one of the vocabulary's (parsing an [`Outcome`] or a
/// [`ReasonClass`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("not a name robotsgate uses")]
pub struct UnknownName;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RefusalKind;

    #[test]
    fn every_name_round_trips() {
        for o in Outcome::ALL {
            assert_eq!(o.as_str().parse::<Outcome>(), Ok(*o));
            assert_eq!(o.to_string(), o.as_str());
            assert_eq!(serde_json::to_value(o).unwrap(), o.as_str());
            assert_eq!(*o, o.as_str());
        }
        for r in ReasonClass::ALL {
            assert_eq!(r.as_str().parse::<ReasonClass>(), Ok(*r));
            assert_eq!(r.to_string(), r.as_str());
            assert_eq!(serde_json::to_value(r).unwrap(), r.as_str());
        }
        assert_eq!("something-else".parse::<Outcome>(), Err(UnknownName));
        let names: std::collections::HashSet<_> = Outcome::ALL.iter().map(|o| o.as_str()).collect();
        assert_eq!(names.len(), Outcome::ALL.len(), "no name twice");
    }

    /// The header of a refusal says what the audit record's outcome says.
    #[test]
    fn a_refusal_is_named_as_its_outcome() {
        let mut refusals = 0;
        for o in Outcome::ALL {
            if let Some(kind) = o.refusal() {
                refusals += 1;
                assert_eq!(kind.as_str(), o.as_str());
                assert_eq!(RefusalKind::from_header(o.as_str().as_bytes()), Some(kind));
            }
        }
        assert_eq!(refusals, 5);
    }
}
