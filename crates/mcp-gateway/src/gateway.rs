//! The gateway's core, shared by the fronts: what each request means and what it is answered
//! with. No I/O of its own; a front reads requests, asks [`Gateway`], and writes the lines.

use std::borrow::Cow;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::{
    Admission, Binding, BuiltinTool, CallDecision, CallGate, CallInfo, CallRequest, GateDecision, InnerCalls,
    InnerError, InnerResult, Job, Ran, Refusal, SEARCH_TOOL, StepSearch, ToolSpec,
};
use async_trait::async_trait;
use mcp_protocol::stateless::InputRequest;
use mcp_protocol::{
    CallToolRequestParams, CallToolResult, ClientContext, ClientRequest, CompleteReference, CompleteRequestParams,
    ContentBlock, ErrorObject, GetPromptRequestParams, Implementation, InitializeRequestParams, ListChangedCapability,
    LoggingLevel, PaginatedRequestParams, ProgressNotificationParams, ProtocolVersion, ReadResourceRequestParams,
    RequestId, RequestMeta, ResourcesCapability, RetryParts, ServerCapabilities, ServerConfig, ServerSession,
    ToolAnnotations, error_codes, methods,
};
use serde::Serialize;
use serde_json::{Map, Value, json};
use tokio::sync::mpsc;
use tool_pool::{Exposure, ExposureState, Naming, Origin, PoolEntry, SearchResults};

use crate::approval::{
    ApprovalMemory, CallContext, ClientApprover, GatewayApprover, INPUT_KEY, MemoryApprovals, Outcome, Way,
};
use crate::asks::{SessionAsker, StatelessAsker};
use crate::backend::{Backend, BackendError, BackendEvent, CallAsker, Caller, ContentListing, Upstream};
use crate::clock::{Clock, SystemClock};
use crate::content::ContentView;
use crate::exposed::{Exposing, Selection};
use crate::limit::RateLimiter;
use crate::observe::{Answered, ServeWatch};
use crate::seal::{MemoryReplayCache, ReplayCache, SealError, StateSealer};
use crate::session::{Outbound, Session, lock, server_digest};
use crate::subscriptions::Subscriptions;

/// The reason reported for a call of `search_tools` (the audit log's rule).
const SEARCH_REASON: &str = "the gateway's tool search";
/// Most characters of an error result's text.
const ERROR_TEXT_CHARS: usize = 8_000;
/// How long a call's end waits for the progress it reported before to be offered to its client.
const PROGRESS_RELAY_END: Duration = Duration::from_secs(1);
/// Progress reports waiting to be relayed beyond this many are skipped, oldest first.
const PROGRESS_BACKLOG: usize = 16;
/// `resources/read` code for an unknown resource (the specification's own).
const RESOURCE_NOT_FOUND: i64 = -32002;

/// How the gateway presents itself and asks.
#[derive(Debug, Clone)]
pub struct GatewayOptions {
    /// `serverInfo`.
    pub server_info: Implementation,
    /// Instructions of the gateway's own, before the upstreams' (cleaned, capped, marked).
    pub instructions: Option<String>,
    /// The tools of exactly one upstream, offered under their own names and descriptions
    /// (`--transparent`; the backend's pool must be assembled with
    /// [`Naming::Transparent`]).
    pub transparent: bool,
    /// How long an approval asked through `input_required` stays valid.
    pub approval_ttl: Duration,
    /// How long a form sent as `elicitation/create` waits for its answer.
    pub approval_wait: Duration,
    /// Most tools (prompts, resources) per page of a listing.
    pub page_size: usize,
    /// Largest `resources/read` answer passed on, in bytes.
    pub max_resource_bytes: usize,
    /// Where time comes from.
    pub clock: Arc<dyn Clock>,
    /// The key sealing approval states; `None`: a fresh random one (replicas need a shared one).
    pub sealer: Option<Arc<StateSealer>>,
    /// Which sealed states were used.
    pub replay: Arc<dyn ReplayCache>,
    /// "Yes for this client".
    pub approvals: Arc<dyn ApprovalMemory>,
    /// The rate limits (`[[serve.limits]]`), checked before a call is admitted (so a flood
    /// of calls is refused before anyone is asked to approve one); `None`: no limits.
    pub limiter: Option<Arc<dyn RateLimiter>>,
    /// Where a line for every decided `tools/call` goes; `None`: no audit log.
    pub audit: Option<Arc<dyn crate::audit::AuditSink>>,
    /// What watches every request received (telemetry's SERVER spans); `None`: nothing.
    pub observer: Option<Arc<dyn crate::observe::ServeObserver>>,
}

impl Default for GatewayOptions {
    fn default() -> Self {
        Self {
            server_info: Implementation::new("mcp-harness", env!("CARGO_PKG_VERSION")),
            instructions: None,
            transparent: false,
            approval_ttl: Duration::from_secs(300),
            approval_wait: Duration::from_secs(600),
            page_size: 1000,
            max_resource_bytes: 16 * 1024 * 1024,
            clock: Arc::new(SystemClock),
            sealer: None,
            replay: Arc::new(MemoryReplayCache::default()),
            approvals: Arc::new(MemoryApprovals::default()),
            limiter: None,
            audit: None,
            observer: None,
        }
    }
}

/// Who a request is from and in which era it is served.
#[derive(Debug, Clone)]
pub(crate) struct Scope {
    pub(crate) caller: Caller,
    pub(crate) era: Era,
}

/// How a request is served.
#[derive(Debug, Clone)]
pub(crate) enum Era {
    /// In a session (2025-03-26 .. 2025-11-25).
    Session(Arc<Session>),
    /// On its own, from its envelope (2026-07-28).
    Stateless(Arc<ClientContext>),
}

impl Scope {
    pub(crate) fn is_stateless(&self) -> bool {
        matches!(self.era, Era::Stateless(_))
    }

    fn version(&self) -> ProtocolVersion {
        match &self.era {
            Era::Session(s) => s.protocol_version(),
            Era::Stateless(ctx) => ctx.protocol_version.unwrap_or(ProtocolVersion::STATELESS),
        }
    }

    pub(crate) fn client_name(&self) -> &str {
        match &self.era {
            Era::Session(s) => s.client_name(),
            Era::Stateless(ctx) => ctx.client_info.as_ref().map_or("", |i| crate::session::client_name(&i.name)),
        }
    }
}

/// What a request is answered with.
#[derive(Debug)]
pub(crate) enum Reply {
    /// A result (JSON text; a stateless answer gets `resultType: complete` when written).
    Result(String),
    /// A result that says its `resultType` itself (`input_required`, `server/discover`).
    Typed(String),
    /// An error.
    Error(ErrorObject),
    /// `subscriptions/listen`: the front keeps the stream open with these notifications.
    Listen(ListenFilter),
}

/// What a `subscriptions/listen` stream carries.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct ListenFilter {
    pub(crate) tools: bool,
    pub(crate) resources: bool,
    pub(crate) prompts: bool,
}

impl ListenFilter {
    pub(crate) fn wants(&self, event: &BackendEvent) -> bool {
        match event {
            BackendEvent::ToolsChanged => self.tools,
            BackendEvent::ResourcesChanged => self.resources,
            BackendEvent::PromptsChanged => self.prompts,
            _ => false,
        }
    }

    /// The agreed subset, as the acknowledgement says it.
    pub(crate) fn to_value(self) -> Value {
        let mut agreed = Map::new();
        for (key, on) in [
            ("toolsListChanged", self.tools),
            ("resourcesListChanged", self.resources),
            ("promptsListChanged", self.prompts),
        ] {
            if on {
                agreed.insert(key.to_owned(), Value::Bool(true));
            }
        }
        Value::Object(agreed)
    }
}

