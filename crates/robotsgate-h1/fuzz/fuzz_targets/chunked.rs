//! A chunked body from a stranger: the decoder never panics, never gives more data than it
//! was given, and decodes the same data and ends at the same byte however the input is
//! cut into pieces.

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate_h1::{ChunkedDecoder, Decoded, H1Error};

/// Decodes `input` fed `step` bytes at a time: the data, and where the body ended.
fn decode(input: &[u8], step: usize) -> Result<(Vec<u8>, Option<usize>), H1Error> {
    let mut decoder = ChunkedDecoder::new(1024);
    let (mut data, mut pending, mut fed, mut used_total) = (Vec::new(), Vec::new(), 0, 0);
    while fed < input.len() {
        let end = (fed + step).min(input.len());
        pending.extend_from_slice(&input[fed..end]);
        fed = end;
        loop {
            let (used, what) = decoder.decode(&pending)?;
            assert!(used <= pending.len());
            used_total += used;
            match what {
                Decoded::Data(r) => {
                    assert!(r.end == used && r.start <= r.end, "data ends the bytes used");
                    data.extend_from_slice(&pending[r]);
                }
                Decoded::End => return Ok((data, Some(used_total))),
                Decoded::More => assert_eq!(used, pending.len(), "More uses all"),
            }
            pending.drain(..used);
            if pending.is_empty() {
                break;
            }
        }
    }
    Ok((data, None))
}

fuzz_target!(|data: &[u8]| {
    let Some((&step, input)) = data.split_first() else { return };
    let whole = decode(input, input.len().max(1));
    let pieces = decode(input, usize::from(step).max(1));
    match (&whole, &pieces) {
        (Ok(a), Ok(b)) => {
            assert_eq!(a, b, "the same data and end");
            assert!(a.0.len() <= input.len());
        }
        (Err(a), Err(b)) => assert_eq!(a, b, "the same error"),
        (a, b) => panic!("whole: {a:?}, in pieces: {b:?}"),
    }
});
