//! Known agents and finding the product token a `User-Agent` carries. Pure: no I/O.
//!
//! A token is found as crawlers are told to match their own: case-insensitively and as a
//! whole word. A word is a maximal run of ASCII letters, digits, `-` and `_`; the token
//! `GPTBot` is found in `GPTBot/1.2` and in `Mozilla/5.0 (compatible; GPTBot/1.2;
//! +https://openai.com/gptbot)`, never in `NotGPTBot/1.0` or `GPTBot-Fake/1.0`. Tokens
//! written with other characters (`bigsur.ai`, `ChatGPT Agent`) are found as a
//! case-insensitive substring with the same boundaries on both sides.

use std::cell::RefCell;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::Deserialize;

use crate::rep::usage::Category;

/// Bytes of a `User-Agent` looked at; the rest is ignored (a real one is a few hundred).
pub const MAX_USER_AGENT_BYTES: usize = 1024;

/// The bundled list (see `src/ingress/data/README.md` for its source and date).
const BUNDLED: &str = include_str!("data/robots.json");

/// One known agent: its product token and what its list says of it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentInfo {
    /// The product token, as the list writes it (`GPTBot`).
    pub token: Arc<str>,
    /// Who runs it, as the list says (may be markdown or "Unclear at this time.").
    pub operator: Arc<str>,
    /// What it is for, as the list says (`Scrapes data to train OpenAI's products.`).
    pub function: Arc<str>,
    /// The categories of use read from `function` (see [`purposes_of`]).
    pub purposes: Vec<Category>,
}

/// The categories of use a known agent's `function` text declares, read by keywords:
/// "train" → `train-ai`, "search" → `search`, "assistant", "agent", "prompt", "answer" or
/// "user" → `ai-input`. Text that names none declares nothing (no purpose is checked).
pub fn purposes_of(function: &str) -> Vec<Category> {
    let f = function.to_ascii_lowercase();
    let mut out = Vec::new();
    if f.contains("train") {
        out.push(Category::TrainAi);
    }
    if f.contains("search") {
        out.push(Category::Search);
    }
    if ["assistant", "agent", "prompt", "answer", "user"].iter().any(|k| f.contains(k)) {
        out.push(Category::AiInput);
    }
    out
}

/// A known-agents file that could not be read.
#[derive(Debug, thiserror::Error)]
#[error("known agents list: {0}")]
pub struct AgentsError(#[from] serde_json::Error);

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    operator: String,
    #[serde(default)]
    function: String,
}

/// The known agents: the ai.robots.txt project's list, bundled or from a file.
#[derive(Debug, Clone)]
pub struct KnownAgents {
    by_lower: HashMap<Box<str>, AgentInfo>,
}

impl KnownAgents {
    /// The list bundled with this version of robotsgate.
    pub fn bundled() -> KnownAgents {
        // The bundled file is checked by a unit test; an empty list is the fallback.
        KnownAgents::from_json(BUNDLED.as_bytes()).unwrap_or_else(|_| KnownAgents::empty())
    }

    /// No known agents: only the site file's own groups name bots.
    pub fn empty() -> KnownAgents {
        KnownAgents { by_lower: HashMap::new() }
    }

    /// A list in the shape of ai.robots.txt's `robots.json`: an object whose keys are
    /// product tokens and whose values have `operator` and `function` (other fields are
    /// ignored).
    pub fn from_json(json: &[u8]) -> Result<KnownAgents, AgentsError> {
        let entries: HashMap<String, Entry> = serde_json::from_slice(json)?;
        let by_lower = entries
            .into_iter()
            .filter(|(token, _)| !token.trim().is_empty())
            .map(|(token, e)| {
                let info = AgentInfo {
                    purposes: purposes_of(&e.function),
                    token: token.trim().into(),
                    operator: e.operator.into(),
                    function: e.function.into(),
                };
                (token.trim().to_ascii_lowercase().into_boxed_str(), info)
            })
            .collect();
        Ok(KnownAgents { by_lower })
    }

