//! The pacer in virtual time (tokio's paused clock): spacing, order, refusals, slots
//! given back, back-off, report-only, concurrency and dropping idle lanes.

use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use http::{HeaderMap, HeaderValue, StatusCode};
use tokio::time::Instant;

use super::*;
use crate::origin::{HostPattern, Origin};
use crate::rep::{PaceHint, PaceSource};

const S: fn(u64) -> Duration = Duration::from_secs;

fn lane() -> (Arc<Origin>, Arc<str>) {
    (Arc::new(Origin::parse("https://example.com/").unwrap()), "ExampleBot".into())
}

fn crawl_delay(secs: f64) -> Option<PaceHint> {
    Some(PaceHint { delay: secs, line: 2, source: PaceSource::CrawlDelay })
}

/// Each request's index and when it was let go (`None`: refused).
type Outcomes = Arc<Mutex<Vec<(usize, Option<Duration>)>>>;

/// Starts `n` requests one after the other (each queued before the next starts) and
/// records, for each, its index and when it was let go (or refused: `None`).
async fn burst(pacer: &Pacer, hint: Option<PaceHint>, n: usize) -> Outcomes {
    let out = Arc::new(Mutex::new(Vec::new()));
    let start = Instant::now();
    let (origin, agent) = lane();
    for i in 0..n {
        let (pacer, out, origin, agent) = (pacer.clone(), out.clone(), origin.clone(), agent.clone());
        tokio::spawn(async move {
            let r = pacer.pace(&origin, &agent, hint, false).await;
            out.lock().unwrap().push((i, r.ok().map(|_| start.elapsed())));
        });
        tokio::task::yield_now().await;
    }
    out
}

async fn settle(out: &Outcomes, n: usize) -> Vec<(usize, Option<Duration>)> {
    tokio::time::timeout(S(3600), async {
        while out.lock().unwrap().len() < n {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("every request let go or refused");
    let mut got = out.lock().unwrap().clone();
    got.sort();
    got
}

#[tokio::test(start_paused = true)]
async fn crawl_delay_spaces_requests_in_arrival_order() {
    let pacer = Pacer::new(PacingConfig::default());
    let got = settle(&burst(&pacer, crawl_delay(1.5), 5).await, 5).await;
    let expected: Vec<_> = (0..5).map(|i| (i, Some(Duration::from_millis(1500 * i as u64)))).collect();
    assert_eq!(got, expected);
    assert_eq!(pacer.held(), 0);
}

#[tokio::test(start_paused = true)]
async fn no_delay_anywhere_nothing_waits_and_no_state_is_kept() {
    let pacer = Pacer::new(PacingConfig::default());
    assert!(pacer.idle());
    let got = settle(&burst(&pacer, None, 20).await, 20).await;
    assert!(got.iter().all(|(_, t)| *t == Some(Duration::ZERO)), "{got:?}");
    assert_eq!(pacer.lanes(), 0);
}

#[tokio::test(start_paused = true)]
async fn min_delay_and_host_rules_pace_without_robots_txt() {
    let config = PacingConfig { min_delay: S(1), ..PacingConfig::default() };
    let pacer = Pacer::new(config.clone());
    assert!(!pacer.idle());
    let got = settle(&burst(&pacer, None, 3).await, 3).await;
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), [Some(S(0)), Some(S(1)), Some(S(2))]);

    let rule = HostRule {
        hosts: HostPattern::parse("example.com").unwrap(),
        delay: Some(S(4)),
        max_concurrency: None,
        reason: "their ops team asked".into(),
        expires: None,
    };
    let pacer = Pacer::new(PacingConfig { hosts: vec![rule], ..config });
    let (origin, agent) = lane();
    let first = pacer.pace(&origin, &agent, crawl_delay(2.0), false).await.unwrap();
    let facts = first.facts.unwrap();
    assert_eq!(facts.plan.delay, S(4));
    assert_eq!(facts.plan.source.unwrap().class(), "host-override");
    let started = Instant::now();
    let second = pacer.pace(&origin, &agent, crawl_delay(2.0), false).await.unwrap();
    assert_eq!(started.elapsed(), S(4));
    assert_eq!(second.facts.unwrap().waited, S(4));
}

#[tokio::test(start_paused = true)]
async fn a_delay_above_the_cap_is_clamped_and_says_so() {
    let pacer = Pacer::new(PacingConfig::default());
    let (origin, agent) = lane();
    let first = pacer.pace(&origin, &agent, crawl_delay(120.0), false).await.unwrap().facts.unwrap();
    assert_eq!((first.plan.delay, first.plan.clamped_from), (S(30), Some(S(120))));
    let started = Instant::now();
    pacer.pace(&origin, &agent, crawl_delay(120.0), false).await.unwrap();
    assert_eq!(started.elapsed(), S(30));
}

#[tokio::test(start_paused = true)]
async fn past_max_wait_or_a_full_queue_is_refused_at_once_with_the_next_slot() {
    // 30 s apart, 60 s of wait allowed: the 1st goes now, the 2nd at 30 s, the 3rd at
    // 60 s; the 4th would go at 90 s.
    let pacer = Pacer::new(PacingConfig::default());
    let got = burst(&pacer, crawl_delay(30.0), 4).await;
    tokio::task::yield_now().await;
    {
        let now = got.lock().unwrap().clone();
        assert!(now.contains(&(3, None)), "the 4th is refused at once: {now:?}");
    }
    let (origin, agent) = lane();
    let refused = pacer.pace(&origin, &agent, crawl_delay(30.0), false).await.expect_err("refused");
    assert_eq!(refused.retry_after, S(90));
    assert_eq!(refused.facts.refused, Some(PaceRefusal::MaxWait));
    let got = settle(&got, 4).await;
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), [Some(S(0)), Some(S(30)), Some(S(60)), None]);

    // A queue of two: the third request held is refused, whatever its wait.
    let pacer = Pacer::new(PacingConfig { max_queue_per_origin: 2, ..PacingConfig::default() });
    let t0 = Instant::now();
    let got = burst(&pacer, crawl_delay(10.0), 4).await;
    let got = settle(&got, 4).await;
    assert_eq!(got.iter().map(|g| g.1).collect::<Vec<_>>(), [Some(S(0)), Some(S(10)), Some(S(20)), None]);
    let (origin, agent) = lane();
    tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, crawl_delay(10.0), false).await }
    });
    tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, crawl_delay(10.0), false).await }
    });
    tokio::task::yield_now().await;
    assert_eq!(pacer.held(), 2);
    let refused = pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.expect_err("queue full");
    assert_eq!(refused.facts.refused, Some(PaceRefusal::QueueFull));
    // The two held go at 30 s and 40 s; the next slot is at 50 s.
    assert_eq!(refused.retry_after, (t0 + S(50)) - Instant::now());
}

