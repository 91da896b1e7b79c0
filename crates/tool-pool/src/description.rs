//! Untrusted descriptions: stripped of invisible and control characters, capped, marked.
//!
//! Order: strip, then cap, then mark. Stripping first means invisible characters cannot eat the
//! budget; capping only the server's text before marking means the mark is never cut off, so a
//! description is at most `cap` characters plus the mark. The cleaning itself is
//! `mcp_safety::text`'s, the one home of untrusted-text handling.

use mcp_safety::text::{is_stripped, sanitize_into};

/// Default cap on a description, in characters.
pub const DEFAULT_DESCRIPTION_CAP: usize = 2_000;

/// The sanitized description of a tool of `server`, prefixed with `[from MCP server "…"] `.
///
/// The server name is the user's (from the configuration) but is still shown escaped, so it
/// cannot carry invisible characters into the model's context.
pub fn mark(server: &str, description: Option<&str>, cap: usize) -> String {
    let mut out = String::new();
    mark_into(&mut out, server, description, cap);
    out
}

/// [`mark`], appending to `out`.
pub(crate) fn mark_into(out: &mut String, server: &str, description: Option<&str>, cap: usize) {
    out.push_str("[from MCP server ");
    escape_into(out, server);
    out.push_str("] ");
    let before = out.len();
    sanitize_into(out, description.unwrap_or_default(), cap);
    // No text (or nothing left of it): no dangling space.
    if out.len() == before {
        out.pop();
    }
}

/// Appends `s` double-quoted, with stripped characters, newlines and tabs escaped as `\u{…}`.
fn escape_into(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' | '\\' => {
                out.push('\\');
                out.push(c);
            }
            // Newlines and tabs are fine in a description but would break the one-line mark.
            c if is_stripped(c) || c == '\n' || c == '\t' => out.extend(c.escape_unicode()),
            c => out.push(c),
        }
    }
    out.push('"');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_after_capping() {
        assert_eq!(mark("docs", Some("Search the docs."), 6), "[from MCP server \"docs\"] Searc…");
        assert_eq!(mark("docs", None, 6), "[from MCP server \"docs\"]");
        assert_eq!(mark("docs", Some("\u{200B}"), 6), "[from MCP server \"docs\"]");
        assert_eq!(mark("docs", Some("see [x] "), 9), "[from MCP server \"docs\"] see [x] ");
        assert_eq!(mark("a\"b\u{202E}", Some("x"), 6), "[from MCP server \"a\\\"b\\u{202e}\"] x");
    }
}
