//! Opening the session: `initialize`, `server/discover`, or the probe that picks between them;
//! and opening it again when the transport lost it ([`Inbound::SessionLost`]), through the same
//! handshake, whatever the transport.
//!
//! [`Inbound::SessionLost`]: crate::Inbound::SessionLost

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use mcp_protocol::{InitializeResult, ProtocolVersion, SessionError, SessionState, methods, stateless};
use serde_json::value::RawValue;
use tokio::sync::oneshot;

use super::engine::{Inner, Waiter};
use super::{Client, ClientError, Era};
use crate::observe::{RequestStart, RequestWatch};
use crate::transport::{SessionLoss, TransportError};

impl Client {
    /// Open the session the way [`ClientOptions::era`](crate::ClientOptions::era) says: `initialize`, `server/discover`,
    /// or the probe with its fallback. Returns what the server said about itself (for
    /// 2026-07-28, the discover result in the shape of an initialize result).
    pub async fn open(&self) -> Result<InitializeResult, ClientError> {
        match self.inner.options.era {
            Era::Initialize => self.initialize().await,
            Era::Discover => self.discover(self.inner.options.startup_timeout).await,
            Era::Auto => self.probe().await,
            Era::InitializeFirst => match self.initialize().await {
                Err(e) if initialize_refused(&e) => {
                    tracing::debug!(server = %self.inner.options.label, "initialize refused ({e}); server/discover");
                    self.discover(self.inner.options.startup_timeout).await
                }
                other => other,
            },
        }
    }

    /// [`Era::Auto`]: `server/discover` alone for [`DISCOVER_PROBE_TIMEOUT`]; a refusal means
    /// `initialize`. A server that is only slow (a Python server still starting) may yet answer
    /// the probe, and once it has seen `server/discover` it may refuse `initialize`; so after
    /// the probe time both requests are in flight and the first success wins, a failure of one
    /// waiting for the other.
    async fn probe(&self) -> Result<InitializeResult, ClientError> {
        let label = &self.inner.options.label;
        let startup = self.inner.options.startup_timeout;
        let probe = self.inner.options.probe_timeout;
        if startup <= probe {
            // No room for both: the probe gets the whole budget, then initialize its own.
            return match self.discover(startup).await {
                Err(e) if discover_refused(&e) => self.initialize().await,
                other => other,
            };
        }
        let discover = self.inner.discover_raw(startup);
        tokio::pin!(discover);
        let first = tokio::time::timeout(probe, &mut discover).await;
        match first {
            Ok(Ok(raw)) => match self.inner.finish_discover(&raw) {
                Err(e) if discover_refused(&e) => return self.initialize().await,
                other => return other,
            },
            Ok(Err(e)) if discover_refused(&e) => {
                tracing::debug!(server = %label, "server/discover refused ({e}); initialize");
                return self.initialize().await;
            }
            Ok(Err(e)) => return Err(e),
            Err(_) => tracing::debug!(server = %label, "server/discover is slow; initialize as well"),
        }
        let initialize = self.inner.initialize_raw();
        tokio::pin!(initialize);
        let (mut discover_failed, mut initialize_failed) = (None, None);
        loop {
            tokio::select! {
                answer = &mut discover, if discover_failed.is_none() => {
                    let outcome = match answer {
                        Ok(raw) => self.inner.finish_discover(&raw),
                        Err(e) => Err(e),
                    };
                    match outcome {
                        Ok(result) => return Ok(result),
                        Err(e) if !discover_refused(&e) => return Err(e),
                        Err(e) => discover_failed = Some(e),
                    }
                }
                answer = &mut initialize, if initialize_failed.is_none() => match answer {
                    Ok(raw) => return self.inner.finish_initialize(&raw).await,
                    Err(e) => initialize_failed = Some(e),
                },
            }
            if discover_failed.is_some()
                && let Some(e) = initialize_failed.take()
            {
                return Err(e);
            }
        }
    }

