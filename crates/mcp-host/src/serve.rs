//! The host as the gateway's backend: [`HostBackend`] implements `mcp_gateway`'s
//! [`Backend`] port over the living [`Runtime`] (the supervised servers, the configuration
//! watched with its one publisher, the policy), as `runtime/source.rs` makes the same runtime
//! the agent loop's `ToolSource`. `mcp-harness serve` is this backend behind the gateway's
//! fronts.
//!
//! - **The pool.** The backend keeps a catalog of its own, named for other hosts
//!   ([`tool_pool::Naming::Gateway`], `{server}__{tool}`; or, transparent, the one server's own
//!   names). A binding is the catalog bound to the runtime: the same `Arc` while nothing
//!   changed, so `tools/list` is served from the published pool with no upstream round trip.
//! - **Changes.** A publisher task rebinds whenever something may have changed: a server's
//!   state (connected, failed, disabled, restarted, reconnected), the configuration file (read
//!   and published by the runtime's one publisher, as for `chat`), an upstream's own
//!   `list_changed` (heard by the `tap`). A binding with a new pool becomes
//!   [`BackendEvent::ToolsChanged`]; the resources and prompts every server lists become a
//!   [`ContentListing`], and a change of them `ResourcesChanged` / `PromptsChanged`; upstream
//!   log messages become [`BackendEvent::Log`].
//! - **Transparent.** `--transparent` fronts exactly one enabled server (refused at start
//!   otherwise, naming them); only its tools are listed, under their own names, and the
//!   gateway mirrors its capabilities and instructions ([`Backend::mirrored`]). A server added
//!   to the file later is not offered.
//!
//! - **Code mode.** With `[serve] code_mode = "on"` (and not transparent) the pool carries the
//!   built-in `run_code` ([`crate::RunCode`]), whose handler [`Backend::builtins`] hands the
//!   gateway: its scripts' calls go through the gateway's gate for the calling client.
//!
//! - **Budgets and tool search.** The pool is shown to clients through the agent's exposure
//!   stage ([`Backend::exposure`]): the same `[tools]` keys and per-server `tool_search`,
//!   `always_load`, `tool_budget`, `server_budget`, read at start as `run` and `chat` read
//!   them. The downstream model is unknown, so `auto` uses the default threshold (a tenth of a
//!   200,000-token window, 80,000 bytes). Not with `--transparent`, which offers its one
//!   server as it is.
//!
//! - **Upstreams' own requests.** Every upstream is told the gateway can elicit (forms) and
//!   sample; its `elicitation/create` and `sampling/createMessage` go to the client of the call
//!   in flight on it ([`Backend::tools_for`], `asks`), which asks its client when that client
//!   declared the capability and declines otherwise. `roots/list` is answered with no roots.

mod asks;
mod tap;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use agent_loop::{Binding, BoundCall, Catalog, Listing, SourceError, ToolSource};
use async_trait::async_trait;
use mcp_client::{ClientError, ServerState, SetCallError};
use mcp_gateway::{
    Backend, BackendError, BackendEvent, Caller, ContentListing, ExposureSettings, ServerContent, Upstream,
};
use mcp_protocol::{
    CallToolResult, CompleteRequestParams, CompleteResult, GetPromptResult, ReadResourceResult, Resource,
    ResourceTemplate, error_codes,
};
use mcp_safety::lock;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};
use tokio::task::JoinHandle;
use tool_pool::Naming;

use self::tap::Tap;
use crate::config::{Config, ConfigPath};
use crate::{Ports, Runtime, RuntimeOptions};

/// How long a listing after an edit waits for the local servers it added (see
/// [`RuntimeOptions::added_wait`]).
const ADDED_WAIT: Duration = Duration::from_secs(2);

/// How a [`HostBackend`] runs.
#[derive(Clone, Default)]
#[non_exhaustive]
pub struct ServeOptions {
    /// The host's ports: [`Ports::events`] hears the runtime's events (reloads, a kernel
    /// without Landlock). Servers' requests go to the calling clients whatever
    /// [`Ports::requests`] says.
    pub ports: Ports,
    /// The configuration file to watch and reload (`None`: never reloaded).
    pub reload: Option<ConfigPath>,
    /// Front exactly one server, under its own names, mirroring its capabilities.
    pub transparent: bool,
    /// A further readiness check of the front's own (a shared store that must answer),
    /// asked by [`Backend::ready`] after the backend's own checks; `Err` says what is missing.
    pub readiness: Option<Readiness>,
}

