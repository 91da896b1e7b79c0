//! [`OAuthAuthorizer`]: the OAuth 2.1 adapter of the HTTP transport's [`Authorizer`] port.
//!
//! It answers the transport's two questions: which `Authorization` header to send (the stored
//! access token, refreshed when it is about to expire) and what to do about a 401 or 403
//! (discover, identify the client, obtain a token with the configured grant, and for
//! `insufficient_scope` re-authorize with the larger scope set a bounded number of times).
//!
//! Client identity, in the order the MCP specification gives: a pre-registered client from the
//! configuration; a client ID metadata document URL where the authorization server supports
//! it; dynamic client registration otherwise.
//!
//! Tokens are kept in memory and, with a store directory, in a [`TokenStore`] keyed by
//! (issuer, resource). Nothing here logs a token or a secret. Time is read through the
//! [`Clock`] port of the configuration.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use mcp_client::{AuthChallenge, AuthError, Authorizer};
use mcp_safety::Secret;
use rand::RngExt as _;
use tokio::sync::Mutex;
use url::Url;

use crate::clock::{Clock, SystemClock};
use crate::flow::{
    self, AUTH_CLIENT_SECRET_BASIC, AUTH_CLIENT_SECRET_POST, AUTH_NONE, ClientRegistration, Discovered, FlowError,
    TokenResponse,
};
use crate::grants::{self, Es256Key};
use crate::pkce::Pkce;
use crate::resource::canonical_resource;
use crate::scope::{Scopes, StepUp, choose_scopes};
use crate::store::{StoredTokens, TokenStore};
use crate::user_agent::UserAgent;
use crate::www_authenticate::{BearerChallenge, parse_challenges};

/// A token is refreshed this long before it expires (or halfway through a shorter life), so a
/// request does not race its expiry.
const REFRESH_SKEW_MS: u64 = 30_000;
/// After a failed refresh, the next attempt waits this long (the token is used meanwhile).
const REFRESH_RETRY: Duration = Duration::from_secs(30);
/// Step-ups are counted within this window: a long session may need a few more later.
const STEP_UP_WINDOW: Duration = Duration::from_secs(600);
/// A token refused with 401 within this long of its authorization is not authorized again.
const FRESH_TOKEN: Duration = Duration::from_secs(10);
/// Re-authorizations for `insufficient_scope` before giving up: with the first authorization
/// that makes at most three authorization requests for one server.
const MAX_STEP_UPS: u32 = 2;

/// The client's identity as configured. Every field is optional: without a `client_id` the
/// client uses a metadata document URL or registers itself.
#[derive(Debug, Clone, Default)]
pub struct ClientConfig {
    /// A pre-registered client id.
    pub client_id: Option<String>,
    /// Its secret (confidential clients).
    pub client_secret: Option<Secret>,
    /// A client ID metadata document URL (an `https` URL that serves the client's metadata),
    /// used as `client_id` where the authorization server supports such documents.
    pub metadata_document_url: Option<String>,
}

/// Cross-app access (Enterprise-Managed Authorization): an identity provider's ID token is
/// exchanged for an ID-JAG, which the MCP authorization server takes as a JWT bearer grant.
#[derive(Clone)]
pub struct CrossAppConfig {
    /// The identity provider's token endpoint.
    pub idp_token_endpoint: Url,
    /// This client's id at the identity provider.
    pub idp_client_id: String,
    /// This client's secret at the identity provider, if it has one.
    pub idp_client_secret: Option<String>,
    /// The user's ID token from the identity provider.
    pub id_token: String,
}

impl std::fmt::Debug for CrossAppConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrossAppConfig")
            .field("idp_token_endpoint", &self.idp_token_endpoint.as_str())
            .field("idp_client_id", &self.idp_client_id)
            .finish_non_exhaustive()
    }
}

