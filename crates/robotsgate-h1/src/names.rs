//! Header names as heads carry them: the few dozen names nearly every request and response
//! has are matched against a short list first, by length and then eight bytes at a time in
//! either case, and only the others go through `http`'s full reading. The answer is the same
//! [`HeaderName`] either way; the short list is only quicker (most heads have nothing but
//! these names, and `http`'s reader is one large function that every name goes through).

use http::HeaderName;
use http::header::{
    ACCEPT, ACCEPT_ENCODING, ACCEPT_LANGUAGE, ACCEPT_RANGES, AGE, ALLOW, ALT_SVC, AUTHORIZATION,
    CACHE_CONTROL, CONNECTION, CONTENT_DISPOSITION, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE,
    CONTENT_TYPE, COOKIE, DATE, ETAG, EXPECT, EXPIRES, HOST, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE,
    InvalidHeaderName, LAST_MODIFIED, LINK, LOCATION, ORIGIN, PRAGMA, PROXY_AUTHORIZATION, RANGE, REFERER,
    RETRY_AFTER, SERVER, SET_COOKIE, TE, TRAILER, TRANSFER_ENCODING, UPGRADE, USER_AGENT, VARY, VIA,
};

/// The header name `name` spells, in any case: what `HeaderName::from_bytes` gives.
pub(crate) fn header_name(name: &[u8]) -> Result<HeaderName, InvalidHeaderName> {
    match common(name) {
        Some(known) => Ok(known.clone()),
        None => HeaderName::from_bytes(name),
    }
}

/// The longest common name, in bytes.
const LONGEST: usize = 19;
/// Words of 8 bytes a common name takes, at most.
const WORDS: usize = LONGEST.div_ceil(8);

/// A common name as words of 8 bytes (little-endian, zero after its end), with the bits
/// that tell a letter's two cases apart: a name's words, those bits set, equal these
/// words exactly when it is this name in any case.
struct Known {
    words: [u64; WORDS],
    case: [u64; WORDS],
    name: HeaderName,
}

impl Known {
    /// `spelt` is lower case, letters and `-`, at most [`LONGEST`] bytes.
    const fn new(spelt: &[u8], name: HeaderName) -> Known {
        let (mut words, mut case) = ([0u64; WORDS], [0u64; WORDS]);
        let mut i = 0;
        while i < spelt.len() {
            words[i / 8] |= (spelt[i] as u64) << (8 * (i % 8));
            if spelt[i].is_ascii_lowercase() {
                case[i / 8] |= 0x20 << (8 * (i % 8));
            }
            i += 1;
        }
        Known { words, case, name }
    }

    fn is(&self, words: &[u64; WORDS]) -> bool {
        (0..WORDS).all(|i| (words[i] | self.case[i]) == self.words[i])
    }
}

/// `name` among the common names, in any case.
fn common(name: &[u8]) -> Option<&'static HeaderName> {
    let same_length: &[Known] = match name.len() {
        2 => &LEN_2,
        3 => &LEN_3,
        4 => &LEN_4,
        5 => &LEN_5,
        6 => &LEN_6,
        7 => &LEN_7,
        8 => &LEN_8,
        10 => &LEN_10,
        11 => &LEN_11,
        12 => &LEN_12,
        13 => &LEN_13,
        14 => &LEN_14,
        15 => &LEN_15,
        16 => &LEN_16,
        17 => &LEN_17,
        19 => &LEN_19,
        _ => return None,
    };
    let mut padded = [0u8; WORDS * 8];
    padded[..name.len()].copy_from_slice(name);
    let words: [u64; WORDS] = std::array::from_fn(|i| {
        let mut word = [0u8; 8];
        word.copy_from_slice(&padded[8 * i..8 * i + 8]);
        u64::from_le_bytes(word)
    });
    same_length.iter().find(|known| known.is(&words)).map(|known| &known.name)
}

