//! State that outlives one request and may be shared by replicas: the errors every such port
//! answers with ([`StoreError`]), and the [`SessionStore`] **port** that keeps what a session
//! of a session revision (2025-03-26 .. 2025-11-25) needs to go on on another replica, or
//! after its replica restarted.
//!
//! One process keeps sessions in memory ([`MemorySessions`]); replicas keep them in a shared
//! store (the `mcp-gateway-store` crate's Redis adapter). What is kept is what the client told
//! the gateway and the gateway must not forget: the negotiated revision, the declared
//! capabilities and `clientInfo`, whether `notifications/initialized` came, the log level, the
//! generations of the tools it listed and its resource subscriptions. What cannot cross a
//! process (a notification stream, requests in flight, questions the gateway asked the client)
//! stays in the replica that has it. "Yes for this client" lives in the
//! [`crate::ApprovalMemory`] under the session's scope, with the same store behind it.
//!
//! Every store is bounded: a record's size, its subscriptions, the number of sessions (memory),
//! and each session's idle lifetime.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use mcp_protocol::{ClientCapabilities, ClientContext, Implementation, LoggingLevel, ProtocolVersion};
use serde::{Deserialize, Serialize};

use crate::backend::Caller;
use crate::clock::Clock;
use crate::session::lock;

/// Largest session record kept, as JSON (what a client declares is outside data).
pub const MAX_SESSION_RECORD_BYTES: usize = 64 * 1024;
/// Most resource subscriptions per session.
pub const MAX_SUBSCRIPTIONS: usize = 1024;
/// Longest subscribed URI, in bytes.
pub const MAX_URI_BYTES: usize = 4096;
/// Longest session id looked up; a longer one is nobody's session.
pub const MAX_SESSION_ID_CHARS: usize = 128;

/// Why an operation on shared state failed. The text is what a client reads: it says what
/// failed and what to do, and never carries the store's address or credentials.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// The store could not be reached, or refused the command.
    #[error(
        "the gateway's shared state store is unavailable ({0}); what needs it is refused until it is back, try again shortly"
    )]
    Unavailable(String),
    /// The store did not answer in time.
    #[error("the gateway's shared state store did not answer within {} ms; try again shortly", .0.as_millis())]
    Timeout(Duration),
    /// An in-process store is at its bound, and forgetting something early could let a limit or
    /// an approval be bypassed.
    #[error("too many {what} are kept at once (at most {capacity}); try again shortly")]
    Full {
        /// What is kept.
        what: &'static str,
        /// The bound.
        capacity: usize,
    },
    /// A value too large to keep.
    #[error("{what} is too large to keep ({size} bytes, at most {limit})")]
    TooLarge {
        /// What it is.
        what: &'static str,
        /// Its size in bytes.
        size: usize,
        /// The bound.
        limit: usize,
    },
    /// A stored value did not decode (written by another version of the gateway, or by hand).
    #[error("the gateway's shared state store holds {0} this gateway cannot read (another version wrote it?)")]
    Corrupt(&'static str),
}

/// What a session keeps beyond its replica.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    /// Who opened it ([`Caller::key`]): a session is only ever continued for the same caller.
    pub caller: String,
    /// The negotiated revision.
    pub protocol_version: String,
    /// `clientInfo` (self-reported).
    #[serde(default)]
    pub client_info: Option<Implementation>,
    /// The declared capabilities.
    #[serde(default)]
    pub capabilities: ClientCapabilities,
    /// `notifications/initialized` came.
    #[serde(default)]
    pub ready: bool,
    /// The log level the client set.
    #[serde(default)]
    pub log_level: Option<LoggingLevel>,
    /// The generation of each upstream's tools in the listing the client last got (server to
    /// an opaque generation; replicas must give one listing the same generations).
    #[serde(default)]
    pub listed: BTreeMap<String, String>,
    /// Subscribed resource URIs.
    #[serde(default)]
    pub subscriptions: BTreeSet<String>,
}

