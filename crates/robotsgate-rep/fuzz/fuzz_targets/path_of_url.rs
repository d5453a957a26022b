//! `path_of_url` takes any string: it never panics, and what it returns starts with
//! `/`, has no fragment, and is cut from the input. A check with the string as the
//! path (read as a URL unless it is already a path) never panics either. Nor does
//! `split_http_url`, whose path starts with `/`, has no fragment and is checked too.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use robotsgate_rep::{Profile, RobotsTxt, path_of_url, split_http_url};

fn robots() -> &'static RobotsTxt {
    static R: OnceLock<RobotsTxt> = OnceLock::new();
    R.get_or_init(|| {
        RobotsTxt::parse(b"User-agent: *\nDisallow: /a*b$\nAllow: /a/index.html\nDisallow: /%2A\nDisallow: /?q=\n")
    })
}

fuzz_target!(|data: &[u8]| {
    let url = String::from_utf8_lossy(data);
    let path = path_of_url(&url);
    assert!(path.starts_with('/'), "path_of_url({url:?}) = {path:?}");
    assert!(!path.contains('#'), "path_of_url({url:?}) = {path:?} keeps the fragment");
    assert!(
        url.contains(&*path) || url.contains(&path[1..]),
        "path_of_url({url:?}) = {path:?} is not cut from the input"
    );
    for profile in Profile::ALL {
        let v = robots().check_with(profile, "FooBot", &url);
        let _ = v.to_string();
    }
    if let Some(split) = split_http_url(&url) {
        assert!(split.path.starts_with('/'), "split_http_url({url:?}) = {split:?}");
        assert!(!split.path.contains('#'), "split_http_url({url:?}) = {split:?} keeps the fragment");
        assert!(!split.host().is_empty(), "split_http_url({url:?}) = {split:?} has no host");
        for profile in Profile::ALL {
            let _ = robots().check_with(profile, "FooBot", &split.path).allowed();
        }
    }
});
