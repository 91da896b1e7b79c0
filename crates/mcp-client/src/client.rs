//! The client connection: drives a [`ClientSession`] over any [`Transport`].
//!
//! One writer task owns the sink and batches whatever is queued; one reader task owns the
//! stream, classifies each message through the session and wakes the caller waiting for it.
//! Many requests can be in flight; each has its own timeout, and a caller that stops waiting
//! (timeout or drop) sends `notifications/cancelled`.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mcp_protocol::stateless::{self, ResultKind};
use mcp_protocol::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientSession, CompleteArgument, CompleteContext,
    CompleteReference, CompleteRequestParams, CompleteResult, ElicitAction, ElicitRequestParams, ElicitResult,
    GetPromptRequestParams, GetPromptResult, Implementation, Incoming, InitializeResult, ListPromptsResult,
    ListResourceTemplatesResult, ListResourcesResult, ListToolsResult, Outgoing, PaginatedRequestParams,
    ProgressNotificationParams, Prompt, ProtocolVersion, ReadResourceRequestParams, ReadResourceResult, Resource,
    ResourceTemplate, ServerCapabilities, ServerNotification, ServerRequest, SessionConfig, SessionError, SessionState,
    Tool, methods,
};
use mcp_protocol::{ErrorObject, Message, RequestId, error_codes};
use mcp_protocol::{encode_error, encode_notification, encode_result};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use serde_json::{Map, Value};
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::deadlines::{self, Expiring};
use crate::handler::{DecliningHandler, ServerRequestHandler};
use crate::transport::{DirectWrite, Exchange, Inbound, Transport, TransportError, TransportSink, TransportStream};

/// Why a client operation failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// The transport failed (for this request, or the whole connection): the server did not
    /// answer with an error; no answer came at all.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The connection is gone; every pending request fails with this.
    #[error("the connection to the server is closed: {reason}")]
    ConnectionClosed {
        /// What happened (exit status, stderr tail, or who closed it).
        reason: String,
    },
    /// No answer within the timeout; the request was cancelled.
    #[error("{method} got no answer within {after:?}; the request was cancelled")]
    Timeout {
        /// The method.
        method: String,
        /// The timeout.
        after: Duration,
    },
    /// The server answered with a JSON-RPC error (only then: failures of the transport are
    /// [`ClientError::Transport`]).
    #[error("the server answered {method} with an error: {error}")]
    Server {
        /// The method.
        method: String,
        /// The error (boxed: it is rare, and keeps every `Result` of this crate small).
        error: Box<ErrorObject>,
    },
    /// The server's answer did not have the expected shape.
    #[error("the server's answer to {method} is malformed: {source}")]
    BadResult {
        /// The method.
        method: String,
        /// What did not parse.
        source: serde_json::Error,
    },
    /// The session refused (not initialized, closed, negotiation failed).
    #[error(transparent)]
    Session(#[from] SessionError),
    /// Pagination went past the page limit.
    #[error(
        "{method} returned more than {limit} pages; stopped (raise ListLimits::max_pages if this server is legitimate)"
    )]
    TooManyPages {
        /// The list method (`tools/list`, `resources/list`, ...).
        method: &'static str,
        /// The limit.
        limit: usize,
    },
    /// Pagination went past the item limit.
    #[error(
        "{method} returned more than {limit} items; stopped (raise ListLimits::max_items if this server is legitimate)"
    )]
    TooManyItems {
        /// The list method.
        method: &'static str,
        /// The limit.
        limit: usize,
    },
    /// An input-required result (2026-07-28) could not be answered.
    #[error("{method} asked for input that could not be given: {reason}")]
    InputRequired {
        /// The method.
        method: String,
        /// Why.
        reason: String,
    },
    /// The server handed out a cursor it had handed out before (a loop).
    #[error("{method} returned cursor {cursor:?} twice; the server's pagination loops")]
    RepeatedCursor {
        /// The list method.
        method: &'static str,
        /// The repeated cursor.
        cursor: String,
    },
    /// The server did not declare the capability the request needs, so it was not sent.
    #[error("the server does not offer {capability} (it did not declare the capability); {method} was not sent")]
    NotOffered {
        /// The method not sent.
        method: &'static str,
        /// The capability missing (`resources`, `prompts`, `tools`).
        capability: &'static str,
    },
    /// An answer was larger than the caller's cap (a resource read).
    #[error(
        "the server's answer to {method} is {size} bytes, more than the limit of {limit}; it was dropped \
         (raise the limit if you need it)"
    )]
    TooLarge {
        /// The method.
        method: &'static str,
        /// The answer's size in bytes (as JSON on the wire).
        size: usize,
        /// The limit.
        limit: usize,
    },
}

/// How a connection starts: which era of the protocol it speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Era {
    /// The `initialize` handshake (2024-11-05 to 2025-11-25).
    #[default]
    Initialize,
    /// `server/discover` only (2026-07-28).
    Discover,
    /// Probe `server/discover`; if the server does not speak 2026-07-28 (an error or a
    /// refusal), `initialize`; when it is slow to answer (past [`ClientOptions::probe_timeout`]),
    /// both, and the first success wins. One configuration entry then works with servers of
    /// both eras.
    Auto,
    /// `initialize` first, for a server known to have answered it before (see
    /// [`Era::remembering`]); if it refuses (an error, a revision we do not speak, a malformed
    /// answer), `server/discover`. A server of either era still connects; one of the handshake
    /// era pays no probe.
    InitializeFirst,
}

impl Era {
    /// How to open a connection that must work with a server of either era, given the revision
    /// it answered last time: [`Era::InitializeFirst`] for a handshake-era revision, else
    /// [`Era::Auto`] (whose probe is what a 2026-07-28 server answers first anyway).
    pub fn remembering(answered: ProtocolVersion) -> Era {
        if answered.is_stateless() { Era::Auto } else { Era::InitializeFirst }
    }
}

/// How long [`Era::Auto`] waits for the `server/discover` probe before falling back (some old
/// servers ignore requests they do not know before `initialize`).
pub const DISCOVER_PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Default cap on one `resources/read` answer, as JSON on the wire (blobs count in base64): 16
/// MiB, room for a large document or image while a hostile server cannot make us hold more.
pub const DEFAULT_MAX_RESOURCE_BYTES: usize = 16 * 1024 * 1024;

/// A server capability a request depends on.
#[derive(Debug, Clone, Copy)]
enum Capability {
    Tools,
    Resources,
    Prompts,
    Completions,
}

impl Capability {
    fn name(self) -> &'static str {
        match self {
            Self::Tools => "tools",
            Self::Resources => "resources",
            Self::Prompts => "prompts",
            Self::Completions => "completions",
        }
    }
}

/// At most this many input-required rounds for one request, so a server cannot keep us in a loop.
pub const MAX_INPUT_ROUNDS: usize = 8;

/// A URL-elicitation-required error listing more URLs than this is not put to the user.
pub const MAX_URL_ELICITATIONS: usize = 4;

