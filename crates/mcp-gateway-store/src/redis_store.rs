//! The Redis adapter of the replay cache, the approval memory and the session store.

use std::fmt;
use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use mcp_gateway::{
    ApprovalMemory, MAX_SESSION_ID_CHARS, MAX_SUBSCRIPTIONS, ReplayCache, ReplayError, SessionChange, SessionRecord,
    SessionStore, StoreError, digest_hex,
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands as _, Script};

/// How to reach Redis and how long to wait for it. Its `Debug` never shows the URL (it may
/// hold a password).
#[derive(Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct RedisOptions {
    /// `redis://[user:password@]host:port[/db]` (or `rediss://` where TLS is built in; this
    /// build speaks plain TCP, meant for a private network or loopback).
    pub url: String,
    /// Prefix of every key, so several gateways (or a gateway and something else) can share a
    /// Redis. Replicas of one gateway use the same.
    pub namespace: String,
    /// Longest wait for one command, reconnecting included: past it the request that needed it
    /// fails with [`StoreError::Timeout`].
    pub command_timeout: Duration,
    /// Longest wait for a connection.
    pub connect_timeout: Duration,
    /// A session's idle lifetime.
    pub session_ttl: Duration,
    /// How long "yes for this client" is remembered after it was last given.
    pub approval_ttl: Duration,
    /// Most approvals remembered per scope.
    pub approvals_per_scope: usize,
}

impl fmt::Debug for RedisOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisOptions")
            .field("namespace", &self.namespace)
            .field("command_timeout", &self.command_timeout)
            .field("connect_timeout", &self.connect_timeout)
            .field("session_ttl", &self.session_ttl)
            .field("approval_ttl", &self.approval_ttl)
            .field("approvals_per_scope", &self.approvals_per_scope)
            .finish_non_exhaustive()
    }
}

impl RedisOptions {
    /// Options for `url` with the defaults: namespace `mcp-harness`, 500 ms a command, 2 s to
    /// connect, sessions idle for an hour, approvals for a day, 1,000 per scope.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            namespace: "mcp-harness".to_owned(),
            command_timeout: Duration::from_millis(500),
            connect_timeout: Duration::from_secs(2),
            session_ttl: Duration::from_secs(3600),
            approval_ttl: Duration::from_secs(86_400),
            approvals_per_scope: 1000,
        }
    }
}

/// Shared state in Redis: a [`ReplayCache`], an [`ApprovalMemory`] and a [`SessionStore`] (and,
/// through [`crate::RedisLimiter`], the rate limits). Cheap to clone: every clone shares one
/// multiplexed connection, which reconnects by itself after Redis comes back.
///
/// Every command has a time limit; an unreachable or slow Redis is an error the caller sees
/// ([`StoreError`]), never a fallback to local state. Keys name what they hold by a digest
/// (a session id, a caller or an approval scope never appears in a key), under
/// [`RedisOptions::namespace`].
#[derive(Clone)]
pub struct RedisStore {
    conn: ConnectionManager,
    namespace: String,
    timeout: Duration,
    session_ttl_ms: u64,
    approval_ttl_ms: u64,
    approvals_per_scope: usize,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL may hold a password: never printed.
        f.debug_struct("RedisStore").field("namespace", &self.namespace).finish_non_exhaustive()
    }
}

/// Why Redis could not be used at start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConnectError {
    /// The URL is not one the client reads (its text is not repeated: it may hold a password).
    #[error("the Redis URL is not valid ({0}); write it as redis://host:port[/db]")]
    Url(String),
    /// Redis did not answer.
    #[error("Redis did not answer at start: {0}")]
    Unreachable(StoreError),
}

fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}

