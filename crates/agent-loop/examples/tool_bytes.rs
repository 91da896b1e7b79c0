//! Bytes of tool definitions the loop sends the model per step, with tool search on, as a share
//! of sending every tool: measured on the requests the agent really builds.
//!
//! 1,000 tools picked evenly from the tool search evaluation set's real tools
//! (`crates/tool-pool/data/search-eval`), dealt into 20 servers of 50. A session is 10 user
//! turns, each one of the set's queries; in each turn the model searches with the query (limit
//! 3), calls the first tool found in the next step, then answers. Every request's `tools` are
//! serialized as JSON and counted. Against: the same sessions with search off and no budgets,
//! where every step sends every tool.
//!
//! Run it: `cargo run --release -p agent-loop --example tool_bytes [-- --sessions N]`.

use std::error::Error;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use agent_loop::{
    Agent, AgentConfig, Block, BoundCall, LanguageModel, Listing, ModelError, ModelRequest, ModelResponse, NoEvents,
    Role, SEARCH_TOOL, SourceError, StopReason, TextStream, ToolSource, Usage,
};
use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ContentBlock, Tool};
use policy::{Decision, Policy, PolicyConfig};
use serde_json::json;
use tool_pool::{ExposureOptions, SearchMode, ServerTools};

#[path = "../../tool-pool/examples/support/dataset.rs"]
mod dataset;

const TOOLS: usize = 1_000;
const SERVERS: usize = 20;
const TURNS: usize = 10;

/// Searches with the user's text, calls the first tool found, then answers; counts the bytes
/// of the tools of every request.
#[derive(Default)]
struct Searcher {
    bytes: Mutex<Vec<usize>>,
}

#[async_trait]
impl LanguageModel for Searcher {
    fn name(&self) -> &str {
        "searcher"
    }

    async fn complete(&self, request: &ModelRequest, _stream: &dyn TextStream) -> Result<ModelResponse, ModelError> {
        let size = serde_json::to_vec(&request.tools).map_err(|e| ModelError::Script(e.to_string()))?.len();
        self.bytes.lock().map_err(|_| ModelError::Script("poisoned".into()))?.push(size);
        let last = request.messages.last().ok_or_else(|| ModelError::Script("no messages".into()))?;
        let searching = request.tools.iter().any(|t| t.name == SEARCH_TOOL);
        let use_tool = |name: &str| Block::ToolUse { id: "c".into(), name: name.to_owned(), input: json!({}) };
        let content = match (last.role, last.content.first()) {
            // The user's text: search for it (or, with every tool shown, call the first one).
            (Role::User, Some(Block::Text { text })) if searching => {
                vec![Block::ToolUse {
                    id: "s".into(),
                    name: SEARCH_TOOL.into(),
                    input: json!({"query": text, "limit": 3}),
                }]
            }
            (Role::User, Some(Block::Text { .. })) => vec![use_tool(&request.tools[0].name)],
            // The search's answer: call the first tool it found.
            (Role::User, Some(Block::ToolResult { content, tool_use_id, .. })) if tool_use_id == "s" => {
                let found = content.lines().find_map(|l| l.strip_prefix("- ")?.split(' ').next());
                match found {
                    Some(name) => vec![use_tool(name)],
                    None => vec![Block::text("nothing found")],
                }
            }
            _ => vec![Block::text("done")],
        };
        let stop_reason = if content.iter().any(|b| matches!(b, Block::ToolUse { .. })) {
            StopReason::ToolUse
        } else {
            StopReason::EndTurn
        };
        Ok(ModelResponse { content, stop_reason, usage: Usage::default() })
    }
}

/// Fixed listings; every call answers "ok".
struct Servers(Vec<ServerTools>);

#[async_trait]
impl ToolSource for Servers {
    async fn refresh(&self) -> Listing {
        Listing {
            servers: self.0.clone(),
            generations: self.0.iter().map(|s| (s.server.to_string(), 1)).collect(),
            ..Listing::default()
        }
    }

