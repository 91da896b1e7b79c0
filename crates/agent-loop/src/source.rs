//! Where MCP tools come from: the [`ToolSource`] port, and its adapter over the servers of
//! `mcp_client::ServerSet`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use mcp_client::{ProcessExit, ServerSet, ServerState};
use mcp_protocol::{CallToolResult, ProgressNotificationParams, ReadResourceResult, Resource, ResourceTemplate};
use policy::Policy;
use serde_json::{Map, Value};
use tokio::sync::mpsc;
use tool_pool::ServerTools;

use crate::source_error::{Operation, SourceError};

/// Every server's current tools, and a generation per server that changes whenever that
/// server's listing changes.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Connected servers' tools.
    pub servers: Vec<ServerTools>,
    /// Generation of each server's listing.
    pub generations: BTreeMap<String, u64>,
    /// The policy to build the pool under, with its version, when the source decides it (a
    /// runtime whose configuration is reloaded); `None` keeps the agent's own.
    pub policy: Option<(u64, Arc<Policy>)>,
}

/// Why a server's tools are not in the listing now, as its source knows it: what a call to
/// one of them is told instead of "unknown tool" ([`crate::Refusal::ServerGone`]).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Departure {
    /// Where the server stands, and so whether it is coming back.
    pub state: DepartureState,
    /// How its process ended, when it was a process that ended.
    pub exit: Option<ProcessExit>,
    /// The source's own account (a failure's reason, with the server's last stderr lines):
    /// server-controlled text, cleaned where it is shown.
    pub detail: Option<String>,
}

/// Where a server whose tools left the listing stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum DepartureState {
    /// It is being restarted (or reconnected); this attempt comes next.
    Returning {
        /// The attempt, 1 for the first.
        attempt: u32,
    },
    /// It is connecting for the first time.
    Starting,
    /// It failed (to start, or to come back often enough) and is not retried until someone asks.
    Failed,
    /// It refused us for lack of credentials: a login or a token would bring it back.
    NeedsAuth,
    /// It is disabled.
    Disabled,
    /// The source does not say why (it was removed, or the source does not tell), or it is
    /// on its way back and not listed yet.
    Gone,
}

impl Departure {
    /// A departure in `state`, without an exit status or an account.
    pub fn new(state: DepartureState) -> Self {
        Self { state, exit: None, detail: None }
    }

    /// With how the server's process ended.
    pub fn with_exit(mut self, exit: Option<ProcessExit>) -> Self {
        self.exit = exit;
        self
    }

    /// With the source's account of it.
    pub fn with_detail(mut self, detail: Option<String>) -> Self {
        self.detail = detail;
        self
    }

    /// Whether it is on its way back by itself (being restarted, or starting).
    pub fn coming_back(&self) -> bool {
        matches!(self.state, DepartureState::Returning { .. } | DepartureState::Starting)
    }
}

impl std::fmt::Display for Departure {
    /// `exited with status 3 and is being restarted (attempt 1): call it again in a moment`,
    /// `exited with status 3 and failed to come back (...); it is not coming back unless the
    /// user reconnects it`, `is disabled; ...`: what happened, then whether it is coming back.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        use DepartureState as S;
        let detail = self.detail.as_deref().map(|d| mcp_safety::text::one_line(d, 300));
        let detail = detail.map(|d| format!(" ({d})")).unwrap_or_default();
        match (&self.exit, self.state) {
            (Some(exit), S::Returning { attempt }) => {
                write!(f, "{exit} and is being restarted (attempt {attempt}): call it again in a moment")
            }
            (None, S::Returning { attempt }) => write!(
                f,
                "lost its connection{detail} and is being reconnected (attempt {attempt}): call it again in a moment"
            ),
            (_, S::Starting) => f.write_str("is still starting: call it again in a moment"),
            (Some(exit), S::Failed) => {
                write!(f, "{exit} and failed to restart{detail}; it is not coming back unless the user reconnects it")
            }
            (None, S::Failed) => {
                write!(f, "failed{detail}; it is not coming back unless the user reconnects it")
            }
            (_, S::NeedsAuth) => write!(
                f,
                "needs authorization{detail}; it is not coming back until the user logs in (or gives it a token)"
            ),
            (_, S::Disabled) => f.write_str("is disabled; it is not coming back unless the user enables it"),
            (Some(exit), S::Gone) => write!(f, "{exit}; it is not coming back in this session"),
            (None, S::Gone) => f.write_str("is not connected now (its host did not say why)"),
        }
    }
}

/// A call on the connection its caller was shown.
#[derive(Debug)]
#[non_exhaustive]
pub struct BoundCall {
    /// The server.
    pub server: String,
    /// The tool's raw name.
    pub tool: String,
    /// The arguments.
    pub arguments: Option<Map<String, Value>>,
    /// The generation of the server's listing the caller was shown: the call goes to that one
    /// or nowhere.
    pub generation: Option<u64>,
    /// Where the server's progress reports go (a progress token is sent).
    pub progress: Option<mpsc::Sender<ProgressNotificationParams>>,
}

