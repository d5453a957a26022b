//! Web Bot Auth on the ingress side (issue 29): [`robotsgate::identity::Verifier::verify_request`]
//! and the ingress layer, with signatures made by Cloudflare's `web-bot-auth` crate (code we
//! did not write) and key directories served by a real HTTPS origin on loopback (a test
//! CA). A signature speaks only for the operator whose `signature_agents` name its
//! directory; a bad or replayed one from a claimed operator is an impersonator; an operator
//! with `require` has its unverified bots refused; refusals carry `Accept-Signature`.

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use robotsgate::audit::IngressRecord;
use robotsgate::identity::httpsig::{
    self, ACCEPT_SIGNATURE, Failure, SigningKey, VerifyConfig, WELL_KNOWN_PATH,
};
use robotsgate::identity::ranges::{ListLimits, Ranges, bundled};
use robotsgate::identity::{Identity, Method, Operator, Verdict, Verifier, Why};
use robotsgate::ingress::IngressLayer;
use robotsgate::net::{Connector, TlsConfig, client_config};
use support::*;
use tower::{Layer as _, ServiceExt as _};

/// An HTTPS origin for `a.test` and `b.test` (127.0.0.1 in the test resolver), its test
/// CA, and the key of `SEED` in its directory.
struct Setup {
    ca: TestCa,
    origin: TestOrigin,
    key: Arc<SigningKey>,
}

const SEED: [u8; 32] = [3u8; 32];

impl Setup {
    async fn new() -> Setup {
        let ca = TestCa::new("identity-signatures", &["a.test", "b.test"]);
        let origin = TestOrigin::start_tls([], ca.server_config(&[b"http/1.1"])).await;
        let key = Arc::new(SigningKey::from_seed(&SEED).unwrap());
        serve_directory(&origin, &key, "a.test");
        Setup { ca, origin, key }
    }

    fn agent(&self) -> String {
        self.origin.base_as("a.test")
    }

    fn directory(&self) -> String {
        format!("{}{WELL_KNOWN_PATH}", self.agent())
    }

    fn keyid(&self) -> String {
        self.key.public().thumbprint().to_owned()
    }

    fn connector(&self) -> Connector {
        let tls = TlsConfig { webpki_roots: false, extra_roots: vec![self.ca.der.clone()] };
        let tls = client_config(&tls, &[b"http/1.1"]).unwrap();
        Connector::new(resolver(), Arc::new(loopback_guard()), tls, Duration::from_secs(5))
    }

    /// A verifier of `operators` (their bundled lists, no reverse DNS) checking signatures.
    fn verifier(&self, operators: &[Operator]) -> Verifier {
        let sig =
            httpsig::Verifier::new(self.connector(), VerifyConfig { max_wait: BOUND, ..Default::default() });
        let ranges = Ranges::for_operators(operators, ListLimits::default());
        Verifier::with_signatures(operators, Some(ranges), None, Some(sig))
    }

    /// `Example`, whose bots use `ExampleBot` and `ExampleBot-User` and sign with a.test's
    /// keys; OpenAI with its bundled GPTBot list.
    fn operators(&self, require: bool) -> Vec<Operator> {
        vec![
            Operator::new("Example")
                .tokens(["ExampleBot", "ExampleBot-User"])
                .signature_agents([self.agent()])
                .require(require),
            Operator::new("OpenAI").tokens(["GPTBot"]).ip_lists([bundled::OPENAI_GPTBOT]),
        ]
    }

    /// Fields signed by `web-bot-auth` for a request to `site.test` by the key of `seed`
    /// (claiming a.test's key), with a fresh nonce.
    fn sign(&self, seed: &[u8; 32]) -> WbaFields {
        wba_sign(seed, &self.keyid(), &self.agent(), "site.test", &nonce())
    }
}

fn nonce() -> String {
    SigningKey::generate().unwrap().public().thumbprint()[..16].to_owned()
}

/// Serves `key` as `origin`'s directory, signed for `host`.
fn serve_directory(origin: &TestOrigin, key: &SigningKey, host: &str) {
    serve_directory_with_query(origin, key, host, "");
}

/// [`serve_directory`] for the directory's URL with `query` (`?…`, or empty).
fn serve_directory_with_query(origin: &TestOrigin, key: &SigningKey, host: &str, query: &str) {
    let url = format!("{}{WELL_KNOWN_PATH}{query}", origin.base_as(host));
    let request = http::Request::get(url).body(()).unwrap().into_parts().0;
    let response =
        httpsig::directory_response(&[key], &request, SystemTime::now(), Duration::from_secs(3600)).unwrap();
    let mut reply = Reply::status(response.status().as_u16());
    for (name, value) in response.headers() {
        if name != "cache-control" {
            reply = reply.header(name.as_str(), value.to_str().unwrap());
        }
    }
    let route = format!("{WELL_KNOWN_PATH}{query}");
    origin.route(&route, reply.header("cache-control", "max-age=600").body(response.into_body()));
}

