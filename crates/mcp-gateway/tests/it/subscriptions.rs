//! `resources/subscribe` and `resources/unsubscribe` over the HTTP front: one upstream
//! subscription however many sessions hold it, `notifications/resources/updated` only to the
//! sessions that subscribed and under the URI each used, released when the last one lets go.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use http_body_util::BodyExt as _;
use mcp_gateway::fake::{FakeBackend, ReceivedSubscription};
use mcp_gateway::{BackendEvent, Gateway, GatewayOptions, HttpOptions, HttpServer, ServerContent};
use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use crate::http::next_event;
use crate::*;

const V: &str = "2025-11-25";

/// `a` offers `file:///shared` and `note://a`, `b` offers `file:///shared` too (so the gateway
/// offers the shared one under a gateway-made URI for each).
async fn start_content() -> (SocketAddr, Arc<FakeBackend>) {
    start_offering(&[("a", &["file:///shared", "note://a", "note://a#no-subscribe"]), ("b", &["file:///shared"])]).await
}

/// A gateway whose upstreams offer these resources (each server, its URIs); `a` has a tool.
async fn start_offering(servers: &[(&str, &[&str])]) -> (SocketAddr, Arc<FakeBackend>) {
    let mut builder = FakeBackend::builder().tool("a", "t");
    for (server, uris) in servers {
        let resources = uris.iter().map(|u| serde_json::from_value(json!({"uri": u, "name": u})).unwrap()).collect();
        builder = builder.content(server, ServerContent { resources, ..ServerContent::default() });
    }
    let backend = Arc::new(builder.build());
    let gateway =
        Gateway::new(Arc::clone(&backend) as Arc<dyn mcp_gateway::Backend>, GatewayOptions::default()).unwrap();
    let server = HttpServer::bind(gateway, HttpOptions::default()).await.unwrap();
    let addr = server.local_addr();
    tokio::spawn(server.run(std::future::pending()));
    (addr, backend)
}

/// A session with its GET stream open.
async fn session_with_stream(addr: SocketAddr) -> (String, hyper::body::Incoming) {
    let session = initialize(addr, V, json!({})).await;
    let headers = [("accept", "text/event-stream"), ("mcp-session-id", session.as_str()), ("mcp-protocol-version", V)];
    let stream = send(addr, "GET", &headers, "").await;
    assert_eq!(stream.status(), 200);
    (session, stream.into_body())
}

async fn subscription(addr: SocketAddr, session: &str, method: &str, uri: &str) -> Value {
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": {"uri": uri}});
    post_session(addr, session, V, &body).await.json()
}

fn change(server: &str, uri: &str, subscribed: bool) -> ReceivedSubscription {
    ReceivedSubscription { server: server.to_owned(), uri: uri.to_owned(), subscribed }
}

fn updated(server: &str, uri: &str) -> BackendEvent {
    BackendEvent::ResourceUpdated { server: server.to_owned(), uri: uri.to_owned() }
}

