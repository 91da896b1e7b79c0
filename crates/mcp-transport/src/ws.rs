//! The WebSocket transport for `ws://` and `wss://` URLs: subprotocol `mcp`, one JSON-RPC
//! message per text frame.
//!
//! The handshake asks for subprotocol `mcp` and refuses a server that does not choose it: a
//! WebSocket endpoint that is not an MCP server should fail at once, not at the first message.
//! Frames and messages are capped at `max_message_bytes` (tungstenite enforces it while
//! reading). Connecting is retried with backoff when the server cannot be reached, and a
//! socket that drops mid-session is reopened the same way (see `Supervisor`); the client then
//! opens its session again on the new socket ([`Inbound::SessionLost`]).

use std::collections::{BTreeMap, HashSet};
use std::time::Duration;

use async_trait::async_trait;
use futures_util::{SinkExt, StreamExt};
use http::header::{AUTHORIZATION, HeaderName, HeaderValue, SEC_WEBSOCKET_PROTOCOL};
use mcp_client::{
    Connector, Inbound, Opened, RestoreGate, SessionLoss, Transport, TransportError, TransportSink, TransportStream,
};
use mcp_protocol::{Outgoing, RequestId};
use mcp_protocol::{methods, stateless};
use mcp_safety::Backoff;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot};
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::tungstenite::protocol::WebSocketConfig as WsLimits;
use tokio_tungstenite::tungstenite::{Error as WsError, Message};
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use crate::DEFAULT_MAX_MESSAGE_BYTES;

/// The subprotocol MCP over WebSocket negotiates.
pub const SUBPROTOCOL: &str = "mcp";

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// Configuration of a WebSocket transport.
#[derive(Clone)]
#[non_exhaustive]
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
            .field("url", &mcp_safety::redact::url(&self.url))
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
    dialer: Dialer,
}

#[async_trait]
impl Connector for WebSocketConfig {
    async fn open(&self, _name: &str) -> Result<Opened, TransportError> {
        Ok(Opened::new(WebSocketTransport::connect(self.clone()).await?))
    }
}

impl std::fmt::Debug for WebSocketTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WebSocketTransport").field("url", &self.dialer.shown).finish_non_exhaustive()
    }
}

fn is_unreachable(e: &WsError) -> bool {
    matches!(e, WsError::Io(_))
}

/// tungstenite's write buffer before it writes to the socket (its default).
const WRITE_BUFFER_BYTES: usize = 128 * 1024;

impl WebSocketTransport {
    /// Connects (with retries for an unreachable server) and checks the subprotocol.
    pub async fn connect(config: WebSocketConfig) -> Result<WebSocketTransport, TransportError> {
        let bad = TransportError::Config;
        let shown = mcp_safety::redact::url(&config.url);
        let mut request =
            config.url.as_str().into_client_request().map_err(|e| bad(format!("invalid url {shown:?}: {e}")))?;
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
            .max_frame_size(Some(config.max_message_bytes))
            // Unbounded by default: a server that sends pings and reads nothing would have
            // their pongs pile up without end. Room for our largest message twice over, then
            // the socket fails (and is opened again where reconnects are on).
            .max_write_buffer_size(WRITE_BUFFER_BYTES.saturating_add(config.max_message_bytes.saturating_mul(2)));
        let dialer = Dialer { request, limits, config, shown };
        let socket = dialer.dial().await?;
        Ok(WebSocketTransport { socket, dialer })
    }
}

/// What it takes to open the socket again.
struct Dialer {
    request: http::Request<()>,
    limits: WsLimits,
    config: WebSocketConfig,
    /// The URL as messages show it (its credentials hidden: [`mcp_safety::redact::url`]).
    shown: String,
}

