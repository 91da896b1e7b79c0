//! An OAuth 2.1 authorization server for the HTTP fixture ([`crate::http`]), so that OAuth
//! clients can be tested against a real one: set [`crate::http::HttpOptions::oauth`] and the
//! same server (same origin, loopback only) also serves
//!
//! - `GET /.well-known/oauth-protected-resource/mcp` (and at the root path): protected resource
//!   metadata (RFC 9728) for the resource `<base>/mcp`, with this server as its authorization
//!   server;
//! - `GET /.well-known/oauth-authorization-server`: authorization server metadata (RFC 8414),
//!   issuer `<base>`; other `/.well-known/` paths are 404 (no OpenID configuration);
//! - `POST /register`: dynamic client registration (RFC 7591);
//! - `GET /authorize`: approves at once (or denies, with [`OAuthOptions::deny`]) and redirects
//!   with `code`, `state` and `iss` (RFC 9207); PKCE S256 is required;
//! - `POST /token`: the grants `authorization_code` (PKCE checked, code single-use),
//!   `refresh_token` (rotated: the old refresh token stops working) and `client_credentials`
//!   (confidential clients); client authentication `none`, `client_secret_basic` and
//!   `client_secret_post`, as far as [`OAuthOptions::auth_methods`] allows them.
//!
//! `/mcp` then needs `Authorization: Bearer <access token>` with a token issued here and not
//! expired; otherwise it answers 401 with `WWW-Authenticate: Bearer error="invalid_token",
//! resource_metadata="<base>/.well-known/oauth-protected-resource/mcp"`.
//!
//! What happened is recorded as [`OAuthEvent`]s (see `RunningServer::oauth_log`), and every
//! secret value that changed hands as [`OAuthSecrets`] (`RunningServer::oauth_secrets`), so a
//! test can check that none of them leaks. `RunningServer::expire_access_tokens` ends the life
//! of every access token issued so far, for tests of expiry that must not wait. Bodies over
//! 64 KiB are ignored (read as empty); nothing a client sends makes the server panic. This is a
//! test fixture: nothing is persisted, there is no consent screen, tokens are opaque strings.

use std::collections::HashMap;
use std::hash::BuildHasher as _;
use std::sync::Mutex;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::Response;
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use serde_json::{Map, Value, json};
use sha2::{Digest as _, Sha256};
use url::Url;

/// Request bodies larger than this are ignored (read as empty).
pub(crate) const MAX_BODY: usize = 64 * 1024;
/// At most this many registered clients.
const MAX_CLIENTS: usize = 1000;
/// At most this many live codes, access tokens and refresh tokens (each).
const MAX_TOKENS: usize = 10_000;
/// How long an authorization code can be redeemed.
const CODE_LIFETIME: Duration = Duration::from_secs(600);

/// How the authorization server behaves. [`OAuthOptions::new`] (and [`Default`]) give the
/// defaults documented on each field.
#[derive(Debug, Clone)]
pub struct OAuthOptions {
    /// Lifetime of access tokens in seconds, as `expires_in` says and `/mcp` enforces. Default
    /// 3600. A test that needs a token to expire calls `RunningServer::expire_access_tokens`
    /// rather than waiting.
    pub expires_in_s: u64,
    /// Whether the `authorization_code` grant also gives a refresh token. Default true.
    pub refresh_tokens: bool,
    /// The scopes in both metadata documents; requested scopes must be among them (or in
    /// `challenge_scope`) unless this is empty. Default `["mcp:read", "mcp:write"]`. A request
    /// without `scope` is granted all of them.
    pub scopes_supported: Vec<String>,
    /// `scope="..."` in the 401 challenge of `/mcp`. Default none.
    pub challenge_scope: Option<String>,
    /// `token_endpoint_auth_methods_supported`; registrations and token requests with another
    /// method are refused. Default `["none", "client_secret_basic"]`.
    pub auth_methods: Vec<String>,
    /// A client known without registration: (client id, secret). It may redirect to any
    /// loopback `http://127.0.0.1:*/` (or `[::1]`, `localhost`) URL and may use
    /// `client_credentials`. An empty secret makes it a public client. Default none.
    pub pre_registered: Option<(String, String)>,
    /// `/authorize` redirects with `error=access_denied` instead of a code. Default false.
    pub deny: bool,
    /// A scope `tools/call` needs beyond the others (step-up): a token without it gets 403
    /// `insufficient_scope` naming it. It is not in the metadata but may be requested.
    /// Default none.
    pub call_scope: Option<String>,
    /// A scope the authorization server never grants (left out of issued tokens), to see a
    /// client give up on step-up. Default none.
    pub withheld_scope: Option<String>,
    /// `/mcp` refuses every token with 401, even fresh ones (a resource that does not trust
    /// its authorization server). Default false.
    pub reject_tokens: bool,
}

