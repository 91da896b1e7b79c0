//! The host's telemetry wiring: the observer that gives every request a connection sends a
//! CLIENT span and `traceparent` in `params._meta` (mcp-client's `RequestObserver` port, adapted
//! by `mcp_telemetry::client`), and the supervisor's events as counters.
//!
//! `serve`'s side: the gateway's `ServeObserver` port adapted (a SERVER span per request
//! received, its parent the trace context of the request's `params._meta`), and `/metrics`.
//!
//! Everything reads the process's installed telemetry (`mcp_telemetry::instrument::current`):
//! with none installed there is no observer, and the connections pay nothing.

use std::borrow::Cow;
use std::collections::BTreeSet;
use std::sync::Arc;

use mcp_client::{RequestObserver, ServerState};
use mcp_gateway::{Answered, MetricsSource, Opened, Received, ServeObserver, ServeWatch, SessionGuard};
use mcp_telemetry::Telemetry;
use mcp_telemetry::client::{ClientObserver, Peer};
use mcp_telemetry::conventions::{self, ErrorType, Transport};
use mcp_telemetry::instrument::{ChatRequest, McpRequest, Operation, UpstreamEvent};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::config::{Config, Target};

/// The observer of every server of `config` (each told apart by its connection's label), or
/// `None` when no telemetry is installed.
pub(crate) fn observer(config: &Config) -> Option<Arc<dyn RequestObserver>> {
    let telemetry = mcp_telemetry::instrument::current();
    if !telemetry.is_enabled() {
        return None;
    }
    let peers = config.servers.iter().map(|s| (s.name.clone(), peer(&s.target)));
    ClientObserver::for_servers(&telemetry, peers, Peer::new(Transport::Unknown, None, None))
}

/// How a server is reached: a child's pipes, or a URL's host and port.
fn peer(target: &Target) -> Peer {
    match target {
        Target::Stdio { .. } => Peer::new(Transport::Stdio, None, None),
        Target::Remote(remote) => {
            let url = url::Url::parse(&remote.url).ok();
            let transport = match url.as_ref().map(url::Url::scheme) {
                Some("ws" | "wss") => Transport::WebSocket,
                _ => Transport::Http(None),
            };
            let address = url.as_ref().and_then(|u| u.host_str().map(str::to_owned));
            let port = url.as_ref().and_then(url::Url::port_or_known_default);
            Peer::new(transport, address, port)
        }
    }
}

/// Counts the supervisor's events (starts, restarts of local servers, reconnects of remote
/// ones, start failures) until the set's event stream ends: the task to spawn beside a runtime,
/// `None` when no telemetry is installed.
pub(crate) fn count_events(
    config: &Config,
    servers: &mcp_client::ServerSet,
) -> Option<impl Future<Output = ()> + Send + 'static> {
    let telemetry = mcp_telemetry::instrument::current();
    if !telemetry.is_enabled() {
        return None;
    }
    let mut events = servers.subscribe();
    // Local or remote, as the file said when the runtime started (a reload adding a server
    // makes it remote here: its restarts count as reconnects, which is what they are to it).
    let local: BTreeSet<String> =
        config.servers.iter().filter(|s| matches!(s.target, Target::Stdio { .. })).map(|s| s.name.clone()).collect();
    Some(async move {
        loop {
            match events.recv().await {
                Ok(event) if event.relisted => {
                    // The same connection, a new listing: a publication, not a start.
                    if let Some(generation) = event.generation {
                        telemetry.upstream(UpstreamEvent::Publication { generation }, &event.server);
                    }
                }
                Ok(event) => {
                    let kind = match event.state {
                        ServerState::Connected { .. } => UpstreamEvent::Start,
                        ServerState::Reconnecting { .. } if local.contains(&event.server) => UpstreamEvent::Restart,
                        ServerState::Reconnecting { .. } => UpstreamEvent::Reconnect,
                        ServerState::Failed { .. } => UpstreamEvent::StartFailure,
                        _ => continue,
                    };
                    // Outside any span here: the events go on the agent tasks' spans in flight.
                    telemetry.upstream(kind, &event.server);
                    if let Some(generation) = event.generation {
                        telemetry.upstream(UpstreamEvent::Publication { generation }, &event.server);
                    }
                }
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
            }
        }
    })
}

