//! The loop's other ports: who approves `confirm` decisions, built-in tools, hooks around tool
//! calls, and where the loop reports what happens.

use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::model::{StopReason, Usage};

/// What a person answered when asked to approve a call.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ApprovalAnswer {
    /// Run this call.
    Yes,
    /// Refuse this call.
    No,
    /// Run this call and every later call of the same tool in this session.
    YesForSession,
    /// Nobody could be asked; the call is refused, and this says why and what to do (for
    /// example "there is no terminal to ask on; rerun with --yes to approve this call").
    Unanswered(String),
    /// Not decided yet: the person is asked out of band (a gateway answers the call with an
    /// `input_required` round and the client retries with the answer). The call is not run
    /// now ([`Admission::Deferred`](crate::Admission::Deferred)); this says what happens next.
    Deferred(String),
}

/// A call waiting for approval.
#[derive(Debug, Clone, Serialize)]
#[non_exhaustive]
pub struct ApprovalRequest {
    /// The model-visible name.
    pub name: String,
    /// The server, for MCP tools.
    pub server: Option<String>,
    /// The tool's own name.
    pub tool: String,
    /// The arguments the model gave.
    pub arguments: Value,
    /// Which policy rule asked for confirmation.
    pub rule: String,
    /// Who asks ([`CallContext::caller`]): a gateway's client or session; `None` for the
    /// gate's default caller (the agent's model, `mcp-harness call`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub caller: Option<String>,
    /// The script asking, for a call a script makes (code mode): the id of the script's own
    /// call ([`CallContext::parent`]). A person should be told that a script asks.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<String>,
}

impl ApprovalRequest {
    /// A request to approve calling `name` (tool `tool` of `server`, or a built-in) with
    /// `arguments`, asked for by policy rule `rule`; asked by the default caller.
    pub fn new(
        name: impl Into<String>,
        server: Option<String>,
        tool: impl Into<String>,
        arguments: Value,
        rule: impl Into<String>,
    ) -> Self {
        Self { name: name.into(), server, tool: tool.into(), arguments, rule: rule.into(), caller: None, script: None }
    }

    /// Asked by `caller`.
    pub fn with_caller(mut self, caller: impl Into<String>) -> Self {
        self.caller = Some(caller.into());
        self
    }

    /// Asked by the script whose call has id `script`.
    pub fn with_script(mut self, script: impl Into<String>) -> Self {
        self.script = Some(script.into());
        self
    }

    /// Who asks, for a person (`script "call_7"`), when it is not the default caller's model
    /// itself: the script, else the caller. Raw text: clean it before a terminal.
    pub fn asked_by(&self) -> Option<String> {
        match (&self.script, &self.caller) {
            (Some(script), _) => Some(format!("script {script:?}")),
            (None, Some(caller)) => Some(caller.clone()),
            (None, None) => None,
        }
    }
}

/// Who asks for a call, and who approves it: what a gate is told beside the call itself
/// ([`CallGate::admit_with`](crate::CallGate::admit_with)).
///
/// The default is the gate's default caller (the agent loop's model, `mcp-harness call`),
/// approved by the gate's own approver: what [`CallGate::admit`](crate::CallGate::admit) uses.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct CallContext {
    /// Who asks: a stable key (a gateway's session, or its caller and client). Approvals "yes
    /// for this session" are kept per caller, and the approver is told
    /// ([`ApprovalRequest::caller`]). `None`: the gate's default caller.
    pub caller: Option<Arc<str>>,
    /// The script whose inner call this is (code mode): the id of the script's own call. The
    /// inner call's id starts with it ([`InnerCalls::parent`](crate::InnerCalls::parent)), so
    /// hooks, events and the transcript name it; the approver is told
    /// ([`ApprovalRequest::script`]).
    pub parent: Option<Arc<str>>,
    /// Who approves this call's `confirm` decision, in place of the gate's approver (a
    /// gateway's approver for the client of this call).
    pub approver: Option<Arc<dyn Approver>>,
}

impl CallContext {
    /// The default caller, the gate's approver (a `const`, so the default costs nothing).
    pub const DEFAULT: CallContext = CallContext { caller: None, parent: None, approver: None };

    /// The default caller, the gate's approver.
    pub fn new() -> Self {
        Self::default()
    }

