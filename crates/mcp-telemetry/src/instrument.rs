//! The small API instrumentation sites call: an [`Operation`] guard per MCP request, model
//! call, tool call or agent task, recording its span and its histogram when it drops; counters
//! for upstream events and policy decisions; a guard per session.
//!
//! With telemetry off (nothing installed, or [`Telemetry::disabled`]) every function returns an
//! empty guard after one atomic load, and every method on it returns at once: nothing is
//! allocated, formatted or timed (`examples/overhead.rs` prints what a guard costs, off and on).
//!
//! Parents: a guard's span is a child of the current OpenTelemetry context (the thread's, set
//! while an [`Operation::in_scope`] future is polled), or of the remote context a server
//! handed in ([`Telemetry::server_request`]'s `parent`).

use std::borrow::Cow;
use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, OnceLock};
use std::task::{Context as TaskContext, Poll};
use std::time::Instant;

use opentelemetry::metrics::{Counter, Histogram, Meter};
use opentelemetry::trace::{Link, Span as _, SpanKind, Status, TraceContextExt, Tracer as _};
use opentelemetry::{Context, KeyValue};
use serde_json::Value;

use crate::conventions::{self, ErrorType, Transport, attr, metric, value};
use crate::providers::{Inner, Telemetry};

/// Longest a captured tool argument or result may be on a span, in bytes of JSON.
pub const MAX_CAPTURED_LEN: usize = 8 * 1024;

/// The largest tool result (JSON text) read whole to be captured: past it, the span says its
/// size instead (reading 16 MiB of dense JSON into values to keep 8 KiB of it could take GBs).
pub const MAX_CAPTURE_READ: usize = 1 << 20;

static GLOBAL: OnceLock<Telemetry> = OnceLock::new();

pub(crate) fn install(t: Telemetry) -> bool {
    GLOBAL.set(t).is_ok()
}

/// The process's telemetry ([`Telemetry::disabled`] when none was installed).
pub fn current() -> Telemetry {
    GLOBAL.get().cloned().unwrap_or_else(Telemetry::disabled)
}

/// The metric instruments, made once per meter.
pub(crate) struct Instruments {
    client_op: Histogram<f64>,
    server_op: Histogram<f64>,
    client_session: Histogram<f64>,
    server_session: Histogram<f64>,
    gen_ai_op: Histogram<f64>,
    gen_ai_tokens: Histogram<u64>,
    starts: Counter<u64>,
    restarts: Counter<u64>,
    reconnects: Counter<u64>,
    start_failures: Counter<u64>,
    policy: Counter<u64>,
}

impl Instruments {
    pub(crate) fn new(meter: &Meter) -> Self {
        let seconds = |name: &'static str, description: &'static str, buckets: &[f64]| {
            meter
                .f64_histogram(name)
                .with_unit("s")
                .with_description(description)
                .with_boundaries(buckets.to_vec())
                .build()
        };
        let counter = |name: &'static str, unit: &'static str, description: &'static str| {
            meter.u64_counter(name).with_unit(unit).with_description(description).build()
        };
        Self {
            client_op: seconds(
                metric::MCP_CLIENT_OPERATION_DURATION,
                "The duration of the MCP request or notification as observed on the sender from the time it was sent until the response or ack is received.",
                &metric::MCP_DURATION_BUCKETS,
            ),
            server_op: seconds(
                metric::MCP_SERVER_OPERATION_DURATION,
                "MCP request or notification duration as observed on the receiver from the time it was received until the result or ack is sent.",
                &metric::MCP_DURATION_BUCKETS,
            ),
            client_session: seconds(
                metric::MCP_CLIENT_SESSION_DURATION,
                "The duration of the MCP session as observed on the MCP client.",
                &metric::MCP_DURATION_BUCKETS,
            ),
            server_session: seconds(
                metric::MCP_SERVER_SESSION_DURATION,
                "The duration of the MCP session as observed on the MCP server.",
                &metric::MCP_DURATION_BUCKETS,
            ),
            gen_ai_op: seconds(
                metric::GEN_AI_CLIENT_OPERATION_DURATION,
                "GenAI operation duration.",
                &metric::GEN_AI_DURATION_BUCKETS,
            ),
            gen_ai_tokens: meter
                .u64_histogram(metric::GEN_AI_CLIENT_TOKEN_USAGE)
                .with_unit("{token}")
                .with_description("Number of input and output tokens used.")
                .with_boundaries(metric::GEN_AI_TOKEN_BUCKETS.to_vec())
                .build(),
            starts: counter(metric::UPSTREAM_STARTS, "{start}", "Upstream MCP servers started."),
            restarts: counter(
                metric::UPSTREAM_RESTARTS,
                "{restart}",
                "Upstream stdio servers restarted after they exited.",
            ),
            reconnects: counter(metric::UPSTREAM_RECONNECTS, "{reconnect}", "Remote upstream servers reconnected."),
            start_failures: counter(
                metric::UPSTREAM_START_FAILURES,
                "{failure}",
                "Upstream starts and connects that failed.",
            ),
            policy: counter(metric::POLICY_DECISIONS, "{decision}", "Policy decisions on tool calls."),
        }
    }
}

