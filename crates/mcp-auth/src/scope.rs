//! Which scopes to request (MCP 2025-11-25 "Scope Selection Strategy") and bounded step-up
//! authorization on `403 insufficient_scope`.
//!
//! Scope strings are space-delimited lists of scope tokens (RFC 6749 §3.3); order carries no
//! meaning, but [`Scopes`] keeps first-seen order so requests are stable and readable.

use std::collections::HashSet;

/// The scope that asks for a refresh token (OpenID Connect Core §11).
pub const OFFLINE_ACCESS: &str = "offline_access";

/// The most scope tokens a [`Scopes`] holds; further ones are dropped. Scope lists come from
/// servers (a challenge, metadata, a token response): a long one must neither stall the host
/// nor grow a request without end, and no real authorization asks for this many.
pub const MAX_SCOPES: usize = 1024;

/// An ordered set of scope tokens, at most [`MAX_SCOPES`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Scopes {
    order: Vec<String>,
    /// The same tokens, so a duplicate is found at once (a server's list can be long).
    seen: HashSet<String>,
}

impl Scopes {
    /// No scopes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Parses a space-delimited scope string (any ASCII whitespace separates; duplicates and
    /// invalid scope-tokens are dropped).
    pub fn parse(s: &str) -> Self {
        let mut out = Self::new();
        for t in s.split_ascii_whitespace() {
            out.insert(t);
        }
        out
    }

    /// The scopes of a list such as a metadata document's `scopes_supported`.
    pub fn from_list<S: AsRef<str>>(list: &[S]) -> Self {
        let mut out = Self::new();
        for t in list {
            for t in t.as_ref().split_ascii_whitespace() {
                out.insert(t);
            }
        }
        out
    }

    /// Adds `scope` unless already present, not a valid scope-token (RFC 6749 §3.3:
    /// `1*( %x21 / %x23-5B / %x5D-7E )`) or past [`MAX_SCOPES`]; returns whether it was added.
    pub fn insert(&mut self, scope: &str) -> bool {
        let valid = !scope.is_empty() && scope.bytes().all(|b| matches!(b, 0x21 | 0x23..=0x5b | 0x5d..=0x7e));
        if !valid || self.order.len() >= MAX_SCOPES || self.contains(scope) {
            return false;
        }
        self.order.push(scope.to_owned());
        self.seen.insert(scope.to_owned());
        true
    }

    /// Whether `scope` is present.
    pub fn contains(&self, scope: &str) -> bool {
        self.seen.contains(scope)
    }

    /// Removes `scope`; returns whether it was present.
    pub fn remove(&mut self, scope: &str) -> bool {
        if !self.seen.remove(scope) {
            return false;
        }
        self.order.retain(|s| s != scope);
        true
    }

    /// Whether every scope of `other` is in `self`.
    pub fn is_superset(&self, other: &Scopes) -> bool {
        other.order.iter().all(|s| self.contains(s))
    }

    /// `self` followed by the scopes of `other` not already in it.
    pub fn union(&self, other: &Scopes) -> Scopes {
        let mut out = self.clone();
        for s in &other.order {
            out.insert(s);
        }
        out
    }

    /// Whether there are no scopes.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }

    /// The scope tokens in order.
    pub fn iter(&self) -> impl Iterator<Item = &str> {
        self.order.iter().map(String::as_str)
    }

    /// The value of a `scope` request parameter: `None` when empty (omit the parameter).
    pub fn to_param(&self) -> Option<String> {
        (!self.is_empty()).then(|| self.order.join(" "))
    }
}

