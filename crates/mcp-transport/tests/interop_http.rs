//! Interoperability over HTTP with real third-party servers: server-everything (TypeScript SDK)
//! in `streamableHttp` and `sse` modes, and a server on PyPI `mcp` 2.3 in SSE-answer,
//! JSON-answer and stateless modes. Handshake, list, call, and a notification on the GET stream;
//! the Python server's resources, template, prompt and completion over stdio in 2024-11-05,
//! 2025-11-25 and 2026-07-28.
//!
//! Run by `cargo xtask test` (feature `interop`) with `MCP_PEERS_DIR` pointing at the peers.
//! Every peer runs confined (the `standard` sandbox, reading the peers), over stdio through the
//! adapter and over HTTP through the launcher directly.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use mcp_client::{Client, ClientOptions, Era, ListLimits, RequestOptions};
use mcp_protocol::ServerNotification;
use mcp_sandbox::launcher::Launcher;
use mcp_sandbox::{Context, Launch, Sandbox};
use mcp_transport::{HttpConfig, HttpTransport, StdioConfig, StdioSandbox, StdioTransport};
use serde_json::json;
use tokio::process::{Child, Command};

fn peers_dir() -> PathBuf {
    match std::env::var_os("MCP_PEERS_DIR") {
        Some(dir) => PathBuf::from(dir),
        None => panic!("MCP_PEERS_DIR is not set: run the interop suite through `cargo xtask test`"),
    }
}

