//! `raw_pipe_bench [same arguments as stdio_bench]`: the "no MCP layer" baseline.
//!
//! Newline-delimited JSON over the child's pipes with plain threads: one writer keeping
//! `--concurrency` requests in flight, one reader parsing and checking each reply. No
//! session, no channels per request: what the pipe and the server allow.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

#[path = "common/bench_args.rs"]
mod bench_args;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Instant;

use serde_json::{Value, json};

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("raw_pipe_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

fn request(id: usize, args: &bench_args::BenchArgs) -> String {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
           "params": {"name": args.tool, "arguments": {args.arg_name.clone(): format!("hello {id}")}}})
    .to_string()
}

/// The id of the reply on `line`, checked; `None` for a notification (a gateway in front of the
/// server may send some, `notifications/tools/list_changed` for one), which is skipped.
fn check(line: &str) -> Result<Option<usize>, String> {
    let v: Value = serde_json::from_str(line).map_err(|e| format!("bad reply: {e}"))?;
    if v.get("id").is_none() && v.get("method").is_some() {
        return Ok(None);
    }
    let id = v["id"].as_u64().ok_or("reply without id")? as usize;
    let text = v["result"]["content"][0]["text"].as_str().ok_or("reply without text")?;
    if !text.contains(&format!("hello {id}")) {
        return Err(format!("reply {id} has text {text:?}"));
    }
    Ok(Some(id))
}

/// Reads lines until a reply comes (notifications skipped); its id.
fn reply(stdout: &mut impl BufRead, line: &mut String) -> Result<usize, String> {
    loop {
        line.clear();
        if stdout.read_line(line).map_err(|e| e.to_string())? == 0 {
            return Err("server closed stdout".into());
        }
        if let Some(id) = check(line)? {
            return Ok(id);
        }
    }
}

fn run() -> Result<(), String> {
    let args = bench_args::parse_args()?;
    let mut child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut stdin = BufWriter::new(child.stdin.take().ok_or("no stdin")?);
    let mut stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
    let mut line = String::new();
    writeln!(stdin, "{}", json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"raw","version":"0"}}})).map_err(|e| e.to_string())?;
    stdin.flush().map_err(|e| e.to_string())?;
    // The answer to `initialize` (a notification before it is skipped).
    loop {
        line.clear();
        if stdout.read_line(&mut line).map_err(|e| e.to_string())? == 0 {
            return Err("server closed stdout".into());
        }
        if serde_json::from_str::<Value>(&line).is_ok_and(|v| v.get("id").is_some()) {
            break;
        }
    }
    writeln!(stdin, "{}", json!({"jsonrpc":"2.0","method":"notifications/initialized"})).map_err(|e| e.to_string())?;
    // Warm-up, one at a time; ids above n so they never mix with measured ones.
    for i in 0..args.warmup {
        writeln!(stdin, "{}", request(args.n + 1 + i, &args)).map_err(|e| e.to_string())?;
        stdin.flush().map_err(|e| e.to_string())?;
        reply(&mut stdout, &mut line)?;
    }
    if args.concurrency == 1 {
        // One at a time needs no threads: write, read, check, on one thread.
        let mut latencies = Vec::with_capacity(args.n);
        let t0 = Instant::now();
        for id in 0..args.n {
            let t = Instant::now();
            writeln!(stdin, "{}", request(id, &args)).map_err(|e| e.to_string())?;
            stdin.flush().map_err(|e| e.to_string())?;
            if reply(&mut stdout, &mut line)? != id {
                return Err(format!("reply out of order at {id}"));
            }
            latencies.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        bench_args::report("raw-pipe", &args, t0.elapsed(), latencies);
        drop(stdin);
        let _ = child.wait();
        return Ok(());
    }
    let (sent_tx, sent_rx) = mpsc::channel::<(usize, Instant)>();
    let (permit_tx, permit_rx) = mpsc::channel::<()>();
    for _ in 0..args.concurrency {
        let _ = permit_tx.send(());
    }
    let n = args.n;
    let reader = std::thread::spawn(move || -> Result<Vec<f64>, String> {
        let mut started: HashMap<usize, Instant> = HashMap::with_capacity(n);
        let mut latencies = Vec::with_capacity(n);
        let mut line = String::new();
        while latencies.len() < n {
            let id = reply(&mut stdout, &mut line)?;
            while !started.contains_key(&id) {
                let (sid, t) = sent_rx.recv().map_err(|e| e.to_string())?;
                started.insert(sid, t);
            }
            if let Some(t) = started.remove(&id) {
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
            let _ = permit_tx.send(());
        }
        Ok(latencies)
    });
    let t0 = Instant::now();
    let mut id = 0;
    while id < n {
        permit_rx.recv().map_err(|e| e.to_string())?;
        loop {
            let _ = sent_tx.send((id, Instant::now()));
            writeln!(stdin, "{}", request(id, &args)).map_err(|e| e.to_string())?;
            id += 1;
            // Write every request already allowed before flushing, so pipelined ones share a write.
            if id >= n || permit_rx.try_recv().is_err() {
                break;
            }
        }
        stdin.flush().map_err(|e| e.to_string())?;
    }
    let latencies = reader.join().map_err(|_| "reader panicked".to_string())??;
    let elapsed = t0.elapsed();
    bench_args::report("raw-pipe", &args, elapsed, latencies);
    drop(stdin);
    let _ = child.wait();
    Ok(())
}
