//! End-to-end tests of `run`, `chat` and `demo` with the scripted provider: the binary, real
//! fixture and demo servers over stdio, transcripts in a temporary data directory.
//!
//! Needs `cargo build -p mcp-fixtures` first (cargo xtask test does).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::Duration;

use assert_cmd::Command;
use mcp_fixtures::{EVENT_DEADLINE, wait_until_blocking};
use serde_json::Value;
use tempfile::TempDir;

struct Env {
    dir: TempDir,
    work: TempDir,
    /// The binary's HOME (and XDG base directories): the data directory is given explicitly,
    /// so nothing should be written here.
    home: TempDir,
}

fn env() -> Env {
    Env { dir: tempfile::tempdir().unwrap(), work: tempfile::tempdir().unwrap(), home: tempfile::tempdir().unwrap() }
}

impl Env {
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
        let path = self.dir.path().join(name);
        std::fs::write(&path, text.replace("$FX", &fx)).unwrap();
        path
    }

    fn data(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    /// HOME and the XDG base directories of the binary, all inside `home`.
    fn homes(&self) -> [(&'static str, PathBuf); 5] {
        let home = self.home.path();
        [
            ("HOME", home.to_path_buf()),
            ("XDG_DATA_HOME", home.join(".local/share")),
            ("XDG_CONFIG_HOME", home.join(".config")),
            ("XDG_STATE_HOME", home.join(".local/state")),
            ("XDG_CACHE_HOME", home.join(".cache")),
        ]
    }

    fn cmd(&self) -> Command {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env_remove("ANTHROPIC_API_KEY")
            .env_remove("OPENAI_API_KEY")
            .env("MCP_HARNESS_DATA_DIR", self.data())
            .env("RUST_LOG", "error")
            .env("NO_COLOR", "1")
            .envs(self.homes())
            .timeout(Duration::from_secs(60));
        cmd
    }

    /// The binary on `config` with `args`, as a child process with piped output (for tests that
    /// act while it runs).
    fn process(&self, config: &Path, args: &[&str]) -> std::process::Command {
        let mut command = std::process::Command::new(assert_cmd::cargo::cargo_bin!("mcp-harness"));
        command
            .current_dir(self.work.path())
            .env("MCP_HARNESS_DATA_DIR", self.data())
            .env("RUST_LOG", "error")
            .envs(self.homes())
            .arg("--config")
            .arg(config)
            .args(args)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        command
    }

    fn spawn(&self, config: &Path, args: &[&str]) -> std::process::Child {
        self.process(config, args).spawn().unwrap()
    }

    /// `chat --provider scripted ARGS` on `config`: its stdin, and its stdout and stderr lines
    /// (both, as they come).
    fn chat(
        &self,
        config: &Path,
        args: &[&str],
    ) -> (std::process::Child, std::process::ChildStdin, std::sync::mpsc::Receiver<String>) {
        use std::io::{BufRead, BufReader};
        let mut child = self
            .process(config, &[&["chat", "--provider", "scripted"], args].concat())
            .env("NO_COLOR", "1")
            .stdin(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel::<String>();
        for stream in [
            Box::new(child.stdout.take().unwrap()) as Box<dyn std::io::Read + Send>,
            Box::new(child.stderr.take().unwrap()),
        ] {
            let tx = tx.clone();
            std::thread::spawn(move || {
                for line in BufReader::new(stream).lines().map_while(Result::ok) {
                    let _ = tx.send(line);
                }
            });
        }
        (child, stdin, rx)
    }

    fn sessions(&self) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = std::fs::read_dir(self.data().join("sessions"))
            .map(|d| d.flatten().map(|e| e.path()).filter(|p| p.extension().is_some_and(|e| e == "jsonl")).collect())
            .unwrap_or_default();
        files.sort();
        files
    }
}

fn events(stdout: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not a JSON line ({e}): {l}")))
        .collect()
}

/// The demo needs nothing but the `mcp-harness` binary (as after `cargo run -- demo`): a copy
/// alone in a directory of its own, with an empty PATH, runs it.
#[test]
fn the_offline_demo_allows_one_call_asks_about_another_and_answers() {
    let env = env();
    let alone = env.dir.path().join("bin");
    std::fs::create_dir(&alone).unwrap();
    let harness = alone.join(format!("mcp-harness{}", std::env::consts::EXE_SUFFIX));
    std::fs::copy(assert_cmd::cargo::cargo_bin!("mcp-harness"), &harness).unwrap();
    let mut cmd = Command::new(&harness);
    cmd.current_dir(env.work.path())
        .env_clear()
        .env("MCP_HARNESS_DATA_DIR", env.data())
        .env("NO_COLOR", "1")
        .envs(env.homes())
        .timeout(Duration::from_secs(60));
    let out = cmd.arg("demo").assert().success().get_output().clone();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("→ mcp__notes__read_note"), "{text}");
    assert!(text.contains("✗ mcp__notes__write_note") && text.contains("refused by the user"), "{text}");
    assert!(text.contains("Summary of your ideas note"), "{text}");
    assert_eq!(env.sessions().len(), 1, "a transcript was written");
}

