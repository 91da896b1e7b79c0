//! Code mode through the agent loop: the scripted model calls `run_code`, whose scripts reach
//! the fixture server's tools through the loop's call gate (policy, approver, argument checks,
//! generations, hooks, transcript), under the engine's limits.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_loop::{
    Agent, AgentConfig, AgentEvent, ApprovalAnswer, ApprovalRequest, Approver, Block, EventSink, Message,
    ScriptedModel, Transcript,
};
use async_trait::async_trait;
use mcp_client::{ConnectOptions, ServerSet, ServerSpec, connect_all};
use mcp_host::{CodeScope, RunCode};
use mcp_transport::StdioConfig;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use serde_json::{Value, json};

/// Events as JSON, in order.
#[derive(Default)]
struct Events(Mutex<Vec<Value>>);

impl EventSink for Events {
    fn event(&self, event: &AgentEvent) {
        self.0.lock().unwrap().push(serde_json::to_value(event).unwrap());
    }
}

impl Events {
    fn of(&self, kind: &str) -> Vec<Value> {
        self.0.lock().unwrap().iter().filter(|e| e["event"] == kind).cloned().collect()
    }
}

/// Records every approval request and answers `answer`.
struct Asked {
    answer: ApprovalAnswer,
    requests: Mutex<Vec<ApprovalRequest>>,
}

#[async_trait]
impl Approver for Asked {
    async fn approve(&self, request: &ApprovalRequest) -> ApprovalAnswer {
        self.requests.lock().unwrap().push(request.clone());
        self.answer.clone()
    }
}

/// One fixture server per (name, mode, flags), each logging what it received.
async fn servers(dir: &Path, specs: &[(&str, &str, &[&str])]) -> ServerSet {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let specs = specs
        .iter()
        .map(|(name, mode, flags)| {
            let log = dir.join(format!("{name}.log")).to_string_lossy().into_owned();
            let args: Vec<String> = [mode.to_string(), "--log".into(), log]
                .into_iter()
                .chain(flags.iter().map(|f| f.to_string()))
                .collect();
            let config = StdioConfig::new(binary.to_string_lossy().into_owned(), args);
            ServerSpec::new(*name, Arc::new(config))
        })
        .collect();
    let connections = connect_all(specs, &ConnectOptions::default()).await;
    for c in &connections {
        assert!(c.is_connected(), "{:?}", c.state());
    }
    ServerSet::new(connections)
}

/// The `tools/call`s server `name` received: (tool, arguments).
fn received(dir: &Path, name: &str) -> Vec<(String, Value)> {
    std::fs::read_to_string(dir.join(format!("{name}.log")))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|m| m["method"] == "tools/call")
        .map(|m| (m["params"]["name"].as_str().unwrap_or_default().to_owned(), m["params"]["arguments"].clone()))
        .collect()
}

fn policy(rules: &[(&str, &str, Decision)]) -> Policy {
    let mut all = vec![RuleConfig::new("@builtin", "run_code", Decision::Allow)];
    all.extend(rules.iter().map(|(s, t, d)| RuleConfig::new(*s, *t, *d)));
    Policy::new(PolicyConfig { default: Decision::Allow, rules: all, ..Default::default() }).unwrap()
}

/// What one turn gave: each tool result (content, is_error) in order, the events, the run_code
/// description the model was shown first.
struct Turn {
    results: Vec<(String, bool)>,
    events: Events,
    description: String,
    /// The names of the tools the model was sent, step by step.
    tools: Vec<Vec<String>>,
}

struct Setup<'a> {
    dir: &'a Path,
    scripts: Vec<&'a str>,
    policy: Policy,
    limits: code_mode::Limits,
    approver: Arc<dyn Approver>,
    scope: CodeScope,
    result_budget: usize,
    transcript: Option<&'a Path>,
    hooks: Option<Arc<dyn agent_loop::Hooks>>,
    servers: Vec<(&'a str, &'a str, &'a [&'a str])>,
    exposure: tool_pool::ExposureOptions,
}

