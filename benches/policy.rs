//! The cost of a decision on a cached origin, and the cache's weight per origin, with the
//! real robots.txt files of the corpus (the 153 of `../shared/corpus/robots/` when present,
//! else the engine crate's sample; see `crates/robotsgate-rep/benches/support/corpus.rs`)
//! served by a local origin.
//!
//! ```sh
//! cargo bench --bench policy
//! ```
//!
//! Each corpus file is served as the robots.txt of its own host name (`f0.test`,
//! `f1.test`, ..., all pointing at one hyper origin on 127.0.0.1 through static DNS
//! overrides). Setup fetches every file once; the measured loop is
//! [`RobotsPolicy::decide`] on origins already in the cache (no I/O). Before the
//! measurements it prints the cache's own weight per origin (the bytes the policy charges
//! against `cache_max_bytes`: parsed file and bookkeeping).

use std::collections::HashMap;
use std::convert::Infallible;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use criterion::{Criterion, criterion_group, criterion_main};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use robotsgate::fetch::{FetchConfig, Fetcher};
use robotsgate::net::{Connector, DnsConfig, Guard, Resolver, TlsConfig, client_config};
use robotsgate::origin::{Origin, Scheme};
use robotsgate::policy::{PolicyConfig, RobotsPolicy};
use robotsgate::rep::MAX_ROBOTS_TXT_BYTES;

const AGENT: &str = "FooBot";

#[path = "../crates/robotsgate-rep/benches/support/corpus.rs"]
mod corpus_dir;

fn corpus() -> Vec<Bytes> {
    corpus_dir::files().iter().map(|p| Bytes::from(std::fs::read(p).expect("corpus file"))).collect()
}

/// An origin answering `/robots.txt` for host `fN.test` with corpus file N.
async fn serve(files: Arc<Vec<Bytes>>) -> u16 {
    let listener = tokio::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await.expect("bind");
    let port = listener.local_addr().expect("local addr").port();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else { continue };
            let files = files.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                    let host = req.headers().get(hyper::header::HOST).and_then(|h| h.to_str().ok());
                    let n: Option<usize> = host
                        .and_then(|h| h.strip_prefix('f'))
                        .and_then(|h| h.split('.').next())
                        .and_then(|n| n.parse().ok());
                    let body = n.and_then(|n| files.get(n).cloned()).unwrap_or_default();
                    async move { Ok::<_, Infallible>(hyper::Response::new(Full::new(body))) }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    port
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let files = Arc::new(corpus());
    let port = rt.block_on(serve(files.clone()));
    let names: Vec<String> = (0..files.len()).map(|i| format!("f{i}.test")).collect();
    let overrides: HashMap<String, Vec<IpAddr>> =
        names.iter().map(|n| (n.clone(), vec![IpAddr::V4(Ipv4Addr::LOCALHOST)])).collect();
    let resolver = Resolver::new(&DnsConfig { servers: Vec::new(), overrides });
    let guard = Guard::default().allow("127.0.0.0/8".parse().expect("cidr"));
    let tls = client_config(&TlsConfig::default(), &[b"http/1.1"]).expect("TLS config");
    let connector = Connector::new(resolver, Arc::new(guard), tls, Duration::from_secs(5));
    let fetcher = Fetcher::new(connector, FetchConfig::default());
    let policy = RobotsPolicy::new(fetcher, PolicyConfig::default());
    let origins: Vec<Origin> = names
        .iter()
        .map(|n| Origin::from_authority(Scheme::Http, &format!("{n}:{port}")).expect("origin"))
        .collect();

    // Fill the cache, and check that every file really came through.
    for (o, body) in origins.iter().zip(files.iter()) {
        let d = rt.block_on(policy.decide(o, "/", AGENT.into()));
        let facts = d.fetch_facts().expect("fetched");
        assert_eq!(facts.bytes, body.len().min(MAX_ROBOTS_TXT_BYTES), "{o}");
    }
    let total: usize = files.iter().map(|f| f.len().min(MAX_ROBOTS_TXT_BYTES)).sum();
    rt.block_on(policy.sync());
    println!(
        "cache: {} origins, {} bytes weighed = {} bytes per origin (files average {} bytes)",
        policy.cached_origins(),
        policy.cached_bytes(),
        policy.cached_bytes() / policy.cached_origins().max(1),
        total / files.len()
    );

    let mut g = c.benchmark_group("cached decision");
    let paths = ["/", "/search?q=robots", "/wp-admin/admin-ajax.php", "/a/b/c/d/e/f/g/h.html"];
    g.bench_function("decide, 153 cached origins x 4 paths", |b| {
        let mut i = 0usize;
        b.iter(|| {
            let o = &origins[i % origins.len()];
            let p = paths[i / origins.len() % paths.len()];
            i = i.wrapping_add(1);
            black_box(rt.block_on(policy.decide(black_box(o), black_box(p), AGENT.into())))
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
