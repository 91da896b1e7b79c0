//! Writing output: tables, durations, and text from servers made safe for a terminal.
//!
//! This is the one place where text becomes terminal output: [`stdout`] and [`stderr`] remove
//! every character that could drive a terminal (ESC sequences such as OSC 52 or OSC 8, BEL, CR,
//! C1 controls, bidirectional overrides: `mcp_safety::text::is_stripped`) from everything they
//! write, whoever produced it: a server, a model, a configuration file, or us. A new path that
//! prints through them cannot forget. Our own colours go through [`stdout_painted`], which
//! cleans the text it wraps; JSON goes through [`json`] (or [`stdout_json`], which writes it as it
//! is made), which escapes those characters (`\u202e`), so `--json` keeps the exact text and
//! still drives no terminal. Logs go through [`LogWriter`].

use std::io::Write;
use std::time::Duration;

/// Writing to stdout or stderr failed.
#[derive(Debug, thiserror::Error)]
#[error("cannot write the output: {0}")]
pub(crate) struct OutputError(#[from] std::io::Error);

impl OutputError {
    /// The reader went away (`| head`): not worth an error message.
    pub(crate) fn is_broken_pipe(&self) -> bool {
        self.0.kind() == std::io::ErrorKind::BrokenPipe
    }
}

/// Writes all of `text` (println! would panic on a closed pipe).
pub(crate) fn emit(out: &mut impl Write, text: &str) -> Result<(), OutputError> {
    out.write_all(text.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Writes `text` made terminal-safe (newlines and tabs stay).
pub(crate) fn emit_clean(out: &mut impl Write, text: &str) -> Result<(), OutputError> {
    emit(out, &clean(text))
}

/// Writes to stdout, terminal-safe.
pub(crate) fn stdout(text: &str) -> Result<(), OutputError> {
    emit_clean(&mut std::io::stdout().lock(), text)
}

/// Writes to stderr, terminal-safe.
pub(crate) fn stderr(text: &str) -> Result<(), OutputError> {
    emit_clean(&mut std::io::stderr().lock(), text)
}

/// `text` made terminal-safe inside our own SGR style `code` (`"31"` red), or plain when
/// `color` is off.
pub(crate) fn painted(color: bool, code: &str, text: &str) -> String {
    if color && !text.is_empty() { format!("\x1b[{code}m{}\x1b[0m", clean(text)) } else { clean(text) }
}

/// Writes already [`painted`] text to stdout: the one writer that lets an escape through, ours.
pub(crate) fn stdout_painted(painted: &str) -> Result<(), OutputError> {
    emit(&mut std::io::stdout().lock(), painted)
}

/// `value` as JSON (pretty or one line) with every character [`stdout`] would remove escaped
/// (`\u001b`, `\u202e`): the same value for a JSON reader, nothing for a terminal to act on.
pub(crate) fn json(value: &impl serde::Serialize, pretty: bool) -> Result<String, serde_json::Error> {
    let mut out = Vec::with_capacity(128);
    json_to(&mut out, value, pretty)?;
    String::from_utf8(out).map_err(|e| serde_json::Error::io(std::io::Error::new(std::io::ErrorKind::InvalidData, e)))
}

/// Writes `value` to stdout as [`json`] makes it, followed by a newline, as it is serialized:
/// a big value (`tools --json` of thousands of tools) is never held as one text.
pub(crate) fn stdout_json(value: &impl serde::Serialize, pretty: bool) -> Result<(), OutputError> {
    let mut out = std::io::BufWriter::with_capacity(64 * 1024, std::io::stdout().lock());
    json_to(&mut out, value, pretty).map_err(std::io::Error::from)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// Serializes `value` into `out` with the terminal-safe escapes of [`json`].
fn json_to(out: impl Write, value: &impl serde::Serialize, pretty: bool) -> Result<(), serde_json::Error> {
    if pretty {
        value.serialize(&mut serde_json::Serializer::with_formatter(
            out,
            Escaping(serde_json::ser::PrettyFormatter::new()),
        ))
    } else {
        value.serialize(&mut serde_json::Serializer::with_formatter(out, Escaping(serde_json::ser::CompactFormatter)))
    }
}

/// A JSON formatter that writes every character [`stdout`] would remove as a `\u` escape.
/// Outside strings JSON has only structural ASCII, spaces and newlines, none of them stripped;
/// inside strings serde_json escapes the C0 controls itself and hands the rest over as
/// fragments of whole characters, so escaping the fragments catches every one.
struct Escaping<F>(F);

impl<F: serde_json::ser::Formatter> serde_json::ser::Formatter for Escaping<F> {
    fn write_string_fragment<W: ?Sized + Write>(&mut self, writer: &mut W, fragment: &str) -> std::io::Result<()> {
        let mut start = 0;
        for (at, c) in fragment.char_indices().filter(|&(_, c)| mcp_safety::text::is_stripped(c)) {
            writer.write_all(&fragment.as_bytes()[start..at])?;
            // Every stripped character is in the Basic Multilingual Plane: one \u escape.
            for unit in c.encode_utf16(&mut [0; 2]) {
                write!(writer, "\\u{unit:04x}")?;
            }
            start = at + c.len_utf8();
        }
        writer.write_all(&fragment.as_bytes()[start..])
    }

    // The layout is the inner formatter's (the pretty one indents).
    fn begin_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.begin_array(writer)
    }

    fn end_array<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_array(writer)
    }

    fn begin_array_value<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_array_value(writer, first)
    }

    fn end_array_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_array_value(writer)
    }

    fn begin_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.begin_object(writer)
    }

    fn end_object<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_object(writer)
    }

    fn begin_object_key<W: ?Sized + Write>(&mut self, writer: &mut W, first: bool) -> std::io::Result<()> {
        self.0.begin_object_key(writer, first)
    }

    fn end_object_key<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_object_key(writer)
    }

    fn begin_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.begin_object_value(writer)
    }

    fn end_object_value<W: ?Sized + Write>(&mut self, writer: &mut W) -> std::io::Result<()> {
        self.0.end_object_value(writer)
    }
}

