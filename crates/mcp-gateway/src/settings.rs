//! The gateway's settings as a configuration file writes them (`[serve.auth]`,
//! `[serve.profiles.NAME]`, `[serve.audit]`, `[serve.drain]`): serde types read strictly
//! (unknown keys refused, values checked as they are read, so an error names the key), and what
//! each becomes.

/// Whether `name` can name a profile (`/mcp/NAME`): 1 to 64 of `A-Z a-z 0-9 _ -`.
pub fn is_profile_name(name: &str) -> bool {
    (1..=64).contains(&name.len()) && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}