impl Default for OAuthOptions {
    fn default() -> Self {
        Self::new()
    }
}

impl OAuthOptions {
    /// The defaults: tokens for an hour, refresh tokens, scopes `mcp:read mcp:write`, auth
    /// methods `none` and `client_secret_basic`, no pre-registered client, approve.
    pub fn new() -> Self {
        Self {
            expires_in_s: 3600,
            refresh_tokens: true,
            scopes_supported: vec!["mcp:read".to_owned(), "mcp:write".to_owned()],
            challenge_scope: None,
            auth_methods: vec!["none".to_owned(), "client_secret_basic".to_owned()],
            pre_registered: None,
            deny: false,
            call_scope: None,
            withheld_scope: None,
            reject_tokens: false,
        }
    }
}

/// Something the authorization server or the protected resource did, in order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OAuthEvent {
    /// `POST /register` registered a client.
    Registered {
        /// The new client id.
        client_id: String,
    },
    /// `GET /authorize` issued a code (not logged when it denies: that is `Refused`).
    Authorized {
        /// The client.
        client_id: String,
        /// The `scope` parameter as requested, if any.
        scope: Option<String>,
        /// The `resource` parameter (RFC 8707), if any.
        resource: Option<String>,
    },
    /// `POST /token` answered. A refusal is followed by a `Refused` with the reason.
    Token {
        /// The `grant_type` parameter (empty when missing).
        grant_type: String,
        /// The client, once known (authenticated, or at least named).
        client_id: Option<String>,
        /// The `resource` of the token request, or else of its authorization request.
        resource: Option<String>,
        /// Whether tokens were issued.
        ok: bool,
    },
    /// A request was refused: `/register`, `/authorize`, `/token`, or `/mcp` without a valid
    /// token (a 401).
    Refused {
        /// The path.
        path: String,
        /// Why, e.g. `no bearer token`, `expired token`, `invalid_grant: PKCE verification failed`.
        reason: String,
    },
}

/// Every secret value the authorization server issued or accepted, by kind, in the order they
/// changed hands.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OAuthSecrets {
    /// Client secrets: issued at registration, and the pre-registered client's.
    pub client_secrets: Vec<String>,
    /// Authorization codes issued by `/authorize`.
    pub codes: Vec<String>,
    /// PKCE code verifiers that redeemed a code.
    pub code_verifiers: Vec<String>,
    /// Access tokens issued.
    pub access_tokens: Vec<String>,
    /// Refresh tokens issued.
    pub refresh_tokens: Vec<String>,
}

impl OAuthSecrets {
    /// All of them, whatever their kind.
    pub fn all(&self) -> impl Iterator<Item = &str> {
        [&self.client_secrets, &self.codes, &self.code_verifiers, &self.access_tokens, &self.refresh_tokens]
            .into_iter()
            .flatten()
            .map(String::as_str)
    }
}

struct Client {
    /// None for a public client.
    secret: Option<String>,
    redirect_uris: Vec<String>,
    /// The pre-registered client: any loopback redirect URI.
    any_loopback: bool,
}

struct Code {
    client_id: String,
    challenge: String,
    redirect_uri: String,
    /// Whether the authorization request named `redirect_uri` (then the token request must).
    redirect_given: bool,
    scope: Option<String>,
    resource: Option<String>,
    issued: Instant,
}

struct Access {
    expires: Instant,
    /// The granted scopes.
    scope: Option<String>,
}

struct Refresh {
    client_id: String,
    scope: Option<String>,
    resource: Option<String>,
}

#[derive(Default)]
struct AsState {
    clients: HashMap<String, Client>,
    codes: HashMap<String, Code>,
    access: HashMap<String, Access>,
    refresh: HashMap<String, Refresh>,
    log: Vec<OAuthEvent>,
    secrets: OAuthSecrets,
    counter: u64,
}

/// An OAuth error answer: `{"error", "error_description"}`.
struct OAuthError {
    status: StatusCode,
    error: &'static str,
    description: String,
    /// The client tried HTTP Basic: a 401 carries `WWW-Authenticate: Basic`.
    basic: bool,
}

fn bad(error: &'static str, description: impl Into<String>) -> OAuthError {
    OAuthError { status: StatusCode::BAD_REQUEST, error, description: description.into(), basic: false }
}

fn invalid_client(description: impl Into<String>, basic: bool) -> OAuthError {
    OAuthError { status: StatusCode::UNAUTHORIZED, error: "invalid_client", description: description.into(), basic }
}

