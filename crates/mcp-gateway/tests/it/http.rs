//! The HTTP front: handshakes of every revision, the header checks, DNS rebinding, the bind
//! rule, sessions, isolation of clients that reuse request ids, and inputs that must not hurt.

use std::sync::Arc;
use std::time::Duration;

use mcp_gateway::{BearerTokens, HttpOptions, HttpServer, ServeError};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::*;

fn names(list: &Value) -> Vec<String> {
    list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
}

const TOOLS: [&str; 5] = ["echo__echo", "echo__slow", "echo__progress", "files__read_file", "files__write_file"];

#[tokio::test]
async fn each_session_revision_handshakes_lists_and_calls() {
    let gw = start_with(json_answers()).await;
    for version in ["2025-03-26", "2025-06-18", "2025-11-25"] {
        let session = initialize(gw.addr, version, json!({})).await;
        let list =
            post_session(gw.addr, &session, version, &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
        assert_eq!(list.status, 200);
        let mut listed = names(&list.json());
        listed.sort();
        let mut expected = TOOLS.map(str::to_owned).to_vec();
        expected.sort();
        assert_eq!(listed, expected, "{version}: the denied files__rm is not listed");
        let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "echo__echo", "arguments": {"said": version}}});
        let answer = post_session(gw.addr, &session, version, &call).await;
        assert_eq!(answer.headers["content-type"], "application/json", "a plain call is answered with JSON");
        let result = answer.json();
        assert_eq!(result["id"], 2);
        let said: Value = serde_json::from_str(&text_of(&result["result"])).unwrap();
        assert_eq!(said, json!({"server": "echo", "tool": "echo", "arguments": {"said": version}}));
        assert!(result["result"].get("resultType").is_none(), "session answers have no resultType");
    }
}

#[tokio::test]
async fn initialize_names_the_gateway_and_the_upstreams_instructions() {
    let gw = start().await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2024-11-05", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}});
    let answer = exchange(gw.addr, "POST", &[("content-type", "application/json")], &body.to_string()).await;
    let result = &answer.json()["result"];
    assert_eq!(result["protocolVersion"], "2025-11-25", "an unsupported revision gets the newest");
    assert_eq!(result["serverInfo"]["name"], "mcp-harness");
    assert_eq!(result["capabilities"]["tools"], json!({"listChanged": true}));
    let instructions = result["instructions"].as_str().unwrap();
    assert!(instructions.contains("[from MCP server \"files\"] Read before you write."), "{instructions}");
}

