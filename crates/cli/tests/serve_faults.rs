//! Faults and security checks of `mcp-harness serve --http`, the real binary fronting the
//! fixture server as real upstreams over a real socket: an upstream killed mid-call, two
//! clients reusing request ids, a client that goes away mid-call, a hung upstream, upstreams
//! that fail at start, DNS rebinding, profile isolation, and an audit line for every decision.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture is another package's binary).

#![cfg(unix)]
// Helpers outside #[test] functions are test code too.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::StreamExt as _;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// How long one answer may take (servers starting or restarting included).
const ANSWER: Duration = Duration::from_secs(20);

/// The stateless revision.
const STATELESS: &str = "2026-07-28";

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
        let text = text.replace("$FX", &self.fx).replace("$DIR", &self.config_dir.path().display().to_string());
        std::fs::write(&path, text).unwrap();
        path
    }

    fn command(&self, config: &Path, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_mcp-harness"));
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            // SERVE_TEST_LOG=debug shows serve's log when a test fails.
            .env("RUST_LOG", std::env::var("SERVE_TEST_LOG").unwrap_or_else(|_| "error".to_owned()))
            .env("MCP_HARNESS_DATA_DIR", self.data.path())
            .arg("--config")
            .arg(config)
            .arg("serve")
            .arg("--http")
            .arg("127.0.0.1:0")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        cmd
    }
}

/// A running `serve --http`: its base URL (`http://127.0.0.1:PORT`) and what it says on stderr.
struct Served {
    _child: Child,
    base: String,
    stderr: Arc<Mutex<String>>,
    http: reqwest::Client,
}

/// How a request is made: in a session, or stateless (2026-07-28) with these capabilities.
#[derive(Clone)]
enum Era {
    Session(String),
    Stateless(Value),
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
        let base = url.strip_suffix("/mcp").unwrap().to_owned();
        Self { _child: child, base, stderr: said, http: reqwest::Client::new() }
    }

    fn said(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    fn addr(&self) -> String {
        self.base.strip_prefix("http://").unwrap().to_owned()
    }

    /// POSTs `body` to `path` the way `era` asks, with a bearer token when given.
    async fn post(&self, path: &str, era: &Era, token: Option<&str>, body: &Value) -> reqwest::Response {
        post_with(&self.http, &format!("{}{path}", self.base), era, token, body).await
    }

    /// Opens a session at `path` with these capabilities; its id.
    async fn session(&self, path: &str, token: Option<&str>, capabilities: Value) -> String {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": capabilities,
            "clientInfo": {"name": "faults-test", "version": "1"}}});
        let answer = self.post(path, &Era::Stateless(Value::Null), token, &init).await;
        assert!(answer.status().is_success(), "initialize at {path}: {}", answer.status());
        let session = answer.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let era = Era::Session(session.clone());
        assert_eq!(self.post(path, &era, token, &initialized).await.status(), 202);
        session
    }

    async fn request(&self, path: &str, era: &Era, token: Option<&str>, id: u64, method: &str, params: Value) -> Value {
        let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        body_json(self.post(path, era, token, &body).await).await
    }

    async fn tool_names(&self, path: &str, era: &Era, token: Option<&str>) -> Vec<String> {
        let listed = self.request(path, era, token, 1, "tools/list", json!({})).await;
        listed["result"]["tools"]
            .as_array()
            .unwrap_or_else(|| panic!("no tools in {listed}"))
            .iter()
            .filter_map(|t| t["name"].as_str().map(str::to_owned))
            .collect()
    }

    /// Waits until `path` offers every tool of `names` (upstreams start after `serve` listens).
    async fn offering(&self, path: &str, token: Option<&str>, names: &[&str]) {
        let deadline = Instant::now() + ANSWER;
        loop {
            let offered = self.tool_names(path, &Era::Stateless(json!({})), token).await;
            if names.iter().all(|name| offered.iter().any(|o| o == name)) {
                return;
            }
            assert!(Instant::now() < deadline, "{names:?} never offered: {offered:?}\n{}", self.said());
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    async fn call(&self, era: &Era, id: u64, name: &str, arguments: Value) -> Value {
        self.request("/mcp", era, None, id, "tools/call", json!({"name": name, "arguments": arguments})).await
    }
}

/// One POST: a session's headers, or the stateless envelope and its mirrored headers (when
/// `era` is stateless and `body` is a request; `Value::Null` capabilities: no envelope, for
/// `initialize`).
async fn post_with(
    http: &reqwest::Client,
    url: &str,
    era: &Era,
    token: Option<&str>,
    body: &Value,
) -> reqwest::Response {
    let mut body = body.clone();
    let mut request = http
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    match era {
        Era::Session(session) => {
            request = request.header("mcp-session-id", session).header("mcp-protocol-version", "2025-11-25");
        }
        Era::Stateless(capabilities) if !capabilities.is_null() => {
            body["params"]["_meta"] = envelope(capabilities.clone());
            let method = body["method"].as_str().unwrap_or_default().to_owned();
            request = request.header("mcp-protocol-version", STATELESS).header("mcp-method", method);
            if let Some(name) = body["params"]["name"].as_str() {
                request = request.header("mcp-name", name.to_owned());
            }
        }
        Era::Stateless(_) => {}
    }
    if let Some(token) = token {
        request = request.bearer_auth(token);
    }
    request.body(body.to_string()).send().await.unwrap()
}

/// The 2026-07-28 envelope of a request.
fn envelope(capabilities: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "faults-modern", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities})
}

