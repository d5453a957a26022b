//! Fleet mode on the site side: with `[cluster]`, the Web Bot Auth replay check and each
//! bot's Crawl-delay are kept in the fleet's Redis, so that they hold across the replicas
//! behind one load balancer. Both go through one client (one connection, one watch).

use robotsgate::identity::httpsig::Verifier as SignatureVerifier;
use robotsgate::ingress::IngressBuilder;

use super::IngressError;
use crate::config::Config;

/// The fleet's Redis of `[cluster]`, when it is configured (cheap to clone). Its watch
/// (noticing Redis back after it was down) runs as long as the process.
#[derive(Clone, Default)]
pub(super) struct Fleet {
    #[cfg(feature = "cluster")]
    cluster: Option<robotsgate::cluster::Cluster>,
}

impl Fleet {
    /// The client of `config`'s `[cluster]` (none without it).
    #[cfg(feature = "cluster")]
    pub(super) fn new(config: &Config) -> Result<Fleet, IngressError> {
        use robotsgate::cluster::Cluster;
        let Some(c) = config.cluster_config().map_err(IngressError::Cluster)? else {
            return Ok(Fleet::default());
        };
        let cluster = Cluster::new(c).map_err(|e| IngressError::Cluster(e.to_string()))?;
        drop(cluster.watch(std::time::Duration::from_secs(1)));
        Ok(Fleet { cluster: Some(cluster) })
    }

    /// Without the feature `cluster`, `[cluster]` is refused when the file is read.
    #[cfg(not(feature = "cluster"))]
    pub(super) fn new(_: &Config) -> Result<Fleet, IngressError> {
        Ok(Fleet::default())
    }

    /// `sig` with its replay check shared through the fleet's Redis, so that a signature
    /// one replica accepted is refused as a replay by every other.
    pub(super) fn share_replays(&self, sig: SignatureVerifier) -> SignatureVerifier {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = &self.cluster {
            return sig
                .share_replays(std::sync::Arc::new(robotsgate::cluster::RedisReplays::new(cluster.clone())));
        }
        sig
    }

    /// `builder` with each bot's Crawl-delay kept in the fleet's Redis (`on_error =
    /// "refuse"`: paced bots get `503` while Redis cannot be reached).
    pub(super) fn share_pacing(&self, builder: IngressBuilder) -> IngressBuilder {
        #[cfg(feature = "cluster")]
        if let Some(cluster) = &self.cluster {
            return builder.share_pacing(std::sync::Arc::new(robotsgate::cluster::RedisIngressPacing::new(
                cluster.clone(),
            )));
        }
        builder
    }
}