#[tokio::test]
async fn the_stateless_revision_discovers_lists_and_calls() {
    let gw = start().await;
    let discover = post_stateless(gw.addr, json!("d"), "server/discover", json!({}), json!({})).await;
    assert_eq!(discover.status, 200);
    let result = &discover.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert_eq!(result["supportedVersions"], json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]));
    assert_eq!(result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "mcp-harness");
    assert!(discover.session().is_none(), "no sessions in the stateless revision");

    let list = post_stateless(gw.addr, json!(1), "tools/list", json!({}), json!({})).await;
    assert_eq!(list.json()["result"]["resultType"], "complete");
    assert_eq!(names(&list.json()).len(), TOOLS.len());

    let call = post_stateless(
        gw.addr,
        json!(2),
        "tools/call",
        json!({"name": "files__read_file", "arguments": {"path": "a"}}),
        json!({}),
    )
    .await;
    assert_eq!(call.status, 200);
    let result = &call.json()["result"];
    assert_eq!(result["resultType"], "complete");
    assert!(text_of(result).contains(r#""tool":"read_file""#));

    // A revision the gateway does not speak: 400 with the versions it does.
    let mut params = json!({});
    params["_meta"] = envelope(json!({}));
    params["_meta"]["io.modelcontextprotocol/protocolVersion"] = json!("2099-01-01");
    let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": params});
    let headers =
        [("content-type", "application/json"), ("mcp-protocol-version", "2099-01-01"), ("mcp-method", "tools/list")];
    let answer = exchange(gw.addr, "POST", &headers, &body.to_string()).await;
    assert_eq!(answer.status, 400);
    assert_eq!(answer.json()["error"]["code"], -32022);
    assert_eq!(answer.json()["error"]["data"]["requested"], "2099-01-01");

    // A method it does not offer: 404 with -32601.
    let answer = post_stateless(gw.addr, json!(4), "tasks/list", json!({}), json!({})).await;
    assert_eq!((answer.status, answer.json()["error"]["code"].clone()), (404, json!(-32601)));
}

#[tokio::test]
async fn headers_that_disagree_with_the_body_get_400() {
    let gw = start().await;
    let mut params = json!({"name": "echo__echo", "arguments": {}});
    params["_meta"] = envelope(json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": params}).to_string();
    let base = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    let cases: [(&[(&str, &str)], &str); 6] = [
        (&[("mcp-protocol-version", STATELESS), ("mcp-method", "tools/call"), ("mcp-name", "files__rm")], "Mcp-Name"),
        (
            &[("mcp-protocol-version", STATELESS), ("mcp-method", "tools/list"), ("mcp-name", "echo__echo")],
            "Mcp-Method",
        ),
        (
            &[("mcp-protocol-version", "2025-11-25"), ("mcp-method", "tools/call"), ("mcp-name", "echo__echo")],
            "MCP-Protocol-Version",
        ),
        (&[("mcp-method", "tools/call"), ("mcp-name", "echo__echo")], "MCP-Protocol-Version"),
        (&[("mcp-protocol-version", STATELESS), ("mcp-name", "echo__echo")], "Mcp-Method"),
        (&[("mcp-protocol-version", STATELESS), ("mcp-method", "tools/call")], "Mcp-Name"),
    ];
    for (extra, names) in cases {
        let headers: Vec<(&str, &str)> = base.iter().chain(extra.iter()).copied().collect();
        let answer = exchange(gw.addr, "POST", &headers, &body).await;
        assert_eq!(answer.status, 400, "{extra:?}: {answer:?}");
        let error = &answer.json()["error"];
        assert_eq!(error["code"], -32020, "{extra:?}");
        assert_eq!(answer.json()["id"], 7);
        assert!(error["message"].as_str().unwrap().contains(names), "{error}");
    }
    assert!(gw.backend.calls().is_empty(), "nothing was called");

    // A session's headers are checked where present.
    let session = initialize(gw.addr, "2025-06-18", json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "echo__echo"}});
    let headers = [
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
        ("mcp-name", "files__read_file"),
    ];
    let answer = exchange(gw.addr, "POST", &headers, &call.to_string()).await;
    assert_eq!((answer.status, answer.json()["error"]["code"].clone()), (400, json!(-32020)));
    let headers = [
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2099-01-01"),
    ];
    assert_eq!(exchange(gw.addr, "POST", &headers, &call.to_string()).await.status, 400);
    // Another revision the gateway speaks is accepted on a session (as the TypeScript SDK's
    // servers accept it, and the conformance suite's raw requests send one).
    let headers = [
        ("content-type", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-03-26"),
    ];
    assert_eq!(exchange(gw.addr, "POST", &headers, &call.to_string()).await.status, 200);
}

#[tokio::test]
async fn host_and_origin_rebinding_is_refused_with_403() {
    let gw = start().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}})
    .to_string();
    let port = gw.addr.port().to_string();
    let evil_host = "evil.example.com".to_owned();
    let local = format!("127.0.0.1:{port}");
    let cases = [
        (evil_host.clone(), Some(format!("http://{evil_host}")), 403),
        (format!("evil.example.com:{port}"), None, 403),
        (local.clone(), Some("http://evil.example.com".to_owned()), 403),
        (local.clone(), Some("null".to_owned()), 403),
        (local.clone(), Some(format!("http://{local}")), 200),
        (format!("localhost:{port}"), Some(format!("http://localhost:{port}")), 200),
        (format!("[::1]:{port}"), None, 200),
        (local.clone(), None, 200),
    ];
    for (host, origin, status) in cases {
        let mut headers = vec![
            ("content-type", "application/json"),
            ("accept", "application/json, text/event-stream"),
            ("host", host.as_str()),
        ];
        if let Some(origin) = &origin {
            headers.push(("origin", origin.as_str()));
        }
        let answer = exchange(gw.addr, "POST", &headers, &body).await;
        assert_eq!(answer.status, status, "Host {host}, Origin {origin:?}: {}", answer.body);
        if status == 403 {
            assert!(answer.session().is_none());
            assert_eq!(answer.json()["error"]["code"], -32600);
        }
    }
}

#[tokio::test]
async fn a_non_loopback_address_needs_inbound_authentication() {
    let gateway = || mcp_gateway::Gateway::new(Arc::new(backend()), mcp_gateway::GatewayOptions::default()).unwrap();
    let addr = "0.0.0.0:0".parse().unwrap();
    let refused = HttpServer::bind(gateway(), HttpOptions { addr, ..HttpOptions::default() }).await.unwrap_err();
    assert!(matches!(refused, ServeError::Unprotected { .. }));
    let said = refused.to_string();
    assert!(said.contains("refusing to listen on 0.0.0.0:0 without inbound authentication"), "{said}");
    assert!(said.contains("loopback"), "{said}");

    let tokens = BearerTokens::new().token("let-me-in", "alice");
    let options = HttpOptions { addr, auth: Some(Arc::new(tokens)), ..HttpOptions::default() };
    let server = HttpServer::bind(gateway(), options).await.expect("with authentication it listens");
    let port = server.local_addr().port();
    tokio::spawn(server.run(std::future::pending()));
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], port));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {"_meta": envelope(json!({}))}})
        .to_string();
    let headers =
        [("content-type", "application/json"), ("mcp-protocol-version", STATELESS), ("mcp-method", "tools/list")];
    let answer = exchange(addr, "POST", &headers, &body).await;
    assert_eq!(answer.status, 401);
    assert_eq!(answer.headers["www-authenticate"], "Bearer");
    let mut with_token = headers.to_vec();
    with_token.push(("authorization", "Bearer wrong"));
    assert_eq!(exchange(addr, "POST", &with_token, &body).await.status, 401);
    with_token.pop();
    with_token.push(("authorization", "Bearer let-me-in"));
    let answer = exchange(addr, "POST", &with_token, &body).await;
    assert_eq!(answer.status, 200, "{answer:?}");
}