/// Options of a connection.
#[derive(Clone)]
pub struct ClientOptions {
    /// Which era of the protocol to speak.
    pub era: Era,
    /// Who we are.
    pub client_info: Implementation,
    /// What we declare. Declare only what the handler really does.
    pub capabilities: ClientCapabilities,
    /// The revision offered.
    pub offered_version: ProtocolVersion,
    /// Timeout of the initialize handshake.
    pub startup_timeout: Duration,
    /// Timeout of requests that don't set their own.
    pub request_timeout: Duration,
    /// Answers roots, sampling and elicitation requests.
    pub handler: Arc<dyn ServerRequestHandler>,
    /// Notifications kept for slow subscribers before the oldest are dropped.
    pub notification_capacity: usize,
    /// A label for logs (the server's configured name).
    pub label: String,
    /// Bytes that may wait for a server that does not read its input before sends fail.
    pub max_backlog_bytes: usize,
    /// How long [`Era::Auto`] waits for `server/discover` alone before also trying
    /// `initialize` (default [`DISCOVER_PROBE_TIMEOUT`]).
    pub probe_timeout: Duration,
}

impl std::fmt::Debug for ClientOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ClientOptions")
            .field("client_info", &self.client_info)
            .field("capabilities", &self.capabilities)
            .field("era", &self.era)
            .field("offered_version", &self.offered_version)
            .field("startup_timeout", &self.startup_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("label", &self.label)
            .finish_non_exhaustive()
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        Self {
            era: Era::Initialize,
            client_info: Implementation::new("mcp-harness", env!("CARGO_PKG_VERSION")),
            capabilities: ClientCapabilities::default(),
            offered_version: ProtocolVersion::LATEST,
            startup_timeout: Duration::from_secs(30),
            request_timeout: Duration::from_secs(60),
            handler: Arc::new(DecliningHandler),
            notification_capacity: DEFAULT_NOTIFICATION_CAPACITY,
            label: "server".to_owned(),
            max_backlog_bytes: DEFAULT_MAX_BACKLOG_BYTES,
            probe_timeout: DISCOVER_PROBE_TIMEOUT,
        }
    }
}

/// Progress of a request, as the server reported it.
pub type Progress = ProgressNotificationParams;

/// Per-request options.
#[derive(Debug, Default)]
pub struct RequestOptions {
    /// Overrides the connection's request timeout.
    pub timeout: Option<Duration>,
    /// Where progress notifications for this request go (a progress token is sent).
    pub progress: Option<mpsc::UnboundedSender<Progress>>,
    /// With a progress sink: each progress notification restarts the timeout, but the request
    /// never runs longer than this in all. `None`: the timeout is the whole budget.
    pub max_total: Option<Duration>,
}

/// Limits on paginated listing, so a broken or hostile server cannot make us loop or hoard.
#[derive(Debug, Clone, Copy)]
pub struct ListLimits {
    /// At most this many pages.
    pub max_pages: usize,
    /// At most this many items in all.
    pub max_items: usize,
}

impl Default for ListLimits {
    fn default() -> Self {
        Self { max_pages: 100, max_items: 10_000 }
    }
}

type Reply = Result<Box<RawValue>, ClientError>;

/// Requests with a timeout this long (`subscriptions/listen`) never keep the watchdog awake.
const NO_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

/// What the session keeps for each pending request.
#[derive(Debug)]
struct Waiter {
    reply: oneshot::Sender<Reply>,
    progress: Option<mpsc::UnboundedSender<Progress>>,
    deadline: Instant,
    timeout: Duration,
    /// The latest the deadline may move to when progress restarts the timeout.
    last_deadline: Instant,
}

/// `start + d`, saturating to a far deadline for a duration too large to add (`Duration::MAX`
/// as "never").
fn deadline_after(start: Instant, d: Duration) -> Instant {
    start.checked_add(d).unwrap_or_else(|| start + NO_DEADLINE)
}

impl Waiter {
    fn new(
        reply: oneshot::Sender<Reply>,
        progress: Option<mpsc::UnboundedSender<Progress>>,
        timeout: Duration,
    ) -> Self {
        let now = Instant::now();
        let deadline = deadline_after(now, timeout);
        Self { reply, progress, deadline, timeout, last_deadline: deadline }
    }

    /// Progress may restart the timeout, up to `max_total` after the start.
    fn with_max_total(mut self, max_total: Option<Duration>) -> Self {
        if let Some(max) = max_total {
            let start = self.deadline.checked_sub(self.timeout).unwrap_or(self.deadline);
            self.last_deadline = deadline_after(start, max).max(self.deadline);
        }
        self
    }

    /// The server reported progress: the timeout starts again, within the total budget.
    fn progressed(&mut self, now: Instant) {
        self.deadline = deadline_after(now, self.timeout).min(self.last_deadline).max(self.deadline);
    }
}

/// Default of [`ClientOptions::notification_capacity`]. The channel holds this many slots for
/// every connection from its start (about 200 bytes each, 55 KiB per server at 256), and a
/// subscriber that falls behind by more loses the oldest (the server set then re-lists, in case
/// a change was among them).
pub const DEFAULT_NOTIFICATION_CAPACITY: usize = 32;

/// Default of [`ClientOptions::max_backlog_bytes`].
pub const DEFAULT_MAX_BACKLOG_BYTES: usize = 64 * 1024 * 1024;

/// Writing through a transport's [`DirectWrite`]: callers write at once when nothing is queued;
/// what the pipe does not take waits in `backlog` for the flush task, in order.
struct DirectPath {
    writer: Arc<dyn DirectWrite>,
    max_backlog: usize,
    state: Mutex<DirectState>,
    wake: tokio::sync::Notify,
}

#[derive(Default)]
struct DirectState {
    backlog: Vec<u8>,
    /// The flush task holds bytes taken from the backlog that are not all written yet.
    busy: bool,
}

