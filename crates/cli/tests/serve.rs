//! End-to-end tests of `mcp-harness serve`, the governed gateway, as another host runs it: the
//! binary over stdio (and `--http`), fronting the fixture server as real upstreams.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture is another package's binary).

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;

/// How long one answer may take (a server restarting included).
const ANSWER: Duration = Duration::from_secs(20);

struct Env {
    config_dir: TempDir,
    work: TempDir,
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
        let text = text.replace("$FX", &self.fx).replace("$DIR", &self.config_dir.path().display().to_string());
        std::fs::write(&path, text).unwrap();
        path
    }

    fn serve(&self, config: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-harness"));
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            // SERVE_TEST_LOG=debug shows serve's log when a test fails.
            .env("RUST_LOG", std::env::var("SERVE_TEST_LOG").unwrap_or_else(|_| "error".to_owned()))
            .env("MCP_HARNESS_DATA_DIR", self.data.path())
            .arg("--config")
            .arg(config)
            .arg("serve")
            .args(args);
        cmd
    }
}

/// Two fixture upstreams (`fx` and `two`), one that cannot start (`gone`); `two`'s `crash` is
/// denied.
const TWO_UPSTREAMS: &str = r#"
[servers.fx]
command = "$FX"
args = ["echo"]

[servers.two]
command = "$FX"
args = ["echo", "--tag-pid"]

[servers.gone]
command = "/nonexistent/mcp-server"

[policy]
default = "allow"

[[policy.rules]]
server = "two"
tool = "crash"
decision = "deny"
"#;

/// A downstream client of `serve` over stdio: lines out, lines in (read on a thread).
struct StdioClient {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: mpsc::Receiver<Value>,
    /// Notifications received while waiting for answers.
    notifications: Vec<Value>,
    next_id: u64,
}

impl StdioClient {
    fn start(mut cmd: Command) -> Self {
        let mut child = cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::inherit()).spawn().unwrap();
        let stdout = child.stdout.take().unwrap();
        let (tx, lines) = mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { return };
                let value: Value = serde_json::from_str(&line)
                    .unwrap_or_else(|e| panic!("serve wrote a line that is not JSON ({e}): {line}"));
                if tx.send(value).is_err() {
                    return;
                }
            }
        });
        let stdin = child.stdin.take();
        Self { child, stdin, lines, notifications: Vec::new(), next_id: 0 }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().unwrap();
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// Sends a request and waits for its answer (notifications are kept).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.lines.recv_timeout(left).unwrap_or_else(|e| panic!("no answer to {method} ({e})"));
            if message.get("id") == Some(&json!(id)) {
                return message;
            }
            assert!(message.get("method").is_some(), "an answer to no request of ours: {message}");
            self.notifications.push(message);
        }
    }

    fn initialize(&mut self) -> Value {
        self.initialize_with(json!({}))
    }

    /// The handshake, declaring `capabilities`.
    fn initialize_with(&mut self, capabilities: Value) -> Value {
        let answer = self.request(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": capabilities,
                "clientInfo": {"name": "test", "version": "1"}}),
        );
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        answer
    }

    fn tool_names(&mut self) -> Vec<String> {
        let answer = self.request("tools/list", json!({}));
        let tools = answer["result"]["tools"].as_array().unwrap_or_else(|| panic!("{answer}"));
        tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect()
    }

    fn call(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Waits until a notification `method` arrives (or was received already); drops it.
    fn wait_notification(&mut self, method: &str) {
        if let Some(at) = self.notifications.iter().position(|n| n["method"] == method) {
            self.notifications.remove(at);
            return;
        }
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.lines.recv_timeout(left).unwrap_or_else(|e| panic!("no {method} ({e})"));
            if message["method"] == method {
                return;
            }
            self.notifications.push(message);
        }
    }

    /// Ends the input and waits for `serve` to exit; its status.
    fn finish(mut self) -> std::process::ExitStatus {
        drop(self.stdin.take());
        let deadline = Instant::now() + ANSWER;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "serve did not exit at the end of its input");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for StdioClient {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn text_of(answer: &Value) -> String {
    let content = answer["result"]["content"].as_array().unwrap_or_else(|| panic!("not a tool result: {answer}"));
    content.iter().filter_map(|c| c["text"].as_str()).collect::<Vec<_>>().join("")
}

fn is_error(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
}

#[test]
fn serve_over_stdio_lists_calls_and_hides_denied_tools() {
    let env = env();
    let config = env.write("config.toml", TWO_UPSTREAMS);
    let mut client = StdioClient::start(env.serve(&config, &[]));
    // `gone` cannot start: initialize is answered all the same.
    let init = client.initialize();
    assert_eq!(init["result"]["serverInfo"]["name"], "mcp-harness", "{init}");
    assert_eq!(init["result"]["capabilities"]["tools"]["listChanged"], true, "{init}");
    let names = client.tool_names();
    for expected in ["fx__echo", "fx__crash", "two__echo", "two__add"] {
        assert!(names.iter().any(|n| n == expected), "{expected} missing from {names:?}");
    }
    assert!(!names.iter().any(|n| n == "two__crash"), "a denied tool is listed: {names:?}");
    assert!(!names.iter().any(|n| n.starts_with("gone__")), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("fx__") || n.starts_with("two__")), "{names:?}");

    let echoed = client.call("fx__echo", json!({"text": "through the gateway"}));
    assert!(!is_error(&echoed), "{echoed}");
    assert_eq!(text_of(&echoed), "through the gateway");
    let added = client.call("two__add", json!({"a": 2, "b": 3}));
    assert_eq!(text_of(&added), "5", "{added}");

    // A denied tool is answered as an unknown one, and never reaches its server (which would
    // exit: the next call shows it is still the same process).
    let pid = text_of(&client.call("two__whoami", json!({})));
    let denied = client.call("two__crash", json!({}));
    let message = denied["error"]["message"].as_str().unwrap_or_else(|| panic!("{denied}"));
    assert!(message.contains("Unknown tool: two__crash"), "{denied}");
    assert_eq!(text_of(&client.call("two__whoami", json!({}))), pid);

    // Arguments are checked against the schema the client was shown.
    let bad = client.call("fx__add", json!({"a": "two"}));
    assert!(is_error(&bad), "{bad}");
    assert!(client.finish().success());
}

