//! The WebSocket transport against the in-process WebSocket fixture server.

use std::time::Duration;

use mcp_client::{Client, ClientOptions, ListLimits, RequestOptions};
use mcp_client::{ConnectOptions, ServerSpec, connect};
use mcp_fixtures::ws::{WsOptions, start_ws};
use mcp_fixtures::{EVENT_DEADLINE, wait_until};
use mcp_protocol::ServerNotification;
use mcp_safety::Backoff;
use mcp_transport::{WebSocketConfig, WebSocketTransport};
use serde_json::json;

use crate::args;

#[tokio::test]
async fn handshake_list_call_and_a_notification() {
    let s = start_ws(WsOptions::default()).await.unwrap();
    let transport = WebSocketTransport::connect(WebSocketConfig::new(s.url())).await.unwrap();
    let client = Client::start(transport, ClientOptions::default());
    let mut notes = client.subscribe();
    client.initialize().await.unwrap();
    let note = tokio::time::timeout(EVENT_DEADLINE, notes.recv()).await.unwrap().unwrap();
    assert!(matches!(note, ServerNotification::ToolsListChanged), "{note:?}");
    assert_eq!(client.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    let r = client.call_tool("echo", args(json!({"text": "über ws"})), RequestOptions::default()).await.unwrap();
    assert_eq!(r.joined_text(), "über ws");
    assert_eq!(s.requested_protocols(), [Some("mcp".to_owned())]);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_server_that_does_not_choose_mcp_is_refused() {
    let s = start_ws(WsOptions { refuse_subprotocol: true, ..WsOptions::default() }).await.unwrap();
    let err = WebSocketTransport::connect(WebSocketConfig::new(s.url())).await.unwrap_err();
    assert!(err.to_string().contains("subprotocol"), "{err}");
}

#[tokio::test]
async fn a_message_over_the_limit_closes_the_connection_with_the_reason() {
    let s = start_ws(WsOptions { huge: Some(64 * 1024), ..WsOptions::default() }).await.unwrap();
    let mut config = WebSocketConfig::new(s.url());
    config.max_message_bytes = 16 * 1024;
    let transport = WebSocketTransport::connect(config).await.unwrap();
    let err = Client::connect(transport, ClientOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("max_message_bytes"), "{err}");
}

#[tokio::test]
async fn a_dropped_socket_fails_what_was_in_flight_at_once_then_reconnects_and_initializes_again() {
    // initialize, initialized, then the first call makes the server close (on every connection).
    let s = start_ws(WsOptions { close_after: Some(2), ..WsOptions::default() }).await.unwrap();
    let mut config = WebSocketConfig::new(s.url());
    config.reconnect =
        Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(20), max_attempts: 2 };
    let transport = WebSocketTransport::connect(config).await.unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    // Failed by the closing socket, not by the request timeout (a minute away).
    let err = client.call_tool("echo", args(json!({"text": "x"})), RequestOptions::default()).await.unwrap_err();
    let text = err.to_string();
    assert!(text.contains("closed the WebSocket") && text.contains("may or may not have run"), "{text}");
    // The transport reopened the socket and replayed the handshake: the session goes on.
    let reconnected = || s.requested_protocols().len() == 2;
    assert!(wait_until(EVENT_DEADLINE, reconnected).await, "one reconnection: {:?}", s.requested_protocols());
    assert!(client.is_open());
    let err = client.ping().await.unwrap_err(); // the third message on the new socket: closed again
    assert!(err.to_string().contains("closed the WebSocket"), "{err}");
    client.close().await.unwrap();
}

fn reconnecting(url: String) -> WebSocketConfig {
    let mut config = WebSocketConfig::new(url);
    config.reconnect =
        Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(20), max_attempts: 2 };
    config
}

fn instructions(client: &Client) -> Option<String> {
    client.server_info().and_then(|i| i.instructions)
}