/// The writer of log lines (tracing): each line terminal-safe, like everything else printed.
/// A log line quotes what a server sent (a line that is not JSON, a log notification).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct LogWriter;

impl Write for LogWriter {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        // The formatter writes a whole event at once; a character split across two writes
        // becomes U+FFFD, never raw bytes.
        let text = clean(&String::from_utf8_lossy(buf));
        std::io::stderr().lock().write_all(text.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().lock().flush()
    }
}

/// Server text made safe for the terminal (`clean`), on one line and cut (`one_line`), its
/// first line so (`first_line`), or only cut (`cut`): `mcp_safety::text` is their one home.
pub(crate) use mcp_safety::text::{cut, first_line, one_line, terminal_safe as clean};

/// Writes `warning: TEXT` on stderr, one terminal-safe line (configuration warnings).
pub(crate) fn warn(text: &str) -> Result<(), OutputError> {
    stderr(&format!("warning: {}\n", one_line(text, 1000)))
}

/// `12ms`, `1.5s`.
pub(crate) fn duration(d: Duration) -> String {
    if d < Duration::from_secs(1) { format!("{}ms", d.as_millis()) } else { format!("{:.1}s", d.as_secs_f64()) }
}

/// Left-aligned columns separated by two spaces; the last column is not padded.
pub(crate) fn table(header: &[&str], rows: &[Vec<String>]) -> String {
    let columns = header.len();
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let header: Vec<String> = header.iter().map(|h| (*h).to_owned()).collect();
    for row in std::iter::once(&header).chain(rows) {
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate().take(columns) {
            if i + 1 == columns {
                line.push_str(cell);
            } else {
                line.push_str(cell);
                line.extend(std::iter::repeat_n(' ', widths[i] - cell.chars().count() + 2));
            }
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tables_align() {
        let t = table(
            &["A", "BB", "C"],
            &[vec!["xxx".into(), "y".into(), "z z".into()], vec!["".into(), "".into(), "".into()]],
        );
        assert_eq!(t, "A    BB  C\nxxx  y   z z\n\n");
    }

    /// Everything written, and JSON, carries nothing that drives a terminal; JSON keeps the
    /// exact text.
    #[test]
    fn writers_and_json_are_terminal_safe() {
        let hostile = "a\u{1b}]52;c;ZXZpbA==\u{7}\rb\u{9b}31m\u{202e}c\u{7f}\n";
        let mut out = Vec::new();
        emit_clean(&mut out, hostile).unwrap();
        assert_eq!(String::from_utf8(out).unwrap(), "a]52;c;ZXZpbA==b31mc\n");
        let value = serde_json::json!({ "text": hostile });
        for pretty in [false, true] {
            let text = json(&value, pretty).unwrap();
            assert!(!text.chars().any(mcp_safety::text::is_stripped), "{text}");
            assert_eq!(clean(&text), text);
            assert_eq!(serde_json::from_str::<serde_json::Value>(&text).unwrap(), value);
        }
        // Keys are escaped too, and the text is serde_json's own with those characters escaped.
        let value = serde_json::json!({ "k\u{202e}": [hostile, 1.5, null], "plain": {"a": "\u{7f}é"} });
        for pretty in [false, true] {
            let plain = if pretty { serde_json::to_string_pretty(&value) } else { serde_json::to_string(&value) };
            let expected =
                plain.unwrap().replace('\u{202e}', "\\u202e").replace('\u{7f}', "\\u007f").replace('\u{9b}', "\\u009b");
            assert_eq!(json(&value, pretty).unwrap(), expected);
        }
        assert_eq!(painted(true, "31", "x\u{1b}[2Jy"), "\x1b[31mx[2Jy\x1b[0m");
        assert_eq!(painted(false, "31", "x\u{202e}y"), "xy");
        assert_eq!(LogWriter.write(b"").unwrap(), 0);
    }

    #[test]
    fn terminal_escapes_are_removed() {
        assert_eq!(clean("a\u{1b}[31mred\u{7}\nb\tc\u{202e}"), "a[31mred\nb\tc");
        assert_eq!(one_line("a\n  b\u{1b}", 10), "a b");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
    }
}
