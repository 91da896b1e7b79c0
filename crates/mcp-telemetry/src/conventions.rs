//! The semantic conventions in one place: attribute keys, span names, `error.type` rules,
//! metric instruments and their buckets. From the OpenTelemetry MCP conventions
//! (`docs/gen-ai/mcp.md`) and GenAI conventions (spans, agent spans, metrics), both at
//! "development" stability: the names live here so a rename is one edit.

/// Attribute keys.
pub mod attr {
    /// The JSON-RPC method (`tools/call`, `initialize`, ...). Required on MCP spans and metrics.
    pub const MCP_METHOD_NAME: &str = "mcp.method.name";
    /// The MCP session's id (`Mcp-Session-Id`, or the host's own id of a stdio session).
    pub const MCP_SESSION_ID: &str = "mcp.session.id";
    /// The negotiated protocol revision (`2025-06-18`).
    pub const MCP_PROTOCOL_VERSION: &str = "mcp.protocol.version";
    /// The resource a request names (`resources/read`, `resources/subscribe`, ...).
    pub const MCP_RESOURCE_URI: &str = "mcp.resource.uri";
    /// The request's id as a string; never set for notifications.
    pub const JSONRPC_REQUEST_ID: &str = "jsonrpc.request.id";
    /// The JSON-RPC error code of an error answer, as a string.
    pub const RPC_RESPONSE_STATUS_CODE: &str = "rpc.response.status_code";
    /// The class of error an operation ended with (see [`super::ErrorType`]).
    pub const ERROR_TYPE: &str = "error.type";
    /// The tool's name (the server's own name on MCP spans; the name the model used on
    /// `execute_tool`).
    pub const GEN_AI_TOOL_NAME: &str = "gen_ai.tool.name";
    /// The id the model gave a tool call.
    pub const GEN_AI_TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
    /// `function` for MCP tools and built-ins.
    pub const GEN_AI_TOOL_TYPE: &str = "gen_ai.tool.type";
    /// Opt-in, redacted: a tool call's arguments.
    pub const GEN_AI_TOOL_CALL_ARGUMENTS: &str = "gen_ai.tool.call.arguments";
    /// Opt-in, redacted: a tool call's result.
    pub const GEN_AI_TOOL_CALL_RESULT: &str = "gen_ai.tool.call.result";
    /// The prompt a `prompts/get` names.
    pub const GEN_AI_PROMPT_NAME: &str = "gen_ai.prompt.name";
    /// `execute_tool` on tool calls, `chat` on model calls, `invoke_agent` on a task.
    pub const GEN_AI_OPERATION_NAME: &str = "gen_ai.operation.name";
    /// The model provider (`anthropic`, `openai`).
    pub const GEN_AI_PROVIDER_NAME: &str = "gen_ai.provider.name";
    /// The model asked for.
    pub const GEN_AI_REQUEST_MODEL: &str = "gen_ai.request.model";
    /// The model that answered.
    pub const GEN_AI_RESPONSE_MODEL: &str = "gen_ai.response.model";
    /// The answer's id.
    pub const GEN_AI_RESPONSE_ID: &str = "gen_ai.response.id";
    /// Why the model stopped, one per choice.
    pub const GEN_AI_RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
    /// Input tokens of a model call.
    pub const GEN_AI_USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
    /// Output tokens of a model call.
    pub const GEN_AI_USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
    /// `input` or `output` on `gen_ai.client.token.usage`.
    pub const GEN_AI_TOKEN_TYPE: &str = "gen_ai.token.type";
    /// The agent's name on `invoke_agent`.
    pub const GEN_AI_AGENT_NAME: &str = "gen_ai.agent.name";
    /// The conversation (session) a task belongs to.
    pub const GEN_AI_CONVERSATION_ID: &str = "gen_ai.conversation.id";
    /// `pipe` for stdio, `tcp` for HTTP and WebSocket.
    pub const NETWORK_TRANSPORT: &str = "network.transport";
    /// `http` or `websocket`.
    pub const NETWORK_PROTOCOL_NAME: &str = "network.protocol.name";
    /// `1.1`, `2`.
    pub const NETWORK_PROTOCOL_VERSION: &str = "network.protocol.version";
    /// The server's host (client spans).
    pub const SERVER_ADDRESS: &str = "server.address";
    /// The server's port (client spans).
    pub const SERVER_PORT: &str = "server.port";
    /// The client's address (server spans).
    pub const CLIENT_ADDRESS: &str = "client.address";
    /// The client's port (server spans).
    pub const CLIENT_PORT: &str = "client.port";
    /// The host's name of the upstream server (ours: the configuration's server name).
    pub const MCP_HARNESS_SERVER: &str = "mcp_harness.server";
    /// The policy's decision on a tool call (`allow`, `confirm`, `deny`, ...).
    pub const MCP_HARNESS_POLICY_DECISION: &str = "mcp_harness.policy.decision";
    /// The rule that made the decision, as the policy names it.
    pub const MCP_HARNESS_POLICY_RULE: &str = "mcp_harness.policy.rule";
    /// What happened to an upstream (`start`, `restart`, `reconnect`, `start_failure`,
    /// `publication`).
    pub const MCP_HARNESS_UPSTREAM_EVENT: &str = "mcp_harness.upstream.event";
    /// The generation a publication made.
    pub const MCP_HARNESS_GENERATION: &str = "mcp_harness.generation";
}

