//! The server name a TLS client asks for: the `server_name` extension (RFC 6066 §3) of its
//! ClientHello (RFC 8446 §4.1.2), read from the first bytes it sends, before any handshake.
//! Pure: bytes in, a verdict out. A tunnel that was checked for one host can be held to it.
//!
//! ```
//! use robotsgate::net::{ClientHello, read_client_hello};
//!
//! # fn hello(name: &str) -> Vec<u8> {
//! #     let mut ext = vec![0, 0];
//! #     let entry_len = (name.len() + 3) as u16;
//! #     ext.extend_from_slice(&(entry_len + 2).to_be_bytes());
//! #     ext.extend_from_slice(&entry_len.to_be_bytes());
//! #     ext.push(0);
//! #     ext.extend_from_slice(&(name.len() as u16).to_be_bytes());
//! #     ext.extend_from_slice(name.as_bytes());
//! #     let mut body = vec![3, 3];
//! #     body.extend_from_slice(&[0; 32]);
//! #     body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
//! #     body.extend_from_slice(&(ext.len() as u16).to_be_bytes());
//! #     body.extend_from_slice(&ext);
//! #     let mut hs = vec![1, 0];
//! #     hs.extend_from_slice(&(body.len() as u16).to_be_bytes());
//! #     hs.extend_from_slice(&body);
//! #     let mut rec = vec![0x16, 3, 1];
//! #     rec.extend_from_slice(&(hs.len() as u16).to_be_bytes());
//! #     rec.extend_from_slice(&hs);
//! #     rec
//! # }
//! let first = hello("example.com");
//! assert_eq!(read_client_hello(&first[..20]), ClientHello::Incomplete);
//! assert_eq!(
//!     read_client_hello(&first),
//!     ClientHello::Complete { server_name: Some("example.com".into()), ech: false }
//! );
//! assert!(matches!(read_client_hello(b"GET / HTTP/1.1\r\n"), ClientHello::Malformed(_)));
//! ```

/// The most bytes a ClientHello may take, records included: more is
/// [`ClientHello::Malformed`]. (One with post-quantum key shares is some 2 KB; a record
/// holds 16 KiB.)
pub const MAX_CLIENT_HELLO: usize = 32 * 1024;

/// What the first bytes of a TLS connection say ([`read_client_hello`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClientHello {
    /// The ClientHello is not whole yet: read more (up to [`MAX_CLIENT_HELLO`] in all).
    Incomplete,
    /// The whole ClientHello.
    Complete {
        /// The host name it asks for (as sent; `None`: no `server_name` extension, as a
        /// client connecting to an IP address sends none).
        server_name: Option<String>,
        /// It carries an `encrypted_client_hello` extension (ECH): the name above is then
        /// the outer one, which may be a provider's public name rather than the host.
        /// (Clients send one as GREASE too, with the real name outside.)
        ech: bool,
    },
    /// Not a ClientHello, or one that does not read: why.
    Malformed(&'static str),
}

/// Reads the ClientHello at the start of `first` (the bytes a TLS client sent first).
pub fn read_client_hello(first: &[u8]) -> ClientHello {
    // The handshake message may span records; its bytes are gathered from each.
    let mut message: Vec<u8> = Vec::new();
    let mut rest = first;
    loop {
        let Some(header) = rest.get(..5) else {
            return if first.len() > MAX_CLIENT_HELLO {
                ClientHello::Malformed("a ClientHello larger than robotsgate reads")
            } else {
                ClientHello::Incomplete
            };
        };
        if header[0] != 0x16 {
            return ClientHello::Malformed("not a TLS handshake record");
        }
        if header[1] != 3 {
            return ClientHello::Malformed("not a TLS record version");
        }
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        if len == 0 || len > 16 * 1024 {
            return ClientHello::Malformed("a TLS record of a length TLS does not allow");
        }
        if first.len() - rest.len() + 5 + len > MAX_CLIENT_HELLO {
            return ClientHello::Malformed("a ClientHello larger than robotsgate reads");
        }
        let Some(fragment) = rest.get(5..5 + len) else { return ClientHello::Incomplete };
        rest = &rest[5 + len..];
        // Most ClientHellos are one record: read in place.
        let whole: &[u8] = if message.is_empty() && has_whole_message(fragment) {
            fragment
        } else {
            message.extend_from_slice(fragment);
            if !has_whole_message(&message) {
                continue;
            }
            &message
        };
        return parse(whole);
    }
}

