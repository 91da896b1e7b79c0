//! The Anthropic adapter against a scripted server.

use std::time::Duration;

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_loop::{
    Agent, AgentConfig, Block, BoundCall, LanguageModel, Listing, Message, ModelError, NoEvents, NoStream, Operation,
    Role, SourceError, StopReason, ToolSearch, ToolSource, Usage,
};
use llm_providers::{AnthropicModel, Options};
use pretty_assertions::assert_eq;
use serde_json::json;
use tool_pool::{ExposureOptions, SearchMode, ServerExposure, ServerTools};

use crate::server::{FakeServer, KEY, Reply};
use crate::{Collect, closed_port_base, conversation, fast, simple};

const TEXT: &str = include_str!("fixtures/anthropic_text.sse");
const TOOL_USE: &str = include_str!("fixtures/anthropic_tool_use.sse");
const FINAL: &str = include_str!("fixtures/anthropic_final.sse");
const MESSAGE: &str = include_str!("fixtures/anthropic_message.json");

fn model(server: &FakeServer) -> AnthropicModel {
    AnthropicModel::new(&server.base, KEY, reqwest::Client::new())
        .unwrap()
        .with_model("claude-test")
        .with_options(fast())
}

#[tokio::test]
async fn request_body_headers_and_path() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    model(&server).complete(&conversation(), &NoStream).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.header("x-api-key"), Some(KEY));
    assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("authorization"), None);
    insta::assert_json_snapshot!("anthropic_request", r.body);
}

/// `tool_search = "native"`: the agent marks deferred tools, and the adapter sends them with
/// `defer_loading`, adds the API's search tool and the beta header.
#[tokio::test]
async fn deferred_tools_go_with_the_api_tool_search() {
    let server = FakeServer::start(vec![Reply::sse(TEXT), Reply::sse(TEXT)]).await;
    let mut request = conversation();
    request.tools[0].defer_loading = true;
    model(&server).complete(&request, &NoStream).await.unwrap();
    // Without deferred tools, neither the search tool nor the header.
    model(&server).complete(&conversation(), &NoStream).await.unwrap();
    let requests = server.requests();
    let r = &requests[0];
    assert_eq!(r.header("anthropic-beta"), Some("advanced-tool-use-2025-11-20"));
    insta::assert_json_snapshot!("anthropic_native_tool_search_request", r.body);
    assert_eq!(requests[1].header("anthropic-beta"), None);
    let tools = requests[1].body["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 2);
    assert!(tools.iter().all(|t| t.get("defer_loading").is_none() && t.get("type").is_none()), "{tools:?}");
}

/// Fixed listings for the agent; calls fail (the test's turn makes none).
struct Listings(Vec<ServerTools>);

#[async_trait::async_trait]
impl ToolSource for Listings {
    async fn refresh(&self) -> Listing {
        let generations = self.0.iter().map(|s| (s.server.to_string(), 1)).collect();
        Listing { servers: self.0.clone(), generations, ..Listing::default() }
    }

    fn generation(&self, _server: &str) -> Option<u64> {
        Some(1)
    }

    async fn call_bound(&self, call: BoundCall) -> Result<mcp_protocol::CallToolResult, SourceError> {
        let detail = "no calls in this test".to_owned();
        Err(SourceError::Failed { op: Operation::CallTool { tool: call.tool }, server: call.server, detail })
    }
}

/// The agent with `tool_search = "native"` driving this adapter: deferred tools go out marked
/// `defer_loading`, an `always_load` server's are sent plainly, the API's search tool comes
/// last, and the loop's own search tool is not offered.
#[tokio::test]
async fn the_agent_with_native_tool_search_sends_deferred_tools_to_the_api() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    let tool = |name: &str, description: &str| {
        let mut t =
            mcp_protocol::Tool::new(name, json!({"type": "object", "properties": {"city": {"type": "string"}}}));
        t.description = Some(description.to_owned());
        t
    };
    let source = Arc::new(Listings(vec![
        ServerTools::new("calendar", vec![tool("list_events", "List the events of a day.")]),
        ServerTools::new(
            "weather",
            vec![
                tool("get_forecast", "Weather forecast for a city."),
                tool("get_alerts", "Weather alerts for a city."),
            ],
        ),
    ]));
    let always = ServerExposure { always_load: true, ..ServerExposure::default() };
    let config = AgentConfig {
        model: "claude-test".into(),
        system: "You are a weather bot.".into(),
        max_tokens: 100,
        exposure: ExposureOptions {
            tool_search: SearchMode::On,
            servers: BTreeMap::from([("calendar".to_owned(), always)]),
            ..ExposureOptions::default()
        },
        tool_search: ToolSearch::Native,
        ..AgentConfig::default()
    };
    let agent = Agent::new(Arc::new(model(&server)), source, policy::Policy::default(), config);
    agent.run_turn(&mut Vec::new(), "Weather in Oslo?", &NoEvents).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests[0].header("anthropic-beta"), Some("advanced-tool-use-2025-11-20"));
    insta::assert_json_snapshot!("agent_native_tool_search_request", requests[0].body);
}

