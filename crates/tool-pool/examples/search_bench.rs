//! Tool search figures on the evaluation set's real tools: bytes of definitions sent per step with
//! search on against sending them all (1,000 tools from 20 servers), index build time and query
//! latency at 10,000 tools. Prints medians over several runs, and one JSON line.
//!
//! Run with `cargo run --release -p tool-pool --example search_bench [-- --runs N] [--data DIR]`.
//!
//! - **Bytes per step.** 1,000 tools picked evenly from the set, dealt into 20 servers of 50.
//!   Sessions of 10 steps: each step runs one of the set's queries through the search tool and
//!   loads its first 3 results, as a model selecting what it needs would; a step sends the
//!   loaded definitions plus the search tool's own. Against: every definition, every step.
//! - **10,000 tools.** The set's 2,558 tools copied under renamed servers (`c1-…`, `c2-…`, …)
//!   until there are 10,000. Build: `SearchIndex::new` over the pool with search on. Queries:
//!   all 2,795 of the set's queries (limit 10), each the fastest of 5 runs. The build is timed
//!   twice: wall time, and the building thread's CPU time, which is what the build costs once it
//!   has a core (on a shared machine with more runnable threads than cores, wall time also
//!   counts the waits for one); its page faults (median) are printed beside.

use std::collections::BTreeSet;
use std::error::Error;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_protocol::Tool;
use policy::Policy;
use serde_json::json;
use tool_pool::{BuiltinTool, ExposureOptions, Options, Pool, SearchIndex, SearchMode, ServerTools, assemble, expose};

#[path = "support/dataset.rs"]
mod dataset;

const STEP_TOOLS: usize = 1_000;
const STEP_SERVERS: usize = 20;
const STEPS: usize = 10;
const LOADED_PER_STEP: usize = 3;
const BIG: usize = 10_000;
const REPEATS: usize = 5;