/// Two clients, each with many calls in flight whose ids are the other's ids too: every
/// answer goes to the client that asked, with that client's arguments.
#[tokio::test]
async fn clients_that_reuse_request_ids_never_see_each_others_answers() {
    let gw = start().await;
    let a = initialize(gw.addr, "2025-11-25", json!({})).await;
    let b = initialize(gw.addr, "2025-11-25", json!({})).await;
    let mut calls = tokio::task::JoinSet::new();
    for id in 0..60 {
        for (client, session) in [("a", a.clone()), ("b", b.clone())] {
            let addr = gw.addr;
            calls.spawn(async move {
                let ms = (id * 7) % 20;
                let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "echo__slow", "arguments": {"client": client, "n": id, "ms": ms}}});
                let answer = post_session(addr, &session, "2025-11-25", &call).await.json();
                (client, id, answer)
            });
        }
        // And stateless clients, whose ids are the same again.
        let addr = gw.addr;
        calls.spawn(async move {
            let params = json!({"name": "echo__slow", "arguments": {"client": "s", "n": id, "ms": 3}});
            let answer = post_stateless(addr, json!(id), "tools/call", params, json!({})).await.json();
            ("s", id, answer)
        });
    }
    let mut answered = 0;
    while let Some(done) = calls.join_next().await {
        let (client, id, answer) = done.unwrap();
        assert_eq!(answer["id"], id);
        let said: Value = serde_json::from_str(&text_of(&answer["result"])).unwrap();
        assert_eq!(said["arguments"]["client"], client, "{answer}");
        assert_eq!(said["arguments"]["n"], id);
        answered += 1;
    }
    assert_eq!(answered, 180);
}

#[tokio::test]
async fn sessions_end_and_unknown_ones_are_not_found() {
    let gw = start().await;
    let session = initialize(gw.addr, "2025-06-18", json!({})).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    assert_eq!(post_session(gw.addr, &session, "2025-06-18", &ping).await.json()["result"], json!({}));
    let made_up = "0123456789abcdef0123456789abcdef";
    assert_eq!(post_session(gw.addr, made_up, "2025-06-18", &ping).await.status, 404);
    assert!(session.len() >= 32 && session.bytes().all(|b| b.is_ascii_hexdigit()), "{session}");
    let deleted = exchange(gw.addr, "DELETE", &[("mcp-session-id", session.as_str())], "").await;
    assert_eq!(deleted.status, 200);
    assert_eq!(post_session(gw.addr, &session, "2025-06-18", &ping).await.status, 404);
    // Without a session or an envelope there is nothing to serve.
    let answer = exchange(gw.addr, "POST", &[("content-type", "application/json")], &ping.to_string()).await;
    assert_eq!(answer.status, 400);
    // GET without a session (the stateless revision has no GET stream).
    assert_eq!(exchange(gw.addr, "GET", &[("accept", "text/event-stream")], "").await.status, 405);
    assert_eq!(exchange(gw.addr, "PUT", &[], "").await.status, 405);
}

