//! MCP message payloads (params and results) for revisions 2024-11-05 through 2025-11-25.
//!
//! Every struct keeps the fields it does not know in `extra`, so a decode/encode round trip loses
//! nothing a newer server sent. Optional fields are skipped when absent so that what we encode
//! validates against the oldest revision that has the type.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Fields this crate does not model, kept verbatim for round trips.
pub type Extra = Map<String, Value>;

/// Write an integral `f64` as an integer, so that `50` read from the wire goes back out as `50`
/// rather than `50.0` (which a strict peer comparing values would see as a change).
fn integral_as_integer<S: serde::Serializer>(n: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    // Below 2^53 every integral f64 is exactly an i64.
    if n.fract() == 0.0 && n.abs() < 9_007_199_254_740_992.0 {
        serializer.serialize_i64(*n as i64)
    } else {
        serializer.serialize_f64(*n)
    }
}

/// [`integral_as_integer`] for optional numbers (only called when `Some`).
fn option_integral_as_integer<S: serde::Serializer>(n: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    match n {
        Some(n) => integral_as_integer(n, serializer),
        None => serializer.serialize_none(),
    }
}

macro_rules! method_names {
    ($($(#[$doc:meta])* $name:ident = $value:literal;)*) => {
        /// The JSON-RPC method names of MCP.
        pub mod methods {
            $($(#[$doc])* pub const $name: &str = $value;)*
        }
    };
}

method_names! {
    /// Client → server: start the lifecycle.
    INITIALIZE = "initialize";
    /// Client → server notification: handshake finished.
    INITIALIZED = "notifications/initialized";
    /// Either direction: liveness check.
    PING = "ping";
    /// List tools (paginated).
    TOOLS_LIST = "tools/list";
    /// Call a tool.
    TOOLS_CALL = "tools/call";
    /// List resources (paginated).
    RESOURCES_LIST = "resources/list";
    /// List resource templates (paginated).
    RESOURCE_TEMPLATES_LIST = "resources/templates/list";
    /// Read a resource.
    RESOURCES_READ = "resources/read";
    /// List prompts (paginated).
    PROMPTS_LIST = "prompts/list";
    /// Get a prompt.
    PROMPTS_GET = "prompts/get";
    /// Ask for completions of a prompt's or a resource template's argument.
    COMPLETION_COMPLETE = "completion/complete";
    /// Server → client: list the client's roots.
    ROOTS_LIST = "roots/list";
    /// Server → client: ask the client's model for a completion.
    SAMPLING_CREATE_MESSAGE = "sampling/createMessage";
    /// Server → client: ask the user for input.
    ELICITATION_CREATE = "elicitation/create";
    /// Notification: the server's tool list changed.
    TOOLS_LIST_CHANGED = "notifications/tools/list_changed";
    /// Notification: the server's prompt list changed.
    PROMPTS_LIST_CHANGED = "notifications/prompts/list_changed";
    /// Notification: the server's resource list changed.
    RESOURCES_LIST_CHANGED = "notifications/resources/list_changed";
    /// Notification: a subscribed resource changed.
    RESOURCES_UPDATED = "notifications/resources/updated";
    /// Notification: progress of a request.
    PROGRESS = "notifications/progress";
    /// Notification: a request was cancelled.
    CANCELLED = "notifications/cancelled";
    /// Notification: a log message from the server.
    MESSAGE = "notifications/message";
    /// Client → server notification: the client's roots changed.
    ROOTS_LIST_CHANGED = "notifications/roots/list_changed";
}

/// Name and version of an MCP implementation (`clientInfo` / `serverInfo`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Implementation {
    /// Programmatic name.
    pub name: String,
    /// Version string.
    pub version: String,
    /// Display name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl Implementation {
    /// An implementation with just a name and version.
    pub fn new(name: impl Into<String>, version: impl Into<String>) -> Self {
        Self { name: name.into(), version: version.into(), title: None, extra: Extra::new() }
    }
}

/// What the client supports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClientCapabilities {
    /// Present when the client can list roots.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roots: Option<RootsCapability>,
    /// Present when the client can sample from its model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sampling: Option<Value>,
    /// Present when the client can elicit input from its user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<Value>,
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The `roots` client capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RootsCapability {
    /// Whether the client sends `notifications/roots/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What the server supports.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerCapabilities {
    /// Tools, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tools: Option<ListChangedCapability>,
    /// Prompts, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompts: Option<ListChangedCapability>,
    /// Resources, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourcesCapability>,
    /// Logging, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logging: Option<Value>,
    /// Argument completion, when offered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub completions: Option<Value>,
    /// Experimental, non-standard capabilities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub experimental: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A capability that may announce list changes.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListChangedCapability {
    /// Whether the server sends `list_changed` notifications for this list.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The `resources` server capability.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourcesCapability {
    /// Whether clients may subscribe to resource updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subscribe: Option<bool>,
    /// Whether the server sends `notifications/resources/list_changed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub list_changed: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeRequestParams {
    /// The newest revision the client supports.
    pub protocol_version: String,
    /// What the client supports.
    pub capabilities: ClientCapabilities,
    /// Who the client is.
    pub client_info: Implementation,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `initialize`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct InitializeResult {
    /// The revision the server chose.
    pub protocol_version: String,
    /// What the server supports.
    pub capabilities: ServerCapabilities,
    /// Who the server is.
    pub server_info: Implementation,
    /// Usage hints for the model or user (untrusted text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of any paginated list request.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct PaginatedRequestParams {
    /// Opaque cursor from the previous page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cursor: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An icon a user interface may show.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Icon {
    /// URI of the image (http(s) or data:).
    pub src: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Sizes such as `48x48`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sizes: Option<Vec<String>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Hints a server gives about a tool. Untrusted: they never loosen a host decision.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolAnnotations {
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// The tool claims not to modify its environment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub read_only_hint: Option<bool>,
    /// The tool claims it may make destructive updates.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub destructive_hint: Option<bool>,
    /// The tool claims repeated calls have no further effect.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotent_hint: Option<bool>,
    /// The tool claims to reach an open world of entities.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub open_world_hint: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A tool a server offers.
///
/// `input_schema` stays a raw value: whether it is an acceptable object schema is for the host
/// (the tool pool) to decide, not a reason to reject the whole `tools/list` page.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Tool {
    /// Programmatic name; calls go out under this exact name.
    pub name: String,
    /// Display name (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description (untrusted text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// JSON Schema of the arguments.
    #[serde(default)]
    pub input_schema: Value,
    /// JSON Schema of `structuredContent` (2025-06-18 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_schema: Option<Value>,
    /// Behaviour hints (2025-03-26 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<ToolAnnotations>,
    /// Icons (2025-11-25 and later).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub icons: Option<Vec<Icon>>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields (for example `execution`).
    #[serde(flatten)]
    pub extra: Extra,
}

impl Tool {
    /// A tool with a name and an input schema.
    pub fn new(name: impl Into<String>, input_schema: Value) -> Self {
        Self {
            name: name.into(),
            title: None,
            description: None,
            input_schema,
            output_schema: None,
            annotations: None,
            icons: None,
            meta: None,
            extra: Extra::new(),
        }
    }
}

/// Result of `tools/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListToolsResult {
    /// This page's tools.
    pub tools: Vec<Tool>,
    /// Cursor of the next page, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `tools/call`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CallToolRequestParams {
    /// The tool's raw (server-side) name.
    pub name: String,
    /// Arguments, an object.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
    /// Metadata (for example `progressToken`).
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Annotations on content and resources.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Annotations {
    /// Intended audience (`user`, `assistant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<Vec<String>>,
    /// Importance from 0 to 1.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "option_integral_as_integer")]
    pub priority: Option<f64>,
    /// ISO 8601 timestamp.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_modified: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Contents of a resource: text or base64 blob.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceContents {
    /// The resource's URI.
    pub uri: String,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Text contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Base64 contents.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub blob: Option<String>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A content block of a tool result, prompt message or sampling message.
///
/// Decoding is hand-written (see `content_de.rs`): one pass with no buffering, and a type this
/// crate does not know yet becomes [`ContentBlock::Other`] instead of failing the whole result.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
        /// Annotations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Unknown fields (including `_meta`).
        #[serde(flatten)]
        extra: Extra,
    },
    /// A base64 image.
    Image {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Annotations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Unknown fields.
        #[serde(flatten)]
        extra: Extra,
    },
    /// Base64 audio (2025-03-26 and later).
    Audio {
        /// Base64 data.
        data: String,
        /// MIME type.
        #[serde(rename = "mimeType")]
        mime_type: String,
        /// Annotations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Unknown fields.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A link to a resource (2025-06-18 and later).
    ResourceLink {
        /// The resource's URI.
        uri: String,
        /// The resource's name.
        name: String,
        /// Display name.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        title: Option<String>,
        /// Description.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        description: Option<String>,
        /// MIME type.
        #[serde(default, rename = "mimeType", skip_serializing_if = "Option::is_none")]
        mime_type: Option<String>,
        /// Annotations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Unknown fields.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A resource embedded in the result.
    Resource {
        /// The resource's contents.
        resource: ResourceContents,
        /// Annotations.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        annotations: Option<Annotations>,
        /// Unknown fields.
        #[serde(flatten)]
        extra: Extra,
    },
    /// A content type this crate does not know (a newer revision's), kept whole: every
    /// member, `type` included.
    #[serde(untagged)]
    Other(Extra),
}

impl ContentBlock {
    /// A text block.
    pub fn text(text: impl Into<String>) -> Self {
        ContentBlock::Text { text: text.into(), annotations: None, extra: Extra::new() }
    }

    /// The text of a text block.
    pub fn as_text(&self) -> Option<&str> {
        match self {
            ContentBlock::Text { text, .. } => Some(text),
            _ => None,
        }
    }
}

/// Result of `tools/call`. Decoding is hand-written (see `content_de.rs`): this is the hot
/// path of every tool call, and a flattened `extra` would make serde buffer the whole result.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CallToolResult {
    /// Unstructured content.
    #[serde(default)]
    pub content: Vec<ContentBlock>,
    /// Structured content matching the tool's outputSchema (2025-06-18 and later; any JSON value,
    /// `Some(Value::Null)` when it was sent as `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured_content: Option<Value>,
    /// The tool reported an error (the model should see it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub is_error: Option<bool>,
    /// Metadata.
    #[serde(default, rename = "_meta", skip_serializing_if = "Option::is_none")]
    pub meta: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

impl CallToolResult {
    /// Whether the tool said the call failed.
    pub fn is_error(&self) -> bool {
        self.is_error.unwrap_or(false)
    }

    /// All text blocks joined by newlines.
    pub fn joined_text(&self) -> String {
        let texts: Vec<&str> = self.content.iter().filter_map(ContentBlock::as_text).collect();
        texts.join("\n")
    }
}

/// Params of `notifications/progress`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProgressNotificationParams {
    /// The token the request carried in `_meta.progressToken`.
    pub progress_token: crate::jsonrpc::RequestId,
    /// Progress so far (increases).
    #[serde(serialize_with = "integral_as_integer")]
    pub progress: f64,
    /// Total, if known.
    #[serde(default, skip_serializing_if = "Option::is_none", serialize_with = "option_integral_as_integer")]
    pub total: Option<f64>,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `notifications/cancelled`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CancelledNotificationParams {
    /// The request being cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_id: Option<crate::jsonrpc::RequestId>,
    /// Why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `notifications/message`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoggingMessageNotificationParams {
    /// Syslog severity (`debug` … `emergency`).
    pub level: String,
    /// Logger name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub logger: Option<String>,
    /// Any JSON data.
    #[serde(default)]
    pub data: Value,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `notifications/resources/updated`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceUpdatedNotificationParams {
    /// The resource that changed.
    pub uri: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A root the client exposes to servers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Root {
    /// A `file://` URI.
    pub uri: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `roots/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ListRootsResult {
    /// The roots.
    pub roots: Vec<Root>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A message in a sampling request or result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SamplingMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// One block, or (2025-11-25) several.
    pub content: Value,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageRequestParams {
    /// The conversation to complete.
    pub messages: Vec<SamplingMessage>,
    /// Token budget.
    pub max_tokens: u64,
    /// System prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_prompt: Option<String>,
    /// Model preferences.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_preferences: Option<Value>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `sampling/createMessage`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CreateMessageResult {
    /// `assistant`.
    pub role: String,
    /// The generated content.
    pub content: Value,
    /// Which model answered.
    pub model: String,
    /// Why generation stopped.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `elicitation/create` (form or URL mode).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ElicitRequestParams {
    /// `form` (default) or `url` (2025-11-25).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    /// What to show the user.
    pub message: String,
    /// Form mode: the schema of the requested data.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_schema: Option<Value>,
    /// URL mode: where to send the user.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// URL mode: the elicitation's id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation_id: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `elicitation/create`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ElicitResult {
    /// `accept`, `decline` or `cancel`.
    pub action: ElicitAction,
    /// The data, when accepted.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The user's answer to an elicitation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ElicitAction {
    /// The user submitted data.
    Accept,
    /// The user said no.
    Decline,
    /// The user dismissed the request.
    Cancel,
}

/// A resource a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Resource {
    /// URI.
    pub uri: String,
    /// Name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description (untrusted text).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Annotations.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub annotations: Option<Annotations>,
    /// Size in bytes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<u64>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A parameterized resource.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ResourceTemplate {
    /// RFC 6570 URI template.
    pub uri_template: String,
    /// Name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// MIME type.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mime_type: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `resources/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourcesResult {
    /// This page's resources.
    pub resources: Vec<Resource>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `resources/templates/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListResourceTemplatesResult {
    /// This page's templates.
    pub resource_templates: Vec<ResourceTemplate>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `resources/read`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceRequestParams {
    /// The resource to read.
    pub uri: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `resources/read`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ReadResourceResult {
    /// The contents.
    pub contents: Vec<ResourceContents>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// An argument a prompt takes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptArgument {
    /// Name.
    pub name: String,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Whether it must be given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub required: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A prompt a server offers.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Prompt {
    /// Name.
    pub name: String,
    /// Display name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title: Option<String>,
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Arguments.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Vec<PromptArgument>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `prompts/list`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ListPromptsResult {
    /// This page's prompts.
    pub prompts: Vec<Prompt>,
    /// Cursor of the next page.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub next_cursor: Option<String>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `prompts/get`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GetPromptRequestParams {
    /// The prompt's name.
    pub name: String,
    /// Argument values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// A message of a prompt.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PromptMessage {
    /// `user` or `assistant`.
    pub role: String,
    /// The content.
    pub content: ContentBlock,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `prompts/get`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GetPromptResult {
    /// Description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// The messages.
    pub messages: Vec<PromptMessage>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// What a `completion/complete` request completes an argument of.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type")]
#[non_exhaustive]
pub enum CompleteReference {
    /// A prompt, by name.
    #[serde(rename = "ref/prompt")]
    Prompt {
        /// The prompt's name.
        name: String,
        /// Unknown fields (a `title`).
        #[serde(flatten)]
        extra: Extra,
    },
    /// A resource template (or resource), by URI.
    #[serde(rename = "ref/resource")]
    Resource {
        /// The URI or URI template.
        uri: String,
        /// Unknown fields.
        #[serde(flatten)]
        extra: Extra,
    },
}

impl CompleteReference {
    /// The prompt named `name`.
    pub fn prompt(name: impl Into<String>) -> Self {
        Self::Prompt { name: name.into(), extra: Extra::new() }
    }

    /// The resource template (or resource) `uri`.
    pub fn resource(uri: impl Into<String>) -> Self {
        Self::Resource { uri: uri.into(), extra: Extra::new() }
    }
}

/// The argument being completed and what was typed of it so far.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteArgument {
    /// The argument's name.
    pub name: String,
    /// The value so far (a prefix, possibly empty).
    pub value: String,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Arguments already given, which a server may use to narrow its completions (2025-06-18 on).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompleteContext {
    /// The other arguments' values.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<Map<String, Value>>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Params of `completion/complete`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompleteRequestParams {
    /// What is completed.
    #[serde(rename = "ref")]
    pub reference: CompleteReference,
    /// Which argument, and its value so far.
    pub argument: CompleteArgument,
    /// Other arguments already given (left out for servers of 2025-03-26 and before, which
    /// do not know it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<CompleteContext>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// The completions of `completion/complete`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Completion {
    /// The suggested values (at most 100 by the specification).
    pub values: Vec<String>,
    /// How many there are in all, when the server knows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total: Option<u64>,
    /// Whether there are more than `values`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub has_more: Option<bool>,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}

/// Result of `completion/complete`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct CompleteResult {
    /// The completions.
    pub completion: Completion,
    /// Unknown fields.
    #[serde(flatten)]
    pub extra: Extra,
}
