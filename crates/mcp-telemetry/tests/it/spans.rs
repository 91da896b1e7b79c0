//! Span names, kinds, attributes, status and parent links, as the MCP conventions and issue 35
//! list them.

use mcp_telemetry::conventions::{ErrorType, Transport, attr};
use mcp_telemetry::instrument::{ChatRequest, McpRequest, UpstreamEvent};
use mcp_telemetry::{Telemetry, propagation};
use opentelemetry::trace::{SpanKind, Status, TraceContextExt};
use serde_json::json;

use crate::memory::{self, attr};

#[test]
fn a_client_tool_call_span_carries_the_conventions_attributes() {
    let (telemetry, memory) = memory::telemetry(false);
    let params = json!({"name": "get-weather", "arguments": {"city": "Paris"}});
    let op = telemetry.client_request(
        &McpRequest::new("tools/call", Some(&params))
            .server("weather")
            .session("sess-1")
            .protocol_version("2025-06-18")
            .transport(Transport::Http(Some("1.1")))
            .peer("127.0.0.1", Some(8080)),
    );
    assert!(op.is_recording());
    op.set_request_id(7);
    drop(op);

    let span = memory.named("tools/call get-weather");
    assert_eq!(span.span_kind, SpanKind::Client);
    for (key, value) in [
        (attr::MCP_METHOD_NAME, "tools/call"),
        (attr::GEN_AI_TOOL_NAME, "get-weather"),
        (attr::GEN_AI_OPERATION_NAME, "execute_tool"),
        (attr::JSONRPC_REQUEST_ID, "7"),
        (attr::MCP_SESSION_ID, "sess-1"),
        (attr::MCP_PROTOCOL_VERSION, "2025-06-18"),
        (attr::NETWORK_TRANSPORT, "tcp"),
        (attr::NETWORK_PROTOCOL_NAME, "http"),
        (attr::NETWORK_PROTOCOL_VERSION, "1.1"),
        (attr::SERVER_ADDRESS, "127.0.0.1"),
        (attr::SERVER_PORT, "8080"),
        (attr::MCP_HARNESS_SERVER, "weather"),
    ] {
        assert_eq!(attr(&span, key).as_deref(), Some(value), "{key}");
    }
    assert_eq!(attr(&span, attr::CLIENT_ADDRESS), None);
    assert_eq!(attr(&span, attr::ERROR_TYPE), None);
    assert_eq!(span.status, Status::Unset);
    // Content is opt-in: off by default, even when the site hands it over.
    assert_eq!(attr(&span, attr::GEN_AI_TOOL_CALL_ARGUMENTS), None);
}

#[test]
fn stdio_list_resource_and_prompt_spans_are_named_by_method_and_target() {
    let (telemetry, memory) = memory::telemetry(false);
    drop(telemetry.client_request(&McpRequest::new("tools/list", None).transport(Transport::Stdio)));
    let read = json!({"uri": "file:///etc/motd"});
    drop(telemetry.client_request(&McpRequest::new("resources/read", Some(&read))));
    let get = json!({"name": "summarize"});
    drop(telemetry.client_request(&McpRequest::new("prompts/get", Some(&get))));

    let list = memory.named("tools/list");
    assert_eq!(attr(&list, attr::NETWORK_TRANSPORT).as_deref(), Some("pipe"));
    assert_eq!(attr(&list, attr::NETWORK_PROTOCOL_NAME), None);
    assert_eq!(attr(&list, attr::GEN_AI_OPERATION_NAME), None);
    // A resource URI is an attribute, never part of the name (unbounded cardinality).
    let read = memory.named("resources/read");
    assert_eq!(attr(&read, attr::MCP_RESOURCE_URI).as_deref(), Some("file:///etc/motd"));
    let get = memory.named("prompts/get summarize");
    assert_eq!(attr(&get, attr::GEN_AI_PROMPT_NAME).as_deref(), Some("summarize"));
    assert_eq!(attr(&get, attr::GEN_AI_TOOL_NAME), None);
}