/// Whether `bytes` hold a whole handshake message (its 4-byte header and body).
fn has_whole_message(bytes: &[u8]) -> bool {
    match bytes.get(..4) {
        Some(h) => bytes.len() >= 4 + (usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3])),
        None => false,
    }
}

/// A cursor over a message's bytes; every read says when the bytes end first.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        let (head, rest) = (self.0.get(..n)?, self.0.get(n..)?);
        self.0 = rest;
        Some(head)
    }

    fn u8(&mut self) -> Option<usize> {
        self.take(1).map(|b| usize::from(b[0]))
    }

    fn u16(&mut self) -> Option<usize> {
        self.take(2).map(|b| usize::from(u16::from_be_bytes([b[0], b[1]])))
    }

    /// A vector with a `width`-byte length before it.
    fn vec(&mut self, width: usize) -> Option<&'a [u8]> {
        let len = if width == 1 { self.u8()? } else { self.u16()? };
        self.take(len)
    }
}

/// The ClientHello in `message` (a whole handshake message).
fn parse(message: &[u8]) -> ClientHello {
    const SHORT: ClientHello = ClientHello::Malformed("a ClientHello shorter than its lengths say");
    let mut r = Reader(message);
    if r.u8() != Some(1) {
        return ClientHello::Malformed("the first handshake message is not a ClientHello");
    }
    let Some(len) = r.take(3).map(|b| usize::from(b[0]) << 16 | usize::from(b[1]) << 8 | usize::from(b[2]))
    else {
        return SHORT;
    };
    let Some(body) = r.take(len) else { return SHORT };
    let mut r = Reader(body);
    // legacy_version, random, legacy_session_id, cipher_suites, legacy_compression_methods.
    let (Some(_), Some(_), Some(session), Some(_), Some(_)) =
        (r.take(2), r.take(32), r.vec(1), r.vec(2), r.vec(1))
    else {
        return SHORT;
    };
    if session.len() > 32 {
        return ClientHello::Malformed("a session id longer than 32 bytes");
    }
    if r.0.is_empty() {
        // No extensions at all (TLS 1.2 and before allow it).
        return ClientHello::Complete { server_name: None, ech: false };
    }
    let Some(extensions) = r.vec(2) else { return SHORT };
    if !r.0.is_empty() {
        return ClientHello::Malformed("bytes after a ClientHello's extensions");
    }
    let mut r = Reader(extensions);
    let (mut server_name, mut seen_name, mut ech) = (None, false, false);
    while !r.0.is_empty() {
        let (Some(kind), Some(data)) = (r.u16(), r.vec(2)) else { return SHORT };
        match kind {
            0 => {
                if seen_name {
                    return ClientHello::Malformed("two server_name extensions");
                }
                seen_name = true;
                match host_name(data) {
                    Ok(name) => server_name = name,
                    Err(why) => return ClientHello::Malformed(why),
                }
            }
            0xfe0d => ech = true,
            _ => {}
        }
    }
    ClientHello::Complete { server_name, ech }
}

