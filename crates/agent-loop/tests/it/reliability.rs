//! What the loop leaves on disk is private, and a failure result names its server and cause.

use std::path::Path;
use std::sync::Arc;

use agent_loop::{Agent, AgentConfig, Transcript, fit_budget};
use mcp_client::{ConnectOptions, ServerSet, ServerSpec, connect_all};
use mcp_transport::StdioConfig;
use policy::{Decision, Policy, PolicyConfig};
use serde_json::json;

use crate::fake::{Events, Recording, error_results};

#[cfg(unix)]
fn mode(path: &Path) -> u32 {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[cfg(unix)]
#[test]
fn saved_results_and_transcripts_are_created_private() {
    let root = tempfile::tempdir().unwrap();
    let data = root.path().join("data");
    let results = data.join("sessions").join("s1").join("tool-results");
    let text = fit_budget("x".repeat(5000), 1000, Some(&results), "call_1");
    let saved = results.join("call_1.txt");
    assert!(text.contains(&saved.display().to_string()), "{text}");
    assert_eq!(mode(&saved), 0o600, "the saved result");
    for dir in [&results, &data.join("sessions").join("s1"), &data.join("sessions"), &data] {
        assert_eq!(mode(dir), 0o700, "{}", dir.display());
    }
    // Saved again over a file someone made readable: private again.
    std::fs::set_permissions(&saved, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    fit_budget("y".repeat(5000), 1000, Some(&results), "call_1");
    assert_eq!(mode(&saved), 0o600);

    let other = root.path().join("other");
    let path = other.join("sessions").join("t.jsonl");
    drop(Transcript::open(&path).unwrap());
    assert_eq!(mode(&path), 0o600);
    assert_eq!(mode(&other.join("sessions")), 0o700);
    assert_eq!(mode(&other), 0o700);
}

/// Every failure result names the server and the cause, also for calls after a crash (they
/// used to get only "the session is closed").
#[tokio::test]
async fn calls_to_a_crashed_server_name_it_and_why_it_is_gone() {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let config = StdioConfig::new(binary.to_string_lossy().into_owned(), ["echo"]);
    let connections = connect_all(vec![ServerSpec::new("fx", Arc::new(config))], &ConnectOptions::default()).await;
    let set = Arc::new(ServerSet::new(connections));
    let model = Recording::new(json!({"turns": [
        {"tool_calls": [{"name": "mcp__fx__crash"}]},
        {"tool_calls": [{"name": "mcp__fx__echo", "input": {"text": "anyone?"}}]},
        {"tool_calls": [{"name": "mcp__fx__add", "input": {"a": 1, "b": 2}}]},
        {"text": "The server is gone."}
    ]}));
    let policy = Policy::new(PolicyConfig { default: Decision::Allow, rules: vec![], ..Default::default() }).unwrap();
    let agent = Agent::new(model, set.clone(), policy, AgentConfig::default());
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "go", &Events::default()).await.unwrap();
    let errors = error_results(&conversation);
    assert_eq!(errors.len(), 3, "{errors:?}");
    for error in &errors {
        assert!(error.contains("server \"fx\""), "names the server: {error}");
        assert!(error.contains("exited (status 3)"), "says why: {error}");
        assert!(!error.contains("the session is closed"), "{error}");
    }
    drop(agent);
    Arc::try_unwrap(set).unwrap().close().await;
}
