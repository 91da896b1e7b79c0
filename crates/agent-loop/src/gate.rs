//! The one gate every tool call passes, whoever asked for it: the model in the loop, or a
//! person with `mcp-harness call`.
//!
//! A [`Catalog`] binds what the caller was shown: a [`Binding`] is one immutable pool snapshot
//! and the listing generation of each server it was built from. [`CallGate::admit`] checks a
//! call against that binding, in order: the name is in the pool (else why not: unknown, with
//! close matches, or denied by policy); its server's tools have not changed since; the
//! arguments match the schema that was shown; policy (and the approver, for `confirm`);
//! hooks. [`CallGate::run`] checks the server's generation once more at the last moment and
//! sends the call.

use mcp_safety::lock;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex};

use futures_util::FutureExt as _;

use mcp_protocol::CallToolResult;
use policy::{Decision, DecisionSource, Policy};
use serde_json::{Map, Value};
use tool_pool::{ArgumentChecker, CheckError, Origin, Pool, assemble};

use crate::nested::InnerCalls;
use crate::ports::{
    ApprovalAnswer, ApprovalRequest, Approver, BuiltinTool, CallContext, CallDecision, CallInfo, GateDecision,
    HookVerdict, Hooks, NoHooks, RefuseAll,
};
use crate::source::{BoundCall, Departure, DepartureState, ToolSource};
use crate::source_error::{Operation, SourceError};

/// How many names an unknown-tool refusal lists at most.
const LISTED_NAMES: usize = 20;
/// How many close matches an unknown-tool refusal suggests at most.
const SUGGESTIONS: usize = 3;
/// Most approvals "yes for this session" a gate keeps, over all its callers; past it the
/// person is asked again (a gateway serving many sessions cannot make it grow without bound).
pub const MAX_SESSION_APPROVALS: usize = 10_000;

/// What a caller was shown: one pool snapshot and the generations of the server listings it
/// was built from. Immutable; a call is checked against the binding it was prepared with.
#[derive(Debug)]
pub struct Binding {
    pool: Arc<Pool>,
    generations: BTreeMap<String, u64>,
    /// The policy the pool was assembled under (built-ins that decide by their input use it).
    policy: Arc<Policy>,
    /// The revision the pool was assembled under; [`Catalog::renumber`] keeps it.
    assembled: u64,
    /// Servers whose tools an earlier binding had and this one has not, with the names they
    /// had: a call to one of them is told why its server left, not "unknown tool".
    departed: Arc<BTreeMap<String, BTreeSet<String>>>,
}

impl Binding {
    /// The pool snapshot.
    pub fn pool(&self) -> &Arc<Pool> {
        &self.pool
    }

    /// The generation of `server`'s listing this binding was built from.
    pub fn generation(&self, server: &str) -> Option<u64> {
        self.generations.get(server).copied()
    }

    /// The policy the pool was assembled under.
    pub fn policy(&self) -> &Arc<Policy> {
        &self.policy
    }

    /// Why `name` is not in the pool (`Refusal::Denied` with the rule that hid it, or
    /// `Refusal::UnknownTool`), as the gate refuses it; for a front that answers such names
    /// itself and still reports the decision. `source` says why a server that left did
    /// (`Refusal::ServerGone`).
    pub fn missing(&self, source: &dyn ToolSource, name: &str) -> Refusal {
        missing(self, source, name)
    }

    /// The revision the pool's entries were assembled under: equal for two bindings exactly
    /// when their pools have the same entries (a renumbered pool keeps it).
    pub fn assembled(&self) -> u64 {
        self.assembled
    }

    /// The servers whose tools this binding was built from.
    pub fn servers(&self) -> impl Iterator<Item = &str> {
        self.generations.keys().map(String::as_str)
    }
}

/// Builds bindings from a [`ToolSource`]: a new pool revision only when some server's listing
/// generation changed, else the same binding again.
#[derive(Debug)]
pub struct Catalog {
    builtins: Arc<[tool_pool::BuiltinTool]>,
    policy: Arc<Policy>,
    options: tool_pool::Options,
    state: Mutex<CatalogState>,
}

#[derive(Debug, Default)]
struct CatalogState {
    revision: u64,
    current: Option<Arc<Binding>>,
    /// The version of the source's policy the current binding was built under.
    policy_version: Option<u64>,
}

/// The tool pool could not be assembled (strict options).
#[derive(Debug, thiserror::Error)]
#[error("the tool pool could not be assembled: {0}")]
pub struct CatalogError(String);

impl Catalog {
    /// A catalog of these built-in tools (they come first) and the servers' tools, under `policy`.
    pub fn new(builtins: Arc<[tool_pool::BuiltinTool]>, policy: Policy, options: tool_pool::Options) -> Self {
        Self { builtins, policy: Arc::new(policy), options, state: Mutex::new(CatalogState::default()) }
    }

