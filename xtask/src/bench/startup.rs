//! `cargo xtask bench startup`: what a user waits for, and what an idle server costs.
//!
//! Startup of one stdio server, exec to exit, rounds interleaved: `mcp-harness tools --json`
//! with one fixture server configured, beside `raw_startup` (the floor: the same server spawned,
//! `initialize` / `initialized` / `tools/list` written over the pipes and the tools printed, no
//! framework), both built as shipped (`--profile dist`). mcp-harness runs with the server's
//! protocol era remembered from an earlier run (the usual case), on its first run (no era
//! remembered: the `server/discover` probe first), with the server named by its file name and
//! found on a PATH its configuration gives (as `npx` and `uvx` are), and confined by the default
//! sandbox (what confinement adds is measured by `sandbox_bench`); the floor runs unconfined, so
//! the goal is checked on the unconfined rows.
//!
//! Memory per idle connected server: `connect_bench --memory 50` (the host's resident set with
//! 50 idle servers connected, minus the set with none, over 50).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use super::{field, median};
use crate::{Result, cargo};

/// Starts of each kind per round.
const STARTS_PER_ROUND: usize = 20;
/// Servers connected for the memory figure.
const IDLE_SERVERS: usize = 50;
/// Goals: startup within this ratio of the floor; memory per idle server under this many KiB.
const STARTUP_GOAL: f64 = 1.5;
const MEMORY_GOAL_KIB: f64 = 64.0;

/// One way of starting the server, timed from exec to exit.
struct Kind {
    label: &'static str,
    command: Command,
    /// Forget the remembered era before each start.
    forget: bool,
    millis: Vec<f64>,
}

