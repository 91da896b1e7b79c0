//! End-to-end tests of the `mcp-harness` binary against the fixture server.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture is another package's binary).
//! Configurations are written to a temporary directory that is not the command's working
//! directory, as the workspace rule requires.

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use assert_cmd::Command;
use predicates::prelude::*;
use serde_json::Value;
use tempfile::TempDir;

struct Env {
    config_dir: TempDir,
    work: TempDir,
    /// The data directory (tokens, remembered protocol eras): never the user's.
    data: TempDir,
    fx: String,
}

fn env() -> Env {
    let fx = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    let dir = || tempfile::tempdir().unwrap();
    Env { config_dir: dir(), work: dir(), data: dir(), fx }
}

impl Env {
    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.config_dir.path().join(name);
        std::fs::write(&path, text.replace("$FX", &self.fx)).unwrap();
        path
    }

    fn run(&self, config: &Path) -> Command {
        let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", "error")
            .env("MCP_HARNESS_DATA_DIR", self.data.path())
            .arg("--config")
            .arg(config)
            .timeout(Duration::from_secs(30));
        cmd
    }

    /// A fixture server answered by a shell script: one tool, `fail`, whose calls report
    /// `isError` (the Rust fixture validates nothing the schema check would let through).
    fn failing_tool_server(&self) -> PathBuf {
        let script = r#"
while IFS= read -r line; do
  id=$(printf '%s\n' "$line" | sed -n 's/^.*"id":\([0-9][0-9]*\).*$/\1/p')
  case "$line" in
    *'"method":"initialize"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"protocolVersion":"2025-06-18","capabilities":{"tools":{}},"serverInfo":{"name":"sh","version":"1"}}}\n' "$id" ;;
    *'"method":"tools/list"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"fail","description":"Always fails.","inputSchema":{"type":"object"}}]}}\n' "$id" ;;
    *'"method":"tools/call"'*) printf '{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"it broke"}],"isError":true}}\n' "$id" ;;
  esac
done
"#;
        self.write("failing.sh", script)
    }
}

fn json_of(output: &[u8]) -> Value {
    serde_json::from_slice(output).unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(output)))
}

const MIXED: &str = r#"
[servers.fx]
command = "$FX"
args = ["echo"]

[servers.gone]
command = "/nonexistent/mcp-server"

[servers.slow]
command = "sh"
args = ["-c", "sleep 300; exec $FX echo"]
startup_timeout_s = 3

[servers.off]
command = "$FX"
args = ["echo"]
enabled = false
"#;

#[test]
fn servers_reports_each_server_without_waiting_for_the_slow_one() {
    let env = env();
    let config = env.write("config.toml", MIXED);
    let started = Instant::now();
    let out = env.run(&config).arg("servers").assert().success().get_output().stdout.clone();
    // Its startup timeout ended the slow server's 300 s: the command did not wait for it.
    assert!(started.elapsed() < Duration::from_secs(25), "{:?}", started.elapsed());
    let text = String::from_utf8(out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 5, "{text}");
    assert!(
        lines[0].starts_with("SERVER") && lines[0].contains("STATE") && lines[0].contains("TOOLS OFFERED/LISTED"),
        "{text}"
    );
    // Sorted by name.
    let names: Vec<&str> = lines[1..].iter().map(|l| l.split_whitespace().next().unwrap()).collect();
    assert_eq!(names, ["fx", "gone", "off", "slow"]);
    let fields = |i: usize| lines[i].split_whitespace().collect::<Vec<_>>();
    assert_eq!(&fields(1)[..4], ["fx", "connected", "2025-11-25", "10/10"]);
    assert_eq!(fields(1)[5], "confined", "stdio servers run in the standard sandbox: {text}");
    assert_eq!(&fields(2)[..2], ["gone", "failed"]);
    assert!(lines[2].contains("/nonexistent/mcp-server") && lines[2].contains("No such file"), "{text}");
    assert_eq!(fields(3), ["off", "disabled", "-", "-", "-", "-"]);
    assert_eq!(&fields(4)[..2], ["slow", "failed"]);
    assert!(lines[4].contains("timed out after 3s"), "{text}");
}

#[test]
fn servers_json_shape() {
    let env = env();
    let config = env.write("config.toml", MIXED);
    let out = env.run(&config).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
    let mut value = json_of(&out);
    let servers = value["servers"].as_array_mut().unwrap();
    // Each server's time is its own: the slow one's is its 3 s timeout, the good one's is
    // not the whole command's (which waited for the slow one).
    let elapsed = |i: usize| servers[i]["elapsed_ms"].as_u64().unwrap();
    assert!(elapsed(3) >= 3000, "{}", servers[3]);
    assert!(elapsed(0) < elapsed(3), "{} {}", servers[0], servers[3]);
    let work = env.work.path().canonicalize().unwrap();
    for server in servers.iter_mut() {
        if server["elapsed_ms"].is_number() {
            server["elapsed_ms"] = "[elapsed]".into();
        }
        if server["working_dir"]["path"].as_str().is_some_and(|p| Path::new(p) == work) {
            server["working_dir"]["path"] = "[work]".into();
        }
    }
    insta::assert_json_snapshot!(value);
}

