//! Agent sessions against a third-party MCP server (npm server-everything over stdio) with
//! the scripted model: tools through policy and approval, structured content through the
//! output-schema check, and the resource built-ins. Run by `cargo xtask test`, which installs the server and sets
//! `MCP_PEERS_DIR`.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_loop::{
    Agent, AgentConfig, AgentEvent, ApprovalAnswer, ApprovalRequest, Approver, Block, EventSink, Message, Role,
    ScriptedModel,
};
use async_trait::async_trait;
use mcp_client::{ConnectOptions, ServerSet, ServerSpec, connect_all};
use mcp_transport::StdioConfig;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};

fn everything() -> StdioConfig {
    let dir = std::env::var_os("MCP_PEERS_DIR")
        .map(PathBuf::from)
        .expect("MCP_PEERS_DIR is not set: run this through `cargo xtask test`");
    let script = dir.join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.is_file(), "{} is missing; run `cargo xtask peers`", script.display());
    StdioConfig::new("node", [script.to_string_lossy().into_owned(), "stdio".to_owned()])
}

struct Asked(Mutex<Vec<String>>);

#[async_trait]
impl Approver for Asked {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.0.lock().unwrap().push(request.name.clone());
        ApprovalAnswer::Yes
    }
}

#[derive(Default)]
struct Kinds(Mutex<Vec<String>>);

impl EventSink for Kinds {
    fn event(&self, event: &AgentEvent) {
        if let AgentEvent::ToolCall { name, decision, .. } = event {
            self.0.lock().unwrap().push(format!("{name}:{}", serde_json::to_value(decision).unwrap()));
        }
    }
}

/// Every tool result the model was sent, in order: its text and whether it is an error.
fn tool_results(conversation: &[Message]) -> Vec<(String, bool)> {
    conversation
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_scripted_session_with_server_everything() {
    let connections =
        connect_all(vec![ServerSpec::new("everything", Arc::new(everything()))], &ConnectOptions::default()).await;
    assert!(connections[0].is_connected(), "{:?}", connections[0].state());
    let servers = Arc::new(ServerSet::new(connections));
    let model = ScriptedModel::from_json(
        r#"{"turns": [
            {"text": "Echo first.", "tool_calls": [{"name": "mcp__everything__echo", "input": {"message": "agent"}}]},
            {"text": "Now a sum and an image.", "tool_calls": [
                {"name": "mcp__everything__get-sum", "input": {"a": 40, "b": 2}},
                {"name": "mcp__everything__get-tiny-image", "input": {}},
                {"name": "mcp__everything__get-sum", "input": {"a": "forty"}}
            ]},
            {"text": "All done."}
        ]}"#,
    )
    .unwrap();
    let policy = Policy::new(PolicyConfig {
        default: Decision::Confirm,
        rules: vec![
            RuleConfig::new("everything", "echo", Decision::Allow),
            RuleConfig::new("everything", "get-sum", Decision::Allow),
        ],
        ..Default::default()
    })
    .unwrap();
    let asked = Arc::new(Asked(Mutex::new(Vec::new())));
    let agent =
        Agent::new(Arc::new(model), servers.clone(), policy, AgentConfig::default()).with_approver(asked.clone());
    let kinds = Kinds::default();
    let mut conversation = Vec::new();
    let outcome = agent.run_turn(&mut conversation, "try the tools", &kinds).await.unwrap();
    assert_eq!(outcome.final_text, "All done.");
    let results = tool_results(&conversation);
    assert_eq!(results[0], ("Echo: agent".to_owned(), false));
    assert!(results[1].0.contains("42") && !results[1].1, "{results:?}");
    assert!(results[2].0.contains("[image image/png") && !results[2].1, "{results:?}");
    assert!(results[3].1 && results[3].0.contains("/a"), "a bad argument never reaches the server: {results:?}");
    assert_eq!(asked.0.lock().unwrap().clone(), vec!["mcp__everything__get-tiny-image"]);
    drop(agent);
    Arc::try_unwrap(servers).ok().unwrap().close().await;
}

/// A real server's structured content passes the check against its output schema on the way
/// to the model, and the resource built-ins read from it.
#[tokio::test]
async fn structured_content_and_resources_through_the_gate() {
    let connections =
        connect_all(vec![ServerSpec::new("everything", Arc::new(everything()))], &ConnectOptions::default()).await;
    assert!(connections[0].is_connected(), "{:?}", connections[0].state());
    let schema = connections[0]
        .tools()
        .iter()
        .find(|t| t.name == "get-structured-content")
        .and_then(|t| t.output_schema.clone());
    assert!(schema.is_some(), "the tool declares an output schema");
    let servers = Arc::new(ServerSet::new(connections));
    let model = ScriptedModel::from_json(
        r#"{"turns": [
            {"text": "Weather and a document.", "tool_calls": [
                {"name": "mcp__everything__get-structured-content", "input": {"location": "Chicago"}},
                {"name": "list_mcp_resources", "input": {"server": "everything"}},
                {"name": "read_mcp_resource", "input": {"server": "everything", "uri": "demo://resource/static/document/architecture.md"}}
            ]},
            {"text": "Done."}
        ]}"#,
    )
    .unwrap();
    let policy = Policy::new(PolicyConfig { default: Decision::Allow, rules: vec![], ..Default::default() }).unwrap();
    let agent = Agent::new(Arc::new(model), servers.clone(), policy, AgentConfig::default())
        .with_builtins(agent_loop::resource_tools(servers.clone(), None));
    let mut conversation = Vec::new();
    let outcome = agent.run_turn(&mut conversation, "look", &Kinds::default()).await.unwrap();
    assert_eq!(outcome.final_text, "Done.");
    let results = tool_results(&conversation);
    assert_eq!(results.len(), 3, "{results:?}");
    assert!(!results[0].1 && results[0].0.contains("Light rain"), "the structured result matched: {results:?}");
    assert!(!results[1].1 && results[1].0.contains("demo://resource/static/document/architecture.md"), "{results:?}");
    assert!(!results[2].1 && !results[2].0.is_empty(), "{results:?}");
    drop(agent);
    Arc::try_unwrap(servers).ok().unwrap().close().await;
}
