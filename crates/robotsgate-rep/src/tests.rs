use super::*;

#[test]
fn smoke() {
    let r = RobotsTxt::parse(b"User-agent: *\nDisallow: /private\n");
    assert!(!r.check("FooBot", "/private/x").allowed());
    assert!(r.check("FooBot", "/public").allowed());
}
