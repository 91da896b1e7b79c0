//! The loop: each step refreshes the tool pool, asks the model with exactly that snapshot's
//! tools, and runs every tool call of the answer against the same snapshot.

use mcp_safety::lock;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use policy::Policy;
use serde_json::Value;
use tool_pool::{Exposure, ExposureState, Pool, SearchResults, expose};

use crate::gate::{Admission, Binding, CallGate, CallRequest, Catalog, Job, Ran, Refusal};
use crate::model::{
    Block, LanguageModel, Message, ModelError, ModelRequest, Role, StopReason, TextStream, ToolSpec, Usage,
};
use crate::nested::{InnerCalls, InnerError, InnerResult};
use crate::observe::{Observer, within};
use crate::ports::{
    AgentEvent, Approver, BuiltinTool, CallContext, CallDecision, CallInfo, EventSink, GateDecision, Hooks,
};
use crate::results::{error_text, fit_budget, render};
use crate::search::{DEFAULT_MAX_LOADED, SEARCH_TOOL, SearchState, StepSearch, ToolSearch, search_spec};
use crate::source::ToolSource;
use crate::transcript::Transcript;

/// The reason reported for a call of the loop's search tool.
const SEARCH_REASON: &str = "the loop's tool search";
/// The most tool calls of one model answer that are run: an answer may ask for thousands
/// (each one decided, run and answered), and the calls beyond are answered as not run.
pub(crate) const MAX_CALLS_PER_STEP: usize = 128;
/// The most of one answer's calls running at once (their results keep the calls' order).
pub(crate) const MAX_CONCURRENT_CALLS: usize = 16;
/// The most of a model call's failure an event carries.
const MODEL_ERROR_CHARS: usize = 2_000;

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
    /// Which tools the model is sent in full, which wait behind tool search, which are left
    /// out: budgets, search modes (global and per server), `always_load` servers.
    pub exposure: tool_pool::ExposureOptions,
    /// Who searches deferred tools: the loop's own search tool, or the provider.
    pub tool_search: ToolSearch,
    /// Most tools kept loaded through search in one session (see [`DEFAULT_MAX_LOADED`]).
    pub max_loaded: usize,
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
            exposure: tool_pool::ExposureOptions::default(),
            tool_search: ToolSearch::Client,
            max_loaded: DEFAULT_MAX_LOADED,
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

/// The agent: a model, tools, policy, an approver, hooks.
pub struct Agent {
    model: Arc<dyn LanguageModel>,
    source: Arc<dyn ToolSource>,
    catalog: Catalog,
    gate: CallGate,
    config: AgentConfig,
    transcript: Option<Mutex<Transcript>>,
    search: Mutex<SearchState>,
    /// The binding of the last step, to report what changed at the next.
    last: Mutex<Option<Arc<Binding>>>,
    /// The last step's exposure and tool list, reused while neither the pool revision nor the
    /// loaded tools change (they are a function of those and the configuration).
    exposed: Mutex<Option<Exposed>>,
    /// What watches tasks, model calls and tool calls (telemetry); `None`: nothing.
    observer: Option<Arc<dyn Observer>>,
}

/// What a pool revision and a set of loaded tools show the model.
struct Exposed {
    /// The pool revision and [`SearchState::loaded_version`] they are for.
    key: (u64, u64),
    exposure: Arc<Exposure>,
    /// The tools sent, while no request holds them.
    tools: Option<Vec<ToolSpec>>,
}

/// What one step shows the model: the binding calls are checked against, each entry's
/// exposure, and the search index when the loop's search tool is offered.
struct View {
    binding: Arc<Binding>,
    exposure: Arc<Exposure>,
    /// The step's search, when the loop's search tool is offered.
    search: Option<StepSearch>,
    /// The key of the [`Exposed`] it was made from.
    key: (u64, u64),
}

impl View {
    /// Whether `name` is the loop's search tool in this step.
    fn is_search(&self, name: &str) -> bool {
        self.search.is_some() && name == SEARCH_TOOL
    }
}