/// The gateway: its backend, the one call gate, and what every front shares. Cheap to clone.
#[derive(Clone)]
pub struct Gateway {
    inner: Arc<Inner>,
}

struct Inner {
    backend: Arc<dyn Backend>,
    gate: CallGate,
    /// The backend's built-in tools, whose listed description may depend on the pool
    /// ([`BuiltinTool::describe`]: code mode's declarations).
    builtins: Vec<Arc<dyn BuiltinTool>>,
    /// What every call's own approver shares.
    approver: Arc<GatewayApprover>,
    options: GatewayOptions,
    config: ServerConfig,
    naming: Naming,
    /// The view of the last content listing, while it is the backend's current one.
    content: Mutex<Option<(Arc<ContentListing>, Arc<ContentView>)>>,
    /// The upstream resource subscriptions the sessions hold.
    subscriptions: Subscriptions,
    /// Budgets and tool search per client, when the backend asks for them.
    exposing: Option<Exposing>,
}

impl std::fmt::Debug for Gateway {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").field("server_info", &self.inner.options.server_info).finish_non_exhaustive()
    }
}

impl Gateway {
    /// A gateway over `backend`. Fails only when no key could be made for approval states.
    pub fn new(backend: Arc<dyn Backend>, options: GatewayOptions) -> Result<Self, SealError> {
        let sealer = match &options.sealer {
            Some(sealer) => Arc::clone(sealer),
            None => Arc::new(StateSealer::generate()?),
        };
        let approver = Arc::new(GatewayApprover {
            sealer,
            replay: Arc::clone(&options.replay),
            memory: Arc::clone(&options.approvals),
            clock: Arc::clone(&options.clock),
            state_ttl: options.approval_ttl,
            wait: options.approval_wait,
        });
        let builtins = backend.builtins();
        let gate = CallGate::new(Arc::clone(&approver) as Arc<dyn agent_loop::Approver>, backend.hooks())
            .with_builtins(builtins.clone());
        let listed = Some(ListChangedCapability { list_changed: Some(true), extra: Map::new() });
        let capabilities = ServerCapabilities {
            tools: listed.clone(),
            prompts: listed,
            // Subscriptions are routed to the upstream that has the resource (which may refuse).
            resources: Some(ResourcesCapability { subscribe: Some(true), list_changed: Some(true), extra: Map::new() }),
            logging: Some(json!({})),
            completions: Some(json!({})),
            experimental: None,
            extra: Map::new(),
        };
        let config = ServerConfig::new(options.server_info.clone(), capabilities);
        let naming = if options.transparent { Naming::Transparent } else { Naming::Gateway };
        // A transparent gateway offers its one upstream as it is.
        let exposing = backend.exposure().filter(|_| !options.transparent).map(Exposing::new);
        let inner = Inner {
            backend,
            gate,
            builtins,
            approver,
            options,
            config,
            naming,
            content: Mutex::new(None),
            subscriptions: Subscriptions::default(),
            exposing,
        };
        Ok(Self { inner: Arc::new(inner) })
    }

    pub(crate) fn options(&self) -> &GatewayOptions {
        &self.inner.options
    }

    pub(crate) fn config(&self) -> &ServerConfig {
        &self.inner.config
    }

    pub(crate) fn backend(&self) -> &Arc<dyn Backend> {
        &self.inner.backend
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.inner.options.clock.unix_ms()
    }

    /// The instructions for `caller`: the gateway's own, then the upstreams', cleaned, capped
    /// and marked per server as in the agent's system prompt.
    async fn instructions(&self, caller: &Caller) -> Option<String> {
        let base = self.inner.options.instructions.as_deref().unwrap_or("");
        let upstream = self.inner.backend.instructions(caller);
        let policy = match self.inner.backend.binding(caller).await {
            Ok(binding) => Arc::clone(binding.policy()),
            Err(_) => Arc::new(policy::Policy::default()),
        };
        let text = agent_loop::system_prompt(base, &upstream, &policy);
        let text = text.trim();
        (!text.is_empty()).then(|| text.to_owned())
    }

    /// How the gateway presents itself to `caller`: its own capabilities and the upstreams'
    /// instructions marked per server; or, when transparent, the one upstream's capabilities
    /// (what the gateway can carry of them) and its instructions unmarked.
    async fn server_config(&self, caller: &Caller) -> ServerConfig {
        let mut config = self.inner.config.clone();
        if self.inner.options.transparent {
            // The upstream's handshake is known once the first pool is published (a binding
            // waits for it), not before.
            let _ = self.inner.backend.binding(caller).await;
        }
        match self.inner.backend.mirrored(caller).filter(|_| self.inner.options.transparent) {
            Some(upstream) => {
                config.capabilities = mirror_capabilities(&upstream.capabilities);
                config.instructions = self.mirrored_instructions(caller, &upstream).await;
            }
            None => config.instructions = self.instructions(caller).await,
        }
        config
    }

    /// A transparent gateway's instructions: its own, then the upstream's as it wrote them
    /// (cleaned and capped as for the agent's system prompt, not marked: the client talks to
    /// that server as it is), unless policy keeps them out.
    async fn mirrored_instructions(&self, caller: &Caller, upstream: &Upstream) -> Option<String> {
        let allowed = match self.inner.backend.binding(caller).await {
            Ok(binding) => binding.policy().allows_instructions(&upstream.server),
            Err(_) => true,
        };
        let own = self.inner.options.instructions.as_deref().map(str::trim).filter(|t| !t.is_empty());
        let theirs = upstream
            .instructions
            .as_deref()
            .filter(|_| allowed)
            .map(|text| mcp_safety::text::sanitize(text.trim(), agent_loop::MAX_INSTRUCTIONS_CHARS))
            .filter(|t| !t.is_empty());
        match (own, theirs) {
            (Some(own), Some(theirs)) => Some(format!("{own}\n\n{theirs}")),
            (Some(own), None) => Some(own.to_owned()),
            (None, theirs) => theirs,
        }
    }

    /// Answers `initialize`: a new session, and the result's JSON.
    pub(crate) async fn open_session(
        &self,
        caller: Caller,
        id: Option<Arc<str>>,
        params: &InitializeRequestParams,
    ) -> Result<(Arc<Session>, String), ErrorObject> {
        let config = self.server_config(&caller).await;
        let (protocol, result) = ServerSession::initialize(&config, &crate::session::kept_initialize(params))
            .map_err(|e| ErrorObject::new(error_codes::INTERNAL_ERROR, e.to_string()))?;
        let guard = self.inner.options.observer.as_ref().and_then(|o| {
            let opened =
                crate::observe::Opened { protocol_version: protocol.protocol_version().as_str(), http: id.is_some() };
            o.session(&opened)
        });
        let session = Arc::new(Session::new(id, caller, protocol, self.now_ms()).observed(guard));
        Ok((session, to_json(&result)))
    }

