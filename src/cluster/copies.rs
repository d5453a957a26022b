//! [`RedisCopyShare`]: robots.txt copies shared by the fleet in Redis, the policy's second
//! cache level, with one fetch per origin for the whole fleet.
//!
//! Keys (the origin as a hash tag, beside its pacing keys):
//! - `<prefix>{<origin>}:robots`: a hash holding one fetch's outcome (result, status, body
//!   of at most 500 KiB, its SHA-256, URLs, fetched-at, ...). A copy (a 2xx, a 4xx, too
//!   many redirects) also holds `fresh_until_ms` and `stale_until_ms` on Redis' clock (so
//!   Redis' clock decides for every replica), and expires at stale-until: past its
//!   freshness it is still used, as the policy's own cache uses a stale copy (by a replica
//!   that holds none, at once), while one replica refreshes it under the lease. A refresh
//!   that fails for the origin's fault leaves the copy and writes its failure beside it
//!   (`failure:*` fields, `failure:retry_until_ms`): every replica then uses the stale copy
//!   with that failure, and none fetches until the retry. A failure with no copy to keep
//!   (429, 5xx, timeouts, invalid HTTP) is the whole hash, kept for its retry delay, so the
//!   fleet retries once; a failure to connect is not kept (it may be this replica's
//!   network, DNS or destination guard).
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
use tokio::time::Instant;

use super::{Cluster, Lua, LuaCall, int, millis};
use crate::fetch::{FetchOutcome, FetchResult, Fetcher, Unreachable};
use crate::origin::Origin;
use crate::policy::{CopyShare, Lifetime, ShareFuture, Shared};

/// Format of the stored hash (field `v`); another value is a miss.
const FORMAT: &str = "2";

/// The prefix of the fields of a stale copy's failed refresh.
const FAILURE: &str = "failure:";

/// KEYS: copy, lease. ARGV: token, lease_ms, drop_copy (1: the stored copy did not read),
/// stale_ok (1: a stale copy will do). Returns `{1, fresh_left_ms, stale_left_ms,
/// retry_left_ms or -1, {field, value, ...}}` (an outcome to use: fresh when
/// `fresh_left_ms` > 0, else a stale copy, with a pending failed refresh when
/// `retry_left_ms` >= 0), `{2}` (the lease is this replica's now: fetch) or `{3,
/// lease_pttl_ms}` (another replica is fetching).
const LOOKUP: &str = r"
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'none' and (ty ~= 'hash' or ARGV[3] == '1') then redis.call('DEL', KEYS[1]); ty = 'none' end
if ty == 'hash' then
  local ttl = redis.call('PTTL', KEYS[1])
  local v = redis.call('HMGET', KEYS[1], 'fresh_until_ms', 'failure:retry_until_ms')
  local fresh = tonumber(v[1])
  if ttl <= 0 or (v[1] and not fresh) then
    -- No expiry, or a freshness that is no number: not written by robotsgate.
    redis.call('DEL', KEYS[1])
  elseif not v[1] then
    -- A failure, kept for its retry delay.
    return {1, ttl, ttl, -1, redis.call('HGETALL', KEYS[1])}
  else
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    local retry = tonumber(v[2])
    if fresh > now then return {1, fresh - now, ttl, -1, redis.call('HGETALL', KEYS[1])} end
    if retry and retry > now then return {1, fresh - now, ttl, retry - now, redis.call('HGETALL', KEYS[1])} end
    if ARGV[4] == '1' then return {1, fresh - now, ttl, -1, redis.call('HGETALL', KEYS[1])} end
    -- Stale, and to be refreshed: under the lease.
  end
end
local lt = redis.call('TYPE', KEYS[2])['ok']
if lt ~= 'none' and (lt ~= 'string' or redis.call('PTTL', KEYS[2]) < 0) then redis.call('DEL', KEYS[2]) end
if redis.call('SET', KEYS[2], ARGV[1], 'NX', 'PX', ARGV[2]) then return {2} end
return {3, redis.call('PTTL', KEYS[2])}
";