/// How tokens are obtained.
#[derive(Clone)]
pub enum Grant {
    /// Authorization code with PKCE, through a user agent. Without one (a non-interactive
    /// run) a server that needs a new authorization reports [`AuthError::needs_login`].
    AuthorizationCode {
        /// Takes the user to the authorization server.
        user_agent: Option<Arc<dyn UserAgent>>,
    },
    /// Client credentials (machine clients): the client secret from [`ClientConfig`], or a
    /// private key for `private_key_jwt` (ES256, PKCS#8 PEM).
    ClientCredentials {
        /// The signing key, for `private_key_jwt`.
        private_key: Option<Arc<Es256Key>>,
    },
    /// Cross-app access (ID token → ID-JAG → access token).
    CrossApp(CrossAppConfig),
}

impl std::fmt::Debug for Grant {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Grant::AuthorizationCode { user_agent } => {
                f.debug_struct("AuthorizationCode").field("interactive", &user_agent.is_some()).finish()
            }
            Grant::ClientCredentials { private_key } => {
                f.debug_struct("ClientCredentials").field("private_key_jwt", &private_key.is_some()).finish()
            }
            Grant::CrossApp(c) => f.debug_tuple("CrossApp").field(c).finish(),
        }
    }
}

/// Configuration of an [`OAuthAuthorizer`].
#[derive(Debug, Clone)]
pub struct OAuthConfig {
    /// The MCP server's URL.
    pub server_url: Url,
    /// `client_name` for dynamic registration.
    pub client_name: String,
    /// The client's identity.
    pub client: ClientConfig,
    /// How tokens are obtained.
    pub grant: Grant,
    /// Where tokens are kept (the user's data directory, never the workspace); `None` keeps
    /// them in memory only.
    pub store_dir: Option<PathBuf>,
    /// Ignore stored tokens (a fresh login); new ones are still stored.
    pub ignore_stored: bool,
    /// Appended to "needs authorization" errors: how the user logs in, e.g.
    /// "run `mcp-harness login NAME`".
    pub login_hint: String,
    /// Timeout of each request to the authorization server.
    pub request_timeout: Duration,
    /// The only authorization server (issuer) to use: credentials are never sent to another
    /// one, whatever the server's metadata names. Worth setting with a client secret or key.
    pub expected_issuer: Option<String>,
    /// Where time is read (token expiry, refresh back-off, step-up window): the system clock,
    /// or one a test moves forward.
    pub clock: Arc<dyn Clock>,
}

impl OAuthConfig {
    /// Authorization code flow for `server_url`, with no user agent (non-interactive), no
    /// store, and defaults.
    pub fn new(server_url: Url) -> Self {
        Self {
            server_url,
            client_name: "mcp-harness".to_owned(),
            client: ClientConfig::default(),
            grant: Grant::AuthorizationCode { user_agent: None },
            store_dir: None,
            ignore_stored: false,
            login_hint: "log in first".to_owned(),
            request_timeout: Duration::from_secs(30),
            expected_issuer: None,
            clock: Arc::new(SystemClock),
        }
    }
}

#[derive(Default)]
struct Inner {
    loaded: bool,
    tokens: Option<StoredTokens>,
    issuer: Option<String>,
    discovered: Option<Discovered>,
    registration: Option<ClientRegistration>,
    /// The scopes of the last authorization request.
    requested: Scopes,
    step_up: Option<StepUp>,
    /// When the last new authorization completed: a 401 for a token this fresh means the
    /// server will not accept what the authorization server issues, and another login (maybe
    /// in a browser) would not change that.
    authorized_at: Option<Instant>,
    /// When the step-up budget was last used.
    step_up_at: Option<Instant>,
    /// The access token's lifetime as issued, when known.
    lifetime_secs: Option<u64>,
    /// When a refresh last failed.
    refresh_failed_at: Option<Instant>,
}

/// The OAuth 2.1 [`Authorizer`]. Share one per server connection; it serializes its own work.
pub struct OAuthAuthorizer {
    config: OAuthConfig,
    resource: String,
    http: reqwest::Client,
    inner: Mutex<Inner>,
}

