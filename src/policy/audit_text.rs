//! Text the audit log writes again and again for decisions resting on one robots.txt
//! copy, remembered with the copy: the fetch facts, and the decision fields per kind of
//! decision ([`DecisionKey`]).

use std::fmt;
use std::sync::Arc;

use crate::origin::Origin;
use crate::rep::{Profile, Reading, RuleId};

/// Text the audit log writes again and again for decisions resting on one copy (see
/// `audit`): kept with the copy, so it is made once and goes when the copy goes.
#[derive(Default)]
pub(crate) struct AuditText {
    /// The robots.txt facts as JSON.
    pub(crate) facts: std::sync::OnceLock<Box<str>>,
    /// Per kind of decision ([`DecisionKey`]): the fields from `origin` to `explanation`.
    pub(crate) decisions: std::sync::Mutex<Vec<(DecisionKey, Box<str>)>>,
}

impl AuditText {
    /// Kinds of decision remembered per copy: a copy has a handful of rules a crawler hits.
    pub(crate) const MAX_DECISIONS: usize = 64;
}

impl Clone for AuditText {
    /// A clone makes its text again (it is only ever a few hundred bytes).
    fn clone(&self) -> AuditText {
        AuditText::default()
    }
}

impl fmt::Debug for AuditText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuditText").finish_non_exhaustive()
    }
}

/// What makes two decisions on one copy read the same in the audit log, apart from the
/// request: the origin, product token, profile, mode and the rule (or no rule) that decided.
/// Only fresh copies' rule and no-rule decisions have one; the rest are written out each time.
/// Made from a decision by [`DecisionKey::of`], next to [`Decision`](super::Decision).
#[derive(Debug)]
pub(crate) struct DecisionKey {
    pub(super) origin: Arc<Origin>,
    pub(super) agent: Arc<str>,
    pub(super) profile: Profile,
    pub(super) report_only: bool,
    pub(super) allowed: bool,
    /// The site's usage preferences refused the request's purpose (its outcome).
    pub(super) usage_refused: bool,
    /// Rule, reading, implied by index.html, readings disagree; `None`: no rule matched.
    pub(super) rule: Option<(RuleId, Reading, bool, bool)>,
}
