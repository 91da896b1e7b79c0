//! Protocol revisions and the negotiation rule.

use std::fmt;

/// A protocol revision this crate implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[non_exhaustive]
pub enum ProtocolVersion {
    /// 2024-11-05: the first stable revision.
    V2024_11_05,
    /// 2025-03-26: Streamable HTTP, annotations, audio.
    V2025_03_26,
    /// 2025-06-18: structured content, elicitation, resource links.
    V2025_06_18,
    /// 2025-11-25: tasks, URL elicitation, icons.
    V2025_11_25,
    /// 2026-07-28: the stateless era (`server/discover`, a `_meta` envelope on every request).
    /// Not negotiated by `initialize`, so not in [`ProtocolVersion::ALL`].
    V2026_07_28,
}

impl ProtocolVersion {
    /// Every revision `initialize` negotiates, oldest first.
    pub const ALL: [ProtocolVersion; 4] = [
        ProtocolVersion::V2024_11_05,
        ProtocolVersion::V2025_03_26,
        ProtocolVersion::V2025_06_18,
        ProtocolVersion::V2025_11_25,
    ];

    /// The newest revision `initialize` negotiates.
    pub const LATEST: ProtocolVersion = ProtocolVersion::V2025_11_25;

    /// The revision of the stateless era, reached through `server/discover`.
    pub const STATELESS: ProtocolVersion = ProtocolVersion::V2026_07_28;

    /// Whether this revision is of the stateless era (no `initialize`, an envelope on every request).
    pub fn is_stateless(self) -> bool {
        self >= ProtocolVersion::STATELESS
    }

    /// The revision's date string.
    pub fn as_str(self) -> &'static str {
        match self {
            ProtocolVersion::V2024_11_05 => "2024-11-05",
            ProtocolVersion::V2025_03_26 => "2025-03-26",
            ProtocolVersion::V2025_06_18 => "2025-06-18",
            ProtocolVersion::V2025_11_25 => "2025-11-25",
            ProtocolVersion::V2026_07_28 => "2026-07-28",
        }
    }

    /// Parse a revision's date string.
    pub fn parse(s: &str) -> Option<ProtocolVersion> {
        Self::ALL.into_iter().chain([Self::STATELESS]).find(|v| v.as_str() == s)
    }
}

impl fmt::Display for ProtocolVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The server answered with a revision the client cannot speak.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "the server answered protocol revision {answered:?}, which this client does not accept \
     (it offered {offered} and supports {})",
    supported.iter().map(|v| v.as_str()).collect::<Vec<_>>().join(", ")
)]
pub struct NegotiationError {
    /// What the client offered.
    pub offered: ProtocolVersion,
    /// What the server answered.
    pub answered: String,
    /// What the client supports.
    pub supported: Vec<ProtocolVersion>,
}

/// The `protocolVersion` an `initialize` result names, read alone (its other members are
/// skipped, not built: whoever only looks for the version need not read a server's whole
/// answer into values).
pub fn answered_version(result: &str) -> Option<String> {
    #[derive(serde::Deserialize)]
    struct Answered {
        #[serde(rename = "protocolVersion")]
        protocol_version: Option<String>,
    }
    serde_json::from_str::<Answered>(result).ok()?.protocol_version
}

/// Accept the server's answer when it is the offered revision or an older one the client
/// supports; anything else (unknown, newer than offered, or not supported) is an error naming both.
pub fn negotiate(
    offered: ProtocolVersion,
    supported: &[ProtocolVersion],
    answered: &str,
) -> Result<ProtocolVersion, NegotiationError> {
    match ProtocolVersion::parse(answered) {
        Some(v) if v <= offered && supported.contains(&v) => Ok(v),
        _ => Err(NegotiationError { offered, answered: answered.to_owned(), supported: supported.to_vec() }),
    }
}
