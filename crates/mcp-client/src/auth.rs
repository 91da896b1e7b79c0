//! The authorization port of the HTTP transport.
//!
//! A protected MCP server answers a request without a usable token with HTTP 401 (or 403
//! `insufficient_scope`) and a `WWW-Authenticate` challenge. The transport knows nothing of
//! OAuth: it asks an [`Authorizer`] for the `Authorization` header of every request, and on a
//! 401/403 hands it the challenge and retries once the authorizer says it obtained a new token.
//! `mcp-auth` provides the OAuth 2.1 adapter; tests and machine clients can plug in their own.

use async_trait::async_trait;
use mcp_safety::Secret;

/// How many times one message is retried after the authorizer obtained a new token. The
/// authorizer bounds its own step-ups; this only stops a broken one from looping.
pub const MAX_AUTH_RETRIES: u32 = 4;

/// A refusal from the server: its HTTP status and `WWW-Authenticate` header values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AuthChallenge {
    /// 401 or 403.
    pub status: u16,
    /// Every `WWW-Authenticate` header value, in order (may be empty).
    pub www_authenticate: Vec<String>,
    /// The `Authorization` header value that was refused, if one was sent: an authorizer
    /// serving several requests at once sees whether its token changed meanwhile.
    pub refused: Option<Secret>,
}

/// Why no (better) token could be obtained.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{message}")]
pub struct AuthError {
    /// What went wrong and what to do, for people.
    pub message: String,
    /// The user must log in (interactively) before the server can be used: shown as
    /// `needs-auth`, not as a failure of the server.
    pub needs_login: bool,
}

impl AuthError {
    /// An error the user fixes by logging in.
    pub fn needs_login(message: impl Into<String>) -> Self {
        Self { message: message.into(), needs_login: true }
    }

    /// Any other error (discovery failed, the authorization server refused, ...).
    pub fn failed(message: impl Into<String>) -> Self {
        Self { message: message.into(), needs_login: false }
    }
}

/// Supplies credentials to the HTTP transport. Implementations must be cheap to call for
/// every request when they already hold a valid token.
#[async_trait]
pub trait Authorizer: std::fmt::Debug + Send + Sync + 'static {
    /// The `Authorization` header value for the next request (`Bearer ...`), or `None` to
    /// send the request without one (the server will say whether it needs one). May refresh
    /// a token that expired or is about to.
    async fn authorization(&self) -> Option<Secret>;

    /// The server refused a request. Obtain a new or broader token and return `Ok(())` to
    /// have the request sent again, or say why not.
    async fn challenged(&self, challenge: &AuthChallenge) -> Result<(), AuthError>;
}