    /// This list with `tokens` (a product token, its operator) added where it has no
    /// entry of that token: the identity operators' tokens, so that a bot claiming one is
    /// found (and checked) whether or not the site's file or the list names it. An added
    /// agent declares no purpose.
    pub fn with_tokens<'a>(mut self, tokens: impl IntoIterator<Item = (&'a str, &'a str)>) -> KnownAgents {
        for (token, operator) in tokens {
            let token = token.trim();
            if token.is_empty() {
                continue;
            }
            self.by_lower.entry(token.to_ascii_lowercase().into_boxed_str()).or_insert_with(|| AgentInfo {
                token: token.into(),
                operator: operator.into(),
                function: "".into(),
                purposes: Vec::new(),
            });
        }
        self
    }

    /// The agent whose token is `token` (case-insensitive).
    pub fn get(&self, token: &str) -> Option<&AgentInfo> {
        // Looked up on every bot request: a token of ordinary length is lowercased on the
        // stack rather than into a new `String`.
        let mut buf = [0u8; 64];
        match buf.get_mut(..token.len()) {
            Some(lower) => {
                lower.copy_from_slice(token.as_bytes());
                lower.make_ascii_lowercase();
                // ASCII lowercasing leaves UTF-8 valid, so this never fails.
                self.by_lower.get(std::str::from_utf8(lower).ok()?)
            }
            None => self.by_lower.get(token.to_ascii_lowercase().as_str()),
        }
    }

    /// How many agents the list has.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.by_lower.len()
    }
}

/// The tokens a `User-Agent` is searched for: the site file's group names and the known
/// agents, lower-cased. Built once per robots.txt copy.
#[derive(Debug, Clone, Default)]
pub struct TokenSet {
    /// Under each lower-cased word: the token that is the word, and the tokens with other
    /// characters that begin with it. Each word of the `User-Agent` is looked up once.
    words: HashMap<Box<str>, Word, foldhash::quality::RandomState>,
    /// Tokens that begin with a character that is not a word character: searched for.
    leading: Vec<(Box<str>, Found)>,
    /// Tells this set's entries in the per-thread cache of [`TokenSet::find_recent`] from
    /// another set's: unique per [`TokenSet::new`] (0: the empty default set).
    id: u64,
}

/// The ids of [`TokenSet`]s.
static NEXT_SET_ID: AtomicU64 = AtomicU64::new(1);

/// `User-Agent`s [`TokenSet::find_recent`] remembers per thread, and the longest it does.
const RECENT_SLOTS: usize = 64;
const RECENT_UA_BYTES: usize = 512;

thread_local! {
    static RECENT: RefCell<Recent> = RefCell::new(Recent::new());
}

/// The token found for each of the last `User-Agent`s, direct-mapped by their hash: a
/// `User-Agent` evicts the one whose slot it takes. Bounded: `RECENT_SLOTS` entries of at
/// most `RECENT_UA_BYTES` each.
struct Recent {
    hasher: foldhash::fast::RandomState,
    slots: Vec<Option<RecentEntry>>,
}

struct RecentEntry {
    set: u64,
    user_agent: Box<str>,
    found: Option<Found>,
}

impl Recent {
    fn new() -> Recent {
        Recent {
            hasher: foldhash::fast::RandomState::default(),
            slots: (0..RECENT_SLOTS).map(|_| None).collect(),
        }
    }
}

/// What a word of a `User-Agent` may be the beginning of.
#[derive(Debug, Clone, Default)]
struct Word {
    /// The token made of this word alone.
    token: Option<Found>,
    /// Tokens with other characters (`bigsur.ai`, `ChatGPT Agent`) that begin with it.
    longer: Vec<(Box<str>, Found)>,
}

/// The token a `User-Agent` carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The token, as the site file or the known-agents list writes it.
    pub token: Arc<str>,
    /// Whether the site file names it in a `User-agent` line.
    pub site_group: bool,
}

fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-' || b == b'_'
}

