//! A fake [`Backend`]: upstreams in memory, behind the real pool, policy and call gate, for
//! tests and examples (the port's test double). Its tools answer with what they were called
//! with; a few names behave specially:
//!
//! - `slow`: waits `arguments.ms` milliseconds first (a call in flight to cancel or race; one
//!   dropped before its answer is recorded as cancelled, [`FakeBackend::cancelled`]);
//! - `progress`: reports progress twice before answering;
//! - `fail`: fails as an upstream failure does (no result);
//! - `ask`: asks the calling client (`elicitation/create`, a form with one string `name`, the
//!   message `arguments.message`) as an upstream does while a call runs, and answers with what
//!   the client said (the `ElicitResult`) or why asking failed (an error result);
//! - `sample`: asks the calling client to sample (`sampling/createMessage` with
//!   `arguments.prompt`), and answers with its result or why it failed.
//!
//! Without a client to ask ([`Backend::tools_for`] not used), `ask` is declined and `sample`
//! refused, as the host's default handler does.
//!
//! A resource whose URI ends with `#no-subscribe` refuses `resources/subscribe`; one ending with
//! `#hang` never answers it.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::{BoundCall, Catalog, Listing, Operation, SourceError, ToolSource};
use async_trait::async_trait;
use mcp_protocol::{
    CallToolResult, ContentBlock, CreateMessageRequestParams, ElicitRequestParams, ProgressNotificationParams,
    RequestId, SamplingMessage, Tool,
};
use policy::{Policy, PolicyConfig};
use serde_json::{Map, Value, json};
use tokio::sync::broadcast;
use tool_pool::{Naming, ServerTools};

use crate::backend::{
    Backend, BackendError, BackendEvent, CallAsker, Caller, ContentListing, ExposureSettings, ServerContent,
};
use crate::session::lock;

/// One call the fake upstreams received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedCall {
    /// The upstream.
    pub server: String,
    /// The tool's own name.
    pub tool: String,
    /// The arguments.
    pub arguments: Value,
}

/// A change of resource subscription the fake upstreams received.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReceivedSubscription {
    /// The upstream.
    pub server: String,
    /// Its URI for the resource.
    pub uri: String,
    /// `true` for `resources/subscribe`, `false` for `resources/unsubscribe`.
    pub subscribed: bool,
}

#[derive(Debug, Default)]
struct Upstreams {
    servers: BTreeMap<String, (Vec<Tool>, u64)>,
    calls: Vec<ReceivedCall>,
    /// `slow` calls dropped before they answered (what an upstream sees as cancelled).
    cancelled: Vec<ReceivedCall>,
    instructions: Vec<(String, String)>,
}

/// The fake upstreams, as a `ToolSource`.
#[derive(Debug, Default)]
struct FakeTools {
    upstreams: Mutex<Upstreams>,
}

#[async_trait]
impl ToolSource for FakeTools {
    async fn refresh(&self) -> Listing {
        let upstreams = lock(&self.upstreams);
        let mut listing = Listing::default();
        for (server, (tools, generation)) in &upstreams.servers {
            listing.generations.insert(server.clone(), *generation);
            listing.servers.push(ServerTools::new(server.as_str(), tools.clone()));
        }
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        lock(&self.upstreams).servers.get(server).map(|(_, g)| *g)
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        self.call_asking(call, None).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        lock(&self.upstreams).instructions.clone()
    }
}

impl FakeTools {
    /// A call, whose `ask` and `sample` put their questions to `asker` (declined without one).
    async fn call_asking(&self, call: BoundCall, asker: Option<&dyn CallAsker>) -> Result<CallToolResult, SourceError> {
        let arguments = Value::Object(call.arguments.clone().unwrap_or_default());
        {
            let mut upstreams = lock(&self.upstreams);
            if call.generation.is_some() && upstreams.servers.get(&call.server).map(|(_, g)| *g) != call.generation {
                return Err(SourceError::Stale { op: call_tool(&call.tool), server: call.server.clone() });
            }
            upstreams.calls.push(ReceivedCall {
                server: call.server.clone(),
                tool: call.tool.clone(),
                arguments: arguments.clone(),
            });
        }
        match call.tool.as_str() {
            "slow" => {
                let ms = arguments.get("ms").and_then(Value::as_u64).unwrap_or(1000);
                let received =
                    ReceivedCall { server: call.server.clone(), tool: call.tool.clone(), arguments: arguments.clone() };
                let unfinished = Unfinished { upstreams: &self.upstreams, call: Some(received) };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                unfinished.finished();
            }
            "progress" => {
                if let Some(progress) = &call.progress {
                    for step in 1..=2u32 {
                        let _ = progress.try_send(ProgressNotificationParams {
                            progress_token: RequestId::Number(0),
                            progress: f64::from(step),
                            total: Some(2.0),
                            message: Some(format!("step {step}")),
                            extra: Map::new(),
                        });
                    }
                }
            }
            "fail" => {
                return Err(SourceError::Closed {
                    op: call_tool(&call.tool),
                    server: call.server.clone(),
                    reason: "the server crashed".to_owned(),
                });
            }
            "ask" => return Ok(ask(asker, &arguments).await),
            "sample" => return Ok(sample(asker, &arguments).await),
            _ => {}
        }
        let said = json!({"server": call.server, "tool": call.tool, "arguments": arguments});
        Ok(CallToolResult { content: vec![ContentBlock::text(said.to_string())], ..Default::default() })
    }
}