    /// The watch of a request just received, when an observer is set
    /// ([`GatewayOptions::observer`]); `received` is made only then (it may lock the session).
    pub(crate) fn watch<'a>(
        &self,
        received: impl FnOnce() -> crate::observe::Received<'a>,
    ) -> Option<Box<dyn ServeWatch>> {
        self.inner.options.observer.as_ref().map(|o| o.received(&received()))
    }

    /// [`Gateway::handle`] inside `watch` (its context current while it runs, so what the
    /// backend sends is its child), which is told the answer.
    pub(crate) async fn handle_watched(
        &self,
        watch: Option<Box<dyn ServeWatch>>,
        scope: &Scope,
        id: &RequestId,
        request: ClientRequest,
        meta: &RequestMeta,
        out: &Outbound,
    ) -> Reply {
        let Some(watch) = watch else { return self.handle(scope, id, request, meta, out).await };
        let (reply, watch) = crate::observe::Entered::new(watch, self.handle(scope, id, request, meta, out)).await;
        let Some(watch) = watch else { return reply };
        match &reply {
            Reply::Result(text) | Reply::Typed(text) => watch.end(Answered::Result(text)),
            Reply::Error(error) => watch.end(Answered::Error(error)),
            Reply::Listen(_) => watch.end(Answered::Result("{}")),
        }
        reply
    }

    /// Answers one request (not `initialize`, which opens a session: [`Gateway::open_session`]).
    pub(crate) async fn handle(
        &self,
        scope: &Scope,
        id: &RequestId,
        request: ClientRequest,
        meta: &RequestMeta,
        out: &Outbound,
    ) -> Reply {
        match request {
            ClientRequest::Ping => Reply::Result("{}".to_owned()),
            ClientRequest::Initialize(_) => Reply::Error(ErrorObject::new(
                error_codes::INVALID_REQUEST,
                "Invalid Request: this session is initialized already",
            )),
            ClientRequest::Discover => {
                Reply::Typed(to_json(&self.server_config(&scope.caller).await.discover_result()))
            }
            ClientRequest::ListTools(params) => self.list_tools(scope, &params).await,
            ClientRequest::CallTool(call) => self.audited_call(scope, id, call, meta, out).await,
            ClientRequest::ListResources(params) => self.list_content(scope, &params, Listed::Resources).await,
            ClientRequest::ListResourceTemplates(params) => self.list_content(scope, &params, Listed::Templates).await,
            ClientRequest::ListPrompts(params) => self.list_content(scope, &params, Listed::Prompts).await,
            ClientRequest::ReadResource(params) => self.read_resource(scope, params).await,
            ClientRequest::GetPrompt(params) => self.get_prompt(scope, params).await,
            ClientRequest::Complete(params) => self.complete(scope, params).await,
            ClientRequest::SetLevel(level) => match &scope.era {
                Era::Session(session) => {
                    session.set_log_level(level);
                    Reply::Result("{}".to_owned())
                }
                Era::Stateless(_) => Reply::Error(mcp_protocol::method_not_found(mcp_protocol::LOGGING_SET_LEVEL)),
            },
            ClientRequest::Listen(params) => {
                let wants = |key: &str| params.notifications.get(key).and_then(Value::as_bool).unwrap_or(false);
                Reply::Listen(ListenFilter {
                    tools: wants("toolsListChanged"),
                    resources: wants("resourcesListChanged"),
                    prompts: wants("promptsListChanged"),
                })
            }
            ClientRequest::Subscribe(params) => self.subscription(scope, &params.uri, true).await,
            ClientRequest::Unsubscribe(params) => self.subscription(scope, &params.uri, false).await,
            ClientRequest::Other { method } => Reply::Error(mcp_protocol::method_not_found(&method)),
            other => Reply::Error(mcp_protocol::method_not_found(&format!("{other:?}"))),
        }
    }

    async fn binding(&self, caller: &Caller) -> Result<Arc<Binding>, BackendError> {
        self.inner.backend.binding(caller).await
    }

    /// The selection of the client `scope` is (see `exposed`): its session's, or the one kept
    /// for its caller and client name.
    fn selection(&self, scope: &Scope) -> Option<Arc<Selection>> {
        let exposing = self.inner.exposing.as_ref()?;
        Some(match &scope.era {
            Era::Session(session) => Arc::clone(session.selection()),
            Era::Stateless(_) => {
                let owner = scope.caller.principal.is_some().then(|| scope.caller.principal_key());
                exposing.stateless(owner.as_deref(), &stateless_key(scope))
            }
        })
    }

    /// What the client `selection` belongs to is shown of `binding`'s pool: `None` when every
    /// entry is (no exposure stage).
    fn exposure(&self, binding: &Binding, selection: Option<&Selection>) -> Option<Arc<Exposure>> {
        let exposing = self.inner.exposing.as_ref()?;
        Some(exposing.exposure(binding.pool(), selection))
    }

    /// The search a script of `run_code` makes for a client shown `exposure` of `binding`'s
    /// pool: `None` when nothing waits behind search (every tool in reach is then in the
    /// script's `tools`).
    fn script_search(&self, binding: &Binding, exposure: Option<&Arc<Exposure>>) -> Option<StepSearch> {
        self.inner.exposing.as_ref()?.step_search(binding.pool(), exposure?)
    }

    async fn list_tools(&self, scope: &Scope, params: &PaginatedRequestParams) -> Reply {
        let binding = match self.binding(&scope.caller).await {
            Ok(binding) => binding,
            Err(e) => return Reply::Error(backend_error(&e)),
        };
        if let Era::Session(session) = &scope.era {
            session.listed(&binding);
        }
        let pool = binding.pool();
        let selection = self.selection(scope);
        let exposure = self.exposure(&binding, selection.as_deref());
        // The entries listed: those loaded for this client, then the search tool while some
        // wait behind it (its name reserved meanwhile, as in the agent's loop).
        let search = exposure.as_ref().is_some_and(|x| x.search_active());
        let entries: Vec<PoolEntry<'_>> = match &exposure {
            None => pool.iter().collect(),
            Some(x) => pool
                .iter()
                .filter(|e| x.state(e.name()) == Some(ExposureState::Loaded) && !(search && e.name() == SEARCH_TOOL))
                .collect(),
        };
        let total = entries.len() + usize::from(search);
        // A cursor names the pool's revision and the client's selection: either changing
        // makes another list.
        let key = match &selection {
            Some(selection) => format!("{}.{}", pool.revision(), selection.version()),
            None => pool.revision().to_string(),
        };
        let (start, page) = match page(params.cursor.as_deref(), &key, total, self.inner.options.page_size) {
            Ok(page) => page,
            Err(e) => return Reply::Error(e),
        };
        let transparent = self.inner.options.transparent;
        let script_search = self.script_search(&binding, exposure.as_ref());
        let described = |entry: &PoolEntry<'_>| match entry.origin() {
            Origin::Builtin(spec) => self
                .inner
                .builtins
                .iter()
                .find(|b| b.spec().name == spec.name)
                .and_then(|b| b.describe(&binding, script_search.as_ref())),
            Origin::Mcp { .. } => None,
        };
        let mut tools: Vec<ToolOut<'_>> = entries
            .into_iter()
            .skip(start)
            .take(page)
            .map(|entry| {
                let description = described(&entry);
                ToolOut::new(entry, transparent, description)
            })
            .collect();
        if search
            && start + page == total
            && page > 0
            && let Some(exposing) = &self.inner.exposing
        {
            tools.push(ToolOut::spec(exposing.spec()));
        }
        let next_cursor = (start + page < total).then(|| format!("{key}:{}", start + page));
        Reply::Result(to_json(&ListOut { tools: Some(tools), next_cursor, ..ListOut::default() }))
    }

    /// A call of `search_tools` by the client `scope` is: the tools found are selected for it,
    /// and a session is told its list changed.
    fn search_tools(&self, scope: &Scope, id: &RequestId, binding: &Binding, input: &Value, out: &Outbound) -> Reply {
        let (Some(exposing), Some(selection)) = (&self.inner.exposing, self.selection(scope)) else {
            return unknown_tool(SEARCH_TOOL);
        };
        let info =
            CallInfo { id: id.to_string(), name: SEARCH_TOOL.to_owned(), server: None, arguments: input.clone() };
        let decision = GateDecision::new(CallDecision::Allowed, SEARCH_REASON);
        crate::audit::noted(CallDecision::Allowed, SEARCH_REASON.to_owned());
        if let Err(why) = self.inner.gate.tell_hooks(&info, &decision) {
            return tool_error(&Refusal::Blocked { name: SEARCH_TOOL.to_owned(), why }.to_string());
        }
        let exposure = exposing.exposure(binding.pool(), Some(&selection));
        let searched = exposing.search(binding.pool(), &exposure, &selection, input);
        if searched.changed
            && let Era::Session(session) = &scope.era
        {
            let line = list_changed_line(methods::TOOLS_LIST_CHANGED);
            // Its stream (stdout, or the GET stream), else the search call's own.
            if !session.notify(line.clone()) {
                out.offer(line);
            }
        }
        let result = CallToolResult {
            content: vec![ContentBlock::text(searched.text)],
            is_error: Some(searched.is_error),
            ..Default::default()
        };
        Reply::Result(to_json(&result))
    }

    pub(crate) async fn call_tool(
        &self,
        scope: &Scope,
        id: &RequestId,
        call: CallToolRequestParams,
        meta: &RequestMeta,
        out: &Outbound,
    ) -> Reply {
        let mut binding = match self.binding(&scope.caller).await {
            Ok(binding) => binding,
            Err(e) => return tool_error(&e.to_string()),
        };
        let name = call.name.as_str();
        let seen = match &scope.era {
            Era::Session(session) => session.last_listing(),
            Era::Stateless(_) => None,
        };
        // A tool the session was shown whose upstream is on its way back (restarted after a
        // crash, reconnecting) is waited for, as the host's own calls wait for it, rather than
        // answered as unknown.
        if binding.pool().get(name).is_none()
            && let Some(server) = seen.as_ref().and_then(|seen| seen.pool().get(name)?.server())
            && binding.generation(server).is_none()
            && self.inner.backend.tools().settled_generation(server).await.is_some()
        {
            binding = match self.binding(&scope.caller).await {
                Ok(binding) => binding,
                Err(e) => return tool_error(&e.to_string()),
            };
        }
        let exposure = self.exposure(&binding, self.selection(scope).as_deref());
        if exposure.as_ref().is_some_and(|x| x.search_active()) && name == SEARCH_TOOL {
            let arguments = Value::Object(call.arguments.unwrap_or_default());
            return self.search_tools(scope, id, &binding, &arguments, out);
        }
        let Some(entry) = binding.pool().get(name) else { return unknown_tool(name) };
        // A tool the client was not shown is refused as the agent's loop refuses it.
        let unshown = exposure.as_ref().and_then(|x| x.get(name)).and_then(|t| match t.state {
            ExposureState::Hidden => Some(Refusal::NotExposed { name: name.to_owned(), why: t.reason.to_string() }),
            ExposureState::Deferred => {
                Some(Refusal::NotLoaded { name: name.to_owned(), search: SEARCH_TOOL.to_owned() })
            }
            ExposureState::Loaded => None,
        });
        if let Some(refusal) = unshown {
            let info = CallInfo {
                id: id.to_string(),
                name: name.to_owned(),
                server: entry.server().map(str::to_owned),
                arguments: Value::Object(call.arguments.unwrap_or_default()),
            };
            let admission = self.inner.gate.report(&info, Admission::Refused(refusal), None);
            crate::audit::decided(&admission);
            return tool_error(&admission.not_run_text().unwrap_or_default());
        }
        // Held until the call ends: its concurrency slots are freed when it drops.
        let _permit = match &self.inner.options.limiter {
            Some(limiter) => match limiter.admit(&scope.caller, name).await {
                Ok(permit) => Some(permit),
                Err(refused) => return tool_error(&refused.to_string()),
            },
            None => None,
        };
        // A session is held to the listing it was shown: a call prepared against an older one
        // is never sent on, even when the gate's own check (against the current pool) passes.
        // An upstream that came back with the very tool the session was shown (a restart
        // changes the generation, not the tool) is no older listing.
        // A session continued from a shared store that has not listed here is held to what
        // the other replica listed, by digest (its generations are that replica's own).
        let stale = match (&scope.era, entry.server()) {
            (Era::Session(session), Some(server)) => match &seen {
                Some(seen) => (seen.generation(server) != binding.generation(server)
                    && !seen.pool().get(name).is_some_and(|shown| {
                        shown.origin() == entry.origin() && shown.description() == entry.description()
                    }))
                .then(|| (session, server, seen.pool().revision())),
                None => session
                    .listed_elsewhere()
                    .filter(|digests| {
                        digests.get(server).map(String::as_str) != Some(server_digest(&binding, server).as_str())
                    })
                    .map(|_| (session, server, binding.pool().revision())),
            },
            _ => None,
        };
        if let Some((session, server, revision)) = stale {
            session.notify(list_changed_line(methods::TOOLS_LIST_CHANGED));
            let refusal = Refusal::Stale { server: server.to_owned(), name: name.to_owned(), revision };
            return tool_error(&refusal.to_string());
        }
        let way = match &scope.era {
            Era::Session(session) if session.can_elicit_form() && out.is_open() => {
                Way::Elicit { session: Arc::clone(session), out: out.clone() }
            }
            Era::Stateless(ctx) if ctx.can_elicit_form() => Way::Retry { parts: RetryParts::from_extra(&call.extra) },
            Era::Session(session) if session.can_elicit_form() => Way::Nobody(
                "this client cannot be asked for approval here (its request accepts only JSON, not the \
                 text/event-stream a question needs)"
                    .to_owned(),
            ),
            _ if scope.version() < ProtocolVersion::V2025_06_18 => Way::Nobody(format!(
                "this client cannot be asked for approval (it speaks protocol version {}, which has no elicitation)",
                scope.version()
            )),
            _ => {
                Way::Nobody("this client cannot be asked for approval (it did not declare form elicitation)".to_owned())
            }
        };
        let scope_key = match &scope.era {
            Era::Session(session) => session.scope(),
            Era::Stateless(_) => stateless_key(scope),
        };
        // A built-in's own calls (code mode's script) ask the same client, on the same channel;
        // never through `input_required`, whose retry would run the whole script again.
        let script_way = match &way {
            Way::Elicit { session, out } => Way::Elicit { session: Arc::clone(session), out: out.clone() },
            Way::Retry { .. } => Way::Nobody(
                "a script's calls cannot be approved through input_required (the retry would run the script again)"
                    .to_owned(),
            ),
            Way::Nobody(why) => Way::Nobody(why.clone()),
        };
        let ctx = Arc::new(CallContext {
            way,
            caller: format!("{}\n{}", scope.caller.key(), scope.client_name()),
            owner: scope.caller.principal.is_some().then(|| scope.caller.principal_key()),
            scope: scope_key,
            version: scope.version(),
            outcome: Mutex::new(Outcome::Answered),
        });
        let arguments = Value::Object(call.arguments.unwrap_or_default());
        let call_id = id.to_string();
        let request = CallRequest { id: &call_id, name, arguments: &arguments };
        let tools = self.inner.backend.tools();
        let approver = ClientApprover { shared: Arc::clone(&self.inner.approver), ctx: Arc::clone(&ctx) };
        let context = agent_loop::CallContext::new().with_caller(ctx.scope.clone()).with_approver(Arc::new(approver));
        let admission = self.inner.gate.admit_with(&binding, tools, request, &context).await;
        let outcome = std::mem::take(&mut *lock(&ctx.outcome));
        crate::audit::decided(&admission);
        match (admission, outcome) {
            (Admission::Run { job, .. }, _) => {
                // The upstream's own questions during this call (and its script's calls) go to
                // this call's client.
                let asker: Arc<dyn CallAsker> = match &scope.era {
                    Era::Session(session) => Arc::new(SessionAsker::new(session, out, self.inner.approver.wait)),
                    Era::Stateless(client) => {
                        Arc::new(StatelessAsker::new(ctx.scope.clone(), client.can_elicit_form(), client.can_sample()))
                    }
                };
                let script = ScriptCalls {
                    asker: Arc::clone(&asker),
                    gateway: self,
                    caller: &scope.caller,
                    session: match &scope.era {
                        Era::Session(session) => session.id.as_deref().map(crate::audit::session_tag),
                        Era::Stateless(_) => None,
                    },
                    client: mcp_safety::text::one_line(scope.client_name(), 200),
                    search: self.script_search(&binding, exposure.as_ref()),
                    binding: &binding,
                    parent: call_id.clone(),
                    ctx: Arc::new(CallContext {
                        way: script_way,
                        caller: ctx.caller.clone(),
                        owner: ctx.owner.clone(),
                        scope: ctx.scope.clone(),
                        version: ctx.version,
                        outcome: Mutex::new(Outcome::Answered),
                    }),
                };
                self.run(job, meta.progress_token.as_ref(), out, &script, asker).await
            }
            (Admission::Refused(Refusal::UnknownTool { .. } | Refusal::Denied { .. }), _) => unknown_tool(name),
            // The client is asked through `input_required`; its retry carries the answer.
            (Admission::Deferred { .. }, Outcome::Deferred { form, state }) => {
                let request = InputRequest {
                    method: methods::ELICITATION_CREATE.to_owned(),
                    params: Some(serde_json::to_value(&form).unwrap_or(Value::Null)),
                    extra: Map::new(),
                };
                let result = json!({
                    "resultType": "input_required",
                    "inputRequests": {INPUT_KEY: request},
                    "requestState": state,
                });
                Reply::Typed(result.to_string())
            }
            (Admission::Refused(_), Outcome::StateRefused(why)) => Reply::Error(ErrorObject::new(
                error_codes::INVALID_PARAMS,
                format!("Invalid params: requestState refused: {why}"),
            )),
            (Admission::Refused(refusal), _) => {
                if matches!(refusal, Refusal::Stale { .. })
                    && let Era::Session(session) = &scope.era
                {
                    session.notify(list_changed_line(methods::TOOLS_LIST_CHANGED));
                }
                tool_error(&refusal.to_string())
            }
            (other, _) => {
                tool_error(&other.not_run_text().unwrap_or_else(|| "the call could not be admitted".to_owned()))
            }
        }
    }

    /// Runs an admitted call, forwarding its progress under the client's token; a built-in
    /// makes its own calls through `script` (code mode).
    async fn run(
        &self,
        job: Job,
        token: Option<&RequestId>,
        out: &Outbound,
        script: &ScriptCalls<'_>,
        asker: Arc<dyn CallAsker>,
    ) -> Reply {
        let asking = self.inner.backend.tools_for(asker);
        let tools = asking.as_deref().unwrap_or_else(|| self.inner.backend.tools());
        let ran = match token {
            Some(token) if out.is_open() => {
                let (tx, mut rx) = mpsc::channel::<ProgressNotificationParams>(4 * PROGRESS_BACKLOG);
                // Relayed by a task of its own, not by this future: a client that stops reading
                // stops this future being polled, while the upstream may go on reporting. The
                // relay keeps up with any upstream (it skips the oldest reports when behind) and
                // offers to the client's bounded stream, so nothing piles up.
                let (token, out_relay) = (token.clone(), out.clone());
                let mut relay = tokio::spawn(async move {
                    while let Some(mut p) = rx.recv().await {
                        // Behind (an upstream reporting faster than this encodes): the oldest
                        // reports are skipped, and none is sent while the client's stream has no
                        // room (it is not reading).
                        while rx.len() >= PROGRESS_BACKLOG
                            && let Ok(newer) = rx.try_recv()
                        {
                            p = newer;
                        }
                        if !out_relay.has_room() {
                            continue;
                        }
                        p.progress_token = token.clone();
                        if let Ok(line) = mcp_protocol::encode_notification(methods::PROGRESS, Some(&p)) {
                            out_relay.offer(line);
                        }
                    }
                });
                let ran = self.inner.gate.run_nested(tools, job, Some(tx), Some(script)).await;
                // The reports sent before the result go first: the call's end dropped the
                // sender, so the relay ends once it has offered them (bounded, to be safe).
                if tokio::time::timeout(PROGRESS_RELAY_END, &mut relay).await.is_err() {
                    relay.abort();
                }
                ran
            }
            _ => self.inner.gate.run_nested(tools, job, None, Some(script)).await,
        };
        match ran {
            Ran::Mcp(Ok(result)) => Reply::Result(to_json(&*result)),
            Ran::Mcp(Err(why)) => tool_error(&why.to_string()),
            Ran::Builtin(Ok(text)) => Reply::Result(to_json(&CallToolResult {
                content: vec![ContentBlock::text(text)],
                ..Default::default()
            })),
            Ran::Builtin(Err(why)) => tool_error(&why),
            _ => tool_error("the call ended without a result"),
        }
    }

    async fn content_view(&self, caller: &Caller) -> Result<Arc<ContentView>, BackendError> {
        let listing = self.inner.backend.content(caller).await?;
        let mut cached = lock(&self.inner.content);
        if let Some((seen, view)) = cached.as_ref()
            && Arc::ptr_eq(seen, &listing)
        {
            return Ok(Arc::clone(view));
        }
        let view = Arc::new(ContentView::new(&listing, self.inner.naming));
        *cached = Some((listing, Arc::clone(&view)));
        Ok(view)
    }

    async fn list_content(&self, scope: &Scope, params: &PaginatedRequestParams, what: Listed) -> Reply {
        let view = match self.content_view(&scope.caller).await {
            Ok(view) => view,
            Err(e) => return Reply::Error(backend_error(&e)),
        };
        let total = match what {
            Listed::Resources => view.resources().len(),
            Listed::Templates => view.templates().len(),
            Listed::Prompts => view.prompts().len(),
        };
        // Content listings are numbered by their length: a changed listing invalidates cursors
        // only as far as a client would notice anyway.
        let (start, page) =
            match page(params.cursor.as_deref(), &total.to_string(), total, self.inner.options.page_size) {
                Ok(page) => page,
                Err(e) => return Reply::Error(e),
            };
        let next_cursor = (start + page < total).then(|| format!("{total}:{}", start + page));
        let range = start..start + page;
        let out = match what {
            Listed::Resources => ListOut { resources: view.resources().get(range), next_cursor, ..ListOut::default() },
            Listed::Templates => {
                ListOut { resource_templates: view.templates().get(range), next_cursor, ..ListOut::default() }
            }
            Listed::Prompts => ListOut { prompts: view.prompts().get(range), next_cursor, ..ListOut::default() },
        };
        Reply::Result(to_json(&out))
    }

    async fn read_resource(&self, scope: &Scope, params: ReadResourceRequestParams) -> Reply {
        let view = match self.content_view(&scope.caller).await {
            Ok(view) => view,
            Err(e) => return Reply::Error(backend_error(&e)),
        };
        let Some((server, upstream)) = view.route_uri(&params.uri) else {
            let mut error = ErrorObject::new(RESOURCE_NOT_FOUND, "Resource not found");
            error.data = Some(json!({"uri": params.uri}));
            return Reply::Error(error);
        };
        let max = self.inner.options.max_resource_bytes;
        match self.inner.backend.read_resource(&scope.caller, server, &upstream, max).await {
            Ok(mut result) => {
                for contents in &mut result.contents {
                    contents.uri = view.outward_uri(server, &contents.uri);
                }
                Reply::Result(to_json(&result))
            }
            Err(e) => Reply::Error(backend_error(&e)),
        }
    }

    /// Subscribes `session`, continued from a shared store, to the URIs it had subscribed to
    /// at another replica, so their updates reach it here. A URI this replica cannot route
    /// (its upstream is not here, or no longer offers it) is logged and skipped, as a
    /// subscription to it would be refused.
    pub(crate) async fn resubscribe(&self, session: &Arc<Session>, uris: &std::collections::BTreeSet<String>) {
        let scope = Scope { caller: session.caller.clone(), era: Era::Session(Arc::clone(session)) };
        for uri in uris {
            if let Reply::Error(error) = self.subscription(&scope, uri, true).await {
                tracing::warn!(
                    uri = %mcp_safety::text::one_line(uri, 200),
                    error = %mcp_safety::text::one_line(&error.message, 200),
                    "a subscription of a session continued from the session store could not be renewed here"
                );
            }
        }
    }

    /// `resources/subscribe` (`on`) and `resources/unsubscribe` of a session: routed like a
    /// read; its updates come on the session's stream (`subscriptions::session_event_line`).
    /// A 2026-07-28 request has no session to hold a subscription.
    async fn subscription(&self, scope: &Scope, uri: &str, on: bool) -> Reply {
        let method = if on { mcp_protocol::RESOURCES_SUBSCRIBE } else { mcp_protocol::RESOURCES_UNSUBSCRIBE };
        let Era::Session(session) = &scope.era else { return Reply::Error(mcp_protocol::method_not_found(method)) };
        // A session holds up to MAX_SUBSCRIPTIONS URIs, each kept more than once: each is
        // bounded as the session store bounds it.
        if on && uri.len() > crate::MAX_URI_BYTES {
            return Reply::Error(ErrorObject::new(
                error_codes::INVALID_PARAMS,
                format!(
                    "Invalid params: a subscribed URI is at most {} bytes, this one is {}",
                    crate::MAX_URI_BYTES,
                    uri.len()
                ),
            ));
        }
        let backend = &self.inner.backend;
        let subscriptions = &self.inner.subscriptions;
        // What the session subscribed to stays unsubscribable after the resource left the
        // listing.
        if !on && let Some((server, upstream)) = session.subscribed_to(uri) {
            subscriptions.unsubscribe(backend, session, &server, &upstream).await;
            return Reply::Result("{}".to_owned());
        }
        let view = match self.content_view(&scope.caller).await {
            Ok(view) => view,
            Err(e) => return Reply::Error(backend_error(&e)),
        };
        let Some((server, upstream)) = view.route_uri(uri) else {
            if !on {
                return Reply::Result("{}".to_owned());
            }
            let mut error = ErrorObject::new(RESOURCE_NOT_FOUND, "Resource not found");
            error.data = Some(json!({"uri": uri}));
            return Reply::Error(error);
        };
        if !on {
            subscriptions.unsubscribe(backend, session, server, &upstream).await;
            return Reply::Result("{}".to_owned());
        }
        match subscriptions.subscribe(backend, session, server, &upstream, uri).await {
            Ok(()) => Reply::Result("{}".to_owned()),
            Err(error) => Reply::Error(error),
        }
    }

    async fn get_prompt(&self, scope: &Scope, params: GetPromptRequestParams) -> Reply {
        let view = match self.content_view(&scope.caller).await {
            Ok(view) => view,
            Err(e) => return Reply::Error(backend_error(&e)),
        };
        let Some((server, name)) = view.route_prompt(&params.name) else {
            return Reply::Error(ErrorObject::new(
                error_codes::INVALID_PARAMS,
                format!("Invalid params: unknown prompt {:?}", mcp_safety::text::one_line(&params.name, 100)),
            ));
        };
        match self.inner.backend.get_prompt(&scope.caller, server, name, params.arguments).await {
            Ok(result) => Reply::Result(to_json(&result)),
            Err(e) => Reply::Error(backend_error(&e)),
        }
    }

    async fn complete(&self, scope: &Scope, mut params: CompleteRequestParams) -> Reply {
        let view = match self.content_view(&scope.caller).await {
            Ok(view) => view,
            Err(e) => return Reply::Error(backend_error(&e)),
        };
        let server = match &mut params.reference {
            CompleteReference::Prompt { name, .. } => view.route_prompt(name).map(|(server, upstream)| {
                *name = upstream.to_owned();
                server.to_owned()
            }),
            CompleteReference::Resource { uri, .. } => view.route_template(uri).map(|(server, upstream)| {
                *uri = upstream.to_owned();
                server.to_owned()
            }),
            _ => None,
        };
        let Some(server) = server.filter(|s| view.completes(s)) else {
            // Nothing to complete from: an empty completion, as servers answer for what they
            // do not know.
            return Reply::Result(r#"{"completion":{"values":[]}}"#.to_owned());
        };
        match self.inner.backend.complete(&scope.caller, &server, params).await {
            Ok(result) => Reply::Result(to_json(&result)),
            Err(e) => Reply::Error(backend_error(&e)),
        }
    }
}

