//! The **port** between the gateway and the host that owns the servers: what the gateway needs
//! to list, call and route, and nothing of how the host gets it.
//!
//! The host (`mcp-host`: the same configuration, runtime, supervisor, pool and policy as
//! `chat`) implements [`Backend`]; [`crate::fake::FakeBackend`] is the test double.

use std::collections::BTreeMap;
use std::sync::Arc;

use agent_loop::{Binding, BuiltinTool, Hooks, NoHooks, ToolSource};
use async_trait::async_trait;
use mcp_protocol::{
    CompleteRequestParams, CompleteResult, CreateMessageRequestParams, CreateMessageResult, ElicitRequestParams,
    ElicitResult, ErrorObject, GetPromptResult, Implementation, LoggingMessageNotificationParams, Prompt,
    ReadResourceResult, Resource, ResourceTemplate, ServerCapabilities,
};
use serde_json::{Map, Value};
use tokio::sync::broadcast;

/// Who is asking: what the front authenticated, and the profile the request was admitted to.
///
/// A local caller (stdio, or HTTP on loopback without authentication) has no principal. The
/// caller's token itself is never here: it is never sent upstream.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Caller {
    /// The authenticated principal (a token's name, a JWT's `sub`), `None` for a local caller.
    pub principal: Option<Arc<str>>,
    /// The profile (`/mcp/NAME`, or the one a token is tied to); `None` for the default.
    pub profile: Option<Arc<str>>,
}

impl Caller {
    /// A local caller of the default profile.
    pub fn local() -> Self {
        Self::default()
    }

    /// A caller authenticated as `principal`.
    pub fn principal(principal: impl Into<Arc<str>>) -> Self {
        Self { principal: Some(principal.into()), profile: None }
    }

    /// A stable text naming the caller, for sealed states and approval memory
    /// (`local`, `p:NAME`, with `@PROFILE` when there is one). Unambiguous: a principal's own
    /// `@` and `\` are escaped, so principal `bob@narrow` is never principal `bob` in profile
    /// `narrow`.
    pub fn key(&self) -> String {
        let mut key = self.principal_key();
        if let Some(profile) = &self.profile {
            key.push('@');
            key.push_str(profile);
        }
        key
    }

    /// [`Caller::key`] without the profile: whom a per-caller limit counts, whatever the
    /// profile it calls through.
    pub fn principal_key(&self) -> String {
        match &self.principal {
            Some(p) => format!("p:{}", p.replace('\\', "\\\\").replace('@', "\\@")),
            None => "local".to_owned(),
        }
    }
}

/// Why the backend could not answer. Its text is shown to the client, so it says what failed
/// and never carries a secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// No pool has been published yet (the host is still starting).
    #[error("the gateway is starting: no tool list has been published yet")]
    NotReady,
    /// The caller may not use this (another profile's server, say).
    #[error("not available to this caller: {0}")]
    Forbidden(String),
    /// No upstream by that name is connected.
    #[error("server {0:?} is not connected")]
    NoSuchServer(String),
    /// The upstream does not offer what was asked for.
    #[error("{0}")]
    NotOffered(String),
    /// The upstream failed or answered with an error; the text names the server and the cause.
    #[error("{0}")]
    Upstream(String),
}

/// Whether the resource rule `verdict` (if any) lets clients read or subscribe to `uri` of
/// `server`: a denied resource does not exist for them, one that needs confirmation is refused
/// (the gateway asks about tool calls only). The one rule for the host's policy and a
/// profile's overlay.
pub fn resource_allowed(server: &str, uri: &str, verdict: Option<&policy::Verdict>) -> Result<(), BackendError> {
    match verdict {
        Some(verdict) if verdict.decision == policy::Decision::Deny => {
            Err(BackendError::NotOffered(format!("server {server:?} has no resource {uri:?}")))
        }
        Some(verdict) if verdict.decision == policy::Decision::Confirm => Err(BackendError::Forbidden(format!(
            "reading {uri:?} of server {server:?} needs confirmation ({verdict}), which the gateway does not \
             ask for resources; allow it in the configuration's [policy] resources to offer it"
        ))),
        _ => Ok(()),
    }
}

/// What the host reports as it changes.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum BackendEvent {
    /// A new pool was published (an upstream's tools changed, one connected, failed or was
    /// disabled, policy was reloaded): clients should list again.
    ToolsChanged,
    /// An upstream's resources or resource templates changed.
    ResourcesChanged,
    /// An upstream's prompts changed.
    PromptsChanged,
    /// A resource an upstream said was updated (`notifications/resources/updated`).
    ResourceUpdated {
        /// The upstream.
        server: String,
        /// Its URI for the resource.
        uri: String,
    },
    /// An upstream's log message (forwarded at the level each client set).
    Log {
        /// The upstream.
        server: String,
        /// The message as it sent it.
        params: LoggingMessageNotificationParams,
    },
}