/// A server started from the home directory without a `cwd` of its own works in a private
/// folder (the home directory's start-up files would be writable otherwise); `servers` says so
/// and why, and the server is not refused. From a project folder it works there.
#[test]
fn servers_say_when_a_server_works_in_a_private_folder() {
    let env = env();
    std::fs::create_dir(env.config_dir.path().join("home")).unwrap();
    let home = env.config_dir.path().join("home").canonicalize().unwrap();
    let project = home.join("project");
    std::fs::create_dir_all(project.join(".git")).unwrap();
    let config = env.write(
        "config.toml",
        "[servers.snoop]\ncommand = \"$FX\"\nargs = [\"snoop\"]\n[policy]\ndefault = \"allow\"\n",
    );
    let run = |dir: &Path| {
        let mut cmd = env.run(&config);
        cmd.current_dir(dir).env("HOME", &home).env("XDG_CONFIG_HOME", home.join(".config"));
        cmd
    };

    let out = run(&home).arg("servers").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    let line = text.lines().find(|l| l.starts_with("snoop")).unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains(" connected ") && line.contains(" confined "), "{text}");
    let expected = format!(
        "working directory: private (a folder of its own, removed when it stops), because {} is your home directory",
        home.display()
    );
    assert!(line.contains(&expected), "{text}");

    let out = run(&home).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    let dir = &value["servers"][0]["working_dir"];
    assert_eq!(dir["private"], true, "{value}");
    assert_eq!(dir["instead_of"].as_str(), home.to_str(), "{value}");
    assert!(dir["because"].as_str().unwrap().starts_with("is your home directory"), "{value}");
    // It does work elsewhere: not in HOME.
    let out = run(&home).args(["call", "mcp__snoop__cwd"]).assert().success().get_output().stdout.clone();
    let cwd = String::from_utf8(out).unwrap();
    assert!(!cwd.trim().is_empty() && Path::new(cwd.trim()) != home, "{cwd}");

    // From a project folder: that folder, and nothing to say in the table.
    let out = run(&project).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    assert_eq!(value["servers"][0]["working_dir"], serde_json::json!({"private": false, "path": project}), "{value}");
    let out = run(&project).arg("servers").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(!text.contains("working directory"), "{text}");
    let out = run(&project).args(["call", "mcp__snoop__cwd"]).assert().success().get_output().stdout.clone();
    assert_eq!(String::from_utf8(out).unwrap().trim(), project.to_str().unwrap());
}

/// The snoop fixture with a HOME of its own holding a key, under `standard` unless `sandbox`
/// says otherwise; another server with the sandbox off; a remote one (no sandbox).
const SANDBOXED: &str = r#"
[servers.snoop]
command = "$FX"
args = ["snoop"]
env = { HOME = "$HOME" }
$SANDBOX

[servers.open]
command = "$FX"
args = ["echo"]
sandbox = "off"

[servers.remote]
url = "http://127.0.0.1:9/mcp"
bearer_token_env_var = "NO_SUCH_TOKEN_VARIABLE"

[[policy.rules]]
server = "*"
tool = "*"
decision = "allow"
"#;

fn sandboxed_config(env: &Env, sandbox: &str) -> (PathBuf, PathBuf) {
    let home = env.config_dir.path().join("home");
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(home.join(".ssh/id_ed25519"), "-----BEGIN OPENSSH PRIVATE KEY-----").unwrap();
    let text = SANDBOXED.replace("$HOME", &home.display().to_string()).replace("$SANDBOX", sandbox);
    (env.write("config.toml", &text), home)
}

#[test]
fn servers_show_how_each_stdio_server_is_confined() {
    let env = env();
    let (config, _) = sandboxed_config(&env, "");
    let out = env.run(&config).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    let sandbox: Vec<(&str, &Value)> =
        value["servers"].as_array().unwrap().iter().map(|s| (s["name"].as_str().unwrap(), &s["sandbox"])).collect();
    assert_eq!(
        sandbox,
        [("open", &Value::from("off")), ("remote", &Value::Null), ("snoop", &Value::from("confined"))],
        "{value}"
    );
    let out = env.run(&config).arg("servers").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.lines().next().unwrap().contains("SANDBOX"), "{text}");
    assert!(text.lines().any(|l| l.starts_with("snoop") && l.contains("confined")), "{text}");
}

#[test]
fn a_confined_server_cannot_read_keys_the_configuration_or_the_hosts_data() {
    let env = env();
    let (config, home) = sandboxed_config(&env, "");
    let data = env.config_dir.path().join("data");
    std::fs::create_dir_all(data.join("oauth")).unwrap();
    std::fs::write(data.join("oauth/oauth-tokens.json"), "{}").unwrap();
    for target in [home.join(".ssh/id_ed25519"), config.clone(), data.join("oauth/oauth-tokens.json")] {
        let arguments = serde_json::json!({"path": target}).to_string();
        env.run(&config)
            .env("MCP_HARNESS_DATA_DIR", &data)
            .args(["call", "mcp__snoop__read_file", "--args", &arguments])
            .assert()
            .code(1)
            .stdout(predicate::str::contains("Permission denied"));
    }
    // With the sandbox off, the same call reads the key: the denial above is the sandbox's.
    let (config, home) = sandboxed_config(&env, "sandbox = \"off\"");
    let arguments = serde_json::json!({"path": home.join(".ssh/id_ed25519")}).to_string();
    env.run(&config)
        .args(["call", "mcp__snoop__read_file", "--args", &arguments])
        .assert()
        .success()
        .stdout(predicate::str::contains("PRIVATE KEY"));
}

