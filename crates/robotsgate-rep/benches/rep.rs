//! Criterion benchmarks of the robots.txt engine: real files and adversarial inputs
//! (every check on a file of at most 500 KiB with a URL of at most 16 KiB must take far
//! less than 10 ms, and so must the parse).
//!
//! ```sh
//! cargo bench --bench rep
//! ```

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use robotsgate_rep::{MAX_ROBOTS_TXT_BYTES, Profile, RobotsTxt};

#[path = "support/corpus.rs"]
mod corpus_dir;

fn corpus(name: &str) -> Vec<u8> {
    let path = corpus_dir::dir().join(name);
    let mut body = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    body.truncate(MAX_ROBOTS_TXT_BYTES);
    body
}

fn fill(header: &str, mut line: impl FnMut(usize) -> String) -> Vec<u8> {
    let mut b = header.as_bytes().to_vec();
    let mut i = 0;
    while b.len() < MAX_ROBOTS_TXT_BYTES {
        b.extend_from_slice(line(i).as_bytes());
        i += 1;
    }
    b.truncate(MAX_ROBOTS_TXT_BYTES);
    b
}

/// A deterministic pseudo-random byte stream.
fn lcg(seed: &mut u64) -> u64 {
    *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
    *seed >> 33
}

fn adversarial() -> Vec<(&'static str, Vec<u8>, String)> {
    let a16k = format!("/{}", "a".repeat(16 * 1024 - 1));
    let mut seed = 7u64;
    let alpha = b"abcdefghij";
    let random_path: String = std::iter::once('/')
        .chain((0..16 * 1024 - 1).map(|_| alpha[(lcg(&mut seed) % 10) as usize] as char))
        .collect();
    vec![
        (
            "one 16K /*a*a*...*b rule, 16K path",
            format!("User-agent: *\nDisallow: /{}b\n", "*a".repeat(8000)).into_bytes(),
            a16k.clone(),
        ),
        (
            "30 lines of /*a*a*...*b (google cuts them), 16K path",
            (0..30)
                .map(|_| format!("Disallow: /{}b\n", "*a".repeat(8300)))
                .fold("User-agent: *\n".to_string(), |s, l| s + &l)
                .into_bytes(),
            a16k.clone(),
        ),
        (
            "500K of /*a*a..*b rules, 16K path",
            fill("User-agent: *\n", |i| format!("Disallow: /{}b\n", "*a".repeat(1 + i % 40))),
            a16k.clone(),
        ),
        (
            "500K of distinct *xxxx rules, random 16K path",
            fill("User-agent: *\n", |_| {
                let n: String = (0..4).map(|_| alpha[(lcg(&mut seed) % 10) as usize] as char).collect();
                format!("allow:*{n}\n")
            }),
            random_path.clone(),
        ),
        (
            "500K of /*n*m*n$ rules, random 16K path",
            fill("User-agent: *\n", |_| {
                let n: String = (0..3).map(|_| alpha[(lcg(&mut seed) % 10) as usize] as char).collect();
                let m: String = (0..3).map(|_| alpha[(lcg(&mut seed) % 10) as usize] as char).collect();
                format!("disallow:/*{n}*{m}*{n}$\n")
            }),
            random_path.clone(),
        ),
        (
            "500K of nested *a^k rules, 16K path",
            fill("User-agent: *\n", |i| format!("allow:*{}\n", "a".repeat(i + 1))),
            a16k.clone(),
        ),
        (
            "500K of nested /a^k literals, 16K path",
            fill("User-agent: *\n", |i| format!("disallow:/{}\n", "a".repeat(i + 1))),
            a16k.clone(),
        ),
        (
            "500K of nested *a^k$ suffixes, 16K path",
            fill("User-agent: *\n", |i| format!("allow:*{}$\n", "a".repeat(i + 1))),
            a16k.clone(),
        ),
        (
            "40K groups for the agent, 16K path",
            fill("", |_| "User-agent: FooBot\nDisallow: /*x*y\n".into()),
            a16k.clone(),
        ),
        ("500K of user-agent lines", fill("", |i| format!("User-agent: bot{i:x}\n")), "/x".into()),
        (
            "500K of percent escapes",
            fill("User-agent: *\n", |_| "Disallow: /%41%2f%e9%c3%a9/../x*%2A$\n".into()),
            format!("/{}", "%41/..".repeat(2700)),
        ),
    ]
}

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("parse");
    for name in ["22-amazon.com.txt", "31-github.com.txt", "10078-merckmanuals.com.txt", "1072-boe.es.txt"] {
        let body = corpus(name);
        g.throughput(criterion::Throughput::Bytes(body.len() as u64));
        g.bench_function(name, |b| b.iter(|| black_box(RobotsTxt::parse(black_box(&body)))));
    }
    g.finish();

    let mut g = c.benchmark_group("check");
    for (name, path) in [
        ("22-amazon.com.txt", "/gp/product/B000123/ref=x?ie=UTF8"),
        ("31-github.com.txt", "/rust-lang/rust/tree/master/src"),
        ("10078-merckmanuals.com.txt", "/home/appendixes/drug-names-generic-and-brand/x"),
        ("1072-boe.es.txt", "/buscar/doc.php?id=BOE-A-1967-18577"),
    ] {
        let robots = RobotsTxt::parse(&corpus(name));
        for profile in [Profile::Conservative, Profile::Google] {
            g.bench_function(format!("{name} {profile}"), |b| {
                b.iter(|| black_box(robots.check_with(profile, "FooBot", black_box(path)).allowed()))
            });
        }
    }
    g.finish();

    let mut g = c.benchmark_group("adversarial");
    g.sample_size(10);
    for (name, body, path) in adversarial() {
        g.bench_function(format!("parse + first check: {name}"), |b| {
            b.iter(|| {
                let r = RobotsTxt::parse(black_box(&body));
                black_box(r.check("FooBot", &path).allowed())
            })
        });
        let robots = RobotsTxt::parse(&body);
        g.bench_function(format!("check: {name}"), |b| {
            b.iter(|| black_box(robots.check("FooBot", black_box(&path)).allowed()))
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
