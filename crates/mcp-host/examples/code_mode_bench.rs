//! Code mode's benchmark: one multi-step task (list 200 customer records from one tool, pick
//! the 5 overdue ones, fetch the details of each from another, summarize) done by the agent
//! loop against the fixture server with direct tool calls, then with one `run_code` script,
//! by a deterministic model that reads what it is sent and does what a model would. Prints the
//! bytes sent to the model over the whole task for each, side by side, and whether the final
//! answers are the same; then engine start plus a first real tool call (median and 90th
//! percentile over `RUNS` runs).
//!
//! `cargo run --release -p mcp-host --example code_mode_bench [RUNS]` (default 200), run by
//! `cargo xtask bench agent`. Goals: at least 80% fewer bytes with code mode, the same answer,
//! engine start plus first call under 5 ms median.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_loop::{
    Agent, AgentConfig, Block, LanguageModel, ModelError, ModelRequest, ModelResponse, NoEvents, Role, StopReason,
    TextStream, Usage,
};
use async_trait::async_trait;
use code_mode::{CallError, CallErrorKind, Engine, ScriptCallContext, ScriptTool, ScriptTools, ToolCaller};
use mcp_client::{ConnectOptions, ServerSet, ServerSpec, connect_all};
use mcp_host::{CodeScope, RunCode};
use mcp_transport::StdioConfig;
use policy::{Decision, Policy, PolicyConfig};
use serde_json::{Map, Value, json};

/// The script the code-mode model writes.
const SCRIPT: &str = r#"
const { records } = await tools.fx.list_records({});
const overdue = records.filter(r => r.status === "overdue");
const details = await Promise.all(overdue.map(r => tools.fx.record_details({ id: r.id })));
return details.map(d => ({ id: d.id, owner: d.owner, balance: d.balance }));
"#;

/// The answer, from the details of the overdue records (each with `id`, `owner`, `balance`).
fn summary(details: &[Value]) -> String {
    let total: f64 = details.iter().filter_map(|d| d["balance"].as_f64()).sum();
    let lines: Vec<String> = details
        .iter()
        .map(|d| format!("customer {} ({}, {:.2} owed)", d["id"], d["owner"].as_str().unwrap_or("?"), d["balance"]))
        .collect();
    format!("{} overdue customers, {total:.2} owed in all: {}.", details.len(), lines.join("; "))
}

/// A model that does the task step by step from what it reads, counting the bytes of every
/// request it is sent.
struct TaskModel {
    code_mode: bool,
    bytes: AtomicUsize,
    steps: AtomicUsize,
    answer: Mutex<String>,
}

impl TaskModel {
    fn new(code_mode: bool) -> Self {
        Self { code_mode, bytes: AtomicUsize::new(0), steps: AtomicUsize::new(0), answer: Mutex::new(String::new()) }
    }
}

