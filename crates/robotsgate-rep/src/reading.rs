//! Building both readings of a file in one pass. Rules, their text and their compiled
//! rule sets are shared between the readings wherever the readings agree, which they do
//! for nearly every line of nearly every file.

use std::collections::HashMap;
use std::sync::OnceLock;

use crate::RuleKind;
use crate::cut::CutLine;
use crate::matcher::{Best, RuleInput, RuleSet, sorted_by_bytes};
use crate::pace::{self, IgnoredValue, PaceHint, PaceSource, Rate};
use crate::parser::{self, BodyFacts, Key, LineView};
use crate::pattern::{self, Pat, Span};
use crate::usage::{self, Category, Source, Statement};

/// A rule line, for citing in a verdict.
#[derive(Debug, Clone)]
pub(crate) struct RuleInfo {
    pub kind: RuleKind,
    pub line: u32,
    /// Range of the value as written (UTF-8) in [`Parsed::arena`].
    pub text: (u32, u32),
    /// Google's `index.html` rule: `allow: /d/index.html` also allows `/d/` exactly.
    pub implied: bool,
}

/// A `Content-Usage` or `Content-Signal` line, for citing and for its statement.
#[derive(Debug, Clone)]
pub(crate) struct UsageInfo {
    pub source: Source,
    pub line: u32,
    /// The path as written (empty when there is none), in [`Parsed::arena`].
    pub path: (u32, u32),
    /// The preference as written, in [`Parsed::arena`].
    pub value: (u32, u32),
    pub statement: Statement,
}

/// The usage lines of the groups one agent selects, compiled per category the first time
/// a check asks (most files have none, most agents are never asked).
#[derive(Debug)]
pub(crate) struct UsageSlot {
    google: bool,
    /// Range of that reading's `agent_groups`.
    groups: (u32, u32),
    sets: [OnceLock<RuleSet>; 3],
}

/// A group: user-agent lines and the rules after them.
#[derive(Debug)]
pub(crate) struct GroupData {
    /// Line of the group's first user-agent line.
    pub line: u32,
    /// The product tokens as the reading extracted them (lower-case), in file order:
    /// a range of [`ReadingData::agent_spans`].
    pub agents: (u32, u32),
    /// Range of [`ReadingData::rules`].
    pub rules: (u32, u32),
    /// `crawl-delay` of the group's `*` line, if any, and its line.
    pub global_delay: Option<(f64, u32)>,
    /// Range of [`ReadingData::rates`]: the group's `request-rate` lines.
    pub rates: (u32, u32),
    /// Range of [`ReadingData::usage`].
    pub usage: (u32, u32),
}

/// No rule set: no group applies.
pub(crate) const NO_SET: u32 = u32::MAX;

/// The groups one product token (or `*`) selects.
#[derive(Debug, Clone, Copy, Default)]
struct AgentEntry {
    token: Span,
    /// Range of [`ReadingData::agent_groups`].
    groups: (u32, u32),
    /// The rule set of all these groups' rules: an index into [`Parsed::sets`], or
    /// [`NO_SET`].
    set: u32,
    /// Their usage lines (and the file's): an index into [`Parsed::usage_sets`], or
    /// [`NO_SET`].
    usage: u32,
}

/// The groups of one reading and an index from agent to groups.
#[derive(Debug, Default)]
pub(crate) struct ReadingData {
    pub groups: Vec<GroupData>,
    /// Every group's rules, group after group.
    rules: Vec<GroupRule>,
    /// Lower-case tokens; `agent_spans` and the entries point here.
    tokens: Vec<u8>,
    agent_spans: Vec<Span>,
    /// The `crawl-delay` that applies to each agent line (parallel to `agent_spans`), and
    /// its line.
    agent_delays: Vec<Option<(f64, u32)>>,
    /// Every group's `request-rate` lines, group after group, with their lines.
    rates: Vec<(Rate, u32)>,
    /// Sorted by token.
    agents: Vec<AgentEntry>,
    agent_groups: Vec<u32>,
    global: AgentEntry,
    /// Every group's usage lines, group after group.
    usage: Vec<GroupRule>,
    /// `Content-Signal` lines before any group: for every agent.
    file_usage: Vec<GroupRule>,
}

/// The groups that apply to one agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applied<'a> {
    pub groups: &'a [u32],
    /// The groups name the agent (rather than `*`).
    pub specific: bool,
    /// Their rule set, or [`NO_SET`].
    set: u32,
    /// Their usage lines' slot, or [`NO_SET`].
    pub usage: u32,
}

