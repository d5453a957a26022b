//! Web Bot Auth on the egress side (`[identity]`): the keys on disk, the signer the robots
//! layer signs forwarded requests with, and the key directory served on a listener of its
//! own (`directory_listen`) at `/.well-known/http-message-signatures-directory`.
//!
//! Key files are private JWKs (RFC 8037, what `robotsgate identity keygen` writes) or
//! PKCS#8 PEM (`openssl genpkey -algorithm ed25519`). Rotation: the directory lists
//! `signing_key` and every key of `published_keys`, and its response carries one signature
//! per key, so a new key can be published before it signs and an old one kept published
//! until its last signatures have expired.
//!
//! `[identity.users.NAME]`: one proxy serving several crawlers. The requests of the proxy
//! user NAME (an `[auth]` user), else those made as the product token NAME, are signed
//! with that entry's key and `Signature-Agent`; the rest (and every robots.txt fetch,
//! shared by all) with the default `signing_key`. The directory listener serves an entry's
//! keys where the request names its `signature_agent`'s host and directory path, the
//! default keys at the well-known path of any other host.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use robotsgate::identity::httpsig::{
    Price, RequestSigner, SignError, Signers, SigningKey, WELL_KNOWN_PATH, directory_json, directory_response,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;

/// The private key file `robotsgate identity keygen` writes.
pub const KEY_FILE: &str = "identity.key";
/// The public JWK file `robotsgate identity keygen` writes.
pub const JWK_FILE: &str = "identity.jwk";

/// Connections the directory listener serves at once.
const MAX_DIRECTORY_CONNECTIONS: usize = 256;

/// Why the identity settings cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum IdentityError {
    /// A key file cannot be read or is not an Ed25519 private key.
    #[error("identity.{key}: cannot use {path}: {why}")]
    Key {
        /// `signing_key` or `published_keys`.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// A key file of `[identity.users.NAME]` cannot be read or is not an Ed25519 private
    /// key.
    #[error("identity.users.{user}: cannot use {path}: {why}")]
    UserKey {
        /// NAME.
        user: String,
        /// The file.
        path: PathBuf,
        /// Why.
        why: String,
    },
    /// The `Signature-Agent` cannot be used.
    #[error("identity.signature_agent: {0}")]
    Agent(SignError),
    /// The `Signature-Agent` of `[identity.users.NAME]` cannot be used.
    #[error("identity.users.{0}.signature_agent: {1}")]
    UserAgent(String, SignError),
    /// `max_price` is not a price.
    #[error("identity.max_price: {0}")]
    MaxPrice(robotsgate::identity::httpsig::PriceError),
    /// The directory listener could not be bound.
    #[error("cannot listen on {addr} (identity.directory_listen): {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// `keygen` would overwrite a key.
    #[error(
        "{0} exists: pass --force to replace it (the old key stops signing; keep it in \
         identity.published_keys until its last signatures have expired)"
    )]
    Exists(PathBuf),
    /// A file could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
}

/// Reads a private key: a private JWK (JSON) or PKCS#8 PEM. A file others may read is
/// used, with a warning.
pub fn read_key(path: &Path) -> Result<SigningKey, String> {
    let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
    let key = parse_key(&text)?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        if let Ok(meta) = std::fs::metadata(path)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path = %path.display(), "the identity key can be read by others; chmod 600 it");
        }
    }
    Ok(key)
}

/// [`read_key`] of a file's text.
fn parse_key(text: &str) -> Result<SigningKey, String> {
    let text = text.trim();
    if text.starts_with('{') {
        let jwk: serde_json::Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
        return SigningKey::from_jwk(&jwk).map_err(|e| e.to_string());
    }
    let body = text
        .strip_prefix("-----BEGIN PRIVATE KEY-----")
        .and_then(|t| t.strip_suffix("-----END PRIVATE KEY-----"))
        .ok_or("neither a private JWK nor a PKCS#8 PEM (-----BEGIN PRIVATE KEY-----)")?;
    let b64: String = body.split_whitespace().collect();
    use base64::Engine as _;
    let der = base64::engine::general_purpose::STANDARD.decode(b64).map_err(|e| format!("bad PEM: {e}"))?;
    SigningKey::from_pkcs8_der(&der).map_err(|e| e.to_string())
}