#[tokio::test(start_paused = true)]
async fn a_request_that_goes_away_gives_its_slot_back() {
    let pacer = Pacer::new(PacingConfig::default());
    let (origin, agent) = lane();
    let start = Instant::now();
    pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.unwrap();
    // B waits for 10 s, C behind it for 20 s.
    let b = tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.map(|_| ()) }
    });
    tokio::task::yield_now().await;
    let c = tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.map(|_| start.elapsed()) }
    });
    tokio::task::yield_now().await;
    assert_eq!(pacer.held(), 2);
    tokio::time::sleep(S(5)).await;
    b.abort(); // B's client disconnects while held
    let _ = b.await;
    assert_eq!(c.await.unwrap().unwrap(), S(10), "C takes B's slot");
    assert_eq!(pacer.held(), 0);

    // One behind the head leaving changes nothing for the head.
    let d = tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.map(|_| start.elapsed()) }
    });
    tokio::task::yield_now().await;
    let e = tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.map(|_| ()) }
    });
    tokio::task::yield_now().await;
    e.abort();
    let _ = e.await;
    assert_eq!(pacer.held(), 1);
    assert_eq!(d.await.unwrap().unwrap(), S(20));
}

fn answer(status: u16, retry_after: Option<&str>) -> (StatusCode, HeaderMap) {
    let mut headers = HeaderMap::new();
    if let Some(ra) = retry_after {
        headers.insert(http::header::RETRY_AFTER, HeaderValue::from_str(ra).unwrap());
    }
    (StatusCode::from_u16(status).unwrap(), headers)
}

/// Sends one request through the pacer and gives it `status`; returns how long it was
/// held and what pacing said.
async fn send(pacer: &Pacer, status: u16, retry_after: Option<&str>) -> (Duration, Option<PaceFacts>) {
    let (origin, agent) = lane();
    let started = Instant::now();
    let pass = pacer.pace(&origin, &agent, None, false).await.expect("let through");
    let waited = started.elapsed();
    let (status, headers) = answer(status, retry_after);
    pass.ticket.answered(status, &headers);
    (waited, pass.facts)
}

