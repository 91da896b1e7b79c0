//! An MCP server over HTTP for tests of the HTTP transports, with switchable faults.
//!
//! Streamable HTTP on `/mcp` (SSE answers by default, JSON with `json`), sessions, a GET stream
//! that carries `notifications/tools/list_changed` after `notifications/initialized`, DELETE;
//! and, with `legacy`, only the 2024-11-05 HTTP+SSE transport (GET `/mcp` gives the stream and
//! an `endpoint` event, POST `/mcp` is refused with 405). Every request is recorded so tests can
//! check the headers the client sent.
//!
//! Faults: `expire_after` (the session expires after that many POSTs: 404; with
//! `name_sessions` the initialize result's `instructions` name the session it opened, so a test
//! sees which one a client knows), `drop_answer`
//! (the answer stream of `tools/call` ends after its priming event; the answer is replayed to a
//! GET with `Last-Event-ID`), `no_get` (GET gets 405), `reset_get` (GET connections
//! dropped), `get_ends` (the GET stream ends after
//! its priming event: the client must reconnect), `token` (a bearer token is required:
//! 401 otherwise), `stateless` (no session ids), `wrong_id` (JSON answers to `tools/call`
//! carry another id), `huge_event` (an oversize SSE event before the answer), `batch` (JSON
//! answers to `tools/call` batched after that many notifications), `no_retry`
//! (priming events carry no `retry:`), `html` (`tools/call` is answered 200 with an HTML page,
//! hostile text in it), `hostile_error` (`tools/call` is answered 500 with hostile text). A
//! call of the unlisted tool `hang` never gets an answer, and [`RunningServer::go_away`] cuts
//! every connection at once, so tests can take the server away while a request is pending.
//!
//! With `oauth`, the same origin is also an OAuth 2.1 authorization server and `/mcp` a
//! protected resource that needs one of its access tokens (see [`crate::oauth`]).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use mcp_safety::lock;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use crate::oauth::{AuthServer, OAuthEvent, OAuthOptions, OAuthSecrets};

/// What the server does.
#[derive(Debug, Clone, Default)]
pub struct HttpOptions {
    /// Answer requests with `application/json` instead of an SSE stream.
    pub json: bool,
    /// No sessions.
    pub stateless: bool,
    /// A session expires after this many POSTs.
    pub expire_after: Option<u64>,
    /// The initialize result's `instructions` name the session it opened (`session-0`, ...).
    pub name_sessions: bool,
    /// `tools/call` answer streams end after the priming event (resumable with GET).
    pub drop_answer: bool,
    /// The `retry:` of priming events, in milliseconds.
    pub retry_ms: u64,
    /// Priming events carry no `retry:` at all.
    pub no_retry: bool,
    /// `tools/call` is answered `200 OK` with an HTML page (a login page, a proxy's error).
    pub html: bool,
    /// `tools/call` is answered `500` with a body of terminal escapes and overrides.
    pub hostile_error: bool,
    /// GET is refused with 405.
    pub no_get: bool,
    /// GET connections are dropped before any answer (the handler panics: the connection is
    /// closed), as a proxy that cuts long GETs may do; POSTs work.
    pub reset_get: bool,
    /// The GET stream ends after its priming event (with an id and `retry:`) and whatever was
    /// queued, so the client has to reconnect with `Last-Event-ID`.
    pub get_ends: bool,
    /// Requests need `Authorization: Bearer <token>`.
    pub token: Option<String>,
    /// Only the 2024-11-05 HTTP+SSE transport.
    pub legacy: bool,
    /// JSON answers to `tools/call` carry another id than the request's.
    pub wrong_id: bool,
    /// SSE answers to `tools/call` start with a log notification of about this many bytes.
    pub huge_event: Option<usize>,
    /// JSON answers to `tools/call` are a batch: this many log notifications, then the answer.
    pub batch: Option<usize>,
    /// An OAuth authorization server on the same origin; `/mcp` then needs its access tokens
    /// (instead of `token`).
    pub oauth: Option<OAuthOptions>,
}

