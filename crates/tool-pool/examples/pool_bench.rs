//! Times the assembly of 10,000 tools from 100 servers and prints one JSON line.
//!
//! Run with `cargo run --release -p tool-pool --example pool_bench [iterations]`.

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_protocol::Tool;
use policy::{Decision, Policy, PolicyConfig, RuleConfig};
use serde_json::json;
use tool_pool::{BuiltinTool, Options, ServerTools, assemble};

const SERVERS: usize = 100;
const TOOLS_PER_SERVER: usize = 100;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: usize = std::env::args().nth(1).map(|a| a.parse()).transpose()?.unwrap_or(200);

    // Realistic-ish input: a few properties per schema, a paragraph of description, some names
    // that need normalizing and some long enough to be shortened.
    let servers: Vec<(String, Vec<Tool>)> = (0..SERVERS)
        .map(|s| {
            let tools = (0..TOOLS_PER_SERVER)
                .map(|t| {
                    let name = match t % 10 {
                        0 => format!("namespace.tool/{t}"),
                        1 => format!("a_rather_long_tool_name_that_will_need_shortening_{t}"),
                        _ => format!("tool_{t}"),
                    };
                    let mut tool = Tool::new(
                        name,
                        json!({
                            "type": "object",
                            "properties": {
                                "query": {"type": "string", "description": "What to look for."},
                                "limit": {"type": "integer", "minimum": 1},
                            },
                            "required": ["query"],
                        }),
                    );
                    tool.description = Some(format!(
                        "Tool {t} of server {s}. {}",
                        "Does something useful with the query and returns the result. ".repeat(3)
                    ));
                    tool
                })
                .collect();
            // Reverse order so the sort has work to do.
            (format!("server-{:03}", SERVERS - s), tools)
        })
        .collect();
    let servers: Vec<ServerTools> =
        servers.into_iter().map(|(server, tools)| ServerTools::new(server, tools)).collect();
    let builtins: Arc<[BuiltinTool]> = Arc::new([BuiltinTool {
        name: "read_file".into(),
        description: "Read a file.".into(),
        input_schema: json!({"type": "object"}),
    }]);
    let policy = Policy::new(PolicyConfig {
        default: Decision::Confirm,
        rules: vec![
            RuleConfig::new("server-0*", "tool_?", Decision::Allow),
            RuleConfig::new("server-05?", "*", Decision::Deny),
            RuleConfig::new("@builtin", "read_*", Decision::Allow),
            RuleConfig::new("*", "namespace*", Decision::Confirm),
        ],
        ..Default::default()
    })?;
    let options = Options::default();

    let mut times: Vec<Duration> = Vec::with_capacity(iterations);
    let mut entries = 0;
    for revision in 0..iterations {
        let start = Instant::now();
        let pool = assemble(&builtins, &servers, &policy, &options, revision as u64)?;
        times.push(start.elapsed());
        entries = std::hint::black_box(pool).len();
    }
    times.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let mean = times.iter().copied().map(ms).sum::<f64>() / times.len().max(1) as f64;
    let median = times.get(times.len() / 2).copied().map_or(0.0, ms);
    println!(
        "{}",
        json!({
            "bench": "assemble",
            "servers": SERVERS,
            "tools": SERVERS * TOOLS_PER_SERVER,
            "entries": entries,
            "iterations": iterations,
            "mean_ms": (mean * 1000.0).round() / 1000.0,
            "median_ms": (median * 1000.0).round() / 1000.0,
            // The least disturbed run, for a machine shared with other work.
            "min_ms": times.first().copied().map_or(0.0, |d| (ms(d) * 1000.0).round() / 1000.0),
        })
    );
    Ok(())
}
