//! Model-visible names: `mcp__{server}__{tool}` for the agent's model, `{server}__{tool}` for
//! the hosts behind the gateway (which add a prefix of their own), normalized and at most 64
//! characters; or, for a gateway in front of exactly one server, the tool's own name
//! ([`Naming`]).
//!
//! Names are only ever built, never parsed back (a normalized tool name may itself contain
//! `__`); the pool keeps the map from model name to origin.
//!
//! The server's part never contains `__` and never ends in `_` (runs of `_` are one `_`, a
//! trailing one is dropped; a name of nothing but such characters is `_`), so the first `__`
//! after the prefix always ends it: a server's tools cannot take a name in another server's
//! namespace, whatever they are called. (Without this, server `gh`'s tool `repo__read` and
//! server `gh__repo`'s tool `read` were both `mcp__gh__repo__read`.) The argument does not
//! depend on the prefix, so it holds for the gateway's form, which has none.

use sha2::{Digest, Sha256};

/// Longest model-visible name, in characters (all of them ASCII).
pub const MAX_NAME_LEN: usize = 64;

/// Prefix of every MCP tool's model name.
pub const MCP_PREFIX: &str = "mcp__";

/// Hex digits of the origin hash appended to a shortened name: 32 bits make an accidental
/// clash between two long names of one pool unlikely, and a clash would still be caught as a
/// collision rather than merging two tools.
const HASH_HEX_LEN: usize = 8;

/// How a pool names the tools of MCP servers. The collision and shortening rules are the same
/// for every form; only the prefix differs (or, for [`Naming::Transparent`], the whole scheme).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Naming {
    /// `mcp__{server}__{tool}`: what the agent's own model is shown.
    #[default]
    Agent,
    /// `{server}__{tool}`: what the gateway offers to other hosts, which put their own prefix
    /// in front (a host that shows `mcp__gateway__files__read` to its model).
    Gateway,
    /// The tool's own name, unchanged: the gateway in front of exactly one server, offered as
    /// that server offers itself. Not checked against `^[A-Za-z0-9_-]{1,64}$`: the server chose it.
    Transparent,
}

impl Naming {
    /// What goes before `{server}__` (`mcp__`, or nothing).
    pub fn prefix(self) -> &'static str {
        match self {
            Naming::Agent => MCP_PREFIX,
            Naming::Gateway | Naming::Transparent => "",
        }
    }

    /// The name of tool `tool` on server `server` in this form, or `None` when either is empty.
    pub fn name(self, server: &str, tool: &str) -> Option<String> {
        let mut name = String::new();
        self.name_into(&mut name, server, tool).then_some(name)
    }

    /// [`Naming::name`] into a reused buffer (cleared first); `false` when either name is empty.
    pub(crate) fn name_into(self, name: &mut String, server: &str, tool: &str) -> bool {
        match self {
            Naming::Transparent => {
                name.clear();
                name.push_str(tool);
                !server.is_empty() && !tool.is_empty()
            }
            Naming::Agent | Naming::Gateway => prefixed_name_into(name, self.prefix(), server, tool),
        }
    }
}

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

/// The part of model names that stands for server `server`: [`normalize`]d, runs of `_` made
/// one, a trailing `_` dropped (`_` when nothing else is left). Never contains `__`.
pub fn server_segment(server: &str) -> String {
    let mut out = String::with_capacity(server.len());
    push_server_segment(&mut out, server);
    out
}

fn push_server_segment(out: &mut String, server: &str) {
    let plain = server.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if plain && !server.contains("__") && !server.ends_with('_') {
        out.push_str(server);
        return;
    }
    let start = out.len();
    for c in server.chars() {
        let c = if is_name_char(c) { c } else { '_' };
        if c == '_' && out.len() > start && out.ends_with('_') {
            continue;
        }
        out.push(c);
    }
    if out.len() > start + 1 && out.ends_with('_') {
        out.pop();
    }
}

/// The model name of tool `tool` on server `server`, or `None` when either is empty.
///
/// `mcp__{server_segment(server)}__{normalize(tool)}`; when that is longer than
/// [`MAX_NAME_LEN`], its first 55 characters, `_`, and the first 8 hex digits of
/// SHA-256(`server` `\0` `tool`) over the raw names, so that it is the same on every run and
/// distinct origins stay distinct. When the cut falls inside the server's part, a `_` it leaves
/// at the end is dropped, so the shortened name has no `__` after `mcp__` and lies in no
/// server's namespace.
pub fn model_name(server: &str, tool: &str) -> Option<String> {
    Naming::Agent.name(server, tool)
}

