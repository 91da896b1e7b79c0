//! The binary on a real (pseudo-)terminal: VS Code `promptString` inputs asked with the password
//! not echoed, and the connecting spinner.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture server answers `env`).

#![cfg(target_os = "linux")]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Generous: the machine running the tests may be loaded.
const DEADLINE: Duration = Duration::from_secs(60);

/// The binary with its stdin and stderr on a pseudo-terminal (what it shows is `screen`) and
/// its stdout piped.
struct Terminal {
    child: Child,
    keyboard: std::fs::File,
    screen: Arc<Mutex<Vec<u8>>>,
    reader: Option<JoinHandle<()>>,
}

impl Terminal {
    fn run(config: &Path, work: &Path, args: &[&str]) -> Self {
        let pty = nix::pty::openpty(None, None).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mcp-harness"))
            .current_dir(work)
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", "error")
            .env("MCP_HARNESS_DATA_DIR", work.join(".data"))
            .env("TERM", "xterm")
            .arg("--config")
            .arg(config)
            .args(args)
            .stdin(Stdio::from(pty.slave.try_clone().unwrap()))
            .stderr(Stdio::from(pty.slave.try_clone().unwrap()))
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        // Only the child holds the terminal now: its exit ends the output.
        drop(pty.slave);
        let mut master = std::fs::File::from(pty.master);
        let keyboard = master.try_clone().unwrap();
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
        Self { child, keyboard, screen, reader: Some(reader) }
    }

    fn seen(&self) -> String {
        String::from_utf8_lossy(&self.screen.lock().unwrap()).into_owned()
    }

    /// Waits until the terminal shows `text`.
    fn wait_for(&self, text: &str) {
        let start = Instant::now();
        while !self.seen().contains(text) {
            assert!(start.elapsed() < DEADLINE, "no {text:?} on the terminal; it shows {:?}", self.seen());
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn type_in(&mut self, keys: &[u8]) {
        self.keyboard.write_all(keys).unwrap();
    }

    /// Waits for the exit: the status, stdout and everything the terminal showed.
    fn finish(mut self) -> (ExitStatus, String, String) {
        let start = Instant::now();
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            if start.elapsed() > DEADLINE {
                let _ = self.child.kill();
                panic!("still running; the terminal shows {:?}", self.seen());
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut stdout = String::new();
        self.child.stdout.take().unwrap().read_to_string(&mut stdout).unwrap();
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        (status, stdout, self.seen())
    }
}

fn fixture() -> String {
    mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string()
}

#[test]
fn vscode_inputs_are_asked_on_the_terminal_with_the_password_hidden() {
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
    std::fs::write(&config, text.replace("FX", &fixture())).unwrap();

    let mut terminal =
        Terminal::run(&config, work.path(), &["call", "mcp__fx__env", "--args", r#"{"name":"A_KEY"}"#, "--yes"]);
    terminal.wait_for("Fixture API Key");
    terminal.type_in(b"s3cret-value\n");
    terminal.wait_for("Fixture region");
    terminal.type_in(b"eu-west\r");
    let (status, stdout, seen) = terminal.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(stdout, "s3cret-value\n", "the answer reached the server");
    assert!(!seen.contains("s3cret"), "the password was echoed: {seen:?}");
    assert!(seen.contains("eu-west"), "a plain input is echoed: {seen:?}");
    // Answered once (dialoguer redraws the answered prompt as `[hidden]`) for two uses.
    assert_eq!(seen.matches("Fixture API Key: [hidden]").count(), 1, "asked once for two uses: {seen:?}");
}

#[test]
fn the_connecting_spinner_never_shows_an_empty_list() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let fx = fixture();
    // One quick server and one that takes a moment, so the spinner draws while one is pending.
    let text = format!(
        "[servers.quick]\ncommand = \"{fx}\"\nargs = [\"echo\"]\n\n[servers.slow]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 1; exec {fx} echo\"]\n"
    );
    std::fs::write(&config, text).unwrap();
    let (status, stdout, seen) = Terminal::run(&config, work.path(), &["servers"]).finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert!(stdout.contains("quick") && stdout.contains("slow"), "{stdout}");
    assert!(seen.contains("connecting: slow"), "the spinner names the pending server: {seen:?}");
    assert!(!seen.contains("connecting:  ("), "a frame without names: {seen:?}");
}
