//! Rate limits and quotas per caller and per tool (`[[serve.limits]]`), and the
//! [`RateLimiter`] **port** that counts them.
//!
//! A rule picks callers and tools by pattern (`*` and `?`, as policy rules do) and limits the
//! calls they make: `calls_per_minute` (a token bucket holding `burst` calls, `calls_per_minute`
//! by default, refilled evenly over the minute), `calls_per_day` (a quota: the same over a day),
//! and `concurrent` (calls running at once). `per` says whose calls share a count: each caller's
//! own (`caller`, the default), each tool's (`tool`, shared by every caller), each caller's
//! per tool (`caller_tool`), or everyone's (`all`). A call takes a token from every bucket and a
//! slot from every concurrency limit that applies, or from none of them; a refusal names the
//! rule and says when to retry.
//!
//! One process counts in memory ([`MemoryLimiter`]); replicas count in a shared store (the
//! `mcp-gateway-store` crate's Redis adapter runs the same arithmetic as one script), so a
//! limit holds across replicas. The plan of one call, which buckets and slots it takes, is made
//! here for both ([`Limits::plan`]).

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use policy::{Pattern, PatternError};
use serde::{Deserialize, Serialize};

use crate::backend::Caller;
use crate::clock::Clock;
use crate::seal::digest_hex;
use crate::session::lock;
use crate::store::StoreError;

/// Most rules.
pub const MAX_LIMIT_RULES: usize = 256;
/// Largest count a rule may give (calls, burst, concurrent).
pub const MAX_LIMIT_COUNT: u32 = 100_000_000;
/// When to retry after a concurrency limit refused: a slot frees when a call ends, which
/// nobody can foresee.
pub const SLOT_RETRY: Duration = Duration::from_secs(1);
/// When to retry after the store could not count.
pub const STORE_RETRY: Duration = Duration::from_secs(1);

const MINUTE_MS: f64 = 60_000.0;
/// How far under a whole token still counts as one (the shared store's script uses the same).
pub const TOKEN_EPSILON: f64 = 1e-9;
const DAY_MS: f64 = 86_400_000.0;

/// Whose calls share one count.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Per {
    /// Each caller has its own (the default).
    #[default]
    Caller,
    /// Each tool has one, shared by every caller.
    Tool,
    /// Each caller has one per tool.
    CallerTool,
    /// One for everyone the rule matches.
    All,
}

/// One limit rule as configured (`[[serve.limits]]`), read strictly.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitRule {
    /// The callers' principals it applies to (a pattern; a local caller's principal is empty,
    /// which `*` matches). Default `*`.
    #[serde(default = "any")]
    pub principal: String,
    /// The profiles it applies to (a pattern; the default profile's name is empty). Default `*`.
    #[serde(default = "any")]
    pub profile: String,
    /// The tools it applies to, by their downstream names (a pattern). Default `*`.
    #[serde(default = "any")]
    pub tool: String,
    /// Whose calls share a count.
    #[serde(default)]
    pub per: Per,
    /// Calls a minute, refilled evenly.
    #[serde(default)]
    pub calls_per_minute: Option<u32>,
    /// Calls that can be made at once after a quiet spell (default `calls_per_minute`).
    #[serde(default)]
    pub burst: Option<u32>,
    /// Calls a day, refilled evenly (a quota).
    #[serde(default)]
    pub calls_per_day: Option<u32>,
    /// Calls running at once.
    #[serde(default)]
    pub concurrent: Option<u32>,
}

fn any() -> String {
    "*".to_owned()
}

impl Default for LimitRule {
    /// Every caller, every tool, per caller, no limit yet.
    fn default() -> Self {
        Self {
            principal: any(),
            profile: any(),
            tool: any(),
            per: Per::Caller,
            calls_per_minute: None,
            burst: None,
            calls_per_day: None,
            concurrent: None,
        }
    }
}

