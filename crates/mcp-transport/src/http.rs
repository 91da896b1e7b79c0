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
//! request carrying a session id means the session expired: the transport initializes again
//! (replaying the client's own `initialize`) and retries that message once.
//!
//! The transport knows nothing about pending requests: what it routes on (the request's id and
//! method, the revision, the `Mcp-Name`) comes with each outgoing message from the session,
//! and it learns the session id and negotiated revision from the answers. An HTTP failure of
//! one request fails that request at once (`Inbound::Failed`, with the status), so its caller
//! does not wait for a timeout and never mistakes it for an error answered by the server.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use async_trait::async_trait;
use http::StatusCode;
use http::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, HeaderMap, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use mcp_client::{
    AuthChallenge, AuthError, Authorizer, Connector, Exchange, Inbound, MAX_AUTH_RETRIES, Opened, Transport,
    TransportError, TransportSink, TransportStream,
};
use mcp_protocol::{Message, Outgoing, RequestId};
use mcp_safety::Backoff;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use url::Url;

use crate::DEFAULT_MAX_MESSAGE_BYTES;
use crate::sse::{EventStream, SseError};

const SESSION_ID: &str = "mcp-session-id";
const PROTOCOL_VERSION: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";
const MCP_METHOD: &str = "mcp-method";
const MCP_NAME: &str = "mcp-name";
/// How much of an error body is kept for the message.
const ERROR_BODY_BYTES: usize = 1024;
/// How long the writer waits for the HTTP answer to a notification or reply.
const INLINE_SEND_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the legacy transport waits for its `endpoint` event.
const ENDPOINT_WAIT: Duration = Duration::from_secs(15);
/// How much of a body that is not what was expected is shown, in characters.
const EXCERPT_CHARS: usize = 200;

/// Reconnects of SSE streams (the standalone GET stream, a dropped answer stream): the first
/// after 1 to 2 s, doubling up to a minute, jittered; the GET stream is given up after this many
/// reconnects in a row that brought no message. `retry: 0` with a new event id each time once
/// made about 70 GETs a second: see `reconnect_wait` for what a server's `retry:` may change.
pub const STREAM_RECONNECT: Backoff =
    Backoff { initial_delay: Duration::from_secs(2), max_delay: Duration::from_secs(60), max_attempts: 10 };

/// The shortest wait a server's `retry:` obtains.
pub const MIN_STREAM_RETRY: Duration = Duration::from_millis(500);

/// A server's `retry:` is taken as asked at most once in this long; other reconnects wait at
/// least the backoff's delay.
const RETRY_HONOURED_EVERY: Duration = Duration::from_secs(10);

/// How long to wait before reconnect `attempt` (0-based, counting reconnects in a row that
/// brought no message) of a stream whose server asked for `retry`. The first one, unless
/// another reconnect was `recent`, waits what the server asked (the specification's MUST; the
/// conformance suite checks it), but at least [`MIN_STREAM_RETRY`]; the others at least the
/// backoff's growing delay, so a server cannot make the client reconnect in a loop. Never more
/// than the cap unless that delay is.
fn reconnect_wait(attempt: u32, retry: Option<Duration>, recent: bool, jitter: f64) -> Duration {
    let floor = STREAM_RECONNECT.delay(attempt, jitter);
    match retry {
        Some(asked) if attempt == 0 && !recent => asked.clamp(MIN_STREAM_RETRY, STREAM_RECONNECT.max_delay),
        Some(asked) => asked.min(STREAM_RECONNECT.max_delay).max(floor),
        None => floor,
    }
}

/// The clients every HTTP transport of the process shares, one per (TLS, connect timeout).
static CLIENTS: Mutex<Vec<(bool, Duration, reqwest::Client)>> = Mutex::new(Vec::new());

/// The process's HTTP client for `https` (`tls`) or plain `http` URLs with this connect timeout,
/// built on first use and shared after: its pool keeps connections alive across transports, and
/// building one is most of what opening a session costs (a TLS client loads and decodes the
/// system's certificates). The plain client trusts no certificate at all, so `http://` URLs
/// never load them. Neither follows redirects: they could carry our headers elsewhere, and MCP
/// endpoints do not redirect.
///
/// # Errors
///
/// [`TransportError::Config`] when the TLS backend cannot be set up.
pub fn shared_client(tls: bool, connect_timeout: Duration) -> Result<reqwest::Client, TransportError> {
    let mut clients = CLIENTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, _, client)) = clients.iter().find(|(t, timeout, _)| *t == tls && *timeout == connect_timeout) {
        return Ok(client.clone());
    }
    let builder =
        reqwest::Client::builder().connect_timeout(connect_timeout).redirect(reqwest::redirect::Policy::none());
    let builder = if tls { builder } else { builder.tls_certs_only([]) };
    let client = builder
        .build()
        .map_err(|e| TransportError::Config(format!("could not build the HTTP client: {}", error_chain(&e))))?;
    clients.push((tls, connect_timeout, client.clone()));
    Ok(client)
}

/// hyper's pooled client, for plain `http` without a proxy.
type PlainClient =
    hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, reqwest::Body>;

/// The plain clients every HTTP transport of the process shares, one per connect timeout.
static PLAIN_CLIENTS: Mutex<Vec<(Duration, PlainClient)>> = Mutex::new(Vec::new());

/// The process's hyper client for `http` URLs with this connect timeout; `None` when the
/// environment names a proxy for `http` (reqwest honours it; this client would not).
fn shared_plain_client(connect_timeout: Duration) -> Option<PlainClient> {
    if names_an_http_proxy(|var| std::env::var_os(var)) {
        return None;
    }
    let mut clients = PLAIN_CLIENTS.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if let Some((_, client)) = clients.iter().find(|(timeout, _)| *timeout == connect_timeout) {
        return Some(client.clone());
    }
    let mut connector = hyper_util::client::legacy::connect::HttpConnector::new();
    connector.set_connect_timeout(Some(connect_timeout));
    connector.set_nodelay(true);
    let client = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new()).build(connector);
    clients.push((connect_timeout, client.clone()));
    Some(client)
}

