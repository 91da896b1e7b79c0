//! The port through which a server's requests reach the host: roots, sampling, elicitation.

use async_trait::async_trait;
use mcp_protocol::jsonrpc::ErrorObject;
use mcp_protocol::{
    CreateMessageRequestParams, CreateMessageResult, ElicitAction, ElicitRequestParams, ElicitResult, ListRootsResult,
};

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
