//! Model Context Protocol types, JSON-RPC framing, version negotiation and a sans-I/O client
//! session.
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
pub mod elicitation;
mod input;
mod jsonrpc;
mod outgoing;
mod oversize;
mod session;
pub mod stateless;
mod types;
mod version;

pub use input::{InputAsk, InputError, InputRound, MAX_URL_ELICITATIONS, input_round, url_elicitations};
pub use jsonrpc::{
    DecodeError, DecodeErrorKind, ErrorObject, ErrorResponse, Message, Notification, Request, RequestId, Response,
    empty_object, encode_request, error_codes, to_raw,
};
pub use outgoing::Outgoing;
pub use oversize::oversize_response_id;
pub use session::{
    ClientSession, Incoming, Pending, ServerNotification, ServerRequest, SessionConfig, SessionError, SessionState,
    encode_error, encode_notification, encode_result,
};
pub use types::*;
pub use version::{NegotiationError, ProtocolVersion, negotiate};
