//! The MCP client: one connection over any transport, and many servers at once.
//!
//! [`Client`] drives the pure `mcp_protocol::ClientSession` over a [`Transport`]: many
//! requests in flight, timeouts that cancel, progress, server requests through the
//! [`ServerRequestHandler`] port, and either era of the protocol ([`Era`]: the `initialize`
//! handshake, 2026-07-28's `server/discover`, or a probe that picks). [`connect_all`] starts
//! every configured server concurrently, each reached through its [`Connector`], and
//! [`ServerSet`] keeps their tool listings current as they announce changes.
//!
//! This crate defines the ports and knows no concrete transport: the stdio, HTTP and WebSocket
//! adapters are in `mcp-transport`, and a transport of your own (a Unix socket, an in-process
//! server) only implements [`Transport`] and [`Connector`]. [`memory_pair`] is an in-memory
//! transport whose other end a test drives. The [`Authorizer`] port is how an HTTP transport
//! gets credentials (`mcp-auth` provides OAuth).
//!
//! The client over the in-memory transport, with this example playing the server:
//!
//! ```
//! use mcp_client::{Client, ClientOptions, RequestOptions, memory_pair};
//! use serde_json::{Value, json};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let (transport, mut server) = memory_pair();
//! tokio::spawn(async move {
//!     while let Some(line) = server.incoming.recv().await {
//!         let request: Value = serde_json::from_str(&line).unwrap();
//!         let result = match request["method"].as_str() {
//!             Some("initialize") => json!({"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
//!                                          "serverInfo": {"name": "example", "version": "1"}}),
//!             Some("tools/call") => json!({"content": [{"type": "text", "text": "pong"}]}),
//!             _ => continue, // notifications
//!         };
//!         let reply = json!({"jsonrpc": "2.0", "id": request["id"], "result": result});
//!         server.outgoing.send(reply.to_string()).unwrap();
//!     }
//! });
//! let client = Client::connect(transport, ClientOptions::default()).await?;
//! assert_eq!(client.protocol_version().unwrap().as_str(), "2025-06-18");
//! let result = client.call_tool("ping-tool", None, RequestOptions::default()).await?;
//! assert_eq!(result.joined_text(), "pong");
//! client.close().await?;
//! # Ok(()) }
//! ```

mod auth;
mod client;
mod deadlines;
pub mod elicitation;
mod handler;
mod memory;
mod observe;
mod servers;
mod set;
mod transport;

pub use auth::{AuthChallenge, AuthError, Authorizer, MAX_AUTH_RETRIES};
pub use client::{
    Client, ClientError, ClientOptions, DEFAULT_MAX_BACKLOG_BYTES, DEFAULT_MAX_RESOURCE_BYTES,
    DEFAULT_NOTIFICATION_CAPACITY, DISCOVER_PROBE_TIMEOUT, Era, ListLimits, MAX_INPUT_ROUNDS, MAX_LOG_DATA_CHARS,
    MAX_URL_ELICITATIONS, PROGRESS_BACKLOG, Progress, RequestOptions,
};
pub use deadlines::TIMEOUT_GRANULARITY;
pub use handler::{DecliningHandler, ServerRequestHandler, ServerRequests, USER_REJECTED, schema_defaults};
pub use memory::{MemoryPeer, MemoryTransport, memory_pair};
pub use observe::{RequestObserver, RequestStart, RequestWatch, SessionGuard};
pub use servers::{
    ConnectOptions, Connector, DEFAULT_MAX_TOOL_TIME, DEFAULT_STARTUP_TIMEOUT, DEFAULT_TOOL_TIMEOUT, Opened,
    ServerConnection, ServerSpec, ServerState, StderrSource, close_all, close_all_while, connect, connect_all,
};
pub use set::{ResourceCatalog, RestartPolicy, ServerEvent, ServerListing, ServerSet, SetCallError, SetOptions};
pub use transport::{
    DirectWrite, Exchange, Inbound, ProcessExit, RestoreGate, SessionLoss, Transport, TransportError, TransportSink,
    TransportStream,
};
