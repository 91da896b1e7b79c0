//! The stdio front: one client, newline-delimited JSON on the gateway's stdin and stdout (so a
//! host's configuration can say `"command": "mcp-harness", "args": ["serve"]`).
//!
//! Requests run concurrently, each in a task of its own; answers are written as they come, one
//! line each, by the one loop that owns the writer. A line longer than the limit is skipped
//! (with an error answer) without ever being held whole. `notifications/cancelled` stops the
//! request it names (its upstream call is cancelled too) and no answer is sent for it. The
//! client's answers to the gateway's own requests (an approval form) go to the session that
//! asked. End of input ends the front once every request in flight has been answered.

use std::collections::HashMap;
use std::os::fd::{AsFd, BorrowedFd};
use std::os::unix::fs::FileTypeExt;
use std::sync::Arc;

use mcp_protocol::{
    ClientMessage, ClientNotification, ClientRequest, DecodeErrorKind, ErrorObject, IncomingRequest, Message,
    RequestId, error_codes,
};
use nix::fcntl::{FcntlArg, OFlag, fcntl};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::sync::{broadcast, mpsc};
use tokio::task::{AbortHandle, JoinSet};

use crate::backend::{BackendEvent, Caller};
use crate::gateway::{Era, Gateway, Reply, Scope, list_changed_line, response_line};
use crate::observe::Answered;
use crate::session::{Outbound, Session};
use crate::subscriptions::session_event_line;

/// Limits of the stdio front.
#[derive(Debug, Clone)]
pub struct StdioOptions {
    /// Longest line read, in bytes (longer ones are refused and skipped).
    pub max_line_bytes: usize,
    /// Most requests running at once; a request beyond them is refused at once (reading goes
    /// on: the client's answers to the gateway's questions and its cancellations come on the
    /// same stream, and must not wait behind the calls they unblock).
    pub max_in_flight: usize,
    /// How many lines may wait for the writer.
    pub queue: usize,
    /// The client shares this process's one CPU: an answer waits while other calls finishing
    /// now queue theirs, and all of them go in one write (one wake-up of the client instead
    /// of one per answer). With a CPU of its own the client is better off reading each answer
    /// at once, in parallel with the calls still running; a lone call's answer always goes at once.
    pub coalesce_answers: bool,
}

impl Default for StdioOptions {
    fn default() -> Self {
        Self { max_line_bytes: 16 * 1024 * 1024, max_in_flight: 256, queue: 1024, coalesce_answers: false }
    }
}

/// Why the stdio front stopped.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StdioError {
    /// Reading the input failed.
    #[error("reading the client's input failed: {0}")]
    Read(std::io::Error),
    /// Writing the output failed (the client went away).
    #[error("writing to the client failed: {0}")]
    Write(std::io::Error),
}

/// A stdio `subscriptions/listen` stream: its id and what it wants.
struct Listener {
    id: RequestId,
    filter: crate::gateway::ListenFilter,
}

