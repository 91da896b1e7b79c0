//! `http_bench`: Streamable HTTP `tools/call` through [`mcp_client::Client`] beside a raw pooled
//! hyper keep-alive client doing the same POSTs, against the same minimal server.
//!
//! - `http_bench serve`: a minimal Streamable HTTP server on 127.0.0.1 (hyper, one thread); it
//!   prints its base URL and serves until its stdin closes. `BASE/json` answers with JSON
//!   bodies, `BASE/sse` with one-event SSE streams; `GET BASE/stats` counts the connections
//!   accepted (a client that reconnects per call shows here).
//! - `http_bench calls --client harness|hyper --url URL [-n 2000] [--concurrency 1] [--warmup 50]
//!   [--tool echo]`: opens a session, calls the tool (`echo` by default) n times (checking every
//!   answer) and prints one JSON line. Any Streamable HTTP server with an echo tool will do
//!   (`cargo xtask bench gateway` points it at `mcp-harness serve --http`).
//! - `http_bench open --client harness|hyper --url URL [-n 50]`: opens n sessions one after the
//!   other (transport open + `initialize` + `notifications/initialized`, then close) and prints
//!   the first open's time and the median of the others.
#![allow(clippy::print_stdout, clippy::print_stderr, missing_docs, unreachable_pub)]

use std::convert::Infallible;
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::header::HeaderValue;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::client::legacy::Client as HyperClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use mcp_client::{Client, ClientOptions, RequestOptions};
use mcp_transport::{HttpConfig, HttpTransport};
use serde_json::{Map, Value, json};

const PROTOCOL: &str = "2025-11-25";
const SESSION: &str = "bench-session";

struct Args {
    command: String,
    client: String,
    url: String,
    n: usize,
    concurrency: usize,
    warmup: usize,
    tool: String,
}

fn parse_args() -> Result<Args, String> {
    let mut args = std::env::args().skip(1);
    let command = args.next().ok_or("usage: http_bench serve | calls ... | open ...")?;
    let mut out = Args {
        command,
        client: "harness".into(),
        url: String::new(),
        n: 2000,
        concurrency: 1,
        warmup: 50,
        tool: "echo".into(),
    };
    while let Some(a) = args.next() {
        let mut value = |name: &str| args.next().ok_or_else(|| format!("{name} needs a value"));
        match a.as_str() {
            "--client" => out.client = value("--client")?,
            "--url" => out.url = value("--url")?,
            "-n" => out.n = value("-n")?.parse().map_err(|e| format!("-n: {e}"))?,
            "--concurrency" => {
                out.concurrency = value("--concurrency")?.parse().map_err(|e| format!("--concurrency: {e}"))?
            }
            "--warmup" => out.warmup = value("--warmup")?.parse().map_err(|e| format!("--warmup: {e}"))?,
            "--tool" => out.tool = value("--tool")?,
            other => return Err(format!("unknown argument {other:?}")),
        }
    }
    out.concurrency = out.concurrency.max(1);
    Ok(out)
}

