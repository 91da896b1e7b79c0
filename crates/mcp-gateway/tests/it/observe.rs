//! The `ServeObserver` port: what each front tells it of a request as it arrives (the peer's
//! address, the revision, the session), and the answer it is told.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper_util::rt::TokioIo;
use mcp_gateway::{
    Answered, Gateway, GatewayOptions, HttpOptions, HttpServer, Opened, Received, ServeObserver, ServeWatch,
    SessionGuard,
};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::net::TcpStream;

use crate::{STATELESS, backend, envelope};

/// What the observer was told of one request.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    method: String,
    version: Option<String>,
    peer: Option<SocketAddr>,
    session: Option<String>,
    /// How it was answered (`result`, `error`, `cancelled`), `None` when not told.
    answered: Option<&'static str>,
}

/// What the observer is told of requests, and of sessions.
type Requests = Arc<Mutex<Vec<Seen>>>;
type Sessions = Arc<Mutex<Vec<String>>>;

#[derive(Debug, Default)]
struct Recorder(Requests, Sessions);

/// Notes its session's end when dropped.
struct SessionEnd(Arc<Mutex<Vec<String>>>, String);

impl Drop for SessionEnd {
    fn drop(&mut self) {
        self.0.lock().unwrap().push(format!("ended {}", self.1));
    }
}

struct Watch {
    seen: Arc<Mutex<Vec<Seen>>>,
    index: usize,
}

impl ServeObserver for Recorder {
    fn received(&self, request: &Received<'_>) -> Box<dyn ServeWatch> {
        let mut seen = self.0.lock().unwrap();
        seen.push(Seen {
            method: request.method.to_owned(),
            version: request.protocol_version.map(str::to_owned),
            peer: request.peer,
            session: request.session.map(str::to_owned),
            answered: None,
        });
        Box::new(Watch { seen: Arc::clone(&self.0), index: seen.len() - 1 })
    }

    fn session(&self, opened: &Opened<'_>) -> Option<SessionGuard> {
        let what = format!("{} {}", if opened.http { "http" } else { "stdio" }, opened.protocol_version);
        self.1.lock().unwrap().push(format!("opened {what}"));
        Some(Box::new(SessionEnd(Arc::clone(&self.1), what)))
    }
}

impl ServeWatch for Watch {
    fn enter(&self) -> Box<dyn std::any::Any> {
        Box::new(())
    }

    fn end(self: Box<Self>, answer: Answered<'_>) {
        let answered = match answer {
            Answered::Result(_) => "result",
            Answered::Error(_) => "error",
            Answered::Cancelled => "cancelled",
            _ => "other",
        };
        self.seen.lock().unwrap()[self.index].answered = Some(answered);
    }
}

fn observed() -> (Gateway, Requests) {
    let (gateway, seen, _) = observed_sessions();
    (gateway, seen)
}

fn observed_sessions() -> (Gateway, Requests, Sessions) {
    let recorder = Recorder::default();
    let (seen, sessions) = (Arc::clone(&recorder.0), Arc::clone(&recorder.1));
    let options = GatewayOptions { observer: Some(Arc::new(recorder)), ..GatewayOptions::default() };
    (Gateway::new(Arc::new(backend()), options).unwrap(), seen, sessions)
}

/// POSTs `body` on a connection of the test's own, whose local address it returns.
async fn post_from(addr: SocketAddr, headers: &[(&str, &str)], body: &Value) -> (SocketAddr, http::HeaderMap, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let local = stream.local_addr().unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let mut request = hyper::Request::builder()
        .method("POST")
        .uri("/mcp")
        .header("host", addr.to_string())
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender.send_request(request.body(Full::new(Bytes::from(body.to_string()))).unwrap()).await.unwrap();
    let headers = response.headers().clone();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (local, headers, String::from_utf8(bytes.to_vec()).unwrap())
}

