//! The Redis adapter of the rate limits: the plan `mcp_gateway::Limits` makes for a call,
//! checked and taken in one script, so replicas counting at the same time never both take the
//! last token.

use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use mcp_gateway::{CallPermit, Caller, LimitError, LimitKind, Limits, RateLimiter};
use redis::Script;

use crate::RedisStore;

/// Checks every bucket and concurrency count of one call and takes from all or none, by the
/// Redis server's clock (so replicas whose clocks disagree still share one bucket).
///
/// KEYS: the buckets, the concurrency counts, then the permit counter. ARGV: the number of
/// buckets, the slot lease (ms), each bucket's capacity and milliseconds per token, each
/// count's limit. A hair under a whole token is one (`mcp_gateway::TOKEN_EPSILON`). Answers `{1, permit}` or `{0, index (from 1, buckets first), wait ms}`.
/// A bucket is a hash (`tokens`, `at`) kept until it would be full again; a concurrency count
/// is a sorted set of permits scored by when their lease ends, so the slots of a replica that
/// died free themselves.
const ADMIT: &str = r"
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local nb = tonumber(ARGV[1])
local lease = tonumber(ARGV[2])
local ns = #KEYS - nb - 1
local tokens, stamps = {}, {}
local worst, wait = 0, 0
for i = 1, nb do
  local cap, per = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local b = redis.call('HMGET', KEYS[i], 'tokens', 'at')
  local tk, at = tonumber(b[1]), tonumber(b[2])
  if not tk or not at then tk, at = cap, now end
  if now > at then
    tk = math.min(cap, tk + (now - at) / per)
    at = now
  end
  tokens[i], stamps[i] = tk, at
  if tk < 1 - 1e-9 then
    local w = math.ceil((1 - tk) * per)
    if w > wait or worst == 0 then worst, wait = i, w end
  end
end
if worst > 0 then return {0, worst, wait} end
for j = 1, ns do
  local key = KEYS[nb + j]
  redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
  if redis.call('ZCARD', key) >= tonumber(ARGV[2 + 2 * nb + j]) then return {0, nb + j, 0} end
end
for i = 1, nb do
  local cap, per = tonumber(ARGV[1 + 2 * i]), tonumber(ARGV[2 + 2 * i])
  local tk = tokens[i] - 1
  redis.call('HSET', KEYS[i], 'tokens', tostring(tk), 'at', tostring(stamps[i]))
  redis.call('PEXPIRE', KEYS[i], math.ceil((cap - tk) * per) + 1000)
end
local permit = 0
if ns > 0 then
  permit = redis.call('INCR', KEYS[#KEYS])
  for j = 1, ns do
    redis.call('ZADD', KEYS[nb + j], now + lease, permit)
    redis.call('PEXPIRE', KEYS[nb + j], lease)
  end
end
return {1, permit, 0}";

static ADMIT_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(ADMIT));

/// The [`RateLimiter`] whose counts live in Redis, so a limit holds across every replica that
/// shares the store. A call's concurrency slot is a lease ([`RedisLimiter::new`]): freed when
/// the call ends, or when the lease runs out if the replica running it died.
///
/// When Redis cannot count, the call is refused ([`LimitError::Store`]), never admitted
/// uncounted.
#[derive(Debug, Clone)]
pub struct RedisLimiter {
    store: RedisStore,
    limits: Limits,
    lease_ms: u64,
}

impl RedisLimiter {
    /// Counts `limits` in `store`; a concurrency slot is held at most `lease` (a call running
    /// longer stops counting then).
    pub fn new(store: RedisStore, limits: Limits, lease: Duration) -> Self {
        let lease_ms = u64::try_from(lease.as_millis()).unwrap_or(u64::MAX).max(1);
        Self { store, limits, lease_ms }
    }
}

/// Frees a permit's slots when dropped (in the background: a drop cannot wait).
struct Release {
    store: RedisStore,
    keys: Vec<String>,
    permit: i64,
}

impl Drop for Release {
    fn drop(&mut self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else { return };
        let (store, keys, permit) = (self.store.clone(), std::mem::take(&mut self.keys), self.permit);
        runtime.spawn(async move {
            for key in keys {
                let mut conn = store.conn();
                let freed = store
                    .run(async move { redis::cmd("ZREM").arg(key).arg(permit).query_async::<i64>(&mut conn).await })
                    .await;
                if let Err(e) = freed {
                    tracing::warn!(error = %e, "a concurrency slot could not be freed; it frees when its lease ends");
                }
            }
        });
    }
}

#[async_trait]
impl RateLimiter for RedisLimiter {
    async fn admit(&self, caller: &Caller, tool: &str) -> Result<CallPermit, LimitError> {
        let plan = self.limits.plan(caller, tool);
        if plan.is_empty() {
            return Ok(CallPermit::unlimited());
        }
        let mut invocation = ADMIT_SCRIPT.prepare_invoke();
        for bucket in &plan.buckets {
            invocation.key(self.store.key("limit", &bucket.key));
        }
        let slot_keys: Vec<String> = plan.slots.iter().map(|s| self.store.key("slots", &s.key)).collect();
        for key in &slot_keys {
            invocation.key(key);
        }
        invocation.key(self.store.key("permits", "counter"));
        invocation.arg(plan.buckets.len()).arg(self.lease_ms);
        for bucket in &plan.buckets {
            invocation.arg(bucket.capacity).arg(bucket.ms_per_token);
        }
        for slot in &plan.slots {
            invocation.arg(slot.limit);
        }
        let mut conn = self.store.conn();
        let (admitted, index, wait): (i64, i64, i64) =
            self.store.run(async move { invocation.invoke_async(&mut conn).await }).await.map_err(LimitError::Store)?;
        if admitted == 1 {
            if slot_keys.is_empty() {
                return Ok(CallPermit::unlimited());
            }
            return Ok(CallPermit::new(Release { store: self.store.clone(), keys: slot_keys, permit: index }));
        }
        let index = usize::try_from(index).unwrap_or(0);
        let wait = Duration::from_millis(u64::try_from(wait).unwrap_or(0));
        let refusal = match index.checked_sub(1).and_then(|i| plan.buckets.get(i)) {
            Some(bucket) => self.limits.refusal(bucket.rule, LimitKind::of_bucket(bucket), wait),
            None => match index.checked_sub(plan.buckets.len() + 1).and_then(|j| plan.slots.get(j)) {
                Some(slot) => self.limits.refusal(slot.rule, LimitKind::Concurrent, mcp_gateway::SLOT_RETRY),
                None => {
                    return Err(LimitError::Store(mcp_gateway::StoreError::Corrupt("an answer of the limit script")));
                }
            },
        };
        Err(LimitError::Refused(refusal))
    }
}