/// Serves one client on `reader` / `writer` until the input ends (or the output fails).
pub async fn serve_stdio<R, W>(
    gateway: Gateway,
    reader: R,
    mut writer: W,
    options: StdioOptions,
) -> Result<(), StdioError>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut reader = BufReader::with_capacity(64 * 1024, reader);
    let (tx, mut rx) = mpsc::channel::<String>(options.queue.max(1));
    let out = Outbound::new(tx.clone());
    let mut events = gateway.backend().events();
    let mut tasks: JoinSet<()> = JoinSet::new();
    let mut running: HashMap<RequestId, AbortHandle> = HashMap::new();
    let mut session: Option<Arc<Session>> = None;
    let mut listeners: Vec<Listener> = Vec::new();
    let mut line = Vec::new();
    // Whether the line being read was too long (kept, like `line`, across a read the loop
    // dropped for another branch).
    let mut too_long = false;
    let mut input_open = true;
    // Lines this loop answers itself, written before it waits again (never through the
    // bounded queue it alone drains).
    let mut immediate: Vec<String> = Vec::new();
    let mut out_buf = Vec::new();
    loop {
        for text in immediate.drain(..) {
            write_line(&mut writer, &mut out_buf, &text, None).await?;
        }
        if !input_open && tasks.is_empty() && rx.is_empty() {
            break;
        }
        tokio::select! {
            biased;
            Some(text) = rx.recv() => {
                // Other calls finishing now queue their answers too (their tasks are ready to
                // run): on a CPU shared with the client, let them, then write every answer in
                // one write.
                if options.coalesce_answers && running.len() > 1 {
                    tokio::task::yield_now().await;
                }
                write_line(&mut writer, &mut out_buf, &text, Some(&mut rx)).await?
            }
            Some(_) = tasks.join_next(), if !tasks.is_empty() => {
                // A finished (or aborted) task: forget its handle.
                running.retain(|_, handle| !handle.is_finished());
            }
            event = events.recv() => match event {
                Ok(event) => notify(&event, gateway.backend().as_ref(), session.as_deref(), &listeners, &mut immediate),
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    // Events were lost: say everything may have changed.
                    for event in [BackendEvent::ToolsChanged, BackendEvent::ResourcesChanged, BackendEvent::PromptsChanged] {
                        notify(&event, gateway.backend().as_ref(), session.as_deref(), &listeners, &mut immediate);
                    }
                }
                Err(broadcast::error::RecvError::Closed) => events = broadcast::channel(1).1,
            },
            read = read_line(&mut reader, &mut line, &mut too_long, options.max_line_bytes), if input_open => {
                let read = read.map_err(StdioError::Read)?;
                // A whole line (or the end) was read: the next read starts a new one.
                too_long = false;
                match read {
                    Read::End => input_open = false,
                    Read::TooLong => {
                        let error = ErrorObject::new(
                            error_codes::INVALID_REQUEST,
                            format!("Invalid Request: the message is longer than {} bytes", options.max_line_bytes),
                        );
                        immediate.push(Message::Error(mcp_protocol::ErrorResponse { id: None, error }).encode());
                    }
                    Read::Line => {
                        let text = trim_line(&line);
                        let decoded = (!text.is_empty()).then(|| Message::decode(text));
                        let response = matches!(decoded, Some(Err(_)))
                            && std::str::from_utf8(text).ok().and_then(mcp_protocol::refused_response_id).is_some();
                        line.clear();
                        let Some(decoded) = decoded else { continue };
                        match decoded {
                            Ok(message) => {
                                let mut state = Connection {
                                    session: &mut session,
                                    listeners: &mut listeners,
                                    tasks: &mut tasks,
                                    running: &mut running,
                                    immediate: &mut immediate,
                                    max_in_flight: options.max_in_flight,
                                };
                                on_message(&gateway, message, &out, &mut state).await;
                            }
                            // Answered, with a null id when none could be read (a batch, a
                            // string); a bad *response* from the client is dropped (answering
                            // it could start a loop of errors).
                            Err(e) if e.kind == DecodeErrorKind::Parse || e.id.is_some() || !response => {
                                let reply = mcp_protocol::ErrorResponse { id: e.id.clone(), error: e.to_error_object() };
                                immediate.push(Message::Error(reply).encode());
                            }
                            Err(_) => {}
                        }
                    }
                }
            }
            else => break,
        }
    }
    if let Some(session) = session {
        session.close();
        gateway.options().approvals.forget(&session.scope()).await;
    }
    writer.flush().await.map_err(StdioError::Write)
}

/// The most of its capacity the write buffer keeps between writes: what a burst of answers
/// needs usually, and no more memory than that held after one large answer.
const KEPT_WRITE_CAPACITY: usize = 64 * 1024;

/// Writes `text` and whatever else is queued already, gathered into `buf` (reused, so a write
/// allocates nothing once it has grown): one write (one system call on a pipe) for all of
/// them, then one flush.
async fn write_line<W: AsyncWrite + Unpin>(
    writer: &mut W,
    buf: &mut Vec<u8>,
    text: &str,
    rx: Option<&mut mpsc::Receiver<String>>,
) -> Result<(), StdioError> {
    buf.clear();
    // The line and its newline at once: a large answer is copied in once, not again to grow
    // by one byte.
    buf.reserve(text.len() + 1);
    buf.extend_from_slice(text.as_bytes());
    buf.push(b'\n');
    if let Some(rx) = rx {
        while let Ok(more) = rx.try_recv() {
            buf.reserve(more.len() + 1);
            buf.extend_from_slice(more.as_bytes());
            buf.push(b'\n');
        }
    }
    let written = writer.write_all(buf).await.map_err(StdioError::Write);
    buf.clear();
    buf.shrink_to(KEPT_WRITE_CAPACITY);
    written?;
    writer.flush().await.map_err(StdioError::Write)
}

/// The process's own stdin, as [`process_stdio`] gives it.
pub type ProcessStdin = Box<dyn AsyncRead + Unpin + Send>;
/// The process's own stdout, as [`process_stdio`] gives it.
pub type ProcessStdout = Box<dyn AsyncWrite + Unpin + Send>;

