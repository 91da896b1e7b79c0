//! The stdio front through a real pipe: the `mcp-gateway-fake` binary (the gateway over the
//! fake upstreams) as a child process.

use std::process::Stdio;
use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::text_of;

struct Peer {
    child: Child,
    stdin: ChildStdin,
    stdout: tokio::io::Lines<BufReader<ChildStdout>>,
}

impl Peer {
    fn spawn() -> Peer {
        let mut child = Command::new(env!("CARGO_BIN_EXE_mcp-gateway-fake"))
            .arg("stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .unwrap();
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap()).lines();
        Peer { child, stdin, stdout }
    }

    async fn send(&mut self, message: &Value) {
        self.send_raw(&message.to_string()).await;
    }

    async fn send_raw(&mut self, line: &str) {
        self.stdin.write_all(line.as_bytes()).await.unwrap();
        self.stdin.write_all(b"\n").await.unwrap();
        self.stdin.flush().await.unwrap();
    }

    async fn next(&mut self) -> Value {
        let line =
            tokio::time::timeout(Duration::from_secs(10), self.stdout.next_line()).await.expect("a line in time");
        serde_json::from_str(&line.unwrap().expect("output open")).unwrap()
    }
}

fn initialize(version: &str, capabilities: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": version, "capabilities": capabilities, "clientInfo": {"name": "pipe", "version": "1"}}})
}

