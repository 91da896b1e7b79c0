//! The sans-I/O server side: what a client's message means, the `initialize` handshake of the
//! session revisions (2025-03-26, 2025-06-18, 2025-11-25) and the per-request envelope of the
//! stateless one (2026-07-28, `server/discover`).
//!
//! A dual-era server picks its behaviour per request, as the 2026-07-28 revision says: a request
//! whose `params._meta` carries `io.modelcontextprotocol/protocolVersion` is served statelessly
//! from its own envelope ([`RequestMeta::envelope`]); an `initialize` opens a session
//! ([`ServerSession`]) whose revision, client identity and capabilities hold for its later
//! requests. The adapter (a stdio loop, an HTTP front) reads messages, asks this module what they
//! are, and writes what it hands back; nothing here waits or touches a socket.

use std::collections::HashMap;
use std::fmt;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::jsonrpc::{ErrorObject, Message, Notification, Request, RequestId, error_codes};
use crate::stateless::{
    DiscoverResult, META_CLIENT_CAPABILITIES, META_CLIENT_INFO, META_PROTOCOL_VERSION, META_SERVER_INFO,
    SERVER_DISCOVER, SUBSCRIPTIONS_LISTEN, SubscriptionsListenRequestParams,
};
use crate::types::{
    CallToolRequestParams, CancelledNotificationParams, ClientCapabilities, CompleteRequestParams,
    GetPromptRequestParams, Implementation, InitializeRequestParams, InitializeResult, PaginatedRequestParams,
    ProgressNotificationParams, ReadResourceRequestParams, ServerCapabilities, methods,
};
use crate::version::ProtocolVersion;

/// JSON-RPC error codes the 2026-07-28 revision defines (`-32020` .. `-32022`).
pub mod server_error_codes {
    /// The HTTP headers do not match the body, or a required one is missing or malformed (HTTP 400).
    pub const HEADER_MISMATCH: i64 = -32020;
    /// The request needs a client capability the client did not declare (HTTP 400).
    pub const MISSING_REQUIRED_CLIENT_CAPABILITY: i64 = -32021;
    /// The request's protocol revision is not one the server speaks (HTTP 400).
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
}

/// `_meta` key: the desired log level of one 2026-07-28 request (it replaces `logging/setLevel`).
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// `_meta` key: the subscription a notification was delivered on (`subscriptions/listen`).
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";
/// `logging/setLevel` (session revisions).
pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
/// `resources/subscribe` (session revisions).
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
/// `resources/unsubscribe` (session revisions).
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";

/// The revisions a session (`initialize`) may settle on by default, oldest first.
pub const SESSION_VERSIONS: [ProtocolVersion; 3] =
    [ProtocolVersion::V2025_03_26, ProtocolVersion::V2025_06_18, ProtocolVersion::V2025_11_25];

/// What the server says about itself, in `initialize` and `server/discover` answers.
#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    /// `serverInfo`.
    pub server_info: Implementation,
    /// What the server offers.
    pub capabilities: ServerCapabilities,
    /// Usage hints for the client's model.
    pub instructions: Option<String>,
    /// The revisions `initialize` may settle on, oldest first (by default [`SESSION_VERSIONS`]).
    pub session_versions: Vec<ProtocolVersion>,
    /// Whether requests of the stateless revision (2026-07-28) are served.
    pub stateless: bool,
}

impl ServerConfig {
    /// A server that speaks every session revision of [`SESSION_VERSIONS`] and 2026-07-28.
    pub fn new(server_info: Implementation, capabilities: ServerCapabilities) -> Self {
        Self {
            server_info,
            capabilities,
            instructions: None,
            session_versions: SESSION_VERSIONS.to_vec(),
            stateless: true,
        }
    }