/// One call after the checks: the search tool, or what the gate decided.
// One lives per call for the length of a step; boxing the admission would buy nothing.
#[allow(clippy::large_enum_variant)]
enum Checked {
    Search,
    Gate(Admission),
}

impl std::fmt::Debug for Agent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Agent").field("model", &self.model.name()).field("config", &self.config).finish_non_exhaustive()
    }
}

/// Forwards streamed text as events.
/// Gives each tool call of one answer its own id: a model that repeats one (some
/// OpenAI-compatible servers do) would get two results under it, which providers refuse in the
/// next request, ending the turn. A repeat becomes `{id}_2` (`_3`, ...: the first free one); the
/// message kept and sent back carries the new ids, so each result still matches its call.
fn unique_call_ids(content: &mut [Block]) {
    let mut seen: std::collections::HashSet<String> = std::collections::HashSet::new();
    // The next suffix to try for each repeated id: renaming n repeats of one id looks at each
    // candidate once, not n times.
    let mut next: std::collections::HashMap<String, usize> = std::collections::HashMap::new();
    let mut renamed = 0usize;
    for block in content.iter_mut() {
        let Block::ToolUse { id, .. } = block else { continue };
        if seen.insert(id.clone()) {
            continue;
        }
        let suffix = next.entry(id.clone()).or_insert(2);
        let fresh = loop {
            let candidate = format!("{id}_{suffix}");
            *suffix += 1;
            if !seen.contains(&candidate) {
                break candidate;
            }
        };
        seen.insert(fresh.clone());
        *id = fresh;
        renamed += 1;
    }
    if renamed > 0 {
        tracing::warn!("the model gave {renamed} tool calls an id an earlier call of the same answer had; renamed");
    }
}

/// Streams a model call's text as events, and keeps (up to [`STREAMED_KEPT_BYTES`]) what it
/// streamed: the transcript keeps messages, not deltas, so when the call fails the text already
/// shown is kept with the failure instead of lost.
struct TextEvents<'a> {
    sink: &'a dyn EventSink,
    streamed: Mutex<String>,
}

/// The most of a failed model call's streamed text kept with its failure, in bytes.
const STREAMED_KEPT_BYTES: usize = 256 * 1024;

impl<'a> TextEvents<'a> {
    fn new(sink: &'a dyn EventSink) -> Self {
        Self { sink, streamed: Mutex::new(String::new()) }
    }

    fn into_streamed(self) -> String {
        self.streamed.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl TextStream for TextEvents<'_> {
    fn text_delta(&self, text: &str) {
        self.sink.event(&AgentEvent::Text { text: text.to_owned() });
        let mut streamed = lock(&self.streamed);
        let room = STREAMED_KEPT_BYTES.saturating_sub(streamed.len());
        streamed.push_str(mcp_safety::text::prefix(text, room));
    }
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
        let catalog = Catalog::new(Arc::from(Vec::new()), policy, config.pool.clone());
        Self {
            model,
            source,
            catalog,
            gate: CallGate::default(),
            config,
            transcript: None,
            search: Mutex::new(SearchState::default()),
            last: Mutex::new(None),
            exposed: Mutex::new(None),
            observer: None,
        }
    }

    /// What watches every task, model call and tool call (telemetry's spans).
    pub fn with_observer(mut self, observer: Arc<dyn Observer>) -> Self {
        self.observer = Some(observer);
        self
    }

    /// Who approves `confirm` calls.
    pub fn with_approver(mut self, approver: Arc<dyn Approver>) -> Self {
        self.gate.set_approver(approver);
        self
    }

    /// Hooks around tool calls.
    pub fn with_hooks(mut self, hooks: Arc<dyn Hooks>) -> Self {
        self.gate.set_hooks(hooks);
        self
    }

    /// Built-in tools (they come first in the pool and keep their names on collisions).
    pub fn with_builtins(mut self, builtins: Vec<Arc<dyn BuiltinTool>>) -> Self {
        self.gate = std::mem::take(&mut self.gate).with_builtins(builtins);
        let policy = self.catalog.policy().clone();
        self.catalog = Catalog::new(self.gate.builtin_specs(), policy, self.config.pool.clone());
        // The new catalog numbers its pools from the start again.
        self.exposed = Mutex::new(None);
        self
    }

