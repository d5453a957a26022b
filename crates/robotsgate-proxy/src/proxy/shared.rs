//! [`Shared`]: what every connection task of a listener needs, behind one `Arc`.

use std::net::SocketAddr;
use std::sync::Arc;

use http::header::HeaderValue;
use http::{Request, Response};
use robotsgate::net::PoolRequestBody as ClientBody;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

use super::ProxyConfig;
use crate::auth::ProxyAuth;
use crate::forward::{Forwarder, HeadLimit, ProxyBody, ProxyService};
use crate::intercept::{Inside, Interception};
use crate::metrics::Metrics;
use crate::server_name::HelloCheck;
use crate::slot::Slot;

/// What every connection task needs (behind one `Arc`: requests clone it).
pub(super) struct Shared {
    pub(super) service: ProxyService,
    /// The robots layer: for the records of the answers given before it sees a request.
    pub(super) layer: robotsgate::layer::RobotsLayer,
    pub(super) forwarder: Forwarder,
    pub(super) interception: Option<Interception>,
    pub(super) auth: Option<ProxyAuth>,
    pub(super) metrics: Option<Arc<Metrics>>,
    /// Client connections cut (`robotsgate_clients_cut_total`; counting nowhere without
    /// metrics).
    pub(super) cuts: crate::metrics::Cuts,
    pub(super) tunnels: TaskTracker,
    pub(super) stop: CancellationToken,
    pub(super) via: HeaderValue,
    pub(super) config: ProxyConfig,
}

impl Shared {
    /// The answer of the robots layer over the forwarder.
    pub(super) async fn answer(&self, req: Request<ClientBody>) -> Response<ProxyBody> {
        self.service.answer(req).await
    }

    /// Records an answer the listener gave itself, before the robots layer saw the
    /// request (`431`, `400`, `407`, a request hyper could not read).
    pub(super) fn log_own_answer(
        &self,
        refusal: &robotsgate::Refusal,
        client: SocketAddr,
        req: Option<&Request<ClientBody>>,
    ) {
        let target = req.map(|r| r.uri().to_string());
        let facts = robotsgate::audit::RefusalFacts {
            client: Some(client),
            method: req.map(|r| r.method().as_str()),
            target: target.as_deref(),
            ..Default::default()
        };
        self.layer.log_refusal(refusal, facts);
    }

    /// What holding the TLS client of `req`'s tunnel to its host needs
    /// (`crate::server_name`).
    pub(super) fn hello_check(&self, req: &Request<ClientBody>) -> HelloCheck {
        let ext = req.extensions();
        HelloCheck {
            layer: self.layer.clone(),
            client: ext.get::<robotsgate::layer::ClientAddr>().map(|c| c.0),
            user: ext.get::<robotsgate::layer::ProxyUser>().map(|u| u.0.clone()),
            timeout: self.config.header_read_timeout,
            stop: self.stop.clone(),
        }
    }

    /// What serving HTTP inside a tunnel of `client` needs; `slot` is the client
    /// connection's place, which the tunnel keeps.
    pub(super) fn inside(&self, client: SocketAddr, user: Option<Arc<str>>, slot: Option<Slot>) -> Inside {
        Inside {
            service: self.service.clone(),
            client,
            user,
            stop: self.stop.clone(),
            via: self.via.clone(),
            head_limit: HeadLimit(self.config.max_header_bytes),
            header_read_timeout: self.config.header_read_timeout,
            send_timeout: self.config.send_timeout,
            metrics: self.metrics.clone(),
            layer: self.layer.clone(),
            slot,
        }
    }
}
