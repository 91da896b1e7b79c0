//! The machine-to-machine grants: ES256 keys from PEM, client assertions checked with the public
//! key, and the form bodies of client credentials with `private_key_jwt`, the token exchange for
//! an ID-JAG and the JWT bearer grant, against a fake token endpoint on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
use common::Server;

use std::collections::HashMap;

use aws_lc_rs::signature::{
    ECDSA_P256_SHA256_FIXED, ECDSA_P256_SHA256_FIXED_SIGNING, ECDSA_P384_SHA384_FIXED_SIGNING, EcdsaKeyPair,
    KeyPair as _, UnparsedPublicKey,
};
use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use mcp_auth::flow::{AUTH_CLIENT_SECRET_BASIC, ClientRegistration, Discovered, FlowError};
use mcp_auth::grants::{
    self, CLIENT_ASSERTION_TYPE_JWT_BEARER, Es256Key, GRANT_TYPE_JWT_BEARER, GRANT_TYPE_TOKEN_EXCHANGE,
    TOKEN_TYPE_ID_JAG, TOKEN_TYPE_ID_TOKEN,
};
use proptest::prelude::*;
use serde_json::{Value, json};

/// A throwaway P-256 test key, exported as PKCS#8 PEM by Node's WebCrypto (what
/// `jose.exportPKCS8` writes for the harness), and its public key as an uncompressed point.
const NODE_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgO5UNmOvyBaVShlfR
QEXei2N1h3d4VMp/pBVxDUGzNv2hRANCAAQ3PjvNb1I07ySqa7i3lFAnZD84UEG9
cKvPY3DdHT9YU+m0GMeVUiJ67AFwp/W0jKx8u9P7tKPsUXOB+9CMqHyG
-----END PRIVATE KEY-----
";
const NODE_PUBLIC_HEX: &str = "04373e3bcd6f5234ef24aa6bb8b7945027643f385041bd70abcf6370dd1d3f5853e9b418c79552227aec0170a7f5b48cac7cbbd3fbb4a3ec517381fbd08ca87c86";

const NOW: u64 = 1_750_000_000;

fn pem(der: &[u8]) -> String {
    let b64 = STANDARD.encode(der);
    let lines: Vec<&str> = b64.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"))
}

/// A fresh P-256 key: its PKCS#8 PEM and its public key (uncompressed point).
fn generated_key() -> (String, Vec<u8>) {
    let pair = EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING).unwrap();
    (pem(pair.to_pkcs8v1().unwrap().as_ref()), pair.public_key().as_ref().to_vec())
}

fn unhex(s: &str) -> Vec<u8> {
    (0..s.len()).step_by(2).map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap()).collect()
}

/// Decodes a compact JWS, verifies its ES256 signature with `public_key`, and returns the header
/// and the claims.
fn verify_jwt(jwt: &str, public_key: &[u8]) -> (Value, Value) {
    let parts: Vec<&str> = jwt.split('.').collect();
    assert_eq!(parts.len(), 3, "{jwt}");
    let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    assert_eq!(signature.len(), 64, "r || s, not DER");
    let signing_input = format!("{}.{}", parts[0], parts[1]);
    UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, public_key)
        .verify(signing_input.as_bytes(), &signature)
        .expect("signature verifies with the public key");
    let header = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[0]).unwrap()).unwrap();
    let claims = serde_json::from_slice(&URL_SAFE_NO_PAD.decode(parts[1]).unwrap()).unwrap();
    (header, claims)
}

fn check_assertion(jwt: &str, public_key: &[u8], client_id: &str, audience: &str) {
    let (header, claims) = verify_jwt(jwt, public_key);
    assert_eq!(header, json!({"alg": "ES256", "typ": "JWT"}));
    let jti = claims["jti"].as_str().unwrap().to_owned();
    assert_eq!(URL_SAFE_NO_PAD.decode(&jti).unwrap().len(), 16);
    assert_eq!(
        claims,
        json!({"iss": client_id, "sub": client_id, "aud": audience, "iat": NOW, "exp": NOW + 300, "jti": jti})
    );
}