/// A JSON answer, or the one JSON-RPC answer of an SSE answer.
async fn body_json(response: reqwest::Response) -> Value {
    let sse = response
        .headers()
        .get("content-type")
        .is_some_and(|v| v.to_str().unwrap_or("").starts_with("text/event-stream"));
    let status = response.status();
    let text = response.text().await.unwrap();
    if !sse {
        return serde_json::from_str(&text).unwrap_or_else(|e| panic!("{status} {e}: {text}"));
    }
    text.lines()
        .filter_map(|l| l.strip_prefix("data:"))
        .filter_map(|d| serde_json::from_str::<Value>(d.trim()).ok())
        .find(|m| m.get("id").is_some() && m.get("method").is_none())
        .unwrap_or_else(|| panic!("no answer in {text}"))
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}

fn is_tool_error(answer: &Value) -> bool {
    answer["result"]["isError"] == json!(true)
}

/// Sends `signal` (`-KILL`, `-STOP`, ...) to process `pid`.
fn signal(pid: &str, signal: &str) {
    assert!(std::process::Command::new("kill").args([signal, pid]).status().unwrap().success(), "kill {signal} {pid}");
}

/// The pid a `--tag-pid` fixture reports through `whoami` ("pid N").
async fn pid_of(served: &Served, era: &Era, tool: &str) -> String {
    let answer = served.call(era, 900, tool, json!({})).await;
    let text = text_of(&answer);
    text.strip_prefix("pid ").unwrap_or_else(|| panic!("{answer}")).to_owned()
}

/// Two fixture upstreams whose pids the tests signal (unconfined, so that `whoami`'s pid is
/// the process's own), and two that fail at start: one cannot be run, one exits at once.
const UPSTREAMS: &str = r#"
[servers.fx]
command = "$FX"
args = ["echo", "--tag-pid", "--log", "$DIR/fx.log"]
sandbox = "off"

[servers.two]
command = "$FX"
args = ["echo"]
sandbox = "off"

[servers.gone]
command = "/nonexistent/mcp-server"

[servers.dies]
command = "$FX"
args = ["echo", "--die-at-start"]

[policy]
default = "allow"
"#;