impl SessionRecord {
    /// The record of a session `caller` just opened with `client` (as `initialize` made it).
    pub fn new(caller: &Caller, client: &ClientContext) -> Self {
        Self {
            caller: caller.key(),
            protocol_version: client.protocol_version.map(ProtocolVersion::as_str).unwrap_or_default().to_owned(),
            client_info: client.client_info.clone(),
            capabilities: client.capabilities.clone(),
            ready: false,
            log_level: client.log_level,
            listed: BTreeMap::new(),
            subscriptions: BTreeSet::new(),
        }
    }

    /// The client as the protocol side restores it (`mcp_protocol::ServerSession::restore`
    /// with [`SessionRecord::ready`]); `None` when the revision is not one this build knows.
    pub fn client_context(&self) -> Option<ClientContext> {
        let version = ProtocolVersion::parse(&self.protocol_version)?;
        Some(ClientContext {
            protocol_version: Some(version),
            client_info: self.client_info.clone(),
            capabilities: self.capabilities.clone(),
            log_level: self.log_level,
        })
    }

    /// The record as JSON, refused when larger than [`MAX_SESSION_RECORD_BYTES`].
    pub fn to_json(&self) -> Result<String, StoreError> {
        let json = serde_json::to_string(self).map_err(|_| StoreError::Corrupt("a session record"))?;
        if json.len() > MAX_SESSION_RECORD_BYTES {
            return Err(StoreError::TooLarge { what: "a session", size: json.len(), limit: MAX_SESSION_RECORD_BYTES });
        }
        Ok(json)
    }

    /// Reads a record written by [`SessionRecord::to_json`].
    pub fn from_json(json: &str) -> Result<Self, StoreError> {
        if json.len() > MAX_SESSION_RECORD_BYTES {
            return Err(StoreError::Corrupt("an oversized session record"));
        }
        serde_json::from_str(json).map_err(|_| StoreError::Corrupt("a session record"))
    }

    /// Applies `change` (checked first: [`SessionChange::check`]).
    pub fn apply(&mut self, change: &SessionChange) -> Result<(), StoreError> {
        change.check()?;
        match change {
            SessionChange::Ready => self.ready = true,
            SessionChange::LogLevel(level) => self.log_level = Some(*level),
            SessionChange::Listed(listed) => self.listed.clone_from(listed),
            SessionChange::Subscribe(uri) => {
                if !self.subscriptions.contains(uri) && self.subscriptions.len() >= MAX_SUBSCRIPTIONS {
                    return Err(StoreError::Full { what: "subscriptions of one session", capacity: MAX_SUBSCRIPTIONS });
                }
                self.subscriptions.insert(uri.clone());
            }
            SessionChange::Unsubscribe(uri) => {
                self.subscriptions.remove(uri);
            }
        }
        Ok(())
    }
}

/// One change to a kept session. Changes, not whole records, so two replicas serving the same
/// session at once (a client's requests spread by the load balancer) never undo each other.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum SessionChange {
    /// `notifications/initialized` came.
    Ready,
    /// `logging/setLevel`.
    LogLevel(LoggingLevel),
    /// A listing was served: its generations.
    Listed(BTreeMap<String, String>),
    /// `resources/subscribe`.
    Subscribe(String),
    /// `resources/unsubscribe`.
    Unsubscribe(String),
}

impl SessionChange {
    /// Refuses a change larger than a session may keep.
    pub fn check(&self) -> Result<(), StoreError> {
        match self {
            SessionChange::Subscribe(uri) | SessionChange::Unsubscribe(uri) if uri.len() > MAX_URI_BYTES => {
                Err(StoreError::TooLarge { what: "a subscribed URI", size: uri.len(), limit: MAX_URI_BYTES })
            }
            SessionChange::Listed(listed) => {
                let size: usize = listed.iter().map(|(k, v)| k.len() + v.len() + 6).sum();
                if size > MAX_SESSION_RECORD_BYTES / 2 {
                    return Err(StoreError::TooLarge {
                        what: "a listing's generations",
                        size,
                        limit: MAX_SESSION_RECORD_BYTES / 2,
                    });
                }
                Ok(())
            }
            _ => Ok(()),
        }
    }
}

