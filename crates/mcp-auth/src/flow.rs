//! The HTTP side of OAuth 2.1 for remote MCP servers, built on the network-free pieces of this
//! crate:
//!
//! - [`discover`]: protected resource metadata (RFC 9728), its `resource` check, then
//!   authorization server metadata (RFC 8414 / OpenID Connect Discovery), with the MCP 2025-03-26
//!   fallback when the server publishes no protected resource metadata.
//! - [`register`]: dynamic client registration (RFC 7591) of a public client.
//! - [`authorization_url`]: the authorization request URL with PKCE S256 and `resource`
//!   (RFC 8707).
//! - [`exchange_code`], [`refresh`], [`client_credentials`]: token requests, with client
//!   authentication `client_secret_basic`, `client_secret_post` or `none`.
//!
//! Every response body is read up to [`MAX_BODY_BYTES`]; larger bodies are refused. Tokens and
//! client secrets never appear in `Debug` output or error messages. No clock is read: token
//! expiry is computed from a `now_ms` the caller passes.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use mcp_safety::text::one_line;
use mcp_safety::{Secret, is_loopback_host};
use serde::{Deserialize, Serialize};
use url::Url;

use crate::discovery::{self, DefaultEndpoints, DiscoveryError};
use crate::pkce::{METHOD_S256, Pkce};
use crate::resource::{ResourceError, canonical_resource, resource_matches};
use crate::store::StoredTokens;
use crate::www_authenticate::BearerChallenge;

/// The largest response body read from a metadata, registration or token endpoint: 1 MiB.
pub const MAX_BODY_BYTES: usize = 1024 * 1024;

/// Client authentication at the token endpoint: HTTP Basic (RFC 6749 §2.3.1).
pub const AUTH_CLIENT_SECRET_BASIC: &str = "client_secret_basic";
/// Client authentication at the token endpoint: credentials in the form body.
pub const AUTH_CLIENT_SECRET_POST: &str = "client_secret_post";
/// No client authentication: a public client sends only its `client_id`.
pub const AUTH_NONE: &str = "none";

/// What went wrong in an HTTP flow.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FlowError {
    /// A URL cannot be used for discovery.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The server URL cannot identify a protected resource.
    #[error(transparent)]
    Resource(#[from] ResourceError),
    /// The request could not be sent or its response not read.
    #[error("request to {url} failed: {source}")]
    Http {
        /// The requested URL.
        url: String,
        /// The transport error.
        #[source]
        source: reqwest::Error,
    },
    /// The server answered with an unexpected HTTP status.
    #[error("{url} answered HTTP {status}")]
    Status {
        /// The requested URL.
        url: String,
        /// The HTTP status code.
        status: u16,
    },
    /// The response body exceeds [`MAX_BODY_BYTES`].
    #[error("response body of {url} exceeds {limit} bytes")]
    BodyTooLarge {
        /// The requested URL.
        url: String,
        /// The limit in bytes.
        limit: usize,
    },
    /// The response body is not the expected JSON document.
    #[error("invalid JSON from {url}: {source}")]
    InvalidJson {
        /// The requested URL.
        url: String,
        /// The parse error.
        #[source]
        source: serde_json::Error,
    },
    /// A metadata document lacks a required field or has an unusable one.
    #[error("metadata from {url}: field `{field}` is missing or not an http(s) URL")]
    InvalidMetadata {
        /// The metadata URL.
        url: String,
        /// The field name.
        field: &'static str,
    },
    /// The protected resource metadata speaks for another resource than the server reached.
    #[error("protected resource metadata is for resource {resource:?}, not for server {server}")]
    ResourceMismatch {
        /// The `resource` of the metadata document.
        resource: String,
        /// The MCP server URL.
        server: String,
    },
    /// Authorization server metadata names another issuer than the one it was fetched for.
    #[error("authorization server metadata from {url} names issuer {found:?}, expected {expected:?}")]
    IssuerMismatch {
        /// The metadata URL.
        url: String,
        /// The issuer from the protected resource metadata.
        expected: String,
        /// The issuer in the authorization server metadata.
        found: String,
    },
    /// No authorization server metadata was found at any well-known location.
    #[error("no authorization server metadata found for issuer {issuer}")]
    NoAuthorizationServerMetadata {
        /// The issuer.
        issuer: String,
    },
    /// The authorization server offers no registration endpoint.
    #[error("the authorization server has no registration endpoint")]
    NoRegistrationEndpoint,
    /// The authorization server's metadata does not list PKCE S256 (an empty `supported`
    /// means it lists no methods at all).
    #[error("the authorization server does not support PKCE S256 (supports {supported:?})")]
    PkceS256Unsupported {
        /// The methods it lists.
        supported: Vec<String>,
    },
    /// An OAuth error response (RFC 6749 §5.2, RFC 7591 §3.2.2).
    #[error("{endpoint} returned OAuth error {error:?}{}", description.as_deref().map(|d| format!(": {d}")).unwrap_or_default())]
    OAuth {
        /// The endpoint URL.
        endpoint: String,
        /// The `error` code.
        error: String,
        /// The `error_description`, if any.
        description: Option<String>,
    },
    /// The token response's `token_type` is not `Bearer`.
    #[error("token_type {token_type:?} is not Bearer")]
    NotBearer {
        /// The `token_type` received.
        token_type: String,
    },
    /// The access token cannot be sent: empty, or with characters an HTTP header cannot hold.
    #[error(
        "the token endpoint {url} issued an access token that cannot be sent in an HTTP header (empty, or with control characters)"
    )]
    UnusableToken {
        /// The token endpoint.
        url: String,
    },
    /// The client's token endpoint authentication method is not supported here.
    #[error("unsupported token endpoint auth method {method:?}")]
    UnsupportedAuthMethod {
        /// The method.
        method: String,
    },
    /// The auth method needs a client secret and the registration has none.
    #[error("token endpoint auth method {method:?} needs a client secret")]
    MissingClientSecret {
        /// The method.
        method: String,
    },
    /// A private key for signing JWTs cannot be read or is not of the expected kind.
    #[error("invalid private key: {reason}")]
    InvalidKey {
        /// What is wrong with it.
        reason: String,
    },
    /// Signing a JWT failed.
    #[error("signing a JWT failed")]
    SigningFailed,
    /// A token exchange (RFC 8693) issued another token type than the one requested.
    #[error("token exchange at {endpoint} issued token type {found:?}, expected {expected:?}")]
    UnexpectedIssuedTokenType {
        /// The endpoint URL.
        endpoint: String,
        /// The requested token type.
        expected: String,
        /// The `issued_token_type` received.
        found: String,
    },
    /// An authorization server endpoint is plain `http` to another host than loopback.
    #[error("{field} {url} is not https: authorization endpoints must use https (plain http only on loopback)")]
    InsecureEndpoint {
        /// The URL.
        url: String,
        /// Which endpoint.
        field: &'static str,
    },
}

