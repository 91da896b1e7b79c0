//! `OAuthAuthorizer` through the HTTP transport against the OAuth fixture server (an
//! authorization server and a protected MCP endpoint on one loopback port).
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod oauth_fixture;

use std::sync::Arc;
use std::time::Duration;

use mcp_auth::store::{FILE_NAME, TokenStore};
use mcp_auth::{Clock as _, OAuthAuthorizer, OAuthConfig};
use mcp_client::{Client, ClientOptions, ListLimits};
use mcp_client::{ConnectOptions, ServerSpec, connect};
use mcp_fixtures::http::RunningServer;
use mcp_fixtures::oauth::{OAuthEvent, OAuthOptions};
use mcp_transport::{HttpConfig, HttpTransport, RemoteServer};
use oauth_fixture::{TestClock, client, config, count, machine_client, protected, refreshes};
use url::Url;

/// Connecting fails: the error as text.
async fn connect_error(server: &RunningServer, config: OAuthConfig) -> String {
    let mut http = HttpConfig::new(server.url());
    http.auth = Some(Arc::new(OAuthAuthorizer::new(config).unwrap()));
    let options = ClientOptions { startup_timeout: Duration::from_secs(10), ..ClientOptions::default() };
    Client::connect(HttpTransport::new(http).unwrap(), options).await.unwrap_err().to_string()
}

/// A 401 leads to discovery, registration, an authorization with PKCE and `resource`, and a
/// token; the token is stored (0600) and a later non-interactive authorizer uses it as it is.
#[tokio::test]
async fn logs_in_on_401_stores_the_tokens_and_reuses_them() {
    let server = protected(OAuthOptions::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("oauth");
    let authorizer = Arc::new(OAuthAuthorizer::new(config(&server, Some(&store), true)).unwrap());
    let c = client(&server, authorizer.clone()).await;
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    c.close().await.unwrap();

    let log = server.oauth_log();
    let resource = format!("http://{}/mcp", server.addr);
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Registered { .. })), 1, "{log:?}");
    assert!(
        log.iter().any(|e| matches!(e, OAuthEvent::Authorized { resource: Some(r), .. } if *r == resource)),
        "{log:?}"
    );
    assert!(
        log.iter().any(|e| matches!(e, OAuthEvent::Token { grant_type, ok: true, resource: Some(r), .. }
            if grant_type == "authorization_code" && *r == resource)),
        "{log:?}"
    );
    assert_eq!(authorizer.issuer().await.as_deref(), Some(format!("http://{}", server.addr).as_str()));

    // Stored where told and nowhere else under the temporary directory: the given directory
    // holds the token file alone (no temporary file left behind). The library has no default
    // location to fall back on: `store_dir: None` keeps tokens in memory.
    let file = store.join(FILE_NAME);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.contains(&resource), "{text}");
    let names = |d: &std::path::Path| -> Vec<String> {
        std::fs::read_dir(d).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect()
    };
    assert_eq!(names(dir.path()), ["oauth"]);
    assert_eq!(names(&store), [FILE_NAME]);
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(&store).unwrap().permissions().mode() & 0o777, 0o700);
    }

    // A new process (non-interactive): the stored token works without a new authorization.
    let again = Arc::new(OAuthAuthorizer::new(config(&server, Some(&store), false)).unwrap());
    let c = client(&server, again).await;
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    c.close().await.unwrap();
    let log = server.oauth_log();
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Authorized { .. })), 1, "{log:?}");

    // Logging out forgets them: the next non-interactive connection needs a login.
    assert_eq!(OAuthAuthorizer::logout(&store, &Url::parse(&server.url()).unwrap()).unwrap(), 1);
    assert!(TokenStore::load(&store).unwrap().is_empty());
}

