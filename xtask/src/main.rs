//! Project automation: `cargo xtask test [--hermetic]`, `cargo xtask bench`, `cargo xtask peers`,
//! `cargo xtask conformance [SCENARIO...]`, `cargo xtask search-eval`.
//!
//! Std only, so `cargo xtask` starts fast. Every step prints what it runs; the first failure
//! stops the run with a non-zero exit.
#![allow(clippy::print_stdout, clippy::print_stderr)]

use std::env;
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::Instant;

mod bench;
mod conformance;

/// Crates that must stay free of I/O.
const PURE_CRATES: &[&str] = &["mcp-protocol", "tool-pool", "policy"];

/// Crates (in the normal dependency tree of a pure crate) that do I/O or bring a runtime.
const IO_CRATES: &[&str] = &[
    "tokio",
    "tokio-util",
    "mio",
    "reqwest",
    "hyper",
    "hyper-util",
    "h2",
    "async-std",
    "smol",
    "async-io",
    "socket2",
    "ureq",
    "curl",
    "isahc",
    "nix",
    "rustix",
    "tungstenite",
    "tokio-tungstenite",
    "axum",
    "tower",
    "notify",
    "walkdir",
    "tempfile",
    "dirs",
    "directories",
];

pub(crate) type Result<T = ()> = std::result::Result<T, String>;

