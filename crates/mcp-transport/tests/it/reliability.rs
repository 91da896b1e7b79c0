//! Faults a stdio server can cause, and what the client makes of them: an answer over the size
//! limit fails its call at once, a crash report carries the whole stderr tail, and nothing of a
//! server's process group outlives its session.

use std::time::{Duration, Instant};

use mcp_client::{Client, ClientError, ClientOptions, RequestOptions, TransportError};
use mcp_fixtures::http::HttpOptions;
use mcp_transport::{HttpConfig, HttpTransport, MIN_STREAM_RETRY, STREAM_RECONNECT, StdioTransport};
use serde_json::json;

use crate::{args, connect, connect_with, fixture, process_gone};

/// Waits for `done` (polling; the machine is loaded, so the deadline is generous).
fn wait_for(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(20);
    while !done() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn long_call() -> RequestOptions {
    // Far longer than the test may take: the failure must come from the transport.
    RequestOptions { timeout: Some(Duration::from_secs(600)), progress: None, max_total: None }
}

#[tokio::test]
async fn an_answer_over_the_size_limit_fails_its_call_at_once() {
    let mut config = fixture("hostile", &[]);
    config.max_message_bytes = 64 * 1024;
    let client = connect_with(config, ClientOptions::default()).await;
    for id_last in [false, true] {
        let call = client.call_tool("big", args(json!({"bytes": 200_000, "id_last": id_last})), long_call());
        let err = tokio::time::timeout(Duration::from_secs(60), call).await.expect("not left to its timeout");
        match err {
            Err(ClientError::Transport(e @ TransportError::AnswerTooLarge { .. })) => {
                assert_eq!(e.to_string(), "the answer was larger than 64 KiB (max_message_bytes); it was discarded");
            }
            other => panic!("id_last {id_last}: {other:?}"),
        }
    }
    // The connection goes on.
    let small = client.call_tool("big", args(json!({"bytes": 10})), long_call()).await.unwrap();
    assert_eq!(small.joined_text().len(), 10);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_crash_report_carries_the_servers_last_stderr_lines_whole() {
    // Several at once: the stderr reader must not be outrun by the report.
    let runs = (0..4).map(|_| async {
        let client = connect("hostile", &[]).await;
        let err = client.call_tool("traceback", args(json!({"lines": 15})), long_call()).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("exited (status 3)"), "{text}");
        for i in 1..=15 {
            assert!(text.contains(&format!("traceback line {i} of 15")), "line {i} is missing: {text}");
        }
    });
    futures_util::future::join_all(runs).await;
}

/// Starts a child of the server that would outlive it, and returns its pid.
async fn spawn_child(client: &Client) -> u32 {
    let pid = client.call_tool("spawn_child", None, long_call()).await.unwrap().joined_text();
    let pid: u32 = pid.parse().unwrap_or_else(|_| panic!("{pid}"));
    assert!(!process_gone(pid));
    pid
}

fn kill(pid: u32) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGKILL);
}

#[tokio::test]
async fn a_server_that_exits_politely_leaves_nothing_of_its_process_group() {
    let transport = StdioTransport::spawn(fixture("hostile", &[])).unwrap();
    let server = transport.pid().unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    let child = spawn_child(&client).await;
    client.close().await.unwrap();
    assert!(process_gone(server));
    let gone = std::panic::catch_unwind(|| wait_for("the server's child to be gone", || process_gone(child)));
    kill(child);
    assert!(gone.is_ok(), "the child of a server that exited at end of input was left running");
}

#[tokio::test]
async fn a_server_that_crashes_leaves_nothing_of_its_process_group() {
    let client = connect("hostile", &[]).await;
    let child = spawn_child(&client).await;
    let err = client.call_tool("crash", None, long_call()).await.unwrap_err();
    assert!(err.to_string().contains("exited"), "{err}");
    let gone = std::panic::catch_unwind(|| wait_for("the crashed server's child to be gone", || process_gone(child)));
    kill(child);
    assert!(gone.is_ok(), "the child of a crashed server was left running");
    client.close().await.unwrap();
}

/// Fails on any character that could drive a terminal (escapes, CR, C1, bidi overrides).
fn assert_clean(text: &str) {
    let bad: Vec<char> = text.chars().filter(|&c| mcp_safety::text::is_stripped(c)).collect();
    assert!(bad.is_empty(), "{bad:?} in {text:?}");
}