#[test]
fn the_demo_with_yes_runs_the_confirm_call_and_json_prints_events() {
    let env = env();
    let out = env.cmd().args(["demo", "--yes", "--json"]).assert().success().get_output().clone();
    let events = events(&out.stdout);
    let calls: Vec<(&str, &str)> = events
        .iter()
        .filter(|e| e["event"] == "tool_call")
        .map(|e| (e["name"].as_str().unwrap(), e["decision"].as_str().unwrap()))
        .collect();
    assert_eq!(
        calls,
        vec![
            ("mcp__notes__list_notes", "allowed"),
            ("mcp__notes__read_note", "allowed"),
            ("mcp__notes__write_note", "approved")
        ]
    );
    let results: Vec<&str> =
        events.iter().filter(|e| e["event"] == "tool_result").map(|e| e["content"].as_str().unwrap()).collect();
    assert_eq!(results[2], "created note \"summary\"");
    assert_eq!(events.last().unwrap()["event"], "finished");
}

const CONFIG: &str = r#"
[servers.fx]
command = "$FX"
args = ["echo"]

[policy]
default = "confirm"

[[policy.rules]]
server = "fx"
tool = "echo"
decision = "allow"

[[policy.rules]]
server = "fx"
tool = "crash"
decision = "deny"
"#;

const SCRIPT: &str = r#"{"turns": [
  {"text": "Echoing.", "tool_calls": [{"name": "mcp__fx__echo", "input": {"text": "hello from the agent"}},
                                      {"name": "mcp__fx__crash", "input": {}},
                                      {"name": "mcp__fx__add", "input": {"a": 1, "b": 2}}]},
  {"text": "Done: the echo came back."}
]}"#;

#[test]
fn run_uses_the_configured_servers_and_policy() {
    let env = env();
    let config = env.write("config.toml", CONFIG);
    let script = env.write("script.json", SCRIPT);
    let out = env
        .cmd()
        .args(["--config"])
        .arg(&config)
        .args(["run", "say hello", "--provider", "scripted", "--script"])
        .arg(&script)
        .arg("--json")
        .assert()
        .success()
        .get_output()
        .clone();
    // What the server answered is remembered for the next start, as `servers` remembers it.
    let eras = std::fs::read_to_string(env.data().join("eras.json")).unwrap();
    assert!(eras.contains("2025-11-25"), "{eras}");
    let events = events(&out.stdout);
    let step = events.iter().find(|e| e["event"] == "step").unwrap();
    assert_eq!(
        step["tools"], 12,
        "10 fixture tools minus the denied one, the two resource built-ins and read_saved_result"
    );
    let results: Vec<(&str, bool)> = events
        .iter()
        .filter(|e| e["event"] == "tool_result")
        .map(|e| (e["content"].as_str().unwrap(), e["is_error"].as_bool().unwrap()))
        .collect();
    assert_eq!(results[0], ("hello from the agent", false));
    assert!(results[1].1 && results[1].0.contains("no tool named \"mcp__fx__crash\""), "{results:?}");
    assert!(results[2].1 && results[2].0.contains("refused"), "no terminal and no --yes: {results:?}");
}

