//! [`RedisPaceStore`]: the pacer's [`SharedPaceStore`] kept in Redis for a fleet. The slot
//! arithmetic of the pacer in Lua, on Redis' clock (`TIME`, milliseconds), one script per
//! step; the pacer mirrors what the scripts answered in its own lanes.

use std::sync::LazyLock;
use std::time::Duration;

use redis::Value;

use super::{Cluster, Lua, int, millis, pauses};
use crate::pacing::{
    Backoff, LaneId, PauseInfo, PauseNotice, PauseSink, SharedFuture, SharedPaceStore, SharedPause,
    SharedSlot,
};

/// Lua: a key that is not a hash (another program wrote it) is a miss: deleted.
macro_rules! hash_or_nothing {
    () => {
        r"
local ty = redis.call('TYPE', KEYS[1])['ok']
if ty ~= 'hash' and ty ~= 'none' then redis.call('DEL', KEYS[1]) end
"
    };
}

/// Lua: `now`, Redis' clock in milliseconds (the one clock of the fleet).
macro_rules! redis_now {
    () => {
        r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
"
    };
}

/// Takes the next slot: `at = max(now, last + delay, pause_until)`; nothing is taken when
/// `at - now > limit`. Returns `{taken, wait_ms, at_ms, prev_ms or -1, by_pause, status,
/// retry_after, pause_ms, streak}`. Values that do not read as numbers count as absent.
const TAKE: &str = concat!(
    hash_or_nothing!(),
    redis_now!(),
    r"
local delay = tonumber(ARGV[1])
local limit = tonumber(ARGV[2])
local v = redis.call('HMGET', KEYS[1], 'last', 'pause_until', 'status', 'retry_after', 'pause_ms', 'streak', 'forget_at')
local last = tonumber(v[1])
local pause = tonumber(v[2])
local at = now
if last then at = math.max(at, last + delay) end
local by_pause = 0
if pause and pause > now and pause >= at then at = pause; by_pause = 1 end
local wait = at - now
local info = {by_pause, tonumber(v[3]) or 0, v[4] or '', tonumber(v[5]) or 0, tonumber(v[6]) or 0}
if wait > limit then
  return {0, wait, at, -1, info[1], info[2], info[3], info[4], info[5]}
end
redis.call('HSET', KEYS[1], 'last', at)
local keep = at + delay
local forget = tonumber(v[7])
if forget and forget > keep then keep = forget end
redis.call('PEXPIRE', KEYS[1], keep - now + 1000)
return {1, wait, at, last or -1, info[1], info[2], info[3], info[4], info[5]}
"
);

/// Gives a slot back when no later one was taken: `last == ARGV[1]` becomes `ARGV[2]`.
const GIVE_BACK: &str = concat!(
    hash_or_nothing!(),
    r"
local last = redis.call('HGET', KEYS[1], 'last')
if last and tonumber(last) == tonumber(ARGV[1]) then
  if tonumber(ARGV[2]) < 0 then redis.call('HDEL', KEYS[1], 'last') else redis.call('HSET', KEYS[1], 'last', ARGV[2]) end
  return 1
end
return 0
"
);

/// Pauses a lane after a 429/503, as `LocalStore::pause_now` does (ARGV: status,
/// retry_after_ms or -1, its text, sent_ago_ms, initial_ms, max_ms). Returns `{0}` when
/// nothing changed, else `{1, pause_ms, streak, until_ms - now}`.
const PAUSE: &str = concat!(
    hash_or_nothing!(),
    redis_now!(),
    r"
local status = tonumber(ARGV[1])
local ra = tonumber(ARGV[2])
local sent = now - tonumber(ARGV[4])
local initial = tonumber(ARGV[5])
local max = tonumber(ARGV[6])
local v = redis.call('HMGET', KEYS[1], 'pause_until', 'pause_set_at', 'streak')
local pause_until = tonumber(v[1])
local set_at = tonumber(v[2])
local streak = tonumber(v[3]) or 0
local p
if pause_until and pause_until > now and set_at and sent < set_at then
  if ra < 0 then return {0} end
  p = math.min(ra, max)
  if pause_until >= now + p then return {0} end
else
  streak = streak + 1
  if ra >= 0 then p = math.min(ra, max) else p = math.min(initial * 2 ^ math.min(streak - 1, 20), max) end
  set_at = now
end
local until_ = now + p
if pause_until and pause_until > until_ then until_ = pause_until end
redis.call('HSET', KEYS[1], 'pause_until', until_, 'pause_set_at', set_at, 'streak', streak,
  'status', status, 'retry_after', ARGV[3], 'pause_ms', p, 'forget_at', until_ + p)
redis.call('PEXPIRE', KEYS[1], until_ + p - now + 1000)
return {1, p, streak, until_ - now}
"
);