impl Dialer {
    /// Connects (retrying an unreachable server with backoff) and checks the subprotocol.
    async fn dial(&self) -> Result<Socket, TransportError> {
        let config = &self.config;
        let mut failed = 0;
        let (socket, response) = loop {
            let attempt = tokio::time::timeout(
                config.connect_timeout,
                tokio_tungstenite::connect_async_with_config(self.request.clone(), Some(self.limits), true),
            )
            .await;
            match attempt {
                Ok(Ok(connected)) => break connected,
                Ok(Err(e)) if is_unreachable(&e) && config.reconnect.allows(failed + 1) => {
                    tokio::time::sleep(config.reconnect.delay(failed, rand::random())).await;
                    failed += 1;
                }
                Ok(Err(e)) => {
                    let context = format!("could not connect to {} (after {} attempts)", self.shown, failed + 1);
                    return Err(TransportError::Closed(format!("{context}: {e}")));
                }
                Err(_) => {
                    return Err(TransportError::Closed(format!(
                        "connecting to {} took longer than {:?}",
                        self.shown, config.connect_timeout
                    )));
                }
            }
        };
        let chosen = response.headers().get(SEC_WEBSOCKET_PROTOCOL).and_then(|v| v.to_str().ok());
        if chosen != Some(SUBPROTOCOL) {
            return Err(TransportError::Closed(format!(
                "{} did not accept the WebSocket subprotocol {SUBPROTOCOL:?} (it chose {chosen:?}); is it an MCP server?",
                self.shown
            )));
        }
        Ok(socket)
    }
}

/// From the sink to the supervisor.
enum Command {
    Send(Vec<Outgoing>, oneshot::Sender<Result<(), TransportError>>),
    Close(oneshot::Sender<()>),
}

/// From the supervisor to the stream.
enum Event {
    Message(String),
    Failed(RequestId, TransportError),
    /// The socket was opened again: the session is gone.
    Reopened,
    NotUtf8,
    End(String),
}

impl Transport for WebSocketTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        let (commands, command_rx) = mpsc::channel(64);
        let (events_tx, events) = mpsc::channel(1024);
        let url = self.dialer.shown.clone();
        let supervisor = Supervisor {
            dialer: self.dialer,
            events: events_tx,
            in_flight: HashSet::new(),
            handshake: None,
            opened: false,
            gate: RestoreGate::default(),
            reopened_at: None,
            quick_drops: 0,
        };
        let task = tokio::spawn(supervisor.run(self.socket, command_rx));
        (Box::new(WsSink { commands, task }), Box::new(WsStream { events, url, reason: None }))
    }
}

/// Owns the socket; reopens it when it drops.
///
/// Requests in flight when the socket drops fail at once (they may or may not have run: a tool
/// call is not retried behind the caller's back). The socket is reopened with backoff and the
/// client told ([`Inbound::SessionLost`]); it opens the session again with its own handshake,
/// and until then nothing else goes out ([`RestoreGate`]). A socket that drops before its first
/// handshake was answered, or while the client makes it again, is not reopened; nor is one that
/// cannot be: the stream ends with the reason.
struct Supervisor {
    dialer: Dialer,
    events: mpsc::Sender<Event>,
    in_flight: HashSet<RequestId>,
    /// The client's handshake request (`initialize`, `server/discover`) while it awaits its answer.
    handshake: Option<RequestId>,
    /// A handshake was answered: there is a session to open again after a drop.
    opened: bool,
    /// Closed from a reopened socket to the client's new handshake.
    gate: RestoreGate,
    /// When the socket was last opened again, and how many times in a row it dropped within
    /// [`STEADY_AFTER`] of that: a server that accepts and drops at once is given up on after
    /// the reconnect policy's attempts, not reopened forever.
    reopened_at: Option<tokio::time::Instant>,
    quick_drops: u32,
}

/// How long a reopened socket must last for its drop to count as a new failure, not another in
/// a row.
const STEADY_AFTER: Duration = Duration::from_secs(30);

/// The id and method of a frame, read without building anything else: an id that is not a
/// string or an integer is refused as soon as it starts (read into a value, an id of 16 MiB of
/// `{}` took ~860 MiB), and so is the frame then.
fn peek(text: &str) -> (Option<RequestId>, Option<String>) {
    #[derive(serde::Deserialize)]
    struct Head {
        id: Option<RequestId>,
        method: Option<String>,
    }
    match serde_json::from_str::<Head>(text) {
        Ok(head) => (head.id, head.method),
        Err(_) => (None, None),
    }
}

