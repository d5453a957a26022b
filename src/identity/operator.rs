//! [`Operator`]: who runs a set of bots, and how to check that a request is theirs.

use super::ranges::bundled;

/// An operator of bots: the product tokens its bots send, and what verifies them.
///
/// Plain data, one `[[verify.operators]]` entry of the configuration; the defaults
/// ([`Operator::defaults`]) cover the large crawlers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Operator {
    /// Its name (e.g. `Google`), as verdicts and logs name it.
    pub name: String,
    /// The product tokens its bots' `User-Agent`s carry (matched without regard to case).
    pub tokens: Vec<String>,
    /// Its published IP range lists: URLs (refreshed; a bundled copy is used until
    /// then) or file paths.
    pub ip_lists: Vec<String>,
    /// The domains its bots' reverse DNS names end with (forward-confirmed).
    pub rdns_suffixes: Vec<String>,
    /// The `Signature-Agent`s (key directory URLs, or origins meaning their well-known
    /// directory) whose keys speak for it (Web Bot Auth). A request signed by one of them
    /// and carrying none of [`Operator::tokens`] in its `User-Agent` is judged as the first
    /// token.
    pub signature_agents: Vec<String>,
    /// A request carrying one of its tokens (or naming one of its `Signature-Agent`s) that
    /// is not verified is refused, not only one whose check failed.
    pub require: bool,
}

impl Operator {
    /// An operator named `name`, with nothing to check yet.
    pub fn new(name: impl Into<String>) -> Operator {
        Operator {
            name: name.into(),
            tokens: Vec::new(),
            ip_lists: Vec::new(),
            rdns_suffixes: Vec::new(),
            signature_agents: Vec::new(),
            require: false,
        }
    }

    /// Adds product tokens.
    pub fn tokens(mut self, tokens: impl IntoIterator<Item = impl Into<String>>) -> Operator {
        self.tokens.extend(tokens.into_iter().map(Into::into));
        self
    }

    /// Adds IP range lists (URLs or file paths).
    pub fn ip_lists(mut self, lists: impl IntoIterator<Item = impl Into<String>>) -> Operator {
        self.ip_lists.extend(lists.into_iter().map(Into::into));
        self
    }

    /// Adds reverse DNS suffixes.
    pub fn rdns_suffixes(mut self, suffixes: impl IntoIterator<Item = impl Into<String>>) -> Operator {
        self.rdns_suffixes.extend(suffixes.into_iter().map(Into::into));
        self
    }

    /// Adds `Signature-Agent`s (key directory URLs, or origins).
    pub fn signature_agents(mut self, agents: impl IntoIterator<Item = impl Into<String>>) -> Operator {
        self.signature_agents.extend(agents.into_iter().map(Into::into));
        self
    }

    /// Requires verification of its bots (default: only a failed check is refused).
    pub fn require(mut self, require: bool) -> Operator {
        self.require = require;
        self
    }

    /// Whether its bots use `token` (compared without regard to ASCII case).
    pub fn uses_token(&self, token: &str) -> bool {
        self.tokens.iter().any(|t| t.eq_ignore_ascii_case(token))
    }

    /// The operators robotsgate knows out of the box, with the lists and reverse DNS
    /// domains they publish (the lists are bundled; see
    /// [`ranges::bundled`](super::ranges::bundled)).
    ///
    /// Google's reverse DNS domains are `googlebot.com`, `google.com` and
    /// `gae.googleusercontent.com` (its user-triggered fetchers): not all of
    /// `googleusercontent.com`, under which every Google Cloud customer's virtual machine
    /// has a forward-confirming name.
    pub fn defaults() -> Vec<Operator> {
        vec![
            Operator::new("Google")
                .tokens([
                    "Googlebot",
                    "Googlebot-Image",
                    "Googlebot-News",
                    "Googlebot-Video",
                    "Storebot-Google",
                    "Google-InspectionTool",
                    "GoogleOther",
                    "GoogleOther-Image",
                    "GoogleOther-Video",
                    "Google-CloudVertexBot",
                    "AdsBot-Google",
                    "AdsBot-Google-Mobile",
                    "Mediapartners-Google",
                    "APIs-Google",
                    "FeedFetcher-Google",
                    "Google-Read-Aloud",
                    "Google-Site-Verification",
                ])
                .ip_lists([
                    bundled::GOOGLE_COMMON,
                    bundled::GOOGLE_SPECIAL,
                    bundled::GOOGLE_USER_TRIGGERED,
                    bundled::GOOGLE_USER_TRIGGERED_GOOGLE,
                ])
                .rdns_suffixes(["googlebot.com", "google.com", "gae.googleusercontent.com"]),
            Operator::new("Microsoft")
                .tokens(["bingbot", "BingPreview", "msnbot", "adidxbot", "MicrosoftPreview"])
                .ip_lists([bundled::BING])
                .rdns_suffixes(["search.msn.com"]),
            Operator::new("OpenAI").tokens(["GPTBot", "OAI-SearchBot", "ChatGPT-User"]).ip_lists([
                bundled::OPENAI_GPTBOT,
                bundled::OPENAI_SEARCHBOT,
                bundled::OPENAI_CHATGPT_USER,
            ]),
            Operator::new("Perplexity")
                .tokens(["PerplexityBot", "Perplexity-User"])
                .ip_lists([bundled::PERPLEXITY_BOT, bundled::PERPLEXITY_USER]),
            Operator::new("Apple")
                .tokens(["Applebot"])
                .ip_lists([bundled::APPLEBOT])
                .rdns_suffixes(["applebot.apple.com"]),
            Operator::new("Anthropic")
                .tokens(["ClaudeBot", "Claude-User", "Claude-SearchBot"])
                .ip_lists([bundled::ANTHROPIC]),
            Operator::new("Baidu")
                .tokens(["Baiduspider", "Baiduspider-image", "Baiduspider-video", "Baiduspider-news"])
                .rdns_suffixes(["crawl.baidu.com"]),
            Operator::new("Yandex")
                .tokens([
                    "YandexBot",
                    "YandexImages",
                    "YandexMobileBot",
                    "YandexVideo",
                    "YandexNews",
                    "YandexAccessibilityBot",
                    "YandexRenderResourcesBot",
                ])
                .rdns_suffixes(["yandex.ru", "yandex.net", "yandex.com"]),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_consistent() {
        let ops = Operator::defaults();
        let mut tokens = std::collections::HashSet::new();
        for op in &ops {
            assert!(!op.tokens.is_empty(), "{}", op.name);
            assert!(!op.ip_lists.is_empty() || !op.rdns_suffixes.is_empty(), "{}", op.name);
            for t in &op.tokens {
                assert!(tokens.insert(t.to_ascii_lowercase()), "{t} claimed twice");
            }
            for list in &op.ip_lists {
                assert!(list.starts_with("https://"), "{list}");
            }
        }
        let google = &ops[0];
        assert!(google.uses_token("googlebot") && google.uses_token("GOOGLEBOT"));
        assert!(!google.uses_token("Googlebot/2.1"));
    }
}