/// How the pools a backend publishes are shown to clients: the budgets and tool search of
/// the agent's exposure stage ([`tool_pool::expose`]), applied per client.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ExposureSettings {
    /// Budgets, search modes (global and per server), `always_load` servers, the `auto`
    /// threshold.
    pub options: tool_pool::ExposureOptions,
    /// Most tools one client keeps selected through `search_tools` (the least recently found
    /// go first), as the agent's `max_loaded_tools`.
    pub max_loaded: usize,
}

impl ExposureSettings {
    /// `options`, with the agent's default bound of selected tools.
    pub fn new(options: tool_pool::ExposureOptions) -> Self {
        Self { options, max_loaded: agent_loop::DEFAULT_MAX_LOADED }
    }
}

/// What one upstream offers besides tools, as the host last listed it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerContent {
    /// Its resources.
    pub resources: Vec<Resource>,
    /// Its resource templates.
    pub templates: Vec<ResourceTemplate>,
    /// Its prompts.
    pub prompts: Vec<Prompt>,
    /// Whether it declared `completions`.
    pub completions: bool,
}

/// How one upstream presented itself at its handshake: what a transparent gateway
/// (`--transparent`) mirrors instead of its own fixed set.
#[derive(Debug, Clone, Default, PartialEq)]
#[non_exhaustive]
pub struct Upstream {
    /// Its name in the host's configuration.
    pub server: String,
    /// Its `serverInfo`, when it sent one.
    pub server_info: Option<Implementation>,
    /// The capabilities it declared.
    pub capabilities: ServerCapabilities,
    /// Its `instructions`, raw (the gateway cleans and caps them).
    pub instructions: Option<String>,
}

impl Upstream {
    /// An upstream named `server` that declared `capabilities`.
    pub fn new(server: impl Into<String>, capabilities: ServerCapabilities) -> Self {
        Self { server: server.into(), capabilities, ..Self::default() }
    }
}

/// What every upstream a caller may use offers besides tools, by server name.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ContentListing {
    /// Each upstream's content.
    pub servers: BTreeMap<String, ServerContent>,
}

/// The downstream client of one tool call, as the upstream that runs the call reaches it: the
/// upstream's `elicitation/create` and `sampling/createMessage` sent while the call runs are
/// answered here ([`Backend::tools_for`]).
///
/// The gateway's implementation asks that call's client (on the call's own channel, within a
/// bounded time, the request cleaned and capped first) when it declared the capability, and
/// declines otherwise; it never asks another client.
#[async_trait]
pub trait CallAsker: std::fmt::Debug + Send + Sync {
    /// An upstream's `elicitation/create`.
    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject>;

    /// An upstream's `sampling/createMessage`.
    async fn create_message(&self, params: CreateMessageRequestParams) -> Result<CreateMessageResult, ErrorObject>;

    /// The client this asks (a session id, or the caller and client name): two calls with the
    /// same key may share the upstream's questions, two with different keys never do.
    fn client_key(&self) -> &str;
}