/// `serve` drives its stdin and stdout pipes non-blocking while it runs, and gives them back as
/// it found them: whoever shares them afterwards (here the test, holding the same pipes) sees
/// blocking descriptors again.
#[test]
fn serve_over_stdio_puts_its_pipes_flags_back_when_it_ends() {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    use std::os::fd::AsFd;
    let nonblocking = |fd: std::os::fd::BorrowedFd<'_>| {
        OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL).unwrap()).contains(OFlag::O_NONBLOCK)
    };
    let env = env();
    let config = env.write("config.toml", TWO_UPSTREAMS);
    let (input, mut to_serve) = std::io::pipe().unwrap();
    let (mut from_serve, output) = std::io::pipe().unwrap();
    let mut cmd = env.serve(&config, &[]);
    cmd.stdin(input.try_clone().unwrap()).stdout(output.try_clone().unwrap()).stderr(Stdio::inherit());
    let mut child = cmd.spawn().unwrap();
    writeln!(
        to_serve,
        "{}",
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}})
    )
    .unwrap();
    let mut line = String::new();
    BufReader::new(&mut from_serve).read_line(&mut line).unwrap();
    assert!(line.contains("\"protocolVersion\""), "{line}");
    // Answering, serve holds them non-blocking (the same open pipes as the test's ends).
    assert!(nonblocking(input.as_fd()) && nonblocking(output.as_fd()));
    drop(to_serve);
    assert!(child.wait().unwrap().success());
    assert!(!nonblocking(input.as_fd()), "stdin left non-blocking");
    assert!(!nonblocking(output.as_fd()), "stdout left non-blocking");
}