#[tokio::test(start_paused = true)]
async fn a_429_with_retry_after_pauses_the_lane() {
    let pacer = Pacer::new(PacingConfig { max_wait: S(300), ..PacingConfig::default() });
    assert_eq!(send(&pacer, 429, Some("120")).await.0, S(0));
    assert!(!pacer.idle(), "a back-off makes every request look");
    let (waited, facts) = send(&pacer, 200, None).await;
    assert_eq!(waited, S(120));
    let pause = facts.unwrap().pause.unwrap();
    assert_eq!((pause.status, pause.retry_after.as_deref(), pause.pause), (429, Some("120"), S(120)));

    // A pause longer than max_wait: refused at once, told when the pause ends.
    send(&pacer, 429, Some("400")).await;
    let (origin, agent) = lane();
    let refused = pacer.pace(&origin, &agent, None, false).await.expect_err("past max_wait");
    assert_eq!((refused.retry_after, refused.facts.pause.map(|p| p.status)), (S(400), Some(429)));
    tokio::time::sleep(S(400)).await;

    // An HTTP-date.
    let at = httpdate::fmt_http_date(SystemTime::now() + S(45));
    assert_eq!(send(&pacer, 429, Some(&at)).await.0, S(0));
    let (waited, facts) = send(&pacer, 200, None).await;
    assert!(waited >= S(44) && waited <= S(45), "{waited:?}");
    assert_eq!(facts.unwrap().pause.unwrap().retry_after.as_deref(), Some(at.as_str()));

    // Bounded by max_backoff.
    let pacer = Pacer::new(PacingConfig { max_backoff: S(600), max_wait: S(900), ..PacingConfig::default() });
    send(&pacer, 429, Some("86400")).await;
    assert_eq!(send(&pacer, 200, None).await.0, S(600));
}

#[tokio::test(start_paused = true)]
async fn a_503_without_retry_after_backs_off_doubling_until_a_success() {
    let pacer = Pacer::new(PacingConfig::default());
    send(&pacer, 503, None).await;
    let (w1, f1) = send(&pacer, 503, None).await;
    let (w2, _) = send(&pacer, 503, None).await;
    let (w3, _) = send(&pacer, 200, None).await;
    assert_eq!((w1, w2, w3), (S(5), S(10), S(20)));
    assert_eq!(f1.unwrap().pause.unwrap().streak, 1);
    // The success reset the doubling: the next 503 pauses for 5 s again.
    send(&pacer, 503, None).await;
    assert_eq!(send(&pacer, 200, None).await.0, S(5));
    // Once the pause is over and the streak reset, the fast path is back.
    assert!(pacer.idle());
}

#[tokio::test(start_paused = true)]
async fn answers_to_requests_sent_before_a_pause_do_not_double_it() {
    let pacer = Pacer::new(PacingConfig::default());
    let (origin, agent) = lane();
    // Four requests in flight at once; all four get 503.
    let mut passes = Vec::new();
    for _ in 0..4 {
        passes.push(pacer.pace(&origin, &agent, None, false).await.unwrap());
    }
    tokio::time::advance(Duration::from_millis(10)).await;
    for p in passes {
        let (status, headers) = answer(503, None);
        p.ticket.answered(status, &headers);
    }
    let started = Instant::now();
    let (_, facts) = send(&pacer, 200, None).await;
    assert_eq!(started.elapsed(), S(5), "one pause, not 5 + 10 + 20 + 40 s");
    assert_eq!(facts.unwrap().pause.unwrap().streak, 1);
}

