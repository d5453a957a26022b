//! Web Bot Auth end to end: signatures made by robotsgate and by Cloudflare's `web-bot-auth`
//! crate (code we did not write), verified by robotsgate against key directories served by
//! a real HTTPS origin on loopback (a test CA), and robotsgate's signatures and directory
//! response signatures verified by `web-bot-auth`. The failure cases of issue 29: expired,
//! future, altered, wrong key, key removed after a refresh, a directory that redirects, is
//! too big or is unreachable (cached keys kept), a replayed nonce; and the fetch itself:
//! one per directory however many requests wait, the destination guard, the bounded wait.
//!
//! Times are passed to the verifier explicitly: cache lifetimes and signature validity are
//! checked at the time given, so "two hours later" needs no waiting.

mod support;

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use indexmap::IndexMap;
use robotsgate::identity::httpsig::{
    DirectoryConfig, Failure, LABEL, MEDIA_TYPE, RequestSigner, SigningKey, Unverified, Verdict, Verifier,
    VerifyConfig, WELL_KNOWN_PATH, directory_json, directory_response,
};
use robotsgate::net::{Connector, Guard, TlsConfig, client_config};
use support::*;
use web_bot_auth::components::{
    CoveredComponent, DerivedComponent, HTTPField, HTTPFieldParameters, HTTPFieldParametersSet,
};
use web_bot_auth::keyring::{Algorithm, JSONWebKeySet, KeyRing};
use web_bot_auth::message_signatures::{MessageSigner, MessageVerifier, SignedMessage, UnsignedMessage};

/// An HTTPS origin for `a.test` and `b.test` (both 127.0.0.1 in the test resolver) with a
/// test CA, and a verifier trusting that CA, allowed to loopback.
struct Setup {
    ca: TestCa,
    origin: TestOrigin,
}

impl Setup {
    async fn new() -> Setup {
        let ca = TestCa::new("web-bot-auth", &["a.test", "b.test"]);
        let origin = TestOrigin::start_tls([], ca.server_config(&[b"http/1.1"])).await;
        Setup { ca, origin }
    }

    fn connector(&self, guard: Guard) -> Connector {
        let tls = TlsConfig { webpki_roots: false, extra_roots: vec![self.ca.der.clone()] };
        let tls = client_config(&tls, &[b"http/1.1"]).unwrap();
        Connector::new(resolver(), Arc::new(guard), tls, Duration::from_secs(5))
    }

    fn verifier_with(&self, config: VerifyConfig) -> Verifier {
        Verifier::new(self.connector(loopback_guard()), config)
    }

    fn verifier(&self) -> Verifier {
        self.verifier_with(config())
    }

    /// `https://HOST:PORT`: the Signature-Agent member (an origin: its well-known directory).
    fn agent(&self, host: &str) -> String {
        self.origin.base_as(host)
    }

    /// The directory URL the verifier fetches for [`Setup::agent`].
    fn directory(&self, host: &str) -> String {
        format!("{}{WELL_KNOWN_PATH}", self.agent(host))
    }

    /// Serves `keys` as the directory of `host` (every host of the origin: one route), signed
    /// for `host` at `now`, with `cache_control`.
    fn serve(&self, keys: &[&SigningKey], host: &str, now: SystemTime, cache_control: &str) {
        serve_on(&self.origin, keys, host, now, cache_control);
    }

    fn hits(&self) -> usize {
        self.origin.hits(WELL_KNOWN_PATH)
    }
}

/// Serves `keys` as `origin`'s directory, signed for `host` at `now`.
fn serve_on(origin: &TestOrigin, keys: &[&SigningKey], host: &str, now: SystemTime, cache_control: &str) {
    let url = format!("{}{WELL_KNOWN_PATH}", origin.base_as(host));
    let request = http::Request::get(url).body(()).unwrap().into_parts().0;
    let response = directory_response(keys, &request, now, Duration::from_secs(3600)).unwrap();
    origin.route(WELL_KNOWN_PATH, reply_of(response, cache_control));
}

