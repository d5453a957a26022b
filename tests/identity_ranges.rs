//! The IP range lists' refresher (issue 29, method 1) against a real HTTP origin on
//! loopback: a list fetched and swapped in, `304` with the `ETag`, a `500` keeping the
//! last good copy, a changed list swapped in, bodies too large, broken lists, redirects,
//! timeouts, the destination guard, the schedule, file lists, shutdown.

mod support;

use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use robotsgate::identity::ranges::refresh::{
    self, Outcome, RefreshConfig, RefreshError, RefreshHandle, Refreshed,
};
use robotsgate::identity::ranges::{ListError, ListLimits, ListSource, Provenance, Ranges, bundled};
use robotsgate::net::{
    ConnectError, Connector, DenyReason, DnsConfig, Guard, Resolver, TlsConfig, client_config,
};
use support::{Reply, TestOrigin, bounded, connector, loopback_guard, until};

const V1: &str = r#"{"creationTime": "2026-11-01T10:00:00.000000", "syncToken": "1",
  "prefixes": [{"ipv4Prefix": "192.0.2.0/24"}, {"ipv6Prefix": "2001:db8:1::/48"}]}"#;
const V2: &str = r#"{"creationTime": "2026-11-02T10:00:00.000000",
  "prefixes": [{"ipv4Prefix": "198.51.100.0/24"}]}"#;

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

/// The operator `ip` is listed for, if any.
fn listed(ranges: &Ranges, addr: &str) -> Option<String> {
    ranges.table().lookup(ip(addr)).next().map(|l| l.operator().to_string())
}

/// Refreshes only when asked (the first scheduled fetch a day away), test-sized timeout.
fn on_demand() -> RefreshConfig {
    RefreshConfig {
        first_fetch: Duration::from_secs(86_400),
        first_fetch_missing: Duration::from_secs(86_400),
        timeout: Duration::from_secs(5),
        ..RefreshConfig::default()
    }
}

async fn refresh_now(handle: &RefreshHandle) -> Vec<Refreshed> {
    bounded("refresh now", handle.refresh_now()).await.expect("refresher running")
}

async fn refresh_one(handle: &RefreshHandle) -> Outcome {
    let mut done = refresh_now(handle).await;
    assert_eq!(done.len(), 1, "{done:?}");
    done.remove(0).outcome
}

fn json(body: &str) -> Reply {
    Reply::typed("application/json", body.to_owned())
}

#[tokio::test]
async fn a_list_is_fetched_revalidated_kept_on_failure_and_swapped_when_changed() {
    let server = TestOrigin::start([("/list.json", json(V1).header("etag", "\"v1\""))]).await;
    let url = format!("http://a.test:{}/list.json", server.port());
    let ranges = Ranges::new(vec![ListSource::new(&url, "Example")], ListLimits::default());
    assert_eq!(listed(&ranges, "192.0.2.7"), None, "no bundled copy for this URL");
    let handle =
        refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), on_demand());

    // A list: fetched, in use.
    assert_eq!(refresh_one(&handle).await, Outcome::Updated { prefixes: 2 });
    assert_eq!(listed(&ranges, "192.0.2.7").as_deref(), Some("Example"));
    assert_eq!(listed(&ranges, "2001:db8:1::9").as_deref(), Some("Example"));
    assert_eq!(listed(&ranges, "::ffff:192.0.2.7").as_deref(), Some("Example"));
    let status = &ranges.status()[0];
    assert!(matches!(status.provenance, Some(Provenance::Fetched { .. })), "{status:?}");
    assert_eq!(status.creation_time.as_deref(), Some("2026-11-01T10:00:00.000000"));
    let first = &server.seen_for("/list.json")[0];
    assert!(first.headers.get("if-none-match").is_none());
    assert_eq!(first.headers["accept"], "application/json");

    // Not modified: asked with the ETag, the copy stays.
    server.route("/list.json", Reply::status(304).header("etag", "\"v1\""));
    assert_eq!(refresh_one(&handle).await, Outcome::NotModified);
    assert_eq!(server.seen_for("/list.json")[1].headers["if-none-match"], "\"v1\"");
    assert_eq!(listed(&ranges, "192.0.2.7").as_deref(), Some("Example"));

    // A server error: the last good copy stays in use, the error is recorded.
    server.route("/list.json", Reply::status(500));
    assert_eq!(refresh_one(&handle).await, Outcome::Failed(RefreshError::Status(500)));
    assert_eq!(listed(&ranges, "192.0.2.7").as_deref(), Some("Example"));
    assert_eq!(ranges.status()[0].last_error.as_deref(), Some("HTTP status 500"));

    // A changed list: swapped in whole.
    server.route("/list.json", json(V2).header("etag", "\"v2\""));
    assert_eq!(refresh_one(&handle).await, Outcome::Updated { prefixes: 1 });
    assert_eq!(server.seen_for("/list.json")[3].headers["if-none-match"], "\"v1\"");
    assert_eq!(listed(&ranges, "192.0.2.7"), None);
    assert_eq!(listed(&ranges, "198.51.100.7").as_deref(), Some("Example"));
    assert_eq!(ranges.status()[0].last_error, None);

    // Then the next conditional GET carries the new ETag.
    server.route("/list.json", Reply::status(304));
    assert_eq!(refresh_one(&handle).await, Outcome::NotModified);
    assert_eq!(server.seen_for("/list.json")[4].headers["if-none-match"], "\"v2\"");
    bounded("shutdown", handle.shutdown()).await;
}