impl RedisStore {
    /// Connects and checks that Redis answers (`PING`): a gateway that needs shared state does
    /// not start without it.
    pub async fn connect(options: &RedisOptions) -> Result<Self, ConnectError> {
        let client = redis::Client::open(options.url.as_str()).map_err(|e| ConnectError::Url(category(&e)))?;
        let config = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.command_timeout))
            // Few, quick attempts: a request waits at most `command_timeout` anyway, and the
            // next request starts a new round of attempts.
            .set_number_of_retries(2)
            .set_min_delay(Duration::from_millis(50))
            .set_max_delay(Duration::from_millis(500));
        // A first connection of its own, so what is wrong at start (a refused password, say)
        // is said as such, not as the timeout of the manager's retries.
        let probe = redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(options.connect_timeout))
            .set_response_timeout(Some(options.command_timeout));
        let limit = options.connect_timeout.saturating_add(options.command_timeout);
        let first = tokio::time::timeout(limit, async {
            let mut conn = client.get_multiplexed_async_connection_with_config(&probe).await?;
            redis::cmd("PING").query_async::<String>(&mut conn).await
        })
        .await;
        match first {
            Ok(Ok(_)) => {}
            Ok(Err(e)) if e.is_timeout() => return Err(ConnectError::Unreachable(StoreError::Timeout(limit))),
            Ok(Err(e)) => return Err(ConnectError::Unreachable(StoreError::Unavailable(category(&e)))),
            Err(_) => return Err(ConnectError::Unreachable(StoreError::Timeout(limit))),
        }
        let conn =
            ConnectionManager::new_lazy_with_config(client, config).map_err(|e| ConnectError::Url(category(&e)))?;
        let store = Self {
            conn,
            namespace: options.namespace.clone(),
            timeout: options.command_timeout,
            session_ttl_ms: millis(options.session_ttl),
            approval_ttl_ms: millis(options.approval_ttl),
            approvals_per_scope: options.approvals_per_scope,
        };
        store.ping().await.map_err(ConnectError::Unreachable)?;
        Ok(store)
    }

    /// Whether Redis answers now (`/readyz` may ask).
    pub async fn ping(&self) -> Result<(), StoreError> {
        let mut conn = self.conn.clone();
        self.run(async move { redis::cmd("PING").query_async::<String>(&mut conn).await }).await.map(drop)
    }

    /// The key of `what` named `name` (digested).
    pub(crate) fn key(&self, what: &str, name: &str) -> String {
        format!("{}:{what}:{}", self.namespace, digest_hex(name.as_bytes()))
    }

    /// A connection handle (cheap: the manager's multiplexed connection).
    pub(crate) fn conn(&self) -> ConnectionManager {
        self.conn.clone()
    }

    /// Runs one command within the time limit, its failure as a [`StoreError`].
    pub(crate) async fn run<T>(&self, command: impl Future<Output = redis::RedisResult<T>>) -> Result<T, StoreError> {
        match tokio::time::timeout(self.timeout, command).await {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(e)) if e.is_timeout() => Err(StoreError::Timeout(self.timeout)),
            Ok(Err(e)) => {
                tracing::warn!(error = %e, "a command to the shared state store failed");
                Err(StoreError::Unavailable(category(&e)))
            }
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        }
    }
}

/// What went wrong, for people, without the server's address or anything it said back (the
/// operator's log has the whole error).
pub(crate) fn category(e: &redis::RedisError) -> String {
    use redis::ErrorKind;
    if e.is_connection_refusal() {
        return "connection refused".to_owned();
    }
    if e.is_connection_dropped() {
        return "connection lost".to_owned();
    }
    if e.is_io_error() {
        return "connection failed".to_owned();
    }
    match e.kind() {
        ErrorKind::AuthenticationFailed => {
            "authentication failed: check the user and password of the store's URL".to_owned()
        }
        ErrorKind::InvalidClientConfig => "the store's URL or client settings are not valid".to_owned(),
        ErrorKind::Server(kind) => format!("Redis refused the command ({kind:?})"),
        ErrorKind::Parse | ErrorKind::UnexpectedReturnType => {
            "Redis gave an answer this gateway cannot read".to_owned()
        }
        other => format!("{other:?}"),
    }
}

/// Marks an id used until its expiry, and says whether it was new.
const FIRST_USE: &str = "return redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) and 1 or 0";
static FIRST_USE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(FIRST_USE));

/// Room for replicas' clocks disagreeing: a used id is kept this much beyond its expiry.
const CLOCK_SLACK_MS: u64 = 60_000;
const TEN_YEARS_MS: u64 = 10 * 366 * 86_400_000;

