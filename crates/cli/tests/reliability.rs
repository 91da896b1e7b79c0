//! What a hostile server, a hostile model or a signal can do to the `mcp-harness` binary:
//! server and model text reaches the terminal only cleaned (escapes, CR, C1, bidirectional
//! overrides removed; `--json` keeps it exactly, escaped), and SIGINT, SIGTERM and SIGHUP close
//! every server (an interrupted call is cancelled) before the process exits with 130, 143 or
//! 129. Real signals go to the real binary; leftovers are looked for by their command line.
//!
//! Needs `cargo build -p mcp-fixtures` first (cargo xtask test does).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Child, Output, Stdio};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use serde_json::Value;
use tempfile::TempDir;

/// What the hostile fixture sends (`mcp-fixture-server hostile`), between visible markers.
const HOSTILE_START: &str = "HOSTILE<";
const HOSTILE_END: &str = ">END";

struct Env {
    dir: TempDir,
    work: TempDir,
    home: TempDir,
    /// Unique to this test: in every server's command line (and its children's).
    marker: String,
}

fn env(test: &str) -> Env {
    Env {
        dir: tempfile::tempdir().unwrap(),
        work: tempfile::tempdir().unwrap(),
        home: tempfile::tempdir().unwrap(),
        marker: format!("mcp-reliability-{test}-{}", std::process::id()),
    }
}

fn fixture() -> String {
    mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string()
}

impl Env {
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text.replace("$FX", &fixture()).replace("$MARKER", &self.marker)).unwrap();
        path
    }

    /// The log of every line the fixture server received (`--log`).
    fn server_log(&self) -> PathBuf {
        self.dir.path().join("server.log")
    }

    fn logged(&self) -> String {
        std::fs::read_to_string(self.server_log()).unwrap_or_default()
    }

    /// A configuration with one hostile fixture server `fx` (logging what it receives, marked;
    /// unconfined, so that it can write its log here) and every tool allowed.
    fn hostile_config(&self) -> PathBuf {
        let log = self.server_log();
        self.write(
            "config.toml",
            &format!(
                "[servers.fx]\ncommand = \"$FX\"\nargs = [\"hostile\", \"--marker\", \"$MARKER\", \"--log\", {:?}]\n\
                 sandbox = \"off\"\n[policy]\ndefault = \"allow\"\n",
                log.display().to_string()
            ),
        )
    }

    fn homes(&self) -> Vec<(&'static str, PathBuf)> {
        let home = self.home.path();
        vec![
            ("HOME", home.to_path_buf()),
            ("XDG_DATA_HOME", home.join(".local/share")),
            ("XDG_CONFIG_HOME", home.join(".config")),
            ("XDG_STATE_HOME", home.join(".local/state")),
            ("XDG_CACHE_HOME", home.join(".cache")),
        ]
    }

    fn cmd(&self, config: &Path) -> Command {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("MCP_HARNESS_DATA_DIR", self.dir.path().join("data"))
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(self.homes())
            .arg("--config")
            .arg(config)
            .timeout(Duration::from_secs(60));
        cmd
    }

    /// The binary as a child (stdin a pipe kept open, so `chat` waits at its prompt).
    fn spawn(&self, config: &Path, args: &[&str]) -> Child {
        std::process::Command::new(assert_cmd::cargo::cargo_bin!("mcp-harness"))
            .current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("MCP_HARNESS_DATA_DIR", self.dir.path().join("data"))
            .env("RUST_LOG", "error")
            .envs(self.homes())
            .arg("--config")
            .arg(config)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }
}

