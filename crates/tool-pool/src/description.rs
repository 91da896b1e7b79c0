//! Untrusted descriptions: stripped of invisible and control characters, capped, marked.
//!
//! Order: strip, then cap, then mark. Stripping first means invisible characters cannot eat the
//! budget; capping only the server's text before marking means the mark is never cut off, so a
//! description is at most `cap` characters plus the mark.

/// Default cap on a description, in characters.
pub const DEFAULT_DESCRIPTION_CAP: usize = 2_000;

/// Appended (within the cap) when a description was cut, so the model knows text is missing.
const ELLIPSIS: char = '…';

/// Characters removed from untrusted text: controls other than `\n` and `\t`, bidirectional
/// overrides, isolates and marks (they can make text read differently from what it says), and
/// zero-width characters (they can hide text or split words to dodge filters).
pub fn is_stripped(c: char) -> bool {
    (c.is_control() && c != '\n' && c != '\t')
        || matches!(
            c,
            '\u{202A}'..='\u{202E}'
                | '\u{2066}'..='\u{2069}'
                | '\u{200E}'
                | '\u{200F}'
                | '\u{061C}'
                | '\u{200B}'..='\u{200D}'
                | '\u{2060}'
                | '\u{FEFF}'
        )
}

/// `text` without stripped characters, cut to at most `cap` characters (the last of which is
/// `…` when anything was cut, unless `cap` is 0). Never splits a character.
pub fn sanitize(text: &str, cap: usize) -> String {
    let mut out = String::new();
    sanitize_into(&mut out, text, cap);
    out
}

/// [`sanitize`], appending to `out`.
fn sanitize_into(out: &mut String, text: &str, cap: usize) {
    // Fast path for the common case, short printable ASCII: every byte is one character and
    // nothing needs stripping.
    if text.len() <= cap && is_plain_ascii(text.as_bytes()) {
        out.push_str(text);
        return;
    }
    let mut before_last = out.len();
    for (kept, c) in text.chars().filter(|&c| !is_stripped(c)).enumerate() {
        if kept == cap {
            // One character too many: replace the last kept one with the ellipsis.
            if cap > 0 {
                out.truncate(before_last);
                out.push(ELLIPSIS);
            }
            return;
        }
        before_last = out.len();
        out.push(c);
    }
}

/// Whether every byte is printable ASCII, `\n` or `\t`. Eight bytes at a time: this runs over
/// every description of every assembly, and a byte loop was the largest cost of assembling.
fn is_plain_ascii(bytes: &[u8]) -> bool {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGHS: u64 = 0x8080_8080_8080_8080;
    let plain_byte = |b: u8| (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t';
    let mut chunks = bytes.chunks_exact(8);
    for chunk in &mut chunks {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        // Some byte is >= 0x80, < 0x20 or == 0x7f (classic "has byte less than" / "has zero
        // byte" tricks); only then look at the bytes, since `\n` and `\t` are fine.
        let suspicious =
            (w | (w.wrapping_sub(ONES * 0x20) & !w) | ((w ^ (ONES * 0x7f)).wrapping_sub(ONES) & !(w ^ (ONES * 0x7f))))
                & HIGHS;
        if suspicious != 0 && !chunk.iter().all(|&b| plain_byte(b)) {
            return false;
        }
    }
    chunks.remainder().iter().all(|&b| plain_byte(b))
}

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
    fn strips_invisible_and_control_characters() {
        assert_eq!(sanitize("a\u{202E}b\u{200B}c\u{7}d\r\n\te\u{FEFF}\u{85}", 100), "abcd\n\te");
    }

    #[test]
    fn caps_in_characters_without_splitting() {
        assert_eq!(sanitize("ééééé", 5), "ééééé");
        assert_eq!(sanitize("éééééé", 5), "éééé…");
        assert_eq!(sanitize("abc", 0), "");
        assert_eq!(sanitize("", 0), "");
        // Stripped characters do not count.
        assert_eq!(sanitize("a\u{200B}\u{200B}b", 2), "ab");
    }

    #[test]
    fn plain_ascii_check_agrees_with_bytes() {
        for b in 0..=255u8 {
            for pos in 0..9 {
                let mut bytes = vec![b'a'; 9];
                bytes[pos] = b;
                let expected = (0x20..0x7f).contains(&b) || b == b'\n' || b == b'\t';
                assert_eq!(is_plain_ascii(&bytes), expected, "byte {b:#x} at {pos}");
            }
        }
    }

    #[test]
    fn marks_after_capping() {
        assert_eq!(mark("docs", Some("Search the docs."), 6), "[from MCP server \"docs\"] Searc…");
        assert_eq!(mark("docs", None, 6), "[from MCP server \"docs\"]");
        assert_eq!(mark("docs", Some("\u{200B}"), 6), "[from MCP server \"docs\"]");
        assert_eq!(mark("docs", Some("see [x] "), 9), "[from MCP server \"docs\"] see [x] ");
        assert_eq!(mark("a\"b\u{202E}", Some("x"), 6), "[from MCP server \"a\\\"b\\u{202e}\"] x");
    }
}
