//! Resumable call streams: a slow session call becomes SSE with a priming event, survives its
//! client going away for the grace, and is resumed with `Last-Event-ID`.

use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use mcp_gateway::{DrainOptions, Gateway, GatewayOptions, HttpOptions, HttpServer};
use serde_json::{Value, json};
use tokio::net::TcpStream;
use tokio::task::JoinHandle;

use super::*;

const VERSION: &str = "2025-11-25";

fn slow_call(id: u64, ms: u64) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "echo__slow", "arguments": {"ms": ms}}})
}

/// A request on a connection of its own, which the test can cut (abort the returned task).
async fn open(
    addr: SocketAddr,
    method: &str,
    headers: &[(&str, &str)],
    body: &str,
) -> (hyper::Response<Incoming>, JoinHandle<()>) {
    let stream = TcpStream::connect(addr).await.unwrap();
    let (mut sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await.unwrap();
    let connection = tokio::spawn(async move {
        let _ = connection.await;
    });
    let mut request = hyper::Request::builder().method(method).uri("/mcp").header("host", addr.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = sender.send_request(request.body(Full::new(Bytes::from(body.to_owned()))).unwrap()).await.unwrap();
    (response, connection)
}

/// POSTs `body` in `session` accepting SSE, on a connection the test can cut.
async fn post_call(addr: SocketAddr, session: &str, body: &Value) -> (hyper::Response<Incoming>, JoinHandle<()>) {
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", VERSION),
    ];
    open(addr, "POST", &headers, &body.to_string()).await
}

/// GET with `Last-Event-ID`, read whole.
async fn resume(addr: SocketAddr, session: &str, last: &str) -> Answer {
    let headers = [
        ("accept", "text/event-stream"),
        ("mcp-session-id", session),
        ("mcp-protocol-version", VERSION),
        ("last-event-id", last),
    ];
    exchange(addr, "GET", &headers, "").await
}

/// The next whole SSE event of a body being read, as text.
async fn next_raw_event(body: &mut Incoming, pending: &mut String) -> String {
    loop {
        if let Some(end) = pending.find("\n\n") {
            return pending.drain(..end + 2).collect();
        }
        let frame = tokio::time::timeout(Duration::from_secs(10), body.frame()).await.expect("an event in time");
        let frame = frame.expect("the stream is open").unwrap();
        if let Ok(data) = frame.into_data() {
            pending.push_str(std::str::from_utf8(&data).unwrap());
        }
    }
}

/// The stream id of a priming event (`id: S:0`, `retry:`, empty data), checked as such.
fn priming_stream(event: &str) -> String {
    let id = event.lines().find_map(|l| l.strip_prefix("id: ")).unwrap_or_else(|| panic!("no id in {event:?}"));
    assert!(event.lines().any(|l| l.starts_with("retry: ")), "no retry in {event:?}");
    assert!(event.lines().any(|l| l == "data: "), "not empty data in {event:?}");
    let (stream, n) = id.rsplit_once(':').unwrap();
    assert_eq!(n, "0", "{event:?}");
    stream.to_owned()
}

fn quick_options() -> HttpOptions {
    HttpOptions { resume_grace: Duration::from_millis(400), ..HttpOptions::default() }
}

#[tokio::test]
async fn a_slow_call_becomes_a_stream_that_primes_then_answers() {
    let gw = start().await;
    let session = initialize(gw.addr, VERSION, json!({})).await;
    let (response, _connection) = post_call(gw.addr, &session, &slow_call(7, 300)).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let body = String::from_utf8(response.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    let events: Vec<&str> = body.split_inclusive("\n\n").collect();
    assert_eq!(events.len(), 2, "{body}");
    let stream = priming_stream(events[0]);
    assert!(events[1].starts_with(&format!("id: {stream}:1\n")), "{body}");
    let messages = sse_messages(&body);
    assert_eq!(messages.len(), 1, "{body}");
    assert_eq!(messages[0]["id"], 7);
    assert!(text_of(&messages[0]["result"]).contains("\"ms\":300"), "{body}");
}

#[tokio::test]
async fn a_call_that_asks_first_is_resumed_after_its_client_answered() {
    let gw = start_with(quick_options()).await;
    let session = initialize(gw.addr, VERSION, json!({"elicitation": {}})).await;
    // `write_file` is confirmed: the approval form is the call's first message.
    let call = json!({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
        "params": {"name": "files__write_file", "arguments": {"path": "a.txt", "text": "hello"}}});
    let (response, connection) = post_call(gw.addr, &session, &call).await;
    assert_eq!(response.headers()["content-type"], "text/event-stream");
    let mut body = response.into_body();
    let mut pending = String::new();
    let stream = priming_stream(&next_raw_event(&mut body, &mut pending).await);
    let asked = next_raw_event(&mut body, &mut pending).await;
    assert!(asked.starts_with(&format!("id: {stream}:1\n")), "{asked:?}");
    let asked = sse_messages(&asked).pop().unwrap();
    assert_eq!(asked["method"], "elicitation/create", "{asked}");
    // The client goes away, answers the form, and resumes after the question.
    drop(body);
    connection.abort();
    let answer =
        json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"decision": "yes"}}});
    assert_eq!(post_session(gw.addr, &session, VERSION, &answer).await.status, 202);
    let resumed = resume(gw.addr, &session, &format!("{stream}:1")).await;
    let messages = resumed.messages();
    assert_eq!(messages.len(), 1, "{resumed:?}");
    assert_eq!(messages[0]["id"], 8);
    assert_eq!(messages[0]["result"].get("isError"), None, "{resumed:?}");
    assert_eq!(gw.backend.calls().len(), 1);
}

