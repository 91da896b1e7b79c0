//! The conformance fixture, driven by hand: over an in-memory pipe (what the stdio front does),
//! as the built binary, and over HTTP with reqwest (sessions, SSE streams, resumption, the
//! `Host` / `Origin` check). The official harness runs it too (`cargo xtask conformance-server`).
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream, Lines};

/// How long a test waits for one message.
const WAIT: Duration = Duration::from_secs(30);

/// A client of the stdio front over an in-memory pipe.
struct Stdio {
    to: DuplexStream,
    from: Lines<BufReader<DuplexStream>>,
}

impl Stdio {
    fn start() -> Self {
        let (to, server_in) = tokio::io::duplex(1 << 20);
        let (server_out, from) = tokio::io::duplex(1 << 20);
        tokio::spawn(mcp_fixtures::conformance::serve_stdio(server_in, server_out));
        Stdio { to, from: BufReader::new(from).lines() }
    }

    async fn send(&mut self, message: Value) {
        self.to.write_all(format!("{message}\n").as_bytes()).await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line = tokio::time::timeout(WAIT, self.from.next_line()).await.expect("a message in time").unwrap();
        serde_json::from_str(&line.expect("the server is still there")).unwrap()
    }

    /// Sends request `id` and collects every message up to its answer.
    async fn request(&mut self, id: u64, method: &str, params: Value) -> (Vec<Value>, Value) {
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})).await;
        let mut before = Vec::new();
        loop {
            let message = self.next().await;
            if message["id"] == json!(id) && message.get("method").is_none() {
                return (before, message);
            }
            before.push(message);
        }
    }

    async fn initialize(capabilities: Value) -> Self {
        let mut client = Self::start();
        let params = json!({"protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "test", "version": "1"}});
        let (_, answer) = client.request(0, "initialize", params).await;
        assert_eq!(answer["result"]["protocolVersion"], "2025-11-25");
        assert_eq!(answer["result"]["capabilities"]["resources"]["subscribe"], true);
        client.send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
        client
    }
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"name": name, "arguments": arguments})
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

