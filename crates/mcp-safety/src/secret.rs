//! A value that must never be printed: tokens, client secrets, API keys, authorization codes.

use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A secret string. `Debug` prints `Secret(<redacted>)` and there is no `Display`, so a secret
/// cannot reach a log line, an error message or `{:?}` output by accident; [`Secret::expose`]
/// is the one way to read it, and its call sites are where secrets leave the program (a
/// header, a form, the token store).
///
/// It serializes as the plain string (the token store and request bodies need the value), and
/// comparisons take time independent of where two secrets first differ.
#[derive(Clone, Default)]
pub struct Secret(String);

impl Secret {
    /// Wraps a secret value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret itself. Call it only where the secret is sent or stored.
    pub fn expose(&self) -> &str {
        &self.0
    }

    /// Whether the value is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Secret(<redacted>)")
    }
}

/// Compares without an early exit at the first difference (the length is not hidden).
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

impl PartialEq for Secret {
    fn eq(&self, other: &Self) -> bool {
        constant_time_eq(self.0.as_bytes(), other.0.as_bytes())
    }
}

impl PartialEq<str> for Secret {
    fn eq(&self, other: &str) -> bool {
        constant_time_eq(self.0.as_bytes(), other.as_bytes())
    }
}

impl PartialEq<&str> for Secret {
    fn eq(&self, other: &&str) -> bool {
        constant_time_eq(self.0.as_bytes(), other.as_bytes())
    }
}

impl Eq for Secret {}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl Serialize for Secret {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Secret {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        String::deserialize(deserializer).map(Self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn never_printed_but_serialized_and_compared() {
        let s = Secret::new("hunter2");
        assert_eq!(format!("{s:?}"), "Secret(<redacted>)");
        assert_eq!(format!("{:?}", Some(&s)), "Some(Secret(<redacted>))");
        assert_eq!(serde_json::to_string(&s).unwrap(), r#""hunter2""#);
        let back: Secret = serde_json::from_str(r#""hunter2""#).unwrap();
        assert_eq!(back, s);
        assert_ne!(Secret::new("hunter3"), s);
        assert_ne!(Secret::new("hunter"), s);
    }
}