/// `{prefix}{server_segment(server)}__{normalize(tool)}`, shortened as [`model_name`] says,
/// into a reused buffer (cleared first); `false` when either name is empty.
fn prefixed_name_into(name: &mut String, prefix: &str, server: &str, tool: &str) -> bool {
    name.clear();
    if server.is_empty() || tool.is_empty() {
        return false;
    }
    name.push_str(prefix);
    push_server_segment(name, server);
    name.push_str("__");
    let namespace_len = name.len();
    push_normalized(name, tool);
    if name.len() > MAX_NAME_LEN {
        // Every character is ASCII by now, so any byte index is a char boundary.
        let keep = MAX_NAME_LEN - 1 - HASH_HEX_LEN;
        name.truncate(keep);
        if namespace_len > keep && name.ends_with('_') {
            // The cut fell inside the server's part (or its separator): `_` + `_` would make
            // a `__` that reads as the end of a shorter server's name.
            name.pop();
        }
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
        assert_eq!(model_name("ünï", "a b").as_deref(), Some("mcp___n__a_b"));
        assert_eq!(model_name("", "x"), None);
        assert_eq!(model_name("x", ""), None);
        assert_eq!(normalize("日本"), "__");
        assert_eq!(server_segment("日本"), "_");
        assert_eq!(server_segment("gh__repo"), "gh_repo");
        assert_eq!(server_segment("a._b_"), "a_b");
        assert_eq!(server_segment("_x"), "_x");
    }

    #[test]
    fn a_tool_cannot_take_a_name_in_another_servers_namespace() {
        // Server `gh`'s tool `repo__read` once had the name of server `gh__repo`'s tool `read`.
        assert_eq!(model_name("gh", "repo__read").as_deref(), Some("mcp__gh__repo__read"));
        assert_eq!(model_name("gh__repo", "read").as_deref(), Some("mcp__gh_repo__read"));
        assert_eq!(model_name("a_", "b").as_deref(), Some("mcp__a__b"));
        assert_eq!(model_name("a", "_b").as_deref(), Some("mcp__a___b"));
        // A cut inside a long server name leaves no `__` behind it.
        let server = format!("{}_{}", "s".repeat(49), "t".repeat(20));
        let name = model_name(&server, "x").unwrap();
        assert_eq!(name.len(), MAX_NAME_LEN - 1);
        assert!(!name[MCP_PREFIX.len()..].contains("__"), "{name}");
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

    #[test]
    fn the_gateway_form_has_no_prefix_and_the_same_rules() {
        let gateway = |s: &str, t: &str| Naming::Gateway.name(s, t);
        assert_eq!(gateway("files", "write_file").as_deref(), Some("files__write_file"));
        assert_eq!(gateway("gh__repo", "read").as_deref(), Some("gh_repo__read"));
        assert_eq!(gateway("", "x"), None);
        // Shortened like the agent's names, over the same raw origin, so the hash is the same.
        let tool = "t".repeat(100);
        let name = gateway("srv", &tool).unwrap();
        assert_eq!(name.len(), MAX_NAME_LEN);
        assert_eq!(name, format!("srv__{}_2fe7dd4e", "t".repeat(50)));
        // A cut inside a long server name leaves no `__` behind it.
        let server = format!("{}_{}", "s".repeat(54), "t".repeat(20));
        let name = gateway(&server, "x").unwrap();
        assert!(!name.contains("__"), "{name}");
        assert!(is_valid_model_name(&name));
    }

    #[test]
    fn the_transparent_form_is_the_tools_own_name() {
        assert_eq!(Naming::Transparent.name("s", "get weather.v2").as_deref(), Some("get weather.v2"));
        assert_eq!(Naming::Transparent.name("s", ""), None);
        assert_eq!(Naming::Transparent.name("", "x"), None);
        assert_eq!(Naming::default(), Naming::Agent);
        assert_eq!(Naming::Agent.name("a", "b"), model_name("a", "b"));
    }
}
