//! An upstream's own questions while a call runs (`elicitation/create`, `sampling/createMessage`:
//! the fake's `ask` and `sample`) reach the client whose call caused them, and only that one;
//! a client that did not declare the capability, or one that cannot be asked mid-call
//! (2026-07-28), gets the upstream's question declined.

use http_body_util::BodyExt as _;
use mcp_gateway::HttpOptions;
use mcp_gateway::fake::FakeBackend;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::next_event;
use crate::*;

const VERSION: &str = "2025-11-25";

async fn gateway() -> Running {
    let backend = FakeBackend::builder().tool("a", "ask").tool("a", "sample").tool("b", "ask").build();
    start_over(backend, HttpOptions::default()).await
}

fn headers(session: &str) -> [(&str, &str); 4] {
    [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", VERSION),
    ]
}

fn call(id: u64, name: &str, arguments: Value) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {"name": name, "arguments": arguments}})
        .to_string()
}

/// Answers the gateway's request `asked` in `session` with `result`.
async fn answer(gw: &Running, session: &str, asked: &Value, result: Value) {
    let reply = json!({"jsonrpc": "2.0", "id": asked["id"], "result": result});
    assert_eq!(post_session(gw.addr, session, VERSION, &reply).await.status, 202);
}

#[tokio::test]
async fn a_session_client_gets_the_upstreams_question_and_its_answer_reaches_the_upstream() {
    let gw = gateway().await;
    let session = initialize(gw.addr, VERSION, json!({"elicitation": {}, "sampling": {}})).await;

    let hostile = "Your name?\u{1b}]0;owned\u{7}\u{202e}";
    let response = send(gw.addr, "POST", &headers(&session), &call(1, "a__ask", json!({"message": hostile}))).await;
    let mut body = response.into_body();
    let asked = next_event(&mut body).await;
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    assert_eq!(asked["params"]["message"], "Your name?]0;owned", "cleaned before it reaches the client");
    assert_eq!(asked["params"]["mode"], "form");
    assert_eq!(asked["params"]["requestedSchema"]["properties"]["name"]["type"], "string");
    answer(&gw, &session, &asked, json!({"action": "accept", "content": {"name": "Ann"}})).await;
    let done = next_event(&mut body).await;
    assert_eq!(done["id"], 1);
    let said: Value = serde_json::from_str(&text_of(&done["result"])).unwrap();
    assert_eq!(said, json!({"action": "accept", "content": {"name": "Ann"}}), "the upstream got the answer");

    let response = send(gw.addr, "POST", &headers(&session), &call(2, "a__sample", json!({"prompt": "Hi?"}))).await;
    let mut body = response.into_body();
    let asked = next_event(&mut body).await;
    assert_eq!(asked["method"], "sampling/createMessage", "{asked}");
    assert_eq!(asked["params"]["messages"][0]["content"]["text"], "Hi?");
    let sampled = json!({"role": "assistant", "content": {"type": "text", "text": "Hello"}, "model": "m"});
    answer(&gw, &session, &asked, sampled.clone()).await;
    let done = next_event(&mut body).await;
    assert_eq!(serde_json::from_str::<Value>(&text_of(&done["result"])).unwrap(), sampled);
    assert!(body.frame().await.is_none(), "the stream ends with the answer");
}

#[tokio::test]
async fn a_client_that_did_not_declare_it_gets_the_decline() {
    let gw = gateway().await;
    let session = initialize(gw.addr, VERSION, json!({})).await;
    let asked = post_session(gw.addr, &session, VERSION, &serde_json::from_str(&call(1, "a__ask", json!({}))).unwrap())
        .await
        .json();
    assert_eq!(text_of(&asked["result"]), r#"{"action":"decline"}"#, "{asked}");
    let sampled =
        post_session(gw.addr, &session, VERSION, &serde_json::from_str(&call(2, "a__sample", json!({}))).unwrap())
            .await
            .json();
    assert_eq!(sampled["result"]["isError"], true);
    assert!(text_of(&sampled["result"]).contains("did not declare sampling"), "{sampled}");

    // A 2026-07-28 client that declared elicitation cannot be asked mid-call: refused, saying why.
    let capabilities = json!({"elicitation": {"form": {}}, "sampling": {}});
    let params = json!({"name": "a__ask", "arguments": {}});
    let stateless = post_stateless(gw.addr, json!(3), "tools/call", params, capabilities).await.json();
    assert_eq!(stateless["result"]["isError"], true, "{stateless}");
    assert!(text_of(&stateless["result"]).contains("2026-07-28"), "{stateless}");
}

#[tokio::test]
async fn two_clients_calling_at_once_each_get_only_their_own_upstreams_question() {
    let gw = gateway().await;
    let one = initialize(gw.addr, VERSION, json!({"elicitation": {}})).await;
    let two = initialize(gw.addr, VERSION, json!({"elicitation": {}})).await;
    // Both ask before either answers; the same request id on both sides.
    let first = send(gw.addr, "POST", &headers(&one), &call(7, "a__ask", json!({"message": "for one"}))).await;
    let second = send(gw.addr, "POST", &headers(&two), &call(7, "b__ask", json!({"message": "for two"}))).await;
    let (mut first, mut second) = (first.into_body(), second.into_body());
    let asked_one = next_event(&mut first).await;
    let asked_two = next_event(&mut second).await;
    assert_eq!(asked_one["params"]["message"], "for one");
    assert_eq!(asked_two["params"]["message"], "for two");
    // The gateway's request ids are each session's own (they may be equal): answers go by session.
    answer(&gw, &two, &asked_two, json!({"action": "accept", "content": {"name": "Two"}})).await;
    answer(&gw, &one, &asked_one, json!({"action": "accept", "content": {"name": "One"}})).await;
    let done_one = next_event(&mut first).await;
    let done_two = next_event(&mut second).await;
    assert!(text_of(&done_one["result"]).contains(r#""name":"One""#), "{done_one}");
    assert!(text_of(&done_two["result"]).contains(r#""name":"Two""#), "{done_two}");
}