#[tokio::test]
async fn it_lists_what_the_scenarios_ask_for() {
    let mut client = Stdio::initialize(json!({})).await;
    let (_, tools) = client.request(1, "tools/list", json!({})).await;
    let names: Vec<&str> =
        tools["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    for expected in [
        "test_simple_text",
        "test_image_content",
        "test_audio_content",
        "test_embedded_resource",
        "test_multiple_content_types",
        "test_tool_with_logging",
        "test_tool_with_progress",
        "test_error_handling",
        "test_sampling",
        "test_elicitation",
        "test_elicitation_sep1034_defaults",
        "test_elicitation_sep1330_enums",
        "json_schema_2020_12_tool",
        "test_reconnection",
    ] {
        assert!(names.contains(&expected), "{expected} in {names:?}");
    }
    let schema =
        &tools["result"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "json_schema_2020_12_tool").unwrap()
            ["inputSchema"];
    assert_eq!(schema["$schema"], "https://json-schema.org/draft/2020-12/schema");
    assert_eq!(schema["additionalProperties"], false);

    let (_, read) = client.request(2, "resources/read", json!({"uri": "test://template/123/data"})).await;
    let data: Value = serde_json::from_str(read["result"]["contents"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(data["id"], "123");
    let (_, missing) = client.request(3, "resources/read", json!({"uri": "test://nothing"})).await;
    assert_eq!(missing["error"]["code"], -32002);
    let (_, prompt) = client
        .request(
            4,
            "prompts/get",
            json!({"name": "test_prompt_with_arguments", "arguments": {"arg1": "hello", "arg2": "world"}}),
        )
        .await;
    assert_eq!(prompt["result"]["messages"][0]["content"]["text"], "Prompt with arguments: arg1='hello', arg2='world'");
    let (_, missing_argument) = client.request(5, "prompts/get", json!({"name": "test_prompt_with_arguments"})).await;
    assert_eq!(missing_argument["error"]["code"], -32602);
    let completion = json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"}, "argument": {"name": "arg1", "value": "pa"}});
    let (_, completed) = client.request(6, "completion/complete", completion).await;
    assert_eq!(completed["result"]["completion"]["values"], json!(["paris", "park"]));
    let (_, audio) = client.request(7, "tools/call", call("test_audio_content", json!({}))).await;
    assert_eq!(audio["result"]["content"][0]["mimeType"], "audio/wav");
    let (_, unknown) = client.request(8, "tools/call", call("nope", json!({}))).await;
    assert_eq!(unknown["error"]["code"], -32602);
}

#[tokio::test]
async fn logs_follow_the_level_and_progress_the_token() {
    let mut client = Stdio::initialize(json!({})).await;
    let (logs, answer) = client.request(1, "tools/call", call("test_tool_with_logging", json!({}))).await;
    let said: Vec<&str> = logs.iter().map(|m| m["params"]["data"].as_str().unwrap()).collect();
    assert_eq!(said, ["Tool execution started", "Tool processing data", "Tool execution completed"]);
    assert!(logs.iter().all(|m| m["method"] == "notifications/message" && m["params"]["level"] == "info"));
    assert_eq!(answer["result"]["content"][0]["type"], "text");

    let (_, set) = client.request(2, "logging/setLevel", json!({"level": "warning"})).await;
    assert_eq!(set["result"], json!({}));
    let (logs, _) = client.request(3, "tools/call", call("test_tool_with_logging", json!({}))).await;
    assert!(logs.is_empty(), "info is below warning: {logs:?}");
    let (_, bad) = client.request(4, "logging/setLevel", json!({"level": "loud"})).await;
    assert_eq!(bad["error"]["code"], -32602);

    let params = json!({"name": "test_tool_with_progress", "arguments": {}, "_meta": {"progressToken": "tok-1"}});
    let (progress, _) = client.request(5, "tools/call", params).await;
    let steps: Vec<(Value, Value)> =
        progress.iter().map(|m| (m["params"]["progressToken"].clone(), m["params"]["progress"].clone())).collect();
    assert_eq!(steps, [(json!("tok-1"), json!(0)), (json!("tok-1"), json!(50)), (json!("tok-1"), json!(100))]);
    let (none, _) = client.request(6, "tools/call", call("test_tool_with_progress", json!({}))).await;
    assert!(none.is_empty(), "no token, no progress: {none:?}");
}

#[tokio::test]
async fn it_asks_its_client_during_the_call() {
    let mut client = Stdio::initialize(json!({"sampling": {}, "elicitation": {}})).await;
    client.send(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call("test_sampling", json!({"prompt": "Say hi"}))})).await;
    let asked = client.next().await;
    assert_eq!(asked["method"], "sampling/createMessage");
    assert_eq!(asked["params"]["maxTokens"], 100);
    assert_eq!(asked["params"]["messages"][0]["content"]["text"], "Say hi");
    let reply = json!({"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "test-model"});
    client.send(json!({"jsonrpc": "2.0", "id": asked["id"], "result": reply})).await;
    let answer = client.next().await;
    assert_eq!((answer["id"].clone(), text_of(&answer)), (json!(1), "LLM response: hi".to_owned()));

    client.send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call("test_elicitation_sep1034_defaults", json!({}))})).await;
    let asked = client.next().await;
    assert_eq!(asked["method"], "elicitation/create");
    let properties = &asked["params"]["requestedSchema"]["properties"];
    assert_eq!(
        (properties["age"]["type"].clone(), properties["age"]["default"].clone()),
        (json!("integer"), json!(30))
    );
    assert_eq!(properties["score"]["default"], 95.5);
    client.send(json!({"jsonrpc": "2.0", "id": asked["id"], "error": {"code": -1, "message": "no"}})).await;
    let answer = client.next().await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");

    // A client that declared neither is not asked.
    let mut quiet = Stdio::initialize(json!({})).await;
    let (asked, answer) = quiet.request(1, "tools/call", call("test_elicitation", json!({"message": "?"}))).await;
    assert!(asked.is_empty());
    assert_eq!(answer["result"]["isError"], true);
}

