//! Web Bot Auth: one verification with the key cached, and the signing of one request.
//!
//! ```sh
//! cargo bench --bench web_bot_auth
//! ```
//!
//! - `ed25519_verify`: ring's Ed25519 verification of a 400-byte signature base alone: the
//!   floor of a verification.
//! - `examine`: the pure part (fields parsed, profile checked, signature base built), no
//!   key and no crypto.
//! - `verify_cached_key`: [`Verifier::verify`] with the directory in the cache (replay check
//!   off, so that one request can be verified again and again), in a current-thread
//!   runtime, one `block_on` per batch.
//! - `verify_cached_key_replay_check`: the same on a freshly signed request each time (the
//!   signing is outside the measurement), with the replay check recording it.
//! - `identity_verify_request_signed`: the ingress side's call,
//!   [`robotsgate::identity::Verifier::verify_request`], on the request of
//!   `verify_cached_key` claiming the token of an operator whose `signature_agents` name
//!   its agent: `Signature-Agent` read and mapped to the operator, then
//!   `verify_cached_key`'s work.
//! - `sign_request`: [`RequestSigner::sign`] (nonce from `SystemRandom`, one Ed25519
//!   signature).
//! - `signers_pick_then_sign`: `[identity.users]`'s path: [`Signers::pick`] among 100 users
//!   and 100 tokens (by token: the user has no entry), then `sign_request`'s work.
//! - `signers_pick`: the pick alone.
//! - `pay_retry_decision`: a `402`'s `crawler-price` read and compared with `max_price`
//!   ([`Price`], [`retry_refusal`]): what every priced answer costs before any retry.
//! - `pay_retry_sign`: the retry's signature, `crawler-max-price` covered
//!   ([`RequestSigner::sign_covering`]).

use std::hint::black_box;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use robotsgate::identity::httpsig::{
    CRAWLER_MAX_PRICE, Directory, DirectoryUrl, Price, RequestSigner, RequestView, Signers, SigningKey,
    Verdict, Verifier, VerifyConfig, directory_json, examine, retry_refusal, unix_seconds,
};
use robotsgate::net::{Connector, DnsConfig, Guard, Resolver, TlsConfig, client_config};

const AGENT: &str = "https://bot.example";

fn verifier(refuse_replays: bool, key: &SigningKey, now: SystemTime) -> Verifier {
    let tls = client_config(&TlsConfig::default(), &[b"http/1.1"]).expect("TLS");
    let connector = Connector::new(
        Resolver::new(&DnsConfig::default()),
        Arc::new(Guard::default()),
        tls,
        Duration::from_secs(1),
    );
    let config = VerifyConfig { refuse_replays, replay_capacity: 10_000_000, ..VerifyConfig::default() };
    let verifier = Verifier::new(connector, config);
    let dir =
        Directory::parse(directory_json([key.public()]).as_bytes(), 65536, 32, false).expect("directory");
    let url = DirectoryUrl::from_member(AGENT, None).expect("url");
    verifier.directories().insert(&url, dir, unix_seconds(now), Duration::from_secs(86_400));
    verifier
}

fn request() -> http::request::Parts {
    http::Request::get("https://site.example/articles/2026/11/some-page?ref=feed")
        .header("user-agent", "Mozilla/5.0 (compatible; ExampleBot/1.0; +https://bot.example/bot)")
        .header("accept", "text/html")
        .body(())
        .expect("request")
        .into_parts()
        .0
}

