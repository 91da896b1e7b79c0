//! `[serve.replicas]`: what a replica shares with the others, assembled at start.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcp_gateway::{
    ApprovalMemory, Clock, GatewayOptions, Limits, MemoryApprovals, MemoryLimiter, MemoryReplayCache, MemorySessions,
    RateLimiter, ReplayCache, SessionStore, StateSealer, StoreError,
};
use serde::{Deserialize, Serialize};

use crate::{ConnectError, KeyFileError, RedisLimiter, RedisOptions, RedisStore, load_sealer};

/// `[serve.replicas]` as configured, read strictly. Its presence says the gateway runs as one
/// of several replicas behind a load balancer. Its `Debug` never shows the store's URL (it may
/// hold a password).
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ReplicaConfig {
    /// The sealing key file every replica reads (required: a replica never seals with a key of
    /// its own, which the others could not open).
    #[serde(default)]
    pub key_file: Option<PathBuf>,
    /// The shared store, `redis://host:port[/db]`. Without one, each replica keeps its own
    /// sessions (the load balancer must keep a session on one replica), approvals and counts.
    #[serde(default)]
    pub store: Option<String>,
    /// Prefix of the store's keys (default `mcp-harness`).
    #[serde(default)]
    pub namespace: Option<String>,
    /// Longest wait for one store command, in milliseconds (default 500).
    #[serde(default)]
    pub store_timeout_ms: Option<u64>,
    /// A session's idle lifetime, in seconds (default 3600).
    #[serde(default)]
    pub session_idle_secs: Option<u64>,
    /// How long "yes for this client" is remembered, in seconds (default 86400).
    #[serde(default)]
    pub approval_memory_secs: Option<u64>,
    /// Longest a call holds a concurrency slot, in seconds (default 900).
    #[serde(default)]
    pub slot_lease_secs: Option<u64>,
}

impl fmt::Debug for ReplicaConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ReplicaConfig")
            .field("key_file", &self.key_file)
            .field("store", &self.store.as_ref().map(|_| "<redacted>"))
            .field("namespace", &self.namespace)
            .field("store_timeout_ms", &self.store_timeout_ms)
            .field("session_idle_secs", &self.session_idle_secs)
            .field("approval_memory_secs", &self.approval_memory_secs)
            .field("slot_lease_secs", &self.slot_lease_secs)
            .finish()
    }
}

/// Why the shared state could not be set up: the gateway does not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StartError {
    /// Replicas are configured without a key file.
    #[error(
        "[serve.replicas] needs `key_file`: every replica must seal approval states with the same key (make one with `umask 077; head -c 32 /dev/urandom | od -An -tx1 | tr -d ' \\n' > gateway.key`)"
    )]
    NoKeyFile,
    /// The key file was refused.
    #[error(transparent)]
    KeyFile(#[from] KeyFileError),
    /// The store could not be used.
    #[error("[serve.replicas] store: {0}")]
    Store(#[from] ConnectError),
}

/// Bounds of the in-process implementations (no shared store).
const LOCAL_SESSIONS: usize = 10_000;
const LOCAL_COUNTS: usize = 100_000;

/// What a gateway keeps beyond one request, in the process or shared by replicas: give it to
/// the gateway with [`SharedState::apply`], and the session store to the front that keeps
/// sessions.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct SharedState {
    /// The key from the key file; `None`: the gateway makes one of its own (one replica only).
    pub sealer: Option<Arc<StateSealer>>,
    /// Which sealed approval states were used.
    pub replay: Arc<dyn ReplayCache>,
    /// "Yes for this client".
    pub approvals: Arc<dyn ApprovalMemory>,
    /// Sessions of the session revisions.
    pub sessions: Arc<dyn SessionStore>,
    /// The rate limits.
    pub limiter: Arc<dyn RateLimiter>,
    /// The store, when there is one (`/readyz` may [`RedisStore::ping`] it).
    pub store: Option<RedisStore>,
}

impl SharedState {
    /// The state of one gateway on its own (no `[serve.replicas]`), everything in memory.
    pub fn local(limits: Limits, clock: Arc<dyn Clock>) -> Self {
        Self {
            sealer: None,
            replay: Arc::new(MemoryReplayCache::default()),
            approvals: Arc::new(MemoryApprovals::default()),
            sessions: Arc::new(MemorySessions::new(LOCAL_SESSIONS, Duration::from_secs(3600), Arc::clone(&clock))),
            limiter: Arc::new(MemoryLimiter::new(limits, LOCAL_COUNTS, clock)),
            store: None,
        }
    }

    /// The state for `replicas` (or [`SharedState::local`] without them): the key file read
    /// (refused when missing), and with a store, every port in Redis, which must answer now.
    pub async fn open(
        replicas: Option<&ReplicaConfig>,
        limits: Limits,
        clock: Arc<dyn Clock>,
    ) -> Result<Self, StartError> {
        let Some(config) = replicas else { return Ok(Self::local(limits, clock)) };
        let key_file = config.key_file.as_deref().ok_or(StartError::NoKeyFile)?;
        let sealer = Some(Arc::new(load_sealer(key_file)?));
        let Some(url) = &config.store else {
            tracing::warn!(
                "[serve.replicas] without a store: each replica keeps its own sessions, approvals and rate limit counts; \
                 the load balancer must keep a session on one replica, and a limit holds per replica"
            );
            return Ok(Self { sealer, ..Self::local(limits, clock) });
        };
        let mut options = RedisOptions::new(url.clone());
        if let Some(namespace) = &config.namespace {
            options.namespace.clone_from(namespace);
        }
        if let Some(ms) = config.store_timeout_ms {
            options.command_timeout = Duration::from_millis(ms.max(1));
        }
        if let Some(s) = config.session_idle_secs {
            options.session_ttl = Duration::from_secs(s.max(1));
        }
        if let Some(s) = config.approval_memory_secs {
            options.approval_ttl = Duration::from_secs(s.max(1));
        }
        let lease = Duration::from_secs(config.slot_lease_secs.unwrap_or(900).max(1));
        let store = RedisStore::connect(&options).await?;
        Ok(Self::with_store(store, sealer, limits, lease))
    }

    /// Every port in `store`.
    pub fn with_store(store: RedisStore, sealer: Option<Arc<StateSealer>>, limits: Limits, lease: Duration) -> Self {
        Self {
            sealer,
            replay: Arc::new(store.clone()),
            approvals: Arc::new(store.clone()),
            sessions: Arc::new(store.clone()),
            limiter: Arc::new(RedisLimiter::new(store.clone(), limits, lease)),
            store: Some(store),
        }
    }

    /// Gives the gateway's options the sealer, the replay cache, the approval memory and the
    /// limiter.
    pub fn apply(&self, options: &mut GatewayOptions) {
        options.sealer.clone_from(&self.sealer);
        options.replay = Arc::clone(&self.replay);
        options.approvals = Arc::clone(&self.approvals);
        options.limiter = Some(Arc::clone(&self.limiter));
    }

    /// Whether the shared store answers (always, without one).
    pub async fn ready(&self) -> Result<(), StoreError> {
        match &self.store {
            Some(store) => store.ping().await,
            None => Ok(()),
        }
    }
}