#[tokio::test]
async fn older_revisions_get_ids_but_no_priming_event() {
    let gw = start_with(quick_options()).await;
    let session = initialize(gw.addr, "2025-06-18", json!({})).await;
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", "2025-06-18"),
    ];
    let answer = exchange(gw.addr, "POST", &headers, &slow_call(2, 200).to_string()).await;
    assert_eq!(answer.headers["content-type"], "text/event-stream", "{answer:?}");
    let events: Vec<&str> = answer.body.split_inclusive("\n\n").collect();
    assert_eq!(events.len(), 1, "{answer:?}");
    assert!(!answer.body.contains("retry:"), "{answer:?}");
    let id = events[0].lines().find_map(|l| l.strip_prefix("id: ")).unwrap();
    let (stream, n) = id.rsplit_once(':').unwrap();
    assert_eq!(n, "1", "{answer:?}");
    assert_eq!(answer.json()["id"], 2);
    // Resumable all the same, from the id it saw.
    let resumed = resume(gw.addr, &session, &format!("{stream}:0")).await;
    assert_eq!(resumed.json()["id"], 2, "{resumed:?}");
}

#[tokio::test]
async fn quick_answers_and_clients_that_read_no_sse_stay_json() {
    let gw = start_with(json_answers()).await;
    let session = initialize(gw.addr, VERSION, json!({})).await;
    let call = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "echo__echo", "arguments": {"text": "hi"}}});
    let answer = post_session(gw.addr, &session, VERSION, &call).await;
    assert_eq!(answer.headers["content-type"], "application/json", "{answer:?}");
    assert_eq!(answer.json()["id"], 1);

    // A call slower than the default resume delay, from a client that reads no SSE.
    let gw = start().await;
    let session = initialize(gw.addr, VERSION, json!({})).await;
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json"),
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", VERSION),
    ];
    let answer = exchange(gw.addr, "POST", &headers, &slow_call(2, 200).to_string()).await;
    assert_eq!(answer.headers["content-type"], "application/json", "{answer:?}");
    assert_eq!(answer.json()["id"], 2);
}

#[tokio::test]
async fn a_client_that_goes_away_resumes_with_last_event_id() {
    let gw = start_with(HttpOptions { resume_grace: Duration::from_secs(1), ..HttpOptions::default() }).await;
    let session = initialize(gw.addr, VERSION, json!({})).await;

    // Resumed while the call runs: the answer comes live on the resumed stream.
    let (response, connection) = post_call(gw.addr, &session, &slow_call(3, 700)).await;
    let mut body = response.into_body();
    let stream = priming_stream(&next_raw_event(&mut body, &mut String::new()).await);
    drop(body);
    connection.abort();
    let answer = resume(gw.addr, &session, &format!("{stream}:0")).await;
    assert_eq!(answer.status, 200, "{answer:?}");
    assert!(answer.body.starts_with(&format!("id: {stream}:1\n")), "{answer:?}");
    let messages = answer.messages();
    assert_eq!(messages.len(), 1, "{answer:?}");
    assert_eq!(messages[0]["id"], 3);
    assert!(text_of(&messages[0]["result"]).contains("\"ms\":700"), "{answer:?}");

    // Resumed after the call finished (within the grace): the answer is still there.
    let (response, connection) = post_call(gw.addr, &session, &slow_call(4, 100)).await;
    let mut body = response.into_body();
    let stream = priming_stream(&next_raw_event(&mut body, &mut String::new()).await);
    drop(body);
    connection.abort();
    tokio::time::sleep(Duration::from_millis(200)).await;
    let answer = resume(gw.addr, &session, &format!("{stream}:0")).await;
    assert_eq!(answer.messages().last().map(|m| m["id"].clone()), Some(json!(4)), "{answer:?}");
    // Resumed after the answer: nothing more, the stream ends.
    let answer = resume(gw.addr, &session, &format!("{stream}:1")).await;
    assert_eq!((answer.status, answer.body.as_str()), (200, ""), "{answer:?}");
    assert!(gw.backend.cancelled().is_empty(), "{:?}", gw.backend.cancelled());

    // Gone once the grace after its end has passed.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_eq!(resume(gw.addr, &session, &format!("{stream}:0")).await.status, 410);
}