/// A rule set that is compiled the first time a check needs it: the rules of some
/// groups of one reading. Most agents a file names are never checked, so most sets are
/// never built.
#[derive(Debug)]
pub(crate) struct SetSlot {
    google: bool,
    /// Range of that reading's `agent_groups`.
    groups: (u32, u32),
    set: OnceLock<RuleSet>,
}

/// Both readings of a file.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub rules: Vec<RuleInfo>,
    /// Rule values as written (valid UTF-8) and compiled patterns; rule sets point here.
    pub arena: Vec<u8>,
    pub sets: Vec<SetSlot>,
    automaton_min_rules: usize,
    pub google: ReadingData,
    pub rfc: ReadingData,
    /// Sitemap URLs: (start, end) of UTF-8 text in `arena`.
    pub sitemaps: Vec<(u32, u32)>,
    pub facts: BodyFacts,
    /// The line the 500 KiB limit cut and dropped, and what it may have been.
    pub cut: Option<Box<CutLine>>,
    /// `Content-Usage` and `Content-Signal` lines, in file order.
    pub usage: Vec<UsageInfo>,
    pub usage_sets: Vec<UsageSlot>,
    /// A group of either reading has a `crawl-delay` or `request-rate` that was read.
    pub has_pace: bool,
    /// `crawl-delay` and `request-rate` lines whose values were not understood (the first
    /// [`pace::MAX_IGNORED`]).
    pub ignored: Vec<IgnoredValue>,
}

impl Parsed {
    pub fn parse(body: &[u8], truncated: bool, automaton_min_rules: usize) -> Parsed {
        // When the whole body is UTF-8, so is every value cut from it at ASCII delimiters.
        let body_utf8 = std::str::from_utf8(&body[..body.len().min(parser::MAX_ROBOTS_TXT_BYTES)]).is_ok();
        let mut b = DualBuilder { body_utf8, ..DualBuilder::default() };
        let (facts, kept) = parser::parse_dual(body, truncated, |n, g, r| b.line(n, g, r));
        let mut parsed = b.finish(automaton_min_rules);
        parsed.facts = facts;
        if let (Some(line), Some(kept)) = (facts.cut_line, kept) {
            let groups = (parsed.google.groups.len(), parsed.rfc.groups.len());
            parsed.cut = Some(Box::new(CutLine::new(line, kept, groups, &mut parsed.arena)));
        }
        parsed
    }

    pub fn rule_text(&self, rule: &RuleInfo) -> &str {
        self.text(rule.text)
    }

    /// Text stored in the arena (always UTF-8).
    pub fn text(&self, (start, end): (u32, u32)) -> &str {
        std::str::from_utf8(&self.arena[start as usize..end as usize]).unwrap_or("")
    }

    /// The best allow and disallow among the groups that apply.
    pub fn eval(&self, applied: Applied<'_>, path: &[u8]) -> Best {
        let mut best = Best::default();
        if let Some(slot) = self.sets.get(applied.set as usize) {
            slot.set.get_or_init(|| self.build_set(slot)).eval(&self.arena, path, &mut best);
        }
        best
    }

    /// The best usage line of each form for `category` among the lines of the groups that
    /// apply (and the file's): Content-Usage in `allow`, Content-Signal in `disallow`.
    pub fn usage_eval(&self, applied: Applied<'_>, category: Category, path: &[u8]) -> Best {
        let mut best = Best::default();
        if let Some(slot) = self.usage_sets.get(applied.usage as usize) {
            let set = &slot.sets[category as usize];
            set.get_or_init(|| self.build_usage_set(slot, category)).eval(&self.arena, path, &mut best);
        }
        best
    }

    fn build_usage_set(&self, slot: &UsageSlot, category: Category) -> RuleSet {
        let reading = if slot.google { &self.google } else { &self.rfc };
        let groups = &reading.agent_groups[slot.groups.0 as usize..slot.groups.1 as usize];
        let inputs: Vec<RuleInput> = groups
            .iter()
            .flat_map(|&g| reading.group_usage(g))
            .chain(&reading.file_usage)
            .filter_map(|r| {
                let info = self.usage.get(r.id as usize)?;
                let kind = match info.source {
                    Source::ContentUsage => RuleKind::Allow,
                    Source::ContentSignal => RuleKind::Disallow,
                };
                let rule = usage::hit_code(info.statement.get(category), r.id);
                Some(RuleInput { kind, pattern: r.pat, rule })
            })
            .collect();
        RuleSet::build(&self.arena, &inputs, self.automaton_min_rules)
    }

