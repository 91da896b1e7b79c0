//! mcp-client's requests through the `client` adapter: one CLIENT span per request, the trace
//! context in the `_meta` the server receives, and each way a request ends as its `error.type`.

use std::time::Duration;

use mcp_client::{Client, ClientError, ClientOptions, RequestOptions, memory_pair};
use mcp_telemetry::client::{ClientObserver, Peer};
use mcp_telemetry::conventions::{Transport, attr};
use opentelemetry::trace::{SpanKind, Status};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::memory::{self, attr};

/// A scripted server: answers `initialize`, and `tools/call` by the tool's name; passes every
/// call's params on to the test.
fn serve(mut peer: mcp_client::MemoryPeer) -> mpsc::UnboundedReceiver<Value> {
    let (seen, calls) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Some(line) = peer.incoming.recv().await {
            let request: Value = serde_json::from_str(&line).unwrap();
            let id = request["id"].clone();
            let answer = match request["method"].as_str() {
                Some("initialize") => json!({"result": {"protocolVersion": "2025-06-18", "capabilities": {"tools": {}},
                                                         "serverInfo": {"name": "scripted", "version": "1"}}}),
                Some("tools/call") => {
                    let _ = seen.send(request["params"].clone());
                    match request["params"]["name"].as_str() {
                        Some("echo") => json!({"result": {"content": [{"type": "text", "text": "hi"}]}}),
                        Some("broken") => json!({"result": {"content": [], "isError": true}}),
                        Some("hang") => continue,
                        _ => json!({"error": {"code": -32602, "message": "Unknown tool"}}),
                    }
                }
                _ => continue,
            };
            let mut reply = json!({"jsonrpc": "2.0", "id": id});
            reply.as_object_mut().unwrap().extend(answer.as_object().unwrap().clone());
            let _ = peer.outgoing.send(reply.to_string());
        }
    });
    calls
}

