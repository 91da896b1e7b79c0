//! The WebSocket transport for `ws://` and `wss://` URLs: subprotocol `mcp`, one JSON-RPC
//! message per text frame.
//!
//! The handshake asks for subprotocol `mcp` and refuses a server that does not choose it: a
//! WebSocket endpoint that is not an MCP server should fail at once, not at the first message.
//! Frames and messages are capped at `max_message_bytes` (tungstenite enforces it while
//! reading). Connecting is retried with backoff when the server cannot be reached.

use std::collections::BTreeMap;
use std::time::Duration;

use async_trait::async_trait;
use futures_util::stream::{SplitSink, SplitStream};
use futures_util::{SinkExt, StreamExt};
use http::header::{AUTHORIZATION, HeaderName, HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use tokio::net::TcpStream;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig as WsLimits;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::backoff::Backoff;
use crate::http::DEFAULT_MAX_MESSAGE_BYTES;
use crate::transport::{Transport, TransportError, TransportSink, TransportStream};

/// The subprotocol MCP over WebSocket negotiates.
pub const SUBPROTOCOL: &str = "mcp";

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Configuration of a WebSocket transport.
#[derive(Clone)]
pub struct WebSocketConfig {
    /// `ws://` or `wss://`.
    pub url: String,
    /// Headers sent with the handshake.
    pub headers: BTreeMap<String, String>,
    /// The name of an environment variable holding a bearer token.
    pub bearer_token_env: Option<String>,
    /// Limit on one message.
    pub max_message_bytes: usize,
    /// Retrying a connection that could not be made.
    pub reconnect: Backoff,
    /// Timeout of one connection attempt (TCP, TLS and the upgrade).
    pub connect_timeout: Duration,
}

impl std::fmt::Debug for WebSocketConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocketConfig")
            .field("url", &self.url)
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("bearer_token_env", &self.bearer_token_env)
            .finish_non_exhaustive()
    }
}

impl WebSocketConfig {
    /// A configuration with defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
            bearer_token_env: None,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            reconnect: Backoff::default(),
            connect_timeout: Duration::from_secs(10),
        }
    }
}

/// A connected WebSocket.
pub struct WebSocketTransport {
    socket: Socket,
    url: String,
    max_bytes: usize,
}

impl std::fmt::Debug for WebSocketTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocketTransport").field("url", &self.url).finish_non_exhaustive()
    }
}

fn is_unreachable(e: &WsError) -> bool {
    matches!(e, WsError::Io(_))
}

impl WebSocketTransport {
    /// Connects (with retries for an unreachable server) and checks the subprotocol.
    pub async fn connect(config: WebSocketConfig) -> Result<WebSocketTransport, TransportError> {
        let bad = TransportError::Config;
        let mut request =
            config.url.as_str().into_client_request().map_err(|e| bad(format!("invalid url {:?}: {e}", config.url)))?;
        let headers = request.headers_mut();
        headers.insert(SEC_WEBSOCKET_PROTOCOL, HeaderValue::from_static(SUBPROTOCOL));
        for (name, value) in &config.headers {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("invalid header name {name:?}")))?;
            let value = HeaderValue::from_str(value)
                .map_err(|_| bad(format!("the value of header {name:?} is not a valid header value")))?;
            headers.insert(header, value);
        }
        if let Some(var) = &config.bearer_token_env {
            let token = std::env::var(var)
                .map_err(|_| bad(format!("the environment variable {var} (bearer_token_env) is not set")))?;
            let value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .map_err(|_| bad(format!("the token in {var} is not a valid header value")))?;
            headers.insert(AUTHORIZATION, value);
        }
        let limits = WsLimits::default()
            .max_message_size(Some(config.max_message_bytes))
            .max_frame_size(Some(config.max_message_bytes));
        let mut failed = 0;
        let (socket, response) = loop {
            let attempt = tokio::time::timeout(
                config.connect_timeout,
                tokio_tungstenite::connect_async_with_config(request.clone(), Some(limits), true),
            )
            .await;
            match attempt {
                Ok(Ok(connected)) => break connected,
                Ok(Err(e)) if is_unreachable(&e) && config.reconnect.allows(failed + 1) => {
                    tokio::time::sleep(config.reconnect.delay(failed)).await;
                    failed += 1;
                }
                Ok(Err(e)) => {
                    let context = format!("could not connect to {} (after {} attempts)", config.url, failed + 1);
                    return Err(TransportError::Closed(format!("{context}: {e}")));
                }
                Err(_) => {
                    return Err(TransportError::Closed(format!(
                        "connecting to {} took longer than {:?}",
                        config.url, config.connect_timeout
                    )));
                }
            }
        };
        let chosen = response.headers().get(SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok());
        if chosen != Some(SUBPROTOCOL) {
            return Err(TransportError::Closed(format!(
                "{} did not accept the WebSocket subprotocol {SUBPROTOCOL:?} (it chose {chosen:?}); is it an MCP server?",
                config.url
            )));
        }
        Ok(WebSocketTransport { socket, url: config.url, max_bytes: config.max_message_bytes })
    }
}

