//! The supervisor's events as telemetry: a stdio server that dies and comes back is counted
//! (starts, restarts) and told, as span events, to the agent task in flight.
//!
//! Its own test binary: it installs the process's telemetry.

#![cfg(unix)]
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::time::Duration;

use mcp_client::ServerState;
use mcp_fixtures::EVENT_DEADLINE;
use mcp_host::config::{self, ConfigPath, Origin};
use mcp_host::{Runtime, RuntimeOptions};
use mcp_telemetry::config::TelemetryConfig;
use mcp_telemetry::receiver::Receiver;
use mcp_telemetry::{Options, Telemetry};

/// The value of `name{...server="fx"...}` in Prometheus text.
fn counted(text: &str, name: &str) -> Option<f64> {
    text.lines()
        .filter(|l| l.starts_with(&format!("{name}{{")) && l.contains("mcp_harness_server=\"fx\""))
        .find_map(|l| l.rsplit(' ').next()?.parse().ok())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_is_counted_and_told_to_the_task_in_flight() {
    let receiver = Receiver::start().await.unwrap();
    let env = BTreeMap::from([("OTEL_EXPORTER_OTLP_ENDPOINT".to_owned(), receiver.http_endpoint())]);
    let resolved = TelemetryConfig::resolve(&Default::default(), &env, "host-test").unwrap();
    let telemetry = tokio::task::spawn_blocking(move || {
        Telemetry::start(&resolved, &Options::default().with_prometheus()).unwrap()
    })
    .await
    .unwrap();
    assert!(telemetry.install());

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("config.toml");
    let fixture = mcp_fixtures::server_binary().unwrap_or_else(|e| panic!("{e}")).display().to_string();
    std::fs::write(
        &path,
        format!(
            "[policy]\ndefault = \"allow\"\n[servers.fx]\ncommand = {fixture:?}\nargs = [\"echo\"]\nsandbox = \"off\"\n"
        ),
    )
    .unwrap();
    let config = config::load_at(&ConfigPath::new(Some(path), Origin::Flag, true), None).unwrap();
    let runtime = Runtime::start(config, RuntimeOptions::default());
    runtime.wait_first_attempts(EVENT_DEADLINE, &|_, _, _| {}).await;
    let first = runtime.servers().generation("fx").unwrap();

    // A task in flight while the server dies and comes back.
    let task = mcp_host::telemetry::agent_observer().unwrap().task();
    let _ = runtime.servers().call("fx", "crash", None, None, None).await;
    let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
    loop {
        let back = matches!(runtime.servers().state("fx"), Some(ServerState::Connected { .. }))
            && runtime.servers().generation("fx").is_some_and(|g| g > first && g != u64::MAX);
        if back {
            break;
        }
        assert!(tokio::time::Instant::now() < deadline, "fx did not come back: {:?}", runtime.servers().state("fx"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    // The counting task hears the events on its own time, on another worker.
    let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
    let mut text = telemetry.render_prometheus().unwrap();
    while (counted(&text, "mcp_harness_upstream_starts_total") != Some(2.0)
        || counted(&text, "mcp_harness_upstream_restarts_total").is_none())
        && tokio::time::Instant::now() < deadline
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
        text = telemetry.render_prometheus().unwrap();
    }
    // The start's span event and its publication are told just after its count: time for a
    // worker a loaded machine stopped.
    tokio::time::sleep(Duration::from_secs(1)).await;
    drop(task);

    assert_eq!(counted(&text, "mcp_harness_upstream_starts_total"), Some(2.0), "{text}");
    assert!(counted(&text, "mcp_harness_upstream_restarts_total").is_some_and(|n| n >= 1.0), "{text}");
    assert_eq!(counted(&text, "mcp_harness_upstream_start_failures_total"), None, "{text}");

    telemetry.flush();
    let deadline = tokio::time::Instant::now() + EVENT_DEADLINE;
    let task = loop {
        if let Some(span) = receiver.spans().into_iter().find(|s| s.name == "invoke_agent") {
            break span;
        }
        assert!(tokio::time::Instant::now() < deadline, "no task span: {:?}", receiver.spans());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    for event in ["mcp_harness.upstream.restart", "mcp_harness.upstream.start", "mcp_harness.upstream.publication"] {
        assert!(task.events.iter().any(|e| e == event), "{event} missing: {:?}", task.events);
    }
    let _ = telemetry.shutdown(Duration::from_secs(2));
}
