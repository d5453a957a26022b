//! The bundled snapshot of the operators' published lists (see `data/README.md` for each
//! file's source and date), so a machine without Internet access verifies from the start.

/// A bundled copy of a published list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bundled {
    /// The URL the operator publishes the list at.
    pub(crate) url: &'static str,
    /// The day the copy was taken (from the mirror it came through).
    pub(crate) taken: &'static str,
    /// The document.
    pub(crate) json: &'static str,
}

/// Every bundled list.
pub(crate) const BUNDLED: &[Bundled] = &[
    Bundled {
        url: GOOGLE_COMMON,
        taken: "2026-08-21",
        json: include_str!("data/google-common-crawlers.json"),
    },
    Bundled {
        url: GOOGLE_SPECIAL,
        taken: "2026-08-21",
        json: include_str!("data/google-special-crawlers.json"),
    },
    Bundled {
        url: GOOGLE_USER_TRIGGERED,
        taken: "2026-08-21",
        json: include_str!("data/google-user-triggered-fetchers.json"),
    },
    Bundled {
        url: GOOGLE_USER_TRIGGERED_GOOGLE,
        taken: "2026-08-20",
        json: include_str!("data/google-user-triggered-fetchers-google.json"),
    },
    Bundled { url: BING, taken: "2026-07-02", json: include_str!("data/bing-bingbot.json") },
    Bundled { url: OPENAI_GPTBOT, taken: "2026-08-14", json: include_str!("data/openai-gptbot.json") },
    Bundled { url: OPENAI_SEARCHBOT, taken: "2026-08-14", json: include_str!("data/openai-searchbot.json") },
    Bundled {
        url: OPENAI_CHATGPT_USER,
        taken: "2026-08-14",
        json: include_str!("data/openai-chatgpt-user.json"),
    },
    Bundled {
        url: PERPLEXITY_BOT,
        taken: "2026-07-02",
        json: include_str!("data/perplexity-perplexitybot.json"),
    },
    Bundled {
        url: PERPLEXITY_USER,
        taken: "2026-07-02",
        json: include_str!("data/perplexity-perplexity-user.json"),
    },
    Bundled { url: APPLEBOT, taken: "2026-09-15", json: include_str!("data/apple-applebot.json") },
    Bundled { url: ANTHROPIC, taken: "2026-10-07", json: include_str!("data/anthropic-bots.json") },
];

/// The bundled copy of the list published at `url`, if there is one.
pub(crate) fn bundled(url: &str) -> Option<&'static Bundled> {
    BUNDLED.iter().find(|b| b.url == url)
}

/// Google's common crawlers (Googlebot).
pub const GOOGLE_COMMON: &str = "https://developers.google.com/static/crawling/ipranges/common-crawlers.json";
/// Google's special-case crawlers (AdsBot, ...).
pub const GOOGLE_SPECIAL: &str =
    "https://developers.google.com/static/crawling/ipranges/special-crawlers.json";
/// Google's user-triggered fetchers.
pub const GOOGLE_USER_TRIGGERED: &str =
    "https://developers.google.com/static/crawling/ipranges/user-triggered-fetchers.json";
/// Google's user-triggered fetchers on Google's own addresses (Google-Site-Verification,
/// Google-NotebookLM, ...).
pub const GOOGLE_USER_TRIGGERED_GOOGLE: &str =
    "https://developers.google.com/static/crawling/ipranges/user-triggered-fetchers-google.json";
/// Bingbot.
pub const BING: &str = "https://www.bing.com/toolbox/bingbot.json";
/// OpenAI's GPTBot.
pub const OPENAI_GPTBOT: &str = "https://openai.com/gptbot.json";
/// OpenAI's OAI-SearchBot.
pub const OPENAI_SEARCHBOT: &str = "https://openai.com/searchbot.json";
/// OpenAI's ChatGPT-User.
pub const OPENAI_CHATGPT_USER: &str = "https://openai.com/chatgpt-user.json";
/// PerplexityBot.
pub const PERPLEXITY_BOT: &str = "https://www.perplexity.ai/perplexitybot.json";
/// Perplexity-User.
pub const PERPLEXITY_USER: &str = "https://www.perplexity.ai/perplexity-user.json";
/// Applebot.
pub const APPLEBOT: &str = "https://search.developer.apple.com/applebot.json";
/// Anthropic's bots (ClaudeBot, Claude-User, Claude-SearchBot).
pub const ANTHROPIC: &str = "https://claude.com/crawling/bots.json";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::ranges::{ListLimits, RangeList, Ranges};

    /// Every bundled copy parses within the default limits, and is not empty.
    #[test]
    fn every_bundled_list_parses() {
        for b in BUNDLED {
            let list = RangeList::parse(b.json.as_bytes(), &ListLimits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", b.url));
            assert!(!list.is_empty(), "{}", b.url);
        }
        let urls: std::collections::HashSet<_> = BUNDLED.iter().map(|b| b.url).collect();
        assert_eq!(urls.len(), BUNDLED.len(), "one copy per URL");
        // Google's four lists are all bundled.
        for url in [GOOGLE_COMMON, GOOGLE_SPECIAL, GOOGLE_USER_TRIGGERED, GOOGLE_USER_TRIGGERED_GOOGLE] {
            assert!(bundled(url).is_some(), "{url}");
        }
    }

    /// An address only in Google's user-triggered-fetchers-google list (the bundled copy)
    /// is verified for Google's tokens from the start, by that list.
    #[tokio::test]
    async fn googles_own_user_triggered_fetchers_are_verified_by_the_bundled_copy() {
        use crate::identity::{Method, Operator, Verdict, Verifier};
        let operators = Operator::defaults();
        let ranges = Ranges::for_operators(&operators, ListLimits::default());
        let verifier = Verifier::new(&operators, Some(ranges), None);
        for addr in ["192.178.9.100", "2001:4860:4801:4004::1"] {
            let verdict = verifier.verify(addr.parse().unwrap(), "Google-Site-Verification").await;
            assert_eq!(
                verdict,
                Verdict::Verified(Method::IpRange { list: GOOGLE_USER_TRIGGERED_GOOGLE.into() }),
                "{addr}"
            );
        }
    }
}
