//! The signature base of RFC 9421 §2.5 for the components Web Bot Auth and key directories
//! use: the derived components `@method`, `@target-uri`, `@authority`, `@scheme`, `@path`,
//! `@query` and `@status` (§2.2), HTTP fields (§2.1) whole or as one Dictionary member
//! (`;key=`, §2.1.2), and `;req` (§2.4: a response signature over its request's
//! components). Other components and parameters (`@request-target`, `@query-param`, `;sf`,
//! `;bs`, `;tr`) are refused as unsupported, as §3.2 asks of parameters a verifier does
//! not understand.

use http::HeaderMap;
use robotsgate_rep::sf::{self, BareItem, InnerList, Item};

/// Why a signature base could not be made.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BaseError {
    /// A component identifier this implementation does not support.
    #[error("unsupported component {0}")]
    Unsupported(String),
    /// A component identifier that is not valid (not a lowercase String, bad parameter).
    #[error("invalid component {0}")]
    Invalid(String),
    /// The same component is covered twice (§2.5 forbids it).
    #[error("component {0} covered twice")]
    Duplicate(String),
    /// The message has no value for a covered component.
    #[error("the message has no {0}")]
    Missing(String),
    /// A value cannot go into a signature base (not ASCII).
    #[error("the value of {0} is not ASCII")]
    NotAscii(String),
}

/// The request a signature (or a response signature's `;req` components) is over.
#[derive(Debug, Clone, Copy)]
pub struct RequestView<'a> {
    /// The method.
    pub method: &'a http::Method,
    /// The URI as received (origin form or absolute form).
    pub uri: &'a http::Uri,
    /// The header fields.
    pub headers: &'a HeaderMap,
    /// The scheme when the URI has none (origin form): what the connection was.
    pub default_scheme: &'a str,
}

