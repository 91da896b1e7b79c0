//! Code mode in the host: the built-in tool `run_code` ([`RunCode`]), which runs a model's
//! script in `code_mode`'s engine with the tools of the servers code mode reaches
//! ([`CodeScope`]), every call the script makes going through the loop's call gate
//! ([`agent_loop::InnerCalls`]) exactly like a direct call.
//!
//! It lives here, not in `agent-loop`, because the engine (QuickJS, and `nix` for the script's
//! CPU clock) must stay out of the loop's dependency tree.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_loop::{Binding, InnerCalls, InnerError, Refusal, SourceError, StepSearch, content_text};
use async_trait::async_trait;
use code_mode::{CallError, CallErrorKind, Engine, Limits, ScriptCallContext, ScriptTool, ScriptTools, ToolCaller};
use serde_json::{Map, Value};
use tool_pool::Origin;

/// Which servers' tools a script may reach: `code_mode` of the whole configuration, and each
/// server's own.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CodeScope {
    /// Servers that set none follow this.
    pub all: bool,
    /// Each server's own `code_mode`, where it sets one.
    pub servers: BTreeMap<String, bool>,
}

impl CodeScope {
    /// Scripts reach every server (`code_mode = "on"` and no server turning it off).
    pub fn everything() -> Self {
        Self { all: true, servers: BTreeMap::new() }
    }

    /// Scripts reach these servers alone.
    pub fn only<I: IntoIterator<Item = S>, S: Into<String>>(servers: I) -> Self {
        Self { all: false, servers: servers.into_iter().map(|s| (s.into(), true)).collect() }
    }

    /// Whether a script may reach `server`'s tools.
    pub fn reaches(&self, server: &str) -> bool {
        self.servers.get(server).copied().unwrap_or(self.all)
    }

    /// Whether a script may reach any server at all (else `run_code` is not offered).
    pub fn any(&self) -> bool {
        self.all || self.servers.values().any(|on| *on)
    }
}

/// Where [`RunCode`] reads the scope at each use: a fixed one, or the running configuration's
/// (which a reload may change).
pub type ScopeSource = Arc<dyn Fn() -> CodeScope + Send + Sync>;

/// The built-in tool `run_code`: a script (JavaScript, the body of an async function) run in
/// code mode's engine, reaching the tools of the servers in scope as `tools.<server>.<tool>`.
///
/// Its description carries the declarations of those tools, made from the step's pool (so a
/// denied tool, which is not in the pool, is neither declared nor callable) within a byte
/// budget. Each call of the script goes through the gate the loop hands it
/// ([`agent_loop::BuiltinTool::call_nested`]); what comes back to the model is the script's
/// value, its log lines, or its error with line and column, which the loop fits into its
/// result budget like any result (saving a longer one).
pub struct RunCode {
    engine: Engine,
    scope: ScopeSource,
    budget: usize,
}

impl std::fmt::Debug for RunCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCode").field("limits", self.engine.limits()).field("budget", &self.budget).finish()
    }
}

/// What the pool's definition of `run_code` says before a step fills in the declarations.
const SHORT_DESCRIPTION: &str = "Run a JavaScript script that calls tools and returns only what matters.";

impl RunCode {
    /// `run_code` under `limits`, reaching the servers `scope` gives at each use, its
    /// description at most `budget` bytes (the exposure's budget of one tool's definition, less
    /// the room its name and input schema take).
    pub fn new(limits: Limits, scope: ScopeSource, budget: usize) -> Self {
        Self { engine: Engine::new(limits), scope, budget }
    }

    /// The engine (its limits, and how many script threads are alive).
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The tools a script may call under `binding`: the servers' tools of its pool that the
    /// scope reaches, under their pool names (the gate's). With the step's tool `search` (some
    /// tools deferred), the deferred ones wait behind the script's `tools.search` as they wait
    /// behind the model's search tool.
    pub fn script_tools(&self, binding: &Binding, search: Option<&StepSearch>) -> ScriptTools {
        let scope = (self.scope)();
        let tools = binding.pool().iter().filter_map(|entry| {
            let Origin::Mcp { server, tool } = entry.origin() else { return None };
            if !scope.reaches(server) {
                return None;
            }
            let mut script_tool = ScriptTool::new(entry.name(), server, &tool.name, tool.input_schema.clone());
            if let Some(description) = &tool.description {
                script_tool = script_tool.with_description(description.clone());
            }
            if let Some(output) = &tool.output_schema {
                script_tool = script_tool.with_output_schema(output.clone());
            }
            let deferred = search.is_some_and(|s| s.is_deferred(entry.name()));
            Some(script_tool.with_deferred(deferred))
        });
        ScriptTools::new(tools).with_search(search.is_some())
    }
}

