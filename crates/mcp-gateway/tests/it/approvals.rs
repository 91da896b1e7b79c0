//! Approvals of `confirm` tools, for each kind of client: sealed `input_required` rounds
//! (2026-07-28), `elicitation/create` while the call waits (sessions), and a refusal that says
//! what to configure (clients that cannot be asked). Denied tools are neither listed nor callable.

use http_body_util::BodyExt as _;
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::next_event;
use crate::*;

const ELICITS: fn() -> Value = || json!({"elicitation": {"form": {}}});

fn write_call(path: &str) -> Value {
    json!({"name": "files__write_file", "arguments": {"path": path, "text": "hello"}})
}

/// The first attempt: `input_required` with the form and a sealed state.
async fn ask(gw: &Running, path: &str) -> (Value, String) {
    let answer = post_stateless(gw.addr, json!(1), "tools/call", write_call(path), ELICITS()).await;
    assert_eq!(answer.status, 200);
    let result = answer.json()["result"].clone();
    assert_eq!(result["resultType"], "input_required", "{result}");
    let state = result["requestState"].as_str().unwrap().to_owned();
    (result, state)
}

/// The retry with `decision` and `state`.
async fn retry(gw: &Running, path: &str, decision: &str, state: &str) -> Value {
    let mut params = write_call(path);
    params["requestState"] = json!(state);
    params["inputResponses"] = json!({"approval": {"action": "accept", "content": {"decision": decision}}});
    post_stateless(gw.addr, json!(2), "tools/call", params, ELICITS()).await.json()
}

