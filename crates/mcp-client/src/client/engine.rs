//! The engine of a connection: the writer, reader and flush tasks, the direct write path, the
//! waiters kept in the session's table of pending requests, and what every incoming message
//! does.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use mcp_protocol::{
    ClientSession, ErrorObject, Incoming, Message, Outgoing, RequestId, ServerNotification, ServerRequest,
    SessionError, SessionState, error_codes,
};
use mcp_protocol::{encode_error, encode_result};
use serde::Serialize;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::input::Asking;
use super::{ClientError, ClientOptions, Progress};
use crate::deadlines::{self, Expiring};
use crate::transport::{DirectWrite, Exchange, Inbound, TransportError, TransportSink, TransportStream};

pub(super) type Reply = Result<Box<RawValue>, ClientError>;

/// Requests with a timeout this long (`subscriptions/listen`) never keep the watchdog awake.
pub(super) const NO_DEADLINE: Duration = Duration::from_secs(365 * 24 * 3600);

/// What the session keeps for each pending request.
#[derive(Debug)]
pub(super) struct Waiter {
    pub(super) reply: oneshot::Sender<Reply>,
    pub(super) progress: Option<mpsc::Sender<Progress>>,
    pub(super) deadline: Instant,
    pub(super) timeout: Duration,
    /// The latest the deadline may move to when progress restarts the timeout.
    pub(super) last_deadline: Instant,
    /// The newest report that found `progress` full: sent when there is room, before the
    /// answer if there is then.
    pub(super) unsent: Option<Progress>,
}

/// `start + d`, saturating to a far deadline for a duration too large to add (`Duration::MAX`
/// as "never").
pub(super) fn deadline_after(start: Instant, d: Duration) -> Instant {
    start.checked_add(d).unwrap_or_else(|| start + NO_DEADLINE)
}

impl Waiter {
    pub(super) fn new(
        reply: oneshot::Sender<Reply>,
        progress: Option<mpsc::Sender<Progress>>,
        timeout: Duration,
    ) -> Self {
        let now = Instant::now();
        let deadline = deadline_after(now, timeout);
        Self { reply, progress, deadline, timeout, last_deadline: deadline, unsent: None }
    }

    /// Progress may restart the timeout, up to `max_total` after the start.
    pub(super) fn with_max_total(mut self, max_total: Option<Duration>) -> Self {
        if let Some(max) = max_total {
            let start = self.deadline.checked_sub(self.timeout).unwrap_or(self.deadline);
            self.last_deadline = deadline_after(start, max).max(self.deadline);
        }
        self
    }

    /// The server reported progress: the timeout starts again, within the total budget.
    pub(super) fn progressed(&mut self, now: Instant) {
        self.deadline = deadline_after(now, self.timeout).min(self.last_deadline).max(self.deadline);
    }

    /// Passes a report on, never waiting: the channel is bounded, and a reader behind (its
    /// output blocked) misses reports rather than piling them up. The newest one is kept to
    /// send when there is room, so the last word is where things stand, not an early report.
    pub(super) fn report(&mut self, progress: Progress) {
        let Some(tx) = &self.progress else { return };
        self.unsent = match tx.try_send(progress) {
            Err(mpsc::error::TrySendError::Full(progress)) => Some(progress),
            _ => None,
        };
    }

    /// Sends the newest report kept back, if there is room now: before the answer.
    pub(super) fn flush_progress(&mut self) {
        if let (Some(tx), Some(progress)) = (&self.progress, self.unsent.take()) {
            let _ = tx.try_send(progress);
        }
    }
}

/// Writing through a transport's [`DirectWrite`]: callers write at once when nothing is queued;
/// what the pipe does not take waits in `backlog` for the flush task, in order.
pub(super) struct DirectPath {
    pub(super) writer: Arc<dyn DirectWrite>,
    pub(super) max_backlog: usize,
    pub(super) state: Mutex<DirectState>,
    pub(super) wake: tokio::sync::Notify,
}

