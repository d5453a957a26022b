//! The pure part against published vectors (RFC 9421 Appendix B.2.6, the webbotauth
//! draft's test vectors) and against itself (signer ↔ examiner), case by case.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use base64::Engine as _;
use robotsgate_rep::sf::Dictionary;
use serde_json::json;

use super::base::signature_base;
use super::check::combine;
use super::directory::{DirectoryResponse, check_response_signatures, content_digest};
use super::*;

/// RFC 9421 Appendix B.1.4, "Example Ed25519 Test Key" (PKCS#8, as the RFC prints it).
fn rfc9421_test_key() -> SigningKey {
    let der = base64::engine::general_purpose::STANDARD
        .decode("MC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF")
        .unwrap();
    SigningKey::from_pkcs8_der(&der).unwrap()
}

fn request(method: &str, uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
    let mut b = http::Request::builder().method(method).uri(uri);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    b.body(()).unwrap().into_parts().0
}

/// A configuration for the published vectors: their test key allowed, their century-long
/// validity too.
fn vector_config() -> VerifyConfig {
    VerifyConfig {
        allow_test_keys: true,
        max_validity: Duration::from_secs(200 * 365 * 86400),
        ..VerifyConfig::default()
    }
}

const T0: i64 = 1_735_689_600; // the drafts' `created`

/// RFC 9421 Appendix B.2.6, "Signing a Request Using ed25519": the signature base (the
/// RFC's, line wrapping of RFC 8792 undone) and the signature, over the test-request of
/// Appendix B.2 (its fields as the RFC gives them).
#[test]
fn rfc9421_b26_ed25519() {
    let parts = request(
        "POST",
        "/foo?param=Value&Pet=dog",
        &[
            ("host", "example.com"),
            ("date", "Tue, 20 Apr 2021 02:07:55 GMT"),
            ("content-type", "application/json"),
            (
                "content-digest",
                "sha-512=:WZDPaVn/7XgHaAy8pmojAkGWoRx2UFChF41A2svX+TaPm+AbwAgBWnrIiYllu7BNNyealdVLvRwEmTHWXvJwew==:",
            ),
            ("content-length", "18"),
        ],
    );
    let input = r#"sig-b26=("date" "@method" "@path" "@authority" "content-type" "content-length");created=1618884473;keyid="test-key-ed25519""#;
    let signature =
        "wqcAqbmYJ2ji2glfAMaRy4gruYYnx2nEFN2HN6jrnDnQCK1u02Gb04v9EDgwUPiu4A0w6vuQv5lIp5WPpBKRCw==";
    let expected_base = "\"date\": Tue, 20 Apr 2021 02:07:55 GMT\n\"@method\": POST\n\"@path\": /foo\n\
        \"@authority\": example.com\n\"content-type\": application/json\n\"content-length\": 18\n\
        \"@signature-params\": (\"date\" \"@method\" \"@path\" \"@authority\" \"content-type\" \"content-length\")\
        ;created=1618884473;keyid=\"test-key-ed25519\"";
    let dict = Dictionary::parse(input.as_bytes()).unwrap();
    let list = dict.get("sig-b26").unwrap().as_inner_list().unwrap();
    let mut base = String::new();
    signature_base(&mut base, &list, &Message::Request(RequestView::of(&parts)), 32).unwrap();
    assert_eq!(base, expected_base);
    let sig = base64::engine::general_purpose::STANDARD.decode(signature).unwrap();
    let key = rfc9421_test_key();
    assert!(key.public().verify(base.as_bytes(), &sig));
    // Ed25519 is deterministic: signing the base gives the RFC's signature.
    assert_eq!(key.sign(base.as_bytes()).as_slice(), sig.as_slice());
    // One octet changed in a covered field: no longer verifies.
    let altered = base.replace("18", "19");
    assert!(!key.public().verify(altered.as_bytes(), &sig));
}

