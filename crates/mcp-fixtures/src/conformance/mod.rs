//! A conformance-style MCP server of our own: everything the official conformance suite's
//! server scenarios ask of a server, over stdio ([`serve_stdio`]) and Streamable HTTP
//! ([`start_http`], [`serve_http`]); the binary `mcp-fixture-conformance [--http ADDR]`.
//!
//! It is the upstream the gateway's conformance run fronts (`mcp-harness serve --http
//! --transparent` over stdio) and, over HTTP, the baseline that run is compared with: `cargo
//! xtask conformance-server` runs every server scenario against both.
//!
//! - Tools: `test_simple_text`, `test_image_content` (PNG), `test_audio_content` (WAV),
//!   `test_embedded_resource`, `test_multiple_content_types`, `test_tool_with_logging` (three
//!   `notifications/message` at `info`, 50 ms apart, on the call's own stream, as far as the
//!   level set with `logging/setLevel` lets them; `info` until one is set),
//!   `test_tool_with_progress` (0, 50 and 100 of 100 under the request's `progressToken`),
//!   `test_error_handling` (`isError`), `test_sampling {prompt}` (`sampling/createMessage` to
//!   the client), `test_elicitation {message}`, `test_elicitation_sep1034_defaults`,
//!   `test_elicitation_sep1330_enums` (`elicitation/create` forms; a client that did not
//!   declare the capability gets an error result, as does a question unanswered within 60 s),
//!   `json_schema_2020_12_tool` (a 2020-12 input schema, listed unchanged), `test_reconnection`
//!   (over HTTP its answer stream ends after the priming event and the answer comes on the
//!   stream resumed with `Last-Event-ID`), and `update_watched_resource` (ours: changes
//!   `test://watched-resource` and sends `notifications/resources/updated` to a client that
//!   subscribed to it).
//! - Resources `test://static-text`, `test://static-binary`, `test://watched-resource`; the
//!   template `test://template/{id}/data`; `resources/subscribe` and `resources/unsubscribe`.
//! - Prompts `test_simple_prompt`, `test_prompt_with_arguments {arg1, arg2}`,
//!   `test_prompt_with_embedded_resource {resourceUri}`, `test_prompt_with_image`;
//!   `completion/complete` for the prompt's arguments and the template's `id`.
//!
//! Over HTTP it keeps sessions (`Mcp-Session-Id`), answers requests on SSE streams that start
//! with a priming event (an id and `retry:`), keeps each stream's events for resumption, sends
//! what belongs to no request on the session's GET stream, and refuses a `Host` or `Origin`
//! that is not loopback (403), as the DNS-rebinding scenario asks.

mod catalog;
mod http;

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{mpsc, oneshot};

pub use http::{RunningConformance, serve_http, start_http};

/// The revisions it speaks, oldest first; the last is offered to a client asking for another.
const VERSIONS: [&str; 3] = ["2025-03-26", "2025-06-18", "2025-11-25"];
/// The logging levels, least severe first.
const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
/// How long a question to the client (sampling, elicitation) waits for its answer.
const ASK_LIMIT: Duration = Duration::from_secs(60);
/// The pause between a tool's log messages and progress notifications.
const STEP: Duration = Duration::from_millis(50);
/// Longest message read on stdio.
const MAX_LINE: u64 = 16 << 20;

