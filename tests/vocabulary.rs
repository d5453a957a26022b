//! One vocabulary (issue 27.3): for every request the layer decides, the audit record's
//! `outcome` and `reason`, what the decision observer (the proxy's metrics) is told and the
//! `x-robotsgate` header of a refusal are the same names, [`Outcome::as_str`] and
//! [`ReasonClass::as_str`].

mod support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::audit::AuditLog;
use robotsgate::layer::{DecisionObserver, Mode};
use robotsgate::{Outcome, ROBOTSGATE_HEADER, ReasonClass, Refusal, RefusalKind, Robots};
use support::{Reply, TestOrigin, bounded};
use tower::ServiceExt;

/// What the observer was told.
#[derive(Default)]
struct Seen(Mutex<Vec<(Outcome, ReasonClass)>>);

impl DecisionObserver for Seen {
    fn decision(&self, outcome: Outcome, reason: ReasonClass, _: Duration) {
        self.0.lock().unwrap().push((outcome, reason));
    }
    fn refused(&self, _: RefusalKind) {}
}

#[tokio::test]
async fn the_record_the_observer_and_the_header_name_each_outcome_alike() {
    let origin = TestOrigin::start([
        ("/robots.txt", Reply::ok("User-agent: *\nDisallow: /private\nAllow: /open\n")),
        ("/open", Reply::ok("hello")),
        ("/private", Reply::ok("secret")),
        ("/else", Reply::ok("else")),
    ])
    .await;
    let cases = [
        (Mode::Enforce, origin.url("/open"), Outcome::Allowed, ReasonClass::AllowRule),
        (Mode::Enforce, origin.url("/else"), Outcome::Allowed, ReasonClass::NoRule),
        (Mode::Enforce, origin.url("/private"), Outcome::Disallowed, ReasonClass::DisallowRule),
        (Mode::ReportOnly, origin.url("/private"), Outcome::WouldDisallow, ReasonClass::DisallowRule),
        (Mode::Enforce, origin.url("/robots.txt"), Outcome::Allowed, ReasonClass::RobotsTxt),
        // The guard refuses private addresses: no connection is made.
        (
            Mode::Enforce,
            "http://10.255.255.1/x".to_owned(),
            Outcome::DestinationDenied,
            ReasonClass::DestinationDenied,
        ),
    ];
    for (mode, url, outcome, reason) in cases {
        let (log, memory) = AuditLog::memory();
        let seen = Arc::new(Seen::default());
        let robots = Robots::builder()
            .agent("ExampleBot")
            .mode(mode)
            .allow_destination("127.0.0.0/8".parse().unwrap())
            .audit(log.clone())
            .observer(seen.clone())
            .build()
            .expect("valid settings");
        let client =
            Client::builder(TokioExecutor::new()).build::<_, Empty<Bytes>>(robots.connector().clone());
        let http = tower::ServiceBuilder::new().layer(robots.layer()).service(client);
        let req = http::Request::get(&url).body(Empty::new()).unwrap();
        let res = bounded("answer", http.oneshot(req)).await.expect("an answer");
        let header = res.headers().get(ROBOTSGATE_HEADER).map(|v| v.to_str().unwrap().to_owned());
        match outcome.refusal() {
            Some(kind) => {
                assert_eq!(Refusal::from_response(&res).map(|r| r.kind()), Some(kind), "{url}");
                assert_eq!(header.as_deref(), Some(outcome.as_str()), "{url}");
            }
            None => assert_eq!(header, None, "{url}"),
        }
        drop(res);
        log.flush().await;
        let records: Vec<serde_json::Value> = memory
            .lines()
            .iter()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|r: &serde_json::Value| r["type"] == "decision")
            .collect();
        assert_eq!(records.len(), 1, "{url}: {records:?}");
        assert_eq!(records[0]["outcome"], outcome.as_str(), "{url}");
        assert_eq!(records[0]["reason"], reason.as_str(), "{url}");
        assert_eq!(*seen.0.lock().unwrap(), [(outcome, reason)], "{url}");
    }
}