    /// `server/discover` (2026-07-28) within `timeout`.
    pub async fn discover(&self, timeout: Duration) -> Result<InitializeResult, ClientError> {
        self.inner.discover(timeout).await
    }

    /// Opens a `subscriptions/listen` stream (2026-07-28) for the list_changed notifications;
    /// they arrive through [`Client::subscribe`]. The request stays open until the connection
    /// closes (a session opened again after a loss listens again). Does nothing in the handshake
    /// era, where those notifications need no request.
    pub fn listen_for_changes(&self) -> Result<(), ClientError> {
        self.inner.listening.store(true, Ordering::Relaxed);
        self.inner.listen()
    }

    /// Perform the initialize handshake (within the startup timeout), whatever the era option.
    pub async fn initialize(&self) -> Result<InitializeResult, ClientError> {
        self.inner.initialize().await
    }
}

impl Inner {
    pub(super) async fn discover(self: &Arc<Self>, timeout: Duration) -> Result<InitializeResult, ClientError> {
        let raw = self.discover_raw(timeout).await?;
        self.finish_discover(&raw)
    }

    async fn discover_raw(self: &Arc<Self>, timeout: Duration) -> Result<Box<RawValue>, ClientError> {
        let watch = self.watch(stateless::SERVER_DISCOVER);
        let result = async {
            let (reply, rx) = oneshot::channel();
            let (id, line) =
                self.session().start_discover(Waiter::new(reply, None, timeout)).map_err(|e| self.refused(e))?;
            if let Some(watch) = &watch {
                watch.sent(&id);
            }
            self.wait(id, line, rx).await.map_err(|e| match e {
                ClientError::Server { error, .. } => {
                    ClientError::Server { method: stateless::SERVER_DISCOVER.to_owned(), error }
                }
                other => other,
            })
        }
        .await;
        if let Some(watch) = watch {
            watch.end(result.as_deref());
        }
        result
    }

    /// The observer's watch of a handshake request (whose params the session writes).
    fn watch(&self, method: &str) -> Option<Box<dyn RequestWatch>> {
        let observer = self.options.observer.as_ref()?;
        Some(observer.start(&RequestStart {
            server: &self.options.label,
            method,
            params: None,
            protocol_version: None,
        }))
    }

    fn finish_discover(&self, raw: &RawValue) -> Result<InitializeResult, ClientError> {
        self.session().finish_discover(raw)?;
        let server = self.session().server().cloned().ok_or_else(|| self.closed_error())?;
        self.session_opened();
        Ok(server)
    }

    /// The `subscriptions/listen` stream of [`Client::listen_for_changes`].
    fn listen(&self) -> Result<(), ClientError> {
        if !self.session().protocol_version().is_some_and(ProtocolVersion::is_stateless) {
            return Ok(());
        }
        let params = serde_json::json!({"notifications": {
            "toolsListChanged": true, "promptsListChanged": true, "resourcesListChanged": true}});
        let (reply, rx) = oneshot::channel();
        // No deadline: the stream is meant to stay open.
        let waiter = Waiter::new(reply, None, Duration::MAX);
        let (_, line) = self
            .session()
            .start_request(stateless::SUBSCRIPTIONS_LISTEN, Some(&params), waiter)
            .map_err(|e| self.refused(e))?;
        self.send_line(line);
        let label = self.options.label.clone();
        tokio::spawn(async move {
            if let Ok(Err(e)) = rx.await {
                tracing::debug!(server = %label, "subscriptions/listen ended: {e}");
            }
        });
        Ok(())
    }

    pub(super) async fn initialize(self: &Arc<Self>) -> Result<InitializeResult, ClientError> {
        let raw = self.initialize_raw().await?;
        self.finish_initialize(&raw).await
    }