    /// The policy the pools are built under.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// The current binding again under the next revision, with the same pool and
    /// generations: what the model is shown changed (it loaded tools through search) though no
    /// listing did. `None` before the first [`bind`](Self::bind).
    pub fn renumber(&self) -> Option<Arc<Binding>> {
        let mut state = lock(&self.state);
        let current = state.current.as_ref()?;
        let revision = state.revision + 1;
        let binding = Arc::new(Binding {
            pool: Arc::new(current.pool.renumbered(revision)),
            generations: current.generations.clone(),
            policy: Arc::clone(&current.policy),
            assembled: current.assembled,
            departed: Arc::clone(&current.departed),
        });
        state.revision = revision;
        state.current = Some(Arc::clone(&binding));
        Some(binding)
    }

    /// Refreshes the source's listing and binds it.
    /// A new revision when a server's generation or the source's policy changed.
    pub async fn bind(&self, source: &dyn ToolSource) -> Result<Arc<Binding>, CatalogError> {
        let listing = source.refresh().await;
        let mut state = lock(&self.state);
        let policy_version = listing.policy.as_ref().map(|(version, _)| *version);
        if let Some(current) = &state.current
            && current.generations == listing.generations
            && state.policy_version == policy_version
        {
            return Ok(Arc::clone(current));
        }
        state.revision += 1;
        let policy = Arc::clone(listing.policy.as_ref().map_or(&self.policy, |(_, policy)| policy));
        let pool = assemble(&self.builtins, &listing.servers, &policy, &self.options, state.revision)
            .map_err(|e| CatalogError(e.to_string()))?;
        let departed = departed(state.current.as_deref(), &listing.generations);
        let binding = Arc::new(Binding {
            pool: Arc::new(pool),
            generations: listing.generations,
            policy,
            assembled: state.revision,
            departed,
        });
        state.current = Some(Arc::clone(&binding));
        state.policy_version = policy_version;
        Ok(binding)
    }
}

/// How many departed servers a binding remembers (servers removed for good stay departed).
const MAX_DEPARTED: usize = 256;

/// The departed servers of the binding after `previous`, whose listing has `generations`:
/// the previous ones still away, and those `previous` had that are not listed now.
fn departed(
    previous: Option<&Binding>,
    generations: &BTreeMap<String, u64>,
) -> Arc<BTreeMap<String, BTreeSet<String>>> {
    let Some(previous) = previous else { return Arc::default() };
    let left: Vec<&str> = previous.servers().filter(|s| !generations.contains_key(*s)).collect();
    if left.is_empty() && !previous.departed.keys().any(|s| generations.contains_key(s)) {
        return Arc::clone(&previous.departed);
    }
    let mut departed = (*previous.departed).clone();
    departed.retain(|server, _| !generations.contains_key(server));
    for server in left {
        let names = previous.pool.iter().filter(|e| e.server() == Some(server)).map(|e| e.name().to_owned());
        departed.insert(server.to_owned(), names.collect());
    }
    while departed.len() > MAX_DEPARTED {
        departed.pop_first();
    }
    Arc::new(departed)
}

/// One call as it was asked for.
#[derive(Debug, Clone, Copy)]
pub struct CallRequest<'a> {
    /// The caller's id of the call (the model's tool-use id).
    pub id: &'a str,
    /// The model-visible name.
    pub name: &'a str,
    /// The arguments.
    pub arguments: &'a Value,
}

