//! The built-in tool [`READ_SAVED_TOOL`]: the model reads back, in bounded slices, what the
//! host saved in the session's directory because it was too large to give whole (a tool
//! result over the result budget, see [`crate::fit_budget`], or a resource's text).
//!
//! Only files inside the session's directory can be read: the path is resolved (symbolic links
//! followed) and must still be inside it, so neither `..` nor a link leads out. A slice is
//! at most [`DEFAULT_SLICE_CHARS`] characters (or what the host configures), below the result
//! budget, so a slice is never itself saved again. It is an ordinary built-in: in the pool under
//! its own name, through policy, approval and hooks like any tool.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::ports::BuiltinTool;

/// The name of the built-in tool that reads saved results back.
pub const READ_SAVED_TOOL: &str = "read_saved_result";

/// Most characters of one slice. Below the default result budget (20,000 characters), so a
/// slice comes back whole, with room for its header.
pub const DEFAULT_SLICE_CHARS: usize = 16_000;

/// Lines in a slice when the model does not say (the character cap applies too).
const DEFAULT_LINES: u64 = 200;

/// Paths are echoed in answers cut to this many characters (they come from the model).
const PATH_CHARS: usize = 300;

/// [`READ_SAVED_TOOL`] over the files of `session_dir`, in slices of at most `max_chars`
/// characters (at least 100).
pub fn saved_result_tool(session_dir: PathBuf, max_chars: usize) -> Arc<dyn BuiltinTool> {
    Arc::new(ReadSaved { dir: session_dir, max_chars: max_chars.max(100) })
}

struct ReadSaved {
    dir: PathBuf,
    max_chars: usize,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Unit {
    Lines,
    Bytes,
}

#[async_trait]
impl BuiltinTool for ReadSaved {
    fn spec(&self) -> tool_pool::BuiltinTool {
        tool_pool::BuiltinTool {
            name: READ_SAVED_TOOL.into(),
            description: format!(
                "Read part of a result the host saved to a file because it was too long to show you whole (the \
                 path is in the message that says so). Give an offset and a length in lines (the default) or \
                 bytes; at most {} characters come back at a time, with where to continue.",
                self.max_chars
            ),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "The saved file's path, as the message gave it."},
                    "offset": {"type": "integer", "minimum": 0, "description": "The first line (from 0), or byte with unit bytes."},
                    "length": {"type": "integer", "minimum": 1, "description": format!("How many lines (default {DEFAULT_LINES}) or bytes.")},
                    "unit": {"type": "string", "enum": ["lines", "bytes"], "description": "What offset and length count (default lines)."}
                },
                "required": ["path"],
                "additionalProperties": false
            }),
        }
    }

    async fn call(&self, input: &Value) -> Result<String, String> {
        // The gate checked the input against the schema; these are only belt and braces.
        let asked = input.get("path").and_then(Value::as_str).ok_or("\"path\" must be a string")?;
        let unit = match input.get("unit").and_then(Value::as_str) {
            None | Some("lines") => Unit::Lines,
            Some("bytes") => Unit::Bytes,
            Some(other) => return Err(format!("unknown unit {:?}: use \"lines\" or \"bytes\"", field(other))),
        };
        let offset = input.get("offset").and_then(Value::as_u64).unwrap_or(0);
        let length = input.get("length").and_then(Value::as_u64);
        let path = self.resolve(asked)?;
        let bytes = std::fs::read(&path).map_err(|e| format!("cannot read {:?}: {e}", field(asked)))?;
        let text = String::from_utf8_lossy(&bytes);
        let shown = field(asked);
        match unit {
            Unit::Lines => self.lines(&text, &shown, offset, length.unwrap_or(DEFAULT_LINES)),
            Unit::Bytes => self.bytes(&text, &shown, offset, length.unwrap_or(u64::MAX)),
        }
    }
}

