//! Exact wire behaviour, with the test playing the server through the in-memory transport.

use std::time::Duration;

use mcp_client::{Client, ClientError, ClientOptions, MemoryPeer, RequestOptions, memory_pair};
use mcp_fixtures::EVENT_DEADLINE;
use mcp_protocol::{NegotiationError, SessionError};
use serde_json::{Value, json};

async fn next(peer: &mut MemoryPeer) -> Value {
    let line = tokio::time::timeout(EVENT_DEADLINE, peer.incoming.recv()).await.unwrap().unwrap();
    serde_json::from_str(&line).unwrap()
}

fn answer(peer: &MemoryPeer, id: &Value, result: Value) {
    peer.outgoing.send(json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string()).unwrap();
}

fn init_result(version: &str) -> Value {
    json!({"protocolVersion": version, "capabilities": {}, "serverInfo": {"name": "mem", "version": "0"}})
}

/// Connect through the handshake, answering with `version`.
async fn handshake(version: &str) -> (Client, MemoryPeer) {
    handshake_with(ClientOptions::default(), version).await
}

/// [`handshake`] with these options.
async fn handshake_with(options: ClientOptions, version: &str) -> (Client, MemoryPeer) {
    let (transport, mut peer) = memory_pair();
    let client = Client::start(transport, options);
    let version = version.to_owned();
    let init = tokio::spawn(async move {
        let request = next(&mut peer).await;
        assert_eq!(request["method"], "initialize");
        assert_eq!(request["params"]["protocolVersion"], "2025-11-25", "offers the newest");
        answer(&peer, &request["id"], init_result(&version));
        let initialized = next(&mut peer).await;
        assert_eq!(initialized, json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        peer
    });
    client.initialize().await.unwrap();
    (client, init.await.unwrap())
}

#[tokio::test]
async fn accepts_an_older_supported_revision() {
    let (client, _peer) = handshake("2024-11-05").await;
    assert_eq!(client.protocol_version().unwrap().as_str(), "2024-11-05");
}

#[tokio::test]
async fn refuses_an_unknown_revision_naming_both() {
    let (transport, mut peer) = memory_pair();
    let client = Client::start(transport, ClientOptions::default());
    let server = tokio::spawn(async move {
        let request = next(&mut peer).await;
        answer(&peer, &request["id"], init_result("1999-01-01"));
        peer
    });
    let err = client.initialize().await.unwrap_err();
    let _peer = server.await.unwrap();
    assert!(
        matches!(err, ClientError::Session(SessionError::Negotiation(NegotiationError { ref answered, .. })) if answered == "1999-01-01")
    );
    let text = err.to_string();
    assert!(text.contains("1999-01-01") && text.contains("2025-11-25"), "{text}");
}

#[tokio::test]
async fn requests_before_the_handshake_are_refused() {
    let (transport, _peer) = memory_pair();
    let client = Client::start(transport, ClientOptions::default());
    let err = client.list_tools(None).await.unwrap_err();
    assert!(matches!(err, ClientError::Session(SessionError::NotReady { .. })), "{err:?}");
}

#[tokio::test]
async fn timeout_sends_cancelled_with_the_request_id() {
    let (client, mut peer) = handshake("2025-06-18").await;
    let options = RequestOptions { timeout: Some(Duration::from_millis(50)), progress: None, max_total: None };
    let err = client.call_tool("slow", None, options).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }));
    let request = next(&mut peer).await;
    assert_eq!(request["method"], "tools/call");
    let cancelled = next(&mut peer).await;
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], request["id"]);
    assert!(cancelled["params"]["reason"].as_str().unwrap().contains("timed out"));
    // A late answer is ignored, and nothing is left pending. The client reads in order, so
    // once it has answered a ping sent after the late answer, it has processed that answer.
    answer(&peer, &request["id"], json!({"content": []}));
    peer.outgoing.send(r#"{"jsonrpc":"2.0","id":"after","method":"ping"}"#.into()).unwrap();
    assert_eq!(next(&mut peer).await, json!({"jsonrpc": "2.0", "id": "after", "result": {}}));
    assert_eq!(client.pending_requests(), 0);
    assert!(client.is_open(), "the late answer did not break the connection");
}

/// Answers an elicitation once the test lets it: a person taking their time.
struct SlowPerson(tokio::sync::Mutex<Option<tokio::sync::oneshot::Receiver<()>>>);

#[async_trait::async_trait]
impl mcp_client::ServerRequestHandler for SlowPerson {
    async fn elicit(
        &self,
        _params: mcp_protocol::ElicitRequestParams,
    ) -> Result<mcp_protocol::ElicitResult, mcp_protocol::ErrorObject> {
        if let Some(answered) = self.0.lock().await.take() {
            let _ = answered.await;
        }
        Ok(mcp_protocol::ElicitResult {
            action: mcp_protocol::ElicitAction::Decline,
            content: None,
            extra: Default::default(),
        })
    }
}

