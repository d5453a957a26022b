//! **Precedence, stated once.** Every rule that matches offers its priority (the length
//! of its compiled pattern in octets, see [`crate::pattern`]). Per kind, the highest
//! priority wins ([`Best::offer`]), and of two equal priorities the rule earlier in the
//! file; between the two kinds, allow wins a tie ([`Best::allowed`]). The matchers only
//! find which rules match and offer them here.

use crate::RuleKind;

/// A rule that matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Hit {
    /// Length of the compiled pattern: longer is more specific.
    pub priority: u32,
    /// Index of the rule in its reading, in file order.
    pub rule: u32,
}

impl Hit {
    /// The hit as one number that orders hits the way [`Best`] prefers them: higher
    /// priority first, then the rule earlier in the file. `0` means "none".
    #[inline]
    pub fn key(self) -> u64 {
        ((self.priority as u64) << 32) | (u32::MAX - self.rule) as u64
    }

    #[inline]
    fn from_key(key: u64) -> Option<Hit> {
        (key != 0).then(|| Hit { priority: (key >> 32) as u32, rule: u32::MAX - key as u32 })
    }
}

/// The best allow and the best disallow seen so far, as [`Hit::key`]s.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Best {
    pub allow: u64,
    pub disallow: u64,
}

impl Best {
    /// Keeps `hit` if it beats the current best of its kind: a higher priority wins, and
    /// of two equal priorities the rule earlier in the file is kept.
    #[inline]
    pub fn offer(&mut self, kind: RuleKind, hit: Hit) {
        self.offer_key(kind, hit.key());
    }

    #[inline]
    pub fn offer_key(&mut self, kind: RuleKind, key: u64) {
        let slot = match kind {
            RuleKind::Allow => &mut self.allow,
            RuleKind::Disallow => &mut self.disallow,
        };
        *slot = (*slot).max(key);
    }

    /// Merges another result in (used when several groups apply).
    #[inline]
    pub fn merge(&mut self, other: &Best) {
        self.allow = self.allow.max(other.allow);
        self.disallow = self.disallow.max(other.disallow);
    }

    /// Whether a rule set whose best possible hits are `reach` could still change the
    /// outcome.
    #[inline]
    pub fn improvable_by(&self, reach: &Best) -> bool {
        reach.allow > self.allow || reach.disallow > self.disallow
    }

    /// The best hit of each kind, if any.
    #[inline]
    pub fn hits(&self) -> (Option<Hit>, Option<Hit>) {
        (Hit::from_key(self.allow), Hit::from_key(self.disallow))
    }

    /// The verdict: allowed unless the best disallow is strictly more specific than the
    /// best allow. Returns the deciding hit, if any rule matched.
    #[inline]
    pub fn allowed(&self) -> (bool, Option<(RuleKind, Hit)>) {
        match (Hit::from_key(self.allow), Hit::from_key(self.disallow)) {
            (None, None) => (true, None),
            (Some(a), None) => (true, Some((RuleKind::Allow, a))),
            (None, Some(d)) => (false, Some((RuleKind::Disallow, d))),
            (Some(a), Some(d)) if a.priority >= d.priority => (true, Some((RuleKind::Allow, a))),
            (Some(_), Some(d)) => (false, Some((RuleKind::Disallow, d))),
        }
    }
}
