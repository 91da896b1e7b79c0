//! The client connection: drives a [`ClientSession`] over any [`Transport`].
//!
//! One writer task owns the sink and batches whatever is queued; one reader task owns the
//! stream, classifies each message through the session and wakes the caller waiting for it.
//! Many requests can be in flight; each has its own timeout, and a caller that stops waiting
//! (timeout or drop) sends `notifications/cancelled`.
//!
//! By job: `engine` (the tasks, the direct write path, the table of waiters and what comes in),
//! `handshake` (opening the session in either era), `input` (input-required rounds and
//! URL elicitations), `methods` (the typed method API), `options` and `error`.

mod engine;
mod error;
mod handshake;
mod input;
mod methods;
mod options;

use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex};

use mcp_protocol::{
    ClientSession, InitializeResult, Outgoing, ProtocolVersion, ServerNotification, SessionConfig, SessionError,
    SessionState, encode_notification,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::deadlines::{self, Expiring};
use crate::observe::RequestWatch;
use crate::transport::{Transport, TransportError, TransportSink, TransportStream};
use engine::{DirectPath, DirectState, Inner, Waiter, flush_loop, read_loop, write_loop};

pub use engine::MAX_LOG_DATA_CHARS;
pub use error::ClientError;
pub use input::{MAX_INPUT_ROUNDS, MAX_URL_ELICITATIONS};
pub use options::{
    ClientOptions, DEFAULT_MAX_BACKLOG_BYTES, DEFAULT_MAX_RESOURCE_BYTES, DEFAULT_NOTIFICATION_CAPACITY,
    DISCOVER_PROBE_TIMEOUT, Era, ListLimits, PROGRESS_BACKLOG, Progress, RequestOptions,
};

/// A connection to one MCP server.
///
/// Dropping it stops its tasks and the transport (a stdio child is killed and reaped); call
/// [`Client::close`] for a graceful shutdown.
pub struct Client {
    inner: Arc<Inner>,
    writer: Mutex<Option<JoinHandle<()>>>,
    reader: JoinHandle<()>,
    flusher: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Client").field("label", &self.inner.options.label).finish_non_exhaustive()
    }
}

impl Client {
    /// Start the connection's tasks without the handshake (subscribe first, then
    /// [`Client::initialize`], to see notifications sent right after it).
    pub fn start(transport: impl Transport + 'static, options: ClientOptions) -> Client {
        let (sink, stream): (Box<dyn TransportSink>, Box<dyn TransportStream>) = Box::new(transport).split();
        let mut config = SessionConfig::new(options.client_info.clone(), options.capabilities.clone());
        config.offered_version = options.offered_version;
        let (outgoing, outgoing_rx) = mpsc::channel(4096);
        let direct = sink.direct().map(|writer| DirectPath {
            writer,
            max_backlog: options.max_backlog_bytes,
            state: Mutex::new(DirectState::default()),
            wake: tokio::sync::Notify::new(),
        });
        let exchange = if direct.is_none() { sink.exchange() } else { None };
        let (notifications, _) = broadcast::channel(options.notification_capacity.max(1));
        let inner = Arc::new(Inner {
            session: Mutex::new(ClientSession::new(config)),
            outgoing,
            direct,
            exchange,
            notifications,
            closed_reason: Mutex::new(None),
            exit: Mutex::new(None),
            closed: tokio::sync::watch::Sender::new(false),
            options,
            asking: Mutex::new((0, None)),
            restoring: tokio::sync::Mutex::new(()),
            listening: AtomicBool::new(false),
            session_guard: Mutex::new(None),
            serving: Arc::default(),
            skipped: AtomicU64::new(0),
        });
        let writer = tokio::spawn(write_loop(Arc::clone(&inner), sink, outgoing_rx));
        let reader = tokio::spawn(read_loop(Arc::clone(&inner), stream));
        let watched: Arc<dyn Expiring> = inner.clone();
        deadlines::watch(Arc::downgrade(&watched));
        let flusher = inner.direct.is_some().then(|| tokio::spawn(flush_loop(Arc::clone(&inner))));
        Client { inner, writer: Mutex::new(Some(writer)), reader, flusher }
    }

    /// Start and open the session the way [`ClientOptions::era`] says.
    pub async fn connect(transport: impl Transport + 'static, options: ClientOptions) -> Result<Client, ClientError> {
        let client = Client::start(transport, options);
        client.open().await?;
        Ok(client)
    }

    /// Subscribe to server notifications (list_changed and the rest). A subscriber that falls
    /// more than `notification_capacity` behind loses the oldest ones.
    pub fn subscribe(&self) -> broadcast::Receiver<ServerNotification> {
        self.inner.notifications.subscribe()
    }

    /// The server's initialize result, once initialized.
    pub fn server_info(&self) -> Option<InitializeResult> {
        self.inner.session().server().cloned()
    }

    /// The negotiated revision, once initialized.
    pub fn protocol_version(&self) -> Option<ProtocolVersion> {
        self.inner.session().protocol_version()
    }

    /// How the server's process ended, once the connection is gone and the transport knows
    /// (a stdio server that exited); `None` otherwise.
    pub fn exit(&self) -> Option<crate::ProcessExit> {
        self.inner.exit.lock().ok().and_then(|e| *e)
    }

