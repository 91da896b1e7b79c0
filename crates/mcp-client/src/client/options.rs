//! The options of a connection and of one request, and their defaults.

use std::sync::Arc;
use std::time::Duration;

use mcp_protocol::{ClientCapabilities, Implementation, ProgressNotificationParams, ProtocolVersion};
use tokio::sync::mpsc;

use crate::handler::{DecliningHandler, ServerRequestHandler};
use crate::observe::RequestObserver;

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
    /// Watches every request this connection sends (telemetry); `None`, the default, costs
    /// nothing.
    pub observer: Option<Arc<dyn RequestObserver>>,
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
            .field("observed", &self.observer.is_some())
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
            observer: None,
        }
    }
}

/// Progress of a request, as the server reported it.
pub type Progress = ProgressNotificationParams;

/// Room a request's progress channel is best made with ([`RequestOptions::progress`]): reports
/// that find it full are dropped, never queued without end.
pub const PROGRESS_BACKLOG: usize = 64;

/// Per-request options.
#[derive(Debug, Default)]
pub struct RequestOptions {
    /// Overrides the connection's request timeout.
    pub timeout: Option<Duration>,
    /// Where progress notifications for this request go (a progress token is sent).
    pub progress: Option<mpsc::Sender<Progress>>,
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
    /// At most this many bytes of answers in all (each page's JSON as it came). What a page
    /// holds is kept as values several times its size in memory: a listing may not amount to
    /// more than two of the largest messages a transport takes.
    pub max_bytes: usize,
}

impl Default for ListLimits {
    fn default() -> Self {
        Self { max_pages: 100, max_items: 10_000, max_bytes: 32 << 20 }
    }
}

/// Default of [`ClientOptions::notification_capacity`]. The channel holds this many slots for
/// every connection from its start (about 200 bytes each, 55 KiB per server at 256), and a
/// subscriber that falls behind by more loses the oldest (the server set then re-lists, in case
/// a change was among them).
pub const DEFAULT_NOTIFICATION_CAPACITY: usize = 32;

/// Default of [`ClientOptions::max_backlog_bytes`].
pub const DEFAULT_MAX_BACKLOG_BYTES: usize = 64 * 1024 * 1024;