#[async_trait]
impl ReplayCache for RedisStore {
    async fn first_use(
        &self,
        _owner: Option<&str>,
        id: &str,
        expires_ms: u64,
        now_ms: u64,
    ) -> Result<bool, ReplayError> {
        let key = self.key("replay", id);
        // Redis refuses an expiry past its clock's range: ten years is "until it expires" too.
        let ttl = expires_ms.saturating_sub(now_ms).saturating_add(CLOCK_SLACK_MS).min(TEN_YEARS_MS);
        let mut conn = self.conn();
        let script = &*FIRST_USE_SCRIPT;
        let first: i64 = self
            .run(async move { script.key(key).arg(ttl).invoke_async(&mut conn).await })
            .await
            .map_err(ReplayError::Store)?;
        Ok(first == 1)
    }
}

/// Adds a member when the set has room, and renews the set's lifetime.
const REMEMBER: &str = r"
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[3]) then redis.call('SADD', KEYS[1], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1";
static REMEMBER_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(REMEMBER));

#[async_trait]
impl ApprovalMemory for RedisStore {
    async fn approved(&self, scope: &str, key: &str) -> Result<bool, StoreError> {
        let set = self.key("approved", scope);
        let member = digest_hex(key.as_bytes());
        let mut conn = self.conn();
        self.run(async move { conn.sismember(set, member).await }).await
    }

    async fn remember(&self, scope: &str, key: &str) -> Result<(), StoreError> {
        let set = self.key("approved", scope);
        let member = digest_hex(key.as_bytes());
        let (ttl, cap) = (self.approval_ttl_ms, self.approvals_per_scope);
        let mut conn = self.conn();
        let script = &*REMEMBER_SCRIPT;
        self.run(async move { script.key(set).arg(member).arg(ttl).arg(cap).invoke_async::<i64>(&mut conn).await })
            .await
            .map(drop)
    }

    async fn forget(&self, scope: &str) {
        let set = self.key("approved", scope);
        let mut conn = self.conn();
        if let Err(e) = self.run(async move { conn.del::<_, i64>(set).await }).await {
            tracing::warn!(error = %e, "a session's approvals could not be forgotten now; they expire by themselves");
        }
    }
}

// A session is a hash (`base`: the record as `initialize` made it; `ready`, `log_level` and
// `listed`: what changed since) and a set of its subscriptions, both with the session's idle
// lifetime. Each change is one script on one field, so replicas changing a session at once
// never undo each other, and a change to a session that is gone brings nothing back.

/// Creates a session unless the id is taken. KEYS: hash, set. ARGV: base, ttl.
const CREATE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('DEL', KEYS[2])
redis.call('HSET', KEYS[1], 'base', ARGV[1])
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1";
static CREATE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(CREATE));

/// Reads a session and renews its lifetime. KEYS: hash, set. ARGV: ttl.
const LOAD: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return false end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
local fields = redis.call('HMGET', KEYS[1], 'base', 'ready', 'log_level', 'listed')
return {fields[1] or '', fields[2] or '', fields[3] or '', fields[4] or '', redis.call('SMEMBERS', KEYS[2])}";
static LOAD_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(LOAD));

/// Applies one change and renews the lifetime: 1, or 0 when the session is gone, or -1 when its
/// subscriptions are full. KEYS: hash, set. ARGV: ttl, what (`touch`, `field`, `subscribe`,
/// `unsubscribe`), then the field and value, or the URI and the most subscriptions.
const CHANGE: &str = r"
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
local what = ARGV[2]
if what == 'field' then
  redis.call('HSET', KEYS[1], ARGV[3], ARGV[4])
elseif what == 'subscribe' then
  if redis.call('SISMEMBER', KEYS[2], ARGV[3]) == 0 then
    if redis.call('SCARD', KEYS[2]) >= tonumber(ARGV[4]) then return -1 end
    redis.call('SADD', KEYS[2], ARGV[3])
  end
elseif what == 'unsubscribe' then
  redis.call('SREM', KEYS[2], ARGV[3])
end
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('PEXPIRE', KEYS[2], ARGV[1])
return 1";
static CHANGE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(CHANGE));

impl RedisStore {
    fn session_keys(&self, id: &str) -> (String, String) {
        (self.key("session", id), self.key("subscriptions", id))
    }

