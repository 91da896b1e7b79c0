//! The conformance server over Streamable HTTP at `/mcp`: sessions, SSE answer streams kept
//! for resumption, the session's GET stream, and the `Host` / `Origin` check.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::Notify;

use super::{Kind, Peer, Sink, VERSIONS, answer, kind, lock};

/// The `retry:` of priming events, in milliseconds.
const RETRY_MS: u64 = 500;
/// Most events one stream keeps (a session's GET stream stops growing there).
const MAX_EVENTS: usize = 10_000;
/// Largest request body read.
const MAX_BODY: usize = 4 << 20;

/// One SSE stream's events, kept so a reader can start or resume anywhere.
pub(crate) struct EventLog {
    /// The stream's id; its events are `{id}:{index}`.
    id: String,
    state: Mutex<LogState>,
    changed: Notify,
}

#[derive(Default)]
struct LogState {
    events: Vec<Bytes>,
    /// The stream is complete: readers end after the last event.
    done: bool,
    /// The first reader (the POST's own answer) ends after this many events.
    cut: Option<usize>,
}

impl EventLog {
    fn new(id: String, priming: bool) -> Arc<Self> {
        let log = Arc::new(Self { id, state: Mutex::default(), changed: Notify::new() });
        if priming {
            let event = format!("id: {}:0\nretry: {RETRY_MS}\ndata: \n\n", log.id);
            lock(&log.state).events.push(Bytes::from(event));
        }
        log
    }

    pub(crate) fn push(&self, message: &Value) {
        let mut state = lock(&self.state);
        if state.events.len() < MAX_EVENTS {
            let event = format!("id: {}:{}\nevent: message\ndata: {message}\n\n", self.id, state.events.len());
            state.events.push(Bytes::from(event));
        }
        drop(state);
        self.changed.notify_waiters();
    }

    pub(crate) fn cut(&self) {
        let mut state = lock(&self.state);
        state.cut = Some(state.events.len());
        drop(state);
        self.changed.notify_waiters();
    }

    fn finish(&self) {
        lock(&self.state).done = true;
        self.changed.notify_waiters();
    }

    fn len(&self) -> usize {
        lock(&self.state).events.len()
    }

    /// An SSE body of the events from `from` on; the POST's own reader (`first`) also stops at
    /// a cut.
    fn reader(self: Arc<Self>, from: usize, first: bool) -> Body {
        let stream = futures_util::stream::unfold((self, from), move |(log, next)| async move {
            loop {
                let watched = Arc::clone(&log);
                let notified = watched.changed.notified();
                tokio::pin!(notified);
                notified.as_mut().enable();
                {
                    let state = lock(&log.state);
                    let end = if first { state.cut.unwrap_or(usize::MAX) } else { usize::MAX };
                    if next < state.events.len() && next < end {
                        let event = state.events[next].clone();
                        drop(state);
                        return Some((Ok::<Bytes, std::convert::Infallible>(event), (log, next + 1)));
                    }
                    if state.done || next >= end {
                        return None;
                    }
                }
                notified.await;
            }
        });
        Body::from_stream(stream)
    }
}

struct Session {
    peer: Arc<Peer>,
    /// What belongs to no request: the GET stream's log.
    notices: Arc<EventLog>,
    /// Whether a GET stream started already (a second one starts at the log's end).
    opened: AtomicBool,
    /// Answer streams, by id, for resumption.
    streams: Mutex<HashMap<String, Arc<EventLog>>>,
    next_stream: AtomicU64,
}

#[derive(Default)]
struct Inner {
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    counter: AtomicU64,
}

/// A conformance server listening on HTTP; it stops when dropped.
#[derive(Debug)]
pub struct RunningConformance {
    /// Its address.
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl RunningConformance {
    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }
}

impl Drop for RunningConformance {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Starts the conformance server on `addr` (port 0 picks a free one).
pub async fn start_http(addr: SocketAddr) -> std::io::Result<RunningConformance> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        let _ = serve_http(listener).await;
    });
    Ok(RunningConformance { addr, task })
}