/// Chooses the scopes of an authorization request:
///
/// 1. the `scope` of the `WWW-Authenticate` challenge, if present and not blank;
/// 2. else the protected resource metadata's `scopes_supported`, if any;
/// 3. else none (omit `scope` and let the authorization server apply its default).
///
/// `offline_access` (to obtain a refresh token) is added when `want_offline_access` is set, only
/// if the authorization server's `scopes_supported` lists it and the set chosen above is not
/// empty (requesting only `offline_access` would replace the server's default scopes). It is
/// also removed from the chosen set when the authorization server does not list it.
pub fn choose_scopes<S: AsRef<str>>(
    challenge_scope: Option<&str>,
    resource_scopes_supported: Option<&[S]>,
    server_scopes_supported: Option<&[S]>,
    want_offline_access: bool,
) -> Scopes {
    let from_challenge = challenge_scope.map(Scopes::parse).filter(|s| !s.is_empty());
    let mut scopes = from_challenge.or_else(|| resource_scopes_supported.map(Scopes::from_list)).unwrap_or_default();
    let server_offline = server_scopes_supported.is_some_and(|l| Scopes::from_list(l).contains(OFFLINE_ACCESS));
    if !server_offline {
        scopes.remove(OFFLINE_ACCESS);
    } else if want_offline_access && !scopes.is_empty() {
        scopes.insert(OFFLINE_ACCESS);
    }
    scopes
}

/// Step-up authorization gave up.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum StepUpError {
    /// The server kept answering `insufficient_scope` after `attempts` re-authorizations.
    #[error(
        "the server still reports insufficient_scope after {attempts} re-authorization(s); it requires scope \"{required}\""
    )]
    TooManyAttempts {
        /// Re-authorizations already made.
        attempts: u32,
        /// The scopes the server last asked for, space-delimited.
        required: String,
    },
}

/// Counts step-up re-authorizations for one server so a server that never accepts the token
/// cannot loop the client forever.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StepUp {
    attempts: u32,
    max_attempts: u32,
}

impl Default for StepUp {
    fn default() -> Self {
        Self::new(Self::DEFAULT_MAX_ATTEMPTS)
    }
}

impl StepUp {
    /// Default bound on re-authorizations.
    pub const DEFAULT_MAX_ATTEMPTS: u32 = 3;

    /// A counter allowing at most `max_attempts` re-authorizations.
    pub fn new(max_attempts: u32) -> Self {
        Self { attempts: 0, max_attempts }
    }

    /// Re-authorizations made so far.
    pub fn attempts(&self) -> u32 {
        self.attempts
    }

    /// On `insufficient_scope`: the scopes to request next (the union of `current` and
    /// `required`), counting one attempt, or an error once the bound is reached.
    pub fn next(&mut self, current: &Scopes, required: &Scopes) -> Result<Scopes, StepUpError> {
        if self.attempts >= self.max_attempts {
            return Err(StepUpError::TooManyAttempts {
                attempts: self.attempts,
                required: required.to_param().unwrap_or_default(),
            });
        }
        self.attempts += 1;
        Ok(current.union(required))
    }

