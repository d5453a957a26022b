//! Requests signed on their way out (issue 30): `Robots::builder().sign_with(..)` makes the
//! robots.txt fetches, the tower layer and the reqwest middleware sign every request they
//! let through, and every redirect hop, with Web Bot Auth; a loopback origin records what
//! it received and Cloudflare's `web-bot-auth` crate verifies it against the public key.
//! Signature fields the client sent are replaced; refused requests are not sent at all.

mod support;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use robotsgate::identity::httpsig::SigningKey;
use robotsgate::layer::Mode;
use robotsgate::{Refusal, Robots, RobotsBuilder};
use support::{Reply, TestOrigin, bounded, verify_seen};
use tower::{Service, ServiceBuilder, ServiceExt};

const ROBOTS: &str = "User-agent: *\nDisallow: /private\n";
const AGENT: &str = "https://bot.example";

fn builder(key: &Arc<SigningKey>) -> RobotsBuilder {
    Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .sign_with(key.clone(), AGENT)
}

async fn origin() -> TestOrigin {
    TestOrigin::start([
        ("/robots.txt", Reply::ok(ROBOTS)),
        ("/page", Reply::ok("hello")),
        ("/private/x", Reply::ok("secret")),
    ])
    .await
}

/// A request as a client that signs with a key of its own sent it.
fn forged(url: &str) -> http::Request<Empty<Bytes>> {
    http::Request::get(url)
        .header("signature-agent", "sig1=\"https://impostor.example\"")
        .header("signature-input", "sig1=(\"@authority\");created=1;keyid=\"x\";tag=\"web-bot-auth\"")
        .header("signature", "sig1=:AAAA:")
        .body(Empty::new())
        .unwrap()
}

#[tokio::test]
async fn the_tower_layer_signs_what_it_lets_through_replacing_the_clients_fields() {
    let key = Arc::new(SigningKey::generate().unwrap());
    let origin = origin().await;
    let robots = builder(&key).signature_validity(Duration::from_secs(30)).build().unwrap();
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let mut http = ServiceBuilder::new().layer(robots.layer()).service(client);

    for _ in 0..2 {
        let res = bounded("layer", http.ready().await.unwrap().call(forged(&origin.url("/page")))).await;
        assert_eq!(res.unwrap().status(), 200);
    }
    let seen = origin.seen_for("/page");
    assert_eq!(seen.len(), 2);
    let facts: Vec<_> = seen.iter().map(|s| verify_seen(s, &[key.public()], AGENT)).collect();
    assert_eq!(facts[0].expires - facts[0].created, 30, "the validity set");
    assert_eq!(facts[0].keyid, key.public().thumbprint());
    assert_ne!(facts[0].nonce, facts[1].nonce, "a fresh nonce per request");
    // The robots.txt fetch went signed too, with a nonce of its own.
    let robots_txt = origin.seen_for("/robots.txt");
    assert_eq!(robots_txt.len(), 1);
    let fetched = verify_seen(&robots_txt[0], &[key.public()], AGENT);
    assert_eq!(fetched.expires - fetched.created, 30);
    assert_ne!(fetched.nonce, facts[0].nonce);
    // web-bot-auth refuses the signature with any other key.
    let (other, first) = (SigningKey::generate().unwrap(), seen[0].clone());
    assert!(std::panic::catch_unwind(move || verify_seen(&first, &[other.public()], AGENT)).is_err());

    // A refused request is not sent, signed or not.
    let res = bounded("refused", http.ready().await.unwrap().call(forged(&origin.url("/private/x")))).await;
    assert!(Refusal::from_response(&res.unwrap()).is_some());
    assert_eq!(origin.hits("/private/x"), 0);
}

#[tokio::test]
async fn the_layer_signs_in_mode_off_too_and_not_without_a_signer() {
    let key = Arc::new(SigningKey::generate().unwrap());
    let origin = origin().await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();

    let off = builder(&key).mode(Mode::Off).build().unwrap();
    let mut http = ServiceBuilder::new().layer(off.layer()).service(client.clone());
    let res = bounded("off", http.ready().await.unwrap().call(forged(&origin.url("/page")))).await;
    assert_eq!(res.unwrap().status(), 200);
    verify_seen(&origin.seen_for("/page")[0], &[key.public()], AGENT);

    // Without sign_with, the request goes as the client sent it.
    let plain = Robots::builder().agent("ExampleBot").allow_destination("127.0.0.0/8".parse().unwrap());
    let mut http = ServiceBuilder::new().layer(plain.build().unwrap().layer()).service(client);
    let res = bounded("unsigned", http.ready().await.unwrap().call(forged(&origin.url("/page")))).await;
    assert_eq!(res.unwrap().status(), 200);
    let seen = &origin.seen_for("/page")[1];
    assert_eq!(seen.headers["signature"], "sig1=:AAAA:", "untouched without a signer");
    // The check these tests rest on refuses such a request.
    let seen = seen.clone();
    let key = key.clone();
    assert!(std::panic::catch_unwind(move || verify_seen(&seen, &[key.public()], AGENT)).is_err());
}

