//! Traces and metrics end to end: `mcp-harness run` (the scripted model) calling a tool of
//! `mcp-harness serve` (a stdio server of run's configuration), which calls the fixture
//! upstream. Both processes export to one OTLP test receiver (OTLP/HTTP in one test, OTLP/gRPC
//! in the other): one trace, with every parent link in place, and an error span for a call that
//! fails. And `serve --http`'s `/metrics` counts the calls it served.
//!
//! Needs `cargo build -p mcp-fixtures` first (the fixture is another package's binary).

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use mcp_telemetry::conventions::attr;
use mcp_telemetry::receiver::{ReceivedSpan, Receiver};
use serde_json::{Value, json};
use tempfile::TempDir;

/// How long a process or an export may take.
const WAIT: Duration = Duration::from_secs(30);

struct Env {
    dir: TempDir,
    work: TempDir,
    home: TempDir,
}

fn env() -> Env {
    let dir = || tempfile::tempdir().unwrap();
    Env { dir: dir(), work: dir(), home: dir() }
}

impl Env {
    /// Where the fixture upstream logs every line it receives.
    fn upstream_log(&self) -> PathBuf {
        self.dir.path().join("upstream.log")
    }

    fn write(&self, name: &str, text: &str) -> PathBuf {
        let path = self.dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path
    }

    /// The binary with a private HOME and data directory, run in a directory of its own.
    fn cmd(&self, config: &Path) -> tokio::process::Command {
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_mcp-harness"));
        cmd.current_dir(self.work.path())
            .env_remove("MCP_HARNESS_CONFIG")
            .env("HOME", self.home.path())
            .env("MCP_HARNESS_DATA_DIR", self.dir.path().join("data"))
            .env("RUST_LOG", std::env::var("TELEMETRY_TEST_LOG").unwrap_or_else(|_| "error".to_owned()))
            .arg("--config")
            .arg(config)
            .kill_on_drop(true);
        for (k, _) in std::env::vars_os() {
            // The test's own OTEL_* must not redirect the processes under test.
            if k.to_str().is_some_and(|k| k.starts_with("OTEL_")) {
                cmd.env_remove(k);
            }
        }
        cmd
    }
}

fn fixture() -> String {
    mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string()
}

/// The configurations: run's (its one server is `serve` over stdio, unconfined so it may reach
/// the collector; `fx__add` denied; a call may take a second), and serve's (the fixture
/// upstream, logging every line it receives to `upstream.log`); both export to `endpoint`.
fn configs(env: &Env, endpoint: &str, protocol: &str) -> PathBuf {
    let serve = env.write(
        "serve.toml",
        &format!(
            r#"
[servers.fx]
command = "{fx}"
args = ["echo", "--log", "{log}"]
# Unconfined, so it may write its log in the test's directory.
sandbox = "off"

[policy]
default = "allow"

[telemetry]
endpoint = "{endpoint}"
protocol = "{protocol}"
service_name = "serve"
"#,
            fx = fixture(),
            log = env.upstream_log().display()
        ),
    );
    env.write(
        "run.toml",
        &format!(
            r#"
[servers.gw]
command = "{harness}"
args = ["--config", "{serve}", "serve"]
sandbox = "off"
# Spans are exported as they end rather than at the SDK's 5 s batches.
env = {{ OTEL_BSP_SCHEDULE_DELAY = "100" }}
tool_timeout_s = 1

[policy]
default = "allow"
rules = [{{ server = "gw", tool = "fx__add", decision = "deny" }}]

[telemetry]
endpoint = "{endpoint}"
protocol = "{protocol}"
service_name = "run"
"#,
            harness = env!("CARGO_BIN_EXE_mcp-harness"),
            serve = serve.display()
        ),
    )
}

/// Echo, a call the policy denies (`add`), one that outlasts run's timeout (`sleep`), one whose
/// upstream dies (`crash`), then done.
const SCRIPT: &str = r#"{"turns": [
  {"text": "Echoing.", "tool_calls": [{"name": "mcp__gw__fx__echo", "input": {"text": "traced"}}]},
  {"text": "Adding.", "tool_calls": [{"name": "mcp__gw__fx__add", "input": {"a": 1, "b": 2}}]},
  {"text": "Sleeping.", "tool_calls": [{"name": "mcp__gw__fx__sleep", "input": {"ms": 20000}}]},
  {"text": "Crashing.", "tool_calls": [{"name": "mcp__gw__fx__crash", "input": {}}]},
  {"text": "Done."}
]}"#;

