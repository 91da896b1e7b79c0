//! Where a key is in a JSON file, and the JSON hosts allow beyond the standard (comments,
//! trailing commas), blanked out in place so positions stay where they were: entries are checked
//! after their translation, as values that no longer know where they were written.

use std::path::Path;

use super::super::ConfigError;
use super::super::raw::line_column;

/// Whether `text` (from `path`) is JSON: by extension, else by its first character.
pub(super) fn is_json(path: &Path, text: &str) -> bool {
    match path.extension().and_then(|e| e.to_str()).map(str::to_ascii_lowercase).as_deref() {
        Some("json") => true,
        Some("toml") => false,
        _ => text.trim_start().starts_with('{'),
    }
}

/// `error` with the line and column of its key in a JSON file, when it names a key and has no
/// position: entries are checked after their translation, as values that no longer know where
/// they were written.
pub(crate) fn with_position(error: ConfigError, path: &Path, text: &str) -> ConfigError {
    match error {
        ConfigError::Invalid { path: file, key: Some(key), message, position: None } if is_json(path, text) => {
            let cleaned = without_comments(text, true);
            let position = json_key_offset(&cleaned, &key_segments(&key)).map(|at| line_column(text, at));
            ConfigError::Invalid { path: file, key: Some(key), message, position }
        }
        other => other,
    }
}

/// The object keys of a key as errors write it: `mcpServers."my server".args[1]` is
/// `mcpServers`, `my server`, `args`.
fn key_segments(key: &str) -> Vec<String> {
    let mut segments = Vec::new();
    let mut current = String::new();
    let (mut quoted, mut index, mut escaped) = (false, false, false);
    for c in key.chars() {
        match c {
            _ if escaped => {
                current.push(c);
                escaped = false;
            }
            '\\' if quoted => escaped = true,
            '"' => quoted = !quoted,
            _ if quoted => current.push(c),
            '[' => index = true,
            ']' => index = false,
            _ if index => {}
            '.' => segments.push(std::mem::take(&mut current)),
            _ => current.push(c),
        }
    }
    segments.push(current);
    segments.retain(|s| !s.is_empty());
    segments
}

/// The byte offset, in JSON `text`, of the deepest object key on the path `segments`.
fn json_key_offset(text: &str, segments: &[String]) -> Option<usize> {
    // One frame per open object or array: the object's key being read, and whether a key is
    // expected next.
    struct Frame {
        object: bool,
        key: Option<String>,
        expect_key: bool,
    }
    let bytes = text.as_bytes();
    let mut stack: Vec<Frame> = Vec::new();
    let mut best: Option<(usize, usize)> = None;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'{' => stack.push(Frame { object: true, key: None, expect_key: true }),
            b'[' => stack.push(Frame { object: false, key: None, expect_key: false }),
            b'}' | b']' => {
                stack.pop();
            }
            b',' => {
                if let Some(top) = stack.last_mut().filter(|f| f.object) {
                    top.expect_key = true;
                    top.key = None;
                }
            }
            b'"' => {
                let start = i;
                let mut end = i + 1;
                while end < bytes.len() && bytes[end] != b'"' {
                    end += if bytes[end] == b'\\' { 2 } else { 1 };
                }
                let expecting = stack.last().is_some_and(|f| f.object && f.expect_key);
                if expecting {
                    let raw = text.get(start..=end.min(bytes.len() - 1)).unwrap_or("");
                    let name = serde_json::from_str::<String>(raw).unwrap_or_default();
                    if let Some(top) = stack.last_mut() {
                        top.key = Some(name);
                        top.expect_key = false;
                    }
                    let path: Vec<&str> = stack.iter().filter_map(|f| f.key.as_deref()).collect();
                    let matches = path.len() <= segments.len() && path.iter().zip(segments).all(|(a, b)| a == b);
                    if matches && best.is_none_or(|(depth, _)| path.len() > depth) {
                        best = Some((path.len(), start));
                    }
                }
                i = end;
            }
            _ => {}
        }
        i += 1;
    }
    best.map(|(_, at)| at)
}

/// JSON with VS Code's allowances: comments, and in `mcp.json` trailing commas, blanked out so
/// that positions stay where they were.
pub(super) fn without_comments(text: &str, trailing_commas: bool) -> String {
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    let (mut i, mut in_string) = (0, false);
    let mut last_comma: Option<usize> = None;
    while i < bytes.len() {
        let b = bytes[i];
        if in_string {
            match b {
                b'\\' => i += 1,
                b'"' => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
            last_comma = None;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'/') {
            while i < bytes.len() && bytes[i] != b'\n' {
                out[i] = b' ';
                i += 1;
            }
            continue;
        } else if b == b'/' && bytes.get(i + 1) == Some(&b'*') {
            let end = text[i + 2..].find("*/").map_or(bytes.len(), |e| i + 2 + e + 2);
            for (j, byte) in out.iter_mut().enumerate().take(end).skip(i) {
                if bytes[j] != b'\n' {
                    *byte = b' ';
                }
            }
            i = end;
            continue;
        } else if b == b',' {
            last_comma = Some(i);
        } else if (b == b'}' || b == b']') && trailing_commas {
            if let Some(c) = last_comma.take() {
                out[c] = b' ';
            }
        } else if !b.is_ascii_whitespace() {
            last_comma = None;
        }
        i += 1;
    }
    // Only ASCII bytes were replaced by ASCII spaces, so this stays UTF-8.
    String::from_utf8(out).unwrap_or_else(|_| text.to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::*;

    #[test]
    fn positions_of_keys_in_json() {
        let text = "{\n  \"mcpServers\": {\n    \"my server\": { \"command\": \"x\",\n      \"args\": [\"a\", {\"args\": 1}] }\n  }\n}";
        let at = |key: &str| json_key_offset(text, &key_segments(key)).map(|o| line_column(text, o));
        assert_eq!(at("mcpServers.\"my server\".args[1]"), Some((4, 7)));
        assert_eq!(at("mcpServers.\"my server\""), Some((3, 5)));
        assert_eq!(at("mcpServers.other.args"), Some((2, 3)), "the deepest key that is there");
        assert_eq!(at("elsewhere"), None);
        assert_eq!(key_segments("servers.a.env.A"), ["servers", "a", "env", "A"]);
    }

    #[test]
    fn comments_and_trailing_commas_are_blanked_in_place() {
        let text = "{\n  // a comment \"with quotes\"\n  \"a\": \"http://x//y\", /* block\n */ \"b\": [1, 2,],\n}";
        let cleaned = without_comments(text, true);
        assert_eq!(cleaned.len(), text.len());
        assert_eq!(cleaned.lines().count(), text.lines().count());
        let value: Value = serde_json::from_str(&cleaned).unwrap();
        assert_eq!(value, serde_json::json!({"a": "http://x//y", "b": [1, 2]}));
        assert!(serde_json::from_str::<Value>(&without_comments("{\"a\": 1,}", false)).is_err());
    }
}
