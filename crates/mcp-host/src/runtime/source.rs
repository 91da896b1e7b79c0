//! The runtime as the agent loop's tool source: the set's listings under the policy the
//! runtime publishes, a reload first when the configuration changed (and a wait for the local
//! servers it added).

use agent_loop::{BoundCall, Departure, Listing, SourceError, ToolSource};
use async_trait::async_trait;
use mcp_protocol::{CallToolResult, ReadResourceResult, Resource, ResourceTemplate};

use super::Runtime;

#[async_trait]
impl ToolSource for Runtime {
    async fn refresh(&self) -> Listing {
        self.reload_if_changed().await;
        self.wait_for_added().await;
        let mut listing = ToolSource::refresh(&self.servers).await;
        listing.policy = Some(self.policy());
        listing
    }

    fn generation(&self, server: &str) -> Option<u64> {
        ToolSource::generation(&self.servers, server)
    }

    async fn settled_generation(&self, server: &str) -> Option<u64> {
        ToolSource::settled_generation(&self.servers, server).await
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        ToolSource::call_bound(&self.servers, call).await
    }

    async fn resource_servers(&self) -> Vec<String> {
        ToolSource::resource_servers(&self.servers).await
    }

    async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SourceError> {
        ToolSource::resources(&self.servers, server).await
    }

    async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, SourceError> {
        ToolSource::read_resource(&self.servers, server, uri, max_bytes).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        ToolSource::instructions(&self.servers)
    }

    fn departure(&self, server: &str) -> Option<Departure> {
        ToolSource::departure(&self.servers, server)
    }
}