    fn build_set(&self, slot: &SetSlot) -> RuleSet {
        let reading = if slot.google { &self.google } else { &self.rfc };
        let groups = &reading.agent_groups[slot.groups.0 as usize..slot.groups.1 as usize];
        let inputs: Vec<RuleInput> = groups
            .iter()
            .flat_map(|&g| reading.group_rules(g))
            .map(|r| RuleInput { kind: self.rules[r.id as usize].kind, pattern: r.pat, rule: r.id })
            .collect();
        RuleSet::build(&self.arena, &inputs, self.automaton_min_rules)
    }

    pub fn heap_bytes(&self) -> usize {
        self.rules.capacity() * std::mem::size_of::<RuleInfo>()
            + self.arena.capacity()
            + self
                .sets
                .iter()
                .map(|s| std::mem::size_of::<SetSlot>() + s.set.get().map_or(0, |r| r.heap_bytes()))
                .sum::<usize>()
            + self.google.heap_bytes()
            + self.rfc.heap_bytes()
            + self.sitemaps.capacity() * 8
            + self.cut.as_ref().map_or(0, |c| c.heap_bytes())
            + self.usage.capacity() * std::mem::size_of::<UsageInfo>()
            + self
                .usage_sets
                .iter()
                .map(|s| {
                    std::mem::size_of::<UsageSlot>()
                        + s.sets.iter().map(|r| r.get().map_or(0, |r| r.heap_bytes())).sum::<usize>()
                })
                .sum::<usize>()
            + self.ignored.capacity() * std::mem::size_of::<IgnoredValue>()
    }
}

impl ReadingData {
    /// The groups that apply to `agent`: every group naming it, else every `*` group.
    /// Only the product token `agent` starts with counts ([`parser::product_token`]:
    /// `ExampleBot/1.0` is checked as `ExampleBot`).
    pub fn applied(&self, agent: &str) -> Applied<'_> {
        let agent = parser::product_token(agent).as_bytes();
        let found = self.agents.binary_search_by(|e| {
            e.token.get(&self.tokens).iter().copied().cmp(agent.iter().map(|b| b.to_ascii_lowercase()))
        });
        let (entry, specific) = match found {
            Ok(i) if !agent.is_empty() => (&self.agents[i], true),
            _ => (&self.global, false),
        };
        let (lo, hi) = entry.groups;
        Applied {
            groups: &self.agent_groups[lo as usize..hi as usize],
            specific,
            set: entry.set,
            usage: entry.usage,
        }
    }

    fn group_rules(&self, g: u32) -> &[GroupRule] {
        let (a, b) = self.groups[g as usize].rules;
        &self.rules[a as usize..b as usize]
    }

    fn group_usage(&self, g: u32) -> &[GroupRule] {
        let (a, b) = self.groups[g as usize].usage;
        &self.usage[a as usize..b as usize]
    }

    /// The `crawl-delay` for `agent` in the groups that apply: the largest given for it,
    /// and its line (the first such line).
    pub fn crawl_delay(&self, agent: &str) -> Option<(f64, u32)> {
        let applied = self.applied(agent);
        let agent = agent.as_bytes();
        let mut best: Option<(f64, u32)> = None;
        let mut keep = |d: (f64, u32)| {
            if best.is_none_or(|b| d.0 > b.0) {
                best = Some(d);
            }
        };
        for &g in applied.groups {
            let group = &self.groups[g as usize];
            if applied.specific {
                for i in group.agents.0..group.agents.1 {
                    if self.agent_spans[i as usize].get(&self.tokens).eq_ignore_ascii_case(agent)
                        && let Some(d) = self.agent_delays[i as usize]
                    {
                        keep(d);
                    }
                }
            } else if let Some(d) = group.global_delay {
                keep(d);
            }
        }
        best
    }

    /// What `agent` is asked to wait between requests at `minute` (minutes since midnight
    /// UTC) by the groups that apply: the longest of their `crawl-delay` and of their
    /// `request-rate`s for that time of day.
    pub fn pace(&self, agent: &str, minute: u16) -> Option<PaceHint> {
        let mut best = self.crawl_delay(agent).map(|(delay, line)| PaceHint {
            delay,
            line,
            source: PaceSource::CrawlDelay,
        });
        for &g in self.applied(agent).groups {
            let (lo, hi) = self.groups[g as usize].rates;
            for (rate, line) in &self.rates[lo as usize..hi as usize] {
                if rate.window.is_some_and(|w| !w.contains(minute)) {
                    continue;
                }
                let delay = rate.delay();
                if best.is_none_or(|b| delay > b.delay) {
                    let source = PaceSource::RequestRate {
                        requests: rate.requests,
                        seconds: rate.seconds,
                        window: rate.window,
                    };
                    best = Some(PaceHint { delay, line: *line, source });
                }
            }
        }
        best
    }

    /// The tokens a group names.
    pub fn group_agents(&self, g: &GroupData) -> impl Iterator<Item = &str> + '_ {
        self.agent_spans[g.agents.0 as usize..g.agents.1 as usize]
            .iter()
            .map(|s| std::str::from_utf8(s.get(&self.tokens)).unwrap_or(""))
    }

    fn heap_bytes(&self) -> usize {
        self.groups.capacity() * std::mem::size_of::<GroupData>()
            + self.rules.capacity() * std::mem::size_of::<GroupRule>()
            + self.tokens.capacity()
            + self.agent_spans.capacity() * 8
            + self.agents.capacity() * std::mem::size_of::<AgentEntry>()
            + self.agent_groups.capacity() * 4
            + (self.usage.capacity() + self.file_usage.capacity()) * std::mem::size_of::<GroupRule>()
            + self.agent_delays.capacity() * std::mem::size_of::<Option<(f64, u32)>>()
            + self.rates.capacity() * std::mem::size_of::<(Rate, u32)>()
    }
}