    /// Every revision served, newest first (what `server/discover` and the unsupported-version
    /// error list).
    pub fn supported_versions(&self) -> Vec<&'static str> {
        let mut versions: Vec<ProtocolVersion> = self.session_versions.clone();
        if self.stateless {
            versions.push(ProtocolVersion::STATELESS);
        }
        versions.sort_unstable_by(|a, b| b.cmp(a));
        versions.dedup();
        versions.into_iter().map(ProtocolVersion::as_str).collect()
    }

    /// The answer to `server/discover`.
    pub fn discover_result(&self) -> DiscoverResult {
        let mut meta = Map::new();
        meta.insert(META_SERVER_INFO.to_owned(), serde_json::to_value(&self.server_info).unwrap_or(Value::Null));
        DiscoverResult {
            result_type: Some("complete".to_owned()),
            supported_versions: self.supported_versions().into_iter().map(str::to_owned).collect(),
            capabilities: self.capabilities.clone(),
            instructions: self.instructions.clone(),
            ttl_ms: None,
            cache_scope: None,
            meta: Some(meta),
            extra: Map::new(),
        }
    }

    /// The error for a request of a revision the server does not speak (`-32022`, HTTP 400).
    pub fn unsupported_version(&self, requested: &str) -> ErrorObject {
        let mut error =
            ErrorObject::new(server_error_codes::UNSUPPORTED_PROTOCOL_VERSION, "Unsupported protocol version");
        error.data = Some(serde_json::json!({ "supported": self.supported_versions(), "requested": requested }));
        error
    }
}

/// The revision to answer an `initialize` that asked for `requested` with: that one when the
/// server speaks it, else the newest it speaks (the client then decides whether it can go on),
/// as every session revision's lifecycle says. `None` when `supported` is empty.
pub fn negotiate_initialize(requested: &str, supported: &[ProtocolVersion]) -> Option<ProtocolVersion> {
    match ProtocolVersion::parse(requested) {
        Some(v) if supported.contains(&v) => Some(v),
        _ => supported.iter().copied().filter(|v| !v.is_stateless()).max(),
    }
}

/// The severity of a log message, ordered from `debug` (least severe) to `emergency`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoggingLevel {
    /// Detailed debugging information.
    Debug,
    /// Normal operation.
    Info,
    /// Normal but significant.
    Notice,
    /// A warning.
    Warning,
    /// An error.
    Error,
    /// A critical condition.
    Critical,
    /// Action must be taken at once.
    Alert,
    /// The system is unusable.
    Emergency,
}

impl LoggingLevel {
    /// Parses a level's name (`"warning"`); `None` for anything else.
    pub fn parse(s: &str) -> Option<LoggingLevel> {
        serde_json::from_value(Value::String(s.to_owned())).ok()
    }
}

/// Who the client is and what it can do, for one request of the stateless revision (its
/// `params._meta`), or for a whole session (from `initialize`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ClientContext {
    /// The revision the request (or session) speaks.
    pub protocol_version: Option<ProtocolVersion>,
    /// `clientInfo`: self-reported, for display and logs only.
    pub client_info: Option<Implementation>,
    /// The declared capabilities.
    pub capabilities: ClientCapabilities,
    /// The log level asked for; no log messages are sent without one.
    pub log_level: Option<LoggingLevel>,
}

impl ClientContext {
    /// Whether the client can be asked for a form through elicitation: it declared
    /// `elicitation` (with `form`, or empty, which means form) and speaks a revision that has it
    /// (2025-06-18 and later).
    pub fn can_elicit_form(&self) -> bool {
        let Some(version) = self.protocol_version else { return false };
        if version < ProtocolVersion::V2025_06_18 {
            return false;
        }
        match &self.capabilities.elicitation {
            Some(Value::Object(modes)) => modes.is_empty() || modes.contains_key("form"),
            Some(_) => true,
            None => false,
        }
    }

    /// Whether the client declared sampling.
    pub fn can_sample(&self) -> bool {
        self.capabilities.sampling.is_some()
    }
}

/// What a request's `params._meta` carries that a server acts on.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RequestMeta {
    /// `progressToken`: where progress notifications for this request go.
    pub progress_token: Option<RequestId>,
    /// The stateless envelope, when the request carries one (its revision's key is present).
    pub envelope: Option<Envelope>,
}

/// The envelope of a 2026-07-28 request, as read (not yet checked: see [`Envelope::check`]).
#[derive(Debug, Clone, PartialEq)]
pub struct Envelope {
    /// `io.modelcontextprotocol/protocolVersion`, as sent.
    pub protocol_version: String,
    /// `io.modelcontextprotocol/clientInfo`, when well formed.
    pub client_info: Option<Implementation>,
    /// `io.modelcontextprotocol/clientCapabilities` (required by the revision), when well formed.
    pub capabilities: Option<ClientCapabilities>,
    /// `io.modelcontextprotocol/logLevel`, when it names a level.
    pub log_level: Option<LoggingLevel>,
}