impl std::fmt::Debug for OAuthAuthorizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthAuthorizer").field("config", &self.config).finish_non_exhaustive()
    }
}

fn bearer(tokens: &StoredTokens) -> Secret {
    Secret::new(format!("Bearer {}", tokens.access_token.expose()))
}

fn failed(e: impl std::fmt::Display) -> AuthError {
    AuthError::failed(e.to_string())
}

/// The secret-based method to use: the one the server advertises, basic when it lists both
/// or none.
fn secret_method(discovered: &Discovered) -> String {
    match &discovered.token_endpoint_auth_methods_supported {
        Some(m)
            if !m.iter().any(|x| x == AUTH_CLIENT_SECRET_BASIC) && m.iter().any(|x| x == AUTH_CLIENT_SECRET_POST) =>
        {
            AUTH_CLIENT_SECRET_POST.to_owned()
        }
        _ => AUTH_CLIENT_SECRET_BASIC.to_owned(),
    }
}

impl OAuthAuthorizer {
    /// Checks the configuration (the server URL must identify a resource).
    pub fn new(config: OAuthConfig) -> Result<Self, FlowError> {
        let resource = canonical_resource(&config.server_url)?;
        let http = reqwest::Client::builder()
            // Metadata and token endpoints answer directly; following redirects could send
            // form bodies with credentials elsewhere.
            .redirect(reqwest::redirect::Policy::none())
            .timeout(config.request_timeout)
            .build()
            .map_err(|source| FlowError::Http { url: config.server_url.to_string(), source })?;
        Ok(Self { config, resource, http, inner: Mutex::new(Inner::default()) })
    }

    fn now_ms(&self) -> u64 {
        self.config.clock.unix_ms()
    }

    /// How long ago `at` was, by the configured clock.
    fn since(&self, at: Instant) -> Duration {
        self.config.clock.instant().saturating_duration_since(at)
    }

    /// The resource identifier (the canonical server URL) tokens are stored under.
    pub fn resource(&self) -> &str {
        &self.resource
    }

    /// The issuer of the current tokens, once known.
    pub async fn issuer(&self) -> Option<String> {
        self.inner.lock().await.issuer.clone()
    }

    /// Removes every stored token for `server_url` from the store in `store_dir`; returns how
    /// many entries there were.
    pub fn logout(store_dir: impl Into<PathBuf>, server_url: &Url) -> Result<usize, LogoutError> {
        let resource = canonical_resource(server_url)?;
        let mut store = TokenStore::load(store_dir)?;
        let removed = store.remove_resource(&resource);
        if removed > 0 {
            store.save()?;
        }
        Ok(removed)
    }

    fn load(&self, inner: &mut Inner) {
        if inner.loaded {
            return;
        }
        inner.loaded = true;
        let Some(dir) = self.config.store_dir.as_ref() else { return };
        match TokenStore::load(dir) {
            Ok(store) => {
                if let Some((issuer, tokens)) = store.find_resource(&self.resource) {
                    let scope = |s: &Option<String>| s.as_deref().map(Scopes::parse).unwrap_or_default();
                    // Even a fresh login asks again for the scopes a step-up found missing.
                    inner.requested = scope(&tokens.scope).union(&scope(&tokens.wanted_scope));
                    if !self.config.ignore_stored {
                        inner.issuer = Some(issuer.to_owned());
                        inner.registration = tokens.client.clone();
                        inner.tokens = Some(tokens.clone());
                    }
                }
            }
            Err(e) => tracing::warn!("OAuth token store unusable, ignoring it: {e}"),
        }
    }

    fn persist(&self, inner: &Inner) {
        let (Some(dir), Some(issuer), Some(tokens)) = (&self.config.store_dir, &inner.issuer, &inner.tokens) else {
            return;
        };
        let saved = TokenStore::load(dir).and_then(|mut store| {
            // One entry per resource: tokens of an earlier authorization server must not be
            // found (and refreshed) by a later process.
            store.remove_resource(&self.resource);
            store.insert(issuer, &self.resource, tokens.clone());
            store.save()
        });
        if let Err(e) = saved {
            tracing::warn!("could not save the OAuth tokens: {e}");
        }
    }