/// Fails on any character that could drive a terminal, showing where.
fn assert_terminal_safe(what: &str, bytes: &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let bad: Vec<(usize, char)> =
        text.char_indices().filter(|(_, c)| mcp_safety::text::is_stripped(*c)).take(5).collect();
    assert!(bad.is_empty(), "{what} carries {bad:?}: {text:?}");
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

// ---------------------------------------------------------------------------------------------
// Terminal safety

/// Every place a server's text reaches `call`'s output: an error answer's message, a log
/// notification, a stdout line that is not JSON, the result, the stderr of a server that died.
#[test]
fn call_shows_a_hostile_servers_text_only_cleaned() {
    let env = env("call-text");
    let config = env.hostile_config();
    for place in ["error", "log", "stdout", "result", "crash"] {
        let args = format!(r#"{{"where": "{place}"}}"#);
        let out = env.cmd(&config).args(["call", "mcp__fx__hostile", "--args", &args]).output().unwrap();
        assert_terminal_safe(&format!("{place}: stdout"), &out.stdout);
        assert_terminal_safe(&format!("{place}: stderr"), &out.stderr);
        // The text is there, cleaned, where this place shows it: the path was taken. A log
        // line or an error goes to stderr, the result to stdout.
        let shown = if place == "result" { text(&out.stdout) } else { text(&out.stderr) };
        assert!(shown.contains(HOSTILE_START) && shown.contains(HOSTILE_END), "{place}: {shown}");
        let expected = if matches!(place, "error" | "crash") { Some(2) } else { Some(0) };
        assert_eq!(out.status.code(), expected, "{place}: {shown}");
    }
}

/// `--json` keeps the exact text, escaped: a JSON reader gets it back, a terminal gets nothing
/// to act on.
#[test]
fn call_json_keeps_a_hostile_result_exactly_but_escaped() {
    let env = env("call-json");
    let config = env.hostile_config();
    let out = env
        .cmd(&config)
        .args(["call", "mcp__fx__hostile", "--args", r#"{"where": "result"}"#, "--json"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_terminal_safe("--json stdout", &out.stdout);
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    let got = result["content"][0]["text"].as_str().unwrap();
    assert!(got.starts_with(HOSTILE_START) && got.contains("\u{1b}]52;") && got.contains('\u{202e}'), "{got:?}");
    assert!(got.contains('\r') && got.contains('\u{9b}') && got.ends_with(HOSTILE_END), "{got:?}");
}

/// A remote server's HTTP error body, shown by `call`.
#[test]
fn call_shows_a_remote_servers_error_body_cleaned() {
    let env = env("http-error");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let options = mcp_fixtures::http::HttpOptions { hostile_error: true, ..Default::default() };
    let server = runtime.block_on(mcp_fixtures::http::start(options, 0)).unwrap();
    let config = env.write(
        "config.toml",
        &format!(
            "[servers.remote]\nurl = \"{}\"\n[servers.remote.oauth]\nenabled = false\n[policy]\ndefault = \"allow\"\n",
            server.url()
        ),
    );
    let out = env.cmd(&config).args(["call", "mcp__remote__echo", "--args", r#"{"text": "x"}"#]).output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("500") && stderr.contains("upstream failed: HOSTILE<") && stderr.contains(">END"),
        "{stderr}"
    );
    assert_terminal_safe("stderr", &out.stderr);
}

/// A tool name comes from the model: `run` prints it in its "✗ name" line, cleaned; and the
/// stderr tail of a server that died, in the "server is failed" warning.
#[test]
fn run_shows_a_hostile_tool_name_and_a_dead_servers_stderr_cleaned() {
    let env = env("run-text");
    let config = env.write(
        "config.toml",
        "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\", \"--die-at-start\"]\n[policy]\ndefault = \"allow\"\n",
    );
    let name = serde_json::to_string("mcp__fx__\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\rx\u{9b}31m\u{202e}txt").unwrap();
    let script = env.write(
        "script.json",
        &format!(r#"{{"turns": [{{"tool_calls": [{{"name": {name}, "input": {{}}}}]}}, {{"text": "done"}}]}}"#),
    );
    let out = env.cmd(&config).args(["run", "go", "--provider", "scripted", "--script"]).arg(&script).output().unwrap();
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stdout}{stderr}");
    assert!(stdout.contains("✗ mcp__fx__]52;c;ZXZpbA==[2J x31mtxt"), "{stdout}");
    assert!(stderr.contains("starting failed: HOSTILE<") && stderr.contains(">END"), "the warning: {stderr}");
    assert_terminal_safe("stdout", &out.stdout);
    assert_terminal_safe("stderr", &out.stderr);
}

/// A server name with a bidirectional override is refused like one with ESC, with the same
/// message, and the refusal itself is clean.
#[test]
fn claude_desktop_names_with_bidi_overrides_are_refused() {
    let env = env("bidi-name");
    for name in ["gh\u{202e}buh", "gh\u{1b}[2J"] {
        let escaped = serde_json::to_string(name).unwrap();
        let config = env.write(
            "claude.json",
            &format!(r#"{{"mcpServers": {{{escaped}: {{"command": "$FX", "args": ["echo"]}}}}}}"#),
        );
        let out = env.cmd(&config).arg("servers").output().unwrap();
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{name:?}: {stderr}");
        assert!(stderr.contains("a server name must be non-empty and free of control characters"), "{stderr}");
        assert_terminal_safe("stderr", &out.stderr);
    }
}

// ---------------------------------------------------------------------------------------------
// Signals

/// Processes whose command line carries `marker` (our servers and their children).
fn processes_with(marker: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else { continue };
        let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
        if cmdline.contains(marker) {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let state = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()).unwrap_or("");
            if !matches!(state, "Z" | "X" | "") {
                found.push((pid, cmdline));
            }
        }
    }
    found
}

/// Waits (generously: the machine is loaded) for `done`.
fn wait_until(what: &str, limit: Duration, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !done() {
        assert!(Instant::now() < deadline, "timed out after {limit:?} waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn send(child: &Child, signal: &str) {
    let status = std::process::Command::new("kill").arg(format!("-{signal}")).arg(child.id().to_string()).status();
    assert!(status.unwrap().success(), "kill -{signal}");
}

/// Waits for the binary to exit after a signal; then nothing with the marker may be left.
fn exits_leaving_nothing(env: &Env, mut child: Child) -> Output {
    let started = Instant::now();
    let limit = Duration::from_secs(30);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("still running {limit:?} after the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let mut output = child.wait_with_output().unwrap();
    output.status = status;
    // Reaped children go at once; give killed grandchildren a moment to be reaped by init.
    let left = (0..100).map(|_| processes_with(&env.marker)).find(|left| {
        let empty = left.is_empty();
        if !empty {
            std::thread::sleep(Duration::from_millis(100));
        }
        empty
    });
    let left = left.unwrap_or_else(|| processes_with(&env.marker));
    for (pid, _) in &left {
        let _ = std::process::Command::new("kill").args(["-KILL", &pid.to_string()]).status();
    }
    assert!(left.is_empty(), "left running: {left:?}; stderr: {}", text(&output.stderr));
    output
}

/// A call in flight when the signal came: the server was told it is cancelled.
fn assert_cancelled(env: &Env) {
    let log = env.logged();
    assert!(log.contains("notifications/cancelled"), "the interrupted call was not cancelled: {log}");
}

#[test]
fn sigint_and_sigterm_to_call_cancel_the_hanging_call_close_the_server_and_exit_130_or_143() {
    for (signal, code) in [("INT", 130), ("TERM", 143)] {
        let env = env(&format!("call-{signal}"));
        let config = env.hostile_config();
        let child = env.spawn(&config, &["call", "mcp__fx__sleep", "--args", r#"{"ms": 600000}"#]);
        wait_until("the call to reach the server", Duration::from_secs(60), || env.logged().contains("\"sleep\""));
        send(&child, signal);
        let out = exits_leaving_nothing(&env, child);
        assert_eq!(out.status.code(), Some(code), "SIG{signal}: {}", text(&out.stderr));
        assert!(text(&out.stderr).contains(&format!("interrupted by SIG{signal}")), "{}", text(&out.stderr));
        assert_cancelled(&env);
    }
}

/// `run` with a server that started a child of its own and a call that hangs.
#[test]
fn sigterm_to_run_closes_the_server_and_its_children_and_exits_143() {
    let env = env("run-TERM");
    let config = env.hostile_config();
    let script = env.write(
        "script.json",
        r#"{"turns": [{"tool_calls": [{"name": "mcp__fx__spawn_child", "input": {}}]},
                      {"tool_calls": [{"name": "mcp__fx__sleep", "input": {"ms": 600000}}]},
                      {"text": "never"}]}"#,
    );
    let child = env.spawn(&config, &["run", "wait", "--provider", "scripted", "--script", script.to_str().unwrap()]);
    wait_until("the hanging call", Duration::from_secs(60), || env.logged().contains("\"sleep\""));
    assert!(processes_with(&env.marker).len() >= 2, "the server and its child: {:?}", processes_with(&env.marker));
    send(&child, "TERM");
    let out = exits_leaving_nothing(&env, child);
    assert_eq!(out.status.code(), Some(143), "{}", text(&out.stderr));
    assert_cancelled(&env);
}

#[test]
fn sighup_to_chat_at_its_prompt_closes_the_server_and_exits_129() {
    let env = env("chat-HUP");
    let config = env.hostile_config();
    let script = env.write("script.json", r#"{"turns": [{"text": "hello"}]}"#);
    let child = env.spawn(&config, &["chat", "--provider", "scripted", "--script", script.to_str().unwrap()]);
    wait_until("the server to be listed", Duration::from_secs(60), || env.logged().contains("tools/list"));
    send(&child, "HUP");
    let out = exits_leaving_nothing(&env, child);
    assert_eq!(out.status.code(), Some(129), "{}", text(&out.stderr));
}

/// `servers` and `tools` while a server hangs in its handshake (30 s startup timeout): the
/// signal ends them at once, the server with them.
#[test]
fn signals_to_servers_and_tools_while_connecting_close_the_server() {
    for (command, signal, code) in [("servers", "TERM", 143), ("tools", "INT", 130), ("servers", "HUP", 129)] {
        let env = env(&format!("{command}-{signal}"));
        // `idle` reads and never answers; the marker is only there to be found.
        let config = env
            .write("config.toml", "[servers.hang]\ncommand = \"$FX\"\nargs = [\"idle\", \"--marker\", \"$MARKER\"]\n");
        let child = env.spawn(&config, &[command]);
        wait_until("the server to start", Duration::from_secs(60), || !processes_with(&env.marker).is_empty());
        let sent = Instant::now();
        send(&child, signal);
        let out = exits_leaving_nothing(&env, child);
        assert_eq!(out.status.code(), Some(code), "{command} SIG{signal}: {}", text(&out.stderr));
        assert!(sent.elapsed() < Duration::from_secs(20), "{command} waited out the startup timeout");
    }
}

/// `login` waiting for the browser's redirect: SIGINT ends it at once with 130.
#[test]
fn sigint_to_login_waiting_for_the_browser_exits_130() {
    use std::io::BufRead as _;

    let env = env("login-INT");
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let options = mcp_fixtures::http::HttpOptions {
        oauth: Some(mcp_fixtures::oauth::OAuthOptions::new()),
        ..mcp_fixtures::http::HttpOptions::default()
    };
    let server = runtime.block_on(mcp_fixtures::http::start(options, 0)).unwrap();
    let config = env.write("config.toml", &format!("[servers.tracker]\nurl = \"{}\"\n", server.url()));
    let mut child = env.spawn(&config, &["login", "tracker", "--no-browser"]);
    let stderr = child.stderr.take().unwrap();
    let mut lines = std::io::BufReader::new(stderr).lines().map_while(Result::ok);
    assert!(lines.any(|line| line.trim().starts_with("http")), "login printed the authorization URL");
    let sent = Instant::now();
    send(&child, "INT");
    let out = exits_leaving_nothing(&env, child);
    assert_eq!(out.status.code(), Some(130));
    assert!(sent.elapsed() < Duration::from_secs(20), "login waited for the browser after SIGINT");
}
