//! Signed checkpoints in the C2SP forms: a checkpoint (`c2sp.org/tlog-checkpoint`) is the
//! text
//!
//! ```text
//! <origin>
//! <tree size>
//! <root hash, base64>
//! time <RFC 3339>
//! ```
//!
//! signed as a note (`c2sp.org/signed-note`): a blank line, then one line per signature,
//! `— <key name> <base64(key id || Ed25519 signature)>`. Keys use the note formats too
//! (those of Go's `golang.org/x/mod/sumdb/note`): a verifier key is
//! `<name>+<key id, 8 hex digits>+<base64(0x01 || public key)>`, a signer key
//! `PRIVATE+KEY+<name>+<key id>+<base64(0x01 || seed)>`, and the key id is the first four
//! bytes of `SHA-256(<name> "\n" 0x01 || public key)`. So a checkpoint can be checked with
//! any tool for those formats, without robotsgate.
//!
//! Everything here is pure (no I/O) except making a new key, which needs randomness.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use ring::signature::{ED25519, Ed25519KeyPair, KeyPair, UnparsedPublicKey};

use super::merkle::Hash;

/// The Ed25519 algorithm byte of the note key formats.
const ALG_ED25519: u8 = 0x01;

/// Why a key or a note could not be read, or a signature not checked.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NoteError {
    /// A key is not in the expected form.
    #[error("not a {what} key: {why}")]
    Key {
        /// `signer` or `verifier`.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// A checkpoint is not in the expected form.
    #[error("not a checkpoint: {0}")]
    Checkpoint(String),
    /// The note has no signature by the key.
    #[error("no signature by key {0}")]
    Unsigned(String),
    /// The key's signature does not verify.
    #[error("the signature by key {0} does not match the checkpoint")]
    BadSignature(String),
}

/// A key name: no spaces, no `+`, not empty (the note formats' rule).
fn check_name(name: &str, what: &'static str) -> Result<(), NoteError> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '+') {
        return Err(NoteError::Key {
            what,
            why: format!("the name {name:?} is empty or has a space or '+'"),
        });
    }
    Ok(())
}

/// The key id of `name` and `public`.
fn key_id(name: &str, public: &[u8]) -> [u8; 4] {
    let mut h = ring::digest::Context::new(&ring::digest::SHA256);
    h.update(name.as_bytes());
    h.update(b"\n");
    h.update(&[ALG_ED25519]);
    h.update(public);
    let d = h.finish();
    let d = d.as_ref();
    [d[0], d[1], d[2], d[3]]
}

/// A signing key: its name and Ed25519 key pair.
pub struct Signer {
    name: String,
    pair: Ed25519KeyPair,
    id: [u8; 4],
    /// The key in its text form (it holds the seed).
    text: String,
}

impl std::fmt::Debug for Signer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Signer").field("name", &self.name).field("id", &hex::encode(self.id)).finish()
    }
}

impl Signer {
    /// A new random key named `name`.
    pub fn generate(name: &str) -> Result<Signer, NoteError> {
        use ring::rand::SecureRandom;
        check_name(name, "signer")?;
        let mut seed = [0u8; 32];
        ring::rand::SystemRandom::new()
            .fill(&mut seed)
            .map_err(|_| NoteError::Key { what: "signer", why: "no randomness available".into() })?;
        Signer::from_seed(name, &seed)
    }

    fn from_seed(name: &str, seed: &[u8]) -> Result<Signer, NoteError> {
        let pair = Ed25519KeyPair::from_seed_unchecked(seed)
            .map_err(|_| NoteError::Key { what: "signer", why: "bad Ed25519 seed".into() })?;
        let id = key_id(name, pair.public_key().as_ref());
        let mut raw = vec![ALG_ED25519];
        raw.extend_from_slice(seed);
        let text = format!("PRIVATE+KEY+{name}+{}+{}", hex::encode(id), B64.encode(raw));
        Ok(Signer { name: name.to_owned(), pair, id, text })
    }