#[tokio::test]
async fn the_time_a_person_takes_to_answer_does_not_count_against_the_call() {
    let (answered, answer_now) = tokio::sync::oneshot::channel();
    let options = ClientOptions {
        request_timeout: Duration::from_millis(500),
        handler: std::sync::Arc::new(SlowPerson(tokio::sync::Mutex::new(Some(answer_now)))),
        ..ClientOptions::default()
    };
    let (client, mut peer) = handshake_with(options, "2025-06-18").await;
    let client = std::sync::Arc::new(client);
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.call_tool("form", None, RequestOptions::default()).await })
    };
    let request = next(&mut peer).await;
    assert_eq!(request["method"], "tools/call");
    peer.outgoing
        .send(
            json!({"jsonrpc": "2.0", "id": "e1", "method": "elicitation/create",
            "params": {"message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}})
            .to_string(),
        )
        .unwrap();
    // The person takes three times the call's timeout; the call is still waiting after.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(!call.is_finished(), "the call timed out while a person was being asked");
    answered.send(()).unwrap();
    let reply = next(&mut peer).await;
    assert_eq!((reply["id"].clone(), reply["result"]["action"].clone()), (json!("e1"), json!("decline")));
    answer(&peer, &request["id"], json!({"content": [{"type": "text", "text": "thanks"}]}));
    let result = tokio::time::timeout(EVENT_DEADLINE, call).await.unwrap().unwrap().unwrap();
    assert_eq!(result.joined_text(), "thanks");
    // Deadlines were moved, not dropped: an unanswered call still times out.
    let err = client.call_tool("never", None, RequestOptions::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { .. }), "{err:?}");
}

/// Accepts every elicitation at once.
struct Accepts;

#[async_trait::async_trait]
impl mcp_client::ServerRequestHandler for Accepts {
    async fn elicit(
        &self,
        _params: mcp_protocol::ElicitRequestParams,
    ) -> Result<mcp_protocol::ElicitResult, mcp_protocol::ErrorObject> {
        Ok(mcp_protocol::ElicitResult {
            action: mcp_protocol::ElicitAction::Accept,
            content: None,
            extra: Default::default(),
        })
    }
}

#[tokio::test]
async fn a_url_elicitation_required_error_is_retried_once_after_the_urls_are_accepted() {
    let options = ClientOptions { handler: std::sync::Arc::new(Accepts), ..ClientOptions::default() };
    let (client, mut peer) = handshake_with(options, "2025-11-25").await;
    let required = |peer: &MemoryPeer, id: &Value| {
        let data = json!({"elicitations": [{"mode": "url", "message": "Sign in", "url": "https://example.com/a", "elicitationId": "e"}]});
        let error = json!({"code": -32042, "message": "needs a visit", "data": data});
        peer.outgoing.send(json!({"jsonrpc": "2.0", "id": id, "error": error}).to_string()).unwrap();
    };
    let server = tokio::spawn(async move {
        // Twice: the first call and its one retry; a third request would be a loop.
        for _ in 0..2 {
            let request = next(&mut peer).await;
            assert_eq!(request["method"], "tools/call");
            required(&peer, &request["id"]);
        }
        peer
    });
    let err = client.call_tool("book", None, RequestOptions::default()).await.unwrap_err();
    assert!(matches!(&err, ClientError::Server { error, .. } if error.code == -32042), "{err:?}");
    let mut peer = server.await.unwrap();
    // The retry is answered this time.
    let server = tokio::spawn(async move {
        let first = next(&mut peer).await;
        required(&peer, &first["id"]);
        let retry = next(&mut peer).await;
        assert_ne!(retry["id"], first["id"]);
        answer(&peer, &retry["id"], json!({"content": [{"type": "text", "text": "booked"}]}));
        peer
    });
    let result = client.call_tool("book", None, RequestOptions::default()).await.unwrap();
    assert_eq!(result.joined_text(), "booked");
    let _peer = server.await.unwrap();
    assert_eq!(client.pending_requests(), 0);
}

#[tokio::test]
async fn a_caller_that_gives_up_cancels_its_request() {
    let (client, mut peer) = handshake("2025-06-18").await;
    let call = client.call_tool("slow", None, RequestOptions::default());
    // Drop the call future after it has sent its request.
    let _ = tokio::time::timeout(Duration::from_millis(50), call).await;
    let request = next(&mut peer).await;
    let cancelled = next(&mut peer).await;
    assert_eq!(cancelled["method"], "notifications/cancelled");
    assert_eq!(cancelled["params"]["requestId"], request["id"]);
    assert_eq!(client.pending_requests(), 0);
}

#[tokio::test]
async fn transport_death_fails_pending_requests_at_once() {
    let (client, mut peer) = handshake("2025-06-18").await;
    let client = std::sync::Arc::new(client);
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.call_tool("x", None, RequestOptions::default()).await })
    };
    let _request = next(&mut peer).await;
    drop(peer);
    let err = tokio::time::timeout(EVENT_DEADLINE, call).await.unwrap().unwrap().unwrap_err();
    assert!(matches!(err, ClientError::ConnectionClosed { .. }), "{err:?}");
    assert!(err.to_string().contains("closed"), "{err}");
}