#[test]
fn client_assertion_verifies_with_the_generated_public_key() {
    let (pem, public_key) = generated_key();
    let key = Es256Key::from_pkcs8_pem(&pem).unwrap();
    let a = grants::client_assertion(&key, "my-client", "https://as.example.com", NOW).unwrap();
    check_assertion(&a, &public_key, "my-client", "https://as.example.com");
    let b = grants::client_assertion(&key, "my-client", "https://as.example.com", NOW).unwrap();
    let jti = |jwt: &str| verify_jwt(jwt, &public_key).1["jti"].clone();
    assert_ne!(jti(&a), jti(&b), "a fresh jti per assertion");

    // A changed payload no longer verifies.
    let parts: Vec<&str> = a.split('.').collect();
    let forged = URL_SAFE_NO_PAD.encode(br#"{"iss":"other","sub":"other","aud":"https://as.example.com"}"#);
    let signature = URL_SAFE_NO_PAD.decode(parts[2]).unwrap();
    assert!(
        UnparsedPublicKey::new(&ECDSA_P256_SHA256_FIXED, &public_key)
            .verify(format!("{}.{forged}", parts[0]).as_bytes(), &signature)
            .is_err()
    );
}

#[test]
fn node_webcrypto_pkcs8_pem_is_read_and_signs_for_its_public_key() {
    let key = Es256Key::from_pkcs8_pem(NODE_PEM).unwrap();
    let jwt = grants::client_assertion(&key, "conformance-test-client", "http://localhost:3000", NOW).unwrap();
    check_assertion(&jwt, &unhex(NODE_PUBLIC_HEX), "conformance-test-client", "http://localhost:3000");

    // CRLF line ends, no final newline, text around the block: still the same key.
    let crlf = format!("a comment\r\n{}\r\ntrailing", NODE_PEM.trim_end().replace('\n', "\r\n"));
    let key = Es256Key::from_pkcs8_pem(&crlf).unwrap();
    let jwt = key.sign_jwt(&json!({"x": 1})).unwrap();
    assert_eq!(verify_jwt(&jwt, &unhex(NODE_PUBLIC_HEX)).1, json!({"x": 1}));
}

#[test]
fn debug_redacts_the_key() {
    let key = Es256Key::from_pkcs8_pem(NODE_PEM).unwrap();
    assert_eq!(format!("{key:?}"), r#"Es256Key { private_key: "<redacted>" }"#);
}

fn key_error(pem: &str) -> String {
    match Es256Key::from_pkcs8_pem(pem) {
        Err(e @ FlowError::InvalidKey { .. }) => e.to_string(),
        other => panic!("expected InvalidKey for {pem:?}, got {other:?}"),
    }
}

#[test]
fn bad_pem_is_an_error_that_says_why() {
    assert!(key_error("").contains("no \"-----BEGIN PRIVATE KEY-----\" line"));
    assert!(key_error("not a key at all").contains("no \"-----BEGIN PRIVATE KEY-----\" line"));
    assert!(key_error("-----BEGIN EC PRIVATE KEY-----\nMHcCAQEE\n-----END EC PRIVATE KEY-----\n").contains("SEC1"));
    assert!(
        key_error("-----BEGIN ENCRYPTED PRIVATE KEY-----\nMIIB\n-----END ENCRYPTED PRIVATE KEY-----")
            .contains("encrypted")
    );
    assert!(
        key_error(&NODE_PEM.replace("-----END PRIVATE KEY-----", "")).contains("no \"-----END PRIVATE KEY-----\" line")
    );
    assert!(key_error("-----BEGIN PRIVATE KEY-----\n\n-----END PRIVATE KEY-----").contains("empty"));
    assert!(key_error("-----BEGIN PRIVATE KEY-----\n!!!!\n-----END PRIVATE KEY-----").contains("not base64"));
    assert!(key_error(&pem(b"not DER")).contains("not a usable EC P-256 private key"));
    // A truncated document.
    let der = STANDARD.decode(NODE_PEM.lines().filter(|l| !l.starts_with("-----")).collect::<String>()).unwrap();
    assert!(key_error(&pem(&der[..der.len() - 10])).contains("not a usable EC P-256 private key"));
    // A P-384 key is a valid PKCS#8 EC key, but not one ES256 can use.
    let p384 = EcdsaKeyPair::generate(&ECDSA_P384_SHA384_FIXED_SIGNING).unwrap();
    let msg = key_error(&pem(p384.to_pkcs8v1().unwrap().as_ref()));
    assert_eq!(msg, "invalid private key: the key is not an EC P-256 key (ES256 needs P-256)");
}

proptest! {
    #[test]
    fn any_text_is_read_or_refused_without_panic(s in ".{0,300}") {
        let _ = Es256Key::from_pkcs8_pem(&s);
    }

    #[test]
    fn any_bytes_in_a_pem_block_are_read_or_refused_without_panic(der in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = Es256Key::from_pkcs8_pem(&pem(&der));
    }
}

impl Server {
    /// What discovery would find: this server as the authorization server (issuer = base URL).
    fn discovered(&self) -> Discovered {
        Discovered {
            resource: format!("{}/mcp", self.base),
            resource_metadata: None,
            authorization_server_metadata: None,
            issuer: self.base.clone(),
            authorization_endpoint: self.url("/authorize"),
            token_endpoint: self.url("/token"),
            registration_endpoint: None,
            scopes_supported: None,
            resource_scopes_supported: None,
            token_endpoint_auth_methods_supported: Some(vec!["private_key_jwt".into()]),
            code_challenge_methods_supported: None,
            client_id_metadata_document_supported: None,
        }
    }
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

fn form(pairs: &[(&str, &str)]) -> HashMap<String, String> {
    pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

#[tokio::test]
async fn client_credentials_jwt_sends_a_verifiable_assertion() {
    let s = Server::start().await;
    s.json(
        "/token",
        200,
        &json!({"access_token": "cc-token", "token_type": "Bearer", "expires_in": 3600, "scope": "mcp:tools"}),
    );
    let (pem, public_key) = generated_key();
    let key = Es256Key::from_pkcs8_pem(&pem).unwrap();
    let d = s.discovered();

    let token = grants::client_credentials_jwt(&client(), &d, "cc-client", &key, Some("mcp:tools"), &d.resource, NOW)
        .await
        .unwrap();
    assert_eq!(token.access_token, "cc-token");
    assert_eq!(token.expires_in, Some(3600));
    assert_eq!(token.scope.as_deref(), Some("mcp:tools"));

    let seen = s.last();
    assert_eq!(seen.path, "/token");
    assert_eq!(seen.authorization, None, "no secret, no Basic");
    assert_eq!(seen.content_type.as_deref(), Some("application/x-www-form-urlencoded"));
    let mut got = seen.form();
    let assertion = got.remove("client_assertion").unwrap();
    check_assertion(&assertion, &public_key, "cc-client", &s.base);
    assert_eq!(
        got,
        form(&[
            ("grant_type", "client_credentials"),
            ("client_id", "cc-client"),
            ("client_assertion_type", CLIENT_ASSERTION_TYPE_JWT_BEARER),
            ("scope", "mcp:tools"),
            ("resource", &d.resource),
        ])
    );

    // Without scopes, no scope parameter.
    grants::client_credentials_jwt(&client(), &d, "cc-client", &key, None, &d.resource, NOW).await.unwrap();
    assert!(!s.last().form().contains_key("scope"));
}

#[tokio::test]
async fn client_credentials_jwt_refusal_is_an_oauth_error() {
    let s = Server::start().await;
    s.json("/token", 401, &json!({"error": "invalid_client", "error_description": "JWT verification failed"}));
    let key = Es256Key::from_pkcs8_pem(NODE_PEM).unwrap();
    let d = s.discovered();
    let err =
        grants::client_credentials_jwt(&client(), &d, "cc-client", &key, None, &d.resource, NOW).await.unwrap_err();
    assert!(
        matches!(&err, FlowError::OAuth { error, description, .. }
            if error == "invalid_client" && description.as_deref() == Some("JWT verification failed")),
        "{err:?}"
    );
}

#[tokio::test]
async fn token_exchange_asks_the_idp_for_an_id_jag() {
    let idp = Server::start().await;
    idp.json(
        "/token",
        200,
        &json!({"access_token": "the.id.jag", "issued_token_type": TOKEN_TYPE_ID_JAG, "token_type": "N_A"}),
    );
    let endpoint = idp.url("/token");

    // With a secret: Basic with the form-encoded id and secret, client_id in the body too.
    let jag = grants::request_id_jag(
        &client(),
        &endpoint,
        "idp client",
        Some("s3cr:t"),
        "the.id.token",
        "https://as.example.com",
        "https://mcp.example.com/mcp",
        Some("mcp:read mcp:write"),
    )
    .await
    .unwrap();
    assert_eq!(jag, "the.id.jag");
    let seen = idp.last();
    assert_eq!(seen.authorization, Some(format!("Basic {}", STANDARD.encode("idp+client:s3cr%3At"))));
    assert_eq!(seen.content_type.as_deref(), Some("application/x-www-form-urlencoded"));
    assert_eq!(
        seen.form(),
        form(&[
            ("grant_type", GRANT_TYPE_TOKEN_EXCHANGE),
            ("requested_token_type", TOKEN_TYPE_ID_JAG),
            ("subject_token", "the.id.token"),
            ("subject_token_type", TOKEN_TYPE_ID_TOKEN),
            ("audience", "https://as.example.com"),
            ("resource", "https://mcp.example.com/mcp"),
            ("scope", "mcp:read mcp:write"),
            ("client_id", "idp client"),
        ])
    );

    // Without a secret and scopes, and an answer without issued_token_type.
    idp.json("/token", 200, &json!({"access_token": "jag-2", "token_type": "N_A"}));
    let jag =
        grants::request_id_jag(&client(), &endpoint, "idp-client", None, "tok", "aud", "res", None).await.unwrap();
    assert_eq!(jag, "jag-2");
    let seen = idp.last();
    assert_eq!(seen.authorization, None);
    let got = seen.form();
    assert_eq!(got.get("client_id").map(String::as_str), Some("idp-client"));
    assert!(!got.contains_key("scope"));
}

#[tokio::test]
async fn token_exchange_refusals() {
    let idp = Server::start().await;
    let endpoint = idp.url("/token");
    let http = client();
    let exchange = || grants::request_id_jag(&http, &endpoint, "idp", None, "tok", "aud", "res", None);

    idp.json("/token", 400, &json!({"error": "invalid_grant", "error_description": "Invalid ID token"}));
    let err = exchange().await.unwrap_err();
    assert!(
        matches!(&err, FlowError::OAuth { error, description, .. }
            if error == "invalid_grant" && description.as_deref() == Some("Invalid ID token")),
        "{err:?}"
    );
    assert_eq!(err.to_string(), format!(r#"{endpoint} returned OAuth error "invalid_grant": Invalid ID token"#));

    idp.json(
        "/token",
        200,
        &json!({"access_token": "at", "issued_token_type": "urn:ietf:params:oauth:token-type:access_token"}),
    );
    let err = exchange().await.unwrap_err();
    assert!(
        matches!(&err, FlowError::UnexpectedIssuedTokenType { expected, found, .. }
            if expected == TOKEN_TYPE_ID_JAG && found == "urn:ietf:params:oauth:token-type:access_token"),
        "{err:?}"
    );

    idp.json("/token", 503, &json!("busy"));
    assert!(matches!(exchange().await.unwrap_err(), FlowError::Status { status: 503, .. }));

    idp.json("/token", 200, &json!({"token_type": "N_A"}));
    assert!(matches!(exchange().await.unwrap_err(), FlowError::InvalidJson { .. }));
}

#[tokio::test]
async fn jwt_bearer_grant_presents_the_id_jag_with_client_secret_basic() {
    let s = Server::start().await;
    s.json("/token", 200, &json!({"access_token": "mcp-token", "token_type": "Bearer", "expires_in": 60}));
    let d = s.discovered();
    let registration = ClientRegistration {
        client_id: "xaa client".into(),
        client_secret: Some("xaa/secret".into()),
        token_endpoint_auth_method: AUTH_CLIENT_SECRET_BASIC.into(),
    };

    let token = grants::jwt_bearer_grant(&client(), &d, &registration, "the.id.jag", Some("mcp:tools"), &d.resource)
        .await
        .unwrap();
    assert_eq!(token.access_token, "mcp-token");
    assert_eq!(token.expires_in, Some(60));

    let seen = s.last();
    assert_eq!(seen.authorization, Some(format!("Basic {}", STANDARD.encode("xaa+client:xaa%2Fsecret"))));
    assert_eq!(
        seen.form(),
        form(&[
            ("grant_type", GRANT_TYPE_JWT_BEARER),
            ("assertion", "the.id.jag"),
            ("scope", "mcp:tools"),
            ("resource", &d.resource),
        ])
    );

    // The access token must be a Bearer token, unlike the ID-JAG.
    s.json("/token", 200, &json!({"access_token": "x", "token_type": "N_A"}));
    let err =
        grants::jwt_bearer_grant(&client(), &d, &registration, "the.id.jag", None, &d.resource).await.unwrap_err();
    assert!(matches!(err, FlowError::NotBearer { .. }), "{err:?}");
}
