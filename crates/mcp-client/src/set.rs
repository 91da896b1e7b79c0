//! Connected servers watched for changes: each server's tool listing is re-listed when it
//! announces `notifications/tools/list_changed`, and carries a generation that changes exactly
//! when the listing does (callers refuse calls prepared against an older generation).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use mcp_protocol::{CallToolResult, ServerNotification, Tool};
use serde_json::{Map, Value};
use tokio::sync::broadcast;
use tokio::sync::broadcast::error::TryRecvError;

use crate::client::{ClientError, ListLimits};
use crate::servers::ServerConnection;

/// One connected server's current tools and the generation of that listing.
#[derive(Debug, Clone)]
pub struct ServerListing {
    /// The server's configured name.
    pub name: String,
    /// Its tools.
    pub tools: Arc<[Tool]>,
    /// Changes whenever the listing changes.
    pub generation: u64,
}

struct Watched {
    connection: ServerConnection,
    listing: Mutex<(Arc<[Tool]>, u64)>,
    /// The server's notifications, read whenever a generation is asked for: a change the
    /// client has received is known at once. (A task reading them in the background could
    /// lag behind a call that the change should refuse.)
    notifications: Mutex<Option<broadcast::Receiver<ServerNotification>>>,
    changed: AtomicBool,
}

impl Watched {
    /// Takes in what the server announced since the last look.
    fn catch_up(&self) {
        let mut notifications = lock(&self.notifications);
        let Some(receiver) = notifications.as_mut() else { return };
        loop {
            match receiver.try_recv() {
                // Lagging lost some notifications: one of them may have been a change.
                Ok(ServerNotification::ToolsListChanged) | Err(TryRecvError::Lagged(_)) => {
                    self.changed.store(true, Ordering::SeqCst);
                }
                Ok(_) => {}
                Err(TryRecvError::Empty | TryRecvError::Closed) => return,
            }
        }
    }
}

/// Servers connected with [`crate::connect_all`], watched for tool changes.
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
            .map(|mut connection| {
                // The connection subscribed before it listed its tools, so a change announced
                // since is waiting in `notifications`, and one during the listing made it stale.
                let (subscribed, stale) = connection.take_notifications();
                let notifications = connection.client().map(|client| {
                    // 2026-07-28 servers announce list changes only on a subscriptions/listen
                    // stream (a no-op for older servers).
                    if let Err(e) = client.listen_for_changes() {
                        tracing::warn!(server = %connection.name(), "cannot listen for tool changes: {e}");
                    }
                    subscribed.unwrap_or_else(|| client.subscribe())
                });
                let listing = Mutex::new((Arc::clone(connection.tools()), 1));
                Watched {
                    connection,
                    listing,
                    notifications: Mutex::new(notifications),
                    changed: AtomicBool::new(stale),
                }
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

impl ServerSet {
    /// Every connected server's current listing, after re-listing the servers that announced
    /// a change. A failed re-listing keeps the previous one (with a warning).
    pub async fn refresh(&self) -> Vec<ServerListing> {
        let mut listings = Vec::with_capacity(self.servers.len());
        for watched in &self.servers {
            if watched.connection.client().is_none() {
                continue;
            }
            self.relist_if_changed(watched).await;
            let (tools, generation) = lock(&watched.listing).clone();
            listings.push(ServerListing { name: watched.connection.name().to_owned(), tools, generation });
        }
        listings
    }

    /// Re-lists a server that announced a change; the generation moves only when the listing
    /// really differs (a `list_changed` that changed nothing costs no refusals).
    async fn relist_if_changed(&self, watched: &Watched) {
        let Some(client) = watched.connection.client() else { return };
        watched.catch_up();
        if !watched.changed.swap(false, Ordering::SeqCst) {
            return;
        }
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

    /// The generation of `server`'s listing once any announced change has been listed (the
    /// server is re-listed now if it announced one). `None` for an unknown server.
    pub async fn settled_generation(&self, server: &str) -> Option<u64> {
        let watched = self.find(server)?;
        self.relist_if_changed(watched).await;
        self.generation(server)
    }

    /// The generation of `server`'s listing now; `u64::MAX` when a change was announced and
    /// not listed yet (any snapshot is stale then). `None` for an unknown server.
    pub fn generation(&self, server: &str) -> Option<u64> {
        let watched = self.find(server)?;
        watched.catch_up();
        if watched.changed.load(Ordering::SeqCst) {
            return Some(u64::MAX);
        }
        Some(lock(&watched.listing).1)
    }

    /// Calls tool `tool` (its raw name) of `server` under the server's tool timeout.
    pub async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, ClientError> {
        match self.find(server) {
            Some(watched) => watched.connection.call_tool(tool, arguments).await,
            None => Err(ClientError::ConnectionClosed { reason: format!("no server named {server:?}") }),
        }
    }
}