fn main() -> std::process::ExitCode {
    let outcome = parse_args().and_then(|args| {
        // Like the stdio benchmark: sequential calls on one thread, concurrent ones on two workers.
        let runtime = if args.command == "serve" || args.concurrency == 1 {
            tokio::runtime::Builder::new_current_thread().enable_all().build()
        } else {
            tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()
        };
        let runtime = runtime.map_err(|e| e.to_string())?;
        runtime.block_on(async move {
            match (args.command.as_str(), args.client.as_str()) {
                ("serve", _) => serve().await,
                ("calls", "harness") => calls(&args, Arc::new(Harness::open(&args.url, &args.tool).await?)).await,
                ("calls", "hyper") => calls(&args, Arc::new(Raw::open(&args.url, &args.tool).await?)).await,
                ("open", "harness" | "hyper") => opens(&args).await,
                (command, client) => Err(format!("unknown command {command:?} or client {client:?}")),
            }
        })
    });
    match outcome {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("http_bench: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

// ---- the server ----

type Body = BoxBody<Bytes, Infallible>;

async fn serve() -> Result<(), String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(|e| e.to_string())?;
    let addr = listener.local_addr().map_err(|e| e.to_string())?;
    println!("http://{addr}");
    std::io::stdout().flush().map_err(|e| e.to_string())?;
    // The server stops when whoever started it closes its stdin.
    let (stop_tx, mut stop_rx) = tokio::sync::oneshot::channel::<()>();
    std::thread::spawn(move || {
        let mut line = String::new();
        while std::io::stdin().lock().read_line(&mut line).is_ok_and(|n| n > 0) {
            line.clear();
        }
        let _ = stop_tx.send(());
    });
    let connections = Arc::new(AtomicUsize::new(0));
    loop {
        let (stream, _) = tokio::select! {
            accepted = listener.accept() => accepted.map_err(|e| e.to_string())?,
            _ = &mut stop_rx => return Ok(()),
        };
        let _ = stream.set_nodelay(true);
        connections.fetch_add(1, Ordering::Relaxed);
        let connections = Arc::clone(&connections);
        tokio::spawn(async move {
            let service = hyper::service::service_fn(move |req| handle(req, Arc::clone(&connections)));
            let _ = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
        });
    }
}

fn plain(status: StatusCode, body: String) -> Response<Body> {
    let mut resp = Response::new(Full::new(Bytes::from(body)).boxed());
    *resp.status_mut() = status;
    resp
}

async fn handle(req: Request<Incoming>, connections: Arc<AtomicUsize>) -> Result<Response<Body>, Infallible> {
    let sse = req.uri().path().ends_with("/sse");
    if req.method() == Method::GET && req.uri().path().ends_with("/stats") {
        return Ok(plain(StatusCode::OK, connections.load(Ordering::Relaxed).to_string()));
    }
    if req.method() != Method::POST {
        return Ok(plain(StatusCode::METHOD_NOT_ALLOWED, String::new()));
    }
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return Ok(plain(StatusCode::BAD_REQUEST, String::new()));
    };
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return Ok(plain(StatusCode::BAD_REQUEST, String::new()));
    };
    let Some(id) = message.get("id") else {
        return Ok(plain(StatusCode::ACCEPTED, String::new()));
    };
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let answer = match method {
        "initialize" => json!({"jsonrpc": "2.0", "id": id, "result": {
            "protocolVersion": message["params"]["protocolVersion"].as_str().unwrap_or(PROTOCOL),
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "http-bench", "version": "0"}}}),
        "tools/call" => json!({"jsonrpc": "2.0", "id": id, "result": {
            "content": [{"type": "text", "text": message["params"]["arguments"]["text"]}]}}),
        _ => json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "Method not found"}}),
    }
    .to_string();
    let mut resp = if sse {
        // Chunked, as SDK servers stream: the one event, then the end of the stream.
        let event = Bytes::from(format!("event: message\ndata: {answer}\n\n"));
        let body = StreamBody::new(futures_util::stream::iter([Ok::<_, Infallible>(Frame::data(event))]));
        let mut resp = Response::new(body.boxed());
        resp.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("text/event-stream"));
        resp
    } else {
        let mut resp = Response::new(Full::new(Bytes::from(answer)).boxed());
        resp.headers_mut().insert("content-type", hyper::header::HeaderValue::from_static("application/json"));
        resp
    };
    if method == "initialize" {
        resp.headers_mut().insert("mcp-session-id", hyper::header::HeaderValue::from_static(SESSION));
    }
    Ok(resp)
}

// ---- the clients ----

trait Caller: Send + Sync + 'static {
    /// One `tools/call echo` with `text`; the text answered.
    fn call(&self, i: usize, text: String) -> impl Future<Output = Result<String, String>> + Send;
    fn close(self: Arc<Self>) -> impl Future<Output = ()> + Send;
}

struct Harness(Client, String);

impl Harness {
    async fn open(url: &str, tool: &str) -> Result<Harness, String> {
        let transport = HttpTransport::new(HttpConfig::new(url)).map_err(|e| e.to_string())?;
        let client = Client::connect(transport, ClientOptions::default()).await.map_err(|e| e.to_string())?;
        Ok(Harness(client, tool.to_owned()))
    }
}

