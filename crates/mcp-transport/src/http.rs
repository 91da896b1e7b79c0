//! The HTTP transports: Streamable HTTP (2025-03-26 and later) and the 2024-11-05 HTTP+SSE
//! transport, which the Streamable one falls back to when a server is too old for it.
//!
//! Streamable HTTP: every message is a POST with `Accept: application/json, text/event-stream`;
//! a request's answer comes back as one JSON body or as an SSE stream (which may carry the
//! server's own requests and notifications first). The `Mcp-Session-Id` the server hands out
//! on `initialize` goes on every later request, `MCP-Protocol-Version` once the revision is
//! known, and `Mcp-Method` / `Mcp-Name` always (the 2026-07-28 revision routes on them). A
//! standalone GET stream carries messages not tied to a request. An answer stream that drops
//! after an event id resumes with `Last-Event-ID`. Reconnecting any stream waits at least
//! [`STREAM_RECONNECT`]'s delay (1 s or more, growing with jitter up to a cap, and given up
//! after a bound of reconnects that brought no message); the server's `retry:` can lengthen
//! that wait, never shorten it. A 404 on a
//! request carrying a session id means the server ended the session: the transport says so
//! ([`Inbound::SessionLost`]), forgets the session id and fails that request unsent
//! ([`TransportError::SessionLost`]); the client opens a new session with its own handshake and
//! sends the request once more. Until that handshake nothing else goes out ([`RestoreGate`]).
//!
//! The transport knows nothing about pending requests: what it routes on (the request's id and
//! method, the revision, the `Mcp-Name`) comes with each outgoing message from the session,
//! and it learns the session id and negotiated revision from the answers. An HTTP failure of
//! one request fails that request at once (`Inbound::Failed`, with the status), so its caller
//! does not wait for a timeout and never mistakes it for an error answered by the server.
//!
//! By job: `streamable` (a message's exchange: the POST, its answer, the session, the fallback),
//! `streams` (SSE answer streams resumed, the standalone GET stream), `legacy` (the 2024-11-05
//! HTTP+SSE transport), `clients` (the process's shared HTTP clients, the plain-http fast path,
//! and reading an answer).

mod clients;
mod legacy;
mod streamable;
mod streams;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use http::header::{AUTHORIZATION, HeaderMap, HeaderName, HeaderValue};
use mcp_client::{
    Authorizer, Connector, Exchange, Inbound, Opened, RestoreGate, Transport, TransportError, TransportSink,
    TransportStream,
};
use mcp_protocol::Outgoing;
use mcp_safety::Backoff;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use url::Url;

use crate::DEFAULT_MAX_MESSAGE_BYTES;
use clients::{PlainClient, shared_plain_client};

pub use clients::shared_client;
pub use streams::{MIN_STREAM_RETRY, STREAM_RECONNECT};

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";
/// How long the writer waits for the HTTP answer to a notification or reply.
const INLINE_SEND_TIMEOUT: Duration = Duration::from_secs(30);

/// Which HTTP transport to speak.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum HttpMode {
    /// Streamable HTTP; if `initialize` is refused with a 4xx other than 401/403, the
    /// 2024-11-05 HTTP+SSE transport, as the specification's backwards-compatibility section
    /// describes.
    #[default]
    Auto,
    /// Streamable HTTP only.
    StreamableHttp,
    /// The 2024-11-05 HTTP+SSE transport only (GET the SSE endpoint, POST to its `endpoint`).
    LegacySse,
}

/// Configuration of an HTTP transport.
#[derive(Clone)]
#[non_exhaustive]
pub struct HttpConfig {
    /// The MCP endpoint (Streamable HTTP) or the SSE endpoint (legacy).
    pub url: String,
    /// Headers sent on every request.
    pub headers: BTreeMap<String, String>,
    /// The name of an environment variable holding a bearer token (sent as
    /// `Authorization: Bearer ...`). The token itself never appears in configuration.
    pub bearer_token_env: Option<String>,
    /// Which transport.
    pub mode: HttpMode,
    /// Limit on one message.
    pub max_message_bytes: usize,
    /// Reconnecting after connection failures.
    pub reconnect: Backoff,
    /// Timeout of establishing a TCP/TLS connection.
    pub connect_timeout: Duration,
    /// A label for logs (the server's configured name).
    pub label: String,
    /// Supplies `Authorization` headers and answers 401/403 challenges (OAuth); `None` sends
    /// only the configured headers.
    pub auth: Option<Arc<dyn Authorizer>>,
}