#[test]
fn failures_set_error_type_and_an_error_status() {
    let (telemetry, memory) = memory::telemetry(false);
    let cases = [
        ("a", ErrorType::JsonRpc(-32602), Some("Invalid params: city"), "-32602"),
        ("b", ErrorType::Timeout, None, "timeout"),
        ("c", ErrorType::Refused, Some("denied by rule no-shell"), "refused"),
        ("d", ErrorType::Transport("connection_closed"), None, "connection_closed"),
    ];
    for (tool, error, message, _) in &cases {
        let params = json!({ "name": tool });
        let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
        op.fail(error, *message);
        // The first failure is the one kept.
        op.fail(&ErrorType::Other, Some("later"));
    }
    let params = json!({"name": "e"});
    let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
    op.tool_result(true, Some(&json!({"content": [], "isError": true})));
    drop(op);

    for (tool, _, message, value) in cases {
        let span = memory.named(&format!("tools/call {tool}"));
        assert_eq!(attr(&span, attr::ERROR_TYPE).as_deref(), Some(value), "{tool}");
        // Capture is off: the message (a server's, which may quote the arguments) stays home.
        let _ = message;
        assert_eq!(span.status, Status::error(""), "{tool}");
    }
    let rpc = memory.named("tools/call a");
    assert_eq!(attr(&rpc, attr::RPC_RESPONSE_STATUS_CODE).as_deref(), Some("-32602"));
    let tool_error = memory.named("tools/call e");
    assert_eq!(attr(&tool_error, attr::ERROR_TYPE).as_deref(), Some("tool_error"));
    assert!(matches!(tool_error.status, Status::Error { .. }));
}

#[test]
fn a_server_span_continues_the_trace_its_meta_carries_and_links_the_transports() {
    let (telemetry, memory) = memory::telemetry(false);
    // The client side: a CLIENT span whose context goes into the request's `_meta`.
    let mut params = json!({"name": "echo", "arguments": {}});
    let client = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
    client.inject(&mut params);
    let traceparent = propagation::meta_traceparent(Some(&params)).unwrap().to_owned();
    let client_cx = client.context();
    // An HTTP hop of its own, carried in headers.
    let mut headers = http::HeaderMap::new();
    let transport_cx = opentelemetry::Context::new().with_remote_span_context(opentelemetry::trace::SpanContext::new(
        opentelemetry::trace::TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
        opentelemetry::trace::SpanId::from_hex("b7ad6b7169203331").unwrap(),
        opentelemetry::trace::TraceFlags::SAMPLED,
        true,
        Default::default(),
    ));
    propagation::inject_headers(&transport_cx, &mut headers);

    // The server side, as `serve` does it.
    let server =
        telemetry.received(&McpRequest::new("tools/call", Some(&params)).peer("10.0.0.9", Some(51000)), Some(&headers));
    drop(server);
    drop(client);

    let spans = memory.spans();
    let client_span = spans.iter().find(|s| s.span_kind == SpanKind::Client).unwrap();
    let server_span = spans.iter().find(|s| s.span_kind == SpanKind::Server).unwrap();
    let client_sc = client_cx.span().span_context().clone();
    assert_eq!(client_span.span_kind, SpanKind::Client);
    assert_eq!(traceparent, format!("00-{}-{}-01", client_sc.trace_id(), client_sc.span_id()));
    assert_eq!(server_span.name, "tools/call echo");
    assert_eq!(server_span.span_context.trace_id(), client_sc.trace_id());
    assert_eq!(server_span.parent_span_id, client_sc.span_id());
    assert!(server_span.parent_span_is_remote);
    assert_eq!(attr(server_span, attr::CLIENT_ADDRESS).as_deref(), Some("10.0.0.9"));
    assert_eq!(attr(server_span, attr::CLIENT_PORT).as_deref(), Some("51000"));
    assert_eq!(attr(server_span, attr::SERVER_ADDRESS), None);
    let links: Vec<_> = server_span.links.iter().map(|l| l.span_context.span_id().to_string()).collect();
    assert_eq!(links, ["b7ad6b7169203331"]);
}

