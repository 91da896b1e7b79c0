//! Connecting to many configured servers at once.
//!
//! [`connect_all`] starts every enabled server concurrently, each under its own startup
//! timeout (opening the session and the full `tools/list` together), so one slow or broken
//! server never holds up the others. Each ends up [`ServerState::Connected`], `Failed` with a
//! reason (`needs-auth` when a remote server refused us for lack of credentials), or
//! `Disabled`. Sessions open in [`crate::Era::Auto`]: `server/discover`, else `initialize`.
//! A server that fails is stopped at once (its process group killed); [`close_all`] closes the
//! rest gracefully and reaps them.
//!
//! ```no_run
//! use mcp_transport::servers::{ConnectOptions, ServerSpec, close_all, connect_all};
//! use mcp_transport::StdioConfig;
//!
//! # async fn demo() {
//! let specs = vec![ServerSpec::stdio("fx", StdioConfig::new("mcp-fixture-server", ["echo"]))];
//! let connections = connect_all(specs, &ConnectOptions::default()).await;
//! for c in &connections {
//!     println!("{}: {} ({} tools)", c.name(), c.state(), c.tools().len());
//! }
//! close_all(connections).await;
//! # }
//! ```

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_protocol::{CallToolResult, ProtocolVersion, Tool};
use serde_json::{Map, Value};
use tokio::task::JoinSet;

use crate::auth::Authorizer;
use crate::backoff::Backoff;
use crate::client::{Client, ClientError, ClientOptions, Era, ListLimits, RequestOptions};
use crate::http::{HTTP_TRANSPORT_ERROR, HttpConfig, HttpMode, HttpTransport};
use crate::stdio::{StdioConfig, StdioTransport};
use crate::ws::{WebSocketConfig, WebSocketTransport};

/// Default time a server gets to start: spawn, initialize and list its tools.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Default time one tool call may take.
pub const DEFAULT_TOOL_TIMEOUT: Duration = Duration::from_secs(60);

/// How to reach a server.
#[derive(Clone)]
pub enum ServerTarget {
    /// A child process speaking stdio.
    Stdio(StdioConfig),
    /// A remote server: `ws://` and `wss://` URLs over WebSocket, anything else over
    /// Streamable HTTP (falling back to the 2024-11-05 HTTP+SSE transport on a 4xx).
    Remote {
        /// Its endpoint.
        url: String,
        /// HTTP headers to send (often credentials).
        headers: BTreeMap<String, String>,
    },
}

impl fmt::Debug for ServerTarget {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Stdio(config) => f.debug_tuple("Stdio").field(config).finish(),
            // Header values are often tokens: never print them.
            Self::Remote { url, headers } => f
                .debug_struct("Remote")
                .field("url", url)
                .field("headers", &headers.keys().collect::<Vec<_>>())
                .finish_non_exhaustive(),
        }
    }
}

/// One configured server.
#[derive(Debug, Clone)]
pub struct ServerSpec {
    /// Its configured name (labels logs; the tool pool names its tools after it).
    pub name: String,
    /// How to reach it.
    pub target: ServerTarget,
    /// Disabled servers are reported, not started.
    pub enabled: bool,
    /// Time to start, initialize and list tools.
    pub startup_timeout: Duration,
    /// Time one tool call may take.
    pub tool_timeout: Duration,
}

impl ServerSpec {
    /// An enabled stdio server with default timeouts.
    pub fn stdio(name: impl Into<String>, config: StdioConfig) -> Self {
        Self {
            name: name.into(),
            target: ServerTarget::Stdio(config),
            enabled: true,
            startup_timeout: DEFAULT_STARTUP_TIMEOUT,
            tool_timeout: DEFAULT_TOOL_TIMEOUT,
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
    /// How remote servers are reconnected.
    pub reconnect: Backoff,
    /// Settings of remote servers, by server name, that [`ServerTarget::Remote`] has no room
    /// for (it carries only the URL and headers).
    pub remote: BTreeMap<String, RemoteOptions>,
    /// Authorizers (OAuth) of HTTP servers, by server name.
    pub authorizers: BTreeMap<String, Arc<dyn Authorizer>>,
}

impl Default for ConnectOptions {
    fn default() -> Self {
        Self {
            client: ClientOptions { era: Era::Auto, ..ClientOptions::default() },
            list_limits: ListLimits::default(),
            reconnect: Backoff::default(),
            remote: BTreeMap::new(),
            authorizers: BTreeMap::new(),
        }
    }
}

/// Settings of one remote server beyond its URL and headers.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RemoteOptions {
    /// The name of an environment variable holding a bearer token, sent as
    /// `Authorization: Bearer ...` (the token never appears in configuration).
    pub bearer_token_env: Option<String>,
    /// Which HTTP transport (`LegacySse` for a server configured as `type = "sse"`).
    pub http_mode: HttpMode,
}

impl RemoteOptions {
    /// Options with a bearer token read from environment variable `var`.
    pub fn bearer_token_env(mut self, var: impl Into<String>) -> Self {
        self.bearer_token_env = Some(var.into());
        self
    }