#[tokio::test]
async fn upstreams_that_fail_at_start_leave_initialize_and_listings_working() {
    let env = env();
    let config = env.write("config.toml", UPSTREAMS);
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo", "two__echo"]).await;
    for era in [Era::Session(served.session("/mcp", None, json!({})).await), Era::Stateless(json!({}))] {
        let names = served.tool_names("/mcp", &era, None).await;
        assert!(names.iter().any(|n| n == "fx__echo") && names.iter().any(|n| n == "two__echo"), "{names:?}");
        assert!(!names.iter().any(|n| n.starts_with("gone__") || n.starts_with("dies__")), "{names:?}");
        let echoed = served.call(&era, 2, "two__echo", json!({"text": "up"})).await;
        assert_eq!(text_of(&echoed), "up", "{echoed}");
    }
}

#[tokio::test]
async fn an_upstream_killed_mid_call_fails_that_call_only_and_the_next_reaches_it_restarted() {
    let env = env();
    let config = env.write("config.toml", UPSTREAMS);
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo", "two__echo"]).await;
    let session = Era::Session(served.session("/mcp", None, json!({})).await);
    let before = pid_of(&served, &session, "fx__whoami").await;

    let http = served.http.clone();
    let url = format!("{}/mcp", served.base);
    let era = session.clone();
    let call = tokio::spawn(async move {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "fx__sleep", "arguments": {"ms": 30000}}});
        body_json(post_with(&http, &url, &era, None, &body).await).await
    });
    // The call is under way upstream (the fixture logs what it receives) before the kill.
    let log = env.path("fx.log");
    let deadline = Instant::now() + ANSWER;
    while !std::fs::read_to_string(&log).unwrap_or_default().contains("\"sleep\"") {
        assert!(Instant::now() < deadline, "the call never reached the upstream");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let killed = Instant::now();
    signal(&before, "-KILL");

    let answer = tokio::time::timeout(ANSWER, call).await.expect("the cut call was never answered").unwrap();
    assert!(is_tool_error(&answer), "{answer}");
    assert!(killed.elapsed() < Duration::from_secs(10), "answered after {:?}", killed.elapsed());

    // The session goes on: the other upstream answers at once.
    let other = served.call(&session, 4, "two__echo", json!({"text": "still here"})).await;
    assert_eq!(text_of(&other), "still here", "{other}");

    // The next call to `fx` reaches it restarted (a new process).
    let deadline = Instant::now() + ANSWER;
    let after = loop {
        let answer = served.call(&session, 5, "fx__whoami", json!({})).await;
        if let Some(pid) = text_of(&answer).strip_prefix("pid ") {
            break pid.to_owned();
        }
        assert!(Instant::now() < deadline, "fx did not come back: {answer}\n{}", served.said());
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_ne!(after, before, "the same process answered after it was killed");
    let echoed = served.call(&session, 6, "fx__echo", json!({"text": "back"})).await;
    assert_eq!(text_of(&echoed), "back", "{echoed}");
}

/// One client's `count` calls, `in_flight` at a time, with ids 1..=count: each answer must be
/// its own (the right id, this client's text).
async fn calls_of(served: &Served, era: Era, client: &'static str, count: u64, in_flight: usize) -> usize {
    let http = reqwest::Client::new();
    let url = format!("{}/mcp", served.base);
    futures_util::stream::iter(1..=count)
        .map(|id| {
            let (http, url, era) = (http.clone(), url.clone(), era.clone());
            async move {
                let text = format!("{client}-{id}");
                let body = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                    "params": {"name": "fx__echo", "arguments": {"text": text}}});
                let answer = body_json(post_with(&http, &url, &era, None, &body).await).await;
                assert_eq!(answer["id"], id, "{client}: {answer}");
                assert_eq!(text_of(&answer), text, "{client} got another's answer: {answer}");
            }
        })
        .buffer_unordered(in_flight)
        .count()
        .await
}