/// Well-known values.
pub mod value {
    /// `gen_ai.operation.name` of a tool call.
    pub const EXECUTE_TOOL: &str = "execute_tool";
    /// `gen_ai.operation.name` of a model call.
    pub const CHAT: &str = "chat";
    /// `gen_ai.operation.name` of an agent's task.
    pub const INVOKE_AGENT: &str = "invoke_agent";
    /// `network.transport` of stdio.
    pub const PIPE: &str = "pipe";
    /// `network.transport` of HTTP and WebSocket.
    pub const TCP: &str = "tcp";
    /// `gen_ai.tool.type` of MCP tools and built-ins.
    pub const FUNCTION: &str = "function";
    /// `error.type` of a `CallToolResult` with `isError: true`.
    pub const TOOL_ERROR: &str = "tool_error";
    /// `error.type` of an operation that ran out of time.
    pub const TIMEOUT: &str = "timeout";
    /// `error.type` of a call the host refused before sending (policy, approval, a stale
    /// listing, arguments that do not match the schema shown).
    pub const REFUSED: &str = "refused";
    /// `error.type` of a call cancelled before its answer.
    pub const CANCELLED: &str = "cancelled";
    /// `error.type` when nothing more specific applies.
    pub const OTHER: &str = "_OTHER";
}

/// Metric instrument names, units and bucket boundaries.
pub mod metric {
    /// Duration of an MCP request as the host (client) saw it, seconds.
    pub const MCP_CLIENT_OPERATION_DURATION: &str = "mcp.client.operation.duration";
    /// Duration of an MCP request `serve` handled, seconds.
    pub const MCP_SERVER_OPERATION_DURATION: &str = "mcp.server.operation.duration";
    /// Duration of an MCP session as the host saw it, seconds.
    pub const MCP_CLIENT_SESSION_DURATION: &str = "mcp.client.session.duration";
    /// Duration of an MCP session `serve` held, seconds.
    pub const MCP_SERVER_SESSION_DURATION: &str = "mcp.server.session.duration";
    /// Duration of a model call, seconds.
    pub const GEN_AI_CLIENT_OPERATION_DURATION: &str = "gen_ai.client.operation.duration";
    /// Tokens of a model call, by `gen_ai.token.type`.
    pub const GEN_AI_CLIENT_TOKEN_USAGE: &str = "gen_ai.client.token.usage";
    /// Upstream servers started (first start of a configured server).
    pub const UPSTREAM_STARTS: &str = "mcp_harness.upstream.starts";
    /// Upstream stdio servers restarted after they exited.
    pub const UPSTREAM_RESTARTS: &str = "mcp_harness.upstream.restarts";
    /// Remote upstreams reconnected.
    pub const UPSTREAM_RECONNECTS: &str = "mcp_harness.upstream.reconnects";
    /// Starts and connects that failed.
    pub const UPSTREAM_START_FAILURES: &str = "mcp_harness.upstream.start_failures";
    /// Policy decisions on tool calls, by decision (and rule).
    pub const POLICY_DECISIONS: &str = "mcp_harness.policy.decisions";

    /// The MCP conventions' boundaries for every `mcp.*.duration` histogram.
    pub const MCP_DURATION_BUCKETS: [f64; 14] =
        [0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];
    /// The GenAI conventions' boundaries for `gen_ai.client.operation.duration`.
    pub const GEN_AI_DURATION_BUCKETS: [f64; 14] =
        [0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92];
    /// The GenAI conventions' boundaries for `gen_ai.client.token.usage`.
    pub const GEN_AI_TOKEN_BUCKETS: [f64; 14] = [
        1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0, 262144.0, 1048576.0, 4194304.0, 16777216.0,
        67108864.0,
    ];
}

