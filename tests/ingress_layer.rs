//! The ingress layer in front of a real site: a hyper server on a loopback port serving the
//! site's service through `IngressLayer`, real HTTP clients (reqwest, raw TCP) with the
//! User-Agents of Googlebot, GPTBot, ClaudeBot and a browser. The site counts the requests
//! that reach it.

mod support;

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::audit::{AuditLog, IngressRecord};
use robotsgate::ingress::{IngressBuilder, IngressLayer, Mode};
use tokio::net::TcpListener;
use tower::{Layer as _, ServiceExt as _};

const GOOGLEBOT: &str = "Mozilla/5.0 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)";
const GPTBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; GPTBot/1.2; +https://openai.com/gptbot)";
const CLAUDEBOT: &str =
    "Mozilla/5.0 AppleWebKit/537.36 (KHTML, like Gecko; compatible; ClaudeBot/1.0; +claudebot@anthropic.com)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";

const ROBOTS: &str = "# the site's own file\n\
User-agent: GPTBot\n\
Disallow: /private\n\
Content-Usage: search=y\n\
\n\
User-agent: Googlebot\n\
Allow: /\n\
\n\
User-agent: *\n\
Crawl-delay: 30\n\
Disallow: /admin\n";

/// The site: counts requests (robots.txt apart) and serves robots.txt as set.
struct Site {
    hits: AtomicUsize,
    robots_fetches: AtomicUsize,
    robots: Mutex<(u16, &'static str)>,
}

impl Site {
    fn new(status: u16, body: &'static str) -> Arc<Site> {
        Arc::new(Site {
            hits: AtomicUsize::new(0),
            robots_fetches: AtomicUsize::new(0),
            robots: Mutex::new((status, body)),
        })
    }
    fn hits(&self) -> usize {
        self.hits.load(Ordering::SeqCst)
    }
}

type ReqBody = BoxBody<Bytes, hyper::Error>;

/// Serves the site behind `layer` on a loopback port.
async fn serve(layer: IngressLayer, site: Arc<Site>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else { return };
            let site = site.clone();
            let upstream = tower::service_fn(move |req: Request<ReqBody>| {
                let site = site.clone();
                async move {
                    if req.uri().path() == "/robots.txt" {
                        site.robots_fetches.fetch_add(1, Ordering::SeqCst);
                        let (status, body) = *site.robots.lock().unwrap();
                        let res = Response::builder()
                            .status(status)
                            .body(Full::new(Bytes::from_static(body.as_bytes())));
                        return Ok::<_, Infallible>(res.unwrap());
                    }
                    site.hits.fetch_add(1, Ordering::SeqCst);
                    let mut res = Response::new(Full::new(Bytes::from(format!("page {}", req.uri().path()))));
                    if req.uri().path() == "/forged" {
                        // A site (or a proxy behind it) trying to pass for robotsgate.
                        res.headers_mut()
                            .insert("x-robotsgate", http::HeaderValue::from_static("disallowed"));
                    }
                    Ok(res)
                }
            });
            let svc = layer.layer(upstream);
            let hyper_svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(peer);
                svc.clone().oneshot(req.map(|b| b.boxed()))
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), hyper_svc)
                    .await;
            });
        }
    });
    addr
}

fn records() -> (Arc<Mutex<Vec<IngressRecord>>>, IngressBuilder) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    let b = IngressLayer::builder().observer(move |r| s.lock().unwrap().push(r.to_record()));
    (seen, b)
}

async fn get(addr: SocketAddr, path: &str, ua: &str) -> (StatusCode, http::HeaderMap, Bytes) {
    let client = reqwest::Client::builder().user_agent(ua).build().unwrap();
    let res = client.get(format!("http://{addr}{path}")).send().await.unwrap();
    let status = StatusCode::from_u16(res.status().as_u16()).unwrap();
    let headers = res.headers().clone();
    (status, headers, res.bytes().await.unwrap())
}