    /// Takes newer tokens another process stored for the same issuer (it may have rotated the
    /// refresh token we hold). Whether it found any.
    fn reload(&self, inner: &mut Inner) -> bool {
        let Some(dir) = &self.config.store_dir else { return false };
        let Ok(store) = TokenStore::load(dir) else { return false };
        let Some((issuer, stored)) = store.find_resource(&self.resource) else { return false };
        let newer = inner.issuer.as_deref() == Some(issuer)
            && inner.tokens.as_ref().is_none_or(|t| t.access_token != stored.access_token);
        if newer {
            inner.tokens = Some(stored.clone());
            if stored.client.is_some() {
                inner.registration = stored.client.clone();
            }
        }
        newer
    }

    /// The configured pre-registered client, with the auth method the server advertises.
    fn configured_client(&self, discovered: &Discovered) -> Option<ClientRegistration> {
        let client_id = self.config.client.client_id.clone()?;
        let secret = self.config.client.client_secret.clone();
        let method = if secret.is_some() { secret_method(discovered) } else { AUTH_NONE.to_owned() };
        Some(ClientRegistration { client_id, client_secret: secret, token_endpoint_auth_method: method })
    }

    /// Who the client is for an authorization code flow: pre-registered, else a metadata
    /// document URL where supported, else dynamically registered.
    async fn identify(&self, discovered: &Discovered, redirect_uri: &str) -> Result<ClientRegistration, AuthError> {
        if let Some(client) = self.configured_client(discovered) {
            return Ok(client);
        }
        if let Some(url) = &self.config.client.metadata_document_url
            && discovered.client_id_metadata_document_supported == Some(true)
        {
            return Ok(ClientRegistration {
                client_id: url.clone(),
                client_secret: None,
                token_endpoint_auth_method: AUTH_NONE.to_owned(),
            });
        }
        if discovered.registration_endpoint.is_none() {
            return Err(AuthError::failed(format!(
                "the authorization server {} offers no dynamic client registration: configure a pre-registered \
                 client (oauth client_id) for this server",
                discovered.issuer
            )));
        }
        flow::register(&self.http, discovered, redirect_uri, &self.config.client_name).await.map_err(failed)
    }

    async fn discover(&self, challenge: Option<&BearerChallenge>) -> Result<Discovered, AuthError> {
        let discovered = flow::discover(&self.http, &self.config.server_url, challenge).await.map_err(|e| match e {
            FlowError::ResourceMismatch { .. } => AuthError::failed(format!("refusing to authorize: {e}")),
            e => AuthError::failed(format!("OAuth discovery for {} failed: {e}", self.config.server_url)),
        })?;
        if let Some(expected) = &self.config.expected_issuer
            && expected.trim_end_matches('/') != discovered.issuer.trim_end_matches('/')
        {
            return Err(AuthError::failed(format!(
                "refusing to authorize: {} names the authorization server {}, but the configuration allows only {expected}",
                self.config.server_url, discovered.issuer
            )));
        }
        Ok(discovered)
    }

    /// Uses the refresh token; on success the new tokens are in `inner`.
    async fn refresh(&self, inner: &mut Inner) -> Result<(), AuthError> {
        let refresh_token = inner
            .tokens
            .as_ref()
            .and_then(|t| t.refresh_token.clone())
            .ok_or_else(|| AuthError::failed("no refresh token"))?;
        let discovered = match inner.discovered.clone() {
            Some(d) => d,
            None => self.discover(None).await?,
        };
        // The refresh token (and a registered client's secret) only ever go back to the
        // authorization server that issued them.
        if let Some(issuer) = inner.issuer.clone()
            && issuer.trim_end_matches('/') != discovered.issuer.trim_end_matches('/')
        {
            inner.tokens = None;
            inner.registration = None;
            inner.issuer = None;
            return Err(AuthError::failed(format!(
                "the server now names another authorization server ({}) than the one that issued the tokens ({issuer}); \
                 a new authorization is needed",
                discovered.issuer
            )));
        }
        let registration = inner
            .registration
            .clone()
            .or_else(|| self.configured_client(&discovered))
            .ok_or_else(|| AuthError::failed("the client that obtained the tokens is unknown"))?;
        let response = flow::refresh(&self.http, &discovered, &registration, refresh_token.expose(), &self.resource)
            .await
            .map_err(failed)?;
        self.keep(inner, response, discovered, registration, None, Some(refresh_token));
        Ok(())
    }

