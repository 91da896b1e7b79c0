//! The agent loop and its ports: a language model, an approver for `confirm` decisions,
//! built-in tools, hooks around tool calls, the MCP tool source, and where events go.
//!
//! Each step refreshes what changed (a server's `tools/list_changed` re-lists only that server
//! and publishes a new pool revision), asks the model with exactly the snapshot's tools, and
//! runs every tool call of the answer against that same snapshot: unknown names and calls to a
//! server whose tools changed since are refused, arguments are checked against the schema the
//! model saw, policy decides (deny, confirm through the approver, allow), and allowed calls run
//! concurrently with their results kept in order.
//!
//! Between the pool and the model sits the exposure stage ([`tool_pool::expose`], configured
//! by [`AgentConfig::exposure`]): with many tools, most wait behind one built-in tool,
//! [`SEARCH_TOOL`], whose answers load what it finds for the next step (a new pool revision);
//! calls to tools the model was not shown (deferred and not loaded, or hidden by a budget) are
//! refused with a result saying what to do.
//!
//! **Invariant:** errors stay at the tool boundary. A failing server, a bad argument, a denial,
//! a timeout, or a built-in tool or hook that panics becomes a tool result starting with
//! `Error:` that the model can read; the loop itself never ends because a tool failed.
//!
//! ```
//! use std::sync::Arc;
//! use agent_loop::{Agent, AgentConfig, BoundCall, NoEvents, Operation, ScriptedModel, Listing, SourceError, ToolSource};
//!
//! struct NoTools;
//! #[async_trait::async_trait]
//! impl ToolSource for NoTools {
//!     async fn refresh(&self) -> Listing { Listing::default() }
//!     fn generation(&self, _server: &str) -> Option<u64> { None }
//!     async fn call_bound(&self, call: BoundCall) -> Result<mcp_protocol::CallToolResult, SourceError> {
//!         Err(SourceError::UnknownServer { op: Operation::CallTool { tool: call.tool }, server: call.server })
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let model = ScriptedModel::from_json(r#"{"turns": [{"text": "Hello!"}]}"#).unwrap();
//! let agent = Agent::new(Arc::new(model), Arc::new(NoTools), policy::Policy::default(), AgentConfig::default());
//! let mut conversation = Vec::new();
//! let outcome = agent.run_turn(&mut conversation, "Hi", &NoEvents).await.unwrap();
//! assert_eq!(outcome.final_text, "Hello!");
//! assert_eq!(conversation.len(), 2);
//! # }
//! ```

mod agent;
mod gate;
mod instructions;
mod model;
mod nested;
mod observe;
mod ports;
mod resources;
mod results;
mod saved;
mod scripted;
mod search;
mod source;
mod source_error;
mod transcript;

pub use agent::{Agent, AgentConfig, AgentError, TurnOutcome};
pub use gate::{
    Admission, Binding, CallGate, CallRequest, Catalog, CatalogError, Job, MAX_SESSION_APPROVALS, Ran, Refusal,
};
pub use instructions::{MAX_ALL_INSTRUCTIONS_CHARS, MAX_INSTRUCTIONS_CHARS, system_prompt};
pub use model::{
    Block, LanguageModel, Message, ModelError, ModelRequest, ModelResponse, NoStream, Role, StopReason, TextStream,
    ToolSpec, Usage,
};
pub use nested::{InnerCalls, InnerError, InnerResult};
pub use observe::{Observer, Watch};
pub use ports::{
    AgentEvent, ApprovalAnswer, ApprovalRequest, ApproveAll, Approver, BuiltinTool, CallContext, CallDecision,
    CallInfo, EventSink, GateDecision, HookVerdict, Hooks, NoEvents, NoHooks, RefuseAll,
};
pub use resources::{LIST_RESOURCES_TOOL, MAX_LISTED, READ_RESOURCE_TOOL, resource_tools};
pub use results::{content_text, error_text, fit_budget, render};
pub use saved::{DEFAULT_SLICE_CHARS, READ_SAVED_TOOL, saved_result_tool};
pub use scripted::{Script, ScriptedCall, ScriptedModel, ScriptedTurn};
pub use search::{DEFAULT_MAX_LOADED, SEARCH_TOOL, SearchState, StepSearch, ToolSearch, search_spec};
pub use source::{BoundCall, Departure, DepartureState, Listing, ToolSource};
pub use source_error::{Operation, SourceError};
pub use transcript::{Entry, Transcript, TranscriptError, load_messages};
