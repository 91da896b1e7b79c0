//! What the loop leaves on disk is private, and a failure result names its server and cause.

use std::path::Path;
use std::sync::Arc;

use agent_loop::{Agent, AgentConfig, Transcript, fit_budget};
use mcp_client::{ConnectOptions, ServerSet, ServerSpec, ServerState, SetOptions, connect_all};
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
    // The same id again (a provider numbering calls afresh at each step): saved beside the
    // first, never over it, since the first result's message still names its file.
    let again = fit_budget("y".repeat(5000), 1000, Some(&results), "call_1");
    let second = results.join("call_1-2.txt");
    assert!(again.contains(&second.display().to_string()), "{again}");
    assert_eq!(mode(&second), 0o600);
    assert!(std::fs::read_to_string(&saved).unwrap().starts_with('x'), "the first is kept");
    assert!(std::fs::read_to_string(&second).unwrap().starts_with('y'));

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

/// Waits, after the model's call to `mcp__f__crash`, until the supervisor has taken `f` out
/// (the model of a real session takes longer than that to answer).
struct AfterTheCrash {
    set: Arc<ServerSet>,
    gone: fn(&ServerState) -> bool,
}

#[async_trait::async_trait]
impl agent_loop::Hooks for AfterTheCrash {
    async fn after_tool(&self, call: &agent_loop::CallInfo, _result: &str, _is_error: bool) {
        if call.name == "mcp__f__crash" {
            let gone = || self.set.state("f").is_some_and(|s| (self.gone)(&s));
            assert!(mcp_fixtures::wait_until(mcp_fixtures::EVENT_DEADLINE, gone).await, "f never left");
        }
    }
}

/// Servers `f` (its start slowed by `startup_ms`) and `h`, both offering `echo`; after `f`
/// crashes (status 3) the model calls `f`'s `echo` again: the error results.
async fn call_after_a_crash(restarts: u32, startup_ms: &str, gone: fn(&ServerState) -> bool) -> Vec<String> {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let binary = binary.to_string_lossy().into_owned();
    let specs = vec![
        ServerSpec::new("f", Arc::new(StdioConfig::new(binary.clone(), ["echo", "--startup-ms", startup_ms]))),
        ServerSpec::new("h", Arc::new(StdioConfig::new(binary, ["echo"]))),
    ];
    let mut options = SetOptions::default();
    options.restarts.max_restarts = restarts;
    let set = Arc::new(ServerSet::start(specs, options));
    set.settled(mcp_fixtures::EVENT_DEADLINE).await;
    let model = Recording::new(json!({"turns": [
        {"tool_calls": [{"name": "mcp__f__crash"}]},
        {"tool_calls": [{"name": "mcp__f__echo", "input": {"text": "anyone?"}}]},
        {"text": "f is gone."}
    ]}));
    let policy = Policy::new(PolicyConfig { default: Decision::Allow, rules: vec![], ..Default::default() }).unwrap();
    let agent = Agent::new(model, set.clone(), policy, AgentConfig::default())
        .with_hooks(Arc::new(AfterTheCrash { set: Arc::clone(&set), gone }));
    let mut conversation = Vec::new();
    agent.run_turn(&mut conversation, "go", &Events::default()).await.unwrap();
    drop(agent);
    Arc::try_unwrap(set).unwrap().close().await;
    error_results(&conversation)
}

/// A call to a tool whose server crashed and will not come back names the server, its exit
/// status and that it is not coming back, and never offers another server's tool instead.
#[tokio::test]
async fn a_call_to_a_tool_whose_server_crashed_says_why_and_suggests_no_other_server() {
    let errors = call_after_a_crash(0, "0", |s| matches!(s, ServerState::Failed { .. })).await;
    assert_eq!(errors.len(), 2, "{errors:?}");
    let after = &errors[1];
    assert!(
        after.starts_with(
            "Error: mcp__f__echo cannot be called now: its server \"f\" exited with status 3 and failed to restart ("
        ),
        "{after}"
    );
    assert!(after.ends_with("it is not coming back unless the user reconnects it; nothing was called"), "{after}");
    assert!(!after.contains("did you mean") && !after.contains("mcp__h__"), "{after}");
}

/// While the server is being restarted, the call says so: it is coming back.
#[tokio::test]
async fn a_call_to_a_tool_whose_server_is_restarting_says_it_is_coming_back() {
    let errors = call_after_a_crash(3, "3000", |s| matches!(s, ServerState::Reconnecting { .. })).await;
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(
        errors[1],
        "Error: mcp__f__echo cannot be called now: its server \"f\" exited with status 3 and is being restarted \
         (attempt 1): call it again in a moment; nothing was called"
    );
}
