//! The stdio adapter and the client against the Rust fixture servers.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcp_client::{Client, ClientError, ClientOptions, ListLimits, RequestOptions, ServerRequestHandler};
use mcp_protocol::ErrorObject;
use mcp_protocol::{ClientCapabilities, ListRootsResult, Root, RootsCapability, ServerNotification};
use mcp_transport::StdioTransport;
use serde_json::json;
use tokio::sync::mpsc;

use mcp_fixtures::{EVENT_DEADLINE, wait_until};

use crate::{args, connect, connect_with, fixture, is_zombie, process_gone};

#[tokio::test]
async fn handshake_list_and_call() {
    let client = connect("echo", &[]).await;
    let info = client.server_info().unwrap();
    assert_eq!(info.server_info.name, "mcp-fixture-server");
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    let names: Vec<_> = tools.iter().map(|t| t.name.as_str()).collect();
    assert!(names.contains(&"echo") && names.contains(&"add"), "{names:?}");
    let result = client.call_tool("echo", args(json!({"text": "héllo"})), RequestOptions::default()).await.unwrap();
    assert_eq!(result.joined_text(), "héllo");
    assert!(!result.is_error());
    let result = client.call_tool("add", args(json!({"a": 2, "b": 40})), RequestOptions::default()).await.unwrap();
    assert_eq!(result.joined_text(), "42");
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test]
async fn tool_errors_and_unknown_tools_are_results_or_server_errors() {
    let client = connect("echo", &[]).await;
    let result = client.call_tool("echo", args(json!({})), RequestOptions::default()).await.unwrap();
    assert!(result.is_error());
    let err = client.call_tool("nope", None, RequestOptions::default()).await.unwrap_err();
    match err {
        ClientError::Server { method, error } => {
            assert_eq!(method, "tools/call");
            assert!(error.message.contains("nope"), "{error}");
        }
        other => panic!("expected a server error, got {other:?}"),
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn many_requests_in_flight_at_once() {
    // In `gather` mode no call is answered before all 20 are running at the server together
    // (one that waits in vain gets an error result), so only real overlap passes.
    let client = Arc::new(connect("gather", &["--peers", "20"]).await);
    let calls = (0..20).map(|i| {
        let client = Arc::clone(&client);
        tokio::spawn(async move {
            let r = client.call_tool("echo", args(json!({"text": format!("n{i}")})), RequestOptions::default()).await;
            (i, r)
        })
    });
    for call in calls.collect::<Vec<_>>() {
        let (i, result) = call.await.unwrap();
        assert_eq!(result.unwrap().joined_text(), format!("n{i}"), "each caller gets its own answer");
    }
    assert_eq!(client.pending_requests(), 0);
}

#[tokio::test]
async fn timeout_cancels_and_the_connection_stays_usable() {
    let client = connect("echo", &[]).await;
    let options = RequestOptions { timeout: Some(Duration::from_millis(200)), progress: None, max_total: None };
    let err = client.call_tool("sleep", args(json!({"ms": 3000})), options).await.unwrap_err();
    assert!(matches!(err, ClientError::Timeout { ref method, .. } if method == "tools/call"), "{err:?}");
    assert!(err.to_string().contains("cancelled"));
    assert_eq!(client.pending_requests(), 0);
    let result =
        client.call_tool("echo", args(json!({"text": "still here"})), RequestOptions::default()).await.unwrap();
    assert_eq!(result.joined_text(), "still here");
    client.close().await.unwrap();
}

/// The progress a caller with a channel of `room` holds after a 100 ms `sleep` (ten reports),
/// read only once the call is over.
async fn progress_held(room: usize) -> Vec<f64> {
    let client = connect("echo", &[]).await;
    let (tx, mut rx) = mpsc::channel(room);
    let options = RequestOptions { timeout: None, progress: Some(tx), max_total: None };
    let result = client.call_tool("sleep", args(json!({"ms": 100})), options).await.unwrap();
    assert_eq!(result.joined_text(), "slept 100 ms");
    let mut seen = Vec::new();
    while let Ok(p) = rx.try_recv() {
        seen.push(p.progress);
    }
    client.close().await.unwrap();
    seen
}

#[tokio::test]
async fn progress_reaches_the_caller_of_that_request() {
    let seen = progress_held(mcp_client::PROGRESS_BACKLOG).await;
    assert_eq!(seen.len(), 10, "{seen:?}");
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "progress increases: {seen:?}");
}

/// A caller that does not read its progress (its output blocked) misses reports once its
/// channel is full; nothing queues without end.
#[tokio::test]
async fn progress_a_caller_does_not_read_is_dropped_once_its_channel_is_full() {
    let seen = progress_held(4).await;
    assert_eq!(seen.len(), 4, "{seen:?}");
}

struct Roots;

#[async_trait]
impl ServerRequestHandler for Roots {
    async fn list_roots(&self) -> Result<ListRootsResult, ErrorObject> {
        Ok(ListRootsResult {
            roots: vec![Root { uri: "file:///work".into(), name: Some("work".into()), extra: Default::default() }],
            extra: Default::default(),
        })
    }
}

#[tokio::test]
async fn server_requests_go_to_the_handler_and_defaults_decline() {
    let options = ClientOptions {
        handler: Arc::new(Roots),
        capabilities: ClientCapabilities {
            roots: Some(RootsCapability { list_changed: Some(false), extra: Default::default() }),
            ..Default::default()
        },
        ..ClientOptions::default()
    };
    let client = connect_with(fixture("echo", &[]), options).await;
    let roots = client.call_tool("ask_roots", None, RequestOptions::default()).await.unwrap().joined_text();
    assert!(roots.contains("file:///work"), "{roots}");
    let sampling = client.call_tool("ask_sampling", None, RequestOptions::default()).await.unwrap().joined_text();
    assert!(sampling.contains("does not allow servers to sample"), "{sampling}");
    let elicit = client.call_tool("ask_elicitation", None, RequestOptions::default()).await.unwrap().joined_text();
    assert_eq!(elicit, r#"{"action":"decline"}"#);
    client.close().await.unwrap();
}

#[tokio::test]
async fn list_changed_reaches_subscribers() {
    let transport = StdioTransport::spawn(fixture("list-changing", &[])).unwrap();
    let client = Client::start(transport, ClientOptions::default());
    let mut notifications = client.subscribe();
    client.initialize().await.unwrap();
    let first = tokio::time::timeout(EVENT_DEADLINE, notifications.recv()).await.unwrap().unwrap();
    assert!(matches!(first, ServerNotification::ToolsListChanged), "{first:?}");
    let before = client.list_all_tools(ListLimits::default()).await.unwrap().len();
    client.call_tool("add_tool", args(json!({"name": "fresh"})), RequestOptions::default()).await.unwrap();
    let next = tokio::time::timeout(EVENT_DEADLINE, notifications.recv()).await.unwrap().unwrap();
    assert!(matches!(next, ServerNotification::ToolsListChanged), "{next:?}");
    let after = client.list_all_tools(ListLimits::default()).await.unwrap();
    assert_eq!(after.len(), before + 1);
    assert!(after.iter().any(|t| t.name == "fresh"));
    client.close().await.unwrap();
}

#[tokio::test]
async fn pagination_follows_cursors_within_limits() {
    let client = connect("paginate", &["--page-size", "3", "--extra-tools", "20"]).await;
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    assert_eq!(tools.len(), 30);
    let err = client
        .list_all_tools(ListLimits { max_pages: 5, max_items: 10_000, ..ListLimits::default() })
        .await
        .unwrap_err();
    assert!(matches!(err, ClientError::TooManyPages { limit: 5, .. }), "{err:?}");
    let err =
        client.list_all_tools(ListLimits { max_pages: 100, max_items: 10, ..ListLimits::default() }).await.unwrap_err();
    assert!(matches!(err, ClientError::TooManyItems { limit: 10, .. }), "{err:?}");
    client.close().await.unwrap();

    let client = connect("paginate", &["--repeat-cursor"]).await;
    let err = client.list_all_tools(ListLimits::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::RepeatedCursor { .. }), "{err:?}");
    client.close().await.unwrap();

    let client = connect("paginate", &["--endless", "--page-size", "1"]).await;
    let err = client.list_all_tools(ListLimits::default()).await.unwrap_err();
    assert!(matches!(err, ClientError::TooManyPages { limit: 100, .. } | ClientError::TooManyItems { .. }), "{err:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_crash_fails_every_pending_request_at_once() {
    let client = Arc::new(connect("echo", &[]).await);
    let sleepers: Vec<_> = (0..5)
        .map(|_| {
            let client = Arc::clone(&client);
            tokio::spawn(async move {
                client.call_tool("sleep", args(json!({"ms": 20_000})), RequestOptions::default()).await
            })
        })
        .collect();
    assert!(wait_until(EVENT_DEADLINE, || client.pending_requests() == 5).await, "the sleepers are in flight");
    let crash = client.call_tool("crash", None, RequestOptions::default()).await.unwrap_err();
    assert!(matches!(crash, ClientError::ConnectionClosed { .. }), "{crash:?}");
    let reason = crash.to_string();
    assert!(reason.contains("exited (status 3)"), "the reason names the exit status: {reason}");
    assert!(reason.contains("its last stderr lines: fixture crashing on purpose"), "and the stderr tail: {reason}");
    for sleeper in sleepers {
        // Failed by the crash with the same reason, not by a timeout (a minute away).
        let err = sleeper.await.unwrap().unwrap_err();
        assert!(matches!(err, ClientError::ConnectionClosed { .. }), "{err:?}");
        assert_eq!(err.to_string(), reason);
    }
    assert!(!client.is_open());
    let err = client.ping().await.unwrap_err();
    assert!(matches!(err, ClientError::Session(_) | ClientError::ConnectionClosed { .. }), "{err:?}");
}

#[tokio::test]
async fn crash_mode_server_exits_on_first_call() {
    let client = connect("crash", &[]).await;
    let err = client.call_tool("echo", args(json!({"text": "x"})), RequestOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("exited"), "{err}");
}

#[tokio::test]
async fn garbage_and_oversize_lines_are_skipped() {
    let mut config = fixture("garbage", &["--huge-line", "200000"]);
    config.max_message_bytes = 100_000;
    let client = connect_with(config, ClientOptions::default()).await;
    for i in 0..5 {
        let text = format!("through the noise {i}");
        let result = client.call_tool("echo", args(json!({"text": text})), RequestOptions::default()).await.unwrap();
        assert_eq!(result.joined_text(), text);
    }
    assert_eq!(client.list_all_tools(ListLimits::default()).await.unwrap().len(), 10);
    client.close().await.unwrap();
}

/// An answer that is not UTF-8 fails its call at once, saying so (it was dropped, and the call
/// waited out its whole timeout); the connection goes on.
#[tokio::test]
async fn an_answer_that_is_not_utf8_fails_its_call_at_once() {
    let client = connect_with(fixture("echo", &["--not-utf8"]), ClientOptions::default()).await;
    let options = RequestOptions { timeout: Some(std::time::Duration::from_secs(30)), ..RequestOptions::default() };
    let started = std::time::Instant::now();
    let err = client.call_tool("echo", args(json!({"text": "x"})), options).await.unwrap_err();
    assert!(err.to_string().contains("not UTF-8"), "{err}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10), "it waited {:?}", started.elapsed());
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test]
async fn the_child_gets_only_allowlisted_and_configured_environment() {
    // Cargo sets CARGO_PKG_NAME for every test process: a host variable outside the allowlist.
    assert!(std::env::var("CARGO_PKG_NAME").is_ok());
    let mut config = fixture("echo", &[]);
    config.env.insert("GIVEN_TO_SERVER".into(), "yes".into());
    let client = connect_with(config, ClientOptions::default()).await;
    let read = |name: &'static str| {
        let client = &client;
        async move {
            client.call_tool("env", args(json!({"name": name})), RequestOptions::default()).await.unwrap().joined_text()
        }
    };
    assert_eq!(read("CARGO_PKG_NAME").await, "<unset>");
    assert_eq!(read("GIVEN_TO_SERVER").await, "yes");
    assert_eq!(read("PATH").await, std::env::var("PATH").unwrap());
    client.close().await.unwrap();
}

#[tokio::test]
async fn stderr_is_kept_bounded() {
    let mut config = fixture("echo", &[]);
    config.stderr_buffer_bytes = 1000;
    let transport = StdioTransport::spawn(config).unwrap();
    let tail = transport.stderr_tail();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    client.call_tool("stderr", args(json!({"lines": 500})), RequestOptions::default()).await.unwrap();
    let last = |tail: &mcp_transport::StderrTail| tail.lines().last().cloned();
    let read = wait_until(EVENT_DEADLINE, || last(&tail).as_deref() == Some("fixture stderr line 499")).await;
    assert!(read, "the last line was read: {:?}", last(&tail));
    let lines = tail.lines();
    let bytes: usize = lines.iter().map(String::len).sum();
    assert!(bytes <= 1000, "kept {bytes} bytes");
    assert_eq!(lines.last().map(String::as_str), Some("fixture stderr line 499"));
    client.close().await.unwrap();
}

#[tokio::test]
async fn close_reaps_the_child() {
    let transport = StdioTransport::spawn(fixture("echo", &[])).unwrap();
    let pid = transport.pid().unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    client.close().await.unwrap();
    assert!(process_gone(pid), "pid {pid} still exists after close");
}

#[tokio::test]
async fn close_escalates_when_the_server_ignores_stdin_eof() {
    // A server busy in a long call that does not exit at the end of its stdin (`--linger`):
    // close must still end it, and the call in flight must fail rather than hang.
    let dir = tempfile::tempdir().unwrap();
    let record = dir.path().join("received.jsonl");
    let record_flag = record.to_str().unwrap();
    let config = fixture("slow", &["--delay-ms", "600000", "--linger", "--log", record_flag]);
    let grace = config.close_grace;
    let transport = StdioTransport::spawn(config).unwrap();
    let pid = transport.pid().unwrap();
    let tail = transport.stderr_tail();
    let client = Arc::new(Client::connect(transport, ClientOptions::default()).await.unwrap());
    let busy = {
        let client = Arc::clone(&client);
        tokio::spawn(
            async move { client.call_tool("echo", args(json!({"text": "x"})), RequestOptions::default()).await },
        )
    };
    let received = || std::fs::read_to_string(&record).unwrap_or_default().contains(r#""method":"tools/call""#);
    assert!(wait_until(EVENT_DEADLINE, received).await, "the server is busy with the call");
    let started = Instant::now();
    tokio::time::timeout(EVENT_DEADLINE, client.close()).await.expect("close ended the server").unwrap();
    assert!(process_gone(pid), "pid {pid} survived close");
    assert!(started.elapsed() >= grace, "it waited for the server to exit after EOF first");
    let lines = tail.lines();
    assert!(lines.iter().any(|l| l.contains("stdin closed; finishing the calls")), "it saw EOF and stayed: {lines:?}");
    let err = busy.await.unwrap().unwrap_err();
    assert!(err.to_string().contains("closed by the client"), "{err}");
}

#[tokio::test]
async fn dropping_the_client_leaves_no_zombie() {
    let transport = StdioTransport::spawn(fixture("echo", &[])).unwrap();
    let pid = transport.pid().unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    drop(client);
    let gone = wait_until(EVENT_DEADLINE, || process_gone(pid)).await;
    assert!(gone, "pid {pid} still there (zombie: {})", is_zombie(pid));
}

#[tokio::test]
async fn spawn_failure_names_the_command() {
    let config = mcp_transport::StdioConfig::new("/definitely/not/a/server", ["--flag"]);
    let err = StdioTransport::spawn(config).unwrap_err();
    let text = err.to_string();
    assert!(text.contains("/definitely/not/a/server --flag"), "{text}");
}

/// The fixture server configured by name, found on a PATH given in its configuration only.
fn fixture_by_name(dir: &std::path::Path, name: &str) -> mcp_transport::StdioConfig {
    let mut config = fixture("echo", &[]);
    config.command = name.to_owned();
    config.env.insert("PATH".into(), dir.display().to_string());
    config
}

#[tokio::test]
async fn a_server_named_on_its_own_path_starts_under_its_name() {
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    let (dir, name) = (binary.parent().unwrap(), binary.file_name().unwrap().to_str().unwrap());
    assert!(!std::env::var("PATH").unwrap().split(':').any(|d| std::path::Path::new(d) == dir));
    let transport = StdioTransport::spawn(fixture_by_name(dir, name)).unwrap();
    let pid = transport.pid().unwrap();
    // The kernel wakes a vfork parent before it has laid out the new image's arguments, so
    // for a moment after the spawn returns, cmdline is empty.
    let read_cmdline = || std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
    assert!(wait_until(EVENT_DEADLINE, || !read_cmdline().is_empty()).await, "pid {pid} has no cmdline");
    let cmdline = read_cmdline();
    assert_eq!(cmdline.split(|b| *b == 0).next(), Some(name.as_bytes()), "argv[0] is the configured name");
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    let text = client.call_tool("echo", args(json!({"text": "hi"})), RequestOptions::default()).await.unwrap();
    assert_eq!(text.joined_text(), "hi");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_script_without_an_interpreter_line_is_run_by_the_shell_as_before() {
    use std::os::unix::fs::PermissionsExt as _;
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("plain-script-server");
    let binary = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(&script, format!("exec '{}' echo\n", binary.display())).unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let config = fixture_by_name(dir.path(), "plain-script-server");
    let client = connect_with(config, ClientOptions::default()).await;
    let text = client.call_tool("echo", args(json!({"text": "hi"})), RequestOptions::default()).await.unwrap();
    assert_eq!(text.joined_text(), "hi");
    client.close().await.unwrap();
}

#[tokio::test]
async fn close_escalates_to_sigkill_for_a_process_that_ignores_eof_and_sigterm() {
    let script = "trap '' TERM; echo ignoring TERM >&2; while true; do sleep 1; done";
    let mut config = mcp_transport::StdioConfig::new("sh", ["-c", script]);
    config.close_grace = Duration::from_millis(300);
    let transport = StdioTransport::spawn(config).unwrap();
    let pid = transport.pid().unwrap();
    let tail = transport.stderr_tail();
    // Until the trap is set a SIGTERM would end it: wait for the shell to say so.
    assert!(wait_until(EVENT_DEADLINE, || !tail.lines().is_empty()).await, "the shell started");
    let (mut sink, _stream) = mcp_client::Transport::split(Box::new(transport));
    let started = Instant::now();
    tokio::time::timeout(EVENT_DEADLINE, sink.close()).await.expect("SIGKILL ended it").unwrap();
    assert!(process_gone(pid), "pid {pid} survived");
    assert!(started.elapsed() >= Duration::from_millis(600), "it waited after EOF and after SIGTERM");
}

#[tokio::test]
async fn large_concurrent_messages_arrive_whole_and_in_order() {
    // Each request is larger than a pipe's buffer, so writes are partial and queue up behind
    // each other; every answer must still match its request.
    let client = Arc::new(connect("echo", &[]).await);
    let calls: Vec<_> = (0..12)
        .map(|i| {
            let client = Arc::clone(&client);
            tokio::spawn(async move {
                let text = format!("{i}:{}", "x".repeat(200_000 + i));
                let result = client.call_tool("echo", args(json!({"text": text})), RequestOptions::default()).await;
                (text, result)
            })
        })
        .collect();
    for call in calls {
        let (text, result) = call.await.unwrap();
        assert_eq!(result.unwrap().joined_text(), text);
    }
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_stops_reading_fails_sends_instead_of_hoarding_memory() {
    // This server answers the handshake, then never reads its stdin again: once the pipe is
    // full, bytes wait in the client's backlog, which is bounded.
    let script = r#"read line; printf '%s\n' '{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","capabilities":{},"serverInfo":{"name":"deaf","version":"1"}}}'; sleep 60"#;
    let mut config = mcp_transport::StdioConfig::new("sh", ["-c", script]);
    config.close_grace = Duration::from_millis(100);
    let transport = StdioTransport::spawn(config).unwrap();
    let options = ClientOptions { max_backlog_bytes: 4 * 1024 * 1024, ..ClientOptions::default() };
    let client = Arc::new(Client::connect(transport, options).await.unwrap());
    let big = "y".repeat(1024 * 1024);
    let mut failed = None;
    for _ in 0..16 {
        let client = Arc::clone(&client);
        let big = big.clone();
        let attempt = tokio::time::timeout(Duration::from_millis(50), async move {
            client.request_raw("x/big", Some(&json!({"blob": big})), RequestOptions::default()).await
        })
        .await;
        if let Ok(Err(e)) = attempt {
            failed = Some(e);
            break;
        }
    }
    let err = failed.expect("a send failed once the backlog was full");
    assert!(err.to_string().contains("not reading its input"), "{err}");
}

/// Pins the calling thread (and so the processes it spawns from now on) to one CPU.
fn pin_this_thread_to_one_cpu() {
    use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
    use nix::unistd::Pid;
    let ours = sched_getaffinity(Pid::from_raw(0)).unwrap();
    let cpu = (0..CpuSet::count()).find(|&c| ours.is_set(c).unwrap_or(false)).unwrap();
    let mut one = CpuSet::new();
    one.set(cpu).unwrap();
    sched_setaffinity(Pid::from_raw(0), &one).unwrap();
}

/// Whether the client would coalesce the writes of concurrent callers to this server.
fn shares_one_cpu(transport: StdioTransport) -> bool {
    let (sink, _stream) = (Box::new(transport) as Box<dyn mcp_client::Transport>).split();
    sink.direct().unwrap().shares_one_cpu()
}

#[tokio::test]
async fn a_server_pinned_to_our_cpu_gets_coalesced_writes_and_every_caller_its_answer() {
    // A server spawned before the pin may run on another CPU: its messages are written at once.
    let unpinned = StdioTransport::spawn(fixture("echo", &[])).unwrap();
    if std::thread::available_parallelism().map_or(1, |n| n.get()) > 1 {
        assert!(!shares_one_cpu(unpinned), "the server may run on another CPU");
    }
    pin_this_thread_to_one_cpu();
    assert!(shares_one_cpu(StdioTransport::spawn(fixture("echo", &[])).unwrap()), "pinned together");
    // Calls in flight together queue behind each other for one write; each gets its own answer.
    let client = Arc::new(connect("echo", &[]).await);
    for round in 0..8 {
        let calls: Vec<_> = (0..50)
            .map(|i| {
                let client = Arc::clone(&client);
                tokio::spawn(async move {
                    let text = format!("{round}/{i}");
                    let result = client.call_tool("echo", args(json!({"text": text})), RequestOptions::default()).await;
                    (text, result)
                })
            })
            .collect();
        for call in calls {
            let (text, result) = call.await.unwrap();
            assert_eq!(result.unwrap().joined_text(), text, "each caller gets its own answer");
        }
    }
    assert_eq!(client.pending_requests(), 0);
    client.close().await.unwrap();
}
