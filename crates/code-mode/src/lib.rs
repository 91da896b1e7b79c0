//! Code mode: the model writes one JavaScript script that calls many tools, and only its
//! answer comes back.

mod clock;
mod declare;
mod engine;
mod limits;
mod outcome;
mod port;
mod tools;
mod worker;

pub use declare::{Declarations, Detail};
pub use engine::Engine;
pub use limits::Limits;
pub use outcome::{ScriptError, ScriptException, ScriptRun};
pub use port::{CallError, CallErrorKind, ScriptCallContext, ToolCaller};
pub use tools::{ScriptTool, ScriptTools, identifier};