impl<'a> Setup<'a> {
    fn new(dir: &'a Path, scripts: &[&'a str]) -> Self {
        Self {
            dir,
            scripts: scripts.to_vec(),
            policy: policy(&[]),
            limits: code_mode::Limits::default(),
            approver: Arc::new(agent_loop::RefuseAll),
            scope: CodeScope::everything(),
            result_budget: 20_000,
            transcript: None,
            hooks: None,
            servers: vec![("fx", "echo", &["--records", "200"])],
            exposure: tool_pool::ExposureOptions::default(),
        }
    }

    /// With tool search on: every server tool waits behind search.
    fn searching(mut self) -> Self {
        self.exposure.tool_search = tool_pool::SearchMode::On;
        self
    }

    /// One turn: each script is one step's `run_code` call, then the model says "done".
    async fn run(self) -> Turn {
        let mut turns: Vec<Value> = self
            .scripts
            .iter()
            .map(|code| json!({"tool_calls": [{"name": "run_code", "input": {"code": code}}]}))
            .collect();
        turns.push(json!({"text": "done"}));
        let model = Arc::new(Recorded::new(&json!({ "turns": turns }).to_string()));
        let set = Arc::new(servers(self.dir, &self.servers).await);
        let scope = self.scope.clone();
        let run_code = RunCode::new(self.limits, Arc::new(move || scope.clone()), 16_000);
        let config = AgentConfig {
            result_budget: self.result_budget,
            session_dir: Some(self.dir.join("session")),
            exposure: self.exposure,
            ..AgentConfig::default()
        };
        let mut agent = Agent::new(model.clone(), set.clone(), self.policy, config)
            .with_builtins(vec![Arc::new(run_code)])
            .with_approver(self.approver);
        if let Some(hooks) = self.hooks {
            agent = agent.with_hooks(hooks);
        }
        if let Some(path) = self.transcript {
            agent = agent.with_transcript(Transcript::open(path).unwrap());
        }
        let events = Events::default();
        let mut conversation = Vec::new();
        let outcome = agent.run_turn(&mut conversation, "go", &events).await.unwrap();
        assert_eq!(outcome.final_text, "done");
        drop(agent);
        Arc::try_unwrap(set).ok().unwrap().close().await;
        let description = model.first_description.lock().unwrap().clone().unwrap_or_default();
        let tools = model.tools.lock().unwrap().clone();
        Turn { results: results(&conversation), events, description, tools }
    }
}

/// The scripted model, remembering the description of `run_code` it was shown first and the
/// tools of each step.
struct Recorded {
    inner: ScriptedModel,
    first_description: Mutex<Option<String>>,
    tools: Mutex<Vec<Vec<String>>>,
}

impl Recorded {
    fn new(script: &str) -> Self {
        Self {
            inner: ScriptedModel::from_json(script).unwrap(),
            first_description: Mutex::new(None),
            tools: Mutex::default(),
        }
    }
}

#[async_trait]
impl agent_loop::LanguageModel for Recorded {
    fn name(&self) -> &str {
        "recorded"
    }

    async fn complete(
        &self,
        request: &agent_loop::ModelRequest,
        stream: &dyn agent_loop::TextStream,
    ) -> Result<agent_loop::ModelResponse, agent_loop::ModelError> {
        {
            let mut first = self.first_description.lock().unwrap();
            if first.is_none() {
                *first = request.tools.iter().find(|t| t.name == "run_code").map(|t| t.description.clone());
            }
        }
        self.tools.lock().unwrap().push(request.tools.iter().map(|t| t.name.clone()).collect());
        self.inner.complete(request, stream).await
    }
}