#[async_trait]
impl agent_loop::BuiltinTool for RunCode {
    fn spec(&self) -> tool_pool::BuiltinTool {
        tool_pool::BuiltinTool {
            name: code_mode::RUN_CODE.to_owned(),
            description: SHORT_DESCRIPTION.to_owned(),
            input_schema: code_mode::run_code_input_schema(),
        }
    }

    fn describe(&self, binding: &Binding, search: Option<&StepSearch>) -> Option<String> {
        let tools = self.script_tools(binding, search);
        Some(code_mode::run_code_description(&tools, self.engine.limits(), self.budget).text)
    }

    async fn call(&self, _input: &Value) -> Result<String, String> {
        // Only reachable where no gate hands it one (a front end that does not support it).
        Err(format!("{} is not available here: it runs only inside the agent loop", code_mode::RUN_CODE))
    }

    async fn call_nested(&self, input: &Value, calls: &dyn InnerCalls) -> Result<String, String> {
        let Some(code) = input.get("code").and_then(Value::as_str) else {
            return Err("run_code needs a string argument \"code\" (the script)".to_owned());
        };
        let tools = self.script_tools(calls.binding(), calls.search());
        let run = self.engine.run(code, &tools, &GateCaller { calls }, calls.parent()).await;
        let text = run.render();
        if run.is_error() { Err(text) } else { Ok(text) }
    }
}

/// The engine's port over the gate: each script call is an inner call of the script's own.
struct GateCaller<'a> {
    calls: &'a dyn InnerCalls,
}

#[async_trait]
impl ToolCaller for GateCaller<'_> {
    async fn call(
        &self,
        tool: &ScriptTool,
        arguments: Map<String, Value>,
        context: &ScriptCallContext,
    ) -> Result<Value, CallError> {
        let arguments = Value::Object(arguments);
        match self.calls.call(&context.call_id(), tool.name(), &arguments).await {
            Ok(result) if result.is_error() => {
                let text: Vec<String> = result.content.iter().map(content_text).collect();
                Err(CallError::new(CallErrorKind::ToolError, text.join("\n")))
            }
            Ok(result) => Ok(match result.structured_content {
                Some(structured) => structured,
                None => Value::String(result.content.iter().map(content_text).collect::<Vec<_>>().join("\n")),
            }),
            Err(error) => Err(CallError::new(kind(&error), error.to_string())),
        }
    }

    async fn search(
        &self,
        query: &str,
        limit: Option<usize>,
        context: &ScriptCallContext,
    ) -> Result<Vec<String>, CallError> {
        match self.calls.find(&context.call_id(), query, limit).await {
            Ok(results) => Ok(results.hits.iter().map(|hit| hit.name.to_string()).collect()),
            Err(error) => Err(CallError::new(kind(&error), error.to_string())),
        }
    }
}

/// The kind a script reads of a call the gate did not run, or that failed.
fn kind(error: &InnerError) -> CallErrorKind {
    match error {
        InnerError::Refused(Refusal::BadArguments { .. }) => CallErrorKind::BadArguments,
        InnerError::Refused(Refusal::NotApproved { .. }) | InnerError::Deferred { .. } => CallErrorKind::NotApproved,
        InnerError::Refused(Refusal::Blocked { .. }) => CallErrorKind::Blocked,
        InnerError::Refused(Refusal::Stale { .. }) | InnerError::Source(SourceError::Stale { .. }) => {
            CallErrorKind::Stale
        }
        InnerError::Refused(_) | InnerError::Limited(_) => CallErrorKind::Refused,
        InnerError::Source(SourceError::Timeout { .. }) => CallErrorKind::Timeout,
        InnerError::Source(_) | InnerError::Withheld(_) => CallErrorKind::Failed,
        _ => CallErrorKind::Failed,
    }
}