#[tokio::test]
async fn the_reqwest_middleware_signs_every_hop() {
    let key = Arc::new(SigningKey::generate().unwrap());
    let origin = origin().await;
    origin.route("/moved", Reply::redirect(302, "/page"));
    let robots = builder(&key).build().unwrap();
    let client = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let http = reqwest_middleware::ClientBuilder::new(client).with(robots.reqwest_middleware()).build();

    let res = bounded(
        "reqwest",
        http.get(origin.url("/moved"))
            .header("signature", "sig1=:AAAA:")
            .header("signature-input", "sig1=();created=1")
            .header("signature-agent", "sig1=\"https://impostor.example\"")
            .send(),
    )
    .await
    .expect("followed");
    assert_eq!(res.text().await.unwrap(), "hello");
    let first = verify_seen(&origin.seen_for("/moved")[0], &[key.public()], AGENT);
    let hop = verify_seen(&origin.seen_for("/page")[0], &[key.public()], AGENT);
    assert_eq!(first.expires - first.created, 60, "the default validity");
    assert_ne!(first.nonce, hop.nonce, "the hop is signed anew");

    let err = bounded("refused", http.get(origin.url("/private/x")).send()).await.expect_err("refused");
    assert!(matches!(err, reqwest_middleware::Error::Middleware(_)));
    assert_eq!(origin.hits("/private/x"), 0);
}

/// `sign_user_with`: the layer signs a proxy user's requests with that user's key and
/// Signature-Agent, the rest with the default key; without a default, the rest go
/// unsigned (and without the client's signature fields).
#[tokio::test]
async fn the_layer_signs_each_proxy_user_with_its_own_key() {
    use robotsgate::layer::ProxyUser;
    let (default, alice) =
        (Arc::new(SigningKey::generate().unwrap()), Arc::new(SigningKey::generate().unwrap()));
    let origin = origin().await;
    let client = Client::builder(TokioExecutor::new()).build_http::<Empty<Bytes>>();
    let as_user = |user: Option<&str>| {
        let mut req = forged(&origin.url("/page"));
        if let Some(u) = user {
            req.extensions_mut().insert(ProxyUser(u.into()));
        }
        req
    };

    let robots =
        builder(&default).sign_user_with("alice", alice.clone(), "https://alice.example").build().unwrap();
    let mut http = ServiceBuilder::new().layer(robots.layer()).service(client.clone());
    for user in [Some("alice"), Some("bob"), None] {
        let res = bounded("layer", http.ready().await.unwrap().call(as_user(user))).await;
        assert_eq!(res.unwrap().status(), 200);
    }
    let seen = origin.seen_for("/page");
    assert_eq!(
        verify_seen(&seen[0], &[alice.public()], "https://alice.example").keyid,
        alice.public().thumbprint()
    );
    assert_eq!(verify_seen(&seen[1], &[default.public()], AGENT).keyid, default.public().thumbprint());
    assert_eq!(verify_seen(&seen[2], &[default.public()], AGENT).keyid, default.public().thumbprint());

    // Alice alone signs: bob's request goes unsigned, the client's fields removed.
    let robots = Robots::builder()
        .agent("ExampleBot")
        .allow_destination("127.0.0.0/8".parse().unwrap())
        .sign_user_with("alice", alice.clone(), "https://alice.example")
        .build()
        .unwrap();
    assert!(robots.layer().signer().is_none(), "no default signer");
    let mut http = ServiceBuilder::new().layer(robots.layer()).service(client);
    for user in ["alice", "bob"] {
        let res = bounded("layer", http.ready().await.unwrap().call(as_user(Some(user)))).await;
        assert_eq!(res.unwrap().status(), 200);
    }
    let seen = origin.seen_for("/page");
    verify_seen(&seen[3], &[alice.public()], "https://alice.example");
    for name in ["signature", "signature-input", "signature-agent"] {
        assert!(seen[4].headers.get(name).is_none(), "bob's request carries no {name}");
    }
}