#[tokio::test]
async fn disallowed_bot_gets_403_and_never_reaches_the_site() {
    let site = Site::new(200, ROBOTS);
    let (seen, b) = records();
    let addr = serve(b.build(), site.clone()).await;

    let (status, headers, body) = get(addr, "/private/report.pdf", GPTBOT).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(headers["x-robotsgate"], "disallowed");
    let text = String::from_utf8_lossy(&body);
    assert!(text.contains("GPTBot") && text.contains("line 3: disallow: /private"), "{text}");
    assert_eq!(site.hits(), 0, "the site was not reached");

    // Googlebot's own group allows everything; a browser is not a bot.
    assert_eq!(get(addr, "/private/report.pdf", GOOGLEBOT).await.0, StatusCode::OK);
    assert_eq!(get(addr, "/admin", BROWSER).await.0, StatusCode::OK);
    assert_eq!(site.hits(), 2);
    // ClaudeBot has no group of its own: `*` holds it.
    let (status, headers, _) = get(addr, "/admin/x", CLAUDEBOT).await;
    assert_eq!(
        (status, &headers["x-robotsgate"]),
        (StatusCode::FORBIDDEN, &"disallowed".parse::<http::HeaderValue>().unwrap())
    );
    assert_eq!(site.hits(), 2);

    let recs = seen.lock().unwrap();
    let r = recs.iter().find(|r| r.token.as_deref() == Some("GPTBot")).unwrap();
    assert_eq!((r.outcome, r.status, r.group_line), ("disallowed", Some(403), Some(2)));
    assert_eq!(r.rule.as_ref().map(|r| (r.kind, r.line)), Some(("disallow", 3)));
    assert_eq!(r.robots_sha256.as_deref(), Some(support::sha256_hex(ROBOTS.as_bytes()).as_str()));
    assert_eq!(r.client.as_deref(), Some("127.0.0.1"));
    assert!(recs.iter().all(|r| r.user_agent != BROWSER), "browsers are not recorded");
}

#[tokio::test]
async fn configured_status_404() {
    let site = Site::new(200, ROBOTS);
    let addr = serve(IngressLayer::builder().status(StatusCode::NOT_FOUND).build(), site.clone()).await;
    let (status, headers, _) = get(addr, "/private", GPTBOT).await;
    assert_eq!(
        (status, &headers["x-robotsgate"]),
        (StatusCode::NOT_FOUND, &"disallowed".parse::<http::HeaderValue>().unwrap())
    );
    assert_eq!(site.hits(), 0);
}

#[tokio::test]
async fn allowed_request_passes_with_content_usage() {
    let site = Site::new(200, ROBOTS);
    let addr = serve(IngressLayer::builder().build(), site.clone()).await;
    let (status, headers, body) = get(addr, "/articles/1", GPTBOT).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&body[..], b"page /articles/1");
    assert_eq!(headers["content-usage"], "search=y");
    assert!(headers.get("x-robotsgate").is_none());
    assert_eq!(site.hits(), 1);
    // Not for a browser.
    let (_, headers, _) = get(addr, "/articles/1", BROWSER).await;
    assert!(headers.get("content-usage").is_none());
}

#[tokio::test]
async fn known_agents_declared_purpose_is_refused_where_the_site_says_no() {
    let site = Site::new(200, "User-agent: GPTBot\nContent-Usage: train-ai=n\n");
    let addr = serve(IngressLayer::builder().build(), site.clone()).await;
    // GPTBot's known-agent entry declares training.
    let (status, headers, _) = get(addr, "/a", GPTBOT).await;
    assert_eq!(
        (status, &headers["x-robotsgate"]),
        (StatusCode::FORBIDDEN, &"usage-refused".parse::<http::HeaderValue>().unwrap())
    );
    assert_eq!(site.hits(), 0);
}