#[tokio::test(start_paused = true)]
async fn a_pause_starting_while_requests_are_held_holds_them_longer_or_refuses_them() {
    let pacer = Pacer::new(PacingConfig::default());
    let (origin, agent) = lane();
    let start = Instant::now();
    let first = pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.unwrap();
    let held = |pacer: &Pacer| {
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        tokio::spawn(async move {
            pacer.pace(&origin, &agent, crawl_delay(10.0), false).await.map(|_| start.elapsed())
        })
    };
    let b = held(&pacer);
    tokio::task::yield_now().await;
    let c = held(&pacer);
    tokio::task::yield_now().await;
    // At 2 s the first request's answer: 429, Retry-After 40 s. B (due at 10 s) now goes
    // at 42 s; C would go at 52 s, past its 60 s limit from 0 s? No: 52 s is within it.
    tokio::time::sleep(S(2)).await;
    let (status, headers) = answer(429, Some("40"));
    first.ticket.answered(status, &headers);
    assert_eq!(b.await.unwrap().unwrap(), S(42));
    assert_eq!(c.await.unwrap().unwrap(), S(52));

    // A pause that pushes a held request past max_wait refuses it when the pause starts.
    let d = held(&pacer);
    tokio::task::yield_now().await;
    let (status, headers) = answer(503, Some("3600"));
    pacer.ticket(&origin, &agent, Instant::now()).answered(status, &headers);
    let refused_at = Instant::now();
    let refused = d.await.unwrap().expect_err("refused");
    assert_eq!(refused_at.elapsed(), S(0), "at once, not at its deadline");
    assert_eq!(refused.facts.refused, Some(PaceRefusal::MaxWait));
    assert_eq!(refused.facts.pause.as_ref().map(|p| p.status), Some(503));
    assert!(refused.retry_after >= S(3590), "{:?}", refused.retry_after);
}

#[tokio::test(start_paused = true)]
async fn report_only_holds_nothing_and_says_what_it_would_have_waited() {
    let pacer = Pacer::new(PacingConfig::default());
    let (origin, agent) = lane();
    let start = Instant::now();
    let mut would = Vec::new();
    for _ in 0..8 {
        let pass = pacer.pace(&origin, &agent, crawl_delay(10.0), true).await.expect("never refused");
        let facts = pass.facts.unwrap();
        assert_eq!(facts.waited, S(0));
        would.push((facts.would_wait.unwrap().as_secs(), facts.refused.map(PaceRefusal::as_str)));
    }
    assert_eq!(start.elapsed(), S(0));
    assert_eq!(
        would,
        [
            (0, None),
            (10, None),
            (20, None),
            (30, None),
            (40, None),
            (50, None),
            (60, None),
            (70, Some("max-wait"))
        ]
    );
}

#[tokio::test(start_paused = true)]
async fn max_concurrency_caps_requests_in_flight() {
    let rule = HostRule {
        hosts: HostPattern::parse("example.com").unwrap(),
        delay: None,
        max_concurrency: Some(2),
        reason: "small server".into(),
        expires: None,
    };
    let pacer = Pacer::new(PacingConfig { hosts: vec![rule], ..PacingConfig::default() });
    let (origin, agent) = lane();
    let a = pacer.pace(&origin, &agent, None, false).await.unwrap();
    let b = pacer.pace(&origin, &agent, None, false).await.unwrap();
    let c = tokio::spawn({
        let (pacer, origin, agent) = (pacer.clone(), origin.clone(), agent.clone());
        async move { pacer.pace(&origin, &agent, None, false).await.map(|p| (Instant::now(), p)) }
    });
    tokio::time::sleep(S(3)).await;
    assert_eq!(pacer.held(), 1, "the third waits for one of two in flight");
    let (status, headers) = answer(200, None);
    let answered_at = Instant::now();
    a.ticket.answered(status, &headers);
    let (went, _) = c.await.unwrap().unwrap();
    assert_eq!(went, answered_at);
    drop(b);
}

#[tokio::test(start_paused = true)]
async fn idle_lanes_are_dropped_once_their_delay_has_passed() {
    let pacer = Pacer::new(PacingConfig::default());
    let (origin, _) = lane();
    for i in 0..50 {
        let agent: Arc<str> = format!("Bot{i}").into();
        pacer.pace(&origin, &agent, crawl_delay(3.0), false).await.unwrap();
    }
    assert_eq!(pacer.lanes(), 50);
    pacer.sync();
    assert_eq!(pacer.lanes(), 50, "their delays have not passed");
    tokio::time::sleep(S(3)).await;
    pacer.sync();
    assert_eq!(pacer.lanes(), 0);

    // A table full of busy lanes refuses a new one.
    let pacer = Pacer::new(PacingConfig { max_origins: 16, ..PacingConfig::default() });
    let mut refused = 0;
    for i in 0..200 {
        let agent: Arc<str> = format!("Bot{i}").into();
        if let Err(r) = pacer.pace(&origin, &agent, crawl_delay(3.0), false).await {
            assert_eq!(r.facts.refused, Some(PaceRefusal::TableFull));
            refused += 1;
        }
    }
    assert!(refused > 0 && pacer.lanes() <= 16, "{refused} refused, {} lanes", pacer.lanes());
    tokio::time::sleep(S(3)).await;
    let agent: Arc<str> = "Late".into();
    assert!(pacer.pace(&origin, &agent, crawl_delay(3.0), false).await.is_ok(), "room again");
}

