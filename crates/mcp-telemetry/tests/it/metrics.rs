//! The metrics as `/metrics` shows them: Prometheus text with the conventions' buckets and
//! counts equal to the operations recorded.

use std::collections::BTreeMap;

use mcp_telemetry::config::TelemetryConfig;
use mcp_telemetry::conventions::{ErrorType, Transport, metric};
use mcp_telemetry::instrument::{ChatRequest, McpRequest, UpstreamEvent};
use mcp_telemetry::{Options, Telemetry};
use serde_json::json;

fn prometheus() -> Telemetry {
    let config = TelemetryConfig::resolve(&Default::default(), &BTreeMap::new(), "metrics-test").unwrap();
    Telemetry::start(&config, &Options::default().with_prometheus()).unwrap()
}

/// The value of the sample line `name{labels...}` whose labels include every one of `labels`
/// (and none of those written `!label`).
fn sample(text: &str, name: &str, labels: &[&str]) -> Option<f64> {
    text.lines().filter(|l| !l.starts_with('#')).find_map(|line| {
        let (series, value) = line.rsplit_once(' ')?;
        let (series_name, rest) = series.split_once('{').unwrap_or((series, ""));
        let has = |l: &&str| match l.strip_prefix('!') {
            Some(absent) => !rest.contains(absent),
            None => rest.contains(l),
        };
        (series_name == name && labels.iter().all(has)).then(|| value.parse().ok())?
    })
}

#[test]
fn histograms_count_each_operation_by_method_and_error() {
    let telemetry = prometheus();
    assert!(telemetry.is_enabled());
    let call = json!({"name": "echo"});
    for _ in 0..3 {
        drop(telemetry.client_request(&McpRequest::new("tools/call", Some(&call)).transport(Transport::Stdio)));
    }
    let mut failed = telemetry.client_request(&McpRequest::new("tools/call", Some(&call)).transport(Transport::Stdio));
    failed.fail(&ErrorType::JsonRpc(-32602), Some("bad"));
    drop(failed);
    for _ in 0..2 {
        let parent = opentelemetry::Context::new();
        drop(telemetry.server_request(&McpRequest::new("tools/list", None), &parent, None));
    }
    let text = telemetry.render_prometheus().unwrap();

    let ok =
        ["mcp_method_name=\"tools/call\"", "gen_ai_tool_name=\"echo\"", "network_transport=\"pipe\"", "!error_type"];
    assert_eq!(sample(&text, "mcp_client_operation_duration_seconds_count", &ok), Some(3.0), "{text}");
    assert_eq!(sample(&text, "mcp_client_operation_duration_seconds_count", &["error_type=\"-32602\""]), Some(1.0));
    assert_eq!(
        sample(&text, "mcp_server_operation_duration_seconds_count", &["mcp_method_name=\"tools/list\""]),
        Some(2.0)
    );
    // Every bucket of the conventions, and +Inf, on the histogram.
    for bound in metric::MCP_DURATION_BUCKETS {
        let le = format!("le=\"{bound}\"");
        assert!(
            sample(&text, "mcp_server_operation_duration_seconds_bucket", &[le.as_str()]).is_some(),
            "no bucket {le}:\n{text}"
        );
    }
    assert_eq!(sample(&text, "mcp_server_operation_duration_seconds_bucket", &["le=\"+Inf\""]), Some(2.0));
    // A session id never becomes a label (unbounded cardinality).
    assert!(!text.contains("mcp_session_id"));
}

