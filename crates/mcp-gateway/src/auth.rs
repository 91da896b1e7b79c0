//! Inbound authentication of the HTTP front: the [`Authenticator`] **port** (static bearer
//! tokens here; an OAuth resource server checking JWTs is the other adapter to come), which
//! turns a request's headers into a [`Caller`] or a 401.
//!
//! A caller's token is never passed on: the [`Caller`] carries a principal's name, not the
//! credential.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use http::HeaderMap;

use crate::backend::Caller;
use crate::seal::hex;

/// Why a request was not authenticated: answered `401` with `WWW-Authenticate: {challenge}`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct Unauthorized {
    /// The `WWW-Authenticate` value.
    pub challenge: String,
    /// What was wrong (no token, an unknown one), for the response body; never the token.
    pub reason: String,
}

/// Decides who a request is from.
#[async_trait]
pub trait Authenticator: fmt::Debug + Send + Sync {
    /// The caller `headers` authenticate.
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Unauthorized>;
}

/// Static bearer tokens, kept as SHA-256 digests and compared in constant time.
#[derive(Default)]
pub struct BearerTokens {
    tokens: Vec<([u8; 32], Caller)>,
}

impl fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokens").field("tokens", &self.tokens.len()).finish()
    }
}

fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

impl BearerTokens {
    /// No tokens (every request refused).
    pub fn new() -> Self {
        Self::default()
    }

    /// Accepts `token` as `principal` (only its digest is kept).
    pub fn token(mut self, token: &str, principal: &str) -> Self {
        self.tokens.push((sha256(token.as_bytes()), Caller::principal(principal)));
        self
    }

    /// Accepts the token whose SHA-256 is `digest_hex` (as a configuration stores it) as
    /// `principal`; `None` when `digest_hex` is not 64 hex digits.
    pub fn digest(mut self, digest_hex: &str, principal: &str) -> Option<Self> {
        let bytes = digest_hex.as_bytes();
        if bytes.len() != 64 {
            return None;
        }
        let mut digest = [0u8; 32];
        for (i, pair) in bytes.chunks(2).enumerate() {
            let text = std::str::from_utf8(pair).ok()?;
            digest[i] = u8::from_str_radix(text, 16).ok()?;
        }
        self.tokens.push((digest, Caller::principal(principal)));
        Some(self)
    }

    /// The digest a configuration stores for `token`, hex.
    pub fn digest_of(token: &str) -> String {
        hex(&sha256(token.as_bytes()))
    }

    /// Ties the last token added to a profile.
    pub fn in_profile(mut self, profile: &str) -> Self {
        if let Some((_, caller)) = self.tokens.last_mut() {
            caller.profile = Some(Arc::from(profile));
        }
        self
    }
}

#[async_trait]
impl Authenticator for BearerTokens {
    async fn authenticate(&self, headers: &HeaderMap) -> Result<Caller, Unauthorized> {
        let refuse = |reason: &str, error: Option<&str>| Unauthorized {
            challenge: match error {
                Some(error) => format!("Bearer error=\"{error}\""),
                None => "Bearer".to_owned(),
            },
            reason: reason.to_owned(),
        };
        let Some(value) = headers.get(http::header::AUTHORIZATION) else {
            return Err(refuse("this gateway needs a bearer token (Authorization: Bearer ...)", None));
        };
        let token = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer ").or_else(|| v.strip_prefix("bearer ")))
            .map(str::trim)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| refuse("the Authorization header is not a bearer token", Some("invalid_request")))?;
        let digest = sha256(token.as_bytes());
        // Every token is compared, so the time taken says nothing about which one nearly matched.
        let mut found: Option<&Caller> = None;
        for (known, caller) in &self.tokens {
            if aws_lc_rs::constant_time::verify_slices_are_equal(known, &digest).is_ok() {
                found = Some(caller);
            }
        }
        found.cloned().ok_or_else(|| refuse("the bearer token is not known to this gateway", Some("invalid_token")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        if let Ok(value) = value.parse() {
            headers.insert(http::header::AUTHORIZATION, value);
        }
        headers
    }

    #[tokio::test]
    async fn tokens_are_known_by_their_digest() {
        let digest = BearerTokens::digest_of("s3cret");
        let tokens = BearerTokens::new().token("t0ken", "alice").digest(&digest, "bob").unwrap().in_profile("ops");
        assert_eq!(tokens.authenticate(&headers("Bearer t0ken")).await, Ok(Caller::principal("alice")));
        let bob = tokens.authenticate(&headers("Bearer s3cret")).await.unwrap();
        assert_eq!((bob.principal.as_deref(), bob.profile.as_deref()), (Some("bob"), Some("ops")));
        let refused = tokens.authenticate(&headers("Bearer nope")).await.unwrap_err();
        assert_eq!(refused.challenge, "Bearer error=\"invalid_token\"");
        assert!(!refused.reason.contains("nope"));
        assert!(tokens.authenticate(&HeaderMap::new()).await.is_err());
        assert!(tokens.authenticate(&headers("Basic abc")).await.is_err());
        assert!(BearerTokens::new().digest("xyz", "c").is_none());
        assert!(!format!("{tokens:?}").contains("t0ken"));
    }
}