/// One HTTP request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// GET, POST or DELETE.
    pub http_method: String,
    /// The JSON-RPC method, for POSTs.
    pub method: Option<String>,
    /// The `Mcp-Session-Id` header.
    pub session: Option<String>,
    /// The `MCP-Protocol-Version` header.
    pub protocol_version: Option<String>,
    /// The `Mcp-Method` header.
    pub mcp_method: Option<String>,
    /// The `Mcp-Name` header.
    pub mcp_name: Option<String>,
    /// The `Last-Event-ID` header.
    pub last_event_id: Option<String>,
    /// The `Authorization` header.
    pub authorization: Option<String>,
    /// Every header, names in lower case, in the order received.
    pub headers: Vec<(String, String)>,
    /// The answer's status.
    pub status: u16,
    /// When it arrived.
    pub at: std::time::Instant,
}

#[derive(Default)]
struct Session {
    posts: u64,
    get: Option<mpsc::UnboundedSender<Bytes>>,
    /// Notifications waiting for a GET stream.
    queued: Vec<String>,
    /// Answers whose stream was dropped, by the priming event's id.
    replay: HashMap<String, String>,
}

struct Inner {
    options: HttpOptions,
    sessions: Mutex<HashMap<String, Session>>,
    seen: Mutex<Vec<Seen>>,
    counter: AtomicU64,
    /// Legacy transport: the SSE stream of each session.
    legacy: Mutex<HashMap<String, mpsc::UnboundedSender<Bytes>>>,
    oauth: Option<AuthServer>,
}

/// A running server; it stops when dropped.
pub struct RunningServer {
    /// Its address.
    pub addr: SocketAddr,
    inner: Arc<Inner>,
    task: tokio::task::JoinHandle<()>,
    gone: watch::Sender<bool>,
}

impl std::fmt::Debug for RunningServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningServer").field("addr", &self.addr).finish_non_exhaustive()
    }
}

impl Drop for RunningServer {
    fn drop(&mut self) {
        self.go_away();
    }
}

impl RunningServer {
    /// The MCP endpoint.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Stops listening and cuts every open connection, answers in the middle included, as a
    /// server that crashed or lost its network would.
    pub fn go_away(&self) {
        self.task.abort();
        let _ = self.gone.send(true);
    }

    /// Every request seen so far.
    pub fn seen(&self) -> Vec<Seen> {
        lock(&self.inner.seen).clone()
    }

    /// Sessions alive now.
    pub fn sessions(&self) -> usize {
        lock(&self.inner.sessions).len()
    }

    /// What the OAuth authorization server and protected resource did (empty without `oauth`).
    pub fn oauth_log(&self) -> Vec<OAuthEvent> {
        self.inner.oauth.as_ref().map(AuthServer::log).unwrap_or_default()
    }

    /// Every secret the OAuth authorization server issued or accepted (empty without `oauth`).
    pub fn oauth_secrets(&self) -> OAuthSecrets {
        self.inner.oauth.as_ref().map(AuthServer::secrets).unwrap_or_default()
    }

    /// Ends the life of every access token issued so far, as though it had run out: `/mcp`
    /// refuses them with "expired token" (nothing without `oauth`).
    pub fn expire_access_tokens(&self) {
        if let Some(auth) = &self.inner.oauth {
            auth.expire_access_tokens();
        }
    }
}

/// Starts the server on 127.0.0.1 (`port` 0 picks a free one).
pub async fn start(options: HttpOptions, port: u16) -> std::io::Result<RunningServer> {
    let listener = tokio::net::TcpListener::bind(("127.0.0.1", port)).await?;
    let addr = listener.local_addr()?;
    let oauth = options.oauth.clone().map(|o| AuthServer::new(o, format!("http://{addr}")));
    let inner = Arc::new(Inner {
        options,
        sessions: Mutex::new(HashMap::new()),
        seen: Mutex::new(Vec::new()),
        counter: AtomicU64::new(0),
        legacy: Mutex::new(HashMap::new()),
        oauth,
    });
    let app = axum::Router::new().fallback(handle).with_state(Arc::clone(&inner));
    let (gone, cut) = watch::channel(false);
    let listener = CuttableListener { inner: listener, cut };
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    Ok(RunningServer { addr, inner, task, gone })
}