/// What a transparent gateway declares of its upstream's capabilities: the lists it offers
/// (each announcing changes, which the gateway sends whenever the upstream comes back or
/// changes), resource subscriptions, logging and completions; not what it cannot carry
/// (experimental and unknown capabilities).
fn mirror_capabilities(upstream: &ServerCapabilities) -> ServerCapabilities {
    let listed = |_: &ListChangedCapability| ListChangedCapability { list_changed: Some(true), extra: Map::new() };
    ServerCapabilities {
        tools: upstream.tools.as_ref().map(listed),
        prompts: upstream.prompts.as_ref().map(listed),
        resources: upstream.resources.as_ref().map(|resources| ResourcesCapability {
            subscribe: resources.subscribe.filter(|on| *on),
            list_changed: Some(true),
            extra: Map::new(),
        }),
        logging: upstream.logging.as_ref().map(|_| json!({})),
        completions: upstream.completions.as_ref().map(|_| json!({})),
        experimental: None,
        extra: Map::new(),
    }
}

/// The notification line a backend event becomes for a client that logs at `level` (`None`:
/// no log messages), or `None` when it becomes nothing.
pub(crate) fn event_line(event: &BackendEvent, level: Option<LoggingLevel>) -> Option<String> {
    match event {
        BackendEvent::ToolsChanged => Some(list_changed_line(methods::TOOLS_LIST_CHANGED)),
        BackendEvent::ResourcesChanged => Some(list_changed_line(methods::RESOURCES_LIST_CHANGED)),
        BackendEvent::PromptsChanged => Some(list_changed_line(methods::PROMPTS_LIST_CHANGED)),
        BackendEvent::Log { server, params } => {
            let wanted = level?;
            let said = LoggingLevel::parse(&params.level)?;
            if said < wanted {
                return None;
            }
            let mut params = params.clone();
            params.logger = Some(match &params.logger {
                Some(logger) => format!("{server}/{logger}"),
                None => server.clone(),
            });
            mcp_protocol::encode_notification(methods::MESSAGE, Some(&params)).ok()
        }
        _ => None,
    }
}