/// Why a call was not run. Its text is what the model reads (after `Error: `) and what a
/// person sees.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Refusal {
    /// No such name in the binding's pool.
    #[error("{}", unknown_text(.name, *.revision, .suggestions, .available))]
    UnknownTool {
        /// The name asked for.
        name: String,
        /// The pool revision.
        revision: u64,
        /// Close matches.
        suggestions: Vec<String>,
        /// Some of the names that do exist.
        available: Vec<String>,
    },
    /// The name belongs to a tool policy denies (denied tools are never in the pool).
    #[error(
        "there is no tool named {name:?} to call: {who} is denied by {why}; nothing was called",
        why = denial_source(.rule)
    )]
    Denied {
        /// The name asked for.
        name: String,
        /// Which tool it is (`tool "x" of server "y"`).
        who: String,
        /// The rule that denies it.
        rule: DecisionSource,
    },
    /// The server's tools changed after the caller was shown them.
    #[error(
        "the tools of server {server:?} changed after you were shown them (tool list revision {revision}); \
         {name} was not called. Look at the updated tool list and try again."
    )]
    Stale {
        /// The server.
        server: String,
        /// The name asked for.
        name: String,
        /// The revision the caller was shown.
        revision: u64,
    },
    /// The arguments do not match the input schema the caller was shown.
    #[error("the arguments for {name} do not match its input schema:\n- {}", .problems.join("\n- "))]
    BadArguments {
        /// The name asked for.
        name: String,
        /// Each problem, one line.
        problems: Vec<String>,
    },
    /// Policy said `confirm` and the call was not approved.
    #[error("the call to {name} was not run: {reason}.")]
    NotApproved {
        /// The name asked for.
        name: String,
        /// Who refused, or why nobody could be asked.
        reason: String,
    },
    /// A hook blocked it.
    #[error("the call to {name} was blocked: {why}")]
    Blocked {
        /// The name asked for.
        name: String,
        /// The hook's reason.
        why: String,
    },
    /// The tool waits behind tool search and the model has not loaded it.
    #[error(
        "{name} is not loaded yet: search for it first with the {search} tool (a query describing what you \
         need, or select:{name}), then call it in your next step; nothing was called"
    )]
    NotLoaded {
        /// The name asked for.
        name: String,
        /// The search tool's name.
        search: String,
    },
    /// The tool is in the pool but never shown to the model (over a budget).
    #[error("{name} is not offered to you ({why}); nothing was called")]
    NotExposed {
        /// The name asked for.
        name: String,
        /// Why it is hidden.
        why: String,
    },
    /// The tool's server left the pool (it exited, is being restarted, failed, needs a login, is
    /// disabled): which server, why, and whether it is coming back.
    #[error("{name} cannot be called now: its server {server:?} {departure}; nothing was called")]
    ServerGone {
        /// The name asked for.
        name: String,
        /// The server it belonged to.
        server: String,
        /// Why it left, as the source knows it.
        departure: Departure,
    },
    /// A built-in tool in the pool has no handler (a wiring mistake of the host).
    #[error("built-in tool {name} has no handler")]
    NoHandler {
        /// The name asked for.
        name: String,
    },
}

fn unknown_text(name: &str, revision: u64, suggestions: &[String], available: &[String]) -> String {
    if suggestions.is_empty() {
        let listed = if available.is_empty() { "none".to_owned() } else { available.join(", ") };
        format!(
            "unknown tool {name:?}; no tool named {name:?} is in this session's tool list (revision {revision}); \
             available: {listed}"
        )
    } else {
        format!(
            "unknown tool {name:?}; did you mean {}? (no tool named {name:?} is in this session's tool list, \
             revision {revision})",
            suggestions.join(", ")
        )
    }
}

fn denial_source(rule: &DecisionSource) -> String {
    match rule {
        DecisionSource::Default => "the policy's default".to_owned(),
        rule => format!("policy {rule}"),
    }
}

impl Refusal {
    /// How the refusal is reported as a decision.
    pub fn decision(&self) -> CallDecision {
        match self {
            Refusal::NotApproved { .. } | Refusal::Denied { .. } => CallDecision::Refused,
            Refusal::Blocked { .. } => CallDecision::Blocked,
            _ => CallDecision::Rejected,
        }
    }

    /// The short reason shown beside the call (the full text is the refusal itself).
    pub fn reason(&self) -> String {
        match self {
            Refusal::NotApproved { reason, .. } => reason.clone(),
            Refusal::Blocked { why, .. } => why.clone(),
            other => other.to_string(),
        }
    }
}

/// A call that passed the gate, ready to run.
#[derive(Clone)]
#[non_exhaustive]
pub enum Job {
    /// A built-in tool.
    Builtin {
        /// Its handler.
        tool: Arc<dyn BuiltinTool>,
        /// Its input.
        input: Value,
        /// The policy it was admitted under.
        policy: Arc<Policy>,
    },
    /// A tool of an MCP server.
    Mcp {
        /// The caller's id of the call.
        id: String,
        /// The server.
        server: String,
        /// The tool's own (raw) name.
        tool: String,
        /// The arguments.
        arguments: Option<Map<String, Value>>,
        /// The server's listing generation the call was checked against.
        generation: Option<u64>,
        /// The pool revision the caller was shown.
        revision: u64,
        /// The model-visible name.
        name: String,
        /// The tool's output schema as listed, which its structured content must match.
        output_schema: Option<Box<Value>>,
    },
}

impl std::fmt::Debug for Job {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Job::Builtin { input, .. } => f.debug_struct("Builtin").field("input", input).finish_non_exhaustive(),
            Job::Mcp { server, tool, .. } => {
                f.debug_struct("Mcp").field("server", server).field("tool", tool).finish_non_exhaustive()
            }
        }
    }
}

/// What the gate decided about one call.
#[derive(Debug)]
#[non_exhaustive]
pub enum Admission {
    /// Run it.
    Run {
        /// Allowed by policy or approved by a person.
        decision: CallDecision,
        /// Why (the rule, the approval).
        reason: String,
        /// What to run.
        job: Job,
    },
    /// Do not run it.
    Refused(Refusal),
    /// Not now: the approver asks the person out of band ([`ApprovalAnswer::Deferred`]); the
    /// caller answers the call accordingly (an `input_required` round) and asks again.
    Deferred {
        /// The name asked for.
        name: String,
        /// What the approver said happens next.
        reason: String,
    },
}