    /// Records new tokens (and what produced them) and stores them.
    fn keep(
        &self,
        inner: &mut Inner,
        response: TokenResponse,
        discovered: Discovered,
        registration: ClientRegistration,
        requested: Option<Scopes>,
        previous_refresh_token: Option<Secret>,
    ) {
        inner.lifetime_secs = response.expires_in;
        inner.refresh_failed_at = None;
        let mut tokens = response.to_stored(self.now_ms());
        if tokens.refresh_token.is_none() {
            tokens.refresh_token = previous_refresh_token;
        }
        if let Some(requested) = requested {
            if tokens.scope.is_none() {
                tokens.scope = requested.to_param();
            }
            inner.requested = requested;
        }
        // Only a client the configuration does not name is stored with the tokens: a
        // configured secret stays in its configuration.
        if self.config.client.client_id.as_deref() != Some(registration.client_id.as_str()) {
            tokens.client = Some(registration.clone());
        }
        inner.issuer = Some(discovered.issuer.clone());
        inner.discovered = Some(discovered);
        inner.registration = Some(registration);
        inner.tokens = Some(tokens);
        self.persist(inner);
    }

    fn login_needed(&self) -> AuthError {
        // The transport's message already names the server and its URL.
        AuthError::needs_login(format!("not logged in: {}", self.config.login_hint))
    }