#[tokio::test]
async fn empty_model_system_and_tools_fall_back_or_are_left_out() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    model(&server).complete(&simple("Hi"), &NoStream).await.unwrap();
    assert_eq!(
        server.requests()[0].body,
        json!({
            "model": "claude-test",
            "max_tokens": 100,
            "messages": [{"role": "user", "content": [{"type": "text", "text": "Hi"}]}],
            "stream": true
        })
    );
}

#[tokio::test]
async fn streams_text_in_order() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    let sink = Collect::default();
    let response = model(&server).complete(&simple("Hi"), &sink).await.unwrap();
    assert_eq!(sink.pieces(), ["Hello", ", wörld", "!"]);
    assert_eq!(response.content, vec![Block::text("Hello, wörld!")]);
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert_eq!(response.usage, Usage { input_tokens: 25, output_tokens: 15 });
}

#[tokio::test]
async fn tool_use_with_arguments_split_across_deltas() {
    let server = FakeServer::start(vec![Reply::sse(TOOL_USE)]).await;
    let sink = Collect::default();
    let response = model(&server).complete(&simple("Weather?"), &sink).await.unwrap();
    assert_eq!(sink.pieces(), ["Let me check ", "the weather."]);
    assert_eq!(
        response.content,
        vec![
            Block::text("Let me check the weather."),
            Block::ToolUse {
                id: "toolu_01A".into(),
                name: "get_weather".into(),
                input: json!({"city": "Paris", "unit": "celsius"})
            },
            Block::ToolUse { id: "toolu_01B".into(), name: "get_time".into(), input: json!({}) },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, Usage { input_tokens: 472, output_tokens: 89 });
}

#[tokio::test]
async fn tool_use_round_trip() {
    let server = FakeServer::start(vec![Reply::sse(TOOL_USE), Reply::sse(FINAL)]).await;
    let model = model(&server);
    let mut request = simple("Weather in Paris?");
    let first = model.complete(&request, &NoStream).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    request.messages.push(Message { role: Role::Assistant, content: first.content }.into());
    request.messages.push(
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult { tool_use_id: "toolu_01A".into(), content: "18°C".into(), is_error: false },
                Block::ToolResult {
                    tool_use_id: "toolu_01B".into(),
                    content: "Error: no clock".into(),
                    is_error: true,
                },
            ],
        }
        .into(),
    );
    let sink = Collect::default();
    let second = model.complete(&request, &sink).await.unwrap();
    assert_eq!(second.content, vec![Block::text("It is 18°C in Paris.")]);
    assert_eq!(sink.pieces(), ["It is 18°C in Paris."]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    assert_eq!(messages.len(), 3);
    assert_eq!(
        messages[1]["content"][1],
        json!({"type": "tool_use", "id": "toolu_01A", "name": "get_weather", "input": {"city": "Paris", "unit": "celsius"}})
    );
    assert_eq!(
        messages[2],
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_01A", "content": "18°C", "is_error": false},
            {"type": "tool_result", "tool_use_id": "toolu_01B", "content": "Error: no clock", "is_error": true}
        ]})
    );
}