pub(crate) fn run(_n: usize, rounds: usize) -> Result {
    // The binaries timed are built as shipped, the floor too, so neither side gains from the
    // build alone.
    super::shipped_harness()?;
    crate::run(
        "build (dist, floor)",
        cargo().args(["build", "--profile", "dist", "-p", "mcp-transport", "--example", "raw_startup"]),
    )?;
    crate::run(
        "build (release)",
        cargo().args(["build", "--release", "-p", "mcp-client", "--example", "connect_bench"]),
    )?;
    let server = super::fixture_server()?;
    let release = super::release_dir();
    let dist = super::target_dir().join("dist");
    println!("\n{}", crate::startup_order::coverage(&dist.join("mcp-harness")));
    // Outside the working directory: mcp-harness refuses a configuration an agent here could write.
    let work = std::env::temp_dir().join(format!("mcp-harness-bench-startup-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let data = work.join("data");
    // The first-run kind forgets its eras in a directory of its own, so the other kinds keep theirs.
    let first_run_data = work.join("first-run-data");
    let unconfined = echo_config(&work, &server, "unconfined.toml", "off")?;
    let confined = echo_config(&work, &server, "confined.toml", "standard")?;
    let by_name = by_name_config(&work, &server)?;
    let harness = |config: &Path, data: &Path| {
        let mut command = Command::new(dist.join("mcp-harness"));
        command.args(["tools", "--json", "--config"]).arg(config).env("MCP_HARNESS_DATA_DIR", data);
        command
    };
    let mut floor = Command::new(dist.join("examples").join("raw_startup"));
    floor.arg("--").arg(&server).arg("echo");
    let mut kinds = vec![
        Kind { label: "floor (raw_startup)", command: floor, forget: false, millis: Vec::new() },
        Kind {
            label: "mcp-harness, era remembered",
            command: harness(&unconfined, &data),
            forget: false,
            millis: Vec::new(),
        },
        Kind {
            label: "mcp-harness, first run (probe; answer written)",
            command: harness(&unconfined, &first_run_data),
            forget: true,
            millis: Vec::new(),
        },
        Kind {
            label: "mcp-harness, default sandbox",
            command: harness(&confined, &data),
            forget: false,
            millis: Vec::new(),
        },
        Kind {
            label: "mcp-harness, era remembered, server named (found on PATH)",
            command: harness(&by_name, &data),
            forget: false,
            millis: Vec::new(),
        },
    ];
    // One unmeasured start of each warms the page cache and remembers the era.
    for kind in &mut kinds {
        start(&mut kind.command)?;
    }
    for round in 0..rounds {
        // Alternate the order, so a warm cache or a busy neighbour favours none.
        let order: Vec<usize> =
            if round % 2 == 0 { (0..kinds.len()).collect() } else { (0..kinds.len()).rev().collect() };
        for _ in 0..STARTS_PER_ROUND {
            for &i in &order {
                let kind = &mut kinds[i];
                if kind.forget {
                    let _ = std::fs::remove_dir_all(&first_run_data);
                }
                let millis = start(&mut kind.command)?;
                kind.millis.push(millis);
            }
        }
    }
    let floor_ms = median(kinds[0].millis.clone());
    println!(
        "\n| startup of 1 stdio server, exec to exit | median of {} | fastest | ÷ floor |",
        rounds * STARTS_PER_ROUND
    );
    println!("|---|---|---|---|");
    let mut ratios = Vec::new();
    for kind in &kinds {
        let ms = median(kind.millis.clone());
        let fastest = kind.millis.iter().copied().fold(f64::INFINITY, f64::min);
        println!("| {} | {ms:.2} ms | {fastest:.2} ms | {:.2} |", kind.label, ms / floor_ms);
        ratios.push(ms / floor_ms);
    }
    let startup_met = ratios[1] <= STARTUP_GOAL;
    println!(
        "startup goal (era remembered within {STARTUP_GOAL}x the floor): {:.2}x, {}",
        ratios[1],
        if startup_met { "met" } else { "MISSED" }
    );
    let out = Command::new(release.join("examples").join("connect_bench"))
        .args(["--rounds", &rounds.to_string(), "--memory", &IDLE_SERVERS.to_string(), "--"])
        .arg(&server)
        .output()
        .map_err(|e| format!("connect_bench: {e}"))?;
    if !out.status.success() {
        return Err(format!("connect_bench failed: {}", String::from_utf8_lossy(&out.stderr)));
    }
    let line = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    let per_server = field(&line, "host_kib_per_server").ok_or("no host_kib_per_server in connect_bench's output")?;
    let none = field(&line, "rss_none_kib").unwrap_or(0.0);
    let memory_met = per_server < MEMORY_GOAL_KIB;
    println!(
        "\nmemory per idle connected server ({IDLE_SERVERS} servers, median of {rounds}): {per_server:.1} KiB \
         (the host with none: {:.1} MiB); goal under {MEMORY_GOAL_KIB} KiB: {}",
        none / 1024.0,
        if memory_met { "met" } else { "MISSED" }
    );
    let _ = std::fs::remove_dir_all(&work);
    println!("\nbench: {}", if startup_met && memory_met { "goals met" } else { "goals missed" });
    Ok(())
}

/// Writes `dir/name`: a configuration of one server `echo`, the fixture `server`, under
/// `sandbox`.
pub(crate) fn echo_config(dir: &Path, server: &Path, name: &str, sandbox: &str) -> Result<PathBuf> {
    let path = dir.join(name);
    let text = format!(
        "[servers.echo]\ncommand = {:?}\nargs = [\"echo\"]\nsandbox = {sandbox:?}\n",
        server.display().to_string()
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Writes `dir/by-name.toml`: the fixture `server` by its file name (as `npx` or `uvx` usually
/// are), found on a PATH the configuration gives, unconfined.
fn by_name_config(dir: &Path, server: &Path) -> Result<PathBuf> {
    let (Some(name), Some(bin)) = (server.file_name(), server.parent()) else {
        return Err(format!("{}: no file name", server.display()));
    };
    let path = dir.join("by-name.toml");
    let text = format!(
        "[servers.echo]\ncommand = {:?}\nargs = [\"echo\"]\nsandbox = \"off\"\nenv = {{ PATH = {:?} }}\n",
        name.to_string_lossy(),
        bin.display().to_string()
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// Runs `command` to its exit, its output discarded; the milliseconds from exec to exit.
fn start(command: &mut Command) -> Result<f64> {
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::piped());
    let started = Instant::now();
    let out = command.output().map_err(|e| format!("{command:?}: {e}"))?;
    let millis = started.elapsed().as_secs_f64() * 1000.0;
    if !out.status.success() {
        return Err(format!("{command:?} failed ({}): {}", out.status, String::from_utf8_lossy(&out.stderr)));
    }
    Ok(millis)
}
