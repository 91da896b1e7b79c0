//! Test doubles: a tool source whose servers, tools and behaviour a test sets, a model that
//! records what it was asked, an approver that counts, and an event recorder.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_loop::{
    AgentEvent, ApprovalAnswer, ApprovalRequest, Approver, EventSink, LanguageModel, ModelError, ModelRequest,
    ModelResponse, ScriptedModel, TextStream, ToolSource,
};
use agent_loop::{BoundCall, Listing, Operation, SourceError};
use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ContentBlock, Tool};
use serde_json::{Map, Value, json};
use tool_pool::ServerTools;

pub fn tool(name: &str, schema: Value) -> Tool {
    let mut t = Tool::new(name, schema);
    t.description = Some(format!("The {name} tool."));
    t
}

pub fn text_schema() -> Value {
    json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]})
}

/// A call the fake source received: server, raw tool name, arguments.
pub type Call = (String, String, Option<Map<String, Value>>);

/// Runs with the 1-based number of each model request.
pub type OnRequest = Box<dyn FnMut(usize) + Send>;

/// How a fake tool answers.
#[derive(Clone)]
pub enum Behaviour {
    Echo,
    Fail(String),
    ToolError(String),
    Big(usize),
    /// Answers only once every call sharing `barrier` is running (an error if they never all
    /// are), then waits for `after` if given, and signals `then` when done.
    Together {
        barrier: Arc<tokio::sync::Barrier>,
        after: Option<Arc<tokio::sync::Notify>>,
        then: Option<Arc<tokio::sync::Notify>>,
    },
}

#[derive(Default)]
pub struct FakeSource {
    pub servers: Mutex<BTreeMap<String, (Vec<Tool>, u64)>>,
    pub behaviour: Mutex<BTreeMap<String, Behaviour>>,
    pub calls: Mutex<Vec<Call>>,
    /// Tools in the order their calls finished.
    pub finished: Mutex<Vec<String>>,
    /// Bump this server's generation when `call` is next invoked for any tool (a change that
    /// lands while the model is thinking is simulated by `bump`).
    pub refreshes: AtomicUsize,
}

impl FakeSource {
    pub fn with(servers: &[(&str, Vec<Tool>)]) -> Arc<Self> {
        let source = Self::default();
        {
            let mut map = source.servers.lock().unwrap();
            for (name, tools) in servers {
                map.insert((*name).to_owned(), (tools.clone(), 1));
            }
        }
        Arc::new(source)
    }

    pub fn set_behaviour(&self, tool: &str, b: Behaviour) {
        self.behaviour.lock().unwrap().insert(tool.to_owned(), b);
    }

    /// Change a server's tools (as a list_changed would) and bump its generation.
    pub fn change(&self, server: &str, tools: Vec<Tool>) {
        let mut map = self.servers.lock().unwrap();
        let entry = map.entry(server.to_owned()).or_insert((Vec::new(), 0));
        *entry = (tools, entry.1 + 1);
    }
}

