//! A WebSocket server that sends pings and reads nothing: the pongs the client cannot send
//! wait in a bounded buffer (without a bound they piled up: 200 MB in 30 s here). A test
//! binary of its own, because it measures this process's resident set.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use mcp_client::{Client, ClientOptions};
use mcp_fixtures::wait_until;
use mcp_fixtures::ws::{WsOptions, start_ws};
use mcp_transport::{WebSocketConfig, WebSocketTransport};

/// This process's resident set, in bytes.
fn resident() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse::<u64>().unwrap() * 1024
}

#[tokio::test]
async fn pongs_a_server_does_not_read_wait_in_a_bounded_buffer() {
    // 600,000 pings: 81 MB of pongs, of which the sockets' own buffers hold about 10.
    let s = start_ws(WsOptions { ping_flood: Some(600_000), ..WsOptions::default() }).await.unwrap();
    let mut config = WebSocketConfig::new(s.url());
    config.max_message_bytes = 16 * 1024;
    let transport = WebSocketTransport::connect(config).await.unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    let before = resident();
    assert!(wait_until(Duration::from_secs(120), || s.flooded()).await, "the flood was not taken");
    // The last pings the socket took are read too.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let grew = resident().saturating_sub(before);
    assert!(grew < 24 << 20, "the client grew by {} MB", grew >> 20);
    drop(client);
}
