//! The sans-I/O client session: ids, pending requests, lifecycle, and what every incoming
//! message means. An adapter feeds it decoded messages and writes the lines it hands back.
//!
//! The session is generic over a payload `P` that the adapter attaches to each pending request
//! (a channel to the waiting caller, say), so there is exactly one table of pending requests.

use std::collections::HashMap;

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;

use crate::jsonrpc::{
    ErrorObject, ErrorResponse, Message, Notification, Request, RequestId, Response, error_codes, to_raw,
};
use crate::outgoing::Outgoing;
use crate::types::{
    CancelledNotificationParams, ClientCapabilities, CreateMessageRequestParams, ElicitRequestParams, Implementation,
    InitializeRequestParams, InitializeResult, LoggingMessageNotificationParams, ProgressNotificationParams,
    ResourceUpdatedNotificationParams, methods,
};
use crate::version::{NegotiationError, ProtocolVersion, negotiate};

/// Where the session is in its lifecycle.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionState {
    /// Before the `initialize` result was accepted: only `initialize` and `ping` may be sent
    /// (while a lost session is restored, only the handshake: see [`ClientSession::restart`]).
    Initializing,
    /// Handshake done; any request may be sent.
    Ready,
    /// Closed: nothing more may be sent.
    Closed,
}

/// Why the session refused to do something.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// The session is closed.
    #[error("the session is closed")]
    Closed,
    /// A request other than initialize/ping was attempted before the handshake finished.
    #[error("{method:?} cannot be sent before the initialize handshake has finished")]
    NotReady {
        /// The method attempted.
        method: String,
    },
    /// The handshake was attempted twice.
    #[error("the session is already initialized")]
    AlreadyInitialized,
    /// Params could not be serialized.
    #[error("could not encode params of {method:?}: {source}")]
    Encode {
        /// The method.
        method: String,
        /// The serializer's error.
        source: serde_json::Error,
    },
    /// The server's initialize result could not be read.
    #[error("the initialize result is malformed: {0}")]
    BadInitializeResult(serde_json::Error),
    /// The server's initialize result packs more values than the host reads from one message.
    #[error("the initialize result is refused: {0}")]
    DenseInitializeResult(crate::TooDense),
    /// The server answered a protocol revision the client does not accept.
    #[error(transparent)]
    Negotiation(#[from] NegotiationError),
}

/// A request that is waiting for its response.
#[derive(Debug)]
pub struct Pending<P> {
    /// The request's method.
    pub method: String,
    /// The adapter's payload.
    pub payload: P,
}

/// A request the server sent to the client, classified.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum ServerRequest {
    /// `ping`: answer with an empty result.
    Ping,
    /// `roots/list`.
    ListRoots,
    /// `sampling/createMessage`.
    CreateMessage(CreateMessageRequestParams),
    /// `elicitation/create`.
    Elicit(ElicitRequestParams),
    /// A method this client does not implement: answer -32601.
    Unknown {
        /// The method.
        method: String,
    },
}

/// A notification the server sent, classified.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum ServerNotification {
    /// `notifications/tools/list_changed`.
    ToolsListChanged,
    /// `notifications/prompts/list_changed`.
    PromptsListChanged,
    /// `notifications/resources/list_changed`.
    ResourcesListChanged,
    /// `notifications/resources/updated`.
    ResourceUpdated(ResourceUpdatedNotificationParams),
    /// `notifications/progress`.
    Progress(ProgressNotificationParams),
    /// `notifications/cancelled`.
    Cancelled(CancelledNotificationParams),
    /// `notifications/message`.
    Log(LoggingMessageNotificationParams),
    /// Any other notification (or one whose params did not parse), kept raw.
    Other {
        /// The method.
        method: String,
        /// Raw params.
        params: Option<Box<RawValue>>,
    },
}

/// What an incoming message means for the client.
#[derive(Debug)]
pub enum Incoming<P> {
    /// The answer to a pending request.
    Response {
        /// The request's id.
        id: RequestId,
        /// The request's method.
        method: String,
        /// The payload attached when the request was started.
        payload: P,
        /// The raw result, or the error the server returned.
        outcome: Result<Box<RawValue>, ErrorObject>,
    },
    /// A response to no pending request (late, after a timeout or cancel, or bogus).
    UnmatchedResponse {
        /// Its id, if it had one.
        id: Option<RequestId>,
    },
    /// An error response without an id: the server could not read something we sent.
    ServerReportedError(ErrorObject),
    /// A request from the server; answer it with [`ClientSession::encode_result`] or
    /// [`ClientSession::encode_error`].
    Request {
        /// The id to answer.
        id: RequestId,
        /// What it asks.
        request: ServerRequest,
    },
    /// A server request whose params were invalid; `reply` is the -32602 error line to send.
    InvalidRequest {
        /// The error response to send back.
        reply: Outgoing,
    },
    /// A notification.
    Notification(ServerNotification),
}