impl Caller for Harness {
    async fn call(&self, _i: usize, text: String) -> Result<String, String> {
        let mut arguments = Map::new();
        arguments.insert("text".into(), Value::String(text));
        let result = self.0.call_tool(&self.1, Some(arguments), RequestOptions::default()).await;
        Ok(result.map_err(|e| e.to_string())?.joined_text())
    }

    async fn close(self: Arc<Self>) {
        if let Ok(me) = Arc::try_unwrap(self) {
            let _ = me.0.close().await;
        }
    }
}

/// The floor: hyper's pooled keep-alive client, the JSON made and read with serde_json.
struct Raw {
    http: HyperClient<HttpConnector, Full<Bytes>>,
    url: hyper::Uri,
    /// The session id the server gave at `initialize` (this file's server always gives the same).
    session: HeaderValue,
    tool: String,
}

impl Raw {
    fn new(url: &str, tool: &str) -> Result<Raw, String> {
        let mut connector = HttpConnector::new();
        connector.set_nodelay(true);
        let http = HyperClient::builder(TokioExecutor::new()).build(connector);
        Ok(Raw {
            http,
            url: url.parse().map_err(|e| format!("{url}: {e}"))?,
            session: HeaderValue::from_static(SESSION),
            tool: tool.to_owned(),
        })
    }

    async fn open(url: &str, tool: &str) -> Result<Raw, String> {
        let mut raw = Raw::new(url, tool)?;
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": PROTOCOL, "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}});
        let (answer, session) = raw.post(&init, "initialize", true).await?;
        if answer.and_then(|a| a.get("result").cloned()).is_none() {
            return Err("initialize was not answered".into());
        }
        raw.session = session.ok_or("initialize was answered without an Mcp-Session-Id")?;
        raw.post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}), "notifications/initialized", false)
            .await?;
        Ok(raw)
    }

    /// POSTs `message`; its answer when `answered`, and the session id the response carried.
    async fn post(
        &self,
        message: &Value,
        method: &str,
        answered: bool,
    ) -> Result<(Option<Value>, Option<HeaderValue>), String> {
        let req = Request::post(self.url.clone())
            .header("accept", "application/json, text/event-stream")
            .header("content-type", "application/json")
            // No session yet at `initialize` (a server refuses an id it did not give with 404).
            .header(if method == "initialize" { "x-no-session" } else { "mcp-session-id" }, self.session.clone())
            .header("mcp-protocol-version", PROTOCOL)
            .header("mcp-method", method)
            .body(Full::new(Bytes::from(message.to_string())))
            .map_err(|e| e.to_string())?;
        let resp = self.http.request(req).await.map_err(|e| e.to_string())?;
        if !resp.status().is_success() {
            return Err(format!("HTTP {}", resp.status()));
        }
        let session = resp.headers().get("mcp-session-id").cloned();
        // JSON or SSE, as the server chose (a gateway may stream a call's answer).
        let sse = resp.headers().get("content-type").is_some_and(|ct| ct.as_bytes().starts_with(b"text/event-stream"));
        let body = resp.into_body().collect().await.map_err(|e| e.to_string())?.to_bytes();
        if !answered {
            return Ok((None, session));
        }
        let json = if sse {
            let text = std::str::from_utf8(&body).map_err(|e| e.to_string())?;
            let data = text.lines().find_map(|l| l.strip_prefix("data:")).ok_or("an SSE answer without data")?;
            serde_json::from_str(data.trim_start())
        } else {
            serde_json::from_slice(&body)
        };
        json.map(|answer| (Some(answer), session)).map_err(|e| format!("bad answer: {e}"))
    }
}

impl Caller for Raw {
    async fn call(&self, i: usize, text: String) -> Result<String, String> {
        let request = json!({"jsonrpc": "2.0", "id": i + 1, "method": "tools/call",
            "params": {"name": self.tool, "arguments": {"text": text}}});
        let answer = self.post(&request, "tools/call", true).await?.0.ok_or("no answer")?;
        if answer["id"].as_u64() != Some(i as u64 + 1) {
            return Err(format!("answer to the wrong request: {answer}"));
        }
        Ok(answer["result"]["content"][0]["text"].as_str().unwrap_or_default().to_owned())
    }

