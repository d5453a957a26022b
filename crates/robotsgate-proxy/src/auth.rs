//! Proxy authentication: `Proxy-Authorization: Basic` against users whose passwords are
//! stored as Argon2id hashes (PHC strings, made by `robotsgate hash-password`).
//!
//! Argon2 is slow on purpose, so a successful login is remembered for a few minutes (by a
//! keyed SHA-256 of the credentials, never the password itself); a failed one is not. An
//! unknown user costs the same as a wrong password.
//!
//! ```
//! use robotsgate_proxy::auth::{ProxyAuth, hash_password};
//! let hash = hash_password("s3cret").unwrap();
//! let auth = ProxyAuth::new([("alice".to_string(), hash)].into(), "robotsgate").unwrap();
//! assert!(auth.enabled());
//! ```

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use arc_swap::ArcSwap;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use base64::Engine;
use http::HeaderMap;
use http::header::{HeaderValue, PROXY_AUTHENTICATE, PROXY_AUTHORIZATION};
use sha2::{Digest, Sha256};

/// A problem with the configured users.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthError {
    /// A password hash is not a PHC string argon2 understands.
    #[error(
        "user {user:?}: the password hash is not an argon2 PHC string ({reason}); make one with `robotsgate hash-password`"
    )]
    BadHash {
        /// The user.
        user: String,
        /// Why.
        reason: String,
    },
    /// Hashing failed.
    #[error("cannot hash the password: {0}")]
    Hash(String),
}

/// Why a request was not let in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AuthFailure {
    /// No `Proxy-Authorization` header.
    Missing,
    /// Not `Basic base64(user:password)`.
    Malformed,
    /// Unknown user or wrong password.
    Wrong,
}

/// Hashes a password for the configuration (Argon2id, random salt).
pub fn hash_password(password: &str) -> Result<String, AuthError> {
    Argon2::default()
        .hash_password(password.as_bytes())
        .map(|h| h.to_string())
        .map_err(|e| AuthError::Hash(e.to_string()))
}

/// Checks `Proxy-Authorization` against the configured users.
#[derive(Clone)]
pub struct ProxyAuth {
    inner: Arc<Inner>,
}

struct Inner {
    users: ArcSwap<HashMap<String, String>>,
    realm: HeaderValue,
    /// keyed hash of accepted credentials → user
    accepted: moka::sync::Cache<[u8; 32], Arc<str>>,
    key: [u8; 32],
    /// Verified against for unknown users, so they cost the same as known ones.
    dummy: std::sync::OnceLock<String>,
    /// Bounds the Argon2 verifications running at once (each takes ~19 MiB and a core for
    /// tens of milliseconds), so a flood of wrong passwords cannot exhaust memory.
    verifying: tokio::sync::Semaphore,
}

impl std::fmt::Debug for ProxyAuth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyAuth").field("users", &self.inner.users.load().len()).finish_non_exhaustive()
    }
}

/// Checks that `hash` is an Argon2 PHC string this build can verify against.
pub fn check_hash(hash: &str) -> Result<(), String> {
    let parsed = PasswordHash::new(hash).map_err(|e| format!("not a PHC string: {e}"))?;
    let algorithm = parsed.algorithm.as_str();
    if !algorithm.starts_with("argon2") {
        return Err(format!("algorithm {algorithm:?} is not argon2"));
    }
    argon2::Params::try_from(&parsed).map_err(|e| format!("bad argon2 parameters: {e}"))?;
    Ok(())
}

fn check_users(users: &HashMap<String, String>) -> Result<(), AuthError> {
    for (user, hash) in users {
        check_hash(hash).map_err(|reason| AuthError::BadHash { user: user.clone(), reason })?;
    }
    Ok(())
}

impl ProxyAuth {
    /// Users (name → argon2 PHC hash); none means authentication is off.
    pub fn new(users: HashMap<String, String>, realm: &str) -> Result<ProxyAuth, AuthError> {
        check_users(&users)?;
        let realm = HeaderValue::from_str(&format!("Basic realm=\"{}\"", realm.replace('"', "")))
            .unwrap_or(HeaderValue::from_static("Basic realm=\"robotsgate\""));
        let key: [u8; 32] =
            Sha256::digest(format!("{:?}{:?}", std::time::SystemTime::now(), std::process::id())).into();
        Ok(ProxyAuth {
            inner: Arc::new(Inner {
                users: ArcSwap::from_pointee(users),
                realm,
                accepted: moka::sync::Cache::builder()
                    .max_capacity(10_000)
                    .time_to_live(Duration::from_secs(300))
                    .build(),
                key,
                dummy: std::sync::OnceLock::new(),
                verifying: tokio::sync::Semaphore::new(
                    std::thread::available_parallelism().map_or(2, |n| n.get()).clamp(2, 16),
                ),
            }),
        })
    }

