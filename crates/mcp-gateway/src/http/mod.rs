//! The Streamable HTTP front at `/mcp`, on hyper directly: every layer between the socket and
//! the pool shows in the gateway's throughput, so there is none beyond what each request needs.
//!
//! - POST: one JSON-RPC message. A request is answered with JSON, or with SSE when it sends
//!   messages before its answer (progress, an approval form): the response starts as whichever
//!   comes first. A notification or a client's answer gets 202.
//! - A session's call that takes longer than [`HttpOptions::resume_after`] (or sends a message
//!   first), from a client that accepts SSE, is answered as a resumable stream (`resume`): a
//!   priming event with an id (2025-11-25 sessions), then id'd events; GET with
//!   `Last-Event-ID` resumes it.
//! - `initialize` opens a session (an unguessable `Mcp-Session-Id`); later requests carry the
//!   id (an unknown one gets 404, so the client initializes again); GET opens the session's
//!   stream of notifications; DELETE ends it. Sessions are bounded in all and per caller: a new
//!   one beyond evicts the least recently used (`sessions`); an idle one expires.
//! - A request with the 2026-07-28 `_meta` envelope is served on its own, its mirrored headers
//!   checked against its body (400 with `-32020` when they disagree).
//! - `Host` and `Origin` are checked first (403), then inbound authentication (401).
//! - Bodies are bounded and read within a time limit; headers too.

mod body;
mod guard;
mod life;
mod resume;
mod sessions;

use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::header::{ACCEPT, ALLOW, CONTENT_TYPE, HeaderName, HeaderValue, WWW_AUTHENTICATE};
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::BodyExt as _;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use mcp_protocol::{
    BodyFacts, ClientMessage, ClientNotification, ClientRequest, ErrorObject, ErrorResponse, IncomingRequest, Message,
    MirroredHeaders, ProtocolVersion, RequestId, error_codes, server_error_codes,
};
use tokio::net::TcpListener;
use tokio::sync::{broadcast, mpsc};

use self::body::{Body, RequestStream, Work, sse_event};
use self::guard::HostGuard;
use self::life::InFlight;
pub use self::life::{DrainOptions, DrainReport, Lifecycle};
use self::sessions::{LetGo, Limits, Owner, Sessions};
use crate::auth::{AuthRequest, Authenticator, METADATA_PATH, ProtectedResource, Unauthorized};
use crate::backend::{BackendEvent, Caller};
use crate::gateway::{Era, Gateway, ListenFilter, Reply, Scope, response_line};
use crate::observe::{Answered, ServeWatch};
use crate::seal::random_hex;
use crate::session::{Outbound, Session, listing_digests};
use crate::store::{SessionChange, SessionRecord, SessionStore, StoreError};
use crate::subscriptions::session_event_line;

const SESSION_ID: &str = "mcp-session-id";
/// Liveness: answers while the process serves.
pub const HEALTHZ: &str = "/healthz";
/// Readiness: a pool published, every required upstream connected, not draining.
pub const READYZ: &str = "/readyz";
/// The metrics in Prometheus's text format, when [`HttpOptions::metrics`] is set.
pub const METRICS: &str = "/metrics";
/// How often a long-lived stream says it is alive (an SSE comment).
const KEEP_ALIVE: Duration = Duration::from_secs(25);
/// The default of [`HttpOptions::resume_after`].
const RESUME_AFTER: Duration = Duration::from_millis(50);
/// The default of [`HttpOptions::resume_grace`].
const RESUME_GRACE: Duration = Duration::from_secs(5);
const LAST_EVENT_ID: &str = "last-event-id";
/// The default of [`HttpOptions::max_sessions`]: sessions are small (a few kilobytes each when
/// idle), so ten thousand is a modest amount of memory and more clients than one gateway
/// usually serves.
pub const MAX_SESSIONS: usize = 10_000;
/// The default of [`HttpOptions::max_sessions_per_caller`]: a tenth of [`MAX_SESSIONS`], so the
/// table fills only when ten callers hold their whole share (one token holder opening sessions
/// in a loop pushes out its own), and still far more than one client application opens.
pub const MAX_SESSIONS_PER_CALLER: usize = 1_000;
/// The default of [`HttpOptions::session_idle`].
pub const SESSION_IDLE: Duration = Duration::from_secs(3600);
/// How often idle sessions are looked for, besides when requests come.
const SWEEP_EVERY: Duration = Duration::from_secs(30);
/// Idle sessions let go under one hold of the table's lock by the periodic sweep.
const SWEEP_BATCH: usize = 256;

/// How the HTTP front listens and whom it admits.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// The address to listen on (loopback by default).
    pub addr: SocketAddr,
    /// The MCP endpoint's path.
    pub path: String,
    /// Allowed `Host` values (`name`, or `name:port`); empty: the loopback names on a loopback
    /// address, any host behind authentication otherwise.
    pub allowed_hosts: Vec<String>,
    /// Allowed `Origin` values; empty: origins whose host is allowed.
    pub allowed_origins: Vec<String>,
    /// Inbound authentication; required to listen on a non-loopback address.
    pub auth: Option<Arc<dyn Authenticator>>,
    /// Largest request body, in bytes (413 beyond).
    pub max_body_bytes: usize,
    /// How long a client may take to send a request's headers.
    pub header_timeout: Duration,
    /// How long a client may take to send a request's body.
    pub body_timeout: Duration,
    /// Most sessions at once: a new one beyond evicts the least recently used (whose next
    /// request gets 404, so its client initializes again). At least 1.
    pub max_sessions: usize,
    /// Most connections at once, on the front and the admin address together; lowered at bind
    /// to leave [`RESERVED_DESCRIPTORS`] of the process's descriptor limit for upstreams,
    /// files and the store. A connection beyond it is answered 503 and closed at once.
    pub max_connections: usize,
    /// Most sessions of one caller at once (its principal, whatever the profile; without
    /// authentication its peer address): a new one beyond evicts that caller's least recently
    /// used, never another caller's. At least 1.
    pub max_sessions_per_caller: usize,
    /// A session unused this long is let go (looked for as requests come and every 30 s).
    pub session_idle: Duration,
    /// What `GET /metrics` answers with; `None`: 404.
    pub metrics: Option<Arc<dyn crate::observe::MetricsSource>>,
    /// Where sessions are kept beyond this replica (a store shared with the other replicas);
    /// `None`: in this process only. With one, a session opened on another replica, or before
    /// a restart, goes on here, and one that cannot be read or renewed is refused with 503
    /// (never served from what this replica alone remembers).
    pub session_store: Option<Arc<dyn SessionStore>>,
    /// Serve `GET /metrics` (and the probes) on this address of its own instead of the MCP
    /// front's (a scrape kept off the public port): admitted as on the front (the same
    /// authentication, `Host`/`Origin` lists and loopback rule). `None`: on the front.
    pub metrics_addr: Option<SocketAddr>,
    /// How long a session's call from a client that accepts SSE may take before its answer
    /// becomes a resumable stream (id'd events, after a priming event in 2025-11-25 sessions;
    /// resumed with `GET` and `Last-Event-ID`).
    /// Quicker answers are plain JSON.
    pub resume_after: Duration,
    /// How long a resumable call goes on with nobody reading its stream before it is dropped
    /// (its upstream call cancelled); also how long a finished call's stream is kept for a late
    /// resumption.
    pub resume_grace: Duration,
}

