//! Machine-to-machine OAuth grants, for clients that act without a user at a browser:
//!
//! - [`Es256Key`] and [`client_assertion`]: an ES256-signed JWT that authenticates a client at
//!   the token endpoint (`private_key_jwt`, RFC 7523 §2.2), so no shared secret is needed.
//! - [`client_credentials_jwt`]: the client credentials grant (RFC 6749 §4.4) authenticated by
//!   such an assertion.
//! - [`request_id_jag`] and [`jwt_bearer_grant`]: cross-app access (MCP SEP-990,
//!   "Enterprise-Managed Authorization"). The enterprise identity provider exchanges a user's
//!   ID token for an Identity Assertion JWT Authorization Grant (ID-JAG, RFC 8693 token
//!   exchange), which the MCP authorization server then exchanges for an access token
//!   (RFC 7523 JWT bearer grant).
//!
//! Like [`crate::flow`], every response body is bounded and no clock is read: the caller passes
//! `now_unix`. Private keys never appear in `Debug` output or error messages.

use std::fmt;

use aws_lc_rs::rand::SystemRandom;
use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, URL_SAFE_NO_PAD};
use serde::Deserialize;
use url::Url;

use crate::flow::{AUTH_NONE, ClientRegistration, Discovered, FlowError, TokenResponse, post_form, token_request};

/// `client_assertion_type` of a JWT client assertion (RFC 7523 §2.2).
pub const CLIENT_ASSERTION_TYPE_JWT_BEARER: &str = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer";
/// `grant_type` of a token exchange (RFC 8693 §2.1).
pub const GRANT_TYPE_TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";
/// `grant_type` of a JWT bearer authorization grant (RFC 7523 §2.1).
pub const GRANT_TYPE_JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// Token type of an OpenID Connect ID token (RFC 8693 §3).
pub const TOKEN_TYPE_ID_TOKEN: &str = "urn:ietf:params:oauth:token-type:id_token";
/// Token type of an Identity Assertion JWT Authorization Grant (ID-JAG).
pub const TOKEN_TYPE_ID_JAG: &str = "urn:ietf:params:oauth:token-type:id-jag";
/// How long a client assertion from [`client_assertion`] is valid, in seconds. Short, because
/// an assertion is used once, right after it is made.
pub const CLIENT_ASSERTION_LIFETIME_SECS: u64 = 300;

const PEM_BEGIN: &str = "-----BEGIN PRIVATE KEY-----";
const PEM_END: &str = "-----END PRIVATE KEY-----";
/// The JOSE header of every JWT signed here.
const JWT_HEADER: &str = r#"{"alg":"ES256","typ":"JWT"}"#;

/// PEM bodies with or without `=` padding.
const PEM_BASE64: GeneralPurpose = GeneralPurpose::new(
    &alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// A P-256 private key that signs JWTs with ES256 (RFC 7518 §3.4), for `private_key_jwt`
/// client authentication. `Debug` shows nothing of the key.
pub struct Es256Key {
    pair: EcdsaKeyPair,
}

impl fmt::Debug for Es256Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Es256Key").field("private_key", &"<redacted>").finish()
    }
}

impl Es256Key {
    /// Reads an unencrypted PKCS#8 PEM (`-----BEGIN PRIVATE KEY-----`), the form that
    /// `openssl genpkey` and `jose.exportPKCS8` write, of a P-256 key. Text around the block
    /// is ignored. Any other input is refused with [`FlowError::InvalidKey`], never a panic.
    pub fn from_pkcs8_pem(pem: &str) -> Result<Es256Key, FlowError> {
        let der = pem_body(pem)?;
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der).map_err(|e| {
            let reason = match e.description_() {
                "WrongAlgorithm" => "the key is not an EC P-256 key (ES256 needs P-256)".to_owned(),
                other => format!("the PKCS#8 document is not a usable EC P-256 private key ({other})"),
            };
            FlowError::InvalidKey { reason }
        })?;
        Ok(Es256Key { pair })
    }

    /// Signs `claims` (a JSON object) as a compact JWS with header
    /// `{"alg":"ES256","typ":"JWT"}`: base64url without padding, the signature as the 64 bytes
    /// `r || s` that JWS requires (RFC 7518 §3.4), not DER.
    pub fn sign_jwt(&self, claims: &serde_json::Value) -> Result<String, FlowError> {
        let signing_input =
            format!("{}.{}", URL_SAFE_NO_PAD.encode(JWT_HEADER), URL_SAFE_NO_PAD.encode(claims.to_string()));
        let signature =
            self.pair.sign(&SystemRandom::new(), signing_input.as_bytes()).map_err(|_| FlowError::SigningFailed)?;
        Ok(format!("{signing_input}.{}", URL_SAFE_NO_PAD.encode(signature.as_ref())))
    }
}

