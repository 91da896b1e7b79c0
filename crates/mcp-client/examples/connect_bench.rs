//! Connect benchmark (`cargo xtask connect-bench`): the time from `ServerSet::start` until every
//! server is connected and listed, for 1, 10 and 50 stdio fixture servers, and the memory each
//! connected server costs the host (its resident set growth) and the machine (the server
//! processes' resident sets).
//!
//! Two server kinds: `fast` (a Rust server ready at once: what is measured is the host's own
//! work plus process creation, which two cores cannot do for 50 processes at the cost of one)
//! and `slow` (ready after `--startup-ms`, like an interpreter loading its packages: concurrent
//! starts make 50 cost about what 1 does). Rounds interleave the sizes so machine noise spreads.
//!
//! With `--memory N` it prints one JSON line instead: the host's resident set with no server
//! connected (after one server came and went, so what the first connection sets up once is
//! counted in neither figure), and its growth per server with N idle fast servers connected
//! (medians over the rounds).
//!
//! Usage: `connect_bench [--rounds R] [--startup-ms MS] [--memory N] -- FIXTURE_SERVER`
#![allow(clippy::print_stdout)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_client::{ServerSet, ServerSpec, ServerState, SetOptions};
use mcp_transport::StdioConfig;

const SIZES: [usize; 3] = [1, 10, 50];

/// Resident set size of `pid` in KiB (0 when unreadable).
fn rss_kib(pid: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("VmRSS:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        })
        .unwrap_or(0)
}

/// The resident sets of this process's children, in KiB.
fn children_rss_kib() -> u64 {
    let me = std::process::id();
    let path = format!("/proc/{me}/task/{me}/children");
    let Ok(children) = std::fs::read_to_string(&path) else { return 0 };
    // Worker threads spawn children too; gather every task's list.
    let mut pids: Vec<String> = children.split_whitespace().map(str::to_owned).collect();
    if let Ok(tasks) = std::fs::read_dir(format!("/proc/{me}/task")) {
        for task in tasks.filter_map(Result::ok) {
            let p = task.path().join("children");
            if let Ok(more) = std::fs::read_to_string(p) {
                pids.extend(more.split_whitespace().map(str::to_owned));
            }
        }
    }
    pids.sort();
    pids.dedup();
    pids.iter().map(|p| rss_kib(p)).sum()
}

struct Sample {
    seconds: f64,
    host_kib_per_server: f64,
    server_kib_per_server: f64,
}

async fn connect(fixture: &str, n: usize, startup_ms: u64) -> Result<Sample, String> {
    let before = rss_kib("self");
    let startup = startup_ms.to_string();
    let specs = (0..n)
        .map(|i| {
            let config = StdioConfig::new(fixture, ["echo", "--startup-ms", startup.as_str()]);
            let mut spec = ServerSpec::new(format!("s{i}"), Arc::new(config));
            spec.startup_timeout = Duration::from_secs(60);
            spec
        })
        .collect();
    let started = Instant::now();
    // Enough room for every server at once: the benchmark measures concurrent starts.
    let set = ServerSet::start(specs, SetOptions { local_concurrency: n, ..SetOptions::default() });
    set.settled(Duration::from_secs(120)).await;
    let seconds = started.elapsed().as_secs_f64();
    let connected = set.states().iter().filter(|(_, s)| matches!(s, ServerState::Connected { .. })).count();
    if connected != n {
        return Err(format!("{connected} of {n} servers connected: {:?}", set.states()));
    }
    let host = rss_kib("self").saturating_sub(before) as f64 / n as f64;
    let servers = children_rss_kib() as f64 / n as f64;
    set.close().await;
    Ok(Sample { seconds, host_kib_per_server: host, server_kib_per_server: servers })
}

/// `--memory N`: the resident set with none, and its growth per idle server with `n`.
async fn memory(fixture: &str, n: usize, rounds: usize) -> Result<(), String> {
    // The runtime's threads, the deadline watchdog and the allocator's first arenas.
    connect(fixture, 1, 0).await?;
    let (mut none, mut per_server) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        let before = rss_kib("self");
        let sample = connect_idle(fixture, n).await?;
        none.push(before as f64);
        per_server.push(sample);
    }
    println!(
        "{{\"servers\": {n}, \"rss_none_kib\": {:.0}, \"host_kib_per_server\": {:.1}}}",
        median(none),
        median(per_server)
    );
    Ok(())
}