    /// Asked by `caller` (see [`CallContext::caller`]).
    pub fn with_caller(mut self, caller: impl Into<Arc<str>>) -> Self {
        self.caller = Some(caller.into());
        self
    }

    /// An inner call of the script whose own call has id `parent`.
    pub fn with_parent(mut self, parent: impl Into<Arc<str>>) -> Self {
        self.parent = Some(parent.into());
        self
    }

    /// Approved by `approver` instead of the gate's approver.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = Some(approver);
        self
    }
}

impl std::fmt::Debug for CallContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallContext")
            .field("caller", &self.caller)
            .field("parent", &self.parent)
            .field("approver", &self.approver.as_ref().map(|_| "(own)"))
            .finish()
    }
}

/// Decides `confirm` calls (a terminal prompt, a UI, a test double).
#[async_trait]
pub trait Approver: Send + Sync {
    /// Ask.
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer;
}

/// Refuses every `confirm` call: the right answer when nobody can be asked.
#[derive(Debug, Clone, Copy, Default)]
pub struct RefuseAll;

#[async_trait]
impl Approver for RefuseAll {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::No
    }
}

/// Approves every `confirm` call (`--yes`). Denied tools stay denied: they are not in the pool.
#[derive(Debug, Clone, Copy, Default)]
pub struct ApproveAll;

#[async_trait]
impl Approver for ApproveAll {
    async fn approve(&self, _request: &ApprovalRequest) -> ApprovalAnswer {
        ApprovalAnswer::Yes
    }
}

/// A tool the host itself provides.
#[async_trait]
pub trait BuiltinTool: Send + Sync {
    /// How the model sees it (name, description, input schema).
    fn spec(&self) -> tool_pool::BuiltinTool;

    /// Run it; `Err` is a failure the model reads (as `Error: …`).
    async fn call(&self, input: &Value) -> Result<String, String>;

    /// A decision that depends on this call's input (the resource it reads), for the gate to
    /// apply beside the tool's own: the stricter wins. `None` (the default) adds nothing.
    fn decide_input(&self, _policy: &policy::Policy, _input: &Value) -> Option<policy::Verdict> {
        None
    }

    /// Runs it under the policy of the binding it was admitted with (a tool that lists what
    /// policy may hide, such as resources, filters by it). By default [`BuiltinTool::call`].
    async fn call_under(&self, input: &Value, _policy: &policy::Policy) -> Result<String, String> {
        self.call(input).await
    }

    /// The description the model is shown in a step whose pool is `binding`'s, for a tool
    /// whose description depends on the pool (code mode lists the tools a script may call);
    /// `search` is the step's tool search when some tools wait behind it. `None` (the
    /// default): the description of [`spec`](BuiltinTool::spec).
    fn describe(&self, _binding: &crate::Binding, _search: Option<&crate::StepSearch>) -> Option<String> {
        None
    }

    /// Runs it with a way to make tool calls of its own through the same gate (code mode's
    /// `run_code`): what the loop calls. By default [`call_under`](BuiltinTool::call_under)
    /// the binding's policy, making no calls.
    async fn call_nested(&self, input: &Value, calls: &dyn crate::InnerCalls) -> Result<String, String> {
        self.call_under(input, calls.binding().policy()).await
    }
}

/// A tool call as hooks see it.
#[derive(Debug, Clone, Serialize)]
pub struct CallInfo {
    /// The model's id of the call.
    pub id: String,
    /// The model-visible name.
    pub name: String,
    /// The server, for MCP tools.
    pub server: Option<String>,
    /// The arguments.
    pub arguments: Value,
}

/// What a hook decides before a call.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum HookVerdict {
    /// Go on.
    Continue,
    /// Refuse the call; the reason goes to the model.
    Block(String),
}

/// One decision of the gate about a call, as [`Hooks::decided`] sees it.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct GateDecision<'a> {
    /// How it was decided.
    pub decision: CallDecision,
    /// The policy rule that made it, once policy had a say (`default`, `tool "x" of server "y"`,
    /// the rule of a denied tool); `None` when the call was refused before (unknown tool, bad
    /// arguments, stale) or was never the policy's to decide (the loop's own search tool).
    pub rule: Option<&'a str>,
    /// Why, in short: what [`AgentEvent::ToolCall`] carries as its reason.
    pub reason: &'a str,
    /// The refusal, when the call was not run.
    pub refusal: Option<&'a crate::Refusal>,
}