/// A token about to expire is refreshed before the request (with the stored client and the
/// rotated refresh token), so the server never sees an expired token. A 120 s token is
/// refreshed 30 s before it expires, to the millisecond: not at 89.999 s, at 90 s.
#[tokio::test]
async fn refreshes_an_expiring_token_before_sending() {
    let server = protected(OAuthOptions { expires_in_s: 120, ..OAuthOptions::new() }).await;
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::new();
    let mut config = config(&server, Some(dir.path()), true);
    config.clock = clock.clone();
    let c = client(&server, Arc::new(OAuthAuthorizer::new(config).unwrap())).await;
    let list = || async { assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2) };
    // The token the last tools/list carried.
    let sent = || {
        let seen = server.seen();
        let last = seen.iter().rev().find(|s| s.method.as_deref() == Some("tools/list")).unwrap();
        last.authorization.clone().unwrap()
    };
    let issued = |i: usize| format!("Bearer {}", server.oauth_secrets().access_tokens[i]);
    let expiry = || {
        TokenStore::load(dir.path())
            .unwrap()
            .find_resource(&format!("http://{}/mcp", server.addr))
            .unwrap()
            .1
            .expires_at_ms
    };
    let first_expiry = clock.unix_ms() + 120_000;
    assert_eq!(expiry(), Some(first_expiry), "stored to the millisecond");

    list().await;
    assert_eq!((refreshes(&server), sent()), (0, issued(0)));
    clock.advance(Duration::from_millis(89_999));
    list().await;
    assert_eq!((refreshes(&server), sent()), (0, issued(0)), "not refreshed before its last 30 s");
    clock.advance(Duration::from_millis(1));
    list().await;
    assert_eq!((refreshes(&server), sent()), (1, issued(1)), "refreshed before sending");
    assert_eq!(expiry(), Some(first_expiry + 90_000));
    list().await;
    assert_eq!((refreshes(&server), sent()), (1, issued(1)), "the new token is not refreshed at once");
    c.close().await.unwrap();
    let log = server.oauth_log();
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Authorized { .. })), 1, "{log:?}");
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Token { ok: false, .. })), 0, "{log:?}");
    // The only refusal is of the first request, which had no token yet.
    let refusals: Vec<_> = log.iter().filter(|e| matches!(e, OAuthEvent::Refused { .. })).collect();
    assert_eq!(refusals, [&OAuthEvent::Refused { path: "/mcp".into(), reason: "no bearer token".into() }]);
}

/// Without a user agent and without tokens, the server needs a login: `needs-auth` with the
/// hint, and no authorization request is made.
#[tokio::test]
async fn without_a_user_agent_the_server_needs_a_login() {
    let server = protected(OAuthOptions::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let authorizer = Arc::new(OAuthAuthorizer::new(config(&server, Some(dir.path()), false)).unwrap());
    let mut remote = RemoteServer::new(server.url());
    remote.authorizer = Some(authorizer);
    let mut spec = ServerSpec::new("fixture", Arc::new(remote));
    spec.startup_timeout = Duration::from_secs(5);
    let c = connect(spec, &ConnectOptions::default()).await;
    assert_eq!(c.state().label(), "needs-auth", "{}", c.state());
    assert!(c.state().to_string().contains("mcp-harness login fixture"), "{}", c.state());
    c.close().await;
    assert_eq!(count(&server.oauth_log(), |e| matches!(e, OAuthEvent::Authorized { .. })), 0);
}

/// Machine clients: client credentials with the configured id and secret (basic auth).
#[tokio::test]
async fn client_credentials_from_the_configuration() {
    let (server, config) = machine_client().await;
    let c = client(&server, Arc::new(OAuthAuthorizer::new(config).unwrap())).await;
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    c.close().await.unwrap();
    let log = server.oauth_log();
    assert!(
        log.iter().any(|e| matches!(e, OAuthEvent::Token { grant_type, ok: true, client_id: Some(id), .. }
            if grant_type == "client_credentials" && id == "machine")),
        "{log:?}"
    );
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Registered { .. })), 0, "{log:?}");
}

/// The user refuses in the browser: a clear error, not a retry loop.
#[tokio::test]
async fn a_refused_authorization_is_a_clear_error() {
    let server = protected(OAuthOptions { deny: true, ..OAuthOptions::new() }).await;
    let err = connect_error(&server, config(&server, None, true)).await;
    assert!(err.contains("access_denied"), "{err}");
    let log = server.oauth_log();
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Refused { path, .. } if path == "/authorize")), 1, "{log:?}");
}