/// The DER inside the first `PRIVATE KEY` PEM block of `pem`.
fn pem_body(pem: &str) -> Result<Vec<u8>, FlowError> {
    let invalid = |reason: &str| FlowError::InvalidKey { reason: reason.to_owned() };
    let Some(start) = pem.find(PEM_BEGIN) else {
        return Err(invalid(if pem.contains("-----BEGIN EC PRIVATE KEY-----") {
            "a SEC1 \"EC PRIVATE KEY\" PEM; convert it to PKCS#8 (\"BEGIN PRIVATE KEY\")"
        } else if pem.contains("-----BEGIN ENCRYPTED PRIVATE KEY-----") {
            "an encrypted PKCS#8 PEM; only unencrypted \"BEGIN PRIVATE KEY\" is read"
        } else {
            "no \"-----BEGIN PRIVATE KEY-----\" line (expected a PKCS#8 PEM)"
        }));
    };
    let rest = &pem[start + PEM_BEGIN.len()..];
    let Some(end) = rest.find(PEM_END) else {
        return Err(invalid("no \"-----END PRIVATE KEY-----\" line"));
    };
    let body: String = rest[..end].chars().filter(|c| !c.is_ascii_whitespace()).collect();
    if body.is_empty() {
        return Err(invalid("the PEM block is empty"));
    }
    PEM_BASE64.decode(body).map_err(|_| invalid("the PEM body is not base64"))
}

/// A JWT that authenticates `client_id` at an authorization server (RFC 7523 §2.2 and §3):
/// `iss` = `sub` = `client_id`, `aud` = `audience`, `iat` = `now_unix`,
/// `exp` = `now_unix` + [`CLIENT_ASSERTION_LIFETIME_SECS`], and a random `jti` (16 bytes,
/// base64url) so the server can refuse a replay.
///
/// `audience` should be the authorization server's issuer identifier ([`Discovered::issuer`]),
/// which is what servers following RFC 7523bis accept.
pub fn client_assertion(key: &Es256Key, client_id: &str, audience: &str, now_unix: u64) -> Result<String, FlowError> {
    let jti = URL_SAFE_NO_PAD.encode(rand::random::<[u8; 16]>());
    let claims = serde_json::json!({
        "iss": client_id,
        "sub": client_id,
        "aud": audience,
        "iat": now_unix,
        "exp": now_unix.saturating_add(CLIENT_ASSERTION_LIFETIME_SECS),
        "jti": jti,
    });
    key.sign_jwt(&claims)
}

/// Requests a token with the client credentials grant (RFC 6749 §4.4) for `resource`, the
/// client authenticated by a [`client_assertion`] signed with `key` for the issuer in
/// `discovered` (`private_key_jwt`). The body carries `grant_type=client_credentials`,
/// `client_id`, `client_assertion_type`, `client_assertion`, `scope` when given, and
/// `resource`. The answer must be a `Bearer` token, as for [`crate::flow::client_credentials`].
pub async fn client_credentials_jwt(
    client: &reqwest::Client,
    discovered: &Discovered,
    client_id: &str,
    key: &Es256Key,
    scopes: Option<&str>,
    resource: &str,
    now_unix: u64,
) -> Result<TokenResponse, FlowError> {
    let assertion = client_assertion(key, client_id, &discovered.issuer, now_unix)?;
    let mut params = vec![
        ("grant_type", "client_credentials"),
        ("client_assertion_type", CLIENT_ASSERTION_TYPE_JWT_BEARER),
        ("client_assertion", assertion.as_str()),
    ];
    if let Some(s) = scopes.filter(|s| !s.is_empty()) {
        params.push(("scope", s));
    }
    params.push(("resource", resource));
    // On the wire, private_key_jwt is a public client (client_id in the body, no secret) whose
    // body also carries the assertion.
    let registration = ClientRegistration {
        client_id: client_id.to_owned(),
        client_secret: None,
        token_endpoint_auth_method: AUTH_NONE.to_owned(),
    };
    token_request(client, discovered, &registration, params).await
}