    /// Append messages and events to this transcript as they happen.
    pub fn with_transcript(mut self, transcript: Transcript) -> Self {
        self.transcript = Some(Mutex::new(transcript));
        self
    }

    /// The pool the next step would use (refreshed now).
    pub async fn pool(&self) -> Result<Arc<Pool>, AgentError> {
        Ok(Arc::clone(self.snapshot().await?.pool()))
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

    /// Refresh the listing and bind it; a new pool (with the next revision) only when
    /// something changed.
    async fn snapshot(&self) -> Result<Arc<Binding>, AgentError> {
        self.catalog.bind(self.source.as_ref()).await.map_err(|e| AgentError::Pool(e.to_string()))
    }

    /// This step's view: the snapshot (renumbered when the model loaded tools since the last
    /// step and no listing changed), its exposure, and the search index if deferred tools wait
    /// behind the loop's search tool.
    async fn view(&self) -> Result<View, AgentError> {
        let mut binding = self.snapshot().await?;
        let mut search = lock(&self.search);
        if search.take_changed() && search.shown == binding.pool().revision() {
            binding = self.catalog.renumber().unwrap_or(binding);
        }
        search.shown = binding.pool().revision();
        let key = (binding.pool().revision(), search.loaded_version());
        let exposure = {
            let mut exposed = lock(&self.exposed);
            match exposed.as_ref() {
                Some(last) if last.key == key => Arc::clone(&last.exposure),
                _ => {
                    let exposure = Arc::new(expose(binding.pool(), &self.config.exposure, &search.loaded()));
                    *exposed = Some(Exposed { key, exposure: Arc::clone(&exposure), tools: None });
                    exposure
                }
            }
        };
        let search = (self.config.tool_search == ToolSearch::Client && exposure.search_active()).then(|| {
            StepSearch::new(Arc::clone(&exposure), search.index(binding.assembled(), binding.pool(), &exposure))
        });
        Ok(View { binding, exposure, search, key })
    }

    /// The tools of `view`: those of the last step when it had the same key (see [`Exposed`]).
    fn step_tools(&self, view: &View) -> Vec<ToolSpec> {
        let kept = lock(&self.exposed).as_mut().filter(|e| e.key == view.key).and_then(|e| e.tools.take());
        kept.unwrap_or_else(|| self.tools(view))
    }

    /// Keeps the tools a request was sent with for the next step of the same key.
    fn keep_tools(&self, key: (u64, u64), tools: Vec<ToolSpec>) {
        if let Some(exposed) = lock(&self.exposed).as_mut().filter(|e| e.key == key) {
            exposed.tools = Some(tools);
        }
    }

    /// The tools the model is sent in this step: loaded entries in pool order, then deferred
    /// ones marked for a provider that searches (native), or the loop's search tool.
    fn tools(&self, view: &View) -> Vec<ToolSpec> {
        let native = self.config.tool_search == ToolSearch::Native;
        let mut tools: Vec<ToolSpec> = view
            .binding
            .pool()
            .iter()
            .filter_map(|e| {
                let defer_loading = match view.exposure.state(e.name()) {
                    Some(ExposureState::Loaded) => false,
                    Some(ExposureState::Deferred) if native => true,
                    _ => return None,
                };
                // The search tool's name is reserved while it is offered.
                if view.is_search(e.name()) {
                    return None;
                }
                // A built-in whose description depends on the pool (code mode's declarations).
                let described = match e.server() {
                    None => self.gate.builtin(e.name()).and_then(|b| b.describe(&view.binding, view.search.as_ref())),
                    Some(_) => None,
                };
                Some(ToolSpec {
                    name: e.name().to_owned(),
                    description: described.unwrap_or_else(|| e.description().to_owned()),
                    input_schema: e.input_schema().clone(),
                    defer_loading,
                })
            })
            .collect();
        if view.search.is_some() {
            tools.push(search_spec());
        }
        tools
    }

    /// Run one user turn to its end: the model is called until it stops asking for tools (or
    /// the step limit). `conversation` gets every message; the transcript too.
    pub async fn run_turn(
        &self,
        conversation: &mut Vec<Message>,
        user_text: &str,
        events: &dyn EventSink,
    ) -> Result<TurnOutcome, AgentError> {
        self.run_turn_with(conversation, Message::user(user_text), events).await
    }

    /// [`Agent::run_turn`] with a whole user message (several blocks, as a server's prompt
    /// gives); its role is taken as the user's whatever it says.
    pub async fn run_turn_with(
        &self,
        conversation: &mut Vec<Message>,
        user: Message,
        events: &dyn EventSink,
    ) -> Result<TurnOutcome, AgentError> {
        let mut watch = self.observer.as_ref().map(|o| o.task());
        let outcome = within(watch.as_deref(), self.turn(conversation, user, events)).await;
        if let (Some(watch), Err(e)) = (watch.as_mut(), &outcome) {
            watch.failed("agent_error", Some(&e.to_string()));
        }
        outcome
    }

    /// [`Agent::run_turn_with`], inside the task's watch.
    async fn turn(
        &self,
        conversation: &mut Vec<Message>,
        user: Message,
        events: &dyn EventSink,
    ) -> Result<TurnOutcome, AgentError> {
        let user = Message { role: Role::User, ..user };
        self.record_message(&user);
        conversation.push(user);
        // The request's copy of the conversation lives for the whole turn and grows with it:
        // a step adds its new messages, and the adapter knows the others by their `Arc`s.
        let mut messages: Vec<Arc<Message>> = conversation.iter().cloned().map(Arc::new).collect();
        let mut usage = Usage::default();
        for step in 1..=self.config.max_steps {
            let view = self.view().await?;
            self.report_pool_change(&view.binding, events);
            let tools = self.step_tools(&view);
            let pool_revision = view.binding.pool().revision();
            self.emit(events, AgentEvent::Step { step, pool_revision, tools: tools.len() });
            let request = ModelRequest {
                model: self.config.model.clone(),
                // Server instructions under the policy of this step's binding.
                system: crate::system_prompt(&self.config.system, &self.source.instructions(), view.binding.policy()),
                messages: std::mem::take(&mut messages),
                tools,
                max_tokens: self.config.max_tokens,
            };
            let mut watch = self.observer.as_ref().map(|o| o.model_call(self.model.name(), &self.config.model));
            let text_events = TextEvents::new(events);
            let response = within(watch.as_deref(), self.model.complete(&request, &text_events)).await;
            if let Some(watch) = watch.as_mut() {
                match &response {
                    Ok(r) => watch.answered(&r.stop_reason, &r.usage),
                    Err(e) => watch.failed("model_error", Some(&e.to_string())),
                }
            }
            drop(watch);
            messages = request.messages;
            self.keep_tools(view.key, request.tools);
            let response = match response {
                Ok(response) => response,
                Err(error) => {
                    // Told (and so kept in the transcript) before the turn ends with it: the
                    // text streamed before the failure was shown, and the record says why it stopped.
                    let text = mcp_safety::text::cut(&error.to_string(), MODEL_ERROR_CHARS);
                    let streamed = text_events.into_streamed();
                    self.emit(events, AgentEvent::ModelError { step, error: text, streamed });
                    return Err(error.into());
                }
            };
            // A model's counts are outside input: summed without overflowing.
            usage.input_tokens = usage.input_tokens.saturating_add(response.usage.input_tokens);
            usage.output_tokens = usage.output_tokens.saturating_add(response.usage.output_tokens);
            let mut content = response.content;
            unique_call_ids(&mut content);
            let assistant = Arc::new(Message { role: Role::Assistant, content });
            self.record_message(&assistant);
            let final_text = assistant.text();
            conversation.push(Message::clone(&assistant));
            // The calls are read from the assistant's message, which goes into the request's
            // copy of the conversation once they have run.
            let calls: Vec<(&str, &str, &Value)> = assistant
                .content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
                    _ => None,
                })
                .collect();
            if calls.is_empty() {
                self.emit(
                    events,
                    AgentEvent::Finished { stop_reason: response.stop_reason.clone(), steps: step, usage },
                );
                return Ok(TurnOutcome { stop_reason: Some(response.stop_reason), steps: step, usage, final_text });
            }
            let results = self.run_calls(&view, &calls, events).await;
            drop(calls);
            messages.push(assistant);
            let message = Message { role: Role::User, content: results };
            self.record_message(&message);
            messages.push(Arc::new(message.clone()));
            conversation.push(message);
        }
        self.emit(events, AgentEvent::StepLimit { steps: self.config.max_steps });
        let final_text =
            conversation.iter().rev().find(|m| m.role == Role::Assistant).map(Message::text).unwrap_or_default();
        Ok(TurnOutcome { stop_reason: None, steps: self.config.max_steps, usage, final_text })
    }

    /// A new revision that added or lost servers is reported (and so recorded in the
    /// transcript): a server that connected late joins here, a failed one leaves.
    fn report_pool_change(&self, binding: &Arc<Binding>, events: &dyn EventSink) {
        let previous = lock(&self.last).replace(Arc::clone(binding));
        let Some(previous) = previous else { return };
        if previous.pool().revision() == binding.pool().revision() {
            return;
        }
        let joined: Vec<String> =
            binding.servers().filter(|s| previous.generation(s).is_none()).map(str::to_owned).collect();
        let left: Vec<String> =
            previous.servers().filter(|s| binding.generation(s).is_none()).map(str::to_owned).collect();
        if !joined.is_empty() || !left.is_empty() {
            self.emit(events, AgentEvent::PoolChanged { revision: binding.pool().revision(), joined, left });
        }
    }

    /// Runs one admitted call, reporting the server's progress as events while it runs.
    /// A built-in makes its own calls through `calls` (code mode).
    async fn run_job(&self, job: Job, info: &CallInfo, events: &dyn EventSink, calls: Option<&dyn InnerCalls>) -> Ran {
        let (progress, mut reports) = tokio::sync::mpsc::channel(mcp_client::PROGRESS_BACKLOG);
        let run = self.gate.run_nested(self.source.as_ref(), job, Some(progress), calls);
        tokio::pin!(run);
        let report = |p: mcp_protocol::ProgressNotificationParams| AgentEvent::Progress {
            id: info.id.clone(),
            name: info.name.clone(),
            progress: p.progress,
            total: p.total,
            message: p.message,
        };
        let ran = loop {
            tokio::select! {
                ran = &mut run => break ran,
                Some(p) = reports.recv() => self.emit(events, report(p)),
            }
        };
        while let Ok(p) = reports.try_recv() {
            self.emit(events, report(p));
        }
        ran
    }

    /// Decide every call in order (asking the approver one at a time), then run the allowed
    /// ones concurrently (at most [`MAX_CONCURRENT_CALLS`] at once); results keep the calls'
    /// order. Calls beyond [`MAX_CALLS_PER_STEP`] are answered as not run.
    async fn run_calls(&self, view: &View, calls: &[(&str, &str, &Value)], events: &dyn EventSink) -> Vec<Block> {
        let snapshot = view.binding.as_ref();
        let client_search = self.config.tool_search == ToolSearch::Client;
        let (calls, beyond) = calls.split_at(calls.len().min(MAX_CALLS_PER_STEP));
        let mut admitted = Vec::with_capacity(calls.len());
        for &(id, name, input) in calls {
            let info = CallInfo {
                id: id.to_owned(),
                name: name.to_owned(),
                server: snapshot.pool().get(name).and_then(|e| e.server().map(str::to_owned)),
                arguments: input.clone(),
            };
            // The call's watch covers its decision (the hooks hear it inside) and its run.
            let watch = self.observer.as_ref().map(|o| o.tool_call(name, id));
            let checked = within(watch.as_deref(), self.check_call(view, &info, client_search)).await;
            let (decision, reason) = match &checked {
                Checked::Search => (CallDecision::Allowed, SEARCH_REASON.to_owned()),
                Checked::Gate(admission) => (admission.decision(), admission.reason()),
            };
            self.emit(
                events,
                AgentEvent::ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: input.clone(),
                    decision,
                    reason,
                },
            );
            admitted.push((info, checked, watch));
        }
        let runs = admitted.into_iter().map(|(info, checked, mut watch)| async move {
            // The failure's kind, for the watch: not run at all, out of time, or failed.
            let run = async {
                match checked {
                    Checked::Search => {
                        let (text, is_error) = self.search(view, &info.arguments);
                        (text, is_error.then_some("tool_error"))
                    }
                    Checked::Gate(Admission::Run { job, .. }) => {
                        let calls = StepCalls {
                            agent: self,
                            binding: &view.binding,
                            search: view.search.as_ref(),
                            parent: &info.id,
                            events,
                        };
                        match self.run_job(job, &info, events, Some(&calls)).await {
                            Ran::Builtin(Ok(text)) => (text, None),
                            Ran::Mcp(Ok(result)) => (render(&result), result.is_error().then_some("tool_error")),
                            Ran::Builtin(Err(message)) => (error_text(&message), Some("tool_error")),
                            Ran::Mcp(Err(error)) => {
                                let kind = if matches!(error, crate::SourceError::Timeout { .. }) {
                                    "timeout"
                                } else {
                                    "tool_error"
                                };
                                (error_text(&error.to_string()), Some(kind))
                            }
                            Ran::Refused(refusal) => (error_text(&refusal.to_string()), Some("refused")),
                        }
                    }
                    Checked::Gate(not_run) => {
                        (error_text(&not_run.not_run_text().unwrap_or_default()), Some("refused"))
                    }
                }
            };
            let (text, failure) = within(watch.as_deref(), run).await;
            if let (Some(kind), Some(watch)) = (failure, watch.as_mut()) {
                watch.failed(kind, None);
            }
            (info, text, failure.is_some())
        });
        let finished: Vec<_> = futures_util::StreamExt::collect(futures_util::StreamExt::buffered(
            futures_util::stream::iter(runs),
            MAX_CONCURRENT_CALLS,
        ))
        .await;
        let mut blocks = Vec::with_capacity(finished.len() + beyond.len());
        for (info, text, is_error) in finished {
            let (text, is_error) = match self.report_result(&info, text, is_error, events).await {
                Ok(text) => (text, is_error),
                Err(why) => (error_text(&why), true),
            };
            blocks.push(Block::ToolResult { tool_use_id: info.id, content: text, is_error });
        }
        if !beyond.is_empty() {
            let total = calls.len() + beyond.len();
            let text = error_text(&format!(
                "not run: the answer asked for {total} tool calls; at most {MAX_CALLS_PER_STEP} are run in one step. \
                 Ask for the rest in the next step."
            ));
            tracing::warn!("a model answer asked for {total} tool calls; {} were not run", beyond.len());
            // Each is told as the calls that ran are (hooks, events, transcript), as rejected.
            let reason = format!("not run: at most {MAX_CALLS_PER_STEP} calls of one answer run");
            for &(id, name, input) in beyond {
                let info = CallInfo {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    server: snapshot.pool().get(name).and_then(|e| e.server().map(str::to_owned)),
                    arguments: input.clone(),
                };
                if let Err(why) = self.gate.tell_hooks(&info, &GateDecision::new(CallDecision::Rejected, &reason)) {
                    tracing::warn!("{why}");
                }
                let call = AgentEvent::ToolCall {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    arguments: input.clone(),
                    decision: CallDecision::Rejected,
                    reason: reason.clone(),
                };
                self.emit(events, call);
                let result = AgentEvent::ToolResult {
                    id: id.to_owned(),
                    name: name.to_owned(),
                    is_error: true,
                    content: text.clone(),
                };
                self.emit(events, result);
                blocks.push(Block::ToolResult { tool_use_id: id.to_owned(), content: text.clone(), is_error: true });
            }
        }
        blocks
    }

    /// What the gate (or the loop, for its search tool and tools it never showed) decides of
    /// one call.
    async fn check_call(&self, view: &View, info: &CallInfo, client_search: bool) -> Checked {
        let (id, name, input) = (info.id.as_str(), info.name.as_str(), &info.arguments);
        if view.is_search(name) {
            let decision = GateDecision::new(CallDecision::Allowed, SEARCH_REASON);
            match self.gate.tell_hooks(info, &decision) {
                Ok(()) => Checked::Search,
                Err(why) => Checked::Gate(Admission::Refused(Refusal::Blocked { name: name.to_owned(), why })),
            }
        } else if let Some(hidden) = view.exposure.get(name).filter(|t| t.state == ExposureState::Hidden) {
            // Never shown, so never called: the model can only have guessed the name.
            let refusal = Refusal::NotExposed { name: name.to_owned(), why: hidden.reason.to_string() };
            Checked::Gate(self.gate.report(info, Admission::Refused(refusal), None))
        } else if client_search && view.exposure.state(name) == Some(ExposureState::Deferred) {
            // Shown only through search: the model cannot know its schema yet.
            let refusal = Refusal::NotLoaded { name: name.to_owned(), search: SEARCH_TOOL.to_owned() };
            Checked::Gate(self.gate.report(info, Admission::Refused(refusal), None))
        } else {
            let call = CallRequest { id, name, arguments: input };
            Checked::Gate(
                self.gate.admit_as(&view.binding, self.source.as_ref(), call, Some(info), &CallContext::DEFAULT).await,
            )
        }
    }

    /// The text the model would read of a result, within the result budget (saved when
    /// longer), told to the hooks and reported as the call's result.
    async fn report_result(
        &self,
        info: &CallInfo,
        text: String,
        is_error: bool,
        events: &dyn EventSink,
    ) -> Result<String, String> {
        let text = fit_budget(
            text,
            self.config.result_budget,
            self.config.session_dir.as_deref().map(|d| d.join("tool-results")).as_deref(),
            &info.id,
        );
        let finished = self.gate.finished(info, &text, is_error).await;
        let (content, is_error) = match &finished {
            Ok(()) => (text.clone(), is_error),
            Err(why) => (error_text(why), true),
        };
        self.emit(events, AgentEvent::ToolResult { id: info.id.clone(), name: info.name.clone(), is_error, content });
        finished.map(|()| text)
    }

    /// One call of the loop's search tool against this step's index.
    fn search(&self, view: &View, input: &Value) -> (String, bool) {
        let Some(search) = &view.search else {
            return (error_text(&format!("{SEARCH_TOOL} is not offered in this step")), true);
        };
        lock(&self.search).run(search.index(), &view.exposure, input, self.config.max_loaded)
    }
}

