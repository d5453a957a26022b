//! [`RedisCopyShare`]: robots.txt copies shared by the fleet in Redis, the policy's second
//! cache level, with one fetch per origin for the whole fleet.
//!
//! Keys (the origin as a hash tag, beside its pacing keys):
//! - `<prefix>{<origin>}:robots`: a hash holding one fetch's outcome (result, status, body
//!   of at most 500 KiB, its SHA-256, URLs, fetched-at, ...). It expires when the copy
//!   stops being fresh (`PTTL` is its remaining freshness), so Redis' clock decides for
//!   every replica. A failure that is the origin's fault (429, 5xx, timeouts, invalid
//!   HTTP) is kept for its retry delay, so the fleet retries once; a failure to connect is
//!   not kept (it may be this replica's network, DNS or destination guard).
//! - `<prefix>{<origin>}:robots:lease`: the fleet's fetch lease (`SET NX PX`), held by the
//!   replica fetching, for the fetch's total timeout and a little more. The others poll for
//!   the copy until the lease goes; a replica that dies holding it blocks no one past it.
//!
//! A stored copy is read back only when it reads whole: every field present and of its
//! kind, the body within the limit and matching its SHA-256; anything else is a miss (and
//! the key is replaced by the next fetch). When Redis cannot be reached, the replica
//! fetches alone.

use std::sync::LazyLock;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use redis::Value;
use sha2::{Digest, Sha256};
use tokio::time::Instant;

use super::{Cluster, int, millis};
use crate::fetch::{FetchOutcome, FetchResult, Fetcher, Unreachable};
use crate::origin::Origin;
use crate::policy::{CopyShare, Lifetime, ShareFuture, Shared};

/// Format of the stored hash (field `v`); another value is a miss.
const FORMAT: &str = "1";

/// KEYS: copy, lease. ARGV: token, lease_ms, drop_copy (1: the stored copy did not read).
/// Returns `{1, pttl_ms, {field, value, ...}}` (a fresh copy), `{2}` (the lease is this
/// replica's now) or `{3, lease_pttl_ms}` (another replica is fetching).
const LOOKUP: &str = r"
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'none' and (ty ~= 'hash' or ARGV[3] == '1') then redis.call('DEL', KEYS[1]); ty = 'none' end
if ty == 'hash' then
  local ttl = redis.call('PTTL', KEYS[1])
  if ttl > 0 then return {1, ttl, redis.call('HGETALL', KEYS[1])} end
  -- No expiry: not written by robotsgate.
  redis.call('DEL', KEYS[1])
end
local lt = redis.call('TYPE', KEYS[2])['ok']
if lt ~= 'none' and (lt ~= 'string' or redis.call('PTTL', KEYS[2]) < 0) then redis.call('DEL', KEYS[2]) end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
return {3, redis.call('PTTL', KEYS[2])}
";

/// KEYS: copy, lease. ARGV: token, ttl_ms (0: keep nothing), field, value, ... Stores the
/// copy for `ttl_ms` and lets the lease go if it is still this replica's.
const STORE: &str = r"
redis.call('DEL', KEYS[1])
if tonumber(ARGV[2]) > 0 then
  redis.call('HSET', KEYS[1], unpack(ARGV, 3))
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if redis.call('TYPE', KEYS[2])['ok'] == 'string' and redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return 1
";

static LOOKUP_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(LOOKUP));
static STORE_SCRIPT: LazyLock<redis::Script> = LazyLock::new(|| redis::Script::new(STORE));

/// The longest pause between two looks while another replica fetches.
const MAX_POLL: Duration = Duration::from_millis(200);

/// The fleet's robots.txt copies in Redis, under a lease (see [fleet mode](crate::cluster)).
#[derive(Debug, Clone)]
pub struct RedisCopyShare {
    cluster: Cluster,
}

/// What a look at the shared level found.
enum Look {
    Copy(Duration, Vec<Value>),
    Leased,
    Busy(Duration),
}