impl TokenSet {
    /// The set of `site` (the site file's group names) and `known`.
    pub fn new<'a>(site: impl IntoIterator<Item = &'a str>, known: &KnownAgents) -> TokenSet {
        let mut set = TokenSet::default();
        for info in known.by_lower.values() {
            set.add(&info.token, false);
        }
        // The site's names last: they win over a known agent of the same name.
        for token in site {
            set.add(token, true);
        }
        set.id = NEXT_SET_ID.fetch_add(1, Ordering::Relaxed);
        set
    }

    /// [`TokenSet::find`], remembered: a client sends the same `User-Agent` with each
    /// request, so the token found for each of the last few dozen `User-Agent`s seen on
    /// this thread is kept (one lookup of the whole header, not one per word). Same answer
    /// as [`TokenSet::find`], owned.
    pub fn find_recent(&self, user_agent: &str) -> Option<Found> {
        if user_agent.len() > RECENT_UA_BYTES {
            return self.find(user_agent).cloned();
        }
        RECENT.with(|recent| {
            let Ok(mut recent) = recent.try_borrow_mut() else { return self.find(user_agent).cloned() };
            let recent = &mut *recent;
            // The remainder is below RECENT_SLOTS: the cast back cannot truncate.
            let at = (recent.hasher.hash_one(user_agent) % RECENT_SLOTS as u64) as usize;
            let Some(slot) = recent.slots.get_mut(at) else { return self.find(user_agent).cloned() };
            if let Some(e) = slot
                && e.set == self.id
                && *e.user_agent == *user_agent
            {
                return e.found.clone();
            }
            let found = self.find(user_agent).cloned();
            *slot = Some(RecentEntry { set: self.id, user_agent: user_agent.into(), found: found.clone() });
            found
        })
    }

    fn add(&mut self, token: &str, site_group: bool) {
        let token = token.trim();
        if token.is_empty() || token == "*" || token.len() > MAX_USER_AGENT_BYTES {
            return;
        }
        let lower: Box<str> = token.to_ascii_lowercase().into();
        let found = Found { token: token.into(), site_group };
        let first = lower.bytes().take_while(|&b| is_word_byte(b)).count();
        let list = if first == lower.len() {
            self.words.entry(lower).or_default().token = Some(found);
            return;
        } else if first == 0 {
            &mut self.leading
        } else {
            &mut self.words.entry(lower[..first].into()).or_default().longer
        };
        match list.iter_mut().find(|(t, _)| *t == lower) {
            Some(slot) => slot.1 = found,
            None => list.push((lower, found)),
        }
    }

    /// The token `user_agent` carries, if any (its first [`MAX_USER_AGENT_BYTES`] bytes
    /// are looked at). A token the site file names wins over one only the known-agents
    /// list has; among equals, the first in the `User-Agent`.
    pub fn find(&self, user_agent: &str) -> Option<&Found> {
        let ua = user_agent.as_bytes();
        let ua = &ua[..ua.len().min(MAX_USER_AGENT_BYTES)];
        let mut best: Option<(usize, &Found)> = None;
        fn consider<'f>(best: &mut Option<(usize, &'f Found)>, at: usize, f: &'f Found) {
            let better = match *best {
                None => true,
                Some((pos, b)) => {
                    (f.site_group && !b.site_group) || (f.site_group == b.site_group && at < pos)
                }
            };
            if better {
                *best = Some((at, f));
            }
        }
        // Words, and the tokens with other characters that begin with one.
        let mut buf = [0u8; 64];
        let mut long = Vec::new();
        let mut i = 0;
        while i < ua.len() {
            if !is_word_byte(ua[i]) {
                i += 1;
                continue;
            }
            let start = i;
            while i < ua.len() && is_word_byte(ua[i]) {
                i += 1;
            }
            let word = &ua[start..i];
            let lower = if word.len() <= buf.len() {
                &mut buf[..word.len()]
            } else {
                long.clear();
                long.extend_from_slice(word);
                &mut long[..]
            };
            lower.copy_from_slice(word);
            lower.make_ascii_lowercase();
            // Word bytes are ASCII.
            let Ok(w) = std::str::from_utf8(lower) else { continue };
            let Some(entry) = self.words.get(w) else { continue };
            if let Some(f) = &entry.token {
                consider(&mut best, start, f);
            }
            for (token, f) in &entry.longer {
                let t = token.as_bytes();
                let end = start + t.len();
                if ua.get(start..end).is_some_and(|s| s.eq_ignore_ascii_case(t))
                    && ua.get(end).is_none_or(|&b| !is_word_byte(b))
                {
                    consider(&mut best, start, f);
                }
            }
        }
        // Tokens that begin with another character.
        if !self.leading.is_empty() {
            let hay = ua.to_ascii_lowercase();
            for (token, f) in &self.leading {
                let t = token.as_bytes();
                let mut from = 0;
                while let Some(off) = memchr::memmem::find(&hay[from..], t) {
                    let at = from + off;
                    let end = at + t.len();
                    let before_ok = at == 0 || !is_word_byte(hay[at - 1]);
                    let after_ok = end >= hay.len() || !is_word_byte(hay[end]);
                    if before_ok && after_ok {
                        consider(&mut best, at, f);
                        break;
                    }
                    from = at + 1;
                }
            }
        }
        best.map(|(_, f)| f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_agents_and_token_search() {
        let agents = KnownAgents::bundled();
        assert!(agents.get("gptbot").is_some());
        let set = TokenSet::new(["ExampleBot"], &agents);
        let ua = "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)";
        assert_eq!(&*set.find(ua).unwrap().token, "GPTBot");
        assert!(set.find("NotGPTBot/1.0").is_none());
        assert!(set.find("Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0").is_none());
        assert!(set.find("examplebot/2").unwrap().site_group);
    }

    #[test]
    fn bundled_list_parses() {
        let k = KnownAgents::from_json(BUNDLED.as_bytes()).unwrap();
        assert!(k.len() > 100, "{}", k.len());
        let g = k.get("GPTBOT").unwrap();
        assert_eq!(&*g.token, "GPTBot");
        assert!(g.purposes.contains(&Category::TrainAi));
        assert!(k.get("ClaudeBot").is_some());
    }

    /// Tokens are looked up case-insensitively whatever their length (a short one is
    /// lowercased on the stack, a long one into a `String`), and non-ASCII bytes are
    /// compared as they are.
    #[test]
    fn lookup_is_case_insensitive_at_every_length() {
        let (edge, long) = ("Edge".repeat(16), "Long".repeat(20));
        let json = format!(
            r#"{{"ShortBot": {{"operator": "A", "function": "AI training"}},
                "{edge}": {{"operator": "B", "function": "search"}},
                "{long}": {{"operator": "C", "function": "search"}},
                "CaféBot": {{"operator": "D", "function": ""}}}}"#
        );
        let k = KnownAgents::from_json(json.as_bytes()).unwrap();
        assert_eq!(&*k.get("SHORTBOT").unwrap().token, "ShortBot");
        assert_eq!(edge.len(), 64);
        assert_eq!(&*k.get(&edge.to_ascii_uppercase()).unwrap().token, edge);
        assert_eq!(&*k.get(&long.to_ascii_lowercase()).unwrap().token, long);
        assert!(k.get("cafébot").is_some());
        assert!(k.get("CAFÉBOT").is_none(), "only ASCII letters fold");
        assert!(k.get("").is_none());
        assert!(k.get(&"l".repeat(65)).is_none());
    }

    #[test]
    fn find_recent_answers_as_find_per_set() {
        let agents = KnownAgents::bundled();
        let a = TokenSet::new(["ExampleBot"], &agents);
        let b = TokenSet::new(["OtherBot"], &agents);
        let uas = [
            "examplebot/2",
            "OtherBot/1.0 (compatible; GPTBot/1.2)",
            "Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0",
            "Mozilla/5.0 (compatible; GPTBot/1.2; +https://openai.com/gptbot)",
        ];
        // Twice each, the two sets interleaved: the second answers come from the cache,
        // and one set's entry is never the other's answer.
        for _ in 0..2 {
            for ua in uas {
                assert_eq!(a.find_recent(ua).as_ref(), a.find(ua), "{ua}");
                assert_eq!(b.find_recent(ua).as_ref(), b.find(ua), "{ua}");
            }
        }
        assert_eq!(&*b.find_recent(uas[1]).unwrap().token, "OtherBot");
        assert_eq!(&*a.find_recent(uas[1]).unwrap().token, "GPTBot");
        // More User-Agents than slots, and one longer than those kept.
        for i in 0..(RECENT_SLOTS * 3) {
            let ua = format!("Bot{i}/1.0 (compatible; GPTBot/1.2)");
            assert_eq!(a.find_recent(&ua).as_ref(), a.find(&ua));
        }
        let long = format!("{} GPTBot/1.2", "x".repeat(RECENT_UA_BYTES));
        assert_eq!(&*a.find_recent(&long).unwrap().token, "GPTBot");
    }

    #[test]
    fn whole_tokens_only() {
        let set = TokenSet::new(["Googlebot"], &KnownAgents::bundled());
        let f = |ua: &str| set.find(ua).map(|f| f.token.to_string());
        assert_eq!(f("GPTBot/1.2").as_deref(), Some("GPTBot"));
        assert_eq!(f("gptbot").as_deref(), Some("GPTBot"));
        assert_eq!(f("Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)").as_deref(), Some("GPTBot"));
        assert_eq!(f("NotGPTBot/1.0"), None);
        assert_eq!(f("GPTBot-Fake/1.0"), None);
        assert_eq!(f("GPTBotX"), None);
        assert_eq!(
            f("Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)").as_deref(),
            Some("Googlebot")
        );
        assert_eq!(f("Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0"), None);
        // Tokens with a dot or a space.
        assert_eq!(f("Mozilla/5.0 (compatible; bigsur.ai)").as_deref(), Some("bigsur.ai"));
        assert_eq!(f("xbigsur.ai"), None);
        assert_eq!(f("ChatGPT Agent/1.0").as_deref(), Some("ChatGPT Agent"));
        assert_eq!(f("chatgpt agentx"), None);
        assert_eq!(f("ChatGPT Agen"), None);
        assert_eq!(f("Foo Sidetrade Indexer Bot/1.0; bar").as_deref(), Some("Sidetrade indexer bot"));
        assert_eq!(f("Sidetrade indexer botnet"), None);
        // At one place, a word token wins over a longer one with other characters.
        assert_eq!(f("iaskspider/2.0").as_deref(), Some("iaskspider"));
    }

    #[test]
    fn tokens_beginning_with_other_characters_and_long_words() {
        let long = format!("{}bot", "x".repeat(80));
        let set = TokenSet::new([".dotbot", "Two Words", long.as_str()], &KnownAgents::empty());
        let f = |ua: &str| set.find(ua).map(|f| f.token.to_string());
        assert_eq!(f("a .DotBot/1").as_deref(), Some(".dotbot"));
        assert_eq!(f("a.dotbot/1"), None);
        assert_eq!(f("x two words").as_deref(), Some("Two Words"));
        assert_eq!(f(&format!("Mozilla {}/1", long.to_uppercase())).as_deref(), Some(long.as_str()));
        // Among tokens at different places the first wins, whatever their kind.
        assert_eq!(f("Two Words .dotbot").as_deref(), Some("Two Words"));
        assert_eq!(f(".dotbot Two Words").as_deref(), Some(".dotbot"));
    }

    #[test]
    fn site_group_wins_and_first_wins() {
        let set = TokenSet::new(["ExampleBot"], &KnownAgents::bundled());
        assert_eq!(&*set.find("GPTBot/1 ExampleBot/2").unwrap().token, "ExampleBot");
        assert_eq!(&*set.find("ClaudeBot/1 GPTBot/2").unwrap().token, "ClaudeBot");
    }

    #[test]
    fn bounded_and_hostile() {
        let set = TokenSet::new(["ExampleBot"], &KnownAgents::bundled());
        let mut ua = "a".repeat(MAX_USER_AGENT_BYTES);
        ua.push_str(" GPTBot/1");
        assert_eq!(set.find(&ua), None, "past the bound");
        let long_word = "x".repeat(100_000);
        assert_eq!(set.find(&long_word), None);
        assert_eq!(set.find(""), None);
        assert_eq!(set.find("\u{00e9}\u{00e9} GPTBot/1").map(|f| &*f.token), Some("GPTBot"));
    }

    #[test]
    fn purposes() {
        assert_eq!(purposes_of("Scrapes data to train OpenAI's products."), vec![Category::TrainAi]);
        assert_eq!(purposes_of("AI Search Crawlers"), vec![Category::Search]);
        assert_eq!(purposes_of("Unclear at this time."), vec![]);
    }
}