/// A readiness check: cheap and non-blocking (`/readyz` calls it), so one that needs I/O
/// answers from what a task of its own last saw.
pub type Readiness = Arc<dyn Fn() -> Result<(), String> + Send + Sync>;

impl std::fmt::Debug for ServeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServeOptions")
            .field("reload", &self.reload)
            .field("transparent", &self.transparent)
            .field("readiness", &self.readiness.is_some())
            .finish_non_exhaustive()
    }
}

/// Why the backend did not start.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// `--transparent` with other than exactly one enabled server.
    #[error(
        "--transparent offers one server's tools under their own names, so it needs exactly one enabled server; \
         the configuration enables {}{}. Disable the others (`mcp-harness mcp disable NAME`) or serve without \
         --transparent (names become SERVER__TOOL)",
        .enabled.len(),
        if .enabled.is_empty() { String::new() } else { format!(": {}", .enabled.join(", ")) }
    )]
    Transparent {
        /// The enabled servers.
        enabled: Vec<String>,
    },
}

/// The host behind the gateway (see the module docs).
pub struct HostBackend {
    runtime: Arc<Runtime>,
    /// The one server of a transparent gateway.
    only: Option<OnlyServer>,
    /// What [`HostBackend::source`] is, shared: what one call's [`asks::AskingSource`] wraps.
    shared: Arc<dyn ToolSource>,
    /// The clients asked on behalf of each upstream, by the calls in flight.
    askers: Arc<self::asks::Askers>,
    catalog: Catalog,
    tap: Arc<Tap>,
    events: broadcast::Sender<BackendEvent>,
    /// The newest pool revision clients were told about.
    announced: AtomicU64,
    content: tokio::sync::Mutex<Option<Arc<ContentListing>>>,
    /// `true` once the first binding was published (listings wait for it).
    published: watch::Sender<bool>,
    /// Until when listings wait for the first publication (then they bind on their own).
    first_deadline: tokio::time::Instant,
    publisher: Mutex<Option<JoinHandle<()>>>,
    closed: AtomicBool,
    readiness: Option<Readiness>,
    /// The built-in tools the pool carries (`run_code` with `[serve] code_mode = "on"`).
    builtins: Vec<Arc<dyn agent_loop::BuiltinTool>>,
    /// Budgets and tool search for clients, read at start (`None` when transparent).
    exposure: Option<ExposureSettings>,
}

impl std::fmt::Debug for HostBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBackend")
            .field("runtime", &self.runtime)
            .field("transparent", &self.only.as_ref().map(|o| o.server.as_str()))
            .finish_non_exhaustive()
    }
}

