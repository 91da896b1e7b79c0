//! The [`ServeObserver`] **port**: what watches the requests the gateway receives (telemetry's
//! SERVER spans and `mcp.server.operation.duration`, adapted by the host), so the gateway names
//! no telemetry crate and costs nothing more without one (one `Option` checked per request).
//!
//! Told once per request received, from the message as it arrived (its method, its raw params
//! with any `_meta` trace context, the HTTP headers): its start, then its answer. While the
//! request is handled its watch is entered at every poll, so whatever the backend sends for it
//! (a call to an upstream) is the watch's child.

use std::any::Any;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::task::{Context, Poll};

use mcp_protocol::ErrorObject;
use serde_json::value::RawValue;

/// A request the gateway received.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Received<'a> {
    /// The JSON-RPC method.
    pub method: &'a str,
    /// The params as they arrived.
    pub params: Option<&'a RawValue>,
    /// The HTTP request's headers (the Streamable HTTP front); `None` over stdio.
    pub headers: Option<&'a http::HeaderMap>,
    /// The session's id, when the request belongs to one.
    pub session: Option<&'a str>,
    /// The revision the request is spoken in, where it is known when it arrives: its session's
    /// (negotiated), else the `MCP-Protocol-Version` header (HTTP). `None` for an `initialize`
    /// (its answer says) and a stateless request over stdio (its `_meta` envelope says).
    pub protocol_version: Option<&'a str>,
    /// The client's address and port: the TCP peer of the HTTP front; `None` over stdio.
    pub peer: Option<SocketAddr>,
}

/// How a received request was answered.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Answered<'a> {
    /// A result, as sent (JSON text).
    Result(&'a str),
    /// An error.
    Error(&'a ErrorObject),
    /// None: its handling was dropped first (the client cancelled it, or went away).
    Cancelled,
}

/// A session an `initialize` opened.
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub struct Opened<'a> {
    /// The negotiated revision.
    pub protocol_version: &'a str,
    /// Over the Streamable HTTP front (else stdio).
    pub http: bool,
}

/// What a [`ServeObserver`] keeps for one session, dropped when the session ends.
pub type SessionGuard = Box<dyn Any + Send + Sync>;

/// Watches the requests of every front of one gateway ([`GatewayOptions::observer`](crate::GatewayOptions::observer)).
pub trait ServeObserver: std::fmt::Debug + Send + Sync + 'static {
    /// A request arrived: what will be told the rest of its handling.
    fn received(&self, request: &Received<'_>) -> Box<dyn ServeWatch>;

    /// A session opened: what is returned is dropped when it ends (the stdio client's input
    /// ends; an HTTP session is deleted, expires or is evicted, and its last request is
    /// answered). `None`, the default: nothing is kept.
    fn session(&self, opened: &Opened<'_>) -> Option<SessionGuard> {
        let _ = opened;
        None
    }
}

/// One received request's watch. Dropped without [`ServeWatch::end`]: the request was answered
/// by the front itself (a refusal before the backend had a say). An `initialize` is told its
/// answer (the negotiated revision is in it), a request cancelled while handled
/// [`Answered::Cancelled`].
pub trait ServeWatch: Send + Sync {
    /// Makes the request's context current on this thread until the returned guard drops
    /// (held for one poll of its handling, never across an await).
    fn enter(&self) -> Box<dyn Any>;

    /// The request was answered.
    fn end(self: Box<Self>, answer: Answered<'_>);
}

/// `fut` polled inside `watch`'s context; done, it gives the watch back to be told the answer.
/// Dropped first (the client cancelled the request, or went away), it tells the watch
/// [`Answered::Cancelled`].
pub(crate) struct Entered<F> {
    watch: Option<Box<dyn ServeWatch>>,
    fut: Pin<Box<F>>,
}

impl<F> Entered<F> {
    pub(crate) fn new(watch: Box<dyn ServeWatch>, fut: F) -> Self {
        Self { watch: Some(watch), fut: Box::pin(fut) }
    }
}

impl<F: Future> Future for Entered<F> {
    type Output = (F::Output, Option<Box<dyn ServeWatch>>);

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let polled = {
            let _entered = this.watch.as_ref().map(|w| w.enter());
            this.fut.as_mut().poll(cx)
        };
        polled.map(|out| (out, this.watch.take()))
    }
}

impl<F> Drop for Entered<F> {
    fn drop(&mut self) {
        if let Some(watch) = self.watch.take() {
            watch.end(Answered::Cancelled);
        }
    }
}

/// What `GET /metrics` of the HTTP front answers with ([`HttpOptions::metrics`](crate::HttpOptions::metrics)):
/// the metrics in Prometheus's text format.
pub trait MetricsSource: std::fmt::Debug + Send + Sync {
    /// The current metrics as text, or `None` when there are none to give.
    fn render(&self) -> Option<String>;

    /// The text's content type.
    fn content_type(&self) -> &'static str {
        "text/plain; version=0.0.4; charset=utf-8"
    }
}
