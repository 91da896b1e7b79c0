//! Static bearer tokens, kept as SHA-256 digests (as the configuration stores them) and compared
//! in constant time.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;

use super::{AuthRequest, Authenticator, Unauthorized, UnauthorizedKind, bearer_token, missing};
use crate::backend::Caller;
use crate::seal::hex;

/// Static bearer tokens, each known by its SHA-256 digest, tied to a principal and optionally
/// to a profile.
#[derive(Default)]
pub struct BearerTokens {
    tokens: Vec<([u8; 32], Caller)>,
}

impl fmt::Debug for BearerTokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BearerTokens").field("tokens", &self.tokens.len()).finish()
    }
}

pub(crate) fn sha256(bytes: &[u8]) -> [u8; 32] {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    let mut out = [0u8; 32];
    out.copy_from_slice(digest.as_ref());
    out
}

/// The 32 bytes `digest_hex` (64 hex digits, either case) spells, if it does.
pub(crate) fn parse_digest(digest_hex: &str) -> Option<[u8; 32]> {
    let bytes = digest_hex.as_bytes();
    if bytes.len() != 64 {
        return None;
    }
    let mut digest = [0u8; 32];
    for (i, pair) in bytes.chunks(2).enumerate() {
        let text = std::str::from_utf8(pair).ok()?;
        digest[i] = u8::from_str_radix(text, 16).ok()?;
    }
    Some(digest)
}

/// The refusal of a token no authenticator knows.
pub(crate) fn unknown() -> Unauthorized {
    Unauthorized::new(UnauthorizedKind::InvalidToken, "the bearer token is not known to this gateway")
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
        let digest = parse_digest(digest_hex)?;
        self.tokens.push((digest, Caller::principal(principal)));
        Some(self)
    }

    /// The digest a configuration stores for `token`, hex.
    pub fn digest_of(token: &str) -> String {
        hex(&sha256(token.as_bytes()))
    }

    /// Ties the last token added to a profile: it may use that profile only.
    pub fn in_profile(mut self, profile: &str) -> Self {
        if let Some((_, caller)) = self.tokens.last_mut() {
            caller.profile = Some(Arc::from(profile));
        }
        self
    }

    /// Whether there are no tokens.
    pub fn is_empty(&self) -> bool {
        self.tokens.is_empty()
    }

    /// The caller `token` is, if it is one of these.
    pub(crate) fn check(&self, token: &str) -> Option<Caller> {
        let digest = sha256(token.as_bytes());
        // Every token is compared, so the time taken says nothing about which one nearly matched.
        let mut found: Option<&Caller> = None;
        for (known, caller) in &self.tokens {
            if aws_lc_rs::constant_time::verify_slices_are_equal(known, &digest).is_ok() {
                found = Some(caller);
            }
        }
        found.cloned()
    }
}

#[async_trait]
impl Authenticator for BearerTokens {
    async fn authenticate(&self, request: &AuthRequest<'_>) -> Result<Caller, Unauthorized> {
        let token = bearer_token(request.headers)?.ok_or_else(missing)?;
        self.check(token).ok_or_else(unknown)
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::headers;
    use super::*;

    async fn auth(tokens: &BearerTokens, value: &str) -> Result<Caller, Unauthorized> {
        tokens.authenticate(&AuthRequest { headers: &headers(value), profile: None }).await
    }

    #[tokio::test]
    async fn tokens_are_known_by_their_digest() {
        let digest = BearerTokens::digest_of("s3cret");
        let tokens = BearerTokens::new().token("t0ken", "alice").digest(&digest, "bob").unwrap().in_profile("ops");
        assert_eq!(auth(&tokens, "Bearer t0ken").await, Ok(Caller::principal("alice")));
        let bob = auth(&tokens, "Bearer s3cret").await.unwrap();
        assert_eq!((bob.principal.as_deref(), bob.profile.as_deref()), (Some("bob"), Some("ops")));
        let refused = auth(&tokens, "Bearer nope").await.unwrap_err();
        assert_eq!(refused.kind, UnauthorizedKind::InvalidToken);
        assert!(!refused.reason.contains("nope"));
        assert_eq!(auth(&tokens, "").await.unwrap_err().kind, UnauthorizedKind::Missing);
        assert_eq!(auth(&tokens, "Basic abc").await.unwrap_err().kind, UnauthorizedKind::Missing);
        assert!(BearerTokens::new().digest("xyz", "c").is_none());
        assert!(BearerTokens::new().digest(&"g".repeat(64), "c").is_none());
        assert!(BearerTokens::new().digest(&digest.to_uppercase(), "c").is_some());
        assert!(!format!("{tokens:?}").contains("t0ken"));
    }
}
