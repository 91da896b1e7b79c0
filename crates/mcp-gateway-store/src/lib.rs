//! The gateway replicas' shared state: `mcp-gateway`'s ports kept in Redis, and the sealing
//! key file every replica reads.
//!
//! `mcp-gateway` defines what a gateway keeps beyond one request as **ports**, each with an
//! in-process implementation: the [`mcp_gateway::ReplayCache`] (sealed approval states used),
//! the [`mcp_gateway::ApprovalMemory`] ("yes for this client"), the
//! [`mcp_gateway::SessionStore`] (sessions of the session revisions) and the
//! [`mcp_gateway::RateLimiter`]. This crate is their Redis adapter ([`RedisStore`],
//! [`RedisLimiter`]), through the maintained `redis` client (tokio, a reconnecting connection
//! manager), so the gateway itself never depends on a Redis client.
//!
//! - Every command has a time limit. When Redis cannot answer, what needs it fails with a
//!   [`mcp_gateway::StoreError`] the client reads; nothing falls back to local state (which
//!   would let a limit, an approval or a replayed state through). The connection comes back by
//!   itself when Redis does.
//! - Each check-and-change is one script (a state's first use, one change to a session, a
//!   call's buckets and slots), so replicas acting at once never both win.
//! - Keys are digests under a namespace: a session id, a caller or a scope never appears in
//!   one. One Redis (or a primary with replicas), not Redis Cluster.
//!
//! [`SharedState::open`] assembles it all from `[serve.replicas]` ([`ReplicaConfig`]): the key
//! file is required (start is refused without one), the store optional.
//!
//! ```no_run
//! use std::sync::Arc;
//! use mcp_gateway::{GatewayOptions, Limits, SystemClock};
//! use mcp_gateway_store::{ReplicaConfig, SharedState};
//!
//! # async fn start() -> Result<(), Box<dyn std::error::Error>> {
//! let replicas = ReplicaConfig {
//!     key_file: Some("/etc/mcp-harness/gateway.key".into()),
//!     store: Some("redis://127.0.0.1:6379".into()),
//!     ..ReplicaConfig::default()
//! };
//! let shared = SharedState::open(Some(&replicas), Limits::default(), Arc::new(SystemClock)).await?;
//! let mut options = GatewayOptions::default();
//! shared.apply(&mut options);
//! # Ok(()) }
//! ```

mod key_file;
mod limiter;
mod redis_store;
mod shared;

pub use key_file::{KeyFileError, load_sealer};
pub use limiter::RedisLimiter;
pub use redis_store::{ConnectError, RedisOptions, RedisStore};
pub use shared::{ReplicaConfig, SharedState, StartError};