impl HostBackend {
    /// Starts the runtime of `config` and the publisher (needs a tokio runtime). The first
    /// listing waits for every server's first attempt, at most `config.serve.startup_wait`.
    pub fn start(config: Config, options: ServeOptions) -> Result<Arc<Self>, ServeError> {
        let only = if options.transparent {
            let enabled: Vec<String> = config.servers.iter().filter(|s| s.enabled).map(|s| s.name.clone()).collect();
            match enabled.as_slice() {
                [one] => Some(one.clone()),
                _ => return Err(ServeError::Transparent { enabled }),
            }
        } else {
            None
        };
        let (events, _) = broadcast::channel(256);
        let tap = Tap::new(events.clone());
        let mut ports = options.ports;
        // Each upstream's requests go to the client of its call in flight (see the module docs).
        let askers = Arc::new(self::asks::Askers::default());
        let routed = Arc::clone(&askers);
        ports.requests = Some(Arc::new(move |settings: &crate::config::ServerSettings| {
            self::asks::requests(&settings.name, &routed)
        }));
        let wrap = Arc::clone(&tap);
        ports.connectors = Some(Arc::new(move |server: &str, connector| wrap.wrap(server, connector)));
        // A server added to the file joins when it connects, announced by the publisher: a
        // listing waits for it only briefly (clients' requests are behind it).
        let runtime_options = RuntimeOptions { ports, reload: options.reload, added_wait: ADDED_WAIT };
        // A transparent gateway offers exactly the one server's tools, so no built-in.
        let code_limits = (config.serve.code_mode && only.is_none()).then(|| config.tools.code_limits.clone());
        let tool_budget = config.tools.tool_budget;
        // As for `run` and `chat`, read at start. The downstream model is unknown, so `auto`
        // keeps the default threshold (a 200,000-token window's tenth).
        let exposure = only.is_none().then(|| {
            let mut settings = ExposureSettings::new(config.exposure());
            settings.max_loaded = config.tools.max_loaded.unwrap_or(agent_loop::DEFAULT_MAX_LOADED);
            settings
        });
        let policy = config.policy.clone();
        let startup_wait = config.serve.startup_wait;
        let runtime = Arc::new(Runtime::start(config, runtime_options));
        let mut builtins: Vec<Arc<dyn agent_loop::BuiltinTool>> = Vec::new();
        if let Some(limits) = code_limits {
            // Which servers a script reaches follows the running configuration (reloads too).
            let running = Arc::clone(&runtime);
            let scope: crate::ScopeSource = Arc::new(move || running.config().serve_code_scope());
            // As for `run` and `chat`: the declarations fill one tool's budget, less the room
            // of its name and input schema.
            builtins.push(Arc::new(crate::RunCode::new(limits, scope, tool_budget.saturating_sub(512))));
        }
        let specs: Vec<tool_pool::BuiltinTool> = builtins.iter().map(|b| b.spec()).collect();
        let catalog = Catalog::new(Arc::from(specs), policy, pool_options(only.is_some()));
        // Subscribed before the backend exists, so no state change is missed in between.
        let states = runtime.servers().subscribe();
        let backend = Arc::new({
            let only = only.map(|server| OnlyServer { runtime: Arc::clone(&runtime), server });
            let shared: Arc<dyn ToolSource> = match &only {
                Some(only) => Arc::new(only.clone()),
                None => Arc::clone(&runtime) as Arc<dyn ToolSource>,
            };
            HostBackend {
                only,
                shared,
                askers,
                runtime,
                catalog,
                tap,
                events,
                announced: AtomicU64::new(0),
                content: tokio::sync::Mutex::new(None),
                published: watch::channel(false).0,
                first_deadline: tokio::time::Instant::now() + startup_wait + Duration::from_secs(5),
                publisher: Mutex::new(None),
                closed: AtomicBool::new(false),
                readiness: options.readiness,
                builtins,
                exposure,
            }
        });
        // Spawned once the backend is whole: a publisher started inside `Arc::new_cyclic` could
        // run on another worker before the backend exists, find it gone and never publish
        // (the first listing then waited for its deadline and `/readyz` never said ready).
        let publisher = tokio::spawn(publish(
            Arc::downgrade(&backend),
            Arc::clone(&backend.runtime),
            Arc::clone(&backend.tap),
            states,
            startup_wait,
        ));
        *lock(&backend.publisher) = Some(publisher);
        Ok(backend)
    }

    /// The options its pool is assembled with (the gateway's naming): what a
    /// [`mcp_gateway::Profiled`] wrapper assembles its profiles' pools with.
    pub fn pool_options(&self) -> tool_pool::Options {
        pool_options(self.only.is_some())
    }

