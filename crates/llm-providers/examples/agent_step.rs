//! `agent_step --who harness|floor --steps S [--total T]`: the agent loop's own cost per step,
//! for `cargo xtask bench agent`.
//!
//! Both sides talk to the same model: a canned OpenAI-compatible server on 127.0.0.1 (a plain
//! thread) that reads each request and answers at once with one tool call, so the model's own
//! time is the server's handling time (reported as `model_ms`, measured from the request read
//! to the answer written). Both use the same HTTP client (reqwest) and call the same in-process
//! echo tool; turns of `S` steps run from an empty conversation until about `T` steps ran.
//!
//! - `harness`: `agent_loop::Agent::run_turn` with the `OpenAiModel` adapter (its request body
//!   built from the history, its answer decoded), the tool behind the `ToolSource` port, every
//!   call through the gate, at most `S` steps per turn.
//! - `floor`: a loop with no framework: the history kept as serialized wire messages, each
//!   step's body those joined, the answer parsed with serde_json, the tool called, the two new
//!   messages appended.
//!
//! Prints one JSON line: `{"who", "steps", "turns", "per_step_ms", "model_ms", "overhead_ms"}`.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

use agent_loop::{Agent, AgentConfig, BoundCall, Listing, NoEvents, SourceError, ToolSource};
use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ContentBlock, Tool};
use policy::{Decision, Policy};
use serde_json::{Map, Value, json};
use tool_pool::ServerTools;

const SERVER: &str = "bench";
const TOOL: &str = "echo";
const MODEL_NAME: &str = "mcp__bench__echo";

fn main() -> std::process::ExitCode {
    match run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("agent_step: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

struct Args {
    who: String,
    steps: usize,
    total: usize,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args { who: "harness".into(), steps: 1, total: 2000 };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--who" => args.who = value()?,
            "--steps" => args.steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--total" => args.total = value()?.parse().map_err(|e| format!("--total: {e}"))?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    if args.steps == 0 {
        return Err("--steps must be at least 1".into());
    }
    Ok(args)
}

/// The tool's answer to `arguments`, for both sides.
fn echo(arguments: &Map<String, Value>) -> String {
    format!("echo: {}", arguments.get("text").and_then(Value::as_str).unwrap_or(""))
}

/// The canned model: every answer asks for one echo call, numbered by the request.
fn answer(n: u64) -> String {
    let arguments = json!({"text": format!("step {n}: the quick brown fox jumps over the lazy dog")}).to_string();
    json!({
        "id": format!("chatcmpl-{n}"), "object": "chat.completion", "model": "bench",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Calling the tool once more.",
            "tool_calls": [{"id": format!("call_{n}"), "type": "function",
                            "function": {"name": MODEL_NAME, "arguments": arguments}}]}}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5}
    })
    .to_string()
}

/// Serves one keep-alive connection; adds the nanoseconds spent per request to `busy`.
fn serve(stream: TcpStream, busy: &AtomicU64, count: &AtomicU64) -> std::io::Result<()> {
    stream.set_nodelay(true)?;
    let mut writer = stream.try_clone()?;
    let mut reader = BufReader::with_capacity(256 * 1024, stream);
    let mut line = String::new();
    let mut body = Vec::new();
    loop {
        let mut length = 0usize;
        line.clear();
        if reader.read_line(&mut line)? == 0 {
            return Ok(());
        }
        loop {
            line.clear();
            reader.read_line(&mut line)?;
            let header = line.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':')
                && name.eq_ignore_ascii_case("content-length")
            {
                length = value.trim().parse().unwrap_or(0);
            }
        }
        body.resize(length, 0);
        reader.read_exact(&mut body)?;
        let started = Instant::now();
        let n = count.fetch_add(1, Ordering::Relaxed);
        let text = answer(n);
        write!(
            writer,
            "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{text}",
            text.len()
        )?;
        writer.flush()?;
        busy.fetch_add(started.elapsed().as_nanos() as u64, Ordering::Relaxed);
    }
}

/// The canned server's address, its busy nanoseconds and its request count.
fn start_model() -> Result<(String, Arc<AtomicU64>, Arc<AtomicU64>), String> {
    let listener = TcpListener::bind("127.0.0.1:0").map_err(|e| e.to_string())?;
    let address = listener.local_addr().map_err(|e| e.to_string())?;
    let busy = Arc::new(AtomicU64::new(0));
    let count = Arc::new(AtomicU64::new(0));
    let (b, c) = (Arc::clone(&busy), Arc::clone(&count));
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let (b, c) = (Arc::clone(&b), Arc::clone(&c));
            std::thread::spawn(move || serve(stream, &b, &c));
        }
    });
    Ok((format!("http://{address}/v1"), busy, count))
}

/// One server with the echo tool, in process.
struct EchoSource {
    tools: Arc<[Tool]>,
}

