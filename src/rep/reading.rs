//! Building both readings of a file in one pass. Rules, their text and their compiled
//! rule sets are shared between the readings wherever the readings agree, which they do
//! for nearly every line of nearly every file.

use super::RuleKind;
use super::matcher::{Best, RuleInput, RuleSet};
use super::parser::{self, BodyFacts, Key, LineView};
use super::pattern::{self, Pat, Span};

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

/// A group: user-agent lines and the rules after them.
#[derive(Debug)]
pub(crate) struct GroupData {
    /// Line of the group's first user-agent line.
    pub line: u32,
    /// The product tokens as the reading extracted them (lower-case), in file order.
    pub agents: Vec<Box<str>>,
    /// Index into [`Parsed::rulesets`].
    pub ruleset: u32,
    pub crawl_delay: Option<f64>,
}

/// The groups of one reading and an index from agent to groups.
#[derive(Debug, Default)]
pub(crate) struct ReadingData {
    pub groups: Vec<GroupData>,
    /// Sorted by token: (lower-case token, range in `agent_groups`).
    agents: Vec<(Box<[u8]>, u32, u32)>,
    agent_groups: Vec<u32>,
    global_groups: Vec<u32>,
}

/// The groups that apply to one agent.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Applied<'a> {
    pub groups: &'a [u32],
    /// The groups name the agent (rather than `*`).
    pub specific: bool,
}

/// Both readings of a file.
#[derive(Debug, Default)]
pub(crate) struct Parsed {
    pub rules: Vec<RuleInfo>,
    /// Rule values as written (valid UTF-8) and compiled patterns; rule sets point here.
    pub arena: Vec<u8>,
    pub rulesets: Vec<RuleSet>,
    pub google: ReadingData,
    pub rfc: ReadingData,
    pub sitemaps: Vec<String>,
    pub facts: BodyFacts,
}

impl Parsed {
    pub fn parse(body: &[u8], automaton_min_rules: usize) -> Parsed {
        // When the whole body is UTF-8, so is every value cut from it at ASCII delimiters.
        let body_utf8 = std::str::from_utf8(&body[..body.len().min(parser::MAX_ROBOTS_TXT_BYTES)]).is_ok();
        let mut b = DualBuilder { body_utf8, ..DualBuilder::default() };
        let facts = parser::parse_dual(body, |n, g, r| b.line(n, g, r));
        let mut parsed = b.finish(automaton_min_rules);
        parsed.facts = facts;
        parsed
    }

    pub fn rule_text(&self, rule: &RuleInfo) -> &str {
        std::str::from_utf8(&self.arena[rule.text.0 as usize..rule.text.1 as usize]).unwrap_or("")
    }

    /// The best allow and disallow among the groups that apply.
    pub fn eval(&self, reading: &ReadingData, applied: Applied<'_>, path: &[u8]) -> Best {
        let mut best = Best::default();
        let mut last = u32::MAX;
        for &g in applied.groups {
            let set = reading.groups[g as usize].ruleset;
            if set != last {
                self.rulesets[set as usize].eval(&self.arena, path, &mut best);
                last = set;
            }
        }
        best
    }

    pub fn heap_bytes(&self) -> usize {
        self.rules.capacity() * std::mem::size_of::<RuleInfo>()
            + self.arena.capacity()
            + self.rulesets.iter().map(|r| r.heap_bytes() + std::mem::size_of::<RuleSet>()).sum::<usize>()
            + self.google.heap_bytes()
            + self.rfc.heap_bytes()
            + self.sitemaps.iter().map(|s| s.capacity() + 24).sum::<usize>()
    }
}

