//! Request ids for the audit log, without a heap allocation per request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

/// Request ids: unique within a process run, ordered, and unlikely to repeat across runs.
pub(crate) struct RequestIds {
    prefix: u64,
    next: AtomicU64,
}

impl RequestIds {
    pub(crate) fn new() -> RequestIds {
        let nanos =
            SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
        RequestIds { prefix: nanos ^ (std::process::id() as u64) << 48, next: AtomicU64::new(0) }
    }

    /// The next id, `{prefix:016x}-{counter:08x}`, written by hand on the stack: this runs
    /// for every request.
    pub(crate) fn next(&self) -> RequestId {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let mut id = RequestId { buf: [b'-'; 33], len: 0 };
        for i in 0..16 {
            id.buf[i] = DIGITS[((self.prefix >> (60 - 4 * i)) & 0xf) as usize];
        }
        let digits = ((64 - n.leading_zeros() as usize).div_ceil(4)).max(8);
        for i in 0..digits {
            id.buf[17 + i] = DIGITS[((n >> (4 * (digits - 1 - i))) & 0xf) as usize];
        }
        id.len = 17 + digits;
        id
    }
}

/// A request id without a heap allocation.
#[derive(Clone, Copy)]
pub(crate) struct RequestId {
    buf: [u8; 33],
    len: usize,
}

impl RequestId {
    pub(crate) fn as_str(&self) -> &str {
        // Hex digits and a dash: always UTF-8.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_ids_are_hex_prefix_and_counter() {
        let ids = RequestIds { prefix: 0x0123_4567_89ab_cdef, next: AtomicU64::new(0) };
        assert_eq!(ids.next().as_str(), "0123456789abcdef-00000000");
        assert_eq!(ids.next().as_str(), "0123456789abcdef-00000001");
        ids.next.store(0xfedc_ba98, Ordering::Relaxed);
        assert_eq!(ids.next().as_str(), "0123456789abcdef-fedcba98");
        ids.next.store(0x1_0000_0000, Ordering::Relaxed);
        assert_eq!(ids.next().as_str(), "0123456789abcdef-100000000");
        ids.next.store(u64::MAX, Ordering::Relaxed);
        assert_eq!(ids.next().as_str(), "0123456789abcdef-ffffffffffffffff");
    }
}