/// Serves the conformance server on `listener` until the task is dropped.
pub async fn serve_http(listener: tokio::net::TcpListener) -> std::io::Result<()> {
    let app = axum::Router::new().fallback(handle).with_state(Arc::new(Inner::default()));
    axum::serve(listener, app).await
}

fn status(code: StatusCode, text: &str) -> Response {
    let body = json!({"jsonrpc": "2.0", "id": null, "error": {"code": -32000, "message": text}});
    let mut response = Response::new(Body::from(body.to_string()));
    *response.status_mut() = code;
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

fn header_of<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

/// Whether `host` (with or without a port) names this machine's loopback.
fn loopback(host: &str) -> bool {
    let name = match host.strip_prefix('[') {
        Some(rest) => rest.split(']').next().map_or("", |inside| if inside == "::1" { "[::1]" } else { "" }),
        None => host.split(':').next().unwrap_or_default(),
    };
    matches!(name.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

/// `Host` must be loopback, and so must `Origin` when there is one (DNS rebinding).
fn rebinding(headers: &HeaderMap) -> bool {
    let host_ok = header_of(headers, "host").is_some_and(loopback);
    let origin_ok = match header_of(headers, "origin") {
        None => true,
        Some(origin) => {
            origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")).is_some_and(loopback)
        }
    };
    !(host_ok && origin_ok)
}

fn sse(body: Body) -> Response {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    headers.insert(header::CACHE_CONTROL, header::HeaderValue::from_static("no-cache"));
    response
}

async fn handle(State(inner): State<Arc<Inner>>, request: axum::extract::Request) -> Response {
    let (parts, body) = request.into_parts();
    if rebinding(&parts.headers) {
        return status(StatusCode::FORBIDDEN, "Forbidden: Host and Origin must name a loopback address");
    }
    if parts.uri.path() != "/mcp" {
        return status(StatusCode::NOT_FOUND, "the MCP endpoint is /mcp");
    }
    if let Some(version) = header_of(&parts.headers, "mcp-protocol-version")
        && !VERSIONS.contains(&version)
    {
        return status(StatusCode::BAD_REQUEST, &format!("Bad Request: unsupported MCP-Protocol-Version {version:?}"));
    }
    match parts.method {
        Method::POST => match axum::body::to_bytes(body, MAX_BODY).await {
            Ok(body) => post(&inner, &parts.headers, &body).await,
            Err(_) => status(StatusCode::PAYLOAD_TOO_LARGE, "the body is too large"),
        },
        Method::GET => get(&inner, &parts.headers),
        Method::DELETE => match session(&inner, &parts.headers) {
            Ok((id, session)) => {
                lock(&inner.sessions).remove(&id);
                session.peer.close();
                Response::new(Body::empty())
            }
            Err(response) => response,
        },
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "POST, GET or DELETE"),
    }
}

/// The session a request names: 400 without `Mcp-Session-Id`, 404 for one not (or no longer) known.
#[allow(clippy::result_large_err)]
fn session(inner: &Inner, headers: &HeaderMap) -> Result<(String, Arc<Session>), Response> {
    let Some(id) = header_of(headers, "mcp-session-id") else {
        return Err(status(StatusCode::BAD_REQUEST, "Bad Request: no Mcp-Session-Id (initialize first)"));
    };
    match lock(&inner.sessions).get(id) {
        Some(session) => Ok((id.to_owned(), Arc::clone(session))),
        None => Err(status(StatusCode::NOT_FOUND, "Session not found")),
    }
}

async fn post(inner: &Arc<Inner>, headers: &HeaderMap, body: &[u8]) -> Response {
    let accept = header_of(headers, "accept").unwrap_or_default();
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return status(
            StatusCode::NOT_ACCEPTABLE,
            "Not Acceptable: Accept must list application/json and text/event-stream",
        );
    }
    let Ok(message) = serde_json::from_slice::<Value>(body) else {
        return status(StatusCode::BAD_REQUEST, "Parse error: the body is not JSON");
    };
    if message.get("method").and_then(Value::as_str) == Some("initialize") && message.get("id").is_some() {
        return initialize(inner, &message).await;
    }
    let (id, session) = match session(inner, headers) {
        Ok(found) => found,
        Err(response) => return response,
    };
    match kind(&message) {
        Kind::Notification => {}
        Kind::Response => session.peer.answered(message),
        Kind::Invalid => return status(StatusCode::BAD_REQUEST, "Invalid Request (batches are not accepted)"),
        Kind::Request => {
            let n = session.next_stream.fetch_add(1, Ordering::Relaxed);
            let log = EventLog::new(format!("{id}.{n}"), true);
            lock(&session.streams).insert(log.id.clone(), Arc::clone(&log));
            let writer = Arc::clone(&log);
            tokio::spawn(async move {
                let reply = answer(&session.peer, &message, &Sink::Stream(Arc::clone(&writer))).await;
                writer.push(&reply);
                writer.finish();
                if lock(&writer.state).cut.is_none() {
                    lock(&session.streams).remove(&writer.id);
                }
            });
            return sse(log.reader(0, true));
        }
    }
    let mut response = Response::new(Body::empty());
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

async fn initialize(inner: &Arc<Inner>, message: &Value) -> Response {
    let n = inner.counter.fetch_add(1, Ordering::Relaxed);
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    let id = format!("conformance-{n}-{nanos:08x}-{}", std::process::id());
    let notices = EventLog::new(format!("{id}.get"), false);
    let peer = Arc::new(Peer::new(Sink::Stream(Arc::clone(&notices))));
    let reply = answer(&peer, message, &Sink::Stream(Arc::clone(&notices))).await;
    let session = Session {
        peer,
        notices,
        opened: AtomicBool::new(false),
        streams: Mutex::default(),
        next_stream: AtomicU64::new(1),
    };
    lock(&inner.sessions).insert(id.clone(), Arc::new(session));
    let mut response = Response::new(Body::from(reply.to_string()));
    response.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    if let Ok(v) = header::HeaderValue::from_str(&id) {
        response.headers_mut().insert("mcp-session-id", v);
    }
    response
}

/// GET: with `Last-Event-ID`, the rest of that stream; without, the session's own stream.
fn get(inner: &Arc<Inner>, headers: &HeaderMap) -> Response {
    if !header_of(headers, "accept").unwrap_or_default().contains("text/event-stream") {
        return status(StatusCode::NOT_ACCEPTABLE, "Not Acceptable: the stream is text/event-stream");
    }
    let (_, session) = match session(inner, headers) {
        Ok(found) => found,
        Err(response) => return response,
    };
    if let Some(last) = header_of(headers, "last-event-id") {
        let resumed = last.rsplit_once(':').and_then(|(stream, index)| {
            let log = lock(&session.streams).get(stream).cloned()?;
            Some((log, index.parse::<usize>().ok()?))
        });
        return match resumed {
            Some((log, index)) => sse(log.reader(index + 1, false)),
            None => status(StatusCode::NOT_FOUND, "no stream has that event id"),
        };
    }
    let from = if session.opened.swap(true, Ordering::Relaxed) { session.notices.len() } else { 0 };
    sse(Arc::clone(&session.notices).reader(from, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_loopback_hosts_and_origins_pass() {
        for host in ["localhost", "localhost:8080", "127.0.0.1:3000", "[::1]:80", "LOCALHOST"] {
            assert!(loopback(host), "{host}");
        }
        for host in ["evil.example.com", "127.0.0.1.evil.example", "localhost.evil", "[::2]:80", ""] {
            assert!(!loopback(host), "{host}");
        }
        let mut headers = HeaderMap::new();
        headers.insert("host", header::HeaderValue::from_static("127.0.0.1:9"));
        assert!(!rebinding(&headers));
        headers.insert("origin", header::HeaderValue::from_static("http://evil.example.com"));
        assert!(rebinding(&headers));
        headers.insert("origin", header::HeaderValue::from_static("http://localhost:9"));
        assert!(!rebinding(&headers));
        headers.insert("host", header::HeaderValue::from_static("evil.example.com"));
        assert!(rebinding(&headers));
    }
}