#[tokio::test]
async fn malformed_ids_get_400_and_unknown_streams_410() {
    let gw = start().await;
    let session = initialize(gw.addr, VERSION, json!({})).await;
    for bad in ["garbage", "abc:x", "abc:-1", ""] {
        assert_eq!(resume(gw.addr, &session, bad).await.status, 400, "{bad:?}");
    }
    assert_eq!(resume(gw.addr, &session, "0123456789abcdef:0").await.status, 410);

    // Ahead of what the stream has sent; and another session's stream is unknown here.
    let (response, _connection) = post_call(gw.addr, &session, &slow_call(1, 500)).await;
    let mut body = response.into_body();
    let stream = priming_stream(&next_raw_event(&mut body, &mut String::new()).await);
    assert_eq!(resume(gw.addr, &session, &format!("{stream}:5")).await.status, 400);
    let other = initialize(gw.addr, VERSION, json!({})).await;
    assert_eq!(resume(gw.addr, &other, &format!("{stream}:0")).await.status, 410);
    // Without the session, there is nothing to resume.
    let headers = [("accept", "text/event-stream"), ("last-event-id", "x:0")];
    assert_eq!(exchange(gw.addr, "GET", &headers, "").await.status, 405);
}

#[tokio::test]
async fn a_call_nobody_reads_for_the_grace_is_cancelled_upstream() {
    let gw = start_with(quick_options()).await;
    let session = initialize(gw.addr, VERSION, json!({})).await;
    let (response, connection) = post_call(gw.addr, &session, &slow_call(9, 30_000)).await;
    let mut body = response.into_body();
    let stream = priming_stream(&next_raw_event(&mut body, &mut String::new()).await);
    drop(body);
    connection.abort();

    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    while gw.backend.cancelled().is_empty() {
        assert!(tokio::time::Instant::now() < deadline, "the unread call was never cancelled");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(gw.backend.cancelled()[0].arguments["ms"], 30_000);
    assert_eq!(resume(gw.addr, &session, &format!("{stream}:0")).await.status, 410);
    // Its request id is free again.
    let answer = post_session(gw.addr, &session, VERSION, &slow_call(9, 1)).await;
    assert_eq!(answer.json()["id"], 9, "{answer:?}");
}

#[tokio::test]
async fn a_draining_gateway_lets_calls_in_flight_be_resumed() {
    let gateway = Gateway::new(std::sync::Arc::new(backend()), GatewayOptions::default()).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    let life = server.lifecycle();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(server.run(async move {
        let _ = stopped.await;
    }));
    let session = initialize(addr, VERSION, json!({})).await;
    let (response, connection) = post_call(addr, &session, &slow_call(5, 800)).await;
    let mut body = response.into_body();
    let stream = priming_stream(&next_raw_event(&mut body, &mut String::new()).await);
    drop(body);
    connection.abort();

    let draining = tokio::spawn({
        let life = life.clone();
        async move { life.drain(DrainOptions::new(Duration::ZERO, Duration::from_secs(10))).await }
    });
    while !life.is_refusing() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let refused = post_session(addr, &session, VERSION, &slow_call(6, 1)).await;
    assert_eq!(refused.status, 503);
    let answer = resume(addr, &session, &format!("{stream}:0")).await;
    assert_eq!(answer.messages().last().map(|m| m["id"].clone()), Some(json!(5)), "{answer:?}");
    let report = tokio::time::timeout(Duration::from_secs(10), draining).await.unwrap().unwrap();
    assert_eq!(report.cut_off, 0);
    let _ = stop.send(());
}