/// The authorization server of one running fixture.
pub(crate) struct AuthServer {
    options: OAuthOptions,
    /// `http://127.0.0.1:PORT`, the issuer.
    base: String,
    seed: u64,
    state: Mutex<AsState>,
}

impl AuthServer {
    pub(crate) fn new(options: OAuthOptions, base: String) -> Self {
        let mut state = AsState::default();
        if let Some((id, secret)) = &options.pre_registered {
            let secret = Some(secret.clone()).filter(|s| !s.is_empty());
            state.secrets.client_secrets.extend(secret.clone());
            state.clients.insert(id.clone(), Client { secret, redirect_uris: Vec::new(), any_loopback: true });
        }
        let nanos = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or_default();
        let seed = std::collections::hash_map::RandomState::new().hash_one(nanos);
        Self { options, base, seed, state: Mutex::new(state) }
    }

    /// Whether `path` is served here rather than by the MCP endpoint.
    pub(crate) fn is_endpoint(path: &str) -> bool {
        path.starts_with("/.well-known/") || matches!(path, "/register" | "/authorize" | "/token")
    }

    /// Everything logged so far.
    pub(crate) fn log(&self) -> Vec<OAuthEvent> {
        self.lock().log.clone()
    }

    /// Every secret that changed hands so far.
    pub(crate) fn secrets(&self) -> OAuthSecrets {
        self.lock().secrets.clone()
    }