impl DirectPath {
    fn state(&self) -> MutexGuard<'_, DirectState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Write one message (a newline is added), or queue it behind earlier ones.
    ///
    /// `coalesce`: other requests are in flight and the server shares our one CPU
    /// ([`DirectWrite::shares_one_cpu`]), so this message may wait for the flush task, which
    /// writes every message queued in the meantime in one write (one wake-up of the server
    /// instead of one per message). A lone call is written at once.
    fn push(&self, message: Outgoing, coalesce: bool) -> Result<(), PushError> {
        let mut bytes = message.into_text().into_bytes();
        bytes.push(b'\n');
        let mut state = self.state();
        if coalesce && state.backlog.is_empty() && !state.busy {
            state.backlog = bytes;
        } else if state.backlog.is_empty() && !state.busy {
            match self.writer.try_write(&bytes) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(n) => state.backlog.extend_from_slice(&bytes[n..]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => state.backlog = bytes,
                Err(e) => return Err(PushError::failed_write(&e)),
            }
        } else if state.backlog.len() + bytes.len() > self.max_backlog {
            return Err(PushError::Fatal(format!(
                "the server is not reading its input: {} bytes are waiting (limit {}, max_backlog_bytes)",
                state.backlog.len(),
                self.max_backlog
            )));
        } else {
            state.backlog.extend_from_slice(&bytes);
        }
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    fn drained(&self) -> bool {
        let state = self.state();
        state.backlog.is_empty() && !state.busy
    }
}

/// Why [`DirectPath::push`] could not take a message.
enum PushError {
    /// Fail at once (the server does not read its input, or the write failed oddly).
    Fatal(String),
    /// The pipe broke: the server is probably exiting, and the reader will say how.
    Broken(String),
}

impl PushError {
    fn failed_write(e: &std::io::Error) -> Self {
        let reason = format!("could not write to the server: {e}");
        if e.kind() == std::io::ErrorKind::BrokenPipe { Self::Broken(reason) } else { Self::Fatal(reason) }
    }
}

/// How long a failed write waits for the reader's account of the server's end (exit status,
/// stderr) before failing everything with the write error itself.
const WRITE_FAILURE_GRACE: Duration = Duration::from_secs(5);

struct Inner {
    session: Mutex<ClientSession<Waiter>>,
    /// `None` asks the writer to close the sink and stop.
    outgoing: mpsc::Sender<Option<Outgoing>>,
    direct: Option<DirectPath>,
    /// The transport's request path: callers send and read their own answers.
    exchange: Option<Arc<dyn Exchange>>,
    notifications: broadcast::Sender<ServerNotification>,
    closed_reason: Mutex<Option<String>>,
    /// Flips to `true` once, when the connection is gone.
    closed: tokio::sync::watch::Sender<bool>,
    options: ClientOptions,
    /// Elicitations being answered (a person is asked) and since when the first of them: the
    /// time a person takes does not count against this connection's request timeouts.
    asking: Mutex<(usize, Option<Instant>)>,
}

impl Inner {
    fn session(&self) -> MutexGuard<'_, ClientSession<Waiter>> {
        // A panic while holding the lock cannot leave the table half-updated in a way that
        // matters more than losing the connection, so recover the guard.
        self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn closed_error(&self) -> ClientError {
        let reason = self
            .closed_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| "the connection is closed".to_owned());
        ClientError::ConnectionClosed { reason }
    }

    /// Why the session refused to start a request: once the connection is gone, the reason it
    /// went (exit status, stderr tail), not a bare "the session is closed".
    fn refused(&self, error: SessionError) -> ClientError {
        match error {
            SessionError::Closed => self.closed_error(),
            other => ClientError::Session(other),
        }
    }

    /// The transport is gone: fail every pending request at once, with the reason.
    fn shut_down(&self, reason: String) {
        if let Ok(mut r) = self.closed_reason.lock()
            && r.is_none()
        {
            *r = Some(reason.clone());
        }
        self.closed.send_replace(true);
        let pending = self.session().close();
        for (_, pending) in pending {
            let _ = pending.payload.reply.send(Err(ClientError::ConnectionClosed { reason: reason.clone() }));
        }
    }

    /// A write failed: the server is most likely gone, and the reader is about to say how (a
    /// stdio server's exit status and stderr), which tells the user more than "broken pipe".
    /// Let it, for a moment; then shut down with the write error if it has not.
    async fn write_failed(&self, reason: String) {
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(WRITE_FAILURE_GRACE, closed.wait_for(|c| *c)).await;
        self.shut_down(reason);
    }

    fn send_line(&self, message: Outgoing) {
        if let Some(direct) = &self.direct {
            if let Err(PushError::Fatal(reason) | PushError::Broken(reason)) = direct.push(message, false) {
                self.shut_down(reason);
            }
            return;
        }
        // Fire-and-forget messages (cancellations, replies) must not block the reader; if the
        // writer's queue is full or gone the connection is failing anyway.
        if let Err(e) = self.outgoing.try_send(Some(message)) {
            tracing::debug!(server = %self.options.label, "dropped an outgoing line: {e}");
        }
    }
}

impl Expiring for Inner {
    fn has_deadlines(&self) -> bool {
        !self.session().pending_where(|w| w.timeout < NO_DEADLINE).is_empty()
    }

    /// Fails the requests whose deadline passed: each gets `Timeout`, and the server gets
    /// `notifications/cancelled`. Nothing expires while a person answers an elicitation.
    fn expire(&self, now: Instant) {
        if self.asking.lock().map(|a| a.0 > 0).unwrap_or(false) {
            return;
        }
        let expired: Vec<(Waiter, Option<Outgoing>, String)> = {
            let mut session = self.session();
            let ids = session.pending_where(|w| w.deadline <= now);
            ids.iter()
                .filter_map(|id| {
                    let method = session.pending_method(id)?.to_owned();
                    session.cancel(id, "timed out").map(|(waiter, line)| (waiter, line, method))
                })
                .collect()
        };
        for (waiter, line, method) in expired {
            if let Some(line) = line {
                self.send_line(line);
            }
            let _ = waiter.reply.send(Err(ClientError::Timeout { method, after: waiter.timeout }));
        }
    }
}

/// A person is being asked (an elicitation) while this lives: the connection's deadlines stand
/// still, and when nobody is asked any more every pending request's deadline moves later by the
/// time the asking took.
struct Asking<'a>(&'a Inner);

impl<'a> Asking<'a> {
    fn start(inner: &'a Inner) -> Self {
        let mut asking = inner.asking.lock().unwrap_or_else(|p| p.into_inner());
        asking.0 += 1;
        asking.1.get_or_insert_with(Instant::now);
        Self(inner)
    }
}

impl Drop for Asking<'_> {
    fn drop(&mut self) {
        let inner = self.0;
        let paused = {
            let mut asking = inner.asking.lock().unwrap_or_else(|p| p.into_inner());
            asking.0 = asking.0.saturating_sub(1);
            if asking.0 > 0 {
                return;
            }
            asking.1.take().map(|since| since.elapsed())
        };
        let Some(paused) = paused else { return };
        let mut session = inner.session();
        for id in session.pending_where(|_| true) {
            if let Some(waiter) = session.pending_mut(&id) {
                waiter.deadline = deadline_after(waiter.deadline, paused);
                waiter.last_deadline = deadline_after(waiter.last_deadline, paused);
            }
        }
    }
}

/// Cancels the request when the caller stops waiting before the answer came.
struct PendingGuard<'a> {
    inner: &'a Inner,
    id: Option<RequestId>,
}

impl PendingGuard<'_> {
    fn cancel(&mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            let cancelled = self.inner.session().cancel(&id, reason);
            if let Some((_, Some(line))) = cancelled {
                self.inner.send_line(line);
            }
        }
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.cancel("the client stopped waiting");
    }
}

/// A connection to one MCP server.
///
/// Dropping it stops its tasks and the transport (a stdio child is killed and reaped); call
/// [`Client::close`] for a graceful shutdown.
pub struct Client {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
    reader: JoinHandle<()>,
    flusher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("label", &self.inner.options.label).finish_non_exhaustive()
    }
}

