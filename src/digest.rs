//! The SHA-256 of a byte string (robots.txt files and the copies shared by a fleet), from
//! ring: the one digest implementation the library uses (streaming hashes take
//! `ring::digest::Context` directly).

/// The SHA-256 digest of `data`.
pub(crate) fn sha256(data: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(ring::digest::digest(&ring::digest::SHA256, data).as_ref());
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn it_is_sha_256() {
        assert_eq!(
            hex::encode(super::sha256(b"abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }
}