impl Admission {
    /// How the call was decided, as events and hooks report it.
    pub fn decision(&self) -> CallDecision {
        match self {
            Admission::Run { decision, .. } => decision.clone(),
            Admission::Refused(refusal) => refusal.decision(),
            Admission::Deferred { .. } => CallDecision::Deferred,
        }
    }

    /// Why, in short (the rule, the approval, the refusal).
    pub fn reason(&self) -> String {
        match self {
            Admission::Run { reason, .. } => reason.clone(),
            Admission::Refused(refusal) => refusal.reason(),
            Admission::Deferred { reason, .. } => reason.clone(),
        }
    }

    /// [`reason`](Self::reason), borrowed where it can be.
    fn reason_text(&self) -> std::borrow::Cow<'_, str> {
        match self {
            Admission::Run { reason, .. } | Admission::Deferred { reason, .. } => reason.as_str().into(),
            Admission::Refused(refusal) => refusal.reason().into(),
        }
    }

    /// What the caller reads when the call did not run (`None` for a call to run): the
    /// refusal, or that the call waits for approval.
    pub fn not_run_text(&self) -> Option<String> {
        match self {
            Admission::Run { .. } => None,
            Admission::Refused(refusal) => Some(refusal.to_string()),
            Admission::Deferred { name, reason } => {
                Some(format!("the call to {name} was not run: it waits for approval ({reason})"))
            }
        }
    }
}

/// What running a job gave.
#[derive(Debug)]
#[non_exhaustive]
pub enum Ran {
    /// A built-in tool's text, or its failure.
    Builtin(Result<String, String>),
    /// An MCP tool's result, or why there is none (the server failed, the call timed out).
    Mcp(Result<Box<CallToolResult>, SourceError>),
    /// Not sent after all: its server changed at the last moment.
    Refused(Refusal),
}

/// The checks every call passes, with the approver, the hooks and the built-in tools' handlers.
pub struct CallGate {
    checker: ArgumentChecker,
    approver: Arc<dyn Approver>,
    hooks: Arc<dyn Hooks>,
    builtins: Vec<Arc<dyn BuiltinTool>>,
    /// Approvals "yes for this session", per caller (`None`: the default caller), by tool (and
    /// input rule, see `admit`).
    approved_for_session: Mutex<SessionApprovals>,
}

/// Approvals "yes for this session", per caller, with their total count (bounded by
/// [`MAX_SESSION_APPROVALS`]).
#[derive(Debug, Default)]
struct SessionApprovals {
    by_caller: HashMap<Option<Arc<str>>, HashSet<String>>,
    total: usize,
}

impl SessionApprovals {
    fn contains(&self, caller: &Option<Arc<str>>, key: &str) -> bool {
        self.by_caller.get(caller).is_some_and(|keys| keys.contains(key))
    }

    fn insert(&mut self, caller: &Option<Arc<str>>, key: String) {
        if self.total >= MAX_SESSION_APPROVALS {
            return;
        }
        if self.by_caller.entry(caller.clone()).or_default().insert(key) {
            self.total += 1;
        }
    }

    fn forget(&mut self, caller: &str) {
        let caller: Option<Arc<str>> = Some(Arc::from(caller));
        if let Some(keys) = self.by_caller.remove(&caller) {
            self.total -= keys.len();
        }
    }
}

impl std::fmt::Debug for CallGate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CallGate").field("builtins", &self.builtins.len()).finish_non_exhaustive()
    }
}

impl Default for CallGate {
    fn default() -> Self {
        Self::new(Arc::new(RefuseAll), Arc::new(NoHooks))
    }
}

impl CallGate {
    /// A gate that asks `approver` about `confirm` calls and runs `hooks` around allowed ones.
    pub fn new(approver: Arc<dyn Approver>, hooks: Arc<dyn Hooks>) -> Self {
        Self {
            checker: ArgumentChecker::new(),
            approver,
            hooks,
            builtins: Vec::new(),
            approved_for_session: Mutex::new(SessionApprovals::default()),
        }
    }

    /// The handlers of built-in tools.
    pub fn with_builtins(mut self, builtins: Vec<Arc<dyn BuiltinTool>>) -> Self {
        self.builtins = builtins;
        self
    }

    /// The handler of the built-in tool named `name`.
    pub(crate) fn builtin(&self, name: &str) -> Option<&Arc<dyn BuiltinTool>> {
        self.builtins.iter().find(|b| b.spec().name == name)
    }

    /// The specs of the built-in tools, for a [`Catalog`].
    pub fn builtin_specs(&self) -> Arc<[tool_pool::BuiltinTool]> {
        self.builtins.iter().map(|b| b.spec()).collect::<Vec<_>>().into()
    }

    /// Replaces the approver.
    pub fn set_approver(&mut self, approver: Arc<dyn Approver>) {
        self.approver = approver;
    }