impl Envelope {
    /// The client context of this request, or the error to answer it with: an unsupported
    /// revision (`-32022`), or required capabilities missing or malformed (`-32602`).
    pub fn check(&self, config: &ServerConfig) -> Result<ClientContext, ErrorObject> {
        let version = ProtocolVersion::parse(&self.protocol_version)
            .filter(|v| v.is_stateless() && config.stateless)
            .ok_or_else(|| config.unsupported_version(&self.protocol_version))?;
        let capabilities = self.capabilities.clone().ok_or_else(|| {
            ErrorObject::new(
                error_codes::INVALID_PARAMS,
                format!("Invalid params: _meta must carry {META_CLIENT_CAPABILITIES} (an object)"),
            )
        })?;
        Ok(ClientContext {
            protocol_version: Some(version),
            client_info: self.client_info.clone(),
            capabilities,
            log_level: self.log_level,
        })
    }
}

impl RequestMeta {
    /// Reads the members of a `_meta` object a server acts on; malformed ones are left out
    /// (a stateless request without well-formed capabilities is then refused by
    /// [`Envelope::check`]).
    pub fn from_meta(meta: &Map<String, Value>) -> RequestMeta {
        let progress_token = meta.get("progressToken").and_then(|t| serde_json::from_value(t.clone()).ok());
        let envelope = meta.get(META_PROTOCOL_VERSION).map(|version| Envelope {
            protocol_version: match version {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            },
            client_info: meta.get(META_CLIENT_INFO).and_then(|v| serde_json::from_value(v.clone()).ok()),
            capabilities: meta.get(META_CLIENT_CAPABILITIES).and_then(|v| serde_json::from_value(v.clone()).ok()),
            log_level: meta.get(META_LOG_LEVEL).and_then(Value::as_str).and_then(LoggingLevel::parse),
        });
        RequestMeta { progress_token, envelope }
    }

    /// Reads `params._meta` of raw params (one pass; other members are skipped unparsed).
    pub fn from_params(params: Option<&RawValue>) -> RequestMeta {
        #[derive(Deserialize)]
        struct Probe {
            #[serde(rename = "_meta")]
            meta: Option<Map<String, Value>>,
        }
        params
            .and_then(|raw| serde_json::from_str::<Probe>(raw.get()).ok())
            .and_then(|probe| probe.meta)
            .map(|meta| RequestMeta::from_meta(&meta))
            .unwrap_or_default()
    }
}

/// A request a client sent, classified, its params read into their type.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientRequest {
    /// `initialize`: open a session.
    Initialize(InitializeRequestParams),
    /// `server/discover` (2026-07-28).
    Discover,
    /// `ping`: answer with an empty result.
    Ping,
    /// `tools/list`.
    ListTools(PaginatedRequestParams),
    /// `tools/call` (with `inputResponses` / `requestState` of a retry in its `extra`; see
    /// [`RetryParts`]).
    CallTool(CallToolRequestParams),
    /// `resources/list`.
    ListResources(PaginatedRequestParams),
    /// `resources/templates/list`.
    ListResourceTemplates(PaginatedRequestParams),
    /// `resources/read`.
    ReadResource(ReadResourceRequestParams),
    /// `resources/subscribe` (session revisions).
    Subscribe(ReadResourceRequestParams),
    /// `resources/unsubscribe` (session revisions).
    Unsubscribe(ReadResourceRequestParams),
    /// `prompts/list`.
    ListPrompts(PaginatedRequestParams),
    /// `prompts/get`.
    GetPrompt(GetPromptRequestParams),
    /// `completion/complete`.
    Complete(CompleteRequestParams),
    /// `logging/setLevel` (session revisions).
    SetLevel(LoggingLevel),
    /// `subscriptions/listen` (2026-07-28).
    Listen(SubscriptionsListenRequestParams),
    /// Any other method: answer `-32601`.
    Other {
        /// The method.
        method: String,
    },
}

