//! The Redis adapter of the replay cache, the approval memory and the session store.

use std::fmt;
use std::future::Future;
use std::sync::LazyLock;
use std::time::Duration;

use async_trait::async_trait;
use mcp_gateway::{
    ApprovalMemory, MAX_SESSION_ID_CHARS, ReplayCache, ReplayError, SessionChange, SessionRecord, SessionStore,
    StoreError, digest_hex,
};
use redis::aio::{ConnectionManager, ConnectionManagerConfig};
use redis::{AsyncCommands as _, Script};

/// How to reach Redis and how long to wait for it.
#[derive(Debug, Clone, PartialEq, Eq)]
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
            Ok(Err(e)) => Err(StoreError::Unavailable(category(&e))),
            Err(_) => Err(StoreError::Timeout(self.timeout)),
        }
    }
}

/// What went wrong, for people, without the server's address or anything it said back.
pub(crate) fn category(e: &redis::RedisError) -> String {
    if e.is_connection_refusal() {
        "connection refused".to_owned()
    } else if e.is_connection_dropped() {
        "connection lost".to_owned()
    } else if e.is_io_error() {
        "connection failed".to_owned()
    } else {
        format!("{:?} error", e.kind()).to_lowercase()
    }
}

/// Marks an id used until its expiry, and says whether it was new.
static FIRST_USE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(FIRST_USE));
const FIRST_USE: &str = "return redis.call('SET', KEYS[1], '1', 'NX', 'PX', ARGV[1]) and 1 or 0";

/// Room for replicas' clocks disagreeing: a used id is kept this much beyond its expiry.
const CLOCK_SLACK_MS: u64 = 60_000;

#[async_trait]
impl ReplayCache for RedisStore {
    async fn first_use(&self, id: &str, expires_ms: u64, now_ms: u64) -> Result<bool, ReplayError> {
        let key = self.key("replay", id);
        let ttl = expires_ms.saturating_sub(now_ms).saturating_add(CLOCK_SLACK_MS);
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
static REMEMBER_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(REMEMBER));
const REMEMBER: &str = r"
if redis.call('SCARD', KEYS[1]) < tonumber(ARGV[3]) then redis.call('SADD', KEYS[1], ARGV[1]) end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1";

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

/// Creates a session unless the id is taken.
static CREATE_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(CREATE));
const CREATE: &str = "return redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) and 1 or 0";
/// Replaces a session's record if it is still the one read (a change made elsewhere in the
/// meantime is not undone: the caller reads again), renewing its lifetime.
static COMPARE_AND_SET_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(COMPARE_AND_SET));
const COMPARE_AND_SET: &str = r"
local current = redis.call('GET', KEYS[1])
if not current then return -1 end
if current ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
return 1";
/// Reads a session and renews its lifetime.
static LOAD_SCRIPT: LazyLock<Script> = LazyLock::new(|| Script::new(LOAD));
const LOAD: &str = r"
local current = redis.call('GET', KEYS[1])
if current then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return current";

/// How often a change is tried again when another replica changed the session meanwhile.
const CHANGE_ATTEMPTS: usize = 8;

impl RedisStore {
    async fn read_session(&self, key: &str) -> Result<Option<String>, StoreError> {
        let (key, ttl) = (key.to_owned(), self.session_ttl_ms);
        let mut conn = self.conn();
        let script = &*LOAD_SCRIPT;
        self.run(async move { script.key(key).arg(ttl).invoke_async::<Option<String>>(&mut conn).await }).await
    }
}

#[async_trait]
impl SessionStore for RedisStore {
    async fn create(&self, id: &str, record: &SessionRecord) -> Result<bool, StoreError> {
        let json = record.to_json()?;
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        let (key, ttl) = (self.key("session", id), self.session_ttl_ms);
        let mut conn = self.conn();
        let script = &*CREATE_SCRIPT;
        let created: i64 =
            self.run(async move { script.key(key).arg(json).arg(ttl).invoke_async(&mut conn).await }).await?;
        Ok(created == 1)
    }

    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(None);
        }
        match self.read_session(&self.key("session", id)).await? {
            Some(json) => SessionRecord::from_json(&json).map(Some),
            None => Ok(None),
        }
    }

    async fn touch(&self, id: &str) -> Result<bool, StoreError> {
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        let (key, ttl) = (self.key("session", id), self.session_ttl_ms);
        let mut conn = self.conn();
        self.run(async move { conn.pexpire(key, i64::try_from(ttl).unwrap_or(i64::MAX)).await }).await
    }

    async fn update(&self, id: &str, change: &SessionChange) -> Result<bool, StoreError> {
        change.check()?;
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        let key = self.key("session", id);
        for _ in 0..CHANGE_ATTEMPTS {
            let Some(before) = self.read_session(&key).await? else { return Ok(false) };
            let mut record = SessionRecord::from_json(&before)?;
            record.apply(change)?;
            let after = record.to_json()?;
            let (key, ttl) = (key.clone(), self.session_ttl_ms);
            let mut conn = self.conn();
            let script = &*COMPARE_AND_SET_SCRIPT;
            let set: i64 = self
                .run(async move { script.key(key).arg(before).arg(after).arg(ttl).invoke_async(&mut conn).await })
                .await?;
            match set {
                1 => return Ok(true),
                -1 => return Ok(false),
                _ => {}
            }
        }
        Err(StoreError::Unavailable("the session kept changing on other replicas; try again".to_owned()))
    }

    async fn remove(&self, id: &str) -> Result<(), StoreError> {
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(());
        }
        let key = self.key("session", id);
        let mut conn = self.conn();
        self.run(async move { conn.del::<_, i64>(key).await }).await.map(drop)
    }
}