#[tokio::test]
async fn crawl_delay_answers_429_with_retry_after_per_bot() {
    let site = Site::new(200, ROBOTS);
    let (seen, b) = records();
    let addr = serve(b.build(), site.clone()).await;
    assert_eq!(get(addr, "/a", CLAUDEBOT).await.0, StatusCode::OK);
    let (status, headers, body) = get(addr, "/b", CLAUDEBOT).await;
    assert_eq!(status, StatusCode::TOO_MANY_REQUESTS);
    assert_eq!(headers["x-robotsgate"], "paced");
    let secs: u64 = headers["retry-after"].to_str().unwrap().parse().unwrap();
    assert!((1..=30).contains(&secs), "{secs}");
    assert!(String::from_utf8_lossy(&body).contains("line 10: crawl-delay: 30"));
    assert_eq!(site.hits(), 1);
    // Another bot is paced on its own; Googlebot's group has no delay; browsers never.
    assert_eq!(get(addr, "/b", "Bytespider").await.0, StatusCode::OK);
    for _ in 0..3 {
        assert_eq!(get(addr, "/b", GOOGLEBOT).await.0, StatusCode::OK);
        assert_eq!(get(addr, "/b", BROWSER).await.0, StatusCode::OK);
    }
    assert_eq!(site.hits(), 8);
    let recs = seen.lock().unwrap();
    let paced = recs.iter().find(|r| r.outcome == "paced").unwrap();
    assert_eq!((paced.retry_after, paced.status), (Some(secs), Some(429)));
    assert_eq!(paced.pace.as_deref(), Some("line 10: crawl-delay: 30"));
}

#[tokio::test]
async fn robots_txt_is_served_byte_for_byte_never_paced_and_cited_later() {
    let site = Site::new(200, ROBOTS);
    let layer = IngressLayer::builder().build();
    let addr = serve(layer.clone(), site.clone()).await;
    for ua in [CLAUDEBOT, CLAUDEBOT, GPTBOT, GOOGLEBOT, BROWSER] {
        let (status, headers, body) = get(addr, "/robots.txt", ua).await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(&body[..], ROBOTS.as_bytes());
        assert!(headers.get("x-robotsgate").is_none());
    }
    let fetch = layer.last_robots_fetch(None, "gptbot", Some("127.0.0.9".parse().unwrap())).unwrap();
    assert_eq!(fetch.sha256.as_deref(), Some(support::sha256_hex(ROBOTS.as_bytes()).as_str()));
    assert!(
        layer.last_robots_fetch(None, "GPTBot", Some("10.0.0.1".parse().unwrap())).is_none(),
        "another network"
    );
    // The layer fetched robots.txt once for itself; the bots' five went to the site.
    assert_eq!(site.robots_fetches.load(Ordering::SeqCst), 6);

    // The violation that follows cites the fetch, in the audit log.
    let (log, memory) = AuditLog::memory();
    let site = Site::new(200, ROBOTS);
    let addr = serve(IngressLayer::builder().audit(log.clone()).build(), site.clone()).await;
    get(addr, "/robots.txt", GPTBOT).await;
    get(addr, "/private/x", GPTBOT).await;
    log.flush().await;
    let lines: Vec<serde_json::Value> = memory
        .lines()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .filter(|v: &serde_json::Value| v["type"] == "ingress")
        .collect();
    assert_eq!(lines.len(), 2, "{lines:?}");
    assert_eq!(lines[0]["outcome"], "robots-txt");
    assert_eq!(lines[1]["outcome"], "disallowed");
    assert_eq!(lines[1]["robots_fetched_sha256"], support::sha256_hex(ROBOTS.as_bytes()));
    assert!(support::is_rfc3339(lines[1]["robots_fetched"].as_str().unwrap()));
    assert_eq!(lines[1]["rule"]["line"], 3);
}

#[tokio::test]
async fn a_given_file_is_enforced_and_served() {
    let site = Site::new(404, "");
    let addr = serve(IngressLayer::builder().robots_bytes(ROBOTS).build(), site.clone()).await;
    let (status, _, body) = get(addr, "/robots.txt", GPTBOT).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, ROBOTS.as_bytes()));
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::FORBIDDEN);
    assert_eq!(site.robots_fetches.load(Ordering::SeqCst), 0);
    assert_eq!(site.hits(), 0);
}