    async fn close(self: Arc<Self>) {}
}

async fn connections(url: &str) -> usize {
    let Ok(raw) = Raw::new(&format!("{}/stats", url.rsplit_once('/').map_or(url, |(base, _)| base)), "") else {
        return 0;
    };
    let Ok(resp) = raw.http.get(raw.url.clone()).await else { return 0 };
    let Ok(body) = resp.into_body().collect().await else { return 0 };
    String::from_utf8_lossy(&body.to_bytes()).trim().parse().unwrap_or(0)
}

async fn calls<C: Caller>(args: &Args, client: Arc<C>) -> Result<(), String> {
    let call = |client: Arc<C>, i: usize| async move {
        let text = format!("hello {i}");
        let got = client.call(i, text.clone()).await?;
        if got != text { Err(format!("call {i}: answered {got:?}")) } else { Ok(()) }
    };
    for i in 0..args.warmup {
        call(Arc::clone(&client), i).await?;
    }
    let before = connections(&args.url).await;
    let next = Arc::new(AtomicUsize::new(args.warmup));
    let end = args.warmup + args.n;
    let started = Instant::now();
    let mut workers = Vec::new();
    for _ in 0..args.concurrency {
        let (client, next) = (Arc::clone(&client), Arc::clone(&next));
        workers.push(tokio::spawn(async move {
            let mut latencies = Vec::new();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= end {
                    return Ok::<_, String>(latencies);
                }
                let t = Instant::now();
                call(Arc::clone(&client), i).await?;
                latencies.push(t.elapsed().as_secs_f64() * 1000.0);
            }
        }));
    }
    let mut latencies = Vec::with_capacity(args.n);
    for w in workers {
        latencies.extend(w.await.map_err(|e| e.to_string())??);
    }
    let elapsed = started.elapsed();
    let opened = connections(&args.url).await.saturating_sub(before + 1);
    client.close().await;
    latencies.sort_by(|a, b| a.total_cmp(b));
    let pct =
        |p: f64| latencies.get(((latencies.len().max(1) - 1) as f64 * p).round() as usize).copied().unwrap_or(0.0);
    println!(
        "{{\"client\":\"{}\",\"n\":{},\"concurrency\":{},\"calls_per_s\":{:.1},\"mean_ms\":{:.3},\"p10_ms\":{:.3},\"p50_ms\":{:.3},\"p90_ms\":{:.3},\"p99_ms\":{:.3},\"new_connections\":{opened}}}",
        args.client,
        args.n,
        args.concurrency,
        args.n as f64 / elapsed.as_secs_f64(),
        latencies.iter().sum::<f64>() / latencies.len().max(1) as f64,
        pct(0.1),
        pct(0.5),
        pct(0.9),
        pct(0.99),
    );
    Ok(())
}

async fn opens(args: &Args) -> Result<(), String> {
    let mut times = Vec::with_capacity(args.n);
    for _ in 0..args.n.max(1) {
        let started = Instant::now();
        let elapsed = if args.client == "harness" {
            let client = Harness::open(&args.url, &args.tool).await?;
            let elapsed = started.elapsed();
            let _ = client.0.close().await;
            elapsed
        } else {
            let raw = Raw::open(&args.url, &args.tool).await?;
            let elapsed = started.elapsed();
            drop(raw);
            elapsed
        };
        times.push(elapsed);
    }
    let first = times[0];
    let mut rest: Vec<Duration> = times[1..].to_vec();
    rest.sort();
    let median = rest.get(rest.len() / 2).copied().unwrap_or(first);
    println!(
        "{{\"client\":\"{}\",\"opens\":{},\"first_open_ms\":{:.3},\"open_ms\":{:.3}}}",
        args.client,
        times.len(),
        first.as_secs_f64() * 1000.0,
        median.as_secs_f64() * 1000.0
    );
    Ok(())
}