#[test]
fn model_calls_counters_and_sessions_are_rendered() {
    let telemetry = prometheus();
    let mut chat = telemetry.chat(&ChatRequest::new("anthropic", "claude-x"));
    chat.chat_usage(100, 7);
    drop(chat);
    for event in [UpstreamEvent::Start, UpstreamEvent::Restart, UpstreamEvent::Restart, UpstreamEvent::StartFailure] {
        telemetry.upstream(event, "fs");
    }
    telemetry.upstream(UpstreamEvent::Reconnect, "remote");
    telemetry.policy_decision("deny", Some("no-shell"));
    drop(telemetry.session(false, Transport::Stdio));
    let text = telemetry.render_prometheus().unwrap();

    let chat = ["gen_ai_provider_name=\"anthropic\"", "gen_ai_request_model=\"claude-x\""];
    assert_eq!(sample(&text, "gen_ai_client_operation_duration_seconds_count", &chat), Some(1.0), "{text}");
    let input = [chat[0], chat[1], "gen_ai_token_type=\"input\""];
    let output = [chat[0], chat[1], "gen_ai_token_type=\"output\""];
    let token_metric = text
        .lines()
        .find_map(|l| {
            l.split_once("{")
                .map(|(n, _)| n)
                .filter(|n| n.starts_with("gen_ai_client_token_usage") && n.ends_with("_sum"))
        })
        .unwrap_or_else(|| panic!("no token usage:\n{text}"))
        .to_owned();
    assert_eq!(sample(&text, &token_metric, &input), Some(100.0));
    assert_eq!(sample(&text, &token_metric, &output), Some(7.0));

    let fs = ["mcp_harness_server=\"fs\""];
    assert_eq!(sample(&text, "mcp_harness_upstream_starts_total", &fs), Some(1.0), "{text}");
    assert_eq!(sample(&text, "mcp_harness_upstream_restarts_total", &fs), Some(2.0));
    assert_eq!(sample(&text, "mcp_harness_upstream_start_failures_total", &fs), Some(1.0));
    assert_eq!(sample(&text, "mcp_harness_upstream_reconnects_total", &["mcp_harness_server=\"remote\""]), Some(1.0));
    assert_eq!(
        sample(&text, "mcp_harness_policy_decisions_total", &["mcp_harness_policy_decision=\"deny\""]),
        Some(1.0)
    );
    assert_eq!(sample(&text, "mcp_client_session_duration_seconds_count", &["network_transport=\"pipe\""]), Some(1.0));
    assert!(
        text.contains("# TYPE mcp_client_operation_duration_seconds histogram")
            || !text.contains("mcp_client_operation")
    );
}

/// A model's token counts are its own to say: two near u64::MAX overflowed the histogram's sum
/// (a panic where overflow is checked, as in tests).
#[test]
fn absurd_token_counts_are_recorded_capped() {
    let telemetry = prometheus();
    for _ in 0..2 {
        let mut chat = telemetry.chat(&ChatRequest::new("openai", "m"));
        chat.chat_usage(u64::MAX, u64::MAX - 1);
        drop(chat);
    }
    let text = telemetry.render_prometheus().unwrap();
    let cap = mcp_telemetry::instrument::MAX_REPORTED_TOKENS as f64;
    let sum = text
        .lines()
        .find(|l| l.starts_with("gen_ai_client_token_usage") && l.contains("_sum{") && l.contains("\"input\""))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok());
    assert_eq!(sum, Some(2.0 * cap), "{text}");
}

#[test]
fn prometheus_is_only_there_when_asked_for() {
    let config = TelemetryConfig::resolve(&Default::default(), &BTreeMap::new(), "t").unwrap();
    let telemetry = Telemetry::start(&config, &Options::default()).unwrap();
    assert!(!telemetry.is_enabled());
    assert_eq!(telemetry.render_prometheus(), None);
}

/// With metrics alone, a request that brought no trace context carries none to make current (a
/// server need not enter it at every poll); one that brought a parent carries it on, as does
/// baggage.
#[test]
fn only_an_operation_with_a_parent_or_baggage_carries_a_context() {
    use opentelemetry::KeyValue;
    use opentelemetry::baggage::BaggageExt as _;
    use opentelemetry::trace::{SpanContext, SpanId, TraceContextExt as _, TraceFlags, TraceId};

    let telemetry = prometheus();
    let request = McpRequest::new("tools/call", None);
    let empty = opentelemetry::Context::new();
    assert!(!telemetry.server_request(&request, &empty, None).carries_context());
    let parent = empty.with_remote_span_context(SpanContext::new(
        TraceId::from_hex("0af7651916cd43dd8448eb211c80319c").unwrap(),
        SpanId::from_hex("b7ad6b7169203331").unwrap(),
        TraceFlags::SAMPLED,
        true,
        Default::default(),
    ));
    assert!(telemetry.server_request(&request, &parent, None).carries_context());
    let baggage = opentelemetry::Context::new().with_baggage([KeyValue::new("tenant", "a")]);
    assert!(telemetry.server_request(&request, &baggage, None).carries_context());
    assert!(!Telemetry::disabled().server_request(&request, &parent, None).carries_context());
}