    /// Reads `PRIVATE+KEY+<name>+<id>+<base64>` (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Signer, NoteError> {
        let bad = |why: &str| NoteError::Key { what: "signer", why: why.to_owned() };
        let rest = text
            .trim()
            .strip_prefix("PRIVATE+KEY+")
            .ok_or_else(|| bad("it does not start with PRIVATE+KEY+"))?;
        // The key is base64, which may hold '+' itself.
        let mut parts = rest.splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("expected PRIVATE+KEY+<name>+<id>+<key>"));
        };
        check_name(name, "signer")?;
        let raw = B64.decode(key).map_err(|_| bad("the key is not base64"))?;
        let (&alg, seed) = raw.split_first().ok_or_else(|| bad("the key is empty"))?;
        if alg != ALG_ED25519 || seed.len() != 32 {
            return Err(bad("not an Ed25519 key"));
        }
        let signer = Signer::from_seed(name, seed)?;
        if hex::encode(signer.id) != id {
            return Err(bad("the key id does not match the key"));
        }
        Ok(signer)
    }

    /// The key in its text form (secret).
    pub fn to_text(&self) -> String {
        self.text.clone()
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The matching verifier.
    pub fn verifier(&self) -> Verifier {
        let public: [u8; 32] = self.pair.public_key().as_ref().try_into().unwrap_or([0; 32]);
        Verifier { name: self.name.clone(), id: self.id, public }
    }

    /// The signature line for `text` (a note's text, ending in a newline).
    pub fn sign_line(&self, text: &str) -> String {
        let sig = self.pair.sign(text.as_bytes());
        let mut raw = self.id.to_vec();
        raw.extend_from_slice(sig.as_ref());
        format!("— {} {}\n", self.name, B64.encode(raw))
    }
}

/// A key that checks signatures: name, id and Ed25519 public key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verifier {
    name: String,
    id: [u8; 4],
    public: [u8; 32],
}

impl Verifier {
    /// Reads `<name>+<id>+<base64>` (surrounding whitespace ignored).
    pub fn parse(text: &str) -> Result<Verifier, NoteError> {
        let bad = |why: &str| NoteError::Key { what: "verifier", why: why.to_owned() };
        let text = text.trim();
        if text.starts_with("PRIVATE+") {
            return Err(bad("this is the private (signing) key; give the .pub file"));
        }
        // The key is base64, which may hold '+' itself.
        let mut parts = text.splitn(3, '+');
        let (Some(name), Some(id), Some(key)) = (parts.next(), parts.next(), parts.next()) else {
            return Err(bad("expected <name>+<id>+<key>"));
        };
        check_name(name, "verifier")?;
        let raw = B64.decode(key).map_err(|_| bad("the key is not base64"))?;
        let (&alg, public) = raw.split_first().ok_or_else(|| bad("the key is empty"))?;
        let public: [u8; 32] = match (alg, public.try_into()) {
            (ALG_ED25519, Ok(p)) => p,
            _ => return Err(bad("not an Ed25519 key")),
        };
        let v = Verifier { name: name.to_owned(), id: key_id(name, &public), public };
        if hex::encode(v.id) != id {
            return Err(bad("the key id does not match the key"));
        }
        Ok(v)
    }

    /// The key in its text form.
    pub fn to_text(&self) -> String {
        let mut raw = vec![ALG_ED25519];
        raw.extend_from_slice(&self.public);
        format!("{}+{}+{}", self.name, hex::encode(self.id), B64.encode(raw))
    }

    /// The name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Checks that `note` carries a valid signature by this key over its text.
    pub fn verify(&self, note: &Note) -> Result<(), NoteError> {
        let mut found = false;
        for (name, raw) in &note.signatures {
            if name != &self.name || raw.len() != 4 + 64 || raw[..4] != self.id {
                continue;
            }
            found = true;
            if UnparsedPublicKey::new(&ED25519, &self.public).verify(note.text.as_bytes(), &raw[4..]).is_ok()
            {
                return Ok(());
            }
        }
        let who = format!("{}+{}", self.name, hex::encode(self.id));
        Err(if found { NoteError::BadSignature(who) } else { NoteError::Unsigned(who) })
    }
}