#[tokio::test]
async fn broken_or_oversized_lists_keep_the_copy_in_use() {
    let server = TestOrigin::start([("/list.json", json(V1))]).await;
    let url = format!("http://a.test:{}/list.json", server.port());
    let ranges = Ranges::new(vec![ListSource::new(&url, "Example")], ListLimits::default());
    let config =
        RefreshConfig { max_body_bytes: 64 * 1024, timeout: Duration::from_millis(500), ..on_demand() };
    let handle = refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), config);
    assert_eq!(refresh_one(&handle).await, Outcome::Updated { prefixes: 2 });

    // A body past the limit.
    server.route("/list.json", Reply::pattern(1024 * 1024).header("content-type", "application/json"));
    assert_eq!(refresh_one(&handle).await, Outcome::Failed(RefreshError::TooLarge(64 * 1024)));
    // A list with one bad entry is refused whole.
    server.route(
        "/list.json",
        json(r#"{"prefixes": [{"ipv4Prefix": "198.51.100.0/24"}, {"ipv4Prefix": "198.51.100.1/24"}]}"#),
    );
    match refresh_one(&handle).await {
        Outcome::Failed(RefreshError::List(ListError::BadEntry { index: 1, .. })) => {}
        other => panic!("{other:?}"),
    }
    // Not JSON; an empty list.
    server.route("/list.json", json("<html>moved</html>"));
    assert!(matches!(refresh_one(&handle).await, Outcome::Failed(RefreshError::List(ListError::Syntax(_)))));
    server.route("/list.json", json(r#"{"prefixes": []}"#));
    assert_eq!(refresh_one(&handle).await, Outcome::Failed(RefreshError::List(ListError::Empty)));
    // No answer within the timeout.
    server.route("/list.json", json(V2).wait_forever());
    assert_eq!(
        refresh_one(&handle).await,
        Outcome::Failed(RefreshError::Timeout(Duration::from_millis(500)))
    );
    assert_eq!(listed(&ranges, "192.0.2.7").as_deref(), Some("Example"));
    assert_eq!(listed(&ranges, "198.51.100.7"), None);
    bounded("shutdown", handle.shutdown()).await;
}

#[tokio::test]
async fn redirects_are_followed_up_to_the_limit() {
    let server = TestOrigin::start([
        ("/old.json", Reply::redirect(301, "/list.json")),
        ("/list.json", json(V1)),
        ("/loop.json", Reply::redirect(302, "/loop.json")),
    ])
    .await;
    let moved = format!("http://a.test:{}/old.json", server.port());
    let looping = format!("http://a.test:{}/loop.json", server.port());
    let ranges = Ranges::new(
        vec![ListSource::new(&moved, "Moved"), ListSource::new(&looping, "Loop")],
        ListLimits::default(),
    );
    let handle =
        refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), on_demand());
    let done = refresh_now(&handle).await;
    assert_eq!(done[0].outcome, Outcome::Updated { prefixes: 2 });
    assert!(matches!(&done[1].outcome, Outcome::Failed(RefreshError::Redirect(_))), "{done:?}");
    assert_eq!(server.hits("/loop.json"), 4, "the first request and three redirects");
    assert_eq!(listed(&ranges, "192.0.2.7").as_deref(), Some("Moved"));
}