impl RedisCopyShare {
    /// Copies shared on `cluster`'s Redis.
    pub fn new(cluster: Cluster) -> RedisCopyShare {
        RedisCopyShare { cluster }
    }

    fn key(&self, origin: &Origin) -> String {
        format!("{}{{{origin}}}:robots", self.cluster.config().key_prefix)
    }

    /// Runs `script`, bounded by the command timeout; `None` (and the cluster noted down)
    /// when Redis did not answer.
    async fn run(&self, invocation: &redis::ScriptInvocation<'_>) -> Option<Value> {
        let mut conn = self.cluster.connection();
        let timeout = self.cluster.config().command_timeout;
        match tokio::time::timeout(timeout, invocation.invoke_async::<Value>(&mut conn)).await {
            Ok(Ok(v)) => {
                self.cluster.note(true, None);
                Some(v)
            }
            Ok(Err(e)) => {
                self.cluster.note(false, Some(&e.to_string()));
                None
            }
            Err(_) => {
                self.cluster.note(false, Some("timed out"));
                None
            }
        }
    }

    async fn look(
        &self,
        copy: &str,
        lease: &str,
        token: &str,
        lease_for: Duration,
        drop: bool,
    ) -> Option<Look> {
        let mut invocation = LOOKUP_SCRIPT.key(copy);
        invocation.key(lease).arg(token).arg(millis(lease_for)).arg(if drop { "1" } else { "0" });
        let Value::Array(mut v) = self.run(&invocation).await? else { return None };
        let ms = |v: &Value| int(v).and_then(|i| u64::try_from(i).ok()).map(Duration::from_millis);
        match v.first().and_then(int) {
            Some(1) if v.len() == 3 => {
                let fresh_for = ms(&v[1])?;
                match v.pop() {
                    Some(Value::Array(fields)) => Some(Look::Copy(fresh_for, fields)),
                    _ => Some(Look::Copy(fresh_for, Vec::new())),
                }
            }
            Some(2) => Some(Look::Leased),
            Some(3) if v.len() == 2 => Some(Look::Busy(ms(&v[1]).unwrap_or(MAX_POLL))),
            _ => None,
        }
    }

    /// Fetches under the lease and stores what came back for the fleet.
    async fn fetch_and_store(
        &self,
        origin: &Origin,
        fetcher: &Fetcher,
        lifetime: Lifetime<'_>,
        (copy, lease, token): (&str, &str, &str),
    ) -> Shared {
        let outcome = fetcher.fetch(origin).await;
        let keep = if storable(&outcome) { lifetime(&outcome) } else { Duration::ZERO };
        let mut invocation = STORE_SCRIPT.key(copy);
        invocation.key(lease).arg(token).arg(millis(keep));
        if !keep.is_zero() {
            for (field, value) in encode(&outcome) {
                invocation.arg(field).arg(value);
            }
        }
        self.run(&invocation).await;
        Shared { outcome, fetched_here: true, fresh_for: None }
    }
}

