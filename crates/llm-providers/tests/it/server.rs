//! A scripted HTTP server on 127.0.0.1 that records every request it gets.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode, Uri};
use axum::response::Response;
use bytes::Bytes;
use serde_json::Value;

/// The test key; never snapshotted.
pub const KEY: &str = "test-key-0123456789";

/// One scripted answer.
#[derive(Clone)]
pub struct Reply {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
    /// Send the body in pieces of this many bytes (exercises parsing across chunk boundaries).
    chunk: usize,
    delay: Duration,
    /// Break the connection after sending the body (an error instead of a clean end).
    abort: bool,
    /// Wait this long after the first piece (a stalled stream).
    stall: Duration,
}

impl Reply {
    pub fn new(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Self {
        Reply {
            status,
            headers: vec![("content-type".into(), content_type.into())],
            body: body.into(),
            chunk: 13,
            delay: Duration::ZERO,
            abort: false,
            stall: Duration::ZERO,
        }
    }

    pub fn sse(body: &str) -> Self {
        Self::new(200, "text/event-stream", body)
    }

    pub fn json(status: u16, body: &str) -> Self {
        Self::new(status, "application/json", body)
    }

    pub fn header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.into(), value.into()));
        self
    }

    pub fn delay(mut self, delay: Duration) -> Self {
        self.delay = delay;
        self
    }

    pub fn abort(mut self) -> Self {
        self.abort = true;
        self
    }

    pub fn stall(mut self, stall: Duration) -> Self {
        self.stall = stall;
        self
    }
}

/// What the server received.
#[derive(Debug, Clone)]
pub struct Recorded {
    pub path: String,
    pub headers: HeaderMap,
    pub body: Value,
}

impl Recorded {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }
}

#[derive(Default)]
struct Script {
    replies: Mutex<VecDeque<Reply>>,
    requests: Mutex<Vec<Recorded>>,
}

pub struct FakeServer {
    /// `http://127.0.0.1:PORT`, no trailing slash.
    pub base: String,
    script: Arc<Script>,
}

impl FakeServer {
    pub async fn start(replies: Vec<Reply>) -> Self {
        let script = Arc::new(Script { replies: Mutex::new(replies.into()), requests: Mutex::default() });
        let app = Router::new().fallback(handle).with_state(Arc::clone(&script));
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        FakeServer { base, script }
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.script.requests.lock().unwrap().clone()
    }
}

async fn handle(State(script): State<Arc<Script>>, uri: Uri, headers: HeaderMap, body: Bytes) -> Response {
    let body = serde_json::from_slice(&body).unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into()));
    script.requests.lock().unwrap().push(Recorded { path: uri.path().to_owned(), headers, body });
    let reply = script.replies.lock().unwrap().pop_front();
    let Some(reply) = reply else {
        return Response::builder().status(500).body(Body::from("no scripted reply left")).unwrap();
    };
    tokio::time::sleep(reply.delay).await;
    let pieces: Vec<Bytes> = reply.body.chunks(reply.chunk.max(1)).map(Bytes::copy_from_slice).collect();
    let (abort, stall) = (reply.abort, reply.stall);
    let stream = futures_util::stream::unfold((pieces.into_iter(), 0usize), move |(mut it, sent)| async move {
        if sent == usize::MAX {
            return None;
        }
        if sent == 1 && !stall.is_zero() {
            tokio::time::sleep(stall).await;
        }
        match it.next() {
            Some(piece) => Some((Ok(piece), (it, sent + 1))),
            None if abort => Some((Err(std::io::Error::other("connection dropped on purpose")), (it, usize::MAX))),
            None => None,
        }
    });
    let mut response = Response::builder().status(StatusCode::from_u16(reply.status).unwrap());
    for (name, value) in &reply.headers {
        response = response.header(name, value);
    }
    response.body(Body::from_stream(stream)).unwrap()
}