#[tokio::test]
async fn inputs_that_must_not_hurt() {
    let gw = start_with(HttpOptions { max_body_bytes: 1024, ..HttpOptions::default() }).await;
    let json_headers = [("content-type", "application/json")];
    let answer = exchange(gw.addr, "POST", &json_headers, "{not json").await;
    assert_eq!((answer.status, answer.json()["error"]["code"].clone()), (400, json!(-32700)));
    let answer = exchange(gw.addr, "POST", &json_headers, "[1,2]").await;
    assert_eq!(answer.status, 400);
    let answer = exchange(gw.addr, "POST", &json_headers, &"x".repeat(4096)).await;
    assert_eq!(answer.status, 413);
    let answer = exchange(gw.addr, "POST", &[("content-type", "text/plain")], "{}").await;
    assert_eq!(answer.status, 415);
    let answer =
        exchange(gw.addr, "POST", &[("content-type", "application/json"), ("accept", "text/html")], "{}").await;
    assert_eq!(answer.status, 406);
    let wrong_path = {
        let stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let (mut sender, connection) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await.unwrap();
        tokio::spawn(connection);
        let request = hyper::Request::builder()
            .uri("/other")
            .header("host", gw.addr.to_string())
            .body(http_body_util::Empty::<bytes::Bytes>::new())
            .unwrap();
        sender.send_request(request).await.unwrap().status()
    };
    assert_eq!(wrong_path, 404);
    // Bad params: an invalid-params answer, not a crash.
    let bad = post_stateless(gw.addr, json!(1), "tools/call", json!({"arguments": 5}), json!({})).await;
    assert_eq!(bad.json()["error"]["code"], -32602);
    // A session header with bytes that are not text.
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let answer =
        exchange(gw.addr, "POST", &[("content-type", "application/json"), ("mcp-session-id", "../../x y")], ping).await;
    assert_eq!(answer.status, 404);
    // Still serving.
    let list = post_stateless(gw.addr, json!(2), "tools/list", json!({}), json!({})).await;
    assert_eq!(list.status, 200);
}

#[tokio::test]
async fn a_session_stream_receives_list_changed_and_stale_calls_are_refused() {
    let gw = start().await;
    let session = initialize(gw.addr, "2025-11-25", json!({})).await;
    let list =
        post_session(gw.addr, &session, "2025-11-25", &json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}))
            .await;
    assert!(names(&list.json()).contains(&"echo__echo".to_owned()));
    let stream = send(
        gw.addr,
        "GET",
        &[
            ("accept", "text/event-stream"),
            ("mcp-session-id", session.as_str()),
            ("mcp-protocol-version", "2025-11-25"),
        ],
        "",
    )
    .await;
    assert_eq!(stream.status(), 200);
    let second =
        exchange(gw.addr, "GET", &[("accept", "text/event-stream"), ("mcp-session-id", session.as_str())], "").await;
    assert_eq!(second.status, 409, "one stream per session");
    let mut body = stream.into_body();

    // The echo upstream's tools change: the client hears of it.
    gw.backend.set_tools("echo", &["echo", "echo2"]);
    let line = next_event(&mut body).await;
    assert_eq!(line["method"], "notifications/tools/list_changed");

    // A call prepared against the listing it saw is refused, never sent, and says why.
    let call =
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "echo__echo", "arguments": {}}});
    let answer = post_session(gw.addr, &session, "2025-11-25", &call).await.json();
    assert_eq!(answer["result"]["isError"], true);
    assert!(text_of(&answer["result"]).contains("changed after you were shown them"), "{answer}");
    assert!(gw.backend.calls().is_empty());
    assert_eq!(next_event(&mut body).await["method"], "notifications/tools/list_changed");
    // Listed again, it goes through.
    post_session(gw.addr, &session, "2025-11-25", &json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list"})).await;
    let answer = post_session(gw.addr, &session, "2025-11-25", &call).await.json();
    assert_eq!(answer["result"].get("isError"), None, "{answer}");
    assert_eq!(gw.backend.calls().len(), 1);
}

/// The next SSE event's message on a long-lived stream (keep-alive comments skipped).
pub async fn next_event(body: &mut hyper::body::Incoming) -> Value {
    use http_body_util::BodyExt as _;
    let mut text = String::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect("an event in time");
        let frame = frame.expect("the stream is open").unwrap();
        if let Ok(data) = frame.into_data() {
            text.push_str(std::str::from_utf8(&data).unwrap());
        }
        if let Some(message) = sse_messages(&text).into_iter().next() {
            return message;
        }
    }
}

#[tokio::test]
async fn progress_makes_the_answer_a_stream() {
    let gw = start().await;
    let session = initialize(gw.addr, "2025-11-25", json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
        "params": {"name": "echo__progress", "arguments": {}, "_meta": {"progressToken": "mine"}}});
    let answer = post_session(gw.addr, &session, "2025-11-25", &call).await;
    assert_eq!(answer.headers["content-type"], "text/event-stream");
    let messages = answer.messages();
    assert_eq!(messages.len(), 3, "{messages:?}");
    assert_eq!(messages[0]["method"], "notifications/progress");
    assert_eq!(messages[0]["params"]["progressToken"], "mine");
    assert_eq!(messages[1]["params"]["progress"], 2);
    assert_eq!(messages[2]["id"], 5);
    assert!(text_of(&messages[2]["result"]).contains("progress"));
}