impl Default for HttpOptions {
    fn default() -> Self {
        Self {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            path: "/mcp".to_owned(),
            allowed_hosts: Vec::new(),
            allowed_origins: Vec::new(),
            auth: None,
            max_body_bytes: 4 * 1024 * 1024,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(30),
            max_sessions: MAX_SESSIONS,
            max_sessions_per_caller: MAX_SESSIONS_PER_CALLER,
            max_connections: 4096,
            session_idle: SESSION_IDLE,
            metrics: None,
            session_store: None,
            metrics_addr: None,
            resume_after: RESUME_AFTER,
            resume_grace: RESUME_GRACE,
        }
    }
}

/// Why the HTTP front did not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without inbound authentication.
    #[error(
        "refusing to listen on {addr} without inbound authentication: anyone who can reach that address could \
         call every tool the gateway offers. Configure bearer tokens or an OAuth issuer for `serve`, or listen \
         on a loopback address (127.0.0.1 or [::1])"
    )]
    Unprotected {
        /// The address asked for.
        addr: SocketAddr,
    },
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address asked for.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
}

struct State {
    gateway: Gateway,
    options: HttpOptions,
    guard: HostGuard,
    /// The admin listener's rules, when `/metrics` has an address of its own.
    admin_guard: Option<HostGuard>,
    sessions: Sessions,
    life: Lifecycle,
    /// The sessions' resumable call streams.
    resume: Arc<resume::Registry>,
    /// One permit per open connection ([`HttpOptions::max_connections`], as bound).
    connections: Arc<tokio::sync::Semaphore>,
}

impl State {
    fn limits(&self) -> Limits {
        Limits {
            max: self.options.max_sessions,
            per_caller: self.options.max_sessions_per_caller,
            idle_ms: u64::try_from(self.options.session_idle.as_millis()).unwrap_or(u64::MAX),
        }
    }

    /// Ends what making room let go: expired sessions here only (a store keeps its own
    /// lifetime, renewed by other replicas' use); evicted ones everywhere, their store
    /// records and approvals with them (an evicted session is over, as after DELETE, and its
    /// record would otherwise outlive the cap for the store's idle lifetime).
    async fn let_go(&self, gone: LetGo) {
        for session in &gone.expired {
            session.close();
            // Without a store it is over for good, and so are its "yes for this client"s.
            if self.options.session_store.is_none() {
                self.gateway.options().approvals.forget(&session.scope()).await;
            }
        }
        if !gone.evicted.is_empty() {
            tracing::debug!(evicted = gone.evicted.len(), "sessions evicted to make room for new ones");
        }
        for session in gone.evicted {
            session.close();
            if let (Some(store), Some(id)) = (&self.options.session_store, &session.id)
                && let Err(e) = store.remove(id).await
            {
                tracing::warn!(error = %e, "an evicted session could not be removed from the session store");
            }
            self.gateway.options().approvals.forget(&session.scope()).await;
        }
    }

    /// Lets go of every idle session, a batch per hold of the table's lock; busy sessions it
    /// passes over go to the back, so it looks at about the whole table once at most.
    async fn sweep(&self) {
        let idle_ms = self.limits().idle_ms;
        for _ in 0..=self.options.max_sessions / SWEEP_BATCH {
            let mut expired = Vec::new();
            let swept = self.sessions.sweep(self.gateway.now_ms(), idle_ms, SWEEP_BATCH, &mut expired);
            self.let_go(LetGo { expired, evicted: Vec::new() }).await;
            if swept < SWEEP_BATCH {
                break;
            }
            tokio::task::yield_now().await;
        }
    }
}

/// A bound HTTP front; [`HttpServer::run`] serves it.
pub struct HttpServer {
    listener: TcpListener,
    local: SocketAddr,
    /// The admin listener (`/metrics` on [`HttpOptions::metrics_addr`]) and its address.
    admin: Option<(TcpListener, SocketAddr)>,
    state: Arc<State>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").field("local", &self.local).finish_non_exhaustive()
    }
}

impl HttpServer {
    /// Binds the front. A non-loopback address without authentication is refused, saying why.
    pub async fn bind(gateway: Gateway, options: HttpOptions) -> Result<Self, ServeError> {
        let addr = options.addr;
        if !addr.ip().is_loopback() && options.auth.is_none() {
            return Err(ServeError::Unprotected { addr });
        }
        let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
        let local = listener.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
        let guard = HostGuard::new(&local, &options.allowed_hosts, &options.allowed_origins);
        let admin = match options.metrics_addr {
            Some(addr) => {
                // Tool and server names are in the labels: the same rule as the front.
                if !addr.ip().is_loopback() && options.auth.is_none() {
                    return Err(ServeError::Unprotected { addr });
                }
                let listener = TcpListener::bind(addr).await.map_err(|source| ServeError::Bind { addr, source })?;
                let local = listener.local_addr().map_err(|source| ServeError::Bind { addr, source })?;
                Some((listener, local))
            }
            None => None,
        };
        let admin_guard =
            admin.as_ref().map(|(_, local)| HostGuard::new(local, &options.allowed_hosts, &options.allowed_origins));
        let life = Lifecycle::new();
        let connections = Arc::new(tokio::sync::Semaphore::new(connection_limit(options.max_connections)));
        let state = Arc::new(State {
            gateway,
            options,
            guard,
            admin_guard,
            sessions: Sessions::default(),
            life,
            resume: Arc::default(),
            connections,
        });
        Ok(Self { listener, local, admin, state })
    }

    /// The address it listens on (the port the system chose for port 0).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The address `/metrics` is served on when it has its own ([`HttpOptions::metrics_addr`]).
    pub fn metrics_addr(&self) -> Option<SocketAddr> {
        self.admin.as_ref().map(|(_, addr)| *addr)
    }

    /// Its lifecycle: `/readyz`, and the drain the `serve` front starts on SIGTERM (the
    /// server keeps accepting, to refuse, until `run`'s shutdown completes).
    pub fn lifecycle(&self) -> Lifecycle {
        self.state.life.clone()
    }