/// What an MCP request's span needs at its start. Borrowed: nothing is copied when
/// telemetry is off.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct McpRequest<'a> {
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The request's params, read only when telemetry is on (for the target and the URI).
    pub params: Option<&'a Value>,
    /// The tool or prompt named (the span name's target and `gen_ai.tool.name` /
    /// `gen_ai.prompt.name`); when `None`, read from `params` (see [`conventions::mcp_target`]).
    pub target: Option<&'a str>,
    /// The resource URI of `resources/read` and `resources/(un)subscribe`; when `None`, read
    /// from `params`.
    pub resource_uri: Option<&'a str>,
    /// The host's name of the upstream server (client side).
    pub server: Option<&'a str>,
    /// The MCP session id, where there is one.
    pub session_id: Option<&'a str>,
    /// The negotiated protocol revision.
    pub protocol_version: Option<&'a str>,
    /// How the session is carried.
    pub transport: Transport,
    /// The peer's address: `server.address` on client spans, `client.address` on server spans.
    pub peer_address: Option<&'a str>,
    /// The peer's port.
    pub peer_port: Option<u16>,
}

impl<'a> McpRequest<'a> {
    /// A request of `method` with its `params`: nothing is read from them until a span or a
    /// metric needs it, so this costs nothing when telemetry is off.
    #[inline]
    pub fn new(method: &'a str, params: Option<&'a Value>) -> Self {
        Self { method, params, ..Self::default() }
    }

    /// The tool or prompt the request names (see [`conventions::mcp_target`]).
    pub fn target_name(&self) -> Option<&'a str> {
        self.target.or_else(|| conventions::mcp_target(self.method, self.params))
    }

    /// The resource URI the request names.
    pub fn resource(&self) -> Option<&'a str> {
        self.resource_uri
            .or_else(|| conventions::names_resource(self.method).then(|| self.params?.get("uri")?.as_str()).flatten())
    }

    /// With the host's server name.
    #[inline]
    pub fn server(mut self, server: &'a str) -> Self {
        self.server = Some(server);
        self
    }

    /// With the session id.
    #[inline]
    pub fn session(mut self, id: &'a str) -> Self {
        self.session_id = Some(id);
        self
    }

    /// With the protocol revision.
    #[inline]
    pub fn protocol_version(mut self, version: &'a str) -> Self {
        self.protocol_version = Some(version);
        self
    }

    /// With the transport.
    #[inline]
    pub fn transport(mut self, transport: Transport) -> Self {
        self.transport = transport;
        self
    }

    /// With the peer's address and port.
    #[inline]
    pub fn peer(mut self, address: &'a str, port: Option<u16>) -> Self {
        self.peer_address = Some(address);
        self.peer_port = port;
        self
    }
}

/// What a model call's span needs at its start.
#[derive(Debug, Clone, Copy, Default)]
#[non_exhaustive]
pub struct ChatRequest<'a> {
    /// `gen_ai.provider.name` (`anthropic`, `openai`).
    pub provider: &'a str,
    /// `gen_ai.request.model`.
    pub model: &'a str,
    /// The API's host.
    pub server_address: Option<&'a str>,
    /// The API's port.
    pub server_port: Option<u16>,
}

impl<'a> ChatRequest<'a> {
    /// A call to `model` of `provider`.
    #[inline]
    pub fn new(provider: &'a str, model: &'a str) -> Self {
        Self { provider, model, ..Self::default() }
    }

    /// With the API's address.
    #[inline]
    pub fn server(mut self, address: &'a str, port: Option<u16>) -> Self {
        self.server_address = Some(address);
        self.server_port = port;
        self
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    McpClient,
    McpServer,
    Chat,
    Tool,
    Agent,
}

impl Kind {
    fn span_kind(self) -> SpanKind {
        match self {
            Kind::McpClient | Kind::Chat => SpanKind::Client,
            Kind::McpServer => SpanKind::Server,
            Kind::Tool | Kind::Agent => SpanKind::Internal,
        }
    }
}

/// One operation in flight: its span, and its histogram recorded when it drops. Empty (and
/// free) when telemetry is off.
#[must_use = "the operation is recorded when the guard drops"]
#[derive(Default)]
pub struct Operation {
    active: Option<Box<Active>>,
}

struct Active {
    kind: Kind,
    telemetry: Arc<Inner>,
    start: Instant,
    /// The span's context (the parent's when spans are not exported).
    cx: Context,
    /// Whether `cx` holds a span of ours that records.
    span: bool,
    /// The histogram's attributes.
    metric: Vec<KeyValue>,
    error: bool,
    /// The token usage of a model call, recorded at drop beside the duration.
    tokens: Option<(u64, u64)>,
    /// An agent task's id in [`Inner::tasks`], while it hears upstream events.
    task: Option<u64>,
}

impl std::fmt::Debug for Operation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.active {
            None => f.write_str("Operation(off)"),
            Some(a) => f.debug_struct("Operation").field("kind", &a.kind).field("span", &a.span).finish(),
        }
    }
}