/// Protected resource metadata (RFC 9728 §2). Unknown fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProtectedResourceMetadata {
    /// The protected resource's identifier.
    pub resource: String,
    /// Issuer identifiers of authorization servers for this resource.
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    /// Scopes used at this resource.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// How bearer tokens may be presented.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_methods_supported: Option<Vec<String>>,
    /// Human-readable name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resource_name: Option<String>,
}

/// Authorization server metadata (RFC 8414 §2, also read from OpenID Connect Discovery).
/// Unknown fields are ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AuthorizationServerMetadata {
    /// The issuer identifier.
    #[serde(default)]
    pub issuer: String,
    /// The authorization endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub authorization_endpoint: Option<String>,
    /// The token endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint: Option<String>,
    /// The dynamic client registration endpoint.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registration_endpoint: Option<String>,
    /// Supported scopes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scopes_supported: Option<Vec<String>>,
    /// Supported response types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response_types_supported: Option<Vec<String>>,
    /// Supported grant types.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant_types_supported: Option<Vec<String>>,
    /// Supported token endpoint client authentication methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// Supported PKCE code challenge methods.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Whether client ID metadata documents are accepted as `client_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_id_metadata_document_supported: Option<bool>,
}

/// The outcome of [`discover`]: where to authorize, get tokens and register.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The canonical resource URI of the MCP server, for the `resource` parameter.
    pub resource: String,
    /// The protected resource metadata, absent on the 2025-03-26 fallback.
    pub resource_metadata: Option<ProtectedResourceMetadata>,
    /// The authorization server metadata, absent when default endpoints are used.
    pub authorization_server_metadata: Option<AuthorizationServerMetadata>,
    /// The authorization server's issuer identifier (the server's origin when default endpoints
    /// are used).
    pub issuer: String,
    /// The authorization endpoint.
    pub authorization_endpoint: Url,
    /// The token endpoint.
    pub token_endpoint: Url,
    /// The registration endpoint, if any.
    pub registration_endpoint: Option<Url>,
    /// Scopes the authorization server lists.
    pub scopes_supported: Option<Vec<String>>,
    /// Scopes the protected resource metadata lists.
    pub resource_scopes_supported: Option<Vec<String>>,
    /// Token endpoint client authentication methods the authorization server lists.
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    /// PKCE methods the authorization server lists.
    pub code_challenge_methods_supported: Option<Vec<String>>,
    /// Whether the authorization server accepts client ID metadata documents.
    pub client_id_metadata_document_supported: Option<bool>,
}