/// Configuration of the handshake.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    /// Who the client is.
    pub client_info: Implementation,
    /// What the client supports.
    pub capabilities: ClientCapabilities,
    /// The revision offered in `initialize` (the newest supported, normally).
    pub offered_version: ProtocolVersion,
    /// The revisions the client accepts.
    pub supported_versions: Vec<ProtocolVersion>,
}

impl SessionConfig {
    /// Offer the newest revision and accept all of them.
    pub fn new(client_info: Implementation, capabilities: ClientCapabilities) -> Self {
        Self {
            client_info,
            capabilities,
            offered_version: ProtocolVersion::LATEST,
            supported_versions: ProtocolVersion::ALL.to_vec(),
        }
    }
}

/// The sans-I/O client session.
#[derive(Debug)]
pub struct ClientSession<P> {
    config: SessionConfig,
    state: SessionState,
    next_id: i64,
    pending: HashMap<RequestId, Pending<P>>,
    negotiated: Option<ProtocolVersion>,
    server: Option<InitializeResult>,
    /// The session was open and the transport lost it: only the handshake may be sent.
    restoring: bool,
}

impl<P> ClientSession<P> {
    /// A new session in the `Initializing` state.
    pub fn new(config: SessionConfig) -> Self {
        Self {
            config,
            state: SessionState::Initializing,
            next_id: 0,
            pending: HashMap::new(),
            negotiated: None,
            server: None,
            restoring: false,
        }
    }

    /// The lifecycle state.
    pub fn state(&self) -> SessionState {
        self.state
    }