/// A note: its text (ending in a newline) and its signatures (key name, raw bytes).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    /// The signed text.
    pub text: String,
    /// (key name, key id || signature) per signature line.
    pub signatures: Vec<(String, Vec<u8>)>,
}

impl Note {
    /// Reads a note: text, a blank line, signature lines. A note without a blank line
    /// and signatures (an unsigned checkpoint) is all text.
    pub fn parse(s: &str) -> Result<Note, NoteError> {
        let bad = |why: &str| NoteError::Checkpoint(why.to_owned());
        let Some(split) = s.rfind("\n\n") else {
            return if s.ends_with('\n') {
                Ok(Note { text: s.to_owned(), signatures: Vec::new() })
            } else {
                Err(bad("it does not end with a newline"))
            };
        };
        let (text, sigs) = (&s[..split + 1], &s[split + 2..]);
        if !sigs.ends_with('\n') {
            return Err(bad("the signatures do not end with a newline"));
        }
        let mut signatures = Vec::new();
        for line in sigs.lines() {
            let rest =
                line.strip_prefix("— ").ok_or_else(|| bad("a signature line does not start with \"— \""))?;
            let (name, sig) = rest.split_once(' ').ok_or_else(|| bad("a signature line has no signature"))?;
            let raw = B64.decode(sig).map_err(|_| bad("a signature is not base64"))?;
            if raw.len() < 4 {
                return Err(bad("a signature is too short"));
            }
            signatures.push((name.to_owned(), raw));
        }
        Ok(Note { text: text.to_owned(), signatures })
    }

    /// The note as text: its text, and if signed, a blank line and the signature lines.
    pub fn to_text(&self) -> String {
        let mut out = self.text.clone();
        if !self.signatures.is_empty() {
            out.push('\n');
            for (name, raw) in &self.signatures {
                out.push_str(&format!("— {name} {}\n", B64.encode(raw)));
            }
        }
        out
    }
}

/// A checkpoint: the log's origin line, a tree size and its root hash, and when.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checkpoint {
    /// Names the log (first line).
    pub origin: String,
    /// Leaves in the tree.
    pub size: u64,
    /// The tree's root hash.
    pub root: Hash,
    /// When it was made (RFC 3339), from the `time` extension line.
    pub time: Option<String>,
}

impl Checkpoint {
    /// The checkpoint's text (a note's text).
    pub fn to_text(&self) -> String {
        let mut t = format!("{}\n{}\n{}\n", self.origin, self.size, B64.encode(self.root));
        if let Some(time) = &self.time {
            t.push_str(&format!("time {time}\n"));
        }
        t
    }

    /// Reads a checkpoint from a note's text.
    pub fn parse(text: &str) -> Result<Checkpoint, NoteError> {
        let bad = |why: &str| NoteError::Checkpoint(why.to_owned());
        let mut lines = text.lines();
        let origin = lines.next().filter(|o| !o.is_empty()).ok_or_else(|| bad("no origin line"))?;
        let size = lines.next().ok_or_else(|| bad("no tree size"))?;
        if size.is_empty()
            || !size.bytes().all(|b| b.is_ascii_digit())
            || (size.len() > 1 && size.starts_with('0'))
        {
            return Err(bad("the tree size is not a decimal number"));
        }
        let size: u64 = size.parse().map_err(|_| bad("the tree size is too large"))?;
        let root = B64
            .decode(lines.next().ok_or_else(|| bad("no root hash"))?)
            .map_err(|_| bad("the root hash is not base64"))?;
        let root: Hash = root.try_into().map_err(|_| bad("the root hash is not 32 bytes"))?;
        let mut time = None;
        for ext in lines {
            if ext.is_empty() {
                return Err(bad("an empty extension line"));
            }
            if let Some(t) = ext.strip_prefix("time ") {
                time = Some(t.to_owned());
            }
        }
        Ok(Checkpoint { origin: origin.to_owned(), size, root, time })
    }