impl<'a> RequestView<'a> {
    /// A view of `parts`, `https` when the URI has no scheme.
    pub fn of(parts: &'a http::request::Parts) -> RequestView<'a> {
        RequestView {
            method: &parts.method,
            uri: &parts.uri,
            headers: &parts.headers,
            default_scheme: "https",
        }
    }

    /// The scheme, lowercase.
    pub fn scheme(&self) -> String {
        self.uri.scheme_str().unwrap_or(self.default_scheme).to_ascii_lowercase()
    }

    /// RFC 9421 §2.2.3: the target URI's authority, host lowercased, without userinfo and
    /// without the scheme's default port; from the URI (absolute form, HTTP/2) or `Host`.
    /// `None` when there is none, or its port is not a port (`site.example:99999`, `:x`):
    /// such a request has no target that a signature could be over.
    pub fn authority(&self) -> Option<String> {
        let authority = match self.uri.authority() {
            Some(a) => a.clone(),
            None => {
                let mut hosts = self.headers.get_all(http::header::HOST).iter();
                let host = hosts.next()?;
                if hosts.next().is_some() {
                    return None; // two Host fields: no single target
                }
                http::uri::Authority::try_from(host.as_bytes()).ok()?
            }
        };
        if authority.port().is_none() && !port_text(authority.as_str()).is_empty() {
            return None;
        }
        let host = authority.host().to_ascii_lowercase();
        let default = match self.scheme().as_str() {
            "http" => Some(80),
            "https" => Some(443),
            _ => None,
        };
        Some(match authority.port_u16() {
            Some(p) if Some(p) != default => format!("{host}:{p}"),
            _ => host,
        })
    }
}

/// The text after an authority's port colon (`""` without one): what follows the host,
/// which for an IPv6 literal ends at its `]`, and any userinfo (up to the last `@`) left out.
fn port_text(authority: &str) -> &str {
    let host_and_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let after_host = host_and_port.rsplit_once(']').map_or(host_and_port, |(_, p)| p);
    after_host.split_once(':').map_or("", |(_, port)| port)
}

/// What a signature covers components of: a request, or a response and its request.
#[derive(Debug, Clone, Copy)]
pub enum Message<'a> {
    /// A request.
    Request(RequestView<'a>),
    /// A response (status, fields) and the request it answers (for `;req`).
    Response {
        /// The status code.
        status: http::StatusCode,
        /// The response's fields.
        headers: &'a HeaderMap,
        /// The request it answers.
        request: RequestView<'a>,
    },
}

/// Appends the signature base of the components of `params` (a `Signature-Input` member:
/// the covered components and the signature parameters) over `message` to `out`: one
/// `"name";params: value` line per component, then the `"@signature-params"` line, the
/// canonical serialization of `params` (RFC 9421 §2.3, §2.5). At most `max_components`.
pub fn signature_base(
    out: &mut String,
    params: &InnerList<'_>,
    message: &Message<'_>,
    max_components: usize,
) -> Result<(), BaseError> {
    let mut seen: Vec<(usize, usize)> = Vec::new();
    for (n, item) in params.iter().enumerate() {
        if n >= max_components {
            return Err(BaseError::Unsupported(format!("more than {max_components} components")));
        }
        let id_start = out.len();
        sf::write_item(out, &item);
        let id_end = out.len();
        let id = &out[id_start..id_end];
        if seen.iter().any(|&(s, e)| out[s..e] == *id) {
            return Err(BaseError::Duplicate(id.to_owned()));
        }
        seen.push((id_start, id_end));
        out.push_str(": ");
        let value = component_value(&item, message, &out[id_start..id_end])?;
        if !value.bytes().all(|b| b == b'\t' || (0x20..0x7f).contains(&b)) {
            return Err(BaseError::NotAscii(out[id_start..id_end].to_owned()));
        }
        out.push_str(&value);
        out.push('\n');
    }
    out.push_str("\"@signature-params\": ");
    sf::write_inner_list(out, params);
    Ok(())
}

/// The value of one component (§2.1, §2.2).
fn component_value(item: &Item<'_>, message: &Message<'_>, id: &str) -> Result<String, BaseError> {
    let BareItem::String(name) = item.bare else {
        return Err(BaseError::Invalid(id.to_owned()));
    };
    let name = name.value();
    let (mut req, mut key) = (false, None);
    for (param, value) in item.params.iter() {
        match (param, value) {
            ("req", BareItem::Boolean(true)) => req = true,
            ("req", _) => return Err(BaseError::Invalid(id.to_owned())),
            ("key", BareItem::String(k)) if !name.starts_with('@') => key = Some(k.value()),
            ("key", _) => return Err(BaseError::Invalid(id.to_owned())),
            _ => return Err(BaseError::Unsupported(id.to_owned())),
        }
    }
    let missing = || BaseError::Missing(id.to_owned());
    let (request, response_headers, status) = match (message, req) {
        (Message::Request(r), false) => (r, None, None),
        (Message::Request(_), true) => return Err(BaseError::Invalid(id.to_owned())),
        (Message::Response { request, .. }, true) => (request, None, None),
        (Message::Response { status, headers, request }, false) => (request, Some(*headers), Some(*status)),
    };
    if let Some(derived) = name.strip_prefix('@') {
        // A response's own derived component is only @status (§2.2: the others are
        // request components, reached from a response with ;req).
        if response_headers.is_some() && derived != "status" {
            return Err(BaseError::Invalid(id.to_owned()));
        }
        let path = || match request.uri.path() {
            "" => "/".to_owned(),
            p => p.to_owned(),
        };
        return match derived {
            "method" => Ok(request.method.as_str().to_owned()),
            "authority" => request.authority().ok_or_else(missing),
            "scheme" => Ok(request.scheme()),
            "target-uri" => {
                let authority = request.authority().ok_or_else(missing)?;
                let query = request.uri.query().map(|q| format!("?{q}")).unwrap_or_default();
                Ok(format!("{}://{authority}{}{query}", request.scheme(), path()))
            }
            "path" => Ok(path()),
            "query" => Ok(format!("?{}", request.uri.query().unwrap_or(""))),
            "status" => status.map(|s| s.as_str().to_owned()).ok_or_else(missing),
            _ => Err(BaseError::Unsupported(id.to_owned())),
        };
    }
    if name.is_empty() || name.bytes().any(|b| b.is_ascii_uppercase()) {
        return Err(BaseError::Invalid(id.to_owned()));
    }
    let headers = response_headers.unwrap_or(request.headers);
    let value = field_value(headers, &name).ok_or_else(missing)?;
    match key {
        None => Ok(value),
        Some(key) => {
            let dict = sf::Dictionary::parse(value.as_bytes()).map_err(|_| missing())?;
            let member = dict.get(&key).ok_or_else(missing)?;
            let mut out = String::new();
            sf::write_member(&mut out, &member);
            Ok(out)
        }
    }
}

/// RFC 9421 §2.1: every line of the field, trimmed, joined by `", "`; `None` when absent.
pub fn field_value(headers: &HeaderMap, name: &str) -> Option<String> {
    let mut lines = headers.get_all(name).iter().peekable();
    lines.peek()?;
    let mut out = String::new();
    for (n, line) in lines.enumerate() {
        if n > 0 {
            out.push_str(", ");
        }
        out.push_str(&String::from_utf8_lossy(line.as_bytes().trim_ascii()));
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base_of(components: &str, parts: &http::request::Parts) -> Result<String, BaseError> {
        let text = format!("s=({components});created=1");
        let dict = sf::Dictionary::parse(text.as_bytes()).unwrap();
        let params = dict.get("s").unwrap().as_inner_list().unwrap();
        let mut out = String::new();
        signature_base(&mut out, &params, &Message::Request(RequestView::of(parts)), 32)?;
        Ok(out)
    }

    fn request(uri: &str, headers: &[(&str, &str)]) -> http::request::Parts {
        let mut b = http::Request::post(uri);
        for (k, v) in headers {
            b = b.header(*k, *v);
        }
        b.body(()).unwrap().into_parts().0
    }

    /// RFC 9421 §2.2's examples of derived components.
    #[test]
    fn derived_components() {
        let p = request("https://www.example.com/path?param=value", &[]);
        let base = base_of(r#""@method" "@target-uri" "@authority" "@scheme" "@path" "@query""#, &p).unwrap();
        assert_eq!(
            base,
            "\"@method\": POST\n\"@target-uri\": https://www.example.com/path?param=value\n\
             \"@authority\": www.example.com\n\"@scheme\": https\n\"@path\": /path\n\"@query\": ?param=value\n\
             \"@signature-params\": (\"@method\" \"@target-uri\" \"@authority\" \"@scheme\" \"@path\" \"@query\");created=1"
        );
        // Origin form: the authority comes from Host, lowercased, the default port dropped.
        let p = request("/x", &[("host", "Example.COM:443")]);
        assert!(base_of(r#""@authority""#, &p).unwrap().starts_with("\"@authority\": example.com\n"));
        let p = request("/x", &[("host", "example.com:8443")]);
        assert!(base_of(r#""@authority""#, &p).unwrap().starts_with("\"@authority\": example.com:8443\n"));
        assert_eq!(
            base_of(r#""@query""#, &request("/x", &[])).unwrap().lines().next(),
            Some("\"@query\": ?")
        );
        assert!(matches!(base_of(r#""@authority""#, &request("/x", &[])), Err(BaseError::Missing(_))));
        assert!(matches!(base_of(r#""@status""#, &p), Err(BaseError::Missing(_))));
    }

    /// RFC 9421 §2.1: combined field lines; §2.1.2: one Dictionary member.
    #[test]
    fn fields() {
        let p = request(
            "/",
            &[
                ("x-list", " a "),
                ("x-list", "b, c"),
                ("x-dict", "a=1, b=2;x=?1, c=(a   b)"),
                ("x-dict", "b=3"),
            ],
        );
        let base = base_of(r#""x-list" "x-dict";key="b" "x-dict";key="c""#, &p).unwrap();
        let lines: Vec<&str> = base.lines().collect();
        assert_eq!(lines[0], "\"x-list\": a, b, c");
        assert_eq!(lines[1], "\"x-dict\";key=\"b\": 3");
        assert_eq!(lines[2], "\"x-dict\";key=\"c\": (a b)");
        assert!(matches!(base_of(r#""x-dict";key="z""#, &p), Err(BaseError::Missing(_))));
        assert!(matches!(base_of(r#""x-none""#, &p), Err(BaseError::Missing(_))));
        assert!(matches!(base_of(r#""x-list" "x-list""#, &p), Err(BaseError::Duplicate(_))));
        assert!(matches!(base_of(r#""X-List""#, &p), Err(BaseError::Invalid(_))));
        assert!(matches!(base_of(r#""x-list";sf"#, &p), Err(BaseError::Unsupported(_))));
        assert!(matches!(base_of(r#""@request-target""#, &p), Err(BaseError::Unsupported(_))));
        assert!(matches!(base_of(r#""x-list";req"#, &p), Err(BaseError::Invalid(_))));
        assert!(matches!(base_of("x-list", &p), Err(BaseError::Invalid(_))));
        let mut p = request("/", &[]);
        p.headers.insert("x-bin", http::HeaderValue::from_bytes("caf\u{e9}".as_bytes()).unwrap());
        assert!(matches!(base_of(r#""x-bin""#, &p), Err(BaseError::NotAscii(_))));
    }

    /// A response signature: `;req` components come from the request, fields without it
    /// from the response.
    #[test]
    fn response_components() {
        let req = request("/.well-known/http-message-signatures-directory", &[("host", "agent.test")]);
        let mut headers = HeaderMap::new();
        headers.insert("content-digest", "sha-256=:x:".parse().unwrap());
        let message = Message::Response {
            status: http::StatusCode::OK,
            headers: &headers,
            request: RequestView::of(&req),
        };
        let text = r#"s=("@authority";req "content-digest" "@status");created=1"#;
        let dict = sf::Dictionary::parse(text.as_bytes()).unwrap();
        let mut out = String::new();
        signature_base(&mut out, &dict.get("s").unwrap().as_inner_list().unwrap(), &message, 32).unwrap();
        assert_eq!(
            out,
            "\"@authority\";req: agent.test\n\"content-digest\": sha-256=:x:\n\"@status\": 200\n\
             \"@signature-params\": (\"@authority\";req \"content-digest\" \"@status\");created=1"
        );
        let text = r#"s=("@authority");created=1"#;
        let dict = sf::Dictionary::parse(text.as_bytes()).unwrap();
        let mut out = String::new();
        let r = signature_base(&mut out, &dict.get("s").unwrap().as_inner_list().unwrap(), &message, 32);
        assert!(matches!(r, Err(BaseError::Invalid(_))));
    }
}