async fn http_client(options: HttpOptions) -> (mcp_fixtures::http::RunningServer, Client) {
    let server = mcp_fixtures::http::start(options, 0).await.unwrap();
    let transport = HttpTransport::new(HttpConfig::new(server.url())).unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    (server, client)
}

/// A server whose GET stream ends at once, with a new event id each time and `retry: 0` (or no
/// `retry:` at all), once got about 70 GETs a second; one asking for more than the floor gets it.
#[tokio::test]
async fn stream_reconnects_wait_at_least_the_floor_and_retry_only_lengthens_it() {
    let window = Duration::from_secs(3);
    let floor = STREAM_RECONNECT.initial_delay / 2;
    let modes = [
        ("retry: 0", HttpOptions { get_ends: true, retry_ms: 0, ..HttpOptions::default() }),
        ("no retry:", HttpOptions { get_ends: true, no_retry: true, ..HttpOptions::default() }),
        ("retry: 4000", HttpOptions { get_ends: true, retry_ms: 4000, ..HttpOptions::default() }),
    ];
    let runs = modes.into_iter().map(|(name, options)| async move {
        let (server, client) = http_client(options).await;
        // Counting GETs over a window needs the window to pass.
        tokio::time::sleep(window + Duration::from_millis(500)).await;
        let gets: Vec<Instant> = server.seen().into_iter().filter(|r| r.http_method == "GET").map(|r| r.at).collect();
        client.close().await.unwrap();
        (name, gets)
    });
    for (name, gets) in futures_util::future::join_all(runs).await {
        let first = gets[0];
        let in_window = gets.iter().filter(|at| **at - first < window).count();
        // The first reconnect may be as soon as the server's retry: (not below MIN_STREAM_RETRY).
        let most = 2 + (window.as_millis() / floor.as_millis()) as usize;
        assert!(in_window <= most, "{name}: {in_window} GETs in {window:?}, more than {most}");
        for (i, pair) in gets.windows(2).enumerate() {
            let least = if i == 0 && name == "retry: 0" { MIN_STREAM_RETRY } else { floor };
            assert!(pair[1] - pair[0] >= least, "{name}: reconnect {i} after {:?}", pair[1] - pair[0]);
        }
        if name == "retry: 4000" {
            assert_eq!(in_window, 1, "{name}: retry: lengthens the wait");
        }
    }
}

#[tokio::test]
async fn an_html_page_instead_of_an_answer_says_what_came_back() {
    let (_server, client) = http_client(HttpOptions { json: true, html: true, ..HttpOptions::default() }).await;
    let err = client.call_tool("echo", args(json!({"text": "x"})), long_call()).await.unwrap_err().to_string();
    for part in ["HTTP 200 OK", "text/html", "<!DOCTYPE html><html><body><h1>Sign in HOSTILE<", ">END"] {
        assert!(err.contains(part), "{part:?} is missing: {err}");
    }
    assert_clean(&err);
    client.close().await.unwrap();
}

#[tokio::test]
async fn an_http_error_body_is_shown_cleaned() {
    let (_server, client) = http_client(HttpOptions { hostile_error: true, ..HttpOptions::default() }).await;
    let err = client.call_tool("echo", args(json!({"text": "x"})), long_call()).await.unwrap_err().to_string();
    assert!(err.contains("500") && err.contains("upstream failed: HOSTILE<") && err.contains(">END"), "{err}");
    assert_clean(&err);
    client.close().await.unwrap();
}

/// A `cwd` that does not exist made spawn fail with "No such file or directory", which read as
/// if the program were missing.
#[test]
fn a_missing_working_directory_is_named_as_such() {
    let root = tempfile::tempdir().unwrap();
    let mut config = fixture("echo", &[]);
    config.cwd = Some(root.path().join("not-there"));
    let Err(err) = StdioTransport::spawn(config) else { panic!("started in a missing directory") };
    let err = err.to_string();
    assert!(err.contains("working directory") && err.contains("not-there") && err.contains("does not exist"), "{err}");
    assert!(!err.contains("No such file"), "{err}");
    // A missing program still says so.
    let mut config = fixture("echo", &[]);
    config.command = root.path().join("no-such-server").display().to_string();
    let Err(err) = StdioTransport::spawn(config) else { panic!("a missing program started") };
    let err = err.to_string();
    assert!(err.contains("no-such-server") && !err.contains("working directory"), "{err}");
}