    /// Replaces the hooks.
    pub fn set_hooks(&mut self, hooks: Arc<dyn Hooks>) {
        self.hooks = hooks;
    }

    /// Forgets the approvals "yes for this session" of `caller` (its session ended).
    pub fn forget_caller(&self, caller: &str) {
        lock(&self.approved_for_session).forget(caller);
    }

    /// The checks, in order: the name is in the binding's pool; its server's tools have not
    /// changed since; the arguments match the schema that was shown; policy (and the approver);
    /// hooks. Asked by the default caller ([`CallContext::DEFAULT`]).
    pub async fn admit(&self, binding: &Arc<Binding>, source: &dyn ToolSource, call: CallRequest<'_>) -> Admission {
        self.admit_as(binding, source, call, None, &CallContext::DEFAULT).await
    }

    /// [`admit`](Self::admit) for the caller `context` names: a `confirm` decision goes to
    /// its approver (else the gate's) and is told who asks; approvals "yes for this session"
    /// are that caller's alone; hooks see its script as the call's parent.
    pub async fn admit_with(
        &self,
        binding: &Arc<Binding>,
        source: &dyn ToolSource,
        call: CallRequest<'_>,
        context: &CallContext,
    ) -> Admission {
        self.admit_as(binding, source, call, None, context).await
    }

    /// [`admit_with`](Self::admit_with), with the call as hooks see it when the caller has it
    /// already (the loop keeps one per call; it is not built twice). Every decision is told to
    /// the hooks ([`Hooks::decided`]).
    pub(crate) async fn admit_as(
        &self,
        binding: &Arc<Binding>,
        source: &dyn ToolSource,
        call: CallRequest<'_>,
        info: Option<&CallInfo>,
        context: &CallContext,
    ) -> Admission {
        let built;
        let info = match info {
            Some(info) => info,
            None => {
                built = CallInfo {
                    id: call.id.to_owned(),
                    name: call.name.to_owned(),
                    server: binding.pool.get(call.name).and_then(|e| e.server().map(str::to_owned)),
                    arguments: call.arguments.clone(),
                };
                &built
            }
        };
        let (admission, rule) = self.check(binding, source, call, info, context).await;
        self.report(info, admission, rule.as_deref())
    }