/// A request to `https://site.test/page` carrying `fields` (if any).
fn request(fields: Option<&WbaFields>) -> http::request::Parts {
    let mut b = http::Request::get("https://site.test/page");
    for (name, value) in fields.iter().flat_map(|f| f.pairs()) {
        b = b.header(name, value);
    }
    b.body(()).unwrap().into_parts().0
}

async fn check(v: &Verifier, fields: Option<&WbaFields>, token: Option<&str>) -> Option<Identity> {
    v.verify_request(&request(fields), Some("127.0.0.1".parse().unwrap()), token, SystemTime::now()).await
}

#[tokio::test]
async fn a_signature_speaks_for_the_operator_of_its_agent() {
    let s = Setup::new().await;
    let v = s.verifier(&s.operators(false));
    let by_signature =
        Verdict::Verified(Method::Signature { agent: s.directory().into(), keyid: s.keyid().into() });

    // The token's operator signed: verified, by signature.
    let id = check(&v, Some(&s.sign(&SEED)), Some("examplebot")).await.unwrap();
    assert_eq!(id.verdict, by_signature);
    assert_eq!((id.operator.as_deref(), id.token, id.required), (Some("Example"), None, false));
    assert_eq!(
        id.verdict.to_string(),
        format!("verified (signed by key {} of {})", s.keyid(), s.directory())
    );
    // No token in the User-Agent: judged as the operator's first token.
    let id = check(&v, Some(&s.sign(&SEED)), None).await.unwrap();
    assert_eq!((id.verdict, id.token.as_deref()), (by_signature.clone(), Some("ExampleBot")));
    // A token of another operator: the signature does not speak for it; OpenAI's ranges
    // say no to 127.0.0.1.
    let id = check(&v, Some(&s.sign(&SEED)), Some("GPTBot")).await.unwrap();
    assert_eq!((id.verdict, id.operator.as_deref()), (Verdict::Failed(Why::NotInRanges), Some("OpenAI")));
    // Unsigned: Example publishes nothing else to check with.
    let id = check(&v, None, Some("ExampleBot")).await.unwrap();
    assert_eq!(id.verdict, Verdict::Unverified(Why::NoMethod));
    assert!(check(&v, None, None).await.is_none(), "nothing claimed, nothing checked");
    assert_eq!(s.origin.hits(WELL_KNOWN_PATH), 1, "the directory is cached");
}

/// The identity is the directory's URL as an operator names it, query and all. A host
/// serving another key set for another query (a tenant's) does not lend those keys to the
/// operator, and a directory no operator names is never fetched: before, the query was
/// dropped from the identity, the URL fetched with it, and an attacker's key there verified
/// as Example's.
#[tokio::test]
async fn a_query_added_to_an_operators_agent_is_another_directory() {
    let s = Setup::new().await;
    let seed = [9u8; 32];
    let evil = SigningKey::from_seed(&seed).unwrap();
    serve_directory_with_query(&s.origin, &evil, "a.test", "?tenant=evil");
    let v = s.verifier(&s.operators(false));
    let agent = format!("{}?tenant=evil", s.directory());
    let fields = wba_sign(&seed, evil.public().thumbprint(), &agent, "site.test", &nonce());
    let id = check(&v, Some(&fields), Some("ExampleBot")).await.unwrap();
    // Not a signature of Example's: its bots are judged as unsigned ones are.
    assert_eq!((id.verdict, id.operator.as_deref()), (Verdict::Unverified(Why::NoMethod), Some("Example")));
    let fetched: Vec<String> = s.origin.seen().into_iter().map(|seen| seen.target).collect();
    assert!(fetched.is_empty(), "{fetched:?}");
    // Example's own signature still verifies.
    let id = check(&v, Some(&s.sign(&SEED)), Some("ExampleBot")).await.unwrap();
    assert!(matches!(id.verdict, Verdict::Verified(Method::Signature { .. })), "{id:?}");
}

#[tokio::test]
async fn bad_and_replayed_signatures_of_a_claimed_operator_fail() {
    let s = Setup::new().await;
    let v = s.verifier(&s.operators(false));
    // Signed by another key under a.test's keyid.
    let forged = s.sign(&[9u8; 32]);
    for token in [Some("ExampleBot"), Some("GPTBot"), None] {
        let id = check(&v, Some(&forged), token).await.unwrap();
        let agent = s.directory().into();
        assert_eq!(
            id.verdict,
            Verdict::Failed(Why::Signature { agent, failure: Failure::BadSignature }),
            "{token:?}"
        );
        assert_eq!(id.operator.as_deref(), Some("Example"));
        assert_eq!(id.verdict.class(), "failed");
        let Verdict::Failed(why) = &id.verdict else { unreachable!() };
        assert_eq!(why.class(), "bad_signature");
    }
    // The same signature twice: the second is a replay.
    let fields = s.sign(&SEED);
    assert!(check(&v, Some(&fields), Some("ExampleBot")).await.unwrap().verdict.is_verified());
    let id = check(&v, Some(&fields), Some("ExampleBot")).await.unwrap();
    let Verdict::Failed(why) = &id.verdict else { panic!("{id:?}") };
    assert_eq!(why.class(), "replayed_signature");
    assert!(id.refused(true) && !id.refused(false));
}