/// The class of error an operation ended with: the value of `error.type`.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorType {
    /// The server answered with a JSON-RPC error: its code (`-32602`); the span's status
    /// description is the error's message.
    JsonRpc(i64),
    /// A `CallToolResult` with `isError: true`: `tool_error`.
    ToolError,
    /// The operation ran out of time: `timeout`.
    Timeout,
    /// The host refused the call before sending it: `refused`.
    Refused,
    /// The caller went away: `cancelled`.
    Cancelled,
    /// The transport failed; a short, low-cardinality kind such as `connection_closed`,
    /// `http_503`, `unauthorized`, `session_lost`.
    Transport(&'static str),
    /// Nothing more specific: `_OTHER`.
    Other,
}

impl ErrorType {
    /// The attribute's value.
    pub fn value(&self) -> std::borrow::Cow<'static, str> {
        use std::borrow::Cow;
        match self {
            ErrorType::JsonRpc(code) => Cow::Owned(code.to_string()),
            ErrorType::ToolError => Cow::Borrowed(value::TOOL_ERROR),
            ErrorType::Timeout => Cow::Borrowed(value::TIMEOUT),
            ErrorType::Refused => Cow::Borrowed(value::REFUSED),
            ErrorType::Cancelled => Cow::Borrowed(value::CANCELLED),
            ErrorType::Transport(kind) => Cow::Borrowed(kind),
            ErrorType::Other => Cow::Borrowed(value::OTHER),
        }
    }

    /// The JSON-RPC code, where the error is one (`rpc.response.status_code`).
    pub fn rpc_code(&self) -> Option<i64> {
        match self {
            ErrorType::JsonRpc(code) => Some(*code),
            _ => None,
        }
    }
}

/// How an MCP session is carried: `network.transport` and `network.protocol.*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Transport {
    /// Not known (nothing is recorded).
    #[default]
    Unknown,
    /// A child's stdin and stdout: `pipe`.
    Stdio,
    /// Streamable HTTP or HTTP+SSE: `tcp`, `http`, and the HTTP version when known.
    Http(Option<&'static str>),
    /// WebSocket: `tcp`, `websocket`.
    WebSocket,
}

impl Transport {
    /// `network.transport`.
    pub fn network_transport(self) -> Option<&'static str> {
        match self {
            Transport::Unknown => None,
            Transport::Stdio => Some(value::PIPE),
            Transport::Http(_) | Transport::WebSocket => Some(value::TCP),
        }
    }

    /// `network.protocol.name`.
    pub fn protocol_name(self) -> Option<&'static str> {
        match self {
            Transport::Http(_) => Some("http"),
            Transport::WebSocket => Some("websocket"),
            _ => None,
        }
    }

    /// `network.protocol.version`.
    pub fn protocol_version(self) -> Option<&'static str> {
        match self {
            Transport::Http(v) => v,
            _ => None,
        }
    }
}

/// The MCP methods by name, so the common ones cost no allocation as an attribute or a name.
const METHODS: [&str; 22] = [
    "initialize",
    "ping",
    "tools/list",
    "tools/call",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "resources/subscribe",
    "resources/unsubscribe",
    "prompts/list",
    "prompts/get",
    "completion/complete",
    "logging/setLevel",
    "server/discover",
    "subscriptions/listen",
    "sampling/createMessage",
    "elicitation/create",
    "roots/list",
    "notifications/initialized",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

/// Longest name (a method, a tool, a prompt) kept on a span or a histogram as it came: a
/// client or server chooses them, and a histogram keeps each set of attributes it saw.
pub const MAX_NAME_LEN: usize = 64;

/// What stands for a name longer than [`MAX_NAME_LEN`] (the conventions' word for "another").
pub const OTHER: &str = "_OTHER";

/// `name` when it is at most [`MAX_NAME_LEN`] bytes (every name a pool offers is), else
/// [`OTHER`].
pub fn bounded_name(name: &str) -> std::borrow::Cow<'static, str> {
    if name.len() <= MAX_NAME_LEN {
        std::borrow::Cow::Owned(name.to_owned())
    } else {
        std::borrow::Cow::Borrowed(OTHER)
    }
}

/// `method` as a `'static` string when it is one of MCP's, else owned (or [`OTHER`] when
/// longer than [`MAX_NAME_LEN`]).
pub fn method_name(method: &str) -> std::borrow::Cow<'static, str> {
    match METHODS.iter().find(|m| **m == method) {
        Some(m) => std::borrow::Cow::Borrowed(m),
        None => bounded_name(method),
    }
}

/// The span name of an MCP request: `{mcp.method.name} {target}`, or the method alone when
/// there is no low-cardinality target (a resource URI is never one).
pub fn mcp_span_name(method: &str, target: Option<&str>) -> std::borrow::Cow<'static, str> {
    match target {
        Some(t) if !t.is_empty() => format!("{} {}", method_name(method), bounded_name(t)).into(),
        _ => method_name(method),
    }
}