/// Connects `n` fast servers, lets them idle, and returns the host's growth per server in KiB.
async fn connect_idle(fixture: &str, n: usize) -> Result<f64, String> {
    let before = rss_kib("self");
    let specs = (0..n)
        .map(|i| {
            let mut spec = ServerSpec::new(format!("s{i}"), Arc::new(StdioConfig::new(fixture, ["echo"])));
            spec.startup_timeout = Duration::from_secs(60);
            spec
        })
        .collect();
    let set = ServerSet::start(specs, SetOptions { local_concurrency: n, ..SetOptions::default() });
    set.settled(Duration::from_secs(120)).await;
    let connected = set.states().iter().filter(|(_, s)| matches!(s, ServerState::Connected { .. })).count();
    if connected != n {
        return Err(format!("{connected} of {n} servers connected: {:?}", set.states()));
    }
    // Idle: whatever the connections do once settled (catalog listings) is done.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let grown = rss_kib("self").saturating_sub(before) as f64 / n as f64;
    set.close().await;
    Ok(grown)
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

#[tokio::main]
async fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let (mut rounds, mut startup_ms, mut fixture, mut idle) = (5usize, 300u64, None, None);
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--rounds" => rounds = args.next().and_then(|v| v.parse().ok()).ok_or("--rounds needs a number")?,
            "--startup-ms" => {
                startup_ms = args.next().and_then(|v| v.parse().ok()).ok_or("--startup-ms needs a number")?
            }
            "--memory" => idle = Some(args.next().and_then(|v| v.parse().ok()).ok_or("--memory needs a number")?),
            "--" => fixture = args.next(),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    let fixture =
        fixture.ok_or("usage: connect_bench [--rounds R] [--startup-ms MS] [--memory N] -- FIXTURE_SERVER")?;
    if let Some(n) = idle {
        return memory(&fixture, n, rounds).await;
    }
    let mut met = true;
    println!(
        "| servers | kind | connect time (median of {rounds}) | ÷ one server | host KiB / server | server KiB / server |"
    );
    println!("|---|---|---|---|---|---|");
    for (kind, delay) in [("fast", 0), ("slow", startup_ms)] {
        let mut samples: Vec<Vec<Sample>> = SIZES.iter().map(|_| Vec::new()).collect();
        for round in 0..rounds {
            // Alternate the order of sizes so warm caches favour none.
            let order: Vec<usize> =
                if round % 2 == 0 { (0..SIZES.len()).collect() } else { (0..SIZES.len()).rev().collect() };
            for i in order {
                samples[i].push(connect(&fixture, SIZES[i], delay).await?);
            }
        }
        let one = median(samples[0].iter().map(|s| s.seconds).collect());
        for (i, n) in SIZES.iter().enumerate() {
            let time = median(samples[i].iter().map(|s| s.seconds).collect());
            let host = median(samples[i].iter().map(|s| s.host_kib_per_server).collect());
            let server = median(samples[i].iter().map(|s| s.server_kib_per_server).collect());
            println!(
                "| {n} | {kind} ({delay} ms start) | {:.1} ms | {:.2} | {host:.0} | {server:.0} |",
                time * 1000.0,
                time / one
            );
            if kind == "slow" && *n == 50 && time / one > 1.5 {
                met = false;
            }
        }
    }
    println!("goal (50 slow-starting servers take at most 1.5x one): {}", if met { "met" } else { "NOT met" });
    Ok(())
}