#[test]
fn serve_transparent_offers_the_one_servers_names_and_capabilities() {
    let env = env();
    let config = env.write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\", \"--instructions\", \"Be brief.\"]\n\n[policy]\ndefault = \"allow\"\n");
    let mut client = StdioClient::start(env.serve(&config, &["--transparent"]));
    let init = client.initialize();
    assert_eq!(init["result"]["instructions"], "Be brief.", "{init}");
    // The fixture's echo mode declares tools only: no prompts nor resources are claimed.
    let capabilities = &init["result"]["capabilities"];
    assert!(capabilities["tools"].is_object() && capabilities["prompts"].is_null(), "{init}");
    let names = client.tool_names();
    assert!(names.iter().any(|n| n == "echo") && names.iter().all(|n| !n.contains("__")), "{names:?}");
    let echoed = client.call("echo", json!({"text": "as it is"}));
    assert_eq!(text_of(&echoed), "as it is", "{echoed}");
    assert!(client.finish().success());
}

#[test]
fn serve_transparent_needs_exactly_one_server() {
    let env = env();
    let config = env.write("config.toml", TWO_UPSTREAMS);
    let out = env.serve(&config, &["--transparent"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs exactly one enabled server") && stderr.contains("fx, gone, two"), "{stderr}");
    assert!(out.stdout.is_empty(), "stdout is the protocol: {}", String::from_utf8_lossy(&out.stdout));
}

#[test]
fn a_crashed_upstream_vanishes_is_announced_and_comes_back_while_the_other_keeps_working() {
    let env = env();
    // `fx` starts at once the first time and takes two seconds to come back after a crash:
    // long enough to list while it is away. (Unconfined: its marker is written beside the
    // configuration, which the sandbox protects.)
    let config = env.write(
        "config.toml",
        r#"
[servers.fx]
command = "sh"
args = ["-c", "if [ -e '$DIR/started' ]; then sleep 2; fi; touch '$DIR/started'; exec '$FX' echo --tag-pid"]
sandbox = "off"

[servers.two]
command = "$FX"
args = ["echo"]

[policy]
default = "allow"
"#,
    );
    let mut client = StdioClient::start(env.serve(&config, &[]));
    client.initialize();
    let names = client.tool_names();
    assert!(names.iter().any(|n| n == "fx__echo") && names.iter().any(|n| n == "two__echo"), "{names:?}");
    let before = text_of(&client.call("fx__whoami", json!({})));

    // The call that kills its server gets an error result; the session goes on.
    let crashed = client.call("fx__crash", json!({}));
    assert!(is_error(&crashed), "{crashed}");
    client.wait_notification("notifications/tools/list_changed");
    let away = client.tool_names();
    assert!(!away.iter().any(|n| n.starts_with("fx__")), "a crashed server's tools are still listed: {away:?}");
    assert!(away.iter().any(|n| n == "two__echo"), "{away:?}");
    let other = client.call("two__echo", json!({"text": "still here"}));
    assert_eq!(text_of(&other), "still here", "{other}");

    // It is restarted, announced again, and reached by the next call.
    let deadline = Instant::now() + ANSWER;
    loop {
        client.wait_notification("notifications/tools/list_changed");
        if client.tool_names().iter().any(|n| n == "fx__echo") {
            break;
        }
        assert!(Instant::now() < deadline, "the crashed server did not come back");
    }
    let after = text_of(&client.call("fx__whoami", json!({})));
    assert!(after.starts_with("pid ") && after != before, "{before} / {after}");
    assert!(client.finish().success());
}

#[test]
fn listings_are_served_from_the_published_pool_without_asking_upstreams() {
    let env = env();
    // The fixture logs every line it receives (unconfined: the log is beside the configuration).
    let config = env.write(
        "config.toml",
        "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\", \"--log\", \"$DIR/fx.log\"]\nsandbox = \"off\"\n",
    );
    let mut client = StdioClient::start(env.serve(&config, &[]));
    client.initialize();
    for _ in 0..5 {
        assert!(client.tool_names().iter().any(|n| n == "fx__echo"));
    }
    assert!(client.finish().success());
    let log = std::fs::read_to_string(env.config_dir.path().join("fx.log")).unwrap();
    let listed = log.lines().filter(|l| l.contains("\"tools/list\"")).count();
    assert_eq!(listed, 1, "five listings downstream asked the upstream {listed} times:\n{log}");
}

#[test]
fn a_hung_upstream_delays_initialize_at_most_the_startup_wait() {
    let env = env();
    let config = env.write(
        "config.toml",
        r#"
[serve]
startup_wait_s = 3

[servers.fx]
command = "$FX"
args = ["echo"]

[servers.hung]
command = "sh"
args = ["-c", "sleep 300"]

[policy]
default = "allow"
"#,
    );
    let mut client = StdioClient::start(env.serve(&config, &[]));
    let started = Instant::now();
    let init = client.initialize();
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    assert!(started.elapsed() < Duration::from_secs(10), "initialize took {:?}", started.elapsed());
    let names = client.tool_names();
    assert!(names.iter().any(|n| n == "fx__echo") && !names.iter().any(|n| n.starts_with("hung__")), "{names:?}");
    assert_eq!(text_of(&client.call("fx__echo", json!({"text": "not waiting"}))), "not waiting");
    // The end of input closes the hung server too.
    assert!(client.finish().success());
}

#[test]
fn servers_and_policy_edited_in_the_file_while_a_client_is_connected_are_announced_and_applied() {
    let env = env();
    let one = "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\"]\n\n[policy]\ndefault = \"allow\"\n";
    let config = env.write("config.toml", one);
    let mut client = StdioClient::start(env.serve(&config, &[]));
    client.initialize();
    let names = client.tool_names();
    assert!(names.iter().all(|n| n.starts_with("fx__")), "{names:?}");
    // The file gains a server (written aside and renamed over, as editors save).
    let two = format!("{one}\n[servers.more]\ncommand = \"$FX\"\nargs = [\"echo\"]\n");
    let aside = env.write("config.toml.new", &two);
    std::fs::rename(aside, &config).unwrap();
    let deadline = Instant::now() + ANSWER;
    loop {
        client.wait_notification("notifications/tools/list_changed");
        if client.tool_names().iter().any(|n| n == "more__echo") {
            break;
        }
        assert!(Instant::now() < deadline, "the added server was never offered");
    }
    let echoed = client.call("more__echo", json!({"text": "new here"}));
    assert_eq!(text_of(&echoed), "new here", "{echoed}");
    // Names of the servers already there did not change.
    assert_eq!(text_of(&client.call("fx__echo", json!({"text": "same"}))), "same");

    // A policy edit applies too: a tool denied now is withdrawn and cannot be called.
    let denied = format!("{two}\n[[policy.rules]]\nserver = \"fx\"\ntool = \"echo\"\ndecision = \"deny\"\n");
    let aside = env.write("config.toml.new", &denied);
    std::fs::rename(aside, &config).unwrap();
    let deadline = Instant::now() + ANSWER;
    loop {
        client.wait_notification("notifications/tools/list_changed");
        if !client.tool_names().iter().any(|n| n == "fx__echo") {
            break;
        }
        assert!(Instant::now() < deadline, "the denied tool is still listed");
    }
    let refused = client.call("fx__echo", json!({"text": "no"}));
    assert!(refused["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown tool: fx__echo")), "{refused}");
    assert!(client.finish().success());
}

#[tokio::test]
async fn serve_over_http_lists_and_calls() {
    let env = env();
    let config = env.write("config.toml", TWO_UPSTREAMS);
    let mut child = tokio::process::Command::from(env.serve(&config, &["--http", "127.0.0.1:0"]))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut lines = tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr));
    let url = tokio::time::timeout(ANSWER, async {
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_owned();
            }
        }
        panic!("serve --http ended without listening");
    })
    .await
    .unwrap();
    assert!(url.starts_with("http://127.0.0.1:") && url.ends_with("/mcp"), "{url}");

    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<String>| {
        let mut request = http
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-06-18");
        }
        request.send()
    };
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let answer = post(init, None).await.unwrap();
    assert!(answer.status().is_success(), "{}", answer.status());
    let session = answer.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(initialized, Some(session.clone())).await.unwrap().status(), 202);

    let list = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let listed = body_json(post(list, Some(session.clone())).await.unwrap()).await;
    let names: Vec<&str> =
        listed["result"]["tools"].as_array().unwrap().iter().filter_map(|t| t["name"].as_str()).collect();
    assert!(names.contains(&"fx__echo") && names.contains(&"two__echo"), "{names:?}");
    assert!(!names.contains(&"two__crash"), "{names:?}");

    let call = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
        "params": {"name": "two__echo", "arguments": {"text": "over http"}}});
    let called = body_json(post(call, Some(session.clone())).await.unwrap()).await;
    assert_eq!(text_of(&called), "over http", "{called}");
    let denied = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "two__crash"}});
    let denied = body_json(post(denied, Some(session)).await.unwrap()).await;
    assert!(denied["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown tool")), "{denied}");

    // DNS rebinding: another Host is refused.
    let rebound = http
        .post(&url)
        .header("host", "evil.example.com")
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(rebound.status(), 403);

    // SIGTERM drains (nothing is in flight), closes the servers and ends serve with 0
    // (`serve_gateway.rs` drains a call in flight).
    let pid = child.id().unwrap();
    let _ = std::process::Command::new("kill").args(["-TERM", &pid.to_string()]).status();
    let status = tokio::time::timeout(ANSWER, child.wait()).await.unwrap().unwrap();
    assert_eq!(status.code(), Some(0));
}