/// Whether the environment (read through `lookup`) names a proxy for plain `http`, as reqwest
/// reads it.
fn names_an_http_proxy(lookup: impl Fn(&str) -> Option<std::ffi::OsString>) -> bool {
    ["http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"].iter().any(|var| lookup(var).is_some_and(|v| !v.is_empty()))
}

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
            .field("url", &self.url)
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
type Deliver<'a> = dyn Fn(Inbound) + Send + Sync + 'a;

/// What the reader half receives.
enum Event {
    /// A message, or one request failed (the connection goes on).
    Inbound(Inbound),
    /// The transport cannot go on.
    Fatal,
    /// Closed by the client.
    End,
}

#[derive(Default)]
struct State {
    /// Kept as the header values they are sent as: every message carries both, and a header
    /// value is cloned without copying.
    session_id: Option<HeaderValue>,
    protocol_version: Option<HeaderValue>,
    /// The client's `initialize` request, replayed when the session expires.
    initialize: Option<Outgoing>,
    /// The client's `notifications/initialized`, replayed after it.
    initialized: Option<Outgoing>,
    /// Set once the legacy transport is in use: where messages are POSTed.
    legacy_endpoint: Option<Url>,
    /// When a stream was last reconnected (see [`reconnect_wait`]).
    last_reconnect: Option<std::time::Instant>,
    tasks: Vec<JoinHandle<()>>,
    closed: bool,
}

struct Shared {
    http: reqwest::Client,
    /// For `http` URLs without a proxy: hyper's pooled client directly, without reqwest's
    /// per-request layers (the URL parsed twice, redirect and retry services: most of what a
    /// call cost beyond the raw client).
    plain: Option<PlainClient>,
    url: Url,
    /// `url` as hyper takes it, parsed once (for `plain`).
    uri: Option<http::Uri>,
    headers: HeaderMap,
    label: String,
    max_bytes: usize,
    backoff: Backoff,
    mode: HttpMode,
    state: Mutex<State>,
    /// Serializes re-initialization when several requests see the session expire at once.
    reinit: tokio::sync::Mutex<()>,
    events: mpsc::Sender<Event>,
    fatal_reason: Mutex<Option<String>>,
    auth: Option<Arc<dyn Authorizer>>,
}

/// Where the messages read for one exchange go.
#[derive(Default)]
struct Collector<'a> {
    /// The caller that started the exchange, who takes what comes back; `None`: the reader.
    to: Option<&'a Deliver<'a>>,
    /// The id of the request whose answer ends the exchange.
    awaited: Option<RequestId>,
    /// The awaited request is `initialize`: its result names the revision.
    initialize: bool,
    /// Keep the awaited answer instead of passing it to the client (re-initialization).
    capture: bool,
    captured: Option<String>,
    answered: bool,
    /// Messages received (what counts as progress for a stream that keeps dropping).
    delivered: usize,
}

/// Where an SSE stream stands, for resuming it.
#[derive(Default)]
struct Cursor {
    last_event_id: Option<String>,
    retry: Option<Duration>,
}

/// Why a request could not be sent, or got no response.
#[derive(Debug)]
struct SendError {
    /// Connecting failed: the server never saw the request, so it may be sent again.
    connect: bool,
    text: String,
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text)
    }
}

/// Why an exchange failed.
enum Failure {
    /// An HTTP status other than success.
    Status { status: StatusCode, body: String },
    /// The request carried a session id and got 404.
    SessionExpired,
    /// The server could not be reached at all (after the connect retries).
    Unreachable(String),
    /// The answer could not be read.
    Transport(String),
    /// The stream ended before the answer and could not be resumed.
    NoAnswer(String),
    /// HTTP 401/403 while an authorizer is configured: ask it for a token and retry.
    Unauthorized(AuthChallenge),
    /// The authorizer could not obtain a token.
    Auth { status: StatusCode, error: AuthError },
}

impl Failure {
    /// The typed error one request fails with; `message` says what was sent where.
    fn into_error(self, message: String) -> TransportError {
        match self {
            Failure::Status { status, .. } => TransportError::HttpStatus { status: status.as_u16(), message },
            Failure::SessionExpired => TransportError::HttpStatus { status: 404, message },
            Failure::Unauthorized(challenge) => TransportError::HttpStatus { status: challenge.status, message },
            Failure::Auth { status, error } => {
                TransportError::Unauthorized { status: status.as_u16(), message, needs_login: error.needs_login }
            }
            Failure::Unreachable(_) | Failure::Transport(_) | Failure::NoAnswer(_) => TransportError::NoAnswer(message),
        }
    }

    fn describe(&self) -> String {
        match self {
            Failure::Status { status, body } if body.is_empty() => format!("HTTP {status}"),
            Failure::Status { status, body } => format!("HTTP {status}: {body}"),
            Failure::SessionExpired => "HTTP 404: the session expired".to_owned(),
            Failure::Unreachable(m) | Failure::Transport(m) | Failure::NoAnswer(m) => m.clone(),
            Failure::Unauthorized(c) => format!("HTTP {}: unauthorized", c.status),
            Failure::Auth { status, error } => format!("HTTP {status}: {error}"),
        }
    }
}

fn error_chain(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let next = s.to_string();
        if !text.contains(&next) {
            text.push_str(": ");
            text.push_str(&next);
        }
        source = s.source();
    }
    text
}

