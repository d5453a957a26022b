//! Reloading `robotsgate ingress` while it runs (SIGHUP): the `[ingress]` settings the
//! layer reads per request (mode, status, unknown agents, impersonators, trusted proxies
//! and their forwarding header)
//! and the robots.txt file (re-read, or dropped for the upstream's), and the HTTPS
//! certificate and key (re-read; a pair that does not load keeps the one in force, logged
//! and counted in `robotsgate_ingress_tls_reload_failures`). Connections, pacing
//! state and the robots.txt fetches remembered stay; the other settings need a restart
//! and [`IngressReloader::reload`] names them.

use std::sync::Arc;

use robotsgate::ingress::IngressLayer;

use super::metrics::IngressMetrics;
use super::tls::SiteCert;
use super::{IngressError, read_robots, settings};
use crate::config::Config;

/// Applies a new configuration to a running ingress.
#[derive(Clone)]
pub struct IngressReloader {
    inner: Arc<Inner>,
}

struct Inner {
    layer: IngressLayer,
    /// The configuration the process started with: what a setting that is not reloaded
    /// still is, whatever files were loaded since.
    started: Config,
    /// The certificate and key in force, with HTTPS.
    cert: Option<Arc<SiteCert>>,
    metrics: Arc<IngressMetrics>,
}

impl std::fmt::Debug for IngressReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressReloader").finish_non_exhaustive()
    }
}

impl IngressReloader {
    pub(super) fn new(
        layer: IngressLayer,
        config: Config,
        cert: Option<Arc<SiteCert>>,
        metrics: Arc<IngressMetrics>,
    ) -> IngressReloader {
        IngressReloader { inner: Arc::new(Inner { layer, started: config, cert, metrics }) }
    }

    /// Applies `new` (already parsed and checked). A robots.txt file that cannot be read
    /// or a status that cannot refuse changes nothing. Returns the changed settings that
    /// take effect only on the next start; they are left as they were.
    pub async fn reload(&self, new: &Config) -> Result<Vec<&'static str>, IngressError> {
        let ic = &new.ingress;
        // The steps that can fail go first, so a refused file changes nothing.
        let robots = read_robots(&ic.robots).await?;
        let settings = settings(ic)?;
        let i = &self.inner;
        // The certificate on its own: a pair that does not load keeps the one in force (an
        // expiring certificate must not keep the other settings from applying).
        if let Some(cert) = &i.cert
            && !ic.tls_cert.is_empty()
            && !ic.tls_key.is_empty()
        {
            match cert.reload(std::path::Path::new(&ic.tls_cert), std::path::Path::new(&ic.tls_key)) {
                Ok(()) => tracing::info!(cert = %ic.tls_cert, "TLS certificate reloaded"),
                Err(e) => {
                    i.metrics.tls_reload_failed();
                    tracing::error!(error = %e, "TLS certificate not reloaded: the one in force is kept");
                }
            }
        }
        i.layer.reload(settings);
        i.layer.set_robots_bytes(robots.map(Into::into));
        // Against the start's: a change not applied is still not applied at the next
        // reload, and a file back to the running values needs nothing.
        Ok(restart_needed(&i.started, new))
    }
}

/// The settings that differ between `old` and `new` and are not reloaded.
fn restart_needed(old: &Config, new: &Config) -> Vec<&'static str> {
    let (o, n) = (&old.ingress, &new.ingress);
    let mut changed = Vec::new();
    let mut check = |name: &'static str, differs: bool| {
        if differs {
            changed.push(name);
        }
    };
    check("ingress.listen", o.listen != n.listen);
    check("ingress.upstream", o.upstream != n.upstream);
    check("ingress.robots_ttl", o.robots_ttl != n.robots_ttl);
    check("ingress.hosts", o.hosts != n.hosts);
    check("ingress.workers", o.workers != n.workers);
    check("ingress.http1_fast_path", o.http1_fast_path != n.http1_fast_path);
    check("[cluster]", old.cluster != new.cluster);
    // New certificate and key files are read (with HTTPS); HTTPS on or off is not.
    check(
        "ingress.tls_cert/tls_key (HTTPS on or off)/tls_handshake_timeout",
        (o.tls_cert.is_empty(), o.tls_key.is_empty(), o.tls_handshake_timeout)
            != (n.tls_cert.is_empty(), n.tls_key.is_empty(), n.tls_handshake_timeout),
    );
    check(
        "ingress timeouts and limits",
        (o.upstream_timeout, o.header_read_timeout, o.shutdown_grace, o.max_connections, o.max_header_bytes)
            != (
                n.upstream_timeout,
                n.header_read_timeout,
                n.shutdown_grace,
                n.max_connections,
                n.max_header_bytes,
            )
            || (o.websocket_idle_timeout, o.upstream_read_timeout, o.send_timeout)
                != (n.websocket_idle_timeout, n.upstream_read_timeout, n.send_timeout),
    );
    check("[verify]", old.verify != new.verify);
    check("[audit]", old.audit != new.audit);
    check("[admin]", old.admin != new.admin);
    check("[dns]", old.dns != new.dns);
    check("[tls]", old.tls != new.tls);
    check("[log]", old.log != new.log);
    changed
}
