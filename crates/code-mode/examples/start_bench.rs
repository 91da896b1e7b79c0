//! Engine start plus first call: how long a script that makes one tool call takes from
//! `Engine::run` to its value, over many runs (median and 90th percentile), beside the parts
//! that make it up (a run with no call; a thread started and joined).
//!
//! `cargo run --release -p code-mode --example start_bench [RUNS]` (default 200). Goal: a
//! median under 5 ms.

use std::time::{Duration, Instant};

use code_mode::{CallError, Engine, ScriptCallContext, ScriptTool, ScriptTools, ToolCaller};
use serde_json::{Map, Value, json};

/// Answers at once, as a tool on a warm connection would (less the round trip).
struct Echo;

#[async_trait::async_trait]
impl ToolCaller for Echo {
    async fn call(
        &self,
        _: &ScriptTool,
        arguments: Map<String, Value>,
        _: &ScriptCallContext,
    ) -> Result<Value, CallError> {
        Ok(Value::Object(arguments))
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let runs: usize = std::env::args().nth(1).map(|n| n.parse()).transpose()?.unwrap_or(200);
    let runtime = tokio::runtime::Builder::new_current_thread().build()?;
    let engine = Engine::default();
    let tools = ScriptTools::new([ScriptTool::new(
        "mcp__bench__echo",
        "bench",
        "echo",
        json!({"type": "object", "properties": {"n": {"type": "number"}}}),
    )]);

    let first_call = "const r = await tools.bench.echo({ n: 1 }); return r.n;";
    let no_call = "return 1;";
    let timed = |script: &str| -> Result<Vec<Duration>, Box<dyn std::error::Error>> {
        let mut times = Vec::with_capacity(runs);
        for _ in 0..runs {
            let start = Instant::now();
            let run = runtime.block_on(engine.run(script, &tools, &Echo, "bench"));
            times.push(start.elapsed());
            if let Err(e) = run.result {
                return Err(format!("the benchmark script failed: {e}").into());
            }
        }
        Ok(times)
    };
    // Warm up the allocator and the page cache once.
    timed(first_call)?;
    let with_call = timed(first_call)?;
    let without = timed(no_call)?;
    let mut thread = Vec::with_capacity(runs);
    for _ in 0..runs {
        let start = Instant::now();
        std::thread::spawn(|| {}).join().map_err(|_| "a thread panicked")?;
        thread.push(start.elapsed());
    }

    println!("code mode: engine start + first call, {runs} runs");
    for (label, times) in [
        ("start + one call + value", with_call.clone()),
        ("start + value, no call", without),
        ("a thread started and joined", thread),
    ] {
        let (median, p90) = percentiles(times);
        println!("  {label:<30} median {:>8.3} ms   p90 {:>8.3} ms", ms(median), ms(p90));
    }
    let (median, _) = percentiles(with_call);
    let verdict = if median < Duration::from_millis(5) { "met" } else { "missed" };
    println!("goal: median under 5 ms: {verdict} ({:.3} ms)", ms(median));
    Ok(())
}

fn percentiles(mut times: Vec<Duration>) -> (Duration, Duration) {
    times.sort();
    let at = |q: f64| times.get(((times.len() as f64 - 1.0) * q).round() as usize).copied().unwrap_or_default();
    (at(0.5), at(0.9))
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