    fn generation(&self, _server: &str) -> Option<u64> {
        Some(1)
    }

    async fn call_bound(&self, _: BoundCall) -> Result<CallToolResult, SourceError> {
        Ok(CallToolResult { content: vec![ContentBlock::text("ok")], ..Default::default() })
    }
}

/// Bytes of every request's tools over `sessions` sessions of [`TURNS`] queries.
async fn run(servers: &Arc<Servers>, queries: &[String], sessions: usize, exposure: &ExposureOptions) -> Vec<usize> {
    let policy =
        Policy::new(PolicyConfig { default: Decision::Allow, rules: vec![], ..Default::default() }).unwrap_or_default();
    let mut all = Vec::new();
    for session in queries.chunks(TURNS).take(sessions) {
        let model = Arc::new(Searcher::default());
        let config = AgentConfig { exposure: exposure.clone(), ..AgentConfig::default() };
        let agent = Agent::new(model.clone(), servers.clone(), policy.clone(), config);
        let mut conversation = Vec::new();
        for query in session {
            if let Err(e) = agent.run_turn(&mut conversation, query, &NoEvents).await {
                eprintln!("turn failed: {e}");
            }
        }
        all.extend(model.bytes.lock().map(|b| b.clone()).unwrap_or_default());
    }
    all
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> Result<(), Box<dyn Error>> {
    let mut sessions = 20usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--sessions" => sessions = args.next().ok_or("--sessions needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let data = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tool-pool/data/search-eval");
    let all: Vec<Tool> = dataset::tools(&data)?.into_values().flatten().collect();
    let queries: Vec<String> = dataset::queries(&data)?.into_iter().map(|q| q.query).collect();
    let picked: Vec<Tool> = (0..TOOLS).map(|i| all[i * all.len() / TOOLS].clone()).collect();
    let listings = picked
        .chunks(TOOLS / SERVERS)
        .enumerate()
        .map(|(s, tools)| ServerTools::new(format!("server-{:02}", s + 1), tools.to_vec()))
        .collect();
    let servers = Arc::new(Servers(listings));

    let everything = ExposureOptions {
        tool_budget: usize::MAX,
        pool_budget: usize::MAX,
        tool_search: SearchMode::Off,
        ..ExposureOptions::default()
    };
    let search = ExposureOptions { tool_search: SearchMode::Auto, ..ExposureOptions::default() };
    let off = run(&servers, &queries, sessions, &everything).await;
    let on = run(&servers, &queries, sessions, &search).await;
    let mean = |v: &[usize]| v.iter().sum::<usize>() as f64 / v.len().max(1) as f64;
    let (mean_off, mean_on) = (mean(&off), mean(&on));
    let max_on = on.iter().copied().max().unwrap_or(0);
    println!(
        "tool bytes per step, {TOOLS} tools / {SERVERS} servers, {sessions} sessions of {TURNS} turns: all tools \
         {mean_off:.0} bytes ({} steps); search (auto) mean {mean_on:.0} ({:.1}%), largest {max_on} ({:.1}%) over {} steps",
        off.len(),
        100.0 * mean_on / mean_off.max(1.0),
        100.0 * max_on as f64 / mean_off.max(1.0),
        on.len(),
    );
    // Search takes one more step per turn: the whole sessions compared too.
    let total = |v: &[usize]| v.iter().sum::<usize>() as f64;
    let session_ratio = total(&on) / total(&off).max(1.0);
    println!("whole sessions: {:.1}% of the bytes of sending every tool", 100.0 * session_ratio);
    println!(
        "{}",
        json!({"tools": TOOLS, "servers": SERVERS, "sessions": sessions, "all_bytes": mean_off, "search_mean_bytes": mean_on,
               "search_max_bytes": max_on, "ratio": mean_on / mean_off.max(1.0), "session_ratio": session_ratio})
    );
    Ok(())
}
