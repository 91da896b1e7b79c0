//! The transport port: something that carries encoded JSON-RPC messages both ways.
//!
//! A transport splits into a sink (one writer) and a stream (one reader) so that the client
//! connection can write and read at the same time without a lock around the wire. Failures
//! are typed: a transport fails one request ([`Inbound::Failed`], the connection goes on) or
//! the whole connection (an error from [`TransportStream::recv`], or its end); it never dresses
//! a failure of its own as an error answer from the server.
//!
//! A transport that loses the session it carries and goes on (a WebSocket opened again, an HTTP
//! session the server ended) says so ([`Inbound::SessionLost`]); the client opens the session
//! again with its own handshake, whatever the transport, and [`RestoreGate`] keeps anything else
//! from reaching the server before that.

use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use mcp_protocol::{Outgoing, RequestId, methods, stateless};

/// Why a transport could not carry a message, or one request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TransportError {
    /// The server process could not be started.
    #[error("could not start {command:?}: {source}")]
    Spawn {
        /// The command that failed.
        command: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The server's working directory does not exist (or is not a directory).
    #[error("could not start {command:?}: its working directory {cwd:?} does not exist or is not a directory")]
    MissingDirectory {
        /// The command.
        command: String,
        /// The configured working directory.
        cwd: String,
    },
    /// An incoming message exceeded the size limit; it was discarded.
    #[error("a message of more than {limit} bytes was discarded (the limit is max_message_bytes)")]
    MessageTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The answer to a request exceeded the size limit; it was discarded, and that request
    /// fails with this at once.
    #[error("the answer was larger than {} (max_message_bytes); it was discarded", size_text(*limit))]
    AnswerTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// An incoming line was not UTF-8; it was discarded (not fatal).
    #[error("the server sent a line that is not UTF-8; it was discarded")]
    NotUtf8,
    /// Reading or writing failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// The operating system's error.
        source: std::io::Error,
    },
    /// The transport's configuration is unusable (a bad URL, header, missing token variable).
    #[error("{0}")]
    Config(String),
    /// The transport is closed.
    #[error("the transport is closed: {0}")]
    Closed(String),
    /// The server answered a request with an HTTP error status.
    #[error("{message}")]
    HttpStatus {
        /// The status.
        status: u16,
        /// What was sent where, and what came back (the body's start, cleaned).
        message: String,
    },
    /// The server refused the credentials and no (better) ones could be obtained.
    #[error("{message}")]
    Unauthorized {
        /// 401 or 403.
        status: u16,
        /// What happened and what to do.
        message: String,
        /// Logging in (interactively) is the remedy: shown as `needs-auth`.
        needs_login: bool,
    },
    /// The request was sent (or may have been) but its answer cannot come: the answer stream
    /// broke, or what came back was not an answer.
    #[error("{0}")]
    NoAnswer(String),
    /// The request was not run: the session it was sent in is gone (the server ended it, or the
    /// connection was opened again and the client's new handshake has not come yet). The client
    /// opens the session again and sends the request once more.
    #[error("{0}")]
    SessionLost(String),
}

impl TransportError {
    /// Whether the transport is unusable after this error (otherwise only a message or one
    /// request was lost).
    pub fn is_fatal(&self) -> bool {
        !matches!(
            self,
            TransportError::MessageTooLarge { .. }
                | TransportError::AnswerTooLarge { .. }
                | TransportError::NotUtf8
                | TransportError::HttpStatus { .. }
                | TransportError::Unauthorized { .. }
                | TransportError::NoAnswer(_)
                | TransportError::SessionLost(_)
        )
    }

    /// Whether the server refused us for lack of credentials: the fix is a token (or a
    /// login), not a restart.
    pub fn needs_auth(&self) -> bool {
        match self {
            TransportError::HttpStatus { status, .. } => matches!(status, 401 | 403),
            TransportError::Unauthorized { needs_login, .. } => *needs_login,
            _ => false,
        }
    }

    /// Whether credentials were refused (with or without a remedy).
    pub fn is_auth_refusal(&self) -> bool {
        matches!(self, TransportError::Unauthorized { .. } | TransportError::HttpStatus { status: 401 | 403, .. })
    }
}

/// `16 MiB`, `64 KiB`, `1000 bytes`.
fn size_text(bytes: usize) -> String {
    const KIB: usize = 1024;
    const MIB: usize = 1024 * KIB;
    match bytes {
        b if b >= MIB && b % MIB == 0 => format!("{} MiB", b / MIB),
        b if b >= KIB && b % KIB == 0 => format!("{} KiB", b / KIB),
        b => format!("{b} bytes"),
    }
}

