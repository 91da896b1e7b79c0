//! Where MCP tools come from: the [`ToolSource`] port, and its adapter over the servers of
//! `mcp_client::ServerSet`.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use mcp_client::ServerSet;
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
    pub progress: Option<mpsc::UnboundedSender<ProgressNotificationParams>>,
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
}
