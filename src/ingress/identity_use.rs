//! [`IdentityUse`]: what the ingress policy does with a bot's identity verdict, decided
//! in one place (the service acts on it, the record names it).

use super::Impersonators;
use crate::identity::Identity;

/// How the policy used an identity verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdentityUse {
    /// Failed, and impersonators are refused (`impersonators = "refuse"`).
    Refuse,
    /// Not verified, and its operator requires verification (`require = true`): refused
    /// whatever `impersonators` says.
    Require,
    /// Failed, and impersonators are held to `User-agent: *` (`impersonators = "star"`).
    Star,
    /// Failed, and impersonators are judged as the bot they claim to be, the failure only
    /// reported (`impersonators = "allow"`).
    Allow,
    /// Verified, or unverified for an operator that does not require verification: judged
    /// as the bot it claims to be.
    AsClaimed,
}

impl IdentityUse {
    /// The use of `identity` under `impersonators`. The precedence is
    /// [`Identity::refused`]'s: a failed check refused as an impersonator first, then an
    /// operator's requirement, then `star` or `allow` for the other failures.
    pub(crate) fn of(identity: &Identity, impersonators: Impersonators) -> IdentityUse {
        let failed = identity.verdict.is_failed();
        let refuse_failed = impersonators == Impersonators::Refuse;
        if identity.refused(refuse_failed) {
            if failed && refuse_failed { IdentityUse::Refuse } else { IdentityUse::Require }
        } else if failed {
            match impersonators {
                Impersonators::Star => IdentityUse::Star,
                _ => IdentityUse::Allow,
            }
        } else {
            IdentityUse::AsClaimed
        }
    }

    /// Whether the request is refused for its identity.
    pub(crate) fn refuses(self) -> bool {
        matches!(self, IdentityUse::Refuse | IdentityUse::Require)
    }

    /// `refuse`, `require`, `star`, `allow` or `as-claimed`: the audit record's
    /// `identity_policy`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            IdentityUse::Refuse => "refuse",
            IdentityUse::Require => "require",
            IdentityUse::Star => "star",
            IdentityUse::Allow => "allow",
            IdentityUse::AsClaimed => "as-claimed",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::{Method, Verdict, Why};

    fn id(verdict: Verdict, required: bool) -> Identity {
        Identity { verdict, operator: Some("Example".into()), token: None, required }
    }

    #[test]
    fn failures_follow_impersonators_and_a_requirement_refuses_the_rest() {
        use IdentityUse::*;
        use Impersonators as I;
        let verified = Verdict::Verified(Method::ReverseDns { name: "a.example".into() });
        let failed = Verdict::Failed(Why::NotInRanges);
        let unverified = Verdict::Unverified(Why::Pending);
        let table = [
            (&failed, false, I::Refuse, Refuse),
            (&failed, false, I::Star, Star),
            (&failed, false, I::Allow, Allow),
            (&failed, true, I::Refuse, Refuse),
            (&failed, true, I::Star, Require),
            (&failed, true, I::Allow, Require),
            (&unverified, true, I::Allow, Require),
            (&unverified, false, I::Refuse, AsClaimed),
            (&verified, true, I::Refuse, AsClaimed),
            (&verified, false, I::Star, AsClaimed),
        ];
        for (verdict, required, impersonators, want) in table {
            let got = IdentityUse::of(&id(verdict.clone(), required), impersonators);
            assert_eq!(got, want, "{verdict} required={required} {impersonators:?}");
            assert_eq!(got.refuses(), id(verdict.clone(), required).refused(impersonators == I::Refuse));
        }
    }
}