#[tokio::test(start_paused = true)]
async fn a_back_off_nobody_answers_again_is_forgotten_and_the_fast_path_returns() {
    let pacer = Pacer::new(PacingConfig::default());
    send(&pacer, 429, Some("10")).await;
    assert!(!pacer.idle());
    // No request to that origin again; once the pause and as long again have passed, a
    // request to any other origin finds the back-off over.
    tokio::time::sleep(S(21)).await;
    let other = Arc::new(Origin::parse("https://other.example/").unwrap());
    let agent: Arc<str> = "ExampleBot".into();
    pacer.pace(&other, &agent, None, false).await.unwrap();
    assert!(pacer.idle());
    assert_eq!(pacer.lanes(), 0);
}

/// A shared store that is down (the replica paces alone on what it mirrored) and keeps
/// the sink it is handed.
#[derive(Default)]
struct Down(Mutex<Option<PauseSink>>);

impl SharedPaceStore for Down {
    fn is_up(&self) -> bool {
        false
    }
    fn take<'a>(&'a self, _: LaneId<'a>, _: Duration, _: Duration) -> SharedFuture<'a, Option<SharedSlot>> {
        Box::pin(async { None })
    }
    fn give_back(&self, _: LaneId<'_>, _: i64, _: i64) {}
    fn pause<'a>(&'a self, _: LaneId<'a>, _: &'a Backoff) -> SharedFuture<'a, Option<SharedPause>> {
        Box::pin(async { None })
    }
    fn clear(&self, _: LaneId<'_>) {}
    fn watch_pauses(&self, sink: PauseSink) {
        *self.0.lock().unwrap() = Some(sink);
    }
}

#[tokio::test(start_paused = true)]
async fn a_mirrored_pause_holds_an_unpaced_origin_within_this_replicas_own_bounds() {
    let store = Arc::new(Down::default());
    let config = PacingConfig { max_backoff: S(60), max_origins: 4, max_wait: S(1), ..Default::default() };
    let pacer = Pacer::shared(config, store.clone());
    let sink = store.0.lock().unwrap().clone().expect("the pacer hands the store its sink");
    let notice = |host: &str| PauseNotice {
        origin: Arc::new(Origin::parse(&format!("https://{host}/")).unwrap()),
        agent: "ExampleBot".into(),
        left: S(7 * 24 * 3600),
        pause: PauseInfo { status: 429, retry_after: None, pause: S(7 * 24 * 3600), streak: 3 },
    };
    let (origin, agent) = lane();
    assert!(pacer.pace(&origin, &agent, None, false).await.is_ok(), "no pause yet");
    assert!(sink.tell(notice("example.com")));
    // Refused (past max_wait), for no longer than this replica's max_backoff.
    let Err(refused) = pacer.pace(&origin, &agent, None, false).await else {
        panic!("held by the fleet's pause");
    };
    assert_eq!(refused.retry_after, S(60));
    assert_eq!(refused.facts.pause.map(|p| (p.status, p.pause, p.streak)), Some((429, S(60), 3)));
    // Mirrored pauses take at most half the table (two lanes of four), however many are
    // told. (The lanes are spread over shards by a random hash, so a notice may also find
    // its shard full; without the half rule the 63 would fill up to 16 lanes.)
    for i in 0..63 {
        assert!(sink.tell(notice(&format!("h{i}.example"))));
    }
    assert_eq!(pacer.lanes(), 2);
    assert!(sink.tell(notice("c.example")));
    assert_eq!(pacer.lanes(), 2);
    let c = Arc::new(Origin::parse("https://c.example/").unwrap());
    assert!(pacer.pace(&c, &agent, None, false).await.is_ok(), "not mirrored: the table is half full");
    drop(pacer);
    assert!(!sink.tell(notice("d.example")), "the pacer is gone");
}