/// The verifier's configuration in these tests: a request may wait for a fetch (the
/// default 200 ms is a production choice; a loaded test machine needs the bound).
fn config() -> VerifyConfig {
    VerifyConfig { max_wait: BOUND, ..VerifyConfig::default() }
}

fn reply_of(response: http::Response<Bytes>, cache_control: &str) -> Reply {
    let mut reply = Reply::status(response.status().as_u16());
    for (name, value) in response.headers() {
        if name != "cache-control" {
            reply = reply.header(name.as_str(), value.to_str().unwrap());
        }
    }
    reply.header("cache-control", cache_control).body(response.into_body())
}

fn key() -> Arc<SigningKey> {
    Arc::new(SigningKey::generate().unwrap())
}

fn now() -> SystemTime {
    SystemTime::now()
}

/// A request to `https://site.test/page` signed by `key` for `agent`, created at `at`.
fn signed(key: &Arc<SigningKey>, agent: &str, at: SystemTime) -> http::request::Parts {
    let mut parts = http::Request::get("https://site.test/page").body(()).unwrap().into_parts().0;
    RequestSigner::new(key.clone(), agent).unwrap().sign(&mut parts, at).unwrap();
    parts
}

fn verified(v: &Verdict) -> &robotsgate::identity::httpsig::Verified {
    match v {
        Verdict::Verified(v) => v,
        other => panic!("expected verified, got {other:?}"),
    }
}

#[tokio::test]
async fn signature_verifies_against_the_served_directory() {
    let s = Setup::new().await;
    let k = key();
    s.serve(&[&k], "a.test", now(), "max-age=600");
    let verifier = s.verifier();
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), now()), now()).await;
    let v = verified(&v);
    assert_eq!(&*v.directory, s.directory("a.test"));
    assert_eq!(&*v.keyid, k.public().thumbprint());
    assert!(v.proven, "the directory's response signature was checked");
    // The directory was fetched as the draft says.
    let seen = s.origin.seen_for(WELL_KNOWN_PATH);
    assert_eq!(seen.len(), 1);
    assert_eq!(seen[0].method, "GET");
    assert_eq!(seen[0].headers["accept"], MEDIA_TYPE);
    // More requests: verified from the cache.
    for _ in 0..3 {
        verified(&verifier.verify(&signed(&k, &s.agent("a.test"), now()), now()).await);
    }
    assert_eq!(s.hits(), 1);
}

/// `web-bot-auth`'s signer over a message of our own: the components of a GET to
/// `site.test` with `Signature-Agent`, dictionary (`key` = `Some`) or bare string.
struct WbaRequest {
    authority: String,
    agent_header: String,
    agent_value: String,
    key: Option<String>,
    input: String,
    signature: String,
}

impl UnsignedMessage for WbaRequest {
    fn fetch_components_to_cover(&self) -> IndexMap<CoveredComponent, String> {
        let params = self.key.iter().map(|k| HTTPFieldParameters::Key(k.clone())).collect();
        IndexMap::from_iter([
            (CoveredComponent::Derived(DerivedComponent::Authority { req: false }), self.authority.clone()),
            (
                CoveredComponent::HTTP(HTTPField {
                    name: "signature-agent".into(),
                    parameters: HTTPFieldParametersSet(params),
                }),
                self.agent_value.clone(),
            ),
        ])
    }

    fn register_header_contents(&mut self, signature_input: String, signature_header: String) {
        self.input = format!("sig1={signature_input}");
        self.signature = format!("sig1={signature_header}");
    }
}

fn wba_signed(seed: &[u8; 32], keyid: &str, agent: &str, dictionary: bool) -> http::request::Parts {
    let quoted = format!("\"{agent}\"");
    let mut msg = WbaRequest {
        authority: "site.test".into(),
        agent_header: if dictionary { format!("sig1={quoted}") } else { quoted.clone() },
        agent_value: quoted,
        key: dictionary.then(|| "sig1".to_owned()),
        input: String::new(),
        signature: String::new(),
    };
    let signer = MessageSigner {
        keyid: keyid.into(),
        nonce: format!("wba-{}", rand_suffix()),
        tag: "web-bot-auth".into(),
    };
    signer
        .generate_signature_headers_content(&mut msg, Duration::from_secs(60), Algorithm::Ed25519, seed)
        .unwrap();
    http::Request::get("https://site.test/page")
        .header("signature-agent", &msg.agent_header)
        .header("signature-input", &msg.input)
        .header("signature", &msg.signature)
        .body(())
        .unwrap()
        .into_parts()
        .0
}