impl Client {
    /// Start the connection's tasks without the handshake (subscribe first, then
    /// [`Client::initialize`], to see notifications sent right after it).
    pub fn start(transport: impl Transport + 'static, options: ClientOptions) -> Client {
        let (sink, stream): (Box<dyn TransportSink>, Box<dyn TransportStream>) = Box::new(transport).split();
        let mut config = SessionConfig::new(options.client_info.clone(), options.capabilities.clone());
        config.offered_version = options.offered_version;
        let (outgoing, outgoing_rx) = mpsc::channel(4096);
        let direct = sink.direct().map(|writer| DirectPath {
            writer,
            max_backlog: options.max_backlog_bytes,
            state: Mutex::new(DirectState::default()),
            wake: tokio::sync::Notify::new(),
        });
        let exchange = if direct.is_none() { sink.exchange() } else { None };
        let (notifications, _) = broadcast::channel(options.notification_capacity.max(1));
        let inner = Arc::new(Inner {
            session: Mutex::new(ClientSession::new(config)),
            outgoing,
            direct,
            exchange,
            notifications,
            closed_reason: Mutex::new(None),
            closed: tokio::sync::watch::Sender::new(false),
            options,
            asking: Mutex::new((0, None)),
        });
        let writer = tokio::spawn(write_loop(Arc::clone(&inner), sink, outgoing_rx));
        let reader = tokio::spawn(read_loop(Arc::clone(&inner), stream));
        let watched: Arc<dyn Expiring> = inner.clone();
        deadlines::watch(Arc::downgrade(&watched));
        let flusher = inner.direct.is_some().then(|| tokio::spawn(flush_loop(Arc::clone(&inner))));
        Client { inner, writer: Mutex::new(Some(writer)), reader, flusher }
    }

    /// Start and open the session the way [`ClientOptions::era`] says.
    pub async fn connect(transport: impl Transport + 'static, options: ClientOptions) -> Result<Client, ClientError> {
        let client = Client::start(transport, options);
        client.open().await?;
        Ok(client)
    }

    /// Open the session the way [`ClientOptions::era`] says: `initialize`, `server/discover`,
    /// or the probe with its fallback. Returns what the server said about itself (for
    /// 2026-07-28, the discover result in the shape of an initialize result).
    pub async fn open(&self) -> Result<InitializeResult, ClientError> {
        match self.inner.options.era {
            Era::Initialize => self.initialize().await,
            Era::Discover => self.discover(self.inner.options.startup_timeout).await,
            Era::Auto => self.probe().await,
            Era::InitializeFirst => match self.initialize().await {
                Err(e) if initialize_refused(&e) => {
                    tracing::debug!(server = %self.inner.options.label, "initialize refused ({e}); server/discover");
                    self.discover(self.inner.options.startup_timeout).await
                }
                other => other,
            },
        }
    }