/// A registered client (the secret is a [`Secret`]: `Debug` never shows it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientRegistration {
    /// The client identifier.
    pub client_id: String,
    /// The client secret, for confidential clients.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<Secret>,
    /// How the client authenticates at the token endpoint: [`AUTH_NONE`],
    /// [`AUTH_CLIENT_SECRET_BASIC`] or [`AUTH_CLIENT_SECRET_POST`].
    pub token_endpoint_auth_method: String,
}

/// A successful token response (RFC 6749 §5.1); the tokens are [`Secret`]s.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenResponse {
    /// The access token.
    pub access_token: Secret,
    /// The token type, always `Bearer` (case-insensitively) here.
    pub token_type: String,
    /// Lifetime in seconds, if given.
    pub expires_in: Option<u64>,
    /// The refresh token, if issued.
    pub refresh_token: Option<Secret>,
    /// The granted scope, if given.
    pub scope: Option<String>,
}

impl TokenResponse {
    /// The tokens to store, with `expires_at_ms = now_ms + expires_in` (`now_ms` in
    /// milliseconds since the Unix epoch, when the response arrived).
    ///
    /// A refresh response may omit `refresh_token`; the caller then keeps the previous one.
    pub fn to_stored(&self, now_ms: u64) -> StoredTokens {
        StoredTokens {
            access_token: self.access_token.clone(),
            refresh_token: self.refresh_token.clone(),
            expires_at_ms: self.expires_in.map(|s| now_ms.saturating_add(s.saturating_mul(1000))),
            scope: self.scope.clone(),
            client: None,
            wanted_scope: None,
        }
    }
}

/// A fetched response: status and a bounded body.
pub(crate) struct Fetched {
    pub(crate) status: u16,
    pub(crate) body: Vec<u8>,
}

pub(crate) async fn read_bounded(url: &str, mut resp: reqwest::Response) -> Result<Fetched, FlowError> {
    let status = resp.status().as_u16();
    if resp.content_length().is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(FlowError::BodyTooLarge { url: url.to_owned(), limit: MAX_BODY_BYTES });
    }
    let mut body = Vec::new();
    while let Some(chunk) = resp.chunk().await.map_err(|source| FlowError::Http { url: url.to_owned(), source })? {
        if body.len() + chunk.len() > MAX_BODY_BYTES {
            return Err(FlowError::BodyTooLarge { url: url.to_owned(), limit: MAX_BODY_BYTES });
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Fetched { status, body })
}