fn rand_suffix() -> String {
    SigningKey::generate().unwrap().public().thumbprint()[..12].to_owned()
}

/// Signatures made by Cloudflare's `web-bot-auth` crate verify with robotsgate: the
/// dictionary form and the older bare string.
#[tokio::test]
async fn web_bot_auth_crate_signatures_verify() {
    let s = Setup::new().await;
    let seed = [7u8; 32];
    let k = Arc::new(SigningKey::from_seed(&seed).unwrap());
    s.serve(&[&k], "a.test", now(), "max-age=600");
    let verifier = s.verifier();
    for dictionary in [true, false] {
        let parts = wba_signed(&seed, k.public().thumbprint(), &s.agent("a.test"), dictionary);
        let v = verifier.verify(&parts, now()).await;
        assert_eq!(&*verified(&v).directory, s.directory("a.test"), "dictionary form: {dictionary}");
    }
    // Its signature with a keyid of the directory, by another key: does not verify.
    let parts = wba_signed(&[9u8; 32], k.public().thumbprint(), &s.agent("a.test"), true);
    assert_eq!(verifier.verify(&parts, now()).await, Verdict::Failed(Failure::BadSignature));
}

/// `web-bot-auth`'s view of our request: fields by name (a `key` parameter picks the
/// member of our own one-member `Signature-Agent`, written `sig1="…"`), `@authority`.
struct OurRequest<'a>(&'a http::request::Parts, &'a str);

impl SignedMessage for OurRequest<'_> {
    fn lookup_component(&self, name: &CoveredComponent) -> Vec<String> {
        match name {
            CoveredComponent::HTTP(HTTPField { name, parameters }) => {
                let values =
                    self.0.headers.get_all(name.as_str()).iter().map(|v| v.to_str().unwrap().to_owned());
                match parameters.0.as_slice() {
                    [] => values.collect(),
                    [HTTPFieldParameters::Key(k)] => {
                        values.filter_map(|v| v.strip_prefix(&format!("{k}=")).map(str::to_owned)).collect()
                    }
                    other => panic!("unexpected parameters {other:?}"),
                }
            }
            CoveredComponent::Derived(DerivedComponent::Authority { .. }) => vec![self.1.to_owned()],
            _ => vec![],
        }
    }
}

/// `web-bot-auth`'s view of our directory response: `@authority` (of the request),
/// `content-digest` and the signature fields.
struct OurDirectory<'a>(&'a http::HeaderMap, &'a str);

impl SignedMessage for OurDirectory<'_> {
    fn lookup_component(&self, name: &CoveredComponent) -> Vec<String> {
        match name {
            CoveredComponent::HTTP(HTTPField { name, .. }) => {
                self.0.get_all(name.as_str()).iter().map(|v| v.to_str().unwrap().to_owned()).collect()
            }
            CoveredComponent::Derived(DerivedComponent::Authority { req: true }) => vec![self.1.to_owned()],
            _ => vec![],
        }
    }
}