/// A `slow` call under way: dropped before [`Unfinished::finished`], it is recorded as cancelled.
struct Unfinished<'a> {
    upstreams: &'a Mutex<Upstreams>,
    call: Option<ReceivedCall>,
}

impl Unfinished<'_> {
    fn finished(mut self) {
        self.call = None;
    }
}

impl Drop for Unfinished<'_> {
    fn drop(&mut self) {
        if let Some(call) = self.call.take() {
            lock(self.upstreams).cancelled.push(call);
        }
    }
}

/// The fake `ask`: an elicitation of the calling client.
async fn ask(asker: Option<&dyn CallAsker>, arguments: &Value) -> CallToolResult {
    let message = arguments.get("message").and_then(Value::as_str).unwrap_or("Who are you?");
    let form: ElicitRequestParams = match serde_json::from_value(json!({"message": message,
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}}))
    {
        Ok(form) => form,
        Err(e) => return failed(&e.to_string()),
    };
    let answer = match asker {
        Some(asker) => asker.elicit(form).await,
        None => Ok(mcp_protocol::ElicitResult {
            action: mcp_protocol::ElicitAction::Decline,
            content: None,
            extra: Map::new(),
        }),
    };
    match answer {
        Ok(result) => CallToolResult {
            content: vec![ContentBlock::text(serde_json::to_string(&result).unwrap_or_default())],
            ..Default::default()
        },
        Err(e) => failed(&format!("elicitation failed: {}", e.message)),
    }
}

/// The fake `sample`: a sampling request to the calling client.
async fn sample(asker: Option<&dyn CallAsker>, arguments: &Value) -> CallToolResult {
    let prompt = arguments.get("prompt").and_then(Value::as_str).unwrap_or("Say hello.");
    let request = CreateMessageRequestParams {
        messages: vec![SamplingMessage {
            role: "user".to_owned(),
            content: json!({"type": "text", "text": prompt}),
            extra: Map::new(),
        }],
        max_tokens: 100,
        system_prompt: None,
        model_preferences: None,
        extra: Map::new(),
    };
    let answer = match asker {
        Some(asker) => asker.create_message(request).await,
        None => Err(mcp_protocol::ErrorObject::new(-1, "This client does not allow servers to sample from its model")),
    };
    match answer {
        Ok(result) => CallToolResult {
            content: vec![ContentBlock::text(serde_json::to_string(&result).unwrap_or_default())],
            ..Default::default()
        },
        Err(e) => failed(&format!("sampling failed: {}", e.message)),
    }
}

fn failed(text: &str) -> CallToolResult {
    CallToolResult { content: vec![ContentBlock::text(text)], is_error: Some(true), ..Default::default() }
}

/// The fake upstreams as one call sees them: its `ask` and `sample` go to its client.
#[derive(Debug)]
struct AskingTools {
    tools: Arc<FakeTools>,
    asker: Arc<dyn CallAsker>,
}

#[async_trait]
impl ToolSource for AskingTools {
    async fn refresh(&self) -> Listing {
        self.tools.refresh().await
    }

    fn generation(&self, server: &str) -> Option<u64> {
        self.tools.generation(server)
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        self.tools.call_asking(call, Some(&*self.asker)).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        self.tools.instructions()
    }
}

fn call_tool(tool: &str) -> Operation {
    Operation::CallTool { tool: tool.to_owned() }
}

/// A [`Backend`] over upstreams in memory.
pub struct FakeBackend {
    builtins: Vec<Arc<dyn agent_loop::BuiltinTool>>,
    tools: Arc<FakeTools>,
    catalog: Catalog,
    content: Mutex<Arc<ContentListing>>,
    events: broadcast::Sender<BackendEvent>,
    subscriptions: Mutex<Vec<ReceivedSubscription>>,
    exposure: Option<ExposureSettings>,
}

impl std::fmt::Debug for FakeBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBackend").field("tools", &self.tools).finish_non_exhaustive()
    }
}