/// A rule in one reading's group: the shared rule and this reading's compiled pattern.
#[derive(Debug, Clone, Copy)]
struct GroupRule {
    id: u32,
    pat: Pat,
}

#[derive(Debug, Default)]
struct GroupBuild {
    line: u32,
    /// Range of `ReadingBuild::agent_spans`.
    agents: (u32, u32),
    global: bool,
    /// Range of `ReadingBuild::rules`.
    rules: (u32, u32),
    /// Range of `ReadingBuild::usage`.
    usage: (u32, u32),
    global_delay: Option<(f64, u32)>,
    /// Range of `ReadingBuild::rates`.
    rates: (u32, u32),
    /// Agent lines since the last `crawl-delay` line start here; `global_pending`: a `*`
    /// line came since then.
    delay_from: u32,
    global_pending: bool,
}

/// One reading's groups while the file is read.
#[derive(Debug, Default)]
struct ReadingBuild {
    google: bool,
    groups: Vec<GroupBuild>,
    rules: Vec<GroupRule>,
    tokens: Vec<u8>,
    agent_spans: Vec<Span>,
    agent_delays: Vec<Option<(f64, u32)>>,
    rates: Vec<(Rate, u32)>,
    /// The current group has seen an allow/disallow line (even an empty one), so the
    /// next user-agent line starts a new group.
    rule_open: bool,
    usage: Vec<GroupRule>,
    file_usage: Vec<GroupRule>,
}

impl ReadingBuild {
    fn user_agent(&mut self, line: u32, value: &[u8]) {
        if self.groups.is_empty() || self.rule_open {
            let (a, r) = (self.agent_spans.len() as u32, self.rules.len() as u32);
            let u = self.usage.len() as u32;
            let rates = self.rates.len() as u32;
            self.groups.push(GroupBuild {
                line,
                agents: (a, a),
                rules: (r, r),
                usage: (u, u),
                rates: (rates, rates),
                delay_from: a,
                ..GroupBuild::default()
            });
            self.rule_open = false;
        }
        let token = if self.google {
            // Google: a '*' followed by whitespace and more is still global; otherwise the
            // token is the leading run of [a-zA-Z_-].
            if value.first() == Some(&b'*') && value.get(1).is_none_or(|&b| parser::is_space(b)) {
                None
            } else {
                let n = value
                    .iter()
                    .take_while(|b| b.is_ascii_alphabetic() || **b == b'-' || **b == b'_')
                    .count();
                Some(&value[..n])
            }
        } else if value == b"*" {
            None
        } else {
            Some(value)
        };
        let Some(group) = self.groups.last_mut() else { return };
        match token {
            None => {
                group.global = true;
                group.global_pending = true;
            }
            Some([]) => {}
            Some(token) => {
                let start = self.tokens.len();
                match std::str::from_utf8(token) {
                    Ok(t) => self.tokens.extend_from_slice(t.as_bytes()),
                    Err(_) => self.tokens.extend_from_slice(String::from_utf8_lossy(token).as_bytes()),
                }
                self.tokens[start..].make_ascii_lowercase();
                let span = Span { start: start as u32, len: (self.tokens.len() - start) as u32 };
                self.agent_spans.push(span);
                self.agent_delays.push(None);
                group.agents.1 = self.agent_spans.len() as u32;
            }
        }
    }

    /// A rule line: returns whether the rule lands in a group (and so must be compiled).
    fn rule_line(&mut self) -> bool {
        if self.groups.is_empty() {
            return false; // before any user-agent line: not in a group
        }
        self.rule_open = true;
        true
    }