impl Operation {
    /// Whether anything is recorded.
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.active.is_some()
    }

    /// The context of this operation's span, for [`crate::propagation`] and for futures run
    /// inside it; an empty context when off.
    pub fn context(&self) -> Context {
        self.active.as_ref().map_or_else(Context::new, |a| a.cx.clone())
    }

    /// Whether this operation's context carries anything to pass on: a span (its own, or the
    /// remote parent a request brought) or baggage. An operation that carries nothing (metrics
    /// without spans, for a request that brought no trace context) need not be made current.
    pub fn carries_context(&self) -> bool {
        self.active.as_ref().is_some_and(|a| a.cx.has_active_span() || crate::propagation::has_baggage(&a.cx))
    }

    /// Writes this span's trace context into `params._meta` (nothing when off).
    #[inline]
    pub fn inject(&self, params: &mut Value) {
        // Whatever the sampler decided travels (an unsampled span's `traceparent` says so, and
        // the server's parent-based sampler follows it); with spans off, the context this
        // operation was started in travels as it is (a request `serve` passes on).
        if let Some(a) = &self.active {
            crate::propagation::inject_meta(&a.cx, params);
        }
    }

    /// Runs `fut` with this operation as the current context, so operations started inside it
    /// are its children. When off, `fut` runs as it is.
    pub fn in_scope<F: Future>(&self, fut: F) -> InScope<F> {
        let cx = self.active.as_ref().filter(|a| a.cx.span().span_context().is_valid()).map(|a| a.cx.clone());
        InScope { cx, fut }
    }

    fn span_attr(&self, kv: impl FnOnce() -> KeyValue) {
        if let Some(a) = &self.active
            && a.span
        {
            a.cx.span().set_attribute(kv());
        }
    }

    /// `jsonrpc.request.id` (client and server spans; never on the histogram).
    #[inline]
    pub fn set_request_id(&self, id: impl std::fmt::Display) {
        self.span_attr(|| KeyValue::new(attr::JSONRPC_REQUEST_ID, id.to_string()));
    }

    /// `mcp.session.id`, when it is known only after the start (an `initialize`'s answer).
    pub fn set_session_id(&self, id: &str) {
        self.span_attr(|| KeyValue::new(attr::MCP_SESSION_ID, id.to_owned()));
    }

    /// `mcp.protocol.version`, when it is known only after the start.
    pub fn set_protocol_version(&mut self, version: &str) {
        if let Some(a) = &mut self.active {
            let kv = KeyValue::new(attr::MCP_PROTOCOL_VERSION, version.to_owned());
            if a.span {
                a.cx.span().set_attribute(kv.clone());
            }
            a.metric.push(kv);
        }
    }

    /// The operation failed: `error.type` (span and histogram), `rpc.response.status_code` for
    /// a JSON-RPC error, and an error status whose description is `message` (the JSON-RPC
    /// error's message; cut to 256 characters; for a tool call or a prompt, which take
    /// arguments, only when content capture is on). The first failure set is kept.
    pub fn fail(&mut self, error: &ErrorType, message: Option<&str>) {
        let Some(a) = &mut self.active else { return };
        if a.error {
            return;
        }
        a.error = true;
        let kind = KeyValue::new(attr::ERROR_TYPE, error.value());
        let code = error.rpc_code().map(|c| KeyValue::new(attr::RPC_RESPONSE_STATUS_CODE, c.to_string()));
        if a.span {
            let span = a.cx.span();
            span.set_attribute(kind.clone());
            if let Some(code) = &code {
                span.set_attribute(code.clone());
            }
            // A failed call's message is a server's text, which often quotes the arguments: it
            // goes out only where they may (content capture on), like them.
            let quotes_arguments = a.metric.iter().any(|kv| {
                kv.key.as_str() == attr::MCP_METHOD_NAME
                    && matches!(kv.value.as_str().as_ref(), "tools/call" | "prompts/get")
            });
            let description = message
                .filter(|_| a.telemetry.capture_tool_content || !quotes_arguments)
                .map(|m| mcp_safety::text::one_line(m, 256))
                .unwrap_or_default();
            span.set_status(Status::error(description));
        }
        a.metric.push(kind);
        if let Some(code) = code {
            a.metric.push(code);
        }
    }

    /// A tool call's result: `isError: true` fails it as `tool_error`; with content capture on,
    /// the result goes on the span as `gen_ai.tool.call.result`, redacted and capped.
    pub fn tool_result(&mut self, is_error: bool, result: Option<&Value>) {
        if self.active.is_none() {
            return;
        }
        if is_error {
            self.fail(&ErrorType::ToolError, None);
        } else if let Some(result) = result {
            self.capture(attr::GEN_AI_TOOL_CALL_RESULT, result);
        }
    }

    /// [`Operation::tool_result`] of a result as JSON text: only its `isError` is read, and the
    /// whole result only when content capture puts it on the span (a call's answer is
    /// otherwise not parsed twice); text that is not JSON fails the operation.
    pub fn tool_result_text(&mut self, result: &str) {
        let Some(a) = &self.active else { return };
        let capture = a.span && a.telemetry.capture_tool_content;
        if capture && result.len() > MAX_CAPTURE_READ {
            // Redaction needs the structure, and a prefix of the text could show a secret it
            // would have hidden: a result this large is named, not read into values.
            let note = format!("(a result of {} bytes, not captured)", result.len());
            a.cx.span().set_attribute(KeyValue::new(attr::GEN_AI_TOOL_CALL_RESULT, note));
            match result_is_error(result) {
                Ok(is_error) => self.tool_result(is_error, None),
                Err(_) => self.fail(&ErrorType::Other, Some("the result is not JSON")),
            }
            return;
        }
        if capture {
            match serde_json::from_str::<Value>(result) {
                Ok(v) => {
                    let is_error = v.get("isError").and_then(Value::as_bool).unwrap_or(false);
                    self.tool_result(is_error, Some(&v));
                }
                Err(_) => self.fail(&ErrorType::Other, Some("the result is not JSON")),
            }
            return;
        }
        match result_is_error(result) {
            Ok(is_error) => self.tool_result(is_error, None),
            Err(_) => self.fail(&ErrorType::Other, Some("the result is not JSON")),
        }
    }

    /// A tool call's arguments, on the span as `gen_ai.tool.call.arguments` (redacted, capped)
    /// when content capture is on.
    #[inline]
    pub fn tool_arguments(&self, arguments: &Value) {
        self.capture(attr::GEN_AI_TOOL_CALL_ARGUMENTS, arguments);
    }

    fn capture(&self, key: &'static str, v: &Value) {
        if let Some(a) = &self.active
            && a.span
            && a.telemetry.capture_tool_content
        {
            a.cx.span().set_attribute(KeyValue::new(key, captured(v)));
        }
    }

    /// The policy's decision on a tool call and the rule that made it: attributes of the
    /// `execute_tool` span, and one count of `mcp_harness.policy.decisions`.
    pub fn policy(&self, decision: &str, rule: Option<&str>) {
        let Some(a) = &self.active else { return };
        if a.span {
            let span = a.cx.span();
            span.set_attribute(KeyValue::new(attr::MCP_HARNESS_POLICY_DECISION, decision.to_owned()));
            if let Some(rule) = rule {
                span.set_attribute(KeyValue::new(attr::MCP_HARNESS_POLICY_RULE, rule.to_owned()));
            }
        }
        count_policy(&a.telemetry, decision, rule);
    }

    /// A model call's answer: the model that answered, the answer's id and why it stopped.
    pub fn chat_response(&self, model: Option<&str>, id: Option<&str>, finish_reasons: &[&str]) {
        let Some(a) = &self.active else { return };
        if !a.span {
            return;
        }
        let span = a.cx.span();
        if let Some(m) = model {
            span.set_attribute(KeyValue::new(attr::GEN_AI_RESPONSE_MODEL, m.to_owned()));
        }
        if let Some(id) = id {
            span.set_attribute(KeyValue::new(attr::GEN_AI_RESPONSE_ID, id.to_owned()));
        }
        if !finish_reasons.is_empty() {
            let reasons: Vec<opentelemetry::StringValue> =
                finish_reasons.iter().map(|r| opentelemetry::StringValue::from((*r).to_owned())).collect();
            span.set_attribute(KeyValue::new(
                attr::GEN_AI_RESPONSE_FINISH_REASONS,
                opentelemetry::Value::Array(opentelemetry::Array::String(reasons)),
            ));
        }
    }

    /// A model call's token usage: span attributes, and `gen_ai.client.token.usage` (input and
    /// output) recorded when the guard drops.
    /// The counts are the model's: each is taken up to [`MAX_REPORTED_TOKENS`].
    pub fn chat_usage(&mut self, input_tokens: u64, output_tokens: u64) {
        let Some(a) = &mut self.active else { return };
        // Past i64 an attribute would go negative, and the histogram's u64 sum overflowed
        // (a panic where overflow is checked) after two calls near u64::MAX.
        let (input_tokens, output_tokens) =
            (input_tokens.min(MAX_REPORTED_TOKENS), output_tokens.min(MAX_REPORTED_TOKENS));
        if a.span {
            let span = a.cx.span();
            span.set_attribute(KeyValue::new(attr::GEN_AI_USAGE_INPUT_TOKENS, input_tokens as i64));
            span.set_attribute(KeyValue::new(attr::GEN_AI_USAGE_OUTPUT_TOKENS, output_tokens as i64));
        }
        a.tokens = Some((input_tokens, output_tokens));
    }

    /// An event on this operation's span (a supervisor's restart seen by a call).
    pub fn event(&self, name: &'static str, attributes: Vec<KeyValue>) {
        if let Some(a) = &self.active
            && a.span
        {
            a.cx.span().add_event(name, attributes);
        }
    }
}