/// What the gateway needs from the host.
///
/// Implementations answer from what the host has published (listings are never an upstream
/// round trip per client request) and route the rest to the one upstream named. One failing
/// upstream fails only what is routed to it.
#[async_trait]
pub trait Backend: Send + Sync + 'static {
    /// The pool published for `caller`, with the generations it was built from and the
    /// policy it was assembled under. The same `Arc` until something changes.
    async fn binding(&self, caller: &Caller) -> Result<Arc<Binding>, BackendError>;

    /// The source of tools the gate checks generations against and sends calls through.
    fn tools(&self) -> &dyn ToolSource;

    /// The source one call runs through when its client can be asked on an upstream's behalf:
    /// the elicitation and sampling requests the upstream sends while this call runs go to
    /// `asker`, and to no other client. `None` (the default): calls run through
    /// [`Backend::tools`], and such requests are declined.
    fn tools_for(&self, _asker: Arc<dyn CallAsker>) -> Option<Arc<dyn ToolSource>> {
        None
    }

    /// The handlers of the built-in tools the published pools carry (`search_tools`, code
    /// mode's `run_code`, ...): the gateway's gate runs them as the host's does. By default none.
    fn builtins(&self) -> Vec<Arc<dyn BuiltinTool>> {
        Vec::new()
    }

    /// How pools are shown to clients: with settings, a client's `tools/list` holds what the
    /// exposure stage loads for it (within the budgets) and, when tools wait behind search,
    /// `search_tools`, whose answers select tools for that client alone. `None` (the
    /// default): every tool of the pool is listed.
    fn exposure(&self) -> Option<ExposureSettings> {
        None
    }

    /// The hooks around every call the gate lets through (the host's, an audit log). Read once,
    /// when the gateway is made. By default none.
    fn hooks(&self) -> Arc<dyn Hooks> {
        Arc::new(NoHooks)
    }

    /// The upstreams' `instructions` (server, raw text) that `caller` may see; the gateway
    /// cleans, caps and marks them.
    fn instructions(&self, _caller: &Caller) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The one upstream a transparent gateway fronts, as it presented itself (its connection
    /// now); `None` when there is not exactly one, or it is not connected. By default `None`.
    fn mirrored(&self, _caller: &Caller) -> Option<Upstream> {
        None
    }

    /// What the upstreams `caller` may use offer besides tools. By default nothing.
    async fn content(&self, _caller: &Caller) -> Result<Arc<ContentListing>, BackendError> {
        Ok(Arc::new(ContentListing::default()))
    }

    /// Reads `uri` (the upstream's own URI) of `server`, refusing answers over `max_bytes`.
    async fn read_resource(
        &self,
        _caller: &Caller,
        server: &str,
        _uri: &str,
        _max_bytes: usize,
    ) -> Result<ReadResourceResult, BackendError> {
        Err(BackendError::NotOffered(format!("server {server:?} offers no resources here")))
    }

    /// Gets prompt `name` (the upstream's own name) of `server`.
    async fn get_prompt(
        &self,
        _caller: &Caller,
        server: &str,
        _name: &str,
        _arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult, BackendError> {
        Err(BackendError::NotOffered(format!("server {server:?} offers no prompts here")))
    }

    /// Asks `server` for completions (`params` already carry the upstream's own prompt name or
    /// template).
    async fn complete(
        &self,
        _caller: &Caller,
        server: &str,
        _params: CompleteRequestParams,
    ) -> Result<CompleteResult, BackendError> {
        Err(BackendError::NotOffered(format!("server {server:?} offers no completions here")))
    }

    /// Subscribes to updates of `uri` (the upstream's own URI) of `server`
    /// (`resources/subscribe`); its updates then come as [`BackendEvent::ResourceUpdated`].
    /// The gateway subscribes once per upstream resource, however many clients subscribed,
    /// and routes each update to the clients that did. By default nothing can be subscribed.
    async fn subscribe(&self, _caller: &Caller, server: &str, _uri: &str) -> Result<(), BackendError> {
        Err(BackendError::NotOffered(format!("server {server:?} offers no resource subscriptions here")))
    }

    /// Whether `caller` may subscribe to `uri` of `server`: what [`Backend::subscribe`] checks
    /// before it asks the upstream, asked alone when another client holds that upstream
    /// subscription already (the caller must be let in on its own right). By default, yes.
    async fn may_subscribe(&self, _caller: &Caller, _server: &str, _uri: &str) -> Result<(), BackendError> {
        Ok(())
    }

    /// Whether `caller` is offered `server` at all (its profile's servers): an upstream's log
    /// messages and resource updates reach only the clients it is offered to. By default, yes.
    fn offers(&self, _caller: &Caller, _server: &str) -> bool {
        true
    }

    /// Ends the subscription [`Backend::subscribe`] made, when its last client let go
    /// (`resources/unsubscribe`, or the session ended). By default nothing to end.
    async fn unsubscribe(&self, _caller: &Caller, _server: &str, _uri: &str) -> Result<(), BackendError> {
        Ok(())
    }

    /// Whether `name` is a profile this backend serves (`/mcp/NAME`, or one a token is tied
    /// to). By default there are none.
    fn has_profile(&self, _name: &str) -> bool {
        false
    }

    /// Whether `caller` may use the profile it names (its principal is one of the profile's
    /// callers). By default every caller may.
    fn admits(&self, _caller: &Caller) -> bool {
        true
    }

    /// Whether the gateway is ready for traffic (`/readyz`): a pool published and every
    /// `required` upstream connected; `Err` says what is missing. By default ready.
    fn ready(&self) -> Result<(), String> {
        Ok(())
    }

    /// The host's changes, from now on. A receiver that lags loses the oldest events; the
    /// gateway then tells its clients that everything may have changed.
    fn events(&self) -> broadcast::Receiver<BackendEvent>;
}