#[tokio::test]
async fn subscribe_is_declared_and_updates_reach_only_the_sessions_that_subscribed() {
    let (addr, backend) = start_content().await;
    let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "c", "version": "1"}}});
    let answer = exchange(addr, "POST", &[("content-type", "application/json")], &body.to_string()).await;
    assert_eq!(answer.json()["result"]["capabilities"]["resources"], json!({"subscribe": true, "listChanged": true}));

    let (one, mut one_stream) = session_with_stream(addr).await;
    let (two, mut two_stream) = session_with_stream(addr).await;
    let shared_b = "mcp-gateway://b/file:///shared";
    assert_eq!(subscription(addr, &one, "resources/subscribe", shared_b).await["result"], json!({}));
    assert_eq!(subscription(addr, &two, "resources/subscribe", shared_b).await["result"], json!({}));
    assert_eq!(subscription(addr, &one, "resources/subscribe", shared_b).await["result"], json!({}), "again: no-op");
    assert_eq!(subscription(addr, &one, "resources/subscribe", "note://a").await["result"], json!({}));
    assert_eq!(
        backend.subscription_changes(),
        [change("b", "file:///shared", true), change("a", "note://a", true)],
        "one upstream subscription per resource, however many sessions hold it"
    );

    // b's resource changed: both hear of it, under the URI they subscribed to.
    backend.emit(updated("b", "file:///shared"));
    for stream in [&mut one_stream, &mut two_stream] {
        let event = next_event(stream).await;
        assert_eq!(event["method"], "notifications/resources/updated");
        assert_eq!(event["params"], json!({"uri": shared_b}));
    }
    // a's copy of the shared URI is not what anyone subscribed to: nobody hears of it; the next
    // thing session one hears is its own note.
    backend.emit(updated("a", "file:///shared"));
    backend.emit(updated("a", "note://a"));
    assert_eq!(next_event(&mut one_stream).await["params"], json!({"uri": "note://a"}));

    // Session one lets go: the upstream stays subscribed for session two, which still hears.
    assert_eq!(subscription(addr, &one, "resources/unsubscribe", shared_b).await["result"], json!({}));
    assert_eq!(backend.subscription_changes().len(), 2, "{:?}", backend.subscription_changes());
    backend.emit(updated("b", "file:///shared"));
    backend.emit(updated("a", "note://a"));
    assert_eq!(next_event(&mut one_stream).await["params"], json!({"uri": "note://a"}), "one no longer hears of b");
    assert_eq!(next_event(&mut two_stream).await["params"], json!({"uri": shared_b}));

    // The last holder lets go: the upstream subscription ends. Unsubscribing again is no error.
    assert_eq!(subscription(addr, &two, "resources/unsubscribe", shared_b).await["result"], json!({}));
    assert_eq!(subscription(addr, &two, "resources/unsubscribe", shared_b).await["result"], json!({}));
    assert_eq!(backend.subscription_changes().last(), Some(&change("b", "file:///shared", false)));
    assert_eq!(backend.subscription_changes().len(), 3);
}

#[tokio::test]
async fn unknown_and_ambiguous_uris_are_not_found_and_reach_no_upstream() {
    let (addr, backend) = start_content().await;
    let session = initialize(addr, V, json!({})).await;
    for uri in ["file:///nowhere", "file:///shared"] {
        let answer = subscription(addr, &session, "resources/subscribe", uri).await;
        assert_eq!(answer["error"]["code"], -32002, "{uri}: {answer}");
        assert_eq!(answer["error"]["data"]["uri"], uri);
    }
    assert_eq!(subscription(addr, &session, "resources/unsubscribe", "file:///nowhere").await["result"], json!({}));
    assert!(backend.subscription_changes().is_empty());
}

#[tokio::test]
async fn an_ended_session_releases_its_upstream_subscriptions() {
    let (addr, backend) = start_content().await;
    let (one, mut one_stream) = session_with_stream(addr).await;
    assert_eq!(subscription(addr, &one, "resources/subscribe", "note://a").await["result"], json!({}));
    assert_eq!(exchange(addr, "DELETE", &[("mcp-session-id", one.as_str())], "").await.status, 200);
    let end = tokio::time::timeout(Duration::from_secs(10), one_stream.frame()).await.expect("the stream ends");
    assert!(end.is_none(), "{end:?}");

    // The next subscription change, of any session, ends the one nobody holds (in the
    // background: the request that made the change does not wait for it).
    let two = initialize(addr, V, json!({})).await;
    assert_eq!(
        subscription(addr, &two, "resources/subscribe", "mcp-gateway://a/file:///shared").await["result"],
        json!({})
    );
    let changes = settled_changes(&backend, 3).await;
    assert_eq!(changes[0], change("a", "note://a", true));
    assert!(changes[1..].contains(&change("a", "note://a", false)), "{changes:?}");
    assert!(changes[1..].contains(&change("a", "file:///shared", true)), "{changes:?}");
}