/// The process's own stdin and stdout for [`serve_stdio`] (call it inside the runtime). A pipe
/// or a socket (what a host that spawns the gateway hands it) is read and written by the
/// runtime's reactor, as the upstreams' pipes are; tokio's `stdin()`/`stdout()` would hand
/// every read and every write to a blocking thread and wait for it (measured: most of the
/// stdio front's time at 32 calls in flight). A terminal or a file falls back to those. The
/// descriptors are made non-blocking meanwhile; [`StdioModes`] puts their flags back when it
/// drops, so whoever shares them later finds them as they were.
pub fn process_stdio() -> (ProcessStdin, ProcessStdout, StdioModes) {
    let modes = StdioModes::save();
    let input: ProcessStdin = match reactor_stream(std::io::stdin().as_fd()) {
        Some(Reactor::Pipe(file)) => match tokio::net::unix::pipe::Receiver::from_file(file) {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdin()),
        },
        Some(Reactor::Socket(socket)) => Box::new(socket),
        None => Box::new(tokio::io::stdin()),
    };
    let output: ProcessStdout = match reactor_stream(std::io::stdout().as_fd()) {
        Some(Reactor::Pipe(file)) => match tokio::net::unix::pipe::Sender::from_file(file) {
            Ok(pipe) => Box::new(pipe),
            Err(_) => Box::new(tokio::io::stdout()),
        },
        Some(Reactor::Socket(socket)) => Box::new(socket),
        None => Box::new(tokio::io::stdout()),
    };
    (input, output, modes)
}

/// A standard descriptor the reactor can drive: a pipe (a copy of the descriptor, as a file),
/// or a socket.
enum Reactor {
    Pipe(std::fs::File),
    Socket(tokio::net::UnixStream),
}

fn reactor_stream(fd: BorrowedFd<'_>) -> Option<Reactor> {
    let owned = fd.try_clone_to_owned().ok()?;
    let file = std::fs::File::from(owned);
    let kind = file.metadata().ok()?.file_type();
    if kind.is_fifo() {
        return Some(Reactor::Pipe(file));
    }
    if kind.is_socket() {
        let socket = std::os::unix::net::UnixStream::from(std::os::fd::OwnedFd::from(file));
        socket.set_nonblocking(true).ok()?;
        return tokio::net::UnixStream::from_std(socket).ok().map(Reactor::Socket);
    }
    None
}

/// The file status flags stdin and stdout had before [`process_stdio`], put back on drop.
#[derive(Debug)]
pub struct StdioModes {
    saved: [Option<OFlag>; 2],
}

impl StdioModes {
    fn save() -> Self {
        let flags = |fd: BorrowedFd<'_>| fcntl(fd, FcntlArg::F_GETFL).ok().map(OFlag::from_bits_truncate);
        Self { saved: [flags(std::io::stdin().as_fd()), flags(std::io::stdout().as_fd())] }
    }
}

impl Drop for StdioModes {
    fn drop(&mut self) {
        let [input, output] = self.saved;
        for (fd, flags) in [(std::io::stdin().as_fd(), input), (std::io::stdout().as_fd(), output)] {
            if let Some(flags) = flags {
                let _ = fcntl(fd, FcntlArg::F_SETFL(flags));
            }
        }
    }
}

fn notify(
    event: &BackendEvent,
    backend: &dyn crate::backend::Backend,
    session: Option<&Session>,
    listeners: &[Listener],
    immediate: &mut Vec<String>,
) {
    if let Some(session) = session
        && let Some(line) = session_event_line(event, session, backend)
    {
        immediate.push(line);
    }
    for listener in listeners.iter().filter(|l| l.filter.wants(event)) {
        immediate.push(subscription_line(event, &listener.id));
    }
}

/// What the reading loop keeps about its connection.
struct Connection<'a> {
    session: &'a mut Option<Arc<Session>>,
    listeners: &'a mut Vec<Listener>,
    tasks: &'a mut JoinSet<()>,
    running: &'a mut HashMap<RequestId, AbortHandle>,
    immediate: &'a mut Vec<String>,
    max_in_flight: usize,
}

/// Most `subscriptions/listen` streams one connection holds.
const MAX_LISTENERS: usize = 64;