    /// Every access token issued so far is expired from now on (`/mcp` refuses it with
    /// "expired token"); refresh tokens still work.
    pub(crate) fn expire_access_tokens(&self) {
        let now = Instant::now();
        for access in self.lock().access.values_mut() {
            access.expires = access.expires.min(now);
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, AsState> {
        mcp_safety::lock(&self.state)
    }

    fn resource(&self) -> String {
        format!("{}/mcp", self.base)
    }

    fn resource_metadata_url(&self) -> String {
        format!("{}/.well-known/oauth-protected-resource/mcp", self.base)
    }

    fn is_our_resource(&self, r: &str) -> bool {
        r.trim_end_matches('/') == self.resource()
    }

    /// A fresh opaque string: `prefix`, a counter, and 128 bits derived from a random seed.
    fn fresh(&self, st: &mut AsState, prefix: &str) -> String {
        st.counter += 1;
        let digest = Sha256::digest(format!("{}-{}", self.seed, st.counter).as_bytes());
        let random = URL_SAFE_NO_PAD.encode(digest.get(..16).unwrap_or_default());
        format!("{prefix}{}-{random}", st.counter)
    }

    /// The answer to a request for one of the [`AuthServer::is_endpoint`] paths.
    pub(crate) fn serve(
        &self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Response {
        match (method.as_str(), path) {
            ("GET", "/.well-known/oauth-protected-resource/mcp" | "/.well-known/oauth-protected-resource") => {
                json_response(StatusCode::OK, &self.protected_resource_metadata())
            }
            ("GET", "/.well-known/oauth-authorization-server") => json_response(StatusCode::OK, &self.metadata()),
            ("POST", "/register") => match self.register(body) {
                Ok(v) => json_response(StatusCode::CREATED, &v),
                Err(e) => {
                    self.refused("/register", &e);
                    error_response(&e)
                }
            },
            ("GET", "/authorize") => self.authorize(query.unwrap_or_default()),
            ("POST", "/token") => self.token(headers, body),
            (_, "/register" | "/token") => text(StatusCode::METHOD_NOT_ALLOWED, "use POST"),
            (_, "/authorize") => text(StatusCode::METHOD_NOT_ALLOWED, "use GET"),
            _ => text(StatusCode::NOT_FOUND, "not found"),
        }
    }

    fn protected_resource_metadata(&self) -> Value {
        json!({
            "resource": self.resource(),
            "authorization_servers": [self.base],
            "scopes_supported": self.options.scopes_supported,
            "bearer_methods_supported": ["header"],
        })
    }

    fn metadata(&self) -> Value {
        let b = &self.base;
        json!({
            "issuer": b,
            "authorization_endpoint": format!("{b}/authorize"),
            "token_endpoint": format!("{b}/token"),
            "registration_endpoint": format!("{b}/register"),
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": self.options.auth_methods,
            "scopes_supported": self.options.scopes_supported,
            "authorization_response_iss_parameter_supported": true,
        })
    }

    fn refused(&self, path: &str, e: &OAuthError) {
        let reason = format!("{}: {}", e.error, e.description);
        self.lock().log.push(OAuthEvent::Refused { path: path.to_owned(), reason });
    }

    fn supports(&self, method: &str) -> bool {
        self.options.auth_methods.iter().any(|m| m == method)
    }

    /// `POST /register` (RFC 7591).
    fn register(&self, body: &[u8]) -> Result<Value, OAuthError> {
        let Ok(Value::Object(req)) = serde_json::from_slice::<Value>(body) else {
            return Err(bad("invalid_client_metadata", "the body is not a JSON object"));
        };
        let method = match req.get("token_endpoint_auth_method") {
            None => "client_secret_basic", // RFC 7591 §2
            Some(Value::String(m)) => m.as_str(),
            Some(_) => return Err(bad("invalid_client_metadata", "token_endpoint_auth_method is not a string")),
        };
        if !self.supports(method) {
            return Err(bad(
                "invalid_client_metadata",
                format!("token_endpoint_auth_method {method:?} is not supported"),
            ));
        }
        let redirect_uris = match req.get("redirect_uris") {
            None => Vec::new(),
            Some(Value::Array(uris)) => {
                let mut out = Vec::new();
                for uri in uris {
                    let Some(s) = uri.as_str() else {
                        return Err(bad("invalid_redirect_uri", "redirect_uris has a non-string"));
                    };
                    match Url::parse(s) {
                        Ok(u) if u.fragment().is_none() => out.push(s.to_owned()),
                        _ => {
                            return Err(bad(
                                "invalid_redirect_uri",
                                format!("{s:?} is not an absolute URL without a fragment"),
                            ));
                        }
                    }
                }
                out
            }
            Some(_) => return Err(bad("invalid_redirect_uri", "redirect_uris is not an array")),
        };
        let grant_types = match req.get("grant_types") {
            None => vec!["authorization_code".to_owned()],
            Some(Value::Array(g)) => {
                let mut out = Vec::new();
                for v in g {
                    match v.as_str() {
                        Some(s @ ("authorization_code" | "refresh_token" | "client_credentials")) => {
                            out.push(s.to_owned())
                        }
                        _ => return Err(bad("invalid_client_metadata", format!("grant type {v} is not supported"))),
                    }
                }
                out
            }
            Some(_) => return Err(bad("invalid_client_metadata", "grant_types is not an array")),
        };
        if grant_types.iter().any(|g| g == "authorization_code") && redirect_uris.is_empty() {
            return Err(bad("invalid_redirect_uri", "the authorization_code grant needs redirect_uris"));
        }
        let mut st = self.lock();
        if st.clients.len() >= MAX_CLIENTS {
            return Err(bad("invalid_client_metadata", "too many clients registered"));
        }
        let client_id = self.fresh(&mut st, "client-");
        let secret = (method != "none").then(|| self.fresh(&mut st, "secret-"));
        st.secrets.client_secrets.extend(secret.clone());
        st.clients.insert(
            client_id.clone(),
            Client { secret: secret.clone(), redirect_uris: redirect_uris.clone(), any_loopback: false },
        );
        st.log.push(OAuthEvent::Registered { client_id: client_id.clone() });
        drop(st);
        let issued_at = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or_default();
        let mut answer = Map::new();
        answer.insert("client_id".into(), json!(client_id));
        if let Some(secret) = secret {
            answer.insert("client_secret".into(), json!(secret));
            answer.insert("client_secret_expires_at".into(), json!(0));
        }
        answer.insert("client_id_issued_at".into(), json!(issued_at));
        answer.insert("redirect_uris".into(), json!(redirect_uris));
        answer.insert("token_endpoint_auth_method".into(), json!(method));
        answer.insert("grant_types".into(), json!(grant_types));
        answer.insert("response_types".into(), json!(["code"]));
        for echoed in ["client_name", "scope", "client_uri", "software_id", "software_version"] {
            if let Some(v) = req.get(echoed).filter(|v| v.is_string()) {
                answer.insert(echoed.into(), v.clone());
            }
        }
        Ok(Value::Object(answer))
    }

    /// Whether the requested scopes (space-separated) are all known.
    fn check_scope(&self, scope: &str) -> Result<(), OAuthError> {
        if self.options.scopes_supported.is_empty() {
            return Ok(());
        }
        let challenge = self.options.challenge_scope.as_deref().unwrap_or_default();
        let call = self.options.call_scope.as_deref().unwrap_or_default();
        let known = |s: &str| {
            self.options.scopes_supported.iter().any(|k| k == s)
                || challenge.split(' ').any(|k| k == s)
                || call.split(' ').any(|k| k == s)
        };
        match scope.split(' ').filter(|s| !s.is_empty()).find(|s| !known(s)) {
            Some(unknown) => Err(bad("invalid_scope", format!("unknown scope {unknown:?}"))),
            None => Ok(()),
        }
    }

    fn check_resource(&self, resource: Option<&String>) -> Result<(), OAuthError> {
        match resource {
            Some(r) if !self.is_our_resource(r) => {
                Err(bad("invalid_target", format!("resource {r:?} is not {}", self.resource())))
            }
            _ => Ok(()),
        }
    }

    /// `GET /authorize`: approves (or denies) at once and redirects.
    fn authorize(&self, query: &str) -> Response {
        let refuse = |reason: String| {
            self.lock().log.push(OAuthEvent::Refused { path: "/authorize".to_owned(), reason: reason.clone() });
            text(StatusCode::BAD_REQUEST, &reason)
        };
        let q = match params(query.as_bytes()) {
            Ok(q) => q,
            Err(e) => return refuse(e),
        };
        let Some(client_id) = q.get("client_id") else { return refuse("client_id is missing".to_owned()) };
        // Until the redirect URI is known good, errors are shown here, not redirected.
        let redirect = {
            let st = self.lock();
            let Some(client) = st.clients.get(client_id) else {
                drop(st);
                return refuse(format!("unknown client {client_id:?}"));
            };
            match q.get("redirect_uri") {
                Some(r) if redirect_allowed(client, r) => Ok((r.clone(), true)),
                Some(r) => Err(format!("redirect_uri {r:?} is not registered for this client")),
                None => match client.redirect_uris.as_slice() {
                    [only] => Ok((only.clone(), false)),
                    _ => Err("redirect_uri is missing".to_owned()),
                },
            }
        };
        let (redirect_uri, redirect_given) = match redirect {
            Ok(r) => r,
            Err(e) => return refuse(e),
        };
        let state = q.get("state");
        let go = |pairs: &[(&str, &str)]| {
            let mut url = match Url::parse(&redirect_uri) {
                Ok(u) => u,
                Err(_) => return text(StatusCode::BAD_REQUEST, "bad redirect_uri"),
            };
            {
                let mut query = url.query_pairs_mut();
                for (k, v) in pairs {
                    query.append_pair(k, v);
                }
                if let Some(s) = state {
                    query.append_pair("state", s);
                }
                query.append_pair("iss", &self.base);
            }
            let mut r = Response::new(Body::empty());
            *r.status_mut() = StatusCode::FOUND;
            if let Ok(v) = HeaderValue::from_str(url.as_str()) {
                r.headers_mut().insert(header::LOCATION, v);
            }
            r
        };
        let fail = |e: OAuthError| {
            self.refused("/authorize", &e);
            go(&[("error", e.error), ("error_description", &e.description)])
        };
        if q.get("response_type").map(String::as_str) != Some("code") {
            return fail(bad("unsupported_response_type", "response_type must be code"));
        }
        let Some(challenge) = q.get("code_challenge").filter(|c| !c.is_empty()) else {
            return fail(bad("invalid_request", "code_challenge is required (PKCE)"));
        };
        if q.get("code_challenge_method").map(String::as_str) != Some("S256") {
            return fail(bad("invalid_request", "code_challenge_method must be S256"));
        }
        if let Err(e) = q.get("scope").map_or(Ok(()), |s| self.check_scope(s)) {
            return fail(e);
        }
        if let Err(e) = self.check_resource(q.get("resource")) {
            return fail(e);
        }
        if self.options.deny {
            return fail(bad("access_denied", "the user denied the request"));
        }
        let mut st = self.lock();
        let now = Instant::now();
        st.codes.retain(|_, c| now.duration_since(c.issued) < CODE_LIFETIME);
        if st.codes.len() >= MAX_TOKENS {
            drop(st);
            return fail(bad("temporarily_unavailable", "too many outstanding codes"));
        }
        let code = self.fresh(&mut st, "code-");
        st.secrets.codes.push(code.clone());
        st.codes.insert(
            code.clone(),
            Code {
                client_id: client_id.clone(),
                challenge: challenge.clone(),
                redirect_uri: redirect_uri.clone(),
                redirect_given,
                scope: q.get("scope").cloned(),
                resource: q.get("resource").cloned(),
                issued: now,
            },
        );
        st.log.push(OAuthEvent::Authorized {
            client_id: client_id.clone(),
            scope: q.get("scope").cloned(),
            resource: q.get("resource").cloned(),
        });
        drop(st);
        go(&[("code", &code)])
    }

    /// `POST /token`.
    fn token(&self, headers: &HeaderMap, body: &[u8]) -> Response {
        let mut grant_type = String::new();
        let mut client_id = None;
        let mut resource = None;
        let result = self.token_inner(headers, body, &mut grant_type, &mut client_id, &mut resource);
        let ok = result.is_ok();
        self.lock().log.push(OAuthEvent::Token { grant_type, client_id, resource, ok });
        match result {
            Ok(v) => json_response(StatusCode::OK, &v),
            Err(e) => {
                self.refused("/token", &e);
                error_response(&e)
            }
        }
    }

    fn token_inner(
        &self,
        headers: &HeaderMap,
        body: &[u8],
        grant_type: &mut String,
        logged_client: &mut Option<String>,
        logged_resource: &mut Option<String>,
    ) -> Result<Value, OAuthError> {
        let p = params(body).map_err(|e| bad("invalid_request", e))?;
        *grant_type = p.get("grant_type").cloned().unwrap_or_default();
        *logged_client = p.get("client_id").cloned();
        *logged_resource = p.get("resource").cloned();
        if !matches!(grant_type.as_str(), "authorization_code" | "refresh_token" | "client_credentials") {
            return Err(if grant_type.is_empty() {
                bad("invalid_request", "grant_type is missing")
            } else {
                bad("unsupported_grant_type", format!("grant type {grant_type:?} is not supported"))
            });
        }
        let (client_id, confidential) = self.authenticate(headers, &p, logged_client)?;
        self.check_resource(p.get("resource"))?;
        let get = |name: &str| p.get(name).ok_or_else(|| bad("invalid_request", format!("{name} is missing")));
        match grant_type.as_str() {
            "authorization_code" => {
                let code = get("code")?;
                let verifier = get("code_verifier")?;
                let mut st = self.lock();
                let Some(grant) = st.codes.get(code) else {
                    return Err(bad("invalid_grant", "unknown or already used code"));
                };
                if grant.issued.elapsed() >= CODE_LIFETIME {
                    return Err(bad("invalid_grant", "the code has expired"));
                }
                if grant.client_id != client_id {
                    return Err(bad("invalid_grant", "the code was issued to another client"));
                }
                match p.get("redirect_uri") {
                    Some(r) if *r != grant.redirect_uri => {
                        return Err(bad("invalid_grant", "redirect_uri differs from the authorization request's"));
                    }
                    None if grant.redirect_given => {
                        return Err(bad(
                            "invalid_request",
                            "redirect_uri is missing (the authorization request had one)",
                        ));
                    }
                    _ => {}
                }
                if URL_SAFE_NO_PAD.encode(Sha256::digest(verifier.as_bytes())) != grant.challenge {
                    return Err(bad("invalid_grant", "PKCE verification failed"));
                }
                let scope = grant.scope.clone();
                let resource = p.get("resource").cloned().or_else(|| grant.resource.clone());
                *logged_resource = resource.clone();
                st.codes.remove(code);
                st.secrets.code_verifiers.push(verifier.clone());
                self.issue(&mut st, client_id, scope, resource, self.options.refresh_tokens)
            }
            "refresh_token" => {
                let token = get("refresh_token")?;
                let mut st = self.lock();
                let Some(old) = st.refresh.get(token) else {
                    return Err(bad("invalid_grant", "unknown or already used refresh token"));
                };
                if old.client_id != client_id {
                    return Err(bad("invalid_grant", "the refresh token was issued to another client"));
                }
                let scope = match p.get("scope") {
                    Some(asked) => {
                        let had = old.scope.as_deref().unwrap_or_default();
                        if let Some(extra) =
                            asked.split(' ').filter(|s| !s.is_empty()).find(|s| !had.split(' ').any(|h| h == *s))
                        {
                            return Err(bad("invalid_scope", format!("scope {extra:?} was not granted")));
                        }
                        Some(asked.clone())
                    }
                    None => old.scope.clone(),
                };
                let resource = p.get("resource").cloned().or_else(|| old.resource.clone());
                *logged_resource = resource.clone();
                st.refresh.remove(token);
                self.issue(&mut st, client_id, scope, resource, true)
            }
            _ => {
                if !confidential {
                    return Err(bad("unauthorized_client", "client_credentials needs a confidential client"));
                }
                if let Some(s) = p.get("scope") {
                    self.check_scope(s)?;
                }
                let mut st = self.lock();
                self.issue(&mut st, client_id, p.get("scope").cloned(), p.get("resource").cloned(), false)
            }
        }
    }

    /// Client authentication at the token endpoint: the client id, and whether it has a secret.
    fn authenticate(
        &self,
        headers: &HeaderMap,
        p: &HashMap<String, String>,
        logged_client: &mut Option<String>,
    ) -> Result<(String, bool), OAuthError> {
        let authorization = headers.get(header::AUTHORIZATION).map(|v| v.to_str().unwrap_or_default());
        let basic = match authorization {
            None => None,
            Some(a) => {
                Some(basic_credentials(a).ok_or_else(|| invalid_client("unreadable Authorization header", true))?)
            }
        };
        let (id, secret, method) = match (basic, p.get("client_secret")) {
            (Some(_), Some(_)) => return Err(bad("invalid_request", "two client authentication methods at once")),
            (Some((id, secret)), None) => {
                if p.get("client_id").is_some_and(|b| *b != id) {
                    return Err(bad("invalid_request", "client_id differs from the Basic credentials"));
                }
                (id, Some(secret), "client_secret_basic")
            }
            (None, Some(secret)) => {
                let id = p.get("client_id").ok_or_else(|| bad("invalid_request", "client_id is missing"))?;
                (id.clone(), Some(secret.clone()), "client_secret_post")
            }
            (None, None) => {
                let id = p.get("client_id").ok_or_else(|| invalid_client("no client authentication", false))?;
                (id.clone(), None, "none")
            }
        };
        let is_basic = method == "client_secret_basic";
        *logged_client = Some(id.clone());
        let st = self.lock();
        let Some(client) = st.clients.get(&id) else {
            return Err(invalid_client(format!("unknown client {id:?}"), is_basic));
        };
        match (&client.secret, secret) {
            (Some(expected), Some(given)) => {
                if *expected != given {
                    return Err(invalid_client("wrong client secret", is_basic));
                }
            }
            (Some(_), None) => return Err(invalid_client("this client must authenticate with its secret", false)),
            (None, Some(given)) if !given.is_empty() => {
                return Err(invalid_client("this is a public client: it has no secret", is_basic));
            }
            (None, _) => {}
        }
        let used = if client.secret.is_some() { method } else { "none" };
        if !self.supports(used) {
            return Err(invalid_client(format!("client authentication {used} is not supported"), is_basic));
        }
        Ok((id, client.secret.is_some()))
    }

    /// Issues an access token (and a refresh token) and says so in the token response.
    fn issue(
        &self,
        st: &mut AsState,
        client_id: String,
        scope: Option<String>,
        resource: Option<String>,
        with_refresh: bool,
    ) -> Result<Value, OAuthError> {
        let now = Instant::now();
        st.access.retain(|_, a| a.expires > now);
        if st.access.len() >= MAX_TOKENS || st.refresh.len() >= MAX_TOKENS {
            return Err(bad("temporarily_unavailable", "too many live tokens"));
        }
        let scope = scope.or_else(|| Some(self.options.scopes_supported.join(" ")).filter(|s| !s.is_empty()));
        let scope = match (&self.options.withheld_scope, scope) {
            (Some(withheld), Some(s)) => {
                Some(s.split(' ').filter(|x| x != withheld).collect::<Vec<_>>().join(" ")).filter(|s| !s.is_empty())
            }
            (_, scope) => scope,
        };
        let access = self.fresh(st, "access-");
        let expires = now.checked_add(Duration::from_secs(self.options.expires_in_s)).unwrap_or(now);
        st.access.insert(access.clone(), Access { expires, scope: scope.clone() });
        st.secrets.access_tokens.push(access.clone());
        let mut answer = json!({
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": self.options.expires_in_s,
        });
        if with_refresh {
            let refresh = self.fresh(st, "refresh-");
            st.refresh.insert(refresh.clone(), Refresh { client_id, scope: scope.clone(), resource });
            st.secrets.refresh_tokens.push(refresh.clone());
            answer["refresh_token"] = json!(refresh);
        }
        if let Some(s) = scope {
            answer["scope"] = json!(s);
        }
        Ok(answer)
    }

    /// `None` when `authorization` carries a valid access token with the scope `method` needs;
    /// otherwise the 401 (or, lacking `call_scope` for `tools/call`, the 403) to answer.
    pub(crate) fn refuse_bearer(&self, authorization: Option<&str>, method: Option<&str>) -> Option<Response> {
        let token = authorization.and_then(|a| {
            let (scheme, token) = a.split_once(' ')?;
            scheme.eq_ignore_ascii_case("bearer").then(|| token.trim())
        });
        let reason = {
            let mut st = self.lock();
            let reason = match token {
                None if authorization.is_some() => "not a bearer token",
                None => "no bearer token",
                Some(t) => match st.access.get(t) {
                    None => "unknown token",
                    Some(a) if Instant::now() >= a.expires => "expired token",
                    Some(_) if self.options.reject_tokens => "token rejected",
                    Some(a) => {
                        let needed = self.options.call_scope.as_deref().filter(|_| method == Some("tools/call"));
                        let granted = a.scope.as_deref().unwrap_or_default();
                        match needed {
                            Some(n) if !n.split(' ').all(|x| granted.split(' ').any(|g| g == x)) => {
                                st.log.push(OAuthEvent::Refused {
                                    path: "/mcp".to_owned(),
                                    reason: "insufficient scope".to_owned(),
                                });
                                drop(st);
                                return Some(self.insufficient_scope(n));
                            }
                            _ => return None,
                        }
                    }
                },
            };
            st.log.push(OAuthEvent::Refused { path: "/mcp".to_owned(), reason: reason.to_owned() });
            reason
        };
        let mut challenge =
            format!("Bearer error=\"invalid_token\", resource_metadata=\"{}\"", self.resource_metadata_url());
        if let Some(scope) = &self.options.challenge_scope {
            challenge.push_str(&format!(", scope=\"{}\"", scope.replace(['"', '\\'], "")));
        }
        let mut r =
            json_response(StatusCode::UNAUTHORIZED, &json!({"error": "invalid_token", "error_description": reason}));
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        Some(r)
    }
}

impl AuthServer {
    /// 403 `insufficient_scope` asking for `scope` (RFC 6750 §3.1).
    fn insufficient_scope(&self, scope: &str) -> Response {
        let challenge = format!(
            "Bearer error=\"insufficient_scope\", scope=\"{}\", resource_metadata=\"{}\"",
            scope.replace(['"', '\\'], ""),
            self.resource_metadata_url()
        );
        let mut r = json_response(
            StatusCode::FORBIDDEN,
            &json!({"error": "insufficient_scope", "error_description": format!("needs scope {scope}")}),
        );
        if let Ok(v) = HeaderValue::from_str(&challenge) {
            r.headers_mut().insert(header::WWW_AUTHENTICATE, v);
        }
        r
    }
}

/// Whether `client` may redirect to `uri`: registered exactly, or a registered loopback IP
/// URI with another port (RFC 8252 §7.3), or any loopback URI for the pre-registered client.
fn redirect_allowed(client: &Client, uri: &str) -> bool {
    if client.redirect_uris.iter().any(|r| r == uri) {
        return true;
    }
    let Ok(asked) = Url::parse(uri) else { return false };
    let loopback = asked.scheme() == "http"
        && matches!(asked.host_str(), Some("127.0.0.1" | "[::1]" | "localhost"))
        && asked.fragment().is_none();
    if !loopback {
        return false;
    }
    if client.any_loopback {
        return true;
    }
    client.redirect_uris.iter().filter_map(|r| Url::parse(r).ok()).any(|mut r| {
        matches!(r.host_str(), Some("127.0.0.1" | "[::1]")) && r.set_port(asked.port()).is_ok() && r == asked
    })
}

/// `application/x-www-form-urlencoded` parameters; a parameter given twice is an error
/// (RFC 6749 §3.1), empty values count as absent.
fn params(bytes: &[u8]) -> Result<HashMap<String, String>, String> {
    let mut out = HashMap::new();
    for (k, v) in url::form_urlencoded::parse(bytes) {
        if v.is_empty() {
            continue;
        }
        if out.insert(k.to_string(), v.into_owned()).is_some() {
            return Err(format!("parameter {k:?} is given more than once"));
        }
    }
    Ok(out)
}

/// The client id and secret of an `Authorization: Basic` header (each form-urlencoded,
/// RFC 6749 §2.3.1).
fn basic_credentials(authorization: &str) -> Option<(String, String)> {
    let (scheme, encoded) = authorization.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("basic") {
        return None;
    }
    let decoded = String::from_utf8(STANDARD.decode(encoded.trim()).ok()?).ok()?;
    let (id, secret) = decoded.split_once(':')?;
    Some((form_decode(id), form_decode(secret)))
}

fn form_decode(s: &str) -> String {
    // `parse` decodes `+` and `%XX`; a lone key with no `=` comes back as the key.
    url::form_urlencoded::parse(s.replace('&', "%26").replace('=', "%3D").as_bytes())
        .next()
        .map(|(k, _)| k.into_owned())
        .unwrap_or_default()
}

fn json_response(status: StatusCode, v: &Value) -> Response {
    let mut r = Response::new(Body::from(v.to_string()));
    *r.status_mut() = status;
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

fn error_response(e: &OAuthError) -> Response {
    let mut r = json_response(e.status, &json!({"error": e.error, "error_description": e.description}));
    if e.basic && e.status == StatusCode::UNAUTHORIZED {
        r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Basic realm=\"mcp-fixture\""));
    }
    r
}

fn text(status: StatusCode, text: &str) -> Response {
    let mut r = Response::new(Body::from(text.to_owned()));
    *r.status_mut() = status;
    r
}