impl ClientRequest {
    /// What the request is about, as the `Mcp-Name` header carries it: the tool of
    /// `tools/call`, the prompt of `prompts/get`, the URI of `resources/read`.
    pub fn routing_name(&self) -> Option<&str> {
        match self {
            ClientRequest::CallTool(p) => Some(&p.name),
            ClientRequest::GetPrompt(p) => Some(&p.name),
            ClientRequest::ReadResource(p) => Some(&p.uri),
            _ => None,
        }
    }
}

/// The parts of a retried request of the stateless revision (the answers to an
/// `input_required` result).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RetryParts {
    /// `inputResponses`: the answers, under the keys the server used.
    pub input_responses: Option<Map<String, Value>>,
    /// `requestState`: the opaque state the server handed out, unchanged.
    pub request_state: Option<String>,
}

impl RetryParts {
    /// Reads them from a request's unmodelled members (`extra`); a member of the wrong type
    /// counts as absent.
    pub fn from_extra(extra: &Map<String, Value>) -> RetryParts {
        RetryParts {
            input_responses: extra.get("inputResponses").and_then(Value::as_object).cloned(),
            request_state: extra.get("requestState").and_then(Value::as_str).map(str::to_owned),
        }
    }
}

/// A notification a client sent, classified.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ClientNotification {
    /// `notifications/initialized`.
    Initialized,
    /// `notifications/cancelled`.
    Cancelled(CancelledNotificationParams),
    /// `notifications/progress` (of a server request the client is answering).
    Progress(ProgressNotificationParams),
    /// `notifications/roots/list_changed`.
    RootsListChanged,
    /// Anything else, or one whose params did not parse: ignored.
    Other {
        /// The method.
        method: String,
    },
}

/// A request from a client, classified.
#[derive(Debug)]
pub struct IncomingRequest {
    /// Its id (the answer carries it).
    pub id: RequestId,
    /// The method, as sent.
    pub method: String,
    /// What it asks, or the `-32602` error to answer when its params did not read.
    pub request: Result<ClientRequest, ErrorObject>,
    /// What its `_meta` carries.
    pub meta: RequestMeta,
}

/// What a message from a client is.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientMessage {
    /// A request to answer.
    Request(Box<IncomingRequest>),
    /// A notification.
    Notification(ClientNotification),
    /// The answer to a request the server sent (an elicitation, a ping).
    Response {
        /// The id of the server's request.
        id: RequestId,
        /// The raw result, or the client's error.
        outcome: Result<Box<RawValue>, ErrorObject>,
    },
    /// An error response without an id: the client could not read something the server sent.
    ClientReportedError(ErrorObject),
}

fn parse<T: DeserializeOwned>(params: Option<&RawValue>) -> Result<T, ErrorObject> {
    let text = params.map_or("{}", RawValue::get);
    serde_json::from_str(text)
        .map_err(|e| ErrorObject::new(error_codes::INVALID_PARAMS, format!("Invalid params: {e}")))
}

/// Classifies a decoded message from a client.
pub fn classify(message: Message) -> ClientMessage {
    match message {
        Message::Request(Request { id, method, params }) => {
            let params = params.as_deref();
            let request = classify_request(&method, params);
            let meta = match &request {
                // The call's params were read whole already; its `_meta` is among them.
                Ok(ClientRequest::CallTool(call)) => call.meta.as_ref().map(RequestMeta::from_meta).unwrap_or_default(),
                _ => RequestMeta::from_params(params),
            };
            ClientMessage::Request(Box::new(IncomingRequest { id, method, request, meta }))
        }
        Message::Notification(Notification { method, params }) => {
            ClientMessage::Notification(classify_notification(method, params.as_deref()))
        }
        Message::Response(response) => ClientMessage::Response { id: response.id, outcome: Ok(response.result) },
        Message::Error(error) => match error.id {
            Some(id) => ClientMessage::Response { id, outcome: Err(error.error) },
            None => ClientMessage::ClientReportedError(error.error),
        },
    }
}

