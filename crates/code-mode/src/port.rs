//! The one way out of a script: the [`ToolCaller`] port. The engine hands every call the
//! script makes to it; a host implements it over its call gate, so a script can do nothing a
//! direct call could not.

use std::fmt;
use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Map, Value};

use crate::tools::ScriptTool;

/// Which script a call comes from, and which of its calls it is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScriptCallContext {
    script_id: Arc<str>,
    seq: u32,
}

impl ScriptCallContext {
    /// The context of call number `seq` (from 1) of script `script_id`.
    pub fn new(script_id: Arc<str>, seq: u32) -> Self {
        Self { script_id, seq }
    }

    /// The id the host gave the script run (the model's id of its `run_code` call).
    pub fn script_id(&self) -> &str {
        &self.script_id
    }

    /// The call's number within the script, from 1, in the order the script made them.
    pub fn seq(&self) -> u32 {
        self.seq
    }

    /// An id for this call alone, `<script id>.<seq>`: what a transcript records it under.
    pub fn call_id(&self) -> String {
        format!("{}.{}", self.script_id, self.seq)
    }
}

/// Makes the script's tool calls: the engine's port to the host.
///
/// The engine calls it from the future of [`Engine::run`](crate::Engine::run), so a call may
/// borrow whatever that future borrows, and dropping the run drops every call in flight.
/// Calls run concurrently up to [`Limits::concurrency`](crate::Limits::concurrency).
///
/// What a successful call returns is what the script's `await` gives: by convention the
/// tool's `structuredContent` when it has one, else its content as the text the model would
/// read, and a result marked `isError` is a [`CallErrorKind::ToolError`]. The declarations
/// ([`ScriptTools::declarations`](crate::ScriptTools::declarations)) tell the model so.
#[async_trait]
pub trait ToolCaller: Send + Sync {
    /// Calls `tool` with `arguments` (always a JSON object) for the script call `context`.
    async fn call(
        &self,
        tool: &ScriptTool,
        arguments: Map<String, Value>,
        context: &ScriptCallContext,
    ) -> Result<Value, CallError>;

    /// Searches the tools for the script's `tools.search(query, limit)` (offered only when
    /// [`ScriptTools::with_search`](crate::ScriptTools::with_search) says so), as call
    /// `context`: the host names of the tools found, best first. Names the script's tools do
    /// not hold are left out; the others become callable for the rest of the run. By default
    /// refused: the host offers no search.
    async fn search(
        &self,
        query: &str,
        limit: Option<usize>,
        context: &ScriptCallContext,
    ) -> Result<Vec<String>, CallError> {
        let _ = (query, limit, context);
        Err(CallError::new(CallErrorKind::Refused, "this host offers no tool search"))
    }
}

/// Why a call failed: the script catches it as a `ToolError` with `kind` (the
/// [`CallErrorKind::as_str`] text) and `message`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct CallError {
    /// What kind of failure.
    pub kind: CallErrorKind,
    /// What happened, for the script (and through it the model): the engine cleans and caps
    /// it before the script sees it.
    pub message: String,
}

impl CallError {
    /// A failure of `kind`.
    pub fn new(kind: CallErrorKind, message: impl Into<String>) -> Self {
        Self { kind, message: message.into() }
    }
}

/// The kinds of [`CallError`]; the script reads them as `error.kind`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CallErrorKind {
    /// The tool is not callable here (unknown, denied, not offered); nothing was called.
    Refused,
    /// The arguments do not match the tool's input schema; nothing was called.
    BadArguments,
    /// The call needed a person's approval and did not get it; nothing was called.
    NotApproved,
    /// A hook blocked the call; nothing was called.
    Blocked,
    /// The server's tools changed since the script was given them; nothing was called.
    Stale,
    /// The tool ran and reported an error (`isError`).
    ToolError,
    /// The tool did not answer in time; the call was cancelled.
    Timeout,
    /// The call failed on its way (the server is gone, the transport failed).
    Failed,
    /// The arguments or the result were too large for the script's limits.
    TooLarge,
}

impl CallErrorKind {
    /// The name the script sees (`error.kind`), snake case.
    pub fn as_str(self) -> &'static str {
        match self {
            CallErrorKind::Refused => "refused",
            CallErrorKind::BadArguments => "bad_arguments",
            CallErrorKind::NotApproved => "not_approved",
            CallErrorKind::Blocked => "blocked",
            CallErrorKind::Stale => "stale",
            CallErrorKind::ToolError => "tool_error",
            CallErrorKind::Timeout => "timeout",
            CallErrorKind::Failed => "failed",
            CallErrorKind::TooLarge => "too_large",
        }
    }
}

impl fmt::Display for CallErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
