//! Integration tests of `mcp-protocol`: JSON-RPC framing, schema conformance of everything the crate
//! encodes, the official examples, version negotiation, the sans-I/O session, and property tests.
//!
//! The specification data (schemas and examples) lives outside the repository; see
//! [`support::shared_dir`] for how it is found (`MCP_SHARED_DIR`).
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod content;
mod examples;
mod jsonrpc;
mod proptests;
mod schema;
mod session;
mod support;
mod version;