#[async_trait]
impl ToolSource for EchoSource {
    async fn refresh(&self) -> Listing {
        let mut listing = Listing::default();
        listing.servers.push(ServerTools::new(SERVER, Arc::clone(&self.tools)));
        listing.generations.insert(SERVER.to_owned(), 1);
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        (server == SERVER).then_some(1)
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        Ok(CallToolResult {
            content: vec![ContentBlock::text(echo(&call.arguments.unwrap_or_default()))],
            ..Default::default()
        })
    }
}

fn tool() -> Tool {
    let mut tool =
        Tool::new(TOOL, json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}));
    tool.description = Some("Echoes the text.".into());
    tool
}

async fn harness(base: &str, steps: usize, turns: usize) -> Result<(), String> {
    let model =
        llm_providers::OpenAiModel::new(base, None, llm_providers::default_client().map_err(|e| e.to_string())?)
            .map_err(|e| e.to_string())?
            .with_model("bench");
    let source = Arc::new(EchoSource { tools: Arc::from(vec![tool()]) });
    let config = AgentConfig { max_steps: steps, ..AgentConfig::default() };
    let agent = Agent::new(Arc::new(model), source, Policy::uniform(Decision::Allow), config);
    for _ in 0..turns {
        let mut conversation = Vec::new();
        let outcome =
            agent.run_turn(&mut conversation, "Call the tool.", &NoEvents).await.map_err(|e| e.to_string())?;
        if outcome.steps != steps || conversation.len() != 1 + 2 * steps {
            return Err(format!("a turn made {} steps and {} messages", outcome.steps, conversation.len()));
        }
    }
    Ok(())
}

async fn floor(base: &str, steps: usize, turns: usize) -> Result<(), String> {
    let client = reqwest::Client::new();
    let url = format!("{base}/chat/completions");
    let system = AgentConfig::default().system;
    let head = format!("{{\"model\":\"bench\",\"messages\":[{}", json!({"role": "system", "content": system}));
    let tail = format!(
        "],\"tools\":{},\"max_tokens\":4096,\"stream\":true,\"stream_options\":{{\"include_usage\":true}}}}",
        json!([{"type": "function", "function": {"name": MODEL_NAME, "description": "Echoes the text.",
                "parameters": tool().input_schema}}])
    );
    for _ in 0..turns {
        let mut history: Vec<String> = vec![json!({"role": "user", "content": "Call the tool."}).to_string()];
        for _ in 0..steps {
            let mut body =
                String::with_capacity(head.len() + tail.len() + history.iter().map(|m| m.len() + 1).sum::<usize>());
            body.push_str(&head);
            for message in &history {
                body.push(',');
                body.push_str(message);
            }
            body.push_str(&tail);
            let response = client
                .post(&url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| e.to_string())?;
            let bytes = response.bytes().await.map_err(|e| e.to_string())?;
            let mut answer: Value = serde_json::from_slice(&bytes).map_err(|e| e.to_string())?;
            let message = answer["choices"][0]["message"].take();
            let mut results = Vec::new();
            for call in message["tool_calls"].as_array().into_iter().flatten() {
                let arguments: Map<String, Value> =
                    serde_json::from_str(call["function"]["arguments"].as_str().unwrap_or("{}")).unwrap_or_default();
                results
                    .push(json!({"role": "tool", "tool_call_id": call["id"], "content": echo(&arguments)}).to_string());
            }
            history.push(message.to_string());
            history.extend(results);
        }
        if history.len() != 1 + 2 * steps {
            return Err(format!("a turn kept {} messages", history.len()));
        }
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let args = parse_args()?;
    let turns = args.total.div_ceil(args.steps).max(1);
    let (base, busy, count) = start_model()?;
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().map_err(|e| e.to_string())?;
    // Warm-up: the connection, the allocator, the caches.
    let warm_turns = (200 / args.steps).max(1);
    let go = |turns: usize| match args.who.as_str() {
        "harness" => runtime.block_on(harness(&base, args.steps, turns)),
        "floor" => runtime.block_on(floor(&base, args.steps, turns)),
        other => Err(format!("--who {other:?}: harness or floor")),
    };
    go(warm_turns)?;
    busy.store(0, Ordering::Relaxed);
    count.store(0, Ordering::Relaxed);
    let started = Instant::now();
    go(turns)?;
    let wall = started.elapsed().as_secs_f64() * 1000.0;
    let total = (turns * args.steps) as f64;
    if count.load(Ordering::Relaxed) as f64 != total {
        return Err(format!("the model was asked {} times for {total} steps", count.load(Ordering::Relaxed)));
    }
    let per_step = wall / total;
    let model = busy.load(Ordering::Relaxed) as f64 / 1e6 / total;
    println!(
        "{{\"who\":\"{}\",\"steps\":{},\"turns\":{turns},\"per_step_ms\":{per_step:.4},\"model_ms\":{model:.4},\"overhead_ms\":{:.4}}}",
        args.who,
        args.steps,
        per_step - model
    );
    Ok(())
}