/// The keys of `[identity]`: the signing key first, then the other published ones.
/// `None` without `signing_key`.
pub fn keys(config: &Config) -> Result<Option<Vec<Arc<SigningKey>>>, IdentityError> {
    let s = &config.identity;
    if s.signing_key.is_empty() {
        return Ok(None);
    }
    let load = |key: &'static str, path: &Path| {
        read_key(path).map(Arc::new).map_err(|why| IdentityError::Key { key, path: path.to_owned(), why })
    };
    let mut keys = vec![load("signing_key", Path::new(&s.signing_key))?];
    for path in &s.published_keys {
        let key = load("published_keys", path)?;
        if !keys.iter().any(|k| k.public() == key.public()) {
            keys.push(key);
        }
    }
    Ok(Some(keys))
}

/// One `[identity.users.NAME]` entry, its keys read.
#[derive(Debug, Clone)]
pub struct UserIdentity {
    /// NAME.
    pub name: String,
    /// Whether NAME is an `[auth]` user (else it is a product token).
    pub is_user: bool,
    /// Its signing key first, then its other published ones.
    pub keys: Vec<Arc<SigningKey>>,
    /// Its `Signature-Agent`.
    pub signature_agent: String,
}

/// The entries of `[identity.users]`, their key files read.
pub fn users(config: &Config) -> Result<Vec<UserIdentity>, IdentityError> {
    let mut out = Vec::with_capacity(config.identity.users.len());
    for (name, entry) in &config.identity.users {
        let load = |path: &Path| {
            read_key(path).map(Arc::new).map_err(|why| IdentityError::UserKey {
                user: name.clone(),
                path: path.to_owned(),
                why,
            })
        };
        let mut keys = vec![load(Path::new(entry.signing_key.trim()))?];
        for path in &entry.published_keys {
            let key = load(path)?;
            if !keys.iter().any(|k| k.public() == key.public()) {
                keys.push(key);
            }
        }
        RequestSigner::new(keys[0].clone(), &entry.signature_agent)
            .map_err(|e| IdentityError::UserAgent(name.clone(), e))?;
        out.push(UserIdentity {
            name: name.clone(),
            is_user: is_proxy_user(config, name),
            keys,
            signature_agent: entry.signature_agent.clone(),
        });
    }
    Ok(out)
}

/// Whether `[identity.users.NAME]` stands for the proxy user NAME of `config` (an `[auth]`
/// user), else for the product token NAME.
pub fn is_proxy_user(config: &Config, name: &str) -> bool {
    config.auth.users.contains_key(name)
}

/// The signers of the `[identity.users]` entries, made once at start (their key files are
/// read then), sorted into proxy users' and product tokens' by each configuration's
/// `[auth] users` ([`UserSigners::sorted`]): a reload that changes `[auth] users` sorts
/// them anew, other `[identity]` changes wait for a restart.
#[derive(Debug, Clone, Default)]
pub struct UserSigners(Vec<(String, Arc<RequestSigner>)>);

impl UserSigners {
    /// The signers of `users`, their signatures valid for `config`'s `[identity] validity`.
    pub fn new(config: &Config, users: &[UserIdentity]) -> Result<UserSigners, IdentityError> {
        let mut out = Vec::with_capacity(users.len());
        for u in users {
            let signer = RequestSigner::new(u.keys[0].clone(), &u.signature_agent)
                .map_err(|e| IdentityError::UserAgent(u.name.clone(), e))?;
            out.push((u.name.clone(), Arc::new(signer.validity(config.identity.validity.0))));
        }
        Ok(UserSigners(out))
    }

    /// The signers sorted by `config` ([`is_proxy_user`]), without a default: what
    /// [`Signers::reload`] takes.
    pub fn sorted(&self, config: &Config) -> Signers {
        self.0.iter().fold(Signers::new(None), |signers, (name, signer)| match is_proxy_user(config, name) {
            true => signers.with_user(name.as_str(), signer.clone()),
            false => signers.with_token(name, signer.clone()),
        })
    }
}

/// The signer of forwarded requests, with `[identity] signing_key`.
pub fn signer(config: &Config) -> Result<Option<Arc<RequestSigner>>, IdentityError> {
    let Some(keys) = keys(config)? else { return Ok(None) };
    let s = &config.identity;
    let signer = RequestSigner::new(keys[0].clone(), &s.signature_agent).map_err(IdentityError::Agent)?;
    Ok(Some(Arc::new(signer.validity(s.validity.0))))
}

