//! What the tests of `OAuthAuthorizer` share: the OAuth fixture server (an authorization server
//! and a protected MCP endpoint on one loopback port), configurations and clients for it, and
//! a clock the test moves forward instead of sleeping.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mcp_auth::{ClientConfig, Clock, FollowRedirects, Grant, OAuthAuthorizer, OAuthConfig, SystemClock};
use mcp_client::{Client, ClientOptions};
use mcp_fixtures::http::{HttpOptions, RunningServer, start};
use mcp_fixtures::oauth::{OAuthEvent, OAuthOptions};
use mcp_transport::{HttpConfig, HttpTransport};
use url::Url;

/// The authorizer's clock, standing still until [`TestClock::advance`]. It starts at the
/// system's wall-clock time so stored expiry looks like any other.
#[derive(Debug)]
pub(crate) struct TestClock {
    start_ms: u64,
    start: Instant,
    elapsed: Mutex<Duration>,
}

impl TestClock {
    pub(crate) fn new() -> Arc<Self> {
        Arc::new(Self { start_ms: SystemClock.unix_ms(), start: Instant::now(), elapsed: Mutex::default() })
    }

    pub(crate) fn advance(&self, by: Duration) {
        *self.elapsed.lock().unwrap() += by;
    }

    fn elapsed(&self) -> Duration {
        *self.elapsed.lock().unwrap()
    }
}

impl Clock for TestClock {
    fn unix_ms(&self) -> u64 {
        self.start_ms + u64::try_from(self.elapsed().as_millis()).unwrap()
    }

    fn instant(&self) -> Instant {
        self.start + self.elapsed()
    }
}

pub(crate) async fn protected(options: OAuthOptions) -> RunningServer {
    start(HttpOptions { json: true, oauth: Some(options), ..HttpOptions::default() }, 0).await.unwrap()
}

/// The configuration for `server`, with a [`TestClock`] of its own (time stands still unless
/// a test replaces it with one it advances).
pub(crate) fn config(server: &RunningServer, store: Option<&std::path::Path>, interactive: bool) -> OAuthConfig {
    let mut config = OAuthConfig::new(Url::parse(&server.url()).unwrap());
    config.store_dir = store.map(std::path::Path::to_path_buf);
    config.login_hint = "run `mcp-harness login fixture`".into();
    config.clock = TestClock::new();
    if interactive {
        config.grant = Grant::AuthorizationCode { user_agent: Some(Arc::new(FollowRedirects::default())) };
    }
    config
}

pub(crate) async fn client(server: &RunningServer, authorizer: Arc<OAuthAuthorizer>) -> Client {
    let mut http = HttpConfig::new(server.url());
    http.auth = Some(authorizer);
    let options = ClientOptions { startup_timeout: Duration::from_secs(10), ..ClientOptions::default() };
    Client::connect(HttpTransport::new(http).unwrap(), options).await.unwrap()
}

/// A server with a pre-registered machine client, and the client-credentials configuration
/// for it.
pub(crate) async fn machine_client() -> (RunningServer, OAuthConfig) {
    let server =
        protected(OAuthOptions { pre_registered: Some(("machine".into(), "s3cret".into())), ..OAuthOptions::new() })
            .await;
    let mut config = config(&server, None, false);
    config.client = ClientConfig {
        client_id: Some("machine".into()),
        client_secret: Some("s3cret".into()),
        ..ClientConfig::default()
    };
    config.grant = Grant::ClientCredentials { private_key: None };
    (server, config)
}

pub(crate) fn count(log: &[OAuthEvent], f: impl Fn(&OAuthEvent) -> bool) -> usize {
    log.iter().filter(|e| f(e)).count()
}

/// Successful refreshes the server saw.
pub(crate) fn refreshes(server: &RunningServer) -> usize {
    count(
        &server.oauth_log(),
        |e| matches!(e, OAuthEvent::Token { grant_type, ok: true, .. } if grant_type == "refresh_token"),
    )
}
