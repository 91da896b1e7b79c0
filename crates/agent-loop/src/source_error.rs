//! Why a tool source could not do what it was asked ([`SourceError`]): typed, so a person is
//! told (its text is what users have always read) and a gateway can map each failure to the
//! protocol error it is (a JSON-RPC error answered by the server passed on with its code, a
//! server that is gone reported as unavailable, with whether it is coming back).

use std::fmt;
use std::time::Duration;

use mcp_client::{ClientError, ServerState, SetCallError, TransportError};
use serde_json::Value;

/// The most of a server's error message, and of its `data`, an error's text carries.
const MAX_SERVER_TEXT_CHARS: usize = 2_000;

/// What a failed request was for: the start of its message.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Operation {
    /// Calling a tool under its raw name.
    CallTool {
        /// The tool.
        tool: String,
    },
    /// Listing a server's resources and templates.
    ListResources,
    /// Reading a resource.
    ReadResource {
        /// Its URI.
        uri: String,
    },
}

/// Why a [`ToolSource`](crate::ToolSource) request failed. Every variant names the server and
/// what was asked ([`Operation`]); the text is what a person (and the model) reads.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum SourceError {
    /// No server of that name.
    UnknownServer {
        /// What was asked.
        op: Operation,
        /// The name.
        server: String,
    },
    /// The server is not there to take it (and did not come back in time): its state says
    /// why (disabled, needs auth, failed with its reason, reconnecting with the attempt) and
    /// whether it is coming back ([`SourceError::coming_back`]).
    Unavailable {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// Where it stands.
        state: ServerState,
    },
    /// The connection closed while the request was in flight (the server exited, or the
    /// transport ended); the reason says how ([`SourceError::exit_status`]).
    Closed {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// What happened (exit status, stderr tail, or who closed it).
        reason: String,
    },
    /// The server's tools (or its connection) changed since the caller's generation; nothing
    /// was sent.
    Stale {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
    },
    /// No answer within the timeout; the request was cancelled.
    Timeout {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// The method.
        method: String,
        /// The timeout.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error.
    ServerError {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// The method.
        method: String,
        /// The error's code.
        code: i64,
        /// The error's message.
        message: String,
        /// The error's data.
        data: Option<Value>,
    },
    /// The transport failed: no answer came (HTTP errors, refused credentials, broken streams).
    Transport {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// What failed.
        detail: String,
        /// The HTTP status, when an HTTP answer was the failure.
        http_status: Option<u16>,
        /// The server refused us for lack of credentials (the fix is a login or a token).
        needs_auth: bool,
    },
    /// Refused before it was sent: the server did not offer it, or the session refused.
    Refused {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// Why.
        reason: String,
    },
    /// Anything else (a malformed answer, one too large, input that could not be given, the
    /// source itself failing).
    Failed {
        /// What was asked.
        op: Operation,
        /// The server.
        server: String,
        /// What failed.
        detail: String,
    },
}

impl SourceError {
    /// `error` of a `mcp_client::ServerSet` request for `op`.
    pub fn from_set(op: Operation, error: SetCallError) -> Self {
        match error {
            SetCallError::UnknownServer { server } => Self::UnknownServer { op, server },
            SetCallError::Unavailable { server, state } => Self::Unavailable { op, server, state },
            SetCallError::Stale { server } => Self::Stale { op, server },
            SetCallError::Call { server, error } => Self::from_client(op, server, error),
            other => Self::Failed { op, server: String::new(), detail: other.to_string() },
        }
    }

    /// `error` of a request to `server` for `op`.
    pub fn from_client(op: Operation, server: String, error: ClientError) -> Self {
        match error {
            ClientError::ConnectionClosed { reason } => Self::Closed { op, server, reason },
            ClientError::Timeout { method, after } => Self::Timeout { op, server, method, after },
            ClientError::Server { method, error } => {
                let error = *error;
                Self::ServerError { op, server, method, code: error.code, message: error.message, data: error.data }
            }
            ClientError::Transport(error) => {
                let http_status = match &error {
                    TransportError::HttpStatus { status, .. } | TransportError::Unauthorized { status, .. } => {
                        Some(*status)
                    }
                    _ => None,
                };
                Self::Transport { op, server, detail: error.to_string(), http_status, needs_auth: error.needs_auth() }
            }
            error @ (ClientError::Session(_) | ClientError::NotOffered { .. }) => {
                Self::Refused { op, server, reason: error.to_string() }
            }
            other => Self::Failed { op, server, detail: other.to_string() },
        }
    }