/// A success: the doubling starts again.
const CLEAR: &str = concat!(
    hash_or_nothing!(),
    r"
if redis.call('EXISTS', KEYS[1]) == 1 then redis.call('HSET', KEYS[1], 'streak', 0) end
return 1
"
);

static TAKE_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(TAKE));

/// Runs the TAKE script on `key` (a slot `delay` after the lane's last, waiting at most
/// `limit`) within the command timeout, noting Redis up or down: its nine values, or `None`
/// when Redis failed or answered something else.
pub(super) async fn take_slot(
    cluster: &Cluster,
    key: &str,
    delay: Duration,
    limit: Duration,
) -> Option<Vec<Value>> {
    let mut conn = cluster.connection();
    let mut invocation = TAKE_SCRIPT.key(key);
    invocation.arg(millis(delay)).arg(millis(limit));
    let timeout = cluster.config().command_timeout;
    match tokio::time::timeout(timeout, invocation.invoke(&mut conn)).await {
        Ok(Ok(Value::Array(values))) if values.len() == 9 => {
            cluster.note(true, None);
            Some(values)
        }
        Ok(Ok(_)) => None,
        Ok(Err(e)) => {
            cluster.failed(&e);
            None
        }
        Err(_) => {
            cluster.note(false, Some("timed out"));
            None
        }
    }
}
static GIVE_BACK_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(GIVE_BACK));
static PAUSE_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(PAUSE));
static CLEAR_SCRIPT: LazyLock<Lua> = LazyLock::new(|| Lua::new(CLEAR));

/// The pacer's store in Redis (see [fleet mode](crate::cluster)).
#[derive(Debug, Clone)]
pub struct RedisPaceStore {
    cluster: Cluster,
}

impl RedisPaceStore {
    /// A store on `cluster`'s Redis.
    pub fn new(cluster: Cluster) -> RedisPaceStore {
        RedisPaceStore { cluster }
    }

