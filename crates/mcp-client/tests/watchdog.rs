//! The request-deadline watchdog thread starts only when a deadline could come due: not for a
//! session that is over within the start delay, in time for a timeout shorter than that delay,
//! and still after a runtime that ended before its scheduled start. A test binary of its own:
//! the watchdog is one per process.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_client::{ClientError, ConnectOptions, ServerSpec, TIMEOUT_GRANULARITY, WATCHDOG_START_DELAY, connect};
use mcp_transport::StdioConfig;

fn spec(tool_timeout: Duration) -> ServerSpec {
    let fixture = mcp_fixtures::server_binary().unwrap().display().to_string();
    let mut spec = ServerSpec::new("fx", Arc::new(StdioConfig::new(fixture, ["echo"])));
    spec.startup_timeout = Duration::from_secs(10);
    spec.tool_timeout = tool_timeout;
    spec
}

/// Threads of this process named like the watchdog.
fn watchdogs() -> usize {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(Result::ok)
        .filter(|task| std::fs::read_to_string(task.path().join("comm")).is_ok_and(|c| c.trim() == "mcp-deadlines"))
        .count()
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

#[test]
fn the_watchdog_starts_only_when_a_deadline_could_come_due() {
    // Connect, list, close: over in milliseconds, and the runtime with it.
    runtime().block_on(async {
        let c = connect(spec(Duration::from_secs(60)), &ConnectOptions::default()).await;
        assert!(c.is_connected(), "{}", c.state());
        c.close().await;
    });
    // Past the start its requests scheduled: the timer ended with its runtime.
    std::thread::sleep(WATCHDOG_START_DELAY * 2);
    assert_eq!(watchdogs(), 0, "a session over within the start delay started the watchdog");

    // A timeout far shorter than the start delay still fires about on time, on a new runtime.
    let timeout = Duration::from_millis(20);
    runtime().block_on(async {
        let c = connect(spec(timeout), &ConnectOptions::default()).await;
        assert!(c.is_connected(), "{}", c.state());
        let started = Instant::now();
        let err = c.call_tool("sleep", serde_json::json!({"ms": 5000}).as_object().cloned()).await.unwrap_err();
        let took = started.elapsed();
        assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
        assert!(
            took < WATCHDOG_START_DELAY,
            "a {timeout:?} timeout fired after {took:?} (granularity {TIMEOUT_GRANULARITY:?}): the watchdog waited for its start delay"
        );
        c.close().await;
    });
    assert_eq!(watchdogs(), 1);
}
