//! MCP transports and the client connection.
//!
//! The [`Transport`] port carries encoded messages; [`stdio::StdioTransport`] runs a server as
//! a child process and [`memory::memory_pair`] gives tests an in-process peer. [`Client`]
//! drives the pure `mcp_protocol::ClientSession` over any transport: many requests in flight,
//! timeouts that cancel, progress, server requests through the [`ServerRequestHandler`] port.
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

pub mod client;
pub mod handler;
pub mod memory;
pub mod stdio;
pub mod transport;

pub use client::{Client, ClientError, ClientOptions, ListLimits, Progress, RequestOptions};
pub use handler::{DecliningHandler, ServerRequestHandler};
pub use memory::{MemoryPeer, MemoryTransport, memory_pair};
pub use stdio::{StdioConfig, StdioTransport, env_allowed};
pub use transport::{Transport, TransportError, TransportSink, TransportStream};