impl std::fmt::Debug for HttpConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Header values are often credentials: print names only.
        f.debug_struct("HttpConfig")
            .field("url", &mcp_safety::redact::url(&self.url))
            .field("headers", &self.headers.keys().collect::<Vec<_>>())
            .field("bearer_token_env", &self.bearer_token_env)
            .field("mode", &self.mode)
            .field("label", &self.label)
            .field("auth", &self.auth.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpConfig {
    /// Streamable HTTP (with the legacy fallback) to `url`, with defaults.
    pub fn new(url: impl Into<String>) -> Self {
        Self {
            url: url.into(),
            headers: BTreeMap::new(),
            bearer_token_env: None,
            mode: HttpMode::Auto,
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            reconnect: Backoff::default(),
            connect_timeout: Duration::from_secs(10),
            label: "server".to_owned(),
            auth: None,
        }
    }
}

/// Where an exchange started by a caller hands what comes back (see [`Exchange`]).
pub(super) type Deliver<'a> = dyn Fn(Inbound) + Send + Sync + 'a;

/// What the reader half receives.
pub(super) enum Event {
    /// A message, or one request failed (the connection goes on).
    Inbound(Inbound),
    /// The transport cannot go on.
    Fatal,
    /// Closed by the client.
    End,
}

#[derive(Default)]
pub(super) struct State {
    /// Kept as the header values they are sent as: every message carries both, and a header
    /// value is cloned without copying.
    pub(super) session_id: Option<HeaderValue>,
    pub(super) protocol_version: Option<HeaderValue>,
    /// Set once the legacy transport is in use: where messages are POSTed.
    pub(super) legacy_endpoint: Option<Url>,
    /// When a stream was last reconnected (see [`reconnect_wait`]).
    pub(super) last_reconnect: Option<std::time::Instant>,
    pub(super) tasks: Vec<JoinHandle<()>>,
    pub(super) closed: bool,
}

pub(super) struct Shared {
    pub(super) http: reqwest::Client,
    /// For `http` URLs without a proxy: hyper's pooled client directly, without reqwest's
    /// per-request layers (the URL parsed twice, redirect and retry services: most of what a
    /// call cost beyond the raw client).
    pub(super) plain: Option<PlainClient>,
    pub(super) url: Url,
    /// `url` as messages show it (its credentials hidden: [`mcp_safety::redact::url`]).
    pub(super) shown: String,
    /// `url` as hyper takes it, parsed once (for `plain`).
    pub(super) uri: Option<http::Uri>,
    pub(super) headers: HeaderMap,
    pub(super) label: String,
    pub(super) max_bytes: usize,
    pub(super) backoff: Backoff,
    pub(super) mode: HttpMode,
    pub(super) state: Mutex<State>,
    /// Closed from a session's expiry to the client's new handshake.
    pub(super) gate: RestoreGate,
    /// POSTs the server answered (any 2xx) so far: the GET stream failing while they are
    /// answered is no sign that the server went away.
    pub(super) posts_answered: std::sync::atomic::AtomicU64,
    pub(super) events: mpsc::Sender<Event>,
    pub(super) fatal_reason: Mutex<Option<String>>,
    pub(super) auth: Option<Arc<dyn Authorizer>>,
}

impl Shared {
    pub(super) fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn spawn(self: &Arc<Self>, task: impl Future<Output = ()> + Send + 'static) {
        let mut state = self.state();
        if state.closed {
            return;
        }
        state.tasks.retain(|t| !t.is_finished());
        state.tasks.push(tokio::spawn(task));
    }

    pub(super) async fn fatal(&self, reason: String) {
        if let Ok(mut r) = self.fatal_reason.lock()
            && r.is_none()
        {
            *r = Some(reason);
        }
        let _ = self.events.send(Event::Fatal).await;
    }
}

#[async_trait]
impl Connector for HttpConfig {
    async fn open(&self, name: &str) -> Result<Opened, TransportError> {
        let mut config = self.clone();
        config.label = name.to_owned();
        Ok(Opened::new(HttpTransport::new(config)?))
    }
}

/// A remote MCP server over HTTP. Create with [`HttpTransport::new`]; no connection is made
/// until the client sends its first message.
pub struct HttpTransport {
    shared: Arc<Shared>,
    events: mpsc::Receiver<Event>,
}

impl std::fmt::Debug for HttpTransport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpTransport").field("url", &self.shared.shown).finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// Checks the configuration (URL, header names and values, the bearer token's variable)
    /// and builds the HTTP client.
    pub fn new(config: HttpConfig) -> Result<HttpTransport, TransportError> {
        let bad = |m: String| TransportError::Config(m);
        let shown = || mcp_safety::redact::url(&config.url);
        let url = Url::parse(&config.url).map_err(|e| bad(format!("invalid url {:?}: {e}", shown())))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("{}: only http:// and https:// URLs are served over HTTP", shown())));
        }
        let mut headers = HeaderMap::new();
        for (name, value) in &config.headers {
            let header =
                HeaderName::from_bytes(name.as_bytes()).map_err(|_| bad(format!("invalid header name {name:?}")))?;
            let mut value = HeaderValue::from_str(value)
                .map_err(|_| bad(format!("the value of header {name:?} is not a valid header value")))?;
            value.set_sensitive(true);
            headers.insert(header, value);
        }
        if let Some(var) = &config.bearer_token_env {
            let token = std::env::var(var)
                .map_err(|_| bad(format!("the environment variable {var} (bearer_token_env) is not set")))?;
            let mut value = HeaderValue::from_str(&format!("Bearer {}", token.trim()))
                .map_err(|_| bad(format!("the token in {var} is not a valid header value")))?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
        }
        let tls = url.scheme() == "https";
        let http = shared_client(tls, config.connect_timeout)?;
        let plain = if tls { None } else { shared_plain_client(config.connect_timeout) };
        let (tx, rx) = mpsc::channel(1024);
        let shared = Arc::new(Shared {
            http,
            plain,
            uri: url.as_str().parse().ok(),
            shown: mcp_safety::redact::url(url.as_str()),
            url,
            headers,
            label: config.label,
            max_bytes: config.max_message_bytes,
            backoff: config.reconnect,
            mode: config.mode,
            state: Mutex::new(State::default()),
            gate: RestoreGate::default(),
            posts_answered: std::sync::atomic::AtomicU64::new(0),
            events: tx,
            fatal_reason: Mutex::new(None),
            auth: config.auth,
        });
        Ok(HttpTransport { shared, events: rx })
    }

    /// The session id the server handed out, if any (for tests and diagnostics).
    pub fn session_id(&self) -> Option<String> {
        self.shared.state().session_id.as_ref().and_then(|v| v.to_str().ok()).map(str::to_owned)
    }
}

