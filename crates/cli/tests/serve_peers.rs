//! Real clients through `mcp-harness serve`: the official TypeScript SDK's client (over stdio
//! and Streamable HTTP) and the Python SDK's (the same two) list the governed pool, call a tool,
//! and answer a `confirm` tool's approval form through their elicitation handlers; each also
//! receives `list_changed` (and lists the new pool) when a server is added to the
//! configuration file while it is connected, and again when it is removed.
//!
//! Run by `cargo xtask test` (feature `interop`), which installs the pinned peers (the SDKs
//! among them) and points `MCP_PEERS_DIR` at them. The clients are scripts of ours in
//! `tests/peers/`.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::Value;

fn peers_dir() -> PathBuf {
    match std::env::var_os("MCP_PEERS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => panic!(
            "MCP_PEERS_DIR is not set: these tests need the SDKs that `cargo xtask test` (or `cargo xtask \
             peers`) installs; run them through xtask"
        ),
    }
}

fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers").join(name)
}

#[allow(unreachable_pub)]
mod serve_setup;
use serve_setup::{Setup, setup};

/// The peers' own commands run as a host would run them.
trait PeerClient {
    fn client(&self, program: &Path, args: &[String]) -> Command;

    /// Has the client change the configuration file while it is connected: it renames
    /// `next.toml` over it, waits for `list_changed` and a new listing, then renames
    /// `prev.toml` over it and waits again.
    fn change_while_connected(&self, client: &mut Command);
}

impl PeerClient for Setup {
    fn client(&self, program: &Path, args: &[String]) -> Command {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .current_dir(self.work.path())
            .env("MCP_PEERS_DIR", peers_dir())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", "error")
            .env("MCP_HARNESS_DATA_DIR", self.data.path())
            .stdin(Stdio::null());
        cmd
    }

    fn change_while_connected(&self, client: &mut Command) {
        let (next, prev) = self.changes();
        client.env("SERVE_NEXT_CONFIG", &next).env("SERVE_PREV_CONFIG", &prev).env("SERVE_CONFIG", &self.config);
    }
}

/// Runs a client to its end (bounded) and reads its one JSON line.
fn report_of(mut cmd: Command) -> Value {
    let child = cmd.stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let out = rx.recv_timeout(Duration::from_secs(90)).expect("the client did not finish in 90 s").unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client failed ({}):\n{stdout}\n{stderr}", out.status);
    let line =
        stdout.lines().rev().find(|l| l.starts_with('{')).unwrap_or_else(|| panic!("no report:\n{stdout}\n{stderr}"));
    serde_json::from_str(line).unwrap()
}

/// What every client must have seen through the gateway.
fn assert_governed(report: &Value, sdk: &str) {
    let tools: Vec<&str> = report["tools"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    for expected in ["fx__echo", "fx__add", "two__echo"] {
        assert!(tools.contains(&expected), "{sdk}: {expected} missing from {tools:?}");
    }
    assert!(!tools.contains(&"two__crash"), "{sdk}: a denied tool is listed");
    assert!(tools.iter().all(|t| t.starts_with("fx__") || t.starts_with("two__")), "{sdk}: {tools:?}");
    assert_eq!(report["server"], "mcp-harness", "{sdk}");
    assert_eq!(report["echo"], format!("from the {sdk} SDK"), "{sdk}: {report}");
    assert_eq!(report["echoError"], false, "{sdk}");
    // The confirm tool ran only after the person said yes through the client's form.
    assert_eq!(report["confirmed"], "42", "{sdk}: {report}");
    let forms = report["forms"].as_array().unwrap();
    assert_eq!(forms.len(), 1, "{sdk}: {report}");
    assert!(forms[0].as_str().unwrap().starts_with("Allow fx__add with {\"a\":2,\"b\":40}?"), "{sdk}: {report}");
}

/// The client heard `list_changed` when `more` was added, and again when it was removed, and
/// listed the pool as it then was each time.
fn assert_heard_changes(report: &Value, sdk: &str) {
    let names = |key: &str| -> Vec<String> {
        report[key]
            .as_array()
            .unwrap_or_else(|| panic!("{sdk}: no list_changed and new listing for {key}: {report}"))
            .iter()
            .filter_map(|n| n.as_str().map(str::to_owned))
            .collect()
    };
    let added = names("afterChange");
    assert!(added.iter().any(|n| n == "more__echo") && added.iter().any(|n| n == "fx__echo"), "{sdk}: {added:?}");
    let removed = names("afterRemoval");
    assert!(!removed.iter().any(|n| n.starts_with("more__")), "{sdk}: {removed:?}");
    assert!(removed.iter().any(|n| n == "fx__echo") && removed.iter().any(|n| n == "two__echo"), "{sdk}: {removed:?}");
    assert!(report["listChanged"].as_u64().unwrap_or(0) >= 2, "{sdk}: {report}");
}

#[test]
fn the_typescript_sdk_client_lists_calls_and_approves_over_stdio_and_hears_of_added_and_removed_servers() {
    let setup = setup();
    let mut args = vec![script("ts_client.mjs").display().to_string(), "stdio".into(), "fx__echo".into()];
    args.extend(["fx__add".to_owned(), "--".to_owned()]);
    args.extend(setup.serve_args(&[]));
    let mut client = setup.client(Path::new("node"), &args);
    setup.change_while_connected(&mut client);
    let report = report_of(client);
    assert_governed(&report, "TypeScript");
    assert_heard_changes(&report, "TypeScript");
}

#[test]
fn the_typescript_sdk_client_lists_calls_and_approves_over_http_and_hears_of_added_and_removed_servers() {
    let setup = setup();
    let (_serve, url) = setup.serve_http();
    let args = [
        script("ts_client.mjs").display().to_string(),
        "http".into(),
        "fx__echo".into(),
        "fx__add".into(),
        "--".into(),
        url,
    ];
    let mut client = setup.client(Path::new("node"), &args);
    setup.change_while_connected(&mut client);
    let report = report_of(client);
    assert_governed(&report, "TypeScript");
    assert_heard_changes(&report, "TypeScript");
}

#[test]
fn the_python_sdk_client_lists_calls_and_approves_over_stdio_and_hears_of_added_and_removed_servers() {
    let setup = setup();
    let python = peers_dir().join("py/bin/python");
    assert!(python.is_file(), "{} is missing; run `cargo xtask peers`", python.display());
    let mut args = vec![
        script("py_client.py").display().to_string(),
        "stdio".into(),
        "fx__echo".into(),
        "fx__add".into(),
        "--".into(),
    ];
    args.extend(setup.serve_args(&[]));
    let mut client = setup.client(&python, &args);
    setup.change_while_connected(&mut client);
    let report = report_of(client);
    assert_governed(&report, "Python");
    assert_heard_changes(&report, "Python");
}

#[test]
fn the_python_sdk_client_lists_calls_and_approves_over_http_and_hears_of_added_and_removed_servers() {
    let setup = setup();
    let python = peers_dir().join("py/bin/python");
    assert!(python.is_file(), "{} is missing; run `cargo xtask peers`", python.display());
    let (_serve, url) = setup.serve_http();
    let args = [
        script("py_client.py").display().to_string(),
        "http".into(),
        "fx__echo".into(),
        "fx__add".into(),
        "--".into(),
        url,
    ];
    let mut client = setup.client(&python, &args);
    setup.change_while_connected(&mut client);
    let report = report_of(client);
    assert_governed(&report, "Python");
    assert_heard_changes(&report, "Python");
}