/// An HTTP response: hyper's own (plain `http`) or reqwest's. hyper's is not wrapped into
/// reqwest's type: that conversion parsed a placeholder URL for every response, the largest
/// single cost of a call beyond the raw client.
enum Answer {
    Plain(http::Response<hyper::body::Incoming>),
    Reqwest(reqwest::Response),
}

impl Answer {
    fn status(&self) -> StatusCode {
        match self {
            Answer::Plain(resp) => resp.status(),
            Answer::Reqwest(resp) => resp.status(),
        }
    }

    fn headers(&self) -> &HeaderMap {
        match self {
            Answer::Plain(resp) => resp.headers(),
            Answer::Reqwest(resp) => resp.headers(),
        }
    }

    /// The next piece of the body; `None` at its end.
    async fn chunk(&mut self) -> Option<Result<bytes::Bytes, String>> {
        match self {
            Answer::Plain(resp) => loop {
                let frame =
                    std::future::poll_fn(|cx| hyper::body::Body::poll_frame(std::pin::Pin::new(resp.body_mut()), cx))
                        .await?;
                match frame.map(hyper::body::Frame::into_data) {
                    Ok(Ok(data)) => return Some(Ok(data)),
                    // Trailers carry no data.
                    Ok(Err(_)) => {}
                    Err(e) => return Some(Err(error_chain(&e))),
                }
            },
            Answer::Reqwest(resp) => resp.chunk().await.map_err(|e| error_chain(&e)).transpose(),
        }
    }

    /// The body as a stream of pieces.
    fn into_stream(self) -> impl futures_util::Stream<Item = Result<bytes::Bytes, String>> + Send + Unpin + 'static {
        Box::pin(futures_util::stream::unfold(self, |mut answer| async move {
            answer.chunk().await.map(|chunk| (chunk, answer))
        }))
    }
}

/// Looked at on every answer, so without making a lowercased copy of the header.
fn is_event_stream(resp: &Answer) -> bool {
    const SSE: &[u8] = b"text/event-stream";
    resp.headers().get(CONTENT_TYPE).is_some_and(|v| {
        let value = v.as_bytes().trim_ascii_start();
        value.get(..SSE.len()).is_some_and(|start| start.eq_ignore_ascii_case(SSE))
    })
}

/// A `Content-Type` value as shown in messages.
fn content_type(value: Option<&HeaderValue>) -> Option<String> {
    value.and_then(|v| v.to_str().ok()).map(|s| s.trim().to_ascii_lowercase())
}

/// The refusal in a 401/403 answer, for the authorizer.
fn challenge_of(resp: &Answer, authz: Option<&HeaderValue>) -> AuthChallenge {
    AuthChallenge {
        status: resp.status().as_u16(),
        www_authenticate: resp
            .headers()
            .get_all(WWW_AUTHENTICATE)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .map(str::to_owned)
            .collect(),
        refused: authz.and_then(|v| v.to_str().ok()).map(mcp_safety::Secret::from),
    }
}