#[derive(Default)]
pub(super) struct DirectState {
    pub(super) backlog: Vec<u8>,
    /// The flush task holds bytes taken from the backlog that are not all written yet.
    pub(super) busy: bool,
}

impl DirectPath {
    pub(super) fn state(&self) -> MutexGuard<'_, DirectState> {
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Write one message (a newline is added), or queue it behind earlier ones.
    ///
    /// `coalesce`: other requests are in flight and the server shares our one CPU
    /// ([`DirectWrite::shares_one_cpu`]), so this message may wait for the flush task, which
    /// writes every message queued in the meantime in one write (one wake-up of the server
    /// instead of one per message). A lone call is written at once.
    pub(super) fn push(&self, message: Outgoing, coalesce: bool) -> Result<(), PushError> {
        let mut bytes = message.into_text().into_bytes();
        bytes.push(b'\n');
        let mut state = self.state();
        if coalesce && state.backlog.is_empty() && !state.busy {
            state.backlog = bytes;
        } else if state.backlog.is_empty() && !state.busy {
            match self.writer.try_write(&bytes) {
                Ok(n) if n == bytes.len() => return Ok(()),
                Ok(n) => state.backlog.extend_from_slice(&bytes[n..]),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => state.backlog = bytes,
                Err(e) => return Err(PushError::failed_write(&e)),
            }
        } else if state.backlog.len() + bytes.len() > self.max_backlog {
            return Err(PushError::Fatal(format!(
                "the server is not reading its input: {} bytes are waiting (limit {}, max_backlog_bytes)",
                state.backlog.len(),
                self.max_backlog
            )));
        } else {
            state.backlog.extend_from_slice(&bytes);
        }
        drop(state);
        self.wake.notify_one();
        Ok(())
    }

    pub(super) fn drained(&self) -> bool {
        let state = self.state();
        state.backlog.is_empty() && !state.busy
    }
}

/// Why [`DirectPath::push`] could not take a message.
pub(super) enum PushError {
    /// Fail at once (the server does not read its input, or the write failed oddly).
    Fatal(String),
    /// The pipe broke: the server is probably exiting, and the reader will say how.
    Broken(String),
}

impl PushError {
    pub(super) fn failed_write(e: &std::io::Error) -> Self {
        let reason = format!("could not write to the server: {e}");
        if e.kind() == std::io::ErrorKind::BrokenPipe { Self::Broken(reason) } else { Self::Fatal(reason) }
    }
}

/// How long a failed write waits for the reader's account of the server's end (exit status,
/// stderr) before failing everything with the write error itself.
pub(super) const WRITE_FAILURE_GRACE: Duration = Duration::from_secs(5);

pub(super) struct Inner {
    pub(super) session: Mutex<ClientSession<Waiter>>,
    /// `None` asks the writer to close the sink and stop.
    pub(super) outgoing: mpsc::Sender<Option<Outgoing>>,
    pub(super) direct: Option<DirectPath>,
    /// The transport's request path: callers send and read their own answers.
    pub(super) exchange: Option<Arc<dyn Exchange>>,
    pub(super) notifications: broadcast::Sender<ServerNotification>,
    pub(super) closed_reason: Mutex<Option<String>>,
    /// How the server's process ended, when the transport knows.
    pub(super) exit: Mutex<Option<crate::ProcessExit>>,
    /// Flips to `true` once, when the connection is gone.
    pub(super) closed: tokio::sync::watch::Sender<bool>,
    pub(super) options: ClientOptions,
    /// Elicitations being answered (a person is asked) and since when the first of them: the
    /// time a person takes does not count against this connection's request timeouts.
    pub(super) asking: Mutex<(usize, Option<Instant>)>,
    /// Held while a lost session is opened again, so that it is opened once.
    pub(super) restoring: tokio::sync::Mutex<()>,
    /// [`crate::Client::listen_for_changes`] was asked: a session opened again listens again.
    pub(super) listening: AtomicBool,
    /// The observer's guard of the open session, dropped when it ends.
    pub(super) session_guard: Mutex<Option<crate::observe::SessionGuard>>,
    /// The server's requests being answered now (roots, sampling, elicitation), at most
    /// [`MAX_SERVER_REQUESTS`].
    pub(super) serving: Arc<AtomicUsize>,
    /// Lines of the server's that were not JSON-RPC, skipped so far.
    pub(super) skipped: AtomicU64,
}