/// The `host_name` entry of a `server_name` extension's list (RFC 6066 §3: at most one).
fn host_name(data: &[u8]) -> Result<Option<String>, &'static str> {
    let mut r = Reader(data);
    let Some(list) = r.vec(2) else { return Err("a server_name extension shorter than its lengths say") };
    if !r.0.is_empty() {
        return Err("bytes after a server_name list");
    }
    let mut r = Reader(list);
    let mut found = None;
    while !r.0.is_empty() {
        let (Some(kind), Some(name)) = (r.u8(), r.vec(2)) else {
            return Err("a server_name extension shorter than its lengths say");
        };
        if kind != 0 {
            continue;
        }
        if found.is_some() {
            return Err("two host names in a server_name extension");
        }
        // RFC 6066: ASCII, no trailing dot; robotsgate compares names, so anything that
        // could hide one (controls, spaces, non-ASCII) is refused rather than read loosely.
        if name.is_empty() || !name.iter().all(|b| b.is_ascii_graphic()) {
            return Err("a server name that is not an ASCII host name");
        }
        found = Some(String::from_utf8_lossy(name).into_owned());
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A ClientHello for `name` with `extra` extensions after it, in `records` records.
    fn hello(name: Option<&str>, extra: &[(u16, &[u8])], records: usize) -> Vec<u8> {
        let mut exts = Vec::new();
        let mut push = |kind: u16, data: &[u8]| {
            exts.extend_from_slice(&kind.to_be_bytes());
            exts.extend_from_slice(&(data.len() as u16).to_be_bytes());
            exts.extend_from_slice(data);
        };
        if let Some(name) = name {
            let mut list = vec![0];
            list.extend_from_slice(&(name.len() as u16).to_be_bytes());
            list.extend_from_slice(name.as_bytes());
            let mut data = (list.len() as u16).to_be_bytes().to_vec();
            data.extend_from_slice(&list);
            push(0, &data);
        }
        for (kind, data) in extra {
            push(*kind, data);
        }
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&[32]);
        body.extend_from_slice(&[9; 32]);
        body.extend_from_slice(&[0, 4, 0x13, 0x01, 0x13, 0x02, 1, 0]);
        body.extend_from_slice(&(exts.len() as u16).to_be_bytes());
        body.extend_from_slice(&exts);
        let mut message = vec![1, 0];
        message.extend_from_slice(&(body.len() as u16).to_be_bytes());
        message.extend_from_slice(&body);
        let mut out = Vec::new();
        for part in message.chunks(message.len().div_ceil(records)) {
            out.extend_from_slice(&[0x16, 3, 1]);
            out.extend_from_slice(&(part.len() as u16).to_be_bytes());
            out.extend_from_slice(part);
        }
        out
    }

    fn complete(name: Option<&str>, ech: bool) -> ClientHello {
        ClientHello::Complete { server_name: name.map(str::to_owned), ech }
    }

    #[test]
    fn the_server_name_is_read_from_one_record_or_several() {
        for records in [1, 2, 5] {
            let first = hello(Some("Example.COM"), &[(10, &[0, 2, 0, 29])], records);
            assert_eq!(read_client_hello(&first), complete(Some("Example.COM"), false), "{records}");
            // Every shorter prefix asks for more.
            for n in 0..first.len() {
                assert_eq!(
                    read_client_hello(&first[..n]),
                    ClientHello::Incomplete,
                    "{records} records, {n} bytes"
                );
            }
            // What follows the ClientHello (the client's next records) is not looked at.
            let mut more = first.clone();
            more.extend_from_slice(&[0x14, 3, 3, 0, 1, 1, 0x17]);
            assert_eq!(read_client_hello(&more), complete(Some("Example.COM"), false));
        }
    }

    /// What rustls (not this module's writer) sends first, for a name and an address.
    #[test]
    fn rustls_hellos_are_read() {
        let config = std::sync::Arc::new(
            rustls::ClientConfig::builder()
                .with_root_certificates(rustls::RootCertStore::empty())
                .with_no_client_auth(),
        );
        for (name, sent) in [("www.Example.com", Some("www.Example.com")), ("192.0.2.1", None)] {
            let server = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
            let mut conn = rustls::ClientConnection::new(config.clone(), server).unwrap();
            let mut first = Vec::new();
            while conn.wants_write() {
                conn.write_tls(&mut first).unwrap();
            }
            assert_eq!(read_client_hello(&first), complete(sent, false), "{name}");
            assert_eq!(read_client_hello(&first[..first.len() - 1]), ClientHello::Incomplete);
        }
    }

    /// What curl and openssl sent first (captured on loopback: `fuzz/seeds/client_hello`).
    #[test]
    fn curl_and_openssl_hellos_are_read() {
        let seed = |name: &str| {
            std::fs::read(format!("{}/fuzz/seeds/client_hello/{name}", env!("CARGO_MANIFEST_DIR")))
        };
        for (file, name) in [
            ("curl-www.example.com", Some("www.example.com")),
            ("curl-two-records", Some("www.example.com")),
            ("curl-address-no-name", None),
            ("openssl-tls12-a.example", Some("a.example")),
        ] {
            let first = seed(file).unwrap();
            assert_eq!(read_client_hello(&first), complete(name, false), "{file}");
        }
        assert_eq!(read_client_hello(&seed("truncated-record").unwrap()), ClientHello::Incomplete);
        assert!(matches!(read_client_hello(&seed("not-tls-http").unwrap()), ClientHello::Malformed(_)));
    }

    #[test]
    fn no_name_and_ech_are_said() {
        assert_eq!(read_client_hello(&hello(None, &[], 1)), complete(None, false));
        assert_eq!(
            read_client_hello(&hello(Some("a.example"), &[(0xfe0d, &[0; 40])], 1)),
            complete(Some("a.example"), true)
        );
    }

    #[test]
    fn what_is_not_a_client_hello_is_malformed() {
        let bad = |bytes: &[u8]| matches!(read_client_hello(bytes), ClientHello::Malformed(_));
        assert!(bad(b"GET / HTTP/1.1\r\n"));
        assert!(bad(&[0x16, 9, 1, 0, 4]), "record version");
        assert!(bad(&[0x16, 3, 1, 0, 0]), "empty record");
        assert!(bad(&[0x16, 3, 1, 0x40, 1]), "a record over 16 KiB");
        // A ServerHello, not a ClientHello.
        let mut server = hello(Some("a.example"), &[], 1);
        server[5] = 2;
        assert!(bad(&server));
        // Two names, a name with a space or a control, an empty one.
        let two = {
            let mut list = Vec::new();
            for n in ["a.example", "b.example"] {
                list.push(0);
                list.extend_from_slice(&(n.len() as u16).to_be_bytes());
                list.extend_from_slice(n.as_bytes());
            }
            let mut data = (list.len() as u16).to_be_bytes().to_vec();
            data.extend_from_slice(&list);
            data
        };
        assert!(bad(&hello(None, &[(0, &two)], 1)));
        assert!(bad(&hello(Some("a.example"), &[(0, &two)], 1)), "two server_name extensions");
        for name in ["a b.example", "a\0.example", "", "caf\u{e9}.example"] {
            assert!(bad(&hello(Some(name), &[], 1)), "{name:?}");
        }
        // Lengths that run past the message.
        let mut long = hello(Some("a.example"), &[], 1);
        let at = long.len() - "a.example".len() - 2;
        long[at + 1] = 200;
        assert!(bad(&long));
    }

    #[test]
    fn a_client_hello_past_the_bound_is_malformed_not_awaited() {
        // Records that never finish the message: refused once past the bound.
        let mut first = Vec::new();
        first.extend_from_slice(&[0x16, 3, 1, 0, 4, 1, 0xff, 0xff, 0xff]);
        while first.len() <= MAX_CLIENT_HELLO {
            first.extend_from_slice(&[0x16, 3, 1, 0x40, 0]);
            first.extend_from_slice(&[0; 16 * 1024]);
        }
        assert!(matches!(read_client_hello(&first), ClientHello::Malformed(_)));
        assert!(matches!(read_client_hello(&first[..MAX_CLIENT_HELLO + 3]), ClientHello::Malformed(_)));
    }
}
