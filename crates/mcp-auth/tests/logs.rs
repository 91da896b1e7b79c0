//! Nothing secret reaches the logs. A test binary of its own: its subscriber is the global one
//! (every thread: the runtime's workers, blocking lookups, the fixture server; and `log`
//! records, such as rustls's), at TRACE for every target, so it sees everything any code in
//! this process logs.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod oauth_fixture;

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use mcp_auth::{ClientConfig, Grant, OAuthAuthorizer};
use mcp_client::ListLimits;
use mcp_fixtures::oauth::{OAuthEvent, OAuthOptions};
use oauth_fixture::{TestClock, client, config, protected, refreshes};

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// An authorization code login (dynamic registration with a client secret sent in the form,
/// PKCE), a refresh, and a machine client with a configured secret (HTTP Basic); then none of
/// the codes, verifiers, access tokens, refresh tokens or client secrets that changed hands
/// appears in the logs, nor any `Authorization` header value.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_secret_reaches_the_logs() {
    let captured = Captured::default();
    let writer = captured.clone();
    tracing_subscriber::fmt()
        .with_max_level(tracing::Level::TRACE)
        .with_writer(move || writer.clone())
        .with_thread_ids(true)
        .with_ansi(false)
        .try_init()
        .unwrap();

    // A person logs in; the client registers and gets a secret it sends in the token requests.
    let login = protected(OAuthOptions {
        expires_in_s: 120,
        auth_methods: vec!["client_secret_post".into()],
        ..OAuthOptions::new()
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let clock = TestClock::new();
    let mut person = config(&login, Some(dir.path()), true);
    person.clock = clock.clone();
    let c = client(&login, Arc::new(OAuthAuthorizer::new(person).unwrap())).await;
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    clock.advance(Duration::from_secs(90));
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    assert_eq!(refreshes(&login), 1, "the token was refreshed");
    c.close().await.unwrap();

    // A machine client with a configured secret, sent with HTTP Basic.
    let machine_secret = "configured-machine-secret-5d1e";
    let service = protected(OAuthOptions {
        pre_registered: Some(("machine".into(), machine_secret.into())),
        ..OAuthOptions::new()
    })
    .await;
    let mut machine = config(&service, None, false);
    machine.client = ClientConfig {
        client_id: Some("machine".into()),
        client_secret: Some(machine_secret.into()),
        ..ClientConfig::default()
    };
    machine.grant = Grant::ClientCredentials { private_key: None };
    let c = client(&service, Arc::new(OAuthAuthorizer::new(machine).unwrap())).await;
    assert_eq!(c.list_all_tools(ListLimits::default()).await.unwrap().len(), 2);
    c.close().await.unwrap();

    let person = login.oauth_secrets();
    let machine = service.oauth_secrets();
    assert_eq!(person.client_secrets.len(), 1, "{person:?}");
    assert_eq!((person.codes.len(), person.code_verifiers.len()), (1, 1), "{person:?}");
    assert_eq!(person.access_tokens.len(), 2, "the first access token and the refreshed one: {person:?}");
    assert_eq!(person.refresh_tokens.len(), 2, "{person:?}");
    assert_eq!(machine.client_secrets, [machine_secret]);
    assert_eq!(machine.access_tokens.len(), 1, "{machine:?}");

    let logs = String::from_utf8_lossy(&captured.0.lock().unwrap()).into_owned();
    let threads: HashSet<&str> =
        logs.lines().filter_map(|l| l.split_whitespace().find(|w| w.starts_with("ThreadId("))).collect();
    assert!(threads.len() > 1, "the logs of more than one thread were captured: {threads:?}");
    for secret in person.all().chain(machine.all()) {
        assert!(!logs.contains(secret), "{secret} appears in the logs");
    }
    // Client secrets in an Authorization header are base64-encoded.
    let registered = login
        .oauth_log()
        .iter()
        .find_map(|e| match e {
            OAuthEvent::Registered { client_id } => Some(client_id.clone()),
            _ => None,
        })
        .unwrap();
    let basic = base64::engine::general_purpose::STANDARD;
    for encoded in [
        basic.encode(format!("machine:{machine_secret}")),
        basic.encode(format!("{registered}:{}", person.client_secrets[0])),
    ] {
        assert!(!logs.contains(&encoded), "Basic credentials appear in the logs");
    }
    assert!(!logs.contains("Bearer access-"), "an Authorization header value appears in the logs");
}
