//! The multi-server layer against real transports: the fixture server over stdio, a remote
//! URL nobody listens on, a server that crashes, one that is too slow.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use mcp_client::{ClientError, ConnectOptions, ServerSpec, ServerState, close_all, connect, connect_all};
use mcp_protocol::ProtocolVersion;
use mcp_safety::Backoff;
use mcp_transport::{RemoteServer, StdioConfig};

fn fixture() -> String {
    mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string()
}

fn spec(name: &str, command: &str, args: &[&str]) -> ServerSpec {
    let mut spec = ServerSpec::new(name, Arc::new(StdioConfig::new(command, args.iter().copied())));
    spec.startup_timeout = Duration::from_secs(10);
    spec
}

#[tokio::test]
async fn connects_all_concurrently_with_per_server_outcomes() {
    let fx = fixture();
    // "good" and "twin" answer initialize only once both have started: if servers were
    // connected one after another, neither would connect within its startup timeout.
    let rendezvous = tempfile::tempdir().unwrap();
    let together = ["echo", "--rendezvous", rendezvous.path().to_str().unwrap(), "--peers", "2"];
    let mut slow = spec("slow", "sh", &["-c", &format!("sleep 30; exec {fx} echo")]);
    slow.startup_timeout = Duration::from_millis(500);
    let mut off = spec("off", &fx, &["echo"]);
    off.enabled = false;
    let mut unreachable = RemoteServer::new("ws://127.0.0.1:9/mcp");
    unreachable.reconnect =
        Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50), max_attempts: 3 };
    let remote = ServerSpec::new("remote", Arc::new(unreachable));
    let specs = vec![
        spec("good", &fx, &together),
        spec("missing", "/nonexistent/mcp-server", &[]),
        slow,
        off,
        remote,
        spec("crashing", "sh", &["-c", "echo oops >&2; exit 7"]),
        spec("twin", &fx, &together),
    ];
    let connections = connect_all(specs, &ConnectOptions::default()).await;
    let states: Vec<(&str, &str)> = connections.iter().map(|c| (c.name(), c.state().label())).collect();
    assert_eq!(
        states,
        [
            ("good", "connected"),
            ("missing", "failed"),
            ("slow", "failed"),
            ("off", "disabled"),
            ("remote", "failed"),
            ("crashing", "failed"),
            ("twin", "connected")
        ]
    );
    let ServerState::Connected { tools, protocol, .. } = connections[0].state() else { unreachable!() };
    assert_eq!(*tools, connections[0].tools().len());
    assert!(*tools >= 5);
    assert_eq!(*protocol, ProtocolVersion::LATEST);
    let reason = |i: usize| connections[i].state().to_string();
    assert!(reason(1).contains("/nonexistent/mcp-server"), "{}", reason(1));
    assert!(reason(2).contains("timed out after 0.5s"), "{}", reason(2));
    assert!(reason(4).contains("ws://127.0.0.1:9/mcp"), "{}", reason(4));
    // Each failure is its own: the slow server's own timeout, the crashing one's exit status
    // and what it said on stderr.
    assert!(reason(5).contains("status 7") && reason(5).contains("oops"), "{}", reason(5));

    let result = connections[0].call_tool("echo", serde_json::json!({"text": "hi"}).as_object().cloned()).await;
    assert_eq!(result.unwrap().joined_text(), "hi");
    let err = connections[1].call_tool("echo", None).await.unwrap_err();
    assert!(err.to_string().contains("not connected"), "{err}");
    close_all(connections).await;
}

#[tokio::test]
async fn tool_timeout_applies_to_calls() {
    let fx = fixture();
    let mut s = spec("fx", &fx, &["echo"]);
    s.tool_timeout = Duration::from_millis(200);
    let c = connect(s, &ConnectOptions::default()).await;
    assert!(c.is_connected(), "{}", c.state());
    let err = c.call_tool("sleep", serde_json::json!({"ms": 3000}).as_object().cloned()).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
    c.close().await;
}