/// The most tokens one model call is recorded as using (2^40, about 10^12): far past any real
/// answer, and millions of such calls still sum within a histogram's count.
pub const MAX_REPORTED_TOKENS: u64 = 1 << 40;

impl Drop for Operation {
    #[inline]
    fn drop(&mut self) {
        if let Some(a) = self.active.take() {
            a.finish();
        }
    }
}

impl Active {
    /// Records the histogram and ends the span.
    fn finish(self: Box<Self>) {
        let a = self;
        if let Some(id) = a.task
            && let Ok(mut tasks) = a.telemetry.tasks.lock()
        {
            tasks.retain(|(t, _)| *t != id);
        }
        let seconds = a.start.elapsed().as_secs_f64();
        if let Some(ins) = &a.telemetry.instruments {
            match a.kind {
                Kind::McpClient => ins.client_op.record(seconds, &a.metric),
                Kind::McpServer => ins.server_op.record(seconds, &a.metric),
                Kind::Chat => {
                    ins.gen_ai_op.record(seconds, &a.metric);
                    if let Some((input, output)) = a.tokens {
                        let mut attrs = a.metric.clone();
                        attrs.retain(|kv| kv.key.as_str() != attr::ERROR_TYPE);
                        attrs.push(KeyValue::new(attr::GEN_AI_TOKEN_TYPE, "input"));
                        ins.gen_ai_tokens.record(input, &attrs);
                        if let Some(last) = attrs.last_mut() {
                            *last = KeyValue::new(attr::GEN_AI_TOKEN_TYPE, "output");
                        }
                        ins.gen_ai_tokens.record(output, &attrs);
                    }
                }
                Kind::Tool | Kind::Agent => {}
            }
        }
        if a.span {
            a.cx.span().end();
        }
    }
}

