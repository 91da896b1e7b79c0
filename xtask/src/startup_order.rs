//! `cargo xtask startup-order`: writes `crates/cli/startup.order`, the functions a start of
//! `mcp-harness` runs, which its build script has the linker lay out together.
//!
//! The commands a user starts most (`tools`, `tools --json`, `servers`, `call`, one fixture
//! server, unconfined and confined) and `serve` (over stdio and HTTP, started and called: its
//! resident set is mostly the code it touched) run under `perf` on the dist build:
//! 1. linked without the order, sampled with call stacks (every function on a sampled stack)
//!    and traced for page faults (the function that touched each page first);
//! 2. linked with that order, traced for page faults again: a function that still faults
//!    was missed (it ran too briefly to be sampled) and is added.
//!
//! Functions are listed in the order they were first seen, so a start walks its code mostly
//! forwards. Needs `perf` (Linux, the system package) and takes about ten minutes (two links
//! with whole-program optimization); the binary built last uses the file.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::{Result, cargo, root};

/// Runs of each command per trace. Stack sampling misses brief functions; more runs miss fewer
/// (the first pass found 941 and 1,014 functions with 15 runs, 1,246 with 40).
const RUNS: usize = 40;
/// What crates/cli/build.rs reads to link without the order.
const NO_ORDER_ENV: &str = "MCP_HARNESS_NO_STARTUP_ORDER";
/// Samples per second of the stack sampling (per CPU).
const SAMPLE_HZ: &str = "20000";

pub(crate) fn run() -> Result {
    if !Command::new("perf").arg("--version").output().is_ok_and(|out| out.status.success()) {
        return Err("`perf` did not run: install it (the linux-perf or linux-tools package)".to_owned());
    }
    let server = crate::bench::fixture_server()?;
    let work = std::env::temp_dir().join(format!("mcp-harness-startup-order-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("cwd")).map_err(|e| format!("{}: {e}", work.display()))?;
    let result = collect(&server, &work);
    let _ = std::fs::remove_dir_all(&work);
    let (functions, added) = result?;
    println!(
        "\n{} functions in {} ({added} added by the second pass); rebuild to use them",
        functions.len(),
        order_file().display()
    );
    Ok(())
}

/// Where the build script reads the order from.
fn order_file() -> PathBuf {
    root().join("crates/cli/startup.order")
}

/// Both passes; the functions in order and how many the second pass added.
fn collect(server: &Path, work: &Path) -> Result<(Vec<String>, usize)> {
    let binary = crate::bench::target_dir().join("dist").join("mcp-harness");
    let commands = workload(&binary, server, work)?;
    build(false)?;
    let mut functions = Vec::new();
    let mut seen = BTreeSet::new();
    let mut add = |names: Vec<String>, functions: &mut Vec<String>| {
        let before = functions.len();
        for name in names {
            if seen.insert(name.clone()) {
                functions.push(name);
            }
        }
        functions.len() - before
    };
    add(perf(&binary, &commands, work, Trace::Stacks)?, &mut functions);
    add(perf(&binary, &commands, work, Trace::Faults)?, &mut functions);
    write(&functions)?;
    build(true)?;
    let added = add(perf(&binary, &commands, work, Trace::Faults)?, &mut functions);
    write(&functions)?;
    Ok((functions, added))
}

/// Builds the dist `mcp-harness`, with or without the order.
fn build(ordered: bool) -> Result {
    let mut command = cargo();
    command.args(["build", "--profile", "dist", "-p", "cli", "--bin", "mcp-harness", "--bin", "mcp-harness-sandbox"]);
    if ordered {
        command.env_remove(NO_ORDER_ENV);
    } else {
        command.env(NO_ORDER_ENV, "1");
    }
    crate::run(if ordered { "build (dist, ordered)" } else { "build (dist, not ordered)" }, &mut command)
}

/// The shell loop that runs every command of the workload `RUNS` times.
fn workload(binary: &Path, server: &Path, work: &Path) -> Result<String> {
    let unconfined = crate::bench::startup::echo_config(work, server, "unconfined.toml", "off")?;
    let confined = crate::bench::startup::echo_config(work, server, "confined.toml", "standard")?;
    let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
    let harness = quote(binary);
    let data = quote(&work.join("data"));
    let runs = [
        format!("tools --json --config {}", quote(&unconfined)),
        format!("tools --config {}", quote(&unconfined)),
        format!("servers --config {}", quote(&unconfined)),
        format!("call mcp__echo__echo --yes --args '{{\"text\":\"order\"}}' --config {}", quote(&unconfined)),
        format!("tools --json --config {}", quote(&confined)),
    ];
    let mut body: Vec<String> =
        runs.iter().map(|args| format!("MCP_HARNESS_DATA_DIR={data} {harness} {args} >/dev/null || exit 1")).collect();
    body.extend(serve_runs(&harness, &data, &quote(&serve_config(work, server)?))?);
    Ok(format!("for i in $(seq {RUNS}); do {}; done", body.join("; ")))
}

/// Calls made to `serve` per run of the workload: enough to reach its steady state.
const SERVE_CALLS: usize = 30;

/// The configuration `serve` runs with in the workload: the fixture's `echo`, allowed.
fn serve_config(work: &Path, server: &Path) -> Result<PathBuf> {
    let path = work.join("serve.toml");
    let text = format!(
        "[serve.drain]\ndelay_s = 0\ntimeout_s = 5\n\n[servers.echo]\ncommand = {:?}\nargs = [\"echo\"]\n\
         sandbox = \"off\"\nrequired = true\n\n[[policy.rules]]\nserver = \"echo\"\ntool = \"echo\"\n\
         decision = \"allow\"\n",
        server.display().to_string()
    );
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(path)
}

/// `serve` over stdio (a session of a 2025-06-18 client read from a here-document) and over
/// HTTP (started, its calls made with curl, drained with SIGTERM): a gateway's memory is the
/// code its start and its calls touch, so that code is laid out with the rest.
fn serve_runs(harness: &str, data: &str, config: &str) -> Result<Vec<String>> {
    if !Command::new("curl").arg("--version").output().is_ok_and(|out| out.status.success()) {
        return Err("`curl` did not run: the workload calls `serve --http` with it".to_owned());
    }
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map_err(|e| format!("no free loopback port: {e}"))?
        .port();
    let mut session = String::from(
        r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"order","version":"1"}}}
{"jsonrpc":"2.0","method":"notifications/initialized"}
{"jsonrpc":"2.0","id":1,"method":"tools/list"}
"#,
    );
    for id in 2..SERVE_CALLS + 2 {
        session.push_str(&format!(
            "{{\"jsonrpc\":\"2.0\",\"id\":{id},\"method\":\"tools/call\",\"params\":{{\"name\":\"echo__echo\",\"arguments\":{{\"text\":\"order\"}}}}}}\n"
        ));
    }
    let stdio = format!(
        "printf '%s' '{session}' | MCP_HARNESS_DATA_DIR={data} {harness} --config {config} serve >/dev/null || exit 1"
    );
    let call = r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"echo__echo","arguments":{"text":"order"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}"#;
    let url = format!("http://127.0.0.1:{port}");
    let http = format!(
        "MCP_HARNESS_DATA_DIR={data} {harness} --config {config} serve --http 127.0.0.1:{port} 2>/dev/null & p=$!; \
         n=0; until curl -sf -o /dev/null {url}/readyz; do n=$((n+1)); [ $n -gt 500 ] && {{ kill $p; exit 1; }}; sleep 0.02; done; \
         for c in $(seq {SERVE_CALLS}); do curl -sf -o /dev/null -X POST {url}/mcp -H 'content-type: application/json' \
         -H 'accept: application/json, text/event-stream' -H 'mcp-protocol-version: 2026-07-28' \
         -H 'mcp-method: tools/call' -H 'mcp-name: echo__echo' -d '{call}' || {{ kill $p; exit 1; }}; done; \
         kill -TERM $p; wait $p || exit 1"
    );
    Ok(vec![stdio, http])
}

