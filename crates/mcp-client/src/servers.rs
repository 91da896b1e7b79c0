//! Connecting to many configured servers at once.
//!
//! [`connect_all`] starts every enabled server concurrently, each under its own startup
//! timeout (opening the transport, the session and the full `tools/list` together; a server
//! that does not declare the `tools` capability is connected with no tools, unasked), so one
//! slow or broken server never holds up the others. Each ends up [`ServerState::Connected`],
//! `Failed` with a reason (`needs-auth` when a remote server refused us for lack of
//! credentials), or `Disabled`. Sessions open in [`crate::Era::Auto`]: `server/discover`,
//! else `initialize`. A server that fails is stopped at once (its process group killed);
//! [`close_all`] closes the rest gracefully and reaps them.
//!
//! How a server is reached is its [`Connector`]: `mcp-transport` has them for stdio, HTTP and
//! WebSocket, and any transport of your own works the same way. Here the in-memory transport
//! plays a server that never answers, so it fails its startup timeout:
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//! use mcp_client::{ConnectOptions, Connector, Opened, ServerSpec, TransportError, close_all, connect_all, memory_pair};
//!
//! #[derive(Debug)]
//! struct Silent;
//! #[async_trait::async_trait]
//! impl Connector for Silent {
//!     async fn open(&self, _name: &str) -> Result<Opened, TransportError> {
//!         let (transport, peer) = memory_pair();
//!         std::mem::forget(peer); // keep the other end open, unanswered
//!         Ok(Opened::new(transport))
//!     }
//! }
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() {
//! let mut spec = ServerSpec::new("quiet", Arc::new(Silent));
//! spec.startup_timeout = Duration::from_millis(50);
//! let connections = connect_all(vec![spec], &ConnectOptions::default()).await;
//! assert_eq!(connections[0].state().label(), "failed");
//! close_all(connections).await;
//! # }
//! ```

use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ProtocolVersion, ServerNotification, Tool};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;
use tokio::task::JoinSet;

use crate::client::{Client, ClientError, ClientOptions, Era, ListLimits, RequestOptions};
use crate::handler::ServerRequests;
use crate::transport::{Transport, TransportError};

/// Default time a server gets to start: spawn, initialize and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time one tool call may take without progress.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);
/// Default time one tool call may take in all while it reports progress.
pub const DEFAULT_MAX_TOOL_TIME: Duration = Duration::from_secs(15 * 60);

/// Where a server's own diagnostics can be read when it fails (a stdio server's stderr).
pub trait StderrSource: Send + Sync {
    /// Its last `n` lines, joined for an error message (empty when it said nothing).
    fn last_lines(&self, n: usize) -> String;
}

/// A transport just opened by a [`Connector`].
pub struct Opened {
    /// The transport.
    pub transport: Box<dyn Transport>,
    /// The server's diagnostics, for failure reports.
    pub stderr: Option<Arc<dyn StderrSource>>,
}

impl fmt::Debug for Opened {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Opened").field("stderr", &self.stderr.is_some()).finish_non_exhaustive()
    }
}

impl Opened {
    /// A transport without diagnostics.
    pub fn new(transport: impl Transport + 'static) -> Self {
        Self { transport: Box::new(transport), stderr: None }
    }
}

/// How to reach one server: opens a fresh transport each time it is asked (a restart or a
/// reconnect asks again). The port through which any transport, including one written outside
/// this workspace, joins the multi-server layer.
#[async_trait]
pub trait Connector: fmt::Debug + Send + Sync {
    /// Opens a transport to the server configured as `name` (for labels and logs). Runs
    /// under the server's startup timeout.
    async fn open(&self, name: &str) -> Result<Opened, TransportError>;

    /// Whether the server is a process on this machine (stdio) rather than a remote one.
    fn is_local(&self) -> bool {
        false
    }
}