pin_project_lite::pin_project! {
    /// Runs a future with an operation's context current (see [`Operation::in_scope`]).
    #[must_use = "futures do nothing unless polled"]
    pub struct InScope<F> {
        cx: Option<Context>,
        #[pin]
        fut: F,
    }
}

impl<F> std::fmt::Debug for InScope<F> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("InScope").field("recording", &self.cx.is_some()).finish()
    }
}

impl<F: Future> Future for InScope<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut TaskContext<'_>) -> Poll<F::Output> {
        let this = self.project();
        let _attached = this.cx.as_ref().map(|c| c.clone().attach());
        this.fut.poll(cx)
    }
}

/// The `isError` of a tool call's result (JSON text), read without building the result:
/// `false` when absent.
fn result_is_error(result: &str) -> Result<bool, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct Flag {
        #[serde(rename = "isError", default)]
        is_error: Option<bool>,
    }
    serde_json::from_str::<Flag>(result).map(|f| f.is_error.unwrap_or(false))
}

fn captured(v: &Value) -> String {
    let text = mcp_safety::redact::redact_json(v).to_string();
    if text.len() <= MAX_CAPTURED_LEN {
        return text;
    }
    format!("{}…", mcp_safety::text::prefix(&text, MAX_CAPTURED_LEN))
}

fn count_policy(t: &Inner, decision: &str, rule: Option<&str>) {
    if let Some(ins) = &t.instruments {
        let mut attrs = vec![KeyValue::new(attr::MCP_HARNESS_POLICY_DECISION, decision.to_owned())];
        if let Some(rule) = rule {
            attrs.push(KeyValue::new(attr::MCP_HARNESS_POLICY_RULE, rule.to_owned()));
        }
        ins.policy.add(1, &attrs);
    }
}

fn start(
    t: &Arc<Inner>,
    kind: Kind,
    name: impl FnOnce() -> Cow<'static, str>,
    parent: &Context,
    links: Vec<Link>,
    span_attrs: Vec<KeyValue>,
    metric: Vec<KeyValue>,
) -> Operation {
    let (cx, span) = match &t.tracer {
        Some(tracer) => {
            let span = tracer
                .span_builder(name())
                .with_kind(kind.span_kind())
                .with_attributes(span_attrs)
                .with_links(links)
                .start_with_context(tracer, parent);
            let recording = span.is_recording();
            (parent.with_span(span), recording)
        }
        None => (parent.clone(), false),
    };
    Operation {
        active: Some(Box::new(Active {
            kind,
            telemetry: t.clone(),
            start: Instant::now(),
            cx,
            span,
            metric,
            error: false,
            tokens: None,
            task: None,
        })),
    }
}

/// The span's attributes (only when `spans`: with spans off they would be built for nothing)
/// and the histogram's.
fn mcp_attrs(req: &McpRequest<'_>, server_side: bool, spans: bool) -> (Vec<KeyValue>, Vec<KeyValue>) {
    let mut metric = Vec::with_capacity(6);
    metric.push(KeyValue::new(attr::MCP_METHOD_NAME, conventions::method_name(req.method)));
    let target = req.target_name();
    if let Some(t) = target {
        let key = if req.method == "prompts/get" { attr::GEN_AI_PROMPT_NAME } else { attr::GEN_AI_TOOL_NAME };
        metric.push(KeyValue::new(key, conventions::bounded_name(t)));
    }
    if req.method == "tools/call" {
        metric.push(KeyValue::new(attr::GEN_AI_OPERATION_NAME, value::EXECUTE_TOOL));
    }
    if let Some(v) = req.protocol_version {
        metric.push(KeyValue::new(attr::MCP_PROTOCOL_VERSION, v.to_owned()));
    }
    if let Some(t) = req.transport.network_transport() {
        metric.push(KeyValue::new(attr::NETWORK_TRANSPORT, t));
    }
    if let Some(p) = req.transport.protocol_name() {
        metric.push(KeyValue::new(attr::NETWORK_PROTOCOL_NAME, p));
    }
    if let Some(v) = req.transport.protocol_version() {
        metric.push(KeyValue::new(attr::NETWORK_PROTOCOL_VERSION, v));
    }
    if !spans {
        return (Vec::new(), metric);
    }
    let mut span = metric.clone();
    if let Some(s) = req.session_id {
        span.push(KeyValue::new(attr::MCP_SESSION_ID, s.to_owned()));
    }
    if let Some(u) = req.resource() {
        span.push(KeyValue::new(attr::MCP_RESOURCE_URI, u.to_owned()));
    }
    if let Some(s) = req.server {
        span.push(KeyValue::new(attr::MCP_HARNESS_SERVER, s.to_owned()));
    }
    let (addr, port) =
        if server_side { (attr::CLIENT_ADDRESS, attr::CLIENT_PORT) } else { (attr::SERVER_ADDRESS, attr::SERVER_PORT) };
    if let Some(a) = req.peer_address {
        span.push(KeyValue::new(addr, a.to_owned()));
        if let Some(p) = req.peer_port {
            span.push(KeyValue::new(port, i64::from(p)));
        }
    }
    (span, metric)
}