/// Accepts connections that [`RunningServer::go_away`] can cut.
struct CuttableListener {
    inner: tokio::net::TcpListener,
    cut: watch::Receiver<bool>,
}

impl axum::serve::Listener for CuttableListener {
    type Io = Cuttable;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        loop {
            match self.inner.accept().await {
                Ok((stream, addr)) => {
                    let mut cut = self.cut.clone();
                    let signal = Box::pin(async move {
                        let _ = cut.wait_for(|gone| *gone).await;
                    });
                    return (Cuttable { stream, signal, cut: false }, addr);
                }
                // Out of file descriptors and the like: try again shortly, as axum does.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            }
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        self.inner.local_addr()
    }
}

/// A connection whose reads and writes fail once the server went away, so hyper drops it
/// and the client sees it close, whatever was in flight on it.
struct Cuttable {
    stream: tokio::net::TcpStream,
    signal: std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>>,
    cut: bool,
}

impl Cuttable {
    fn is_cut(&mut self, cx: &mut std::task::Context<'_>) -> bool {
        if !self.cut && self.signal.as_mut().poll(cx).is_ready() {
            self.cut = true;
        }
        self.cut
    }
}

fn gone() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::ConnectionReset, "the server went away")
}

impl tokio::io::AsyncRead for Cuttable {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.is_cut(cx) {
            return std::task::Poll::Ready(Err(gone()));
        }
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl tokio::io::AsyncWrite for Cuttable {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        if self.is_cut(cx) {
            return std::task::Poll::Ready(Err(gone()));
        }
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        if self.is_cut(cx) {
            return std::task::Poll::Ready(Err(gone()));
        }
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}

fn header_of(headers: &HeaderMap, name: &str) -> Option<String> {
    headers.get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

fn status(code: StatusCode, text: &str) -> Response {
    let mut r = Response::new(Body::from(text.to_owned()));
    *r.status_mut() = code;
    r
}

fn sse_body(rx: mpsc::UnboundedReceiver<Bytes>) -> Response {
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|b| (Ok::<Bytes, std::convert::Infallible>(b), rx))
    });
    let mut r = Response::new(Body::from_stream(stream));
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/event-stream"));
    r
}

/// Terminal escapes (OSC 52, a screen clear), a carriage return, a C1 CSI, BEL and a
/// bidirectional override between visible markers.
pub const HOSTILE: &str = "HOSTILE<\u{1b}]52;c;ZXZpbA==\u{7}\u{1b}[2J\roverwritten\u{9b}31m\u{202e}txt.exe\u{7}>END";

/// The priming event of a stream: an id, empty data, and `retry:` unless `no_retry`.
fn priming(o: &HttpOptions, id: &str) -> Bytes {
    if o.no_retry {
        Bytes::from(format!("id: {id}\ndata: \n\n"))
    } else {
        Bytes::from(format!("id: {id}\nretry: {}\ndata: \n\n", o.retry_ms))
    }
}

fn event(id: Option<&str>, data: &str) -> Bytes {
    let mut s = String::new();
    if let Some(id) = id {
        s.push_str(&format!("id: {id}\n"));
    }
    s.push_str(&format!("event: message\ndata: {data}\n\n"));
    Bytes::from(s)
}