    fn push(&mut self, rule: GroupRule) {
        if let Some(g) = self.groups.last_mut() {
            self.rules.push(rule);
            g.rules.1 = self.rules.len() as u32;
        }
    }

    /// A usage line: into the current group (in the RFC reading, a `Content-Usage` line
    /// closes the group's user-agent lines as a rule does); before any group, a `Content-Signal` line is
    /// the file's (for every agent) and a `Content-Usage` line is ignored (the attach draft
    /// puts them in groups).
    fn usage_line(&mut self, rule: GroupRule, source: Source) {
        match self.groups.last_mut() {
            Some(g) => {
                self.usage.push(rule);
                g.usage.1 = self.usage.len() as u32;
                // The attach draft makes Content-Usage a rule of RFC 9309's grammar: in the
                // RFC reading, a user-agent line after it starts a new group. Google's
                // parser does not know it, and no specification makes Content-Signal a
                // rule: they close nothing.
                if !self.google && source == Source::ContentUsage {
                    self.rule_open = true;
                }
            }
            None if source == Source::ContentSignal => self.file_usage.push(rule),
            None => {}
        }
    }

    /// Whether a usage line would land anywhere.
    fn takes_usage(&self, source: Source) -> bool {
        !self.groups.is_empty() || source == Source::ContentSignal
    }

    /// A `crawl-delay` line applies to the agent lines since the previous one (so
    /// `User-agent: a / Crawl-delay: 5 / User-agent: b / Crawl-delay: 12` gives a 5 and
    /// b 12, although a and b share their rules); after rules, to the group's agents that
    /// have none yet.
    ///
    /// Returns whether the value was read (`None` when there is no group to apply it to).
    fn crawl_delay(&mut self, line: u32, value: &[u8]) -> Option<bool> {
        let g = self.groups.last_mut()?;
        let Some(d) = pace::parse_crawl_delay(value) else { return Some(false) };
        let d = (d, line);
        let pending = g.delay_from < g.agents.1 || g.global_pending;
        let from = if pending { g.delay_from } else { g.agents.0 };
        for slot in &mut self.agent_delays[from as usize..g.agents.1 as usize] {
            slot.get_or_insert(d);
        }
        if g.global_pending || (!pending && g.global) {
            g.global_delay.get_or_insert(d);
        }
        g.delay_from = g.agents.1;
        g.global_pending = false;
        Some(true)
    }

    /// A `request-rate` line applies to every agent of its group. Returns whether the
    /// value was read (`None` when there is no group).
    fn request_rate(&mut self, line: u32, value: &[u8]) -> Option<bool> {
        let g = self.groups.last_mut()?;
        let Some(rate) = pace::parse_request_rate(value) else { return Some(false) };
        self.rates.push((rate, line));
        g.rates.1 = self.rates.len() as u32;
        Some(true)
    }
}

#[derive(Debug)]
struct DualBuilder {
    google: ReadingBuild,
    rfc: ReadingBuild,
    rules: Vec<RuleInfo>,
    usage: Vec<UsageInfo>,
    arena: Vec<u8>,
    sitemaps: Vec<(u32, u32)>,
    body_utf8: bool,
    has_pace: bool,
    ignored: Vec<IgnoredValue>,
}

impl Default for DualBuilder {
    fn default() -> Self {
        DualBuilder {
            google: ReadingBuild { google: true, ..ReadingBuild::default() },
            rfc: ReadingBuild::default(),
            rules: Vec::new(),
            usage: Vec::new(),
            arena: Vec::new(),
            sitemaps: Vec::new(),
            body_utf8: false,
            has_pace: false,
            ignored: Vec::new(),
        }
    }
}

fn usage_source(key: Key<'_>) -> Option<Source> {
    match key {
        Key::ContentUsage => Some(Source::ContentUsage),
        Key::ContentSignal => Some(Source::ContentSignal),
        _ => None,
    }
}

fn rule_kind(key: Key<'_>) -> Option<RuleKind> {
    match key {
        Key::Allow => Some(RuleKind::Allow),
        Key::Disallow => Some(RuleKind::Disallow),
        _ => None,
    }
}

