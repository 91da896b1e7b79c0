//! Name patterns: literal text with `*` (any run of characters) and `?` (exactly one character).
//!
//! Hand-written rather than `globset`: server and tool names are not paths (globset gives `/` and
//! `[`, `{`, `\` meaning), we need the wildcard counts anyway to rank rules by specificity, and a
//! two-wildcard matcher is small enough to test exhaustively against a naive one.

use std::cmp::Ordering;
use std::fmt;

use thiserror::Error;

/// The reserved server pattern that addresses built-in tools (and only them).
pub const BUILTIN_SERVER: &str = "@builtin";

/// Why a pattern was refused.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
#[non_exhaustive]
pub enum PatternError {
    /// The pattern is the empty string; it would only match an empty name, which is never valid.
    #[error("pattern is empty")]
    Empty,
    /// Glob syntax this matcher does not support; refused rather than matched literally so a
    /// rule written for a richer glob dialect does not silently match nothing.
    #[error("unsupported glob syntax {0:?} (only `*` and `?` are wildcards)")]
    UnsupportedSyntax(char),
    /// A control character, which no sane name contains.
    #[error("control character {0:?}")]
    ControlCharacter(char),
    /// A pattern starting with `@` other than `@builtin`; most likely a typo of it.
    #[error("`@` patterns are reserved; the only one is \"@builtin\"")]
    ReservedPrefix,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(String),
    One,
    Star,
}

/// How specific a pattern is; greater is more specific.
///
/// Ordered by, in turn: exact (no wildcard) beats any glob; more literal characters; more `?`
/// (a `?` pins a position, a `*` does not); fewer `*`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Specificity {
    exact: bool,
    literals: usize,
    singles: usize,
    stars: usize,
}

impl Specificity {
    /// Whether the pattern has no wildcard.
    pub fn is_exact(self) -> bool {
        self.exact
    }
}

impl Ord for Specificity {
    fn cmp(&self, other: &Self) -> Ordering {
        self.exact
            .cmp(&other.exact)
            .then(self.literals.cmp(&other.literals))
            .then(self.singles.cmp(&other.singles))
            // Fewer stars is more specific, hence reversed.
            .then(other.stars.cmp(&self.stars))
    }
}

impl PartialOrd for Specificity {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// A compiled name pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    raw: String,
    tokens: Vec<Token>,
    specificity: Specificity,
}

impl Pattern {
    /// Compiles `raw`. `*` matches any run of characters (including none), `?` exactly one
    /// character; everything else matches itself, case-sensitively.
    pub fn new(raw: &str) -> Result<Self, PatternError> {
        if raw.is_empty() {
            return Err(PatternError::Empty);
        }
        let mut tokens = Vec::new();
        let mut spec = Specificity { exact: true, literals: 0, singles: 0, stars: 0 };
        for c in raw.chars() {
            match c {
                '*' => {
                    spec.exact = false;
                    // `**` means the same as `*`; one token keeps matching linear.
                    if tokens.last() != Some(&Token::Star) {
                        spec.stars += 1;
                        tokens.push(Token::Star);
                    }
                }
                '?' => {
                    spec.exact = false;
                    spec.singles += 1;
                    tokens.push(Token::One);
                }
                '[' | ']' | '{' | '}' | '\\' => return Err(PatternError::UnsupportedSyntax(c)),
                c if c.is_control() => return Err(PatternError::ControlCharacter(c)),
                c => {
                    spec.literals += 1;
                    match tokens.last_mut() {
                        Some(Token::Literal(s)) => s.push(c),
                        _ => tokens.push(Token::Literal(c.to_string())),
                    }
                }
            }
        }
        Ok(Self { raw: raw.to_owned(), tokens, specificity: spec })
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.raw
    }

    /// How specific the pattern is.
    pub fn specificity(&self) -> Specificity {
        self.specificity
    }

