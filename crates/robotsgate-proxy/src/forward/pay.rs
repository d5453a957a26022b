//! Pay per crawl on the forwarding path: a `402` answer with `crawler-price`, or any answer
//! with a `crawler-error`, is noted in the response's extensions ([`Payment`], recorded by the audit log) and passed on; with
//! `[identity] max_price`, a signed request without a body asking at most that is sent
//! once more with a `crawler-max-price` signed by the same key (the crawler's own, with
//! `[identity.users]`), and that answer goes to the client.

use std::sync::Arc;
use std::time::SystemTime;

use http::header::HeaderValue;
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyExt, Either, Empty};
use robotsgate::identity::httpsig::{
    CRAWLER_CHARGED, CRAWLER_ERROR, CRAWLER_EXACT_PRICE, CRAWLER_MAX_PRICE, CRAWLER_PRICE, Payment, Price,
    RequestSigner, retry_refusal,
};

use robotsgate::layer::SignedWith;

use super::headers::append_via;
use super::{Forwarder, ProxyBody, strip_hop_by_hop};

/// What pay per crawl needs: the most robotsgate pays.
#[derive(Debug, Clone)]
pub(crate) struct Pay {
    pub(crate) max: Price,
}

/// The head of a request kept for its retry (requests without a body only), and the
/// signer that signed it (the layer's [`SignedWith`]), which signs the retry.
pub(super) struct Kept {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    signer: Option<Arc<RequestSigner>>,
}

impl Kept {
    pub(super) fn of(parts: &http::request::Parts, signed: Option<SignedWith>) -> Kept {
        Kept {
            method: parts.method.clone(),
            uri: parts.uri.clone(),
            headers: parts.headers.clone(),
            signer: signed.map(|s| s.0),
        }
    }
}

fn text(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).map(|v| String::from_utf8_lossy(v.as_bytes()).chars().take(128).collect())
}

impl Forwarder {
    /// `res` as the client gets it, when it may be a pay-per-crawl answer: a `402` with
    /// `crawler-price`, or an answer with a `crawler-error`, is noted, and a priced `402`
    /// retried when it can be (`kept` is the request's head when it had no body and pay per
    /// crawl is on; `has_body` whether it had one).
    pub(super) async fn priced(
        &self,
        res: Response<ProxyBody>,
        kept: Option<Kept>,
        has_body: bool,
    ) -> Response<ProxyBody> {
        let error = text(res.headers(), CRAWLER_ERROR);
        let price = match res.status() {
            StatusCode::PAYMENT_REQUIRED => text(res.headers(), CRAWLER_PRICE),
            _ => None,
        };
        if price.is_none() && error.is_none() {
            return res;
        }
        let pay = self.inner.pay.as_ref();
        // A request with a body is not kept: whether it was signed, its body is the reason.
        let signed = has_body || kept.as_ref().is_some_and(|k| k.signer.is_some());
        let no_retry = match &price {
            Some(price) => retry_refusal(price, pay.map(|p| &p.max), signed, has_body),
            None => Some("no price"),
        };
        let mut payment = Payment {
            status: res.status().as_u16(),
            price,
            error,
            max_price: pay.map(|p| p.max.to_string()),
            retried: false,
            retry_status: None,
            charged: None,
            retry_error: None,
            no_retry,
        };
        let (Some(pay), Some(kept), None) = (pay, kept, payment.no_retry) else {
            return noted(res, payment);
        };
        payment.retried = true;
        match self.retry(pay, kept).await {
            Ok(mut again) => {
                payment.retry_status = Some(again.status().as_u16());
                payment.charged = text(again.headers(), CRAWLER_CHARGED);
                payment.retry_error = text(again.headers(), CRAWLER_ERROR);
                strip_hop_by_hop(again.headers_mut());
                append_via(again.headers_mut(), &self.inner.via);
                *again.version_mut() = http::Version::HTTP_11;
                noted(again, payment)
            }
            // The retry failed: the client gets the origin's first answer.
            Err(why) => {
                tracing::debug!(%why, "pay-per-crawl retry failed");
                noted(res, payment)
            }
        }
    }

    /// Sends the request again, signed with `crawler-max-price`.
    async fn retry(&self, pay: &Pay, kept: Kept) -> Result<Response<ProxyBody>, String> {
        let mut parts = Request::new(()).into_parts().0;
        parts.method = kept.method;
        parts.uri = kept.uri;
        parts.headers = kept.headers;
        parts.headers.remove(CRAWLER_EXACT_PRICE);
        let max = HeaderValue::try_from(pay.max.to_string()).map_err(|e| e.to_string())?;
        parts.headers.insert(CRAWLER_MAX_PRICE, max);
        kept.signer
            .ok_or_else(|| "not signed".to_owned())?
            .sign_covering(&mut parts, SystemTime::now(), &[CRAWLER_MAX_PRICE])
            .map_err(|e| e.to_string())?;
        let req = Request::from_parts(parts, Either::Right(Empty::new()));
        let sent = Box::pin(self.inner.pool.send(req));
        match tokio::time::timeout(self.inner.upstream_timeout, sent).await {
            Err(_) => Err("timeout".into()),
            Ok(Err(e)) => Err(e.to_string()),
            Ok(Ok(res)) => Ok(res.map(|b| b.map_err(Into::into).boxed())),
        }
    }
}

fn noted(mut res: Response<ProxyBody>, payment: Payment) -> Response<ProxyBody> {
    res.extensions_mut().insert(payment);
    res
}