async fn handle(State(inner): State<Arc<Inner>>, request: Request) -> Response {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    if let Some(auth) = &inner.oauth
        && AuthServer::is_endpoint(parts.uri.path())
    {
        let body = axum::body::to_bytes(body, crate::oauth::MAX_BODY).await.unwrap_or_default();
        return auth.serve(&parts.method, parts.uri.path(), parts.uri.query(), &headers, &body);
    }
    let body = axum::body::to_bytes(body, 1 << 20).await.unwrap_or_default();
    let parsed: Option<Value> = serde_json::from_slice(&body).ok();
    let mut seen = Seen {
        http_method: parts.method.to_string(),
        method: parsed.as_ref().and_then(|v| v.get("method")).and_then(Value::as_str).map(str::to_owned),
        session: header_of(&headers, "mcp-session-id"),
        protocol_version: header_of(&headers, "mcp-protocol-version"),
        mcp_method: header_of(&headers, "mcp-method"),
        mcp_name: header_of(&headers, "mcp-name"),
        last_event_id: header_of(&headers, "last-event-id"),
        authorization: header_of(&headers, "authorization"),
        headers: headers
            .iter()
            .map(|(name, value)| (name.as_str().to_owned(), String::from_utf8_lossy(value.as_bytes()).into_owned()))
            .collect(),
        status: 0,
        at: std::time::Instant::now(),
    };
    if inner.options.reset_get && parts.method == Method::GET {
        lock(&inner.seen).push(seen);
        // No way to answer with a reset: the connection task ends, and the connection with it.
        std::panic::resume_unwind(Box::new("reset_get: the GET's connection is dropped"));
    }
    let response = route(&inner, &parts.method, parts.uri.query(), &headers, parsed, &seen);
    seen.status = response.status().as_u16();
    lock(&inner.seen).push(seen);
    response
}

fn route(
    inner: &Arc<Inner>,
    method: &Method,
    query: Option<&str>,
    headers: &HeaderMap,
    body: Option<Value>,
    seen: &Seen,
) -> Response {
    let o = &inner.options;
    if let Some(auth) = &inner.oauth {
        if let Some(refusal) = auth.refuse_bearer(seen.authorization.as_deref(), seen.method.as_deref()) {
            return refusal;
        }
    } else if let Some(token) = &o.token
        && seen.authorization.as_deref() != Some(format!("Bearer {token}").as_str())
    {
        let mut r = status(StatusCode::UNAUTHORIZED, "unauthorized");
        r.headers_mut().insert(header::WWW_AUTHENTICATE, header::HeaderValue::from_static("Bearer"));
        return r;
    }
    if o.legacy {
        return legacy(inner, method, query, body);
    }
    match *method {
        Method::POST => post(inner, headers, body, seen),
        Method::GET => get(inner, seen),
        Method::DELETE => match &seen.session {
            Some(id) if lock(&inner.sessions).remove(id).is_some() => status(StatusCode::OK, ""),
            _ => status(StatusCode::NOT_FOUND, "no such session"),
        },
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    }
}

fn legacy(inner: &Arc<Inner>, method: &Method, query: Option<&str>, body: Option<Value>) -> Response {
    match (method, query.and_then(|q| q.strip_prefix("session="))) {
        (&Method::GET, None) => {
            let id = format!("legacy-{}", inner.counter.fetch_add(1, Ordering::SeqCst));
            let (tx, rx) = mpsc::unbounded_channel();
            let _ = tx.send(Bytes::from(format!("event: endpoint\ndata: /mcp?session={id}\n\n")));
            lock(&inner.legacy).insert(id, tx);
            sse_body(rx)
        }
        (&Method::POST, Some(id)) => {
            let Some(tx) = lock(&inner.legacy).get(id).cloned() else {
                return status(StatusCode::NOT_FOUND, "no such session");
            };
            let Some(body) = body else { return status(StatusCode::BAD_REQUEST, "not JSON") };
            if let Some(answer) = answer(&body, "2024-11-05") {
                let _ = tx.send(event(None, &answer.to_string()));
            }
            status(StatusCode::ACCEPTED, "")
        }
        // A Streamable HTTP client's POST to the endpoint itself: the old server does not know it.
        _ => status(StatusCode::METHOD_NOT_ALLOWED, "this server speaks the 2024-11-05 HTTP+SSE transport"),
    }
}