#[derive(Deserialize)]
struct TokenExchangeResponse {
    access_token: String,
    #[serde(default)]
    issued_token_type: Option<String>,
}

/// Exchanges a user's ID token for an ID-JAG at the enterprise identity provider (RFC 8693
/// token exchange, SEP-990 step one). The ID-JAG lets the MCP authorization server named by
/// `audience` (its issuer) grant access to `resource` (the MCP server's canonical URI) without
/// the user signing in there.
///
/// The body carries `grant_type`, `requested_token_type` (ID-JAG), `subject_token`,
/// `subject_token_type` (ID token), `audience`, `resource`, `scope` when given, and
/// `client_id`; with `idp_client_secret` the client also authenticates with HTTP Basic
/// (`client_secret_basic`). The answer's `token_type` is `N_A` by RFC 8693 and is not checked;
/// an `issued_token_type` other than ID-JAG is refused. Returns the ID-JAG.
#[allow(clippy::too_many_arguments)]
pub async fn request_id_jag(
    client: &reqwest::Client,
    idp_token_endpoint: &Url,
    idp_client_id: &str,
    idp_client_secret: Option<&str>,
    id_token: &str,
    audience: &str,
    resource: &str,
    scopes: Option<&str>,
) -> Result<String, FlowError> {
    let mut params = vec![
        ("grant_type", GRANT_TYPE_TOKEN_EXCHANGE),
        ("requested_token_type", TOKEN_TYPE_ID_JAG),
        ("subject_token", id_token),
        ("subject_token_type", TOKEN_TYPE_ID_TOKEN),
        ("audience", audience),
        ("resource", resource),
    ];
    if let Some(s) = scopes.filter(|s| !s.is_empty()) {
        params.push(("scope", s));
    }
    params.push(("client_id", idp_client_id));
    let basic = idp_client_secret.map(|secret| (idp_client_id, secret));
    let body = post_form(client, idp_token_endpoint, params, basic).await?;
    let answer: TokenExchangeResponse = serde_json::from_slice(&body)
        .map_err(|source| FlowError::InvalidJson { url: idp_token_endpoint.to_string(), source })?;
    if let Some(issued) = answer.issued_token_type
        && issued != TOKEN_TYPE_ID_JAG
    {
        return Err(FlowError::UnexpectedIssuedTokenType {
            endpoint: idp_token_endpoint.to_string(),
            expected: TOKEN_TYPE_ID_JAG.to_owned(),
            found: issued,
        });
    }
    Ok(answer.access_token)
}

/// Exchanges an assertion, such as an ID-JAG from [`request_id_jag`], for an access token at
/// the MCP authorization server (RFC 7523 §2.1 JWT bearer grant, SEP-990 step two), for
/// `resource`, with `scope` when given. The client authenticates as its registration says
/// (cross-app access expects `client_secret_basic`); the answer must be a `Bearer` token.
pub async fn jwt_bearer_grant(
    client: &reqwest::Client,
    discovered: &Discovered,
    registration: &ClientRegistration,
    assertion: &str,
    scopes: Option<&str>,
    resource: &str,
) -> Result<TokenResponse, FlowError> {
    let mut params = vec![("grant_type", GRANT_TYPE_JWT_BEARER), ("assertion", assertion)];
    if let Some(s) = scopes.filter(|s| !s.is_empty()) {
        params.push(("scope", s));
    }
    params.push(("resource", resource));
    token_request(client, discovered, registration, params).await
}