fn classify_request(method: &str, params: Option<&RawValue>) -> Result<ClientRequest, ErrorObject> {
    Ok(match method {
        methods::INITIALIZE => ClientRequest::Initialize(parse(params)?),
        SERVER_DISCOVER => ClientRequest::Discover,
        methods::PING => ClientRequest::Ping,
        methods::TOOLS_LIST => ClientRequest::ListTools(parse(params)?),
        methods::TOOLS_CALL => ClientRequest::CallTool(parse(params)?),
        methods::RESOURCES_LIST => ClientRequest::ListResources(parse(params)?),
        methods::RESOURCE_TEMPLATES_LIST => ClientRequest::ListResourceTemplates(parse(params)?),
        methods::RESOURCES_READ => ClientRequest::ReadResource(parse(params)?),
        RESOURCES_SUBSCRIBE => ClientRequest::Subscribe(parse(params)?),
        RESOURCES_UNSUBSCRIBE => ClientRequest::Unsubscribe(parse(params)?),
        methods::PROMPTS_LIST => ClientRequest::ListPrompts(parse(params)?),
        methods::PROMPTS_GET => ClientRequest::GetPrompt(parse(params)?),
        methods::COMPLETION_COMPLETE => ClientRequest::Complete(parse(params)?),
        LOGGING_SET_LEVEL => {
            #[derive(Deserialize)]
            struct SetLevel {
                level: String,
            }
            let SetLevel { level } = parse(params)?;
            ClientRequest::SetLevel(LoggingLevel::parse(&level).ok_or_else(|| {
                ErrorObject::new(error_codes::INVALID_PARAMS, format!("Invalid params: unknown log level {level:?}"))
            })?)
        }
        SUBSCRIPTIONS_LISTEN => ClientRequest::Listen(parse(params)?),
        other => ClientRequest::Other { method: other.to_owned() },
    })
}

fn classify_notification(method: String, params: Option<&RawValue>) -> ClientNotification {
    match method.as_str() {
        methods::INITIALIZED => ClientNotification::Initialized,
        methods::CANCELLED => {
            parse(params).map(ClientNotification::Cancelled).unwrap_or(ClientNotification::Other { method })
        }
        methods::PROGRESS => {
            parse(params).map(ClientNotification::Progress).unwrap_or(ClientNotification::Other { method })
        }
        methods::ROOTS_LIST_CHANGED => ClientNotification::RootsListChanged,
        _ => ClientNotification::Other { method },
    }
}

/// The `-32601` answer to a method the server does not offer.
pub fn method_not_found(method: &str) -> ErrorObject {
    ErrorObject::new(error_codes::METHOD_NOT_FOUND, format!("Method not found: {method}"))
}

/// Where a session is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerSessionState {
    /// `initialize` was answered; the client's `notifications/initialized` has not come yet
    /// (requests are served; the server sends none of its own).
    Initializing,
    /// The handshake is done.
    Ready,
    /// Closed.
    Closed,
}

/// Why a session refused something.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServerSessionError {
    /// `initialize` came a second time.
    #[error("the session is already initialized")]
    AlreadyInitialized,
    /// The server has no session revision to offer.
    #[error("the server speaks no session revision")]
    NoSessionRevision,
    /// The session is closed.
    #[error("the session is closed")]
    Closed,
    /// A server request before the client said `notifications/initialized`.
    #[error("{method:?} cannot be sent before the client has finished the handshake")]
    NotReady {
        /// The method.
        method: String,
    },
    /// Params could not be encoded.
    #[error("could not encode params of {method:?}: {detail}")]
    Encode {
        /// The method.
        method: String,
        /// The serializer's message.
        detail: String,
    },
}

/// A session of a session revision (2025-03-26 .. 2025-11-25), server side: the handshake, what
/// the client declared, and the requests the server sent it, each with an adapter payload `P`
/// (a channel to whoever waits for the answer). Server request ids are the session's own.
#[derive(Debug)]
pub struct ServerSession<P> {
    state: ServerSessionState,
    client: ClientContext,
    next_id: i64,
    pending: HashMap<RequestId, P>,
}