/// The most requests of one server answered at once: each may wait minutes for a person, and a
/// server may send them without end. One beyond is refused at once.
pub(super) const MAX_SERVER_REQUESTS: usize = 16;
/// The skipped non-JSON-RPC lines each said in the log; after them, every power of two.
const SKIPPED_LINES_SAID: u64 = 10;

impl Inner {
    pub(super) fn session(&self) -> MutexGuard<'_, ClientSession<Waiter>> {
        // A panic while holding the lock cannot leave the table half-updated in a way that
        // matters more than losing the connection, so recover the guard.
        self.session.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    pub(super) fn closed_error(&self) -> ClientError {
        let reason = self
            .closed_reason
            .lock()
            .ok()
            .and_then(|r| r.clone())
            .unwrap_or_else(|| "the connection is closed".to_owned());
        ClientError::ConnectionClosed { reason }
    }

    /// Why the session refused to start a request: once the connection is gone, the reason it
    /// went (exit status, stderr tail), not a bare "the session is closed".
    pub(super) fn refused(&self, error: SessionError) -> ClientError {
        match error {
            SessionError::Closed => self.closed_error(),
            other => ClientError::Session(other),
        }
    }

    /// A session opened: the observer's guard of it is kept (one before it ends).
    pub(super) fn session_opened(&self) {
        let Some(observer) = &self.options.observer else { return };
        let version = self.session().protocol_version();
        let guard = observer.session(&self.options.label, version);
        let old = self.session_guard.lock().ok().and_then(|mut g| std::mem::replace(&mut *g, guard));
        drop(old);
    }

    /// The session ended: the observer's guard of it is dropped (outside the lock).
    pub(super) fn session_ended(&self) {
        let old = self.session_guard.lock().ok().and_then(|mut g| g.take());
        drop(old);
    }

    /// Records how the server's process ended (before [`shut_down`](Self::shut_down), so
    /// whoever wakes on the close reads it).
    pub(super) fn set_exit(&self, exit: Option<crate::ProcessExit>) {
        if let Ok(mut e) = self.exit.lock() {
            *e = exit;
        }
    }

    /// The transport is gone: fail every pending request at once, with the reason.
    pub(super) fn shut_down(&self, reason: String) {
        if let Ok(mut r) = self.closed_reason.lock()
            && r.is_none()
        {
            *r = Some(reason.clone());
        }
        self.closed.send_replace(true);
        self.session_ended();
        let pending = self.session().close();
        for (_, pending) in pending {
            let _ = pending.payload.reply.send(Err(ClientError::ConnectionClosed { reason: reason.clone() }));
        }
    }

    /// A write failed: the server is most likely gone, and the reader is about to say how (a
    /// stdio server's exit status and stderr), which tells the user more than "broken pipe".
    /// Let it, for a moment; then shut down with the write error if it has not.
    pub(super) async fn write_failed(&self, reason: String) {
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(WRITE_FAILURE_GRACE, closed.wait_for(|c| *c)).await;
        self.shut_down(reason);
    }

    pub(super) fn send_line(&self, message: Outgoing) {
        if let Some(direct) = &self.direct {
            if let Err(PushError::Fatal(reason) | PushError::Broken(reason)) = direct.push(message, false) {
                self.shut_down(reason);
            }
            return;
        }
        // Fire-and-forget messages (cancellations, replies) must not block the reader; if the
        // writer's queue is full or gone the connection is failing anyway.
        if let Err(e) = self.outgoing.try_send(Some(message)) {
            tracing::debug!(server = %self.options.label, "dropped an outgoing line: {e}");
        }
    }

