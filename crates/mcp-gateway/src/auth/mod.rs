//! Inbound authentication of the HTTP front: the [`Authenticator`] **port**, which turns a
//! request's headers into a [`Caller`] or an [`Unauthorized`] refusal. Its adapters: static
//! bearer tokens kept as digests ([`BearerTokens`]), an OAuth resource server checking JWTs
//! against the issuer's published keys ([`JwtAuthenticator`]), and both at once ([`Inbound`]).
//!
//! A caller's token never goes further than this module: the [`Caller`] carries a principal's
//! name and a profile, never the credential, and nothing here puts a token into an error, a log
//! or `Debug` output.

mod bearer;
mod jwt;
mod metadata;

use std::fmt;

use async_trait::async_trait;
use http::HeaderMap;

pub use self::bearer::BearerTokens;
pub use self::jwt::{JwtAuthenticator, JwtError, JwtOptions};
pub use self::metadata::{BadResource, METADATA_PATH, ProtectedResource};
use crate::backend::Caller;

/// Longest bearer token read (a JWT with many claims is a few KiB).
const MAX_TOKEN_BYTES: usize = 16 * 1024;

/// What an [`Authenticator`] is shown of a request.
#[derive(Debug, Clone, Copy)]
pub struct AuthRequest<'a> {
    /// Its headers.
    pub headers: &'a HeaderMap,
    /// The profile its path names (`/mcp/NAME`), `None` for the gateway's own endpoint: a token
    /// minted for one profile's resource URI is good only there.
    pub profile: Option<&'a str>,
}

/// Why a request was refused, as RFC 6750 names it.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UnauthorizedKind {
    /// No bearer token (401, a challenge without an error code).
    Missing,
    /// A malformed `Authorization` header (400, `invalid_request`).
    InvalidRequest,
    /// A token that is unknown, expired, wrongly signed or for someone else (401,
    /// `invalid_token`).
    InvalidToken,
    /// A valid token without the scopes needed (403, `insufficient_scope`).
    InsufficientScope {
        /// The scopes needed, space-separated.
        scope: String,
    },
    /// Tokens cannot be checked now (the issuer's keys could not be fetched): 503.
    Unavailable,
}

/// A request that was not authenticated: the status, the `WWW-Authenticate` challenge and a
/// reason for the body. The reason never carries the token.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Unauthorized {
    /// What was wrong.
    pub kind: UnauthorizedKind,
    /// What was wrong, in words (for the body and `error_description`).
    pub reason: String,
}

impl Unauthorized {
    /// A refusal of `kind` saying `reason`.
    pub fn new(kind: UnauthorizedKind, reason: impl Into<String>) -> Self {
        Self { kind, reason: reason.into() }
    }

    /// The HTTP status it is answered with.
    pub fn status(&self) -> http::StatusCode {
        match self.kind {
            UnauthorizedKind::InvalidRequest => http::StatusCode::BAD_REQUEST,
            UnauthorizedKind::InsufficientScope { .. } => http::StatusCode::FORBIDDEN,
            UnauthorizedKind::Unavailable => http::StatusCode::SERVICE_UNAVAILABLE,
            _ => http::StatusCode::UNAUTHORIZED,
        }
    }

    /// The `WWW-Authenticate` value (`None` when tokens cannot be checked at all): `Bearer`,
    /// with the metadata URL of the resource (RFC 9728 §5.1) and the scopes it needs when there
    /// are, and the error code and description when a token was presented (RFC 6750 §3).
    pub fn challenge(&self, resource_metadata: Option<&str>, scopes: &[String]) -> Option<String> {
        let error = match &self.kind {
            UnauthorizedKind::Missing => None,
            UnauthorizedKind::InvalidRequest => Some("invalid_request"),
            UnauthorizedKind::InvalidToken => Some("invalid_token"),
            UnauthorizedKind::InsufficientScope { .. } => Some("insufficient_scope"),
            UnauthorizedKind::Unavailable => return None,
        };
        let mut params: Vec<String> = Vec::new();
        if let Some(url) = resource_metadata {
            params.push(format!("resource_metadata={}", quoted(url)));
        }
        match &self.kind {
            UnauthorizedKind::InsufficientScope { scope } => params.push(format!("scope={}", quoted(scope))),
            _ if !scopes.is_empty() => params.push(format!("scope={}", quoted(&scopes.join(" ")))),
            _ => {}
        }
        if let Some(error) = error {
            params.push(format!("error=\"{error}\""));
            params.push(format!("error_description={}", quoted(&self.reason)));
        }
        Some(if params.is_empty() { "Bearer".to_owned() } else { format!("Bearer {}", params.join(", ")) })
    }
}

/// An RFC 9110 quoted string holding only what RFC 6750 allows in its parameters (visible ASCII
/// and spaces; others become `?`), at most 300 characters.
fn quoted(text: &str) -> String {
    let mut out = String::with_capacity(text.len().min(300) + 2);
    out.push('"');
    for c in text.chars().take(300) {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            ' '..='~' => out.push(c),
            _ => out.push('?'),
        }
    }
    out.push('"');
    out
}

/// Decides who a request is from.
#[async_trait]
pub trait Authenticator: fmt::Debug + Send + Sync {
    /// The caller `request` authenticates (with the profile its token is tied to, if any).
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<Caller, Unauthorized>;