impl Telemetry {
    /// A CLIENT span for a request the host sends, and `mcp.client.operation.duration`.
    #[inline]
    pub fn client_request(&self, req: &McpRequest<'_>) -> Operation {
        match &self.inner {
            None => Operation::default(),
            Some(t) => Self::client_span(t, req),
        }
    }

    fn client_span(t: &Arc<Inner>, req: &McpRequest<'_>) -> Operation {
        let (span, metric) = mcp_attrs(req, false, t.tracer.is_some());
        start(
            t,
            Kind::McpClient,
            || conventions::mcp_span_name(req.method, req.target_name()),
            &Context::current(),
            Vec::new(),
            span,
            metric,
        )
    }

    /// A SERVER span for a request `serve` received, its parent read from the request's
    /// `params._meta` and a link to the context of its HTTP `headers`, if any (what `serve`
    /// calls; [`Telemetry::server_request`] with the contexts read). Nothing is read when off.
    #[inline]
    pub fn received(&self, req: &McpRequest<'_>, headers: Option<&http::HeaderMap>) -> Operation {
        let Some(t) = &self.inner else { return Operation::default() };
        // The parent travels on even with spans off (to the upstreams); the link is a span's.
        let parent = crate::propagation::extract_meta(req.params);
        let link = headers.filter(|_| t.tracer.is_some()).map(crate::propagation::extract_headers);
        self.server_request(req, &parent, link.as_ref())
    }

    /// A SERVER span for a request `serve` received, and `mcp.server.operation.duration`:
    /// `parent` is the context its `params._meta` carried ([`crate::propagation::extract_meta`]),
    /// `link` the transport's (HTTP headers), recorded as a link when it is a valid one.
    pub fn server_request(&self, req: &McpRequest<'_>, parent: &Context, link: Option<&Context>) -> Operation {
        let Some(t) = &self.inner else { return Operation::default() };
        let (span, metric) = mcp_attrs(req, true, t.tracer.is_some());
        let links = link
            .map(|l| l.span().span_context().clone())
            .filter(|sc| sc.is_valid())
            .map(|sc| vec![Link::with_context(sc)])
            .unwrap_or_default();
        start(
            t,
            Kind::McpServer,
            || conventions::mcp_span_name(req.method, req.target_name()),
            parent,
            links,
            span,
            metric,
        )
    }

    /// A CLIENT span `chat {model}` for a model call, and `gen_ai.client.operation.duration`.
    pub fn chat(&self, req: &ChatRequest<'_>) -> Operation {
        let Some(t) = &self.inner else { return Operation::default() };
        let mut metric = vec![
            KeyValue::new(attr::GEN_AI_OPERATION_NAME, value::CHAT),
            KeyValue::new(attr::GEN_AI_PROVIDER_NAME, req.provider.to_owned()),
            KeyValue::new(attr::GEN_AI_REQUEST_MODEL, req.model.to_owned()),
        ];
        if let Some(a) = req.server_address {
            metric.push(KeyValue::new(attr::SERVER_ADDRESS, a.to_owned()));
            if let Some(p) = req.server_port {
                metric.push(KeyValue::new(attr::SERVER_PORT, i64::from(p)));
            }
        }
        start(
            t,
            Kind::Chat,
            || conventions::chat_span_name(req.model).into(),
            &Context::current(),
            Vec::new(),
            metric.clone(),
            metric,
        )
    }

    /// An INTERNAL span `execute_tool {name}` for a tool call of the agent (`tool`: the name the
    /// model used; `call_id`: the model's id of the call).
    pub fn execute_tool(&self, tool: &str, call_id: Option<&str>) -> Operation {
        let Some(t) = &self.inner else { return Operation::default() };
        let mut span = vec![
            KeyValue::new(attr::GEN_AI_OPERATION_NAME, value::EXECUTE_TOOL),
            KeyValue::new(attr::GEN_AI_TOOL_NAME, tool.to_owned()),
            KeyValue::new(attr::GEN_AI_TOOL_TYPE, value::FUNCTION),
        ];
        if let Some(id) = call_id {
            span.push(KeyValue::new(attr::GEN_AI_TOOL_CALL_ID, id.to_owned()));
        }
        start(
            t,
            Kind::Tool,
            || conventions::execute_tool_span_name(tool).into(),
            &Context::current(),
            Vec::new(),
            span,
            Vec::new(),
        )
    }