/// A list-changed notification on a `subscriptions/listen` stream: it names the subscription.
fn subscription_line(event: &BackendEvent, id: &RequestId) -> String {
    let method = match event {
        BackendEvent::ResourcesChanged => mcp_protocol::methods::RESOURCES_LIST_CHANGED,
        BackendEvent::PromptsChanged => mcp_protocol::methods::PROMPTS_LIST_CHANGED,
        _ => mcp_protocol::methods::TOOLS_LIST_CHANGED,
    };
    let params = serde_json::json!({"_meta": {mcp_protocol::META_SUBSCRIPTION_ID: id}});
    mcp_protocol::encode_notification(method, Some(&params)).unwrap_or_else(|_| list_changed_line(method))
}

async fn on_message(gateway: &Gateway, message: Message, out: &Outbound, state: &mut Connection<'_>) {
    let Connection { session, listeners, tasks, running, immediate, max_in_flight } = state;
    // Watched from the message as it arrived (its params' `_meta` carries the caller's trace).
    let watch = match &message {
        Message::Request(request) => gateway.watch(|| crate::observe::Received {
            method: &request.method,
            params: request.params.as_deref(),
            headers: None,
            session: None,
            protocol_version: session.as_ref().map(|s| s.protocol_version().as_str()),
            peer: None,
        }),
        _ => None,
    };
    match mcp_protocol::classify(message) {
        ClientMessage::Request(incoming) => {
            let IncomingRequest { id, method: _, request, meta } = *incoming;
            let request = match request {
                Ok(request) => request,
                Err(error) => {
                    immediate.push(response_line(&id, Reply::Error(error), false));
                    return;
                }
            };
            if running.contains_key(&id) || listeners.iter().any(|l| l.id == id) {
                let error = ErrorObject::new(
                    error_codes::INVALID_REQUEST,
                    format!("Invalid Request: request id {id} is in use by a request still running"),
                );
                immediate.push(response_line(&id, Reply::Error(error), false));
                return;
            }
            let listen = matches!(request, ClientRequest::Listen(_));
            let busy = if listen { listeners.len() >= MAX_LISTENERS } else { running.len() >= *max_in_flight };
            if busy && !matches!(request, ClientRequest::Ping) {
                let (what, most) = if listen {
                    ("subscriptions/listen streams", MAX_LISTENERS)
                } else {
                    ("requests in flight", *max_in_flight)
                };
                let error = ErrorObject::new(
                    error_codes::INVALID_REQUEST,
                    format!(
                        "Invalid Request: this connection has {most} {what} already, the most it takes; wait for answers (or end some) before sending more"
                    ),
                );
                immediate.push(response_line(&id, Reply::Error(error), false));
                return;
            }
            let scope = if let Some(envelope) = &meta.envelope {
                match envelope.check(gateway.config()) {
                    Ok(ctx) => Scope { caller: Caller::local(), era: Era::Stateless(Arc::new(ctx)) },
                    Err(error) => {
                        immediate.push(response_line(&id, Reply::Error(error), true));
                        return;
                    }
                }
            } else if let ClientRequest::Initialize(params) = &request {
                if session.is_some() {
                    let error = ErrorObject::new(error_codes::INVALID_REQUEST, "Invalid Request: already initialized");
                    immediate.push(response_line(&id, Reply::Error(error), false));
                    return;
                }
                match gateway.open_session(Caller::local(), None, params).await {
                    Ok((opened, result)) => {
                        opened.set_stream(out_sender(out));
                        **session = Some(opened);
                        if let Some(watch) = watch {
                            watch.end(Answered::Result(&result));
                        }
                        immediate.push(response_line(&id, Reply::Result(result), false));
                    }
                    Err(error) => {
                        if let Some(watch) = watch {
                            watch.end(Answered::Error(&error));
                        }
                        immediate.push(response_line(&id, Reply::Error(error), false));
                    }
                }
                return;
            } else if let Some(session) = session.as_ref() {
                Scope { caller: Caller::local(), era: Era::Session(Arc::clone(session)) }
            } else if matches!(request, ClientRequest::Ping) {
                immediate.push(response_line(&id, Reply::Result("{}".to_owned()), false));
                return;
            } else {
                let error = ErrorObject::new(
                    error_codes::INVALID_REQUEST,
                    "Invalid Request: send initialize first, or a request with the 2026-07-28 _meta envelope",
                );
                immediate.push(response_line(&id, Reply::Error(error), false));
                return;
            };
            let gateway = gateway.clone();
            let task_out = out.clone();
            let task_id = id.clone();
            let stateless = scope.is_stateless();
            if let ClientRequest::Listen(_) = &request {
                // The stream is this connection: acknowledge and remember what it wants.
                if let Reply::Listen(filter) = gateway.handle_watched(watch, &scope, &id, request, &meta, out).await {
                    let params = serde_json::json!({"notifications": filter.to_value(),
                        "_meta": {mcp_protocol::META_SUBSCRIPTION_ID: &id}});
                    if let Ok(line) = mcp_protocol::encode_notification(
                        mcp_protocol::stateless::SUBSCRIPTIONS_ACKNOWLEDGED,
                        Some(&params),
                    ) {
                        immediate.push(line);
                    }
                    listeners.push(Listener { id, filter });
                }
                return;
            }
            let handle = tasks.spawn(async move {
                // Boxed: the request's future is large (a call's states nest deep), and a task
                // holding it inline is copied whole into the task on spawn.
                let handled = Box::pin(gateway.handle_watched(watch, &scope, &task_id, request, &meta, &task_out));
                let reply = handled.await;
                task_out.send(response_line(&task_id, reply, stateless)).await;
            });
            running.insert(id, handle);
        }
        ClientMessage::Notification(notification) => match notification {
            ClientNotification::Initialized => {
                if let Some(session) = session {
                    session.initialized();
                }
            }
            ClientNotification::Cancelled(cancelled) => {
                if let Some(id) = cancelled.request_id {
                    if let Some(handle) = running.remove(&id) {
                        handle.abort();
                    }
                    listeners.retain(|l| l.id != id);
                }
            }
            _ => {}
        },
        ClientMessage::Response { id, outcome } => {
            if let Some(session) = session {
                session.answer(&id, outcome);
            }
        }
        _ => {}
    }
}