#[tokio::test]
async fn subscribers_hear_of_updates_until_they_unsubscribe() {
    let mut client = Stdio::initialize(json!({})).await;
    let (_, subscribed) = client.request(1, "resources/subscribe", json!({"uri": "test://watched-resource"})).await;
    assert_eq!(subscribed["result"], json!({}));
    let (told, _) = client.request(2, "tools/call", call("update_watched_resource", json!({}))).await;
    assert_eq!(
        told,
        [
            json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "test://watched-resource"}})
        ]
    );
    let (_, read) = client.request(3, "resources/read", json!({"uri": "test://watched-resource"})).await;
    assert_eq!(read["result"]["contents"][0]["text"], "Watched resource, version 1.");
    client.request(4, "resources/unsubscribe", json!({"uri": "test://watched-resource"})).await;
    let (told, _) = client.request(5, "tools/call", call("update_watched_resource", json!({}))).await;
    assert!(told.is_empty(), "{told:?}");
}

#[test]
fn the_binary_serves_stdio() {
    use std::io::{BufRead, Write};
    let binary = mcp_fixtures::conformance_binary().unwrap_or_else(|e| panic!("{e}"));
    let mut child = std::process::Command::new(binary)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    writeln!(stdin, r#"{{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{{"name":"test_simple_text"}}}}"#)
        .unwrap();
    drop(stdin);
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let answer: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(text_of(&answer), "This is a simple text response for testing.");
    assert!(child.wait().unwrap().success(), "it ends with its input");
}

/// An HTTP client of the fixture.
struct Http {
    client: reqwest::Client,
    url: String,
    session: String,
}

impl Http {
    async fn start() -> (mcp_fixtures::conformance::RunningConformance, Self) {
        let server = mcp_fixtures::conformance::start_http(([127, 0, 0, 1], 0).into()).await.unwrap();
        let client = reqwest::Client::new();
        let url = server.url();
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-11-25",
            "capabilities": {"elicitation": {}}, "clientInfo": {"name": "test", "version": "1"}}});
        let response =
            client.post(&url).header("accept", "application/json, text/event-stream").json(&init).send().await.unwrap();
        assert_eq!(response.status(), 200);
        let session = response.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        (server, Http { client, url, session })
    }

    async fn post(&self, body: Value) -> reqwest::Response {
        self.client
            .post(&self.url)
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", &self.session)
            .header("mcp-protocol-version", "2025-11-25")
            .json(&body)
            .send()
            .await
            .unwrap()
    }

    async fn get(&self, last_event_id: Option<&str>) -> reqwest::Response {
        let mut request =
            self.client.get(&self.url).header("accept", "text/event-stream").header("mcp-session-id", &self.session);
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        request.send().await.unwrap()
    }
}

/// One SSE event: (id, data).
type Event = (Option<String>, String);

/// Reads SSE events from `response` until `stop` says so (or the stream ends).
async fn events(response: &mut reqwest::Response, mut stop: impl FnMut(&Event) -> bool) -> Vec<Event> {
    let mut buffer = String::new();
    let mut out = Vec::new();
    loop {
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let id = block.lines().find_map(|l| l.strip_prefix("id: ")).map(str::to_owned);
            let data = block.lines().filter_map(|l| l.strip_prefix("data: ")).collect::<Vec<_>>().join("\n");
            out.push((id, data));
            if out.last().is_some_and(&mut stop) {
                return out;
            }
        }
        match tokio::time::timeout(WAIT, response.chunk()).await.expect("an event in time").unwrap() {
            Some(chunk) => buffer.push_str(&String::from_utf8_lossy(&chunk)),
            None => return out,
        }
    }
}