/// Builds a [`FakeBackend`].
#[derive(Default)]
pub struct FakeBuilder {
    builtins: Vec<Arc<dyn agent_loop::BuiltinTool>>,
    upstreams: Upstreams,
    policy: Option<PolicyConfig>,
    naming: Naming,
    content: ContentListing,
    exposure: Option<ExposureSettings>,
}

impl std::fmt::Debug for FakeBuilder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FakeBuilder").field("builtins", &self.builtins.len()).finish_non_exhaustive()
    }
}

impl FakeBuilder {
    /// Adds tool `tool` (input schema: any object) to upstream `server`.
    pub fn tool(self, server: &str, tool: &str) -> Self {
        self.tool_with_schema(server, tool, json!({"type": "object"}))
    }

    /// Adds tool `tool` with this input schema to upstream `server`.
    pub fn tool_with_schema(mut self, server: &str, tool: &str, schema: Value) -> Self {
        let entry = self.upstreams.servers.entry(server.to_owned()).or_insert_with(|| (Vec::new(), 1));
        let mut listed = Tool::new(tool, schema);
        listed.description = Some(format!("The fake {tool} of {server}."));
        entry.0.push(listed);
        self
    }

    /// A built-in tool the pools carry (first, under its own name).
    pub fn builtin(mut self, tool: Arc<dyn agent_loop::BuiltinTool>) -> Self {
        self.builtins.push(tool);
        self
    }

    /// The policy (by default every tool is allowed).
    pub fn policy(mut self, policy: PolicyConfig) -> Self {
        self.policy = Some(policy);
        self
    }

    /// Names tools in this form (by default the gateway's, `{server}__{tool}`).
    pub fn naming(mut self, naming: Naming) -> Self {
        self.naming = naming;
        self
    }

    /// What `server` offers besides tools.
    pub fn content(mut self, server: &str, content: ServerContent) -> Self {
        self.content.servers.insert(server.to_owned(), content);
        self
    }

    /// Shows pools through the exposure stage with these settings (budgets, tool search).
    pub fn exposure(mut self, settings: ExposureSettings) -> Self {
        self.exposure = Some(settings);
        self
    }

    /// `server`'s instructions.
    pub fn instructions(mut self, server: &str, text: &str) -> Self {
        self.upstreams.instructions.push((server.to_owned(), text.to_owned()));
        self
    }

    /// The backend. A policy that does not compile is replaced by one that denies everything.
    pub fn build(self) -> FakeBackend {
        let naming = if self.naming == Naming::Agent { Naming::Gateway } else { self.naming };
        let policy = match self.policy {
            Some(config) => Policy::new(config).unwrap_or_else(|_| Policy::uniform(policy::Decision::Deny)),
            None => Policy::uniform(policy::Decision::Allow),
        };
        let options = tool_pool::Options { naming, ..tool_pool::Options::default() };
        let specs: Arc<[tool_pool::BuiltinTool]> = self.builtins.iter().map(|b| b.spec()).collect::<Vec<_>>().into();
        FakeBackend {
            builtins: self.builtins,
            tools: Arc::new(FakeTools { upstreams: Mutex::new(self.upstreams) }),
            catalog: Catalog::new(specs, policy, options),
            content: Mutex::new(Arc::new(self.content)),
            events: broadcast::channel(64).0,
            subscriptions: Mutex::new(Vec::new()),
            exposure: self.exposure,
        }
    }
}

impl FakeBackend {
    /// A builder.
    pub fn builder() -> FakeBuilder {
        FakeBuilder { naming: Naming::Gateway, ..FakeBuilder::default() }
    }

    /// The upstreams the gateway's own tests and the `mcp-gateway-fake` binary use: `files`
    /// (`read_file` allowed, `write_file` asks, `rm` denied) and `echo` (`echo`, `slow`,
    /// `progress`), with instructions from `files`.
    pub fn standard() -> FakeBackend {
        let policy = PolicyConfig {
            default: policy::Decision::Allow,
            rules: vec![
                policy::RuleConfig::new("files", "write_file", policy::Decision::Confirm),
                policy::RuleConfig::new("files", "rm", policy::Decision::Deny),
            ],
            ..PolicyConfig::default()
        };
        FakeBackend::builder()
            .tool("files", "read_file")
            .tool("files", "write_file")
            .tool("files", "rm")
            .tool("echo", "echo")
            .tool("echo", "slow")
            .tool("echo", "progress")
            .policy(policy)
            .instructions("files", "Read before you write.")
            .build()
    }

    /// Replaces `server`'s tools (its generation moves; `list_changed` goes out). An empty list
    /// removes the server.
    pub fn set_tools(&self, server: &str, tools: &[&str]) {
        {
            let mut upstreams = lock(&self.tools.upstreams);
            if tools.is_empty() {
                upstreams.servers.remove(server);
            } else {
                let generation = upstreams.servers.get(server).map_or(1, |(_, g)| g + 1);
                let listed = tools.iter().map(|t| Tool::new(*t, json!({"type": "object"}))).collect();
                upstreams.servers.insert(server.to_owned(), (listed, generation));
            }
        }
        let _ = self.events.send(BackendEvent::ToolsChanged);
    }