/// Fetches go through the library's connector: its destination guard applies.
#[tokio::test]
async fn the_destination_guard_applies() {
    let server = TestOrigin::start([("/list.json", json(V1))]).await;
    let url = format!("http://a.test:{}/list.json", server.port());
    let ranges = Ranges::new(vec![ListSource::new(&url, "Example")], ListLimits::default());
    let handle =
        refresh::spawn(ranges.clone(), connector(Guard::default(), Duration::from_secs(5)), on_demand());
    match refresh_one(&handle).await {
        Outcome::Failed(RefreshError::Connect(ConnectError::Denied {
            reason: DenyReason::Loopback, ..
        })) => {}
        other => panic!("{other:?}"),
    }
    assert_eq!(server.total_hits(), 0);
}

/// Without being asked, the first fetch happens after `first_fetch`, and the bundled copy
/// is in use until then.
#[tokio::test]
async fn the_schedule_fetches_on_its_own() {
    let server = TestOrigin::start([("/list.json", json(V1))]).await;
    let url = format!("http://a.test:{}/list.json", server.port());
    let ranges = Ranges::new(
        vec![ListSource::new(&url, "Example"), ListSource::new(bundled::OPENAI_GPTBOT, "OpenAI")],
        ListLimits::default(),
    );
    assert_eq!(listed(&ranges, "20.171.206.10").as_deref(), Some("OpenAI"));
    assert!(matches!(ranges.status()[1].provenance, Some(Provenance::Bundled { .. })));
    let config = RefreshConfig {
        first_fetch: Duration::ZERO,
        first_fetch_missing: Duration::ZERO,
        jitter: Duration::ZERO,
        ..on_demand()
    };
    // openai.com resolves to a private address here, which the guard refuses.
    let overrides = [("a.test", "127.0.0.1"), ("openai.com", "10.0.0.1")]
        .map(|(h, a)| (h.to_owned(), vec![ip(a)]))
        .into_iter()
        .collect();
    let resolver = Resolver::new(&DnsConfig { overrides, ..DnsConfig::default() });
    let tls = client_config(&TlsConfig::default(), &[b"http/1.1"]).unwrap();
    let connector = Connector::new(resolver, Arc::new(loopback_guard()), tls, Duration::from_secs(5));
    let handle = refresh::spawn(ranges.clone(), connector, config);
    until("scheduled fetch", || listed(&ranges, "192.0.2.7").is_some()).await;
    assert_eq!(server.hits("/list.json"), 1);
    // The bundled copy is kept when its refresh fails.
    until("gptbot attempt", || ranges.status()[1].last_error.is_some()).await;
    let error = ranges.status()[1].last_error.clone().unwrap();
    assert!(error.contains("refused"), "{error}");
    assert_eq!(listed(&ranges, "20.171.206.10").as_deref(), Some("OpenAI"));
    assert!(matches!(ranges.status()[1].provenance, Some(Provenance::Bundled { .. })));
    bounded("shutdown", handle.shutdown()).await;
}

/// A list with no copy (none bundled) checks nothing until fetched: it is fetched at once,
/// while a bundled one waits for `first_fetch`.
#[tokio::test]
async fn a_list_without_a_copy_is_fetched_at_once() {
    let server = TestOrigin::start([("/list.json", json(V1))]).await;
    let url = format!("http://a.test:{}/list.json", server.port());
    let ranges = Ranges::new(
        vec![ListSource::new(&url, "Example"), ListSource::new(bundled::OPENAI_GPTBOT, "OpenAI")],
        ListLimits::default(),
    );
    let config =
        RefreshConfig { first_fetch_missing: RefreshConfig::default().first_fetch_missing, ..on_demand() };
    let handle = refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), config);
    until("the first fetch", || listed(&ranges, "192.0.2.7").is_some()).await;
    assert_eq!(server.hits("/list.json"), 1);
    assert!(ranges.status()[1].last_error.is_none(), "the bundled list is not fetched yet");
    assert!(matches!(ranges.status()[1].provenance, Some(Provenance::Bundled { .. })));
    bounded("shutdown", handle.shutdown()).await;
}

