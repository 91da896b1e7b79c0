//! The [`RequestObserver`] **port**: what watches the requests a [`Client`](crate::Client)
//! sends (telemetry's CLIENT spans and duration histograms, `mcp_telemetry::client`), so the
//! client names no telemetry crate and costs nothing more without one (one `Option` checked).
//!
//! Told once per request the caller makes ([`Client::request_raw`](crate::Client::request_raw)
//! and every typed method built on it, and the `initialize` handshake), however many times it is
//! sent (a lost session, an input-required round): its start, before anything is sent, with the
//! params (which it may add trace context to, under `_meta`); each JSON-RPC id it went out
//! with; and its end, with the result or the error. A watch dropped without its end is a
//! request whose caller stopped waiting. And told each session the connection opens
//! ([`RequestObserver::session`]), keeping what it returns until that session ends.

use mcp_protocol::{ProtocolVersion, RequestId};
use serde_json::Value;
use serde_json::value::RawValue;

use crate::ClientError;

/// A request about to be sent.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct RequestStart<'a> {
    /// The connection's label (the server's configured name).
    pub server: &'a str,
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The params as they will be sent (before the watch's additions).
    pub params: Option<&'a Value>,
    /// The negotiated revision, once there is one.
    pub protocol_version: Option<ProtocolVersion>,
}

/// Watches the requests of one connection (set in
/// [`ClientOptions::observer`](crate::ClientOptions::observer)).
pub trait RequestObserver: Send + Sync + 'static {
    /// A request starts: what will be told the rest of its life.
    fn start(&self, request: &RequestStart<'_>) -> Box<dyn RequestWatch>;

    /// A session opened on the connection labelled `server` (its handshake succeeded) in
    /// `protocol_version`: what is returned is dropped when the session ends (the connection
    /// closes, the client is dropped, or the session is lost and opened again, a new one).
    /// `None`, the default: nothing is kept.
    fn session(&self, server: &str, protocol_version: Option<ProtocolVersion>) -> Option<SessionGuard> {
        let _ = (server, protocol_version);
        None
    }
}

/// What a [`RequestObserver`] keeps for one session, dropped when it ends.
pub type SessionGuard = Box<dyn std::any::Any + Send + Sync>;

/// One request's watch.
pub trait RequestWatch: Send + Sync {
    /// Adds to the request's params before it is sent (trace context under `_meta`); `params`
    /// is `null` for a request without params, and is sent as it is left (`null`: none).
    fn inject(&self, params: &mut Value) {
        let _ = params;
    }

    /// The request went out with this JSON-RPC id (once per send).
    fn sent(&self, id: &RequestId) {
        let _ = id;
    }

    /// The request ended: its raw result, or why it failed.
    fn end(self: Box<Self>, result: Result<&RawValue, &ClientError>);
}