pub(super) struct HttpSink {
    shared: Arc<Shared>,
    legacy_opened: bool,
}

pub(super) struct HttpStream {
    shared: Arc<Shared>,
    events: mpsc::Receiver<Event>,
}

impl Transport for HttpTransport {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        let sink = HttpSink { shared: Arc::clone(&self.shared), legacy_opened: false };
        (Box::new(sink), Box::new(HttpStream { shared: self.shared, events: self.events }))
    }
}

/// The request path of Streamable HTTP: the caller's task makes the POST and reads its answer.
pub(super) struct HttpExchange {
    shared: Arc<Shared>,
}

#[async_trait]
impl Exchange for HttpExchange {
    async fn exchange(&self, message: Outgoing, deliver: &(dyn Fn(Inbound) + Send + Sync)) {
        if message.is_request() {
            self.shared.deliver_to(&message, Some(deliver)).await;
        } else if tokio::time::timeout(INLINE_SEND_TIMEOUT, self.shared.deliver_to(&message, Some(deliver)))
            .await
            .is_err()
        {
            // The same bound as the writer's: a server that never answers a notification must
            // not hold its sender.
            tracing::warn!(server = %self.shared.label, "a notification got no HTTP answer within {INLINE_SEND_TIMEOUT:?}");
        }
    }
}