// The common names by length, each list in rough order of how often heads carry them.
static LEN_2: [Known; 1] = [Known::new(b"te", TE)];
static LEN_3: [Known; 2] = [Known::new(b"via", VIA), Known::new(b"age", AGE)];
static LEN_4: [Known; 5] = [
    Known::new(b"host", HOST),
    Known::new(b"date", DATE),
    Known::new(b"etag", ETAG),
    Known::new(b"vary", VARY),
    Known::new(b"link", LINK),
];
static LEN_5: [Known; 2] = [Known::new(b"range", RANGE), Known::new(b"allow", ALLOW)];
static LEN_6: [Known; 6] = [
    Known::new(b"accept", ACCEPT),
    Known::new(b"server", SERVER),
    Known::new(b"cookie", COOKIE),
    Known::new(b"origin", ORIGIN),
    Known::new(b"pragma", PRAGMA),
    Known::new(b"expect", EXPECT),
];
static LEN_7: [Known; 5] = [
    Known::new(b"referer", REFERER),
    Known::new(b"expires", EXPIRES),
    Known::new(b"upgrade", UPGRADE),
    Known::new(b"alt-svc", ALT_SVC),
    Known::new(b"trailer", TRAILER),
];
static LEN_8: [Known; 2] = [Known::new(b"location", LOCATION), Known::new(b"if-range", IF_RANGE)];
static LEN_10: [Known; 3] = [
    Known::new(b"user-agent", USER_AGENT),
    Known::new(b"connection", CONNECTION),
    Known::new(b"set-cookie", SET_COOKIE),
];
static LEN_11: [Known; 1] = [Known::new(b"retry-after", RETRY_AFTER)];
static LEN_12: [Known; 1] = [Known::new(b"content-type", CONTENT_TYPE)];
static LEN_13: [Known; 6] = [
    Known::new(b"last-modified", LAST_MODIFIED),
    Known::new(b"accept-ranges", ACCEPT_RANGES),
    Known::new(b"cache-control", CACHE_CONTROL),
    Known::new(b"if-none-match", IF_NONE_MATCH),
    Known::new(b"authorization", AUTHORIZATION),
    Known::new(b"content-range", CONTENT_RANGE),
];
static LEN_14: [Known; 1] = [Known::new(b"content-length", CONTENT_LENGTH)];
static LEN_15: [Known; 2] =
    [Known::new(b"accept-encoding", ACCEPT_ENCODING), Known::new(b"accept-language", ACCEPT_LANGUAGE)];
static LEN_16: [Known; 1] = [Known::new(b"content-encoding", CONTENT_ENCODING)];
static LEN_17: [Known; 2] = [
    Known::new(b"transfer-encoding", TRANSFER_ENCODING),
    Known::new(b"if-modified-since", IF_MODIFIED_SINCE),
];
static LEN_19: [Known; 2] = [
    Known::new(b"proxy-authorization", PROXY_AUTHORIZATION),
    Known::new(b"content-disposition", CONTENT_DISPOSITION),
];

#[cfg(test)]
mod tests {
    use super::*;

    const LISTS: [&[Known]; 16] = [
        &LEN_2, &LEN_3, &LEN_4, &LEN_5, &LEN_6, &LEN_7, &LEN_8, &LEN_10, &LEN_11, &LEN_12, &LEN_13, &LEN_14,
        &LEN_15, &LEN_16, &LEN_17, &LEN_19,
    ];

    #[test]
    fn each_common_name_is_the_one_http_reads_in_any_case() {
        let mut seen = 0;
        for list in LISTS {
            for Known { name: known, .. } in list {
                let spelt = known.as_str().as_bytes();
                assert!(spelt.len() <= LONGEST);
                let upper = spelt.to_ascii_uppercase();
                let title: Vec<u8> = spelt
                    .iter()
                    .enumerate()
                    .map(|(i, b)| if i == 0 || spelt[i - 1] == b'-' { b.to_ascii_uppercase() } else { *b })
                    .collect();
                for form in [spelt.to_vec(), upper, title] {
                    assert_eq!(common(&form), Some(known), "{:?}", String::from_utf8_lossy(&form));
                    assert_eq!(header_name(&form).unwrap(), HeaderName::from_bytes(&form).unwrap());
                }
                seen += 1;
            }
        }
        assert_eq!(seen, 42);
    }

    #[test]
    fn every_one_byte_change_to_a_common_name_reads_as_http_reads_it() {
        for list in LISTS {
            for Known { name: known, .. } in list {
                let spelt = known.as_str().as_bytes();
                for at in 0..spelt.len() {
                    for byte in 0..=u8::MAX {
                        let mut name = spelt.to_vec();
                        name[at] = byte;
                        assert_eq!(header_name(&name).ok(), HeaderName::from_bytes(&name).ok(), "{name:?}");
                    }
                }
            }
        }
    }

    #[test]
    fn other_names_are_read_by_http_and_bad_ones_refused_alike() {
        for name in
            [&b"x-request-id"[..], b"X-Forwarded-For", b"sec-fetch-mode", b"keep-alive", b"Hosts", b"hos"]
        {
            assert_eq!(common(name), None);
            assert_eq!(header_name(name).unwrap(), HeaderName::from_bytes(name).unwrap());
        }
        // Near misses of common names, as strangers send them: the same verdict as http's.
        for name in [
            &b""[..],
            b"ho st",
            b"host:",
            b"h\xc3\xb6st",
            b"dat\xc5",
            b"content-length\0",
            b"content\rlength",
            b"user agent",
            b"CONTENT_LENGTH",
        ] {
            assert!(common(name).is_none());
            assert_eq!(header_name(name).is_ok(), HeaderName::from_bytes(name).is_ok(), "{name:?}");
        }
    }
}
