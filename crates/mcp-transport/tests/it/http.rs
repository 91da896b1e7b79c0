//! The HTTP transports against the in-process HTTP fixture server (real sockets on 127.0.0.1).

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use mcp_client::{Client, ClientError, ClientOptions, ListLimits, RequestOptions};
use mcp_client::{ConnectOptions, ServerSpec, connect};
use mcp_fixtures::http::{HttpOptions, RunningServer, start};
use mcp_fixtures::{EVENT_DEADLINE, wait_until};
use mcp_protocol::ServerNotification;
use mcp_safety::Backoff;
use mcp_transport::{HttpConfig, HttpMode, HttpTransport, MIN_STREAM_RETRY, RemoteOptions, RemoteServer};
use serde_json::json;

use crate::args;

async fn server(options: HttpOptions) -> RunningServer {
    start(options, 0).await.unwrap()
}

fn quick_backoff() -> Backoff {
    Backoff { initial_delay: Duration::from_millis(10), max_delay: Duration::from_millis(50), max_attempts: 3 }
}

async fn client_for(config: HttpConfig) -> Client {
    let transport = HttpTransport::new(config).unwrap();
    let options = ClientOptions { startup_timeout: Duration::from_secs(10), ..ClientOptions::default() };
    Client::connect(transport, options).await.unwrap()
}

/// The endpoint at `url`, reconnecting quickly.
fn quick(url: String) -> HttpConfig {
    let mut config = HttpConfig::new(url);
    config.reconnect = quick_backoff();
    config
}

async fn connect_to(url: String) -> Client {
    client_for(quick(url)).await
}

async fn echo(client: &Client, text: &str) -> Result<String, ClientError> {
    client.call_tool("echo", args(json!({"text": text})), RequestOptions::default()).await.map(|r| r.joined_text())
}

/// Handshake, list, call; the session and revision headers on every later request; DELETE.
async fn round_trip(options: HttpOptions) -> RunningServer {
    let stateless = options.stateless;
    let s = server(options).await;
    let client = connect_to(s.url()).await;
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    let tools = client.list_all_tools(ListLimits::default()).await.unwrap();
    assert_eq!(tools.len(), 2);
    assert_eq!(echo(&client, "héllo").await.unwrap(), "héllo");
    client.close().await.unwrap();
    let seen = s.seen();
    let posts: Vec<_> = seen.iter().filter(|r| r.http_method == "POST").collect();
    assert_eq!(posts[0].method.as_deref(), Some("initialize"));
    assert!(posts[0].session.is_none() && posts[0].protocol_version.is_none());
    for later in &posts[1..] {
        assert_eq!(later.protocol_version.as_deref(), Some("2025-11-25"), "{later:?}");
        assert_eq!(later.session.is_some(), !stateless, "{later:?}");
        assert_eq!(later.mcp_method, later.method, "{later:?}");
        assert_eq!(later.status / 100, 2, "{later:?}");
    }
    let call = posts.iter().find(|r| r.method.as_deref() == Some("tools/call")).unwrap();
    assert_eq!(call.mcp_name.as_deref(), Some("echo"));
    if !stateless {
        assert!(seen.iter().any(|r| r.http_method == "DELETE" && r.status == 200), "{seen:?}");
        assert_eq!(s.sessions(), 0);
    }
    s
}

#[tokio::test]
async fn sse_answers() {
    round_trip(HttpOptions::default()).await;
}

#[tokio::test]
async fn json_answers() {
    round_trip(HttpOptions { json: true, ..HttpOptions::default() }).await;
}

#[tokio::test]
async fn stateless_server() {
    round_trip(HttpOptions { stateless: true, json: true, ..HttpOptions::default() }).await;
}