struct WsSink(SplitSink<Socket, Message>);

struct WsStream {
    inner: SplitStream<Socket>,
    url: String,
    max_bytes: usize,
    reason: Option<String>,
}

impl Transport for WebSocketTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        let (sink, stream) = self.socket.split();
        let stream = WsStream { inner: stream, url: self.url, max_bytes: self.max_bytes, reason: None };
        (Box::new(WsSink(sink)), Box::new(stream))
    }
}

#[async_trait]
impl TransportSink for WsSink {
    async fn send(&mut self, messages: &[String]) -> Result<(), TransportError> {
        for text in messages {
            // feed, then one flush for the batch.
            self.0.feed(Message::text(text.clone())).await.map_err(|e| io("sending a WebSocket frame", e))?;
        }
        self.0.flush().await.map_err(|e| io("sending a WebSocket frame", e))
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        // A server that does not answer the close handshake must not hold us up.
        let _ = tokio::time::timeout(Duration::from_secs(2), self.0.close()).await;
        Ok(())
    }
}

fn io(context: &str, e: WsError) -> TransportError {
    TransportError::Io { context: context.to_owned(), source: std::io::Error::other(e.to_string()) }
}

#[async_trait]
impl TransportStream for WsStream {
    async fn recv(&mut self) -> Result<Option<String>, TransportError> {
        loop {
            match self.inner.next().await {
                None => return Ok(None),
                Some(Ok(Message::Text(text))) => return Ok(Some(text.as_str().to_owned())),
                Some(Ok(Message::Binary(bytes))) => match String::from_utf8(bytes.to_vec()) {
                    // MCP sends text frames; a binary frame holding UTF-8 JSON is read anyway.
                    Ok(text) => return Ok(Some(text)),
                    Err(_) => return Err(TransportError::NotUtf8),
                },
                Some(Ok(Message::Close(frame))) => {
                    self.reason = Some(match frame {
                        Some(f) => format!("the server closed the WebSocket ({}: {})", f.code, f.reason),
                        None => "the server closed the WebSocket".to_owned(),
                    });
                    return Ok(None);
                }
                // Pings are answered by tungstenite; pongs and raw frames mean nothing here.
                Some(Ok(_)) => {}
                Some(Err(WsError::Capacity(e))) => {
                    let reason = format!(
                        "the server sent a WebSocket message over {} bytes (max_message_bytes): {e}",
                        self.max_bytes
                    );
                    self.reason = Some(reason.clone());
                    return Err(TransportError::Closed(reason));
                }
                Some(Err(e)) => {
                    let reason = format!("the WebSocket to {} failed: {e}", self.url);
                    self.reason = Some(reason.clone());
                    return Err(TransportError::Closed(reason));
                }
            }
        }
    }

    async fn closed_reason(&mut self) -> String {
        self.reason.clone().unwrap_or_else(|| format!("the WebSocket to {} was closed", self.url))
    }
}