    /// The runtime (its servers' states, the `/mcp` operations).
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// Stops publishing and closes every server (each reaped); listings fail from then on.
    pub async fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        if let Some(publisher) = lock(&self.publisher).take() {
            publisher.abort();
        }
        let servers = self.runtime.servers();
        let names: Vec<String> = servers.states().into_iter().map(|(name, _)| name).collect();
        futures_util::future::join_all(names.iter().map(|name| servers.remove(name))).await;
    }

    fn source(&self) -> &dyn ToolSource {
        match &self.only {
            Some(only) => only,
            None => &*self.runtime,
        }
    }

    /// The servers whose content is offered: the connected ones (the one, when transparent).
    fn offered(&self) -> Vec<String> {
        let connected = self.runtime.servers().connected();
        match &self.only {
            Some(only) => connected.into_iter().filter(|s| *s == only.server).collect(),
            None => connected,
        }
    }

    /// Binds the catalog to the runtime now (a reload first, when the file changed) and tells
    /// clients when the pool is new.
    async fn rebind(&self) -> Result<Arc<Binding>, BackendError> {
        if self.closed.load(Ordering::SeqCst) {
            return Err(BackendError::Upstream("the gateway is shutting down".to_owned()));
        }
        let binding = self.catalog.bind(self.source()).await.map_err(|e| BackendError::Upstream(e.to_string()))?;
        let revision = binding.assembled();
        let told = self.announced.fetch_max(revision, Ordering::SeqCst);
        // The first pool is no change; one older than what was told is none either.
        if told != 0 && revision > told {
            let _ = self.events.send(BackendEvent::ToolsChanged);
        }
        Ok(binding)
    }

    /// The content listing, listed again first when an upstream announced a change or
    /// (re)connected since, or the publisher asked; a change is told to clients.
    async fn current_content(&self) -> Arc<ContentListing> {
        let mut cached = self.content.lock().await;
        let dirty = self.tap.content_dirty.swap(false, Ordering::SeqCst);
        if let Some(current) = cached.as_ref()
            && !dirty
        {
            return Arc::clone(current);
        }
        let fresh = Arc::new(self.list_content().await);
        if let Some(old) = cached.as_ref() {
            let resources = |l: &ContentListing| -> Vec<(String, Vec<Resource>, Vec<ResourceTemplate>)> {
                l.servers.iter().map(|(s, c)| (s.clone(), c.resources.clone(), c.templates.clone())).collect()
            };
            let prompts = |l: &ContentListing| -> Vec<(String, Vec<mcp_protocol::Prompt>)> {
                l.servers.iter().map(|(s, c)| (s.clone(), c.prompts.clone())).collect()
            };
            if resources(old) != resources(&fresh) {
                let _ = self.events.send(BackendEvent::ResourcesChanged);
            }
            if prompts(old) != prompts(&fresh) {
                let _ = self.events.send(BackendEvent::PromptsChanged);
            }
        }
        *cached = Some(Arc::clone(&fresh));
        fresh
    }

    async fn list_content(&self) -> ContentListing {
        let servers = self.runtime.servers();
        let (_, policy) = self.runtime.policy();
        let mut listing = ContentListing::default();
        for server in self.offered() {
            let mut content = ServerContent::default();
            match servers.resource_catalog(&server).await {
                Ok(catalog) => {
                    // A resource policy denies is not offered (nor can it be read).
                    content.resources =
                        catalog.resources.iter().filter(|r| !denied(&policy, &server, &r.uri)).cloned().collect();
                    content.templates = catalog.templates.to_vec();
                }
                Err(e) => tracing::warn!(server = %server, "its resources are not offered: {e}"),
            }
            match servers.prompts(&server).await {
                Ok(prompts) => content.prompts = prompts,
                Err(e) => tracing::warn!(server = %server, "its prompts are not offered: {e}"),
            }
            content.completions = self.tap.handshake(&server).is_some_and(|h| h.capabilities.completions.is_some());
            listing.servers.insert(server, content);
        }
        listing
    }

    /// Waits for the first publication, until a deadline set at start (the publisher makes it
    /// within the startup wait): a publisher that is late delays the listings of the first
    /// seconds, never every listing.
    async fn first_published(&self) {
        // Every request asks; once published, no receiver and no timer (a timer wheel entry
        // per call otherwise).
        if *self.published.borrow() {
            return;
        }
        let mut published = self.published.subscribe();
        let _ = tokio::time::timeout_at(self.first_deadline, published.wait_for(|done| *done)).await;
    }

    /// Whether policy lets clients read (or subscribe to) `uri` of `server`: a denied resource
    /// does not exist for them, one that needs confirmation is refused (the gateway asks about
    /// tool calls only).
    fn check_resource(&self, server: &str, uri: &str) -> Result<(), BackendError> {
        let (_, policy) = self.runtime.policy();
        mcp_gateway::resource_allowed(server, uri, policy.decide_resource(server, uri).as_ref())
    }

    /// Whether `server` is one this backend offers (the one, when transparent).
    fn check_server(&self, server: &str) -> Result<(), BackendError> {
        match &self.only {
            Some(only) if only.server != server => Err(BackendError::NoSuchServer(server.to_owned())),
            _ => Ok(()),
        }
    }
}

impl Drop for HostBackend {
    fn drop(&mut self) {
        if let Some(publisher) = lock(&self.publisher).take() {
            publisher.abort();
        }
    }
}

/// The pool's options: the gateway's naming, or the one server's own names when transparent.
fn pool_options(transparent: bool) -> tool_pool::Options {
    let naming = if transparent { Naming::Transparent } else { Naming::Gateway };
    tool_pool::Options { naming, ..tool_pool::Options::default() }
}

/// Whether policy denies reading `uri` of `server`.
fn denied(policy: &policy::Policy, server: &str, uri: &str) -> bool {
    policy.decide_resource(server, uri).is_some_and(|v| v.decision == policy::Decision::Deny)
}

