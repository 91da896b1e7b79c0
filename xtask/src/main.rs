//! Project automation: `cargo xtask test [--hermetic]`, `cargo xtask purity`, `cargo xtask
//! bench [GROUP...]`, `cargo xtask peers`, `cargo xtask startup-order`, `cargo xtask conformance [SCENARIO...]`, `cargo xtask conformance-server [SCENARIO...]`, `cargo xtask search-eval
//! [--split dev|test|all]` (`cargo xtask --help`).
//!
//! Std only, so `cargo xtask` starts fast. Every step prints what it runs and has a time limit
//! (`step.rs`). `test` runs every step it can even after one failed, and ends with one line that
//! counts every test and conformance scenario and names what failed or did not run.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};

mod args;
mod bench;
mod conformance;
mod conformance_server;
mod json;
mod startup_order;
mod step;
mod tally;
mod test;

use args::Task;

pub(crate) type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let task = match args::parse(&args) {
        Ok(task) => task,
        Err(e) => {
            eprintln!("xtask: {e}\n\n{}", args::USAGE);
            return ExitCode::from(2);
        }
    };
    let result = match task {
        Task::Help => {
            println!("{}", args::USAGE);
            Ok(())
        }
        Task::Test { hermetic } => test::test(hermetic),
        Task::Purity => test::purity().map_err(|e| format!("purity {e}")),
        Task::Peers => install_peers().map(|dir| println!("peers installed in {}", dir.display())),
        Task::Bench { groups, n, rounds } => bench::run(&groups, n, rounds),
        Task::ConnectBench { rounds } => bench::connect(rounds),
        Task::StartupOrder => startup_order::run(),
        Task::SearchEval { args } => run(
            "search-eval",
            cargo().args(["run", "--release", "-q", "-p", "tool-pool", "--example", "search_eval", "--"]).args(&args),
        ),
        Task::Conformance { only } => conformance::conformance(&only).and_then(|summary| {
            if summary.failed == 0 { Ok(()) } else { Err(format!("{} conformance scenarios failed", summary.failed)) }
        }),
        Task::ConformanceServer { only } => conformance_server::conformance_server(&only).and_then(|summary| {
            if summary.failed == 0 {
                Ok(())
            } else {
                Err(format!("{} server conformance scenarios failed", summary.failed))
            }
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("xtask: {e}");
            ExitCode::FAILURE
        }
    }
}

pub(crate) fn root() -> PathBuf {
    // xtask's manifest dir is <root>/xtask.
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().map(Path::to_path_buf).unwrap_or(manifest)
}

pub(crate) fn cargo() -> Command {
    let mut cmd = Command::new(env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned()));
    cmd.current_dir(root());
    cmd
}

/// How long a step of a task other than `test` may run (benchmarks, traces, installs).
const DEFAULT_LIMIT: std::time::Duration = std::time::Duration::from_secs(60 * 60);

/// Runs one step within [`DEFAULT_LIMIT`].
pub(crate) fn run(step: &str, cmd: &mut Command) -> Result {
    run_within(step, DEFAULT_LIMIT, cmd)
}

/// Runs one step within `limit`.
pub(crate) fn run_within(step: &str, limit: std::time::Duration, cmd: &mut Command) -> Result {
    step::run(step, limit, cmd).map_err(|e| format!("{step} {e}"))
}

/// The cache folder for third-party peers (`MCP_PEERS_DIR`, else `target/peers`).
fn peers_dir() -> PathBuf {
    env::var_os("MCP_PEERS_DIR").map(PathBuf::from).unwrap_or_else(|| root().join("target").join("peers"))
}

/// Install the pinned npm and PyPI peers unless the cache already holds exactly these pins.
fn install_peers() -> Result<PathBuf> {
    let dir = peers_dir();
    let pins = root().join("xtask").join("peers");
    let node = dir.join("node");
    let py = dir.join("py");
    std::fs::create_dir_all(&node).map_err(|e| format!("{}: {e}", node.display()))?;
    let read = |p: PathBuf| std::fs::read_to_string(&p).map_err(|e| format!("{}: {e}", p.display()));
    let lock = read(pins.join("package-lock.json"))?;
    let manifest = read(pins.join("package.json"))?;
    let stamp = node.join(".installed-lock.json");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(lock.as_str()) {
        std::fs::write(node.join("package.json"), &manifest).map_err(|e| e.to_string())?;
        std::fs::write(node.join("package-lock.json"), &lock).map_err(|e| e.to_string())?;
        run_within(
            "npm peers",
            test::limit::INSTALL,
            Command::new("npm").args(["ci", "--no-audit", "--no-fund", "--loglevel=error"]).current_dir(&node),
        )?;
        std::fs::write(&stamp, &lock).map_err(|e| e.to_string())?;
    } else {
        println!("npm peers: cached in {}", node.display());
    }
    let requirements = read(pins.join("requirements.txt"))?;
    let stamp = py.join(".installed-requirements.txt");
    if std::fs::read_to_string(&stamp).ok().as_deref() != Some(requirements.as_str()) {
        let python = env::var("PYTHON").unwrap_or_else(|_| "python3".to_owned());
        run_within(
            "python venv",
            test::limit::INSTALL,
            Command::new(&python).args(["-m", "venv", "--clear"]).arg(&py),
        )?;
        run_within(
            "pypi peers",
            test::limit::INSTALL,
            Command::new(py.join("bin").join("pip"))
                .args(["install", "--quiet", "--disable-pip-version-check", "-r"])
                .arg(pins.join("requirements.txt")),
        )?;
        std::fs::write(&stamp, &requirements).map_err(|e| e.to_string())?;
    } else {
        println!("pypi peers: cached in {}", py.display());
    }
    Ok(dir)
}
