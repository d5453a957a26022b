//! A response head from a stranger: `read_response_head` never panics, and reads the same
//! head however the bytes arrived (fed in two pieces, it finds nothing in the first
//! unless the head is already whole there, then the same status, fields and length).
//! Whatever it reads has a framing or a framing error, never a panic.

#![no_main]

use bytes::BytesMut;
use http::HeaderMap;
use libfuzzer_sys::fuzz_target;
use robotsgate_h1::{read_response_head, response_framing};

const LIMIT: usize = 4096;

fuzz_target!(|data: &[u8]| {
    let Some((&cut, data)) = data.split_first() else { return };
    let mut whole = BytesMut::from(data);
    let mut headers = HeaderMap::new();
    let read = read_response_head(&mut whole, LIMIT, &mut headers);
    if let Ok(Some(head)) = &read {
        let used = data.len() - whole.len();
        assert!(used <= LIMIT && data[..used].ends_with(b"\n"), "a head ends with its empty line");
        assert_eq!(&data[used..], &whole[..], "the rest stays");
        for head_request in [false, true] {
            let _ = response_framing(head_request, head, &headers);
        }
    }
    // In two pieces: the first alone is incomplete (or already the whole head).
    let cut = usize::from(cut).min(data.len());
    let mut first = BytesMut::from(&data[..cut]);
    let mut again = HeaderMap::new();
    match read_response_head(&mut first, LIMIT, &mut again) {
        Ok(None) => {
            first.extend_from_slice(&data[cut..]);
            let second = read_response_head(&mut first, LIMIT, &mut again);
            match (&read, &second) {
                (Ok(Some(a)), Ok(Some(b))) => {
                    assert_eq!((a.status, a.version, &a.reason), (b.status, b.version, &b.reason));
                    assert_eq!(headers, again, "the same fields");
                    assert_eq!(first.len(), whole.len(), "the same length");
                }
                (Ok(None), Ok(None)) | (Err(_), Err(_)) => {}
                (a, b) => panic!("whole: {a:?}, in two pieces: {b:?}"),
            }
        }
        Ok(Some(_)) | Err(_) => {}
    }
});
