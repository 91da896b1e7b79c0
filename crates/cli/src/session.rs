//! What the one-shot commands share: the connections and the tool pool of their listings;
//! and the `servers` command, which only reports the connections.

use std::sync::Arc;

use anyhow::Context as _;
use mcp_client::{ServerConnection, ServerState, close_all};
use mcp_host::config::Config;
use mcp_host::{offered, pool_of};
use mcp_sandbox::WorkingDir;
use serde_json::{Value, json};
use tool_pool::Pool;

use crate::Outcome;
use crate::host::TOOLS_COLUMN;
use crate::output;

/// The connections and the pool assembled from them.
pub(crate) struct Session {
    pub(crate) connections: Vec<ServerConnection>,
    pub(crate) pool: Pool,
}

impl Session {
    /// Connects and assembles the pool (no built-in tools yet).
    pub(crate) async fn open(config: &Config) -> anyhow::Result<Self> {
        // A signal while connecting drops the connections, which kills their process groups.
        let connections = crate::signals::interruptible(crate::host::connect(config)).await?;
        let listings = connections.iter().filter(|c| c.is_connected()).map(|c| (c.name(), Arc::clone(c.tools())));
        let pool = match pool_of(listings, &config.policy) {
            Ok(pool) => pool,
            Err(e) => {
                close_all(connections).await;
                return Err(e).context("assembling the tool pool");
            }
        };
        Ok(Self { connections, pool })
    }

    /// Servers that were meant to run but did not: (name, reason).
    pub(crate) fn unavailable(&self) -> Vec<(&str, &str)> {
        self.connections
            .iter()
            .filter_map(|c| match c.state() {
                ServerState::Failed { reason, .. } => Some((c.name(), reason.as_str())),
                _ => None,
            })
            .collect()
    }

    /// The names of the servers among `connections` that were meant to run but did not.
    pub(crate) fn unavailable_of(connections: &[ServerConnection]) -> Vec<String> {
        connections
            .iter()
            .filter(|c| matches!(c.state(), ServerState::Failed { .. }))
            .map(|c| c.name().to_owned())
            .collect()
    }

    /// Diagnostics for the unavailable servers, shaped like the pool's.
    pub(crate) fn unavailable_diagnostics(&self) -> Vec<Value> {
        // With the pool's `tool` field (null: the whole server), in the pool's order of fields.
        unavailable_diagnostics(&self.connections, "tools")
            .into_iter()
            .map(|d| json!({ "server": d["server"], "tool": null, "kind": d["kind"], "message": d["message"] }))
            .collect()
    }

    /// Closes every connection while `work` runs on the pool (`mcp_client::close_all_while`):
    /// the servers exit while the output is written, not after.
    pub(crate) async fn close_while<T>(self, work: impl FnOnce(&Pool) -> T) -> T {
        let Self { connections, pool } = self;
        mcp_client::close_all_while(connections, || work(&pool)).await
    }
}

/// A diagnostic (`server`, `kind` `server_unavailable`, `message`) for each server among
/// `connections` that was meant to run but did not: its `what` (tools, resources, prompts) are
/// left out.
pub(crate) fn unavailable_diagnostics(connections: &[ServerConnection], what: &str) -> Vec<Value> {
    connections
        .iter()
        .filter_map(|c| match c.state() {
            ServerState::Failed { reason, .. } => Some((c.name(), reason)),
            _ => None,
        })
        .map(|(server, reason)| {
            json!({
                "server": server,
                "kind": "server_unavailable",
                "message": format!("server {server:?} is unavailable, its {what} are left out: {reason}"),
            })
        })
        .collect()
}