    /// What was asked.
    pub fn operation(&self) -> &Operation {
        match self {
            Self::UnknownServer { op, .. }
            | Self::Unavailable { op, .. }
            | Self::Closed { op, .. }
            | Self::Stale { op, .. }
            | Self::Timeout { op, .. }
            | Self::ServerError { op, .. }
            | Self::Transport { op, .. }
            | Self::Refused { op, .. }
            | Self::Failed { op, .. } => op,
        }
    }

    /// The server.
    pub fn server(&self) -> &str {
        match self {
            Self::UnknownServer { server, .. }
            | Self::Unavailable { server, .. }
            | Self::Closed { server, .. }
            | Self::Stale { server, .. }
            | Self::Timeout { server, .. }
            | Self::ServerError { server, .. }
            | Self::Transport { server, .. }
            | Self::Refused { server, .. }
            | Self::Failed { server, .. } => server,
        }
    }

    /// Whether the server is on its way back (`Some(true)`: connecting or reconnecting, a
    /// retry may succeed; `Some(false)`: failed, disabled or needing a login, it will not come
    /// back by itself), when the source knows.
    pub fn coming_back(&self) -> Option<bool> {
        match self {
            Self::Unavailable { state, .. } => Some(state.is_transient()),
            _ => None,
        }
    }

    /// The exit status of a stdio server that exited, as its transport reported it
    /// (`exited (status N)` in the reason).
    pub fn exit_status(&self) -> Option<i32> {
        let reason = match self {
            Self::Closed { reason, .. } => reason.as_str(),
            Self::Unavailable {
                state: ServerState::Failed { reason, .. } | ServerState::Reconnecting { reason, .. },
                ..
            } => reason.as_str(),
            _ => return None,
        };
        let at = reason.find("exited (status ")? + "exited (status ".len();
        let digits: String = reason[at..].chars().take_while(|c| c.is_ascii_digit() || *c == '-').collect();
        digits.parse().ok()
    }

    /// Whether a login (or a token) is what would fix it.
    pub fn needs_auth(&self) -> bool {
        match self {
            Self::Transport { needs_auth, .. } => *needs_auth,
            Self::Unavailable { state: ServerState::Failed { needs_auth, .. }, .. } => *needs_auth,
            _ => false,
        }
    }
}

impl fmt::Display for SourceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let op = self.operation();
        let server = self.server();
        // The supervisor's own failures (no such server, not there, changed) name the server
        // in their text; a call's failure on the connection names it in the prefix.
        let supervisor = match self {
            Self::UnknownServer { .. } => Some(format!("no server named {server:?}")),
            Self::Unavailable { state, .. } => Some(format!("server {server:?} is {state}")),
            Self::Stale { .. } => Some(format!(
                "the tools of server {server:?} changed (it was restarted or re-listed) since they were shown; the \
                 call was not sent"
            )),
            _ => None,
        };
        let detail = || match self {
            Self::Closed { reason, .. } => format!("the connection to the server is closed: {reason}"),
            Self::Timeout { method, after, .. } => {
                format!("{method} got no answer within {after:?}; the request was cancelled")
            }
            Self::ServerError { method, code, message, data, .. } => {
                // A server's text is capped here, where every reader (a person, the model, a
                // log) gets it: an error message may be megabytes long.
                let data = data
                    .as_ref()
                    .map(|d| format!(": {}", mcp_safety::text::cut(&d.to_string(), MAX_SERVER_TEXT_CHARS)))
                    .unwrap_or_default();
                let message = mcp_safety::text::cut(message, MAX_SERVER_TEXT_CHARS);
                format!("the server answered {method} with an error: {message} (code {code}){data}")
            }
            Self::Transport { detail, .. } | Self::Failed { detail, .. } => detail.clone(),
            Self::Refused { reason, .. } => reason.clone(),
            _ => String::new(),
        };
        match (op, supervisor) {
            (Operation::CallTool { tool }, Some(text)) => write!(f, "calling tool {tool:?}: {text}"),
            (Operation::CallTool { tool }, None) => match self {
                Self::Timeout { after, .. } => write!(
                    f,
                    "calling tool {tool:?} of server {server:?}: got no answer within {after:?} (its tool_timeout_s \
                     without progress, or its max_tool_time_s in all); the call was cancelled"
                ),
                _ => write!(f, "calling tool {tool:?} of server {server:?}: {}", detail()),
            },
            (Operation::ListResources, Some(text)) => write!(f, "listing the resources: {text}"),
            (Operation::ListResources, None) => write!(f, "listing the resources: server {server:?}: {}", detail()),
            (Operation::ReadResource { uri }, Some(text)) => write!(f, "reading {uri:?}: {text}"),
            (Operation::ReadResource { uri }, None) => write!(f, "reading {uri:?}: server {server:?}: {}", detail()),
        }
    }
}

