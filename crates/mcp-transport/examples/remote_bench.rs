//! `remote_bench [N]`: calls `echo` N times (default 2000) over each remote transport against
//! the in-process fixture servers (Streamable HTTP with JSON answers, with SSE answers, and
//! WebSocket), one at a time and with 32 in flight, and prints calls per second. Client and
//! server share the process and the machine, so the figures compare transports, not servers.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

use std::sync::Arc;
use std::time::Instant;

use mcp_client::{Client, ClientOptions, RequestOptions};
use mcp_fixtures::http::{HttpOptions, start};
use mcp_fixtures::ws::{WsOptions, start_ws};
use mcp_transport::{HttpConfig, HttpTransport, WebSocketConfig, WebSocketTransport};
use serde_json::json;

async fn measure(label: &str, client: Client, n: usize) -> Result<(), String> {
    let client = Arc::new(client);
    let args = json!({"text": "x"}).as_object().cloned();
    for _ in 0..50 {
        client.call_tool("echo", args.clone(), RequestOptions::default()).await.map_err(|e| e.to_string())?;
    }
    let started = Instant::now();
    for _ in 0..n {
        client.call_tool("echo", args.clone(), RequestOptions::default()).await.map_err(|e| e.to_string())?;
    }
    let sequential = n as f64 / started.elapsed().as_secs_f64();
    let started = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for worker in 0..32 {
        let client = Arc::clone(&client);
        let args = args.clone();
        tasks.spawn(async move {
            for _ in (worker..n).step_by(32) {
                client.call_tool("echo", args.clone(), RequestOptions::default()).await.map_err(|e| e.to_string())?;
            }
            Ok::<(), String>(())
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.map_err(|e| e.to_string())??;
    }
    let concurrent = n as f64 / started.elapsed().as_secs_f64();
    println!("{label:<24} {sequential:>10.0} {concurrent:>14.0}");
    client.close().await.map_err(|e| e.to_string())
}

async fn run(n: usize) -> Result<(), String> {
    println!("{:<24} {:>10} {:>14}", "transport", "calls/s", "32 in flight");
    for (label, json) in [("http (json answers)", true), ("http (sse answers)", false)] {
        let server = start(HttpOptions { json, ..HttpOptions::default() }, 0).await.map_err(|e| e.to_string())?;
        let transport = HttpTransport::new(HttpConfig::new(server.url())).map_err(|e| e.to_string())?;
        let client = Client::connect(transport, ClientOptions::default()).await.map_err(|e| e.to_string())?;
        measure(label, client, n).await?;
    }
    let server = start_ws(WsOptions::default()).await.map_err(|e| e.to_string())?;
    let transport = WebSocketTransport::connect(WebSocketConfig::new(server.url())).await.map_err(|e| e.to_string())?;
    let client = Client::connect(transport, ClientOptions::default()).await.map_err(|e| e.to_string())?;
    measure("websocket", client, n).await
}

fn main() -> std::process::ExitCode {
    let n = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(2000);
    let runtime = match tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("remote_bench: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(n)) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("remote_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}