#[test]
fn resume_continues_a_session_from_its_transcript() {
    let env = env();
    let config = env.write("config.toml", CONFIG);
    let script = env.write("script.json", r#"{"turns": [{"text": "Noted."}]}"#);
    let run = |extra: &[&str]| {
        env.cmd()
            .arg("--config")
            .arg(&config)
            .args(["run", "remember 42", "--provider", "scripted", "--script"])
            .arg(&script)
            .args(extra)
            .assert()
            .success()
            .get_output()
            .clone()
    };
    let first = run(&[]);
    let stderr = String::from_utf8(first.stderr).unwrap();
    let id = stderr.split_whitespace().skip_while(|w| *w != "session").nth(1).unwrap().to_owned();
    run(&["--resume", &id]);
    let sessions = env.sessions();
    assert_eq!(sessions.len(), 1, "the resumed session appends to the same transcript");
    let messages = agent_loop_messages(&sessions[0]);
    assert_eq!(messages, 4, "two turns of user + assistant");
}

fn agent_loop_messages(path: &Path) -> usize {
    std::fs::read_to_string(path).unwrap().lines().filter(|l| l.contains(r#""kind":"message""#)).count()
}

#[test]
fn chat_keeps_the_conversation_between_lines() {
    let env = env();
    let config = env.write("config.toml", CONFIG);
    let script = env.write("script.json", r#"{"turns": [{"text": "One."}, {"text": "Two."}]}"#);
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["chat", "--provider", "scripted", "--json", "--script"])
        .arg(&script)
        .write_stdin("first\n\nsecond\n")
        .assert()
        .success()
        .get_output()
        .clone();
    let finished = events(&out.stdout).iter().filter(|e| e["event"] == "finished").count();
    assert_eq!(finished, 2);
}

#[test]
fn a_real_provider_without_its_key_says_which_variable_to_set() {
    let env = env();
    let config = env.write("config.toml", CONFIG);
    let out = env.cmd().arg("--config").arg(&config).args(["run", "hi"]).assert().code(2).get_output().clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["run", "hi", "--provider", "scripted"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    assert!(String::from_utf8(out.stderr).unwrap().contains("--script"));
}

/// Processes whose environment holds `marker` (our server children).
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else { continue };
        if let Ok(environ) = std::fs::read(entry.path().join("environ"))
            && String::from_utf8_lossy(&environ).contains(marker)
        {
            let stat = std::fs::read_to_string(entry.path().join("stat")).unwrap_or_default();
            let zombie = stat.rsplit(')').next().and_then(|r| r.split_whitespace().next()) == Some("Z");
            if !zombie {
                found.push(pid);
            }
        }
    }
    found
}

#[test]
fn ctrl_c_stops_a_task_cancels_its_call_and_closes_the_servers() {
    let env = env();
    let marker = format!("MCP_HARNESS_TEST_MARKER_{}", std::process::id());
    // A directory of its own: the one holding the configuration is protected from servers.
    let records = env.dir.path().join("records");
    std::fs::create_dir(&records).unwrap();
    let record = records.join("received.jsonl");
    let config = env.write(
        "config.toml",
        &format!(
            "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\", \"--log\", {record:?}]\nenv = {{ {marker} = \"1\" }}\n\
             sandbox = {{ write = [{dir:?}] }}\n\
             [policy]\ndefault = \"allow\"\n",
            // The server stays confined; it may write its record, as a user would allow.
            dir = records,
        ),
    );
    let script = env.write(
        "script.json",
        r#"{"turns": [{"tool_calls": [{"name": "mcp__fx__sleep", "input": {"ms": 30000}}]}, {"text": "never"}]}"#,
    );
    let mut child =
        env.spawn(&config, &["run", "wait", "--provider", "scripted", "--script", script.to_str().unwrap()]);
    // What the server received, one JSON-RPC message a line.
    let received = || -> Vec<Value> {
        std::fs::read_to_string(&record)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    };
    let call_id = || received().into_iter().find(|m| m["method"] == "tools/call").map(|m| m["id"].clone());
    assert!(
        wait_until_blocking(EVENT_DEADLINE, || call_id().is_some()),
        "the call reached the server: {:?}",
        received()
    );
    let call_id = call_id().unwrap();
    let status = std::process::Command::new("kill").args(["-INT", &child.id().to_string()]).status().unwrap();
    assert!(status.success());
    let exited = wait_until_blocking(EVENT_DEADLINE, || child.try_wait().unwrap().is_some());
    assert!(exited, "did not stop after Ctrl-C");
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("interrupted"), "{stderr}");
    assert_eq!(output.status.code(), Some(130), "an interrupted task is not a finished one: {stderr}");
    let cancelled: Vec<Value> = received().into_iter().filter(|m| m["method"] == "notifications/cancelled").collect();
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["params"]["requestId"], call_id, "the call in flight was cancelled at the server");
    assert!(processes_with(&marker).is_empty(), "the server was closed before the command ended");
}

/// A remote (HTTP) fixture server running in this test process.
fn http_fixture(token: Option<&str>) -> (tokio::runtime::Runtime, mcp_fixtures::http::RunningServer) {
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let options = mcp_fixtures::http::HttpOptions { token: token.map(str::to_owned), ..Default::default() };
    let server = runtime.block_on(mcp_fixtures::http::start(options, 0)).unwrap();
    (runtime, server)
}

