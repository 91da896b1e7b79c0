//! Model-visible names: `mcp__{server}__{tool}`, normalized and at most 64 characters.
//!
//! Names are only ever built, never parsed back (a normalized tool name may itself contain
//! `__`); the pool keeps the map from model name to origin.

use sha2::{Digest, Sha256};

/// Longest model-visible name, in characters (all of them ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// Prefix of every MCP tool's model name.
pub const MCP_PREFIX: &str = "mcp__";

/// Hex digits of the origin hash appended to a shortened name: 32 bits make an accidental
/// clash between two long names of one pool unlikely, and a clash would still be caught as a
/// collision rather than merging two tools.
const HASH_HEX_LEN: usize = 8;

/// Whether `c` may appear in a model name as is.
fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Replaces every character outside `[A-Za-z0-9_-]` with `_`, one `_` per character (not per
/// UTF-8 byte). Idempotent; empty only for empty input.
pub fn normalize(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    push_normalized(&mut out, raw);
    out
}

/// Appends `normalize(raw)` to `out`, copying runs of valid characters whole: names are
/// usually valid already, and a push per character was a visible part of assembly time.
fn push_normalized(out: &mut String, raw: &str) {
    let mut rest = raw;
    while let Some(i) = rest.find(|c: char| !is_name_char(c)) {
        out.push_str(&rest[..i]);
        out.push('_');
        let len = rest[i..].chars().next().map_or(1, char::len_utf8);
        rest = &rest[i + len..];
    }
    out.push_str(rest);
}

/// Whether `name` matches `^[A-Za-z0-9_-]{1,64}$`, the shape the model APIs accept.
pub fn is_valid_model_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len()) && name.chars().all(is_name_char)
}

/// The model name of tool `tool` on server `server`, or `None` when either is empty.
///
/// `mcp__{normalize(server)}__{normalize(tool)}`; when that is longer than [`MAX_NAME_LEN`], its
/// first 55 characters, `_`, and the first 8 hex digits of SHA-256(`server` `\0` `tool`) over the
/// raw names, so that it is the same on every run and distinct origins stay distinct.
pub fn model_name(server: &str, tool: &str) -> Option<String> {
    let mut name = String::new();
    model_name_into(&mut name, server, tool).then_some(name)
}

/// [`model_name`] into a reused buffer (cleared first); `false` when either name is empty.
pub(crate) fn model_name_into(name: &mut String, server: &str, tool: &str) -> bool {
    name.clear();
    if server.is_empty() || tool.is_empty() {
        return false;
    }
    name.push_str(MCP_PREFIX);
    push_normalized(name, server);
    name.push_str("__");
    push_normalized(name, tool);
    if name.len() > MAX_NAME_LEN {
        // Every character is ASCII by now, so any byte index is a char boundary.
        name.truncate(MAX_NAME_LEN - 1 - HASH_HEX_LEN);
        name.push('_');
        let digest = Sha256::new().chain_update(server).chain_update([0u8]).chain_update(tool).finalize();
        for byte in digest.iter().take(HASH_HEX_LEN / 2) {
            name.push(hex_digit(byte >> 4));
            name.push(hex_digit(byte & 0xf));
        }
    }
    true
}

fn hex_digit(nibble: u8) -> char {
    char::from(b"0123456789abcdef"[usize::from(nibble & 0xf)])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn examples() {
        assert_eq!(model_name("docs", "search").as_deref(), Some("mcp__docs__search"));
        assert_eq!(model_name("db", "query/table").as_deref(), Some("mcp__db__query_table"));
        assert_eq!(model_name("ünï", "a b").as_deref(), Some("mcp___n___a_b"));
        assert_eq!(model_name("", "x"), None);
        assert_eq!(model_name("x", ""), None);
        assert_eq!(normalize("日本"), "__");
    }

    #[test]
    fn long_names_are_shortened_stably() {
        let tool = "t".repeat(100);
        let a = model_name("srv", &tool).unwrap();
        assert_eq!(a.len(), MAX_NAME_LEN);
        assert!(is_valid_model_name(&a));
        assert_eq!(model_name("srv", &tool).unwrap(), a);
        // Same normalized prefix, different origin: different hash.
        let b = model_name("srv", &format!("{}!", &tool[..99])).unwrap();
        assert_ne!(a, b);
        assert_eq!(a[..55], b[..55]);
        // Pinned so a change of scheme is noticed: names must not change between releases.
        assert_eq!(a, "mcp__srv__ttttttttttttttttttttttttttttttttttttttttttttt_2fe7dd4e");
    }
}