    pub(super) async fn send(self: &Arc<Self>, line: Outgoing) -> Result<(), ClientError> {
        if let Some(exchange) = &self.exchange {
            if self.session().state() == SessionState::Closed {
                return Err(self.closed_error());
            }
            let inner = self;
            exchange.exchange(line, &|inbound| handle_inbound(inner, inbound)).await;
            return Ok(());
        }
        if let Some(direct) = &self.direct {
            let others_in_flight = {
                let session = self.session();
                if session.state() == SessionState::Closed {
                    return Err(self.closed_error());
                }
                session.pending_count() > 1
            };
            // Asked only once others are in flight: a lone call never needs the answer.
            let coalesce = others_in_flight && direct.writer.shares_one_cpu();
            return match direct.push(line, coalesce) {
                Ok(()) => Ok(()),
                Err(PushError::Fatal(reason)) => {
                    self.shut_down(reason);
                    Err(self.closed_error())
                }
                Err(PushError::Broken(reason)) => {
                    self.write_failed(reason).await;
                    Err(self.closed_error())
                }
            };
        }
        self.outgoing.send(Some(line)).await.map_err(|_| self.closed_error())
    }

    pub(super) async fn wait(
        self: &Arc<Self>,
        id: RequestId,
        line: Outgoing,
        rx: oneshot::Receiver<Reply>,
    ) -> Result<Box<RawValue>, ClientError> {
        let mut guard = PendingGuard { inner: self, id: Some(id) };
        deadlines::wake();
        let reply = match &self.exchange {
            Some(exchange) => {
                // The answer usually comes back through the exchange itself; the watchdog or the
                // connection's end may answer first, and then the exchange is abandoned.
                let inner = self;
                let deliver = |inbound| handle_inbound(inner, inbound);
                let sent = exchange.exchange(line, &deliver);
                tokio::pin!(sent);
                let mut rx = rx;
                tokio::select! {
                    biased;
                    reply = &mut rx => reply,
                    () = &mut sent => rx.await,
                }
            }
            None => {
                self.send(line).await?;
                // The reader answers, or the watchdog fails it with a timeout, or the
                // connection's end drops the sender.
                rx.await
            }
        };
        guard.id = None;
        reply.unwrap_or_else(|_| Err(self.closed_error()))
    }
}

impl Expiring for Inner {
    fn has_deadlines(&self) -> bool {
        !self.session().pending_where(|w| w.timeout < NO_DEADLINE).is_empty()
    }

    /// Fails the requests whose deadline passed: each gets `Timeout`, and the server gets
    /// `notifications/cancelled`. Nothing expires while a person answers an elicitation.
    fn expire(&self, now: Instant) {
        if self.asking.lock().map(|a| a.0 > 0).unwrap_or(false) {
            return;
        }
        let expired: Vec<(Waiter, Option<Outgoing>, String)> = {
            let mut session = self.session();
            let ids = session.pending_where(|w| w.deadline <= now);
            ids.iter()
                .filter_map(|id| {
                    let method = session.pending_method(id)?.to_owned();
                    session.cancel(id, "timed out").map(|(waiter, line)| (waiter, line, method))
                })
                .collect()
        };
        for (waiter, line, method) in expired {
            if let Some(line) = line {
                self.send_line(line);
            }
            let _ = waiter.reply.send(Err(ClientError::Timeout { method, after: waiter.timeout }));
        }
    }
}

/// Cancels the request when the caller stops waiting before the answer came.
pub(super) struct PendingGuard<'a> {
    pub(super) inner: &'a Inner,
    pub(super) id: Option<RequestId>,
}

impl PendingGuard<'_> {
    pub(super) fn cancel(&mut self, reason: &str) {
        if let Some(id) = self.id.take() {
            let cancelled = self.inner.session().cancel(&id, reason);
            if let Some((_, Some(line))) = cancelled {
                self.inner.send_line(line);
            }
        }
    }
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        self.cancel("the client stopped waiting");
    }
}