/// A `notifications/*/list_changed` line.
pub(crate) fn list_changed_line(method: &str) -> String {
    format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#)
}

/// The response line answering request `id` with `reply` (a stateless result says it is
/// complete).
pub(crate) fn response_line(id: &RequestId, reply: Reply, stateless: bool) -> String {
    // A stateless (2026-07-28) result says it is complete: `{"resultType":"complete",...}`.
    let (json, complete) = match reply {
        Reply::Result(json) => (json, stateless),
        Reply::Typed(json) => (json, false),
        Reply::Error(error) => return mcp_protocol::encode_error(id.clone(), error),
        Reply::Listen(_) => {
            return mcp_protocol::encode_error(
                id.clone(),
                ErrorObject::new(error_codes::INTERNAL_ERROR, "subscriptions/listen is not available here"),
            );
        }
    };
    const HEAD: &str = r#"{"jsonrpc":"2.0","id":"#;
    const RESULT: &str = r#","result":"#;
    const COMPLETE: &str = r#"{"resultType":"complete""#;
    let id_json = serde_json::to_string(id).unwrap_or_else(|_| "null".to_owned());
    let marked = json.strip_prefix('{').filter(|_| complete);
    let result_len = match marked {
        Some("}") => COMPLETE.len() + 1,
        Some(rest) => COMPLETE.len() + 1 + rest.len(),
        None => json.len(),
    };
    // Built at its size: a result may be large, and growing into it copies it again each time.
    let mut line = String::with_capacity(HEAD.len() + id_json.len() + RESULT.len() + result_len + 1);
    line.push_str(HEAD);
    line.push_str(&id_json);
    line.push_str(RESULT);
    match marked {
        Some("}") => {
            line.push_str(COMPLETE);
            line.push('}');
        }
        Some(rest) => {
            line.push_str(COMPLETE);
            line.push(',');
            line.push_str(rest);
        }
        None => line.push_str(&json),
    }
    line.push('}');
    line
}

