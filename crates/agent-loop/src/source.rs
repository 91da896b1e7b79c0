//! Where MCP tools come from: a port, and its adapter over connected servers that re-lists a
//! server's tools when it announces `notifications/tools/list_changed`.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ServerNotification, Tool};
use mcp_transport::servers::ServerConnection;
use mcp_transport::{ClientError, ListLimits};
use serde_json::{Map, Value};
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;
use tool_pool::ServerTools;

/// Every server's current tools, and a generation per server that changes whenever that
/// server's listing changes.
#[derive(Debug, Clone, Default)]
pub struct Listing {
    /// Connected servers' tools.
    pub servers: Vec<ServerTools>,
    /// Generation of each server's listing.
    pub generations: BTreeMap<String, u64>,
}

/// The MCP side of the loop.
#[async_trait]
pub trait ToolSource: Send + Sync {
    /// The current listing, after re-listing servers that announced a change.
    async fn refresh(&self) -> Listing;

    /// The generation of `server`'s listing now (to refuse calls prepared against an older one).
    fn generation(&self, server: &str) -> Option<u64>;

    /// Call a tool under its raw name, within the server's tool timeout.
    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, String>;
}

struct Watched {
    connection: ServerConnection,
    listing: Mutex<(Arc<[Tool]>, u64)>,
    changed: Arc<AtomicBool>,
    watcher: Option<JoinHandle<()>>,
}

/// [`ToolSource`] over servers connected with `mcp_transport::servers::connect_all`.
pub struct ServerSet {
    servers: Vec<Watched>,
    limits: ListLimits,
}

impl std::fmt::Debug for ServerSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_list().entries(self.servers.iter().map(|w| w.connection.name())).finish()
    }
}

impl ServerSet {
    /// Watch these connections (the ones not connected contribute no tools).
    pub fn new(connections: Vec<ServerConnection>) -> Self {
        let servers = connections
            .into_iter()
            .map(|connection| {
                // A change announced while the server was being listed at startup would be
                // lost, so every server is re-listed once at the first refresh.
                let changed = Arc::new(AtomicBool::new(connection.is_connected()));
                let watcher = connection.client().map(|client| {
                    let mut notifications = client.subscribe();
                    // 2026-07-28 servers announce list changes only on a subscriptions/listen
                    // stream (a no-op for older servers).
                    if let Err(e) = client.listen_for_changes() {
                        tracing::warn!(server = %connection.name(), "cannot listen for tool changes: {e}");
                    }
                    let changed = Arc::clone(&changed);
                    tokio::spawn(async move {
                        loop {
                            match notifications.recv().await {
                                Ok(ServerNotification::ToolsListChanged) | Err(RecvError::Lagged(_)) => {
                                    changed.store(true, Ordering::SeqCst);
                                }
                                Ok(_) => {}
                                Err(RecvError::Closed) => return,
                            }
                        }
                    })
                });
                let listing = Mutex::new((Arc::clone(connection.tools()), 1));
                Watched { connection, listing, changed, watcher }
            })
            .collect();
        Self { servers, limits: ListLimits::default() }
    }

    /// The connections, for reporting.
    pub fn connections(&self) -> impl Iterator<Item = &ServerConnection> {
        self.servers.iter().map(|w| &w.connection)
    }

    /// Close every server (children reaped).
    pub async fn close(self) {
        for watched in self.servers {
            if let Some(watcher) = watched.watcher {
                watcher.abort();
            }
            watched.connection.close().await;
        }
    }

    fn find(&self, server: &str) -> Option<&Watched> {
        self.servers.iter().find(|w| w.connection.name() == server)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

#[async_trait]
impl ToolSource for ServerSet {
    async fn refresh(&self) -> Listing {
        let mut listing = Listing::default();
        for watched in &self.servers {
            let Some(client) = watched.connection.client() else { continue };
            if watched.changed.swap(false, Ordering::SeqCst) {
                match client.list_all_tools(self.limits).await {
                    Ok(tools) => {
                        let mut current = lock(&watched.listing);
                        if *current.0 != *tools {
                            *current = (Arc::from(tools), current.1 + 1);
                        }
                    }
                    Err(e) => tracing::warn!(
                        server = %watched.connection.name(),
                        "could not re-list tools after a change; keeping the previous list: {e}"
                    ),
                }
            }
            let (tools, generation) = lock(&watched.listing).clone();
            let name = watched.connection.name();
            listing.servers.push(ServerTools::new(name, tools));
            listing.generations.insert(name.to_owned(), generation);
        }
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        let watched = self.find(server)?;
        if watched.changed.load(Ordering::SeqCst) {
            // A change was announced and not listed yet: the snapshot's version is stale.
            return Some(u64::MAX);
        }
        Some(lock(&watched.listing).1)
    }

    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, String> {
        let watched = self.find(server).ok_or_else(|| format!("no server named {server:?}"))?;
        watched.connection.call_tool(tool, arguments).await.map_err(|e| match e {
            ClientError::Timeout { after, .. } => {
                format!("the tool did not answer within {after:?} (the server's tool timeout); the call was cancelled")
            }
            other => other.to_string(),
        })
    }
}
