//! The `/mcp`-style operations of a running host: every server's state with its tool counts and
//! last error, and reconnecting, enabling or disabling one server. Each returns data; the front
//! end decides how it looks.

use std::sync::Arc;

use mcp_client::ServerState;

use super::Runtime;

/// One server as the runtime sees it now.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct ServerStatus {
    /// Its name.
    pub name: String,
    /// Where it stands.
    pub state: ServerState,
    /// How many of its tools the next pool would offer (after policy) and how many it listed;
    /// `None` when it has no listing now. `offered` is `None` when the pool cannot be
    /// assembled.
    pub tools: Option<ToolCounts>,
    /// The server's last error beside its state (a failed re-listing), if any; a failed or
    /// reconnecting server's reason is in its state.
    pub last_error: Option<String>,
}

/// A server's tools: offered (after policy) of listed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct ToolCounts {
    /// What the pool offers of them, when the pool can be assembled.
    pub offered: Option<usize>,
    /// What the server listed.
    pub listed: usize,
}

/// What to do with one server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ServerAction {
    /// Drop its connection and connect again.
    Reconnect,
    /// Enable it for this runtime (not in the file).
    Enable,
    /// Disable it for this runtime (not in the file).
    Disable,
}

/// How a [`ServerAction`] went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ActionOutcome {
    /// No server of that name.
    Unknown,
    /// The server is known but not kept by this runtime; nothing was done.
    NotKept,
    /// Done (a reconnect or enable is under way; its state says how it went).
    Done,
    /// Not enabled: the configuration file disables the server, so its settings were never
    /// read through (variables, inputs, env files) and it cannot be started as it stands.
    DisabledInFile,
}

/// Servers marked `required` that did not connect.
#[derive(Debug, Clone, thiserror::Error)]
#[error(
    "required server(s) did not connect, so nothing was started:\n{}\n(a server is required when its \
     configuration says `required = true`)",
    .failed.iter().map(|(name, state)| format!(
        "  {}: {}",
        mcp_safety::text::one_line(name, 80),
        mcp_safety::text::one_line(&state.to_string(), 300)
    )).collect::<Vec<_>>().join("\n")
)]
#[non_exhaustive]
pub struct RequiredError {
    /// Each one, with where it stands.
    pub failed: Vec<(String, ServerState)>,
}

impl Runtime {
    /// Every server's state, tool counts and last error (after a reload, when the configuration
    /// changed).
    pub async fn status(&self) -> Vec<ServerStatus> {
        self.reload_if_changed().await;
        let listings = self.servers.refresh().await;
        // What the next listing would offer of each server, as the pool counts it.
        let policy = Arc::clone(&self.policy().1);
        let pool =
            crate::session::pool_of(listings.iter().map(|l| (l.name.as_str(), Arc::clone(&l.tools))), &policy).ok();
        self.servers
            .states()
            .into_iter()
            .map(|(name, state)| {
                let tools = listings.iter().find(|l| l.name == name).map(|l| ToolCounts {
                    offered: pool.as_ref().map(|pool| crate::session::offered(pool, &name)),
                    listed: l.tools.len(),
                });
                let last_error = match &state {
                    ServerState::Failed { .. } | ServerState::Reconnecting { .. } => None,
                    _ => self.servers.last_error(&name),
                };
                ServerStatus { name, state, tools, last_error }
            })
            .collect()
    }

    /// Reconnects, enables or disables server `name` for this runtime.
    pub fn act(&self, name: &str, action: ServerAction) -> ActionOutcome {
        if self.servers.state(name).is_none() {
            return ActionOutcome::Unknown;
        }
        if action == ServerAction::Enable
            && mcp_safety::lock(&self.config).servers.iter().any(|s| s.name == name && !s.enabled)
        {
            return ActionOutcome::DisabledInFile;
        }
        let done = match action {
            ServerAction::Reconnect => self.servers.reconnect(name),
            ServerAction::Enable => self.servers.set_enabled(name, true),
            ServerAction::Disable => self.servers.set_enabled(name, false),
        };
        if done { ActionOutcome::Done } else { ActionOutcome::NotKept }
    }
}