#[tokio::test]
async fn operations_started_in_scope_are_children() {
    let (telemetry, memory) = memory::telemetry(false);
    let task = telemetry.invoke_agent(Some("mcp-harness"), Some("conv-1"));
    let t = telemetry.clone();
    task.in_scope(async move {
        let mut chat = t.chat(&ChatRequest::new("anthropic", "claude-x"));
        chat.chat_usage(120, 30);
        chat.chat_response(Some("claude-x-2"), Some("msg_1"), &["tool_use"]);
        drop(chat);
        let tool = t.execute_tool("mcp__fs__read", Some("call_1"));
        tool.policy("allow", Some("read-only"));
        let inner = tool.in_scope(async { t.client_request(&McpRequest::new("tools/call", None)) }).await;
        drop(inner);
        drop(tool);
    })
    .await;
    drop(task);

    let agent = memory.named("invoke_agent mcp-harness");
    let chat = memory.named("chat claude-x");
    let tool = memory.named("execute_tool mcp__fs__read");
    let call = memory.named("tools/call");
    let agent_id = agent.span_context.span_id();
    assert_eq!(chat.parent_span_id, agent_id);
    assert_eq!(tool.parent_span_id, agent_id);
    assert_eq!(call.parent_span_id, tool.span_context.span_id());
    assert_eq!(call.span_context.trace_id(), agent.span_context.trace_id());
    assert_eq!(attr(&agent, attr::GEN_AI_OPERATION_NAME).as_deref(), Some("invoke_agent"));
    assert_eq!(attr(&agent, attr::GEN_AI_CONVERSATION_ID).as_deref(), Some("conv-1"));
    assert_eq!(chat.span_kind, SpanKind::Client);
    for (key, value) in [
        (attr::GEN_AI_OPERATION_NAME, "chat"),
        (attr::GEN_AI_PROVIDER_NAME, "anthropic"),
        (attr::GEN_AI_REQUEST_MODEL, "claude-x"),
        (attr::GEN_AI_RESPONSE_MODEL, "claude-x-2"),
        (attr::GEN_AI_RESPONSE_ID, "msg_1"),
        (attr::GEN_AI_USAGE_INPUT_TOKENS, "120"),
        (attr::GEN_AI_USAGE_OUTPUT_TOKENS, "30"),
    ] {
        assert_eq!(attr(&chat, key).as_deref(), Some(value), "{key}");
    }
    assert!(attr(&chat, attr::GEN_AI_RESPONSE_FINISH_REASONS).unwrap().contains("tool_use"));
    assert_eq!(attr(&tool, attr::MCP_HARNESS_POLICY_DECISION).as_deref(), Some("allow"));
    assert_eq!(attr(&tool, attr::MCP_HARNESS_POLICY_RULE).as_deref(), Some("read-only"));
    assert_eq!(attr(&tool, attr::GEN_AI_TOOL_CALL_ID).as_deref(), Some("call_1"));
}

/// With capture on, an error's message is the status description; names a client or server
/// made too long stand as `_OTHER` in span names and histograms.
#[test]
fn an_error_message_goes_out_with_capture_only_and_long_names_are_other() {
    let (telemetry, memory) = memory::telemetry(true);
    let params = json!({"name": "a"});
    let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
    op.fail(&ErrorType::JsonRpc(-32602), Some("Invalid params: city"));
    drop(op);
    assert_eq!(memory.named("tools/call a").status, Status::error("Invalid params: city"));

    let long = "t".repeat(100_000);
    let params = json!({ "name": long });
    drop(telemetry.client_request(&McpRequest::new("tools/call", Some(&params))));
    drop(telemetry.client_request(&McpRequest::new(&"m".repeat(100_000), None)));
    memory.named("tools/call _OTHER");
    memory.named("_OTHER");
}

#[test]
fn captured_tool_content_is_redacted_and_capped() {
    let (telemetry, memory) = memory::telemetry(true);
    let params = json!({"name": "deploy"});
    let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
    op.tool_arguments(&json!({"env": "prod", "api_key": "sk-live-123", "auth": {"header": "Bearer abc.def"}}));
    op.tool_result(false, Some(&json!({"content": [{"type": "text", "text": "x".repeat(20_000)}]})));
    drop(op);

    let span = memory.named("tools/call deploy");
    let args = attr(&span, attr::GEN_AI_TOOL_CALL_ARGUMENTS).unwrap();
    assert!(args.contains("prod") && args.contains(mcp_safety::redact::HIDDEN), "{args}");
    assert!(!args.contains("sk-live-123") && !args.contains("abc.def"), "{args}");
    let result = attr(&span, attr::GEN_AI_TOOL_CALL_RESULT).unwrap();
    assert!(result.len() <= mcp_telemetry::instrument::MAX_CAPTURED_LEN + '…'.len_utf8(), "{}", result.len());

    // A result too large to read whole is named by its size, its isError still read.
    let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&json!({"name": "big"}))));
    let big = format!(r#"{{"isError":true,"content":[{}0]}}"#, "[[0]],".repeat(200_000));
    op.tool_result_text(&big);
    drop(op);
    let span = memory.named("tools/call big");
    let said = attr(&span, attr::GEN_AI_TOOL_CALL_RESULT).unwrap();
    assert_eq!(said, format!("(a result of {} bytes, not captured)", big.len()));
    assert_eq!(attr(&span, attr::ERROR_TYPE).as_deref(), Some("tool_error"));
}