#[tokio::test]
async fn agents_no_operator_names_are_not_fetched() {
    let s = Setup::new().await;
    let v = s.verifier(&s.operators(true));
    // b.test (an origin of its own) publishes the key too; no operator names it.
    let b = TestOrigin::start_tls([], s.ca.server_config(&[b"http/1.1"])).await;
    serve_directory(&b, &s.key, "b.test");
    let fields = wba_sign(&SEED, &s.keyid(), &b.base_as("b.test"), "site.test", &nonce());
    assert!(check(&v, Some(&fields), None).await.is_none());
    let id = check(&v, Some(&fields), Some("ExampleBot")).await.unwrap();
    assert_eq!(id.verdict, Verdict::Unverified(Why::NoMethod));
    // Example requires verification: this one is refused, whatever impersonators get.
    assert!(id.required && id.refused(false));
    assert_eq!(b.hits(WELL_KNOWN_PATH), 0, "a directory no operator names is never fetched");
}

type Guarded = tower::util::BoxCloneService<
    http::Request<String>,
    http::Response<robotsgate::ingress::IngressBody<String>>,
    std::convert::Infallible,
>;

/// The ingress layer in front of a site counting its requests, with `verifier`; the
/// records seen and the site's count.
fn layer_site(verifier: Verifier) -> (Guarded, Arc<Mutex<Vec<IngressRecord>>>, Arc<AtomicUsize>) {
    let hits = Arc::new(AtomicUsize::new(0));
    let counted = hits.clone();
    let site = tower::service_fn(move |_req: http::Request<String>| {
        counted.fetch_add(1, Ordering::SeqCst);
        async { Ok::<_, std::convert::Infallible>(http::Response::new(String::from("page"))) }
    });
    let seen = Arc::new(Mutex::new(Vec::new()));
    let records = seen.clone();
    let layer = IngressLayer::builder()
        .robots_bytes("User-agent: ExampleBot\nDisallow: /private\n\nUser-agent: *\nDisallow: /\n")
        .verifier(Some(Arc::new(verifier)))
        .observer(move |r| records.lock().unwrap().push(r.to_record()))
        .build();
    (tower::util::BoxCloneService::new(layer.layer(site)), seen, hits)
}

fn bot(path: &str, ua: &str, fields: Option<&WbaFields>) -> http::Request<String> {
    let mut b = http::Request::get(path).header("host", "site.test").header("user-agent", ua);
    for (name, value) in fields.iter().flat_map(|f| f.pairs()) {
        b = b.header(name, value);
    }
    b.body(String::new()).unwrap()
}

const EXAMPLEBOT: &str = "Mozilla/5.0 (compatible; ExampleBot/1.0)";
const BROWSER: &str = "Mozilla/5.0 (X11; Linux x86_64; rv:140.0) Gecko/20100101 Firefox/140.0";

