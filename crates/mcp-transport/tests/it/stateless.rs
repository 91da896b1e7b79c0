//! The 2026-07-28 revision on the wire, with the test playing the server: discover, the
//! envelope, input-required rounds through the handler port, subscriptions/listen, and the
//! automatic era that falls back to initialize.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use mcp_client::{
    Client, ClientError, ClientOptions, Era, MemoryPeer, RequestOptions, ServerRequestHandler, memory_pair,
};
use mcp_fixtures::EVENT_DEADLINE;
use mcp_protocol::ErrorObject;
use mcp_protocol::{ClientCapabilities, ElicitAction, ElicitRequestParams, ElicitResult, ServerNotification};
use serde_json::{Value, json};

use crate::args;

async fn next(peer: &mut MemoryPeer) -> Value {
    let line = tokio::time::timeout(EVENT_DEADLINE, peer.incoming.recv()).await.unwrap().unwrap();
    serde_json::from_str(&line).unwrap()
}

fn reply(peer: &MemoryPeer, id: &Value, result: Value) {
    peer.outgoing.send(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()).unwrap();
}

fn discover_result() -> Value {
    json!({"resultType": "complete", "supportedVersions": ["2026-07-28"], "capabilities": {"tools": {"listChanged": true}},
           "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "modern", "version": "1"}}})
}

fn meta_version(request: &Value) -> &Value {
    &request["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"]
}

struct Agrees;

#[async_trait]
impl ServerRequestHandler for Agrees {
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        let content = json!({"name": format!("answer to {}", params.message)}).as_object().cloned();
        Ok(ElicitResult { action: ElicitAction::Accept, content, extra: Default::default() })
    }
}

fn stateless_options() -> ClientOptions {
    ClientOptions {
        era: Era::Discover,
        handler: Arc::new(Agrees),
        capabilities: ClientCapabilities { elicitation: Some(json!({})), ..ClientCapabilities::default() },
        ..ClientOptions::default()
    }
}

async fn discovered(options: ClientOptions) -> (Client, MemoryPeer) {
    let (transport, mut peer) = memory_pair();
    let client = Client::start(transport, options);
    let server = tokio::spawn(async move {
        let request = next(&mut peer).await;
        assert_eq!(request["method"], "server/discover");
        assert_eq!(meta_version(&request), "2026-07-28");
        reply(&peer, &request["id"], discover_result());
        peer
    });
    client.open().await.unwrap();
    (client, server.await.unwrap())
}

#[tokio::test]
async fn discover_then_requests_carry_the_envelope() {
    let (client, mut peer) = discovered(stateless_options()).await;
    assert_eq!(client.protocol_version().unwrap().as_str(), "2026-07-28");
    assert_eq!(client.server_info().unwrap().server_info.name, "modern");
    let call = tokio::spawn(async move {
        let request = next(&mut peer).await;
        assert_eq!(request["method"], "tools/list");
        assert_eq!(meta_version(&request), "2026-07-28");
        assert_eq!(request["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]["elicitation"], json!({}));
        reply(&peer, &request["id"], json!({"resultType": "complete", "tools": []}));
        peer
    });
    assert!(client.list_tools(None).await.unwrap().tools.is_empty());
    call.await.unwrap();
}

#[tokio::test]
async fn an_input_required_result_is_answered_through_the_handler_and_the_request_retried() {
    let (client, mut peer) = discovered(stateless_options()).await;
    let server = tokio::spawn(async move {
        let first = next(&mut peer).await;
        assert_eq!(first["params"]["name"], "book");
        assert!(first["params"].get("inputResponses").is_none());
        reply(
            &peer,
            &first["id"],
            json!({"resultType": "input_required", "requestState": "s1",
            "inputRequests": {"who": {"method": "elicitation/create",
                "params": {"message": "Who?", "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}}}}),
        );
        let retry = next(&mut peer).await;
        assert_ne!(retry["id"], first["id"], "a retry is a new request");
        assert_eq!(retry["params"]["name"], "book");
        assert_eq!(retry["params"]["arguments"], json!({"day": "monday"}));
        assert_eq!(retry["params"]["requestState"], "s1");
        assert_eq!(
            retry["params"]["inputResponses"]["who"],
            json!({"action": "accept", "content": {"name": "answer to Who?"}})
        );
        assert_eq!(meta_version(&retry), "2026-07-28");
        reply(&peer, &retry["id"], json!({"content": [{"type": "text", "text": "booked"}]}));
        peer
    });
    let r = client.call_tool("book", args(json!({"day": "monday"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "booked", "a result without resultType is complete");
    server.await.unwrap();
}

#[tokio::test]
async fn a_server_that_always_wants_input_is_given_up_on() {
    let (client, mut peer) = discovered(stateless_options()).await;
    let server = tokio::spawn(async move {
        let mut rounds = 0;
        while let Ok(Some(line)) = tokio::time::timeout(EVENT_DEADLINE, peer.incoming.recv()).await {
            let request: Value = serde_json::from_str(&line).unwrap();
            rounds += 1;
            reply(&peer, &request["id"], json!({"resultType": "input_required", "inputRequests": {}}));
        }
        rounds
    });
    let err = client.call_tool("loop", None, RequestOptions::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::InputRequired { .. }), "{err}");
    drop(client);
    assert_eq!(server.await.unwrap(), 1 + mcp_client::MAX_INPUT_ROUNDS);
}

#[tokio::test]
async fn listen_for_changes_opens_a_subscription_whose_notifications_reach_subscribers() {
    let (client, mut peer) = discovered(stateless_options()).await;
    let mut notes = client.subscribe();
    client.listen_for_changes().unwrap();
    let request = next(&mut peer).await;
    assert_eq!(request["method"], "subscriptions/listen");
    assert_eq!(request["params"]["notifications"]["toolsListChanged"], true);
    assert_eq!(meta_version(&request), "2026-07-28");
    peer.outgoing.send(json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).to_string()).unwrap();
    let note = tokio::time::timeout(EVENT_DEADLINE, notes.recv()).await.unwrap().unwrap();
    assert!(matches!(note, ServerNotification::ToolsListChanged), "{note:?}");
    assert_eq!(client.pending_requests(), 1, "the listen request stays open");
}

#[tokio::test]
async fn auto_falls_back_to_initialize_when_discover_is_unknown() {
    let (transport, mut peer) = memory_pair();
    let client = Client::start(transport, ClientOptions { era: Era::Auto, ..ClientOptions::default() });
    let server = tokio::spawn(async move {
        let probe = next(&mut peer).await;
        assert_eq!(probe["method"], "server/discover");
        peer.outgoing
            .send(
                json!({"jsonrpc": "2.0", "id": probe["id"], "error": {"code": -32601, "message": "Method not found"}})
                    .to_string(),
            )
            .unwrap();
        let init = next(&mut peer).await;
        assert_eq!(init["method"], "initialize");
        assert!(init["params"].get("_meta").is_none());
        reply(
            &peer,
            &init["id"],
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "old", "version": "1"}}),
        );
        assert_eq!(next(&mut peer).await["method"], "notifications/initialized");
        let list = next(&mut peer).await;
        assert!(list["params"].get("_meta").is_none(), "no envelope in the handshake era: {list}");
        reply(&peer, &list["id"], json!({"tools": []}));
        peer
    });
    client.open().await.unwrap();
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    client.list_tools(None).await.unwrap();
    client.listen_for_changes().unwrap();
    assert_eq!(client.pending_requests(), 0, "no listen request in the handshake era");
    server.await.unwrap();
}

#[tokio::test]
async fn auto_falls_back_when_the_probe_gets_no_answer() {
    let (transport, mut peer) = memory_pair();
    let options =
        ClientOptions { era: Era::Auto, startup_timeout: Duration::from_millis(300), ..ClientOptions::default() };
    let client = Client::start(transport, options);
    let server = tokio::spawn(async move {
        let probe = next(&mut peer).await;
        assert_eq!(probe["method"], "server/discover");
        // Silence; then the cancellation of the probe, then initialize.
        assert_eq!(next(&mut peer).await["method"], "notifications/cancelled");
        let init = next(&mut peer).await;
        assert_eq!(init["method"], "initialize");
        reply(
            &peer,
            &init["id"],
            json!({"protocolVersion": "2025-06-18", "capabilities": {}, "serverInfo": {"name": "old", "version": "1"}}),
        );
        peer
    });
    client.open().await.unwrap();
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-06-18");
    server.await.unwrap();
}

/// A server that is slow to answer the probe (past the probe time) and, having seen
/// `server/discover`, refuses `initialize`: the late discover answer still wins.
#[tokio::test]
async fn a_slow_discover_answer_wins_over_a_refused_initialize() {
    let (transport, mut peer) = memory_pair();
    let options =
        ClientOptions { era: Era::Auto, probe_timeout: Duration::from_millis(50), ..ClientOptions::default() };
    let client = Client::start(transport, options);
    let server = tokio::spawn(async move {
        let discover = next(&mut peer).await;
        assert_eq!(discover["method"], "server/discover");
        // Only answer once the client has given up waiting alone and sent initialize.
        let initialize = next(&mut peer).await;
        assert_eq!(initialize["method"], "initialize");
        let refusal = json!({"jsonrpc": "2.0", "id": initialize["id"],
            "error": {"code": -32600, "message": "this connection is serving the 2026-07-28 protocol"}});
        peer.outgoing.send(refusal.to_string()).unwrap();
        reply(&peer, &discover["id"], discover_result());
        peer
    });
    let result = client.open().await.unwrap();
    assert_eq!(result.protocol_version, "2026-07-28");
    assert_eq!(client.protocol_version().unwrap().as_str(), "2026-07-28");
    let _peer = server.await.unwrap();
}

/// The other order: an old server ignores the probe, answers `initialize`.
#[tokio::test]
async fn a_server_that_ignores_the_probe_is_initialized() {
    let (transport, mut peer) = memory_pair();
    let options =
        ClientOptions { era: Era::Auto, probe_timeout: Duration::from_millis(50), ..ClientOptions::default() };
    let client = Client::start(transport, options);
    let server = tokio::spawn(async move {
        let discover = next(&mut peer).await;
        assert_eq!(discover["method"], "server/discover");
        let initialize = next(&mut peer).await;
        assert_eq!(initialize["method"], "initialize");
        reply(
            &peer,
            &initialize["id"],
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
            "serverInfo": {"name": "old", "version": "1"}}),
        );
        peer
    });
    let result = client.open().await.unwrap();
    assert_eq!(result.protocol_version, "2025-06-18");
    let mut peer = server.await.unwrap();
    // The abandoned probe is cancelled, and initialized follows.
    let mut seen = Vec::new();
    for _ in 0..2 {
        seen.push(next(&mut peer).await["method"].as_str().unwrap().to_owned());
    }
    seen.sort();
    assert_eq!(seen, ["notifications/cancelled", "notifications/initialized"]);
}

/// A server remembered to answer `initialize` gets it first, and no probe.
#[tokio::test]
async fn initialize_first_sends_no_probe() {
    let (transport, mut peer) = memory_pair();
    let client = Client::start(transport, ClientOptions { era: Era::InitializeFirst, ..ClientOptions::default() });
    let server = tokio::spawn(async move {
        let init = next(&mut peer).await;
        assert_eq!(init["method"], "initialize", "the first message is initialize: {init}");
        reply(
            &peer,
            &init["id"],
            json!({"protocolVersion": "2025-11-25", "capabilities": {}, "serverInfo": {"name": "old", "version": "1"}}),
        );
        assert_eq!(next(&mut peer).await["method"], "notifications/initialized");
        peer
    });
    client.open().await.unwrap();
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    assert_eq!(Era::remembering(client.protocol_version().unwrap()), Era::InitializeFirst);
    server.await.unwrap();
}

/// A server remembered to answer `initialize` that has since moved to 2026-07-28 and refuses
/// it still connects, through `server/discover`.
#[tokio::test]
async fn initialize_first_falls_back_to_discover_when_initialize_is_refused() {
    let (transport, mut peer) = memory_pair();
    let client = Client::start(transport, ClientOptions { era: Era::InitializeFirst, ..ClientOptions::default() });
    let server = tokio::spawn(async move {
        let init = next(&mut peer).await;
        assert_eq!(init["method"], "initialize");
        let refusal = json!({"jsonrpc": "2.0", "id": init["id"],
            "error": {"code": -32601, "message": "Method not found"}});
        peer.outgoing.send(refusal.to_string()).unwrap();
        let discover = next(&mut peer).await;
        assert_eq!(discover["method"], "server/discover");
        reply(&peer, &discover["id"], discover_result());
        peer
    });
    client.open().await.unwrap();
    let version = client.protocol_version().unwrap();
    assert_eq!(version.as_str(), "2026-07-28");
    assert_eq!(Era::remembering(version), Era::Auto);
    let _peer = server.await.unwrap();
}