#[tokio::test]
async fn subscriptions_listen_streams_changes_to_stateless_clients() {
    let gw = start().await;
    let mut params = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": false}});
    params["_meta"] = envelope(json!({}));
    let body = json!({"jsonrpc": "2.0", "id": "sub-1", "method": "subscriptions/listen", "params": params});
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", STATELESS),
        ("mcp-method", "subscriptions/listen"),
    ];
    let response = send(gw.addr, "POST", &headers, &body.to_string()).await;
    assert_eq!(response.status(), 200);
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let ack = next_event(&mut body).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}));
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "sub-1");
    gw.backend.set_tools("files", &["read_file"]);
    let changed = next_event(&mut body).await;
    assert_eq!(changed["method"], "notifications/tools/list_changed");
    assert_eq!(changed["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], "sub-1");
}

#[tokio::test]
async fn resources_prompts_and_completions_are_routed() {
    use mcp_gateway::ServerContent;
    let content = |uri: &str, prompt: &str| -> ServerContent {
        ServerContent {
            resources: vec![serde_json::from_value(json!({"uri": uri, "name": uri})).unwrap()],
            templates: vec![],
            prompts: vec![serde_json::from_value(json!({"name": prompt})).unwrap()],
            completions: true,
        }
    };
    let backend = mcp_gateway::fake::FakeBackend::builder()
        .tool("a", "t")
        .content("a", content("file:///shared", "greet"))
        .content("b", content("file:///shared", "greet"))
        .build();
    let gateway = mcp_gateway::Gateway::new(Arc::new(backend), mcp_gateway::GatewayOptions::default()).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending()));

    let list = post_stateless(addr, json!(1), "resources/list", json!({}), json!({})).await.json();
    let uris: Vec<&str> =
        list["result"]["resources"].as_array().unwrap().iter().map(|r| r["uri"].as_str().unwrap()).collect();
    assert_eq!(uris, ["mcp-gateway://a/file:///shared", "mcp-gateway://b/file:///shared"]);
    let read =
        post_stateless(addr, json!(2), "resources/read", json!({"uri": "mcp-gateway://b/file:///shared"}), json!({}))
            .await
            .json();
    assert_eq!(read["result"]["contents"][0]["text"], "b says file:///shared");
    assert_eq!(read["result"]["contents"][0]["uri"], "mcp-gateway://b/file:///shared");
    let missing =
        post_stateless(addr, json!(3), "resources/read", json!({"uri": "file:///shared"}), json!({})).await.json();
    assert_eq!(missing["error"]["code"], -32002, "a shared URI is never guessed");

    let prompts = post_stateless(addr, json!(4), "prompts/list", json!({}), json!({})).await.json();
    assert_eq!(prompts["result"]["prompts"], json!([{"name": "a__greet"}, {"name": "b__greet"}]));
    let got =
        post_stateless(addr, json!(5), "prompts/get", json!({"name": "b__greet", "arguments": {"x": "1"}}), json!({}))
            .await
            .json();
    assert_eq!(got["result"]["messages"][0]["content"]["text"], "b/greet with {\"x\":\"1\"}");
    let completed = post_stateless(
        addr,
        json!(6),
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "a__greet"}, "argument": {"name": "x", "value": "q"}}),
        json!({}),
    )
    .await
    .json();
    assert_eq!(completed["result"]["completion"]["values"], json!(["a:q"]));
}

#[tokio::test]
async fn deleting_a_session_ends_its_stream() {
    use http_body_util::BodyExt as _;
    let gw = start().await;
    let session = initialize(gw.addr, "2025-11-25", json!({})).await;
    let stream =
        send(gw.addr, "GET", &[("accept", "text/event-stream"), ("mcp-session-id", session.as_str())], "").await;
    assert_eq!(stream.status(), 200);
    let mut body = stream.into_body();
    assert_eq!(exchange(gw.addr, "DELETE", &[("mcp-session-id", session.as_str())], "").await.status, 200);
    let end = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect("the stream ends in time");
    assert!(end.is_none(), "{end:?}");
}

/// A tool that asks for an argument to be mirrored into `Mcp-Param-Region`: a stateless call
/// must carry the header, equal to the argument.
#[tokio::test]
async fn mirrored_tool_arguments_are_checked() {
    let schema = json!({"type": "object", "properties": {"region": {"type": "string", "x-mcp-header": "Region"}}});
    let backend = mcp_gateway::fake::FakeBackend::builder().tool_with_schema("db", "query", schema).build();
    let gateway = mcp_gateway::Gateway::new(Arc::new(backend), mcp_gateway::GatewayOptions::default()).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending()));
    let mut params = json!({"name": "db__query", "arguments": {"region": "eu-west"}});
    params["_meta"] = envelope(json!({}));
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}).to_string();
    let base = [
        ("content-type", "application/json"),
        ("mcp-protocol-version", STATELESS),
        ("mcp-method", "tools/call"),
        ("mcp-name", "db__query"),
    ];
    for (region, status) in [(None, 400), (Some("us-east"), 400), (Some("eu-west"), 200)] {
        let mut headers = base.to_vec();
        if let Some(region) = region {
            headers.push(("mcp-param-region", region));
        }
        let answer = exchange(addr, "POST", &headers, &body).await;
        assert_eq!(answer.status, status, "{region:?}: {}", answer.body);
        if status == 400 {
            assert_eq!(answer.json()["error"]["code"], -32020);
        }
    }
}