/// Why the limit rules were refused (rules are numbered from 1, in the file's order).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitConfigError {
    /// A pattern did not compile.
    #[error("[[serve.limits]] rule {rule}: `{field}` {pattern:?}: {error}")]
    Pattern {
        /// The rule.
        rule: usize,
        /// The key.
        field: &'static str,
        /// As written.
        pattern: String,
        /// Why.
        error: PatternError,
    },
    /// The rule limits nothing.
    #[error("[[serve.limits]] rule {rule} sets no limit: give `calls_per_minute`, `calls_per_day` or `concurrent`")]
    Empty {
        /// The rule.
        rule: usize,
    },
    /// A count out of range.
    #[error("[[serve.limits]] rule {rule}: `{field}` must be between 1 and {MAX_LIMIT_COUNT}")]
    OutOfRange {
        /// The rule.
        rule: usize,
        /// The key.
        field: &'static str,
    },
    /// `burst` without `calls_per_minute`.
    #[error(
        "[[serve.limits]] rule {rule}: `burst` is the size of the `calls_per_minute` bucket; give `calls_per_minute` too"
    )]
    BurstAlone {
        /// The rule.
        rule: usize,
    },
    /// Too many rules.
    #[error("too many [[serve.limits]] rules ({0}, at most {MAX_LIMIT_RULES})")]
    TooMany(usize),
}

#[derive(Debug, Clone)]
struct Compiled {
    rule: LimitRule,
    principal: Pattern,
    profile: Pattern,
    tool: Pattern,
    /// Names its counts: a digest of the rule, so counts survive a reordering of the rules
    /// and a changed rule starts afresh.
    id: String,
}

/// The limit rules, compiled.
#[derive(Debug, Clone, Default)]
pub struct Limits {
    rules: Vec<Compiled>,
}

/// A token bucket one call takes a token from.
#[derive(Debug, Clone, PartialEq)]
pub struct BucketUse {
    /// The rule (from 1).
    pub rule: usize,
    /// Names the bucket (the caller's and tool's names in it as they are: a shared store
    /// digests it).
    pub key: String,
    /// Most tokens it holds.
    pub capacity: u32,
    /// Milliseconds to refill one token.
    pub ms_per_token: f64,
}

/// A concurrency limit one call takes a slot of.
#[derive(Debug, Clone, PartialEq)]
pub struct SlotUse {
    /// The rule (from 1).
    pub rule: usize,
    /// Names the count.
    pub key: String,
    /// Most calls at once.
    pub limit: u32,
}

/// What one call takes.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Plan {
    /// A token from each.
    pub buckets: Vec<BucketUse>,
    /// A slot of each.
    pub slots: Vec<SlotUse>,
}

impl Plan {
    /// Whether the call is limited at all.
    pub fn is_empty(&self) -> bool {
        self.buckets.is_empty() && self.slots.is_empty()
    }
}