    /// Waits until the connection is gone (the server exited, the transport failed, or it was
    /// closed) and says why.
    pub async fn closed(&self) -> String {
        let mut closed = self.inner.closed.subscribe();
        // An error means the sender is gone, which only happens with the client itself.
        let _ = closed.wait_for(|c| *c).await;
        match self.inner.closed_error() {
            ClientError::ConnectionClosed { reason } => reason,
            other => other.to_string(),
        }
    }

    /// Whether the connection is still usable.
    pub fn is_open(&self) -> bool {
        self.inner.session().state() != SessionState::Closed
    }

    /// How many requests are waiting for answers.
    pub fn pending_requests(&self) -> usize {
        self.inner.session().pending_count()
    }

    /// One request and its answer. A request the transport could not run because the session
    /// was lost ([`TransportError::SessionLost`]) is sent once more after the session is opened
    /// again; one started while a lost session is being opened again waits for it.
    async fn request_once<T: Serialize + ?Sized>(
        &self,
        method: &str,
        params: Option<&T>,
        options: &RequestOptions,
        watch: Option<&dyn RequestWatch>,
    ) -> Result<Box<RawValue>, ClientError> {
        let timeout = options.timeout.unwrap_or(self.inner.options.request_timeout);
        let (mut waited, mut resent) = (false, false);
        loop {
            let (reply, rx) = oneshot::channel();
            let started = {
                let mut session = self.inner.session();
                match &options.progress {
                    Some(progress) => {
                        let waiter =
                            Waiter::new(reply, Some(progress.clone()), timeout).with_max_total(options.max_total);
                        session.start_request_with_progress(method, params, waiter)
                    }
                    None => session.start_request(method, params, Waiter::new(reply, None, timeout)),
                }
            };
            let (id, line) = match started {
                Ok(started) => started,
                Err(SessionError::NotReady { .. }) if !waited && self.inner.session().is_restoring() => {
                    waited = true;
                    self.inner.restore().await?;
                    continue;
                }
                Err(e) => return Err(self.inner.refused(e)),
            };
            if let Some(watch) = watch {
                watch.sent(&id);
            }
            return match self.inner.wait(id, line, rx).await {
                Err(ClientError::Transport(TransportError::SessionLost(why))) if !resent => {
                    tracing::debug!(server = %self.inner.options.label, "{method} not run ({why}); sent again once the session is open");
                    resent = true;
                    self.inner.restore().await?;
                    continue;
                }
                Err(ClientError::Server { error, .. }) => Err(ClientError::Server { method: method.to_owned(), error }),
                other => other,
            };
        }
    }

    /// Send a request and decode its result.
    pub async fn request<T: Serialize + ?Sized, R: DeserializeOwned>(
        &self,
        method: &str,
        params: Option<&T>,
        options: RequestOptions,
    ) -> Result<R, ClientError> {
        let raw = self.request_raw(method, params, options).await?;
        read_result(method, &raw)
    }

    /// Send a notification.
    pub async fn notify<T: Serialize + ?Sized>(&self, method: &str, params: Option<&T>) -> Result<(), ClientError> {
        let line = encode_notification(method, params)
            .map_err(|source| SessionError::Encode { method: method.to_owned(), source })?;
        self.inner.send(Outgoing::notification(line, method)).await
    }

    /// Close gracefully: pending requests fail and the server is told they are cancelled, the
    /// transport is closed (a stdio child gets stdin closed, then SIGTERM, then SIGKILL; what is
    /// left of its process group is killed) and reaped.
    pub async fn close(&self) -> Result<(), ClientError> {
        // Requests still waiting are given up, and the server is told (`notifications/cancelled`)
        // before its input closes, as it would be had each caller stopped waiting.
        let reason = "closed by the client";
        let cancelled: Vec<(Waiter, Option<Outgoing>)> = {
            let mut session = self.inner.session();
            let ids = session.pending_where(|_| true);
            ids.iter().filter_map(|id| session.cancel(id, reason)).collect()
        };
        for (waiter, line) in cancelled {
            if let Some(line) = line {
                self.inner.send_line(line);
            }
            let _ = waiter.reply.send(Err(ClientError::ConnectionClosed { reason: reason.to_owned() }));
        }
        self.inner.shut_down(reason.to_owned());
        self.reader.abort();
        // The writer waits for the direct path to drain, then closes the sink when it reads the close marker.
        let _ = self.inner.outgoing.send(None).await;
        let writer = self.writer.lock().ok().and_then(|mut w| w.take());
        if let Some(writer) = writer {
            let _ = writer.await;
        }
        Ok(())
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.reader.abort();
        if let Some(flusher) = &self.flusher {
            flusher.abort();
        }
        if let Ok(Some(writer)) = self.writer.lock().map(|mut w| w.take()) {
            writer.abort();
        }
        self.inner.shut_down("the client was dropped".to_owned());
    }
}

/// A result read into `R`, unless it is too dense to read (values cost up to ~100x their text).
pub(crate) fn read_result<R: DeserializeOwned>(method: &str, raw: &RawValue) -> Result<R, ClientError> {
    mcp_protocol::from_str_bounded(
        raw.get(),
        |dense| ClientError::TooDense { method: method.to_owned(), dense },
        |source| ClientError::BadResult { method: method.to_owned(), source },
    )
}
