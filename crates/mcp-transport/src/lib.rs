//! MCP transport adapters for the ports of `mcp-client`, each behind a cargo feature:
//! [`StdioTransport`] runs a server as a child process (`stdio`), [`HttpTransport`] reaches a
//! remote one over Streamable HTTP or the 2024-11-05 HTTP+SSE transport (`http`), and
//! [`WebSocketTransport`] over WebSocket (`ws`). All three are on by default.
//!
//! Each configuration is also a `mcp_client::Connector`, so the multi-server layer opens (and
//! reopens) them; `RemoteServer` (features `http` and `ws`) picks HTTP or WebSocket by the
//! URL's scheme.
//!
//! Over stdio, a server is a child process; with [`StdioSandbox`] it runs confined (Landlock,
//! namespaces, limits; see the `mcp-sandbox` crate), started through the sandbox launcher:
//!
//! ```no_run
//! use mcp_client::{Client, ClientOptions, ListLimits, RequestOptions};
//! use mcp_transport::{StdioConfig, StdioTransport};
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

#[cfg(feature = "http")]
mod http;
#[cfg(feature = "stdio")]
mod private_temp;
#[cfg(all(feature = "http", feature = "ws"))]
mod remote;
#[cfg(feature = "http")]
mod sse;
#[cfg(feature = "stdio")]
mod stdio;
#[cfg(feature = "ws")]
mod ws;

/// Default limit on one incoming message (a line, a JSON body, an SSE event, a WebSocket
/// message), for every transport.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;

#[cfg(feature = "http")]
pub use http::{HttpConfig, HttpMode, HttpTransport, MIN_STREAM_RETRY, STREAM_RECONNECT, shared_client};
#[cfg(all(feature = "http", feature = "ws"))]
pub use remote::{RemoteOptions, RemoteServer};
#[cfg(feature = "stdio")]
pub use stdio::{
    DEFAULT_STDERR_BUFFER_BYTES, StderrTail, StdioConfig, StdioSandbox, StdioTransport, env_allowed,
    shares_one_cpu_with,
};
#[cfg(feature = "ws")]
pub use ws::{SUBPROTOCOL, WebSocketConfig, WebSocketTransport};