#[tokio::test]
async fn a_session_over_a_pipe_lists_calls_and_is_asked_about_confirm_tools() {
    let mut peer = Peer::spawn();
    peer.send(&initialize("2025-06-18", json!({"elicitation": {}}))).await;
    let init = peer.next().await;
    assert_eq!(init["result"]["protocolVersion"], "2025-06-18");
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    let list = peer.next().await;
    let names: Vec<&str> =
        list["result"]["tools"].as_array().unwrap().iter().map(|t| t["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"files__write_file") && !names.contains(&"files__rm"), "{names:?}");

    peer.send(&json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "files__write_file", "arguments": {"path": "p"}}}))
        .await;
    let asked = peer.next().await;
    assert_eq!(asked["method"], "elicitation/create");
    // While the call waits, other requests are served.
    peer.send(&json!({"jsonrpc": "2.0", "id": 3, "method": "ping"})).await;
    assert_eq!(peer.next().await, json!({"jsonrpc": "2.0", "id": 3, "result": {}}));
    peer.send(
        &json!({"jsonrpc": "2.0", "id": asked["id"], "result": {"action": "accept", "content": {"decision": "yes"}}}),
    )
    .await;
    let done = peer.next().await;
    assert_eq!(done["id"], 2);
    assert!(text_of(&done["result"]).contains(r#""tool":"write_file""#), "{done}");

    // A stateless request on the same pipe is served from its own envelope.
    peer.send(&json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {"name": "echo__echo", "arguments": {"x": 1},
        "_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}}}))
    .await;
    let stateless = peer.next().await;
    assert_eq!(stateless["result"]["resultType"], "complete");

    // End of input: the gateway ends, cleanly.
    drop(peer.stdin);
    let status = tokio::time::timeout(Duration::from_secs(10), peer.child.wait()).await.unwrap().unwrap();
    assert!(status.success(), "{status}");
}

#[tokio::test]
async fn cancelled_requests_get_no_answer_and_bad_lines_do_no_harm() {
    let mut peer = Peer::spawn();
    peer.send(&initialize("2025-11-25", json!({}))).await;
    peer.next().await;
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"})).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": "slow", "method": "tools/call",
        "params": {"name": "echo__slow", "arguments": {"ms": 5000}}}))
        .await;
    peer.send(&json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow"}})).await;
    peer.send_raw("{this is not json").await;
    let parse_error = peer.next().await;
    assert_eq!(parse_error["error"]["code"], -32700);
    peer.send_raw(&format!("{{\"pad\":\"{}\"}}", "x".repeat(17 * 1024 * 1024))).await;
    let too_long = peer.next().await;
    assert_eq!(too_long["error"]["code"], -32600);
    assert!(too_long["error"]["message"].as_str().unwrap().contains("longer than"));
    peer.send(&json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list"})).await;
    let list = peer.next().await;
    assert_eq!(list["id"], 9, "the cancelled call was never answered: {list}");
    // A request before initialize on another pipe is refused, not served.
    let mut fresh = Peer::spawn();
    fresh.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    assert_eq!(fresh.next().await["error"]["code"], -32600);
}

/// A line that arrives in pieces while the front is woken for something else (a change to
/// announce) is still read whole: the read the front drops for the other branch loses nothing.
#[tokio::test]
async fn a_line_split_around_a_notification_is_read_whole() {
    use std::sync::Arc;

    use mcp_gateway::fake::FakeBackend;
    use mcp_gateway::{BackendEvent, Gateway, GatewayOptions, serve_stdio};

    let backend = Arc::new(FakeBackend::standard());
    let gateway =
        Gateway::new(Arc::clone(&backend) as Arc<dyn mcp_gateway::Backend>, GatewayOptions::default()).unwrap();
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server);
    let front = tokio::spawn(serve_stdio(gateway, server_read, server_write, Default::default()));
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.expect("a line in time");
        serde_json::from_str(&line.unwrap().expect("output open")).unwrap()
    };
    client_write.write_all(format!("{}\n", initialize("2025-11-25", json!({}))).as_bytes()).await.unwrap();
    assert_eq!(next().await["id"], 0);
    client_write.write_all(b"{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}\n").await.unwrap();
    for round in 0..3 {
        client_write.write_all(br#"{"jsonrpc":"2.0","id":7,"me"#).await.unwrap();
        tokio::time::sleep(Duration::from_millis(50)).await;
        backend.emit(BackendEvent::ToolsChanged);
        let announced = next().await;
        assert_eq!(announced["method"], "notifications/tools/list_changed", "round {round}: {announced}");
        client_write.write_all(b"thod\":\"tools/list\"}\n").await.unwrap();
        let listed = next().await;
        assert_eq!(listed["id"], 7, "round {round}: the line was not read whole: {listed}");
        assert!(listed["result"]["tools"].is_array(), "round {round}: {listed}");
    }
    client_write.shutdown().await.unwrap();
    tokio::time::timeout(Duration::from_secs(10), front).await.unwrap().unwrap().unwrap();
}

/// An output that counts its writes and keeps what was written (shared: the front owns its
/// writer, on a task of its own).
#[derive(Default, Clone)]
struct CountingWriter(std::sync::Arc<std::sync::Mutex<(usize, Vec<u8>)>>);

impl tokio::io::AsyncWrite for CountingWriter {
    fn poll_write(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        let mut seen = self.0.lock().unwrap();
        seen.0 += 1;
        seen.1.extend_from_slice(buf);
        std::task::Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn poll_shutdown(
        self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::task::Poll::Ready(Ok(()))
    }
}

/// `calls` stateless echo calls read at once, answered through a front with `options` on a
/// task of its own (as `serve` runs it): how many writes the answers took, and each answer's id.
async fn answer_writes(calls: u64, options: mcp_gateway::StdioOptions) -> (usize, Vec<u64>) {
    use std::sync::Arc;

    use mcp_gateway::{Gateway, GatewayOptions, serve_stdio};

    let gateway = Gateway::new(Arc::new(crate::backend()), GatewayOptions::default()).unwrap();
    let mut input = String::new();
    for id in 1..=calls {
        let params = json!({"name": "echo__echo", "arguments": {"text": "hi"}, "_meta": crate::envelope(json!({}))});
        input.push_str(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}).to_string());
        input.push('\n');
    }
    let out = CountingWriter::default();
    let front = tokio::spawn(serve_stdio(gateway, std::io::Cursor::new(input.into_bytes()), out.clone(), options));
    front.await.unwrap().unwrap();
    let (writes, bytes) = std::mem::take(&mut *out.0.lock().unwrap());
    let text = String::from_utf8(bytes).unwrap();
    let mut ids: Vec<u64> = text
        .lines()
        .map(|line| {
            let answer: Value = serde_json::from_str(line).unwrap();
            assert_eq!(answer["result"]["isError"], Value::Null, "{answer}");
            answer["id"].as_u64().unwrap()
        })
        .collect();
    ids.sort_unstable();
    (writes, ids)
}