/// robotsgate's signatures verify with `web-bot-auth`: a request, with the key imported from
/// the directory robotsgate serves (so its thumbprints agree with ours), and the directory's
/// response signatures, one per key.
#[tokio::test]
async fn web_bot_auth_crate_verifies_our_signatures() {
    let (a, b) = (key(), key());
    let request = http::Request::get("https://bot.example/.well-known/http-message-signatures-directory")
        .body(())
        .unwrap()
        .into_parts()
        .0;
    let directory = directory_response(&[&a, &b], &request, now(), Duration::from_secs(300)).unwrap();
    let jwks: JSONWebKeySet = serde_json::from_slice(directory.body()).unwrap();
    let mut keyring = KeyRing::default();
    assert!(keyring.import_jwks(jwks).iter().all(Option::is_none));

    let parts = signed(&a, "https://bot.example", now());
    let parsed = web_bot_auth::WebBotAuthVerifier::parse(&OurRequest(&parts, "site.test")).unwrap();
    assert_eq!(
        parsed.get_signature_agents(),
        &vec![web_bot_auth::SignatureAgentLink::External("https://bot.example".into())]
    );
    let details = &parsed.get_parsed_label().base.parameters.details;
    assert_eq!(details.keyid.as_deref(), Some(a.public().thumbprint()));
    assert_eq!(details.algorithm, Some(Algorithm::Ed25519));
    assert!(!details.possibly_insecure(|_| false).is_expired.unwrap());
    parsed.verify(&keyring, None).expect("web-bot-auth verifies robotsgate's request signature");
    // At another authority, it does not.
    let parsed = web_bot_auth::WebBotAuthVerifier::parse(&OurRequest(&parts, "other.test")).unwrap();
    assert!(parsed.verify(&keyring, None).is_err());

    // The directory's response signatures, each with its key.
    let digest = {
        use base64::Engine;
        use sha2::Digest;
        base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(directory.body()))
    };
    assert_eq!(directory.headers()["content-digest"], format!("sha-256=:{digest}:").as_str());
    for label in ["binding1", "binding2"] {
        let msg = OurDirectory(directory.headers(), "bot.example");
        let parsed = MessageVerifier::parse(&msg, |(l, _)| l.as_str() == label).unwrap();
        assert_eq!(
            parsed.parsed.base.parameters.details.tag.as_deref(),
            Some("http-message-signatures-directory")
        );
        parsed.verify(&keyring, None).expect("web-bot-auth verifies the directory's response signature");
        let elsewhere = OurDirectory(directory.headers(), "copy.example");
        assert!(
            MessageVerifier::parse(&elsewhere, |(l, _)| l.as_str() == label)
                .unwrap()
                .verify(&keyring, None)
                .is_err()
        );
    }
}

#[tokio::test]
async fn expired_and_future_signatures_fail_before_any_fetch() {
    let s = Setup::new().await;
    let k = key();
    s.serve(&[&k], "a.test", now(), "max-age=600");
    let verifier = s.verifier();
    let hour = Duration::from_secs(3600);
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), now() - hour), now()).await;
    assert!(matches!(v, Verdict::Failed(Failure::Expired { .. })), "{v:?}");
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), now() + hour), now()).await;
    assert!(matches!(v, Verdict::Failed(Failure::NotYetValid { .. })), "{v:?}");
    assert_eq!(s.hits(), 0, "no directory fetched for a signature that fails on its own");
}

#[tokio::test]
async fn altered_requests_fail() {
    let s = Setup::new().await;
    let k = key();
    s.serve(&[&k], "a.test", now(), "max-age=600");
    // b.test (an origin of its own) publishes the same key: the agent member swapped for
    // it names a directory that has the key, and the signature says no.
    let b = TestOrigin::start_tls([], s.ca.server_config(&[b"http/1.1"])).await;
    serve_on(&b, &[&k], "b.test", now(), "max-age=600");
    let verifier = s.verifier();
    let parts = signed(&k, &s.agent("a.test"), now());

    let mut other_agent = parts.clone();
    other_agent
        .headers
        .insert("signature-agent", format!("{LABEL}=\"{}\"", b.base_as("b.test")).parse().unwrap());
    assert_eq!(verifier.verify(&other_agent, now()).await, Verdict::Failed(Failure::BadSignature));
    assert_eq!(b.hits(WELL_KNOWN_PATH), 1);

    let mut other_authority = parts.clone();
    other_authority.uri = "https://other.test/page".parse().unwrap();
    assert_eq!(verifier.verify(&other_authority, now()).await, Verdict::Failed(Failure::BadSignature));

    // An origin-form request: the authority comes from Host.
    let mut origin_form = parts.clone();
    origin_form.uri = "/page".parse().unwrap();
    origin_form.headers.insert("host", "site.test".parse().unwrap());
    verified(&verifier.verify(&origin_form, now()).await);
    origin_form.headers.insert("host", "site.test:8443".parse().unwrap());
    assert_eq!(verifier.verify(&origin_form, now()).await, Verdict::Failed(Failure::BadSignature));
}