#[tokio::test]
async fn http_refuses_rebinding_and_strangers() {
    let (server, http) = Http::start().await;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}});
    let evil = http
        .client
        .post(server.url())
        .header("host", "evil.example.com")
        .header("origin", "http://evil.example.com")
        .header("accept", "application/json, text/event-stream")
        .json(&init)
        .send()
        .await
        .unwrap();
    assert_eq!(evil.status(), 403);
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let no_session = http
        .client
        .post(server.url())
        .header("accept", "application/json, text/event-stream")
        .json(&ping)
        .send()
        .await
        .unwrap();
    assert_eq!(no_session.status(), 400);
    let mut known = http.post(ping).await;
    assert_eq!(known.status(), 200);
    assert!(events(&mut known, |_| false).await.iter().any(|(_, data)| data.contains(r#""result":{}"#)));
    let wrong_version = http
        .client
        .post(server.url())
        .header("accept", "application/json, text/event-stream")
        .header("mcp-session-id", &http.session)
        .header("mcp-protocol-version", "1999-01-01")
        .json(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"}))
        .send()
        .await
        .unwrap();
    assert_eq!(wrong_version.status(), 400);
    let gone = http.client.delete(server.url()).header("mcp-session-id", &http.session).send().await.unwrap();
    assert_eq!(gone.status(), 200);
    assert_eq!(http.post(json!({"jsonrpc": "2.0", "id": 4, "method": "ping"})).await.status(), 404);
}

#[tokio::test]
async fn an_answer_stream_cut_mid_call_resumes_with_last_event_id() {
    let (_server, http) = Http::start().await;
    let mut cut = http
        .post(
            json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": call("test_reconnection", json!({}))}),
        )
        .await;
    let before = events(&mut cut, |_| false).await;
    assert_eq!(before.len(), 1, "only the priming event: {before:?}");
    let (Some(priming), data) = &before[0] else { panic!("the priming event has an id") };
    assert!(data.is_empty());
    let mut resumed = http.get(Some(priming)).await;
    assert_eq!(resumed.status(), 200);
    let after = events(&mut resumed, |_| false).await;
    assert_eq!(after.len(), 1, "{after:?}");
    let answer: Value = serde_json::from_str(&after[0].1).unwrap();
    assert_eq!(answer["id"], 7);
    assert!(text_of(&answer).starts_with("Reconnection test completed"), "{answer}");
}

#[tokio::test]
async fn questions_go_on_the_call_stream_and_updates_on_the_get_stream() {
    let (_server, http) = Http::start().await;
    let mut stream = http.post(json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": call("test_elicitation", json!({"message": "Who?"}))})).await;
    let asked = events(&mut stream, |(_, data)| data.contains("elicitation/create")).await;
    let question: Value = serde_json::from_str(&asked.last().unwrap().1).unwrap();
    assert_eq!(question["params"]["requestedSchema"]["required"], json!(["username", "email"]));
    let reply = json!({"jsonrpc": "2.0", "id": question["id"], "result": {"action": "accept", "content": {"username": "u", "email": "e@x"}}});
    assert_eq!(http.post(reply).await.status(), 202);
    let rest = events(&mut stream, |_| false).await;
    let answer: Value = serde_json::from_str(&rest.last().unwrap().1).unwrap();
    assert!(text_of(&answer).contains("action=accept"), "{answer}");

    let mut notices = http.get(None).await;
    assert_eq!(notices.status(), 200);
    let mut subscribe = http.post(json!({"jsonrpc": "2.0", "id": 2, "method": "resources/subscribe", "params": {"uri": "test://watched-resource"}})).await;
    events(&mut subscribe, |_| false).await;
    let mut update = http.post(json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": call("update_watched_resource", json!({}))})).await;
    events(&mut update, |_| false).await;
    let heard = events(&mut notices, |(_, data)| data.contains("resources/updated")).await;
    assert!(heard.last().unwrap().1.contains("test://watched-resource"), "{heard:?}");
}