/// What identifies a 2026-07-28 client across its requests: its caller (principal and
/// profile) and the `clientInfo.name` it sends (the scope of its approvals and of its tool
/// selection).
fn stateless_key(scope: &Scope) -> String {
    format!("client:{}\n{}", scope.caller.key(), scope.client_name())
}

fn to_json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).unwrap_or_else(|_| "{}".to_owned())
}

/// A tool's failure as the caller reads it: an error result, cleaned and capped.
fn tool_error(text: &str) -> Reply {
    let text = mcp_safety::text::sanitize(text, ERROR_TEXT_CHARS);
    Reply::Result(to_json(&CallToolResult {
        content: vec![ContentBlock::text(text)],
        is_error: Some(true),
        ..Default::default()
    }))
}

/// An unknown tool, and a denied one alike (nothing says a denied tool exists).
fn unknown_tool(name: &str) -> Reply {
    Reply::Error(ErrorObject::new(
        error_codes::INVALID_PARAMS,
        format!("Unknown tool: {}", mcp_safety::text::one_line(name, 100)),
    ))
}

pub(crate) fn backend_error(error: &BackendError) -> ErrorObject {
    let code = match error {
        BackendError::NotOffered(_) | BackendError::NoSuchServer(_) | BackendError::Forbidden(_) => {
            error_codes::INVALID_PARAMS
        }
        _ => error_codes::INTERNAL_ERROR,
    };
    ErrorObject::new(code, mcp_safety::text::sanitize(&error.to_string(), ERROR_TEXT_CHARS))
}