/// A built-in tool of the host's pool (tool search, code mode) is listed and run by the
/// gateway's gate like any other.
#[tokio::test]
async fn built_in_tools_of_the_pool_run_through_the_gate() {
    struct WhoAmI;
    #[async_trait::async_trait]
    impl agent_loop::BuiltinTool for WhoAmI {
        fn spec(&self) -> tool_pool::BuiltinTool {
            tool_pool::BuiltinTool {
                name: "whoami".into(),
                description: "Says who.".into(),
                input_schema: json!({"type": "object", "properties": {"n": {"type": "integer"}}}),
            }
        }
        async fn call(&self, input: &Value) -> Result<String, String> {
            Ok(format!("the gateway, asked {}", input["n"]))
        }
    }
    let backend = mcp_gateway::fake::FakeBackend::builder().builtin(Arc::new(WhoAmI)).tool("a", "t").build();
    let gateway = mcp_gateway::Gateway::new(Arc::new(backend), mcp_gateway::GatewayOptions::default()).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending()));
    let list = post_stateless(addr, json!(1), "tools/list", json!({}), json!({})).await.json();
    assert_eq!(names(&list), ["whoami", "a__t"]);
    let call =
        post_stateless(addr, json!(2), "tools/call", json!({"name": "whoami", "arguments": {"n": 3}}), json!({})).await;
    assert_eq!(text_of(&call.json()["result"]), "the gateway, asked 3");
    let bad =
        post_stateless(addr, json!(3), "tools/call", json!({"name": "whoami", "arguments": {"n": "x"}}), json!({}))
            .await;
    assert_eq!(bad.json()["result"]["isError"], true, "arguments are checked against the schema");
}

/// A session store that cannot be reached.
#[derive(Debug)]
struct Down;

#[async_trait::async_trait]
impl mcp_gateway::SessionStore for Down {
    async fn create(&self, _: &str, _: &mcp_gateway::SessionRecord) -> Result<bool, mcp_gateway::StoreError> {
        Err(mcp_gateway::StoreError::Unavailable("connection refused".into()))
    }
    async fn load(&self, _: &str) -> Result<Option<mcp_gateway::SessionRecord>, mcp_gateway::StoreError> {
        Err(mcp_gateway::StoreError::Unavailable("connection refused".into()))
    }
    async fn touch(&self, _: &str) -> Result<bool, mcp_gateway::StoreError> {
        Err(mcp_gateway::StoreError::Unavailable("connection refused".into()))
    }
    async fn update(&self, _: &str, _: &mcp_gateway::SessionChange) -> Result<bool, mcp_gateway::StoreError> {
        Err(mcp_gateway::StoreError::Unavailable("connection refused".into()))
    }
    async fn remove(&self, _: &str) -> Result<(), mcp_gateway::StoreError> {
        Err(mcp_gateway::StoreError::Unavailable("connection refused".into()))
    }
}

#[tokio::test]
async fn with_a_session_store_a_session_goes_on_at_another_front_and_ends_everywhere() {
    let clock: Arc<dyn mcp_gateway::Clock> = Arc::new(TestClock::default());
    let store: Arc<dyn mcp_gateway::SessionStore> =
        Arc::new(mcp_gateway::MemorySessions::new(16, Duration::from_secs(60), clock));
    let shared = || HttpOptions { session_store: Some(Arc::clone(&store)), ..HttpOptions::default() };
    let (one, two) = (start_with(shared()).await, start_with(shared()).await);
    let session = initialize(one.addr, "2025-06-18", json!({})).await;
    // The other front never saw it: it continues it from the store, with its revision.
    let level = json!({"jsonrpc": "2.0", "id": 1, "method": "logging/setLevel", "params": {"level": "error"}});
    assert_eq!(post_session(two.addr, &session, "2025-06-18", &level).await.json()["result"], json!({}));
    let record = store.load(&session).await.unwrap().expect("kept");
    assert_eq!((record.protocol_version.as_str(), record.ready), ("2025-06-18", true));
    assert_eq!(record.log_level, Some(mcp_protocol::LoggingLevel::Error), "the change on `two` is kept");
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "echo__echo", "arguments": {"at": "two"}}});
    assert!(text_of(&post_session(two.addr, &session, "2025-06-18", &call).await.json()["result"]).contains("two"));
    // Ended at `two`: `one`, which holds it too, answers 404 from then on.
    let deleted = exchange(two.addr, "DELETE", &[("mcp-session-id", session.as_str())], "").await;
    assert_eq!(deleted.status, 200);
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    assert_eq!(post_session(one.addr, &session, "2025-06-18", &ping).await.status, 404);
    // A made-up id is nobody's, at either front.
    assert_eq!(post_session(two.addr, "0123456789abcdef0123456789abcdef", "2025-06-18", &ping).await.status, 404);

    // A store that does not answer: 503 saying so, never a session kept only here.
    let down = start_with(HttpOptions { session_store: Some(Arc::new(Down)), ..HttpOptions::default() }).await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let answer = exchange(down.addr, "POST", &[("content-type", "application/json")], &body.to_string()).await;
    assert_eq!(answer.status, 503, "{answer:?}");
    assert!(answer.session().is_none());
    assert!(answer.json()["error"]["message"].as_str().unwrap().contains("shared state store is unavailable"));
    assert_eq!(post_session(down.addr, &session, "2025-06-18", &ping).await.status, 503);
}