    /// Whether any user is configured (then every request must log in).
    pub fn enabled(&self) -> bool {
        !self.inner.users.load().is_empty()
    }

    /// Replaces the users; remembered logins are forgotten.
    pub fn reload(&self, users: HashMap<String, String>) -> Result<(), AuthError> {
        check_users(&users)?;
        self.inner.users.store(Arc::new(users));
        self.inner.accepted.invalidate_all();
        Ok(())
    }

    /// The user a request logs in as.
    pub async fn authenticate(&self, headers: &HeaderMap) -> Result<Arc<str>, AuthFailure> {
        let value = headers.get(PROXY_AUTHORIZATION).ok_or(AuthFailure::Missing)?;
        let mut h = Sha256::new();
        h.update(self.inner.key);
        h.update(value.as_bytes());
        let key: [u8; 32] = h.finalize().into();
        if let Some(user) = self.inner.accepted.get(&key) {
            return Ok(user);
        }
        let text = value.to_str().map_err(|_| AuthFailure::Malformed)?;
        let (scheme, encoded) = text.trim().split_once(' ').ok_or(AuthFailure::Malformed)?;
        if !scheme.eq_ignore_ascii_case("basic") {
            return Err(AuthFailure::Malformed);
        }
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .map_err(|_| AuthFailure::Malformed)?;
        let decoded = String::from_utf8(decoded).map_err(|_| AuthFailure::Malformed)?;
        let (user, password) = decoded.split_once(':').ok_or(AuthFailure::Malformed)?;
        let users = self.inner.users.load();
        let (hash, known) = match users.get(user) {
            Some(h) => (h.clone(), true),
            None => {
                let dummy =
                    self.inner.dummy.get_or_init(|| hash_password("robotsgate-dummy").unwrap_or_default());
                (dummy.clone(), false)
            }
        };
        let password = password.to_owned();
        let Ok(_permit) = self.inner.verifying.acquire().await else {
            return Err(AuthFailure::Wrong);
        };
        let ok = tokio::task::spawn_blocking(move || {
            PasswordHash::new(&hash)
                .is_ok_and(|parsed| Argon2::default().verify_password(password.as_bytes(), &parsed).is_ok())
        })
        .await
        .unwrap_or(false);
        if ok && known {
            let user: Arc<str> = user.into();
            self.inner.accepted.insert(key, user.clone());
            Ok(user)
        } else {
            Err(AuthFailure::Wrong)
        }
    }

    /// The refusal of a request whose credentials failed (`407`).
    pub fn refusal(failure: &AuthFailure) -> robotsgate::Refusal {
        let why = match failure {
            AuthFailure::Missing => "proxy authentication required",
            AuthFailure::Malformed => "Proxy-Authorization must be Basic with user:password",
            AuthFailure::Wrong => "unknown user or wrong password",
        };
        robotsgate::Refusal::new(robotsgate::RefusalKind::AuthRequired, why)
    }

    /// The `407` answer asking for credentials.
    pub fn challenge(
        &self,
        failure: &AuthFailure,
        head: bool,
    ) -> http::Response<http_body_util::Full<bytes::Bytes>> {
        let mut res = Self::refusal(failure).into_response(head);
        res.headers_mut().insert(PROXY_AUTHENTICATE, self.inner.realm.clone());
        res
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn basic(user: &str, pw: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        let v = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{pw}"));
        h.insert(PROXY_AUTHORIZATION, format!("Basic {v}").parse().unwrap());
        h
    }

    #[tokio::test]
    async fn basic_login() {
        let hash = hash_password("pw").unwrap();
        let auth = ProxyAuth::new([("alice".to_string(), hash)].into(), "r").unwrap();
        assert_eq!(&*auth.authenticate(&basic("alice", "pw")).await.unwrap(), "alice");
        assert_eq!(&*auth.authenticate(&basic("alice", "pw")).await.unwrap(), "alice"); // remembered
        assert_eq!(auth.authenticate(&basic("alice", "nope")).await, Err(AuthFailure::Wrong));
        assert_eq!(auth.authenticate(&basic("bob", "pw")).await, Err(AuthFailure::Wrong));
        assert_eq!(auth.authenticate(&HeaderMap::new()).await, Err(AuthFailure::Missing));
        let mut bad = HeaderMap::new();
        bad.insert(PROXY_AUTHORIZATION, "Bearer x".parse().unwrap());
        assert_eq!(auth.authenticate(&bad).await, Err(AuthFailure::Malformed));
        auth.reload(HashMap::new()).unwrap();
        assert!(!auth.enabled());
        assert!(ProxyAuth::new([("x".to_string(), "plain".to_string())].into(), "r").is_err());
    }
}