impl Limits {
    /// Compiles `rules`.
    pub fn new(rules: &[LimitRule]) -> Result<Self, LimitConfigError> {
        if rules.len() > MAX_LIMIT_RULES {
            return Err(LimitConfigError::TooMany(rules.len()));
        }
        let mut compiled = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let number = i + 1;
            let pattern = |field: &'static str, raw: &str| {
                Pattern::new(raw).map_err(|error| LimitConfigError::Pattern {
                    rule: number,
                    field,
                    pattern: raw.to_owned(),
                    error,
                })
            };
            let in_range = |field: &'static str, value: Option<u32>| match value {
                Some(v) if v == 0 || v > MAX_LIMIT_COUNT => Err(LimitConfigError::OutOfRange { rule: number, field }),
                _ => Ok(()),
            };
            in_range("calls_per_minute", rule.calls_per_minute)?;
            in_range("burst", rule.burst)?;
            in_range("calls_per_day", rule.calls_per_day)?;
            in_range("concurrent", rule.concurrent)?;
            if rule.burst.is_some() && rule.calls_per_minute.is_none() {
                return Err(LimitConfigError::BurstAlone { rule: number });
            }
            if rule.calls_per_minute.is_none() && rule.calls_per_day.is_none() && rule.concurrent.is_none() {
                return Err(LimitConfigError::Empty { rule: number });
            }
            let id = serde_json::to_string(rule).map_or_else(|_| number.to_string(), |j| digest_hex(j.as_bytes()));
            compiled.push(Compiled {
                principal: pattern("principal", &rule.principal)?,
                profile: pattern("profile", &rule.profile)?,
                tool: pattern("tool", &rule.tool)?,
                rule: rule.clone(),
                id: id.chars().take(16).collect(),
            });
        }
        Ok(Self { rules: compiled })
    }

    /// Whether there are no rules.
    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// What a call of `tool` by `caller` takes.
    pub fn plan(&self, caller: &Caller, tool: &str) -> Plan {
        let principal = caller.principal.as_deref().unwrap_or("");
        let profile = caller.profile.as_deref().unwrap_or("");
        let mut plan = Plan::default();
        for (i, c) in self.rules.iter().enumerate() {
            if !(c.principal.matches(principal) && c.profile.matches(profile) && c.tool.matches(tool)) {
                continue;
            }
            // A caller is counted as one whatever the profile it calls through (each profile
            // had a count of its own: N profiles, N times the quota).
            let scope = match c.rule.per {
                Per::Caller => caller.principal_key(),
                Per::Tool => tool.to_owned(),
                Per::CallerTool => format!("{}\n{tool}", caller.principal_key()),
                Per::All => String::new(),
            };
            let rule = i + 1;
            if let Some(per_minute) = c.rule.calls_per_minute {
                plan.buckets.push(BucketUse {
                    rule,
                    key: format!("{}/m/{scope}", c.id),
                    capacity: c.rule.burst.unwrap_or(per_minute),
                    ms_per_token: MINUTE_MS / f64::from(per_minute),
                });
            }
            if let Some(per_day) = c.rule.calls_per_day {
                plan.buckets.push(BucketUse {
                    rule,
                    key: format!("{}/d/{scope}", c.id),
                    capacity: per_day,
                    ms_per_token: DAY_MS / f64::from(per_day),
                });
            }
            if let Some(limit) = c.rule.concurrent {
                plan.slots.push(SlotUse { rule, key: format!("{}/c/{scope}", c.id), limit });
            }
        }
        plan
    }

    /// A refusal by rule `rule` (from 1) of what kind of count, to retry after `retry_after`.
    pub fn refusal(&self, rule: usize, kind: LimitKind, retry_after: Duration) -> Refusal {
        let limit = match self.rules.get(rule.wrapping_sub(1)) {
            Some(c) => describe(&c.rule, kind),
            None => "a limit".to_owned(),
        };
        Refusal { rule, limit, retry_after }
    }
}

/// Which count of a rule refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LimitKind {
    /// `calls_per_minute`.
    PerMinute,
    /// `calls_per_day`.
    PerDay,
    /// `concurrent`.
    Concurrent,
}

impl LimitKind {
    /// Of a bucket key made by [`Limits::plan`].
    pub fn of_bucket(bucket: &BucketUse) -> Self {
        if bucket.key.contains("/d/") { LimitKind::PerDay } else { LimitKind::PerMinute }
    }
}

fn describe(rule: &LimitRule, kind: LimitKind) -> String {
    let whose = match rule.per {
        Per::Caller => "per caller",
        Per::Tool => "per tool",
        Per::CallerTool => "per caller and tool",
        Per::All => "for everyone",
    };
    let calls = |n: Option<u32>| {
        let n = n.unwrap_or_default();
        format!("{n} call{}", if n == 1 { "" } else { "s" })
    };
    let what = match kind {
        LimitKind::PerMinute => format!("{} a minute", calls(rule.calls_per_minute)),
        LimitKind::PerDay => format!("{} a day", calls(rule.calls_per_day)),
        LimitKind::Concurrent => format!("{} at once", calls(rule.concurrent)),
    };
    let tool =
        if rule.tool == "*" { String::new() } else { format!(" of {}", mcp_safety::text::one_line(&rule.tool, 80)) };
    format!("{what}{tool} {whose}")
}

/// A call a limit refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The rule (from 1, in the configuration's order).
    pub rule: usize,
    /// The limit, for people ("60 calls a minute per caller").
    pub limit: String,
    /// When a retry can succeed.
    pub retry_after: Duration,
}