/// The calls a built-in makes for its call `parent` in one step (code mode's script): each
/// through the gate under the step's binding, reported like the model's own.
struct StepCalls<'a> {
    agent: &'a Agent,
    binding: &'a Arc<Binding>,
    search: Option<&'a StepSearch>,
    parent: &'a str,
    events: &'a dyn EventSink,
}

#[async_trait::async_trait]
impl InnerCalls for StepCalls<'_> {
    fn binding(&self) -> &Arc<Binding> {
        self.binding
    }

    fn parent(&self) -> &str {
        self.parent
    }

    fn search(&self) -> Option<&StepSearch> {
        self.search
    }

    async fn find(&self, id: &str, query: &str, limit: Option<usize>) -> Result<SearchResults, InnerError> {
        let agent = self.agent;
        let mut arguments = serde_json::json!({ "query": query });
        if let Some(limit) = limit {
            arguments["limit"] = limit.into();
        }
        let info = CallInfo { id: id.to_owned(), name: SEARCH_TOOL.to_owned(), server: None, arguments };
        // As a call of the model's search tool: the hooks hear it (and may block it), and it is
        // reported, so the transcript holds it under the script's id.
        let admitted = match self.search {
            None => Err(Refusal::NotExposed {
                name: SEARCH_TOOL.to_owned(),
                why: "no tool waits behind search in this step".to_owned(),
            }),
            Some(search) => {
                let decision = GateDecision::new(CallDecision::Allowed, SEARCH_REASON);
                match agent.gate.tell_hooks(&info, &decision) {
                    Ok(()) => Ok(search),
                    Err(why) => Err(Refusal::Blocked { name: SEARCH_TOOL.to_owned(), why }),
                }
            }
        };
        let (decision, reason) = match &admitted {
            Ok(_) => (CallDecision::Allowed, SEARCH_REASON.to_owned()),
            Err(refusal) => (refusal.decision(), refusal.reason()),
        };
        agent.emit(
            self.events,
            AgentEvent::ToolCall {
                id: id.to_owned(),
                name: info.name.clone(),
                arguments: info.arguments.clone(),
                decision,
                reason,
            },
        );
        let (outcome, text, is_error) = match admitted {
            Ok(search) => {
                let results = search.find(query, limit);
                let text = search.describe(&results);
                (Ok(results), text, false)
            }
            Err(refusal) => {
                let text = error_text(&refusal.to_string());
                (Err(InnerError::Refused(refusal)), text, true)
            }
        };
        match agent.report_result(&info, text, is_error, self.events).await {
            Ok(_) => outcome,
            Err(why) => Err(InnerError::Withheld(why)),
        }
    }

    async fn call(&self, id: &str, name: &str, arguments: &Value) -> InnerResult {
        let agent = self.agent;
        let entry = self.binding.pool().get(name);
        let info = CallInfo {
            id: id.to_owned(),
            name: name.to_owned(),
            server: entry.as_ref().and_then(|e| e.server().map(str::to_owned)),
            arguments: arguments.clone(),
        };
        let admission = if entry.as_ref().is_some_and(|e| e.server().is_none()) {
            // A built-in (the caller itself, or search) is never reached from inside one.
            let refusal = Refusal::NotExposed {
                name: name.to_owned(),
                why: "built-in tools cannot be called from a script".to_owned(),
            };
            agent.gate.report(&info, Admission::Refused(refusal), None)
        } else {
            let context = CallContext::new().with_parent(self.parent);
            let call = CallRequest { id, name, arguments };
            agent.gate.admit_as(self.binding, agent.source.as_ref(), call, Some(&info), &context).await
        };
        agent.emit(
            self.events,
            AgentEvent::ToolCall {
                id: id.to_owned(),
                name: name.to_owned(),
                arguments: arguments.clone(),
                decision: admission.decision(),
                reason: admission.reason(),
            },
        );
        // A script that returns without awaiting this call drops it: its record still ends.
        let mut unanswered = Unanswered { agent, events: self.events, info: Some(&info) };
        let outcome: InnerResult = match admission {
            Admission::Run { job, .. } => match agent.run_job(job, &info, self.events, None).await {
                Ran::Mcp(Ok(result)) => Ok(result),
                Ran::Mcp(Err(error)) => Err(InnerError::Source(error)),
                Ran::Refused(refusal) => Err(InnerError::Refused(refusal)),
                Ran::Builtin(_) => Err(InnerError::Refused(Refusal::NoHandler { name: name.to_owned() })),
            },
            Admission::Refused(refusal) => Err(InnerError::Refused(refusal)),
            Admission::Deferred { name, reason } => Err(InnerError::Deferred { name, reason }),
        };
        unanswered.info = None;
        let (text, is_error) = match &outcome {
            Ok(result) => (render(result), result.is_error()),
            Err(error) => (error_text(&error.to_string()), true),
        };
        match agent.report_result(&info, text, is_error, self.events).await {
            Ok(_) => outcome,
            Err(why) => Err(InnerError::Withheld(why)),
        }
    }
}

/// A script's call dropped before it answered (the script returned without awaiting it, or was
/// stopped): told as a result like any other, so the transcript does not hold a call that was
/// allowed, sent, and never ended.
struct Unanswered<'a> {
    agent: &'a Agent,
    events: &'a dyn EventSink,
    /// The call, until it answered.
    info: Option<&'a CallInfo>,
}

impl Drop for Unanswered<'_> {
    fn drop(&mut self) {
        if let Some(info) = self.info.take() {
            let content =
                error_text("the script ended before this call answered; it was cancelled, and may or may not have run");
            self.agent.emit(
                self.events,
                AgentEvent::ToolResult { id: info.id.clone(), name: info.name.clone(), is_error: true, content },
            );
        }
    }
}