/// KEYS: copy, lease. ARGV: token, kind (`copy`, `failure`, `none`), fresh_ms, stale_ms,
/// field, value, ... Stores a copy (fresh, then stale, until it expires), or a failure:
/// beside a copy still kept (its failed refresh, until the retry), else alone for its retry
/// delay. Lets the lease go if it is still this replica's.
const STORE: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local fresh = tonumber(ARGV[3])
local stale = tonumber(ARGV[4])
if ARGV[2] == 'copy' then
  redis.call('DEL', KEYS[1])
  redis.call('HSET', KEYS[1], unpack(ARGV, 5))
  redis.call('HSET', KEYS[1], 'fresh_until_ms', now + fresh, 'stale_until_ms', now + fresh + stale)
  redis.call('PEXPIRE', KEYS[1], fresh + stale)
elseif ARGV[2] == 'failure' then
  local kept = redis.call('TYPE', KEYS[1])['ok'] == 'hash' and redis.call('PTTL', KEYS[1]) > 0
    and tonumber(redis.call('HGET', KEYS[1], 'fresh_until_ms'))
  if kept then
    for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[1], 'failure:' .. ARGV[i], ARGV[i + 1]) end
    redis.call('HSET', KEYS[1], 'failure:retry_until_ms', now + fresh)
  else
    redis.call('DEL', KEYS[1])
    redis.call('HSET', KEYS[1], unpack(ARGV, 5))
    redis.call('PEXPIRE', KEYS[1], fresh)
  end
end
if redis.call('TYPE', KEYS[2])['ok'] == 'string' and redis.call('GET', KEYS[2]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
end
return 1
";

/// KEYS: snapshot. ARGV: body, ttl_ms (0: kept for ever). Writes the body once (`SET NX`);
/// a body kept already is left as it is, and kept `ttl_ms` from now (or for ever) since it
/// was fetched again.
const SNAPSHOT: &str = r"
local ttl = tonumber(ARGV[2])
if redis.call('SET', KEYS[1], ARGV[1], 'NX') then
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) end
elseif redis.call('TYPE', KEYS[1])['ok'] == 'string' then
  if ttl > 0 then redis.call('PEXPIRE', KEYS[1], ttl) else redis.call('PERSIST', KEYS[1]) end
end
return 1
";

static LOOKUP_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(LOOKUP));
static STORE_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(STORE));
static SNAPSHOT_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(SNAPSHOT));

/// The longest pause between two looks while another replica fetches.
const MAX_POLL: Duration = Duration::from_millis(200);

/// The fleet's robots.txt copies in Redis, under a lease (see [fleet mode](crate::cluster)).
#[derive(Debug, Clone)]
pub struct RedisCopyShare {
    cluster: Cluster,
    /// Keep fetched bodies as snapshots, for this long (zero: for ever).
    snapshots: Option<Duration>,
}

/// What a look at the shared level found.
enum Look {
    /// An outcome to use: fresh for `fresh_left_ms` (a stale copy when not above 0), with
    /// its failed refresh due for a retry in `retry_left`, if any.
    Copy {
        fresh_left_ms: i64,
        retry_left: Option<Duration>,
        fields: Vec<Value>,
    },
    Leased,
    Busy(Duration),
}

impl RedisCopyShare {
    /// Copies shared on `cluster`'s Redis.
    pub fn new(cluster: Cluster) -> RedisCopyShare {
        RedisCopyShare { cluster, snapshots: None }
    }

    /// Also keeps the body of every robots.txt this replica fetches for the fleet under
    /// `<prefix>snapshot:<sha256>` (once; for `ttl` after its latest fetch, or for ever
    /// when `ttl` is zero), so that the exact file of a decision is found whichever replica
    /// made it ([`super::read_snapshot`]). For a fleet whose audit log keeps snapshots.
    pub fn with_snapshots(mut self, ttl: Duration) -> RedisCopyShare {
        self.snapshots = Some(ttl);
        self
    }

    fn key(&self, origin: &Origin) -> String {
        format!("{}{{{origin}}}:robots", self.cluster.config().key_prefix)
    }