    /// An INTERNAL span `invoke_agent` for one task of the agent (`agent`: its name, if it has
    /// one; `conversation`: the session's id).
    pub fn invoke_agent(&self, agent: Option<&str>, conversation: Option<&str>) -> Operation {
        let Some(t) = &self.inner else { return Operation::default() };
        let mut span = vec![KeyValue::new(attr::GEN_AI_OPERATION_NAME, value::INVOKE_AGENT)];
        if let Some(a) = agent {
            span.push(KeyValue::new(attr::GEN_AI_AGENT_NAME, a.to_owned()));
        }
        if let Some(c) = conversation {
            span.push(KeyValue::new(attr::GEN_AI_CONVERSATION_ID, c.to_owned()));
        }
        let mut op = start(
            t,
            Kind::Agent,
            || conventions::invoke_agent_span_name(agent).into(),
            &Context::current(),
            Vec::new(),
            span,
            Vec::new(),
        );
        // While it runs, the task's span hears the upstream events that happen outside any span.
        if let Some(a) = op.active.as_mut().filter(|a| a.span) {
            let id = t.next_task.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Ok(mut tasks) = t.tasks.lock() {
                tasks.push((id, a.cx.clone()));
                a.task = Some(id);
            }
        }
        op
    }

    /// Something happened to an upstream: its counter (per server), and an event on the
    /// current span, if one records (a call or a step that waited for it), else on every agent
    /// task's span in flight (the supervisor tells of restarts on tasks of its own).
    pub fn upstream(&self, event: UpstreamEvent, server: &str) {
        let Some(t) = &self.inner else { return };
        let attrs = [KeyValue::new(attr::MCP_HARNESS_SERVER, server.to_owned())];
        if let Some(ins) = &t.instruments {
            match event {
                UpstreamEvent::Start => ins.starts.add(1, &attrs),
                UpstreamEvent::Restart => ins.restarts.add(1, &attrs),
                UpstreamEvent::Reconnect => ins.reconnects.add(1, &attrs),
                UpstreamEvent::StartFailure => ins.start_failures.add(1, &attrs),
                UpstreamEvent::Publication { .. } => {}
            }
        }
        let attributes = || {
            let mut attributes = attrs.to_vec();
            attributes.push(KeyValue::new(attr::MCP_HARNESS_UPSTREAM_EVENT, event.name()));
            if let UpstreamEvent::Publication { generation } = event {
                attributes.push(KeyValue::new(attr::MCP_HARNESS_GENERATION, generation as i64));
            }
            attributes
        };
        let cx = Context::current();
        let span = cx.span();
        if span.is_recording() {
            span.add_event(event.event_name(), attributes());
        } else if let Ok(tasks) = t.tasks.lock() {
            for (_, task) in tasks.iter() {
                task.span().add_event(event.event_name(), attributes());
            }
        }
    }

    /// A policy decision about the call whose span is current (an `execute_tool` span entered
    /// while the call is decided, what a host's decision hook sees): the decision and the rule
    /// on that span, and one count.
    pub fn policy_current(&self, decision: &str, rule: Option<&str>) {
        let Some(t) = &self.inner else { return };
        let cx = Context::current();
        let span = cx.span();
        if span.is_recording() {
            span.set_attribute(KeyValue::new(attr::MCP_HARNESS_POLICY_DECISION, decision.to_owned()));
            if let Some(rule) = rule {
                span.set_attribute(KeyValue::new(attr::MCP_HARNESS_POLICY_RULE, rule.to_owned()));
            }
        }
        count_policy(t, decision, rule);
    }

    /// A policy decision made outside an `execute_tool` span (the gateway's gate): one count.
    pub fn policy_decision(&self, decision: &str, rule: Option<&str>) {
        if let Some(t) = &self.inner {
            count_policy(t, decision, rule);
        }
    }

    /// A session: `mcp.client.session.duration` (or `.server.` with `server_side`) recorded when
    /// the guard drops.
    pub fn session(&self, server_side: bool, transport: Transport) -> Session {
        let Some(t) = &self.inner else { return Session::default() };
        if t.instruments.is_none() {
            return Session::default();
        }
        let mut attrs = Vec::with_capacity(4);
        if let Some(v) = transport.network_transport() {
            attrs.push(KeyValue::new(attr::NETWORK_TRANSPORT, v));
        }
        if let Some(v) = transport.protocol_name() {
            attrs.push(KeyValue::new(attr::NETWORK_PROTOCOL_NAME, v));
        }
        Session {
            active: Some(Box::new(SessionActive { telemetry: t.clone(), server_side, start: Instant::now(), attrs })),
        }
    }
}

/// An MCP session's lifetime, recorded as its duration when it drops.
#[must_use = "the session is recorded when the guard drops"]
#[derive(Default)]
pub struct Session {
    active: Option<Box<SessionActive>>,
}

struct SessionActive {
    telemetry: Arc<Inner>,
    server_side: bool,
    start: Instant,
    attrs: Vec<KeyValue>,
}

impl std::fmt::Debug for Session {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Session").field("recording", &self.active.is_some()).finish()
    }
}

impl Session {
    /// Whether anything is recorded (a metrics provider is set).
    #[inline]
    pub fn is_recording(&self) -> bool {
        self.active.is_some()
    }

    /// The negotiated revision, once known.
    pub fn set_protocol_version(&mut self, version: &str) {
        if let Some(a) = &mut self.active {
            a.attrs.push(KeyValue::new(attr::MCP_PROTOCOL_VERSION, version.to_owned()));
        }
    }