#[tokio::test]
async fn a_stateless_client_is_asked_with_input_required_and_its_answer_is_accepted_once() {
    let gw = start().await;
    let (result, state) = ask(&gw, "a.txt").await;
    let request = &result["inputRequests"]["approval"];
    assert_eq!(request["method"], "elicitation/create");
    assert_eq!(request["params"]["mode"], "form");
    let message = request["params"]["message"].as_str().unwrap();
    assert!(message.starts_with(r#"Allow files__write_file with {"path":"a.txt","text":"hello"}?"#), "{message}");
    assert_eq!(
        request["params"]["requestedSchema"]["properties"]["decision"]["oneOf"],
        json!([{"const": "no", "title": "No"}, {"const": "yes", "title": "Yes"}, {"const": "always", "title": "Yes for this client"}])
    );
    assert!(gw.backend.calls().is_empty(), "nothing runs before the answer");

    let done = retry(&gw, "a.txt", "yes", &state).await;
    assert_eq!(done["result"]["resultType"], "complete", "{done}");
    assert!(text_of(&done["result"]).contains(r#""tool":"write_file""#));
    assert_eq!(gw.backend.calls().len(), 1);

    // Replayed: refused, and nothing more runs.
    let replayed = retry(&gw, "a.txt", "yes", &state).await;
    assert_eq!(replayed["error"]["code"], -32602, "{replayed}");
    assert!(replayed["error"]["message"].as_str().unwrap().contains("used already"), "{replayed}");
    assert_eq!(gw.backend.calls().len(), 1);
}

#[tokio::test]
async fn an_altered_an_expired_or_a_misapplied_state_is_refused() {
    let gw = start().await;
    // Altered: one character of the sealed state changed.
    let (_, state) = ask(&gw, "b.txt").await;
    let mut altered: Vec<char> = state.chars().collect();
    let i = altered.len() / 2;
    altered[i] = if altered[i] == 'A' { 'B' } else { 'A' };
    let altered: String = altered.into_iter().collect();
    let refused = retry(&gw, "b.txt", "yes", &altered).await;
    assert!(refused["error"]["message"].as_str().unwrap().contains("altered"), "{refused}");

    // For other arguments than it was issued for.
    let refused = retry(&gw, "c.txt", "yes", &state).await;
    assert!(refused["error"]["message"].as_str().unwrap().contains("other arguments"), "{refused}");

    // Expired: the clock moves past its lifetime (five minutes).
    let (_, state) = ask(&gw, "d.txt").await;
    gw.clock.advance(5 * 60 * 1000 + 1000);
    let refused = retry(&gw, "d.txt", "yes", &state).await;
    assert!(refused["error"]["message"].as_str().unwrap().contains("expired"), "{refused}");

    // Not one this gateway made.
    let refused = retry(&gw, "d.txt", "yes", "not-a-state").await;
    assert!(refused["error"]["message"].as_str().unwrap().contains("not one this gateway issued"), "{refused}");
    assert!(gw.backend.calls().is_empty(), "none of them ran");

    // Declined: not run, and said so.
    let (_, state) = ask(&gw, "e.txt").await;
    let declined = retry(&gw, "e.txt", "no", &state).await;
    assert_eq!(declined["result"]["isError"], true);
    assert!(text_of(&declined["result"]).contains("refused by the user"), "{declined}");
    // A retry without the answer is asked again.
    let (_, state) = ask(&gw, "f.txt").await;
    let mut params = write_call("f.txt");
    params["requestState"] = json!(state);
    let again = post_stateless(gw.addr, json!(3), "tools/call", params, ELICITS()).await.json();
    assert_eq!(again["result"]["resultType"], "input_required");
    assert!(gw.backend.calls().is_empty());
}

#[tokio::test]
async fn yes_for_this_client_is_remembered_for_that_client_only() {
    let gw = start().await;
    let (_, state) = ask(&gw, "a.txt").await;
    let done = retry(&gw, "a.txt", "always", &state).await;
    assert_eq!(done["result"]["resultType"], "complete");
    // The same client (caller and client name) is not asked again.
    let direct = post_stateless(gw.addr, json!(9), "tools/call", write_call("other.txt"), ELICITS()).await.json();
    assert_eq!(direct["result"]["resultType"], "complete", "{direct}");
    assert_eq!(gw.backend.calls().len(), 2);
    // A session client is another client: it is asked.
    let session = initialize(gw.addr, "2025-03-26", json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": write_call("x")});
    let refused = post_session(gw.addr, &session, "2025-03-26", &call).await.json();
    assert_eq!(refused["result"]["isError"], true);
}

#[tokio::test]
async fn clients_that_cannot_be_asked_are_told_the_rule_and_the_configuration_that_would_allow_it() {
    let gw = start().await;
    let expected_config = "[[policy.rules]]\nserver = \"files\"\ntool = \"write_file\"\ndecision = \"allow\"";
    // A stateless client without elicitation.
    let answer = post_stateless(gw.addr, json!(1), "tools/call", write_call("a"), json!({})).await.json();
    let text = text_of(&answer["result"]);
    assert_eq!(answer["result"]["isError"], true);
    assert!(text.contains("needs confirmation (confirm by rule 0 (server \"files\", tool \"write_file\"))"), "{text}");
    assert!(text.contains(expected_config), "{text}");
    // Session clients: 2025-03-26 has no elicitation; 2025-06-18 without the capability.
    for (version, capabilities) in [("2025-03-26", json!({"elicitation": {}})), ("2025-06-18", json!({}))] {
        let session = initialize(gw.addr, version, capabilities).await;
        let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": write_call("a")});
        let answer = post_session(gw.addr, &session, version, &call).await.json();
        assert_eq!(answer["result"]["isError"], true, "{version}");
        assert!(text_of(&answer["result"]).contains(expected_config), "{version}: {answer}");
    }
    assert!(gw.backend.calls().is_empty());
}

#[tokio::test]
async fn a_session_client_is_asked_with_elicitation_create_while_the_call_waits() {
    let gw = start_with(json_answers()).await;
    let session = initialize(gw.addr, "2025-06-18", json!({"elicitation": {}})).await;
    let call = |id: u64, path: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": write_call(path)}).to_string()
    };
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    for (id, decision, runs) in [(1u64, "no", false), (2, "always", true)] {
        let response = send(gw.addr, "POST", &headers, &call(id, "a.txt")).await;
        assert_eq!(response.headers()["content-type"], "text/event-stream");
        let mut body = response.into_body();
        let asked = next_event(&mut body).await;
        assert_eq!(asked["method"], "elicitation/create");
        let schema = &asked["params"]["requestedSchema"]["properties"]["decision"];
        assert_eq!(schema["enum"], json!(["no", "yes", "always"]), "2025-06-18's titled choice");
        assert_eq!(schema["enumNames"], json!(["No", "Yes", "Yes for this client"]));
        let answer = json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"decision": decision}}});
        assert_eq!(post_session(gw.addr, &session, "2025-06-18", &answer).await.status, 202);
        let done = next_event(&mut body).await;
        assert_eq!(done["id"], id);
        assert_eq!(done["result"].get("isError").is_none(), runs, "{decision}: {done}");
        assert!(body.frame().await.is_none(), "the stream ends with the answer");
    }
    assert_eq!(gw.backend.calls().len(), 1);
    // "Yes for this client": the next call of the tool runs without asking, as plain JSON.
    let answer = post_session(gw.addr, &session, "2025-06-18", &serde_json::from_str(&call(3, "b.txt")).unwrap()).await;
    assert_eq!(answer.headers["content-type"], "application/json");
    assert!(answer.json()["result"].get("isError").is_none());
    // Another session is another client: asked again.
    let other = initialize(gw.addr, "2025-06-18", json!({"elicitation": {}})).await;
    let other_headers = [
        ("content-type", "application/json"),
        ("mcp-session-id", other.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let response = send(gw.addr, "POST", &other_headers, &call(1, "c.txt")).await;
    let mut body = response.into_body();
    assert_eq!(next_event(&mut body).await["method"], "elicitation/create");
    assert_eq!(gw.backend.calls().len(), 2);
}

#[tokio::test]
async fn denied_tools_are_neither_listed_nor_callable() {
    let gw = start().await;
    let list = post_stateless(gw.addr, json!(1), "tools/list", json!({}), json!({})).await.json();
    assert!(!list.to_string().contains("files__rm"), "{list}");
    let denied =
        post_stateless(gw.addr, json!(2), "tools/call", json!({"name": "files__rm", "arguments": {}}), json!({}))
            .await
            .json();
    let unknown =
        post_stateless(gw.addr, json!(2), "tools/call", json!({"name": "files__nope", "arguments": {}}), json!({}))
            .await
            .json();
    assert_eq!(denied["error"]["code"], -32602);
    assert_eq!(denied["error"]["message"], "Unknown tool: files__rm");
    assert_eq!(
        unknown["error"]["message"], "Unknown tool: files__nope",
        "a denied tool is answered like an unknown one"
    );
    let session = initialize(gw.addr, "2025-11-25", json!({})).await;
    let call =
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "files__rm", "arguments": {}}});
    assert_eq!(
        post_session(gw.addr, &session, "2025-11-25", &call).await.json()["error"]["message"],
        "Unknown tool: files__rm"
    );
    assert!(gw.backend.calls().is_empty());
}

/// A client that accepts only JSON gets only JSON: no progress before the answer, and it is
/// not asked (the call needing confirmation is refused, naming the rule), though it declared
/// elicitation.
#[tokio::test]
async fn a_client_that_accepts_only_json_is_sent_no_stream() {
    let gw = start().await;
    let session = initialize(gw.addr, "2025-06-18", json!({"elicitation": {}})).await;
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": write_call("a.txt")});
    let answer = exchange(gw.addr, "POST", &headers, &call.to_string()).await;
    assert_eq!(answer.headers["content-type"], "application/json", "{answer:?}");
    let result = &answer.json()["result"];
    assert_eq!(result["isError"], true, "{result}");
    assert!(result.to_string().contains("needs confirmation"), "{result}");
    assert!(result.to_string().contains("accepts only JSON"), "{result}");
    assert!(gw.backend.calls().is_empty());

    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo__progress", "arguments": {}, "_meta": {"progressToken": "mine"}}});
    let answer = exchange(gw.addr, "POST", &headers, &call.to_string()).await;
    assert_eq!(answer.headers["content-type"], "application/json", "{answer:?}");
    assert_eq!(answer.json()["id"], 2);
}