/// A JSON-RPC error: code and message.
type RpcError = (i64, String);

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Where the messages that belong to one request go before its answer (and, for the peer's
/// own notices, where the messages of no request go).
#[derive(Clone)]
pub(crate) enum Sink {
    /// Lines written to stdout.
    Lines(mpsc::UnboundedSender<String>),
    /// An HTTP stream's event log.
    Stream(Arc<http::EventLog>),
}

impl Sink {
    fn send(&self, message: &Value) {
        match self {
            Sink::Lines(tx) => {
                let _ = tx.send(message.to_string());
            }
            Sink::Stream(log) => log.push(message),
        }
    }

    /// Ends the HTTP answer stream here (what follows waits for a resumption); nothing on stdio.
    fn cut(&self) {
        if let Sink::Stream(log) = self {
            log.cut();
        }
    }
}

/// One client: a stdio connection or an HTTP session.
pub(crate) struct Peer {
    /// Where what belongs to no request goes (stdout, or the session's GET stream).
    notices: Sink,
    /// The capabilities the client declared.
    capabilities: Mutex<Value>,
    /// The least severe level logged (an index of [`LEVELS`]).
    level: Mutex<usize>,
    subscriptions: Mutex<HashSet<String>>,
    /// Our questions to the client waiting for an answer, by the id's JSON text.
    pending: Mutex<HashMap<String, oneshot::Sender<Value>>>,
    next_id: AtomicU64,
    /// How many times `update_watched_resource` ran.
    watched: AtomicU64,
}

impl Peer {
    pub(crate) fn new(notices: Sink) -> Self {
        Self {
            notices,
            capabilities: Mutex::new(json!({})),
            level: Mutex::new(1),
            subscriptions: Mutex::default(),
            pending: Mutex::default(),
            next_id: AtomicU64::new(1),
            watched: AtomicU64::new(0),
        }
    }

    fn declared(&self, capability: &str) -> bool {
        lock(&self.capabilities).get(capability).is_some_and(|c| !c.is_null())
    }

    /// A log message on `sink`, if the client's level lets it through.
    fn log(&self, sink: &Sink, level: usize, text: &str) {
        if level >= *lock(&self.level) {
            let params =
                json!({"level": LEVELS.get(level).copied().unwrap_or("info"), "logger": "conformance", "data": text});
            sink.send(&json!({"jsonrpc": "2.0", "method": "notifications/message", "params": params}));
        }
    }

    /// Asks the client `method` on `sink` and waits for its result (`Err`: why there is none).
    async fn ask(&self, sink: &Sink, method: &str, params: Value) -> Result<Value, String> {
        let id = format!("conformance-{}", self.next_id.fetch_add(1, Ordering::Relaxed));
        let key = Value::String(id.clone()).to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(key.clone(), tx);
        sink.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        let answer = match tokio::time::timeout(ASK_LIMIT, rx).await {
            Ok(Ok(answer)) => answer,
            Ok(Err(_)) => return Err("the connection ended before the client answered".to_owned()),
            Err(_) => {
                lock(&self.pending).remove(&key);
                return Err(format!("the client did not answer {method} within {} s", ASK_LIMIT.as_secs()));
            }
        };
        match (answer.get("result"), answer.get("error")) {
            (Some(result), _) => Ok(result.clone()),
            (None, Some(error)) => Err(format!("the client answered {method} with an error: {error}")),
            (None, None) => Err(format!("the client's answer to {method} has neither result nor error")),
        }
    }

    /// A response from the client to one of our questions.
    pub(crate) fn answered(&self, message: Value) {
        let key = message.get("id").map(Value::to_string).unwrap_or_default();
        if let Some(tx) = lock(&self.pending).remove(&key) {
            let _ = tx.send(message);
        }
    }

    /// The client went away: questions waiting for it fail at once.
    pub(crate) fn close(&self) {
        lock(&self.pending).clear();
    }
}

/// What a message from the client is.
pub(crate) enum Kind {
    Request,
    Notification,
    Response,
    Invalid,
}

pub(crate) fn kind(message: &Value) -> Kind {
    match (message.get("method").and_then(Value::as_str), message.get("id")) {
        (Some(_), Some(_)) => Kind::Request,
        (Some(_), None) => Kind::Notification,
        (None, Some(_)) if message.get("result").is_some() || message.get("error").is_some() => Kind::Response,
        _ => Kind::Invalid,
    }
}

fn error(id: &Value, (code, message): RpcError) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}})
}

/// Answers request `message`; what belongs to it before the answer goes to `sink`.
pub(crate) async fn answer(peer: &Peer, message: &Value, sink: &Sink) -> Value {
    let id = message.get("id").cloned().unwrap_or(Value::Null);
    let method = message.get("method").and_then(Value::as_str).unwrap_or_default();
    let params = message.get("params").cloned().unwrap_or_else(|| json!({}));
    match respond(peer, method, &params, sink).await {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => error(&id, e),
    }
}

fn string_param<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params.get(key).and_then(Value::as_str).ok_or_else(|| (-32602, format!("Invalid params: {key} must be a string")))
}