    /// The negotiated revision, once ready (while a lost session is restored, the one negotiated
    /// before).
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.negotiated
    }

    /// The server's initialize result, once ready (while a lost session is restored, the one
    /// received before).
    pub fn server(&self) -> Option<&InitializeResult> {
        self.server.as_ref()
    }

    /// The transport lost the session (a connection opened again, a session the server ended):
    /// the handshake must be made again before anything else is sent. The state goes back to
    /// `Initializing` and every request but the handshake is refused with
    /// [`SessionError::NotReady`], `ping` too; pending requests stay (the adapter decides what
    /// becomes of them). The revision and the server's result negotiated before are kept until the
    /// new handshake replaces them, so [`ClientSession::protocol_version`] says which handshake to
    /// make again (`server/discover` for the stateless revision, else `initialize`). Returns
    /// whether the session was open: one being restored already, still opening or closed has
    /// nothing to restore, and is left as it is.
    pub fn restart(&mut self) -> bool {
        if self.state != SessionState::Ready {
            return false;
        }
        self.state = SessionState::Initializing;
        self.restoring = true;
        true
    }

    /// Whether a lost session waits for its new handshake (see [`ClientSession::restart`]).
    pub fn is_restoring(&self) -> bool {
        self.restoring && self.state == SessionState::Initializing
    }

    /// The handshake configuration.
    pub fn config(&self) -> &SessionConfig {
        &self.config
    }

    /// How many requests await a response.
    pub fn pending_count(&self) -> usize {
        self.pending.len()
    }

    /// The method of a pending request.
    pub fn pending_method(&self, id: &RequestId) -> Option<&str> {
        self.pending.get(id).map(|p| p.method.as_str())
    }

    /// The payload of a pending request.
    pub fn pending_mut(&mut self, id: &RequestId) -> Option<&mut P> {
        self.pending.get_mut(id).map(|p| &mut p.payload)
    }

    /// The id the next request will get (for progress tokens that reuse it).
    pub fn peek_next_id(&self) -> RequestId {
        RequestId::Number(self.next_id + 1)
    }

    /// Start the `initialize` request; returns its id and the message to send.
    pub fn start_initialize(&mut self, payload: P) -> Result<(RequestId, Outgoing), SessionError> {
        if self.state == SessionState::Closed {
            return Err(SessionError::Closed);
        }
        if self.state != SessionState::Initializing || self.pending.values().any(|p| p.method == methods::INITIALIZE) {
            return Err(SessionError::AlreadyInitialized);
        }
        let params = InitializeRequestParams {
            protocol_version: self.config.offered_version.as_str().to_owned(),
            capabilities: self.config.capabilities.clone(),
            client_info: self.config.client_info.clone(),
            extra: Default::default(),
        };
        self.push_request(methods::INITIALIZE, Some(&params), payload)
    }

    /// Start `server/discover` (the 2026-07-28 revision's replacement for `initialize`); returns
    /// its id and the message to send. Finish with [`ClientSession::finish_discover`]; if the server
    /// does not know it, [`ClientSession::start_initialize`] may follow.
    pub fn start_discover(&mut self, payload: P) -> Result<(RequestId, Outgoing), SessionError> {
        if self.state == SessionState::Closed {
            return Err(SessionError::Closed);
        }
        if self.state != SessionState::Initializing {
            return Err(SessionError::AlreadyInitialized);
        }
        let params = crate::stateless::add_envelope(None, &self.envelope(ProtocolVersion::STATELESS));
        self.push_request(crate::stateless::SERVER_DISCOVER, Some(&params), payload)
    }

    /// Accept the raw result of `server/discover`: when the server speaks 2026-07-28, the
    /// session is `Ready` in that revision (every later request carries the envelope).
    pub fn finish_discover(&mut self, result: &RawValue) -> Result<(), SessionError> {
        if self.state == SessionState::Closed {
            return Err(SessionError::Closed);
        }
        if self.state != SessionState::Initializing {
            return Err(SessionError::AlreadyInitialized);
        }
        let result: crate::stateless::DiscoverResult = read_initialize_result(result)?;
        let stateless = ProtocolVersion::STATELESS;
        if !result.supported_versions.iter().any(|v| v == stateless.as_str()) {
            return Err(NegotiationError {
                offered: stateless,
                answered: result.supported_versions.join(", "),
                supported: vec![stateless],
            }
            .into());
        }
        let server_info = result.server_info().unwrap_or_else(|| Implementation::new("unknown", "unknown"));
        self.server = Some(InitializeResult {
            protocol_version: stateless.as_str().to_owned(),
            capabilities: result.capabilities,
            server_info,
            instructions: result.instructions,
            meta: result.meta,
            extra: result.extra,
        });
        self.negotiated = Some(stateless);
        self.state = SessionState::Ready;
        self.restoring = false;
        Ok(())
    }

    fn envelope(&self, version: ProtocolVersion) -> serde_json::Map<String, serde_json::Value> {
        crate::stateless::envelope(version.as_str(), &self.config.client_info, &self.config.capabilities)
    }

    /// Accept the raw result of `initialize`: negotiate the revision, move to `Ready`, and
    /// return the `notifications/initialized` message to send.
    pub fn finish_initialize(&mut self, result: &RawValue) -> Result<Outgoing, SessionError> {
        if self.state == SessionState::Closed {
            return Err(SessionError::Closed);
        }
        if self.state != SessionState::Initializing {
            return Err(SessionError::AlreadyInitialized);
        }
        let result: InitializeResult = read_initialize_result(result)?;
        let version =
            negotiate(self.config.offered_version, &self.config.supported_versions, &result.protocol_version)?;
        self.negotiated = Some(version);
        self.server = Some(result);
        self.state = SessionState::Ready;
        self.restoring = false;
        let text =
            Message::Notification(Notification { method: methods::INITIALIZED.to_owned(), params: None }).encode();
        Ok(Outgoing::notification(text, methods::INITIALIZED))
    }

    /// Start a request; returns its id and the message to send.
    pub fn start_request<T: Serialize + ?Sized>(
        &mut self,
        method: &str,
        params: Option<&T>,
        payload: P,
    ) -> Result<(RequestId, Outgoing), SessionError> {
        self.check_ready(method)?;
        self.push_request(method, params, payload)
    }

    /// Start a request whose progress the server may report: `params._meta.progressToken` is
    /// the request's own id, so progress notifications find the pending request without a
    /// second table. Params that are not an object are replaced by one carrying the token.
    pub fn start_request_with_progress<T: Serialize + ?Sized>(
        &mut self,
        method: &str,
        params: Option<&T>,
        payload: P,
    ) -> Result<(RequestId, Outgoing), SessionError> {
        self.check_ready(method)?;
        let encode_error = |source| SessionError::Encode { method: method.to_owned(), source };
        let mut params = match params.map(serde_json::to_value).transpose().map_err(encode_error)? {
            Some(serde_json::Value::Object(map)) => map,
            _ => serde_json::Map::new(),
        };
        let token = serde_json::to_value(self.peek_next_id()).map_err(encode_error)?;
        let meta = params.entry("_meta").or_insert_with(|| serde_json::Value::Object(serde_json::Map::new()));
        if !meta.is_object() {
            *meta = serde_json::Value::Object(serde_json::Map::new());
        }
        if let serde_json::Value::Object(meta) = meta {
            meta.insert("progressToken".to_owned(), token);
        }
        self.push_request(method, Some(&params), payload)
    }

    fn check_ready(&self, method: &str) -> Result<(), SessionError> {
        match self.state {
            SessionState::Closed => Err(SessionError::Closed),
            SessionState::Initializing if self.restoring || method != methods::PING => {
                Err(SessionError::NotReady { method: method.to_owned() })
            }
            _ => Ok(()),
        }
    }

    fn push_request<T: Serialize + ?Sized>(
        &mut self,
        method: &str,
        params: Option<&T>,
        payload: P,
    ) -> Result<(RequestId, Outgoing), SessionError> {
        let id = RequestId::Number(self.next_id + 1);
        let encode_error = |source| SessionError::Encode { method: method.to_owned(), source };
        // Before negotiation, only `server/discover` carries an envelope (of the stateless revision).
        let envelope_version = match self.negotiated {
            Some(version) if version.is_stateless() => Some(version),
            None if method == crate::stateless::SERVER_DISCOVER => Some(ProtocolVersion::STATELESS),
            _ => None,
        };
        let line = match self.negotiated {
            // The stateless era: every request says who we are and what we can do.
            Some(version) if version.is_stateless() => {
                let params = params.map(serde_json::to_value).transpose().map_err(encode_error)?;
                let params = crate::stateless::add_envelope(params, &self.envelope(version));
                crate::jsonrpc::encode_request(&id, method, Some(&params)).map_err(encode_error)?
            }
            _ => crate::jsonrpc::encode_request(&id, method, params).map_err(encode_error)?,
        };
        self.next_id += 1;
        self.pending.insert(id.clone(), Pending { method: method.to_owned(), payload });
        Ok((id.clone(), Outgoing::request(line, id, method, envelope_version)))
    }

    /// Give up on a pending request: returns its payload and the `notifications/cancelled`
    /// message to send, or `None` if it is no longer pending. `initialize` is never cancelled
    /// by notification (the specification forbids it); its payload is still returned.
    pub fn cancel(&mut self, id: &RequestId, reason: &str) -> Option<(P, Option<Outgoing>)> {
        let pending = self.pending.remove(id)?;
        if pending.method == methods::INITIALIZE || self.state == SessionState::Closed {
            return Some((pending.payload, None));
        }
        let params = CancelledNotificationParams {
            request_id: Some(id.clone()),
            reason: Some(reason.to_owned()),
            extra: Default::default(),
        };
        let line = encode_notification(methods::CANCELLED, Some(&params)).ok();
        Some((pending.payload, line.map(|text| Outgoing::notification(text, methods::CANCELLED))))
    }

    /// The ids of pending requests whose payload satisfies `pred` (for example, whose deadline
    /// passed); give each up with [`ClientSession::cancel`].
    pub fn pending_where(&self, mut pred: impl FnMut(&P) -> bool) -> Vec<RequestId> {
        self.pending.iter().filter(|(_, p)| pred(&p.payload)).map(|(id, _)| id.clone()).collect()
    }

    /// Take a pending request that will never be answered (the transport could not deliver it
    /// or its answer): returns it so its waiter can be told; no cancellation is sent.
    pub fn fail(&mut self, id: &RequestId) -> Option<Pending<P>> {
        self.pending.remove(id)
    }

    /// Close the session: every pending request is returned so its waiter can be told.
    pub fn close(&mut self) -> Vec<(RequestId, Pending<P>)> {
        self.state = SessionState::Closed;
        self.pending.drain().collect()
    }

    /// Classify an incoming message.
    pub fn receive(&mut self, message: Message) -> Incoming<P> {
        match message {
            Message::Response(Response { id, result }) => self.complete(id, Ok(result)),
            Message::Error(ErrorResponse { id: Some(id), error }) => self.complete(id, Err(error)),
            Message::Error(ErrorResponse { id: None, error }) => Incoming::ServerReportedError(error),
            Message::Request(request) => classify_request(request),
            Message::Notification(n) => Incoming::Notification(classify_notification(n)),
        }
    }

    fn complete(&mut self, id: RequestId, outcome: Result<Box<RawValue>, ErrorObject>) -> Incoming<P> {
        match self.pending.remove(&id) {
            Some(Pending { method, payload }) => Incoming::Response { id, method, payload, outcome },
            None => Incoming::UnmatchedResponse { id: Some(id) },
        }
    }
}