    /// The checks of [`admit_as`](Self::admit_as), and the policy rule that decided, once
    /// policy did.
    async fn check(
        &self,
        binding: &Binding,
        source: &dyn ToolSource,
        call: CallRequest<'_>,
        info: &CallInfo,
        context: &CallContext,
    ) -> (Admission, Option<String>) {
        let CallRequest { id, name, arguments } = call;
        let refused = |refusal: Refusal| (Admission::Refused(refusal), None);
        let pool = &binding.pool;
        let Some(entry) = pool.get(name) else {
            return refused(missing(binding, source, name));
        };
        if let Some(server) = entry.server()
            && source.settled_generation(server).await != binding.generation(server)
        {
            return refused(Refusal::Stale {
                server: server.to_owned(),
                name: name.to_owned(),
                revision: pool.revision(),
            });
        }
        match self.checker.check(pool, name, arguments) {
            Ok(()) => {}
            Err(CheckError::Problems(problems)) => {
                let problems = problems.iter().map(|p| mcp_safety::text::one_line(&p.to_string(), 500)).collect();
                return refused(Refusal::BadArguments { name: name.to_owned(), problems });
            }
            Err(_) => return refused(missing(binding, source, name)),
        }
        let handler = match entry.origin() {
            Origin::Builtin(spec) => match self.builtins.iter().find(|b| b.spec().name == spec.name) {
                Some(tool) => Some(tool),
                None => return refused(Refusal::NoHandler { name: name.to_owned() }),
            },
            Origin::Mcp { .. } => None,
        };
        // A built-in that reads something policy names (a resource) may be stricter for this
        // input than the tool itself is; at equal strictness the input's rule, the more
        // specific, is the one reported and asked about.
        let mut verdict = entry.verdict().clone();
        let mut approval_key = name.to_owned();
        if let Some(input) = handler.and_then(|h| h.decide_input(&binding.policy, arguments))
            && input.decision >= verdict.decision
        {
            // An approval "for the session" of the input's rule covers only what it names, and
            // one of the tool does not cover it.
            approval_key = format!("{name}\n{}", input.source);
            verdict = input;
        }
        let rule = verdict.source.to_string();
        let decided = |admission: Admission| (admission, Some(rule.clone()));
        let (decision, reason) = match verdict.decision {
            Decision::Allow => (CallDecision::Allowed, format!("allowed by {rule}")),
            // Denied tools are not in the pool; a deny here is an input's (or a pool bug).
            Decision::Deny => {
                let reason = format!("denied by {rule}");
                return decided(Admission::Refused(Refusal::NotApproved { name: name.to_owned(), reason }));
            }
            Decision::Confirm if lock(&self.approved_for_session).contains(&context.caller, &approval_key) => {
                (CallDecision::Approved, "approved earlier in this session".to_owned())
            }
            Decision::Confirm => {
                let mut request = ApprovalRequest::new(
                    name,
                    entry.server().map(str::to_owned),
                    entry.tool(),
                    arguments.clone(),
                    rule.clone(),
                );
                request.caller = context.caller.as_deref().map(str::to_owned);
                request.script = context.parent.as_deref().map(str::to_owned);
                let approver = context.approver.as_ref().unwrap_or(&self.approver);
                match approver.approve(&request).await {
                    ApprovalAnswer::Yes => (CallDecision::Approved, format!("approved (asked by {rule})")),
                    ApprovalAnswer::YesForSession => {
                        lock(&self.approved_for_session).insert(&context.caller, approval_key);
                        (CallDecision::Approved, format!("approved for this session (asked by {rule})"))
                    }
                    ApprovalAnswer::No => {
                        let reason = format!("refused by the user (asked by {rule})");
                        return decided(Admission::Refused(Refusal::NotApproved { name: name.to_owned(), reason }));
                    }
                    ApprovalAnswer::Unanswered(why) => {
                        let reason = format!("{name} needs confirmation ({verdict}) and {why}");
                        return decided(Admission::Refused(Refusal::NotApproved { name: name.to_owned(), reason }));
                    }
                    ApprovalAnswer::Deferred(reason) => {
                        return decided(Admission::Deferred { name: name.to_owned(), reason });
                    }
                }
            }
        };
        // A hook that panics blocks the call (it may be the one that guards it) instead of
        // taking the whole turn down.
        match AssertUnwindSafe(self.hooks.before_tool(info)).catch_unwind().await {
            Ok(HookVerdict::Continue) => {}
            Ok(HookVerdict::Block(why)) => {
                return decided(Admission::Refused(Refusal::Blocked { name: name.to_owned(), why }));
            }
            Err(panic) => {
                let why = format!("the before_tool hook failed ({})", panic_message(panic.as_ref()));
                return decided(Admission::Refused(Refusal::Blocked { name: name.to_owned(), why }));
            }
        }
        let job = match (entry.origin(), handler) {
            (Origin::Builtin(_), Some(tool)) => {
                Job::Builtin { tool: Arc::clone(tool), input: arguments.clone(), policy: Arc::clone(&binding.policy) }
            }
            (Origin::Builtin(_), None) => return refused(Refusal::NoHandler { name: name.to_owned() }),
            (Origin::Mcp { server, tool }, _) => Job::Mcp {
                id: id.to_owned(),
                server: server.to_owned(),
                tool: tool.name.clone(),
                arguments: arguments.as_object().cloned(),
                generation: binding.generation(server),
                revision: pool.revision(),
                name: name.to_owned(),
                output_schema: tool.output_schema.clone().map(Box::new),
            },
        };
        (Admission::Run { decision, reason, job }, Some(rule))
    }

    /// Tells the hooks how a call was decided ([`Hooks::decided`]), and gives the admission
    /// back: a call to run is blocked when the hook failed (it may be the one that audits it).
    /// For a front that refuses a call itself before the gate (a tool it never showed its
    /// caller: [`Refusal::NotLoaded`], [`Refusal::NotExposed`]), as the loop does.
    pub fn report(&self, info: &CallInfo, admission: Admission, rule: Option<&str>) -> Admission {
        let denied_by;
        let rule = match &admission {
            Admission::Refused(Refusal::Denied { rule, .. }) => {
                denied_by = rule.to_string();
                Some(denied_by.as_str())
            }
            _ => rule,
        };
        let reason = admission.reason_text();
        let refusal = match &admission {
            Admission::Refused(refusal) => Some(refusal),
            _ => None,
        };
        let decision = GateDecision { decision: admission.decision(), rule, reason: &reason, refusal };
        let Err(why) = self.tell_hooks(info, &decision) else { return admission };
        drop(reason);
        match admission {
            Admission::Run { .. } => Admission::Refused(Refusal::Blocked { name: info.name.clone(), why }),
            other => {
                tracing::warn!("{why}");
                other
            }
        }
    }

    /// Calls [`Hooks::decided`] (for a call the front answers itself: the search tool);
    /// `Err` says that it failed (panicked).
    pub fn tell_hooks(&self, info: &CallInfo, decision: &GateDecision<'_>) -> Result<(), String> {
        std::panic::catch_unwind(AssertUnwindSafe(|| self.hooks.decided(info, decision)))
            .map_err(|panic| format!("the decided hook failed ({})", panic_message(panic.as_ref())))
    }

    /// Runs an admitted job. An MCP call is refused (not sent) when its server's tools changed
    /// since the binding, however late that happened (an approval prompt can take minutes); it
    /// goes to the generation it was shown in. Progress the server reports goes to `progress`.
    ///
    /// A tool that panics (a built-in's handler, or the tool source) fails this call only.
    pub async fn run(
        &self,
        source: &dyn ToolSource,
        job: Job,
        progress: Option<tokio::sync::mpsc::Sender<mcp_protocol::ProgressNotificationParams>>,
    ) -> Ran {
        self.run_nested(source, job, progress, None).await
    }