    /// Whether `name` matches the whole pattern.
    pub fn matches(&self, name: &str) -> bool {
        if self.specificity.exact {
            return self.raw == name;
        }
        // Greedy matching with backtracking to the last `*` only: the segment between two stars
        // has a fixed length in characters, so its leftmost match is always the best one and
        // earlier stars never need revisiting. Linear in practice, O(n·m) at worst.
        let tokens = &self.tokens;
        let (mut t, mut i) = (0usize, 0usize);
        let mut resume: Option<(usize, usize)> = None;
        loop {
            if let Some(token) = tokens.get(t) {
                let advanced = match token {
                    Token::Star => {
                        resume = Some((t + 1, i));
                        t += 1;
                        continue;
                    }
                    Token::One => name[i..].chars().next().map(char::len_utf8),
                    Token::Literal(lit) => name[i..].starts_with(lit.as_str()).then_some(lit.len()),
                };
                if let Some(len) = advanced {
                    i += len;
                    t += 1;
                    continue;
                }
            } else if i == name.len() {
                return true;
            }
            // Mismatch: let the last star swallow one more character, or give up.
            match resume {
                Some((rt, ri)) => match name[ri..].chars().next() {
                    Some(c) => {
                        let ri = ri + c.len_utf8();
                        resume = Some((rt, ri));
                        t = rt;
                        i = ri;
                    }
                    None => return false,
                },
                None => return false,
            }
        }
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.raw)
    }
}

/// What a rule's server pattern addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum ServerPattern {
    /// `@builtin`: built-in tools only.
    Builtin,
    /// A glob over MCP server names; never matches built-ins.
    Mcp(Pattern),
}

impl ServerPattern {
    pub(crate) fn new(raw: &str) -> Result<Self, PatternError> {
        if raw == BUILTIN_SERVER {
            Ok(Self::Builtin)
        } else if raw.starts_with('@') {
            Err(PatternError::ReservedPrefix)
        } else {
            Pattern::new(raw).map(Self::Mcp)
        }
    }

    pub(crate) fn matches(&self, server: Option<&str>) -> bool {
        match (self, server) {
            (Self::Builtin, None) => true,
            (Self::Mcp(p), Some(s)) => p.matches(s),
            _ => false,
        }
    }

    pub(crate) fn specificity(&self) -> Specificity {
        match self {
            // As specific as naming one server exactly.
            Self::Builtin => {
                Specificity { exact: true, literals: BUILTIN_SERVER.chars().count(), singles: 0, stars: 0 }
            }
            Self::Mcp(p) => p.specificity(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Obviously-correct exponential matcher to check the fast one against.
    fn naive(p: &[char], s: &[char]) -> bool {
        match p.split_first() {
            None => s.is_empty(),
            Some(('*', rest)) => (0..=s.len()).any(|k| naive(rest, &s[k..])),
            Some(('?', rest)) => !s.is_empty() && naive(rest, &s[1..]),
            Some((c, rest)) => s.first() == Some(c) && naive(rest, &s[1..]),
        }
    }

    #[test]
    fn examples() {
        let p = |s| Pattern::new(s).unwrap();
        assert!(p("git*").matches("github"));
        assert!(p("git*").matches("git"));
        assert!(!p("git*").matches("gi"));
        assert!(p("*").matches(""));
        assert!(p("a?c").matches("aéc"));
        assert!(!p("a?c").matches("ac"));
        assert!(p("*.*").matches("docs.one"));
        assert!(p("a*b*c").matches("aXbYbZc"));
        assert!(!p("a*b*c").matches("aXbYbZ"));
        assert!(!p("exact").matches("exactly"));
    }

    #[test]
    fn refusals() {
        assert_eq!(Pattern::new(""), Err(PatternError::Empty));
        assert_eq!(Pattern::new("a[bc]"), Err(PatternError::UnsupportedSyntax('[')));
        assert_eq!(Pattern::new("a\u{1}"), Err(PatternError::ControlCharacter('\u{1}')));
        assert_eq!(ServerPattern::new("@builtins"), Err(PatternError::ReservedPrefix));
    }

    #[test]
    fn specificity_order() {
        let s = |p: &str| Pattern::new(p).unwrap().specificity();
        assert!(s("git") > s("git*"));
        assert!(s("a") > s("abcdef*"), "exact beats any glob");
        assert!(s("github*") > s("git*"));
        assert!(s("git?") > s("git*"));
        assert!(s("git*") > s("g*i*t*"));
        assert!(s("g*") > s("*"));
        assert_eq!(s("a*b"), s("*ab"));
    }

    proptest! {
        #[test]
        fn agrees_with_naive(p in "[ab*?é]{1,8}", s in "[abé]{0,10}") {
            let pat = Pattern::new(&p).unwrap();
            let pc: Vec<char> = p.chars().collect();
            let sc: Vec<char> = s.chars().collect();
            prop_assert_eq!(pat.matches(&s), naive(&pc, &sc));
        }
    }
}