async fn respond(peer: &Peer, method: &str, params: &Value, sink: &Sink) -> Result<Value, RpcError> {
    Ok(match method {
        "initialize" => {
            *lock(&peer.capabilities) = params.get("capabilities").cloned().unwrap_or_else(|| json!({}));
            let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or_default();
            let version = VERSIONS.iter().find(|v| **v == asked).unwrap_or(&VERSIONS[2]);
            json!({"protocolVersion": version, "capabilities": {
                    "tools": {"listChanged": false}, "resources": {"subscribe": true, "listChanged": false},
                    "prompts": {"listChanged": false}, "logging": {}, "completions": {}},
                "serverInfo": {"name": "mcp-fixture-conformance", "version": env!("CARGO_PKG_VERSION")},
                "instructions": "The conformance fixture: every tool, resource and prompt the conformance suite asks for."})
        }
        "ping" => json!({}),
        "logging/setLevel" => {
            let level = string_param(params, "level")?;
            let index = LEVELS.iter().position(|l| *l == level);
            *lock(&peer.level) = index.ok_or_else(|| (-32602, format!("Invalid params: unknown level {level:?}")))?;
            json!({})
        }
        "tools/list" => json!({"tools": catalog::tools()}),
        "tools/call" => call_tool(peer, params, sink).await?,
        "resources/list" => json!({"resources": catalog::resources()}),
        "resources/templates/list" => json!({"resourceTemplates": catalog::templates()}),
        "resources/read" => catalog::read(string_param(params, "uri")?, peer.watched.load(Ordering::Relaxed))?,
        "resources/subscribe" => {
            lock(&peer.subscriptions).insert(string_param(params, "uri")?.to_owned());
            json!({})
        }
        "resources/unsubscribe" => {
            lock(&peer.subscriptions).remove(string_param(params, "uri")?);
            json!({})
        }
        "prompts/list" => json!({"prompts": catalog::prompts()}),
        "prompts/get" => catalog::get_prompt(params)?,
        "completion/complete" => catalog::complete(params),
        other => return Err((-32601, format!("Method not found: {other}"))),
    })
}

fn content(blocks: Value) -> Value {
    json!({"content": blocks})
}

fn text(text: &str) -> Value {
    content(json!([{"type": "text", "text": text}]))
}

fn failed(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}], "isError": true})
}

