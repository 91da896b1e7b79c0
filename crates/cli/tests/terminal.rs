//! VS Code `promptString` inputs asked on a real (pseudo-)terminal: the password is not echoed,
//! the answers reach the server, each input is asked once.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture server answers `env`).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Generous: the machine running the tests may be loaded.
const DEADLINE: Duration = Duration::from_secs(60);

/// Waits until the terminal's output holds `text`.
fn wait_for(screen: &Mutex<Vec<u8>>, text: &str) {
    let start = Instant::now();
    loop {
        let seen = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
        if seen.contains(text) {
            return;
        }
        assert!(start.elapsed() < DEADLINE, "no {text:?} on the terminal; it shows {seen:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn vscode_inputs_are_asked_on_the_terminal_with_the_password_hidden() {
    let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    let text = r#"{
  "inputs": [
    { "type": "promptString", "id": "api-key", "description": "Fixture API Key", "password": true },
    { "type": "promptString", "id": "region", "description": "Fixture region" }
  ],
  "servers": {
    "fx": { "command": "FX", "args": ["echo"], "env": { "A_KEY": "${input:api-key}", "B_REGION": "${input:region}", "C_AGAIN": "${input:api-key}" } }
  }
}"#;
    std::fs::write(&config, text.replace("FX", &fx)).unwrap();

    let pty = nix::pty::openpty(None, None).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-harness"))
        .current_dir(work.path())
        .env_remove("MCP_HARNESS_CONFIG")
        .env("RUST_LOG", "error")
        .env("TERM", "dumb")
        .arg("--config")
        .arg(&config)
        .args(["call", "mcp__fx__env", "--args", r#"{"name":"A_KEY"}"#, "--yes"])
        .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
        .stderr(Stdio::from(pty.slave.try_clone().unwrap()))
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    // Only the child holds the terminal now: its end reads as the end of the output.
    drop(pty.slave);
    let mut master = std::fs::File::from(pty.master);
    let mut writer = master.try_clone().unwrap();
    let screen = Arc::new(Mutex::new(Vec::new()));
    let reader = {
        let screen = Arc::clone(&screen);
        std::thread::spawn(move || {
            let mut buf = [0u8; 1024];
            while let Ok(n) = master.read(&mut buf) {
                if n == 0 {
                    break;
                }
                screen.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        })
    };

    wait_for(&screen, "Fixture API Key");
    writer.write_all(b"s3cret-value\n").unwrap();
    wait_for(&screen, "Fixture region");
    writer.write_all(b"eu-west\r").unwrap();

    let start = Instant::now();
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if start.elapsed() > DEADLINE {
            let _ = child.kill();
            panic!("still running; the terminal shows {:?}", String::from_utf8_lossy(&screen.lock().unwrap()));
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stdout = String::new();
    child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
    let _ = reader.join();
    let seen = String::from_utf8_lossy(&screen.lock().unwrap()).into_owned();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(stdout, "s3cret-value\n", "the answer reached the server");
    assert!(!seen.contains("s3cret"), "the password was echoed: {seen:?}");
    assert!(seen.contains("eu-west"), "a plain input is echoed: {seen:?}");
    // Answered once (dialoguer redraws the answered prompt as `[hidden]`) for two uses.
    assert_eq!(seen.matches("Fixture API Key: [hidden]").count(), 1, "asked once for two uses: {seen:?}");
}