/// A confined server that fails on a file the sandbox keeps from it, or on a module it cannot
/// load, fails with a reason that says it ran confined and which entry (with the path from its
/// error) or `sandbox = "off"` would let it run, in the table and in `--json`.
#[test]
fn a_confined_servers_failure_says_which_entry_would_let_it_run() {
    let env = env();
    // A HOME of its own: neither the working folder (granted) nor the configuration's.
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir(home.path().join("notes")).unwrap();
    std::fs::write(home.path().join("notes/today.txt"), "a note").unwrap();
    let config = env.write(
        "config.toml",
        &format!(
            "[servers.reads]\ncommand = \"sh\"\nargs = [\"-c\", \"cat \\\"$HOME/notes/today.txt\\\"\"]\n\
             env = {{ HOME = {home:?} }}\n\
             [servers.writes]\ncommand = \"sh\"\nargs = [\"-c\", \"mkdir \\\"$HOME/out\\\"\"]\n\
             env = {{ HOME = {home:?} }}\n\
             [servers.module]\ncommand = \"sh\"\n\
             args = [\"-c\", \"echo \\\"ModuleNotFoundError: No module named 'helper'\\\" >&2; exit 1\"]\n\
             [servers.open]\ncommand = \"sh\"\nargs = [\"-c\", \"cat \\\"$HOME/notes/today.txt\\\"\"]\n\
             env = {{ HOME = {home:?} }}\nsandbox = \"off\"\n",
            home = home.path().display().to_string()
        ),
    );
    let out = env.run(&config).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    let reason = |name: &str| -> String {
        let server = value["servers"].as_array().unwrap().iter().find(|s| s["name"] == name).unwrap();
        assert_eq!(server["state"], "failed", "{value}");
        server["reason"].as_str().unwrap_or_default().to_owned()
    };
    let notes = home.path().join("notes");
    let reads = reason("reads");
    assert!(reads.contains("Permission denied") && reads.contains("ran in the sandbox"), "{reads}");
    assert!(
        reads.contains(&format!("`read = [\"{}\"]`", notes.display())) && reads.contains("`sandbox = \"off\"`"),
        "{reads}"
    );
    let writes = reason("writes");
    assert!(writes.contains(&format!("`write = [\"{}\"]`", home.path().join("out").display())), "{writes}");
    let module = reason("module");
    assert!(module.contains("could not find the module helper") && module.contains("`read` entry"), "{module}");
    // Unconfined, the same server reads the file (and then fails, as it speaks no MCP), and
    // nothing is said of a sandbox.
    let open = reason("open");
    assert!(!open.contains("Permission denied") && !open.contains("sandbox"), "{open}");

    // The table shows the hint whole.
    let out = env.run(&config).arg("servers").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    let line = text.lines().find(|l| l.starts_with("reads")).unwrap();
    assert!(
        line.contains(&format!("`read = [\"{}\"]`", notes.display())) && line.contains("sandbox = \"off\""),
        "{text}"
    );
}

#[test]
fn network_off_in_the_configuration_reaches_no_listener() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let env = env();
    let (config, _) = sandboxed_config(&env, "sandbox = { network = false }");
    let arguments = serde_json::json!({"port": listener.local_addr().unwrap().port()}).to_string();
    env.run(&config)
        .args(["call", "mcp__snoop__connect", "--args", &arguments])
        .assert()
        .code(1)
        .stdout(predicate::str::contains("unreachable"));
    assert!(matches!(listener.accept(), Err(e) if e.kind() == std::io::ErrorKind::WouldBlock));
}

#[test]
fn the_host_binary_is_a_launcher_too_under_its_hidden_argument() {
    // What `mcp-harness` starts servers with when `mcp-harness-sandbox` is not beside it: a
    // failure before the server runs is one line the stdio adapter recognises, and status 126.
    let out = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness")
        .args(["__sandbox-launch", "--read", "/nonexistent/launcher-test", "--", "/bin/true"])
        .assert()
        .code(126)
        .get_output()
        .stdout
        .clone();
    let line = String::from_utf8(out).unwrap();
    assert!(line.starts_with("\0mcp-sandbox-launch: sandbox path /nonexistent/launcher-test"), "{line:?}");
}

const POLICY: &str = r#"
[servers.fx]
command = "$FX"
args = ["echo"]

[policy]
default = "confirm"

[[policy.rules]]
server = "fx"
tool = "add"
decision = "allow"

[[policy.rules]]
server = "fx"
tool = "crash"
decision = "deny"

[[policy.rules]]
server = "fx"
tool = "ask_*"
decision = "deny"
"#;