#[tokio::test]
async fn a_running_layer_takes_new_settings_and_a_new_file() {
    let site = Site::new(200, "User-agent: *\nDisallow: /fetched\n");
    let layer = IngressLayer::builder().robots_bytes(ROBOTS).build();
    let addr = serve(layer.clone(), site.clone()).await;
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::FORBIDDEN);
    // New settings: the status of a refusal, then report-only.
    let mut config = (*layer.config()).clone();
    config.status = StatusCode::NOT_FOUND;
    layer.reload(config.clone());
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::NOT_FOUND);
    config.mode = Mode::ReportOnly;
    layer.reload(config.clone());
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::OK);
    assert_eq!(site.hits(), 1);
    config.mode = Mode::Enforce;
    layer.reload(config);
    // A new file: enforced and served.
    let new = "User-agent: GPTBot\nDisallow: /other\n";
    layer.set_robots_bytes(Some(Bytes::from_static(new.as_bytes())));
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::OK);
    assert_eq!(get(addr, "/other", GPTBOT).await.0, StatusCode::NOT_FOUND);
    let (status, _, body) = get(addr, "/robots.txt", GPTBOT).await;
    assert_eq!((status, &body[..]), (StatusCode::OK, new.as_bytes()));
    // No file: the site's own, fetched.
    assert_eq!(site.robots_fetches.load(Ordering::SeqCst), 0);
    layer.set_robots_bytes(None);
    assert_eq!(get(addr, "/fetched", CLAUDEBOT).await.0, StatusCode::NOT_FOUND);
    assert_eq!(get(addr, "/other", GPTBOT).await.0, StatusCode::OK);
    assert_eq!(site.robots_fetches.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn report_only_decides_records_and_passes() {
    let site = Site::new(200, ROBOTS);
    let (seen, b) = records();
    let addr = serve(b.mode(Mode::ReportOnly).build(), site.clone()).await;
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::OK);
    assert_eq!(get(addr, "/a", CLAUDEBOT).await.0, StatusCode::OK);
    assert_eq!(get(addr, "/b", CLAUDEBOT).await.0, StatusCode::OK);
    assert_eq!(site.hits(), 3);
    let recs = seen.lock().unwrap();
    let outcomes: Vec<_> = recs.iter().map(|r| (r.outcome, r.mode, r.status)).collect();
    assert_eq!(
        outcomes,
        vec![
            ("would-disallow", "report-only", Some(200)),
            ("allowed", "report-only", Some(200)),
            ("would-pace", "report-only", Some(200))
        ]
    );
}

#[tokio::test]
async fn robots_4xx_allows_all() {
    let site = Site::new(404, "");
    let addr = serve(IngressLayer::builder().build(), site.clone()).await;
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::OK);
    assert_eq!(site.hits(), 1);
}

#[tokio::test]
async fn robots_5xx_without_a_copy_disallows_all_and_keeps_the_last_good_copy() {
    let site = Site::new(503, "");
    let addr = serve(IngressLayer::builder().build(), site.clone()).await;
    let (status, _, body) = get(addr, "/articles/1", GPTBOT).await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert!(String::from_utf8_lossy(&body).contains("unreachable"));
    assert_eq!(get(addr, "/articles/1", BROWSER).await.0, StatusCode::OK, "browsers pass");
    assert_eq!(site.hits(), 1);

    // A good copy, then 503 on every refresh (TTL zero: each request refreshes).
    let site = Site::new(200, ROBOTS);
    let addr = serve(IngressLayer::builder().ttl(Duration::ZERO).build(), site.clone()).await;
    assert_eq!(get(addr, "/articles/1", GPTBOT).await.0, StatusCode::OK);
    *site.robots.lock().unwrap() = (500, "");
    let before = site.robots_fetches.load(Ordering::SeqCst);
    assert_eq!(
        get(addr, "/articles/2", GPTBOT).await.0,
        StatusCode::OK,
        "the last good copy, not disallow-all"
    );
    assert_eq!(get(addr, "/private", GPTBOT).await.0, StatusCode::FORBIDDEN);
    assert!(site.robots_fetches.load(Ordering::SeqCst) > before, "refreshed");
}