#[test]
fn servers_tools_and_call_work_with_a_remote_server_and_a_token_from_the_environment() {
    let env = env();
    let (_runtime, server) = http_fixture(Some("s3cret"));
    let config = env.write(
        "config.toml",
        &format!(
            "[servers.remote]\nurl = \"{}\"\nbearer_token_env_var = \"FX_TOKEN\"\n[policy]\ndefault = \"allow\"\n",
            server.url()
        ),
    );
    let out =
        env.cmd().arg("--config").arg(&config).args(["servers", "--json"]).env("FX_TOKEN", "s3cret").assert().success();
    let servers: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    assert_eq!(servers["servers"][0]["state"], "connected", "{servers}");
    let out = env.cmd().arg("--config").arg(&config).args(["tools"]).env("FX_TOKEN", "s3cret").assert().success();
    assert!(String::from_utf8_lossy(&out.get_output().stdout).contains("mcp__remote__echo"));
    env.cmd()
        .arg("--config")
        .arg(&config)
        .args(["call", "mcp__remote__echo", "--args", r#"{"text":"over http"}"#])
        .env("FX_TOKEN", "s3cret")
        .assert()
        .success()
        .stdout(predicates::str::contains("over http"));
    // A wrong token: the table says the server needs authorization.
    let out = env.cmd().arg("--config").arg(&config).arg("servers").env("FX_TOKEN", "wrong").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("needs-auth"), "{text}");
    // No token at all: the reason names the variable to set.
    let out = env.cmd().arg("--config").arg(&config).arg("servers").env_remove("FX_TOKEN").assert().success();
    let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    assert!(text.contains("FX_TOKEN") && text.contains("not set"), "{text}");
}

/// A remote server protected with OAuth: `servers` shows it needs a login and says how;
/// `login` prints the authorization URL, waits on a loopback port for the browser's redirect
/// (this test plays the browser), and stores the tokens in the data directory (0600); then
/// every command connects with them; `logout` forgets them.
#[test]
fn login_and_logout_with_oauth() {
    use std::io::BufRead as _;

    let env = env();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let options = mcp_fixtures::http::HttpOptions {
        oauth: Some(mcp_fixtures::oauth::OAuthOptions::new()),
        ..mcp_fixtures::http::HttpOptions::default()
    };
    let server = runtime.block_on(mcp_fixtures::http::start(options, 0)).unwrap();
    let config = env.write(
        "config.toml",
        &format!("[servers.tracker]\nurl = \"{}\"\n[policy]\ndefault = \"allow\"\n", server.url()),
    );
    let state = |env: &Env| {
        let out = env.cmd().arg("--config").arg(&config).args(["servers", "--json"]).assert().success();
        let servers: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        servers["servers"][0].clone()
    };
    let before = state(&env);
    assert_eq!(before["state"], "needs-auth", "{before}");
    assert!(before["reason"].as_str().unwrap().contains("run `mcp-harness login tracker`"), "{before}");

    let mut child = env.spawn(&config, &["login", "tracker", "--no-browser"]);
    let stderr = child.stderr.take().unwrap();
    let url = std::io::BufReader::new(stderr)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.trim().starts_with("http").then(|| line.trim().to_owned()))
        .expect("login printed the authorization URL");
    assert!(url.contains("/authorize?") && url.contains("code_challenge_method=S256"), "{url}");
    // The browser: follows the authorization server's redirect to the loopback listener.
    let page = runtime.block_on(async { reqwest::get(&url).await.unwrap().text().await.unwrap() });
    assert!(page.contains("Logged in"), "{page}");
    let output = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(output.status.success() && stdout.contains("logged in to tracker: 2 tools"), "{stdout}");

    let file = env.data().join("oauth").join("oauth-tokens.json");
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    }
    // Stored where told, and nowhere else: the workspace and HOME stay empty.
    let entries = |dir: &Path| -> Vec<String> {
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    assert_eq!(entries(&env.data().join("oauth")), ["oauth-tokens.json"]);
    assert_eq!(entries(env.work.path()), Vec::<String>::new(), "nothing in the workspace");
    assert_eq!(entries(env.home.path()), Vec::<String>::new(), "nothing under HOME");
    let after = state(&env);
    assert_eq!(after["state"], "connected", "{after}");
    env.cmd()
        .arg("--config")
        .arg(&config)
        .args(["call", "mcp__tracker__echo", "--args", r#"{"text":"with a token"}"#])
        .assert()
        .success()
        .stdout(predicates::str::contains("with a token"));

    env.cmd()
        .arg("--config")
        .arg(&config)
        .args(["logout", "tracker"])
        .assert()
        .success()
        .stdout(predicates::str::contains("logged out of tracker"));
    assert_eq!(state(&env)["state"], "needs-auth");
    env.cmd()
        .arg("--config")
        .arg(&config)
        .args(["login", "nosuch"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("no server named \"nosuch\""));
    assert_eq!(entries(env.home.path()), Vec::<String>::new(), "still nothing under HOME");
}

/// A machine client: `grant = "client_credentials"` with the secret from the environment
/// connects without any login; a missing secret variable or an unusable key file is a failed
/// server whose reason says what to fix.
#[test]
fn client_credentials_from_the_configuration() {
    let env = env();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(1).enable_all().build().unwrap();
    let options = mcp_fixtures::http::HttpOptions {
        oauth: Some(mcp_fixtures::oauth::OAuthOptions {
            pre_registered: Some(("machine".into(), "s3cret".into())),
            ..mcp_fixtures::oauth::OAuthOptions::new()
        }),
        ..mcp_fixtures::http::HttpOptions::default()
    };
    let server = runtime.block_on(mcp_fixtures::http::start(options, 0)).unwrap();
    std::fs::write(env.dir.path().join("bad.pem"), "not a key").unwrap();
    let config = env.write(
        "config.toml",
        &format!(
            "[servers.bot]\nurl = \"{url}\"\n[servers.bot.oauth]\ngrant = \"client_credentials\"\nclient_id = \"machine\"\n\
             client_secret_env_var = \"BOT_SECRET\"\n\
             [servers.keyed]\nurl = \"{url}\"\n[servers.keyed.oauth]\ngrant = \"client_credentials\"\nclient_id = \"machine\"\n\
             private_key_file = \"bad.pem\"\n",
            url = server.url()
        ),
    );
    let states = |secret: Option<&str>| {
        let mut cmd = env.cmd();
        cmd.arg("--config").arg(&config).args(["servers", "--json"]);
        match secret {
            Some(s) => cmd.env("BOT_SECRET", s),
            None => cmd.env_remove("BOT_SECRET"),
        };
        let out = cmd.assert().success();
        let v: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
        v["servers"].as_array().unwrap().clone()
    };
    let with = states(Some("s3cret"));
    assert_eq!(with[0]["name"], "bot");
    assert_eq!(with[0]["state"], "connected", "{with:?}");
    assert_eq!(with[1]["state"], "failed", "{with:?}");
    assert!(with[1]["reason"].as_str().unwrap().contains("oauth.private_key_file"), "{with:?}");
    let without = states(None);
    assert_eq!(without[0]["state"], "failed", "{without:?}");
    assert!(without[0]["reason"].as_str().unwrap().contains("BOT_SECRET"), "{without:?}");
    assert!(
        !env.data().join("oauth").join("oauth-tokens.json").exists() || {
            let text = std::fs::read_to_string(env.data().join("oauth").join("oauth-tokens.json")).unwrap();
            !text.contains("s3cret")
        },
        "a configured secret is not copied into the token file"
    );
}

/// `chat` keeps its servers and follows its configuration: a server added, one changed, the
/// policy changed, a server removed, a broken file (kept, said once), `/mcp` and its commands.
#[test]
fn chat_follows_configuration_edits_and_answers_mcp_commands() {
    use std::io::Write;
    let env = env();
    let v1 = "[servers.a]\ncommand = \"$FX\"\nargs = [\"echo\"]\n";
    let config = env.write("config.toml", v1);
    let script = env.write("script.json", r#"{"turns": []}"#);
    let (mut child, mut stdin, rx) = env.chat(&config, &["--script", script.to_str().unwrap()]);
    let mut seen: Vec<String> = Vec::new();
    // Asks `/mcp` until every wanted text has been printed (the watcher may need a moment).
    let ask_until = |stdin: &mut std::process::ChildStdin, seen: &mut Vec<String>, wanted: &[&str]| {
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        let start = seen.len();
        loop {
            writeln!(stdin, "/mcp").unwrap();
            while let Ok(line) = rx.recv_timeout(Duration::from_millis(300)) {
                seen.push(line);
            }
            let recent = seen[start..].join("\n");
            if wanted.iter().all(|w| recent.contains(w)) {
                return recent;
            }
            assert!(std::time::Instant::now() < deadline, "never printed {wanted:?}; got:\n{recent}");
        }
    };
    let text = ask_until(&mut stdin, &mut seen, &["a       connected"]);
    assert!(text.contains("SERVER") && text.contains("TOOLS"), "{text}");
    assert!(
        text.contains("TOOLS OFFERED/LISTED") && text.contains("connected  10/10"),
        "offered of listed, as `servers`: {text}"
    );

    // Add b, change a (more tools), change the policy.
    env.write(
        "config.toml",
        "[servers.a]\ncommand = \"$FX\"\nargs = [\"echo\", \"--extra-tools\", \"2\"]\n\
         [servers.b]\ncommand = \"$FX\"\nargs = [\"echo\"]\n\
         [policy]\ndefault = \"allow\"\n",
    );
    let text =
        ask_until(&mut stdin, &mut seen, &["configuration reloaded", "added b", "reconnecting a", "policy changed"]);
    let text = if text.contains("b       connected") {
        text
    } else {
        ask_until(&mut stdin, &mut seen, &["b       connected"])
    };
    assert!(text.contains("b       connected"), "{text}");

    // A broken file keeps the running configuration and says so once.
    env.write("config.toml", "[servers.a\n");
    let text = ask_until(&mut stdin, &mut seen, &["the configuration was not reloaded"]);
    assert!(text.contains("the running one stays"), "{text}");
    let text = ask_until(&mut stdin, &mut seen, &["b       connected"]);
    assert!(!text.contains("was not reloaded"), "said once: {text}");

    // Remove b.
    env.write("config.toml", "[servers.a]\ncommand = \"$FX\"\nargs = [\"echo\"]\n");
    let text = ask_until(&mut stdin, &mut seen, &["removed b"]);
    assert!(text.contains("configuration reloaded"), "{text}");

    // /mcp disable, enable, reconnect, and a wrong name.
    writeln!(stdin, "/mcp disable a").unwrap();
    ask_until(&mut stdin, &mut seen, &["a       disabled"]);
    writeln!(stdin, "/mcp enable a").unwrap();
    ask_until(&mut stdin, &mut seen, &["a       connected"]);
    writeln!(stdin, "/mcp reconnect a").unwrap();
    ask_until(&mut stdin, &mut seen, &["is connecting"]);
    writeln!(stdin, "/mcp reconnect nosuch").unwrap();
    ask_until(&mut stdin, &mut seen, &["no server named nosuch"]);

    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// Reads lines into `seen` until one from `seen[from..]` holds `wanted`; fails after a minute.
fn read_until(rx: &std::sync::mpsc::Receiver<String>, seen: &mut Vec<String>, from: usize, wanted: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while !seen[from..].iter().any(|l| l.contains(wanted)) {
        assert!(std::time::Instant::now() < deadline, "never printed {wanted:?}; got:\n{}", seen.join("\n"));
        if let Ok(line) = rx.recv_timeout(Duration::from_millis(300)) {
            seen.push(line);
        }
    }
}

/// A server added to the configuration during a `chat` answers on the next turn: the listing
/// after the edit waits for it to start (it answers three seconds late here), as the first step
/// waits for the servers configured at the start.
#[test]
fn a_server_added_mid_chat_answers_on_the_next_turn() {
    use std::io::Write;
    let env = env();
    let v1 = "[servers.a]\ncommand = \"$FX\"\nargs = [\"echo\"]\n[policy]\ndefault = \"allow\"\n";
    let config = env.write("config.toml", v1);
    let script = env.write(
        "script.json",
        r#"{"turns": [
          {"text": "One."},
          {"tool_calls": [{"name": "mcp__late__echo", "input": {"text": "from the added server"}}]},
          {"text": "Two."}
        ]}"#,
    );
    let (mut child, mut stdin, rx) = env.chat(&config, &["--json", "--script", script.to_str().unwrap()]);
    let mut seen: Vec<String> = Vec::new();
    writeln!(stdin, "first").unwrap();
    read_until(&rx, &mut seen, 0, r#""event":"finished""#);

    // `late` answers three seconds after it starts (unconfined: the sandbox would not let the
    // shell run a program named only inside its script).
    env.write(
        "config.toml",
        &format!(
            "{v1}[servers.late]\ncommand = \"sh\"\nargs = [\"-c\", \"sleep 3; exec $FX echo\"]\nsandbox = \"off\"\n"
        ),
    );
    // `/mcp` reads the edit (the watcher may need a moment) and shows `late` still starting.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !seen.iter().any(|l| l.contains("added late")) {
        assert!(std::time::Instant::now() < deadline, "the edit was never read: {}", seen.join("\n"));
        writeln!(stdin, "/mcp").unwrap();
        while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
            seen.push(line);
        }
    }
    let shown = seen.join("\n");
    assert!(shown.contains("late    pending"), "the server is still starting when the turn begins: {shown}");
    writeln!(stdin, "second").unwrap();
    let start = seen.len();
    read_until(&rx, &mut seen, start, r#""event":"finished""#);
    let results: Vec<Value> = seen[start..]
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|e| e["event"] == "tool_result")
        .collect();
    assert_eq!(results.len(), 1, "{}", seen.join("\n"));
    assert_eq!(results[0]["content"], "from the added server", "{}", seen.join("\n"));
    assert_eq!(results[0]["is_error"], false);
    assert!(!seen.iter().any(|l| l.contains("still starting")), "{}", seen.join("\n"));
    drop(stdin);
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
}

/// `run` refuses to start when a required server does not connect, naming every one.
#[test]
fn run_stops_before_the_first_step_when_required_servers_fail() {
    let env = env();
    let config = env.write(
        "config.toml",
        "[servers.good]\ncommand = \"$FX\"\nargs = [\"echo\"]\nrequired = true\n\
         [servers.gone]\ncommand = \"/nonexistent/server-one\"\nrequired = true\n\
         [servers.also]\ncommand = \"/nonexistent/server-two\"\nrequired = true\n\
         [servers.optional]\ncommand = \"/nonexistent/server-three\"\n\
         [runtime]\nrestart_limit = 0\n",
    );
    // A script with no turns: a model step would fail with "0 turns", not with the servers.
    let script = env.write("script.json", r#"{"turns": []}"#);
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["run", "hi", "--provider", "scripted", "--script", script.to_str().unwrap()])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("required server(s) did not connect"), "{stderr}");
    assert!(stderr.contains("gone:") && stderr.contains("also:"), "both named at once: {stderr}");
    assert!(!stderr.contains("optional:") && !stderr.contains("good:"), "{stderr}");
    assert!(!stderr.contains("0 turns"), "no model step ran: {stderr}");
}

#[test]
fn resuming_an_unknown_session_says_so_once() {
    let env = env();
    let config = env.write("config.toml", CONFIG);
    let script = env.write("script.json", r#"{"turns": [{"text": "Noted."}]}"#);
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["run", "hello", "--provider", "scripted", "--script"])
        .arg(&script)
        .args(["--resume", "1700000000000-42"])
        .assert()
        .code(2)
        .get_output()
        .clone();
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("cannot resume session 1700000000000-42: there is no transcript"), "{stderr}");
    assert!(stderr.contains("without --resume"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
    assert!(!stderr.contains("No such file"), "{stderr}");
    // An id is a name, never a path.
    env.cmd()
        .arg("--config")
        .arg(&config)
        .args(["run", "hello", "--provider", "scripted", "--script"])
        .arg(&script)
        .args(["--resume", "../../etc/passwd"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("a session id is letters, digits"));
}

/// The user messages of a transcript, as JSON (what the model was sent as the user's turns).
fn user_messages(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|e| e["kind"] == "message" && e["message"]["role"] == "user")
        .map(|e| e["message"].clone())
        .collect()
}

/// A prompt too long for a turn is refused before it is sent: sent, it stayed in the
/// conversation (and its transcript) and failed every later turn.
#[test]
fn chat_refuses_a_prompt_too_long_for_a_turn() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"content\"]\n");
    let script = env.write("script.json", r#"{"turns": [{"text": "Short one."}]}"#);
    let long = "x".repeat(250_000);
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["chat", "--provider", "scripted", "--script"])
        .arg(&script)
        .write_stdin(format!("/fx:review code={long}\n/fx:review code=short\n"))
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(
        stdout.contains("more than the 200000 a turn takes; nothing was sent"),
        "{}",
        &stdout[..stdout.len().min(2000)]
    );
    assert!(stdout.contains("Short one."), "the next prompt goes on: {}", &stdout[..stdout.len().min(2000)]);
    assert!(!stdout.contains(&long[..1000]), "the long prompt was shown");
}