/// The gateway's observer over the installed telemetry: a SERVER span and
/// `mcp.server.operation.duration` per request `serve` receives; `None` when no telemetry is
/// installed.
pub fn serve_observer() -> Option<Arc<dyn ServeObserver>> {
    let telemetry = mcp_telemetry::instrument::current();
    telemetry.is_enabled().then(|| Arc::new(Served { telemetry }) as Arc<dyn ServeObserver>)
}

/// What `serve --http`'s `GET /metrics` answers with: the installed telemetry's metrics in
/// Prometheus's text format; `None` when it keeps none for a scrape.
pub fn metrics_source() -> Option<Arc<dyn MetricsSource>> {
    let telemetry = mcp_telemetry::instrument::current();
    telemetry.render_prometheus().map(|_| Arc::new(Scraped { telemetry }) as Arc<dyn MetricsSource>)
}

#[derive(Debug)]
struct Scraped {
    telemetry: Telemetry,
}

impl MetricsSource for Scraped {
    fn render(&self) -> Option<String> {
        self.telemetry.render_prometheus()
    }

    fn content_type(&self) -> &'static str {
        Telemetry::PROMETHEUS_CONTENT_TYPE
    }
}

#[derive(Debug)]
struct Served {
    telemetry: Telemetry,
}

impl ServeObserver for Served {
    fn received(&self, request: &Received<'_>) -> Box<dyn ServeWatch> {
        // Read once, for the span's target name, a resource's URI and the `_meta` trace context;
        // every other member (the arguments) is skipped unparsed, and only a `_meta` that is
        // there is built (a request whose params are not JSON is refused by the gateway anyway).
        let read = request.params.and_then(|p| serde_json::from_str::<ReadParams<'_>>(p.get()).ok());
        let name = read.as_ref().and_then(ReadParams::name);
        let uri = read.as_ref().and_then(ReadParams::uri);
        let meta = read.as_ref().and_then(ReadParams::meta);
        let transport = if request.headers.is_some() { Transport::Http(None) } else { Transport::Stdio };
        let mut req = McpRequest::new(request.method, meta.as_ref()).transport(transport);
        req.target = name.as_deref().filter(|_| conventions::names_target(request.method));
        req.resource_uri = uri.as_deref().filter(|_| conventions::names_resource(request.method));
        if let Some(session) = request.session {
            req = req.session(session);
        }
        // A stateless request names its revision in its `_meta` envelope.
        let version = request
            .protocol_version
            .or_else(|| meta.as_ref()?.get("_meta")?.get(mcp_protocol::stateless::META_PROTOCOL_VERSION)?.as_str());
        if let Some(version) = version {
            req = req.protocol_version(version);
        }
        let address = request.peer.map(|p| p.ip().to_string());
        if let (Some(address), Some(peer)) = (&address, request.peer) {
            req = req.peer(address, Some(peer.port()));
        }
        let op = self.telemetry.received(&req, request.headers);
        let answer = match request.method {
            "tools/call" => Reads::Call,
            // The negotiated revision is known from the answer.
            "initialize" => Reads::Initialize,
            _ => Reads::Nothing,
        };
        Box::new(ServedWatch { op, answer })
    }

    fn session(&self, opened: &Opened<'_>) -> Option<SessionGuard> {
        // `mcp.server.session.duration`, recorded when the session ends.
        let transport = if opened.http { Transport::Http(None) } else { Transport::Stdio };
        let mut session = self.telemetry.session(true, transport);
        session.set_protocol_version(opened.protocol_version);
        session.is_recording().then(|| Box::new(session) as SessionGuard)
    }
}

/// What a received request's span and histogram read of its params, borrowed from the
/// request's text (every other member, the arguments among them, is skipped unparsed).
#[derive(serde::Deserialize)]
struct ReadParams<'a> {
    #[serde(borrow, default)]
    name: Option<&'a RawValue>,
    #[serde(borrow, default)]
    uri: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default)]
    meta: Option<&'a RawValue>,
}