fn results(conversation: &[Message]) -> Vec<(String, bool)> {
    conversation
        .iter()
        .flat_map(|m| m.content.iter())
        .filter_map(|b| match b {
            Block::ToolResult { content, is_error, .. } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect()
}

const CHAIN: &str = r#"
    const { records } = await tools.fx.list_records({});
    const overdue = records.filter(r => r.status === "overdue");
    const details = await Promise.all(overdue.map(r => tools.fx.record_details({ id: r.id })));
    const owed = details.reduce((sum, d) => sum + d.balance, 0);
    const note = await tools.fx.echo({ text: `${details.length} overdue, ${owed} owed` });
    console.log("listed", records.length);
    return { ids: details.map(d => d.id), note };
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_chains_three_tools_and_only_its_answer_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("t.jsonl");
    let mut setup = Setup::new(dir.path(), &[CHAIN]);
    setup.transcript = Some(&transcript);
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error, "{text}");
    assert!(text.starts_with(r#"{"ids":[7,47,87,127,167],"note":"5 overdue, "#), "{text}");
    assert!(text.contains("console (1 entry):\nlisted 200"), "{text}");
    // The listing (200 records) never reached the model: only the answer did.
    assert!(text.len() < 200, "{} bytes: {text}", text.len());
    let calls: Vec<String> = received(dir.path(), "fx").into_iter().map(|(tool, _)| tool).collect();
    assert_eq!(calls.len(), 7, "{calls:?}");
    assert_eq!((calls[0].as_str(), calls[6].as_str()), ("list_records", "echo"));

    // The declarations told the model how to call them.
    assert!(turn.description.contains("namespace fx"), "{}", turn.description);
    assert!(turn.description.contains("function record_details(args: { id: number"), "{}", turn.description);

    // Every inner call is an event, and in the transcript, under the script's id.
    let inner: Vec<Value> = turn.events.of("tool_call").into_iter().filter(|e| e["name"] != "run_code").collect();
    let ids: Vec<&str> = inner.iter().map(|e| e["id"].as_str().unwrap()).collect();
    assert_eq!(ids.len(), 7);
    assert!(ids.iter().all(|id| id.starts_with("call_1_1.")), "{ids:?}");
    let recorded = std::fs::read_to_string(&transcript).unwrap();
    let recorded: Vec<Value> = recorded.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for id in &ids {
        let found = |kind: &str| recorded.iter().any(|e| e.to_string().contains(kind) && e.to_string().contains(id));
        assert!(found("tool_call") && found("tool_result"), "{id} is not in the transcript");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn promise_all_runs_a_scripts_calls_at_once() {
    let dir = tempfile::tempdir().unwrap();
    // `gather` answers only when three calls are in flight together.
    let script = r#"
        return await Promise.all([1, 2, 3].map(n => tools.g.echo({ text: `n${n}` })));
    "#;
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.servers = vec![("g", "gather", &["--peers", "3"])];
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error, "{text}");
    assert!(text.starts_with(r#"["n1","n2","n3"]"#), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_confirm_tool_asks_saying_a_script_asks_and_a_refusal_is_an_exception() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        try { await tools.fx.add({ a: 1, b: 2 }); return "ran"; }
        catch (e) { return [e.kind, e.message]; }
    "#;
    let asked = Arc::new(Asked { answer: ApprovalAnswer::No, requests: Mutex::new(Vec::new()) });
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.policy = policy(&[("fx", "add", Decision::Confirm)]);
    setup.approver = asked.clone();
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(
        !is_error
            && text.starts_with(
                r#"["not_approved","tools.fx.add: the call to mcp__fx__add was not run: refused by the user"#
            ),
        "{text}"
    );
    let requests = asked.requests.lock().unwrap();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].script.as_deref(), Some("call_1_1"));
    assert_eq!(requests[0].asked_by().as_deref(), Some(r#"script "call_1_1""#));
    assert!(received(dir.path(), "fx").is_empty(), "nothing reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_neither_declared_nor_in_the_tools_object() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"return [typeof tools.fx.env, Object.keys(tools.fx).includes("env"), typeof tools.fx.echo];"#;
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.policy = policy(&[("fx", "env", Decision::Deny)]);
    let turn = setup.run().await;
    assert_eq!(turn.results[0], (r#"["undefined",false,"function"]"#.to_owned(), false));
    assert!(!turn.description.contains("function env("), "{}", turn.description);
    assert!(turn.description.contains("function echo("), "{}", turn.description);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_out_of_scope_is_not_reachable_from_a_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"return [typeof tools.fx, typeof tools.other];"#;
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.servers = vec![("fx", "echo", &[]), ("other", "echo", &[])];
    setup.scope = CodeScope::only(["fx"]);
    let turn = setup.run().await;
    assert_eq!(turn.results[0], (r#"["object","undefined"]"#.to_owned(), false));
    assert!(!turn.description.contains("namespace other"), "{}", turn.description);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn arguments_that_fail_the_schema_are_refused_unsent() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        try { await tools.fx.add({ a: "one", b: 2 }); } catch (e) { return [e.kind, e.message]; }
    "#;
    let turn = Setup::new(dir.path(), &[script]).run().await;
    let (text, is_error) = &turn.results[0];
    assert!(
        !is_error && text.starts_with(r#"["bad_arguments","tools.fx.add: the arguments for mcp__fx__add do not match"#),
        "{text}"
    );
    assert!(received(dir.path(), "fx").is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_limit_stops_its_script_with_its_own_error_and_the_host_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let scripts = [
        "while (true) {}",
        r#"const keep = []; while (true) keep.push("x".repeat(1 << 20) + keep.length);"#,
        r#"for (let i = 0; i < 50; i++) await tools.fx.echo({ text: `${i}` }); return "all";"#,
        r#"return "y".repeat(5000);"#,
        r#"return await tools.fx.echo({ text: "still here" });"#,
    ];
    let mut setup = Setup::new(dir.path(), &scripts);
    let mut limits = code_mode::Limits::default();
    limits.cpu_time = Duration::from_millis(300);
    limits.memory_bytes = 16 << 20;
    limits.max_calls = 5;
    limits.max_result_bytes = 2048;
    setup.limits = limits;
    let turn = setup.run().await;
    let r = &turn.results;
    assert!(r[0].1 && r[0].0.contains("more than its 0.300 s of CPU time and was stopped"), "{:?}", r[0]);
    assert!(r[1].1 && r[1].0.contains("more than its 16 MiB of memory and was stopped"), "{:?}", r[1]);
    assert!(r[2].1 && r[2].0.contains("more than 5 tool calls and was stopped"), "{:?}", r[2]);
    assert!(r[3].1 && r[3].0.contains("return value is 5002 bytes of JSON, over the limit of 2048"), "{:?}", r[3]);
    assert_eq!(r[4], (r#""still here""#.to_owned(), false), "the host goes on");
    assert_eq!(received(dir.path(), "fx").len(), 6, "five calls of the flood, then the last script's");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_over_the_budget_is_saved_like_any_large_result() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"const { records } = await tools.fx.list_records({}); return records;"#;
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.result_budget = 1000;
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error && text.contains("is saved in") && text.contains("read_saved_result"), "{text}");
    let saved = dir.path().join("session/tool-results/call_1_1.txt");
    let value: Value = serde_json::from_str(&std::fs::read_to_string(saved).unwrap()).unwrap();
    assert_eq!(value.as_array().map(Vec::len), Some(200));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_script_reaches_no_file_system_network_or_environment() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        const globals = [typeof require, typeof process, typeof fetch, typeof XMLHttpRequest, typeof WebSocket,
            typeof std, typeof os, typeof Deno, typeof setTimeout, typeof setInterval, typeof globalThis.process];
        let imported;
        try { await import("os"); imported = "imported"; } catch (e) { imported = "refused"; }
        let fn;
        try { fn = (function () {}).constructor("return 1")(); } catch (e) { fn = "refused"; }
        return { globals, imported, fn };
    "#;
    let turn = Setup::new(dir.path(), &[script]).run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error, "{text}");
    let value: Value = serde_json::from_str(text).unwrap();
    for kind in value["globals"].as_array().unwrap() {
        assert!(kind == "undefined" || kind == "refused", "{text}");
    }
    assert_eq!((value["imported"].as_str(), value["fn"].as_str()), (Some("refused"), Some("refused")), "{text}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_list_change_mid_script_refuses_the_next_call_as_stale() {
    let dir = tempfile::tempdir().unwrap();
    // `add_tool` makes the server announce a new tool list before it answers.
    let script = r#"
        await tools.fx.add_tool({ name: "fresh" });
        try { await tools.fx.echo({ text: "after" }); return "sent"; }
        catch (e) { return [e.kind, e.message]; }
    "#;
    let turn = Setup::new(dir.path(), &[script]).run().await;
    let (text, is_error) = &turn.results[0];
    assert!(
        !is_error && text.starts_with(r#"["stale","tools.fx.echo: the tools of server \"fx\" changed after"#),
        "{text}"
    );
    let calls: Vec<String> = received(dir.path(), "fx").into_iter().map(|(tool, _)| tool).collect();
    assert_eq!(calls, ["add_tool"], "the stale call never reached the server");
}

/// Blocks `add`, and records what it is told of every call.
#[derive(Default)]
struct Watching {
    before: Mutex<Vec<(String, String)>>,
    decided: Mutex<Vec<(String, String)>>,
    after: Mutex<Vec<(String, bool)>>,
}

#[async_trait]
impl agent_loop::Hooks for Watching {
    async fn before_tool(&self, call: &agent_loop::CallInfo) -> agent_loop::HookVerdict {
        self.before.lock().unwrap().push((call.id.clone(), call.name.clone()));
        if call.name == "mcp__fx__add" {
            agent_loop::HookVerdict::Block("no sums today".to_owned())
        } else {
            agent_loop::HookVerdict::Continue
        }
    }

    fn decided(&self, call: &agent_loop::CallInfo, _decision: &agent_loop::GateDecision<'_>) {
        self.decided.lock().unwrap().push((call.id.clone(), call.name.clone()));
    }

    async fn after_tool(&self, call: &agent_loop::CallInfo, _result: &str, is_error: bool) {
        self.after.lock().unwrap().push((call.id.clone(), is_error));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_see_and_can_block_a_scripts_calls() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        const echoed = await tools.fx.echo({ text: "hi" });
        try { await tools.fx.add({ a: 1, b: 2 }); } catch (e) { return [echoed, e.kind, e.message]; }
    "#;
    let hooks = Arc::new(Watching::default());
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.hooks = Some(hooks.clone());
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(
        !is_error
            && text
                .starts_with(r#"["hi","blocked","tools.fx.add: the call to mcp__fx__add was blocked: no sums today"#),
        "{text}"
    );
    let before = hooks.before.lock().unwrap().clone();
    let names: Vec<(&str, &str)> = before.iter().map(|(id, name)| (id.as_str(), name.as_str())).collect();
    assert_eq!(names, [("call_1_1", "run_code"), ("call_1_1.1", "mcp__fx__echo"), ("call_1_1.2", "mcp__fx__add")]);
    let after = hooks.after.lock().unwrap().clone();
    assert!(
        after.contains(&("call_1_1.1".to_owned(), false)) && after.contains(&("call_1_1.2".to_owned(), true)),
        "{after:?}"
    );
    let calls: Vec<String> = received(dir.path(), "fx").into_iter().map(|(tool, _)| tool).collect();
    assert_eq!(calls, ["echo"], "the blocked call never reached the server");
}

/// The tool results the loop reported for the calls named `name`: (id, content, is_error).
fn reported(events: &Events, name: &str) -> Vec<(String, String, bool)> {
    let ids: Vec<Value> =
        events.of("tool_call").into_iter().filter(|e| e["name"] == name).map(|e| e["id"].clone()).collect();
    events
        .of("tool_result")
        .into_iter()
        .filter(|e| ids.contains(&e["id"]))
        .map(|e| {
            let content = e["content"].as_str().unwrap_or_default().to_owned();
            (e["id"].as_str().unwrap_or_default().to_owned(), content, e["is_error"] == true)
        })
        .collect()
}

const SEARCH_THEN_CALL: &str = r#"
    const before = typeof tools.fx;
    const found = await tools.search("add two numbers");
    const sum = await tools.fx.add({ a: 1, b: 2 });
    return { before, found, sum };
"#;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tool_search_a_script_finds_a_deferred_tool_and_calls_it_in_the_same_script() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("t.jsonl");
    let mut setup = Setup::new(dir.path(), &[SEARCH_THEN_CALL]).searching();
    setup.transcript = Some(&transcript);
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error, "{text}");
    let value: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    // Before the search, no tool of fx was in `tools`; the search found `add`, and the call ran.
    assert_eq!(value["before"], "undefined", "{text}");
    assert_eq!(value["sum"], "3", "{text}");
    let first = &value["found"][0];
    assert_eq!(first["path"], "tools.fx.add", "{text}");
    assert_eq!(first["name"], "mcp__fx__add", "{text}");
    assert_eq!(first["description"], "Add two numbers.", "{text}");
    assert!(first["declaration"].as_str().unwrap().starts_with("function add(args: { a: number"), "{text}");
    assert_eq!(received(dir.path(), "fx"), [("add".to_owned(), json!({"a": 1, "b": 2}))]);

    // The declarations offer the search and declare none of the deferred tools.
    assert!(turn.description.contains("tools.search(\"what you need\""), "{}", turn.description);
    assert!(turn.description.contains("function search(query: string"), "{}", turn.description);
    assert!(!turn.description.contains("function add("), "{}", turn.description);
    // What a script finds is loaded for the script alone, not for the model.
    for step in &turn.tools {
        assert!(!step.iter().any(|t| t == "mcp__fx__add"), "{:?}", turn.tools);
        assert!(step.iter().any(|t| t == agent_loop::SEARCH_TOOL), "{:?}", turn.tools);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_search_and_the_call_it_enables_are_in_the_transcript_under_the_scripts_id() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("t.jsonl");
    let mut setup = Setup::new(dir.path(), &[SEARCH_THEN_CALL]).searching();
    setup.transcript = Some(&transcript);
    let turn = setup.run().await;
    assert!(!turn.results[0].1, "{:?}", turn.results[0]);
    let inner: Vec<(String, String)> = turn
        .events
        .of("tool_call")
        .into_iter()
        .filter(|e| e["name"] != "run_code")
        .map(|e| (e["id"].as_str().unwrap().to_owned(), e["name"].as_str().unwrap().to_owned()))
        .collect();
    assert_eq!(
        inner,
        [
            ("call_1_1.1".to_owned(), agent_loop::SEARCH_TOOL.to_owned()),
            ("call_1_1.2".to_owned(), "mcp__fx__add".to_owned())
        ]
    );
    // The search is reported with the answer the model's search tool would give.
    let searched = reported(&turn.events, agent_loop::SEARCH_TOOL);
    assert_eq!(searched.len(), 1, "{searched:?}");
    assert!(
        searched[0].1.starts_with("Tools found (callable in this script; not loaded for the model):\n"),
        "{searched:?}"
    );
    assert!(searched[0].1.contains("- mcp__fx__add (server fx): Add two numbers."), "{searched:?}");
    let recorded = std::fs::read_to_string(&transcript).unwrap();
    let recorded: Vec<Value> = recorded.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    for (id, name) in &inner {
        let found = |kind: &str| {
            recorded.iter().any(|e| {
                let line = e.to_string();
                line.contains(kind) && line.contains(&format!("\"{id}\""))
            })
        };
        assert!(found("tool_call") && found("tool_result"), "{id} ({name}) is not in the transcript");
    }
    assert!(
        recorded.iter().any(|e| e.to_string().contains("\"call_1_1.1\"") && e.to_string().contains("add two numbers")),
        "the search's query is in the transcript"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_denied_tool_is_not_found_by_a_scripts_search_nor_callable() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        const byWords = (await tools.search("read an environment variable")).map(f => f.name);
        const bySelect = (await tools.search("select:mcp__fx__env,mcp__fx__echo")).map(f => f.name);
        let call;
        try { await tools.fx.env({ name: "HOME" }); call = "called"; } catch (e) { call = e.name; }
        return { byWords, bySelect, env: typeof tools.fx.env, call };
    "#;
    let mut setup = Setup::new(dir.path(), &[script]).searching();
    setup.policy = policy(&[("fx", "env", Decision::Deny)]);
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error, "{text}");
    let value: Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert!(!value["byWords"].as_array().unwrap().contains(&json!("mcp__fx__env")), "{text}");
    assert_eq!(value["bySelect"], json!(["mcp__fx__echo"]), "{text}");
    assert_eq!((&value["env"], &value["call"]), (&json!("undefined"), &json!("TypeError")), "{text}");
    let searched = reported(&turn.events, agent_loop::SEARCH_TOOL);
    assert!(
        searched[1].1.contains("Not found (no tool you may use has these exact names): mcp__fx__env"),
        "{searched:?}"
    );
    assert!(received(dir.path(), "fx").is_empty(), "nothing reached the server");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_tool_search_off_tools_search_is_refused_with_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        try { await tools.search("add two numbers"); return "searched"; }
        catch (e) { return [e.name, e.kind, e.message, typeof tools.fx.add]; }
    "#;
    // The default exposure: the fixture's few tools are all shown, nothing waits behind search.
    let turn = Setup::new(dir.path(), &[script]).run().await;
    let (text, is_error) = &turn.results[0];
    assert!(!is_error, "{text}");
    assert!(
        text.starts_with(
            r#"["ToolError","refused","tools.search: tool search is off here: every tool this script may call is already in `tools`"#
        ),
        "{text}"
    );
    assert!(text.contains(r#""function"]"#), "{text}");
    assert!(!turn.description.contains("tools.search"), "{}", turn.description);
    assert!(turn.description.contains("function add("), "{}", turn.description);
    assert!(reported(&turn.events, agent_loop::SEARCH_TOOL).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scripts_searches_count_toward_its_call_limit() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
        await tools.search("echo text");
        await tools.search("add two numbers");
        await tools.fx.echo({ text: "one" });
        await tools.fx.add({ a: 1, b: 2 });
        return "all";
    "#;
    let mut setup = Setup::new(dir.path(), &[script]).searching();
    setup.limits.max_calls = 3;
    let turn = setup.run().await;
    let (text, is_error) = &turn.results[0];
    assert!(*is_error && text.contains("more than 3 tool calls and was stopped"), "{text}");
    assert!(turn.description.contains("Limits: 3 tool calls (searches included)"), "{}", turn.description);
    assert_eq!(received(dir.path(), "fx"), [("echo".to_owned(), json!({"text": "one"}))]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_hidden_by_a_budget_not_by_policy_is_still_callable_from_a_script() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"return await tools.fx.echo({ text: "over budget" });"#;
    let mut setup = Setup::new(dir.path(), &[script]);
    // Every fx tool is over its server's tool budget: the model is not sent any of them.
    let tiny = tool_pool::ServerExposure { tool_budget: Some(10), ..Default::default() };
    setup.exposure.servers.insert("fx".to_owned(), tiny);
    let turn = setup.run().await;
    assert!(turn.tools.iter().all(|step| !step.iter().any(|t| t.starts_with("mcp__fx__"))), "{:?}", turn.tools);
    assert_eq!(turn.results[0], (r#""over budget""#.to_owned(), false));
    assert!(turn.description.contains("function echo("), "{}", turn.description);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_hear_a_scripts_search_like_its_calls() {
    let dir = tempfile::tempdir().unwrap();
    let hooks = Arc::new(Watching::default());
    let mut setup = Setup::new(dir.path(), &[SEARCH_THEN_CALL]).searching();
    setup.hooks = Some(hooks.clone());
    let turn = setup.run().await;
    // The hook blocks `add`: the script found it, and its call was stopped at the gate.
    let (text, is_error) = &turn.results[0];
    assert!(*is_error && text.contains("the call to mcp__fx__add was blocked: no sums today"), "{text}");
    // The search is told to the hooks as the gate's decisions are (as the model's search is).
    let decided = hooks.decided.lock().unwrap().clone();
    let decided: Vec<(&str, &str)> = decided.iter().map(|(id, name)| (id.as_str(), name.as_str())).collect();
    assert_eq!(
        decided,
        [("call_1_1", "run_code"), ("call_1_1.1", agent_loop::SEARCH_TOOL), ("call_1_1.2", "mcp__fx__add")]
    );
    let before = hooks.before.lock().unwrap().clone();
    let names: Vec<(&str, &str)> = before.iter().map(|(id, name)| (id.as_str(), name.as_str())).collect();
    assert_eq!(names, [("call_1_1", "run_code"), ("call_1_1.2", "mcp__fx__add")]);
    assert!(received(dir.path(), "fx").is_empty());
}

/// A call the script started and did not await is cancelled when the script returns: it is
/// told as a result that says so (the transcript had a call allowed and sent that never ended).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_the_script_did_not_await_ends_in_the_transcript_too() {
    let dir = tempfile::tempdir().unwrap();
    let transcript = dir.path().join("t.jsonl");
    // The short sleep lets the long call pass the gate first (a call dropped before the gate was
    // never told, and needs no result).
    let script = r#"tools.fx.sleep({ ms: 5000 }); await tools.fx.sleep({ ms: 300 }); return 1;"#;
    let mut setup = Setup::new(dir.path(), &[script]);
    setup.transcript = Some(&transcript);
    let turn = setup.run().await;
    assert!(turn.results[0].0.starts_with('1'), "{:?}", turn.results);
    let called: Vec<Value> = turn.events.of("tool_call").into_iter().filter(|e| e["arguments"]["ms"] == 5000).collect();
    assert_eq!(called.len(), 1, "{called:?}");
    let ended: Vec<Value> = turn.events.of("tool_result").into_iter().filter(|e| e["id"] == called[0]["id"]).collect();
    assert_eq!(ended.len(), 1, "the call has one result");
    assert_eq!(ended[0]["is_error"], true);
    assert!(
        ended[0]["content"].as_str().unwrap().contains("the script ended before this call answered"),
        "{}",
        ended[0]
    );
    let recorded = std::fs::read_to_string(&transcript).unwrap();
    assert!(recorded.contains("the script ended before this call answered"), "{recorded}");
}