#[tokio::test]
async fn the_http_front_tells_the_client_address_and_the_revision() {
    let (gateway, seen) = observed();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));

    let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}}});
    let (init_from, headers, _) = post_from(addr, &[], &init).await;
    let session = headers.get("mcp-session-id").unwrap().to_str().unwrap().to_owned();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    // The header names a revision the session does not speak: the session's is told.
    let (list_from, _, body) =
        post_from(addr, &[("mcp-session-id", &session), ("mcp-protocol-version", "2025-06-18")], &list).await;
    assert!(body.contains("tools"), "{body}");
    let mut stateless = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}});
    stateless["params"]["_meta"] = envelope(json!({}));
    let (stateless_from, _, _) =
        post_from(addr, &[("mcp-protocol-version", STATELESS), ("mcp-method", "tools/list")], &stateless).await;
    let _ = stop.send(());

    let seen = seen.lock().unwrap().clone();
    assert_eq!(
        seen,
        vec![
            // The initialize's revision is its answer's (it is told it), not known on arrival.
            Seen {
                method: "initialize".into(),
                version: None,
                peer: Some(init_from),
                session: None,
                answered: Some("result"),
            },
            Seen {
                method: "tools/list".into(),
                version: Some("2025-06-18".into()),
                peer: Some(list_from),
                session: Some(session),
                answered: Some("result"),
            },
            Seen {
                method: "tools/list".into(),
                version: Some(STATELESS.into()),
                peer: Some(stateless_from),
                session: None,
                answered: Some("result"),
            },
        ]
    );
    // Three connections, three client ports: each request names its own.
    assert!(init_from.ip().is_loopback() && init_from.port() != list_from.port());
}

/// Issue 35: a request refused before the gateway handles it (its headers contradict its body,
/// its envelope is missing) is still told, as an error: its span carries the error status.
#[tokio::test]
async fn requests_refused_at_the_front_are_told_as_errors() {
    let (gateway, seen) = observed();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending()));
    let mut call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo__echo", "arguments": {}}});
    call["params"]["_meta"] = envelope(json!({}));
    let mismatched = [("mcp-protocol-version", STATELESS), ("mcp-method", "tools/list"), ("mcp-name", "echo__echo")];
    let (_, _, body) = post_from(addr, &mismatched, &call).await;
    assert!(body.contains("error"), "{body}");
    let bare = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/list"});
    let (_, _, body) = post_from(addr, &[], &bare).await;
    assert!(body.contains("no Mcp-Session-Id"), "{body}");
    let seen = seen.lock().unwrap().clone();
    let told: Vec<_> = seen.iter().map(|s| (s.method.as_str(), s.answered)).collect();
    assert_eq!(told, [("tools/call", Some("error")), ("tools/list", Some("error"))]);
}

#[tokio::test]
async fn the_stdio_front_tells_the_session_revision_and_no_peer() {
    let (gateway, seen) = observed();
    let input = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"}),
    ]
    .iter()
    .map(|m| format!("{m}\n"))
    .collect::<String>();
    let mut output = Vec::new();
    mcp_gateway::serve_stdio(gateway, input.as_bytes(), &mut output, Default::default()).await.unwrap();
    let output = String::from_utf8(output).unwrap();
    assert!(output.contains("\"tools\""), "{output}");

    let seen = seen.lock().unwrap().clone();
    let init = seen.iter().find(|s| s.method == "initialize").unwrap_or_else(|| panic!("{seen:?}"));
    assert_eq!(init.answered, Some("result"), "an initialize is told its answer");
    let list = seen.iter().find(|s| s.method == "tools/list").unwrap_or_else(|| panic!("{seen:?}"));
    assert_eq!(list.version.as_deref(), Some("2025-03-26"));
    assert_eq!(list.peer, None);
    assert!(seen.iter().all(|s| s.peer.is_none()), "{seen:?}");
}

#[tokio::test]
async fn a_request_cancelled_while_handled_is_told_so() {
    let (gateway, seen) = observed();
    let (mut client, server) = tokio::io::duplex(64 * 1024);
    let (read, write) = tokio::io::split(server);
    let served = tokio::spawn(mcp_gateway::serve_stdio(gateway, read, write, Default::default()));
    let send = |m: Value| format!("{m}\n");
    let lines = [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "echo__slow", "arguments": {"ms": 60_000}}}),
    ];
    for line in lines {
        tokio::io::AsyncWriteExt::write_all(&mut client, send(line).as_bytes()).await.unwrap();
    }
    // Cancelled once it is being handled.
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while !seen.lock().unwrap().iter().any(|s| s.method == "tools/call") {
        assert!(tokio::time::Instant::now() < deadline, "the call was never received");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let cancel = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": 1}});
    tokio::io::AsyncWriteExt::write_all(&mut client, send(cancel).as_bytes()).await.unwrap();
    let told = loop {
        let call = seen.lock().unwrap().iter().find(|s| s.method == "tools/call").cloned();
        if let Some(answered) = call.and_then(|c| c.answered) {
            break answered;
        }
        assert!(tokio::time::Instant::now() < deadline, "the cancelled call was never told");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    };
    assert_eq!(told, "cancelled");
    drop(client);
    tokio::time::timeout(std::time::Duration::from_secs(10), served).await.unwrap().unwrap().unwrap();
}

