//! The loop against the Rust fixture server over stdio, through `ServerSet`.

use std::sync::Arc;

use agent_loop::{Agent, AgentConfig, Block, Role};
use mcp_client::{ConnectOptions, ServerSet, ServerSpec, connect_all};
use mcp_transport::StdioConfig;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use serde_json::json;

use crate::fake::{Events, Recording};

async fn fixture_set(mode: &str) -> ServerSet {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let config = StdioConfig::new(binary.to_string_lossy().into_owned(), [mode]);
    let connections =
        connect_all(vec![ServerSpec::new("fx", std::sync::Arc::new(config))], &ConnectOptions::default()).await;
    assert!(connections[0].is_connected(), "{:?}", connections[0].state());
    ServerSet::new(connections)
}

#[tokio::test]
async fn a_session_with_a_real_server_sees_list_changed_between_steps() {
    let set = Arc::new(fixture_set("echo").await);
    let model = Recording::new(json!({"turns": [
        {"text": "Adding a tool.", "tool_calls": [{"name": "mcp__fx__add_tool", "input": {"name": "fresh"}}]},
        {"tool_calls": [{"name": "mcp__fx__fresh"}, {"name": "mcp__fx__echo", "input": {"text": "hi"}}]},
        {"text": "Both worked."}
    ]}));
    let policy = Policy::new(PolicyConfig {
        default: Decision::Allow,
        rules: vec![RuleConfig::new("fx", "crash", Decision::Deny)],
    })
    .unwrap();
    let agent = Agent::new(model.clone(), set.clone(), policy, AgentConfig::default());
    let events = Events::default();
    let mut conversation = Vec::new();
    let outcome = agent.run_turn(&mut conversation, "go", &events).await.unwrap();
    assert_eq!(outcome.final_text, "Both worked.");
    assert!(!model.tool_names(0).contains(&"mcp__fx__fresh".to_owned()));
    assert!(!model.tool_names(0).contains(&"mcp__fx__crash".to_owned()), "denied");
    assert!(model.tool_names(1).contains(&"mcp__fx__fresh".to_owned()), "the new tool is in the next step's pool");
    let results: Vec<String> = conversation
        .iter()
        .filter(|m| m.role == Role::User)
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { content, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(results, vec!["added fresh", "called fresh", "hi"]);
    let revisions: Vec<u64> = events.of("step").iter().map(|e| e["pool_revision"].as_u64().unwrap()).collect();
    assert!(revisions[1] > revisions[0], "{revisions:?}");
    drop(agent);
    Arc::try_unwrap(set).unwrap().close().await;
}

#[tokio::test]
async fn a_server_that_dies_mid_session_becomes_an_error_result() {
    let set = Arc::new(fixture_set("echo").await);
    let model = Recording::new(json!({"turns": [
        {"tool_calls": [{"name": "mcp__fx__crash"}]},
        {"tool_calls": [{"name": "mcp__fx__echo", "input": {"text": "anyone?"}}]},
        {"text": "The server is gone."}
    ]}));
    let policy = Policy::new(PolicyConfig { default: Decision::Allow, rules: vec![] }).unwrap();
    let agent = Agent::new(model, set.clone(), policy, AgentConfig::default());
    let mut conversation = Vec::new();
    let outcome = agent.run_turn(&mut conversation, "go", &Events::default()).await.unwrap();
    assert_eq!(outcome.final_text, "The server is gone.");
    let errors: Vec<String> = conversation
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { content, is_error: true, .. } => Some(content.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(errors[0].starts_with("Error:") && errors[0].contains("status 3"), "{errors:?}");
    drop(agent);
    Arc::try_unwrap(set).unwrap().close().await;
}