#[derive(Clone, Copy)]
enum Trace {
    /// Time samples with their call stacks (every frame counts).
    Stacks,
    /// Every page fault (the function that faulted).
    Faults,
}

/// The functions of `binary` the trace saw, each once, in the order first seen (mangled names;
/// a stack trace prints millions of frames).
fn perf(binary: &Path, workload: &str, work: &Path, trace: Trace) -> Result<Vec<String>> {
    let data = work.join("perf.data");
    let mut record = Command::new("perf");
    record.arg("record").arg("-q").arg("-o").arg(&data);
    match trace {
        Trace::Stacks => record.args(["-F", SAMPLE_HZ, "-e", "cpu-clock", "--call-graph", "dwarf,16384"]),
        Trace::Faults => record.args(["-e", "page-faults", "-c", "1"]),
    };
    // From a directory the configurations are not in: mcp-harness refuses one inside it.
    record.current_dir(work.join("cwd")).args(["--", "sh", "-c", workload]);
    crate::run("perf record", &mut record)?;
    let script = Command::new("perf")
        .arg("script")
        .arg("-i")
        .arg(&data)
        .args(["--no-demangle", "--no-inline", "-F", "ip,sym,dso"])
        .output()
        .map_err(|e| format!("perf script: {e}"))?;
    if !script.status.success() {
        return Err(format!("perf script failed: {}", String::from_utf8_lossy(&script.stderr)));
    }
    let dso = format!("({})", binary.display());
    let mut seen = BTreeSet::new();
    // `ADDRESS SYMBOL (DSO)`, one per sample or stack frame.
    Ok(String::from_utf8_lossy(&script.stdout)
        .lines()
        .filter_map(|line| line.trim().strip_suffix(dso.as_str())?.trim().split_once(' ').map(|(_, s)| s.trim()))
        .filter(|symbol| !symbol.is_empty() && *symbol != "[unknown]" && seen.insert(*symbol))
        .map(str::to_owned)
        .collect())
}

/// How many of the order's functions `binary` has, in a sentence (`bench startup` prints it:
/// names change with the code, and those no longer found are laid out as before).
pub(crate) fn coverage(binary: &Path) -> String {
    let listed: Vec<String> = std::fs::read_to_string(order_file())
        .unwrap_or_default()
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(str::to_owned)
        .collect();
    let symbols = match Command::new("nm").arg("--defined-only").arg(binary).output() {
        Ok(out) if out.status.success() => out.stdout,
        _ => return format!("startup order: could not list the symbols of {} (nm)", binary.display()),
    };
    let symbols = String::from_utf8_lossy(&symbols);
    let present: BTreeSet<&str> = symbols.lines().filter_map(|l| l.split_whitespace().nth(2)).collect();
    let found = listed.iter().filter(|name| present.contains(name.as_str())).count();
    format!(
        "startup order: {found} of the {} functions of crates/cli/startup.order are in the binary{}",
        listed.len(),
        if found * 10 < listed.len() * 9 { " (stale: `cargo xtask startup-order` refreshes it)" } else { "" }
    )
}

fn write(functions: &[String]) -> Result {
    let path = order_file();
    let mut text = String::from(
        "# Written by `cargo xtask startup-order`: the functions a start of mcp-harness runs, in the\n\
         # order first seen. crates/cli/build.rs has the linker lay them out together.\n",
    );
    for name in functions {
        text.push_str(name);
        text.push('\n');
    }
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))
}