#[async_trait]
impl ToolSource for FakeSource {
    async fn refresh(&self) -> Listing {
        self.refreshes.fetch_add(1, Ordering::SeqCst);
        let map = self.servers.lock().unwrap();
        let mut listing = Listing::default();
        for (name, (tools, generation)) in map.iter() {
            listing.servers.push(ServerTools::new(name.as_str(), tools.clone()));
            listing.generations.insert(name.clone(), *generation);
        }
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        self.servers.lock().unwrap().get(server).map(|(_, g)| *g)
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        let BoundCall { server, tool, arguments, .. } = call;
        let (server, tool) = (server.as_str(), tool.as_str());
        let failed = |detail: String| SourceError::Failed {
            op: Operation::CallTool { tool: tool.to_owned() },
            server: server.to_owned(),
            detail,
        };
        self.calls.lock().unwrap().push((server.to_owned(), tool.to_owned(), arguments.clone()));
        let behaviour = self.behaviour.lock().unwrap().get(tool).cloned().unwrap_or(Behaviour::Echo);
        let text = |t: String| CallToolResult { content: vec![ContentBlock::text(t)], ..Default::default() };
        match behaviour {
            Behaviour::Echo => Ok(text(format!("{tool} got {}", Value::Object(arguments.unwrap_or_default())))),
            // The server went away under the call.
            Behaviour::Fail(reason) => Err(SourceError::Closed {
                op: Operation::CallTool { tool: tool.to_owned() },
                server: server.to_owned(),
                reason,
            }),
            Behaviour::ToolError(message) => Ok(CallToolResult { is_error: Some(true), ..text(message) }),
            Behaviour::Together { barrier, after, then } => {
                if tokio::time::timeout(mcp_fixtures::EVENT_DEADLINE, barrier.wait()).await.is_err() {
                    return Err(failed(format!("{tool} ran alone: the calls did not run together")));
                }
                if let Some(after) = after {
                    after.notified().await;
                }
                self.finished.lock().unwrap().push(tool.to_owned());
                if let Some(then) = then {
                    then.notify_one();
                }
                Ok(text(format!("{tool} done")))
            }
            Behaviour::Big(n) => Ok(text("z".repeat(n))),
        }
    }
}

/// Wraps a model and keeps every request it got.
pub struct Recording {
    pub inner: ScriptedModel,
    pub requests: Mutex<Vec<ModelRequest>>,
    /// Runs after each request is recorded (to change the world while "the model thinks").
    pub on_request: Mutex<Option<OnRequest>>,
}

impl Recording {
    pub fn new(script: Value) -> Arc<Self> {
        Arc::new(Self {
            inner: ScriptedModel::from_json(&script.to_string()).unwrap(),
            requests: Mutex::new(Vec::new()),
            on_request: Mutex::new(None),
        })
    }

    pub fn tool_names(&self, request: usize) -> Vec<String> {
        self.requests.lock().unwrap()[request].tools.iter().map(|t| t.name.clone()).collect()
    }
}

#[async_trait]
impl LanguageModel for Recording {
    fn name(&self) -> &str {
        "recording"
    }

    async fn complete(&self, request: &ModelRequest, stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let n = {
            let mut requests = self.requests.lock().unwrap();
            requests.push(request.clone());
            requests.len()
        };
        if let Some(hook) = self.on_request.lock().unwrap().as_mut() {
            hook(n);
        }
        self.inner.complete(request, stream).await
    }
}

/// Answers with a fixed answer and counts the questions.
pub struct Counting {
    pub answer: ApprovalAnswer,
    pub asked: Mutex<Vec<ApprovalRequest>>,
}

impl Counting {
    pub fn new(answer: ApprovalAnswer) -> Arc<Self> {
        Arc::new(Self { answer, asked: Mutex::new(Vec::new()) })
    }

    pub fn count(&self) -> usize {
        self.asked.lock().unwrap().len()
    }
}

#[async_trait]
impl Approver for Counting {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.asked.lock().unwrap().push(request.clone());
        self.answer.clone()
    }
}

#[derive(Default)]
pub struct Events(pub Mutex<Vec<Value>>);

impl EventSink for Events {
    fn event(&self, event: &AgentEvent) {
        self.0.lock().unwrap().push(serde_json::to_value(event).unwrap());
    }
}

impl Events {
    pub fn kinds(&self) -> Vec<String> {
        self.0.lock().unwrap().iter().map(|e| e["event"].as_str().unwrap().to_owned()).collect()
    }

    pub fn of(&self, kind: &str) -> Vec<Value> {
        self.0.lock().unwrap().iter().filter(|e| e["event"] == kind).cloned().collect()
    }
}

/// Every tool result in a conversation, in order: its content and whether it is an error.
pub fn results(conversation: &[agent_loop::Message]) -> Vec<(String, bool)> {
    conversation
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            agent_loop::Block::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

/// The contents of the error results in a conversation, in order.
pub fn error_results(conversation: &[agent_loop::Message]) -> Vec<String> {
    results(conversation).into_iter().filter_map(|(content, is_error)| is_error.then_some(content)).collect()
}