/// One configured server.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct ServerSpec {
    /// Its configured name (labels logs; the tool pool names its tools after it).
    pub name: String,
    /// How to reach it.
    pub connector: Arc<dyn Connector>,
    /// Disabled servers are reported, not started.
    pub enabled: bool,
    /// Time to start, initialize and list tools.
    pub startup_timeout: Duration,
    /// Time one tool call may take without news: progress notifications restart it.
    pub tool_timeout: Duration,
    /// Time one tool call may take in all, however much progress it reports (at least
    /// `tool_timeout`).
    pub max_tool_time: Duration,
    /// Its own request handler and declared capabilities (else [`ConnectOptions::client`]'s).
    pub requests: Option<ServerRequests>,
    /// How its session opens, in place of [`ConnectOptions`]' era: for a server whose answer
    /// is remembered, [`Era::remembering`] (`None`: the options' era).
    pub era: Option<Era>,
}

impl ServerSpec {
    /// An enabled server with default timeouts.
    pub fn new(name: impl Into<String>, connector: Arc<dyn Connector>) -> Self {
        Self {
            name: name.into(),
            connector,
            enabled: true,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
            max_tool_time: DEFAULT_MAX_TOOL_TIME,
            requests: None,
            era: None,
        }
    }
}

/// Options shared by every connection.
///
/// The default speaks [`Era::Auto`]: `server/discover` first, `initialize` when the server
/// does not know it, so one configuration entry works with servers of both eras.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// Client identity, capabilities and handler; its label and timeouts are set per server.
    pub client: ClientOptions,
    /// Limits on each server's `tools/list`.
    pub list_limits: ListLimits,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions { era: Era::Auto, ..ClientOptions::default() },
            list_limits: ListLimits::default(),
        }
    }
}

/// Where a server stands after [`connect_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerState {
    /// Initialized and its tools listed.
    Connected {
        /// The negotiated revision.
        protocol: ProtocolVersion,
        /// How many tools it listed.
        tools: usize,
        /// Time from spawn to the end of `tools/list`.
        elapsed: Duration,
    },
    /// It could not be started, initialized or listed.
    Failed {
        /// What went wrong, for the user.
        reason: String,
        /// Time until it was given up.
        elapsed: Duration,
        /// The server refused us for lack of credentials (HTTP 401 or 403): shown as
        /// `needs-auth`, because the fix is a token, not a restart.
        needs_auth: bool,
    },
    /// Disabled in the configuration; not started.
    Disabled,
    /// Connecting for the first time.
    Pending,
    /// It went away (exited, dropped, failed to start) and is being brought back.
    Reconnecting {
        /// Which attempt comes next (1 for the first restart).
        attempt: u32,
        /// When it comes, from the moment the state was entered.
        retry_in: Duration,
        /// Why it went away.
        reason: String,
    },
}

impl ServerState {
    /// `connected`, `needs-auth`, `failed`, `disabled`, `pending` or `reconnecting`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Connected { .. } => "connected",
            Self::Failed { needs_auth: true, .. } => "needs-auth",
            Self::Failed { .. } => "failed",
            Self::Disabled => "disabled",
            Self::Pending => "pending",
            Self::Reconnecting { .. } => "reconnecting",
        }
    }

    /// Time spent connecting (none for a server that has not settled).
    pub fn elapsed(&self) -> Option<Duration> {
        match self {
            Self::Connected { elapsed, .. } | Self::Failed { elapsed, .. } => Some(*elapsed),
            _ => None,
        }
    }

    /// Whether the server is on its way (connecting, or coming back): a caller may wait.
    pub fn is_transient(&self) -> bool {
        matches!(self, Self::Pending | Self::Reconnecting { .. })
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed { reason, .. } => write!(f, "{}: {reason}", self.label()),
            Self::Reconnecting { attempt, retry_in, reason } => {
                write!(f, "reconnecting (attempt {attempt}, next try in {}): {reason}", seconds(*retry_in))
            }
            other => f.write_str(other.label()),
        }
    }
}