#[tokio::test]
async fn a_file_list_overrides_and_is_reread_when_it_changes() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gptbot.json");
    std::fs::write(&path, V1).unwrap();
    let ranges = Ranges::new(vec![ListSource::new(path.to_str().unwrap(), "OpenAI")], ListLimits::default());
    assert_eq!(listed(&ranges, "192.0.2.7").as_deref(), Some("OpenAI"));
    let config = RefreshConfig { file_interval: Duration::from_secs(86_400), ..on_demand() };
    let handle = refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), config);
    // The first check reads it again (nothing known about it yet), then it is unchanged.
    assert_eq!(refresh_one(&handle).await, Outcome::Updated { prefixes: 2 });
    assert_eq!(refresh_one(&handle).await, Outcome::Unchanged);
    std::fs::write(&path, V2).unwrap();
    assert_eq!(refresh_one(&handle).await, Outcome::Updated { prefixes: 1 });
    assert_eq!(listed(&ranges, "192.0.2.7"), None);
    assert_eq!(listed(&ranges, "198.51.100.7").as_deref(), Some("OpenAI"));
    assert!(matches!(ranges.status()[0].provenance, Some(Provenance::File { .. })));
    // A broken edit keeps the copy in use.
    std::fs::write(&path, "{ not json").unwrap();
    assert!(matches!(refresh_one(&handle).await, Outcome::Failed(RefreshError::List(ListError::Syntax(_)))));
    assert_eq!(listed(&ranges, "198.51.100.7").as_deref(), Some("OpenAI"));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(refresh_one(&handle).await, Outcome::Failed(RefreshError::File(_))));
    assert_eq!(listed(&ranges, "198.51.100.7").as_deref(), Some("OpenAI"));
}

/// A file list that is a device or a FIFO is refused, at start and by the refresher:
/// reading `/dev/zero` never ends (it was read whole by the refresher, with no bound), and
/// opening a FIFO waits for a writer (it blocked start-up).
#[cfg(target_os = "linux")]
#[tokio::test]
async fn a_file_list_that_is_no_regular_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let zero = dir.path().join("zero.json");
    std::os::unix::fs::symlink("/dev/zero", &zero).unwrap();
    let fifo = dir.path().join("fifo.json");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(made.success());
    let limits = ListLimits { max_bytes: 4096, ..ListLimits::default() };
    let sources =
        vec![ListSource::new(zero.to_str().unwrap(), "A"), ListSource::new(fifo.to_str().unwrap(), "B")];
    // On a thread of its own: a start-up that blocks fails the test instead of hanging it.
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || tx.send(Ranges::new(sources, limits)));
    let ranges = bounded("start-up", rx).await.unwrap();
    assert_eq!(ranges.status().len(), 2);
    for status in ranges.status() {
        let error = status.last_error.unwrap_or_default();
        assert!(error.ends_with(": not a regular file"), "{error}");
        assert_eq!(status.prefixes, 0);
    }
    let handle =
        refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), on_demand());
    let done = refresh_now(&handle).await;
    assert_eq!(done.len(), 2, "{done:?}");
    for done in done {
        match done.outcome {
            Outcome::Failed(RefreshError::File(e)) => assert!(e.ends_with(": not a regular file"), "{e}"),
            other => panic!("{}: {other:?}", done.name),
        }
    }
    bounded("shutdown", handle.shutdown()).await;
}

#[tokio::test]
async fn shutdown_stops_a_fetch_under_way() {
    let server = TestOrigin::start([("/list.json", json(V1).wait_forever())]).await;
    let url = format!("http://a.test:{}/list.json", server.port());
    let ranges = Ranges::new(vec![ListSource::new(&url, "Example")], ListLimits::default());
    let config = RefreshConfig {
        first_fetch_missing: Duration::ZERO,
        jitter: Duration::ZERO,
        timeout: Duration::from_secs(3600),
        ..on_demand()
    };
    let handle = refresh::spawn(ranges.clone(), connector(loopback_guard(), Duration::from_secs(5)), config);
    bounded("fetch under way", server.wait_hits("/list.json", 1)).await;
    bounded("shutdown", handle.shutdown()).await;
}