#[test]
fn tools_json_is_the_pool_with_unavailable_servers_as_diagnostics() {
    let env = env();
    let text = format!("{POLICY}\n[servers.gone]\ncommand = \"/nonexistent/mcp-server\"\n");
    let config = env.write("config.toml", &text);
    let out = env.run(&config).args(["tools", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    insta::assert_json_snapshot!(value);
}

#[test]
fn servers_counts_the_tools_offered_out_of_those_listed() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    let out = env.run(&config).args(["tools", "--json"]).assert().success().get_output().stdout.clone();
    let offered = json_of(&out)["tools"].as_array().unwrap().iter().filter(|t| t["server"] == "fx").count();
    let hidden = json_of(&out)["hidden"].as_array().unwrap().len();
    assert!(hidden > 0, "the policy hides some");
    let out = env.run(&config).arg("servers").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    assert!(text.lines().next().unwrap().contains("TOOLS OFFERED/LISTED"), "{text}");
    let row = text.lines().find(|l| l.starts_with("fx ")).unwrap();
    assert_eq!(row.split_whitespace().nth(3).unwrap(), format!("{offered}/{}", offered + hidden), "{text}");
    let out = env.run(&config).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
    let fx = &json_of(&out)["servers"][0];
    assert_eq!(
        (fx["tools_offered"].as_u64(), fx["tools"].as_u64()),
        (Some(offered as u64), Some((offered + hidden) as u64))
    );
}

#[test]
fn enabled_and_disabled_tools_hide_tools_as_policy_and_cannot_be_called() {
    let env = env();
    let config = env.write(
        "config.toml",
        "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\"]\nenabled_tools = [\"echo\", \"add\"]\ndisabled_tools = [\"add\"]\n\n[[policy.rules]]\nserver = \"*\"\ntool = \"*\"\ndecision = \"allow\"\n",
    );
    let out = env.run(&config).args(["tools", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    let names: Vec<&str> = value["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["mcp__fx__echo"], "only the enabled tool, even under an allow-all rule");
    let text = String::from_utf8(env.run(&config).arg("tools").assert().success().get_output().stdout.clone()).unwrap();
    assert!(text.contains("tool \"add\" of server \"fx\", denied by disabled_tools of server \"fx\""), "{text}");
    assert!(text.contains("denied by enabled_tools of server \"fx\""), "{text}");
    env.run(&config)
        .args(["call", "mcp__fx__add", "--args", r#"{"a":1,"b":2}"#, "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("disabled_tools"));
}

#[test]
fn tools_table_shows_decisions_and_hidden_tools() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    let assert = env.run(&config).arg("tools").assert().success();
    let text = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let decision = |name: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().nth(1).unwrap_or_default().to_owned())
    };
    assert_eq!(decision("mcp__fx__add").as_deref(), Some("allow"));
    assert_eq!(decision("mcp__fx__echo").as_deref(), Some("confirm"));
    assert_eq!(decision("mcp__fx__crash"), None);
    assert_eq!(decision("mcp__fx__ask_roots"), None);
    assert!(text.contains("Echo the text back."), "{text}");
    assert!(!text.contains("[from MCP server"), "{text}");
    assert!(text.contains("hidden by policy (4):"), "{text}");
    assert!(text.contains(r#"tool "crash" of server "fx", denied by rule 1 (server "fx", tool "crash")"#), "{text}");
}

#[test]
fn tools_search_ranks_the_searchable_tools_with_scores() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    let out = env
        .run(&config)
        .args(["tools", "--search", "add two numbers", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let value = json_of(&out);
    assert_eq!(value["query"], "add two numbers");
    assert_eq!(value["results"][0]["name"], "mcp__fx__add");
    assert_eq!(value["results"][0]["server"], "fx");
    assert_eq!(value["results"][0]["description"], "Add two numbers.");
    assert!(value["results"][0]["score"].as_f64().unwrap() > 0.0, "{value}");
    // The table, limited.
    let assert = env.run(&config).args(["tools", "--search", "echo text back", "--limit", "1"]).assert().success();
    let text = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let rows: Vec<&str> = text.lines().skip(1).collect();
    assert_eq!(rows.len(), 1, "{text}");
    assert!(rows[0].starts_with("1 ") && rows[0].contains("mcp__fx__echo"), "{text}");
}

#[test]
fn tools_search_from_stdin_prints_one_json_line_per_query_and_never_finds_denied_tools() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    let assert = env
        .run(&config)
        .args(["tools", "--search", "-", "--limit", "2"])
        .write_stdin("add numbers\nask the client for its roots\nselect:mcp__fx__echo,mcp__fx__crash\n")
        .assert()
        .success();
    let text = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| json_of(l.as_bytes())).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert_eq!(lines[0]["query"], "add numbers");
    assert_eq!(lines[0]["results"][0]["name"], "mcp__fx__add");
    assert!(lines[0]["results"].as_array().unwrap().len() <= 2);
    assert!(lines[0]["results"][0].as_object().unwrap().keys().eq(["name", "score"]), "{text}");
    // `ask_*` are denied: never found.
    assert!(!lines[1].to_string().contains("ask_"), "{text}");
    assert_eq!(lines[2]["results"][0]["name"], "mcp__fx__echo");
    assert_eq!(lines[2]["unknown"], serde_json::json!(["mcp__fx__crash"]));
}

#[test]
fn tools_show_exposure_and_tool_search_settings_apply() {
    let env = env();
    let text = format!("tool_search = \"on\"\n{POLICY}");
    let config = env.write("config.toml", &text);
    let assert = env.run(&config).arg("tools").assert().success();
    let out = String::from_utf8(assert.get_output().stdout.clone()).unwrap();
    let exposure = |name: &str| {
        out.lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .map(|l| l.split_whitespace().nth(2).unwrap_or_default().to_owned())
    };
    assert_eq!(exposure("mcp__fx__add").as_deref(), Some("deferred"), "{out}");
    assert!(out.contains("tools deferred: tool search is on"), "{out}");
    let json = env.run(&config).args(["tools", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&json);
    let add = value["exposure"]["tools"].as_array().unwrap().iter().find(|t| t["name"] == "mcp__fx__add").unwrap();
    assert_eq!(add["state"], "deferred");
    assert_eq!(add["reason"]["kind"], "search_on");
    // A per-tool budget hides what is over it, with a warning naming the tool and its size.
    let text = format!("tool_budget = 100\n{POLICY}");
    let config = env.write("budget.toml", &text);
    let assert = env.run(&config).arg("tools").assert().success();
    let err = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(err.contains("tool \"add\" of server \"fx\"") && err.contains("per-tool budget (100 bytes)"), "{err}");
}

#[test]
fn call_echo_with_yes() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    env.run(&config)
        .args(["call", "mcp__fx__echo", "--args", r#"{"text":"hi"}"#, "--yes"])
        .assert()
        .code(0)
        .stdout("hi\n");
}

#[test]
fn call_allowed_tool_needs_no_yes_and_json_prints_the_raw_result() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    let out = env
        .run(&config)
        .args(["call", "mcp__fx__add", "--args", r#"{"a":2,"b":3}"#, "--json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    assert_eq!(json_of(&out), serde_json::json!({"content": [{"type": "text", "text": "5"}]}));
}

#[test]
fn call_needing_confirmation_without_a_terminal_is_refused() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    env.run(&config)
        .args(["call", "mcp__fx__echo", "--args", r#"{"text":"hi"}"#])
        .assert()
        .code(2)
        .stdout("")
        .stderr(predicate::str::contains("needs confirmation").and(predicate::str::contains("--yes")));
}

#[test]
fn call_of_a_denied_tool_is_refused_naming_the_rule() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    env.run(&config).args(["call", "mcp__fx__crash", "--yes"]).assert().code(2).stderr(
        predicate::str::contains(r#"is denied by policy rule 1 (server "fx", tool "crash")"#)
            .and(predicate::str::contains("nothing was called")),
    );
}

#[test]
fn call_with_arguments_the_schema_refuses() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    env.run(&config).args(["call", "mcp__fx__echo", "--args", "{}", "--yes"]).assert().code(2).stderr(
        predicate::str::contains("do not match its input schema")
            .and(predicate::str::contains(r#"(top level): "text" is a required property"#)),
    );
    env.run(&config)
        .args(["call", "mcp__fx__add", "--args", r#"{"a":"one","b":2}"#])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("/a: "));
    env.run(&config)
        .args(["call", "mcp__fx__add", "--args", "{not json"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--args is not valid JSON"));
}

#[test]
fn call_of_an_unknown_tool_suggests_close_names() {
    let env = env();
    let config = env.write("config.toml", POLICY);
    env.run(&config)
        .args(["call", "mcp__fx__ecko", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(r#"unknown tool "mcp__fx__ecko"; did you mean mcp__fx__echo"#));
    // The raw tool name alone points to the model name.
    env.run(&config)
        .args(["call", "stderr", "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("did you mean mcp__fx__stderr"));
}

#[test]
fn call_whose_tool_reports_an_error_exits_1() {
    let env = env();
    let script = env.failing_tool_server();
    let config = env.write(
        "config.toml",
        &format!("[servers.sh]\ncommand = \"sh\"\nargs = [{:?}]\n[policy]\ndefault = \"allow\"\n", script.display()),
    );
    env.run(&config)
        .args(["call", "mcp__sh__fail"])
        .assert()
        .code(1)
        .stdout("it broke\n")
        .stderr(predicate::str::contains("mcp__sh__fail reported an error"));
}

#[test]
fn call_shows_structured_content_and_refuses_content_that_does_not_match_the_output_schema() {
    let env = env();
    let config = env.write(
        "config.toml",
        "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\", \"--structured\"]\n[policy]\ndefault = \"allow\"\n",
    );
    let out = env
        .run(&config)
        .args(["call", "mcp__fx__weather_quiet", "--json"])
        .assert()
        .code(0)
        .get_output()
        .stdout
        .clone();
    let good = serde_json::json!({"temperature": 22.5, "conditions": "sunny"});
    assert_eq!(json_of(&out), serde_json::json!({"content": [], "structuredContent": good}));
    env.run(&config)
        .args(["call", "mcp__fx__weather"])
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Sunny, 22.5 degrees.\nstructured content:\n{\n  \"temperature\": 22.5,"));
    env.run(&config)
        .args(["call", "mcp__fx__weather_bad"])
        .assert()
        .code(1)
        .stdout(predicate::str::contains(
            "the result of mcp__fx__weather_bad (tool \"weather_bad\" of server \"fx\") does not match the tool's \
             output schema, so it was discarded:\n- ",
        ))
        .stdout(predicate::str::contains("\n- /temperature: \"hot\" is not of type \"number\""))
        .stdout(predicate::str::contains("hot\n").not())
        .stderr(predicate::str::contains("mcp__fx__weather_bad reported an error"));
}

#[test]
fn call_to_a_server_that_dies_is_a_connection_error() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"crash\"]\n");
    env.run(&config)
        .args(["call", "mcp__fx__echo", "--args", r#"{"text":"x"}"#, "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(r#"calling tool "echo" of server "fx""#));
}

#[test]
fn tool_timeout_applies_to_calls() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\"]\ntool_timeout_s = 0.3\n");
    // The message names the 0.3 s timeout: the call did not run its 60 s to the end.
    env.run(&config)
        .args(["call", "mcp__fx__sleep", "--args", r#"{"ms":60000}"#, "--yes"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("got no answer within 300ms"));
}

#[test]
fn malformed_configuration_names_file_and_key() {
    let env = env();
    let config = env.write("config.toml", "[servers.git]\ncommand = \"git\"\nargs = \"--verbose\"\n");
    let expected = format!(
        "error: config error in {}: servers.git.args: invalid type: string \"--verbose\", expected an array of strings (line 3, column 8)\n",
        config.canonicalize().unwrap().display()
    );
    env.run(&config).arg("servers").assert().code(2).stdout("").stderr(expected);

    let config = env.write("both.toml", "[servers.git]\ncommand = \"git\"\nurl = \"https://x.invalid\"\n");
    env.run(&config)
        .arg("tools")
        .assert()
        .code(2)
        .stderr(predicate::str::contains("both.toml: servers.git: has both `command` and `url`"));

    let missing = env.config_dir.path().join("nope.toml");
    env.run(&missing).arg("servers").assert().code(2).stderr(predicate::str::contains("no configuration file at"));
}

#[test]
fn claude_desktop_json_works_unchanged() {
    let env = env();
    let config = env.write(
        "claude_desktop_config.json",
        r#"{"mcpServers": {"fx": {"command": "$FX", "args": ["echo"], "env": {"FIXTURE_VAR": "from-config"}}}}"#,
    );
    env.run(&config)
        .args(["call", "mcp__fx__env", "--args", r#"{"name":"FIXTURE_VAR"}"#, "--yes"])
        .assert()
        .code(0)
        .stdout("from-config\n");
}

#[test]
fn configuration_inside_the_working_directory_is_refused() {
    let env = env();
    let inside = env.work.path().join("config.toml");
    std::fs::write(&inside, format!("[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\n", env.fx)).unwrap();
    env.run(&inside).arg("servers").assert().code(2).stderr(
        predicate::str::contains("refusing to use the configuration")
            .and(predicate::str::contains("--allow-workspace-config")),
    );
    let refused = || {
        predicate::str::contains("refusing to use the configuration")
            .and(predicate::str::contains(inside.canonicalize().unwrap().display().to_string()))
    };
    // A relative path is the same file.
    env.run(Path::new("config.toml")).arg("servers").assert().code(2).stdout("").stderr(refused());
    // Through the environment variable too.
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
    cmd.current_dir(env.work.path())
        .env("MCP_HARNESS_DATA_DIR", env.data.path())
        .env("MCP_HARNESS_CONFIG", &inside)
        .arg("servers")
        .assert()
        .code(2)
        .stdout("")
        .stderr(refused());
    // The escape hatch.
    env.run(&inside)
        .args(["--allow-workspace-config", "servers"])
        .assert()
        .success()
        .stdout(predicate::str::contains("connected"));
}

#[test]
fn config_from_the_environment_variable() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\"]\n");
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
    cmd.current_dir(env.work.path())
        .env("MCP_HARNESS_DATA_DIR", env.data.path())
        .env("MCP_HARNESS_CONFIG", &config)
        .args(["servers", "--json"])
        .assert()
        .success()
        .stdout(predicate::str::contains("\"connected\""));
}

#[test]
fn default_location_is_the_user_config_dir() {
    let env = env();
    let dir = env.config_dir.path().join("mcp-harness");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config.toml"), format!("[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\n", env.fx))
        .unwrap();
    let mut cmd = assert_cmd::cargo::cargo_bin_cmd!("mcp-harness");
    cmd.current_dir(env.work.path())
        .env("MCP_HARNESS_DATA_DIR", env.data.path())
        .env_remove("MCP_HARNESS_CONFIG")
        .env("XDG_CONFIG_HOME", env.config_dir.path())
        .arg("servers")
        .assert()
        .success()
        .stdout(predicate::str::contains("fx      connected"));
}

/// A server that declares only resources and prompts (the fixture's `content` mode), one with
/// tools only, and one that cannot start.
const CONTENT: &str = r#"
[servers.docs]
command = "$FX"
args = ["content", "--page-size", "2"]

[servers.fx]
command = "$FX"
args = ["echo"]

[servers.gone]
command = "/nonexistent/mcp-server"
"#;

fn assert_terminal_safe(out: &[u8]) -> String {
    let text = String::from_utf8(out.to_vec()).unwrap();
    let stripped: Vec<char> = text.chars().filter(|c| mcp_safety::text::is_stripped(*c)).collect();
    assert!(stripped.is_empty(), "terminal controls {stripped:?} in {text:?}");
    text
}

#[test]
fn a_server_without_tools_is_connected_with_none() {
    let env = env();
    let config = env.write("config.toml", CONTENT);
    let out = env.run(&config).arg("servers").assert().success().get_output().stdout.clone();
    let text = String::from_utf8(out).unwrap();
    let docs = text.lines().find(|l| l.starts_with("docs")).unwrap_or_else(|| panic!("{text}"));
    let fields: Vec<&str> = docs.split_whitespace().collect();
    assert_eq!(&fields[..4], ["docs", "connected", "2025-11-25", "0/0"], "{text}");
}

#[test]
fn resources_lists_resources_and_templates_of_every_server() {
    let env = env();
    let config = env.write("config.toml", CONTENT);
    let assert = env.run(&config).arg("resources").assert().success();
    let text = assert_terminal_safe(&assert.get_output().stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["SERVER", "URI", "MIME", "DESCRIPTION"]);
    // All pages (the fixture pages by two), in the server's order; the tools-only server has none.
    let uris: Vec<&str> = lines[1..5].iter().map(|l| l.split_whitespace().nth(1).unwrap()).collect();
    assert_eq!(uris, ["fixture://readme", "fixture://logo.png", "fixture://hostile", "fixture://big"], "{text}");
    assert!(lines[1].ends_with("A short text."), "{text}");
    assert!(lines[3].contains("HOSTILE<"), "{text}");
    assert_eq!(lines[5], "");
    assert!(lines[6].starts_with("SERVER") && lines[6].contains("TEMPLATE"), "{text}");
    assert!(lines[7].starts_with("docs") && lines[7].contains("fixture://notes/{name}"), "{text}");
    let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
    assert!(stderr.contains("warning: server \"gone\" is unavailable, its resources are left out"), "{stderr}");

    let out = env.run(&config).args(["resources", "--json"]).assert().success().get_output().stdout.clone();
    let value = json_of(&out);
    let resources = value["resources"].as_array().unwrap();
    assert_eq!(resources.len(), 4);
    assert_eq!(resources[1]["server"], "docs");
    assert_eq!(resources[1]["uri"], "fixture://logo.png");
    assert_eq!(resources[1]["mimeType"], "image/png");
    assert_eq!(value["templates"][0]["uriTemplate"], "fixture://notes/{name}");
    // The exact description, escaped for the terminal by the JSON itself.
    let hostile = resources[2]["description"].as_str().unwrap();
    assert!(hostile.contains("\u{1b}]52;") && hostile.contains('\u{202e}'), "{hostile:?}");
    assert_eq!(value["diagnostics"][0]["server"], "gone");
    assert_eq!(value["diagnostics"][0]["kind"], "server_unavailable");
}

#[test]
fn read_prints_text_summarizes_blobs_and_json_keeps_the_exact_text() {
    let env = env();
    let config = env.write("config.toml", CONTENT);
    env.run(&config)
        .args(["read", "docs", "fixture://readme"])
        .assert()
        .success()
        .stdout("Fixture readme.\nSecond line.\n");
    env.run(&config).args(["read", "docs", "fixture://notes/today"]).assert().success().stdout("Note today.\n");
    env.run(&config)
        .args(["read", "docs", "fixture://logo.png"])
        .assert()
        .success()
        .stdout("[binary: image/png, 12 bytes of base64; --json has them]\n");
    let out = env.run(&config).args(["read", "docs", "fixture://logo.png", "--json"]).assert().success();
    let value = json_of(&out.get_output().stdout);
    assert_eq!(value["contents"][0]["blob"], "iVBORw0KGgo=");

    let out = env.run(&config).args(["read", "docs", "fixture://hostile"]).assert().success();
    let text = assert_terminal_safe(&out.get_output().stdout);
    assert!(text.starts_with("HOSTILE<") && text.ends_with(">END\n"), "{text:?}");
    let out = env.run(&config).args(["read", "docs", "fixture://hostile", "--json"]).assert().success();
    assert_terminal_safe(&out.get_output().stdout);
    let exact = json_of(&out.get_output().stdout)["contents"][0]["text"].as_str().unwrap().to_owned();
    assert!(exact.contains("\u{1b}]52;") && exact.contains('\r') && exact.contains('\u{9b}'), "{exact:?}");

    // What went wrong, and where.
    env.run(&config).args(["read", "docs", "fixture://nope"]).assert().code(2).stderr(
        predicate::str::contains("reading \"fixture://nope\" from server \"docs\"")
            .and(predicate::str::contains("Resource not found")),
    );
    env.run(&config)
        .args(["read", "fx", "fixture://readme"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("does not offer resources"));
    env.run(&config).args(["read", "nope", "fixture://readme"]).assert().code(2).stderr(
        predicate::str::contains("no server is named \"nope\"")
            .and(predicate::str::contains("\"docs\", \"fx\", \"gone\"")),
    );
    env.run(&config)
        .args(["read", "gone", "fixture://readme"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("server \"gone\" is not available: failed"));
}

#[test]
fn read_obeys_the_resource_rules_of_the_policy() {
    let env = env();
    let rules = r#"
[[policy.resources]]
server = "docs"
uri = "fixture://notes/*"
decision = "deny"

[[policy.resources]]
server = "d*"
uri = "fixture://readme"
decision = "confirm"
"#;
    let config = env.write("config.toml", &format!("{CONTENT}{rules}"));
    env.run(&config).args(["read", "docs", "fixture://notes/secret"]).assert().code(2).stdout("").stderr(
        predicate::str::contains(
            r#"reading "fixture://notes/secret" of server "docs" is denied by policy resource rule 0 (server "docs", uri "fixture://notes/*"); nothing was read"#,
        ),
    );
    // No terminal to ask on: refused, saying how to approve it.
    env.run(&config).args(["read", "docs", "fixture://readme"]).assert().code(2).stdout("").stderr(
        predicate::str::contains("needs confirmation (confirm by resource rule 1")
            .and(predicate::str::contains("--yes")),
    );
    env.run(&config)
        .args(["read", "docs", "fixture://readme", "--yes"])
        .assert()
        .success()
        .stdout("Fixture readme.\nSecond line.\n");
    // No rule: no restriction.
    env.run(&config).args(["read", "docs", "fixture://logo.png", "--json"]).assert().success();
    // A bad pattern names its key.
    let bad = env.write("bad.toml", "[[policy.resources]]\nserver = \"docs\"\nuri = \"a{b}\"\ndecision = \"deny\"\n");
    env.run(&bad)
        .args(["read", "docs", "x"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("policy.resources[0].uri").and(predicate::str::contains("invalid pattern")));
}

#[test]
fn prompts_lists_arguments_and_prompt_prints_the_messages() {
    let env = env();
    let config = env.write("config.toml", CONTENT);
    let out = env.run(&config).arg("prompts").assert().success();
    let text = assert_terminal_safe(&out.get_output().stdout);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines[0].split_whitespace().collect::<Vec<_>>(), ["SERVER", "PROMPT", "ARGUMENTS", "DESCRIPTION"]);
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["docs", "greet", "name", "style?", "Greet", "someone."]
    );
    assert_eq!(lines[2].split_whitespace().take(3).collect::<Vec<_>>(), ["docs", "review", "code"]);
    assert!(lines[3].starts_with("docs") && lines[3].contains("HOSTILE<"), "{text}");
    assert_eq!(lines.len(), 4, "{text}");
    let out = env.run(&config).args(["prompts", "--json"]).assert().success();
    let value = json_of(&out.get_output().stdout);
    assert_eq!(value["prompts"][0]["server"], "docs");
    assert_eq!(value["prompts"][0]["arguments"][0]["required"], true);

    env.run(&config)
        .args(["prompt", "docs", "greet", "--arg", "name=Ada", "--arg", "style=formal"])
        .assert()
        .success()
        .stdout("# A greeting.\n\n[user]\nGreet Ada, formal.\n");
    env.run(&config)
        .args(["prompt", "docs", "review", "--arg", "code=fn f() {}"])
        .assert()
        .success()
        .stdout("[user]\nReview this code:\nfn f() {}\n\n[assistant]\nWhat should I look for?\n");
    let out = env.run(&config).args(["prompt", "docs", "greet", "--arg", "name=Ada", "--json"]).assert().success();
    let value = json_of(&out.get_output().stdout);
    assert_eq!(value["messages"][0]["content"]["text"], "Greet Ada, casual.");
    let out = env.run(&config).args(["prompt", "docs", "hostile"]).assert().success();
    let text = assert_terminal_safe(&out.get_output().stdout);
    assert!(text.starts_with("[user]\nHOSTILE<") && text.ends_with(">END\n"), "{text:?}");

    env.run(&config).args(["prompt", "docs", "greet"]).assert().code(2).stderr(
        predicate::str::contains("getting prompt \"greet\" from server \"docs\"")
            .and(predicate::str::contains("needs the argument \"name\"")),
    );
    env.run(&config)
        .args(["prompt", "docs", "greet", "--arg", "name"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("--arg \"name\" is not KEY=VALUE"));
}

/// What a server answered is remembered: the next start sends `initialize` without the
/// `server/discover` probe first; an edited entry is probed again; a remembered file that is
/// garbage, too large or wrong never keeps a server from connecting.
#[test]
fn a_remembered_era_skips_the_discover_probe_until_the_entry_changes() {
    let env = env();
    let log = env.config_dir.path().join("received.log");
    let entry = |extra: &str| {
        format!(
            "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\", \"--log\", {:?}{extra}]\nsandbox = \"off\"\n",
            log.display().to_string()
        )
    };
    let config = env.write("config.toml", &entry(""));
    let eras = env.data.path().join("eras.json");
    let received = |method: &str| {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        text.lines().filter(|l| l.contains(&format!("\"method\":\"{method}\""))).count()
    };
    let connected = |config: &Path| {
        let out = env.run(config).args(["servers", "--json"]).assert().success().get_output().stdout.clone();
        let json = json_of(&out);
        assert_eq!(json["servers"][0]["state"], "connected", "{json}");
        assert_eq!(json["servers"][0]["protocol"], "2025-11-25", "{json}");
    };
    connected(&config);
    assert_eq!((received("server/discover"), received("initialize")), (1, 1), "the first start probes");
    let remembered = std::fs::read_to_string(&eras).unwrap();
    assert!(
        remembered.contains("2025-11-25") && !remembered.contains("echo"),
        "only a hash and the answer: {remembered}"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&eras).unwrap().permissions().mode() & 0o777, 0o600);
    }
    connected(&config);
    assert_eq!((received("server/discover"), received("initialize")), (1, 2), "remembered: no probe");
    // An edited entry (another argument) may answer otherwise: probed again, then remembered.
    let edited = env.write("config.toml", &entry(", \"--marker\", \"edited\""));
    connected(&edited);
    assert_eq!(received("server/discover"), 2, "an edited entry is probed again");
    connected(&edited);
    assert_eq!(received("server/discover"), 2);
    // Garbage, and a file too large to read: the server connects, probed, and the file is
    // written afresh.
    for junk in ["not json".to_owned(), format!("{{\"servers\": {{}}, \"pad\": \"{}\"}}", "x".repeat(70_000))] {
        std::fs::write(&eras, junk).unwrap();
        let before = received("server/discover");
        connected(&edited);
        assert_eq!(received("server/discover"), before + 1);
        assert!(serde_json::from_str::<Value>(&std::fs::read_to_string(&eras).unwrap()).is_ok());
    }
    // A remembered answer that is wrong (2026-07-28 for a server of the handshake era) only
    // changes what is tried first.
    let text = std::fs::read_to_string(&eras).unwrap().replace("2025-11-25", "2026-07-28");
    std::fs::write(&eras, text).unwrap();
    connected(&edited);
    assert!(std::fs::read_to_string(&eras).unwrap().contains("2025-11-25"), "the answer replaces what was remembered");
}

/// A confined server's private temporary directory outlives a host that is killed (nothing in
/// it can run); the next host to start a confined server removes it. A live host's stays.
#[test]
fn a_killed_hosts_temporary_directories_are_removed_by_the_next_host() {
    let env = env();
    let tmp = tempfile::tempdir().unwrap();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\"]\n");
    let ours = || -> Vec<PathBuf> {
        let mut dirs: Vec<PathBuf> = std::fs::read_dir(tmp.path())
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with("mcp-sandbox-"))
            .collect();
        dirs.sort();
        dirs
    };
    let start_serve = || {
        std::process::Command::new(env!("CARGO_BIN_EXE_mcp-harness"))
            .current_dir(env.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", "error")
            .env("MCP_HARNESS_DATA_DIR", env.data.path())
            .env("TMPDIR", tmp.path())
            .arg("--config")
            .arg(&config)
            .arg("serve")
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap()
    };
    let wait_until = |what: &str, done: &dyn Fn(&[PathBuf]) -> bool| {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done(&ours()) {
            assert!(Instant::now() < deadline, "{what}: {:?}", ours());
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let mut killed = start_serve();
    wait_until("the first host's directory", &|dirs| dirs.len() == 1);
    let left = ours();
    killed.kill().unwrap();
    killed.wait().unwrap();
    assert_eq!(ours(), left, "a killed host cannot remove its server's directory");

    // The next host removes it when it makes its own.
    let mut live = start_serve();
    wait_until("the next host's directory, and not the killed one's", &|dirs| dirs.len() == 1 && dirs != left);
    let live_dir = ours();
    env.run(&config).env("TMPDIR", tmp.path()).arg("servers").assert().success();
    assert_eq!(ours(), live_dir, "a live host's is kept; `servers` removed its own");
    drop(live.stdin.take());
    live.wait().unwrap();
    assert_eq!(ours(), Vec::<PathBuf>::new(), "a host that ends removes its own");
}
