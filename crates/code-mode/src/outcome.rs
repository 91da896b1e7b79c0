//! What a script run gives back: its value or why it failed, its captured log, and what it
//! used.

use std::fmt::Write as _;
use std::time::Duration;

use mcp_safety::text;
use serde_json::Value;

/// One script run: the result, the `console` output, the calls made and the CPU time used.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct ScriptRun {
    /// The script's return value (`None`: it returned nothing), or why it failed.
    pub result: Result<Option<Value>, ScriptError>,
    /// Captured `console` entries, cleaned of terminal controls and invisible characters
    /// (`warn`, `error`, `info` and `debug` entries start with their level).
    pub logs: Vec<String>,
    /// What was left out past [`Limits::max_log_bytes`](crate::Limits::max_log_bytes): (entries
    /// dropped whole, bytes left out in all, the cut end of the last entry kept included).
    /// `None` when nothing was.
    pub logs_dropped: Option<(usize, usize)>,
    /// Tool calls the script made.
    pub calls: u32,
    /// The script's own CPU time (waiting for tools not counted).
    pub cpu_time: Duration,
}

impl ScriptRun {
    pub(crate) fn failed(error: ScriptError) -> Self {
        Self { result: Err(error), logs: Vec::new(), logs_dropped: None, calls: 0, cpu_time: Duration::ZERO }
    }

    /// Whether the script failed.
    pub fn is_error(&self) -> bool {
        self.result.is_err()
    }

    /// The text a model reads: the return value as JSON (or the failure, starting with
    /// `Error:`), then the log. Cleaned of what could drive a terminal or hide text; a caller
    /// fits it into its own budget (saving what does not fit).
    pub fn render(&self) -> String {
        let mut out = match &self.result {
            Ok(Some(value)) => text::terminal_safe(&value.to_string()),
            Ok(None) => "(the script returned nothing)".to_owned(),
            Err(error) => format!("Error: {error}"),
        };
        if !self.logs.is_empty() || self.logs_dropped.is_some() {
            let entries = self.logs.len();
            let _ = write!(out, "\n\nconsole ({entries} {}):", if entries == 1 { "entry" } else { "entries" });
            for line in &self.logs {
                out.push('\n');
                out.push_str(line);
            }
            if let Some((entries, bytes)) = self.logs_dropped {
                let _ = write!(
                    out,
                    "\n… {bytes} more bytes of console output left out ({entries} more {}): over the log limit",
                    if entries == 1 { "entry" } else { "entries" }
                );
            }
        }
        out
    }
}

/// Why a script failed. Its text says what happened and what the script can do instead; it
/// is what the model reads after `Error: `.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// The script threw (or returned a rejected promise), or did not compile.
    #[error("{0}")]
    Exception(ScriptException),
    /// It used its CPU time.
    #[error(
        "the script used more than its {} of CPU time and was stopped (time waiting for tools does not count): \
         loop less, or let the tools do the filtering",
        seconds(.limit)
    )]
    CpuLimit {
        /// The limit.
        limit: Duration,
    },
    /// It used its memory.
    #[error(
        "the script used more than its {} of memory and was stopped: keep less at once (take only the fields \
         you need from large results)",
        mebibytes(*.limit)
    )]
    MemoryLimit {
        /// The limit, in bytes.
        limit: usize,
    },
    /// It made more calls than allowed.
    #[error(
        "the script tried to make more than {limit} tool calls and was stopped: do fewer calls per script (split \
         the work, or ask a tool for more at once)"
    )]
    CallLimit {
        /// The limit.
        limit: u32,
    },
    /// Its return value is too large.
    #[error(
        "the script's return value is {bytes} bytes of JSON, over the limit of {limit}: return less (filter, \
         summarize or slice it in the script); it began: {excerpt}"
    )]
    ResultTooLarge {
        /// The JSON's size in bytes (at least; counted in UTF-16 units when over by far).
        bytes: usize,
        /// The limit, in bytes.
        limit: usize,
        /// The beginning of the JSON, cleaned.
        excerpt: String,
    },
    /// Its return value cannot be made JSON (a cycle, a `BigInt`).
    #[error("the script's return value cannot be turned into JSON: {0}")]
    NotJson(String),
    /// Its source is too large.
    #[error("the script is {bytes} bytes long, over the limit of {limit}: write a shorter one")]
    ScriptTooLarge {
        /// Its size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// It awaits something that can never settle: no tool call is in flight and nothing else
    /// can wake it (code mode has no timers).
    #[error(
        "the script awaits a promise that can never settle (no tool call is in flight, and there are no timers \
         in code mode)"
    )]
    Stalled,
    /// The engine failed (it could not start, or its thread ended without a report).
    #[error("the JavaScript engine failed: {0}")]
    Engine(String),
}

/// An exception the script did not catch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptException {
    /// `Name: message` (for an error object), else the thrown value as text; cleaned, on one
    /// line, capped.
    pub message: String,
    /// The script's line where it was thrown (for a tool's failure: where the script called
    /// it), from 1.
    pub line: Option<u32>,
    /// The column, from 1.
    pub column: Option<u32>,
}

impl std::fmt::Display for ScriptException {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (self.line, self.column) {
            (Some(line), Some(column)) => write!(f, "the script threw at line {line}, column {column}: ")?,
            (Some(line), None) => write!(f, "the script threw at line {line}: ")?,
            _ => f.write_str("the script threw: ")?,
        }
        f.write_str(&self.message)
    }
}

fn seconds(limit: &Duration) -> String {
    format!("{:.3} s", limit.as_secs_f64()).replace(".000 s", " s")
}

fn mebibytes(limit: usize) -> String {
    if limit.is_multiple_of(1 << 20) { format!("{} MiB", limit >> 20) } else { format!("{limit} bytes") }
}