/// Step-up: a 403 `insufficient_scope` on `tools/call` leads to a second authorization with
/// the union of the scopes held and the scope asked for; the call then succeeds.
#[tokio::test]
async fn steps_up_on_insufficient_scope() {
    let server = protected(OAuthOptions { call_scope: Some("mcp:admin".into()), ..OAuthOptions::new() }).await;
    let authorizer = Arc::new(OAuthAuthorizer::new(config(&server, None, true)).unwrap());
    let c = client(&server, authorizer).await;
    let args = serde_json::json!({"text": "up"}).as_object().cloned();
    let result = c.call_tool("echo", args, mcp_client::RequestOptions::default()).await.unwrap();
    assert_eq!(result.joined_text(), "up");
    c.close().await.unwrap();
    let log = server.oauth_log();
    let scopes: Vec<Option<String>> = log
        .iter()
        .filter_map(|e| match e {
            OAuthEvent::Authorized { scope, .. } => Some(scope.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(scopes, [Some("mcp:read mcp:write".into()), Some("mcp:read mcp:write mcp:admin".into())], "{log:?}");
}

/// A server that keeps refusing a scope the authorization server never grants: one step-up,
/// then a clear error for that call; the connection stays usable.
#[tokio::test]
async fn gives_up_when_a_step_up_cannot_help() {
    let server = protected(OAuthOptions {
        call_scope: Some("mcp:admin".into()),
        withheld_scope: Some("mcp:admin".into()),
        ..OAuthOptions::new()
    })
    .await;
    let authorizer = Arc::new(OAuthAuthorizer::new(config(&server, None, true)).unwrap());
    let c = client(&server, authorizer).await;
    let args = serde_json::json!({"text": "up"}).as_object().cloned();
    let err = c.call_tool("echo", args.clone(), mcp_client::RequestOptions::default()).await.unwrap_err().to_string();
    assert!(err.contains("insufficient_scope") && err.contains("mcp:admin"), "{err}");
    // Again: no new authorization, the same answer.
    let again = c.call_tool("echo", args, mcp_client::RequestOptions::default()).await.unwrap_err().to_string();
    assert!(again.contains("would not help"), "{again}");
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    c.close().await.unwrap();
    let log = server.oauth_log();
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Authorized { .. })), 2, "{log:?}");
}

/// A resource that refuses even a fresh token: one authorization, then a clear error (no
/// loop of logins).
#[tokio::test]
async fn a_fresh_token_refused_with_401_is_not_authorized_again() {
    let server = protected(OAuthOptions { reject_tokens: true, ..OAuthOptions::new() }).await;
    let err = connect_error(&server, config(&server, None, true)).await;
    assert!(err.contains("has just issued"), "{err}");
    let log = server.oauth_log();
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Authorized { .. })), 1, "{log:?}");
}

/// Several requests refused at once (no refresh token): one new authorization, and every
/// request goes through with its token. Twice: when the server ends the tokens' life early
/// while the client still holds them, and when the client's clock says its token expired (it
/// sends none).
#[tokio::test]
async fn concurrent_refusals_lead_to_one_authorization() {
    let server = protected(OAuthOptions { expires_in_s: 60, refresh_tokens: false, ..OAuthOptions::new() }).await;
    let clock = TestClock::new();
    let mut config = config(&server, None, true);
    config.clock = clock.clone();
    let c = Arc::new(client(&server, Arc::new(OAuthAuthorizer::new(config).unwrap())).await);
    let five_calls = || async {
        let calls: Vec<_> = (0..5)
            .map(|i| {
                let c = Arc::clone(&c);
                tokio::spawn(async move {
                    let args = serde_json::json!({"text": format!("n{i}")}).as_object().cloned();
                    c.call_tool("echo", args, mcp_client::RequestOptions::default()).await.map(|r| r.joined_text())
                })
            })
            .collect();
        for (i, call) in calls.into_iter().enumerate() {
            assert_eq!(call.await.unwrap().unwrap(), format!("n{i}"));
        }
    };
    let authorizations = || count(&server.oauth_log(), |e| matches!(e, OAuthEvent::Authorized { .. }));
    let refused = |reason: &str| {
        count(
            &server.oauth_log(),
            |e| matches!(e, OAuthEvent::Refused { path, reason: r } if path == "/mcp" && r == reason),
        )
    };
    assert_eq!(authorizations(), 1);

    // Past the window in which a refused token counts as "just issued" (then a new
    // authorization would not help), and the server drops the token.
    clock.advance(Duration::from_secs(11));
    server.expire_access_tokens();
    five_calls().await;
    assert!(refused("expired token") >= 1, "{:?}", server.oauth_log());
    assert_eq!(authorizations(), 2, "{:?}", server.oauth_log());

    // The new token's 60 s pass by the client's clock: it sends none.
    clock.advance(Duration::from_secs(60));
    let before = refused("no bearer token");
    five_calls().await;
    assert!(refused("no bearer token") > before, "{:?}", server.oauth_log());
    assert_eq!(authorizations(), 3, "{:?}", server.oauth_log());
}