/// Keeps sessions so that any replica can continue one. A **port**: one process keeps them in
/// memory ([`MemorySessions`]), replicas in a shared store.
///
/// A session lives for an idle lifetime from its last use: [`SessionStore::load`] and
/// [`SessionStore::touch`] renew it. An id longer than [`MAX_SESSION_ID_CHARS`] is nobody's
/// session. Every method fails with a [`StoreError`] when the store cannot answer: the
/// gateway then refuses the request (never serves it from what it happens to remember).
#[async_trait]
pub trait SessionStore: fmt::Debug + Send + Sync {
    /// Keeps a new session under `id`: `Ok(false)`, and nothing written, if `id` is taken.
    async fn create(&self, id: &str, record: &SessionRecord) -> Result<bool, StoreError>;
    /// The session under `id`, its lifetime renewed; `None` when unknown or expired.
    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Renews its lifetime; `false` when it is gone.
    async fn touch(&self, id: &str) -> Result<bool, StoreError>;
    /// Applies `change` and renews its lifetime; `false`, and nothing written, when it is gone
    /// (an expired session is never brought back by a change).
    async fn update(&self, id: &str, change: &SessionChange) -> Result<bool, StoreError>;
    /// Ends it (`DELETE /mcp`); unknown ids are fine.
    async fn remove(&self, id: &str) -> Result<(), StoreError>;
}

/// The in-memory [`SessionStore`]: bounded in number, each session for an idle lifetime.
#[derive(Debug)]
pub struct MemorySessions {
    ttl_ms: u64,
    capacity: usize,
    clock: Arc<dyn Clock>,
    sessions: Mutex<HashMap<String, (SessionRecord, u64)>>,
}

impl MemorySessions {
    /// At most `capacity` sessions, each kept `ttl` after its last use, by `clock`.
    pub fn new(capacity: usize, ttl: Duration, clock: Arc<dyn Clock>) -> Self {
        let ttl_ms = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        Self { ttl_ms, capacity, clock, sessions: Mutex::new(HashMap::new()) }
    }

    fn expiry(&self) -> (u64, u64) {
        let now = self.clock.unix_ms();
        (now, now.saturating_add(self.ttl_ms))
    }
}

#[async_trait]
impl SessionStore for MemorySessions {
    async fn create(&self, id: &str, record: &SessionRecord) -> Result<bool, StoreError> {
        record.to_json()?;
        if id.len() > MAX_SESSION_ID_CHARS {
            return Ok(false);
        }
        let (now, expires) = self.expiry();
        let mut sessions = lock(&self.sessions);
        if sessions.get(id).is_some_and(|(_, until)| *until > now) {
            return Ok(false);
        }
        if sessions.len() >= self.capacity {
            sessions.retain(|_, (_, until)| *until > now);
            if sessions.len() >= self.capacity {
                return Err(StoreError::Full { what: "sessions", capacity: self.capacity });
            }
        }
        sessions.insert(id.to_owned(), (record.clone(), expires));
        Ok(true)
    }