#[tokio::test]
async fn keys_are_looked_up_by_directory_and_keyid() {
    let s = Setup::new().await;
    let (published, stranger) = (key(), key());
    s.serve(&[&published], "a.test", now(), "max-age=600");
    let verifier = s.verifier();
    verified(&verifier.verify(&signed(&published, &s.agent("a.test"), now()), now()).await);
    // A key the directory does not publish.
    let v = verifier.verify(&signed(&stranger, &s.agent("a.test"), now()), now()).await;
    assert!(
        matches!(&v, Verdict::Failed(Failure::UnknownKey { keyid, .. }) if keyid == stranger.public().thumbprint())
    );
    // Another agent (b.test, on an origin of its own) publishes another key. The key
    // cached for a.test, claimed for b.test, is not attributed to b.test.
    let b = TestOrigin::start_tls([], s.ca.server_config(&[b"http/1.1"])).await;
    serve_on(&b, &[&stranger], "b.test", now(), "max-age=600");
    let v = verifier.verify(&signed(&published, &b.base_as("b.test"), now()), now()).await;
    let b_directory = format!("{}{WELL_KNOWN_PATH}", b.base_as("b.test"));
    assert!(
        matches!(&v, Verdict::Failed(Failure::UnknownKey { directory, .. }) if *directory == b_directory),
        "{v:?}"
    );
    assert_eq!(b.hits(WELL_KNOWN_PATH), 1, "b.test's directory was fetched, not assumed");
    verified(&verifier.verify(&signed(&stranger, &b.base_as("b.test"), now()), now()).await);
    assert_eq!(s.hits(), 1);
}

#[tokio::test]
async fn a_key_removed_from_the_directory_stops_verifying_after_a_refresh() {
    let s = Setup::new().await;
    let (old, new) = (key(), key());
    let t0 = now();
    s.serve(&[&old, &new], "a.test", t0, "max-age=600");
    let verifier = s.verifier();
    verified(&verifier.verify(&signed(&old, &s.agent("a.test"), t0), t0).await);
    s.serve(&[&new], "a.test", t0, "max-age=600");
    // Within max-age the cached copy stands.
    let t1 = t0 + Duration::from_secs(300);
    verified(&verifier.verify(&signed(&old, &s.agent("a.test"), t1), t1).await);
    assert_eq!(s.hits(), 1);
    // Past it, the directory is fetched again and the old key is gone.
    let t2 = t0 + Duration::from_secs(601);
    let v = verifier.verify(&signed(&old, &s.agent("a.test"), t2), t2).await;
    assert!(matches!(v, Verdict::Failed(Failure::UnknownKey { .. })), "{v:?}");
    verified(&verifier.verify(&signed(&new, &s.agent("a.test"), t2), t2).await);
    assert_eq!(s.hits(), 2);
}

#[tokio::test]
async fn a_key_published_later_is_found_by_a_bounded_refetch() {
    let s = Setup::new().await;
    let (first, later) = (key(), key());
    let t0 = now();
    s.serve(&[&first], "a.test", t0, "max-age=3600");
    let verifier = s.verifier();
    verified(&verifier.verify(&signed(&first, &s.agent("a.test"), t0), t0).await);
    s.serve(&[&first, &later], "a.test", t0, "max-age=3600");
    // Unknown within a minute of the fetch: no new fetch (a stream of unknown keyids
    // cannot make the verifier fetch per request).
    let t1 = t0 + Duration::from_secs(30);
    for _ in 0..3 {
        let v = verifier.verify(&signed(&later, &s.agent("a.test"), t1), t1).await;
        assert!(matches!(v, Verdict::Failed(Failure::UnknownKey { .. })), "{v:?}");
    }
    assert_eq!(s.hits(), 1);
    let t2 = t0 + Duration::from_secs(61);
    verified(&verifier.verify(&signed(&later, &s.agent("a.test"), t2), t2).await);
    assert_eq!(s.hits(), 2);
}