    /// Serves connections until `shutdown` completes; connections in progress finish their
    /// requests.
    pub async fn run(self, shutdown: impl std::future::Future<Output = ()>) {
        tokio::pin!(shutdown);
        // Idle sessions go without waiting for requests to come (their subscriptions and
        // streams with them).
        let sweeper = {
            let state = Arc::clone(&self.state);
            tokio::spawn(async move {
                let mut every = tokio::time::interval(SWEEP_EVERY);
                every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
                loop {
                    every.tick().await;
                    state.sweep().await;
                }
            })
        };
        let _sweeper = AbortOnDrop(sweeper);
        let admin = self.admin.as_ref().map(|(listener, _)| listener);
        loop {
            tokio::select! {
                _ = &mut shutdown => break,
                // `accept` is cancel-safe: a fresh one each time round is fine.
                accepted = accept_on(admin) => {
                    let Ok((stream, _)) = accepted else {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let Some(permit) = admit(&self.state, &stream) else { continue };
                    let state = Arc::clone(&self.state);
                    let header_timeout = state.options.header_timeout;
                    tokio::spawn(async move {
                        let _permit = permit;
                        let service = hyper::service::service_fn(move |request| {
                            let state = Arc::clone(&state);
                            async move { Ok::<_, Infallible>(route_admin(&state, request).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(header_timeout)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
                accepted = self.listener.accept() => {
                    let Ok((stream, peer)) = accepted else {
                        // Out of descriptors, say: wait a moment rather than spin.
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    };
                    let Some(permit) = admit(&self.state, &stream) else { continue };
                    let _ = stream.set_nodelay(true);
                    let state = Arc::clone(&self.state);
                    let header_timeout = state.options.header_timeout;
                    tokio::spawn(async move {
                        let _permit = permit;
                        let service = hyper::service::service_fn(move |request| {
                            let state = Arc::clone(&state);
                            async move { Ok::<_, Infallible>(route(&state, request, peer).await) }
                        });
                        let _ = hyper::server::conn::http1::Builder::new()
                            .timer(TokioTimer::new())
                            .header_read_timeout(header_timeout)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            }
        }
    }
}

/// Descriptors of the process's limit kept for what is not a connection: upstreams' pipes and
/// sockets, the audit log, the store, the configuration being reloaded.
pub const RESERVED_DESCRIPTORS: u64 = 256;
/// The fewest connections the front takes, whatever the descriptor limit says.
const MIN_CONNECTIONS: usize = 16;
/// What a connection beyond the limit reads before it is closed.
const TOO_MANY_CONNECTIONS: &[u8] = b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain; charset=utf-8\r\n\
    content-length: 61\r\nretry-after: 1\r\nconnection: close\r\n\r\n\
    too many connections to this gateway at once; try again later";

/// `configured`, lowered to leave [`RESERVED_DESCRIPTORS`] of the descriptor limit free: a
/// gateway out of descriptors can neither answer nor restart an upstream.
fn connection_limit(configured: usize) -> usize {
    let soft = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).map(|(soft, _)| soft);
    let room = soft.map_or(u64::MAX, |soft| soft.saturating_sub(RESERVED_DESCRIPTORS));
    let room = usize::try_from(room).unwrap_or(usize::MAX);
    configured.min(room).clamp(MIN_CONNECTIONS, tokio::sync::Semaphore::MAX_PERMITS)
}

/// A permit for a connection just accepted, or `None` when the front is full: then the
/// connection is told so (as far as its socket takes it at once) and closed.
fn admit(state: &State, stream: &tokio::net::TcpStream) -> Option<tokio::sync::OwnedSemaphorePermit> {
    match Arc::clone(&state.connections).try_acquire_owned() {
        Ok(permit) => Some(permit),
        Err(_) => {
            let _ = stream.try_write(TOO_MANY_CONNECTIONS);
            tracing::debug!("a connection was refused: the gateway has as many open as it takes");
            None
        }
    }
}

/// Stops a task when dropped (when `run` returns, or its future is dropped).
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

fn plain(status: StatusCode, text: &str) -> Response<Body> {
    let mut response = Response::new(Body::full(text.to_owned()));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    response
}

fn json(status: StatusCode, line: String) -> Response<Body> {
    let mut response = Response::new(Body::full(line));
    *response.status_mut() = status;
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// A JSON-RPC error without an id (the request could not be attributed), with a status.
fn refusal(status: StatusCode, code: i64, message: &str) -> Response<Body> {
    let error = ErrorResponse { id: None, error: ErrorObject::new(code, message) };
    json(status, Message::Error(error).encode())
}

fn sse(body: Body) -> Response<Body> {
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    headers.insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    headers.insert(HeaderName::from_static("x-accel-buffering"), HeaderValue::from_static("no"));
    response
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}

async fn route(state: &State, request: Request<Incoming>, peer: SocketAddr) -> Response<Body> {
    // Probes come from load balancers and orchestrators, under whatever Host they use; they
    // say nothing a rebinding page could use, so they come before the Host check.
    match request.uri().path() {
        HEALTHZ => return probe(state, request.method(), true),
        READYZ => return probe(state, request.method(), false),
        _ => {}
    }
    let headers = request.headers();
    let host = header(headers, http::header::HOST.as_str()).or_else(|| request.uri().authority().map(|a| a.as_str()));
    if let Err(why) = state.guard.check(host, header(headers, http::header::ORIGIN.as_str())) {
        return refusal(StatusCode::FORBIDDEN, error_codes::INVALID_REQUEST, &format!("Forbidden: {why}"));
    }
    let path = request.uri().path();
    if path == METRICS
        && state.admin_guard.is_none()
        && let Some(source) = &state.options.metrics
    {
        if let Err(response) = scraper_of(state, headers).await {
            return *response;
        }
        return metrics(source.as_ref(), request.method());
    }
    if let Some(rest) = path.strip_prefix(METADATA_PATH) {
        return metadata(state, rest, request.method());
    }
    let Some(profile) = endpoint(path, &state.options.path) else {
        if path == METRICS && state.options.metrics.is_none() {
            return plain(StatusCode::NOT_FOUND, NO_METRICS);
        }
        return plain(StatusCode::NOT_FOUND, "not found: the MCP endpoint is elsewhere");
    };
    // A call in flight finishes during a drain, on the stream its client resumes too.
    let resuming = request.method() == Method::GET && headers.contains_key(LAST_EVENT_ID);
    if state.life.is_refusing() && !resuming {
        let mut response = plain(
            StatusCode::SERVICE_UNAVAILABLE,
            "this gateway is shutting down and takes no new requests; send it to another replica",
        );
        response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
        response.headers_mut().insert(http::header::CONNECTION, HeaderValue::from_static("close"));
        return response;
    }
    // A request is in flight until it is answered; a call's answer may come after the
    // response started (SSE), so a POST hands this on to the call.
    let in_flight = state.life.enter();
    let profile = profile.map(str::to_owned);
    let caller = match caller_of(state, headers, profile.as_deref()).await {
        Ok(caller) => caller,
        Err(response) => return *response,
    };
    match *request.method() {
        Method::POST => post(state, caller, request, in_flight, peer).await,
        Method::GET => get(state, &caller, request.headers(), peer.ip()).await,
        Method::DELETE => delete(state, &caller, request.headers(), peer.ip()).await,
        _ => {
            let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "the MCP endpoint takes POST, GET and DELETE");
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST, GET, DELETE"));
            response
        }
    }
}

/// `GET /healthz` (alive: always, while it answers) and `GET /readyz` (ready: not draining,
/// and the backend says it is: a pool published, every required upstream connected).
fn probe(state: &State, method: &Method, alive: bool) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "probes are read with GET");
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = if alive {
        plain(StatusCode::OK, "ok")
    } else if state.life.is_draining() {
        plain(StatusCode::SERVICE_UNAVAILABLE, "not ready: draining")
    } else {
        match state.gateway.backend().ready() {
            Ok(()) => plain(StatusCode::OK, "ready"),
            Err(why) => {
                plain(StatusCode::SERVICE_UNAVAILABLE, &format!("not ready: {}", mcp_safety::text::one_line(&why, 300)))
            }
        }
    };
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// What `/metrics` answers when [`HttpOptions::metrics`] is `None`.
const NO_METRICS: &str = "not found: this gateway keeps no metrics (they are off unless configured)";

/// The next connection on `listener`; never, without one.
async fn accept_on(listener: Option<&TcpListener>) -> std::io::Result<(tokio::net::TcpStream, SocketAddr)> {
    match listener {
        Some(listener) => listener.accept().await,
        None => std::future::pending().await,
    }
}

/// The admin listener ([`HttpOptions::metrics_addr`]): the probes and `/metrics`, admitted as on
/// the front; nothing else.
async fn route_admin(state: &State, request: Request<Incoming>) -> Response<Body> {
    match request.uri().path() {
        HEALTHZ => return probe(state, request.method(), true),
        READYZ => return probe(state, request.method(), false),
        METRICS => {}
        _ => return plain(StatusCode::NOT_FOUND, "not found: this address serves /metrics"),
    }
    let headers = request.headers();
    let host = header(headers, http::header::HOST.as_str()).or_else(|| request.uri().authority().map(|a| a.as_str()));
    if let Some(guard) = &state.admin_guard
        && let Err(why) = guard.check(host, header(headers, http::header::ORIGIN.as_str()))
    {
        return refusal(StatusCode::FORBIDDEN, error_codes::INVALID_REQUEST, &format!("Forbidden: {why}"));
    }
    let Some(source) = &state.options.metrics else { return plain(StatusCode::NOT_FOUND, NO_METRICS) };
    if let Err(response) = scraper_of(state, headers).await {
        return *response;
    }
    metrics(source.as_ref(), request.method())
}

/// Admits a scrape of `/metrics`. Every server's and tool's name is in its labels, so it is
/// admitted as a client of the whole gateway would be, and a caller tied to a profile (who may
/// see only that profile's names) is refused.
async fn scraper_of(state: &State, headers: &HeaderMap) -> Result<Caller, Box<Response<Body>>> {
    let caller = caller_of(state, headers, None).await?;
    if let Some(tied) = caller.profile.as_deref() {
        let shown = mcp_safety::text::one_line(tied, 64);
        return Err(Box::new(refusal(
            StatusCode::FORBIDDEN,
            error_codes::INVALID_REQUEST,
            &format!(
                "Forbidden: the metrics name every server and tool, and this caller is tied to profile {shown:?}; \
                 scrape with a credential that is not tied to a profile"
            ),
        )));
    }
    Ok(caller)
}

/// `GET /metrics`: the source's text.
fn metrics(source: &dyn crate::observe::MetricsSource, method: &Method) -> Response<Body> {
    if !matches!(*method, Method::GET | Method::HEAD) {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "metrics are read with GET");
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let Some(text) = source.render() else { return plain(StatusCode::NOT_FOUND, "not found: no metrics are kept") };
    let mut response = Response::new(Body::full(text));
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static(source.content_type()));
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// The profile an MCP endpoint path names: `Some(None)` for the gateway's own (`/mcp`),
/// `Some(Some(NAME))` for `/mcp/NAME`, `None` for any other path.
fn endpoint<'a>(path: &'a str, base: &str) -> Option<Option<&'a str>> {
    let rest = path.strip_prefix(base)?;
    if rest.is_empty() {
        return Some(None);
    }
    let name = rest.strip_prefix('/')?;
    crate::settings::is_profile_name(name).then_some(Some(name))
}

/// Who a request to the endpoint of `profile` is from, and the profile it is served in: the
/// path's, or the one its token is tied to (a token tied to one profile may use no other).
async fn caller_of(state: &State, headers: &HeaderMap, profile: Option<&str>) -> Result<Caller, Box<Response<Body>>> {
    let mut caller = match &state.options.auth {
        None => Caller::local(),
        Some(auth) => match auth.authenticate(&AuthRequest { headers, profile }).await {
            Ok(caller) => caller,
            Err(refused) => return Err(Box::new(unauthorized(state, &refused, profile))),
        },
    };
    match (profile, caller.profile.as_deref()) {
        (Some(asked), Some(tied)) if asked != tied => {
            return Err(Box::new(refusal(
                StatusCode::FORBIDDEN,
                error_codes::INVALID_REQUEST,
                &format!(
                    "Forbidden: this caller is tied to profile {tied:?}; it may use {base} or {base}/{tied} only",
                    base = state.options.path
                ),
            )));
        }
        (Some(asked), None) => caller.profile = Some(Arc::from(asked)),
        _ => {}
    }
    if let Some(name) = caller.profile.as_deref()
        && !state.gateway.backend().has_profile(name)
    {
        let response = if profile.is_some() {
            plain(StatusCode::NOT_FOUND, "not found: no profile by that name")
        } else {
            let shown = mcp_safety::text::one_line(name, 64);
            refusal(
                StatusCode::FORBIDDEN,
                error_codes::INVALID_REQUEST,
                &format!("Forbidden: this caller is tied to profile {shown:?}, which this gateway does not serve"),
            )
        };
        return Err(Box::new(response));
    }
    if !state.gateway.backend().admits(&caller) {
        let shown = mcp_safety::text::one_line(caller.profile.as_deref().unwrap_or_default(), 64);
        return Err(Box::new(refusal(
            StatusCode::FORBIDDEN,
            error_codes::INVALID_REQUEST,
            &format!("Forbidden: this caller is not one of profile {shown:?}'s callers"),
        )));
    }
    Ok(caller)
}

/// The answer to a request that was not authenticated: its status, and the challenge naming
/// the metadata of the resource it tried to reach.
fn unauthorized(state: &State, refused: &Unauthorized, profile: Option<&str>) -> Response<Body> {
    let resource = state.options.auth.as_ref().and_then(|auth| auth.protected_resource());
    let metadata = resource.map(|r| r.metadata_url(profile));
    let scopes = resource.map_or(&[][..], ProtectedResource::scopes);
    let mut response = refusal(refused.status(), error_codes::INVALID_REQUEST, &format!("Unauthorized: {refused}"));
    if let Some(value) = refused.challenge(metadata.as_deref(), scopes).and_then(|c| HeaderValue::from_str(&c).ok()) {
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// `GET /.well-known/oauth-protected-resource{rest}`: the metadata of the gateway's resource or
/// of a profile's (RFC 9728), when it is an OAuth resource server.
fn metadata(state: &State, rest: &str, method: &Method) -> Response<Body> {
    let resource = state.options.auth.as_ref().and_then(|auth| auth.protected_resource());
    let Some(resource) = resource else {
        return plain(StatusCode::NOT_FOUND, "not found: this gateway is not an OAuth protected resource");
    };
    let target = resource.metadata_target(rest, &state.options.path);
    let Some(profile) = target.filter(|p| p.is_none_or(|name| state.gateway.backend().has_profile(name))) else {
        return plain(StatusCode::NOT_FOUND, "not found: no protected resource here");
    };
    if !matches!(*method, Method::GET | Method::HEAD) {
        let mut response = plain(StatusCode::METHOD_NOT_ALLOWED, "metadata is read with GET");
        response.headers_mut().insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return response;
    }
    let mut response = json(StatusCode::OK, resource.document(profile).to_string());
    response.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("max-age=300"));
    response
}

/// The session a request names, if it is this caller's (else the 404 to answer with). With a
/// session store, a session this replica does not hold is restored from it, and one it holds is
/// renewed there (a session ended on another replica ends here too). A session idle too long
/// is let go and answered as unknown.
async fn session_of(
    state: &State,
    caller: &Caller,
    headers: &HeaderMap,
    peer: IpAddr,
) -> Result<Option<Arc<Session>>, Box<Response<Body>>> {
    let Some(id) = headers.get(SESSION_ID) else { return Ok(None) };
    let not_found = || {
        Box::new(refusal(
            StatusCode::NOT_FOUND,
            error_codes::INVALID_REQUEST,
            "Session not found: it ended or never existed; initialize a new one",
        ))
    };
    let Ok(id) = id.to_str() else { return Err(not_found()) };
    let now_ms = state.gateway.now_ms();
    let mut expired = Vec::new();
    let local = state.sessions.get(id, now_ms, state.limits().idle_ms, &mut expired);
    state.let_go(LetGo { expired, evicted: Vec::new() }).await;
    let Some(store) = &state.options.session_store else {
        // Another caller's session is as unknown as a made-up one.
        return match local {
            Some(session) if session.caller == *caller => Ok(Some(session)),
            _ => Err(not_found()),
        };
    };
    if let Some(session) = local {
        if session.caller != *caller {
            return Err(not_found());
        }
        return match store.touch(id).await {
            Ok(true) => Ok(Some(session)),
            Ok(false) => {
                state.sessions.remove(id);
                session.close();
                Err(not_found())
            }
            Err(e) => Err(Box::new(store_unavailable(&e))),
        };
    }
    let record = match store.load(id).await {
        Ok(Some(record)) if record.caller == caller.key() => record,
        Ok(_) => return Err(not_found()),
        Err(e) => return Err(Box::new(store_unavailable(&e))),
    };
    // A revision this build does not know is a session it cannot continue.
    let Some(client) = record.client_context() else { return Err(not_found()) };
    let protocol = mcp_protocol::ServerSession::restore(client, record.ready);
    let session = Session::new(Some(Arc::from(id)), caller.clone(), protocol, now_ms);
    if !record.listed.is_empty() {
        session.listed_elsewhere_as(record.listed);
    }
    let session = Arc::new(session);
    let Some((adopted, gone)) =
        state.sessions.adopt(Arc::clone(&session), Owner::of(caller, peer), state.limits(), now_ms)
    else {
        return Err(not_found());
    };
    state.let_go(gone).await;
    // Renewed once, by the request that brought the session here.
    if Arc::ptr_eq(&adopted, &session) && !record.subscriptions.is_empty() {
        state.gateway.resubscribe(&adopted, &record.subscriptions).await;
    }
    Ok(Some(adopted))
}

/// The answer to a request that needs the session store when it failed: 503, saying so.
fn store_unavailable(error: &StoreError) -> Response<Body> {
    let mut response = refusal(StatusCode::SERVICE_UNAVAILABLE, error_codes::INTERNAL_ERROR, &error.to_string());
    response.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from_static("1"));
    response
}

/// Records `change` of session `id` in the store, if there is one. A change that cannot be
/// recorded is logged: the session goes on here, and another replica sees it as it was.
async fn record_change(state: &State, id: Option<&str>, change: SessionChange) {
    if let (Some(store), Some(id)) = (&state.options.session_store, id)
        && let Err(e) = store.update(id, &change).await
    {
        tracing::warn!(error = %e, "a change to a session could not be recorded in the session store");
    }
}

fn accepts(headers: &HeaderMap, kind: &str) -> bool {
    match headers.get(ACCEPT).and_then(|v| v.to_str().ok()) {
        None => true,
        Some(accept) => accept.split(',').any(|part| {
            let media = part.split(';').next().unwrap_or_default().trim();
            media == kind || media == "*/*" || media.strip_suffix("/*").is_some_and(|major| kind.starts_with(major))
        }),
    }
}

async fn post(
    state: &State,
    caller: Caller,
    request: Request<Incoming>,
    in_flight: InFlight,
    peer: SocketAddr,
) -> Response<Body> {
    let (parts, body) = request.into_parts();
    let headers = parts.headers;
    let json_body = header(&headers, CONTENT_TYPE.as_str())
        .is_some_and(|ct| ct.split(';').next().is_some_and(|m| m.trim().eq_ignore_ascii_case("application/json")));
    if !json_body {
        return plain(StatusCode::UNSUPPORTED_MEDIA_TYPE, "a POST to the MCP endpoint carries application/json");
    }
    if !accepts(&headers, "application/json") && !accepts(&headers, "text/event-stream") {
        return plain(StatusCode::NOT_ACCEPTABLE, "the client must accept application/json or text/event-stream");
    }
    let limited = http_body_util::Limited::new(body, state.options.max_body_bytes);
    let bytes = match tokio::time::timeout(state.options.body_timeout, limited.collect()).await {
        Ok(Ok(collected)) => collected.to_bytes(),
        Ok(Err(_)) => {
            return plain(
                StatusCode::PAYLOAD_TOO_LARGE,
                &format!("the request body is larger than {} bytes, or was cut off", state.options.max_body_bytes),
            );
        }
        Err(_) => return plain(StatusCode::REQUEST_TIMEOUT, "the request body did not arrive in time"),
    };
    let message = match Message::decode(&bytes) {
        Ok(message) => message,
        Err(e) => {
            let error = ErrorResponse { id: e.id.clone(), error: e.to_error_object() };
            return json(StatusCode::BAD_REQUEST, Message::Error(error).encode());
        }
    };
    let session = match session_of(state, &caller, &headers, peer.ip()).await {
        Ok(session) => session,
        Err(response) => return *response,
    };
    // Watched from the message as it arrived (its params' `_meta` carries the caller's trace,
    // the headers may carry the transport's).
    let watch = match &message {
        Message::Request(request) => state.gateway.watch(|| crate::observe::Received {
            method: &request.method,
            params: request.params.as_deref(),
            headers: Some(&headers),
            session: session.as_ref().and_then(|s| s.id.as_deref()),
            protocol_version: match &session {
                Some(session) => Some(session.protocol_version().as_str()),
                None => header(&headers, mcp_protocol::HEADER_PROTOCOL_VERSION),
            },
            peer: Some(peer),
        }),
        _ => None,
    };
    match mcp_protocol::classify(message) {
        ClientMessage::Request(incoming) => {
            post_request(state, caller, session, &headers, *incoming, in_flight, watch, peer.ip()).await
        }
        ClientMessage::Notification(notification) => {
            if let Some(session) = session {
                match notification {
                    ClientNotification::Initialized => {
                        session.initialized();
                        record_change(state, session.id.as_deref(), SessionChange::Ready).await;
                    }
                    ClientNotification::Cancelled(cancelled) => {
                        if let Some(id) = cancelled.request_id {
                            session.cancel(&id);
                        }
                    }
                    _ => {}
                }
            }
            accepted()
        }
        ClientMessage::Response { id, outcome } => match session {
            Some(session) => {
                session.answer(&id, outcome);
                accepted()
            }
            None => {
                plain(StatusCode::BAD_REQUEST, "an answer to the gateway's request needs the session's Mcp-Session-Id")
            }
        },
        _ => accepted(),
    }
}

fn accepted() -> Response<Body> {
    let mut response = Response::new(Body::Empty);
    *response.status_mut() = StatusCode::ACCEPTED;
    response
}

/// The status a stateless error is answered with (the revision's own mapping).
fn stateless_status(error: &ErrorObject) -> StatusCode {
    match error.code {
        server_error_codes::HEADER_MISMATCH
        | server_error_codes::MISSING_REQUIRED_CLIENT_CAPABILITY
        | server_error_codes::UNSUPPORTED_PROTOCOL_VERSION => StatusCode::BAD_REQUEST,
        error_codes::METHOD_NOT_FOUND => StatusCode::NOT_FOUND,
        _ => StatusCode::OK,
    }
}

fn mirrored(headers: &HeaderMap) -> MirroredHeaders<'_> {
    MirroredHeaders {
        protocol_version: headers.get(mcp_protocol::HEADER_PROTOCOL_VERSION).map(HeaderValue::as_bytes),
        method: headers.get(mcp_protocol::HEADER_METHOD).map(HeaderValue::as_bytes),
        name: headers.get(mcp_protocol::HEADER_NAME).map(HeaderValue::as_bytes),
    }
}

/// The answer to a request refused before the gateway handled it (its headers, its envelope),
/// told to its watch first: an error span with the code, not a span that says nothing.
fn refused_early(
    watch: Option<Box<dyn ServeWatch>>,
    id: &RequestId,
    status: StatusCode,
    error: ErrorObject,
    stateless: bool,
) -> Response<Body> {
    if let Some(watch) = watch {
        watch.end(Answered::Error(&error));
    }
    json(status, response_line(id, Reply::Error(error), stateless))
}

#[allow(clippy::too_many_arguments)]
async fn post_request(
    state: &State,
    caller: Caller,
    session: Option<Arc<Session>>,
    headers: &HeaderMap,
    incoming: IncomingRequest,
    in_flight: InFlight,
    watch: Option<Box<dyn ServeWatch>>,
    peer: IpAddr,
) -> Response<Body> {
    let IncomingRequest { id, method, request, meta } = incoming;
    let gateway = &state.gateway;
    let request = match request {
        Ok(request) => request,
        Err(error) => return refused_early(watch, &id, StatusCode::OK, error, false),
    };
    let name = request.routing_name();
    let scope = match (session, &request) {
        (Some(session), _) => {
            // The session knows its revision; a client may name another it speaks (the
            // conformance suite's raw requests do), but not one that is none.
            let facts = BodyFacts { method: &method, name, protocol_version: None, stateless: false };
            if let Err(e) = mcp_protocol::check_headers(&mirrored(headers), &facts) {
                return refused_early(watch, &id, StatusCode::BAD_REQUEST, e.to_error_object(), false);
            }
            Scope { caller, era: Era::Session(session) }
        }
        (None, ClientRequest::Initialize(params)) => {
            let facts = BodyFacts { method: &method, name, protocol_version: None, stateless: false };
            if let Err(e) = mcp_protocol::check_headers(&mirrored(headers), &facts) {
                return refused_early(watch, &id, StatusCode::BAD_REQUEST, e.to_error_object(), false);
            }
            return initialize(state, caller, peer, &id, params, watch).await;
        }
        (None, _) => {
            let Some(envelope) = &meta.envelope else {
                let error = ErrorObject::new(
                    error_codes::INVALID_REQUEST,
                    "Bad Request: no Mcp-Session-Id and no 2026-07-28 _meta envelope; initialize first, or send the \
                     envelope with every request",
                );
                if let Some(watch) = watch {
                    watch.end(Answered::Error(&error));
                }
                return json(StatusCode::BAD_REQUEST, Message::Error(ErrorResponse { id: None, error }).encode());
            };
            let facts = BodyFacts {
                method: &method,
                name,
                protocol_version: Some(envelope.protocol_version.as_str()),
                stateless: true,
            };
            if let Err(e) = mcp_protocol::check_headers(&mirrored(headers), &facts) {
                return refused_early(watch, &id, StatusCode::BAD_REQUEST, e.to_error_object(), false);
            }
            let ctx = match envelope.check(gateway.config()) {
                Ok(ctx) => ctx,
                Err(error) => return refused_early(watch, &id, stateless_status(&error), error, true),
            };
            if let ClientRequest::CallTool(call) = &request
                && let Err(e) = check_params(gateway, &caller, &call.name, call.arguments.as_ref(), headers).await
            {
                return refused_early(watch, &id, StatusCode::BAD_REQUEST, e.to_error_object(), false);
            }
            Scope { caller, era: Era::Stateless(Arc::new(ctx)) }
        }
    };
    let stateless = scope.is_stateless();
    match request {
        ClientRequest::Listen(_) if stateless => {
            let reply = gateway.handle_watched(watch, &scope, &id, request, &meta, &Outbound::none()).await;
            match reply {
                Reply::Listen(filter) => listen(gateway, &id, filter),
                other => json(StatusCode::OK, response_line(&id, other, true)),
            }
        }
        // Only a call sends messages before its answer.
        ClientRequest::CallTool(_) => {
            // A client that names no media types takes any (messages before the answer make it
            // SSE), but only one that names SSE gets a resumable stream it may not expect; one
            // that names only JSON gets JSON.
            let named = headers.contains_key(ACCEPT);
            let accepted = Sse { ok: named && accepts(headers, "text/event-stream"), any: !named };
            call(state, scope, id, request, meta, in_flight, watch, accepted).await
        }
        request => {
            let kept = match &scope.era {
                Era::Session(session) if state.options.session_store.is_some() => {
                    kept_change(&request).map(|change| (change, Arc::clone(session)))
                }
                _ => None,
            };
            let reply = gateway.handle_watched(watch, &scope, &id, request, &meta, &Outbound::none()).await;
            if let (Some((change, session)), Reply::Result(_)) = (kept, &reply) {
                let change = match change {
                    Kept::Change(change) => Some(change),
                    Kept::Listing => session.last_listing().map(|b| SessionChange::Listed(listing_digests(&b))),
                };
                if let Some(change) = change {
                    record_change(state, session.id.as_deref(), change).await;
                }
            }
            let status = match (&reply, stateless) {
                (Reply::Error(error), true) => stateless_status(error),
                _ => StatusCode::OK,
            };
            json(status, response_line(&id, reply, stateless))
        }
    }
}

/// What a session store keeps of a request once it succeeded.
enum Kept {
    Change(SessionChange),
    /// The generations of the listing just served (known once it is).
    Listing,
}

fn kept_change(request: &ClientRequest) -> Option<Kept> {
    Some(match request {
        ClientRequest::SetLevel(level) => Kept::Change(SessionChange::LogLevel(*level)),
        ClientRequest::ListTools(_) => Kept::Listing,
        ClientRequest::Subscribe(params) => Kept::Change(SessionChange::Subscribe(params.uri.clone())),
        ClientRequest::Unsubscribe(params) => Kept::Change(SessionChange::Unsubscribe(params.uri.clone())),
        _ => return None,
    })
}

/// The `Mcp-Param-*` headers of a stateless call, checked against its arguments when the
/// tool's schema declares any.
async fn check_params(
    gateway: &Gateway,
    caller: &Caller,
    name: &str,
    arguments: Option<&serde_json::Map<String, serde_json::Value>>,
    headers: &HeaderMap,
) -> Result<(), mcp_protocol::HeaderMismatch> {
    let Ok(binding) = gateway.backend().binding(caller).await else { return Ok(()) };
    let Some(entry) = binding.pool().get(name) else { return Ok(()) };
    // A tool whose declarations are invalid mirrors nothing a client could have sent right.
    match mcp_protocol::param_headers(entry.input_schema(), 32) {
        Ok(declared) if !declared.is_empty() => {
            mcp_protocol::check_param_headers(&declared, arguments, |h| headers.get(h).map(HeaderValue::as_bytes))
        }
        _ => Ok(()),
    }
}

async fn initialize(
    state: &State,
    caller: Caller,
    peer: IpAddr,
    id: &RequestId,
    params: &mcp_protocol::InitializeRequestParams,
    watch: Option<Box<dyn ServeWatch>>,
) -> Response<Body> {
    let session_id: Arc<str> = match random_hex(16) {
        Ok(id) => Arc::from(id),
        Err(_) => return plain(StatusCode::SERVICE_UNAVAILABLE, "no randomness for a session id"),
    };
    let gateway = &state.gateway;
    let (session, result) = match gateway.open_session(caller.clone(), Some(Arc::clone(&session_id)), params).await {
        Ok(opened) => opened,
        Err(error) => {
            if let Some(watch) = watch {
                watch.end(Answered::Error(&error));
            }
            return json(StatusCode::OK, response_line(id, Reply::Error(error), false));
        }
    };
    // Room is made first (a full table evicts, never refuses), so nothing after the store's
    // record can fail and leave it behind.
    let client = session.client_context();
    let owner = Owner::of(&caller, peer);
    let Some(gone) = state.sessions.insert(session, owner, state.limits(), gateway.now_ms()) else {
        return plain(StatusCode::SERVICE_UNAVAILABLE, "session id taken; initialize again");
    };
    state.let_go(gone).await;
    // With a store, the session exists once it is kept there: any replica may get its next
    // request.
    if let Some(store) = &state.options.session_store {
        let record = SessionRecord::new(&caller, &client);
        let refused = match store.create(&session_id, &record).await {
            Ok(true) => None,
            Ok(false) => Some(plain(StatusCode::SERVICE_UNAVAILABLE, "session id taken; initialize again")),
            Err(e) => Some(store_unavailable(&e)),
        };
        if let Some(refused) = refused {
            if let Some(session) = state.sessions.remove(&session_id) {
                session.close();
            }
            return refused;
        }
        // Evicted by a crowd of new sessions while its record was written (their eviction
        // removed a record not yet there): this one is over too.
        if !state.sessions.contains(&session_id) {
            if let Err(e) = store.remove(&session_id).await {
                tracing::warn!(error = %e, "an evicted session could not be removed from the session store");
            }
            return plain(StatusCode::SERVICE_UNAVAILABLE, "the session was evicted as it opened; initialize again");
        }
    }
    // Told the answer: its negotiated revision is known only from it.
    if let Some(watch) = watch {
        watch.end(Answered::Result(&result));
    }
    let mut response = json(StatusCode::OK, response_line(id, Reply::Result(result), false));
    if let Ok(value) = HeaderValue::from_str(&session_id) {
        response.headers_mut().insert(HeaderName::from_static(SESSION_ID), value);
    }
    response
}

/// What a call's client said of SSE: it named it (`ok`), or named no media type at all (`any`).
#[derive(Debug, Clone, Copy)]
struct Sse {
    ok: bool,
    any: bool,
}

/// A `tools/call`: answered with JSON, unless it sends messages first (then SSE). A session's
/// call from a client that reads SSE (`takes.ok`) becomes a resumable stream when it sends a
/// message first or has not answered within [`HttpOptions::resume_after`].
#[allow(clippy::too_many_arguments)]
async fn call(
    state: &State,
    scope: Scope,
    id: RequestId,
    request: ClientRequest,
    meta: mcp_protocol::RequestMeta,
    in_flight: InFlight,
    watch: Option<Box<dyn ServeWatch>>,
    takes: Sse,
) -> Response<Body> {
    let sse_ok = takes.ok;
    let stateless = scope.is_stateless();
    let session = match &scope.era {
        Era::Session(session) => Some(Arc::clone(session)),
        Era::Stateless(_) => None,
    };
    let mut resumable = session.as_ref().filter(|s| sse_ok && s.id.is_some()).map(Arc::clone);
    let cancelled = match &session {
        Some(session) => match session.start(&id) {
            Some(cancelled) => Some(cancelled),
            None => {
                let error = ErrorObject::new(
                    error_codes::INVALID_REQUEST,
                    format!("Invalid Request: request id {id} is in use by a request still running"),
                );
                return json(StatusCode::OK, response_line(&id, Reply::Error(error), false));
            }
        },
        None => None,
    };
    // A client that goes away mid-call drops `work` before its end: the guard frees the id in
    // the session all the same (else the session refused that id for good).
    let running = session.map(|session| Running { session, id: id.clone() });
    let (tx, mut rx) = mpsc::channel::<String>(64);
    let gateway = state.gateway.clone();
    let life = state.life.clone();
    let mut work: Work = Box::pin(async move {
        // The call is in flight until its answer is made, even when that is after the response
        // started (as SSE): a drain waits for it.
        let _in_flight = in_flight;
        let _running = running;
        // A client that accepts only JSON is sent nothing before its answer, which is then
        // plain JSON: no progress, and it cannot be asked (a call needing confirmation is
        // refused, naming the rule).
        let out = if takes.ok || takes.any { Outbound::new(tx) } else { Outbound::none() };
        let handled = gateway.handle_watched(watch, &scope, &id, request, &meta, &out);
        let cancelled = async move {
            match cancelled {
                Some(cancelled) => {
                    let _ = cancelled.await;
                }
                None => std::future::pending().await,
            }
        };
        let reply = tokio::select! {
            reply = handled => Some(reply),
            () = cancelled => None,
            () = life.aborted() => Some(Reply::Error(ErrorObject::new(
                error_codes::INTERNAL_ERROR,
                "the gateway shut down before this call finished (its drain timeout passed); the call may or may \
                 not have taken effect upstream",
            ))),
        };
        match reply {
            Some(reply) => response_line(&id, reply, stateless),
            // Cancelled: the client expects no answer; the stream just ends.
            None => String::new(),
        }
    });
    loop {
        let resume_after = state.options.resume_after;
        let late = async {
            if resumable.is_some() {
                tokio::time::sleep(resume_after).await;
            } else {
                std::future::pending::<()>().await;
            }
        };
        let mut first = tokio::select! {
            biased;
            line = &mut work => {
                return match rx.try_recv() {
                    // It sent messages before it finished (all in one poll): they still come first.
                    Ok(first) => {
                        let done: Work = Box::pin(std::future::ready(line));
                        sse(Body::Request(Box::new(RequestStream::new(first, rx, done))))
                    }
                    Err(_) if line.is_empty() => accepted(),
                    Err(_) => json(StatusCode::OK, line),
                };
            }
            Some(first) = rx.recv() => Some(first),
            () = late => None,
        };
        // Either way the machinery of a resumable stream is made only now, off the quick path.
        if let Some(session) = resumable.take() {
            match resumable_stream(state, &session, work, rx, first) {
                Ok(response) => return response,
                // No room for another resumable stream: answered as before.
                Err(back) => (work, rx, first) = back,
            }
        }
        if let Some(first) = first {
            return sse(Body::Request(Box::new(RequestStream::new(first, rx, work))));
        }
    }
}

/// A call not (yet) answered: its work, the messages it sends, and the first of them if read.
type Unstarted = (Work, mpsc::Receiver<String>, Option<String>);

/// Answers a call with a resumable stream whose work goes on in a task of its own; gives the
/// call back when its session has no room for another.
fn resumable_stream(
    state: &State,
    session: &Session,
    work: Work,
    rx: mpsc::Receiver<String>,
    first: Option<String>,
) -> Result<Response<Body>, Unstarted> {
    let Some(id) = session.id.clone() else { return Err((work, rx, first)) };
    // Priming events (empty data) are the 2025-11-25 revision's; its clients expect them, and
    // older ones may take empty data for a broken message.
    let priming = session.protocol_version() >= ProtocolVersion::V2025_11_25;
    let Some(log) = state.resume.open(&id, priming) else { return Err((work, rx, first)) };
    // Attached before the work is handed on: the grace starts when this response's reader goes.
    let reader = resume::Reader::from_start(Arc::clone(&log));
    let drive = resume::Drive {
        registry: Arc::clone(&state.resume),
        session: id,
        log,
        grace: state.options.resume_grace,
        hold: state.life.hold(),
    };
    tokio::spawn(resume::drive(drive, work, rx, first));
    Ok(sse(Body::Resumable(Box::new(reader))))
}

/// A session's request in flight: its id is freed when the call ends, answered or dropped.
struct Running {
    session: Arc<Session>,
    id: RequestId,
}

impl Drop for Running {
    fn drop(&mut self) {
        self.session.finish(&self.id);
    }
}

/// A `subscriptions/listen` stream: acknowledged, then the changes it asked for.
fn listen(gateway: &Gateway, id: &RequestId, filter: ListenFilter) -> Response<Body> {
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let meta = serde_json::json!({mcp_protocol::META_SUBSCRIPTION_ID: id});
    let ack = serde_json::json!({"notifications": filter.to_value(), "_meta": meta});
    if let Ok(line) = mcp_protocol::encode_notification(mcp_protocol::stateless::SUBSCRIPTIONS_ACKNOWLEDGED, Some(&ack))
    {
        let _ = tx.try_send(sse_event(&line));
    }
    let events = gateway.backend().events();
    let id = id.clone();
    tokio::spawn(forward(events, None, tx, move |event| {
        filter.wants(event).then(|| {
            let method = match event {
                BackendEvent::ResourcesChanged => mcp_protocol::methods::RESOURCES_LIST_CHANGED,
                BackendEvent::PromptsChanged => mcp_protocol::methods::PROMPTS_LIST_CHANGED,
                _ => mcp_protocol::methods::TOOLS_LIST_CHANGED,
            };
            let params = serde_json::json!({"_meta": {mcp_protocol::META_SUBSCRIPTION_ID: &id}});
            mcp_protocol::encode_notification(method, Some(&params)).unwrap_or_default()
        })
    }));
    sse(Body::Stream(rx))
}

/// Forwards backend events (as `line_of` makes them lines) and a session's own notifications
/// (`direct`) to a long-lived stream until its client goes away, with keep-alive comments in
/// quiet times.
async fn forward(
    mut events: broadcast::Receiver<BackendEvent>,
    mut direct: Option<mpsc::Receiver<String>>,
    tx: mpsc::Sender<Bytes>,
    line_of: impl Fn(&BackendEvent) -> Option<String>,
) {
    let mut keep_alive = tokio::time::interval(KEEP_ALIVE);
    keep_alive.tick().await;
    loop {
        let next_direct = async {
            match direct.as_mut() {
                Some(rx) => rx.recv().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = tx.closed() => break,
            line = next_direct => {
                // `None`: the session ended (DELETE, or let go), and its stream with it.
                let Some(line) = line else { break };
                if tx.send(sse_event(&line)).await.is_err() {
                    break;
                }
            }
            _ = keep_alive.tick() => {
                if tx.send(Bytes::from_static(b": keep-alive\n\n")).await.is_err() {
                    break;
                }
            }
            event = events.recv() => {
                let lines: Vec<String> = match event {
                    Ok(event) => line_of(&event).into_iter().collect(),
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        [BackendEvent::ToolsChanged, BackendEvent::ResourcesChanged, BackendEvent::PromptsChanged]
                            .iter()
                            .filter_map(&line_of)
                            .collect()
                    }
                    Err(broadcast::error::RecvError::Closed) => break,
                };
                for line in lines.into_iter().filter(|l| !l.is_empty()) {
                    if tx.send(sse_event(&line)).await.is_err() {
                        return;
                    }
                }
            }
        }
    }
}

/// GET: the session's stream of notifications (session revisions only), or with
/// `Last-Event-ID` a call's resumable stream resumed.
async fn get(state: &State, caller: &Caller, headers: &HeaderMap, peer: IpAddr) -> Response<Body> {
    let session = match session_of(state, caller, headers, peer).await {
        Ok(Some(session)) => session,
        Ok(None) => {
            let mut response = plain(
                StatusCode::METHOD_NOT_ALLOWED,
                "GET opens a session's stream: send Mcp-Session-Id (2026-07-28 clients use subscriptions/listen)",
            );
            response.headers_mut().insert(ALLOW, HeaderValue::from_static("POST"));
            return response;
        }
        Err(response) => return *response,
    };
    if !accepts(headers, "text/event-stream") {
        return plain(StatusCode::NOT_ACCEPTABLE, "the stream is text/event-stream");
    }
    if let Some(last) = headers.get(LAST_EVENT_ID) {
        // A call's stream resumed: the events after that one, then the rest live.
        let resumed = match (last.to_str(), session.id.as_deref()) {
            (Ok(last), Some(id)) => state.resume.resume(id, last),
            _ => Err((StatusCode::BAD_REQUEST, "Last-Event-ID is not an event id of this gateway")),
        };
        return match resumed {
            Ok(reader) => sse(Body::Resumable(Box::new(reader))),
            Err((status, why)) => plain(status, why),
        };
    }
    if session.has_stream() {
        return plain(StatusCode::CONFLICT, "this session's stream is open already");
    }
    // The session's own notifications (a refused stale call's list_changed) join the stream.
    let (lines_tx, lines_rx) = mpsc::channel::<String>(64);
    session.set_stream(lines_tx);
    let (tx, rx) = mpsc::channel::<Bytes>(64);
    let events = state.gateway.backend().events();
    let backend = Arc::clone(state.gateway.backend());
    tokio::spawn(forward(events, Some(lines_rx), tx, move |event| session_event_line(event, &session, &*backend)));
    sse(Body::Stream(rx))
}

/// DELETE: ends the session.
async fn delete(state: &State, caller: &Caller, headers: &HeaderMap, peer: IpAddr) -> Response<Body> {
    match session_of(state, caller, headers, peer).await {
        Ok(Some(session)) => {
            if let Some(id) = &session.id {
                state.sessions.remove(id);
                if let Some(store) = &state.options.session_store
                    && let Err(e) = store.remove(id).await
                {
                    return store_unavailable(&e);
                }
            }
            session.close();
            state.gateway.options().approvals.forget(&session.scope()).await;
            let mut response = Response::new(Body::Empty);
            *response.status_mut() = StatusCode::OK;
            response
        }
        Ok(None) => plain(StatusCode::BAD_REQUEST, "DELETE ends a session: send its Mcp-Session-Id"),
        Err(response) => *response,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_connection_limit_leaves_descriptors_for_the_rest() {
        let (soft, _) = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE).unwrap();
        let room = usize::try_from(soft.saturating_sub(RESERVED_DESCRIPTORS)).unwrap_or(usize::MAX);
        assert_eq!(connection_limit(usize::MAX), room.clamp(MIN_CONNECTIONS, tokio::sync::Semaphore::MAX_PERMITS));
        assert_eq!(connection_limit(0), MIN_CONNECTIONS);
        assert_eq!(connection_limit(MIN_CONNECTIONS + 1), (MIN_CONNECTIONS + 1).min(room.max(MIN_CONNECTIONS)));
    }
}