/// Pay per crawl's `[identity] max_price`: `None` when off.
pub fn max_price(config: &Config) -> Result<Option<Price>, IdentityError> {
    let text = config.identity.max_price.trim();
    if text.is_empty() {
        return Ok(None);
    }
    text.parse().map(Some).map_err(IdentityError::MaxPrice)
}

/// The key directory JSON of `[identity]` (what `robotsgate identity directory` prints).
pub fn directory_text(keys: &[Arc<SigningKey>]) -> String {
    directory_json(keys.iter().map(|k| k.public()))
}

/// Writes a new key pair: `dir/identity.key` (the private JWK, mode 0600) and
/// `dir/identity.jwk` (the public JWK, `kid` its RFC 7638 thumbprint). Neither is replaced
/// without `force`.
pub fn keygen(dir: &Path, force: bool) -> Result<(PathBuf, PathBuf, SigningKey), IdentityError> {
    let (key_path, jwk_path) = (dir.join(KEY_FILE), dir.join(JWK_FILE));
    if !force && let Some(p) = [&key_path, &jwk_path].into_iter().find(|p| p.exists()) {
        return Err(IdentityError::Exists(p.clone()));
    }
    let key = SigningKey::generate().map_err(|e| IdentityError::Key {
        key: "signing_key",
        path: key_path.clone(),
        why: e.to_string(),
    })?;
    let write = |path: &Path, text: String, mode: u32| {
        write_file(path, text.as_bytes(), mode, force)
            .map_err(|source| IdentityError::Write { path: path.to_owned(), source })
    };
    std::fs::create_dir_all(dir).map_err(|source| IdentityError::Write { path: dir.to_owned(), source })?;
    write(&key_path, format!("{}\n", key.to_private_jwk()), 0o600)?;
    write(&jwk_path, format!("{}\n", key.public().to_jwk()), 0o644)?;
    Ok((key_path, jwk_path, key))
}

/// Writes `data` to a new file (an existing one only with `replace`) with `mode`.
fn write_file(path: &Path, data: &[u8], mode: u32, replace: bool) -> std::io::Result<()> {
    use std::io::Write as _;
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true);
    if replace {
        opts.create(true).truncate(true);
    } else {
        opts.create_new(true);
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        opts.mode(mode);
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut f = opts.open(path)?;
    #[cfg(unix)]
    {
        // `mode` applies to new files only: a replaced one is tightened too.
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode))?;
    }
    f.write_all(data)?;
    f.sync_all()
}

/// The key directory listener (`[identity] directory_listen`): `GET` (or `HEAD`)
/// `/.well-known/http-message-signatures-directory` answers the directory of every
/// published key, signed for the request's authority at that moment (one response
/// signature per key, valid for `validity`), `Cache-Control: no-store`; anything else is
/// `404` (or `405` for another method on the directory).
pub struct DirectoryServer {
    listener: TcpListener,
    routes: Arc<Routes>,
    validity: Duration,
}

/// Which keys the directory listener answers with: `[identity.users]` entries by the host
/// and path of their directory URL, the default keys at the well-known path otherwise.
#[derive(Debug, Default)]
pub struct Routes {
    default: Vec<Arc<SigningKey>>,
    /// (lowercase host, path, keys).
    users: Vec<(String, String, Vec<Arc<SigningKey>>)>,
}

impl Routes {
    /// The default keys, and the users' (each at its `signature_agent`'s directory).
    pub fn new(default: Vec<Arc<SigningKey>>, users: &[UserIdentity]) -> Routes {
        let users = users
            .iter()
            .filter_map(|u| {
                let dir = robotsgate::identity::httpsig::DirectoryUrl::from_member(&u.signature_agent, None)
                    .ok()?;
                let url = url::Url::parse(dir.as_str()).ok()?;
                Some((url.host_str()?.to_ascii_lowercase(), url.path().to_owned(), u.keys.clone()))
            })
            .collect();
        Routes { default, users }
    }