/// `/SERVER:PROMPT args` and `/mcp__SERVER__PROMPT args` in `chat` send the prompt's messages
/// as the user's turn; a line naming an unknown server or prompt, or missing a required
/// argument, says what to type and calls no model; `/complete` asks the server.
#[test]
fn chat_sends_a_servers_prompt_as_the_next_turn() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"content\"]\n");
    let script = env.write("script.json", r#"{"turns": [{"text": "Hello, Ada."}, {"text": "Looks fine."}]}"#);
    let lines = [
        "/prompts",
        "/fx:greet",
        "/fx:greet nmae=Ada",
        "/fx:nope",
        "/zz:greet Ada",
        "/complete fx:greet name A",
        "/complete fx:greet name style=formal",
        "/fx:greet name=Ada Lovelace style=formal",
        "/mcp__fx__review fn main() {}",
        "/fx:hostile",
    ];
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["chat", "--provider", "scripted", "--script"])
        .arg(&script)
        .write_stdin(lines.join("\n") + "\n")
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    for expected in [
        "/fx:greet name=VALUE [style=VALUE]  Greet someone.",
        "prompt greet needs the argument name; type /fx:greet name=VALUE [style=VALUE]",
        "prompt greet has no argument nmae; type /fx:greet",
        "server fx has no prompt nope; it has /fx:greet, /fx:review, /fx:hostile",
        "no server named zz; servers: fx",
        "Ada\nAlan\n",
        "Dr. Ada Lovelace\nDr. Alan Turing\n",
        "[user]\nGreet Ada Lovelace, formal.\n\nHello, Ada.",
        "[assistant]\nWhat should I look for?\n\nLooks fine.",
    ] {
        assert!(stdout.contains(expected), "missing {expected:?} in:\n{stdout}");
    }
    assert!(!stdout.contains('\u{1b}') && !stdout.contains('\u{7}'), "server text is terminal-safe: {stdout:?}");
    let sessions = env.sessions();
    assert_eq!(sessions.len(), 1);
    let users = user_messages(&sessions[0]);
    assert_eq!(
        users,
        vec![
            serde_json::json!({"role": "user", "content": [{"type": "text", "text": "Greet Ada Lovelace, formal."}]}),
            serde_json::json!({"role": "user", "content": [
                {"type": "text", "text": "[user]\nReview this code:\nfn main() {}"},
                {"type": "text", "text": "[assistant]\nWhat should I look for?"}]}),
            // The hostile prompt is sent too (its text cleaned); the script has no third turn.
            users[2].clone(),
        ],
        "only the three fetched prompts reached the model"
    );
    let hostile = users[2]["content"][0]["text"].as_str().unwrap();
    assert!(hostile.starts_with("HOSTILE") && !hostile.contains('\u{1b}'), "{hostile:?}");
}