#[tokio::test]
async fn a_session_is_watched_from_initialize_to_its_end() {
    // HTTP: from the initialize to the DELETE.
    let (gateway, _, sessions) = observed_sessions();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let session = crate::initialize(addr, "2025-06-18", json!({})).await;
    assert_eq!(*sessions.lock().unwrap(), vec!["opened http 2025-06-18"]);
    let headers = [("mcp-session-id", session.as_str()), ("mcp-protocol-version", "2025-06-18")];
    let deleted = crate::exchange(addr, "DELETE", &headers, "").await;
    assert!(deleted.status < 300, "{deleted:?}");
    let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(10);
    while sessions.lock().unwrap().len() < 2 {
        assert!(tokio::time::Instant::now() < deadline, "the session never ended: {:?}", sessions.lock().unwrap());
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(*sessions.lock().unwrap(), vec!["opened http 2025-06-18", "ended http 2025-06-18"]);
    let _ = stop.send(());

    // stdio: from the initialize to the end of the input.
    let (gateway, _, sessions) = observed_sessions();
    let input = format!(
        "{}\n",
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}})
    );
    mcp_gateway::serve_stdio(gateway, input.as_bytes(), Vec::new(), Default::default()).await.unwrap();
    assert_eq!(*sessions.lock().unwrap(), vec!["opened stdio 2025-03-26", "ended stdio 2025-03-26"]);
}

#[derive(Debug)]
pub(crate) struct FixedMetrics;

impl mcp_gateway::MetricsSource for FixedMetrics {
    fn render(&self) -> Option<String> {
        Some("scraped 1\n".to_owned())
    }
}

/// GETs `path` on `addr`: the status and the body.
async fn get(addr: SocketAddr, path: &str) -> (u16, String) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    tokio::spawn(connection);
    let request = hyper::Request::builder()
        .method("GET")
        .uri(path)
        .header("host", addr.to_string())
        .body(Full::new(Bytes::new()));
    let response = sender.send_request(request.unwrap()).await.unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8(bytes.to_vec()).unwrap())
}

async fn serve_metrics(metrics_addr: Option<SocketAddr>) -> (SocketAddr, Option<SocketAddr>, impl Drop) {
    let options = HttpOptions { metrics: Some(Arc::new(FixedMetrics)), metrics_addr, ..HttpOptions::default() };
    let server = HttpServer::bind(observed().0, options).await.unwrap();
    let (front, admin) = (server.local_addr(), server.metrics_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    struct Stop(Option<tokio::sync::oneshot::Sender<()>>);
    impl Drop for Stop {
        fn drop(&mut self) {
            if let Some(stop) = self.0.take() {
                let _ = stop.send(());
            }
        }
    }
    (front, admin, Stop(Some(stop)))
}

#[tokio::test]
async fn metrics_are_served_on_the_front_or_on_an_address_of_their_own() {
    let (front, admin, _stop) = serve_metrics(None).await;
    assert_eq!(admin, None);
    assert_eq!(get(front, "/metrics").await, (200, "scraped 1\n".to_owned()));

    let (front, admin, _stop) = serve_metrics(Some(SocketAddr::from(([127, 0, 0, 1], 0)))).await;
    let admin = admin.expect("an admin address");
    assert_ne!(admin, front);
    assert_eq!(get(admin, "/metrics").await, (200, "scraped 1\n".to_owned()));
    assert_eq!(get(front, "/metrics").await.0, 404, "the front no longer answers /metrics");
    assert_eq!(get(admin, "/mcp").await.0, 404, "the admin address serves no MCP");
    assert_eq!(get(admin, "/healthz").await.0, 200);

    // The front's rule: no non-loopback address without authentication.
    let options = HttpOptions {
        metrics: Some(Arc::new(FixedMetrics)),
        metrics_addr: Some(SocketAddr::from(([0, 0, 0, 0], 0))),
        ..HttpOptions::default()
    };
    let refused = HttpServer::bind(observed().0, options).await.unwrap_err();
    assert!(matches!(refused, mcp_gateway::ServeError::Unprotected { .. }), "{refused}");
}
