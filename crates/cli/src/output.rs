//! Writing output: tables, durations, and text from servers made safe for a terminal.

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

/// Writes to stdout.
pub(crate) fn stdout(text: &str) -> Result<(), OutputError> {
    emit(&mut std::io::stdout().lock(), text)
}

/// Writes to stderr.
pub(crate) fn stderr(text: &str) -> Result<(), OutputError> {
    emit(&mut std::io::stderr().lock(), text)
}

/// Server text made safe for the terminal (`clean`), on one line and cut (`one_line`), or
/// only cut (`cut`): `mcp_safety::text` is their one home.
pub(crate) use mcp_safety::text::{one_line, terminal_safe as clean};

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

    #[test]
    fn terminal_escapes_are_removed() {
        assert_eq!(clean("a\u{1b}[31mred\u{7}\nb\tc\u{202e}"), "a[31mred\nb\tc");
        assert_eq!(one_line("a\n  b\u{1b}", 10), "a b");
        assert_eq!(duration(Duration::from_millis(1500)), "1.5s");
    }
}