impl CopyShare for RedisCopyShare {
    fn fetch<'a>(
        &'a self,
        origin: &'a Origin,
        fetcher: &'a Fetcher,
        lifetime: Lifetime<'a>,
    ) -> ShareFuture<'a, Shared> {
        Box::pin(async move {
            // Known down: alone at once (the watch notices Redis coming back), rather than
            // each miss waiting up to the command timeout for an unreachable Redis.
            if !self.cluster.is_up() {
                return Shared { outcome: fetcher.fetch(origin).await, fetched_here: true, fresh_for: None };
            }
            let copy = self.key(origin);
            let lease = format!("{copy}:lease");
            let token = token();
            let c = fetcher.config();
            // The holder's fetch takes at most its total timeout; the lease outlives it a
            // little, and a waiter waits for the lease and its own last look.
            let lease_for = c.total_timeout + self.cluster.config().command_timeout;
            let deadline = Instant::now() + lease_for + 2 * self.cluster.config().command_timeout;
            let mut drop = false;
            let mut poll = Duration::from_millis(10);
            loop {
                match self.look(&copy, &lease, &token, lease_for, drop).await {
                    Some(Look::Copy(fresh_for, fields)) => match decode(&fields, c.max_body_bytes) {
                        Some(outcome) => {
                            return Shared { outcome, fetched_here: false, fresh_for: Some(fresh_for) };
                        }
                        None => {
                            tracing::warn!(origin = %origin, key = copy, "cluster: a stored robots.txt copy does not read; ignored");
                            drop = true;
                            continue;
                        }
                    },
                    Some(Look::Leased) => {
                        return self
                            .fetch_and_store(origin, fetcher, lifetime, (&copy, &lease, &token))
                            .await;
                    }
                    Some(Look::Busy(left)) if Instant::now() < deadline => {
                        // Another replica is fetching: look again soon.
                        tokio::time::sleep(poll.min(left.max(Duration::from_millis(1)))).await;
                        poll = (poll * 2).min(MAX_POLL);
                    }
                    // Redis away, or the holder overran the lease and the wait: alone.
                    _ => break,
                }
                drop = false;
            }
            Shared { outcome: fetcher.fetch(origin).await, fetched_here: true, fresh_for: None }
        })
    }
}

/// A lease token unique to this fetch in the fleet (random per process, then counted).
fn token() -> String {
    use std::hash::BuildHasher;
    static SEED: LazyLock<u64> =
        LazyLock::new(|| std::collections::hash_map::RandomState::new().hash_one(0u8));
    static COUNT: AtomicU64 = AtomicU64::new(0);
    format!("{:016x}-{:x}-{}", *SEED, std::process::id(), COUNT.fetch_add(1, Ordering::Relaxed))
}

/// Whether the fleet keeps `outcome`: copies, and failures that are the origin's.
fn storable(outcome: &FetchOutcome) -> bool {
    !matches!(outcome.result, FetchResult::Unreachable(Unreachable::Connect(_)))
}

fn encode(o: &FetchOutcome) -> Vec<(&'static str, Vec<u8>)> {
    let text = |s: &str| s.as_bytes().to_vec();
    let num = |n: u128| n.to_string().into_bytes();
    let (result, status, cause, detail): (&str, Option<u16>, &str, Vec<u8>) = match &o.result {
        FetchResult::Success { status } => ("success", Some(*status), "", Vec::new()),
        FetchResult::Unavailable { status } => ("unavailable", Some(*status), "", Vec::new()),
        FetchResult::TooManyRedirects => ("too-many-redirects", None, "", Vec::new()),
        FetchResult::Unreachable(u) => match u {
            Unreachable::Status(s) => ("unreachable", Some(*s), "status", Vec::new()),
            Unreachable::HeaderTimeout(d) => ("unreachable", None, "header_timeout", num(d.as_millis())),
            Unreachable::BodyTimeout(d) => ("unreachable", None, "body_timeout", num(d.as_millis())),
            Unreachable::TotalTimeout(d) => ("unreachable", None, "total_timeout", num(d.as_millis())),
            Unreachable::Protocol(t) => ("unreachable", None, "protocol", text(t)),
            Unreachable::Decode(t) => ("unreachable", None, "decode", text(t)),
            Unreachable::BadRedirect(t) => ("unreachable", None, "bad_redirect", text(t)),
            Unreachable::Connect(_) => ("unreachable", None, "connect", Vec::new()),
        },
    };
    let at = o.fetched_at.duration_since(SystemTime::UNIX_EPOCH).unwrap_or_default();
    let mut fields = vec![
        ("v", text(FORMAT)),
        ("result", text(result)),
        ("status", status.map_or_else(Vec::new, |s| num(s.into()))),
        ("cause", text(cause)),
        ("detail", detail),
        ("url", text(&o.url)),
        ("final_url", text(&o.final_url)),
        ("redirects", num(o.redirects.into())),
        ("truncated", text(if o.truncated { "1" } else { "0" })),
        ("sha256", o.sha256.map_or_else(Vec::new, |h| hex::encode(h).into_bytes())),
        ("fetched_at_us", num(at.as_micros())),
        ("duration_us", num(o.duration.as_micros())),
        ("retry_after_ms", o.retry_after.map_or_else(Vec::new, |d| num(d.as_millis()))),
    ];
    fields.push(("body", o.body.to_vec()));
    fields
}