impl<'a> GateDecision<'a> {
    /// A decision without a rule or a refusal (a call the gate did not have to check).
    pub fn new(decision: CallDecision, reason: &'a str) -> Self {
        Self { decision, rule: None, reason, refusal: None }
    }
}

/// Runs before and after every tool call that policy let through, and hears every decision.
#[async_trait]
pub trait Hooks: Send + Sync {
    /// Every decision about a call, refusals included (unknown tool, denied, bad arguments,
    /// stale, not approved, blocked, deferred, not loaded): an audit log's line. Called once
    /// per decision, after [`before_tool`](Self::before_tool) for a call let through, and again
    /// when a call let through is refused at the last moment (its server changed). Keep it
    /// quick (it is not awaited); a hook that panics blocks the call it was told about. By
    /// default nothing.
    fn decided(&self, _call: &CallInfo, _decision: &GateDecision<'_>) {}

    /// Before the call.
    async fn before_tool(&self, _call: &CallInfo) -> HookVerdict {
        HookVerdict::Continue
    }

    /// After the call, with the text the model will read.
    async fn after_tool(&self, _call: &CallInfo, _result: &str, _is_error: bool) {}
}

/// Hooks that do nothing.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoHooks;

impl Hooks for NoHooks {}

/// How a call was decided.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CallDecision {
    /// Policy allows it.
    Allowed,
    /// A person approved it (now or earlier in the session).
    Approved,
    /// A person refused it, or nobody could be asked.
    Refused,
    /// A hook blocked it.
    Blocked,
    /// It was not run: unknown tool, changed tool, or bad arguments.
    Rejected,
    /// It was not run yet: its approval is asked out of band ([`ApprovalAnswer::Deferred`]).
    Deferred,
}

/// What the loop reports as it goes (for a terminal, `--json`, or a UI).
#[derive(Debug, Clone, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum AgentEvent {
    /// A step starts: the model is about to be called with this pool.
    Step {
        /// 1-based step number within the turn.
        step: usize,
        /// The pool snapshot's revision.
        pool_revision: u64,
        /// How many tools the model sees.
        tools: usize,
    },
    /// Streamed model text.
    Text {
        /// The new text.
        text: String,
    },
    /// The model asked for a call, and this is how it was decided.
    ToolCall {
        /// The call's id.
        id: String,
        /// The model-visible name.
        name: String,
        /// The arguments.
        arguments: Value,
        /// The decision.
        decision: CallDecision,
        /// Why (the policy rule, the refusal, the problem).
        reason: String,
    },
    /// A tool reported progress.
    Progress {
        /// The call's id.
        id: String,
        /// The model-visible name.
        name: String,
        /// How far it is.
        progress: f64,
        /// Out of how much, when the server knows.
        total: Option<f64>,
        /// What it is doing (server text: clean it before showing it).
        message: Option<String>,
    },
    /// The pool changed: the servers whose tools the model now sees, and which joined or left
    /// since the previous revision (a server that connected late, one that failed).
    PoolChanged {
        /// The new revision.
        revision: u64,
        /// Servers that joined.
        joined: Vec<String>,
        /// Servers that left.
        left: Vec<String>,
    },
    /// A call's result as the model will read it.
    ToolResult {
        /// The call's id.
        id: String,
        /// The model-visible name.
        name: String,
        /// Whether it failed.
        is_error: bool,
        /// The text (possibly an excerpt, see the result budget).
        content: String,
    },
    /// The turn ended.
    Finished {
        /// Why the model stopped.
        stop_reason: StopReason,
        /// Steps used.
        steps: usize,
        /// Tokens used in this turn.
        usage: Usage,
    },
    /// The step limit was reached before the model finished.
    StepLimit {
        /// The limit.
        steps: usize,
    },
    /// The model call of a step failed (after its retries); the turn ends with this error.
    ModelError {
        /// The step.
        step: usize,
        /// What went wrong (capped).
        error: String,
        /// The text the call streamed before it failed (shown already; the first 256 KiB).
        streamed: String,
    },
}

/// Receives [`AgentEvent`]s.
pub trait EventSink: Send + Sync {
    /// One event.
    fn event(&self, event: &AgentEvent);
}

/// Discards events.
#[derive(Debug, Clone, Copy, Default)]
pub struct NoEvents;

impl EventSink for NoEvents {
    fn event(&self, _event: &AgentEvent) {}
}
