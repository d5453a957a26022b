//! A request head from a stranger: `read_request_head` never panics; a head it takes is
//! split off exactly (what follows stays), one it does not take leaves the buffer byte for
//! byte as it was (hyper reads it next), and the same bytes fed in two pieces come to the
//! same, the second read searching only what the first had not. A head it takes, answered,
//! writes a response head that httparse reads back.

#![no_main]

use bytes::BytesMut;
use http::{HeaderMap, StatusCode, Version};
use libfuzzer_sys::fuzz_target;
use robotsgate_h1::{BodySize, RequestRead, ResponseParts, encode_response_head, read_request_head};

const LIMIT: usize = 4096;

fn kind(read: &RequestRead) -> u8 {
    match read {
        RequestRead::Partial => 0,
        RequestRead::Fast(_) => 1,
        RequestRead::Other => 2,
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else { return };
    let mut whole = BytesMut::from(data);
    let mut headers = HeaderMap::new();
    let read = read_request_head(&mut whole, 0, LIMIT, &mut headers);
    match &read {
        RequestRead::Fast(head) => {
            let used = data.len() - whole.len();
            assert!(used <= LIMIT && data[..used].ends_with(b"\n"), "a head ends with its empty line");
            assert_eq!(&data[used..], &whole[..], "the rest stays");
            // Answered with the request's own fields: a head httparse reads back.
            let res = ResponseParts {
                status: StatusCode::OK,
                version: Version::HTTP_11,
                reason: None,
                headers: &headers,
                body: BodySize::Known(3),
            };
            let mut out = Vec::new();
            if encode_response_head(head.method == http::Method::HEAD, &res, !head.close, b"D", &mut out).is_ok() {
                let mut fields = [httparse::EMPTY_HEADER; 256];
                let mut back = httparse::Response::new(&mut fields);
                assert_eq!(back.parse(&out), Ok(httparse::Status::Complete(out.len())));
            }
        }
        RequestRead::Partial | RequestRead::Other => assert_eq!(&whole[..], data, "left as it was"),
    }
    let cut = usize::from(cut).min(data.len());
    let mut first = BytesMut::from(&data[..cut]);
    let mut again = HeaderMap::new();
    if let RequestRead::Partial = read_request_head(&mut first, 0, LIMIT, &mut again) {
        // The first piece holds no end of a head: the second read searches only what came
        // after it, and comes to what a read of the whole came to.
        first.extend_from_slice(&data[cut..]);
        let second = read_request_head(&mut first, cut, LIMIT, &mut again);
        assert_eq!(kind(&read), kind(&second), "whole: {read:?}, in two pieces: {second:?}");
        if let (RequestRead::Fast(a), RequestRead::Fast(b)) = (&read, &second) {
            assert_eq!((&a.method, &a.uri, a.close), (&b.method, &b.uri, b.close));
            assert_eq!(headers, again, "the same fields");
            assert_eq!(first.len(), whole.len(), "the same length");
        }
    }
});
