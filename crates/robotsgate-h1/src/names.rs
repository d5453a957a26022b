//! Header names as heads carry them: the few dozen names nearly every request and response
//! has are matched against a short list first, by length and then byte by byte in either
//! case, and only the others go through `http`'s full reading. The answer is the same
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

/// `name` among the common names, in any case.
fn common(name: &[u8]) -> Option<&'static HeaderName> {
    let same_length: &[(&[u8], HeaderName)] = match name.len() {
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
    same_length.iter().find(|(spelt, _)| spelt.eq_ignore_ascii_case(name)).map(|(_, known)| known)
}

// The common names by length, each list in rough order of how often heads carry them.
static LEN_2: [(&[u8], HeaderName); 1] = [(b"te", TE)];
static LEN_3: [(&[u8], HeaderName); 2] = [(b"via", VIA), (b"age", AGE)];
static LEN_4: [(&[u8], HeaderName); 5] =
    [(b"host", HOST), (b"date", DATE), (b"etag", ETAG), (b"vary", VARY), (b"link", LINK)];
static LEN_5: [(&[u8], HeaderName); 2] = [(b"range", RANGE), (b"allow", ALLOW)];
static LEN_6: [(&[u8], HeaderName); 6] = [
    (b"accept", ACCEPT),
    (b"server", SERVER),
    (b"cookie", COOKIE),
    (b"origin", ORIGIN),
    (b"pragma", PRAGMA),
    (b"expect", EXPECT),
];
static LEN_7: [(&[u8], HeaderName); 5] = [
    (b"referer", REFERER),
    (b"expires", EXPIRES),
    (b"upgrade", UPGRADE),
    (b"alt-svc", ALT_SVC),
    (b"trailer", TRAILER),
];
static LEN_8: [(&[u8], HeaderName); 2] = [(b"location", LOCATION), (b"if-range", IF_RANGE)];
static LEN_10: [(&[u8], HeaderName); 3] =
    [(b"user-agent", USER_AGENT), (b"connection", CONNECTION), (b"set-cookie", SET_COOKIE)];
static LEN_11: [(&[u8], HeaderName); 1] = [(b"retry-after", RETRY_AFTER)];
static LEN_12: [(&[u8], HeaderName); 1] = [(b"content-type", CONTENT_TYPE)];
static LEN_13: [(&[u8], HeaderName); 6] = [
    (b"last-modified", LAST_MODIFIED),
    (b"accept-ranges", ACCEPT_RANGES),
    (b"cache-control", CACHE_CONTROL),
    (b"if-none-match", IF_NONE_MATCH),
    (b"authorization", AUTHORIZATION),
    (b"content-range", CONTENT_RANGE),
];
static LEN_14: [(&[u8], HeaderName); 1] = [(b"content-length", CONTENT_LENGTH)];
static LEN_15: [(&[u8], HeaderName); 2] =
    [(b"accept-encoding", ACCEPT_ENCODING), (b"accept-language", ACCEPT_LANGUAGE)];
static LEN_16: [(&[u8], HeaderName); 1] = [(b"content-encoding", CONTENT_ENCODING)];
static LEN_17: [(&[u8], HeaderName); 2] =
    [(b"transfer-encoding", TRANSFER_ENCODING), (b"if-modified-since", IF_MODIFIED_SINCE)];
static LEN_19: [(&[u8], HeaderName); 2] =
    [(b"proxy-authorization", PROXY_AUTHORIZATION), (b"content-disposition", CONTENT_DISPOSITION)];

#[cfg(test)]
mod tests {
    use super::*;

    const LISTS: [&[(&[u8], HeaderName)]; 16] = [
        &LEN_2, &LEN_3, &LEN_4, &LEN_5, &LEN_6, &LEN_7, &LEN_8, &LEN_10, &LEN_11, &LEN_12, &LEN_13, &LEN_14,
        &LEN_15, &LEN_16, &LEN_17, &LEN_19,
    ];

    #[test]
    fn each_common_name_is_the_one_http_reads_in_any_case() {
        let mut seen = 0;
        for list in LISTS {
            for (spelt, known) in list {
                assert_eq!(spelt.len(), known.as_str().len());
                assert_eq!(*spelt, known.as_str().as_bytes(), "the list spells {known} as http does");
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
    fn other_names_are_read_by_http_and_bad_ones_refused_alike() {
        for name in
            [&b"x-request-id"[..], b"X-Forwarded-For", b"sec-fetch-mode", b"keep-alive", b"Hosts", b"hos"]
        {
            assert_eq!(common(name), None);
            assert_eq!(header_name(name).unwrap(), HeaderName::from_bytes(name).unwrap());
        }
        // Near misses of common names, as strangers send them: the same verdict as http's.
        for name in
            [&b""[..], b"ho st", b"host:", b"h\xc3\xb6st", b"dat\xc5", b"content-length\0", b"user agent"]
        {
            assert!(common(name).is_none());
            assert_eq!(header_name(name).is_ok(), HeaderName::from_bytes(name).is_ok(), "{name:?}");
        }
    }
}