/// The page a cursor asks for: (first index, how many). Cursors are `{key}:{offset}`, the key
/// naming the list (its revision); one of another list is refused, so a client never pages
/// across two lists.
fn page(cursor: Option<&str>, key: &str, total: usize, size: usize) -> Result<(usize, usize), ErrorObject> {
    let start = match cursor {
        None => 0,
        Some(cursor) => {
            let parsed = cursor
                .rsplit_once(':')
                .and_then(|(k, o)| Some((k, o.parse::<usize>().ok()?)))
                .filter(|(k, o)| *k == key && *o <= total);
            match parsed {
                Some((_, offset)) => offset,
                None => {
                    return Err(ErrorObject::new(
                        error_codes::INVALID_PARAMS,
                        "Invalid params: the cursor is not valid (the list changed since); list again from the start",
                    ));
                }
            }
        }
    };
    Ok((start, size.max(1).min(total - start)))
}

#[derive(Debug, Clone, Copy)]
enum Listed {
    Resources,
    Templates,
    Prompts,
}

/// A listing's page, borrowed from the pool or the content view.
#[derive(Serialize, Default)]
#[serde(rename_all = "camelCase")]
struct ListOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    tools: Option<Vec<ToolOut<'a>>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<&'a [mcp_protocol::Resource]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    resource_templates: Option<&'a [mcp_protocol::ResourceTemplate]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompts: Option<&'a [mcp_protocol::Prompt]>,
    #[serde(skip_serializing_if = "Option::is_none")]
    next_cursor: Option<String>,
}

/// The calls a built-in tool (code mode's `run_code`) makes for one client's call: each passes
/// the rate limits and the gate as the client's own `tools/call` would (policy, a `confirm`
/// asked of the same client, the arguments against the schema, the generation at the last
/// moment), under the binding the built-in was admitted with. Each has its audit line, naming
/// the client's call as its `parent`, beside the line of the client's call.
struct ScriptCalls<'a> {
    gateway: &'a Gateway,
    caller: &'a Caller,
    /// The client's session (its audit tag) and name, for the audit lines.
    session: Option<String>,
    client: String,
    binding: &'a Arc<Binding>,
    /// The script's `tools.search`, when some tools wait behind search for this client.
    search: Option<StepSearch>,
    parent: String,
    /// How the client is asked about a script's `confirm` calls.
    ctx: Arc<CallContext>,
    /// Who answers the questions upstreams ask while a script's call runs: the script's client.
    asker: Arc<dyn CallAsker>,
}

#[async_trait]
impl InnerCalls for ScriptCalls<'_> {
    fn binding(&self) -> &Arc<Binding> {
        self.binding
    }

    fn parent(&self) -> &str {
        &self.parent
    }

    fn search(&self) -> Option<&StepSearch> {
        self.search.as_ref()
    }

    /// As a call of the client's `search_tools`: the hooks are told (a failing one refuses it); what is
    /// found is callable in the script alone, nothing is selected for the client.
    async fn find(&self, id: &str, query: &str, limit: Option<usize>) -> Result<SearchResults, InnerError> {
        let Some(search) = &self.search else {
            let why = "no tool waits behind search for this client".to_owned();
            return Err(InnerError::Refused(Refusal::NotExposed { name: SEARCH_TOOL.to_owned(), why }));
        };
        let mut arguments = json!({ "query": query });
        if let Some(limit) = limit {
            arguments["limit"] = limit.into();
        }
        let info = CallInfo { id: id.to_owned(), name: SEARCH_TOOL.to_owned(), server: None, arguments };
        let decision = GateDecision::new(CallDecision::Allowed, SEARCH_REASON);
        if let Err(why) = self.gateway.inner.gate.tell_hooks(&info, &decision) {
            return Err(InnerError::Refused(Refusal::Blocked { name: SEARCH_TOOL.to_owned(), why }));
        }
        Ok(search.find(query, limit))
    }

    async fn call(&self, id: &str, name: &str, arguments: &Value) -> InnerResult {
        let Some(sink) = self.gateway.inner.options.audit.clone() else {
            return self.decide_and_run(id, name, arguments).await.0;
        };
        let started = self.gateway.now_ms();
        let (result, decision, rule) = self.decide_and_run(id, name, arguments).await;
        if sink.counts_only() {
            sink.count(decision);
            return result;
        }
        let outcome = match &result {
            Ok(result) if !result.is_error() => crate::audit::AuditOutcome::Ok,
            _ => crate::audit::AuditOutcome::ToolError,
        };
        let record = crate::audit::AuditRecord {
            time: crate::audit::rfc3339(started),
            caller: self.caller.principal.as_deref().map(str::to_owned),
            profile: self.caller.profile.as_deref().map(str::to_owned),
            session: self.session.clone(),
            client: self.client.clone(),
            tool: mcp_safety::text::one_line(name, 200),
            decision,
            rule: mcp_safety::text::one_line(&rule, 1000),
            duration_ms: self.gateway.now_ms().saturating_sub(started),
            outcome,
            arguments_sha256: crate::audit::arguments_digest(arguments),
            arguments: (sink.arguments() == crate::audit::AuditArguments::Values).then(|| arguments.clone()),
            parent: Some(self.parent.clone()),
        };
        sink.record(&record);
        result
    }
}

