//! `stdio_bench [-n 2000] [--concurrency 1] [--tool echo] [--arg-name text] [--warmup 50] -- SERVER CMD...`
//!
//! Calls one tool n times through [`mcp_transport::Client`] over stdio (one at a time, or
//! keeping `--concurrency` calls in flight), checks every reply, prints one JSON line.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

#[path = "common/bench_args.rs"]
mod bench_args;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mcp_transport::{Client, ClientOptions, RequestOptions, StdioConfig, StdioTransport};
use serde_json::{Map, Value};

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    match run().await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("stdio_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn call(client: &Client, args: &bench_args::BenchArgs, i: usize) -> Result<(), String> {
    let text = format!("hello {i}");
    let mut arguments = Map::new();
    arguments.insert(args.arg_name.clone(), Value::String(text.clone()));
    let result =
        client.call_tool(&args.tool, Some(arguments), RequestOptions::default()).await.map_err(|e| e.to_string())?;
    let got = result.joined_text();
    if result.is_error() || !got.contains(&text) {
        return Err(format!("call {i}: unexpected reply {got:?}"));
    }
    Ok(())
}

async fn run() -> Result<(), String> {
    let args = Arc::new(bench_args::parse_args()?);
    let config = StdioConfig::new(args.command[0].clone(), args.command[1..].to_vec());
    let transport = StdioTransport::spawn(config).map_err(|e| e.to_string())?;
    let client = Arc::new(Client::connect(transport, ClientOptions::default()).await.map_err(|e| e.to_string())?);
    for i in 0..args.warmup {
        call(&client, &args, i).await?;
    }
    let next = Arc::new(AtomicUsize::new(0));
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency {
        let (client, args, next) = (Arc::clone(&client), Arc::clone(&args), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= args.n {
                    return Ok::<_, String>(latencies);
                }
                let t = Instant::now();
                call(&client, &args, i).await?;
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }));
    }
    let mut latencies = Vec::with_capacity(args.n);
    for w in workers {
        latencies.extend(w.await.map_err(|e| e.to_string())??);
    }
    let elapsed = started.elapsed();
    bench_args::report("mcp-harness", &args, elapsed, latencies);
    if let Ok(client) = Arc::try_unwrap(client) {
        client.close().await.map_err(|e| e.to_string())?;
    }
    Ok(())
}