    /// The session ended with an error.
    pub fn fail(&mut self, error: &ErrorType) {
        if let Some(a) = &mut self.active
            && !a.attrs.iter().any(|kv| kv.key.as_str() == attr::ERROR_TYPE)
        {
            a.attrs.push(KeyValue::new(attr::ERROR_TYPE, error.value()));
        }
    }
}

impl Drop for Session {
    fn drop(&mut self) {
        let Some(a) = self.active.take() else { return };
        let SessionActive { telemetry: t, server_side, start, attrs } = *a;
        if let Some(ins) = &t.instruments {
            let h = if server_side { &ins.server_session } else { &ins.client_session };
            h.record(start.elapsed().as_secs_f64(), &attrs);
        }
    }
}

/// What happened to an upstream server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpstreamEvent {
    /// Connected: its first start, or once more after a restart or reconnect.
    Start,
    /// A stdio server restarted after it exited.
    Restart,
    /// A remote server reconnected.
    Reconnect,
    /// A start or connect failed.
    StartFailure,
    /// A new generation of its listing was published.
    Publication {
        /// The generation.
        generation: u64,
    },
}

impl UpstreamEvent {
    fn name(self) -> &'static str {
        match self {
            UpstreamEvent::Start => "start",
            UpstreamEvent::Restart => "restart",
            UpstreamEvent::Reconnect => "reconnect",
            UpstreamEvent::StartFailure => "start_failure",
            UpstreamEvent::Publication { .. } => "publication",
        }
    }

    fn event_name(self) -> &'static str {
        match self {
            UpstreamEvent::Start => "mcp_harness.upstream.start",
            UpstreamEvent::Restart => "mcp_harness.upstream.restart",
            UpstreamEvent::Reconnect => "mcp_harness.upstream.reconnect",
            UpstreamEvent::StartFailure => "mcp_harness.upstream.start_failure",
            UpstreamEvent::Publication { .. } => "mcp_harness.upstream.publication",
        }
    }
}

// The free functions: what instrumentation sites call, against the installed telemetry.

/// [`Telemetry::client_request`] on the installed telemetry.
#[inline]
pub fn client_request(req: &McpRequest<'_>) -> Operation {
    GLOBAL.get().map_or_else(Operation::default, |t| t.client_request(req))
}

/// [`Telemetry::received`] on the installed telemetry.
#[inline]
pub fn received(req: &McpRequest<'_>, headers: Option<&http::HeaderMap>) -> Operation {
    GLOBAL.get().map_or_else(Operation::default, |t| t.received(req, headers))
}

/// [`Telemetry::server_request`] on the installed telemetry.
#[inline]
pub fn server_request(req: &McpRequest<'_>, parent: &Context, link: Option<&Context>) -> Operation {
    GLOBAL.get().map_or_else(Operation::default, |t| t.server_request(req, parent, link))
}

/// [`Telemetry::chat`] on the installed telemetry.
pub fn chat(req: &ChatRequest<'_>) -> Operation {
    GLOBAL.get().map_or_else(Operation::default, |t| t.chat(req))
}

/// [`Telemetry::execute_tool`] on the installed telemetry.
pub fn execute_tool(tool: &str, call_id: Option<&str>) -> Operation {
    GLOBAL.get().map_or_else(Operation::default, |t| t.execute_tool(tool, call_id))
}

/// [`Telemetry::invoke_agent`] on the installed telemetry.
pub fn invoke_agent(agent: Option<&str>, conversation: Option<&str>) -> Operation {
    GLOBAL.get().map_or_else(Operation::default, |t| t.invoke_agent(agent, conversation))
}

/// [`Telemetry::upstream`] on the installed telemetry.
pub fn upstream(event: UpstreamEvent, server: &str) {
    if let Some(t) = GLOBAL.get() {
        t.upstream(event, server);
    }
}

/// [`Telemetry::policy_decision`] on the installed telemetry.
pub fn policy_decision(decision: &str, rule: Option<&str>) {
    if let Some(t) = GLOBAL.get() {
        t.policy_decision(decision, rule);
    }
}

/// [`Telemetry::session`] on the installed telemetry.
#[inline]
pub fn session(server_side: bool, transport: Transport) -> Session {
    GLOBAL.get().map_or_else(Session::default, |t| t.session(server_side, transport))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_off_guard_is_one_null_pointer_and_reads_nothing() {
        // What makes "off" free: the guards are a null `Option<Box<_>>` (no allocation, nothing
        // to drop), and a request's params are not looked at until a span needs them.
        assert_eq!(std::mem::size_of::<Operation>(), std::mem::size_of::<usize>());
        assert_eq!(std::mem::size_of::<Session>(), std::mem::size_of::<usize>());
        let params = serde_json::json!({"name": "echo", "uri": "file:///x"});
        let req = McpRequest::new("tools/call", Some(&params));
        assert_eq!((req.target, req.resource_uri), (None, None));
        assert_eq!(req.target_name(), Some("echo"));
        assert_eq!(req.resource(), None);
        assert_eq!(McpRequest::new("resources/read", Some(&params)).resource(), Some("file:///x"));
        let op = Telemetry::disabled().client_request(&req);
        assert!(!op.is_recording());
    }
}