#[tokio::test]
async fn two_clients_reusing_the_same_request_ids_never_see_each_others_answers() {
    let env = env();
    let config = env
        .write("config.toml", "[servers.fx]\ncommand = \"$FX\"\nargs = [\"echo\"]\n\n[policy]\ndefault = \"allow\"\n");
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo"]).await;
    // Two sessions of one serve, 1,000 calls each with ids 1 to 1,000, interleaved.
    let a = Era::Session(served.session("/mcp", None, json!({})).await);
    let b = Era::Session(served.session("/mcp", None, json!({})).await);
    let (x, y) = tokio::join!(calls_of(&served, a, "a", 1000, 8), calls_of(&served, b, "b", 1000, 8));
    assert_eq!((x, y), (1000, 1000));
    // Two stateless (2026-07-28) clients, the same ids again.
    let s = Era::Stateless(json!({}));
    let (x, y) = tokio::join!(calls_of(&served, s.clone(), "s", 1000, 8), calls_of(&served, s, "t", 1000, 8));
    assert_eq!((x, y), (1000, 1000));
}

/// The lines the fixture logged (what it received), as JSON.
fn logged(path: &Path) -> Vec<Value> {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().filter_map(|l| serde_json::from_str(l).ok()).collect()
}

#[tokio::test]
async fn a_client_that_disconnects_mid_call_has_the_upstream_told_cancelled() {
    let env = env();
    let config = env.write("config.toml", UPSTREAMS);
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo", "two__echo"]).await;
    let session = served.session("/mcp", None, json!({})).await;
    let log = env.path("fx.log");

    for (n, era) in [Era::Session(session.clone()), Era::Stateless(json!({}))].into_iter().enumerate() {
        let ms = 20_000 + n;
        let mut body = json!({"jsonrpc": "2.0", "id": 5, "method": "tools/call",
            "params": {"name": "fx__sleep", "arguments": {"ms": ms}}});
        let mut head = format!(
            "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n",
            served.addr()
        );
        match &era {
            Era::Session(session) => {
                head.push_str(&format!("mcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\n"));
            }
            Era::Stateless(capabilities) => {
                body["params"]["_meta"] = envelope(capabilities.clone());
                head.push_str(&format!(
                    "mcp-protocol-version: {STATELESS}\r\nmcp-method: tools/call\r\nmcp-name: fx__sleep\r\n"
                ));
            }
        }
        let body = body.to_string();
        let mut stream = tokio::net::TcpStream::connect(served.addr()).await.unwrap();
        stream.write_all(format!("{head}content-length: {}\r\n\r\n{body}", body.len()).as_bytes()).await.unwrap();

        // The call reaches the upstream; the client goes away.
        let deadline = Instant::now() + ANSWER;
        let upstream_id = loop {
            let call = logged(&log)
                .into_iter()
                .find(|l| l["method"] == "tools/call" && l["params"]["arguments"]["ms"] == json!(ms));
            if let Some(call) = call {
                break call["id"].clone();
            }
            assert!(Instant::now() < deadline, "the call never reached the upstream");
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        drop(stream);

        // The upstream is told, naming its own request id.
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let told = logged(&log)
                .into_iter()
                .any(|l| l["method"] == "notifications/cancelled" && l["params"]["requestId"] == upstream_id);
            if told {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "no notifications/cancelled for upstream request {upstream_id}:\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    // The session goes on, and the id of the call given up may be used again.
    let again = served.call(&Era::Session(session), 5, "fx__echo", json!({"text": "again"})).await;
    assert_eq!(text_of(&again), "again", "{again}");
}

#[tokio::test]
async fn a_hung_upstream_holds_only_its_own_calls() {
    let env = env();
    let config = env.write("config.toml", UPSTREAMS);
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo", "two__echo"]).await;
    let session = Era::Session(served.session("/mcp", None, json!({})).await);
    let pid = pid_of(&served, &session, "fx__whoami").await;

    // `fx` stops answering anything (stopped, as a process stuck in a loop or a debugger).
    signal(&pid, "-STOP");
    let http = served.http.clone();
    let url = format!("{}/mcp", served.base);
    let era = session.clone();
    let held = tokio::spawn(async move {
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
            "params": {"name": "fx__echo", "arguments": {"text": "held"}}});
        body_json(post_with(&http, &url, &era, None, &body).await).await
    });
    tokio::time::sleep(Duration::from_millis(200)).await;

    // Calls to the other upstream, and listings, go on meanwhile, in this session and others.
    let started = Instant::now();
    for id in 10..30u64 {
        let text = format!("other {id}");
        let answer = served.call(&session, id, "two__echo", json!({"text": text})).await;
        assert_eq!(text_of(&answer), text, "{answer}");
    }
    let stateless = Era::Stateless(json!({}));
    let answer = served.call(&stateless, 1, "two__add", json!({"a": 2, "b": 3})).await;
    assert_eq!(text_of(&answer), "5", "{answer}");
    assert!(served.tool_names("/mcp", &stateless, None).await.iter().any(|n| n == "two__echo"));
    let elapsed = started.elapsed();
    assert!(elapsed < Duration::from_secs(5), "22 requests beside a hung upstream took {elapsed:?}");
    assert!(!held.is_finished(), "the hung upstream answered");

    // Resumed, it answers the call that waited.
    signal(&pid, "-CONT");
    let answer = tokio::time::timeout(ANSWER, held).await.expect("the held call was never answered").unwrap();
    assert_eq!(text_of(&answer), "held", "{answer}");
}

#[tokio::test]
async fn host_and_origin_rebinding_is_refused_with_403() {
    let env = env();
    let config = env.write("config.toml", UPSTREAMS);
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo", "two__echo"]).await;
    let addr = served.addr();
    let port = addr.rsplit(':').next().unwrap().to_owned();
    let ping = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}});
    let cases = [
        (format!("evil.example.com:{port}"), None, 403),
        (format!("evil.example.com:{port}"), Some(format!("http://evil.example.com:{port}")), 403),
        (addr.clone(), Some("http://evil.example.com".to_owned()), 403),
        (addr.clone(), Some("null".to_owned()), 403),
        (addr.clone(), Some(format!("http://{addr}")), 200),
        (format!("localhost:{port}"), Some(format!("http://localhost:{port}")), 200),
        (addr.clone(), None, 200),
    ];
    for (host, origin, status) in cases {
        let mut request = served
            .http
            .post(format!("{}/mcp", served.base))
            .header("host", &host)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(ping.to_string());
        if let Some(origin) = &origin {
            request = request.header("origin", origin);
        }
        let answer = request.send().await.unwrap();
        assert_eq!(answer.status().as_u16(), status, "Host {host}, Origin {origin:?}");
        if status == 403 {
            assert!(!answer.headers().contains_key("mcp-session-id"), "a session for a rebound request");
        }
    }
}

