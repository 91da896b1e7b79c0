//! Why a client operation failed.

use std::time::Duration;

use mcp_protocol::{ErrorObject, SessionError};

use crate::transport::TransportError;

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The transport failed (for this request, or the whole connection): the server did not
    /// answer with an error; no answer came at all.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The connection is gone; every pending request fails with this.
    #[error("the connection to the server is closed: {reason}")]
    ConnectionClosed {
        /// What happened (exit status, stderr tail, or who closed it).
        reason: String,
    },
    /// No answer within the timeout; the request was cancelled.
    #[error("{method} got no answer within {after:?}; the request was cancelled")]
    Timeout {
        /// The method.
        method: String,
        /// The timeout.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error (only then: failures of the transport are
    /// [`ClientError::Transport`]).
    #[error("the server answered {method} with an error: {error}")]
    Server {
        /// The method.
        method: String,
        /// The error (boxed: it is rare, and keeps every `Result` of this crate small).
        error: Box<ErrorObject>,
    },
    /// The server's answer did not have the expected shape.
    #[error("the server's answer to {method} is malformed: {source}")]
    BadResult {
        /// The method.
        method: String,
        /// What did not parse.
        source: serde_json::Error,
    },
    /// The server's answer packs more values than the host reads from one message (see
    /// [`mcp_protocol::check_density`]).
    #[error("the server's answer to {method} was dropped: {dense}")]
    TooDense {
        /// The method.
        method: String,
        /// How dense it was.
        dense: mcp_protocol::TooDense,
    },
    /// The session refused (not initialized, closed, negotiation failed).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Pagination went past the page limit.
    #[error(
        "{method} returned more than {limit} pages; stopped (the host takes at most that many; a program embedding mcp-client sets ListLimits::max_pages)"
    )]
    TooManyPages {
        /// The list method (`tools/list`, `resources/list`, ...).
        method: &'static str,
        /// The limit.
        limit: usize,
    },
    /// Pagination went past the item limit.
    #[error(
        "{method} returned more than {limit} items; stopped (the host takes at most that many; a program embedding mcp-client sets ListLimits::max_items)"
    )]
    TooManyItems {
        /// The list method.
        method: &'static str,
        /// The limit.
        limit: usize,
    },
    /// A paginated list's answers came to more bytes than [`ListLimits::max_bytes`](crate::ListLimits::max_bytes).
    #[error(
        "{method} answered with more than {limit} bytes in all; stopped (the host keeps at most that much of a listing; a program embedding mcp-client sets ListLimits::max_bytes)"
    )]
    ListTooLarge {
        /// The list method.
        method: &'static str,
        /// The limit, in bytes.
        limit: usize,
    },
    /// An input-required result (2026-07-28) could not be answered.
    #[error("{method} asked for input that could not be given: {reason}")]
    InputRequired {
        /// The method.
        method: String,
        /// Why.
        reason: String,
    },
    /// The server handed out a cursor it had handed out before (a loop).
    #[error("{method} returned cursor {cursor:?} twice; the server's pagination loops")]
    RepeatedCursor {
        /// The list method.
        method: &'static str,
        /// The repeated cursor.
        cursor: String,
    },
    /// The server did not declare the capability the request needs, so it was not sent.
    #[error("the server does not offer {capability} (it did not declare the capability); {method} was not sent")]
    NotOffered {
        /// The method not sent.
        method: &'static str,
        /// The capability missing (`resources`, `prompts`, `tools`).
        capability: &'static str,
    },
    /// An answer was larger than the caller's cap (a resource read).
    #[error(
        "the server's answer to {method} is {size} bytes, more than the limit of {limit}; it was dropped \
         (raise the limit if you need it)"
    )]
    TooLarge {
        /// The method.
        method: &'static str,
        /// The answer's size in bytes (as JSON on the wire).
        size: usize,
        /// The limit.
        limit: usize,
    },
}