/// A JSON answer, or the one JSON-RPC message of an SSE answer.
async fn body_json(response: reqwest::Response) -> Value {
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    let text = response.text().await.unwrap();
    if !sse {
        return serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some())
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

#[test]
fn serve_http_refuses_a_non_loopback_address_without_authentication() {
    let env = env();
    let config = env.write("config.toml", TWO_UPSTREAMS);
    let out = env.serve(&config, &["--http", "0.0.0.0:0"]).stdin(Stdio::null()).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("refusing to listen on 0.0.0.0:0 without inbound authentication"), "{stderr}");
}

/// `[serve] code_mode = "on"`: two upstreams, `two`'s `crash` denied, `fx`'s `add` asks.
const CODE_MODE: &str = r#"
[serve]
code_mode = "on"

[servers.fx]
command = "$FX"
args = ["echo"]

[servers.two]
command = "$FX"
args = ["echo"]

[policy]
default = "allow"

[[policy.rules]]
server = "two"
tool = "crash"
decision = "deny"

[[policy.rules]]
server = "fx"
tool = "add"
decision = "confirm"
"#;

impl StdioClient {
    /// Sends a request and waits for its answer, answering each `elicitation/create` the
    /// server sends meanwhile with `decision` (and recording the form's message).
    fn request_deciding(&mut self, method: &str, params: Value, decision: &str, asked: &mut Vec<String>) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let deadline = Instant::now() + ANSWER;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let message = self.lines.recv_timeout(left).unwrap_or_else(|e| panic!("no answer to {method} ({e})"));
            if message.get("id") == Some(&json!(id)) && message.get("method").is_none() {
                return message;
            }
            if message["method"] == "elicitation/create" {
                asked.push(message["params"]["message"].as_str().unwrap_or_default().to_owned());
                let answer = json!({"action": "accept", "content": {"decision": decision}});
                self.send(&json!({"jsonrpc": "2.0", "id": message["id"], "result": answer}));
                continue;
            }
            assert!(message.get("method").is_some(), "an answer to no request of ours: {message}");
            self.notifications.push(message);
        }
    }
}