/// Writes the direct path's backlog when the pipe did not take a message at once.
pub(super) async fn flush_loop(inner: Arc<Inner>) {
    let Some(direct) = &inner.direct else { return };
    loop {
        direct.wake.notified().await;
        // Let the callers that are ready now queue theirs first: one write for all of them.
        tokio::task::yield_now().await;
        loop {
            let chunk = {
                let mut state = direct.state();
                if state.backlog.is_empty() {
                    state.busy = false;
                    break;
                }
                state.busy = true;
                std::mem::take(&mut state.backlog)
            };
            let mut written = 0;
            while written < chunk.len() {
                let attempt = match direct.writer.writable().await {
                    Ok(()) => direct.writer.try_write(&chunk[written..]),
                    Err(e) => Err(e),
                };
                match attempt {
                    Ok(n) => written += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {}
                    Err(e) => {
                        match PushError::failed_write(&e) {
                            PushError::Broken(reason) => inner.write_failed(reason).await,
                            PushError::Fatal(reason) => inner.shut_down(reason),
                        }
                        return;
                    }
                }
            }
        }
    }
}

/// Writes what callers queued, batching whatever is waiting; `None` asks it to close the sink.
pub(super) async fn write_loop(
    inner: Arc<Inner>,
    mut sink: Box<dyn TransportSink>,
    mut rx: mpsc::Receiver<Option<Outgoing>>,
) {
    // Grown by the first batch (stdio callers mostly write through the direct path).
    let mut batch: Vec<Outgoing> = Vec::new();
    let mut closing = false;
    while !closing {
        match rx.recv().await {
            Some(Some(message)) => batch.push(message),
            Some(None) | None => closing = true,
        }
        // Take whatever else is already queued, so concurrent callers share one write.
        while batch.len() < 1024 && !closing {
            match rx.try_recv() {
                Ok(Some(message)) => batch.push(message),
                Ok(None) => closing = true,
                Err(_) => break,
            }
        }
        if !batch.is_empty() {
            if let Err(e) = sink.send(&batch).await {
                let reason = format!("could not write to the server: {e}");
                match e {
                    TransportError::Io { source, .. } if source.kind() == std::io::ErrorKind::BrokenPipe => {
                        inner.write_failed(reason).await;
                    }
                    _ => inner.shut_down(reason),
                }
                closing = true;
            }
            batch.clear();
        }
    }
    if let Some(direct) = &inner.direct {
        // Let what callers already wrote reach the server before its stdin closes.
        for _ in 0..200 {
            if direct.drained() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    if let Err(e) = sink.close().await {
        tracing::warn!(server = %inner.options.label, "closing the transport: {e}");
    }
}

pub(super) async fn read_loop(inner: Arc<Inner>, mut stream: Box<dyn TransportStream>) {
    let label = inner.options.label.clone();
    loop {
        match stream.recv().await {
            Ok(Some(inbound)) => handle_inbound(&inner, inbound),
            Ok(None) => {
                let reason = stream.closed_reason().await;
                inner.set_exit(stream.exit());
                inner.shut_down(reason);
                return;
            }
            Err(e) if !e.is_fatal() => tracing::warn!(server = %label, "skipped a message: {e}"),
            Err(e) => {
                let reason = format!("{e}; {}", stream.closed_reason().await);
                inner.set_exit(stream.exit());
                inner.shut_down(reason);
                return;
            }
        }
    }
}

/// What the transport's stream yielded, or an exchange delivered.
pub(super) fn handle_inbound(inner: &Arc<Inner>, inbound: Inbound) {
    match inbound {
        Inbound::Message(text) => handle_incoming(inner, &text),
        Inbound::Decoded(message) => handle_message(inner, message),
        Inbound::Failed { id, error } => {
            let pending = inner.session().fail(&id);
            match pending {
                Some(pending) => {
                    let _ = pending.payload.reply.send(Err(ClientError::Transport(error)));
                }
                None => {
                    tracing::debug!(server = %inner.options.label, "a failure for no pending request ({id:?}): {error}")
                }
            }
        }
        Inbound::SessionLost(loss) => inner.lose_session(loss),
    }
}

pub(super) fn handle_incoming(inner: &Arc<Inner>, text: &str) {
    let label = &inner.options.label;
    let message = match Message::decode_str(text) {
        Ok(m) => m,
        Err(e) => {
            let skipped = inner.skipped.fetch_add(1, Ordering::Relaxed) + 1;
            if skipped <= SKIPPED_LINES_SAID || skipped.is_power_of_two() {
                let shown: String = text.chars().take(200).collect();
                tracing::warn!(server = %label, skipped, "skipped a line that is not JSON-RPC ({e}): {shown}");
            }
            if let Some(id) = e.id.clone().filter(|id| answerable(inner, Some(id))) {
                inner.send_line(Outgoing::response(encode_error(id.clone(), e.to_error_object()), id));
            }
            return;
        }
    };
    handle_message(inner, message);
}

pub(super) fn handle_message(inner: &Arc<Inner>, message: Message) {
    let label = &inner.options.label;
    let incoming = inner.session().receive(message);
    match incoming {
        Incoming::Response { mut payload, outcome, method, .. } => {
            let reply = outcome.map_err(|error| ClientError::Server { method, error: Box::new(error) });
            payload.flush_progress();
            let _ = payload.reply.send(reply);
        }
        Incoming::UnmatchedResponse { id } => {
            tracing::debug!(server = %label, "a response to no pending request (id {id:?}); ignored");
        }
        Incoming::ServerReportedError(error) => {
            tracing::warn!(server = %label, "the server reported an error without an id: {error}");
        }
        Incoming::InvalidRequest { reply } => {
            if answerable(inner, reply.id()) {
                inner.send_line(reply);
            }
        }
        Incoming::Request { id, request } => answer_server_request(inner, id, request),
        Incoming::Notification(mut notification) => {
            // Kept in the notification ring for whoever listens: a log message's data is cut
            // first (a server's may be megabytes, and the ring holds dozens).
            if let ServerNotification::Log(log) = &mut notification {
                mcp_safety::text::cap_json(&mut log.data, MAX_LOG_DATA_CHARS);
            }
            // A progress message is a status line; reports wait in a channel of dozens.
            if let ServerNotification::Progress(progress) = &mut notification
                && let Some(message) = &mut progress.message
                && message.len() > MAX_PROGRESS_MESSAGE_CHARS
            {
                *message = mcp_safety::text::cut(message, MAX_PROGRESS_MESSAGE_CHARS);
            }
            match &notification {
                ServerNotification::Progress(progress) => {
                    let mut session = inner.session();
                    if let Some(waiter) = session.pending_mut(&progress.progress_token)
                        && waiter.progress.is_some()
                    {
                        waiter.progressed(Instant::now());
                        waiter.report(progress.clone());
                    }
                    return;
                }
                ServerNotification::Log(log) => {
                    tracing::info!(server = %label, level = %log.level, "server log: {}", log.data);
                }
                _ => {}
            }
            // No subscriber is fine: nobody asked.
            let _ = inner.notifications.send(notification);
        }
    }
}

/// The most characters of a progress message kept.
const MAX_PROGRESS_MESSAGE_CHARS: usize = 1000;

/// The longest string id of a server's request the host answers. Each answer echoes the id,
/// and answers wait in the writer's queue (thousands of them, when the server is slow to take
/// them): a server sending megabyte ids could pile up gigabytes there.
pub(crate) const MAX_ANSWERED_ID_BYTES: usize = 1024;

/// Whether a server's request with this id is answered (see [`MAX_ANSWERED_ID_BYTES`]).
fn answerable(inner: &Inner, id: Option<&RequestId>) -> bool {
    match id {
        Some(RequestId::String(s)) if s.len() > MAX_ANSWERED_ID_BYTES => {
            tracing::warn!(
                server = %inner.options.label,
                "a request with an id of {} bytes was not answered (at most {MAX_ANSWERED_ID_BYTES})",
                s.len()
            );
            false
        }
        _ => true,
    }
}

pub(super) fn answer_server_request(inner: &Arc<Inner>, id: RequestId, request: ServerRequest) {
    if !answerable(inner, Some(&id)) {
        return;
    }
    match request {
        ServerRequest::Ping => inner.send_line(reply_line(id, Ok(serde_json::json!({})))),
        ServerRequest::Unknown { method } => inner.send_line(reply_line::<Value>(
            id,
            Err(ErrorObject::new(
                error_codes::METHOD_NOT_FOUND,
                format!("Method not found: {}", mcp_safety::text::one_line(&method, 200)),
            )),
        )),
        request @ (ServerRequest::ListRoots | ServerRequest::CreateMessage(_) | ServerRequest::Elicit(_)) => {
            // Handlers may ask a person; never block the reader on them. A server that asks
            // more at once is refused, so what it sends cannot pile up here.
            let Some(serving) = ServingGuard::start(&inner.serving) else {
                let error = ErrorObject::new(
                    error_codes::INTERNAL_ERROR,
                    format!("the host answers at most {MAX_SERVER_REQUESTS} requests of a server at once"),
                );
                inner.send_line(reply_line::<Value>(id, Err(error)));
                return;
            };
            let inner = Arc::clone(inner);
            tokio::spawn(async move {
                let _serving = serving;
                let handler = Arc::clone(&inner.options.handler);
                let line = match request {
                    ServerRequest::ListRoots => reply_line(id, handler.list_roots().await),
                    ServerRequest::CreateMessage(params) => reply_line(id, handler.create_message(params).await),
                    ServerRequest::Elicit(params) => {
                        let asking = Asking::start(&inner);
                        let answer = handler.elicit(params).await;
                        drop(asking);
                        reply_line(id, answer)
                    }
                    _ => return,
                };
                inner.send_line(line);
            });
        }
        // A kind of request a later revision added, which this client does not answer.
        _ => inner.send_line(reply_line::<Value>(
            id,
            Err(ErrorObject::new(error_codes::METHOD_NOT_FOUND, "Method not found")),
        )),
    }
}

/// The most of a server log message's data kept or passed on, in characters (as text, cut,
/// when longer as JSON).
pub const MAX_LOG_DATA_CHARS: usize = 8 * 1024;

/// One of the server's requests being answered: counted in [`Inner::serving`] until dropped.
struct ServingGuard(Arc<AtomicUsize>);

impl ServingGuard {
    fn start(serving: &Arc<AtomicUsize>) -> Option<Self> {
        serving
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < MAX_SERVER_REQUESTS).then_some(n + 1))
            .ok()
            .map(|_| Self(Arc::clone(serving)))
    }
}