impl ScriptCalls<'_> {
    /// One call of the script through the limits and the gate, and how it was decided (for
    /// its audit line).
    async fn decide_and_run(&self, id: &str, name: &str, arguments: &Value) -> (InnerResult, CallDecision, String) {
        let inner = &self.gateway.inner;
        if self.binding.pool().get(name).is_some_and(|entry| entry.server().is_none()) {
            // A built-in (the calling one included) is never reached from inside one.
            let why = "built-in tools cannot be called from a script".to_owned();
            let refusal = Refusal::NotExposed { name: name.to_owned(), why };
            let (decision, rule) = (refusal.decision(), refusal.reason());
            return (Err(InnerError::Refused(refusal)), decision, rule);
        }
        // Held until the call ends, as for the client's own calls.
        let _permit = match &inner.options.limiter {
            Some(limiter) => match limiter.admit(self.caller, name).await {
                Ok(permit) => Some(permit),
                Err(refused) => {
                    let why = refused.to_string();
                    return (Err(InnerError::Limited(why.clone())), CallDecision::Rejected, why);
                }
            },
            None => None,
        };
        let approver = ClientApprover { shared: Arc::clone(&inner.approver), ctx: Arc::clone(&self.ctx) };
        let context = agent_loop::CallContext::new()
            .with_caller(self.ctx.scope.clone())
            .with_parent(self.parent.as_str())
            .with_approver(Arc::new(approver));
        let asking = inner.backend.tools_for(Arc::clone(&self.asker));
        let tools = asking.as_deref().unwrap_or_else(|| inner.backend.tools());
        let request = CallRequest { id, name, arguments };
        let admission = inner.gate.admit_with(self.binding, tools, request, &context).await;
        let (mut decision, mut rule) = (admission.decision(), admission.reason());
        let result = match admission {
            Admission::Run { job, .. } => match inner.gate.run(tools, job, None).await {
                Ran::Mcp(Ok(result)) => Ok(result),
                Ran::Mcp(Err(error)) => Err(InnerError::Source(error)),
                Ran::Refused(refusal) => {
                    // Refused at the last moment (its server changed): that is the decision.
                    (decision, rule) = (refusal.decision(), refusal.reason());
                    Err(InnerError::Refused(refusal))
                }
                _ => Err(InnerError::Refused(Refusal::NoHandler { name: name.to_owned() })),
            },
            Admission::Refused(refusal) => Err(InnerError::Refused(refusal)),
            Admission::Deferred { name, reason } => Err(InnerError::Deferred { name, reason }),
            _ => Err(InnerError::Refused(Refusal::NoHandler { name: name.to_owned() })),
        };
        (result, decision, rule)
    }
}

/// A tool as listed downstream, borrowed from the pool.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ToolOut<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    title: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    description: Option<Cow<'a, str>>,
    input_schema: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    output_schema: Option<&'a Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    annotations: Option<&'a ToolAnnotations>,
    #[serde(skip_serializing_if = "Option::is_none")]
    icons: Option<&'a Vec<mcp_protocol::Icon>>,
}

impl<'a> ToolOut<'a> {
    /// A tool of the gateway's own (`search_tools`).
    fn spec(spec: &'a ToolSpec) -> Self {
        ToolOut {
            name: &spec.name,
            title: None,
            description: Some(Cow::Borrowed(&spec.description)),
            input_schema: &spec.input_schema,
            output_schema: None,
            annotations: None,
            icons: None,
        }
    }

    /// `entry` as listed; `described` is a built-in's description for this pool, when it
    /// writes one.
    fn new(entry: PoolEntry<'a>, transparent: bool, described: Option<String>) -> Self {
        match entry.origin() {
            Origin::Mcp { tool, .. } => ToolOut {
                name: entry.name(),
                title: tool.title.as_deref(),
                // Marked with its server, unless the gateway is transparent.
                description: if transparent {
                    tool.description.as_deref().map(Cow::Borrowed)
                } else {
                    Some(Cow::Borrowed(entry.description()))
                },
                input_schema: entry.input_schema(),
                output_schema: tool.output_schema.as_ref(),
                annotations: tool.annotations.as_ref(),
                icons: tool.icons.as_ref(),
            },
            Origin::Builtin(_) => ToolOut {
                name: entry.name(),
                title: None,
                description: Some(described.map_or(Cow::Borrowed(entry.description()), Cow::Owned)),
                input_schema: entry.input_schema(),
                output_schema: None,
                annotations: None,
                icons: None,
            },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pages_and_cursors() {
        assert_eq!(page(None, "3", 5, 2), Ok((0, 2)));
        assert_eq!(page(Some("3:4"), "3", 5, 2), Ok((4, 1)));
        assert_eq!(page(Some("3:5"), "3", 5, 2), Ok((5, 0)));
        assert!(page(Some("2:2"), "3", 5, 2).is_err(), "another revision");
        assert!(page(Some("3:9"), "3", 5, 2).is_err());
        assert!(page(Some("junk"), "3", 5, 2).is_err());
        assert_eq!(page(None, "1", 0, 10), Ok((0, 0)));
        // A selection's version is part of the key.
        assert_eq!(page(Some("3.1:2"), "3.1", 5, 2), Ok((2, 2)));
        assert!(page(Some("3.1:2"), "3.2", 5, 2).is_err(), "another selection");
    }

    #[test]
    fn stateless_results_say_they_are_complete() {
        let id = RequestId::Number(1);
        assert_eq!(
            response_line(&id, Reply::Result("{}".into()), true),
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete"}}"#
        );
        assert_eq!(
            response_line(&id, Reply::Result(r#"{"tools":[]}"#.into()), true),
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"complete","tools":[]}}"#
        );
        assert_eq!(
            response_line(&id, Reply::Result(r#"{"tools":[]}"#.into()), false),
            r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#
        );
        // A typed result (an `input_required`) says what it is itself.
        assert_eq!(
            response_line(&id, Reply::Typed(r#"{"resultType":"input_required"}"#.into()), true),
            r#"{"jsonrpc":"2.0","id":1,"result":{"resultType":"input_required"}}"#
        );
        let named = RequestId::String("a\"b".into());
        let line = response_line(&named, Reply::Result(r#"{"x":1}"#.into()), true);
        assert_eq!(line, r#"{"jsonrpc":"2.0","id":"a\"b","result":{"resultType":"complete","x":1}}"#);
        assert_eq!(line.len(), line.capacity(), "built at its size");
    }

    #[test]
    fn log_messages_follow_the_clients_level() {
        let event = BackendEvent::Log {
            server: "files".into(),
            params: serde_json::from_value(json!({"level": "warning", "data": "x"})).unwrap_or_else(|_| unreachable!()),
        };
        assert_eq!(event_line(&event, None), None);
        assert_eq!(event_line(&event, Some(LoggingLevel::Error)), None);
        let line = event_line(&event, Some(LoggingLevel::Info)).unwrap_or_default();
        assert!(line.contains(r#""logger":"files""#), "{line}");
    }
}
