//! An MCP server over WebSocket for tests of the WebSocket transport: subprotocol `mcp`, one
//! JSON-RPC message per text frame, the same tools as [`crate::http`]; it sends
//! `notifications/tools/list_changed` after `notifications/initialized`.
//!
//! Faults: `refuse_subprotocol` (the handshake succeeds without choosing `mcp`),
//! `close_after` (the server closes after that many client messages, on every connection),
//! `huge` (a text frame of that many bytes before each answer), `ping_flood` (after
//! `notifications/initialized` the server reads nothing more and sends that many pings;
//! [`RunningWsServer::flooded`] says when they are sent). With `name_connections` the
//! initialize result's `instructions` name the connection (`connection-0`, ...), and
//! [`RunningWsServer::methods`] lists what clients sent, so tests see which connection a client
//! knows and how often it made its handshake.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use futures_util::{SinkExt, StreamExt};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::handshake::server::{Request, Response};
use tokio_tungstenite::tungstenite::http::HeaderValue;

/// What the server does.
#[derive(Debug, Clone, Default)]
pub struct WsOptions {
    /// Accept the upgrade without choosing subprotocol `mcp`.
    pub refuse_subprotocol: bool,
    /// Close the connection after this many messages from the client.
    pub close_after: Option<usize>,
    /// Send a text frame of this many bytes before each answer.
    pub huge: Option<usize>,
    /// The initialize result's `instructions` name the connection (`connection-0`, ...).
    pub name_connections: bool,
    /// After `notifications/initialized`, read nothing and send this many pings (125 bytes each).
    pub ping_flood: Option<usize>,
}

/// A running server; it stops when dropped.
#[derive(Debug)]
pub struct RunningWsServer {
    /// Its address.
    pub addr: SocketAddr,
    protocols: Arc<Mutex<Vec<Option<String>>>>,
    methods: Arc<Mutex<Vec<String>>>,
    flooded: Arc<std::sync::atomic::AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for RunningWsServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl RunningWsServer {
    /// The endpoint.
    pub fn url(&self) -> String {
        format!("ws://{}/mcp", self.addr)
    }

    /// The `Sec-WebSocket-Protocol` header of every handshake so far.
    pub fn requested_protocols(&self) -> Vec<Option<String>> {
        self.protocols.lock().map(|p| p.clone()).unwrap_or_default()
    }

    /// The method of every request and notification clients sent, in order (answers to the
    /// server's requests have none and are left out).
    pub fn methods(&self) -> Vec<String> {
        self.methods.lock().map(|m| m.clone()).unwrap_or_default()
    }

    /// Whether a `ping_flood` was sent whole (the client's socket took it).
    pub fn flooded(&self) -> bool {
        self.flooded.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// Starts the server on 127.0.0.1 with a free port.
pub async fn start_ws(options: WsOptions) -> std::io::Result<RunningWsServer> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let protocols = Arc::new(Mutex::new(Vec::new()));
    let methods = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&protocols);
    let sent = Arc::clone(&methods);
    let flooded = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let ended = Arc::clone(&flooded);
    let task = tokio::spawn(async move {
        let mut connections = 0;
        while let Ok((stream, _)) = listener.accept().await {
            let options = options.clone();
            let seen = Arc::clone(&seen);
            let sent = Arc::clone(&sent);
            let ended = Arc::clone(&ended);
            let connection = connections;
            connections += 1;
            tokio::spawn(async move {
                let refuse = options.refuse_subprotocol;
                // The error type is tungstenite's (an HTTP response); this callback never fails.
                #[allow(clippy::result_large_err)]
                let callback = move |request: &Request, mut response: Response| {
                    let asked = request
                        .headers()
                        .get("sec-websocket-protocol")
                        .and_then(|v| v.to_str().ok())
                        .map(str::to_owned);
                    let offers_mcp = asked.as_deref().is_some_and(|p| p.split(',').any(|p| p.trim() == "mcp"));
                    if let Ok(mut s) = seen.lock() {
                        s.push(asked);
                    }
                    if offers_mcp && !refuse {
                        response.headers_mut().insert("sec-websocket-protocol", HeaderValue::from_static("mcp"));
                    }
                    Ok(response)
                };
                let Ok(mut ws) = tokio_tungstenite::accept_hdr_async(stream, callback).await else { return };
                let mut received = 0;
                while let Some(Ok(message)) = ws.next().await {
                    let Message::Text(text) = message else { continue };
                    received += 1;
                    let body = serde_json::from_str::<Value>(text.as_str()).ok();
                    if let Some(method) = body.as_ref().and_then(|b| b.get("method")).and_then(Value::as_str)
                        && let Ok(mut sent) = sent.lock()
                    {
                        sent.push(method.to_owned());
                    }
                    if options.close_after.is_some_and(|n| received > n) {
                        let _ = ws.close(None).await;
                        return;
                    }
                    let Some(body) = body else { continue };
                    if body.get("method").and_then(Value::as_str) == Some("notifications/initialized") {
                        let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"});
                        let _ = ws.send(Message::text(note.to_string())).await;
                        if let Some(count) = options.ping_flood {
                            // Each ping asks for a pong the client cannot send: nothing reads.
                            let payload = bytes::Bytes::from(vec![b'p'; 125]);
                            for _ in 0..count {
                                if ws.feed(Message::Ping(payload.clone())).await.is_err() {
                                    return;
                                }
                            }
                            if ws.flush().await.is_ok() {
                                ended.store(true, std::sync::atomic::Ordering::SeqCst);
                            }
                            // Held open, unread, until the server stops.
                            std::future::pending::<()>().await;
                        }
                    }
                    if let Some(mut answer) = crate::http::answer(&body, "2025-11-25") {
                        if options.name_connections && body.get("method").and_then(Value::as_str) == Some("initialize")
                        {
                            answer["result"]["instructions"] = json!(format!("connection-{connection}"));
                        }
                        if let Some(n) = options.huge {
                            let filler = json!({"jsonrpc": "2.0", "method": "notifications/message",
                                "params": {"level": "info", "data": "x".repeat(n)}});
                            let _ = ws.send(Message::text(filler.to_string())).await;
                        }
                        let _ = ws.send(Message::text(answer.to_string())).await;
                    }
                }
            });
        }
    });
    Ok(RunningWsServer { addr, protocols, methods, flooded, task })
}
