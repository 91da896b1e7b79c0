//! The OpenAI adapter against a scripted server.

use std::time::Duration;

use agent_loop::{Block, LanguageModel, Message, ModelError, NoStream, Role, StopReason, Usage};
use llm_providers::{OpenAiModel, Options, TokenLimitField};
use pretty_assertions::assert_eq;
use serde_json::json;

use crate::server::{FakeServer, KEY, Reply};
use crate::{Collect, closed_port_base, conversation, fast, simple};

const TEXT: &str = include_str!("fixtures/openai_text.sse");
const TOOL_CALLS: &str = include_str!("fixtures/openai_tool_calls.sse");
const FINAL: &str = include_str!("fixtures/openai_final.sse");
const COMPLETION: &str = include_str!("fixtures/openai_completion.json");

fn model(server: &FakeServer) -> OpenAiModel {
    OpenAiModel::new(&format!("{}/v1", server.base), Some(KEY), reqwest::Client::new())
        .unwrap()
        .with_model("gpt-test")
        .with_options(fast())
}

#[tokio::test]
async fn request_body_headers_and_path() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    model(&server).complete(&conversation(), &NoStream).await.unwrap();
    let requests = server.requests();
    assert_eq!(requests.len(), 1);
    let r = &requests[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), Some(format!("Bearer {KEY}").as_str()));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(r.header("x-api-key"), None);
    insta::assert_json_snapshot!("openai_request", r.body);
}

#[tokio::test]
async fn token_limit_field_and_minimal_body() {
    let server = FakeServer::start(vec![Reply::sse(TEXT), Reply::sse(TEXT)]).await;
    let m = model(&server);
    assert_eq!(m.token_limit_field(), TokenLimitField::MaxTokens);
    m.complete(&simple("Hi"), &NoStream).await.unwrap();
    let m = m.with_token_limit_field(TokenLimitField::MaxCompletionTokens);
    m.complete(&simple("Hi"), &NoStream).await.unwrap();
    let requests = server.requests();
    assert_eq!(
        requests[0].body,
        json!({
            "model": "gpt-test",
            "messages": [{"role": "user", "content": "Hi"}],
            "max_tokens": 100,
            "stream": true,
            "stream_options": {"include_usage": true}
        })
    );
    assert_eq!(requests[1].body["max_completion_tokens"], 100);
    assert_eq!(requests[1].body.get("max_tokens"), None);
    let official = OpenAiModel::new("https://api.openai.com/v1", Some(KEY), reqwest::Client::new()).unwrap();
    assert_eq!(official.token_limit_field(), TokenLimitField::MaxCompletionTokens);
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
async fn tool_calls_with_arguments_split_and_interleaved() {
    let server = FakeServer::start(vec![Reply::sse(TOOL_CALLS)]).await;
    let sink = Collect::default();
    let response = model(&server).complete(&simple("Weather?"), &sink).await.unwrap();
    assert_eq!(sink.pieces(), ["Let me check the weather."]);
    assert_eq!(
        response.content,
        vec![
            Block::text("Let me check the weather."),
            Block::ToolUse {
                id: "call_A".into(),
                name: "get_weather".into(),
                input: json!({"city": "Paris", "unit": "celsius"})
            },
            Block::ToolUse { id: "call_B".into(), name: "get_time".into(), input: json!({}) },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, Usage { input_tokens: 472, output_tokens: 89 });
}

#[tokio::test]
async fn tool_calls_finished_with_stop_are_tool_use() {
    let body = TOOL_CALLS.replace(r#""finish_reason":"tool_calls""#, r#""finish_reason":"stop""#);
    let server = FakeServer::start(vec![Reply::sse(&body)]).await;
    let response = model(&server).complete(&simple("Weather?"), &NoStream).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.content.len(), 3);
}

#[tokio::test]
async fn invalid_arguments_pass_through_as_a_string_and_back() {
    let body = TOOL_CALLS.replace(r#": \"celsius\"}"#, r#": celsius"#);
    let server = FakeServer::start(vec![Reply::sse(&body), Reply::sse(FINAL)]).await;
    let m = model(&server);
    let mut request = simple("Weather?");
    let first = m.complete(&request, &NoStream).await.unwrap();
    let raw = r#"{"city": "Paris", "unit": celsius"#;
    assert_eq!(first.content[1], Block::ToolUse { id: "call_A".into(), name: "get_weather".into(), input: json!(raw) });
    request.messages.push(Message { role: Role::Assistant, content: first.content }.into());
    m.complete(&request, &NoStream).await.unwrap();
    let sent = &server.requests()[1].body["messages"][1]["tool_calls"][0]["function"]["arguments"];
    assert_eq!(sent, raw, "the model's own text goes back unchanged");
}

#[tokio::test]
async fn tool_use_round_trip() {
    let server = FakeServer::start(vec![Reply::sse(TOOL_CALLS), Reply::sse(FINAL)]).await;
    let m = model(&server);
    let mut request = simple("Weather in Paris?");
    request.system = "Be brief.".into();
    let first = m.complete(&request, &NoStream).await.unwrap();
    assert_eq!(first.stop_reason, StopReason::ToolUse);
    request.messages.push(Message { role: Role::Assistant, content: first.content }.into());
    request.messages.push(
        Message {
            role: Role::User,
            content: vec![
                Block::ToolResult { tool_use_id: "call_A".into(), content: "18°C".into(), is_error: false },
                Block::ToolResult { tool_use_id: "call_B".into(), content: "Error: no clock".into(), is_error: true },
            ],
        }
        .into(),
    );
    let sink = Collect::default();
    let second = m.complete(&request, &sink).await.unwrap();
    assert_eq!(second.content, vec![Block::text("It is 18°C in Paris.")]);
    assert_eq!(second.stop_reason, StopReason::EndTurn);
    assert_eq!(sink.pieces(), ["It is 18°C in Paris."]);
    let requests = server.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].body["messages"],
        json!([
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": "Let me check the weather.", "tool_calls": [
                {"id": "call_A", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"unit\":\"celsius\"}"}},
                {"id": "call_B", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}
            ]},
            {"role": "tool", "tool_call_id": "call_A", "content": "18°C"},
            {"role": "tool", "tool_call_id": "call_B", "content": "Error: no clock"}
        ])
    );
}

