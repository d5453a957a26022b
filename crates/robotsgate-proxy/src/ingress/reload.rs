//! Reloading `robotsgate ingress` while it runs (SIGHUP): the `[ingress]` settings the
//! layer reads per request (mode, status, unknown agents, impersonators, trusted proxies)
//! and the robots.txt file (re-read, or dropped for the upstream's). Connections, pacing
//! state and the robots.txt fetches remembered stay; the other settings need a restart
//! and [`IngressReloader::reload`] names them.

use std::sync::{Arc, Mutex};

use robotsgate::ingress::IngressLayer;

use super::{IngressError, read_robots, settings};
use crate::config::Config;

/// Applies a new configuration to a running ingress.
#[derive(Clone)]
pub struct IngressReloader {
    inner: Arc<Inner>,
}

struct Inner {
    layer: IngressLayer,
    current: Mutex<Config>,
}

impl std::fmt::Debug for IngressReloader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IngressReloader").finish_non_exhaustive()
    }
}

impl IngressReloader {
    pub(super) fn new(layer: IngressLayer, config: Config) -> IngressReloader {
        IngressReloader { inner: Arc::new(Inner { layer, current: Mutex::new(config) }) }
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
        i.layer.reload(settings);
        i.layer.set_robots_bytes(robots.map(Into::into));
        let mut current = match i.current.lock() {
            Ok(c) => c,
            Err(poisoned) => poisoned.into_inner(),
        };
        let old = std::mem::replace(&mut *current, new.clone());
        Ok(restart_needed(&old, new))
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
    check(
        "ingress.tls_cert/tls_key/tls_handshake_timeout",
        (&o.tls_cert, &o.tls_key, o.tls_handshake_timeout)
            != (&n.tls_cert, &n.tls_key, n.tls_handshake_timeout),
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
            || o.websocket_idle_timeout != n.websocket_idle_timeout,
    );
    check("[verify]", old.verify != new.verify);
    check("[audit]", old.audit != new.audit);
    check("[admin]", old.admin != new.admin);
    check("[dns]", old.dns != new.dns);
    check("[tls]", old.tls != new.tls);
    check("[log]", old.log != new.log);
    changed
}
