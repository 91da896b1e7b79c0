//! An upstream's own requests (`elicitation/create`, `sampling/createMessage`) routed to the
//! downstream client whose call caused them.
//!
//! Every upstream connection gets an [`UpstreamRequests`] handler and declares form elicitation
//! and sampling. A call a client makes runs through [`AskingSource`] (what
//! [`mcp_gateway::Backend::tools_for`] gives), which enters the call's
//! [`CallAsker`] under its server in [`Askers`] while the call is in flight. A request from
//! the upstream goes to the client of the call in flight on that upstream; when calls of two
//! clients are in flight there, the connection cannot say which one asked (stdio carries no
//! related request), so the request is declined rather than sent to a client it may not
//! concern. No call in flight: declined too.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use agent_loop::{BoundCall, Departure, Listing, SourceError, ToolSource};
use async_trait::async_trait;
use mcp_client::{ServerRequestHandler, ServerRequests, USER_REJECTED};
use mcp_gateway::CallAsker;
use mcp_protocol::{
    CallToolResult, ClientCapabilities, CreateMessageRequestParams, CreateMessageResult, ElicitAction,
    ElicitRequestParams, ElicitResult, ErrorObject, ReadResourceResult, Resource, ResourceTemplate,
};
use mcp_safety::lock;

/// The calls in flight on one upstream: an id of each, and the client its questions go to.
type InFlight = Vec<(u64, Arc<dyn CallAsker>)>;

/// The callers in flight on each upstream, each with the client its questions go to.
#[derive(Debug, Default)]
pub(super) struct Askers {
    next: AtomicU64,
    by_server: Mutex<HashMap<String, InFlight>>,
}

/// One call's entry in [`Askers`], removed when the call ends (or is dropped).
struct Entered<'a> {
    askers: &'a Askers,
    server: String,
    id: u64,
}

impl Drop for Entered<'_> {
    fn drop(&mut self) {
        let mut by_server = lock(&self.askers.by_server);
        if let Some(calls) = by_server.get_mut(&self.server) {
            calls.retain(|(id, _)| *id != self.id);
            if calls.is_empty() {
                by_server.remove(&self.server);
            }
        }
    }
}

impl Askers {
    fn enter(&self, server: &str, asker: Arc<dyn CallAsker>) -> Entered<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.by_server).entry(server.to_owned()).or_default().push((id, asker));
        Entered { askers: self, server: server.to_owned(), id }
    }

    /// The client to ask on behalf of `server`, or why there is none.
    fn asker(&self, server: &str) -> Result<Arc<dyn CallAsker>, String> {
        let by_server = lock(&self.by_server);
        let calls = by_server.get(server).map(Vec::as_slice).unwrap_or_default();
        let Some((_, first)) = calls.first() else {
            return Err(format!("no client's call to server {server:?} is in flight"));
        };
        if calls.iter().any(|(_, other)| other.client_key() != first.client_key()) {
            return Err(format!(
                "calls of several clients to server {server:?} are in flight, and its request does not say which \
                 one it belongs to"
            ));
        }
        Ok(Arc::clone(first))
    }
}

/// What every upstream is told the gateway can do for it: form elicitation and sampling
/// (forwarded to a client that declared them, declined for others).
pub(super) fn capabilities() -> ClientCapabilities {
    ClientCapabilities {
        sampling: Some(serde_json::json!({})),
        elicitation: Some(serde_json::json!({"form": {}})),
        ..ClientCapabilities::default()
    }
}

/// The handler and capabilities of upstream `server`'s connection.
pub(super) fn requests(server: &str, askers: &Arc<Askers>) -> ServerRequests {
    let handler = UpstreamRequests { server: server.to_owned(), askers: Arc::clone(askers) };
    ServerRequests { handler: Arc::new(handler), capabilities: capabilities() }
}

/// One upstream connection's requests, routed to the client of its call in flight.
struct UpstreamRequests {
    server: String,
    askers: Arc<Askers>,
}

