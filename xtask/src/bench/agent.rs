//! `cargo xtask bench agent`: the agent loop's overhead per step beyond the model's own time,
//! in turns of 1, 41 and 401 steps, beside a loop with no framework doing the same work (build
//! the request body from the history, parse the answer, call the tool, append): llm-providers'
//! `agent_step` example, both against the same canned OpenAI-compatible server on loopback
//! with the same HTTP client. Runs are separate processes, interleaved, who goes first
//! alternating; each runs about `--n` steps (default 2000). Both placements are measured (see
//! [`Placement`]): the process on one CPU, and on two with its threads (the loop's, the model
//! server's) placed by the scheduler. Then code mode's scenario (`code_mode_bench`): a task
//! done with direct calls and with one script, the bytes sent to the model side by side.

use std::path::Path;

use super::{Placement, field, median};
use crate::{Result, cargo};

/// Steps per turn: the overhead must stay flat as the conversation grows.
const LENGTHS: [usize; 3] = [1, 41, 401];
/// Goal: the loop's overhead per step at most this multiple of the floor's, at every length.
const GOAL: f64 = 1.2;

pub(crate) fn run(n: usize, rounds: usize) -> Result {
    crate::run(
        "build (release)",
        cargo().args(["build", "--release", "-p", "llm-providers", "--example", "agent_step"]),
    )?;
    let example = super::release_dir().join("examples").join("agent_step");
    let placements = Placement::available();
    if placements.is_empty() {
        return Err("taskset could not be run, and the figures depend on where the threads run".into());
    }
    let mut all_met = true;
    for place in placements {
        all_met &= run_placed(place, &example, n, rounds)?;
    }
    println!("\nbench agent: {}", if all_met { "goal met at every length" } else { "goal missed" });
    code_mode()
}

/// Code mode's scenario: one task with direct calls and with one script, the bytes sent to the
/// model side by side, and engine start plus first call (mcp-host's `code_mode_bench`).
fn code_mode() -> Result {
    crate::run(
        "build (release)",
        cargo().args(["build", "--release", "-p", "mcp-host", "--example", "code_mode_bench"]),
    )?;
    let example = super::release_dir().join("examples").join("code_mode_bench");
    println!("\ncode mode (scripted model, fixture server):\n");
    let out = std::process::Command::new(&example).output().map_err(|e| format!("{}: {e}", example.display()))?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    if !out.status.success() {
        return Err(format!("code_mode_bench failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    Ok(())
}

/// The rounds and table of one placement; whether the goal was met at every length.
fn run_placed(place: Placement, example: &Path, n: usize, rounds: usize) -> Result<bool> {
    let placement = place.label();
    // (who, steps, per step, model, overhead)
    let mut figures: Vec<(&str, usize, f64, f64, f64)> = Vec::new();
    for round in 1..=rounds {
        for steps in LENGTHS {
            let order = if round % 2 == 1 { ["floor", "harness"] } else { ["harness", "floor"] };
            for who in order {
                let out = place
                    .process(example)
                    .args(["--who", who, "--steps", &steps.to_string(), "--total", &n.to_string()])
                    .output()
                    .map_err(|e| format!("{}: {e}", example.display()))?;
                let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
                if !out.status.success() {
                    return Err(format!("agent_step --who {who} failed: {}", String::from_utf8_lossy(&out.stderr)));
                }
                println!("{placement}, round {round}: {line}");
                let get = |key: &str| field(&line, key).ok_or(format!("no {key} in {line:?}"));
                figures.push((who, steps, get("per_step_ms")?, get("model_ms")?, get("overhead_ms")?));
            }
        }
    }
    let pick = |who: &str, steps: usize, f: fn(&(&str, usize, f64, f64, f64)) -> f64| {
        median(figures.iter().filter(|x| x.0 == who && x.1 == steps).map(f).collect())
    };
    println!("\n{placement}:\n\n| steps per turn | loop | ms per step | model ms | overhead ms | ratio |");
    println!("|---|---|---|---|---|---|");
    let mut all_met = true;
    for steps in LENGTHS {
        let ratio = pick("harness", steps, |x| x.4) / pick("floor", steps, |x| x.4);
        for who in ["floor", "harness"] {
            let shown = if who == "harness" { format!("{ratio:.2}") } else { "1".to_owned() };
            println!(
                "| {steps} | {} | {:.4} | {:.4} | {:.4} | {shown} |",
                if who == "floor" { "no framework" } else { "agent-loop + OpenAI adapter" },
                pick(who, steps, |x| x.2),
                pick(who, steps, |x| x.3),
                pick(who, steps, |x| x.4)
            );
        }
        let met = ratio <= GOAL;
        all_met &= met;
        println!(
            "{placement}, ratio at {steps} steps: {ratio:.2} (goal <= {GOAL}: {})",
            if met { "met" } else { "MISSED" }
        );
    }
    let growth = |who: &str| pick(who, 401, |x| x.4) / pick(who, 1, |x| x.4);
    println!(
        "{placement}, overhead at 401 steps / at 1 step: floor {:.2}, harness {:.2}",
        growth("floor"),
        growth("harness")
    );
    Ok(all_met)
}
