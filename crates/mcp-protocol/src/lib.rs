//! Model Context Protocol types, JSON-RPC framing, version negotiation, a sans-I/O client
//! session, and the server side (classifying what clients send, `initialize` and the
//! stateless envelope, the mirrored HTTP headers' check).
//!
//! **Invariant:** this crate is pure. It never touches processes, sockets, files or clocks; it
//! turns bytes into meaning and meaning into bytes. Transports live in `mcp-transport`.
//!
//! ```
//! use mcp_protocol::{ClientSession, Implementation, ClientCapabilities, Incoming, Message, SessionConfig};
//!
//! let mut session: ClientSession<&str> =
//!     ClientSession::new(SessionConfig::new(Implementation::new("demo", "1.0"), ClientCapabilities::default()));
//! let (id, line) = session.start_initialize("waiter").unwrap();
//! assert!(line.contains(r#""method":"initialize""#));
//!
//! // The server answers; the session matches the answer to the pending request.
//! let answer = format!(
//!     r#"{{"jsonrpc":"2.0","id":{id},"result":{{"protocolVersion":"2025-06-18","capabilities":{{}},"serverInfo":{{"name":"s","version":"1"}}}}}}"#
//! );
//! let Incoming::Response { outcome: Ok(result), payload, .. } = session.receive(Message::decode(answer.as_bytes()).unwrap()) else {
//!     panic!("expected the initialize result");
//! };
//! assert_eq!(payload, "waiter");
//! let initialized = session.finish_initialize(&result).unwrap();
//! assert!(initialized.contains("notifications/initialized"));
//! assert_eq!(session.protocol_version().unwrap().as_str(), "2025-06-18");
//! ```

mod content_de;
mod density;
pub mod elicitation;
mod headers;
mod input;
mod jsonrpc;
mod outgoing;
mod oversize;
mod server;
mod session;
pub mod stateless;
mod types;
mod version;

pub use density::{
    CONTAINER_COST, MAX_DECODED_COST, MEMBER_COST, STRING_COST, TooDense, VALUE_COST, check_density, decoded_cost,
    from_str_bounded,
};
pub use headers::{
    BodyFacts, HEADER_METHOD, HEADER_NAME, HEADER_PARAM_PREFIX, HEADER_PROTOCOL_VERSION, HeaderMismatch,
    MirroredHeaders, ParamHeader, X_MCP_HEADER, check_headers, check_param_headers, decode_header_value,
    encode_header_value, method_has_name, param_headers,
};
pub use input::{
    InputAsk, InputError, InputRound, MAX_INPUT_ASKS, MAX_URL_ELICITATIONS, input_round, url_elicitations,
};
pub use jsonrpc::{
    DecodeError, DecodeErrorKind, ErrorObject, ErrorResponse, Message, Notification, Request, RequestId, Response,
    empty_object, encode_request, error_codes, refused_response_id, to_raw,
};
pub use outgoing::Outgoing;
pub use oversize::oversize_response_id;
pub use server::{
    ClientContext, ClientMessage, ClientNotification, ClientRequest, Envelope, IncomingRequest, LOGGING_SET_LEVEL,
    LoggingLevel, META_LOG_LEVEL, META_SUBSCRIPTION_ID, RESOURCES_SUBSCRIBE, RESOURCES_UNSUBSCRIBE, RequestMeta,
    RetryParts, SESSION_VERSIONS, ServerConfig, ServerSession, ServerSessionError, ServerSessionState, classify,
    method_not_found, negotiate_initialize, server_error_codes,
};
pub use session::{
    ClientSession, Incoming, Pending, ServerNotification, ServerRequest, SessionConfig, SessionError, SessionState,
    encode_error, encode_notification, encode_result,
};
pub use types::*;
pub use version::{NegotiationError, ProtocolVersion, answered_version, negotiate};