impl<'a> ReadParams<'a> {
    /// The tool's or prompt's name, when it is a string.
    fn name(&self) -> Option<Cow<'a, str>> {
        self.name.and_then(json_text)
    }

    /// The resource's URI, when it is a string.
    fn uri(&self) -> Option<Cow<'a, str>> {
        self.uri.and_then(json_text)
    }

    /// `{"_meta": ...}` when the request carries a `_meta` object: what the trace context and
    /// a stateless request's revision are read from.
    fn meta(&self) -> Option<Value> {
        let meta: serde_json::Map<String, Value> = serde_json::from_str(self.meta?.get()).ok()?;
        let mut params = serde_json::Map::new();
        params.insert("_meta".to_owned(), Value::Object(meta));
        Some(Value::Object(params))
    }
}

/// A JSON string's text, borrowed unless it has escapes; `None` for any other value.
fn json_text(raw: &RawValue) -> Option<Cow<'_, str>> {
    match serde_json::from_str::<&str>(raw.get()) {
        Ok(text) => Some(Cow::Borrowed(text)),
        Err(_) => serde_json::from_str::<String>(raw.get()).ok().map(Cow::Owned),
    }
}

/// What a received request's answer is read for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Reads {
    /// A call's `isError` (and result, with capture on).
    Call,
    /// The negotiated `protocolVersion`.
    Initialize,
    Nothing,
}

struct ServedWatch {
    op: Operation,
    answer: Reads,
}

impl ServeWatch for ServedWatch {
    fn enter(&self) -> Box<dyn std::any::Any> {
        // Entered at every poll of the request: with nothing to pass on (metrics only, no
        // trace context received) nothing is made current, and the empty box allocates nothing.
        if !self.op.carries_context() {
            return Box::new(());
        }
        Box::new(self.op.context().attach())
    }

    fn end(mut self: Box<Self>, answer: Answered<'_>) {
        match answer {
            Answered::Result(text) if self.answer == Reads::Initialize => {
                if let Some(version) = mcp_protocol::answered_version(text) {
                    self.op.set_protocol_version(&version);
                }
            }
            // Only the call's `isError` (and, with capture on, the result) is read.
            Answered::Result(text) if self.answer == Reads::Call => self.op.tool_result_text(text),
            Answered::Error(error) => self.op.fail(&ErrorType::JsonRpc(error.code), Some(&error.message)),
            Answered::Cancelled => self.op.fail(&ErrorType::Cancelled, None),
            _ => {}
        }
    }
}

/// The agent's observer over the installed telemetry: `invoke_agent` per task, `chat {model}`
/// per model call (with its token usage), `execute_tool {name}` per tool call; `None` when no
/// telemetry is installed.
pub fn agent_observer() -> Option<Arc<dyn agent_loop::Observer>> {
    let telemetry = mcp_telemetry::instrument::current();
    telemetry.is_enabled().then(|| Arc::new(AgentWatcher { telemetry }) as Arc<dyn agent_loop::Observer>)
}

/// Hooks that put each policy decision, and the rule that made it, on the call's
/// `execute_tool` span (current while the call is decided) and count it; `None` when no
/// telemetry is installed.
pub fn policy_hooks() -> Option<Arc<dyn agent_loop::Hooks>> {
    let telemetry = mcp_telemetry::instrument::current();
    telemetry.is_enabled().then(|| Arc::new(PolicyHooks { telemetry }) as Arc<dyn agent_loop::Hooks>)
}

struct AgentWatcher {
    telemetry: Telemetry,
}

impl agent_loop::Observer for AgentWatcher {
    fn task(&self) -> Box<dyn agent_loop::Watch> {
        Box::new(OpWatch(self.telemetry.invoke_agent(None, None)))
    }

    fn model_call(&self, provider: &str, model: &str) -> Box<dyn agent_loop::Watch> {
        Box::new(OpWatch(self.telemetry.chat(&ChatRequest::new(provider, model))))
    }

    fn tool_call(&self, name: &str, call_id: &str) -> Box<dyn agent_loop::Watch> {
        Box::new(OpWatch(self.telemetry.execute_tool(name, Some(call_id))))
    }
}

struct OpWatch(Operation);

impl agent_loop::Watch for OpWatch {
    fn enter(&self) -> Box<dyn std::any::Any> {
        Box::new(self.0.context().attach())
    }