    async fn load(&self, id: &str) -> Result<Option<SessionRecord>, StoreError> {
        let (now, expires) = self.expiry();
        let mut sessions = lock(&self.sessions);
        match sessions.get_mut(id) {
            Some((record, until)) if *until > now => {
                *until = expires;
                Ok(Some(record.clone()))
            }
            Some(_) => {
                sessions.remove(id);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn touch(&self, id: &str) -> Result<bool, StoreError> {
        let (now, expires) = self.expiry();
        let mut sessions = lock(&self.sessions);
        match sessions.get_mut(id) {
            Some((_, until)) if *until > now => {
                *until = expires;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn update(&self, id: &str, change: &SessionChange) -> Result<bool, StoreError> {
        let (now, expires) = self.expiry();
        let mut sessions = lock(&self.sessions);
        match sessions.get_mut(id) {
            Some((record, until)) if *until > now => {
                let mut changed = record.clone();
                changed.apply(change)?;
                changed.to_json()?;
                *record = changed;
                *until = expires;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn remove(&self, id: &str) -> Result<(), StoreError> {
        lock(&self.sessions).remove(id);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock as Manual;

    fn record() -> SessionRecord {
        let client = ClientContext {
            protocol_version: Some(ProtocolVersion::V2025_06_18),
            client_info: Some(Implementation::new("probe", "1")),
            ..ClientContext::default()
        };
        SessionRecord::new(&Caller::principal("alice"), &client)
    }

    #[tokio::test]
    async fn a_session_lives_while_used_and_changes_apply_to_live_ones_only() {
        let clock = Arc::new(Manual::default());
        let store = MemorySessions::new(2, Duration::from_millis(100), Arc::clone(&clock) as Arc<dyn Clock>);
        assert_eq!(store.create("a", &record()).await, Ok(true));
        assert_eq!(store.create("a", &record()).await, Ok(false), "never overwritten");
        clock.set(90);
        assert_eq!(store.update("a", &SessionChange::LogLevel(LoggingLevel::Info)).await, Ok(true));
        clock.set(180);
        let loaded = store.load("a").await.unwrap().unwrap();
        assert_eq!(loaded.log_level, Some(LoggingLevel::Info));
        assert_eq!(loaded.caller, "p:alice");
        assert_eq!(loaded.client_context().unwrap().protocol_version, Some(ProtocolVersion::V2025_06_18));
        clock.set(281);
        assert_eq!(store.update("a", &SessionChange::Ready).await, Ok(false), "expired: not brought back");
        assert_eq!(store.load("a").await, Ok(None));

        assert_eq!(store.create("b", &record()).await, Ok(true));
        assert_eq!(store.create("c", &record()).await, Ok(true));
        assert_eq!(store.create("d", &record()).await, Err(StoreError::Full { what: "sessions", capacity: 2 }));
        store.remove("b").await.unwrap();
        assert_eq!(store.create("d", &record()).await, Ok(true));
        assert_eq!(store.create(&"x".repeat(MAX_SESSION_ID_CHARS + 1), &record()).await, Ok(false));
    }

    #[test]
    fn records_and_changes_are_bounded() {
        let mut record = record();
        let long = "u".repeat(MAX_URI_BYTES + 1);
        assert!(matches!(record.apply(&SessionChange::Subscribe(long)), Err(StoreError::TooLarge { .. })));
        for i in 0..MAX_SUBSCRIPTIONS {
            record.apply(&SessionChange::Subscribe(format!("file:///{i}"))).unwrap();
        }
        assert!(matches!(record.apply(&SessionChange::Subscribe("file:///more".into())), Err(StoreError::Full { .. })));
        record.apply(&SessionChange::Subscribe("file:///0".into())).unwrap();
        record.apply(&SessionChange::Unsubscribe("file:///0".into())).unwrap();
        assert_eq!(record.subscriptions.len(), MAX_SUBSCRIPTIONS - 1);
        let json = record.to_json().unwrap();
        assert_eq!(SessionRecord::from_json(&json).unwrap(), record);
        assert_eq!(SessionRecord::from_json("{"), Err(StoreError::Corrupt("a session record")));
        let mut big = self::record();
        big.capabilities.experimental = Some(serde_json::Map::from_iter([(
            "x".to_owned(),
            serde_json::json!("y".repeat(MAX_SESSION_RECORD_BYTES)),
        )]));
        assert!(matches!(big.to_json(), Err(StoreError::TooLarge { .. })));
    }
}
