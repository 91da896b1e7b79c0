//! Integration tests of the transport crate: real fixture processes over stdio, and an
//! in-memory peer for exact wire checks.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod http;
mod memory;
mod reliability;
mod sandbox;
mod stateless;
mod stdio;
mod ws;

use std::time::Duration;

use mcp_client::{Client, ClientOptions};
use mcp_transport::{StdioConfig, StdioTransport};

/// A stdio config for the fixture server in `mode` with extra flags.
pub fn fixture(mode: &str, flags: &[&str]) -> StdioConfig {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut args = vec![mode.to_owned()];
    args.extend(flags.iter().map(|s| (*s).to_owned()));
    let mut config = StdioConfig::new(binary.to_string_lossy().into_owned(), args);
    config.close_grace = Duration::from_millis(500);
    config
}

pub async fn connect(mode: &str, flags: &[&str]) -> Client {
    connect_with(fixture(mode, flags), ClientOptions::default()).await
}

pub async fn connect_with(config: StdioConfig, options: ClientOptions) -> Client {
    let transport = StdioTransport::spawn(config).expect("spawn fixture");
    Client::connect(transport, options).await.expect("handshake with fixture")
}

pub fn args(value: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    value.as_object().cloned()
}

/// Whether a process is gone (no entry, or not a zombie waiting to be reaped).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // The state follows the parenthesized command name.
            let state = stat.rsplit(')').next().and_then(|rest| rest.split_whitespace().next());
            state == Some("X")
        }
    }
}

pub fn is_zombie(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|stat| stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) == Some("Z"))
        .unwrap_or(false)
}
