//! `sandbox_bench [-n 40] [--launcher PATH] [-- SERVER CMD...]`
//!
//! What confinement costs at start: the time from spawn to the answer to `initialize`, for the
//! same server unconfined, under `standard`, under `standard` with `network = false` and without
//! a process limit, runs interleaved; prints the medians and the differences. Defaults: the fixture server (`echo`)
//! and `mcp-sandbox-launch`, found (and built under `cargo run`) as the tests find them
//! (`mcp_fixtures::server_binary`); use `--release` for figures.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

use std::path::PathBuf;
use std::time::{Duration, Instant};

use mcp_client::{Client, ClientOptions};
use mcp_sandbox::Sandbox;
use mcp_sandbox::launcher::Launcher;
use mcp_transport::{StdioConfig, StdioSandbox, StdioTransport};

struct Args {
    n: usize,
    launcher: PathBuf,
    command: Vec<String>,
}

fn parse() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let mut n = 40;
    let mut launcher = None;
    let mut command = Vec::new();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "-n" => n = args.next().and_then(|v| v.parse().ok()).ok_or("-n needs a number")?,
            "--launcher" => launcher = Some(PathBuf::from(args.next().ok_or("--launcher needs a path")?)),
            "--" => command.extend(args.by_ref()),
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if command.is_empty() {
        command = vec![mcp_fixtures::server_binary()?.to_string_lossy().into_owned(), "echo".to_owned()];
    }
    let launcher = match launcher {
        Some(l) => l,
        None => mcp_fixtures::launcher_binary()?,
    };
    Ok(Args { n, launcher, command })
}

/// Spawn to the `initialize` answer; the close is not timed.
async fn start(config: StdioConfig) -> Result<Duration, String> {
    let started = Instant::now();
    let transport = StdioTransport::spawn(config).map_err(|e| e.to_string())?;
    let client = Client::connect(transport, ClientOptions::default()).await.map_err(|e| e.to_string())?;
    let elapsed = started.elapsed();
    client.close().await.map_err(|e| e.to_string())?;
    Ok(elapsed)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v.get(v.len() / 2).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn run(args: Args) -> Result<(), String> {
    let base = StdioConfig::new(args.command[0].clone(), args.command[1..].iter().cloned());
    let launcher = Launcher::new(args.launcher.clone(), Vec::<String>::new());
    let with = |sandbox: Sandbox| {
        let mut config = base.clone();
        config.cwd = Some(std::env::temp_dir());
        config.sandbox = Some(Box::new(StdioSandbox { sandbox, launcher: launcher.clone() }));
        config
    };
    let variants = [
        ("unconfined", base.clone()),
        ("standard", with(Sandbox::standard())),
        ("standard, network off", with(Sandbox { network: false, ..Sandbox::standard() })),
        // For root the process limit is a PID namespace, whose init is a second launcher stage.
        ("standard, no process limit", {
            let mut sandbox = Sandbox::standard();
            sandbox.limits.processes = None;
            with(sandbox)
        }),
    ];
    let mut times: Vec<Vec<Duration>> = vec![Vec::new(); variants.len()];
    // One warm-up round (page cache, first exec), then rounds interleaved so load drifts evenly.
    for round in 0..=args.n {
        for (i, (_, config)) in variants.iter().enumerate() {
            let t = start(config.clone()).await?;
            if round > 0 {
                times[i].push(t);
            }
        }
    }
    let medians: Vec<Duration> = times.into_iter().map(median).collect();
    println!("start to initialize answer, median of {} interleaved runs ({}):", args.n, args.command.join(" "));
    for ((name, _), m) in variants.iter().zip(&medians) {
        let extra = ms(*m) - ms(medians[0]);
        println!("  {name:<24} {:>8.2} ms  ({extra:+.2} ms, x{:.2})", ms(*m), ms(*m) / ms(medians[0]).max(1e-9));
    }
    Ok(())
}

fn main() -> std::process::ExitCode {
    let result = parse().and_then(|args| {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().map_err(|e| e.to_string())?;
        runtime.block_on(run(args))
    });
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sandbox_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