pub(crate) fn answer(body: &Value, newest: &str) -> Option<Value> {
    let id = body.get("id")?.clone();
    let method = body.get("method")?.as_str()?;
    let params = body.get("params").cloned().unwrap_or(Value::Null);
    let result = match method {
        "initialize" => {
            let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or(newest);
            let known = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
            let version = if known.contains(&asked) && asked <= newest { asked } else { newest };
            json!({"protocolVersion": version, "capabilities": {"tools": {"listChanged": true}},
                   "serverInfo": {"name": "mcp-fixture-http", "version": "1"}})
        }
        "ping" => json!({}),
        "tools/list" => json!({"tools": [
            {"name": "echo", "description": "Echo the text back.",
             "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}},
            {"name": "add", "description": "Add two numbers.",
             "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}}}
        ]}),
        "tools/call" => {
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            match params.get("name").and_then(Value::as_str) {
                Some("echo") => {
                    let text = args.get("text").and_then(Value::as_str).unwrap_or_default();
                    json!({"content": [{"type": "text", "text": text}]})
                }
                Some("add") => {
                    let sum = args.get("a").and_then(Value::as_f64).unwrap_or(0.0)
                        + args.get("b").and_then(Value::as_f64).unwrap_or(0.0);
                    json!({"content": [{"type": "text", "text": sum.to_string()}]})
                }
                other => {
                    return Some(json!({"jsonrpc": "2.0", "id": id,
                        "error": {"code": -32602, "message": format!("unknown tool {other:?}")}}));
                }
            }
        }
        other => {
            return Some(json!({"jsonrpc": "2.0", "id": id,
                "error": {"code": -32601, "message": format!("Method not found: {other}")}}));
        }
    };
    Some(json!({"jsonrpc": "2.0", "id": id, "result": result}))
}

fn post(inner: &Arc<Inner>, headers: &HeaderMap, body: Option<Value>, seen: &Seen) -> Response {
    let o = &inner.options;
    let accept = header_of(headers, "accept").unwrap_or_default();
    if !(accept.contains("application/json") && accept.contains("text/event-stream")) {
        return status(StatusCode::NOT_ACCEPTABLE, "Accept must list application/json and text/event-stream");
    }
    let Some(body) = body else { return status(StatusCode::BAD_REQUEST, "not JSON") };
    let is_initialize = seen.method.as_deref() == Some("initialize");
    let mut new_session = None;
    let session_id = if o.stateless {
        None
    } else if is_initialize {
        let id = format!("session-{}", inner.counter.fetch_add(1, Ordering::SeqCst));
        lock(&inner.sessions).insert(id.clone(), Session::default());
        new_session = Some(id.clone());
        Some(id)
    } else {
        let Some(id) = seen.session.clone() else {
            return status(StatusCode::BAD_REQUEST, "Bad Request: no Mcp-Session-Id");
        };
        let mut sessions = lock(&inner.sessions);
        let Some(session) = sessions.get_mut(&id) else {
            return status(StatusCode::NOT_FOUND, "Session not found");
        };
        session.posts += 1;
        if o.expire_after.is_some_and(|n| session.posts > n) {
            sessions.remove(&id);
            return status(StatusCode::NOT_FOUND, "Session expired");
        }
        Some(id)
    };
    if seen.method.as_deref() == Some("notifications/initialized")
        && let Some(id) = &session_id
        && let Some(session) = lock(&inner.sessions).get_mut(id)
    {
        let note = json!({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}).to_string();
        match &session.get {
            Some(tx) => {
                let _ = tx.send(event(None, &note));
            }
            None => session.queued.push(note),
        }
    }
    let hang = seen.method.as_deref() == Some("tools/call")
        && body.get("params").and_then(|p| p.get("name")).and_then(Value::as_str) == Some("hang");
    if hang {
        return never_answered(o.json);
    }
    let Some(answer) = answer(&body, "2025-11-25") else {
        return status(StatusCode::ACCEPTED, "");
    };
    if seen.method.as_deref() == Some("tools/call") {
        if o.html {
            let page = format!("<!DOCTYPE html><html><body><h1>Sign in {HOSTILE}</h1></body></html>");
            let mut r = Response::new(Body::from(page));
            r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("text/html; charset=utf-8"));
            return r;
        }
        if o.hostile_error {
            return status(StatusCode::INTERNAL_SERVER_ERROR, &format!("upstream failed: {HOSTILE}"));
        }
    }
    let mut answer = answer;
    if o.name_sessions
        && let Some(id) = &new_session
    {
        answer["result"]["instructions"] = json!(id);
    }
    if o.wrong_id && seen.method.as_deref() == Some("tools/call") {
        answer["id"] = json!(987_654);
    }
    let mut response = if o.json {
        let body = match o.batch.filter(|_| seen.method.as_deref() == Some("tools/call")) {
            Some(n) => {
                let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "debug", "data": "batched"}});
                let mut items = vec![log; n];
                items.push(answer);
                Value::Array(items).to_string()
            }
            None => answer.to_string(),
        };
        let mut r = Response::new(Body::from(body));
        r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
        r
    } else {
        let (tx, rx) = mpsc::unbounded_channel();
        let n = inner.counter.fetch_add(1, Ordering::SeqCst);
        let prime = format!("{}-{n}", session_id.as_deref().unwrap_or("stateless"));
        let _ = tx.send(priming(o, &prime));
        if o.drop_answer && seen.method.as_deref() == Some("tools/call") {
            if let Some(id) = &session_id
                && let Some(session) = lock(&inner.sessions).get_mut(id)
            {
                session.replay.insert(prime, answer.to_string());
            }
            drop(tx); // the stream ends before the answer
        } else {
            if let Some(n) = o.huge_event.filter(|_| seen.method.as_deref() == Some("tools/call")) {
                let log = json!({"jsonrpc": "2.0", "method": "notifications/message",
                    "params": {"level": "info", "data": "x".repeat(n)}});
                let _ = tx.send(event(None, &log.to_string()));
            }
            let _ = tx.send(event(Some(&format!("{prime}-answer")), &answer.to_string()));
        }
        sse_body(rx)
    };
    if let Some(id) = new_session
        && let Ok(v) = header::HeaderValue::from_str(&id)
    {
        response.headers_mut().insert("mcp-session-id", v);
    }
    response
}