fn main() -> ExitCode {
    let args: Vec<String> = env::args().skip(1).collect();
    let result = match args.first().map(String::as_str) {
        Some("test") => test(args[1..].iter().any(|a| a == "--hermetic")),
        Some("purity") => purity(),
        Some("peers") => install_peers().map(|dir| println!("peers installed in {}", dir.display())),
        Some("bench") => bench::run(&args[1..]),
        Some("search-eval") => run(
            "search-eval",
            cargo()
                .args(["run", "--release", "-q", "-p", "tool-pool", "--example", "search_eval", "--"])
                .args(&args[1..]),
        ),
        Some("conformance") => {
            let only: Vec<String> = args[1..].iter().filter(|a| !a.starts_with("--")).cloned().collect();
            conformance::conformance(&only)
        }
        _ => {
            eprintln!(
                "usage: cargo xtask <task>\n\n\
                 tasks:\n  \
                 test [--hermetic]  fmt, clippy, purity, every test, and (unless --hermetic) the interop suite\n  \
                 purity             check that mcp-protocol, tool-pool and policy do no I/O\n  \
                 peers              install the pinned third-party MCP servers into the cache\n  \
                 bench [--n N] [--rounds R]  stdio client vs a raw pipe, side by side\n  \
                 search-eval [--split dev|test]  tool search recall beside plain BM25 (labelled set)\n  \
                 conformance [SCENARIO...]  the official MCP conformance harness against\n                      \
                 conformance-client (every client scenario; names pick scenarios)"
            );
            Err("no task given".to_owned())
        }
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

pub(crate) fn run(step: &str, cmd: &mut Command) -> Result {
    println!("\n==> {step}: {cmd:?}");
    let started = Instant::now();
    let status = cmd.status().map_err(|e| format!("{step}: could not start: {e}"))?;
    println!("<== {step}: {status} in {:.1}s", started.elapsed().as_secs_f64());
    if status.success() { Ok(()) } else { Err(format!("{step} failed ({status})")) }
}

/// Pass and fail counts summed over every `test result:` line cargo printed.
#[derive(Default)]
struct Tally {
    passed: u64,
    failed: u64,
}

impl Tally {
    fn add_line(&mut self, line: &str) {
        let Some(rest) = line.strip_prefix("test result: ") else { return };
        let count = |word: &str| -> u64 {
            rest.split([';', '.'])
                .find_map(|part| part.trim().strip_suffix(word).and_then(|n| n.trim().parse().ok()))
                .unwrap_or(0)
        };
        self.passed += count(" passed");
        self.failed += count(" failed");
    }
}

/// Like [`run`], echoing the test output while counting results.
fn run_tests(step: &str, cmd: &mut Command, tally: &mut Tally) -> Result {
    use std::io::{BufRead, BufReader};
    println!("\n==> {step}: {cmd:?}");
    let started = Instant::now();
    let mut child = cmd.stdout(Stdio::piped()).spawn().map_err(|e| format!("{step}: could not start: {e}"))?;
    if let Some(stdout) = child.stdout.take() {
        for line in BufReader::new(stdout).lines().map_while(std::result::Result::ok) {
            println!("{line}");
            tally.add_line(&line);
        }
    }
    let status = child.wait().map_err(|e| format!("{step}: {e}"))?;
    println!("<== {step}: {status} in {:.1}s", started.elapsed().as_secs_f64());
    if status.success() { Ok(()) } else { Err(format!("{step} failed ({status})")) }
}

fn test(hermetic: bool) -> Result {
    let mut tally = Tally::default();
    let result = test_steps(hermetic, &mut tally);
    // The closing line CI reads: every test of every step.
    println!("\ntests: {} passed, {} failed", tally.passed, tally.failed);
    result
}

fn test_steps(hermetic: bool, tally: &mut Tally) -> Result {
    let started = Instant::now();
    run("fmt", cargo().args(["fmt", "--all", "--", "--check"]))?;
    run(
        "clippy",
        cargo().args([
            "clippy",
            "--workspace",
            "--all-targets",
            "--features",
            "mcp-transport/interop,agent-loop/interop",
            "--",
            "-D",
            "warnings",
        ]),
    )?;
    purity()?;
    // The transport tests spawn the fixture server binary; build it first so that a `-p`
    // filtered run finds it too.
    run("build fixtures", cargo().args(["build", "-p", "mcp-fixtures"]))?;
    run_tests("tests", cargo().args(["test", "--workspace"]), tally)?;
    if hermetic {
        println!("\n--hermetic: skipped the interop suite (it installs peers from npm and PyPI)");
    } else {
        let peers = install_peers()?;
        run_tests(
            "interop",
            cargo()
                .args([
                    "test",
                    "-p",
                    "mcp-transport",
                    "--features",
                    "interop",
                    "--test",
                    "interop",
                    "--test",
                    "interop_http",
                ])
                .env("MCP_PEERS_DIR", &peers),
            tally,
        )?;
        // An agent session with the scripted model against a third-party server.
        run_tests(
            "agent interop",
            cargo()
                .args(["test", "-p", "agent-loop", "--features", "interop", "--test", "interop"])
                .env("MCP_PEERS_DIR", &peers),
            tally,
        )?;
        conformance::conformance(&[])?;
    }
    println!("\nxtask test: all steps passed in {:.0}s", started.elapsed().as_secs_f64());
    Ok(())
}

/// Fails when a pure crate depends (normally, transitively) on an I/O crate, or its sources
/// name `std::fs`, `std::net` or `std::process`.
fn purity() -> Result {
    println!("\n==> purity: {}", PURE_CRATES.join(", "));
    let mut problems = Vec::new();
    for krate in PURE_CRATES {
        let out = cargo()
            .args(["tree", "-p", krate, "-e", "normal", "--prefix", "none", "--format", "{p}"])
            .stderr(Stdio::inherit())
            .output()
            .map_err(|e| format!("cargo tree: {e}"))?;
        if !out.status.success() {
            return Err(format!("cargo tree -p {krate} failed"));
        }
        let tree = String::from_utf8_lossy(&out.stdout);
        for line in tree.lines() {
            let name = line.split_whitespace().next().unwrap_or_default();
            if IO_CRATES.contains(&name) {
                problems.push(format!("{krate} depends on {name} (an I/O crate): {line}"));
            }
        }
        let src = root().join("crates").join(krate).join("src");
        for file in rust_files(&src) {
            let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
            for (n, line) in text.lines().enumerate() {
                if names_io_module(line) {
                    problems.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
                }
            }
        }
    }
    if problems.is_empty() {
        println!("<== purity: ok");
        Ok(())
    } else {
        Err(format!("purity check failed:\n  {}", problems.join("\n  ")))
    }
}

fn names_io_module(line: &str) -> bool {
    let code = line.split("//").next().unwrap_or_default();
    let compact: String = code.chars().filter(|c| !c.is_whitespace()).collect();
    ["fs", "net", "process"].iter().any(|m| {
        compact.contains(&format!("std::{m}::"))
            || compact.contains(&format!("std::{m};"))
            || compact.contains(&format!("std::{m},"))
            || (compact.contains("std::{") && {
                let inner = compact.split("std::{").nth(1).unwrap_or_default();
                inner.split(['}', ',']).any(|part| part == *m || part.starts_with(&format!("{m}::")))
            })
    })
}

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    if let Ok(entries) = std::fs::read_dir(dir) {
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                out.extend(rust_files(&path));
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out
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
        run(
            "npm peers",
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
        run("python venv", Command::new(&python).args(["-m", "venv", "--clear"]).arg(&py))?;
        run(
            "pypi peers",
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
