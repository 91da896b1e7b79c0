//! The gateway against a fake backend: real sockets on loopback, a real stdio pipe.
#![allow(missing_docs, unreachable_pub, clippy::unwrap_used, clippy::expect_used)]

mod approvals;
mod auth;
mod clients;
mod forward;
mod http;
// Shared with crates/cli/tests/serve_gateway.rs, which uses parts this crate does not.
#[allow(dead_code)]
mod issuer;
mod limits;
mod observe;
mod resume;
mod search;
mod stdio;
mod subscriptions;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_gateway::fake::FakeBackend;
use mcp_gateway::{Clock, Gateway, GatewayOptions, HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::net::TcpStream;

pub const STATELESS: &str = "2026-07-28";

/// The upstreams every test sees ([`FakeBackend::standard`]).
pub fn backend() -> FakeBackend {
    FakeBackend::standard()
}

/// A clock a test moves.
#[derive(Debug, Default)]
pub struct TestClock(AtomicU64);

impl TestClock {
    pub fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for TestClock {
    fn unix_ms(&self) -> u64 {
        1_800_000_000_000 + self.0.load(Ordering::SeqCst)
    }
}

/// A gateway over HTTP on loopback, and what tests need to reach into it.
pub struct Running {
    pub addr: SocketAddr,
    pub backend: Arc<FakeBackend>,
    pub clock: Arc<TestClock>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Running {
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

pub async fn start() -> Running {
    start_with(HttpOptions::default()).await
}

/// Options under which a session's quick call is answered as plain JSON however loaded the
/// machine (by default a call not answered within 50 ms becomes a stream).
pub fn json_answers() -> HttpOptions {
    HttpOptions { resume_after: std::time::Duration::from_secs(60), ..HttpOptions::default() }
}

pub async fn start_with(options: HttpOptions) -> Running {
    start_over(backend(), options).await
}

/// A gateway over HTTP on loopback in front of `backend`.
pub async fn start_over(backend: FakeBackend, options: HttpOptions) -> Running {
    let backend = Arc::new(backend);
    let clock = Arc::new(TestClock::default());
    let gateway_options = GatewayOptions { clock: Arc::clone(&clock) as Arc<dyn Clock>, ..GatewayOptions::default() };
    let gateway = Gateway::new(Arc::clone(&backend) as Arc<dyn mcp_gateway::Backend>, gateway_options).unwrap();
    let server = HttpServer::bind(gateway, options).await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    Running { addr, backend, clock, stop: Some(stop) }
}

/// An HTTP answer, its body read whole.
#[derive(Debug)]
pub struct Answer {
    pub status: u16,
    pub headers: ::http::HeaderMap,
    pub body: String,
}

impl Answer {
    /// The JSON-RPC messages of the body (one JSON object, or each SSE event's data).
    pub fn messages(&self) -> Vec<Value> {
        if self.headers.get("content-type").is_some_and(|v| v.as_bytes().starts_with(b"text/event-stream")) {
            sse_messages(&self.body)
        } else if self.body.is_empty() {
            Vec::new()
        } else {
            vec![serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.body))]
        }
    }

    /// The one message of a JSON answer, or the last of an SSE one.
    pub fn json(&self) -> Value {
        self.messages().pop().unwrap_or_else(|| panic!("no message in {self:?}"))
    }

    pub fn session(&self) -> Option<String> {
        self.headers.get("mcp-session-id").and_then(|v| v.to_str().ok()).map(str::to_owned)
    }
}

/// The messages of an SSE body (a priming event, with empty data, carries none).
pub fn sse_messages(body: &str) -> Vec<Value> {
    body.split("\n\n")
        .filter_map(|event| {
            let data: Vec<&str> = event.lines().filter_map(|l| l.strip_prefix("data: ")).collect();
            let data = data.join("\n");
            (!data.trim().is_empty()).then(|| serde_json::from_str(&data).unwrap())
        })
        .collect()
}

/// Sends one request on a fresh connection and returns the response with its body unread.
pub async fn send(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> hyper::Response<Incoming> {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::builder().method(method).uri("/mcp");
    let mut has_host = false;
    for (name, value) in headers {
        has_host |= name.eq_ignore_ascii_case("host");
        request = request.header(*name, *value);
    }
    if !has_host {
        request = request.header("host", addr.to_string());
    }
    let request = request.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
    sender.send_request(request).await.unwrap()
}

/// Sends one request and reads the whole answer.
pub async fn exchange(addr: SocketAddr, method: &str, headers: &[(&str, &str)], body: &str) -> Answer {
    let response = send(addr, method, headers, body).await;
    let status = response.status().as_u16();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    Answer { status, headers, body: String::from_utf8(bytes.to_vec()).unwrap() }
}

/// POST with the usual headers of a session request.
pub async fn post_session(addr: SocketAddr, session: &str, version: &str, body: &Value) -> Answer {
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", version),
    ];
    exchange(addr, "POST", &headers, &body.to_string()).await
}

/// Opens a session of `version` with these capabilities; returns its id.
pub async fn initialize(addr: SocketAddr, version: &str, capabilities: Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "test", "version": "1"}}});
    let headers = [("content-type", "application/json"), ("accept", "application/json, text/event-stream")];
    let answer = exchange(addr, "POST", &headers, &body.to_string()).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert_eq!(answer.json()["result"]["protocolVersion"], version);
    let session = answer.session().expect("a session id");
    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    assert_eq!(post_session(addr, &session, version, &initialized).await.status, 202);
    session
}

/// The 2026-07-28 envelope.
pub fn envelope(capabilities: Value) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientInfo": {"name": "modern", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": capabilities})
}

/// A stateless request with its envelope and the mirrored headers it needs.
pub async fn post_stateless(
    addr: SocketAddr,
    id: Value,
    method: &str,
    mut params: Value,
    capabilities: Value,
) -> Answer {
    params["_meta"] = envelope(capabilities);
    let name = params.get("name").or_else(|| params.get("uri")).and_then(Value::as_str).map(str::to_owned);
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut headers = vec![
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", STATELESS),
        ("mcp-method", method),
    ];
    if let Some(name) = &name {
        headers.push(("mcp-name", name.as_str()));
    }
    exchange(addr, "POST", &headers, &body.to_string()).await
}

/// The text of a tool result.
pub fn text_of(result: &Value) -> String {
    result["content"][0]["text"].as_str().unwrap_or_default().to_owned()
}