fn field(text: &str) -> String {
    mcp_safety::text::one_line(text, PATH_CHARS)
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

impl ReadSaved {
    /// The file `asked` names, if it is a file inside the session's directory (after following
    /// every link).
    fn resolve(&self, asked: &str) -> Result<PathBuf, String> {
        let shown = field(asked);
        let root = std::fs::canonicalize(&self.dir)
            .map_err(|e| format!("this session has saved nothing yet, so {shown:?} cannot be read ({e})"))?;
        let wanted = Path::new(asked);
        let joined = if wanted.is_absolute() { wanted.to_owned() } else { self.dir.join(wanted) };
        let real =
            std::fs::canonicalize(&joined).map_err(|e| format!("there is no saved result at {shown:?} ({e})"))?;
        if real == root || !real.starts_with(&root) {
            return Err(format!(
                "{shown:?} is not a file in this session's directory; only what the host saved there can be read"
            ));
        }
        if !real.is_file() {
            return Err(format!("{shown:?} is not a file"));
        }
        Ok(real)
    }

    /// Lines `offset..offset + length`, within the character cap (at least one line, cut when
    /// it alone is over the cap).
    fn lines(&self, text: &str, shown: &str, offset: u64, length: u64) -> Result<String, String> {
        let lines: Vec<&str> = text.split_inclusive('\n').collect();
        let total = lines.len();
        let first = to_usize(offset);
        if first >= total && total > 0 {
            return Err(format!("offset {offset} is past the end: {shown:?} has {total} lines"));
        }
        let mut body = String::new();
        let mut chars = 0usize;
        let mut end = first;
        for line in lines.iter().skip(first).take(to_usize(length)) {
            let n = line.chars().count();
            if end > first && chars + n > self.max_chars {
                break;
            }
            if n > self.max_chars {
                // One line over the cap: its beginning, and how to read all of it.
                let start_byte: usize = lines.iter().take(first).map(|l| l.len()).sum();
                let cut: String = line.chars().take(self.max_chars).collect();
                return Ok(format!(
                    "[{shown}: line {} of {total} is {n} characters, longer than a slice; its first {} follow. Read \
                     all of it with unit \"bytes\" from offset {start_byte}]\n{cut}",
                    first + 1,
                    self.max_chars
                ));
            }
            body.push_str(line);
            chars += n;
            end += 1;
        }
        let range = if end > first { format!("lines {}-{end} of {total}", first + 1) } else { "empty".to_owned() };
        let next = if end < total { format!("continue with offset {end}") } else { "that is the end".to_owned() };
        Ok(format!("[{shown}: {range}; {next}]\n{body}"))
    }

    /// Bytes `offset..offset + length`, within the character cap, moved to character
    /// boundaries.
    fn bytes(&self, text: &str, shown: &str, offset: u64, length: u64) -> Result<String, String> {
        let total = text.len();
        let mut start = to_usize(offset);
        if start >= total && total > 0 {
            return Err(format!("offset {offset} is past the end: {shown:?} has {total} bytes"));
        }
        while start < total && !text.is_char_boundary(start) {
            start += 1;
        }
        // A character is at least one byte: capping bytes caps characters.
        let mut end = start.saturating_add(to_usize(length).min(self.max_chars)).min(total);
        while end > start && !text.is_char_boundary(end) {
            end -= 1;
        }
        let body = text.get(start..end).unwrap_or_default();
        let next = if end < total {
            format!("continue with offset {end} (unit \"bytes\")")
        } else {
            "that is the end".to_owned()
        };
        Ok(format!("[{shown}: bytes {start}-{end} of {total}; {next}]\n{body}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tool(max_chars: usize) -> (tempfile::TempDir, ReadSaved) {
        let dir = tempfile::tempdir().unwrap();
        let session = dir.path().join("session");
        std::fs::create_dir_all(session.join("tool-results")).unwrap();
        (dir, ReadSaved { dir: session, max_chars })
    }

    async fn read(tool: &ReadSaved, input: Value) -> Result<String, String> {
        tool.call(&input).await
    }

    #[tokio::test]
    async fn lines_come_in_slices_that_say_where_to_continue() {
        let (_root, t) = tool(100);
        let text: String = (1..=30).map(|i| format!("line {i}\n")).collect();
        std::fs::write(t.dir.join("tool-results/a.txt"), &text).unwrap();
        let first = read(&t, json!({"path": "tool-results/a.txt", "length": 3})).await.unwrap();
        assert_eq!(first, "[tool-results/a.txt: lines 1-3 of 30; continue with offset 3]\nline 1\nline 2\nline 3\n");
        let absolute = t.dir.join("tool-results/a.txt").display().to_string();
        let last = read(&t, json!({"path": absolute, "offset": 28})).await.unwrap();
        assert!(last.ends_with("lines 29-30 of 30; that is the end]\nline 29\nline 30\n"), "{last}");
        // The character cap ends a slice early (each of these lines is 8 characters: 12 fit in 100).
        let capped = read(&t, json!({"path": "tool-results/a.txt", "offset": 10, "length": 100})).await.unwrap();
        assert!(capped.starts_with("[tool-results/a.txt: lines 11-22 of 30; continue with offset 22]"), "{capped}");
        let err = read(&t, json!({"path": "tool-results/a.txt", "offset": 30})).await.unwrap_err();
        assert_eq!(err, "offset 30 is past the end: \"tool-results/a.txt\" has 30 lines");
    }

    #[tokio::test]
    async fn a_line_over_the_cap_is_cut_and_bytes_read_it_on_character_boundaries() {
        let (_root, t) = tool(100);
        let text = format!("short\n{}", "é".repeat(150));
        std::fs::write(t.dir.join("tool-results/b.txt"), &text).unwrap();
        let cut = read(&t, json!({"path": "tool-results/b.txt", "offset": 1})).await.unwrap();
        assert!(
            cut.starts_with(
                "[tool-results/b.txt: line 2 of 2 is 150 characters, longer than a slice; its first 100 follow. \
                 Read all of it with unit \"bytes\" from offset 6]\n"
            ),
            "{cut}"
        );
        // Byte 7 is inside the first "é": the slice starts at the next character.
        let bytes =
            read(&t, json!({"path": "tool-results/b.txt", "offset": 7, "length": 9, "unit": "bytes"})).await.unwrap();
        assert_eq!(bytes, "[tool-results/b.txt: bytes 8-16 of 306; continue with offset 16 (unit \"bytes\")]\néééé");
        let end = read(&t, json!({"path": "tool-results/b.txt", "offset": 300, "unit": "bytes"})).await.unwrap();
        assert_eq!(end, "[tool-results/b.txt: bytes 300-306 of 306; that is the end]\nééé");
    }

    #[tokio::test]
    async fn nothing_outside_the_session_directory_can_be_read() {
        let (root, t) = tool(100);
        let secret = root.path().join("secret.txt");
        std::fs::write(&secret, "the key").unwrap();
        let outside = |r: Result<String, String>| {
            let err = r.unwrap_err();
            assert!(err.contains("not a file in this session's directory"), "{err}");
        };
        outside(read(&t, json!({"path": "../secret.txt"})).await);
        outside(read(&t, json!({"path": "tool-results/../../secret.txt"})).await);
        outside(read(&t, json!({"path": secret.display().to_string()})).await);
        outside(read(&t, json!({"path": "."})).await);
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(&secret, t.dir.join("tool-results/link.txt")).unwrap();
            outside(read(&t, json!({"path": "tool-results/link.txt"})).await);
            std::os::unix::fs::symlink(root.path(), t.dir.join("up")).unwrap();
            outside(read(&t, json!({"path": "up/secret.txt"})).await);
        }
        let err = read(&t, json!({"path": "tool-results"})).await.unwrap_err();
        assert_eq!(err, "\"tool-results\" is not a file");
        let err = read(&t, json!({"path": "tool-results/none.txt"})).await.unwrap_err();
        assert!(err.starts_with("there is no saved result at \"tool-results/none.txt\""), "{err}");
    }
}
