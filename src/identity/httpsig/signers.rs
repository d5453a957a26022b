//! Which key signs a request when one proxy serves several crawlers: [`Signers`].

use std::collections::HashMap;
use std::sync::Arc;

use super::sign::RequestSigner;

/// The signers of the crawlers one proxy (or client) serves: one per proxy user, one per
/// product token, and a default for the rest. Each crawler signs with its own key and names
/// its own key directory (`Signature-Agent`), so a site tells them apart.
///
/// [`Signers::pick`] states the precedence once: the proxy user's signer, else the product
/// token's (RFC 9309 tokens match case-insensitively), else the default; `None` when none
/// applies (the request goes unsigned).
///
/// ```
/// use std::sync::Arc;
/// use robotsgate::identity::httpsig::{RequestSigner, Signers, SigningKey};
///
/// let signer = |agent: &str| -> Result<Arc<RequestSigner>, Box<dyn std::error::Error>> {
///     Ok(Arc::new(RequestSigner::new(Arc::new(SigningKey::generate()?), agent)?))
/// };
/// let (default, alice, news) = (signer("https://bots.example")?, signer("https://alice.example")?, signer("https://news.example")?);
/// let signers = Signers::new(Some(default.clone()))
///     .with_user("alice", alice.clone())
///     .with_token("NewsBot", news.clone());
/// assert!(Arc::ptr_eq(signers.pick(Some("alice"), Some("NewsBot")).unwrap(), &alice));
/// assert!(Arc::ptr_eq(signers.pick(Some("bob"), Some("newsbot")).unwrap(), &news));
/// assert!(Arc::ptr_eq(signers.pick(None, Some("OtherBot")).unwrap(), &default));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Signers {
    default: Option<Arc<RequestSigner>>,
    users: HashMap<Box<str>, Arc<RequestSigner>>,
    /// Keyed by the lowercase token.
    tokens: HashMap<Box<str>, Arc<RequestSigner>>,
}

impl Signers {
    /// Signers with `default` for requests no user or token entry names (`None`: those go
    /// unsigned).
    pub fn new(default: Option<Arc<RequestSigner>>) -> Signers {
        Signers { default, users: HashMap::new(), tokens: HashMap::new() }
    }

    /// Requests of the proxy user `user` are signed by `signer`.
    pub fn with_user(mut self, user: impl Into<Box<str>>, signer: Arc<RequestSigner>) -> Signers {
        self.users.insert(user.into(), signer);
        self
    }

    /// Requests made as the product token `token` (when their proxy user has no signer of
    /// its own) are signed by `signer`.
    pub fn with_token(mut self, token: &str, signer: Arc<RequestSigner>) -> Signers {
        self.tokens.insert(token.to_ascii_lowercase().into(), signer);
        self
    }

    /// The default signer.
    pub fn default_signer(&self) -> Option<&Arc<RequestSigner>> {
        self.default.as_ref()
    }

    /// Whether no request would be signed.
    pub fn is_empty(&self) -> bool {
        self.default.is_none() && self.users.is_empty() && self.tokens.is_empty()
    }

    /// The signer of a request by proxy user `user` made as product token `token`: the
    /// user's, else the token's, else the default.
    pub fn pick(&self, user: Option<&str>, token: Option<&str>) -> Option<&Arc<RequestSigner>> {
        if let Some(s) = user.and_then(|u| self.users.get(u)) {
            return Some(s);
        }
        if let Some(token) = token
            && !self.tokens.is_empty()
        {
            let lower = token.to_ascii_lowercase();
            if let Some(s) = self.tokens.get(lower.as_str()) {
                return Some(s);
            }
        }
        self.default.as_ref()
    }
}