    /// Starts counting afresh (after a request succeeded).
    pub fn reset(&mut self) {
        self.attempts = 0;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn v(s: &[&str]) -> Vec<String> {
        s.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn parse_and_param() {
        assert_eq!(Scopes::parse("  a b\ta  c ").to_param().as_deref(), Some("a b c"));
        assert_eq!(Scopes::parse("   ").to_param(), None);
        assert!(Scopes::parse("a b c").is_superset(&Scopes::parse("c a")));
        assert_eq!(Scopes::parse("a \"q\" b\\c caf\u{e9} d").to_param().as_deref(), Some("a d"));
        let mut s = Scopes::new();
        assert!(!s.insert("x y") && !s.insert("") && s.insert("x") && !s.insert("x"));
    }

    /// A server's scope list of a megabyte (a challenge, metadata, a token response) is cut to
    /// `MAX_SCOPES` tokens, read in one pass (each token was compared with every one before it:
    /// 100k tokens took half a minute).
    #[test]
    fn a_long_scope_list_is_cut_and_read_in_one_pass() {
        let many: Vec<String> = (0..200_000).map(|i| format!("s{i}")).collect();
        let parsed = Scopes::parse(&many.join(" "));
        assert_eq!(parsed.iter().count(), MAX_SCOPES);
        assert_eq!(parsed.iter().last(), Some(format!("s{}", MAX_SCOPES - 1).as_str()));
        let listed = Scopes::from_list(&many);
        assert_eq!(listed, parsed);
        let mut both = Scopes::parse("first").union(&listed);
        assert_eq!(both.iter().count(), MAX_SCOPES);
        assert!(both.contains("first") && !both.contains(&format!("s{}", MAX_SCOPES - 1)));
        assert!(both.remove("first") && !both.contains("first") && !both.remove("first"));
        assert_eq!(both.iter().count(), MAX_SCOPES - 1);
    }

    #[test]
    fn challenge_scope_wins() {
        let prm = v(&["files:read", "files:write"]);
        let s = choose_scopes(Some("files:read"), Some(&prm[..]), None, true);
        assert_eq!(s.to_param().as_deref(), Some("files:read"));
    }

    #[test]
    fn blank_challenge_scope_falls_back_to_prm() {
        let prm = v(&["files:read", "files:write"]);
        let s = choose_scopes(Some(" "), Some(&prm[..]), None, false);
        assert_eq!(s.to_param().as_deref(), Some("files:read files:write"));
        let s = choose_scopes(None, Some(&prm[..]), None, false);
        assert_eq!(s.to_param().as_deref(), Some("files:read files:write"));
    }

    #[test]
    fn nothing_means_omit() {
        assert_eq!(choose_scopes::<String>(None, None, None, true).to_param(), None);
        let as_scopes = v(&["offline_access"]);
        assert_eq!(choose_scopes(None, None, Some(&as_scopes[..]), true).to_param(), None);
        let empty: Vec<String> = vec![];
        assert_eq!(choose_scopes(None, Some(&empty[..]), Some(&as_scopes[..]), true).to_param(), None);
    }

    #[test]
    fn offline_access_only_where_supported() {
        let with = v(&["openid", "offline_access"]);
        let without = v(&["openid"]);
        assert_eq!(
            choose_scopes(Some("a"), None, Some(&with[..]), true).to_param().as_deref(),
            Some("a offline_access")
        );
        assert_eq!(choose_scopes(Some("a"), None, Some(&with[..]), false).to_param().as_deref(), Some("a"));
        assert_eq!(choose_scopes(Some("a"), None, Some(&without[..]), true).to_param().as_deref(), Some("a"));
        assert_eq!(choose_scopes::<String>(Some("a"), None, None, true).to_param().as_deref(), Some("a"));
        // Asked for by the PRM but not supported by the authorization server: dropped.
        let prm = v(&["a", "offline_access"]);
        assert_eq!(choose_scopes(None, Some(&prm[..]), Some(&without[..]), true).to_param().as_deref(), Some("a"));
        assert_eq!(
            choose_scopes(Some("offline_access a"), None, Some(&with[..]), true).to_param().as_deref(),
            Some("offline_access a")
        );
    }

    #[test]
    fn step_up_unions_and_is_bounded() {
        let mut step = StepUp::new(2);
        let cur = Scopes::parse("files:read");
        let next = step.next(&cur, &Scopes::parse("files:write files:read")).unwrap();
        assert_eq!(next.to_param().as_deref(), Some("files:read files:write"));
        let next = step.next(&next, &Scopes::parse("admin")).unwrap();
        assert_eq!(next.to_param().as_deref(), Some("files:read files:write admin"));
        assert_eq!(step.attempts(), 2);
        let err = step.next(&next, &Scopes::parse("root")).unwrap_err();
        assert_eq!(err, StepUpError::TooManyAttempts { attempts: 2, required: "root".into() });
        assert!(err.to_string().contains("after 2 re-authorization"));
        step.reset();
        assert!(step.next(&next, &Scopes::parse("root")).is_ok());
        assert_eq!(StepUp::default().attempts(), 0);
        assert!(StepUp::new(0).next(&cur, &cur).is_err());
    }
}