#[tokio::test]
async fn ping_and_unknown_server_requests_are_answered() {
    let (_client, mut peer) = handshake("2025-06-18").await;
    peer.outgoing.send(r#"{"jsonrpc":"2.0","id":"p1","method":"ping"}"#.into()).unwrap();
    assert_eq!(next(&mut peer).await, json!({"jsonrpc": "2.0", "id": "p1", "result": {}}));
    peer.outgoing.send(r#"{"jsonrpc":"2.0","id":7,"method":"tasks/weird","params":{}}"#.into()).unwrap();
    let reply = next(&mut peer).await;
    assert_eq!(reply["id"], 7);
    assert_eq!(reply["error"]["code"], -32601);
    peer.outgoing
        .send(r#"{"jsonrpc":"2.0","id":8,"method":"sampling/createMessage","params":{"bad":1}}"#.into())
        .unwrap();
    let reply = next(&mut peer).await;
    assert_eq!(reply["id"], 8);
    assert_eq!(reply["error"]["code"], -32602, "invalid params are named");
}

#[tokio::test]
async fn non_json_lines_are_skipped() {
    let (client, mut peer) = handshake("2025-06-18").await;
    let client = std::sync::Arc::new(client);
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.call_tool("echo", None, RequestOptions::default()).await })
    };
    let request = next(&mut peer).await;
    for junk in ["not json", "[1,2]", "{\"jsonrpc\":\"2.0\"}", "42", "{\"id\":1}"] {
        peer.outgoing.send(junk.into()).unwrap();
    }
    answer(&peer, &request["id"], json!({"content": [{"type": "text", "text": "ok"}]}));
    let result = call.await.unwrap().unwrap();
    assert_eq!(result.joined_text(), "ok");
}

#[tokio::test]
async fn malformed_results_are_named() {
    let (client, mut peer) = handshake("2025-06-18").await;
    let client = std::sync::Arc::new(client);
    let call = {
        let client = client.clone();
        tokio::spawn(async move { client.list_tools(None).await })
    };
    let request = next(&mut peer).await;
    answer(&peer, &request["id"], json!({"tools": "not a list"}));
    let err = call.await.unwrap().unwrap_err();
    assert!(matches!(err, ClientError::BadResult { ref method, .. } if method == "tools/list"), "{err:?}");
}

/// Never answers an elicitation: a person who walked away.
struct Away;

#[async_trait::async_trait]
impl mcp_client::ServerRequestHandler for Away {
    async fn elicit(
        &self,
        _params: mcp_protocol::ElicitRequestParams,
    ) -> Result<mcp_protocol::ElicitResult, mcp_protocol::ErrorObject> {
        std::future::pending().await
    }
}

/// A server's requests wait for a person, so those beyond the first sixteen at once are
/// refused on the spot: a server that sends them without end holds sixteen, not millions.
#[tokio::test]
async fn a_server_asking_more_than_sixteen_things_at_once_is_refused_the_rest() {
    let options = ClientOptions { handler: std::sync::Arc::new(Away), ..ClientOptions::default() };
    let (_client, mut peer) = handshake_with(options, "2025-06-18").await;
    for i in 0..20 {
        let ask = json!({"jsonrpc": "2.0", "id": i, "method": "elicitation/create",
            "params": {"message": "Who?", "requestedSchema": {"type": "object", "properties": {}}}});
        peer.outgoing.send(ask.to_string()).unwrap();
    }
    let mut refused = Vec::new();
    for _ in 0..4 {
        let reply = next(&mut peer).await;
        assert!(reply["error"]["message"].as_str().unwrap().contains("at most 16 requests"), "{reply}");
        refused.push(reply["id"].as_i64().unwrap());
    }
    assert_eq!(refused, [16, 17, 18, 19]);
    let more = tokio::time::timeout(Duration::from_millis(300), peer.incoming.recv()).await;
    assert!(more.is_err(), "the first sixteen are still being asked: {more:?}");
}