    async fn initialize_raw(self: &Arc<Self>) -> Result<Box<RawValue>, ClientError> {
        let watch = self.watch(methods::INITIALIZE);
        let result = async {
            let (reply, rx) = oneshot::channel();
            let timeout = self.options.startup_timeout;
            let (id, line) =
                self.session().start_initialize(Waiter::new(reply, None, timeout)).map_err(|e| self.refused(e))?;
            if let Some(watch) = &watch {
                watch.sent(&id);
            }
            self.wait(id, line, rx).await
        }
        .await;
        if let Some(watch) = watch {
            watch.end(result.as_deref());
        }
        result
    }

    async fn finish_initialize(self: &Arc<Self>, raw: &RawValue) -> Result<InitializeResult, ClientError> {
        let initialized = self.session().finish_initialize(raw)?;
        self.send(initialized).await?;
        let server = self.session().server().cloned().ok_or_else(|| self.closed_error())?;
        self.session_opened();
        Ok(server)
    }

    /// The transport lost the session: nothing but the handshake goes out until it is made
    /// again. A connection opened again gets it at once (the server says nothing on it before);
    /// an expired session when a request needs it (the one that met the expiry, or the next).
    pub(super) fn lose_session(self: &Arc<Self>, loss: SessionLoss) {
        if !self.session().restart() {
            return; // not open, or already being restored
        }
        self.session_ended();
        tracing::info!(server = %self.options.label, "{loss}; the session will be opened again");
        if loss == SessionLoss::Reconnected {
            let inner = Arc::clone(self);
            tokio::spawn(async move {
                // A failure closed the connection, with the reason.
                let _ = inner.restore().await;
            });
        }
    }

    /// Open a lost session again with the handshake it was opened with (`server/discover` for
    /// the 2026-07-28 revision, else `initialize`), once however many callers ask: whoever
    /// comes later finds it open and returns at once. If it cannot be opened again, the
    /// connection is closed with the reason, as when the transport fails.
    pub(super) async fn restore(self: &Arc<Self>) -> Result<(), ClientError> {
        let _one_at_a_time = self.restoring.lock().await;
        let stateless = {
            let session = self.session();
            if !session.is_restoring() {
                return if session.state() == SessionState::Closed { Err(self.closed_error()) } else { Ok(()) };
            }
            session.protocol_version().is_some_and(ProtocolVersion::is_stateless)
        };
        let opened =
            if stateless { self.discover(self.options.startup_timeout).await } else { self.initialize().await };
        match opened {
            Ok(server) => {
                tracing::info!(server = %self.options.label, "the session is open again (protocol {})", server.protocol_version);
                if self.listening.load(Ordering::Relaxed) {
                    self.listen()?;
                }
                Ok(())
            }
            Err(e) => {
                self.shut_down(format!("the session was lost and opening it again failed: {e}"));
                Err(self.closed_error())
            }
        }
    }
}

/// Whether a failed `server/discover` means "not a 2026-07-28 server" (so `initialize` may
/// follow) rather than "no server" (the connection is gone; a 401 needs credentials).
fn discover_refused(error: &ClientError) -> bool {
    match error {
        ClientError::Server { .. } | ClientError::Timeout { .. } | ClientError::BadResult { .. } => true,
        // An HTTP server that does not route the method answers with a status; credentials
        // refused are not a refusal of the method.
        ClientError::Transport(e @ (TransportError::HttpStatus { .. } | TransportError::NoAnswer(_))) => {
            !e.is_auth_refusal()
        }
        ClientError::Session(SessionError::Negotiation(_) | SessionError::BadInitializeResult(_)) => true,
        _ => false,
    }
}

/// Whether a failed `initialize` means "not a handshake-era server any more" (so
/// `server/discover` may follow) rather than "no server". No answer in time is not a refusal:
/// the startup budget is spent.
fn initialize_refused(error: &ClientError) -> bool {
    match error {
        ClientError::Server { .. } | ClientError::BadResult { .. } => true,
        ClientError::Transport(e @ (TransportError::HttpStatus { .. } | TransportError::NoAnswer(_))) => {
            !e.is_auth_refusal()
        }
        ClientError::Session(SessionError::Negotiation(_) | SessionError::BadInitializeResult(_)) => true,
        _ => false,
    }
}
