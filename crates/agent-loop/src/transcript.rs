//! The session transcript: one JSON object per line, appended and flushed as things happen, so
//! nothing is lost when the process dies; a session is resumed from its messages.

use std::fs::File;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use crate::model::Message;
use crate::ports::AgentEvent;

/// One line of a transcript.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Entry {
    /// A message of the conversation (what a resume restores).
    Message {
        /// Milliseconds since the Unix epoch.
        at_ms: u64,
        /// The message.
        message: Message,
    },
    /// Something the loop reported (tool decisions, results, the end of a turn).
    Event {
        /// Milliseconds since the Unix epoch.
        at_ms: u64,
        /// The event, as JSON.
        event: serde_json::Value,
    },
}

/// Why the transcript could not be written or read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TranscriptError {
    /// The file could not be opened, written or read.
    #[error("transcript {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The system's error.
        source: std::io::Error,
    },
    /// A line is not a transcript entry.
    #[error("transcript {path}, line {line}: {message}")]
    Corrupt {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// What was wrong.
        message: String,
    },
}

/// Appends entries to a transcript file.
#[derive(Debug)]
pub struct Transcript {
    file: File,
    path: PathBuf,
}

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_millis() as u64).unwrap_or(0)
}

impl Transcript {
    /// Open (creating or appending to) the transcript at `path`. The file (0600) and the
    /// directories created for it (0700) are its owner's only: it holds the conversation.
    ///
    /// A last line cut short by a crash is ended first, so what is appended starts a line of
    /// its own (glued to the cut one, it was lost with it, and the file could not be resumed).
    pub fn open(path: &Path) -> Result<Self, TranscriptError> {
        let io = |source| TranscriptError::Io { path: path.to_owned(), source };
        let mut file = private_files::open_append(path).map_err(io)?;
        if !ends_a_line(path).map_err(io)? {
            file.write_all(b"\n").and_then(|()| file.flush()).map_err(io)?;
        }
        Ok(Self { file, path: path.to_owned() })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn append(&mut self, entry: &Entry) -> Result<(), TranscriptError> {
        let mut line = serde_json::to_vec(entry)
            .map_err(|e| TranscriptError::Io { path: self.path.clone(), source: std::io::Error::other(e) })?;
        line.push(b'\n');
        // One write per line, then flush: a crash loses at most the line being written.
        self.file
            .write_all(&line)
            .and_then(|()| self.file.flush())
            .map_err(|source| TranscriptError::Io { path: self.path.clone(), source })
    }

    /// Append a message.
    pub fn message(&mut self, message: &Message) -> Result<(), TranscriptError> {
        self.append(&Entry::Message { at_ms: now_ms(), message: message.clone() })
    }

    /// Append an event (streamed text deltas are not kept: the message holds the text).
    pub fn event(&mut self, event: &AgentEvent) -> Result<(), TranscriptError> {
        if matches!(event, AgentEvent::Text { .. }) {
            return Ok(());
        }
        let event = serde_json::to_value(event).unwrap_or(serde_json::Value::Null);
        self.append(&Entry::Event { at_ms: now_ms(), event })
    }
}

/// Whether the file at `path` is empty or ends with a newline.
fn ends_a_line(path: &Path) -> std::io::Result<bool> {
    use std::io::{Read as _, Seek as _, SeekFrom};
    let mut file = File::open(path)?;
    if file.seek(SeekFrom::End(0))? == 0 {
        return Ok(true);
    }
    file.seek(SeekFrom::End(-1))?;
    let mut last = [0u8];
    file.read_exact(&mut last)?;
    Ok(last[0] == b'\n')
}

/// The messages of a transcript, to resume its conversation. A line cut short by a crash is
/// skipped (the last one, or one a resume ended later); any other bad line is an error naming
/// it. Tool calls never answered (a turn cut short) are left out with any partial answer, so
/// the conversation a model is given is one it accepts.
pub fn load_messages(path: &Path) -> Result<Vec<Message>, TranscriptError> {
    let io = |source| TranscriptError::Io { path: path.to_owned(), source };
    let mut reader = BufReader::new(File::open(path).map_err(io)?);
    // Read as bytes: a write cut inside a character leaves a line that is not UTF-8, which
    // is then read as one cut short (an Eof) and skipped like any other.
    let mut lines: Vec<String> = Vec::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io)? == 0 {
            break;
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        lines.push(String::from_utf8_lossy(text).into_owned());
    }
    let mut messages = Vec::new();
    let last = lines.len();
    for (index, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Entry>(line) {
            Ok(Entry::Message { message, .. }) => messages.push(message),
            Ok(Entry::Event { .. }) => {}
            Err(_) if index + 1 == last => {} // torn final write
            Err(e) if e.classify() == serde_json::error::Category::Eof => {} // torn, then ended by a resume
            Err(e) => {
                return Err(TranscriptError::Corrupt {
                    path: path.to_owned(),
                    line: index + 1,
                    message: e.to_string(),
                });
            }
        }
    }
    Ok(answered_only(messages))
}

/// `messages` without tool calls that lack their results in the next message (a turn cut
/// short while they ran: models refuse a conversation holding one, wherever it is), and
/// without results whose call is not right before them.
fn answered_only(messages: Vec<Message>) -> Vec<Message> {
    use crate::model::{Block, Role};
    let calls_of = |m: &Message| -> Vec<String> {
        if m.role != Role::Assistant {
            return Vec::new();
        }
        m.content
            .iter()
            .filter_map(|b| if let Block::ToolUse { id, .. } = b { Some(id.clone()) } else { None })
            .collect()
    };
    let answers = |m: &Message, id: &str| {
        m.role == Role::User
            && m.content.iter().any(|b| matches!(b, Block::ToolResult { tool_use_id, .. } if tool_use_id == id))
    };
    let mut kept: Vec<Message> = Vec::with_capacity(messages.len());
    let mut rest = messages.into_iter().peekable();
    while let Some(mut message) = rest.next() {
        let calls = calls_of(&message);
        if !calls.is_empty() && !rest.peek().is_some_and(|next| calls.iter().all(|id| answers(next, id))) {
            continue;
        }
        if message.role == Role::User {
            let called = kept.last().map(calls_of).unwrap_or_default();
            let before = message.content.len();
            message.content.retain(|b| match b {
                Block::ToolResult { tool_use_id, .. } => called.contains(tool_use_id),
                _ => true,
            });
            if message.content.is_empty() && before > 0 {
                continue;
            }
        }
        kept.push(message);
    }
    kept
}