    /// Runs `script`, bounded by the command timeout; `None` (and the cluster noted down)
    /// when Redis did not answer.
    async fn run(&self, invocation: &LuaCall<'_>) -> Option<Value> {
        let mut conn = self.cluster.connection();
        let timeout = self.cluster.config().command_timeout;
        match tokio::time::timeout(timeout, invocation.invoke(&mut conn)).await {
            Ok(Ok(v)) => {
                self.cluster.note(true, None);
                Some(v)
            }
            Ok(Err(e)) => {
                self.cluster.failed(&e);
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
        (copy, lease, token): (&str, &str, &str),
        lease_for: Duration,
        drop: bool,
        stale_ok: bool,
    ) -> Option<Look> {
        let mut invocation = LOOKUP_SCRIPT.key(copy);
        invocation
            .key(lease)
            .arg(token)
            .arg(millis(lease_for))
            .arg(if drop { "1" } else { "0" })
            .arg(if stale_ok { "1" } else { "0" });
        let Value::Array(mut v) = self.run(&invocation).await? else { return None };
        let ms = |v: &Value| int(v).and_then(|i| u64::try_from(i).ok()).map(Duration::from_millis);
        match v.first().and_then(int) {
            Some(1) if v.len() == 5 => {
                let fresh_left_ms = int(&v[1])?;
                let retry_left = ms(&v[3]);
                match v.pop() {
                    Some(Value::Array(fields)) => Some(Look::Copy { fresh_left_ms, retry_left, fields }),
                    _ => Some(Look::Copy { fresh_left_ms, retry_left, fields: Vec::new() }),
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
        let keep = lifetime(&outcome);
        let kind = match &outcome.result {
            _ if !storable(&outcome) => "none",
            FetchResult::Unreachable(_) if !keep.fresh.is_zero() => "failure",
            FetchResult::Unreachable(_) => "none",
            _ if keep.fresh.is_zero() && keep.stale.is_zero() => "none",
            _ => "copy",
        };
        let mut invocation = STORE_SCRIPT.key(copy);
        invocation.key(lease).arg(token).arg(kind).arg(millis(keep.fresh)).arg(millis(keep.stale));
        if kind != "none" {
            for (field, value) in encode(&outcome) {
                invocation.arg(field).arg(value);
            }
        }
        self.run(&invocation).await;
        if let (Some(ttl), FetchResult::Success { .. }, Some(sha), true) =
            (self.snapshots, &outcome.result, outcome.sha256, self.cluster.is_up())
        {
            let key = super::snapshot_key(&self.cluster.config().key_prefix, &hex::encode(sha));
            let mut invocation = SNAPSHOT_SCRIPT.key(&key);
            invocation.arg(outcome.body.as_ref()).arg(millis(ttl));
            let mut conn = self.cluster.connection();
            let timeout = self.cluster.config().command_timeout;
            match tokio::time::timeout(timeout, invocation.invoke(&mut conn)).await {
                Ok(Ok(_)) => {}
                // Redis answered, and refused (out of memory, ...): the fleet still works.
                Ok(Err(e))
                    if matches!(e.kind(), redis::ErrorKind::Server(_) | redis::ErrorKind::Extension) =>
                {
                    tracing::warn!(error = %e, key, "cluster: cannot keep a robots.txt snapshot in Redis");
                }
                Ok(Err(e)) => self.cluster.failed(&e),
                Err(_) => self.cluster.note(false, Some("timed out")),
            }
        }
        Shared::fetched(outcome)
    }
}

impl CopyShare for RedisCopyShare {
    fn fetch<'a>(
        &'a self,
        origin: &'a Origin,
        fetcher: &'a Fetcher,
        lifetime: Lifetime<'a>,
        stale_ok: bool,
    ) -> ShareFuture<'a, Shared> {
        Box::pin(async move {
            // Known down: alone at once (the watch notices Redis coming back), rather than
            // each miss waiting up to the command timeout for an unreachable Redis.
            if !self.cluster.is_up() {
                return Shared::fetched(fetcher.fetch(origin).await);
            }
            let copy = self.key(origin);
            let lease = format!("{copy}:lease");
            let token = token();
            let keys = (copy.as_str(), lease.as_str(), token.as_str());
            let c = fetcher.config();
            // The holder's fetch takes at most its total timeout; the lease outlives it a
            // little, and a waiter waits for the lease and its own last look.
            let lease_for = c.total_timeout + self.cluster.config().command_timeout;
            let deadline = Instant::now() + lease_for + 2 * self.cluster.config().command_timeout;
            let mut drop = false;
            let mut poll = Duration::from_millis(10);
            loop {
                match self.look(keys, lease_for, drop, stale_ok).await {
                    Some(Look::Copy { fresh_left_ms, retry_left, fields }) => {
                        match read(&fields, fresh_left_ms, retry_left, c.max_body_bytes) {
                            Some(shared) => return shared,
                            None => {
                                tracing::warn!(origin = %origin, key = copy, "cluster: a stored robots.txt copy does not read; ignored");
                                drop = true;
                                continue;
                            }
                        }
                    }
                    Some(Look::Leased) => return self.fetch_and_store(origin, fetcher, lifetime, keys).await,
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
            Shared::fetched(fetcher.fetch(origin).await)
        })
    }
}

/// What a stored hash gives the policy, or `None` when it does not read whole: a fresh
/// outcome (`fresh_left_ms` > 0), or a stale copy, with its failed refresh when
/// `retry_left` says one is pending.
fn read(
    fields: &[Value],
    fresh_left_ms: i64,
    retry_left: Option<Duration>,
    max_body: usize,
) -> Option<Shared> {
    let outcome = decode(fields, "", max_body)?;
    let is_copy = !matches!(outcome.result, FetchResult::Unreachable(_));
    // A copy has its freshness and stale limit; a failure has neither.
    let times = ["fresh_until_ms", "stale_until_ms"].map(|f| number(fields, f));
    match times {
        [Some(fresh), Some(stale)] if is_copy && fresh <= stale => {}
        [None, None] if !is_copy && field(fields, "fresh_until_ms").is_none() => {}
        _ => return None,
    }
    if fresh_left_ms > 0 {
        let fresh_for = Duration::from_millis(u64::try_from(fresh_left_ms).ok()?);
        return Some(Shared {
            outcome,
            fetched_here: false,
            fresh_for: Some(fresh_for),
            expired: None,
            failure: None,
        });
    }
    if !is_copy {
        return None;
    }
    let failure = match retry_left {
        Some(retry) => {
            let f = decode(fields, FAILURE, max_body)?;
            if !matches!(f.result, FetchResult::Unreachable(_)) {
                return None;
            }
            Some((f, retry))
        }
        None => None,
    };
    let expired = Duration::from_millis(fresh_left_ms.unsigned_abs());
    Some(Shared {
        outcome,
        fetched_here: false,
        fresh_for: Some(Duration::ZERO),
        expired: Some(expired),
        failure,
    })
}

/// The value of `name` in a stored hash's fields.
fn field<'a>(fields: &'a [Value], name: &str) -> Option<&'a [u8]> {
    fields.chunks_exact(2).find_map(|kv| match (&kv[0], &kv[1]) {
        (Value::BulkString(k), Value::BulkString(v)) if k == name.as_bytes() => Some(v.as_slice()),
        _ => None,
    })
}

/// A field holding a whole number.
fn number(fields: &[Value], name: &str) -> Option<u64> {
    std::str::from_utf8(field(fields, name)?).ok()?.parse().ok()
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
    // The status is the outcome's: the one the result's own names, or a redirect's 3xx.
    let status = o.status;
    let (result, cause, detail): (&str, &str, Vec<u8>) = match &o.result {
        FetchResult::Success { .. } => ("success", "", Vec::new()),
        FetchResult::Unavailable { .. } => ("unavailable", "", Vec::new()),
        FetchResult::TooManyRedirects => ("too-many-redirects", "", Vec::new()),
        FetchResult::Unreachable(u) => match u {
            Unreachable::Status(_) => ("unreachable", "status", Vec::new()),
            Unreachable::HeaderTimeout(d) => ("unreachable", "header_timeout", num(d.as_millis())),
            Unreachable::BodyTimeout(d) => ("unreachable", "body_timeout", num(d.as_millis())),
            Unreachable::TotalTimeout(d) => ("unreachable", "total_timeout", num(d.as_millis())),
            Unreachable::Protocol(t) => ("unreachable", "protocol", text(t)),
            Unreachable::Decode(t) => ("unreachable", "decode", text(t)),
            Unreachable::BadRedirect(t) => ("unreachable", "bad_redirect", text(t)),
            Unreachable::Connect(_) => ("unreachable", "connect", Vec::new()),
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

/// The outcome a stored hash holds under `prefix` (`""`, or [`FAILURE`] for a stale
/// copy's failed refresh), or `None` when it does not read whole.
fn decode(fields: &[Value], prefix: &str, max_body: usize) -> Option<FetchOutcome> {
    let get = |name: &str| -> Option<&[u8]> { field(fields, &format!("{prefix}{name}")) };
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
        // A redirect's 3xx (or none, as stored before it was kept).
        ("too-many-redirects", s) if s.is_none_or(|s| (300..400).contains(&s)) => {
            FetchResult::TooManyRedirects
        }
        ("unreachable", status) => {
            let detail = text("detail")?;
            FetchResult::Unreachable(match (text("cause")?, status) {
                ("status", Some(s)) => Unreachable::Status(s),
                ("header_timeout", None) => Unreachable::HeaderTimeout(ms(detail)?),
                ("body_timeout", None) => Unreachable::BodyTimeout(ms(detail)?),
                ("total_timeout", None) => Unreachable::TotalTimeout(ms(detail)?),
                ("protocol", None) => Unreachable::Protocol(detail.into()),
                ("decode", None) => Unreachable::Decode(detail.into()),
                ("bad_redirect", s) if s.is_none_or(|s| (300..400).contains(&s)) => {
                    Unreachable::BadRedirect(detail.into())
                }
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
        (FetchResult::Success { .. }, Some(h)) if crate::digest::sha256(body) == h => {}
        (FetchResult::Success { .. }, _) => return None,
        (_, None) if body.is_empty() => {}
        _ => return None,
    }
    Some(FetchOutcome {
        url: text("url")?.to_owned(),
        final_url: text("final_url")?.to_owned(),
        redirects: u8::try_from(num("redirects")?).ok()?,
        result,
        status,
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
            sha256: (!body.is_empty()).then(|| crate::digest::sha256(body)),
            body: Bytes::from_static(body),
            status: match &result {
                FetchResult::Success { status } | FetchResult::Unavailable { status } => Some(*status),
                FetchResult::Unreachable(Unreachable::Status(s)) => Some(*s),
                FetchResult::TooManyRedirects => Some(301),
                _ => None,
            },
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
                o.sha256 = Some(crate::digest::sha256(b""));
            }
            let back =
                decode(&stored(&o), "", 500 * 1024).unwrap_or_else(|| panic!("{:?} reads back", o.result));
            assert_eq!(format!("{back:?}"), format!("{o:?}"));
        }
    }

    #[test]
    fn what_does_not_read_whole_is_a_miss() {
        let o = outcome(FetchResult::Success { status: 200 }, b"User-agent: *\nDisallow: /\n");
        let good = stored(&o);
        assert!(decode(&good, "", 500 * 1024).is_some());
        assert!(decode(&good, "", 4).is_none(), "a body past the limit");
        assert!(decode(&[], "", 500 * 1024).is_none());
        assert!(decode(&good[..good.len() - 2], "", 500 * 1024).is_none(), "a field missing");
        let with = |field: &str, value: &[u8]| -> Vec<Value> {
            let mut v = good.clone();
            let i = v.iter().position(|k| *k == Value::BulkString(field.as_bytes().to_vec())).unwrap();
            v[i + 1] = Value::BulkString(value.to_vec());
            v
        };
        for (field, value) in [
            ("v", &b"1"[..]),
            ("body", b"User-agent: *\nAllow: /\n"),
            ("sha256", b"00"),
            ("result", b"fine"),
            ("status", b"two hundred"),
            ("status", b"70000"),
            ("redirects", b"-1"),
            ("truncated", b"yes"),
            ("fetched_at_us", b"soon"),
        ] {
            assert!(decode(&with(field, value), "", 500 * 1024).is_none(), "{field} = {value:?}");
        }
        // A status on a kind without one, a body on a failure.
        let failure = stored(&outcome(FetchResult::TooManyRedirects, b""));
        let mut v = failure.clone();
        let i = v.iter().position(|k| *k == Value::BulkString(b"status".to_vec())).unwrap();
        v[i + 1] = Value::BulkString(b"200".to_vec());
        assert!(decode(&v, "", 500 * 1024).is_none());
        assert!(decode(&failure, "", 500 * 1024).is_some());
    }

    /// A stored copy with its times (and a failed refresh beside it), as STORE writes it.
    fn with_times(o: &FetchOutcome, failure: Option<&FetchOutcome>) -> Vec<Value> {
        let mut v = stored(o);
        for (k, val) in [("fresh_until_ms", "1795441018000"), ("stale_until_ms", "1795444618000")] {
            v.extend([Value::BulkString(k.into()), Value::BulkString(val.into())]);
        }
        if let Some(f) = failure {
            for (k, val) in encode(f) {
                v.extend([Value::BulkString(format!("{FAILURE}{k}").into_bytes()), Value::BulkString(val)]);
            }
            v.extend([
                Value::BulkString(b"failure:retry_until_ms".to_vec()),
                Value::BulkString(b"1".to_vec()),
            ]);
        }
        v
    }

    #[test]
    fn fresh_stale_and_failed_copies_read_as_the_policy_uses_them() {
        let max = 500 * 1024;
        let copy = outcome(FetchResult::Success { status: 200 }, b"User-agent: *\nDisallow: /x\n");
        let failed = outcome(FetchResult::Unreachable(Unreachable::Status(503)), b"");
        let fresh = read(&with_times(&copy, None), 1500, None, max).unwrap();
        assert_eq!((fresh.fresh_for, fresh.expired), (Some(Duration::from_millis(1500)), None));
        assert!(!fresh.fetched_here && fresh.failure.is_none());
        let stale = read(&with_times(&copy, None), -2500, None, max).unwrap();
        assert_eq!(
            (stale.fresh_for, stale.expired),
            (Some(Duration::ZERO), Some(Duration::from_millis(2500)))
        );
        assert_eq!(stale.outcome.sha256, copy.sha256);
        let retry = Some(Duration::from_secs(60));
        let refused = read(&with_times(&copy, Some(&failed)), -2500, retry, max).unwrap();
        let (f, left) = refused.failure.unwrap();
        assert_eq!(
            (format!("{:?}", f.result), left),
            (format!("{:?}", failed.result), Duration::from_secs(60))
        );
        // A failure alone is fresh for its retry delay, never stale.
        let alone = stored(&failed);
        assert!(read(&alone, 800, None, max).is_some());
        assert!(read(&alone, -1, None, max).is_none());
        // What does not hold together is a miss: a copy without its times, a failure with
        // them, a stale limit before freshness, a failure field that does not read.
        assert!(read(&stored(&copy), 800, None, max).is_none());
        assert!(read(&with_times(&failed, None), 800, None, max).is_none());
        let mut v = with_times(&copy, None);
        let i = v.iter().position(|k| *k == Value::BulkString(b"stale_until_ms".to_vec())).unwrap();
        v[i + 1] = Value::BulkString(b"1".to_vec());
        assert!(read(&v, 800, None, max).is_none());
        assert!(read(&with_times(&copy, None), -1, retry, max).is_none(), "a retry without its failure");
        assert!(read(&with_times(&copy, Some(&copy)), -1, retry, max).is_none(), "a failure that is a copy");
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