/// An OpenAI-compatible endpoint on 127.0.0.1 that answers every request with `answer` (one
/// streamed text) and hands each request's body to the test.
fn fake_openai(answer: &'static str) -> (String, std::sync::mpsc::Receiver<Value>) {
    use std::io::{BufRead, BufReader, Read, Write};
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}/v1", listener.local_addr().unwrap());
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut length = 0;
            loop {
                let mut line = String::new();
                if reader.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
                    break;
                }
                if let Some((name, value)) = line.split_once(':')
                    && name.eq_ignore_ascii_case("content-length")
                {
                    length = value.trim().parse().unwrap();
                }
            }
            let mut body = vec![0; length];
            reader.read_exact(&mut body).unwrap();
            let _ = tx.send(serde_json::from_slice::<Value>(&body).unwrap());
            let chunk = serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": answer}, "finish_reason": "stop"}]});
            let events = format!("data: {chunk}\n\ndata: [DONE]\n\n");
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n";
            let _ = write!(stream, "{head}content-length: {}\r\n\r\n{events}", events.len());
        }
    });
    (base, rx)
}

/// What the model is sent for `/SERVER:PROMPT`: the prompt's messages as the user's turn, on
/// the wire of a real provider adapter.
#[test]
fn a_prompt_is_in_the_models_request() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"content\"]\n");
    let (base, requests) = fake_openai("Noted.");
    let out = env
        .cmd()
        .arg("--config")
        .arg(&config)
        .args(["chat", "--provider", "openai", "--model", "gpt-test"])
        .env("OPENAI_BASE_URL", &base)
        .env("NO_PROXY", "127.0.0.1")
        .write_stdin("/fx:greet\n/mcp__fx__review fn main() {}\n")
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("prompt greet needs the argument name"), "{stdout}");
    assert!(stdout.trim_end().ends_with("What should I look for?\n\nNoted."), "{stdout}");
    let bodies: Vec<Value> = requests.try_iter().collect();
    assert_eq!(bodies.len(), 1, "the line missing an argument called no model: {bodies:?}");
    let messages = bodies[0]["messages"].as_array().unwrap();
    let user = messages.iter().rfind(|m| m["role"] == "user").unwrap();
    let text = user["content"].to_string();
    assert!(text.contains(r"[user]\nReview this code:\nfn main() {}"), "{user}");
    assert!(text.contains(r"[assistant]\nWhat should I look for?"), "{user}");
}
