//! The port through which a server's requests reach the host: roots, sampling, elicitation.

use std::sync::Arc;

use async_trait::async_trait;
use mcp_protocol::{ClientCapabilities, ErrorObject};
use mcp_protocol::{
    CreateMessageRequestParams, CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult, ListRootsResult,
};
use serde_json::{Map, Value};

/// Error code for "the user rejected the request", which the specification's examples use.
pub const USER_REJECTED: i64 = -1;

/// Answers requests the server sends to the client. Every method has a polite default that
/// exposes nothing: no roots, sampling refused, elicitation declined.
#[async_trait]
pub trait ServerRequestHandler: Send + Sync {
    /// `roots/list`.
    async fn list_roots(&self) -> Result<ListRootsResult, ErrorObject> {
        Ok(ListRootsResult::default())
    }

    /// `sampling/createMessage`.
    async fn create_message(&self, _params: CreateMessageRequestParams) -> Result<CreateMessageResult, ErrorObject> {
        Err(ErrorObject::new(USER_REJECTED, "This client does not allow servers to sample from its model"))
    }

    /// `elicitation/create`.
    async fn elicit(&self, _params: ElicitRequestParams) -> Result<ElicitResult, ErrorObject> {
        Ok(ElicitResult { action: ElicitAction::Decline, content: None, extra: Default::default() })
    }
}

/// The handler with every default: declines politely.
#[derive(Debug, Clone, Copy, Default)]
pub struct DecliningHandler;

impl ServerRequestHandler for DecliningHandler {}

/// One server's own handler and the capabilities declared to it, in place of the connection
/// options' shared ones: a host that can ask a person about one server's requests and is told
/// not to for another. Declare only what the handler really does.
#[derive(Clone)]
pub struct ServerRequests {
    /// Answers this server's roots, sampling and elicitation requests.
    pub handler: Arc<dyn ServerRequestHandler>,
    /// What is declared to this server.
    pub capabilities: ClientCapabilities,
}

impl std::fmt::Debug for ServerRequests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerRequests").field("capabilities", &self.capabilities).finish_non_exhaustive()
    }
}

/// The values a form elicitation's `requestedSchema` gives as defaults, by property name
/// (SEP-1034): what a client fills in when the user accepts without changing anything.
/// Properties without a default are left out; a schema that is not an object gives nothing.
pub fn schema_defaults(schema: &Value) -> Map<String, Value> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else { return Map::new() };
    properties
        .iter()
        .filter_map(|(name, property)| property.get("default").map(|d| (name.clone(), d.clone())))
        .collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn defaults_of_each_property_type() {
        let schema = json!({"type": "object", "properties": {
            "name": {"type": "string", "default": "John Doe"}, "age": {"type": "integer", "default": 30},
            "score": {"type": "number", "default": 95.5}, "verified": {"type": "boolean", "default": true},
            "status": {"type": "string", "enum": ["a", "b"], "default": "b"}, "free": {"type": "string"}}});
        let d = schema_defaults(&schema);
        assert_eq!(
            Value::Object(d),
            json!({"name": "John Doe", "age": 30, "score": 95.5, "verified": true, "status": "b"})
        );
        assert!(schema_defaults(&json!(["not", "an", "object"])).is_empty());
    }
}