#[tokio::test]
async fn hostile_user_agents() {
    let site = Site::new(200, ROBOTS);
    let addr = serve(IngressLayer::builder().build(), site.clone()).await;
    // Repeated User-Agent headers: a token in any of them counts.
    let raw = support::raw_exchange(
        addr,
        b"GET /private HTTP/1.1\r\nHost: x\r\nUser-Agent: Mozilla/5.0\r\nUser-Agent: GPTBot/1.2\r\nConnection: close\r\n\r\n",
    )
    .await;
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 403"), "{text}");
    // A huge one: only its first KiB is looked at (no token there: a browser).
    let huge = format!("{} GPTBot/1.2", "A".repeat(60_000));
    let (status, _, _) = get(addr, "/private", &huge).await;
    assert_eq!(status, StatusCode::OK);
    // A token inside another word is not the token; nor one with a suffix.
    assert_eq!(get(addr, "/private", "NotGPTBot/1.0").await.0, StatusCode::OK);
    assert_eq!(get(addr, "/private", "GPTBot-Fake/1.0").await.0, StatusCode::OK);
    // Case does not matter.
    assert_eq!(get(addr, "/private", "gptbot/1.0").await.0, StatusCode::FORBIDDEN);
    // Bytes that are not UTF-8.
    let raw = support::raw_exchange(
        addr,
        b"GET /private HTTP/1.1\r\nHost: x\r\nUser-Agent: \xff\xfe GPTBot/1.2 \xc3\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(String::from_utf8_lossy(&raw).starts_with("HTTP/1.1 403"));
    assert_eq!(site.hits(), 3);
}

#[tokio::test]
async fn identity_hook_refuses_impersonators_and_believes_verified_bots() {
    use robotsgate::identity::ranges::{ListLimits, ListSource, Ranges, bundled};
    use robotsgate::identity::{Operator, Verifier};
    use robotsgate::ingress::Impersonators;
    let verifier = || {
        let ops = [Operator::new("OpenAI").tokens(["GPTBot"]).ip_lists([bundled::OPENAI_GPTBOT])];
        let ranges =
            Ranges::new(vec![ListSource::new(bundled::OPENAI_GPTBOT, "OpenAI")], ListLimits::default());
        Some(Arc::new(Verifier::new(&ops, Some(ranges), None)))
    };
    // From 127.0.0.1, not in OpenAI's published ranges: an impersonator.
    let site = Site::new(200, ROBOTS);
    let (seen, b) = records();
    let addr = serve(b.verifier(verifier()).build(), site.clone()).await;
    let (status, headers, _) = get(addr, "/articles/1", GPTBOT).await;
    assert_eq!(
        (status, &headers["x-robotsgate"]),
        (StatusCode::FORBIDDEN, &"identity-failed".parse::<http::HeaderValue>().unwrap())
    );
    assert_eq!(site.hits(), 0);
    assert_eq!(seen.lock().unwrap()[0].identity, Some("failed"));
    // Bots the verifier knows nothing of, and browsers, are not checked.
    assert_eq!(get(addr, "/articles/1", GOOGLEBOT).await.0, StatusCode::OK);
    assert_eq!(get(addr, "/articles/1", BROWSER).await.0, StatusCode::OK);

    // impersonators = star: held to `*` (which disallows /admin, not GPTBot's group).
    let addr = serve(
        IngressLayer::builder().verifier(verifier()).impersonators(Impersonators::Star).build(),
        site.clone(),
    )
    .await;
    assert_eq!(get(addr, "/admin/x", GPTBOT).await.0, StatusCode::FORBIDDEN);
    // impersonators = allow: judged as GPTBot, whose group allows /admin.
    let addr = serve(
        IngressLayer::builder().verifier(verifier()).impersonators(Impersonators::Allow).build(),
        site.clone(),
    )
    .await;
    assert_eq!(get(addr, "/admin/x", GPTBOT).await.0, StatusCode::OK);

    // Behind a trusted proxy that says the client is in OpenAI's ranges: verified.
    let (seen, b) = records();
    let addr =
        serve(b.verifier(verifier()).trusted_proxies(["127.0.0.0/8".parse().unwrap()]).build(), site.clone())
            .await;
    let client = reqwest::Client::builder().user_agent(GPTBOT).build().unwrap();
    let res = client
        .get(format!("http://{addr}/articles/1"))
        .header("x-forwarded-for", "20.171.206.10")
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 200);
    let r = seen.lock().unwrap()[0].clone();
    assert_eq!((r.identity, r.client.as_deref()), (Some("verified"), Some("20.171.206.10")));
}

