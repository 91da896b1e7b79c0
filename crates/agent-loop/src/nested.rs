//! Tool calls a built-in tool makes on behalf of its own call (code mode's `run_code`): each
//! goes through the same gate as a direct call, under the binding of the step that admitted
//! the built-in, with the built-in's call named as its parent.

use std::sync::Arc;

use async_trait::async_trait;
use mcp_protocol::CallToolResult;
use serde_json::Value;
use tool_pool::SearchResults;

use crate::gate::{Binding, Refusal};
use crate::ports::CallDecision;
use crate::search::{SEARCH_TOOL, StepSearch};
use crate::source_error::SourceError;

/// Makes tool calls for a built-in tool's call: the port the loop hands
/// [`BuiltinTool::call_nested`](crate::BuiltinTool::call_nested).
///
/// Every call passes [`CallGate::admit_with`](crate::CallGate::admit_with) against
/// [`binding`](InnerCalls::binding) with a [`CallContext`](crate::CallContext) whose parent
/// is [`parent`](InnerCalls::parent): the name, the server's generation, the arguments
/// against the schema, policy (a `confirm` asks the person, who is told a script asks), the
/// hooks, and at the last moment the generation again; it is reported as an event (and so
/// recorded in the transcript) like a direct call. Only servers' tools are reached: a built-in
/// (the calling one included) is refused.
#[async_trait]
pub trait InnerCalls: Send + Sync {
    /// The binding the built-in's call was admitted under: the pool its calls are checked
    /// against.
    fn binding(&self) -> &Arc<Binding>;

    /// The id of the built-in's own call (the model's id of its `run_code` call).
    fn parent(&self) -> &str;

    /// Calls `name` (a name of the binding's pool) with `arguments`, as call `id` (unique
    /// within the parent: code mode uses `<parent>.<seq>`).
    async fn call(&self, id: &str, name: &str, arguments: &Value) -> InnerResult;

    /// The step's tool search, when some tools wait behind it (the loop offers its search tool
    /// in this step); `None` (the default) when every tool the model may call is shown.
    fn search(&self) -> Option<&StepSearch> {
        None
    }

    /// Searches the step's tools for the built-in, as its call `id` (code mode's
    /// `tools.search`): what [`StepSearch::find`] gives. The loop tells the hooks and reports
    /// it as events (and so in the transcript) like a call of its search tool; finding loads
    /// nothing for the model. Refused when [`search`](InnerCalls::search) is `None`.
    async fn find(&self, id: &str, query: &str, limit: Option<usize>) -> Result<SearchResults, InnerError> {
        let _ = id;
        match self.search() {
            Some(search) => Ok(search.find(query, limit)),
            None => Err(InnerError::Refused(Refusal::NotExposed {
                name: SEARCH_TOOL.to_owned(),
                why: "no tool waits behind search in this step".to_owned(),
            })),
        }
    }
}

/// How an inner call ended: the tool's result (which may be an `isError` result), or why
/// there is none.
pub type InnerResult = Result<Box<CallToolResult>, InnerError>;

/// Why an inner call has no result.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum InnerError {
    /// The gate did not let it through (unknown, denied, stale, bad arguments, not approved,
    /// blocked); nothing was called.
    #[error("{0}")]
    Refused(Refusal),
    /// Its approval is asked out of band and it was not run.
    #[error("the call to {name} was not run: it waits for approval ({reason})")]
    Deferred {
        /// The name asked for.
        name: String,
        /// What the approver said happens next.
        reason: String,
    },
    /// It was sent and failed on its way (timeout, the server gone).
    #[error("{0}")]
    Source(SourceError),
    /// It ran, but an `after_tool` hook failed, so its result is withheld.
    #[error("{0}")]
    Withheld(String),
    /// A limit of the front end (a gateway's rate limit) refused it before the gate was
    /// asked; the text names the limit and when to retry.
    #[error("{0}")]
    Limited(String),
}

impl InnerError {
    /// How it is reported as a decision.
    pub fn decision(&self) -> CallDecision {
        match self {
            InnerError::Refused(refusal) => refusal.decision(),
            InnerError::Deferred { .. } => CallDecision::Deferred,
            InnerError::Limited(_) => CallDecision::Refused,
            InnerError::Source(_) | InnerError::Withheld(_) => CallDecision::Allowed,
        }
    }
}