    /// [`run`](Self::run), handing a built-in tool `calls`, through which it makes tool calls
    /// of its own ([`BuiltinTool::call_nested`]); without it a built-in runs under its policy
    /// alone ([`BuiltinTool::call_under`]).
    pub async fn run_nested(
        &self,
        source: &dyn ToolSource,
        job: Job,
        progress: Option<tokio::sync::mpsc::Sender<mcp_protocol::ProgressNotificationParams>>,
        calls: Option<&dyn InnerCalls>,
    ) -> Ran {
        match job {
            Job::Builtin { tool, input, policy } => {
                let ran = match calls {
                    Some(calls) => AssertUnwindSafe(tool.call_nested(&input, calls)).catch_unwind().await,
                    None => AssertUnwindSafe(tool.call_under(&input, &policy)).catch_unwind().await,
                };
                Ran::Builtin(ran.unwrap_or_else(|panic| {
                    Err(format!("the built-in tool {} failed ({})", tool.spec().name, panic_message(panic.as_ref())))
                }))
            }
            Job::Mcp { id, server, tool, arguments, generation, revision, name, output_schema } => {
                if source.settled_generation(&server).await != generation {
                    // Decided again at the last moment: the hooks hear of it too.
                    let info = CallInfo {
                        id,
                        name: name.clone(),
                        server: Some(server.clone()),
                        arguments: Value::Object(arguments.unwrap_or_default()),
                    };
                    let refusal = Refusal::Stale { server, name, revision };
                    let reason = refusal.reason();
                    let decision = GateDecision {
                        decision: refusal.decision(),
                        rule: None,
                        reason: &reason,
                        refusal: Some(&refusal),
                    };
                    if let Err(why) = self.tell_hooks(&info, &decision) {
                        tracing::warn!("{why}");
                    }
                    return Ran::Refused(refusal);
                }
                let failed = (server.clone(), tool.clone());
                let call = BoundCall { server, tool, arguments, generation, progress };
                let ran = AssertUnwindSafe(source.call_bound(call)).catch_unwind().await;
                Ran::Mcp(match ran {
                    Ok(result) => result.map(|r| {
                        let Some(schema) = output_schema.as_deref() else { return Box::new(r) };
                        let (server, tool) = &failed;
                        let checked = self.check_structured(r, &name, schema);
                        Box::new(checked.unwrap_or_else(|problems| {
                            discarded(&format!("{name} (tool {tool:?} of server {server:?})"), &problems)
                        }))
                    }),
                    Err(panic) => {
                        let (server, tool) = failed;
                        let detail = format!("the tool source failed ({})", panic_message(panic.as_ref()));
                        Err(SourceError::Failed { op: Operation::CallTool { tool }, server, detail })
                    }
                })
            }
        }
    }

    /// A result whose tool has an output schema, checked as the specification asks clients
    /// to: a successful result must carry `structuredContent` matching `schema`, the output
    /// schema of tool `name` (compiled once, while it stays the same). Error
    /// results are not checked. `Err`: the problems, quoting the server's values on bounded
    /// lines.
    fn check_structured(
        &self,
        result: CallToolResult,
        name: &str,
        schema: &Value,
    ) -> Result<CallToolResult, Vec<String>> {
        if result.is_error() {
            return Ok(result);
        }
        let Some(structured) = &result.structured_content else {
            return Err(vec!["the result has no structuredContent".to_owned()]);
        };
        match self.checker.check_output(name, schema, structured) {
            Ok(()) => Ok(result),
            Err(problems) => Err(problems
                .iter()
                .map(|p| {
                    let at = if p.pointer.is_empty() { "(top level)" } else { &p.pointer };
                    let text = match p.kind {
                        tool_pool::ArgumentProblemKind::BadSchema => {
                            format!("the tool's output schema is unusable at {at}: {}", p.message)
                        }
                        _ => format!("{at}: {}", p.message),
                    };
                    // Messages quote the server's values.
                    mcp_safety::text::one_line(&text, 500)
                })
                .collect()),
        }
    }

    /// Tells the hooks how a call ended, with the text the caller will read. `Err` says why
    /// the caller must not read it after all: the hook failed (panicked), and a hook that sees
    /// results may be the one that audits or redacts them.
    pub async fn finished(&self, info: &CallInfo, text: &str, is_error: bool) -> Result<(), String> {
        AssertUnwindSafe(self.hooks.after_tool(info, text, is_error)).catch_unwind().await.map_err(|panic| {
            format!(
                "{} ran, but the after_tool hook failed ({}); its result is withheld",
                info.name,
                panic_message(panic.as_ref())
            )
        })
    }
}