impl Drop for ServingGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

pub(super) fn reply_line<T: Serialize>(id: RequestId, result: Result<T, ErrorObject>) -> Outgoing {
    let text = match result {
        Ok(result) => encode_result(id.clone(), &result),
        Err(error) => encode_error(id.clone(), error),
    };
    Outgoing::response(text, id)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A full channel keeps the newest report back and sends it when there is room (and before
    /// the answer): the last word is where things stand, not an early report.
    #[test]
    fn the_newest_report_is_kept_back_for_a_full_channel() {
        let (tx, mut rx) = mpsc::channel(2);
        let (reply, _answer) = oneshot::channel();
        let mut waiter = Waiter::new(reply, Some(tx), Duration::from_secs(60));
        let report = |n: f64| Progress {
            progress_token: RequestId::Number(1),
            progress: n,
            total: Some(4.0),
            message: None,
            extra: Default::default(),
        };
        for n in 1..=4 {
            waiter.report(report(f64::from(n)));
        }
        assert_eq!(rx.try_recv().map(|p| p.progress).ok(), Some(1.0));
        waiter.flush_progress();
        let rest: Vec<f64> = std::iter::from_fn(|| rx.try_recv().ok()).map(|p| p.progress).collect();
        assert_eq!(rest, [2.0, 4.0]);
        assert!(waiter.unsent.is_none());
    }
}