impl Refusal {
    /// [`Refusal::retry_after`] in whole seconds, at least 1 (HTTP's `Retry-After`).
    pub fn retry_after_secs(&self) -> u64 {
        secs_ceil(self.retry_after)
    }
}

fn secs_ceil(d: Duration) -> u64 {
    let ms = u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    ms.div_ceil(1000).max(1)
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "rate limit reached: {} (rule {} of [[serve.limits]]); retry after {} s",
            self.limit,
            self.rule,
            self.retry_after_secs()
        )
    }
}

/// Why a call was not admitted. The text is what the client reads.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum LimitError {
    /// A limit refused it.
    #[error("{0}")]
    Refused(Refusal),
    /// The counts could not be checked (never admitted unchecked).
    #[error("the call's rate limits cannot be checked now: {0}")]
    Store(StoreError),
}

impl LimitError {
    /// When a retry can succeed.
    pub fn retry_after(&self) -> Duration {
        match self {
            LimitError::Refused(r) => r.retry_after,
            LimitError::Store(_) => STORE_RETRY,
        }
    }

    /// [`LimitError::retry_after`] in whole seconds, at least 1 (HTTP's `Retry-After`).
    pub fn retry_after_secs(&self) -> u64 {
        secs_ceil(self.retry_after())
    }

    /// The HTTP status of a request refused as a whole (sent with `Retry-After:`
    /// [`LimitError::retry_after_secs`]): 429 when a limit refused it, 503 when the counts could
    /// not be checked. A refused *call* is a tool error result instead, inside a 200.
    pub fn http_status(&self) -> http::StatusCode {
        match self {
            LimitError::Refused(_) => http::StatusCode::TOO_MANY_REQUESTS,
            LimitError::Store(_) => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }
}

/// A call a [`RateLimiter`] admitted: held while the call runs, its concurrency slots are freed
/// when it is dropped.
#[must_use = "the call's concurrency slots are freed when the permit is dropped"]
pub struct CallPermit {
    _release: Option<Box<dyn Send + Sync>>,
}

impl CallPermit {
    /// A permit that frees nothing.
    pub fn unlimited() -> Self {
        Self { _release: None }
    }

    /// A permit whose `release` frees its slots when dropped.
    pub fn new(release: impl Send + Sync + 'static) -> Self {
        Self { _release: Some(Box::new(release)) }
    }
}

impl fmt::Debug for CallPermit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(if self._release.is_some() { "CallPermit(slots)" } else { "CallPermit" })
    }
}

/// Counts calls against the limits. A **port**: one process counts in memory
/// ([`MemoryLimiter`]); replicas in a shared store, so a limit holds across them.
#[async_trait]
pub trait RateLimiter: fmt::Debug + Send + Sync {
    /// Admits one call of `tool` (its downstream name) by `caller`: a token from every bucket
    /// and a slot from every concurrency limit that applies, or none of them. Hold the permit
    /// until the call ends.
    async fn admit(&self, caller: &Caller, tool: &str) -> Result<CallPermit, LimitError>;
}

/// A token bucket's state: tokens at a time.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Bucket {
    tokens: f64,
    at_ms: u64,
    capacity: f64,
    ms_per_token: f64,
}

impl Bucket {
    fn full(use_: &BucketUse, now_ms: u64) -> Self {
        let capacity = f64::from(use_.capacity);
        Self { tokens: capacity, at_ms: now_ms, capacity, ms_per_token: use_.ms_per_token }
    }

    /// Refilled up to `now_ms` (a clock that went back refills nothing).
    fn at(self, now_ms: u64) -> Self {
        let elapsed = now_ms.saturating_sub(self.at_ms) as f64;
        let tokens = (self.tokens + elapsed / self.ms_per_token).min(self.capacity);
        Self { tokens, at_ms: now_ms.max(self.at_ms), ..self }
    }

    /// How long until it holds a whole token; `None` when it does.
    fn wait(&self) -> Option<Duration> {
        // A hair under a whole token is a whole token: the refill is a float, and a call retried
        // at the time a refusal gave must not be refused again for rounding.
        (self.tokens < 1.0 - TOKEN_EPSILON)
            .then(|| Duration::from_millis(((1.0 - self.tokens) * self.ms_per_token).ceil() as u64))
    }
}