impl BoundCall {
    /// A call of `tool` of `server` with `arguments`, bound to nothing in particular.
    pub fn new(server: impl Into<String>, tool: impl Into<String>, arguments: Option<Map<String, Value>>) -> Self {
        Self { server: server.into(), tool: tool.into(), arguments, generation: None, progress: None }
    }
}

/// The MCP side of the loop.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// The current listing, after re-listing servers that announced a change.
    async fn refresh(&self) -> Listing;

    /// The generation of `server`'s listing now (to refuse calls prepared against an older one).
    fn generation(&self, server: &str) -> Option<u64>;

    /// The generation once an announced change has been listed: a source that re-lists on
    /// demand does it here, and a change that left the listing as it was keeps the generation.
    async fn settled_generation(&self, server: &str) -> Option<u64> {
        self.generation(server)
    }

    /// Call a tool under its raw name, within the server's tool timeout, on the generation it
    /// was shown in (a source that knows generations sends nothing when the server's moved
    /// on), with progress. A failure names the server and the cause.
    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError>;

    /// The servers whose resources can be listed now. By default none: a source without
    /// resources.
    async fn resource_servers(&self) -> Vec<String> {
        Vec::new()
    }

    /// `server`'s resources and resource templates. A failure names the server and the cause.
    async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SourceError> {
        Err(no_resources(Operation::ListResources, server))
    }

    /// Reads `uri` of `server`, refusing answers over `max_bytes`. A failure names the server,
    /// the URI and the cause.
    async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        _max_bytes: usize,
    ) -> Result<ReadResourceResult, SourceError> {
        Err(no_resources(Operation::ReadResource { uri: uri.to_owned() }, server))
    }

    /// The `instructions` of the connected servers that sent some (server, text), raw: the loop
    /// cleans, caps and marks them ([`crate::system_prompt`]). By default none.
    fn instructions(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// Why `server` offers no tools now (it exited, is being restarted, failed, needs a login,
    /// is disabled), or `None` when it does or the source does not know it. By default `None`:
    /// the gate then says only that the server left.
    fn departure(&self, _server: &str) -> Option<Departure> {
        None
    }
}

/// What a source without resources answers.
fn no_resources(op: Operation, server: &str) -> SourceError {
    SourceError::Refused { op, server: server.to_owned(), reason: "this source offers no resources".to_owned() }
}

#[async_trait]
impl ToolSource for ServerSet {
    async fn refresh(&self) -> Listing {
        let mut listing = Listing::default();
        for server in ServerSet::refresh(self).await {
            listing.generations.insert(server.name.clone(), server.generation);
            listing.servers.push(ServerTools::new(server.name, server.tools));
        }
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        ServerSet::generation(self, server)
    }

    async fn settled_generation(&self, server: &str) -> Option<u64> {
        ServerSet::settled_generation(self, server).await
    }

    /// Every failure names the tool, its server and the cause (after a crash: the exit status
    /// and stderr, not "the session is closed").
    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        let BoundCall { server, tool, arguments, generation, progress } = call;
        ServerSet::call(self, &server, &tool, arguments, generation, progress)
            .await
            .map_err(|e| SourceError::from_set(Operation::CallTool { tool }, e))
    }

    async fn resource_servers(&self) -> Vec<String> {
        ServerSet::connected(self)
    }

    async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SourceError> {
        ServerSet::resources(self, server).await.map_err(|e| SourceError::from_set(Operation::ListResources, e))
    }

    async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, SourceError> {
        ServerSet::read_resource(self, server, uri, max_bytes)
            .await
            .map_err(|e| SourceError::from_set(Operation::ReadResource { uri: uri.to_owned() }, e))
    }

    fn instructions(&self) -> Vec<(String, String)> {
        ServerSet::instructions(self)
    }

    /// From the server's state, with its process's exit as the supervisor recorded it.
    fn departure(&self, server: &str) -> Option<Departure> {
        let (state, detail) = match ServerSet::state(self, server)? {
            ServerState::Connected { .. } => return None,
            ServerState::Reconnecting { attempt, reason, .. } => (DepartureState::Returning { attempt }, Some(reason)),
            ServerState::Failed { needs_auth: true, reason, .. } => (DepartureState::NeedsAuth, Some(reason)),
            ServerState::Failed { reason, .. } => (DepartureState::Failed, Some(reason)),
            ServerState::Disabled => (DepartureState::Disabled, None),
            ServerState::Pending => (DepartureState::Starting, None),
            _ => (DepartureState::Gone, None),
        };
        Some(Departure::new(state).with_exit(ServerSet::last_exit(self, server)).with_detail(detail))
    }
}