#[async_trait]
impl TransportSink for HttpSink {
    fn exchange(&self) -> Option<Arc<dyn Exchange>> {
        // The 2024-11-05 transport answers on its one SSE stream, opened by the first send.
        (self.shared.mode != HttpMode::LegacySse)
            .then(|| Arc::new(HttpExchange { shared: Arc::clone(&self.shared) }) as Arc<dyn Exchange>)
    }

    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError> {
        if self.shared.mode == HttpMode::LegacySse && !self.legacy_opened {
            self.shared.open_legacy().await.map_err(TransportError::Closed)?;
            self.legacy_opened = true;
        }
        for message in messages {
            if message.is_request() {
                // Requests run side by side: a slow tool call must not hold up the others.
                let shared = Arc::clone(&self.shared);
                self.shared.spawn(shared.deliver(message.clone()));
            } else {
                // Notifications and replies are quick (202) and must keep their order relative
                // to the requests that follow (`initialized` before `tools/list`). A server
                // that never answers one must not stall the writer (and with it cancellations).
                let sending = Arc::clone(&self.shared).deliver(message.clone());
                if tokio::time::timeout(INLINE_SEND_TIMEOUT, sending).await.is_err() {
                    tracing::warn!(server = %self.shared.label, "a notification got no HTTP answer within {INLINE_SEND_TIMEOUT:?}");
                }
            }
        }
        Ok(())
    }

    async fn close(&mut self) -> Result<(), TransportError> {
        let (tasks, session, legacy) = {
            let mut state = self.shared.state();
            state.closed = true;
            (std::mem::take(&mut state.tasks), state.session_id.take(), state.legacy_endpoint.is_some())
        };
        for task in tasks {
            task.abort();
        }
        if let Some(session) = session
            && !legacy
        {
            // Tell the server the session is over; it may not allow that (405), and a server
            // that is gone must not hold up the close.
            let shared = &self.shared;
            let version = shared.state().protocol_version.clone();
            let delete = async {
                // A protected server only ends a session for its owner.
                let authz = shared.authorization().await;
                let mut delete = shared
                    .http
                    .delete(shared.url.clone())
                    .headers(shared.headers_with(authz.as_ref()))
                    .header(SESSION_ID, session);
                if let Some(version) = version {
                    delete = delete.header(PROTOCOL_VERSION, version);
                }
                shared.send(delete).await
            };
            match tokio::time::timeout(Duration::from_secs(2), delete).await {
                Ok(Ok(resp)) => tracing::debug!(server = %self.shared.label, "DELETE session: HTTP {}", resp.status()),
                Ok(Err(e)) => tracing::debug!(server = %self.shared.label, "DELETE session failed: {e}"),
                Err(_) => tracing::debug!(server = %self.shared.label, "DELETE session timed out"),
            }
        }
        let _ = self.shared.events.try_send(Event::End);
        Ok(())
    }
}

impl Drop for HttpSink {
    fn drop(&mut self) {
        let mut state = self.shared.state();
        state.closed = true;
        for task in state.tasks.drain(..) {
            task.abort();
        }
    }
}

#[async_trait]
impl TransportStream for HttpStream {
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError> {
        match self.events.recv().await {
            Some(Event::Inbound(inbound)) => Ok(Some(inbound)),
            // The stream ends; closed_reason() says why (the client asks it).
            Some(Event::Fatal) => Ok(None),
            Some(Event::End) | None => Ok(None),
        }
    }

    async fn closed_reason(&mut self) -> String {
        self.shared
            .fatal_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| format!("the connection to {} was closed", self.shared.shown))
    }
}