#[test]
fn upstream_events_become_span_events_of_the_current_operation() {
    let (telemetry, memory) = memory::telemetry(false);
    let op = telemetry.client_request(&McpRequest::new("tools/call", None));
    {
        let _attached = op.context().attach();
        telemetry.upstream(UpstreamEvent::Restart, "fs");
        telemetry.upstream(UpstreamEvent::Publication { generation: 3 }, "fs");
    }
    drop(op);
    let span = memory.named("tools/call");
    let events: Vec<_> = span.events.iter().map(|e| e.name.to_string()).collect();
    assert_eq!(events, ["mcp_harness.upstream.restart", "mcp_harness.upstream.publication"]);
}

#[test]
fn upstream_events_outside_any_span_go_to_the_agent_tasks_in_flight() {
    let (telemetry, memory) = memory::telemetry(false);
    let ended = telemetry.invoke_agent(Some("ended"), None);
    drop(ended);
    let running = telemetry.invoke_agent(Some("running"), None);
    // Told on a thread with no current span, as the supervisor's task does.
    let told = telemetry.clone();
    std::thread::spawn(move || {
        told.upstream(UpstreamEvent::Restart, "fs");
        told.upstream(UpstreamEvent::Publication { generation: 2 }, "fs");
    })
    .join()
    .unwrap();
    drop(running);
    let events = |name: &str| -> Vec<String> {
        memory.named(name).events.iter().map(|e| e.name.to_string()).collect::<Vec<_>>()
    };
    assert_eq!(events("invoke_agent running"), ["mcp_harness.upstream.restart", "mcp_harness.upstream.publication"]);
    assert!(events("invoke_agent ended").is_empty(), "a task that ended hears nothing");
    let publication = memory.named("invoke_agent running").events.get(1).cloned().unwrap();
    assert_eq!(
        publication
            .attributes
            .iter()
            .find(|kv| kv.key.as_str() == attr::MCP_HARNESS_GENERATION)
            .map(|kv| kv.value.to_string()),
        Some("2".to_owned())
    );
}

#[test]
fn off_records_nothing_and_writes_nothing() {
    let telemetry = Telemetry::disabled();
    let mut params = json!({"name": "echo"});
    let mut op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
    assert!(!op.is_recording());
    op.inject(&mut params);
    op.fail(&ErrorType::Timeout, None);
    assert_eq!(params, json!({"name": "echo"}));
    assert!(!op.context().span().span_context().is_valid());
    // Nothing installed: the free functions are off too.
    assert!(!mcp_telemetry::instrument::client_request(&McpRequest::new("tools/list", None)).is_recording());
    assert_eq!(telemetry.render_prometheus(), None);
}

#[test]
fn an_unsampled_span_still_tells_the_server_it_is_unsampled() {
    use opentelemetry_sdk::trace::{Sampler, SdkTracerProvider};
    let memory = memory::Memory::default();
    let provider =
        SdkTracerProvider::builder().with_sampler(Sampler::AlwaysOff).with_simple_exporter(memory.clone()).build();
    let telemetry = Telemetry::from_providers(Some(provider), None, false);
    let mut params = json!({"name": "echo"});
    let op = telemetry.client_request(&McpRequest::new("tools/call", Some(&params)));
    op.inject(&mut params);
    drop(op);
    let traceparent = propagation::meta_traceparent(Some(&params)).unwrap();
    assert!(traceparent.starts_with("00-") && traceparent.ends_with("-00"), "{traceparent}");
    // The server follows the decision: its span is not sampled either.
    let server = telemetry.received(&McpRequest::new("tools/call", Some(&params)), None);
    assert!(!server.context().span().span_context().is_sampled());
    drop(server);
    assert!(memory.spans().is_empty());
}