impl ReadingData {
    /// The groups that apply to `agent`: every group naming it, else every `*` group.
    pub fn applied(&self, agent: &str) -> Applied<'_> {
        let agent = agent.as_bytes();
        let found = self.agents.binary_search_by(|(token, _, _)| {
            token.iter().copied().cmp(agent.iter().map(|b| b.to_ascii_lowercase()))
        });
        match found {
            Ok(i) if !agent.is_empty() => {
                let (_, lo, hi) = self.agents[i];
                Applied { groups: &self.agent_groups[lo as usize..hi as usize], specific: true }
            }
            _ => Applied { groups: &self.global_groups, specific: false },
        }
    }

    fn heap_bytes(&self) -> usize {
        self.groups.capacity() * std::mem::size_of::<GroupData>()
            + self.groups.iter().map(|g| g.agents.iter().map(|a| a.len() + 16).sum::<usize>()).sum::<usize>()
            + self.agents.iter().map(|a| a.0.len() + 24).sum::<usize>()
            + self.agent_groups.capacity() * 4
            + self.global_groups.capacity() * 4
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
    agents: Vec<Box<str>>,
    global: bool,
    rules: Vec<GroupRule>,
    crawl_delay: Option<f64>,
}

/// One reading's groups while the file is read.
#[derive(Debug, Default)]
struct ReadingBuild {
    google: bool,
    groups: Vec<GroupBuild>,
    /// The current group has seen an allow/disallow line (even an empty one), so the
    /// next user-agent line starts a new group.
    rule_open: bool,
}

impl ReadingBuild {
    fn user_agent(&mut self, line: u32, value: &[u8]) {
        if self.groups.is_empty() || self.rule_open {
            self.groups.push(GroupBuild { line, ..GroupBuild::default() });
            self.rule_open = false;
        }
        let Some(group) = self.groups.last_mut() else { return };
        if self.google {
            // Google: a '*' followed by whitespace and more is still global; otherwise the
            // token is the leading run of [a-zA-Z_-].
            if value.first() == Some(&b'*') && value.get(1).is_none_or(|b| b.is_ascii_whitespace()) {
                group.global = true;
            } else {
                let n = value
                    .iter()
                    .take_while(|b| b.is_ascii_alphabetic() || **b == b'-' || **b == b'_')
                    .count();
                if n > 0 {
                    group.agents.push(lower(&value[..n]));
                }
            }
        } else if value == b"*" {
            group.global = true;
        } else if !value.is_empty() {
            group.agents.push(lower(value));
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
            g.rules.push(rule);
        }
    }

    fn crawl_delay(&mut self, value: &[u8]) {
        if let (Some(g), Some(d)) = (self.groups.last_mut(), parse_crawl_delay(value)) {
            g.crawl_delay.get_or_insert(d);
        }
    }
}

fn lower(bytes: &[u8]) -> Box<str> {
    String::from_utf8_lossy(bytes).to_ascii_lowercase().into_boxed_str()
}

#[derive(Debug)]
struct DualBuilder {
    google: ReadingBuild,
    rfc: ReadingBuild,
    rules: Vec<RuleInfo>,
    arena: Vec<u8>,
    sitemaps: Vec<String>,
    body_utf8: bool,
}

