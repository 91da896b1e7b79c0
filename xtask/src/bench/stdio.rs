//! `cargo xtask bench stdio`: the stdio client against a raw-pipe client with no MCP layer, both
//! against the same fast Rust echo server, rounds interleaved so machine noise hits both. Both
//! placements are measured (see [`Placement`]): the client and its server on one CPU, and on two.
//! Beside them, telemetry off against no instrumentation site at all (today's code), per request.

use super::{Placement, field, footprint, median};
use crate::{Result, cargo};

/// The goal: at least as many calls per second as the raw pipe client, in every placement and
/// at every concurrency (a framework that costs nothing over the plain loop).
const GOAL_RATIO: f64 = 1.0;
/// Telemetry off is within noise of today when it adds less than this share of a call's time
/// (issue 35; run to run, the calls/s of this machine move by more).
const OFF_NOISE: f64 = 0.01;

struct Figure {
    placement: &'static str,
    client: String,
    concurrency: usize,
    calls_per_s: f64,
    p50_ms: f64,
    p99_ms: f64,
}

pub(crate) fn run(n: usize, rounds: usize) -> Result {
    crate::run(
        "build (release)",
        cargo().args([
            "build",
            "--release",
            "-p",
            "mcp-transport",
            "--example",
            "stdio_bench",
            "--example",
            "raw_pipe_bench",
        ]),
    )?;
    let server = super::fixture_server()?;
    let release = super::release_dir();
    let placements = Placement::available();
    if placements.is_empty() {
        return Err("taskset could not be run, and the figures depend on where the processes run".into());
    }
    let mut figures = Vec::new();
    for &place in &placements {
        let placement = place.label();
        for round in 1..=rounds {
            for concurrency in [1usize, 100] {
                // Alternate who goes first, so warm caches or a busy neighbour favour neither.
                let order =
                    if round % 2 == 1 { ["raw_pipe_bench", "stdio_bench"] } else { ["stdio_bench", "raw_pipe_bench"] };
                for example in order {
                    let out = place
                        .command(&release.join("examples").join(example), false)
                        .args(["-n", &n.to_string(), "--concurrency", &concurrency.to_string(), "--"])
                        .args(place.server_argv(&server))
                        .arg("echo")
                        .output()
                        .map_err(|e| format!("{example}: {e}"))?;
                    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                    if !out.status.success() {
                        return Err(format!("{example} failed: {}", String::from_utf8_lossy(&out.stderr)));
                    }
                    println!("{placement}, round {round}: {line}");
                    let client = if example == "stdio_bench" { "mcp-harness" } else { "raw-pipe" };
                    figures.push(Figure {
                        placement,
                        client: client.to_owned(),
                        concurrency,
                        calls_per_s: field(&line, "calls_per_s").ok_or("no calls_per_s in output")?,
                        p50_ms: field(&line, "p50_ms").unwrap_or(0.0),
                        p99_ms: field(&line, "p99_ms").unwrap_or(0.0),
                    });
                }
            }
        }
    }
    println!("\n| placement | in flight | client | calls/s (median of {rounds}) | p50 ms | p99 ms |");
    println!("|---|---|---|---|---|---|");
    let mut all_met = true;
    for placement in placements.iter().map(|p| p.label()) {
        for concurrency in [1usize, 100] {
            let pick = |client: &str, f: fn(&Figure) -> f64| {
                median(
                    figures
                        .iter()
                        .filter(|x| x.placement == placement && x.client == client && x.concurrency == concurrency)
                        .map(f)
                        .collect(),
                )
            };
            for client in ["raw-pipe", "mcp-harness"] {
                println!(
                    "| {placement} | {concurrency} | {client} | {:.0} | {:.3} | {:.3} |",
                    pick(client, |f| f.calls_per_s),
                    pick(client, |f| f.p50_ms),
                    pick(client, |f| f.p99_ms)
                );
            }
            let ratio = pick("mcp-harness", |f| f.calls_per_s) / pick("raw-pipe", |f| f.calls_per_s);
            let met = ratio >= GOAL_RATIO;
            all_met &= met;
            println!(
                "{placement}, ratio at concurrency {concurrency}: {ratio:.3} (goal >= {GOAL_RATIO:.1}: {})",
                if met { "met" } else { "MISSED" }
            );
        }
    }
    // A call's time at 1 in flight on one CPU, the smallest: what telemetry's off cost is weighed against.
    let call_ns = figures
        .iter()
        .filter(|f| f.client == "mcp-harness" && f.concurrency == 1 && f.calls_per_s > 0.0)
        .map(|f| 1e9 / f.calls_per_s)
        .fold(f64::MAX, f64::min);
    all_met &= telemetry_off(call_ns)?;
    footprints(&release, &server);
    println!("\nbench: {}", if all_met { "goal met in every placement" } else { "goal missed" });
    Ok(())
}