    /// Reports an event to the gateway.
    pub fn emit(&self, event: BackendEvent) {
        let _ = self.events.send(event);
    }

    /// Every call the upstreams received, in order.
    pub fn calls(&self) -> Vec<ReceivedCall> {
        lock(&self.tools.upstreams).calls.clone()
    }

    /// The `slow` calls dropped before they answered (cancelled by the gateway), in order.
    pub fn cancelled(&self) -> Vec<ReceivedCall> {
        lock(&self.tools.upstreams).cancelled.clone()
    }

    /// Every subscription change the upstreams received, in order.
    pub fn subscription_changes(&self) -> Vec<ReceivedSubscription> {
        lock(&self.subscriptions).clone()
    }

    /// `Ok` when `server` offers `uri`: a resource of its, or a URI one of its templates makes.
    fn offers(&self, server: &str, uri: &str) -> Result<(), BackendError> {
        let listing = Arc::clone(&lock(&self.content));
        let content = listing.servers.get(server).ok_or_else(|| BackendError::NoSuchServer(server.to_owned()))?;
        let known = content.resources.iter().any(|r| r.uri == uri)
            || content.templates.iter().any(|t| uri.starts_with(t.uri_template.split('{').next().unwrap_or_default()));
        if known { Ok(()) } else { Err(BackendError::NotOffered(format!("server {server:?} has no resource {uri:?}"))) }
    }

    fn received(&self, server: &str, uri: &str, subscribed: bool) {
        lock(&self.subscriptions).push(ReceivedSubscription {
            server: server.to_owned(),
            uri: uri.to_owned(),
            subscribed,
        });
    }
}

#[async_trait]
impl Backend for FakeBackend {
    async fn binding(&self, _caller: &Caller) -> Result<Arc<agent_loop::Binding>, BackendError> {
        self.catalog.bind(&*self.tools).await.map_err(|e| BackendError::Upstream(e.to_string()))
    }

    fn tools(&self) -> &dyn ToolSource {
        &*self.tools
    }

    fn tools_for(&self, asker: Arc<dyn CallAsker>) -> Option<Arc<dyn ToolSource>> {
        Some(Arc::new(AskingTools { tools: Arc::clone(&self.tools), asker }))
    }

    fn builtins(&self) -> Vec<Arc<dyn agent_loop::BuiltinTool>> {
        self.builtins.clone()
    }

    fn instructions(&self, _caller: &Caller) -> Vec<(String, String)> {
        self.tools.instructions()
    }

    fn exposure(&self) -> Option<ExposureSettings> {
        self.exposure.clone()
    }

    async fn content(&self, _caller: &Caller) -> Result<Arc<ContentListing>, BackendError> {
        Ok(Arc::clone(&lock(&self.content)))
    }

    async fn read_resource(
        &self,
        _caller: &Caller,
        server: &str,
        uri: &str,
        _max_bytes: usize,
    ) -> Result<mcp_protocol::ReadResourceResult, BackendError> {
        self.offers(server, uri)?;
        Ok(serde_json::from_value(json!({"contents": [{"uri": uri, "text": format!("{server} says {uri}")}]}))
            .unwrap_or_default())
    }

    async fn get_prompt(
        &self,
        _caller: &Caller,
        server: &str,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<mcp_protocol::GetPromptResult, BackendError> {
        let text = format!("{server}/{name} with {}", Value::Object(arguments.unwrap_or_default()));
        Ok(serde_json::from_value(json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]}))
            .unwrap_or_default())
    }

    async fn complete(
        &self,
        _caller: &Caller,
        server: &str,
        params: mcp_protocol::CompleteRequestParams,
    ) -> Result<mcp_protocol::CompleteResult, BackendError> {
        let value = format!("{server}:{}", params.argument.value);
        Ok(serde_json::from_value(json!({"completion": {"values": [value]}})).unwrap_or_default())
    }

    async fn subscribe(&self, _caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.offers(server, uri)?;
        if uri.ends_with("#hang") {
            // An upstream that never answers.
            std::future::pending::<()>().await;
        }
        if uri.ends_with("#no-subscribe") {
            return Err(BackendError::Upstream(format!("server {server:?} refused to subscribe to {uri:?}")));
        }
        self.received(server, uri, true);
        Ok(())
    }

    async fn unsubscribe(&self, _caller: &Caller, server: &str, uri: &str) -> Result<(), BackendError> {
        self.received(server, uri, false);
        Ok(())
    }

    fn events(&self) -> broadcast::Receiver<BackendEvent> {
        self.events.subscribe()
    }
}