    /// Options with the given HTTP transport.
    pub fn http_mode(mut self, mode: HttpMode) -> Self {
        self.http_mode = mode;
        self
    }
}

/// Where a server stands after [`connect_all`].
#[derive(Debug, Clone, PartialEq, Eq)]
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
}

impl ServerState {
    /// `connected`, `needs-auth`, `failed` or `disabled`. (`connecting` is the state of a
    /// server whose [`connect`] has not returned yet.)
    pub fn label(&self) -> &'static str {
        match self {
            Self::Connected { .. } => "connected",
            Self::Failed { needs_auth: true, .. } => "needs-auth",
            Self::Failed { .. } => "failed",
            Self::Disabled => "disabled",
        }
    }

    /// Time spent connecting (none for a disabled server).
    pub fn elapsed(&self) -> Option<Duration> {
        match self {
            Self::Connected { elapsed, .. } | Self::Failed { elapsed, .. } => Some(*elapsed),
            Self::Disabled => None,
        }
    }
}

impl fmt::Display for ServerState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Failed { reason, .. } => write!(f, "{}: {reason}", self.label()),
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
    fn without_client(spec: &ServerSpec, state: ServerState) -> Self {
        Self { name: spec.name.clone(), state, client: None, tools: Arc::new([]), tool_timeout: spec.tool_timeout }
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
        let client = self.client.as_ref().ok_or_else(|| ClientError::ConnectionClosed {
            reason: format!("server {:?} is not connected ({})", self.name, self.state),
        })?;
        client.call_tool(tool, arguments, RequestOptions { timeout: Some(self.tool_timeout), progress: None }).await
    }

    /// Closes it gracefully (a stdio child gets stdin closed, SIGTERM, SIGKILL) and reaps it.
    pub async fn close(self) {
        if let Some(client) = self.client {
            let _ = client.close().await;
        }
    }
}

/// Whether the server refused for lack of credentials (the HTTP transport's error answer
/// carries the status).
fn needs_auth(error: &ClientError) -> bool {
    matches!(error, ClientError::Server { error, .. } if needs_auth_error(error))
}

fn needs_auth_error(error: &mcp_protocol::jsonrpc::ErrorObject) -> bool {
    error.code == HTTP_TRANSPORT_ERROR
        && error
            .data
            .as_ref()
            .and_then(|d| d.get("httpStatus"))
            .and_then(serde_json::Value::as_u64)
            .is_some_and(|s| s == 401 || s == 403)
}