impl std::error::Error for SourceError {}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_client::{ClientError, ServerState, SetCallError, TransportError};
    use mcp_protocol::ErrorObject;

    use super::*;

    fn call(tool: &str) -> Operation {
        Operation::CallTool { tool: tool.to_owned() }
    }

    /// The texts people have always read, variant by variant, and what a gateway reads of them.
    #[test]
    fn each_failure_keeps_its_text_and_its_facts() {
        let fx = || "fx".to_owned();
        let unknown = SourceError::from_set(call("t"), SetCallError::UnknownServer { server: fx() });
        assert_eq!(unknown.to_string(), r#"calling tool "t": no server named "fx""#);

        let state = ServerState::Reconnecting {
            attempt: 2,
            retry_in: Duration::from_millis(500),
            reason: "the server exited (status 3)".into(),
        };
        let back = SourceError::from_set(call("t"), SetCallError::Unavailable { server: fx(), state: state.clone() });
        assert_eq!(back.to_string(), format!(r#"calling tool "t": server "fx" is {state}"#));
        assert_eq!((back.coming_back(), back.exit_status(), back.needs_auth()), (Some(true), Some(3), false));

        let failed = ServerState::Failed { reason: "401".into(), elapsed: Duration::ZERO, needs_auth: true };
        let auth = SourceError::from_set(call("t"), SetCallError::Unavailable { server: fx(), state: failed });
        assert_eq!((auth.coming_back(), auth.needs_auth()), (Some(false), true));

        let stale = SourceError::from_set(call("t"), SetCallError::Stale { server: fx() });
        assert!(matches!(stale, SourceError::Stale { .. }));
        assert!(stale.to_string().starts_with(r#"calling tool "t": the tools of server "fx" changed"#), "{stale}");

        let after = Duration::from_secs(2);
        let timeout =
            SetCallError::Call { server: fx(), error: ClientError::Timeout { method: "tools/call".into(), after } };
        assert_eq!(
            SourceError::from_set(call("t"), timeout).to_string(),
            r#"calling tool "t" of server "fx": got no answer within 2s (its tool_timeout_s without progress, or its max_tool_time_s in all); the call was cancelled"#
        );

        let answer = ClientError::Server {
            method: "tools/call".into(),
            error: Box::new(ErrorObject::new(-32602, "bad params")),
        };
        let expected = format!(r#"calling tool "t" of server "fx": {answer}"#);
        let error = SourceError::from_set(call("t"), SetCallError::Call { server: fx(), error: answer });
        assert_eq!(error.to_string(), expected);
        assert!(matches!(&error, SourceError::ServerError { code: -32602, message, .. } if message == "bad params"));

        let closed = ClientError::ConnectionClosed { reason: "the server exited (status 7); stderr: x".into() };
        let expected = format!(r#"reading "a://b": server "fx": {closed}"#);
        let op = Operation::ReadResource { uri: "a://b".into() };
        let error = SourceError::from_set(op, SetCallError::Call { server: fx(), error: closed });
        assert_eq!((error.to_string(), error.exit_status()), (expected, Some(7)));

        let refused = TransportError::Unauthorized { status: 401, message: "log in".into(), needs_login: true };
        let error = SourceError::from_client(Operation::ListResources, fx(), ClientError::Transport(refused));
        assert_eq!(error.to_string(), r#"listing the resources: server "fx": log in"#);
        assert!(matches!(error, SourceError::Transport { http_status: Some(401), needs_auth: true, .. }));
        assert_eq!(error.server(), "fx");
    }

    /// A server's message and data are capped in the text, whoever reads it; the facts keep
    /// them whole.
    #[test]
    fn a_servers_long_error_is_cut_in_the_text() {
        let long = "é".repeat(100_000);
        let mut object = ErrorObject::new(-32000, long.clone());
        object.data = Some(serde_json::Value::String(long.clone()));
        let answer = ClientError::Server { method: "tools/call".into(), error: Box::new(object) };
        let error = SourceError::from_set(call("t"), SetCallError::Call { server: "fx".into(), error: answer });
        let text = error.to_string();
        assert!(text.chars().count() < 2 * MAX_SERVER_TEXT_CHARS + 200, "{} characters", text.chars().count());
        assert!(text.contains("…"), "says it was cut");
        assert!(matches!(&error, SourceError::ServerError { message, .. } if *message == long));
    }
}