fn unavailable(v: &Verdict) -> &str {
    match v {
        Verdict::Unverified(Unverified::DirectoryUnavailable { reason, .. }) => reason,
        other => panic!("expected an unavailable directory, got {other:?}"),
    }
}

#[tokio::test]
async fn directories_that_redirect_are_too_big_or_mistyped_are_refused() {
    let s = Setup::new().await;
    let k = key();
    let verifier = s.verifier();
    let sign = |host: &str| signed(&k, &s.agent(host), now());

    s.origin.route(WELL_KNOWN_PATH, Reply::redirect(302, "/elsewhere.json"));
    s.origin.route("/elsewhere.json", Reply::typed(MEDIA_TYPE, directory_json([k.public()])));
    let v = verifier.verify(&sign("a.test"), now()).await;
    assert!(unavailable(&v).contains("redirect"), "{v:?}");
    assert_eq!(s.origin.hits("/elsewhere.json"), 0, "the redirect is not followed");

    // Too big: more than 64 KiB (a valid JWKS padded with spaces), and more than 32 keys.
    let mut big = directory_json([k.public()]);
    big.insert_str(1, &" ".repeat(64 * 1024));
    s.origin.route(WELL_KNOWN_PATH, Reply::typed(MEDIA_TYPE, big));
    let v = verifier.verify(&sign("b.test"), now()).await;
    assert!(unavailable(&v).contains("larger than 65536"), "{v:?}");
    let many: Vec<SigningKey> = (0..33).map(|_| SigningKey::generate().unwrap()).collect();
    s.origin
        .route(WELL_KNOWN_PATH, Reply::typed(MEDIA_TYPE, directory_json(many.iter().map(|k| k.public()))));
    let other = Setup::new().await;
    other
        .origin
        .route(WELL_KNOWN_PATH, Reply::typed(MEDIA_TYPE, directory_json(many.iter().map(|k| k.public()))));
    let v = other.verifier().verify(&signed(&k, &other.agent("a.test"), now()), now()).await;
    assert!(unavailable(&v).contains("33 keys"), "{v:?}");

    // Not the directory media type.
    other.origin.route(WELL_KNOWN_PATH, Reply::typed("text/html", directory_json([k.public()])));
    let v = other.verifier().verify(&signed(&k, &other.agent("a.test"), now()), now()).await;
    assert!(unavailable(&v).contains("content type"), "{v:?}");
}

#[tokio::test]
async fn an_unreachable_directory_keeps_its_cached_keys() {
    let s = Setup::new().await;
    let k = key();
    let t0 = now();
    s.serve(&[&k], "a.test", t0, "max-age=60");
    let verifier = s.verifier();
    verified(&verifier.verify(&signed(&k, &s.agent("a.test"), t0), t0).await);
    // The directory fails (503) when the copy has gone stale: the keys stay in use …
    s.origin.route(WELL_KNOWN_PATH, Reply::status(503));
    let t1 = t0 + Duration::from_secs(120);
    verified(&verifier.verify(&signed(&k, &s.agent("a.test"), t1), t1).await);
    assert_eq!(s.hits(), 2);
    // … and the failure is remembered: no new fetch for 5 minutes.
    let t2 = t1 + Duration::from_secs(299);
    verified(&verifier.verify(&signed(&k, &s.agent("a.test"), t2), t2).await);
    assert_eq!(s.hits(), 2);
    // Then the directory is asked again; it answers, without the key: gone.
    s.serve(&[], "a.test", t0, "max-age=60");
    let t3 = t1 + Duration::from_secs(301);
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), t3), t3).await;
    assert!(matches!(v, Verdict::Failed(Failure::UnknownKey { .. })), "{v:?}");
    assert_eq!(s.hits(), 3);
}

