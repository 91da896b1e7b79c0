//! End-to-end tests of what `[serve]` configures in `mcp-harness serve --http`: inbound
//! authentication, profiles, the audit log, rate limits, health probes, the drain on SIGTERM,
//! and replicas sharing a key file and a real `redis-server`. Each test runs the binary over a
//! real socket, fronting the fixture server as its upstreams.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture is another package's binary), and
//! `redis-server` on `PATH` (or `MCP_REDIS_SERVER`) for the replica test.

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::AsyncBufReadExt;
use tokio::process::{Child, Command};

// The store crate's real Redis for tests: one helper for both crates.
#[path = "../../mcp-gateway-store/tests/it/redis_server.rs"]
#[allow(dead_code, unreachable_pub)]
mod redis_server;

// The gateway's own test issuer (its keys, JWKS and tokens): one helper for both crates.
#[path = "../../mcp-gateway/tests/it/issuer.rs"]
#[allow(dead_code, unreachable_pub)]
mod issuer;
use issuer::{ISSUER, Issuer};

/// How long one answer may take (servers starting included).
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
    fn path(&self, name: &str) -> PathBuf {
        self.config_dir.path().join(name)
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.path(name);
        std::fs::write(&path, text.replace("$FX", &self.fx)).unwrap();
        path
    }

    fn command(&self, config: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::from(self.std_command(config, args));
        cmd.kill_on_drop(true);
        cmd
    }

    fn std_command(&self, config: &Path, args: &[&str]) -> std::process::Command {
        let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-harness"));
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("RUST_LOG", std::env::var("SERVE_TEST_LOG").unwrap_or_else(|_| "error".to_owned()))
            .env("MCP_HARNESS_DATA_DIR", self.data.path())
            .arg("--config")
            .arg(config)
            .arg("serve")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        cmd
    }

    /// `serve` as it refuses to start: its exit status and what it said.
    fn refused(&self, config: &Path, args: &[&str]) -> (Option<i32>, String) {
        let out = self.std_command(config, args).output().unwrap();
        (out.status.code(), String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

/// Two fixture upstreams; `two`'s `crash` is denied by the host's policy.
const UPSTREAMS: &str = r#"
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
"#;

/// A running `serve --http`: its base URL (`http://127.0.0.1:PORT`) and what it says on
/// stderr.
struct Served {
    child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

impl Served {
    async fn start(mut cmd: Command) -> Self {
        let mut child = cmd.spawn().unwrap();
        let stderr = child.stderr.take().unwrap();
        let mut lines = tokio::io::BufReader::new(stderr).lines();
        let said = Arc::new(Mutex::new(String::new()));
        let url = tokio::time::timeout(ANSWER, async {
            while let Some(line) = lines.next_line().await.unwrap() {
                said.lock().unwrap().push_str(&format!("{line}\n"));
                if let Some(url) = line.strip_prefix("listening on ") {
                    return url.to_owned();
                }
            }
            panic!("serve --http ended without listening: {}", said.lock().unwrap());
        })
        .await
        .unwrap();
        let keep = Arc::clone(&said);
        tokio::spawn(async move {
            while let Ok(Some(line)) = lines.next_line().await {
                keep.lock().unwrap().push_str(&format!("{line}\n"));
            }
        });
        // A wildcard address is reached on loopback.
        let url = url.replace("0.0.0.0", "127.0.0.1");
        let base = url.strip_suffix("/mcp").unwrap().to_owned();
        Self { child, base, stderr: said, http: reqwest::Client::new() }
    }

    fn said(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    async fn post(&self, path: &str, body: &Value, session: Option<&str>, token: Option<&str>) -> reqwest::Response {
        let mut request = self
            .http
            .post(format!("{}{path}", self.base))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body.to_string());
        if let Some(session) = session {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-06-18");
        }
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        request.send().await.unwrap()
    }

    async fn get(&self, path: &str) -> (u16, String) {
        let response = self.http.get(format!("{}{path}", self.base)).send().await.unwrap();
        let status = response.status().as_u16();
        (status, response.text().await.unwrap())
    }

    /// Opens a session at `path`; its id.
    async fn session(&self, path: &str, token: Option<&str>) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "gateway-test", "version": "1"}}});
        let answer = self.post(path, &init, None, token).await;
        assert!(answer.status().is_success(), "initialize at {path}: {}", answer.status());
        let session = answer.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        assert_eq!(self.post(path, &initialized, Some(&session), token).await.status(), 202);
        session
    }

    async fn request(&self, path: &str, session: &str, token: Option<&str>, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
        body_json(self.post(path, &body, Some(session), token).await).await
    }

    async fn tool_names(&self, path: &str, session: &str) -> Vec<String> {
        let listed = self.request(path, session, None, "tools/list", json!({})).await;
        listed["result"]["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    async fn call(&self, path: &str, session: &str, name: &str, arguments: Value) -> Value {
        self.request(path, session, None, "tools/call", json!({"name": name, "arguments": arguments})).await
    }

    fn signal(&self, name: &str) {
        let pid = self.child.id().unwrap().to_string();
        assert!(std::process::Command::new("kill").args([name, &pid]).status().unwrap().success());
    }

    async fn exit_code(&mut self, within: Duration) -> Option<i32> {
        tokio::time::timeout(within, self.child.wait()).await.expect("serve did not exit").unwrap().code()
    }
}

