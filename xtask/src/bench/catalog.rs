//! `cargo xtask bench catalog`: the release `mcp-harness tools --json` against one fixture server
//! offering 5,000 tools of about 1.2 KB, beside `raw_catalog` (mcp-transport's example: the same
//! listing over the same pipes, written as JSON with serde straight to stdout, no framework).
//! Rounds are interleaved, who goes first alternating. Wall time is measured from spawn to
//! exit with stdout read through a pipe to the end; peak memory is the process's own high-water
//! mark of resident memory (`VmHWM` in `/proc/PID/status`, read every millisecond until it
//! exits: the mark only rises, so the last reading is the peak but for the last millisecond),
//! not the server's, whose memory is the same for both.

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use super::median;
use crate::{Result, cargo};

/// Tools the fixture server offers.
const TOOLS: usize = 5000;
/// Bytes of JSON per tool definition, about.
const TOOL_BYTES: usize = 1200;
/// Goals: the harness's wall time and peak memory at most these multiples of the floor's.
const WALL_GOAL: f64 = 1.2;
const MEMORY_GOAL: f64 = 1.3;

/// One run of one program.
struct Run {
    wall_ms: f64,
    peak_mb: f64,
    bytes: usize,
}

pub(crate) fn run(_n: usize, rounds: usize) -> Result {
    crate::run(
        "build (release)",
        cargo().args([
            "build",
            "--release",
            "-p",
            "cli",
            "--bin",
            "mcp-harness",
            "-p",
            "mcp-transport",
            "--example",
            "raw_catalog",
        ]),
    )?;
    let server = super::fixture_server()?;
    let release = super::release_dir();
    let server_args = [
        "echo".to_owned(),
        "--extra-tools".to_owned(),
        TOOLS.to_string(),
        "--tool-bytes".to_owned(),
        TOOL_BYTES.to_string(),
    ];
    // The configuration lives outside the working directory, as the harness requires.
    let dir = super::target_dir().join("bench-catalog");
    let work = dir.join("work");
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let config = dir.join("config.toml");
    let quoted: Vec<String> = server_args.iter().map(|a| format!("{a:?}")).collect();
    let text = format!("[servers.fx]\ncommand = {:?}\nargs = [{}]\n", server.display().to_string(), quoted.join(", "));
    std::fs::write(&config, text).map_err(|e| format!("{}: {e}", config.display()))?;

    let harness = || {
        let mut cmd = Command::new(release.join("mcp-harness"));
        cmd.arg("--config").arg(&config).args(["tools", "--json"]);
        cmd
    };
    let floor = || {
        let mut cmd = Command::new(release.join("examples").join("raw_catalog"));
        cmd.arg(&server).args(&server_args);
        cmd
    };
    let mut figures: Vec<(&str, Run)> = Vec::new();
    for round in 1..=rounds {
        let order = if round % 2 == 1 { ["floor", "mcp-harness"] } else { ["mcp-harness", "floor"] };
        for who in order {
            let mut cmd = if who == "floor" { floor() } else { harness() };
            let run = measure(&work, &mut cmd)?;
            println!(
                "round {round}: {who:<11} {:8.1} ms {:7.1} MB peak {:>9} bytes out",
                run.wall_ms, run.peak_mb, run.bytes
            );
            figures.push((who, run));
        }
    }
    let pick =
        |who: &str, f: fn(&Run) -> f64| median(figures.iter().filter(|(w, _)| *w == who).map(|(_, r)| f(r)).collect());
    println!("\n{TOOLS} tools of about {TOOL_BYTES} bytes, `tools --json` (median of {rounds} rounds)");
    println!("| program | wall ms | peak MB | output MB |");
    println!("|---|---|---|---|");
    for who in ["floor", "mcp-harness"] {
        println!(
            "| {who} | {:.1} | {:.1} | {:.2} |",
            pick(who, |r| r.wall_ms),
            pick(who, |r| r.peak_mb),
            pick(who, |r| r.bytes as f64) / 1e6
        );
    }
    let wall = pick("mcp-harness", |r| r.wall_ms) / pick("floor", |r| r.wall_ms);
    let memory = pick("mcp-harness", |r| r.peak_mb) / pick("floor", |r| r.peak_mb);
    let verdict = |met: bool| if met { "met" } else { "MISSED" };
    println!("wall-time ratio: {wall:.2} (goal <= {WALL_GOAL}: {})", verdict(wall <= WALL_GOAL));
    println!("peak-memory ratio: {memory:.2} (goal <= {MEMORY_GOAL}: {})", verdict(memory <= MEMORY_GOAL));
    Ok(())
}

/// Runs `cmd` in `work`, reading its stdout to the end through a pipe, and watches its peak
/// resident memory.
fn measure(work: &Path, cmd: &mut Command) -> Result<Run> {
    cmd.current_dir(work).env("RUST_LOG", "error").stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
    let started = Instant::now();
    let mut child = cmd.spawn().map_err(|e| format!("{cmd:?}: {e}"))?;
    let status = PathBuf::from(format!("/proc/{}/status", child.id()));
    let done = Arc::new(AtomicBool::new(false));
    let watcher = {
        let done = Arc::clone(&done);
        std::thread::spawn(move || {
            let mut peak_kb = 0.0f64;
            while !done.load(Ordering::Relaxed) {
                let hwm = std::fs::read_to_string(&status).ok().and_then(|text| {
                    let line = text.lines().find(|l| l.starts_with("VmHWM:"))?;
                    line.split_whitespace().nth(1)?.parse::<f64>().ok()
                });
                peak_kb = peak_kb.max(hwm.unwrap_or(0.0));
                std::thread::sleep(Duration::from_millis(1));
            }
            peak_kb
        })
    };
    let mut bytes = 0;
    let mut buf = vec![0; 64 * 1024];
    if let Some(mut out) = child.stdout.take() {
        loop {
            match out.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => bytes += n,
                Err(e) => return Err(format!("reading the output: {e}")),
            }
        }
    }
    let output = child.wait_with_output().map_err(|e| e.to_string())?;
    let wall_ms = started.elapsed().as_secs_f64() * 1000.0;
    done.store(true, Ordering::Relaxed);
    let peak_kb = watcher.join().map_err(|_| "the memory watcher failed".to_owned())?;
    if !output.status.success() {
        return Err(format!("{cmd:?} failed: {}", String::from_utf8_lossy(&output.stderr)));
    }
    Ok(Run { wall_ms, peak_mb: peak_kb / 1024.0, bytes })
}