fn benches(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    let key = Arc::new(SigningKey::generate().expect("key"));
    let signer = RequestSigner::new(key.clone(), AGENT).expect("signer");
    let now = SystemTime::now();
    let mut signed = request();
    signer.sign(&mut signed, now).expect("sign");

    let message = [b'x'; 400];
    let signature = key.sign(&message);
    c.bench_function("ed25519_verify", |b| {
        b.iter(|| black_box(key.public().verify(black_box(&message), &signature)))
    });

    let config = VerifyConfig::default();
    c.bench_function("examine", |b| {
        b.iter(|| black_box(examine(RequestView::of(black_box(&signed)), unix_seconds(now), &config)))
    });

    let lax = verifier(false, &key, now);
    assert!(matches!(rt.block_on(lax.verify(&signed, now)), Verdict::Verified(_)));
    c.bench_function("verify_cached_key", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(lax.verify(black_box(&signed), now).await);
                }
                start.elapsed()
            })
        })
    });

    let operators =
        [robotsgate::identity::Operator::new("Example").tokens(["ExampleBot"]).signature_agents([AGENT])];
    let identity = robotsgate::identity::Verifier::with_signatures(&operators, None, None, Some(lax.clone()));
    let ip = Some("192.0.2.1".parse().expect("ip"));
    let id = rt.block_on(identity.verify_request(&signed, ip, Some("ExampleBot"), now));
    assert!(id.is_some_and(|i| i.verdict.is_verified()));
    c.bench_function("identity_verify_request_signed", |b| {
        b.iter_custom(|iters| {
            rt.block_on(async {
                let start = Instant::now();
                for _ in 0..iters {
                    black_box(identity.verify_request(black_box(&signed), ip, Some("ExampleBot"), now).await);
                }
                start.elapsed()
            })
        })
    });

    let strict = verifier(true, &key, now);
    c.bench_function("verify_cached_key_replay_check", |b| {
        b.iter_batched(
            || {
                let mut p = request();
                signer.sign(&mut p, now).expect("sign");
                p
            },
            |p| {
                let v = rt.block_on(strict.verify(&p, now));
                debug_assert!(matches!(v, Verdict::Verified(_)));
                black_box(v)
            },
            BatchSize::SmallInput,
        )
    });

    c.bench_function("sign_request", |b| {
        b.iter_batched(
            request,
            |mut p| {
                signer.sign(&mut p, now).expect("sign");
                black_box(p)
            },
            BatchSize::SmallInput,
        )
    });
}

fn per_user_and_pay(c: &mut Criterion) {
    let now = SystemTime::now();
    let signer = |agent: &str| {
        Arc::new(RequestSigner::new(Arc::new(SigningKey::generate().expect("key")), agent).expect("signer"))
    };
    let mut signers = Signers::new(Some(signer(AGENT)));
    for n in 0..100 {
        signers = signers
            .with_user(format!("user{n}"), signer(&format!("https://u{n}.example")))
            .with_token(&format!("Bot{n}"), signer(&format!("https://b{n}.example")));
    }
    c.bench_function("signers_pick", |b| {
        b.iter(|| black_box(signers.pick(black_box(Some("someone")), black_box(Some("Bot42")))))
    });
    c.bench_function("signers_pick_then_sign", |b| {
        b.iter_batched(
            request,
            |mut p| {
                let s = signers.pick(Some("someone"), Some("Bot42")).expect("a signer");
                s.sign(&mut p, now).expect("sign");
                black_box(p)
            },
            BatchSize::SmallInput,
        )
    });

    let max: Price = "USD 0.05".parse().expect("price");
    c.bench_function("pay_retry_decision", |b| {
        b.iter(|| black_box(retry_refusal(black_box("USD 0.01"), Some(&max), true, false)))
    });
    let pay_signer = signer(AGENT);
    c.bench_function("pay_retry_sign", |b| {
        b.iter_batched(
            || {
                let mut p = request();
                p.headers.insert(CRAWLER_MAX_PRICE, http::HeaderValue::from_static("USD 0.05"));
                p
            },
            |mut p| {
                pay_signer.sign_covering(&mut p, now, &[CRAWLER_MAX_PRICE]).expect("sign");
                black_box(p)
            },
            BatchSize::SmallInput,
        )
    });
}

criterion_group!(group, benches, per_user_and_pay);
criterion_main!(group);
