//! Tests of the agent loop: an in-memory tool source and scripted models for exact behaviour,
//! and the fixture MCP server for the real thing.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod fake;
mod fixture;
mod gate_tests;
mod loop_tests;
mod reliability;
mod search_tests;
mod transcript_tests;