/// With the client on this process's one CPU, answers of calls that finish together go out in
/// one write (one wake-up of the client), none lost or doubled; by default each may go alone.
#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn answers_finishing_together_share_a_write_when_the_client_shares_the_cpu() {
    let calls = 32;
    let coalesced = mcp_gateway::StdioOptions { coalesce_answers: true, ..Default::default() };
    let (writes, ids) = answer_writes(calls, coalesced).await;
    assert_eq!(ids, (1..=calls).collect::<Vec<_>>());
    assert!(writes <= 8, "{writes} writes for {calls} answers");
    let (_, ids) = answer_writes(calls, mcp_gateway::StdioOptions::default()).await;
    assert_eq!(ids, (1..=calls).collect::<Vec<_>>());
}

/// `lines` through the stdio front (in process) with `options`; its answers by id.
async fn answers_to(lines: &[Value], options: mcp_gateway::StdioOptions) -> Vec<Value> {
    use std::sync::Arc;

    use mcp_gateway::{Gateway, GatewayOptions, serve_stdio};

    let gateway = Gateway::new(Arc::new(crate::backend()), GatewayOptions::default()).unwrap();
    let input: String = lines.iter().map(|l| format!("{l}\n")).collect();
    let out = CountingWriter::default();
    let front = tokio::spawn(serve_stdio(gateway, std::io::Cursor::new(input.into_bytes()), out.clone(), options));
    front.await.unwrap().unwrap();
    let (_, bytes) = std::mem::take(&mut *out.0.lock().unwrap());
    String::from_utf8(bytes).unwrap().lines().map(|line| serde_json::from_str(line).unwrap()).collect()
}

/// Past the most requests in flight, a request is refused at once, and reading goes on (the
/// client's answers and cancellations must not wait behind the calls they unblock).
#[tokio::test]
async fn a_request_past_the_most_in_flight_is_refused_and_reading_goes_on() {
    let envelope = crate::envelope(json!({}));
    let slow = |id: u64| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "echo__slow", "arguments": {"ms": 300}, "_meta": envelope}})
    };
    let ping = json!({"jsonrpc": "2.0", "id": 9, "method": "ping", "params": {"_meta": envelope}});
    let options = mcp_gateway::StdioOptions { max_in_flight: 2, ..Default::default() };
    let answers = answers_to(&[slow(1), slow(2), slow(3), ping], options).await;
    let of = |id: u64| answers.iter().find(|a| a["id"] == id).cloned().unwrap_or_else(|| panic!("{answers:?}"));
    let refused = of(3);
    assert_eq!(refused["error"]["code"], -32600, "{refused}");
    assert!(refused["error"]["message"].as_str().unwrap().contains("2 requests in flight"), "{refused}");
    assert!(of(1)["result"].is_object() && of(2)["result"].is_object(), "{answers:?}");
    // The ping came after the refused call and was answered before the slow calls ended.
    let position = |id: u64| answers.iter().position(|a| a["id"] == id).unwrap();
    assert!(position(9) < position(1), "{answers:?}");
}

/// A batch, or JSON that is no message, is answered with an error of null id (as JSON-RPC
/// says); a bad response from the client is not answered.
#[tokio::test]
async fn a_batch_or_a_stray_value_gets_an_error_with_a_null_id() {
    let mut peer = Peer::spawn();
    peer.send(&initialize("2025-11-25", json!({}))).await;
    peer.next().await;
    for line in [r#"[{"jsonrpc":"2.0","id":3,"method":"ping"}]"#, r#""just a string""#, "[]", r#"{"a":1}"#] {
        peer.send_raw(line).await;
        let answer = peer.next().await;
        assert_eq!((answer["id"].clone(), answer["error"]["code"].clone()), (Value::Null, json!(-32600)), "{line}");
    }
    peer.send_raw(r#"{"jsonrpc":"2.0","result":{},"id":{"no":"such"}}"#).await;
    peer.send(&json!({"jsonrpc": "2.0", "id": 5, "method": "ping"})).await;
    assert_eq!(peer.next().await["id"], 5, "the bad response was not answered");
}