    /// [`Era::Auto`]: `server/discover` alone for [`DISCOVER_PROBE_TIMEOUT`]; a refusal means
    /// `initialize`. A server that is only slow (a Python server still starting) may yet answer
    /// the probe, and once it has seen `server/discover` it may refuse `initialize`; so after
    /// the probe time both requests are in flight and the first success wins, a failure of one
    /// waiting for the other.
    async fn probe(&self) -> Result<InitializeResult, ClientError> {
        let label = &self.inner.options.label;
        let startup = self.inner.options.startup_timeout;
        let probe = self.inner.options.probe_timeout;
        if startup <= probe {
            // No room for both: the probe gets the whole budget, then initialize its own.
            return match self.discover(startup).await {
                Err(e) if discover_refused(&e) => self.initialize().await,
                other => other,
            };
        }
        let discover = self.discover_raw(startup);
        tokio::pin!(discover);
        let first = tokio::time::timeout(probe, &mut discover).await;
        match first {
            Ok(Ok(raw)) => match self.finish_discover(&raw) {
                Err(e) if discover_refused(&e) => return self.initialize().await,
                other => return other,
            },
            Ok(Err(e)) if discover_refused(&e) => {
                tracing::debug!(server = %label, "server/discover refused ({e}); initialize");
                return self.initialize().await;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => tracing::debug!(server = %label, "server/discover is slow; initialize as well"),
        }
        let initialize = self.initialize_raw();
        tokio::pin!(initialize);
        let (mut discover_failed, mut initialize_failed) = (None, None);
        loop {
            tokio::select! {
                answer = &mut discover, if discover_failed.is_none() => {
                    let outcome = match answer {
                        Ok(raw) => self.finish_discover(&raw),
                        Err(e) => Err(e),
                    };
                    match outcome {
                        Ok(result) => return Ok(result),
                        Err(e) if !discover_refused(&e) => return Err(e),
                        Err(e) => discover_failed = Some(e),
                    }
                }
                answer = &mut initialize, if initialize_failed.is_none() => match answer {
                    Ok(raw) => return self.finish_initialize(&raw).await,
                    Err(e) => initialize_failed = Some(e),
                },
            }
            if discover_failed.is_some()
                && let Some(e) = initialize_failed.take()
            {
                return Err(e);
            }
        }
    }

    /// `server/discover` (2026-07-28) within `timeout`.
    pub async fn discover(&self, timeout: Duration) -> Result<InitializeResult, ClientError> {
        let raw = self.discover_raw(timeout).await?;
        self.finish_discover(&raw)
    }

    async fn discover_raw(&self, timeout: Duration) -> Result<Box<RawValue>, ClientError> {
        let (reply, rx) = oneshot::channel();
        let (id, line) = self
            .inner
            .session()
            .start_discover(Waiter::new(reply, None, timeout))
            .map_err(|e| self.inner.refused(e))?;
        self.wait(id, line, rx).await.map_err(|e| match e {
            ClientError::Server { error, .. } => {
                ClientError::Server { method: stateless::SERVER_DISCOVER.to_owned(), error }
            }
            other => other,
        })
    }

    fn finish_discover(&self, raw: &RawValue) -> Result<InitializeResult, ClientError> {
        self.inner.session().finish_discover(raw)?;
        self.inner.session().server().cloned().ok_or_else(|| self.inner.closed_error())
    }

    /// Opens a `subscriptions/listen` stream (2026-07-28) for the list_changed notifications;
    /// they arrive through [`Client::subscribe`]. The request stays open until the connection
    /// closes. Does nothing in the handshake era, where those notifications need no request.
    pub fn listen_for_changes(&self) -> Result<(), ClientError> {
        if !self.protocol_version().is_some_and(ProtocolVersion::is_stateless) {
            return Ok(());
        }
        let params = serde_json::json!({"notifications": {
            "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}});
        let (reply, rx) = oneshot::channel();
        // No deadline: the stream is meant to stay open.
        let waiter = Waiter::new(reply, None, Duration::MAX);
        let (_, line) = self
            .inner
            .session()
            .start_request(stateless::SUBSCRIPTIONS_LISTEN, Some(&params), waiter)
            .map_err(|e| self.inner.refused(e))?;
        self.inner.send_line(line);
        let label = self.inner.options.label.clone();
        tokio::spawn(async move {
            if let Ok(Err(e)) = rx.await {
                tracing::debug!(server = %label, "subscriptions/listen ended: {e}");
            }
        });
        Ok(())
    }

    /// Perform the initialize handshake (within the startup timeout), whatever the era option.
    pub async fn initialize(&self) -> Result<InitializeResult, ClientError> {
        let raw = self.initialize_raw().await?;
        self.finish_initialize(&raw).await
    }

    async fn initialize_raw(&self) -> Result<Box<RawValue>, ClientError> {
        let (reply, rx) = oneshot::channel();
        let timeout = self.inner.options.startup_timeout;
        let (id, line) = self
            .inner
            .session()
            .start_initialize(Waiter::new(reply, None, timeout))
            .map_err(|e| self.inner.refused(e))?;
        self.wait(id, line, rx).await
    }

    async fn finish_initialize(&self, raw: &RawValue) -> Result<InitializeResult, ClientError> {
        let initialized = self.inner.session().finish_initialize(raw)?;
        self.send(initialized).await?;
        self.inner.session().server().cloned().ok_or_else(|| self.inner.closed_error())
    }

    /// Subscribe to server notifications (list_changed and the rest). A subscriber that falls
    /// more than `notification_capacity` behind loses the oldest ones.
    pub fn subscribe(&self) -> broadcast::Receiver<ServerNotification> {
        self.inner.notifications.subscribe()
    }

    /// The server's initialize result, once initialized.
    pub fn server_info(&self) -> Option<InitializeResult> {
        self.inner.session().server().cloned()
    }

    /// The negotiated revision, once initialized.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.inner.session().protocol_version()
    }

    /// Waits until the connection is gone (the server exited, the transport failed, or it was
    /// closed) and says why.
    pub async fn closed(&self) -> String {
        let mut closed = self.inner.closed.subscribe();
        // An error means the sender is gone, which only happens with the client itself.
        let _ = closed.wait_for(|c| *c).await;
        match self.inner.closed_error() {
            ClientError::ConnectionClosed { reason } => reason,
            other => other.to_string(),
        }
    }

    /// Whether the connection is still usable.
    pub fn is_open(&self) -> bool {
        self.inner.session().state() != SessionState::Closed
    }

    /// How many requests are waiting for answers.
    pub fn pending_requests(&self) -> usize {
        self.inner.session().pending_count()
    }

    async fn send(&self, line: Outgoing) -> Result<(), ClientError> {
        if let Some(exchange) = &self.inner.exchange {
            if self.inner.session().state() == SessionState::Closed {
                return Err(self.inner.closed_error());
            }
            let inner = &self.inner;
            exchange.exchange(line, &|inbound| handle_inbound(inner, inbound)).await;
            return Ok(());
        }
        if let Some(direct) = &self.inner.direct {
            let others_in_flight = {
                let session = self.inner.session();
                if session.state() == SessionState::Closed {
                    return Err(self.inner.closed_error());
                }
                session.pending_count() > 1
            };
            // Asked only once others are in flight: a lone call never needs the answer.
            let coalesce = others_in_flight && direct.writer.shares_one_cpu();
            return match direct.push(line, coalesce) {
                Ok(()) => Ok(()),
                Err(PushError::Fatal(reason)) => {
                    self.inner.shut_down(reason);
                    Err(self.inner.closed_error())
                }
                Err(PushError::Broken(reason)) => {
                    self.inner.write_failed(reason).await;
                    Err(self.inner.closed_error())
                }
            };
        }
        self.inner.outgoing.send(Some(line)).await.map_err(|_| self.inner.closed_error())
    }

    async fn wait(
        &self,
        id: RequestId,
        line: Outgoing,
        rx: oneshot::Receiver<Reply>,
    ) -> Result<Box<RawValue>, ClientError> {
        let mut guard = PendingGuard { inner: &self.inner, id: Some(id) };
        deadlines::wake();
        let reply = match &self.inner.exchange {
            Some(exchange) => {
                // The answer usually comes back through the exchange itself; the watchdog or the
                // connection's end may answer first, and then the exchange is abandoned.
                let inner = &self.inner;
                let deliver = |inbound| handle_inbound(inner, inbound);
                let sent = exchange.exchange(line, &deliver);
                tokio::pin!(sent);
                let mut rx = rx;
                tokio::select! {
                    biased;
                    reply = &mut rx => reply,
                    () = &mut sent => rx.await,
                }
            }
            None => {
                self.send(line).await?;
                // The reader answers, or the watchdog fails it with a timeout, or the
                // connection's end drops the sender.
                rx.await
            }
        };
        guard.id = None;
        reply.unwrap_or_else(|_| Err(self.inner.closed_error()))
    }

    /// Send a request and wait for its raw result. An input-required result (2026-07-28) is
    /// answered through the [`ServerRequestHandler`] and the request retried with
    /// `inputResponses`, up to [`MAX_INPUT_ROUNDS`] times. A URL-elicitation-required error
    /// (2025-11-25) puts its URLs to the handler, and the request is retried once if every one
    /// was accepted.
    pub async fn request_raw<T: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&T>,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, ClientError> {
        let timeout = options.timeout;
        let progress = options.progress.clone();
        let max_total = options.max_total;
        let raw = match self.request_once(method, params, options).await {
            Err(ClientError::Server { method, error }) if error.code == error_codes::URL_ELICITATION_REQUIRED => {
                if !self.visit_urls(&error).await {
                    return Err(ClientError::Server { method, error });
                }
                let options = RequestOptions { timeout, progress: progress.clone(), max_total };
                self.request_once(&method, params, options).await?
            }
            other => other?,
        };
        if stateless::result_kind(&raw) != ResultKind::InputRequired {
            return Ok(raw);
        }
        let input_error = |reason: String| ClientError::InputRequired { method: method.to_owned(), reason };
        let original = params
            .map(serde_json::to_value)
            .transpose()
            .map_err(|source| SessionError::Encode { method: method.to_owned(), source })?;
        let mut raw = raw;
        for _ in 0..MAX_INPUT_ROUNDS {
            let asked: stateless::InputRequiredResult =
                serde_json::from_str(raw.get()).map_err(|e| input_error(format!("malformed input request: {e}")))?;
            let mut responses = Map::new();
            for (key, request) in asked.input_requests.unwrap_or_default() {
                let request: stateless::InputRequest = serde_json::from_value(request)
                    .map_err(|e| input_error(format!("input request {key:?} is malformed: {e}")))?;
                let answer = self.answer_input(request).await.map_err(|e| input_error(format!("{key}: {e}")))?;
                responses.insert(key, answer);
            }
            let params = stateless::retry_params(original.clone(), responses, asked.request_state);
            let options = RequestOptions { timeout, progress: progress.clone(), max_total };
            raw = self.request_once(method, Some(&params), options).await?;
            if stateless::result_kind(&raw) != ResultKind::InputRequired {
                return Ok(raw);
            }
        }
        Err(input_error(format!("the server asked for input more than {MAX_INPUT_ROUNDS} times")))
    }

    /// The URL elicitations of a URL-elicitation-required error, each put to the handler:
    /// whether there were some, all well-formed URL-mode params (at most
    /// [`MAX_URL_ELICITATIONS`]), and the user accepted every one.
    async fn visit_urls(&self, error: &ErrorObject) -> bool {
        let Some(listed) = error.data.as_ref().and_then(|d| d.get("elicitations")).and_then(Value::as_array) else {
            return false;
        };
        if listed.is_empty() || listed.len() > MAX_URL_ELICITATIONS {
            return false;
        }
        let Ok(asked) = listed
            .iter()
            .map(|e| serde_json::from_value::<ElicitRequestParams>(e.clone()))
            .collect::<Result<Vec<_>, _>>()
        else {
            return false;
        };
        if asked.iter().any(|p| p.mode.as_deref() != Some("url") || p.url.is_none()) {
            return false;
        }
        let handler = Arc::clone(&self.inner.options.handler);
        for params in asked {
            match handler.elicit(params).await {
                Ok(ElicitResult { action: ElicitAction::Accept, .. }) => {}
                _ => return false,
            }
        }
        true
    }

    /// One input request, through the same handler as the handshake era's server requests.
    async fn answer_input(&self, request: stateless::InputRequest) -> Result<Value, String> {
        let handler = Arc::clone(&self.inner.options.handler);
        let params = request.params.unwrap_or(Value::Null);
        let to_value = |r: Result<Value, serde_json::Error>| r.map_err(|e| e.to_string());
        match request.method.as_str() {
            methods::ELICITATION_CREATE => {
                let params = serde_json::from_value(params).map_err(|e| format!("bad elicitation params: {e}"))?;
                let result = handler.elicit(params).await.map_err(|e| e.to_string())?;
                to_value(serde_json::to_value(result))
            }
            methods::SAMPLING_CREATE_MESSAGE => {
                let params = serde_json::from_value(params).map_err(|e| format!("bad sampling params: {e}"))?;
                let result = handler.create_message(params).await.map_err(|e| e.to_string())?;
                to_value(serde_json::to_value(result))
            }
            methods::ROOTS_LIST => {
                let result = handler.list_roots().await.map_err(|e| e.to_string())?;
                to_value(serde_json::to_value(result))
            }
            other => Err(format!("unknown input request method {other:?}")),
        }
    }

    async fn request_once<T: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&T>,
        options: RequestOptions,
    ) -> Result<Box<RawValue>, ClientError> {
        let (reply, rx) = oneshot::channel();
        let timeout = options.timeout.unwrap_or(self.inner.options.request_timeout);
        let (id, line) = {
            let mut session = self.inner.session();
            match options.progress {
                Some(progress) => {
                    let waiter = Waiter::new(reply, Some(progress), timeout).with_max_total(options.max_total);
                    session.start_request_with_progress(method, params, waiter)
                }
                None => session.start_request(method, params, Waiter::new(reply, None, timeout)),
            }
            .map_err(|e| self.inner.refused(e))?
        };
        self.wait(id, line, rx).await.map_err(|e| match e {
            ClientError::Server { error, .. } => ClientError::Server { method: method.to_owned(), error },
            other => other,
        })
    }

    /// Send a request and decode its result.
    pub async fn request<T: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: &str,
        params: Option<&T>,
        options: RequestOptions,
    ) -> Result<R, ClientError> {
        let raw = self.request_raw(method, params, options).await?;
        serde_json::from_str(raw.get()).map_err(|source| ClientError::BadResult { method: method.to_owned(), source })
    }

    /// Send a notification.
    pub async fn notify<T: Serialize + ?Sized>(&self, method: &str, params: Option<&T>) -> Result<(), ClientError> {
        let line = encode_notification(method, params)
            .map_err(|source| SessionError::Encode { method: method.to_owned(), source })?;
        self.send(Outgoing::notification(line, method)).await
    }

    /// `ping`.
    pub async fn ping(&self) -> Result<(), ClientError> {
        self.request_raw::<Value>(methods::PING, None, RequestOptions::default()).await.map(|_| ())
    }

    /// What the server declared it offers, once the session is open (`None` before).
    pub fn server_capabilities(&self) -> Option<ServerCapabilities> {
        self.inner.session().server().map(|s| s.capabilities.clone())
    }

    /// Whether the server declared `capability`. Before the session is open nothing is known,
    /// and the request is sent (the server's answer decides).
    fn offers(&self, capability: Capability) -> bool {
        let Some(declared) = self.server_capabilities() else { return true };
        match capability {
            Capability::Tools => declared.tools.is_some(),
            Capability::Resources => declared.resources.is_some(),
            Capability::Prompts => declared.prompts.is_some(),
            Capability::Completions => declared.completions.is_some(),
        }
    }

    /// Fails with [`ClientError::NotOffered`] when the server did not declare `capability`.
    fn require(&self, capability: Capability, method: &'static str) -> Result<(), ClientError> {
        if self.offers(capability) {
            Ok(())
        } else {
            Err(ClientError::NotOffered { method, capability: capability.name() })
        }
    }

    /// One page of a paginated list method.
    async fn page<R: DeserializeOwned>(&self, method: &'static str, cursor: Option<String>) -> Result<R, ClientError> {
        let params = PaginatedRequestParams { cursor, extra: Map::new() };
        self.request(method, Some(&params), RequestOptions::default()).await
    }

    /// Every item of a paginated list, following cursors within `limits`; none, without asking,
    /// when the server did not declare `capability` (a resources-only server has no tools, it
    /// does not fail `tools/list`).
    async fn list_all<R: DeserializeOwned, T>(
        &self,
        capability: Capability,
        method: &'static str,
        limits: ListLimits,
        split: impl Fn(R) -> (Vec<T>, Option<String>),
    ) -> Result<Vec<T>, ClientError> {
        if !self.offers(capability) {
            return Ok(Vec::new());
        }
        let mut items = Vec::new();
        let mut seen = std::collections::HashSet::new();
        let mut cursor = None;
        for _ in 0..limits.max_pages {
            let (page, next) = split(self.page(method, cursor.take()).await?);
            if items.len() + page.len() > limits.max_items {
                return Err(ClientError::TooManyItems { method, limit: limits.max_items });
            }
            items.extend(page);
            match next {
                None => return Ok(items),
                Some(next) => {
                    if !seen.insert(next.clone()) {
                        return Err(ClientError::RepeatedCursor { method, cursor: next });
                    }
                    cursor = Some(next);
                }
            }
        }
        Err(ClientError::TooManyPages { method, limit: limits.max_pages })
    }

    /// One page of `tools/list`.
    pub async fn list_tools(&self, cursor: Option<String>) -> Result<ListToolsResult, ClientError> {
        self.page(methods::TOOLS_LIST, cursor).await
    }

    /// Every tool, following cursors within `limits`; none (nothing is sent) when the server
    /// did not declare the `tools` capability.
    pub async fn list_all_tools(&self, limits: ListLimits) -> Result<Vec<Tool>, ClientError> {
        self.list_all(Capability::Tools, methods::TOOLS_LIST, limits, |p: ListToolsResult| (p.tools, p.next_cursor))
            .await
    }

    /// One page of `resources/list`.
    pub async fn list_resources(&self, cursor: Option<String>) -> Result<ListResourcesResult, ClientError> {
        self.page(methods::RESOURCES_LIST, cursor).await
    }

    /// Every resource, following cursors within `limits`; none (nothing is sent) when the
    /// server did not declare the `resources` capability.
    pub async fn list_all_resources(&self, limits: ListLimits) -> Result<Vec<Resource>, ClientError> {
        let split = |p: ListResourcesResult| (p.resources, p.next_cursor);
        self.list_all(Capability::Resources, methods::RESOURCES_LIST, limits, split).await
    }

    /// One page of `resources/templates/list`.
    pub async fn list_resource_templates(
        &self,
        cursor: Option<String>,
    ) -> Result<ListResourceTemplatesResult, ClientError> {
        self.page(methods::RESOURCE_TEMPLATES_LIST, cursor).await
    }

    /// Every resource template, following cursors within `limits`; none (nothing is sent) when
    /// the server did not declare the `resources` capability.
    pub async fn list_all_resource_templates(&self, limits: ListLimits) -> Result<Vec<ResourceTemplate>, ClientError> {
        let split = |p: ListResourceTemplatesResult| (p.resource_templates, p.next_cursor);
        self.list_all(Capability::Resources, methods::RESOURCE_TEMPLATES_LIST, limits, split).await
    }

    /// `resources/read` of `uri`. An answer larger than `max_bytes` as JSON on the wire (text,
    /// and blobs in base64) is dropped with [`ClientError::TooLarge`] before it is decoded;
    /// [`DEFAULT_MAX_RESOURCE_BYTES`] is a sensible cap. Fails with
    /// [`ClientError::NotOffered`] when the server did not declare `resources`.
    pub async fn read_resource(&self, uri: &str, max_bytes: usize) -> Result<ReadResourceResult, ClientError> {
        let method = methods::RESOURCES_READ;
        self.require(Capability::Resources, method)?;
        let params = ReadResourceRequestParams { uri: uri.to_owned(), extra: Map::new() };
        let raw = self.request_raw(method, Some(&params), RequestOptions::default()).await?;
        let size = raw.get().len();
        if size > max_bytes {
            return Err(ClientError::TooLarge { method, size, limit: max_bytes });
        }
        serde_json::from_str(raw.get()).map_err(|source| ClientError::BadResult { method: method.to_owned(), source })
    }

    /// One page of `prompts/list`.
    pub async fn list_prompts(&self, cursor: Option<String>) -> Result<ListPromptsResult, ClientError> {
        self.page(methods::PROMPTS_LIST, cursor).await
    }

    /// Every prompt, following cursors within `limits`; none (nothing is sent) when the server
    /// did not declare the `prompts` capability.
    pub async fn list_all_prompts(&self, limits: ListLimits) -> Result<Vec<Prompt>, ClientError> {
        let split = |p: ListPromptsResult| (p.prompts, p.next_cursor);
        self.list_all(Capability::Prompts, methods::PROMPTS_LIST, limits, split).await
    }

    /// `prompts/get` of prompt `name` with its arguments (string values, as the specification
    /// has them). Fails with [`ClientError::NotOffered`] when the server did not declare
    /// `prompts`.
    pub async fn get_prompt(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<GetPromptResult, ClientError> {
        self.require(Capability::Prompts, methods::PROMPTS_GET)?;
        let params = GetPromptRequestParams { name: name.to_owned(), arguments, extra: Map::new() };
        self.request(methods::PROMPTS_GET, Some(&params), RequestOptions::default()).await
    }

    /// `completion/complete`: suggested values of argument `argument` of `reference`, given
    /// `value` typed so far and the `context` of arguments already given (sent only to servers
    /// of 2025-06-18 and later, which know it). Fails with [`ClientError::NotOffered`] when a
    /// server of 2025-03-26 or later did not declare `completions` (2024-11-05 had no such
    /// capability: such a server is asked, and its answer decides).
    pub async fn complete(
        &self,
        reference: CompleteReference,
        argument: &str,
        value: &str,
        context: Option<Map<String, Value>>,
    ) -> Result<CompleteResult, ClientError> {
        if self.protocol_version().is_none_or(|v| v >= ProtocolVersion::V2025_03_26) {
            self.require(Capability::Completions, methods::COMPLETION_COMPLETE)?;
        }
        let knows_context = self.protocol_version().is_none_or(|v| v >= ProtocolVersion::V2025_06_18);
        let context = context
            .filter(|arguments| knows_context && !arguments.is_empty())
            .map(|arguments| CompleteContext { arguments: Some(arguments), extra: Map::new() });
        let params = CompleteRequestParams {
            reference,
            argument: CompleteArgument { name: argument.to_owned(), value: value.to_owned(), extra: Map::new() },
            context,
            extra: Map::new(),
        };
        self.request(methods::COMPLETION_COMPLETE, Some(&params), RequestOptions::default()).await
    }

    /// `tools/call` under the tool's raw name.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<Map<String, Value>>,
        options: RequestOptions,
    ) -> Result<CallToolResult, ClientError> {
        let params = CallToolRequestParams { name: name.to_owned(), arguments, meta: None, extra: Map::new() };
        self.request(methods::TOOLS_CALL, Some(&params), options).await
    }

    /// Close gracefully: pending requests fail and the server is told they are cancelled, the
    /// transport is closed (a stdio child gets stdin closed, then SIGTERM, then SIGKILL; what is
    /// left of its process group is killed) and reaped.
    pub async fn close(&self) -> Result<(), ClientError> {
        // Requests still waiting are given up, and the server is told (`notifications/cancelled`)
        // before its input closes, as it would be had each caller stopped waiting.
        let reason = "closed by the client";
        let cancelled: Vec<(Waiter, Option<Outgoing>)> = {
            let mut session = self.inner.session();
            let ids = session.pending_where(|_| true);
            ids.iter().filter_map(|id| session.cancel(id, reason)).collect()
        };
        for (waiter, line) in cancelled {
            if let Some(line) = line {
                self.inner.send_line(line);
            }
            let _ = waiter.reply.send(Err(ClientError::ConnectionClosed { reason: reason.to_owned() }));
        }
        self.inner.shut_down(reason.to_owned());
        self.reader.abort();
        // The writer waits for the direct path to drain, then closes the sink when it reads the close marker.
        let _ = self.inner.outgoing.send(None).await;
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            let _ = writer.await;
        }
        Ok(())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(flusher) = &self.flusher {
            flusher.abort();
        }
        if let Ok(Some(writer)) = self.writer.lock().map(|mut w| w.take()) {
            writer.abort();
        }
        self.inner.shut_down("the client was dropped".to_owned());
    }
}