#[tokio::test]
async fn a_caller_of_one_profile_can_neither_list_nor_call_another_profiles_tools() {
    let env = env();
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}
[serve.auth]
tokens = [{{ name = \"alice\", token_env = \"FAULTS_ALICE\", profile = \"left\" }},
          {{ name = \"bob\", token_env = \"FAULTS_BOB\", profile = \"right\" }}]

[serve.profiles.left]
servers = [\"fx\"]

[serve.profiles.right]
servers = [\"two\"]
"
        ),
    );
    let mut cmd = env.command(&config, &[]);
    cmd.env("FAULTS_ALICE", "alice-s3cret").env("FAULTS_BOB", "bob-s3cret");
    let served = Served::start(cmd).await;
    let (alice, bob) = (Some("alice-s3cret"), Some("bob-s3cret"));
    served.offering("/mcp/left", alice, &["fx__echo"]).await;
    served.offering("/mcp/right", bob, &["two__echo"]).await;

    // Each sees its profile's tools only, at its path and at /mcp (served as its profile).
    for path in ["/mcp/left", "/mcp"] {
        let era = Era::Session(served.session(path, alice, json!({})).await);
        let names = served.tool_names(path, &era, alice).await;
        assert!(names.iter().any(|n| n == "fx__echo"), "{path}: {names:?}");
        assert!(names.iter().all(|n| n.starts_with("fx__")), "{path}: another profile's tools: {names:?}");
        // The other profile's tool cannot be called: it is unknown here.
        let call = json!({"name": "two__echo", "arguments": {"text": "crossing"}});
        let refused = served.request(path, &era, alice, 2, "tools/call", call).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains("Unknown tool: two__echo"), "{path}: {refused}");
        let own = served.request(
            path,
            &era,
            alice,
            3,
            "tools/call",
            json!({"name": "fx__echo", "arguments": {"text": "mine"}}),
        );
        assert_eq!(text_of(&own.await), "mine");
    }
    let stateless = Era::Stateless(json!({}));
    let names = served.tool_names("/mcp/right", &stateless, bob).await;
    assert!(names.iter().all(|n| n.starts_with("two__")) && !names.is_empty(), "{names:?}");

    // Neither can use the other's path, nor the other's session.
    let list = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}});
    assert_eq!(served.post("/mcp/right", &stateless, alice, &list).await.status(), 403);
    assert_eq!(served.post("/mcp/left", &stateless, bob, &list).await.status(), 403);
    let alices = Era::Session(served.session("/mcp/left", alice, json!({})).await);
    let stolen = served.post("/mcp/left", &alices, bob, &list).await;
    assert!(!stolen.status().is_success(), "bob used alice's session: {}", stolen.status());
    let stolen = served.post("/mcp/right", &alices, bob, &list).await;
    assert!(!stolen.status().is_success(), "alice's session served at bob's path: {}", stolen.status());
    assert!(!served.said().contains("s3cret"), "a token was shown: {}", served.said());
}