/// What a transport's stream yields.
#[derive(Debug)]
#[non_exhaustive]
pub enum Inbound {
    /// A message from the server (encoded JSON text).
    Message(String),
    /// A message from the server the transport already decoded (to learn what it answers), so
    /// the client does not decode it again.
    Decoded(mcp_protocol::Message),
    /// The transport could not deliver request `id`, or cannot deliver its answer: that
    /// request fails with `error` at once; the connection goes on.
    Failed {
        /// The request.
        id: RequestId,
        /// Why.
        error: TransportError,
    },
    /// The transport lost the session it carried and goes on ([`SessionLoss`] says how). The
    /// client makes its handshake again (`initialize`, or `server/discover` in the 2026-07-28
    /// revision) before anything else; until then the transport lets nothing else through
    /// ([`RestoreGate`]). Said once per loss.
    SessionLost(SessionLoss),
}

/// How a transport lost its session (see [`Inbound::SessionLost`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SessionLoss {
    /// The connection dropped and the transport opened a new one (a WebSocket): the server knows
    /// no session on it, and says nothing on it before the handshake.
    Reconnected,
    /// The server ended the session (Streamable HTTP: a 404 to a request that carried its
    /// `Mcp-Session-Id`).
    Expired,
}

impl std::fmt::Display for SessionLoss {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SessionLoss::Reconnected => "the connection was opened again",
            SessionLoss::Expired => "the server ended the session",
        })
    }
}

/// What a transport lets through between losing its session ([`Inbound::SessionLost`]) and the
/// client's new handshake: the handshake (`initialize`, `notifications/initialized`,
/// `server/discover`) and nothing else. A request is refused unsent
/// ([`TransportError::SessionLost`]: the client sends it again once the session is back); another
/// notification or a reply is dropped, as it belonged to the lost session. The gate opens again
/// with `notifications/initialized`, or with `server/discover` (whose revision needs no more).
///
/// Open, it costs one atomic load per message.
#[derive(Debug, Default)]
pub struct RestoreGate {
    closed: AtomicBool,
}

impl RestoreGate {
    /// The session was lost: only the handshake passes until it is made again.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
    }

    /// Whether `message` may go to the server now. The message that finishes the handshake
    /// opens the gate.
    pub fn admits(&self, message: &Outgoing) -> bool {
        if !self.closed.load(Ordering::Acquire) {
            return true;
        }
        match message.method() {
            Some(methods::INITIALIZE) => true,
            Some(methods::INITIALIZED | stateless::SERVER_DISCOVER) => {
                self.closed.store(false, Ordering::Release);
                true
            }
            _ => false,
        }
    }

    /// Whether the gate waits for the client's handshake.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }
}

/// A non-blocking write path a transport may offer beside its sink, so that a caller can put
/// its message on the wire at once instead of handing it to the writer task (stdio pipes do).
///
/// Both methods take `&self`: callers and the writer task share it. Writes are synchronous, so a
/// caller that stops waiting can never leave half a message behind.
#[async_trait]
pub trait DirectWrite: Send + Sync {
    /// Write what can be written now, without blocking; returns how many bytes were taken.
    /// `ErrorKind::WouldBlock` means none.
    fn try_write(&self, bytes: &[u8]) -> std::io::Result<usize>;

    /// Wait until a write may make progress.
    async fn writable(&self) -> std::io::Result<()>;

    /// Whether the peer can only run on the one CPU this process runs on. Then a message
    /// written at once only hands the CPU to the peer and back for each message, and the
    /// client coalesces the messages of concurrent callers into one write instead; with a CPU
    /// each, writing at once lets the peer work in parallel. `false` unless a transport knows.
    fn shares_one_cpu(&self) -> bool {
        false
    }
}

/// A request path a transport may offer beside its sink, where every message is an exchange of
/// its own (Streamable HTTP: one POST, answered by its response): the caller sends its message
/// and reads back what answers it in its own task, instead of handing the message to the writer
/// task and waiting for the reader task to wake it (two cross-thread hops per call).
#[async_trait]
pub trait Exchange: Send + Sync {
    /// Send `message` and hand what comes back for it (the answer, and on an SSE answer the
    /// server's messages before it) to `deliver`, in order, exactly as the stream would have
    /// yielded them; a request the transport cannot deliver or get answered is delivered as
    /// [`Inbound::Failed`]. Returns when this exchange is over, for a notification once the
    /// server took it. An answer may still come through the stream afterwards (a transport
    /// whose answers arrive elsewhere, like the 2024-11-05 HTTP+SSE one); a connection that
    /// fails ends the stream, as without this path. Dropping the future abandons the exchange.
    async fn exchange(&self, message: Outgoing, deliver: &(dyn Fn(Inbound) + Send + Sync));
}

