//! The robots.txt engine alone: parse a file once, check paths for a product token under
//! each profile, and see which rule decided.
//!
//! ```sh
//! cargo run -p robotsgate-rep --example check
//! ```

use robotsgate_rep::{Profile, RobotsTxt};

fn main() {
    let robots = RobotsTxt::parse(
        b"User-agent: *\nDisallow: /private\nAllow: /private/press\n\n\
          User-agent: ExampleBot\nDisallow: /search\ndisalow: /typo\nCrawl-delay: 2\n\n\
          Sitemap: https://example.com/sitemap.xml\n",
    );
    for path in ["/", "/private/x", "/search?q=1", "/typo"] {
        for profile in Profile::ALL {
            let v = robots.check_with(profile, "ExampleBot", path);
            let verdict = if v.allowed() { "allowed" } else { "disallowed" };
            println!("{path:<14} {:<13} {verdict:<11} {v}", profile.as_str());
        }
    }
    println!("crawl-delay for ExampleBot: {:?}", robots.crawl_delay("ExampleBot"));
    println!("sitemaps: {:?}", robots.sitemaps().collect::<Vec<_>>());
}
