//! `raw_startup -- SERVER CMD...`: the floor of `cargo xtask bench startup`.
//!
//! What `mcp-harness tools --json` does for one stdio server, with no framework: spawn it,
//! `initialize` / `notifications/initialized` / `tools/list` over the pipes with blocking std
//! I/O on one thread, print the tools as JSON, close its stdin and reap it. The benchmark times
//! this process from exec to exit.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_startup: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn run() -> Result<(), String> {
    let command: Vec<String> = std::env::args().skip_while(|a| a != "--").skip(1).collect();
    let (program, args) = command.split_first().ok_or("usage: raw_startup -- SERVER CMD...")?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("{program}: {e}"))?;
    let mut stdin = child.stdin.take().ok_or("no stdin")?;
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{initialize}").map_err(|e| e.to_string())?;
    let mut line = String::new();
    stdout.read_line(&mut line).map_err(|e| e.to_string())?;
    let answer: Value = serde_json::from_str(&line).map_err(|e| format!("initialize answer: {e}"))?;
    if answer["result"]["protocolVersion"].as_str().is_none() {
        return Err(format!("initialize failed: {line}"));
    }
    // One write for both, as a client that batches would.
    let rest = format!(
        "{}\n{}\n",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}})
    );
    stdin.write_all(rest.as_bytes()).map_err(|e| e.to_string())?;
    line.clear();
    stdout.read_line(&mut line).map_err(|e| e.to_string())?;
    let answer: Value = serde_json::from_str(&line).map_err(|e| format!("tools/list answer: {e}"))?;
    let tools = answer["result"]["tools"].as_array().ok_or_else(|| format!("tools/list failed: {line}"))?;
    let shown = serde_json::to_string_pretty(&json!({"tools": tools})).map_err(|e| e.to_string())?;
    println!("{shown}");
    drop(stdin);
    child.wait().map_err(|e| e.to_string())?;
    Ok(())
}
