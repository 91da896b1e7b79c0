//! The HTTP front's one response body type: empty, a whole JSON answer, a request's SSE stream
//! (messages, then the answer, driven by the body itself), a resumable call's stream (read from
//! its log), or a long-lived SSE stream.
//!
//! A request's SSE body polls the request's own future: when the client goes away, hyper drops
//! the body and with it the request, whose upstream call is then cancelled.

use std::convert::Infallible;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Frame, SizeHint};
use tokio::sync::mpsc;

use super::resume::Reader;

/// A request's work: its answer's line.
pub(crate) type Work = Pin<Box<dyn Future<Output = String> + Send>>;

/// One SSE `message` event carrying `line`.
pub(crate) fn sse_event(line: &str) -> Bytes {
    let mut out = String::with_capacity(line.len() + 24);
    push_event(&mut out, line);
    Bytes::from(out)
}

/// One SSE `message` event carrying `line`, with the id `{stream}:{n}` (a resumable stream's).
pub(crate) fn sse_event_with_id(stream: &str, n: u64, line: &str) -> Bytes {
    let mut out = format!("id: {stream}:{n}\n");
    out.reserve(line.len() + 24);
    push_event(&mut out, line);
    Bytes::from(out)
}

fn push_event(out: &mut String, line: &str) {
    out.push_str("event: message\ndata: ");
    // A JSON line has no raw line breaks; should one slip in, each line is its own data line.
    out.push_str(&line.replace('\n', "\ndata: "));
    out.push_str("\n\n");
}

/// A response body.
pub(crate) enum Body {
    /// Nothing.
    Empty,
    /// One buffer (taken when sent).
    Full(Option<Bytes>),
    /// A request answered as SSE: messages it sends, then its answer.
    Request(Box<RequestStream>),
    /// A long-lived stream of ready-made SSE frames (the GET stream, `subscriptions/listen`).
    Stream(mpsc::Receiver<Bytes>),
    /// A resumable call's stream, read from its log.
    Resumable(Box<Reader>),
}

/// A request answered as SSE.
pub(crate) struct RequestStream {
    first: Option<Bytes>,
    messages: mpsc::Receiver<String>,
    work: Option<Work>,
    answer: Option<String>,
}

impl RequestStream {
    pub(crate) fn new(first: String, messages: mpsc::Receiver<String>, work: Work) -> Self {
        Self { first: Some(sse_event(&first)), messages, work: Some(work), answer: None }
    }
}

impl Body {
    pub(crate) fn full(bytes: impl Into<Bytes>) -> Self {
        Body::Full(Some(bytes.into()))
    }
}

impl hyper::body::Body for Body {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        match self.get_mut() {
            Body::Empty => Poll::Ready(None),
            Body::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            Body::Stream(rx) => rx.poll_recv(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
            Body::Resumable(reader) => reader.poll_next(cx).map(|b| b.map(|b| Ok(Frame::data(b)))),
            Body::Request(stream) => {
                if let Some(first) = stream.first.take() {
                    return Poll::Ready(Some(Ok(Frame::data(first))));
                }
                // Messages the request sent come before its answer.
                if let Poll::Ready(Some(line)) = stream.messages.poll_recv(cx) {
                    return Poll::Ready(Some(Ok(Frame::data(sse_event(&line)))));
                }
                if let Some(work) = stream.work.as_mut() {
                    match work.as_mut().poll(cx) {
                        Poll::Ready(answer) => {
                            stream.work = None;
                            stream.answer = Some(answer);
                        }
                        Poll::Pending => return Poll::Pending,
                    }
                }
                // The work is done (its sender dropped): drain what it sent, then the answer.
                if let Poll::Ready(Some(line)) = stream.messages.poll_recv(cx) {
                    return Poll::Ready(Some(Ok(Frame::data(sse_event(&line)))));
                }
                Poll::Ready(stream.answer.take().map(|answer| Ok(Frame::data(sse_event(&answer)))))
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Body::Empty => true,
            Body::Full(bytes) => bytes.is_none(),
            _ => false,
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Body::Empty => SizeHint::with_exact(0),
            Body::Full(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Body::Full(None) => SizeHint::with_exact(0),
            _ => SizeHint::default(),
        }
    }
}
