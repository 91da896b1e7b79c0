//! The loop: each step refreshes the tool pool, asks the model with exactly that snapshot's
//! tools, and runs every tool call of the answer against the same snapshot.

use std::collections::{BTreeMap, HashSet};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use policy::{Decision, Policy};
use serde_json::Value;
use tool_pool::{ArgumentChecker, CheckError, Origin, Pool, assemble};

use crate::model::{
    Block, LanguageModel, Message, ModelError, ModelRequest, Role, StopReason, TextStream, ToolSpec, Usage,
};
use crate::ports::{
    AgentEvent, ApprovalAnswer, ApprovalRequest, Approver, BuiltinTool, CallDecision, CallInfo, EventSink, HookVerdict,
    Hooks, NoHooks, RefuseAll,
};
use crate::results::{error_text, fit_budget, render};
use crate::source::ToolSource;
use crate::transcript::Transcript;

/// Settings of the loop.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    /// The provider's model name.
    pub model: String,
    /// System prompt.
    pub system: String,
    /// Output budget per model call.
    pub max_tokens: u32,
    /// Model calls per user turn before the loop stops.
    pub max_steps: usize,
    /// A tool result longer than this (in characters) is saved to a file and shown as an excerpt.
    pub result_budget: usize,
    /// Where oversize results are saved (the session's directory).
    pub session_dir: Option<PathBuf>,
    /// Tool-pool assembly options.
    pub pool: tool_pool::Options,
}

impl Default for AgentConfig {
    fn default() -> Self {
        Self {
            model: String::new(),
            system: "You are a helpful assistant with tools. Use them when they help; say plainly when a tool \
                     fails or is refused."
                .to_owned(),
            max_tokens: 4096,
            max_steps: 20,
            result_budget: 20_000,
            session_dir: None,
            pool: tool_pool::Options::default(),
        }
    }
}

/// How a turn ended.
#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    /// Why the model stopped (`None` when the step limit stopped it).
    pub stop_reason: Option<StopReason>,
    /// Model calls made.
    pub steps: usize,
    /// Tokens used.
    pub usage: Usage,
    /// The model's last text.
    pub final_text: String,
}

/// Why a turn could not go on. Tool failures are never here: they are tool results.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The model could not be asked.
    #[error(transparent)]
    Model(#[from] ModelError),
    /// The tool pool could not be assembled (strict mode).
    #[error("the tool pool could not be assembled: {0}")]
    Pool(String),
}

/// One step's view of the tools: the pool, and the listing generations it was built from.
struct Snapshot {
    pool: Arc<Pool>,
    generations: BTreeMap<String, u64>,
}

struct State {
    revision: u64,
    snapshot: Option<Arc<Snapshot>>,
    approved_for_session: HashSet<String>,
}

/// The agent: a model, tools, policy, an approver, hooks.
pub struct Agent {
    model: Arc<dyn LanguageModel>,
    source: Arc<dyn ToolSource>,
    builtins: Vec<Arc<dyn BuiltinTool>>,
    builtin_specs: Arc<[tool_pool::BuiltinTool]>,
    policy: Policy,
    approver: Arc<dyn Approver>,
    hooks: Arc<dyn Hooks>,
    config: AgentConfig,
    checker: ArgumentChecker,
    state: Mutex<State>,
    transcript: Option<Mutex<Transcript>>,
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("model", &self.model.name()).field("config", &self.config).finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Forwards streamed text as events.
struct TextEvents<'a>(&'a dyn EventSink);

impl TextStream for TextEvents<'_> {
    fn text_delta(&self, text: &str) {
        self.0.event(&AgentEvent::Text { text: text.to_owned() });
    }
}

/// A call after the checks, ready to run.
enum Prepared {
    Done(String),
    Builtin(Arc<dyn BuiltinTool>, Value),
    Mcp { server: String, tool: String, arguments: Option<serde_json::Map<String, Value>> },
}