fn describe_startup_error(error: &ClientError) -> String {
    match error {
        // The HTTP transport's own errors already say what happened, where.
        ClientError::Server { error, .. } if error.code == HTTP_TRANSPORT_ERROR => {
            let needs_login =
                error.data.as_ref().and_then(|d| d.get("needsLogin")).and_then(Value::as_bool).unwrap_or(false);
            if needs_auth_error(error) && !needs_login {
                format!("{}; the server wants credentials (headers or a bearer token)", error.message)
            } else {
                error.message.clone()
            }
        }
        ClientError::Timeout { method, after } => {
            format!("timed out after {} waiting for the answer to {method} (startup timeout)", seconds(*after))
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
    let (client, stderr) = match &spec.target {
        ServerTarget::Stdio(config) => {
            let mut stdio = config.clone();
            stdio.label = spec.name.clone();
            let transport = match StdioTransport::spawn(stdio) {
                Ok(t) => t,
                Err(e) => return ServerConnection::without_client(&spec, failed(e.to_string())),
            };
            let stderr = transport.stderr_tail();
            (Client::start(transport, client_options), Some(stderr))
        }
        ServerTarget::Remote { url, headers } if url.starts_with("ws://") || url.starts_with("wss://") => {
            let mut config = WebSocketConfig::new(url.clone());
            config.headers = headers.clone();
            config.reconnect = options.reconnect;
            if let Some(remote) = options.remote.get(&spec.name) {
                config.bearer_token_env = remote.bearer_token_env.clone();
            }
            match tokio::time::timeout(spec.startup_timeout, WebSocketTransport::connect(config)).await {
                Ok(Ok(t)) => (Client::start(t, client_options), None),
                Ok(Err(e)) => return ServerConnection::without_client(&spec, failed(e.to_string())),
                Err(_) => {
                    let reason = format!("timed out after {} while connecting", seconds(spec.startup_timeout));
                    return ServerConnection::without_client(&spec, failed(reason));
                }
            }
        }
        ServerTarget::Remote { url, headers } => {
            let mut config = HttpConfig::new(url.clone());
            config.headers = headers.clone();
            config.label = spec.name.clone();
            config.reconnect = options.reconnect;
            if let Some(remote) = options.remote.get(&spec.name) {
                config.bearer_token_env = remote.bearer_token_env.clone();
                config.mode = remote.http_mode;
            }
            config.auth = options.authorizers.get(&spec.name).cloned();
            let transport = match HttpTransport::new(config) {
                Ok(t) => t,
                Err(e) => return ServerConnection::without_client(&spec, failed(e.to_string())),
            };
            (Client::start(transport, client_options), None)
        }
    };
    let limits = options.list_limits;
    let startup = async {
        client.open().await?;
        client.list_all_tools(limits).await
    };
    let outcome = tokio::time::timeout(spec.startup_timeout, startup).await;
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
                // The write may fail before the reader sees the exit; what the server said on
                // stderr (a missing module, a bad flag) is what the user needs. Give the stderr
                // reader a moment to catch up.
                tokio::time::sleep(Duration::from_millis(100)).await;
                let tail = stderr.last(5);
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
    ServerConnection {
        name: spec.name,
        state,
        client: Some(client),
        tools: tools.into(),
        tool_timeout: spec.tool_timeout,
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
            slot.unwrap_or_else(|| ServerConnection {
                name,
                state: ServerState::Failed {
                    reason: "internal error: the connection task panicked".to_owned(),
                    elapsed: Duration::ZERO,
                    needs_auth: false,
                },
                client: None,
                tools: Arc::new([]),
                tool_timeout,
            })
        })
        .collect()
}

/// Closes every connection concurrently and waits until all are closed and reaped.
pub async fn close_all(connections: Vec<ServerConnection>) {
    let mut set = JoinSet::new();
    for connection in connections {
        set.spawn(connection.close());
    }
    while set.join_next().await.is_some() {}
}

#[cfg(test)]
#[cfg(unix)]
mod tests {
    use super::*;

    fn fixture() -> String {
        mcp_fixtures::server_binary().unwrap().display().to_string()
    }

    fn spec(name: &str, command: &str, args: &[&str]) -> ServerSpec {
        let mut spec = ServerSpec::stdio(name, StdioConfig::new(command, args.iter().copied()));
        spec.startup_timeout = Duration::from_secs(10);
        spec
    }

    #[tokio::test]
    async fn connects_all_concurrently_with_per_server_outcomes() {
        let fx = fixture();
        let mut slow = spec("slow", "sh", &["-c", &format!("sleep 30; exec {fx} echo")]);
        slow.startup_timeout = Duration::from_millis(500);
        let mut off = spec("off", &fx, &["echo"]);
        off.enabled = false;
        let remote = ServerSpec {
            target: ServerTarget::Remote { url: "ws://127.0.0.1:9/mcp".into(), headers: BTreeMap::new() },
            ..spec("remote", "unused", &[])
        };
        let specs = vec![
            spec("good", &fx, &["echo"]),
            spec("missing", "/nonexistent/mcp-server", &[]),
            slow,
            off,
            remote,
            spec("crashing", "sh", &["-c", "echo oops >&2; exit 7"]),
        ];
        let started = Instant::now();
        let quick =
            Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50), max_attempts: 3 };
        let connections = connect_all(specs, &ConnectOptions { reconnect: quick, ..ConnectOptions::default() }).await;
        assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
        let states: Vec<(&str, &str)> = connections.iter().map(|c| (c.name(), c.state().label())).collect();
        assert_eq!(
            states,
            [
                ("good", "connected"),
                ("missing", "failed"),
                ("slow", "failed"),
                ("off", "disabled"),
                ("remote", "failed"),
                ("crashing", "failed")
            ]
        );
        let ServerState::Connected { tools, protocol, .. } = connections[0].state() else { unreachable!() };
        assert_eq!(*tools, connections[0].tools().len());
        assert!(*tools >= 5);
        assert_eq!(*protocol, ProtocolVersion::LATEST);
        let reason = |i: usize| connections[i].state().to_string();
        assert!(reason(1).contains("/nonexistent/mcp-server"), "{}", reason(1));
        assert!(reason(2).contains("timed out after 0.5s"), "{}", reason(2));
        assert!(reason(4).contains("ws://127.0.0.1:9/mcp"), "{}", reason(4));
        assert!(reason(5).contains("oops") || reason(5).contains("status 7"), "{}", reason(5));

        let result = connections[0].call_tool("echo", serde_json::json!({"text": "hi"}).as_object().cloned()).await;
        assert_eq!(result.unwrap().joined_text(), "hi");
        let err = connections[1].call_tool("echo", None).await.unwrap_err();
        assert!(err.to_string().contains("not connected"), "{err}");
        close_all(connections).await;
    }

    #[tokio::test]
    async fn tool_timeout_applies_to_calls() {
        let fx = fixture();
        let mut s = spec("fx", &fx, &["echo"]);
        s.tool_timeout = Duration::from_millis(200);
        let c = connect(s, &ConnectOptions::default()).await;
        assert!(c.is_connected(), "{}", c.state());
        let err = c.call_tool("sleep", serde_json::json!({"ms": 3000}).as_object().cloned()).await.unwrap_err();
        assert!(matches!(err, ClientError::Timeout { .. }), "{err}");
        c.close().await;
    }

    #[test]
    fn remote_headers_are_not_printed() {
        let target = ServerTarget::Remote {
            url: "https://x.invalid".into(),
            headers: BTreeMap::from([("Authorization".to_owned(), "Bearer secret".to_owned())]),
        };
        let shown = format!("{target:?}");
        assert!(shown.contains("Authorization") && !shown.contains("secret"), "{shown}");
    }
}