#[tokio::test]
async fn retries_429_honouring_retry_after() {
    let limited = r#"{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}"#;
    let server = FakeServer::start(vec![Reply::json(429, limited).header("retry-after", "0"), Reply::sse(TEXT)]).await;
    // A long backoff: only the server's retry-after: 0 keeps this test fast.
    let options =
        Options { retry: mcp_safety::Backoff { initial_delay: Duration::from_secs(30), ..fast().retry }, ..fast() };
    let model = model(&server).with_options(options);
    let started = std::time::Instant::now();
    let response = model.complete(&simple("Hi"), &NoStream).await.unwrap();
    // Far below the 30 s backoff: only retry-after: 0 can explain it.
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(response.content, vec![Block::text("Hello, wörld!")]);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn persistent_5xx_is_unavailable_after_all_attempts() {
    let overloaded = r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
    let server = FakeServer::start(vec![Reply::json(529, overloaded); 4]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    match &err {
        ModelError::Unavailable { attempts: 4, message } => {
            assert!(message.contains("HTTP 529") && message.contains("Overloaded"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 4);
}

#[tokio::test]
async fn client_error_is_rejected_with_the_providers_message() {
    let body = r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: 999999 > 64000, which is the maximum allowed"}}"#;
    let server = FakeServer::start(vec![Reply::json(400, body), Reply::sse(TEXT)]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    match &err {
        ModelError::Rejected { status: 400, message } => {
            assert_eq!(message, "invalid_request_error: max_tokens: 999999 > 64000, which is the maximum allowed")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 1, "4xx is not retried");
}

#[tokio::test]
async fn malformed_and_truncated_streams() {
    let bad_json = TEXT.replace(r#"{"type":"content_block_stop","index":0}"#, r#"{"type":"content_block_stop","#);
    let truncated = &TEXT[..TEXT.find("event: message_delta").unwrap()];
    let cut_mid_event = &TEXT[..TEXT.find("wörld").unwrap()];
    for (body, needle) in [
        (bad_json.as_str(), "not valid JSON"),
        (truncated, "truncated"),
        (cut_mid_event, "truncated"),
        ("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "message_start"),
        ("<html>nope</html>", "had none"),
    ] {
        let server = FakeServer::start(vec![Reply::sse(body)]).await;
        match model(&server).complete(&simple("Hi"), &NoStream).await {
            Err(ModelError::Malformed(m)) => assert!(m.contains(needle), "{m} / {needle}"),
            other => panic!("{needle}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 1, "malformed answers are not retried");
    }
}

#[tokio::test]
async fn a_broken_connection_mid_stream_is_a_network_error() {
    let server = FakeServer::start(vec![Reply::sse(&TEXT[..200]).abort()]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(err, ModelError::Network(_)), "{err:?}");
}

#[tokio::test]
async fn overloaded_error_event_before_any_text_is_retried() {
    let overloaded = concat!(
        "event: message_start\n",
        r#"data: {"type":"message_start","message":{"usage":{"input_tokens":1,"output_tokens":0}}}"#,
        "\n\nevent: error\n",
        r#"data: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#,
        "\n\n"
    );
    let server = FakeServer::start(vec![Reply::sse(overloaded), Reply::sse(TEXT)]).await;
    let response = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap();
    assert_eq!(response.content, vec![Block::text("Hello, wörld!")]);
    assert_eq!(server.requests().len(), 2);

    // After text was streamed, a retry would repeat it: the call fails instead.
    let after_text = format!(
        "{}event: error\ndata: {}\n\n",
        &TEXT[..TEXT.find("event: content_block_stop").unwrap()],
        r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#
    );
    let server = FakeServer::start(vec![Reply::sse(&after_text), Reply::sse(TEXT)]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Unavailable { attempts: 1, message } if message.contains("Overloaded")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn non_streaming_json_answer_is_accepted() {
    let server = FakeServer::start(vec![Reply::json(200, MESSAGE)]).await;
    let sink = Collect::default();
    let response = model(&server).complete(&simple("Hi"), &sink).await.unwrap();
    assert_eq!(sink.pieces(), ["Checking."]);
    assert_eq!(
        response.content,
        vec![
            Block::text("Checking."),
            Block::ToolUse { id: "toolu_01J".into(), name: "get_weather".into(), input: json!({"city": "Rome"}) },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, Usage { input_tokens: 30, output_tokens: 20 });
}

#[tokio::test]
async fn oversized_events_and_answers_are_malformed() {
    let big = format!(
        "{}event: content_block_delta\ndata: {{\"type\":\"content_block_delta\",\"index\":0,\"delta\":{{\"type\":\"text_delta\",\"text\":\"{}\"}}}}\n\n",
        &TEXT[..TEXT.find("event: ping").unwrap()],
        "x".repeat(10_000)
    );
    let server = FakeServer::start(vec![Reply::sse(&big)]).await;
    let small = Options { max_event_bytes: 4096, ..fast() };
    let err = model(&server).with_options(small).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Malformed(m) if m.contains("larger than 4096")), "{err:?}");

    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    let tiny = Options { max_response_bytes: 200, ..fast() };
    let err = model(&server).with_options(tiny.clone()).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Malformed(m) if m.contains("larger than 200")), "{err:?}");

    let server = FakeServer::start(vec![Reply::json(200, MESSAGE)]).await;
    let err = model(&server).with_options(tiny).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Malformed(m) if m.contains("larger than 200")), "{err:?}");
}

#[tokio::test]
async fn connection_failures_are_retried_then_unavailable() {
    let base = closed_port_base().await;
    let model = AnthropicModel::new(&base, KEY, reqwest::Client::new()).unwrap().with_model("m").with_options(fast());
    let err = model.complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Unavailable { attempts: 4, .. }), "{err:?}");
}

#[tokio::test]
async fn timeouts() {
    // No headers in time: retried like a connection failure. The limit leaves a loaded machine
    // time to send the stalled stream's first piece (a 200 ms limit could expire before the
    // headers of a healthy answer, and the stall became a retried "no response"); the server's
    // waits are far beyond it.
    let server = FakeServer::start(vec![Reply::sse(TEXT).delay(Duration::from_secs(60)); 2]).await;
    let options = Options {
        timeout: Duration::from_secs(3),
        retry: mcp_safety::Backoff { max_attempts: 2, ..fast().retry },
        ..fast()
    };
    let err = model(&server).with_options(options.clone()).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Unavailable { attempts: 2, message } if message.contains("no response within")),
        "{err:?}"
    );

    // A stream that stalls: not retried.
    let server = FakeServer::start(vec![Reply::sse(TEXT).stall(Duration::from_secs(60))]).await;
    let err = model(&server).with_options(options).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Network(m) if m.contains("did not finish")), "{err:?}");
    assert_eq!(server.requests().len(), 1);
}

#[tokio::test]
async fn from_lookup_reads_key_and_base_url_without_v1() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    let base = format!("{}//", server.base);
    let vars = |name: &str| match name {
        "ANTHROPIC_API_KEY" => Some(KEY.to_owned()),
        "ANTHROPIC_BASE_URL" => Some(base.clone()),
        _ => None,
    };
    let model = AnthropicModel::from_lookup("claude-env", vars).unwrap().with_options(fast());
    assert_eq!(model.url(), format!("{}/v1/messages", server.base));
    model.complete(&simple("Hi"), &NoStream).await.unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/messages");
    assert_eq!(r.body["model"], "claude-env");
    assert_eq!(r.header("x-api-key"), Some(KEY));
}

#[test]
fn from_lookup_defaults_and_missing_key() {
    let model = AnthropicModel::from_lookup("m", |n| (n == "ANTHROPIC_API_KEY").then(|| KEY.to_owned())).unwrap();
    assert_eq!(model.url(), "https://api.anthropic.com/v1/messages");
    assert_eq!(model.name(), "anthropic");
    assert!(!format!("{model:?}").contains(KEY));

    let err = AnthropicModel::from_lookup("m", |_| None).unwrap_err();
    assert!(matches!(&err, ModelError::Configuration(m) if m.contains("ANTHROPIC_API_KEY")), "{err}");
    let blank = AnthropicModel::from_lookup("m", |_| Some("  ".into())).unwrap_err();
    assert!(matches!(blank, ModelError::Configuration(_)));
    let bad_url = AnthropicModel::from_lookup("m", |n| {
        Some(if n == "ANTHROPIC_BASE_URL" { "localhost:8080".into() } else { KEY.into() })
    });
    assert!(matches!(&bad_url, Err(ModelError::Configuration(m)) if m.contains("ANTHROPIC_BASE_URL")), "{bad_url:?}");
}

#[tokio::test]
async fn redirects_are_not_followed_by_the_default_client() {
    let moved = Reply::json(307, "").header("location", "https://elsewhere.example/v1/messages");
    let server = FakeServer::start(vec![moved]).await;
    let model =
        AnthropicModel::new(&server.base, KEY, llm_providers::default_client().unwrap()).unwrap().with_model("m");
    let err = model.complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Rejected { status: 307, message } if message.contains("https://elsewhere.example/v1/messages")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);
}