/// Telemetry off against today's code (no instrumentation site), side by side in one run:
/// mcp-telemetry's `overhead` example, the one home of that measurement. Off is within noise
/// when what it adds per request is under [`OFF_NOISE`] of a call's time (`call_ns`).
fn telemetry_off(call_ns: f64) -> Result<bool> {
    crate::run(
        "build (release, telemetry overhead)",
        cargo().args(["build", "--release", "-p", "mcp-telemetry", "--example", "overhead"]),
    )?;
    let out = std::process::Command::new(super::release_dir().join("examples").join("overhead"))
        .output()
        .map_err(|e| format!("overhead: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    if !out.status.success() {
        return Err(format!("overhead failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    println!("\nTelemetry per MCP request, side by side (mcp-telemetry's overhead example):\n{}", text.trim_end());
    // "off adds A ns per request (nothing installed), B ns (disabled)"
    let added = text
        .lines()
        .find_map(|l| l.strip_prefix("off adds "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|a| a.parse::<f64>().ok())
        .ok_or(format!("overhead printed no \"off adds\" line: {text}"))?;
    let share = added.max(0.0) / call_ns;
    let met = share < OFF_NOISE;
    println!(
        "telemetry off adds {added:.2} ns per request: {:.3}% of a call at 1 in flight ({call_ns:.0} ns) (goal: under \
         {:.0}%, within noise of today: {})",
        share * 100.0,
        OFF_NOISE * 100.0,
        if met { "met" } else { "MISSED" }
    );
    Ok(met)
}

/// Prints what a sequential call touches, per client ([`footprint`]), when valgrind is here. A
/// failure is reported and leaves the timed figures standing.
fn footprints(release: &std::path::Path, server: &std::path::Path) {
    if !footprint::available() {
        println!("\n(valgrind is not installed: no footprint per call)");
        return;
    }
    let work = std::env::temp_dir().join(format!("mcp-harness-bench-footprint-{}", std::process::id()));
    if let Err(e) = std::fs::create_dir_all(&work) {
        println!("\nno footprint per call: {}: {e}", work.display());
        return;
    }
    let measured: Result<Vec<_>> = [("raw-pipe", "raw_pipe_bench"), ("mcp-harness", "stdio_bench")]
        .into_iter()
        .map(|(client, example)| {
            footprint::measure(&release.join("examples").join(example), server, &work).map(|f| (client, f))
        })
        .collect();
    let _ = std::fs::remove_dir_all(&work);
    let measured = match measured {
        Ok(measured) => measured,
        Err(e) => {
            println!("\nno footprint per call: {e}");
            return;
        }
    };
    let pcid = match footprint::has_pcid() {
        Some(true) => "this machine's CPUs have PCID",
        Some(false) => "this machine's CPUs have no PCID: each switch to the server and back empties the TLB",
        None => "PCID unknown",
    };
    println!("\nWhat one sequential call touches (valgrind lackey, medians; {pcid}):");
    println!("| client | instructions | code pages | data pages |");
    println!("|---|---|---|---|");
    for (client, f) in measured {
        println!("| {client} | {:.0} | {:.0} | {:.0} |", f.instructions, f.code_pages, f.data_pages);
    }
}