/// One server after [`connect_all`]: its state and, when connected, the live client.
pub struct ServerConnection {
    name: String,
    state: ServerState,
    client: Option<Client>,
    tools: Arc<[Tool]>,
    tool_timeout: Duration,
    max_tool_time: Duration,
    /// Subscribed before the tools were listed, so no change announced since is missed.
    notifications: Option<broadcast::Receiver<ServerNotification>>,
    /// A change was announced while the tools were being listed: the listing may be stale.
    stale: bool,
}

impl fmt::Debug for ServerConnection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerConnection")
            .field("name", &self.name)
            .field("state", &self.state)
            .field("tools", &self.tools.len())
            .finish_non_exhaustive()
    }
}

impl ServerConnection {
    /// A connected server: its client and the tools it listed. For connections made outside
    /// [`connect`] (a server in the same process, say).
    pub fn connected(name: impl Into<String>, client: Client, tools: Vec<Tool>, tool_timeout: Duration) -> Self {
        let protocol = client.protocol_version().unwrap_or(ProtocolVersion::LATEST);
        let state = ServerState::Connected { protocol, tools: tools.len(), elapsed: Duration::ZERO };
        let notifications = Some(client.subscribe());
        // Changes before now are unknown to us: treat the listing as possibly stale.
        Self {
            name: name.into(),
            state,
            client: Some(client),
            tools: tools.into(),
            tool_timeout,
            max_tool_time: tool_timeout,
            notifications,
            stale: true,
        }
    }

    /// A server without a connection (failed or disabled).
    pub fn unavailable(name: impl Into<String>, state: ServerState, tool_timeout: Duration) -> Self {
        Self {
            name: name.into(),
            state,
            client: None,
            tools: Arc::new([]),
            tool_timeout,
            max_tool_time: tool_timeout,
            notifications: None,
            stale: false,
        }
    }

    fn without_client(spec: &ServerSpec, state: ServerState) -> Self {
        Self::unavailable(spec.name.clone(), state, spec.tool_timeout)
    }

    /// The configured name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where it stands.
    pub fn state(&self) -> &ServerState {
        &self.state
    }

    /// Whether it is connected.
    pub fn is_connected(&self) -> bool {
        matches!(self.state, ServerState::Connected { .. })
    }

    /// The live client, when connected.
    pub fn client(&self) -> Option<&Client> {
        self.client.as_ref()
    }

    /// The tools it listed at startup (empty unless connected), shared for the tool pool.
    pub fn tools(&self) -> &Arc<[Tool]> {
        &self.tools
    }

    /// The server's notifications from before its tools were listed on (taken once), and
    /// whether a change was announced while they were being listed.
    pub fn take_notifications(&mut self) -> (Option<broadcast::Receiver<ServerNotification>>, bool) {
        (self.notifications.take(), self.stale)
    }

    /// Its tool-call timeout.
    pub fn tool_timeout(&self) -> Duration {
        self.tool_timeout
    }

