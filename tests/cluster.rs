//! Fleet mode (issue 17) against a real `redis-server` started by each test on an
//! ephemeral loopback port: replicas in process (`App::start`) sharing one Redis keep an
//! origin's Crawl-delay together (the origin's arrival times); with Redis stopped they go
//! on alone and say so (metric, audit field) or refuse (`on_error = "refuse"`); with Redis
//! back they share again; a value another program wrote is a miss.
//!
//! These tests need `redis-server` (Debian package `redis-server`), so they are ignored by
//! default: `cargo test --test cluster -- --ignored` runs them (`.ci/run` does).

mod support;

use std::time::Duration;

use http::StatusCode;
use robotsgate::server::config::{ClusterOnErrorName, Config, Dur};
use support::*;

const IGNORE: &str =
    "needs redis-server (apt-get install redis-server): cargo test --test cluster -- --ignored";

/// Loopback scheduling may deliver a request a little early against its slot.
const SLACK: Duration = Duration::from_millis(60);

fn replica(dir: &std::path::Path, redis: &RedisServer, name: &str) -> Config {
    let sub = dir.join(name);
    std::fs::create_dir_all(&sub).unwrap();
    let mut c = test_config(&sub);
    c.cluster.redis = redis.url();
    c.cluster.command_timeout = Dur(Duration::from_millis(300));
    c
}

fn gaps(origin: &TestOrigin, prefix: &str) -> Vec<Duration> {
    let a = origin.arrivals(prefix);
    a.windows(2).map(|w| w[1].1 - w[0].1).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (apt-get install redis-server): cargo test --test cluster -- --ignored"]
async fn replicas_keep_an_origins_crawl_delay_together() {
    let _ = IGNORE;
    let dir = temp_dir();
    let redis = RedisServer::start().await;
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 0.4\n"))]).await;
    for i in 0..6 {
        origin.route(&format!("/p{i}"), Reply::ok("p"));
    }
    let a = RunningProxy::start(&replica(dir.path(), &redis, "a")).await;
    let b = RunningProxy::start(&replica(dir.path(), &redis, "b")).await;
    let c = RunningProxy::start(&replica(dir.path(), &redis, "c")).await;
    // Six requests at once, two through each replica.
    let tasks: Vec<_> = (0..6)
        .map(|i| {
            let addr = [a.addr, b.addr, c.addr][i % 3];
            let url = origin.url(&format!("/p{i}"));
            tokio::spawn(async move { get(addr, &url).await.status })
        })
        .collect();
    for t in tasks {
        assert_eq!(bounded("answer", t).await.unwrap(), StatusCode::OK);
    }
    let gaps = gaps(&origin, "/p");
    assert_eq!(gaps.len(), 5);
    for g in &gaps {
        assert!(*g >= Duration::from_millis(400) - SLACK, "the fleet kept 0.4 s: {gaps:?}");
    }
    for p in [&a, &b, &c] {
        assert_eq!(p.metric("robotsgate_cluster_up"), 1.0);
        for d in of_type(&p.records().await, "decision") {
            check_decision_record(d);
            assert!(d["cluster"].is_null(), "{d}");
        }
    }
    for p in [a, b, c] {
        p.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (apt-get install redis-server): cargo test --test cluster -- --ignored"]
async fn without_redis_replicas_go_on_alone_or_refuse_and_share_again_when_it_is_back() {
    let dir = temp_dir();
    let mut redis = RedisServer::start().await;
    let origin = TestOrigin::start([("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 0.2\n"))]).await;
    for p in ["/x", "/y", "/z"] {
        origin.route(p, Reply::ok("ok"));
    }
    let alone = RunningProxy::start(&replica(dir.path(), &redis, "alone")).await;
    let mut strict = replica(dir.path(), &redis, "strict");
    strict.cluster.on_error = ClusterOnErrorName::Refuse;
    let strict = RunningProxy::start(&strict).await;
    assert_eq!(get(alone.addr, &origin.url("/x")).await.status, StatusCode::OK);
    assert_eq!(alone.metric("robotsgate_cluster_up"), 1.0);

    redis.stop();
    // Decided and paced alone, and said so.
    let got = get(alone.addr, &origin.url("/y")).await;
    assert_eq!(got.status, StatusCode::OK, "{}", got.text());
    assert_eq!(alone.metric("robotsgate_cluster_up"), 0.0);
    let records = alone.records().await;
    let y = of_type(&records, "decision").into_iter().find(|d| d["url"] == origin.url("/y")).unwrap();
    check_decision_record(y);
    assert_eq!(y["cluster"], "alone", "{y}");
    // The strict replica notices (its first request finds Redis gone), then refuses.
    let first = get(strict.addr, &origin.url("/z")).await;
    let got = if first.status == StatusCode::SERVICE_UNAVAILABLE {
        first
    } else {
        get(strict.addr, &origin.url("/z")).await
    };
    assert_eq!(got.status, StatusCode::SERVICE_UNAVAILABLE, "{}", got.text());
    assert_eq!(got.header("x-robotsgate"), "cluster-unavailable");

    // Back: shared again (the replicas notice within a second or two).
    redis.restart().await;
    bounded("the replicas see Redis again", async {
        while alone.metric("robotsgate_cluster_up") != 1.0 || strict.metric("robotsgate_cluster_up") != 1.0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
    assert_eq!(get(strict.addr, &origin.url("/z")).await.status, StatusCode::OK);
    let before = origin.arrivals("/").len();
    assert_eq!(get(alone.addr, &origin.url("/x")).await.status, StatusCode::OK);
    assert_eq!(origin.arrivals("/").len(), before + 1);
    let g = gaps(&origin, "/");
    assert!(*g.last().unwrap() >= Duration::from_millis(200) - SLACK, "shared again: {g:?}");
    alone.stop().await;
    strict.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "needs redis-server (apt-get install redis-server): cargo test --test cluster -- --ignored"]
async fn a_value_another_program_wrote_is_a_miss() {
    let dir = temp_dir();
    let redis = RedisServer::start().await;
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nCrawl-delay: 30\n")),
        ("/a", Reply::ok("a")),
        ("/b", Reply::ok("b")),
    ])
    .await;
    let proxy = RunningProxy::start(&replica(dir.path(), &redis, "a")).await;
    let key = format!("robotsgate:{{{}}}:pace:ExampleBot", origin.base());
    // A slot field that is no number: not trusted, the request goes at once.
    redis.cli(&["HSET", &key, "last", "soon"]);
    let t = tokio::time::Instant::now();
    assert_eq!(get(proxy.addr, &origin.url("/a")).await.status, StatusCode::OK);
    assert!(t.elapsed() < Duration::from_secs(2));
    // A key of the wrong type: replaced, and pacing is still shared (Redis is up).
    redis.cli(&["DEL", &key]);
    redis.cli(&["SET", &key, "garbage"]);
    let t = tokio::time::Instant::now();
    assert_eq!(get(proxy.addr, &origin.url("/b")).await.status, StatusCode::OK);
    assert!(t.elapsed() < Duration::from_secs(2));
    assert_eq!(proxy.metric("robotsgate_cluster_up"), 1.0);
    assert!(redis.cli(&["TYPE", &key]).trim() == "hash", "the lane's state was written anew");
    proxy.stop().await;
}
