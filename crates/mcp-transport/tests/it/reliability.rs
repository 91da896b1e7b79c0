//! Faults a stdio server can cause, and what the client makes of them: an answer over the size
//! limit fails its call at once, a crash report carries the whole stderr tail, and nothing of a
//! server's process group outlives its session.

use std::time::{Duration, Instant};

use mcp_client::{Client, ClientError, ClientOptions, RequestOptions, TransportError};
use mcp_transport::StdioTransport;
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
    RequestOptions { timeout: Some(Duration::from_secs(600)), progress: None }
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