impl<P> ServerSession<P> {
    /// Answers `initialize`: negotiates the revision and returns the session and the result to
    /// send.
    pub fn initialize(
        config: &ServerConfig,
        params: &InitializeRequestParams,
    ) -> Result<(Self, InitializeResult), ServerSessionError> {
        let version = negotiate_initialize(&params.protocol_version, &config.session_versions)
            .ok_or(ServerSessionError::NoSessionRevision)?;
        let result = InitializeResult {
            protocol_version: version.as_str().to_owned(),
            capabilities: config.capabilities.clone(),
            server_info: config.server_info.clone(),
            instructions: config.instructions.clone(),
            meta: None,
            extra: Map::new(),
        };
        let client = ClientContext {
            protocol_version: Some(version),
            client_info: Some(params.client_info.clone()),
            capabilities: params.capabilities.clone(),
            log_level: None,
        };
        let session = Self { state: ServerSessionState::Initializing, client, next_id: 0, pending: HashMap::new() };
        Ok((session, result))
    }

    /// A session restored from its parts (a shared store, another replica).
    pub fn restore(client: ClientContext, ready: bool) -> Self {
        let state = if ready { ServerSessionState::Ready } else { ServerSessionState::Initializing };
        Self { state, client, next_id: 0, pending: HashMap::new() }
    }

    /// The lifecycle state.
    pub fn state(&self) -> ServerSessionState {
        self.state
    }

    /// The negotiated revision.
    pub fn protocol_version(&self) -> ProtocolVersion {
        self.client.protocol_version.unwrap_or(ProtocolVersion::V2025_03_26)
    }

    /// Who the client is and what it declared.
    pub fn client(&self) -> &ClientContext {
        &self.client
    }

    /// Records `logging/setLevel`.
    pub fn set_log_level(&mut self, level: LoggingLevel) {
        self.client.log_level = Some(level);
    }

    /// Records `notifications/initialized`.
    pub fn initialized(&mut self) {
        if self.state == ServerSessionState::Initializing {
            self.state = ServerSessionState::Ready;
        }
    }

    /// Starts a request to the client (`elicitation/create`, `ping`); returns its id and line.
    /// Refused before the client finished the handshake, as the lifecycle asks.
    pub fn start_request<T: Serialize + ?Sized>(
        &mut self,
        method: &str,
        params: Option<&T>,
        payload: P,
    ) -> Result<(RequestId, String), ServerSessionError> {
        match self.state {
            ServerSessionState::Closed => return Err(ServerSessionError::Closed),
            ServerSessionState::Initializing if method != methods::PING => {
                return Err(ServerSessionError::NotReady { method: method.to_owned() });
            }
            _ => {}
        }
        let id = RequestId::Number(self.next_id + 1);
        let line = crate::jsonrpc::encode_request(&id, method, params)
            .map_err(|e| ServerSessionError::Encode { method: method.to_owned(), detail: e.to_string() })?;
        self.next_id += 1;
        self.pending.insert(id.clone(), payload);
        Ok((id, line))
    }

    /// The payload of the server request `id` answers, taken; `None` for an answer to nothing
    /// pending (late, or another session's id).
    pub fn complete(&mut self, id: &RequestId) -> Option<P> {
        self.pending.remove(id)
    }

    /// How many server requests await an answer.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// Closes the session, returning every pending payload so its waiter can be told.
    pub fn close(&mut self) -> Vec<P> {
        self.state = ServerSessionState::Closed;
        self.pending.drain().map(|(_, p)| p).collect()
    }
}