async fn call_tool(peer: &Peer, params: &Value, sink: &Sink) -> Result<Value, RpcError> {
    let name = string_param(params, "name")?;
    let arguments = params.get("arguments").cloned().unwrap_or_else(|| json!({}));
    let image = json!({"type": "image", "data": catalog::PNG, "mimeType": "image/png"});
    Ok(match name {
        "test_simple_text" => text("This is a simple text response for testing."),
        "test_image_content" => content(json!([image])),
        "test_audio_content" => content(json!([{"type": "audio", "data": catalog::wav(), "mimeType": "audio/wav"}])),
        "test_embedded_resource" => {
            content(json!([{"type": "resource", "resource": {"uri": "test://embedded-resource",
            "mimeType": "text/plain", "text": "This is an embedded resource content."}}]))
        }
        "test_multiple_content_types" => content(json!([
            {"type": "text", "text": "Multiple content types test:"},
            image,
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json",
                "text": json!({"test": "data", "value": 123}).to_string()}}
        ])),
        "test_tool_with_logging" => {
            for (i, said) in
                ["Tool execution started", "Tool processing data", "Tool execution completed"].iter().enumerate()
            {
                if i > 0 {
                    tokio::time::sleep(STEP).await;
                }
                peer.log(sink, 1, said);
            }
            text("Tool with logging executed successfully")
        }
        "test_tool_with_progress" => {
            let token = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
            for (i, progress) in [0, 50, 100].into_iter().enumerate() {
                if i > 0 {
                    tokio::time::sleep(STEP).await;
                }
                if let Some(token) = &token {
                    let params = json!({"progressToken": token, "progress": progress, "total": 100,
                        "message": format!("Completed step {progress} of 100")});
                    sink.send(&json!({"jsonrpc": "2.0", "method": "notifications/progress", "params": params}));
                }
            }
            text(&format!("Progress reported under {}", token.unwrap_or(Value::Null)))
        }
        "test_error_handling" => failed("This tool intentionally returns an error for testing"),
        "test_sampling" => {
            let prompt = string_param(&arguments, "prompt")?;
            if !peer.declared("sampling") {
                return Ok(failed("The client did not declare sampling: there is nobody to ask."));
            }
            let request =
                json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100});
            match peer.ask(sink, "sampling/createMessage", request).await {
                Ok(result) => {
                    let said = result.get("content").and_then(|c| c.get("text")).and_then(Value::as_str);
                    text(&format!("LLM response: {}", said.unwrap_or("(no text)")))
                }
                Err(why) => failed(&format!("Sampling failed: {why}")),
            }
        }
        "test_elicitation" | "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
            let form = match name {
                "test_elicitation" => catalog::elicit_user(string_param(&arguments, "message")?),
                "test_elicitation_sep1034_defaults" => catalog::elicit_defaults(),
                _ => catalog::elicit_enums(),
            };
            if !peer.declared("elicitation") {
                return Ok(failed("The client did not declare elicitation: there is nobody to ask."));
            }
            match peer.ask(sink, "elicitation/create", form).await {
                Ok(result) => {
                    let action = result.get("action").and_then(Value::as_str).unwrap_or("(none)");
                    let answer = result.get("content").cloned().unwrap_or_else(|| json!({}));
                    text(&format!("User response: action={action}, content={answer}"))
                }
                Err(why) => failed(&format!("Elicitation failed: {why}")),
            }
        }
        "json_schema_2020_12_tool" => text(&format!("JSON Schema 2020-12 tool called with: {arguments}")),
        "test_reconnection" => {
            sink.cut();
            tokio::time::sleep(2 * STEP).await;
            text("Reconnection test completed: this answer came after the stream was closed.")
        }
        "update_watched_resource" => {
            let version = peer.watched.fetch_add(1, Ordering::Relaxed) + 1;
            let subscribed = lock(&peer.subscriptions).contains(catalog::WATCHED);
            if subscribed {
                let params = json!({"uri": catalog::WATCHED});
                peer.notices
                    .send(&json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": params}));
            }
            text(&format!("{} is at version {version}; subscribers told: {subscribed}", catalog::WATCHED))
        }
        other => return Err((-32602, format!("Unknown tool: {other}"))),
    })
}

/// Serves one client on `reader` / `writer` (newline-delimited JSON-RPC) until the input ends
/// and the requests in flight are answered.
pub async fn serve_stdio<R, W>(reader: R, mut writer: W) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let writing = tokio::spawn(async move {
        while let Some(line) = rx.recv().await {
            writer.write_all(line.as_bytes()).await?;
            writer.write_all(b"\n").await?;
            if rx.is_empty() {
                writer.flush().await?;
            }
        }
        writer.flush().await
    });
    let sink = Sink::Lines(tx);
    let peer = Arc::new(Peer::new(sink.clone()));
    let mut reader = BufReader::new(reader);
    let mut tasks = tokio::task::JoinSet::new();
    let mut line = Vec::new();
    loop {
        line.clear();
        if (&mut reader).take(MAX_LINE).read_until(b'\n', &mut line).await? == 0 {
            break;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&line) else {
            if !line.iter().all(u8::is_ascii_whitespace) {
                sink.send(&error(&Value::Null, (-32700, "Parse error".to_owned())));
            }
            continue;
        };
        match kind(&message) {
            Kind::Request => {
                let (peer, sink) = (Arc::clone(&peer), sink.clone());
                tasks.spawn(async move {
                    let reply = answer(&peer, &message, &sink).await;
                    sink.send(&reply);
                });
            }
            Kind::Response => peer.answered(message),
            Kind::Notification => {}
            Kind::Invalid => {
                let id = message.get("id").cloned().unwrap_or(Value::Null);
                sink.send(&error(&id, (-32600, "Invalid Request".to_owned())));
            }
        }
    }
    peer.close();
    while tasks.join_next().await.is_some() {}
    drop((sink, peer));
    writing.await.map_err(std::io::Error::other)?
}