#[derive(Debug, Default)]
struct Counts {
    buckets: HashMap<String, Bucket>,
    slots: HashMap<String, u32>,
}

/// The in-memory [`RateLimiter`]: the counts of one process, bounded in number.
#[derive(Debug)]
pub struct MemoryLimiter {
    limits: Limits,
    capacity: usize,
    clock: Arc<dyn Clock>,
    counts: Arc<Mutex<Counts>>,
}

impl MemoryLimiter {
    /// Counts `limits` by `clock`, keeping at most `capacity` buckets and as many concurrency
    /// counts (a bucket full again is forgotten first: forgetting it changes nothing; beyond
    /// that, calls are refused rather than counted afresh).
    pub fn new(limits: Limits, capacity: usize, clock: Arc<dyn Clock>) -> Self {
        Self { limits, capacity, clock, counts: Arc::new(Mutex::new(Counts::default())) }
    }
}

/// Frees a memory permit's slots.
struct Slots {
    counts: Arc<Mutex<Counts>>,
    keys: Vec<String>,
}

impl Drop for Slots {
    fn drop(&mut self) {
        let mut counts = lock(&self.counts);
        for key in &self.keys {
            if let Some(n) = counts.slots.get_mut(key) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    counts.slots.remove(key);
                }
            }
        }
    }
}