/// The transport only reopens the socket; the client makes its handshake again, once, and then
/// knows what the new connection's server says.
#[tokio::test]
async fn a_dropped_socket_leads_to_one_new_handshake_by_the_client() {
    // initialize, initialized and a call fit on each connection; the next message closes it.
    let s = start_ws(WsOptions { close_after: Some(3), name_connections: true, ..WsOptions::default() }).await.unwrap();
    let transport = WebSocketTransport::connect(reconnecting(s.url())).await.unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    assert_eq!(instructions(&client).as_deref(), Some("connection-0"));
    let call = |text: &'static str| client.call_tool("echo", args(json!({"text": text})), RequestOptions::default());
    assert_eq!(call("first").await.unwrap().joined_text(), "first");
    call("second").await.unwrap_err(); // the fourth message: the socket closes under it
    let reopened = || instructions(&client).as_deref() == Some("connection-1");
    assert!(wait_until(EVENT_DEADLINE, reopened).await, "{:?}: {:?}", instructions(&client), s.methods());
    assert_eq!(call("third").await.unwrap().joined_text(), "third");
    assert_eq!(
        s.methods(),
        [
            "initialize",
            "notifications/initialized",
            "tools/call",
            "tools/call",
            "initialize",
            "notifications/initialized",
            "tools/call"
        ]
    );
    client.close().await.unwrap();
}

/// A request made right after the drop waits for the new session instead of failing or
/// reaching the new connection before the handshake.
#[tokio::test]
async fn a_request_made_while_the_session_is_opened_again_waits_for_it() {
    let s = start_ws(WsOptions { close_after: Some(3), name_connections: true, ..WsOptions::default() }).await.unwrap();
    let transport = WebSocketTransport::connect(reconnecting(s.url())).await.unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    client.ping().await.unwrap();
    client.ping().await.unwrap_err(); // the fourth message: the socket closes under it
    // Whether this ping is made before the client hears of the new socket or after, it goes out
    // after the new handshake: the first message after it, and answered.
    client.ping().await.unwrap();
    assert_eq!(instructions(&client).as_deref(), Some("connection-1"));
    assert_eq!(s.methods()[4..], ["initialize", "notifications/initialized", "ping"]);
    client.close().await.unwrap();
}

/// A server that drops every socket soon after it is opened again is given up on after the
/// reconnect policy's attempts (it was reopened forever, a handshake every few hundred ms).
#[tokio::test]
async fn a_socket_that_keeps_dropping_soon_after_reopening_is_given_up_on() {
    // initialize and initialized fit on each connection; the next message closes it.
    let s = start_ws(WsOptions { close_after: Some(2), ..WsOptions::default() }).await.unwrap();
    let transport = WebSocketTransport::connect(reconnecting(s.url())).await.unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    for _ in 0..10 {
        if client.ping().await.is_ok() || !client.is_open() {
            break;
        }
    }
    assert!(wait_until(EVENT_DEADLINE, || !client.is_open()).await, "still open: {:?}", s.requested_protocols());
    // The first socket, then one reopening per allowed attempt (two).
    assert_eq!(s.requested_protocols().len(), 3, "{:?}", s.methods());
}

#[tokio::test]
async fn without_reconnects_a_dropped_socket_ends_the_connection() {
    let s = start_ws(WsOptions { close_after: Some(2), ..WsOptions::default() }).await.unwrap();
    let mut config = WebSocketConfig::new(s.url());
    config.reconnect.max_attempts = 0;
    let transport = WebSocketTransport::connect(config).await.unwrap();
    let client = Client::connect(transport, ClientOptions::default()).await.unwrap();
    let err = client.call_tool("echo", args(json!({"text": "x"})), RequestOptions::default()).await.unwrap_err();
    assert!(err.to_string().contains("closed the WebSocket"), "{err}");
    assert!(wait_until(EVENT_DEADLINE, || !client.is_open()).await, "the connection ended");
}