/// Connections beyond the limit are told 503 and closed at once; one that closes makes room.
/// (The limit never goes below 16, whatever is configured.)
#[tokio::test]
async fn connections_beyond_the_limit_are_refused_at_once() {
    use tokio::io::AsyncReadExt as _;
    let gw = start_with(HttpOptions { max_connections: 16, ..HttpOptions::default() }).await;
    let mut held = Vec::new();
    for _ in 0..16 {
        held.push(tokio::net::TcpStream::connect(gw.addr).await.unwrap());
    }
    let read_all = |mut stream: tokio::net::TcpStream| async move {
        let mut said = String::new();
        let read = tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut said)).await;
        assert!(read.is_ok(), "closed at once");
        said
    };
    let said = read_all(tokio::net::TcpStream::connect(gw.addr).await.unwrap()).await;
    assert!(
        said.starts_with("HTTP/1.1 503 ")
            && said.ends_with("too many connections to this gateway at once; try again later"),
        "{said:?}"
    );
    drop(held.pop());
    // The permit is back once the server has seen the close.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let mut stream = tokio::net::TcpStream::connect(gw.addr).await.unwrap();
        let request = format!("GET /mcp HTTP/1.1\r\nhost: {}\r\nconnection: close\r\n\r\n", gw.addr);
        let _ = tokio::io::AsyncWriteExt::write_all(&mut stream, request.as_bytes()).await;
        let mut said = String::new();
        let _ = tokio::time::timeout(Duration::from_secs(10), stream.read_to_string(&mut said)).await;
        if said.starts_with("HTTP/1.1 405 ") {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no room came back: {said:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Opens a session of 2025-06-18 as the holder of `token` (none: unauthenticated); its id.
async fn open_as(addr: std::net::SocketAddr, token: Option<&str>) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    let answer = exchange(addr, "POST", &headers, &body.to_string()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    answer.session().expect("a session id")
}

/// The status of a ping in session `session` as the holder of `token`.
async fn ping_as(addr: std::net::SocketAddr, token: Option<&str>, session: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let bearer = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    if let Some(bearer) = &bearer {
        headers.push(("authorization", bearer.as_str()));
    }
    let answer = exchange(addr, "POST", &headers, &ping.to_string()).await;
    if answer.status == 200 {
        assert_eq!(answer.json()["result"], json!({}), "{answer:?}");
    }
    answer.status
}

#[tokio::test]
async fn a_full_table_evicts_the_least_recently_used_session_instead_of_refusing() {
    let gw = start_with(HttpOptions { max_sessions: 3, ..HttpOptions::default() }).await;
    let [a, b, c] = [open_as(gw.addr, None).await, open_as(gw.addr, None).await, open_as(gw.addr, None).await];
    // `a` is used again: `b` is the one idle longest when `d` comes.
    assert_eq!(ping_as(gw.addr, None, &a).await, 200);
    let d = open_as(gw.addr, None).await;
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "ping"});
    let evicted = post_session(gw.addr, &b, "2025-06-18", &ping).await;
    assert_eq!(evicted.status, 404, "an evicted session is unknown, so its client initializes again");
    assert!(evicted.json()["error"]["message"].as_str().unwrap().contains("initialize a new one"), "{evicted:?}");
    for kept in [&a, &c, &d] {
        assert_eq!(ping_as(gw.addr, None, kept).await, 200, "{kept}");
    }
}