fn parse_params<T: DeserializeOwned>(params: &Option<Box<RawValue>>) -> Result<T, serde_json::Error> {
    match params {
        Some(raw) => serde_json::from_str(raw.get()),
        None => serde_json::from_str("{}"),
    }
}

fn classify_request<P>(request: Request) -> Incoming<P> {
    let Request { id, method, params } = request;
    let parsed = match method.as_str() {
        methods::PING => Ok(ServerRequest::Ping),
        methods::ROOTS_LIST => Ok(ServerRequest::ListRoots),
        methods::SAMPLING_CREATE_MESSAGE => parse_params(&params).map(ServerRequest::CreateMessage),
        methods::ELICITATION_CREATE => parse_params(&params).map(ServerRequest::Elicit),
        _ => Ok(ServerRequest::Unknown { method }),
    };
    match parsed {
        Ok(request) => Incoming::Request { id, request },
        Err(e) => {
            let error = ErrorObject::new(error_codes::INVALID_PARAMS, format!("Invalid params: {e}"));
            Incoming::InvalidRequest { reply: Outgoing::response(encode_error(id.clone(), error), id) }
        }
    }
}

fn classify_notification(n: Notification) -> ServerNotification {
    fn typed<T: DeserializeOwned>(n: Notification, wrap: impl FnOnce(T) -> ServerNotification) -> ServerNotification {
        match parse_params(&n.params) {
            Ok(p) => wrap(p),
            Err(_) => ServerNotification::Other { method: n.method, params: n.params },
        }
    }
    match n.method.as_str() {
        methods::TOOLS_LIST_CHANGED => ServerNotification::ToolsListChanged,
        methods::PROMPTS_LIST_CHANGED => ServerNotification::PromptsListChanged,
        methods::RESOURCES_LIST_CHANGED => ServerNotification::ResourcesListChanged,
        methods::RESOURCES_UPDATED => typed(n, ServerNotification::ResourceUpdated),
        methods::PROGRESS => typed(n, ServerNotification::Progress),
        methods::CANCELLED => typed(n, ServerNotification::Cancelled),
        methods::MESSAGE => typed(n, ServerNotification::Log),
        _ => ServerNotification::Other { method: n.method, params: n.params },
    }
}