#[tokio::test]
async fn the_audit_log_has_a_line_for_every_decision() {
    let env = env();
    let config = env.write(
        "config.toml",
        &format!(
            "{UPSTREAMS}
[[policy.rules]]
server = \"fx\"
tool = \"add\"
decision = \"confirm\"

[[policy.rules]]
server = \"two\"
tool = \"crash\"
decision = \"deny\"

[serve.audit]
path = \"audit.jsonl\"
"
        ),
    );
    let served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["fx__echo", "two__echo"]).await;
    let elicits = Era::Stateless(json!({"elicitation": {"form": {}}}));
    let cannot_ask = Era::Session(served.session("/mcp", None, json!({})).await);

    // allowed
    let allowed = served.call(&cannot_ask, 1, "fx__echo", json!({"text": "audited"})).await;
    assert_eq!(text_of(&allowed), "audited", "{allowed}");
    // confirm, approved by the person (a 2026-07-28 round: asked, then answered)
    let add = |a: u64| json!({"name": "fx__add", "arguments": {"a": a, "b": 1}});
    let answer_with = |a: u64, decision: &str, state: &Value| {
        let mut params = add(a);
        params["requestState"] = state.clone();
        params["inputResponses"] = json!({"approval": {"action": "accept", "content": {"decision": decision}}});
        params
    };
    for (a, decision) in [(1u64, "yes"), (2, "no")] {
        let asked = served.request("/mcp", &elicits, None, 2, "tools/call", add(a)).await;
        assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
        let state = asked["result"]["requestState"].clone();
        let done = served.request("/mcp", &elicits, None, 3, "tools/call", answer_with(a, decision, &state)).await;
        assert_eq!(is_tool_error(&done), decision == "no", "{decision}: {done}");
    }
    // confirm, refused: this client cannot be asked
    let refused = served.call(&cannot_ask, 4, "fx__add", json!({"a": 3, "b": 1})).await;
    assert!(is_tool_error(&refused), "{refused}");
    // deny, and an unknown tool
    for (id, name) in [(5, "two__crash"), (6, "fx__nothing")] {
        let unknown = served.call(&cannot_ask, id, name, json!({})).await;
        assert!(unknown["error"]["message"].as_str().is_some_and(|m| m.contains("Unknown tool")), "{unknown}");
    }

    let text = std::fs::read_to_string(env.path("audit.jsonl")).unwrap();
    let lines: Vec<Value> = text.lines().map(|l| serde_json::from_str(l).unwrap()).collect();
    let seen: Vec<(String, String, String)> = lines
        .iter()
        .map(|l| {
            let field = |k: &str| l[k].as_str().unwrap_or_default().to_owned();
            (field("tool"), field("decision"), field("outcome"))
        })
        .collect();
    let expected: Vec<(String, String, String)> = [
        ("fx__echo", "allowed", "ok"),
        ("fx__add", "deferred", "pending"),
        ("fx__add", "approved", "ok"),
        ("fx__add", "deferred", "pending"),
        ("fx__add", "refused", "tool_error"),
        ("fx__add", "refused", "tool_error"),
        ("two__crash", "refused", "error"),
        ("fx__nothing", "rejected", "error"),
    ]
    .iter()
    .map(|(a, b, c)| ((*a).to_owned(), (*b).to_owned(), (*c).to_owned()))
    .collect();
    assert_eq!(seen, expected, "{text}");
    // Each line names the rule that decided it.
    for line in &lines {
        assert!(line["rule"].as_str().is_some_and(|r| !r.is_empty()), "a line without its rule: {line}");
    }
    let denied = &lines[6];
    assert!(denied["rule"].as_str().unwrap().contains("denied by policy rule 1"), "{denied}");
}