    /// Runs `script` on `key` with `args`, bounded by the command timeout; `None` (and the
    /// cluster noted down) when Redis did not answer, or answered what does not read.
    async fn run(&self, script: &Lua, key: &str, args: &[i64], text: Option<&str>) -> Option<Vec<i64>> {
        let mut invocation = script.key(key);
        for a in args {
            invocation.arg(*a);
        }
        if let Some(t) = text {
            invocation.arg(t);
        }
        let mut conn = self.cluster.connection();
        let timeout = self.cluster.config().command_timeout;
        let answer = tokio::time::timeout(timeout, invocation.invoke(&mut conn)).await;
        match answer {
            Ok(Ok(value)) => {
                self.cluster.note(true, None);
                ints(&value)
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

    fn key(&self, lane: LaneId<'_>) -> String {
        self.cluster.key(lane.origin, lane.agent)
    }
}

impl SharedPaceStore for RedisPaceStore {
    fn is_up(&self) -> bool {
        self.cluster.is_up()
    }

    fn take<'a>(
        &'a self,
        lane: LaneId<'a>,
        delay: Duration,
        limit: Duration,
    ) -> SharedFuture<'a, Option<SharedSlot>> {
        Box::pin(async move {
            let key = self.key(lane);
            // The retry_after text is a string value at index 6.
            let values = take_slot(&self.cluster, &key, delay, limit).await?;
            let int = |i: usize| int(&values[i]);
            let (taken, wait, at, prev) = (int(0)?, int(1)?, int(2)?, int(3)?);
            let wait = Duration::from_millis(u64::try_from(wait).ok()?);
            let pause = (int(4)? == 1).then(|| PauseInfo {
                status: u16::try_from(int(5).unwrap_or(0)).unwrap_or(0),
                retry_after: text(&values[6]).filter(|t| !t.is_empty()).map(Into::into),
                pause: Duration::from_millis(u64::try_from(int(7).unwrap_or(0)).unwrap_or(0)),
                streak: u32::try_from(int(8).unwrap_or(0)).unwrap_or(0),
            });
            Some(SharedSlot { taken: taken == 1, wait, at, prev, pause })
        })
    }

    fn give_back(&self, lane: LaneId<'_>, at: i64, prev: i64) {
        let this = self.clone();
        let key = self.key(lane);
        tokio::spawn(async move {
            this.run(&GIVE_BACK_SCRIPT, &key, &[at, prev], None).await;
        });
    }

    fn pause<'a>(&'a self, lane: LaneId<'a>, answer: &'a Backoff) -> SharedFuture<'a, Option<SharedPause>> {
        Box::pin(async move {
            let key = self.key(lane);
            let ra = answer.retry_after.as_ref().map_or(-1, |(d, _)| millis(*d));
            let raw = answer.retry_after.as_ref().map_or(String::new(), |(_, t)| t.to_string());
            // ARGV: status, retry_after_ms, text, sent_ago, initial, max.
            let args = [
                i64::from(answer.status),
                ra,
                millis(answer.sent_ago),
                millis(answer.initial),
                millis(answer.max),
            ];
            let mut invocation = PAUSE_SCRIPT.key(&key);
            invocation.arg(args[0]).arg(args[1]).arg(raw.as_str()).arg(args[2]).arg(args[3]).arg(args[4]);
            let mut conn = self.cluster.connection();
            let timeout = self.cluster.config().command_timeout;
            match tokio::time::timeout(timeout, invocation.invoke(&mut conn)).await {
                Ok(Ok(v)) => {
                    self.cluster.note(true, None);
                    let ms = |x: i64| Duration::from_millis(u64::try_from(x).unwrap_or(0));
                    let fleet = match ints(&v).as_deref() {
                        Some([1, pause_ms, streak, left_ms, ..]) => SharedPause {
                            pause: ms(*pause_ms),
                            streak: u32::try_from(*streak).ok(),
                            left: ms(*left_ms),
                        },
                        _ => return None,
                    };
                    // Every replica's lane, paced or not, waits for it too.
                    let notice = PauseNotice {
                        origin: lane.origin.clone(),
                        agent: lane.agent.clone(),
                        left: fleet.left,
                        pause: PauseInfo {
                            status: answer.status,
                            retry_after: answer.retry_after.as_ref().map(|(_, raw)| raw.clone()),
                            pause: fleet.pause,
                            streak: fleet.streak.unwrap_or(0),
                        },
                    };
                    pauses::publish(&self.cluster, notice.to_message());
                    Some(fleet)
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
        })
    }

    fn clear(&self, lane: LaneId<'_>) {
        let this = self.clone();
        let key = self.key(lane);
        tokio::spawn(async move {
            this.run(&CLEAR_SCRIPT, &key, &[], None).await;
        });
    }

    fn watch_pauses(&self, sink: PauseSink) {
        pauses::watch(&self.cluster, sink);
    }
}

fn text(v: &Value) -> Option<String> {
    match v {
        Value::BulkString(b) => String::from_utf8(b.clone()).ok(),
        Value::SimpleString(s) => Some(s.clone()),
        _ => None,
    }
}

/// An array of integers, or `None` for anything else.
fn ints(v: &Value) -> Option<Vec<i64>> {
    match v {
        Value::Array(values) => values.iter().map(int).collect(),
        other => int(other).map(|i| vec![i]),
    }
}