impl Default for DualBuilder {
    fn default() -> Self {
        DualBuilder {
            google: ReadingBuild { google: true, ..ReadingBuild::default() },
            rfc: ReadingBuild::default(),
            rules: Vec::new(),
            arena: Vec::new(),
            sitemaps: Vec::new(),
            body_utf8: false,
        }
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
            match view {
                Some((Key::UserAgent, v)) => reading.user_agent(number, v),
                Some((Key::CrawlDelay, v)) => reading.crawl_delay(v),
                _ => {}
            }
        }
        if let Some((Key::Sitemap, v)) = g
            && !v.is_empty()
        {
            {
                self.sitemaps.push(String::from_utf8_lossy(v).into_owned());
            }
        }
    }

    /// Records a rule line; `uncut` says the value is whole (not cut by Google's line
    /// limit), so it is UTF-8 when the body is.
    fn add_rule(&mut self, kind: RuleKind, line: u32, value: &[u8], uncut: bool) -> u32 {
        let start = self.arena.len() as u32;
        if (uncut && self.body_utf8) || std::str::from_utf8(value).is_ok() {
            self.arena.extend_from_slice(value);
        } else {
            self.arena.extend_from_slice(String::from_utf8_lossy(value).as_bytes());
        }
        let id = self.rules.len() as u32;
        self.rules.push(RuleInfo { kind, line, text: (start, self.arena.len() as u32), implied: false });
        id
    }

    /// Google: an allow whose last `/` is followed by `index.htm` also allows the
    /// directory itself: the pattern up to that `/`, plus `$`.
    fn index_html(&mut self, line: u32, value: &[u8]) {
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
        let mut parsed = Parsed { rules: self.rules, sitemaps: self.sitemaps, ..Parsed::default() };
        let mut arena = self.arena;
        let build = |parsed: &mut Parsed, arena: &mut Vec<u8>, rules: &[GroupRule]| -> u32 {
            let inputs: Vec<RuleInput> = rules
                .iter()
                .map(|r| RuleInput { kind: parsed.rules[r.id as usize].kind, pattern: r.pat, rule: r.id })
                .collect();
            parsed.rulesets.push(RuleSet::build(arena, &inputs, automaton_min_rules));
            parsed.rulesets.len() as u32 - 1
        };
        let same = |arena: &[u8], a: &[GroupRule], b: &[GroupRule]| {
            a.len() == b.len()
                && a.iter().zip(b).all(|(x, y)| {
                    x.id == y.id
                        && x.pat.anchored == y.pat.anchored
                        && (x.pat.span == y.pat.span || x.pat.span.get(arena) == y.pat.span.get(arena))
                })
        };
        let mut google_sets = Vec::with_capacity(self.google.groups.len());
        for g in &self.google.groups {
            google_sets.push(build(&mut parsed, &mut arena, &g.rules));
        }
        let mut rfc_sets = Vec::with_capacity(self.rfc.groups.len());
        for (i, g) in self.rfc.groups.iter().enumerate() {
            let shared = self.google.groups.get(i).is_some_and(|gg| same(&arena, &gg.rules, &g.rules));
            rfc_sets.push(if shared { google_sets[i] } else { build(&mut parsed, &mut arena, &g.rules) });
        }
        parsed.google = index(self.google.groups, google_sets);
        parsed.rfc = index(self.rfc.groups, rfc_sets);
        arena.shrink_to_fit();
        parsed.arena = arena;
        parsed
    }
}

fn index(groups: Vec<GroupBuild>, sets: Vec<u32>) -> ReadingData {
    let mut data = ReadingData::default();
    let mut tokens: Vec<(Box<[u8]>, u32)> = Vec::new();
    for (g, (build, set)) in groups.into_iter().zip(sets).enumerate() {
        let g = g as u32;
        for a in &build.agents {
            tokens.push((a.as_bytes().into(), g));
        }
        if build.global {
            data.global_groups.push(g);
        }
        data.groups.push(GroupData {
            line: build.line,
            agents: build.agents,
            ruleset: set,
            crawl_delay: build.crawl_delay,
        });
    }
    tokens.sort_unstable();
    tokens.dedup();
    let mut i = 0;
    while i < tokens.len() {
        let lo = data.agent_groups.len() as u32;
        let mut j = i;
        while j < tokens.len() && tokens[j].0 == tokens[i].0 {
            data.agent_groups.push(tokens[j].1);
            j += 1;
        }
        let token = std::mem::take(&mut tokens[i].0);
        data.agents.push((token, lo, data.agent_groups.len() as u32));
        i = j;
    }
    data
}

/// A crawl-delay value in seconds: a non-negative finite decimal number.
pub(crate) fn parse_crawl_delay(value: &[u8]) -> Option<f64> {
    let s = std::str::from_utf8(value).ok()?;
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return None;
    }
    s.parse::<f64>().ok().filter(|d| d.is_finite() && *d >= 0.0)
}
