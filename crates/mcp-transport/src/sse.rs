//! Server-sent events from an HTTP response, with a bound on event size.
//!
//! Parsing is `sse-stream`'s; it has no size limit, so the byte stream goes through
//! [`Bounded`] first, which fails once more than the limit arrives without an event boundary
//! (a blank line). A server that streams an endless event cannot make us buffer it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::{Stream, StreamExt};
use sse_stream::{Sse, SseStream};

/// Why an SSE stream could not be read.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum SseError {
    /// An event was larger than the limit.
    #[error("an SSE event of more than {limit} bytes (the limit is max_message_bytes)")]
    TooLarge {
        /// The limit in bytes.
        limit: usize,
    },
    /// The connection failed while reading.
    #[error("reading the event stream failed: {0}")]
    Body(String),
}

/// Counts bytes since the last blank line and fails past the limit. Lines end as SSE says:
/// CR LF, LF or CR.
struct Bounded<S> {
    inner: S,
    limit: usize,
    since_boundary: usize,
    /// The previous byte ended a line.
    after_newline: bool,
    /// The previous byte was a carriage return (a line feed right after it ends no new line).
    after_cr: bool,
    failed: bool,
}

#[derive(Debug, thiserror::Error)]
enum BoundedError {
    #[error("too large")]
    TooLarge,
    #[error("{0}")]
    Body(String),
}

impl<S> Bounded<S> {
    fn count(&mut self, chunk: &[u8]) -> bool {
        for &b in chunk {
            let ends_line = match b {
                b'\r' => true,
                // The second half of CR LF: the line ended at the CR.
                b'\n' => !std::mem::take(&mut self.after_cr),
                _ => false,
            };
            self.after_cr = b == b'\r';
            if ends_line && self.after_newline {
                // A blank line: the event is complete.
                self.since_boundary = 0;
                continue;
            }
            if ends_line {
                self.after_newline = true;
            } else if b != b'\n' {
                self.after_newline = false;
            }
            self.since_boundary += 1;
            if self.since_boundary > self.limit {
                return false;
            }
        }
        true
    }
}

impl<S, E> Stream for Bounded<S>
where
    S: Stream<Item = Result<Bytes, E>> + Unpin,
    E: std::fmt::Display,
{
    type Item = Result<Bytes, BoundedError>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        if self.failed {
            return Poll::Ready(None);
        }
        match self.inner.poll_next_unpin(cx) {
            Poll::Ready(Some(Ok(chunk))) => {
                if self.as_mut().get_mut().count(&chunk) {
                    Poll::Ready(Some(Ok(chunk)))
                } else {
                    self.failed = true;
                    Poll::Ready(Some(Err(BoundedError::TooLarge)))
                }
            }
            Poll::Ready(Some(Err(e))) => {
                self.failed = true;
                Poll::Ready(Some(Err(BoundedError::Body(e.to_string()))))
            }
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }
}

/// A stream of SSE events whose size is bounded.
pub(crate) struct EventStream {
    inner: Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>,
    limit: usize,
}

impl EventStream {
    /// Reads the events of a byte stream (an HTTP response body).
    pub(crate) fn new<S, E>(bytes: S, limit: usize) -> Self
    where
        S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
        E: std::fmt::Display + 'static,
    {
        let bounded =
            Bounded { inner: bytes, limit, since_boundary: 0, after_newline: false, after_cr: false, failed: false };
        Self { inner: Box::pin(SseStream::from_bytes_stream(bounded)), limit }
    }

    /// The next event; `None` when the server ended the stream.
    pub(crate) async fn next(&mut self) -> Option<Result<Sse, SseError>> {
        let item = self.inner.next().await?;
        Some(item.map_err(|e| match e {
            sse_stream::Error::Body(inner) if inner.downcast_ref::<BoundedError>().is_some_and(is_too_large) => {
                SseError::TooLarge { limit: self.limit }
            }
            other => SseError::Body(other.to_string()),
        }))
    }
}

fn is_too_large(e: &BoundedError) -> bool {
    matches!(e, BoundedError::TooLarge)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stream_of(chunks: Vec<&'static str>, limit: usize) -> EventStream {
        let items: Vec<Result<Bytes, std::io::Error>> =
            chunks.into_iter().map(|c| Ok(Bytes::from_static(c.as_bytes()))).collect();
        EventStream::new(futures_util::stream::iter(items), limit)
    }

    #[tokio::test]
    async fn parses_events_split_across_chunks() {
        let mut s =
            stream_of(vec!["id: 1\nretry: 50", "0\ndata: \n\nevent: message\r\ndata: {\"a\"", ":1}\r\n\r\n"], 64);
        let first = s.next().await.unwrap().unwrap();
        assert_eq!((first.id.as_deref(), first.retry, first.data.as_deref()), (Some("1"), Some(500), Some("")));
        let second = s.next().await.unwrap().unwrap();
        assert_eq!(second.data.as_deref(), Some("{\"a\":1}"));
        assert!(s.next().await.is_none());
    }

    #[tokio::test]
    async fn an_event_over_the_limit_fails_the_stream() {
        let mut s =
            stream_of(vec!["data: small\n\n", "data: ", "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx", "xx\n\n"], 32);
        assert_eq!(s.next().await.unwrap().unwrap().data.as_deref(), Some("small"));
        assert!(matches!(s.next().await, Some(Err(SseError::TooLarge { limit: 32 }))));
    }

    /// Lines may end with CR alone: each event of such a stream is held to the limit, not
    /// the whole stream (which failed after the limit's worth of small events).
    #[tokio::test]
    async fn events_with_any_line_ending_are_each_held_to_the_limit() {
        let cr: &'static str = "data: twenty bytes..\r\r";
        let mixed: &'static str = "data: twenty bytes..\r\n\r\ndata: twenty bytes..\n\r";
        let chunks: Vec<&'static str> = std::iter::repeat_n(cr, 10).chain([mixed]).collect();
        let mut s = stream_of(chunks, 32);
        for n in 0..12 {
            let event = s.next().await.unwrap_or_else(|| panic!("event {n} missing"));
            assert_eq!(event.unwrap().data.as_deref(), Some("twenty bytes.."), "event {n}");
        }
    }
}