/// Writes the direct path's backlog when the pipe did not take a message at once.
async fn flush_loop(inner: Arc<Inner>) {
    let Some(direct) = &inner.direct else { return };
    loop {
        direct.wake.notified().await;
        // Let the callers that are ready now queue theirs first: one write for all of them.
        tokio::task::yield_now().await;
        loop {
            let chunk = {
                let mut state = direct.state();
                if state.backlog.is_empty() {
                    state.busy = false;
                    break;
                }
                state.busy = true;
                std::mem::take(&mut state.backlog)
            };
            let mut written = 0;
            while written < chunk.len() {
                let attempt = match direct.writer.writable().await {
                    Ok(()) => direct.writer.try_write(&chunk[written..]),
                    Err(e) => Err(e),
                };
                match attempt {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        match PushError::failed_write(&e) {
                            PushError::Broken(reason) => inner.write_failed(reason).await,
                            PushError::Fatal(reason) => inner.shut_down(reason),
                        }
                        return;
                    }
                }
            }
        }
    }
}

/// Writes what callers queued, batching whatever is waiting; `None` asks it to close the sink.
async fn write_loop(inner: Arc<Inner>, mut sink: Box<dyn TransportSink>, mut rx: mpsc::Receiver<Option<Outgoing>>) {
    // Grown by the first batch (stdio callers mostly write through the direct path).
    let mut batch: Vec<Outgoing> = Vec::new();
    let mut closing = false;
    while !closing {
        match rx.recv().await {
            Some(Some(message)) => batch.push(message),
            Some(None) | None => closing = true,
        }
        // Take whatever else is already queued, so concurrent callers share one write.
        while batch.len() < 1024 && !closing {
            match rx.try_recv() {
                Ok(Some(message)) => batch.push(message),
                Ok(None) => closing = true,
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            if let Err(e) = sink.send(&batch).await {
                let reason = format!("could not write to the server: {e}");
                match e {
                    TransportError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
                        inner.write_failed(reason).await;
                    }
                    _ => inner.shut_down(reason),
                }
                closing = true;
            }
            batch.clear();
        }
    }
    if let Some(direct) = &inner.direct {
        // Let what callers already wrote reach the server before its stdin closes.
        for _ in 0..200 {
            if direct.drained() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if let Err(e) = sink.close().await {
        tracing::warn!(server = %inner.options.label, "closing the transport: {e}");
    }
}

async fn read_loop(inner: Arc<Inner>, mut stream: Box<dyn TransportStream>) {
    let label = inner.options.label.clone();
    loop {
        match stream.recv().await {
            Ok(Some(inbound)) => handle_inbound(&inner, inbound),
            Ok(None) => {
                let reason = stream.closed_reason().await;
                inner.shut_down(reason);
                return;
            }
            Err(e) if !e.is_fatal() => tracing::warn!(server = %label, "skipped a message: {e}"),
            Err(e) => {
                let reason = format!("{e}; {}", stream.closed_reason().await);
                inner.shut_down(reason);
                return;
            }
        }
    }
}

/// What the transport's stream yielded, or an exchange delivered.
fn handle_inbound(inner: &Arc<Inner>, inbound: Inbound) {
    match inbound {
        Inbound::Message(text) => handle_incoming(inner, &text),
        Inbound::Decoded(message) => handle_message(inner, message),
        Inbound::Failed { id, error } => {
            let pending = inner.session().fail(&id);
            match pending {
                Some(pending) => {
                    let _ = pending.payload.reply.send(Err(ClientError::Transport(error)));
                }
                None => {
                    tracing::debug!(server = %inner.options.label, "a failure for no pending request ({id:?}): {error}")
                }
            }
        }
    }
}

fn handle_incoming(inner: &Arc<Inner>, text: &str) {
    let label = &inner.options.label;
    let message = match Message::decode_str(text) {
        Ok(m) => m,
        Err(e) => {
            let shown: String = text.chars().take(200).collect();
            tracing::warn!(server = %label, "skipped a line that is not JSON-RPC ({e}): {shown}");
            if let Some(id) = e.id.clone() {
                inner.send_line(Outgoing::response(encode_error(id.clone(), e.to_error_object()), id));
            }
            return;
        }
    };
    handle_message(inner, message);
}

fn handle_message(inner: &Arc<Inner>, message: Message) {
    let label = &inner.options.label;
    let incoming = inner.session().receive(message);
    match incoming {
        Incoming::Response { payload, outcome, method, .. } => {
            let reply = outcome.map_err(|error| ClientError::Server { method, error: Box::new(error) });
            let _ = payload.reply.send(reply);
        }
        Incoming::UnmatchedResponse { id } => {
            tracing::debug!(server = %label, "a response to no pending request (id {id:?}); ignored");
        }
        Incoming::ServerReportedError(error) => {
            tracing::warn!(server = %label, "the server reported an error without an id: {error}");
        }
        Incoming::InvalidRequest { reply } => inner.send_line(reply),
        Incoming::Request { id, request } => answer_server_request(inner, id, request),
        Incoming::Notification(notification) => {
            match &notification {
                ServerNotification::Progress(progress) => {
                    let mut session = inner.session();
                    if let Some(waiter) = session.pending_mut(&progress.progress_token)
                        && waiter.progress.is_some()
                    {
                        waiter.progressed(Instant::now());
                        if let Some(tx) = &waiter.progress {
                            let _ = tx.send(progress.clone());
                        }
                    }
                    return;
                }
                ServerNotification::Log(log) => {
                    tracing::info!(server = %label, level = %log.level, "server log: {}", log.data);
                }
                _ => {}
            }
            // No subscriber is fine: nobody asked.
            let _ = inner.notifications.send(notification);
        }
    }
}

fn answer_server_request(inner: &Arc<Inner>, id: RequestId, request: ServerRequest) {
    match request {
        ServerRequest::Ping => inner.send_line(reply_line(id, Ok(serde_json::json!({})))),
        ServerRequest::Unknown { method } => inner.send_line(reply_line::<Value>(
            id,
            Err(ErrorObject::new(error_codes::METHOD_NOT_FOUND, format!("Method not found: {method}"))),
        )),
        request => {
            // Handlers may ask a person; never block the reader on them.
            let inner = Arc::clone(inner);
            tokio::spawn(async move {
                let handler = Arc::clone(&inner.options.handler);
                let line = match request {
                    ServerRequest::ListRoots => reply_line(id, handler.list_roots().await),
                    ServerRequest::CreateMessage(params) => reply_line(id, handler.create_message(params).await),
                    ServerRequest::Elicit(params) => {
                        let asking = Asking::start(&inner);
                        let answer = handler.elicit(params).await;
                        drop(asking);
                        reply_line(id, answer)
                    }
                    ServerRequest::Ping | ServerRequest::Unknown { .. } => return,
                };
                inner.send_line(line);
            });
        }
    }
}

/// Whether a failed `server/discover` means "not a 2026-07-28 server" (so `initialize` may
/// follow) rather than "no server" (the connection is gone; a 401 needs credentials).
fn discover_refused(error: &ClientError) -> bool {
    match error {
        ClientError::Server { .. } | ClientError::Timeout { .. } | ClientError::BadResult { .. } => true,
        // An HTTP server that does not route the method answers with a status; credentials
        // refused are not a refusal of the method.
        ClientError::Transport(e @ (TransportError::HttpStatus { .. } | TransportError::NoAnswer(_))) => {
            !e.is_auth_refusal()
        }
        ClientError::Session(SessionError::Negotiation(_) | SessionError::BadInitializeResult(_)) => true,
        _ => false,
    }
}

/// Whether a failed `initialize` means "not a handshake-era server any more" (so
/// `server/discover` may follow) rather than "no server". No answer in time is not a refusal:
/// the startup budget is spent.
fn initialize_refused(error: &ClientError) -> bool {
    match error {
        ClientError::Server { .. } | ClientError::BadResult { .. } => true,
        ClientError::Transport(e @ (TransportError::HttpStatus { .. } | TransportError::NoAnswer(_))) => {
            !e.is_auth_refusal()
        }
        ClientError::Session(SessionError::Negotiation(_) | SessionError::BadInitializeResult(_)) => true,
        _ => false,
    }
}

fn reply_line<T: Serialize>(id: RequestId, result: Result<T, ErrorObject>) -> Outgoing {
    let text = match result {
        Ok(result) => encode_result(id.clone(), &result),
        Err(error) => encode_error(id.clone(), error),
    };
    Outgoing::response(text, id)
}