#[tokio::test]
async fn retries_429_honouring_retry_after() {
    let limited = r#"{"error":{"message":"Rate limit reached for requests","type":"requests","param":null,"code":"rate_limit_exceeded"}}"#;
    let server = FakeServer::start(vec![Reply::json(429, limited).header("retry-after", "0"), Reply::sse(TEXT)]).await;
    let options =
        Options { retry: mcp_safety::Backoff { initial_delay: Duration::from_secs(30), ..fast().retry }, ..fast() };
    let started = std::time::Instant::now();
    let response = model(&server).with_options(options).complete(&simple("Hi"), &NoStream).await.unwrap();
    // Far below the 30 s backoff: only retry-after: 0 can explain it.
    assert!(started.elapsed() < Duration::from_secs(20), "{:?}", started.elapsed());
    assert_eq!(response.content, vec![Block::text("Hello, wörld!")]);
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn persistent_5xx_is_unavailable_after_all_attempts() {
    let error = r#"{"error":{"message":"The server had an error while processing your request.","type":"server_error","param":null,"code":null}}"#;
    let server = FakeServer::start(vec![Reply::json(500, error); 3]).await;
    let options = Options { retry: mcp_safety::Backoff { max_attempts: 3, ..fast().retry }, ..fast() };
    let err = model(&server).with_options(options).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    match &err {
        ModelError::Unavailable { attempts: 3, message } => {
            assert!(message.contains("HTTP 500") && message.contains("server had an error"), "{message}")
        }
        other => panic!("{other:?}"),
    }
    assert_eq!(server.requests().len(), 3);
}

#[tokio::test]
async fn client_errors_are_rejected_with_the_providers_message() {
    let openai = r#"{"error":{"message":"Incorrect API key provided.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}"#;
    let ollama = r#"{"error":"model \"llama9\" not found, try pulling it first"}"#;
    for (status, body, expected) in [
        (401, openai, "invalid_request_error: Incorrect API key provided."),
        (404, ollama, "model \"llama9\" not found, try pulling it first"),
        (422, "unprocessable", "unprocessable"),
    ] {
        let server = FakeServer::start(vec![Reply::json(status, body)]).await;
        let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
        match &err {
            ModelError::Rejected { status: s, message } => {
                assert_eq!((*s, message.as_str()), (status, expected));
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(server.requests().len(), 1);
    }
}

/// A server that quotes the key it refused (some proxies and compatible gateways do) does not
/// get it into the message, which the terminal, the transcript and the logs show.
#[tokio::test]
async fn the_key_a_server_quotes_back_is_hidden() {
    let body = format!(r#"{{"error":{{"message":"Incorrect API key provided: Bearer {KEY}, and {KEY} again"}}}}"#);
    let server = FakeServer::start(vec![Reply::json(401, &body)]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    let text = err.to_string();
    assert!(!text.contains(KEY), "{text}");
    assert!(text.contains("Incorrect API key provided: <hidden>, and <hidden> again"), "{text}");
}

#[tokio::test]
async fn malformed_and_truncated_streams() {
    let bad_json = TEXT.replace(r#"{"content":"!"}"#, r#"{"content":"!"#);
    let truncated = &TEXT[..TEXT.find(r#""finish_reason":"stop""#).unwrap() - 60];
    let no_done_after_finish = &TEXT[..TEXT.find("data: [DONE]").unwrap()];
    for (body, needle) in [
        (bad_json.as_str(), "not valid JSON"),
        (truncated, "truncated"),
        ("data: \"just a string\"\n\n", "not a JSON object"),
        ("", "had none"),
    ] {
        let server = FakeServer::start(vec![Reply::sse(body)]).await;
        match model(&server).complete(&simple("Hi"), &NoStream).await {
            Err(ModelError::Malformed(m)) => assert!(m.contains(needle), "{m} / {needle}"),
            other => panic!("{needle}: {other:?}"),
        }
        assert_eq!(server.requests().len(), 1);
    }
    // Cut after finish_reason and usage but before [DONE]: nothing is lost.
    let server = FakeServer::start(vec![Reply::sse(no_done_after_finish)]).await;
    let response = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap();
    assert_eq!(response.content, vec![Block::text("Hello, wörld!")]);
}

#[tokio::test]
async fn an_error_chunk_mid_stream() {
    let error = "data: {\"error\":{\"message\":\"upstream overloaded\",\"type\":\"server_error\"}}\n\n";
    let server = FakeServer::start(vec![Reply::sse(error), Reply::sse(TEXT)]).await;
    let response = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap();
    assert_eq!(response.content, vec![Block::text("Hello, wörld!")]);
    assert_eq!(server.requests().len(), 2, "retried: nothing had been streamed");

    let invalid = "data: {\"error\":{\"message\":\"context too long\",\"type\":\"invalid_request_error\"}}\n\n";
    let server = FakeServer::start(vec![Reply::sse(invalid)]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Rejected { status: 400, message } if message.contains("context too long")),
        "{err:?}"
    );
}

#[tokio::test]
async fn non_streaming_json_answer_is_accepted() {
    let server = FakeServer::start(vec![Reply::json(200, COMPLETION)]).await;
    let sink = Collect::default();
    let response = model(&server).complete(&simple("Hi"), &sink).await.unwrap();
    assert_eq!(sink.pieces(), ["Checking."]);
    assert_eq!(
        response.content,
        vec![
            Block::text("Checking."),
            Block::ToolUse { id: "call_J".into(), name: "get_weather".into(), input: json!({"city": "Rome"}) },
        ]
    );
    assert_eq!(response.stop_reason, StopReason::ToolUse);
    assert_eq!(response.usage, Usage { input_tokens: 30, output_tokens: 20 });

    let server = FakeServer::start(vec![Reply::json(200, r#"{"choices":[]}"#)]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Malformed(m) if m.contains("no choices")), "{err:?}");
}

#[tokio::test]
async fn connection_failures_are_retried_then_unavailable() {
    let base = closed_port_base().await;
    let m = OpenAiModel::new(&base, None, reqwest::Client::new())
        .unwrap()
        .with_model("m")
        .with_options(Options { retry: mcp_safety::Backoff { max_attempts: 2, ..fast().retry }, ..fast() });
    let err = m.complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Unavailable { attempts: 2, .. }), "{err:?}");
}

#[tokio::test]
async fn from_lookup_reads_base_url_with_v1_and_local_servers_need_no_key() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    let base = format!("{}/v1/", server.base);
    let vars = |name: &str| (name == "OPENAI_BASE_URL").then(|| base.clone());
    let m = OpenAiModel::from_lookup("llama3.2", vars).unwrap().with_options(fast());
    assert_eq!(m.url(), format!("{}/v1/chat/completions", server.base));
    m.complete(&simple("Hi"), &NoStream).await.unwrap();
    let r = &server.requests()[0];
    assert_eq!(r.path, "/v1/chat/completions");
    assert_eq!(r.header("authorization"), None);
    assert_eq!(r.body["model"], "llama3.2");
}

#[test]
fn from_lookup_defaults_and_missing_key() {
    let m = OpenAiModel::from_lookup("gpt", |n| (n == "OPENAI_API_KEY").then(|| KEY.to_owned())).unwrap();
    assert_eq!(m.url(), "https://api.openai.com/v1/chat/completions");
    assert_eq!(m.name(), "openai");
    assert!(!format!("{m:?}").contains(KEY));

    let err = OpenAiModel::from_lookup("gpt", |_| None).unwrap_err();
    assert!(matches!(&err, ModelError::Configuration(m) if m.contains("OPENAI_API_KEY")), "{err}");
    let remote = |n: &str| (n == "OPENAI_BASE_URL").then(|| "https://gateway.example.com/v1".to_owned());
    assert!(matches!(OpenAiModel::from_lookup("gpt", remote), Err(ModelError::Configuration(_))));
    let local = |n: &str| (n == "OPENAI_BASE_URL").then(|| "http://localhost:11434/v1".to_owned());
    assert_eq!(OpenAiModel::from_lookup("gpt", local).unwrap().url(), "http://localhost:11434/v1/chat/completions");
}

#[tokio::test]
async fn request_timeout_and_conflict_are_retried_and_the_server_may_veto_retries() {
    let server = FakeServer::start(vec![
        Reply::json(408, r#"{"error":{"message":"timeout"}}"#),
        Reply::json(409, r#"{"error":{"message":"conflict"}}"#),
        Reply::sse(TEXT),
    ])
    .await;
    model(&server).complete(&simple("Hi"), &NoStream).await.unwrap();
    assert_eq!(server.requests().len(), 3);

    let veto = Reply::json(503, r#"{"error":{"message":"down for good"}}"#).header("x-should-retry", "false");
    let server = FakeServer::start(vec![veto, Reply::sse(TEXT)]).await;
    let err = model(&server).complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(
        matches!(&err, ModelError::Unavailable { attempts: 1, message } if message.contains("down for good")),
        "{err:?}"
    );
    assert_eq!(server.requests().len(), 1);

    let insist = Reply::json(400, r#"{"error":{"message":"try again"}}"#).header("x-should-retry", "true");
    let server = FakeServer::start(vec![insist, Reply::sse(TEXT)]).await;
    model(&server).complete(&simple("Hi"), &NoStream).await.unwrap();
    assert_eq!(server.requests().len(), 2);
}

#[tokio::test]
async fn a_model_name_is_needed() {
    let server = FakeServer::start(vec![Reply::sse(TEXT)]).await;
    let unnamed = OpenAiModel::new(&server.base, None, reqwest::Client::new()).unwrap();
    let err = unnamed.complete(&simple("Hi"), &NoStream).await.unwrap_err();
    assert!(matches!(&err, ModelError::Configuration(m) if m.contains("no model")), "{err:?}");
    assert!(server.requests().is_empty());
}
