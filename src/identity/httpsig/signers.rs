//! Which key signs a request when one proxy serves several crawlers: [`Signers`].

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arc_swap::ArcSwap;

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
/// assert!(Arc::ptr_eq(&signers.pick(Some("alice"), Some("NewsBot")).unwrap(), &alice));
/// assert!(Arc::ptr_eq(&signers.pick(Some("bob"), Some("newsbot")).unwrap(), &news));
/// assert!(Arc::ptr_eq(&signers.pick(None, Some("OtherBot")).unwrap(), &default));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
///
/// A proxy's configuration reload can re-sort the named signers ([`Signers::reload`]: a name
/// that became a proxy user signs as one), for the requests picked from then on; the
/// default stays what it was built with.
pub struct Signers {
    default: Option<Arc<RequestSigner>>,
    named: ArcSwap<Named>,
}

/// The signers by proxy user and by product token.
#[derive(Clone, Default)]
struct Named {
    users: HashMap<Box<str>, Arc<RequestSigner>>,
    /// Keyed by the lowercase token.
    tokens: HashMap<Box<str>, Arc<RequestSigner>>,
}

impl Default for Signers {
    fn default() -> Signers {
        Signers::new(None)
    }
}

/// A copy with the same signers now; a later [`Signers::reload`] of one leaves the other.
impl Clone for Signers {
    fn clone(&self) -> Signers {
        Signers { default: self.default.clone(), named: ArcSwap::new(self.named.load_full()) }
    }
}

impl fmt::Debug for Signers {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let named = self.named.load();
        let mut users: Vec<&str> = named.users.keys().map(|u| &**u).collect();
        let mut tokens: Vec<&str> = named.tokens.keys().map(|t| &**t).collect();
        users.sort_unstable();
        tokens.sort_unstable();
        f.debug_struct("Signers")
            .field("default", &self.default.as_ref().map(|s| s.agent()))
            .field("users", &users)
            .field("tokens", &tokens)
            .finish()
    }
}

impl Signers {
    /// Signers with `default` for requests no user or token entry names (`None`: those go
    /// unsigned).
    pub fn new(default: Option<Arc<RequestSigner>>) -> Signers {
        Signers { default, named: ArcSwap::from_pointee(Named::default()) }
    }

    /// `self` with its named signers changed by `f` (built once: the `Arc` is not shared).
    fn edit(self, f: impl FnOnce(&mut Named)) -> Signers {
        let mut named = Arc::unwrap_or_clone(self.named.into_inner());
        f(&mut named);
        Signers { default: self.default, named: ArcSwap::from_pointee(named) }
    }

    /// Requests of the proxy user `user` are signed by `signer`.
    pub fn with_user(self, user: impl Into<Box<str>>, signer: Arc<RequestSigner>) -> Signers {
        let user = user.into();
        self.edit(|n| {
            n.users.insert(user, signer);
        })
    }

    /// Requests made as the product token `token` (when their proxy user has no signer of
    /// its own) are signed by `signer`.
    pub fn with_token(self, token: &str, signer: Arc<RequestSigner>) -> Signers {
        self.edit(|n| {
            n.tokens.insert(token.to_ascii_lowercase().into(), signer);
        })
    }

    /// Replaces the user and token signers with `new`'s, for the requests picked from now
    /// on (shared by every holder of this `Signers`, e.g. a layer's services). The default
    /// signer stays: whether a layer signs at all is settled when it is built.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use robotsgate::identity::httpsig::{RequestSigner, Signers, SigningKey};
    ///
    /// let carol = Arc::new(RequestSigner::new(Arc::new(SigningKey::generate()?), "https://carol.example")?);
    /// let signers = Signers::new(None).with_token("carol", carol.clone());
    /// assert!(signers.pick(Some("carol"), None).is_none());
    /// // carol became a proxy user: her key signs her requests, no longer the token's.
    /// signers.reload(&Signers::new(None).with_user("carol", carol.clone()));
    /// assert!(Arc::ptr_eq(&signers.pick(Some("carol"), None).unwrap(), &carol));
    /// assert!(signers.pick(None, Some("carol")).is_none());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn reload(&self, new: &Signers) {
        self.named.store(new.named.load_full());
    }

    /// The default signer.
    pub fn default_signer(&self) -> Option<&Arc<RequestSigner>> {
        self.default.as_ref()
    }

    /// Whether no request would be signed.
    pub fn is_empty(&self) -> bool {
        let named = self.named.load();
        self.default.is_none() && named.users.is_empty() && named.tokens.is_empty()
    }

    /// The signer of a request by proxy user `user` made as product token `token`: the
    /// user's, else the token's, else the default.
    pub fn pick(&self, user: Option<&str>, token: Option<&str>) -> Option<Arc<RequestSigner>> {
        let named = self.named.load();
        if let Some(s) = user.and_then(|u| named.users.get(u)) {
            return Some(s.clone());
        }
        if let Some(token) = token
            && !named.tokens.is_empty()
        {
            let lower = token.to_ascii_lowercase();
            if let Some(s) = named.tokens.get(lower.as_str()) {
                return Some(s.clone());
            }
        }
        self.default.clone()
    }
}