    /// A new authorization with the configured grant.
    async fn authorize(
        &self,
        inner: &mut Inner,
        challenge: Option<&BearerChallenge>,
        scopes: Option<Scopes>,
    ) -> Result<(), AuthError> {
        if let Grant::AuthorizationCode { user_agent: None } = &self.config.grant {
            return Err(self.login_needed());
        }
        let discovered = self.discover(challenge).await?;
        let interactive = matches!(self.config.grant, Grant::AuthorizationCode { .. });
        let scopes = scopes.unwrap_or_else(|| {
            choose_scopes(
                challenge.and_then(|c| c.scope.as_deref()),
                discovered.resource_scopes_supported.as_deref(),
                discovered.scopes_supported.as_deref(),
                // A person should not have to log in again every hour.
                interactive,
            )
            // What earlier authorizations and step-ups found necessary stays requested.
            .union(&inner.requested)
        });
        let scope_param = scopes.to_param();
        let resource = self.resource.clone();
        let (response, registration) = match &self.config.grant {
            Grant::AuthorizationCode { user_agent: None } => return Err(self.login_needed()),
            Grant::AuthorizationCode { user_agent: Some(agent) } => {
                let pending = agent.prepare().await.map_err(failed)?;
                let redirect_uri = pending.redirect_uri().to_owned();
                let registration = self.identify(&discovered, &redirect_uri).await?;
                let pkce = Pkce::generate();
                let state = URL_SAFE_NO_PAD.encode(rand::rng().random::<[u8; 16]>());
                let url = flow::authorization_url(
                    &discovered,
                    &registration,
                    &redirect_uri,
                    &pkce,
                    &state,
                    scope_param.as_deref(),
                    &resource,
                )
                .map_err(failed)?;
                let back = pending.complete(&url, &state).await.map_err(failed)?;
                // Nothing from a redirect with another state is believed, not even its error.
                if back.state.as_deref() != Some(state.as_str()) {
                    return Err(AuthError::failed(
                        "the authorization redirect carried another state than the request (possible CSRF); ignored",
                    ));
                }
                if let Some(error) = back.error {
                    let why = back
                        .error_description
                        .map(|d| format!(": {}", mcp_safety::text::one_line(&d, 300)))
                        .unwrap_or_default();
                    let error = mcp_safety::text::one_line(&error, 100);
                    return Err(AuthError::failed(format!("the authorization was refused ({error}){why}")));
                }
                let code = back.code.ok_or_else(|| AuthError::failed("the authorization redirect carried no code"))?;
                let response = flow::exchange_code(
                    &self.http,
                    &discovered,
                    &registration,
                    code.expose(),
                    &redirect_uri,
                    &pkce,
                    &resource,
                )
                .await
                .map_err(failed)?;
                (response, registration)
            }
            Grant::ClientCredentials { private_key } => {
                let client_id =
                    self.config.client.client_id.clone().ok_or_else(|| {
                        AuthError::failed("the client credentials grant needs a configured client_id")
                    })?;
                match private_key {
                    Some(key) => {
                        let response = grants::client_credentials_jwt(
                            &self.http,
                            &discovered,
                            &client_id,
                            key,
                            scope_param.as_deref(),
                            &resource,
                            self.now_ms() / 1000,
                        )
                        .await
                        .map_err(failed)?;
                        let registration = ClientRegistration {
                            client_id,
                            client_secret: None,
                            token_endpoint_auth_method: "private_key_jwt".to_owned(),
                        };
                        (response, registration)
                    }
                    None => {
                        let registration = self
                            .configured_client(&discovered)
                            .ok_or_else(|| AuthError::failed("the client credentials grant needs a client_id"))?;
                        if registration.client_secret.is_none() {
                            return Err(AuthError::failed(
                                "the client credentials grant needs a client secret or a private key",
                            ));
                        }
                        let response = flow::client_credentials(
                            &self.http,
                            &discovered,
                            &registration,
                            scope_param.as_deref(),
                            &resource,
                        )
                        .await
                        .map_err(failed)?;
                        (response, registration)
                    }
                }
            }
            Grant::CrossApp(cross) => {
                let registration = self
                    .configured_client(&discovered)
                    .ok_or_else(|| AuthError::failed("cross-app access needs a configured client_id"))?;
                let id_jag = grants::request_id_jag(
                    &self.http,
                    &cross.idp_token_endpoint,
                    &cross.idp_client_id,
                    cross.idp_client_secret.as_deref(),
                    &cross.id_token,
                    &discovered.issuer,
                    &resource,
                    scope_param.as_deref(),
                )
                .await
                .map_err(failed)?;
                let response = grants::jwt_bearer_grant(
                    &self.http,
                    &discovered,
                    &registration,
                    &id_jag,
                    scope_param.as_deref(),
                    &resource,
                )
                .await
                .map_err(failed)?;
                (response, registration)
            }
        };
        self.keep(inner, response, discovered, registration, Some(scopes), None);
        inner.authorized_at = Some(self.config.clock.instant());
        Ok(())
    }
}