/// `standard`, reading the peers and this crate's peer scripts.
fn peer_sandbox() -> Sandbox {
    let read = vec![peers_dir(), Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers")];
    Sandbox { read, ..Sandbox::standard() }
}

fn launcher() -> Launcher {
    Launcher::new(mcp_fixtures::launcher_binary().unwrap_or_else(|e| panic!("{e}")), Vec::<String>::new())
}

/// A stdio peer in the peers' sandbox.
fn confined(mut config: StdioConfig) -> StdioConfig {
    config.sandbox = Some(Box::new(StdioSandbox { sandbox: peer_sandbox(), launcher: launcher() }));
    config
}

/// An HTTP peer's command through the sandbox launcher, in the peers' sandbox, working and
/// keeping its temporary files in `dir`.
fn confined_command(program: &str, args: &[String], dir: &Path) -> Command {
    let path = std::env::var_os("PATH").unwrap_or_default();
    let program = if program.contains('/') {
        PathBuf::from(program)
    } else {
        std::env::split_paths(&path).map(|d| d.join(program)).find(|p| p.is_file()).unwrap()
    };
    let mut context = Context::new(dir, dir);
    context.home = std::env::var_os("HOME").map(PathBuf::from);
    context.cwd_configured = true;
    context.program = vec![program.clone(), std::fs::canonicalize(&program).unwrap()];
    let policy = peer_sandbox().policy(&context).unwrap();
    let launch = Launch { policy, program, args: args.iter().map(Into::into).collect() };
    let launcher = launcher();
    let mut command = Command::new(&launcher.program);
    command.args(launcher.arguments(&launch)).current_dir(dir).env("TMPDIR", dir);
    command
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

/// A peer process, confined, that is killed when the test ends.
struct Peer {
    _child: Child,
    _dir: tempfile::TempDir,
    base: String,
}

/// Ready means the port accepts connections (a GET could hang on a stateless server).
async fn start(program: &str, args: &[String], port: u16) -> Peer {
    let dir = tempfile::tempdir().unwrap();
    let mut command = confined_command(program, args, dir.path());
    command.env("PORT", port.to_string());
    command.stdin(Stdio::null()).stdout(Stdio::null()).stderr(Stdio::null()).kill_on_drop(true);
    let child = command.spawn().unwrap();
    let started = Instant::now();
    while tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_err() {
        assert!(started.elapsed() < Duration::from_secs(30), "the peer did not open port {port}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Peer { _child: child, _dir: dir, base: format!("http://127.0.0.1:{port}") }
}

async fn everything(mode: &str) -> Peer {
    let script = peers_dir().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(script.is_file(), "{} is missing; run `cargo xtask peers`", script.display());
    let port = free_port();
    start("node", &[script.to_string_lossy().into_owned(), mode.to_owned()], port).await
}

async fn python(flags: &[&str]) -> Peer {
    let python = peers_dir().join("py/bin/python");
    assert!(python.is_file(), "{} is missing; run `cargo xtask peers`", python.display());
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/py_http_server.py");
    let port = free_port();
    let mut args = vec![server.to_string_lossy().into_owned(), "streamable-http".to_owned()];
    args.extend(["--port".to_owned(), port.to_string()]);
    args.extend(flags.iter().map(|f| (*f).to_owned()));
    start(&python.to_string_lossy(), &args, port).await
}

async fn connect(url: String) -> (Client, tokio::sync::broadcast::Receiver<ServerNotification>) {
    let transport = HttpTransport::new(HttpConfig::new(url.clone())).unwrap();
    let client = Client::start(transport, ClientOptions::default());
    let notes = client.subscribe();
    if let Err(e) = client.initialize().await {
        panic!("{url}: handshake failed: {e}");
    }
    (client, notes)
}

async fn list_changed(notes: &mut tokio::sync::broadcast::Receiver<ServerNotification>) -> bool {
    list_changed_within(notes, Duration::from_secs(10)).await
}

async fn list_changed_within(
    notes: &mut tokio::sync::broadcast::Receiver<ServerNotification>,
    within: Duration,
) -> bool {
    tokio::time::timeout(within, async {
        loop {
            match notes.recv().await {
                Ok(ServerNotification::ToolsListChanged) => return true,
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .unwrap_or(false)
}

fn args(v: serde_json::Value) -> Option<serde_json::Map<String, serde_json::Value>> {
    v.as_object().cloned()
}

#[tokio::test]
async fn everything_streamable_http() {
    let peer = everything("streamableHttp").await;
    let (client, mut notes) = connect(format!("{}/mcp", peer.base)).await;
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    // server-everything announces the tools it adds after `initialized` on the GET stream.
    assert!(list_changed(&mut notes).await, "tools/list_changed arrived on the GET stream");
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{} tools", tools.len());
    let r = client.call_tool("echo", args(json!({"message": "over http"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "Echo: over http");
    // Progress travels on the request's own SSE stream.
    let (tx, mut rx) = tokio::sync::mpsc::channel(mcp_client::PROGRESS_BACKLOG);
    let options = RequestOptions { timeout: None, progress: Some(tx), max_total: None };
    let r = client
        .call_tool("trigger-long-running-operation", args(json!({"duration": 1, "steps": 3})), options)
        .await
        .unwrap();
    assert!(!r.is_error(), "{r:?}");
    let mut n = 0;
    while rx.try_recv().is_ok() {
        n += 1;
    }
    assert!(n >= 2, "progress over SSE: {n}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn everything_legacy_sse_by_fallback() {
    let peer = everything("sse").await;
    // The automatic era's server/discover probe and then initialize are refused with a 4xx
    // (POST /sse), so the client falls back to initialize over the 2024-11-05 transport.
    let transport = HttpTransport::new(HttpConfig::new(format!("{}/sse", peer.base))).unwrap();
    let client = Client::connect(transport, auto()).await.unwrap();
    // The TypeScript SDK negotiates its newest revision over the old transport too.
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"));
    let r = client.call_tool("echo", args(json!({"message": "legacy"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "Echo: legacy");
    client.close().await.unwrap();
}

async fn python_round_trip(flags: &[&str], get_stream: bool) {
    let peer = python(flags).await;
    let (client, mut notes) = connect(format!("{}/mcp", peer.base)).await;
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "add", "announce", "greet"]);
    let r = client.call_tool("echo", args(json!({"text": "py"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "py");
    let r = client.call_tool("add", args(json!({"a": 2, "b": 40})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "42");
    if get_stream {
        // The server drops what it announces while no GET stream is open, and nothing tells
        // the client when the stream is open: announce until one arrives.
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut arrived = false;
        while !arrived && Instant::now() < deadline {
            let r = client.call_tool("announce", None, RequestOptions::default()).await.unwrap();
            assert_eq!(r.joined_text(), "announced");
            arrived = list_changed_within(&mut notes, Duration::from_millis(500)).await;
        }
        assert!(arrived, "tools/list_changed arrived on the GET stream");
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn python_sse_answers() {
    python_round_trip(&[], true).await;
}

#[tokio::test]
async fn python_json_answers() {
    python_round_trip(&["--json"], true).await;
}

#[tokio::test]
async fn python_stateless() {
    // Stateless: no session, so no notification outside a request can reach us.
    python_round_trip(&["--stateless", "--json"], false).await;
}

// The automatic era: one option, both eras. PyPI `mcp` 2.3 servers answer `server/discover`
// and speak 2026-07-28; TypeScript-SDK servers refuse it and get `initialize`.

fn auto() -> ClientOptions {
    ClientOptions { era: Era::Auto, ..ClientOptions::default() }
}

async fn auto_round_trip(client: Client, expected_version: &str, echo: (&str, &str, &str)) {
    assert_eq!(client.protocol_version().unwrap().as_str(), expected_version);
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    assert!(tools.iter().any(|t| t.name == "echo"), "{} tools", tools.len());
    let (arg, text, expected) = echo;
    let r = client.call_tool("echo", args(json!({ arg: text })), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), expected);
    client.close().await.unwrap();
}

#[tokio::test]
async fn auto_era_python_over_http_speaks_2026_07_28() {
    let peer = python(&[]).await;
    let transport = HttpTransport::new(HttpConfig::new(format!("{}/mcp", peer.base))).unwrap();
    let client = Client::connect(transport, auto()).await.unwrap();
    client.listen_for_changes().unwrap();
    auto_round_trip(client, "2026-07-28", ("text", "modern", "modern")).await;
}

#[tokio::test]
async fn auto_era_python_over_stdio_speaks_2026_07_28() {
    let python = peers_dir().join("py/bin/python");
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/py_http_server.py");
    let config = StdioConfig::new(
        python.to_string_lossy().into_owned(),
        [server.to_string_lossy().into_owned(), "stdio".to_owned()],
    );
    let client = Client::connect(StdioTransport::spawn(confined(config)).unwrap(), auto()).await.unwrap();
    auto_round_trip(client, "2026-07-28", ("text", "stdio modern", "stdio modern")).await;
}

#[tokio::test]
async fn auto_era_everything_over_http_falls_back_to_initialize() {
    let peer = everything("streamableHttp").await;
    let transport = HttpTransport::new(HttpConfig::new(format!("{}/mcp", peer.base))).unwrap();
    let client = Client::connect(transport, auto()).await.unwrap();
    auto_round_trip(client, "2025-11-25", ("message", "old", "Echo: old")).await;
}

#[tokio::test]
async fn auto_era_everything_over_stdio_falls_back_to_initialize() {
    let script = peers_dir().join("node/node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    let config = StdioConfig::new("node", [script.to_string_lossy().into_owned(), "stdio".to_owned()]);
    let client = Client::connect(StdioTransport::spawn(confined(config)).unwrap(), auto()).await.unwrap();
    auto_round_trip(client, "2025-11-25", ("message", "old", "Echo: old")).await;
}

/// Answers elicitations with a name, counting them.
#[derive(Default)]
struct GivesName(std::sync::atomic::AtomicUsize);

#[async_trait::async_trait]
impl mcp_client::ServerRequestHandler for GivesName {
    async fn elicit(
        &self,
        _params: mcp_protocol::ElicitRequestParams,
    ) -> Result<mcp_protocol::ElicitResult, mcp_protocol::ErrorObject> {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        Ok(mcp_protocol::ElicitResult {
            action: mcp_protocol::ElicitAction::Accept,
            content: json!({"name": "Rust"}).as_object().cloned(),
            extra: Default::default(),
        })
    }
}

/// The same elicitation, through the same handler port, in both eras: an input-required round
/// trip under 2026-07-28, a mid-call server request under the handshake.
async fn greet(era: Era, expected_version: &str) {
    let peer = python(&[]).await;
    let handler = std::sync::Arc::new(GivesName::default());
    let options = ClientOptions {
        era,
        handler: handler.clone(),
        capabilities: mcp_protocol::ClientCapabilities { elicitation: Some(json!({})), ..Default::default() },
        ..ClientOptions::default()
    };
    let transport = HttpTransport::new(HttpConfig::new(format!("{}/mcp", peer.base))).unwrap();
    let client = Client::connect(transport, options).await.unwrap();
    assert_eq!(client.protocol_version().unwrap().as_str(), expected_version);
    let r = client.call_tool("greet", None, RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "Hello, Rust!", "{r:?}");
    assert_eq!(handler.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    client.close().await.unwrap();
}

#[tokio::test]
async fn python_input_required_round_trip_in_2026_07_28() {
    greet(Era::Auto, "2026-07-28").await;
}

#[tokio::test]
async fn python_mid_call_elicitation_in_2025_11_25() {
    greet(Era::Initialize, "2025-11-25").await;
}

#[tokio::test]
async fn python_subscriptions_listen_in_2026_07_28() {
    let peer = python(&[]).await;
    let transport = HttpTransport::new(HttpConfig::new(format!("{}/mcp", peer.base))).unwrap();
    let client = Client::connect(transport, auto()).await.unwrap();
    assert_eq!(client.protocol_version().unwrap().as_str(), "2026-07-28");
    let mut notes = client.subscribe();
    client.listen_for_changes().unwrap();
    // The server acknowledges the subscription first; only then can it deliver to it.
    let acknowledged = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            match notes.recv().await {
                Ok(ServerNotification::Other { method, .. })
                    if method == "notifications/subscriptions/acknowledged" =>
                {
                    return true;
                }
                Ok(_) => continue,
                Err(_) => return false,
            }
        }
    })
    .await
    .unwrap_or(false);
    assert!(acknowledged, "notifications/subscriptions/acknowledged");
    let r = client.call_tool("announce", None, RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "announced");
    assert!(list_changed(&mut notes).await, "tools/list_changed arrived on the subscriptions/listen stream");
    client.close().await.unwrap();
}

/// The Python peer over stdio, confined, connected with `options`.
async fn python_stdio(options: ClientOptions) -> Client {
    let python = peers_dir().join("py/bin/python");
    assert!(python.is_file(), "{} is missing; run `cargo xtask peers`", python.display());
    let server = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/peers/py_http_server.py");
    let config = StdioConfig::new(
        python.to_string_lossy().into_owned(),
        [server.to_string_lossy().into_owned(), "stdio".to_owned()],
    );
    Client::connect(StdioTransport::spawn(confined(config)).unwrap(), options).await.unwrap()
}

/// Resources, a template, a text and a blob read, a prompt got with arguments and argument
/// completion, against the PyPI `mcp` server in the revision `options` leads to.
async fn python_resources_and_prompts(options: ClientOptions, expected_version: &str) {
    let client = python_stdio(options).await;
    assert_eq!(client.protocol_version().unwrap().as_str(), expected_version);
    let resources = client.list_all_resources(ListLimits::default()).await.unwrap();
    let mut uris: Vec<&str> = resources.iter().map(|r| r.uri.as_str()).collect();
    uris.sort_unstable();
    assert_eq!(uris, ["py://logo.png", "py://readme"], "{expected_version}");
    let templates = client.list_all_resource_templates(ListLimits::default()).await.unwrap();
    let patterns: Vec<&str> = templates.iter().map(|t| t.uri_template.as_str()).collect();
    assert_eq!(patterns, ["py://notes/{name}"], "{expected_version}");

    let max = mcp_client::DEFAULT_MAX_RESOURCE_BYTES;
    let text = client.read_resource("py://readme", max).await.unwrap();
    assert_eq!(text.contents[0].text.as_deref(), Some("Python readme.\nSecond line.\n"), "{expected_version}");
    let blob = client.read_resource("py://logo.png", max).await.unwrap();
    assert_eq!(blob.contents[0].blob.as_deref(), Some("iVBORw0KGgo="), "{expected_version}");
    assert_eq!(blob.contents[0].mime_type.as_deref(), Some("image/png"));
    let note = client.read_resource("py://notes/today", max).await.unwrap();
    assert_eq!(note.contents[0].text.as_deref(), Some("Note today."), "{expected_version}");

    let prompts = client.list_all_prompts(ListLimits::default()).await.unwrap();
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    let arguments: Vec<(&str, bool)> =
        prompts[0].arguments.iter().flatten().map(|a| (a.name.as_str(), a.required == Some(true))).collect();
    assert_eq!(arguments, [("code", true), ("language", false)], "{expected_version}");
    let got = client.get_prompt("review", args(json!({"code": "x = 1", "language": "rust"}))).await.unwrap();
    let messages: Vec<(&str, String)> = got.messages.iter().map(|m| (m.role.as_str(), text_of(&m.content))).collect();
    assert_eq!(
        messages,
        [("user", "Review this rust code:\nx = 1".to_owned()), ("assistant", "What should I look for?".to_owned())],
        "{expected_version}"
    );
    let err = client.get_prompt("review", None).await.unwrap_err();
    assert!(matches!(err, mcp_client::ClientError::Server { .. }), "a missing argument is refused: {err:?}");
    let reference = mcp_protocol::CompleteReference::prompt("review");
    let languages = client.complete(reference, "language", "r", None).await.unwrap();
    assert_eq!(languages.completion.values, ["ruby", "rust"], "{expected_version}");
    client.close().await.unwrap();
}

fn text_of(content: &mcp_protocol::ContentBlock) -> String {
    match content {
        mcp_protocol::ContentBlock::Text { text, .. } => text.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

#[tokio::test]
async fn python_resources_and_prompts_in_2025_11_25() {
    python_resources_and_prompts(ClientOptions::default(), "2025-11-25").await;
}

#[tokio::test]
async fn python_resources_and_prompts_in_2024_11_05() {
    let options = ClientOptions { offered_version: mcp_protocol::ProtocolVersion::V2024_11_05, ..Default::default() };
    python_resources_and_prompts(options, "2024-11-05").await;
}

#[tokio::test]
async fn python_resources_and_prompts_in_2026_07_28() {
    python_resources_and_prompts(auto(), "2026-07-28").await;
}