/// The shortest time between two publications of the pool.
const REPUBLISH_INTERVAL: Duration = Duration::from_millis(250);

/// The publisher: the first publication once every server made its first attempt (at most
/// `startup_wait`), then a publication whenever something may have changed.
async fn publish(
    backend: Weak<HostBackend>,
    runtime: Arc<Runtime>,
    tap: Arc<Tap>,
    mut states: broadcast::Receiver<mcp_client::ServerEvent>,
    startup_wait: Duration,
) {
    runtime.wait_first_attempts(startup_wait, &|_, _, _| {}).await;
    loop {
        {
            let Some(backend) = backend.upgrade() else {
                tracing::debug!("publisher: the backend is gone");
                return;
            };
            tracing::debug!("publisher: binding");
            if let Err(e) = backend.rebind().await {
                tracing::warn!("the tool pool could not be published: {e}");
            }
            tracing::debug!("publisher: listing content");
            backend.tap.content_dirty.store(true, Ordering::SeqCst);
            backend.current_content().await;
            backend.published.send_replace(true);
            tracing::debug!("publisher: published");
        }
        // At most one publication per interval: an upstream announcing changes without end
        // would otherwise be re-listed, and clients told, as fast as it can answer. What
        // changes meanwhile is published at the end of the interval (the signals wait).
        tokio::time::sleep(REPUBLISH_INTERVAL).await;
        tokio::select! {
            () = tap.changed.notified() => {}
            () = runtime.file_changed() => {}
            state = states.recv() => {
                if let Err(broadcast::error::RecvError::Closed) = state {
                    return;
                }
            }
        }
        // One publication covers every state change that came before it.
        loop {
            match states.try_recv() {
                Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(broadcast::error::TryRecvError::Empty) => break,
                Err(broadcast::error::TryRecvError::Closed) => return,
            }
        }
    }
}

/// A set-level failure as the gateway's clients read it.
fn backend_error(error: SetCallError) -> BackendError {
    match error {
        SetCallError::UnknownServer { server } => BackendError::NoSuchServer(server),
        SetCallError::Call { error: error @ ClientError::NotOffered { .. }, server } => {
            BackendError::NotOffered(format!("server {server:?}: {error}"))
        }
        SetCallError::Call { error: ClientError::Server { error, .. }, server }
            if matches!(error.code, error_codes::INVALID_PARAMS | -32002) =>
        {
            BackendError::NotOffered(format!("server {server:?}: {}", error.message))
        }
        other => BackendError::Upstream(other.to_string()),
    }
}

#[async_trait]
impl Backend for HostBackend {
    async fn binding(&self, _caller: &Caller) -> Result<Arc<Binding>, BackendError> {
        self.first_published().await;
        self.rebind().await
    }

    fn tools(&self) -> &dyn ToolSource {
        self.source()
    }

    fn tools_for(&self, asker: Arc<dyn mcp_gateway::CallAsker>) -> Option<Arc<dyn ToolSource>> {
        let askers = Arc::clone(&self.askers);
        Some(Arc::new(self::asks::AskingSource { inner: Arc::clone(&self.shared), askers, asker }))
    }

    fn builtins(&self) -> Vec<Arc<dyn agent_loop::BuiltinTool>> {
        self.builtins.clone()
    }

    fn exposure(&self) -> Option<ExposureSettings> {
        self.exposure.clone()
    }

    fn instructions(&self, _caller: &Caller) -> Vec<(String, String)> {
        self.source().instructions()
    }

    fn mirrored(&self, _caller: &Caller) -> Option<Upstream> {
        let only = self.only.as_ref()?;
        if !matches!(self.runtime.servers().state(&only.server), Some(ServerState::Connected { .. })) {
            return None;
        }
        let handshake = self.tap.handshake(&only.server)?;
        let mut upstream = Upstream::new(only.server.clone(), handshake.capabilities.clone());
        upstream.server_info = handshake.server_info.clone();
        upstream.instructions = handshake.instructions.clone();
        Some(upstream)
    }

    async fn content(&self, _caller: &Caller) -> Result<Arc<ContentListing>, BackendError> {
        self.first_published().await;
        Ok(self.current_content().await)
    }