#[async_trait]
impl RateLimiter for MemoryLimiter {
    async fn admit(&self, caller: &Caller, tool: &str) -> Result<CallPermit, LimitError> {
        let plan = self.limits.plan(caller, tool);
        if plan.is_empty() {
            return Ok(CallPermit::unlimited());
        }
        let now = self.clock.unix_ms();
        let mut counts = lock(&self.counts);
        let mut refused: Option<(usize, LimitKind, Duration)> = None;
        let mut now_buckets = Vec::with_capacity(plan.buckets.len());
        for use_ in &plan.buckets {
            let bucket = counts.buckets.get(&use_.key).map_or_else(|| Bucket::full(use_, now), |b| b.at(now));
            if let Some(wait) = bucket.wait()
                && refused.as_ref().is_none_or(|(_, _, longest)| wait > *longest)
            {
                refused = Some((use_.rule, LimitKind::of_bucket(use_), wait));
            }
            now_buckets.push(bucket);
        }
        if refused.is_none()
            && let Some(full) = plan.slots.iter().find(|s| counts.slots.get(&s.key).copied().unwrap_or(0) >= s.limit)
        {
            refused = Some((full.rule, LimitKind::Concurrent, SLOT_RETRY));
        }
        if let Some((rule, kind, wait)) = refused {
            return Err(LimitError::Refused(self.limits.refusal(rule, kind, wait)));
        }
        let new_buckets = plan.buckets.iter().filter(|u| !counts.buckets.contains_key(&u.key)).count();
        if counts.buckets.len() + new_buckets > self.capacity {
            counts.buckets.retain(|_, b| b.at(now).tokens < b.capacity);
            if counts.buckets.len() + new_buckets > self.capacity {
                return Err(LimitError::Store(StoreError::Full {
                    what: "rate limit buckets",
                    capacity: self.capacity,
                }));
            }
        }
        let new_slots = plan.slots.iter().filter(|s| !counts.slots.contains_key(&s.key)).count();
        if counts.slots.len() + new_slots > self.capacity {
            return Err(LimitError::Store(StoreError::Full { what: "concurrency counts", capacity: self.capacity }));
        }
        for (use_, mut bucket) in plan.buckets.iter().zip(now_buckets) {
            bucket.tokens -= 1.0;
            counts.buckets.insert(use_.key.clone(), bucket);
        }
        if plan.slots.is_empty() {
            return Ok(CallPermit::unlimited());
        }
        for slot in &plan.slots {
            *counts.slots.entry(slot.key.clone()).or_insert(0) += 1;
        }
        drop(counts);
        let keys = plan.slots.into_iter().map(|s| s.key).collect();
        Ok(CallPermit::new(Slots { counts: Arc::clone(&self.counts), keys }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock as Manual;

    fn limiter(rules: &[LimitRule], capacity: usize) -> (MemoryLimiter, Arc<Manual>) {
        let clock = Arc::new(Manual::default());
        (MemoryLimiter::new(Limits::new(rules).unwrap(), capacity, Arc::clone(&clock) as Arc<dyn Clock>), clock)
    }

    fn refused(result: Result<CallPermit, LimitError>) -> Refusal {
        match result {
            Err(LimitError::Refused(r)) => r,
            other => panic!("expected a refusal, got {other:?}"),
        }
    }

    #[test]
    fn rules_are_checked() {
        let rule = |f: fn(&mut LimitRule)| {
            let mut r = LimitRule { calls_per_minute: Some(1), ..LimitRule::default() };
            f(&mut r);
            Limits::new(&[r]).map(|_| ())
        };
        assert_eq!(rule(|_| {}), Ok(()));
        assert_eq!(rule(|r| r.calls_per_minute = None), Err(LimitConfigError::Empty { rule: 1 }));
        assert_eq!(
            rule(|r| r.calls_per_minute = Some(0)),
            Err(LimitConfigError::OutOfRange { rule: 1, field: "calls_per_minute" })
        );
        assert_eq!(
            rule(|r| {
                r.calls_per_minute = None;
                r.concurrent = Some(2);
                r.burst = Some(3);
            }),
            Err(LimitConfigError::BurstAlone { rule: 1 })
        );
        assert!(matches!(rule(|r| r.tool = "a[b]".into()), Err(LimitConfigError::Pattern { field: "tool", .. })));
        let read: LimitRule = serde_json::from_value(serde_json::json!(
            {"principal": "ops-*", "per": "caller_tool", "calls_per_minute": 5, "concurrent": 1}
        ))
        .unwrap();
        assert_eq!(read.per, Per::CallerTool);
        assert_eq!(read.tool, "*");
        assert!(
            serde_json::from_value::<LimitRule>(serde_json::json!({"calls_per_minit": 5})).is_err(),
            "unknown keys are refused"
        );
    }

    #[tokio::test]
    async fn a_bucket_admits_its_burst_then_says_when_to_retry() {
        let (limiter, clock) =
            limiter(&[LimitRule { calls_per_minute: Some(60), burst: Some(3), ..LimitRule::default() }], 10);
        let alice = Caller::principal("alice");
        for _ in 0..3 {
            let _ = limiter.admit(&alice, "files__read").await.unwrap();
        }
        let refusal = refused(limiter.admit(&alice, "files__read").await);
        assert_eq!(refusal.retry_after, Duration::from_secs(1));
        let error = LimitError::Refused(refusal.clone());
        assert_eq!((error.http_status().as_u16(), error.retry_after_secs()), (429, 1));
        let down = LimitError::Store(StoreError::Timeout(Duration::from_millis(500)));
        assert_eq!((down.http_status().as_u16(), down.retry_after_secs()), (503, 1));
        assert_eq!(
            refusal.to_string(),
            "rate limit reached: 60 calls a minute per caller (rule 1 of [[serve.limits]]); retry after 1 s"
        );
        // Another caller has a bucket of its own.
        let _ = limiter.admit(&Caller::principal("bob"), "files__read").await.unwrap();
        clock.set(400);
        assert_eq!(refused(limiter.admit(&alice, "x").await).retry_after, Duration::from_millis(600));
        clock.set(1000);
        let _ = limiter.admit(&alice, "x").await.unwrap();
        assert!(limiter.admit(&alice, "x").await.is_err());
    }

    /// A caller's count is one whatever the profile it calls through, and a principal named
    /// like another's key with its profile (`bob@narrow`) is someone else.
    #[tokio::test]
    async fn a_caller_counts_once_across_profiles_and_names_never_collide() {
        let (limiter, _clock) =
            limiter(&[LimitRule { calls_per_minute: Some(60), burst: Some(2), ..LimitRule::default() }], 10);
        let in_profile = |principal: &str, profile: Option<&str>| Caller {
            principal: Some(principal.into()),
            profile: profile.map(Into::into),
        };
        let _ = limiter.admit(&in_profile("alice", None), "t").await.unwrap();
        let _ = limiter.admit(&in_profile("alice", Some("narrow")), "t").await.unwrap();
        assert!(limiter.admit(&in_profile("alice", Some("wide")), "t").await.is_err(), "a third profile, same count");
        let _ = limiter.admit(&in_profile("bob@narrow", None), "t").await.unwrap();
        let _ = limiter.admit(&in_profile("bob@narrow", None), "t").await.unwrap();
        let _ = limiter.admit(&in_profile("bob", Some("narrow")), "t").await.unwrap();
        assert_ne!(in_profile("bob@narrow", None).key(), in_profile("bob", Some("narrow")).key());
    }

    #[tokio::test]
    async fn all_or_nothing_and_concurrency_slots_are_freed_by_the_permit() {
        let rules = [
            LimitRule { concurrent: Some(1), per: Per::Tool, tool: "files__*".into(), ..LimitRule::default() },
            LimitRule { calls_per_minute: Some(2), ..LimitRule::default() },
        ];
        let (limiter, _clock) = limiter(&rules, 10);
        let alice = Caller::principal("alice");
        let permit = limiter.admit(&alice, "files__write").await.unwrap();
        let refusal = refused(limiter.admit(&Caller::principal("bob"), "files__write").await);
        assert_eq!((refusal.rule, refusal.retry_after), (1, SLOT_RETRY));
        assert!(refusal.limit.contains("1 call at once of files__* per tool"), "{}", refusal.limit);
        // The refused call took no token: alice still has one.
        let other = limiter.admit(&alice, "db__query").await.unwrap();
        drop(permit);
        drop(other);
        let refusal = refused(limiter.admit(&alice, "files__write").await);
        assert_eq!(refusal.rule, 2, "now the minute's bucket is empty");
        let _ = limiter.admit(&Caller::principal("bob"), "files__write").await.unwrap();
    }

    #[tokio::test]
    async fn counts_are_bounded_and_full_buckets_are_forgotten_first() {
        let (limiter, clock) = limiter(&[LimitRule { calls_per_minute: Some(60_000), ..LimitRule::default() }], 2);
        let _ = limiter.admit(&Caller::principal("a"), "t").await.unwrap();
        let _ = limiter.admit(&Caller::principal("b"), "t").await.unwrap();
        assert!(matches!(
            limiter.admit(&Caller::principal("c"), "t").await,
            Err(LimitError::Store(StoreError::Full { .. }))
        ));
        clock.set(10);
        let _ = limiter.admit(&Caller::principal("c"), "t").await.unwrap();
    }

    proptest::proptest! {
        /// However calls arrive, a bucket admits at most its burst plus what refilled, and a
        /// call retried when the refusal said succeeds.
        #[test]
        fn a_bucket_never_admits_more_than_it_refilled_and_its_retry_time_is_right(
            per_minute in 1u32..600,
            burst in 1u32..20,
            gaps in proptest::collection::vec(0u64..5_000, 1..80),
        ) {
            let rule = LimitRule { calls_per_minute: Some(per_minute), burst: Some(burst), ..LimitRule::default() };
            let (limiter, clock) = limiter(&[rule], 10);
            let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
            let caller = Caller::principal("p");
            let (mut now, mut admitted) = (0u64, 0u64);
            for gap in gaps {
                now += gap;
                clock.set(now);
                match runtime.block_on(limiter.admit(&caller, "t")) {
                    Ok(_) => admitted += 1,
                    Err(LimitError::Refused(r)) => {
                        let retry = u64::try_from(r.retry_after.as_millis()).unwrap();
                        proptest::prop_assert!(retry >= 1 && retry <= 60_000 / u64::from(per_minute) + 1);
                        clock.set(now + retry);
                        proptest::prop_assert!(runtime.block_on(limiter.admit(&caller, "t")).is_ok(), "at the retry time");
                        admitted += 1;
                        now += retry;
                    }
                    Err(e) => proptest::prop_assert!(false, "{e}"),
                }
                let refilled = now * u64::from(per_minute) / 60_000;
                proptest::prop_assert!(admitted <= u64::from(burst) + refilled, "{admitted} > {burst} + {refilled}");
            }
        }
    }
}