#[tokio::test]
async fn every_request_a_client_sends_is_a_client_span_whose_context_the_server_receives() {
    let (telemetry, memory) = memory::telemetry(false);
    let (transport, peer) = memory_pair();
    let mut calls = serve(peer);
    // Shared by many connections, told apart by label: this one is remote.
    let remote = Peer::new(Transport::Http(Some("1.1")), Some("mcp.example".to_owned()), Some(8443));
    let options = ClientOptions {
        label: "scripted".to_owned(),
        request_timeout: Duration::from_millis(300),
        observer: ClientObserver::for_servers(
            &telemetry,
            [("scripted".to_owned(), remote), ("other".to_owned(), Peer::default())],
            Peer::new(Transport::Stdio, None, None),
        ),
        ..ClientOptions::default()
    };
    let client = Client::connect(transport, options).await.unwrap();

    client.call_tool("echo", None, RequestOptions::default()).await.unwrap();
    let received = calls.recv().await.unwrap();
    let broken = client.call_tool("broken", None, RequestOptions::default()).await.unwrap();
    assert_eq!(broken.is_error, Some(true));
    let unknown = client.call_tool("nope", None, RequestOptions::default()).await.unwrap_err();
    assert!(matches!(unknown, ClientError::Server { .. }), "{unknown}");
    let hang = client.call_tool("hang", None, RequestOptions::default()).await.unwrap_err();
    assert!(matches!(hang, ClientError::Timeout { .. }), "{hang}");

    let init = memory.named("initialize");
    assert_eq!(init.span_kind, SpanKind::Client);
    assert_eq!(attr(&init, attr::MCP_HARNESS_SERVER).as_deref(), Some("scripted"));
    assert_eq!(attr(&init, attr::JSONRPC_REQUEST_ID).as_deref(), Some("1"));

    let echo = memory.named("tools/call echo");
    for (key, value) in [
        (attr::MCP_METHOD_NAME, "tools/call"),
        (attr::GEN_AI_TOOL_NAME, "echo"),
        (attr::GEN_AI_OPERATION_NAME, "execute_tool"),
        (attr::MCP_PROTOCOL_VERSION, "2025-06-18"),
        (attr::NETWORK_TRANSPORT, "tcp"),
        (attr::NETWORK_PROTOCOL_NAME, "http"),
        (attr::NETWORK_PROTOCOL_VERSION, "1.1"),
        (attr::SERVER_ADDRESS, "mcp.example"),
        (attr::SERVER_PORT, "8443"),
        (attr::JSONRPC_REQUEST_ID, "2"),
    ] {
        assert_eq!(attr(&echo, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(echo.status, Status::Unset);
    // The server got the span's own context in `_meta`.
    let sc = &echo.span_context;
    assert_eq!(received["_meta"]["traceparent"], format!("00-{}-{}-01", sc.trace_id(), sc.span_id()));
    assert_eq!(received["name"], "echo");

    for (name, error_type) in [("broken", "tool_error"), ("nope", "-32602"), ("hang", "timeout")] {
        let span = memory.named(&format!("tools/call {name}"));
        assert_eq!(attr(&span, attr::ERROR_TYPE).as_deref(), Some(error_type), "{name}");
        assert!(matches!(span.status, Status::Error { .. }), "{name}");
    }
    // Capture is off: a failed call's message (which may quote its arguments) stays home.
    assert_eq!(memory.named("tools/call nope").status, Status::error(""));
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_caller_that_stops_waiting_leaves_a_cancelled_span() {
    let (telemetry, memory) = memory::telemetry(false);
    let (transport, peer) = memory_pair();
    let mut calls = serve(peer);
    let options = ClientOptions {
        observer: ClientObserver::for_connection(&telemetry, Peer::new(Transport::Stdio, None, None)),
        ..ClientOptions::default()
    };
    let client = Client::connect(transport, options).await.unwrap();
    let call = client.call_tool("hang", None, RequestOptions::default());
    tokio::select! {
        _ = call => panic!("the hanging call was answered"),
        _ = calls.recv() => {} // it reached the server: drop the call now
    }
    let span = memory.named("tools/call hang");
    assert_eq!(attr(&span, attr::ERROR_TYPE).as_deref(), Some("cancelled"));
    client.close().await.unwrap();
}

/// `mcp.client.session.duration`: one session from the handshake to the close, by revision
/// and transport; none before it ends.
#[tokio::test]
async fn a_closed_connection_records_its_session_duration() {
    let config = mcp_telemetry::config::TelemetryConfig::resolve(
        &Default::default(),
        &std::collections::BTreeMap::new(),
        "session-test",
    )
    .unwrap();
    let telemetry =
        mcp_telemetry::Telemetry::start(&config, &mcp_telemetry::Options::default().with_prometheus()).unwrap();
    let sessions = |telemetry: &mcp_telemetry::Telemetry| {
        let text = telemetry.render_prometheus().unwrap();
        text.lines()
            .filter(|l| l.starts_with("mcp_client_session_duration_seconds_count{"))
            .map(|l| (l.split_once('{').unwrap().1.to_owned(), l.rsplit(' ').next().unwrap().parse::<u64>().unwrap()))
            .collect::<Vec<_>>()
    };
    let (transport, peer) = memory_pair();
    let _calls = serve(peer);
    let options = ClientOptions {
        observer: ClientObserver::for_connection(&telemetry, Peer::new(Transport::Stdio, None, None)),
        ..ClientOptions::default()
    };
    let client = Client::connect(transport, options).await.unwrap();
    assert_eq!(sessions(&telemetry), vec![], "open: not recorded yet");
    client.close().await.unwrap();
    let recorded = sessions(&telemetry);
    assert_eq!(recorded.len(), 1, "{recorded:?}");
    let (labels, count) = &recorded[0];
    assert_eq!(*count, 1);
    assert!(labels.contains("mcp_protocol_version=\"2025-06-18\""), "{labels}");
    assert!(labels.contains("network_transport=\"pipe\""), "{labels}");
}

#[test]
fn without_telemetry_there_is_no_observer() {
    let off = mcp_telemetry::Telemetry::disabled();
    assert!(ClientObserver::for_connection(&off, Peer::default()).is_none());
    assert!(ClientObserver::for_servers(&off, [], Peer::default()).is_none());
}