/// `logout` failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LogoutError {
    /// The server URL identifies no resource.
    #[error(transparent)]
    Resource(#[from] crate::resource::ResourceError),
    /// The store could not be read or written.
    #[error(transparent)]
    Store(#[from] crate::store::StoreError),
}

/// The first Bearer challenge among the header values (unparsable ones are skipped).
fn bearer_challenge(values: &[String]) -> Option<BearerChallenge> {
    values.iter().filter_map(|v| parse_challenges(v).ok()).flatten().find_map(|c| BearerChallenge::from_challenge(&c))
}

#[async_trait]
impl Authorizer for OAuthAuthorizer {
    async fn authorization(&self) -> Option<Secret> {
        let mut inner = self.inner.lock().await;
        self.load(&mut inner);
        let now = self.now_ms();
        let skew = inner.lifetime_secs.map_or(REFRESH_SKEW_MS, |l| REFRESH_SKEW_MS.min(l.saturating_mul(1000) / 2));
        let (expiring, expired, refreshable) = match &inner.tokens {
            Some(t) => (t.is_expired(now, skew), t.is_expired(now, 0), t.refresh_token.is_some()),
            None => return None,
        };
        let backing_off = inner.refresh_failed_at.is_some_and(|at| self.since(at) < REFRESH_RETRY) && !expired;
        if expiring && refreshable && !backing_off {
            if let Err(e) = self.refresh(&mut inner).await {
                tracing::info!(server = %self.config.server_url, "refreshing the access token failed: {e}");
                inner.refresh_failed_at = Some(self.config.clock.instant());
                if !self.reload(&mut inner) && expired {
                    inner.tokens = None;
                }
            }
        } else if expired && !self.reload(&mut inner) {
            inner.tokens = None;
        }
        inner.tokens.as_ref().filter(|t| !t.is_expired(now, 0)).map(bearer)
    }

    async fn challenged(&self, challenge: &AuthChallenge) -> Result<(), AuthError> {
        let mut inner = self.inner.lock().await;
        self.load(&mut inner);
        let current = inner.tokens.as_ref().filter(|t| !t.is_expired(self.now_ms(), 0)).map(bearer);
        if current.is_some() && current != challenge.refused {
            // Another request obtained a new token meanwhile: try that one.
            return Ok(());
        }
        let parsed = bearer_challenge(&challenge.www_authenticate);
        if challenge.status == 403 {
            let Some(parsed) = parsed.filter(BearerChallenge::is_insufficient_scope) else {
                return Err(AuthError::failed(format!(
                    "{} refused the token (HTTP 403) without asking for more scope",
                    self.config.server_url
                )));
            };
            let required = Scopes::parse(parsed.scope.as_deref().unwrap_or_default());
            let granted = inner.tokens.as_ref().and_then(|t| t.scope.as_deref()).map(Scopes::parse).unwrap_or_default();
            let held = inner.requested.union(&granted);
            if required.is_empty() || held.is_superset(&required) {
                return Err(AuthError::failed(format!(
                    "{} reports insufficient_scope for \"{}\", which was already requested; authorizing again \
                     would not help",
                    self.config.server_url,
                    required.to_param().unwrap_or_default()
                )));
            }
            if let Grant::AuthorizationCode { user_agent: None } = &self.config.grant {
                // Remember what is missing so the login asks for it.
                let wanted = held.union(&required);
                if let Some(tokens) = inner.tokens.as_mut() {
                    tokens.wanted_scope = wanted.to_param();
                }
                inner.requested = wanted;
                self.persist(&inner);
                return Err(AuthError::needs_login(format!(
                    "the server needs scope \"{}\": {}",
                    required.to_param().unwrap_or_default(),
                    self.config.login_hint
                )));
            }
            if inner.step_up_at.is_some_and(|at| self.since(at) > STEP_UP_WINDOW) {
                inner.step_up = None;
            }
            inner.step_up_at = Some(self.config.clock.instant());
            let step_up = inner.step_up.get_or_insert_with(|| StepUp::new(MAX_STEP_UPS));
            let scopes = step_up.next(&held, &required).map_err(failed)?;
            return self.authorize(&mut inner, Some(&parsed), Some(scopes)).await;
        }
        if challenge.refused.is_some() && inner.authorized_at.is_some_and(|at| self.since(at) < FRESH_TOKEN) {
            return Err(AuthError::failed(format!(
                "{} refused the token its authorization server has just issued (HTTP 401); authorizing again \
                 would not help",
                self.config.server_url
            )));
        }
        // A refused token may only have expired early: a refresh is cheaper than a login.
        if challenge.refused.is_some() && inner.tokens.as_ref().is_some_and(|t| t.refresh_token.is_some()) {
            match self.refresh(&mut inner).await {
                Ok(()) => return Ok(()),
                Err(e) => tracing::info!(server = %self.config.server_url, "refreshing a refused token failed: {e}"),
            }
        }
        inner.tokens = None;
        self.authorize(&mut inner, parsed.as_ref(), None).await
    }
}
