//! The agent loop and its ports: a language model, an approver for `confirm` decisions,
//! built-in tools, hooks around tool calls, and the MCP tool source.
//!
//! **Invariant:** errors stay at the tool boundary. A failing server, a bad argument, a denial or
//! a timeout becomes a tool result the model can read; the loop itself never ends because a tool
//! failed.

pub mod model;

pub use model::{
    Block, LanguageModel, Message, ModelError, ModelRequest, ModelResponse, NoStream, Role, StopReason, TextStream,
    ToolSpec, Usage,
};
