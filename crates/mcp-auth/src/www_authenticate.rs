//! Parsing of `WWW-Authenticate` header values (RFC 9110 §11.6.1) and the Bearer challenge
//! parameters MCP clients use (RFC 6750 §3, RFC 9728 §5.1).
//!
//! Grammar (RFC 9110 §11):
//!
//! ```text
//! WWW-Authenticate = #challenge
//! challenge        = auth-scheme [ 1*SP ( token68 / #auth-param ) ]
//! auth-param       = token BWS "=" BWS ( token / quoted-string )
//! ```
//!
//! Several challenges may share one header value, separated by commas; a token that follows a
//! comma and is not followed by `=` starts the next challenge. Scheme and parameter names are
//! case-insensitive (names are returned lowercased); values are returned as sent, with
//! quoted-string escapes removed. Malformed input yields a [`ChallengeError`], never a panic.

/// One challenge of a `WWW-Authenticate` header value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Challenge {
    /// The auth-scheme as sent (compare with [`str::eq_ignore_ascii_case`]).
    pub scheme: String,
    /// The token68 form of the challenge's data, if it used that form instead of parameters.
    pub token68: Option<String>,
    /// Parameters in the order sent, names lowercased, values unquoted.
    pub params: Vec<(String, String)>,
}

impl Challenge {
    /// The value of the first parameter named `name` (case-insensitive).
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }

    /// Whether this challenge's scheme is `scheme` (case-insensitive).
    pub fn is_scheme(&self, scheme: &str) -> bool {
        self.scheme.eq_ignore_ascii_case(scheme)
    }
}

/// A malformed `WWW-Authenticate` header value. Positions are byte offsets into the value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChallengeError {
    /// An auth-scheme was expected.
    #[error("expected an auth-scheme at byte {position}")]
    ExpectedScheme {
        /// Byte offset.
        position: usize,
    },
    /// An auth-param name was expected.
    #[error("expected an auth-param at byte {position}")]
    ExpectedParam {
        /// Byte offset.
        position: usize,
    },
    /// A token or quoted-string value was expected after `=`.
    #[error("expected a parameter value at byte {position}")]
    ExpectedValue {
        /// Byte offset.
        position: usize,
    },
    /// A quoted-string was not closed, or contained a forbidden character.
    #[error("malformed quoted-string at byte {position}")]
    BadQuotedString {
        /// Byte offset.
        position: usize,
    },
    /// A character that fits nowhere in the grammar.
    #[error("unexpected character at byte {position}")]
    UnexpectedChar {
        /// Byte offset.
        position: usize,
    },
}

/// The Bearer challenge parameters an MCP client acts on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BearerChallenge {
    /// RFC 9728 §5.1: URL of the protected resource metadata document.
    pub resource_metadata: Option<String>,
    /// RFC 6750 §3: space-delimited scopes required for the request.
    pub scope: Option<String>,
    /// RFC 6750 §3.1: error code, e.g. `invalid_token` or `insufficient_scope`.
    pub error: Option<String>,
    /// RFC 6750 §3: human-readable error description (never show it as trusted text).
    pub error_description: Option<String>,
}

impl BearerChallenge {
    /// Parses a header value and returns its first Bearer challenge, or `None` if it has none.
    pub fn from_header(value: &str) -> Result<Option<Self>, ChallengeError> {
        Ok(parse_challenges(value)?.iter().find_map(Self::from_challenge))
    }

    /// The Bearer parameters of `challenge`, or `None` if it is not a Bearer challenge.
    pub fn from_challenge(challenge: &Challenge) -> Option<Self> {
        if !challenge.is_scheme("Bearer") {
            return None;
        }
        let get = |name: &str| challenge.param(name).map(str::to_owned);
        Some(Self {
            resource_metadata: get("resource_metadata"),
            scope: get("scope"),
            error: get("error"),
            error_description: get("error_description"),
        })
    }

    /// Whether the challenge reports `error="insufficient_scope"` (a step-up candidate).
    pub fn is_insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Parses every challenge of a `WWW-Authenticate` header value, in order.
///
/// An empty value (or one of only commas and whitespace) yields no challenges.
pub fn parse_challenges(value: &str) -> Result<Vec<Challenge>, ChallengeError> {
    let mut p = Parser { s: value.as_bytes(), pos: 0 };
    let mut out = Vec::new();
    loop {
        p.skip_ows_and_commas();
        if p.eof() {
            return Ok(out);
        }
        out.push(p.challenge()?);
    }
}

fn is_tchar(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b)
}

fn is_token68_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b"-._~+/".contains(&b)
}

struct Parser<'a> {
    s: &'a [u8],
    pos: usize,
}