/// The sender behind `out` (stdout): a stdio session's notifications go there too.
fn out_sender(out: &Outbound) -> mpsc::Sender<String> {
    out.sender().unwrap_or_else(|| mpsc::channel(1).0)
}

fn trim_line(line: &[u8]) -> &[u8] {
    let end = line.iter().rposition(|b| !b.is_ascii_whitespace()).map_or(0, |i| i + 1);
    let start = line.iter().position(|b| !b.is_ascii_whitespace()).unwrap_or(end);
    &line[start..end.max(start)]
}

enum Read {
    Line,
    TooLong,
    End,
}

/// Reads one line into `line` (without holding more than `max` bytes of it): a line longer
/// than that is read to its end and dropped.
async fn read_line<R: AsyncRead + Unpin>(
    reader: &mut BufReader<R>,
    line: &mut Vec<u8>,
    too_long: &mut bool,
    max: usize,
) -> std::io::Result<Read> {
    // Cancel-safe: the reading loop drops this future whenever another branch is ready first,
    // so what was consumed stays in `line` and `too_long` (the caller empties them once a
    // line is returned), never in a local that a dropped future takes with it.
    loop {
        let buf = reader.fill_buf().await?;
        if buf.is_empty() {
            return Ok(if *too_long {
                Read::TooLong
            } else if line.is_empty() {
                Read::End
            } else {
                Read::Line
            });
        }
        let (chunk, found) = match memchr(b'\n', buf) {
            Some(i) => (&buf[..i], Some(i + 1)),
            None => (buf, None),
        };
        if !*too_long {
            if line.len() + chunk.len() > max {
                *too_long = true;
                line.clear();
            } else {
                line.extend_from_slice(chunk);
            }
        }
        let used = found.unwrap_or(buf.len());
        reader.consume(used);
        if found.is_some() {
            return Ok(if *too_long { Read::TooLong } else { Read::Line });
        }
    }
}

fn memchr(needle: u8, haystack: &[u8]) -> Option<usize> {
    haystack.iter().position(|b| *b == needle)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Queued answers go out with the first, each on its own line, and the buffer they were
    /// gathered in keeps no more than [`KEPT_WRITE_CAPACITY`] after a large one.
    #[tokio::test]
    async fn a_write_gathers_the_queued_answers_and_keeps_a_bounded_buffer() {
        let (tx, mut rx) = mpsc::channel::<String>(4);
        let large = "x".repeat(4 * KEPT_WRITE_CAPACITY);
        tx.try_send(large.clone()).unwrap_or_else(|_| unreachable!());
        tx.try_send("third".to_owned()).unwrap_or_else(|_| unreachable!());
        let mut written = Vec::new();
        let mut buf = Vec::new();
        let wrote = write_line(&mut written, &mut buf, "first", Some(&mut rx)).await;
        assert!(wrote.is_ok(), "{wrote:?}");
        assert_eq!(written, format!("first\n{large}\nthird\n").into_bytes());
        assert!(buf.is_empty() && buf.capacity() <= KEPT_WRITE_CAPACITY, "{}", buf.capacity());
        assert!(rx.try_recv().is_err(), "every queued answer was taken");
    }
}