/// A JSON answer, or the one JSON-RPC answer of an SSE answer.
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

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn is_tool_error(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
}

#[tokio::test]
async fn bearer_tokens_from_a_variable_or_a_file_guard_serve_http_and_are_never_shown() {
    let env = env();
    std::fs::write(env.path("ops.token"), "file-s3cret-token\n").unwrap();
    // A token file must be private (one others may read is refused).
    std::fs::set_permissions(env.path("ops.token"), std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}\n[serve.auth]\ntokens = [{{ name = \"ci\", token_env = \"GATEWAY_TEST_TOKEN\" }}, \
             {{ name = \"ops\", token_file = \"ops.token\" }}]\n"
        ),
    );
    // With authentication, a non-loopback address is allowed.
    let mut cmd = env.command(&config, &["--http", "0.0.0.0:0"]);
    cmd.env("GATEWAY_TEST_TOKEN", "env-s3cret-token");
    let served = Served::start(cmd).await;

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let anonymous = served.post("/mcp", &init, None, None).await;
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers().get("www-authenticate").unwrap().to_str().unwrap().to_owned();
    assert!(challenge.starts_with("Bearer"), "{challenge}");
    let wrong = served.post("/mcp", &init, None, Some("not-the-token")).await;
    assert_eq!(wrong.status(), 401);
    assert!(wrong.headers().contains_key("www-authenticate"));

    for token in ["env-s3cret-token", "file-s3cret-token"] {
        let session = served.session("/mcp", Some(token)).await;
        let listed = served.request("/mcp", &session, Some(token), "tools/list", json!({})).await;
        assert!(listed["result"]["tools"].as_array().is_some_and(|t| !t.is_empty()), "{listed}");
        // The session is the token's: another token cannot use it.
        let other = if token.starts_with("env") { "file-s3cret-token" } else { "env-s3cret-token" };
        let body = json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"});
        let stolen = served.post("/mcp", &body, Some(&session), Some(other)).await;
        assert!(!stolen.status().is_success(), "{}", stolen.status());
    }

    // The probes need no token.
    assert_eq!(served.get("/healthz").await.0, 200);
    let deadline = Instant::now() + ANSWER;
    loop {
        let (status, text) = served.get("/readyz").await;
        if status == 200 {
            break;
        }
        assert!(Instant::now() < deadline, "never ready: {status} {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let said = served.said();
    assert!(!said.contains("s3cret"), "a token was shown: {said}");
}

/// The status of a ping in `session` as the holder of `token`.
async fn ping_status(served: &Served, session: &str, token: &str) -> u16 {
    let ping = json!({"jsonrpc": "2.0", "id": 3, "method": "ping"});
    served.post("/mcp", &ping, Some(session), Some(token)).await.status().as_u16()
}

#[tokio::test]
async fn the_session_limits_of_serve_evict_a_callers_own_least_recently_used_session() {
    let env = env();
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}\n[serve]\nmax_sessions = 3\nmax_sessions_per_caller = 1\n\n[serve.auth]\ntokens = [{{ name = \
             \"alice\", token_env = \"GATEWAY_TEST_ALICE\" }}, {{ name = \"bob\", token_env = \"GATEWAY_TEST_BOB\" }}]\n"
        ),
    );
    let mut cmd = env.command(&config, &["--http", "127.0.0.1:0"]);
    cmd.env("GATEWAY_TEST_ALICE", "alice-s3cret").env("GATEWAY_TEST_BOB", "bob-s3cret");
    let served = Served::start(cmd).await;
    let bob = served.session("/mcp", Some("bob-s3cret")).await;
    let first = served.session("/mcp", Some("alice-s3cret")).await;
    // Alice is at her share of one: her second session evicts her first, not Bob's older one.
    let second = served.session("/mcp", Some("alice-s3cret")).await;
    assert_eq!(ping_status(&served, &first, "alice-s3cret").await, 404);
    assert_eq!(ping_status(&served, &second, "alice-s3cret").await, 200);
    assert_eq!(ping_status(&served, &bob, "bob-s3cret").await, 200);

    let zero = env.write("zero.toml", &format!("{UPSTREAMS}\n[serve]\nmax_sessions = 0\n"));
    let (code, said) = env.refused(&zero, &["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("max_sessions") && said.contains("at least 1"), "{said}");
}

const RESOURCE: &str = "https://gw.example.com/mcp";

#[tokio::test]
async fn jwts_of_the_configured_issuer_are_checked_and_the_protected_resource_metadata_names_it() {
    let issuer = Issuer::start().await;
    let env = env();
    // Both upstreams log every message they receive (unconfined, to write outside their
    // sandbox): a refused request must reach neither.
    let logs = [env.path("fx.log"), env.path("two.log")];
    let upstreams = UPSTREAMS.replace(
        "args = [\"echo\"]\n\n[servers.two]\ncommand = \"$FX\"\nargs = [\"echo\"]",
        &format!(
            "args = [\"echo\", \"--log\", {:?}]\nsandbox = \"off\"\n\n[servers.two]\ncommand = \"$FX\"\nargs = [\"echo\", \"--log\", {:?}]\nsandbox = \"off\"",
            logs[0], logs[1]
        ),
    );
    assert_ne!(upstreams, UPSTREAMS, "the upstreams' arguments were not found");
    let upstream_calls = || {
        logs.iter()
            .map(|log| std::fs::read_to_string(log).unwrap_or_default().matches("tools/call").count())
            .sum::<usize>()
    };
    let config = env.write(
        "config.toml",
        &format!(
            "{upstreams}
[serve.auth.oauth]
issuer = \"{ISSUER}\"
jwks_url = \"{}\"
resource = \"{RESOURCE}\"

[serve.profiles.narrow]
callers = [\"carol\"]
servers = [\"fx\"]

[serve.audit]
path = \"audit.jsonl\"
",
            issuer.jwks_url
        ),
    );
    let served = Served::start(env.command(&config, &["--http", "127.0.0.1:0"])).await;

    // RFC 9728 metadata, the gateway's and a profile's.
    let (status, metadata) = served.get("/.well-known/oauth-protected-resource/mcp").await;
    assert_eq!(status, 200, "{metadata}");
    let metadata: Value = serde_json::from_str(&metadata).unwrap();
    assert_eq!(metadata["resource"], RESOURCE, "{metadata}");
    assert_eq!(metadata["authorization_servers"], json!([ISSUER]), "{metadata}");
    let (status, narrow) = served.get("/.well-known/oauth-protected-resource/mcp/narrow").await;
    assert_eq!(status, 200, "{narrow}");
    assert!(narrow.contains("https://gw.example.com/mcp/narrow"), "{narrow}");

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let anonymous = served.post("/mcp", &init, None, None).await;
    assert_eq!(anonymous.status(), 401);
    let challenge = anonymous.headers().get("www-authenticate").unwrap().to_str().unwrap().to_owned();
    assert!(
        challenge.contains("resource_metadata=\"https://gw.example.com/.well-known/oauth-protected-resource/mcp\""),
        "{challenge}"
    );
    // Signed by a key the issuer's JWKS does not hold, under the issuer's own `kid`.
    let (_, stranger_key) = issuer::p256();
    let forged = issuer::sign_for(&stranger_key, "k1", "carol", RESOURCE, 300);
    let refused = [
        ("wrong audience", issuer.token_for("carol", "https://other.example.com/mcp", 300)),
        ("expired", issuer.token_for("carol", RESOURCE, -600)),
        ("wrongly signed", forged.clone()),
    ];
    for (what, token) in &refused {
        let answer = served.post("/mcp", &init, None, Some(token)).await;
        assert_eq!(answer.status(), 401, "{what}");
        let challenge = answer.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
        let challenge = challenge.unwrap_or_else(|| panic!("{what}: no WWW-Authenticate"));
        assert!(
            challenge.contains("resource_metadata=\"https://gw.example.com/.well-known/oauth-protected-resource/mcp\""),
            "{what}: {challenge}"
        );
        assert!(challenge.contains("invalid_token"), "{what}: {challenge}");
    }

    let good = issuer.token_for("carol", RESOURCE, 300);
    let session = served.session("/mcp", Some(&good)).await;
    // A call in that session with a forged token: refused before anything reaches an upstream.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "two__echo", "arguments": {"text": "forged"}}});
    let answer = served.post("/mcp", &call, Some(&session), Some(&forged)).await;
    assert_eq!(answer.status(), 401);
    let challenge = answer.headers().get("www-authenticate").unwrap().to_str().unwrap().to_owned();
    assert!(challenge.contains("resource_metadata="), "{challenge}");
    let called = served
        .request("/mcp", &session, Some(&good), "tools/call", json!({"name": "two__echo", "arguments": {"text": "hi"}}))
        .await;
    assert_eq!(text_of(&called), "hi", "{called}");
    // The good call reached `two` (so its log is being written); the forged one never did.
    assert_eq!(upstream_calls(), 1, "{}", std::fs::read_to_string(&logs[1]).unwrap_or_default());
    assert!(!std::fs::read_to_string(&logs[1]).unwrap().contains("forged"));
    // A profile's token names the profile's resource; its callers only.
    let narrow_token = issuer.token_for("carol", &format!("{RESOURCE}/narrow"), 300);
    served.session("/mcp/narrow", Some(&narrow_token)).await;
    let stranger = issuer.token_for("dave", &format!("{RESOURCE}/narrow"), 300);
    assert_eq!(served.post("/mcp/narrow", &init, None, Some(&stranger)).await.status(), 403);

    let log = std::fs::read_to_string(env.path("audit.jsonl")).unwrap();
    let line: Value = serde_json::from_str(log.lines().next().unwrap()).unwrap();
    assert_eq!((line["caller"].as_str(), line["tool"].as_str()), (Some("carol"), Some("two__echo")), "{line}");
}

#[test]
fn a_token_variable_that_is_not_set_refuses_the_start() {
    let env = env();
    let config = env.write(
        "config.toml",
        &format!("{UPSTREAMS}\n[serve.auth]\ntokens = [{{ name = \"ci\", token_env = \"GATEWAY_TEST_UNSET\" }}]\n"),
    );
    let (code, said) = env.refused(&config, &["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("serve.auth.tokens[0]") && said.contains("`GATEWAY_TEST_UNSET` is not set"), "{said}");

    // Without authentication, a non-loopback address is still refused.
    let plain = env.write("plain.toml", UPSTREAMS);
    let (code, said) = env.refused(&plain, &["--http", "0.0.0.0:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("without inbound authentication"), "{said}");
}

#[tokio::test]
async fn a_profile_serves_its_servers_under_its_overlay_and_the_audit_log_records_each_decided_call() {
    let env = env();
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}
[serve.profiles.narrow]
servers = [\"fx\"]
policy = {{ rules = [{{ server = \"fx\", tool = \"add\", decision = \"deny\" }}] }}

[serve.audit]
path = \"audit.jsonl\"
"
        ),
    );
    let served = Served::start(env.command(&config, &["--http", "127.0.0.1:0"])).await;

    let whole = served.session("/mcp", None).await;
    let names = served.tool_names("/mcp", &whole).await;
    assert!(names.iter().any(|n| n == "two__echo") && names.iter().any(|n| n == "fx__add"), "{names:?}");

    let narrow = served.session("/mcp/narrow", None).await;
    let names = served.tool_names("/mcp/narrow", &narrow).await;
    assert!(names.iter().any(|n| n == "fx__echo"), "{names:?}");
    assert!(names.iter().all(|n| n.starts_with("fx__")), "another server's tools in the profile: {names:?}");
    assert!(!names.iter().any(|n| n == "fx__add"), "the overlay's denied tool is listed: {names:?}");
    // No such profile.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    assert_eq!(served.post("/mcp/other", &init, None, None).await.status(), 404);

    let allowed = served.call("/mcp", &whole, "two__echo", json!({"text": "audited"})).await;
    assert_eq!(text_of(&allowed), "audited", "{allowed}");
    let denied = served.call("/mcp", &whole, "two__crash", json!({})).await;
    assert!(denied.get("error").is_some() || is_tool_error(&denied), "{denied}");
    let overlaid = served.call("/mcp/narrow", &narrow, "fx__add", json!({"a": 1, "b": 2})).await;
    assert!(overlaid.get("error").is_some() || is_tool_error(&overlaid), "{overlaid}");

    let log = std::fs::read_to_string(env.path("audit.jsonl")).unwrap();
    let lines: Vec<Value> = log.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    assert_eq!(lines.len(), 3, "{log}");
    let line =
        |tool: &str| lines.iter().find(|l| l["tool"] == tool).unwrap_or_else(|| panic!("no line for {tool}: {log}"));
    let echo = line("two__echo");
    assert_eq!((echo["decision"].as_str(), echo["outcome"].as_str()), (Some("allowed"), Some("ok")), "{echo}");
    assert_eq!(echo["client"], "gateway-test");
    assert!(echo["arguments_sha256"].as_str().is_some_and(|d| d.len() == 64), "{echo}");
    assert!(echo.get("arguments").is_none(), "arguments written by default: {echo}");
    let crash = line("two__crash");
    assert_ne!(crash["decision"], "allowed", "{crash}");
    let add = line("fx__add");
    assert_ne!(add["decision"], "allowed", "{add}");
    assert_eq!(add["profile"], "narrow", "{add}");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(env.path("audit.jsonl")).unwrap().permissions());
    assert_eq!(mode & 0o077, 0, "the audit log is readable by others: {mode:o}");
}

/// `serve` with a drain of `delay_s` and `timeout_s`, a slow call running.
async fn slow_call_running(env: &Env, delay: &str, timeout: &str, ms: u64) -> (Served, tokio::task::JoinHandle<Value>) {
    let config =
        env.write("config.toml", &format!("{UPSTREAMS}\n[serve.drain]\ndelay_s = {delay}\ntimeout_s = {timeout}\n"));
    let served = Served::start(env.command(&config, &["--http", "127.0.0.1:0"])).await;
    let session = served.session("/mcp", None).await;
    let http = served.http.clone();
    let url = format!("{}/mcp", served.base);
    let (started, under_way) = tokio::sync::oneshot::channel();
    let call = tokio::spawn(async move {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "fx__sleep", "arguments": {"ms": ms}}});
        let response = http
            .post(url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", session)
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string())
            .send()
            .await
            .unwrap();
        // Headers come once the call has not answered within the gateway's resume delay: it
        // is in flight.
        let _ = started.send(());
        body_json(response).await
    });
    // The call is under way before the signal (or failed: its own panic says why).
    if tokio::time::timeout(ANSWER, under_way).await.unwrap().is_err() {
        let failed = call.await;
        panic!("the call did not start: {failed:?}");
    }
    (served, call)
}

#[tokio::test]
async fn sigterm_drains_a_call_in_flight_then_exits_0() {
    let env = env();
    let (mut served, call) = slow_call_running(&env, "0.5", "20", 2000).await;
    let signalled = Instant::now();
    served.signal("-TERM");
    // Not ready at once (served for the drain's delay, refused after: 503 either way).
    let mut not_ready = false;
    while signalled.elapsed() < Duration::from_secs(1) {
        match served.http.get(format!("{}/readyz", served.base)).send().await {
            Ok(r) if r.status() == 503 => {
                not_ready = true;
                break;
            }
            Ok(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            Err(_) => break,
        }
    }
    assert!(not_ready, "/readyz did not turn 503 while draining");
    let answer = tokio::time::timeout(ANSWER, call).await.unwrap().unwrap();
    assert!(answer.get("result").is_some() && !is_tool_error(&answer), "the call in flight was cut: {answer}");
    let code = served.exit_code(ANSWER).await;
    let said = served.said();
    assert_eq!(code, Some(0), "{said}");
    assert!(said.contains("SIGTERM received: draining"), "{said}");
    assert!(said.contains("drained: 1 request(s) were in flight, 0 call(s) cut off"), "{said}");
}

#[tokio::test]
async fn a_second_signal_stops_at_once() {
    let env = env();
    let (mut served, _call) = slow_call_running(&env, "0", "60", 30_000).await;
    served.signal("-TERM");
    // The first signal is taken (the gateway is no longer ready) before the second is sent.
    let first = Instant::now();
    while first.elapsed() < ANSWER {
        let ready = served.http.get(format!("{}/readyz", served.base)).send();
        match tokio::time::timeout(Duration::from_secs(2), ready).await {
            Ok(Ok(r)) if r.status() == 200 => tokio::time::sleep(Duration::from_millis(20)).await,
            _ => break,
        }
    }
    let second = Instant::now();
    served.signal("-INT");
    let code = served.exit_code(Duration::from_secs(5)).await;
    assert_eq!(code, Some(143), "{}", served.said());
    assert!(second.elapsed() < Duration::from_secs(4), "took {:?}", second.elapsed());
}

/// A private key file of one key.
fn key_file(env: &Env) {
    use std::os::unix::fs::PermissionsExt;
    let path = env.path("gateway.key");
    std::fs::write(&path, format!("{}\n", "7e".repeat(32))).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

#[tokio::test]
async fn replicas_with_a_key_file_and_a_redis_store_serve_calls_and_share_the_limits() {
    let redis = redis_server::RedisServer::start();
    let env = env();
    key_file(&env);
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}
[serve.replicas]
key_file = \"gateway.key\"
store = \"{}\"
namespace = \"servewire-test\"

[[serve.limits]]
tool = \"fx__add\"
calls_per_minute = 1
",
            redis.url()
        ),
    );
    let served = Served::start(env.command(&config, &["--http", "127.0.0.1:0"])).await;
    let session = served.session("/mcp", None).await;
    let echoed = served.call("/mcp", &session, "two__echo", json!({"text": "through a replica"})).await;
    assert_eq!(text_of(&echoed), "through a replica", "{echoed}");
    let first = served.call("/mcp", &session, "fx__add", json!({"a": 1, "b": 2})).await;
    assert!(!is_tool_error(&first) && first.get("result").is_some(), "{first}");
    // The bucket is in Redis: the second call within the minute is refused, naming the rule.
    let second = served.call("/mcp", &session, "fx__add", json!({"a": 1, "b": 2})).await;
    assert!(is_tool_error(&second), "{second}");
    assert!(
        text_of(&second).contains("rate limit reached") && text_of(&second).contains("[[serve.limits]]"),
        "{second}"
    );

    // `/readyz` follows the store: a Redis that hangs makes the replica not ready.
    let ready = |want: u16| {
        let served = &served;
        async move {
            let deadline = Instant::now() + Duration::from_secs(10);
            loop {
                let (status, text) = served.get("/readyz").await;
                if status == want {
                    return text;
                }
                assert!(Instant::now() < deadline, "/readyz stayed {status}: {text}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    };
    ready(200).await;
    redis.freeze(true);
    let said = ready(503).await;
    assert!(said.contains("shared store"), "{said}");
    redis.freeze(false);
    ready(200).await;
    drop(served);

    // A store that does not answer refuses the start.
    let port = redis.port;
    drop(redis);
    let (code, said) = env.refused(&config, &["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("[serve.replicas] store"), "Redis on port {port} was gone: {said}");
}

#[test]
fn replicas_without_a_readable_key_file_refuse_to_start() {
    let env = env();
    let missing = env.write("missing.toml", &format!("{UPSTREAMS}\n[serve.replicas]\nkey_file = \"no-such.key\"\n"));
    let (code, said) = env.refused(&missing, &["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("[serve.replicas] key_file: the sealing key file") && said.contains("no-such.key"), "{said}");

    let none = env.write("none.toml", &format!("{UPSTREAMS}\n[serve.replicas]\nstore = \"redis://127.0.0.1:1\"\n"));
    let (code, said) = env.refused(&none, &["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("[serve.replicas] needs `key_file`"), "{said}");

    // A key file others can read is refused too.
    key_file(&env);
    let exposed = env.path("gateway.key");
    std::fs::set_permissions(&exposed, std::os::unix::fs::PermissionsExt::from_mode(0o644)).unwrap();
    let open = env.write("open.toml", &format!("{UPSTREAMS}\n[serve.replicas]\nkey_file = \"gateway.key\"\n"));
    let (code, said) = env.refused(&open, &["--http", "127.0.0.1:0"]);
    assert_eq!(code, Some(2), "{said}");
    assert!(said.contains("can be read by other users"), "{said}");
}

/// The next JSON-RPC message of an SSE answer being read.
async fn next_message(response: &mut reqwest::Response, pending: &mut String) -> Value {
    loop {
        if let Some(end) = pending.find("\n\n") {
            let event: String = pending.drain(..end + 2).collect();
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data:")).map(str::trim).collect();
            // A priming event (an id, empty data) carries no message.
            if data.iter().any(|d| !d.is_empty()) {
                return serde_json::from_str(&data.join("\n")).unwrap();
            }
            continue;
        }
        let chunk = tokio::time::timeout(ANSWER, response.chunk()).await.expect("an event in time").unwrap();
        pending.push_str(std::str::from_utf8(&chunk.expect("the stream is open")).unwrap());
    }
}

#[tokio::test]
async fn an_upstreams_elicitation_reaches_the_client_whose_call_caused_it_and_only_that_one() {
    let env = env();
    let config = env.write("config.toml", UPSTREAMS);
    let served = Served::start(env.command(&config, &["--http", "127.0.0.1:0"])).await;
    let open = |capabilities: Value| {
        let served = &served;
        async move {
            let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": capabilities,
                "clientInfo": {"name": "gateway-test", "version": "1"}}});
            let answer = served.post("/mcp", &init, None, None).await;
            let session = answer.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
            let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
            assert_eq!(served.post("/mcp", &initialized, Some(&session), None).await.status(), 202);
            session
        }
    };
    let one = open(json!({"elicitation": {}})).await;
    let two = open(json!({"elicitation": {}})).await;
    let call = |name: &str| json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {"name": name, "arguments": {}}});
    // Both calls wait for their upstream's question at once, each on its own upstream.
    let mut first = served.post("/mcp", &call("fx__ask_elicitation"), Some(&one), None).await;
    let mut second = served.post("/mcp", &call("two__ask_elicitation"), Some(&two), None).await;
    let (mut first_text, mut second_text) = (String::new(), String::new());
    let asked_one = next_message(&mut first, &mut first_text).await;
    let asked_two = next_message(&mut second, &mut second_text).await;
    for asked in [&asked_one, &asked_two] {
        assert_eq!(asked["method"], "elicitation/create", "{asked}");
        assert_eq!(asked["params"]["message"], "Your name?");
    }
    for (session, asked, name) in [(&two, &asked_two, "Two"), (&one, &asked_one, "One")] {
        let reply =
            json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"name": name}}});
        assert_eq!(served.post("/mcp", &reply, Some(session), None).await.status(), 202);
    }
    let done_one = next_message(&mut first, &mut first_text).await;
    let done_two = next_message(&mut second, &mut second_text).await;
    assert!(text_of(&done_one).contains(r#""name":"One""#), "{done_one}");
    assert!(text_of(&done_two).contains(r#""name":"Two""#), "{done_two}");

    // A client that did not declare elicitation: the upstream is declined, nobody is asked.
    let three = open(json!({})).await;
    let declined = served.call("/mcp", &three, "fx__ask_elicitation", json!({})).await;
    assert!(text_of(&declined).contains(r#""action":"decline""#), "{declined}");
    let refused = served.call("/mcp", &three, "fx__ask_sampling", json!({})).await;
    assert!(text_of(&refused).contains("did not declare sampling"), "{refused}");
    assert!(!served.said().contains("panicked"), "{}", served.said());
}

/// `/readyz` answers anyone (before the Host check, without a token): it names a required
/// server that is not connected and its state, never the failure's text (a command line,
/// its arguments, a path).
#[tokio::test]
async fn readyz_names_a_required_server_that_is_down_and_says_nothing_of_its_command() {
    let env = env();
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}\n[servers.db]\ncommand = \"/opt/internal/db-bridge\"\nargs = [\"--password-file\", \"/etc/creds\"]\nrequired = true\n"
        ),
    );
    let served = Served::start(env.command(&config, &["--http", "127.0.0.1:0"])).await;
    let deadline = Instant::now() + ANSWER;
    let said = loop {
        let (status, text) = served.get("/readyz").await;
        if status == 503 && text.contains("db (failed)") {
            break text;
        }
        assert!(Instant::now() < deadline, "/readyz said {status}: {text}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(said, "not ready: required servers not connected: db (failed)");
}