impl Parser<'_> {
    fn eof(&self) -> bool {
        self.pos >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.get(self.pos).copied()
    }

    /// Skips spaces and tabs; returns whether any were skipped.
    fn skip_ows(&mut self) -> bool {
        let start = self.pos;
        while matches!(self.peek(), Some(b' ' | b'\t')) {
            self.pos += 1;
        }
        self.pos > start
    }

    fn skip_ows_and_commas(&mut self) {
        while matches!(self.peek(), Some(b' ' | b'\t' | b',')) {
            self.pos += 1;
        }
    }

    fn token(&mut self) -> Option<String> {
        let start = self.pos;
        while self.peek().is_some_and(is_tchar) {
            self.pos += 1;
        }
        // tchars are ASCII, so the slice is valid UTF-8.
        (self.pos > start).then(|| String::from_utf8_lossy(&self.s[start..self.pos]).into_owned())
    }

    /// A token68 that stands alone (followed only by OWS, then a comma or the end).
    fn try_token68(&mut self) -> Option<String> {
        let start = self.pos;
        while self.peek().is_some_and(is_token68_char) {
            self.pos += 1;
        }
        if self.pos == start {
            return None;
        }
        while self.peek() == Some(b'=') {
            self.pos += 1;
        }
        let end = self.pos;
        self.skip_ows();
        if self.eof() || self.peek() == Some(b',') {
            Some(String::from_utf8_lossy(&self.s[start..end]).into_owned())
        } else {
            self.pos = start;
            None
        }
    }

    fn quoted_string(&mut self) -> Result<String, ChallengeError> {
        let start = self.pos;
        let bad = ChallengeError::BadQuotedString { position: start };
        self.pos += 1; // opening quote
        let mut out = Vec::new();
        loop {
            match self.peek() {
                None => return Err(bad),
                Some(b'"') => {
                    self.pos += 1;
                    return String::from_utf8(out).map_err(|_| bad);
                }
                Some(b'\\') => {
                    self.pos += 1;
                    match self.peek() {
                        Some(b) if b == b'\t' || b >= 0x20 && b != 0x7f => {
                            out.push(b);
                            self.pos += 1;
                        }
                        _ => return Err(bad),
                    }
                }
                Some(b) if b == b'\t' || b >= 0x20 && b != 0x7f => {
                    out.push(b);
                    self.pos += 1;
                }
                Some(_) => return Err(bad),
            }
        }
    }

    /// Parses one challenge. On success the parser is at the end, or just after the comma(s)
    /// separating it from the next challenge.
    fn challenge(&mut self) -> Result<Challenge, ChallengeError> {
        let scheme = self.token().ok_or(ChallengeError::ExpectedScheme { position: self.pos })?;
        let mut challenge = Challenge { scheme, token68: None, params: Vec::new() };
        let had_space = self.skip_ows();
        match self.peek() {
            None => return Ok(challenge),
            Some(b',') => {
                self.skip_ows_and_commas();
                return Ok(challenge);
            }
            Some(_) if !had_space => return Err(ChallengeError::UnexpectedChar { position: self.pos }),
            Some(_) => {}
        }
        if let Some(t) = self.try_token68() {
            challenge.token68 = Some(t);
            self.skip_ows_and_commas();
            return Ok(challenge);
        }
        loop {
            let name_start = self.pos;
            let Some(name) = self.token() else {
                return Err(ChallengeError::ExpectedParam { position: self.pos });
            };
            self.skip_ows();
            if self.peek() != Some(b'=') {
                if challenge.params.is_empty() {
                    return Err(ChallengeError::ExpectedParam { position: name_start });
                }
                // The next challenge's scheme.
                self.pos = name_start;
                return Ok(challenge);
            }
            self.pos += 1;
            self.skip_ows();
            let value = match self.peek() {
                Some(b'"') => self.quoted_string()?,
                _ => self.token().ok_or(ChallengeError::ExpectedValue { position: self.pos })?,
            };
            challenge.params.push((name.to_ascii_lowercase(), value));
            self.skip_ows();
            match self.peek() {
                None => return Ok(challenge),
                Some(b',') => {
                    self.skip_ows_and_commas();
                    if self.eof() {
                        return Ok(challenge);
                    }
                }
                Some(_) => return Err(ChallengeError::UnexpectedChar { position: self.pos }),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use proptest::prelude::*;

    fn bearer(v: &str) -> BearerChallenge {
        BearerChallenge::from_header(v).unwrap().unwrap()
    }

    #[test]
    fn mcp_spec_example() {
        let c = bearer(
            r#"Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="files:read""#,
        );
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://mcp.example.com/.well-known/oauth-protected-resource")
        );
        assert_eq!(c.scope.as_deref(), Some("files:read"));
        assert_eq!(c.error, None);
    }

    #[test]
    fn rfc6750_insufficient_scope() {
        let c = bearer(
            r#"Bearer realm="example", error="insufficient_scope", scope="files:read files:write", error_description="needs \"write\"""#,
        );
        assert!(c.is_insufficient_scope());
        assert_eq!(c.scope.as_deref(), Some("files:read files:write"));
        assert_eq!(c.error_description.as_deref(), Some(r#"needs "write""#));
    }

    #[test]
    fn case_insensitive_scheme_and_names_and_token_values() {
        let c = bearer("bEaReR ERROR=invalid_token,Scope = a");
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert_eq!(c.scope.as_deref(), Some("a"));
    }

    #[test]
    fn several_challenges_in_one_value() {
        let v = r#"Basic realm="x", Newauth realm="apps", type=1, title="Login to \"apps\"", Bearer scope="a b", error=insufficient_scope"#;
        let all = parse_challenges(v).unwrap();
        assert_eq!(all.iter().map(|c| c.scheme.as_str()).collect::<Vec<_>>(), ["Basic", "Newauth", "Bearer"]);
        assert_eq!(all[1].param("title"), Some(r#"Login to "apps""#));
        assert_eq!(all[1].param("TYPE"), Some("1"));
        let c = bearer(v);
        assert_eq!(c.scope.as_deref(), Some("a b"));
        assert!(c.is_insufficient_scope());
    }

    #[test]
    fn token68_and_bare_schemes() {
        let all = parse_challenges("Negotiate abc+/def==, Bearer, Basic").unwrap();
        assert_eq!(all.len(), 3);
        assert_eq!(all[0].token68.as_deref(), Some("abc+/def=="));
        assert!(all[1].params.is_empty() && all[1].token68.is_none());
        assert_eq!(bearer("Bearer"), BearerChallenge::default());
    }

    #[test]
    fn no_bearer_and_empty() {
        assert_eq!(BearerChallenge::from_header(r#"Basic realm="x""#).unwrap(), None);
        assert_eq!(BearerChallenge::from_header("").unwrap(), None);
        assert_eq!(parse_challenges(" , ,").unwrap(), vec![]);
    }

    #[test]
    fn first_bearer_and_first_param_win() {
        let c = bearer(r#"Bearer scope="a", scope="b", Bearer scope="c""#);
        assert_eq!(c.scope.as_deref(), Some("a"));
    }

    #[test]
    fn errors() {
        assert_eq!(parse_challenges(r#"Bearer scope="a"#), Err(ChallengeError::BadQuotedString { position: 13 }));
        assert_eq!(parse_challenges("Bearer a=b, c="), Err(ChallengeError::ExpectedValue { position: 14 }));
        // `scope=` alone is a valid token68, not an empty parameter.
        assert_eq!(parse_challenges("Bearer scope=").unwrap()[0].token68.as_deref(), Some("scope="));
        assert_eq!(parse_challenges("Bearer foo bar"), Err(ChallengeError::ExpectedParam { position: 7 }));
        assert_eq!(parse_challenges(r#"Bearer a="x" b="y""#), Err(ChallengeError::UnexpectedChar { position: 13 }));
        assert_eq!(parse_challenges("=Bearer"), Err(ChallengeError::ExpectedScheme { position: 0 }));
        assert_eq!(parse_challenges("Bearer\"x\""), Err(ChallengeError::UnexpectedChar { position: 6 }));
        assert!(parse_challenges("Bearer a=\"x\u{1}\"").is_err());
    }

    #[test]
    fn non_ascii_in_quoted_string_is_kept() {
        let c = bearer("Bearer error_description=\"caf\u{e9} \\\u{e9}\"");
        assert_eq!(c.error_description.as_deref(), Some("caf\u{e9} \u{e9}"));
    }

    proptest! {
        #[test]
        fn never_panics(s in "\\PC*") {
            let _ = parse_challenges(&s);
            let _ = BearerChallenge::from_header(&s);
        }

        #[test]
        fn never_panics_on_grammar_soup(s in "[Bb]earer[ ,=\"\\\\a-z_\t]{0,40}") {
            let _ = BearerChallenge::from_header(&s);
        }

        #[test]
        fn quoted_values_round_trip(v in "[ -~]{0,30}") {
            let quoted = v.replace('\\', "\\\\").replace('"', "\\\"");
            let header = format!("Basic realm=\"r\", Bearer scope=\"{quoted}\", error=insufficient_scope");
            let c = BearerChallenge::from_header(&header).unwrap().unwrap();
            prop_assert_eq!(c.scope.as_deref(), Some(v.as_str()));
            prop_assert!(c.is_insufficient_scope());
        }
    }
}
