//! The adapter of mcp-client's [`RequestObserver`] port (feature `client`): a CLIENT span and
//! `mcp.client.operation.duration` for every request a [`mcp_client::Client`] sends, its trace
//! context written into `params._meta`, its end classified into `error.type`.
//!
//! ```
//! use mcp_telemetry::Telemetry;
//! use mcp_telemetry::client::{ClientObserver, Peer};
//! use mcp_telemetry::conventions::Transport;
//!
//! let mut options = mcp_client::ClientOptions::default();
//! // With telemetry off there is no observer, and the client pays nothing.
//! options.observer = ClientObserver::for_connection(&Telemetry::disabled(), Peer::new(Transport::Stdio, None, None));
//! assert!(options.observer.is_none());
//! ```

use std::collections::BTreeMap;
use std::sync::Arc;

use mcp_client::{ClientError, RequestObserver, RequestStart, RequestWatch, SessionGuard, TransportError};
use mcp_protocol::{ProtocolVersion, RequestId};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::conventions::{ErrorType, Transport};
use crate::instrument::{McpRequest, Operation};
use crate::providers::Telemetry;

/// How a connection reaches its server: `network.*` and `server.address` / `server.port`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Peer {
    /// How the session is carried.
    pub transport: Transport,
    /// The server's host, for remote servers.
    pub address: Option<String>,
    /// The server's port.
    pub port: Option<u16>,
}

impl Peer {
    /// A server reached by `transport`, at `address` and `port` if it is remote.
    pub fn new(transport: Transport, address: Option<String>, port: Option<u16>) -> Self {
        Self { transport, address, port }
    }
}

/// Watches requests for a [`Telemetry`]: one connection's, or those of many connections that
/// share their options (mcp-client's `ConnectOptions`), told apart by the connection's label.
#[derive(Debug, Clone)]
pub struct ClientObserver {
    telemetry: Telemetry,
    peer: Peer,
    servers: BTreeMap<String, Peer>,
}

impl ClientObserver {
    /// The observer of one connection to `peer`, or `None` when `telemetry` records nothing:
    /// set it as `ClientOptions::observer` as it is.
    pub fn for_connection(telemetry: &Telemetry, peer: Peer) -> Option<Arc<dyn RequestObserver>> {
        Self::for_servers(telemetry, [], peer)
    }

    /// The observer of many connections (every server of a host): each request's peer is the
    /// one of its connection's label in `servers`, else `default`. `None` when `telemetry`
    /// records nothing.
    pub fn for_servers(
        telemetry: &Telemetry,
        servers: impl IntoIterator<Item = (String, Peer)>,
        default: Peer,
    ) -> Option<Arc<dyn RequestObserver>> {
        telemetry.is_enabled().then(|| {
            let servers = servers.into_iter().collect();
            Arc::new(ClientObserver { telemetry: telemetry.clone(), peer: default, servers })
                as Arc<dyn RequestObserver>
        })
    }
}

impl RequestObserver for ClientObserver {
    fn start(&self, request: &RequestStart<'_>) -> Box<dyn RequestWatch> {
        let peer = self.servers.get(request.server).unwrap_or(&self.peer);
        let mut req = McpRequest::new(request.method, request.params).server(request.server).transport(peer.transport);
        if let Some(v) = request.protocol_version {
            req = req.protocol_version(v.as_str());
        }
        if let Some(address) = &peer.address {
            req = req.peer(address, peer.port);
        }
        let op = self.telemetry.client_request(&req);
        let is_call = request.method == "tools/call";
        if is_call && let Some(arguments) = request.params.and_then(|p| p.get("arguments")) {
            op.tool_arguments(arguments);
        }
        Box::new(ClientWatch { op, is_call, ended: false })
    }

    fn session(&self, server: &str, protocol_version: Option<ProtocolVersion>) -> Option<SessionGuard> {
        // `mcp.client.session.duration`, recorded when the session ends.
        let peer = self.servers.get(server).unwrap_or(&self.peer);
        let mut session = self.telemetry.session(false, peer.transport);
        if let Some(v) = protocol_version {
            session.set_protocol_version(v.as_str());
        }
        session.is_recording().then(|| Box::new(session) as SessionGuard)
    }
}

struct ClientWatch {
    op: Operation,
    is_call: bool,
    ended: bool,
}

impl RequestWatch for ClientWatch {
    fn inject(&self, params: &mut Value) {
        self.op.inject(params);
    }

    fn sent(&self, id: &RequestId) {
        self.op.set_request_id(id);
    }

    fn end(mut self: Box<Self>, result: Result<&RawValue, &ClientError>) {
        self.ended = true;
        match result {
            Ok(raw) if self.is_call => self.op.tool_result_text(raw.get()),
            Ok(_) => {}
            Err(e) => {
                let (kind, message) = error_type(e);
                self.op.fail(&kind, message.as_deref());
            }
        }
    }
}

impl Drop for ClientWatch {
    fn drop(&mut self) {
        if !self.ended {
            // The caller stopped waiting (a dropped future): the client cancelled the request.
            self.op.fail(&ErrorType::Cancelled, None);
        }
    }
}

/// `error.type` and the status description of a client's error: the JSON-RPC code and message
/// of a server's error, else a short kind (never text a server controls, but its message as the
/// status description, cleaned and cut by [`Operation::fail`]).
pub fn error_type(error: &ClientError) -> (ErrorType, Option<String>) {
    match error {
        ClientError::Server { error, .. } => (ErrorType::JsonRpc(error.code), Some(error.message.clone())),
        ClientError::Timeout { .. } => (ErrorType::Timeout, None),
        ClientError::ConnectionClosed { .. } => (ErrorType::Transport("connection_closed"), None),
        ClientError::Transport(t) => (ErrorType::Transport(transport_kind(t)), None),
        ClientError::NotOffered { .. } => (ErrorType::Refused, None),
        _ => (ErrorType::Other, None),
    }
}

fn transport_kind(error: &TransportError) -> &'static str {
    match error {
        TransportError::Spawn { .. } | TransportError::MissingDirectory { .. } => "spawn_failed",
        TransportError::MessageTooLarge { .. } | TransportError::AnswerTooLarge { .. } => "message_too_large",
        TransportError::Closed(_) => "connection_closed",
        TransportError::HttpStatus { .. } => "http_status",
        TransportError::Unauthorized { .. } => "unauthorized",
        TransportError::NoAnswer(_) => "no_answer",
        TransportError::SessionLost(_) => "session_lost",
        _ => "transport",
    }
}