/// The subscription changes the upstreams received, once there are `count` (or after 10 s).
async fn settled_changes(backend: &FakeBackend, count: usize) -> Vec<ReceivedSubscription> {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let changes = backend.subscription_changes();
        if changes.len() >= count || tokio::time::Instant::now() > deadline {
            return changes;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn an_upstream_that_does_not_answer_holds_up_only_subscriptions_to_itself() {
    let (addr, backend) = start_offering(&[("a", &["note://a#hang", "note://a"]), ("b", &["note://b"])]).await;
    let one = initialize(addr, V, json!({})).await;
    let two = initialize(addr, V, json!({})).await;
    let hung = tokio::spawn(async move { subscription(addr, &one, "resources/subscribe", "note://a#hang").await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    let other =
        tokio::time::timeout(Duration::from_secs(5), subscription(addr, &two, "resources/subscribe", "note://b"))
            .await
            .expect("a subscription to another server is not held up by the hung one");
    assert_eq!(other["result"], json!({}));
    let undo =
        tokio::time::timeout(Duration::from_secs(5), subscription(addr, &two, "resources/unsubscribe", "note://b"))
            .await
            .expect("nor is an unsubscription");
    assert_eq!(undo["result"], json!({}));
    assert_eq!(backend.subscription_changes(), [change("b", "note://b", true), change("b", "note://b", false)]);
    assert!(!hung.is_finished(), "the hung upstream's subscription is still waiting");
    hung.abort();
}

#[tokio::test]
async fn an_upstream_that_refuses_leaves_nothing_subscribed() {
    let (addr, backend) = start_content().await;
    let (session, mut stream) = session_with_stream(addr).await;
    let refused = "note://a#no-subscribe";
    for _ in 0..2 {
        let answer = subscription(addr, &session, "resources/subscribe", refused).await;
        assert_eq!(answer["error"]["code"], -32603, "{answer}");
        assert!(answer["error"]["message"].as_str().unwrap().contains("refused to subscribe"), "{answer}");
    }
    assert!(backend.subscription_changes().is_empty(), "the refusal was not recorded as a subscription");
    assert_eq!(subscription(addr, &session, "resources/subscribe", "note://a").await["result"], json!({}));
    backend.emit(updated("a", refused));
    backend.emit(updated("a", "note://a"));
    assert_eq!(next_event(&mut stream).await["params"], json!({"uri": "note://a"}), "the refused one is not held");
}

/// A URI over the store's bound is refused before anything is kept or asked upstream (a
/// session's 1024 subscriptions of megabyte URIs, each kept thrice, were gigabytes).
#[tokio::test]
async fn a_subscription_to_an_overlong_uri_is_refused() {
    let long = format!("note://{}", "x".repeat(mcp_gateway::MAX_URI_BYTES));
    let (addr, backend) = start_offering(&[("a", &[long.as_str(), "note://a"])]).await;
    let (session, _stream) = session_with_stream(addr).await;
    let answer = subscription(addr, &session, "resources/subscribe", &long).await;
    assert_eq!(answer["error"]["code"], -32602, "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("at most 4096 bytes"), "{answer}");
    assert!(backend.subscription_changes().is_empty(), "asked upstream: {:?}", backend.subscription_changes());
    assert_eq!(subscription(addr, &session, "resources/subscribe", "note://a").await["result"], json!({}));
}

#[tokio::test]
async fn a_stateless_request_cannot_subscribe() {
    let (addr, backend) = start_content().await;
    let body = json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe",
        "params": {"uri": "note://a", "_meta": envelope(json!({}))}});
    let headers = [
        ("content-type", "application/json"),
        ("accept", "application/json, text/event-stream"),
        ("mcp-protocol-version", STATELESS),
        ("mcp-method", "resources/subscribe"),
    ];
    let answer = exchange(addr, "POST", &headers, &body.to_string()).await;
    assert_eq!(answer.json()["error"]["code"], -32601, "no session holds it (2026-07-28 has none): {answer:?}");
    assert!(backend.subscription_changes().is_empty());
}

#[tokio::test]
async fn a_stdio_session_subscribes_and_hears_of_updates() {
    use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _, BufReader};
    let backend = Arc::new(
        FakeBackend::builder()
            .content(
                "a",
                ServerContent {
                    resources: vec![serde_json::from_value(json!({"uri": "note://a", "name": "a"})).unwrap()],
                    ..ServerContent::default()
                },
            )
            .build(),
    );
    let gateway =
        Gateway::new(Arc::clone(&backend) as Arc<dyn mcp_gateway::Backend>, GatewayOptions::default()).unwrap();
    let (client, server) = tokio::io::duplex(64 * 1024);
    let (server_read, server_write) = tokio::io::split(server);
    tokio::spawn(mcp_gateway::serve_stdio(gateway, server_read, server_write, Default::default()));
    let (client_read, mut client_write) = tokio::io::split(client);
    let mut lines = BufReader::new(client_read).lines();
    let mut next = async || -> Value {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line()).await.expect("a line in time");
        serde_json::from_str(&line.unwrap().expect("output open")).unwrap()
    };
    for message in [
        json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": V, "capabilities": {}, "clientInfo": {"name": "pipe", "version": "1"}}}),
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        json!({"jsonrpc": "2.0", "id": 1, "method": "resources/subscribe", "params": {"uri": "note://a"}}),
    ] {
        client_write.write_all(format!("{message}\n").as_bytes()).await.unwrap();
    }
    assert_eq!(next().await["id"], 0);
    assert_eq!(next().await, json!({"jsonrpc": "2.0", "id": 1, "result": {}}));
    assert_eq!(backend.subscription_changes(), [change("a", "note://a", true)]);
    backend.emit(updated("a", "note://a"));
    assert_eq!(
        next().await,
        json!({"jsonrpc": "2.0", "method": "notifications/resources/updated", "params": {"uri": "note://a"}})
    );
}

/// Issue 34: a session the load balancer sends to another replica (its own went away) goes on
/// there with its resource subscriptions, and held to the tools it was shown, from the store.
#[tokio::test]
async fn a_session_continued_at_another_replica_keeps_its_subscriptions_and_its_listing() {
    let clock: Arc<dyn mcp_gateway::Clock> = Arc::new(TestClock::default());
    let store: Arc<dyn mcp_gateway::SessionStore> =
        Arc::new(mcp_gateway::MemorySessions::new(16, Duration::from_secs(60), clock));
    let options = || HttpOptions { session_store: Some(Arc::clone(&store)), ..HttpOptions::default() };
    let content = ServerContent {
        resources: vec![serde_json::from_value(json!({"uri": "note://a", "name": "a"})).unwrap()],
        ..ServerContent::default()
    };
    let replica = |tools: &[&str]| {
        tools.iter().fold(FakeBackend::builder(), |b, t| b.tool("a", t)).content("a", content.clone()).build()
    };
    let (one, two) = (start_over(replica(&["t"]), options()).await, start_over(replica(&["t"]), options()).await);
    let session = initialize(one.addr, V, json!({})).await;
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let listed = post_session(one.addr, &session, V, &list).await.json();
    assert_eq!(listed["result"]["tools"][0]["name"], "a__t", "{listed}");
    assert_eq!(subscription(one.addr, &session, "resources/subscribe", "note://a").await["result"], json!({}));
    let record = store.load(&session).await.unwrap().expect("kept");
    assert_eq!(record.subscriptions.iter().collect::<Vec<_>>(), ["note://a"]);
    assert_eq!(record.listed.keys().collect::<Vec<_>>(), ["a"], "the listing is kept by server");

    // At `two`, which never saw it: the upstream subscription is renewed there, and updates
    // reach the stream the client opens there.
    let headers = [("accept", "text/event-stream"), ("mcp-session-id", session.as_str()), ("mcp-protocol-version", V)];
    let stream = send(two.addr, "GET", &headers, "").await;
    assert_eq!(stream.status(), 200);
    let mut stream = stream.into_body();
    assert_eq!(two.backend.subscription_changes(), [change("a", "note://a", true)]);
    two.backend.emit(updated("a", "note://a"));
    assert_eq!(next_event(&mut stream).await["params"], json!({"uri": "note://a"}));
    // The same tools at `two`: a call prepared against `one`'s listing goes through.
    let call = json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "a__t", "arguments": {}}});
    let answer = post_session(two.addr, &session, V, &call).await.json();
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(two.backend.calls().len(), 1);

    // At `three`, whose `a` lists other tools: the call is refused as prepared against an
    // older listing, never sent; once listed there, it goes through.
    let three = start_over(replica(&["t", "u"]), options()).await;
    let refused = post_session(three.addr, &session, V, &call).await.json();
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    assert!(text_of(&refused["result"]).contains("changed after you were shown them"), "{refused}");
    assert!(three.backend.calls().is_empty());
    assert_eq!(post_session(three.addr, &session, V, &list).await.json()["result"]["tools"][1]["name"], "a__u");
    let answer = post_session(three.addr, &session, V, &call).await.json();
    assert_ne!(answer["result"]["isError"], true, "{answer}");
    assert_eq!(three.backend.calls().len(), 1);
}