/// Reads at most `limit` bytes of a body; `None` when it is longer.
async fn read_bounded(mut resp: Answer, limit: usize) -> Result<Option<Vec<u8>>, String> {
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await {
        let chunk = chunk?;
        if body.len() + chunk.len() > limit {
            return Ok(None);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Some(body))
}

/// The start of an error body, on one line and made safe to show (a server controls it).
async fn error_body(mut resp: Answer) -> String {
    let mut body = Vec::new();
    while let Some(Ok(chunk)) = resp.chunk().await {
        body.extend_from_slice(&chunk);
        if body.len() >= ERROR_BODY_BYTES {
            body.truncate(ERROR_BODY_BYTES);
            break;
        }
    }
    mcp_safety::text::one_line(&String::from_utf8_lossy(&body), ERROR_BODY_BYTES)
}

/// What came back, for a message about an answer that is not what was asked for: the status,
/// the content type and the body's start, cleaned.
fn what_came_back(status: StatusCode, content_type: Option<&str>, body: &[u8]) -> String {
    let content_type =
        content_type.map_or_else(|| "no Content-Type".to_owned(), |ct| mcp_safety::text::one_line(ct, 80));
    let start = &body[..body.len().min(EXCERPT_CHARS * 4)];
    let excerpt = mcp_safety::text::one_line(&String::from_utf8_lossy(start), EXCERPT_CHARS);
    if excerpt.is_empty() {
        format!("HTTP {status}, {content_type}, an empty body")
    } else {
        format!("HTTP {status}, {content_type}: {excerpt}")
    }
}

impl Shared {
    /// [`reconnect_wait`] for this transport's streams, noting the reconnect.
    fn reconnect_wait(&self, attempt: u32, retry: Option<Duration>) -> Duration {
        let now = std::time::Instant::now();
        let last = self.state().last_reconnect.replace(now);
        let recent = last.is_some_and(|at| now.duration_since(at) < RETRY_HONOURED_EVERY);
        reconnect_wait(attempt, retry, recent, rand::random())
    }

    fn state(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn spawn(self: &Arc<Self>, task: impl Future<Output = ()> + Send + 'static) {
        let mut state = self.state();
        if state.closed {
            return;
        }
        state.tasks.retain(|t| !t.is_finished());
        state.tasks.push(tokio::spawn(task));
    }

    async fn fatal(&self, reason: String) {
        if let Ok(mut r) = self.fatal_reason.lock()
            && r.is_none()
        {
            *r = Some(reason);
        }
        let _ = self.events.send(Event::Fatal).await;
    }

    /// Sends one request: over the plain hyper client when there is one (an `http` URL, no
    /// proxy), else over reqwest.
    async fn send(&self, request: reqwest::RequestBuilder) -> Result<Answer, SendError> {
        let unsendable = |text: String| SendError { connect: false, text };
        let mut request = request.build().map_err(|e| unsendable(error_chain(&e)))?;
        let Some(plain) = &self.plain else {
            return match self.http.execute(request).await {
                Ok(resp) => Ok(Answer::Reqwest(resp)),
                Err(e) => Err(SendError { connect: e.is_connect(), text: error_chain(&e) }),
            };
        };
        // Made here rather than by reqwest's conversion, which parses the URL again each time.
        let uri = match &self.uri {
            Some(uri) if request.url() == &self.url => uri.clone(),
            _ => request.url().as_str().parse().map_err(|e: http::uri::InvalidUri| unsendable(e.to_string()))?,
        };
        let mut hyper_request = http::Request::new(request.body_mut().take().unwrap_or_default());
        *hyper_request.method_mut() = request.method().clone();
        *hyper_request.uri_mut() = uri;
        *hyper_request.headers_mut() = std::mem::take(request.headers_mut());
        match plain.request(hyper_request).await {
            Ok(resp) => Ok(Answer::Plain(resp)),
            Err(e) => Err(SendError { connect: e.is_connect(), text: error_chain(&e) }),
        }
    }

    /// Sends, retrying connection failures (never answered requests) with backoff.
    async fn send_retrying(&self, make: impl Fn() -> reqwest::RequestBuilder) -> Result<Answer, String> {
        let mut failed = 0;
        loop {
            match self.send(make()).await {
                Ok(resp) => return Ok(resp),
                // Only a failed connect is safe to repeat: the server never saw the message.
                Err(e) if e.connect && self.backoff.allows(failed + 1) => {
                    tracing::debug!(server = %self.label, "connecting failed, retrying: {e}");
                    tokio::time::sleep(self.backoff.delay(failed, rand::random())).await;
                    failed += 1;
                }
                Err(e) => {
                    let attempts = if e.connect { format!(" (after {} attempts)", failed + 1) } else { String::new() };
                    return Err(format!("could not reach {}{attempts}: {e}", self.url));
                }
            }
        }
    }

    /// The authorizer's header for the next request, if there is an authorizer and a token.
    async fn authorization(&self) -> Option<HeaderValue> {
        let value = self.auth.as_ref()?.authorization().await?;
        let mut value = HeaderValue::from_str(value.expose()).ok()?;
        value.set_sensitive(true);
        Some(value)
    }

    /// The configured headers, with the authorizer's `Authorization` in place of a configured
    /// one (never both).
    fn headers_with(&self, authz: Option<&HeaderValue>) -> HeaderMap {
        let mut headers = self.headers.clone();
        if let Some(value) = authz {
            headers.insert(AUTHORIZATION, value.clone());
        }
        headers
    }

    /// Every header of a request: the configured ones (with the authorizer's), then, unless the
    /// legacy transport is in use, the session, the revision and what the message routes on.
    /// Made as one map, the names and fixed values static, since this runs for every message.
    fn header_map(&self, accept: &'static str, message: Option<&Outgoing>, authz: Option<&HeaderValue>) -> HeaderMap {
        let mut headers = if self.headers.is_empty() && authz.is_none() {
            HeaderMap::with_capacity(8)
        } else {
            self.headers_with(authz)
        };
        headers.insert(ACCEPT, HeaderValue::from_static(accept));
        if message.is_some() {
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        }
        let state = self.state();
        if state.legacy_endpoint.is_some() {
            return headers;
        }
        // A value that is not a valid header value stays out (the server then refuses the request).
        fn put(headers: &mut HeaderMap, name: &'static str, value: &str) {
            if let Ok(value) = HeaderValue::from_str(value) {
                headers.insert(HeaderName::from_static(name), value);
            }
        }
        if let Some(session) = &state.session_id {
            headers.insert(HeaderName::from_static(SESSION_ID), session.clone());
        }
        match message.and_then(Outgoing::protocol_version) {
            Some(version) => put(&mut headers, PROTOCOL_VERSION, version.as_str()),
            None => {
                if let Some(version) = &state.protocol_version {
                    headers.insert(HeaderName::from_static(PROTOCOL_VERSION), version.clone());
                }
            }
        }
        drop(state);
        if let Some(message) = message {
            if let Some(method) = message.method() {
                put(&mut headers, MCP_METHOD, method);
            }
            if let Some(name) = message.routing_name() {
                put(&mut headers, MCP_NAME, &name);
            }
        }
        headers
    }

    fn post(&self, url: &Url, message: &Outgoing, authz: Option<&HeaderValue>) -> reqwest::RequestBuilder {
        let mut request = reqwest::Request::new(reqwest::Method::POST, url.clone());
        *request.headers_mut() = self.header_map("application/json, text/event-stream", Some(message), authz);
        *request.body_mut() = Some(message.text().to_owned().into());
        reqwest::RequestBuilder::from_parts(self.http.clone(), request)
    }

    fn get(&self, last_event_id: Option<&str>, authz: Option<&HeaderValue>) -> reqwest::RequestBuilder {
        let mut request = reqwest::Request::new(reqwest::Method::GET, self.url.clone());
        let mut headers = self.header_map("text/event-stream", None, authz);
        if let Some(value) = last_event_id.and_then(|id| HeaderValue::from_str(id).ok()) {
            headers.insert(HeaderName::from_static(LAST_EVENT_ID), value);
        }
        *request.headers_mut() = headers;
        reqwest::RequestBuilder::from_parts(self.http.clone(), request)
    }

    /// Hands a message or a failed request to whoever reads this exchange.
    async fn route(&self, inbound: Inbound, to: Option<&Deliver<'_>>) {
        match to {
            Some(deliver) => deliver(inbound),
            None => {
                let _ = self.events.send(Event::Inbound(inbound)).await;
            }
        }
    }

    /// One message the server sent: passed to the client, or kept when captured. The envelope
    /// is decoded once, here, to learn whether it is the awaited answer; the client takes the
    /// decoded message as it is.
    async fn accept(&self, text: String, c: &mut Collector<'_>) {
        c.delivered += 1;
        let Some(awaited) = &c.awaited else {
            return self.route(Inbound::Message(text), c.to).await;
        };
        let Ok(message) = Message::decode_str(&text) else {
            // The client says what is wrong with it.
            return self.route(Inbound::Message(text), c.to).await;
        };
        let answers = match &message {
            Message::Response(response) => Some(&response.id),
            Message::Error(error) => error.id.as_ref(),
            Message::Request(_) | Message::Notification(_) => None,
        };
        if answers == Some(awaited) {
            c.answered = true;
            if c.initialize
                && let Message::Response(response) = &message
                && let Ok(result) = serde_json::from_str::<Value>(response.result.get())
                && let Some(version) = result.get("protocolVersion").and_then(Value::as_str)
            {
                // One that is not a valid header value stays out (the server then refuses).
                self.state().protocol_version = HeaderValue::from_str(version).ok();
            }
            if c.capture {
                c.captured = Some(text);
                return;
            }
        }
        self.route(Inbound::Decoded(message), c.to).await;
    }

    /// A JSON body: one message or a batch.
    async fn accept_json(&self, body: &[u8], c: &mut Collector<'_>) -> Result<(), String> {
        let text = std::str::from_utf8(body).map_err(|_| "the server's JSON answer is not UTF-8".to_owned())?;
        let trimmed = text.trim();
        if trimmed.is_empty() {
            return Ok(());
        }
        if trimmed.starts_with('[') {
            let batch: Vec<Box<RawValue>> =
                serde_json::from_str(trimmed).map_err(|e| format!("the server's JSON answer is malformed: {e}"))?;
            for item in batch {
                self.accept(item.get().to_owned(), c).await;
            }
        } else {
            self.accept(trimmed.to_owned(), c).await;
        }
        Ok(())
    }

    /// Reads an SSE stream into the collector until it ends or the awaited answer arrives.
    async fn read_events(&self, resp: Answer, c: &mut Collector<'_>, cursor: &mut Cursor) -> Result<(), SseError> {
        let mut events = EventStream::new(resp.into_stream(), self.max_bytes);
        while let Some(event) = events.next().await {
            let event = event?;
            if let Some(id) = event.id {
                cursor.last_event_id = Some(id);
            }
            if let Some(retry) = event.retry {
                cursor.retry = Some(Duration::from_millis(retry));
            }
            match event.event.as_deref() {
                None | Some("" | "message") => {
                    // Priming events carry an id and an empty data field: nothing to pass on.
                    if let Some(data) = event.data.filter(|d| !d.trim().is_empty()) {
                        self.accept(data, c).await;
                    }
                }
                Some(other) => tracing::debug!(server = %self.label, "ignored an SSE event of type {other:?}"),
            }
            if c.answered {
                return Ok(());
            }
        }
        Ok(())
    }

    /// POSTs one message and reads what comes back, resuming a dropped answer stream.
    async fn exchange(&self, message: &Outgoing, c: &mut Collector<'_>) -> Result<(), Failure> {
        let legacy = self.state().legacy_endpoint.clone();
        let url = legacy.as_ref().unwrap_or(&self.url);
        let had_session = self.state().session_id.is_some();
        let authz = self.authorization().await;
        let resp =
            self.send_retrying(|| self.post(url, message, authz.as_ref())).await.map_err(Failure::Unreachable)?;
        let status = resp.status();
        if self.auth.is_some() && matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN) {
            return Err(Failure::Unauthorized(challenge_of(&resp, authz.as_ref())));
        }
        if legacy.is_some() {
            // The old transport answers on its SSE stream; the POST only says "accepted".
            return if status.is_success() {
                Ok(())
            } else {
                Err(Failure::Status { status, body: error_body(resp).await })
            };
        }
        if status == StatusCode::NOT_FOUND && had_session {
            return Err(Failure::SessionExpired);
        }
        if !status.is_success() {
            return Err(Failure::Status { status, body: error_body(resp).await });
        }
        if message.method() == Some("initialize")
            && let Some(session) = resp.headers().get(SESSION_ID).filter(|v| v.to_str().is_ok())
        {
            // A copy: the value as received is a slice of the connection's read buffer.
            self.state().session_id = HeaderValue::from_bytes(session.as_bytes()).ok();
        }
        if status == StatusCode::ACCEPTED || c.awaited.is_none() {
            return Ok(());
        }
        if is_event_stream(&resp) {
            let mut cursor = Cursor::default();
            let mut outcome = self.read_events(resp, c, &mut cursor).await;
            let mut attempts = 0;
            let mut delivered = c.delivered;
            while !c.answered {
                if c.delivered > delivered {
                    // The stream brought messages before it dropped: count afresh.
                    delivered = c.delivered;
                    attempts = 0;
                }
                if let Err(SseError::TooLarge { limit }) = outcome {
                    return Err(Failure::Transport(format!(
                        "the answer was an SSE event of more than {limit} bytes (max_message_bytes)"
                    )));
                }
                let Some(last) = cursor.last_event_id.clone() else {
                    let why = outcome.err().map(|e| format!(": {e}")).unwrap_or_default();
                    return Err(Failure::NoAnswer(format!(
                        "the server ended the answer stream without an answer{why}"
                    )));
                };
                if !self.backoff.allows(attempts) {
                    return Err(Failure::NoAnswer(format!(
                        "the answer stream dropped and {attempts} attempts to resume it failed"
                    )));
                }
                tokio::time::sleep(self.reconnect_wait(attempts, cursor.retry)).await;
                attempts += 1;
                let authz = self.authorization().await;
                let resp = match self.send(self.get(Some(&last), authz.as_ref())).await {
                    Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => resp,
                    Ok(resp) if resp.status() == StatusCode::NOT_FOUND && had_session => {
                        return Err(Failure::SessionExpired);
                    }
                    Ok(resp) => {
                        let status = resp.status();
                        return Err(Failure::Status { status, body: error_body(resp).await });
                    }
                    Err(e) => {
                        outcome = Err(SseError::Body(e.to_string()));
                        continue;
                    }
                };
                outcome = self.read_events(resp, c, &mut cursor).await;
            }
            return Ok(());
        }
        // Kept as it came (a shared buffer's slice) and made text only for a message.
        let content_type_header = resp.headers().get(CONTENT_TYPE).cloned();
        let content_type = || content_type(content_type_header.as_ref());
        match read_bounded(resp, self.max_bytes).await {
            Ok(Some(body)) => {
                // A login page or a proxy's error page can come back with 200: say what it was.
                // (Only the first byte is looked at: the decoding below reads the rest once, and
                // a body that merely starts like JSON fails there with the same account.)
                let starts_like_json =
                    body.iter().find(|b| !b.is_ascii_whitespace()).is_some_and(|b| matches!(b, b'{' | b'['));
                if !starts_like_json {
                    return Err(Failure::NoAnswer(format!(
                        "the answer is neither JSON nor an event stream ({})",
                        what_came_back(status, content_type().as_deref(), &body)
                    )));
                }
                self.accept_json(&body, c).await.map_err(Failure::Transport)?;
                if c.answered {
                    Ok(())
                } else {
                    // Nothing else will answer it: fail it now rather than at its timeout.
                    Err(Failure::NoAnswer(format!(
                        "the JSON answer did not answer this request ({})",
                        what_came_back(status, content_type().as_deref(), &body)
                    )))
                }
            }
            Ok(None) => Err(Failure::Transport(format!(
                "the answer was larger than {} bytes (max_message_bytes)",
                self.max_bytes
            ))),
            Err(e) => Err(Failure::Transport(format!("reading the answer failed: {e}"))),
        }
    }

    /// The session expired: initialize again (once, however many requests noticed).
    async fn reinitialize(self: &Arc<Self>, stale: Option<HeaderValue>) -> Result<(), Failure> {
        let _one_at_a_time = self.reinit.lock().await;
        let (initialize, initialized) = {
            let mut state = self.state();
            if state.session_id != stale {
                return Ok(()); // another request already did it
            }
            state.session_id = None;
            (state.initialize.clone(), state.initialized.clone())
        };
        let Some(initialize) = initialize else {
            return Err(Failure::Transport("the session expired before it was initialized".to_owned()));
        };
        tracing::info!(server = %self.label, "the session expired; initializing again");
        let mut c =
            Collector { awaited: initialize.id().cloned(), initialize: true, capture: true, ..Collector::default() };
        self.exchange(&initialize, &mut c).await?;
        if let Some(answer) = c.captured.as_deref()
            && serde_json::from_str::<Value>(answer).ok().and_then(|v| v.get("error").cloned()).is_some()
        {
            return Err(Failure::Transport(format!("initializing again failed: {answer}")));
        }
        if let Some(initialized) = initialized {
            self.open_get_stream().await;
            self.exchange(&initialized, &mut Collector::default()).await?;
        }
        Ok(())
    }

    /// Keeps what a session expiry replays.
    fn note(&self, message: &Outgoing) {
        match message.method() {
            Some("initialize") => self.state().initialize = Some(message.clone()),
            Some("notifications/initialized") => self.state().initialized = Some(message.clone()),
            _ => {}
        }
    }

    /// Sends one message the client wrote (from the writer), with the session-expiry retry
    /// and the legacy fallback; a failed request fails through the reader.
    async fn deliver(self: Arc<Self>, message: Outgoing) {
        self.deliver_to(&message, None).await;
    }

    /// [`Shared::deliver`], with what comes back handed to `to` (the caller that started the
    /// exchange) instead of the reader.
    async fn deliver_to(self: &Arc<Self>, message: &Outgoing, to: Option<&Deliver<'_>>) {
        let mut c = Collector {
            to,
            awaited: if message.is_request() { message.id().cloned() } else { None },
            initialize: message.method() == Some("initialize"),
            ..Collector::default()
        };
        if message.method() == Some("notifications/initialized") {
            // Open the GET stream first: servers announce things right after `initialized`
            // (server-everything its added tools), and what they send before the stream is
            // open is lost.
            self.open_get_stream().await;
        }
        let mut retried = false;
        let mut auth_retries = 0;
        let outcome = loop {
            let stale = self.state().session_id.clone();
            match self.exchange(message, &mut c).await {
                Err(Failure::Unauthorized(challenge)) => {
                    let status = StatusCode::from_u16(challenge.status).unwrap_or(StatusCode::UNAUTHORIZED);
                    let Some(auth) = self.auth.clone() else {
                        break Err(Failure::Status { status, body: String::new() });
                    };
                    if auth_retries >= MAX_AUTH_RETRIES {
                        break Err(Failure::Auth {
                            status,
                            error: AuthError::failed(format!(
                                "still refused after {auth_retries} new tokens; giving up"
                            )),
                        });
                    }
                    auth_retries += 1;
                    if let Err(error) = auth.challenged(&challenge).await {
                        break Err(Failure::Auth { status, error });
                    }
                }
                Err(Failure::SessionExpired) if !retried && !c.initialize => {
                    retried = true;
                    // In a task of its own: a caller that stops waiting must not leave the
                    // session half re-initialized for everyone else.
                    let me = Arc::clone(self);
                    let renewed = tokio::spawn(async move { me.reinitialize(stale).await });
                    match renewed.await {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => break Err(e),
                        Err(e) => break Err(Failure::Transport(format!("initializing again failed: {e}"))),
                    }
                }
                Err(Failure::Status { status, body })
                    if c.initialize
                        && self.mode == HttpMode::Auto
                        && status.is_client_error()
                        && status != StatusCode::UNAUTHORIZED
                        && status != StatusCode::FORBIDDEN
                        && self.state().legacy_endpoint.is_none() =>
                {
                    tracing::info!(server = %self.label, "POST initialize got {status}; trying the 2024-11-05 HTTP+SSE transport");
                    match self.open_legacy().await {
                        Ok(()) => continue,
                        Err(e) => {
                            break Err(Failure::Status {
                                status,
                                body: format!("{body} (and the HTTP+SSE fallback failed: {e})"),
                            });
                        }
                    }
                }
                other => break other,
            }
        };
        match outcome {
            Ok(()) => {}
            // Nothing answers at that address: the connection is over, and every pending
            // request fails with this reason (not with a made-up server error).
            Err(Failure::Unreachable(reason)) => self.fatal(reason).await,
            Err(failure) => {
                let described =
                    format!("{} {}: {}", message.method().unwrap_or("message"), self.url, failure.describe());
                match message.id().filter(|_| message.is_request()) {
                    Some(id) => {
                        let error = failure.into_error(described);
                        self.route(Inbound::Failed { id: id.clone(), error }, c.to).await;
                    }
                    None => tracing::warn!(server = %self.label, "could not send {described}"),
                }
            }
        }
    }

    /// Starts the standalone GET stream (not for the legacy transport) and waits, briefly,
    /// until the server has answered the GET.
    async fn open_get_stream(self: &Arc<Self>) {
        if self.state().legacy_endpoint.is_some() {
            return;
        }
        let (ready, opened) = oneshot::channel();
        let me = Arc::clone(self);
        self.spawn(me.listen(Some(ready)));
        let _ = tokio::time::timeout(Duration::from_secs(2), opened).await;
    }

    /// The standalone GET stream: server requests and notifications not tied to a request.
    async fn listen(self: Arc<Self>, mut ready: Option<oneshot::Sender<()>>) {
        let mut cursor = Cursor::default();
        // Sends that failed in a row (the server unreachable), and reconnects in a row that
        // brought no message (a new event id alone is no progress).
        let mut failed = 0;
        let mut quiet = 0;
        loop {
            let authz = self.authorization().await;
            let sent = self.send(self.get(cursor.last_event_id.as_deref(), authz.as_ref())).await;
            if let Some(ready) = ready.take() {
                let _ = ready.send(());
            }
            match sent {
                // The server offers no stream (405), or the session is gone (404): both fine.
                Ok(resp) if matches!(resp.status(), StatusCode::METHOD_NOT_ALLOWED | StatusCode::NOT_FOUND) => return,
                Ok(resp) if resp.status().is_success() && is_event_stream(&resp) => {
                    failed = 0;
                    let mut c = Collector::default();
                    if let Err(SseError::TooLarge { limit }) = self.read_events(resp, &mut c, &mut cursor).await {
                        tracing::warn!(server = %self.label, "the GET stream sent an event over {limit} bytes; stopped listening");
                        return;
                    }
                    // A stream that carried messages was useful: start counting afresh.
                    quiet = if c.delivered > 0 { 0 } else { quiet + 1 };
                }
                // The token expired while the stream was open: renew it (without a browser,
                // the authorizer refuses) and reconnect, counted like a failure.
                Ok(resp)
                    if matches!(resp.status(), StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                        && let Some(auth) = self.auth.clone() =>
                {
                    let challenge = challenge_of(&resp, authz.as_ref());
                    if let Err(e) = auth.challenged(&challenge).await {
                        tracing::info!(server = %self.label, "GET stream refused and no new token: {e}");
                        return;
                    }
                    quiet += 1;
                }
                Ok(resp) => {
                    tracing::debug!(server = %self.label, "GET stream refused: HTTP {}", resp.status());
                    return;
                }
                Err(e) => {
                    failed += 1;
                    quiet += 1;
                    if !self.backoff.allows(failed) {
                        self.fatal(format!("the server at {} is unreachable ({failed} attempts): {e}", self.url)).await;
                        return;
                    }
                }
            }
            if !STREAM_RECONNECT.allows(quiet) {
                tracing::info!(server = %self.label, "the GET stream brought nothing in {quiet} reconnects; stopped listening");
                return;
            }
            tokio::time::sleep(self.reconnect_wait(quiet.saturating_sub(1), cursor.retry)).await;
        }
    }

    /// The 2024-11-05 transport: GET the SSE stream, wait for its `endpoint` event, keep
    /// reading the stream (answers arrive on it) in a task.
    async fn open_legacy(self: &Arc<Self>) -> Result<(), String> {
        let mut auth_retries = 0;
        let resp = loop {
            let authz = self.authorization().await;
            let resp = self
                .send_retrying(|| {
                    self.http
                        .get(self.url.clone())
                        .headers(self.headers_with(authz.as_ref()))
                        .header(ACCEPT, "text/event-stream")
                })
                .await?;
            let status = resp.status();
            match &self.auth {
                Some(auth)
                    if matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
                        && auth_retries < MAX_AUTH_RETRIES =>
                {
                    auth_retries += 1;
                    let challenge = challenge_of(&resp, authz.as_ref());
                    auth.challenged(&challenge)
                        .await
                        .map_err(|e| format!("GET {} answered HTTP {status}: {e}", self.url))?;
                }
                _ => break resp,
            }
        };
        if !resp.status().is_success() || !is_event_stream(&resp) {
            return Err(format!(
                "GET {} answered HTTP {} ({:?})",
                self.url,
                resp.status(),
                content_type(resp.headers().get(CONTENT_TYPE))
            ));
        }
        let (endpoint_tx, endpoint_rx) = oneshot::channel::<Result<Url, String>>();
        let me = Arc::clone(self);
        self.spawn(async move {
            let mut events = EventStream::new(resp.into_stream(), me.max_bytes);
            let mut endpoint_tx = Some(endpoint_tx);
            let reason = loop {
                match events.next().await {
                    None => break "the server closed the SSE stream".to_owned(),
                    Some(Err(e)) => break e.to_string(),
                    Some(Ok(event)) => match (event.event.as_deref(), event.data) {
                        (Some("endpoint"), Some(data)) => {
                            let url = me.url.join(data.trim()).map_err(|e| format!("bad endpoint {data:?}: {e}"));
                            // The endpoint must be on the server's own origin, or a server could
                            // send our headers (credentials) elsewhere.
                            let url = url.and_then(|u| {
                                if u.origin() == me.url.origin() {
                                    Ok(u)
                                } else {
                                    Err(format!("the endpoint {u} is on another origin than {}", me.url))
                                }
                            });
                            if let Some(tx) = endpoint_tx.take() {
                                let _ = tx.send(url);
                            }
                        }
                        (None | Some("message"), Some(data)) if !data.trim().is_empty() => {
                            let _ = me.events.send(Event::Inbound(Inbound::Message(data))).await;
                        }
                        _ => {}
                    },
                }
            };
            if endpoint_tx.is_none() {
                me.fatal(reason).await;
            } else if let Some(tx) = endpoint_tx.take() {
                let _ = tx.send(Err(reason));
            }
        });
        let endpoint = tokio::time::timeout(ENDPOINT_WAIT, endpoint_rx)
            .await
            .map_err(|_| format!("no endpoint event within {ENDPOINT_WAIT:?}"))?
            .map_err(|_| "the SSE reader stopped".to_owned())??;
        let mut state = self.state();
        state.legacy_endpoint = Some(endpoint);
        state.session_id = None;
        Ok(())
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
        f.debug_struct("HttpTransport").field("url", &self.shared.url.as_str()).finish_non_exhaustive()
    }
}

impl HttpTransport {
    /// Checks the configuration (URL, header names and values, the bearer token's variable)
    /// and builds the HTTP client.
    pub fn new(config: HttpConfig) -> Result<HttpTransport, TransportError> {
        let bad = |m: String| TransportError::Config(m);
        let url = Url::parse(&config.url).map_err(|e| bad(format!("invalid url {:?}: {e}", config.url)))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(bad(format!("{url}: only http:// and https:// URLs are served over HTTP")));
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
            url,
            headers,
            label: config.label,
            max_bytes: config.max_message_bytes,
            backoff: config.reconnect,
            mode: config.mode,
            state: Mutex::new(State::default()),
            reinit: tokio::sync::Mutex::new(()),
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

struct HttpSink {
    shared: Arc<Shared>,
    legacy_opened: bool,
}

struct HttpStream {
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
struct HttpExchange {
    shared: Arc<Shared>,
}

#[async_trait]
impl Exchange for HttpExchange {
    async fn exchange(&self, message: Outgoing, deliver: &(dyn Fn(Inbound) + Send + Sync)) {
        self.shared.note(&message);
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
            self.shared.note(message);
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
            .unwrap_or_else(|| format!("the connection to {} was closed", self.shared.url))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(set: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<std::ffi::OsString> {
        move |var| set.iter().find(|(name, _)| *name == var).map(|(_, value)| (*value).into())
    }

    #[test]
    fn a_proxy_for_http_in_the_environment_keeps_plain_http_on_reqwest() {
        assert!(!names_an_http_proxy(env(&[])));
        assert!(!names_an_http_proxy(env(&[("https_proxy", "http://proxy:3128"), ("http_proxy", "")])));
        assert!(names_an_http_proxy(env(&[("http_proxy", "http://proxy:3128")])));
        assert!(names_an_http_proxy(env(&[("HTTP_PROXY", "http://proxy:3128")])));
        assert!(names_an_http_proxy(env(&[("all_proxy", "socks5://proxy:1080")])));
        assert!(names_an_http_proxy(env(&[("ALL_PROXY", "socks5://proxy:1080")])));
    }

    #[test]
    fn a_servers_retry_is_taken_once_then_the_backoff_floor_holds() {
        let ms = Duration::from_millis;
        // The first reconnect waits what the server asked (the conformance suite's sse-retry).
        assert_eq!(reconnect_wait(0, Some(ms(500)), false, 0.5), ms(500));
        assert_eq!(reconnect_wait(0, Some(ms(0)), false, 0.5), MIN_STREAM_RETRY);
        // Soon after another reconnect, or after a reconnect that brought nothing: the floor.
        let floor = STREAM_RECONNECT.delay(0, 0.5);
        assert_eq!(reconnect_wait(0, Some(ms(0)), true, 0.5), floor);
        assert_eq!(reconnect_wait(2, Some(ms(500)), false, 0.5), STREAM_RECONNECT.delay(2, 0.5));
        // retry: can lengthen, up to the cap; without it, the floor.
        assert_eq!(reconnect_wait(1, Some(ms(30_000)), true, 0.5), ms(30_000));
        assert_eq!(reconnect_wait(0, Some(Duration::from_secs(3600)), false, 0.5), STREAM_RECONNECT.max_delay);
        assert_eq!(reconnect_wait(0, None, false, 0.5), floor);
    }
}