    /// The keys to answer `request` with; `None` when its path is no directory's.
    pub fn keys_for(&self, request: &http::request::Parts) -> Option<&[Arc<SigningKey>]> {
        let authority = request
            .uri
            .authority()
            .map(|a| a.as_str())
            .or_else(|| request.headers.get(http::header::HOST).and_then(|h| h.to_str().ok()));
        let host = authority.map(|a| {
            let host = a
                .rsplit_once(':')
                .filter(|(_, p)| p.bytes().all(|b| b.is_ascii_digit()))
                .map_or(a, |(h, _)| h);
            host.to_ascii_lowercase()
        });
        let path = request.uri.path();
        if let Some(host) = host
            && let Some((_, _, keys)) = self.users.iter().find(|(h, p, _)| *h == host && p == path)
        {
            return Some(keys);
        }
        (path == WELL_KNOWN_PATH).then_some(&self.default[..])
    }
}

impl std::fmt::Debug for DirectoryServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirectoryServer").field("routes", &self.routes).finish_non_exhaustive()
    }
}

impl DirectoryServer {
    /// Binds `directory_listen`, when set.
    pub async fn bind(config: &Config) -> Result<Option<DirectoryServer>, IdentityError> {
        let Some(addr) = config.identity.directory_listen else { return Ok(None) };
        let Some(keys) = keys(config)? else { return Ok(None) };
        let routes = Arc::new(Routes::new(keys, &users(config)?));
        let listener =
            TcpListener::bind(addr).await.map_err(|source| IdentityError::Listen { addr, source })?;
        Ok(Some(DirectoryServer { listener, routes, validity: config.identity.validity.0 }))
    }

    /// The bound address.
    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.listener.local_addr()
    }

    /// Serves until `stop` is cancelled.
    pub async fn run(self, stop: CancellationToken) {
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_DIRECTORY_CONNECTIONS));
        loop {
            let Ok(permit) = slots.clone().acquire_owned().await else { return };
            let stream = tokio::select! {
                _ = stop.cancelled() => return,
                a = self.listener.accept() => match a {
                    Ok((stream, _)) => stream,
                    Err(e) => {
                        crate::accept::failed("identity directory", &e).await;
                        continue;
                    }
                },
            };
            let (routes, validity) = (self.routes.clone(), self.validity);
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req: Request<Incoming>| {
                    let res = answer(&routes, &req.into_parts().0, SystemTime::now(), validity);
                    async move { Ok::<_, Infallible>(res) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .timer(hyper_util::rt::TokioTimer::new())
                    .header_read_timeout(Duration::from_secs(10))
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
                drop(permit);
            });
        }
    }
}