impl fmt::Display for ServerSessionState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ServerSessionState::Initializing => "initializing",
            ServerSessionState::Ready => "ready",
            ServerSessionState::Closed => "closed",
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn config() -> ServerConfig {
        ServerConfig::new(Implementation::new("gw", "1"), ServerCapabilities::default())
    }

    fn decode(text: &str) -> ClientMessage {
        classify(Message::decode_str(text).expect("a message"))
    }

    fn init(version: &str, capabilities: Value) -> InitializeRequestParams {
        serde_json::from_value(json!({
            "protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "c", "version": "1"}
        }))
        .expect("params")
    }

    #[test]
    fn initialize_answers_the_asked_revision_or_the_newest() {
        for (asked, answered) in [
            ("2025-03-26", "2025-03-26"),
            ("2025-06-18", "2025-06-18"),
            ("2025-11-25", "2025-11-25"),
            ("2024-11-05", "2025-11-25"),
            ("2026-07-28", "2025-11-25"),
            ("1999-01-01", "2025-11-25"),
        ] {
            let (session, result) = ServerSession::<()>::initialize(&config(), &init(asked, json!({}))).unwrap();
            assert_eq!(result.protocol_version, answered, "asked {asked}");
            assert_eq!(session.protocol_version().as_str(), answered);
            assert_eq!(session.state(), ServerSessionState::Initializing);
        }
        let mut none = config();
        none.session_versions.clear();
        assert_eq!(
            ServerSession::<()>::initialize(&none, &init("2025-06-18", json!({}))).unwrap_err(),
            ServerSessionError::NoSessionRevision
        );
    }

    #[test]
    fn server_requests_wait_for_the_handshake_and_match_their_answers() {
        let (mut session, _) =
            ServerSession::initialize(&config(), &init("2025-06-18", json!({"elicitation": {}}))).unwrap();
        assert!(session.client().can_elicit_form());
        assert!(matches!(
            session.start_request("elicitation/create", Some(&json!({})), 1),
            Err(ServerSessionError::NotReady { .. })
        ));
        session.initialized();
        let (id, line) = session.start_request("elicitation/create", Some(&json!({"message": "m"})), 7).unwrap();
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":1,"method":"elicitation/create","params":{"message":"m"}}"#);
        assert_eq!(session.pending_count(), 1);
        assert_eq!(session.complete(&RequestId::Number(9)), None);
        assert_eq!(session.complete(&id), Some(7));
        assert_eq!(session.complete(&id), None);
        let (_, _) = session.start_request("ping", None::<&()>, 8).unwrap();
        assert_eq!(session.close(), vec![8]);
        assert_eq!(session.start_request("ping", None::<&()>, 9).unwrap_err(), ServerSessionError::Closed);
    }

    #[test]
    fn who_can_be_asked() {
        let ctx = |version: ProtocolVersion, elicitation: Option<Value>| ClientContext {
            protocol_version: Some(version),
            capabilities: ClientCapabilities { elicitation, ..ClientCapabilities::default() },
            ..ClientContext::default()
        };
        assert!(ctx(ProtocolVersion::V2025_06_18, Some(json!({}))).can_elicit_form());
        assert!(ctx(ProtocolVersion::V2025_11_25, Some(json!({"form": {}}))).can_elicit_form());
        assert!(!ctx(ProtocolVersion::V2025_11_25, Some(json!({"url": {}}))).can_elicit_form());
        assert!(!ctx(ProtocolVersion::V2025_03_26, Some(json!({}))).can_elicit_form());
        assert!(!ctx(ProtocolVersion::V2026_07_28, None).can_elicit_form());
        assert!(ctx(ProtocolVersion::V2026_07_28, Some(json!({"form": {}}))).can_elicit_form());
        assert!(!ClientContext::default().can_elicit_form());
    }

    #[test]
    fn requests_are_classified_with_their_meta() {
        let ClientMessage::Request(incoming) = decode(
            r#"{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"files__read","arguments":{"p":1},
                "requestState":"s","inputResponses":{"k":{"action":"accept"}},
                "_meta":{"progressToken":5,"io.modelcontextprotocol/protocolVersion":"2026-07-28",
                "io.modelcontextprotocol/clientInfo":{"name":"c","version":"1"},
                "io.modelcontextprotocol/clientCapabilities":{"elicitation":{}},
                "io.modelcontextprotocol/logLevel":"warning"}}}"#,
        ) else {
            panic!("a request")
        };
        let IncomingRequest { id, method, request, meta } = *incoming;
        assert_eq!((id, method.as_str()), (RequestId::String("a".into()), "tools/call"));
        let Ok(ClientRequest::CallTool(call)) = &request else { panic!("{request:?}") };
        assert_eq!(call.name, "files__read");
        assert_eq!(request.as_ref().ok().and_then(ClientRequest::routing_name), Some("files__read"));
        let retry = RetryParts::from_extra(&call.extra);
        assert_eq!(retry.request_state.as_deref(), Some("s"));
        assert!(retry.input_responses.is_some_and(|r| r.contains_key("k")));
        assert_eq!(meta.progress_token, Some(RequestId::Number(5)));
        let envelope = meta.envelope.expect("an envelope");
        let ctx = envelope.check(&config()).expect("accepted");
        assert_eq!(ctx.protocol_version, Some(ProtocolVersion::V2026_07_28));
        assert_eq!(ctx.log_level, Some(LoggingLevel::Warning));
        assert!(ctx.can_elicit_form());

        let ClientMessage::Request(incoming) =
            decode(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"progressToken":"t"}}}"#)
        else {
            panic!()
        };
        let IncomingRequest { request, meta, .. } = *incoming;
        assert!(matches!(request, Ok(ClientRequest::ListTools(_))));
        assert_eq!(meta, RequestMeta { progress_token: Some(RequestId::String("t".into())), envelope: None });

        let ClientMessage::Request(incoming) =
            decode(r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"arguments":{}}}"#)
        else {
            panic!()
        };
        assert_eq!(incoming.request.unwrap_err().code, error_codes::INVALID_PARAMS);

        let ClientMessage::Request(incoming) =
            decode(r#"{"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"loud"}}"#)
        else {
            panic!()
        };
        assert_eq!(incoming.request.unwrap_err().code, error_codes::INVALID_PARAMS);

        let ClientMessage::Request(incoming) = decode(r#"{"jsonrpc":"2.0","id":1,"method":"tasks/list"}"#) else {
            panic!()
        };
        assert_eq!(incoming.request.unwrap(), ClientRequest::Other { method: "tasks/list".into() });
        let ClientMessage::Request(incoming) = decode(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#) else { panic!() };
        assert_eq!(incoming.request.unwrap(), ClientRequest::Ping);
    }

    #[test]
    fn envelopes_of_other_revisions_or_without_capabilities_are_refused() {
        let env = |version: &str, caps: Option<ClientCapabilities>| Envelope {
            protocol_version: version.into(),
            client_info: None,
            capabilities: caps,
            log_level: None,
        };
        let error = env("1900-01-01", Some(ClientCapabilities::default())).check(&config()).unwrap_err();
        assert_eq!(error.code, server_error_codes::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(
            error.data,
            Some(
                json!({"supported": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"], "requested": "1900-01-01"})
            )
        );
        // A session revision in an envelope is not served statelessly.
        let error = env("2025-11-25", Some(ClientCapabilities::default())).check(&config()).unwrap_err();
        assert_eq!(error.code, server_error_codes::UNSUPPORTED_PROTOCOL_VERSION);
        assert_eq!(env("2026-07-28", None).check(&config()).unwrap_err().code, error_codes::INVALID_PARAMS);
        let mut no_stateless = config();
        no_stateless.stateless = false;
        assert!(env("2026-07-28", Some(ClientCapabilities::default())).check(&no_stateless).is_err());
    }

    #[test]
    fn notifications_and_responses() {
        assert_eq!(
            match decode(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#) {
                ClientMessage::Notification(n) => n,
                other => panic!("{other:?}"),
            },
            ClientNotification::Initialized
        );
        let ClientMessage::Notification(ClientNotification::Cancelled(c)) =
            decode(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"r"}}"#)
        else {
            panic!()
        };
        assert_eq!(c.request_id, Some(RequestId::Number(3)));
        assert!(matches!(
            decode(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":{}}}"#),
            ClientMessage::Notification(ClientNotification::Other { .. })
        ));
        let ClientMessage::Response { id, outcome } =
            decode(r#"{"jsonrpc":"2.0","id":4,"result":{"action":"decline"}}"#)
        else {
            panic!()
        };
        assert_eq!((id, outcome.unwrap().get()), (RequestId::Number(4), r#"{"action":"decline"}"#));
        assert!(matches!(
            decode(r#"{"jsonrpc":"2.0","id":null,"error":{"code":-32700,"message":"x"}}"#),
            ClientMessage::ClientReportedError(_)
        ));
    }

    #[test]
    fn discover_names_the_server_and_every_revision() {
        let mut config = config();
        config.instructions = Some("Use it.".into());
        let result = serde_json::to_value(config.discover_result()).unwrap();
        assert_eq!(
            result,
            json!({"resultType": "complete",
                "supportedVersions": ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"],
                "capabilities": {}, "instructions": "Use it.",
                "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "gw", "version": "1"}}})
        );
        assert_eq!(LoggingLevel::parse("emergency"), Some(LoggingLevel::Emergency));
        assert!(LoggingLevel::Debug < LoggingLevel::Warning);
    }
}