fn state_json(c: &ServerConnection, config: &Config, pool: &Pool) -> Value {
    let elapsed_ms = c.state().elapsed().map(|d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    let (protocol, tools, reason) = match c.state() {
        ServerState::Connected { protocol, tools, .. } => (Some(protocol.as_str()), Some(*tools), None),
        ServerState::Failed { reason, .. } => (None, None, Some(reason.as_str())),
        _ => (None, None, None),
    };
    json!({
        "name": c.name(),
        "state": c.state().label(),
        "protocol": protocol,
        "tools": tools,
        "tools_offered": tools.map(|_| offered(pool, c.name())),
        "elapsed_ms": elapsed_ms,
        "reason": reason,
        "sandbox": sandbox_label(c, config),
        "working_dir": working_dir(c, config).map(|dir| match dir {
            WorkingDir::Granted(path) => json!({ "private": false, "path": path }),
            WorkingDir::Private { requested, problem } => json!({
                "private": true,
                "instead_of": requested,
                "because": problem.to_string(),
            }),
        }),
    })
}

/// Where a confined server works (`None` for unconfined, remote and disabled servers).
fn working_dir(c: &ServerConnection, config: &Config) -> Option<WorkingDir> {
    if matches!(c.state(), ServerState::Disabled) {
        return None;
    }
    config.server(c.name()).and_then(|server| mcp_host::sandbox::working_dir(config, server))
}

/// What the table's DETAIL says of a connected server: a private working directory and why.
fn working_dir_detail(c: &ServerConnection, config: &Config) -> String {
    match working_dir(c, config) {
        Some(dir @ WorkingDir::Private { .. }) => format!("working directory: {dir}"),
        _ => String::new(),
    }
}

/// The server's confinement (`None` for remote and disabled servers).
fn sandbox_label(c: &ServerConnection, config: &Config) -> Option<&'static str> {
    if matches!(c.state(), ServerState::Disabled) {
        return None;
    }
    config.server(c.name()).and_then(mcp_host::sandbox::confinement).map(mcp_host::sandbox::Confinement::label)
}

/// `mcp-harness servers`. Its tool counts are the pool's (`tools` would show) over what each
/// server listed.
pub(crate) async fn servers_command(config: Config, as_json: bool) -> anyhow::Result<Outcome> {
    let Session { mut connections, pool } = Session::open(&config).await?;
    connections.sort_by(|a, b| a.name().cmp(b.name()));
    let text = if as_json {
        let servers: Vec<Value> = connections.iter().map(|c| state_json(c, &config, &pool)).collect();
        let mut text = output::json(&json!({ "servers": servers }), true)?;
        text.push('\n');
        text
    } else if connections.is_empty() {
        "no servers are configured\n".to_owned()
    } else {
        let rows: Vec<Vec<String>> = connections
            .iter()
            .map(|c| {
                let dash = || "-".to_owned();
                let time = c.state().elapsed().map_or_else(dash, output::duration);
                let sandbox = sandbox_label(c, &config).unwrap_or("-").to_owned();
                match c.state() {
                    ServerState::Connected { protocol, tools, .. } => {
                        vec![
                            c.name().to_owned(),
                            "connected".into(),
                            protocol.to_string(),
                            format!("{}/{tools}", offered(&pool, c.name())),
                            time,
                            sandbox,
                            working_dir_detail(c, &config),
                        ]
                    }
                    ServerState::Failed { reason, .. } => {
                        let state = c.state().label().to_owned();
                        vec![
                            c.name().to_owned(),
                            state,
                            dash(),
                            dash(),
                            time,
                            sandbox,
                            mcp_host::sandbox::failure_line(reason, 300),
                        ]
                    }
                    other => {
                        vec![c.name().to_owned(), other.label().into(), dash(), dash(), dash(), dash(), String::new()]
                    }
                }
            })
            .collect();
        output::table(&["SERVER", "STATE", "PROTOCOL", TOOLS_COLUMN, "TIME", "SANDBOX", "DETAIL"], &rows)
    };
    // The servers exit while the report is written.
    mcp_client::close_all_while(connections, || output::stdout(&text)).await?;
    Ok(Outcome::Success)
}