    /// Runs [`CHANGE`] on session `id`.
    async fn change(&self, id: &str, args: &[&str]) -> Result<i64, StoreError> {
        let (hash, set) = self.session_keys(id);
        let mut invocation = CHANGE_SCRIPT.prepare_invoke();
        invocation.key(hash).key(set).arg(self.session_ttl_ms);
        for arg in args {
            invocation.arg(*arg);
        }
        let mut conn = self.conn();
        self.run(async move { invocation.invoke_async(&mut conn).await }).await
    }
}

/// A session as [`LOAD`] returns it: base, ready, log level, listed, subscriptions.
type Loaded = (String, String, String, String, Vec<String>);

fn assemble((base, ready, log_level, listed, subscriptions): Loaded) -> Result<SessionRecord, StoreError> {
    let mut record = SessionRecord::from_json(&base)?;
    record.ready |= ready == "1";
    if !log_level.is_empty() {
        record.log_level = Some(serde_json::from_str(&log_level).map_err(|_| StoreError::Corrupt("a log level"))?);
    }
    if !listed.is_empty() {
        record.listed = serde_json::from_str(&listed).map_err(|_| StoreError::Corrupt("a listing's generations"))?;
    }
    record.subscriptions.extend(subscriptions.into_iter().take(MAX_SUBSCRIPTIONS));
    Ok(record)
}

#[async_trait]
impl SessionStore for RedisStore {
    async fn create(&self, id: &str, record: &SessionRecord) -> Result<bool, StoreError> {
        let json = record.to_json()?;
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        let (hash, set) = self.session_keys(id);
        let ttl = self.session_ttl_ms;
        let mut conn = self.conn();
        let script = &*CREATE_SCRIPT;
        let created: i64 =
            self.run(async move { script.key(hash).key(set).arg(json).arg(ttl).invoke_async(&mut conn).await }).await?;
        if created == 1 && !record.subscriptions.is_empty() {
            for uri in &record.subscriptions {
                self.update(id, &SessionChange::Subscribe(uri.clone())).await?;
            }
        }
        Ok(created == 1)
    }

    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(None);
        }
        let (hash, set) = self.session_keys(id);
        let ttl = self.session_ttl_ms;
        let mut conn = self.conn();
        let script = &*LOAD_SCRIPT;
        let loaded: Option<Loaded> =
            self.run(async move { script.key(hash).key(set).arg(ttl).invoke_async(&mut conn).await }).await?;
        loaded.map(assemble).transpose()
    }

    async fn touch(&self, id: &str) -> Result<bool, StoreError> {
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        Ok(self.change(id, &["touch"]).await? == 1)
    }

    async fn update(&self, id: &str, change: &SessionChange) -> Result<bool, StoreError> {
        change.check()?;
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        let done = match change {
            SessionChange::Ready => self.change(id, &["field", "ready", "1"]).await?,
            SessionChange::LogLevel(level) => self.change(id, &["field", "log_level", &json(level)?]).await?,
            SessionChange::Listed(listed) => self.change(id, &["field", "listed", &json(listed)?]).await?,
            SessionChange::Subscribe(uri) => {
                let max = MAX_SUBSCRIPTIONS.to_string();
                self.change(id, &["subscribe", uri, &max]).await?
            }
            SessionChange::Unsubscribe(uri) => self.change(id, &["unsubscribe", uri]).await?,
            _ => return Err(StoreError::Corrupt("a change this store does not know")),
        };
        match done {
            -1 => Err(StoreError::Full { what: "subscriptions of one session", capacity: MAX_SUBSCRIPTIONS }),
            done => Ok(done == 1),
        }
    }

    async fn remove(&self, id: &str) -> Result<(), StoreError> {
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(());
        }
        let (hash, set) = self.session_keys(id);
        let mut conn = self.conn();
        self.run(async move { conn.del::<_, i64>(&[hash, set]).await }).await.map(drop)
    }
}

/// JSON of a change's value.
fn json<T: serde::Serialize>(value: &T) -> Result<String, StoreError> {
    serde_json::to_string(value).map_err(|_| StoreError::Corrupt("a session change"))
}