/// The request a `notifications/cancelled` of ours names: the server need not answer it, so it
/// is no longer awaited.
fn cancelled_request(message: &Outgoing) -> Option<RequestId> {
    #[derive(serde::Deserialize)]
    struct Cancelled {
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    #[serde(rename_all = "camelCase")]
    struct Params {
        request_id: Option<RequestId>,
    }
    if message.method() != Some(methods::CANCELLED) {
        return None;
    }
    serde_json::from_str::<Cancelled>(message.text()).ok()?.params?.request_id
}

impl Supervisor {
    async fn run(mut self, mut socket: Socket, mut commands: mpsc::Receiver<Command>) {
        loop {
            let dropped = tokio::select! {
                command = commands.recv() => match command {
                    Some(Command::Send(messages, ack)) => {
                        let result = self.write(&mut socket, messages).await;
                        let dropped = result.as_ref().err().map(ToString::to_string);
                        let _ = ack.send(result);
                        dropped
                    }
                    Some(Command::Close(done)) => {
                        self.close(&mut socket).await;
                        let _ = done.send(());
                        return;
                    }
                    None => {
                        self.close(&mut socket).await;
                        return;
                    }
                },
                frame = socket.next() => self.read(frame).await,
            };
            let Some(why) = dropped else { continue };
            match self.reopen(&why).await {
                Ok(new) => socket = new,
                Err(reason) => {
                    let _ = self.events.send(Event::End(reason)).await;
                    return;
                }
            }
        }
    }

    async fn close(&mut self, socket: &mut Socket) {
        // A server that does not answer the close handshake must not hold us up.
        let _ = tokio::time::timeout(Duration::from_secs(2), socket.close(None)).await;
        let reason = format!("the WebSocket to {} was closed by the client", self.dialer.shown);
        let _ = self.events.send(Event::End(reason)).await;
    }

    /// Writes a batch (one flush), noting requests in flight and the client's handshake.
    async fn write(&mut self, socket: &mut Socket, messages: Vec<Outgoing>) -> Result<(), TransportError> {
        for message in messages {
            if !self.gate.admits(&message) {
                // The socket was opened again and the client's handshake has not come yet.
                if let Some(id) = message.id().filter(|_| message.is_request()) {
                    let error = TransportError::SessionLost(format!(
                        "{} not sent: the WebSocket to {} was opened again and the session is not open yet",
                        message.method().unwrap_or("the request"),
                        self.dialer.shown
                    ));
                    let _ = self.events.send(Event::Failed(id.clone(), error)).await;
                }
                continue;
            }
            if let Some(id) = cancelled_request(&message) {
                self.in_flight.remove(&id);
            }
            if let (Some(id), Some(method)) = (message.id(), message.method()) {
                self.in_flight.insert(id.clone());
                if matches!(method, methods::INITIALIZE | stateless::SERVER_DISCOVER) {
                    self.handshake = Some(id.clone());
                }
            }
            socket.feed(Message::text(message.into_text())).await.map_err(|e| io("sending a WebSocket frame", e))?;
        }
        socket.flush().await.map_err(|e| io("sending a WebSocket frame", e))
    }

    /// Handles one incoming frame; returns why the socket dropped, if it did.
    async fn read(&mut self, frame: Option<Result<Message, WsError>>) -> Option<String> {
        let text = match frame {
            None => return Some("the server closed the WebSocket".to_owned()),
            Some(Ok(Message::Text(text))) => text.as_str().to_owned(),
            // MCP sends text frames; a binary frame holding UTF-8 JSON is read anyway.
            Some(Ok(Message::Binary(bytes))) => match String::from_utf8(bytes.to_vec()) {
                Ok(text) => text,
                Err(_) => {
                    let _ = self.events.send(Event::NotUtf8).await;
                    return None;
                }
            },
            Some(Ok(Message::Close(frame))) => {
                return Some(match frame {
                    Some(f) => format!("the server closed the WebSocket ({}: {})", f.code, f.reason),
                    None => "the server closed the WebSocket".to_owned(),
                });
            }
            // Pings are answered by tungstenite; pongs and raw frames mean nothing here.
            Some(Ok(_)) => return None,
            Some(Err(WsError::Capacity(e))) => {
                return Some(format!(
                    "the server sent a WebSocket message over {} bytes (max_message_bytes): {e}",
                    self.dialer.config.max_message_bytes
                ));
            }
            Some(Err(e)) => return Some(format!("the WebSocket to {} failed: {e}", self.dialer.shown)),
        };
        if let (Some(id), None) = peek(&text) {
            self.in_flight.remove(&id);
            if self.handshake.as_ref() == Some(&id) {
                self.handshake = None;
                self.opened = true;
            }
        }
        let _ = self.events.send(Event::Message(text)).await;
        None
    }

    /// The socket dropped: fail what was in flight, reconnect, tell the client.
    async fn reopen(&mut self, why: &str) -> Result<Socket, String> {
        // Without a session (none yet, or the client's new handshake cut short) there is nothing
        // to open again.
        let session = self.opened && self.handshake.take().is_none();
        for id in self.in_flight.drain() {
            let error = TransportError::NoAnswer(format!(
                "{why}; the request may or may not have run (the connection is being reopened)"
            ));
            let _ = self.events.send(Event::Failed(id, error)).await;
        }
        if self.dialer.config.reconnect.max_attempts == 0 || !session {
            return Err(why.to_owned());
        }
        let quick = self.reopened_at.is_some_and(|at| at.elapsed() < STEADY_AFTER);
        self.quick_drops = if quick { self.quick_drops.saturating_add(1) } else { 0 };
        if !self.dialer.config.reconnect.allows(self.quick_drops) {
            return Err(format!(
                "{why}; it dropped {} times in a row within {} s of being opened again, so it is not opened again",
                self.quick_drops + 1,
                STEADY_AFTER.as_secs()
            ));
        }
        tracing::info!(url = %self.dialer.shown, "{why}; reconnecting");
        tokio::time::sleep(self.dialer.config.reconnect.delay(self.quick_drops, rand::random())).await;
        let socket = self.dialer.dial().await.map_err(|e| format!("{why}; reconnecting failed: {e}"))?;
        self.reopened_at = Some(tokio::time::Instant::now());
        self.gate.close();
        let _ = self.events.send(Event::Reopened).await;
        Ok(socket)
    }
}

struct WsSink {
    commands: mpsc::Sender<Command>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for WsSink {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct WsStream {
    events: mpsc::Receiver<Event>,
    url: String,
    reason: Option<String>,
}

#[async_trait]
impl TransportSink for WsSink {
    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError> {
        let (ack, done) = oneshot::channel();
        let gone = || TransportError::Closed("the WebSocket is closed".to_owned());
        self.commands.send(Command::Send(messages.to_vec(), ack)).await.map_err(|_| gone())?;
        done.await.map_err(|_| gone())?
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        let (done, closed) = oneshot::channel();
        if self.commands.send(Command::Close(done)).await.is_ok() {
            let _ = tokio::time::timeout(Duration::from_secs(3), closed).await;
        }
        Ok(())
    }
}

fn io(context: &str, e: WsError) -> TransportError {
    TransportError::Io { context: context.to_owned(), source: std::io::Error::other(e.to_string()) }
}

#[async_trait]
impl TransportStream for WsStream {
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError> {
        match self.events.recv().await {
            Some(Event::Message(text)) => Ok(Some(Inbound::Message(text))),
            Some(Event::Failed(id, error)) => Ok(Some(Inbound::Failed { id, error })),
            Some(Event::Reopened) => Ok(Some(Inbound::SessionLost(SessionLoss::Reconnected))),
            Some(Event::NotUtf8) => Err(TransportError::NotUtf8),
            Some(Event::End(reason)) => {
                self.reason = Some(reason);
                Ok(None)
            }
            None => Ok(None),
        }
    }

    async fn closed_reason(&mut self) -> String {
        self.reason.clone().unwrap_or_else(|| format!("the WebSocket to {} was closed", self.url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_is_peeked_without_reading_its_id_into_values() {
        assert_eq!(peek(r#"{"jsonrpc":"2.0","id":"a","result":{"x":[1]}}"#), (Some("a".into()), None));
        assert_eq!(peek(r#"{"jsonrpc":"2.0","id":7,"method":"ping"}"#), (Some(7.into()), Some("ping".to_owned())));
        // An id that is neither: the frame is passed on as it is, with nothing noted.
        let dense = format!(r#"{{"id":[{}{{}}],"method":"x"}}"#, "{},".repeat(100_000));
        assert_eq!(peek(&dense), (None, None));
        assert_eq!(peek("not json"), (None, None));
    }

    #[test]
    fn a_cancellation_names_the_request_no_longer_awaited() {
        let cancel = |text: &str| cancelled_request(&Outgoing::parse(text.to_owned()));
        assert_eq!(
            cancel(r#"{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":3,"reason":"t"}}"#),
            Some(3.into())
        );
        assert_eq!(cancel(r#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"requestId":3}}"#), None);
        assert_eq!(cancel(r#"{"jsonrpc":"2.0","method":"notifications/cancelled"}"#), None);
    }
}