    /// The protected resource this authenticator guards when it is an OAuth resource server:
    /// the front serves its metadata and names it in challenges. `None` by default.
    fn protected_resource(&self) -> Option<&ProtectedResource> {
        None
    }
}

/// The bearer token of a request: `Ok(None)` when there is no `Authorization: Bearer` header
/// at all (another scheme counts as none, RFC 6750 §3.1), `Err` when it is malformed.
pub(crate) fn bearer_token(headers: &HeaderMap) -> Result<Option<&str>, Unauthorized> {
    let Some(value) = headers.get(http::header::AUTHORIZATION) else { return Ok(None) };
    let malformed = || Unauthorized::new(UnauthorizedKind::InvalidRequest, "the Authorization header is malformed");
    let value = value.to_str().map_err(|_| malformed())?;
    let Some((scheme, token)) = value.split_once(' ') else {
        return if value.eq_ignore_ascii_case("bearer") { Err(malformed()) } else { Ok(None) };
    };
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Ok(None);
    }
    let token = token.trim();
    if token.is_empty() || token.len() > MAX_TOKEN_BYTES || token.contains(' ') {
        return Err(malformed());
    }
    Ok(Some(token))
}

/// The refusal of a request without a bearer token.
pub(crate) fn missing() -> Unauthorized {
    Unauthorized::new(UnauthorizedKind::Missing, "this gateway needs a bearer token (Authorization: Bearer ...)")
}

/// Static bearer tokens and an OAuth resource server together: a token that is one of the
/// static ones is that (every static token is compared, in constant time), anything else is
/// checked as a JWT.
#[derive(Debug, Default)]
pub struct Inbound {
    tokens: Option<BearerTokens>,
    oauth: Option<JwtAuthenticator>,
}

impl Inbound {
    /// Static tokens only, an OAuth resource server only, or both.
    pub fn new(tokens: Option<BearerTokens>, oauth: Option<JwtAuthenticator>) -> Self {
        Self { tokens, oauth }
    }
}

#[async_trait]
impl Authenticator for Inbound {
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<Caller, Unauthorized> {
        let token = bearer_token(request.headers)?.ok_or_else(missing)?;
        if let Some(caller) = self.tokens.as_ref().and_then(|tokens| tokens.check(token)) {
            return Ok(caller);
        }
        match &self.oauth {
            Some(oauth) => oauth.check(token, request.profile).await,
            None => Err(bearer::unknown()),
        }
    }

    fn protected_resource(&self) -> Option<&ProtectedResource> {
        self.oauth.as_ref().map(JwtAuthenticator::resource)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Headers with this `Authorization` value (none when it is no header value).
    pub(super) fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Ok(value) = value.parse() {
            headers.insert(http::header::AUTHORIZATION, value);
        }
        headers
    }

    #[test]
    fn bearer_tokens_are_read_strictly() {
        assert_eq!(bearer_token(&headers("Bearer abc")), Ok(Some("abc")));
        assert_eq!(bearer_token(&headers("bearer  abc ")), Ok(Some("abc")));
        assert_eq!(bearer_token(&HeaderMap::new()), Ok(None));
        assert_eq!(bearer_token(&headers("Basic dXNlcjpwYXNz")), Ok(None), "another scheme is no token");
        for bad in ["Bearer", "Bearer ", "Bearer a b"] {
            assert_eq!(bearer_token(&headers(bad)).map_err(|e| e.kind), Err(UnauthorizedKind::InvalidRequest), "{bad}");
        }
        let long = format!("Bearer {}", "a".repeat(MAX_TOKEN_BYTES + 1));
        assert!(bearer_token(&headers(&long)).is_err());
    }

    #[test]
    fn challenges_say_what_rfc_6750_and_9728_ask() {
        let url = "https://gw.example.com/.well-known/oauth-protected-resource/mcp";
        assert_eq!(missing().challenge(None, &[]).as_deref(), Some("Bearer"));
        assert_eq!(
            missing().challenge(Some(url), &["mcp".into()]).as_deref(),
            Some(format!("Bearer resource_metadata=\"{url}\", scope=\"mcp\"").as_str())
        );
        let expired = Unauthorized::new(UnauthorizedKind::InvalidToken, "the token expired \"then\"\n");
        assert_eq!(
            expired.challenge(Some(url), &[]).as_deref(),
            Some(
                format!(
                    "Bearer resource_metadata=\"{url}\", error=\"invalid_token\", error_description=\"the token expired \\\"then\\\"?\""
                )
                .as_str()
            )
        );
        assert_eq!(expired.status(), http::StatusCode::UNAUTHORIZED);
        let scope = Unauthorized::new(UnauthorizedKind::InsufficientScope { scope: "a b".into() }, "needs a and b");
        assert_eq!(scope.status(), http::StatusCode::FORBIDDEN);
        let said = scope.challenge(None, &["a".into()]).unwrap_or_default();
        assert!(said.contains("scope=\"a b\"") && said.contains("error=\"insufficient_scope\""), "{said}");
        let down = Unauthorized::new(UnauthorizedKind::Unavailable, "keys unavailable");
        assert_eq!((down.status(), down.challenge(Some(url), &[])), (http::StatusCode::SERVICE_UNAVAILABLE, None));
        // Every challenge is a valid header value.
        for refusal in [missing(), expired, scope] {
            let value = refusal.challenge(Some(url), &["x".into()]).unwrap_or_default();
            assert!(http::HeaderValue::from_str(&value).is_ok(), "{value}");
        }
    }
}