    /// The checkpoint as a note, signed by `signer` if given.
    pub fn sign(&self, signer: Option<&Signer>) -> String {
        let text = self.to_text();
        match signer {
            Some(s) => format!("{text}\n{}", s.sign_line(&text)),
            None => text,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A key written out and read back signs and verifies; the public key file cannot be
    /// taken for the private one and the other way round; bad ids are refused.
    #[test]
    fn keys_round_trip() {
        let signer = Signer::generate("robotsgate-audit").unwrap();
        let text = signer.to_text();
        assert!(text.starts_with("PRIVATE+KEY+robotsgate-audit+"), "{text}");
        let again = Signer::parse(&format!("{text}\n")).unwrap();
        assert_eq!(again.verifier(), signer.verifier());
        let public = signer.verifier().to_text();
        assert_eq!(Verifier::parse(&public).unwrap(), signer.verifier());
        assert!(Verifier::parse(&text).is_err());
        assert!(Signer::parse(&public).is_err());
        let mut wrong_id = public.clone();
        wrong_id.replace_range(17..25, "00000000");
        assert!(Verifier::parse(&wrong_id).is_err(), "{wrong_id}");
        assert!(Signer::generate("has space").is_err());
        assert!(Signer::generate("a+b").is_err());
    }

    /// A signed checkpoint reads back, verifies with its key, and fails with another key
    /// or with a changed text; an unsigned one reads back and says it is unsigned.
    #[test]
    fn checkpoints_sign_and_verify() {
        let signer = Signer::generate("k").unwrap();
        let cp = Checkpoint {
            origin: "robotsgate/audit.jsonl".into(),
            size: 1234,
            root: super::super::merkle::leaf_hash(b"x"),
            time: Some("2026-11-25T10:00:00.000Z".into()),
        };
        let signed = cp.sign(Some(&signer));
        let note = Note::parse(&signed).unwrap();
        assert_eq!(note.to_text(), signed);
        assert_eq!(Checkpoint::parse(&note.text).unwrap(), cp);
        signer.verifier().verify(&note).unwrap();
        let other = Signer::generate("k").unwrap().verifier();
        assert!(matches!(other.verify(&note), Err(NoteError::Unsigned(_))), "same name, other key id");
        let tampered = Note { text: note.text.replace("1234", "1235"), ..note.clone() };
        assert!(matches!(signer.verifier().verify(&tampered), Err(NoteError::BadSignature(_))));
        let unsigned = Note::parse(&cp.sign(None)).unwrap();
        assert!(unsigned.signatures.is_empty());
        assert!(matches!(signer.verifier().verify(&unsigned), Err(NoteError::Unsigned(_))));
        for bad in ["", "o\n", "o\n01\nAAAA\n", "o\n1\nnot base64!\n", "o\n1\nAAAA\n"] {
            assert!(Checkpoint::parse(bad).is_err(), "{bad:?}");
        }
    }

    /// The example keys and note of Go's golang.org/x/mod/sumdb/note: the keys read, the
    /// signature verifies, and signing the same text gives the same bytes (Ed25519 is
    /// deterministic): the formats are the same.
    #[test]
    fn go_note_example() {
        let verifier = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW";
        let signer = "PRIVATE+KEY+PeterNeumann+c74f20a3+AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz";
        let text = "If you think cryptography is the answer to your problem,\n\
                    then you don't know what your problem is.\n";
        let line = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n";
        let v = Verifier::parse(verifier).unwrap();
        assert_eq!(v.to_text(), verifier);
        let note = Note::parse(&format!("{text}\n{line}")).unwrap();
        v.verify(&note).unwrap();
        let s = Signer::parse(signer).unwrap();
        assert_eq!(s.to_text(), signer);
        assert_eq!(s.verifier(), v);
        assert_eq!(s.sign_line(text), line);
    }
}