#[tokio::test]
async fn notification_on_the_get_stream() {
    let s = server(HttpOptions::default()).await;
    let transport = HttpTransport::new(HttpConfig::new(s.url())).unwrap();
    let client = Client::start(transport, ClientOptions::default());
    let mut notes = client.subscribe();
    client.initialize().await.unwrap();
    let note = tokio::time::timeout(EVENT_DEADLINE, notes.recv()).await.unwrap().unwrap();
    assert!(matches!(note, ServerNotification::ToolsListChanged), "{note:?}");
    assert!(s.seen().iter().any(|r| r.http_method == "GET" && r.status == 200));
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_refused_get_stream_is_fine() {
    let s = server(HttpOptions { no_get: true, ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let refused = || s.seen().iter().any(|r| r.http_method == "GET" && r.status == 405);
    assert!(wait_until(EVENT_DEADLINE, refused).await, "the client asked for the GET stream");
    assert_eq!(echo(&client, "still here").await.unwrap(), "still here");
    client.close().await.unwrap();
    // A retry would come within the quick backoff (10 ms); the session lived longer than that.
    let gets = s.seen().iter().filter(|r| r.http_method == "GET").count();
    assert_eq!(gets, 1, "a 405 must not be retried");
}

#[tokio::test]
async fn an_expired_session_is_initialized_again_and_the_request_retried_once() {
    let s = server(HttpOptions { json: true, expire_after: Some(3), ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    // initialized, then two calls fit in the session; the third call finds it expired.
    for i in 0..4 {
        assert_eq!(echo(&client, &format!("call {i}")).await.unwrap(), format!("call {i}"));
    }
    let seen = s.seen();
    let inits = seen.iter().filter(|r| r.method.as_deref() == Some("initialize")).count();
    assert_eq!(inits, 2, "{seen:#?}");
    let expired = seen.iter().filter(|r| r.status == 404).count();
    assert_eq!(expired, 1);
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_session_that_expires_at_once_is_retried_only_once() {
    // Every session dies after initialize + initialized: the retry meets a 404 again.
    let s = server(HttpOptions { json: true, expire_after: Some(1), ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let err = echo(&client, "x").await.unwrap_err();
    assert!(err.to_string().contains("404"), "{err}");
    let inits = s.seen().iter().filter(|r| r.method.as_deref() == Some("initialize")).count();
    assert_eq!(inits, 2, "one re-initialization, not a loop");
    client.close().await.unwrap();
}

/// The client, not the transport, opens the new session: one handshake of its own, and what the
/// new session's server says (here its instructions) is what the client knows afterwards.
#[tokio::test]
async fn an_expired_session_is_opened_again_by_one_handshake_of_the_client() {
    let s =
        server(HttpOptions { json: true, expire_after: Some(2), name_sessions: true, ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let instructions = |client: &Client| client.server_info().and_then(|i| i.instructions);
    assert_eq!(instructions(&client).as_deref(), Some("session-0"));
    // initialized and the first call fit in the first session; the second call meets its end.
    for i in 0..3 {
        assert_eq!(echo(&client, &format!("call {i}")).await.unwrap(), format!("call {i}"));
    }
    let seen = s.seen();
    let posts: Vec<(&str, Option<&str>, u16)> = seen
        .iter()
        .filter(|r| r.http_method == "POST")
        .map(|r| (r.method.as_deref().unwrap_or("?"), r.session.as_deref(), r.status))
        .collect();
    assert_eq!(
        posts,
        [
            ("initialize", None, 200),
            ("notifications/initialized", Some("session-0"), 202),
            ("tools/call", Some("session-0"), 200),
            ("tools/call", Some("session-0"), 404),
            ("initialize", None, 200),
            ("notifications/initialized", Some("session-1"), 202),
            ("tools/call", Some("session-1"), 200),
            ("tools/call", Some("session-1"), 404),
            ("initialize", None, 200),
            ("notifications/initialized", Some("session-2"), 202),
            ("tools/call", Some("session-2"), 200),
        ],
        "{seen:#?}"
    );
    assert_eq!(instructions(&client).as_deref(), Some("session-2"));
    assert_eq!(client.protocol_version().unwrap().as_str(), "2025-11-25");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_dropped_answer_stream_resumes_with_last_event_id_after_retry() {
    let s = server(HttpOptions { drop_answer: true, retry_ms: 300, ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let started = Instant::now();
    assert_eq!(echo(&client, "resumed").await.unwrap(), "resumed");
    assert!(started.elapsed() >= Duration::from_millis(300), "retry: was not honoured: {:?}", started.elapsed());
    let seen = s.seen();
    let resume = seen.iter().find(|r| r.http_method == "GET" && r.last_event_id.is_some()).unwrap();
    assert!(resume.last_event_id.as_deref().unwrap().starts_with("session-"), "{resume:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn legacy_sse_when_configured() {
    let s = server(HttpOptions { legacy: true, ..HttpOptions::default() }).await;
    let client = client_for({
        let mut config = quick(s.url());
        config.mode = HttpMode::LegacySse;
        config
    })
    .await;
    assert_eq!(client.protocol_version().unwrap().as_str(), "2024-11-05");
    assert_eq!(echo(&client, "old").await.unwrap(), "old");
    assert!(s.seen().iter().all(|r| r.status != 405), "no Streamable HTTP attempt when configured");
    client.close().await.unwrap();
}

#[tokio::test]
async fn falls_back_to_legacy_sse_on_a_4xx() {
    let s = server(HttpOptions { legacy: true, ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    assert_eq!(client.protocol_version().unwrap().as_str(), "2024-11-05");
    assert_eq!(client.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    assert_eq!(echo(&client, "fallback").await.unwrap(), "fallback");
    let seen = s.seen();
    assert_eq!(seen[0].http_method, "POST");
    assert_eq!(seen[0].status, 405);
    assert_eq!(seen[1].http_method, "GET");
    client.close().await.unwrap();
}

#[tokio::test]
async fn headers_and_a_bearer_token_from_the_environment() {
    // Tests may not set variables (unsafe code is forbidden), so an existing one is the token.
    let token = std::env::var("HOME").unwrap();
    let s = server(HttpOptions { token: Some(token.clone()), json: true, ..HttpOptions::default() }).await;
    let mut config = HttpConfig::new(s.url());
    config.bearer_token_env = Some("HOME".into());
    config.headers = BTreeMap::from([("X-Extra".to_owned(), "1".to_owned())]);
    let client = client_for(config).await;
    assert_eq!(echo(&client, "authorized").await.unwrap(), "authorized");
    client.close().await.unwrap();
    let bearer = format!("Bearer {token}");
    let seen = s.seen();
    assert!(seen.len() >= 4, "initialize, initialized, the call, DELETE: {seen:#?}");
    for request in &seen {
        assert_eq!(request.authorization.as_deref(), Some(bearer.as_str()), "{request:?}");
        let extra: Vec<&str> =
            request.headers.iter().filter(|(name, _)| name == "x-extra").map(|(_, v)| v.as_str()).collect();
        assert_eq!(extra, ["1"], "the configured header, once, on every request: {request:?}");
    }

    let mut config = HttpConfig::new(s.url());
    config.bearer_token_env = Some("MCP_HARNESS_TEST_TOKEN_UNSET".into());
    let err = HttpTransport::new(config).unwrap_err();
    assert!(err.to_string().contains("MCP_HARNESS_TEST_TOKEN_UNSET"), "{err}");
    let mut shown = HttpConfig::new("http://x");
    shown.headers.insert("Authorization".into(), "Bearer s3cret".into());
    assert!(!format!("{shown:?}").contains("s3cret"));
}

/// A remote server at `url` with headers, retried quickly, configured by `setup`.
fn remote_with(
    name: &str,
    url: String,
    headers: BTreeMap<String, String>,
    setup: impl FnOnce(&mut RemoteServer),
) -> ServerSpec {
    let mut server = RemoteServer::new(url);
    server.headers = headers;
    server.reconnect = quick_backoff();
    setup(&mut server);
    let mut spec = ServerSpec::new(name, std::sync::Arc::new(server));
    spec.startup_timeout = Duration::from_secs(5);
    spec
}

fn remote(name: &str, url: String, headers: BTreeMap<String, String>) -> ServerSpec {
    remote_with(name, url, headers, |_| {})
}

#[tokio::test]
async fn servers_report_connected_needs_auth_and_failed() {
    let open = server(HttpOptions::default()).await;
    let locked = server(HttpOptions { token: Some("t".into()), ..HttpOptions::default() }).await;
    let options = ConnectOptions::default();

    let c = connect(remote("open", open.url(), BTreeMap::new()), &options).await;
    assert_eq!(c.state().label(), "connected", "{}", c.state());
    assert_eq!(c.tools().len(), 2);
    assert_eq!(c.call_tool("echo", args(json!({"text": "hi"}))).await.unwrap().joined_text(), "hi");
    c.close().await;

    let c = connect(remote("locked", locked.url(), BTreeMap::new()), &options).await;
    assert_eq!(c.state().label(), "needs-auth", "{}", c.state());
    assert!(c.state().to_string().contains("401"), "{}", c.state());
    let with_token = BTreeMap::from([("Authorization".to_owned(), "Bearer t".to_owned())]);
    let c = connect(remote("locked", locked.url(), with_token), &options).await;
    assert_eq!(c.state().label(), "connected", "{}", c.state());
    c.close().await;

    // Nothing listens there: the connect attempts back off, then the server is failed.
    let addr = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let c = connect(remote("gone", format!("http://{addr}/mcp"), BTreeMap::new()), &options).await;
    assert_eq!(c.state().label(), "failed");
    let reason = c.state().to_string();
    assert!(reason.contains("after 3 attempts"), "{reason}");
    // The attempts ran out, not the 5 s startup timeout.
    assert!(!reason.contains("timed out"), "{reason}");
}

#[tokio::test]
async fn a_server_that_goes_away_fails_pending_and_later_requests() {
    let s = server(HttpOptions { json: true, ..HttpOptions::default() }).await;
    let client = std::sync::Arc::new(connect_to(s.url()).await);
    // `hang` is never answered: the request stays pending until the server goes away.
    let pending = {
        let client = std::sync::Arc::clone(&client);
        tokio::spawn(async move { client.call_tool("hang", None, RequestOptions::default()).await })
    };
    let hanging = || s.seen().iter().any(|r| r.mcp_name.as_deref() == Some("hang"));
    assert!(wait_until(EVENT_DEADLINE, hanging).await, "the server got the request");
    assert_eq!(client.pending_requests(), 1);
    s.go_away();
    // Failed by the server's going away, not by the request timeout (a minute away).
    let err = tokio::time::timeout(EVENT_DEADLINE, pending).await.expect("failed at once").unwrap().unwrap_err();
    assert!(matches!(err, ClientError::Transport(_)), "{err:?}");
    assert!(err.to_string().contains("tools/call") && err.to_string().contains("reading the answer failed"), "{err}");
    let err =
        tokio::time::timeout(EVENT_DEADLINE, echo(&client, "anyone?")).await.expect("failed at once").unwrap_err();
    // Whichever noticed first (this request or the GET stream), the reason is the refused
    // connection after the configured attempts.
    let text = err.to_string();
    assert!(text.contains("Connection refused") && text.contains("3 attempts"), "{text}");
    assert_eq!(client.pending_requests(), 0);
}

#[tokio::test]
async fn an_ended_get_stream_reconnects_with_last_event_id_no_sooner_than_the_minimum_retry() {
    let s = server(HttpOptions { get_ends: true, retry_ms: 200, ..HttpOptions::default() }).await;
    let transport = HttpTransport::new(HttpConfig::new(s.url())).unwrap();
    let client = Client::start(transport, ClientOptions::default());
    let mut notes = client.subscribe();
    client.initialize().await.unwrap();
    let note = tokio::time::timeout(EVENT_DEADLINE, notes.recv()).await.unwrap().unwrap();
    assert!(matches!(note, ServerNotification::ToolsListChanged), "{note:?}");
    let gets = || s.seen().into_iter().filter(|r| r.http_method == "GET").collect::<Vec<_>>();
    assert!(wait_until(EVENT_DEADLINE, || gets().len() >= 2).await, "the ended stream was not reopened");
    let gets = gets();
    assert!(gets[0].last_event_id.is_none());
    let id = gets[1].last_event_id.as_deref().unwrap_or_default();
    assert!(id.starts_with("get-"), "the reconnect names the last event: {:?}", gets[1]);
    let waited = gets[1].at - gets[0].at;
    assert!(waited >= MIN_STREAM_RETRY, "retry: 200 is raised to the minimum: {waited:?}");
    client.close().await.unwrap();
}

#[tokio::test]
async fn a_json_answer_that_does_not_answer_the_request_fails_it_at_once() {
    let s = server(HttpOptions { json: true, wrong_id: true, ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let err = echo(&client, "x").await.unwrap_err();
    // Not a timeout: the answer itself was refused.
    assert!(matches!(err, ClientError::Transport(_)), "{err:?}");
    assert!(err.to_string().contains("did not answer this request"), "{err}");
    assert_eq!(echo(&client, "x").await.unwrap_err().to_string(), err.to_string(), "the connection stays usable");
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

/// A JSON answer may be a batch, of at most 1,024 messages: more fails the request (8 million
/// tiny items within the byte limit cost 450 MB), not the connection.
#[tokio::test]
async fn a_batch_answer_holds_at_most_1024_messages() {
    let s = server(HttpOptions { json: true, batch: Some(10), ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    assert_eq!(echo(&client, "x").await.unwrap(), "x", "a batch that ends with the answer");
    client.close().await.unwrap();
    let s = server(HttpOptions { json: true, batch: Some(2000), ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let err = echo(&client, "x").await.unwrap_err();
    assert!(err.to_string().contains("more than 1024 messages in one batch"), "{err}");
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test]
async fn an_sse_event_over_the_limit_fails_the_request_not_the_connection() {
    let s = server(HttpOptions { huge_event: Some(64 * 1024), ..HttpOptions::default() }).await;
    let mut config = HttpConfig::new(s.url());
    config.max_message_bytes = 16 * 1024;
    let client = client_for(config).await;
    let err = echo(&client, "x").await.unwrap_err();
    assert!(err.to_string().contains("more than 16384 bytes"), "{err}");
    client.ping().await.unwrap();
    client.close().await.unwrap();
}

#[tokio::test]
async fn servers_take_a_bearer_token_variable_and_the_legacy_mode_from_remote_options() {
    let token = std::env::var("HOME").unwrap();
    let locked = server(HttpOptions { token: Some(token.clone()), ..HttpOptions::default() }).await;
    let legacy = server(HttpOptions { legacy: true, ..HttpOptions::default() }).await;
    let options = ConnectOptions::default();
    let with =
        |var: &'static str| move |s: &mut RemoteServer| s.options = RemoteOptions::default().bearer_token_env(var);

    let c = connect(remote_with("locked", locked.url(), BTreeMap::new(), with("HOME")), &options).await;
    assert_eq!(c.state().label(), "connected", "{}", c.state());
    let bearer = format!("Bearer {token}");
    assert!(locked.seen().iter().all(|r| r.authorization.as_deref() == Some(bearer.as_str())));
    c.close().await;

    let legacy_mode = |s: &mut RemoteServer| s.options = RemoteOptions::default().http_mode(HttpMode::LegacySse);
    let c = connect(remote_with("old", legacy.url(), BTreeMap::new(), legacy_mode), &options).await;
    assert_eq!(c.state().label(), "connected", "{}", c.state());
    assert_eq!(legacy.seen()[0].http_method, "GET", "straight to the SSE stream, no POST probe");
    c.close().await;

    let unset = with("MCP_HARNESS_UNSET_VARIABLE");
    let c = connect(remote_with("locked", locked.url(), BTreeMap::new(), unset), &options).await;
    assert_eq!(c.state().label(), "failed");
    assert!(c.state().to_string().contains("MCP_HARNESS_UNSET_VARIABLE"), "{}", c.state());
}

/// A fake authorizer: no token until challenged, then `token` (or `refuse` with a reason).
#[derive(Debug, Default)]
struct FakeAuthorizer {
    token: String,
    refuse: Option<(String, bool)>,
    current: std::sync::Mutex<Option<String>>,
    challenges: std::sync::Mutex<Vec<mcp_client::AuthChallenge>>,
}

#[async_trait::async_trait]
impl mcp_client::Authorizer for FakeAuthorizer {
    async fn authorization(&self) -> Option<mcp_safety::Secret> {
        self.current.lock().unwrap().clone().map(mcp_safety::Secret::from)
    }

    async fn challenged(&self, challenge: &mcp_client::AuthChallenge) -> Result<(), mcp_client::AuthError> {
        self.challenges.lock().unwrap().push(challenge.clone());
        if let Some((reason, needs_login)) = &self.refuse {
            return Err(mcp_client::AuthError { message: reason.clone(), needs_login: *needs_login });
        }
        *self.current.lock().unwrap() = Some(format!("Bearer {}", self.token));
        Ok(())
    }
}

/// A 401 goes to the authorizer with the challenge; the request is sent again with the new
/// token and every later request carries it.
#[tokio::test]
async fn a_401_asks_the_authorizer_and_retries_with_its_token() {
    let locked = server(HttpOptions { token: Some("t1".into()), ..HttpOptions::default() }).await;
    let auth = std::sync::Arc::new(FakeAuthorizer { token: "t1".into(), ..FakeAuthorizer::default() });
    let mut config = quick(locked.url());
    config.auth = Some(auth.clone());
    let client = client_for(config).await;
    assert_eq!(echo(&client, "in").await.unwrap(), "in");
    client.close().await.unwrap();
    let challenges = auth.challenges.lock().unwrap().clone();
    assert_eq!(challenges.len(), 1, "{challenges:?}");
    assert_eq!(challenges[0].status, 401);
    assert_eq!(challenges[0].refused, None);
    let seen = locked.seen();
    let posts: Vec<_> = seen.iter().filter(|r| r.http_method == "POST").collect();
    assert_eq!((posts[0].status, posts[0].authorization.as_deref()), (401, None));
    assert!(posts[1..].iter().all(|p| p.authorization.as_deref() == Some("Bearer t1")), "{posts:?}");
}

/// An authorizer that cannot get a token: a login is needed (needs-auth, with its message),
/// or something else failed (failed); either way the request is not retried forever.
#[tokio::test]
async fn an_authorizer_that_cannot_get_a_token_makes_the_server_need_auth_or_fail() {
    let locked = server(HttpOptions { token: Some("t1".into()), ..HttpOptions::default() }).await;
    for (needs_login, label) in [(true, "needs-auth"), (false, "failed")] {
        let auth = std::sync::Arc::new(FakeAuthorizer {
            refuse: Some(("run `mcp-harness login locked`".into(), needs_login)),
            ..FakeAuthorizer::default()
        });
        let authorizer: std::sync::Arc<dyn mcp_client::Authorizer> = auth.clone();
        let spec = remote_with("locked", locked.url(), BTreeMap::new(), |s| s.authorizer = Some(authorizer));
        let c = connect(spec, &ConnectOptions::default()).await;
        assert_eq!(c.state().label(), label, "{}", c.state());
        assert!(c.state().to_string().contains("mcp-harness login locked"), "{}", c.state());
        assert_eq!(auth.challenges.lock().unwrap().len(), 1);
        c.close().await;
    }
    // A broken authorizer that "succeeds" with a token the server refuses is bounded.
    let auth = std::sync::Arc::new(FakeAuthorizer { token: "wrong".into(), ..FakeAuthorizer::default() });
    let authorizer: std::sync::Arc<dyn mcp_client::Authorizer> = auth.clone();
    let spec = remote_with("locked", locked.url(), BTreeMap::new(), |s| s.authorizer = Some(authorizer));
    let c = connect(spec, &ConnectOptions::default()).await;
    assert_eq!(c.state().label(), "failed", "{}", c.state());
    assert!(c.state().to_string().contains("giving up"), "{}", c.state());
    assert_eq!(auth.challenges.lock().unwrap().len(), 4);
}

/// The authorizer's header replaces a configured `Authorization` header (never two), and a
/// challenge's `Debug` does not show the refused credentials.
#[tokio::test]
async fn the_authorizer_header_replaces_a_configured_one_and_debug_hides_it() {
    let locked = server(HttpOptions { token: Some("t1".into()), ..HttpOptions::default() }).await;
    let auth = std::sync::Arc::new(FakeAuthorizer { token: "t1".into(), ..FakeAuthorizer::default() });
    let mut config = quick(locked.url());
    config.headers.insert("Authorization".into(), "Bearer stale-configured".into());
    config.auth = Some(auth.clone());
    let client = client_for(config).await;
    assert_eq!(echo(&client, "once").await.unwrap(), "once");
    client.close().await.unwrap();
    let challenges = auth.challenges.lock().unwrap().clone();
    assert_eq!(challenges.len(), 1);
    // `refused` is what the authorizer supplied (nothing yet), not the configured header.
    assert_eq!(challenges[0].refused, None);
    let challenge = mcp_client::AuthChallenge { refused: Some("Bearer s3cret".into()), ..challenges[0].clone() };
    let shown = format!("{challenge:?}");
    assert!(!shown.contains("s3cret") && shown.contains("<redacted>"), "{shown}");
    let seen = locked.seen();
    assert!(seen.iter().skip(1).all(|r| r.authorization.as_deref() == Some("Bearer t1")), "{seen:?}");
    // The DELETE that ends the session carries the token too.
    assert!(seen.iter().any(|r| r.http_method == "DELETE" && r.status / 100 == 2), "{seen:?}");
}

/// The optional GET stream failing again and again while calls are answered (a proxy that cuts
/// long GETs) stops the listening, not the session: calls go on.
#[tokio::test]
async fn a_get_stream_that_keeps_failing_while_calls_work_is_given_up_not_the_session() {
    let s = server(HttpOptions { reset_get: true, ..HttpOptions::default() }).await;
    let client = connect_to(s.url()).await;
    let gets = || s.seen().iter().filter(|r| r.http_method == "GET").count();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    // Calls answered while the GETs fail, until the stream has been given up (3 attempts).
    while gets() < 3 {
        assert!(std::time::Instant::now() < deadline, "the GET was tried {} times", gets());
        assert_eq!(echo(&client, "x").await.unwrap(), "x");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(echo(&client, "still here").await.unwrap(), "still here", "the session outlived its GET stream");
    client.close().await.unwrap();
}