    /// Calls tool `tool` (its raw name) under this server's tool timeout.
    pub async fn call_tool(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, ClientError> {
        self.call_tool_with_progress(tool, arguments, None).await
    }

    /// Calls tool `tool` with a progress token: progress goes to `progress`, and each
    /// notification restarts the tool timeout, up to the server's maximum tool time.
    pub async fn call_tool_with_progress(
        &self,
        tool: &str,
        arguments: Option<Map<String, Value>>,
        progress: Option<tokio::sync::mpsc::Sender<crate::client::Progress>>,
    ) -> Result<CallToolResult, ClientError> {
        let client = self.client.as_ref().ok_or_else(|| ClientError::ConnectionClosed {
            reason: format!("server {:?} is not connected ({})", self.name, self.state),
        })?;
        let max_total = progress.as_ref().map(|_| self.max_tool_time.max(self.tool_timeout));
        let options = RequestOptions { timeout: Some(self.tool_timeout), progress, max_total };
        client.call_tool(tool, arguments, options).await
    }

    /// Closes it gracefully (a stdio child gets stdin closed, SIGTERM, SIGKILL) and reaps it.
    pub async fn close(self) {
        if let Some(client) = self.client {
            let _ = client.close().await;
        }
    }
}

/// Whether the server refused us for lack of credentials.
fn needs_auth(error: &ClientError) -> bool {
    matches!(error, ClientError::Transport(e) if e.needs_auth())
}

fn describe_startup_error(error: &ClientError) -> String {
    match error {
        // The transport's own errors already say what happened, where.
        ClientError::Transport(e @ TransportError::HttpStatus { .. }) if e.needs_auth() => {
            format!("{e}; the server wants credentials (headers or a bearer token)")
        }
        ClientError::Transport(e) => e.to_string(),
        // initialize waits up to the startup timeout; the listings after it, as any request,
        // up to the request timeout (`tool_timeout_s`).
        ClientError::Timeout { method, after } => {
            let which = if method == mcp_protocol::methods::INITIALIZE { "startup timeout" } else { "tool_timeout_s" };
            format!("timed out after {} waiting for the answer to {method} ({which})", seconds(*after))
        }
        other => other.to_string(),
    }
}

fn seconds(d: Duration) -> String {
    let s = d.as_secs_f64();
    if s.fract() == 0.0 { format!("{s:.0}s") } else { format!("{s}s") }
}

/// Starts one server and lists its tools, within its startup timeout. Never fails: failure is
/// a [`ServerState::Failed`].
pub async fn connect(spec: ServerSpec, options: &ConnectOptions) -> ServerConnection {
    if !spec.enabled {
        return ServerConnection::without_client(&spec, ServerState::Disabled);
    }
    let started = Instant::now();
    let failed = |reason: String| ServerState::Failed { reason, elapsed: started.elapsed(), needs_auth: false };
    let mut client_options = options.client.clone();
    client_options.label = spec.name.clone();
    client_options.startup_timeout = spec.startup_timeout;
    client_options.request_timeout = spec.tool_timeout;
    if let Some(requests) = &spec.requests {
        client_options.handler = Arc::clone(&requests.handler);
        client_options.capabilities = requests.capabilities.clone();
    }
    if let Some(era) = spec.era {
        client_options.era = era;
    }
    let opened = match tokio::time::timeout(spec.startup_timeout, spec.connector.open(&spec.name)).await {
        Ok(Ok(opened)) => opened,
        Ok(Err(e)) => return ServerConnection::without_client(&spec, failed(e.to_string())),
        Err(_) => {
            let reason = format!("timed out after {} while connecting", seconds(spec.startup_timeout));
            return ServerConnection::without_client(&spec, failed(reason));
        }
    };
    let stderr = opened.stderr;
    let client = Client::start(opened.transport, client_options);
    let mut notifications = client.subscribe();
    let limits = options.list_limits;
    let startup = async {
        client.open().await?;
        client.list_all_tools(limits).await
    };
    // One startup budget for opening the transport and the session together.
    let remaining = spec.startup_timeout.saturating_sub(started.elapsed());
    let outcome = tokio::time::timeout(remaining, startup).await;
    let tools = match outcome {
        Ok(Ok(tools)) => tools,
        Ok(Err(e)) => {
            let mut reason = describe_startup_error(&e);
            if needs_auth(&e) {
                return ServerConnection::without_client(
                    &spec,
                    ServerState::Failed { reason, elapsed: started.elapsed(), needs_auth: true },
                );
            }
            if let Some(stderr) =
                stderr.as_ref().filter(|_| !matches!(e, ClientError::Timeout { .. }) && !reason.contains("stderr"))
            {
                // What the server said on stderr (a missing module, a bad flag) is what the
                // user needs; a server that died has it in the reason already (its transport
                // reads stderr to the end), one that answered badly has it here.
                let tail = stderr.last_lines(5);
                if !tail.is_empty() {
                    reason.push_str("; its last stderr lines: ");
                    reason.push_str(&tail);
                }
            }
            return ServerConnection::without_client(&spec, failed(reason));
        }
        Err(_) => {
            let reason = format!("timed out after {} while starting (startup timeout)", seconds(spec.startup_timeout));
            return ServerConnection::without_client(&spec, failed(reason));
        }
    };
    // Dropping `client` on the failure paths above kills the child's process group at once:
    // a server that did not start properly gets no grace period.
    let Some(protocol) = client.protocol_version() else {
        return ServerConnection::without_client(&spec, failed("the connection closed after initialize".to_owned()));
    };
    let state = ServerState::Connected { protocol, tools: tools.len(), elapsed: started.elapsed() };
    // What arrived while listing came before the last page's answer; a change among it may
    // have split the pages, so the listing counts as stale (one re-list), conservatively.
    let mut stale = false;
    loop {
        match notifications.try_recv() {
            Ok(ServerNotification::ToolsListChanged) | Err(TryRecvError::Lagged(_)) => stale = true,
            Ok(_) => {}
            Err(_) => break,
        }
    }
    ServerConnection {
        name: spec.name,
        state,
        client: Some(client),
        tools: tools.into(),
        tool_timeout: spec.tool_timeout,
        max_tool_time: spec.max_tool_time,
        notifications: Some(notifications),
        stale,
    }
}

/// Connects to every server concurrently; the result is in the order of `specs`.
///
/// Must run inside a Tokio runtime. Each server has its own startup timeout, so this takes as
/// long as the slowest server's startup or its timeout, whichever is shorter.
pub async fn connect_all(specs: Vec<ServerSpec>, options: &ConnectOptions) -> Vec<ServerConnection> {
    let mut set = JoinSet::new();
    let mut slots: Vec<Option<ServerConnection>> = Vec::with_capacity(specs.len());
    let names: Vec<(String, Duration)> = specs.iter().map(|s| (s.name.clone(), s.tool_timeout)).collect();
    for (index, spec) in specs.into_iter().enumerate() {
        slots.push(None);
        let options = options.clone();
        set.spawn(async move { (index, connect(spec, &options).await) });
    }
    while let Some(joined) = set.join_next().await {
        // A task can only fail to join by panicking; its slot stays empty and is reported below.
        if let Ok((index, connection)) = joined
            && let Some(slot) = slots.get_mut(index)
        {
            *slot = Some(connection);
        }
    }
    slots
        .into_iter()
        .zip(names)
        .map(|(slot, (name, tool_timeout))| {
            slot.unwrap_or_else(|| {
                let reason = "internal error: the connection task panicked".to_owned();
                let state = ServerState::Failed { reason, elapsed: Duration::ZERO, needs_auth: false };
                ServerConnection::unavailable(name, state, tool_timeout)
            })
        })
        .collect()
}

/// Closes every connection concurrently and waits until all are closed and reaped.
pub async fn close_all(connections: Vec<ServerConnection>) {
    close_all_while(connections, || ()).await;
}

/// Closes every connection concurrently while `work` runs: each close is begun first (a stdio
/// server's stdin is closed, so it exits meanwhile), then `work` runs, then all are waited for
/// until closed and reaped. A command that prints what it got after closing its servers has
/// their exits overlap its output instead of following it.
pub async fn close_all_while<T>(connections: Vec<ServerConnection>, work: impl FnOnce() -> T) -> T {
    let mut set = JoinSet::new();
    for connection in connections {
        set.spawn(connection.close());
    }
    if !set.is_empty() {
        // Lets the closes (and the writer tasks they wake) run up to their first wait, the
        // child's exit: on a current-thread runtime they run only when this task yields.
        tokio::task::yield_now().await;
    }
    let result = work();
    while set.join_next().await.is_some() {}
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A start that timed out names the limit that fired: the startup timeout for initialize,
    /// the request timeout for the listings after it.
    #[test]
    fn a_start_timeout_names_the_limit_that_fired() {
        let timeout = |method: &str| ClientError::Timeout { method: method.to_owned(), after: Duration::from_secs(3) };
        assert!(describe_startup_error(&timeout("initialize")).ends_with("(startup timeout)"));
        assert!(describe_startup_error(&timeout("tools/list")).ends_with("(tool_timeout_s)"));
    }
}
