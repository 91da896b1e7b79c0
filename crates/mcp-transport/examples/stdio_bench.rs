//! `stdio_bench [-n 2000] [--concurrency 1] [--tool echo] [--arg-name text] [--warmup 50] -- SERVER CMD...`
//!
//! Calls one tool n times through [`mcp_client::Client`] over stdio (one at a time, or
//! keeping `--concurrency` calls in flight), checks every reply, prints one JSON line.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

#[path = "common/bench_args.rs"]
mod bench_args;

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use mcp_client::{Client, ClientOptions, RequestOptions};
use mcp_transport::{StdioConfig, StdioTransport};
use serde_json::{Map, Value};

fn main() -> std::process::ExitCode {
    let args = match bench_args::parse_args() {
        Ok(args) => args,
        Err(e) => {
            eprintln!("stdio_bench: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    // Like the raw-pipe baseline (one thread when sequential, a writer and a reader thread
    // when pipelined), sequential calls run on one thread and concurrent ones on two workers.
    let runtime = if args.concurrency == 1 {
        tokio::runtime::Builder::new_current_thread().enable_all().build()
    } else {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
    };
    let runtime = match runtime {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("stdio_bench: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(args)) {
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

async fn run(args: bench_args::BenchArgs) -> Result<(), String> {
    let args = Arc::new(args);
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