/// A remote server whose connections drop soon after they are made is given up on after the
/// set's reconnect attempts: a connection that did not last does not start the count afresh
/// (it was reconnected and relisted forever).
#[tokio::test]
async fn a_remote_server_that_drops_each_connection_soon_is_given_up_on() {
    use mcp_client::{ServerSet, ServerState, SetOptions};
    // What connecting sends fits on each connection; the next message closes it.
    let s = start_ws(WsOptions { close_after: Some(CONNECT_MESSAGES), ..WsOptions::default() }).await.unwrap();
    let mut server = mcp_transport::RemoteServer::new(s.url());
    server.reconnect.max_attempts = 0; // the set reconnects, not the transport
    let spec = ServerSpec::new("ws", std::sync::Arc::new(server));
    let quick =
        Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(20), max_attempts: 3 };
    let set = ServerSet::start(vec![spec], SetOptions { reconnect: quick, ..SetOptions::default() });
    let mut failed = None;
    let mut connected = 0;
    for _ in 0..10 {
        let settled = || matches!(set.state("ws"), Some(ServerState::Connected { .. } | ServerState::Failed { .. }));
        assert!(wait_until(EVENT_DEADLINE, settled).await, "{:?}", set.state("ws"));
        if let Some(state @ ServerState::Failed { .. }) = set.state("ws") {
            failed = Some(state);
            break;
        }
        connected += 1;
        // The next message on the connection: it closes under the call.
        let _ = set.call("ws", "echo", args(json!({"text": "x"})), None, None).await;
        let moved = || !matches!(set.state("ws"), Some(ServerState::Connected { .. }));
        assert!(wait_until(EVENT_DEADLINE, moved).await, "{:?}", set.state("ws"));
    }
    let failed = failed.unwrap_or_else(|| panic!("still reconnecting after 10 drops: {:?}", s.methods()));
    assert!(failed.to_string().contains("3 connections in a row were lost within 60s"), "{failed}");
    assert_eq!(connected, 3, "connected once, then once per allowed attempt: {:?}", s.methods());
    set.close().await;
}

/// Messages a set sends to connect to the WebSocket fixture: the server/discover probe,
/// initialize, initialized and tools/list.
const CONNECT_MESSAGES: usize = 4;

#[tokio::test]
async fn servers_connect_ws_urls_and_give_up_on_unreachable_ones() {
    let s = start_ws(WsOptions::default()).await.unwrap();
    let quick =
        Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(20), max_attempts: 2 };
    let options = ConnectOptions::default();
    let at = |url: String| {
        let mut server = mcp_transport::RemoteServer::new(url);
        server.reconnect = quick;
        ServerSpec::new("ws", std::sync::Arc::new(server))
    };
    let c = connect(at(s.url()), &options).await;
    assert_eq!(c.state().label(), "connected", "{}", c.state());
    assert_eq!(c.tools().len(), 2);
    c.close().await;

    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let c = connect(at(format!("ws://127.0.0.1:{port}/mcp")), &options).await;
    assert_eq!(c.state().label(), "failed");
    assert!(c.state().to_string().contains("after 2 attempts"), "{}", c.state());
}

/// A URL's user info and query (where credentials ride, often from `${VAR}`) never reach a
/// message, which the terminal, the model and the transcript may all see.
#[tokio::test]
async fn messages_name_a_server_without_the_credentials_in_its_url() {
    let quick =
        Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(20), max_attempts: 1 };
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    for url in [
        format!("ws://me:pw-s3cret@127.0.0.1:{port}/ws?token=s3cret"),
        format!("http://me:pw-s3cret@127.0.0.1:{port}/mcp?api_key=s3cret"),
    ] {
        let mut server = mcp_transport::RemoteServer::new(url.clone());
        server.reconnect = quick;
        let c = connect(ServerSpec::new("remote", std::sync::Arc::new(server)), &ConnectOptions::default()).await;
        let state = c.state().to_string();
        assert_eq!(c.state().label(), "failed", "{state}");
        assert!(!state.contains("s3cret"), "{state}");
        assert!(state.contains(&format!("<hidden>@127.0.0.1:{port}/")) && state.contains("?<hidden>"), "{state}");
        c.close().await;
    }
}
