//! [`Verifier`]: a request's Web Bot Auth verdict — the pure checks of [`examine`], the key
//! from the [`DirectoryCache`] (by directory and keyid), one Ed25519 verification, the
//! replay check.

use std::sync::Arc;
use std::time::SystemTime;

use super::base::RequestView;
use super::check::{Candidate, combine, examine};
use super::client::{DirectoryCache, DirectoryClient, Lookup};
use super::config::VerifyConfig;
use super::directory::DirectoryUrl;
use super::replay::{ReplayCache, ReplayCheck, ReplayKey, SharedReplays};
use super::unix_seconds;
use super::verdict::{Failure, ReplayStatus, Unverified, Verdict, Verified};
use crate::net::Connector;

/// Verifies requests' Web Bot Auth signatures. Cheap to clone (shared state).
///
/// ```no_run
/// # async fn run(connector: robotsgate::net::Connector, parts: http::request::Parts) {
/// use std::time::SystemTime;
/// use robotsgate::identity::httpsig::{Verdict, Verifier, VerifyConfig};
///
/// let verifier = Verifier::new(connector, VerifyConfig::default());
/// match verifier.verify(&parts, SystemTime::now()).await {
///     Verdict::Verified(v) => println!("signed by a key of {}", v.directory),
///     Verdict::Unverified(why) => println!("unverified: {why}"),
///     Verdict::Failed(why) => println!("impersonation? {why}"),
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct Verifier {
    config: Arc<VerifyConfig>,
    directories: Arc<DirectoryCache>,
    replay: Option<Arc<ReplayCache>>,
    shared: Option<Arc<dyn SharedReplays>>,
}

impl std::fmt::Debug for Verifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Verifier")
            .field("config", &self.config)
            .field("directories", &self.directories)
            .field("replay", &self.replay)
            .field("shared_replays", &self.shared.is_some())
            .finish()
    }
}

impl Verifier {
    /// A verifier fetching directories through `connector` (its destination guard applies to
    /// the URLs requests name).
    pub fn new(connector: Connector, config: VerifyConfig) -> Verifier {
        let config = Arc::new(config);
        let client = DirectoryClient::new(connector, config.clone());
        let replay = config.refuse_replays.then(|| Arc::new(ReplayCache::new(config.replay_capacity)));
        Verifier {
            directories: Arc::new(DirectoryCache::new(client, config.clone())),
            config,
            replay,
            shared: None,
        }
    }

    /// Shares the replay check with a fleet of replicas through `shared` (fleet mode:
    /// `cluster::RedisReplays`): a signature another replica accepted is a replay here.
    /// Only with [`VerifyConfig::refuse_replays`]; while the store cannot be reached, each
    /// replica checks alone.
    pub fn share_replays(mut self, shared: Arc<dyn SharedReplays>) -> Verifier {
        self.shared = Some(shared);
        self
    }

    /// The configuration.
    pub fn config(&self) -> &VerifyConfig {
        &self.config
    }

    /// The directories known.
    pub fn directories(&self) -> &DirectoryCache {
        &self.directories
    }

    /// The verdict on `request` at `now`: verified when one of its Web Bot Auth signatures
    /// verifies with a key its directory publishes; else failed when one fails (the first);
    /// else unverified. Fetches a directory it does not know (waiting at most
    /// [`VerifyConfig::max_wait`]).
    pub async fn verify(&self, request: &http::request::Parts, now: SystemTime) -> Verdict {
        self.verify_agents(request, now, |_| true).await
    }

    /// [`Verifier::verify`], checking only the signatures whose `Signature-Agent` directory
    /// `wanted` accepts (the others are unverified, their directory never fetched): a site
    /// that knows which agents it trusts does not fetch the directories any request names.
    pub(crate) async fn verify_agents(
        &self,
        request: &http::request::Parts,
        now: SystemTime,
        wanted: impl Fn(&DirectoryUrl) -> bool,
    ) -> Verdict {
        let now = unix_seconds(now);
        let view = RequestView {
            method: &request.method,
            uri: &request.uri,
            headers: &request.headers,
            default_scheme: &self.config.default_scheme,
        };
        let exam = examine(view, now, &self.config);
        let mut verdicts = Vec::with_capacity(exam.candidates.len() + exam.others.len());
        for candidate in &exam.candidates {
            if !wanted(&candidate.directory) {
                verdicts.push(Verdict::Unverified(Unverified::UnknownAgent {
                    directory: candidate.directory.identifier().to_string(),
                }));
                continue;
            }
            let verdict = self.verify_candidate(candidate, now).await;
            if matches!(verdict, Verdict::Verified(_)) {
                return verdict;
            }
            verdicts.push(verdict);
        }
        verdicts.extend(exam.others);
        combine(verdicts)
    }

    async fn verify_candidate(&self, c: &Candidate, now: i64) -> Verdict {
        let directory = c.directory.identifier();
        let dir = match self.directories.lookup(&c.directory, &c.keyid, now, self.config.max_wait).await {
            Lookup::Directory(d) => d,
            Lookup::Pending => {
                return Verdict::Unverified(Unverified::Pending { directory: directory.to_string() });
            }
            Lookup::Unavailable(e) => {
                return Verdict::Unverified(Unverified::DirectoryUnavailable {
                    directory: directory.to_string(),
                    reason: e.to_string(),
                });
            }
        };
        let Some(key) = dir.get(&c.keyid) else {
            return Verdict::Failed(Failure::UnknownKey {
                directory: directory.to_string(),
                keyid: c.keyid.clone(),
            });
        };
        if !key.valid_at(now) {
            return Verdict::Failed(Failure::KeyNotValidNow(c.keyid.clone()));
        }
        if let Err(f) = c.verify(&key.key) {
            return Verdict::Failed(f);
        }
        let replay = match &self.replay {
            None => ReplayStatus::Off,
            Some(cache) => {
                let k = ReplayKey::new(directory, &c.keyid, c.nonce.as_deref(), c.signature());
                // Remembered as long as it would be accepted: `expires` plus the skew
                // allowed (`check`), not `expires`, or a copy in that window is new again.
                let until = c.expires.saturating_add(self.config.clock_skew.as_secs() as i64);
                let here = match cache.check_and_record(k, until, now) {
                    ReplayCheck::New => ReplayStatus::Recorded,
                    ReplayCheck::Full => ReplayStatus::Full,
                    ReplayCheck::Replayed => return Verdict::Failed(Failure::Replayed),
                };
                match &self.shared {
                    // Boxed where awaited: fleet mode only.
                    Some(shared) if shared.is_up() => match Box::pin(shared.record(&k, until)).await {
                        Some(true) => ReplayStatus::Shared,
                        Some(false) => return Verdict::Failed(Failure::Replayed),
                        None => here,
                    },
                    _ => here,
                }
            }
        };
        Verdict::Verified(Verified {
            directory: directory.clone(),
            keyid: c.keyid.as_str().into(),
            label: c.label.clone(),
            created: c.created,
            expires: c.expires,
            nonce: c.nonce.clone(),
            proven: key.proven,
            replay,
            product_token: dir.product_token.clone(),
        })
    }
}
