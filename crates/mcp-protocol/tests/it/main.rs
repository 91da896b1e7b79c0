//! Integration tests of `mcp-protocol`: JSON-RPC framing, schema conformance of everything the crate
//! encodes, the official examples, version negotiation, the sans-I/O session, and property tests.
//!
//! The specification data (the official schemas and examples) is test data of this crate, in
//! `tests/spec` (its NOTICE names the source, commit and licence).
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod content;
mod examples;
mod jsonrpc;
mod proptests;
mod schema;
mod session;
mod support;
mod version;