fn one<'a>(spans: &'a [ReceivedSpan], what: &str, pick: impl Fn(&ReceivedSpan) -> bool) -> &'a ReceivedSpan {
    let found: Vec<&ReceivedSpan> = spans.iter().filter(|s| pick(s)).collect();
    assert_eq!(found.len(), 1, "{what}: {found:#?}\nall spans: {:#?}", names(spans));
    found[0]
}

fn names(spans: &[ReceivedSpan]) -> Vec<String> {
    spans
        .iter()
        .map(|s| {
            format!("{} {} [{}] {} <- {} {}", s.service_name, s.name, s.kind, s.span_id, s.parent_span_id, s.status)
        })
        .collect()
}

async fn one_trace_by(protocol: &str) {
    let receiver = Receiver::start().await.unwrap();
    let endpoint = if protocol == "grpc" { receiver.grpc_endpoint() } else { receiver.http_endpoint() };
    let env = env();
    let config = configs(&env, &endpoint, protocol);
    let script = env.write("script.json", SCRIPT);
    let out = tokio::time::timeout(
        WAIT,
        env.cmd(&config)
            .args(["run", "echo something", "--provider", "scripted", "--json", "--script"])
            .arg(&script)
            .stdin(Stdio::null())
            .output(),
    )
    .await
    .unwrap()
    .unwrap();
    assert!(out.status.success(), "run failed: {}", String::from_utf8_lossy(&out.stderr));

    // run: invoke_agent, five chat spans, four execute_tool and three client calls (the
    // handshake and listing come before the task); serve: the server spans and its calls.
    let ready = |spans: &[ReceivedSpan]| {
        let serve_calls = spans
            .iter()
            .filter(|s| s.service_name == "serve" && s.kind == "client" && s.name.starts_with("tools/call"))
            .count();
        let run_tasks = spans.iter().filter(|s| s.service_name == "run" && s.name == "invoke_agent").count();
        serve_calls >= 3 && run_tasks == 1
    };
    let deadline = tokio::time::Instant::now() + WAIT;
    let spans = loop {
        let spans = receiver.spans();
        if ready(&spans) {
            break spans;
        }
        assert!(tokio::time::Instant::now() < deadline, "spans did not all arrive: {:#?}", names(&spans));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    if std::env::var_os("TELEMETRY_TEST_SHOW").is_some() {
        eprintln!("{:#?}", names(&spans));
    }
    assert!(spans.iter().all(|s| s.protocol == protocol), "{:#?}", names(&spans));

    let run = |s: &ReceivedSpan| s.service_name == "run";
    let serve = |s: &ReceivedSpan| s.service_name == "serve";
    let task = one(&spans, "run's task", |s| run(s) && s.name == "invoke_agent");
    let chats: Vec<&ReceivedSpan> = spans.iter().filter(|s| run(s) && s.name.starts_with("chat ")).collect();
    assert_eq!(chats.len(), 5, "{:#?}", names(&spans));
    for chat in &chats {
        assert_eq!(chat.parent_span_id, task.span_id, "a model call is the task's child");
        assert_eq!(chat.attr(attr::GEN_AI_PROVIDER_NAME), Some("scripted"));
        assert!(chat.attr(attr::GEN_AI_USAGE_INPUT_TOKENS).is_some(), "{chat:#?}");
    }

    // The echo: run's execute_tool -> run's CLIENT span -> serve's SERVER span -> serve's
    // CLIENT span to the fixture, one trace.
    let tool = one(&spans, "run's execute_tool echo", |s| run(s) && s.name == "execute_tool mcp__gw__fx__echo");
    assert_eq!(tool.parent_span_id, task.span_id);
    assert_eq!(tool.attr(attr::MCP_HARNESS_POLICY_DECISION), Some("allowed"), "{tool:#?}");
    assert!(tool.attr(attr::MCP_HARNESS_POLICY_RULE).is_some(), "{tool:#?}");
    let sent = one(&spans, "run's call of echo", |s| run(s) && s.kind == "client" && s.name == "tools/call fx__echo");
    assert_eq!(sent.parent_span_id, tool.span_id);
    let received =
        one(&spans, "serve's echo received", |s| serve(s) && s.kind == "server" && s.name == "tools/call fx__echo");
    assert_eq!(received.parent_span_id, sent.span_id, "serve's span is the child of the request's traceparent");
    assert_eq!(
        received.attr(attr::MCP_HARNESS_POLICY_DECISION),
        Some("allowed"),
        "the gateway's decision: {received:#?}"
    );
    let upstream =
        one(&spans, "serve's call of the fixture", |s| serve(s) && s.kind == "client" && s.name == "tools/call echo");
    assert_eq!(upstream.parent_span_id, received.span_id);
    for span in [tool, sent, received, upstream] {
        assert_eq!(span.trace_id, task.trace_id, "one trace end to end: {span:#?}");
        assert_eq!(span.status, "unset", "{span:#?}");
    }
    assert_eq!(upstream.attr(attr::NETWORK_TRANSPORT), Some("pipe"));
    assert_eq!(sent.attr(attr::MCP_HARNESS_SERVER), Some("gw"));

    // The upstream got the trace too: the `traceparent` in the echo's `params._meta` names
    // serve's CLIENT span, in the task's trace.
    let log = std::fs::read_to_string(env.upstream_log()).unwrap();
    let echo = log
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .find(|m| m["method"] == "tools/call" && m["params"]["name"] == "echo")
        .unwrap_or_else(|| panic!("the upstream got no echo: {log}"));
    let traceparent = echo["params"]["_meta"]["traceparent"].as_str().unwrap_or_else(|| panic!("{echo}"));
    assert_eq!(
        traceparent,
        format!("00-{}-{}-01", task.trace_id, upstream.span_id),
        "the upstream's parent is serve's call of it, in run's trace"
    );

    // The denied call: refused in run (its span says so, with the decision), never sent.
    let denied = one(&spans, "run's execute_tool add", |s| run(s) && s.name == "execute_tool mcp__gw__fx__add");
    assert_eq!(denied.parent_span_id, task.span_id);
    assert_eq!((denied.status, denied.attr(attr::ERROR_TYPE)), ("error", Some("refused")), "{denied:#?}");
    assert!(denied.attr(attr::MCP_HARNESS_POLICY_DECISION).is_some(), "{denied:#?}");
    assert!(!spans.iter().any(|s| s.name.starts_with("tools/call") && s.name.ends_with("add")), "{:#?}", names(&spans));

    // The call that outlasts run's one second: a timeout on run's spans; serve's, in the same
    // trace, were cancelled by run's `notifications/cancelled`.
    let slow_tool = one(&spans, "run's execute_tool sleep", |s| run(s) && s.name == "execute_tool mcp__gw__fx__sleep");
    let slow_sent = one(&spans, "run's call of sleep", |s| run(s) && s.name == "tools/call fx__sleep");
    assert_eq!(slow_sent.parent_span_id, slow_tool.span_id);
    for span in [slow_tool, slow_sent] {
        assert_eq!((span.status, span.attr(attr::ERROR_TYPE)), ("error", Some("timeout")), "{span:#?}");
    }
    let slow_received =
        one(&spans, "serve's sleep", |s| serve(s) && s.kind == "server" && s.name == "tools/call fx__sleep");
    assert_eq!(slow_received.parent_span_id, slow_sent.span_id);
    let slow_upstream = one(&spans, "serve's call of sleep", |s| serve(s) && s.name == "tools/call sleep");
    assert_eq!(slow_upstream.parent_span_id, slow_received.span_id);
    for span in [slow_received, slow_upstream] {
        assert_eq!(span.trace_id, task.trace_id);
        assert_eq!((span.status, span.attr(attr::ERROR_TYPE)), ("error", Some("cancelled")), "{span:#?}");
    }

    // The crash: an error on every span of the call.
    let crash_tool = one(&spans, "run's execute_tool crash", |s| run(s) && s.name == "execute_tool mcp__gw__fx__crash");
    let crash_sent = one(&spans, "run's call of crash", |s| run(s) && s.name == "tools/call fx__crash");
    let crash_received =
        one(&spans, "serve's crash", |s| serve(s) && s.kind == "server" && s.name == "tools/call fx__crash");
    let crash_upstream = one(&spans, "serve's call of crash", |s| serve(s) && s.name == "tools/call crash");
    assert_eq!(crash_sent.parent_span_id, crash_tool.span_id);
    assert_eq!(crash_received.parent_span_id, crash_sent.span_id);
    assert_eq!(crash_upstream.parent_span_id, crash_received.span_id);
    for span in [crash_tool, crash_sent, crash_received, crash_upstream] {
        assert_eq!(span.trace_id, task.trace_id);
        assert_eq!(span.status, "error", "{span:#?}");
        assert!(span.attr(attr::ERROR_TYPE).is_some(), "{span:#?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_run_through_serve_to_the_upstream_over_otlp_http() {
    one_trace_by("http/protobuf").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_trace_from_run_through_serve_to_the_upstream_over_otlp_grpc() {
    one_trace_by("grpc").await;
}

/// `command` running `serve --http` on a free loopback port, and the lines of its stderr (where
/// it says its addresses).
fn serve_http(command: &mut tokio::process::Command) -> (tokio::process::Child, StderrLines) {
    let mut child = command
        .args(["serve", "--http", "127.0.0.1:0"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    (child, tokio::io::AsyncBufReadExt::lines(tokio::io::BufReader::new(stderr)))
}

/// The lines of `serve --http`'s stderr.
type StderrLines = tokio::io::Lines<tokio::io::BufReader<tokio::process::ChildStderr>>;

/// The MCP URL `serve --http` says it listens on.
async fn listening(lines: &mut StderrLines) -> String {
    tokio::time::timeout(WAIT, async {
        let mut before = Vec::new();
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("listening on ") {
                return url.to_owned();
            }
            before.push(line);
        }
        panic!("serve --http ended without listening: {before:?}");
    })
    .await
    .unwrap()
}

/// `serve --http`'s `/metrics` (`[serve] metrics`): `mcp_server_operation_duration` counts the
/// calls it served.
/// And its SERVER spans name the client's address and port and the session's revision.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_count_the_calls_serve_answered() {
    let receiver = Receiver::start().await.unwrap();
    let env = env();
    let config = env.write(
        "serve.toml",
        &format!(
            "[serve]\nmetrics = true\n\n[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\n\n\
             [policy]\ndefault = \"allow\"\n\n[telemetry]\nendpoint = \"{}\"\nservice_name = \"serve\"\n",
            fixture(),
            receiver.http_endpoint()
        ),
    );
    let (mut child, mut lines) = serve_http(env.cmd(&config).env("OTEL_BSP_SCHEDULE_DELAY", "100"));
    let url = listening(&mut lines).await;
    let http = reqwest::Client::new();
    let post = |body: Value, session: Option<&str>| {
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
    let session = answer.headers().get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post(initialized, Some(&session)).await.unwrap().status(), 202);
    let calls = 3;
    for id in 0..calls {
        let call = json!({"jsonrpc": "2.0", "id": 10 + id, "method": "tools/call",
            "params": {"name": "fx__echo", "arguments": {"text": format!("call {id}")}}});
        let answer = post(call, Some(&session)).await.unwrap();
        assert!(answer.status().is_success());
        let text = answer.text().await.unwrap();
        assert!(text.contains(&format!("call {id}")), "{text}");
    }
    let metrics_url = url.replace("/mcp", "/metrics");
    let scraped = http.get(&metrics_url).send().await.unwrap();
    assert_eq!(scraped.status(), 200);
    assert!(
        scraped.headers().get("content-type").unwrap().to_str().unwrap().starts_with("text/plain; version=0.0.4"),
        "{:?}",
        scraped.headers()
    );
    let text = scraped.text().await.unwrap();
    let count = |metric: &str, method: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(&format!("{metric}_count{{")))
            .filter(|l| l.contains(&format!("mcp_method_name=\"{method}\"")))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(count("mcp_server_operation_duration_seconds", "tools/call"), calls, "{text}");
    // serve's own calls of the upstream are counted on the client side.
    assert_eq!(count("mcp_client_operation_duration_seconds", "tools/call"), calls, "{text}");
    // The session is still open: no duration yet; deleted, one.
    let sessions = |text: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with("mcp_server_session_duration_seconds_count{"))
            .filter(|l| l.contains("mcp_protocol_version=\"2025-06-18\"") && l.contains("network_transport=\"tcp\""))
            .map(|l| l.rsplit(' ').next().unwrap().parse::<u64>().unwrap())
            .sum()
    };
    assert_eq!(sessions(&text), 0, "{text}");
    let deleted = http
        .delete(&url)
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", "2025-06-18")
        .send()
        .await
        .unwrap();
    assert!(deleted.status().is_success(), "{deleted:?}");
    let text = http.get(&metrics_url).send().await.unwrap().text().await.unwrap();
    assert_eq!(sessions(&text), 1, "{text}");

    // The SERVER spans: the client's address and port (this test's connections) and the
    // revision (the initialize's from its answer, the calls' from their session).
    let deadline = tokio::time::Instant::now() + WAIT;
    let served = |spans: &[ReceivedSpan]| -> Vec<ReceivedSpan> {
        spans.iter().filter(|s| s.kind == "server" && s.service_name == "serve").cloned().collect()
    };
    let spans = loop {
        let spans = served(&receiver.spans());
        if spans.iter().filter(|s| s.name == "tools/call fx__echo").count() == calls as usize
            && spans.iter().any(|s| s.name == "initialize")
        {
            break spans;
        }
        assert!(tokio::time::Instant::now() < deadline, "server spans did not arrive: {:#?}", names(&spans));
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    for span in spans.iter().filter(|s| s.name == "tools/call fx__echo" || s.name == "initialize") {
        assert_eq!(span.attr(attr::CLIENT_ADDRESS), Some("127.0.0.1"), "{span:#?}");
        let port: u16 = span.attr(attr::CLIENT_PORT).and_then(|p| p.parse().ok()).unwrap_or(0);
        assert_ne!(port, 0, "{span:#?}");
        assert_eq!(span.attr(attr::MCP_PROTOCOL_VERSION), Some("2025-06-18"), "{span:#?}");
        assert_eq!(span.attr(attr::NETWORK_TRANSPORT), Some("tcp"), "{span:#?}");
    }
    let _ = child.start_kill();
}

/// `[serve] metrics_addr`: `/metrics` on an address of its own, said at start; the MCP port no
/// longer answers it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_may_have_an_address_of_their_own() {
    let env = env();
    let config = env.write(
        "serve.toml",
        &format!(
            "[serve]\nmetrics_addr = \"127.0.0.1:0\"\n\n[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\n",
            fixture()
        ),
    );
    let (mut child, mut lines) = serve_http(&mut env.cmd(&config));
    let (front, metrics) = tokio::time::timeout(WAIT, async {
        let mut front = None;
        while let Some(line) = lines.next_line().await.unwrap() {
            if let Some(url) = line.strip_prefix("listening on ") {
                front = Some(url.to_owned());
            } else if let Some(url) = line.strip_prefix("metrics on ") {
                return (front.expect("the MCP port first"), url.to_owned());
            }
        }
        panic!("serve --http ended without saying where its metrics are");
    })
    .await
    .unwrap();
    let http = reqwest::Client::new();
    let scraped = http.get(&metrics).send().await.unwrap();
    assert_eq!(scraped.status(), 200);
    let kind = scraped.headers().get("content-type").map(|v| v.to_str().unwrap().to_owned());
    assert!(kind.as_deref().is_some_and(|k| k.starts_with("text/plain; version=0.0.4")), "{kind:?}");
    let on_front = http.get(front.replace("/mcp", "/metrics")).send().await.unwrap();
    assert_eq!(on_front.status(), 404);
    let _ = child.start_kill();
}

/// Without `[serve] metrics`, `serve --http` keeps none: `/metrics` is 404 and says why, and
/// calls are served as ever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_are_kept_only_when_asked_for() {
    let env = env();
    let config = env.write("serve.toml", &format!("[servers.fx]\ncommand = \"{}\"\nargs = [\"echo\"]\n", fixture()));
    let (mut child, mut lines) = serve_http(&mut env.cmd(&config));
    let url = listening(&mut lines).await;
    let http = reqwest::Client::new();
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let answer = http
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(init.to_string())
        .send()
        .await
        .unwrap();
    assert!(answer.status().is_success(), "{answer:?}");
    let scraped = http.get(url.replace("/mcp", "/metrics")).send().await.unwrap();
    assert_eq!(scraped.status(), 404);
    let text = scraped.text().await.unwrap();
    assert!(text.contains("no metrics") && text.contains("configured"), "{text}");
    let _ = child.start_kill();
}