impl DualBuilder {
    fn line(&mut self, number: u32, g: LineView<'_>, r: LineView<'_>) {
        let g_rule = g.and_then(|(k, v)| rule_kind(k).map(|k| (k, v)));
        let r_rule = r.and_then(|(k, v)| rule_kind(k).map(|k| (k, v)));
        match (g_rule, r_rule) {
            (Some((gk, gv)), Some((rk, rv))) if gk == rk && gv == rv => {
                let in_g = self.google.rule_line();
                let in_r = self.rfc.rule_line();
                if gv.is_empty() || !(in_g || in_r) {
                    return;
                }
                let id = self.add_rule(gk, number, gv, true);
                if pattern::is_simple(gv) {
                    // The text is the pattern.
                    let (start, _) = self.rules[id as usize].text;
                    let anchored = gv.last() == Some(&b'$');
                    let span = Span { start, len: (gv.len() - anchored as usize) as u32 };
                    let pat = Pat { span, anchored, priority: gv.len() as u32 };
                    self.google.push(GroupRule { id, pat });
                    self.rfc.push(GroupRule { id, pat });
                } else {
                    if in_g {
                        let pat = pattern::compile_google(gv, &mut self.arena);
                        self.google.push(GroupRule { id, pat });
                    }
                    if in_r {
                        let pat = pattern::compile_rfc(gv, &mut self.arena);
                        self.rfc.push(GroupRule { id, pat });
                    }
                }
                if in_g && gk == RuleKind::Allow {
                    self.index_html(number, gv);
                }
                return;
            }
            _ => {
                if let Some((kind, value)) = g_rule
                    && self.google.rule_line()
                    && !value.is_empty()
                {
                    {
                        // Google's line cut may split a character.
                        let id = self.add_rule(kind, number, value, false);
                        let pat = pattern::compile_google(value, &mut self.arena);
                        self.google.push(GroupRule { id, pat });
                        if kind == RuleKind::Allow {
                            self.index_html(number, value);
                        }
                    }
                }
                if let Some((kind, value)) = r_rule
                    && self.rfc.rule_line()
                    && !value.is_empty()
                {
                    {
                        let id = self.add_rule(kind, number, value, true);
                        let pat = pattern::compile_rfc(value, &mut self.arena);
                        self.rfc.push(GroupRule { id, pat });
                    }
                }
            }
        }
        for (reading, view) in [(&mut self.google, g), (&mut self.rfc, r)] {
            let (directive, read) = match view {
                Some((Key::UserAgent, v)) => {
                    reading.user_agent(number, v);
                    continue;
                }
                Some((Key::CrawlDelay, v)) => ("crawl-delay", reading.crawl_delay(number, v)),
                Some((Key::RequestRate, v)) => ("request-rate", reading.request_rate(number, v)),
                _ => continue,
            };
            match read {
                Some(true) => self.has_pace = true,
                // Noted once per line, whichever reading (or both) could not read it.
                Some(false)
                    if self.ignored.len() < pace::MAX_IGNORED
                        && self.ignored.last().is_none_or(|i| i.line != number) =>
                {
                    self.ignored.push(IgnoredValue { line: number, directive });
                }
                Some(false) | None => {}
            }
        }
        let gu = g.and_then(|(k, v)| usage_source(k).map(|s| (s, v)));
        let ru = r.and_then(|(k, v)| usage_source(k).map(|s| (s, v)));
        if gu.is_some() || ru.is_some() {
            self.usage_line(number, gu, ru);
        }
        if let Some((Key::Sitemap, v)) = g
            && !v.is_empty()
        {
            {
                let start = self.arena.len() as u32;
                self.push_text(v, true);
                self.sitemaps.push((start, self.arena.len() as u32));
            }
        }
    }

    /// A `Content-Usage` or `Content-Signal` line as each reading read it: recorded once
    /// when both read it alike, its path compiled per reading.
    #[cold]
    fn usage_line(&mut self, number: u32, g: Option<(Source, &[u8])>, r: Option<(Source, &[u8])>) {
        let same = g.is_some() && g == r;
        let mut shared = None;
        if let Some((source, value)) = g
            && self.google.takes_usage(source)
        {
            let (id, path) = self.add_usage(source, number, value, same);
            shared = Some(id);
            let pat =
                if path.is_empty() { Pat::default() } else { pattern::compile_google(path, &mut self.arena) };
            self.google.usage_line(GroupRule { id, pat }, source);
        }
        if let Some((source, value)) = r
            && self.rfc.takes_usage(source)
        {
            let (id, path) = match shared.filter(|_| same) {
                Some(id) => (id, usage::split_path(value).0),
                None => self.add_usage(source, number, value, true),
            };
            let pat =
                if path.is_empty() { Pat::default() } else { pattern::compile_rfc(path, &mut self.arena) };
            self.rfc.usage_line(GroupRule { id, pat }, source);
        }
    }