/// The identity operators' tokens are bots' tokens whether or not the site's file or the
/// known-agents list names them: `ExampleBot` (in neither) from an address outside its
/// operator's ranges is an impersonator. Before, it was not looked for, so not checked,
/// and let through as a browser would be.
#[tokio::test]
async fn an_operators_token_is_checked_when_neither_the_site_nor_the_list_names_it() {
    use robotsgate::identity::ranges::{ListLimits, ListSource, Ranges, bundled};
    use robotsgate::identity::{Operator, Verifier};
    let ops = [Operator::new("Example").tokens(["ExampleBot"]).ip_lists([bundled::OPENAI_GPTBOT])];
    let ranges = Ranges::new(vec![ListSource::new(bundled::OPENAI_GPTBOT, "Example")], ListLimits::default());
    let verifier = Some(Arc::new(Verifier::new(&ops, Some(ranges), None)));
    let site = Site::new(200, ROBOTS);
    let (seen, b) = records();
    let addr = serve(b.verifier(verifier).build(), site.clone()).await;
    let (status, headers, _) = get(addr, "/articles/1", "Mozilla/5.0 (compatible; ExampleBot/2.1)").await;
    assert_eq!(
        (status, headers.get("x-robotsgate").map(|v| v.to_str().unwrap())),
        (StatusCode::FORBIDDEN, Some("identity-failed"))
    );
    assert_eq!(site.hits(), 0);
    let r = seen.lock().unwrap()[0].clone();
    assert_eq!((r.identity, r.operator.as_deref()), (Some("failed"), Some("Example")));
    // A browser is still no bot.
    assert_eq!(get(addr, "/articles/1", BROWSER).await.0, StatusCode::OK);
}

/// A request target that is not a path (`GET private`, which HTTP reads as an authority)
/// is a 400, for bots and browsers: it was judged as `/` and sent to the site as `/`.
#[tokio::test]
async fn a_target_that_is_not_a_path_is_a_bad_request() {
    let site = Site::new(200, ROBOTS);
    let (_, b) = records();
    let addr = serve(b.build(), site.clone()).await;
    for ua in [GPTBOT, BROWSER] {
        let raw = format!("GET private HTTP/1.1\r\nHost: x\r\nUser-Agent: {ua}\r\nConnection: close\r\n\r\n");
        let answer = String::from_utf8_lossy(&support::raw_exchange(addr, raw.as_bytes()).await).into_owned();
        assert!(answer.starts_with("HTTP/1.1 400"), "{ua}: {answer}");
        assert!(answer.contains("x-robotsgate: bad-request"), "{answer}");
    }
    assert_eq!(site.hits(), 0);
}

/// A site's own `x-robotsgate` header never reaches the client, for bots and browsers
/// alike: only robotsgate's refusals carry it.
#[tokio::test]
async fn the_sites_own_robotsgate_header_is_removed() {
    let site = Site::new(200, ROBOTS);
    let (_, b) = records();
    let addr = serve(b.build(), site.clone()).await;
    for ua in [GOOGLEBOT, BROWSER] {
        let (status, headers, body) = get(addr, "/forged", ua).await;
        assert_eq!(status, StatusCode::OK, "{ua}");
        assert!(headers.get("x-robotsgate").is_none(), "{ua}: {headers:?}");
        assert_eq!(&body[..], b"page /forged");
    }
    assert_eq!(site.hits(), 2);
}

/// An upstream that serves a site per host name: each has its own robots.txt (the
/// default one for a name it does not know), and counts the fetches of each.
async fn serve_sites(layer: IngressLayer, fetches: Arc<Mutex<Vec<String>>>) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let Ok((stream, peer)) = listener.accept().await else { return };
            let fetches = fetches.clone();
            let upstream = tower::service_fn(move |req: Request<ReqBody>| {
                let host = req.headers().get("host").and_then(|h| h.to_str().ok()).unwrap_or("-").to_owned();
                let fetches = fetches.clone();
                async move {
                    if req.uri().path() == "/robots.txt" {
                        fetches.lock().unwrap().push(host.clone());
                        let body = match host.as_str() {
                            "A.example" => "User-agent: GPTBot\nDisallow: /a-only\nCrawl-delay: 30\n",
                            "b.example" => "User-agent: GPTBot\nDisallow: /b-only\nCrawl-delay: 30\n",
                            _ => "User-agent: GPTBot\nDisallow: /default-only\n",
                        };
                        return Ok::<_, Infallible>(Response::new(Full::new(Bytes::from_static(
                            body.as_bytes(),
                        ))));
                    }
                    Ok(Response::new(Full::new(Bytes::from(format!("{host} {}", req.uri().path())))))
                }
            });
            let svc = layer.layer(upstream);
            let hyper_svc = hyper::service::service_fn(move |mut req: Request<Incoming>| {
                req.extensions_mut().insert(peer);
                svc.clone().oneshot(req.map(|b| b.boxed()))
            });
            tokio::spawn(async move {
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), hyper_svc)
                    .await;
            });
        }
    });
    addr
}