fn main() -> Result<(), Box<dyn Error>> {
    let mut data = dataset::default_dir();
    let mut runs = 5usize;
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--data" => data = args.next().ok_or("--data needs a directory")?.into(),
            "--runs" => runs = args.next().ok_or("--runs needs a number")?.parse()?,
            other => return Err(format!("unknown argument {other:?}").into()),
        }
    }
    let runs = runs.max(1);
    let all: Vec<Tool> = dataset::tools(&data)?.into_values().flatten().collect();
    let queries: Vec<String> = dataset::queries(&data)?.into_iter().map(|q| q.query).collect();
    // What a search tool's definition might look like; the agent's own comes with the loop.
    let builtins: Arc<[BuiltinTool]> = Arc::new([BuiltinTool {
        name: "tool_search".into(),
        description: "Find tools to use. Answers with the best matching tools (name, server, one-line \
                      description); the tools found can be called from the next step on. \
                      `select:NAME[,NAME]` loads tools by exact name."
            .into(),
        input_schema: json!({
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What the tool should do, or select:NAME[,NAME]."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 25, "description": "Most results (default 5)."},
            },
            "required": ["query"],
        }),
    }]);
    let policy = Policy::default();

    // Bytes per step, 1,000 tools from 20 servers.
    let picked: Vec<Tool> = (0..STEP_TOOLS).map(|i| all[i * all.len() / STEP_TOOLS].clone()).collect();
    let listings: Vec<ServerTools> = picked
        .chunks(STEP_TOOLS / STEP_SERVERS)
        .enumerate()
        .map(|(s, tools)| ServerTools::new(format!("server-{:02}", s + 1), tools.to_vec()))
        .collect();
    let pool = assemble(&builtins, &listings, &policy, &Options::default(), 1)?;
    let everything = ExposureOptions {
        tool_budget: usize::MAX,
        pool_budget: usize::MAX,
        tool_search: SearchMode::Off,
        ..ExposureOptions::default()
    };
    let all_bytes = expose(&pool, &everything, &BTreeSet::new()).loaded_bytes();
    let search_on = ExposureOptions { tool_search: SearchMode::On, ..ExposureOptions::default() };
    let first = expose(&pool, &search_on, &BTreeSet::new());
    let index = SearchIndex::new(&pool, &first);
    let mut step_bytes: Vec<usize> = Vec::new();
    for session in queries.chunks(STEPS) {
        let mut loaded = BTreeSet::new();
        for query in session {
            for hit in index.search(query, Some(LOADED_PER_STEP)).hits {
                loaded.insert(hit.name.to_string());
            }
            step_bytes.push(expose(&pool, &search_on, &loaded).loaded_bytes());
        }
    }
    let mean_step = step_bytes.iter().sum::<usize>() as f64 / step_bytes.len().max(1) as f64;
    let last_steps: Vec<usize> = step_bytes.chunks(STEPS).filter_map(|s| s.last().copied()).collect();
    let mean_last = last_steps.iter().sum::<usize>() as f64 / last_steps.len().max(1) as f64;
    let hidden_by_budget = first.iter().filter(|t| t.state == tool_pool::ExposureState::Hidden).count();

    // 10,000 tools.
    let mut big: Vec<ServerTools> = Vec::new();
    let mut count = 0;
    'copies: for copy in 1.. {
        for (server, tools) in dataset::tools(&data)? {
            let tools: Vec<Tool> = tools.into_iter().take(BIG - count).collect();
            count += tools.len();
            big.push(ServerTools::new(format!("c{copy}-{server}"), tools));
            if count == BIG {
                break 'copies;
            }
        }
    }
    let big_pool = assemble(&builtins, &big, &policy, &Options::default(), 1)?;
    let big_exposure = expose(&big_pool, &search_on, &BTreeSet::new());
    let (mut builds, mut p50s, mut p99s, mut plain_builds, mut plain_p50s, mut plain_p99s) =
        (vec![], vec![], vec![], vec![], vec![], vec![]);
    let mut indexed = 0;
    let (mut build_cpus, mut build_faults) = (vec![], vec![]);
    for _ in 0..runs {
        let start = Instant::now();
        let cpu_start = thread_cpu()?;
        let faults_start = thread_faults()?;
        let index = SearchIndex::new(&big_pool, &big_exposure);
        build_faults.push(thread_faults()?.saturating_sub(faults_start));
        build_cpus.push(thread_cpu()?.saturating_sub(cpu_start));
        builds.push(start.elapsed());
        indexed = index.len();
        let (p50, p99) = latencies(&queries, |q| index.search(q, Some(10)).hits.len());
        p50s.push(p50);
        p99s.push(p99);

        let start = Instant::now();
        let plain = SearchIndex::plain_bm25(searchable(&big_pool));
        plain_builds.push(start.elapsed());
        let (p50, p99) = latencies(&queries, |q| plain.search(q, Some(10)).hits.len());
        plain_p50s.push(p50);
        plain_p99s.push(p99);
    }

    let ms = |d: Duration| (d.as_secs_f64() * 1e6).round() / 1e3;
    let median = |v: &mut Vec<Duration>| {
        v.sort();
        ms(v[v.len() / 2])
    };
    let fastest = |v: &[Duration]| v.iter().copied().min().map_or(0.0, ms);
    let ratio = mean_step / all_bytes.max(1) as f64;
    println!("tool search bench ({runs} runs, medians)");
    println!(
        "bytes per step, {STEP_TOOLS} tools / {STEP_SERVERS} servers: all {all_bytes}; search on: first step {}, \
         mean {mean_step:.0} ({:.1}% of all), after {STEPS} steps {mean_last:.0} ({:.1}%); {hidden_by_budget} over the \
         per-tool budget",
        first.loaded_bytes(),
        100.0 * ratio,
        100.0 * mean_last / all_bytes.max(1) as f64,
    );
    let build_min = fastest(&builds);
    let (b, p50, p99) = (median(&mut builds), median(&mut p50s), median(&mut p99s));
    let (cpu, cpu_min) = (median(&mut build_cpus.clone()), fastest(&build_cpus));
    build_faults.sort_unstable();
    let faults = build_faults[build_faults.len() / 2];
    let (pb, pp50, pp99) = (median(&mut plain_builds), median(&mut plain_p50s), median(&mut plain_p99s));
    println!(
        "{indexed} tools: build {b} ms (fastest {build_min} ms; thread CPU time {cpu} ms, fastest {cpu_min} ms; \
         {faults} page faults), query p50 {p50} ms, p99 {p99} ms ({} queries)",
        queries.len()
    );
    println!("plain BM25 at {indexed} tools: build {pb} ms, query p50 {pp50} ms, p99 {pp99} ms");
    println!(
        "{}",
        json!({
            "bench": "tool_search",
            "runs": runs,
            "step_tools": STEP_TOOLS,
            "all_bytes": all_bytes,
            "mean_step_bytes": mean_step.round(),
            "step_ratio": (ratio * 1000.0).round() / 1000.0,
            "tools": indexed,
            "build_ms": b,
            "build_min_ms": build_min,
            "build_cpu_ms": cpu,
            "build_cpu_min_ms": cpu_min,
            "build_page_faults": faults,
            "query_p50_ms": p50,
            "query_p99_ms": p99,
            "plain_build_ms": pb,
            "plain_query_p50_ms": pp50,
            "plain_query_p99_ms": pp99,
        })
    );
    Ok(())
}

/// The MCP entries of `pool` (what [`SearchIndex::new`] indexes with nothing hidden).
fn searchable(pool: &Pool) -> impl Iterator<Item = tool_pool::PoolEntry<'_>> {
    pool.iter().filter(|e| e.server().is_some())
}

/// p50 and p99 of `search` over `queries`. Each query runs [`REPEATS`] times and counts its
/// fastest run: the machine is shared, and a slower run measures the neighbours' work.
fn latencies(queries: &[String], search: impl Fn(&str) -> usize) -> (Duration, Duration) {
    let mut times: Vec<Duration> = queries
        .iter()
        .map(|q| {
            (0..REPEATS)
                .map(|_| {
                    let start = Instant::now();
                    std::hint::black_box(search(std::hint::black_box(q)));
                    start.elapsed()
                })
                .min()
                .unwrap_or_default()
        })
        .collect();
    times.sort();
    let at = |p: usize| times.get((times.len() * p / 100).min(times.len().saturating_sub(1))).copied();
    (at(50).unwrap_or_default(), at(99).unwrap_or_default())
}

/// Page faults the calling thread has taken so far: memory fresh from the system costs one per
/// page, a visible part of a build.
fn thread_faults() -> Result<i64, Box<dyn Error>> {
    use nix::sys::resource::{UsageWho, getrusage};
    Ok(getrusage(UsageWho::RUSAGE_THREAD)?.minor_page_faults())
}

/// CPU time the calling thread has used so far.
fn thread_cpu() -> Result<Duration, Box<dyn Error>> {
    let t = nix::time::clock_gettime(nix::time::ClockId::CLOCK_THREAD_CPUTIME_ID)?;
    Ok(Duration::new(u64::try_from(t.tv_sec())?, u32::try_from(t.tv_nsec())?))
}