#[tokio::test]
async fn an_unreachable_directory_never_fetched_is_unverified_and_remembered() {
    let s = Setup::new().await;
    let k = key();
    let verifier = s.verifier();
    let dead = format!("https://a.test:{}", dead_port());
    let t0 = now();
    let v = verifier.verify(&signed(&k, &dead, t0), t0).await;
    assert!(unavailable(&v).contains("connecting to"), "{v:?}");
    // Remembered (at most 5 minutes): the next request gets the same answer at once.
    let t1 = t0 + Duration::from_secs(10);
    let v = verifier.verify(&signed(&k, &dead, t1), t1).await;
    assert!(unavailable(&v).contains("connecting to"), "{v:?}");
}

#[tokio::test]
async fn the_destination_guard_applies_to_directories() {
    let s = Setup::new().await;
    let k = key();
    s.serve(&[&k], "a.test", now(), "max-age=600");
    // The default guard: loopback is not a place requests may send the verifier.
    let verifier = Verifier::new(s.connector(Guard::default()), config());
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), now()), now()).await;
    assert!(unavailable(&v).contains("refused"), "{v:?}");
    assert_eq!(s.hits(), 0);
}

#[tokio::test]
async fn a_replayed_signature_fails() {
    let s = Setup::new().await;
    let k = key();
    s.serve(&[&k], "a.test", now(), "max-age=600");
    let verifier = s.verifier();
    let parts = signed(&k, &s.agent("a.test"), now());
    verified(&verifier.verify(&parts, now()).await);
    assert_eq!(verifier.verify(&parts, now()).await, Verdict::Failed(Failure::Replayed));
    // Without the replay check the same request verifies again.
    let lax = s.verifier_with(VerifyConfig { refuse_replays: false, ..config() });
    verified(&lax.verify(&parts, now()).await);
    verified(&lax.verify(&parts, now()).await);
}

/// A signature is accepted up to `clock_skew` past its `expires`: it is remembered as
/// long, so a copy sent in that window is a replay too (it was forgotten at `expires`).
#[tokio::test]
async fn a_signature_replayed_within_the_clock_skew_past_its_expiry_fails() {
    let s = Setup::new().await;
    let k = key();
    s.serve(&[&k], "a.test", now(), "max-age=600");
    let verifier = s.verifier();
    let skew = config().clock_skew;
    assert!(skew >= Duration::from_secs(4), "{skew:?}");
    let signed_at = now() - Duration::from_secs(60) - skew / 2;
    let parts = signed(&k, &s.agent("a.test"), signed_at);
    // 60 s of validity, so `expires` is `skew / 2` ago: still accepted, once.
    verified(&verifier.verify(&parts, now()).await);
    assert_eq!(verifier.verify(&parts, now()).await, Verdict::Failed(Failure::Replayed));
    assert_eq!(verifier.verify(&parts, now()).await, Verdict::Failed(Failure::Replayed));
}

#[tokio::test]
async fn concurrent_requests_share_one_fetch() {
    let s = Setup::new().await;
    let k = key();
    let gate = Gate::new();
    let request = http::Request::get(s.directory("a.test")).body(()).unwrap().into_parts().0;
    let response = directory_response(&[&k], &request, now(), Duration::from_secs(3600)).unwrap();
    s.origin.route(WELL_KNOWN_PATH, reply_of(response, "max-age=600").wait_gate(&gate));
    let verifier = s.verifier();
    let tasks: Vec<_> = (0..8)
        .map(|_| {
            let (verifier, parts) = (verifier.clone(), signed(&k, &s.agent("a.test"), now()));
            tokio::spawn(async move { verifier.verify(&parts, now()).await })
        })
        .collect();
    s.origin.wait_hits(WELL_KNOWN_PATH, 1).await;
    gate.open();
    for t in tasks {
        verified(&bounded("a verification", t).await.unwrap());
    }
    assert_eq!(s.hits(), 1);
}

