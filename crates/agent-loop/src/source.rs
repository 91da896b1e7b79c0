//! Where MCP tools come from: the [`ToolSource`] port, and its adapter over the servers of
//! `mcp_client::ServerSet`.

use std::collections::BTreeMap;

use async_trait::async_trait;
use mcp_client::{ClientError, ServerSet};
use mcp_protocol::CallToolResult;
use serde_json::{Map, Value};
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

    /// The generation once an announced change has been listed: a source that re-lists on
    /// demand does it here, and a change that left the listing as it was keeps the generation.
    async fn settled_generation(&self, server: &str) -> Option<u64> {
        self.generation(server)
    }

    /// Call a tool under its raw name, within the server's tool timeout. A failure's text names
    /// the server and the cause.
    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, String>;
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

    async fn call(
        &self,
        server: &str,
        tool: &str,
        arguments: Option<Map<String, Value>>,
    ) -> Result<CallToolResult, String> {
        // Every failure says which server and why (after a crash: its exit status and stderr).
        ServerSet::call(self, server, tool, arguments).await.map_err(|e| {
            let cause = match e {
                ClientError::Timeout { after, .. } => {
                    format!("got no answer within {after:?} (the server's tool timeout); the call was cancelled")
                }
                other => other.to_string(),
            };
            format!("calling tool {tool:?} of server {server:?}: {cause}")
        })
    }
}