#[test]
fn serve_with_code_mode_offers_run_code_whose_scripts_call_through_the_gate() {
    let env = env();
    let config = env.write("config.toml", CODE_MODE);
    let mut client = StdioClient::start(env.serve(&config, &[]));
    let init = client.initialize_with(json!({"elicitation": {}}));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");

    // `run_code` is listed with the declarations of the tools a script reaches.
    let listed = client.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    let run_code = tools.iter().find(|t| t["name"] == "run_code").unwrap_or_else(|| panic!("{listed}"));
    let description = run_code["description"].as_str().unwrap();
    let two = description.split("namespace two").nth(1).unwrap_or_else(|| panic!("{description}"));
    assert!(description.contains("namespace fx") && two.contains("function add("), "{description}");
    assert!(!two.contains("function crash("), "a denied tool is declared: {description}");

    // A script calling two upstreams' tools returns the answer; the denied tool is absent from
    // its `tools`; the `confirm` tool asks this client, saying a script asks; so does an
    // upstream asking during a script's call.
    let script = r#"
        const echoed = await tools.fx.echo({ text: "hi" });
        const sum = await tools.two.add({ a: 2, b: 3 });
        const asked = await tools.fx.add({ a: 1, b: 1 });
        const named = await tools.two.ask_elicitation({});
        return { echoed, sum, asked, named, two: Object.keys(tools.two).sort(), crash: typeof tools.two.crash };
    "#;
    let mut asked = Vec::new();
    let ran = client.request_deciding(
        "tools/call",
        json!({"name": "run_code", "arguments": {"code": script}}),
        "yes",
        &mut asked,
    );
    assert!(!is_error(&ran), "{ran}");
    let value: Value = serde_json::from_str(&text_of(&ran)).unwrap_or_else(|e| panic!("{e}: {ran}"));
    assert_eq!(value["echoed"], "hi", "{value}");
    assert_eq!(value["sum"], "5", "{value}");
    assert_eq!(value["asked"], "2", "{value}");
    assert_eq!(value["crash"], "undefined", "{value}");
    let two: Vec<&str> = value["two"].as_array().unwrap().iter().filter_map(Value::as_str).collect();
    assert!(two.contains(&"add") && two.contains(&"echo") && !two.contains(&"crash"), "{two:?}");
    assert_eq!(asked.len(), 2, "{asked:?}");
    assert!(asked[0].contains("fx__add"), "{asked:?}");
    // An upstream's own question during a script's call reaches the script's client, and its
    // answer the upstream.
    assert_eq!(asked[1], "Your name?", "{asked:?}");
    assert!(value["named"].as_str().unwrap_or_default().contains(r#""decision":"yes""#), "{value}");

    // A refusal, and arguments that do not match the schema, are exceptions of their kind.
    let script = r#"
        let refused, bad;
        try { await tools.fx.add({ a: 1, b: 1 }); } catch (e) { refused = e.kind; }
        try { await tools.two.add({ a: "two" }); } catch (e) { bad = e.kind; }
        return [refused, bad];
    "#;
    let ran = client.request_deciding(
        "tools/call",
        json!({"name": "run_code", "arguments": {"code": script}}),
        "no",
        &mut asked,
    );
    assert_eq!(text_of(&ran), r#"["not_approved","bad_arguments"]"#, "{ran}");
    assert!(client.finish().success());
}

#[test]
fn serve_offers_no_run_code_unless_its_code_mode_is_on() {
    let env = env();
    // The agent's code mode (top level) does not turn on serve's.
    let config = env.write("config.toml", &format!("code_mode = \"on\"\n{TWO_UPSTREAMS}"));
    let mut client = StdioClient::start(env.serve(&config, &[]));
    client.initialize();
    let names = client.tool_names();
    assert!(names.iter().any(|n| n == "fx__echo") && !names.iter().any(|n| n == "run_code"), "{names:?}");
    assert!(client.finish().success());
}

#[test]
fn serve_with_tool_search_lists_search_tools_and_a_search_selects_tools_for_the_client() {
    let env = env();
    let config = env.write("config.toml", &format!("tool_search = \"on\"\n{TWO_UPSTREAMS}"));
    let mut client = StdioClient::start(env.serve(&config, &[]));
    client.initialize();
    assert_eq!(client.tool_names(), ["search_tools"]);
    let refused = client.call("fx__echo", json!({"text": "x"}));
    assert!(is_error(&refused) && text_of(&refused).contains("not loaded yet"), "{refused}");

    let found = client.call("search_tools", json!({"query": "select:fx__echo"}));
    assert!(!is_error(&found) && text_of(&found).contains("fx__echo"), "{found}");
    client.wait_notification("notifications/tools/list_changed");
    assert_eq!(client.tool_names(), ["fx__echo", "search_tools"]);
    let echoed = client.call("fx__echo", json!({"text": "found"}));
    assert_eq!(text_of(&echoed), "found", "{echoed}");

    // A denied tool is never found, nor callable.
    let denied = client.call("search_tools", json!({"query": "select:two__crash"}));
    assert!(text_of(&denied).contains("Not found"), "{denied}");
    let denied = client.call("search_tools", json!({"query": "crash", "limit": 25}));
    assert!(!text_of(&denied).contains("two__crash"), "{denied}");
    let called = client.call("two__crash", json!({}));
    assert!(called["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown tool")), "{called}");
    assert!(client.finish().success());
}

#[test]
fn serve_with_code_mode_and_tool_search_lets_a_script_search_and_call_what_it_found() {
    let env = env();
    let config = env.write("config.toml", &format!("tool_search = \"on\"\n{CODE_MODE}"));
    let mut client = StdioClient::start(env.serve(&config, &[]));
    client.initialize();
    assert_eq!(client.tool_names(), ["run_code", "search_tools"]);
    let listed = client.request("tools/list", json!({}));
    let tools = listed["result"]["tools"].as_array().unwrap();
    let run_code = tools.iter().find(|t| t["name"] == "run_code").unwrap_or_else(|| panic!("{listed}"));
    let description = run_code["description"].as_str().unwrap();
    // The deferred tools wait behind the script's search, as behind the client's.
    assert!(description.contains("function search(query: string"), "{description}");
    assert!(!description.contains("function echo("), "{description}");

    let script = r#"
        const before = typeof tools.fx;
        const found = (await tools.search("select:fx__echo,two__crash")).map(f => f.path);
        const echoed = await tools.fx.echo({ text: "found" });
        return { before, found, echoed, two: typeof tools.two };
    "#;
    let ran = client.call("run_code", json!({"code": script}));
    assert!(!is_error(&ran), "{ran}");
    let value: Value = serde_json::from_str(&text_of(&ran)).unwrap_or_else(|e| panic!("{e}: {ran}"));
    // Found and called in the same script; the denied tool is not found.
    assert_eq!(
        value,
        json!({"before": "undefined", "found": ["tools.fx.echo"], "echoed": "found", "two": "undefined"})
    );
    // What a script finds is not selected for the client.
    assert_eq!(client.tool_names(), ["run_code", "search_tools"]);
    assert!(client.finish().success());
}

/// Each call a script makes has its audit line (allowed, refused, rejected), naming the
/// client's `run_code` call as its parent, beside that call's own line.
#[test]
fn a_scripts_calls_each_have_their_audit_line() {
    let env = env();
    let config = env.write("config.toml", &format!("{CODE_MODE}\n[serve.audit]\npath = \"audit.jsonl\"\n"));
    let mut client = StdioClient::start(env.serve(&config, &[]));
    let init = client.initialize_with(json!({"elicitation": {}}));
    assert!(init["result"]["serverInfo"].is_object(), "{init}");
    let script = r#"
        const echoed = await tools.fx.echo({ text: "hi" });
        let refused, bad;
        try { await tools.fx.add({ a: 1, b: 1 }); } catch (e) { refused = e.kind; }
        try { await tools.two.add({ a: "two" }); } catch (e) { bad = e.kind; }
        return [echoed, refused, bad];
    "#;
    let mut asked = Vec::new();
    let ran = client.request_deciding(
        "tools/call",
        json!({"name": "run_code", "arguments": {"code": script}}),
        "no",
        &mut asked,
    );
    assert_eq!(text_of(&ran), r#"["hi","not_approved","bad_arguments"]"#, "{ran}");
    let call_id = ran["id"].to_string();
    assert!(client.finish().success());

    let text = std::fs::read_to_string(env.config_dir.path().join("audit.jsonl")).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let seen: Vec<(String, String, String, String)> = lines
        .iter()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            (field("tool"), field("decision"), field("outcome"), field("parent"))
        })
        .collect();
    let of_script =
        |tool: &str, decision: &str| (tool.to_owned(), decision.to_owned(), "tool_error".to_owned(), call_id.clone());
    assert_eq!(
        seen,
        [
            ("fx__echo".to_owned(), "allowed".to_owned(), "ok".to_owned(), call_id.clone()),
            of_script("fx__add", "refused"),
            of_script("two__add", "rejected"),
            ("run_code".to_owned(), "allowed".to_owned(), "ok".to_owned(), String::new()),
        ],
        "{text}"
    );
}