/// The processes whose command line names `marker` (zombies have none, so they do not count).
fn processes_naming(marker: &str) -> Vec<String> {
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()))
        .filter(|e| {
            std::fs::read(e.path().join("cmdline")).is_ok_and(|line| String::from_utf8_lossy(&line).contains(marker))
        })
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// A `serve` killed with SIGKILL takes its confined upstreams with it, even one busy in a long
/// call that it would finish after the end of its stdin (it lived on for the call's 10 minutes).
#[tokio::test]
async fn a_killed_serve_leaves_no_confined_upstream_behind() {
    let env = env();
    // The log goes to the working directory, which a confined server may write; its name
    // marks this test's processes.
    let name = format!("busy-{}.log", env.work.path().file_name().unwrap().to_string_lossy());
    let config = env.write(
        "config.toml",
        &format!(
            "[servers.busy]\ncommand = \"$FX\"\nargs = [\"echo\", \"--linger\", \"--log\", \"{name}\"]\n\n\
             [policy]\ndefault = \"allow\"\n"
        ),
    );
    let mut served = Served::start(env.command(&config, &[])).await;
    served.offering("/mcp", None, &["busy__sleep"]).await;
    // The call goes out on a connection of its own, kept open: its answer never comes.
    let session = served.session("/mcp", None, json!({})).await;
    let body = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
        "params": {"name": "busy__sleep", "arguments": {"ms": 600_000}}})
    .to_string();
    let mut stream = tokio::net::TcpStream::connect(served.addr()).await.unwrap();
    let head = format!(
        "POST /mcp HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\naccept: application/json, \
         text/event-stream\r\nmcp-session-id: {session}\r\nmcp-protocol-version: 2025-11-25\r\ncontent-length: {}\r\n\r\n",
        served.addr(),
        body.len()
    );
    stream.write_all(format!("{head}{body}").as_bytes()).await.unwrap();
    let log = env.work.path().join(&name);
    let deadline = Instant::now() + ANSWER;
    while !logged(&log).iter().any(|l| l["method"] == "tools/call") {
        assert!(Instant::now() < deadline, "the call never reached the upstream");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let marker = name;
    assert!(!processes_naming(&marker).is_empty(), "the upstream runs");

    signal(&served._child.id().unwrap().to_string(), "-KILL");
    let _ = served._child.wait().await;
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes_naming(&marker);
        if left.is_empty() {
            break;
        }
        assert!(Instant::now() < deadline, "processes {left:?} outlived the killed serve");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