    fn add_usage<'v>(&mut self, source: Source, line: u32, value: &'v [u8], uncut: bool) -> (u32, &'v [u8]) {
        let (path, pref) = usage::split_path(value);
        let start = self.arena.len() as u32;
        self.push_text(path, uncut);
        let path_span = (start, self.arena.len() as u32);
        self.push_text(pref, uncut);
        let value_span = (path_span.1, self.arena.len() as u32);
        let statement = usage::parse(source, pref);
        let id = self.usage.len() as u32;
        self.usage.push(UsageInfo { source, line, path: path_span, value: value_span, statement });
        (id, path)
    }

    /// Records a rule line; `uncut` says the value is whole (not cut by Google's line
    /// limit), so it is UTF-8 when the body is.
    fn add_rule(&mut self, kind: RuleKind, line: u32, value: &[u8], uncut: bool) -> u32 {
        let start = self.arena.len() as u32;
        self.push_text(value, uncut);
        let id = self.rules.len() as u32;
        self.rules.push(RuleInfo { kind, line, text: (start, self.arena.len() as u32), implied: false });
        id
    }

    /// Appends `value` to the arena as UTF-8 text (lossy when it is not UTF-8).
    fn push_text(&mut self, value: &[u8], uncut: bool) {
        if (uncut && self.body_utf8) || std::str::from_utf8(value).is_ok() {
            self.arena.extend_from_slice(value);
        } else {
            self.arena.extend_from_slice(String::from_utf8_lossy(value).as_bytes());
        }
    }

    /// Google: an allow whose last `/` is followed by `index.htm` also allows the
    /// directory itself: the pattern up to that `/`, plus `$`.
    fn index_html(&mut self, line: u32, value: &[u8]) {
        // Escaping leaves '/' and the ASCII of "index.htm" alone: test the raw value first.
        let raw_slash = value.iter().rposition(|&b| b == b'/');
        if !raw_slash.is_some_and(|s| value[s..].starts_with(b"/index.htm")) {
            return;
        }
        let mut escaped = Vec::new();
        pattern::google_escape(value, &mut escaped);
        let Some(slash) = escaped.iter().rposition(|&b| b == b'/') else { return };
        if !escaped[slash..].starts_with(b"/index.htm") {
            return;
        }
        let Some(last) = self.rules.last().cloned() else { return };
        let id = self.rules.len() as u32;
        self.rules.push(RuleInfo { kind: RuleKind::Allow, line, text: last.text, implied: true });
        let span = pattern::push_span(&mut self.arena, &escaped[..=slash]);
        self.google.push(GroupRule { id, pat: Pat { span, anchored: true, priority: slash as u32 + 2 } });
    }

    fn finish(self, automaton_min_rules: usize) -> Parsed {
        let mut parsed = Parsed {
            rules: self.rules,
            sitemaps: self.sitemaps,
            arena: self.arena,
            automaton_min_rules,
            usage: self.usage,
            has_pace: self.has_pace,
            ignored: self.ignored,
            ..Parsed::default()
        };
        parsed.arena.shrink_to_fit();
        let (google, google_slots) = index(self.google, &mut parsed.sets, true, None);
        // An rfc group with the same rules as the google group at the same place can use
        // google's sets.
        let same: Vec<bool> = (0..self.rfc.groups.len())
            .map(|g| {
                let (Some(gg), Some(rg)) = (google.groups.get(g), self.rfc.groups.get(g)) else {
                    return false;
                };
                let a = &google.rules[gg.rules.0 as usize..gg.rules.1 as usize];
                let b = &self.rfc.rules[rg.rules.0 as usize..rg.rules.1 as usize];
                a.len() == b.len()
                    && a.iter().zip(b).all(|(x, y)| {
                        x.id == y.id
                            && x.pat.anchored == y.pat.anchored
                            && (x.pat.span == y.pat.span
                                || x.pat.span.get(&parsed.arena) == y.pat.span.get(&parsed.arena))
                    })
            })
            .collect();
        let (mut rfc, _) = index(self.rfc, &mut parsed.sets, false, Some((&google_slots, &same)));
        let mut google = google;
        if !parsed.usage.is_empty() {
            index_usage(&mut google, &mut parsed.usage_sets, true);
            index_usage(&mut rfc, &mut parsed.usage_sets, false);
        }
        parsed.google = google;
        parsed.rfc = rfc;
        parsed
    }
}