/// The line answering server request `id` with `result`.
pub fn encode_result<T: Serialize + ?Sized>(id: RequestId, result: &T) -> String {
    match to_raw(result) {
        Ok(result) => Message::Response(Response { id, result }).encode(),
        Err(e) => {
            encode_error(id, ErrorObject::new(error_codes::INTERNAL_ERROR, format!("could not encode result: {e}")))
        }
    }
}

/// The line answering server request `id` with an error.
pub fn encode_error(id: RequestId, error: ErrorObject) -> String {
    Message::Error(ErrorResponse { id: Some(id), error }).encode()
}

/// The line of a client notification.
pub fn encode_notification<T: Serialize + ?Sized>(
    method: &str,
    params: Option<&T>,
) -> Result<String, serde_json::Error> {
    let params = params.map(|p| to_raw(p)).transpose()?;
    Ok(Message::Notification(Notification { method: method.to_owned(), params }).encode())
}

impl<P> ClientSession<P> {
    /// See [`encode_result`].
    pub fn encode_result<T: Serialize + ?Sized>(id: RequestId, result: &T) -> String {
        encode_result(id, result)
    }

    /// See [`encode_error`].
    pub fn encode_error(id: RequestId, error: ErrorObject) -> String {
        encode_error(id, error)
    }
}

/// The result of `initialize` or `server/discover`, refused when too dense to read (its
/// unknown members are kept as values).
fn read_initialize_result<T: serde::de::DeserializeOwned>(result: &RawValue) -> Result<T, SessionError> {
    crate::from_str_bounded(result.get(), SessionError::DenseInitializeResult, SessionError::BadInitializeResult)
}
