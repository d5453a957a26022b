//! The fast path's head readers and writer on the heads of `benches/load` (nginx's answer
//! to a 1 KiB file; oha's and curl's requests through a proxy), and on a head whose names
//! are all uncommon.
//!
//! `cargo bench -p robotsgate-h1 --bench heads`

use std::hint::black_box;

use bytes::BytesMut;
use criterion::{Criterion, criterion_group, criterion_main};
use http::HeaderMap;
use robotsgate_h1::{RequestRead, read_request_head, read_response_head};

const NGINX: &[u8] = b"HTTP/1.1 200 OK\r\nServer: nginx/1.22.1\r\nDate: Sun, 29 Nov 2026 00:00:00 GMT\r\n\
Content-Type: application/octet-stream\r\nContent-Length: 1024\r\n\
Last-Modified: Sat, 28 Nov 2026 12:00:00 GMT\r\nConnection: keep-alive\r\n\
ETag: \"6749a0c0-400\"\r\nAccept-Ranges: bytes\r\n\r\n";
const OHA: &[u8] = b"GET http://127.0.0.1:18080/1k HTTP/1.1\r\nuser-agent: oha/1.4.5\r\n\
accept: */*\r\nhost: 127.0.0.1:18080\r\n\r\n";
const CURL: &[u8] = b"GET http://example.com/a/b?c=d HTTP/1.1\r\nHost: example.com\r\n\
User-Agent: curl/8.5.0\r\nAccept: */*\r\nProxy-Connection: Keep-Alive\r\n\r\n";
const UNCOMMON: &[u8] = b"HTTP/1.1 200 OK\r\nX-Request-Id: 1\r\nX-Served-By: a\r\nX-Cache: HIT\r\n\
X-Timer: S1\r\nCf-Ray: 1\r\nNel: {}\r\nReport-To: {}\r\nServer-Timing: a\r\n\r\n";

fn heads(c: &mut Criterion) {
    let mut headers = HeaderMap::new();
    for (name, head) in [("response nginx", NGINX), ("response uncommon names", UNCOMMON)] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let mut buf = BytesMut::from(head);
                let read = read_response_head(&mut buf, 8192, &mut headers);
                black_box(read.ok().flatten().map(|h| h.status));
            })
        });
    }
    for (name, head) in [("request oha", OHA), ("request curl", CURL)] {
        c.bench_function(name, |b| {
            b.iter(|| {
                let mut buf = BytesMut::from(head);
                let read = read_request_head(&mut buf, 0, 8192, &mut headers);
                black_box(matches!(read, RequestRead::Fast(_)));
            })
        });
    }
}

criterion_group!(benches, heads);
criterion_main!(benches);