    fn answered(&mut self, stop_reason: &agent_loop::StopReason, usage: &agent_loop::Usage) {
        self.0.chat_response(None, None, &[finish_reason(stop_reason)]);
        self.0.chat_usage(usage.input_tokens, usage.output_tokens);
    }

    fn failed(&mut self, kind: &'static str, message: Option<&str>) {
        let error = match kind {
            "tool_error" => ErrorType::ToolError,
            "refused" => ErrorType::Refused,
            "timeout" => ErrorType::Timeout,
            _ => ErrorType::Other,
        };
        self.0.fail(&error, message);
    }
}

/// `gen_ai.response.finish_reasons`' value of a stop reason (the conventions' names).
fn finish_reason(reason: &agent_loop::StopReason) -> &str {
    use agent_loop::StopReason as S;
    match reason {
        S::EndTurn => "stop",
        S::ToolUse => "tool_call",
        S::MaxTokens => "length",
        S::StopSequence => "stop",
        S::Refusal => "content_filter",
        S::Other(other) => other.as_str(),
        _ => "other",
    }
}

struct PolicyHooks {
    telemetry: Telemetry,
}

#[async_trait::async_trait]
impl agent_loop::Hooks for PolicyHooks {
    fn decided(&self, _call: &agent_loop::CallInfo, decision: &agent_loop::GateDecision<'_>) {
        self.telemetry.policy_current(decision_name(&decision.decision), decision.rule);
    }
}

/// `mcp_harness.policy.decision`'s value.
fn decision_name(decision: &agent_loop::CallDecision) -> &'static str {
    use agent_loop::CallDecision as D;
    match decision {
        D::Allowed => "allowed",
        D::Approved => "approved",
        D::Refused => "refused",
        D::Blocked => "blocked",
        D::Rejected => "rejected",
        D::Deferred => "deferred",
        _ => "other",
    }
}

/// The gateway's decisions as telemetry sees them (its `AuditSink` port): each `tools/call`
/// `serve` decided, counted and put on its SERVER span (current while the call is handled);
/// `None` when no telemetry is installed. The rule is left out: the gateway's says which
/// approval or refusal made it, text too varied for a metric's label.
pub fn policy_audit() -> Option<Arc<dyn mcp_gateway::AuditSink>> {
    let telemetry = mcp_telemetry::instrument::current();
    telemetry.is_enabled().then(|| Arc::new(PolicyAudit { telemetry }) as Arc<dyn mcp_gateway::AuditSink>)
}

#[derive(Debug)]
struct PolicyAudit {
    telemetry: Telemetry,
}

impl mcp_gateway::AuditSink for PolicyAudit {
    fn record(&self, record: &mcp_gateway::AuditRecord) {
        self.count(record.decision.clone());
    }

    fn counts_only(&self) -> bool {
        true
    }

    fn count(&self, decision: agent_loop::CallDecision) {
        self.telemetry.policy_current(decision_name(&decision), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(params: &str) -> (Option<String>, Option<String>, Option<Value>) {
        let raw = RawValue::from_string(params.to_owned()).unwrap();
        let read = serde_json::from_str::<ReadParams<'_>>(raw.get()).unwrap();
        (read.name().map(Cow::into_owned), read.uri().map(Cow::into_owned), read.meta())
    }

    #[test]
    fn received_params_are_read_for_their_name_uri_and_meta_alone() {
        let (name, uri, meta) = read(r#"{"name":"echo","arguments":{"big":[1,2,3]}}"#);
        assert_eq!((name.as_deref(), uri, meta), (Some("echo"), None, None));
        // Escaped text is read whole; a member of another type is none, and costs the others nothing.
        let (name, uri, _) = read(r#"{"name":"a\"b\u00e9","uri":7}"#);
        assert_eq!((name.as_deref(), uri), (Some("a\"bé"), None));
        let (_, uri, meta) = read(r#"{"uri":"file:///x","_meta":{"traceparent":"00-x","progressToken":1}}"#);
        assert_eq!(uri.as_deref(), Some("file:///x"));
        assert_eq!(meta, Some(serde_json::json!({"_meta": {"traceparent": "00-x", "progressToken": 1}})));
        // A `_meta` that is not an object carries nothing.
        assert_eq!(read(r#"{"_meta":[1]}"#).2, None);
    }
}
