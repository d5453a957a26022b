//! The examples' own output checked: `examples/axum_site.rs` is compiled in here and its
//! tour (a real axum server wrapped in the ingress layer, real HTTP clients) is run; what
//! each visitor got and what the layer recorded are what its docs and the README say.

#[allow(dead_code)]
#[path = "../examples/axum_site.rs"]
mod axum_site;

#[tokio::test]
async fn axum_site_refuses_gptbot_its_private_path_paces_claudebot_and_lets_a_browser_in() {
    let visits = axum_site::tour().await.unwrap();
    let got: Vec<_> = visits
        .iter()
        .map(|v| {
            (
                v.user_agent,
                v.path,
                v.status.as_u16(),
                v.robotsgate.as_str(),
                v.content_usage.as_str(),
                // Whole seconds left of the 10, rounded up.
                match v.retry_after.parse::<u64>() {
                    Ok(1..=10) => "1..=10",
                    Ok(_) => "other",
                    Err(_) => v.retry_after.as_str(),
                },
                v.records.iter().map(String::as_str).collect::<Vec<_>>(),
            )
        })
        .collect();
    const CLAUDEBOT: &str = "Mozilla/5.0 (compatible; ClaudeBot/1.0)";
    assert_eq!(
        got,
        [
            // robots.txt disallows /private to GPTBot: robotsgate's 403, the route never ran.
            (
                "GPTBot/1.2",
                "/private/report",
                403,
                "disallowed",
                "-",
                "-",
                vec!["GPTBot GET /private/report -> disallowed"]
            ),
            // Allowed, with the group's AI-usage preference attached.
            (
                "GPTBot/1.2",
                "/articles/1",
                200,
                "-",
                "search=y",
                "-",
                vec!["GPTBot GET /articles/1 -> allowed"]
            ),
            // robots.txt itself: served, and its fetch recorded.
            ("GPTBot/1.2", "/robots.txt", 200, "-", "-", "-", vec!["GPTBot GET /robots.txt -> robots-txt"]),
            // `*` asks 10 s between requests: the second within them is 429 with Retry-After.
            (CLAUDEBOT, "/articles/1", 200, "-", "-", "-", vec!["ClaudeBot GET /articles/1 -> allowed"]),
            (
                CLAUDEBOT,
                "/articles/2",
                429,
                "paced",
                "-",
                "1..=10",
                vec!["ClaudeBot GET /articles/2 -> paced"]
            ),
            // A person's browser carries no bot token: not held to `*`, not recorded.
            ("Mozilla/5.0 (X11; Linux x86_64) Firefox/140.0", "/private/report", 200, "-", "-", "-", vec![]),
        ]
    );
}