/// Host names given: each site's own robots.txt judges the requests that name it, fetched
/// with that name, and its bots are paced per site; any other name is the default site's.
#[tokio::test]
async fn each_host_name_given_is_judged_by_its_own_robots_txt() {
    let fetches = Arc::new(Mutex::new(Vec::new()));
    let (seen, b) = records();
    let layer = b
        .hosts(["A.example", "b.example"].map(http::HeaderValue::from_static))
        .robots_host(Some(http::HeaderValue::from_static("default.example")))
        .build();
    let addr = serve_sites(layer.clone(), fetches.clone()).await;
    let client = reqwest::Client::builder().user_agent(GPTBOT).build().unwrap();
    let status = |host: &'static str, path: &'static str| {
        let client = client.clone();
        async move {
            let res = client.get(format!("http://{addr}{path}")).header("host", host).send().await.unwrap();
            res.status().as_u16()
        }
    };
    // Each name's own rules, whatever the case, port or trailing dot it is given with.
    assert_eq!(status("a.example", "/a-only").await, 403);
    assert_eq!(status("b.example:8080", "/b-only").await, 403);
    assert_eq!(status("other.example", "/default-only").await, 403);
    assert_eq!(status("B.EXAMPLE.", "/a-only").await, 200, "b's rules, not a's");
    assert_eq!(status("other.example", "/a-only").await, 200, "the default's rules");
    // One fetch for each, with its own name (the first spelling given), and the default
    // one with robots_host.
    let mut got = fetches.lock().unwrap().clone();
    got.sort();
    assert_eq!(got, ["A.example", "b.example", "default.example"]);

    // Crawl-delay per site: GPTBot's first allowed request on a goes though it just had
    // one on b (`/a-only`); its second waits, as its next on b does.
    assert_eq!(status("a.example", "/page").await, 200);
    assert_eq!(status("a.example", "/page").await, 429);
    assert_eq!(status("b.example", "/page").await, 429);
    assert_eq!(status("other.example", "/page").await, 200, "no delay on the default site");

    // The records name the site that judged them.
    let records = seen.lock().unwrap().clone();
    let hosts: Vec<_> = records.iter().map(|r| (r.path.as_str(), r.host.as_deref(), r.outcome)).collect();
    assert_eq!(
        hosts,
        [
            ("/a-only", Some("a.example"), "disallowed"),
            ("/b-only", Some("b.example"), "disallowed"),
            ("/default-only", None, "disallowed"),
            ("/a-only", Some("b.example"), "allowed"),
            ("/a-only", None, "allowed"),
            ("/page", Some("a.example"), "allowed"),
            ("/page", Some("a.example"), "paced"),
            ("/page", Some("b.example"), "paced"),
            ("/page", None, "allowed"),
        ]
    );

    // A bot's robots.txt fetch is remembered per site; a made-up name fetches nothing.
    let client_ip = Some("127.0.0.1".parse().unwrap());
    assert_eq!(status("a.example", "/robots.txt").await, 200);
    assert!(layer.last_robots_fetch(Some("A.EXAMPLE"), "gptbot", client_ip).is_some());
    assert!(layer.last_robots_fetch(Some("b.example"), "gptbot", client_ip).is_none());
    assert!(layer.last_robots_fetch(None, "gptbot", client_ip).is_none());
    for i in 0..20 {
        let host: &'static str = Box::leak(format!("made-up-{i}.example").into_boxed_str());
        assert_eq!(status(host, "/x").await, 200);
    }
    // The bot's own /robots.txt request went to the site (counted there too), nothing else.
    assert_eq!(fetches.lock().unwrap().len(), 4);
}
