//! The binary on a real (pseudo-)terminal: VS Code `promptString` inputs asked with the password
//! not echoed, the connecting spinner, servers' elicitation forms and URLs, and code mode's
//! confirm prompt for a script's call.
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
        Self::run_with(config, work, args, &[])
    }

    /// [`Terminal::run`] with more environment variables.
    fn run_with(config: &Path, work: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let pty = nix::pty::openpty(None, None).unwrap();
        let child = Command::new(env!("CARGO_BIN_EXE_mcp-harness"))
            .current_dir(work)
            .envs(env.iter().copied())
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

/// An input's id (shown when it has no description) and its default come from a configuration
/// file: they reach the terminal cleaned, and Enter still gives the default as written.
#[test]
fn an_inputs_id_and_default_are_shown_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = dir.path().join("mcp.json");
    let text = r#"{
  "inputs": [{ "type": "promptString", "id": "\u001b[2Jwiped", "default": "\u001b[31mred" }],
  "servers": { "fx": { "command": "FX", "args": ["echo"], "env": { "A_KEY": "${input:\u001b[2Jwiped}" } } }
}"#;
    std::fs::write(&config, text.replace("FX", &fixture())).unwrap();
    let mut terminal =
        Terminal::run(&config, work.path(), &["call", "mcp__fx__env", "--args", r#"{"name":"A_KEY"}"#, "--yes"]);
    terminal.wait_for("wiped");
    terminal.type_in(b"\r");
    let (status, stdout, seen) = terminal.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert!(!seen.contains("\u{1b}[2J") && !seen.contains("\u{1b}[31m"), "an escape reached the terminal: {seen:?}");
    assert!(seen.contains("red]"), "the default is shown: {seen:?}");
    assert!(stdout.trim_end().ends_with("red") && stdout.len() > "red\n".len(), "the default as written: {stdout:?}");
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

/// A configuration with the fixture server `fx` in `--elicit` mode, plus `extra` lines in its table.
/// The fixture logs what it receives to `received` in `dir` (unconfined: the configuration's
/// directory is kept from a confined server).
fn elicit_config(dir: &Path, extra: &str) -> std::path::PathBuf {
    let config = dir.join("config.toml");
    let log = dir.join("received");
    let text = format!(
        "[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\", \"--elicit\", \"--log\", \"{}\"]\nsandbox = \"off\"\n{extra}\n",
        fixture(),
        log.display()
    );
    std::fs::write(&config, text).unwrap();
    config
}

/// Whether the client declared elicitation to the fixture (in any message it received).
fn declared_elicitation(dir: &Path) -> bool {
    let received = std::fs::read_to_string(dir.join("received")).unwrap();
    assert!(received.contains("\"initialize\""), "{received}");
    received.contains(r#""elicitation":{"form":{},"url":{}}"#)
}

/// The JSON answer the fixture returns as its result's text.
fn answered(stdout: &str) -> serde_json::Value {
    serde_json::from_str(stdout.trim()).unwrap_or_else(|e| panic!("{e}: {stdout:?}"))
}

#[test]
fn an_elicitation_form_is_asked_field_by_field_checked_and_sent() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = elicit_config(dir.path(), "");
    let mut t =
        Terminal::run(&config, work.path(), &["call", "mcp__fx__ask_form", "--args", r#"{"hostile":true}"#, "--yes"]);
    t.wait_for("Answer it? accept / decline / cancel");
    t.type_in(b"accept\r");
    t.wait_for("(text, 2 to 40 characters, required): ");
    t.type_in(b"A\r");
    t.wait_for("at least 2 characters, not 1; try again");
    t.type_in(b"Ada Lovelace\r");
    t.wait_for("Email (an email address, required): ");
    t.type_in(b"ada\r");
    t.wait_for("not an email address");
    t.type_in(b"ada@example.com\r");
    t.wait_for("Birthday (a date, YYYY-MM-DD): ");
    t.type_in(b"1815-02-30\r");
    t.wait_for("not a date (YYYY-MM-DD); try again");
    t.type_in(b"1815-12-10\r");
    t.wait_for("Homepage (a URI): ");
    t.type_in(b"\r");
    t.wait_for("Age (a whole number, 0 to 150) [30]: ");
    t.type_in(b"\r");
    t.wait_for("Rating (a number, 0 to 5): ");
    t.type_in(b"9\r");
    t.wait_for("at most 5; try again");
    t.type_in(b"4.5\r");
    t.wait_for("Subscribe (yes or no) [no]: ");
    t.type_in(b"y\r");
    t.wait_for("Color (one: its number or name) [green]: ");
    t.type_in(b"3\r");
    t.wait_for("Size (one: its number or name): ");
    t.type_in(b"large\r");
    t.wait_for("Tags (any: numbers or names, comma-separated; 1 to 2): ");
    t.type_in(b"1,c\r");
    t.wait_for("Send this to server \"fx\"? yes / no [yes]: ");
    t.type_in(b"\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(
        answered(&stdout),
        serde_json::json!({"action": "accept", "content": {"name": "Ada Lovelace", "email": "ada@example.com",
            "birthday": "1815-12-10", "age": 30, "rating": 4.5, "subscribe": true, "color": "blue", "size": "l",
            "tags": ["a", "c"]}})
    );
    assert!(seen.contains("server \"fx\" asks for input:"), "{seen:?}");
    assert!(seen.contains("Your full name"), "descriptions are shown: {seen:?}");
    assert!(seen.contains("2) Large"), "options are numbered with their titles: {seen:?}");
    // The server's message and title carried OSC 52, a screen clear, a bidi override, BEL.
    for escape in ["\u{1b}]52", "\u{1b}[2J", "\u{202e}", "\u{7}", "\u{9b}"] {
        assert!(!seen.contains(escape), "{escape:?} reached the terminal: {seen:?}");
    }
    assert!(seen.contains("HOSTILE<"), "the message is shown, cleaned: {seen:?}");
    assert!(declared_elicitation(dir.path()), "form and url mode are declared when someone can be asked");
    // The call's progress bar (the fixture reports `1/2 asking` first) keeps off the form.
    let form = &seen[seen.find("Answer it?").unwrap()..seen.find("Send this to").unwrap()];
    assert!(!form.contains("1/2 asking"), "a progress bar was drawn over the form: {form:?}");
}

#[test]
fn an_elicitation_can_be_declined_or_cancelled_at_any_point() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = elicit_config(dir.path(), "");
    let call = ["call", "mcp__fx__ask_form", "--yes"];
    // An empty answer to the first question declines.
    let mut t = Terminal::run(&config, work.path(), &call);
    t.wait_for("Answer it?");
    t.type_in(b"\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(answered(&stdout), serde_json::json!({"action": "decline"}));
    // Ctrl-D in the middle of the form cancels it; nothing typed so far is sent.
    let mut t = Terminal::run(&config, work.path(), &call);
    t.wait_for("Answer it?");
    t.type_in(b"a\r");
    t.wait_for("required): ");
    t.type_in(b"Ada\r");
    t.wait_for("Email (");
    t.type_in(b"\x04");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(answered(&stdout), serde_json::json!({"action": "cancel"}));
    // Esc in a field declines.
    let mut t = Terminal::run(&config, work.path(), &call);
    t.wait_for("Answer it?");
    t.type_in(b"accept\r");
    t.wait_for("required): ");
    t.type_in(b"\x1b");
    let (_, stdout, seen) = t.finish();
    assert_eq!(answered(&stdout), serde_json::json!({"action": "decline"}), "{seen:?}");
}

#[test]
fn a_url_elicitation_is_shown_and_opened_only_when_the_user_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = elicit_config(dir.path(), "");
    // A stand-in browser opener on PATH that records what it was asked to open.
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let opened = dir.path().join("opened");
    let opener = bin.join("xdg-open");
    std::fs::write(&opener, format!("#!/bin/sh\necho \"$1\" > {}\n", opened.display())).unwrap();
    std::fs::set_permissions(&opener, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let env = [("PATH", path.as_str())];
    let url = "https://login.example.com/device?code=1";
    let args = format!("{{\"url\":\"{url}\"}}");
    let call = ["call", "mcp__fx__ask_url", "--args", &args, "--yes"];

    let mut t = Terminal::run_with(&config, work.path(), &call, &env);
    t.wait_for("Open it in your browser? yes / no / cancel [no]: ");
    t.type_in(b"\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(answered(&stdout), serde_json::json!({"action": "decline"}));
    assert!(seen.contains(url) && seen.contains("(it leads to login.example.com)"), "{seen:?}");
    assert!(!opened.exists(), "nothing is opened without a yes");

    let mut t = Terminal::run_with(&config, work.path(), &call, &env);
    t.wait_for("Open it in your browser?");
    t.type_in(b"yes\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(answered(&stdout), serde_json::json!({"action": "accept"}));
    let recorded = || std::fs::read_to_string(&opened).unwrap_or_default();
    assert!(mcp_fixtures::wait_until_blocking(mcp_fixtures::EVENT_DEADLINE, || recorded().ends_with('\n')));
    assert_eq!(recorded().trim(), url, "the opener was given the URL");

    // A URL that is not http(s) is refused before anything is shown.
    let call = ["call", "mcp__fx__ask_url", "--args", r#"{"url":"file:///etc/passwd"}"#, "--yes"];
    let (status, stdout, seen) = Terminal::run_with(&config, work.path(), &call, &env).finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert!(stdout.contains("only http and https URLs"), "{stdout}");
    assert!(!seen.contains("Open it in your browser?"), "{seen:?}");
}

#[test]
fn elicitation_turned_off_by_policy_is_declined_without_asking() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = elicit_config(dir.path(), "elicitation = false");
    let (status, stdout, seen) = Terminal::run(&config, work.path(), &["call", "mcp__fx__ask_form", "--yes"]).finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(answered(&stdout), serde_json::json!({"action": "decline"}));
    assert!(!seen.contains("Answer it?"), "nothing was asked: {seen:?}");
    assert!(seen.contains("declined: its configuration says `elicitation = false`"), "{seen:?}");
    assert!(!declared_elicitation(dir.path()), "not declared to a server the policy refuses");
}

#[test]
fn without_a_terminal_elicitation_is_declined() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = elicit_config(dir.path(), "");
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-harness"))
        .current_dir(work.path())
        .env_remove("MCP_HARNESS_CONFIG")
        .env("MCP_HARNESS_DATA_DIR", work.path().join(".data"))
        .env("RUST_LOG", "error")
        .arg("--config")
        .arg(&config)
        .args(["call", "mcp__fx__ask_form", "--yes"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{}: {stderr}", out.status);
    assert_eq!(answered(&stdout), serde_json::json!({"action": "decline"}));
    assert!(
        stderr.contains("server \"fx\" asked for input (Tell us about yourself); declined: there is no terminal"),
        "{stderr}"
    );
    assert!(!declared_elicitation(dir.path()), "not declared without a terminal");
}

#[test]
fn chat_hands_the_terminal_to_a_form_during_a_turn_and_takes_it_back() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = elicit_config(dir.path(), "");
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        r#"{"turns": [{"text": "Asking.", "tool_calls": [{"name": "mcp__fx__ask_form", "input": {}}]}, {"text": "Thanks."}, {"text": "Bye."}]}"#,
    )
    .unwrap();
    let data = dir.path().join("data");
    let env = [("MCP_HARNESS_DATA_DIR", data.to_str().unwrap())];
    let args = ["chat", "--provider", "scripted", "--script", script.to_str().unwrap(), "--yes"];
    let mut t = Terminal::run_with(&config, work.path(), &args, &env);
    t.wait_for("> ");
    t.type_in(b"fill in the form\r");
    t.wait_for("Answer it?");
    t.type_in(b"a\r");
    t.wait_for("required): ");
    t.type_in(b"Ada\r");
    t.wait_for("Email (");
    t.type_in(b"ada@example.com\r");
    // Every other field is optional or has a default: Enter for each.
    for prompt in ["Birthday (", "Homepage (", "Age (", "Rating (", "Subscribe (", "Color (", "Size (", "Tags ("] {
        t.wait_for(prompt);
        t.type_in(b"\r");
    }
    t.wait_for("Send this to");
    t.type_in(b"y\r");
    // The chat's prompt comes back once the turn is over; the next line is chat's again.
    let start = Instant::now();
    while t.seen().matches("> ").count() < 2 {
        assert!(start.elapsed() < DEADLINE, "no second prompt: {:?}", t.seen());
        std::thread::sleep(Duration::from_millis(20));
    }
    t.type_in(b"/exit\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    let result = stdout.lines().find_map(|l| l.trim().strip_prefix("← ")).unwrap_or_else(|| panic!("{stdout}"));
    assert_eq!(
        answered(result),
        serde_json::json!({"action": "accept", "content": {"name": "Ada", "email": "ada@example.com", "age": 30,
            "subscribe": false, "color": "green"}})
    );
    assert!(stdout.contains("Thanks."), "{stdout}");
}

#[test]
fn a_2026_07_28_input_required_round_is_asked_on_the_terminal_too() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!("[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\", \"--elicit\", \"--stateless\"]\n", fixture());
    std::fs::write(&config, text).unwrap();
    let mut t = Terminal::run(&config, work.path(), &["call", "mcp__fx__ask_form", "--yes"]);
    t.wait_for("Answer it?");
    t.type_in(b"a\r");
    t.wait_for("required): ");
    t.type_in(b"Ada\r");
    t.wait_for("Email (");
    t.type_in(b"ada@example.com\r");
    for prompt in ["Birthday (", "Homepage (", "Age (", "Rating (", "Subscribe (", "Color (", "Size (", "Tags ("] {
        t.wait_for(prompt);
        t.type_in(b"\r");
    }
    t.wait_for("Send this to");
    t.type_in(b"\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert_eq!(
        answered(&stdout),
        serde_json::json!({"action": "accept", "content": {"name": "Ada", "email": "ada@example.com", "age": 30,
            "subscribe": false, "color": "green"}})
    );
    // The same server seen by `servers`: it was reached in 2026-07-28.
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-harness"))
        .current_dir(work.path())
        .env_remove("MCP_HARNESS_CONFIG")
        .env("MCP_HARNESS_DATA_DIR", work.path().join(".data"))
        .arg("--config")
        .arg(&config)
        .arg("servers")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&out.stdout).contains("2026-07-28"), "{}", String::from_utf8_lossy(&out.stdout));
}

/// Code mode: a `confirm` tool a script calls is asked on the terminal, saying that a script
/// asks; refused, the script catches it and the model reads its answer.
#[test]
fn a_scripts_confirm_call_is_asked_on_the_terminal_naming_the_script() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!(
        "code_mode = \"on\"\n\
         [servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\nsandbox = \"off\"\n\
         [[policy.rules]]\nserver = \"@builtin\"\ntool = \"run_code\"\ndecision = \"allow\"\n\
         [[policy.rules]]\nserver = \"fx\"\ntool = \"add\"\ndecision = \"confirm\"\n",
        fixture()
    );
    std::fs::write(&config, text).unwrap();
    let code = "try { return await tools.fx.add({ a: 1, b: 2 }); } catch (e) { return e.kind; }";
    let script = dir.path().join("script.json");
    let turns = serde_json::json!({"turns": [
        {"tool_calls": [{"name": "run_code", "input": {"code": code}}]},
        {"text": "Done."}
    ]});
    std::fs::write(&script, turns.to_string()).unwrap();
    let data = dir.path().join("data");
    let env = [("MCP_HARNESS_DATA_DIR", data.to_str().unwrap())];
    let args = ["run", "add them", "--provider", "scripted", "--script", script.to_str().unwrap()];
    let mut t = Terminal::run_with(&config, work.path(), &args, &env);
    t.wait_for("asked by script \"call_1_1\"");
    // The first choice, "no".
    t.wait_for("> no");
    t.type_in(b"\r");
    let (status, stdout, seen) = t.finish();
    assert!(status.success(), "{status}; terminal: {seen:?}");
    assert!(
        seen.contains("Run mcp__fx__add (tool \"add\" of server \"fx\", asked by script \"call_1_1\")"),
        "{seen:?}"
    );
    assert!(stdout.contains("← \"not_approved\""), "{stdout}");
    assert!(stdout.contains("Done."), "{stdout}");
}

/// A signal that comes while a question is on the terminal (raw mode, cursor hidden) ends the
/// process with the terminal put back: echo and line editing on, the cursor shown.
#[test]
fn a_signal_during_a_question_leaves_the_terminal_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let config = dir.path().join("config.toml");
    let text = format!(
        "[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\nsandbox = \"off\"\n\
         [[policy.rules]]\nserver = \"fx\"\ntool = \"add\"\ndecision = \"confirm\"\n",
        fixture()
    );
    std::fs::write(&config, text).unwrap();
    let t = Terminal::run(&config, work.path(), &["call", "mcp__fx__add", "--args", r#"{"a": 1, "b": 2}"#]);
    t.wait_for("Run mcp__fx__add");
    // The question takes the terminal raw (just after it drew the prompt).
    let master = t.keyboard.try_clone().unwrap();
    let asked = std::time::Instant::now();
    let echoes =
        || nix::sys::termios::tcgetattr(&master).unwrap().local_flags.contains(nix::sys::termios::LocalFlags::ECHO);
    while echoes() && asked.elapsed() < DEADLINE {
        std::thread::sleep(Duration::from_millis(10));
    }
    assert!(!echoes(), "the question did not take the terminal");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(t.child.id() as i32), nix::sys::signal::Signal::SIGTERM).unwrap();
    let (status, _stdout, seen) = t.finish();
    assert_eq!(status.code(), Some(143), "{seen:?}");
    let after = nix::sys::termios::tcgetattr(&master).unwrap();
    use nix::sys::termios::LocalFlags;
    assert!(after.local_flags.contains(LocalFlags::ECHO | LocalFlags::ICANON), "left raw: {:?}", after.local_flags);
    let hidden = seen.rfind("\u{1b}[?25l").unwrap_or_else(|| panic!("the question hid no cursor: {seen:?}"));
    assert!(seen[hidden..].contains("\u{1b}[?25h"), "the cursor stays hidden: {seen:?}");
}