/// Tokens stored for another authorization server than the one the server names now are not
/// refreshed there (the refresh token never reaches it); a new authorization replaces them.
#[tokio::test]
async fn tokens_of_another_authorization_server_are_not_sent_to_the_new_one() {
    let server = protected(OAuthOptions::new()).await;
    let dir = tempfile::tempdir().unwrap();
    let resource = format!("http://{}/mcp", server.addr);
    let mut store = TokenStore::load(dir.path()).unwrap();
    let old = mcp_auth::store::StoredTokens {
        access_token: "old-access".into(),
        refresh_token: Some("old-refresh".into()),
        expires_at_ms: Some(1),
        client: Some(mcp_auth::flow::ClientRegistration {
            client_id: "old-client".into(),
            client_secret: Some("old-secret".into()),
            token_endpoint_auth_method: "client_secret_basic".into(),
        }),
        ..Default::default()
    };
    store.insert("https://old-issuer.example", &resource, old);
    store.save().unwrap();
    let authorizer = Arc::new(OAuthAuthorizer::new(config(&server, Some(dir.path()), true)).unwrap());
    let c = client(&server, authorizer).await;
    c.close().await.unwrap();
    let log = server.oauth_log();
    assert!(
        !log.iter().any(|e| matches!(e, OAuthEvent::Token { grant_type, .. } if grant_type == "refresh_token")),
        "{log:?}"
    );
    assert_eq!(count(&log, |e| matches!(e, OAuthEvent::Authorized { .. })), 1, "{log:?}");
    let store = TokenStore::load(dir.path()).unwrap();
    let keys: Vec<(String, String)> = store.keys().map(|(i, r)| (i.to_owned(), r.to_owned())).collect();
    assert_eq!(keys, [(format!("http://{}", server.addr), resource)], "the stale entry is gone");
}

/// Without a browser, a step-up cannot happen: the server needs a login, which then asks for
/// the larger scope set.
#[tokio::test]
async fn a_step_up_without_a_browser_is_remembered_for_the_next_login() {
    let server = protected(OAuthOptions { call_scope: Some("mcp:admin".into()), ..OAuthOptions::new() }).await;
    let dir = tempfile::tempdir().unwrap();
    let login = Arc::new(OAuthAuthorizer::new(config(&server, Some(dir.path()), true)).unwrap());
    client(&server, login).await.close().await.unwrap();

    let quiet = Arc::new(OAuthAuthorizer::new(config(&server, Some(dir.path()), false)).unwrap());
    let c = client(&server, quiet).await;
    let args = serde_json::json!({"text": "x"}).as_object().cloned();
    let err = c.call_tool("echo", args, mcp_client::RequestOptions::default()).await.unwrap_err().to_string();
    assert!(err.contains("needs scope \"mcp:admin\"") && err.contains("mcp-harness login fixture"), "{err}");
    c.close().await.unwrap();

    let mut again = config(&server, Some(dir.path()), true);
    again.ignore_stored = true;
    let c = client(&server, Arc::new(OAuthAuthorizer::new(again).unwrap())).await;
    let args = serde_json::json!({"text": "y"}).as_object().cloned();
    assert_eq!(c.call_tool("echo", args, mcp_client::RequestOptions::default()).await.unwrap().joined_text(), "y");
    c.close().await.unwrap();
    let scopes: Vec<Option<String>> = server
        .oauth_log()
        .iter()
        .filter_map(|e| match e {
            OAuthEvent::Authorized { scope, .. } => Some(scope.clone()),
            _ => None,
        })
        .collect();
    assert_eq!(scopes, [Some("mcp:read mcp:write".into()), Some("mcp:read mcp:write mcp:admin".into())]);
}

/// A configured issuer pins the authorization server: another one is refused before any
/// credential is sent.
#[tokio::test]
async fn an_expected_issuer_refuses_another_authorization_server() {
    let (server, mut config) = machine_client().await;
    config.expected_issuer = Some("https://login.example.com".into());
    let err = connect_error(&server, config).await;
    assert!(err.contains("allows only https://login.example.com"), "{err}");
    let log = server.oauth_log();
    assert!(!log.iter().any(|e| matches!(e, OAuthEvent::Token { .. })), "{log:?}");
}
