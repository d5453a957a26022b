//! Choosing the product token a request is checked for.

use std::collections::HashMap;
use std::sync::Arc;

use http::HeaderName;
use http::header::USER_AGENT;

use super::ProxyUser;
use crate::rep::is_valid_product_token;

/// Why no product token could be chosen for a request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TokenError {
    /// The request does not say which crawler it is for.
    #[error("no product token for this request: {0}")]
    Missing(String),
    /// The token given is not an RFC 9309 product token.
    #[error("invalid product token {0:?} (letters, '-' and '_' only)")]
    Invalid(String),
}

/// Chooses the product token a request is checked for. It may also change the request
/// (e.g. remove a header that carried the token, before the request is forwarded).
pub trait SelectToken: Send + Sync + 'static {
    /// The token for this request.
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError>;
}

impl<F> SelectToken for F
where
    F: Fn(&mut http::request::Parts) -> Result<Arc<str>, TokenError> + Send + Sync + 'static,
{
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError> {
        self(parts)
    }
}

/// The built-in ways to choose a product token.
#[derive(Debug, Clone)]
pub enum TokenSelector {
    /// Always the same token.
    Fixed(Arc<str>),
    /// By the authenticated proxy user: a per-user token, else the default.
    ProxyUser {
        /// user → token
        users: HashMap<String, Arc<str>>,
        /// For users not listed (none: such requests are refused).
        default: Option<Arc<str>>,
    },
    /// From a request header, which is removed before forwarding.
    Header {
        /// The header.
        name: HeaderName,
        /// When the header is absent (none: such requests are refused).
        default: Option<Arc<str>>,
    },
    /// By the request's `User-Agent`: the first rule whose text it contains.
    UserAgent {
        /// (substring, token), in order.
        rules: Vec<(String, Arc<str>)>,
        /// When no rule matches (none: such requests are refused).
        default: Option<Arc<str>>,
    },
}

impl SelectToken for TokenSelector {
    fn select(&self, parts: &mut http::request::Parts) -> Result<Arc<str>, TokenError> {
        let or_default = |d: &Option<Arc<str>>, why: String| d.clone().ok_or(TokenError::Missing(why));
        match self {
            TokenSelector::Fixed(t) => Ok(t.clone()),
            TokenSelector::ProxyUser { users, default } => match parts.extensions.get::<ProxyUser>() {
                Some(u) => match users.get(&*u.0) {
                    Some(t) => Ok(t.clone()),
                    None => or_default(default, format!("proxy user {:?} has no product token", u.0)),
                },
                None => or_default(default, "no proxy user".into()),
            },
            TokenSelector::Header { name, default } => match parts.headers.remove(name) {
                Some(v) => {
                    let t = v
                        .to_str()
                        .map_err(|_| TokenError::Invalid(String::from_utf8_lossy(v.as_bytes()).into()))?;
                    let t = t.trim();
                    if !is_valid_product_token(t) {
                        return Err(TokenError::Invalid(t.to_owned()));
                    }
                    Ok(t.into())
                }
                None => or_default(default, format!("no {name} header")),
            },
            TokenSelector::UserAgent { rules, default } => {
                let ua = parts.headers.get(USER_AGENT).and_then(|v| v.to_str().ok()).unwrap_or("");
                match rules.iter().find(|(needle, _)| ua.contains(needle.as_str())) {
                    Some((_, t)) => Ok(t.clone()),
                    None => or_default(default, format!("no product token for User-Agent {ua:?}")),
                }
            }
        }
    }
}