#[tokio::test]
async fn a_caller_at_its_share_evicts_its_own_sessions_never_another_callers() {
    let tokens = BearerTokens::new().token("alice-token", "alice").token("mallory-token", "mallory");
    let options = HttpOptions {
        auth: Some(Arc::new(tokens)),
        max_sessions: 3,
        max_sessions_per_caller: 2,
        ..HttpOptions::default()
    };
    let gw = start_with(options).await;
    let alice = open_as(gw.addr, Some("alice-token")).await;
    let mut mallory = Vec::new();
    for _ in 0..5 {
        mallory.push(open_as(gw.addr, Some("mallory-token")).await);
    }
    // Alice's session is the least recently used of all, yet only Mallory's own went.
    assert_eq!(ping_as(gw.addr, Some("alice-token"), &alice).await, 200);
    let mut statuses = Vec::new();
    for session in &mallory {
        statuses.push(ping_as(gw.addr, Some("mallory-token"), session).await);
    }
    assert_eq!(statuses, [404, 404, 404, 200, 200]);
}

#[tokio::test]
async fn an_idle_session_expires_by_time_with_room_to_spare() {
    let gw = start_with(HttpOptions { session_idle: Duration::from_secs(60), ..HttpOptions::default() }).await;
    let used = open_as(gw.addr, None).await;
    let left = open_as(gw.addr, None).await;
    gw.clock.advance(59_000);
    assert_eq!(ping_as(gw.addr, None, &used).await, 200, "used within the limit: renewed");
    gw.clock.advance(2_000);
    assert_eq!(ping_as(gw.addr, None, &left).await, 404, "unused for 61 s of 60");
    assert_eq!(ping_as(gw.addr, None, &used).await, 200);
    gw.clock.advance(60_000);
    assert_eq!(ping_as(gw.addr, None, &used).await, 404);
}

/// A [`mcp_gateway::MemorySessions`] whose `create` fails while `fail` is set.
#[derive(Debug)]
struct Flaky {
    inner: mcp_gateway::MemorySessions,
    fail: std::sync::atomic::AtomicBool,
}

#[async_trait::async_trait]
impl mcp_gateway::SessionStore for Flaky {
    async fn create(&self, id: &str, record: &mcp_gateway::SessionRecord) -> Result<bool, mcp_gateway::StoreError> {
        if self.fail.load(std::sync::atomic::Ordering::SeqCst) {
            return Err(mcp_gateway::StoreError::Unavailable("connection refused".into()));
        }
        self.inner.create(id, record).await
    }
    async fn load(&self, id: &str) -> Result<Option<mcp_gateway::SessionRecord>, mcp_gateway::StoreError> {
        self.inner.load(id).await
    }
    async fn touch(&self, id: &str) -> Result<bool, mcp_gateway::StoreError> {
        self.inner.touch(id).await
    }
    async fn update(&self, id: &str, change: &mcp_gateway::SessionChange) -> Result<bool, mcp_gateway::StoreError> {
        self.inner.update(id, change).await
    }
    async fn remove(&self, id: &str) -> Result<(), mcp_gateway::StoreError> {
        self.inner.remove(id).await
    }
}

#[tokio::test]
async fn with_a_session_store_evicted_and_refused_sessions_leave_no_record() {
    let clock: Arc<dyn mcp_gateway::Clock> = Arc::new(TestClock::default());
    let flaky = Arc::new(Flaky {
        inner: mcp_gateway::MemorySessions::new(16, Duration::from_secs(60), clock),
        fail: std::sync::atomic::AtomicBool::new(false),
    });
    let store: Arc<dyn mcp_gateway::SessionStore> = Arc::clone(&flaky) as _;
    let gw =
        start_with(HttpOptions { session_store: Some(Arc::clone(&store)), max_sessions: 2, ..HttpOptions::default() })
            .await;
    let first = open_as(gw.addr, None).await;
    // The store refuses one: 503, and neither a record nor a session here is left of it (one
    // left here would take the room `second` needs and evict `first`).
    flaky.fail.store(true, std::sync::atomic::Ordering::SeqCst);
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let refused = exchange(gw.addr, "POST", &[("content-type", "application/json")], &body.to_string()).await;
    assert_eq!(refused.status, 503, "{refused:?}");
    flaky.fail.store(false, std::sync::atomic::Ordering::SeqCst);
    let second = open_as(gw.addr, None).await;
    assert_eq!(ping_as(gw.addr, None, &second).await, 200);
    assert_eq!(ping_as(gw.addr, None, &first).await, 200);
    // A third evicts `second` (`first` was just used) here and in the store: it is not
    // restored from there, at this front or any other.
    let third = open_as(gw.addr, None).await;
    assert!(store.load(&second).await.unwrap().is_none(), "the evicted session's record is removed");
    assert_eq!(ping_as(gw.addr, None, &second).await, 404);
    for kept in [&first, &third] {
        assert!(store.load(kept).await.unwrap().is_some(), "{kept}");
        assert_eq!(ping_as(gw.addr, None, kept).await, 200);
    }
}