/// What a panic said, on one bounded line.
fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    let said = panic.downcast_ref::<&str>().copied().or_else(|| panic.downcast_ref::<String>().map(String::as_str));
    format!("it panicked: {}", mcp_safety::text::one_line(said.unwrap_or("no message"), 300))
}

/// The error result that replaces a result whose `structuredContent` does not match its
/// tool's output schema ([`CallGate::check_structured`]): the tool (`who`) and each problem,
/// so neither the model nor a person acts on data the tool promised to shape otherwise.
fn discarded(who: &str, problems: &[String]) -> CallToolResult {
    let text = format!(
        "the result of {who} does not match the tool's output schema, so it was discarded:\n- {}",
        problems.join("\n- ")
    );
    CallToolResult { content: vec![mcp_protocol::ContentBlock::text(text)], is_error: Some(true), ..Default::default() }
}

/// Why `name` is not in the pool: a denied tool (named with its rule), or unknown with close
/// matches.
fn missing(binding: &Binding, source: &dyn ToolSource, name: &str) -> Refusal {
    let pool = &binding.pool;
    // Named as the pool names its tools (the agent's `mcp__…`, the gateway's `{server}__{tool}`).
    let naming = pool.naming();
    let denied = pool.hidden().iter().find(|h| {
        let named = match &h.server {
            Some(server) => naming.name(server, &h.tool),
            None => Some(h.tool.clone()),
        };
        named.as_deref() == Some(name)
    });
    if let Some(hidden) = denied {
        let who = match &hidden.server {
            Some(server) => format!("tool {:?} of server {server:?}", hidden.tool),
            None => format!("built-in tool {:?}", hidden.tool),
        };
        return Refusal::Denied { name: name.to_owned(), who, rule: hidden.rule.clone() };
    }
    if let Some((server, departure)) = departed_server(binding, source, name) {
        // Never another server's tool in its place: the model would call what it did not choose.
        return Refusal::ServerGone { name: name.to_owned(), server, departure };
    }
    Refusal::UnknownTool {
        name: name.to_owned(),
        revision: pool.revision(),
        suggestions: close_matches(pool, name),
        available: pool.iter().map(|e| e.name().to_owned()).take(LISTED_NAMES).collect(),
    }
}

/// The server `name` belonged to when that server is not in the pool now, and why it left:
/// one an earlier binding had (by the names it had, or its namespace), or one the source says
/// is away (its namespace under the pool's naming).
fn departed_server(binding: &Binding, source: &dyn ToolSource, name: &str) -> Option<(String, Departure)> {
    let naming = binding.pool.naming();
    // `{prefix}{server}__`: what every name of `server` starts with (none under transparent naming).
    let in_namespace = |server: &str| {
        let probe = naming.name(server, "x")?;
        let namespace = probe.strip_suffix("__x")?;
        let rest = name.strip_prefix(namespace)?.strip_prefix("__")?;
        (!rest.is_empty() && namespace.len() > naming.prefix().len()).then_some(())
    };
    let known = binding
        .departed
        .iter()
        .find(|(_, names)| names.contains(name))
        .or_else(|| binding.departed.iter().find(|(server, _)| in_namespace(server).is_some()))
        .map(|(server, _)| server.clone());
    let server = match known {
        Some(server) => server,
        None => {
            // A server no binding had (it failed at start): its name is the namespace's.
            let rest = name.strip_prefix(naming.prefix())?;
            let (server, _) = rest.split_once("__")?;
            if server.is_empty() || binding.generations.contains_key(server) || in_namespace(server).is_none() {
                return None;
            }
            source.departure(server)?;
            server.to_owned()
        }
    };
    let departure = source.departure(&server).unwrap_or_else(|| Departure::new(DepartureState::Gone));
    Some((server, departure))
}

/// Up to [`SUGGESTIONS`] pool names near `name`: the raw tool name given alone, a substring,
/// or a small edit distance.
fn close_matches(pool: &Pool, name: &str) -> Vec<String> {
    // Pool names are at most 64 bytes: one far longer is near none of them, and comparing it
    // with each would cost its length times theirs (a client's megabyte name, per call).
    if name.len() > 4 * tool_pool::MAX_NAME_LEN {
        return Vec::new();
    }
    let wanted = name.to_lowercase();
    let mut scored: Vec<(usize, &str)> = pool
        .iter()
        .filter_map(|e| {
            let candidate = e.name().to_lowercase();
            let distance = strsim::levenshtein(&wanted, &candidate);
            let near = distance <= (wanted.chars().count() / 5).max(2);
            let related = e.tool().eq_ignore_ascii_case(name) || (wanted.len() >= 3 && candidate.contains(&wanted));
            (near || related).then_some((if related { 0 } else { distance }, e.name()))
        })
        .collect();
    scored.sort();
    scored.into_iter().take(SUGGESTIONS).map(|(_, n)| n.to_owned()).collect()
}