/// The outcome a stored hash holds, or `None` when it does not read whole.
fn decode(fields: &[Value], max_body: usize) -> Option<FetchOutcome> {
    let get = |name: &str| -> Option<&[u8]> {
        fields.chunks_exact(2).find_map(|kv| match (&kv[0], &kv[1]) {
            (Value::BulkString(k), Value::BulkString(v)) if k == name.as_bytes() => Some(v.as_slice()),
            _ => None,
        })
    };
    let text = |name: &str| get(name).and_then(|v| std::str::from_utf8(v).ok());
    let opt_num = |name: &str| -> Option<Option<u64>> {
        match text(name)? {
            "" => Some(None),
            t => t.parse().ok().map(Some),
        }
    };
    let num = |name: &str| opt_num(name).flatten();
    if text("v")? != FORMAT {
        return None;
    }
    let status = opt_num("status")?.map(u16::try_from).transpose().ok()?;
    let ms = |t: &str| t.parse::<u64>().ok().map(Duration::from_millis);
    let result = match (text("result")?, status) {
        ("success", Some(s)) => FetchResult::Success { status: s },
        ("unavailable", Some(s)) => FetchResult::Unavailable { status: s },
        ("too-many-redirects", None) => FetchResult::TooManyRedirects,
        ("unreachable", status) => {
            let detail = text("detail")?;
            FetchResult::Unreachable(match (text("cause")?, status) {
                ("status", Some(s)) => Unreachable::Status(s),
                ("header_timeout", None) => Unreachable::HeaderTimeout(ms(detail)?),
                ("body_timeout", None) => Unreachable::BodyTimeout(ms(detail)?),
                ("total_timeout", None) => Unreachable::TotalTimeout(ms(detail)?),
                ("protocol", None) => Unreachable::Protocol(detail.into()),
                ("decode", None) => Unreachable::Decode(detail.into()),
                ("bad_redirect", None) => Unreachable::BadRedirect(detail.into()),
                _ => return None,
            })
        }
        _ => return None,
    };
    let body = get("body")?;
    if body.len() > max_body {
        return None;
    }
    let sha256 = match text("sha256")? {
        "" => None,
        h => {
            let mut out = [0u8; 32];
            hex::decode_to_slice(h, &mut out).ok()?;
            Some(out)
        }
    };
    // The body is the one its hash names (and only a 2xx has one).
    match (&result, sha256) {
        (FetchResult::Success { .. }, Some(h)) if <[u8; 32]>::from(Sha256::digest(body)) == h => {}
        (FetchResult::Success { .. }, _) => return None,
        (_, None) if body.is_empty() => {}
        _ => return None,
    }
    Some(FetchOutcome {
        url: text("url")?.to_owned(),
        final_url: text("final_url")?.to_owned(),
        redirects: u8::try_from(num("redirects")?).ok()?,
        result,
        body: Bytes::copy_from_slice(body),
        truncated: match text("truncated")? {
            "1" => true,
            "0" => false,
            _ => return None,
        },
        sha256,
        fetched_at: SystemTime::UNIX_EPOCH.checked_add(Duration::from_micros(num("fetched_at_us")?))?,
        duration: Duration::from_micros(num("duration_us")?),
        max_age: None,
        retry_after: opt_num("retry_after_ms")?.map(Duration::from_millis),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn outcome(result: FetchResult, body: &'static [u8]) -> FetchOutcome {
        FetchOutcome {
            url: "http://a.test/robots.txt".into(),
            final_url: "http://b.test/robots.txt".into(),
            redirects: 1,
            sha256: (!body.is_empty()).then(|| Sha256::digest(body).into()),
            body: Bytes::from_static(body),
            result,
            truncated: false,
            fetched_at: SystemTime::UNIX_EPOCH + Duration::from_micros(1_795_441_017_123_456),
            duration: Duration::from_micros(3_210),
            max_age: None,
            retry_after: Some(Duration::from_secs(7)),
        }
    }

    fn stored(o: &FetchOutcome) -> Vec<Value> {
        encode(o)
            .into_iter()
            .flat_map(|(k, v)| [Value::BulkString(k.as_bytes().to_vec()), Value::BulkString(v)])
            .collect()
    }

    #[test]
    fn outcomes_read_back_as_they_were_stored() {
        for (result, body) in [
            (FetchResult::Success { status: 200 }, &b"User-agent: *\nDisallow: /x\n"[..]),
            (FetchResult::Success { status: 200 }, b""),
            (FetchResult::Unavailable { status: 404 }, b""),
            (FetchResult::TooManyRedirects, b""),
            (FetchResult::Unreachable(Unreachable::Status(503)), b""),
            (FetchResult::Unreachable(Unreachable::TotalTimeout(Duration::from_secs(30))), b""),
            (FetchResult::Unreachable(Unreachable::Protocol("reset mid-body".into())), b""),
        ] {
            let mut o = outcome(result, body);
            if body.is_empty() && matches!(o.result, FetchResult::Success { .. }) {
                o.sha256 = Some(Sha256::digest(b"").into());
            }
            let back = decode(&stored(&o), 500 * 1024).unwrap_or_else(|| panic!("{:?} reads back", o.result));
            assert_eq!(format!("{back:?}"), format!("{o:?}"));
        }
    }

    #[test]
    fn what_does_not_read_whole_is_a_miss() {
        let o = outcome(FetchResult::Success { status: 200 }, b"User-agent: *\nDisallow: /\n");
        let good = stored(&o);
        assert!(decode(&good, 500 * 1024).is_some());
        assert!(decode(&good, 4).is_none(), "a body past the limit");
        assert!(decode(&[], 500 * 1024).is_none());
        assert!(decode(&good[..good.len() - 2], 500 * 1024).is_none(), "a field missing");
        let with = |field: &str, value: &[u8]| -> Vec<Value> {
            let mut v = good.clone();
            let i = v.iter().position(|k| *k == Value::BulkString(field.as_bytes().to_vec())).unwrap();
            v[i + 1] = Value::BulkString(value.to_vec());
            v
        };
        for (field, value) in [
            ("v", &b"2"[..]),
            ("body", b"User-agent: *\nAllow: /\n"),
            ("sha256", b"00"),
            ("result", b"fine"),
            ("status", b"two hundred"),
            ("status", b"70000"),
            ("redirects", b"-1"),
            ("truncated", b"yes"),
            ("fetched_at_us", b"soon"),
        ] {
            assert!(decode(&with(field, value), 500 * 1024).is_none(), "{field} = {value:?}");
        }
        // A status on a kind without one, a body on a failure.
        let failure = stored(&outcome(FetchResult::TooManyRedirects, b""));
        let mut v = failure.clone();
        let i = v.iter().position(|k| *k == Value::BulkString(b"status".to_vec())).unwrap();
        v[i + 1] = Value::BulkString(b"200".to_vec());
        assert!(decode(&v, 500 * 1024).is_none());
        assert!(decode(&failure, 500 * 1024).is_some());
    }

    #[test]
    fn connect_failures_are_not_kept_for_the_fleet() {
        let refused = FetchResult::Unreachable(Unreachable::Connect(crate::net::ConnectError::Timeout {
            host: "a.test".into(),
            timeout: Duration::from_secs(1),
        }));
        assert!(!storable(&outcome(refused, b"")));
        assert!(storable(&outcome(FetchResult::Unreachable(Unreachable::Status(500)), b"")));
    }
}
