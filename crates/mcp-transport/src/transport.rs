//! The transport port: something that carries encoded JSON-RPC messages both ways.
//!
//! A transport splits into a sink (one writer) and a stream (one reader) so that the client
//! connection can write and read at the same time without a lock around the wire.

use async_trait::async_trait;

/// Why a transport could not carry a message.
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
    /// An incoming message exceeded the size limit; it was discarded (not fatal).
    #[error("a message of more than {limit} bytes was discarded (the limit is max_message_bytes)")]
    MessageTooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// An incoming line was not UTF-8; it was discarded (not fatal).
    #[error("a line that is not UTF-8 was discarded")]
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
}

impl TransportError {
    /// Whether the transport is unusable after this error (otherwise the message was skipped).
    pub fn is_fatal(&self) -> bool {
        !matches!(self, TransportError::MessageTooLarge { .. } | TransportError::NotUtf8)
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
}

/// The writing half of a transport.
#[async_trait]
pub trait TransportSink: Send {
    /// The direct write path, if this transport has one. When it does, the client writes every
    /// message through it and uses [`TransportSink::send`] for nothing.
    fn direct(&self) -> Option<std::sync::Arc<dyn DirectWrite>> {
        None
    }

    /// Send a batch of encoded messages (each one JSON text without a trailing newline), in order.
    async fn send(&mut self, messages: &[String]) -> Result<(), TransportError>;

    /// Close the transport and release what it holds (for stdio: the child process, reaped).
    async fn close(&mut self) -> Result<(), TransportError>;
}

/// The reading half of a transport.
#[async_trait]
pub trait TransportStream: Send {
    /// The next encoded message; `Ok(None)` when the peer closed the stream. Non-fatal errors
    /// (see [`TransportError::is_fatal`]) may be followed by more messages.
    async fn recv(&mut self) -> Result<Option<String>, TransportError>;

    /// Why the stream ended, for error messages (for stdio: exit status and the stderr tail).
    async fn closed_reason(&mut self) -> String {
        "the server closed the connection".to_owned()
    }
}

/// A transport ready to be driven by a [`crate::Client`].
pub trait Transport: Send {
    /// Split into the writing and reading halves.
    fn split(self: Box<Self>) -> (Box<dyn TransportSink>, Box<dyn TransportStream>);
}