/// Indexes one reading: agents to their groups, and one (lazy) rule set per distinct
/// list of groups. With `shared`, lists whose groups all have the same rules as in the
/// google reading reuse google's set.
#[allow(clippy::type_complexity)]
fn index(
    build: ReadingBuild,
    sets: &mut Vec<SetSlot>,
    google: bool,
    shared: Option<(&HashMap<Vec<u32>, u32, foldhash::fast::RandomState>, &[bool])>,
) -> (ReadingData, HashMap<Vec<u32>, u32, foldhash::fast::RandomState>) {
    let ReadingBuild { groups, rules, tokens, agent_spans, agent_delays, rates, usage, file_usage, .. } =
        build;
    let mut data = ReadingData {
        rules,
        tokens,
        agent_spans,
        agent_delays,
        rates,
        usage,
        file_usage,
        ..ReadingData::default()
    };
    let mut pairs: Vec<(Span, u32)> = Vec::new();
    let mut global: Vec<u32> = Vec::new();
    for (g, gb) in groups.iter().enumerate() {
        for &s in &data.agent_spans[gb.agents.0 as usize..gb.agents.1 as usize] {
            pairs.push((s, g as u32));
        }
        if gb.global {
            global.push(g as u32);
        }
        data.groups.push(GroupData {
            line: gb.line,
            agents: gb.agents,
            rules: gb.rules,
            global_delay: gb.global_delay,
            rates: gb.rates,
            usage: gb.usage,
        });
    }
    let tokens = &data.tokens;
    let order = sorted_by_bytes(&pairs.iter().map(|p| p.0.get(tokens)).collect::<Vec<_>>());
    let mut entries: Vec<AgentEntry> = Vec::new();
    let mut k = 0;
    while k < order.len() {
        let token = pairs[order[k] as usize].0;
        let lo = data.agent_groups.len() as u32;
        while k < order.len() && pairs[order[k] as usize].0.get(tokens) == token.get(tokens) {
            data.agent_groups.push(pairs[order[k] as usize].1);
            k += 1;
        }
        // Group ids in file order, once each.
        let list = &mut data.agent_groups[lo as usize..];
        list.sort_unstable();
        let n = dedup_sorted(list);
        data.agent_groups.truncate(lo as usize + n);
        entries.push(AgentEntry {
            token,
            groups: (lo, data.agent_groups.len() as u32),
            set: NO_SET,
            usage: NO_SET,
        });
    }
    let lo = data.agent_groups.len() as u32;
    data.agent_groups.extend_from_slice(&global);
    let mut global = AgentEntry {
        token: Span::default(),
        groups: (lo, data.agent_groups.len() as u32),
        set: NO_SET,
        usage: NO_SET,
    };
    let mut slots: HashMap<Vec<u32>, u32, foldhash::fast::RandomState> = HashMap::default();
    for e in entries.iter_mut().chain([&mut global]) {
        let list = &data.agent_groups[e.groups.0 as usize..e.groups.1 as usize];
        if list.is_empty() {
            continue;
        }
        if let Some(&set) = slots.get(list) {
            e.set = set;
            continue;
        }
        let reuse = shared.and_then(|(google_slots, same)| {
            if list.iter().all(|&g| same.get(g as usize).copied().unwrap_or(false)) {
                google_slots.get(list).copied()
            } else {
                None
            }
        });
        e.set = reuse.unwrap_or_else(|| {
            sets.push(SetSlot { google, groups: e.groups, set: OnceLock::new() });
            sets.len() as u32 - 1
        });
        slots.insert(list.to_vec(), e.set);
    }
    data.agents = entries;
    data.global = global;
    (data, slots)
}

/// Gives every agent entry of a reading (and the entry for everyone else) the slot of its
/// groups' usage lines and the file's, when there are any.
#[cold]
fn index_usage(data: &mut ReadingData, usage_sets: &mut Vec<UsageSlot>, google: bool) {
    if data.usage.is_empty() && data.file_usage.is_empty() {
        return;
    }
    let mut slots: HashMap<&[u32], u32, foldhash::fast::RandomState> = HashMap::default();
    let ReadingData { agents, global, agent_groups, groups, file_usage, .. } = data;
    for e in agents.iter_mut().chain([global]) {
        let list = &agent_groups[e.groups.0 as usize..e.groups.1 as usize];
        let has = !file_usage.is_empty()
            || list.iter().any(|&g| groups[g as usize].usage.0 < groups[g as usize].usage.1);
        if !has {
            continue;
        }
        e.usage = *slots.entry(list).or_insert_with(|| {
            usage_sets.push(UsageSlot { google, groups: e.groups, sets: Default::default() });
            usage_sets.len() as u32 - 1
        });
    }
}

/// Removes adjacent duplicates in place; returns the new length.
fn dedup_sorted(list: &mut [u32]) -> usize {
    let mut n = 0;
    for i in 0..list.len() {
        if n == 0 || list[n - 1] != list[i] {
            list[n] = list[i];
            n += 1;
        }
    }
    n
}
