//! The ClientHello of a TLS client in a tunnel (`robotsgate::net::read_client_hello`): the
//! proxy reads its server name to hold a tunnel that is not intercepted to the host it was
//! checked for. The bytes are the client's, before any handshake. Input: the first bytes
//! of a tunnel as they come.
//!
//! Invariants: no panic; more than `MAX_CLIENT_HELLO` bytes are never `Incomplete` (the
//! proxy stops reading); a server name read is 1 or more printable ASCII bytes; every
//! prefix of a complete ClientHello is `Incomplete` or the same verdict (so reading more
//! never changes a verdict once given), and bytes after it change nothing.

#![no_main]

use libfuzzer_sys::fuzz_target;
use robotsgate::net::{ClientHello, MAX_CLIENT_HELLO, read_client_hello};

fuzz_target!(|data: &[u8]| {
    let verdict = read_client_hello(data);
    if data.len() > MAX_CLIENT_HELLO {
        assert_ne!(verdict, ClientHello::Incomplete);
    }
    if let ClientHello::Complete { server_name: Some(name), .. } = &verdict {
        assert!(!name.is_empty() && name.bytes().all(|b| b.is_ascii_graphic()), "{name:?}");
    }
    if verdict == ClientHello::Incomplete {
        return;
    }
    // The shortest prefix with a verdict: every longer one has the same.
    let Some(end) = (0..=data.len()).find(|&n| read_client_hello(&data[..n]) != ClientHello::Incomplete) else {
        return;
    };
    let first = read_client_hello(&data[..end]);
    assert_eq!(first, verdict, "{end} of {} bytes", data.len());
    let mut more = data[..end].to_vec();
    more.extend_from_slice(&[0x17, 3, 3, 0, 1, 0]);
    assert_eq!(read_client_hello(&more), verdict);
});