/// The span name of a model call: `chat {model}`.
pub fn chat_span_name(model: &str) -> String {
    if model.is_empty() { value::CHAT.to_owned() } else { format!("{} {model}", value::CHAT) }
}

/// The span name of a tool call in the agent: `execute_tool {name}`.
pub fn execute_tool_span_name(tool: &str) -> String {
    format!("{} {tool}", value::EXECUTE_TOOL)
}

/// The span name of an agent's task: `invoke_agent`, or `invoke_agent {name}` with a name.
pub fn invoke_agent_span_name(agent: Option<&str>) -> String {
    match agent {
        Some(a) if !a.is_empty() => format!("{} {a}", value::INVOKE_AGENT),
        _ => value::INVOKE_AGENT.to_owned(),
    }
}

/// The target of an MCP request's span name, read from its params: the tool's `name` on
/// `tools/call`, the prompt's on `prompts/get`; none otherwise (a resource URI is high
/// cardinality).
pub fn mcp_target<'a>(method: &str, params: Option<&'a serde_json::Value>) -> Option<&'a str> {
    if !names_target(method) {
        return None;
    }
    params?.get("name")?.as_str()
}

/// Whether requests of `method` name a target (a tool or a prompt) in their params' `name`:
/// `tools/call` and `prompts/get`.
pub fn names_target(method: &str) -> bool {
    matches!(method, "tools/call" | "prompts/get")
}

/// Whether requests of `method` name a resource (`mcp.resource.uri`) in their params' `uri`:
/// `resources/read`, `resources/subscribe` and `resources/unsubscribe`.
pub fn names_resource(method: &str) -> bool {
    matches!(method, "resources/read" | "resources/subscribe" | "resources/unsubscribe")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn span_names_follow_the_conventions() {
        assert_eq!(mcp_span_name("tools/call", Some("get-weather")), "tools/call get-weather");
        assert_eq!(mcp_span_name("initialize", None), "initialize");
        assert_eq!(mcp_span_name("tools/list", Some("")), "tools/list");
        assert!(matches!(mcp_span_name("tools/list", None), std::borrow::Cow::Borrowed(_)));
        assert_eq!(method_name("x/custom"), "x/custom");
        assert_eq!(chat_span_name("claude-x"), "chat claude-x");
        assert_eq!(execute_tool_span_name("mcp__fs__read"), "execute_tool mcp__fs__read");
        assert_eq!(invoke_agent_span_name(None), "invoke_agent");
        assert_eq!(invoke_agent_span_name(Some("mcp-harness")), "invoke_agent mcp-harness");
    }

    #[test]
    fn targets_come_from_tool_and_prompt_names_only() {
        let call = serde_json::json!({"name": "echo", "arguments": {}});
        assert_eq!(mcp_target("tools/call", Some(&call)), Some("echo"));
        assert_eq!(mcp_target("prompts/get", Some(&call)), Some("echo"));
        let read = serde_json::json!({"uri": "file:///x"});
        assert_eq!(mcp_target("resources/read", Some(&read)), None);
        assert_eq!(mcp_target("tools/call", None), None);
    }

    #[test]
    fn error_types_by_the_rules() {
        assert_eq!(ErrorType::JsonRpc(-32602).value(), "-32602");
        assert_eq!(ErrorType::JsonRpc(-32602).rpc_code(), Some(-32602));
        assert_eq!(ErrorType::ToolError.value(), "tool_error");
        assert_eq!(ErrorType::Timeout.value(), "timeout");
        assert_eq!(ErrorType::Transport("connection_closed").value(), "connection_closed");
        assert_eq!(ErrorType::Other.value(), "_OTHER");
        assert_eq!(ErrorType::ToolError.rpc_code(), None);
    }

    #[test]
    fn transports_map_to_network_attributes() {
        assert_eq!(Transport::Stdio.network_transport(), Some("pipe"));
        assert_eq!(Transport::Stdio.protocol_name(), None);
        assert_eq!(Transport::Http(Some("1.1")).network_transport(), Some("tcp"));
        assert_eq!(Transport::Http(Some("1.1")).protocol_name(), Some("http"));
        assert_eq!(Transport::Http(Some("1.1")).protocol_version(), Some("1.1"));
        assert_eq!(Transport::WebSocket.protocol_name(), Some("websocket"));
    }

    #[test]
    fn buckets_are_increasing() {
        for b in [metric::MCP_DURATION_BUCKETS, metric::GEN_AI_DURATION_BUCKETS, metric::GEN_AI_TOKEN_BUCKETS] {
            assert!(b.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
