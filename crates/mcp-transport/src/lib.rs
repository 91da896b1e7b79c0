//! MCP transports and the client connection.
//!
//! The [`Transport`] port carries encoded messages; [`stdio::StdioTransport`] runs a server as
//! a child process, [`http::HttpTransport`] reaches a remote one over Streamable HTTP (or the
//! 2024-11-05 HTTP+SSE transport), [`ws::WebSocketTransport`] over WebSocket, and
//! [`memory::memory_pair`] gives tests an in-process peer. [`Client`] drives the pure
//! `mcp_protocol::ClientSession` over any transport: many requests in flight, timeouts that
//! cancel, progress, server requests through the [`ServerRequestHandler`] port, and either era
//! of the protocol ([`Era`]: the `initialize` handshake, 2026-07-28's `server/discover`, or a
//! probe that picks).
//!
//! Over stdio, a server is a child process; with [`StdioSandbox`] it runs confined (Landlock,
//! namespaces, limits; see the `mcp-sandbox` crate), started through the sandbox launcher:
//!
//! ```no_run
//! use mcp_transport::{Client, ClientOptions, ListLimits, RequestOptions, StdioConfig, StdioTransport};
//!
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! let transport = StdioTransport::spawn(StdioConfig::new("mcp-fixture-server", ["echo"]))?;
//! let client = Client::connect(transport, ClientOptions::default()).await?;
//! let tools = client.list_all_tools(ListLimits::default()).await?;
//! println!("{} tools", tools.len());
//! let args = serde_json::json!({"text": "hi"}).as_object().cloned();
//! let result = client.call_tool("echo", args, RequestOptions::default()).await?;
//! assert_eq!(result.joined_text(), "hi");
//! client.close().await?;
//! # Ok(()) }
//! ```
//!
//! The same client over the in-memory transport, with this example playing the server:
//!
//! ```
//! use mcp_transport::{Client, ClientOptions, RequestOptions, memory_pair};
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

pub mod auth;
pub mod backoff;
pub mod client;
pub mod handler;
pub mod http;
pub mod memory;
pub mod servers;
mod sse;
pub mod stdio;
pub mod transport;
pub mod ws;

pub use auth::{AuthChallenge, AuthError, Authorizer};
pub use backoff::Backoff;
pub use client::{Client, ClientError, ClientOptions, Era, ListLimits, Progress, RequestOptions};
pub use handler::{DecliningHandler, ServerRequestHandler};
pub use http::{HttpConfig, HttpMode, HttpTransport};
pub use memory::{MemoryPeer, MemoryTransport, memory_pair};
pub use servers::{
    ConnectOptions, RemoteOptions, ServerConnection, ServerSpec, ServerState, ServerTarget, close_all, connect,
    connect_all,
};
pub use stdio::{StdioConfig, StdioSandbox, StdioTransport, env_allowed};
pub use transport::{Transport, TransportError, TransportSink, TransportStream};
pub use ws::{WebSocketConfig, WebSocketTransport};