#[tokio::test]
async fn the_ingress_layer_lets_signed_bots_in_and_refuses_forged_replayed_and_unverified_ones() {
    let s = Setup::new().await;
    let (svc, seen, hits) = layer_site(s.verifier(&s.operators(true)));
    let status = |r: &http::Response<_>| r.status().as_u16();
    let kind =
        |r: &http::Response<_>| r.headers().get("x-robotsgate").map(|v| v.to_str().unwrap().to_owned());

    // Signed, verified: let in (ExampleBot's group allows /page).
    let fields = s.sign(&SEED);
    let res = svc.clone().oneshot(bot("/page", EXAMPLEBOT, Some(&fields))).await.unwrap();
    assert_eq!((status(&res), kind(&res)), (200, None));
    // Signed with a browser's User-Agent: judged as ExampleBot (not `*`, which disallows all).
    let res = svc.clone().oneshot(bot("/page", BROWSER, Some(&s.sign(&SEED)))).await.unwrap();
    assert_eq!(status(&res), 200);
    let res = svc.clone().oneshot(bot("/private/x", BROWSER, Some(&s.sign(&SEED)))).await.unwrap();
    assert_eq!((status(&res), kind(&res).as_deref()), (403, Some("disallowed")));
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    // Replayed, forged, unsigned: refused, with Accept-Signature.
    for (what, req, expected) in [
        ("replayed", bot("/page", EXAMPLEBOT, Some(&fields)), "identity-failed"),
        ("forged", bot("/page", EXAMPLEBOT, Some(&s.sign(&[9u8; 32]))), "identity-failed"),
        ("unsigned", bot("/page", EXAMPLEBOT, None), "identity-unverified"),
    ] {
        let res = svc.clone().oneshot(req).await.unwrap();
        assert_eq!((status(&res), kind(&res).as_deref()), (403, Some(expected)), "{what}");
        assert_eq!(res.headers()["accept-signature"], ACCEPT_SIGNATURE, "{what}");
    }
    assert_eq!(hits.load(Ordering::SeqCst), 2);

    let recs = seen.lock().unwrap().clone();
    let got: Vec<_> = recs
        .iter()
        .map(|r| {
            (
                r.token.as_deref(),
                r.outcome,
                r.identity,
                r.identity_method,
                r.identity_why,
                r.operator.as_deref(),
            )
        })
        .collect();
    let ex = Some("ExampleBot");
    let op = Some("Example");
    assert_eq!(
        got,
        [
            (ex, "allowed", Some("verified"), Some("signature"), None, op),
            (ex, "allowed", Some("verified"), Some("signature"), None, op),
            (ex, "disallowed", Some("verified"), Some("signature"), None, op),
            (ex, "identity-failed", Some("failed"), None, Some("replayed_signature"), op),
            (ex, "identity-failed", Some("failed"), None, Some("bad_signature"), op),
            (ex, "identity-unverified", Some("unverified"), None, Some("no_method"), op),
        ]
    );
    assert_eq!(recs[5].reason, "identity-unverified");

    // Without `require`, an unverified ExampleBot is judged as what it claims.
    let (svc, _, _) = layer_site(s.verifier(&s.operators(false)));
    let res = svc.oneshot(bot("/page", EXAMPLEBOT, None)).await.unwrap();
    assert_eq!(status(&res), 200);
}

/// Serves a Signature Agent Card naming `token`, with `s`'s key inline, as a.test's
/// directory.
fn serve_card(s: &Setup, token: &str) {
    let card = serde_json::json!({
        "client_name": "Example",
        "jwks": {"keys": [s.key.public().to_jwk()]},
        "web_bot_auth": {"rfc9309-product-token": token, "rfc9309-compliance": true},
    });
    let reply = Reply::typed(httpsig::MEDIA_TYPE, card.to_string()).header("cache-control", "max-age=600");
    s.origin.route(WELL_KNOWN_PATH, reply);
}

/// The token a request signed by `s`'s key, without one in its `User-Agent`, is judged as
/// when the directory is a card naming `token` (a verifier of its own: an empty cache).
async fn judged_as(s: &Setup, token: &str) -> Option<String> {
    serve_card(s, token);
    let v = s.verifier(&s.operators(false));
    let id = check(&v, Some(&s.sign(&SEED)), None).await.unwrap();
    assert!(id.verdict.is_verified(), "{token}: {:?}", id.verdict);
    assert_eq!(id.operator.as_deref(), Some("Example"), "{token}");
    id.token.as_deref().map(str::to_owned)
}

/// A key directory that is a Signature Agent Card naming a product token: a request its
/// key signed, with no token in its `User-Agent`, is judged as the card's token, in the
/// verifier and in the ingress layer (which picks the robots.txt group by it); a card
/// cannot borrow another operator's token.
#[tokio::test]
async fn a_signature_agent_card_names_the_token_a_signed_request_is_judged_as() {
    let s = Setup::new().await;
    assert_eq!(judged_as(&s, "ExampleBot-User").await.as_deref(), Some("ExampleBot-User"));
    assert_eq!(
        judged_as(&s, "ExampleNews").await.as_deref(),
        Some("ExampleNews"),
        "a token no operator lists"
    );
    assert_eq!(
        judged_as(&s, "GPTBot").await.as_deref(),
        Some("ExampleBot"),
        "OpenAI's: the first token instead"
    );

    // In the layer: ExampleBot's group allows /page, `*` (which ExampleNews falls to) does not.
    serve_card(&s, "ExampleNews");
    let (svc, seen, hits) = layer_site(s.verifier(&s.operators(false)));
    let res = svc.clone().oneshot(bot("/page", BROWSER, Some(&s.sign(&SEED)))).await.unwrap();
    assert_eq!(res.status().as_u16(), 403, "judged as ExampleNews, held to `*`");
    assert_eq!(hits.load(Ordering::SeqCst), 0);
    let recs = seen.lock().unwrap().clone();
    assert_eq!((recs[0].token.as_deref(), recs[0].identity), (Some("ExampleNews"), Some("verified")));
}