#[async_trait]
impl ServerRequestHandler for UpstreamRequests {
    async fn create_message(&self, params: CreateMessageRequestParams) -> Result<CreateMessageResult, ErrorObject> {
        match self.askers.asker(&self.server) {
            Ok(asker) => asker.create_message(params).await,
            Err(why) => Err(ErrorObject::new(USER_REJECTED, format!("the gateway declined sampling: {why}"))),
        }
    }

    async fn elicit(&self, params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        match self.askers.asker(&self.server) {
            Ok(asker) => asker.elicit(params).await,
            Err(why) => {
                tracing::info!(server = %self.server, "an elicitation was declined: {why}");
                Ok(ElicitResult { action: ElicitAction::Decline, content: None, extra: Default::default() })
            }
        }
    }
}

/// The host's tools as one call sees them: while it is in flight, its upstream's requests go to
/// its client.
pub(super) struct AskingSource {
    pub(super) inner: Arc<dyn ToolSource>,
    pub(super) askers: Arc<Askers>,
    pub(super) asker: Arc<dyn CallAsker>,
}

#[async_trait]
impl ToolSource for AskingSource {
    async fn refresh(&self) -> Listing {
        self.inner.refresh().await
    }

    fn generation(&self, server: &str) -> Option<u64> {
        self.inner.generation(server)
    }

    async fn settled_generation(&self, server: &str) -> Option<u64> {
        self.inner.settled_generation(server).await
    }

    async fn call_bound(&self, call: BoundCall) -> Result<CallToolResult, SourceError> {
        let _entered = self.askers.enter(&call.server, Arc::clone(&self.asker));
        self.inner.call_bound(call).await
    }

    async fn resource_servers(&self) -> Vec<String> {
        self.inner.resource_servers().await
    }

    async fn resources(&self, server: &str) -> Result<(Vec<Resource>, Vec<ResourceTemplate>), SourceError> {
        self.inner.resources(server).await
    }

    async fn read_resource(
        &self,
        server: &str,
        uri: &str,
        max_bytes: usize,
    ) -> Result<ReadResourceResult, SourceError> {
        self.inner.read_resource(server, uri, max_bytes).await
    }

    fn instructions(&self) -> Vec<(String, String)> {
        self.inner.instructions()
    }

    fn departure(&self, server: &str) -> Option<Departure> {
        self.inner.departure(server)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Named(String);

    #[async_trait]
    impl CallAsker for Named {
        async fn elicit(&self, _params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
            Err(ErrorObject::new(0, self.0.clone()))
        }
        async fn create_message(
            &self,
            _params: CreateMessageRequestParams,
        ) -> Result<CreateMessageResult, ErrorObject> {
            Err(ErrorObject::new(0, self.0.clone()))
        }
        fn client_key(&self) -> &str {
            &self.0
        }
    }

    fn named(key: &str) -> Arc<dyn CallAsker> {
        Arc::new(Named(key.to_owned()))
    }

    #[test]
    fn a_request_goes_to_the_one_client_in_flight_on_its_server_or_to_none() {
        let askers = Askers::default();
        assert!(askers.asker("a").is_err(), "nobody in flight");
        let a1 = askers.enter("a", named("one"));
        let _b = askers.enter("b", named("two"));
        assert_eq!(askers.asker("a").unwrap().client_key(), "one");
        assert_eq!(askers.asker("b").unwrap().client_key(), "two");
        {
            let _a2 = askers.enter("a", named("one"));
            assert_eq!(askers.asker("a").unwrap().client_key(), "one", "two calls of one client");
            let _a3 = askers.enter("a", named("three"));
            let why = askers.asker("a").unwrap_err();
            assert!(why.contains("several clients"), "{why}");
        }
        assert_eq!(askers.asker("a").unwrap().client_key(), "one", "the others ended");
        drop(a1);
        assert!(askers.asker("a").is_err());
        assert!(!lock(&askers.by_server).contains_key("a"), "nothing left behind");
    }
}