/// The directory listener's answer to `request` at `now` (no I/O).
pub fn answer(
    routes: &Routes,
    request: &http::request::Parts,
    now: SystemTime,
    validity: Duration,
) -> Response<Full<Bytes>> {
    let plain = |status: StatusCode, text: &'static str| {
        let mut res = Response::new(Full::new(Bytes::from_static(text.as_bytes())));
        *res.status_mut() = status;
        res.headers_mut().insert(http::header::CONTENT_TYPE, http::HeaderValue::from_static("text/plain"));
        res
    };
    let Some(keys) = routes.keys_for(request) else {
        return plain(StatusCode::NOT_FOUND, "not found\n");
    };
    if request.method != Method::GET && request.method != Method::HEAD {
        let mut res = plain(StatusCode::METHOD_NOT_ALLOWED, "GET or HEAD\n");
        res.headers_mut().insert(http::header::ALLOW, http::HeaderValue::from_static("GET, HEAD"));
        return res;
    }
    let refs: Vec<&SigningKey> = keys.iter().map(|k| &**k).collect();
    match directory_response(&refs, request, now, validity) {
        Ok(res) => {
            let head = request.method == Method::HEAD;
            res.map(|body| Full::new(if head { Bytes::new() } else { body }))
        }
        // No authority (no Host): nothing to bind the signatures to.
        Err(e) => {
            tracing::debug!(error = %e, "key directory request not answered");
            plain(StatusCode::BAD_REQUEST, "the request names no authority (Host)\n")
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn section(toml: &str) -> Result<Config, String> {
        Config::parse("t.toml", toml).map_err(|e| e.to_string())
    }

    #[test]
    fn the_section_is_checked_before_any_file_is_read() {
        assert!(section("").is_ok());
        let e = section("[identity]\nsignature_agent = \"https://bot.example\"\n").unwrap_err();
        assert!(e.contains("identity.signature_agent") && e.contains("signing_key"), "{e}");
        let e = section("[identity]\nsigning_key = \"k\"\n").unwrap_err();
        assert!(e.contains("identity.signature_agent"), "{e}");
        let e = section("[identity]\nsigning_key = \"k\"\nsignature_agent = \"http://bot.example\"\n")
            .unwrap_err();
        assert!(e.contains("identity.signature_agent"), "{e}");
        let e = section(
            "[identity]\nsigning_key = \"k\"\nsignature_agent = \"https://bot.example\"\nvalidity = \"0s\"\n",
        )
        .unwrap_err();
        assert!(e.contains("identity.validity"), "{e}");
        let e = section("[identity]\ndirectory_listen = \"127.0.0.1:0\"\n").unwrap_err();
        assert!(e.contains("identity.directory_listen"), "{e}");
        let ok =
            section("[identity]\nsigning_key = \"k\"\nsignature_agent = \"https://bot.example\"\n").unwrap();
        assert_eq!(ok.identity.validity.0, Duration::from_secs(60));
    }

    #[test]
    fn keys_are_read_as_jwk_or_pkcs8_pem() {
        let key = SigningKey::generate().unwrap();
        let jwk = parse_key(&key.to_private_jwk().to_string()).unwrap();
        assert_eq!(jwk.public(), key.public());
        // RFC 9421 Appendix B.1.4, the PEM form of its Ed25519 test key.
        let pem = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ+DYvh6SEqVTm50DFtMDoQikTmiCqirVv9mWG9qfSnF\n-----END PRIVATE KEY-----\n";
        let k = parse_key(pem).unwrap();
        assert_eq!(k.public().thumbprint(), "poqkLGiymh_W0uP6PZFw-dvez3QJT5SolqXBCW38r0U");
        assert!(parse_key(&key.public().to_jwk().to_string()).unwrap_err().contains("no d"));
        assert!(parse_key("hello").is_err());
        assert!(parse_key("-----BEGIN PRIVATE KEY-----\n!!\n-----END PRIVATE KEY-----").is_err());
    }

    #[test]
    fn the_directory_answers_only_its_path() {
        let routes = Routes::new(vec![Arc::new(SigningKey::generate().unwrap())], &[]);
        let req = |method: &str, uri: &str| {
            http::Request::builder()
                .method(method)
                .uri(uri)
                .header("host", "bot.example")
                .body(())
                .unwrap()
                .into_parts()
                .0
        };
        let at = |r| answer(&routes, &r, SystemTime::now(), Duration::from_secs(60));
        let ok = at(req("GET", WELL_KNOWN_PATH));
        assert_eq!(ok.status(), 200);
        assert_eq!(ok.headers()["cache-control"], "no-store");
        assert!(ok.headers().contains_key("signature"));
        assert_eq!(at(req("GET", "/")).status(), 404);
        assert_eq!(at(req("POST", WELL_KNOWN_PATH)).status(), 405);
        let no_host = http::Request::get(WELL_KNOWN_PATH).body(()).unwrap().into_parts().0;
        assert_eq!(at(no_host).status(), 400);
    }

    #[test]
    fn users_directories_are_routed_by_host_and_path() {
        let key = || Arc::new(SigningKey::generate().unwrap());
        let (default, alice, news) = (key(), key(), key());
        let user = |name: &str, k: &Arc<SigningKey>, agent: &str| UserIdentity {
            name: name.into(),
            is_user: true,
            keys: vec![k.clone()],
            signature_agent: agent.into(),
        };
        let routes = Routes::new(
            vec![default.clone()],
            &[
                user("alice", &alice, "https://Alice.example"),
                user("NewsBot", &news, "https://news.example/keys.json"),
            ],
        );
        let at = |host: &str, path: &str| {
            let parts = http::Request::get(path).header("host", host).body(()).unwrap().into_parts().0;
            routes.keys_for(&parts).map(|k| k[0].public().thumbprint().to_owned())
        };
        let id = |k: &Arc<SigningKey>| Some(k.public().thumbprint().to_owned());
        assert_eq!(at("alice.example", WELL_KNOWN_PATH), id(&alice));
        assert_eq!(at("ALICE.example:8443", WELL_KNOWN_PATH), id(&alice));
        assert_eq!(at("news.example", "/keys.json"), id(&news));
        assert_eq!(at("news.example", WELL_KNOWN_PATH), id(&default));
        assert_eq!(at("bot.example", WELL_KNOWN_PATH), id(&default));
        assert_eq!(at("bot.example", "/keys.json"), None);
    }
}