async fn get_json(client: &reqwest::Client, url: &Url) -> Result<Fetched, FlowError> {
    let resp = client
        .get(url.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .send()
        .await
        .map_err(|source| FlowError::Http { url: url.to_string(), source })?;
    read_bounded(url.as_str(), resp).await
}

/// Fetches the first usable JSON document among `urls`: a 200 whose body parses as `T`. A 4xx or
/// an unparsable 200 moves on to the next URL; a 5xx or transport error stops.
async fn first_document<T: serde::de::DeserializeOwned>(
    client: &reqwest::Client,
    urls: &[Url],
) -> Result<Option<(Url, T)>, FlowError> {
    for url in urls {
        let fetched = get_json(client, url).await?;
        match fetched.status {
            200 => {
                if let Ok(doc) = serde_json::from_slice::<T>(&fetched.body) {
                    return Ok(Some((url.clone(), doc)));
                }
            }
            400..=499 => {}
            status => return Err(FlowError::Status { url: url.to_string(), status }),
        }
    }
    Ok(None)
}

fn http_url(s: Option<&str>, meta_url: &Url, field: &'static str) -> Result<Url, FlowError> {
    let url = s
        .and_then(|s| Url::parse(s).ok())
        .filter(|u| matches!(u.scheme(), "http" | "https") && u.has_host())
        .ok_or_else(|| FlowError::InvalidMetadata { url: meta_url.to_string(), field })?;
    if !is_secure_endpoint(&url) {
        return Err(FlowError::InsecureEndpoint { url: url.to_string(), field });
    }
    Ok(url)
}

/// Whether codes, tokens and secrets may be sent to `url`: `https`, or plain `http` to a
/// loopback host (which never leaves the machine). MCP requires HTTPS for every authorization
/// server endpoint.
pub fn is_secure_endpoint(url: &Url) -> bool {
    match url.scheme() {
        "https" => true,
        "http" => url.host_str().is_some_and(is_loopback_host),
        _ => false,
    }
}

/// The longest `error_description` kept.
const MAX_DESCRIPTION_CHARS: usize = 300;

fn trim_slash(s: &str) -> &str {
    s.trim_end_matches('/')
}

/// Discovers the authorization server of the MCP server at `server_url`.
///
/// 1. Protected resource metadata is fetched from
///    [`discovery::protected_resource_metadata_urls`] in order (the challenge's
///    `resource_metadata` first, if it parses as a URL); the first 200 with valid JSON wins,
///    4xx responses move on.
/// 2. Its `resource` must identify `server_url` ([`resource_matches`]), otherwise
///    [`FlowError::ResourceMismatch`].
/// 3. The first of its `authorization_servers` is the issuer; its metadata is fetched from
///    [`discovery::authorization_server_metadata_urls`] in order and its `issuer` must equal
///    the issuer (trailing slashes ignored).
///
/// With no protected resource metadata at all, the MCP 2025-03-26 fallback applies: the metadata
/// at [`DefaultEndpoints::legacy_metadata_url`], or else [`DefaultEndpoints::for_server`].
pub async fn discover(
    client: &reqwest::Client,
    server_url: &Url,
    challenge: Option<&BearerChallenge>,
) -> Result<Discovered, FlowError> {
    let resource = canonical_resource(server_url)?;
    let hint = challenge.and_then(|c| c.resource_metadata.as_deref()).and_then(|s| Url::parse(s).ok());
    let prm_urls = discovery::protected_resource_metadata_urls(server_url, hint.as_ref())?;

    let Some((prm_url, prm)) = first_document::<ProtectedResourceMetadata>(client, &prm_urls).await? else {
        return legacy(client, server_url, resource).await;
    };
    if !resource_matches(&prm.resource, server_url) {
        return Err(FlowError::ResourceMismatch { resource: prm.resource, server: server_url.to_string() });
    }
    let issuer_str = prm
        .authorization_servers
        .first()
        .ok_or(FlowError::InvalidMetadata { url: prm_url.to_string(), field: "authorization_servers" })?;
    let issuer = http_url(Some(issuer_str), &prm_url, "authorization_servers")?;
    let as_urls = discovery::authorization_server_metadata_urls(&issuer)?;
    let Some((as_url, asm)) = first_document::<AuthorizationServerMetadata>(client, &as_urls).await? else {
        return Err(FlowError::NoAuthorizationServerMetadata { issuer: issuer_str.clone() });
    };
    if trim_slash(&asm.issuer) != trim_slash(issuer_str) {
        return Err(FlowError::IssuerMismatch {
            url: as_url.to_string(),
            expected: issuer_str.clone(),
            found: asm.issuer,
        });
    }
    from_as_metadata(resource, Some(prm), &as_url, asm)
}

fn from_as_metadata(
    resource: String,
    prm: Option<ProtectedResourceMetadata>,
    as_url: &Url,
    asm: AuthorizationServerMetadata,
) -> Result<Discovered, FlowError> {
    let authorization_endpoint = http_url(asm.authorization_endpoint.as_deref(), as_url, "authorization_endpoint")?;
    let token_endpoint = http_url(asm.token_endpoint.as_deref(), as_url, "token_endpoint")?;
    let registration_endpoint = match asm.registration_endpoint.as_deref() {
        Some(s) => Some(http_url(Some(s), as_url, "registration_endpoint")?),
        None => None,
    };
    Ok(Discovered {
        resource,
        resource_scopes_supported: prm.as_ref().and_then(|p| p.scopes_supported.clone()),
        resource_metadata: prm,
        issuer: asm.issuer.clone(),
        authorization_endpoint,
        token_endpoint,
        registration_endpoint,
        scopes_supported: asm.scopes_supported.clone(),
        token_endpoint_auth_methods_supported: asm.token_endpoint_auth_methods_supported.clone(),
        code_challenge_methods_supported: asm.code_challenge_methods_supported.clone(),
        client_id_metadata_document_supported: asm.client_id_metadata_document_supported,
        authorization_server_metadata: Some(asm),
    })
}

async fn legacy(client: &reqwest::Client, server_url: &Url, resource: String) -> Result<Discovered, FlowError> {
    // The 2025-03-26 fallback puts the endpoints on the server's own origin.
    if !is_secure_endpoint(server_url) {
        return Err(FlowError::InsecureEndpoint { url: server_url.to_string(), field: "server url" });
    }
    let meta_url = DefaultEndpoints::legacy_metadata_url(server_url)?;
    if let Some((as_url, mut asm)) =
        first_document::<AuthorizationServerMetadata>(client, std::slice::from_ref(&meta_url)).await?
    {
        // The issuer is the origin the document came from, whatever the document says: the
        // server wrote it, and a configured issuer pin compared with a name the server chose
        // would pin nothing (the client's secret would go to any token endpoint it names).
        let origin = server_url.origin().ascii_serialization();
        if trim_slash(&asm.issuer) != origin {
            tracing::debug!(claimed = %mcp_safety::text::one_line(&asm.issuer, 200), %origin, "legacy authorization server metadata names another issuer; its origin is the issuer");
        }
        asm.issuer = origin;
        return from_as_metadata(resource, None, &as_url, asm);
    }
    let d = DefaultEndpoints::for_server(server_url)?;
    Ok(Discovered {
        resource,
        resource_metadata: None,
        authorization_server_metadata: None,
        issuer: server_url.origin().ascii_serialization(),
        authorization_endpoint: d.authorization_endpoint,
        token_endpoint: d.token_endpoint,
        registration_endpoint: Some(d.registration_endpoint),
        scopes_supported: None,
        resource_scopes_supported: None,
        token_endpoint_auth_methods_supported: None,
        code_challenge_methods_supported: None,
        client_id_metadata_document_supported: None,
    })
}

#[derive(Deserialize)]
struct OAuthErrorBody {
    error: String,
    #[serde(default)]
    error_description: Option<String>,
}

pub(crate) fn oauth_error(endpoint: &Url, body: &[u8]) -> Option<FlowError> {
    let e: OAuthErrorBody = serde_json::from_slice(body).ok()?;
    Some(FlowError::OAuth {
        endpoint: endpoint.to_string(),
        error: one_line(&e.error, 100),
        description: e.error_description.map(|d| one_line(&d, MAX_DESCRIPTION_CHARS)),
    })
}

#[derive(Serialize)]
struct RegistrationRequest<'a> {
    redirect_uris: [&'a str; 1],
    client_name: &'a str,
    grant_types: [&'a str; 2],
    response_types: [&'a str; 1],
    token_endpoint_auth_method: &'a str,
}

#[derive(Deserialize)]
struct RegistrationResponse {
    client_id: String,
    #[serde(default)]
    client_secret: Option<String>,
    #[serde(default)]
    token_endpoint_auth_method: Option<String>,
}

/// The client authentication to register with: `none` (a public client, which is what a CLI
/// is) unless the authorization server advertises methods without `none`; then the one it
/// advertises of basic and post, basic first.
fn registration_auth_method(discovered: &Discovered) -> &'static str {
    let Some(methods) = &discovered.token_endpoint_auth_methods_supported else { return AUTH_NONE };
    let has = |m: &str| methods.iter().any(|x| x == m);
    if methods.is_empty() || has(AUTH_NONE) {
        AUTH_NONE
    } else if has(AUTH_CLIENT_SECRET_BASIC) {
        AUTH_CLIENT_SECRET_BASIC
    } else if has(AUTH_CLIENT_SECRET_POST) {
        AUTH_CLIENT_SECRET_POST
    } else {
        AUTH_NONE
    }
}

/// Registers a public client (RFC 7591): `redirect_uris` = `[redirect_uri]`, `grant_types`
/// `authorization_code` and `refresh_token`, `response_types` `code`,
/// `token_endpoint_auth_method` `none`.
///
/// The returned auth method is the one the server registered; if it names none, `none` is
/// assumed without a secret and `client_secret_basic` (RFC 7591 §2 default) with one.
pub async fn register(
    client: &reqwest::Client,
    discovered: &Discovered,
    redirect_uri: &str,
    client_name: &str,
) -> Result<ClientRegistration, FlowError> {
    let endpoint = discovered.registration_endpoint.as_ref().ok_or(FlowError::NoRegistrationEndpoint)?;
    let req = RegistrationRequest {
        redirect_uris: [redirect_uri],
        client_name,
        grant_types: ["authorization_code", "refresh_token"],
        response_types: ["code"],
        token_endpoint_auth_method: registration_auth_method(discovered),
    };
    let resp = client
        .post(endpoint.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .json(&req)
        .send()
        .await
        .map_err(|source| FlowError::Http { url: endpoint.to_string(), source })?;
    let fetched = read_bounded(endpoint.as_str(), resp).await?;
    if !(200..300).contains(&fetched.status) {
        return Err(oauth_error(endpoint, &fetched.body)
            .unwrap_or(FlowError::Status { url: endpoint.to_string(), status: fetched.status }));
    }
    let r: RegistrationResponse = serde_json::from_slice(&fetched.body)
        .map_err(|source| FlowError::InvalidJson { url: endpoint.to_string(), source })?;
    let method = r
        .token_endpoint_auth_method
        .unwrap_or_else(|| if r.client_secret.is_some() { AUTH_CLIENT_SECRET_BASIC } else { AUTH_NONE }.to_owned());
    Ok(ClientRegistration {
        client_id: r.client_id,
        client_secret: r.client_secret.map(Secret::new),
        token_endpoint_auth_method: method,
    })
}

/// The authorization request URL (RFC 6749 §4.1.1 with PKCE S256 and RFC 8707 `resource`):
/// `response_type=code`, `client_id`, `redirect_uri`, `code_challenge`,
/// `code_challenge_method=S256`, `state`, `scope` when given, `resource`. Query parameters
/// already on the authorization endpoint are kept.
///
/// Refused with [`FlowError::PkceS256Unsupported`] when the authorization server's metadata
/// lacks `S256` in `code_challenge_methods_supported` (or lacks the list).
pub fn authorization_url(
    discovered: &Discovered,
    registration: &ClientRegistration,
    redirect_uri: &str,
    pkce: &Pkce,
    state: &str,
    scopes: Option<&str>,
    resource: &str,
) -> Result<Url, FlowError> {
    // MCP 2025-11-25: a server whose metadata does not list S256 cannot be trusted to
    // enforce PKCE, so the client refuses. Only the 2025-03-26 default endpoints (no metadata
    // at all) are used without the list.
    match &discovered.code_challenge_methods_supported {
        Some(methods) if !methods.iter().any(|m| m == METHOD_S256) => {
            return Err(FlowError::PkceS256Unsupported { supported: methods.clone() });
        }
        None if discovered.authorization_server_metadata.is_some() => {
            return Err(FlowError::PkceS256Unsupported { supported: Vec::new() });
        }
        _ => {}
    }
    let mut url = discovered.authorization_endpoint.clone();
    {
        let mut q = url.query_pairs_mut();
        q.append_pair("response_type", "code")
            .append_pair("client_id", &registration.client_id)
            .append_pair("redirect_uri", redirect_uri)
            .append_pair("code_challenge", pkce.challenge())
            .append_pair("code_challenge_method", METHOD_S256)
            .append_pair("state", state);
        if let Some(s) = scopes.filter(|s| !s.is_empty()) {
            q.append_pair("scope", s);
        }
        q.append_pair("resource", resource);
    }
    Ok(url)
}

pub(crate) fn form_encode(s: &str) -> String {
    url::form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

#[derive(Deserialize)]
#[serde(untagged)]
pub(crate) enum NumOrString {
    Num(serde_json::Number),
    Str(String),
}

#[derive(Deserialize)]
struct RawTokenResponse {
    access_token: String,
    #[serde(default)]
    token_type: Option<String>,
    #[serde(default)]
    expires_in: Option<NumOrString>,
    #[serde(default)]
    refresh_token: Option<String>,
    #[serde(default)]
    scope: Option<String>,
}

/// The token's lifetime in seconds; none for a lifetime of 0 (a token dead on arrival is a
/// server's mistake: taken at its word, each new token was thrown away before it was sent,
/// and the person logged in again and again).
pub(crate) fn expires_in(v: Option<NumOrString>) -> Option<u64> {
    let seconds = match v? {
        NumOrString::Num(n) => {
            n.as_u64().or_else(|| n.as_f64().filter(|f| *f >= 0.0 && f.is_finite()).map(|f| f as u64))
        }
        NumOrString::Str(s) => s.trim().parse().ok(),
    };
    seconds.filter(|s| *s > 0)
}

/// POSTs a form to a token endpoint, with HTTP Basic client authentication (`basic`: client id
/// and secret, each form-encoded as RFC 6749 §2.3.1 says) when given; the body of a 200 answer,
/// or the OAuth error the endpoint gave.
pub(crate) async fn post_form(
    client: &reqwest::Client,
    endpoint: &Url,
    params: Vec<(&str, &str)>,
    basic: Option<(&str, &str)>,
) -> Result<Vec<u8>, FlowError> {
    if !is_secure_endpoint(endpoint) {
        return Err(FlowError::InsecureEndpoint { url: endpoint.to_string(), field: "token endpoint" });
    }
    let body: String = url::form_urlencoded::Serializer::new(String::new()).extend_pairs(params).finish();
    let mut req = client
        .post(endpoint.clone())
        .header(reqwest::header::ACCEPT, "application/json")
        .header(reqwest::header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .body(body);
    if let Some((id, secret)) = basic {
        let creds = format!("{}:{}", form_encode(id), form_encode(secret));
        let mut value = reqwest::header::HeaderValue::from_str(&format!("Basic {}", STANDARD.encode(creds)))
            .map_err(|_| FlowError::UnsupportedAuthMethod { method: AUTH_CLIENT_SECRET_BASIC.to_owned() })?;
        value.set_sensitive(true);
        req = req.header(reqwest::header::AUTHORIZATION, value);
    }
    let resp = req.send().await.map_err(|source| FlowError::Http { url: endpoint.to_string(), source })?;
    let fetched = read_bounded(endpoint.as_str(), resp).await?;
    if let Some(e) = oauth_error(endpoint, &fetched.body) {
        return Err(e);
    }
    if fetched.status != 200 {
        return Err(FlowError::Status { url: endpoint.to_string(), status: fetched.status });
    }
    Ok(fetched.body)
}

/// POSTs `params` to the token endpoint with client authentication and parses the answer.
pub(crate) async fn token_request(
    client: &reqwest::Client,
    discovered: &Discovered,
    registration: &ClientRegistration,
    mut params: Vec<(&str, &str)>,
) -> Result<TokenResponse, FlowError> {
    let endpoint = &discovered.token_endpoint;
    let method = registration.token_endpoint_auth_method.as_str();
    let secret = || {
        registration
            .client_secret
            .as_ref()
            .map(Secret::expose)
            .ok_or_else(|| FlowError::MissingClientSecret { method: method.to_owned() })
    };
    let mut basic = None;
    match method {
        AUTH_NONE => params.push(("client_id", &registration.client_id)),
        AUTH_CLIENT_SECRET_POST => {
            params.push(("client_id", &registration.client_id));
            params.push(("client_secret", secret()?));
        }
        AUTH_CLIENT_SECRET_BASIC => basic = Some((registration.client_id.as_str(), secret()?)),
        other => return Err(FlowError::UnsupportedAuthMethod { method: other.to_owned() }),
    }
    let body = post_form(client, endpoint, params, basic).await?;
    let raw: RawTokenResponse =
        serde_json::from_slice(&body).map_err(|source| FlowError::InvalidJson { url: endpoint.to_string(), source })?;
    let token_type = raw.token_type.unwrap_or_default();
    if !token_type.eq_ignore_ascii_case("bearer") {
        return Err(FlowError::NotBearer { token_type });
    }
    // Refused here, not kept: a stored token that no request can carry turned every later
    // command into a failure instead of a request to log in again.
    let sendable = !raw.access_token.trim().is_empty()
        && raw.access_token.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        && raw.access_token.trim() == raw.access_token;
    if !sendable {
        return Err(FlowError::UnusableToken { url: endpoint.to_string() });
    }
    Ok(TokenResponse {
        access_token: Secret::new(raw.access_token),
        token_type,
        expires_in: expires_in(raw.expires_in),
        refresh_token: raw.refresh_token.map(Secret::new),
        scope: raw.scope,
    })
}

/// Exchanges an authorization code (RFC 6749 §4.1.3) with the PKCE verifier and `resource`.
pub async fn exchange_code(
    client: &reqwest::Client,
    discovered: &Discovered,
    registration: &ClientRegistration,
    code: &str,
    redirect_uri: &str,
    pkce: &Pkce,
    resource: &str,
) -> Result<TokenResponse, FlowError> {
    let params = vec![
        ("grant_type", "authorization_code"),
        ("code", code),
        ("redirect_uri", redirect_uri),
        ("code_verifier", pkce.verifier()),
        ("resource", resource),
    ];
    token_request(client, discovered, registration, params).await
}

/// Refreshes an access token (RFC 6749 §6) for `resource`. The response may omit
/// `refresh_token`; the caller then keeps the one it has.
pub async fn refresh(
    client: &reqwest::Client,
    discovered: &Discovered,
    registration: &ClientRegistration,
    refresh_token: &str,
    resource: &str,
) -> Result<TokenResponse, FlowError> {
    let params = vec![("grant_type", "refresh_token"), ("refresh_token", refresh_token), ("resource", resource)];
    token_request(client, discovered, registration, params).await
}

/// Requests a token with the client credentials grant (RFC 6749 §4.4) for `resource`, with
/// `scope` when given.
pub async fn client_credentials(
    client: &reqwest::Client,
    discovered: &Discovered,
    registration: &ClientRegistration,
    scopes: Option<&str>,
    resource: &str,
) -> Result<TokenResponse, FlowError> {
    let mut params = vec![("grant_type", "client_credentials")];
    if let Some(s) = scopes.filter(|s| !s.is_empty()) {
        params.push(("scope", s));
    }
    params.push(("resource", resource));
    token_request(client, discovered, registration, params).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;

    fn parse_expires(json: &str) -> Option<u64> {
        let raw: RawTokenResponse = serde_json::from_str(json).unwrap();
        expires_in(raw.expires_in)
    }

    #[test]
    fn expires_in_forms() {
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":3600}"#), Some(3600));
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":"120"}"#), Some(120));
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":59.9}"#), Some(59));
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":-5}"#), None);
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":0}"#), None, "dead on arrival: no lifetime");
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":0.5}"#), None);
        assert_eq!(parse_expires(r#"{"access_token":"a","expires_in":"soon"}"#), None);
        assert_eq!(parse_expires(r#"{"access_token":"a"}"#), None);
    }

    #[test]
    fn to_stored_saturates_and_debug_redacts() {
        let t = TokenResponse {
            access_token: "AT-SECRET".into(),
            token_type: "Bearer".into(),
            expires_in: Some(u64::MAX),
            refresh_token: Some("RT-SECRET".into()),
            scope: None,
        };
        assert_eq!(t.to_stored(10).expires_at_ms, Some(u64::MAX));
        let dbg = format!("{t:?} {:?}", t.to_stored(0));
        assert!(!dbg.contains("AT-SECRET") && !dbg.contains("RT-SECRET"), "{dbg}");
    }

    #[test]
    fn metadata_ignores_unknown_fields() {
        let m: AuthorizationServerMetadata =
            serde_json::from_str(r#"{"issuer":"https://a","token_endpoint":"https://a/t","x":{"y":[1]}}"#).unwrap();
        assert_eq!(m.token_endpoint.as_deref(), Some("https://a/t"));
        let p: ProtectedResourceMetadata = serde_json::from_str(r#"{"resource":"https://r","z":null}"#).unwrap();
        assert!(p.authorization_servers.is_empty());
    }

    #[test]
    fn only_https_or_loopback_endpoints_are_accepted() {
        for ok in [
            "https://as.example/token",
            "http://127.0.0.1:9/t",
            "http://localhost/t",
            "http://[::1]:8/t",
            "http://127.9.9.9/t",
        ] {
            assert!(is_secure_endpoint(&Url::parse(ok).unwrap()), "{ok}");
        }
        for bad in ["http://as.example/token", "http://10.0.0.1/t", "http://localhost.evil.example/t", "ftp://x/y"] {
            assert!(!is_secure_endpoint(&Url::parse(bad).unwrap()), "{bad}");
        }
        let meta = Url::parse("https://as.example/.well-known/oauth-authorization-server").unwrap();
        let err = http_url(Some("http://as.example/token"), &meta, "token_endpoint").unwrap_err();
        assert!(matches!(err, FlowError::InsecureEndpoint { field: "token_endpoint", .. }), "{err}");
    }

    #[test]
    fn server_text_in_errors_is_cleaned_and_capped() {
        let body = format!(r#"{{"error":"bad\u001b[31m","error_description":"{}\u0007"}}"#, "x".repeat(5000));
        let e = oauth_error(&Url::parse("https://a/token").unwrap(), body.as_bytes()).unwrap();
        let shown = e.to_string();
        assert!(!shown.chars().any(char::is_control), "{shown:?}");
        assert!(shown.chars().count() < 400, "{}", shown.len());
        assert!(!shown.contains('\u{1b}') && shown.contains("bad[31m"), "{shown:?}");
    }

    #[test]
    fn oauth_error_display_names_code_and_description() {
        let e = oauth_error(
            &Url::parse("https://a/token").unwrap(),
            br#"{"error":"invalid_client","error_description":"bad"}"#,
        )
        .unwrap();
        assert_eq!(e.to_string(), r#"https://a/token returned OAuth error "invalid_client": bad"#);
        assert!(oauth_error(&Url::parse("https://a/token").unwrap(), b"<html>").is_none());
    }
}