    async fn read_resource(
        &self,
        _caller: &Caller,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, BackendError> {
        self.check_server(server)?;
        self.check_resource(server, uri)?;
        self.runtime.servers().read_resource(server, uri, max_bytes).await.map_err(backend_error)
    }

    async fn subscribe(&self, _caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.check_server(server)?;
        self.check_resource(server, uri)?;
        let params = serde_json::json!({ "uri": uri });
        let servers = self.runtime.servers();
        servers
            .request::<_, Value>(server, mcp_protocol::RESOURCES_SUBSCRIBE, Some(&params))
            .await
            .map_err(backend_error)?;
        Ok(())
    }

    async fn may_subscribe(&self, _caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.check_server(server)?;
        self.check_resource(server, uri)
    }

    fn offers(&self, _caller: &Caller, server: &str) -> bool {
        self.check_server(server).is_ok()
    }

    async fn unsubscribe(&self, _caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.check_server(server)?;
        let params = serde_json::json!({ "uri": uri });
        let servers = self.runtime.servers();
        servers
            .request::<_, Value>(server, mcp_protocol::RESOURCES_UNSUBSCRIBE, Some(&params))
            .await
            .map_err(backend_error)?;
        Ok(())
    }

    async fn get_prompt(
        &self,
        _caller: &Caller,
        server: &str,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult, BackendError> {
        self.check_server(server)?;
        self.runtime.servers().get_prompt(server, name, arguments).await.map_err(backend_error)
    }

    async fn complete(
        &self,
        _caller: &Caller,
        server: &str,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, BackendError> {
        self.check_server(server)?;
        let CompleteRequestParams { reference, argument, context, .. } = params;
        let context = context.and_then(|c| c.arguments);
        self.runtime
            .servers()
            .complete(server, reference, &argument.name, &argument.value, context)
            .await
            .map_err(backend_error)
    }

    fn ready(&self) -> Result<(), String> {
        if self.closed.load(Ordering::SeqCst) {
            return Err("shutting down".to_owned());
        }
        if !*self.published.borrow() {
            return Err("the servers' first listing is not published yet".to_owned());
        }
        // Names and states only: the probe answers before the Host check and without
        // authentication, and a failure's text can carry a command line or a path (it is in
        // the log and in `mcp-harness servers`).
        self.runtime.check_required().map_err(|e| {
            let failed: Vec<String> = e
                .failed
                .iter()
                .map(|(name, state)| format!("{} ({})", mcp_safety::text::one_line(name, 80), state.label()))
                .collect();
            format!("required servers not connected: {}", failed.join(", "))
        })?;
        match &self.readiness {
            Some(check) => check(),
            None => Ok(()),
        }
    }

    fn events(&self) -> broadcast::Receiver<BackendEvent> {
        self.events.subscribe()
    }
}

/// The runtime seen through one server: what a transparent gateway offers.
#[derive(Debug, Clone)]
struct OnlyServer {
    runtime: Arc<Runtime>,
    server: String,
}

impl OnlyServer {
    fn refuse(&self, server: &str, op: agent_loop::Operation) -> SourceError {
        SourceError::UnknownServer { op, server: server.to_owned() }
    }
}

#[async_trait]
impl ToolSource for OnlyServer {
    async fn refresh(&self) -> Listing {
        let mut listing = ToolSource::refresh(&*self.runtime).await;
        listing.servers.retain(|s| s.server.as_ref() == self.server);
        listing.generations.retain(|s, _| *s == self.server);
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        (server == self.server).then(|| ToolSource::generation(&*self.runtime, server)).flatten()
    }

    async fn settled_generation(&self, server: &str) -> Option<u64> {
        if server != self.server {
            return None;
        }
        ToolSource::settled_generation(&*self.runtime, server).await
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        if call.server != self.server {
            return Err(self.refuse(&call.server, agent_loop::Operation::CallTool { tool: call.tool.clone() }));
        }
        ToolSource::call_bound(&*self.runtime, call).await
    }

    async fn resource_servers(&self) -> Vec<String> {
        ToolSource::resource_servers(&*self.runtime).await.into_iter().filter(|s| *s == self.server).collect()
    }

    async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SourceError> {
        if server != self.server {
            return Err(self.refuse(server, agent_loop::Operation::ListResources));
        }
        ToolSource::resources(&*self.runtime, server).await
    }

    async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, SourceError> {
        if server != self.server {
            return Err(self.refuse(server, agent_loop::Operation::ReadResource { uri: uri.to_owned() }));
        }
        ToolSource::read_resource(&*self.runtime, server, uri, max_bytes).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        let mut all = ToolSource::instructions(&*self.runtime);
        all.retain(|(server, _)| *server == self.server);
        all
    }
}