/// The tool results of the last message, in order.
fn last_results(request: &ModelRequest) -> Vec<String> {
    request
        .messages
        .last()
        .filter(|m| m.role == Role::User)
        .map(|m| {
            m.content
                .iter()
                .filter_map(|b| match b {
                    Block::ToolResult { content, .. } => Some(content.clone()),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

fn use_tool(id: String, name: &str, input: Value) -> Block {
    Block::ToolUse { id, name: name.to_owned(), input }
}

#[async_trait]
impl LanguageModel for TaskModel {
    fn name(&self) -> &str {
        "task"
    }

    async fn complete(&self, request: &ModelRequest, _: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let sent = serde_json::to_vec(request).map_err(|e| ModelError::Script(e.to_string()))?.len();
        self.bytes.fetch_add(sent, Ordering::Relaxed);
        let step = self.steps.fetch_add(1, Ordering::Relaxed);
        let parse = |text: &str| -> Result<Value, ModelError> {
            serde_json::from_str(text).map_err(|e| ModelError::Script(format!("step {step}: {e}: {text:.200}")))
        };
        let calls = |blocks: Vec<Block>| ModelResponse {
            content: blocks,
            stop_reason: StopReason::ToolUse,
            usage: Usage::default(),
        };
        let content = match (self.code_mode, step) {
            (false, 0) => return Ok(calls(vec![use_tool("list".into(), "mcp__fx__list_records", json!({}))])),
            (false, 1) => {
                let listing = parse(last_results(request).first().map_or("", String::as_str))?;
                let overdue = listing["records"].as_array().into_iter().flatten().filter(|r| r["status"] == "overdue");
                let fetch = overdue
                    .map(|r| {
                        use_tool(format!("details_{}", r["id"]), "mcp__fx__record_details", json!({"id": r["id"]}))
                    })
                    .collect();
                return Ok(calls(fetch));
            }
            (false, _) => {
                let details: Vec<Value> = last_results(request).iter().map(|t| parse(t)).collect::<Result<_, _>>()?;
                summary(&details)
            }
            (true, 0) => return Ok(calls(vec![use_tool("script".into(), "run_code", json!({"code": SCRIPT}))])),
            (true, _) => {
                let value = parse(last_results(request).first().map_or("", String::as_str))?;
                summary(value.as_array().map_or(&[][..], Vec::as_slice))
            }
        };
        *self.answer.lock().map_err(|_| ModelError::Script("poisoned".into()))? = content.clone();
        Ok(ModelResponse {
            content: vec![Block::text(content)],
            stop_reason: StopReason::EndTurn,
            usage: Usage::default(),
        })
    }
}

/// One run of the task: (bytes sent to the model, model calls, final answer).
async fn task(set: &Arc<ServerSet>, code_mode: bool) -> Result<(usize, usize, String), Box<dyn std::error::Error>> {
    let model = Arc::new(TaskModel::new(code_mode));
    let policy = Policy::new(PolicyConfig { default: Decision::Allow, ..Default::default() })?;
    let mut agent = Agent::new(model.clone(), set.clone(), policy, AgentConfig::default());
    if code_mode {
        let scope = CodeScope::everything();
        let run_code = RunCode::new(code_mode::Limits::default(), Arc::new(move || scope.clone()), 8192 - 512);
        agent = agent.with_builtins(vec![Arc::new(run_code)]);
    }
    let mut conversation = Vec::new();
    let task = "Which customers are overdue, who owns each account and how much is owed?";
    agent.run_turn(&mut conversation, task, &NoEvents).await?;
    let answer = model.answer.lock().map_err(|_| "poisoned")?.clone();
    Ok((model.bytes.load(Ordering::Relaxed), model.steps.load(Ordering::Relaxed), answer))
}

/// Calls the fixture's tools straight through the server set, giving their text (what the
/// engine's start is timed with: a real round trip, no gate).
struct Direct<'a>(&'a ServerSet);

#[async_trait]
impl ToolCaller for Direct<'_> {
    async fn call(
        &self,
        tool: &ScriptTool,
        args: Map<String, Value>,
        _: &ScriptCallContext,
    ) -> Result<Value, CallError> {
        let result = self.0.call(tool.server(), tool.tool(), Some(args), None, None).await;
        result.map(|r| Value::String(r.joined_text())).map_err(|e| CallError::new(CallErrorKind::Failed, e.to_string()))
    }
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args().nth(1).map(|n| n.parse()).transpose()?.unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    runtime.block_on(async {
        let binary = mcp_fixtures::server_binary()?;
        let config =
            StdioConfig::new(binary.to_string_lossy().into_owned(), ["echo", "--records", "200", "--records-only"]);
        let connections = connect_all(vec![ServerSpec::new("fx", Arc::new(config))], &ConnectOptions::default()).await;
        let set = Arc::new(ServerSet::new(connections));

        let (direct_bytes, direct_steps, direct_answer) = task(&set, false).await?;
        let (code_bytes, code_steps, code_answer) = task(&set, true).await?;
        let fewer = 100.0 * (1.0 - code_bytes as f64 / direct_bytes.max(1) as f64);
        println!("task: list 200 records, pick the 5 overdue, fetch each one's details, summarize");
        println!("{:<14} {:>8} {:>16}", "", "steps", "bytes to model");
        println!("{:<14} {direct_steps:>8} {direct_bytes:>16}", "direct calls");
        println!("{:<14} {code_steps:>8} {code_bytes:>16}", "code mode");
        let same = direct_answer == code_answer;
        println!("code mode sends {fewer:.1}% fewer bytes (goal: at least 80%); same final answer: {same}");
        println!("answer: {code_answer}");

        let engine = Engine::default();
        let tools = ScriptTools::new([ScriptTool::new(
            "mcp__fx__record_details",
            "fx",
            "record_details",
            json!({"type": "object", "properties": {"id": {"type": "integer"}}}),
        )]);
        let script = r#"return (await tools.fx.record_details({ id: 7 })).length > 0;"#;
        let mut times = Vec::with_capacity(runs);
        for i in 0..=runs {
            let start = Instant::now();
            let run = engine.run(script, &tools, &Direct(&set), "bench").await;
            // The first run warms the allocator and the page cache.
            if i > 0 {
                times.push(start.elapsed());
            }
            if run.result != Ok(Some(json!(true))) {
                return Err(format!("the timed script failed: {}", run.render()).into());
            }
        }
        times.sort();
        let median = percentile(&times, 0.5);
        println!(
            "engine start + first call: median_ms={:.3} p90_ms={:.3} runs={runs} (goal: median under 5 ms)",
            median.as_secs_f64() * 1e3,
            percentile(&times, 0.9).as_secs_f64() * 1e3
        );
        let met = fewer >= 80.0 && same && median < Duration::from_millis(5);
        println!("code_mode_goal={}", if met { "met" } else { "missed" });
        if let Ok(set) = Arc::try_unwrap(set) {
            set.close().await;
        }
        Ok(())
    })
}