/// draft-meunier-webbotauth-httpsig-protocol (editor's copy, github.com/thibmeu/
/// http-message-signatures-directory at a28dfe8), Test Vectors, "EdDSA Using Curve
/// edwards25519", "Signature-Agent Included Present on the Request": the dictionary form.
#[test]
fn draft_vector_dictionary_agent() {
    let parts = request(
        "GET",
        "/",
        &[
            ("host", "example.com"),
            ("signature-agent", r#"agent2="https://signature-agent.test""#),
            (
                "signature-input",
                r#"sig2=("@authority" "signature-agent";key="agent2");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=4889289600;nonce="n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==";tag="web-bot-auth""#,
            ),
            (
                "signature",
                "sig2=:RdNFx5Bj6au3YgAMQL/RzmUlZE8QZLIaXGRpw985hWnwPfMxT228NMk6ehRS1PSl4e8PhbNZACSanGdhEwYCCg==:",
            ),
        ],
    );
    let exam = examine(RequestView::of(&parts), T0 + 1, &vector_config());
    assert!(exam.others.is_empty(), "{:?}", exam.others);
    let c = &exam.candidates[0];
    assert_eq!(
        c.signature_base(),
        "\"@authority\": example.com\n\"signature-agent\";key=\"agent2\": \"https://signature-agent.test\"\n\
         \"@signature-params\": (\"@authority\" \"signature-agent\";key=\"agent2\");created=1735689600\
         ;keyid=\"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U\";alg=\"ed25519\";expires=4889289600\
         ;nonce=\"n9p433xm+NJ3ph3upfBIGmsuwHw387YV7Q/F+6BSpGCVjYCqQw6rznNA8PVVLySrAWsv0hQtFioQb6E1YsauiA==\";tag=\"web-bot-auth\""
    );
    assert_eq!(
        c.directory.as_str(),
        "https://signature-agent.test/.well-known/http-message-signatures-directory"
    );
    assert_eq!(c.label, "sig2");
    assert_eq!(c.verify(rfc9421_test_key().public()), Ok(()));
    // The same request at another authority does not verify.
    let mut moved = parts.clone();
    moved.headers.insert("host", "example.org".parse().unwrap());
    let exam = examine(RequestView::of(&moved), T0 + 1, &vector_config());
    assert_eq!(exam.candidates[0].verify(rfc9421_test_key().public()), Err(Failure::BadSignature));
    // Nor at the same host with a port that is none (found by fuzz/web_bot_auth): before,
    // the port was dropped as if it were the default one, and the signature verified.
    for host in ["example.com:99999", "example.com:x", "example.com:443x", "user@example.com:-1"] {
        let mut moved = parts.clone();
        moved.headers.insert("host", host.parse().unwrap());
        let exam = examine(RequestView::of(&moved), T0 + 1, &vector_config());
        assert!(exam.candidates.is_empty(), "{host}: {:?}", exam.candidates);
        assert!(
            matches!(&exam.others[..], [Verdict::Failed(Failure::Malformed(_) | Failure::Base(_))]),
            "{host}: {:?}",
            exam.others
        );
    }
    // An empty port, the default one, and IPv6 literals are authorities.
    for (host, want) in [
        ("example.com:", Some("example.com")),
        ("example.com:443", Some("example.com")),
        ("Example.COM:8443", Some("example.com:8443")),
        ("[::1]", Some("[::1]")),
        ("[::1]:8443", Some("[::1]:8443")),
        ("[::1]:x", None),
    ] {
        let mut moved = parts.clone();
        moved.headers.insert("host", host.parse().unwrap());
        assert_eq!(RequestView::of(&moved).authority().as_deref(), want, "{host}");
    }
    // With the default configuration the test key is refused before anything else.
    let exam = examine(RequestView::of(&parts), T0 + 1, &VerifyConfig::default());
    assert!(matches!(&exam.others[..], [Verdict::Failed(Failure::TestKey(_))]), "{:?}", exam.others);
}

/// The same draft, "Legacy Signature-Agent, sf-string": the bare string form, covered as
/// `"signature-agent"`.
#[test]
fn draft_vector_legacy_agent() {
    let parts = request(
        "GET",
        "/",
        &[
            ("host", "example.com"),
            ("signature-agent", r#""https://signature-agent.test""#),
            (
                "signature-input",
                r#"sig2=("@authority" "signature-agent");created=1735689600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";alg="ed25519";expires=1735693200;nonce="e8N7S2MFd/qrd6T2R3tdfAuuANngKI7LFtKYI/vowzk4lAZYadIX6wW25MwG7DCT9RUKAJ0qVkU0mEeLElW1qg==";tag="web-bot-auth""#,
            ),
            (
                "signature",
                "sig2=:jdq0SqOwHdyHr9+r5jw3iYZH6aNGKijYp/EstF4RQTQdi5N5YYKrD+mCT1HA1nZDsi6nJKuHxUi/5Syp3rLWBA==:",
            ),
        ],
    );
    let config = VerifyConfig { allow_test_keys: true, ..VerifyConfig::default() };
    let exam = examine(RequestView::of(&parts), T0 + 60, &config);
    assert!(exam.others.is_empty(), "{:?}", exam.others);
    let c = &exam.candidates[0];
    assert!(c.signature_base().starts_with(
        "\"@authority\": example.com\n\"signature-agent\": \"https://signature-agent.test\"\n\"@signature-params\": "
    ));
    assert_eq!(c.verify(rfc9421_test_key().public()), Ok(()));
    // An hour and ten seconds of skew later it has expired.
    let exam = examine(RequestView::of(&parts), 1_735_693_200 + 11, &config);
    assert!(matches!(&exam.others[..], [Verdict::Failed(Failure::Expired { .. })]), "{:?}", exam.others);
}

/// The same draft, "Signed Directory Response": the directory's possession proof.
#[test]
fn draft_vector_signed_directory_response() {
    let body = concat!(
        r#"{"keys":[{"kty":"OKP","crv":"Ed25519","kid":"poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U","#,
        r#""x":"JrQLj5P_89iXES9-vFgrIy29clF9CC_oPPsw3c5D0bs","use":"sig"}]}"#
    );
    assert_eq!(content_digest(body.as_bytes()), "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:");
    let req = request(
        "GET",
        "/.well-known/http-message-signatures-directory",
        &[("host", "signature-agent.test"), ("accept", MEDIA_TYPE)],
    );
    let mut headers = http::HeaderMap::new();
    for (k, v) in [
        ("content-digest", "sha-256=:CADMT2aBdV/rqQr/NIru64ERQkCobVvllA4V0fLFDu0=:"),
        (
            "signature-input",
            r#"binding=("@authority";req "content-digest");created=1735689600;expires=4889289600;keyid="poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U";tag="http-message-signatures-directory""#,
        ),
        (
            "signature",
            "binding=:l6P8R67tm3kujAxbHWio7ll01qrEZ0dKD/WWlGhNYEmTnFZM8Wt0VQ9zqGfvo7T/UMkBxsigzChM1Gpz7gOVBg==:",
        ),
    ] {
        headers.insert(k, v.parse().unwrap());
    }
    let check = |body: &str, now: i64| {
        let mut dir = Directory::parse(body.as_bytes(), 65536, 32, true).unwrap();
        let response =
            DirectoryResponse { status: http::StatusCode::OK, headers: &headers, body: body.as_bytes() };
        let proof = check_response_signatures(
            &mut dir,
            RequestView::of(&req),
            response,
            now,
            &vector_config(),
            ResponseSignatures::CheckWhenPresent,
        );
        (dir, proof)
    };
    let (dir, proof) = check(body, T0 + 1);
    assert_eq!(proof.valid, ["poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U"], "{proof:?}");
    assert!(dir.keys[0].proven);
    // Dated before its `created`: refused (a future-dated proof would outrank later fetches).
    let (dir, proof) = check(body, T0 - 3600);
    assert!(dir.keys.is_empty() && proof.invalid.len() == 1, "{proof:?}");
    // Another body under the same digest and signature: the digest does not match.
    let other = body.replace(r#""use":"sig""#, r#""use":"sig" "#);
    let (dir, proof) = check(&other, T0 + 1);
    assert!(dir.keys.is_empty(), "{proof:?}");
    assert!(proof.invalid[0].1.contains("Content-Digest"), "{proof:?}");
}

fn signer(agent: &str) -> (Arc<SigningKey>, RequestSigner) {
    let key = Arc::new(SigningKey::generate().unwrap());
    (key.clone(), RequestSigner::new(key, agent).unwrap())
}

fn signed(signer: &RequestSigner, uri: &str, created: i64) -> http::request::Parts {
    let mut p = request("GET", uri, &[]);
    signer.sign_with_nonce(&mut p, created, &format!("nonce-{created}")).unwrap();
    p
}

fn exam_at(parts: &http::request::Parts, now: i64) -> Examination {
    examine(RequestView::of(parts), now, &VerifyConfig::default())
}

fn failure(parts: &http::request::Parts, now: i64) -> Failure {
    match &exam_at(parts, now).others[..] {
        [Verdict::Failed(f)] => f.clone(),
        other => panic!("expected one failure, got {other:?}"),
    }
}

#[test]
fn signer_and_examiner_agree() {
    let (key, signer) = signer("https://bot.example");
    let mut p = request(
        "GET",
        "https://site.example:8443/a?b=c",
        &[
            ("signature", "sig1=:AAAA:"),
            ("signature-input", "sig1=();tag=\"x\""),
            ("signature-agent", "\"https://evil.example\""),
        ],
    );
    signer.sign(&mut p, SystemTime::now()).unwrap();
    // The client's own fields are replaced, not kept beside ours.
    assert_eq!(p.headers.get_all("signature").iter().count(), 1);
    assert_eq!(p.headers["signature-agent"], r#"sig1="https://bot.example""#);
    let exam = exam_at(&p, unix_seconds(SystemTime::now()));
    assert!(exam.others.is_empty(), "{:?}", exam.others);
    let c = &exam.candidates[0];
    assert_eq!(c.keyid, key.public().thumbprint());
    assert_eq!(c.expires - c.created, 60);
    assert!(c.signature_base().starts_with("\"@authority\": site.example:8443\n"));
    assert_eq!(c.verify(key.public()), Ok(()));
    // Another key with the same keyid cannot pass for it.
    let other = SigningKey::generate().unwrap();
    assert!(matches!(c.verify(other.public()), Err(Failure::UnknownKey { .. })));
    // Two signatures of one request differ by their nonce.
    let mut q = request("GET", "https://site.example:8443/a?b=c", &[]);
    signer.sign(&mut q, SystemTime::now()).unwrap();
    assert_ne!(p.headers["signature"], q.headers["signature"]);
}

#[test]
fn time_bounds() {
    let (_, signer) = signer("https://bot.example/keys.json");
    let p = signed(&signer, "https://site.example/", T0);
    assert_eq!(exam_at(&p, T0).candidates.len(), 1);
    // Within the skew (10 s) either side.
    assert_eq!(exam_at(&p, T0 - 10).candidates.len(), 1);
    assert_eq!(exam_at(&p, T0 + 70).candidates.len(), 1);
    assert!(matches!(failure(&p, T0 - 11), Failure::NotYetValid { .. }));
    assert!(matches!(failure(&p, T0 + 71), Failure::Expired { .. }));
    // A validity longer than a day.
    let long = RequestSigner::new(Arc::new(SigningKey::generate().unwrap()), "https://bot.example")
        .unwrap()
        .validity(Duration::from_secs(86_401));
    assert!(matches!(failure(&signed(&long, "https://site.example/", T0), T0), Failure::Validity(86_401)));
}

/// Replaces the `Signature-Input` and re-signs it with `key`, for cases the signer never
/// makes.
fn with_input(parts: &mut http::request::Parts, key: &SigningKey, input: &str) {
    let dict = Dictionary::parse(input.as_bytes()).unwrap();
    let (label, list) = dict.iter().next().map(|(l, m)| (l, m.as_inner_list().unwrap())).unwrap();
    let mut base = String::new();
    // Where the base cannot be made, neither could a signer: any 64 bytes will do.
    let sig = match signature_base(&mut base, &list, &Message::Request(RequestView::of(parts)), 32) {
        Ok(()) => key.sign(base.as_bytes()),
        Err(_) => [0; 64],
    };
    let sig = base64::engine::general_purpose::STANDARD.encode(sig);
    parts.headers.insert("signature-input", input.parse().unwrap());
    parts.headers.insert("signature", format!("{label}=:{sig}:").parse().unwrap());
}

#[test]
fn profile_requirements() {
    let (key, signer) = signer("https://bot.example");
    let kid = key.public().thumbprint().to_owned();
    let base = signed(&signer, "https://site.example/", T0);
    let case = |input: String| {
        let mut p = base.clone();
        with_input(&mut p, &key, &input);
        p
    };
    let sa = r#""signature-agent";key="sig1""#;
    let tail = format!(r#"keyid="{kid}";tag="web-bot-auth""#);
    assert!(matches!(
        failure(&case(format!(r#"sig1=("@authority" {sa});expires={};{tail}"#, T0 + 60)), T0),
        Failure::MissingParameter("created")
    ));
    assert!(matches!(
        failure(&case(format!(r#"sig1=("@authority" {sa});created={T0};{tail}"#)), T0),
        Failure::MissingParameter("expires")
    ));
    assert!(matches!(
        failure(
            &case(format!(r#"sig1=("@authority" {sa});created={T0};expires={};tag="web-bot-auth""#, T0 + 60)),
            T0
        ),
        Failure::MissingParameter("keyid")
    ));
    assert!(matches!(
        failure(&case(format!(r#"sig1=("@authority" {sa});created="{T0}";expires={};{tail}"#, T0 + 60)), T0),
        Failure::Malformed(_)
    ));
    assert!(matches!(
        failure(
            &case(format!(
                r#"sig1=("@authority" {sa});created={T0};expires={};alg="rsa-pss-sha512";{tail}"#,
                T0 + 60
            )),
            T0
        ),
        Failure::UnsupportedAlgorithm(_)
    ));
    assert!(matches!(
        failure(&case(format!(r#"sig1=("@method" {sa});created={T0};expires={};{tail}"#, T0 + 60)), T0),
        Failure::NotCovered("@authority or @target-uri")
    ));
    assert!(matches!(
        failure(&case(format!(r#"sig1=("@authority");created={T0};expires={};{tail}"#, T0 + 60)), T0),
        Failure::NotCovered("signature-agent")
    ));
    assert!(matches!(
        failure(
            &case(format!(
                r#"sig1=("@authority" "signature-agent";key="other");created={T0};expires={};{tail}"#,
                T0 + 60
            )),
            T0
        ),
        Failure::BadAgent(_)
    ));
    assert!(matches!(
        failure(
            &case(format!(
                r#"sig1=("@authority" {sa} "@request-target");created={T0};expires={};{tail}"#,
                T0 + 60
            )),
            T0
        ),
        Failure::Base(BaseError::Unsupported(_))
    ));
    // @target-uri instead of @authority is accepted, and more components too.
    let p = case(format!(
        r#"sig1=("@target-uri" {sa} "@method" "@path");created={T0};expires={};{tail}"#,
        T0 + 60
    ));
    let exam = exam_at(&p, T0);
    assert_eq!(exam.candidates[0].verify(key.public()), Ok(()));
    // Another tag: not a Web Bot Auth signature at all.
    let p = case(format!(
        r#"sig1=("@authority" {sa});created={T0};expires={};keyid="{kid}";tag="other""#,
        T0 + 60
    ));
    assert_eq!(exam_at(&p, T0).others, [Verdict::Unverified(Unverified::NotWebBotAuth)]);
}

#[test]
fn agent_forms() {
    let (key, signer) = signer("https://bot.example");
    let p = signed(&signer, "https://site.example/", T0);
    // No Signature-Agent, none covered: unverified (nothing names a key).
    let mut q = p.clone();
    q.headers.remove("signature-agent");
    let input = format!(
        r#"sig1=("@authority");created={T0};expires={};keyid="{}";tag="web-bot-auth""#,
        T0 + 60,
        key.public().thumbprint()
    );
    with_input(&mut q, &key, &input);
    assert_eq!(exam_at(&q, T0).others, [Verdict::Unverified(Unverified::NoAgent)]);
    // Covered but removed on the way: the base cannot be made.
    let mut q = p.clone();
    q.headers.remove("signature-agent");
    assert!(matches!(failure(&q, T0), Failure::Base(BaseError::Missing(_))));
    // The member changed on the way: the signature no longer verifies.
    let mut q = p.clone();
    q.headers.insert("signature-agent", r#"sig1="https://evil.example""#.parse().unwrap());
    let exam = exam_at(&q, T0);
    assert_eq!(
        exam.candidates[0].directory.as_str(),
        "https://evil.example/.well-known/http-message-signatures-directory"
    );
    assert_eq!(exam.candidates[0].verify(key.public()), Err(Failure::BadSignature));
    // A member added beside ours changes nothing.
    let mut q = p.clone();
    q.headers.insert(
        "signature-agent",
        r#"sig1="https://bot.example", sig9="https://x.example""#.parse().unwrap(),
    );
    assert_eq!(exam_at(&q, T0).candidates[0].verify(key.public()), Ok(()));
    // Not https; unsupported type; not a dictionary.
    for (agent, want) in [
        (r#"sig1="http://bot.example""#, "bad_agent"),
        (r#"sig1="https://bot.example";type=cimd"#, "agent_type"),
        (r#"sig1=bot"#, "bad_agent"),
        (r#"sig1="#, "malformed"),
    ] {
        let mut q = p.clone();
        q.headers.insert("signature-agent", agent.parse().unwrap());
        let exam = exam_at(&q, T0);
        let class = match &exam.others[..] {
            [Verdict::Failed(f)] => f.class(),
            [Verdict::Unverified(u)] => u.class(),
            other => panic!("{agent}: {other:?}"),
        };
        assert_eq!(class, want, "{agent}");
    }
}

#[test]
fn bounds_and_malformed_fields() {
    let (_, signer) = signer("https://bot.example");
    let p = signed(&signer, "https://site.example/", T0);
    let mut q = p.clone();
    q.headers.insert("signature-input", format!("sig1=({})", "\"a\" ".repeat(3000)).parse().unwrap());
    assert!(matches!(failure(&q, T0), Failure::TooLarge("signature-input")));
    let mut q = p.clone();
    let many: Vec<String> = (0..9).map(|i| format!("s{i}=();tag=\"web-bot-auth\"")).collect();
    q.headers.insert("signature-input", many.join(", ").parse().unwrap());
    assert!(matches!(failure(&q, T0), Failure::TooMany(8)));
    let mut q = p.clone();
    q.headers.insert("signature-input", "sig1=(".parse().unwrap());
    assert!(matches!(failure(&q, T0), Failure::Malformed(_)));
    let mut q = p.clone();
    q.headers.remove("signature");
    assert!(matches!(failure(&q, T0), Failure::NoSignatureValue(_)));
    let mut q = p.clone();
    q.headers.insert("signature", "sig1=:AAAA:".parse().unwrap());
    assert!(matches!(failure(&q, T0), Failure::BadSignature));
    // A draft-cavage `Signature` alone is someone else's scheme.
    let q = request("GET", "/", &[("signature", r#"keyId="x",headers="date",signature="abc""#)]);
    assert_eq!(exam_at(&q, T0).others, [Verdict::Unverified(Unverified::NoSignature)]);
    assert_eq!(
        combine(exam_at(&request("GET", "/", &[]), T0).others),
        Verdict::Unverified(Unverified::NoSignature)
    );
    // Several signature lines make one field; the signature still found.
    let mut q = p.clone();
    let input = q.headers.remove("signature-input").unwrap();
    q.headers.append("signature-input", r#"other=("@method");tag="x""#.parse().unwrap());
    q.headers.append("signature-input", input);
    assert_eq!(exam_at(&q, T0).candidates.len(), 1);
}

#[test]
fn combine_prefers_verified_then_failed() {
    let v = Verdict::Verified(Verified {
        directory: "https://a/".into(),
        keyid: "k".into(),
        label: "sig1".into(),
        created: 0,
        expires: 1,
        nonce: None,
        proven: false,
        replay: ReplayStatus::Off,
        product_token: None,
    });
    let f = Verdict::Failed(Failure::BadSignature);
    let u = Verdict::Unverified(Unverified::NoAgent);
    assert_eq!(combine([u.clone(), f.clone(), v.clone()]), v);
    assert_eq!(combine([u.clone(), f.clone()]), f);
    assert_eq!(combine([u.clone()]), u);
}

#[test]
fn directory_urls() {
    let d = |v: &str, t: Option<&str>| DirectoryUrl::from_member(v, t);
    let origin = d("https://Bot.Example", None).unwrap();
    assert_eq!(origin.as_str(), "https://bot.example/.well-known/http-message-signatures-directory");
    assert!(origin.is_well_known());
    assert_eq!(origin.authority(), "bot.example");
    let full = d("https://bot.example:8443/keys/dir.json?v=2#frag", None).unwrap();
    assert_eq!(full.as_str(), "https://bot.example:8443/keys/dir.json?v=2");
    assert_eq!(&**full.identifier(), "https://bot.example:8443/keys/dir.json?v=2");
    // Another query is another directory (a host may serve a tenant's keys for it).
    let other = d("https://bot.example:8443/keys/dir.json?v=3", None).unwrap();
    assert_ne!(other.identifier(), full.identifier());
    assert_ne!(d("https://bot.example:8443/keys/dir.json", None).unwrap().identifier(), full.identifier());
    assert_ne!(d("https://bot.example/?x=1", None).unwrap(), origin, "not the well-known directory");
    assert_eq!(full.authority(), "bot.example:8443");
    assert!(!full.is_well_known());
    assert_eq!(d("https://bot.example:443/", Some("directory")).unwrap(), origin);
    assert_eq!(d("https://bot.example/", Some("jwks_uri")).unwrap().as_str(), "https://bot.example/");
    assert!(matches!(d("http://bot.example", None), Err(AgentError::NotHttps(_))));
    assert!(matches!(d("https://u:p@bot.example", None), Err(AgentError::Invalid(_))));
    assert!(matches!(d("/relative", None), Err(AgentError::Invalid(_))));
    assert!(matches!(d("https://bot.example", Some("cimd")), Err(AgentError::UnsupportedType(_))));
}

#[test]
fn directory_documents() {
    let a = SigningKey::generate().unwrap();
    let b = SigningKey::generate().unwrap();
    let doc = directory_json([a.public(), b.public()]);
    let dir = Directory::parse(doc.as_bytes(), 65536, 32, false).unwrap();
    assert_eq!(dir.keys.len(), 2);
    assert_eq!(dir.get(a.public().thumbprint()).unwrap().key, *a.public());
    assert!(dir.get("nope").is_none());

    let test_key = rfc9421_test_key();
    let mut test_jwk = test_key.public().to_jwk();
    test_jwk.as_object_mut().unwrap().remove("kid");
    let mut with_times = a.public().to_jwk();
    with_times["nbf"] = json!(100);
    with_times["exp"] = json!(200);
    let body = json!({"keys": [
        {"kty": "RSA", "n": "x", "e": "AQAB", "kid": "rsa"},
        {"kty": "OKP", "crv": "Ed25519", "x": "short"},
        test_jwk,
        with_times,
        a.public().to_jwk(),
        {"kty": "OKP", "crv": "Ed25519", "x": b.public().to_jwk()["x"], "kid": "not-the-thumbprint"},
    ]})
    .to_string();
    let dir = Directory::parse(body.as_bytes(), 65536, 32, false).unwrap();
    assert_eq!(dir.keys.len(), 1);
    let k = &dir.keys[0];
    assert_eq!((k.not_before, k.expires), (Some(100), Some(200)));
    assert!(!k.valid_at(99) && k.valid_at(100) && !k.valid_at(200));
    let reasons: Vec<(Option<usize>, &str)> =
        dir.ignored.iter().map(|i| (i.index, i.reason.as_str())).collect();
    assert_eq!(reasons.len(), 5, "{reasons:?}");
    assert!(reasons[0].1.contains("kty \"RSA\""), "{reasons:?}");
    assert!(reasons[2].1.contains("test key"), "{reasons:?}");
    assert_eq!(reasons[3], (Some(4), "listed twice"));
    assert!(reasons[4].1.contains("thumbprint"), "{reasons:?}");
    // Test keys pass when allowed.
    assert_eq!(Directory::parse(body.as_bytes(), 65536, 32, true).unwrap().keys.len(), 2);
    // Bounds and shape.
    assert_eq!(Directory::parse(body.as_bytes(), 100, 32, false), Err(DocumentError::TooLarge(100)));
    assert_eq!(Directory::parse(body.as_bytes(), 65536, 5, false), Err(DocumentError::TooManyKeys(6)));
    assert!(matches!(Directory::parse(b"[]", 65536, 32, false), Err(DocumentError::Malformed(_))));
    assert!(matches!(Directory::parse(b"{\"keys\":{}}", 65536, 32, false), Err(DocumentError::Malformed(_))));
    assert!(matches!(Directory::parse(b"{", 65536, 32, false), Err(DocumentError::Malformed(_))));
}

#[test]
fn directory_response_signatures() {
    let a = SigningKey::generate().unwrap();
    let b = SigningKey::generate().unwrap();
    let req = request("GET", "https://bot.example/.well-known/http-message-signatures-directory", &[]);
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(T0 as u64);
    let response = directory_response(&[&a, &b], &req, now, Duration::from_secs(300)).unwrap();
    assert_eq!(response.headers()["content-type"], MEDIA_TYPE);
    let check = |req: &http::request::Parts, headers: &http::HeaderMap, body: &[u8], policy| {
        let mut dir = Directory::parse(body, 65536, 32, false).unwrap();
        let r = DirectoryResponse { status: http::StatusCode::OK, headers, body };
        let proof = check_response_signatures(
            &mut dir,
            RequestView::of(req),
            r,
            T0 + 1,
            &VerifyConfig::default(),
            policy,
        );
        (dir, proof)
    };
    let (dir, proof) = check(&req, response.headers(), response.body(), ResponseSignatures::Require);
    assert_eq!(proof.valid.len(), 2, "{proof:?}");
    assert!(dir.keys.iter().all(|k| k.proven));
    // Fetched from another authority: not proven; with Require, nothing is left.
    let elsewhere = request("GET", "https://copy.example/.well-known/http-message-signatures-directory", &[]);
    let (dir, proof) = check(&elsewhere, response.headers(), response.body(), ResponseSignatures::Require);
    assert!(dir.keys.is_empty() && proof.invalid.len() == 2, "{proof:?}");
    // Without signatures: kept when checked where present, dropped when required.
    let plain = http::HeaderMap::new();
    assert_eq!(check(&req, &plain, response.body(), ResponseSignatures::CheckWhenPresent).0.keys.len(), 2);
    let (dir, _) = check(&req, &plain, response.body(), ResponseSignatures::Require);
    assert!(dir.keys.is_empty());
    assert!(dir.ignored.iter().all(|i| i.reason == "no response signature"));
}

#[test]
fn signature_agent_cards_give_keys_inline_and_a_product_token() {
    let a = SigningKey::generate().unwrap();
    let card = json!({
        "client_id": "https://example.com/bot",
        "client_name": "Example Bot",
        "jwks": {"keys": [a.public().to_jwk()]},
        "web_bot_auth": {"rfc9309-product-token": "ExampleBot-News", "rfc9309-compliance": true},
    })
    .to_string();
    let dir = Directory::parse(card.as_bytes(), 65536, 32, false).unwrap();
    assert_eq!(dir.keys.len(), 1);
    assert_eq!(dir.product_token.as_deref(), Some("ExampleBot-News"));
    // A plain JWKS names no token; one with a card's member does.
    let plain = directory_json([a.public()]);
    assert_eq!(Directory::parse(plain.as_bytes(), 65536, 32, false).unwrap().product_token, None);
    let jwks_with_token =
        json!({"keys": [a.public().to_jwk()], "web_bot_auth": {"rfc9309-product-token": "X_Bot"}});
    let dir = Directory::parse(jwks_with_token.to_string().as_bytes(), 65536, 32, false).unwrap();
    assert_eq!(dir.product_token.as_deref(), Some("X_Bot"));
    // Refused: both jwks and jwks_uri, jwks_uri alone (not followed), a token that is not one.
    let malformed = |doc: serde_json::Value| {
        matches!(
            Directory::parse(doc.to_string().as_bytes(), 65536, 32, false),
            Err(DocumentError::Malformed(_))
        )
    };
    assert!(malformed(json!({"jwks": {"keys": []}, "jwks_uri": "https://x/"})));
    assert!(malformed(json!({"jwks_uri": "https://x/", "web_bot_auth": {}})));
    for bad in [json!("Bad Bot/1"), json!(""), json!(7), json!("ExampleBot/1.0")] {
        let doc = json!({"keys": [], "web_bot_auth": {"rfc9309-product-token": bad}});
        assert!(malformed(doc.clone()), "{doc}");
    }
    // The token is quoted in the reason, cut: the reason goes to the log.
    let long = json!({"keys": [], "web_bot_auth": {"rfc9309-product-token": "é".repeat(20_000)}});
    match Directory::parse(long.to_string().as_bytes(), 65536, 32, false) {
        Err(DocumentError::Malformed(text)) => {
            assert!(text.starts_with("product token \"éé") && text.ends_with("..."), "{text}");
            assert!(text.len() <= 120, "{} bytes", text.len());
        }
        other => panic!("{other:?}"),
    }
    // The card's other members do not matter; its keys obey the same bounds.
    let many = json!({"jwks": {"keys": [a.public().to_jwk(), a.public().to_jwk()]}});
    assert_eq!(
        Directory::parse(many.to_string().as_bytes(), 65536, 1, false),
        Err(DocumentError::TooManyKeys(2))
    );
}

#[test]
fn accept_signature_asks_for_what_examine_accepts() {
    let dict = Dictionary::parse(ACCEPT_SIGNATURE.as_bytes()).unwrap();
    let list = dict.get("sig1").and_then(|m| m.as_inner_list()).unwrap();
    let components: Vec<_> = list.iter().map(|i| i.bare.as_string().unwrap().value().into_owned()).collect();
    assert_eq!(components, ["@authority", "signature-agent"]);
    // A request signed as asked is examined without complaint.
    let key = Arc::new(SigningKey::generate().unwrap());
    let mut parts = request("GET", "https://site.example/", &[]);
    RequestSigner::new(key, "https://bot.example").unwrap().sign(&mut parts, SystemTime::now()).unwrap();
    let input = parts.headers["signature-input"].to_str().unwrap().to_owned();
    for param in ["created", "expires", "nonce", "tag=\"web-bot-auth\"", "\"signature-agent\";key=\"sig1\""] {
        assert!(input.contains(param) && ACCEPT_SIGNATURE.contains(param), "{param}: {input}");
    }
}

#[test]
fn signature_agents_lists_the_usable_members() {
    let config = VerifyConfig::default();
    let agents = |value: &str| {
        let parts = request("GET", "/", &[("signature-agent", value)]);
        signature_agents(&parts.headers, &config)
            .iter()
            .map(|d| d.identifier().to_string())
            .collect::<Vec<_>>()
    };
    let wk = |origin: &str| format!("{origin}{WELL_KNOWN_PATH}");
    assert_eq!(
        agents(
            r#"sig1="https://a.example", sig2="http://b.example", sig3=?1, sig4="https://c.example/keys?x=1""#
        ),
        [wk("https://a.example"), "https://c.example/keys?x=1".to_owned()]
    );
    assert_eq!(agents(r#""https://a.example""#), [wk("https://a.example")]);
    assert_eq!(agents(r#"sig1="https://a.example";type=cimd"#), Vec::<String>::new());
    assert_eq!(agents("sig1=(((("), Vec::<String>::new());
    assert!(signature_agents(&http::HeaderMap::new(), &config).is_empty());
    let many: Vec<String> = (0..20).map(|i| format!("s{i}=\"https://a{i}.example\"")).collect();
    assert_eq!(agents(&many.join(", ")).len(), config.max_signatures);
}