/// An answer that starts (headers, and for SSE a priming event) and never goes on.
fn never_answered(json: bool) -> Response {
    let start: Vec<Result<Bytes, std::convert::Infallible>> =
        if json { Vec::new() } else { vec![Ok(Bytes::from_static(b"id: hang-0\nretry: 100\ndata: \n\n"))] };
    let body =
        futures_util::stream::StreamExt::chain(futures_util::stream::iter(start), futures_util::stream::pending());
    let mut r = Response::new(Body::from_stream(body));
    let kind = if json { "application/json" } else { "text/event-stream" };
    r.headers_mut().insert(header::CONTENT_TYPE, header::HeaderValue::from_static(kind));
    r
}

fn get(inner: &Arc<Inner>, seen: &Seen) -> Response {
    if inner.options.no_get || inner.options.stateless {
        return status(StatusCode::METHOD_NOT_ALLOWED, "no GET stream");
    }
    let Some(id) = &seen.session else { return status(StatusCode::BAD_REQUEST, "no Mcp-Session-Id") };
    let mut sessions = lock(&inner.sessions);
    let Some(session) = sessions.get_mut(id) else { return status(StatusCode::NOT_FOUND, "Session not found") };
    let (tx, rx) = mpsc::unbounded_channel();
    if let Some(last) = &seen.last_event_id
        && let Some(answer) = session.replay.remove(last)
    {
        // Resumption of an answer stream: replay what followed that event on it, then end.
        let _ = tx.send(event(Some(&format!("{last}-answer")), &answer));
        return sse_body(rx);
    }
    if inner.options.get_ends {
        let n = inner.counter.fetch_add(1, Ordering::SeqCst);
        let _ = tx.send(priming(&inner.options, &format!("get-{n}")));
        for note in session.queued.drain(..) {
            let _ = tx.send(event(None, &note));
        }
        return sse_body(rx); // `tx` is dropped: the stream ends
    }
    for note in session.queued.drain(..) {
        let _ = tx.send(event(None, &note));
    }
    session.get = Some(tx);
    sse_body(rx)
}