impl Agent {
    /// An agent with no built-in tools, no hooks, refusing every `confirm` call; see the
    /// `with_*` methods.
    pub fn new(
        model: Arc<dyn LanguageModel>,
        source: Arc<dyn ToolSource>,
        policy: Policy,
        config: AgentConfig,
    ) -> Self {
        Self {
            model,
            source,
            builtins: Vec::new(),
            builtin_specs: Arc::from(Vec::new()),
            policy,
            approver: Arc::new(RefuseAll),
            hooks: Arc::new(NoHooks),
            config,
            checker: ArgumentChecker::new(),
            state: Mutex::new(State { revision: 0, snapshot: None, approved_for_session: HashSet::new() }),
            transcript: None,
        }
    }

    /// Who approves `confirm` calls.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.approver = approver;
        self
    }

    /// Hooks around tool calls.
    pub fn with_hooks(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.hooks = hooks;
        self
    }

    /// Built-in tools (they come first in the pool and keep their names on collisions).
    pub fn with_builtins(mut self, builtins: Vec<Arc<dyn BuiltinTool>>) -> Self {
        self.builtin_specs = builtins.iter().map(|b| b.spec()).collect::<Vec<_>>().into();
        self.builtins = builtins;
        self
    }

    /// Append messages and events to this transcript as they happen.
    pub fn with_transcript(mut self, transcript: Transcript) -> Self {
        self.transcript = Some(Mutex::new(transcript));
        self
    }

    /// The pool the next step would use (refreshed now).
    pub async fn pool(&self) -> Result<Arc<Pool>, AgentError> {
        Ok(Arc::clone(&self.snapshot().await?.pool))
    }

    fn record_message(&self, message: &Message) {
        if let Some(t) = &self.transcript
            && let Err(e) = lock(t).message(message)
        {
            tracing::warn!("{e}");
        }
    }

    fn emit(&self, events: &dyn EventSink, event: AgentEvent) {
        if let Some(t) = &self.transcript
            && let Err(e) = lock(t).event(&event)
        {
            tracing::warn!("{e}");
        }
        events.event(&event);
    }

    /// Refresh the listing; build a new pool (with the next revision) only when something changed.
    async fn snapshot(&self) -> Result<Arc<Snapshot>, AgentError> {
        let listing = self.source.refresh().await;
        let mut state = lock(&self.state);
        if let Some(current) = &state.snapshot
            && current.generations == listing.generations
        {
            return Ok(Arc::clone(current));
        }
        state.revision += 1;
        let pool = assemble(&self.builtin_specs, &listing.servers, &self.policy, &self.config.pool, state.revision)
            .map_err(|e| AgentError::Pool(e.to_string()))?;
        let snapshot = Arc::new(Snapshot { pool: Arc::new(pool), generations: listing.generations });
        state.snapshot = Some(Arc::clone(&snapshot));
        Ok(snapshot)
    }

    /// Run one user turn to its end: the model is called until it stops asking for tools (or
    /// the step limit). `conversation` gets every message; the transcript too.
    pub async fn run_turn(
        &self,
        conversation: &mut Vec<Message>,
        user_text: &str,
        events: &dyn EventSink,
    ) -> Result<TurnOutcome, AgentError> {
        let user = Message::user(user_text);
        self.record_message(&user);
        conversation.push(user);
        let mut usage = Usage::default();
        for step in 1..=self.config.max_steps {
            let snapshot = self.snapshot().await?;
            let tools: Vec<ToolSpec> = snapshot
                .pool
                .iter()
                .map(|e| ToolSpec {
                    name: e.name().to_owned(),
                    description: e.description().to_owned(),
                    input_schema: e.input_schema().clone(),
                })
                .collect();
            self.emit(events, AgentEvent::Step { step, pool_revision: snapshot.pool.revision(), tools: tools.len() });
            let request = ModelRequest {
                model: self.config.model.clone(),
                system: self.config.system.clone(),
                messages: conversation.clone(),
                tools,
                max_tokens: self.config.max_tokens,
            };
            let response = self.model.complete(&request, &TextEvents(events)).await?;
            usage.input_tokens += response.usage.input_tokens;
            usage.output_tokens += response.usage.output_tokens;
            let assistant = Message { role: Role::Assistant, content: response.content };
            self.record_message(&assistant);
            let final_text = assistant.text();
            let calls: Vec<(String, String, Value)> = assistant
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => Some((id.clone(), name.clone(), input.clone())),
                    _ => None,
                })
                .collect();
            conversation.push(assistant);
            if calls.is_empty() {
                self.emit(
                    events,
                    AgentEvent::Finished { stop_reason: response.stop_reason.clone(), steps: step, usage },
                );
                return Ok(TurnOutcome { stop_reason: Some(response.stop_reason), steps: step, usage, final_text });
            }
            let results = self.run_calls(&snapshot, calls, events).await;
            let message = Message { role: Role::User, content: results };
            self.record_message(&message);
            conversation.push(message);
        }
        self.emit(events, AgentEvent::StepLimit { steps: self.config.max_steps });
        let final_text =
            conversation.iter().rev().find(|m| m.role == Role::Assistant).map(Message::text).unwrap_or_default();
        Ok(TurnOutcome { stop_reason: None, steps: self.config.max_steps, usage, final_text })
    }

    /// Decide every call in order (asking the approver one at a time), then run the allowed
    /// ones concurrently; results keep the calls' order.
    async fn run_calls(
        &self,
        snapshot: &Snapshot,
        calls: Vec<(String, String, Value)>,
        events: &dyn EventSink,
    ) -> Vec<Block> {
        let mut prepared = Vec::with_capacity(calls.len());
        for (id, name, input) in &calls {
            let (decision, reason, job) = self.prepare(snapshot, id, name, input).await;
            self.emit(
                events,
                AgentEvent::ToolCall {
                    id: id.clone(),
                    name: name.clone(),
                    arguments: input.clone(),
                    decision: decision.clone(),
                    reason,
                },
            );
            let info = CallInfo {
                id: id.clone(),
                name: name.clone(),
                server: snapshot.pool.get(name).and_then(|e| e.server().map(str::to_owned)),
                arguments: input.clone(),
            };
            prepared.push((info, job));
        }
        let runs = prepared.into_iter().map(|(info, job)| async move {
            let (text, is_error) = match job {
                Prepared::Done(text) => (text, true),
                Prepared::Builtin(tool, input) => match tool.call(&input).await {
                    Ok(text) => (text, false),
                    Err(message) => (error_text(&message), true),
                },
                Prepared::Mcp { server, tool, arguments } => match self.source.call(&server, &tool, arguments).await {
                    Ok(result) => (render(&result), result.is_error()),
                    Err(message) => (error_text(&message), true),
                },
            };
            (info, text, is_error)
        });
        let finished = futures_util::future::join_all(runs).await;
        let mut blocks = Vec::with_capacity(finished.len());
        for (info, text, is_error) in finished {
            let text = fit_budget(
                text,
                self.config.result_budget,
                self.config.session_dir.as_deref().map(|d| d.join("tool-results")).as_deref(),
                &info.id,
            );
            self.hooks.after_tool(&info, &text, is_error).await;
            self.emit(
                events,
                AgentEvent::ToolResult {
                    id: info.id.clone(),
                    name: info.name.clone(),
                    is_error,
                    content: text.clone(),
                },
            );
            blocks.push(Block::ToolResult { tool_use_id: info.id, content: text, is_error });
        }
        blocks
    }

    /// The checks, in order: the name is in this snapshot; its server's tools have not changed
    /// since; the arguments match the schema the model saw; policy (and the approver); hooks.
    async fn prepare(
        &self,
        snapshot: &Snapshot,
        id: &str,
        name: &str,
        input: &Value,
    ) -> (CallDecision, String, Prepared) {
        let rejected =
            |message: String| (CallDecision::Rejected, message.clone(), Prepared::Done(error_text(&message)));
        let Some(entry) = snapshot.pool.get(name) else {
            let known: Vec<&str> = snapshot.pool.iter().map(|e| e.name()).take(20).collect();
            return rejected(format!(
                "there is no tool named {name:?} in this session's tool list (revision {}); available: {}",
                snapshot.pool.revision(),
                if known.is_empty() { "none".to_owned() } else { known.join(", ") }
            ));
        };
        if let Some(server) = entry.server() {
            let seen = snapshot.generations.get(server).copied();
            if self.source.generation(server) != seen {
                return rejected(format!(
                    "the tools of server {server:?} changed after you were shown them (tool list revision {}); \
                     {name} was not called. Look at the updated tool list and try again.",
                    snapshot.pool.revision()
                ));
            }
        }
        match self.checker.check(&snapshot.pool, name, input) {
            Ok(()) => {}
            Err(CheckError::Problems(problems)) => {
                let listed: Vec<String> = problems.iter().map(ToString::to_string).collect();
                return rejected(format!(
                    "the arguments for {name} do not match its input schema:\n- {}",
                    listed.join("\n- ")
                ));
            }
            Err(CheckError::UnknownTool) => return rejected(format!("there is no tool named {name:?}")),
        }
        let rule = entry.verdict().source.to_string();
        let (decision, reason) = match entry.decision() {
            Decision::Allow => (CallDecision::Allowed, format!("allowed by {rule}")),
            // Denied tools are not in the pool; a deny here would be a pool bug, so refuse.
            Decision::Deny => (CallDecision::Refused, format!("denied by {rule}")),
            Decision::Confirm => {
                let already = lock(&self.state).approved_for_session.contains(name);
                if already {
                    (CallDecision::Approved, "approved earlier in this session".to_owned())
                } else {
                    let request = ApprovalRequest {
                        name: name.to_owned(),
                        server: entry.server().map(str::to_owned),
                        tool: entry.tool().to_owned(),
                        arguments: input.clone(),
                        rule: rule.clone(),
                    };
                    match self.approver.approve(&request).await {
                        ApprovalAnswer::Yes => (CallDecision::Approved, format!("approved (asked by {rule})")),
                        ApprovalAnswer::YesForSession => {
                            lock(&self.state).approved_for_session.insert(name.to_owned());
                            (CallDecision::Approved, format!("approved for this session (asked by {rule})"))
                        }
                        ApprovalAnswer::No => (CallDecision::Refused, format!("refused by the user (asked by {rule})")),
                    }
                }
            }
        };
        if decision == CallDecision::Refused {
            let text = error_text(&format!("the call to {name} was not run: {reason}."));
            return (decision, reason, Prepared::Done(text));
        }
        let info = CallInfo {
            id: id.to_owned(),
            name: name.to_owned(),
            server: entry.server().map(str::to_owned),
            arguments: input.clone(),
        };
        if let HookVerdict::Block(why) = self.hooks.before_tool(&info).await {
            let text = error_text(&format!("the call to {name} was blocked: {why}"));
            return (CallDecision::Blocked, why, Prepared::Done(text));
        }
        let job = match entry.origin() {
            Origin::Builtin(spec) => match self.builtins.iter().find(|b| b.spec().name == spec.name) {
                Some(tool) => Prepared::Builtin(Arc::clone(tool), input.clone()),
                None => Prepared::Done(error_text(&format!("built-in tool {name} has no handler"))),
            },
            Origin::Mcp { server, tool } => Prepared::Mcp {
                server: server.to_owned(),
                tool: tool.name.clone(),
                arguments: input.as_object().cloned(),
            },
        };
        (decision, reason, job)
    }
}