/// The writing half of a transport.
#[async_trait]
pub trait TransportSink: Send {
    /// The direct write path, if this transport has one. When it does, the client writes every
    /// message through it (newline-delimited) and uses [`TransportSink::send`] for nothing.
    fn direct(&self) -> Option<std::sync::Arc<dyn DirectWrite>> {
        None
    }

    /// The request path, if this transport has one. When it does, the client sends its requests
    /// and notifications through it; [`TransportSink::send`] still carries what the client sends
    /// without waiting (cancellations, replies to the server's requests).
    fn exchange(&self) -> Option<std::sync::Arc<dyn Exchange>> {
        None
    }

    /// Send a batch of messages, in order. Each carries what a transport routes on (id,
    /// method, revision), so none has to parse the text again.
    async fn send(&mut self, messages: &[Outgoing]) -> Result<(), TransportError>;

    /// Close the transport and release what it holds (for stdio: the child process, reaped).
    async fn close(&mut self) -> Result<(), TransportError>;
}

/// The reading half of a transport.
#[async_trait]
pub trait TransportStream: Send {
    /// The next message or failed request; `Ok(None)` when the peer closed the stream.
    /// Non-fatal errors (see [`TransportError::is_fatal`]) may be followed by more.
    async fn recv(&mut self) -> Result<Option<Inbound>, TransportError>;

    /// Why the stream ended, for error messages (for stdio: exit status and the stderr tail).
    async fn closed_reason(&mut self) -> String {
        "the server closed the connection".to_owned()
    }

    /// How the server's process ended, once [`closed_reason`](Self::closed_reason) found it
    /// ended (for stdio); `None` for a transport without a process, or one still running.
    fn exit(&self) -> Option<ProcessExit> {
        None
    }
}

/// How a server's process ended: what a supervisor reports and a host tells the model,
/// without parsing it back out of a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProcessExit {
    /// It exited with this status.
    Status(i32),
    /// This signal ended it.
    Signal(i32),
}

impl std::fmt::Display for ProcessExit {
    /// `exited with status 3`, `was killed by signal 9`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Status(code) => write!(f, "exited with status {code}"),
            Self::Signal(signal) => write!(f, "was killed by signal {signal}"),
        }
    }
}

/// A transport ready to be driven by a [`crate::Client`].
pub trait Transport: Send {
    /// Split into the writing and reading halves.
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>);
}

impl Transport for Box<dyn Transport> {
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>) {
        (*self).split()
    }
}

#[cfg(test)]
mod tests {
    use mcp_protocol::{Outgoing, RequestId};

    use super::RestoreGate;

    fn request(method: &str) -> Outgoing {
        Outgoing::parse(format!(r#"{{"jsonrpc":"2.0","id":7,"method":"{method}"}}"#))
    }

    fn notification(method: &str) -> Outgoing {
        Outgoing::notification(format!(r#"{{"jsonrpc":"2.0","method":"{method}"}}"#), method)
    }

    #[test]
    fn a_closed_gate_lets_only_the_handshake_through_and_opens_with_its_end() {
        let gate = RestoreGate::default();
        assert!(gate.admits(&request("tools/call")), "open until a session is lost");
        gate.close();
        assert!(!gate.admits(&request("tools/call")));
        assert!(!gate.admits(&request("ping")));
        assert!(!gate.admits(&notification("notifications/cancelled")));
        assert!(
            !gate.admits(&Outgoing::response(r#"{"jsonrpc":"2.0","id":1,"result":{}}"#.into(), RequestId::Number(1)))
        );
        assert!(gate.admits(&request("initialize")));
        assert!(gate.is_closed(), "initialize alone does not open the session");
        assert!(!gate.admits(&request("tools/list")));
        assert!(gate.admits(&notification("notifications/initialized")));
        assert!(!gate.is_closed());
        assert!(gate.admits(&request("tools/list")));
        // The 2026-07-28 revision has no more to its handshake than server/discover.
        gate.close();
        assert!(gate.admits(&request("server/discover")));
        assert!(gate.admits(&request("tools/call")));
    }
}