#[tokio::test]
async fn a_slow_directory_leaves_the_request_pending_and_fetches_are_bounded() {
    let s = Setup::new().await;
    let k = key();
    let gate = Gate::new();
    let request = http::Request::get(s.directory("a.test")).body(()).unwrap().into_parts().0;
    let response = directory_response(&[&k], &request, now(), Duration::from_secs(3600)).unwrap();
    s.origin.route(WELL_KNOWN_PATH, reply_of(response, "max-age=600").wait_gate(&gate));
    let one_at_a_time = VerifyConfig {
        max_wait: Duration::from_millis(50),
        directory: DirectoryConfig { max_concurrent_fetches: 1, ..DirectoryConfig::default() },
        ..config()
    };
    let verifier = s.verifier_with(one_at_a_time);
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), now()), now()).await;
    assert!(matches!(v, Verdict::Unverified(Unverified::Pending { .. })), "{v:?}");
    // Meanwhile another directory is not fetched: as many fetches as allowed are under way.
    let v = verifier.verify(&signed(&k, &s.agent("b.test"), now()), now()).await;
    assert!(unavailable(&v).contains("fetches under way"), "{v:?}");
    gate.open();
    until("the directory cached", || !verifier.directories().is_empty()).await;
    verified(&verifier.verify(&signed(&k, &s.agent("a.test"), now()), now()).await);
    assert_eq!(s.hits(), 1);
}

#[tokio::test]
async fn a_directory_signed_for_another_authority_does_not_vouch_for_its_keys() {
    let s = Setup::new().await;
    let k = key();
    // Signed for b.test, served for a.test (a copied key set).
    s.serve(&[&k], "b.test", now(), "max-age=600");
    let verifier = s.verifier();
    let v = verifier.verify(&signed(&k, &s.agent("a.test"), now()), now()).await;
    assert!(matches!(v, Verdict::Failed(Failure::UnknownKey { .. })), "{v:?}");
    // Unsigned, it is used (response signatures are checked where present).
    s.origin.route(WELL_KNOWN_PATH, Reply::typed(MEDIA_TYPE, directory_json([k.public()])));
    let v = s.verifier().verify(&signed(&k, &s.agent("a.test"), now()), now()).await;
    assert!(!verified(&v).proven);
    // A stall past the fetch timeout: unavailable, not a hang.
    s.origin.route(WELL_KNOWN_PATH, Reply::typed(MEDIA_TYPE, directory_json([k.public()])).wait_forever());
    let quick = VerifyConfig {
        directory: DirectoryConfig { timeout: Duration::from_millis(300), ..DirectoryConfig::default() },
        ..config()
    };
    let v = s.verifier_with(quick).verify(&signed(&k, &s.agent("a.test"), now()), now()).await;
    assert!(unavailable(&v).contains("not fetched within"), "{v:?}");
}

/// A negative answer (a 404 the directory says to keep for a day; `failure_ttl` set to an
/// hour) lasts at most 5 minutes: then the directory is asked again.
#[tokio::test]
async fn a_negative_answer_lasts_at_most_five_minutes_whatever_it_or_the_configuration_says() {
    let s = Setup::new().await;
    let k = key();
    let t0 = now();
    s.origin.route(WELL_KNOWN_PATH, Reply::status(404).header("cache-control", "max-age=86400"));
    let mut config = config();
    config.directory.failure_ttl = Duration::from_secs(3600);
    let verifier = s.verifier_with(config);
    let agent = s.agent("a.test");
    let v = verifier.verify(&signed(&k, &agent, t0), t0).await;
    assert!(unavailable(&v).contains("404"), "{v:?}");
    let t1 = t0 + Duration::from_secs(299);
    let v = verifier.verify(&signed(&k, &agent, t1), t1).await;
    assert!(unavailable(&v).contains("404"), "{v:?}");
    assert_eq!(s.hits(), 1, "remembered within 5 minutes");
    s.serve(&[&k], "a.test", t0, "max-age=60");
    let t2 = t0 + Duration::from_secs(301);
    verified(&verifier.verify(&signed(&k, &agent, t2), t2).await);
    assert_eq!(s.hits(), 2, "asked again past 5 minutes");
}
